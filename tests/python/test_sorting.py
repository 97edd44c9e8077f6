"""Sorting, selection and counting ops against NumPy (values and indices across dims,
descending, NaN, empty tensors, ties and stability) and torch's errors for bad input. The
gradients are checked by the op table (optables/sort.py)."""

from __future__ import annotations

from typing import Any

import ferrograd as fg
import numpy as np
import pytest

RNG = np.random.default_rng(0)
FLOATS = ("float32", "float64")


def _t(a: Any, dtype: Any = None) -> Any:
    return fg.tensor(np.asarray(a), dtype=dtype)


def _ties(shape: Any) -> np.ndarray:
    """Small integers as floats: many ties, so stability shows."""
    return RNG.integers(0, 4, size=shape).astype(np.float64)


# ----- sort / argsort / msort ----------------------------------------------------------------


@pytest.mark.parametrize("dt", FLOATS + ("int64",))
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_stable_matches_numpy(dt: str, dim: int, descending: bool) -> None:
    a = _ties((3, 5, 4)).astype(dt)
    v, i = fg.sort(_t(a), dim=dim, descending=descending, stable=True)
    key = -a if descending else a
    idx = np.argsort(key, axis=dim, kind="stable")
    np.testing.assert_array_equal(i.numpy(), idx)
    np.testing.assert_array_equal(v.numpy(), np.take_along_axis(a, idx, axis=dim))
    assert v.dtype == getattr(fg, dt) and i.dtype == fg.int64
    np.testing.assert_array_equal(_t(a).argsort(dim, descending, stable=True).numpy(), idx)


def test_sort_nan_is_largest() -> None:
    a = np.array([[3.0, np.nan, -1.0, np.inf, np.nan, 0.0]])
    v, i = fg.tensor(a).sort()
    np.testing.assert_array_equal(i.numpy(), np.argsort(a, kind="stable"))  # NaN last in NumPy
    np.testing.assert_array_equal(v.numpy(), np.sort(a))
    v, i = fg.tensor(a).sort(descending=True, stable=True)
    np.testing.assert_array_equal(i.numpy(), [[1, 4, 3, 0, 5, 2]])


def test_sort_bool_empty_and_scalar() -> None:
    b = np.array([True, False, True, False])
    v, i = fg.tensor(b).sort(stable=True)
    np.testing.assert_array_equal(v.numpy(), np.sort(b))
    np.testing.assert_array_equal(i.numpy(), np.argsort(b, kind="stable"))
    v, i = fg.zeros(0, 3).sort(0)
    assert tuple(v.shape) == (0, 3) and tuple(i.shape) == (0, 3)
    v, i = fg.tensor(2.5).sort()
    assert v.item() == 2.5 and i.item() == 0 and v.dim() == 0


def test_msort_and_return_type() -> None:
    a = RNG.normal(size=(4, 3))
    np.testing.assert_array_equal(fg.msort(_t(a)).numpy(), np.sort(a, axis=0))
    r = fg.sort(_t(a))
    assert type(r).__name__ == "sort" and type(r).__module__ == "ferrograd.return_types"
    assert r.values is r[0] and r.indices is r[1]


# ----- topk / kthvalue -----------------------------------------------------------------------


@pytest.mark.parametrize("dt", FLOATS + ("int64",))
@pytest.mark.parametrize("largest", [True, False])
def test_topk_matches_partition(dt: str, largest: bool) -> None:
    a = RNG.permutation(60).reshape(3, 20).astype(dt)
    for k in (0, 1, 5, 20):
        v, i = fg.topk(_t(a), k, dim=1, largest=largest)
        srt = np.sort(a, axis=1)
        want = srt[:, ::-1][:, :k] if largest else srt[:, :k]
        np.testing.assert_array_equal(v.numpy(), want)
        np.testing.assert_array_equal(np.take_along_axis(a, i.numpy(), 1), want)
        # The k selected are the k beyond NumPy's partition point.
        if 0 < k < 20:
            part = np.partition(a, -k if largest else k - 1, axis=1)
            kth = part[:, -k] if largest else part[:, k - 1]
            np.testing.assert_array_equal(v.numpy()[:, -1], kth)


