"""``nn.utils.parametrizations``: ``weight_norm``, ``spectral_norm`` and ``orthogonal`` as
parametrizations (torch's ``torch/nn/utils/parametrizations.py``), composed of differentiable
tensor ops. ``orthogonal``'s ``householder`` map builds the product of reflectors with matmuls
(ferrograd has no ``linalg.householder_product``), and its ``right_inverse`` takes the Q of
``linalg.qr`` (torch: ``geqrf`` + ``householder_product``, the same matrix);
``use_trivialization=False`` with ``householder`` needs ``geqrf`` and is not supported."""

from __future__ import annotations

from enum import Enum, auto
from typing import Any, Dict, List, Optional, Tuple

from ... import _C
from ...autograd.grad_mode import no_grad
from .. import functional as F
from ..modules.module import Module
from . import parametrize

Tensor = _C.Tensor

__all__ = ["orthogonal", "spectral_norm", "weight_norm"]


# ----- orthogonal ----------------------------------------------------------------------------


def _eye_like(X: Tensor, n: int, k: int) -> Tensor:
    from ..._creation import eye

    return eye(n, k, dtype=X.dtype)


def _is_orthogonal(Q: Tensor) -> bool:
    from ..._dtypes import finfo

    n, k = Q.size(-2), Q.size(-1)
    eps = 10.0 * n * finfo(Q.dtype).eps
    return bool((Q.mT @ Q).allclose(_eye_like(Q, k, k).expand(Q.mT.shape[:-1] + (k,)), atol=eps))


def _make_orthogonal(A: Tensor) -> Tensor:
    """The Q of A's QR decomposition with R's diagonal made positive (unique for full rank)."""
    from ... import linalg

    Q, R = linalg.qr(A)
    return Q * R.diagonal(dim1=-2, dim2=-1).sign().unsqueeze(-2)


def _householder_product(A: Tensor, tau: Tensor) -> Tensor:
    """The first ``k`` columns of ``H_1 ... H_k``, ``H_i = I - tau_i v_i v_i^T``, where ``v_i``
    is column ``i`` of ``A`` below the diagonal with a 1 on it (``linalg.householder_product``
    for real input), as a chain of differentiable matmuls."""
    n, k = A.size(-2), A.size(-1)
    eye = _eye_like(A, n, k)
    V = A.tril(-1) + eye
    Q = eye.expand(A.shape)
    for i in reversed(range(k)):
        v = V[..., :, i : i + 1]
        t = tau[..., i : i + 1].unsqueeze(-1)
        Q = Q - (t * v) @ (v.mT @ Q)
    return Q


class _OrthMaps(Enum):
    matrix_exp = auto()
    cayley = auto()
    householder = auto()


class _Orthogonal(Module):
    base: Tensor

    def __init__(
        self, weight: Tensor, orthogonal_map: _OrthMaps, *, use_trivialization: bool = True
    ) -> None:
        super().__init__()
        self.shape = weight.shape
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, X: Tensor) -> Tensor:
        from ... import _ops_linalg, linalg
        from ..._ops_binary import add
        from ..._ops_shape import cat

        n, k = X.size(-2), X.size(-1)
        transposed = n < k
        if transposed:
            X = X.mT
            n, k = k, n
        # X is now n x k with n >= k.
        if self.orthogonal_map in (_OrthMaps.matrix_exp, _OrthMaps.cayley):
            X = X.tril()
            if n != k:
                X = cat([X, X.new_zeros(n, n - k).expand(*X.shape[:-2], -1, -1)], dim=-1)
            A = X - X.mT
            if self.orthogonal_map == _OrthMaps.matrix_exp:
                Q = _ops_linalg.matrix_exp(A)
            else:
                Id = _eye_like(A, n, n)
                Q = linalg.solve(add(Id, A, alpha=-0.5), add(Id, A, alpha=0.5))
            if n != k:
                Q = Q[..., :k]
        else:
            A = X.tril(diagonal=-1)
            tau = 2.0 / (1.0 + (A * A).sum(dim=-2))
            Q = _householder_product(A, tau)
            # The diagonal of X holds the sign of each column (-1 after right_inverse).
            Q = Q * X.diagonal(dim1=-2, dim2=-1).int().unsqueeze(-2)
        if hasattr(self, "base"):
            Q = self.base @ Q
        if transposed:
            Q = Q.mT
        return Q

    def right_inverse(self, Q: Tensor) -> Tensor:
        with no_grad():
            return self._right_inverse(Q)

    def _right_inverse(self, Q: Tensor) -> Tensor:
        from ..._creation import randn
        from ..._ops_shape import cat

        if tuple(Q.shape) != tuple(self.shape):
            raise ValueError(
                f"Expected a matrix or batch of matrices of shape {self.shape}. "
                f"Got a tensor of shape {Q.shape}."
            )
        Q_init = Q
        n, k = Q.size(-2), Q.size(-1)
        transpose = n < k
        if transpose:
            Q = Q.mT
            n, k = k, n
        if not hasattr(self, "base"):
            if self.orthogonal_map in (_OrthMaps.cayley, _OrthMaps.matrix_exp):
                raise NotImplementedError(
                    "It is not possible to assign to the matrix exponential "
                    "or the Cayley parametrizations when use_trivialization=False."
                )
            raise NotImplementedError(
                "ferrograd: assigning to the householder parametrization with "
                "use_trivialization=False needs geqrf, which ferrograd does not have"
            )
        # With a base, any orthogonal Q is base @ forward(-I) (forward(-I) is the identity).
        if n == k:
            Q = Q.clone() if _is_orthogonal(Q) else _make_orthogonal(Q)
        else:
            N = randn(*(tuple(Q.shape[:-2]) + (n, n - k)), dtype=Q.dtype)
            Q = _make_orthogonal(cat([Q, N], dim=-1))
        self.base = Q
        neg_id = -_eye_like(Q_init, Q_init.size(-2), Q_init.size(-1))
        return neg_id.expand(Q_init.shape).clone()


