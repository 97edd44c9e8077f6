"""Function forms of the reductions (``ferrograd.sum``, ``ferrograd.max``, ``ferrograd.var``, ...),
with torch's names, keywords and overloads. Each calls the Tensor method bound in
``src/python/ops/reduce.rs``."""

from __future__ import annotations

import builtins
from collections import namedtuple
from typing import Any, Optional, Sequence, Union

from . import _C
from ._ops_common import _method

Tensor = _C.Tensor
_Dim = Union[int, Sequence[int], None]


_RETURN_TYPES = {
    name: namedtuple(name, ["values", "indices"])  # type: ignore[misc]
    for name in ("max", "min")
}
for _t in _RETURN_TYPES.values():
    _t.__module__ = "ferrograd.return_types"


def _return_type(name: str, values: Tensor, indices: Tensor) -> Any:
    """``(values, indices)`` as torch's ``torch.return_types.<name>`` named tuple."""
    return _RETURN_TYPES[name](values, indices)


sum = _method("sum")  # noqa: A001
mean = _method("mean")


def prod(
    input: Tensor, dim: _Dim = None, keepdim: builtins.bool = False, *, dtype: Any = None
) -> Tensor:
    """Product over all elements or ``dim``; exact gradients with zeros present."""
    return input.prod(dim, keepdim, dtype=dtype)


def amax(input: Tensor, dim: _Dim = (), keepdim: builtins.bool = False) -> Tensor:
    """Largest elements over ``dim`` (all when empty); ties share the gradient evenly."""
    return input.amax(dim, keepdim)


def amin(input: Tensor, dim: _Dim = (), keepdim: builtins.bool = False) -> Tensor:
    """Smallest elements over ``dim`` (all when empty); ties share the gradient evenly."""
    return input.amin(dim, keepdim)


def max(input: Tensor, dim: Any = None, keepdim: builtins.bool = False) -> Any:  # noqa: A001
    """``max(input)``, ``max(input, dim, keepdim=False)`` -> ``(values, indices)``, or
    ``max(input, other)`` (elementwise)."""
    return input.max(dim, keepdim)


def min(input: Tensor, dim: Any = None, keepdim: builtins.bool = False) -> Any:  # noqa: A001
    """``min(input)``, ``min(input, dim, keepdim=False)`` -> ``(values, indices)``, or
    ``min(input, other)`` (elementwise)."""
    return input.min(dim, keepdim)


def argmax(input: Tensor, dim: Optional[int] = None, keepdim: builtins.bool = False) -> Tensor:
    """Index of the largest element (of the flattened tensor when ``dim`` is None)."""
    return input.argmax(dim, keepdim)


def argmin(input: Tensor, dim: Optional[int] = None, keepdim: builtins.bool = False) -> Tensor:
    """Index of the smallest element (of the flattened tensor when ``dim`` is None)."""
    return input.argmin(dim, keepdim)


def var(
    input: Tensor,
    dim: Any = None,
    unbiased: Optional[builtins.bool] = None,
    keepdim: builtins.bool = False,
    *,
    correction: Optional[float] = None,
) -> Tensor:
    """Variance over ``dim`` divided by ``N - correction`` (default 1; ``unbiased`` legacy)."""
    return input.var(dim, unbiased, keepdim, correction=correction)


def std(
    input: Tensor,
    dim: Any = None,
    unbiased: Optional[builtins.bool] = None,
    keepdim: builtins.bool = False,
    *,
    correction: Optional[float] = None,
) -> Tensor:
    """Standard deviation over ``dim`` (see ``var``)."""
    return input.std(dim, unbiased, keepdim, correction=correction)


def nansum(
    input: Tensor, dim: Any = None, keepdim: builtins.bool = False, *, dtype: Any = None
) -> Tensor:
    """Sum over ``dim`` (all elements when None) with NaN taken as zero."""
    return input.nansum(dim, keepdim, dtype=dtype)


def nanmean(
    input: Tensor, dim: Any = None, keepdim: builtins.bool = False, *, dtype: Any = None
) -> Tensor:
    """Mean over ``dim`` of the elements that are not NaN."""
    return input.nanmean(dim, keepdim, dtype=dtype)


def std_mean(
    input: Tensor,
    dim: Any = None,
    unbiased: Optional[builtins.bool] = None,
    keepdim: builtins.bool = False,
    *,
    correction: Optional[float] = None,
) -> tuple:
    """``(std, mean)`` over ``dim``."""
    mean = input.mean(dim, keepdim) if dim is not None else input.mean()
    if dim is None and keepdim:
        mean = mean.reshape([1] * input.dim())
    return input.std(dim, unbiased, keepdim, correction=correction), mean


def var_mean(
    input: Tensor,
    dim: Any = None,
    unbiased: Optional[builtins.bool] = None,
    keepdim: builtins.bool = False,
    *,
    correction: Optional[float] = None,
) -> tuple:
    """``(var, mean)`` over ``dim``."""
    _, mean = std_mean(input, dim, unbiased, keepdim, correction=correction)
    return input.var(dim, unbiased, keepdim, correction=correction), mean


def norm(
    input: Tensor,
    p: Any = "fro",
    dim: _Dim = None,
    keepdim: builtins.bool = False,
    dtype: Any = None,
) -> Tensor:
    """The ``p``-norm over ``dim`` (all when None); ``'fro'`` is the 2-norm of the elements."""
    return input.norm(p, dim, keepdim, dtype)


def cumsum(input: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    """Cumulative sum along ``dim``."""
    return input.cumsum(dim, dtype=dtype)


def cumprod(input: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    """Cumulative product along ``dim``; exact gradients with zeros present."""
    return input.cumprod(dim, dtype=dtype)


def all(input: Tensor, dim: _Dim = None, keepdim: builtins.bool = False) -> Tensor:  # noqa: A001
    """Whether all elements (over ``dim``) are nonzero (bool)."""
    return input.all(dim, keepdim)


def any(input: Tensor, dim: _Dim = None, keepdim: builtins.bool = False) -> Tensor:  # noqa: A001
    """Whether any element (over ``dim``) is nonzero (bool)."""
    return input.any(dim, keepdim)


__all__ = [
    "nanmean",
    "nansum",
    "std_mean",
    "var_mean",
    "all",
    "amax",
    "amin",
    "any",
    "argmax",
    "argmin",
    "cumprod",
    "cumsum",
    "max",
    "mean",
    "min",
    "norm",
    "prod",
    "std",
    "sum",
    "var",
]
