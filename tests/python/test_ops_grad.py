"""Forward values against numpy and gradients against finite differences / closed forms."""

import operator

import ferrograd as fg
import numpy as np
import numpy.testing as npt
import pytest


def npv(t):
    return t.detach().numpy()


def leaf(arr, dtype=fg.float64):
    return fg.tensor(np.asarray(arr), dtype=dtype, requires_grad=True)


def _sigmoid(a):
    return 1.0 / (1.0 + np.exp(-a))


def _domain(rng, kind, shape):
    if kind == "positive":
        return rng.uniform(0.5, 3.0, shape)
    if kind == "nonzero":
        return rng.choice([-1.0, 1.0], shape) * rng.uniform(0.2, 2.0, shape)
    return rng.uniform(-2.0, 2.0, shape)


# The unary ops' forward against NumPy and gradients against closed forms and finite
# differences are table entries: ``optables/unary.py`` (``reference``/``derivative``).


# --------------------------------------------------------------------------------------------
# binary arithmetic
# --------------------------------------------------------------------------------------------

BINARY = [
    ("add", operator.add, np.add, "any", "any"),
    ("sub", operator.sub, np.subtract, "any", "any"),
    ("mul", operator.mul, np.multiply, "any", "any"),
    ("div", operator.truediv, np.divide, "any", "nonzero"),
    ("pow", operator.pow, np.power, "positive", "any"),
]
BINARY_IDS = [b[0] for b in BINARY]


