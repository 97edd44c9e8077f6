"""Tensor hooks: Tensor.register_hook (reference section 1.6, tensor hooks only)."""

import re

import ferrograd as fg
import numpy.testing as npt
import pytest


def npv(t):
    return t.detach().numpy()


def ones3():
    return fg.ones(3, requires_grad=True)


def test_hooks_run_in_registration_order_and_chain_their_results():
    x = ones3()
    calls = []

    def make(tag, fn):
        def hook(g):
            calls.append((tag, npv(g).tolist()))
            return fn(g)

        return hook

    x.register_hook(make(1, lambda g: g * 2))
    x.register_hook(make(2, lambda g: g * 2))
    x.register_hook(make(3, lambda g: g + 1))
    (x * 2).sum().backward()
    assert calls == [(1, [2.0] * 3), (2, [4.0] * 3), (3, [8.0] * 3)]
    npt.assert_array_equal(npv(x.grad), [9.0, 9.0, 9.0])


def test_hook_returning_none_keeps_grad():
    x = ones3()
    seen = []
    x.register_hook(lambda g: seen.append(npv(g).tolist()))
    (x * 3).sum().backward()
    assert seen == [[3.0, 3.0, 3.0]]
    npt.assert_array_equal(npv(x.grad), [3.0, 3.0, 3.0])


def test_register_hook_on_tensor_not_requiring_grad_raises():
    with pytest.raises(
        RuntimeError,
        match=re.escape("cannot register a hook on a tensor that doesn't require gradient"),
    ):
        fg.ones(3).register_hook(lambda g: g)


def test_removed_hook_is_not_called_and_remove_is_idempotent():
    x = ones3()
    calls = []
    handle = x.register_hook(lambda g: calls.append("removed") or g * 100)
    x.register_hook(lambda g: calls.append("kept"))
    handle.remove()
    handle.remove()
    (x * 2).sum().backward()
    assert calls == ["kept"]
    npt.assert_array_equal(npv(x.grad), [2.0, 2.0, 2.0])


def test_hook_fires_on_every_backward_until_removed():
    x = ones3()
    calls = []
    handle = x.register_hook(lambda g: calls.append(1))
    (x * 2).sum().backward()
    (x * 2).sum().backward()
    handle.remove()
    (x * 2).sum().backward()
    assert calls == [1, 1]
    npt.assert_array_equal(npv(x.grad), [6.0, 6.0, 6.0])


def test_leaf_hook_sees_summed_grad_once():
    x = ones3()
    seen = []
    x.register_hook(lambda g: seen.append(npv(g).tolist()))
    (x * 2 + x * 3).sum().backward()
    assert seen == [[5.0, 5.0, 5.0]]


def test_leaf_hook_sees_incoming_grad_not_accumulated_grad():
    x = ones3()
    seen = []
    x.register_hook(lambda g: seen.append(npv(g).tolist()))
    (x * 2).sum().backward()
    (x * 2).sum().backward()
    assert seen == [[2.0] * 3, [2.0] * 3]
    npt.assert_array_equal(npv(x.grad), [4.0, 4.0, 4.0])


def test_leaf_hook_result_is_what_gets_accumulated():
    x = ones3()
    x.register_hook(lambda g: g * 0.5)
    (x * 4).sum().backward()
    npt.assert_array_equal(npv(x.grad), [2.0, 2.0, 2.0])


def test_non_leaf_hook_modifies_grad_flowing_upstream():
    x = ones3()
    y = x * 2
    y.register_hook(lambda g: g * 10)
    y.sum().backward()
    npt.assert_array_equal(npv(x.grad), [20.0, 20.0, 20.0])


def test_non_leaf_hook_sees_summed_grad_of_all_consumers():
    x = ones3()
    y = x * 2
    seen = []
    y.register_hook(lambda g: seen.append(npv(g).tolist()))
    (y * 3 + y * y).sum().backward()
    assert seen == [[7.0, 7.0, 7.0]]  # 3 + 2*y with y == 2
    npt.assert_array_equal(npv(x.grad), [14.0, 14.0, 14.0])


def test_hooks_fire_for_autograd_grad_inputs():
    x = ones3()
    calls = []
    x.register_hook(lambda g: calls.append(1) or g * 3)
    (g,) = fg.autograd.grad((x * 2).sum(), x)
    assert calls == [1]
    npt.assert_array_equal(npv(g), [6.0, 6.0, 6.0])
    assert x.grad is None


