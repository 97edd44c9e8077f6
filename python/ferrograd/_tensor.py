"""The parts of ``Tensor`` written in Python: ``repr`` formatting and ``t[index]`` parsing
(NumPy-heavy, as in torch's Python layer), attached to the Rust class by ``_install`` at import;
and the ``grad_fn`` node wrapper and the unpickling function that Rust methods call. Every
other method is defined by the Rust class itself (``src/python/``)."""

from __future__ import annotations

import builtins
import textwrap
from typing import Any, List, Optional, Tuple

from . import _C
from ._dtypes import to_numpy_dtype
from ._lazy import is_numpy, np

Tensor = _C.Tensor

# ----- formatting -------------------------------------------------------------------------------


def _format_floats(values: np.ndarray) -> List[str]:
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return [_special(v) for v in values]
    absf = np.abs(finite)
    nonzero = absf[absf > 0]
    integral = bool(np.all(finite == np.round(finite)))
    big, small = float(absf.max()), float(nonzero.min()) if nonzero.size else 1.0
    ratio_big = bool(nonzero.size) and big / small > 1000.0
    sci = big >= 1e8 or ratio_big or (not integral and bool(nonzero.size) and small < 1e-4)
    out = []
    for v in values:
        if not np.isfinite(v):
            out.append(_special(v))
        elif sci:
            out.append(f"{v:.4e}")
        elif integral:
            out.append(f"{v:.0f}.")
        else:
            out.append(f"{v:.4f}")
    return out


def _special(v: float) -> str:
    if np.isnan(v):
        return "nan"
    return "inf" if v > 0 else "-inf"


def _edge_items(arr: np.ndarray) -> tuple[np.ndarray, List[bool]]:
    """The first and last 3 entries along every dim longer than 6 (what a summary shows, as in
    torch), and which dims were cut. One gather copies only the summary, so an
    expanded tensor of 10^12 elements prints like any other."""
    cut = [n > 6 for n in arr.shape]
    if any(cut):
        idx = [[0, 1, 2, n - 3, n - 2, n - 1] if c else range(n) for n, c in zip(arr.shape, cut)]
        arr = arr[np.ix_(*idx)]
    return arr, cut


def _format_data(arr: np.ndarray, indent: int) -> str:
    summarize = arr.size > 1000
    cut = [False] * arr.ndim
    if summarize:
        arr, cut = _edge_items(arr)
    flat = arr.reshape(-1)
    if arr.dtype == np.bool_:
        strs = ["True" if v else "False" for v in flat]
    elif arr.dtype.kind == "f":
        strs = _format_floats(flat.astype(np.float64))
    else:
        strs = [str(int(v)) for v in flat]
    width = max((len(s) for s in strs), default=0)
    cells = np.array([s.rjust(width) for s in strs], dtype=object).reshape(arr.shape)

    def rec(a: Any, depth: int) -> str:
        if a.ndim == 0:
            return str(a.item())
        if a.ndim == 1:
            items = list(a)
            if cut[depth]:
                items = items[:3] + [" ..."] + items[-3:]
            return "[" + ", ".join(items) + "]"
        rows = [rec(a[i], depth + 1) for i in range(a.shape[0])]
        if cut[depth]:
            rows = rows[:3] + ["..."] + rows[-3:]
        sep = "," + "\n" * (a.ndim - 1) + " " * (indent + depth + 1)
        return "[" + sep.join(rows) + "]"

    return rec(cells, 0)


def _repr(self: Tensor) -> str:
    """torch-style `tensor([...])` formatting (`BatchedTensor(...)` inside vmap, as torch)."""
    if _C.is_batchedtensor(self):
        level, bdim = _C._batch_info(self)
        value = textwrap.indent(_repr(_C.get_unwrapped(self)), "    ")
        return f"BatchedTensor(lvl={level}, bdim={bdim}, value=\n{value}\n)"
    if self.is_meta:
        # No data to show (torch's form).
        cells = ["...", "device='meta'", f"size={tuple(self.shape)}"]
        if self.dtype != _C.get_default_dtype():
            cells.append(f"dtype={self.dtype!r}")
        if self.grad_fn is not None:
            cells.append(f"grad_fn=<{self.grad_fn.name()}>")
        elif self.requires_grad:
            cells.append("requires_grad=True")
        return "tensor(" + ", ".join(cells) + ")"
    shown = self.detach()
    # NumPy has no bfloat16: its values print exactly as float32.
    arr = (shown.float() if shown.dtype == _C.bfloat16 else shown).numpy()
    prefix = "tensor("
    body = _format_data(arr, len(prefix)) if arr.size or arr.ndim == 0 else "[]"
    suffixes = []
    if arr.size == 0 and arr.ndim != 1:
        suffixes.append(f"size={tuple(arr.shape)}")
    if self.dtype not in (_C.float32, _C.int64, _C.bool) or (
        arr.size == 0 and self.dtype != _C.float32
    ):
        suffixes.append(f"dtype={self.dtype!r}")
    fn = self.grad_fn
    if fn is not None:
        suffixes.append(f"grad_fn=<{fn.name()}>")
    elif self.requires_grad:
        suffixes.append("requires_grad=True")
    return prefix + body + "".join(", " + s for s in suffixes) + ")"


