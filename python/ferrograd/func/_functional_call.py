"""``functional_call`` and ``stack_module_state``, as ``torch.func`` has them."""

from __future__ import annotations

from typing import Any, Dict, Optional, Sequence, Tuple, Union

from .. import _C
from .._ops_shape import stack
from ..nn.modules.module import Module
from ..nn.utils.stateless import _functional_call

__all__ = ["functional_call", "stack_module_state"]

Tensor = _C.Tensor


def functional_call(
    module: Module,
    parameter_and_buffer_dicts: Union[Dict[str, Tensor], Sequence[Dict[str, Tensor]]],
    args: Any = None,
    kwargs: Optional[Dict[str, Any]] = None,
    *,
    tie_weights: bool = True,
    strict: bool = False,
) -> Any:
    """``module(*args, **kwargs)`` with its parameters and buffers replaced by the tensors of
    ``parameter_and_buffer_dicts`` (one dict, or a sequence of dicts with distinct keys) for the
    call; the module's own are restored afterwards, also when the call raises.

    ``args`` that is not a tuple is one argument. ``tie_weights``: names tied in the module
    (one tensor under several names) take the given value together (ValueError when they are
    given different values). ``strict``: RuntimeError naming the missing and unexpected keys.
    ValueError when ``parameter_and_buffer_dicts`` is neither a dict nor a sequence of dicts, or
    a key is in more than one of them.
    """
    if isinstance(parameter_and_buffer_dicts, dict):
        parameters_and_buffers = parameter_and_buffer_dicts
    elif isinstance(parameter_and_buffer_dicts, Sequence):
        if not all(isinstance(d, dict) for d in parameter_and_buffer_dicts):
            raise ValueError(
                "Expected all elements of parameter_and_buffer_dicts to be dictionaries"
            )
        counts: Dict[str, int] = {}
        for d in parameter_and_buffer_dicts:
            for k in d:
                counts[k] = counts.get(k, 0) + 1
        repeated = [k for k, n in counts.items() if n > 1]
        if repeated:
            raise ValueError(
                f"{repeated} appeared in multiple dictionaries; behavior of functional call is "
                "ambiguous"
            )
        parameters_and_buffers = {k: v for d in parameter_and_buffer_dicts for k, v in d.items()}
    else:
        raise ValueError(
            "Expected parameter_and_buffer_dicts to be a dict, or a list/tuple of dicts, but got "
            f"{type(parameter_and_buffer_dicts)}"
        )
    return _functional_call(module, parameters_and_buffers, args, kwargs, tie_weights, strict)


def _stacked_leaf(tensors: Sequence[Tensor], name: str) -> Tensor:
    all_rg = all(t.requires_grad for t in tensors)
    if not all_rg and any(t.requires_grad for t in tensors):
        raise RuntimeError(f"Expected {name} from each model to have the same .requires_grad")
    result = stack(list(tensors))
    if all_rg:
        result = result.detach().requires_grad_()
    return result


def stack_module_state(models: Sequence[Module]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """``(params, buffers)``: each parameter and buffer name of ``models`` (same class, same
    training mode) mapped to the models' tensors stacked along a new dim 0. Stacked parameters
    are new leaves (requiring grad when the originals do), ready for an optimizer.
    RuntimeError for no models, mixed modes or mixed classes."""
    if len(models) == 0:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if not (all(m.training for m in models) or all(not m.training for m in models)):
        raise RuntimeError(
            "stack_module_state: Expected all models to have the same training/eval mode."
        )
    cls = type(models[0])
    if not all(type(m) is cls for m in models):
        raise RuntimeError("stack_module_state: Expected all models to be of the same class.")
    all_params = [dict(m.named_parameters()) for m in models]
    params = {k: _stacked_leaf([p[k] for p in all_params], k) for k in all_params[0]}
    all_buffers = [dict(m.named_buffers()) for m in models]
    buffers = {k: _stacked_leaf([b[k] for b in all_buffers], k) for k in all_buffers[0]}
    return params, buffers
