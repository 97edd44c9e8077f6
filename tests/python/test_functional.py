"""``autograd.functional``: jacobian / hessian / vjp / jvp / hvp / vhp against closed forms (and
torch when installed), tuple handling, ``create_graph``, ``strict`` and torch's messages."""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest
from ferrograd.autograd.functional import hessian, hvp, jacobian, jvp, vhp, vjp

try:
    import torch
    import torch.autograd.functional as TF
except ImportError:  # pragma: no cover - depends on the machine
    torch = None

RNG = np.random.default_rng(11)
XA = RNG.uniform(-1, 1, size=3)
YA = RNG.uniform(-1, 1, size=(2, 3))
AA = RNG.uniform(-1, 1, size=(3, 3))


def t(a, rg=False):
    return fg.tensor(np.array(a), dtype=fg.float64, requires_grad=rg)


def close(x, y, tol=1e-10):
    np.testing.assert_allclose(np.asarray(x.detach().numpy()), np.asarray(y), atol=tol, rtol=tol)


# ----- closed forms -------------------------------------------------------------------------------


def test_jacobian_of_elementwise_square_is_diagonal():
    j = jacobian(lambda x: x * x, t(XA))
    assert tuple(j.shape) == (3, 3)
    close(j, np.diag(2 * XA))
    assert not j.requires_grad


def test_jacobian_shapes_are_out_shape_plus_in_shape():
    j = jacobian(lambda y: y.sum(0), t(YA))
    assert tuple(j.shape) == (3, 2, 3)
    expected = np.zeros((3, 2, 3))
    for i in range(3):
        expected[i, :, i] = 1.0
    close(j, expected)
    j0 = jacobian(lambda y: (y * y).sum(), t(YA))
    assert tuple(j0.shape) == (2, 3)
    close(j0, 2 * YA)


def test_jacobian_tuple_inputs_and_outputs_nest_as_out_in():
    a = t(AA)

    def f(x, y):
        return x @ a, (x * y.sum(0)).sum()

    jac = jacobian(f, (t(XA), t(YA)))
    assert isinstance(jac, tuple) and len(jac) == 2
    assert all(isinstance(r, tuple) and len(r) == 2 for r in jac)
    close(jac[0][0], AA.T)  # d(x A)_j / dx_i = A_ij -> J[j, i] = A[i, j]
    close(jac[0][1], np.zeros((3, 2, 3)))
    close(jac[1][0], YA.sum(0))
    close(jac[1][1], np.broadcast_to(XA, (2, 3)))
    # tuple input, tensor output: a tuple over inputs
    j2 = jacobian(lambda x, y: x * 2.0, (t(XA), t(YA)))
    assert isinstance(j2, tuple) and len(j2) == 2
    close(j2[0], 2 * np.eye(3))


def test_hessian_closed_forms():
    h = hessian(lambda x: (x * x * x).sum(), t(XA))
    close(h, np.diag(6 * XA))
    a = t(AA)
    h2 = hessian(lambda x: x @ a @ x, t(XA))
    close(h2, AA + AA.T)
    hh = hessian(lambda x, y: (x * x).sum() * y.sum(), (t(XA), t(YA)))
    assert tuple(hh[0][0].shape) == (3, 3) and tuple(hh[0][1].shape) == (3, 2, 3)
    assert tuple(hh[1][0].shape) == (2, 3, 3) and tuple(hh[1][1].shape) == (2, 3, 2, 3)
    close(hh[0][0], 2 * YA.sum() * np.eye(3))
    close(hh[0][1], np.broadcast_to((2 * XA)[:, None, None], (3, 2, 3)))
    close(hh[1][1], np.zeros((2, 3, 2, 3)))


def test_vjp_jvp_hvp_vhp_closed_forms():
    x, v3 = t(XA), t([0.5, -1.0, 2.0])
    out, g = vjp(lambda x: x.sin(), x, v3)
    close(out, np.sin(XA))
    close(g, np.cos(XA) * np.array([0.5, -1.0, 2.0]))
    out, jv = jvp(lambda x: x.sin() * 3.0, x, v3)
    close(jv, 3 * np.cos(XA) * np.array([0.5, -1.0, 2.0]))
    a = t(AA)
    out, hv = hvp(lambda x: x @ a @ x, x, v3)
    close(out, XA @ AA @ XA)
    close(hv, (AA + AA.T) @ np.array([0.5, -1.0, 2.0]))
    out, vh = vhp(lambda x: x @ a @ x, x, v3)
    close(vh, np.array([0.5, -1.0, 2.0]) @ (AA + AA.T))
    # v may be omitted for one-element outputs / inputs
    _, g1 = vjp(lambda x: (x * x).sum(), x)
    close(g1, 2 * XA)
    _, j1 = jvp(lambda s: s * s * s, t(2.0))
    close(j1, np.array(12.0))


