"""Resampling (``src/ops/nn/sampling.rs``): interpolate in every mode,
pixel_shuffle, pixel_unshuffle, channel_shuffle."""

from __future__ import annotations

from ._shared import F
from .spec import Arg, OpSpec


def _interp(name: str, shape, **kw) -> OpSpec:
    return OpSpec(
        f"nn_sampling_interpolate_{name}",
        lambda L, x: F(L).interpolate(x, **kw),
        [Arg(shape)],
    )


OPS = [
    _interp("nearest_1d_size", (2, 3, 5), size=8),
    _interp("nearest_2d_scale", (1, 2, 3, 4), scale_factor=(1.7, 0.6)),
    _interp("nearest_3d", (1, 2, 2, 3, 3), scale_factor=2),
    _interp("nearest_exact_2d", (1, 2, 5, 4), size=(3, 7), mode="nearest-exact"),
    _interp("nearest_exact_3d", (1, 1, 3, 2, 4), size=(2, 3, 3), mode="nearest-exact"),
    _interp("linear_size", (2, 3, 5), size=9, mode="linear"),
    _interp("linear_scale_align", (2, 3, 5), scale_factor=1.5, mode="linear", align_corners=True),
    _interp("bilinear_size", (1, 2, 3, 4), size=(5, 6), mode="bilinear"),
    _interp("bilinear_down", (1, 2, 5, 6), size=(3, 2), mode="bilinear"),
    _interp(
        "bilinear_scale_align",
        (1, 2, 3, 4),
        scale_factor=(1.3, 2.0),
        mode="bilinear",
        align_corners=True,
    ),
    _interp(
        "bilinear_recompute",
        (1, 2, 3, 4),
        scale_factor=1.7,
        mode="bilinear",
        recompute_scale_factor=True,
    ),
    _interp("bicubic_size", (1, 2, 3, 4), size=(5, 7), mode="bicubic"),
    _interp("bicubic_align_down", (1, 1, 5, 4), size=(3, 3), mode="bicubic", align_corners=True),
    _interp("trilinear_size", (1, 1, 2, 3, 4), size=(3, 4, 2), mode="trilinear"),
    _interp(
        "trilinear_scale_align",
        (1, 1, 2, 3, 2),
        scale_factor=1.5,
        mode="trilinear",
        align_corners=True,
    ),
    _interp("bilinear_antialias_down", (1, 2, 7, 6), size=(3, 4), mode="bilinear", antialias=True),
    _interp(
        "bicubic_antialias_mixed",
        (1, 2, 7, 5),
        size=(3, 8),
        mode="bicubic",
        align_corners=True,
        antialias=True,
    ),
    _interp("area_1d", (2, 2, 7), size=3, mode="area"),
    _interp("area_2d", (1, 2, 5, 6), size=(2, 4), mode="area"),
    _interp("area_3d", (1, 2, 3, 5, 4), size=(2, 3, 3), mode="area"),
    OpSpec(
        "nn_sampling_pixel_shuffle",
        lambda L, x: F(L).pixel_shuffle(x, 2),
        [Arg((2, 8, 2, 3))],
        shape_sets=[[Arg((4, 3, 2))], [Arg((2, 1, 8, 2, 2))]],
    ),
    OpSpec(
        "nn_sampling_pixel_unshuffle",
        lambda L, x: F(L).pixel_unshuffle(x, 2),
        [Arg((2, 2, 4, 6))],
        shape_sets=[[Arg((1, 2, 4))]],
    ),
    OpSpec(
        "nn_sampling_channel_shuffle",
        lambda L, x: F(L).channel_shuffle(x, 3),
        [Arg((2, 6, 2, 2))],
        shape_sets=[[Arg((2, 6, 3))], [Arg((1, 3, 2, 1, 2))]],
    ),
]
