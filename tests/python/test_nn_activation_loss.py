"""Native activation, softmax and loss kernels (``ferrograd.nn.functional``) against torch:
values and gradients in float32 and float64, extreme inputs, class weights, ``ignore_index``,
label smoothing, every reduction, torch's node names and error messages. Without torch only the
closed-form checks run."""

from __future__ import annotations

import math

import ferrograd as fg
import ferrograd.nn.functional as F
import numpy as np
import pytest


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


def _pair(torch, a, dtype="float64", requires_grad=True):
    a = np.asarray(a, dtype=dtype)
    x = fg.tensor(a, requires_grad=requires_grad)
    t = torch.tensor(a, requires_grad=requires_grad)
    return x, t


def _close(a, b, rtol, atol):
    np.testing.assert_allclose(
        np.asarray(a.detach().numpy(), dtype=np.float64),
        np.asarray(b.detach().numpy(), dtype=np.float64),
        rtol=rtol,
        atol=atol,
    )


TOL = {"float64": (1e-10, 1e-12), "float32": (2e-6, 1e-6)}

# Extremes, the kinks of the piecewise functions and an ordinary spread.
GRID = np.concatenate(
    [
        [-1000.0, -100.0, -30.0, -20.5, -6.0, -3.0, -1.0, -1e-8, 0.0, 1e-8, 1.0, 3.0, 6.0],
        [20.5, 30.0, 100.0, 1000.0],
        np.linspace(-8, 8, 161),
    ]
)

ACTS = [
    ("gelu", {}),
    ("gelu", {"approximate": "tanh"}),
    ("silu", {}),
    ("mish", {}),
    ("elu", {}),
    ("elu", {"alpha": 0.4}),
    ("selu", {}),
    ("celu", {"alpha": 1.7}),
    ("softplus", {}),
    ("softplus", {"beta": 2.0, "threshold": 3.0}),
    ("hardswish", {}),
    ("hardsigmoid", {}),
    ("relu6", {}),
    ("leaky_relu", {"negative_slope": 0.2}),
    ("hardtanh", {"min_val": -0.5, "max_val": 2.0}),
    ("logsigmoid", {}),
    ("softsign", {}),
    ("tanhshrink", {}),
]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name,kw", ACTS, ids=[f"{n}{sorted(k.items())}" for n, k in ACTS])
def test_activation_values_and_grads_match_torch(torch, name, kw, dtype):
    x, t = _pair(torch, GRID, dtype)
    y = getattr(F, name)(x, **kw)
    z = getattr(torch.nn.functional, name)(t, **kw)
    rtol, atol = TOL[dtype]
    if name == "gelu" and dtype == "float32" and not kw:
        # torch's float32 gelu computes 1 + erf(x/sqrt2) and loses Phi(x) for x < -5;
        # ferrograd's is accurate there (checked against float64 below).
        atol = 1e-6
    _close(y, z, rtol, atol)
    gy = np.cos(np.arange(GRID.size)).astype(dtype)
    y.backward(fg.tensor(gy))
    z.backward(torch.tensor(gy))
    _close(x.grad, t.grad, rtol * 4, atol * 4)
    if name not in ("softsign", "tanhshrink"):
        assert y.grad_fn.name() == z.grad_fn.name()


@pytest.mark.parametrize("name,kw", ACTS, ids=[f"{n}{sorted(k.items())}" for n, k in ACTS])
def test_float32_activation_is_float64_rounded(name, kw):
    """Compositions (softsign, tanhshrink) are left out: their float32 cancellation is torch's
    too. The float32 kernels against the float64 ones (an independent libm/std path): within a
    couple of float32 ulps of the rounded float64 value."""
    if name in ("softsign", "tanhshrink"):
        return
    a = GRID.astype(np.float32)
    y32 = getattr(F, name)(fg.tensor(a), **kw).numpy().astype(np.float64)
    y64 = getattr(F, name)(fg.tensor(a.astype(np.float64)), **kw).numpy()
    ulp = np.spacing(np.abs(y64).astype(np.float32)).astype(np.float64)
    assert np.all(np.abs(y32 - y64) <= 2 * ulp + 1e-44)


