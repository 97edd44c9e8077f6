"""The in-place ops of the everyday API (``exp_ clamp_ lerp_ addcmul_ scatter_ index_copy_
normal_ ...``): torch's in-place semantics (version counter, leaf and view-of-leaf errors, an
overwritten saved tensor caught at backward, the result's ``grad_fn``), gradients through each
in-place op against its out-of-place composition, the random fills checked against their
distributions, and torch's error messages."""

from __future__ import annotations

import math

import ferrograd as fg
import numpy as np
import numpy.testing as npt
import pytest

LEAF_INPLACE = "a leaf Variable that requires grad is being used in an in-place operation."
VIEW_OF_LEAF_INPLACE = (
    "a view of a leaf Variable that requires grad is being used in an in-place operation."
)

UNARY = [
    r["name"]
    for r in fg._C._registry()
    if r["family"] == "unary" and r["name"] not in ("isnan", "isinf", "isfinite")
]
_DOMAIN = {
    "real": (-2.0, 2.0),
    "nonzero": (0.2, 2.0),
    "positive": (0.2, 2.0),
    "open_unit": (-0.9, 0.9),
    "above_one": (1.2, 3.0),
}
DOMAINS = {r["name"]: r["domain"] for r in fg._C._registry()}


def _x(low: float = -2.0, high: float = 2.0, shape=(2, 3), seed: int = 0) -> fg.Tensor:
    rng = np.random.default_rng(seed)
    return fg.tensor(rng.uniform(low, high, shape), dtype=fg.float64)


# (name, in-place call, the same op out of place); each takes (x, *others)
BINARY = [
    ("clamp_", lambda x: x.clamp_(-0.5, 0.5), lambda x: x.clamp(-0.5, 0.5)),
    ("clamp_min_", lambda x, m: x.clamp_min_(m), lambda x, m: x.clamp_min(m)),
    ("clamp_max_", lambda x, m: x.clamp_max_(m), lambda x, m: x.clamp_max(m)),
    ("pow_", lambda x: x.pow_(3), lambda x: x.pow(3)),
    ("fmod_", lambda x: x.fmod_(0.7), lambda x: x.fmod(0.7)),
    ("remainder_", lambda x: x.remainder_(0.9), lambda x: x.remainder(0.9)),
    ("atan2_", lambda x, y: x.atan2_(y), lambda x, y: x.atan2(y)),
    ("lerp_", lambda x, e, w: x.lerp_(e, w), lambda x, e, w: x.lerp(e, w)),
    ("addcmul_", lambda x, a, b: x.addcmul_(a, b, value=0.5), lambda x, a, b: x + 0.5 * a * b),
    ("addcdiv_", lambda x, a, b: x.addcdiv_(a, b, value=2), lambda x, a, b: x + 2 * a / (b + 3)),
    (
        "scatter_",
        lambda x, s: x.scatter_(1, fg.tensor([[0, 2], [1, 0]]), s[:, :2]),
        lambda x, s: x.scatter(1, fg.tensor([[0, 2], [1, 0]]), s[:, :2]),
    ),
    (
        "scatter_add_",
        lambda x, s: x.scatter_add_(0, fg.tensor([[1, 1, 0]]), s[:1]),
        lambda x, s: x.scatter_add(0, fg.tensor([[1, 1, 0]]), s[:1]),
    ),
    (
        "index_add_",
        lambda x, s: x.index_add_(1, fg.tensor([2, 2]), s[:, :2], alpha=3),
        lambda x, s: x.index_add(1, fg.tensor([2, 2]), s[:, :2], alpha=3),
    ),
    (
        "index_copy_",
        lambda x, s: x.index_copy_(0, fg.tensor([1]), s[:1]),
        lambda x, s: x.index_copy(0, fg.tensor([1]), s[:1]),
    ),
    (
        "index_fill_",
        lambda x: x.index_fill_(1, fg.tensor([0]), 4.0),
        lambda x: x.index_fill(1, fg.tensor([0]), 4.0),
    ),
    (
        "scatter_reduce_",
        lambda x, s: x.scatter_reduce_(1, fg.tensor([[0, 0], [2, 1]]), s[:, :2], "prod"),
        lambda x, s: x.scatter_reduce(1, fg.tensor([[0, 0], [2, 1]]), s[:, :2], "prod"),
    ),
    (
        "masked_scatter_",
        lambda x, s: x.masked_scatter_(fg.tensor([True, False, True]), s),
        lambda x, s: x.masked_scatter(fg.tensor([True, False, True]), s),
    ),
]