@pytest.mark.parametrize("form", ["operator", "function"])
@pytest.mark.parametrize(("name", "op", "np_op", "dom_a", "dom_b"), BINARY, ids=BINARY_IDS)
def test_binary_tensor_tensor_forward_matches_numpy(name, op, np_op, dom_a, dom_b, form, rng):
    a = _domain(rng, dom_a, (3, 4)).astype(np.float32)
    b = _domain(rng, dom_b, (3, 4)).astype(np.float32)
    ta, tb = fg.tensor(a), fg.tensor(b)
    out = op(ta, tb) if form == "operator" else getattr(fg, name)(ta, tb)
    assert out.dtype == fg.float32
    npt.assert_allclose(out.numpy(), np_op(a.astype(np.float64), b), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(("name", "op", "np_op", "dom_a", "dom_b"), BINARY, ids=BINARY_IDS)
def test_binary_tensor_tensor_grads_match_finite_differences(
    name, op, np_op, dom_a, dom_b, rng, check_grads_fd
):
    a = leaf(_domain(rng, dom_a, (2, 3)))
    b = leaf(_domain(rng, dom_b, (2, 3)))
    w = fg.tensor(rng.standard_normal((2, 3)))
    check_grads_fd(lambda p, q: (op(p, q) * w).sum(), [a, b])


# (expression on tensor t, same expression on numpy array a); scalars on either side
SCALAR_CASES = [
    ("t+2.5", lambda t: t + 2.5, lambda a: a + 2.5, "any"),
    ("2.5+t", lambda t: 2.5 + t, lambda a: 2.5 + a, "any"),
    ("t-2.5", lambda t: t - 2.5, lambda a: a - 2.5, "any"),
    ("2.5-t", lambda t: 2.5 - t, lambda a: 2.5 - a, "any"),
    ("t*2.5", lambda t: t * 2.5, lambda a: a * 2.5, "any"),
    ("2.5*t", lambda t: 2.5 * t, lambda a: 2.5 * a, "any"),
    ("t/2.5", lambda t: t / 2.5, lambda a: a / 2.5, "any"),
    ("2.5/t", lambda t: 2.5 / t, lambda a: 2.5 / a, "nonzero"),
    ("t**3", lambda t: t**3, lambda a: a**3, "any"),
    ("t**2.5", lambda t: t**2.5, lambda a: a**2.5, "positive"),
    ("t**-1", lambda t: t**-1, lambda a: a**-1.0, "nonzero"),
    ("2.5**t", lambda t: 2.5**t, lambda a: 2.5**a, "any"),
    ("t+3(int)", lambda t: t + 3, lambda a: a + 3, "any"),
    ("-t", lambda t: -t, lambda a: -a, "any"),
]
SCALAR_IDS = [c[0] for c in SCALAR_CASES]


@pytest.mark.parametrize(("label", "expr", "np_expr", "domain"), SCALAR_CASES, ids=SCALAR_IDS)
def test_scalar_and_reflected_forward_matches_numpy(label, expr, np_expr, domain, rng):
    a = _domain(rng, domain, (6,))
    out = expr(fg.tensor(a))
    assert out.dtype == fg.float64
    npt.assert_allclose(out.numpy(), np_expr(a), rtol=1e-12)
    out32 = expr(fg.tensor(a.astype(np.float32)))
    assert out32.dtype == fg.float32
    npt.assert_allclose(
        out32.numpy(), np_expr(a.astype(np.float32).astype(np.float64)), rtol=1e-5, atol=1e-6
    )


@pytest.mark.parametrize(("label", "expr", "np_expr", "domain"), SCALAR_CASES, ids=SCALAR_IDS)
def test_scalar_and_reflected_grads_match_finite_differences(
    label, expr, np_expr, domain, rng, check_grads_fd
):
    x = leaf(_domain(rng, domain, (5,)))
    w = fg.tensor(rng.standard_normal(5))
    check_grads_fd(lambda t: (expr(t) * w).sum(), [x])


def test_pow_tensor_exponent_grad_closed_form():
    a = np.array([0.5, 1.5, 2.0])
    b = np.array([2.0, -1.0, 0.5])
    x, y = leaf(a), leaf(b)
    (x**y).sum().backward()
    npt.assert_allclose(x.grad.numpy(), b * a ** (b - 1), rtol=1e-12)
    npt.assert_allclose(y.grad.numpy(), a**b * np.log(a), rtol=1e-12)


def test_div_grad_closed_form():
    a = np.array([1.0, -2.0, 3.0])
    b = np.array([2.0, 4.0, -0.5])
    x, y = leaf(a), leaf(b)
    (x / y).sum().backward()
    npt.assert_allclose(x.grad.numpy(), 1.0 / b, rtol=1e-12)
    npt.assert_allclose(y.grad.numpy(), -a / b**2, rtol=1e-12)


def test_leaf_used_twice_accumulates_both_paths():
    x = leaf([1.0, 2.0, 3.0])
    (x * x + 3.0 * x).sum().backward()
    npt.assert_allclose(x.grad.numpy(), 2 * np.array([1.0, 2.0, 3.0]) + 3.0)


def test_mixed_precision_grads_keep_each_input_dtype():
    x = fg.tensor([1.0, 2.0], requires_grad=True)  # float32
    z = fg.tensor([3.0, 4.0], dtype=fg.float64, requires_grad=True)
    y = x * z
    assert y.dtype == fg.float64
    y.sum().backward()
    assert x.grad.dtype == fg.float32
    assert z.grad.dtype == fg.float64
    npt.assert_allclose(x.grad.numpy(), [3.0, 4.0])
    npt.assert_allclose(z.grad.numpy(), [1.0, 2.0])


@pytest.mark.parametrize("convert", ["double", "to"])
def test_dtype_conversion_is_differentiable_and_grad_has_input_dtype(convert):
    x = fg.tensor([1.0, -2.0, 3.0], requires_grad=True)
    y = x.double() if convert == "double" else x.to(fg.float64)
    assert y.dtype == fg.float64
    assert y.requires_grad
    (y * y).sum().backward()
    assert x.grad.dtype == fg.float32
    npt.assert_allclose(x.grad.numpy(), [2.0, -4.0, 6.0])


# --------------------------------------------------------------------------------------------
# broadcasting
# --------------------------------------------------------------------------------------------


def test_broadcast_grads_sum_back_to_input_shapes():
    a_np = np.arange(6, dtype=np.float64).reshape(2, 3) + 1.0
    a = leaf(a_np)
    b = leaf([1.0, 2.0, 3.0])  # (3,)
    c = leaf([[10.0, 20.0, 30.0]])  # (1, 3)
    d = leaf(2.0)  # 0-d
    ((a * b + c) * d).sum().backward()
    assert a.grad.shape == (2, 3)
    assert b.grad.shape == (3,)
    assert c.grad.shape == (1, 3)
    assert d.grad.shape == ()
    npt.assert_allclose(a.grad.numpy(), np.broadcast_to([1.0, 2.0, 3.0], (2, 3)) * 2.0)
    npt.assert_allclose(b.grad.numpy(), a_np.sum(0) * 2.0)
    npt.assert_allclose(c.grad.numpy(), [[4.0, 4.0, 4.0]])
    npt.assert_allclose(d.grad.numpy(), (a_np * [1.0, 2.0, 3.0] + [10.0, 20.0, 30.0]).sum())


def test_outer_broadcast_column_minus_row():
    p = leaf(np.ones((4, 1)))
    q = leaf(np.ones((1, 5)))
    out = p - q
    assert out.shape == (4, 5)
    out.sum().backward()
    npt.assert_allclose(p.grad.numpy(), np.full((4, 1), 5.0))
    npt.assert_allclose(q.grad.numpy(), np.full((1, 5), -4.0))


@pytest.mark.parametrize(("name", "op", "np_op", "dom_a", "dom_b"), BINARY, ids=BINARY_IDS)
def test_broadcast_binary_grads_match_finite_differences(
    name, op, np_op, dom_a, dom_b, rng, check_grads_fd
):
    a = leaf(_domain(rng, dom_a, (2, 1, 3)))
    b = leaf(_domain(rng, dom_b, (4, 1)))
    out = op(a, b)
    assert out.shape == (2, 4, 3)
    npt.assert_allclose(npv(out), np_op(npv(a), npv(b)), rtol=1e-12)
    w = fg.tensor(rng.standard_normal((2, 4, 3)))
    check_grads_fd(lambda p, q: (op(p, q) * w).sum(), [a, b])


# --------------------------------------------------------------------------------------------
# reductions
# --------------------------------------------------------------------------------------------

REDUCE_CASES = [(None, False)] + [
    (dim, keepdim) for dim in [0, 1, -1, (0, 2), (-1, 0)] for keepdim in (False, True)
]


@pytest.mark.parametrize(
    ("dim", "keepdim"), REDUCE_CASES, ids=[f"dim={d}-keepdim={k}" for d, k in REDUCE_CASES]
)
@pytest.mark.parametrize("name", ["sum", "mean"])
def test_reduction_forward_and_grad(name, dim, keepdim, rng, check_grads_fd):
    a = rng.standard_normal((2, 3, 4))
    np_fn = np.sum if name == "sum" else np.mean
    x = leaf(a)
    if dim is None:
        out = getattr(x, name)()
        expected = np_fn(a)
    else:
        out = getattr(x, name)(dim=dim, keepdim=keepdim)
        expected = np_fn(a, axis=dim, keepdims=keepdim)
    assert out.shape == np.shape(expected)
    npt.assert_allclose(npv(out), expected, rtol=1e-12)

    w = fg.tensor(rng.standard_normal(np.shape(expected)))

    def f(t):
        r = getattr(t, name)() if dim is None else getattr(t, name)(dim=dim, keepdim=keepdim)
        return (r * w).sum()

    check_grads_fd(f, [x])


@pytest.mark.parametrize("name", ["sum", "mean"])
def test_reduction_function_form_and_positional_dim(name, rng):
    a = rng.standard_normal((3, 4))
    np_fn = np.sum if name == "sum" else np.mean
    t = fg.tensor(a)
    npt.assert_allclose(getattr(fg, name)(t).item(), np_fn(a), rtol=1e-12)
    npt.assert_allclose(getattr(fg, name)(t, 1).numpy(), np_fn(a, axis=1), rtol=1e-12)
    npt.assert_allclose(getattr(t, name)(0).numpy(), np_fn(a, axis=0), rtol=1e-12)


def test_sum_and_mean_grad_closed_forms():
    x = leaf(np.ones((2, 5)))
    x.sum().backward()
    npt.assert_array_equal(x.grad.numpy(), np.ones((2, 5)))
    y = leaf(np.ones((2, 5)))
    y.mean().backward()
    npt.assert_allclose(y.grad.numpy(), np.full((2, 5), 0.1))
    z = leaf(np.ones((2, 5)))
    z.mean(dim=1).sum().backward()
    npt.assert_allclose(z.grad.numpy(), np.full((2, 5), 0.2))


# --------------------------------------------------------------------------------------------
# matmul
# --------------------------------------------------------------------------------------------

MATMUL_SHAPES = [
    ((3,), (3,)),
    ((2, 3), (3,)),
    ((3,), (3, 4)),
    ((2, 3), (3, 4)),
    ((2, 2, 3), (3, 4)),
    ((2, 3), (2, 3, 4)),
    ((2, 2, 3), (2, 3, 4)),
    ((2, 1, 2, 3), (3, 3, 4)),
    ((3,), (2, 3, 4)),
    ((2, 3, 4), (4,)),
]
MATMUL_IDS = [f"{a}@{b}".replace(" ", "") for a, b in MATMUL_SHAPES]


@pytest.mark.parametrize("form", ["operator", "function", "method"])
@pytest.mark.parametrize(("sa", "sb"), MATMUL_SHAPES, ids=MATMUL_IDS)
def test_matmul_forward_matches_numpy(sa, sb, form, rng):
    a = rng.standard_normal(sa)
    b = rng.standard_normal(sb)
    ta, tb = fg.tensor(a), fg.tensor(b)
    if form == "operator":
        out = ta @ tb
    elif form == "function":
        out = fg.matmul(ta, tb)
    else:
        out = ta.matmul(tb)
    expected = np.matmul(a, b)
    assert out.shape == np.shape(expected)
    npt.assert_allclose(out.numpy(), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(("sa", "sb"), MATMUL_SHAPES, ids=MATMUL_IDS)
def test_matmul_grads_match_finite_differences(sa, sb, rng, check_grads_fd):
    a = leaf(rng.standard_normal(sa))
    b = leaf(rng.standard_normal(sb))
    w = fg.tensor(rng.standard_normal(np.matmul(npv(a), npv(b)).shape))
    check_grads_fd(lambda p, q: ((p @ q) * w).sum(), [a, b])


def test_matmul_2d_grads_closed_form(rng):
    a_np, b_np, g_np = (rng.standard_normal(s) for s in [(3, 4), (4, 5), (3, 5)])
    a, b = leaf(a_np), leaf(b_np)
    (a @ b).backward(fg.tensor(g_np))
    npt.assert_allclose(a.grad.numpy(), g_np @ b_np.T, rtol=1e-12)
    npt.assert_allclose(b.grad.numpy(), a_np.T @ g_np, rtol=1e-12)


def test_matmul_batched_broadcast_grad_sums_over_batch(rng):
    a_np = rng.standard_normal((5, 2, 3))
    b_np = rng.standard_normal((3, 4))
    a, b = leaf(a_np), leaf(b_np)
    (a @ b).sum().backward()
    ones = np.ones((5, 2, 4))
    assert b.grad.shape == (3, 4)
    npt.assert_allclose(b.grad.numpy(), sum(a_np[i].T @ ones[i] for i in range(5)), rtol=1e-12)
    npt.assert_allclose(a.grad.numpy(), ones @ b_np.T, rtol=1e-12)


def test_matmul_1d_dot_grads_closed_form():
    u = leaf([1.0, 2.0, 3.0])
    v = leaf([4.0, 5.0, 6.0])
    out = u @ v
    assert out.shape == ()
    assert out.item() == 32.0
    out.backward()
    npt.assert_array_equal(u.grad.numpy(), [4.0, 5.0, 6.0])
    npt.assert_array_equal(v.grad.numpy(), [1.0, 2.0, 3.0])


# --------------------------------------------------------------------------------------------
# shape ops and indexing
# --------------------------------------------------------------------------------------------

# label, shape of input, op on tensor, the same op on numpy
SHAPE_CASES = [
    ("reshape", (2, 3), lambda t: t.reshape(3, 2), lambda a: a.reshape(3, 2)),
    ("reshape-tuple", (2, 3), lambda t: t.reshape((6,)), lambda a: a.reshape(6)),
    ("reshape-infer", (2, 3, 4), lambda t: t.reshape(-1, 4), lambda a: a.reshape(-1, 4)),
    ("fg.reshape", (2, 3), lambda t: fg.reshape(t, (3, 2)), lambda a: a.reshape(3, 2)),
    ("view", (2, 3), lambda t: t.view(6), lambda a: a.reshape(6)),
    ("view-infer", (4, 3), lambda t: t.view(2, -1), lambda a: a.reshape(2, -1)),
    ("transpose", (2, 3, 4), lambda t: t.transpose(0, 2), lambda a: a.transpose(2, 1, 0)),
    ("transpose-neg", (2, 3, 4), lambda t: t.transpose(-1, -2), lambda a: a.swapaxes(-1, -2)),
    ("fg.transpose", (2, 3), lambda t: fg.transpose(t, 0, 1), lambda a: a.T),
    ("t", (2, 3), lambda t: t.t(), lambda a: a.T),
    ("unsqueeze0", (2, 3), lambda t: t.unsqueeze(0), lambda a: a[None]),
    ("unsqueeze-1", (2, 3), lambda t: t.unsqueeze(-1), lambda a: a[..., None]),
    ("squeeze", (2, 1, 3, 1), lambda t: t.squeeze(), lambda a: a.squeeze()),
    ("squeeze-dim", (2, 1, 3, 1), lambda t: t.squeeze(1), lambda a: a.squeeze(1)),
    ("squeeze-noop", (2, 3), lambda t: t.squeeze(0), lambda a: a),
    ("expand", (3, 1), lambda t: t.expand(3, 4), lambda a: np.broadcast_to(a, (3, 4))),
    ("expand-new-dim", (3,), lambda t: t.expand(2, 3), lambda a: np.broadcast_to(a, (2, 3))),
    ("expand-minus1", (3, 1), lambda t: t.expand(-1, 2), lambda a: np.broadcast_to(a, (3, 2))),
    ("getitem-int", (3, 4), lambda t: t[1], lambda a: a[1]),
    ("getitem-neg-int", (3, 4), lambda t: t[-1], lambda a: a[-1]),
    ("getitem-slice", (5, 2), lambda t: t[1:4], lambda a: a[1:4]),
    ("getitem-step", (6,), lambda t: t[::2], lambda a: a[::2]),
    ("getitem-tuple", (3, 4), lambda t: t[1, 1:], lambda a: a[1, 1:]),
    ("getitem-col", (3, 4), lambda t: t[:, 2], lambda a: a[:, 2]),
    ("getitem-2slices", (4, 5), lambda t: t[1:, ::2], lambda a: a[1:, ::2]),
    ("getitem-scalar", (3, 4), lambda t: t[2, 3], lambda a: a[2, 3]),
]
SHAPE_IDS = [c[0] for c in SHAPE_CASES]


@pytest.mark.parametrize(("label", "shape", "op", "np_op"), SHAPE_CASES, ids=SHAPE_IDS)
def test_shape_op_forward_matches_numpy(label, shape, op, np_op, rng):
    a = rng.standard_normal(shape)
    out = op(fg.tensor(a))
    expected = np_op(a)
    assert out.shape == np.shape(expected)
    npt.assert_array_equal(out.numpy(), expected)


@pytest.mark.parametrize(("label", "shape", "op", "np_op"), SHAPE_CASES, ids=SHAPE_IDS)
def test_shape_op_grad_is_upstream_grad_routed_back(label, shape, op, np_op, rng):
    # For a linear re-arrangement y = P(x), dL/dx = P^T(w) where L = sum(w * y).  Apply P to an
    # array of element indices to find where each output element came from.
    a = rng.standard_normal(shape)
    x = leaf(a)
    y = op(x)
    w = rng.standard_normal(y.shape)
    (y * fg.tensor(w)).sum().backward()
    index = np_op(np.arange(a.size).reshape(shape))
    expected = np.zeros(a.size)
    np.add.at(expected, np.asarray(index).ravel(), w.ravel())
    assert x.grad.shape == shape
    npt.assert_allclose(x.grad.numpy(), expected.reshape(shape), rtol=1e-12, atol=1e-15)


def test_expand_grad_sums_over_expanded_dim():
    x = leaf([[1.0], [2.0], [3.0]])
    x.expand(3, 4).sum().backward()
    npt.assert_array_equal(x.grad.numpy(), np.full((3, 1), 4.0))


def test_getitem_grad_is_zero_outside_selection():
    x = leaf(np.zeros((3, 3)))
    x[1, :2].sum().backward()
    npt.assert_array_equal(x.grad.numpy(), [[0, 0, 0], [1, 1, 0], [0, 0, 0]])


# --------------------------------------------------------------------------------------------
# composites
# --------------------------------------------------------------------------------------------


def test_mlp_like_composite_grads_match_finite_differences(rng, check_grads_fd):
    x = leaf(rng.standard_normal((4, 3)))
    w1 = leaf(rng.standard_normal((3, 5)) * 0.5)
    b1 = leaf(rng.standard_normal(5) * 0.1)
    w2 = leaf(rng.standard_normal((5, 2)) * 0.5)

    def f(x, w1, b1, w2):
        h = (x @ w1 + b1).tanh()
        out = h @ w2
        return (out.sigmoid() * out.exp().log()).mean()

    check_grads_fd(f, [x, w1, b1, w2])


def test_shape_ops_chain_grads_match_finite_differences(rng, check_grads_fd):
    x = leaf(rng.standard_normal((2, 3, 4)))
    w = fg.tensor(rng.standard_normal((4, 1, 3)))

    def f(t):
        y = t.transpose(0, 2).reshape(4, 6)[:, 1:4].unsqueeze(1).sin()
        return (y.relu() + 0.5 * y).sum(dim=2, keepdim=True).mean() + (y * w).sum()

    check_grads_fd(f, [x])


# --------------------------------------------------------------------------------------------
# second order (create_graph)
# --------------------------------------------------------------------------------------------

SECOND_ORDER = [
    ("cube", lambda t: t**3, lambda a: 3 * a**2, lambda a: 6 * a, "any"),
    ("sin", lambda t: t.sin(), np.cos, lambda a: -np.sin(a), "any"),
    ("cos", lambda t: t.cos(), lambda a: -np.sin(a), lambda a: -np.cos(a), "any"),
    ("exp", lambda t: t.exp(), np.exp, np.exp, "any"),
    (
        "tanh",
        lambda t: t.tanh(),
        lambda a: 1 - np.tanh(a) ** 2,
        lambda a: -2 * np.tanh(a) * (1 - np.tanh(a) ** 2),
        "any",
    ),
    (
        "sigmoid",
        lambda t: t.sigmoid(),
        lambda a: _sigmoid(a) * (1 - _sigmoid(a)),
        lambda a: _sigmoid(a) * (1 - _sigmoid(a)) * (1 - 2 * _sigmoid(a)),
        "any",
    ),
    ("log", lambda t: t.log(), lambda a: 1 / a, lambda a: -1 / a**2, "positive"),
    ("reciprocal", lambda t: 1.0 / t, lambda a: -1 / a**2, lambda a: 2 / a**3, "nonzero"),
    ("x*x", lambda t: t * t, lambda a: 2 * a, lambda a: 2 * np.ones_like(a), "any"),
]


@pytest.mark.parametrize(
    ("label", "f", "d1", "d2", "domain"), SECOND_ORDER, ids=[s[0] for s in SECOND_ORDER]
)
def test_second_derivative_via_create_graph(label, f, d1, d2, domain, rng):
    a = _domain(rng, domain, (4,))
    x = leaf(a)
    (g,) = fg.autograd.grad(f(x).sum(), x, create_graph=True)
    assert g.requires_grad
    npt.assert_allclose(npv(g), d1(a), rtol=1e-10)
    (h,) = fg.autograd.grad(g.sum(), x)
    npt.assert_allclose(npv(h), d2(a), rtol=1e-10, atol=1e-12)


def test_third_derivative_of_cube_is_six():
    x = leaf([0.5, -2.0])
    (g1,) = fg.autograd.grad((x**3).sum(), x, create_graph=True)
    (g2,) = fg.autograd.grad(g1.sum(), x, create_graph=True)
    (g3,) = fg.autograd.grad(g2.sum(), x)
    npt.assert_allclose(npv(g2), [3.0, -12.0])
    npt.assert_allclose(npv(g3), [6.0, 6.0])


def test_mixed_partials_of_x_squared_times_y():
    a = np.array([1.0, -2.0, 0.5])
    b = np.array([3.0, 0.25, -1.0])
    x, y = leaf(a), leaf(b)
    f = (x**2 * y).sum()
    (gx,) = fg.autograd.grad(f, x, create_graph=True)
    npt.assert_allclose(npv(gx), 2 * a * b)
    d_dy, d_dx = fg.autograd.grad(gx.sum(), [y, x])
    npt.assert_allclose(npv(d_dy), 2 * a)
    npt.assert_allclose(npv(d_dx), 2 * b)


def test_mixed_partial_of_x_times_y_is_one():
    x, y = leaf([2.0, 3.0]), leaf([5.0, 7.0])
    (gx,) = fg.autograd.grad((x * y).sum(), x, create_graph=True)
    npt.assert_allclose(npv(gx), [5.0, 7.0])
    (gxy,) = fg.autograd.grad(gx.sum(), y)
    npt.assert_allclose(npv(gxy), [1.0, 1.0])


def test_mixed_partial_of_sin_xy():
    a, b = np.array([0.3, -1.2]), np.array([2.0, 0.7])
    x, y = leaf(a), leaf(b)
    (gx,) = fg.autograd.grad((x * y).sin().sum(), x, create_graph=True)
    npt.assert_allclose(npv(gx), b * np.cos(a * b), rtol=1e-12)
    (gxy,) = fg.autograd.grad(gx.sum(), y)
    npt.assert_allclose(npv(gxy), np.cos(a * b) - a * b * np.sin(a * b), rtol=1e-10)


def test_hessian_vector_product_of_quadratic_form(rng):
    a_np = rng.standard_normal((4, 4))
    v_np = rng.standard_normal(4)
    x = leaf(rng.standard_normal(4))
    f = x @ (fg.tensor(a_np) @ x)
    (g,) = fg.autograd.grad(f, x, create_graph=True)
    npt.assert_allclose(npv(g), (a_np + a_np.T) @ npv(x), rtol=1e-10)
    (hv,) = fg.autograd.grad((g * fg.tensor(v_np)).sum(), x)
    npt.assert_allclose(npv(hv), (a_np + a_np.T) @ v_np, rtol=1e-10)


def test_second_order_through_matmul_and_tanh_matches_finite_differences(rng, fd_grad):
    w_np = rng.standard_normal((3, 3)) * 0.5
    x = leaf(rng.standard_normal(3))
    w = fg.tensor(w_np)

    def first_grad_sum(t):
        t = t.detach().requires_grad_()
        with fg.enable_grad():
            (g,) = fg.autograd.grad((w @ t).tanh().sum(), t)
        return g.sum()

    (g,) = fg.autograd.grad((w @ x).tanh().sum(), x, create_graph=True)
    (h,) = fg.autograd.grad(g.sum(), x)
    npt.assert_allclose(npv(h), fd_grad(first_grad_sum, x), rtol=1e-6, atol=1e-8)


# --------------------------------------------------------------------------------------------
# in-place ops
# --------------------------------------------------------------------------------------------

INPLACE_FORWARD = [
    ("add_", lambda t: t.add_(2.0), [3.0, 4.0]),
    ("sub_", lambda t: t.sub_(2.0), [-1.0, 0.0]),
    ("mul_", lambda t: t.mul_(3.0), [3.0, 6.0]),
    ("div_", lambda t: t.div_(4.0), [0.25, 0.5]),
    ("add_-tensor", lambda t: t.add_(fg.tensor([10.0, 20.0])), [11.0, 22.0]),
    ("mul_-tensor", lambda t: t.mul_(fg.tensor([-1.0, 0.5])), [-1.0, 1.0]),
    ("zero_", lambda t: t.zero_(), [0.0, 0.0]),
    ("fill_", lambda t: t.fill_(7.0), [7.0, 7.0]),
    ("copy_", lambda t: t.copy_(fg.tensor([5.0, 6.0])), [5.0, 6.0]),
]


@pytest.mark.parametrize(
    ("label", "op", "expected"), INPLACE_FORWARD, ids=[c[0] for c in INPLACE_FORWARD]
)
def test_inplace_op_returns_self_and_updates_values(label, op, expected):
    t = fg.tensor([1.0, 2.0])
    out = op(t)
    assert out is t
    assert t.tolist() == expected


INPLACE_OPERATORS = [
    ("+=", lambda t: t.__iadd__(2.0), [3.0, 4.0]),
    ("-=", lambda t: t.__isub__(2.0), [-1.0, 0.0]),
    ("*=", lambda t: t.__imul__(3.0), [3.0, 6.0]),
    ("/=", lambda t: t.__itruediv__(4.0), [0.25, 0.5]),
]


@pytest.mark.parametrize(
    ("label", "op", "expected"), INPLACE_OPERATORS, ids=[c[0] for c in INPLACE_OPERATORS]
)
def test_augmented_assignment_operators_modify_in_place(label, op, expected):
    t = fg.tensor([1.0, 2.0])
    alias = t
    out = op(t)
    assert out is t
    assert alias.tolist() == expected


def test_augmented_assignment_keeps_identity_with_statement_syntax():
    t = fg.tensor([1.0, 2.0])
    before = t
    t += 1.0
    t *= 2.0
    t -= 1.0
    t /= 3.0
    assert t is before
    npt.assert_allclose(t.numpy(), [1.0, 5.0 / 3.0])


@pytest.mark.parametrize(
    ("label", "op", "dx"),
    [
        ("add_", lambda h, y: h.add_(y), 1.0),
        ("sub_", lambda h, y: h.sub_(y), 1.0),
        ("mul_-scalar", lambda h, y: h.mul_(3.0), 3.0),
        ("div_-scalar", lambda h, y: h.div_(4.0), 0.25),
        ("+=", lambda h, y: h.__iadd__(y), 1.0),
        ("*=", lambda h, y: h.__imul__(2.0), 2.0),
    ],
)
def test_inplace_on_non_leaf_records_gradient(label, op, dx):
    x = leaf([1.0, 2.0, 3.0])
    y = leaf([4.0, 5.0, 6.0])
    h = x * 1.0
    op(h, y)
    assert h.requires_grad
    assert not h.is_leaf
    h.sum().backward()
    npt.assert_allclose(x.grad.numpy(), [dx] * 3)
    if label in ("add_", "+="):
        npt.assert_allclose(y.grad.numpy(), [1.0] * 3)
    elif label == "sub_":
        npt.assert_allclose(y.grad.numpy(), [-1.0] * 3)


def test_inplace_mul_by_tensor_grads_closed_form():
    a, b = np.array([1.0, 2.0]), np.array([3.0, -4.0])
    x, y = leaf(a), leaf(b)
    h = x * 2.0
    h.mul_(y)
    (h * h).sum().backward()
    # h = 2 a b ; L = sum(h^2) ; dL/da = 2 h * 2 b ; dL/db = 2 h * 2 a
    npt.assert_allclose(x.grad.numpy(), 2 * (2 * a * b) * 2 * b)
    npt.assert_allclose(y.grad.numpy(), 2 * (2 * a * b) * 2 * a)


def test_inplace_div_by_tensor_grads_closed_form():
    a, b = np.array([1.0, 2.0]), np.array([4.0, -0.5])
    x, y = leaf(a), leaf(b)
    h = x * 1.0
    h.div_(y)
    h.sum().backward()
    npt.assert_allclose(x.grad.numpy(), 1 / b)
    npt.assert_allclose(y.grad.numpy(), -a / b**2)


def test_copy_into_non_leaf_routes_grad_to_source():
    x = leaf([1.0, 2.0, 3.0])
    z = leaf([7.0, 8.0, 9.0])
    w = np.array([1.0, -2.0, 0.5])
    h = x * 2.0
    h.copy_(z)
    npt.assert_array_equal(npv(h), [7.0, 8.0, 9.0])
    (h * fg.tensor(w)).sum().backward()
    npt.assert_allclose(z.grad.numpy(), w)
    # the overwritten value no longer influences the output
    assert x.grad is None or not np.any(x.grad.numpy())


@pytest.mark.parametrize("op", ["zero_", "fill_"])
def test_overwriting_inplace_ops_cut_gradient_to_old_value(op):
    x = leaf([1.0, 2.0, 3.0])
    h = x * 2.0
    if op == "zero_":
        h.zero_()
    else:
        h.fill_(4.0)
    y = leaf([1.0, 1.0, 1.0])
    (h * y).sum().backward()
    expected = 0.0 if op == "zero_" else 4.0
    npt.assert_allclose(y.grad.numpy(), [expected] * 3)
    assert x.grad is None or not np.any(x.grad.numpy())
