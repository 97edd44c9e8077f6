"""``autograd.graph``: saved-tensor hooks, node hooks and metadata, gradient edges, multi-tensor
hooks, callbacks at the end of backward. Values are checked against closed forms; the torch
section runs the same programs on torch when it is installed and compares what they observe."""

import gc
import math
import threading
import weakref

import ferrograd as fg
import numpy as np
import pytest
from ferrograd.autograd import graph

# ----- saved-tensor hooks -----------------------------------------------------------------------


def test_pack_sees_every_saved_tensor_without_grad_and_unpack_each_read():
    x = fg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    log = []

    def pack(t):
        log.append(("pack", fg.is_grad_enabled()))
        return t

    def unpack(t):
        log.append("unpack")
        return t

    with graph.saved_tensors_hooks(pack, unpack):
        y = x.exp()  # saves its output
        z = (y * x).sum()  # saves both operands
    assert log == [("pack", False)] * 3
    log.clear()
    z.backward()
    assert log == ["unpack"] * 3
    # d/dx sum(x e^x) = e^x (1 + x)
    expected = [math.exp(v) * (1 + v) for v in (1.0, 2.0, 3.0)]
    assert x.grad.tolist() == pytest.approx(expected, rel=1e-6)


def test_hooks_that_copy_give_the_same_second_derivative():
    x = fg.tensor([0.3, -1.2, 2.0], dtype=fg.float64, requires_grad=True)
    with graph.saved_tensors_hooks(lambda t: t.detach().clone(), lambda t: t):
        z = (x.sin() * x).sum()
    (g,) = fg.autograd.grad(z, x, create_graph=True)
    (g2,) = fg.autograd.grad(g.sum(), x)
    # d/dx = x cos x + sin x; d2/dx2 = 2 cos x - x sin x
    xs = x.tolist()
    assert g.tolist() == pytest.approx([v * math.cos(v) + math.sin(v) for v in xs])
    assert g2.tolist() == pytest.approx([2 * math.cos(v) - v * math.sin(v) for v in xs])


