"""The everyday functions added with issue 15 outside the op tables: their error messages
(each compared with torch's when torch is installed), the values of the non-differentiable
ones (isclose, allclose, equal, logspace, broadcast_shapes, type) against NumPy or closed
forms, and torch's argument forms."""

from __future__ import annotations

import math
import warnings

import ferrograd as fg
import numpy as np
import numpy.testing as npt
import pytest

try:
    import torch
except ImportError:  # torch is optional
    torch = None


def _f(L, *shape):
    return L.zeros(*shape)


ERRORS = [
    (
        lambda L: L.addmm(_f(L, 2, 3), _f(L, 2, 4), _f(L, 5, 3)),
        RuntimeError,
        "addmm: mat1 and mat2 shapes cannot be multiplied (2x4 and 5x3)",
    ),
    (
        lambda L: L.addmv(_f(L, 2), _f(L, 2, 4), _f(L, 3)),
        RuntimeError,
        "size mismatch, got input (2), mat (2x4), vec (3)",
    ),
    (
        lambda L: L.baddbmm(_f(L, 2, 3), _f(L, 5, 2, 4), _f(L, 4, 4, 3)),
        RuntimeError,
        "Expected size for first two dimensions of batch2 tensor to be: [5, 4] but got: [4, 4].",
    ),
    (
        lambda L: L.addbmm(_f(L, 2, 3), _f(L, 5, 2, 4), _f(L, 5, 5, 3)),
        RuntimeError,
        "Incompatible matrix sizes for bmm (2x4 and 5x3)",
    ),
    (
        lambda L: _f(L, 3).take(L.tensor([5])),
        IndexError,
        "out of range: tried to access index 5 on a tensor of 3 elements.",
    ),
    (
        lambda L: _f(L, 3).take(L.tensor([1.0])),
        RuntimeError,
        "take(): Expected a long tensor for index, but got Float",
    ),
    (
        lambda L: _f(L, 3).index_copy(0, L.tensor([0]), _f(L, 2)),
        IndexError,
        "index_copy_(): Number of indices (1) should be equal to source.size(dim) (2)",
    ),
    (
        lambda L: _f(L, 3).index_copy(0, L.tensor([5]), _f(L, 1)),
        IndexError,
        "index_copy_(): index 5 is out of bounds for dimension 0 with size 3",
    ),
    (
        lambda L: _f(L, 3).index_fill(0, L.tensor([5]), 1.0),
        IndexError,
        "index 5 is out of bounds for dimension 0 with size 3",
    ),
    (
        lambda L: _f(L, 3).index_fill(0, L.tensor([0.0]), 1.0),
        IndexError,
        "index_fill_(): Expected dtype int64 for index.",
    ),
    (
        lambda L: _f(L, 3).scatter_reduce(0, L.tensor([0]), _f(L, 3), "foo"),
        RuntimeError,
        "reduce argument must be either sum, prod, mean, amax or amin, got foo",
    ),
    (
        lambda L: _f(L, 3).scatter_reduce(0, L.tensor([0]), L.zeros(3, dtype=L.float64), "sum"),
        RuntimeError,
        "scatter(): Expected self.dtype to be equal to src.dtype",
    ),
    (lambda L: _f(L, 3).diff(n=-1), RuntimeError, "order must be non-negative but got -1"),
    (
        lambda L: L.diff(L.tensor(1.0)),
        RuntimeError,
        "diff expects input to be at least one-dimensional",
    ),
    (
        lambda L: L.diff(_f(L, 3), prepend=_f(L, 2, 2)),
        RuntimeError,
        "diff expects prepend or append to be the same dimension as input",
    ),
    (
        lambda L: L.tensordot(_f(L, 2, 3), _f(L, 4, 3), 1),
        RuntimeError,
        "contracted dimensions need to match, but first has size 3 in dim -1 and second has "
        "size 4 in dim 0",
    ),
    (
        lambda L: L.tensordot(_f(L, 2, 3), _f(L, 3, 4), -1),
        RuntimeError,
        "tensordot expects dims >= 0, but got dims=-1",
    ),
    (
        lambda L: L.tensordot(_f(L, 2, 3), _f(L, 3, 4), ([1], [0, 1])),
        RuntimeError,
        "both dimension lists should have same length",
    ),
    (
        lambda L: L.repeat_interleave(_f(L, 3), L.tensor([1, 2])),
        RuntimeError,
        "repeats must have the same size as input along dim, but got repeats.size(0) = 2 and "
        "input.size(0) = 3",
    ),
    (lambda L: L.repeat_interleave(_f(L, 3), -1), RuntimeError, "Repeats must be non-negative"),
    (
        lambda L: L.repeat_interleave(L.tensor([1, -2])),
        RuntimeError,
        "repeats can not be negative",
    ),
    (
        lambda L: L.meshgrid(_f(L, 2), _f(L, 2), indexing="foo"),
        RuntimeError,
        'torch.meshgrid: indexing must be one of "xy" or "ij", but received: foo',
    ),
    (
        lambda L: L.broadcast_shapes((2, 3), (3, 2)),
        RuntimeError,
        "Attempting to broadcast a dimension of length 2 at -1! Mismatching argument at index 1 "
        "had (3, 2); but expected shape should be broadcastable to [2, 3]",
    ),
    (
        lambda L: L.broadcast_tensors(_f(L, 3), _f(L, 2)),
        RuntimeError,
        "The size of tensor a (3) must match the size of tensor b (2) at non-singleton dimension 0",
    ),
    (lambda L: L.hstack([]), RuntimeError, "hstack expects a non-empty TensorList"),
    (
        lambda L: L.cartesian_prod(_f(L, 2, 2)),
        RuntimeError,
        "Expect a 1D vector, but got shape [2, 2]",
    ),
    (lambda L: L.logspace(0, 2, -1), RuntimeError, "number of steps must be non-negative"),
    (
        lambda L: L.randint(5, 2, (2,)),
        RuntimeError,
        "random_ expects 'from' to be less than 'to', but got from=5 >= to=2",
    ),
    (lambda L: _f(L, 2).type("foo"), ValueError, "invalid type: 'foo'"),
    (
        lambda L: L.multinomial(L.tensor([0.0, 0.0]), 1),
        RuntimeError,
        "invalid multinomial distribution (sum of probabilities <= 0)",
    ),
    (
        lambda L: L.multinomial(L.tensor([1.0, 1.0]), 3),
        RuntimeError,
        "cannot sample n_sample > prob_dist.size(-1) samples without replacement",
    ),
    (
        lambda L: L.multinomial(L.tensor([-1.0, 1.0]), 1),
        RuntimeError,
        "probability tensor contains either `inf`, `nan` or element < 0",
    ),
    (
        lambda L: L.block_diag(L.ones(2, 2, 2)),
        RuntimeError,
        "torch.block_diag: Input tensors must have 2 or fewer dimensions. Input 0 has 3 dimensions",
    ),
    (
        lambda L: L.hypot(L.tensor([1, 2]), L.tensor([1, 2])),
        NotImplementedError,
        "\"hypot_cpu\" not implemented for 'Long'",
    ),
    (
        lambda L: L.rot90(_f(L, 2, 2), 1, [0]),
        RuntimeError,
        "expected total rotation dims == 2, but got dims = 1",
    ),
    (
        lambda L: L.rot90(_f(L, 2, 2), 1, [0, 0]),
        RuntimeError,
        "expected rotation dims to be different, but got dim0 = 0 and dim1 = 0",
    ),
]


