"""Views and re-arrangements (``src/ops/shape.rs`` family): reshape, transpose,
permute, squeeze/unsqueeze, expand, flatten, narrow, movedim, cat/stack, split/chunk/unbind,
flip, roll, tile."""

from __future__ import annotations

import numpy as np

from ._shared import C3, A, _long, _rearranged
from .spec import Arg, OpSpec

OPS = [
    OpSpec("reshape", lambda L, x: x.reshape(3, -1) * 2.0, [A]),
    OpSpec("transpose", lambda L, x: x.transpose(0, 1) * 2.0, [A]),
    OpSpec("permute", lambda L, x: x.permute(2, 0, 1) * 2.0, [Arg((2, 3, 4))]),
    OpSpec(
        "unsqueeze_squeeze",
        lambda L, x: x.unsqueeze(1).squeeze() * 2.0,
        [A],
        op="unsqueeze squeeze",
    ),
    OpSpec("expand", lambda L, x: x.expand(4, 2, 3) * 2.0, [A]),
    OpSpec("t", lambda L, x: x.t() * 2.0, [A]),
    OpSpec("flatten", lambda L, x: L.flatten(x, 1) * 2.0, [Arg((2, 3, 4))]),
    OpSpec("mT", lambda L, x: x.mT * 2.0, [Arg((2, 3, 4))]),
    OpSpec("narrow", lambda L, x: L.narrow(x, 1, 1, 2) * 2.0, [Arg((2, 4))]),
    # ----- against NumPy, each spelling ----------------------------------------------------------
    _rearranged("reshape_args", (2, 3), lambda L, x: x.reshape(3, 2), lambda a: a.reshape(3, 2)),
    _rearranged("reshape_tuple", (2, 3), lambda L, x: x.reshape((6,)), lambda a: a.reshape(6)),
    _rearranged(
        "reshape_infer", (2, 3, 4), lambda L, x: x.reshape(-1, 4), lambda a: a.reshape(-1, 4)
    ),
    _rearranged("reshape_fn", (2, 3), lambda L, x: L.reshape(x, (3, 2)), lambda a: a.reshape(3, 2)),
    _rearranged(
        "view",
        (2, 3),
        lambda L, x: x.view(6),
        lambda a: a.reshape(6),
        noncontiguous=False,
        note="view needs compatible strides",
    ),
    _rearranged(
        "view_infer",
        (4, 3),
        lambda L, x: x.view(2, -1),
        lambda a: a.reshape(2, -1),
        noncontiguous=False,
        note="view needs compatible strides",
    ),
    _rearranged(
        "transpose_outer",
        (2, 3, 4),
        lambda L, x: x.transpose(0, 2),
        lambda a: a.transpose(2, 1, 0),
        op="transpose",
    ),
    _rearranged(
        "transpose_neg",
        (2, 3, 4),
        lambda L, x: x.transpose(-1, -2),
        lambda a: a.swapaxes(-1, -2),
    ),
    _rearranged("transpose_fn", (2, 3), lambda L, x: L.transpose(x, 0, 1), lambda a: a.T),
    _rearranged("t_alone", (2, 3), lambda L, x: x.t(), lambda a: a.T, op="t"),
    _rearranged("unsqueeze_front", (2, 3), lambda L, x: x.unsqueeze(0), lambda a: a[None]),
    _rearranged("unsqueeze_neg", (2, 3), lambda L, x: x.unsqueeze(-1), lambda a: a[..., None]),
    _rearranged("squeeze_all", (2, 1, 3, 1), lambda L, x: x.squeeze(), lambda a: a.squeeze()),
    _rearranged("squeeze_dim", (2, 1, 3, 1), lambda L, x: x.squeeze(1), lambda a: a.squeeze(1)),
    _rearranged("squeeze_noop", (2, 3), lambda L, x: x.squeeze(0), lambda a: a),
    _rearranged(
        "expand_args",
        (3, 1),
        lambda L, x: x.expand(3, 4),
        lambda a: np.broadcast_to(a, (3, 4)),
    ),
    _rearranged(
        "expand_new_dim",
        (3,),
        lambda L, x: x.expand(2, 3),
        lambda a: np.broadcast_to(a, (2, 3)),
    ),
    _rearranged(
        "expand_minus1",
        (3, 1),
        lambda L, x: x.expand(-1, 2),
        lambda a: np.broadcast_to(a, (3, 2)),
    ),
    # ----- shape -----
    OpSpec(
        "view_as",
        lambda L, x, y: x.view_as(y) * 2.0,
        [A, Arg((3, 2))],
        noncontiguous=False,
        note="view() of a transposed input raises, as in torch",
    ),
    OpSpec(
        "unflatten",
        lambda L, x: x.unflatten(1, (2, -1)) * 2.0,
        [Arg((2, 4, 3))],
        shape_sets=[[Arg((3, 4))]],
    ),
    OpSpec(
        "movedim",
        lambda L, x: x.movedim(0, -1) * 2.0,
        [C3],
        shape_sets=[[Arg((2, 1, 0))]],
    ),
    OpSpec("movedim_multi", lambda L, x: L.movedim(x, (0, 1), (2, 0)) * 2.0, [C3]),
    OpSpec("expand_as", lambda L, x, y: x.expand_as(y) * y, [Arg((3, 1)), Arg((2, 3, 4))]),
    OpSpec(
        "broadcast_to",
        lambda L, x: L.broadcast_to(x, (2, 3, 4)) * 2.0,
        [Arg((3, 1))],
        shape_sets=[[Arg(())], [Arg((1, 4))]],
    ),
    OpSpec(
        "cat",
        lambda L, x, y: L.cat([x, y], dim=1),
        [A, Arg((2, 4))],
        shape_sets=[[Arg((2, 0)), Arg((2, 3))], [Arg((0, 2)), Arg((0, 1))]],
    ),
    OpSpec("cat_dim0_three", lambda L, x, y, z: L.cat((x, y, z)), [A, A, Arg((1, 3))]),
    OpSpec("cat_neg_dim", lambda L, x, y: L.cat([x, y], -1), [C3, Arg((2, 3, 1))]),
    OpSpec(
        "stack",
        lambda L, x, y: L.stack([x, y], dim=1),
        [A, A],
        shape_sets=[[Arg((0, 2)), Arg((0, 2))]],
    ),
    OpSpec("stack_0d", lambda L, x, y: L.stack([x, y]), [Arg(()), Arg(())]),
    OpSpec("stack_last", lambda L, x, y: L.stack([x, y], -1), [A, A]),
    OpSpec("split_int", lambda L, x: x.split(2, dim=1), [Arg((2, 5))]),
    OpSpec("split_sections", lambda L, x: L.split(x, [1, 3, 1], 1), [Arg((2, 5))]),
    OpSpec("split_partial_use", lambda L, x: x.split(2)[1] * 3.0, [Arg((5, 2))]),
    OpSpec("chunk", lambda L, x: x.chunk(3, dim=-1), [Arg((2, 7))], shape_sets=[[Arg((2, 2))]]),
    OpSpec("unbind", lambda L, x: x.unbind(1), [C3], shape_sets=[[Arg((2, 1, 3))]]),
    OpSpec("unbind_one_used", lambda L, x: x.unbind()[1] * 2.0, [A]),
    OpSpec(
        "flip",
        lambda L, x: x.flip(0, 2),
        [C3],
        shape_sets=[[Arg((3, 1, 2))], [Arg((0, 2, 1))]],
    ),
    OpSpec("flip_fn", lambda L, x: L.flip(x, (-1,)), [A]),
    OpSpec("flip_kw", lambda L, x: x.flip(dims=[0]), [A]),
    OpSpec("roll", lambda L, x: x.roll(1, 1), [A], shape_sets=[[Arg((4, 1))]]),
    OpSpec("roll_multi", lambda L, x: L.roll(x, (1, -2), (0, 2)), [C3]),
    OpSpec("roll_flat", lambda L, x: x.roll(2), [A]),
    OpSpec(
        "repeat",
        lambda L, x: x.repeat(2, 1, 3),
        [A],
        shape_sets=[[Arg(())], [Arg((0, 2))], [Arg((1, 3))]],
    ),
    OpSpec("tile", lambda L, x: x.tile((2,)), [A], shape_sets=[[Arg((3,))]]),
    OpSpec("tile_fn", lambda L, x: L.tile(x, (2, 1, 2)), [A]),
    OpSpec(
        "index_put_accumulate",
        lambda L, x, v: (x * 1.0).index_put_((_long(L, [0, 0, 1]),), v, accumulate=True),
        [A, Arg((3, 3))],
        op="index_put_",
    ),
    OpSpec(
        "index_add",
        lambda L, x, s: x.index_add(0, _long(L, [1, 0, 1]), s, alpha=2.0),
        [A, Arg((3, 3))],
    ),
]
