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


# ----- NAdam, RAdam, Adamax, Rprop, ASGD, Adafactor -------------------------------------------
#
# A model with a matrix, a vector and a 3-D parameter (Adafactor factors the first and the
# last). The references keep their state under torch's keys, and the tests compare every state
# tensor too. torch keeps `mu_product`, `eta` and `mu` in float32 tensors, so the references round
# them to float32 where torch does.

Y2 = RNG.standard_normal((8, 2))
M0 = RNG.standard_normal((3, 2))
V0 = RNG.standard_normal(2)
C0 = RNG.standard_normal((2, 3, 4))
CT = RNG.standard_normal((2, 3, 4))


def grads2_np(m, v, c):
    """Gradients of mean((X m + v - Y2)^2) + mean((c * c - CT)^2)."""
    r = X @ m + v - Y2
    return [2 * X.T @ r / r.size, 2 * r.sum(0) / r.size, 4 * (c * c - CT) * c / c.size]


def loss2(lib, m, v, c, x, y, ct):
    return ((x @ m + v - y) ** 2).mean() + ((c * c - ct) ** 2).mean()


def np_nadam(
    ps,
    gs,
    st,
    lr=2e-3,
    betas=(0.9, 0.999),
    eps=1e-8,
    weight_decay=0,
    momentum_decay=4e-3,
    decoupled_weight_decay=False,
    maximize=False,
):
    b1, b2 = betas
    for i, (p, g) in enumerate(zip(ps, gs)):
        s = st.setdefault(
            i, {"step": 0, "mu_product": np.float32(1), "exp_avg": 0 * p, "exp_avg_sq": 0 * p}
        )
        s["step"] += 1
        t = s["step"]
        g = -g if maximize else g
        if weight_decay:
            if decoupled_weight_decay:
                p *= 1 - lr * weight_decay
            else:
                g = g + weight_decay * p
        mu = b1 * (1 - 0.5 * 0.96 ** (t * momentum_decay))
        mu_next = b1 * (1 - 0.5 * 0.96 ** ((t + 1) * momentum_decay))
        s["mu_product"] = np.float32(s["mu_product"] * np.float32(mu))
        mp = float(s["mu_product"])
        s["exp_avg"] = b1 * s["exp_avg"] + (1 - b1) * g
        s["exp_avg_sq"] = b2 * s["exp_avg_sq"] + (1 - b2) * g * g
        denom = np.sqrt(s["exp_avg_sq"] / (1 - b2**t)) + eps
        p -= lr * (1 - mu) / (1 - mp) * g / denom
        p -= lr * mu_next / (1 - mp * mu_next) * s["exp_avg"] / denom


def np_radam(
    ps,
    gs,
    st,
    lr=1e-3,
    betas=(0.9, 0.999),
    eps=1e-8,
    weight_decay=0,
    decoupled_weight_decay=False,
    maximize=False,
):
    b1, b2 = betas
    for i, (p, g) in enumerate(zip(ps, gs)):
        s = st.setdefault(i, {"step": 0, "exp_avg": 0 * p, "exp_avg_sq": 0 * p})
        s["step"] += 1
        t = s["step"]
        g = -g if maximize else g
        if weight_decay:
            if decoupled_weight_decay:
                p *= 1 - lr * weight_decay
            else:
                g = g + weight_decay * p
        s["exp_avg"] = b1 * s["exp_avg"] + (1 - b1) * g
        s["exp_avg_sq"] = b2 * s["exp_avg_sq"] + (1 - b2) * g * g
        m_hat = s["exp_avg"] / (1 - b1**t)
        rho_inf = 2 / (1 - b2) - 1
        rho = rho_inf - 2 * t * b2**t / (1 - b2**t)
        if rho > 5:
            ell = np.sqrt(1 - b2**t) / (np.sqrt(s["exp_avg_sq"]) + eps)
            r = np.sqrt((rho - 4) * (rho - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho))
            p -= lr * m_hat * ell * r
        else:
            p -= lr * m_hat