# ----- indexing ---------------------------------------------------------------------------------

_INT_DTYPES = (_C.int64, _C.int32, _C.int16, _C.int8, _C.uint8)

_INDEX_ERROR = (
    "only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables are valid "
    "indices (got {})"
)


def _is_int(i: Any) -> bool:
    if isinstance(i, builtins.bool):
        return False
    if isinstance(i, int):
        return True
    if is_numpy(i, "integer"):
        return True
    return isinstance(i, Tensor) and i.dtype in _INT_DTYPES and i.dim() == 0


def _is_bool_scalar(i: Any) -> bool:
    if isinstance(i, builtins.bool):
        return True
    if is_numpy(i, "bool_"):
        return True
    return isinstance(i, Tensor) and i.dtype == _C.bool and i.dim() == 0


def _index_tensor(item: Any) -> Optional[Tensor]:
    """``item`` as an advanced index (a tensor), or None if it is not one."""
    if isinstance(item, Tensor):
        return item
    if isinstance(item, list) or is_numpy(item, "ndarray"):
        arr = np.asarray(item)
        if arr.dtype == np.bool_:
            return _C._from_numpy(np.ascontiguousarray(arr), False)
        if arr.size == 0 or arr.dtype.kind in "iu":
            return _C._from_numpy(np.ascontiguousarray(arr.astype(np.int64)), False)
        if arr.dtype.kind == "f":
            return _C._from_numpy(np.ascontiguousarray(arr), False)
    return None


