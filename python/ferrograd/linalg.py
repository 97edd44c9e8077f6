"""``ferrograd.linalg``: torch.linalg's names, keywords, named-tuple results and
``LinAlgError``. The math (factorisations through faer, backward rules) is in the crate
(``src/ops/linalg/``); these functions handle arguments and torch's conventions."""

from __future__ import annotations

import functools
import math
from collections import namedtuple
from typing import Any, Callable, List, Optional, Sequence, Tuple, TypeVar, Union

from . import _C
from ._autocast_policy import float32 as _autocast_float32

Tensor = _C.Tensor
_Dim = Union[int, Sequence[int], None]
_F = TypeVar("_F", bound=Callable[..., Any])

__all__ = [
    "LinAlgError",
    "cholesky",
    "cholesky_ex",
    "cross",
    "det",
    "eigh",
    "eigvalsh",
    "inv",
    "inv_ex",
    "lstsq",
    "matrix_exp",
    "matrix_norm",
    "matrix_power",
    "multi_dot",
    "norm",
    "pinv",
    "qr",
    "slogdet",
    "solve",
    "svd",
    "svdvals",
    "vecdot",
    "vector_norm",
]


class LinAlgError(RuntimeError):
    """A matrix the operation cannot handle (singular for ``inv``/``solve``, not
    positive-definite for ``cholesky``): torch's ``torch.linalg.LinAlgError``, a
    ``RuntimeError``."""


# Messages of numerical failures (the rest, e.g. shape errors, stay RuntimeError as in torch).
_LINALG_FAILURES = (
    "the input matrix is singular",
    "is not positive-definite",
    "failed to converge",
)


def _linalg_errors(f: _F) -> _F:
    """Re-raise the crate's numerical-failure errors as ``LinAlgError``."""

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return f(*args, **kwargs)
        except RuntimeError as e:
            if not isinstance(e, LinAlgError) and any(m in str(e) for m in _LINALG_FAILURES):
                raise LinAlgError(str(e)) from None
            raise

    return wrapper  # type: ignore[return-value]


def _return_type(name: str, fields: Sequence[str]) -> Any:
    t = namedtuple(name, list(fields))  # type: ignore[misc]
    t.__module__ = "ferrograd.return_types"
    return t


_InvEx = _return_type("linalg_inv_ex", ["inverse", "info"])
_CholeskyEx = _return_type("linalg_cholesky_ex", ["L", "info"])
_Slogdet = _return_type("linalg_slogdet", ["sign", "logabsdet"])
_Qr = _return_type("linalg_qr", ["Q", "R"])
_Eigh = _return_type("linalg_eigh", ["eigenvalues", "eigenvectors"])
_Svd = _return_type("linalg_svd", ["U", "S", "Vh"])
_Lstsq = _return_type("linalg_lstsq", ["solution", "residuals", "rank", "singular_values"])


def _tensors(fn: str, *named: Tuple[str, Any]) -> None:
    """torch's TypeError for an argument that is not a Tensor (``linalg_inv(): argument 'A'
    (position 1) must be Tensor, not int``)."""
    for pos, (name, x) in enumerate(named, 1):
        if not isinstance(x, Tensor):
            raise TypeError(
                f"{fn}(): argument '{name}' (position {pos}) must be Tensor, not {type(x).__name__}"
            )


def _out(result: Any, out: Any) -> Any:
    if out is not None:
        raise TypeError("ferrograd.linalg: the out= argument is not supported")
    return result


@_linalg_errors
@_autocast_float32
def inv(A: Tensor, *, out: Any = None) -> Tensor:
    """The inverse of a square matrix (or of each in a batch); ``LinAlgError`` when singular.
    Gradient ``-A⁻ᵀ g A⁻ᵀ``."""
    _tensors("linalg_inv", ("A", A))
    return _out(_C._linalg_inv(A), out)


@_autocast_float32
def inv_ex(A: Tensor, *, check_errors: bool = False, out: Any = None) -> Any:
    """``(inverse, info)``: ``info`` (int64, per matrix) is 0, or the index of the zero pivot
    of a singular matrix (whose inverse then holds non-finite values)."""
    _tensors("linalg_inv_ex", ("A", A))
    if check_errors:
        inv(A)
    return _out(_InvEx(*_C._linalg_inv_ex(A)), out)


@_linalg_errors
@_autocast_float32
def solve(A: Tensor, B: Tensor, *, left: bool = True, out: Any = None) -> Tensor:
    """The solution ``X`` of ``A X = B`` (``X A = B`` when not ``left``), batched with
    broadcasting; ``B`` may be a (batch of) vector(s). ``LinAlgError`` when ``A`` is singular."""
    _tensors("linalg_solve", ("A", A), ("B", B))
    return _out(_C._linalg_solve(A, B, left), out)


