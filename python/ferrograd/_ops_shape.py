"""Function forms of the shape ops (``ferrograd.reshape``, ``ferrograd.cat``, ...). Each calls the
Tensor method or function bound in ``src/python/ops/shape.rs``."""

from __future__ import annotations

import warnings
from typing import Any, Optional, Sequence, Tuple, Union

from . import _C
from ._ops_common import _method
from ._ops_linalg import einsum as einsum  # noqa: F401  (nn.functional calls _ops_shape.einsum)
from ._size import Size

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


def _tensor_list(tensors: Any) -> list:
    """``f(t1, t2, ...)`` or ``f([t1, t2, ...])`` as a list."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        return list(tensors[0])
    return list(tensors)


def hstack(tensors: Sequence[Tensor]) -> Tensor:
    """Concatenation along dim 1 (dim 0 for vectors)."""
    return _C._hstack(list(tensors))


def vstack(tensors: Sequence[Tensor]) -> Tensor:
    """Concatenation along dim 0 of the inputs made at least 2-D."""
    return _C._vstack(list(tensors))


row_stack = vstack


def dstack(tensors: Sequence[Tensor]) -> Tensor:
    """Concatenation along dim 2 of the inputs made at least 3-D."""
    return _C._dstack(list(tensors))


def column_stack(tensors: Sequence[Tensor]) -> Tensor:
    """Vectors as columns (matrices as they are), concatenated along dim 1."""
    return _C._column_stack(list(tensors))


def _atleast(method: str, tensors: Any) -> Any:
    if len(tensors) == 1 and not isinstance(tensors[0], (list, tuple)):
        return getattr(tensors[0], method)()
    return tuple(getattr(t, method)() for t in _tensor_list(tensors))


def atleast_1d(*tensors: Any) -> Any:
    """Each input with at least one dim (a tuple for several inputs)."""
    return _atleast("_atleast_1d", tensors)


def atleast_2d(*tensors: Any) -> Any:
    """Each input with at least two dims (a tuple for several inputs)."""
    return _atleast("_atleast_2d", tensors)


def atleast_3d(*tensors: Any) -> Any:
    """Each input with at least three dims (a tuple for several inputs)."""
    return _atleast("_atleast_3d", tensors)


def meshgrid(*tensors: Any, indexing: Optional[str] = None) -> Tuple[Tensor, ...]:
    """Coordinate grids of 0-D/1-D tensors: ``indexing="ij"`` (the default, with torch's
    warning when it is not given) or ``"xy"``."""
    if indexing is None:
        warnings.warn(
            "torch.meshgrid: in an upcoming release, it will be required to pass the indexing "
            "argument.",
            UserWarning,
            stacklevel=2,
        )
        indexing = "ij"
    return _C._meshgrid(_tensor_list(tensors), indexing)


def broadcast_tensors(*tensors: Tensor) -> Tuple[Tensor, ...]:
    """Every input expanded (a view) to the shape they broadcast to."""
    return _C._broadcast_tensors(_tensor_list(tensors))


def broadcast_shapes(*shapes: Any) -> Size:
    """The shape that tensors of ``shapes`` (ints or sequences of ints) broadcast to."""
    dims = []
    for s in shapes:
        if isinstance(s, int) or hasattr(s, "__index__"):
            dims.append([int(s)])
        else:
            dims.append([int(v) for v in s])
    return Size(_C._broadcast_shapes(dims))


def cartesian_prod(*tensors: Tensor) -> Tensor:
    """Every combination of one element from each 1-D input, one row each."""
    return _C._cartesian_prod(_tensor_list(tensors))


def combinations(input: Tensor, r: int = 2, with_replacement: bool = False) -> Tensor:
    """The length-``r`` combinations of the elements of a 1-D ``input``, one row each."""
    return _C._combinations(input, r, with_replacement)


def block_diag(*tensors: Tensor) -> Tensor:
    """The inputs (scalars, vectors as rows, matrices) on the diagonal of a zero matrix."""
    return _C._block_diag(list(tensors))


def rot90(input: Tensor, k: int = 1, dims: Sequence[int] = (0, 1)) -> Tensor:
    """``input`` rotated by 90 degrees ``k`` times in the plane of ``dims``."""
    return input.rot90(k, list(dims))


def diff(
    input: Tensor,
    n: int = 1,
    dim: int = -1,
    prepend: Optional[Tensor] = None,
    append: Optional[Tensor] = None,
) -> Tensor:
    """The ``n``-th forward difference along ``dim``."""
    return input.diff(n, dim, prepend, append)


__all__ = [
    "atleast_1d",
    "atleast_2d",
    "atleast_3d",
    "block_diag",
    "broadcast_shapes",
    "broadcast_tensors",
    "cartesian_prod",
    "column_stack",
    "combinations",
    "diff",
    "dstack",
    "hstack",
    "meshgrid",
    "rot90",
    "row_stack",
    "vstack",
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
