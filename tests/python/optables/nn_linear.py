"""``linear`` and ``bilinear`` (``src/ops/nn/linear.rs``)."""

from __future__ import annotations

from ._shared import F
from .spec import Arg, OpSpec

OPS = [
    # ----- activations -----
    OpSpec(
        "nn_linear",
        lambda L, x, w, b: F(L).linear(x, w, b),
        [Arg((2, 3)), Arg((4, 3)), Arg((4,))],
        shape_sets=[
            [Arg((5, 2, 3)), Arg((4, 3)), Arg((4,))],
            [Arg((2, 3, 2, 3)), Arg((4, 3)), Arg((4,))],
            [Arg((3,)), Arg((4, 3)), Arg(())],
            [Arg((3, 3)), Arg((4, 3), requires_grad=False), Arg((4,))],
            [Arg((2, 3), requires_grad=False), Arg((4, 3)), Arg((4,), requires_grad=False)],
        ],
    ),
    OpSpec("nn_linear_nobias", lambda L, x, w: F(L).linear(x, w), [Arg((0, 3)), Arg((2, 3))]),
    OpSpec(
        "nn_bilinear",
        lambda L, a, b, w, c: F(L).bilinear(a, b, w, c),
        [Arg((3, 4)), Arg((3, 2)), Arg((5, 4, 2)), Arg((5,))],
        shape_sets=[[Arg((2, 3, 4)), Arg((2, 3, 2)), Arg((5, 4, 2)), Arg((5,))]],
    ),
]
