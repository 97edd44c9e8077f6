"""Function forms of the elementwise unary ops (``ferrograd.exp``, ``ferrograd.clamp``, ...),
with torch's names and keywords. Each calls the Tensor method bound in
``src/python/ops/unary.rs``."""

from __future__ import annotations

from typing import Any, Optional

from . import _C
from ._ops_common import _method

Tensor = _C.Tensor


exp = _method("exp")
log = _method("log")
sin = _method("sin")
cos = _method("cos")
tanh = _method("tanh")
sigmoid = _method("sigmoid")
relu = _method("relu")
sqrt = _method("sqrt")
abs = _method("abs")  # noqa: A001
neg = _method("neg")
negative = neg
sign = _method("sign")


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


__all__ = [
    "abs",
    "acos",
    "acosh",
    "arccos",
    "arccosh",
    "arcsin",
    "arcsinh",
    "arctan",
    "arctanh",
    "asin",
    "asinh",
    "atan",
    "atanh",
    "bitwise_not",
    "ceil",
    "clamp",
    "clip",
    "cos",
    "cosh",
    "erf",
    "erfc",
    "exp",
    "exp2",
    "expm1",
    "fix",
    "floor",
    "isfinite",
    "isinf",
    "isnan",
    "log",
    "log10",
    "log1p",
    "log2",
    "logical_not",
    "nan_to_num",
    "neg",
    "negative",
    "reciprocal",
    "relu",
    "round",
    "rsqrt",
    "sigmoid",
    "sign",
    "sin",
    "sinh",
    "sqrt",
    "square",
    "tan",
    "tanh",
    "trunc",
]
