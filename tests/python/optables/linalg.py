"""Linear-algebra ops (``src/ops/linalg.rs``): mm, bmm, outer, trace, diag,
diagonal, tril/triu, einsum."""

from __future__ import annotations

from ._shared import C3, A
from .spec import Arg, OpSpec

B = Arg((3, 4))
OPS = [
    # ----- linear algebra -----
    OpSpec("mm", lambda L, x, y: L.mm(x, y), [A, B], shape_sets=[[Arg((0, 3)), B]]),
    OpSpec("bmm", lambda L, x, y: L.bmm(x, y), [C3, Arg((2, 4, 2))]),
    OpSpec("outer", lambda L, x, y: L.outer(x, y), [Arg((3,)), Arg((4,))]),
    OpSpec("trace", lambda L, x: L.trace(x), [Arg((3, 3))], shape_sets=[[Arg((2, 4))]]),
    OpSpec("diag_vec", lambda L, x: L.diag(x), [Arg((3,))]),
    OpSpec("diag_vec_offset", lambda L, x: x.diag(-1), [Arg((3,))]),
    OpSpec("diag_mat", lambda L, x: L.diag(x, 1), [Arg((3, 4))]),
    OpSpec("diagonal", lambda L, x: x.diagonal(0, 1, 2) * 2.0, [Arg((2, 3, 3))]),
    OpSpec("diagonal_offset", lambda L, x: L.diagonal(x, -1) * 2.0, [Arg((3, 4))]),
    OpSpec("tril", lambda L, x: L.tril(x), [Arg((3, 4))], shape_sets=[[Arg((2, 3, 3))]]),
    OpSpec("tril_offset", lambda L, x: x.tril(-1), [Arg((3, 4))]),
    OpSpec("triu", lambda L, x: L.triu(x, 1), [Arg((3, 4))]),
    OpSpec("einsum_matmul", lambda L, x, y: L.einsum("ij,jk->ik", x, y), [A, B]),
    OpSpec("einsum_transpose", lambda L, x: L.einsum("ij->ji", x) * 2.0, [A]),
    OpSpec("einsum_trace", lambda L, x: L.einsum("ii", x), [Arg((3, 3))]),
    OpSpec("einsum_diag", lambda L, x: L.einsum("ii->i", x), [Arg((3, 3))]),
    OpSpec("einsum_sum", lambda L, x: L.einsum("ijk->j", x), [C3]),
    OpSpec("einsum_bmm", lambda L, x, y: L.einsum("bij,bjk->bik", x, y), [C3, Arg((2, 4, 2))]),
    OpSpec("einsum_outer", lambda L, x, y: L.einsum("i,j->ij", x, y), [Arg((3,)), Arg((2,))]),
    OpSpec(
        "einsum_bilinear",
        lambda L, x, w, y: L.einsum("bn,anm,bm->ba", x, w, y),
        [Arg((2, 3)), Arg((4, 3, 2)), Arg((2, 2))],
    ),
    OpSpec(
        "einsum_ellipsis",
        lambda L, x, y: L.einsum("...ij,...jk->...ik", x, y),
        [Arg((2, 2, 3)), Arg((3, 4))],
    ),
    OpSpec(
        "einsum_ellipsis_broadcast",
        lambda L, x, y: L.einsum("...ij,...jk->...ik", x, y),
        [Arg((2, 1, 2, 3)), Arg((3, 3, 4))],
    ),
    OpSpec("einsum_sum_alone", lambda L, x, y: L.einsum("ij,kj->k", x, y), [A, Arg((4, 3))]),
    OpSpec("einsum_full_reduce", lambda L, x, y: L.einsum("i,j->", x, y), [Arg((3,)), Arg((2,))]),
    OpSpec("einsum_implicit", lambda L, x, y: L.einsum("ij,jk", x, y), [A, B]),
    OpSpec("einsum_list", lambda L, x, y: L.einsum("i,i->", [x, y]), [Arg((3,)), Arg((3,))]),
]


