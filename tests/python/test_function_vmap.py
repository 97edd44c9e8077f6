"""``autograd.Function`` under ``func.vmap``: a ``vmap`` staticmethod is used for the batched
call (torch's ``custom_function_call_vmap``), with torch's errors for bad returns; without one,
forward and backward run on the batched tensors (torch's ``generate_vmap_rule=True``). Checked
against a per-sample loop, closed forms, and ``torch.func.vmap`` when torch is installed."""

import importlib.util

import ferrograd as fg
import numpy as np
import pytest
from ferrograd.func import grad, vmap

HAS_TORCH = importlib.util.find_spec("torch") is not None


def _cube_function(lib, calls):
    class NumpyCube(lib.autograd.Function):
        """x**3 computed in NumPy: not batchable by itself, so it needs its vmap rule."""

        @staticmethod
        def forward(x):
            return lib.tensor(x.detach().numpy() ** 3)

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x * x * g

        @staticmethod
        def vmap(info, in_dims, x):
            calls.append((info.batch_size, info.randomness, in_dims))
            x = x.movedim(in_dims[0], 0)
            # The rule calls the Function on the whole batch (a real tensor, not batched).
            return NumpyCube.apply(x), 0

    return NumpyCube


def test_a_vmap_staticmethod_runs_once_on_the_whole_batch():
    calls = []
    cube = _cube_function(fg, calls)
    x = fg.randn(5, 3, dtype=fg.float64)
    y = vmap(cube.apply, in_dims=1, out_dims=1, randomness="same")(x.t())
    assert calls == [(5, "same", (0,))]
    assert np.allclose(y.numpy(), x.numpy().T ** 3)


def test_gradients_go_through_the_rule_in_both_orders():
    cube = _cube_function(fg, [])
    x = fg.randn(4, 3, dtype=fg.float64)
    per_sample = vmap(grad(lambda t: cube.apply(t).sum()))(x)
    assert np.allclose(per_sample.numpy(), 3 * x.numpy() ** 2)
    xr = x.clone().requires_grad_()
    vmap(lambda t: cube.apply(t))(xr).sum().backward()
    assert np.allclose(xr.grad.numpy(), 3 * x.numpy() ** 2)


def test_arguments_not_batched_at_the_level_skip_the_rule():
    calls = []
    cube = _cube_function(fg, calls)
    w = fg.randn(3, dtype=fg.float64)
    y = vmap(lambda t: cube.apply(w) + t)(fg.zeros(2, 3, dtype=fg.float64))
    assert calls == []
    assert np.allclose(y.numpy(), np.stack([w.numpy() ** 3] * 2))


def test_without_a_rule_forward_and_backward_run_batched():
    class Square(fg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = fg.randn(4, 3, dtype=fg.float64)
    assert np.allclose(vmap(grad(lambda t: Square.apply(t).sum()))(x).numpy(), 2 * x.numpy())


@pytest.mark.parametrize(
    "returned, message",
    [
        (lambda x: x, "Got a <class"),
        (lambda x: (x, 0, 0), "Got 3 returns instead"),
        (lambda x: (x, (0, 0)), "incompatible (output, out_dims) tuple"),
    ],
)
def test_bad_returns_of_the_rule_raise_torchs_errors(returned, message):
    class Bad(fg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            return g

        @staticmethod
        def vmap(info, in_dims, x):
            return returned(x)

    with pytest.raises(RuntimeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        vmap(Bad.apply)(fg.randn(2, 3))


def test_a_rule_and_generate_vmap_rule_together_raise():
    class Both(fg.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            return g

        @staticmethod
        def vmap(info, in_dims, x):
            return x, 0

    with pytest.raises(RuntimeError, match="both generate_vmap_rule=True and an overridden"):
        vmap(Both.apply)(fg.randn(2, 3))


@pytest.mark.skipif(not HAS_TORCH, reason="torch not installed")
def test_matches_torch_func_vmap():
    import torch

    x0 = np.random.default_rng(0).standard_normal((4, 3))
    ours = vmap(grad(lambda t: _cube_function(fg, []).apply(t).sum()))(fg.tensor(x0))
    theirs = torch.func.vmap(
        torch.func.grad(lambda t: _cube_function(torch, []).apply(t).sum())
    )(torch.tensor(x0))
    assert np.allclose(ours.numpy(), theirs.numpy())
