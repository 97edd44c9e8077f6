"""The float32 gelu kernel against float64 truth (math.erfc): a dense sweep in ulps, the
special values, and its gradient against the float64 closed form and torch."""

from __future__ import annotations

import math

import ferrograd as fg
import ferrograd.nn.functional as F
import numpy as np
import pytest


def _gelu64(v: float) -> float:
    return v * 0.5 * math.erfc(-v / math.sqrt(2.0))


def _grad64(v: float) -> float:
    return 0.5 * math.erfc(-v / math.sqrt(2.0)) + v * math.exp(-0.5 * v * v) / math.sqrt(
        2.0 * math.pi
    )


def _sweep() -> np.ndarray:
    """Every 1/64 on [-10, 10], every float near the kernel's splits (±1/2, ±3), random
    floats on [-16, 16] and over every magnitude."""
    rng = np.random.default_rng(7)
    parts = [np.arange(-640, 641) / 64.0]
    for c in (0.5, -0.5, 3.0, -3.0):
        b = np.array([c], dtype=np.float32).view(np.int32)[0]
        parts.append(np.arange(b - 2000, b + 2000, dtype=np.int32).view(np.float32))
    parts.append(rng.uniform(-16, 16, 200_000))
    bits = rng.integers(0, 2**32, 50_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    parts.append(bits[np.isfinite(bits)])
    return np.concatenate([p.astype(np.float32) for p in parts])


def test_float32_gelu_within_two_ulps_of_math_erfc():
    x = _sweep()
    got = F.gelu(fg.tensor(x)).numpy().astype(np.float64)
    want = np.array([_gelu64(float(v)) for v in x])
    # ulp of the exact value in float32, denormal spacing below the normal range
    ulp = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    err = np.abs(got - want) / np.maximum(ulp, 2.0**-149)
    worst = int(np.argmax(err))
    assert err[worst] <= 2.0, f"{err[worst]} ulp at {x[worst]!r}"


def test_float32_gelu_special_values():
    x = np.array([-np.inf, np.inf, np.nan, -0.0, 0.0, -20.0, 1e-45], dtype=np.float32)
    y = F.gelu(fg.tensor(x)).numpy()
    assert np.isnan(y[0]) and np.isnan(y[2])  # -inf · Φ(-inf) = -inf · 0
    assert y[1] == np.inf
    assert y[3] == 0 and np.signbit(y[3]) and y[4] == 0 and not np.signbit(y[4])
    assert y[5] == 0 and np.signbit(y[5])
    t = fg.tensor(x, requires_grad=True)
    F.gelu(t).sum().backward()
    g = t.grad.numpy()
    assert np.isnan(g[:3]).all()
    assert g[3] == 0.5 and g[4] == 0.5 and g[5] == 0


@pytest.mark.parametrize("weighted", [False, True])
def test_float32_gelu_gradient_matches_float64(weighted):
    x = _sweep()[::5]
    w = np.cos(np.arange(x.size)).astype(np.float32) if weighted else np.ones_like(x)
    t = fg.tensor(x, requires_grad=True)
    y = F.gelu(t)
    (y * fg.tensor(w)).sum().backward() if weighted else y.sum().backward()
    got = t.grad.numpy().astype(np.float64)
    want = w * np.array([_grad64(float(v)) for v in x])
    # Φ and x φ cancel near x = -0.75: a few float32 ulps of the terms' size, absolutely
    scale = np.abs(w) * (
        0.5 * np.abs(np.array([math.erfc(-v / math.sqrt(2.0)) for v in x.tolist()]))
        + np.abs(x) * np.exp(-0.5 * x.astype(np.float64) ** 2) / math.sqrt(2 * math.pi)
    )
    tol = 4 * np.abs(want) * 2.0**-24 + scale * 2.0**-22 + 2.0**-148
    assert np.all(np.abs(got - want) <= tol)


def test_float32_gelu_matches_torch():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(3).normal(scale=4.0, size=(64, 50)).astype(np.float32)
    g = np.random.default_rng(4).normal(size=x.shape).astype(np.float32)
    a = fg.tensor(x, requires_grad=True)
    b = torch.tensor(x, requires_grad=True)
    ya, yb = F.gelu(a), torch.nn.functional.gelu(b)
    # torch's float32 erf is less accurate in the tails: compare at the usual tolerance
    np.testing.assert_allclose(ya.detach().numpy(), yb.detach().numpy(), rtol=1e-5, atol=1e-6)
    ya.backward(fg.tensor(g))
    yb.backward(torch.tensor(g))
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-5, atol=1e-6)