def test_hook_on_intermediate_fires_for_autograd_grad_wrt_it():
    x = ones3()
    h = x * 2
    h.register_hook(lambda g: g + 1)
    (gh,) = fg.autograd.grad((h * 5).sum(), h)
    npt.assert_array_equal(npv(gh), [6.0, 6.0, 6.0])


def test_hook_on_intermediate_affects_autograd_grad_wrt_leaf():
    x = ones3()
    h = x * 2
    h.register_hook(lambda g: g * 10)
    (gx,) = fg.autograd.grad(h.sum(), x)
    npt.assert_array_equal(npv(gx), [20.0, 20.0, 20.0])


@pytest.mark.parametrize("retain_first", [False, True])
def test_retains_grad_sees_value_after_tensor_hooks(retain_first):
    x = ones3()
    y = x * 2
    if retain_first:
        y.retain_grad()
        y.register_hook(lambda g: g * 10)
    else:
        y.register_hook(lambda g: g * 10)
        y.retain_grad()
    y.sum().backward()
    npt.assert_array_equal(npv(y.grad), [10.0, 10.0, 10.0])
    npt.assert_array_equal(npv(x.grad), [20.0, 20.0, 20.0])


class HookError(Exception):
    pass


def test_exception_in_hook_propagates_with_original_type():
    x = ones3()
    y = x * 2

    def boom(g):
        raise HookError("boom")

    y.register_hook(boom)
    with pytest.raises(HookError, match="boom"):
        y.sum().backward()


def test_value_error_in_leaf_hook_propagates_and_library_stays_usable():
    x = ones3()

    def boom(g):
        raise ValueError("boom")

    handle = x.register_hook(boom)
    with pytest.raises(ValueError, match="boom"):
        (x * 2).sum().backward()
    handle.remove()
    (x * 3).sum().backward()
    npt.assert_array_equal(npv(x.grad), [3.0, 3.0, 3.0])
    z = fg.tensor([1.0, 2.0], requires_grad=True)
    (g,) = fg.autograd.grad((z * z).sum(), z)
    npt.assert_array_equal(npv(g), [2.0, 4.0])


def test_hook_changing_shape_raises():
    x = ones3()
    y = x * 2
    y.register_hook(lambda g: g[:2])
    msg = "hook '<lambda>' has changed the size of value"
    with pytest.raises(RuntimeError, match=re.escape(msg)):
        y.sum().backward()


def test_hook_changing_shape_error_names_the_function():
    x = ones3()
    y = x * 2

    def shrink(g):
        return g[:2]

    y.register_hook(shrink)
    msg = "hook 'shrink' has changed the size of value"
    with pytest.raises(RuntimeError, match=re.escape(msg)):
        y.sum().backward()


def test_hook_changing_dtype_raises():
    x = ones3()
    y = x * 2
    y.register_hook(lambda g: g.double())
    msg = "hook '<lambda>' has changed the type of value"
    with pytest.raises(RuntimeError, match=re.escape(msg)):
        y.sum().backward()


def test_hook_returning_non_tensor_raises_type_error():
    x = ones3()
    y = x * 2
    y.register_hook(lambda g: 3)
    with pytest.raises(TypeError, match=re.escape("hook returned 'int'")):
        y.sum().backward()


def test_hooks_run_with_grad_mode_equal_to_create_graph():
    x = ones3()
    modes = []
    x.register_hook(lambda g: modes.append(fg.is_grad_enabled()))
    (x * x).sum().backward()
    fg.autograd.grad((x * x).sum(), x, create_graph=True)
    assert modes == [False, True]


def test_hook_registered_before_inplace_sees_pre_inplace_grad_after_new_hook():
    x = ones3()
    h = x * 1
    seen = []
    h.register_hook(lambda g: seen.append(("old", npv(g).tolist())))
    h.mul_(3)
    h.register_hook(lambda g: seen.append(("new", npv(g).tolist())))
    h.sum().backward()
    assert seen == [("new", [1.0] * 3), ("old", [3.0] * 3)]
    npt.assert_array_equal(npv(x.grad), [3.0, 3.0, 3.0])


def test_leaf_hook_survives_inplace_under_no_grad():
    x = ones3()
    seen = []
    x.register_hook(lambda g: seen.append(npv(g).tolist()))
    with fg.no_grad():
        x.add_(1)
    (x * 2).sum().backward()
    assert seen == [[2.0, 2.0, 2.0]]
