"""Gradient behaviours that are not one op on fresh inputs: accumulation over several paths,
mixed dtypes, broadcasting sums, composites, mixed and higher partials, in-place ops.

Each op's forward against NumPy, gradient against its closed form and finite differences, and
second derivative are entries of the op table (``optables/<family>.py``, run by
``test_op_table.py``): unary and binary ops with every spelling (operator, function, method,
Python scalars on either side, broadcasting), sum/mean over every dim spelling, matmul in every
rank combination, and each spelling of reshape/view/transpose/squeeze/expand and basic
indexing."""

import ferrograd as fg
import numpy as np
import numpy.testing as npt
import pytest


def npv(t):
    return t.detach().numpy()


def leaf(arr, dtype=fg.float64):
    return fg.tensor(np.asarray(arr), dtype=dtype, requires_grad=True)


# --------------------------------------------------------------------------------------------
# accumulation and dtypes
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# shape ops and indexing
# --------------------------------------------------------------------------------------------


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
