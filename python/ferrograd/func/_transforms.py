"""The reverse-mode function transforms: ``grad``, ``grad_and_value``, ``vjp``, ``jacrev`` and
``hessian``, with ``torch.func``'s signatures, results and error messages.

How a transform runs on our engine
----------------------------------
torch.func wraps every tensor in a per-transform "level"; we have one autograd graph, so a
transform marks its own inputs instead. Each tensor it differentiates with respect to becomes
an *own input*:

- a fresh leaf ``x.detach().requires_grad_()`` (sharing ``x``'s storage) when nothing outside
  could differentiate through ``x``, i.e. ``x`` does not require grad or grad mode was off when
  the transform was called (``vjp`` ignores the grad mode here: its ``vjp_fn`` may run later
  with grad mode on, and torch's then differentiates through the primals);
- otherwise a view ``x.view_as(x)``, so the function's graph stays connected to ``x``'s and an
  enclosing ``grad``, ``.backward()`` or ``autograd.grad`` can differentiate the result.

``func`` then runs with grad mode on and inference mode off (the transform ignores an outer
``no_grad`` or ``inference_mode`` but obeys one inside ``func``), and the engine's
``autograd.grad`` differentiates its output with respect to the own inputs.

When a result requires grad (the rule)
--------------------------------------
A result is *externally differentiable* when grad mode was on where the transform was called
and its graph reaches a leaf that requires grad and is not one of the transform's own fresh
leaves: an input that required grad (through its view), a tensor the function closes over, or
the own input of an enclosing transform (which is how ``grad(grad(f))`` and
``jacrev(jacrev(f))`` compose). Only then does the backward pass record a graph
(``create_graph=True``), and only externally differentiable results (gradients, values, aux,
Jacobians) are returned attached; all others are detached, so ``.requires_grad`` is what
torch.func reports. The check is one walk of the output's graph that stops at the first such
leaf and remembers the nodes it cleared, so it costs at most one visit per graph node.
``vjp_fn`` records a graph when ``create_graph`` (default: grad mode at its call) is set and
either the output reaches such a leaf (whatever the grad mode was at the ``vjp`` call) or a
cotangent requires grad.

``jacrev`` and ``hessian``
-------------------------
``jacrev`` computes the rows of each output's Jacobian in one engine pass per ``chunk_size``
rows (all of them by default): the one-hot cotangents are batched (``vmap`` over the
vector-Jacobian product, as torch does), so each node of the graph runs its backward once on
the batch through its batching rules. Where some op of the graph has no batching rule yet, it
falls back to one pass per row (``autograd.grad(outputs, inputs, one_hot_row,
retain_graph=True)``). ``hessian`` is ``jacrev(jacrev(f))`` (torch's ``jacfwd(jacrev(f))``
works too: own inputs and released results keep forward-mode tangents, and tangents stay
differentiable by reverse mode, but its column loop reruns the forward pass).
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Set, Tuple, Union

from .. import _C
from .._creation import eye
from .._ops_shape import cat, stack
from ..autograd import grad as _autograd_grad_api
from ..utils._pytree import tree_flatten, tree_map, tree_unflatten, treespec_pprint
from ._vmap import try_batched

__all__ = ["grad", "grad_and_value", "vjp", "jacrev", "hessian"]

Tensor = _C.Tensor
argnums_t = Union[int, Tuple[int, ...]]


@contextlib.contextmanager
def _modes(grad: Optional[bool]) -> Iterator[None]:
    """Inference mode off and grad mode ``grad`` (None: as it is) inside; both restored after.
    A transform's graph must be recorded even under an outer ``inference_mode``."""
    prev = (_C.is_inference_mode_enabled(), _C.is_grad_enabled())
    _C._set_inference_mode(False)
    _C._set_grad_enabled(prev[1] if grad is None else grad)
    try:
        yield
    finally:
        _C._set_inference_mode(prev[0])
        _C._set_grad_enabled(prev[1])