def np_adamax(ps, gs, st, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, maximize=False):
    b1, b2 = betas
    for i, (p, g) in enumerate(zip(ps, gs)):
        s = st.setdefault(i, {"step": 0, "exp_avg": 0 * p, "exp_inf": 0 * p})
        s["step"] += 1
        g = -g if maximize else g
        g = g + weight_decay * p
        s["exp_avg"] = b1 * s["exp_avg"] + (1 - b1) * g
        s["exp_inf"] = np.maximum(b2 * s["exp_inf"], np.abs(g) + eps)
        p -= lr / (1 - b1 ** s["step"]) * s["exp_avg"] / s["exp_inf"]


def np_rprop(ps, gs, st, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), maximize=False):
    etaminus, etaplus = etas
    for i, (p, g) in enumerate(zip(ps, gs)):
        s = st.setdefault(i, {"step": 0, "prev": 0 * p, "step_size": 0 * p + lr})
        s["step"] += 1
        g = -g if maximize else g.copy()
        sgn = np.sign(g * s["prev"])
        factor = np.where(sgn > 0, etaplus, np.where(sgn < 0, etaminus, 1.0))
        s["step_size"] = np.clip(s["step_size"] * factor, *step_sizes)
        g[sgn < 0] = 0
        p -= np.sign(g) * s["step_size"]
        s["prev"] = g


def np_asgd(ps, gs, st, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0, maximize=False):
    for i, (p, g) in enumerate(zip(ps, gs)):
        s = st.setdefault(i, {"step": 0, "eta": np.float32(lr), "mu": np.float32(1), "ax": 0 * p})
        s["step"] += 1
        t = s["step"]
        g = -g if maximize else g
        g = g + weight_decay * p
        eta = float(s["eta"])
        p *= 1 - lambd * eta
        p -= eta * g
        if s["mu"] != 1:
            s["ax"] = s["ax"] + (p - s["ax"]) * float(s["mu"])
        else:
            s["ax"] = p.copy()
        s["eta"] = np.float32(lr / (1 + lambd * lr * t) ** alpha)
        s["mu"] = np.float32(1 / max(1, t - t0))


def np_adafactor(
    ps,
    gs,
    st,
    lr=1e-2,
    beta2_decay=-0.8,
    eps=(None, 1e-3),
    d=1.0,
    weight_decay=0.0,
    maximize=False,
):
    eps1, eps2 = eps
    eps1 = np.finfo(np.float64).eps if eps1 is None else eps1
    for i, (p, g) in enumerate(zip(ps, gs)):
        if p.ndim > 1:
            init = {
                "step": 0,
                "row_var": np.zeros(p.shape[:-1] + (1,)),
                "col_var": np.zeros(p.shape[:-2] + (1, p.shape[-1])),
            }
        else:
            init = {"step": 0, "variance": 0 * p}
        s = st.setdefault(i, init)
        s["step"] += 1
        t = s["step"]
        g = -g if maximize else g
        w = t**beta2_decay
        rho = min(lr, 1 / np.sqrt(t))
        alpha = max(eps2, np.sqrt(np.mean(p * p))) * rho
        p *= 1 - lr * weight_decay
        if p.ndim > 1:
            s["row_var"] = (1 - w) * s["row_var"] + w * np.mean(g * g, axis=-1, keepdims=True)
            s["col_var"] = (1 - w) * s["col_var"] + w * np.mean(g * g, axis=-2, keepdims=True)
            row_mean = np.mean(s["row_var"], axis=-2, keepdims=True)
            v = s["row_var"] * s["col_var"] / np.maximum(row_mean, eps1)
        else:
            s["variance"] = (1 - w) * s["variance"] + w * g * g
            v = s["variance"]
        u = g / np.sqrt(np.maximum(v, eps1 * eps1))
        u = u / max(1.0, np.sqrt(np.mean(u * u)) / d)
        p -= alpha * u


