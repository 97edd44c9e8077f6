"""Function forms of the elementwise unary ops (``ferrograd.exp``, ``ferrograd.clamp``, ...),
with torch's names and keywords. The op registry's are bound in Rust; the rest call the Tensor
method bound in ``src/python/ops/unary.rs``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from . import _C

Tensor = _C.Tensor

# ferrograd.exp, ferrograd.tanh, ...: the function of each row of the op registry
# (src/ops/registry.rs), bound in Rust (src/python/ops/unary.rs) and declared in _C.pyi.
_REGISTERED = [row["name"] for row in _C._registry() if row["family"] == "unary"]
globals().update({name: getattr(_C, name) for name in _REGISTERED})
if TYPE_CHECKING:
    from ._C import *  # noqa: F403  (the registry's functions, for type checkers)

# torch's aliases.
negative = _C.neg
arcsin = _C.asin
arccos = _C.acos
arctan = _C.atan
arcsinh = _C.asinh
arccosh = _C.acosh
arctanh = _C.atanh
fix = _C.trunc


def square(input: Tensor) -> Tensor:
    """x * x elementwise."""
    return input.square()


def round(input: Tensor, *, decimals: int = 0) -> Tensor:  # noqa: A001
    """Nearest integer (halves to even), or to ``decimals`` decimal places; zero gradient."""
    return input.round(decimals=decimals)


def clamp(input: Tensor, min: Any = None, max: Any = None) -> Tensor:  # noqa: A002
    """``input`` clamped into ``[min, max]``; the gradient passes where min <= x <= max."""
    return input.clamp(min, max)


def clip(input: Tensor, min: Any = None, max: Any = None) -> Tensor:  # noqa: A002
    """Alias of ``clamp``."""
    return input.clamp(min, max)


def clamp_min(input: Tensor, min: Any) -> Tensor:  # noqa: A002
    """``max(input, min)`` elementwise (``min`` a number or tensor)."""
    return input.clamp_min(min)


def clamp_max(input: Tensor, max: Any) -> Tensor:  # noqa: A002
    """``min(input, max)`` elementwise (``max`` a number or tensor)."""
    return input.clamp_max(max)


def nan_to_num(
    input: Tensor,
    nan: float = 0.0,
    posinf: Optional[float] = None,
    neginf: Optional[float] = None,
) -> Tensor:
    """NaN, +inf and -inf replaced (infinities by default with the dtype's extremes)."""
    return input.nan_to_num(nan, posinf, neginf)


__all__ = [
    "arccos",
    "arccosh",
    "arcsin",
    "arcsinh",
    "arctan",
    "arctanh",
    "clamp",
    "clamp_max",
    "clamp_min",
    "clip",
    "fix",
    "nan_to_num",
    "negative",
    "round",
    "square",
]
__all__ += _REGISTERED
