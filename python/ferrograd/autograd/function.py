"""Custom differentiable functions: ``autograd.Function`` with torch's API (and OneFlow's
``Exp()(x)`` call style)."""

from __future__ import annotations

import functools
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

from .. import _C
from .grad_mode import no_grad

__all__ = ["Function", "FunctionCtx", "once_differentiable"]

Tensor = _C.Tensor


class FunctionCtx:
    """The ``ctx`` passed to ``forward`` and ``backward``."""

    def __init__(self) -> None:
        self.to_save: Tuple[Optional[Tensor], ...] = ()
        self.dirty_tensors: Tuple[Tensor, ...] = ()
        self.non_differentiable: Tuple[Tensor, ...] = ()
        self.materialize_grads = True
        self.needs_input_grad: Tuple[bool, ...] = ()
        self._saved: Any = None
        self.saved_for_forward: Tuple[Optional[Tensor], ...] = ()
        self._in_jvp = False

    def save_for_backward(self, *tensors: Optional[Tensor]) -> None:
        """Save tensors (or None) for backward; read them back with ``saved_tensors``."""
        for i, t in enumerate(tensors):
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(
                    "save_for_backward can only save variables, but argument "
                    f"{i} is of type {type(t).__name__}"
                )
        self.to_save = tensors

    def save_for_forward(self, *tensors: Optional[Tensor]) -> None:
        """Save tensors (or None) for ``jvp``, which reads them as ``saved_tensors``."""
        for i, t in enumerate(tensors):
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(
                    "save_for_forward expects all arguments to be tensors; you should save "
                    f"non-tensors as attributes on ctx. Got argument {i} of type "
                    f"{type(t).__name__}"
                )
        self.saved_for_forward = tensors

    @property
    def saved_tensors(self) -> Tuple[Optional[Tensor], ...]:
        """The saved tensors, checked against in-place changes; an error once freed."""
        if self._in_jvp:
            return tuple(self.saved_for_forward)
        if self._saved is None:
            return tuple(self.to_save)
        return self._saved.unpack()

    saved_variables = saved_tensors

    def mark_dirty(self, *tensors: Tensor) -> None:
        """Declare inputs that forward modified in place (they must be returned)."""
        self.dirty_tensors = tensors

    def mark_non_differentiable(self, *tensors: Tensor) -> None:
        """Declare outputs that are not differentiable."""
        self.non_differentiable = tensors

    def set_materialize_grads(self, value: bool) -> None:
        """With False, backward receives None (not zeros) for outputs that got no gradient."""
        self.materialize_grads = value


def _input_tangents(args: Tuple[Any, ...]) -> Optional[List[Optional[Tensor]]]:
    """Each argument's tangent (forward mode), or None when no argument has one."""
    if _C._current_dual_level() is None:
        return None
    tangents = [_C._unpack_dual(a)[1] if isinstance(a, Tensor) else None for a in args]
    return tangents if any(t is not None for t in tangents) else None


def _set_output_tangents(
    cls: type, ctx: Any, tangents: List[Optional[Tensor]], result: List[Any], tensor_pos: List[int]
) -> None:
    """Run the Function's ``jvp`` on the inputs' tangents and give the outputs theirs."""
    if not _overrides(cls, "jvp"):
        raise NotImplementedError(
            "You must implement the jvp function for custom autograd.Function to use it with "
            "forward mode AD."
        )
    ctx._in_jvp = True
    _C._suspend_forward_ad(True)
    try:
        with no_grad():
            out = cls.jvp(ctx, *tangents)  # type: ignore[attr-defined]
    finally:
        _C._suspend_forward_ad(False)
        ctx._in_jvp = False
    outs = out if isinstance(out, tuple) else (out,)
    if len(outs) != len(result):
        raise RuntimeError(
            f"function {cls.__name__} returned an incorrect number of forward gradients "
            f"(expected {len(result)}, got {len(outs)})"
        )
    for pos in tensor_pos:
        if outs[pos] is not None:
            _C._set_tangent(result[pos], outs[pos])


def _overrides(cls: type, name: str) -> bool:
    return getattr(cls, name) is not getattr(Function, name)


class VmapInfo(NamedTuple):
    """What a ``vmap`` staticmethod is told about the vmap it runs under."""

    batch_size: int
    randomness: str


_VMAP_DOCS = "For more details, please see https://pytorch.org/docs/main/notes/extending.func.html"


