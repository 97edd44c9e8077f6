"""Function forms of the math ops (``ferrograd.exp2``, ``ferrograd.max``, ...), with torch's
names, keywords and overloads. Each calls the Tensor method implemented in Rust."""

from __future__ import annotations

import builtins
from collections import namedtuple
from typing import Any, Optional, Sequence, Union

from . import _C
from . import linalg as linalg  # noqa: F401  (makes ``ferrograd.linalg`` available)

Tensor = _C.Tensor
_Dim = Union[int, Sequence[int], None]

_RETURN_TYPES = {
    name: namedtuple(name, ["values", "indices"])  # type: ignore[misc]
    for name in ("max", "min")
}
for _t in _RETURN_TYPES.values():
    _t.__module__ = "ferrograd.return_types"


def _return_type(name: str, values: Tensor, indices: Tensor) -> Any:
    """``(values, indices)`` as torch's ``torch.return_types.<name>`` named tuple."""
    return _RETURN_TYPES[name](values, indices)


def _as_tensor(x: Any, like: Any = None) -> Tensor:
    if isinstance(x, Tensor):
        return x
    from ._creation import tensor

    return tensor(x)


def exp2(input: Tensor) -> Tensor:
    """2^x elementwise."""
    return input.exp2()


def log2(input: Tensor) -> Tensor:
    """Base-2 logarithm elementwise."""
    return input.log2()


def log10(input: Tensor) -> Tensor:
    """Base-10 logarithm elementwise."""
    return input.log10()


def log1p(input: Tensor) -> Tensor:
    """ln(1 + x) elementwise, accurate near 0."""
    return input.log1p()


def expm1(input: Tensor) -> Tensor:
    """e^x - 1 elementwise, accurate near 0."""
    return input.expm1()


def rsqrt(input: Tensor) -> Tensor:
    """1 / sqrt(x) elementwise."""
    return input.rsqrt()


def square(input: Tensor) -> Tensor:
    """x * x elementwise."""
    return input.square()


def reciprocal(input: Tensor) -> Tensor:
    """1 / x elementwise."""
    return input.reciprocal()


def tan(input: Tensor) -> Tensor:
    """Tangent elementwise."""
    return input.tan()


def asin(input: Tensor) -> Tensor:
    """Arcsine elementwise."""
    return input.asin()


def acos(input: Tensor) -> Tensor:
    """Arccosine elementwise."""
    return input.acos()


def atan(input: Tensor) -> Tensor:
    """Arctangent elementwise."""
    return input.atan()


def sinh(input: Tensor) -> Tensor:
    """Hyperbolic sine elementwise."""
    return input.sinh()


def cosh(input: Tensor) -> Tensor:
    """Hyperbolic cosine elementwise."""
    return input.cosh()


def asinh(input: Tensor) -> Tensor:
    """Inverse hyperbolic sine elementwise."""
    return input.asinh()


def acosh(input: Tensor) -> Tensor:
    """Inverse hyperbolic cosine elementwise."""
    return input.acosh()


def atanh(input: Tensor) -> Tensor:
    """Inverse hyperbolic tangent elementwise."""
    return input.atanh()


def erf(input: Tensor) -> Tensor:
    """The error function elementwise."""
    return input.erf()


def erfc(input: Tensor) -> Tensor:
    """The complementary error function elementwise."""
    return input.erfc()


def floor(input: Tensor) -> Tensor:
    """Round down elementwise (zero gradient)."""
    return input.floor()


def ceil(input: Tensor) -> Tensor:
    """Round up elementwise (zero gradient)."""
    return input.ceil()


def trunc(input: Tensor) -> Tensor:
    """Round towards zero elementwise (zero gradient)."""
    return input.trunc()


def isnan(input: Tensor) -> Tensor:
    """Elementwise NaN test (bool)."""
    return input.isnan()


def isinf(input: Tensor) -> Tensor:
    """Elementwise infinity test (bool)."""
    return input.isinf()


def isfinite(input: Tensor) -> Tensor:
    """Elementwise finiteness test (bool)."""
    return input.isfinite()


def logical_not(input: Tensor) -> Tensor:
    """Elementwise logical not (bool)."""
    return input.logical_not()


def bitwise_not(input: Tensor) -> Tensor:
    """Bitwise not of a bool or integer tensor."""
    return input.bitwise_not()


def arcsin(input: Tensor) -> Tensor:
    """Alias of ``asin``."""
    return input.asin()


def arccos(input: Tensor) -> Tensor:
    """Alias of ``acos``."""
    return input.acos()


def arctan(input: Tensor) -> Tensor:
    """Alias of ``atan``."""
    return input.atan()


def arcsinh(input: Tensor) -> Tensor:
    """Alias of ``asinh``."""
    return input.asinh()