def test_hooks_apply_to_function_save_for_backward_and_unpack_per_access():
    unpacks = []

    class Square(fg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            (x2,) = ctx.saved_tensors
            return 2 * x2 * g

    x = fg.tensor([1.5, -2.0], requires_grad=True)
    with graph.saved_tensors_hooks(lambda t: ("boxed", t), lambda p: unpacks.append(1) or p[1]):
        y = Square.apply(x)
    y.sum().backward()
    assert len(unpacks) == 2
    assert x.grad.tolist() == [3.0, -4.0]


def test_unpack_must_return_a_tensor():
    x = fg.ones(3, requires_grad=True)
    with graph.saved_tensors_hooks(lambda t: 1, lambda t: 1):
        z = (x * x).sum()
    with pytest.raises(
        TypeError, match="unpack_hook expected to be a Tensor but got result of type int"
    ):
        z.backward()


def test_pack_hook_must_not_modify_its_input():
    x = fg.ones(3, requires_grad=True)
    w = fg.ones(3)
    with graph.saved_tensors_hooks(lambda t: t.add_(1), lambda t: t):
        with pytest.raises(RuntimeError, match="pack hook is modifying its input in place"):
            x * w
    assert w.tolist() == [2.0, 2.0, 2.0] or w.tolist() == [1.0, 1.0, 1.0]


def test_innermost_hooks_win_and_exit_restores_outer():
    x = fg.ones(2, requires_grad=True)
    log = []
    with graph.saved_tensors_hooks(lambda t: log.append("outer") or t, lambda t: t):
        with graph.saved_tensors_hooks(lambda t: log.append("inner") or t, lambda t: t):
            x * x
        assert log == ["inner", "inner"]
        x.exp()
    assert log == ["inner", "inner", "outer"]
    x.exp()  # no hooks left
    assert len(log) == 3


def test_hooks_are_thread_local():
    x = fg.ones(2, requires_grad=True)
    log = []
    with graph.saved_tensors_hooks(lambda t: log.append("pack") or t, lambda t: t):
        th = threading.Thread(target=lambda: x.exp())
        th.start()
        th.join()
    assert log == []


def _packs_during_double_backward(threads):
    prev = fg.get_num_threads()
    fg.set_num_threads(threads)
    try:
        fg.manual_seed(0)
        # Large enough that backward hands nodes to its worker threads.
        x = fg.randn(256, 256, dtype=fg.float64, requires_grad=True)
        loss = sum((x * (k + 1)).tanh().sum() for k in range(4))
        packed = []
        with graph.saved_tensors_hooks(lambda t: packed.append(1) or t, lambda t: t):
            (g,) = fg.autograd.grad(loss, x, create_graph=True)
        (g2,) = fg.autograd.grad(g.sum(), x)
        return len(packed), x.detach().numpy(), g2.numpy()
    finally:
        fg.set_num_threads(prev)


def test_backward_workers_use_the_callers_hooks():
    # Every tensor saved while building the second-order graph goes through the hooks, whichever
    # thread saved it: as many packs with two threads as with one.
    n1, _, _ = _packs_during_double_backward(1)
    n2, x, g2 = _packs_during_double_backward(2)
    assert n2 == n1 > 0
    # d2/dx2 sum_k tanh(kx) = sum_k -2 k^2 tanh(kx) (1 - tanh^2(kx))
    expect = sum(-2 * k**2 * np.tanh(k * x) * (1 - np.tanh(k * x) ** 2) for k in range(1, 5))
    assert np.allclose(g2, expect, atol=1e-10)


def test_packed_objects_are_released_with_the_graph():
    x = fg.ones(3, requires_grad=True)

    class Box:
        def __init__(self, t):
            self.t = t

    refs = []

    def pack(t):
        b = Box(t)
        refs.append(weakref.ref(b))
        return b

    with graph.saved_tensors_hooks(pack, lambda b: b.t):
        z = (x.exp() * x).sum()
    z.backward()
    gc.collect()
    assert refs and all(r() is None for r in refs)


def test_in_place_change_after_saving_is_still_an_error_with_hooks():
    # torch skips the version check for hooked tensors and silently uses the new value;
    # ferrograd keeps checking the tensor that was saved.
    x = fg.ones(3, requires_grad=True)
    w = fg.ones(3)
    with graph.saved_tensors_hooks(lambda t: t, lambda t: t):
        z = (x * w).sum()
    w.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.backward()


def test_disable_saved_tensors_hooks_and_restore():
    with graph.disable_saved_tensors_hooks("outer message"):
        with graph.disable_saved_tensors_hooks("inner message"):
            with pytest.raises(RuntimeError, match="^inner message$"):
                with graph.saved_tensors_hooks(lambda t: t, lambda t: t):
                    pass
        with pytest.raises(RuntimeError, match="^outer message$"):
            with graph.saved_tensors_hooks(lambda t: t, lambda t: t):
                pass
    with graph.saved_tensors_hooks(lambda t: t, lambda t: t):
        pass


def test_save_on_cpu_keeps_gradients():
    x = fg.tensor([0.5, 1.5], requires_grad=True)
    with graph.save_on_cpu(pin_memory=False):
        z = (x.exp() * x).sum()
    z.backward()
    assert x.grad.tolist() == pytest.approx([math.exp(v) * (1 + v) for v in (0.5, 1.5)])


# ----- node hooks and metadata ------------------------------------------------------------------


def test_node_hook_order_and_replacement():
    a = fg.tensor([1.0, 2.0], requires_grad=True)
    b = a * 2
    b.retain_grad()
    order = []
    b.register_hook(lambda g: order.append("tensor") or g * 10)
    b.grad_fn.register_prehook(lambda go: order.append("pre") or (go[0] * 3,))
    b.grad_fn.register_hook(
        lambda gi, go: order.append(("post", gi[0].tolist(), gi[1], go[0].tolist()))
    )
    b.sum().backward()
    # tensor hook x10, retain_grad sees that, prehook x3, Mul's rule x2.
    assert order == ["tensor", "pre", ("post", [60.0, 60.0], None, [30.0, 30.0])]
    assert b.grad.tolist() == [10.0, 10.0]
    assert a.grad.tolist() == [60.0, 60.0]


def test_node_hooks_remove_and_post_hook_replaces_gradients():
    a = fg.tensor([1.0, 2.0], requires_grad=True)
    c = a * 3
    h = c.grad_fn.register_prehook(lambda go: (go[0] * 100,))
    h.remove()
    h.remove()
    c.grad_fn.register_hook(lambda gi, go: (gi[0] + 1, None))
    c.sum().backward()
    assert a.grad.tolist() == [4.0, 4.0]


def test_node_hook_return_checks():
    a = fg.tensor([1.0, 2.0], requires_grad=True)
    c = a * 3
    c.grad_fn.register_prehook(lambda go: (go[0], go[0]))
    with pytest.raises(
        RuntimeError,
        match=r"hook '<lambda>' has returned an incorrect number of values "
        r"\(got 2, but expected 1\)",
    ):
        c.sum().backward()
    c = a * 3
    c.grad_fn.register_prehook(lambda go: go[0])
    with pytest.raises(TypeError, match="expected tuple, but hook returned 'Tensor'"):
        c.sum().backward()


def test_accumulator_node_hooks():
    a = fg.tensor([1.0, 2.0], requires_grad=True)
    c = a * 3
    acc = c.grad_fn.next_functions[0][0]
    assert acc.name() == "torch::autograd::AccumulateGrad"
    assert type(acc).__name__ == "AccumulateGrad"
    seen = []
    acc.register_prehook(lambda go: seen.append("pre"))
    acc.register_hook(lambda gi, go: seen.append((gi, go[0].tolist())))
    c.sum().backward()
    assert seen == ["pre", ((), [3.0, 3.0])]


def test_node_hooks_do_not_run_for_nodes_grad_does_not_execute():
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    z = (y * y).sum()
    ran = []
    y.grad_fn.register_prehook(lambda go: ran.append("y"))
    (gy,) = fg.autograd.grad(z, y)
    assert ran == []
    assert gy.tolist() == [4.0, 8.0]


def test_metadata_is_kept_with_the_node():
    x = fg.ones(2, requires_grad=True)
    y = x * 2
    assert y.grad_fn.metadata == {}
    y.grad_fn.metadata["tag"] = "scale"
    assert y.grad_fn.metadata == {"tag": "scale"}
    assert isinstance(y.grad_fn, graph.Node)


# ----- gradient edges ---------------------------------------------------------------------------


def test_gradient_edge_as_input_output_and_after_in_place():
    p = fg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    q = p * 2
    e = graph.get_gradient_edge(q)
    r = (q**2).sum()
    assert fg.autograd.grad(r, e, retain_graph=True)[0].tolist() == [4.0, 8.0, 12.0]
    gq, gp = fg.autograd.grad(r, [e, p])
    assert gq.tolist() == [4.0, 8.0, 12.0] and gp.tolist() == [8.0, 16.0, 24.0]
    # The edge stands for q's value before the in-place op.
    q2 = p * 2
    e2 = graph.get_gradient_edge(q2)
    q2.mul_(3)
    (g,) = fg.autograd.grad(q2.sum(), e2)
    assert g.tolist() == [3.0, 3.0, 3.0]
    # As an output, seeded by grad_outputs.
    q3 = p * 5
    (g3,) = fg.autograd.grad(graph.get_gradient_edge(q3), p, grad_outputs=fg.ones(3))
    assert g3.tolist() == [5.0, 5.0, 5.0]
    ep = graph.get_gradient_edge(p)
    assert ep.node.name() == "torch::autograd::AccumulateGrad" and ep.output_nr == 0


def test_gradient_edge_errors():
    with pytest.raises(RuntimeError, match="does not require gradients"):
        graph.get_gradient_edge(fg.ones(2))
    p = fg.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="all inputs have to be Tensors or GradientEdges"):
        fg.autograd.grad((p * 2).sum(), [1.0])


