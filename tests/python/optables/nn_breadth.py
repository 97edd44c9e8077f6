"""The rest of torch's ``nn.functional`` everyday surface: the shrink activations, rrelu in
eval, 3-d adaptive pooling, power-average pooling, max_unpool and bilinear: gradients and second
derivatives against finite differences, float32 against float64, torch parity."""

from __future__ import annotations

import ferrograd.nn.functional  # noqa: F401  (makes ``ferrograd.nn`` an attribute)

from .spec import Arg, OpSpec


def F(L):  # noqa: N802 - torch's conventional name
    return L.nn.functional


def _unpool(L, x, y, nd):
    """max_unpool of `y` at the argmax positions of a 2x pooling of `x` (no gradient to x)."""
    pool = getattr(F(L), f"max_pool{nd}d")
    unpool = getattr(F(L), f"max_unpool{nd}d")
    _, idx = pool(x.detach(), 2, return_indices=True)
    return unpool(y, idx, 2)


OPS = [
    OpSpec("nn_hardshrink", lambda L, x: F(L).hardshrink(x, 0.7), [Arg((3, 4))]),
    OpSpec(
        "nn_softshrink",
        lambda L, x: F(L).softshrink(x),
        [Arg((3, 4))],
        shape_sets=[[Arg(())], [Arg((0, 2))]],
    ),
    OpSpec("nn_rrelu_eval", lambda L, x: F(L).rrelu(x, 0.1, 0.3), [Arg((2, 5))]),
    OpSpec(
        "nn_adaptive_avg_pool3d",
        lambda L, x: F(L).adaptive_avg_pool3d(x, (2, 3, 2)),
        [Arg((2, 2, 3, 5, 4))],
        shape_sets=[[Arg((2, 3, 4, 3))]],
    ),
    OpSpec(
        "nn_adaptive_avg_pool3d_global",
        lambda L, x: F(L).adaptive_avg_pool3d(x, 1),
        [Arg((2, 2, 3, 2, 2))],
    ),
    OpSpec(
        "nn_adaptive_max_pool3d",
        lambda L, x: F(L).adaptive_max_pool3d(x, (2, 2, 1)),
        [Arg((2, 2, 3, 4, 3))],
    ),
    OpSpec(
        "nn_lp_pool2d_p2",
        lambda L, x: F(L).lp_pool2d(x, 2, 2),
        [Arg((2, 3, 4, 5))],
    ),
    OpSpec(
        "nn_lp_pool1d_p3_stride",
        lambda L, x: F(L).lp_pool1d(x, 3, 3, stride=2, ceil_mode=True),
        [Arg((2, 3, 8), low=0.2, high=2.0)],
    ),
    OpSpec(
        "nn_lp_pool3d_inf",
        lambda L, x: F(L).lp_pool3d(x, float("inf"), 2),
        [Arg((1, 2, 4, 4, 4))],
    ),
    OpSpec(
        "nn_max_unpool1d",
        lambda L, x, y: _unpool(L, x, y, 1),
        [Arg((2, 3, 8), requires_grad=False), Arg((2, 3, 4))],
    ),
    OpSpec(
        "nn_max_unpool2d",
        lambda L, x, y: _unpool(L, x, y, 2),
        [Arg((2, 3, 4, 6), requires_grad=False), Arg((2, 3, 2, 3))],
    ),
    OpSpec(
        "nn_max_unpool3d",
        lambda L, x, y: _unpool(L, x, y, 3),
        [Arg((1, 2, 4, 4, 2), requires_grad=False), Arg((1, 2, 2, 2, 1))],
    ),
    OpSpec(
        "nn_bilinear",
        lambda L, a, b, w, c: F(L).bilinear(a, b, w, c),
        [Arg((3, 4)), Arg((3, 2)), Arg((5, 4, 2)), Arg((5,))],
        shape_sets=[[Arg((2, 3, 4)), Arg((2, 3, 2)), Arg((5, 4, 2)), Arg((5,))]],
    ),
]
