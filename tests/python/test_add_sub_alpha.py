"""``add``/``sub`` (method, function and in-place forms) with torch's ``alpha`` keyword:
``self ± alpha * other`` against NumPy, gradients in closed form (``alpha * g`` for ``other``),
and torch's checks on alpha's type."""

from __future__ import annotations

from typing import Any

import ferrograd as fg
import numpy as np
import pytest

RNG = np.random.default_rng(3)


@pytest.mark.parametrize("alpha", [2, -0.5, 1])
def test_values_and_gradients(alpha: Any) -> None:
    a_np, b_np = RNG.standard_normal((3, 4)), RNG.standard_normal(4)
    a = fg.tensor(a_np, requires_grad=True)
    b = fg.tensor(b_np, requires_grad=True)
    for out, sign in ((a.add(b, alpha=alpha), 1), (fg.sub(a, b, alpha=alpha), -1)):
        np.testing.assert_allclose(out.detach().numpy(), a_np + sign * alpha * b_np, rtol=1e-15)
        ga, gb = fg.autograd.grad(out.sum(), [a, b])
        np.testing.assert_allclose(ga.numpy(), np.ones((3, 4)))
        np.testing.assert_allclose(gb.numpy(), np.full(4, 3.0 * sign * alpha))
    x = fg.tensor(a_np)
    x.add_(fg.tensor(b_np), alpha=alpha)
    np.testing.assert_allclose(x.numpy(), a_np + alpha * b_np, rtol=1e-15)
    x.sub_(3.0, alpha=alpha)
    np.testing.assert_allclose(x.numpy(), a_np + alpha * b_np - 3.0 * alpha, rtol=1e-15)
    assert fg.add(a, b, alpha=alpha).grad_fn.name() == "AddBackward0"


def test_integer_and_bool_alpha_checks() -> None:
    i = fg.tensor([1, 2, 3])
    assert fg.add(i, i, alpha=3).tolist() == [4, 8, 12]
    assert fg.add(i, i, alpha=3).dtype == fg.int64
    with pytest.raises(RuntimeError, match="argument alpha must not be a floating point"):
        i.add(i, alpha=0.5)
    with pytest.raises(RuntimeError, match="Boolean alpha only supported for Boolean results"):
        i.add(i, alpha=True)
    t = fg.tensor([True, False])
    assert t.add(t, alpha=False).tolist() == [True, False]
    # A float alpha with an integral tensor and a float operand is fine (the result is float).
    assert i.add(fg.tensor([0.5, 0.5, 0.5]), alpha=2.0).tolist() == [2.0, 3.0, 4.0]
    with pytest.raises(TypeError, match=r"add\(\): argument 'alpha' must be Number, not str"):
        fg.ones(2).add(fg.ones(2), alpha="a")
    with pytest.raises(TypeError, match=r"sub_\(\): argument 'alpha' must be Number"):
        fg.ones(2).sub_(fg.ones(2), alpha=[1])
