"""Custom fg.autograd.Function (reference section 1.9)."""

import gc
import re
import warnings
import weakref

import ferrograd as fg
import numpy as np
import numpy.testing as npt
import pytest
from ferrograd.autograd import Function
from ferrograd.autograd.function import once_differentiable

ERR_TWICE = (
    "Trying to backward through the graph a second time (or directly access saved tensors after "
    "they have already been freed). Saved intermediate values of the graph are freed when you "
    "call .backward() or autograd.grad(). Specify retain_graph=True if you need to backward "
    "through the graph a second time or if you need to access saved tensors after calling "
    "backward."
)


def npv(t):
    return t.detach().numpy()


def ones3():
    return fg.ones(3, requires_grad=True)


class Exp(Function):
    """The example from the OneFlow autograd.Function docs (seed 003)."""

    @staticmethod
    def forward(ctx, i):
        result = i.exp()
        ctx.save_for_backward(result)
        return result

    @staticmethod
    def backward(ctx, grad_output):
        (result,) = ctx.saved_tensors
        return grad_output * result


class Square(Function):
    """Backward written with differentiable ops, so double backward works."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 2 * x


# --------------------------------------------------------------------------------------------
# basics
# --------------------------------------------------------------------------------------------


def test_apply_forward_and_backward_values():
    a = np.array([0.0, 1.0, -0.5])
    x = fg.tensor(a, requires_grad=True, dtype=fg.float64)
    y = Exp.apply(x)
    npt.assert_allclose(npv(y), np.exp(a), rtol=1e-12)
    (y * fg.tensor([1.0, 2.0, 3.0], dtype=fg.float64)).sum().backward()
    npt.assert_allclose(npv(x.grad), np.exp(a) * [1.0, 2.0, 3.0], rtol=1e-12)


def test_oneflow_style_instance_call_works():
    a = np.array([0.0, 1.0, 2.0])
    x = fg.tensor(a, requires_grad=True, dtype=fg.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        y = Exp()(x)
    assert y.requires_grad
    npt.assert_allclose(npv(y), np.exp(a), rtol=1e-12)
    y.sum().backward()
    npt.assert_allclose(npv(x.grad), np.exp(a), rtol=1e-12)


def test_function_grad_fn_is_named_after_class():
    x = ones3()
    y = Exp.apply(x)
    assert y.grad_fn.name() == "ExpBackward"
    assert "ExpBackward object" in repr(y.grad_fn)
    assert "grad_fn=<ExpBackward>" in repr(y)


def test_function_in_a_larger_graph_chains_correctly():
    a = np.array([0.3, -0.7])
    x = fg.tensor(a, requires_grad=True, dtype=fg.float64)
    y = (Exp.apply(x.sin()) * 2).sum()
    y.backward()
    npt.assert_allclose(npv(x.grad), 2 * np.exp(np.sin(a)) * np.cos(a), rtol=1e-12)


def test_grad_mode_is_off_in_forward_and_follows_create_graph_in_backward():
    modes = []

    class F(Function):
        @staticmethod
        def forward(ctx, x):
            modes.append(("fwd", fg.is_grad_enabled()))
            return x * 2

        @staticmethod
        def backward(ctx, g):
            modes.append(("bwd", fg.is_grad_enabled()))
            return g * 2

    x = ones3()
    F.apply(x).sum().backward()
    fg.autograd.grad(F.apply(x).sum(), x, create_graph=True)
    assert modes == [("fwd", False), ("bwd", False), ("fwd", False), ("bwd", True)]


def test_output_requires_grad_even_if_freshly_created():
    class F(Function):
        @staticmethod
        def forward(ctx, x):
            return fg.zeros(2)

        @staticmethod
        def backward(ctx, g):
            return fg.zeros(3)

    out = F.apply(ones3())
    assert out.requires_grad
    assert out.grad_fn.name() == "FBackward"


def test_output_plain_when_no_input_requires_grad_or_under_no_grad():
    out = Exp.apply(fg.ones(3))
    assert not out.requires_grad
    assert out.grad_fn is None
    with fg.no_grad():
        out2 = Exp.apply(ones3())
    assert not out2.requires_grad
    assert out2.grad_fn is None
    npt.assert_allclose(out2.numpy(), np.full(3, np.e), rtol=1e-6)


def test_returning_input_as_is_gives_new_tensor_with_function_grad_fn():
    class Identity(Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 3

    x = ones3()
    out = Identity.apply(x)
    assert out is not x
    assert out.grad_fn.name() == "IdentityBackward"
    out.sum().backward()
    npt.assert_array_equal(npv(x.grad), [3.0, 3.0, 3.0])


def test_non_tensor_arguments_and_outputs_pass_through():
    class Scale(Function):
        @staticmethod
        def forward(ctx, x, factor, label):
            ctx.factor = factor
            return x * factor, label, 5

        @staticmethod
        def backward(ctx, g, g_label, g_five):
            return g * ctx.factor, None, None

    x = ones3()
    y, label, five = Scale.apply(x, 2.5, "tag")
    assert label == "tag"
    assert five == 5
    npt.assert_array_equal(npv(y), [2.5, 2.5, 2.5])
    y.sum().backward()
    npt.assert_array_equal(npv(x.grad), [2.5, 2.5, 2.5])


def test_two_tensor_inputs_get_their_own_grads():
    class Mul(Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            return a * b

        @staticmethod
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            return g * b, g * a

    a = fg.tensor([1.0, 2.0], requires_grad=True)
    b = fg.tensor([3.0, 4.0], requires_grad=True)
    Mul.apply(a, b).sum().backward()
    npt.assert_array_equal(npv(a.grad), [3.0, 4.0])
    npt.assert_array_equal(npv(b.grad), [1.0, 2.0])


def test_multiple_outputs_receive_their_own_grads():
    class Split(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, ga, gb):
            return ga * 2 + gb * 3

    x = ones3()
    a, b = Split.apply(x)
    (a * 10 + b).sum().backward()
    npt.assert_array_equal(npv(x.grad), [23.0, 23.0, 23.0])


# --------------------------------------------------------------------------------------------
# ctx.needs_input_grad, save_for_backward, saved_tensors
# --------------------------------------------------------------------------------------------


def test_needs_input_grad_in_forward_and_backward():
    seen = []

    class F(Function):
        @staticmethod
        def forward(ctx, x, y, k):
            seen.append(tuple(ctx.needs_input_grad))
            return x * y * k

        @staticmethod
        def backward(ctx, g):
            seen.append(tuple(ctx.needs_input_grad))
            return g, None, None

    x = ones3()
    F.apply(x, fg.ones(3), 2.0).sum().backward()
    assert seen == [(True, False, False), (True, False, False)]


def test_save_for_backward_rejects_non_tensor():
    class F(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x, 3)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g

    with pytest.raises(
        TypeError,
        match=re.escape("save_for_backward can only save variables, but argument 1 is of type int"),
    ):
        F.apply(ones3())


def test_save_for_backward_accepts_none_and_intermediates():
    class F(Function):
        @staticmethod
        def forward(ctx, x):
            mid = x.exp()
            ctx.save_for_backward(None, mid)
            return mid * 2

        @staticmethod
        def backward(ctx, g):
            nothing, mid = ctx.saved_tensors
            assert nothing is None
            return g * 2 * mid

    a = np.array([0.0, 1.0])
    x = fg.tensor(a, requires_grad=True, dtype=fg.float64)
    F.apply(x).sum().backward()
    npt.assert_allclose(npv(x.grad), 2 * np.exp(a), rtol=1e-12)


def test_save_for_backward_last_call_wins():
    class F(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            ctx.save_for_backward(x * 5)
            return x * 1

        @staticmethod
        def backward(ctx, g):
            (s,) = ctx.saved_tensors
            return g * s

    x = ones3()
    F.apply(x).sum().backward()
    npt.assert_array_equal(npv(x.grad), [5.0, 5.0, 5.0])


def test_saved_tensors_can_be_read_several_times():
    class F(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (a,) = ctx.saved_tensors
            (b,) = ctx.saved_tensors
            return g * (a + b)

    x = fg.tensor([1.0, 2.0], requires_grad=True)
    F.apply(x).sum().backward()
    npt.assert_array_equal(npv(x.grad), [2.0, 4.0])


def test_saved_tensors_after_graph_freed_raise():
    contexts = []

    class F(Function):
        @staticmethod
        def forward(ctx, x):
            contexts.append(ctx)
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 2 * x

    x = ones3()
    y = F.apply(x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match=re.escape(ERR_TWICE)):
        _ = contexts[0].saved_tensors
    with pytest.raises(RuntimeError, match=re.escape(ERR_TWICE)):
        y.backward()


def test_saved_tensors_kept_with_retain_graph():
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    y = Square.apply(x).sum()
    y.backward(retain_graph=True)
    y.backward()
    npt.assert_array_equal(npv(x.grad), [4.0, 8.0])


def test_saved_input_modified_in_place_is_detected():
    x = ones3()
    h = x * 1
    y = Square.apply(h)
    h.add_(1)
    with pytest.raises(RuntimeError, match=r"modified by an inplace operation"):
        y.sum().backward()


# --------------------------------------------------------------------------------------------
# validation of what backward returns
# --------------------------------------------------------------------------------------------


def _make_fn(n_inputs, backward_result):
    if n_inputs == 1:

        class F(Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return backward_result(g)
    else:

        class F(Function):
            @staticmethod
            def forward(ctx, x, y):
                return x * y

            @staticmethod
            def backward(ctx, g):
                return backward_result(g)

    return F


def test_too_many_gradients_raises():
    fn_cls = _make_fn(1, lambda g: (g * 2, g))
    with pytest.raises(
        RuntimeError,
        match=re.escape(
            "function FBackward returned an incorrect number of gradients (expected 1, got 2)"
        ),
    ):
        fn_cls.apply(ones3()).sum().backward()


def test_trailing_none_gradients_are_trimmed():
    fn_cls = _make_fn(1, lambda g: (g * 2, None, None))
    x = ones3()
    fn_cls.apply(x).sum().backward()
    npt.assert_array_equal(npv(x.grad), [2.0, 2.0, 2.0])


def test_too_few_gradients_raises():
    fn_cls = _make_fn(2, lambda g: (g,))
    with pytest.raises(
        RuntimeError,
        match=re.escape(
            "function FBackward returned an incorrect number of gradients (expected 2, got 1)"
        ),
    ):
        fn_cls.apply(ones3(), ones3()).sum().backward()


def test_gradient_for_non_tensor_input_must_be_none():
    class F(Function):
        @staticmethod
        def forward(ctx, x, k):
            return x * k

        @staticmethod
        def backward(ctx, g):
            return g, g

    with pytest.raises(
        RuntimeError,
        match=re.escape(
            "function FBackward returned a gradient different than None at position 2, but the "
            "corresponding forward input was not a Variable"
        ),
    ):
        F.apply(ones3(), 2.0).sum().backward()


def test_gradient_for_input_not_requiring_grad_is_dropped():
    fn_cls = _make_fn(2, lambda g: (g * 2, g * 3))
    x, c = ones3(), fg.ones(3)
    fn_cls.apply(x, c).sum().backward()
    npt.assert_array_equal(npv(x.grad), [2.0, 2.0, 2.0])
    assert c.grad is None


def test_non_tensor_gradient_raises():
    fn_cls = _make_fn(1, lambda g: 3)
    with pytest.raises(RuntimeError, match=re.escape("expected Variable or None (got int)")):
        fn_cls.apply(ones3()).sum().backward()


def test_broadcast_larger_gradient_is_summed_down():
    fn_cls = _make_fn(1, lambda g: fg.ones(2, 3))
    x = ones3()
    fn_cls.apply(x).sum().backward()
    npt.assert_array_equal(npv(x.grad), [2.0, 2.0, 2.0])


@pytest.mark.parametrize("bad", [5, 1])
def test_gradient_of_incompatible_shape_raises(bad):
    fn_cls = _make_fn(1, lambda g: fg.ones(bad))
    with pytest.raises(
        RuntimeError,
        match=re.escape(
            f"Function FBackward returned an invalid gradient at index 0 - got [{bad}] but "
            "expected shape compatible with [3]"
        ),
    ):
        fn_cls.apply(ones3()).sum().backward()


@pytest.mark.parametrize("dtype", [fg.float64, fg.int64])
def test_gradient_of_other_dtype_is_cast_to_input_dtype(dtype):
    fn_cls = _make_fn(1, lambda g: fg.ones(3, dtype=dtype) * 4)
    x = ones3()
    fn_cls.apply(x).sum().backward()
    assert x.grad.dtype == fg.float32
    npt.assert_array_equal(npv(x.grad), [4.0, 4.0, 4.0])


def test_missing_backward_raises_not_implemented():
    class F(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

    with pytest.raises(
        NotImplementedError,
        match=re.escape(
            "You must implement either the backward or vjp method for your custom "
            "autograd.Function to use it with backward mode AD."
        ),
    ):
        F.apply(ones3()).sum().backward()


class BackwardError(Exception):
    pass


def test_exception_in_backward_propagates_unchanged_and_library_stays_usable():
    err = BackwardError("custom failure", 42)

    class F(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            raise err

    x = ones3()
    with pytest.raises(BackwardError) as info:
        F.apply(x).sum().backward()
    assert info.value is err
    assert info.value.args == ("custom failure", 42)
    y = fg.tensor([1.0, 2.0], requires_grad=True)
    Square.apply(y).sum().backward()
    npt.assert_array_equal(npv(y.grad), [2.0, 4.0])


def test_key_error_in_backward_keeps_type():
    class F(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return {}["missing"]

    with pytest.raises(KeyError):
        F.apply(ones3()).sum().backward()


# --------------------------------------------------------------------------------------------
# mark_dirty, mark_non_differentiable, set_materialize_grads
# --------------------------------------------------------------------------------------------


class DoubleInPlace(Function):
    @staticmethod
    def forward(ctx, x):
        x.mul_(2)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return g * 2


def test_mark_dirty_returns_same_object_with_new_grad_fn():
    x = ones3()
    h = x * 1
    out = DoubleInPlace.apply(h)
    assert out is h
    assert h.grad_fn.name() == "DoubleInPlaceBackward"
    npt.assert_array_equal(npv(h), [2.0, 2.0, 2.0])
    (h * fg.tensor([1.0, 2.0, 3.0])).sum().backward()
    npt.assert_array_equal(npv(x.grad), [2.0, 4.0, 6.0])


def test_mark_dirty_bumps_version_of_saved_tensor():
    x = ones3()
    w = ones3()
    h = x * 1
    c = h * w  # saves h for w's gradient
    DoubleInPlace.apply(h)
    with pytest.raises(RuntimeError, match=r"modified by an inplace operation"):
        c.sum().backward()


def test_mark_dirty_on_leaf_requiring_grad_raises():
    with pytest.raises(
        RuntimeError,
        match=re.escape(
            "a leaf Variable that requires grad has been used in an in-place operation."
        ),
    ):
        DoubleInPlace.apply(ones3())


def test_mark_dirty_input_not_returned_raises():
    class F(Function):
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            ctx.mark_dirty(x)
            return x * 1

        @staticmethod
        def backward(ctx, g):
            return g * 2

    with pytest.raises(
        RuntimeError,
        match=re.escape(
            "Some elements marked as dirty during the forward method were not returned as output. "
            "The inputs that are modified inplace must all be outputs of the Function."
        ),
    ):
        F.apply(ones3() * 1)


def test_mark_non_differentiable_output_does_not_require_grad_and_gets_zero_grad_slot():
    received = []

    class F(Function):
        @staticmethod
        def forward(ctx, x):
            mask = (x * 0 + 1).long()
            ctx.mark_non_differentiable(mask)
            return x * 2, mask

        @staticmethod
        def backward(ctx, g, g_mask):
            received.append(g_mask)
            return g * 2

    x = ones3()
    out, mask = F.apply(x)
    assert out.requires_grad
    assert not mask.requires_grad
    out.sum().backward()
    npt.assert_array_equal(npv(x.grad), [2.0, 2.0, 2.0])
    assert len(received) == 1
    assert received[0] is not None
    assert received[0].shape == (3,)
    assert not np.any(received[0].numpy())


def _two_output_fn(materialize, received):
    class F(Function):
        @staticmethod
        def forward(ctx, x):
            if not materialize:
                ctx.set_materialize_grads(False)
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, ga, gb):
            received.append((ga, gb))
            out = ga * 2
            if gb is not None:
                out = out + gb * 3
            return out

    return F


def test_unused_output_grad_is_materialized_as_zeros_by_default():
    received = []
    fn_cls = _two_output_fn(True, received)
    x = ones3()
    a, _ = fn_cls.apply(x)
    a.sum().backward()
    ((ga, gb),) = received
    npt.assert_array_equal(ga.numpy(), [1.0, 1.0, 1.0])
    assert gb is not None
    npt.assert_array_equal(gb.numpy(), [0.0, 0.0, 0.0])
    npt.assert_array_equal(npv(x.grad), [2.0, 2.0, 2.0])


def test_set_materialize_grads_false_passes_none():
    received = []
    fn_cls = _two_output_fn(False, received)
    x = ones3()
    a, _ = fn_cls.apply(x)
    a.sum().backward()
    ((ga, gb),) = received
    npt.assert_array_equal(ga.numpy(), [1.0, 1.0, 1.0])
    assert gb is None
    npt.assert_array_equal(npv(x.grad), [2.0, 2.0, 2.0])


# --------------------------------------------------------------------------------------------
# higher order
# --------------------------------------------------------------------------------------------


def test_double_backward_through_function_with_differentiable_backward():
    x = fg.tensor([3.0], requires_grad=True)
    (g,) = fg.autograd.grad(Square.apply(x).sum(), x, create_graph=True)
    assert g.requires_grad
    assert g.grad_fn is not None
    npt.assert_array_equal(npv(g), [6.0])
    (h,) = fg.autograd.grad(g.sum(), x)
    npt.assert_array_equal(npv(h), [2.0])


class OnceSquare(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g


def test_once_differentiable_first_order_works():
    x = fg.tensor([3.0, -1.0], requires_grad=True)
    OnceSquare.apply(x).sum().backward()
    npt.assert_array_equal(npv(x.grad), [6.0, -2.0])


def test_once_differentiable_backward_runs_without_grad():
    modes = []

    class F(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            modes.append(fg.is_grad_enabled())
            return g * 2

    x = ones3()
    fg.autograd.grad(F.apply(x).sum(), x, create_graph=True)
    assert modes == [False]


def test_once_differentiable_result_without_grad_requiring_grad_outputs_has_no_grad_fn():
    x = fg.tensor([3.0], requires_grad=True)
    (g,) = fg.autograd.grad(OnceSquare.apply(x).sum(), x, create_graph=True)
    npt.assert_array_equal(npv(g), [6.0])
    assert not g.requires_grad
    with pytest.raises(
        RuntimeError,
        match=re.escape("element 0 of tensors does not require grad and does not have a grad_fn"),
    ):
        g.sum().backward()


def test_differentiating_once_differentiable_twice_raises():
    x = fg.tensor([3.0], requires_grad=True)
    y = OnceSquare.apply(x)
    (g,) = fg.autograd.grad((y * x).sum(), x, create_graph=True)
    npt.assert_array_equal(npv(g), [27.0])  # 2x*x + x^2
    assert g.requires_grad
    with pytest.raises(
        RuntimeError,
        match=re.escape(
            "trying to differentiate twice a function that was marked with @once_differentiable"
        ),
    ):
        g.sum().backward()


# --------------------------------------------------------------------------------------------
# lifetime
# --------------------------------------------------------------------------------------------


def test_ctx_and_saved_state_are_released_with_the_graph():
    class Marker:
        pass

    refs = []

    class F(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.marker = Marker()
            refs.append(weakref.ref(ctx.marker))
            ctx.save_for_backward(x)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = ones3()
    y = F.apply(x).sum()
    assert refs[0]() is not None
    y.backward()
    del y
    gc.collect()
    assert refs[0]() is None
