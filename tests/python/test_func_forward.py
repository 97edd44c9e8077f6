"""``func.jvp``, ``jacfwd``, ``linearize`` and ``hessian`` (forward over reverse) against
closed forms, finite differences and torch.func when it is installed."""

import ferrograd as fg
import numpy as np
import pytest
from ferrograd import func

try:
    import torch
    import torch.func as TF
except ImportError:  # pragma: no cover - depends on the machine
    torch = None


def _t(v):
    return fg.tensor(np.asarray(v, dtype=np.float64))


def _mlp(lib, w1, w2):
    def f(x):
        return (lib.tanh(x @ w1) @ w2).sin()

    return f


def _fd_jacobian(f, x, eps=1e-6):
    x = np.asarray(x, dtype=np.float64)
    cols = []
    for idx in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[idx] = eps
        cols.append((f(x + d) - f(x - d)) / (2 * eps))
    out_shape = np.shape(cols[0])
    return np.stack(cols, axis=-1).reshape(out_shape + x.shape)


def test_jvp_matches_closed_form_and_returns_the_value():
    x, v = _t([0.3, -1.2]), _t([1.0, 2.0])
    out, tan = func.jvp(lambda a: a.exp() * a, (x,), (v,))
    xs, vs = x.numpy(), v.numpy()
    assert np.allclose(out.numpy(), np.exp(xs) * xs)
    assert np.allclose(tan.numpy(), np.exp(xs) * (1 + xs) * vs)
    out, tan, aux = func.jvp(lambda a: (a * 2, "aux"), (x,), (v,), has_aux=True)
    assert aux == "aux" and tan.tolist() == [2.0, 4.0]


def test_jacfwd_matches_finite_differences_and_jacrev():
    rng = np.random.default_rng(0)
    w1, w2 = rng.standard_normal((4, 5)), rng.standard_normal((5, 3))
    x = rng.standard_normal((2, 4))
    f = _mlp(fg, _t(w1), _t(w2))
    jf = func.jacfwd(f)(_t(x)).numpy()
    assert jf.shape == (2, 3, 2, 4)
    ref = _fd_jacobian(lambda a: f(_t(a)).numpy(), x)
    assert np.allclose(jf, ref, atol=1e-7)
    assert np.allclose(jf, func.jacrev(f)(_t(x)).numpy(), atol=1e-12)
    ja, jb = func.jacfwd(lambda a, b: a * b.sin(), argnums=(0, 1))(_t([1.0, 2.0]), _t([0.5, 0.1]))
    assert np.allclose(ja.numpy(), np.diag(np.sin([0.5, 0.1])))
    assert np.allclose(jb.numpy(), np.diag([1.0 * np.cos(0.5), 2.0 * np.cos(0.1)]))


def test_forward_over_reverse_hessian():
    a = np.array([[2.0, 1.0, 0.0], [0.5, 3.0, 1.0], [0.0, -1.0, 1.5]])
    x = _t([0.2, -0.4, 1.0])
    h = func.jacfwd(func.jacrev(lambda v: v @ _t(a) @ v))(x)
    assert np.allclose(h.numpy(), a + a.T)
    h2 = func.jacfwd(func.jacrev(lambda v: (v.sin() * v).sum()))(x)
    xs = x.numpy()
    assert np.allclose(h2.numpy(), np.diag(2 * np.cos(xs) - xs * np.sin(xs)))


def test_linearize_gives_the_jvp_at_the_point():
    x = _t([0.1, 0.7])
    out, jvp_fn = func.linearize(lambda a: a.tanh(), x)
    assert np.allclose(out.numpy(), np.tanh(x.numpy()))
    v = _t([1.0, -2.0])
    assert np.allclose(jvp_fn(v).numpy(), (1 - np.tanh(x.numpy()) ** 2) * v.numpy())


def test_errors():
    x = _t([1.0, 2.0])
    with pytest.raises(RuntimeError, match="Expected primals to be a tuple"):
        func.jvp(lambda a: a, x, (x,))
    with pytest.raises(RuntimeError, match="Expected primals and tangents to have the same"):
        func.jvp(lambda a: a, (x,), (x, x))
    with pytest.raises(RuntimeError, match="expected f\\(\\*primals\\) to return only tensors"):
        func.jvp(lambda a: 3, (x,), (x,))
    # forward_ad itself has one level at a time, as torch's (the transforms nest regardless).
    with fg.autograd.forward_ad.dual_level():
        with pytest.raises(RuntimeError, match="Nested forward mode AD is not supported"):
            with fg.autograd.forward_ad.dual_level():
                pass


@pytest.mark.skipif(torch is None, reason="torch not installed")
def test_same_as_torch_func():
    rng = np.random.default_rng(3)
    w1, w2, x = rng.standard_normal((4, 5)), rng.standard_normal((5, 3)), rng.standard_normal(4)
    ours = func.jacfwd(_mlp(fg, _t(w1), _t(w2)))(_t(x)).numpy()
    theirs = TF.jacfwd(_mlp(torch, torch.tensor(w1), torch.tensor(w2)))(torch.tensor(x)).numpy()
    assert np.allclose(ours, theirs, atol=1e-12)

    def loss(lib):
        return lambda v: (lib.tanh(v) * v.exp()).sum()

    assert np.allclose(
        func.jacfwd(func.jacrev(loss(fg)))(_t(x)).numpy(),
        TF.hessian(loss(torch))(torch.tensor(x)).numpy(),
    )
    for call in (lambda F, T: F.jvp(lambda a: a, T, (T,)),):
        msgs = []
        for F, lib in ((func, fg), (TF, torch)):
            try:
                call(F, lib.tensor([1.0]))
            except RuntimeError as e:
                msgs.append(str(e))
        assert msgs[0] == msgs[1]


@pytest.mark.parametrize(
    "hess", [func.hessian, lambda f: func.jacfwd(func.jacrev(f))], ids=["hessian", "fwd_rev"]
)
def test_hessian_of_an_input_that_requires_grad_is_differentiable(hess):
    # f = sum(e^v + v^3): H = diag(e^v + 6v), and d/dv sum(H) = e^v + 6
    x = _t([0.3, -0.7, 1.1]).requires_grad_()
    h = hess(lambda v: (v.exp() + v**3).sum())(x)
    assert h.requires_grad
    xs = x.detach().numpy()
    assert np.allclose(h.detach().numpy(), np.diag(np.exp(xs) + 6 * xs))
    (g,) = fg.autograd.grad(h.sum(), x)
    assert np.allclose(g.numpy(), np.exp(xs) + 6)
