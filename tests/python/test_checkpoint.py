"""``utils.checkpoint``: gradients equal to the plain run's (bit for bit: the same ops run on the
same values), activations not kept by the graph, recomputation as often as torch does it, and
torch's errors. The memory saving itself is measured in ``benches/compare.py deep_mlp
deep_mlp_checkpoint``."""

import math
import warnings

import ferrograd as fg
import ferrograd.nn.functional as F
import numpy as np
import pytest
from ferrograd.autograd import graph
from ferrograd.utils.checkpoint import CheckpointError, checkpoint, checkpoint_sequential


def _params():
    fg.manual_seed(0)
    w1 = fg.randn(6, 12, dtype=fg.float64, requires_grad=True)
    w2 = fg.randn(12, 3, dtype=fg.float64, requires_grad=True)
    x = fg.randn(4, 6, dtype=fg.float64, requires_grad=True)
    return x, w1, w2


def _block(w1, w2, calls=None):
    def f(x):
        if calls is not None:
            calls.append(1)
        h = F.dropout((x @ w1).tanh(), 0.4, training=True)
        return (h @ w2).sigmoid()

    return f


def _grads(loss_fn, leaves):
    for t in leaves:
        t.grad = None
    fg.manual_seed(7)
    loss_fn().backward()
    return [t.grad.numpy().copy() for t in leaves]


@pytest.mark.parametrize("reentrant", [False, True])
def test_gradients_equal_the_plain_run_with_dropout(reentrant):
    x, w1, w2 = _params()
    f = _block(w1, w2)
    plain = _grads(lambda: f(x).sum(), (x, w1, w2))
    ckpt = _grads(lambda: checkpoint(f, x, use_reentrant=reentrant).sum(), (x, w1, w2))
    for a, b in zip(plain, ckpt):
        assert np.array_equal(a, b)


def test_preserve_rng_state_false_draws_new_dropout_masks():
    x, w1, w2 = _params()
    f = _block(w1, w2)
    plain = _grads(lambda: f(x).sum(), (x, w1, w2))
    ckpt = _grads(
        lambda: checkpoint(f, x, use_reentrant=False, preserve_rng_state=False).sum(),
        (x, w1, w2),
    )
    assert not np.array_equal(plain[1], ckpt[1])


def test_the_graph_keeps_no_activation_of_the_checkpointed_function():
    x, w1, w2 = _params()
    f = _block(w1, w2)
    saved = []
    with graph.saved_tensors_hooks(lambda t: saved.append(t.shape) or t, lambda t: t):
        f(x)
        plain = len(saved)
        saved.clear()
        checkpoint(f, x, use_reentrant=False)
    # Only the input goes through the hooks (torch saves it the same way): that is what lets
    # an enclosing checkpoint recompute it.
    assert plain >= 5 and saved == [x.shape]


def test_recomputes_once_per_backward():
    x, w1, w2 = _params()
    calls = []
    y = checkpoint(_block(w1, w2, calls), x, use_reentrant=False).sum()
    assert len(calls) == 1
    y.backward(retain_graph=True)
    assert len(calls) == 2
    y.backward()
    assert len(calls) == 3


def test_non_reentrant_works_with_grad_inputs_and_double_backward():
    x = fg.tensor([0.3, -1.2, 2.0], dtype=fg.float64, requires_grad=True)
    y = checkpoint(lambda t: (t.sin() * t).sum(), x, use_reentrant=False)
    (g,) = fg.autograd.grad(y, x, create_graph=True)
    (g2,) = fg.autograd.grad(g.sum(), x)
    xs = x.tolist()
    assert g.tolist() == pytest.approx([v * math.cos(v) + math.sin(v) for v in xs])
    assert g2.tolist() == pytest.approx([2 * math.cos(v) - v * math.sin(v) for v in xs])
    w = fg.tensor([2.0], dtype=fg.float64, requires_grad=True)
    z = checkpoint(lambda t: (t * w).exp().sum(), x, use_reentrant=False)
    z.backward(inputs=[w])
    assert x.grad is None
    assert w.grad.tolist() == pytest.approx([sum(v * math.exp(2 * v) for v in xs)])


def test_reentrant_refuses_grad():
    x = fg.ones(3, requires_grad=True)
    y = checkpoint(lambda t: t.sin().sum(), x, use_reentrant=True)
    with pytest.raises(
        RuntimeError,
        match="When use_reentrant=True, torch.utils.checkpoint is incompatible with .grad",
    ):
        fg.autograd.grad(y, x)


def test_argument_checks():
    x = fg.ones(2, requires_grad=True)
    with pytest.warns(UserWarning, match="the use_reentrant parameter should be passed explicitly"):
        checkpoint(lambda t: t * 2, x)
    with pytest.raises(ValueError, match="Unexpected keyword arguments: scale"):
        checkpoint(lambda t, scale: t * scale, x, use_reentrant=True, scale=2)
    assert checkpoint(lambda t, scale: t * scale, x, use_reentrant=False, scale=3).tolist() == [
        3.0,
        3.0,
    ]
    with pytest.raises(ValueError, match="only supported when use_reentrant=False"):
        checkpoint(lambda t: t, x, use_reentrant=True, debug=True)
    with pytest.warns(UserWarning, match="None of the inputs have requires_grad=True"):
        checkpoint(lambda t: t * 2, fg.ones(2), use_reentrant=True)


