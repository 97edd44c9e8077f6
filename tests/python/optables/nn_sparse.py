"""Embeddings and one_hot (``src/ops/nn/sparse.rs``)."""

from __future__ import annotations

from ._shared import F
from .spec import Arg, OpSpec


def _bags(L):
    return L.tensor([0, 2, 2, 5])


OPS = [
    OpSpec(
        "nn_embedding",
        lambda L, i, w: F(L).embedding(i, w),
        [Arg((2, 3), kind="int", int_high=5), Arg((5, 4))],
        shape_sets=[[Arg((), kind="int", int_high=5), Arg((5, 4))]],
    ),
    OpSpec(
        "nn_embedding_padding_freq",
        lambda L, i, w: F(L).embedding(i, w, padding_idx=1, scale_grad_by_freq=True),
        [Arg((3, 4), kind="int", int_high=4), Arg((4, 2))],
        grad=False,
        note="the gradient is deliberately not the derivative (frozen padding row, scaled by "
        "frequency): test_nn_functional.py checks it against a closed form and torch",
    ),
    OpSpec(
        "nn_one_hot",
        lambda L, i: F(L).one_hot(i, 4),
        [Arg((2, 3), kind="int", int_high=4)],
        shape_sets=[[Arg((0,), kind="int")]],
    ),
    OpSpec(
        "nn_embedding_bag_2d",
        lambda L, i, w: (
            F(L).embedding_bag(i, w),
            F(L).embedding_bag(i, w, mode="sum", padding_idx=1),
            F(L).embedding_bag(i, w, mode="max"),
        ),
        [Arg((3, 4), kind="int", int_high=6), Arg((6, 5))],
    ),
    OpSpec(
        "nn_embedding_bag_offsets",
        lambda L, i, w: (
            F(L).embedding_bag(i, w, _bags(L)),
            F(L).embedding_bag(i, w, _bags(L), mode="max", padding_idx=0),
            # CSR offsets: the last one is len(input), as torch documents
            F(L).embedding_bag(i, w, L.tensor([0, 2, 2, 7]), mode="mean", include_last_offset=True),
        ),
        [Arg((7,), kind="int", int_high=6), Arg((6, 5))],
    ),
    OpSpec(
        "nn_embedding_bag_per_sample_weights",
        lambda L, i, w, p: F(L).embedding_bag(
            i, w, _bags(L), mode="sum", per_sample_weights=p, padding_idx=2
        ),
        [Arg((7,), kind="int", int_high=6), Arg((6, 5)), Arg((7,))],
    ),
]
