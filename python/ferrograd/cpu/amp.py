"""``torch.cpu.amp``: the deprecated CPU spellings of ``torch.amp``."""

from __future__ import annotations

from ..amp._deprecated import DeprecatedAutocast, DeprecatedGradScaler

__all__ = ["GradScaler", "autocast"]


class autocast(DeprecatedAutocast):
    """``torch.cpu.amp.autocast``: ``autocast("cpu", ...)``, bfloat16 by default."""

    _device = "cpu"
    _default_dtype = "bfloat16"


class GradScaler(DeprecatedGradScaler):
    """``torch.cpu.amp.GradScaler``: ``GradScaler("cpu", ...)``."""

    _device = "cpu"
