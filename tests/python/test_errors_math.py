"""Bad input to the math ops: exception type and message (naming the op, dims and shapes),
plus the int/bool dtype rules, grad_fn presence and the stability/edge behaviours."""

from __future__ import annotations

import math

import ferrograd as fg
import numpy as np
import pytest

try:
    import torch
except ImportError:  # pragma: no cover - depends on the machine
    torch = None


def x23() -> fg.Tensor:
    return fg.tensor([[1.0, -2.0, 3.0], [0.5, 4.0, -1.0]])


# ----- errors -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call",
    [
        lambda x: x.prod(2),
        lambda x: x.amax(-3),
        lambda x: x.amin((0, 5)),
        lambda x: x.max(2),
        lambda x: x.argmax(3),
        lambda x: x.var(2),
        lambda x: x.norm(dim=4),
        lambda x: x.logsumexp(2),
        lambda x: x.softmax(2),
        lambda x: x.log_softmax(-3),
        lambda x: x.cumsum(2),
        lambda x: x.cumprod(-3),
        lambda x: x.all(2),
        lambda x: x.any(-3),
    ],
)
def test_out_of_range_dims_raise_index_error(call) -> None:
    with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range of"):
        call(x23())


def test_repeated_dims_are_rejected() -> None:
    with pytest.raises(RuntimeError, match="dim 1 appears multiple times in the list of dims"):
        x23().amax((1, -1))


def test_broadcast_mismatch_names_shapes() -> None:
    with pytest.raises(RuntimeError, match=r"must match the size of tensor b"):
        fg.maximum(x23(), fg.ones(4))


@pytest.mark.parametrize(
    "call,msg",
    [
        (lambda e: e.max(), "max(): Expected reduction dim to be specified for input.numel() == 0"),
        (lambda e: e.min(), "min(): Expected reduction dim to be specified"),
        (lambda e: e.argmax(), "argmax(): Expected reduction dim to be specified"),
        (lambda e: e.max(0), "max(): Expected reduction dim 0 to have non-zero size"),
        (lambda e: e.amax(0), "amax(): Expected reduction dim 0 to have non-zero size"),
        (lambda e: e.argmin(0), "argmin(): Expected reduction dim 0 to have non-zero size"),
    ],
)
def test_empty_reductions_without_identity(call, msg) -> None:
    e = fg.zeros(0, 3)
    with pytest.raises(
        (IndexError, RuntimeError), match=msg.replace("(", r"\(").replace(")", r"\)")
    ):
        call(e)


def test_integer_division_by_zero() -> None:
    a = fg.tensor([1, 2, 3])
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        a.div(fg.tensor([1, 0, 1]), rounding_mode="floor")
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        a % 0
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        fg.fmod(a, 0)


def test_bad_rounding_mode() -> None:
    with pytest.raises(
        RuntimeError,
        match="div expected rounding_mode to be one of None, 'trunc', or 'floor' but found 'up'",
    ):
        x23().div(2.0, rounding_mode="up")


def test_float_only_reductions_reject_integers() -> None:
    with pytest.raises(NotImplementedError, match="std and var only support floating point"):
        fg.tensor([1, 2, 3]).var()
    with pytest.raises(NotImplementedError, match="std and var only support floating point"):
        fg.tensor([1, 2, 3]).std(0)
    with pytest.raises(
        NotImplementedError, match="linalg.vector_norm: Expected a floating point .* Got Long"
    ):
        fg.tensor([1, 2, 3]).norm()
    with pytest.raises(
        NotImplementedError, match="\"softmax_kernel_impl\" not implemented for 'Long'"
    ):
        fg.tensor([1, 2, 3]).softmax(0)
    with pytest.raises(NotImplementedError, match='log_softmax_kernel_impl" not implemented'):
        fg.log_softmax(fg.tensor([True]), 0)


def test_bitwise_ops_reject_floats() -> None:
    with pytest.raises(NotImplementedError, match="bitwise_and_cpu\" not implemented for 'Float'"):
        x23() & x23()
    with pytest.raises(TypeError, match=r"~ \(operator.invert\) is only implemented on integer"):
        ~x23()


def test_clamp_needs_a_bound() -> None:
    with pytest.raises(RuntimeError, match="At least one of 'min' or 'max' must not be None"):
        x23().clamp()
    b = (x23() > 0).clamp(False, False)  # bool clamps like torch (no error)
    assert b.dtype == fg.bool and not b.any().item()


def test_var_argument_conflicts() -> None:
    with pytest.raises(TypeError, match="var\\(\\) received an invalid combination of arguments"):
        x23().var(0, unbiased=True, correction=0)
    with pytest.raises(TypeError, match="dim must be an int or a tuple of ints, not float"):
        x23().prod(1.5)


