"""``pad`` in every mode (``src/ops/nn/padding.rs``)."""

from __future__ import annotations

from ._shared import X4, F
from .spec import Arg, OpSpec

OPS = [
    # ----- padding -----
    OpSpec(
        "nn_pad_constant",
        lambda L, x: (F(L).pad(x, (1, 2)), F(L).pad(x, (0, 1, 2, 0), value=1.5)),
        [X4],
        shape_sets=[[Arg((2, 0))]],
    ),
    OpSpec("nn_pad_crop", lambda L, x: F(L).pad(x, (-1, 1, 0, -1)), [X4]),
    OpSpec(
        "nn_pad_reflect",
        lambda L, x: F(L).pad(x, (2, 1, 1, 1), mode="reflect"),
        [Arg((1, 2, 3, 4))],
    ),
    OpSpec(
        "nn_pad_replicate",
        lambda L, x: F(L).pad(x, (3, 1, 0, 2), mode="replicate"),
        [Arg((1, 2, 3, 4))],
    ),
    OpSpec(
        "nn_pad_circular",
        lambda L, x: F(L).pad(x, (2, 1), mode="circular"),
        [X4],
    ),
]
