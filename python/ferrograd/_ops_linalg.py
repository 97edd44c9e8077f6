"""Function forms of ``crate::ops::linalg`` (``ferrograd.einsum``, ``trace``, ``diag``, ``tril``,
...) and torch's top-level linear-algebra aliases (``inverse``, ``det``, ``svd``, ``qr``, ...)
with their older signatures, which the Tensor methods of the same names call. Each calls the
Tensor method or function bound in ``src/python/ops/linalg.rs`` or ``ferrograd.linalg``."""

from __future__ import annotations

import warnings
from collections import namedtuple
from typing import Any, Optional

from . import _C
from . import linalg as _linalg
from ._autocast_policy import float32 as _autocast_float32

Tensor = _C.Tensor

_Slogdet = namedtuple("slogdet", ["sign", "logabsdet"])  # type: ignore[name-match]
_Svd = namedtuple("svd", ["U", "S", "V"])  # type: ignore[name-match]
_Qr = namedtuple("qr", ["Q", "R"])  # type: ignore[name-match]
for _t in (_Slogdet, _Svd, _Qr):
    _t.__module__ = "ferrograd.return_types"


def inverse(input: Tensor, *, out: Any = None) -> Tensor:
    """``torch.inverse``: ``linalg.inv``."""
    return _linalg.inv(input, out=out)


def det(input: Tensor) -> Tensor:
    """``torch.det``: ``linalg.det``."""
    return _linalg.det(input)


def logdet(input: Tensor) -> Tensor:
    """``log det(input)``: NaN for a negative determinant, ``-inf`` for a singular matrix."""
    return _C._linalg_logdet(input)


def slogdet(input: Tensor) -> Any:
    """``(sign, logabsdet)`` as ``torch.return_types.slogdet``."""
    return _Slogdet(*_C._linalg_slogdet(input))


def svd(input: Tensor, some: bool = True, compute_uv: bool = True, *, out: Any = None) -> Any:
    """``torch.svd``: ``(U, S, V)`` (``V``, not ``Vᴴ``), thin when ``some``; with
    ``compute_uv=False``, ``U`` and ``V`` are zero-filled and square."""
    if out is not None:
        raise TypeError("ferrograd.svd: the out= argument is not supported")
    if not compute_uv:
        # torch: zero-filled U (m x m) and V (n x n) whatever `some` says.
        S = _linalg.svdvals(input)
        *batch, m, n = input.shape
        return _Svd(input.new_zeros((*batch, m, m)), S, input.new_zeros((*batch, n, n)))
    U, S, Vh = _linalg.svd(input, full_matrices=not some)
    return _Svd(U, S, Vh.mT)


def qr(input: Tensor, some: bool = True, *, out: Any = None) -> Any:
    """``torch.qr``: ``(Q, R)``, reduced when ``some``, else complete."""
    if out is not None:
        raise TypeError("ferrograd.qr: the out= argument is not supported")
    return _Qr(*_linalg.qr(input, "reduced" if some else "complete"))


def cholesky(input: Tensor, upper: bool = False, *, out: Any = None) -> Tensor:
    """``torch.cholesky`` (deprecated in torch for ``linalg.cholesky``)."""
    return _linalg.cholesky(input, upper=upper, out=out)


def pinverse(input: Tensor, rcond: float = 1e-15) -> Tensor:
    """``torch.pinverse``: ``linalg.pinv`` with relative cutoff ``rcond``."""
    return _linalg.pinv(input, rtol=rcond)


def matrix_power(input: Tensor, n: int) -> Tensor:
    """``torch.matrix_power``: ``linalg.matrix_power``."""
    return _linalg.matrix_power(input, n)


def matrix_exp(input: Tensor) -> Tensor:
    """``torch.matrix_exp``: ``linalg.matrix_exp``."""
    return _linalg.matrix_exp(input)


def cross(input: Tensor, other: Tensor, dim: Optional[int] = None, *, out: Any = None) -> Tensor:
    """``torch.cross``: without ``dim``, the first dim of size 3 (deprecated in torch, with
    its warning)."""
    if dim is None:
        warnings.warn(
            "Using torch.cross without specifying the dim arg is deprecated.\n"
            "Please either pass the dim explicitly or simply use torch.linalg.cross.\n"
            "The default value of dim will change to agree with that of linalg.cross in a "
            "future release.",
            UserWarning,
            stacklevel=2,
        )
        a, b = list(input.shape), list(other.shape)
        n = max(len(a), len(b))
        a, b = [1] * (n - len(a)) + a, [1] * (n - len(b)) + b
        shape = [max(x, y) if min(x, y) != 0 else 0 for x, y in zip(a, b)]
        dim = next((i for i, s in enumerate(shape) if s == 3), -1)
    return _linalg.cross(input, other, dim=dim, out=out)


def _tensor_method(name: str) -> Any:
    """The function a Tensor method of this family forwards to (``Tensor.svd`` → ``svd``)."""
    return globals()[name]


def einsum(equation: str, *operands: Any) -> Tensor:
    """Einstein summation over ``operands`` (also accepts one list of operands)."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    return _C._einsum(equation, list(operands))


@_autocast_float32
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


__all__ = [
    "cholesky",
    "cross",
    "det",
    "diag",
    "diagonal",
    "einsum",
    "inverse",
    "logdet",
    "matrix_exp",
    "matrix_power",
    "pinverse",
    "qr",
    "slogdet",
    "svd",
    "trace",
    "tril",
    "triu",
]
