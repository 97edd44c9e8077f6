"""Function forms of ``crate::ops::convert`` (``ferrograd.clone``)."""

from __future__ import annotations

from . import _C
from ._ops_common import _method

Tensor = _C.Tensor


clone = _method("clone")


__all__ = [
    "clone",
]