def arccosh(input: Tensor) -> Tensor:
    """Alias of ``acosh``."""
    return input.acosh()


def arctanh(input: Tensor) -> Tensor:
    """Alias of ``atanh``."""
    return input.atanh()


def fix(input: Tensor) -> Tensor:
    """Alias of ``trunc``."""
    return input.trunc()


def maximum(input: Any, other: Any) -> Tensor:
    """Elementwise maximum (NaN propagates; ties split the gradient 0.5/0.5)."""
    return _as_tensor(input).maximum(other)


def minimum(input: Any, other: Any) -> Tensor:
    """Elementwise minimum (NaN propagates; ties split the gradient 0.5/0.5)."""
    return _as_tensor(input).minimum(other)


def fmod(input: Any, other: Any) -> Tensor:
    """C-style remainder (the dividend's sign)."""
    return _as_tensor(input).fmod(other)


def remainder(input: Any, other: Any) -> Tensor:
    """Python-style remainder (the divisor's sign)."""
    return _as_tensor(input).remainder(other)


def atan2(input: Any, other: Any) -> Tensor:
    """atan2(input, other), the angle of the point (other, input)."""
    return _as_tensor(input).atan2(other)


def arctan2(input: Any, other: Any) -> Tensor:
    """Alias of ``atan2``."""
    return _as_tensor(input).arctan2(other)


def logical_and(input: Any, other: Any) -> Tensor:
    """Elementwise logical and (bool)."""
    return _as_tensor(input).logical_and(other)


def logical_or(input: Any, other: Any) -> Tensor:
    """Elementwise logical or (bool)."""
    return _as_tensor(input).logical_or(other)


def logical_xor(input: Any, other: Any) -> Tensor:
    """Elementwise logical xor (bool)."""
    return _as_tensor(input).logical_xor(other)


def bitwise_and(input: Any, other: Any) -> Tensor:
    """Bitwise and of bool or integer tensors."""
    return _as_tensor(input).bitwise_and(other)


def bitwise_or(input: Any, other: Any) -> Tensor:
    """Bitwise or of bool or integer tensors."""
    return _as_tensor(input).bitwise_or(other)


def bitwise_xor(input: Any, other: Any) -> Tensor:
    """Bitwise xor of bool or integer tensors."""
    return _as_tensor(input).bitwise_xor(other)


def floor_divide(input: Any, other: Any) -> Tensor:
    """Division rounded down."""
    return _as_tensor(input).floor_divide(other)


def round(input: Tensor, *, decimals: int = 0) -> Tensor:  # noqa: A001
    """Nearest integer (halves to even), or to ``decimals`` decimal places; zero gradient."""
    return input.round(decimals=decimals)


def clamp(input: Tensor, min: Any = None, max: Any = None) -> Tensor:  # noqa: A002
    """``input`` clamped into ``[min, max]``; the gradient passes where min <= x <= max."""
    return input.clamp(min, max)


def clip(input: Tensor, min: Any = None, max: Any = None) -> Tensor:  # noqa: A002
    """Alias of ``clamp``."""
    return input.clamp(min, max)


def nan_to_num(
    input: Tensor,
    nan: float = 0.0,
    posinf: Optional[float] = None,
    neginf: Optional[float] = None,
) -> Tensor:
    """NaN, +inf and -inf replaced (infinities by default with the dtype's extremes)."""
    return input.nan_to_num(nan, posinf, neginf)


def div(input: Any, other: Any, *, rounding_mode: Optional[str] = None) -> Tensor:
    """``input / other``; ``rounding_mode`` "trunc" or "floor" rounds the quotient."""
    return _as_tensor(input).div(other, rounding_mode=rounding_mode)


def divide(input: Any, other: Any, *, rounding_mode: Optional[str] = None) -> Tensor:
    """Alias of ``div``."""
    return _as_tensor(input).div(other, rounding_mode=rounding_mode)


def prod(
    input: Tensor, dim: _Dim = None, keepdim: builtins.bool = False, *, dtype: Any = None
) -> Tensor:
    """Product over all elements or ``dim``; exact gradients with zeros present."""
    return input.prod(dim, keepdim, dtype=dtype)


def amax(input: Tensor, dim: _Dim = (), keepdim: builtins.bool = False) -> Tensor:
    """Largest elements over ``dim`` (all when empty); ties share the gradient evenly."""
    return input.amax(dim, keepdim)


def amin(input: Tensor, dim: _Dim = (), keepdim: builtins.bool = False) -> Tensor:
    """Smallest elements over ``dim`` (all when empty); ties share the gradient evenly."""
    return input.amin(dim, keepdim)


