"""``autograd.graph.allow_mutation_on_saved_tensors``: inside it, modifying a tensor saved for
backward is allowed and backward uses the values as saved (closed-form gradients of the
original values); outside it the same program is torch's in-place error."""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest

allow = fg.autograd.graph.allow_mutation_on_saved_tensors

try:
    import torch
except ImportError:  # pragma: no cover - depends on the machine
    torch = None


def _doc_example(lib):  # type: ignore[no-untyped-def]
    a = lib.ones(2, 3, requires_grad=True)
    b = a.clone()
    out = (b**2).sum()
    b.sin_()
    out.sum().backward()
    return a.grad, b


def test_torchs_documented_example() -> None:
    with allow():
        grad, b = _doc_example(fg)
    np.testing.assert_allclose(grad.numpy(), np.full((2, 3), 2.0))  # d(b²)/da at b = 1
    np.testing.assert_allclose(b.detach().numpy(), np.full((2, 3), np.sin(1.0)), rtol=1e-6)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        _doc_example(fg)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda t: t.mul_(3.0),
        lambda t: t.copy_(fg.zeros_like(t)),
        lambda t: t.__setitem__((0, slice(None)), 5.0),
        lambda t: t.add_(1.0).add_(1.0),  # twice: the copy is taken at the first write
        lambda t: t.view(-1).fill_(2.0),  # through a view of the saved tensor
    ],
)
def test_every_inplace_path_keeps_the_saved_values(mutate) -> None:  # type: ignore[no-untyped-def]
    x = fg.tensor([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]], dtype=fg.float64, requires_grad=True)
    with allow():
        b = x * 1.0
        out = (b.exp() * b).sum()  # saves b (and exp(b))
        mutate(b)
        (g,) = fg.autograd.grad(out, [x])
    xv = x.detach().numpy()
    np.testing.assert_allclose(g.numpy(), np.exp(xv) * (1 + xv), rtol=1e-12)


def test_a_saved_view_keeps_its_values_when_the_base_changes() -> None:
    x = fg.arange(6.0, dtype=fg.float64).reshape(2, 3).requires_grad_()
    with allow():
        b = x * 1.0
        row = b[1]
        out = (row * row).sum()  # saves the view
        b.zero_()
        out.backward()
    np.testing.assert_allclose(x.grad.numpy(), [[0, 0, 0], [6.0, 8.0, 10.0]])


def test_a_leaf_changed_under_no_grad_is_used_as_saved() -> None:
    a = fg.tensor([1.0, 2.0, 3.0], dtype=fg.float64, requires_grad=True)
    with allow():
        out = (a * a).sum()
        with fg.no_grad():
            a.mul_(10.0)
        out.backward()
    np.testing.assert_allclose(a.grad.numpy(), [2.0, 4.0, 6.0])


def test_backward_outside_the_context_and_nesting_are_errors() -> None:
    with allow():
        a = fg.ones(2, requires_grad=True)
        out = (a.clone() ** 2).sum()
    with pytest.raises(RuntimeError, match="outside of the 'allow_mutation_on_saved_tensors'"):
        out.backward()
    with allow():
        with pytest.raises(RuntimeError, match="cannot be nested"):
            with allow():
                pass
    # The failed nesting left the outer context usable, and closing it restored normal checks.
    with allow():
        grad, _ = _doc_example(fg)
    np.testing.assert_allclose(grad.numpy(), np.full((2, 3), 2.0))
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        _doc_example(fg)


@pytest.mark.skipif(torch is None, reason="torch is not installed")
def test_matches_torch() -> None:
    def run(lib):  # type: ignore[no-untyped-def]
        x = lib.tensor([[0.3, -1.2], [2.0, 0.7]], dtype=lib.float64, requires_grad=True)
        with lib.autograd.graph.allow_mutation_on_saved_tensors():
            b = x.tanh()
            c = b.sigmoid() * b
            b.mul_(2.0)
            d = (c * b).sum()
            d.backward()
        return x.grad.numpy()

    np.testing.assert_allclose(run(fg), run(torch), rtol=1e-12)