def test_topk_nan_counts_as_largest() -> None:
    v, i = fg.tensor([1.0, np.nan, 3.0]).topk(2)
    assert np.isnan(v[0].item()) and v[1].item() == 3.0
    np.testing.assert_array_equal(i.numpy(), [1, 2])


@pytest.mark.parametrize("dim,keepdim", [(0, False), (1, True), (-1, False)])
def test_kthvalue_matches_partition(dim: int, keepdim: bool) -> None:
    a = RNG.normal(size=(4, 6, 5))
    n = a.shape[dim]
    for k in range(1, n + 1):
        v, i = fg.kthvalue(_t(a), k, dim, keepdim)
        want = np.take(np.partition(a, k - 1, axis=dim), [k - 1], axis=dim)
        idx = i.numpy() if keepdim else np.expand_dims(i.numpy(), dim)
        vv = v.numpy() if keepdim else np.expand_dims(v.numpy(), dim)
        np.testing.assert_array_equal(vv, want)
        np.testing.assert_array_equal(np.take_along_axis(a, idx, dim), want)


# ----- median / nanmedian / mode ----------------------------------------------------------------


def _lower_median(a: np.ndarray, axis: int) -> np.ndarray:
    n = a.shape[axis]
    return np.take(np.sort(a, axis=axis), (n - 1) // 2, axis=axis)


@pytest.mark.parametrize("shape", [(5,), (4, 6), (3, 4, 7)])
def test_median_is_lower_median(shape: Any) -> None:
    a = RNG.normal(size=shape)
    assert fg.median(_t(a)).item() == _lower_median(a.ravel(), 0)
    for d in range(len(shape)):
        v, i = _t(a).median(d)
        np.testing.assert_array_equal(v.numpy(), _lower_median(a, d))
        np.testing.assert_array_equal(
            np.take_along_axis(a, np.expand_dims(i.numpy(), d), d).squeeze(d), v.numpy()
        )
        if shape[d] % 2:  # odd: the lower median is NumPy's median
            np.testing.assert_array_equal(v.numpy(), np.median(a, axis=d))


def test_median_nan_and_nanmedian() -> None:
    a = np.array([[1.0, np.nan, 3.0, 2.0], [4.0, 0.0, 2.0, 8.0], [np.nan] * 4])
    v, i = _t(a).median(1)
    assert np.isnan(v[0].item()) and i[0].item() == 1 and np.isnan(v[2].item())
    assert v[1].item() == 2.0
    v, i = fg.nanmedian(_t(a), 1, keepdim=True)
    assert tuple(v.shape) == (3, 1)
    assert v[0, 0].item() == 2.0 and v[1, 0].item() == 2.0 and np.isnan(v[2, 0].item())
    assert a[0, i[0, 0].item()] == 2.0
    assert np.isnan(_t(a).median().item())
    assert fg.nanmedian(_t(a)).item() == _lower_median(a[~np.isnan(a)], 0)


def test_median_int_and_empty() -> None:
    assert fg.median(fg.tensor([3, 1, 2, 7])).item() == 2
    assert np.isnan(fg.median(fg.zeros(0)).item())


def _mode_ref(row: np.ndarray) -> Any:
    vals, counts = np.unique(row, return_counts=True)
    m = vals[np.argmax(counts)]  # first (smallest) of the most frequent
    return m, np.flatnonzero(row == m)[-1]


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_mode_matches_counts(dim: int) -> None:
    a = RNG.integers(0, 4, size=(5, 9, 7))
    v, i = fg.mode(_t(a), dim)
    moved = np.moveaxis(a, dim, -1)
    for idx in np.ndindex(moved.shape[:-1]):
        m, last = _mode_ref(moved[idx])
        assert v.numpy()[idx] == m and i.numpy()[idx] == last
    assert fg.mode(_t(a).double(), dim).values.dtype == fg.float64


# ----- cummax / cummin -------------------------------------------------------------------------


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cummax_cummin_match_numpy(dim: int) -> None:
    a = _ties((4, 6, 5))
    for fn, acc in ((fg.cummax, np.maximum), (fg.cummin, np.minimum)):
        v, i = fn(_t(a), dim)
        np.testing.assert_array_equal(v.numpy(), acc.accumulate(a, axis=dim))
        # Each index points at the value, the latest such one so far (torch's tie rule).
        np.testing.assert_array_equal(np.take_along_axis(a, i.numpy(), dim), v.numpy())
        pos = np.moveaxis(np.indices(a.shape)[dim if dim >= 0 else a.ndim + dim], 0, 0)
        hit = np.where(a == v.numpy(), pos, -1)
        np.testing.assert_array_equal(i.numpy(), np.maximum.accumulate(hit, axis=dim))


def test_cummax_nan_sticks() -> None:
    # torch's rule: NaN stays, and each later NaN takes the index over.
    v, i = fg.tensor([1.0, 3.0, np.nan, 5.0, np.nan, 1.0]).cummax(0)
    np.testing.assert_array_equal(v.numpy()[:2], [1.0, 3.0])
    assert np.isnan(v.numpy()[2:]).all()
    np.testing.assert_array_equal(i.numpy(), [0, 1, 2, 2, 4, 4])


# ----- quantile / nanquantile --------------------------------------------------------------------

METHODS = ("linear", "lower", "higher", "midpoint", "nearest")


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("dim,keepdim", [(None, False), (None, True), (1, False), (-1, True)])
def test_quantile_matches_numpy(method: str, dim: Any, keepdim: bool) -> None:
    a = RNG.normal(size=(3, 7, 4))
    for q in (0.0, 0.25, 0.5, 0.625, 1.0):
        got = fg.quantile(_t(a), q, dim, keepdim, interpolation=method)
        want = np.quantile(a, q, axis=dim, keepdims=keepdim, method=method)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)
    qs = np.array([0.1, 0.5, 0.75])
    got = _t(a).quantile(_t(qs), dim, keepdim, interpolation=method)
    want = np.quantile(a, qs, axis=dim, keepdims=keepdim, method=method)
    assert tuple(got.shape) == want.shape
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)