def test_max_dim_must_be_int() -> None:
    with pytest.raises(TypeError, match=r"max\(\): argument 'dim' must be int, not str"):
        x23().max("a")


def test_linalg_norm_errors() -> None:
    with pytest.raises(
        RuntimeError, match="If dim is not specified but ord is, the input must be 1D or 2D"
    ):
        fg.linalg.norm(fg.ones(2, 2, 2), ord=1)
    # 'nuc' is computed now (singular values of ones(2, 2): 2 and 0).
    assert abs(fg.linalg.norm(fg.ones(2, 2), ord="nuc").item() - 2.0) < 1e-6
    with pytest.raises(RuntimeError, match="must have at least 2 dimensions"):
        fg.linalg.matrix_norm(fg.ones(3))
    with pytest.raises(RuntimeError, match="Order 3 not supported"):
        fg.linalg.matrix_norm(fg.ones(2, 2), ord=3)
    with pytest.raises(RuntimeError, match="cannot compute the inf norm on an empty tensor"):
        fg.linalg.vector_norm(fg.zeros(0), ord=math.inf)


def test_round_decimals_rejects_integers() -> None:
    with pytest.raises(NotImplementedError, match="\"round_cpu\" not implemented for 'Long'"):
        fg.tensor([1, 2]).round(decimals=1)


# ----- dtype rules and grad_fn --------------------------------------------------------------------


# That float outputs of every table op have a grad_fn and int/bool ones none is
# ``test_op_table.py::test_float_outputs_have_a_backward_and_int_outputs_never_require_grad``.


FLOAT_ONLY_UNARY = [
    "exp2", "log2", "log10", "log1p", "expm1", "rsqrt", "reciprocal", "tan", "asin", "acos",
    "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "erf", "erfc", "exp", "log", "sin",
]  # fmt: skip


@pytest.mark.parametrize("name", FLOAT_ONLY_UNARY)
@pytest.mark.parametrize("dtype", [fg.int64, fg.bool])
def test_integer_inputs_promote_to_float32(name: str, dtype) -> None:
    x = fg.tensor([1, 0, 1]).to(dtype)
    assert getattr(x, name)().dtype == fg.float32
    assert getattr(fg, name)(x).dtype == fg.float32
    if torch is not None:
        tx = torch.tensor([1, 0, 1]).to(torch.int64 if dtype == fg.int64 else torch.bool)
        assert str(getattr(tx, name)().dtype) == "torch.float32"