def test_float32_hardsigmoid_is_torch_float_formula():
    """The float32 kernel computes torch's float formula min(max(x + 3, 0), 6) / 6 (NumPy in
    float32 is the truth, bit for bit), over a length that leaves a partial vector, and the
    gradient g / 6 strictly inside (-3, 3), 0 at the kinks and beyond."""
    rng = np.random.default_rng(3)
    a = np.concatenate(
        [rng.uniform(-5, 5, 1000), [-3.0, 3.0, -0.0, np.inf, -np.inf, np.nan]]
    ).astype(np.float32)
    want = np.clip(a + np.float32(3), np.float32(0), np.float32(6)) / np.float32(6)
    x = fg.tensor(a, requires_grad=True)
    y = F.hardsigmoid(x)
    np.testing.assert_array_equal(y.detach().numpy(), want)
    g = rng.standard_normal(a.size).astype(np.float32)
    y.backward(fg.tensor(g))
    inside = (a > -3) & (a < 3)
    np.testing.assert_array_equal(
        x.grad.numpy(), np.where(inside, g * np.float32(1.0 / 6.0), np.float32(0))
    )


def test_gelu_closed_form():
    a = np.linspace(-10, 10, 401)
    y = F.gelu(fg.tensor(a)).numpy()
    want = np.array([v * 0.5 * math.erfc(-v / math.sqrt(2)) for v in a])
    np.testing.assert_allclose(y, want, rtol=1e-13, atol=1e-300)


def test_erf_float32_within_one_ulp_of_float64():
    a = np.linspace(-6, 6, 200001).astype(np.float32)
    got = fg.tensor(a).erf().numpy().astype(np.float64)
    want = np.array([math.erf(float(v)) for v in a])
    ulp = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    assert np.max(np.abs(got - want) / np.maximum(ulp, 1e-45)) <= 1.0


@pytest.mark.parametrize("reduction", ["none", "mean"])
def test_float32_bce_with_logits_against_float64(reduction):
    # The float32 lanes past the parallel threshold, both tails (t = 0 with x << 0 cancels
    # unless summed in torch's order): loss and gradient against float64, the mean the same at
    # 1 and 2 threads.
    rng = np.random.default_rng(12)
    x = np.concatenate([GRID, [-87.0, -50.0, -17.0, 17.0, 50.0, 87.0], rng.normal(size=70_000) * 8])
    x = x.astype(np.float32)
    t = rng.uniform(0.0, 1.0, x.size).astype(np.float32)
    t[: GRID.size + 6] = 0.0
    t[GRID.size + 6 : 2 * GRID.size] = 1.0
    x64, t64 = x.astype(np.float64), t.astype(np.float64)
    want = (1.0 - t64) * x64 + np.maximum(-x64, 0.0) + np.log1p(np.exp(-np.abs(x64)))
    h = np.exp(-np.abs(x64))
    want_grad = np.where(x64 >= 0, 1.0, h) / (1.0 + h) - t64
    got = {}
    prev = fg.get_num_threads()
    try:
        for threads in (1, 2):
            fg.set_num_threads(threads)
            xt = fg.tensor(x, requires_grad=True)
            y = F.binary_cross_entropy_with_logits(xt, fg.tensor(t), reduction=reduction)
            y.sum().backward()
            got[threads] = (y.detach().numpy(), xt.grad.numpy())
    finally:
        fg.set_num_threads(prev)
    assert got[1][0].tobytes() == got[2][0].tobytes()
    scale = 1.0 if reduction == "none" else 1.0 / x.size
    if reduction == "none":
        # torch's formula in float32 rounds (1 - t) x at the scale of |x| before the sum
        ulp = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
        assert np.all(np.abs(got[1][0] - want) <= 4 * ulp + 2.0**-23 * np.abs(x64))
        # with t of 0 or 1 nothing rounds at that scale: a few ulps of the loss itself
        k = 2 * GRID.size
        assert np.all(np.abs(got[1][0][:k] - want[:k]) <= 4 * ulp[:k] + 1e-44)
    else:
        np.testing.assert_allclose(got[1][0], want.mean(), rtol=1e-6)
    np.testing.assert_allclose(got[1][1], want_grad * scale, rtol=1e-6, atol=1e-7 * scale)


