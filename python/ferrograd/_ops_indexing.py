"""Function forms of the indexing ops (``ferrograd.gather``, ``ferrograd.masked_fill``, ...). Each
calls the Tensor method bound in ``src/python/ops/indexing.rs``."""

from __future__ import annotations

from typing import Any, Optional

from . import _C

Tensor = _C.Tensor


def index_select(input: Tensor, dim: int, index: Tensor) -> Tensor:
    """Elements of ``input`` along ``dim`` at ``index``."""
    return input.index_select(dim, index)


def gather(input: Tensor, dim: int, index: Tensor) -> Tensor:
    """Values of ``input`` along ``dim`` at ``index``."""
    return input.gather(dim, index)


def scatter(input: Tensor, dim: int, index: Tensor, src: Any = None, value: Any = None) -> Tensor:
    """A copy of ``input`` with ``src`` (or ``value``) written along ``dim`` at ``index``."""
    return input.scatter(dim, index, src, value)


def scatter_add(input: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    """A copy of ``input`` with ``src`` added along ``dim`` at ``index``."""
    return input.scatter_add(dim, index, src)


def index_add(
    input: Tensor, dim: int, index: Tensor, source: Tensor, *, alpha: float = 1
) -> Tensor:
    """A copy of ``input`` with ``alpha * source`` added along ``dim`` at ``index``."""
    return input.index_add(dim, index, source, alpha=alpha)


def masked_fill(input: Tensor, mask: Tensor, value: Any) -> Tensor:
    """``input`` with ``value`` where ``mask`` is true."""
    return input.masked_fill(mask, value)


def masked_select(input: Tensor, mask: Tensor) -> Tensor:
    """The elements of ``input`` where ``mask`` is true (1-D)."""
    return input.masked_select(mask)


def take_along_dim(input: Tensor, indices: Tensor, dim: Optional[int] = None) -> Tensor:
    """``gather`` with broadcasting; flattened without ``dim``."""
    return input.take_along_dim(indices, dim)


def nonzero(input: Tensor, *, as_tuple: bool = False) -> Any:
    """Coordinates of the non-zero elements of ``input``."""
    return input.nonzero(as_tuple=as_tuple)


__all__ = [
    "gather",
    "index_add",
    "index_select",
    "masked_fill",
    "masked_select",
    "nonzero",
    "scatter",
    "scatter_add",
    "take_along_dim",
]