def _apply_vmap_rule(cls: type, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
    """``cls.vmap`` on the physical tensors of the arguments batched at the innermost vmap
    level (torch's ``custom_function_call_vmap``); ``_NO_RULE`` when it does not apply: no
    ``vmap`` staticmethod, no open level, or no argument batched at it. Without a ``vmap``
    staticmethod, ``forward`` and ``backward`` run on the batched tensors themselves, which is
    torch's ``generate_vmap_rule=True`` (torch raises there unless it is set)."""
    if not _overrides(cls, "vmap"):
        return _NO_RULE
    current = _C._current_vmap_level()
    if current is None:
        return _NO_RULE
    level, size, randomness = current
    if getattr(cls, "generate_vmap_rule", False):
        raise RuntimeError(
            f"You tried to vmap over {cls.__name__}, but it has both generate_vmap_rule=True "
            "and an overridden vmap staticmethod. Please set generate_vmap_rule=False or "
            f"delete the overridden vmap staticmethod to avoid ambiguity. {_VMAP_DOCS}"
        )
    in_dims: List[Optional[int]] = []
    unwrapped: List[Any] = []
    for a in args:
        if isinstance(a, Tensor) and _C._batch_info(a)[0] == level:
            in_dims.append(0)
            unwrapped.append(_C._remove_batch_dim(a, level, size, 0))
        else:
            in_dims.append(None)
            unwrapped.append(a)
    if all(d is None for d in in_dims):
        return _NO_RULE
    result = cls.vmap(VmapInfo(size, randomness), tuple(in_dims), *unwrapped, **kwargs)
    base = (
        "Expected the vmap staticmethod to have two returns, an output and out_dims with "
        "pytree structure compatible with the output. "
    )
    if not isinstance(result, tuple):
        raise RuntimeError(base + f"Got a {type(result)} instead")
    if len(result) != 2:
        raise RuntimeError(base + f"Got {len(result)} returns instead")
    output, out_dims = result
    from ..func._vmap import _broadcast_to_and_flatten
    from ..utils._pytree import tree_flatten, tree_unflatten

    flat, spec = tree_flatten(output)
    dims = _broadcast_to_and_flatten(out_dims, spec)
    if dims is None:
        raise RuntimeError(
            "The autograd.Function's vmap staticmethod returned an incompatible (output, "
            f"out_dims) tuple. Expected out_dims={out_dims} to be compatible with the "
            f"structure of `output`. out_dims has structure {tree_flatten(out_dims)[1]} but "
            f"output has structure {spec}. {_VMAP_DOCS}"
        )
    wrapped = [
        o if d is None or not isinstance(o, Tensor) else _C._add_batch_dim(o, d % o.dim(), level)
        for o, d in zip(flat, dims)
    ]
    return tree_unflatten(wrapped, spec)


_NO_RULE = object()


class Function:
    """Base class of custom differentiable functions.

    Subclass it with static ``forward(ctx, *args)`` and ``backward(ctx, *grad_outputs)`` and call
    ``MyFunction.apply(*args)`` (or, as in OneFlow, ``MyFunction()(*args)``). ``forward`` runs
    without recording; ``backward`` runs with grad mode equal to ``create_graph``, so a backward
    written with differentiable ops supports double backward.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return type(self).apply(*args, **kwargs)

    @staticmethod
    def forward(ctx: Any, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            "You must implement the forward function for custom autograd.Function."
        )

    @staticmethod
    def setup_context(ctx: Any, inputs: Tuple[Any, ...], output: Any) -> None:
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx: Any, *grad_outputs: Any) -> Any:
        raise NotImplementedError(
            "You must implement either the backward or vjp method for your custom "
            "autograd.Function to use it with backward mode AD."
        )

    vjp = backward

    @staticmethod
    def jvp(ctx: Any, *grad_inputs: Any) -> Any:
        raise NotImplementedError(
            "You must implement the jvp function for custom autograd.Function to use it with "
            "forward mode AD."
        )

    generate_vmap_rule = False

    @staticmethod
    def vmap(info: Any, in_dims: Tuple[Optional[int], ...], *args: Any) -> Any:
        """How this Function runs under ``func.vmap``: given ``info`` (``batch_size``,
        ``randomness``), one ``in_dims`` entry per argument (the batch dimension of a batched
        tensor, else None) and the arguments with their batch dimension, return ``(output,
        out_dims)``. Without it, ``forward`` and ``backward`` run on the batched tensors (what
        torch does with ``generate_vmap_rule=True``)."""
        raise NotImplementedError(
            "To use autograd.Function with vmap, you must either override the vmap "
            "staticmethod or set generate_vmap_rule=True."
        )

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        ruled = _apply_vmap_rule(cls, args, kwargs)
        if ruled is not _NO_RULE:
            return ruled
        ctx = FunctionCtx()
        recording = _C.is_grad_enabled() and not _C.is_inference_mode_enabled()
        ctx.needs_input_grad = tuple(
            isinstance(a, Tensor) and a.requires_grad and recording for a in args
        )
        tangents = _input_tangents(args)
        # With tangents, forward's own ops propagate none: jvp gives the outputs' tangents.
        if tangents is not None:
            _C._suspend_forward_ad(True)
        try:
            with no_grad():
                if _overrides(cls, "setup_context"):
                    output = cls.forward(*args, **kwargs)
                    cls.setup_context(ctx, args, output)
                else:
                    output = cls.forward(ctx, *args, **kwargs)
        finally:
            if tangents is not None:
                _C._suspend_forward_ad(False)
        is_tuple = isinstance(output, tuple)
        outs = output if is_tuple else (output,)
        tensor_pos = [i for i, o in enumerate(outs) if isinstance(o, Tensor)]
        tensor_outs = [outs[i] for i in tensor_pos]
        name = f"{cls.__name__}Backward"
        n_args = len(args)
        n_outs = len(outs)
        use_vjp = _overrides(cls, "vjp") and not _overrides(cls, "backward")
        user_backward = cls.vjp if use_vjp else cls.backward

        def backward_trampoline(*grads: Optional[Tensor]) -> List[Optional[Tensor]]:
            full: List[Optional[Tensor]] = [None] * n_outs
            for k, pos in enumerate(tensor_pos):
                full[pos] = grads[k]
            result = user_backward(ctx, *full)
            return _check_gradients(name, result, args, n_args)

        arg_tensors = [a if isinstance(a, Tensor) else None for a in args]
        new_outs, saved = _C._record_function(
            name,
            arg_tensors,
            tensor_outs,
            list(ctx.non_differentiable),
            list(ctx.dirty_tensors),
            list(ctx.to_save),
            bool(ctx.materialize_grads),
            backward_trampoline,
        )
        ctx._saved = saved
        result = list(outs)
        for k, pos in enumerate(tensor_pos):
            orig = outs[pos]
            # A dirty input comes back as the very same object, its history rebased.
            if any(orig is d for d in ctx.dirty_tensors):
                result[pos] = orig
            else:
                result[pos] = new_outs[k]
        if tangents is not None:
            _set_output_tangents(cls, ctx, tangents, result, tensor_pos)
        return tuple(result) if is_tuple else result[0]


def _check_gradients(name: str, result: Any, args: Tuple[Any, ...], n_args: int) -> list:
    if not isinstance(result, tuple):
        result = (result,)
    if len(result) > n_args and all(r is None for r in result[n_args:]):
        result = result[:n_args]
    if len(result) != n_args:
        raise RuntimeError(
            f"function {name} returned an incorrect number of gradients "
            f"(expected {n_args}, got {len(result)})"
        )
    for i, (g, a) in enumerate(zip(result, args)):
        if g is None:
            continue
        if not isinstance(a, Tensor):
            raise RuntimeError(
                f"function {name} returned a gradient different than None at position {i + 1}, "
                "but the corresponding forward input was not a Variable"
            )
        if not isinstance(g, Tensor):
            raise RuntimeError(f"expected Variable or None (got {type(g).__name__})")
    return list(result)


class _OnceDifferentiableError(Function):
    """Passes values through; differentiating through it raises."""

    @staticmethod
    def forward(ctx: Any, value: Tensor, *anchors: Tensor) -> Tensor:
        return value.detach().clone()

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        raise RuntimeError(
            "trying to differentiate twice a function that was marked with @once_differentiable"
        )


def once_differentiable(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate ``backward``: it runs without recording, and differentiating its results raises."""

    @functools.wraps(fn)
    def wrapper(ctx: Any, *args: Any) -> Any:
        with no_grad():
            outputs = fn(ctx, *args)
        if not _C.is_grad_enabled():
            return outputs
        anchors = [a for a in args if isinstance(a, Tensor) and a.requires_grad]
        if not anchors:
            return outputs
        is_tuple = isinstance(outputs, tuple)
        outs = outputs if is_tuple else (outputs,)
        wrapped = tuple(
            _OnceDifferentiableError.apply(o, *anchors) if isinstance(o, Tensor) else o
            for o in outs
        )
        return wrapped if is_tuple else wrapped[0]

    return wrapper
