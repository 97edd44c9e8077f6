"""``torch.autograd.graph``: the backward graph's nodes and edges, node and multi-tensor hooks,
saved-tensor hooks, and callbacks at the end of backward.

The graph lives in the Rust crate (``crate::graph``); this module gives it torch's Python names.
One difference from torch, on purpose: a tensor that went through ``saved_tensors_hooks`` is
still checked for in-place changes when backward reads it (torch skips the check there and
computes with whatever ``unpack_hook`` returns); ``allow_mutation_on_saved_tensors`` is the way
to modify saved tensors, and backward then reads their values as saved.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable, Dict, Iterable, Iterator, List, NamedTuple, Optional, Sequence

from .. import _C
from .._C import Tensor
from .._tensor import Node, _wrap_node

__all__ = [
    "saved_tensors_hooks",
    "save_on_cpu",
    "disable_saved_tensors_hooks",
    "node_creation_hook",
    "register_multi_grad_hook",
    "Node",
    "GradientEdge",
    "get_gradient_edge",
    "increment_version",
    "queue_callback",
    "region_activation_memory_budget",
    "allow_mutation_on_saved_tensors",
    "set_warn_on_accumulate_grad_stream_mismatch",
    "set_override_stale_capture_stream",
]


class GradientEdge(NamedTuple):
    """A place in the graph: the gradient flowing into output ``output_nr`` of ``node``.
    ``autograd.grad`` and ``backward`` take one wherever they take a tensor."""

    node: Node
    output_nr: int
    ownership_token: Optional[Node] = None


def get_gradient_edge(tensor: Tensor) -> GradientEdge:
    """The edge ``tensor``'s gradient flows through: ``autograd.grad(loss, input)`` and
    ``autograd.grad(loss, get_gradient_edge(input))`` are the same, and the edge still stands
    for the value after ``input`` is modified in place."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"get_gradient_edge(): expected a Tensor, got {type(tensor).__name__}")
    node, nr = _C._gradient_edge(tensor)
    return GradientEdge(_wrap_node(node), nr)


def _edge_arg(edge: GradientEdge) -> tuple:
    """What ``_C._grad`` takes for an edge."""
    return (edge.node._node, edge.output_nr)


def increment_version(tensor: Any) -> None:
    """Record that ``tensor`` (or each tensor of an iterable) was modified in place by code
    ferrograd did not see, so that backward through a graph that saved it raises."""
    tensors = (tensor,) if isinstance(tensor, Tensor) else tuple(tensor)
    for t in tensors:
        _C._increment_version(t)


def queue_callback(callback: Callable[[], None]) -> None:
    """Run ``callback()`` once the backward pass running now (on this thread) completes
    successfully; call it from a backward hook or ``Function.backward``."""
    _C._queue_callback(callback)


class saved_tensors_hooks:
    """Within this context, every tensor an op saves for backward goes through
    ``pack_hook(tensor) -> object``, and backward gets it back from ``unpack_hook(object) ->
    Tensor``. The innermost context wins; hooks are per thread (backward's worker threads use
    the hooks of the thread that called backward)."""

    def __init__(
        self, pack_hook: Callable[[Tensor], Any], unpack_hook: Callable[[Any], Tensor]
    ) -> None:
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    def __enter__(self) -> None:
        _C._push_saved_tensors_hooks(self.pack_hook, self.unpack_hook)

    def __exit__(self, *args: object) -> None:
        _C._pop_saved_tensors_hooks()


class save_on_cpu(saved_tensors_hooks):
    """Keep saved tensors on the CPU until backward. Every ferrograd tensor already lives on the
    CPU, so tensors are kept as they are (torch copies nothing for CPU tensors either);
    ``pin_memory`` and ``device_type`` are accepted for torch's signature."""

    def __init__(self, pin_memory: bool = False, device_type: str = "cuda") -> None:
        super().__init__(lambda t: t, lambda t: t)


@contextlib.contextmanager
def disable_saved_tensors_hooks(error_message: str) -> Iterator[None]:
    """Within this context, entering ``saved_tensors_hooks`` raises ``RuntimeError(error_message)``
    (for code whose correctness depends on tensors being saved as they are)."""
    previous = _C._set_saved_tensors_hooks_disabled(error_message)
    try:
        yield
    finally:
        _C._set_saved_tensors_hooks_disabled(previous)


