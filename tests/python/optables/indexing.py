"""Indexing (``src/ops/indexing.rs``): ``__getitem__``/``__setitem__`` with basic and
advanced indices, index_select, gather/scatter, masked_fill/masked_select, take_along_dim,
nonzero; index_copy/index_fill/take/masked_scatter/scatter_reduce/repeat_interleave and the
in-place forms."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._shared import C3, A, _long, _rearranged
from .spec import Arg, OpSpec


def _bool_tensor(L: Any, v: Any) -> Any:
    return L.tensor(np.array(v, dtype=bool))


# A fixed mask with both values (random masks could be all-False).
M23 = [[True, False, True], [False, True, True]]


def _setitem(t: Any, index: Any, value: Any) -> Any:
    t[index] = value
    return t


OPS = [
    # ----- basic indexing against NumPy -----------------------------------------------------------
    _rearranged(
        "getitem_int",
        (3, 4),
        lambda L, x: x[1],
        lambda a: a[1],
        op="__getitem__",
        torch_grad_fn=True,
    ),
    _rearranged("getitem_neg_int", (3, 4), lambda L, x: x[-1], lambda a: a[-1], op="__getitem__"),
    _rearranged(
        "getitem_slice",
        (5, 2),
        lambda L, x: x[1:4],
        lambda a: a[1:4],
        op="__getitem__",
        torch_grad_fn=True,
    ),
    _rearranged(
        "getitem_step",
        (6,),
        lambda L, x: x[::2],
        lambda a: a[::2],
        op="__getitem__",
        torch_grad_fn=True,
    ),
    _rearranged(
        "getitem_tuple", (3, 4), lambda L, x: x[1, 1:], lambda a: a[1, 1:], op="__getitem__"
    ),
    _rearranged("getitem_col", (3, 4), lambda L, x: x[:, 2], lambda a: a[:, 2], op="__getitem__"),
    _rearranged(
        "getitem_2slices",
        (4, 5),
        lambda L, x: x[1:, ::2],
        lambda a: a[1:, ::2],
        op="__getitem__",
    ),
    _rearranged(
        "getitem_scalar", (3, 4), lambda L, x: x[2, 3], lambda a: a[2, 3], op="__getitem__"
    ),
    OpSpec(
        "getitem_basic", lambda L, x: x[1:, ::2, None, 0] * 2.0, [Arg((3, 4, 2))], op="__getitem__"
    ),
    # ----- indexing -----
    OpSpec("getitem_int_slice", lambda L, x: x[1, ::2, -1], [C3]),
    OpSpec("getitem_ellipsis_none", lambda L, x: x[..., None, 1:3], [C3]),
    OpSpec("getitem_list", lambda L, x: x[[0, 2, 2]], [Arg((3, 4))]),
    OpSpec("getitem_neg_list", lambda L, x: x[:, [-1, 0]], [Arg((3, 4))]),
    OpSpec("getitem_long_tensor", lambda L, x: x[_long(L, [[0, 1], [1, 1]])], [Arg((2, 3))]),
    OpSpec(
        "getitem_two_adjacent",
        lambda L, x: x[:, _long(L, [0, 2]), _long(L, [1, 3])],
        [C3],
    ),
    OpSpec(
        "getitem_two_separated",
        lambda L, x: x[_long(L, [0, 1]), :, _long(L, [1, 3])],
        [C3],
    ),
    OpSpec("getitem_int_and_list", lambda L, x: x[0, :, [0, 1]], [C3]),
    OpSpec("getitem_broadcast_idx", lambda L, x: x[_long(L, [[0], [1]]), [0, 2, 1]], [A]),
    OpSpec("getitem_bool_mask", lambda L, x: x[_bool_tensor(L, M23)], [A]),
    OpSpec("getitem_bool_row", lambda L, x: x[_bool_tensor(L, [True, False]), 1:], [A]),
    OpSpec("getitem_bool_python", lambda L, x: x[[True, False, True]], [Arg((3, 2))]),
    OpSpec("getitem_none_adv", lambda L, x: x[None, [0, 1], None], [C3]),
    OpSpec("getitem_ellipsis_adv", lambda L, x: x[..., [0, 3]], [C3]),
    OpSpec(
        "getitem_empty_list",
        lambda L, x: x[[]],
        [A],
        torch_parity=False,
        note="torch reads [] as a float index tensor and raises; ferrograd returns empty",
    ),
    OpSpec(
        "setitem_scalar_adv",
        lambda L, x: _setitem(x * 1.0, (_long(L, [0, 1]), _long(L, [2, 0])), 5.0),
        [A],
    ),
    OpSpec(
        "setitem_tensor_adv",
        lambda L, x, v: _setitem(x * 1.0, (slice(None), [0, 2]), v),
        [A, Arg((2, 1))],
    ),
    OpSpec(
        "setitem_mask", lambda L, x, v: _setitem(x * 1.0, _bool_tensor(L, M23), v), [A, Arg(())]
    ),
    OpSpec("setitem_basic", lambda L, x, v: _setitem(x * 1.0, (1, slice(0, 2)), v), [A, Arg((2,))]),
    OpSpec(
        "index_select",
        lambda L, x: x.index_select(1, _long(L, [2, 0, 2])),
        [A],
        shape_sets=[[Arg((1, 4))], [Arg((0, 3))]],
    ),
    OpSpec("index_select_fn", lambda L, x: L.index_select(x, 0, _long(L, [1])), [A]),
    OpSpec("gather", lambda L, x: x.gather(1, _long(L, [[0, 0], [2, 1]])), [A]),
    OpSpec("gather_dim0", lambda L, x: L.gather(x, 0, _long(L, [[1, 0, 1]])), [A]),
    OpSpec(
        "scatter_src",
        lambda L, x, s: x.scatter(1, _long(L, [[0, 2], [1, 0]]), s),
        [A, Arg((2, 2))],
    ),
    OpSpec("scatter_value", lambda L, x: x.scatter(0, _long(L, [[1, 0, 1]]), 2.5), [A]),
    OpSpec(
        "scatter_add",
        lambda L, x, s: x.scatter_add(0, _long(L, [[1, 1, 0], [1, 0, 0]]), s),
        [A, Arg((2, 3))],
    ),
    OpSpec("masked_fill", lambda L, x: x.masked_fill(_bool_tensor(L, M23), -1.0), [A]),
    OpSpec(
        "masked_fill_broadcast",
        lambda L, x: L.masked_fill(x, _bool_tensor(L, [True, False, True]), 0.5),
        [A],
    ),
    OpSpec("masked_fill_", lambda L, x: (x * 1.0).masked_fill_(_bool_tensor(L, M23), 3.0), [A]),
    OpSpec("masked_select", lambda L, x: x.masked_select(_bool_tensor(L, M23)), [A]),
    OpSpec(
        "masked_select_broadcast",
        lambda L, x: L.masked_select(x, _bool_tensor(L, [False, True, True])),
        [A],
    ),
    OpSpec(
        "take_along_dim",
        lambda L, x: x.take_along_dim(_long(L, [[0], [2]]), dim=1),
        [A],
    ),
    OpSpec("take_along_dim_flat", lambda L, x: L.take_along_dim(x, _long(L, [5, 0, 3])), [A]),
    OpSpec(
        "take_along_dim_bcast",
        lambda L, x: L.take_along_dim(x, _long(L, [[[1], [0]]]), 2),
        [Arg((3, 2, 4))],
    ),
    OpSpec("nonzero", lambda L, x: x.nonzero(), [Arg((3, 4), kind="int")]),
    OpSpec("nonzero_tuple", lambda L, x: x.nonzero(as_tuple=True), [Arg((3, 4), kind="bool")]),
    # ----- slices, flat positions and reductions ---------------------------------------------
    OpSpec(
        "index_copy",
        lambda L, x, s: x.index_copy(-1, _long(L, [2, 0]), s),
        [A, Arg((2, 2))],
        shape_sets=[[Arg((3,)), Arg((2,))]],
        forms=(),
        torch_grad_fn=True,
    ),
    OpSpec(
        "index_copy_fn",
        lambda L, x, s: L.index_copy(x, 0, _long(L, [1]), s),
        [A, Arg((1, 3))],
        op="index_copy",
    ),
    OpSpec(
        "index_copy_",
        lambda L, x, s: x.clone().index_copy_(0, _long(L, [1, 0]), s),
        [A, Arg((2, 3))],
        torch_grad_fn=True,
    ),
    OpSpec(
        "index_fill",
        lambda L, x: L.index_fill(x, 1, _long(L, [0, 2]), -1.5),
        [A],
        forms=(),
        torch_grad_fn=True,
    ),
    OpSpec(
        "index_fill_",
        lambda L, x: x.clone().index_fill_(0, _long(L, [1]), 2.0),
        [A],
        torch_grad_fn=True,
    ),
    OpSpec(
        "index_add_",
        lambda L, x, s: x.clone().index_add_(1, _long(L, [2, 2]), s, alpha=-2.0),
        [A, Arg((2, 2))],
    ),
    OpSpec(
        "take",
        lambda L, x: L.take(x, _long(L, [[5, 0], [-1, 3]])),
        [A],
        reference=lambda a: a.ravel()[[[5, 0], [-1, 3]]],
        exact=True,
        torch_grad_fn=True,
    ),
    OpSpec(
        "masked_scatter",
        lambda L, x, s: L.masked_scatter(x, _bool_tensor(L, [True, False, True]), s),
        [A, Arg((5,))],
        torch_grad_fn=True,
    ),
    OpSpec(
        "masked_scatter_",
        lambda L, x, s: x.clone().masked_scatter_(_bool_tensor(L, M23), s),
        [A, Arg((2, 3))],
        torch_grad_fn=True,
    ),
    OpSpec(
        "scatter_",
        lambda L, x, s: x.clone().scatter_(1, _long(L, [[0, 2], [1, 0]]), s),
        [A, Arg((2, 2))],
    ),
    OpSpec(
        "scatter_value_",
        lambda L, x: x.clone().scatter_(0, _long(L, [[1, 0, 1]]), 2.5),
        [A],
        op="scatter_",
    ),
    OpSpec(
        "scatter_add_",
        lambda L, x, s: x.clone().scatter_add_(0, _long(L, [[1, 1, 0], [1, 0, 0]]), s),
        [A, Arg((2, 3))],
    ),
    *[
        OpSpec(
            f"scatter_reduce_{how}_{'self' if inc else 'noself'}",
            lambda L, x, s, how=how, inc=inc: x.scatter_reduce(
                0, _long(L, [[1, 1, 0], [1, 0, 0], [0, 1, 1]]), s, how, include_self=inc
            ),
            [Arg((2, 3), low=0.5, high=2.0), Arg((3, 4), low=0.5, high=2.0)],
            op="scatter_reduce",
            torch_grad_fn=True,
            gradgrad=how not in ("amax", "amin"),
            note="amax/amin: piecewise linear, the second derivative is 0 a.e.",
        )
        for how in ("sum", "prod", "mean", "amax", "amin")
        for inc in (True, False)
    ],
    OpSpec(
        "scatter_reduce_fn",
        lambda L, x, s: L.scatter_reduce(x, 1, _long(L, [[2, 2], [0, 2]]), s, "sum"),
        [A, Arg((2, 2))],
        op="scatter_reduce",
    ),
    OpSpec(
        "scatter_reduce_",
        lambda L, x, s: x.clone().scatter_reduce_(1, _long(L, [[2, 2], [0, 2]]), s, "prod"),
        [Arg((2, 3), low=0.5, high=2.0), Arg((2, 2), low=0.5, high=2.0)],
        torch_grad_fn=True,
    ),
    OpSpec(
        "repeat_interleave_int",
        lambda L, x: L.repeat_interleave(x, 2, dim=-1),
        [A],
        shape_sets=[[Arg((3,))]],
        op="repeat_interleave",
        reference=lambda a: np.repeat(a, 2, axis=-1),
        exact=True,
        forms=(),
    ),
    OpSpec(
        "repeat_interleave_tensor",
        lambda L, x: x.repeat_interleave(_long(L, [1, 0, 3]), dim=-1),
        [A],
        op="repeat_interleave",
        reference=lambda a: np.repeat(a, [1, 0, 3], axis=-1),
        exact=True,
    ),
    OpSpec(
        "repeat_interleave_flat",
        lambda L, x: x.repeat_interleave(3),
        [A],
        op="repeat_interleave",
        reference=lambda a: np.repeat(a, 3),
        exact=True,
    ),
    OpSpec(
        "repeat_interleave_counts",
        lambda L, r: L.repeat_interleave(r),
        [Arg((4,), kind="int", int_high=3)],
        op="repeat_interleave",
        reference=lambda r: np.repeat(np.arange(r.size), r.astype(np.int64)),
        grad=False,
    ),
]
