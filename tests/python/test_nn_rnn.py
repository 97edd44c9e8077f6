"""Recurrent layers (RNN, LSTM, GRU and their cells): closed-form steps in NumPy, float64
gradcheck and gradgradcheck through the fused steps, init bounds, and (when torch is installed)
outputs, every gradient, reprs, state_dict keys and error texts against torch with the same
weights."""

from __future__ import annotations

import math
from typing import Any, Dict, List

import ferrograd as fg
import numpy as np
import pytest
from ferrograd import nn
from ferrograd.nn.utils import rnn as rnn_utils

RNG = np.random.default_rng(0)


def _torch() -> Any:
    return pytest.importorskip("torch")


def _sig(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _params(m: nn.Module) -> Dict[str, np.ndarray]:
    return {k: v.detach().numpy().astype(np.float64) for k, v in m.state_dict().items()}


# ----- closed forms (no torch needed) -----------------------------------------------------------


def _np_lstm_layer(x: np.ndarray, h: np.ndarray, c: np.ndarray, p: Dict[str, np.ndarray], sfx: str):
    hs = []
    for t in range(x.shape[0]):
        g = x[t] @ p["weight_ih" + sfx].T + p["bias_ih" + sfx] + h @ p["weight_hh" + sfx].T
        g = g + p["bias_hh" + sfx]
        i, f, gg, o = np.split(g, 4, axis=1)
        c = _sig(f) * c + _sig(i) * np.tanh(gg)
        h = _sig(o) * np.tanh(c)
        hs.append(h)
    return np.stack(hs), h, c


def _np_gru_layer(x: np.ndarray, h: np.ndarray, p: Dict[str, np.ndarray], sfx: str):
    hs = []
    for t in range(x.shape[0]):
        gi = x[t] @ p["weight_ih" + sfx].T + p["bias_ih" + sfx]
        gh = h @ p["weight_hh" + sfx].T + p["bias_hh" + sfx]
        hh = h.shape[1]
        r = _sig(gi[:, :hh] + gh[:, :hh])
        z = _sig(gi[:, hh : 2 * hh] + gh[:, hh : 2 * hh])
        n = np.tanh(gi[:, 2 * hh :] + r * gh[:, 2 * hh :])
        h = (1 - z) * n + z * h
        hs.append(h)
    return np.stack(hs), h


def test_lstm_matches_numpy_closed_form() -> None:
    m = nn.LSTM(3, 4).double()
    p = _params(m)
    x = RNG.standard_normal((5, 2, 3))
    out, (h, c) = m(fg.tensor(x))
    ref, rh, rc = _np_lstm_layer(x, np.zeros((2, 4)), np.zeros((2, 4)), p, "_l0")
    np.testing.assert_allclose(out.detach().numpy(), ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(h.detach().numpy()[0], rh, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(c.detach().numpy()[0], rc, rtol=1e-12, atol=1e-12)


def test_bidirectional_gru_matches_numpy_closed_form() -> None:
    m = nn.GRU(3, 4, bidirectional=True, batch_first=True).double()
    p = _params(m)
    x = RNG.standard_normal((2, 6, 3))  # batch first
    h0 = RNG.standard_normal((2, 2, 4))
    out, h = m(fg.tensor(x), fg.tensor(h0))
    xs = x.transpose(1, 0, 2)
    fwd, hf = _np_gru_layer(xs, h0[0], p, "_l0")
    bwd, hb = _np_gru_layer(xs[::-1], h0[1], p, "_l0_reverse")
    ref = np.concatenate([fwd, bwd[::-1]], axis=2).transpose(1, 0, 2)
    np.testing.assert_allclose(out.detach().numpy(), ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(h.detach().numpy(), np.stack([hf, hb]), rtol=1e-12, atol=1e-12)


def test_relu_rnn_cell_closed_form_and_unbatched() -> None:
    cell = nn.RNNCell(3, 5, nonlinearity="relu").double()
    p = _params(cell)
    x, h = RNG.standard_normal(3), RNG.standard_normal(5)
    y = cell(fg.tensor(x), fg.tensor(h))
    ref = np.maximum(p["weight_ih"] @ x + p["bias_ih"] + p["weight_hh"] @ h + p["bias_hh"], 0)
    assert tuple(y.shape) == (5,)
    np.testing.assert_allclose(y.detach().numpy(), ref, rtol=1e-12, atol=1e-12)


def test_init_bounds_and_names() -> None:
    m = nn.LSTM(10, 16, num_layers=2, bidirectional=True, proj_size=4)
    bound = 1 / math.sqrt(16)
    names = [n for n, _ in m.named_parameters()]
    assert names[:5] == [
        "weight_ih_l0",
        "weight_hh_l0",
        "bias_ih_l0",
        "bias_hh_l0",
        "weight_hr_l0",
    ]
    assert "weight_hr_l1_reverse" in names
    shapes = {n: tuple(p.shape) for n, p in m.named_parameters()}
    assert shapes["weight_ih_l1"] == (64, 8) and shapes["weight_hh_l0"] == (64, 4)
    allw = np.concatenate([p.detach().numpy().ravel() for p in m.parameters()])
    assert np.abs(allw).max() <= bound
    # U(-b, b) has mean 0 and variance b^2 / 3
    assert abs(allw.mean()) < 0.05 * bound
    assert abs(allw.var() / (bound**2 / 3) - 1) < 0.1


@pytest.mark.parametrize("mode", ["RNN_TANH", "LSTM", "GRU"])
def test_gradcheck_and_gradgradcheck_through_the_fused_steps(mode: str) -> None:
    cls = {"RNN_TANH": nn.RNN, "LSTM": nn.LSTM, "GRU": nn.GRU}[mode]
    m = cls(2, 3, num_layers=2, bidirectional=True).double()
    x = fg.tensor(RNG.standard_normal((3, 2, 2)), requires_grad=True)

    def g(inp: Any) -> Any:
        out, state = m(inp)
        return out, state[1] if mode == "LSTM" else state

    assert fg.autograd.gradcheck(g, (x,))
    assert fg.autograd.gradgradcheck(g, (x,))


def test_lstm_layer_node_gradcheck_every_input_and_output() -> None:
    # An LSTM layer runs as one node (MkldnnRnnLayerBackward0): its backward gives the input
    # projection's, h0's, c0's and weight_hh's gradients from those of the outputs, h_n and
    # c_n, in both directions; under create_graph it recomputes the layer step by step.
    m = nn.LSTM(2, 3, num_layers=2, bidirectional=True).double()
    x = fg.tensor(RNG.standard_normal((4, 2, 2)), requires_grad=True)
    h0 = fg.tensor(RNG.standard_normal((4, 2, 3)), requires_grad=True)
    c0 = fg.tensor(RNG.standard_normal((4, 2, 3)), requires_grad=True)

    def g(inp: Any, h: Any, c: Any) -> Any:
        out, (hn, cn) = m(inp, (h, c))
        return out, hn, cn

    assert fg.autograd.gradcheck(g, (x, h0, c0))
    assert fg.autograd.gradgradcheck(g, (x, h0, c0))
    # A loss on h_n alone: the outputs' gradient is absent (zeros) and the states carry it.
    assert fg.autograd.gradcheck(lambda *a: g(*a)[1].sum(), (x, h0, c0))
    # gradgradcheck differentiates the create_graph gradient, so it would pass a consistently
    # wrong one: it must equal the fast backward's, for every input and weight.
    out, hn, cn = g(x, h0, c0)
    loss = (out * out.detach().cos()).sum() + (hn * hn).sum() + cn.sum()
    wrt = [x, h0, c0, *m.parameters()]
    fast = fg.autograd.grad(loss, wrt, retain_graph=True)
    graph = fg.autograd.grad(loss, wrt, create_graph=True)
    for a, b in zip(fast, graph):
        np.testing.assert_allclose(b.detach().numpy(), a.numpy(), rtol=1e-12, atol=1e-13)


def test_lstm_layer_output_modified_in_place_is_an_error() -> None:
    # The node keeps its output for the recurrent weight's gradient, version-checked (torch
    # raises here too).
    m = nn.LSTM(2, 3)
    out, _ = m(fg.tensor(RNG.standard_normal((4, 2, 2)).astype(np.float32)))
    out.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()


def test_lstm_layer_node_named_as_torch() -> None:
    torch = _torch()
    x = RNG.standard_normal((4, 2, 2)).astype(np.float32)
    ours = nn.LSTM(2, 3)(fg.tensor(x))[0].grad_fn.name()
    theirs = torch.nn.LSTM(2, 3)(torch.tensor(x))[0].grad_fn.name()
    assert ours == theirs


@pytest.mark.parametrize("mode", ["RNN_TANH", "LSTM", "GRU"])
def test_gradcheck_and_gradgradcheck_of_the_weights_and_biases(mode: str) -> None:
    # The recurrent bias is folded into the input projection (except in a GRU): both biases
    # must still get their own, finite-difference-checked gradient.
    cls = {"RNN_TANH": nn.RNN, "LSTM": nn.LSTM, "GRU": nn.GRU}[mode]
    m = cls(2, 3).double()
    x = fg.tensor(RNG.standard_normal((3, 2, 2)))
    names = ["weight_hh_l0", "bias_ih_l0", "bias_hh_l0"]
    params = tuple(dict(m.named_parameters())[n].detach().clone().requires_grad_() for n in names)

    def g(*ps: Any) -> Any:
        out, _ = fg.func.functional_call(m, dict(zip(names, ps)), (x,))
        return out

    assert fg.autograd.gradcheck(g, params)
    assert fg.autograd.gradgradcheck(g, params)


@pytest.mark.parametrize("cell", ["lstm", "gru", "rnn"])
def test_cells_gradcheck_all_inputs(cell: str) -> None:
    h = 3
    x = fg.tensor(RNG.standard_normal((2, 4)), requires_grad=True)
    hx = fg.tensor(RNG.standard_normal((2, h)), requires_grad=True)
    cx = fg.tensor(RNG.standard_normal((2, h)), requires_grad=True)
    k = {"lstm": 4, "gru": 3, "rnn": 1}[cell]
    wi = fg.tensor(RNG.standard_normal((k * h, 4)), requires_grad=True)
    wh = fg.tensor(RNG.standard_normal((k * h, h)), requires_grad=True)
    bi = fg.tensor(RNG.standard_normal(k * h), requires_grad=True)
    bh = fg.tensor(RNG.standard_normal(k * h), requires_grad=True)
    if cell == "lstm":
        args = (x, hx, cx, wi, wh, bi, bh)

        def f(*a: Any) -> Any:
            return fg._C._nn_lstm_cell(*a)

    elif cell == "gru":
        args = (x, hx, wi, wh, bi, bh)

        def f(*a: Any) -> Any:
            return fg._C._nn_gru_cell(*a)

    else:
        args = (x, hx, wi, wh, bi, bh)

        def f(*a: Any) -> Any:
            return fg._C._nn_rnn_cell(*a, "tanh")

    assert fg.autograd.gradcheck(f, args)
    assert fg.autograd.gradgradcheck(f, args)


def _unrolled(m: nn.Module, x: Any, mode: str, reverse: bool = False) -> Any:
    """The layer's first direction run step by step through the functional cells, whose nodes
    each compute their own recurrent weight gradient (the layer gathers it into one product)."""
    sfx = "_l0_reverse" if reverse else "_l0"
    p = {k: getattr(m, k + sfx) for k in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")}
    cell = (nn.LSTMCell if mode == "LSTM" else nn.RNNCell)(m.input_size, m.hidden_size)
    h = fg.zeros(x.shape[1], m.hidden_size, dtype=x.dtype)
    c = fg.zeros(x.shape[1], m.hidden_size, dtype=x.dtype)
    outs: List[Any] = [None] * x.shape[0]
    order = range(x.shape[0] - 1, -1, -1) if reverse else range(x.shape[0])
    for t in order:
        state = (h, c) if mode == "LSTM" else h
        r = fg.func.functional_call(cell, p, (x[t], state))
        h, c = r if mode == "LSTM" else (r, c)
        outs[t] = h
    return fg.stack(outs)


@pytest.mark.parametrize("mode", ["LSTM", "RNN_TANH"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_recurrent_weight_gradient_gathered_over_steps_matches_unrolled_cells(
    mode: str, dtype: str
) -> None:
    # The layer computes d weight_hh once from every step's gate gradient; the unrolled
    # cells sum one product per step. Checked on whole and partial backwards (a loss on early
    # steps only, where later steps get no gradient), twice through a retained graph (nothing
    # kept from the first pass), through grad() for the weight alone, and in reverse.
    cls = {"LSTM": nn.LSTM, "RNN_TANH": nn.RNN}[mode]
    m = cls(3, 4, bidirectional=True).to(getattr(fg, dtype))
    x = fg.tensor(RNG.standard_normal((6, 2, 3)).astype(dtype))
    w = m.weight_hh_l0
    wr = m.weight_hh_l0_reverse
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == "float32" else dict(rtol=1e-10, atol=1e-12)
    out, _ = m(x)
    hidden = m.hidden_size
    fwd, bwd = out[..., :hidden], out[..., hidden:]
    ref_f, ref_b = _unrolled(m, x, mode), _unrolled(m, x, mode, reverse=True)
    weights = fg.tensor(RNG.standard_normal(tuple(out.shape[:2]) + (hidden,)).astype(dtype))
    for loss, ref_loss, param in [
        ((fwd * weights).sum(), (ref_f * weights).sum(), w),
        ((fwd[:2] * weights[:2]).sum(), (ref_f[:2] * weights[:2]).sum(), w),
        ((bwd * weights).sum(), (ref_b * weights).sum(), wr),
        ((bwd[3:] * weights[3:]).sum(), (ref_b[3:] * weights[3:]).sum(), wr),
    ]:
        (want,) = fg.autograd.grad(ref_loss, [param], retain_graph=True)
        for _ in range(2):
            (got,) = fg.autograd.grad(loss, [param], retain_graph=True)
            np.testing.assert_allclose(got.numpy(), want.numpy(), **tol)
        m.zero_grad()
        loss.backward(retain_graph=True)
        np.testing.assert_allclose(param.grad.numpy(), want.numpy(), **tol)


def test_recurrent_weight_gradient_second_order_and_forward_mode() -> None:
    # Under create_graph the steps compute the weight gradient themselves (differentiably):
    # the Hessian-vector product must match the unrolled cells'. Forward mode: the tangent
    # of the output along weight_hh matches a central difference.
    m = nn.LSTM(2, 3).double()
    x = fg.tensor(RNG.standard_normal((4, 2, 2)))
    w = m.weight_hh_l0
    v = fg.tensor(RNG.standard_normal(tuple(w.shape)))

    def hvp(out: Any) -> np.ndarray:
        (g,) = fg.autograd.grad((out**2).sum(), [w], create_graph=True)
        (h,) = fg.autograd.grad((g * v).sum(), [w])
        return h.numpy()

    np.testing.assert_allclose(hvp(m(x)[0]), hvp(_unrolled(m, x, "LSTM")), rtol=1e-9, atol=1e-11)

    def f(wv: Any) -> Any:
        return fg.func.functional_call(m, {"weight_hh_l0": wv}, (x,))[0]

    # A dual weight that also requires grad: the layer gathers its gradient then too.
    fwAD = fg.autograd.forward_ad
    with fwAD.dual_level():
        out = f(fwAD.make_dual(w, v))
        tangent = fwAD.unpack_dual(out).tangent.detach().numpy()
    eps = 1e-6
    with fg.no_grad():
        fd = (f(w + eps * v) - f(w - eps * v)) / (2 * eps)
    np.testing.assert_allclose(tangent, fd.numpy(), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("mode", ["RNN", "GRU", "LSTM"])
def test_vmap_per_sample_outputs_gradients_and_jacobians(mode: str) -> None:
    # Under vmap the fused steps give way to composed ops (a batched tensor has no elements of
    # its own): outputs and per-sample weight gradients must equal a loop over the samples
    # (which takes the fused steps), and jacrev of one sample's output must match central
    # differences.
    fg.manual_seed(0)
    m = getattr(nn, mode)(3, 4, num_layers=2).double()
    xs = fg.tensor(RNG.standard_normal((3, 5, 3)))  # 3 samples of an unbatched (seq, feature)
    params = {k: v.detach() for k, v in m.named_parameters()}

    def loss(p: Dict[str, Any], x: Any) -> Any:
        out = fg.func.functional_call(m, p, (x,))[0]
        return (out * out).sum()

    got = fg.func.vmap(lambda x: m(x)[0])(xs)
    want = fg.stack([m(xs[i])[0] for i in range(3)])
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12)

    per_sample = fg.func.vmap(fg.func.grad(loss), in_dims=(None, 0))(params, xs)
    for i in range(3):
        names = list(params)
        grads = fg.autograd.grad(loss(dict(m.named_parameters()), xs[i]), list(m.parameters()))
        for name, g in zip(names, grads):
            np.testing.assert_allclose(
                per_sample[name][i].numpy(), g.numpy(), rtol=1e-10, atol=1e-12
            )

    x0 = xs[0].detach()
    jac = fg.func.jacrev(lambda x: m(x)[0])(x0).detach().numpy()
    eps = 1e-6
    flat = x0.numpy().ravel()
    fd = np.empty(jac.shape[:2] + (flat.size,))
    with fg.no_grad():
        for k in range(flat.size):
            d = np.zeros_like(flat)
            d[k] = eps
            up = m(fg.tensor((flat + d).reshape(x0.shape)))[0].numpy()
            dn = m(fg.tensor((flat - d).reshape(x0.shape)))[0].numpy()
            fd[..., k] = (up - dn) / (2 * eps)
    np.testing.assert_allclose(jac.reshape(fd.shape), fd, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("proj", [0, 40])
def test_wide_lstm_steps_split_over_threads_match_float64(proj: int) -> None:
    # 33 rows of 4 x 128 gates: the pointwise steps run in blocks of rows on the pool (an
    # uneven last block). float32 must match the same layer in float64, and the result must
    # not depend on the thread count (each row is computed alone).
    fg.manual_seed(0)
    m = nn.LSTM(16, 128, num_layers=2, proj_size=proj)
    x = fg.tensor(RNG.standard_normal((5, 33, 16)).astype(np.float32))
    weights = RNG.standard_normal((5, 33, proj or 128))

    def run(mod: nn.Module, dtype: Any, threads: int) -> List[np.ndarray]:
        before = fg.get_num_threads()
        fg.set_num_threads(threads)
        try:
            mod.zero_grad()
            out, (h, c) = mod(x.to(dtype))
            (out * fg.tensor(weights).to(dtype)).sum().backward()
            return [t.detach().numpy() for t in (out, h, c)] + [
                p.grad.numpy() for p in mod.parameters()
            ]
        finally:
            fg.set_num_threads(before)

    one, two = run(m, fg.float32, 1), run(m, fg.float32, 2)
    for a, b in zip(one, two):
        np.testing.assert_array_equal(a, b)
    ref = run(m.double(), fg.float64, 2)
    for a, r in zip(two, ref):
        np.testing.assert_allclose(a, r, rtol=2e-4, atol=2e-4 * np.abs(r).max())


def test_dropout_between_layers_only_in_training() -> None:
    m = nn.GRU(3, 4, num_layers=2, dropout=1.0).double()
    x = fg.tensor(RNG.standard_normal((4, 2, 3)))
    # p = 1 zeroes layer 0's output, so layer 1 sees zeros: equal to a zero input into layer 1
    out_train, _ = m(x)
    p = _params(m)
    ref, _ = _np_gru_layer(np.zeros((4, 2, 4)), np.zeros((2, 4)), p, "_l1")
    np.testing.assert_allclose(out_train.detach().numpy(), ref, rtol=1e-12, atol=1e-12)
    m.eval()
    out_eval, _ = m(x)
    assert not np.allclose(out_eval.detach().numpy(), ref)


def test_dropout_warning_and_constructor_errors() -> None:
    with pytest.warns(UserWarning, match="dropout option adds dropout after all but last"):
        nn.LSTM(2, 3, dropout=0.5)
    with pytest.raises(ValueError, match="proj_size has to be smaller than hidden_size"):
        nn.LSTM(2, 3, proj_size=3)
    with pytest.raises(ValueError, match="proj_size argument is only supported for LSTM"):
        nn.GRU(2, 3, proj_size=1)
    with pytest.raises(ValueError, match="Unknown nonlinearity 'sigmoid'"):
        nn.RNN(2, 3, nonlinearity="sigmoid")
    with pytest.raises(TypeError, match="hidden_size should be of type int, got: float"):
        nn.GRU(2, 3.0)
    with pytest.raises(ValueError, match="dropout should be a number in range"):
        nn.GRU(2, 3, dropout=2)


def test_bad_inputs_raise_clear_errors() -> None:
    m = nn.LSTM(3, 4)
    with pytest.raises(RuntimeError, match=r"input.size\(-1\) must be equal to input_size. "):
        m(fg.randn(5, 2, 2))
    with pytest.raises(ValueError, match="LSTM: Expected input to be 2D or 3D, got 4D instead"):
        m(fg.randn(1, 5, 2, 3))
    hidden0 = r"Expected hidden\[0\] size \(1, 2, 4\), got \[1, 3, 4\]"
    with pytest.raises(RuntimeError, match=hidden0):
        m(fg.randn(5, 2, 3), (fg.zeros(1, 3, 4), fg.zeros(1, 2, 4)))
    with pytest.raises(ValueError, match="does not match weight dtype"):
        m(fg.randn(5, 2, 3, dtype=fg.float64))
    with pytest.raises(ValueError, match="GRUCell: Expected input to be 1D or 2D, got 3D instead"):
        nn.GRUCell(3, 4)(fg.randn(1, 2, 3))
    with pytest.raises(RuntimeError, match="input has inconsistent input_size: got 2 expected 3"):
        nn.GRUCell(3, 4)(fg.randn(5, 2))
    with pytest.raises(RuntimeError, match="Input batch size 5 doesn't match hidden batch size 2"):
        nn.RNNCell(3, 4)(fg.randn(5, 3), fg.randn(2, 4))
    with pytest.raises(TypeError, match="take a Tensor or a PackedSequence, got list"):
        m([1, 2, 3])


# ----- torch parity -----------------------------------------------------------------------------

_COMMON: List[Dict[str, Any]] = [
    {},
    {"num_layers": 2, "bidirectional": True, "batch_first": True},
    {"num_layers": 3, "bias": False},
    {"num_layers": 2, "dropout": 0.3},
]
CASES = [(mode, kw) for mode in ("RNN", "LSTM", "GRU") for kw in _COMMON] + [
    ("LSTM", {"proj_size": 3, "num_layers": 2, "bidirectional": True}),
    ("RNN", {"nonlinearity": "relu"}),
]


def _copy_from_torch(fm: nn.Module, tm: Any) -> None:
    fm.load_state_dict({k: fg.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})


@pytest.mark.parametrize("mode,kw", CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_modules_match_torch(mode: str, kw: Dict[str, Any], dtype: str) -> None:
    torch = _torch()
    tm = getattr(torch.nn, mode)(5, 7, **kw).to(getattr(torch, dtype)).eval()
    fm = getattr(nn, mode)(5, 7, **kw).to(getattr(fg, dtype)).eval()
    assert repr(fm) == repr(tm)
    assert list(fm.state_dict()) == list(tm.state_dict())
    _copy_from_torch(fm, tm)
    x = RNG.standard_normal((4, 3, 5)).astype(dtype)
    tx = torch.tensor(x, requires_grad=True)
    fx = fg.tensor(x, requires_grad=True)
    to, th = tm(tx)
    fo, fh = fm(fx)
    tstates = th if mode == "LSTM" else (th,)
    fstates = fh if mode == "LSTM" else (fh,)
    tl = to.sin().sum() + sum((s**2).sum() for s in tstates)
    fl = fo.sin().sum() + sum((s**2).sum() for s in fstates)
    tl.backward()
    fl.backward()
    tol = 1e-10 if dtype == "float64" else 2e-5
    np.testing.assert_allclose(fo.detach().numpy(), to.detach().numpy(), rtol=tol, atol=tol)
    for a, b in zip(fstates, tstates):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(fx.grad.numpy(), tx.grad.numpy(), rtol=tol, atol=tol)
    for (n, p), q in zip(fm.named_parameters(), tm.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=tol, atol=tol, err_msg=n)


@pytest.mark.parametrize("mode", ["RNN", "LSTM", "GRU"])
def test_unbatched_and_given_state_match_torch(mode: str) -> None:
    torch = _torch()
    tm = getattr(torch.nn, mode)(3, 4, num_layers=2).double()
    fm = getattr(nn, mode)(3, 4, num_layers=2).double()
    _copy_from_torch(fm, tm)
    x = RNG.standard_normal((6, 3))
    h0 = RNG.standard_normal((2, 4))
    c0 = RNG.standard_normal((2, 4))
    th = (torch.tensor(h0), torch.tensor(c0)) if mode == "LSTM" else torch.tensor(h0)
    fh = (fg.tensor(h0), fg.tensor(c0)) if mode == "LSTM" else fg.tensor(h0)
    to, ts = tm(torch.tensor(x), th)
    fo, fs = fm(fg.tensor(x), fh)
    np.testing.assert_allclose(fo.detach().numpy(), to.detach().numpy(), rtol=1e-12, atol=1e-12)
    ts = ts if mode == "LSTM" else (ts,)
    fs = fs if mode == "LSTM" else (fs,)
    for a, b in zip(fs, ts):
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("cell", ["RNNCell", "LSTMCell", "GRUCell"])
@pytest.mark.parametrize("bias", [True, False])
def test_cells_match_torch(cell: str, bias: bool) -> None:
    torch = _torch()
    tm = getattr(torch.nn, cell)(3, 4, bias=bias).double()
    fm = getattr(nn, cell)(3, 4, bias=bias).double()
    assert repr(fm) == repr(tm)
    _copy_from_torch(fm, tm)
    x = RNG.standard_normal((2, 3))
    tx, fx = torch.tensor(x, requires_grad=True), fg.tensor(x, requires_grad=True)
    steps_t, steps_f = None, None
    for _ in range(3):  # a short unrolled sequence feeds the state back in
        steps_t = tm(tx, steps_t)
        steps_f = fm(fx, steps_f)
    tout = steps_t if cell != "LSTMCell" else steps_t[0] * steps_t[1]
    fout = steps_f if cell != "LSTMCell" else steps_f[0] * steps_f[1]
    tout.sum().backward()
    fout.sum().backward()
    np.testing.assert_allclose(fout.detach().numpy(), tout.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(fx.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)
    for p, q in zip(fm.parameters(), tm.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_reprs_match_torch() -> None:
    torch = _torch()
    cases = [
        ("LSTM", (10, 20), {"num_layers": 2, "batch_first": True, "bidirectional": True}),
        ("LSTM", (10, 20), {"proj_size": 5, "bias": False, "dropout": 0.5, "num_layers": 2}),
        ("RNN", (4, 8, 2, "relu"), {}),
        ("GRU", (4, 8), {}),
        ("RNNCell", (4, 8), {"nonlinearity": "relu", "bias": False}),
    ]
    for name, args, kw in cases:
        assert repr(getattr(nn, name)(*args, **kw)) == repr(getattr(torch.nn, name)(*args, **kw))


def test_error_texts_match_torch() -> None:
    torch = _torch()

    def message(lib: Any, fn: Any) -> str:
        with pytest.raises(Exception) as e:
            fn(lib)
        return f"{type(e.value).__name__}: {e.value}"

    cases = [
        lambda L: L.nn.LSTM(3, 4)(L.randn(5, 2, 2)),
        lambda L: L.nn.GRU(3, 4)(L.randn(5, 2, 3), L.randn(1, 3, 4)),
        lambda L: L.nn.RNN(3, 4)(L.randn(5, 3), L.randn(1, 1, 4)),
        lambda L: L.nn.LSTM(3, 4)(L.randn(5, 2, 3), (L.randn(1, 2, 4), L.randn(2, 4))),
        lambda L: L.nn.LSTMCell(3, 4)(L.randn(2, 3), (L.randn(2, 2, 4), L.randn(2, 4))),
    ]
    for case in cases:
        assert message(fg, case) == message(torch, case)


# ----- variable-length sequences ----------------------------------------------------------------


def test_pack_and_pad_round_trip_closed_form() -> None:
    seqs = [fg.tensor([[1.0], [2.0], [3.0]]), fg.tensor([[4.0]]), fg.tensor([[5.0], [6.0]])]
    padded = rnn_utils.pad_sequence(seqs, padding_value=-1.0)
    assert padded.squeeze(2).tolist() == [[1, 4, 5], [2, -1, 6], [3, -1, -1]]
    left = rnn_utils.pad_sequence(seqs, batch_first=True, padding_side="left")
    assert left.squeeze(2).tolist() == [[1, 2, 3], [0, 0, 4], [0, 5, 6]]
    packed = rnn_utils.pack_sequence(seqs, enforce_sorted=False)
    # sorted by length 3, 2, 1: step 0 of all three, step 1 of two, step 2 of one
    assert packed.data.squeeze(1).tolist() == [1, 5, 4, 2, 6, 3]
    assert packed.batch_sizes.tolist() == [3, 2, 1]
    assert packed.sorted_indices.tolist() == [0, 2, 1]
    assert packed.unsorted_indices.tolist() == [0, 2, 1]
    back, lengths = rnn_utils.pad_packed_sequence(packed, batch_first=True, total_length=4)
    assert lengths.tolist() == [3, 1, 2]
    assert back.squeeze(2).tolist() == [[1, 2, 3, 0], [4, 0, 0, 0], [5, 6, 0, 0]]
    assert [s.squeeze(1).tolist() for s in rnn_utils.unpack_sequence(packed)] == [
        [1, 2, 3],
        [4],
        [5, 6],
    ]


def test_packing_errors() -> None:
    x = fg.randn(4, 3, 2)
    with pytest.raises(RuntimeError, match="must be sorted in decreasing order"):
        rnn_utils.pack_padded_sequence(x, [2, 4, 1])
    with pytest.raises(RuntimeError, match="Length of all samples has to be greater than 0"):
        rnn_utils.pack_padded_sequence(x, [4, 0, 1], enforce_sorted=False)
    with pytest.raises(RuntimeError, match="Expected `len\\(lengths\\)` to be equal to batch_size"):
        rnn_utils.pack_padded_sequence(x, [4, 2])
    packed = rnn_utils.pack_padded_sequence(x, [4, 2, 1])
    with pytest.raises(ValueError, match="Expected total_length to be at least"):
        rnn_utils.pad_packed_sequence(packed, total_length=3)


def test_packed_gradient_flows_only_through_valid_steps() -> None:
    m = nn.GRU(2, 3).double()
    x = fg.tensor(RNG.standard_normal((5, 2, 2)), requires_grad=True)
    out, h = m(rnn_utils.pack_padded_sequence(x, [5, 2]))
    padded, _ = rnn_utils.pad_packed_sequence(out)
    (padded.sum() + h.sum()).backward()
    g = x.grad.numpy()
    assert np.all(g[2:, 1] == 0) and np.all(g[:2, 1] != 0) and np.all(g[:, 0] != 0)


@pytest.mark.parametrize("mode", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize("kw", [{}, {"num_layers": 2, "bidirectional": True, "batch_first": True}])
def test_packed_sequences_match_torch(mode: str, kw: Dict[str, Any]) -> None:
    torch = _torch()
    trnn = torch.nn.utils.rnn
    tm = getattr(torch.nn, mode)(3, 4, **kw).double()
    fm = getattr(nn, mode)(3, 4, **kw).double()
    _copy_from_torch(fm, tm)
    bf = kw.get("batch_first", False)
    x = RNG.standard_normal((4, 6, 3) if bf else (6, 4, 3))
    lens = [3, 6, 1, 4]
    tx, fx = torch.tensor(x, requires_grad=True), fg.tensor(x, requires_grad=True)
    tp = trnn.pack_padded_sequence(tx, lens, batch_first=bf, enforce_sorted=False)
    fp = rnn_utils.pack_padded_sequence(fx, lens, batch_first=bf, enforce_sorted=False)
    np.testing.assert_array_equal(fp.data.detach().numpy(), tp.data.detach().numpy())
    assert fp.batch_sizes.tolist() == tp.batch_sizes.tolist()
    to, th = tm(tp)
    fo, fh = fm(fp)
    tpad, tl = trnn.pad_packed_sequence(to, batch_first=bf)
    fpad, fl = rnn_utils.pad_packed_sequence(fo, batch_first=bf)
    assert fl.tolist() == tl.tolist()
    th = th if mode == "LSTM" else (th,)
    fh = fh if mode == "LSTM" else (fh,)
    np.testing.assert_allclose(fpad.detach().numpy(), tpad.detach().numpy(), atol=1e-12)
    for a, b in zip(fh, th):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), atol=1e-12)
    (tpad.sin().sum() + sum((s**2).sum() for s in th)).backward()
    (fpad.sin().sum() + sum((s**2).sum() for s in fh)).backward()
    np.testing.assert_allclose(fx.grad.numpy(), tx.grad.numpy(), atol=1e-12)
    for p, q in zip(fm.parameters(), tm.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), atol=1e-11)


def test_packed_with_initial_state_matches_torch() -> None:
    torch = _torch()
    trnn = torch.nn.utils.rnn
    tm = torch.nn.LSTM(3, 4, num_layers=2).double()
    fm = nn.LSTM(3, 4, num_layers=2).double()
    _copy_from_torch(fm, tm)
    x = RNG.standard_normal((5, 3, 3))
    h0, c0 = RNG.standard_normal((2, 3, 4)), RNG.standard_normal((2, 3, 4))
    lens = [2, 5, 3]
    tp = trnn.pack_padded_sequence(torch.tensor(x), lens, enforce_sorted=False)
    fp = rnn_utils.pack_padded_sequence(fg.tensor(x), lens, enforce_sorted=False)
    _, (th, tc) = tm(tp, (torch.tensor(h0), torch.tensor(c0)))
    _, (fh, fc) = fm(fp, (fg.tensor(h0), fg.tensor(c0)))
    np.testing.assert_allclose(fh.detach().numpy(), th.detach().numpy(), atol=1e-12)
    np.testing.assert_allclose(fc.detach().numpy(), tc.detach().numpy(), atol=1e-12)
