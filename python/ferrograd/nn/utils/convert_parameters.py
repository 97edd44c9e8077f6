"""One flat vector from parameters and back, as torch's ``nn.utils``."""

from __future__ import annotations

from typing import Iterable

from ... import _C
from ...autograd.grad_mode import no_grad

Tensor = _C.Tensor

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """The parameters flattened and concatenated (differentiable)."""
    from ... import _ops_shape

    return _ops_shape.cat([p.reshape(-1) for p in parameters])


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """Copy consecutive slices of ``vec`` into the parameters."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")
    pointer = 0
    with no_grad():
        for param in parameters:
            num_param = param.numel()
            param.copy_(vec[pointer : pointer + num_param].view_as(param))
            pointer += num_param
