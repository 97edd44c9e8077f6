"""``ferrograd.linalg`` and torch's top-level linear-algebra aliases: closed forms (A A⁻¹ = I,
Q orthonormal and R upper, U diag(S) Vᴴ = A, det of a triangular matrix, exp of diagonal and
nilpotent matrices), the degenerate cases torch documents, named-tuple results, and torch's
exception types and messages (against torch when installed). Gradients of every op are in the
op table (``optables/linalg.py``)."""

from __future__ import annotations

import math
import warnings

import ferrograd as fg
import numpy as np
import pytest

try:
    import torch
except ImportError:  # pragma: no cover - depends on the machine
    torch = None

RNG = np.random.default_rng(7)
needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")


def t(a, rg=False, dtype=None):
    return fg.tensor(np.asarray(a), dtype=dtype or fg.float64, requires_grad=rg)


def close(x, y, tol=1e-10):
    got = x.detach().numpy() if isinstance(x, fg.Tensor) else x
    np.testing.assert_allclose(np.asarray(got), np.asarray(y), atol=tol, rtol=tol)


# ----- closed forms ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype,tol", [(fg.float64, 1e-12), (fg.float32, 1e-5)])
def test_inverse_times_matrix_is_identity_batched(dtype, tol):
    a = t(RNG.normal(size=(2, 3, 4, 4)) + 4 * np.eye(4), dtype=dtype)
    inv = fg.linalg.inv(a)
    assert inv.dtype == dtype and tuple(inv.shape) == (2, 3, 4, 4)
    close(a @ inv, np.broadcast_to(np.eye(4), (2, 3, 4, 4)), tol)
    close(a.inverse(), inv.numpy(), 0)
    close(fg.inverse(a), inv.numpy(), 0)


def test_qr_is_orthonormal_and_upper_in_every_mode():
    for m, n in [(5, 3), (3, 5), (4, 4)]:
        a = t(RNG.normal(size=(2, m, n)))
        k = min(m, n)
        Q, R = fg.linalg.qr(a)
        assert tuple(Q.shape) == (2, m, k) and tuple(R.shape) == (2, k, n)
        close(Q.mT @ Q, np.broadcast_to(np.eye(k), (2, k, k)), 1e-12)
        close(R.tril(-1), np.zeros((2, k, n)), 0)
        close(Q @ R, a.numpy(), 1e-12)
        Qc, Rc = fg.linalg.qr(a, mode="complete")
        assert tuple(Qc.shape) == (2, m, m) and tuple(Rc.shape) == (2, m, n)
        close(Qc.mT @ Qc, np.broadcast_to(np.eye(m), (2, m, m)), 1e-12)
        Qr, Rr = fg.linalg.qr(a, mode="r")
        assert Qr.numel() == 0
        close(Rr.abs(), R.abs().numpy(), 1e-12)


def test_svd_reconstructs_and_old_svd_returns_v():
    a = t(RNG.normal(size=(3, 5, 4)))
    U, S, Vh = fg.linalg.svd(a, full_matrices=False)
    close((U * S.unsqueeze(-2)) @ Vh, a.numpy(), 1e-12)
    assert bool((S[..., :-1] >= S[..., 1:]).all())
    Uf, Sf, Vhf = fg.linalg.svd(a)
    assert tuple(Uf.shape) == (3, 5, 5) and tuple(Vhf.shape) == (3, 4, 4)
    close(Uf.mT @ Uf, np.broadcast_to(np.eye(5), (3, 5, 5)), 1e-12)
    r = fg.svd(a)
    assert type(r).__name__ == "svd" and tuple(r.V.shape) == (3, 4, 4)
    close((r.U * r.S.unsqueeze(-2)) @ r.V.mT, a.numpy(), 1e-12)
    close(fg.linalg.svdvals(a), S.numpy(), 1e-12)
    close(np.linalg.svd(a.numpy(), compute_uv=False), S.numpy(), 1e-12)