def max(input: Tensor, dim: Any = None, keepdim: builtins.bool = False) -> Any:  # noqa: A001
    """``max(input)``, ``max(input, dim, keepdim=False)`` -> ``(values, indices)``, or
    ``max(input, other)`` (elementwise)."""
    return input.max(dim, keepdim)


def min(input: Tensor, dim: Any = None, keepdim: builtins.bool = False) -> Any:  # noqa: A001
    """``min(input)``, ``min(input, dim, keepdim=False)`` -> ``(values, indices)``, or
    ``min(input, other)`` (elementwise)."""
    return input.min(dim, keepdim)


def argmax(input: Tensor, dim: Optional[int] = None, keepdim: builtins.bool = False) -> Tensor:
    """Index of the largest element (of the flattened tensor when ``dim`` is None)."""
    return input.argmax(dim, keepdim)


def argmin(input: Tensor, dim: Optional[int] = None, keepdim: builtins.bool = False) -> Tensor:
    """Index of the smallest element (of the flattened tensor when ``dim`` is None)."""
    return input.argmin(dim, keepdim)


def var(
    input: Tensor,
    dim: Any = None,
    unbiased: Optional[builtins.bool] = None,
    keepdim: builtins.bool = False,
    *,
    correction: Optional[float] = None,
) -> Tensor:
    """Variance over ``dim`` divided by ``N - correction`` (default 1; ``unbiased`` legacy)."""
    return input.var(dim, unbiased, keepdim, correction=correction)


def std(
    input: Tensor,
    dim: Any = None,
    unbiased: Optional[builtins.bool] = None,
    keepdim: builtins.bool = False,
    *,
    correction: Optional[float] = None,
) -> Tensor:
    """Standard deviation over ``dim`` (see ``var``)."""
    return input.std(dim, unbiased, keepdim, correction=correction)


def norm(
    input: Tensor,
    p: Any = "fro",
    dim: _Dim = None,
    keepdim: builtins.bool = False,
    dtype: Any = None,
) -> Tensor:
    """The ``p``-norm over ``dim`` (all when None); ``'fro'`` is the 2-norm of the elements."""
    return input.norm(p, dim, keepdim, dtype)


def logsumexp(
    input: Tensor, dim: Union[int, Sequence[int]], keepdim: builtins.bool = False
) -> Tensor:
    """``log(sum(exp(input), dim))`` computed stably (the maximum subtracted first)."""
    return input.logsumexp(dim, keepdim)


def softmax(input: Tensor, dim: int, dtype: Any = None) -> Tensor:
    """Softmax along ``dim`` (stable)."""
    return input.softmax(dim, dtype)


def log_softmax(input: Tensor, dim: int, dtype: Any = None) -> Tensor:
    """Log-softmax along ``dim`` (stable)."""
    return input.log_softmax(dim, dtype)


def cumsum(input: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    """Cumulative sum along ``dim``."""
    return input.cumsum(dim, dtype=dtype)


def cumprod(input: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    """Cumulative product along ``dim``; exact gradients with zeros present."""
    return input.cumprod(dim, dtype=dtype)


def all(input: Tensor, dim: _Dim = None, keepdim: builtins.bool = False) -> Tensor:  # noqa: A001
    """Whether all elements (over ``dim``) are nonzero (bool)."""
    return input.all(dim, keepdim)


def any(input: Tensor, dim: _Dim = None, keepdim: builtins.bool = False) -> Tensor:  # noqa: A001
    """Whether any element (over ``dim``) is nonzero (bool)."""
    return input.any(dim, keepdim)


__all__ = [
    "acos",
    "acosh",
    "all",
    "amax",
    "amin",
    "any",
    "arccos",
    "arccosh",
    "arcsin",
    "arcsinh",
    "arctan",
    "arctan2",
    "arctanh",
    "argmax",
    "argmin",
    "asin",
    "asinh",
    "atan",
    "atan2",
    "atanh",
    "bitwise_and",
    "bitwise_not",
    "bitwise_or",
    "bitwise_xor",
    "ceil",
    "clamp",
    "clip",
    "cosh",
    "cumprod",
    "cumsum",
    "div",
    "divide",
    "erf",
    "erfc",
    "exp2",
    "expm1",
    "fix",
    "floor",
    "floor_divide",
    "fmod",
    "isfinite",
    "isinf",
    "isnan",
    "linalg",
    "log10",
    "log1p",
    "log2",
    "log_softmax",
    "logical_and",
    "logical_not",
    "logical_or",
    "logical_xor",
    "logsumexp",
    "max",
    "maximum",
    "min",
    "minimum",
    "nan_to_num",
    "norm",
    "prod",
    "reciprocal",
    "remainder",
    "round",
    "rsqrt",
    "sinh",
    "softmax",
    "square",
    "std",
    "tan",
    "trunc",
    "var",
]
