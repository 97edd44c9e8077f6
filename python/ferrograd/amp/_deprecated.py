"""The deprecated per-device spellings ``torch.cuda.amp`` / ``torch.cpu.amp`` share these: each
warns with torch's FutureWarning naming its device, then is ``amp``'s class for that device."""

from __future__ import annotations

import warnings
from typing import Any, ClassVar

from .. import _C
from .autocast_mode import autocast
from .grad_scaler import GradScaler


class DeprecatedAutocast(autocast):
    """``torch.<device>.amp.autocast``: ``autocast(<device>, ...)``."""

    _device: ClassVar[str]
    _default_dtype: ClassVar[str]

    def __init__(self, enabled: bool = True, dtype: Any = None, cache_enabled: bool = True) -> None:
        warnings.warn(
            f"`torch.{self._device}.amp.autocast(args...)` is deprecated. Please use "
            f"`torch.amp.autocast('{self._device}', args...)` instead.",
            FutureWarning,
            stacklevel=2,
        )
        super().__init__(
            self._device,
            enabled=enabled,
            dtype=getattr(_C, self._default_dtype) if dtype is None else dtype,
            cache_enabled=cache_enabled,
        )


class DeprecatedGradScaler(GradScaler):
    """``torch.<device>.amp.GradScaler``: ``GradScaler(<device>, ...)``."""

    _device: ClassVar[str]

    def __init__(
        self,
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
    ) -> None:
        warnings.warn(
            f"`torch.{self._device}.amp.GradScaler(args...)` is deprecated. Please use "
            f"`torch.amp.GradScaler('{self._device}', args...)` instead.",
            FutureWarning,
            stacklevel=2,
        )
        super().__init__(
            self._device, init_scale, growth_factor, backoff_factor, growth_interval, enabled
        )