def test_nanquantile_matches_numpy() -> None:
    a = RNG.normal(size=(5, 6))
    a[RNG.random(a.shape) < 0.3] = np.nan
    a[4] = np.nan
    for method in METHODS:
        got = fg.nanquantile(_t(a), _t([0.2, 0.9]), dim=1, interpolation=method)
        with np.errstate(all="ignore"), pytest.warns(RuntimeWarning):
            want = np.nanquantile(a, [0.2, 0.9], axis=1, method=method)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)
    # quantile propagates NaN per row.
    got = fg.quantile(_t(a), 0.5, dim=1).numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(a).any(axis=1))


def test_quantile_float32() -> None:
    a = RNG.normal(size=(20,)).astype(np.float32)
    got = fg.quantile(_t(a), 0.3)
    assert got.dtype == fg.float32
    np.testing.assert_allclose(got.item(), np.quantile(a.astype(np.float64), 0.3), rtol=1e-6)


# ----- unique / unique_consecutive --------------------------------------------------------------


def test_unique_matches_numpy() -> None:
    a = RNG.integers(-3, 4, size=(4, 5))
    v, inv, cnt = fg.unique(_t(a), return_inverse=True, return_counts=True)
    wv, winv, wcnt = np.unique(a, return_inverse=True, return_counts=True)
    np.testing.assert_array_equal(v.numpy(), wv)
    np.testing.assert_array_equal(inv.numpy(), winv.reshape(a.shape))
    np.testing.assert_array_equal(cnt.numpy(), wcnt)
    assert isinstance(fg.unique(_t(a)), fg.Tensor)
    v, cnt = _t(a.astype(np.float64)).unique(return_counts=True)
    np.testing.assert_array_equal(cnt.numpy(), wcnt)
    assert v.dtype == fg.float64


