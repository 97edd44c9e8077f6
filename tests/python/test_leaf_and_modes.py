"""Leaves, requires_grad, grad_fn, detach, .grad and retain_grad, grad modes (sections 1.4-1.7)."""

import re
import threading
import warnings

import ferrograd as fg
import numpy.testing as npt
import pytest

NON_LEAF_GRAD_WARNING = (
    "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad "
    "attribute won't be populated during autograd.backward(). If you indeed want the .grad field "
    "to be populated for a non-leaf Tensor, use .retain_grad() on the non-leaf Tensor. If you "
    "access the non-leaf Tensor by mistake, make sure you access the leaf Tensor instead. See "
    "github.com/pytorch/pytorch/pull/30531 for more information."
)
ONLY_LEAF_FLAGS = (
    "you can only change requires_grad flags of leaf variables. If you want to use a computed "
    "variable in a subgraph that doesn't require differentiation use var_no_grad = var.detach()."
)


def npv(t):
    return t.detach().numpy()


def run_in_thread(fn):
    result = {}

    def target():
        try:
            result["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised by the caller
            result["error"] = exc

    th = threading.Thread(target=target, daemon=True)
    th.start()
    th.join(timeout=30)
    assert not th.is_alive(), "thread did not finish"
    if "error" in result:
        raise result["error"]
    return result["value"]


# --------------------------------------------------------------------------------------------
# 1.4 requires_grad, is_leaf, grad_fn
# --------------------------------------------------------------------------------------------


def test_is_leaf_table():
    a = fg.ones(3)
    b = fg.ones(3, requires_grad=True)
    with fg.no_grad():
        c = b * 2
    results = [t.is_leaf for t in (a, b, b * 2, a * 2, c)]
    assert results == [True, True, False, True, True]
    assert [t.requires_grad for t in (a, b, b * 2, a * 2, c)] == [False, True, True, False, False]


def test_result_requires_grad_if_any_input_does():
    a = fg.ones(3)
    b = fg.ones(3, requires_grad=True)
    assert (a + b).requires_grad
    assert (a * b).grad_fn is not None
    assert not (a + a).requires_grad
    assert (a + a).grad_fn is None


@pytest.mark.parametrize("mode", ["no_grad", "inference_mode"])
def test_factory_with_requires_grad_inside_no_grad_makes_leaf(mode):
    ctx = fg.no_grad() if mode == "no_grad" else fg.inference_mode()
    with ctx:
        z = fg.ones(2, requires_grad=True)
        t = fg.tensor([1.0, 2.0], requires_grad=True)
    for leaf in (z, t):
        assert leaf.requires_grad
        assert leaf.is_leaf
        assert leaf.grad_fn is None


def test_int_tensor_factory_with_requires_grad_raises():
    msg = "Only Tensors of floating point and complex dtype can require gradients"
    with pytest.raises(RuntimeError, match=re.escape(msg)):
        fg.ones(3, dtype=fg.int64, requires_grad=True)
    with pytest.raises(RuntimeError, match=re.escape(msg)):
        fg.tensor([1, 2], requires_grad=True)
    with pytest.raises(RuntimeError, match=re.escape(msg)):
        fg.zeros(2, dtype=fg.bool, requires_grad=True)


def test_int_tensor_requires_grad_underscore_raises():
    t = fg.ones(3, dtype=fg.int64)
    msg = "only Tensors of floating point dtype can require gradients"
    with pytest.raises(RuntimeError, match=re.escape(msg)):
        t.requires_grad_()
    assert not t.requires_grad


def test_int_tensor_requires_grad_setter_raises():
    t = fg.ones(3, dtype=fg.int64)
    with pytest.raises(
        RuntimeError,
        match=re.escape("only Tensors of floating point and complex dtype can require gradients"),
    ):
        t.requires_grad = True
    assert not t.requires_grad


def test_requires_grad_setter_on_leaf():
    t = fg.ones(2)
    t.requires_grad = True
    assert t.requires_grad
    t.requires_grad = False
    assert not t.requires_grad


def test_turning_off_requires_grad_on_non_leaf_raises():
    x = fg.ones(3, requires_grad=True)
    h = x * 2
    with pytest.raises(RuntimeError, match=re.escape(ONLY_LEAF_FLAGS)):
        h.requires_grad_(False)
    with pytest.raises(RuntimeError, match=re.escape(ONLY_LEAF_FLAGS)):
        h.requires_grad = False
    assert h.requires_grad


def test_requires_grad_true_on_non_leaf_is_noop():
    x = fg.ones(3, requires_grad=True)
    h = x * 2
    assert h.requires_grad_(True) is h
    assert h.requires_grad
    assert not h.is_leaf


def test_grad_fn_name_and_next_functions():
    x = fg.ones(3, requires_grad=True)
    c = fg.ones(3)
    y = (x * c).sum()
    assert y.grad_fn.name() == "SumBackward0"
    ((mul, mul_idx),) = y.grad_fn.next_functions
    assert mul_idx == 0
    assert mul.name() == "MulBackward0"
    (acc, acc_idx), (none_node, none_idx) = mul.next_functions
    assert acc_idx == 0
    assert "AccumulateGrad" in acc.name()
    assert none_node is None
    assert none_idx == 0


def test_accumulate_grad_node_variable_is_the_leaf_object():
    x = fg.ones(3, requires_grad=True)
    ((acc, _),) = (x * 2).grad_fn.next_functions[:1]
    assert "AccumulateGrad" in acc.name()
    assert acc.variable is x


def test_grad_fn_is_none_for_leaves_and_no_grad_results():
    x = fg.ones(3, requires_grad=True)
    assert x.grad_fn is None
    with fg.no_grad():
        assert (x * 2).grad_fn is None


def test_detach_result_is_a_leaf_without_grad():
    x = fg.ones(3, requires_grad=True)
    d = (x * 2).detach()
    assert not d.requires_grad
    assert d.is_leaf
    assert d.grad_fn is None
    npt.assert_array_equal(d.numpy(), [2.0, 2.0, 2.0])


def test_detach_cuts_gradient_flow():
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    y = x * x.detach()
    y.sum().backward()
    npt.assert_array_equal(npv(x.grad), [1.0, 2.0])  # only the non-detached factor


def test_detach_underscore_turns_non_leaf_into_leaf():
    x = fg.ones(3, requires_grad=True)
    h = x * 2
    out = h.detach_()
    assert out is h
    assert not h.requires_grad
    assert h.is_leaf
    assert h.grad_fn is None


def test_detach_underscore_on_view_raises():
    x = fg.ones(3, requires_grad=True)
    v = (x * 2)[:2]
    with pytest.raises(
        RuntimeError, match=re.escape("Can't detach views in-place. Use detach() instead.")
    ):
        v.detach_()


# --------------------------------------------------------------------------------------------
# 1.5 .grad, retain_grad
# --------------------------------------------------------------------------------------------


def test_non_leaf_grad_access_warns_and_returns_none():
    x = fg.ones(3, requires_grad=True)
    h = x * 2
    h.sum().backward()
    with pytest.warns(UserWarning, match=re.escape(NON_LEAF_GRAD_WARNING)):
        assert h.grad is None


def test_leaf_grad_access_does_not_warn():
    x = fg.ones(3, requires_grad=True)
    plain = fg.ones(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert x.grad is None
        assert plain.grad is None
        (x * 2).sum().backward()
        assert x.grad is not None


def test_retained_non_leaf_grad_access_does_not_warn():
    x = fg.ones(3, requires_grad=True)
    h = x * 2
    h.retain_grad()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert h.grad is None
        (h * 3).sum().backward()
        npt.assert_array_equal(npv(h.grad), [3.0, 3.0, 3.0])


def test_retain_grad_on_leaf_is_noop():
    x = fg.ones(3, requires_grad=True)
    x.retain_grad()
    assert not x.retains_grad
    (x * 2).sum().backward()
    npt.assert_array_equal(npv(x.grad), [2.0, 2.0, 2.0])


def test_retain_grad_on_tensor_not_requiring_grad_raises():
    with pytest.raises(
        RuntimeError, match=re.escape("can't retain_grad on Tensor that has requires_grad=False")
    ):
        fg.ones(3).retain_grad()


def test_retains_grad_flag():
    x = fg.ones(3, requires_grad=True)
    h = x * 2
    assert not h.retains_grad
    h.retain_grad()
    assert h.retains_grad


def test_retained_grads_accumulate_across_backward_calls():
    x = fg.ones(3, requires_grad=True)
    y = x * 2
    y.retain_grad()
    loss = (y * 3).sum()
    loss.backward(retain_graph=True)
    npt.assert_array_equal(npv(y.grad), [3.0, 3.0, 3.0])
    loss.backward()
    npt.assert_array_equal(npv(y.grad), [6.0, 6.0, 6.0])


def test_retain_grad_survives_inplace_and_tracks_new_value():
    x = fg.ones(3, requires_grad=True)
    h = x * 1
    h.retain_grad()
    h.mul_(3)
    (h * 2).sum().backward()
    npt.assert_array_equal(npv(h.grad), [2.0, 2.0, 2.0])
    npt.assert_array_equal(npv(x.grad), [6.0, 6.0, 6.0])


def test_grad_setter_wrong_size_raises():
    x = fg.ones(3, requires_grad=True)
    with pytest.raises(
        RuntimeError,
        match=re.escape(
            "attempting to assign a gradient of size '[4]' to a tensor of size '[3]'. Please "
            "ensure that the gradient and the tensor are the same size"
        ),
    ):
        x.grad = fg.ones(4)
    assert x.grad is None


def test_grad_setter_wrong_dtype_raises():
    x = fg.ones(3, requires_grad=True)
    with pytest.raises(
        RuntimeError,
        match=r"attempting to assign a gradient with dtype .* to a tensor with "
        r"grad_dtype",
    ):
        x.grad = fg.ones(3, dtype=fg.float64)
    assert x.grad is None


def test_grad_setter_non_tensor_raises_type_error():
    x = fg.ones(3, requires_grad=True)
    with pytest.raises(
        TypeError,
        match=re.escape("assigned grad expected to be a Tensor or None but got grad of type int"),
    ):
        x.grad = 3


def test_grad_set_get_and_delete():
    x = fg.ones(3, requires_grad=True)
    x.grad = fg.tensor([1.0, 2.0, 3.0])
    npt.assert_array_equal(x.grad.numpy(), [1.0, 2.0, 3.0])
    del x.grad
    assert x.grad is None
    x.grad = fg.tensor([4.0, 5.0, 6.0])
    npt.assert_array_equal(x.grad.numpy(), [4.0, 5.0, 6.0])
    x.grad = None
    assert x.grad is None


def test_grad_getter_returns_the_assigned_object():
    x = fg.ones(3, requires_grad=True)
    g = fg.tensor([1.0, 2.0, 3.0])
    x.grad = g
    assert x.grad is g
    assert x.grad is x.grad


def test_grad_can_be_set_on_tensor_without_requires_grad_and_on_non_leaf():
    t = fg.ones(3)
    t.grad = fg.zeros(3)
    npt.assert_array_equal(t.grad.numpy(), [0.0, 0.0, 0.0])
    h = fg.ones(3, requires_grad=True) * 2
    h.grad = fg.ones(3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        npt.assert_array_equal(h.grad.numpy(), [1.0, 1.0, 1.0])


# --------------------------------------------------------------------------------------------
# 1.7 grad modes
# --------------------------------------------------------------------------------------------


def test_grad_enabled_by_default():
    assert fg.is_grad_enabled()


def test_no_grad_context_manager():
    x = fg.ones(3, requires_grad=True)
    with fg.no_grad():
        assert not fg.is_grad_enabled()
        y = x * 2
    assert fg.is_grad_enabled()
    assert not y.requires_grad
    assert y.grad_fn is None
    assert y.is_leaf


def test_no_grad_restores_state_after_exception():
    with pytest.raises(KeyError), fg.no_grad():
        raise KeyError("x")
    assert fg.is_grad_enabled()


def test_no_grad_decorator_with_parentheses():
    x = fg.ones(3, requires_grad=True)

    @fg.no_grad()
    def f(t):
        return t * 2, fg.is_grad_enabled()

    y, enabled = f(x)
    assert not enabled
    assert not y.requires_grad
    assert fg.is_grad_enabled()


def test_no_grad_bare_decorator():
    x = fg.ones(3, requires_grad=True)

    @fg.no_grad
    def f(t):
        return t * 2

    assert not f(x).requires_grad
    assert fg.is_grad_enabled()


def test_no_grad_decorated_generator_reenters_mode_on_each_resume():
    @fg.no_grad()
    def gen():
        yield fg.is_grad_enabled()
        yield fg.is_grad_enabled()

    g = gen()
    assert next(g) is False
    assert fg.is_grad_enabled()
    assert next(g) is False
    assert fg.is_grad_enabled()


def test_enable_grad_nests_inside_no_grad():
    x = fg.ones(3, requires_grad=True)
    with fg.no_grad():
        with fg.enable_grad():
            assert fg.is_grad_enabled()
            y = x * 2
        assert not fg.is_grad_enabled()
        z = x * 2
    assert y.requires_grad
    assert not z.requires_grad


def test_enable_grad_decorator():
    x = fg.ones(3, requires_grad=True)

    @fg.enable_grad()
    def f(t):
        return t * 2

    with fg.no_grad():
        y = f(x)
    assert y.requires_grad


def test_set_grad_enabled_plain_call():
    fg.set_grad_enabled(False)
    try:
        assert not fg.is_grad_enabled()
        assert not (fg.ones(2, requires_grad=True) * 2).requires_grad
    finally:
        fg.set_grad_enabled(True)
    assert fg.is_grad_enabled()


def test_set_grad_enabled_context_manager_restores_previous_state():
    with fg.set_grad_enabled(False):
        assert not fg.is_grad_enabled()
        with fg.set_grad_enabled(True):
            assert fg.is_grad_enabled()
        assert not fg.is_grad_enabled()
    assert fg.is_grad_enabled()


def test_set_grad_enabled_decorator():
    @fg.set_grad_enabled(False)
    def f():
        return fg.is_grad_enabled()

    assert f() is False
    assert fg.is_grad_enabled()


def test_set_grad_enabled_rejects_non_bool():
    with pytest.raises(
        TypeError,
        match=re.escape(
            "set_grad_enabled(): argument 'enabled' (position 1) must be bool, not int"
        ),
    ):
        fg.set_grad_enabled(1)
    assert fg.is_grad_enabled()


def test_grad_mode_is_thread_local_new_thread_starts_enabled():
    with fg.no_grad():
        assert run_in_thread(fg.is_grad_enabled) is True
        assert not fg.is_grad_enabled()


def test_grad_mode_change_in_thread_does_not_leak_to_caller():
    def disable_and_report():
        fg.set_grad_enabled(False)
        return fg.is_grad_enabled()

    assert run_in_thread(disable_and_report) is False
    assert fg.is_grad_enabled()


def test_ops_in_thread_record_graph_while_caller_is_in_no_grad():
    x = fg.ones(3, requires_grad=True)
    with fg.no_grad():
        y = run_in_thread(lambda: x * 2)
    assert y.requires_grad
    y.sum().backward()
    npt.assert_array_equal(npv(x.grad), [2.0, 2.0, 2.0])


def test_inference_mode_disables_grad_and_recording():
    x = fg.ones(3, requires_grad=True)
    with fg.inference_mode():
        assert not fg.is_grad_enabled()
        y = x * 2
    assert fg.is_grad_enabled()
    assert not y.requires_grad
    assert y.grad_fn is None
    npt.assert_array_equal(y.numpy(), [2.0, 2.0, 2.0])


def test_enable_grad_inside_inference_mode_still_does_not_record():
    x = fg.ones(3, requires_grad=True)
    with fg.inference_mode(), fg.enable_grad():
        assert fg.is_grad_enabled()
        y = x * 2
    assert not y.requires_grad


def test_nested_inference_mode_false_re_enables_tracking():
    x = fg.ones(3, requires_grad=True)
    with fg.inference_mode(), fg.inference_mode(False):
        assert fg.is_grad_enabled()
        y = x * 2
    assert y.requires_grad
    y.sum().backward()
    npt.assert_array_equal(npv(x.grad), [2.0, 2.0, 2.0])


def test_inference_mode_decorator():
    x = fg.ones(3, requires_grad=True)

    @fg.inference_mode()
    def f(t):
        return t * 2

    assert not f(x).requires_grad
    assert fg.is_grad_enabled()


def test_inference_tensor_requires_grad_outside_raises():
    with fg.inference_mode():
        t = fg.ones(2)
    msg = "Setting requires_grad=True on inference tensor outside InferenceMode is not allowed."
    with pytest.raises(RuntimeError, match=re.escape(msg)):
        t.requires_grad_()


def test_inference_tensor_cannot_be_saved_for_backward():
    x = fg.ones(2, requires_grad=True)
    with fg.inference_mode():
        t = fg.ones(2)
    with pytest.raises(
        RuntimeError, match=re.escape("Inference tensors cannot be saved for backward.")
    ):
        x * t
    y = x + t  # add saves nothing, so this is allowed
    y.sum().backward()
    npt.assert_array_equal(npv(x.grad), [1.0, 1.0])


def test_inference_tensor_clone_outside_is_normal():
    x = fg.ones(2, requires_grad=True)
    with fg.inference_mode():
        t = fg.tensor([3.0, 4.0])
    c = t.clone()
    (x * c).sum().backward()
    npt.assert_array_equal(npv(x.grad), [3.0, 4.0])
