"""The rest of torch's everyday nn surface: padding, channel and alpha dropout, Fold/Unfold,
the shrink activations, RReLU, Softmax2d, 3-d adaptive pooling, InstanceNorm3d, power-average
pooling, max_unpool, bilinear and the in-place functional variants. Closed forms first (these
run without torch), then torch parity for values, gradients, reprs and errors."""

from __future__ import annotations

import math
import warnings

import ferrograd as fg
import ferrograd.nn.functional as F
import numpy as np
import pytest
from ferrograd import nn


def _t(a, grad=False):
    return fg.tensor(np.asarray(a, dtype=np.float64), requires_grad=grad)


RNG = np.random.default_rng(7)


# ----- closed forms ------------------------------------------------------------------------------


def test_shrinks_closed_form_and_gradient():
    a = np.array([-2.0, -0.5, -0.3, 0.0, 0.4, 0.5, 0.51, 3.0])
    x = _t(a, True)
    hard = F.hardshrink(x)
    np.testing.assert_array_equal(hard.detach().numpy(), np.where(np.abs(a) > 0.5, a, 0.0))
    soft = F.softshrink(x, 0.3)
    want = np.where(a > 0.3, a - 0.3, np.where(a < -0.3, a + 0.3, 0.0))
    np.testing.assert_allclose(soft.detach().numpy(), want, rtol=0, atol=1e-15)
    (g,) = fg.autograd.grad(soft.sum(), x)
    np.testing.assert_array_equal(g.numpy(), (np.abs(a) > 0.3).astype(float))
    msg = r"lambda must be in range \[0, 1.79769e\+308\] for input dtype Double"
    with pytest.raises(RuntimeError, match=msg):
        F.softshrink(x, -1.0)


def test_rrelu_training_slopes_lie_in_range_and_are_the_gradient():
    fg.manual_seed(0)
    a = RNG.standard_normal(2000)
    x = _t(a, True)
    y = F.rrelu(x, 0.1, 0.3, training=True)
    ratio = y.detach().numpy() / a
    neg = a < 0
    assert np.all(ratio[~neg] == 1.0)
    assert np.all((ratio[neg] >= 0.1) & (ratio[neg] <= 0.3))
    assert ratio[neg].std() > 0.03  # drawn, not fixed
    (g,) = fg.autograd.grad(y.sum(), x)
    np.testing.assert_allclose(g.numpy(), ratio, rtol=1e-12)
    # eval: the mean slope
    y = F.rrelu(x, 0.1, 0.3)
    np.testing.assert_allclose(y.detach().numpy(), np.where(neg, 0.2 * a, a), rtol=1e-15)
    with pytest.raises(RuntimeError, match="Lower bound should be less than or equal"):
        F.rrelu(x, 0.5, 0.1, training=True)


@pytest.mark.parametrize("fn,shape", [(F.dropout1d, (4, 6, 9)), (F.dropout2d, (4, 6, 3, 5)),
                                      (F.dropout3d, (3, 4, 2, 3, 4))])  # fmt: skip
def test_feature_dropout_zeroes_whole_channels(fn, shape):
    fg.manual_seed(1)
    a = RNG.uniform(0.5, 1.5, size=shape)
    x = _t(a, True)
    y = fn(x, 0.4).detach().numpy()
    ratio = np.round((y / a).reshape(shape[0], shape[1], -1), 12)
    # each (sample, channel) plane is all dropped or all scaled by 1 / (1 - p)
    first = ratio[:, :, :1]
    assert np.all(ratio == first)
    assert set(np.unique(np.round(first, 12))) <= {0.0, round(1 / 0.6, 12)}
    (g,) = fg.autograd.grad(fn(x, 0.0).sum(), x)
    np.testing.assert_array_equal(g.numpy(), np.ones(shape))
    assert fn(x, 0.7, training=False) is x


