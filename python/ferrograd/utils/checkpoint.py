"""``torch.utils.checkpoint``: activation checkpointing, trading compute for memory. A
checkpointed function keeps none of its intermediate activations for backward; backward runs
the function again to get them.

Two ways, as torch has them:

- ``use_reentrant=False`` (recommended): the forward pass runs under ``saved_tensors_hooks``
  whose pack hook keeps a small placeholder instead of each saved tensor. The first time a
  backward pass needs one, the function is run again (same random state) and every saved
  tensor is kept for that pass; recomputation stops as soon as the last one needed has been
  produced. Works with ``autograd.grad``, ``backward(inputs=...)``, double backward and nested
  checkpoints.
- ``use_reentrant=True`` (torch's default when the argument is omitted): an
  ``autograd.Function`` that runs the function without recording, and in its backward runs it
  again with recording and calls ``backward`` from inside backward. Only ``.backward()``
  without ``inputs``.

Only the orchestration lives here; what it stands on (saved-tensor hooks, the running pass,
random state) is in the crate.
"""

from __future__ import annotations

import contextlib
import functools
import warnings
import weakref
from typing import Any, Callable, ContextManager, Dict, Iterator, List, Optional, Tuple

from .. import _C
from .._tensor import Tensor
from ..autograd.function import Function
from ..autograd.grad_mode import enable_grad, no_grad
from ..autograd.graph import saved_tensors_hooks

__all__ = [
    "checkpoint",
    "checkpoint_sequential",
    "CheckpointError",
    "CheckpointFunction",
    "check_backward_validity",
    "detach_variable",
    "noop_context_fn",
    "set_checkpoint_early_stop",
    "set_checkpoint_debug_enabled",
]


class CheckpointError(RuntimeError):
    """The recomputation did not reproduce the original forward pass."""


_TIP = (
    "\nTip: the checkpointed function must save the same tensors (same shapes and dtypes, in "
    "the same order) when it runs again in backward; code that depends on global state or on "
    "randomness other than ferrograd's generator breaks that.\n"
)


def noop_context_fn() -> Tuple[ContextManager[Any], ContextManager[Any]]:
    """The default ``context_fn``: no context around the forward pass or the recomputation."""
    return contextlib.nullcontext(), contextlib.nullcontext()


def detach_variable(inputs: Tuple[Any, ...]) -> Tuple[Any, ...]:
    """The tensors of ``inputs`` detached, each keeping its ``requires_grad``."""
    if not isinstance(inputs, tuple):
        raise RuntimeError(
            "Only tuple of tensors is supported. Got Unsupported input type: ",
            type(inputs).__name__,
        )
    out = []
    for inp in inputs:
        if not isinstance(inp, Tensor):
            out.append(inp)
            continue
        x = inp.detach()
        x.requires_grad = inp.requires_grad
        out.append(x)
    return tuple(out)


def check_backward_validity(inputs: Any) -> None:
    """Warn when no input requires grad (checkpointing then has nothing to differentiate)."""
    if not any(inp.requires_grad for inp in inputs if isinstance(inp, Tensor)):
        warnings.warn(
            "None of the inputs have requires_grad=True. Gradients will be None", stacklevel=3
        )


_early_stop: Optional[bool] = None
_debug: Optional[bool] = None


@contextlib.contextmanager
def set_checkpoint_early_stop(enable: bool) -> Iterator[None]:
    """Whether checkpoints made in this context stop recomputing once every tensor backward
    needs has been produced (default True)."""
    global _early_stop
    prev, _early_stop = _early_stop, enable
    try:
        yield
    finally:
        _early_stop = prev


@contextlib.contextmanager
def set_checkpoint_debug_enabled(enabled: Optional[bool]) -> Iterator[None]:
    """Accepted for torch's API: ferrograd's checkpoint errors already name the tensors that
    differ."""
    global _debug
    prev, _debug = _debug, enabled
    try:
        yield
    finally:
        _debug = prev