# ----- torch.linalg (src/ops/linalg/) ------------------------------------------------------
# Inputs are uniform in [-2, 2]; each entry makes its matrix well conditioned (``+ 5 I``),
# symmetric (``x + xᵀ``) or positive-definite (``x xᵀ + I``) inside the function, so
# gradcheck perturbs every entry through that map. Factors defined up to signs (eigenvectors,
# singular vectors, Q/R) are normalised to a unique choice before comparing with torch.


def _shift(L, x, c=5.0):  # type: ignore[no-untyped-def]
    return x + c * L.eye(x.shape[-1], dtype=x.dtype)


def _sym(L, x):  # type: ignore[no-untyped-def]
    return x + x.mT


def _spd(L, x):  # type: ignore[no-untyped-def]
    return x @ x.mT + L.eye(x.shape[-1], dtype=x.dtype)


def _col_signs(M):  # type: ignore[no-untyped-def]
    """The signs of each column's entry of largest magnitude (a gauge-fixing constant)."""
    idx = M.abs().argmax(-2, keepdim=True)
    return M.gather(-2, idx).sign().detach()


def _eigh(L, x):  # type: ignore[no-untyped-def]
    w, V = L.linalg.eigh(_sym(L, x))
    return w, V * _col_signs(V)


def _svd(L, x, full=False):  # type: ignore[no-untyped-def]
    U, S, Vh = L.linalg.svd(x, full_matrices=full)
    k = S.shape[-1]
    s = _col_signs(U[..., :k])
    U = U[..., :k] * s
    Vh = Vh[..., :k, :] * s.mT
    return U, S, Vh


def _qr(L, x, mode="reduced"):  # type: ignore[no-untyped-def]
    Q, R = L.linalg.qr(x, mode=mode)
    k = min(x.shape[-2], x.shape[-1])
    d = R.diagonal(0, -2, -1)[..., :k].sign().detach()
    return Q[..., :k] * d.unsqueeze(-2), R[..., :k, :] * d.unsqueeze(-1)


SQ = Arg((3, 3))
SQ_B = Arg((2, 3, 3))
TALL = Arg((4, 3))
WIDE = Arg((3, 4))
_LA = "torch.linalg: float64 gradcheck/gradgradcheck of the crate's backward rule"
_REMOVED = (
    "torch 2.x removed torch.qr/torch.cholesky (they raise); ferrograd keeps their old "
    "meaning (linalg.qr reduced/complete, linalg.cholesky)"
)

