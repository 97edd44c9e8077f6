"""matmul through the SIMD kernel, seen from Python: values against a float64 NumPy product (and
torch when importable), gradients against finite differences, layouts the kernel reads in place
(transposed, sliced, broadcast batches), empty shapes, thread-count independence and huge outputs.
"""

import ferrograd as fg
import numpy as np
import numpy.testing as npt
import pytest

try:
    import torch
except ImportError:  # the torch comparisons are skipped; NumPy float64 stays the truth
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not importable")


def _rand(rng, *shape):
    return rng.standard_normal(shape)


def _views(lib, arr, how):
    """The same logical matrix as a plain, transposed or strided view of a bigger buffer."""
    t = lib.tensor(arr)
    if how == "plain":
        return t
    if how == "transposed":
        return lib.tensor(np.ascontiguousarray(np.swapaxes(arr, -1, -2))).transpose(-1, -2)
    # Every other column of a wider buffer, starting at an offset.
    wide = np.zeros(arr.shape[:-1] + (2 * arr.shape[-1] + 1,))
    wide[..., 1::2] = arr
    return lib.tensor(wide)[..., 1::2]


SHAPES = [
    ((5,), (5,)),
    ((5,), (5, 3)),
    ((4, 5), (5,)),
    ((3, 4, 5), (5,)),
    ((5,), (2, 5, 3)),
    ((4, 5), (5, 3)),
    ((2, 4, 5), (5, 3)),
    ((4, 5), (2, 5, 3)),
    ((2, 1, 4, 5), (3, 5, 6)),
    ((130, 70), (70, 150)),  # above the threading threshold
    ((3, 90, 80), (1, 80, 100)),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("how", ["plain", "transposed", "strided"])
@pytest.mark.parametrize("sa,sb", SHAPES)
def test_forward_matches_float64_numpy(sa, sb, how, dtype, rng):
    a, b = _rand(rng, *sa), _rand(rng, *sb)
    ta = _views(fg, a.astype(dtype), how if len(sa) > 1 else "plain")
    tb = _views(fg, b.astype(dtype), how if len(sb) > 1 else "plain")
    got = (ta @ tb).numpy()
    want = np.matmul(a.astype(dtype).astype(np.float64), b.astype(dtype).astype(np.float64))
    assert got.shape == want.shape
    tol = 1e-5 if dtype == "float32" else 1e-12
    npt.assert_allclose(got, want, rtol=tol, atol=tol * np.sqrt(sa[-1]))


@needs_torch
@pytest.mark.parametrize("sa,sb", SHAPES)
def test_forward_and_grads_match_torch(sa, sb, rng):
    a, b = _rand(rng, *sa), _rand(rng, *sb)
    out_shape = np.matmul(a, b).shape
    w = _rand(rng, *out_shape)
    grads = {}
    for lib in (fg, torch):
        ta = lib.tensor(a, dtype=lib.float64).requires_grad_()
        tb = lib.tensor(b, dtype=lib.float64).requires_grad_()
        out = ta @ tb
        (out * lib.tensor(w, dtype=lib.float64)).sum().backward()
        grads[lib] = [out.detach().numpy(), ta.grad.numpy(), tb.grad.numpy()]
    for x, y in zip(grads[fg], grads[torch]):
        npt.assert_allclose(x, y, rtol=1e-12, atol=1e-12)


def test_gradcheck_and_gradgradcheck_through_views(rng):
    a = fg.tensor(_rand(rng, 2, 5, 3)).transpose(1, 2).requires_grad_()
    b = fg.tensor(_rand(rng, 4, 5)).t().requires_grad_()
    assert fg.autograd.gradcheck(lambda x, y: x @ y, (a, b))
    assert fg.autograd.gradgradcheck(lambda x, y: x @ y, (a, b))


@pytest.mark.parametrize("needs", [(True, False), (False, True)])
def test_only_inputs_that_need_it_get_a_gradient(needs, rng):
    a = fg.tensor(_rand(rng, 6, 4)).requires_grad_(needs[0])
    b = fg.tensor(_rand(rng, 4, 3)).requires_grad_(needs[1])
    (a @ b).sum().backward()
    assert (a.grad is not None) == needs[0]
    assert (b.grad is not None) == needs[1]
    if needs[0]:
        npt.assert_allclose(a.grad.numpy(), np.ones((6, 3)) @ b.numpy().T, rtol=1e-12)
    else:
        npt.assert_allclose(b.grad.numpy(), a.numpy().T @ np.ones((6, 3)), rtol=1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_empty_dims(dtype):
    z = fg.zeros(3, 0, dtype=getattr(fg, dtype)) @ fg.zeros(0, 4, dtype=getattr(fg, dtype))
    assert z.shape == (3, 4)
    assert not z.numpy().any()
    assert (fg.zeros(2, 3, 0) @ fg.zeros(0, 5)).shape == (2, 3, 5)
    assert not (fg.zeros(2, 3, 0) @ fg.zeros(0, 5)).numpy().any()
    assert (fg.zeros(0, 4) @ fg.zeros(4, 5)).shape == (0, 5)
    assert (fg.zeros(3, 4) @ fg.zeros(4, 0)).shape == (3, 0)
    assert (fg.zeros(0) @ fg.zeros(0)).item() == 0.0


def _at_thread_counts(counts, f):
    """`f()` at each thread count, the configured count restored afterwards."""
    before = fg.get_num_threads()
    try:
        out = []
        for threads in counts:
            fg.set_num_threads(threads)
            out.append(f())
        return out
    finally:
        fg.set_num_threads(before)


def test_results_do_not_depend_on_thread_count(rng):
    a = fg.tensor(_rand(rng, 300, 257).astype(np.float32))
    b = fg.tensor(_rand(rng, 190, 257).astype(np.float32)).t()
    one, two = _at_thread_counts((1, 2), lambda: (a @ b).numpy())
    assert np.array_equal(one, two)


# `x @ W.T` (every linear's forward) with at most 512 rows runs on faer's kernel in 64-column
# bands (src/kernels/gemm.rs, DOT_LAYOUT_MAX_ROWS); 513 rows and a contiguous `b` take gemm's.
ROW_TIMES_TRANSPOSED = [
    ((), 1, 33, 70),
    ((), 8, 512, 130),
    ((), 32, 128, 512),
    ((2,), 37, 65, 200),
    ((3, 1), 2, 3, 129),
    ((), 512, 70, 64),
    ((), 513, 40, 70),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("batch,n,k,m", ROW_TIMES_TRANSPOSED)
def test_rows_times_transposed_match_float64_at_any_thread_count(batch, n, k, m, dtype, rng):
    a = _rand(rng, *batch, n, k).astype(dtype)
    w = _rand(rng, *batch, m, k).astype(dtype)
    want = np.matmul(a.astype(np.float64), np.swapaxes(w.astype(np.float64), -1, -2))
    ta, tw = fg.tensor(a), fg.tensor(w)
    got = _at_thread_counts((1, 2, 3), lambda: (ta @ tw.transpose(-1, -2)).numpy())
    tol = 1e-5 if dtype == "float32" else 1e-12
    npt.assert_allclose(got[0], want, rtol=tol, atol=tol * np.sqrt(k))
    assert np.array_equal(got[0], got[1]) and np.array_equal(got[0], got[2])


@pytest.mark.parametrize("k", [1, 2, 8, 15])
def test_short_reduction_into_big_output_at_any_thread_count(k, rng):
    # Below 16 products stay on one thread unless the output has 2^17 elements or more (a
    # weight gradient at a small batch: g.T @ x).
    g = _rand(rng, k, 600).astype(np.float32)
    x = _rand(rng, k, 300).astype(np.float32)
    want = g.astype(np.float64).T @ x.astype(np.float64)
    tg, tx = fg.tensor(g), fg.tensor(x)
    got = _at_thread_counts((1, 2, 3), lambda: (tg.t() @ tx).numpy())
    npt.assert_allclose(got[0], want, rtol=1e-5, atol=1e-5 * np.sqrt(k))
    assert np.array_equal(got[0], got[1]) and np.array_equal(got[0], got[2])


@pytest.mark.parametrize("n,k,m", [(64, 1000, 100), (96, 1000, 32), (96, 1000, 40)])
def test_cut_the_other_way_at_any_thread_count(n, k, m, rng):
    # Column bands of these would drop below gemm's "large" size (its k-blocking would change),
    # so they are cut into row bands, or the reverse (the tutorial's 64x1000 @ 1000x100); the
    # last shape cannot be cut either way and stays on one thread.
    a = _rand(rng, n, k).astype(np.float32)
    b = _rand(rng, k, m).astype(np.float32)
    want = a.astype(np.float64) @ b.astype(np.float64)
    ta, tb = fg.tensor(a), fg.tensor(b)
    got = _at_thread_counts((1, 2, 3), lambda: (ta @ tb).numpy())
    npt.assert_allclose(got[0], want, rtol=1e-5, atol=1e-5 * np.sqrt(k))
    assert np.array_equal(got[0], got[1]) and np.array_equal(got[0], got[2])


def test_huge_output_raises_instead_of_aborting():
    with pytest.raises(RuntimeError, match="can't allocate memory"):
        fg.ones(10**7, 1) @ fg.ones(1, 10**7)
    assert (fg.ones(2, 3) @ fg.ones(3, 2)).sum().item() == 12.0


def test_shape_errors_are_runtime_errors():
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        fg.ones(2, 3) @ fg.ones(4, 2)
    with pytest.raises(RuntimeError, match="broadcast"):
        fg.ones(2, 3, 4) @ fg.ones(3, 4, 2)
    with pytest.raises(RuntimeError, match="at least 1D"):
        fg.ones(()) @ fg.ones(3)
