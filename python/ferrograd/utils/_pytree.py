"""Nested containers of leaves ("pytrees"), as ``torch.utils._pytree`` has them.

A pytree is a leaf or a container of pytrees. The containers are ``tuple``, ``list``, ``dict``,
``collections.OrderedDict``, namedtuples and the types given to ``register_pytree_node``;
everything else (tensors, numbers, ``None``) is a leaf. ``tree_flatten`` turns a tree into its
leaves (depth first, dict values in insertion order) and a :class:`TreeSpec` that
``tree_unflatten`` uses to rebuild the same structure around new leaves. The function
transforms of :mod:`ferrograd.func` use it so that a dict of parameters gets a dict of
gradients.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

__all__ = [
    "PyTree",
    "TreeSpec",
    "LeafSpec",
    "tree_flatten",
    "tree_unflatten",
    "tree_leaves",
    "tree_structure",
    "tree_map",
    "tree_map_",
    "tree_all",
    "tree_any",
    "treespec_pprint",
    "register_pytree_node",
]

PyTree = Any


class _NamedTupleMarker:
    """Stands for every namedtuple class in a spec's ``type`` (the class is the context)."""


_NamedTupleMarker.__name__ = "namedtuple"
_NamedTupleMarker.__qualname__ = "namedtuple"


def _is_namedtuple_class(cls: type) -> bool:
    return (
        issubclass(cls, tuple)
        and isinstance(getattr(cls, "_fields", None), tuple)
        and callable(getattr(cls, "_make", None))
        and callable(getattr(cls, "_asdict", None))
    )


FlattenFn = Callable[[Any], Tuple[List[Any], Any]]
UnflattenFn = Callable[[Iterable[Any], Any], Any]
_REGISTERED: Dict[type, Tuple[FlattenFn, UnflattenFn]] = {}


def register_pytree_node(
    cls: type,
    flatten_fn: FlattenFn,
    unflatten_fn: UnflattenFn,
    *,
    serialized_type_name: Optional[str] = None,
    to_dumpable_context: Optional[Callable[[Any], Any]] = None,
    from_dumpable_context: Optional[Callable[[Any], Any]] = None,
    flatten_with_keys_fn: Optional[Callable[[Any], Any]] = None,
) -> None:
    """Make ``cls`` a container: ``flatten_fn(obj)`` returns ``(children, context)`` and
    ``unflatten_fn(children, context)`` rebuilds it. The keyword arguments (serialization and
    key paths in torch) are accepted and unused. ValueError when ``cls`` is a container
    already."""
    if cls in _REGISTERED or cls in (tuple, list, dict, OrderedDict):
        raise ValueError(f"{cls} is already registered as pytree node.")
    _REGISTERED[cls] = (flatten_fn, unflatten_fn)


def _children(node: Any) -> Optional[Tuple[type, Any, List[Any]]]:
    """``(spec type, context, children)`` of a container, None for a leaf."""
    cls = type(node)
    registered = _REGISTERED.get(cls)
    if registered is not None:
        children, context = registered[0](node)
        return cls, context, list(children)
    if cls is tuple:
        return tuple, None, list(node)
    if cls is list:
        return list, None, list(node)
    if cls is dict or cls is OrderedDict:
        return cls, list(node.keys()), list(node.values())
    if issubclass(cls, tuple) and _is_namedtuple_class(cls):
        return _NamedTupleMarker, cls, list(node)
    return None


def _rebuild(kind: type, context: Any, children: List[Any]) -> Any:
    registered = _REGISTERED.get(kind)
    if registered is not None:
        return registered[1](children, context)
    if kind is tuple:
        return tuple(children)
    if kind is list:
        return children
    if kind is dict or kind is OrderedDict:
        return kind(zip(context, children))
    return context(*children)  # namedtuple: the context is the class