@contextlib.contextmanager
def _rng_as(state: Any) -> Iterator[None]:
    """Run with the global generator at ``state`` (None: as it is), then put it back."""
    if state is None:
        yield
        return
    outer = _C._get_rng_state()
    _C._set_rng_state(state)
    try:
        yield
    finally:
        _C._set_rng_state(outer)


# ----- use_reentrant=True -----------------------------------------------------------------------


class CheckpointFunction(Function):
    """The reentrant checkpoint: forward without recording, backward recomputes and runs a
    nested ``backward``."""

    @staticmethod
    def forward(
        ctx: Any, run_function: Callable[..., Any], preserve_rng_state: bool, *args: Any
    ) -> Any:
        check_backward_validity(args)
        ctx.run_function = run_function
        ctx.rng_state = _C._get_rng_state() if preserve_rng_state else None
        ctx.inputs = [None if isinstance(a, Tensor) else a for a in args]
        ctx.tensor_indices = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        ctx.save_for_backward(*(a for a in args if isinstance(a, Tensor)))
        with no_grad():
            return run_function(*args)

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        if not _C._is_checkpoint_valid():
            raise RuntimeError(
                "When use_reentrant=True, torch.utils.checkpoint is incompatible with .grad() or "
                "passing an `inputs` parameter to .backward(). To resolve this error, you can "
                "either set use_reentrant=False, or call .backward() without passing the "
                "`inputs` argument."
            )
        inputs = list(ctx.inputs)
        for i, t in zip(ctx.tensor_indices, ctx.saved_tensors):
            inputs[i] = t
        detached = detach_variable(tuple(inputs))
        with _rng_as(ctx.rng_state), enable_grad():
            outputs = ctx.run_function(*detached)
        if isinstance(outputs, Tensor):
            outputs = (outputs,)
        pairs = [
            (o, g) for o, g in zip(outputs, grads) if isinstance(o, Tensor) and o.requires_grad
        ]
        if not pairs:
            raise RuntimeError(
                "none of output has requires_grad=True, this checkpoint() is not necessary"
            )
        from ..autograd import backward

        backward([o for o, _ in pairs], [g for _, g in pairs])
        return (None, None) + tuple(
            inp.grad if isinstance(inp, Tensor) else None for inp in detached
        )


# ----- use_reentrant=False ----------------------------------------------------------------------


class _StopRecomputation(Exception):
    """Raised out of the recomputation once every needed tensor has been produced."""


class _Holder:
    """What the graph keeps in place of a saved tensor: its position in the forward's saves."""

    __slots__ = ("index", "__weakref__")

    def __init__(self, index: int) -> None:
        self.index = index