def det(A: Tensor, *, out: Any = None) -> Tensor:
    """The determinant (batched). Its gradient is finite at singular matrices (the cofactor
    matrix, through an SVD)."""
    _tensors("linalg_det", ("A", A))
    return _out(_C._linalg_det(A), out)


def slogdet(A: Tensor, *, out: Any = None) -> Any:
    """``(sign, logabsdet)`` (batched): sign 0 and ``-inf`` for a singular matrix."""
    _tensors("linalg_slogdet", ("A", A))
    return _out(_Slogdet(*_C._linalg_slogdet(A)), out)


@_linalg_errors
@_autocast_float32
def cholesky(A: Tensor, *, upper: bool = False, out: Any = None) -> Tensor:
    """The lower Cholesky factor ``L`` (``A = L Lᵀ``, from the lower triangle), or ``Lᵀ`` when
    ``upper``; ``LinAlgError`` when ``A`` is not positive-definite."""
    _tensors("linalg_cholesky", ("input", A))
    return _out(_C._linalg_cholesky(A, upper), out)


@_autocast_float32
def cholesky_ex(
    A: Tensor, *, upper: bool = False, check_errors: bool = False, out: Any = None
) -> Any:
    """``(L, info)``: ``info`` (int64, per matrix) is 0, or the order of the first leading
    minor that is not positive-definite."""
    _tensors("linalg_cholesky_ex", ("input", A))
    if check_errors:
        cholesky(A, upper=upper)
    return _out(_CholeskyEx(*_C._linalg_cholesky_ex(A, upper)), out)


@_autocast_float32
def qr(A: Tensor, mode: str = "reduced", *, out: Any = None) -> Any:
    """``(Q, R)`` with ``A = Q R``: ``mode`` ``'reduced'`` (``Q`` ``m×k``), ``'complete'``
    (``Q`` ``m×m``) or ``'r'`` (``Q`` empty, not differentiable)."""
    _tensors("linalg_qr", ("A", A))
    return _out(_Qr(*_C._linalg_qr(A, mode)), out)


def _uplo(UPLO: str) -> bool:
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    return UPLO == "L"


@_linalg_errors
@_autocast_float32
def eigh(A: Tensor, UPLO: str = "L", *, out: Any = None) -> Any:
    """``(eigenvalues, eigenvectors)`` of a symmetric matrix from its ``UPLO`` triangle:
    eigenvalues ascending. The eigenvectors' gradient is finite only for distinct
    eigenvalues, as in torch."""
    _tensors("linalg_eigh", ("input", A))
    return _out(_Eigh(*_C._linalg_eigh(A, _uplo(UPLO))), out)


@_linalg_errors
@_autocast_float32
def eigvalsh(A: Tensor, UPLO: str = "L", *, out: Any = None) -> Tensor:
    """The eigenvalues of a symmetric matrix, ascending."""
    _tensors("linalg_eigvalsh", ("input", A))
    return _out(_C._linalg_eigvalsh(A, _uplo(UPLO)), out)


@_linalg_errors
@_autocast_float32
def svd(
    A: Tensor, full_matrices: bool = True, *, driver: Optional[str] = None, out: Any = None
) -> Any:
    """``(U, S, Vh)`` with ``A = U diag(S) Vh``, ``S`` descending; ``full_matrices=False``
    gives the thin factors. The gradient through ``U``/``Vh`` is finite only for distinct
    singular values, as in torch."""
    _tensors("linalg_svd", ("A", A))
    return _out(_Svd(*_C._linalg_svd(A, full_matrices)), out)


@_linalg_errors
@_autocast_float32
def svdvals(A: Tensor, *, driver: Optional[str] = None, out: Any = None) -> Tensor:
    """The singular values, descending."""
    _tensors("linalg_svdvals", ("A", A))
    return _out(_C._linalg_svdvals(A), out)


def _number(x: Any, what: str) -> Optional[float]:
    if x is None:
        return None
    if isinstance(x, Tensor):
        if x.numel() != 1:
            raise NotImplementedError(
                f"linalg.pinv: a tensor {what} with more than one element is not supported"
            )
        return float(x.item())
    return float(x)


@_linalg_errors
@_autocast_float32
def pinv(
    A: Tensor,
    *,
    atol: Any = None,
    rtol: Any = None,
    hermitian: bool = False,
    out: Any = None,
) -> Tensor:
    """The Moore–Penrose pseudo-inverse: singular values at most ``max(atol, rtol·σ_max)``
    count as zero (``rtol`` defaults to ``eps·max(m, n)`` when neither is given)."""
    _tensors("linalg_pinv", ("input", A))
    return _out(_C._linalg_pinv(A, _number(atol, "atol"), _number(rtol, "rtol"), hermitian), out)