NEW_CASES = [
    ("NAdam", np_nadam, dict(lr=0.05)),
    ("NAdam", np_nadam, dict(lr=0.05, weight_decay=0.1, momentum_decay=0.05)),
    ("NAdam", np_nadam, dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True)),
    ("NAdam", np_nadam, dict(lr=0.05, betas=(0.8, 0.99), eps=1e-3, maximize=True)),
    ("RAdam", np_radam, dict(lr=0.05)),
    ("RAdam", np_radam, dict(lr=0.05, weight_decay=0.1)),
    ("RAdam", np_radam, dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True)),
    ("RAdam", np_radam, dict(lr=0.05, betas=(0.8, 0.9), eps=1e-3, maximize=True)),
    ("Adamax", np_adamax, dict(lr=0.05)),
    ("Adamax", np_adamax, dict(lr=0.05, weight_decay=0.1, betas=(0.8, 0.99))),
    ("Adamax", np_adamax, dict(lr=0.05, eps=1e-2, maximize=True)),
    ("Rprop", np_rprop, dict()),
    ("Rprop", np_rprop, dict(lr=0.05, etas=(0.3, 1.5), step_sizes=(1e-3, 0.08))),
    ("Rprop", np_rprop, dict(maximize=True)),
    ("ASGD", np_asgd, dict(lr=0.05)),
    ("ASGD", np_asgd, dict(lr=0.05, lambd=0.01, alpha=0.5, t0=5, weight_decay=0.1)),
    ("ASGD", np_asgd, dict(lr=0.05, t0=3, maximize=True)),
    ("Adafactor", np_adafactor, dict()),
    ("Adafactor", np_adafactor, dict(lr=0.05, weight_decay=0.1, beta2_decay=-0.5)),
    ("Adafactor", np_adafactor, dict(lr=0.05, eps=(1e-3, 1e-2), d=1.5, maximize=True)),
    ("Adafactor", np_adafactor, dict(lr=0.5, eps=(0.3, 1e-3))),
]


def run2(lib, name, kw, dtype, steps=STEPS, opt=None, params=None):
    """Train the three-parameter model; returns the parameters and the optimizer."""
    if params is None:
        params = [lib.tensor(a, dtype=dtype).requires_grad_(True) for a in (M0, V0, C0)]
    x, y, ct = (lib.tensor(a, dtype=dtype) for a in (X, Y2, CT))
    if opt is None:
        opt = getattr(lib.optim, name)(params, **kw)
    for _ in range(steps):
        opt.zero_grad()
        loss2(lib, *params, x, y, ct).backward()
        opt.step()
    return params, opt


def as_np(t):
    return np.asarray(t.detach().numpy(), dtype=np.float64)


@pytest.mark.parametrize("name,ref,kw", NEW_CASES)
def test_new_optimizers_match_numpy_reference(name, ref, kw):
    ps = [M0.copy(), V0.copy(), C0.copy()]
    st: dict = {}
    for _ in range(STEPS):
        ref(ps, grads2_np(*ps), st, **kw)
    params, opt = run2(fg, name, kw, fg.float64)
    for p, want in zip(params, ps):
        np.testing.assert_allclose(as_np(p), want, rtol=1e-10, atol=1e-12)
    for i, p in enumerate(params):
        state = opt.state[p]
        assert sorted(state) == sorted(st[i]), name
        for key, want in st[i].items():
            np.testing.assert_allclose(
                as_np(state[key]),
                np.asarray(want, dtype=np.float64),
                rtol=1e-10,
                atol=1e-12,
                err_msg=f"{name} state {key}",
            )


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,ref,kw", NEW_CASES)
def test_new_optimizers_match_torch(name, ref, kw, dtype):
    torch = pytest.importorskip("torch")
    tps, topt = run2(torch, name, kw, getattr(torch, dtype))
    fps, fopt = run2(fg, name, kw, getattr(fg, dtype))
    tol = 1e-5 if dtype == "float32" else 1e-12
    for f, t in zip(fps, tps):
        np.testing.assert_allclose(as_np(f), as_np(t), rtol=tol, atol=tol)
    tsd, fsd = topt.state_dict(), fopt.state_dict()
    assert sorted(fsd["param_groups"][0]) == sorted(tsd["param_groups"][0])
    assert sorted(fsd["state"]) == sorted(tsd["state"])
    for i, tstate in tsd["state"].items():
        assert sorted(fsd["state"][i]) == sorted(tstate)
        for key, tv in tstate.items():
            fv = fsd["state"][i][key]
            assert tuple(fv.shape) == tuple(tv.shape), key
            assert str(fv.dtype).split(".")[-1] == str(tv.dtype).split(".")[-1], key
            np.testing.assert_allclose(as_np(fv), as_np(tv), rtol=tol, atol=tol, err_msg=key)


