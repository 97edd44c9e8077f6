"""contiguous() of permuted, transposed, sliced and expanded views (the tiled copy kernel)
against NumPy's ascontiguousarray of the same view, for every dtype and thread count."""

from __future__ import annotations

from typing import Any

import ferrograd as fg
import numpy as np
import pytest

DTYPES = [np.float32, np.float64, np.int64, np.bool_]


@pytest.fixture(params=[1, 2], ids=["1thread", "2threads"])
def threads(request: Any) -> Any:
    before = fg.get_num_threads()
    fg.set_num_threads(request.param)
    yield request.param
    fg.set_num_threads(before)


def _random_case(rng: np.random.Generator, trial: int) -> tuple:
    nd = int(rng.integers(1, 6))
    if trial % 10 == 0:
        shape = tuple(int(v) for v in rng.integers(0, 4, nd))  # size-0 and size-1 dims
    elif trial % 10 == 1:
        shape = tuple(int(v) for v in rng.integers(20, 90, min(nd, 3)))  # tiled and parallel
    else:
        shape = tuple(int(v) for v in rng.integers(1, 9, nd))
    steps = tuple(
        slice(int(rng.integers(0, max(1, s))), None, int(rng.integers(1, 4)))
        if rng.random() < 0.4
        else slice(None)
        for s in shape
    )
    perm = tuple(int(v) for v in rng.permutation(len(shape)))
    return shape, steps, perm


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_contiguous_of_random_views_matches_numpy(dtype: Any, threads: int) -> None:
    rng = np.random.default_rng(123)
    for trial in range(300):
        shape, steps, perm = _random_case(rng, trial)
        a = (rng.standard_normal(shape) * 10).astype(dtype)
        view = fg.tensor(a)[steps].permute(*perm)
        want = np.ascontiguousarray(a[steps].transpose(perm))
        got = view.contiguous()
        assert got.is_contiguous()
        np.testing.assert_array_equal(got.numpy(), want, err_msg=str((shape, steps, perm)))


@pytest.mark.parametrize("shape", [(512, 784), (784, 512), (33, 65), (4099, 3), (3, 4099)])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_transposed_matrix_copies_match_numpy(shape: tuple, dtype: Any, threads: int) -> None:
    a = (np.random.default_rng(5).standard_normal(shape) * 10).astype(dtype)
    t = fg.tensor(a)
    for view, want in (
        (t.t(), a.T),
        (t[1:, 2:].t(), a[1:, 2:].T),
        (t[::2, 1::3].t(), a[::2, 1::3].T),
    ):
        np.testing.assert_array_equal(view.contiguous().numpy(), np.ascontiguousarray(want))


def test_expanded_views_copy_their_repeated_elements(threads: int) -> None:
    a = np.arange(6, dtype=np.float32).reshape(3, 1, 2)
    e = fg.tensor(a).expand(3, 500, 2)
    want = np.broadcast_to(a, (3, 500, 2))
    np.testing.assert_array_equal(e.contiguous().numpy(), want)
    np.testing.assert_array_equal(
        e.permute(2, 1, 0).contiguous().numpy(), np.ascontiguousarray(want.transpose(2, 1, 0))
    )


def test_transposed_gradient_lands_in_grad_contiguously(threads: int) -> None:
    # w.t() in a matmul leaves a transposed gradient that is copied into a contiguous .grad.
    rng = np.random.default_rng(2)
    w0, x0 = rng.standard_normal((300, 200)), rng.standard_normal((64, 200))
    w = fg.tensor(w0).requires_grad_()
    (fg.tensor(x0) @ w.t()).sum().backward()
    assert w.grad.is_contiguous()
    np.testing.assert_allclose(w.grad.numpy(), np.ones((64, 300)).T @ x0, rtol=1e-12)


@pytest.mark.parametrize("shape,r", [((16, 256, 32, 32), 2), ((2, 18, 5, 7), 3), ((4, 3, 8, 8), 1)])
def test_pixel_shuffle_matches_numpy_reshape_transpose(shape: tuple, r: int, threads: int) -> None:
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    b, c, h, w = shape
    want = (
        x.reshape(b, c // (r * r), r, r, h, w)
        .transpose(0, 1, 4, 2, 5, 3)
        .reshape(b, c // (r * r), h * r, w * r)
    )
    y = fg.nn.functional.pixel_shuffle(fg.tensor(x), r)
    np.testing.assert_array_equal(y.numpy(), want)
    np.testing.assert_array_equal(fg.nn.functional.pixel_unshuffle(y, r).numpy(), x)
