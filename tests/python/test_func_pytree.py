"""``ferrograd.utils._pytree``: flatten/unflatten round trips over tuple, list, dict,
OrderedDict, namedtuple and None leaves, tree_map with extra trees, spec equality and printing,
and torch.utils._pytree's results and messages when torch is installed."""

from __future__ import annotations

import collections

import pytest
from ferrograd.utils import _pytree as pt

try:
    import torch.utils._pytree as tpt
except ImportError:  # pragma: no cover - depends on the machine
    tpt = None

Point = collections.namedtuple("Point", ["x", "y"])

TREES = [
    1,
    None,
    (),
    [1, (2, None), {"a": 3}],
    {"b": [1, 2], "a": (3, {"c": 4})},
    collections.OrderedDict([("z", 1), ("y", (2, 3))]),
    Point(1, [2, Point(3, None)]),
    [[[]], {}, ((),)],
]


@pytest.mark.parametrize("tree", TREES, ids=range(len(TREES)))
def test_flatten_unflatten_round_trip(tree):
    leaves, spec = pt.tree_flatten(tree)
    back = pt.tree_unflatten(leaves, spec)
    assert back == tree and type(back) is type(tree)
    assert spec.num_leaves == len(leaves)
    assert pt.tree_structure(back) == spec


def test_leaves_are_depth_first_in_insertion_order_and_none_is_a_leaf():
    tree = {"b": [1, None], "a": Point(2, (3,))}
    assert pt.tree_leaves(tree) == [1, None, 2, 3]


def test_spec_equality_depends_on_type_keys_and_order():
    assert pt.tree_structure((1, 2)) == pt.tree_structure((3, 4))
    assert pt.tree_structure((1, 2)) != pt.tree_structure([1, 2])
    assert pt.tree_structure({"a": 1, "b": 2}) != pt.tree_structure({"b": 1, "a": 2})
    assert pt.tree_structure({"a": 1}) != pt.tree_structure({"a": (1,)})
    assert pt.tree_structure(Point(1, 2)) != pt.tree_structure((1, 2))


def test_tree_map_with_rests_and_is_leaf():
    assert pt.tree_map(lambda a, b: a + b, (1, [2]), (10, [20])) == (11, [22])
    # a rest may hold whole subtrees where the tree has leaves
    assert pt.tree_map(lambda a, b: (a, b), (1, 2), ([5], 6)) == ((1, [5]), (2, 6))
    out = pt.tree_map(len, {"a": [1, 2], "b": (3,)}, is_leaf=lambda x: isinstance(x, (list, tuple)))
    assert out == {"a": 2, "b": 1}
    seen = []
    assert pt.tree_map_(seen.append, [1, (2,)]) == [1, (2,)]
    assert seen == [1, 2]
    assert pt.tree_all(lambda x: x > 0, [1, (2,)]) and pt.tree_any(lambda x: x > 1, [1, (2,)])


def test_tree_map_matches_dicts_by_key():
    out = pt.tree_map(lambda a, b: (a, b), {"a": 1, "b": 2}, {"b": 3, "a": 4})
    assert out == {"a": (1, 4), "b": (2, 3)}
    if tpt is not None:
        assert out == tpt.tree_map(lambda a, b: (a, b), {"a": 1, "b": 2}, {"b": 3, "a": 4})


class Pair:
    def __init__(self, first, second, tag="t"):
        self.first, self.second, self.tag = first, second, tag

    def __eq__(self, other):
        return isinstance(other, Pair) and (self.first, self.second, self.tag) == (
            other.first,
            other.second,
            other.tag,
        )


pt.register_pytree_node(
    Pair, lambda p: ([p.first, p.second], p.tag), lambda children, tag: Pair(*children, tag)
)


def test_registered_container_flattens_and_rebuilds():
    tree = {"p": Pair(1, (2, 3), tag="x")}
    leaves, spec = pt.tree_flatten(tree)
    assert leaves == [1, 2, 3]
    assert pt.tree_unflatten([4, 5, 6], spec) == {"p": Pair(4, (5, 6), tag="x")}
    assert pt.tree_map(lambda v: v * 10, Pair(1, 2)) == Pair(10, 20)
    with pytest.raises(ValueError, match="is already registered as pytree node."):
        pt.register_pytree_node(Pair, lambda p: ([], None), lambda c, t: Pair(0, 0))


def test_grad_of_a_registered_container_argument():
    import ferrograd as fg
    from ferrograd.func import grad

    x = Pair(fg.tensor([1.0, 2.0]), fg.tensor([3.0, 4.0]))
    g = grad(lambda p: (p.first * p.second).sum())(x)
    assert isinstance(g, Pair)
    assert g.first.tolist() == [3.0, 4.0] and g.second.tolist() == [1.0, 2.0]


def test_errors():
    with pytest.raises(ValueError, match="`leaves` has length 3 but the spec refers to a pytree"):
        pt.tree_unflatten([1, 2, 3], pt.tree_structure((1, 2)))
    with pytest.raises(ValueError, match="Node arity mismatch; expected 2, but got 1."):
        pt.tree_map(lambda a, b: a, (1, 2), (1,))
    with pytest.raises(ValueError, match="Node type mismatch; expected <class 'tuple'>"):
        pt.tree_map(lambda a, b: a, (1, 2), [1, 2])


def test_treespec_pprint():
    assert pt.treespec_pprint(pt.tree_structure({"a": 1, "b": (1, 2)})) == "{'a': *, 'b': (*, *)}"
    assert pt.treespec_pprint(pt.tree_structure(Point(1, 2))) == "Point(x=*, y=*)"
    assert pt.treespec_pprint(pt.tree_structure(5)) == "*"


@pytest.mark.parametrize("tree", TREES, ids=range(len(TREES)))
def test_matches_torch_pytree(tree):
    if tpt is None:
        pytest.skip("torch not installed")
    leaves, spec = pt.tree_flatten(tree)
    tleaves, tspec = tpt.tree_flatten(tree)
    assert leaves == tleaves
    assert repr(spec) == repr(tspec)
    assert pt.treespec_pprint(spec) == tpt.treespec_pprint(tspec)


@pytest.mark.parametrize(
    "make",
    [
        lambda m: m.tree_unflatten([1, 2, 3], m.tree_structure((1, [2]))),
        lambda m: m.tree_map(lambda a, b: a, (1, 2), (1,)),
        lambda m: m.tree_map(lambda a, b: a, (1, 2), [1, 2]),
        lambda m: m.tree_map(lambda a, b: a, {"a": 1}, {"a": 1, "b": 2}),
        lambda m: m.tree_map(lambda a, b: a, {"a": 1}, {"b": 1}),
        lambda m: m.tree_map(lambda a, b: a, [1], 3),
    ],
)
def test_errors_match_torch(make):
    if tpt is None:
        pytest.skip("torch not installed")
    with pytest.raises(Exception) as theirs:  # noqa: B017 - whatever torch raises
        make(tpt)
    with pytest.raises(theirs.type) as ours:
        make(pt)
    assert str(ours.value) == str(theirs.value)
