"""The fused ``linear`` node: leading dims folded into one product, in-place ops on its output,
gradients against the closed forms in float64 (gx = g w, gw = gᵀ x, gb = Σ g)."""

import ferrograd as fg
import ferrograd.nn.functional as F
import numpy as np
import pytest


def _rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape)


@pytest.mark.parametrize("lead", [(5,), (2, 3), (2, 3, 4)])
def test_gradients_match_closed_forms(lead: tuple) -> None:
    x0, w0, b0, g0 = (
        _rand(*lead, 6, seed=1),
        _rand(4, 6, seed=2),
        _rand(4, seed=3),
        _rand(*lead, 4, seed=4),
    )
    x, w, b = (fg.tensor(a, requires_grad=True) for a in (x0, w0, b0))
    y = F.linear(x, w, b)
    np.testing.assert_allclose(y.detach().numpy(), x0 @ w0.T + b0, rtol=1e-12, atol=1e-12)
    y.backward(fg.tensor(g0))
    g2, x2 = g0.reshape(-1, 4), x0.reshape(-1, 6)
    np.testing.assert_allclose(x.grad.numpy(), g0 @ w0, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(w.grad.numpy(), g2.T @ x2, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(b.grad.numpy(), g2.sum(0), rtol=1e-12, atol=1e-12)
    # The weight gradient is produced in the weight's own layout, not as a transposed view.
    assert w.grad.is_contiguous()


def test_inplace_relu_on_the_output() -> None:
    x0, w0 = _rand(2, 3, 5, seed=5), _rand(4, 5, seed=6)
    x, w = fg.tensor(x0, requires_grad=True), fg.tensor(w0, requires_grad=True)
    y = F.relu(F.linear(x, w), inplace=True)
    y.sum().backward()
    mask = (x0 @ w0.T > 0).reshape(-1, 4)
    np.testing.assert_allclose(w.grad.numpy(), mask.T @ x0.reshape(-1, 5), rtol=1e-12)


def test_mismatched_sizes_raise_torchs_message() -> None:
    x, w = fg.zeros(4, 3), fg.zeros(5, 2)
    with pytest.raises(
        RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(4x3 and 2x5\)"
    ):
        F.linear(x, w)
