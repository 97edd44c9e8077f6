"""The float32 silu-family kernels against float64 truth (NumPy closed forms): a dense sweep in
ulps, the special values, gradients against the float64 derivative, torch, and equality at
one and two threads."""

from __future__ import annotations

import ferrograd as fg
import ferrograd.nn.functional as F
import numpy as np
import pytest


def _sigmoid64(x: np.ndarray) -> np.ndarray:
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _sweep() -> np.ndarray:
    """Every 1/64 on [-20, 20], every float near the kernels' splits, random floats on
    [-20, 20], [-120, 120] and over every magnitude."""
    rng = np.random.default_rng(11)
    parts = [np.arange(-1280, 1281) / 64.0]
    for c in (86.0, -86.0, -0.3465736, 20.0, -40.0, -112.0):
        b = np.array([c], dtype=np.float32).view(np.int32)[0]
        parts.append(np.arange(b - 2000, b + 2000, dtype=np.int32).view(np.float32))
    parts.append(rng.uniform(-20, 20, 1_000_000))
    parts.append(rng.uniform(-120, 120, 200_000))
    bits = rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    parts.append(bits[np.isfinite(bits)])
    return np.concatenate([p.astype(np.float32) for p in parts])


def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    # ulp of the exact value in float32, denormal spacing below the normal range; a value
    # beyond float32's range is right as the infinity it rounds to
    with np.errstate(over="ignore"):
        w32 = want.astype(np.float32)
    over = np.isinf(w32) & np.isfinite(want)
    ulp = np.maximum(np.spacing(np.abs(np.where(over, 1.0, want)).astype(np.float32)), 2.0**-149)
    err = np.abs(got.astype(np.float64) - want) / ulp.astype(np.float64)
    return np.where(over, np.where(got == w32, 0.0, np.inf), err)


# name -> (float64 value, float64 derivative and the size of its cancelling terms)
def _silu(x):
    s = _sigmoid64(x)
    t = x * s * (1 - s)
    return x * s, s + t, np.abs(s) + np.abs(t)


def _sigmoid(x):
    # s' = s - s²: its terms are of the size of s
    s = _sigmoid64(x)
    return s, s * (1 - s), s


def _softplus(x):
    # torch's default threshold: x itself above 20
    v = np.where(x > 20, x, np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x))))
    d = np.where(x > 20, 1.0, _sigmoid64(x))
    return v, d, np.abs(d)


def _logsigmoid(x):
    d = _sigmoid64(-x)
    return np.minimum(x, 0) - np.log1p(np.exp(-np.abs(x))), d, np.abs(d)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _elu_family(alpha, scale):
    def truth(x):
        neg = x <= 0
        v = scale * np.where(neg, alpha * np.expm1(np.minimum(x, 0)), x)
        d = scale * np.where(neg, alpha * np.exp(np.minimum(x, 0)), 1.0)
        return v, d, np.abs(d)

    return truth


