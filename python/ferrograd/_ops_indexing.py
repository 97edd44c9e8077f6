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


def index_copy(input: Tensor, dim: int, index: Tensor, source: Tensor) -> Tensor:
    """A copy of ``input`` with its slices along ``dim`` at ``index`` replaced by ``source``'s."""
    return input.index_copy(dim, index, source)


def index_fill(input: Tensor, dim: int, index: Tensor, value: Any) -> Tensor:
    """A copy of ``input`` with its slices along ``dim`` at ``index`` set to ``value``."""
    return input.index_fill(dim, index, value)


def scatter_reduce(
    input: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, *, include_self: bool = True
) -> Tensor:
    """``src`` reduced ("sum", "prod", "mean", "amax", "amin") into a copy of ``input`` along
    ``dim`` at ``index``."""
    return input.scatter_reduce(dim, index, src, reduce, include_self=include_self)


def take(input: Tensor, index: Tensor) -> Tensor:
    """The elements of ``input`` (taken as 1-D) at ``index``, shaped like ``index``."""
    return input.take(index)


def masked_scatter(input: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    """A copy of ``input`` whose positions where ``mask`` is true take ``source``'s elements."""
    return input.masked_scatter(mask, source)


def repeat_interleave(
    input: Tensor, repeats: Any = None, dim: Optional[int] = None, *, output_size: Any = None
) -> Tensor:
    """Each slice of ``input`` along ``dim`` repeated ``repeats`` times (flattened without
    ``dim``); with ``input`` alone, an int64 tensor of counts: each index repeated so often."""
    if repeats is None:
        return _C._repeat_index(input, output_size=output_size)
    return input.repeat_interleave(repeats, dim, output_size=output_size)


__all__ = [
    "index_copy",
    "index_fill",
    "masked_scatter",
    "repeat_interleave",
    "scatter_reduce",
    "take",
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
