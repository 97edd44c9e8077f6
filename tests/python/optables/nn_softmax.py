"""softmax, log_softmax, softmin and logsumexp (``src/ops/nn/softmax.rs``)."""

from __future__ import annotations

from ._shared import A3, INT, X4, A, F
from .spec import Arg, OpSpec

OPS = [
    OpSpec(
        "logsumexp",
        lambda L, x: L.logsumexp(x, -1),
        [A],
        shape_sets=[[A3], [Arg(())], [Arg((2, 0))]],
    ),
    OpSpec("logsumexp_tuple_keepdim", lambda L, x: x.logsumexp((0, 2), keepdim=True), [A3]),
    OpSpec("logsumexp_large", lambda L, x: L.logsumexp(x + 1000.0, dim=-1), [A]),
    OpSpec(
        "softmax",
        lambda L, x: L.softmax(x, -1),
        [A],
        shape_sets=[[A3], [Arg(())], [Arg((0, 3))], [Arg((2, 1))]],
    ),
    OpSpec("softmax_method", lambda L, x: x.softmax(dim=0), [A3]),
    OpSpec("softmax_large", lambda L, x: (x * 400.0).softmax(-1), [A]),
    OpSpec(
        "log_softmax",
        lambda L, x: L.log_softmax(x, -1),
        [A],
        shape_sets=[[A3], [Arg(())], [Arg((2, 1))]],
    ),
    OpSpec("log_softmax_method", lambda L, x: x.log_softmax(0), [A3]),
    OpSpec("log_softmax_large", lambda L, x: (x * 400.0).log_softmax(1), [A]),
    OpSpec("logsumexp_int_promotes", lambda L, a: L.logsumexp(a, 0), [INT]),
    OpSpec(
        "nn_softmax",
        lambda L, x: F(L).softmax(x, dim=1),
        [X4],
        shape_sets=[[Arg((3, 1))], [Arg((2, 0))], [Arg((2, 3), low=500.0, high=1000.0)]],
    ),
    OpSpec(
        "nn_log_softmax",
        lambda L, x: F(L).log_softmax(x, dim=-1),
        [X4],
        shape_sets=[[Arg((1,))], [Arg((2, 3), low=-1000.0, high=1000.0)]],
    ),
    OpSpec(
        "nn_softmin",
        lambda L, x: (F(L).softmin(x, dim=1), F(L).softmin(x, dim=0)),
        [Arg((2, 3, 4))],
    ),
    OpSpec(
        "nn_log_softmax_middle_dim",
        lambda L, x: F(L).log_softmax(x, dim=1) * F(L).softmax(x, dim=2),
        [Arg((2, 3, 4))],
    ),
]
