"""Factory functions with torch's signatures."""

from __future__ import annotations

import builtins
import os as _os
from typing import Any, Optional, Sequence, Union

from . import _C
from ._device import check_device
from ._dtypes import bfloat16, check_dtype, from_numpy_dtype, int64, to_numpy_dtype
from ._lazy import is_numpy, np

Tensor = _C.Tensor
_bool = builtins.bool
_float = builtins.float


def _size(size: tuple) -> list:
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    for s in size:
        if (
            isinstance(s, _bool)
            or not isinstance(s, int)
            and not hasattr(s, "__index__")  # NumPy integers have it too
        ):
            raise TypeError(f"size must be a sequence of ints, but got {type(s).__name__}")
    return [int(s) for s in size]


def _finish(t: Tensor, requires_grad: _bool) -> Tensor:
    if requires_grad:
        if not t.dtype.is_floating_point:
            raise RuntimeError(
                "Only Tensors of floating point and complex dtype can require gradients"
            )
        t.requires_grad = True
    return t


def _infer_dtype(arr: np.ndarray) -> Any:
    if arr.dtype.kind == "f":
        return _C.get_default_dtype()
    if arr.dtype.kind in "iu":
        return int64
    if arr.dtype.kind == "b":
        return _C.bool
    raise TypeError(f"Could not infer dtype of {arr.dtype}")


def tensor(
    data: Any, dtype: Optional[_C.dtype] = None, requires_grad: _bool = False, device: Any = None
) -> Tensor:
    """A new tensor holding a copy of ``data`` (nested lists, numbers, NumPy arrays, tensors)."""
    check_device(device)
    if isinstance(data, Tensor):
        t = data.detach().clone()
        if dtype is not None:
            t = t.to(dtype)
        return _finish(t, requires_grad)
    if is_numpy(data, "ndarray") or isinstance(data, np.generic):
        # A NumPy scalar keeps its dtype as an array does (np.float64(1.5) is float64, as in
        # torch), where a Python float takes the default dtype.
        arr = np.asarray(data)
        target = check_dtype(dtype) if dtype is not None else from_numpy_dtype(arr.dtype)
    else:
        try:
            arr = np.asarray(data)
        except (ValueError, TypeError) as e:
            raise ValueError(f"could not build a tensor from {type(data).__name__}: {e}") from None
        if arr.dtype == object:
            raise TypeError(f"Could not infer dtype of {type(data).__name__}")
        target = check_dtype(dtype) if dtype is not None else _infer_dtype(arr)
        _check_fits(arr, target)
    if target == bfloat16:
        # NumPy has no bfloat16: float64 values rounded once, in the crate.
        t = _C._from_numpy(np.array(arr, dtype=np.float64, order="C", copy=True), True)
        return _finish(t.to(bfloat16), requires_grad)
    np_dtype = to_numpy_dtype(target)
    if arr.dtype == np_dtype:
        # No conversion, so nothing to overflow: a plain copy (a 64x10 float32 array copied
        # inside the errstate below takes 1.8 µs, plainly 0.4).
        return _finish(_C._from_numpy(np.array(arr, order="C", copy=True), True), requires_grad)
    with np.errstate(over="ignore", invalid="ignore"):  # checked above; -1 into uint8 wraps
        arr = np.array(arr, dtype=np_dtype, order="C", copy=True)
    return _finish(_C._from_numpy(arr, True), requires_grad)


def _check_fits(arr: Any, target: Any) -> None:
    """Python numbers an integer dtype cannot hold are torch's error, never a wrapped value
    (unsigned types also take the negatives that wrap, as torch's scalar check does)."""
    if target.is_floating_point or target == _C.bool or arr.dtype.kind not in "fiu" or not arr.size:
        return
    info = np.iinfo(to_numpy_dtype(target))
    lo = -builtins.float(info.max) if info.min == 0 else builtins.float(info.min)
    hi = builtins.float(info.max) + (1.0 if target == int64 else 0.0)
    wide = arr.astype(np.float64)
    if not (np.isfinite(wide).all() and wide.min() >= lo and wide.max() <= hi):
        name = str(target).split(".")[1]
        raise RuntimeError(f"value cannot be converted to type {name} without overflow")