def orthogonal(
    module: Module,
    name: str = "weight",
    orthogonal_map: Optional[str] = None,
    *,
    use_trivialization: bool = True,
) -> Module:
    """Constrain the matrix (or batch of matrices) ``module.<name>`` to be orthogonal: its
    columns (rows if it is wide) orthonormal, through ``matrix_exp`` or ``cayley`` of a skew
    matrix or a product of Householder reflectors (default: ``matrix_exp`` for square,
    ``householder`` otherwise). The weight keeps its value if it is orthogonal (else its QR's
    Q). Returns ``module``."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ValueError(
            f"Expected a matrix or batch of matrices. Got a tensor of {weight.ndim} dimensions."
        )
    if orthogonal_map is None:
        orthogonal_map = "matrix_exp" if weight.size(-2) == weight.size(-1) else "householder"
    orth_enum = getattr(_OrthMaps, orthogonal_map, None)
    if orth_enum is None:
        raise ValueError(
            'orthogonal_map has to be one of "matrix_exp", "cayley", "householder". '
            f"Got: {orthogonal_map}"
        )
    if orth_enum == _OrthMaps.householder and not use_trivialization:
        raise NotImplementedError(
            "ferrograd: orthogonal(orthogonal_map='householder', use_trivialization=False) "
            "needs geqrf, which ferrograd does not have"
        )
    orth = _Orthogonal(weight, orth_enum, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, orth, unsafe=True)
    return module


# ----- weight_norm ---------------------------------------------------------------------------


def _norm_except_dim(v: Tensor, dim: int) -> Tensor:
    """torch's ``norm_except_dim(v, 2, dim)``: the 2-norm over every dimension but ``dim``,
    kept as size-1 dimensions; ``dim=-1`` is the norm of the whole tensor (a 0-d tensor)."""
    from ... import linalg

    if dim == -1:
        return linalg.vector_norm(v, 2)
    d = dim + v.dim() if dim < 0 else dim
    others = tuple(i for i in range(v.dim()) if i != d)
    if not others:
        return v.abs()
    return linalg.vector_norm(v, 2, dim=others, keepdim=True)


def _weight_norm(v: Tensor, g: Tensor, dim: int) -> Tensor:
    """torch's ``_weight_norm``: ``v * (g / norm_except_dim(v, 2, dim))``."""
    return v * (g / _norm_except_dim(v, dim))


class _WeightNorm(Module):
    def __init__(self, dim: Optional[int] = 0) -> None:
        super().__init__()
        if dim is None:
            dim = -1
        self.dim = dim

    def forward(self, weight_g: Tensor, weight_v: Tensor) -> Tensor:
        return _weight_norm(weight_v, weight_g, self.dim)

    def right_inverse(self, weight: Tensor) -> Tuple[Tensor, Tensor]:
        weight_g = _norm_except_dim(weight, self.dim)
        weight_v = weight
        return weight_g, weight_v