def _operands(name: str, n: int) -> list:
    if name == "addcdiv_":
        return [_x(seed=1), _x(seed=2) + 3.0]
    return [_x(0.5, 2.0, seed=k + 1) for k in range(n)]


def _grads_of(f, tensors):
    leaves = [t.detach().requires_grad_(True) for t in tensors]
    out = f(*leaves)
    w = fg.tensor(np.linspace(-1, 1, out.numel()).reshape(tuple(out.shape)), dtype=out.dtype)
    g = fg.autograd.grad((out * w).sum(), leaves, create_graph=True)
    # One more order: the gradient of the gradients' weighted sum.
    s = sum((gi * gi).sum() for gi in g)
    if not s.requires_grad:  # a piecewise-linear op: the gradient does not depend on the input
        return out, g, [None] * len(leaves)
    gg = fg.autograd.grad(s, leaves, allow_unused=True)
    return out, g, gg


# --------------------------------------------------------------------------------------------
# registry unary ops: generated in-place forms
# --------------------------------------------------------------------------------------------


def test_every_registry_row_but_the_bool_tests_has_an_inplace_method() -> None:
    for name in UNARY:
        assert callable(getattr(fg.Tensor, name + "_")), name
    for name in ("isnan", "isinf", "isfinite"):
        assert not hasattr(fg.Tensor, name + "_")


@pytest.mark.parametrize("name", [n for n in UNARY if DOMAINS[n] != "integer"])
def test_unary_inplace_equals_out_of_place_with_gradients(name: str) -> None:
    lo, hi = _DOMAIN[DOMAINS[name]]
    x = _x(lo, hi)
    if name == "logical_not":
        r = x.clone()
        assert getattr(r, name + "_")() is r
        npt.assert_array_equal(r.numpy(), np.logical_not(x.numpy()).astype(np.float64))
        return

    def inplace(t):
        return getattr(t * 1.0, name + "_")()

    def outofplace(t):
        return getattr(t * 1.0, name)()

    a, ga, gga = _grads_of(inplace, [x])
    b, gb, ggb = _grads_of(outofplace, [x])
    npt.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    npt.assert_allclose(ga[0].detach().numpy(), gb[0].detach().numpy(), rtol=1e-12)
    for p, q in zip(gga, ggb):
        if q is None:
            assert p is None or not np.any(p.numpy())
        else:
            npt.assert_allclose(p.numpy(), q.numpy(), rtol=1e-12, atol=1e-12)
    assert a.grad_fn.name() == b.grad_fn.name()


def test_bitwise_not_inplace_on_integers() -> None:
    t = fg.tensor([0, 5, -3])
    assert t.bitwise_not_() is t
    npt.assert_array_equal(t.numpy(), [-1, -6, 2])


def test_inplace_aliases_are_the_same_ops() -> None:
    x = _x(-0.9, 0.9)
    for alias, op in (("arcsin_", "asin"), ("negative_", "neg"), ("fix_", "trunc")):
        npt.assert_array_equal(getattr(x.clone(), alias)().numpy(), getattr(x, op)().numpy())


# --------------------------------------------------------------------------------------------
# the other in-place ops against their out-of-place forms
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name, inplace, outofplace", BINARY, ids=[b[0] for b in BINARY])
def test_inplace_op_equals_out_of_place_with_gradients(name, inplace, outofplace) -> None:
    n = inplace.__code__.co_argcount - 1
    x = _x(0.5, 2.0)
    others = _operands(name, n)
    if name == "masked_scatter_":
        others = [_x(0.5, 2.0, shape=(4,), seed=5)]
    if name == "lerp_":
        others = [_x(seed=3), _x(0.1, 0.9, shape=(3,), seed=4)]
    if name == "addcdiv_":
        # out of place written with the shifted divisor the in-place call sees
        others = [_x(seed=1), _x(seed=2) + 3.0]
        a, ga, _ = _grads_of(lambda t, p, q: inplace(t * 1.0, p, q), [x, *others])
        b, gb, _ = _grads_of(lambda t, p, q: outofplace(t * 1.0, p, q - 3), [x, *others])
    else:
        a, ga, gga = _grads_of(lambda t, *o: inplace(t * 1.0, *o), [x, *others])
        b, gb, ggb = _grads_of(lambda t, *o: outofplace(t * 1.0, *o), [x, *others])
        for p, q in zip(gga, ggb):
            if p is not None and q is not None:
                npt.assert_allclose(p.numpy(), q.numpy(), rtol=1e-10, atol=1e-12)
    npt.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-14)
    for p, q in zip(ga, gb):
        npt.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name, inplace, outofplace", BINARY, ids=[b[0] for b in BINARY])