def as_tensor(data: Any, dtype: Optional[_C.dtype] = None) -> Tensor:
    """``data`` as a tensor, sharing memory with a NumPy array or tensor when possible."""
    if isinstance(data, Tensor):
        return data if dtype is None else data.to(dtype)
    if dtype is None and is_numpy(data, "ndarray"):
        try:
            return from_numpy(data)
        except (TypeError, ValueError):
            pass
    return tensor(data, dtype=dtype)


def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor sharing memory with ``array``: writes through either are seen by both."""
    if not is_numpy(array, "ndarray"):
        raise TypeError(f"expected np.ndarray (got {type(array).__name__})")
    return _C._from_numpy(array, True)


def _factory(value: Union[_float, None], size: tuple, dtype: Any, requires_grad: _bool) -> Tensor:
    dt = _C.get_default_dtype() if dtype is None else check_dtype(dtype)
    return _finish(_C._full(_size(size), 0.0 if value is None else value, dt), requires_grad)


def zeros(
    *size: Any, dtype: Any = None, requires_grad: _bool = False, device: Any = None
) -> Tensor:
    """A tensor of zeros."""
    check_device(device)
    return _factory(0.0, size, dtype, requires_grad)


def ones(*size: Any, dtype: Any = None, requires_grad: _bool = False, device: Any = None) -> Tensor:
    """A tensor of ones."""
    check_device(device)
    return _factory(1.0, size, dtype, requires_grad)


def empty(
    *size: Any, dtype: Any = None, requires_grad: _bool = False, device: Any = None
) -> Tensor:
    """An uninitialised tensor (ferrograd zero-fills it)."""
    check_device(device)
    return _factory(None, size, dtype, requires_grad)


def full(
    size: Sequence[int],
    fill_value: Union[_float, int, _bool],
    dtype: Any = None,
    requires_grad: _bool = False,
    device: Any = None,
) -> Tensor:
    """A tensor filled with ``fill_value`` (dtype inferred from it like torch)."""
    check_device(device)
    if dtype is None:
        if isinstance(fill_value, _bool):
            dtype = _C.bool
        elif isinstance(fill_value, int):
            dtype = int64
        else:
            dtype = _C.get_default_dtype()
    return _finish(
        _C._full(_size(tuple(size)), _float(fill_value), check_dtype(dtype)), requires_grad
    )


def _like(t: Tensor, make: Any, requires_grad: _bool) -> Tensor:
    """``make(shape)`` for ``t``'s shape; inside ``vmap``, batched at every level ``t`` is, as
    torch's ``*_like`` (so writing a sample's values into it, or differentiating against it,
    stays per sample)."""
    if _C.is_batchedtensor(t):
        level, bdim = _C._batch_info(t)
        inner = _like(_C.get_unwrapped(t), make, False)
        out = _C._add_batch_dim(inner, bdim, level)
        return out.requires_grad_() if requires_grad else out
    return _finish(make(tuple(t.shape)), requires_grad)


def zeros_like(
    t: Tensor, dtype: Any = None, requires_grad: _bool = False, device: Any = None
) -> Tensor:
    """Zeros with ``t``'s shape and dtype."""
    check_device(device)
    return _like(t, lambda shape: zeros(*shape, dtype=dtype or t.dtype), requires_grad)


def ones_like(
    t: Tensor, dtype: Any = None, requires_grad: _bool = False, device: Any = None
) -> Tensor:
    """Ones with ``t``'s shape and dtype."""
    check_device(device)
    return _like(t, lambda shape: ones(*shape, dtype=dtype or t.dtype), requires_grad)