@pytest.mark.parametrize("dim", [0, 1])
def test_unique_dim_matches_numpy(dim: int) -> None:
    a = RNG.integers(0, 2, size=(6, 3))
    a = np.concatenate([a, a[:2]], axis=0) if dim == 0 else np.concatenate([a, a[:, :1]], 1)
    v, inv, cnt = fg.unique(_t(a), dim=dim, return_inverse=True, return_counts=True)
    wv, winv, wcnt = np.unique(a, axis=dim, return_inverse=True, return_counts=True)
    np.testing.assert_array_equal(v.numpy(), wv)
    np.testing.assert_array_equal(inv.numpy(), winv.ravel())
    np.testing.assert_array_equal(cnt.numpy(), wcnt)


def test_unique_consecutive() -> None:
    a = np.array([1, 1, 2, 2, 3, 1, 1, 2])
    v, inv, cnt = fg.unique_consecutive(_t(a), return_inverse=True, return_counts=True)
    np.testing.assert_array_equal(v.numpy(), [1, 2, 3, 1, 2])
    np.testing.assert_array_equal(cnt.numpy(), [2, 2, 1, 2, 1])
    np.testing.assert_array_equal(v.numpy()[inv.numpy()], a)
    m = np.array([[1, 1], [1, 1], [0, 2], [1, 1]])
    v, cnt = fg.unique_consecutive(_t(m), return_counts=True, dim=0)
    np.testing.assert_array_equal(v.numpy(), [[1, 1], [0, 2], [1, 1]])
    np.testing.assert_array_equal(cnt.numpy(), [2, 1, 1])


def test_unique_empty_and_nan() -> None:
    v, inv = fg.unique(fg.zeros(0), return_inverse=True)
    assert tuple(v.shape) == (0,) and tuple(inv.shape) == (0,)
    v = fg.unique(fg.tensor([np.nan, 1.0, np.nan]))  # each NaN distinct, as torch's
    assert v.numpy()[0] == 1.0 and np.isnan(v.numpy()[1:]).all() and v.numel() == 3


# ----- searchsorted / bucketize -------------------------------------------------------------------


@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_matches_numpy(right: bool) -> None:
    seq = np.sort(RNG.integers(0, 10, size=12)).astype(np.float64)
    vals = RNG.integers(-1, 12, size=(3, 4)).astype(np.float64)
    side = "right" if right else "left"
    want = np.searchsorted(seq, vals, side=side)
    np.testing.assert_array_equal(fg.searchsorted(_t(seq), _t(vals), right=right).numpy(), want)
    np.testing.assert_array_equal(fg.searchsorted(_t(seq), _t(vals), side=side).numpy(), want)
    # Rows of boundaries matching the values' leading dims.
    seqs = np.sort(RNG.normal(size=(3, 5)), axis=1)
    v = RNG.normal(size=(3, 4))
    got = fg.searchsorted(_t(seqs), _t(v), right=right).numpy()
    for r in range(3):
        np.testing.assert_array_equal(got[r], np.searchsorted(seqs[r], v[r], side=side))
    # An unsorted sequence with its sorter; a Python scalar.
    raw = RNG.permutation(8).astype(np.int64)
    sorter = np.argsort(raw)
    got = fg.searchsorted(_t(raw), _t([0, 3, 9]), sorter=_t(sorter), right=right).numpy()
    np.testing.assert_array_equal(got, np.searchsorted(raw, [0, 3, 9], side=side, sorter=sorter))
    s = fg.searchsorted(_t(seq), 4, right=right)
    assert s.dim() == 0 and s.item() == np.searchsorted(seq, 4, side=side)
    assert s.dtype == fg.int64


@pytest.mark.parametrize("right", [False, True])
def test_bucketize_matches_digitize(right: bool) -> None:
    bounds = np.array([-1.0, 0.0, 0.5, 2.0])
    x = np.array([[-2.0, -1.0, 0.0], [0.25, 0.5, 3.0]])
    got = fg.bucketize(_t(x), _t(bounds), right=right)
    np.testing.assert_array_equal(got.numpy(), np.digitize(x, bounds, right=not right))
    assert fg.bucketize(0.7, _t(bounds)).item() == 3


