"""``ferrograd.nn.functional`` entries that need ops from the other branches: ``Tensor.erf``
(math branch) for ``gelu(approximate='none')`` and ``Tensor.norm`` (math branch) for the
zero-vector gradient of ``normalize`` (the ``sqrt`` composition used without it has an infinite
derivative at 0). Each entry is listed only once its op exists, so this branch stays green on
its own; after the merge all of them run."""

from __future__ import annotations

import ferrograd
import ferrograd.nn.functional  # noqa: F401  (makes ``ferrograd.nn`` an attribute)

from .spec import Arg, OpSpec


def F(L):  # noqa: N802 - torch's conventional name
    return L.nn.functional


_PENDING = [
    (
        "erf",
        OpSpec("nn_gelu", lambda L, x: F(L).gelu(x), [Arg((2, 3))], shape_sets=[[Arg(())]]),
    ),
    (
        "norm",
        OpSpec(
            "nn_normalize_zero_row",
            lambda L, x: F(L).normalize(x * L.tensor([[0.0], [1.0]], dtype=x.dtype)),
            [Arg((2, 3))],
            gradgrad=False,
            note="the zero row is a kink of the norm",
        ),
    ),
]

OPS = [spec for needs, spec in _PENDING if hasattr(ferrograd.Tensor, needs)]
