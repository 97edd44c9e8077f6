"""The vectorised float32 math ops and their fused backward rules, through the Python API:
values against torch (when importable) and NumPy's float64, gradients against float64 finite
differences (gradcheck) and double backward (gradgradcheck), large tensors on the parallel path."""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest
from ferrograd.autograd import gradcheck, gradgradcheck

try:
    import torch
except ImportError:  # pragma: no cover - depends on the machine
    torch = None

OPS = ["exp", "log", "sin", "cos", "tanh", "sigmoid"]

NP = {
    "exp": np.exp,
    "log": np.log,
    "sin": np.sin,
    "cos": np.cos,
    "tanh": np.tanh,
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
}


def _inputs(n: int, op: str, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n) * 3.0
    return np.abs(x) + 1e-3 if op == "log" else x


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("n", [7, 300_000])
def test_float32_forward_within_two_ulp_of_float64(op, n):
    x = _inputs(n, op).astype(np.float32)
    got = getattr(fg.tensor(x), op)().numpy()
    want = NP[op](x.astype(np.float64))
    ulp = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    assert got.dtype == np.float32
    assert np.max(np.abs(got - want) / ulp) <= 2.0


@pytest.mark.parametrize("op", OPS)
def test_special_values_follow_ieee(op):
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, 3.4e38, -3.4e38], dtype=np.float32)
    with np.errstate(all="ignore"):
        want = NP[op](x.astype(np.float64)).astype(np.float32)
    got = getattr(fg.tensor(x), op)().numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=2.5e-7, atol=0)
    np.testing.assert_array_equal(np.signbit(got[ok]), np.signbit(want[ok]))


@pytest.mark.skipif(torch is None, reason="torch not importable")
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("n", [16, 300_000])
def test_forward_and_backward_match_torch_float32(op, n):
    x0 = _inputs(n, op, seed=1).astype(np.float32)
    w0 = np.random.default_rng(2).standard_normal(n).astype(np.float32)
    x = fg.tensor(x0).requires_grad_()
    y = getattr(x, op)()
    (y * fg.tensor(w0)).sum().backward()
    tx = torch.tensor(x0, requires_grad=True)
    ty = getattr(tx, op)()
    (ty * torch.tensor(w0)).sum().backward()
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=3e-7, atol=1e-37)
    # tanh' = 1 - y² and sigmoid' = y(1 - y) cancel where y is near ±1 or 1: one ulp of y is
    # then an absolute error of about eps * |w| in the gradient, whatever its size.
    got, want = x.grad.numpy().astype(np.float64), tx.grad.numpy().astype(np.float64)
    tol = 2e-6 * np.abs(want) + 4 * np.finfo(np.float32).eps * np.abs(w0)
    assert np.all(np.abs(got - want) <= tol)


@pytest.mark.parametrize("op", OPS)
def test_gradients_and_second_derivatives_float64(op):
    x = fg.tensor(_inputs(6, op, seed=3)).requires_grad_()
    f = getattr(fg.Tensor, op)
    assert gradcheck(f, (x,))
    assert gradgradcheck(f, (x,))


def test_double_backward_through_a_chain():
    x = fg.tensor(np.linspace(-1.5, 1.5, 9)).requires_grad_()

    def f(t):
        return (t * 0.999 + 0.001).tanh().sin().exp()

    assert gradgradcheck(f, (x,))
    (g,) = fg.autograd.grad(f(x).sum(), x, create_graph=True)
    assert g.requires_grad


def test_elementwise_big_workload_gradient():
    # The compare.py workload at a quarter size: exercises expanded gradients of sum, the
    # parallel fused kernels and gradient accumulation from three branches.
    x0 = np.random.default_rng(4).standard_normal(1_000_000).astype(np.float32)
    x = fg.tensor(x0).requires_grad_()
    (x.sin() * x + x.exp() * 0.5).sum().backward()
    xd = x0.astype(np.float64)
    want = np.cos(xd) * xd + np.sin(xd) + np.exp(xd) * 0.5
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("dtype", [fg.float32, fg.float64])
def test_relu_backward_is_torch_threshold_backward(create_graph, dtype):
    # Zero where the output is <= 0, so a NaN output passes the gradient through (torch's
    # threshold_backward); the fused pass (no graph) and the composite rule (create_graph) agree.
    x = fg.tensor([float("nan"), -1.0, 0.0, 2.0, -0.0, 1e-30], dtype=dtype, requires_grad=True)
    g = fg.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], dtype=dtype)
    (gx,) = fg.autograd.grad(x.relu(), x, g, create_graph=create_graph)
    assert gx.tolist() == [1.0, 0.0, 0.0, 4.0, 0.0, 6.0]
    if torch is not None:
        tx = torch.tensor(x.detach().numpy(), requires_grad=True)
        (tg,) = torch.autograd.grad(tx.relu(), tx, torch.tensor(g.numpy()))
        assert gx.tolist() == tg.tolist()


@pytest.mark.parametrize(
    "sa,sb",
    [((64, 1000, 37), (37,)), ((3, 5, 40), (1, 1, 40)), ((7, 33), (33,)), ((2, 3, 4, 17), (4, 17))],
)
def test_binary_ops_with_a_row_broadcast_along_leading_dims_match_numpy(
    sa: tuple, sb: tuple
) -> None:
    """A contiguous operand repeated along the other's leading dims (a bias row) runs by rows,
    in parallel chunks that start mid-row (64x1000x37 splits off a row boundary)."""
    rng = np.random.default_rng(8)
    a, b = rng.standard_normal(sa).astype(np.float32), rng.standard_normal(sb).astype(np.float32)
    for x, y in ((a, b), (b, a)):
        tx, ty = fg.tensor(x), fg.tensor(y)
        np.testing.assert_array_equal((tx - ty).numpy(), x - y)
        np.testing.assert_array_equal((tx / ty).numpy(), x / y)
        np.testing.assert_array_equal((tx < ty).numpy(), x < y)