class TreeSpec:
    """The structure of a pytree: the container type, its context (dict keys, namedtuple
    class) and one spec per child. Two specs are equal when the structures are."""

    __slots__ = ("type", "context", "children_specs", "num_leaves")

    def __init__(self, type: type, context: Any, children_specs: List[TreeSpec]) -> None:  # noqa: A002
        self.type = type
        self.context = context
        self.children_specs = children_specs
        self.num_leaves: int = sum(c.num_leaves for c in children_specs)

    @property
    def num_children(self) -> int:
        """Number of direct children."""
        return len(self.children_specs)

    def is_leaf(self) -> bool:
        """Whether this spec stands for a single leaf."""
        return False

    def unflatten(self, leaves: Iterable[Any]) -> PyTree:
        """The tree of this structure holding ``leaves`` (``tree_unflatten``)."""
        return tree_unflatten(leaves, self)

    def __repr__(self, indent: int = 0) -> str:
        text = f"TreeSpec({self.type.__name__}, {self.context}, ["
        if self.children_specs:
            indent += 2
            text += self.children_specs[0].__repr__(indent)
            text += "," if len(self.children_specs) > 1 else ""
            text += ",".join(
                "\n" + " " * indent + c.__repr__(indent) for c in self.children_specs[1:]
            )
        return text + "])"

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, TreeSpec) or isinstance(other, LeafSpec):
            return False
        return (
            self.type is other.type
            and self.context == other.context
            and self.children_specs == other.children_specs
        )

    def __hash__(self) -> int:
        return hash((self.type, self.num_leaves))


class LeafSpec(TreeSpec):
    """The spec of a leaf (printed ``*``)."""

    def __init__(self) -> None:
        super().__init__(object, None, [])
        self.num_leaves = 1

    def is_leaf(self) -> bool:
        """Always True."""
        return True

    def __repr__(self, indent: int = 0) -> str:
        return "*"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LeafSpec)

    def __hash__(self) -> int:
        return hash(LeafSpec)


_LEAF = LeafSpec()


def _flatten_into(
    tree: Any, leaves: List[Any], is_leaf: Optional[Callable[[Any], bool]]
) -> TreeSpec:
    if is_leaf is not None and is_leaf(tree):
        leaves.append(tree)
        return _LEAF
    node = _children(tree)
    if node is None:
        leaves.append(tree)
        return _LEAF
    kind, context, children = node
    return TreeSpec(kind, context, [_flatten_into(c, leaves, is_leaf) for c in children])


def tree_flatten(
    tree: PyTree, is_leaf: Optional[Callable[[PyTree], bool]] = None
) -> Tuple[List[Any], TreeSpec]:
    """The leaves of ``tree`` (depth first) and its structure. ``is_leaf`` stops the descent at
    any node for which it returns True."""
    leaves: List[Any] = []
    spec = _flatten_into(tree, leaves, is_leaf)
    return leaves, spec


def tree_leaves(tree: PyTree, is_leaf: Optional[Callable[[PyTree], bool]] = None) -> List[Any]:
    """The leaves of ``tree``, depth first."""
    return tree_flatten(tree, is_leaf)[0]


def tree_structure(tree: PyTree, is_leaf: Optional[Callable[[PyTree], bool]] = None) -> TreeSpec:
    """The structure of ``tree``."""
    return tree_flatten(tree, is_leaf)[1]


def _build(spec: TreeSpec, it: Any) -> Any:
    if isinstance(spec, LeafSpec):
        return next(it)
    return _rebuild(spec.type, spec.context, [_build(c, it) for c in spec.children_specs])


def tree_unflatten(leaves: Iterable[Any], treespec: TreeSpec) -> PyTree:
    """The tree of structure ``treespec`` holding ``leaves``. ValueError when the number of
    leaves is not the spec's."""
    if not isinstance(treespec, TreeSpec):
        raise TypeError(
            f"tree_unflatten(leaves, treespec): Expected `treespec` to be instance of "
            f"TreeSpec but got item of type {type(treespec)}."
        )
    leaves = list(leaves)
    if len(leaves) != treespec.num_leaves:
        raise ValueError(
            f"treespec.unflatten(leaves): `leaves` has length {len(leaves)} but the spec refers "
            f"to a pytree that holds {treespec.num_leaves} items ({treespec})."
        )
    return _build(treespec, iter(leaves))