def test_eigh_of_a_known_matrix_and_upper_triangle():
    a = np.array([[2.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 4.0]])
    w, V = fg.linalg.eigh(t(a))
    close(w, [3 - math.sqrt(3), 3, 3 + math.sqrt(3)], 1e-12)
    close((V * w.unsqueeze(-2)) @ V.mT, a, 1e-12)
    # UPLO='U' reads only the upper triangle: junk below the diagonal is ignored.
    junk = np.triu(a) + np.tril(np.full((3, 3), 9.0), -1)
    close(fg.linalg.eigvalsh(t(junk), UPLO="U"), w.numpy(), 1e-12)
    with pytest.raises(RuntimeError, match="Expected UPLO argument to be 'L' or 'U', but got X"):
        fg.linalg.eigh(t(a), UPLO="X")


def test_det_of_triangular_is_product_of_diagonal():
    u = np.triu(RNG.normal(size=(2, 4, 4)))
    close(fg.linalg.det(t(u)), np.prod(np.diagonal(u, axis1=-2, axis2=-1), -1), 1e-12)
    s = fg.linalg.slogdet(t(u))
    assert type(s).__name__ == "linalg_slogdet"
    d = np.prod(np.diagonal(u, axis1=-2, axis2=-1), -1)
    close(s.sign, np.sign(d), 0)
    close(s.logabsdet, np.log(np.abs(d)), 1e-12)
    close(fg.logdet(t(np.diag([2.0, 3.0]))), math.log(6.0), 1e-12)
    assert math.isnan(float(fg.logdet(t(np.diag([-2.0, 3.0])))))
    assert float(fg.logdet(t(np.zeros((2, 2))))) == -math.inf


def test_matrix_exp_of_diagonal_and_nilpotent():
    close(
        fg.linalg.matrix_exp(t(np.diag([1.0, -2.0, 0.5]))), np.diag(np.exp([1.0, -2.0, 0.5])), 1e-14
    )
    n = np.array([[0.0, 1.0, 2.0], [0.0, 0.0, 3.0], [0.0, 0.0, 0.0]])
    close(t(n).matrix_exp(), np.eye(3) + n + n @ n / 2, 1e-14)
    # Rotation generator: exp([[0, -θ], [θ, 0]]) is the rotation by θ (scaling and squaring).
    th = 7.0
    close(
        fg.matrix_exp(t([[0.0, -th], [th, 0.0]])),
        [[math.cos(th), -math.sin(th)], [math.sin(th), math.cos(th)]],
        1e-12,
    )


@pytest.mark.parametrize("norm", [0.01, 0.2, 0.9, 2.0, 5.0, 40.0])
def test_matrix_exp_matches_taylor_series_at_every_pade_degree(norm):
    # The 1-norm picks the Padé degree (3, 5, 7, 9, 13, then scaling and squaring).
    a = RNG.normal(size=(4, 4))
    a *= norm / np.abs(a).sum(0).max()
    # exp(A) = exp(A/2^k)^(2^k), each factor a long Taylor sum.
    k = max(0, int(np.ceil(np.log2(norm))) + 2)
    small, term, total = a / 2**k, np.eye(4), np.eye(4)
    for j in range(1, 40):
        term = term @ small / j
        total = total + term
    for _ in range(k):
        total = total @ total
    close(fg.linalg.matrix_exp(t(a)), total, 1e-11 * max(1.0, np.abs(total).max()))


def test_matrix_power_identity_and_negative():
    a = t(RNG.normal(size=(2, 3, 3)) + 3 * np.eye(3))
    close(fg.linalg.matrix_power(a, 0), np.broadcast_to(np.eye(3), (2, 3, 3)), 0)
    close(a.matrix_power(3), a.numpy() @ a.numpy() @ a.numpy(), 1e-10)
    close(fg.matrix_power(a, -2), np.linalg.inv(a.numpy() @ a.numpy()), 1e-10)
    with pytest.raises(TypeError, match="must be int, not float"):
        fg.linalg.matrix_power(a, 2.0)