# ----- bincount / histc / argwhere / count_nonzero ------------------------------------------------


def test_bincount_matches_numpy() -> None:
    a = RNG.integers(0, 7, size=30)
    np.testing.assert_array_equal(fg.bincount(_t(a)).numpy(), np.bincount(a))
    np.testing.assert_array_equal(
        fg.bincount(_t(a), minlength=10).numpy(), np.bincount(a, minlength=10)
    )
    w = RNG.normal(size=30)
    got = _t(a).bincount(_t(w))
    assert got.dtype == fg.float64
    np.testing.assert_allclose(got.numpy(), np.bincount(a, w), rtol=1e-12)
    assert _t(a).bincount(_t(w.astype(np.float32))).dtype == fg.float32
    assert _t(a).bincount(_t(a)).dtype == fg.float64
    e = fg.bincount(fg.tensor([], dtype=fg.int64), minlength=3)
    np.testing.assert_array_equal(e.numpy(), [0, 0, 0])
    assert e.dtype == fg.int64


@pytest.mark.parametrize("dt", FLOATS)
def test_histc_matches_histogram(dt: str) -> None:
    a = RNG.normal(size=200).astype(dt)
    for bins, lo, hi in ((10, -1.0, 1.0), (7, -3.0, 0.5), (5, 0.0, 0.0)):
        got = fg.histc(_t(a), bins=bins, min=lo, max=hi)
        rng = (a.min(), a.max()) if lo == hi else (lo, hi)
        want, _ = np.histogram(a, bins=bins, range=rng)
        assert got.dtype == getattr(fg, dt)
        np.testing.assert_array_equal(got.numpy(), want)
    # A flat input widens to [v - 1, v + 1].
    np.testing.assert_array_equal(fg.tensor([2.0, 2.0]).histc(4).numpy(), [0, 0, 2, 0])


def test_argwhere_and_count_nonzero() -> None:
    a = RNG.integers(-1, 2, size=(3, 4, 2)).astype(np.float64)
    np.testing.assert_array_equal(fg.argwhere(_t(a)).numpy(), np.argwhere(a))
    assert fg.count_nonzero(_t(a)).item() == np.count_nonzero(a)
    for dim in (0, (0, 2), -1):
        got = fg.count_nonzero(_t(a), dim=dim)
        assert got.dtype == fg.int64
        np.testing.assert_array_equal(got.numpy(), np.count_nonzero(a, axis=dim))


# ----- errors ------------------------------------------------------------------------------------


