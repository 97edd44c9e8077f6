"""``torch.amp.autocast`` and the autocast state functions.

CPU autocast is real: inside an enabled region, the ops torch lists as safe in lower precision
run in bfloat16 (or float16) and the ones it lists as needing range run in float32 (see
``ferrograd._autocast_policy``), and the state lives in the crate, per thread, as torch's.
``device_type="cuda"`` regions are disabled with torch's warning, as torch disables them on a
machine without CUDA, so scripts written for GPUs run unchanged on the CPU.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any, Callable, Dict, Optional, TypeVar

from .. import _C

_F = TypeVar("_F", bound=Callable[..., Any])

# Devices torch's dispatcher has autocast keys for; only "cpu" runs here, "cuda" (and the
# others) are disabled with a warning, as torch does where the device is missing.
_AVAILABLE = ("cpu", "cuda", "xpu", "mps", "hpu", "xla", "ipu", "mtia", "maia")
# The autocast state of the devices ferrograd does not run on (always disabled).
_OTHER_ENABLED: Dict[str, bool] = {}
_OTHER_DTYPE: Dict[str, Any] = {}


def is_autocast_available(device_type: str) -> bool:
    """Whether ``device_type`` has autocast (torch's list of device types)."""
    return device_type in _AVAILABLE


def _check_device(device_type: str) -> None:
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if not is_autocast_available(device_type):
        raise RuntimeError(f"User specified an unsupported autocast device_type '{device_type}'")


def is_autocast_enabled(device_type: Optional[str] = None) -> bool:
    """Whether autocast is on for ``device_type`` (without one: CUDA's, as torch's legacy
    signature; always False here)."""
    if device_type is None:
        device_type = "cuda"
    _check_device(device_type)
    if device_type == "cpu":
        return _C._is_autocast_enabled()
    return _OTHER_ENABLED.get(device_type, False)


def set_autocast_enabled(device_type: Any, enabled: Optional[bool] = None) -> None:
    """Turn autocast on or off for ``device_type`` (the one-argument form sets CUDA's)."""
    if enabled is None:
        device_type, enabled = "cuda", device_type
    _check_device(device_type)
    if device_type == "cpu":
        _C._set_autocast_enabled(bool(enabled))
    else:
        _OTHER_ENABLED[device_type] = bool(enabled)


def get_autocast_dtype(device_type: str) -> Any:
    """The lower-precision dtype of ``device_type``'s autocast (bfloat16 on the CPU, float16
    elsewhere, unless set)."""
    _check_device(device_type)
    if device_type == "cpu":
        return _C._get_autocast_dtype()
    return _OTHER_DTYPE.get(device_type, _C.float16)


def set_autocast_dtype(device_type: str, dtype: Any) -> None:
    """Set the lower-precision dtype of ``device_type``'s autocast."""
    _check_device(device_type)
    if device_type == "cpu":
        _C._set_autocast_dtype(dtype)
    else:
        _OTHER_DTYPE[device_type] = dtype


def is_autocast_cpu_enabled() -> bool:
    """Whether CPU autocast is on (torch's older spelling)."""
    return _C._is_autocast_enabled()


def set_autocast_cpu_enabled(enabled: bool) -> None:
    """Turn CPU autocast on or off (torch's older spelling)."""
    _C._set_autocast_enabled(bool(enabled))


def get_autocast_cpu_dtype() -> Any:
    """CPU autocast's lower-precision dtype (torch's older spelling)."""
    return _C._get_autocast_dtype()


def set_autocast_cpu_dtype(dtype: Any) -> None:
    """Set CPU autocast's lower-precision dtype (torch's older spelling)."""
    _C._set_autocast_dtype(dtype)


def get_autocast_gpu_dtype() -> Any:
    """CUDA autocast's dtype (torch's older spelling)."""
    return get_autocast_dtype("cuda")


def is_autocast_cache_enabled() -> bool:
    """Whether weights' casts are cached within an autocast region."""
    return _C._is_autocast_cache_enabled()


def set_autocast_cache_enabled(enabled: bool) -> None:
    """Turn the cache of weights' casts on or off."""
    _C._set_autocast_cache_enabled(bool(enabled))


def autocast_increment_nesting() -> int:
    """Enter one autocast level; returns the depth."""
    return int(_C._autocast_increment_nesting())


def autocast_decrement_nesting() -> int:
    """Leave one autocast level; returns the depth left."""
    return int(_C._autocast_decrement_nesting())


def clear_autocast_cache() -> None:
    """Drop the cached casts of weights."""
    _C._clear_autocast_cache()


class autocast:
    """Run the ops in a region in mixed precision (torch.amp.autocast): a context manager or a
    decorator. On ``"cpu"``, lower-precision ops run in ``dtype`` (bfloat16 by default, or
    float16); ``"cuda"`` is disabled with torch's warning, as on a machine without CUDA."""

    def __init__(
        self,
        device_type: str,
        dtype: Optional[Any] = None,
        enabled: bool = True,
        cache_enabled: Optional[bool] = None,
    ) -> None:
        _check_device(device_type)
        self.device = device_type
        self.fast_dtype = get_autocast_dtype(device_type) if dtype is None else dtype
        self._cache_enabled = (
            is_autocast_cache_enabled() if cache_enabled is None else bool(cache_enabled)
        )
        if enabled and device_type == "cuda":
            warnings.warn(
                "User provided device_type of 'cuda', but CUDA is not available. Disabling",
                stacklevel=2,
            )
            enabled = False
        elif enabled and device_type != "cpu":
            warnings.warn(
                f"User provided device_type of '{device_type}', but it is not available on "
                "ferrograd (it computes on the CPU). Disabling",
                stacklevel=2,
            )
            enabled = False
        if device_type == "cpu" and enabled and self.fast_dtype not in (_C.bfloat16, _C.float16):
            warnings.warn(
                "In CPU autocast, but the target dtype is not supported. Disabling autocast.\n"
                "CPU Autocast only supports dtype of torch.bfloat16, torch.float16 currently.",
                stacklevel=2,
            )
            enabled = False
        self._enabled = bool(enabled)

    def __enter__(self) -> None:
        self.prev_cache_enabled = is_autocast_cache_enabled()
        self.prev = is_autocast_enabled(self.device)
        self.prev_fastdtype = get_autocast_dtype(self.device)
        set_autocast_enabled(self.device, self._enabled)
        if self._enabled or self.device != "cpu":
            set_autocast_dtype(self.device, self.fast_dtype)
        autocast_increment_nesting()
        set_autocast_cache_enabled(self._cache_enabled)

    def __exit__(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> bool:
        if autocast_decrement_nesting() == 0:
            clear_autocast_cache()
        set_autocast_enabled(self.device, self.prev)
        set_autocast_dtype(self.device, self.prev_fastdtype)
        set_autocast_cache_enabled(self.prev_cache_enabled)
        return False

    def __call__(self, func: _F) -> _F:
        @functools.wraps(func)
        def decorate_autocast(*args: Any, **kwargs: Any) -> Any:
            with self:
                return func(*args, **kwargs)

        return decorate_autocast  # type: ignore[return-value]


def _cast(value: Any, device_type: str, dtype: Any) -> Any:
    """``value`` with its float tensors (not float64) cast to ``dtype``, through containers."""
    if isinstance(value, _C.Tensor):
        if value.is_floating_point() and value.dtype != _C.float64:
            return value.to(dtype)
        return value
    if isinstance(value, (str, bytes)):
        return value
    if isinstance(value, dict):
        return {
            _cast(k, device_type, dtype): _cast(v, device_type, dtype) for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        cast = [_cast(v, device_type, dtype) for v in value]
        return type(value)(cast) if isinstance(value, list) else tuple(cast)
    return value


def custom_fwd(
    fwd: Optional[Callable[..., Any]] = None,
    *,
    device_type: str,
    cast_inputs: Optional[Any] = None,
) -> Any:
    """Decorator for an ``autograd.Function``'s ``forward`` (torch.amp.custom_fwd): with
    ``cast_inputs``, inside an autocast region the forward runs with autocast off on inputs cast
    to that dtype; without, it runs in the region and backward will run in the same state."""
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(*args: Any, **kwargs: Any) -> Any:
        args[0]._dtype = get_autocast_dtype(device_type)
        if cast_inputs is None:
            args[0]._fwd_used_autocast = is_autocast_enabled(device_type)
            return fwd(*args, **kwargs)
        autocast_context = is_autocast_enabled(device_type)
        args[0]._fwd_used_autocast = False
        if autocast_context:
            with autocast(device_type=device_type, enabled=False):
                return fwd(
                    *_cast(args, device_type, cast_inputs),
                    **_cast(kwargs, device_type, cast_inputs),
                )
        return fwd(*args, **kwargs)

    return decorate_fwd


def custom_bwd(bwd: Optional[Callable[..., Any]] = None, *, device_type: str) -> Any:
    """Decorator for an ``autograd.Function``'s ``backward`` (torch.amp.custom_bwd): it runs in
    the autocast state its forward ran in."""
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def decorate_bwd(*args: Any, **kwargs: Any) -> Any:
        with autocast(
            device_type=device_type,
            enabled=args[0]._fwd_used_autocast,
            dtype=args[0]._dtype,
        ):
            return bwd(*args, **kwargs)

    return decorate_bwd