def test_float32_glu_and_gradient_against_float64():
    # The float32 lanes (sigmoid from e^-|b|) on both tails, near 0 and a spread, past the
    # parallel threshold: within a few float32 ulps of the float64 formulas.
    rng = np.random.default_rng(3)
    b = np.concatenate([GRID, [-103.0, -87.0, 87.0, 103.0], rng.normal(size=40_000) * 6])
    a = rng.normal(size=b.size)
    x = np.concatenate([a, b]).astype(np.float32)
    g = rng.normal(size=b.size).astype(np.float32)
    a64, b64, g64 = (v.astype(np.float64) for v in (x[: b.size], x[b.size :], g))
    h = np.exp(-np.abs(b64))  # sigmoid and its slope without overflow or cancellation
    s, ds = np.where(b64 >= 0, 1.0, h) / (1.0 + h), h / (1.0 + h) ** 2
    t = fg.tensor(x, requires_grad=True)
    y = F.glu(t)
    y.backward(fg.tensor(g))
    want_grad = np.concatenate([g64 * s, g64 * a64 * ds])
    # (the gradient g a s' rounds two more products than the value a s)
    for got, want, ulps in ((y.detach().numpy(), a64 * s, 4), (t.grad.numpy(), want_grad, 7)):
        ulp = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
        assert np.all(np.abs(got - want) <= ulps * ulp + 1e-44)


def test_glu_and_dropout(torch):
    x, t = _pair(torch, np.random.default_rng(0).normal(size=(3, 4, 6)))
    for dim in (-1, 1):
        y, z = F.glu(x, dim), torch.nn.functional.glu(t, dim)
        _close(y, z, 1e-12, 1e-12)
        y.sum().backward()
        z.sum().backward()
        _close(x.grad, t.grad, 1e-12, 1e-12)
        x.grad = None
        t.grad = None
    assert y.grad_fn.name() == "GluBackward0"
    with pytest.raises(
        RuntimeError, match="Halving dimension must be even, but dimension 1 is size 5"
    ):
        F.glu(fg.ones(3, 5))
    with pytest.raises(RuntimeError, match="glu does not support scalars"):
        F.glu(fg.tensor(1.0))
    fg.manual_seed(0)
    d = fg.ones(1000, requires_grad=True)
    y = F.dropout(d, 0.3)
    kept = y.detach().numpy() != 0
    np.testing.assert_allclose(y.detach().numpy()[kept], 1 / 0.7)
    assert 0.6 < kept.mean() < 0.8
    y.sum().backward()
    np.testing.assert_allclose(d.grad.numpy(), y.detach().numpy())


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("shape,dim", [((4, 7), -1), ((4, 7), 0), ((2, 5, 3), 1), ((3,), 0)])
@pytest.mark.parametrize("fn", ["softmax", "log_softmax", "softmin"])
def test_softmax_family_matches_torch(torch, fn, shape, dim, dtype):
    a = np.random.default_rng(1).normal(size=shape) * 30
    x, t = _pair(torch, a, dtype)
    y = getattr(F, fn)(x, dim=dim)
    z = getattr(torch.nn.functional, fn)(t, dim=dim)
    rtol, atol = TOL[dtype]
    _close(y, z, rtol, atol * 10)
    g = np.sin(np.arange(a.size)).reshape(shape).astype(dtype)
    y.backward(fg.tensor(g))
    z.backward(torch.tensor(g))
    _close(x.grad, t.grad, rtol * 10, atol * 10)
    # the expanded gradient of a sum takes the broadcast-value path
    x.grad = None
    t.grad = None
    getattr(F, fn)(x, dim=dim).sum().backward()
    getattr(torch.nn.functional, fn)(t, dim=dim).sum().backward()
    _close(x.grad, t.grad, rtol * 10, atol * 10)


def test_softmax_extremes_match_torch(torch):
    a = np.array([[1000.0, -1000.0, 0.0], [np.inf, 1.0, 2.0], [-np.inf, -np.inf, -np.inf]])
    for fn in ("softmax", "log_softmax"):
        y = getattr(F, fn)(fg.tensor(a), dim=1).numpy()
        z = getattr(torch.nn.functional, fn)(torch.tensor(a), dim=1).numpy()
        np.testing.assert_array_equal(np.isnan(y), np.isnan(z))
        np.testing.assert_allclose(y[~np.isnan(y)], z[~np.isnan(z)])