def test_errors_match_torch() -> None:
    x = fg.randn(3, 4)
    with pytest.raises(RuntimeError, match="selected index k out of range"):
        x.topk(5)
    with pytest.raises(RuntimeError, match="selected index k out of range"):
        x.topk(-1)
    with pytest.raises(
        RuntimeError, match=r"kthvalue\(\): selected number k out of range for dimension 1"
    ):
        x.kthvalue(5, 1)
    with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range"):
        x.sort(dim=3)
    with pytest.raises(IndexError, match=r"median\(\): Expected reduction dim 1 to have non-zero"):
        fg.zeros(2, 0).median(1)
    with pytest.raises(IndexError, match=r"mode\(\): Expected reduction dim 1"):
        fg.zeros(2, 0).mode(1)
    with pytest.raises(NotImplementedError, match="topk does not support bool"):
        fg.tensor([True, False]).topk(1)
    with pytest.raises(RuntimeError, match="bincount only supports 1-d non-negative integral"):
        fg.bincount(fg.tensor([[1, 2]]))
    with pytest.raises(RuntimeError, match="bincount only supports 1-d non-negative integral"):
        fg.bincount(fg.tensor([1, -2]))
    with pytest.raises(NotImplementedError, match="\"bincount_cpu\" not implemented for 'Float'"):
        fg.bincount(fg.tensor([1.0, 2.0]))
    with pytest.raises(RuntimeError, match="weights should be 1-d and have the same length"):
        fg.bincount(fg.tensor([1, 2]), weights=fg.tensor([1.0, 2.0, 3.0]))
    with pytest.raises(RuntimeError, match="minlength should be >= 0"):
        fg.bincount(fg.tensor([1, 2]), minlength=-1)
    xd = fg.randn(3, 4, dtype=fg.float64)
    with pytest.raises(RuntimeError, match="interpolation must be one of linear, lower, higher"):
        fg.quantile(xd, 0.3, interpolation="foo")
    with pytest.raises(RuntimeError, match=r"q must be in the range \[0, 1\] but got 1.3"):
        fg.quantile(xd, 1.3)
    with pytest.raises(RuntimeError, match=r"q values must be in the range \[0, 1\]"):
        fg.quantile(xd, fg.tensor([0.2, 1.3], dtype=fg.float64))
    with pytest.raises(RuntimeError, match="q must be a scalar or 1D tensor"):
        fg.quantile(xd, fg.tensor([[0.2]], dtype=fg.float64))
    with pytest.raises(RuntimeError, match="q tensor must be same dtype as the input tensor"):
        fg.quantile(xd, fg.tensor([0.2], dtype=fg.float32))
    with pytest.raises(RuntimeError, match="input tensor must be either float or double"):
        fg.quantile(fg.tensor([1, 2]), 0.5)
    with pytest.raises(RuntimeError, match="input tensor must be non-empty"):
        fg.quantile(fg.zeros(0, dtype=fg.float64), 0.5)
    with pytest.raises(RuntimeError, match="boundaries tensor should be 1 dimension or the first"):
        fg.searchsorted(fg.tensor([[1, 2, 3], [2, 3, 4]]), fg.tensor([[1, 2], [2, 3], [3, 3]]))
    with pytest.raises(RuntimeError, match="side can only be 'left' or 'right' but got foo"):
        fg.searchsorted(fg.tensor([1, 2, 3]), fg.tensor([1]), side="foo")
    with pytest.raises(RuntimeError, match="side and right can't be set to opposites"):
        fg.searchsorted(fg.tensor([1, 2, 3]), fg.tensor([1]), side="left", right=True)
    with pytest.raises(RuntimeError, match="boundary and sorter must have the same size"):
        fg.searchsorted(fg.tensor([1, 2, 3]), fg.tensor([1]), sorter=fg.tensor([0, 1]))
    with pytest.raises(RuntimeError, match="sorter index out of range"):
        fg.searchsorted(fg.tensor([1, 2, 3]), fg.tensor([1]), sorter=fg.tensor([0, 1, 5]))
    with pytest.raises(RuntimeError, match="boundaries tensor should have positive dimension"):
        fg.searchsorted(fg.tensor(1), fg.tensor([1, 2]))
    got = fg.searchsorted(fg.tensor([1, 2, 3]), fg.tensor([2, 5]), out_int32=True)
    assert got.dtype == fg.int32 and got.tolist() == np.searchsorted([1, 2, 3], [2, 5]).tolist()
    got = fg.bucketize(fg.tensor([2, 5]), fg.tensor([1, 2, 3]), out_int32=True, right=True)
    assert got.dtype == fg.int32
    assert got.tolist() == np.searchsorted([1, 2, 3], [2, 5], side="right").tolist()
    with pytest.raises(RuntimeError, match=r"boundaries tensor must be 1 dimension, but got dim"):
        fg.bucketize(fg.tensor([1, 2]), fg.tensor([[1, 2]]))
    with pytest.raises(NotImplementedError, match="\"histogram_cpu\" not implemented for 'Long'"):
        fg.histc(fg.tensor([1, 2]))
    with pytest.raises(RuntimeError, match="bins must be > 0, but got 0"):
        fg.histc(fg.tensor([1.0, 2.0]), bins=0)
    with pytest.raises(RuntimeError, match="max must be larger than min"):
        fg.histc(fg.tensor([1.0, 2.0]), min=3, max=1)
    with pytest.raises(RuntimeError, match="dim 0 appears multiple times"):
        fg.count_nonzero(x, dim=(0, 0))


