"""The forward-mode transforms: ``jvp``, ``jacfwd`` and ``linearize``, on
``autograd.forward_ad`` (tangents computed by the crate as the function runs).

``jacfwd`` runs the function once per input with its tangents batched over the basis (all
columns of the Jacobian in one forward pass; one pass per column where an op has no batching
rule yet); ``linearize``'s ``jvp_fn`` runs it again per call. Forward mode has one dual
level at a time: a forward transform nested in another (``jacfwd(jacfwd(f))``, ``jvp`` of
``jvp``) takes its inner ``J v`` by two reverse passes instead (see ``_jvp_nested``), so they
compose to any depth; ``jacfwd(jacrev(f))`` (forward over reverse) runs in one level.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, List, Optional, Tuple, Union

from .. import _C
from .._creation import eye, zeros_like
from .._ops_shape import stack
from ..autograd import forward_ad as fwAD
from ..autograd import grad as autograd_grad
from ..autograd.grad_mode import enable_grad
from ..utils._pytree import tree_flatten, tree_map, tree_unflatten, treespec_pprint
from ._transforms import (
    LEVELS_STARTED,
    _collect_own_leaves,
    _detach,
    _reaches_leaf_outside,
    _slice_argnums,
    _stop_collecting,
)
from ._vmap import try_batched

__all__ = ["jvp", "jacfwd", "linearize"]

Tensor = _C.Tensor
argnums_t = Union[int, Tuple[int, ...]]


def _flat_outputs(result: Any, has_aux: bool) -> Tuple[List[Tensor], Any, Any]:
    """``func``'s result as (flat output tensors, their structure, aux), with torch's errors."""
    aux = None
    if has_aux:
        if not (isinstance(result, tuple) and len(result) == 2):
            raise RuntimeError(
                "jvp(f, primals, tangents): output of function f should be a tuple: "
                "(output, aux) if has_aux is True"
            )
        result, aux = result
    flat_out, spec_out = tree_flatten(result)
    for o in flat_out:
        if not isinstance(o, Tensor):
            raise RuntimeError(
                "jvp(f, primals, tangents): expected f(*primals) to return only tensors, "
                f"got unsupported type {type(o)}"
            )
    return flat_out, spec_out, aux


def _jvp_flat(
    func: Callable[..., Any],
    primals: Tuple[Any, ...],
    tangents: Tuple[Any, ...],
    has_aux: bool,
) -> Tuple[Any, Any, Any]:
    """``(output, output tangents, aux)`` of one forward pass with ``tangents`` on ``primals``."""
    flat_p, spec_p = tree_flatten(primals)
    flat_t, spec_t = tree_flatten(tangents)
    if spec_p != spec_t:
        raise RuntimeError(
            "jvp(f, primals, tangents): Expected primals and tangents to have the same python "
            "structure. For example, if primals is a tuple of 3 tensors, tangents also must be. "
            f"Got primals with structure {spec_p} and tangents with structure {spec_t}"
        )
    if not any(isinstance(p, Tensor) for p in flat_p):
        raise RuntimeError(
            "jvp(f, primals, tangents): Expected primals to contain at least one Tensor."
        )
    if _C._current_dual_level() is not None:
        return _jvp_nested(func, flat_p, spec_p, flat_t, has_aux)
    with fwAD.dual_level():
        # A None tangent (jacfwd's other inputs) leaves that primal without one, so ops pay for
        # no zero tangent and results do not depend on it even structurally.
        duals = [
            fwAD.make_dual(p, t) if isinstance(p, Tensor) and t is not None else p
            for p, t in zip(flat_p, flat_t)
        ]
        result = func(*tree_unflatten(duals, spec_p))
        flat_out, spec_out, aux = _flat_outputs(result, has_aux)
        outs, tans = [], []
        for o in flat_out:
            primal, tangent = fwAD.unpack_dual(o)
            outs.append(primal)
            tans.append(o.new_zeros(o.shape) if tangent is None else tangent)
    return tree_unflatten(outs, spec_out), tree_unflatten(tans, spec_out), aux


def _jvp_nested(
    func: Callable[..., Any], flat_p: List[Any], spec_p: Any, flat_t: List[Any], has_aux: bool
) -> Tuple[Any, Any, Any]:
    """``_jvp_flat`` inside an open dual level (a forward transform nested in another, e.g.
    ``jacfwd(jacfwd(f))``): forward mode has one level, so the inner ``J v`` is taken by reverse
    mode twice, ``J v = d/du <Jᵀ u, v>``, whose ops are ordinary ops and so carry the outer
    level's tangents (and stay differentiable for outer reverse transforms)."""
    with enable_grad():
        # x + 0 with a fresh leaf as the 0: the input keeps its outer tangent and its graph,
        # and the leaf is what the inner reverse passes differentiate against (zeros_like is
        # batched like its input under vmap, so the samples stay apart).
        probes = [
            zeros_like(p).requires_grad_()
            if isinstance(p, Tensor) and t is not None
            else None
            for p, t in zip(flat_p, flat_t)
        ]
        inputs = [p + z if z is not None else p for p, z in zip(flat_p, probes)]
        result = func(*tree_unflatten(inputs, spec_p))
        flat_out, spec_out, aux = _flat_outputs(result, has_aux)
        wrt = [z for z in probes if z is not None]
        tvec = [t for z, t in zip(probes, flat_t) if z is not None]
        diff = [o for o in flat_out if o.requires_grad]
        us = [zeros_like(o).requires_grad_() for o in diff]
        tans_diff: List[Any] = [None] * len(diff)
        if diff and wrt:
            vjps = autograd_grad(diff, wrt, us, create_graph=True, allow_unused=True)
            pairs = [(g, t) for g, t in zip(vjps, tvec) if g is not None and g.requires_grad]
            if pairs:
                tans_diff = list(
                    autograd_grad(
                        [g for g, _ in pairs],
                        us,
                        [t for _, t in pairs],
                        create_graph=True,
                        allow_unused=True,
                    )
                )
        it = iter(tans_diff)
        tans = []
        for o in flat_out:
            t = next(it) if o.requires_grad else None
            tans.append(o.new_zeros(o.shape) if t is None else t)
    return tree_unflatten(flat_out, spec_out), tree_unflatten(tans, spec_out), aux


