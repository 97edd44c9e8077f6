"""``ferrograd.utils.dlpack``, as ``torch.utils.dlpack``: capsules in and out."""

from __future__ import annotations

from typing import Any

from .. import _C
from .._dlpack import from_dlpack

__all__ = ["from_dlpack", "to_dlpack"]


def to_dlpack(tensor: _C.Tensor) -> Any:
    """A legacy ``dltensor`` capsule sharing ``tensor``'s memory (``tensor.__dlpack__()``)."""
    return tensor.__dlpack__()
