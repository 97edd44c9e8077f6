"""``torch.autograd.forward_ad``: forward-mode AD. Inside ``dual_level()``, a tensor made with
``make_dual(primal, tangent)`` carries its tangent through every op, and ``unpack_dual`` reads
the Jacobian-vector product off the result after one forward pass.

The tangents are computed in the crate (``ferrograd::autograd::forward_ad``): each op's forward
rule comes from its backward rule, so every differentiable op has one. Forward mode ignores
``no_grad``, as in torch, and composes with reverse mode (a dual tensor that requires grad can be
differentiated as usual, which gives Hessian-vector products by forward-over-reverse).
"""

from __future__ import annotations

from typing import Any, NamedTuple, Optional

from .. import _C
from .._C import Tensor

__all__ = [
    "UnpackedDualTensor",
    "enter_dual_level",
    "exit_dual_level",
    "make_dual",
    "unpack_dual",
    "dual_level",
]


class UnpackedDualTensor(NamedTuple):
    """``unpack_dual``'s result: the primal (a view without tangent) and the tangent (or None)."""

    primal: Tensor
    tangent: Optional[Tensor]


def enter_dual_level() -> int:
    """Open a dual level and return its number; only one can be open at a time."""
    return _C._enter_dual_level()


def exit_dual_level(*, level: Optional[int] = None) -> None:
    """Close the open dual level; the tangents made in it are dropped."""
    _C._exit_dual_level(level)


def _check_level(level: Optional[int], op: str) -> None:
    if level is not None and level != _C._current_dual_level():
        raise RuntimeError(f"Invalid level given to {op}")


def make_dual(tensor: Tensor, tangent: Tensor, *, level: Optional[int] = None) -> Tensor:
    """A view of ``tensor`` that carries ``tangent`` (same shape) at the open level."""
    if _C._current_dual_level() is None:
        raise RuntimeError(
            "Trying to create a dual Tensor for forward AD but no level exists, make sure to "
            "enter_dual_level() first."
        )
    _check_level(level, "make_dual")
    if not isinstance(tensor, Tensor):
        raise TypeError(f"make_dual(): expected tensor to be a Tensor, got {type(tensor).__name__}")
    if not isinstance(tangent, Tensor):
        raise TypeError(
            f"make_dual(): expected tangent to be a Tensor, got {type(tangent).__name__}"
        )
    return _C._make_dual(tensor, tangent)


def unpack_dual(tensor: Tensor, *, level: Optional[int] = None) -> UnpackedDualTensor:
    """``(primal, tangent)`` of ``tensor`` at the open level; the tangent is None for a tensor
    without one (and outside a dual level)."""
    _check_level(level, "_fw_primal")
    primal, tangent = _C._unpack_dual(tensor)
    return UnpackedDualTensor(primal, tangent)


class dual_level:
    """Context manager for a dual level: ``with forward_ad.dual_level(): ...``; every tangent
    made inside is dropped on exit."""

    def __enter__(self) -> int:
        return enter_dual_level()

    def __exit__(self, *args: Any) -> None:
        exit_dual_level()
