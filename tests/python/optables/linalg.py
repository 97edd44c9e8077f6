"""Linear-algebra ops (``src/ops/linalg.rs``): mm, bmm, outer, trace, diag,
diagonal, tril/triu, einsum."""

from __future__ import annotations

from ._shared import C3, A
from .spec import Arg, OpSpec

B = Arg((3, 4))
OPS = [
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
