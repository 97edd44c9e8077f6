"""Function forms of ``crate::ops::linalg`` (``ferrograd.einsum``, ``trace``, ``diag``, ``tril``,
...). Each calls the Tensor method or function bound in ``src/python/ops/linalg.rs``."""

from __future__ import annotations

from typing import Any

from . import _C

Tensor = _C.Tensor


def einsum(equation: str, *operands: Any) -> Tensor:
    """Einstein summation over ``operands`` (also accepts one list of operands)."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    return _C._einsum(equation, list(operands))


def trace(input: Tensor) -> Tensor:
    """Sum of the main diagonal of a matrix."""
    return input.trace()


def diag(input: Tensor, diagonal: int = 0) -> Tensor:
    """Vector → diagonal matrix; matrix → its diagonal."""
    return input.diag(diagonal)


def diagonal(input: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """A diagonal of ``input`` as its last dim (a view)."""
    return input.diagonal(offset, dim1, dim2)


def tril(input: Tensor, diagonal: int = 0) -> Tensor:
    """Lower triangle of ``input``."""
    return input.tril(diagonal)


def triu(input: Tensor, diagonal: int = 0) -> Tensor:
    """Upper triangle of ``input``."""
    return input.triu(diagonal)


__all__ = [
    "diag",
    "diagonal",
    "einsum",
    "trace",
    "tril",
    "triu",
]