@_linalg_errors
@_autocast_float32
def lstsq(
    A: Tensor, B: Tensor, rcond: Optional[float] = None, *, driver: Optional[str] = None
) -> Any:
    """``(solution, residuals, rank, singular_values)`` of ``min ‖A X - B‖`` (minimum-norm for
    rank-deficient ``A``), batched. As torch on CPU: ``rank`` for every driver but ``'gels'``;
    ``singular_values``, and ``residuals`` (when ``m > n`` and every matrix has full rank),
    only for ``'gelsd'``/``'gelss'``; otherwise empty tensors."""
    _tensors("linalg_lstsq", ("input", A), ("b", B))
    if driver is None:
        driver = "gelsy"
    if driver not in ("gels", "gelsy", "gelsd", "gelss"):
        raise RuntimeError(
            "torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)"
        )
    X = _C._linalg_lstsq(A, B, rcond)
    m, n = A.shape[-2], A.shape[-1]
    empty = A.new_zeros((0,))
    rank = A.new_zeros((0,), dtype=_C.int64)
    S: Optional[Tensor] = None
    if driver != "gels":
        S = svdvals(A.detach())
        eps = 1.1920928955078125e-07 if A.dtype == _C.float32 else 2.220446049250313e-16
        tol = (rcond if rcond is not None else eps * max(m, n)) * S.amax(-1, keepdim=True)
        rank = (S > tol).sum(-1)
    sv, residuals = empty, empty
    if driver in ("gelsd", "gelss") and S is not None:
        sv = S
        if m > n and bool((rank == n).all()):
            vector = B.dim() == A.dim() - 1
            Bm = B.unsqueeze(-1) if vector else B
            Xm = X.unsqueeze(-1) if vector else X
            residuals = (A.matmul(Xm) - Bm).pow(2).sum(-2)
            if vector:
                residuals = residuals.squeeze(-1)
    return _Lstsq(X, residuals, rank, sv)


def matrix_power(A: Tensor, n: int, *, out: Any = None) -> Tensor:
    """``A^n`` for an integer ``n`` (the identity for 0, powers of the inverse for ``n < 0``)."""
    _tensors("linalg_matrix_power", ("input", A))
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(
            f"linalg_matrix_power(): argument 'n' (position 2) must be int, not {type(n).__name__}"
        )
    return _out(_linalg_errors(_C._linalg_matrix_power)(A, n), out)


def matrix_exp(A: Tensor) -> Tensor:
    """The matrix exponential (Padé scaling and squaring); its gradient is a block
    ``matrix_exp``, so it is twice differentiable."""
    _tensors("linalg_matrix_exp", ("input", A))
    return _C._linalg_matrix_exp(A)


def cross(input: Tensor, other: Tensor, *, dim: int = -1, out: Any = None) -> Tensor:
    """The cross product of 3-vectors along ``dim`` (inputs broadcast)."""
    _tensors("linalg_cross", ("input", input), ("other", other))
    return _out(_C._linalg_cross(input, other, dim), out)


def vecdot(x: Tensor, y: Tensor, *, dim: int = -1, out: Any = None) -> Tensor:
    """``Σ x·y`` along ``dim`` (inputs broadcast)."""
    _tensors("linalg_vecdot", ("x", x), ("y", y))
    return _out(_C._linalg_vecdot(x, y, dim), out)


def multi_dot(tensors: Sequence[Tensor], *, out: Any = None) -> Tensor:
    """The product of a chain of matrices in the cheapest order; the first and the last may
    be vectors."""
    return _out(_C._linalg_multi_dot(list(tensors)), out)


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
    """Matrix norm over the two dims ``dim``: ``'fro'``, ``'nuc'`` (sum of singular values),
    ``2``/``-2`` (largest/smallest singular value), or the induced ``1``/``-1`` (max/min
    column sum of ``|A|``) and ``inf``/``-inf`` (max/min row sum)."""
    A = _cast(A, dtype)
    d0, d1 = _matrix_dims(A, tuple(dim))  # type: ignore[arg-type]
    if ord == "fro":
        return A._vector_norm(2.0, (d0, d1), keepdim)
    if ord in ("nuc", 2, -2):
        # The singular values of the (d0, d1) planes, moved to the last two dims.
        perm: List[int] = [i for i in range(A.dim()) if i not in (d0, d1)] + [d0, d1]
        S = svdvals(A.permute(perm))
        if ord == "nuc":
            r = S.sum(-1)
        elif ord == 2:
            r = S.amax(-1)
        else:
            r = S.amin(-1)
        if keepdim:
            r = r.unsqueeze(min(d0, d1)).unsqueeze(max(d0, d1))
        return r
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
