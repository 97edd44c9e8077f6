"""``torch.cuda.amp``: the deprecated CUDA spellings of ``torch.amp``. Without CUDA they warn
and disable themselves as torch's do, so GPU training scripts run unchanged on the CPU."""

from __future__ import annotations

import functools
import warnings
from typing import Any, Callable, Optional

from ..amp import autocast_mode as _autocast_mode
from ..amp._deprecated import DeprecatedAutocast, DeprecatedGradScaler

__all__ = ["GradScaler", "autocast", "custom_bwd", "custom_fwd"]


class autocast(DeprecatedAutocast):
    """``torch.cuda.amp.autocast``: ``autocast("cuda", ...)``, disabled without CUDA."""

    _device = "cuda"
    _default_dtype = "float16"


class GradScaler(DeprecatedGradScaler):
    """``torch.cuda.amp.GradScaler``: ``GradScaler("cuda", ...)``, disabled without CUDA."""

    _device = "cuda"


def custom_fwd(fwd: Optional[Callable[..., Any]] = None, *, cast_inputs: Any = None) -> Any:
    """``torch.cuda.amp.custom_fwd``: ``torch.amp.custom_fwd(device_type="cuda")``."""
    warnings.warn(
        "`torch.cuda.amp.custom_fwd(args...)` is deprecated. Please use "
        "`torch.amp.custom_fwd(args..., device_type='cuda')` instead.",
        FutureWarning,
        stacklevel=2,
    )
    if fwd is None:
        return functools.partial(
            _autocast_mode.custom_fwd, device_type="cuda", cast_inputs=cast_inputs
        )
    return _autocast_mode.custom_fwd(fwd, device_type="cuda", cast_inputs=cast_inputs)


def custom_bwd(bwd: Callable[..., Any]) -> Any:
    """``torch.cuda.amp.custom_bwd``: ``torch.amp.custom_bwd(device_type="cuda")``."""
    warnings.warn(
        "`torch.cuda.amp.custom_bwd(args...)` is deprecated. Please use "
        "`torch.amp.custom_bwd(args..., device_type='cuda')` instead.",
        FutureWarning,
        stacklevel=2,
    )
    return _autocast_mode.custom_bwd(bwd, device_type="cuda")
