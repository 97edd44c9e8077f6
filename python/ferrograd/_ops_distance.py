"""``torch.cdist``, ``torch.cosine_similarity`` and ``torch.pairwise_distance``: argument
handling around the crate's ``ops::nn::distance``."""

from __future__ import annotations

from typing import Optional

from . import _C
from ._autocast_policy import float32 as _autocast_float32

Tensor = _C.Tensor

__all__ = ["cdist", "cosine_similarity", "pairwise_distance"]

_MODES = (
    "use_mm_for_euclid_dist_if_necessary",
    "use_mm_for_euclid_dist",
    "donot_use_mm_for_euclid_dist",
)


@_autocast_float32
def cdist(x1: Tensor, x2: Tensor, p: float = 2.0, compute_mode: Optional[str] = None) -> Tensor:
    """The ``p``-norm distance between each row of ``x1`` ``(..., P, M)`` and each row of
    ``x2`` ``(..., R, M)``: shape ``(..., P, R)``. For p = 2, ``compute_mode`` picks the
    matrix-product form (by default when P or R exceeds 25)."""
    mode = "use_mm_for_euclid_dist_if_necessary" if compute_mode is None else compute_mode
    if mode not in _MODES:
        raise ValueError(f"{compute_mode} is not a valid value for compute_mode")
    return _C._cdist(x1, x2, float(p), _MODES.index(mode))


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """Cosine similarity of ``x1`` and ``x2`` (broadcast) along ``dim``."""
    return _C._nn_cosine_similarity(x1, x2, int(dim), float(eps))


def pairwise_distance(
    x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False
) -> Tensor:
    """The ``p``-norm of ``x1 - x2 + eps`` over the last dim."""
    return _C._nn_pairwise_distance(x1, x2, float(p), float(eps), bool(keepdim))
