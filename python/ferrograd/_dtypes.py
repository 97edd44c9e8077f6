"""dtype objects and conversion between ferrograd and NumPy dtypes."""

from __future__ import annotations

import builtins
import functools
from typing import Any, Dict

from . import _C
from ._lazy import np

float16 = _C.float16
bfloat16 = _C.bfloat16
float32 = _C.float32
float64 = _C.float64
uint8 = _C.uint8
int8 = _C.int8
int16 = _C.int16
int32 = _C.int32
int64 = _C.int64
bool = _C.bool  # noqa: A001 - torch's name
half = float16
float = float32  # noqa: A001
double = float64
short = int16
int = int32  # noqa: A001
long = int64


@functools.cache
def _to_numpy() -> Dict[Any, type]:
    return {
        float16: np.float16,
        float32: np.float32,
        float64: np.float64,
        uint8: np.uint8,
        int8: np.int8,
        int16: np.int16,
        int32: np.int32,
        int64: np.int64,
        bool: np.bool_,
    }


@functools.cache
def _from_numpy() -> Dict[Any, Any]:
    return {
        np.dtype(np.float16): float16,
        np.dtype(np.float32): float32,
        np.dtype(np.float64): float64,
        np.dtype(np.int64): int64,
        np.dtype(np.int32): int32,
        np.dtype(np.int16): int16,
        np.dtype(np.int8): int8,
        np.dtype(np.uint8): uint8,
        # torch's uint16/uint32 have almost no ops; we widen them (values are exact).
        np.dtype(np.uint16): int64,
        np.dtype(np.uint32): int64,
        np.dtype(np.bool_): bool,
    }


def to_numpy_dtype(dtype: _C.dtype) -> type:
    try:
        return _to_numpy()[dtype]
    except KeyError:
        # NumPy has no bfloat16; torch refuses the same way.
        raise TypeError(f"Got unsupported ScalarType {dtype}") from None


def from_numpy_dtype(dt: Any) -> _C.dtype:
    try:
        return _from_numpy()[np.dtype(dt)]
    except KeyError:
        raise TypeError(
            f"can't convert np.ndarray of type numpy.{np.dtype(dt).name}. The only supported types "
            "are: float64, float32, float16, int64, int32, int16, int8, uint8, and bool."
        ) from None


def check_dtype(dtype: object) -> _C.dtype:
    if not isinstance(dtype, _C.dtype):
        raise TypeError(f"dtype must be a ferrograd.dtype, not {type(dtype).__name__}")
    return dtype


class finfo:
    """torch's ``finfo``: the limits of a floating type (the default dtype when omitted)."""

    def __init__(self, type: Any = None) -> None:  # noqa: A002 - torch's parameter name
        dtype = _C.get_default_dtype() if type is None else check_dtype(type)
        if not dtype.is_floating_point:
            raise TypeError(
                "torch.finfo() requires a floating point input type. Use torch.iinfo to handle "
                "'torch.finfo'"
            )
        if dtype == bfloat16:
            # 8 exponent bits as float32, 8 significand bits (7 stored).
            self.bits, self.eps, self.resolution = 16, 2.0**-7, 0.01
            self.max = builtins.float((2 - 2.0**-7) * 2.0**127)
            self.smallest_normal = 2.0**-126
        else:
            info = np.finfo(to_numpy_dtype(dtype))
            self.bits, self.eps = info.bits, builtins.float(info.eps)
            # 10^-precision, as torch prints it (NumPy's is rounded to the type).
            self.resolution = 10.0**-info.precision
            self.max = builtins.float(info.max)
            self.smallest_normal = builtins.float(info.smallest_normal)
        self.min = -self.max
        self.tiny = self.smallest_normal
        self.dtype = str(dtype).split(".")[1]

    def __repr__(self) -> str:
        return (
            f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, "
            f"eps={self.eps:g}, smallest_normal={self.smallest_normal:g}, tiny={self.tiny:g}, "
            f"dtype={self.dtype})"
        )


class iinfo:
    """torch's ``iinfo``: the limits of an integer type."""

    def __init__(self, type: Any) -> None:  # noqa: A002 - torch's parameter name
        dtype = check_dtype(type)
        if dtype == bool:
            raise TypeError("torch.bool is not supported by torch.iinfo")
        if dtype.is_floating_point:
            raise TypeError(
                "torch.iinfo() requires an integer input type. Use torch.finfo to handle "
                "'torch.iinfo'"
            )
        info = np.iinfo(to_numpy_dtype(dtype))
        self.bits, self.min, self.max = info.bits, builtins.int(info.min), builtins.int(info.max)
        self.dtype = str(dtype).split(".")[1]

    def __repr__(self) -> str:
        return f"iinfo(min={self.min:g}, max={self.max:g}, dtype={self.dtype})"


promote_types = _C.promote_types
can_cast = _C.can_cast


def _priority_operand(x: Any) -> Any:
    """`x` as `(dtype, priority)` for the crate's result-type rule."""
    if isinstance(x, _C.Tensor):
        return (x.dtype, 2 if x.dim() else 1)
    if isinstance(x, builtins.bool):
        return (_C.bool, 0)
    if isinstance(x, builtins.int):
        return (_C.int64, 0)
    if isinstance(x, builtins.float):
        # A wrapped Python float counts as the default dtype (c10's ResultTypeState).
        return (_C.get_default_dtype(), 0)
    raise TypeError(
        "result_type() received an invalid combination of arguments - expected a Tensor or a "
        f"Python number, got {type(x).__name__}"
    )


def result_type(tensor: Any, other: Any) -> _C.dtype:
    """``torch.result_type``: the dtype an arithmetic op of ``tensor`` and ``other`` (tensors
    or Python numbers, at least one a tensor) gives, by torch's promotion rules."""
    if not isinstance(tensor, _C.Tensor) and not isinstance(other, _C.Tensor):
        raise TypeError(
            "result_type() received an invalid combination of arguments - got "
            f"({type(tensor).__name__}, {type(other).__name__}), but expected one of: "
            "(Tensor tensor, Tensor other), (Tensor tensor, Number other), "
            "(Number scalar, Tensor tensor)"
        )
    return _C._result_type([_priority_operand(tensor), _priority_operand(other)])
