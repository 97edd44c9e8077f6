"""Matrix products (``src/ops/matmul.rs``): matmul in every rank combination, mv, dot."""

from __future__ import annotations

from ._shared import A
from .spec import Arg, OpSpec

OPS = [
    OpSpec("matmul_2d", lambda L, x, y: x @ y, [A, Arg((3, 4))], op="__matmul__"),
    OpSpec(
        "matmul_batched",
        lambda L, x, y: x @ y,
        [Arg((2, 1, 2, 3)), Arg((3, 3, 2))],
        op="__matmul__",
    ),
    OpSpec(
        "matmul_vec",
        lambda L, x, y: x @ y,
        [A, Arg((3,))],
        shape_sets=[[Arg((3,)), Arg((3,))], [Arg((3,)), Arg((3, 2))]],
        op="__matmul__",
    ),
    OpSpec("matmul_fn", lambda L, x, y: L.matmul(x, y), [Arg((2, 2, 3)), Arg((3, 2))]),
    OpSpec("mv", lambda L, m, v: L.mv(m, v), [A, Arg((3,))]),
    OpSpec("dot", lambda L, x, y: L.dot(x, y), [Arg((4,)), Arg((4,))]),
    OpSpec(
        "matmul_fold",
        lambda L, x, w: x.matmul(w),
        [Arg((2, 3, 4)), Arg((4, 5))],
        shape_sets=[
            [Arg((2, 2, 3, 4)), Arg((4,))],
            [Arg((2, 3, 4), requires_grad=False), Arg((4, 2))],
        ],
    ),
]
