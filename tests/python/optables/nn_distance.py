"""Distances, normalisation, prelu and embedding_bag (``src/ops/nn/distance.rs``, ``prelu.rs``,
``sparse.rs``): gradcheck and gradgradcheck in float64 (the second derivative goes through each
node's differentiable backward), float32 against float64, non-contiguous inputs, torch parity."""

from __future__ import annotations

import ferrograd.nn.functional  # noqa: F401  (makes ``ferrograd.nn`` an attribute)

from .spec import Arg, OpSpec


def F(L):  # noqa: N802 - torch's conventional name
    return L.nn.functional


A = Arg((3, 5))
# Away from 0, where |x|^(p-1) of a fractional p has an infinite derivative.
POS = Arg((3, 5), low=0.3, high=2.0)
_KINK = "piecewise linear: the second derivative is 0 almost everywhere"


def _bags(L):
    return L.tensor([0, 2, 2, 5])


OPS = [
    OpSpec(
        "nn_cosine_similarity",
        lambda L, a, b: (F(L).cosine_similarity(a, b), F(L).cosine_similarity(a, b, dim=0)),
        [A, A],
        shape_sets=[[Arg((2, 1, 4)), Arg((3, 4))]],
    ),
    OpSpec(
        "nn_cosine_similarity_last_dim_eps",
        lambda L, a, b: F(L).cosine_similarity(a, b, dim=-1, eps=0.5),
        [Arg((2, 3, 4), low=-0.3, high=0.3), Arg((4,))],
        grad=False,
        gradgrad=False,
        note="below eps the gradient is deliberately torch's, not the derivative (the norm's "
        "clamp passes it through): test_nn_distance.py checks it against torch",
    ),
    OpSpec(
        "nn_pairwise_distance",
        lambda L, a, b: (
            F(L).pairwise_distance(a, b),
            F(L).pairwise_distance(a, b, p=3.0, keepdim=True),
            F(L).pairwise_distance(a, b, p=1.0),
        ),
        [A, A],
        shape_sets=[[Arg((3, 4)), Arg((4,))], [Arg((4,)), Arg((4,))]],
    ),
    OpSpec(
        "nn_pairwise_distance_fractional_p",
        lambda L, a, b: (
            F(L).pairwise_distance(a, b, p=0.5),
            F(L).pairwise_distance(a, b, p=1.5),
            F(L).pairwise_distance(a, b, p=-1.0),
        ),
        [POS, Arg((3, 5), low=-2.0, high=-0.3)],
    ),
    OpSpec(
        "nn_pairwise_distance_inf_zero",
        lambda L, a, b: (
            F(L).pairwise_distance(a, b, p=float("inf")),
            F(L).pairwise_distance(a, b, p=float("-inf")),
            F(L).pairwise_distance(a, b, p=0.0),
        ),
        [A, A],
        gradgrad=False,
        note=_KINK,
    ),
    OpSpec(
        "nn_normalize_p",
        lambda L, x: (
            F(L).normalize(x, p=3.0, dim=-1),
            F(L).normalize(x, p=0.5, dim=1),
            F(L).normalize(x, dim=0, eps=5.0),
        ),
        [Arg((2, 3, 4), low=0.2, high=2.0)],
    ),
    OpSpec(
        "nn_normalize_inf",
        lambda L, x: F(L).normalize(x, p=float("inf")),
        [Arg((2, 3, 4))],
        gradgrad=False,
        note=_KINK,
    ),
    OpSpec(
        "nn_normalize_zero_row",
        lambda L, x: F(L).normalize(x * L.tensor([[0.0], [1.0]], dtype=x.dtype)),
        [Arg((2, 3))],
    ),
    OpSpec(
        "nn_prelu",
        lambda L, x, w: F(L).prelu(x, w),
        [Arg((2, 3, 4)), Arg((3,), low=0.1, high=0.5)],
        shape_sets=[[Arg((2, 3, 4)), Arg((1,))], [Arg((5,)), Arg((1,))], [Arg(()), Arg(())]],
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
    # ----- cdist -----
    OpSpec(
        "cdist",
        lambda L, a, b: (
            L.cdist(a, b, compute_mode="donot_use_mm_for_euclid_dist"),
            L.cdist(a, b, p=1.0),
            L.cdist(a, b, p=3.0),
            L.cdist(a, b, compute_mode="use_mm_for_euclid_dist"),
        ),
        [Arg((2, 3, 4)), Arg((5, 4))],
    ),
    OpSpec(
        "cdist_inf",
        lambda L, a, b: L.cdist(a, b, p=float("inf")),
        [Arg((3, 4)), Arg((2, 4))],
        gradgrad=False,
        note=_KINK,
    ),
    # ----- margin and embedding losses -----
    OpSpec(
        "nn_cosine_embedding_loss",
        lambda L, a, b: (
            F(L).cosine_embedding_loss(a, b, L.tensor([1.0, -1.0, 1.0]), margin=-0.5),
            F(L).cosine_embedding_loss(a, b, L.tensor([-1.0, -1.0, 1.0]), reduction="none"),
        ),
        [A, A],
    ),
    OpSpec(
        "nn_margin_ranking_loss",
        lambda L, a, b, y: F(L).margin_ranking_loss(a, b, y, margin=0.1, reduction="sum"),
        [Arg((6,)), Arg((6,)), Arg((6,), requires_grad=False)],
        gradgrad=False,
        note=_KINK,
    ),
    OpSpec(
        "nn_triplet_margin_loss",
        lambda L, a, p, n: (
            F(L).triplet_margin_loss(a, p, n, margin=3.0),
            F(L).triplet_margin_loss(a, p, n, margin=3.0, p=3.0, swap=True, reduction="none"),
        ),
        [A, A, A],
    ),
    OpSpec(
        "nn_hinge_embedding_loss",
        lambda L, x: F(L).hinge_embedding_loss(
            x, L.tensor([[1.0, -1.0, 1.0, -1.0, -1.0]], dtype=x.dtype), margin=0.5
        ),
        [A],
        gradgrad=False,
        note=_KINK,
    ),
    OpSpec(
        "nn_soft_margin_loss",
        lambda L, x: F(L).soft_margin_loss(
            x, L.tensor([[1.0, -1.0, 1.0, -1.0, -1.0]], dtype=x.dtype).expand(3, 5)
        ),
        [A],
    ),
    OpSpec(
        "nn_multilabel_soft_margin_loss",
        lambda L, x, y, w: F(L).multilabel_soft_margin_loss(x, y, weight=w),
        [A, Arg((3, 5), low=0.0, high=1.0, requires_grad=False), Arg((5,), low=0.1, high=1.0)],
    ),
    OpSpec(
        "nn_poisson_nll_loss",
        lambda L, x, y: (
            F(L).poisson_nll_loss(x, y),
            F(L).poisson_nll_loss(x.abs() + 0.5, y, log_input=False, full=True),
        ),
        [A, Arg((3, 5), low=0.0, high=4.0, requires_grad=False)],
    ),
    OpSpec(
        "nn_gaussian_nll_loss",
        lambda L, x, y, v: (
            F(L).gaussian_nll_loss(x, y, v),
            F(L).gaussian_nll_loss(x, y, v[:, :1], full=True, reduction="sum"),
        ),
        [A, A, Arg((3, 5), low=0.2, high=2.0)],
    ),
]
