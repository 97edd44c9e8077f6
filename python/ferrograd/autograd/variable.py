"""``autograd.Variable``: torch's pre-0.4 wrapper, which torch keeps as a no-op."""

from __future__ import annotations

from .._legacy import Variable

__all__ = ["Variable"]
