"""Convolutions and unfold/fold (``src/ops/nn/conv.rs``)."""

from __future__ import annotations

from ._shared import F
from .spec import Arg, OpSpec

OPS = [
    # ----- unfold / fold, convolution, pooling -----
    OpSpec(
        "nn_unfold",
        lambda L, x: F(L).unfold(x, (2, 3), dilation=(1, 2), padding=1, stride=(2, 1)),
        [Arg((2, 3, 4, 5))],
    ),
    OpSpec(
        "nn_fold",
        lambda L, x: F(L).fold(x, (4, 5), 2, padding=1, stride=2),
        [Arg((2, 12, 9))],
    ),
    OpSpec(
        "nn_conv1d",
        lambda L, x, w, b: (
            F(L).conv1d(x, w, b),
            F(L).conv1d(x, w, None, stride=2, padding=2, dilation=2),
        ),
        [Arg((2, 3, 7)), Arg((4, 3, 3)), Arg((4,))],
        shape_sets=[[Arg((3, 5)), Arg((2, 3, 1)), Arg((2,))]],
    ),
    OpSpec(
        "nn_conv2d",
        lambda L, x, w, b: F(L).conv2d(x, w, b, stride=(2, 1), padding=(1, 2), dilation=(1, 2)),
        [Arg((2, 3, 5, 6)), Arg((4, 3, 3, 2)), Arg((4,))],
    ),
    OpSpec(
        "nn_conv2d_groups",
        lambda L, x, w: F(L).conv2d(x, w, groups=2, padding=1),
        [Arg((1, 4, 4, 4)), Arg((6, 2, 3, 3))],
    ),
    OpSpec(
        "nn_conv2d_same",
        lambda L, x, w: (F(L).conv2d(x, w, padding="same"), F(L).conv2d(x, w, padding="valid")),
        [Arg((1, 2, 5, 5)), Arg((3, 2, 2, 3))],
    ),
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
        # One channel in and out per group at stride 1: the direct depthwise kernels (forward,
        # input gradient through the flipped kernel, weight gradient), dilated and uneven.
        "nn_conv2d_depthwise_s1",
        lambda L, x, w, b: (
            F(L).conv2d(x, w, b, padding=1, groups=3),
            F(L).conv2d(x, w[:, :, :2, :], None, padding=(0, 2), dilation=(1, 2), groups=3),
        ),
        [Arg((2, 3, 5, 6)), Arg((3, 1, 3, 3)), Arg((3,))],
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
]
