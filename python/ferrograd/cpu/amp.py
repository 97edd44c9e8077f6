"""``torch.cpu.amp``: the deprecated CPU spellings of ``torch.amp``."""

from __future__ import annotations

import warnings
from typing import Any

from .. import _C
from ..amp import autocast_mode as _autocast_mode
from ..amp.grad_scaler import GradScaler as _GradScaler

__all__ = ["GradScaler", "autocast"]


class autocast(_autocast_mode.autocast):
    """``torch.cpu.amp.autocast``: ``autocast("cpu", ...)``."""

    def __init__(self, enabled: bool = True, dtype: Any = None, cache_enabled: bool = True) -> None:
        warnings.warn(
            "`torch.cpu.amp.autocast(args...)` is deprecated. Please use "
            "`torch.amp.autocast('cpu', args...)` instead.",
            FutureWarning,
            stacklevel=2,
        )
        super().__init__(
            "cpu",
            enabled=enabled,
            dtype=_C.bfloat16 if dtype is None else dtype,
            cache_enabled=cache_enabled,
        )


class GradScaler(_GradScaler):
    """``torch.cpu.amp.GradScaler``: ``GradScaler("cpu", ...)``."""

    def __init__(
        self,
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
    ) -> None:
        warnings.warn(
            "`torch.cpu.amp.GradScaler(args...)` is deprecated. Please use "
            "`torch.amp.GradScaler('cpu', args...)` instead.",
            FutureWarning,
            stacklevel=2,
        )
        super().__init__("cpu", init_scale, growth_factor, backoff_factor, growth_interval, enabled)
