"""Losses (``src/ops/nn/loss.rs``, ``margin_loss.rs``)."""

from __future__ import annotations

from ._shared import _KINK, A35, BIG, A, F
from .spec import Arg, OpSpec

LOGITS = Arg((4, 5))
T4 = Arg((4,), kind="int", int_high=5)
PROB = Arg((2, 3), low=0.05, high=0.95)
UNIT01 = Arg((2, 3), low=0.0, high=1.0)
# torch refuses gradients for class weights and pos_weight
CLASS_W = Arg((5,), low=0.2, high=2.0, requires_grad=False)
POS_W = Arg((3,), low=0.5, high=3.0, requires_grad=False)
OPS = [
    # ----- losses -----
    OpSpec(
        "nn_mse_loss",
        lambda L, x, y: (
            F(L).mse_loss(x, y),
            F(L).mse_loss(x, y, reduction="sum"),
            F(L).mse_loss(x, y, reduction="none"),
        ),
        [A, A],
        shape_sets=[[Arg(()), Arg(())]],
    ),
    OpSpec(
        "nn_l1_loss",
        lambda L, x, y: (F(L).l1_loss(x, y), F(L).l1_loss(x, y, reduction="none")),
        [A, A],
        gradgrad=False,
        note=_KINK,
    ),
    OpSpec(
        "nn_smooth_l1_loss",
        lambda L, x, y: (
            F(L).smooth_l1_loss(x, y, beta=0.7),
            F(L).smooth_l1_loss(x, y, reduction="none", beta=0.0),
        ),
        [A, A],
    ),
    OpSpec(
        "nn_huber_loss",
        lambda L, x, y: (
            F(L).huber_loss(x, y, delta=0.8),
            F(L).huber_loss(x, y, reduction="sum", delta=2.5),
        ),
        [A, A],
    ),
    OpSpec(
        "nn_cross_entropy",
        lambda L, x, t: (
            F(L).cross_entropy(x, t),
            F(L).cross_entropy(x, t, reduction="none"),
            F(L).cross_entropy(x, t, reduction="sum"),
        ),
        [LOGITS, T4],
        shape_sets=[[Arg((4, 5), low=-1000.0, high=1000.0), T4]],
    ),
    OpSpec(
        "nn_cross_entropy_weight_ignore_smoothing",
        lambda L, x, t, w: (
            F(L).cross_entropy(x, t, weight=w, ignore_index=1),
            F(L).cross_entropy(x, t, weight=w, ignore_index=1, label_smoothing=0.2),
            F(L).cross_entropy(x, t, label_smoothing=0.3, reduction="none", ignore_index=2),
            F(L).cross_entropy(x, t, weight=w, label_smoothing=0.1, reduction="sum"),
        ),
        [Arg((6, 5)), Arg((6,), kind="int", int_high=5), CLASS_W],
    ),
    OpSpec(
        "nn_cross_entropy_kdim",
        lambda L, x, t: F(L).cross_entropy(x, t, label_smoothing=0.1),
        [Arg((2, 3, 4)), Arg((2, 4), kind="int", int_high=3)],
        shape_sets=[[Arg((3,)), Arg((), kind="int", int_high=3)]],
    ),
    OpSpec(
        "nn_cross_entropy_probs",
        lambda L, x, p, w: (
            F(L).cross_entropy(x, p),
            F(L).cross_entropy(x, p, weight=w, label_smoothing=0.2, reduction="none"),
        ),
        [LOGITS, Arg((4, 5), low=0.0, high=1.0), CLASS_W],
    ),
    OpSpec(
        "nn_nll_loss",
        lambda L, x, t, w: (
            F(L).nll_loss(x, t),
            F(L).nll_loss(x, t, weight=w, ignore_index=0),
            F(L).nll_loss(x, t, reduction="none"),
        ),
        [LOGITS, T4, CLASS_W],
    ),
    OpSpec(
        "nn_binary_cross_entropy",
        lambda L, x, t, w: (
            F(L).binary_cross_entropy(x, t),
            F(L).binary_cross_entropy(x, t, weight=w, reduction="none"),
        ),
        [PROB, UNIT01, Arg((3,), low=0.5, high=1.5, requires_grad=False)],
    ),
    OpSpec(
        "nn_bce_with_logits",
        lambda L, x, t, pw: (
            F(L).binary_cross_entropy_with_logits(x, t),
            F(L).binary_cross_entropy_with_logits(x, t, pos_weight=pw, reduction="sum"),
        ),
        [A, UNIT01, POS_W],
        shape_sets=[[BIG, UNIT01, POS_W]],
        op="binary_cross_entropy_with_logits",
    ),
    OpSpec(
        "nn_kl_div",
        lambda L, x, t: (
            F(L).kl_div(x, t, reduction="batchmean"),
            F(L).kl_div(x, t, reduction="none", log_target=True),
            F(L).kl_div(x, t, reduction="sum"),
        ),
        [A, Arg((2, 3), low=0.05, high=1.0)],
    ),
    OpSpec(
        "nn_nll_loss_kdim",
        lambda L, x, t: (
            F(L).nll_loss(x, t, ignore_index=1),
            F(L).nll_loss(x, t, reduction="none"),
        ),
        [Arg((2, 3, 4)), Arg((2, 4), kind="int", int_high=3)],
    ),
    OpSpec(
        "nn_cross_entropy_4d",
        lambda L, x, t, w: (
            F(L).cross_entropy(x, t, weight=w, label_smoothing=0.25),
            F(L).cross_entropy(x, t, reduction="none", ignore_index=0),
        ),
        [
            Arg((2, 3, 2, 2)),
            Arg((2, 2, 2), kind="int", int_high=3),
            Arg((3,), low=0.2, high=2.0, requires_grad=False),
        ],
    ),
    # ----- margin and embedding losses -----
    OpSpec(
        "nn_cosine_embedding_loss",
        lambda L, a, b: (
            F(L).cosine_embedding_loss(a, b, L.tensor([1.0, -1.0, 1.0]), margin=-0.5),
            F(L).cosine_embedding_loss(a, b, L.tensor([-1.0, -1.0, 1.0]), reduction="none"),
        ),
        [A35, A35],
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
        [A35, A35, A35],
    ),
    OpSpec(
        "nn_hinge_embedding_loss",
        lambda L, x: F(L).hinge_embedding_loss(
            x, L.tensor([[1.0, -1.0, 1.0, -1.0, -1.0]], dtype=x.dtype), margin=0.5
        ),
        [A35],
        gradgrad=False,
        note=_KINK,
    ),
    OpSpec(
        "nn_soft_margin_loss",
        lambda L, x: F(L).soft_margin_loss(
            x, L.tensor([[1.0, -1.0, 1.0, -1.0, -1.0]], dtype=x.dtype).expand(3, 5)
        ),
        [A35],
    ),
    OpSpec(
        "nn_multilabel_soft_margin_loss",
        lambda L, x, y, w: F(L).multilabel_soft_margin_loss(x, y, weight=w),
        [A35, Arg((3, 5), low=0.0, high=1.0, requires_grad=False), Arg((5,), low=0.1, high=1.0)],
    ),
    OpSpec(
        "nn_poisson_nll_loss",
        lambda L, x, y: (
            F(L).poisson_nll_loss(x, y),
            F(L).poisson_nll_loss(x.abs() + 0.5, y, log_input=False, full=True),
        ),
        [A35, Arg((3, 5), low=0.0, high=4.0, requires_grad=False)],
    ),
    OpSpec(
        "nn_gaussian_nll_loss",
        lambda L, x, y, v: (
            F(L).gaussian_nll_loss(x, y, v),
            F(L).gaussian_nll_loss(x, y, v[:, :1], full=True, reduction="sum"),
        ),
        [A35, A35, Arg((3, 5), low=0.2, high=2.0)],
    ),
]
