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
    # ulp of the exact value in float32, denormal spacing below the normal range
    ulp = np.maximum(np.spacing(np.abs(want).astype(np.float32)).astype(np.float64), 2.0**-149)
    return np.abs(got.astype(np.float64) - want) / ulp


# name -> (float64 value, float64 derivative and the size of its cancelling terms)
def _silu(x):
    s = _sigmoid64(x)
    t = x * s * (1 - s)
    return x * s, s + t, np.abs(s) + np.abs(t)


CASES = {"silu": (F.silu, _silu)}


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


@pytest.mark.parametrize("name", sorted(CASES))
def test_float32_matches_torch(name):
    torch = pytest.importorskip("torch")
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