def test_inplace_op_returns_self_bumps_version_and_keeps_storage(name, inplace, outofplace) -> None:
    n = inplace.__code__.co_argcount - 1
    x = _x(0.5, 2.0)
    others = [_x(0.5, 2.0, shape=(4,), seed=5)] if name == "masked_scatter_" else _operands(name, n)
    ptr, v0 = x.data_ptr(), x._version
    assert inplace(x, *others) is x
    assert x._version > v0
    assert x.data_ptr() == ptr


@pytest.mark.parametrize("name, inplace, outofplace", BINARY, ids=[b[0] for b in BINARY])
def test_inplace_on_a_leaf_requiring_grad_is_torchs_error(name, inplace, outofplace) -> None:
    n = inplace.__code__.co_argcount - 1
    others = [_x(0.5, 2.0, shape=(4,), seed=5)] if name == "masked_scatter_" else _operands(name, n)
    leaf = _x(0.5, 2.0).requires_grad_(True)
    with pytest.raises(RuntimeError, match=LEAF_INPLACE):
        inplace(leaf, *others)
    with pytest.raises(RuntimeError, match=VIEW_OF_LEAF_INPLACE):
        inplace(leaf[:], *others)
    with fg.no_grad():
        inplace(leaf, *others)  # allowed without grad mode, as torch


def test_unary_inplace_leaf_errors_and_no_grad() -> None:
    leaf = _x().requires_grad_(True)
    with pytest.raises(RuntimeError, match=LEAF_INPLACE):
        leaf.exp_()
    with pytest.raises(RuntimeError, match=VIEW_OF_LEAF_INPLACE):
        leaf[0].sin_()
    with fg.no_grad():
        leaf.tanh_()
    assert leaf.grad_fn is None


def test_inplace_on_a_saved_tensor_is_caught_at_backward() -> None:
    x = _x().requires_grad_(True)
    y = x * 1.0
    z = y.sin()  # SinBackward0 saves y
    y.exp_()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()
    # lerp saves its weight: the weight changed afterwards is caught too
    w = _x(0.1, 0.9).requires_grad_(True) * 1.0
    out = _x().lerp(_x(seed=3), w)
    assert out.grad_fn.name() == "LerpBackward1"
    w.clamp_(0.2, 0.8)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()


def test_inplace_through_a_view_writes_the_base_and_its_gradient() -> None:
    x = _x().requires_grad_(True)
    y = x * 2.0
    y[0].clamp_(-0.5, 0.5)
    y[:, 1].exp_()
    y.sum().backward()
    a = x.detach().numpy() * 2.0
    expect = np.full(a.shape, 2.0)
    inside = (a[0] >= -0.5) & (a[0] <= 0.5)
    expect[0] = np.where(inside, 2.0, 0.0)
    row0 = np.clip(a[0], -0.5, 0.5)
    col = np.array([row0[1], a[1, 1]])
    expect[:, 1] *= np.exp(col)
    npt.assert_allclose(x.grad.numpy(), expect, rtol=1e-12)
    assert y.grad_fn.name() == "CopySlices"


def test_grad_fn_names_of_inplace_results_are_torchs() -> None:
    y = _x().requires_grad_(True) * 1.0
    cases = [
        (lambda t: t.exp_(), "ExpBackward0"),
        (lambda t: t.clamp_(0, 1), "ClampBackward1"),
        (lambda t: t.clamp_min_(0), "ClampMinBackward0"),
        (lambda t: t.clamp_max_(fg.zeros(3, dtype=fg.float64)), "ClampMaxBackward1"),
        (lambda t: t.lerp_(fg.ones(3, dtype=fg.float64), 0.5), "LerpBackward0"),
        (lambda t: t.addcmul_(t.detach(), t.detach()), "AddcmulBackward0"),
        (lambda t: t.pow_(2), "PowBackward0"),
        (lambda t: t.index_fill_(0, fg.tensor([0]), 1.0), "IndexFillBackward0"),
        (lambda t: t.normal_(), "NormalBackward0"),
        (lambda t: t.uniform_(), "UniformBackward0"),
        (lambda t: t.random_(0, 4), "RandomBackward0"),
        (lambda t: t.exponential_(), "ExponentialBackward0"),
        (lambda t: t.bernoulli_(0.5), "BernoulliBackward2"),
        (lambda t: t.bernoulli_(fg.full((2, 3), 0.5, dtype=fg.float64)), "BernoulliBackward1"),
    ]
    for f, name in cases:
        t = y * 1.0
        f(t)
        assert t.grad_fn.name() == name


