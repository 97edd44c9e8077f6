"""Copies and dtype conversions (``src/ops/convert.rs``): clone, contiguous, to(dtype)."""

from __future__ import annotations

from ._shared import _rearranged

OPS = [
    _rearranged("clone", (3,), lambda L, x: x.clone(), lambda a: a.copy(), torch_grad_fn=True),
    _rearranged(
        "contiguous_of_transpose",
        (2, 3),
        lambda L, x: x.t().contiguous(),
        lambda a: a.T.copy(),
        op="contiguous",
    ),
]