@pytest.mark.parametrize("call, exc, message", ERRORS, ids=[e[2][:40] for e in ERRORS])
def test_errors_carry_torchs_messages(call, exc, message) -> None:
    with pytest.raises(exc) as info:
        call(fg)
    assert str(info.value).startswith(message)
    if torch is not None:
        with pytest.raises(exc) as tinfo, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            call(torch)
        assert str(tinfo.value).startswith(message)


def test_isclose_allclose_equal_against_numpy() -> None:
    a = np.array([1.0, np.inf, -np.inf, np.nan, 0.0, 1e-9, 1.0])
    b = np.array([1.0 + 1e-6, np.inf, np.inf, np.nan, 1e-9, 0.0, 1.1])
    for equal_nan in (False, True):
        got = fg.isclose(fg.tensor(a), fg.tensor(b), equal_nan=equal_nan).numpy()
        npt.assert_array_equal(got, np.isclose(a, b, equal_nan=equal_nan))
    x = np.random.default_rng(0).normal(size=(3, 4))
    assert fg.allclose(fg.tensor(x), fg.tensor(x * (1 + 1e-7)))
    assert not fg.allclose(fg.tensor(x), fg.tensor(x + 1e-3))
    ints = fg.tensor([1, 5, 9])
    npt.assert_array_equal(fg.isclose(ints, fg.tensor([1, 6, 9]), atol=0).numpy(), [1, 0, 1])
    assert fg.equal(fg.tensor(x), fg.tensor(x.copy()))
    assert not fg.equal(fg.tensor([1.0, np.nan]), fg.tensor([1.0, np.nan]))
    assert not fg.equal(fg.zeros(2, 3), fg.zeros(3, 2))


