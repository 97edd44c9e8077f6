"""``ferrograd.amp``: torch.amp's mixed precision, ``autocast`` (real on the CPU, in bfloat16
or float16) and ``GradScaler``."""

from .autocast_mode import autocast, custom_bwd, custom_fwd, is_autocast_available
from .grad_scaler import GradScaler

__all__ = ["GradScaler", "autocast", "custom_bwd", "custom_fwd", "is_autocast_available"]
