"""Distances and normalisation (``src/ops/nn/distance.rs``): cosine_similarity,
pairwise_distance, normalize, cdist."""

from __future__ import annotations

from ._shared import _KINK, A35, X4, ZERO_ROW_NOTE, F
from .spec import Arg, OpSpec

# Away from 0, where |x|^(p-1) of a fractional p has an infinite derivative.
POS35 = Arg((3, 5), low=0.3, high=2.0)
OPS = [
    OpSpec(
        "nn_normalize",
        lambda L, x: (F(L).normalize(x), F(L).normalize(x, p=1.0, dim=0)),
        [X4],
    ),
    OpSpec(
        "nn_cosine_similarity",
        lambda L, a, b: (F(L).cosine_similarity(a, b), F(L).cosine_similarity(a, b, dim=0)),
        [A35, A35],
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
        [A35, A35],
        shape_sets=[[Arg((3, 4)), Arg((4,))], [Arg((4,)), Arg((4,))]],
    ),
    OpSpec(
        "nn_pairwise_distance_fractional_p",
        lambda L, a, b: (
            F(L).pairwise_distance(a, b, p=0.5),
            F(L).pairwise_distance(a, b, p=1.5),
            F(L).pairwise_distance(a, b, p=-1.0),
        ),
        [POS35, Arg((3, 5), low=-2.0, high=-0.3)],
    ),
    OpSpec(
        "nn_pairwise_distance_inf_zero",
        lambda L, a, b: (
            F(L).pairwise_distance(a, b, p=float("inf")),
            F(L).pairwise_distance(a, b, p=float("-inf")),
            F(L).pairwise_distance(a, b, p=0.0),
        ),
        [A35, A35],
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
        torch_gradgrad=False,
        note=ZERO_ROW_NOTE,
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
]
