"""Function forms of sorting, selection and counting (``ferrograd.sort``, ``topk``,
``median``, ``quantile``, ``unique``, ``searchsorted``, ``bincount``, ...), with torch's names,
keywords and overloads. Each calls the Tensor method or ``_C`` function bound in
``src/python/ops/sort.rs``."""

from __future__ import annotations

import builtins
from collections import namedtuple
from typing import Any, Optional

from . import _C

Tensor = _C.Tensor

_RETURN_TYPES = {
    name: namedtuple(name, ["values", "indices"])  # type: ignore[misc]
    for name in ("sort", "topk", "kthvalue", "median", "nanmedian", "mode", "cummax", "cummin")
}
for _t in _RETURN_TYPES.values():
    _t.__module__ = "ferrograd.return_types"


def _return_type(name: str, values: Tensor, indices: Tensor) -> Any:
    """``(values, indices)`` as torch's ``torch.return_types.<name>`` named tuple."""
    return _RETURN_TYPES[name](values, indices)


def sort(
    input: Tensor,
    dim: int = -1,
    descending: builtins.bool = False,
    stable: Optional[builtins.bool] = None,
) -> Any:
    """``(values, indices)`` sorted along ``dim``; NaN is the largest value."""
    return input.sort(dim, descending, stable=stable)


def argsort(
    input: Tensor,
    dim: int = -1,
    descending: builtins.bool = False,
    stable: Optional[builtins.bool] = None,
) -> Tensor:
    """The indices that sort ``input`` along ``dim``."""
    return input.argsort(dim, descending, stable=stable)


def msort(input: Tensor) -> Tensor:
    """``input`` sorted along its first dimension."""
    return input.msort()


def topk(
    input: Tensor,
    k: int,
    dim: int = -1,
    largest: builtins.bool = True,
    sorted: builtins.bool = True,
) -> Any:
    """``(values, indices)`` of the ``k`` largest (or smallest) elements along ``dim``."""
    return input.topk(k, dim, largest, sorted)


def kthvalue(input: Tensor, k: int, dim: int = -1, keepdim: builtins.bool = False) -> Any:
    """``(values, indices)`` of the ``k``-th smallest element along ``dim``."""
    return input.kthvalue(k, dim, keepdim)


def median(input: Tensor, dim: Optional[int] = None, keepdim: builtins.bool = False) -> Any:
    """The lower median of all elements, or ``(values, indices)`` along ``dim``."""
    return input.median(dim, keepdim)


def nanmedian(input: Tensor, dim: Optional[int] = None, keepdim: builtins.bool = False) -> Any:
    """``median`` ignoring NaN."""
    return input.nanmedian(dim, keepdim)


def mode(input: Tensor, dim: int = -1, keepdim: builtins.bool = False) -> Any:
    """``(values, indices)`` of the most frequent value along ``dim``."""
    return input.mode(dim, keepdim)


def cummax(input: Tensor, dim: int) -> Any:
    """``(values, indices)`` of the running maximum along ``dim``."""
    return input.cummax(dim)


def cummin(input: Tensor, dim: int) -> Any:
    """``(values, indices)`` of the running minimum along ``dim``."""
    return input.cummin(dim)


def quantile(
    input: Tensor,
    q: Any,
    dim: Optional[int] = None,
    keepdim: builtins.bool = False,
    *,
    interpolation: str = "linear",
) -> Tensor:
    """The ``q``-quantiles over ``dim`` (all elements when None)."""
    return input.quantile(q, dim, keepdim, interpolation=interpolation)


def nanquantile(
    input: Tensor,
    q: Any,
    dim: Optional[int] = None,
    keepdim: builtins.bool = False,
    *,
    interpolation: str = "linear",
) -> Tensor:
    """``quantile`` ignoring NaN."""
    return input.nanquantile(q, dim, keepdim, interpolation=interpolation)


def unique(
    input: Tensor,
    sorted: builtins.bool = True,
    return_inverse: builtins.bool = False,
    return_counts: builtins.bool = False,
    dim: Optional[int] = None,
) -> Any:
    """The sorted distinct elements (or slices along ``dim``), with the inverse indices and
    the counts when asked."""
    return input.unique(sorted, return_inverse, return_counts, dim)


def unique_consecutive(
    input: Tensor,
    return_inverse: builtins.bool = False,
    return_counts: builtins.bool = False,
    dim: Optional[int] = None,
) -> Any:
    """``input`` with runs of equal neighbours (slices along ``dim``) collapsed."""
    return input.unique_consecutive(return_inverse, return_counts, dim)


def _as_values(values: Any) -> Tensor:
    if isinstance(values, Tensor):
        return values
    if isinstance(values, (builtins.bool, int, float)):
        from ._creation import tensor
        from ._dtypes import float64, int64

        # As torch's Scalar overload: a Python float searches as float64, an int as int64.
        return tensor(values, dtype=float64 if isinstance(values, float) else int64)
    raise TypeError(f"values must be a Tensor or a number, not {type(values).__name__}")


def searchsorted(
    sorted_sequence: Tensor,
    input: Any,
    *,
    out_int32: builtins.bool = False,
    right: builtins.bool = False,
    side: Optional[str] = None,
    sorter: Optional[Tensor] = None,
) -> Tensor:
    """Indices where the elements of ``input`` would go in the sorted innermost dimension of
    ``sorted_sequence`` (``right``/``side='right'``: after equal elements)."""
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(
                f"torch.searchsorted(): side can only be 'left' or 'right' but got {side}"
            )
        if side == "left" and right:
            raise RuntimeError(
                "torch.searchsorted(): side and right can't be set to opposites, got side of "
                "left while right was True"
            )
        right = side == "right"
    values = _as_values(input)
    out = _C._searchsorted(sorted_sequence, values, right, sorter)
    return out.int() if out_int32 else out


def bucketize(
    input: Any,
    boundaries: Tensor,
    *,
    out_int32: builtins.bool = False,
    right: builtins.bool = False,
) -> Tensor:
    """The bucket index of each element of ``input`` among the 1-D sorted ``boundaries``."""
    out = _C._bucketize(_as_values(input), boundaries, right)
    return out.int() if out_int32 else out


def bincount(input: Tensor, weights: Optional[Tensor] = None, minlength: int = 0) -> Tensor:
    """How often each non-negative integer occurs in the 1-D ``input`` (or the sum of
    ``weights`` per value)."""
    return input.bincount(weights, minlength)


def histc(input: Tensor, bins: int = 100, min: float = 0, max: float = 0) -> Tensor:  # noqa: A002
    """Histogram with ``bins`` equal bins over ``[min, max]`` (the data's range when equal)."""
    return input.histc(bins, min, max)


def argwhere(input: Tensor) -> Tensor:
    """Coordinates of the nonzero elements, ``[count, ndim]``."""
    return input.argwhere()


def count_nonzero(input: Tensor, dim: Any = None) -> Tensor:
    """The number of nonzero elements over ``dim`` (all when None)."""
    return input.count_nonzero(dim)


__all__ = [
    "argsort",
    "argwhere",
    "bincount",
    "bucketize",
    "count_nonzero",
    "cummax",
    "cummin",
    "histc",
    "kthvalue",
    "median",
    "mode",
    "msort",
    "nanmedian",
    "nanquantile",
    "quantile",
    "searchsorted",
    "sort",
    "topk",
    "unique",
    "unique_consecutive",
]
