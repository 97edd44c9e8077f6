"""``ferrograd.linalg``: vector and matrix norms with torch.linalg's names and keywords."""

from __future__ import annotations

import math
from typing import Any, Optional, Sequence, Tuple, Union

from . import _C

Tensor = _C.Tensor
_Dim = Union[int, Sequence[int], None]

__all__ = ["matrix_norm", "norm", "vector_norm"]


def _cast(x: Tensor, dtype: Any) -> Tensor:
    return x if dtype is None else x.to(dtype)


def vector_norm(
    x: Tensor,
    ord: Union[int, float] = 2,
    dim: _Dim = None,
    keepdim: bool = False,
    *,
    dtype: Any = None,
) -> Tensor:
    """The vector ``ord``-norm over ``dim`` (all elements when None): ``inf``/``-inf`` give
    max/min ``|x|``, ``0`` counts nonzeros, otherwise ``(sum |x|^ord)^(1/ord)``. The subgradient
    where the norm is 0 is 0, as in torch."""
    if isinstance(ord, str):
        raise RuntimeError(f"linalg.vector_norm: ord must be a number, got '{ord}'")
    return _cast(x, dtype)._vector_norm(float(ord), dim, keepdim)


def _matrix_dims(x: Tensor, dim: Tuple[int, int]) -> Tuple[int, int]:
    if x.dim() < 2:
        raise RuntimeError(
            f"linalg.matrix_norm: The input tensor A must have at least 2 dimensions, "
            f"but got {x.dim()} dimensions."
        )
    if len(dim) != 2:
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {tuple(dim)}")
    d0, d1 = (d % x.dim() for d in dim)
    if d0 == d1:
        raise RuntimeError(f"linalg.matrix_norm: dims must be different. Got ({d0}, {d1})")
    return d0, d1


def matrix_norm(
    A: Tensor,
    ord: Union[int, float, str] = "fro",
    dim: Tuple[int, int] = (-2, -1),
    keepdim: bool = False,
    *,
    dtype: Any = None,
) -> Tensor:
    """Matrix norm over the two dims ``dim``: ``'fro'``, or the induced ``1``/``-1`` (max/min
    column sum of ``|A|``) and ``inf``/``-inf`` (max/min row sum). ``'nuc'`` and ``±2`` need
    singular values, which ferrograd does not compute (NotImplementedError)."""
    A = _cast(A, dtype)
    d0, d1 = _matrix_dims(A, tuple(dim))  # type: ignore[arg-type]
    if ord == "fro":
        return A._vector_norm(2.0, (d0, d1), keepdim)
    if ord in ("nuc", 2, -2):
        raise NotImplementedError(
            f"linalg.matrix_norm: ord={ord!r} needs singular values, not implemented in ferrograd"
        )
    if not isinstance(ord, (int, float)) or ord not in (1, -1, math.inf, -math.inf):
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    # ord=±1 reduce columns (sum over d0, then max/min over d1); ord=±inf the reverse.
    sum_dim, ext_dim = (d0, d1) if abs(ord) == 1 else (d1, d0)
    s = A.abs().sum(sum_dim, keepdim=True)
    r = s.amax(ext_dim, keepdim=True) if ord > 0 else s.amin(ext_dim, keepdim=True)
    if not keepdim:
        r = r.squeeze(max(d0, d1)).squeeze(min(d0, d1))
    return r


def norm(
    A: Tensor,
    ord: Optional[Union[int, float, str]] = None,
    dim: _Dim = None,
    keepdim: bool = False,
    *,
    dtype: Any = None,
) -> Tensor:
    """``torch.linalg.norm``: a vector norm when ``dim`` is an int (or ``A`` is 1-D), a matrix
    norm when ``dim`` is a 2-tuple (or ``A`` is 2-D and ``ord`` is given); with ``ord`` and
    ``dim`` both None, the 2-norm of all elements."""
    if isinstance(dim, int):
        dim = (dim,)
    if ord is None:
        if dim is not None and len(tuple(dim)) == 2:
            return matrix_norm(A, "fro", tuple(dim), keepdim, dtype=dtype)  # type: ignore[arg-type]
        return vector_norm(A, 2, dim, keepdim, dtype=dtype)
    if dim is None:
        if A.dim() == 1:
            return vector_norm(A, ord, None, keepdim, dtype=dtype)  # type: ignore[arg-type]
        if A.dim() == 2:
            return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype)
        raise RuntimeError(
            f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. "
            f"Got {A.dim()}D."
        )
    dims = tuple(dim)
    if len(dims) == 1:
        if isinstance(ord, str):
            raise RuntimeError(f"linalg.vector_norm: ord '{ord}' is a matrix norm order")
        return vector_norm(A, ord, dims, keepdim, dtype=dtype)
    if len(dims) == 2:
        return matrix_norm(A, ord, dims, keepdim, dtype=dtype)  # type: ignore[arg-type]
    raise RuntimeError(
        f"linalg.norm: If dim is specified, it must be of length 1 or 2. Got {list(dims)}"
    )