def test_jvp_of_non_square_map_with_tuple_inputs():
    def f(x, y):
        return (y @ x, x.sum())

    (o1, o2), (j1, j2) = jvp(f, (t(XA), t(YA)), (t(np.ones(3)), t(np.ones((2, 3)))))
    close(o1, YA @ XA)
    close(j1, YA.sum(1) + XA.sum())
    close(j2, np.array(3.0))


def test_independent_outputs_give_zeros_unless_strict():
    j = jacobian(lambda x, y: x * 2.0, (t(XA), t(YA)))
    close(j[1], np.zeros((3, 2, 3)))
    with pytest.raises(
        RuntimeError,
        match=r"^Output 0 of the user-provided function is independent of input 1\. This is "
        r"not allowed in strict mode\.$",
    ):
        jacobian(lambda x, y: x * 2.0, (t(XA), t(YA)), strict=True)
    with pytest.raises(
        RuntimeError,
        match=r"^Output 0 of the user-provided function does not require gradients\. The "
        r"outputs must be computed in a differentiable manner from the input when running in "
        r"strict mode\.$",
    ):
        jacobian(lambda x: fg.ones(2), t(XA), strict=True)
    assert not jacobian(lambda x: fg.ones(2), t(XA)).numpy().any()
    with pytest.raises(RuntimeError, match="The output of the user-provided function is "):
        vjp(lambda x, y: x.sum(), (t(XA), t(YA)), strict=True)


def test_create_graph_gives_differentiable_results():
    x = t(XA, rg=True)
    j = jacobian(lambda x: x * x * x, x, create_graph=True)
    assert j.requires_grad
    (g,) = fg.autograd.grad(j.sum(), x)
    close(g, 6 * XA)  # d/dx sum(diag(3x^2))
    out, v = vjp(lambda x: (x * x).sum(), x, create_graph=True)
    assert out.requires_grad and v.requires_grad
    h = hessian(lambda x: (x * x * x).sum(), x, create_graph=True)
    (g3,) = fg.autograd.grad(h.sum(), x)
    close(g3, 6 * np.ones(3))
    _, hv = hvp(lambda x: (x * x * x).sum(), x, t(np.ones(3)), create_graph=True)
    assert hv.requires_grad
    j_nograph = jacobian(lambda x: x * x, x)
    assert not j_nograph.requires_grad and x.grad is None


# ----- messages -----------------------------------------------------------------------------------


def test_type_errors():
    with pytest.raises(
        TypeError,
        match=r"^The outputs of the user-provided function given to jacobian must be either a "
        r"Tensor or a tuple of Tensors but the given outputs of the user-provided function has "
        r"type <class 'int'>\.$",
    ):
        jacobian(lambda x: 3, t(XA))
    with pytest.raises(
        TypeError,
        match=r"^The inputs given to jacobian must be either a Tensor or a tuple of Tensors but "
        r"the given inputs has type <class 'list'>\.$",
    ):
        jacobian(lambda x: x, [t(XA)])
    with pytest.raises(TypeError, match=r"but the value at index 1 has type <class 'int'>\."):
        vjp(lambda x, y: x, (t(XA), 2))


def test_hessian_and_hvp_need_a_single_element_output():
    with pytest.raises(
        RuntimeError,
        match=r"^The Tensor returned by the function given to hessian should contain a single "
        r"element$",
    ):
        hessian(lambda x: x * x, t(XA))
    with pytest.raises(
        RuntimeError, match=r"^The Tensor returned by the function given to hvp should contain"
    ):
        hvp(lambda x: x * x, t(XA), t(XA))
    with pytest.raises(RuntimeError, match="The function given to vhp should return a single"):
        vhp(lambda x: (x.sum(), x.sum()), t(XA), t(XA))


