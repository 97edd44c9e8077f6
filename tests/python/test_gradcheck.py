"""``autograd.gradcheck`` / ``gradgradcheck``: pass and fail on functions whose derivatives are
known to be right or wrong, torch's errors and warnings, and agreement with torch's verdicts."""

from __future__ import annotations

import warnings

import ferrograd as fg
import ferrograd.nn.functional as F
import numpy as np
import pytest
from ferrograd.autograd import gradcheck, gradgradcheck
from ferrograd.autograd.function import Function, once_differentiable

try:
    import torch
except ImportError:  # pragma: no cover - depends on the machine
    torch = None


def leaf(*shape, seed=0, dtype=fg.float64):
    rng = np.random.default_rng(seed)
    return fg.tensor(rng.uniform(-1, 1, size=shape), dtype=dtype).requires_grad_(True)


class WrongSquare(Function):
    """x**2 with backward 3x instead of 2x."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x * 3.0


class WrongSecondInput(Function):
    """x * y with the gradient of y off by one."""

    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return x * y

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        return g * y, g * x + 1.0


class Noisy(Function):
    """Correct gradient plus tiny random noise: not reentrant."""

    @staticmethod
    def forward(ctx, x):
        return x * 2.0

    @staticmethod
    def backward(ctx, g):
        return g * 2.0 + fg.tensor(np.random.default_rng().uniform(0, 1e-9, size=tuple(g.shape)))


class DetachedCube(Function):
    """x**3 with a first derivative that is right but not differentiable (computed detached)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (x.detach() * x.detach() * 3.0)


def test_correct_functions_pass():
    x, y = leaf(2, 3), leaf(3, seed=1)
    assert gradcheck(lambda a, b: (a.sin() * b).exp(), (x, y))
    assert gradcheck(lambda a: (a @ a.t(), a.sum(1)), x)
    assert gradcheck(lambda a, k: a**k, (x, 3))  # non-tensor inputs pass through
    assert gradgradcheck(lambda a, b: (a.sin() * b).exp(), (x, y))
    assert gradgradcheck(lambda a: F.log_softmax(a, 1), x)


def test_error_class_location_and_type():
    assert issubclass(fg.autograd.gradcheck.GradcheckError, RuntimeError)
    from ferrograd.autograd.gradcheck import GradcheckError

    assert GradcheckError is fg.autograd.gradcheck.GradcheckError


def test_jacobian_mismatch_message_names_output_input_and_worst_element():
    x = leaf(3)
    with pytest.raises(fg.autograd.gradcheck.GradcheckError) as info:
        gradcheck(WrongSquare.apply, (x,))
    msg = str(info.value)
    assert msg.startswith("Jacobian mismatch for output 0 with respect to input 0,\nnumerical:")
    assert "\nanalytical:" in msg
    xs = x.detach().numpy()
    worst = int(np.argmax(np.abs(xs)))  # |3x - 2x| is largest where |x| is
    assert f"worst mismatch is at input 0 element {worst} (flat)" in msg
    assert f"output 0 element {worst}" in msg


def test_mismatch_names_the_right_input():
    x, y = leaf(2), leaf(2, seed=1)
    with pytest.raises(RuntimeError, match="with respect to input 1,"):
        gradcheck(WrongSecondInput.apply, (x, y))


def test_raise_exception_false_returns_false():
    assert gradcheck(WrongSquare.apply, (leaf(3),), raise_exception=False) is False
    assert gradcheck(lambda a: a * 2.0, (leaf(3),), raise_exception=False) is True


def test_no_input_requires_grad_is_a_value_error():
    x = fg.tensor([1.0, 2.0], dtype=fg.float64)
    with pytest.raises(
        ValueError,
        match="gradcheck expects at least one input tensor to require gradient, but none of "
        "them have requires_grad=True.",
    ):
        gradcheck(lambda a: a * 2.0, (x,))


def test_float32_input_warns():
    x = leaf(3, dtype=fg.float32)
    with pytest.warns(UserWarning, match=r"Input #0 requires gradient and is not a double"):
        gradcheck(lambda a: a * 2.0, (x,), raise_exception=False)


def test_non_reentrant_backward():
    x = leaf(3)
    with pytest.raises(RuntimeError, match=r"Backward is not reentrant, i.e., running") as e:
        gradcheck(Noisy.apply, (x,))
    assert "The tolerance for nondeterminism was 0.0." in str(e.value)
    assert "nondet_tol=<tol>" in str(e.value)
    # (its noise also survives a zero gradient, which the undefined-grad check would flag)
    assert gradcheck(Noisy.apply, (x,), nondet_tol=1e-6, check_undefined_grad=False)


