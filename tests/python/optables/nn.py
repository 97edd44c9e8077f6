"""``ferrograd.nn.functional`` entries that run with today's ops (activations, losses,
normalisation, embedding, padding, convolution, pooling)."""

from __future__ import annotations

import ferrograd.nn.functional  # noqa: F401  (makes ``ferrograd.nn`` an attribute)

from .spec import Arg, OpSpec


def F(L):  # noqa: N802 - torch's conventional name
    return L.nn.functional


A = Arg((2, 3))
X4 = Arg((2, 3, 4))
LOGITS = Arg((4, 5))
T4 = Arg((4,), kind="int", int_high=5)
PROB = Arg((2, 3), low=0.05, high=0.95)
UNIT = Arg((2, 3), low=0.0, high=1.0)
BIG = Arg((2, 3), low=-60.0, high=60.0)
# torch refuses gradients for class weights and pos_weight
CLASS_W = Arg((5,), low=0.2, high=2.0, requires_grad=False)
POS_W = Arg((3,), low=0.5, high=3.0, requires_grad=False)

_KINK = "piecewise linear: the second derivative is 0 almost everywhere"

OPS = [
    # ----- activations -----
    OpSpec(
        "nn_linear",
        lambda L, x, w, b: F(L).linear(x, w, b),
        [Arg((2, 3)), Arg((4, 3)), Arg((4,))],
        shape_sets=[
            [Arg((5, 2, 3)), Arg((4, 3)), Arg((4,))],
            [Arg((2, 3, 2, 3)), Arg((4, 3)), Arg((4,))],
            [Arg((3,)), Arg((4, 3)), Arg(())],
            [Arg((3, 3)), Arg((4, 3), requires_grad=False), Arg((4,))],
            [Arg((2, 3), requires_grad=False), Arg((4, 3)), Arg((4,), requires_grad=False)],
        ],
    ),
    OpSpec(
        "matmul_fold",
        lambda L, x, w: x.matmul(w),
        [Arg((2, 3, 4)), Arg((4, 5))],
        shape_sets=[
            [Arg((2, 2, 3, 4)), Arg((4,))],
            [Arg((2, 3, 4), requires_grad=False), Arg((4, 2))],
        ],
    ),
    OpSpec("nn_linear_nobias", lambda L, x, w: F(L).linear(x, w), [Arg((0, 3)), Arg((2, 3))]),
    OpSpec("nn_relu", lambda L, x: F(L).relu(x), [A], gradgrad=False, note=_KINK),
    OpSpec("nn_gelu_tanh", lambda L, x: F(L).gelu(x, approximate="tanh"), [A]),
    OpSpec("nn_silu", lambda L, x: F(L).silu(x), [A], shape_sets=[[Arg(())]]),
    OpSpec("nn_softplus", lambda L, x: F(L).softplus(x), [A], shape_sets=[[BIG]]),
    OpSpec(
        "nn_softplus_beta_threshold",
        lambda L, x: F(L).softplus(x, beta=2.0, threshold=1.0),
        [A],
    ),
    OpSpec("nn_elu", lambda L, x: F(L).elu(x, alpha=1.5), [A], shape_sets=[[BIG]]),
    OpSpec("nn_leaky_relu", lambda L, x: F(L).leaky_relu(x, 0.2), [A], gradgrad=False, note=_KINK),
    OpSpec(
        "nn_hardtanh",
        lambda L, x: F(L).hardtanh(x, -0.5, 1.0),
        [A],
        gradgrad=False,
        note=_KINK,
    ),
    OpSpec("nn_tanh", lambda L, x: F(L).tanh(x), [A]),
    OpSpec("nn_sigmoid", lambda L, x: F(L).sigmoid(x), [A]),
    OpSpec(
        "nn_softmax",
        lambda L, x: F(L).softmax(x, dim=1),
        [X4],
        shape_sets=[[Arg((3, 1))], [Arg((2, 0))], [Arg((2, 3), low=500.0, high=1000.0)]],
    ),
    OpSpec(
        "nn_log_softmax",
        lambda L, x: F(L).log_softmax(x, dim=-1),
        [X4],
        shape_sets=[[Arg((1,))], [Arg((2, 3), low=-1000.0, high=1000.0)]],
    ),
    OpSpec(
        "nn_dropout_eval_and_p0",
        lambda L, x: F(L).dropout(x, 0.5, training=False) + F(L).dropout(x, 0.0),
        [A],
    ),
    OpSpec(
        "nn_dropout_seeded",
        lambda L, x: (L.manual_seed(3), F(L).dropout(x, 0.4))[1],
        [Arg((4, 5))],
        torch_parity=False,
        note="ferrograd's generator differs from torch's: same seed, different mask",
    ),
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
        [PROB, UNIT, Arg((3,), low=0.5, high=1.5, requires_grad=False)],
    ),
    OpSpec(
        "nn_bce_with_logits",
        lambda L, x, t, pw: (
            F(L).binary_cross_entropy_with_logits(x, t),
            F(L).binary_cross_entropy_with_logits(x, t, pos_weight=pw, reduction="sum"),
        ),
        [A, UNIT, POS_W],
        shape_sets=[[BIG, UNIT, POS_W]],
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
    # ----- normalisation, embedding, one_hot -----
    OpSpec(
        "nn_layer_norm",
        lambda L, x, w, b: F(L).layer_norm(x, (3, 4), w, b),
        [X4, Arg((3, 4)), Arg((3, 4))],
    ),
    OpSpec("nn_layer_norm_plain", lambda L, x: F(L).layer_norm(x, [4], eps=1e-3), [X4]),
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
        "nn_normalize",
        lambda L, x: (F(L).normalize(x), F(L).normalize(x, p=1.0, dim=0)),
        [X4],
    ),
    # ----- padding -----
    OpSpec(
        "nn_pad_constant",
        lambda L, x: (F(L).pad(x, (1, 2)), F(L).pad(x, (0, 1, 2, 0), value=1.5)),
        [X4],
        shape_sets=[[Arg((2, 0))]],
    ),
    OpSpec("nn_pad_crop", lambda L, x: F(L).pad(x, (-1, 1, 0, -1)), [X4]),
    OpSpec(
        "nn_pad_reflect",
        lambda L, x: F(L).pad(x, (2, 1, 1, 1), mode="reflect"),
        [Arg((1, 2, 3, 4))],
    ),
    OpSpec(
        "nn_pad_replicate",
        lambda L, x: F(L).pad(x, (3, 1, 0, 2), mode="replicate"),
        [Arg((1, 2, 3, 4))],
    ),
    OpSpec(
        "nn_pad_circular",
        lambda L, x: F(L).pad(x, (2, 1), mode="circular"),
        [X4],
    ),
    # ----- unfold / fold, convolution, pooling -----
    OpSpec(
        "nn_unfold",
        lambda L, x: F(L).unfold(x, (2, 3), dilation=(1, 2), padding=1, stride=(2, 1)),
        [Arg((2, 3, 4, 5))],
    ),
    OpSpec(
        "nn_fold",
        lambda L, x: F(L).fold(x, (4, 5), 2, padding=1, stride=2),
        [Arg((2, 12, 9))],
    ),
    OpSpec(
        "nn_conv1d",
        lambda L, x, w, b: (
            F(L).conv1d(x, w, b),
            F(L).conv1d(x, w, None, stride=2, padding=2, dilation=2),
        ),
        [Arg((2, 3, 7)), Arg((4, 3, 3)), Arg((4,))],
        shape_sets=[[Arg((3, 5)), Arg((2, 3, 1)), Arg((2,))]],
    ),
    OpSpec(
        "nn_conv2d",
        lambda L, x, w, b: F(L).conv2d(x, w, b, stride=(2, 1), padding=(1, 2), dilation=(1, 2)),
        [Arg((2, 3, 5, 6)), Arg((4, 3, 3, 2)), Arg((4,))],
    ),
    OpSpec(
        "nn_conv2d_groups",
        lambda L, x, w: F(L).conv2d(x, w, groups=2, padding=1),
        [Arg((1, 4, 4, 4)), Arg((6, 2, 3, 3))],
    ),
    OpSpec(
        "nn_conv2d_same",
        lambda L, x, w: (F(L).conv2d(x, w, padding="same"), F(L).conv2d(x, w, padding="valid")),
        [Arg((1, 2, 5, 5)), Arg((3, 2, 2, 3))],
    ),
    OpSpec(
        "nn_max_pool2d",
        lambda L, x: F(L).max_pool2d(x, 2),
        [Arg((2, 3, 4, 5))],
        gradgrad=False,
        note="piecewise linear (a gather): the second derivative is 0",
    ),
    OpSpec(
        "nn_max_pool2d_options",
        lambda L, x: F(L).max_pool2d(
            x,
            (3, 2),
            stride=(2, 1),
            padding=1,
            dilation=(1, 2),
            ceil_mode=True,
            return_indices=True,
        ),
        [Arg((2, 5, 6))],
        gradgrad=False,
        note="piecewise linear (a gather): the second derivative is 0",
    ),
    OpSpec(
        "nn_avg_pool2d",
        lambda L, x: (
            F(L).avg_pool2d(x, 3, stride=2, padding=1),
            F(L).avg_pool2d(x, 3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
            F(L).avg_pool2d(x, (2, 3), divisor_override=4),
        ),
        [Arg((1, 2, 5, 6))],
    ),
]
