"""Function forms of the softmax family (``ferrograd.softmax``, ``log_softmax``, ``logsumexp``).
Each calls the Tensor method bound in ``src/python/nn/softmax.rs``."""

from __future__ import annotations

import builtins
from typing import Any, Sequence, Union

from . import _C

Tensor = _C.Tensor


def logsumexp(
    input: Tensor, dim: Union[int, Sequence[int]], keepdim: builtins.bool = False
) -> Tensor:
    """``log(sum(exp(input), dim))`` computed stably (the maximum subtracted first)."""
    return input.logsumexp(dim, keepdim)


def softmax(input: Tensor, dim: int, dtype: Any = None) -> Tensor:
    """Softmax along ``dim`` (stable)."""
    return input.softmax(dim, dtype)


def log_softmax(input: Tensor, dim: int, dtype: Any = None) -> Tensor:
    """Log-softmax along ``dim`` (stable)."""
    return input.log_softmax(dim, dtype)


__all__ = [
    "log_softmax",
    "logsumexp",
    "softmax",
]