def test_solve_lstsq_pinv_agree_with_numpy():
    a = RNG.normal(size=(2, 4, 4)) + 4 * np.eye(4)
    b = RNG.normal(size=(4, 2))
    close(fg.linalg.solve(t(a), t(b)), np.linalg.solve(a, b), 1e-12)
    tall = RNG.normal(size=(6, 3))
    y = RNG.normal(size=(6, 2))
    r = fg.linalg.lstsq(t(tall), t(y))
    close(r.solution, np.linalg.lstsq(tall, y, rcond=None)[0], 1e-12)
    assert int(r.rank) == 3 and r.residuals.numel() == 0 and r.singular_values.numel() == 0
    rd = fg.linalg.lstsq(t(tall), t(y), driver="gelsd")
    close(rd.residuals, np.linalg.lstsq(tall, y, rcond=None)[1], 1e-10)
    close(rd.singular_values, np.linalg.svd(tall, compute_uv=False), 1e-12)
    # Rank-deficient: the minimum-norm solution, as pinv.
    low = tall[:, :2] @ RNG.normal(size=(2, 3))
    close(fg.linalg.lstsq(t(low), t(y)).solution, np.linalg.pinv(low) @ y, 1e-10)
    assert int(fg.linalg.lstsq(t(low), t(y)).rank) == 2
    close(fg.linalg.pinv(t(low)), np.linalg.pinv(low), 1e-10)
    close(fg.pinverse(t(low)), np.linalg.pinv(low), 1e-10)


