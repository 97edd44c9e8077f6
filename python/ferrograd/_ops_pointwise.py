"""Function forms of the three-operand pointwise ops and closeness tests (``ferrograd.lerp``,
``addcmul``, ``addcdiv``, ``isclose``, ``allclose``, ``equal``). Each calls the Tensor method
bound in ``src/python/ops/pointwise.rs``."""

from __future__ import annotations

from typing import Any

from . import _C

Tensor = _C.Tensor


def lerp(input: Tensor, end: Tensor, weight: Any) -> Tensor:
    """``input + weight * (end - input)``; ``weight`` a number or a tensor."""
    return input.lerp(end, weight)


def addcmul(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value: Any = 1) -> Tensor:
    """``input + value * tensor1 * tensor2``, broadcasting."""
    return input.addcmul(tensor1, tensor2, value=value)


def addcdiv(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value: Any = 1) -> Tensor:
    """``input + value * tensor1 / tensor2``, broadcasting."""
    return input.addcdiv(tensor1, tensor2, value=value)


def isclose(
    input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False
) -> Tensor:
    """Elementwise ``|input - other| <= atol + rtol * |other|`` (bool)."""
    return input.isclose(other, rtol, atol, equal_nan)


def allclose(
    input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False
) -> bool:
    """Whether every element of ``input`` is close to ``other``'s (see :func:`isclose`)."""
    return input.allclose(other, rtol, atol, equal_nan)


def equal(input: Tensor, other: Tensor) -> bool:
    """Whether ``input`` and ``other`` have one shape and equal elements."""
    return input.equal(other)


def hypot(input: Tensor, other: Tensor) -> Tensor:
    """``sqrt(input² + other²)`` elementwise, broadcasting."""
    return input.hypot(other)


def logaddexp(input: Tensor, other: Tensor) -> Tensor:
    """``log(exp(input) + exp(other))`` elementwise, broadcasting, without overflow."""
    return input.logaddexp(other)


__all__ = ["addcdiv", "addcmul", "allclose", "equal", "hypot", "isclose", "lerp", "logaddexp"]