def _apply_basic(self: Tensor, index: Any) -> Tuple[Tensor, List[Optional[Tensor]]]:
    """Apply ints, slices, None and Ellipsis (views); return the view and the advanced indices,
    one entry per leading dim of the view (None keeps a dim; a k-dim bool mask covers k dims).
    Ints are applied as ``select`` before advanced indexing, as torch does (so
    ``x[0, :, [0, 1]]`` has shape ``[4, 2]`` for ``x`` of shape ``[3, 4, 5]``)."""
    items = index if isinstance(index, tuple) else (index,)
    parsed: List[Any] = []
    consumed = 0
    for i in items:
        if i is None or i is Ellipsis or isinstance(i, slice) or _is_int(i) or _is_bool_scalar(i):
            parsed.append(i)
            consumed += 1 if (isinstance(i, slice) or _is_int(i)) else 0
            continue
        t = _index_tensor(i)
        if t is None:
            raise IndexError(_INDEX_ERROR.format(type(i).__name__))
        parsed.append(t)
        consumed += t.dim() if t.dtype == _C.bool else 1
    if builtins.sum(1 for i in parsed if i is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if consumed > self.dim():
        raise IndexError(f"too many indices for tensor of dimension {self.dim()}")
    result = self
    dim = 0
    indices: List[Optional[Tensor]] = []
    covered = 0
    for item in parsed:
        if item is None:
            result = result.unsqueeze(dim)
            dim += 1
        elif item is Ellipsis:
            dim += self.dim() - consumed
        elif isinstance(item, slice):
            step = 1 if item.step is None else int(item.step)
            if step == 0:
                raise ValueError("slice step cannot be zero")
            start = None if item.start is None else int(item.start)
            stop = None if item.stop is None else int(item.stop)
            result = result._slice(dim, start, stop, step)
            dim += 1
        elif _is_int(item):
            result = result.select(dim, int(item))
        elif _is_bool_scalar(item):
            result = result.unsqueeze(dim)
            if not builtins.bool(item):
                result = result._slice(dim, 0, 0, 1)
            dim += 1
        else:
            while covered < dim:
                indices.append(None)
                covered += 1
            width = item.dim() if item.dtype == _C.bool else 1
            indices.append(item)
            covered += width
            dim += width
    return result, indices


def _getitem(self: Tensor, index: Any) -> Tensor:
    """Indexing: ints, slices, `...` and `None` give a view; int64/bool tensors and lists
    (advanced indexing, NumPy's placement rule with ints applied first, as torch) copy."""
    if type(index) is int and self.dim() > 0:
        # A dataset's `x[i]`: one select, without parsing an index tuple (1.5 -> 0.4 µs).
        return self.select(0, index)
    result, indices = _apply_basic(self, index)
    if indices:
        return result._index(indices)
    if result is self:
        result = self.view(*self.shape) if self.is_contiguous() else self._slice(0, None, None, 1)
    return result


def _value_tensor(value: Any, like: Tensor) -> Tensor:
    if isinstance(value, Tensor):
        return value
    if like.dtype == _C.bfloat16:
        return _C._from_numpy(np.ascontiguousarray(value, dtype=np.float64), False).to(_C.bfloat16)
    try:
        arr = np.asarray(value, dtype=to_numpy_dtype(like.dtype))
    except (OverflowError, ValueError):
        if like.dtype.is_floating_point or like.dtype == _C.bool:
            raise
        # inf, NaN or a number beyond an integer tensor's type: torch's error, not a wrapped one.
        name = str(like.dtype).split(".")[1]
        raise RuntimeError(f"value cannot be converted to type {name}_t without overflow") from None
    return _C._from_numpy(np.ascontiguousarray(arr), False)


def _setitem(self: Tensor, index: Any, value: Any) -> None:
    """Assign `value` (broadcast) at the index (`index_put_` for advanced indices)."""
    target, indices = _apply_basic(self, index)
    if indices:
        target.index_put_(indices, _value_tensor(value, self))
        return
    if target is self and self.dim() > 0:
        target = self._slice(0, None, None, 1)
    if isinstance(value, Tensor):
        target.copy_(value)
    elif isinstance(value, (int, float, builtins.bool)) or is_numpy(value, "number"):
        target.fill_(float(value))
    else:
        target.copy_(np.asarray(value))


# ----- grad_fn ----------------------------------------------------------------------------------


class Node:
    """A node of the backward graph; its class is named after the op (``MulBackward0``)."""

    __slots__ = ("_node",)

    def __init__(self, node: Any) -> None:
        self._node = node

    def name(self) -> str:
        """torch's name for the node, e.g. ``MulBackward0``."""
        return self._node.name()

    @property
    def next_functions(self) -> tuple:
        """``((node or None, input_nr), ...)``, one per forward input."""
        return tuple(
            (None if n is None else _wrap_node(n), nr) for n, nr in self._node.next_functions
        )

    @property
    def variable(self) -> Optional[Tensor]:
        """For ``AccumulateGrad``: the leaf it accumulates into."""
        return self._node.variable

    def _sequence_nr(self) -> int:
        return self._node._sequence_nr()

    @property
    def metadata(self) -> dict:
        """A dict kept with the node, for the user's own annotations."""
        return self._node.metadata

    def register_prehook(self, fn: Any) -> Any:
        """Register ``fn(grad_outputs) -> tuple | None``, run on the gradients arriving at this
        node before it runs (only when it runs); a returned tuple replaces them."""
        return self._node.register_prehook(fn)

    def register_hook(self, fn: Any) -> Any:
        """Register ``fn(grad_inputs, grad_outputs) -> tuple | None``, run after this node
        computed its gradients; a returned tuple replaces ``grad_inputs``."""
        return self._node.register_hook(fn)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Node) and self._node == other._node

    def __hash__(self) -> int:
        return hash(self._node)

    def __repr__(self) -> str:
        return repr(self._node)


_NODE_CLASSES: dict = {}


def _wrap_node(node: Any) -> Node:
    name = node.name().rpartition("::")[2]
    cls = _NODE_CLASSES.get(name)
    if cls is None:
        cls = type(name, (Node,), {"__slots__": ()})
        _NODE_CLASSES[name] = cls
    return cls(node)


def _rebuild_tensor(array: np.ndarray, requires_grad: builtins.bool) -> Tensor:
    """Unpickle a tensor: its elements (a NumPy array), and whether the leaf requires grad."""
    t = _C._from_numpy(np.ascontiguousarray(array), False)
    if requires_grad:
        t.requires_grad = True
    return t


