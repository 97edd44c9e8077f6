"""layer_norm and cross_entropy at row lengths the op tables never reach: longer than one
summation block (256 elements), with remainders, and large enough for the row kernels to be
shared among threads (the cross_entropy backward reuses the forward's exponentials there).

Without torch: float32 against float64 and bitwise equality across thread counts. With torch:
values and gradients against torch's, float64 and float32.
"""

from __future__ import annotations

from typing import Any, List, Optional

import ferrograd as fg
import ferrograd.nn.functional as F
import numpy as np
import pytest


@pytest.fixture
def torch() -> Any:
    return pytest.importorskip("torch")


def _rand(*shape: int, seed: int = 0, scale: float = 1.0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape) * scale


def _targets(n: int, c: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, c, size=n)


def _ce_grads(lib: Any, x0: np.ndarray, t0: np.ndarray, dtype: str, **kw: Any) -> List[Any]:
    x = lib.tensor(x0.astype(dtype)).requires_grad_(True)
    w = kw.pop("weight", None)
    if w is not None:
        w = lib.tensor(w.astype(dtype))
    y = lib.nn.functional.cross_entropy(x, lib.tensor(t0), weight=w, **kw)
    # a 0-d array, not a NumPy scalar: fg.tensor(np.float64(v)) is float32 (torch: float64)
    g = lib.tensor(np.asarray(_rand(*y.shape, seed=5), dtype=dtype))
    y.backward(g)
    return [y.detach().numpy().astype(np.float64), x.grad.numpy().astype(np.float64)]


def _ln_grads(lib: Any, x0: np.ndarray, dtype: str, affine: bool) -> List[Any]:
    n = x0.shape[-1]
    x = lib.tensor(x0.astype(dtype)).requires_grad_(True)
    w = b = None
    if affine:
        w = lib.tensor(_rand(n, seed=3).astype(dtype)).requires_grad_(True)
        b = lib.tensor(_rand(n, seed=4).astype(dtype)).requires_grad_(True)
    y = lib.nn.functional.layer_norm(x, (n,), w, b)
    y.backward(lib.tensor(_rand(*x0.shape, seed=6).astype(dtype)))
    out = [y.detach().numpy(), x.grad.numpy()]
    if affine:
        out += [w.grad.numpy(), b.grad.numpy()]
    return [o.astype(np.float64) for o in out]


CE_CASES = [
    dict(label_smoothing=0.1),
    dict(reduction="sum", ignore_index=2),
    dict(reduction="none", label_smoothing=0.25, weight="w"),
    dict(weight="w", ignore_index=0),
]


def _ce_kwargs(case: dict, c: int) -> dict:
    kw = dict(case)
    if kw.get("weight") == "w":
        kw["weight"] = np.abs(_rand(c, seed=9)) + 0.1
    return kw


@pytest.mark.parametrize("c", [1000, 300, 37])
@pytest.mark.parametrize("case", range(len(CE_CASES)))
def test_cross_entropy_float32_agrees_with_float64(c: int, case: int) -> None:
    x0, t0 = _rand(64, c, scale=3.0), _targets(64, c)
    t0[:3] = [0, 2, 2]
    f64 = _ce_grads(fg, x0, t0, "float64", **_ce_kwargs(CE_CASES[case], c))
    f32 = _ce_grads(fg, x0, t0, "float32", **_ce_kwargs(CE_CASES[case], c))
    for a, b in zip(f32, f64):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5 * np.abs(b).max())


@pytest.mark.parametrize("c", [1000, 300, 37])
@pytest.mark.parametrize("case", range(len(CE_CASES)))
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_cross_entropy_long_rows_match_torch(torch: Any, c: int, case: int, dtype: str) -> None:
    x0, t0 = _rand(64, c, scale=3.0), _targets(64, c)
    t0[:3] = [0, 2, 2]
    ours = _ce_grads(fg, x0, t0, dtype, **_ce_kwargs(CE_CASES[case], c))
    theirs = _ce_grads(torch, x0, t0, dtype, **_ce_kwargs(CE_CASES[case], c))
    tol = 1e-12 if dtype == "float64" else 2e-5
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol * max(np.abs(b).max(), 1.0))


def test_cross_entropy_infinite_logits_match_torch(torch: Any) -> None:
    x0 = _rand(8, 300, scale=3.0)
    x0[1, 5] = -np.inf
    x0[2, 7] = np.inf
    x0[3, 9] = np.nan
    t0 = _targets(8, 300)
    t0[1] = 6
    for dtype in ["float32", "float64"]:
        ours = _ce_grads(fg, x0, t0, dtype, reduction="none", label_smoothing=0.1)
        theirs = _ce_grads(torch, x0, t0, dtype, reduction="none", label_smoothing=0.1)
        for a, b in zip(ours, theirs):
            np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-5, equal_nan=True)


@pytest.mark.parametrize("width", [1000, 300, 257, 31])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_float32_agrees_with_float64(width: int, affine: bool) -> None:
    x0 = _rand(96, width, scale=2.0) + 3.0
    f64 = _ln_grads(fg, x0, "float64", affine)
    f32 = _ln_grads(fg, x0, "float32", affine)
    for a, b in zip(f32, f64):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=2e-5 * np.abs(b).max())


@pytest.mark.parametrize("width", [1000, 300, 31])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_layer_norm_long_rows_match_torch(torch: Any, width: int, dtype: str) -> None:
    x0 = _rand(96, width, scale=2.0) + 3.0
    ours = _ln_grads(fg, x0, dtype, True)
    theirs = _ln_grads(torch, x0, dtype, True)
    tol = 1e-11 if dtype == "float64" else 5e-5
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol * max(np.abs(b).max(), 1.0))


def _step(threads: int, x0: np.ndarray, t0: np.ndarray) -> List[Optional[np.ndarray]]:
    fg.set_num_threads(threads)
    x = fg.tensor(x0.astype("float32")).requires_grad_(True)
    w = fg.tensor(_rand(x0.shape[-1], seed=2).astype("float32")).requires_grad_(True)
    y = F.layer_norm(x, (x0.shape[-1],), w, None)
    loss = F.cross_entropy(y, fg.tensor(t0), label_smoothing=0.1)
    loss.backward()
    return [loss.detach().numpy(), x.grad.numpy(), w.grad.numpy()]


def test_results_are_bitwise_equal_at_any_thread_count() -> None:
    x0, t0 = _rand(128, 700), _targets(128, 700)
    before = fg.get_num_threads()
    try:
        runs = [_step(n, x0, t0) for n in (1, 2, 3)]
    finally:
        fg.set_num_threads(before)
    for other in runs[1:]:
        for a, b in zip(runs[0], other):
            assert np.array_equal(a, b)