def test_logspace_and_broadcast_shapes() -> None:
    npt.assert_allclose(fg.logspace(-1, 2, 7, dtype=fg.float64).numpy(), np.logspace(-1, 2, 7))
    npt.assert_allclose(fg.logspace(0, 3, 4, base=2).numpy(), [1, 2, 4, 8])
    assert fg.logspace(0, 1, 3).dtype == fg.float32
    assert fg.broadcast_shapes((2, 1), (3,), 1) == fg.Size([2, 3])
    assert fg.broadcast_shapes() == fg.Size([])
    assert isinstance(fg.broadcast_shapes((1,)), fg.Size)


def test_type_names_and_conversions() -> None:
    x = fg.zeros(2)
    assert x.type() == "ferrograd.FloatTensor"
    assert x.double().type() == "ferrograd.DoubleTensor"
    assert fg.tensor([1]).type() == "ferrograd.LongTensor"
    assert fg.tensor([True]).type() == "ferrograd.BoolTensor"
    assert x.type(fg.float64).dtype == fg.float64
    assert x.type("torch.LongTensor").dtype == fg.int64
    assert x.type(fg.DoubleTensor).dtype == fg.float64
    assert x.type(fg.float32) is x


def test_new_full_new_empty_reshape_as() -> None:
    x = fg.zeros(2, dtype=fg.float64)
    y = x.new_full((2, 3), 1.5)
    assert y.dtype == fg.float64 and y.shape == (2, 3)
    npt.assert_array_equal(y.numpy(), np.full((2, 3), 1.5))
    z = x.new_full([4], 2, dtype=fg.int64, requires_grad=False)
    assert z.dtype == fg.int64
    assert x.new_full((1,), 0.5, requires_grad=True).requires_grad
    e = x.new_empty(3, 2)
    assert e.shape == (3, 2) and e.dtype == fg.float64
    assert x.new_empty((5,)).shape == (5,)
    r = fg.arange(6.0).reshape_as(fg.zeros(3, 2))
    npt.assert_array_equal(r.numpy(), np.arange(6.0).reshape(3, 2))


def test_function_argument_forms() -> None:
    a, b = fg.arange(2.0), fg.arange(3.0)
    assert [t.shape for t in fg.meshgrid([a, b], indexing="ij")] == [(2, 3), (2, 3)]
    with pytest.warns(UserWarning, match="indexing argument"):
        fg.meshgrid(a, b)
    assert fg.atleast_1d(fg.tensor(1.0)).shape == (1,)
    assert [t.shape for t in fg.atleast_3d(a, fg.zeros(2, 3))] == [(1, 2, 1), (2, 3, 1)]
    assert [t.shape for t in fg.broadcast_tensors(*[a[:, None], b])] == [(2, 3), (2, 3)]
    npt.assert_array_equal(fg.repeat_interleave(fg.tensor([2, 0, 1])).numpy(), [0, 0, 2])
    assert fg.combinations(b, r=0).shape == (0,)
    assert fg.tensordot(fg.ones(2, 3, 4), fg.ones(3, 4, 5)).shape == (2, 5)
    with pytest.raises(RuntimeError, match="allocated size does not match required size"):
        a.repeat_interleave(2, output_size=3)
    npt.assert_array_equal(
        fg.diff(fg.tensor([True, False, False, True])).numpy(), [True, False, True]
    )
    assert fg.kron(fg.ones(2), fg.ones(3)).shape == (6,)
    assert math.isclose(fg.lerp(fg.zeros(1), fg.ones(1), fg.tensor(0.25)).item(), 0.25)


def test_triangle_indices_against_numpy() -> None:
    for row, col, off in ((3, 4, 0), (4, 3, -1), (3, 3, 2), (0, 2, 0)):
        npt.assert_array_equal(
            fg.tril_indices(row, col, off).numpy(), np.stack(np.tril_indices(row, off, col))
        )
        npt.assert_array_equal(
            fg.triu_indices(row, col, off).numpy(), np.stack(np.triu_indices(row, off, col))
        )
    assert fg.tril_indices(2, 2, dtype=fg.float32).dtype == fg.float32