def _rebuild_meta(shape: Any, dtype: str, requires_grad: builtins.bool) -> Tensor:
    """Unpickle (or deep-copy) a meta tensor: its shape, dtype name, and whether it requires
    grad."""
    t = _C._empty_meta(list(shape), getattr(_C, dtype))
    if requires_grad:
        t.requires_grad = True
    return t


# ----- in-place forms of the op registry's unary ops ----------------------------------------

# The registry's ops torch has no in-place form of (their results are bool).
_NO_INPLACE = {"isnan", "isinf", "isfinite"}
# torch's aliases of in-place unary ops.
_INPLACE_ALIASES = {
    "negative_": "neg_",
    "arcsin_": "asin_",
    "arccos_": "acos_",
    "arctan_": "atan_",
    "arcsinh_": "asinh_",
    "arccosh_": "acosh_",
    "arctanh_": "atanh_",
    "fix_": "trunc_",
}


def _unary_inplace(name: str) -> Any:
    def method(self: Tensor) -> Tensor:
        return self._unary_(name)

    method.__name__ = method.__qualname__ = name + "_"
    method.__doc__ = f"In-place :meth:`{name}`; returns self."
    return method


def _inplace_members() -> dict:
    """``exp_``, ``sin_``, ...: one per row of the op registry (``src/ops/registry.rs``), each
    running ``Tensor.unary_`` in the crate; and torch's aliases of them."""
    names = [r["name"] for r in _C._registry() if r["family"] == "unary"]
    members = {n + "_": _unary_inplace(n) for n in names if n not in _NO_INPLACE}
    for alias, target in _INPLACE_ALIASES.items():
        members[alias] = members[target]
    return members


# ----- type() ----------------------------------------------------------------------------------

_TYPE_NAMES = {"float32": "FloatTensor", "float64": "DoubleTensor", "int64": "LongTensor"}
_TYPE_NAMES["bool"] = "BoolTensor"


def _type(
    self: Tensor, dtype: Any = None, non_blocking: builtins.bool = False, **kwargs: Any
) -> Any:
    """Without ``dtype`` the type's name (``'ferrograd.FloatTensor'``, the spelling of
    ``ferrograd.float32``'s repr); with one (a dtype, a legacy class such as
    ``ferrograd.DoubleTensor`` or its name, also spelt ``torch.``) a copy of that dtype, or
    this tensor when it has it already."""
    by_name = {v: k for k, v in _TYPE_NAMES.items()}
    if dtype is None:
        return "ferrograd." + _TYPE_NAMES[str(self.dtype).rpartition(".")[2]]
    if isinstance(dtype, str):
        module, _, name = dtype.rpartition(".")
        if module not in ("torch", "ferrograd") or name not in by_name:
            raise ValueError(f"invalid type: {dtype!r}")
        target = getattr(_C, by_name[name])
    elif isinstance(dtype, _C.dtype):
        target = dtype
    elif hasattr(dtype, "_dtype"):
        target = dtype._dtype
    else:
        raise TypeError(f"dtype must be a type, str, or dtype object, not {type(dtype).__name__}")
    return self if self.dtype == target else self.to(target)


def _bernoulli(self: Tensor, p: Any = None, *, generator: Any = None) -> Tensor:
    """0/1 samples shaped like this tensor, each 1 with probability its element (or ``p``)."""
    from ._creation import bernoulli

    return bernoulli(self, p, generator=generator)


def _pin_memory(self: Tensor, device: Any = None) -> Tensor:
    """This tensor: pinned memory speeds copies to an accelerator, and ferrograd has none
    (torch's CPU-only build raises here; DataLoader's ``pin_memory=True`` works either way)."""
    del device
    return self


def _is_pinned(self: Tensor, device: Any = None) -> bool:
    """False: ferrograd never pins memory (see ``pin_memory``)."""
    del device
    return False


def _install() -> None:
    """Attach the Python-written members to the Rust ``Tensor`` class (their stubs are in
    ``_C.pyi``): the one place where Python adds to the class."""
    members = {
        "__repr__": _repr,
        "__str__": _repr,
        "__getitem__": _getitem,
        "__setitem__": _setitem,
        "type": _type,
        "bernoulli": _bernoulli,
        "pin_memory": _pin_memory,
        "is_pinned": _is_pinned,
        **_inplace_members(),
    }
    for name, value in members.items():
        setattr(Tensor, name, value)