def _idx(torch, a):
    a = np.asarray(a, dtype=np.int64)
    return fg.tensor(a), torch.tensor(a)


CE_CASES = [
    # (input shape, target, kwargs)
    ((4, 5), [0, 4, 2, 1], {}),
    ((4, 5), [0, 4, 2, 1], {"reduction": "sum"}),
    ((4, 5), [0, 4, 2, 1], {"reduction": "none"}),
    ((4, 5), [0, -100, 2, 1], {"weight": [0.5, 1.0, 2.0, 0.1, 3.0]}),
    ((4, 5), [0, 3, 2, 3], {"ignore_index": 3, "label_smoothing": 0.2}),
    ((4, 5), [0, 3, 2, 1], {"weight": [0.5, 1.0, 2.0, 0.1, 3.0], "label_smoothing": 0.3}),
    (
        (4, 5),
        [0, 3, 2, 1],
        {"weight": [0.5, 1.0, 2.0, 0.1, 3.0], "label_smoothing": 0.3, "reduction": "none"},
    ),
    ((2, 5, 3), [[0, 1, 4], [2, 2, 3]], {"label_smoothing": 0.1}),
    ((2, 5, 3, 2), np.arange(12).reshape(2, 3, 2) % 5, {"reduction": "sum"}),
    ((5,), 3, {}),
]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", range(len(CE_CASES)))
@pytest.mark.parametrize("fn", ["cross_entropy", "nll_loss"])
def test_class_losses_match_torch(torch, fn, case, dtype):
    shape, target, kw = CE_CASES[case]
    if fn == "nll_loss" and "label_smoothing" in kw:
        kw = {k: v for k, v in kw.items() if k != "label_smoothing"}
    a = np.random.default_rng(case).normal(size=shape) * 5
    x, t = _pair(torch, a, dtype)
    i, j = _idx(torch, target)
    kf = dict(kw)
    kt = dict(kw)
    if "weight" in kw:
        kf["weight"] = fg.tensor(np.asarray(kw["weight"], dtype=dtype))
        kt["weight"] = torch.tensor(np.asarray(kw["weight"], dtype=dtype))
    y = getattr(F, fn)(x, i, **kf)
    z = getattr(torch.nn.functional, fn)(t, j, **kt)
    rtol, atol = TOL[dtype]
    _close(y, z, rtol * 10, atol * 10)
    g = np.cos(np.arange(max(z.numel(), 1))).reshape(tuple(z.shape)).astype(dtype)
    y.backward(fg.tensor(g))
    z.backward(torch.tensor(g))
    _close(x.grad, t.grad, rtol * 10, atol * 10)
    assert y.grad_fn.name() in ("NllLossBackward0", "NllLoss2DBackward0")


def test_cross_entropy_extreme_logits(torch):
    a = np.array([[1000.0, -1000.0, 0.0], [-1000.0, 1000.0, 999.0]])
    x, t = _pair(torch, a)
    i, j = _idx(torch, [1, 2])
    y = F.cross_entropy(x, i, label_smoothing=0.1)
    z = torch.nn.functional.cross_entropy(t, j, label_smoothing=0.1)
    _close(y, z, 1e-12, 1e-9)
    y.backward()
    z.backward()
    _close(x.grad, t.grad, 1e-12, 1e-12)


def test_cross_entropy_probabilities(torch):
    rng = np.random.default_rng(3)
    a = rng.normal(size=(4, 5))
    p = rng.dirichlet(np.ones(5), size=4)
    for kw in ({}, {"label_smoothing": 0.2, "reduction": "none"}, {"reduction": "sum"}):
        x, t = _pair(torch, a)
        q, r = _pair(torch, p)
        y = F.cross_entropy(x, q, **kw)
        z = torch.nn.functional.cross_entropy(t, r, **kw)
        _close(y, z, 1e-12, 1e-12)
        y.sum().backward()
        z.sum().backward()
        _close(x.grad, t.grad, 1e-12, 1e-12)
        _close(q.grad, r.grad, 1e-12, 1e-12)