def test_v_errors():
    with pytest.raises(
        RuntimeError,
        match=r"^The vector v can only be None if the user-provided function returns a single "
        r"Tensor with a single element\.$",
    ):
        vjp(lambda x: x * 2.0, t(XA))
    with pytest.raises(
        RuntimeError, match=r"^v has invalid size: should be \[3\] but got \[2\]\.$"
    ):
        vjp(lambda x: x * 2.0, t(XA), t([1.0, 2.0]))
    with pytest.raises(
        RuntimeError,
        match=r"^The vector v can only be None if the input to the user-provided function is a "
        r"single Tensor with a single element\.$",
    ):
        jvp(lambda x: x * 2.0, t(XA))
    with pytest.raises(RuntimeError, match=r"^Entry 1 in v has invalid size: should be \[2, 3\]"):
        jvp(lambda x, y: x, (t(XA), t(YA)), (t(XA), t(XA)))
    with pytest.raises(
        RuntimeError, match=r"v is a tuple of invalid length: should be 2 but got 1"
    ):
        jvp(lambda x, y: x, (t(XA), t(YA)), (t(XA),))


def test_strategy_and_vectorize_errors():
    with pytest.raises(
        RuntimeError,
        match=r"^torch\.autograd\.functional\.jacobian: `strict=True` and `vectorized=True` are "
        r"not supported together\. Please either set `strict=False` or `vectorize=False`\.$",
    ):
        jacobian(lambda x: x, t(XA), strict=True, vectorize=True)
    with pytest.raises(
        NotImplementedError,
        match=r"^Computing Jacobian using forward-AD or forward-over-reverse Hessian isonly "
        r"implemented for `vectorize=True`\.$",
    ):
        jacobian(lambda x: x, t(XA), strategy="forward-mode")
    # vectorize / forward-mode give the same numbers through the loop
    j = jacobian(lambda x: x.sin(), t(XA), vectorize=True, strategy="forward-mode")
    close(j, np.diag(np.cos(XA)))


def test_strict_with_linear_function_in_hessian():
    with pytest.raises(RuntimeError, match="While computing the hessian, found that the jacobian"):
        hessian(lambda x: (x * 2.0).sum(), t(XA), strict=True)
    close(hessian(lambda x: (x * 2.0).sum(), t(XA)), np.zeros((3, 3)))


# ----- torch parity -------------------------------------------------------------------------------


@pytest.mark.skipif(torch is None, reason="torch is not installed")
@pytest.mark.parametrize("which", ["jacobian", "hessian", "vjp", "jvp", "hvp", "vhp"])
def test_matches_torch(which):
    def f_lib(lib):
        def f(x, y):
            return (
                ((x.sin() * y).sum(0) ** 2).sum()
                if which in ("hessian", "hvp", "vhp")
                else (
                    x.exp() * y,
                    (y * y).sum(),
                )
            )

        return f

    ins_t = (torch.tensor(XA), torch.tensor(YA))
    ins_f = (t(XA), t(YA))
    vs_t = (torch.tensor(XA[::-1].copy()), torch.tensor(YA[::-1].copy()))
    vs_f = (t(XA[::-1].copy()), t(YA[::-1].copy()))
    if which == "jacobian":
        rt, rf = TF.jacobian(f_lib(torch), ins_t), jacobian(f_lib(fg), ins_f)
    elif which == "hessian":
        rt, rf = TF.hessian(f_lib(torch), ins_t), hessian(f_lib(fg), ins_f)
    elif which == "vjp":
        ov_t = (torch.tensor(YA), torch.tensor(2.0))
        ov_f = (t(YA), t(2.0))
        rt, rf = TF.vjp(f_lib(torch), ins_t, ov_t), vjp(f_lib(fg), ins_f, ov_f)
    else:
        ft = getattr(TF, which)
        ff = {"jvp": jvp, "hvp": hvp, "vhp": vhp}[which]
        rt, rf = ft(f_lib(torch), ins_t, vs_t), ff(f_lib(fg), ins_f, vs_f)

    def flat(r):
        if isinstance(r, tuple):
            return [z for e in r for z in flat(e)]
        return [r]

    ft_, ff_ = flat(rt), flat(rf)
    assert len(ft_) == len(ff_)
    for a, b in zip(ff_, ft_):
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-10, atol=1e-12)