def weight_norm(module: Module, name: str = "weight", dim: Optional[int] = 0) -> Module:
    """``module.<name> = g * v / ||v||`` with the norm over every dimension but ``dim`` (over
    the whole tensor if ``dim`` is None): the magnitude ``g`` is
    ``parametrizations.<name>.original0``, the direction ``v`` ``original1``. A state_dict of
    the old ``nn.utils.weight_norm`` (``<name>_g``/``<name>_v``) loads too."""
    _weight_norm_module = _WeightNorm(dim)
    parametrize.register_parametrization(module, name, _weight_norm_module, unsafe=True)

    def _weight_norm_compat_hook(
        state_dict: Dict[str, Any],
        prefix: str,
        local_metadata: Dict[str, Any],
        strict: bool,
        missing_keys: List[str],
        unexpected_keys: List[str],
        error_msgs: List[str],
    ) -> None:
        g_key = f"{prefix}{name}_g"
        v_key = f"{prefix}{name}_v"
        if g_key in state_dict and v_key in state_dict:
            original0 = state_dict.pop(g_key)
            original1 = state_dict.pop(v_key)
            state_dict[f"{prefix}parametrizations.{name}.original0"] = original0
            state_dict[f"{prefix}parametrizations.{name}.original1"] = original1

    module._register_load_state_dict_pre_hook(_weight_norm_compat_hook)
    return module


# ----- spectral_norm -------------------------------------------------------------------------


def _reshape_weight_to_matrix(weight: Tensor, dim: int) -> Tensor:
    """``dim`` first, the rest flattened: the matrix whose largest singular value is used."""
    if dim != 0:
        weight = weight.permute(dim, *(d for d in range(weight.dim()) if d != dim))
    return weight.flatten(1)


class _SpectralNorm(Module):
    _u: Tensor
    _v: Tensor

    def __init__(
        self,
        weight: Tensor,
        n_power_iterations: int = 1,
        dim: int = 0,
        eps: float = 1e-12,
    ) -> None:
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError(
                "Dimension out of range (expected to be in range of "
                f"[-{ndim}, {ndim - 1}] but got {dim})"
            )
        if n_power_iterations <= 0:
            raise ValueError(
                "Expected n_power_iterations to be positive, but "
                f"got n_power_iterations={n_power_iterations}"
            )
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            weight_mat = _reshape_weight_to_matrix(weight, self.dim)
            h, w = weight_mat.size()
            with no_grad():
                u = weight_mat.new_empty(h).normal_(0, 1)
                v = weight_mat.new_empty(w).normal_(0, 1)
                self.register_buffer("_u", F.normalize(u, dim=0, eps=self.eps))
                self.register_buffer("_v", F.normalize(v, dim=0, eps=self.eps))
            # Start from a good estimate of the top singular vectors.
            self._power_method(weight_mat, 15)

    def _reshape_weight_to_matrix(self, weight: Tensor) -> Tensor:
        return _reshape_weight_to_matrix(weight, self.dim)

    def _power_method(self, weight_mat: Tensor, n_power_iterations: int) -> None:
        """Advance the estimates ``_u``, ``_v`` of the top singular vectors (in place)."""
        with no_grad():
            for _ in range(n_power_iterations):
                self._u.copy_(F.normalize(weight_mat.mv(self._v), dim=0, eps=self.eps))
                self._v.copy_(F.normalize(weight_mat.mT.mv(self._u), dim=0, eps=self.eps))

    def forward(self, weight: Tensor) -> Tensor:
        if weight.ndim == 1:
            return F.normalize(weight, dim=0, eps=self.eps)
        weight_mat = self._reshape_weight_to_matrix(weight)
        if self.training:
            self._power_method(weight_mat, self.n_power_iterations)
        # Copies: the buffers change in place at the next call, after this graph saved them.
        u = self._u.clone()
        v = self._v.clone()
        sigma = u.dot(weight_mat.mv(v))
        return weight / sigma

    def right_inverse(self, value: Tensor) -> Tensor:
        return value


def _is_conv_transpose(module: Module) -> bool:
    from ..modules.conv import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d

    return isinstance(module, (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d))


def spectral_norm(
    module: Module,
    name: str = "weight",
    n_power_iterations: int = 1,
    eps: float = 1e-12,
    dim: Optional[int] = None,
) -> Module:
    """``module.<name> = W / sigma(W)``, ``sigma`` the largest singular value of ``W`` reshaped
    to a matrix with ``dim`` first (default 0, 1 for transposed convolutions), estimated by
    power iteration: ``n_power_iterations`` steps at each access in training mode, none in eval
    mode (buffers ``parametrizations.<name>.0._u`` and ``_v``). Returns ``module``."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        dim = 1 if _is_conv_transpose(module) else 0
    parametrize.register_parametrization(
        module, name, _SpectralNorm(weight, n_power_iterations, dim, eps)
    )
    return module