class _Frame:
    """One checkpointed call: how to recompute it, and what each backward pass recomputed."""

    def __init__(self, recompute: Callable[[], Any], early_stop: bool) -> None:
        self.recompute = recompute
        self.early_stop = early_stop
        self.holders: List[weakref.ReferenceType] = []
        self.metas: List[Tuple[Tuple[int, ...], Any]] = []
        # graph task id -> position -> recomputed tensor (dropped as backward reads them).
        self.recomputed: Dict[int, Dict[int, Tensor]] = {}

    def pack(self, t: Tensor) -> _Holder:
        holder = _Holder(len(self.holders))
        self.holders.append(weakref.ref(holder))
        self.metas.append((tuple(t.shape), t.dtype))
        return holder

    def unpack(self, holder: _Holder) -> Tensor:
        task = _C._current_graph_task_id()
        done = self.recomputed.get(task)
        if done is None:
            done = self.recomputed[task] = self._run_again()
            # Forget this pass's tensors when it ends, also those it never read.
            if task != -1:
                from ..autograd.graph import queue_callback

                # Weakly: the frame (and the inputs it saved) must die as soon as backward
                # has freed the nodes that use it, not when the whole pass ends.
                me = weakref.ref(self)
                queue_callback(lambda: (f := me()) is not None and f.recomputed.pop(task, None))
        if holder.index not in done:
            raise CheckpointError(
                "torch.utils.checkpoint: Unpack is being triggered for a tensor that was already "
                "unpacked once. If you are calling ctx.saved_tensors in backward, make sure to do "
                "so only once. Otherwise please open an issue with details on your use case."
            )
        return done.pop(holder.index)

    def _run_again(self) -> Dict[int, Tensor]:
        """Run the function again and keep, by position, each tensor it saves whose placeholder
        the graph still holds."""
        got: Dict[int, Tensor] = {}
        count = 0
        alive = sum(1 for h in self.holders if h() is not None)

        def keep(t: Tensor) -> None:
            nonlocal count
            i = count
            count += 1
            if i >= len(self.holders):
                raise CheckpointError(
                    "torch.utils.checkpoint: trying to save more tensors during recomputation "
                    "than during the original forward pass.\n" + _TIP
                )
            if self.holders[i]() is not None:
                got[i] = t.detach() if t.requires_grad else t
            if self.early_stop and len(got) == alive:
                raise _StopRecomputation
            return None

        try:
            with enable_grad(), saved_tensors_hooks(keep, _never_unpacked):
                self.recompute()
        except _StopRecomputation:
            pass
        else:
            if count != len(self.holders):
                raise CheckpointError(
                    "torch.utils.checkpoint: A different number of tensors was saved during the "
                    "original forward and recomputation.\n"
                    f"Number of tensors saved during forward: {len(self.holders)}\n"
                    f"Number of tensors saved during recomputation: {count}.\n" + _TIP
                )
        different = [
            f"tensor at position {i}:\n"
            f"saved metadata: {{'shape': {self.metas[i][0]}, 'dtype': {self.metas[i][1]}}}\n"
            f"recomputed metadata: {{'shape': {tuple(t.shape)}, 'dtype': {t.dtype}}}\n"
            for i, t in sorted(got.items())
            if (tuple(t.shape), t.dtype) != self.metas[i]
        ]
        if different:
            raise CheckpointError(
                "torch.utils.checkpoint: Recomputed values for the following tensors have "
                "different metadata than during the forward pass.\n"
                + "".join(different)
                + ".\n"
                + _TIP
            )
        return got


def _never_unpacked(_: Any) -> Tensor:
    raise CheckpointError("torch.utils.checkpoint: a recomputed graph was used for backward")


def _checkpoint_without_reentrant(
    function: Callable[..., Any],
    preserve_rng_state: bool,
    context_fn: Callable[[], Tuple[ContextManager[Any], ContextManager[Any]]],
    early_stop: bool,
    args: Tuple[Any, ...],
    kwargs: Dict[str, Any],
) -> Any:
    forward_ctx, recompute_ctx = context_fn()
    rng = _C._get_rng_state() if preserve_rng_state else None
    # The tensor inputs are saved as the graph saves tensors (not held by the closure), so in
    # a nested checkpoint they go through the outer checkpoint's hooks and are recomputed like
    # any other activation: nesting then keeps one boundary per level, not one per segment.
    positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
    saved_inputs = _C._save_tensors([args[i] for i in positions], [])
    others = [None if isinstance(a, Tensor) else a for a in args]

    def recompute() -> None:
        inputs = list(others)
        for i, t in zip(positions, saved_inputs.unpack()):
            inputs[i] = t
        with _rng_as(rng), recompute_ctx:
            function(*inputs, **kwargs)

    frame = _Frame(recompute, early_stop)
    with saved_tensors_hooks(frame.pack, frame.unpack), forward_ctx:
        return function(*args, **kwargs)