def test_feature_dropout_of_unbatched_input_and_rank_errors():
    fg.manual_seed(2)
    x = _t(np.ones((5, 7)))
    y = F.dropout1d(x, 0.5).numpy()
    assert y.shape == (5, 7) and np.all(y == y[:, :1])
    with pytest.raises(RuntimeError, match="dropout1d: Expected 2D or 3D input"):
        F.dropout1d(_t(np.ones(3)))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        F.dropout2d(_t(np.ones((2, 3, 4))))
    assert any("assuming that channel-wise 1D dropout" in str(m.message) for m in w)
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1"):
        F.dropout2d(_t(np.ones((2, 3, 4, 4))), 1.5)


def test_alpha_dropout_keeps_zero_mean_unit_variance():
    fg.manual_seed(3)
    a = RNG.standard_normal(400_000)
    p = 0.3
    y = F.alpha_dropout(_t(a), p, training=True).numpy()
    assert abs(y.mean()) < 0.01 and abs(y.var() - 1.0) < 0.01
    # the two affine branches of torch's formula
    alpha = 1.7580993408473766
    k = 1.0 / math.sqrt((alpha * alpha * p + 1) * (1 - p))
    kept = np.isclose(y, k * a + alpha * k * p)
    dropped = np.isclose(y, -alpha * k + alpha * k * p)
    assert np.all(kept | dropped) and abs(dropped.mean() - p) < 0.005
    assert F.alpha_dropout(_t(a), p) is not None  # eval default: identity
    np.testing.assert_array_equal(F.alpha_dropout(_t(a[:10]), p).numpy(), a[:10])


def test_feature_alpha_dropout_is_per_channel():
    fg.manual_seed(4)
    a = RNG.standard_normal((3, 8, 5))
    y = F.feature_alpha_dropout(_t(a), 0.5, training=True).numpy()
    alpha = 1.7580993408473766
    k = 1.0 / math.sqrt((alpha * alpha * 0.5 + 1) * 0.5)
    dropped_value = -alpha * k + alpha * k * 0.5
    dropped = np.all(np.isclose(y, dropped_value), axis=-1)
    kept = np.all(np.isclose(y, k * a + alpha * k * 0.5), axis=-1)
    assert np.all(dropped | kept) and dropped.any() and kept.any()


def test_max_unpool_puts_maxima_back():
    a = RNG.standard_normal((2, 3, 6, 8))
    x = _t(a)
    y, idx = F.max_pool2d(x, 2, return_indices=True)
    u = F.max_unpool2d(y, idx, 2).numpy()
    flat = u.reshape(2, 3, -1)
    want = np.zeros_like(flat)
    for n in range(2):
        for c in range(3):
            want[n, c, idx.numpy()[n, c].ravel()] = y.numpy()[n, c].ravel()
    np.testing.assert_array_equal(flat, want)
    # every pooled maximum sits where max_pool found it
    assert np.all((u == 0) | (u == a))
    # explicit output_size, including the (N, C, H, W) form
    u2 = F.max_unpool2d(y, idx, 2, output_size=[2, 3, 7, 9])
    assert tuple(u2.shape) == (2, 3, 7, 9)
    with pytest.raises(ValueError, match="invalid output_size"):
        F.max_unpool2d(y, idx, 2, output_size=(12, 8))
    # Every shifted index is past the 6x8 plane; the error names the first one.
    first = int(idx.flatten()[0]) + 48
    with pytest.raises(RuntimeError, match=f"Found an invalid max index: {first} "):
        F.max_unpool2d(y, idx + 48, 2)
    with pytest.raises(RuntimeError, match="elements in indices should be type int64"):
        F.max_unpool2d(y, idx.double(), 2)


