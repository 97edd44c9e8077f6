"""``nn.functional`` activations and dropout (``src/ops/nn/activation.rs``,
``prelu.rs``)."""

from __future__ import annotations

from ._shared import _KINK, BIG, A, F
from .spec import Arg, OpSpec

# avoids the kinks at ±3 of the hard* functions
WIDE = Arg((3, 4), low=-5.0, high=5.0)
OPS = [
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
    OpSpec(
        "nn_leaky_relu",
        lambda L, x: F(L).leaky_relu(x, 0.2),
        [A],
        gradgrad=False,
        note=_KINK,
    ),
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
    OpSpec("nn_hardshrink", lambda L, x: F(L).hardshrink(x, 0.7), [Arg((3, 4))]),
    OpSpec(
        "nn_softshrink",
        lambda L, x: F(L).softshrink(x),
        [Arg((3, 4))],
        shape_sets=[[Arg(())], [Arg((0, 2))]],
    ),
    OpSpec("nn_rrelu_eval", lambda L, x: F(L).rrelu(x, 0.1, 0.3), [Arg((2, 5))]),
    OpSpec(
        "nn_prelu",
        lambda L, x, w: F(L).prelu(x, w),
        [Arg((2, 3, 4)), Arg((3,), low=0.1, high=0.5)],
        shape_sets=[[Arg((2, 3, 4)), Arg((1,))], [Arg((5,)), Arg((1,))], [Arg(()), Arg(())]],
    ),
    # gelu (exact) over its float32 kernel's ranges: the series (|x| <= 1/2), the near and far
    # fits of the tail (split at |x| = 3) and the clamp at 16, in tensors longer than one
    # 32-element block so blocks of both kinds occur.
    OpSpec(
        "nn_gelu_exact_float32_ranges",
        lambda L, x: F(L).gelu(x),
        [Arg((3, 40), low=-4.0, high=4.0)],
        shape_sets=[[Arg((2, 70), low=-18.0, high=18.0)], [Arg((5, 7), low=-0.5, high=0.5)]],
    ),
    OpSpec("nn_gelu", lambda L, x: F(L).gelu(x), [Arg((2, 3))], shape_sets=[[Arg(())]]),
]