def _flatten_up_to(spec: TreeSpec, tree: Any, out: List[Any]) -> None:
    """Append the subtrees of ``tree`` that sit where ``spec`` has leaves; ValueError when
    ``tree`` lacks a container that ``spec`` has."""
    if isinstance(spec, LeafSpec):
        out.append(tree)
        return
    node = _children(tree)
    kind = node[0] if node is not None else type(tree)
    if node is None or kind is not spec.type:
        expected = spec.context if spec.type is _NamedTupleMarker else spec.type
        raise ValueError(f"Node type mismatch; expected {expected}, but got {type(tree)}.")
    _, context, children = node
    if len(children) != spec.num_children:
        raise ValueError(
            f"Node arity mismatch; expected {spec.num_children}, but got {len(children)}."
        )
    if kind is dict or kind is OrderedDict:
        # matched by key, in the spec's order (torch's rule)
        missing = set(spec.context) - set(context)
        extra = set(context) - set(spec.context)
        if missing or extra:
            raise ValueError(
                f"Node keys mismatch; missing key(s): {missing}; extra key(s): {extra}."
            )
        context = spec.context
        children = [tree[k] for k in context]
    if context != spec.context:
        raise ValueError(
            f"Node context mismatch for custom node type {spec.type}; expected "
            f"{spec.context}, but got {context}."
        )
    for child_spec, child in zip(spec.children_specs, children):
        _flatten_up_to(child_spec, child, out)


def tree_map(
    func: Callable[..., Any],
    tree: PyTree,
    *rests: PyTree,
    is_leaf: Optional[Callable[[PyTree], bool]] = None,
) -> PyTree:
    """``tree`` with every leaf ``x`` replaced by ``func(x, *the same places of rests)``; each
    of ``rests`` must have ``tree``'s structure (or one that has it as a prefix)."""
    leaves, spec = tree_flatten(tree, is_leaf)
    if not rests:
        return tree_unflatten([func(x) for x in leaves], spec)
    columns = [leaves]
    for rest in rests:
        flat: List[Any] = []
        _flatten_up_to(spec, rest, flat)
        columns.append(flat)
    return tree_unflatten([func(*xs) for xs in zip(*columns)], spec)


def tree_map_(
    func: Callable[..., Any],
    tree: PyTree,
    *rests: PyTree,
    is_leaf: Optional[Callable[[PyTree], bool]] = None,
) -> PyTree:
    """Call ``func`` on every leaf for its side effect and return ``tree`` itself."""
    leaves, spec = tree_flatten(tree, is_leaf)
    columns = [leaves]
    for rest in rests:
        flat: List[Any] = []
        _flatten_up_to(spec, rest, flat)
        columns.append(flat)
    for xs in zip(*columns):
        func(*xs)
    return tree


def tree_all(pred: Callable[[Any], bool], tree: PyTree) -> bool:
    """Whether ``pred`` holds for every leaf."""
    return all(pred(x) for x in tree_leaves(tree))


def tree_any(pred: Callable[[Any], bool], tree: PyTree) -> bool:
    """Whether ``pred`` holds for some leaf."""
    return any(pred(x) for x in tree_leaves(tree))


class _Asterisk(str):
    def __repr__(self) -> str:
        return "*"


def treespec_pprint(treespec: TreeSpec) -> str:
    """The structure written as a tree whose leaves are ``*``, e.g. ``{'a': *, 'b': (*, *)}``."""
    return repr(tree_unflatten([_Asterisk("*")] * treespec.num_leaves, treespec))