# ----------------------------------------------------------------------------------------------
# argnums (torch's checks and messages)


def _validate_and_wrap_argnum(argnum: Any, num_args: int) -> int:
    if not isinstance(argnum, int):
        raise RuntimeError(f"argnum must be int, got: {type(argnum)}")
    if 0 <= argnum < num_args:
        return argnum
    if -num_args <= argnum < 0:
        return argnum + num_args
    raise RuntimeError(f"Got argnum={argnum}, but only {num_args} positional inputs")


def _slice_argnums(args: Tuple[Any, ...], argnums: Any, as_tuple: bool = True) -> Any:
    """The arguments ``argnums`` selects: a tuple (``args[i]`` alone for an int argnums when
    ``as_tuple`` is False)."""
    if not isinstance(argnums, (int, tuple)):
        raise RuntimeError(f"argnums must be int or Tuple[int, ...], got: {type(argnums)}")
    if isinstance(argnums, int):
        i = _validate_and_wrap_argnum(argnums, len(args))
        return (args[i],) if as_tuple else args[i]
    wrapped = tuple(_validate_and_wrap_argnum(a, len(args)) for a in argnums)
    if len(wrapped) == 0:
        raise RuntimeError("argnums must be non-empty")
    if len(set(wrapped)) != len(wrapped):
        raise RuntimeError(f"argnums elements must be unique, got {wrapped}")
    return tuple(args[i] for i in wrapped)


def _replace_argnums(args: Tuple[Any, ...], argnums: Any, new: Any) -> Tuple[Any, ...]:
    """``args`` with the selected arguments replaced by ``new`` (one value for an int
    argnums, a tuple for a tuple). ``argnums`` has been validated by ``_slice_argnums``."""
    n = len(args)
    out = list(args)
    if isinstance(argnums, int):
        out[argnums % n] = new
    else:
        for a, value in zip(argnums, new):
            out[a % n] = value
    return tuple(out)


# ----------------------------------------------------------------------------------------------
# one application of a transform: own inputs and the "externally differentiable" walk


# Own leaves made while a forward transform (jacfwd) runs, so that it can tell them from the
# caller's leaves when deciding whether its result stays attached (None: no collector active).
_collected: Optional[List[Any]] = None


def _collect_own_leaves() -> Optional[List[Any]]:
    """Start collecting own leaves; returns what to hand back to ``_stop_collecting``."""
    global _collected
    outer, _collected = _collected, []
    return outer


def _stop_collecting(outer: Optional[List[Any]]) -> List[Tensor]:
    """The own leaves made since the matching ``_collect_own_leaves``. Held strongly: a leaf's
    Python object must outlive the caller's graph walk, or the walk meets a new object (with
    another id) for the same tensor."""
    global _collected
    mine = _collected or []
    _collected = outer
    if outer is not None:
        outer.extend(mine)
    return mine


def _reaches_leaf_outside(t: Tensor, inner: Set[int]) -> bool:
    """Whether ``t``'s graph reaches a leaf that requires grad and is not in ``inner``."""
    if not t.requires_grad:
        return False
    root = t.grad_fn
    if root is None:
        return id(t) not in inner
    stack, seen = [root], {root}
    while stack:
        node = stack.pop()
        var = node.variable
        if var is not None and id(var) not in inner:
            return True
        for nxt, _ in node.next_functions:
            if nxt is not None and nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return False


def _tangent(t: Tensor) -> Optional[Tensor]:
    """``t``'s forward-mode tangent, if a dual level is open and it has one."""
    if _C._current_dual_level() is None:
        return None
    return _C._unpack_dual(t)[1]


def _detach(t: Tensor) -> Tensor:
    """``t.detach()``, keeping a forward-mode tangent (a forward transform around this one reads
    it)."""
    tangent = _tangent(t)
    return t.detach() if tangent is None else _C._make_dual(t.detach(), tangent)


