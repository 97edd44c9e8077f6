"""dtype objects and conversion between ferrograd and NumPy dtypes."""

from __future__ import annotations

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
