"""Gradient clipping, as torch's ``nn.utils.clip_grad_norm_`` / ``clip_grad_value_``."""

from __future__ import annotations

import math
from typing import Iterable, Union

from ... import _C
from ...autograd.grad_mode import no_grad

Tensor = _C.Tensor
_Tensors = Union[Tensor, Iterable[Tensor]]

__all__ = ["clip_grad_norm_", "clip_grad_value_"]


def _grads(parameters: _Tensors) -> list:
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


def clip_grad_norm_(
    parameters: _Tensors,
    max_norm: float,
    norm_type: float = 2.0,
    error_if_nonfinite: bool = False,
    foreach: object = None,
) -> Tensor:
    """Scale all gradients together so their joint ``norm_type``-norm is at most ``max_norm``;
    returns the norm before clipping."""
    from ... import _creation

    grads = _grads(parameters)
    max_norm = float(max_norm)
    norm_type = float(norm_type)
    if len(grads) == 0:
        return _creation.tensor(0.0)
    with no_grad():
        norms = [g.detach().norm(norm_type) for g in grads]
        stacked = _C._stack([n.to(grads[0].dtype) for n in norms], 0)
        total_norm = stacked.amax() if math.isinf(norm_type) else stacked.norm(norm_type)
        if error_if_nonfinite and not math.isfinite(float(total_norm)):
            raise RuntimeError(
                f"The total norm of order {norm_type} for gradients from `parameters` is "
                "non-finite, so it cannot be clipped. To disable this error and scale the "
                "gradients by the non-finite norm anyway, set `error_if_nonfinite=False`"
            )
        clip_coef = max_norm / (float(total_norm) + 1e-6)
        if clip_coef < 1.0:
            for g in grads:
                g.mul_(clip_coef)
    return total_norm


def clip_grad_value_(parameters: _Tensors, clip_value: float, foreach: object = None) -> None:
    """Clamp every gradient element to ``[-clip_value, clip_value]``."""
    clip_value = float(clip_value)
    with no_grad():
        for g in _grads(parameters):
            g.copy_(g.clamp(-clip_value, clip_value))