# ----- multi-tensor hooks, callbacks, versions --------------------------------------------------


def test_multi_grad_hook_all_and_any():
    m1 = fg.tensor([1.0, 2.0], requires_grad=True)
    m2 = fg.tensor([3.0, 4.0], requires_grad=True)
    got = []
    handle = graph.register_multi_grad_hook(
        (m1, m2), lambda gs: got.append([None if g is None else g.tolist() for g in gs])
    )
    (m1 * m2).sum().backward()
    (m1 * 2).sum().backward(inputs=[m1])
    assert got == [[[3.0, 4.0], [1.0, 2.0]], [[2.0, 2.0], None]]
    handle.remove()
    (m1 * m2).sum().backward()
    assert len(got) == 2
    first = []
    graph.register_multi_grad_hook((m1, m2), lambda g: first.append(g.tolist()), mode="any")
    (m1 * m2).sum().backward()
    (m1 * m2).sum().backward()
    # m1's accumulator runs first (the first edge of Mul), as in torch.
    assert first == [[3.0, 4.0], [3.0, 4.0]]
    with pytest.raises(ValueError, match="Expects mode to be one of"):
        graph.register_multi_grad_hook((m1,), lambda g: None, mode="some")


def test_queue_callback_runs_after_the_pass():
    events = []
    t = fg.tensor([1.0, 2.0], requires_grad=True)
    u = t * 2

    def hook(g):
        graph.queue_callback(lambda: events.append(("cb", t.grad is not None)))
        events.append("hook")

    u.register_hook(hook)
    u.sum().backward()
    events.append("after")
    assert events == ["hook", ("cb", True), "after"]
    with pytest.raises(
        RuntimeError, match="Final callbacks can only be installed during backward pass."
    ):
        graph.queue_callback(lambda: None)