def test_std_mean_var_mean_bernoulli_dropout_is_floating_point() -> None:
    x = np.random.default_rng(1).normal(size=(3, 4))
    s, m = fg.std_mean(fg.tensor(x), dim=1)
    npt.assert_allclose(s.numpy(), x.std(axis=1, ddof=1), rtol=1e-6)
    npt.assert_allclose(m.numpy(), x.mean(axis=1), rtol=1e-6)
    v, m = fg.var_mean(fg.tensor(x, dtype=fg.float64), correction=0, keepdim=True)
    npt.assert_allclose(v.numpy(), np.full((1, 1), x.var()), rtol=1e-12)
    npt.assert_allclose(m.numpy(), np.full((1, 1), x.mean()), rtol=1e-12)
    fg.manual_seed(0)
    p = fg.tensor([0.0, 1.0, 0.5]).expand(20000, 3).contiguous()
    b = fg.bernoulli(p).numpy()
    assert b[:, 0].sum() == 0 and b[:, 1].min() == 1
    assert abs(b[:, 2].mean() - 0.5) < 6 * math.sqrt(0.25 / 20000)
    assert p.bernoulli(0.0).sum().item() == 0
    npt.assert_array_equal(fg.dropout(fg.ones(4), 0.5, False).numpy(), np.ones(4))
    assert fg.is_floating_point(fg.zeros(1)) and not fg.is_floating_point(fg.tensor([1]))


def test_frac_and_round_() -> None:
    x = fg.tensor([-1.75, -0.5, 0.25, 2.5], dtype=fg.float64)
    npt.assert_array_equal(fg.frac(x).numpy(), [-0.75, -0.5, 0.25, 0.5])
    with pytest.raises(NotImplementedError, match="\"frac_cpu\" not implemented for 'Long'"):
        fg.tensor([1]).frac()
    y = x.clone()
    assert y.round_() is y
    npt.assert_array_equal(y.numpy(), [-2.0, -0.0, 0.0, 2.0])
    npt.assert_array_equal(x.clone().round_(decimals=1).numpy(), [-1.8, -0.5, 0.2, 2.5])


def test_multinomial_frequencies_and_rules() -> None:
    fg.manual_seed(2)
    w = fg.tensor([1.0, 0.0, 3.0])
    n = 40000
    draws = fg.multinomial(w, n, replacement=True).numpy()
    counts = np.bincount(draws, minlength=3)
    assert counts[1] == 0
    assert abs(counts[2] / n - 0.75) < 6 * math.sqrt(0.75 * 0.25 / n)
    rows = fg.multinomial(fg.tensor([[5.0, 1.0, 0.0, 2.0]] * 500), 3).numpy()
    assert rows.shape == (500, 3)
    assert all(len(set(r)) == 3 and 2 not in r for r in rows.tolist())
    # first pick of [5, 1, 0, 2] is category 0 with probability 5/8
    assert abs((rows[:, 0] == 0).mean() - 5 / 8) < 6 * math.sqrt(5 / 8 * 3 / 8 / 500)
    npt.assert_array_equal(fg.multinomial(fg.tensor([1.0, 0.0, 0.0]), 3).numpy(), [0, 1, 2])
    g = fg.Generator().manual_seed(4)
    a = fg.multinomial(w, 5, True, generator=g)
    b = fg.multinomial(w, 5, True, generator=fg.Generator().manual_seed(4))
    npt.assert_array_equal(a.numpy(), b.numpy())


def test_seed_and_initial_seed() -> None:
    fg.manual_seed(1234)
    assert fg.initial_seed() == 1234
    fg.empty(3).normal_(generator=fg.Generator().manual_seed(5))  # another stream: no change
    assert fg.initial_seed() == 1234
    s = fg.seed()
    assert fg.initial_seed() == s
    a = fg.rand(3)
    fg.manual_seed(s)
    npt.assert_array_equal(fg.rand(3).numpy(), a.numpy())


def test_int_index_is_a_row_view_with_its_gradient() -> None:
    # `x[i]` takes a one-select path (a dataset's per-sample read): values, view semantics and
    # the gradient against NumPy's row and a one-hot closed form.
    a = np.arange(24.0).reshape(4, 6)
    for i in range(-4, 4):
        x = fg.tensor(a, requires_grad=True)
        row = x[i]
        npt.assert_array_equal(row.detach().numpy(), a[i])
        assert row.shape == (6,)
        (row * fg.arange(6.0)).sum().backward()
        want = np.zeros_like(a)
        want[i] = np.arange(6.0)
        npt.assert_array_equal(x.grad.numpy(), want)
    base = fg.tensor(a)
    base[2].fill_(-1.0)
    npt.assert_array_equal(base.numpy()[2], -np.ones(6))
