"""Reverse-mode automatic differentiation with ``torch.autograd``'s API."""

from __future__ import annotations

import warnings
from typing import Any, Optional, Sequence, Tuple, Union

from .. import _C
from . import forward_ad, function, grad_mode, graph
from .anomaly_mode import (
    detect_anomaly,
    is_anomaly_check_nan_enabled,
    is_anomaly_enabled,
    set_detect_anomaly,
)
from .function import Function, FunctionCtx, once_differentiable
from .grad_mode import (
    enable_grad,
    inference_mode,
    no_grad,
    set_grad_enabled,
    set_multithreading_enabled,
)
from .variable import Variable

__all__ = [
    "backward",
    "grad",
    "Function",
    "FunctionCtx",
    "once_differentiable",
    "no_grad",
    "enable_grad",
    "set_grad_enabled",
    "set_multithreading_enabled",
    "inference_mode",
    "detect_anomaly",
    "set_detect_anomaly",
    "is_anomaly_enabled",
    "is_anomaly_check_nan_enabled",
    "function",
    "grad_mode",
    "graph",
    "forward_ad",
    "Variable",
]

Tensor = _C.Tensor
_TensorOrTensors = Union[Tensor, Sequence[Tensor]]
_warned_create_graph = False


def _tensor_or_tensors_to_tuple(tensors: Any, length: int) -> Tuple[Optional[Tensor], ...]:
    if tensors is None:
        return (None,) * length
    if isinstance(tensors, Tensor):
        return (tensors,)
    return tuple(tensors)


def _grads_tuple(grads: Any, n: int) -> list:
    items = list(_tensor_or_tensors_to_tuple(grads, n))
    for g in items:
        if g is not None and not isinstance(g, Tensor):
            raise TypeError(f"gradients can be either Tensors or None, but got {type(g).__name__}")
    # Like torch (which zips), extra gradients are ignored.
    return items[:n]


def _as_tuple(tensors: Any) -> Tuple[Any, ...]:
    if isinstance(tensors, (Tensor, graph.GradientEdge)):
        return (tensors,)
    return tuple(tensors)


def backward(
    tensors: _TensorOrTensors,
    grad_tensors: Optional[_TensorOrTensors] = None,
    retain_graph: Optional[bool] = None,
    create_graph: bool = False,
    grad_variables: Optional[_TensorOrTensors] = None,
    inputs: Optional[_TensorOrTensors] = None,
) -> None:
    """Compute the sum of gradients of ``tensors`` with respect to graph leaves and accumulate
    them into the leaves' ``.grad`` (only into ``inputs`` when given).

    ``grad_tensors`` is the vector of the vector-Jacobian product, one per tensor (None allowed
    for one-element tensors); ``retain_graph`` defaults to ``create_graph`` (applied by the
    engine, which takes ``None`` as "not given").
    """
    global _warned_create_graph
    if grad_variables is not None:
        warnings.warn(
            "`grad_variables` is deprecated. Use `grad_tensors` instead.",
            FutureWarning,
            stacklevel=2,
        )
        if grad_tensors is None:
            grad_tensors = grad_variables
        else:
            raise RuntimeError(
                "`grad_tensors` and `grad_variables` (deprecated) arguments both passed to "
                "`backward()`. Please only use `grad_tensors`."
            )
    if inputs is not None and not isinstance(inputs, Tensor) and len(inputs) == 0:
        raise RuntimeError("`inputs` argument to `backward()` cannot be empty.")
    roots = _as_tuple(tensors)
    for i, t in enumerate(roots):
        if not isinstance(t, Tensor):
            raise TypeError(f"element {i} of tensors is not a Tensor (got {type(t).__name__})")
    input_list = None if inputs is None else list(_as_tuple(inputs))
    grads = _grads_tuple(grad_tensors, len(roots))
    if create_graph and not _warned_create_graph:
        _warned_create_graph = True
        warnings.warn(
            "Using backward() with create_graph=True will create a reference cycle between the "
            "parameter and its gradient which can cause a memory leak. We recommend using "
            "autograd.grad when creating the graph to avoid this. If you have to use this "
            "function, make sure to reset the .grad fields of your parameters to None after use "
            "to break the cycle and avoid the leak.",
            stacklevel=2,
        )
    _C._backward(list(roots), grads, retain_graph, create_graph, input_list)


