"""Normalisation layers' functions (``src/ops/nn/norm.rs``): layer_norm, rms_norm,
group_norm, batch_norm, instance_norm, local_response_norm."""

from __future__ import annotations

from ._shared import X4, F
from .spec import Arg, OpSpec

X = Arg((3, 4, 5))
C4 = Arg((4,))
# running statistics: constants (torch gives them no gradient); variances positive
RM = Arg((4,), requires_grad=False)
RV = Arg((4,), low=0.5, high=2.0, requires_grad=False)
OPS = [
    # ----- normalisation, embedding, one_hot -----
    OpSpec(
        "nn_layer_norm",
        lambda L, x, w, b: F(L).layer_norm(x, (3, 4), w, b),
        [X4, Arg((3, 4)), Arg((3, 4))],
    ),
    OpSpec("nn_layer_norm_plain", lambda L, x: F(L).layer_norm(x, [4], eps=1e-3), [X4]),
    OpSpec(
        "nn_norm_layer_norm",
        lambda L, x, w, b: F(L).layer_norm(x, tuple(w.shape), w, b),
        [X, Arg((5,)), Arg((5,))],
        shape_sets=[
            [Arg((2, 3, 1)), Arg((3, 1)), Arg((3, 1))],
            [Arg((0, 5)), Arg((5,)), Arg((5,))],
        ],
    ),
    OpSpec(
        "nn_norm_layer_norm_weight_only_2d_shape",
        lambda L, x, w: F(L).layer_norm(x, (4, 5), w, None, 1e-3),
        [X, Arg((4, 5))],
    ),
    OpSpec(
        "nn_norm_layer_norm_bias_only",
        lambda L, x, b: F(L).layer_norm(x, [5], None, b),
        [X, Arg((5,))],
    ),
    OpSpec("nn_norm_layer_norm_plain", lambda L, x: F(L).layer_norm(x, (5,)), [X]),
    OpSpec(
        "nn_norm_rms_norm",
        lambda L, x, w: F(L).rms_norm(x, tuple(w.shape), w),
        [X, Arg((5,))],
        shape_sets=[[Arg((2, 6)), Arg((6,))]],
    ),
    OpSpec(
        "nn_norm_rms_norm_eps_no_weight",
        lambda L, x: F(L).rms_norm(x, (4, 5), eps=1e-3),
        [X],
    ),
    OpSpec(
        "nn_norm_group_norm",
        lambda L, x, w, b: F(L).group_norm(x, 2, w, b),
        [Arg((3, 4, 5)), C4, C4],
        shape_sets=[[Arg((2, 4, 2, 3)), C4, C4], [Arg((3, 4)), C4, C4]],
    ),
    OpSpec(
        "nn_norm_group_norm_plain",
        lambda L, x: F(L).group_norm(x, 4, eps=1e-3),
        [Arg((2, 4, 3))],
    ),
    OpSpec(
        "nn_norm_batch_norm_train",
        lambda L, x, w, b: F(L).batch_norm(x, None, None, w, b, training=True),
        [Arg((3, 4, 5)), C4, C4],
        shape_sets=[[Arg((5, 4)), C4, C4], [Arg((2, 4, 2, 3)), C4, C4]],
    ),
    OpSpec(
        "nn_norm_batch_norm_train_running",
        lambda L, x, m, v: F(L).batch_norm(x, m.clone(), v.clone(), training=True, momentum=0.3),
        [Arg((3, 4, 5)), RM, RV],
    ),
    OpSpec(
        "nn_norm_batch_norm_eval",
        lambda L, x, m, v, w, b: F(L).batch_norm(x, m, v, w, b, training=False),
        [Arg((3, 4, 5)), RM, RV, C4, C4],
        shape_sets=[[Arg((2, 4)), RM, RV, C4, C4]],
    ),
    OpSpec(
        "nn_norm_instance_norm",
        lambda L, x, w, b: F(L).instance_norm(x, weight=w, bias=b),
        [Arg((3, 4, 5)), C4, C4],
        shape_sets=[[Arg((2, 4, 2, 3)), C4, C4]],
    ),
    OpSpec(
        "nn_norm_instance_norm_plain",
        lambda L, x: F(L).instance_norm(x),
        [Arg((2, 4, 3))],
    ),
    OpSpec(
        "nn_norm_instance_norm_eval",
        lambda L, x, m, v, w, b: F(L).instance_norm(x, m, v, w, b, use_input_stats=False),
        [Arg((3, 4, 5)), RM, RV, C4, C4],
    ),
    OpSpec(
        "nn_norm_local_response_norm",
        lambda L, x: F(L).local_response_norm(x, 3, alpha=0.5, beta=0.75, k=1.5),
        [Arg((2, 5, 3))],
        shape_sets=[[Arg((2, 4, 2, 3))], [Arg((1, 2, 2))]],
    ),
    OpSpec(
        "nn_norm_local_response_norm_even_size",
        lambda L, x: F(L).local_response_norm(x, 4, alpha=0.3),
        [Arg((2, 5, 2))],
    ),
]
