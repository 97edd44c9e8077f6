"""Matrix products (``src/ops/matmul.rs``): matmul in every rank combination, mv, dot,
addmm/addmv/addbmm/baddbmm; kron and tensordot (``src/ops/shape/combine.rs``)."""

from __future__ import annotations

import numpy as np

from ._shared import A, _sum_to
from .spec import Arg, OpSpec

# (a, b) in every rank combination matmul takes: 1-d on either side, batch dims broadcast.
SHAPES = [
    ((3,), (3,)),
    ((2, 3), (3,)),
    ((3,), (3, 4)),
    ((2, 3), (3, 4)),
    ((2, 2, 3), (3, 4)),
    ((2, 3), (2, 3, 4)),
    ((2, 2, 3), (2, 3, 4)),
    ((2, 1, 2, 3), (3, 3, 4)),
    ((3,), (2, 3, 4)),
    ((2, 3, 4), (4,)),
]


def _matmul_grad(a: np.ndarray, b: np.ndarray) -> tuple:
    """d sum(a @ b) / d a and d b: the all-ones cotangent through ``a @ b``, 1-d operands
    promoted as matmul does, batch dims summed back."""
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    g = np.ones(np.matmul(a2, b2).shape)
    ga = _sum_to(g @ np.swapaxes(b2, -1, -2), a2.shape)
    gb = _sum_to(np.swapaxes(a2, -1, -2) @ g, b2.shape)
    return ga.reshape(a.shape), gb.reshape(b.shape)


OPS = [
    OpSpec(
        "matmul_shapes",
        lambda L, x, y: x @ y,
        [Arg(SHAPES[0][0]), Arg(SHAPES[0][1])],
        shape_sets=[[Arg(sa), Arg(sb)] for sa, sb in SHAPES[1:]],
        op="__matmul__ matmul",
        reference=np.matmul,
        derivative=_matmul_grad,
        forms=("function", "method"),
    ),
    OpSpec(
        "matmul_2d", lambda L, x, y: x @ y, [A, Arg((3, 4))], op="__matmul__", torch_grad_fn=True
    ),
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
    OpSpec(
        "addmm",
        lambda L, c, a, b: L.addmm(c, a, b, beta=0.5, alpha=2.0),
        [Arg((2, 4)), A, Arg((3, 4))],
        shape_sets=[[Arg((4,)), A, Arg((3, 4))], [Arg(()), A, Arg((3, 4))]],
        reference=lambda c, a, b: 0.5 * c + 2.0 * a @ b,
        derivative=lambda c, a, b: (
            _sum_to(np.full((2, 4), 0.5), c.shape),
            2.0 * np.ones((2, 4)) @ b.T,
            2.0 * a.T @ np.ones((2, 4)),
        ),
        torch_grad_fn=True,
    ),
    OpSpec("addmm_method", lambda L, c, a, b: c.addmm(a, b), [A, A, Arg((3, 3))], op="addmm"),
    OpSpec(
        "addmm_beta0",
        lambda L, c, a, b: L.addmm(c, a, b, beta=0.0),
        [Arg((2, 4)), A, Arg((3, 4))],
        op="addmm",
        reference=lambda c, a, b: a @ b,
    ),
    OpSpec(
        "addmv",
        lambda L, c, m, v: L.addmv(c, m, v, beta=2.0, alpha=-1.0),
        [Arg((2,)), A, Arg((3,))],
        shape_sets=[[Arg(()), A, Arg((3,))]],
        reference=lambda c, m, v: 2.0 * c - m @ v,
        torch_grad_fn=True,
    ),
    OpSpec(
        "baddbmm",
        lambda L, c, a, b: L.baddbmm(c, a, b, alpha=0.5),
        [Arg((2, 2, 4)), Arg((2, 2, 3)), Arg((2, 3, 4))],
        shape_sets=[[Arg((2, 4)), Arg((2, 2, 3)), Arg((2, 3, 4))]],
        reference=lambda c, a, b: c + 0.5 * a @ b,
        torch_grad_fn=True,
    ),
    OpSpec(
        "addbmm",
        lambda L, c, a, b: L.addbmm(c, a, b, beta=-1.0),
        [Arg((2, 4)), Arg((3, 2, 3)), Arg((3, 3, 4))],
        reference=lambda c, a, b: -c + (a @ b).sum(0),
        torch_grad_fn=True,
    ),
    OpSpec(
        "kron",
        lambda L, a, b: L.kron(a, b),
        [A, Arg((2, 2))],
        shape_sets=[[Arg((3,)), Arg((2, 2))], [Arg((2, 1, 2)), Arg((3, 2))]],
        reference=np.kron,
        forms=("method",),
    ),
    OpSpec(
        "tensordot_int",
        lambda L, a, b: L.tensordot(a, b, 1),
        [A, Arg((3, 4))],
        shape_sets=[[Arg((2, 3, 4)), Arg((4, 2))]],
        op="tensordot",
        reference=lambda a, b: np.tensordot(a, b, 1),
    ),
    OpSpec(
        "tensordot_lists",
        lambda L, a, b: L.tensordot(a, b, ([0, 2], [2, 0])),
        [Arg((2, 3, 4)), Arg((4, 5, 2))],
        op="tensordot",
        reference=lambda a, b: np.tensordot(a, b, ([0, 2], [2, 0])),
    ),
]