POINTWISE = [
    ("mse_loss", {}),
    ("mse_loss", {"reduction": "sum"}),
    ("l1_loss", {"reduction": "none"}),
    ("smooth_l1_loss", {"beta": 0.7}),
    ("smooth_l1_loss", {"beta": 0.0, "reduction": "sum"}),
    ("huber_loss", {"delta": 0.8}),
    ("huber_loss", {"delta": 2.5, "reduction": "none"}),
    ("binary_cross_entropy", {}),
    ("binary_cross_entropy", {"reduction": "none", "weight": True}),
    ("binary_cross_entropy_with_logits", {}),
    ("binary_cross_entropy_with_logits", {"pos_weight": True, "weight": True}),
    ("kl_div", {"reduction": "batchmean"}),
    ("kl_div", {"reduction": "sum", "log_target": True}),
]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name,kw", POINTWISE, ids=[f"{n}{sorted(k)}" for n, k in POINTWISE])
def test_pointwise_losses_match_torch(torch, name, kw, dtype):
    rng = np.random.default_rng(5)
    if name == "binary_cross_entropy":
        a = rng.uniform(0.01, 0.99, size=(3, 4))
        a[0, 0], a[0, 1] = 0.0, 1.0  # the -100 clamp
    elif name == "kl_div":
        a = np.log(rng.dirichlet(np.ones(4), size=3))
    else:
        a = rng.normal(size=(3, 4)) * 3
        a[0, 0] = 1000.0
        a[0, 1] = -1000.0
    b = rng.uniform(0.0, 1.0, size=(3, 4))
    x, t = _pair(torch, a, dtype)
    q, r = _pair(torch, b, dtype, requires_grad=name != "binary_cross_entropy_with_logits")
    kf, kt = dict(kw), dict(kw)
    for key, size in (("weight", (3, 4)), ("pos_weight", (4,))):
        if kw.get(key):
            w = rng.uniform(0.5, 2.0, size=size).astype(dtype)
            kf[key], kt[key] = fg.tensor(w), torch.tensor(w)
    y = getattr(F, name)(x, q, **kf)
    z = getattr(torch.nn.functional, name)(t, r, **kt)
    rtol, atol = TOL[dtype]
    _close(y, z, rtol * 10, atol * 10)
    y.sum().backward()
    z.sum().backward()
    if name == "binary_cross_entropy":
        # at x exactly 0 or 1 torch divides by its 1e-12 floor; so do we
        pass
    _close(x.grad, t.grad, rtol * 10, atol * 10)
    if q.requires_grad:
        _close(q.grad, r.grad, rtol * 10, atol * 10)


