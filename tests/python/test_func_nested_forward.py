"""Forward transforms nested in forward transforms (``jacfwd(jacfwd(f))``, ``jvp`` of ``jvp``,
third order), and forward-over-reverse under ``vmap`` (per-sample Hessians): closed-form
derivatives, reverse-over-reverse, a per-sample loop, and torch.func when installed."""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest
from ferrograd.func import grad, hessian, jacfwd, jacrev, jvp, vmap

try:
    import torch
    import torch.func as tf
except ImportError:  # pragma: no cover - depends on the machine
    torch = None

X = np.array([0.3, -1.2, 0.8])


def f(x):  # type: ignore[no-untyped-def]
    return (x.sin() * x**3).sum()


def f_second(x: np.ndarray) -> np.ndarray:
    """d²/dx² of sin(x) x³, elementwise (the Hessian of ``f`` is its diagonal)."""
    return -np.sin(x) * x**3 + 6 * np.cos(x) * x**2 + 6 * np.sin(x) * x


def test_jacfwd_of_jacfwd_is_the_hessian() -> None:
    x = fg.tensor(X)
    np.testing.assert_allclose(jacfwd(jacfwd(f))(x).numpy(), np.diag(f_second(X)), rtol=1e-12)


def test_jvp_of_jvp_is_the_second_directional_derivative() -> None:
    x, v = fg.tensor(X), fg.tensor([1.0, -0.5, 2.0], dtype=fg.float64)
    inner = lambda y: jvp(f, (y,), (v,))[1]  # noqa: E731
    got = jvp(inner, (x,), (v,))[1]
    np.testing.assert_allclose(got.item(), (f_second(X) * v.numpy() ** 2).sum(), rtol=1e-12)


def test_third_order_by_three_forward_transforms() -> None:
    x = fg.tensor(X)
    t = jacfwd(jacfwd(jacfwd(lambda y: (y**4).sum())))(x).numpy()
    want = np.zeros((3, 3, 3))
    for i in range(3):
        want[i, i, i] = 24 * X[i]
    np.testing.assert_allclose(t, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "transform",
    [
        lambda g: jacfwd(jacfwd(g)),
        lambda g: jacfwd(jacrev(g)),
        lambda g: jacfwd(grad(g)),
        lambda g: jacrev(jacfwd(g)),
        hessian,
    ],
    ids=["fwd_fwd", "fwd_rev", "fwd_grad", "rev_fwd", "hessian"],
)
@pytest.mark.parametrize(
    "g",
    [
        lambda x: (x**3).sum(),
        f,
        lambda x: x.tanh() @ x.exp(),
    ],
    ids=["pow", "sin_pow", "tanh_exp"],
)
def test_per_sample_second_derivatives_under_vmap(transform, g) -> None:  # type: ignore[no-untyped-def]
    """vmap of a second-order transform equals the loop over samples (the samples were summed
    into one another before: a silently wrong Hessian)."""
    xs = fg.tensor([[0.3, -1.2], [0.6, -2.4], [1.1, 0.4]], dtype=fg.float64)
    got = vmap(transform(g))(xs).numpy()
    want = np.stack([jacrev(jacrev(g))(xs[i]).numpy() for i in range(3)])
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


@pytest.mark.skipif(torch is None, reason="torch is not installed")
def test_matches_torch_func() -> None:
    def g(L, x):  # type: ignore[no-untyped-def]
        return (x.tanh() * x.exp()).sum() + (x**3).sum()

    ours = vmap(jacfwd(jacfwd(lambda x: g(fg, x))))(fg.tensor(np.stack([X, 2 * X]))).numpy()
    theirs = tf.vmap(tf.jacfwd(tf.jacfwd(lambda x: g(torch, x))))(
        torch.tensor(np.stack([X, 2 * X]))
    ).numpy()
    np.testing.assert_allclose(ours, theirs, rtol=1e-12)