# How many reverse transform calls have started (jacfwd runs its batched pass only over
# functions that start none: reverse mode over batched tangents is not batched yet).
LEVELS_STARTED = [0]


def _batched_at_open_level(x: Tensor) -> Tensor:
    """Inside ``vmap``, an own input that is the same for every sample (an unbatched
    parameter) is made batched (expanded, no copy): the gradient with respect to it is then one
    per sample, as ``vmap(grad(f))`` gives, where the engine would otherwise sum the samples'
    gradients into the one tensor."""
    info = _C._current_vmap_level()
    if info is None:
        return x
    level, size, _ = info
    if _C.is_batchedtensor(x) and _C._batch_info(x)[0] == level:
        return x
    return _C._add_batch_dim(x.unsqueeze(0).expand(size, *x.shape), 0, level)


class _Level:
    """The state of one transform call: whether grad mode was on outside, the fresh leaves it
    made, and the graph nodes already known not to reach any other leaf that requires grad."""

    __slots__ = ("outer_enabled", "connect", "own", "clean", "views")

    def __init__(self, always_connect: bool = False) -> None:
        LEVELS_STARTED[0] += 1
        self.outer_enabled: bool = _C.is_grad_enabled()
        # vjp connects inputs that require grad even under no_grad: its vjp_fn may run later
        # with grad mode on, and torch's then differentiates through the primals.
        self.connect = self.outer_enabled or always_connect
        self.own: Set[int] = set()
        self.clean: Set[Any] = set()
        self.views: List[Tuple[Tensor, int]] = []

    def input(self, x: Any) -> Tensor:
        """The own input standing for ``x`` (see the module docstring)."""
        if not isinstance(x, Tensor):
            raise ValueError(f"Thing passed to transform API must be Tensor, got {type(x)}")
        if self.connect and x.requires_grad:
            view = _batched_at_open_level(x.view_as(x))
            self.views.append((view, view._version))
            return view
        leaf = _batched_at_open_level(x.detach()).requires_grad_()
        self.own.add(id(leaf))
        if _collected is not None:
            _collected.append(leaf)
        # Under a forward transform (jacfwd of this one) the input carries a tangent, which the
        # own input must carry on.
        tangent = _tangent(x)
        return leaf if tangent is None else _C._make_dual(leaf, tangent)

    def check_inplace(self) -> None:
        """torch's error when ``func`` modified a connected input in place (torch's inputs are
        leaves of their level, ours are views: the op itself raises only for a view of a leaf,
        and only after the op has run is a view of a non-leaf seen modified)."""
        for view, version in self.views:
            if view._version != version:
                raise RuntimeError(
                    "a leaf Variable that requires grad is being used in an in-place operation."
                )

    def outside(self, t: Tensor) -> bool:
        """Whether ``t`` is externally differentiable: grad mode was on outside and ``t``
        reaches another leaf (``reaches_other_leaf``)."""
        return self.outer_enabled and self.reaches_other_leaf(t)

    def reaches_other_leaf(self, t: Tensor) -> bool:
        """Whether ``t``'s graph reaches a leaf that requires grad and is not one of ours."""
        if not t.requires_grad:
            return False
        root = t.grad_fn
        if root is None:
            return id(t) not in self.own
        stack = [root]
        seen = {root}
        while stack:
            node = stack.pop()
            if node in self.clean:
                continue
            var = node.variable
            if var is not None and id(var) not in self.own:
                return True
            for nxt, _ in node.next_functions:
                if nxt is not None and nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        self.clean |= seen
        return False

    def release(self, t: Tensor, enabled: Optional[bool] = None) -> Tensor:
        """``t`` as the transform returns it: attached only when externally differentiable
        (``enabled`` replaces the grad mode seen at the transform's call)."""
        if enabled is None:
            enabled = self.outer_enabled
        if t.requires_grad and not (enabled and self.reaches_other_leaf(t)):
            return _detach(t)
        return t

    def release_aux(self, aux: Any) -> Any:
        """The aux output, every leaf released; a leaf that is not a tensor is torch's error."""

        def one(x: Any) -> Any:
            if isinstance(x, Tensor):
                return self.release(x)
            raise RuntimeError(f"Expected tensors, got unsupported type {type(x)}")

        return tree_map(one, aux)


