"""``nn.functional`` behaviour the op table cannot express: numerical stability at inputs that
overflow naive formulas, deliberate non-derivative gradients (embedding), seeded dropout, pooling
indices, higher-order derivatives through convolution, in-place variants."""

from __future__ import annotations

import ferrograd as fg
import ferrograd.nn.functional as F
import numpy as np
import pytest
from ferrograd.autograd import gradcheck, gradgradcheck

try:
    import torch
except ImportError:  # pragma: no cover - depends on the machine
    torch = None


def t(a, rg=True):
    return fg.tensor(np.array(a, dtype=np.float64), requires_grad=rg)


def grad_of(y, x):
    (g,) = fg.autograd.grad(y, x)
    return g.numpy()


# ----- stability ---------------------------------------------------------------------------------


def test_softplus_and_bce_with_logits_do_not_overflow():
    x = t([-1000.0, -30.0, 0.0, 30.0, 1000.0])
    y = F.softplus(x)
    # log(1 + e^x): 0, e^-30, log 2, 30 + e^-30, 1000
    np.testing.assert_allclose(
        y.detach().numpy(), [0.0, np.exp(-30.0), np.log(2.0), 30.0, 1000.0], rtol=1e-12
    )
    np.testing.assert_allclose(
        grad_of(y.sum(), x),  # sigmoid(x) = exp(-log(1 + e^-x)), without overflow
        np.exp(-np.logaddexp(0.0, -np.array([-1000.0, -30, 0, 30, 1000]))),
        rtol=1e-12,
    )
    tgt = fg.tensor([1.0, 0.0, 0.5, 1.0, 0.0])
    loss = F.binary_cross_entropy_with_logits(x, tgt, reduction="none")
    xs = np.array([-1000.0, -30, 0, 30, 1000])
    expected = np.logaddexp(0, xs) - np.array([1.0, 0, 0.5, 1, 0]) * xs
    # (1 - t) x + log(1 + e^-x) cancels for x = -30, t = 0 (in torch too): absolute tolerance
    np.testing.assert_allclose(loss.detach().numpy(), expected, rtol=1e-12, atol=1e-12)
    assert np.isfinite(grad_of(loss.sum(), x)).all()


def test_softmax_family_is_stable_for_huge_logits():
    x = t([[1000.0, 0.0, -1000.0], [5000.0, 5000.0, 5000.0]])
    ls = F.log_softmax(x, 1)
    np.testing.assert_allclose(
        ls.detach().numpy(),
        [[0.0, -1000.0, -2000.0], [-np.log(3)] * 3],
        rtol=1e-12,
    )
    sm = F.softmax(x, 1)
    np.testing.assert_allclose(sm.detach().numpy()[1], [1 / 3] * 3, rtol=1e-12)
    ce = F.cross_entropy(x, fg.tensor([1, 2]))
    np.testing.assert_allclose(ce.item(), (1000.0 + np.log(3)) / 2, rtol=1e-12)
    g = grad_of(ce, x)
    np.testing.assert_allclose(g, [[0.5, -0.5, 0.0], [1 / 6, 1 / 6, -1 / 3]], atol=1e-12)


def test_elu_has_no_nan_gradient_for_large_positive_inputs():
    x = t([1000.0, -1000.0, 0.0])
    y = F.elu(x, alpha=2.0)
    np.testing.assert_allclose(y.detach().numpy(), [1000.0, -2.0, 0.0])
    np.testing.assert_allclose(grad_of(y.sum(), x), [1.0, 0.0, 2.0])  # alpha at 0, as torch


def test_bce_clamps_the_log_at_minus_100():
    x = t([0.0, 1.0, 0.5])
    loss = F.binary_cross_entropy(x, fg.tensor([1.0, 0.0, 1.0]), reduction="none")
    np.testing.assert_allclose(loss.detach().numpy(), [100.0, 100.0, np.log(2.0)], rtol=1e-12)
    assert np.isfinite(grad_of(loss.sum(), x)).all()


# ----- embedding ---------------------------------------------------------------------------------


def test_embedding_padding_idx_and_frequency_scaling():
    w = t(np.arange(12.0).reshape(4, 3))
    i = fg.tensor([[0, 2, 2], [1, 2, 0]])
    out = F.embedding(i, w, padding_idx=1, scale_grad_by_freq=True)
    np.testing.assert_array_equal(out.detach().numpy(), np.arange(12.0).reshape(4, 3)[i.numpy()])
    g = grad_of((out * fg.tensor(np.arange(18.0).reshape(2, 3, 3))).sum(), w)
    up = np.arange(18.0).reshape(6, 3)
    expected = np.zeros((4, 3))
    expected[0] = (up[0] + up[5]) / 2  # index 0 appears twice
    expected[2] = (up[1] + up[2] + up[4]) / 3  # index 2 three times; index 1 is padding
    np.testing.assert_allclose(g, expected, rtol=1e-12)
    if torch is not None:
        tw = torch.tensor(np.arange(12.0).reshape(4, 3), requires_grad=True)
        to = torch.nn.functional.embedding(
            torch.tensor(i.numpy()), tw, padding_idx=1, scale_grad_by_freq=True
        )
        (to * torch.tensor(np.arange(18.0).reshape(2, 3, 3))).sum().backward()
        np.testing.assert_allclose(g, tw.grad.numpy(), rtol=1e-12)


def test_embedding_max_norm_renormalises_rows_in_place():
    w = fg.tensor([[3.0, 4.0], [0.3, 0.4], [6.0, 8.0]], dtype=fg.float64)
    F.embedding(fg.tensor([0, 1]), w, max_norm=1.0)
    got = w.numpy()
    np.testing.assert_allclose(np.linalg.norm(got[0]), 1.0, rtol=1e-6)
    np.testing.assert_allclose(got[1], [0.3, 0.4])  # under the limit
    np.testing.assert_allclose(got[2], [6.0, 8.0])  # not looked up