def test_output_that_ignores_autograd_must_have_zero_numerical_gradient():
    x = leaf(3)
    with pytest.raises(RuntimeError, match="Numerical gradient for function expected to be zero"):
        gradcheck(lambda a: a.detach() * 2.0, (x,))
    assert gradcheck(lambda a: (a * 2.0, fg.ones(2)), (x,))


def test_torch_only_keywords_are_accepted():
    x = leaf(3)
    assert gradcheck(
        lambda a: a.exp(),
        (x,),
        fast_mode=True,
        check_batched_grad=True,
        check_batched_forward_grad=True,
        check_forward_ad=True,
        check_grad_dtypes=True,
        masked=False,
        eps=1e-6,
        atol=1e-5,
        rtol=1e-3,
        nondet_tol=0.0,
        check_undefined_grad=True,
    )
    assert gradgradcheck(
        lambda a: a.exp(),
        (x,),
        gen_non_contig_grad_outputs=True,
        check_fwd_over_rev=True,
        check_batched_grad=True,
        fast_mode=True,
    )


def test_gradgradcheck_catches_a_non_differentiable_backward():
    x = leaf(3)
    assert gradcheck(DetachedCube.apply, (x,))
    with pytest.raises(RuntimeError, match="Jacobian mismatch for output 0 with respect to input"):
        gradgradcheck(DetachedCube.apply, (x,))


def test_gradgradcheck_with_given_grad_outputs():
    x = leaf(2, 2)
    go = leaf(2, 2, seed=5)
    assert gradgradcheck(lambda a: a * a * a, (x,), (go,))
    assert gradgradcheck(lambda a: a * a * a, (x,), go)


def test_once_differentiable_reports_a_mismatch_in_gradgradcheck():
    class Cube(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x * x

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x * x * 3.0

    x = leaf(3)
    assert gradcheck(Cube.apply, (x,))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError, match="Jacobian mismatch|once_differentiable"):
            gradgradcheck(Cube.apply, (x,))


def test_undefined_grad_reaches_a_backward_that_cannot_handle_it():
    class NoMaterialize(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 2.0

        @staticmethod
        def backward(ctx, g):
            return g * 2.0  # crashes on None

    x = leaf(3)
    with pytest.raises(TypeError):
        gradcheck(NoMaterialize.apply, (x,))
    assert gradcheck(NoMaterialize.apply, (x,), check_undefined_grad=False)


def test_tolerances_are_applied():
    # backward off by 1e-4 relative: fails at rtol=1e-6, passes at the default rtol=1e-3
    class Slightly(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2.0

        @staticmethod
        def backward(ctx, g):
            return g * 2.0002

    x = fg.tensor([1.0, 2.0], dtype=fg.float64, requires_grad=True)
    assert gradcheck(Slightly.apply, (x,))
    assert not gradcheck(Slightly.apply, (x,), rtol=1e-6, atol=1e-8, raise_exception=False)


@pytest.mark.skipif(torch is None, reason="torch is not installed")
def test_verdicts_and_numerical_jacobian_match_torch():
    rng = np.random.default_rng(3)
    arr = rng.uniform(-1, 1, size=(3,))

    class TWrong(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x * 3.0

    tx = torch.tensor(arr, requires_grad=True)
    fx = fg.tensor(arr, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a: a.sin() * a, (tx,)) == gradcheck(
        lambda a: a.sin() * a, (fx,)
    )
    from torch.autograd.gradcheck import GradcheckError as TorchGradcheckError

    with pytest.raises(TorchGradcheckError) as te:
        torch.autograd.gradcheck(TWrong.apply, (tx,))
    with pytest.raises(fg.autograd.gradcheck.GradcheckError) as fe:
        gradcheck(WrongSquare.apply, (fx,))
    t_first = str(te.value).split("\n")[0]
    f_first = str(fe.value).split("\n")[0]
    assert t_first == f_first
    with pytest.raises(ValueError) as te2:
        torch.autograd.gradcheck(lambda a: a * 2, (torch.tensor(arr),))
    with pytest.raises(ValueError) as fe2:
        gradcheck(lambda a: a * 2.0, (fg.tensor(arr),))
    assert str(te2.value) == str(fe2.value)