def _split_aux(output: Any, has_aux: bool, api: str) -> Tuple[Any, Any]:
    """``(output, aux)`` of a function's result (aux None without ``has_aux``); torch's error
    when ``has_aux`` is set and the result is not a pair."""
    if not has_aux:
        return output, None
    if not (isinstance(output, tuple) and len(output) == 2):
        raise RuntimeError(
            f"{api}: output of function f should be a tuple: (output, aux) if has_aux is True"
        )
    return output


def _engine_grad(
    outputs: Sequence[Tensor],
    inputs: Sequence[Tensor],
    grad_outputs: Optional[Sequence[Tensor]],
    retain_graph: bool,
    create_graph: bool,
) -> Tuple[Tensor, ...]:
    """``autograd.grad`` over the outputs that require grad, zeros for unused inputs (torch's
    ``_autograd_grad``)."""
    pairs: List[Tuple[Tensor, Any]]
    if grad_outputs is None:
        pairs = [(o, None) for o in outputs if o.requires_grad]
    else:
        pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if o.requires_grad]
    if not pairs or not inputs:
        return tuple(i.new_zeros(i.shape) for i in inputs)
    outs = [o for o, _ in pairs]
    gos: Any = None if grad_outputs is None else [g for _, g in pairs]
    for i, (o, g) in enumerate(pairs):
        # torch's wording (the engine's own message prints bare lists)
        if isinstance(g, Tensor) and g.shape != o.shape:
            raise RuntimeError(
                f"Mismatch in shape: grad_output[{i}] has a shape of {g.shape!r} and "
                f"output[{i}] has a shape of {o.shape!r}."
            )
    grads = _autograd_grad_api(
        outs,
        list(inputs),
        gos,
        retain_graph=retain_graph,
        create_graph=create_graph,
        allow_unused=True,
    )
    return tuple(i.new_zeros(i.shape) if g is None else g for g, i in zip(grads, inputs))


# ----------------------------------------------------------------------------------------------
# grad and grad_and_value


def _grad_and_value_impl(
    func: Callable[..., Any],
    argnums: argnums_t,
    has_aux: bool,
    args: Tuple[Any, ...],
    kwargs: Dict[str, Any],
) -> Tuple[Any, Any]:
    level = _Level()
    with _modes(grad=True):
        diff_args = _slice_argnums(args, argnums, as_tuple=False)
        diff_args = tree_map(level.input, diff_args)
        args = _replace_argnums(args, argnums, diff_args)
        output, aux = _split_aux(func(*args, **kwargs), has_aux, "grad_and_value(f)(*args)")
        level.check_inplace()
        if not isinstance(output, Tensor):
            raise RuntimeError(
                "grad_and_value(f)(*args): Expected f(*args) to return a Tensor, got "
                f"{type(output)}"
            )
        if output.dim() != 0:
            raise RuntimeError(
                "grad_and_value(f)(*args): Expected f(*args) to return a scalar Tensor, got "
                f"tensor with {output.dim()} dims. Maybe you wanted to use the vjp or jacrev "
                "APIs instead?"
            )
        flat_diff, spec = tree_flatten(diff_args)
        connected = level.outside(output)
        flat_grads = _engine_grad([output], flat_diff, None, True, connected)
        if connected:
            flat_grads = tuple(level.release(g) for g in flat_grads)
        grads = tree_unflatten(flat_grads, spec)
        value = output if connected else _detach(output)
        if has_aux:
            aux = level.release_aux(aux)
    if has_aux:
        return grads, (value, aux)
    return grads, value