def jvp(
    func: Callable[..., Any],
    primals: Any,
    tangents: Any,
    *,
    strict: bool = False,
    has_aux: bool = False,
) -> Any:
    """``(func(*primals), J·tangents)`` by forward mode (one pass); with ``has_aux``, ``func``
    returns ``(output, aux)`` and so does the result, plus aux: ``(output, jvp_out, aux)``."""
    if not isinstance(primals, tuple):
        raise RuntimeError(
            "jvp(f, primals, tangents): Expected primals to be a tuple. E.g. it should be valid "
            "to call f(*primals)."
        )
    if not isinstance(tangents, tuple):
        _, spec_p = tree_flatten(primals)
        _, spec_t = tree_flatten(tangents)
        raise RuntimeError(
            "jvp(f, primals, tangents): Expected primals and tangents to have the same python "
            "structure. For example, if primals is a tuple of 3 tensors, tangents also must be. "
            f"Got primals with structure {spec_p} and tangents with structure {spec_t}"
        )
    if strict:
        raise RuntimeError("jvp(f, primals, tangents, strict=True): strict is not implemented yet")
    outer_enabled = _C.is_grad_enabled()
    token = _collect_own_leaves()
    try:
        out, tan, aux = _jvp_flat(func, primals, tangents, has_aux)
    finally:
        inner = {id(t) for t in _stop_collecting(token)}

    def release(b: Any) -> Any:
        # attached only where something outside can differentiate it (jvp(grad(f)) is not)
        if isinstance(b, Tensor) and b.requires_grad:
            if not (outer_enabled and _reaches_leaf_outside(b, inner)):
                return _detach(b)
        return b

    out, tan = tree_map(release, out), tree_map(release, tan)
    return (out, tan, aux) if has_aux else (out, tan)


def jacfwd(
    func: Callable[..., Any],
    argnums: argnums_t = 0,
    has_aux: bool = False,
    *,
    randomness: str = "error",
) -> Callable[..., Any]:
    """A function returning the Jacobian of ``func`` with respect to ``argnums`` by forward
    mode: per output, a tensor of shape ``output.shape + input.shape`` (a tuple of them for a
    tuple ``argnums``). One forward pass per input element (see the module docstring)."""
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(
            f"Only allowed values for randomness are 'error', 'different', or 'same'. Got "
            f"{randomness}"
        )

    @functools.wraps(func)
    def wrapper(*args: Any) -> Any:
        outer_enabled = _C.is_grad_enabled()
        token = _collect_own_leaves()
        try:
            result, aux = _jacfwd(func, argnums, has_aux, args, randomness)
        finally:
            own = _stop_collecting(token)
        inner = {id(t) for t in own}
        # Tangents stay differentiable; the Jacobian stays attached only where something
        # outside (an input or a closed-over tensor that requires grad) can differentiate it,
        # not through the own leaves of transforms run inside (jacfwd(jacrev(f))).
        flat, spec = tree_flatten(result)
        flat = [
            _detach(b)
            if b.requires_grad and not (outer_enabled and _reaches_leaf_outside(b, inner))
            else b
            for b in flat
        ]
        result = tree_unflatten(flat, spec)
        return (result, aux) if has_aux else result

    return wrapper


