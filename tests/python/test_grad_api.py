"""fg.autograd.grad (reference section 1.3, cases G1-G25)."""

import re

import ferrograd as fg
import numpy as np
import numpy.testing as npt
import pytest

ERR_TWICE = (
    "Trying to backward through the graph a second time (or directly access saved tensors after "
    "they have already been freed). Saved intermediate values of the graph are freed when you "
    "call .backward() or autograd.grad(). Specify retain_graph=True if you need to backward "
    "through the graph a second time or if you need to access saved tensors after calling "
    "backward."
)


def unused_msg(index):
    return (
        f"The differentiated Tensor at index {index} appears to not have been used in the graph. "
        "Set allow_unused=True if this is the desired behavior."
    )


def ones3():
    return fg.ones(3, requires_grad=True)


def npv(t):
    return t.detach().numpy()


# --------------------------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------------------------


def test_grad_of_output_not_requiring_grad_raises():  # G1
    x = ones3()
    with pytest.raises(
        RuntimeError,
        match=re.escape("element 0 of tensors does not require grad and does not have a grad_fn"),
    ):
        fg.autograd.grad(fg.ones(1).sum(), x)


def test_grad_with_unused_input_raises():  # G2
    x, z = ones3(), ones3()
    with pytest.raises(RuntimeError, match=re.escape(unused_msg(1))):
        fg.autograd.grad((x * 2).sum(), [x, z])


def test_grad_with_unused_first_input_names_index_zero():  # G2
    x, z = ones3(), ones3()
    with pytest.raises(RuntimeError, match=re.escape(unused_msg(0))):
        fg.autograd.grad((x * 2).sum(), [z, x])


def test_grad_allow_unused_returns_none_for_unused():  # G3
    x, z = ones3(), ones3()
    gx, gz = fg.autograd.grad((x * 2).sum(), [x, z], allow_unused=True)
    npt.assert_array_equal(npv(gx), [2.0, 2.0, 2.0])
    assert gz is None


def test_grad_materialize_grads_gives_zeros_for_unused():  # G4
    x = ones3()
    z = fg.ones(2, 2, dtype=fg.float64, requires_grad=True)
    gx, gz = fg.autograd.grad((x * 2).sum(), [x, z], materialize_grads=True)
    npt.assert_array_equal(npv(gx), [2.0, 2.0, 2.0])
    assert gz.shape == (2, 2)
    assert gz.dtype == fg.float64
    npt.assert_array_equal(npv(gz), np.zeros((2, 2)))


def test_grad_materialize_grads_with_allow_unused_false_raises():  # G5
    x = ones3()
    with pytest.raises(
        ValueError,
        match=re.escape(
            "Expected allow_unused to be True or not passed when materialize_grads=True, "
            "but got: allow_unused=False."
        ),
    ):
        fg.autograd.grad((x * 2).sum(), x, allow_unused=False, materialize_grads=True)


def test_grad_materialize_grads_with_allow_unused_true_is_fine():
    x, z = ones3(), ones3()
    _, gz = fg.autograd.grad((x * 2).sum(), [x, z], allow_unused=True, materialize_grads=True)
    npt.assert_array_equal(npv(gz), [0.0, 0.0, 0.0])


def test_grad_wrt_tensor_not_requiring_grad_raises():  # G6
    x = ones3()
    with pytest.raises(
        RuntimeError, match=re.escape("One of the differentiated Tensors does not require grad")
    ):
        fg.autograd.grad((x * 2).sum(), [x, fg.ones(3)])


def test_grad_with_empty_inputs_raises():  # G7
    x = ones3()
    with pytest.raises(
        RuntimeError, match=re.escape("`inputs` argument to `grad()` cannot be empty.")
    ):
        fg.autograd.grad((x * 2).sum(), [])


def test_grad_with_non_tensor_input_raises():  # G8
    x = ones3()
    with pytest.raises(RuntimeError, match=r"all inputs have to be Tensors.*but got float"):
        fg.autograd.grad((x * 2).sum(), [1.0])


def test_grad_of_non_scalar_without_grad_outputs_raises():  # G10
    x = ones3()
    with pytest.raises(
        RuntimeError, match=re.escape("grad can be implicitly created only for scalar outputs")
    ):
        fg.autograd.grad(x * 2, x)