@pytest.mark.parametrize("name,ref,kw", NEW_CASES)
def test_new_optimizers_state_dict_round_trip(name, ref, kw):
    full, _ = run2(fg, name, kw, fg.float64, steps=10)
    params = [fg.tensor(a).requires_grad_(True) for a in (M0, V0, C0)]
    _, opt = run2(fg, name, kw, fg.float64, steps=5, params=params)
    sd = opt.state_dict()
    assert sd["param_groups"][0]["params"] == [0, 1, 2]
    opt2 = getattr(fg.optim, name)(params, lr=123.0)
    opt2.load_state_dict(sd)
    assert opt2.param_groups[0]["lr"] == kw.get("lr", opt.defaults["lr"])
    run2(fg, name, kw, fg.float64, steps=5, opt=opt2, params=params)
    for p, want in zip(params, full):
        np.testing.assert_array_equal(p.detach().numpy(), want.detach().numpy())


def test_new_optimizers_state_keys():
    p = fg.zeros(2, 3, requires_grad=True)
    p.grad = fg.ones(2, 3)
    want = {
        "NAdam": ["exp_avg", "exp_avg_sq", "mu_product", "step"],
        "RAdam": ["exp_avg", "exp_avg_sq", "step"],
        "Adamax": ["exp_avg", "exp_inf", "step"],
        "Rprop": ["prev", "step", "step_size"],
        "ASGD": ["ax", "eta", "mu", "step"],
        "Adafactor": ["col_var", "row_var", "step"],
    }
    for name, keys in want.items():
        opt = getattr(fg.optim, name)([p])
        opt.step()
        assert sorted(opt.state[p]) == keys, name
    state = opt.state[p]
    assert state["row_var"].shape == (2, 1) and state["col_var"].shape == (1, 3)
    assert state["step"].dtype == fg.float32 and state["step"].item() == 1.0


BAD_ARGS = [
    ("NAdam", dict(lr=-1.0), "Invalid learning rate: -1.0"),
    ("NAdam", dict(eps=-1.0), "Invalid epsilon value: -1.0"),
    ("NAdam", dict(betas=(1.0, 0.9)), "Invalid beta parameter at index 0: 1.0"),
    ("NAdam", dict(betas=(0.9, -0.1)), "Invalid beta parameter at index 1: -0.1"),
    ("NAdam", dict(weight_decay=-0.5), "Invalid weight_decay value: -0.5"),
    ("NAdam", dict(momentum_decay=-0.5), "Invalid momentum_decay value: -0.5"),
    ("RAdam", dict(lr=-1.0), "Invalid learning rate: -1.0"),
    ("RAdam", dict(eps=-1e-3), "Invalid epsilon value: -0.001"),
    ("RAdam", dict(betas=(0.9, 1.5)), "Invalid beta parameter at index 1: 1.5"),
    ("RAdam", dict(weight_decay=-1), "Invalid weight_decay value: -1"),
    ("Adamax", dict(lr=-0.1), "Invalid learning rate: -0.1"),
    ("Adamax", dict(eps=-1.0), "Invalid epsilon value: -1.0"),
    ("Adamax", dict(betas=(-0.1, 0.9)), "Invalid beta parameter at index 0: -0.1"),
    ("Adamax", dict(weight_decay=-1.0), "Invalid weight_decay value: -1.0"),
    ("Rprop", dict(lr=-1.0), "Invalid learning rate: -1.0"),
    ("Rprop", dict(etas=(1.5, 1.2)), "Invalid eta values: 1.5, 1.2"),
    ("Rprop", dict(etas=(0.5, 0.9)), "Invalid eta values: 0.5, 0.9"),
    ("ASGD", dict(lr=-1.0), "Invalid learning rate: -1.0"),
    ("ASGD", dict(lambd=-1.0), "Invalid lambd value: -1.0"),
    ("ASGD", dict(alpha=-1.0), "Invalid alpha value: -1.0"),
    ("ASGD", dict(weight_decay=-1.0), "Invalid weight_decay value: -1.0"),
    ("Adafactor", dict(lr=-1.0), "Learning rate should be >= 0 but is: -1.0"),
    ("Adafactor", dict(beta2_decay=0.5), "beta2_decay should be <= 0 but is: 0.5"),
    ("Adafactor", dict(eps=(-1.0, 1e-3)), "epsilon1 should be >= 0 but is: -1.0"),
    ("Adafactor", dict(eps=(None, -1.0)), "epsilon2 should be >= 0 but is: -1.0"),
    ("Adafactor", dict(d=0.5), "Clipping threshold d should be >= 1 but is: 0.5"),
    ("Adafactor", dict(weight_decay=-1.0), "weight_decay should be >= 0 but is: -1.0"),
]