def test_random_fill_of_a_non_leaf_gives_zero_gradient() -> None:
    x = _x().requires_grad_(True)
    y = x * 3.0
    y.normal_()
    (y * 2).sum().backward()
    npt.assert_array_equal(x.grad.numpy(), np.zeros((2, 3)))


# --------------------------------------------------------------------------------------------
# random fills against their distributions (fixed seed; tolerances from the sample size)
# --------------------------------------------------------------------------------------------

N = 200_000


def _check_moments(v: np.ndarray, mean: float, var: float, fourth: float) -> None:
    """The sample mean within 6 standard errors of ``mean`` and the sample variance within 6
    standard errors of ``var`` (the variance's standard error from the fourth central moment)."""
    n = v.size
    assert abs(v.mean() - mean) < 6 * math.sqrt(var / n), (v.mean(), mean)
    se_var = math.sqrt((fourth - var**2) / n)
    assert abs(v.var() - var) < 6 * se_var, (v.var(), var)


@pytest.mark.parametrize("dtype", [fg.float32, fg.float64])
def test_normal_fill_matches_its_distribution(dtype) -> None:
    fg.manual_seed(1)
    t = fg.empty(N, dtype=dtype).normal_(1.5, 0.5)
    _check_moments(t.numpy().astype(np.float64), 1.5, 0.25, 3 * 0.5**4)


@pytest.mark.parametrize("dtype", [fg.float32, fg.float64])
def test_uniform_fill_matches_its_distribution(dtype) -> None:
    fg.manual_seed(2)
    a, b = -1.0, 3.0
    v = fg.empty(N, dtype=dtype).uniform_(a, b).numpy().astype(np.float64)
    assert v.min() >= a and v.max() < b
    w = b - a
    _check_moments(v, (a + b) / 2, w**2 / 12, w**4 / 80)
    # each quarter of the range holds a quarter of the draws (binomial, 6 standard errors)
    counts = np.histogram(v, bins=4, range=(a, b))[0]
    assert np.all(np.abs(counts - N / 4) < 6 * math.sqrt(N * 0.25 * 0.75))


def test_exponential_fill_matches_its_distribution() -> None:
    fg.manual_seed(3)
    lam = 2.0
    v = fg.empty(N, dtype=fg.float64).exponential_(lam).numpy()
    assert v.min() >= 0
    _check_moments(v, 1 / lam, 1 / lam**2, 9 / lam**4)


@pytest.mark.parametrize("p", [0.1, 0.5])
def test_bernoulli_fill_matches_its_distribution(p: float) -> None:
    fg.manual_seed(4)
    v = fg.empty(N).bernoulli_(p).numpy().astype(np.float64)
    assert set(np.unique(v)) <= {0.0, 1.0}
    var = p * (1 - p)
    assert abs(v.mean() - p) < 6 * math.sqrt(var / N)