def test_grad_twice_without_retain_graph_raises():  # G11
    x = ones3()
    y = (x * x).sum()
    fg.autograd.grad(y, x)
    with pytest.raises(RuntimeError, match=re.escape(ERR_TWICE)):
        fg.autograd.grad(y, x)


def test_grad_with_empty_outputs_reports_unused_input():  # G21
    x = ones3()
    with pytest.raises(RuntimeError, match=re.escape(unused_msg(0))):
        fg.autograd.grad([], x)


def test_grad_wrt_tensor_created_after_output_is_unused():  # G19
    x = ones3()
    y = (x * 2).sum()
    v = x[:2]
    with pytest.raises(RuntimeError, match=re.escape(unused_msg(0))):
        fg.autograd.grad(y, v, retain_graph=True)
    assert fg.autograd.grad(y, v, allow_unused=True) == (None,)


def test_grad_outputs_shape_mismatch_raises():
    x = ones3()
    with pytest.raises(
        RuntimeError,
        match=r"Mismatch in shape: grad_output\[0\] has a shape of .*\[4\].* and output\[0\] has "
        r"a shape of .*\[3\]",
    ):
        fg.autograd.grad(x * 2, x, grad_outputs=fg.ones(4))


# --------------------------------------------------------------------------------------------
# results
# --------------------------------------------------------------------------------------------


def test_grad_returns_tuple_and_leaves_dot_grad_untouched():  # G9
    x = ones3()
    result = fg.autograd.grad((x * 2).sum(), x)
    assert isinstance(result, tuple)
    assert len(result) == 1
    npt.assert_array_equal(npv(result[0]), [2.0, 2.0, 2.0])
    assert x.grad is None


def test_grad_does_not_modify_existing_dot_grad():  # G9
    x = ones3()
    g = fg.tensor([7.0, 7.0, 7.0])
    x.grad = g
    fg.autograd.grad((x * 2).sum(), x)
    npt.assert_array_equal(npv(x.grad), [7.0, 7.0, 7.0])
    npt.assert_array_equal(g.numpy(), [7.0, 7.0, 7.0])


def test_grad_result_does_not_require_grad_by_default():
    x = ones3()
    (g,) = fg.autograd.grad((x * x).sum(), x)
    assert not g.requires_grad
    assert g.grad_fn is None


def test_grad_results_follow_input_order():
    a = fg.tensor([1.0, 2.0], requires_grad=True)
    b = fg.tensor([3.0, 4.0], requires_grad=True)
    gb, ga = fg.autograd.grad((a * b * b).sum(), (b, a))
    npt.assert_array_equal(npv(ga), [9.0, 16.0])
    npt.assert_array_equal(npv(gb), [6.0, 16.0])


def test_grad_outputs_vector_jacobian_product():
    x = fg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    v = fg.tensor([0.5, -1.0, 2.0])
    (g,) = fg.autograd.grad(x**2, x, grad_outputs=v)
    npt.assert_allclose(npv(g), 2 * np.array([1.0, 2.0, 3.0]) * [0.5, -1.0, 2.0])


def test_grad_of_several_outputs_sums_contributions():
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    (g,) = fg.autograd.grad([(x * x).sum(), (x * 10).sum()], x)
    npt.assert_array_equal(npv(g), [12.0, 14.0])


def test_grad_of_several_outputs_with_grad_outputs_list_and_none():
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    (g,) = fg.autograd.grad([x * 3, (x * x).sum()], [x], grad_outputs=[fg.tensor([1.0, 2.0]), None])
    npt.assert_array_equal(npv(g), [5.0, 10.0])


def test_grad_create_graph_result_is_differentiable_and_graph_retained():  # G12
    x = fg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = (x * x).sum()
    (g,) = fg.autograd.grad(y, x, create_graph=True)
    assert g.requires_grad
    assert g.grad_fn is not None
    npt.assert_array_equal(npv(g), [2.0, 4.0, 6.0])
    (g_again,) = fg.autograd.grad(y, x)  # retain_graph defaulted to create_graph
    npt.assert_array_equal(npv(g_again), [2.0, 4.0, 6.0])