@pytest.mark.parametrize("name,kw,msg", BAD_ARGS)
def test_new_optimizers_bad_arguments(name, kw, msg):
    p = fg.zeros(2, requires_grad=True)
    with pytest.raises(ValueError) as err:
        getattr(fg.optim, name)([p], **kw)
    assert str(err.value) == msg


@pytest.mark.parametrize("name,kw,msg", BAD_ARGS)
def test_new_optimizers_bad_arguments_match_torch(name, kw, msg):
    torch = pytest.importorskip("torch")
    with pytest.raises(ValueError) as err:
        getattr(torch.optim, name)([torch.zeros(2, requires_grad=True)], **kw)
    assert str(err.value) == msg


@pytest.mark.parametrize("name", ["NAdam", "RAdam", "Adamax", "Rprop", "ASGD", "Adafactor"])
def test_new_optimizers_defaults_match_torch_signature(name):
    torch = pytest.importorskip("torch")
    import inspect

    ours = inspect.signature(getattr(fg.optim, name))
    theirs = inspect.signature(getattr(torch.optim, name))
    assert list(ours.parameters) == list(theirs.parameters)
    for key, param in theirs.parameters.items():
        assert ours.parameters[key].kind == param.kind, key
        assert ours.parameters[key].default == param.default, key


def test_new_optimizers_errors_are_exceptions():
    p = fg.zeros(3, 2).t().requires_grad_(True)
    p.grad = fg.ones(2, 3)
    for name in ["NAdam", "RAdam", "Adamax", "Rprop", "ASGD", "Adafactor"]:
        with pytest.raises(RuntimeError, match="parameter 0 is not contiguous"):
            getattr(fg.optim, name)([p]).step()
    q = fg.zeros(2, 3, requires_grad=True)
    q.grad = fg.ones(2, 3)
    opt = fg.optim.Adafactor([q])
    opt.step()
    opt.state[q]["row_var"] = fg.zeros(3, 1)
    with pytest.raises(RuntimeError, match="row_var of parameter 0 must be"):
        opt.step()
    opt = fg.optim.NAdam([q])
    opt.step()
    opt.state[q]["mu_product"] = fg.zeros(2)
    with pytest.raises(RuntimeError, match="mu_product of parameter 0 must be a one-element"):
        opt.step()


def test_new_optimizers_bump_versions_and_same_on_any_thread_count():
    rng = np.random.default_rng(2)
    p0 = rng.standard_normal((300, 700)).astype(np.float32)
    g0 = rng.standard_normal((300, 700)).astype(np.float32)
    before = fg.get_num_threads()
    try:
        for name in ["NAdam", "Adafactor", "ASGD"]:
            out = []
            for n in (1, 3):
                fg.set_num_threads(n)
                p = fg.tensor(p0).requires_grad_(True)
                p.grad = fg.tensor(g0)
                opt = getattr(fg.optim, name)([p], lr=0.01, weight_decay=0.1)
                v = p._version
                for _ in range(3):
                    opt.step()
                assert p._version > v
                out.append(p.detach().numpy().copy())
            np.testing.assert_array_equal(out[1], out[0], err_msg=name)
            assert not np.array_equal(out[0], p0)
    finally:
        fg.set_num_threads(before)


@pytest.mark.parametrize("name", ["NAdam", "RAdam", "Adamax", "Rprop", "ASGD", "Adafactor"])
def test_new_optimizers_half_parameters(name):
    p64 = fg.tensor(M0).requires_grad_(True)
    p16 = fg.tensor(M0, dtype=fg.bfloat16).requires_grad_(True)
    p64.grad = fg.tensor(M0 * 0.5)
    p16.grad = fg.tensor(M0 * 0.5, dtype=fg.bfloat16)
    o64, o16 = getattr(fg.optim, name)([p64]), getattr(fg.optim, name)([p16])
    for _ in range(3):
        o64.step()
        o16.step()
    assert p16.dtype == fg.bfloat16
    np.testing.assert_allclose(as_np(p16.float()), as_np(p64), rtol=0.05, atol=0.02)