def test_lp_pool_is_the_p_norm_of_each_window():
    a = RNG.uniform(-2, 2, size=(2, 3, 6, 4))
    out = F.lp_pool2d(_t(a), 3.0, (3, 2)).numpy()
    win = a.reshape(2, 3, 2, 3, 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(2, 3, 2, 2, 6)
    s = (win**3).sum(-1)
    with np.errstate(invalid="ignore"):
        want = np.where(s >= 0, np.abs(s) ** (1 / 3), np.nan)
    np.testing.assert_allclose(out, want, rtol=1e-12)
    with pytest.raises(ValueError, match="norm_type must be a non-zero value"):
        F.lp_pool2d(_t(a), 0, 2)


def test_adaptive_avg_pool3d_windows():
    a = RNG.standard_normal((2, 3, 5, 4, 3))
    out = F.adaptive_avg_pool3d(_t(a), (2, 3, 1)).numpy()

    def span(o, n, size):
        return range(math.floor(o * n / size), math.ceil((o + 1) * n / size))

    want = np.zeros((2, 3, 2, 3, 1))
    for i in range(2):
        for j in range(3):
            block = a[:, :, list(span(i, 5, 2))][:, :, :, list(span(j, 4, 3))]
            want[:, :, i, j, 0] = block.mean(axis=(2, 3, 4))
    np.testing.assert_allclose(out, want, rtol=1e-13)


def test_fold_inverts_unfold_for_non_overlapping_blocks():
    a = RNG.standard_normal((2, 3, 6, 4))
    cols = nn.Unfold(2, stride=2)(_t(a))
    assert tuple(cols.shape) == (2, 12, 6)
    np.testing.assert_array_equal(nn.Fold((6, 4), 2, stride=2)(cols).numpy(), a)


PAD_MODES = [(nn.ReflectionPad2d, "reflect"), (nn.ReplicationPad2d, "replicate"),
             (nn.CircularPad2d, "circular"), (nn.ZeroPad2d, "constant")]  # fmt: skip


@pytest.mark.parametrize("cls,mode", PAD_MODES)
def test_padding_modules_are_pad(cls, mode):
    a = RNG.standard_normal((1, 2, 4, 5))
    got = cls((1, 2, 2, 0))(_t(a)).numpy()
    want = F.pad(_t(a), (1, 2, 2, 0), mode).numpy()
    np.testing.assert_array_equal(got, want)
    np_mode = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}.get(mode, "constant")
    np.testing.assert_array_equal(got, np.pad(a, [(0, 0), (0, 0), (2, 0), (1, 2)], np_mode))


PAD_CASES = [
    ("constant", (3, 2, 1, 2)),
    ("constant", (-2, 3, 2, -1)),  # crop the left columns and the bottom row
    ("reflect", (3, 2, 2, 3)),  # input rows read by two output rows each
    ("replicate", (2, 3, 3, 1)),
    ("circular", (1, 4, 2, 2)),
]


@pytest.mark.parametrize("mode,pads", PAD_CASES)
def test_pad_rows_against_an_index_map(mode, pads):
    # float32 past the parallel threshold: the output against np.pad, the gradient against the
    # adjoint built from np.pad of the element indices, both at 1 and 2 threads.
    a = RNG.standard_normal((3, 5, 40, 64)).astype(np.float32)
    left, right, top, bottom = pads
    np_mode = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}.get(mode, "constant")
    idx = np.arange(a.size).reshape(a.shape)
    crop = [(0, 0), (0, 0), (max(top, 0), max(bottom, 0)), (max(left, 0), max(right, 0))]
    src = (
        np.pad(idx, crop, np_mode)
        if np_mode != "constant"
        else np.pad(idx, crop, constant_values=-1)
    )
    rows = slice(max(-top, 0), src.shape[2] - max(-bottom, 0))
    src = src[:, :, rows, max(-left, 0) : src.shape[3] - max(-right, 0)]
    g = RNG.standard_normal(src.shape).astype(np.float32)
    want = np.where(src >= 0, a.reshape(-1)[src], 0.0)
    want_grad = np.zeros(a.size)
    np.add.at(want_grad, src[src >= 0], g[src >= 0].astype(np.float64))
    results = []
    prev = fg.get_num_threads()
    try:
        for threads in (1, 2):
            fg.set_num_threads(threads)
            x = fg.tensor(a, requires_grad=True)
            y = F.pad(x, pads, mode)
            y.backward(fg.tensor(g))
            results.append((y.detach().numpy(), x.grad.numpy()))
    finally:
        fg.set_num_threads(prev)
    for y, grad in results:
        np.testing.assert_array_equal(y, want)
        np.testing.assert_allclose(grad, want_grad.reshape(a.shape), rtol=1e-6, atol=1e-6)
    assert results[0][1].tobytes() == results[1][1].tobytes()