def test_grad_create_graph_with_explicit_retain_false_still_builds_derivative_graph():  # G13
    x = fg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = (x**3).sum()
    (g,) = fg.autograd.grad(y, x, create_graph=True, retain_graph=False)
    assert g.requires_grad
    (h,) = fg.autograd.grad(g.sum(), x)
    npt.assert_allclose(npv(h), [6.0, 12.0, 18.0])
    with pytest.raises(RuntimeError, match=re.escape(ERR_TWICE)):
        fg.autograd.grad(y, x)


def test_grad_create_graph_inside_no_grad_still_requires_grad():  # G14
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    with fg.no_grad():
        (g,) = fg.autograd.grad(y, x, create_graph=True)
    assert g.requires_grad
    (h,) = fg.autograd.grad(g.sum(), x)
    npt.assert_array_equal(npv(h), [2.0, 2.0])


def test_grad_inside_no_grad_without_create_graph_works():
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    with fg.no_grad():
        (g,) = fg.autograd.grad(y, x)
    npt.assert_array_equal(npv(g), [2.0, 4.0])


def test_grad_retain_graph_allows_repeat_with_same_result():
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    y = (x.exp() * x).sum()
    (g1,) = fg.autograd.grad(y, x, retain_graph=True)
    (g2,) = fg.autograd.grad(y, x)
    expected = np.exp([1.0, 2.0]) * (1 + np.array([1.0, 2.0]))
    npt.assert_allclose(npv(g1), expected, rtol=1e-6)
    npt.assert_array_equal(npv(g1), npv(g2))


def test_grad_of_sum_of_leaf_and_of_leaf_itself():  # G17
    x = ones3()
    (g1,) = fg.autograd.grad(x.sum(), x)
    npt.assert_array_equal(npv(g1), [1.0, 1.0, 1.0])
    (g2,) = fg.autograd.grad(x, x, fg.ones(3))
    npt.assert_array_equal(npv(g2), [1.0, 1.0, 1.0])


def test_grad_wrt_intermediate_tensor():  # G18
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    h = x * 3
    y = (h * h).sum()
    (gh,) = fg.autograd.grad(y, h)
    npt.assert_array_equal(npv(gh), [6.0, 12.0])
    assert x.grad is None


def test_grad_wrt_duplicate_inputs_returns_full_grad_twice():  # G20
    x = ones3()
    a = (x * 2).sum()
    g1, g2 = fg.autograd.grad(a, [x, x])
    npt.assert_array_equal(npv(g1), [2.0, 2.0, 2.0])
    npt.assert_array_equal(npv(g2), [2.0, 2.0, 2.0])


def test_grad_wrt_intermediate_does_not_run_or_free_its_producer():  # G25
    x = fg.tensor([0.0, 1.0], requires_grad=True)
    h = x.exp()
    y = (h * 2).sum()
    (gh,) = fg.autograd.grad(y, h)
    npt.assert_array_equal(npv(gh), [2.0, 2.0])
    h.sum().backward()  # ExpBackward never ran, so its saved result is still available
    npt.assert_allclose(npv(x.grad), np.exp([0.0, 1.0]), rtol=1e-6)


def test_grad_sums_paths_through_shared_subexpression():
    x = fg.tensor([0.5, -1.0], requires_grad=True, dtype=fg.float64)
    s = x.sin()
    y = (s * s + s.exp()).sum()
    (g,) = fg.autograd.grad(y, x)
    a = np.array([0.5, -1.0])
    npt.assert_allclose(npv(g), (2 * np.sin(a) + np.exp(np.sin(a))) * np.cos(a), rtol=1e-12)


def test_grad_and_backward_agree(rng):
    a = rng.standard_normal((3, 4))
    x1 = fg.tensor(a, requires_grad=True)
    x2 = fg.tensor(a, requires_grad=True)
    w = fg.tensor(rng.standard_normal((4, 2)))
    (g,) = fg.autograd.grad((x1 @ w).tanh().sum(), x1)
    (x2 @ w).tanh().sum().backward()
    npt.assert_array_equal(npv(g), npv(x2.grad))
