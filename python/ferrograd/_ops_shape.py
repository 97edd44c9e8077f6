"""Function forms of the shape ops (``ferrograd.reshape``, ``ferrograd.cat``, ...). Each calls the
Tensor method or function bound in ``src/python/ops/shape.rs``."""

from __future__ import annotations

from typing import Any, Sequence, Tuple, Union

from . import _C
from ._ops_common import _method
from ._ops_linalg import einsum as einsum  # noqa: F401  (nn.functional calls _ops_shape.einsum)

Tensor = _C.Tensor


reshape = _method("reshape")
transpose = _method("transpose")
permute = _method("permute")
t = _method("t")
unsqueeze = _method("unsqueeze")
squeeze = _method("squeeze")
flatten = _method("flatten")
narrow = _method("narrow")
select = _method("select")


def cat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Concatenate ``tensors`` along ``dim`` (a copy; dtypes promote)."""
    return _C._cat(list(tensors), dim)


concat = cat


concatenate = cat


def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Stack equally shaped ``tensors`` along a new dim ``dim``."""
    return _C._stack(list(tensors), dim)


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


__all__ = [
    "broadcast_to",
    "cat",
    "chunk",
    "concat",
    "concatenate",
    "flatten",
    "flip",
    "moveaxis",
    "movedim",
    "narrow",
    "permute",
    "reshape",
    "roll",
    "select",
    "split",
    "squeeze",
    "stack",
    "t",
    "tile",
    "transpose",
    "unbind",
    "unflatten",
    "unsqueeze",
]
