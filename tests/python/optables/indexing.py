"""Indexing (``src/ops/indexing.rs``): ``__getitem__``/``__setitem__`` with basic and
advanced indices, index_select, gather/scatter, masked_fill/masked_select, take_along_dim,
nonzero."""

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
]
