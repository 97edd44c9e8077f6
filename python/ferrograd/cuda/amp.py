"""``torch.cuda.amp``: the deprecated CUDA spellings of ``torch.amp``. Without CUDA they warn
and disable themselves as torch's do, so GPU training scripts run unchanged on the CPU."""

from __future__ import annotations

import functools
import warnings
from typing import Any, Callable, Optional

from .. import _C
from ..amp import autocast_mode as _autocast_mode
from ..amp.grad_scaler import GradScaler as _GradScaler

__all__ = ["GradScaler", "autocast", "custom_bwd", "custom_fwd"]


class autocast(_autocast_mode.autocast):
    """``torch.cuda.amp.autocast``: ``autocast("cuda", ...)``, disabled without CUDA."""

    def __init__(self, enabled: bool = True, dtype: Any = None, cache_enabled: bool = True) -> None:
        warnings.warn(
            "`torch.cuda.amp.autocast(args...)` is deprecated. Please use "
            "`torch.amp.autocast('cuda', args...)` instead.",
            FutureWarning,
            stacklevel=2,
        )
        super().__init__(
            "cuda",
            enabled=enabled,
            dtype=_C.float16 if dtype is None else dtype,
            cache_enabled=cache_enabled,
        )


class GradScaler(_GradScaler):
    """``torch.cuda.amp.GradScaler``: ``GradScaler("cuda", ...)``, disabled without CUDA."""

    def __init__(
        self,
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
    ) -> None:
        warnings.warn(
            "`torch.cuda.amp.GradScaler(args...)` is deprecated. Please use "
            "`torch.amp.GradScaler('cuda', args...)` instead.",
            FutureWarning,
            stacklevel=2,
        )
        super().__init__(
            "cuda", init_scale, growth_factor, backoff_factor, growth_interval, enabled
        )


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