def grad(
    outputs: _TensorOrTensors,
    inputs: Any,
    grad_outputs: Optional[_TensorOrTensors] = None,
    retain_graph: Optional[bool] = None,
    create_graph: bool = False,
    only_inputs: bool = True,
    allow_unused: Optional[bool] = None,
    is_grads_batched: bool = False,
    materialize_grads: bool = False,
) -> Any:
    """Compute and return the sum of gradients of ``outputs`` with respect to ``inputs``,
    touching no ``.grad``. Returns a tuple (a dict when ``inputs`` is a dict)."""
    if materialize_grads and allow_unused is False:
        raise ValueError(
            "Expected allow_unused to be True or not passed when materialize_grads=True, "
            "but got: allow_unused=False."
        )
    if not only_inputs:
        warnings.warn(
            "only_inputs argument is deprecated and is ignored now (defaults to True). To "
            "accumulate gradient for other parts of the graph, please use torch.autograd.backward.",
            FutureWarning,
            stacklevel=2,
        )
    keys = None
    if isinstance(inputs, dict):
        keys = list(inputs.keys())
        inputs = list(inputs.values())
    elif not isinstance(inputs, Tensor) and hasattr(inputs, "keys"):
        raise TypeError("inputs must be a Tensor, a sequence of Tensors or a dict of Tensors")
    outs = _as_tuple(outputs)
    ins = _as_tuple(inputs)
    for t in ins:
        if not isinstance(t, (Tensor, graph.GradientEdge)):
            raise RuntimeError(
                f"all inputs have to be Tensors or GradientEdges, but got {type(t).__name__}"
            )
    grads = _grads_tuple(grad_outputs, len(outs))
    args = (graph._edges_of(outs), graph._edges_of(ins))
    flags = (retain_graph, create_graph, allow_unused, materialize_grads)
    if is_grads_batched:
        result = _batched_grad(outs, grads, args, flags)
    else:
        result = _C._grad(*args, grads, *flags)
    if keys is not None:
        return dict(zip(keys, result))
    return result


def _batched_grad(outs: Tuple[Any, ...], grads: Any, args: Any, flags: Any) -> Any:
    """``grad`` with ``is_grads_batched=True``: one backward pass with the seeds' first dims as
    a vmap batch (each node runs its batching rules on the batched gradients), as torch does
    with ``vmap`` over the vector-Jacobian product."""
    sizes = []
    for i, (o, g) in enumerate(zip(outs, grads)):
        if g is None:
            continue
        if g.dim() == 0 or (isinstance(o, Tensor) and tuple(g.shape[1:]) != tuple(o.shape)):
            raise RuntimeError(
                "If `is_grads_batched=True`, we interpret the first dimension of each "
                "grad_output as the batch dimension. The sizes of the remaining dimensions are "
                "expected to match the shape of corresponding output, but a mismatch was "
                f"detected: grad_output[{i}] has a shape of {g.shape} and output[{i}] has a "
                f"shape of {o.shape}. If you only want some tensors in `grad_output` to be "
                "considered batched, consider using vmap."
            )
        sizes.append(g.shape[0])
    if not sizes:
        return _C._grad(*args, grads, *flags)
    if any(n != sizes[0] for n in sizes):
        raise RuntimeError(
            "vmap: Expected all tensors to have the same size in the mapped dimension, got "
            f"sizes {sizes} for the mapped dimension"
        )
    size = sizes[0]
    level = _C._vmap_increment_nesting(size, "error")
    try:
        seeds = [None if g is None else _C._add_batch_dim(g, 0, level) for g in grads]
        result = _C._grad(*args, seeds, *flags)
        return tuple(
            None if r is None else _C._remove_batch_dim(r, level, size, 0) for r in result
        )
    finally:
        _C._vmap_decrement_nesting()


from . import functional  # noqa: E402, F401
from .gradcheck import gradcheck, gradgradcheck  # noqa: E402, F401
