"""``ferrograd.nn.functional`` entries that need ops from the other branches: ``Tensor.erf``
(math branch) for ``gelu(approximate='none')``. Each entry is listed only once its op exists, so
this branch stays green on its own; after the merge all of them run. (``normalize`` at a zero
row is native now: its entry moved to ``nn_distance.py``.)"""

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
]

OPS = [spec for needs, spec in _PENDING if hasattr(ferrograd.Tensor, needs)]
