"""``scaled_dot_product_attention`` (``src/ops/nn/attention.rs``: its fused kernel; the
composed backward under gradgradcheck) and ``multi_head_attention_forward`` on small shapes."""

from __future__ import annotations

from ._shared import F
from .spec import Arg, OpSpec


def _sdpa(**kw):
    return lambda L, q, k, v: F(L).scaled_dot_product_attention(q, k, v, **kw)


def _sdpa_mask(**kw):
    return lambda L, q, k, v, m: F(L).scaled_dot_product_attention(q, k, v, attn_mask=m, **kw)


Q, K, V = Arg((2, 3, 4)), Arg((2, 5, 4)), Arg((2, 5, 3))
OPS = [
    OpSpec(
        "nn_sdpa",
        _sdpa(),
        [Q, K, V],
        shape_sets=[
            # unbatched, several batch dims, broadcast batch dims
            [Arg((3, 4)), Arg((5, 4)), Arg((5, 2))],
            [Arg((2, 2, 3, 4)), Arg((2, 2, 5, 4)), Arg((2, 2, 5, 3))],
            [Arg((2, 2, 3, 4)), Arg((1, 2, 5, 4)), Arg((2, 1, 5, 3))],
        ],
        op="scaled_dot_product_attention",
    ),
    OpSpec(
        "nn_sdpa_causal",
        _sdpa(is_causal=True),
        [Arg((2, 5, 4)), Arg((2, 3, 4)), Arg((2, 3, 3))],
        op="scaled_dot_product_attention",
    ),
    OpSpec("nn_sdpa_scale", _sdpa(scale=0.7), [Q, K, V], op="scaled_dot_product_attention"),
    OpSpec(
        "nn_sdpa_bool_mask",
        _sdpa_mask(),
        [Q, K, V, Arg((3, 5), kind="bool")],
        shape_sets=[[Q, K, V, Arg((2, 1, 5), kind="bool")]],
        op="scaled_dot_product_attention",
    ),
    OpSpec(
        "nn_sdpa_float_mask",
        _sdpa_mask(),
        [Q, K, V, Arg((3, 5), requires_grad=False)],
        shape_sets=[[Q, K, V, Arg((2, 3, 5))]],
        op="scaled_dot_product_attention",
    ),
    OpSpec(
        "nn_mha_forward",
        lambda L, x, w, b, wo, bo: F(L).multi_head_attention_forward(
            x, x, x, 4, 2, w, b, None, None, False, 0.0, wo, bo, need_weights=False
        )[0],
        [Arg((3, 2, 4)), Arg((12, 4)), Arg((12,)), Arg((4, 4)), Arg((4,))],
        op="multi_head_attention_forward",
    ),
    OpSpec(
        "nn_mha_forward_weights",
        lambda L, x, w, b, wo, bo: F(L).multi_head_attention_forward(
            x, x, x, 4, 2, w, b, None, None, False, 0.0, wo, bo, need_weights=True
        ),
        [Arg((3, 2, 4)), Arg((12, 4)), Arg((12,)), Arg((4, 4)), Arg((4,))],
        op="multi_head_attention_forward",
    ),
]
