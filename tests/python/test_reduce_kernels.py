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