def _jacfwd(
    func: Callable[..., Any],
    argnums: argnums_t,
    has_aux: bool,
    args: Tuple[Any, ...],
    randomness: str = "error",
) -> Tuple[Any, Any]:
    """jacfwd's Jacobian (pytree of blocks) and aux, before releasing."""
    selected = _slice_argnums(args, argnums)
    flat_in, spec_in = tree_flatten(selected)
    columns: List[List[Tensor]] = []  # per input leaf: per element, the flat output tangents
    value: Optional[Tuple[Any, Any]] = None
    aux = None
    def call(*sel: Any) -> Any:
        full = list(args)
        nums = (argnums,) if isinstance(argnums, int) else argnums
        for num, v in zip(nums, sel):
            full[num] = v
        return func(*full)

    batched: List[Optional[List[Tensor]]] = []  # per input leaf: the flat output tangents
    for j, inp in enumerate(flat_in):
        n = inp.numel()
        basis = eye(n, dtype=inp.dtype).reshape((n,) + tuple(inp.shape)) if n else None
        cols = []
        # Nested in another forward transform, the columns are taken one by one: the reverse
        # passes that stand in for the inner level do not batch over a basis yet.
        if n and _BATCHED[0] and _C._current_dual_level() is None:
            got = _batched_columns(call, selected, spec_in, j, basis, has_aux, randomness)
            if got is not None:
                (out, aux), tans = got
                value = (out, aux)
                batched.append(tans)
                columns.append([])
                continue
        batched.append(None)
        for e in range(n):
            tangents = [
                basis[e] if k == j else None  # type: ignore[index]
                for k in range(len(flat_in))
            ]

            out, tan, aux = _jvp_flat(
                call, tuple(selected), tuple(tree_unflatten(tangents, spec_in)), has_aux
            )
            value = (out, aux)
            cols.append(tree_flatten(tan)[0])
        columns.append(cols)
    if value is None:
        raise RuntimeError("jacfwd: the selected inputs have no elements")
    flat_out, spec_out = tree_flatten(value[0])
    per_output = []
    for k, o in enumerate(flat_out):
        blocks = []
        for j, inp in enumerate(flat_in):
            shape = tuple(o.shape) + tuple(inp.shape)
            done = batched[j]
            if done is not None:
                blocks.append(done[k].reshape(shape))
                continue
            if not columns[j]:
                blocks.append(o.new_zeros(shape))
                continue
            col = stack([c[k] for c in columns[j]], dim=-1)
            blocks.append(col.reshape(shape))
        tree = tree_unflatten(blocks, spec_in)
        per_output.append(tree[0] if isinstance(argnums, int) else tree)
    return tree_unflatten(per_output, spec_out), value[1]


# Whether jacfwd batches its columns (a switch for tests that compare with the column loop).
_BATCHED = [True]


def _batched_columns(
    call: Callable[..., Any],
    selected: Any,
    spec_in: Any,
    j: int,
    basis: Tensor,
    has_aux: bool,
    randomness: str,
) -> Optional[Tuple[Tuple[Any, Any], List[Tensor]]]:
    """All Jacobian columns for input leaf ``j`` in one forward pass: the one-hot tangents are
    batched (vmap over jvp, as torch's jacfwd), so each op computes its tangents once for the
    whole basis. ``((output, aux), per flat output its tangents with the columns last)``; None
    when some op has no batching rule yet (the caller then runs one pass per column)."""
    n = basis.shape[0]
    flat_count = len(tree_flatten(selected)[0])
    started = LEVELS_STARTED[0]

    def columns(level: int) -> Tuple[Tuple[Any, Any], List[Tensor]]:
        tangent = _C._add_batch_dim(basis, 0, level)
        tangents = [tangent if k == j else None for k in range(flat_count)]
        out, tan, aux = _jvp_flat(
            call, tuple(selected), tuple(tree_unflatten(tangents, spec_in)), has_aux
        )
        cols = [_C._remove_batch_dim(t, level, n, t.dim()) for t in tree_flatten(tan)[0]]
        return (out, aux), cols

    got = try_batched(n, randomness, columns)
    if LEVELS_STARTED[0] != started:
        # A reverse transform ran inside (jacfwd(jacrev(f))): its own inputs were batched
        # like the tangents, which forward over reverse does not support batched yet.
        return None
    return got


def linearize(func: Callable[..., Any], *primals: Any) -> Tuple[Any, Callable[..., Any]]:
    """``(func(*primals), jvp_fn)`` with ``jvp_fn(*tangents)`` the Jacobian-vector product at
    ``primals`` (each call runs one forward pass; see the module docstring)."""
    output = func(*primals)
    _, spec_p = tree_flatten(primals)

    def jvp_fn(*tangents: Any) -> Any:
        _, spec_t = tree_flatten(tangents)
        if spec_t != spec_p:
            raise RuntimeError(
                "linearize: Expected tangents to have the same structure as the primals: "
                f"{treespec_pprint(spec_p)}, got {treespec_pprint(spec_t)}"
            )
        return _jvp_flat(func, primals, tangents, False)[1]

    return output, jvp_fn