def full_like(
    t: Tensor,
    fill_value: _float,
    dtype: Any = None,
    requires_grad: _bool = False,
    device: Any = None,
) -> Tensor:
    """``fill_value`` with ``t``'s shape and dtype."""
    check_device(device)
    return _like(t, lambda shape: full(shape, fill_value, dtype=dtype or t.dtype), requires_grad)


def empty_like(
    t: Tensor, dtype: Any = None, requires_grad: _bool = False, device: Any = None
) -> Tensor:
    """Like ``zeros_like``."""
    check_device(device)
    return zeros_like(t, dtype=dtype, requires_grad=requires_grad)


def rand(*size: Any, dtype: Any = None, requires_grad: _bool = False, device: Any = None) -> Tensor:
    """Uniform samples in [0, 1) (seeded by ``manual_seed``)."""
    check_device(device)
    dt = _C.get_default_dtype() if dtype is None else check_dtype(dtype)
    return _finish(_C._rand(_size(size), dt), requires_grad)


def randn(
    *size: Any, dtype: Any = None, requires_grad: _bool = False, device: Any = None
) -> Tensor:
    """Standard normal samples (seeded by ``manual_seed``)."""
    check_device(device)
    dt = _C.get_default_dtype() if dtype is None else check_dtype(dtype)
    return _finish(_C._randn(_size(size), dt), requires_grad)


def rand_like(
    t: Tensor, dtype: Any = None, requires_grad: _bool = False, device: Any = None
) -> Tensor:
    """Uniform samples with ``t``'s shape and dtype."""
    check_device(device)
    return rand(*t.shape, dtype=dtype or t.dtype, requires_grad=requires_grad)


def randn_like(
    t: Tensor, dtype: Any = None, requires_grad: _bool = False, device: Any = None
) -> Tensor:
    """Normal samples with ``t``'s shape and dtype."""
    check_device(device)
    return randn(*t.shape, dtype=dtype or t.dtype, requires_grad=requires_grad)


def arange(
    start: Union[int, _float],
    end: Union[int, _float, None] = None,
    step: Union[int, _float] = 1,
    dtype: Any = None,
    requires_grad: _bool = False,
    device: Any = None,
) -> Tensor:
    """``start, start+step, ...`` up to ``end`` (exclusive); int64 when all arguments are ints."""
    check_device(device)
    if end is None:
        start, end = 0, start
    if dtype is None:
        all_int = all(isinstance(v, int) and not isinstance(v, _bool) for v in (start, end, step))
        dtype = int64 if all_int else _C.get_default_dtype()
    t = _C._arange(_float(start), _float(end), _float(step), check_dtype(dtype))
    return _finish(t, requires_grad)


def linspace(
    start: _float,
    end: _float,
    steps: int,
    dtype: Any = None,
    requires_grad: _bool = False,
    device: Any = None,
) -> Tensor:
    """``steps`` values evenly spaced from ``start`` to ``end``."""
    check_device(device)
    dt = _C.get_default_dtype() if dtype is None else check_dtype(dtype)
    return _finish(_C._linspace(_float(start), _float(end), int(steps), dt), requires_grad)


def logspace(
    start: _float,
    end: _float,
    steps: int,
    base: _float = 10.0,
    dtype: Any = None,
    requires_grad: _bool = False,
    device: Any = None,
) -> Tensor:
    """``steps`` values ``base ** x`` for ``x`` evenly spaced from ``start`` to ``end``."""
    check_device(device)
    dt = _C.get_default_dtype() if dtype is None else check_dtype(dtype)
    t = _C._logspace(_float(start), _float(end), int(steps), _float(base), dt)
    return _finish(t, requires_grad)


def initial_seed() -> int:
    """The seed of the global generator: the last ``manual_seed``, or the default one."""
    return _C._initial_seed()


