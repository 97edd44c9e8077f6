"""The ops of the working core (issue 2)."""

from __future__ import annotations

from .spec import Arg, OpSpec

A = Arg((2, 3))
POS = Arg((2, 3), low=0.2, high=2.0)

OPS = [
    OpSpec("neg", lambda L, x: -x, [A]),
    OpSpec("exp", lambda L, x: L.exp(x), [A]),
    OpSpec("log", lambda L, x: L.log(x), [POS]),
    OpSpec("sin", lambda L, x: L.sin(x), [A]),
    OpSpec("cos", lambda L, x: L.cos(x), [A]),
    OpSpec("tanh", lambda L, x: L.tanh(x), [A]),
    OpSpec("sigmoid", lambda L, x: L.sigmoid(x), [A]),
    OpSpec(
        "relu",
        lambda L, x: L.relu(x),
        [A],
        gradgrad=False,
        note="relu'' is 0 a.e.; FD across the kink is unstable",
    ),
    OpSpec("sqrt", lambda L, x: L.sqrt(x), [POS]),
    OpSpec("abs", lambda L, x: L.abs(x), [A], gradgrad=False, note="|x|'' is 0 a.e."),
    OpSpec(
        "add",
        lambda L, x, y: x + y,
        [A, Arg((3,))],
        shape_sets=[
            [Arg((2, 1, 3)), Arg((4, 1))],
            [Arg(()), Arg((2, 3))],
            [Arg((0, 3)), Arg((3,))],
        ],
    ),
    OpSpec("sub", lambda L, x, y: x - y, [A, Arg((3,))], shape_sets=[[Arg((1,)), Arg((2, 3))]]),
    OpSpec(
        "mul",
        lambda L, x, y: x * y,
        [A, Arg((3,))],
        shape_sets=[[Arg((2, 1, 3)), Arg((4, 1))], [Arg(()), Arg(())]],
    ),
    OpSpec("div", lambda L, x, y: x / y, [A, Arg((3,), low=0.5, high=2.0)]),
    OpSpec("pow", lambda L, x, y: x**y, [POS, Arg((3,))]),
    OpSpec("pow_scalar", lambda L, x: x**3, [A]),
    OpSpec("rpow_scalar", lambda L, x: 2.0**x, [A]),
    OpSpec("scalar_ops", lambda L, x: (2.0 - x) * 3.0 / 1.5 + 1.0, [A]),
    OpSpec("sum", lambda L, x: x.sum(), [A], shape_sets=[[Arg((0, 3))], [Arg(())]]),
    OpSpec("sum_dim", lambda L, x: x.sum(dim=(0, -1), keepdim=True), [Arg((2, 3, 4))]),
    OpSpec("mean", lambda L, x: x.mean(), [A]),
    OpSpec("mean_dim", lambda L, x: x.mean(dim=1), [Arg((2, 3, 4))]),
    OpSpec("matmul_2d", lambda L, x, y: x @ y, [A, Arg((3, 4))]),
    OpSpec("matmul_batched", lambda L, x, y: x @ y, [Arg((2, 1, 2, 3)), Arg((3, 3, 2))]),
    OpSpec(
        "matmul_vec",
        lambda L, x, y: x @ y,
        [A, Arg((3,))],
        shape_sets=[[Arg((3,)), Arg((3,))], [Arg((3,)), Arg((3, 2))]],
    ),
    OpSpec("reshape", lambda L, x: x.reshape(3, -1) * 2.0, [A]),
    OpSpec("transpose", lambda L, x: x.transpose(0, 1) * 2.0, [A]),
    OpSpec("permute", lambda L, x: x.permute(2, 0, 1) * 2.0, [Arg((2, 3, 4))]),
    OpSpec("unsqueeze_squeeze", lambda L, x: x.unsqueeze(1).squeeze() * 2.0, [A]),
    OpSpec("expand", lambda L, x: x.expand(4, 2, 3) * 2.0, [A]),
    OpSpec("getitem_basic", lambda L, x: x[1:, ::2, None, 0] * 2.0, [Arg((3, 4, 2))]),
    OpSpec("t", lambda L, x: x.t() * 2.0, [A]),
    OpSpec(
        "where",
        lambda L, c, x, y: L.where(c, x, y),
        [Arg((2, 3), kind="bool"), A, Arg((3,))],
        shape_sets=[[Arg((3,), kind="bool"), Arg((2, 1)), Arg(())]],
    ),
    OpSpec("sign", lambda L, x: L.sign(x) * x, [A], gradgrad=False, note="sign'' is 0 a.e."),
    OpSpec("matmul_fn", lambda L, x, y: L.matmul(x, y), [Arg((2, 2, 3)), Arg((3, 2))]),
    OpSpec("mv", lambda L, m, v: L.mv(m, v), [A, Arg((3,))]),
    OpSpec("dot", lambda L, x, y: L.dot(x, y), [Arg((4,)), Arg((4,))]),
    OpSpec("flatten", lambda L, x: L.flatten(x, 1) * 2.0, [Arg((2, 3, 4))]),
    OpSpec("mT", lambda L, x: x.mT * 2.0, [Arg((2, 3, 4))]),
    OpSpec("narrow", lambda L, x: L.narrow(x, 1, 1, 2) * 2.0, [Arg((2, 4))]),
]
