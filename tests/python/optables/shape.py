"""Views and re-arrangements (``src/ops/shape.rs`` family): reshape, transpose,
permute, squeeze/unsqueeze, expand, flatten, narrow, movedim, cat/stack, split/chunk/unbind,
flip, roll, tile."""

from __future__ import annotations

from ._shared import C3, A, _long
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
