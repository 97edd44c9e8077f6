"""LBFGS (torch.optim.LBFGS): convergence to closed-form minimisers (a quadratic's A⁻¹b, a
least-squares solution), the closure protocol and its counters, argument errors, and the
iterates of torch's LBFGS step by step when torch is installed, with and without the strong
Wolfe line search."""

from __future__ import annotations

from typing import Any, List, Optional

import ferrograd as fg
import numpy as np
import pytest

try:
    import torch
except ImportError:  # pragma: no cover - depends on the machine
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")

RNG = np.random.default_rng(0)
M = RNG.standard_normal((6, 6))
A = M @ M.T + 6 * np.eye(6)  # well-conditioned SPD
B = RNG.standard_normal(6)


@pytest.mark.parametrize("line_search", [None, "strong_wolfe"])
def test_quadratic_converges_to_the_solution_of_a_x_equals_b(line_search: Optional[str]) -> None:
    a, b = fg.tensor(A), fg.tensor(B)
    x = fg.zeros(6, dtype=fg.float64, requires_grad=True)
    # Tight tolerances: the defaults stop once the loss changes by under 1e-9, which near the
    # minimum is a relative error in x of about 1e-5.
    opt = fg.optim.LBFGS(
        [x], max_iter=50, tolerance_grad=1e-12, tolerance_change=1e-16, line_search_fn=line_search
    )

    def closure() -> Any:
        opt.zero_grad()
        loss = 0.5 * (x @ (a @ x)) - b @ x
        loss.backward()
        return loss

    for _ in range(5):
        opt.step(closure)
    np.testing.assert_allclose(x.detach().numpy(), np.linalg.solve(A, B), rtol=1e-6, atol=1e-8)


def test_least_squares_over_two_parameters_and_counters() -> None:
    # Several parameters are one flat vector; the closure runs at least once per step.
    xs = RNG.standard_normal((40, 3))
    ys = xs @ np.array([1.5, -2.0, 0.5]) + 0.25
    w = fg.zeros(3, dtype=fg.float64, requires_grad=True)
    c = fg.zeros(1, dtype=fg.float64, requires_grad=True)
    opt = fg.optim.LBFGS(
        [w, c], tolerance_change=1e-16, line_search_fn="strong_wolfe", history_size=4
    )
    calls = []

    def closure() -> Any:
        calls.append(1)
        opt.zero_grad()
        loss = ((fg.tensor(xs) @ w + c - fg.tensor(ys)) ** 2).mean()
        loss.backward()
        return loss

    first = opt.step(closure)
    assert float(first) > 1.0  # the loss at the start
    opt.step(closure)
    np.testing.assert_allclose(w.detach().numpy(), [1.5, -2.0, 0.5], atol=1e-7)
    np.testing.assert_allclose(c.detach().numpy(), [0.25], atol=1e-7)
    state = opt.state[w]
    assert state["func_evals"] == len(calls) and state["n_iter"] >= 2
    assert len(state["old_dirs"]) <= 4


def test_argument_errors() -> None:
    x = fg.zeros(2, requires_grad=True)
    with pytest.raises(ValueError, match="per-parameter options"):
        fg.optim.LBFGS([{"params": [x]}, {"params": [fg.zeros(1, requires_grad=True)]}])
    with pytest.raises(ValueError, match="Invalid learning rate"):
        fg.optim.LBFGS([x], lr=-1)
    opt = fg.optim.LBFGS([x], line_search_fn="armijo")
    with pytest.raises(RuntimeError, match="only 'strong_wolfe' is supported"):
        opt.step(lambda: (x**2).sum())


def _trajectory(lib: Any, line_search: Optional[str]) -> List[Any]:
    x = lib.tensor(np.array([-1.5, 2.0, 0.5, -0.7, 1.2]), dtype=lib.float64, requires_grad=True)
    opt = lib.optim.LBFGS([x], lr=0.8, max_iter=7, history_size=3, line_search_fn=line_search)
    out = []
    for _ in range(6):

        def closure() -> Any:
            opt.zero_grad()
            loss = (100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2).sum()
            loss = loss + (x.exp() * 0.01).sum()
            loss.backward()
            return loss

        loss = opt.step(closure)
        st = opt.state[x]
        out.append((float(loss), x.detach().numpy().copy(), st["func_evals"], st["n_iter"]))
    return out


@needs_torch
@pytest.mark.parametrize("line_search", [None, "strong_wolfe"])
def test_iterates_match_torch(line_search: Optional[str]) -> None:
    ours, theirs = _trajectory(fg, line_search), _trajectory(torch, line_search)
    for (la, xa, ea, na), (lb, xb, eb, nb) in zip(ours, theirs):
        assert (ea, na) == (eb, nb)
        np.testing.assert_allclose(la, lb, rtol=1e-9)
        np.testing.assert_allclose(xa, xb, rtol=1e-8, atol=1e-10)