@pytest.mark.parametrize(
    "call,expected",
    [
        (lambda x: x.floor(), fg.int64),
        (lambda x: x.round(), fg.int64),
        (lambda x: x.square(), fg.int64),
        (lambda x: x.prod(), fg.int64),
        (lambda x: x.cumsum(0), fg.int64),
        (lambda x: x.cumprod(0), fg.int64),
        (lambda x: x.amax(), fg.int64),
        (lambda x: x.max(), fg.int64),
        (lambda x: x.max(0).indices, fg.int64),
        (lambda x: x.argmax(), fg.int64),
        (lambda x: x.clamp(0, 2), fg.int64),
        (lambda x: x.clamp(0.5), fg.float32),
        (lambda x: x.div(2, rounding_mode="floor"), fg.int64),
        (lambda x: x // 2, fg.int64),
        (lambda x: x % 2, fg.int64),
        (lambda x: x.atan2(x), fg.float32),
        (lambda x: x.logsumexp(0), fg.float32),
        (lambda x: x.all(), fg.bool),
        (lambda x: x.isnan(), fg.bool),
        (lambda x: (x > 1) & (x < 3), fg.bool),
        (lambda x: x.maximum(x), fg.int64),
    ],
)
def test_integer_result_dtypes_follow_torch(call, expected) -> None:
    x = fg.tensor([1, 2, 3])
    assert call(x).dtype == expected
    if torch is not None:
        want = {fg.int64: torch.int64, fg.float32: torch.float32, fg.bool: torch.bool}[expected]
        assert call(torch.tensor([1, 2, 3])).dtype == want


# ----- behaviours ---------------------------------------------------------------------------------


def test_max_dim_returns_named_tuple() -> None:
    x = fg.tensor([[1.0, 5.0, 2.0], [7.0, 0.0, 7.0]], requires_grad=True)
    r = x.max(1)
    values, indices = r
    assert values is r.values and indices is r.indices
    assert values.tolist() == [5.0, 7.0] and indices.tolist() == [1, 0]
    assert type(r).__name__ == "max" and "values=" in repr(r)
    r2 = fg.min(x, dim=0, keepdim=True)
    assert r2.values.shape == (1, 3) and r2.indices.tolist() == [[0, 1, 0]]


def test_logsumexp_does_not_overflow() -> None:
    x = fg.tensor([1000.0, 1000.0], requires_grad=True)
    y = fg.logsumexp(x, 0)
    assert abs(y.item() - (1000.0 + math.log(2.0))) < 1e-4
    y.backward()
    # exp(x - out) in float32 near 1000: out carries float32 rounding (torch's formula too).
    np.testing.assert_allclose(x.grad.numpy(), [0.5, 0.5], rtol=1e-4)
    x64 = fg.tensor([1000.0, 1000.0], dtype=fg.float64, requires_grad=True)
    fg.logsumexp(x64, 0).backward()
    np.testing.assert_allclose(x64.grad.numpy(), [0.5, 0.5], rtol=1e-12)
    naive = (x.detach().double().exp().sum()).log()
    assert math.isinf(naive.item())


def test_softmax_of_large_inputs_is_finite() -> None:
    x = fg.tensor([1000.0, 0.0, -1000.0], dtype=fg.float64)
    np.testing.assert_allclose(x.softmax(0).numpy(), [1.0, 0.0, 0.0])
    np.testing.assert_allclose(x.log_softmax(0).numpy(), [0.0, -1000.0, -2000.0])


def test_clamp_gradient_is_inclusive_at_the_bounds() -> None:
    x = fg.tensor([-1.0, 0.0, 0.5, 1.0, 2.0], requires_grad=True)
    x.clamp(0.0, 1.0).sum().backward()
    assert x.grad.tolist() == [0.0, 1.0, 1.0, 1.0, 0.0]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(
    "lo,hi",
    [(0.0, 1.0), (None, 1.0), (0.0, None), (1.0, 0.0), (-0.0, None), (math.nan, 1.0),
     (None, math.nan), (-math.inf, 2.5)],
)  # fmt: skip
def test_clamp_by_numbers_against_numpy(lo, hi, dtype) -> None:
    # Number bounds take one pass: min(max(x, lo), hi) with NumPy's NaN-propagating fmin/fmax
    # semantics for x, NaN everywhere for a NaN bound (torch's result), and on a strided view.
    x = np.array([math.nan, -0.0, 0.0, -2.0, 0.5, 1.0, 3.0, math.inf, -math.inf], dtype=dtype)
    want = x.copy()
    if lo is not None:
        want = np.maximum(want, np.array(lo, dtype=dtype))
    if hi is not None:
        want = np.minimum(want, np.array(hi, dtype=dtype))
    got = fg.tensor(x).clamp(lo, hi).numpy()
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(got, want)
    wide = np.stack([x, x[::-1]], 1)
    got_t = fg.tensor(wide).t().clamp(lo, hi).numpy()
    want_t = wide.T.copy()
    if lo is not None:
        want_t = np.maximum(want_t, np.array(lo, dtype=dtype))
    if hi is not None:
        want_t = np.minimum(want_t, np.array(hi, dtype=dtype))
    np.testing.assert_array_equal(got_t, want_t)


def test_nan_to_num_defaults() -> None:
    x = fg.tensor([math.nan, math.inf, -math.inf, 1.5])
    y = x.nan_to_num()
    assert y.tolist() == [
        0.0,
        float(np.finfo(np.float32).max),
        float(np.finfo(np.float32).min),
        1.5,
    ]
    z = fg.nan_to_num(x.double(), nan=1.0, posinf=2.0)
    assert z.tolist() == [1.0, 2.0, float(np.finfo(np.float64).min), 1.5]


def test_norm_subgradient_at_zero_is_zero() -> None:
    x = fg.zeros(3, dtype=fg.float64, requires_grad=True)
    x.norm().backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0]
    y = fg.zeros(3, dtype=fg.float64, requires_grad=True)
    fg.linalg.vector_norm(y, ord=3).backward()
    assert y.grad.tolist() == [0.0, 0.0, 0.0]


def test_max_all_splits_ties_and_max_dim_picks_one() -> None:
    x = fg.tensor([2.0, 2.0, 1.0], requires_grad=True)
    x.max().backward()
    assert x.grad.tolist() == [0.5, 0.5, 0.0]
    y = fg.tensor([2.0, 2.0, 1.0], requires_grad=True)
    y.max(0).values.backward()
    assert y.grad.tolist() == [1.0, 0.0, 0.0]


def test_nan_propagates_through_max_and_argmax() -> None:
    x = fg.tensor([1.0, math.nan, 3.0])
    assert math.isnan(x.max().item()) and x.argmax().item() == 1
    assert math.isnan(fg.maximum(x, fg.tensor(0.0)).tolist()[1])
