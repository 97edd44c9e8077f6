"""Convolution and pooling entries beyond those in ``nn.py``: conv3d, transposed convolutions,
depthwise and 1x1 convolutions, 1-d and 3-d pooling, adaptive pooling, and max pooling's
double backward (a gather by the saved indices)."""

from __future__ import annotations

import ferrograd.nn.functional  # noqa: F401  (makes ``ferrograd.nn`` an attribute)

from .spec import Arg, OpSpec


def F(L):  # noqa: N802 - torch's conventional name
    return L.nn.functional


OPS = [
    OpSpec(
        "nn_conv3d",
        lambda L, x, w, b: F(L).conv3d(x, w, b, stride=(1, 2, 1), padding=1, dilation=(2, 1, 1)),
        [Arg((2, 2, 4, 5, 3)), Arg((3, 2, 2, 3, 2)), Arg((3,))],
    ),
    OpSpec(
        "nn_conv2d_depthwise",
        lambda L, x, w, b: F(L).conv2d(x, w, b, stride=2, padding=1, groups=3),
        [Arg((2, 3, 5, 6)), Arg((6, 1, 3, 3)), Arg((6,))],
    ),
    OpSpec(
        "nn_conv2d_pointwise",
        lambda L, x, w: F(L).conv2d(x, w),
        [Arg((2, 3, 3, 4)), Arg((4, 3, 1, 1))],
    ),
    OpSpec(
        "nn_conv1d_same_unbatched",
        lambda L, x, w: F(L).conv1d(x, w, padding="same", dilation=3),
        [Arg((2, 7)), Arg((3, 2, 2))],
    ),
    OpSpec(
        "nn_conv_transpose1d",
        lambda L, x, w, b: F(L).conv_transpose1d(
            x, w, b, stride=3, padding=1, output_padding=2, dilation=1
        ),
        [Arg((2, 3, 4)), Arg((3, 2, 3)), Arg((2,))],
        shape_sets=[[Arg((3, 4)), Arg((3, 2, 2)), Arg((2,))]],
    ),
    OpSpec(
        "nn_conv_transpose2d",
        lambda L, x, w, b: F(L).conv_transpose2d(
            x, w, b, stride=(2, 1), padding=(1, 0), output_padding=(1, 0), groups=2, dilation=2
        ),
        [Arg((2, 4, 3, 4)), Arg((4, 1, 2, 3)), Arg((2,))],
    ),
    OpSpec(
        "nn_conv_transpose3d",
        lambda L, x, w: F(L).conv_transpose3d(x, w, stride=2, padding=(0, 1, 0)),
        [Arg((1, 2, 2, 3, 2)), Arg((2, 2, 2, 3, 2))],
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
    ),
    OpSpec(
        "nn_adaptive_max_pool",
        lambda L, x: (
            F(L).adaptive_max_pool2d(x, (3, 4), return_indices=True)[0],
            F(L).adaptive_max_pool1d(x[0], 5),
        ),
        [Arg((2, 3, 7, 9))],
    ),
]