def test_constant_pad_value_and_circular_rank_check():
    out = nn.ConstantPad1d((1, 2), 3.5)(_t(np.zeros((2, 3)))).numpy()
    np.testing.assert_array_equal(out[:, [0, 4, 5]], 3.5)
    with pytest.raises(ValueError, match=r"expected 2D or 3D input \(got 4D input\)"):
        nn.CircularPad1d(1)(_t(np.zeros((1, 1, 2, 3))))


def test_softmax2d_is_softmax_over_channels():
    a = RNG.standard_normal((2, 3, 4, 5))
    out = nn.Softmax2d()(_t(a)).numpy()
    e = np.exp(a - a.max(1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(1, keepdims=True), rtol=1e-13)
    with pytest.raises(ValueError, match="Softmax2d: expected input to be 3D or 4D, got 2D"):
        nn.Softmax2d()(_t(a[0, 0]))


def test_inplace_variants_write_into_their_input():
    a = np.array([-1.5, -0.2, 0.3, 2.0])
    for fn, want in [
        (F.relu_, np.maximum(a, 0)),
        (lambda x: F.leaky_relu_(x, 0.1), np.where(a > 0, a, 0.1 * a)),
        (lambda x: F.hardtanh_(x, -1.0, 1.0), np.clip(a, -1, 1)),
        (lambda x: F.threshold_(x, 0.25, -9.0), np.where(a > 0.25, a, -9.0)),
        (F.elu_, np.where(a > 0, a, np.expm1(a))),
    ]:
        x = _t(a)
        out = fn(x)
        assert out is x
        np.testing.assert_allclose(x.numpy(), want, rtol=1e-15)


def test_instance_norm3d_normalises_each_volume():
    a = RNG.standard_normal((2, 3, 3, 4, 2)) * 3 + 1
    out = nn.InstanceNorm3d(3)(_t(a)).numpy()
    flat = a.reshape(2, 3, -1)
    want = (flat - flat.mean(-1, keepdims=True)) / np.sqrt(flat.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(out.reshape(2, 3, -1), want, rtol=1e-12)
    with pytest.raises(ValueError, match=r"expected 4D or 5D input \(got 3D input\)"):
        nn.InstanceNorm3d(3)(_t(a[0, 0]))


# ----- torch parity -------------------------------------------------------------------------------


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


REPR_CASES = [
    "ZeroPad2d(2)", "ZeroPad1d((1, 2))", "ConstantPad2d(1, 3.5)",
    "ConstantPad3d((1, 2, 3, 4, 5, 6), 0.0)", "ReflectionPad2d(2)", "ReplicationPad1d(3)",
    "ReflectionPad3d(1)", "ReplicationPad3d((1, 1, 1, 1, 2, 2))", "CircularPad3d(1)",
    "Dropout2d()", "Dropout1d(0.3, True)", "Dropout3d(0.1)", "AlphaDropout(0.2)",
    "FeatureAlphaDropout()", "Fold((4, 5), 2)", "Unfold(2, dilation=1, padding=1, stride=2)",
    "Hardshrink()", "Softshrink(0.3)", "RReLU()", "RReLU(0.1, 0.3, True)", "Softmax2d()",
    "MaxUnpool2d(2)", "MaxUnpool1d(3, 2, 1)", "MaxUnpool3d((2, 2, 2))", "LPPool2d(2, 3)",
    "LPPool1d(1.5, 2, 1, True)", "LPPool3d(2, 2)", "AdaptiveAvgPool3d((1, None, 2))",
    "AdaptiveMaxPool3d(2, True)", "InstanceNorm3d(4)",
    "InstanceNorm3d(4, affine=True, track_running_stats=True)",
]  # fmt: skip


@pytest.mark.parametrize("expr", REPR_CASES)
def test_repr_matches_torch(torch, expr):
    assert repr(eval("nn." + expr)) == repr(eval("torch.nn." + expr))


def _pair(torch, a, grad=True):
    return (
        fg.tensor(a, requires_grad=grad),
        torch.tensor(a, requires_grad=grad),
    )


MODULE_CASES = [
    ("ReflectionPad2d((1, 2, 0, 3))", (2, 3, 5, 6)),
    ("ReflectionPad1d(2)", (2, 4, 5)),
    ("ReflectionPad3d(1)", (1, 2, 3, 4, 3)),
    ("ReplicationPad2d((2, 0, 1, 1))", (2, 3, 4, 4)),
    ("ReplicationPad3d(1)", (1, 2, 3, 3, 2)),
    ("CircularPad2d((1, 1, 2, 0))", (2, 3, 4, 4)),
    ("CircularPad1d(2)", (2, 3, 5)),
    ("ConstantPad3d((1, 0, 0, 2, 1, 1), -1.5)", (1, 2, 2, 3, 2)),
    ("ZeroPad2d((1, 1, 0, 2))", (3, 4, 5)),
    ("Hardshrink(0.3)", (4, 5)),
    ("Softshrink(0.8)", (4, 5)),
    ("RReLU(0.2, 0.4).eval()", (4, 5)),
    ("Softmax2d()", (2, 3, 4, 4)),
    ("AdaptiveAvgPool3d((2, None, 3))", (2, 3, 5, 4, 7)),
    ("AdaptiveAvgPool3d(1)", (2, 3, 5, 4, 7)),
    ("AdaptiveMaxPool3d((2, 3, 2))", (2, 3, 5, 4, 7)),
    ("LPPool2d(2, (2, 3), stride=(1, 2))", (2, 3, 6, 7)),
    ("LPPool1d(float('inf'), 3)", (2, 3, 9)),
    ("LPPool3d(2, 2, ceil_mode=True)", (1, 2, 5, 4, 5)),
    ("InstanceNorm3d(3, affine=True)", (2, 3, 3, 4, 2)),
    ("Unfold((2, 3), dilation=(1, 2), padding=1, stride=(2, 1))", (2, 3, 6, 7)),
    ("Fold((5, 6), 2, stride=1)", (2, 12, 20)),
]


@pytest.mark.parametrize("expr,shape", MODULE_CASES)
def test_module_values_and_gradients_match_torch(torch, expr, shape):
    a = RNG.standard_normal(shape)
    fm, tm = eval("nn." + expr), eval("torch.nn." + expr)
    if getattr(tm, "weight", None) is not None:
        tm, fm = tm.double(), fm.double()
        with torch.no_grad():
            tm.weight.uniform_(0.5, 1.5)
            tm.bias.uniform_(-0.5, 0.5)
        fm.load_state_dict({k: fg.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    fx, tx = _pair(torch, a)
    fy, ty = fm(fx), tm(tx)
    np.testing.assert_allclose(fy.detach().numpy(), ty.detach().numpy(), rtol=1e-12, atol=1e-12)
    g = RNG.standard_normal(tuple(ty.shape))
    fy.backward(fg.tensor(g))
    ty.backward(torch.tensor(g))
    np.testing.assert_allclose(fx.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-12)
    if fy.grad_fn is not None and "Circular" not in expr:
        # (torch's circular padding is a composition ending in CopySlices)
        assert fy.grad_fn.name() == ty.grad_fn.name()


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_max_unpool_matches_torch(torch, nd):
    shape = (2, 3) + (4, 6, 4)[:nd]
    a = RNG.standard_normal(shape)
    fx, tx = _pair(torch, a, grad=False)
    fpool, tpool = getattr(F, f"max_pool{nd}d"), getattr(torch.nn.functional, f"max_pool{nd}d")
    fy, fi = fpool(fx, 2, return_indices=True)
    ty, ti = tpool(tx, 2, return_indices=True)
    np.testing.assert_array_equal(fi.numpy(), ti.numpy())
    fy.requires_grad_(True)
    ty = ty.detach().requires_grad_(True)
    size = [s + 1 for s in shape[2:]]
    fu = getattr(nn, f"MaxUnpool{nd}d")(2)(fy, fi, output_size=size)
    tu = getattr(torch.nn, f"MaxUnpool{nd}d")(2)(ty, ti, output_size=size)
    np.testing.assert_array_equal(fu.detach().numpy(), tu.detach().numpy())
    assert fu.grad_fn.name() == tu.grad_fn.name()
    g = RNG.standard_normal(tuple(tu.shape))
    fu.backward(fg.tensor(g))
    tu.backward(torch.tensor(g))
    np.testing.assert_array_equal(fy.grad.numpy(), ty.grad.numpy())


ERROR_CASES = [
    ("max_unpool2d(x4, i4 + 100, 2)", (2, 3, 4, 6)),
    ("max_unpool2d(x4, i4.double(), 2)", (2, 3, 4, 6)),
    ("max_unpool2d(x4, i4[0], 2)", (2, 3, 4, 6)),
    ("max_unpool2d(x4, i4, 2, output_size=(3, 3, 3))", (2, 3, 4, 6)),
    ("max_unpool2d(x4, i4, 2, output_size=(9, 6))", (2, 3, 4, 6)),
    ("max_unpool3d(x4, i4, 2)", (2, 3, 4, 6)),
    ("lp_pool2d(x4, 0, 2)", (2, 3, 4, 6)),
    ("softshrink(x4, -0.5)", (2, 3, 4, 6)),
    ("rrelu(x4, 0.5, 0.2, True)", (2, 3, 4, 6)),
    ("adaptive_avg_pool3d(x4[0, 0], 2)", (2, 3, 4, 6)),
    ("adaptive_max_pool3d(x4[0, 0], 2)", (2, 3, 4, 6)),
    ("dropout1d(x4, 0.5)", (2, 3, 4, 6)),
    ("feature_alpha_dropout(x4[0, 0, 0], 0.5, True)", (2, 3, 4, 6)),
    ("alpha_dropout(x4, 1.5, True)", (2, 3, 4, 6)),
    ("bilinear(x4, x4, x4)", (2, 3, 4, 6)),
    ("bilinear(x4, x4[0], x4)", (2, 3, 4, 6)),
    ("bilinear(x4, x4[:, :2], x4)", (2, 3, 4, 6)),
    ("softshrink(x4.float(), -1.0)", (2, 3, 4, 6)),
]


@pytest.mark.parametrize("expr,shape", ERROR_CASES)
def test_errors_match_torch(torch, expr, shape):
    a = RNG.standard_normal(shape)
    outcomes = []
    for lib in (fg, torch):
        x4 = lib.tensor(a)
        _, i4 = lib.nn.functional.max_pool2d(x4, 2, return_indices=True)
        try:
            eval("lib.nn.functional." + expr, {"lib": lib, "x4": x4, "i4": i4})
            outcomes.append(None)
        except Exception as e:  # noqa: BLE001 - comparing what each library raises
            outcomes.append((type(e).__name__, str(e).split("\n")[0]))
    assert outcomes[0] is not None and outcomes[0] == outcomes[1]


def test_alpha_dropout_uses_torchs_affine_map(torch):
    # The generators differ, so check that every value torch produces is one of the two
    # branches of the map ferrograd applies, and that both libraries drop at rate p.
    a = RNG.standard_normal((200, 100))
    alpha = 1.7580993408473766
    k = 1.0 / math.sqrt((alpha * alpha * 0.25 + 1) * 0.75)
    kept_value, dropped_value = k * a + alpha * k * 0.25, -alpha * k + alpha * k * 0.25
    fg.manual_seed(0)
    y = F.alpha_dropout(fg.tensor(a), 0.25, training=True).numpy()
    t = torch.nn.functional.alpha_dropout(torch.tensor(a), 0.25, training=True).numpy()
    for out in (y, t):
        kept, dropped = np.isclose(out, kept_value), np.isclose(out, dropped_value)
        assert np.all(kept | dropped)
        assert abs(dropped.mean() - 0.25) < 0.01


def test_bilinear_module_matches_torch(torch):
    tm = torch.nn.Bilinear(4, 3, 5).double()
    fm = nn.Bilinear(4, 3, 5)
    fm.load_state_dict({k: fg.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    a, b = RNG.standard_normal((6, 4)), RNG.standard_normal((6, 3))
    np.testing.assert_allclose(
        fm(fg.tensor(a), fg.tensor(b)).detach().numpy(),
        tm(torch.tensor(a), torch.tensor(b)).detach().numpy(),
        rtol=1e-12,
    )
