"""Function forms of the matrix products (``ferrograd.matmul``, ``mm``, ``bmm``, ``dot``, ``mv``,
``outer``). Each calls the Tensor method bound in ``src/python/ops/matmul.rs``."""

from __future__ import annotations

from typing import Any

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


def addmm(
    input: Tensor, mat1: Tensor, mat2: Tensor, *, beta: float = 1, alpha: float = 1
) -> Tensor:
    """``beta * input + alpha * (mat1 @ mat2)``."""
    return input.addmm(mat1, mat2, beta=beta, alpha=alpha)


def addmv(input: Tensor, mat: Tensor, vec: Tensor, *, beta: float = 1, alpha: float = 1) -> Tensor:
    """``beta * input + alpha * (mat @ vec)``."""
    return input.addmv(mat, vec, beta=beta, alpha=alpha)


def baddbmm(
    input: Tensor, batch1: Tensor, batch2: Tensor, *, beta: float = 1, alpha: float = 1
) -> Tensor:
    """``beta * input + alpha * (batch1 @ batch2)`` per batch."""
    return input.baddbmm(batch1, batch2, beta=beta, alpha=alpha)


def addbmm(
    input: Tensor, batch1: Tensor, batch2: Tensor, *, beta: float = 1, alpha: float = 1
) -> Tensor:
    """``beta * input + alpha * sum_b(batch1[b] @ batch2[b])``."""
    return input.addbmm(batch1, batch2, beta=beta, alpha=alpha)


def kron(input: Tensor, other: Tensor) -> Tensor:
    """The Kronecker product."""
    return input.kron(other)


def tensordot(a: Tensor, b: Tensor, dims: Any = 2, out: Any = None) -> Tensor:
    """Sum of products over the last ``dims`` dims of ``a`` and the first ``dims`` of ``b``,
    or over the dims paired in ``dims = (dims_a, dims_b)``."""
    if out is not None:
        raise TypeError("tensordot(): out= is not supported")
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        if dims > a.dim() or dims > b.dim():
            raise RuntimeError(
                f"tensordot expects dims < ndim_a or ndim_b, but got dims={dims}"
            )
        dims_a = list(range(-dims, 0))
        dims_b = list(range(dims))
    else:
        dims_a, dims_b = dims
        dims_a = [dims_a] if isinstance(dims_a, int) else list(dims_a)
        dims_b = [dims_b] if isinstance(dims_b, int) else list(dims_b)
    return _C._tensordot(a, b, dims_a, dims_b)


__all__ = [
    "addbmm",
    "addmm",
    "addmv",
    "baddbmm",
    "kron",
    "tensordot",
    "bmm",
    "dot",
    "matmul",
    "mm",
    "mv",
    "outer",
]
