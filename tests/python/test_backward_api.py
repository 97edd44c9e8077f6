"""fg.autograd.backward and Tensor.backward (reference section 1.2, cases B1-B28)."""

import os
import re
import subprocess
import sys
import textwrap
import warnings

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
ERR_SCALAR = "grad can be implicitly created only for scalar outputs"
CREATE_GRAPH_WARNING = (
    "Using backward() with create_graph=True will create a reference cycle between the parameter "
    "and its gradient which can cause a memory leak. We recommend using autograd.grad when "
    "creating the graph to avoid this. If you have to use this function, make sure to reset the "
    ".grad fields of your parameters to None after use to break the cycle and avoid the leak."
)


def ones3():
    return fg.ones(3, requires_grad=True)


def npv(t):
    return t.detach().numpy()


def backward_create_graph(*args, **kwargs):
    """Tensor.backward(create_graph=True) without the once-per-process B26 warning leaking out."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        fg.autograd.backward(*args, create_graph=True, **kwargs)


# --------------------------------------------------------------------------------------------
# implicit seeds and roots (B1-B5, B14, B17)
# --------------------------------------------------------------------------------------------


def test_backward_of_non_scalar_without_gradient_raises():  # B1
    x = ones3()
    with pytest.raises(RuntimeError, match=re.escape(ERR_SCALAR)):
        (x * 2).backward()


def test_autograd_backward_of_non_scalar_without_gradient_raises():  # B1
    x = ones3()
    with pytest.raises(RuntimeError, match=re.escape(ERR_SCALAR)):
        fg.autograd.backward(x * 2)


def test_backward_of_tensor_not_requiring_grad_raises():  # B2
    with pytest.raises(
        RuntimeError,
        match=re.escape("element 0 of tensors does not require grad and does not have a grad_fn"),
    ):
        fg.ones(3).sum().backward()


def test_backward_error_names_position_of_root_without_grad():  # B3
    x = ones3()
    with pytest.raises(
        RuntimeError,
        match=re.escape("element 1 of tensors does not require grad and does not have a grad_fn"),
    ):
        fg.autograd.backward([(x * 2).sum(), fg.ones(())])


def test_backward_from_leaf_scalar_sets_grad_to_one():  # B4
    s = fg.tensor(2.0, requires_grad=True)
    s.backward()
    assert s.grad.shape == ()
    assert s.grad.item() == 1.0


def test_none_grad_tensor_for_non_scalar_raises():  # B14
    x = ones3()
    with pytest.raises(RuntimeError, match=re.escape(ERR_SCALAR)):
        fg.autograd.backward([x * 2], [None])


def test_none_grad_tensor_for_scalar_is_implicit_one():
    x = ones3()
    y = x * 2
    fg.autograd.backward([y, (x * 3).sum()], [fg.tensor([1.0, 2.0, 3.0]), None])
    npt.assert_allclose(npv(x.grad), [5.0, 7.0, 9.0])


def test_backward_of_empty_list_is_noop():  # B17
    x = ones3()
    assert fg.autograd.backward([]) is None
    assert x.grad is None


def test_backward_returns_none():
    x = ones3()
    assert (x * 2).sum().backward() is None
    assert fg.autograd.backward((x * 2).sum()) is None


# --------------------------------------------------------------------------------------------
# graph freeing and retain_graph (B6-B9)
# --------------------------------------------------------------------------------------------


def test_second_backward_without_retain_graph_raises():  # B6
    x = ones3()
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match=re.escape(ERR_TWICE)):
        y.backward()


def test_second_backward_through_node_that_saved_a_scalar_raises():  # B7
    x = ones3()
    y = (x * 2).sum()
    y.backward()
    with pytest.raises(RuntimeError, match=re.escape(ERR_TWICE)):
        y.backward()


def test_second_backward_through_nodes_without_saved_tensors_works():  # B8
    x = ones3()
    y = (x + 1).sum()
    y.backward()
    y.backward()
    npt.assert_array_equal(npv(x.grad), [2.0, 2.0, 2.0])


def test_retain_graph_allows_second_backward_and_grads_accumulate():  # B9
    x = ones3()
    y = (x * x).sum()
    y.backward(retain_graph=True)
    npt.assert_array_equal(npv(x.grad), [2.0, 2.0, 2.0])
    y.backward()
    npt.assert_array_equal(npv(x.grad), [4.0, 4.0, 4.0])
    with pytest.raises(RuntimeError, match=re.escape(ERR_TWICE)):
        y.backward()


def test_retain_graph_defaults_to_create_graph():
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    y = (x**3).sum()
    backward_create_graph(y)
    y.backward()  # graph was retained because create_graph=True
    npt.assert_allclose(npv(x.grad), 2 * 3 * np.array([1.0, 4.0]))


def test_explicit_retain_graph_false_with_create_graph_frees_graph():
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    y = (x**3).sum()
    backward_create_graph(y, retain_graph=False)
    with pytest.raises(RuntimeError, match=re.escape(ERR_TWICE)):
        y.backward()


def test_freed_graph_error_from_autograd_backward_too():
    x = ones3()
    y = (x.exp() * x).sum()
    fg.autograd.backward(y)
    with pytest.raises(RuntimeError, match=re.escape(ERR_TWICE)):
        fg.autograd.backward(y)


def test_shared_trunk_second_loss_needs_retain_graph():
    x = ones3()
    trunk = x.exp()
    (trunk * 2).sum().backward()
    with pytest.raises(RuntimeError, match=re.escape(ERR_TWICE)):
        (trunk * 3).sum().backward()


def test_shared_trunk_with_retain_graph_accumulates():
    x = fg.tensor([0.0, 1.0], requires_grad=True)
    trunk = x.exp()
    (trunk * 2).sum().backward(retain_graph=True)
    (trunk * 3).sum().backward()
    npt.assert_allclose(npv(x.grad), 5 * np.exp([0.0, 1.0]), rtol=1e-6)


# --------------------------------------------------------------------------------------------
# explicit seeds (B10-B13, B16, B28)
# --------------------------------------------------------------------------------------------


def test_vector_jacobian_product_with_explicit_gradient():
    x = fg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    g = fg.tensor([1.0, 0.5, -1.0])
    (x**2).backward(g)
    npt.assert_allclose(npv(x.grad), 2 * np.array([1.0, 2.0, 3.0]) * [1.0, 0.5, -1.0])


def test_backward_gradient_keyword():  # B28
    x = ones3()
    (x * 2).backward(gradient=fg.tensor([1.0, 2.0, 3.0]))
    npt.assert_array_equal(npv(x.grad), [2.0, 4.0, 6.0])


def test_autograd_backward_grad_tensors_keyword():
    x = ones3()
    fg.autograd.backward(x * 2, grad_tensors=fg.tensor([3.0, 2.0, 1.0]))
    npt.assert_array_equal(npv(x.grad), [6.0, 4.0, 2.0])


@pytest.mark.parametrize("seed_shape", [(4,), (1,), (3, 1), ()])
def test_seed_shape_mismatch_raises(seed_shape):  # B10
    x = ones3()
    with pytest.raises(
        RuntimeError,
        match=r"Mismatch in shape: grad_output\[0\] has a shape of .* and output\[0\] has a shape "
        r"of .*\[3\]",
    ):
        (x * 2).backward(fg.ones(seed_shape))


def test_seed_shape_mismatch_message_names_both_shapes():  # B10
    x = ones3()
    with pytest.raises(
        RuntimeError,
        match=r"Mismatch in shape: grad_output\[0\] has a shape of .*\[4\].* and output\[0\] has a "
        r"shape of .*\[3\]",
    ):
        (x * 2).backward(fg.ones(4))


@pytest.mark.parametrize("seed_dtype", [fg.float64, fg.int64])
def test_seed_of_other_dtype_is_cast_to_output_dtype(seed_dtype):  # B11
    x = fg.ones(3, requires_grad=True)
    (x * 2).backward(fg.tensor([1, 2, 3], dtype=seed_dtype))
    assert x.grad.dtype == fg.float32
    npt.assert_array_equal(npv(x.grad), [2.0, 4.0, 6.0])


def test_fewer_grad_tensors_than_tensors_raises():  # B13
    x = ones3()
    with pytest.raises(RuntimeError, match=re.escape("got 2 tensors and 1 gradients")):
        fg.autograd.backward([(x * 2).sum(), (x * 3).sum()], [fg.tensor(1.0)])


def test_extra_grad_tensors_are_ignored():  # B13
    x = ones3()
    fg.autograd.backward(
        [(x * 2).sum(), (x * 3).sum()], [fg.tensor(1.0), fg.tensor(1.0), fg.tensor(1.0)]
    )
    npt.assert_array_equal(npv(x.grad), [5.0, 5.0, 5.0])


def test_python_float_as_gradient_raises_type_error():  # B16
    x = ones3()
    with pytest.raises(TypeError, match=re.escape("'float' object is not iterable")):
        (x * 2).sum().backward(1.0)


def test_non_tensor_in_grad_tensors_raises_type_error():  # B16
    x = ones3()
    with pytest.raises(
        TypeError, match=re.escape("gradients can be either Tensors or None, but got int")
    ):
        fg.autograd.backward((x * 2).sum(), grad_tensors=[3])


def test_seed_requiring_grad_does_not_make_grad_require_grad():  # B28 / section 2.4
    x = ones3()
    g = fg.ones(3, requires_grad=True)
    (x * 2).backward(g)
    assert not x.grad.requires_grad
    npt.assert_array_equal(npv(x.grad), [2.0, 2.0, 2.0])


def test_seed_requiring_grad_with_create_graph_is_differentiable():  # B28 / section 2.4
    x = ones3()
    g = fg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    backward_create_graph(x * 2, g)
    assert x.grad.requires_grad
    (dg,) = fg.autograd.grad(x.grad.sum(), g)
    npt.assert_array_equal(npv(dg), [2.0, 2.0, 2.0])


def test_seed_tensor_is_not_aliased_into_grad():  # section 2.1
    x = ones3()
    s = fg.ones(3)
    (x * 2).backward(s)
    assert x.grad is not s
    s.add_(1.0)
    npt.assert_array_equal(npv(x.grad), [2.0, 2.0, 2.0])


# --------------------------------------------------------------------------------------------
# several roots (B18, OneFlow / R examples)
# --------------------------------------------------------------------------------------------


def test_duplicate_roots_sum_their_seeds():  # B18
    x = ones3()
    a = (x * 2).sum()
    fg.autograd.backward([a, a])
    npt.assert_array_equal(npv(x.grad), [4.0, 4.0, 4.0])


def test_two_independent_roots_fill_both_leaves():  # seeds 003/004 example
    x = fg.tensor([1.0], requires_grad=True)
    y = 2 * x
    a = fg.tensor([1.0], requires_grad=True)
    b = 3 * a
    fg.autograd.backward([y, b])
    npt.assert_array_equal(npv(x.grad), [2.0])
    npt.assert_array_equal(npv(a.grad), [3.0])


def test_two_roots_with_explicit_grad_tensors():
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    a = fg.tensor([3.0], requires_grad=True)
    fg.autograd.backward((x * x, a * 5), (fg.tensor([1.0, -1.0]), fg.tensor([2.0])))
    npt.assert_array_equal(npv(x.grad), [2.0, -4.0])
    npt.assert_array_equal(npv(a.grad), [10.0])


def test_roots_sharing_a_leaf_add_up():
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    fg.autograd.backward([(x * x).sum(), (x * 3).sum()])
    npt.assert_array_equal(npv(x.grad), [5.0, 7.0])


def test_root_may_be_a_tuple():
    x = ones3()
    fg.autograd.backward(((x * 2).sum(), (x * 4).sum()))
    npt.assert_array_equal(npv(x.grad), [6.0, 6.0, 6.0])


# --------------------------------------------------------------------------------------------
# inputs= (B19-B24)
# --------------------------------------------------------------------------------------------


def test_backward_with_empty_inputs_raises():  # B19
    x = ones3()
    with pytest.raises(
        RuntimeError, match=re.escape("`inputs` argument to `backward()` cannot be empty.")
    ):
        (x * 2).sum().backward(inputs=[])


def test_autograd_backward_with_empty_inputs_raises():  # B19
    x = ones3()
    with pytest.raises(
        RuntimeError, match=re.escape("`inputs` argument to `backward()` cannot be empty.")
    ):
        fg.autograd.backward((x * 2).sum(), inputs=[])


def test_backward_inputs_restricts_accumulation():  # B20
    x = ones3()
    z = fg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (x * z).sum().backward(inputs=[x])
    npt.assert_array_equal(npv(x.grad), [1.0, 2.0, 3.0])
    assert z.grad is None


def test_autograd_backward_inputs_restricts_accumulation():  # B20
    x = ones3()
    z = fg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    fg.autograd.backward((x * z).sum(), inputs=[z])
    npt.assert_array_equal(npv(z.grad), [1.0, 1.0, 1.0])
    assert x.grad is None


def test_backward_inputs_non_leaf_gets_grad_and_retains_grad():  # B21
    x = ones3()
    h = x * 2
    assert not h.retains_grad
    (h * h).sum().backward(inputs=[h])
    assert h.retains_grad
    npt.assert_array_equal(npv(h.grad), [4.0, 4.0, 4.0])
    assert x.grad is None


def test_backward_inputs_unreachable_leaf_stays_none():  # B22
    x = ones3()
    z = fg.ones(3, requires_grad=True)
    (x * 2).sum().backward(inputs=[z])
    assert z.grad is None
    assert x.grad is None
    (x * 2).sum().backward(inputs=[x, z])
    npt.assert_array_equal(npv(x.grad), [2.0, 2.0, 2.0])
    assert z.grad is None


def test_backward_inputs_not_requiring_grad_raises():  # B23
    x = ones3()
    with pytest.raises(
        RuntimeError, match=re.escape("can't retain_grad on Tensor that has requires_grad=False")
    ):
        (x * 2).sum().backward(inputs=[fg.ones(3)])


def test_backward_inputs_single_tensor():  # B24
    x = ones3()
    z = ones3()
    (x * z * 3).sum().backward(inputs=x)
    npt.assert_array_equal(npv(x.grad), [3.0, 3.0, 3.0])
    assert z.grad is None


# --------------------------------------------------------------------------------------------
# grad mode and create_graph (B25, B26)
# --------------------------------------------------------------------------------------------


def test_backward_inside_no_grad_still_computes_grads():  # B25
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    with fg.no_grad():
        y.backward()
        assert not fg.is_grad_enabled()
    npt.assert_array_equal(npv(x.grad), [2.0, 4.0])


def test_backward_create_graph_gives_differentiable_grad():
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    backward_create_graph((x**3).sum())
    assert x.grad.requires_grad
    npt.assert_allclose(npv(x.grad), [3.0, 12.0])
    (h,) = fg.autograd.grad(x.grad.sum(), x)
    npt.assert_allclose(npv(h), [6.0, 12.0])


def test_backward_create_graph_grad_independent_of_leaf_does_not_require_grad():  # section 2.4
    x = ones3()
    backward_create_graph((x * 2).sum())
    assert not x.grad.requires_grad
    npt.assert_array_equal(npv(x.grad), [2.0, 2.0, 2.0])


def test_backward_create_graph_warns_once_per_process():  # B26
    code = textwrap.dedent(
        """
        import warnings
        import ferrograd as fg

        x = fg.ones(3, requires_grad=True)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            (x * x).sum().backward(create_graph=True)
            x.grad = None
            (x * x).sum().backward(create_graph=True)
            (x * 2).sum().backward()
        msgs = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
        print(len(msgs))
        print(msgs[0] if msgs else "")
        """
    )
    # the child must import the same ferrograd as this process, however pytest found it
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(fg.__file__)))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH", "")) if p)
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    count, message = proc.stdout.strip().split("\n", 1)
    assert count == "1"
    # torch appends "(Triggered internally at <file>:<line>.)"; the text before it must match.
    assert message.startswith(CREATE_GRAPH_WARNING)


# --------------------------------------------------------------------------------------------
# accumulation into .grad
# --------------------------------------------------------------------------------------------


def test_grads_accumulate_across_backward_calls():
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    (x * 3).sum().backward()
    (x * x).sum().backward()
    npt.assert_array_equal(npv(x.grad), [5.0, 7.0])


def test_accumulation_updates_existing_grad_object_in_place():  # section 2.2
    x = ones3()
    (x * 2).sum().backward()
    first = x.grad
    (x * 2).sum().backward()
    assert x.grad is first
    npt.assert_array_equal(npv(first), [4.0, 4.0, 4.0])


def test_accumulation_into_user_assigned_grad_updates_it_in_place():  # section 2.2
    x = ones3()
    g = fg.tensor([10.0, 20.0, 30.0])
    x.grad = g
    (x * 2).sum().backward()
    assert x.grad is g
    npt.assert_array_equal(npv(g), [12.0, 22.0, 32.0])


def test_accumulation_into_a_view_grad_writes_through_to_its_base():
    # The in-place add lands at the view's offset, for a dense and a broadcast (sum) gradient,
    # and also when the grad is strided (the general path).
    x = fg.tensor([1.0, 2.0, 3.0, 4.0], dtype=fg.float64, requires_grad=True)
    base = fg.zeros(8, dtype=fg.float64)
    x.grad = base[2:6]
    (x * x).sum().backward()
    x.sum().backward()
    npt.assert_array_equal(npv(base), [0, 0, 3, 5, 7, 9, 0, 0])
    assert x.grad._version == base._version == 2
    strided = fg.zeros(8, dtype=fg.float64)
    x.grad = strided[::2]
    (x * x).sum().backward()
    npt.assert_array_equal(npv(strided), [2, 0, 4, 0, 6, 0, 8, 0])


def test_accumulation_of_a_grad_into_itself_doubles_it():
    # A hook returning the grad already stored: source and destination share memory.
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    (x * 3).sum().backward()
    x.register_hook(lambda g: x.grad)
    (x * 5).sum().backward()
    npt.assert_array_equal(npv(x.grad), [6.0, 6.0])


def test_grad_reset_to_none_starts_fresh():
    x = ones3()
    (x * 2).sum().backward()
    x.grad = None
    (x * 5).sum().backward()
    npt.assert_array_equal(npv(x.grad), [5.0, 5.0, 5.0])


def test_leaf_used_in_two_branches_gets_summed_grad():
    x = ones3()
    (x * 2 + x * 3).sum().backward()
    npt.assert_array_equal(npv(x.grad), [5.0, 5.0, 5.0])


def test_backward_does_not_populate_non_leaf_grad_without_retain_grad():
    x = ones3()
    h = x * 2
    (h * 3).sum().backward()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        assert h.grad is None
    npt.assert_array_equal(npv(x.grad), [6.0, 6.0, 6.0])