@pytest.mark.parametrize("n,k", [(96, 200), (256, 256), (130, 1)])
def test_solve_inv_det_at_sizes_that_split_into_bands_match_numpy_on_any_thread_count(n, k):
    # Solves of n^2 k >= 2^18 multiply-adds run in bands of 64 right-hand sides shared among
    # threads (200 = three whole bands and a short one); each band is one fixed sequential
    # call, so the bits must not depend on the thread count.
    a = RNG.normal(size=(n, n)) + np.sqrt(n) * np.eye(n)
    b = RNG.normal(size=(n, k))
    prev = fg.get_num_threads()
    got = {}
    try:
        for threads in (1, 2, 3):
            fg.set_num_threads(threads)
            got[threads] = (
                fg.linalg.solve(t(a), t(b)).numpy(),
                fg.linalg.inv(t(a)).numpy(),
                float(fg.linalg.det(t(a / 2))),
                fg.linalg.slogdet(t(a)),
            )
    finally:
        fg.set_num_threads(prev)
    x, inv, det, (sign, logabs) = got[1]
    np.testing.assert_allclose(x, np.linalg.solve(a, b), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(inv, np.linalg.inv(a), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(det, np.linalg.det(a / 2), rtol=1e-10)
    ref_sign, ref_log = np.linalg.slogdet(a)
    assert float(sign) == ref_sign and abs(float(logabs) - ref_log) < 1e-9 * abs(ref_log)
    for threads in (2, 3):
        assert np.array_equal(got[threads][0], x) and np.array_equal(got[threads][1], inv)
        assert got[threads][2] == det


def test_det_sign_follows_row_swaps():
    # A permutation matrix's determinant is the sign of its permutation: the LU's count of
    # row exchanges must carry it.
    for perm, sign in [
        ([1, 0, 2], -1.0),
        ([1, 2, 0], 1.0),
        ([3, 2, 1, 0], 1.0),
        ([0, 2, 1, 3], -1.0),
    ]:
        p = np.eye(len(perm))[perm]
        assert float(fg.linalg.det(t(p))) == sign
        s, logabs = fg.linalg.slogdet(t(3.0 * p))
        assert float(s) == sign and abs(float(logabs) - len(perm) * math.log(3.0)) < 1e-12


def test_products():
    x, y = RNG.normal(size=(4, 3)), RNG.normal(size=(4, 3))
    close(fg.linalg.cross(t(x), t(y)), np.cross(x, y), 1e-14)
    close(fg.cross(t(x.T), t(y.T), dim=0), np.cross(x, y).T, 1e-14)
    close(fg.linalg.vecdot(t(x), t(y)), (x * y).sum(-1), 1e-14)
    ms = [RNG.normal(size=s) for s in [(5,), (5, 2), (2, 7), (7, 3)]]
    close(fg.linalg.multi_dot([t(m) for m in ms]), np.linalg.multi_dot(ms), 1e-12)


@pytest.mark.parametrize("ord_", ["nuc", 2, -2])
def test_matrix_norm_from_singular_values(ord_):
    a = RNG.normal(size=(2, 4, 3))
    want = np.linalg.norm(a, ord_, axis=(-2, -1))
    close(fg.linalg.matrix_norm(t(a), ord_), want, 1e-12)
    close(fg.linalg.norm(t(a[0]), ord_), want[0], 1e-12)
    close(
        fg.linalg.matrix_norm(t(a), ord_, dim=(0, 2)), np.linalg.norm(a, ord_, axis=(0, 2)), 1e-12
    )


# ----- gradients in the degenerate cases ------------------------------------------------------


def test_det_gradient_at_a_singular_matrix_is_the_cofactor_matrix():
    a = t([[1.0, 2.0], [2.0, 4.0]], rg=True)
    (g,) = fg.autograd.grad(fg.linalg.det(a), a)
    close(g, [[4.0, -2.0], [-2.0, 1.0]], 1e-10)
    # Rank n-2: every cofactor is 0.
    z = t(np.zeros((3, 3)), rg=True)
    (g0,) = fg.autograd.grad(fg.linalg.det(z), z)
    close(g0, np.zeros((3, 3)), 0)
    # Mixed batch: one singular, one regular matrix.
    b = t([[[1.0, 2.0], [2.0, 4.0]], [[2.0, 1.0], [0.0, 3.0]]], rg=True)
    (gb,) = fg.autograd.grad(fg.linalg.det(b).sum(), b)
    close(gb, [[[4.0, -2.0], [-2.0, 1.0]], [[3.0, 0.0], [-1.0, 2.0]]], 1e-10)


def test_eigvalsh_gradient_is_finite_with_repeated_eigenvalues_and_eigh_vectors_are_not():
    a = t(np.eye(3), rg=True)
    (g,) = fg.autograd.grad(fg.linalg.eigvalsh(a).sum(), a)
    close(g, np.eye(3), 1e-12)
    w, V = fg.linalg.eigh(a)
    (gv,) = fg.autograd.grad(V.sum(), a)
    # torch documents the eigenvector gradient as undefined (non-finite) here.
    assert not bool(gv.isfinite().all())


def test_svdvals_gradient_is_u_vt_and_finite_with_repeated_values():
    a = t(np.eye(3) * 2.0, rg=True)
    (g,) = fg.autograd.grad(fg.linalg.svdvals(a).sum(), a)
    close(g, np.eye(3), 1e-12)


def test_second_order_through_inv_and_matrix_exp():
    a = t(RNG.normal(size=(3, 3)) * 0.3 + np.eye(3), rg=True)
    for f in (fg.linalg.inv, fg.linalg.matrix_exp, fg.linalg.det):
        (g,) = fg.autograd.grad(f(a).sum(), a, create_graph=True)
        (h,) = fg.autograd.grad((g * g).sum(), a)
        assert bool(h.isfinite().all())


def test_qr_mode_r_and_complete_wide_are_not_differentiable_with_torchs_messages():
    a = t(RNG.normal(size=(4, 3)), rg=True)
    _, R = fg.linalg.qr(a, mode="r")
    with pytest.raises(RuntimeError, match="The derivative of linalg.qr depends on Q"):
        R.sum().backward()
    Q, _ = fg.linalg.qr(a, mode="complete")
    with pytest.raises(
        RuntimeError, match="not differentiable when mode='complete' and nrows > ncols"
    ):
        Q.sum().backward()


# ----- results and errors ---------------------------------------------------------------------


def test_ex_variants_report_info_instead_of_raising():
    inv, info = fg.linalg.inv_ex(t([[1.0, 2.0], [2.0, 4.0]]))
    assert int(info) == 2 and not bool(inv.isfinite().all())
    L, info = fg.linalg.cholesky_ex(t([[[4.0, 2.0], [2.0, 5.0]], [[1.0, 2.0], [2.0, 1.0]]]))
    assert info.tolist() == [0, 2]
    with pytest.raises(fg.linalg.LinAlgError):
        fg.linalg.cholesky_ex(t([[1.0, 2.0], [2.0, 1.0]]), check_errors=True)


def _errors():
    z = np.zeros((2, 2))
    return [
        ("linalg.inv", lambda L, T: L.linalg.inv(T(z))),
        ("linalg.inv batched", lambda L, T: L.linalg.inv(T(np.zeros((3, 2, 2))))),
        ("inverse", lambda L, T: L.inverse(T(z))),
        ("cholesky", lambda L, T: L.linalg.cholesky(T(-np.eye(2)))),
        (
            "cholesky batched",
            lambda L, T: L.linalg.cholesky(T(np.stack([np.eye(2), [[1.0, 2], [2, 1]]]))),
        ),
        ("solve singular", lambda L, T: L.linalg.solve(T(z), T(np.ones(2)))),
        (
            "solve vector right",
            lambda L, T: L.linalg.solve(T(np.eye(3)), T(np.ones(3)), left=False),
        ),
        ("solve shapes", lambda L, T: L.linalg.solve(T(np.eye(3)), T(np.ones((4, 1))))),
        ("non-square", lambda L, T: L.linalg.inv(T(np.ones((2, 3))))),
        ("1-D", lambda L, T: L.linalg.det(T(np.ones(3)))),
        ("integer", lambda L, T: L.linalg.inv(T(np.eye(2, dtype=np.int64), True))),
        ("eigh non-square", lambda L, T: L.linalg.eigh(T(np.ones((2, 3))))),
        ("svd 1-D", lambda L, T: L.linalg.svd(T(np.ones(3)))),
        ("solve batch", lambda L, T: L.linalg.solve(T(np.ones((2, 3, 3))), T(np.ones((3, 3, 1))))),
        ("lstsq batch", lambda L, T: L.linalg.lstsq(T(np.ones((2, 4, 3))), T(np.ones((3, 4, 1))))),
        ("inv of int", lambda L, T: L.linalg.inv(3)),
        ("solve of int", lambda L, T: L.linalg.solve(T(np.eye(2)), 3)),
        ("lstsq of int", lambda L, T: L.linalg.lstsq(T(np.eye(2)), 3)),
        ("cholesky of int", lambda L, T: L.linalg.cholesky(3)),
        ("vecdot of int", lambda L, T: L.linalg.vecdot(3, T(np.ones(3)))),
        ("svd nan", lambda L, T: L.linalg.svdvals(T([[math.nan, 1.0], [1.0, 1.0]]))),
        ("qr mode", lambda L, T: L.linalg.qr(T(np.eye(2)), mode="x")),
        ("matrix_exp", lambda L, T: L.linalg.matrix_exp(T(np.ones((2, 3))))),
        ("matrix_power", lambda L, T: L.linalg.matrix_power(T(np.ones((2, 3))), 2)),
        ("cross", lambda L, T: L.linalg.cross(T(np.ones(2)), T(np.ones(2)))),
        ("cross ndim", lambda L, T: L.linalg.cross(T(np.ones(3)), T(np.ones((2, 3))))),
        ("multi_dot one", lambda L, T: L.linalg.multi_dot([T(np.ones((2, 3)))])),
        (
            "multi_dot 3-D",
            lambda L, T: L.linalg.multi_dot([T(np.ones((2, 2, 2))), T(np.ones((2, 2)))]),
        ),
        (
            "multi_dot shapes",
            lambda L, T: L.linalg.multi_dot([T(np.ones((2, 3))), T(np.ones((4, 5)))]),
        ),
        ("lstsq rows", lambda L, T: L.linalg.lstsq(T(np.ones((3, 2))), T(np.ones((4, 1))))),
        ("vecdot dtype", lambda L, T: L.linalg.vecdot(T(np.ones(3)), T(np.ones(3), False, True))),
    ]


@needs_torch
@pytest.mark.parametrize("name,f", _errors(), ids=[n for n, _ in _errors()])
def test_errors_match_torch(name, f):
    def make(lib):
        def T(a, integer=False, single=False):
            dt = lib.int64 if integer else (lib.float32 if single else lib.float64)
            return lib.tensor(np.asarray(a).tolist(), dtype=dt)

        return T

    with pytest.raises(Exception) as te:
        f(torch, make(torch))
    with pytest.raises(Exception) as fe:
        f(fg, make(fg))
    assert str(fe.value) == str(te.value)
    # torch's LinAlgError is a RuntimeError subclass; ours is too, and so are the others.
    want = type(te.value)
    if issubclass(want, torch.linalg.LinAlgError):
        assert isinstance(fe.value, fg.linalg.LinAlgError)
    else:
        assert type(fe.value) is want


def test_linalg_error_is_a_runtime_error():
    with pytest.raises(RuntimeError, match="the input matrix is singular"):
        fg.linalg.inv(t(np.zeros((2, 2))))
    assert issubclass(fg.linalg.LinAlgError, RuntimeError)


def test_cross_without_dim_warns_and_uses_first_size_3_dim():
    x, y = RNG.normal(size=(3, 4)), RNG.normal(size=(3, 4))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        r = fg.cross(t(x), t(y))
    assert any("without specifying the dim arg is deprecated" in str(i.message) for i in w)
    close(r, np.cross(x, y, axis=0), 1e-14)
    close(t(x).cross(t(y), dim=0), np.cross(x, y, axis=0), 1e-14)


def test_named_tuples_and_methods():
    a = t(np.array([[4.0, 2.0], [2.0, 5.0]]))
    assert type(fg.linalg.eigh(a)).__name__ == "linalg_eigh"
    assert fg.linalg.eigh(a).eigenvalues.shape == (2,)
    assert type(fg.linalg.svd(a)).__name__ == "linalg_svd"
    assert type(fg.qr(a)).__name__ == "qr" and a.qr().R.shape == (2, 2)
    assert type(a.slogdet()).__name__ == "slogdet"
    close(a.cholesky(), np.linalg.cholesky(a.numpy()), 1e-12)
    close(a.det(), 16.0, 1e-12)
    close(a.logdet(), math.log(16.0), 1e-12)
    close(a.pinverse(), np.linalg.inv(a.numpy()), 1e-12)
    U, S, V = t(np.ones((3, 2))).svd(compute_uv=False)
    assert tuple(U.shape) == (3, 3) and tuple(V.shape) == (2, 2)
    close(U, np.zeros((3, 3)), 0)
    close(S, [math.sqrt(6.0), 0.0], 1e-12)


@needs_torch
def test_values_match_torch_for_sign_free_outputs():
    a = RNG.normal(size=(2, 4, 3))
    sq = RNG.normal(size=(2, 3, 3))
    for f in [
        lambda L, x, s: L.linalg.svdvals(x),
        lambda L, x, s: L.linalg.pinv(x),
        lambda L, x, s: L.linalg.det(s),
        lambda L, x, s: L.linalg.eigvalsh(s + s.mT),
        lambda L, x, s: L.linalg.matrix_exp(s),
        lambda L, x, s: L.linalg.matrix_norm(x, "nuc"),
        lambda L, x, s: L.linalg.cholesky(s @ s.mT + L.eye(3, dtype=s.dtype)),
        lambda L, x, s: L.linalg.lstsq(x, x[..., :2]).solution,
    ]:
        want = f(torch, torch.tensor(a), torch.tensor(sq)).numpy()
        close(f(fg, t(a), t(sq)), want, 1e-10)
