"""ferrograd.viz.make_dot: the DOT text of a graph, checked against a walk of the same graph
through the public ``grad_fn``/``next_functions`` API."""

from __future__ import annotations

import re
import shutil
import sys

import ferrograd as fg
import pytest
from ferrograd import nn
from ferrograd.viz import make_dot

NODE = re.compile(r'^\t(\w+) \[label="((?:[^"\\]|\\.)*)"(?: fillcolor=(\w+))?\]$')
EDGE = re.compile(r"^\t(\w+) -> (\w+)( \[dir=none\])?$")


def parse(source):
    """{id: (label, fillcolor)}, [(tail, head, undirected)] of the DOT text."""
    nodes, edges = {}, []
    lines = source.splitlines()
    assert lines[0] == "digraph {" and lines[-1] == "}"
    for line in lines[1:-1]:
        if m := NODE.match(line):
            nodes[m.group(1)] = (m.group(2).replace("\\n", "\n"), m.group(3))
        elif m := EDGE.match(line):
            edges.append((m.group(1), m.group(2), bool(m.group(3))))
        else:
            assert line.startswith(("\tgraph ", "\tnode ")), line
    return nodes, edges


def walk(fn):
    """Every node reachable from ``fn``, each once."""
    seen, stack = [], [fn]
    while stack:
        f = stack.pop()
        if f in seen:
            continue
        seen.append(f)
        stack.extend(g for g, _ in f.next_functions if g is not None)
    return seen


def short(fn):
    return fn.name().replace("torch::autograd::", "")


def mlp():
    fg.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    x = fg.randn(5, 3)
    return model, model(x).pow(2).sum()


def test_mlp_nodes_edges_and_leaves_match_the_graph():
    model, loss = mlp()
    params = dict(model.named_parameters())
    nodes, edges = parse(make_dot(loss, params=params).source)
    graph = walk(loss.grad_fn)
    fn_boxes = {i: lab for i, (lab, color) in nodes.items() if color is None}
    assert sorted(fn_boxes.values()) == sorted(short(f) for f in graph)
    assert {"SumBackward0", "PowBackward0", "AddmmBackward0", "TanhBackward0"} <= set(
        fn_boxes.values()
    )
    between_fns = [(a, b) for a, b, _ in edges if a in fn_boxes and b in fn_boxes]
    assert len(between_fns) == sum(sum(g is not None for g, _ in f.next_functions) for f in graph)
    # Each parameter: one light-blue box with its name and shape, feeding an AccumulateGrad.
    leaves = {lab: i for i, (lab, color) in nodes.items() if color == "lightblue"}
    expect = {f"{n}\n ({', '.join(map(str, p.shape))})" for n, p in params.items()}
    assert set(leaves) == expect
    for i in leaves.values():
        (head,) = [b for a, b, _ in edges if a == i]
        assert fn_boxes[head] == "AccumulateGrad"
    # The output: green, unnamed, its shape, fed by the root grad_fn.
    (out,) = [i for i, (lab, color) in nodes.items() if color == "darkolivegreen1"]
    assert nodes[out][0] == "\n ()"
    assert [fn_boxes[a] for a, b, _ in edges if b == out] == ["SumBackward0"]
    assert len(edges) == len(between_fns) + len(leaves) + 1


def test_unnamed_leaves_and_several_outputs():
    a = fg.ones(2, 3, requires_grad=True)
    b = fg.ones(3, requires_grad=True)
    y1, y2 = (a * b).sum(), (a + 1).exp()
    nodes, edges = parse(make_dot((y1, y2), params={"b": b}).source)
    labels = sorted(lab for lab, color in nodes.values() if color == "lightblue")
    assert labels == ["\n (2, 3)", "b\n (3)"]
    outs = sorted(lab for lab, color in nodes.values() if color == "darkolivegreen1")
    assert outs == ["\n ()", "\n (2, 3)"]
    # `a`'s accumulator is shared: drawn once.
    assert sum(lab == "AccumulateGrad" for lab, _ in nodes.values()) == 2


def test_saved_tensors_on_request():
    x = fg.randn(4, 3, requires_grad=True)
    w = fg.randn(3, 2, requires_grad=True)
    y = (x @ w).sin().sum()
    plain, _ = parse(make_dot(y).source)
    assert not any(color == "orange" for _, color in plain.values())
    nodes, edges = parse(make_dot(y, show_saved=True).source)
    saved = {i: lab for i, (lab, color) in nodes.items() if color == "orange"}
    by_node = {}
    for a, b, undirected in edges:
        if b in saved:
            assert undirected
            by_node.setdefault(nodes[a][0], []).append(saved[b].split("\n")[1].strip())
    # mm saves both operands, sin its input: the shapes say which.
    assert sorted(by_node["MmBackward0"]) == ["(3, 2)", "(4, 3)"]
    assert by_node["SinBackward0"] == ["(4, 2)"]
    y.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        make_dot(y, show_saved=True)
    parse(make_dot(y).source)  # without saved tensors a used graph still draws


def test_attrs_on_request():
    x = fg.randn(4, 3, dtype=fg.float64, requires_grad=True)
    y = x.sum(1)
    nodes, _ = parse(make_dot(y, show_attrs=True).source)
    labels = [lab for lab, color in nodes.values() if color is None]
    (sum_label,) = [lab for lab in labels if lab.startswith("SumBackward1")]
    assert sum_label.splitlines()[2] == "output 0: float64 (4)"
    assert "AccumulateGrad" in labels


def test_bad_arguments():
    with pytest.raises(TypeError, match="output must be a Tensor"):
        make_dot([1.0])
    with pytest.raises(TypeError, match="'w' is a int"):
        make_dot(fg.ones(1, requires_grad=True), params={"w": 3})


def test_dot_object():
    _, loss = mlp()
    d = make_dot(loss)
    assert str(d) == d.source and d.source.startswith("digraph {")


def _graphviz_ready():
    try:
        import graphviz  # noqa: F401
    except ImportError:
        return False
    return shutil.which("dot") is not None


@pytest.mark.skipif(not _graphviz_ready(), reason="needs the graphviz package and dot")
def test_render_svg_and_png(tmp_path):
    model, loss = mlp()
    d = make_dot(loss, params=dict(model.named_parameters()))
    svg = d.render(str(tmp_path / "mlp"), format="svg")
    text = open(svg).read()
    assert "<svg" in text and "AddmmBackward0" in text and "0.weight" in text
    png = d.render(str(tmp_path / "mlp"), format="png")
    assert open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    assert d._repr_svg_().lstrip().startswith(("<?xml", "<svg", "<!--"))


def test_render_names_what_to_install(monkeypatch, tmp_path):
    d = make_dot(fg.ones(2, requires_grad=True).sum())
    monkeypatch.setitem(sys.modules, "graphviz", None)  # as if not installed
    with pytest.raises(ImportError, match=r"pip install graphviz.*apt-get install graphviz"):
        d.render(str(tmp_path / "g"))
    monkeypatch.undo()
    pytest.importorskip("graphviz")
    monkeypatch.setenv("PATH", str(tmp_path))  # the package without its dot program
    with pytest.raises(RuntimeError, match="apt-get install graphviz"):
        d.pipe("svg")
