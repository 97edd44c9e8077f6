"""Function forms of the matrix products (``ferrograd.matmul``, ``mm``, ``bmm``, ``dot``, ``mv``,
``outer``). Each calls the Tensor method bound in ``src/python/ops/matmul.rs``."""

from __future__ import annotations

from . import _C
from ._ops_common import _method

Tensor = _C.Tensor


matmul = _method("matmul")
dot = _method("dot")
mv = _method("mv")


def mm(input: Tensor, mat2: Tensor) -> Tensor:
    """Strict 2-D matrix product."""
    return input.mm(mat2)


def bmm(input: Tensor, mat2: Tensor) -> Tensor:
    """Strict 3-D batched matrix product."""
    return input.bmm(mat2)


def outer(input: Tensor, vec2: Tensor) -> Tensor:
    """Outer product of two vectors."""
    return input.outer(vec2)


__all__ = [
    "bmm",
    "dot",
    "matmul",
    "mm",
    "mv",
    "outer",
]
