"""The sum kernels' shared paths (columns summed down the rows in bands of columns, trailing
runs in blocks of rows): float32 within a few ulp of the rows' float64 sum, the same bits at 1
and 2 threads, and the same as the sequential row order on the column path."""

from __future__ import annotations

from typing import Any, Tuple

import ferrograd as fg
import numpy as np
import pytest

RNG = np.random.default_rng(0)


def _at(threads: int, f: Any) -> Any:
    before = fg.get_num_threads()
    fg.set_num_threads(threads)
    try:
        return f()
    finally:
        fg.set_num_threads(before)


@pytest.mark.parametrize(
    "shape, dims",
    [
        ((1600, 512), (0,)),  # a bias gradient: bands of columns
        ((40, 40, 200), (0, 1)),  # two leading dims, an uneven last band
        ((3000, 70), (0,)),  # one band: too few columns to share
        ((1600, 512), (1,)),  # trailing runs in blocks of rows
        ((8, 64, 33, 33), (0, 2, 3)),  # trailing runs, then the leading dim
    ],
)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_sums_over_leading_or_trailing_dims(
    shape: Tuple[int, ...], dims: Tuple[int, ...], dtype: str
) -> None:
    a = RNG.standard_normal(shape).astype(dtype)
    t = fg.tensor(a)
    one = _at(1, lambda: t.sum(dims).numpy())
    two = _at(2, lambda: t.sum(dims).numpy())
    np.testing.assert_array_equal(one, two)
    ref = a.astype(np.float64).sum(axis=dims)
    n = a.size // ref.size
    eps = np.finfo(dtype).eps
    # Sequential or pairwise, the error stays within n ulp of the sum of magnitudes.
    bound = n * eps * np.abs(a.astype(np.float64)).sum(axis=dims)
    assert np.all(np.abs(one - ref) <= bound)
    if dims == tuple(range(len(dims))) and dtype == "float32":
        # The column path adds the rows in order, as a row-by-row loop does.
        flat = a.reshape(-1, ref.size)
        acc = np.zeros(ref.size, dtype=np.float32)
        for row in flat:
            acc += row
        np.testing.assert_array_equal(one.reshape(-1), acc)


def test_bias_gradient_of_linear_uses_the_column_sum() -> None:
    x = fg.tensor(RNG.standard_normal((1600, 64)).astype(np.float32))
    w = fg.tensor(RNG.standard_normal((512, 64)).astype(np.float32), requires_grad=True)
    b = fg.tensor(np.zeros(512, dtype=np.float32), requires_grad=True)
    g = RNG.standard_normal((1600, 512)).astype(np.float32)
    fg.nn.functional.linear(x, w, b).backward(fg.tensor(g))
    np.testing.assert_allclose(b.grad.numpy(), g.astype(np.float64).sum(0), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize(
    "shape,dims,keepdim",
    [
        ((2000, 1), (0,), False),  # Linear(n, 1)'s bias gradient
        ((2000, 1), (0,), True),
        ((1, 5, 1, 3), (0, 2), False),
        ((1, 5, 1, 3), (1,), True),
        ((3, 1, 4), (1,), False),  # only size-1 dims reduced: the values themselves
        ((1, 1), (0, 1), False),
        ((64, 1, 33), (0, 2), False),
    ],
)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_sums_with_size_one_dims_match_numpy(shape, dims, keepdim, dtype) -> None:
    # Size-1 dims are dropped before summing; values against NumPy's float64 (exact for int64).
    a = (RNG.standard_normal(shape) * 100).astype(dtype)
    got = fg.tensor(a).sum(dims, keepdim=keepdim).numpy()
    want = a.astype(np.float64).sum(axis=dims, keepdims=keepdim)
    assert got.shape == want.shape
    if dtype == "int64":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == "float32" else 1e-12)


def test_sum_of_an_expanded_column_with_size_one_dims() -> None:
    # A stride-0 dim (scaled once) together with a size-1 dim.
    t = fg.tensor([[2.5], [1.0]]).expand(2, 7)[:, None, :]
    assert t.shape == (2, 1, 7)
    np.testing.assert_allclose(t.sum((1, 2)).numpy(), [17.5, 7.0])
    np.testing.assert_allclose(t.sum(0).numpy(), np.full((1, 7), 3.5))


@pytest.mark.parametrize("shape", [(2000, 3), (2000, 10), (64, 10), (4096, 63), (3, 70, 5)])
def test_narrow_column_sums_follow_row_order(shape) -> None:
    # Fewer than 64 columns: one band, each column summed down the rows in row order (the bits
    # of the sequential float32 sum), at 1 and 2 threads.
    a = RNG.standard_normal(shape).astype(np.float32)
    rows = a.reshape(shape[0], -1)
    want = np.zeros(rows.shape[1], np.float32)
    for r in rows:
        want = want + r
    for threads in (1, 2):
        got = _at(threads, lambda: fg.tensor(a).sum(0).numpy())
        np.testing.assert_array_equal(got.reshape(-1), want)


@pytest.mark.parametrize(
    "shape,dims",
    [((64, 100, 3), (1,)), ((8, 512, 64), (1,)), ((3, 4, 5, 6), (1, 2)), ((5, 70, 130), (1,))],
)
def test_middle_dim_sums_follow_row_order(shape, dims) -> None:
    # Consecutive middle dims: per outer block, each column summed down its rows in row order
    # (the sequential float32 bits), the same at 1 and 2 threads.
    a = RNG.standard_normal(shape).astype(np.float32)
    first, end = dims[0], dims[-1] + 1
    outer = int(np.prod(shape[:first]))
    rows = int(np.prod(shape[first:end]))
    blocks = a.reshape(outer, rows, -1)
    want = np.zeros((outer, blocks.shape[2]), np.float32)
    for r in range(rows):
        want = want + blocks[:, r, :]
    for threads in (1, 2):
        got = _at(threads, lambda: fg.tensor(a).sum(dims).numpy())
        assert got.shape == shape[:first] + shape[end:]
        np.testing.assert_array_equal(got.reshape(outer, -1), want)