CASES = {
    "elu": (F.elu, _elu_family(1.0, 1.0)),
    "elu_alpha": (lambda t: F.elu(t, alpha=0.37), _elu_family(0.37, 1.0)),
    "selu": (F.selu, _elu_family(_SELU_ALPHA, _SELU_SCALE)),
    "celu": (F.celu, _elu_family(1.0, 1.0)),
    "sigmoid": (F.sigmoid, _sigmoid),
    "silu": (F.silu, _silu),
    "softplus": (F.softplus, _softplus),
    "logsigmoid": (F.logsigmoid, _logsigmoid),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_float32_within_two_ulps_of_float64(name):
    f, truth = CASES[name]
    x = _sweep()
    want = truth(x.astype(np.float64))[0]
    err = _ulps(f(fg.tensor(x)).numpy(), want)
    worst = int(np.argmax(err))
    assert err[worst] <= 2.0, f"{err[worst]} ulp at {x[worst]!r}"


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("weighted", [False, True])
def test_float32_gradient_matches_float64(name, weighted):
    f, truth = CASES[name]
    x = _sweep()[::5]
    w = np.cos(np.arange(x.size)).astype(np.float32) if weighted else np.ones_like(x)
    t = fg.tensor(x, requires_grad=True)
    y = f(t)
    (y * fg.tensor(w)).sum().backward() if weighted else y.sum().backward()
    _, d, scale = truth(x.astype(np.float64))
    want = w * d
    # terms that cancel where f' crosses zero: a few float32 ulps of their size, absolutely
    tol = 4 * np.abs(want) * 2.0**-24 + np.abs(w) * scale * 2.0**-22 + 2.0**-148
    bad = np.abs(t.grad.numpy().astype(np.float64) - want) > tol
    assert not bad.any(), f"{name}: first bad x {x[bad][:5]}"


def test_float32_silu_special_values():
    x = np.array([-np.inf, np.inf, np.nan, -0.0, 0.0, -200.0, 1e-45], dtype=np.float32)
    y = F.silu(fg.tensor(x)).numpy()
    assert np.isnan(y[0]) and np.isnan(y[2])  # -inf · sigmoid(-inf) = -inf · 0
    assert y[1] == np.inf
    assert y[3] == 0 and np.signbit(y[3]) and y[4] == 0 and not np.signbit(y[4])
    assert y[5] == 0 and np.signbit(y[5])
    t = fg.tensor(x, requires_grad=True)
    F.silu(t).sum().backward()
    g = t.grad.numpy()
    assert np.isnan(g[:3]).all()  # inf · 0 in s (1 + x (1 - s))
    assert g[3] == 0.5 and g[4] == 0.5 and g[5] == 0


def test_float32_sigmoid_special_values():
    x = np.array([-np.inf, np.inf, np.nan, -0.0, 0.0, -200.0, 200.0, -100.0, -88.0, 17.0])
    x = x.astype(np.float32)
    y = F.sigmoid(fg.tensor(x)).numpy()
    np.testing.assert_array_equal(y[:7], [0, 1, np.nan, 0.5, 0.5, 0, 1])
    # e^-100 and e^-88 are denormal floats; 1 - e^-17 is a float below 1
    assert _ulps(y[7:], _sigmoid64(x[7:].astype(np.float64))).max() <= 1.0
    assert y[9] < 1


def test_float32_softplus_logsigmoid_special_values():
    x = np.array([-np.inf, np.inf, np.nan, -0.0, 0.0, -200.0, 200.0, 20.0], dtype=np.float32)
    sp = F.softplus(fg.tensor(x)).numpy()
    ls = F.logsigmoid(fg.tensor(x)).numpy()
    ln2 = np.float32(np.log(2.0))
    np.testing.assert_array_equal(sp, [0, np.inf, np.nan, ln2, ln2, 0, 200, 20.0])
    assert sp[5] == 0  # e^-200 underflows
    np.testing.assert_array_equal(
        ls, [-np.inf, 0, np.nan, -ln2, -ln2, -200, 0, -np.float32(2.0611537e-09)]
    )
    for f, want in (
        (F.softplus, [0, 1, np.nan, 0.5, 0.5, 0, 1, 1]),
        (F.logsigmoid, [1, 0, np.nan, 0.5, 0.5, 1, 0, None]),
    ):
        t = fg.tensor(x, requires_grad=True)
        f(t).sum().backward()
        g = t.grad.numpy()
        np.testing.assert_array_equal(g[:7], want[:7])


def test_float32_elu_family_special_values():
    x = np.array([-np.inf, np.inf, np.nan, -0.0, 0.0, -200.0, 200.0], dtype=np.float32)
    for f, a, s in ((F.elu, 1.0, 1.0), (F.selu, _SELU_ALPHA, _SELU_SCALE), (F.celu, 1.0, 1.0)):
        y = f(fg.tensor(x)).numpy()
        sa = np.float32(a * s)
        np.testing.assert_array_equal(y, [-sa, np.inf, np.nan, 0, 0, -sa, np.float32(200 * s)])
        t = fg.tensor(x, requires_grad=True)
        f(t).sum().backward()
        np.testing.assert_array_equal(
            t.grad.numpy(), [0, np.float32(s), np.nan, sa, sa, 0, np.float32(s)]
        )


def test_float32_celu_other_alpha():
    # celu's input scale 1/alpha != 1 takes the float64-lane formula
    x = np.random.default_rng(8).normal(scale=3.0, size=4096).astype(np.float32)
    xd = x.astype(np.float64)
    want = np.where(xd > 0, xd, 0.7 * np.expm1(np.minimum(xd, 0) / 0.7))
    assert _ulps(F.celu(fg.tensor(x), alpha=0.7).numpy(), want).max() <= 2.0


def test_float32_softplus_other_beta_and_threshold():
    # beta != 1 and thresholds float32 cannot hold take the float64-lane formula: same results
    x = np.random.default_rng(9).normal(scale=6.0, size=4096).astype(np.float32)
    xd = x.astype(np.float64)
    for beta, threshold in ((2.0, 20.0), (1.0, 10.0), (0.5, 5.1)):
        bx = xd * beta
        want = np.where(
            bx > threshold, xd, (np.maximum(bx, 0) + np.log1p(np.exp(-np.abs(bx)))) / beta
        )
        got = F.softplus(fg.tensor(x), beta=beta, threshold=threshold).numpy()
        assert _ulps(got, want).max() <= 2.0


@pytest.mark.parametrize("name", sorted(CASES))
def test_float32_matches_torch(name):
    torch = pytest.importorskip("torch")
    if name == "elu_alpha":
        return
    x = np.random.default_rng(3).normal(scale=4.0, size=(64, 50)).astype(np.float32)
    g = np.random.default_rng(4).normal(size=x.shape).astype(np.float32)
    a = fg.tensor(x, requires_grad=True)
    b = torch.tensor(x, requires_grad=True)
    ya, yb = getattr(F, name)(a), getattr(torch.nn.functional, name)(b)
    np.testing.assert_allclose(ya.detach().numpy(), yb.detach().numpy(), rtol=1e-5, atol=1e-6)
    ya.backward(fg.tensor(g))
    yb.backward(torch.tensor(g))
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", sorted(CASES))
def test_float32_same_at_any_thread_count(name):
    f, _ = CASES[name]
    x = _sweep()[:300_000]
    before = fg.get_num_threads()
    out = []
    try:
        for n in (1, 2):
            fg.set_num_threads(n)
            t = fg.tensor(x, requires_grad=True)
            y = f(t)
            (y * y).sum().backward()
            out.append((y.detach().numpy(), t.grad.numpy()))
    finally:
        fg.set_num_threads(before)
    for a, b in zip(out[0], out[1]):
        np.testing.assert_array_equal(a, b)


# ----- softmax and log_softmax rows (float32 lanes) ---------------------------------------------


def _rows_truth(x: np.ndarray, dim: int):
    """float64 softmax and log-softmax of float32 `x`, from z = x - max rounded to float32 as
    every float32 kernel (torch's too) forms it, so only the kernel's own error is measured."""
    z = (x - x.max(dim, keepdims=True)).astype(np.float64)
    e = np.exp(z)
    s = e.sum(dim, keepdims=True)
    return e / s, z - np.log(s), np.abs(z) + np.abs(np.log(s))


@pytest.mark.parametrize(
    "shape,scale,dim",
    [
        ((256, 1024), 3.0, -1),
        ((64, 1000), 30.0, -1),
        ((3, 300_001), 2.0, -1),
        ((1000, 7), 50.0, -1),
        ((8, 33, 16), 5.0, 1),
    ],
)
def test_float32_softmax_rows_match_float64(shape, scale, dim):
    x = (np.random.default_rng(21).standard_normal(shape) * scale).astype(np.float32)
    sm, lsm, size = _rows_truth(x, dim)
    got = fg.tensor(x).softmax(dim).numpy()
    # e^z within an ulp, then one reciprocal and one product: 3 ulp (torch's kernel: 7.5 here)
    assert _ulps(got, sm).max() <= 3.0
    got = fg.tensor(x).log_softmax(dim).numpy().astype(np.float64)
    # z - ln Σ in float32: 2 ulp of the result plus the rounding of its two terms, plus
    # 2^-50 for Σ (>= 1) rounded in float64 before its logarithm (the truth's Σ is too)
    tol = 2 * np.spacing(np.abs(lsm).astype(np.float32)) + size * 2.0**-24 + 2.0**-50
    assert (np.abs(got - lsm) <= tol).all()


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
def test_float32_softmax_rows_gradient_matches_float64(log, weighted):
    x = (np.random.default_rng(22).standard_normal((64, 1000)) * 4).astype(np.float32)
    w = np.random.default_rng(23).standard_normal(x.shape).astype(np.float32)
    t = fg.tensor(x, requires_grad=True)
    y = t.log_softmax(-1) if log else t.softmax(-1)
    (y * fg.tensor(w)).sum().backward() if weighted else y.sum().backward()
    g = w.astype(np.float64) if weighted else np.ones(x.shape)
    sm, _, _ = _rows_truth(x, -1)
    if log:
        want = g - sm * g.sum(-1, keepdims=True)
        size = np.abs(g) + sm * np.abs(g).sum(-1, keepdims=True)
    else:
        dot = (g * sm).sum(-1, keepdims=True)
        want = sm * (g - dot)
        # Σ |g y| bounds the dot product's rounding (float32 partial sums)
        size = sm * (np.abs(g) + (np.abs(g) * sm).sum(-1, keepdims=True))
    # a few float32 roundings of the terms' size (they cancel: the sum's gradient is 0)
    assert (np.abs(t.grad.numpy() - want) <= 8 * size * 2.0**-24 + 2.0**-140).all()


def test_float32_softmax_rows_special_values():
    inf, nan = np.inf, np.nan
    x = np.array(
        [
            [-inf, 0.0, 1.0, 0.5],
            [-inf] * 4,
            [inf, 0.0, 1.0, 2.0],
            [nan, 0.0, 1.0, 2.0],
            [0.0, -100.0, -104.5, -200.0],
        ],
        dtype=np.float32,
    )
    y = fg.tensor(x).softmax(-1).numpy()
    e = np.exp(np.array([-np.inf, -1.0, 0.0, -0.5]))
    np.testing.assert_allclose(y[0], e / e.sum(), rtol=3e-7)
    assert np.isnan(y[1:4]).all()  # all -inf, +inf (inf - inf), NaN: as torch
    # e^-100 is a denormal, e^-104.5 rounds to 0
    assert y[4, 0] == 1 and y[4, 1] == np.float32(np.exp(-100.0)) and y[4, 2] == 0 and y[4, 3] == 0
    ly = fg.tensor(x).log_softmax(-1).numpy()
    assert ly[0, 0] == -inf and np.isnan(ly[1:4]).all() and ly[4, 3] == -200


def test_float32_softmax_rows_match_torch():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(24).normal(scale=5.0, size=(32, 777)).astype(np.float32)
    x[0, :5] = -np.inf
    g = np.random.default_rng(25).normal(size=x.shape).astype(np.float32)
    for name in ("softmax", "log_softmax"):
        a = fg.tensor(x, requires_grad=True)
        b = torch.tensor(x, requires_grad=True)
        ya, yb = getattr(a, name)(-1), getattr(b, name)(-1)
        np.testing.assert_allclose(ya.detach().numpy(), yb.detach().numpy(), rtol=2e-6, atol=1e-7)
        ya.backward(fg.tensor(g))
        yb.backward(torch.tensor(g))
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_float32_softmax_rows_same_at_any_thread_count():
    x = np.random.default_rng(26).normal(scale=3.0, size=(300, 1024)).astype(np.float32)
    w = np.random.default_rng(27).normal(size=x.shape).astype(np.float32)
    before = fg.get_num_threads()
    out = []
    try:
        for n in (1, 2):
            fg.set_num_threads(n)
            t = fg.tensor(x, requires_grad=True)
            y = t.softmax(-1)
            (y * fg.tensor(w) + t.log_softmax(-1) * fg.tensor(w)).sum().backward()
            out.append((y.detach().numpy(), t.grad.numpy()))
    finally:
        fg.set_num_threads(before)
    for a, b in zip(out[0], out[1]):
        np.testing.assert_array_equal(a, b)