def test_integer_outputs_are_not_differentiable() -> None:
    x = fg.randn(4, 5, requires_grad=True)
    v, i = x.sort()
    assert v.requires_grad and not i.requires_grad and i.dtype == fg.int64
    assert not x.argsort().requires_grad
    assert not fg.count_nonzero(x).requires_grad
    assert not fg.searchsorted(v.detach()[0], x).requires_grad


# ----- torch parity (when installed) -------------------------------------------------------------


def test_matches_torch_on_ties_and_nan() -> None:
    torch = pytest.importorskip("torch")
    a = _ties((4, 7))
    a[1, 2] = a[3, 0] = a[3, 5] = np.nan
    ours, theirs = _t(a), torch.tensor(a)

    def same(x: Any, y: Any) -> None:
        np.testing.assert_array_equal(x.numpy(), y.numpy())

    for desc in (False, True):
        for o, t in zip(
            ours.sort(dim=1, descending=desc, stable=True),
            theirs.sort(dim=1, descending=desc, stable=True),
        ):
            same(o, t)
    for k in (1, 3):
        same(ours.topk(k, 1).values, theirs.topk(k, 1).values)
        same(ours.topk(k, 0, largest=False).values, theirs.topk(k, 0, largest=False).values)
    same(ours.kthvalue(3, 1).values, theirs.kthvalue(3, 1).values)
    for fn in ("median", "nanmedian"):
        same(getattr(ours, fn)(1).values, getattr(theirs, fn)(1).values)
        same(getattr(ours, fn)(), getattr(theirs, fn)())
    same(ours.median(1).indices[[1, 3]], theirs.median(1).indices[[1, 3]])  # first NaN
    ints = RNG.integers(0, 3, size=(5, 9))
    for o, t in zip(_t(ints).mode(1), torch.tensor(ints).mode(1)):
        same(o, t)
    for fn in ("cummax", "cummin"):
        for o, t in zip(getattr(ours, fn)(1), getattr(theirs, fn)(1)):
            same(o, t)
    b = np.nan_to_num(a)
    for m in METHODS:
        for dim in (None, 0):
            o = _t(b).quantile(_t([0.1, 0.5, 0.95]), dim, interpolation=m)
            t = torch.tensor(b).quantile(
                torch.tensor([0.1, 0.5, 0.95], dtype=torch.float64), dim, interpolation=m
            )
            np.testing.assert_allclose(o.numpy(), t.numpy(), rtol=1e-12, atol=1e-12)
        same(ours.nanquantile(0.3, 1, interpolation=m), theirs.nanquantile(0.3, 1, interpolation=m))
    for o, t in zip(
        fg.unique(_t(ints), dim=1, return_inverse=True, return_counts=True),
        torch.unique(torch.tensor(ints), dim=1, return_inverse=True, return_counts=True),
    ):
        same(o, t)
    same(fg.histc(_t(b), bins=6), torch.histc(torch.tensor(b), bins=6))
    # float32 bins in float32 arithmetic: 0.4f rounds above 0.4 and still counts.
    f = np.array([0.1, 0.2, 0.3, 0.4], dtype=np.float32)
    same(fg.histc(_t(f), 3, 0.1, 0.4), torch.histc(torch.tensor(f), 3, 0.1, 0.4))
    f = RNG.normal(size=500).astype(np.float32)
    same(fg.histc(_t(f), 17, -1.5, 1.2), torch.histc(torch.tensor(f), 17, -1.5, 1.2))
    same(fg.bincount(_t(ints.ravel())), torch.bincount(torch.tensor(ints.ravel())))
    seq = np.sort(b, axis=1)
    same(
        fg.searchsorted(_t(seq), _t(b), right=True),
        torch.searchsorted(torch.tensor(seq), torch.tensor(b), right=True),
    )
    same(fg.count_nonzero(_t(b), 0), torch.count_nonzero(torch.tensor(b), 0))
    same(fg.argwhere(_t(b)), torch.argwhere(torch.tensor(b)))
