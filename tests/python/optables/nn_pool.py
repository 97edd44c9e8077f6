"""Pooling (``src/ops/nn/pool.rs``): max/avg/adaptive/lp pooling in 1-3 d, max_unpool, and
max pooling's double backward (a gather by the saved indices)."""

from __future__ import annotations

from ._shared import F
from .spec import Arg, OpSpec


def _unpool(L, x, y, nd):
    """max_unpool of `y` at the argmax positions of a 2x pooling of `x` (no gradient to x)."""
    pool = getattr(F(L), f"max_pool{nd}d")
    unpool = getattr(F(L), f"max_unpool{nd}d")
    _, idx = pool(x.detach(), 2, return_indices=True)
    return unpool(y, idx, 2)


OPS = [
    OpSpec(
        "nn_max_pool2d",
        lambda L, x: F(L).max_pool2d(x, 2),
        [Arg((2, 3, 4, 5))],
        gradgrad=False,
        note="piecewise linear (a gather): the second derivative is 0",
    ),
    OpSpec(
        "nn_max_pool2d_options",
        lambda L, x: F(L).max_pool2d(
            x,
            (3, 2),
            stride=(2, 1),
            padding=1,
            dilation=(1, 2),
            ceil_mode=True,
            return_indices=True,
        ),
        [Arg((2, 5, 6))],
        gradgrad=False,
        note="piecewise linear (a gather): the second derivative is 0",
    ),
    OpSpec(
        "nn_avg_pool2d",
        lambda L, x: (
            F(L).avg_pool2d(x, 3, stride=2, padding=1),
            F(L).avg_pool2d(x, 3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
            F(L).avg_pool2d(x, (2, 3), divisor_override=4),
        ),
        [Arg((1, 2, 5, 6))],
    ),
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
        "nn_max_pool2d_double_backward",
        lambda L, x: F(L).max_pool2d(x, 3, stride=2, padding=1, ceil_mode=True),
        [Arg((2, 3, 5, 6))],
    ),
    OpSpec(
        "nn_max_pool1d",
        lambda L, x: F(L).max_pool1d(x, 3, stride=2, padding=1, dilation=2, return_indices=True),
        [Arg((2, 3, 9))],
        shape_sets=[[Arg((3, 8))]],
    ),
    OpSpec(
        "nn_max_pool3d",
        lambda L, x: F(L).max_pool3d(x, 2, stride=(1, 2, 2), padding=1, return_indices=True),
        [Arg((2, 2, 3, 4, 5))],
        shape_sets=[[Arg((2, 3, 4, 4))]],
    ),
    OpSpec(
        "nn_avg_pool1d",
        lambda L, x: (
            F(L).avg_pool1d(x, 3, stride=2, padding=1),
            F(L).avg_pool1d(x, 3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
        ),
        [Arg((2, 3, 8))],
        shape_sets=[[Arg((3, 7))]],
    ),
    OpSpec(
        "nn_avg_pool3d",
        lambda L, x: (
            F(L).avg_pool3d(x, 2, stride=(1, 2, 1), padding=1),
            F(L).avg_pool3d(x, 3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
            F(L).avg_pool3d(x, (1, 2, 2), divisor_override=3),
        ),
        [Arg((1, 2, 4, 5, 4))],
    ),
    OpSpec(
        "nn_adaptive_avg_pool",
        lambda L, x: (
            F(L).adaptive_avg_pool2d(x, (3, 4)),
            F(L).adaptive_avg_pool2d(x, (None, 2)),
            F(L).adaptive_avg_pool1d(x[0], 4),
        ),
        [Arg((2, 3, 7, 9))],
        op="adaptive_avg_pool1d adaptive_avg_pool2d",
    ),
    OpSpec(
        "nn_adaptive_max_pool",
        lambda L, x: (
            F(L).adaptive_max_pool2d(x, (3, 4), return_indices=True)[0],
            F(L).adaptive_max_pool1d(x[0], 5),
        ),
        [Arg((2, 3, 7, 9))],
        op="adaptive_max_pool1d adaptive_max_pool2d",
    ),
]
