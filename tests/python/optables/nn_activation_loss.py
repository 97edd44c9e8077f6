"""Native activation, softmax and loss kernels not already in ``nn.py``: gradcheck and
gradgradcheck in float64 (the second derivative goes through each node's differentiable
backward), float32 against float64, torch parity."""

from __future__ import annotations

import ferrograd.nn.functional  # noqa: F401  (makes ``ferrograd.nn`` an attribute)

from .spec import Arg, OpSpec


def F(L):  # noqa: N802 - torch's conventional name
    return L.nn.functional


A = Arg((2, 3))
# avoids the kinks at ±3 of the hard* functions
WIDE = Arg((3, 4), low=-5.0, high=5.0)
BIG = Arg((2, 3), low=-60.0, high=60.0)
_KINK = "piecewise linear: the second derivative is 0 almost everywhere"

OPS = [
    OpSpec("nn_gelu_exact", lambda L, x: F(L).gelu(x), [A], shape_sets=[[BIG], [Arg(())]]),
    OpSpec("nn_mish", lambda L, x: F(L).mish(x), [A], shape_sets=[[BIG]]),
    OpSpec("nn_selu", lambda L, x: F(L).selu(x), [A], shape_sets=[[BIG]]),
    OpSpec("nn_celu", lambda L, x: F(L).celu(x, alpha=0.7), [A], shape_sets=[[BIG]]),
    OpSpec("nn_logsigmoid", lambda L, x: F(L).logsigmoid(x), [A], shape_sets=[[BIG]]),
    OpSpec("nn_hardswish", lambda L, x: F(L).hardswish(x), [WIDE]),
    OpSpec("nn_hardsigmoid", lambda L, x: F(L).hardsigmoid(x), [WIDE], gradgrad=False, note=_KINK),
    OpSpec("nn_relu6", lambda L, x: F(L).relu6(x * 4.0), [WIDE], gradgrad=False, note=_KINK),
    OpSpec("nn_glu", lambda L, x: (F(L).glu(x), F(L).glu(x, 0)), [Arg((4, 6))]),
    OpSpec("nn_softsign", lambda L, x: F(L).softsign(x), [A]),
    OpSpec("nn_tanhshrink", lambda L, x: F(L).tanhshrink(x), [A]),
    OpSpec(
        "nn_softmin",
        lambda L, x: (F(L).softmin(x, dim=1), F(L).softmin(x, dim=0)),
        [Arg((2, 3, 4))],
    ),
    OpSpec(
        "nn_log_softmax_middle_dim",
        lambda L, x: F(L).log_softmax(x, dim=1) * F(L).softmax(x, dim=2),
        [Arg((2, 3, 4))],
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
]
