"""torch's legacy spellings that tutorials still use: ``FloatTensor(...)`` and its kin,
``autograd.Variable``, and ``normal``."""

from __future__ import annotations

from typing import Any, Optional

from . import _C, _creation

Tensor = _C.Tensor


class _TypedTensorMeta(type):
    """``isinstance(t, FloatTensor)`` is true for float32 tensors, as torch's checks."""

    _dtype: Any

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, Tensor) and obj.dtype == cls._dtype

    def __call__(cls, *args: Any, **kwargs: Any) -> Tensor:
        device = kwargs.pop("device", None)
        if kwargs:
            raise TypeError(f"{cls.__name__}() got unexpected keyword arguments {sorted(kwargs)}")
        if len(args) == 1 and not isinstance(args[0], int) and not hasattr(args[0], "__index__"):
            return _creation.tensor(args[0], dtype=cls._dtype, device=device)
        if all(isinstance(a, int) or hasattr(a, "__index__") for a in args):
            # torch leaves the memory uninitialised; zeros are one valid content.
            return _creation.zeros(*args, dtype=cls._dtype, device=device)
        raise TypeError(f"{cls.__name__}() expects sizes or one sequence of data")


def _typed(name: str, dtype: Any) -> Any:
    return _TypedTensorMeta(name, (), {"_dtype": dtype, "__module__": "ferrograd"})


FloatTensor = _typed("FloatTensor", _C.float32)
DoubleTensor = _typed("DoubleTensor", _C.float64)
LongTensor = _typed("LongTensor", _C.int64)
BoolTensor = _typed("BoolTensor", _C.bool)
HalfTensor = _typed("HalfTensor", _C.float16)
BFloat16Tensor = _typed("BFloat16Tensor", _C.bfloat16)
IntTensor = _typed("IntTensor", _C.int32)
ShortTensor = _typed("ShortTensor", _C.int16)
CharTensor = _typed("CharTensor", _C.int8)
ByteTensor = _typed("ByteTensor", _C.uint8)


class _VariableMeta(type):
    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, Tensor)


class Variable(metaclass=_VariableMeta):
    """torch's pre-0.4 wrapper, kept as torch keeps it: ``Variable(t, requires_grad=...)`` gives
    a tensor (sharing ``t``'s memory) and every tensor is a ``Variable``."""

    def __new__(cls, data: Tensor, requires_grad: bool = False, volatile: bool = False) -> Any:
        if not isinstance(data, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        out = data.detach()
        if requires_grad:
            out.requires_grad_(True)
        return out


def normal(
    mean: Any,
    std: Any = 1.0,
    size: Optional[Any] = None,
    *,
    generator: Any = None,
    dtype: Any = None,
    requires_grad: bool = False,
    device: Any = None,
) -> Tensor:
    """Samples of N(mean, std²), elementwise for tensor arguments (broadcast), or of ``size``
    for numbers; from the global generator (``manual_seed``)."""
    if generator is not None:
        raise RuntimeError("normal(): generator= is not supported yet; seed with manual_seed")
    if isinstance(std, (int, float)) and std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
    if isinstance(std, Tensor) and bool((std < 0).any()):
        raise RuntimeError("normal expects all elements of std >= 0.0")
    tensors = [v for v in (mean, std) if isinstance(v, Tensor)]
    if tensors:
        if size is not None:
            raise TypeError("normal(): size is only accepted with float mean and std")
        shape = _broadcast_shape(*(t.shape for t in tensors))
        dt = tensors[0].dtype if tensors[0].dtype.is_floating_point else _C.get_default_dtype()
    else:
        if size is None:
            raise TypeError("normal(): with float mean and std, size is required")
        shape = tuple(size)
        dt = dtype if dtype is not None else _C.get_default_dtype()
    out = _creation.randn(*shape, dtype=dt, device=device) * std + mean
    out = out.detach()
    if requires_grad:
        out.requires_grad_(True)
    return out


def _broadcast_shape(*shapes: Any) -> tuple:
    n = max(len(s) for s in shapes)
    out = []
    for dims in zip(*((1,) * (n - len(s)) + tuple(s) for s in shapes)):
        big = {d for d in dims if d != 1}
        if len(big) > 1:
            raise RuntimeError(f"normal(): mean and std shapes do not broadcast: {shapes}")
        out.append(big.pop() if big else 1)
    return tuple(out)