# ----- dropout -----------------------------------------------------------------------------------


def test_dropout_is_seeded_scaled_and_identity_in_eval():
    x = fg.ones(1000, dtype=fg.float64)
    fg.manual_seed(7)
    a = F.dropout(x, 0.3).numpy()
    fg.manual_seed(7)
    b = F.dropout(x, 0.3).numpy()
    np.testing.assert_array_equal(a, b)
    assert set(np.unique(a)) <= {0.0, 1 / 0.7}
    assert 0.6 < (a != 0).mean() < 0.8
    assert F.dropout(x, 0.3, training=False) is x
    assert not F.dropout(x, 1.0).numpy().any()
    xr = t(np.ones(6))
    fg.manual_seed(1)
    y = F.dropout(xr, 0.5)
    g = grad_of(y.sum(), xr)
    np.testing.assert_array_equal(g, y.detach().numpy())  # d/dx (x * mask/(1-p)) = mask/(1-p)


# ----- pooling -----------------------------------------------------------------------------------


def test_max_pool_indices_ties_and_nan():
    x = fg.tensor([[[[1.0, 3.0, 3.0, 0.0], [2.0, 3.0, float("nan"), 1.0]]]], dtype=fg.float64)
    out, ind = F.max_pool2d(x, 2, return_indices=True)
    assert ind.dtype == fg.int64
    np.testing.assert_array_equal(ind.numpy(), [[[[1, 6]]]])  # first max; NaN wins
    assert out.numpy()[0, 0, 0, 0] == 3.0 and np.isnan(out.numpy()[0, 0, 0, 1])
    if torch is not None:
        to, ti = torch.nn.functional.max_pool2d(torch.tensor(x.numpy()), 2, return_indices=True)
        np.testing.assert_array_equal(ind.numpy(), ti.numpy())


def test_pooling_and_padding_pass_gradcheck():
    rng = np.random.default_rng(0)
    x = fg.tensor(rng.uniform(-1, 1, size=(1, 2, 5, 4)), requires_grad=True)
    assert gradcheck(lambda a: F.max_pool2d(a, 2, stride=1, padding=1), (x,))
    assert gradcheck(lambda a: F.avg_pool2d(a, 3, 2, 1, ceil_mode=True), (x,))
    assert gradgradcheck(lambda a: F.pad(a, (1, 2, 2, 1), mode="reflect") ** 2, (x,))


# ----- convolution: higher order -----------------------------------------------------------------


def test_conv2d_is_twice_differentiable_in_input_and_weight():
    rng = np.random.default_rng(1)
    x = fg.tensor(rng.uniform(-1, 1, size=(1, 2, 4, 4)), requires_grad=True)
    w = fg.tensor(rng.uniform(-1, 1, size=(2, 1, 2, 2)), requires_grad=True)
    b = fg.tensor(rng.uniform(-1, 1, size=(2,)), requires_grad=True)

    def f(x, w, b):
        return F.conv2d(x, w, b, stride=1, padding=1, groups=2).tanh()

    assert gradcheck(f, (x, w, b))
    assert gradgradcheck(f, (x, w, b))


def test_conv1d_matches_a_direct_sum():
    rng = np.random.default_rng(2)
    xa, wa = rng.normal(size=(2, 3, 9)), rng.normal(size=(4, 3, 2))
    got = F.conv1d(t(xa, False), t(wa, False), stride=2, padding=1, dilation=3).numpy()
    xp = np.pad(xa, ((0, 0), (0, 0), (1, 1)))
    lout = (9 + 2 - 3 * (2 - 1) - 1) // 2 + 1
    expected = np.zeros((2, 4, lout))
    for n in range(2):
        for o in range(4):
            for j in range(lout):
                for k in range(2):
                    expected[n, o, j] += (wa[o, :, k] * xp[n, :, j * 2 + k * 3]).sum()
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


def test_unfold_fold_names_and_inplace_relu():
    x = t(np.arange(16.0).reshape(1, 1, 4, 4))
    cols = F.unfold(x, 2)
    assert cols.grad_fn.name() == "Im2ColBackward0"
    assert F.fold(cols, 4, 2).grad_fn.name() == "Col2ImBackward0"
    y = t([-1.0, 2.0]) * 1.0
    z = F.relu(y, inplace=True)
    assert z is y
    np.testing.assert_array_equal(y.detach().numpy(), [0.0, 2.0])


@pytest.mark.skipif(torch is None, reason="torch is not installed")
def test_layer_norm_and_conv_second_derivatives_match_torch():
    rng = np.random.default_rng(4)
    xa, wa = rng.normal(size=(1, 2, 4, 4)), rng.normal(size=(3, 2, 3, 3))

    def run(L, x, w):
        y = L.nn.functional.conv2d(x, w, padding=1)
        y = L.nn.functional.layer_norm(y, [4, 4])
        (g,) = L.autograd.grad((y**3).sum(), x, create_graph=True)
        (gg,) = L.autograd.grad((g * g).sum(), w)
        return gg

    ours = run(fg, t(xa), t(wa))
    theirs = run(
        torch,
        torch.tensor(xa, requires_grad=True),
        torch.tensor(wa, requires_grad=True),
    )
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-9, atol=1e-10)


def test_nn_is_reachable_from_the_top_level_package():
    import importlib

    top = importlib.import_module("ferrograd")
    assert top.nn.functional is F
    assert top.nn.functional.relu is F.relu