def _bce_float64(x, y):
    """BCE in float64 with torch's -100 floor, log1p for the complement."""
    with np.errstate(divide="ignore"):
        lx = np.maximum(np.log(x), -100.0)
        l1x = np.maximum(np.log1p(-x), -100.0)
    return -(y * lx + (1.0 - y) * l1x)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_float32_bce_vector_logs_against_float64(reduction):
    # Above the parallel threshold, with probabilities from 1e-30 up to 1 - 2^-24 (where
    # ln(1 - x) needs log1p accuracy) and exact 0 and 1 (the floor, taken on the scalar path).
    rng = np.random.default_rng(11)
    n = 70_001
    x = np.exp(rng.uniform(np.log(1e-30), 0.0, n)).astype(np.float32)
    x[: n // 3] = (1.0 - x[: n // 3]).astype(np.float32)
    x[[5, 6, 40_000]] = [0.0, 1.0, np.float32(1e-40)]
    x = np.clip(x, 0.0, 1.0).astype(np.float32)
    y = rng.uniform(0.0, 1.0, n).astype(np.float32)
    want = _bce_float64(x.astype(np.float64), y.astype(np.float64))
    got = {}
    prev = fg.get_num_threads()
    try:
        for threads in (1, 2):
            fg.set_num_threads(threads)
            got[threads] = F.binary_cross_entropy(
                fg.tensor(x), fg.tensor(y), reduction=reduction
            ).numpy()
    finally:
        fg.set_num_threads(prev)
    assert got[1].tobytes() == got[2].tobytes()  # the same at any thread count
    if reduction == "none":
        np.testing.assert_allclose(got[1], want, rtol=2e-7, atol=1e-30)
    else:
        ref = want.sum() / (n if reduction == "mean" else 1)
        np.testing.assert_allclose(got[1], ref, rtol=1e-6)


def _torch_error(torch, fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the exception type is what is compared
        return type(e), str(e)
    raise AssertionError("torch raised nothing")


ERRORS = [
    ("target out of range", lambda L, r, i: L.nn.functional.cross_entropy(r(3, 5), i([0, 7, 1]))),
    ("negative target", lambda L, r, i: L.nn.functional.nll_loss(r(3, 5), i([0, -1, 1]))),
    (
        "float target",
        lambda L, r, i: L.nn.functional.nll_loss(r(3, 5), L.tensor([0.0, 1.0, 1.0])),
    ),
    ("batch mismatch", lambda L, r, i: L.nn.functional.cross_entropy(r(3, 5), i([0, 1]))),
    ("probs wrong shape", lambda L, r, i: L.nn.functional.cross_entropy(r(3, 5), r(3, 4))),
    (
        "kd target shape",
        lambda L, r, i: L.nn.functional.nll_loss(r(2, 5, 3), i([[0, 1], [1, 1]])),
    ),
    ("weight size", lambda L, r, i: L.nn.functional.cross_entropy(r(3, 5), i([0, 1, 1]), r(4))),
    (
        "label smoothing",
        lambda L, r, i: L.nn.functional.cross_entropy(r(3, 5), i([0, 1, 1]), label_smoothing=2.0),
    ),
    (
        "integer probabilities",
        lambda L, r, i: L.nn.functional.cross_entropy(r(2, 3), i([[0, 1, 1], [1, 0, 0]])),
    ),
    ("bce range", lambda L, r, i: L.nn.functional.binary_cross_entropy(r(2) + 2, r(2))),
    ("gelu approximate", lambda L, r, i: L.nn.functional.gelu(r(2), approximate="x")),
    ("gelu long", lambda L, r, i: L.nn.functional.gelu(i([1, 2]))),
    ("silu long", lambda L, r, i: L.nn.functional.silu(i([1, 2]))),
    ("glu odd", lambda L, r, i: L.nn.functional.glu(r(3, 5))),
]


@pytest.mark.parametrize("case", range(len(ERRORS)), ids=[e[0] for e in ERRORS])
def test_errors_match_torch(torch, case):
    _, fn = ERRORS[case]
    want_type, want_msg = _torch_error(
        torch, lambda: fn(torch, lambda *s: torch.rand(*s), lambda v: torch.tensor(v))
    )
    with pytest.raises(want_type) as info:
        fn(fg, lambda *s: fg.rand(*s), lambda v: fg.tensor(np.asarray(v, dtype=np.int64)))
    assert str(info.value) == want_msg


def test_double_backward_through_fused_kernels():
    """create_graph: the backward of each native node is itself differentiable; checked with
    float64 finite differences of the first derivative."""
    a = np.array([-2.3, -0.4, 0.3, 1.7, 4.2])
    for fn in (
        lambda x: F.gelu(x),
        lambda x: F.silu(x),
        lambda x: F.mish(x),
        lambda x: F.softplus(x, 1.5, 5.0),
        lambda x: F.elu(x, 0.7),
        lambda x: F.log_softmax(x.reshape(1, 5), dim=1) * fg.arange(5.0),
        lambda x: F.cross_entropy(x.reshape(1, 5), fg.tensor([2]), label_smoothing=0.2),
    ):

        def first(v, fn=fn):
            x = fg.tensor(v, requires_grad=True)
            (g,) = fg.autograd.grad(fn(x).sum(), x, create_graph=True)
            return x, g

        x, g = first(a)
        (h,) = fg.autograd.grad((g * fg.tensor(np.cos(a))).sum(), x)
        eps = 1e-6
        num = np.zeros_like(a)
        for k in range(a.size):
            e = np.zeros_like(a)
            e[k] = eps
            gp = first(a + e)[1].detach().numpy()
            gm = first(a - e)[1].detach().numpy()
            num[k] = ((gp - gm) / (2 * eps) * np.cos(a)).sum()
        np.testing.assert_allclose(h.numpy(), num, rtol=1e-6, atol=1e-7)


MODULES = [
    ("CELU", (0.5,)),
    ("CELU", (1.0, True)),
    ("Hardsigmoid", ()),
    ("LogSigmoid", ()),
    ("GLU", (1,)),
    ("Softsign", ()),
    ("Tanhshrink", ()),
    ("Softmin", (1,)),
    ("PReLU", (4,)),
    ("PReLU", ()),
    ("Threshold", (0.1, 20.0)),
    ("SELU", ()),
    ("Mish", ()),
    ("Hardswish", ()),
]


@pytest.mark.parametrize("name,args", MODULES, ids=[f"{n}{a}" for n, a in MODULES])
def test_modules_match_torch(torch, name, args):
    a = (np.random.default_rng(0).normal(size=(2, 4, 6)) * 3).astype(np.float32)
    m = getattr(fg.nn, name)(*args)
    t = getattr(torch.nn, name)(*args)
    assert repr(m) == repr(t)
    assert [k for k, _ in m.named_parameters()] == [k for k, _ in t.named_parameters()]
    x = fg.tensor(a, requires_grad=True)
    y = torch.tensor(a, requires_grad=True)
    # inplace modules write into their input: give them a non-leaf
    fo, to = m(x * 1.0), t(y * 1.0)
    _close(fo, to, 1e-6, 1e-6)
    fo.sum().backward()
    to.sum().backward()
    _close(x.grad, y.grad, 1e-5, 1e-6)
    for (_, p), (_, q) in zip(m.named_parameters(), t.named_parameters()):
        _close(p.grad, q.grad, 1e-5, 1e-5)


@pytest.mark.parametrize(
    ("name", "kw", "x", "slope"),
    [
        ("leaky_relu", {"negative_slope": 0.2}, -1.5, 0.2),
        ("leaky_relu", {"negative_slope": 0.2}, 2.0, 1.0),
        ("hardtanh", {"min_val": -0.5, "max_val": 1.0}, 0.3, 1.0),
        ("hardshrink", {"lambd": 0.3}, 0.7, 1.0),
    ],
)
def test_piecewise_linear_gradient_under_create_graph_keeps_float64(name, kw, x, slope):
    # With create_graph the derivative is built from ops; its constants must be float64 for a
    # float64 input (they were float32: where() of two wrapped numbers, 0.2 -> 0.20000000298).
    t = fg.tensor([x], dtype=fg.float64, requires_grad=True)
    (g,) = fg.autograd.grad(getattr(F, name)(t, **kw).sum(), t, create_graph=True)
    assert g.dtype == fg.float64
    assert g.item() == slope


@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div_is_one_node_with_closed_form_gradients(log_target):
    # One node for the loss and its reduction; a target broadcast over the rows, with a zero
    # (0 log 0 = 0: its gradient is -x, the log term contributes nothing there).
    rng = np.random.default_rng(9)
    a = np.log(rng.dirichlet(np.ones(4), size=3))
    p = np.array([0.0, 0.2, 0.5, 0.3])
    b = np.log(np.array([0.1, 0.2, 0.4, 0.3])) if log_target else p
    x = fg.tensor(a, requires_grad=True)
    t = fg.tensor(b, requires_grad=True)
    loss = F.kl_div(x, t, reduction="sum", log_target=log_target)
    assert loss.grad_fn.name() == "KlDivBackward0"
    loss.backward()
    if log_target:
        e = np.exp(b)
        want = (e * (b - a)).sum()
        dx, dt = -np.broadcast_to(e, a.shape), (e * (b - a + 1)).sum(0)
    else:
        logp = np.log(np.where(p > 0, p, 1.0))
        want = (p * (logp - a)).sum()
        dx = -np.broadcast_to(p, a.shape)
        dt = np.where(p > 0, logp + 1 - a, -a).sum(0)
    np.testing.assert_allclose(loss.item(), want, rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), dx, rtol=1e-12)
    np.testing.assert_allclose(t.grad.numpy(), dt, rtol=1e-12, atol=1e-14)