def grad_and_value(
    func: Callable[..., Any], argnums: argnums_t = 0, has_aux: bool = False
) -> Callable[..., Any]:
    """A function that returns ``(gradient, value)`` of ``func``: the gradient with respect to
    the argument(s) ``argnums`` (the structure of that argument: a dict of tensors gets a dict
    of gradients; a tuple ``argnums`` gets a tuple), and ``func``'s own output. With
    ``has_aux`` ``func`` returns ``(output, aux)`` and the result is ``(grad, (value, aux))``.

    ``func`` must return a scalar tensor (RuntimeError otherwise, as torch.func); the
    transform ignores an outer ``no_grad``. See the module docstring for when the results
    require grad.
    """

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Tuple[Any, Any]:
        return _grad_and_value_impl(func, argnums, has_aux, args, kwargs)

    return wrapper


def grad(
    func: Callable[..., Any], argnums: argnums_t = 0, has_aux: bool = False
) -> Callable[..., Any]:
    """A function that returns the gradient of ``func`` with respect to the argument(s)
    ``argnums`` (``(grad, aux)`` with ``has_aux``); ``grad_and_value`` without the value.
    Nests: ``grad(grad(f))`` is the second derivative."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        grads, value = _grad_and_value_impl(func, argnums, has_aux, args, kwargs)
        if has_aux:
            return grads, value[1]
        return grads

    return wrapper


# ----------------------------------------------------------------------------------------------
# vjp


class _VjpState:
    """What a vjp keeps for its ``vjp_fn``: the flat outputs, the own inputs, the level."""

    __slots__ = ("level", "flat_out", "out_spec", "flat_in", "in_spec", "connected")

    def __init__(
        self,
        level: _Level,
        flat_out: List[Tensor],
        out_spec: Any,
        flat_in: List[Tensor],
        in_spec: Any,
    ) -> None:
        self.level = level
        self.flat_out = flat_out
        self.out_spec = out_spec
        self.flat_in = flat_in
        self.in_spec = in_spec
        self.connected = any(level.reaches_other_leaf(o) for o in flat_out)


def _vjp_trace(
    func: Callable[..., Any], primals: Tuple[Any, ...], argnums: Optional[argnums_t], has_aux: bool
) -> Tuple[Any, _VjpState, Any]:
    """Run ``func`` on own inputs for the primals ``argnums`` selects (all when None); the
    released output, the state for the vjp, and the released aux. Messages are vjp's."""
    level = _Level(always_connect=argnums is None)
    with _modes(grad=True):
        if argnums is None:
            diff = tree_map(level.input, primals)
            args = diff
        else:
            selected = _slice_argnums(primals, argnums, as_tuple=False)
            selected = tree_map(level.input, selected)
            args = _replace_argnums(primals, argnums, selected)
            diff = (selected,) if isinstance(argnums, int) else selected
        out, aux = _split_aux(func(*args), has_aux, "vjp(f, *primals)")
        level.check_inplace()
        if has_aux:
            aux = level.release_aux(aux)
        flat_out, out_spec = tree_flatten(out)
        if (len(flat_out) == 1 and flat_out[0] is None) or len(flat_out) < 1:
            raise RuntimeError(
                "vjp(f, *primals): Expected f to be a function that has non-empty output "
                f"(got output = {flat_out})"
            )
        for o in flat_out:
            if not isinstance(o, Tensor):
                raise RuntimeError(
                    "vjp(f, *primals): expected f(*primals) to return only tensors, got "
                    f"unsupported type {type(o)}"
                )
        for o in flat_out:
            if not o.is_floating_point():
                raise RuntimeError(
                    "vjp(f, ...): All outputs of f must be floating-point or complex Tensors, "
                    f"got Tensor with dtype {o.dtype}"
                )
        flat_in, in_spec = tree_flatten(diff)
        state = _VjpState(level, flat_out, out_spec, flat_in, in_spec)
        released = tree_unflatten([level.release(o) for o in flat_out], out_spec)
    return released, state, aux


