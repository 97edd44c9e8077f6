"""``vmap``: a function of one sample run on a whole batch at once.

Batching is real, not a loop: each input is wrapped as a *batched tensor* (``_C._add_batch_dim``)
whose shape is one sample's, and every op runs once on the physical tensor holding all the
samples through its batching rule in the crate (``src/ops/batching.rs``). Autograd records on
the per-sample (logical) tensors, so ``vmap(grad(f))`` gives per-sample gradients, and
``grad(vmap(f))`` differentiates through the batch (the wrapping itself is differentiable).
Argument handling and error messages follow ``torch._functorch.vmap``.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, List, Optional, Tuple, TypeVar, Union

from .. import _C
from ..utils._pytree import TreeSpec, _children, tree_flatten, tree_unflatten

Tensor = _C.Tensor

_InDims = Union[int, None, Tuple[Any, ...]]
_OutDims = Union[int, None, Tuple[Any, ...]]

__all__ = ["vmap"]

_T = TypeVar("_T")


def try_batched(size: int, randomness: str, body: Callable[[int], _T]) -> Optional[_T]:
    """``body(level)`` inside a vmap level of ``size`` samples (what jacrev and jacfwd batch
    their basis with); None when some op met inside has no batching rule yet, so that the
    caller can fall back to a loop."""
    level = _C._vmap_increment_nesting(size, randomness)
    try:
        return body(level)
    except RuntimeError as err:
        if "no batching rule" not in str(err):
            raise
        return None
    finally:
        _C._vmap_decrement_nesting()


def _get_name(func: Callable[..., Any]) -> str:
    return getattr(func, "__name__", repr(func))


def _broadcast_to_and_flatten(tree: Any, spec: TreeSpec) -> Optional[List[Any]]:
    """``tree`` (a prefix of the structure ``spec`` describes) with each of its leaves repeated
    for every leaf of ``spec`` below it; None when it is not such a prefix (torch's rule)."""
    node = _children(tree)
    if node is None:
        return [tree] * spec.num_leaves
    if spec.is_leaf():
        return None
    kind, context, children = node
    if kind is not spec.type or len(children) != spec.num_children or context != spec.context:
        return None
    out: List[Any] = []
    for child, child_spec in zip(children, spec.children_specs):
        flat = _broadcast_to_and_flatten(child, child_spec)
        if flat is None:
            return None
        out += flat
    return out


def _check_randomness(randomness: str) -> None:
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(
            "Only allowed values for randomness are 'error', 'different', or 'same'. "
            f"Got {randomness}"
        )


def _check_out_dims(out_dims: _OutDims, func: Callable[..., Any]) -> None:
    leaves, _ = tree_flatten(out_dims)
    if isinstance(out_dims, int) or all(d is None or isinstance(d, int) for d in leaves):
        return
    raise ValueError(
        f"vmap({_get_name(func)}, ..., out_dims={out_dims}): `out_dims` must be an int, None "
        "or a python collection of ints representing where in the outputs the vmapped "
        "dimension should appear."
    )


def _process_inputs(
    in_dims: _InDims, args: Tuple[Any, ...], func: Callable[..., Any]
) -> Tuple[int, List[Optional[int]], List[Any], TreeSpec]:
    """Batch size, flat in_dims (wrapped), flat args and their structure; torch's checks."""
    name = _get_name(func)
    if not isinstance(in_dims, (int, tuple)):
        raise ValueError(
            f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): expected `in_dims` to be int or a "
            f"(potentially nested) tuple matching the structure of inputs, got: {type(in_dims)}."
        )
    if len(args) == 0:
        raise ValueError(
            f"vmap({name})(<inputs>): got no inputs. Maybe you forgot to add inputs, or you are "
            "trying to vmap over a function with no inputs. The latter is unsupported."
        )
    flat_args, spec = tree_flatten(args)
    flat_in_dims = _broadcast_to_and_flatten(in_dims, spec)
    if flat_in_dims is None:
        raise ValueError(
            f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): in_dims is not compatible with "
            f"the structure of `inputs`. in_dims has structure {tree_flatten(in_dims)[1]} but "
            f"inputs has structure {spec}."
        )
    for i, (arg, d) in enumerate(zip(flat_args, flat_in_dims)):
        if d is not None and (not isinstance(d, int) or isinstance(d, bool)):
            raise ValueError(
                f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={d} for an input "
                "but in_dim must be either an integer dimension or None."
            )
        if isinstance(d, int) and not isinstance(arg, Tensor):
            raise ValueError(
                f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={d} for an input "
                f"but the input is of type {type(arg)}. We cannot vmap over non-Tensor "
                "arguments, please use None as the respective in_dim"
            )
        if d is not None and not -arg.dim() <= d < arg.dim():
            raise ValueError(
                f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={d} for some "
                f"input, but that input is a Tensor of dimensionality {arg.dim()} so expected "
                f"in_dim to satisfy -{arg.dim()} <= in_dim < {arg.dim()}."
            )
        if d is not None and d < 0:
            flat_in_dims[i] = d % arg.dim()
    sizes = [a.size(d) for a, d in zip(flat_args, flat_in_dims) if d is not None]
    if not sizes:
        raise ValueError("vmap: Expected at least one Tensor to vmap over")
    if any(s != sizes[0] for s in sizes):
        raise ValueError(
            "vmap: Expected all tensors to have the same size in the mapped dimension, got "
            f"sizes {sizes} for the mapped dimension"
        )
    return sizes[0], flat_in_dims, flat_args, spec


