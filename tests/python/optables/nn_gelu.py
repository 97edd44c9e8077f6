"""gelu (exact) over its float32 kernel's ranges: the series (|x| <= 1/2), the near and far
fits of the tail (split at |x| = 3) and the clamp at 16, in tensors longer than one 32-element
block so blocks of both kinds occur: gradcheck and gradgradcheck in float64, float32 against
float64, torch parity."""

from __future__ import annotations

import ferrograd.nn.functional  # noqa: F401  (makes ``ferrograd.nn`` an attribute)

from .spec import Arg, OpSpec


def F(L):  # noqa: N802 - torch's conventional name
    return L.nn.functional


OPS = [
    OpSpec(
        "nn_gelu_exact_float32_ranges",
        lambda L, x: F(L).gelu(x),
        [Arg((3, 40), low=-4.0, high=4.0)],
        shape_sets=[[Arg((2, 70), low=-18.0, high=18.0)], [Arg((5, 7), low=-0.5, high=0.5)]],
    ),
]