def _vjp_apply(
    state: _VjpState, cotangents: Any, retain_graph: bool, create_graph: Optional[bool]
) -> Any:
    if create_graph is None:
        create_graph = _C.is_grad_enabled()
    flat_cot, cot_spec = tree_flatten(cotangents)
    if cot_spec != state.out_spec:
        raise RuntimeError(
            "Expected pytree structure of cotangents to be the same as pytree structure of "
            f"outputs to the function. cotangents: {treespec_pprint(cot_spec)}, primal output: "
            f"{treespec_pprint(state.out_spec)}"
        )
    record = bool(create_graph) and (
        state.connected or any(isinstance(c, Tensor) and c.requires_grad for c in flat_cot)
    )
    with _modes(grad=None):
        flat = _engine_grad(state.flat_out, state.flat_in, flat_cot, retain_graph, record)
    if record:
        flat = tuple(state.level.release(g, enabled=True) for g in flat)
    return tree_unflatten(flat, state.in_spec)


def vjp(func: Callable[..., Any], *primals: Any, has_aux: bool = False) -> Any:
    """``(func(*primals), vjp_fn)``; ``vjp_fn(cotangents, retain_graph=True,
    create_graph=None)`` returns the vector-Jacobian products, a tuple with one entry per
    primal (each of that primal's structure). ``cotangents`` must have the output's pytree
    structure and shapes; ``vjp_fn`` can be called more than once. With ``has_aux`` ``func``
    returns ``(output, aux)`` and the result is ``(output, vjp_fn, aux)``.
    """
    out, state, aux = _vjp_trace(func, primals, None, has_aux)

    def vjp_fn(
        cotangents: Any, retain_graph: bool = True, create_graph: Optional[bool] = None
    ) -> Any:
        return _vjp_apply(state, cotangents, retain_graph, create_graph)

    if has_aux:
        return out, vjp_fn, aux
    return out, vjp_fn


# ----------------------------------------------------------------------------------------------
# jacrev and hessian


def _batched_rows(
    outs: Sequence[Tensor],
    inputs: Sequence[Tensor],
    k: int,
    basis: Any,
    record: bool,
    chunk_size: Optional[int],
) -> Optional[List[Tensor]]:
    """The Jacobian rows of output ``k`` (``basis``: the one-hot cotangents, stacked) as one
    engine pass per ``chunk_size`` rows with the cotangents batched (``vmap`` over the
    vector-Jacobian product, as torch's jacrev). Per input, the rows stacked; None when some op
    of the graph has no batching rule yet (the caller then runs one pass per row)."""
    n = basis.shape[0]
    step = n if chunk_size is None else chunk_size
    parts: List[List[Tensor]] = []
    for start in range(0, n, step):
        size = min(step, n - start)

        def rows(level: int, start: int = start, size: int = size) -> List[Tensor]:
            cots = [
                _C._add_batch_dim(basis.narrow(0, start, size), 0, level)
                if j == k
                else o.new_zeros(o.shape)
                for j, o in enumerate(outs)
            ]
            grads = _engine_grad(outs, inputs, cots, True, record)
            return [_C._remove_batch_dim(g, level, size, 0) for g in grads]

        part = try_batched(size, "error", rows)
        if part is None:
            return None
        parts.append(part)
    if len(parts) == 1:
        return parts[0]
    return [cat([p[j] for p in parts], 0) for j in range(len(inputs))]


