"""embedding_bag at the benchmark's size (parallel bags forward, table rows split among threads
backward) against a NumPy closed form and torch, bitwise the same at 1 and 2 threads."""

from __future__ import annotations

from typing import Any

import ferrograd as fg
import numpy as np
import pytest


def _numpy_bags(w: np.ndarray, g: np.ndarray, idx: np.ndarray, offs: np.ndarray, mode: str):
    """Output and weight gradient of sum(out * g), bag by bag in float64."""
    ends = list(offs[1:]) + [len(idx)]
    out = np.zeros((len(offs), w.shape[1]))
    gw = np.zeros(w.shape)
    for b, (s, e) in enumerate(zip(offs, ends)):
        rows = idx[s:e]
        scale = 1.0 / max(len(rows), 1) if mode == "mean" else 1.0
        out[b] = w[rows].sum(axis=0) * scale
        np.add.at(gw, rows, g[b] * scale)
    return out, gw


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_large_bags_match_numpy_at_any_thread_count(mode: str) -> None:
    rng = np.random.default_rng(4)
    w0 = rng.standard_normal((2000, 96))
    idx = rng.integers(0, 2000, size=3000 * 7)
    offs = np.sort(rng.choice(np.arange(1, len(idx)), size=2999, replace=False))
    offs = np.concatenate([[0], offs])
    g0 = rng.standard_normal((len(offs), 96))
    want_out, want_gw = _numpy_bags(w0, g0, idx, offs, mode)
    before = fg.get_num_threads()
    got = []
    try:
        for threads in (1, 2):
            fg.set_num_threads(threads)
            w = fg.tensor(w0).requires_grad_()
            out = fg.nn.functional.embedding_bag(fg.tensor(idx), w, fg.tensor(offs), mode=mode)
            out.backward(fg.tensor(g0))
            out = out.detach()
            np.testing.assert_allclose(out.numpy(), want_out, rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(w.grad.numpy(), want_gw, rtol=1e-12, atol=1e-12)
            got.append((out.numpy(), w.grad.numpy()))
    finally:
        fg.set_num_threads(before)
    np.testing.assert_array_equal(got[0][0], got[1][0])
    np.testing.assert_array_equal(got[0][1], got[1][1])


@pytest.fixture
def torch() -> Any:
    return pytest.importorskip("torch")


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_benchmark_shape_matches_torch(torch: Any, mode: str) -> None:
    rng = np.random.default_rng(11)
    w0 = rng.standard_normal((10_000, 128)).astype(np.float32)
    g0 = rng.standard_normal((4096, 128)).astype(np.float32)
    i0 = rng.integers(0, 10_000, size=4096 * 20)
    o0 = np.arange(0, 4096 * 20, 20)
    results = []
    for lib in (fg, torch):
        w = lib.tensor(w0).requires_grad_()
        out = lib.nn.functional.embedding_bag(lib.tensor(i0), w, lib.tensor(o0), mode=mode)
        out.backward(lib.tensor(g0))
        results.append((out.detach().numpy(), w.grad.numpy()))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-5, atol=1e-5)
