"""``ferrograd.func``: torch.func's function transforms (reverse mode) and functional module
calls.

``grad``, ``grad_and_value``, ``vjp``, ``jacrev``, ``jvp``, ``jacfwd``, ``linearize`` and
``hessian`` differentiate Python functions of tensors (and pytrees of them); ``functional_call``
runs an ``nn.Module`` with parameters and buffers taken from dicts, and ``stack_module_state``
stacks the state of several models for ensembling; ``vmap`` maps a function of one sample
over a batch, with a batching rule per op in the crate. ``functionalize`` is not provided yet.
"""

from __future__ import annotations

from ._forward import jacfwd, jvp, linearize
from ._functional_call import functional_call, stack_module_state
from ._transforms import grad, grad_and_value, hessian, jacrev, vjp
from ._vmap import vmap

__all__ = [
    "functional_call",
    "grad",
    "grad_and_value",
    "hessian",
    "jacfwd",
    "jacrev",
    "jvp",
    "linearize",
    "stack_module_state",
    "vjp",
    "vmap",
]