def _jacobian_rows(state: _VjpState, chunk_size: Optional[int] = None) -> List[List[Tensor]]:
    """``jac[k][j]``: the Jacobian of flat output k with respect to flat input j, shaped
    ``out_k.shape + in_j.shape``.

    Row r of the stacked outputs is one engine pass over all outputs that require grad, with
    the one-hot cotangent on its own output and zeros on the others: torch's single batched
    pass gives each row that same graph, so a row requires grad exactly when torch's does."""
    level = state.level
    outs = state.flat_out
    live = [k for k, o in enumerate(outs) if o.requires_grad]
    if not live:
        return [[i.new_zeros(tuple(o.shape) + tuple(i.shape)) for i in state.flat_in] for o in outs]
    live_outs = [outs[k] for k in live]
    record = level.outer_enabled and any(level.reaches_other_leaf(o) for o in live_outs)
    zeros = {k: outs[k].new_zeros(outs[k].shape) for k in live}
    zero_row: Optional[Tuple[Tensor, ...]] = None
    jac: List[List[Tensor]] = []
    for k, out in enumerate(outs):
        out_shape = tuple(out.shape)
        n = out.numel()
        rows: List[Sequence[Tensor]] = []
        stacked: Optional[List[Tensor]] = None  # per input, the rows already stacked
        if k in zeros:
            basis = eye(n, dtype=out.dtype).reshape((n,) + out_shape) if n else None
            if n:
                stacked = _batched_rows(
                    live_outs, state.flat_in, live.index(k), basis, record, chunk_size
                )
            if stacked is None:
                for r in range(n):
                    cots = [basis[r] if j == k else zeros[j] for j in live]  # type: ignore[index]
                    rows.append(_engine_grad(live_outs, state.flat_in, cots, True, record))
        elif n:
            if zero_row is None:
                cots = [zeros[j] for j in live]
                zero_row = _engine_grad(live_outs, state.flat_in, cots, True, record)
            rows = [zero_row] * n
        per_input = []
        for j, inp in enumerate(state.flat_in):
            shape = out_shape + tuple(inp.shape)
            if not n:
                per_input.append(inp.new_zeros(shape))
                continue
            rows_j = stacked[j] if stacked is not None else stack([row[j] for row in rows])
            block = rows_j.reshape(shape)
            per_input.append(level.release(block) if record else block)
        jac.append(per_input)
    return jac


def jacrev(
    func: Callable[..., Any],
    argnums: argnums_t = 0,
    *,
    has_aux: bool = False,
    chunk_size: Optional[int] = None,
    _preallocate_and_copy: bool = False,
) -> Callable[..., Any]:
    """A function that returns the Jacobian of ``func`` with respect to the argument(s)
    ``argnums`` by reverse mode: for every output (pytree structure kept), a tensor of shape
    ``output.shape + input.shape`` per differentiated input (a tuple of them for a tuple
    ``argnums``, the input's structure for a pytree input). With ``has_aux`` the result is
    ``(jacobian, aux)``. ``chunk_size`` must be None or positive (ValueError); it does not
    change the computation (one engine pass per output element, see the module docstring).
    """
    if not (chunk_size is None or chunk_size > 0):
        raise ValueError("jacrev: `chunk_size` should be greater than 0.")

    @functools.wraps(func)
    def wrapper(*args: Any) -> Any:
        _, state, aux = _vjp_trace(func, args, argnums, has_aux)
        with _modes(grad=None):
            jac = _jacobian_rows(state, chunk_size)
        per_output = []
        for per_input in jac:
            value = tree_unflatten(per_input, state.in_spec)
            per_output.append(value[0] if isinstance(argnums, int) else value)
        result = tree_unflatten(per_output, state.out_spec)
        if has_aux:
            return result, aux
        return result

    return wrapper


def hessian(func: Callable[..., Any], argnums: argnums_t = 0) -> Callable[..., Any]:
    """A function that returns the Hessian of ``func`` with respect to the argument(s)
    ``argnums``: ``jacrev(jacrev(func, argnums), argnums)``. torch composes
    ``jacfwd(jacrev(...))``, which works here too and gives the same values; without vmap its
    column loop reruns the forward pass per input element (about 10x slower on 256 inputs),
    while reverse over reverse runs it once."""
    return jacrev(jacrev(func, argnums), argnums)
