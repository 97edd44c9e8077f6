"""Function forms of the binary ops (``ferrograd.add``, ``ferrograd.maximum``, ``ferrograd.where``,
...), with torch's names, keywords and Python-number operands. Each calls the Tensor method
bound in ``src/python/ops/binary.rs``."""

from __future__ import annotations

from typing import Any, Optional

from . import _C
from ._ops_common import _as_tensor, _binary, _self_operand

Tensor = _C.Tensor


def _with_alpha(name: str) -> Any:
    def fn(input: Any, other: Any, *, alpha: Any = 1) -> Any:
        return getattr(_self_operand(input, other), name)(other, alpha=alpha)

    fn.__name__ = name
    fn.__doc__ = f"``input.{name}(other, alpha=alpha)`` as a function, broadcasting."
    return fn


add = _with_alpha("add")
sub = _with_alpha("sub")
subtract = sub
mul = _binary("mul")
multiply = mul
true_divide = _binary("div")
pow = _binary("pow")  # noqa: A001
eq = _binary("eq")
ne = _binary("ne")
lt = _binary("lt")
le = _binary("le")
gt = _binary("gt")
ge = _binary("ge")


def where(condition: Any, input: Any, other: Any) -> Tensor:
    """``input`` where ``condition`` else ``other``, broadcasting; differentiable in both."""
    return _C._where_tensors(condition, input, other)


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


def div(input: Any, other: Any, *, rounding_mode: Optional[str] = None) -> Tensor:
    """``input / other``; ``rounding_mode`` "trunc" or "floor" rounds the quotient."""
    return _as_tensor(input).div(other, rounding_mode=rounding_mode)


def divide(input: Any, other: Any, *, rounding_mode: Optional[str] = None) -> Tensor:
    """Alias of ``div``."""
    return _as_tensor(input).div(other, rounding_mode=rounding_mode)


__all__ = [
    "add",
    "arctan2",
    "atan2",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "div",
    "divide",
    "eq",
    "floor_divide",
    "fmod",
    "ge",
    "gt",
    "le",
    "logical_and",
    "logical_or",
    "logical_xor",
    "lt",
    "maximum",
    "minimum",
    "mul",
    "multiply",
    "ne",
    "pow",
    "remainder",
    "sub",
    "subtract",
    "true_divide",
    "where",
]