OPS += [
    OpSpec(
        "linalg_inv",
        lambda L, x: L.linalg.inv(_shift(L, x)),
        [SQ],
        shape_sets=[[SQ_B]],
        op="linalg.inv",
        note=_LA,
        torch_grad_fn=True,
    ),
    OpSpec(
        "linalg_inv_ex",
        lambda L, x: L.linalg.inv_ex(_shift(L, x)).inverse,
        [SQ],
        op="linalg.inv_ex",
        torch_grad_fn=True,
    ),
    OpSpec("inverse", lambda L, x: L.inverse(_shift(L, x)), [SQ], op="inverse"),
    OpSpec("inverse_method", lambda L, x: _shift(L, x).inverse(), [SQ], op="Tensor.inverse"),
    OpSpec(
        "linalg_solve",
        lambda L, a, b: L.linalg.solve(_shift(L, a), b),
        [SQ, Arg((3, 2))],
        shape_sets=[
            [SQ, Arg((3,))],
            [SQ_B, Arg((3, 2))],
            [SQ_B, Arg((2, 3))],
            [SQ, Arg((2, 3, 1))],
        ],
        op="linalg.solve",
    ),
    OpSpec(
        "linalg_solve_right",
        lambda L, a, b: L.linalg.solve(_shift(L, a), b, left=False),
        [SQ, Arg((2, 3))],
        op="linalg.solve",
        torch_grad_fn=True,
    ),
    OpSpec(
        "linalg_det",
        lambda L, x: L.linalg.det(x),
        [SQ],
        shape_sets=[[SQ_B], [Arg((1, 1))]],
        op="linalg.det",
        torch_grad_fn=True,
    ),
    OpSpec("det", lambda L, x: L.det(_shift(L, x, 1.0)), [SQ], op="det"),
    OpSpec("det_method", lambda L, x: x.det(), [SQ_B], op="Tensor.det"),
    OpSpec(
        "linalg_slogdet",
        lambda L, x: tuple(L.linalg.slogdet(_shift(L, x))),
        [SQ],
        shape_sets=[[SQ_B]],
        op="linalg.slogdet",
    ),
    OpSpec(
        "slogdet", lambda L, x: L.slogdet(_shift(L, x)).logabsdet, [SQ], op="slogdet Tensor.slogdet"
    ),
    OpSpec(
        "logdet",
        lambda L, x: L.logdet(_spd(L, x)),
        [SQ],
        shape_sets=[[SQ_B]],
        op="logdet Tensor.logdet",
    ),
    OpSpec(
        "linalg_cholesky",
        lambda L, x: L.linalg.cholesky(_spd(L, x)),
        [SQ],
        shape_sets=[[SQ_B]],
        op="linalg.cholesky",
        torch_grad_fn=True,
    ),
    OpSpec(
        "linalg_cholesky_upper",
        lambda L, x: L.linalg.cholesky(_spd(L, x), upper=True),
        [SQ],
        op="linalg.cholesky",
        torch_grad_fn=True,
    ),
    OpSpec(
        "linalg_cholesky_ex",
        lambda L, x: L.linalg.cholesky_ex(_spd(L, x)).L,
        [SQ],
        op="linalg.cholesky_ex",
    ),
    OpSpec(
        "cholesky",
        lambda L, x: L.cholesky(_spd(L, x)),
        [SQ],
        op="cholesky Tensor.cholesky",
        torch_parity=False,
        note=_REMOVED,
    ),
    OpSpec(
        "linalg_qr", lambda L, x: _qr(L, x), [TALL], shape_sets=[[SQ_B], [WIDE]], op="linalg.qr"
    ),
    OpSpec(
        "linalg_qr_complete",
        lambda L, x: _qr(L, x, "complete"),
        [WIDE],
        shape_sets=[[SQ]],
        op="linalg.qr",
    ),
    OpSpec(
        "qr",
        lambda L, x: tuple(L.qr(x)),
        [SQ],
        torch_parity=False,
        op="qr Tensor.qr",
        note=_REMOVED,
    ),
    OpSpec("linalg_eigh", lambda L, x: _eigh(L, x), [SQ], shape_sets=[[SQ_B]], op="linalg.eigh"),
    OpSpec(
        "linalg_eigh_upper",
        lambda L, x: L.linalg.eigh(_sym(L, x), UPLO="U").eigenvalues,
        [SQ],
        op="linalg.eigh",
    ),
    OpSpec(
        "linalg_eigvalsh",
        lambda L, x: L.linalg.eigvalsh(_sym(L, x)),
        [SQ],
        shape_sets=[[SQ_B]],
        op="linalg.eigvalsh",
        torch_grad_fn=True,
    ),
    OpSpec(
        "linalg_svd", lambda L, x: _svd(L, x), [TALL], shape_sets=[[WIDE], [SQ_B]], op="linalg.svd"
    ),
    OpSpec(
        "linalg_svd_full", lambda L, x: _svd(L, x, True), [SQ], shape_sets=[[TALL]], op="linalg.svd"
    ),
    OpSpec("svd", lambda L, x: L.svd(x).S, [TALL], op="svd Tensor.svd"),
    OpSpec(
        "linalg_svdvals",
        lambda L, x: L.linalg.svdvals(x),
        [TALL],
        shape_sets=[[WIDE], [SQ_B]],
        op="linalg.svdvals",
        torch_grad_fn=True,
    ),
    OpSpec(
        "linalg_pinv",
        lambda L, x: L.linalg.pinv(x),
        [TALL],
        shape_sets=[[WIDE], [SQ_B]],
        op="linalg.pinv",
        torch_grad_fn=True,
    ),
    OpSpec(
        "linalg_pinv_hermitian",
        lambda L, x: L.linalg.pinv(_spd(L, x), hermitian=True),
        [SQ],
        op="linalg.pinv",
    ),
    OpSpec("pinverse", lambda L, x: L.pinverse(x), [WIDE], op="pinverse Tensor.pinverse"),
    OpSpec(
        "linalg_lstsq",
        lambda L, a, b: L.linalg.lstsq(a, b).solution,
        [TALL, Arg((4, 2))],
        shape_sets=[[Arg((2, 4, 3)), Arg((2, 4, 2))], [TALL, Arg((4,))]],
        op="linalg.lstsq",
        torch_grad_fn=True,
    ),
    OpSpec(
        "linalg_matrix_power",
        lambda L, x: L.linalg.matrix_power(x * 0.5, 3),
        [SQ],
        shape_sets=[[SQ_B]],
        op="linalg.matrix_power",
    ),
    OpSpec(
        "linalg_matrix_power_neg",
        lambda L, x: L.linalg.matrix_power(_shift(L, x), -2),
        [SQ],
        op="linalg.matrix_power",
    ),
    OpSpec(
        "matrix_power_one",
        lambda L, x: x.matrix_power(1),
        [SQ],
        op="matrix_power Tensor.matrix_power",
    ),
    OpSpec(
        "linalg_matrix_exp",
        lambda L, x: L.linalg.matrix_exp(x * 0.5),
        [SQ],
        shape_sets=[[SQ_B]],
        op="linalg.matrix_exp",
        torch_grad_fn=True,
    ),
    OpSpec(
        "matrix_exp_large",
        lambda L, x: L.matrix_exp(x * 3.0),
        [SQ],
        op="matrix_exp Tensor.matrix_exp",
        atol=1e-5,
        rtol=1e-4,
    ),
    OpSpec(
        "linalg_cross",
        lambda L, x, y: L.linalg.cross(x, y),
        [Arg((2, 3)), Arg((2, 3))],
        shape_sets=[[Arg((1, 3)), Arg((2, 3))], [Arg((4, 3)), Arg((4, 3))]],
        op="linalg.cross",
        torch_grad_fn=True,
    ),
    OpSpec(
        "cross_dim",
        lambda L, x, y: L.cross(x, y, dim=0),
        [Arg((3, 2)), Arg((3, 2))],
        op="cross Tensor.cross",
    ),
    OpSpec(
        "linalg_multi_dot",
        lambda L, a, b, c, d: L.linalg.multi_dot([a, b, c, d]),
        [Arg((3,)), Arg((3, 4)), Arg((4, 2)), Arg((2,))],
        shape_sets=[[Arg((2, 3)), Arg((3, 4)), Arg((4, 5)), Arg((5, 2))]],
        op="linalg.multi_dot",
    ),
    OpSpec(
        "linalg_vecdot",
        lambda L, x, y: L.linalg.vecdot(x, y),
        [Arg((2, 3)), Arg((2, 3))],
        shape_sets=[[Arg((3,)), Arg((2, 3))]],
        op="linalg.vecdot",
        torch_grad_fn=True,
    ),
    OpSpec(
        "linalg_vecdot_dim",
        lambda L, x, y: L.linalg.vecdot(x, y, dim=0),
        [Arg((2, 3)), Arg((2, 3))],
        op="linalg.vecdot",
    ),
    OpSpec(
        "matrix_norm_nuc",
        lambda L, x: L.linalg.matrix_norm(x, "nuc"),
        [TALL],
        shape_sets=[[SQ_B]],
        op="linalg.matrix_norm",
    ),
    OpSpec(
        "matrix_norm_2",
        lambda L, x: L.linalg.matrix_norm(x, 2),
        [TALL],
        shape_sets=[[SQ_B]],
        op="linalg.matrix_norm",
    ),
    OpSpec(
        "matrix_norm_neg2",
        lambda L, x: L.linalg.matrix_norm(x, -2, dim=(0, 1), keepdim=True),
        [WIDE],
        op="linalg.matrix_norm",
    ),
    OpSpec("linalg_norm_2", lambda L, x: L.linalg.norm(x, 2), [TALL], op="linalg.norm"),
]