def test_queue_callback_error_propagates():
    t = fg.ones(2, requires_grad=True)
    u = t * 2

    def boom():
        raise ValueError("boom")

    u.register_hook(lambda g: graph.queue_callback(boom))
    with pytest.raises(ValueError, match="boom"):
        u.sum().backward()


def test_increment_version_makes_backward_raise():
    s = fg.tensor([1.0, 2.0], requires_grad=True)
    v = fg.tensor([3.0, 4.0])
    w = (s * v).sum()
    before = v._version
    graph.increment_version([v])
    assert v._version == before + 1
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        w.backward()


# ----- the same programs on torch ---------------------------------------------------------------


def _observe(torch):
    g = torch.autograd.graph
    out = []
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    log = []
    with g.saved_tensors_hooks(
        lambda t: log.append(("pack", tuple(t.shape), torch.is_grad_enabled())) or t,
        lambda t: log.append(("unpack", torch.is_grad_enabled())) or t,
    ):
        z = (x.exp() * x).sum()
    z.backward()
    out.append(log)
    a = torch.tensor([1.0, 2.0], requires_grad=True)
    b = a * 2
    order = []
    b.register_hook(lambda gr: order.append("tensor") or gr * 10)
    b.grad_fn.register_prehook(lambda go: order.append("pre") or (go[0] * 3,))
    b.grad_fn.register_hook(lambda gi, go: order.append(("post", gi[1] is None)))
    b.sum().backward()
    out.append((order, a.grad.tolist()))
    m1 = torch.tensor([1.0, 2.0], requires_grad=True)
    m2 = torch.tensor([3.0, 4.0], requires_grad=True)
    got = []
    g.register_multi_grad_hook((m1, m2), lambda gs: got.append([x is None for x in gs]))
    (m1 * m2).sum().backward()
    (m1 * 2).sum().backward(inputs=[m1])
    out.append(got)
    first = []
    g.register_multi_grad_hook((m1, m2), lambda gr: first.append(gr.tolist()), mode="any")
    (m1 * m2).sum().backward()
    out.append(first)
    p = torch.tensor([1.0, 2.0], requires_grad=True)
    q = p * 2
    e = g.get_gradient_edge(q)
    q.mul_(3)
    out.append(torch.autograd.grad(q.sum(), e)[0].tolist())
    out.append(type(p.mul(2).grad_fn.next_functions[0][0]).__name__)
    return out