def _unwrap_output(
    out: Any, level: int, size: int, out_dim: Optional[int], name: str
) -> Any:
    if out_dim is None:
        if isinstance(out, Tensor) and _C.is_batchedtensor(out):
            raise ValueError(
                f"vmap({name}, ...): `{name}` can not return a BatchedTensor when out_dim is None"
            )
        return out
    if not isinstance(out, Tensor):
        raise ValueError(
            f"vmap({name}, ...): `{name}` must only return Tensors, got type {type(out)}. Did "
            "you mean to set out_dims= to None for output?"
        )
    rank = out.dim() + 1
    if not -rank <= out_dim < rank:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-rank}, {rank - 1}], but got "
            f"{out_dim})"
        )
    return _C._remove_batch_dim(out, level, size, out_dim % rank)


def _vmap_once(
    func: Callable[..., Any],
    size: int,
    flat_in_dims: List[Optional[int]],
    flat_args: List[Any],
    spec: TreeSpec,
    out_dims: _OutDims,
    randomness: str,
    kwargs: dict,
) -> Any:
    name = _get_name(func)
    level = _C._vmap_increment_nesting(size, randomness)
    try:
        wrapped = [
            a if d is None else _C._add_batch_dim(a, d, level)
            for a, d in zip(flat_args, flat_in_dims)
        ]
        out = func(*tree_unflatten(wrapped, spec), **kwargs)
        flat_out, out_spec = tree_flatten(out)
        flat_out_dims = _broadcast_to_and_flatten(out_dims, out_spec)
        if flat_out_dims is None:
            raise ValueError(
                f"vmap({name}, ..., out_dims={out_dims})(<inputs>): out_dims is not compatible "
                f"with the structure of `outputs`. out_dims has structure "
                f"{tree_flatten(out_dims)[1]} but outputs has structure {out_spec}."
            )
        results = [
            _unwrap_output(o, level, size, d, name) for o, d in zip(flat_out, flat_out_dims)
        ]
        return tree_unflatten(results, out_spec)
    finally:
        _C._vmap_decrement_nesting()


def _chunks(
    size: int, chunk_size: int, flat_in_dims: List[Optional[int]], flat_args: List[Any]
) -> List[Tuple[int, List[Any]]]:
    out = []
    for start in range(0, size, chunk_size):
        n = min(chunk_size, size - start)
        out.append(
            (
                n,
                [
                    a if d is None else a.narrow(d, start, n)
                    for a, d in zip(flat_args, flat_in_dims)
                ],
            )
        )
    return out


def vmap(
    func: Callable[..., Any],
    in_dims: _InDims = 0,
    out_dims: _OutDims = 0,
    randomness: str = "error",
    *,
    chunk_size: Optional[int] = None,
) -> Callable[..., Any]:
    """``func`` mapped over a dimension of its inputs, as ``torch.vmap``.

    ``in_dims`` says which dimension of each input is mapped (an int, or a pytree prefix of
    the positional arguments; ``None`` passes an argument unmapped); keyword arguments are
    never mapped. ``out_dims`` says where the mapped dimension goes in each output.
    ``chunk_size`` maps that many samples at a time and concatenates the results.
    """
    _check_randomness(randomness)
    _check_out_dims(out_dims, func)
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size <= 0):
        raise ValueError(f"vmap: chunk_size should be None or greater than 0. (got {chunk_size})")

    @functools.wraps(func)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        size, flat_in_dims, flat_args, spec = _process_inputs(in_dims, args, func)
        if chunk_size is None or chunk_size >= size:
            return _vmap_once(
                func, size, flat_in_dims, flat_args, spec, out_dims, randomness, kwargs
            )
        parts = [
            _vmap_once(func, n, flat_in_dims, chunk, spec, out_dims, randomness, kwargs)
            for n, chunk in _chunks(size, chunk_size, flat_in_dims, flat_args)
        ]
        flat_parts = [tree_flatten(p)[0] for p in parts]
        out_spec = tree_flatten(parts[0])[1]
        flat_out_dims = _broadcast_to_and_flatten(out_dims, out_spec) or []
        joined = [
            column[0] if d is None else _C._cat(list(column), d)
            for column, d in zip(zip(*flat_parts), flat_out_dims)
        ]
        return tree_unflatten(joined, out_spec)

    return wrapped