def seed() -> int:
    """Seed the global generator from the OS's entropy; returns the seed (63 bits, so
    ``manual_seed`` takes it back)."""
    s = int.from_bytes(_os.urandom(8), "little") >> 1
    _C.manual_seed(s)
    return s


def _randint(low: Any, high: Any, size: Any, generator: Any, dtype: Any) -> Tensor:
    for name, v in (("low", low), ("high", high)):
        if isinstance(v, _bool) or not (isinstance(v, int) or hasattr(v, "__index__")):
            raise TypeError(f"randint(): argument '{name}' must be int, not {type(v).__name__}")
    seed = None if generator is None else generator._next_seed()
    return _C._randint(int(low), int(high), _size((size,)), dtype, seed)


def randint(
    *args: Any,
    size: Any = None,
    generator: Any = None,
    dtype: Any = None,
    requires_grad: _bool = False,
    device: Any = None,
) -> Tensor:
    """Integers drawn uniformly from ``[low, high)``: ``randint(high, size)`` or
    ``randint(low, high, size)`` (int64 unless ``dtype`` says otherwise)."""
    check_device(device)
    if size is not None:
        args = (*args, size)
    if len(args) == 2:
        low, high, shape = 0, args[0], args[1]
    elif len(args) == 3:
        low, high, shape = args
    else:
        raise TypeError("randint() expects (high, size) or (low, high, size)")
    dt = int64 if dtype is None else check_dtype(dtype)
    return _finish(_randint(low, high, shape, generator, dt), requires_grad)


def randint_like(
    input: Tensor,
    low: Any = 0,
    high: Any = None,
    *,
    dtype: Any = None,
    requires_grad: _bool = False,
    device: Any = None,
    memory_format: Any = None,
) -> Tensor:
    """Integers from ``[low, high)`` (``randint_like(input, high)`` draws from ``[0, high)``)
    with ``input``'s shape and, by default, its dtype."""
    check_device(device)
    if high is None:
        low, high = 0, low
    dt = input.dtype if dtype is None else check_dtype(dtype)
    return _finish(_randint(low, high, list(input.shape), None, dt), requires_grad)


def tril_indices(
    row: int, col: int, offset: int = 0, *, dtype: Any = None, device: Any = None
) -> Tensor:
    """The coordinates ``[rows; cols]`` of the lower triangle of a ``row`` x ``col`` matrix
    (``col - row <= offset``)."""
    check_device(device)
    t = _C._triangle_indices(row, col, offset, False)
    return t if dtype is None or check_dtype(dtype) == int64 else t.to(check_dtype(dtype))


def triu_indices(
    row: int, col: int, offset: int = 0, *, dtype: Any = None, device: Any = None
) -> Tensor:
    """The coordinates ``[rows; cols]`` of the upper triangle (``col - row >= offset``)."""
    check_device(device)
    t = _C._triangle_indices(row, col, offset, True)
    return t if dtype is None or check_dtype(dtype) == int64 else t.to(check_dtype(dtype))


def multinomial(
    input: Tensor, num_samples: int, replacement: _bool = False, *, generator: Any = None
) -> Tensor:
    """``num_samples`` category indices (int64) per row of the non-negative weights ``input``;
    without ``replacement`` each category at most once per row."""
    return input.multinomial(num_samples, replacement, generator=generator)


def bernoulli(input: Tensor, p: Any = None, *, generator: Any = None) -> Tensor:
    """0/1 samples shaped like ``input``, each 1 with probability ``input``'s element (or
    ``p``)."""
    out = zeros_like(input)
    return out.bernoulli_(input if p is None else p, generator=generator)


def eye(
    n: int,
    m: Optional[int] = None,
    dtype: Any = None,
    requires_grad: _bool = False,
    device: Any = None,
) -> Tensor:
    """An ``n`` x ``m`` identity matrix."""
    check_device(device)
    dt = _C.get_default_dtype() if dtype is None else check_dtype(dtype)
    return _finish(_C._eye(n, n if m is None else m, dt), requires_grad)
