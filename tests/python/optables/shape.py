"""Shape, indexing and linear-algebra ops (area ``shape``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .spec import Arg, OpSpec

A = Arg((2, 3))
B = Arg((3, 4))
C3 = Arg((2, 3, 4))


def _c(v: Any) -> Arg:
    return Arg(kind="const", value=v)


def _long(L: Any, v: Any) -> Any:
    return L.tensor(np.array(v, dtype=np.int64))


def _mask(L: Any, v: Any) -> Any:
    return L.tensor(np.array(v, dtype=bool))


# A fixed mask with both values (random masks could be all-False).
M23 = [[True, False, True], [False, True, True]]

OPS = [
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
    OpSpec("getitem_bool_mask", lambda L, x: x[_mask(L, M23)], [A]),
    OpSpec("getitem_bool_row", lambda L, x: x[_mask(L, [True, False]), 1:], [A]),
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
    OpSpec("setitem_mask", lambda L, x, v: _setitem(x * 1.0, _mask(L, M23), v), [A, Arg(())]),
    OpSpec("setitem_basic", lambda L, x, v: _setitem(x * 1.0, (1, slice(0, 2)), v), [A, Arg((2,))]),
    OpSpec(
        "index_put_accumulate",
        lambda L, x, v: (x * 1.0).index_put_((_long(L, [0, 0, 1]),), v, accumulate=True),
        [A, Arg((3, 3))],
    ),
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
    OpSpec(
        "index_add",
        lambda L, x, s: x.index_add(0, _long(L, [1, 0, 1]), s, alpha=2.0),
        [A, Arg((3, 3))],
    ),
    OpSpec("masked_fill", lambda L, x: x.masked_fill(_mask(L, M23), -1.0), [A]),
    OpSpec(
        "masked_fill_broadcast",
        lambda L, x: L.masked_fill(x, _mask(L, [True, False, True]), 0.5),
        [A],
    ),
    OpSpec("masked_fill_", lambda L, x: (x * 1.0).masked_fill_(_mask(L, M23), 3.0), [A]),
    OpSpec("masked_select", lambda L, x: x.masked_select(_mask(L, M23)), [A]),
    OpSpec(
        "masked_select_broadcast",
        lambda L, x: L.masked_select(x, _mask(L, [False, True, True])),
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
    # ----- linear algebra -----
    OpSpec("mm", lambda L, x, y: L.mm(x, y), [A, B], shape_sets=[[Arg((0, 3)), B]]),
    OpSpec("bmm", lambda L, x, y: L.bmm(x, y), [C3, Arg((2, 4, 2))]),
    OpSpec("outer", lambda L, x, y: L.outer(x, y), [Arg((3,)), Arg((4,))]),
    OpSpec("trace", lambda L, x: L.trace(x), [Arg((3, 3))], shape_sets=[[Arg((2, 4))]]),
    OpSpec("diag_vec", lambda L, x: L.diag(x), [Arg((3,))]),
    OpSpec("diag_vec_offset", lambda L, x: x.diag(-1), [Arg((3,))]),
    OpSpec("diag_mat", lambda L, x: L.diag(x, 1), [Arg((3, 4))]),
    OpSpec("diagonal", lambda L, x: x.diagonal(0, 1, 2) * 2.0, [Arg((2, 3, 3))]),
    OpSpec("diagonal_offset", lambda L, x: L.diagonal(x, -1) * 2.0, [Arg((3, 4))]),
    OpSpec("tril", lambda L, x: L.tril(x), [Arg((3, 4))], shape_sets=[[Arg((2, 3, 3))]]),
    OpSpec("tril_offset", lambda L, x: x.tril(-1), [Arg((3, 4))]),
    OpSpec("triu", lambda L, x: L.triu(x, 1), [Arg((3, 4))]),
    OpSpec("einsum_matmul", lambda L, x, y: L.einsum("ij,jk->ik", x, y), [A, B]),
    OpSpec("einsum_transpose", lambda L, x: L.einsum("ij->ji", x) * 2.0, [A]),
    OpSpec("einsum_trace", lambda L, x: L.einsum("ii", x), [Arg((3, 3))]),
    OpSpec("einsum_diag", lambda L, x: L.einsum("ii->i", x), [Arg((3, 3))]),
    OpSpec("einsum_sum", lambda L, x: L.einsum("ijk->j", x), [C3]),
    OpSpec("einsum_bmm", lambda L, x, y: L.einsum("bij,bjk->bik", x, y), [C3, Arg((2, 4, 2))]),
    OpSpec("einsum_outer", lambda L, x, y: L.einsum("i,j->ij", x, y), [Arg((3,)), Arg((2,))]),
    OpSpec(
        "einsum_bilinear",
        lambda L, x, w, y: L.einsum("bn,anm,bm->ba", x, w, y),
        [Arg((2, 3)), Arg((4, 3, 2)), Arg((2, 2))],
    ),
    OpSpec(
        "einsum_ellipsis",
        lambda L, x, y: L.einsum("...ij,...jk->...ik", x, y),
        [Arg((2, 2, 3)), Arg((3, 4))],
    ),
    OpSpec(
        "einsum_ellipsis_broadcast",
        lambda L, x, y: L.einsum("...ij,...jk->...ik", x, y),
        [Arg((2, 1, 2, 3)), Arg((3, 3, 4))],
    ),
    OpSpec("einsum_sum_alone", lambda L, x, y: L.einsum("ij,kj->k", x, y), [A, Arg((4, 3))]),
    OpSpec("einsum_full_reduce", lambda L, x, y: L.einsum("i,j->", x, y), [Arg((3,)), Arg((2,))]),
    OpSpec("einsum_implicit", lambda L, x, y: L.einsum("ij,jk", x, y), [A, B]),
    OpSpec("einsum_list", lambda L, x, y: L.einsum("i,i->", [x, y]), [Arg((3,)), Arg((3,))]),
]


def _setitem(t: Any, index: Any, value: Any) -> Any:
    t[index] = value
    return t