def test_recomputation_that_saves_differently_is_an_error():
    x = fg.ones(3, requires_grad=True)
    state = {"first": True}

    def fickle(t):
        if state.pop("first", False):
            return (t.exp() * t).sum()
        return t.exp().sum()

    y = checkpoint(fickle, x, use_reentrant=False)
    with pytest.raises(CheckpointError, match="A different number of tensors was saved"):
        y.backward()

    state["first"] = True

    def reshaping(t):
        if state.pop("first", False):
            return (t * t).sum()
        u = t[:2]
        return (u * u).sum()

    y = checkpoint(reshaping, x, use_reentrant=False)
    with pytest.raises(CheckpointError, match="different metadata than during the forward pass"):
        y.backward()


def test_sequential_and_decorator_forms_match_the_plain_model():
    fg.manual_seed(3)
    model = fg.nn.Sequential(*[fg.nn.Linear(5, 5) for _ in range(6)], fg.nn.Tanh())
    x = fg.randn(2, 5)
    model(x).sum().backward()
    plain = [p.grad.numpy().copy() for p in model.parameters()]
    model.zero_grad()
    checkpoint_sequential(model, 3, x, use_reentrant=False).sum().backward()
    for a, p in zip(plain, model.parameters()):
        assert np.allclose(a, p.grad.numpy(), rtol=0, atol=1e-6)
    model.zero_grad()

    @checkpoint(use_reentrant=False)
    def run(t):
        return model(t)

    run(x).sum().backward()
    for a, p in zip(plain, model.parameters()):
        assert np.allclose(a, p.grad.numpy(), rtol=0, atol=1e-6)


def _messages(torch):
    from_ = __import__(torch.__name__ + ".utils.checkpoint", fromlist=["checkpoint"])
    out = []
    x = torch.ones(2, requires_grad=True)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        from_.checkpoint(lambda t: t * 2, x)
        out.append(str(w[0].message))
    y = from_.checkpoint(lambda t: t.sin().sum(), x, use_reentrant=True)
    try:
        torch.autograd.grad(y, x)
    except RuntimeError as e:
        out.append(str(e))
    try:
        from_.checkpoint(lambda t, s: t * s, x, use_reentrant=True, s=2)
    except ValueError as e:
        out.append(str(e))
    return out


def test_same_messages_as_torch():
    torch = pytest.importorskip("torch")
    assert _messages(fg) == _messages(torch)


def _nested(fs, reentrant=False):
    """``fs`` run as a binary tree of checkpoints (each half checkpointed, recursively)."""
    if len(fs) == 1:
        return fs[0]
    lo, hi = _nested(fs[: len(fs) // 2], reentrant), _nested(fs[len(fs) // 2 :], reentrant)

    def f(x):
        x = checkpoint(lo, x, use_reentrant=reentrant)
        return checkpoint(hi, x, use_reentrant=reentrant)

    return f


def _layers(n):
    fg.manual_seed(1)
    ws = [fg.randn(6, 6, dtype=fg.float64, requires_grad=True) * 0.5 for _ in range(n)]
    ws = [w.detach().requires_grad_() for w in ws]

    def layer(w):
        return lambda x: F.dropout((x @ w).tanh(), 0.3, training=True)

    return ws, [layer(w) for w in ws]


def _chain(fs):
    def f(x):
        for g in fs:
            x = g(x)
        return x

    return f


@pytest.mark.parametrize("reentrant", [False, True])
@pytest.mark.filterwarnings("ignore:None of the inputs")  # reentrant: inner inputs, as torch
def test_nested_checkpoints_give_the_plain_gradients(reentrant):
    ws, fs = _layers(8)
    x = fg.randn(4, 6, dtype=fg.float64, requires_grad=True)
    plain = _grads(lambda: _chain(fs)(x).sum(), [x, *ws])
    nested = _grads(lambda: _nested(fs, reentrant)(x).sum(), [x, *ws])
    for a, b in zip(plain, nested):
        assert np.array_equal(a, b)


def test_nested_checkpoints_recompute_the_inner_inputs_instead_of_keeping_them():
    ws, fs = _layers(8)
    x = fg.randn(4, 6, dtype=fg.float64, requires_grad=True)
    saved = []
    with graph.saved_tensors_hooks(lambda t: saved.append(t.shape) or t, lambda t: t):
        y = checkpoint(_nested(fs), x, use_reentrant=False)
    # The outermost input is the one tensor the graph keeps: the inner checkpoints' inputs
    # went to the enclosing checkpoints' hooks, to be recomputed in backward.
    assert saved == [x.shape]
    (g,) = fg.autograd.grad(y.sum(), x)
    assert g.shape == x.shape


def test_nested_non_reentrant_checkpoints_work_with_grad_and_double_backward():
    x = fg.tensor([0.3, -1.2, 2.0], dtype=fg.float64, requires_grad=True)
    f = _nested([lambda t: t.sin(), lambda t: t * t, lambda t: t.exp(), lambda t: t.sum()])
    (g,) = fg.autograd.grad(f(x), x, create_graph=True)
    (g2,) = fg.autograd.grad(g.sum(), x)
    # d/dx exp(sin(x)^2) = e * sin(2x); the second derivative is e * (sin(2x)^2 + 2cos(2x)).
    for v, a, b in zip(x.tolist(), g.tolist(), g2.tolist()):
        e = math.exp(math.sin(v) ** 2)
        assert a == pytest.approx(e * math.sin(2 * v))
        assert b == pytest.approx(e * (math.sin(2 * v) ** 2 + 2 * math.cos(2 * v)))
