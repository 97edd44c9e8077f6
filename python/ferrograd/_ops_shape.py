"""Function forms of the shape, indexing and linear-algebra ops (``ferrograd.cat``, ...)."""

from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple, Union

from . import _C

Tensor = _C.Tensor

__all__ = [
    "bmm",
    "broadcast_to",
    "cat",
    "chunk",
    "concat",
    "concatenate",
    "diag",
    "diagonal",
    "einsum",
    "flip",
    "gather",
    "index_add",
    "index_select",
    "masked_fill",
    "masked_select",
    "mm",
    "movedim",
    "moveaxis",
    "nonzero",
    "outer",
    "roll",
    "scatter",
    "scatter_add",
    "split",
    "stack",
    "take_along_dim",
    "tile",
    "trace",
    "tril",
    "triu",
    "unbind",
    "unflatten",
]


def cat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Concatenate ``tensors`` along ``dim`` (a copy; dtypes promote)."""
    return _C._cat(list(tensors), dim)


concat = cat
concatenate = cat


def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Stack equally shaped ``tensors`` along a new dim ``dim``."""
    return _C._stack(list(tensors), dim)


def einsum(equation: str, *operands: Any) -> Tensor:
    """Einstein summation over ``operands`` (also accepts one list of operands)."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    return _C._einsum(equation, list(operands))


def split(
    tensor: Tensor, split_size_or_sections: Union[int, Sequence[int]], dim: int = 0
) -> Tuple[Tensor, ...]:
    """Pieces of ``tensor`` along ``dim`` (views)."""
    return tensor.split(split_size_or_sections, dim)


def chunk(input: Tensor, chunks: int, dim: int = 0) -> Tuple[Tensor, ...]:
    """At most ``chunks`` equal pieces along ``dim`` (views)."""
    return input.chunk(chunks, dim)


def unbind(input: Tensor, dim: int = 0) -> Tuple[Tensor, ...]:
    """The slices of ``input`` along ``dim`` (views)."""
    return input.unbind(dim)


def flip(input: Tensor, dims: Sequence[int]) -> Tensor:
    """``input`` reversed along ``dims`` (a copy)."""
    return input.flip(dims)


def roll(input: Tensor, shifts: Any, dims: Any = None) -> Tensor:
    """``input`` shifted cyclically (a copy)."""
    return input.roll(shifts, dims)


def tile(input: Tensor, dims: Sequence[int]) -> Tensor:
    """``input`` tiled (a copy)."""
    return input.tile(dims)


def movedim(input: Tensor, source: Any, destination: Any) -> Tensor:
    """``input`` with dims ``source`` moved to ``destination`` (a view)."""
    return input.movedim(source, destination)


moveaxis = movedim


def unflatten(input: Tensor, dim: int, sizes: Sequence[int]) -> Tensor:
    """``input`` with dim ``dim`` split into ``sizes`` (a view)."""
    return input.unflatten(dim, sizes)


def broadcast_to(input: Tensor, size: Sequence[int]) -> Tensor:
    """``input`` broadcast to ``size`` (a view)."""
    return input.broadcast_to(size)


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


def mm(input: Tensor, mat2: Tensor) -> Tensor:
    """Strict 2-D matrix product."""
    return input.mm(mat2)


def bmm(input: Tensor, mat2: Tensor) -> Tensor:
    """Strict 3-D batched matrix product."""
    return input.bmm(mat2)


def outer(input: Tensor, vec2: Tensor) -> Tensor:
    """Outer product of two vectors."""
    return input.outer(vec2)


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
