"""ferrograd.optim against NumPy re-implementations of torch's documented updates, and torch."""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest

STEPS = 20
RNG = np.random.default_rng(0)
X = RNG.standard_normal((8, 3))
Y = RNG.standard_normal(8)
W0 = RNG.standard_normal(3)
B0 = RNG.standard_normal(1)


def grads_np(w: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Gradient of mean((X w + b - Y)^2)."""
    r = X @ w + b[0] - Y
    return 2 * X.T @ r / len(Y), np.array([2 * r.mean()])


# ----- NumPy re-implementations of torch's documented updates ---------------------------------


def np_sgd(
    ps, gs, st, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, maximize=False
):
    for i, (p, g) in enumerate(zip(ps, gs)):
        g = -g if maximize else g.copy()
        g = g + weight_decay * p
        if momentum != 0:
            if i not in st:
                st[i] = g.copy()
            else:
                st[i] = momentum * st[i] + (1 - dampening) * g
            g = g + momentum * st[i] if nesterov else st[i]
        p -= lr * g


def np_adam(
    ps,
    gs,
    st,
    lr=1e-3,
    betas=(0.9, 0.999),
    eps=1e-8,
    weight_decay=0,
    amsgrad=False,
    maximize=False,
    decoupled=False,
):
    b1, b2 = betas
    for i, (p, g) in enumerate(zip(ps, gs)):
        s = st.setdefault(i, {"t": 0, "m": 0 * p, "v": 0 * p, "vm": 0 * p})
        g = -g if maximize else g
        if decoupled:
            p *= 1 - lr * weight_decay
        else:
            g = g + weight_decay * p
        s["t"] += 1
        t = s["t"]
        s["m"] = b1 * s["m"] + (1 - b1) * g
        s["v"] = b2 * s["v"] + (1 - b2) * g * g
        v = s["v"]
        if amsgrad:
            s["vm"] = np.maximum(s["vm"], s["v"])
            v = s["vm"]
        p -= lr / (1 - b1**t) * s["m"] / (np.sqrt(v) / np.sqrt(1 - b2**t) + eps)


def np_adamw(ps, gs, st, weight_decay=1e-2, **kw):
    np_adam(ps, gs, st, weight_decay=weight_decay, decoupled=True, **kw)


def np_rmsprop(
    ps,
    gs,
    st,
    lr=1e-2,
    alpha=0.99,
    eps=1e-8,
    weight_decay=0,
    momentum=0,
    centered=False,
    maximize=False,
):
    for i, (p, g) in enumerate(zip(ps, gs)):
        s = st.setdefault(i, {"sq": 0 * p, "b": 0 * p, "ga": 0 * p})
        g = -g if maximize else g
        g = g + weight_decay * p
        s["sq"] = alpha * s["sq"] + (1 - alpha) * g * g
        if centered:
            s["ga"] = alpha * s["ga"] + (1 - alpha) * g
            avg = np.sqrt(s["sq"] - s["ga"] ** 2) + eps
        else:
            avg = np.sqrt(s["sq"]) + eps
        if momentum > 0:
            s["b"] = momentum * s["b"] + g / avg
            p -= lr * s["b"]
        else:
            p -= lr * g / avg


def np_adagrad(
    ps,
    gs,
    st,
    lr=1e-2,
    lr_decay=0,
    weight_decay=0,
    initial_accumulator_value=0,
    eps=1e-10,
    maximize=False,
):
    for i, (p, g) in enumerate(zip(ps, gs)):
        s = st.setdefault(i, {"t": 0, "sum": 0 * p + initial_accumulator_value})
        s["t"] += 1
        g = -g if maximize else g
        g = g + weight_decay * p
        clr = lr / (1 + (s["t"] - 1) * lr_decay)
        s["sum"] = s["sum"] + g * g
        p -= clr * g / (np.sqrt(s["sum"]) + eps)


CASES = [
    ("SGD", np_sgd, dict(lr=0.05)),
    ("SGD", np_sgd, dict(lr=0.05, momentum=0.9)),
    ("SGD", np_sgd, dict(lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.01)),
    ("SGD", np_sgd, dict(lr=0.05, momentum=0.9, nesterov=True, maximize=True)),
    ("Adam", np_adam, dict(lr=0.05)),
    ("Adam", np_adam, dict(lr=0.05, weight_decay=0.1, amsgrad=True)),
    ("Adam", np_adam, dict(lr=0.05, betas=(0.5, 0.9), maximize=True)),
    ("AdamW", np_adamw, dict(lr=0.05)),
    ("AdamW", np_adamw, dict(lr=0.05, weight_decay=0.3, amsgrad=True)),
    ("RMSprop", np_rmsprop, dict()),
    ("RMSprop", np_rmsprop, dict(momentum=0.5, centered=True, weight_decay=0.01)),
    ("RMSprop", np_rmsprop, dict(centered=True, maximize=True)),
    ("Adagrad", np_adagrad, dict(lr=0.1)),
    (
        "Adagrad",
        np_adagrad,
        dict(
            lr=0.1, lr_decay=0.05, weight_decay=0.01, initial_accumulator_value=0.1, maximize=True
        ),
    ),
]


def run(lib, name, kw, dtype, steps=STEPS):
    w = lib.tensor(W0, dtype=dtype).requires_grad_(True)
    b = lib.tensor(B0, dtype=dtype).requires_grad_(True)
    x, y = lib.tensor(X, dtype=dtype), lib.tensor(Y, dtype=dtype)
    opt = getattr(lib.optim, name)([w, b], **kw)
    for _ in range(steps):
        opt.zero_grad()
        loss = ((x @ w + b - y) ** 2).mean()
        loss.backward()
        opt.step()
    return w.detach().numpy().astype(np.float64), b.detach().numpy().astype(np.float64)


@pytest.mark.parametrize("name,ref,kw", CASES)
def test_matches_numpy_reference(name, ref, kw):
    w, b = W0.copy(), B0.copy()
    st: dict = {}
    for _ in range(STEPS):
        gw, gb = grads_np(w, b)
        ref([w, b], [gw, gb], st, **kw)
    fw, fb = run(fg, name, kw, fg.float64)
    np.testing.assert_allclose(fw, w, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(fb, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,ref,kw", CASES)
def test_matches_torch(name, ref, kw, dtype):
    torch = pytest.importorskip("torch")
    tw, tb = run(torch, name, kw, getattr(torch, dtype))
    fw, fb = run(fg, name, kw, getattr(fg, dtype))
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(fw, tw, rtol=tol, atol=tol)
    np.testing.assert_allclose(fb, tb, rtol=tol, atol=tol)


@pytest.mark.parametrize("name,ref,kw", CASES)
def test_state_dict_round_trip_resumes_identically(name, ref, kw):
    full = run(fg, name, kw, fg.float64, steps=10)
    w = fg.tensor(W0).requires_grad_(True)
    b = fg.tensor(B0).requires_grad_(True)
    x, y = fg.tensor(X), fg.tensor(Y)

    def train(opt, steps):
        for _ in range(steps):
            opt.zero_grad()
            ((x @ w + b - y) ** 2).mean().backward()
            opt.step()

    opt = getattr(fg.optim, name)([w, b], **kw)
    train(opt, 5)
    sd = opt.state_dict()
    assert sorted(sd) == ["param_groups", "state"]
    assert sd["param_groups"][0]["params"] == [0, 1]
    assert all(isinstance(k, int) for k in sd["state"])
    opt2 = getattr(fg.optim, name)([w, b], **kw)
    opt2.load_state_dict(sd)
    train(opt2, 5)
    np.testing.assert_array_equal(w.detach().numpy(), full[0])
    np.testing.assert_array_equal(b.detach().numpy(), full[1])


def test_param_groups_defaults_and_closure():
    a = fg.zeros(2, requires_grad=True)
    b = fg.zeros(2, requires_grad=True)
    opt = fg.optim.SGD([{"params": [a]}, {"params": b, "lr": 0.5}], lr=0.1, momentum=0.9)
    assert opt.param_groups[0]["lr"] == 0.1 and opt.param_groups[1]["lr"] == 0.5
    assert opt.param_groups[1]["momentum"] == 0.9 and opt.param_groups[1]["params"] == [b]

    def closure():
        opt.zero_grad()
        loss = ((a - 1) ** 2).sum() + ((b - 1) ** 2).sum()
        loss.backward()
        return loss

    assert opt.step(closure).item() == 4.0
    np.testing.assert_allclose(a.detach().numpy(), [0.2, 0.2])
    np.testing.assert_allclose(b.detach().numpy(), [1.0, 1.0])
    opt.zero_grad(set_to_none=False)
    assert a.grad is not None and a.grad.tolist() == [0.0, 0.0]
    opt.zero_grad()
    assert a.grad is None


def test_errors():
    p = fg.zeros(2, requires_grad=True)
    with pytest.raises(ValueError, match="optimizer got an empty parameter list"):
        fg.optim.SGD([])
    with pytest.raises(ValueError, match="can't optimize a non-leaf Tensor"):
        fg.optim.SGD([p * 2])
    with pytest.raises(ValueError, match="some parameters appear in more than one parameter group"):
        fg.optim.SGD([{"params": [p]}, {"params": [p]}])
    with pytest.raises(ValueError, match="Invalid learning rate: -1"):
        fg.optim.Adam([p], lr=-1)
    with pytest.raises(ValueError, match="Invalid beta parameter at index 1: 1.0"):
        fg.optim.AdamW([p], betas=(0.9, 1.0))
    with pytest.raises(
        ValueError, match="Nesterov momentum requires a momentum and zero dampening"
    ):
        fg.optim.SGD([p], nesterov=True)
    with pytest.raises(ValueError, match="Invalid momentum value: -0.5"):
        fg.optim.RMSprop([p], momentum=-0.5)
    with pytest.raises(ValueError, match="Invalid lr_decay value: -1"):
        fg.optim.Adagrad([p], lr_decay=-1)
    with pytest.raises(TypeError, match="ordered collections"):
        fg.optim.SGD([{"params": {p}}])
    base = fg.zeros(2, 3)
    q = base.t().requires_grad_(True)
    opt = fg.optim.SGD([q], lr=0.1)
    q.grad = fg.ones(3, 2)
    with pytest.raises(RuntimeError, match="not contiguous"):
        opt.step()


def test_step_bumps_version_and_autograd_detects_it():
    p = fg.tensor([1.0, 2.0], requires_grad=True)
    opt = fg.optim.Adam([p], lr=0.1)
    p.grad = fg.ones(2)
    v = p._version
    y = (p * p).sum()
    opt.step()
    assert p._version > v
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


def test_params_without_grad_are_skipped():
    a = fg.tensor([1.0], requires_grad=True)
    b = fg.tensor([1.0], requires_grad=True)
    opt = fg.optim.Adam([a, b], lr=0.1)
    a.grad = fg.ones(1)
    opt.step()
    assert b.tolist() == [1.0] and b not in opt.state
    assert opt.state[a]["step"].item() == 1.0


def test_large_step_same_on_any_thread_count():
    rng = np.random.default_rng(1)
    p0 = rng.standard_normal(600_000).astype(np.float32)
    g0 = rng.standard_normal(600_000).astype(np.float32)
    out = []
    before = fg.get_num_threads()
    try:
        for n in (1, 2, 3):
            fg.set_num_threads(n)
            p = fg.tensor(p0).requires_grad_(True)
            p.grad = fg.tensor(g0)
            opt = fg.optim.Adam([p], lr=0.01, weight_decay=0.1, amsgrad=True)
            for _ in range(3):
                opt.step()
            out.append(p.detach().numpy().copy())
    finally:
        fg.set_num_threads(before)
    for o in out[1:]:
        np.testing.assert_array_equal(o, out[0])


def test_load_state_dict_copies_state_and_checks_groups():
    p = fg.tensor([1.0, 2.0], requires_grad=True)
    opt = fg.optim.Adam([p], lr=0.1)
    p.grad = fg.ones(2)
    opt.step()
    sd = opt.state_dict()
    saved = sd["state"][0]["exp_avg"].tolist()
    opt2 = fg.optim.Adam([p], lr=0.5)
    opt2.load_state_dict(sd)
    assert opt2.param_groups[0]["lr"] == 0.1 and opt2.param_groups[0]["params"] == [p]
    opt2.step()
    assert sd["state"][0]["exp_avg"].tolist() == saved
    q = fg.zeros(1, requires_grad=True)
    with pytest.raises(ValueError, match="different number of parameter groups"):
        fg.optim.Adam([{"params": [p]}, {"params": [q]}]).load_state_dict(sd)
    with pytest.raises(ValueError, match="doesn't match the size of optimizer's group"):
        fg.optim.Adam([p, q]).load_state_dict(sd)