def test_same_observations_as_torch():
    torch = pytest.importorskip("torch")
    assert _observe(fg) == _observe(torch)


# ----- node-creation hooks, multithreading switch -----------------------------------------------


def test_node_creation_hook_sees_each_node_once_complete():
    a = fg.ones(2, requires_grad=True)
    seen = []

    def hook(node):
        # Complete: edges wired (the accumulator comes first, as in torch).
        seen.append((node.name(), len(node.next_functions)))
        node.metadata["tag"] = len(seen)

    with graph.node_creation_hook(hook):
        b = a * 2
        c = b.sum()
    a.exp()  # outside the context: not reported
    assert seen == [
        ("torch::autograd::AccumulateGrad", 0),
        ("MulBackward0", 2),
        ("SumBackward0", 1),
    ]
    assert b.grad_fn.metadata == {"tag": 2} and c.grad_fn.metadata == {"tag": 3}


def test_node_creation_hooks_nest_and_must_not_create_nodes():
    a = fg.ones(2, requires_grad=True)
    order = []
    with graph.node_creation_hook(lambda n: order.append("outer")):
        with graph.node_creation_hook(lambda n: order.append("inner")):
            (a * 2).sum()
    assert order == ["outer", "inner", "outer", "inner", "outer", "inner"]

    def bad(node):
        a * 3

    with graph.node_creation_hook(bad):
        with pytest.raises(
            RuntimeError, match="Creating a new autograd node from inside a node creation hook"
        ):
            a * 2


def test_node_creation_hook_fires_for_functions_and_backward_nodes():
    class Double(fg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = fg.tensor([1.0, 2.0], requires_grad=True)
    names = []
    with graph.node_creation_hook(lambda n: names.append(n.name())):
        y = Double.apply(x).exp().sum()
        # Nodes made while building the second-order graph are reported too.
        (g,) = fg.autograd.grad(y, x, create_graph=True)
    assert names[:3] == ["torch::autograd::AccumulateGrad", "DoubleBackward", "ExpBackward0"]
    assert len(names) > 4


def test_set_multithreading_enabled_gives_the_same_gradients():
    prev = fg.get_num_threads()
    fg.set_num_threads(2)
    try:
        fg.manual_seed(1)
        x = fg.randn(256, 256, dtype=fg.float64, requires_grad=True)
        threads = []
        branches = [(x * (k + 1)).tanh() for k in range(4)]
        for b in branches:
            b.register_hook(lambda g: threads.append(threading.get_ident()))
        loss = sum(b.sum() for b in branches)
        (g1,) = fg.autograd.grad(loss, x, retain_graph=True)
        threads.clear()
        assert fg.autograd.grad_mode._C._is_multithreading_enabled()
        with fg.autograd.set_multithreading_enabled(False):
            assert not fg.autograd.grad_mode._C._is_multithreading_enabled()
            (g2,) = fg.autograd.grad(loss, x)
        # Every node ran on this thread.
        assert threads == [threading.get_ident()] * 4
        assert fg.autograd.grad_mode._C._is_multithreading_enabled()
        assert np.array_equal(g1.numpy(), g2.numpy())
    finally:
        fg.set_num_threads(prev)