def test_bernoulli_fill_with_a_probability_tensor() -> None:
    fg.manual_seed(5)
    probs = fg.tensor([0.0, 0.25, 1.0], dtype=fg.float64)
    v = fg.empty(N // 4, 3, dtype=fg.float64).bernoulli_(probs).numpy()
    assert v[:, 0].sum() == 0 and v[:, 2].min() == 1
    assert abs(v[:, 1].mean() - 0.25) < 6 * math.sqrt(0.25 * 0.75 / (N // 4))


@pytest.mark.parametrize("dtype", [fg.float32, fg.int64])
def test_random_fill_is_uniform_over_its_integers(dtype) -> None:
    fg.manual_seed(6)
    v = fg.empty(N, dtype=dtype).random_(-2, 3).numpy()
    assert set(np.unique(v).tolist()) == {-2, -1, 0, 1, 2}
    counts = np.bincount((v + 2).astype(np.int64), minlength=5)
    assert np.all(np.abs(counts - N / 5) < 6 * math.sqrt(N * 0.2 * 0.8))
    w = fg.empty(1000, dtype=dtype).random_(7).numpy()
    assert w.min() >= 0 and w.max() <= 6


def test_randint_matches_its_distribution_and_dtype() -> None:
    fg.manual_seed(7)
    t = fg.randint(3, 8, (N,))
    assert t.dtype == fg.int64
    counts = np.bincount(t.numpy() - 3, minlength=5)
    assert counts.size == 5
    assert np.all(np.abs(counts - N / 5) < 6 * math.sqrt(N * 0.2 * 0.8))
    assert fg.randint(5, (2, 3)).shape == (2, 3)
    assert fg.randint(0, 5, size=(4,), dtype=fg.float32).dtype == fg.float32
    like = fg.randint_like(fg.zeros(3, 4), 10)
    assert like.dtype == fg.float32 and like.shape == (3, 4)
    assert like.numpy().max() < 10 and like.numpy().min() >= 0


def test_random_fills_follow_the_seed_and_generators() -> None:
    fg.manual_seed(11)
    a = fg.empty(5).normal_()
    fg.manual_seed(11)
    b = fg.empty(5).normal_()
    npt.assert_array_equal(a.numpy(), b.numpy())
    g1, g2 = fg.Generator().manual_seed(3), fg.Generator().manual_seed(3)
    npt.assert_array_equal(
        fg.empty(5).uniform_(generator=g1).numpy(), fg.empty(5).uniform_(generator=g2).numpy()
    )
    npt.assert_array_equal(
        fg.randint(0, 100, (6,), generator=fg.Generator().manual_seed(9)).numpy(),
        fg.randint(0, 100, (6,), generator=fg.Generator().manual_seed(9)).numpy(),
    )


# --------------------------------------------------------------------------------------------
# errors with torch's messages
# --------------------------------------------------------------------------------------------


def test_random_fill_errors() -> None:
    f = fg.zeros(3)
    i = fg.zeros(3, dtype=fg.int64)
    with pytest.raises(
        RuntimeError, match=r"random_ expects 'from' to be less than 'to', but got from=5 >= to=2"
    ):
        f.random_(5, 2)
    with pytest.raises(
        RuntimeError,
        match=r"uniform_ expects to return a \[from, to\) range, but found from=2 > to=1",
    ):
        f.uniform_(2, 1)
    with pytest.raises(RuntimeError, match="normal expects std >= 0.0, but found std -1"):
        f.normal_(0, -1)
    with pytest.raises(
        RuntimeError, match="exponential_ expects lambda > 0.0, but found lambda=-1"
    ):
        f.exponential_(-1)
    with pytest.raises(RuntimeError, match=r"bernoulli_ expects p to be in \[0, 1\], but got p=2"):
        f.bernoulli_(2.0)
    with pytest.raises(
        NotImplementedError, match="\"normal_kernel_cpu\" not implemented for 'Long'"
    ):
        i.normal_()
    with pytest.raises(
        NotImplementedError, match="\"check_uniform_bounds\" not implemented for 'Long'"
    ):
        i.uniform_()
    with pytest.raises(
        RuntimeError, match="Exponential distribution is a continuous probability distribution"
    ):
        i.exponential_()


def test_inplace_result_type_and_shape_errors() -> None:
    i = fg.tensor([1, 2, 3])
    with pytest.raises(
        RuntimeError, match="result type Float can't be cast to the desired output type Long"
    ):
        i.exp_()
    with pytest.raises(
        RuntimeError, match="result type Float can't be cast to the desired output type Long"
    ):
        i.pow_(0.5)
    with pytest.raises(
        RuntimeError, match=r"output with shape \[3\] doesn't match the broadcast shape \[2, 3\]"
    ):
        fg.zeros(3).lerp_(fg.zeros(2, 3), 0.5)
    with pytest.raises(
        NotImplementedError, match="\"lerp_kernel_scalar\" not implemented for 'Long'"
    ):
        i.lerp_(i, 0.5)
    with pytest.raises(RuntimeError, match="Integer division with addcdiv is no longer supported"):
        fg.zeros(3).addcdiv_(i, i)


def test_pointwise_errors() -> None:
    f, d = fg.zeros(3), fg.zeros(3, dtype=fg.float64)
    with pytest.raises(RuntimeError, match="expected dtype float for `end` but got dtype double"):
        fg.lerp(f, d, 0.5)
    with pytest.raises(
        RuntimeError, match="expected dtype float for `weight` but got dtype double"
    ):
        fg.lerp(f, f, d)
    with pytest.raises(RuntimeError, match="Float did not match Double"):
        fg.isclose(f, d)
    with pytest.raises(
        RuntimeError, match="rtol must be greater than or equal to zero, but got -1"
    ):
        fg.isclose(f, f, rtol=-1)
    assert fg.equal(f, f) and not fg.equal(f, f[:2])
    assert fg.allclose(f, f + 1e-9) and not fg.allclose(f, f + 1e-3)