class node_creation_hook:
    """Within this context, ``hook(node)`` is called for every graph node created on this
    thread (and on backward's worker threads for this thread's passes), once the node is
    complete. Nested hooks all run, outermost first; a hook must not create nodes itself."""

    def __init__(self, hook: Callable[[Node], None]) -> None:
        self.hook = hook

    def __enter__(self) -> None:
        _C._push_node_creation_hook(self.hook)

    def __exit__(self, *args: object) -> None:
        _C._pop_node_creation_hook()


class _MultiHandle:
    """Removes every hook of a ``register_multi_grad_hook``."""

    __slots__ = ("handles",)

    def __init__(self, handles: tuple) -> None:
        self.handles = handles

    def remove(self) -> None:
        for h in self.handles:
            h.remove()

    def __enter__(self) -> _MultiHandle:
        return self

    def __exit__(self, *args: object) -> None:
        self.remove()


def _grad_fn_or_acc(t: Tensor) -> Any:
    node, _ = _C._gradient_edge(t)
    return node


def register_multi_grad_hook(
    tensors: Sequence[Tensor], fn: Callable[..., None], *, mode: str = "all"
) -> _MultiHandle:
    """Call ``fn`` once per backward pass for a group of tensors.

    ``mode="all"``: once the gradients of every tensor of the group that this pass computes are
    ready, with a list of them (``None`` for tensors the pass does not reach). ``mode="any"``:
    with the first gradient of the group that the pass computes."""
    supported_modes = ("all", "any")
    if mode not in supported_modes:
        raise ValueError(f"Expects mode to be one of {supported_modes} but got {mode}")
    lock = threading.Lock()
    if mode == "all":
        count: Dict[int, int] = {}
        expected: Dict[int, int] = {}
        buffer: Dict[int, List[Optional[Tensor]]] = {}
        nodes = [_grad_fn_or_acc(t) for t in tensors]
        n = len(tensors)

        def inner_hook(idx: int) -> Callable[[Tensor], None]:
            def hook(grad: Tensor) -> None:
                task = _C._current_graph_task_id()
                if task == -1:
                    raise AssertionError("expected this hook to be called inside a backward call")
                with lock:
                    seen = count.get(task, 0)
                    count[task] = seen + 1
                    if seen == 0:
                        expected[task] = sum(map(_C._will_engine_execute_node, nodes))
                        buffer[task] = [None] * n
                    buffer[task][idx] = grad
                    done = seen + 1 == expected[task]
                    grads = buffer.pop(task) if done else None
                    if done:
                        del count[task], expected[task]
                if grads is not None:
                    fn(grads)

            return hook

        handles = tuple(t.register_hook(inner_hook(i)) for i, t in enumerate(tensors))
    else:
        ran: Dict[int, bool] = {}

        def any_hook(grad: Tensor) -> None:
            task = _C._current_graph_task_id()
            if task == -1:
                raise AssertionError("expected this hook to be called inside a backward call")
            with lock:
                first = not ran.get(task, False)
                ran[task] = True
            if first:
                # Forget the pass once it is over, so the dict does not grow with every pass.
                queue_callback(lambda: ran.pop(task, None))
                fn(grad)

        handles = tuple(t.register_hook(any_hook) for t in tensors if t.requires_grad)
    return _MultiHandle(handles)


@contextlib.contextmanager
def allow_mutation_on_saved_tensors() -> Iterator[Any]:
    """Context manager under which tensors saved for backward may be modified in place: the
    first in-place write to a saved tensor copies it first, and backward uses the copy (the
    values as they were saved). Run forward and backward inside the same context; contexts
    cannot be nested. Yields the context object (torch's is for debugging too)."""
    ctx = _C._allow_mutation_on_saved_tensors()
    try:
        yield ctx
    finally:
        ctx.close()


@contextlib.contextmanager
def region_activation_memory_budget(budget: float) -> Iterator[None]:
    """torch's memory budget for regions of a ``torch.compile``d forward. ferrograd runs every
    program eagerly, as torch does outside ``torch.compile``, so the budget has nothing to act
    on; the value is checked as torch checks it."""
    if not 0.0 <= float(budget) <= 1.0:
        raise ValueError(f"budget must be in [0, 1], got {budget}")
    yield


def set_warn_on_accumulate_grad_stream_mismatch(enabled: bool) -> None:
    """A CUDA stream setting; ferrograd runs on the CPU, which has no streams."""


def set_override_stale_capture_stream(enabled: bool) -> None:
    """A CUDA graph-capture setting; ferrograd runs on the CPU, which has no streams."""


def _edges_of(items: Iterable[Any]) -> List[Any]:
    """Tensors as they are, ``GradientEdge``s as ``_C._grad`` takes them."""
    return [_edge_arg(x) if isinstance(x, GradientEdge) else x for x in items]