def checkpoint(
    function: Optional[Callable[..., Any]] = None,
    *args: Any,
    use_reentrant: Optional[bool] = None,
    preserve_rng_state: bool = True,
    context_fn: Callable[[], Tuple[ContextManager[Any], ContextManager[Any]]] = noop_context_fn,
    determinism_check: str = "default",
    debug: bool = False,
    early_stop: bool = True,
    respect_saved_tensors_hooks: Optional[bool] = None,
    **kwargs: Any,
) -> Any:
    """Run ``function(*args, **kwargs)`` without keeping its activations for backward; backward
    runs it again to get them. Gradients are the same as without checkpointing.

    Without ``function`` (and without positional arguments), returns a decorator with these
    settings."""
    if function is None and not args:
        if kwargs:
            raise ValueError("Unexpected keyword arguments: " + ",".join(arg for arg in kwargs))
        return functools.partial(
            _checkpoint_decorator,
            use_reentrant=use_reentrant,
            preserve_rng_state=preserve_rng_state,
            context_fn=context_fn,
            determinism_check=determinism_check,
            debug=debug,
            early_stop=early_stop,
            respect_saved_tensors_hooks=respect_saved_tensors_hooks,
        )
    if function is None:
        raise TypeError("checkpoint() missing the function to run")
    if use_reentrant is None:
        warnings.warn(
            "torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly. In "
            "a future release, calling checkpoint without use_reentrant will raise an exception. "
            "use_reentrant=False is recommended, but if you need to preserve the current default "
            "behavior, you can pass use_reentrant=True. Refer to docs for more details on the "
            "differences between the two variants.",
            stacklevel=2,
        )
        use_reentrant = True
    if kwargs and use_reentrant:
        raise ValueError("Unexpected keyword arguments: " + ",".join(arg for arg in kwargs))
    if determinism_check not in ("default", "none"):
        raise ValueError(
            f"determinism_check should be one of ['default', 'none'], but got {determinism_check}"
        )
    if use_reentrant:
        if (
            context_fn is not noop_context_fn
            or debug is not False
            or respect_saved_tensors_hooks is not None
        ):
            raise ValueError(
                "Passing `context_fn`, `debug`, or `respect_saved_tensors_hooks` is only "
                "supported when use_reentrant=False."
            )
        return CheckpointFunction.apply(function, preserve_rng_state, *args)
    stop = early_stop if _early_stop is None else _early_stop
    return _checkpoint_without_reentrant(
        function, preserve_rng_state, context_fn, stop, args, kwargs
    )


def _checkpoint_decorator(function: Callable[..., Any], **settings: Any) -> Callable[..., Any]:
    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return checkpoint(function, *args, **settings, **kwargs)

    return wrapper


def checkpoint_sequential(
    functions: Any, segments: int, input: Any, use_reentrant: Optional[bool] = None, **kwargs: Any
) -> Any:
    """Run a sequence of functions (or an ``nn.Sequential``) in ``segments`` checkpointed
    chunks; the last chunk runs normally, since backward needs its outputs at once."""
    if use_reentrant is None:
        warnings.warn(
            "torch.utils.checkpoint.checkpoint_sequential: the use_reentrant parameter should be "
            "passed explicitly. In a future release, we will raise an exception if use_reentrant "
            "is not passed. use_reentrant=False is recommended, but if you need to preserve the "
            "current default behavior, you can pass use_reentrant=True. Refer to docs for more "
            "details on the differences between the two variants.",
            stacklevel=2,
        )
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(arg for arg in kwargs))
    from ..nn import Sequential

    if isinstance(functions, Sequential):
        functions = list(functions.children())
    functions = list(functions)

    def run(start: int, end: int) -> Callable[[Any], Any]:
        def forward(x: Any) -> Any:
            for j in range(start, end + 1):
                x = functions[j](x)
            return x

        return forward

    segment_size = len(functions) // segments
    end = -1
    for start in range(0, segment_size * (segments - 1), segment_size):
        end = start + segment_size - 1
        input = checkpoint(
            run(start, end), input, use_reentrant=use_reentrant, preserve_rng_state=preserve
        )
    return run(end + 1, len(functions) - 1)(input)
