"""nn.Parameter and nn.Module: registration, traversal, state_dict, hooks and repr, checked
against torch's documented behaviour (exact strings copied from torch 2.x)."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, List

import ferrograd as torch
import numpy as np
import pytest
from ferrograd import nn


class TwoLayer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = Lin(3, 4)
        self.out = Lin(4, 2)
        self.register_buffer("steps", torch.zeros(1))
        self.register_buffer("scratch", torch.zeros(2), persistent=False)

    def forward(self, x: Any) -> Any:
        return self.out(self.fc(x).tanh())


class Lin(nn.Module):
    def __init__(self, i: int, o: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(o, i))
        self.bias = nn.Parameter(torch.randn(o))

    def forward(self, x: Any) -> Any:
        return x.matmul(self.weight.t()) + self.bias

    def extra_repr(self) -> str:
        return f"in_features={self.weight.shape[1]}, out_features={self.weight.shape[0]}"


def test_parameter_is_a_leaf_tensor_with_identity() -> None:
    p = nn.Parameter(torch.tensor([1.0, 2.0]))
    assert isinstance(p, torch.Tensor) and isinstance(p, nn.Parameter)
    assert p.requires_grad and p.is_leaf and p.grad_fn is None
    (p * p).sum().backward()
    assert p.grad is not None
    np.testing.assert_allclose(p.grad.numpy(), [2.0, 4.0])
    with torch.no_grad():
        p -= 0.5 * p.grad
    assert type(p) is nn.Parameter
    np.testing.assert_allclose(p.detach().numpy(), [0.0, 0.0])
    assert repr(nn.Parameter(torch.tensor([1.0, 2.0]))) == (
        "Parameter containing:\ntensor([1., 2.], requires_grad=True)"
    )
    assert str(nn.Parameter(torch.tensor([1.0]), requires_grad=False)) == (
        "Parameter containing:\ntensor([1.])"
    )
    assert nn.Parameter().shape == (0,)


def test_parameter_shares_storage_and_the_engine_returns_it() -> None:
    t = torch.tensor([1.0, 2.0])
    p = nn.Parameter(t)
    with torch.no_grad():
        p.mul_(3.0)
    np.testing.assert_allclose(t.numpy(), [3.0, 6.0])
    m = Lin(2, 2)
    assert m.weight is m.weight
    w = m.weight
    del m
    # the object registered for the tensor is the Parameter, also when reached from a graph
    y = (w * 2).sum()
    y.backward()
    assert y.grad_fn is not None
    assert w.grad is not None


def test_tensor_cannot_be_constructed_directly() -> None:
    with pytest.raises(TypeError):
        torch.Tensor(torch.zeros(1))  # type: ignore[call-arg]


def test_registration_and_traversal() -> None:
    torch.manual_seed(0)
    m = TwoLayer()
    assert [n for n, _ in m.named_parameters()] == [
        "fc.weight",
        "fc.bias",
        "out.weight",
        "out.bias",
    ]
    assert [n for n, _ in m.named_buffers()] == ["steps", "scratch"]
    assert [n for n, _ in m.named_children()] == ["fc", "out"]
    assert [n for n, _ in m.named_modules()] == ["", "fc", "out"]
    assert [n for n, _ in m.named_parameters(prefix="m", recurse=False)] == []
    assert list(m.state_dict().keys()) == [
        "steps",
        "fc.weight",
        "fc.bias",
        "out.weight",
        "out.bias",
    ]
    # shared weights appear once unless remove_duplicate=False
    m.out.weight = m.fc.weight if m.fc.weight.shape == m.out.weight.shape else m.out.weight
    shared = nn.Module()
    shared.a = Lin(2, 2)
    shared.b = Lin(2, 2)
    shared.b.weight = shared.a.weight
    assert [n for n, _ in shared.named_parameters()] == ["a.weight", "a.bias", "b.bias"]
    assert len(list(shared.named_parameters(remove_duplicate=False))) == 4
    assert len(list(shared.parameters())) == 3
    # attribute rules
    with pytest.raises(TypeError, match="cannot assign 'int' as parameter 'weight'"):
        shared.a.weight = 3
    shared.a.weight = None
    assert "weight" in shared.a._parameters and shared.a.weight is None
    with pytest.raises(AttributeError, match="'Lin' object has no attribute 'nope'"):
        _ = shared.a.nope
    del shared.b
    assert [n for n, _ in shared.named_children()] == ["a"]
    assert "a" in dir(shared)
    with pytest.raises(KeyError):
        shared.register_buffer("a", torch.zeros(1))
    shared.add_module("c", Lin(1, 1))
    shared.register_module("d", None)
    assert [n for n, _ in shared.named_children()] == ["a", "c"]
    assert shared.get_submodule("c") is shared.c
    assert shared.get_parameter("c.bias") is shared.c.bias


def test_train_eval_zero_grad_requires_grad_apply() -> None:
    m = TwoLayer()
    assert m.training and m.fc.training
    m.eval()
    assert not m.training and not m.fc.training and not m.out.training
    m.train()
    assert m.out.training
    with pytest.raises(ValueError, match="training mode is expected to be boolean"):
        m.train(1)  # type: ignore[arg-type]
    m(torch.randn(5, 3)).sum().backward()
    assert all(p.grad is not None for p in m.parameters())
    m.zero_grad(set_to_none=False)
    assert all(float(p.grad.abs().sum()) == 0.0 for p in m.parameters())
    m.zero_grad()
    assert all(p.grad is None for p in m.parameters())
    m.requires_grad_(False)
    assert not any(p.requires_grad for p in m.parameters())
    seen: List[str] = []
    m.apply(lambda mod: seen.append(type(mod).__name__))
    assert seen == ["Lin", "Lin", "TwoLayer"]


def test_to_double_and_float() -> None:
    m = TwoLayer().double()
    assert all(p.dtype == torch.float64 for p in m.parameters())
    assert isinstance(m.fc.weight, nn.Parameter) and m.fc.weight.requires_grad
    assert m.steps.dtype == torch.float64
    m.to(torch.float32).to("cpu").to(device="cpu").cpu()
    assert all(p.dtype == torch.float32 for p in m.parameters())
    with pytest.raises(RuntimeError):
        m.to("cuda")


def test_state_dict_round_trip_and_errors() -> None:
    torch.manual_seed(1)
    a, b = TwoLayer(), TwoLayer()
    sd = a.state_dict()
    assert isinstance(sd, OrderedDict)
    assert not sd["fc.weight"].requires_grad
    assert sd["fc.weight"].data_ptr() == a.fc.weight.data_ptr()
    assert isinstance(a.state_dict(keep_vars=True)["fc.weight"], nn.Parameter)
    res = b.load_state_dict(sd)
    assert repr(res) == "<All keys matched successfully>"
    for (_, x), (_, y) in zip(a.named_parameters(), b.named_parameters()):
        np.testing.assert_array_equal(x.detach().numpy(), y.detach().numpy())

    lin = Lin(3, 2)
    before = {k: v.numpy().copy() for k, v in lin.state_dict().items()}
    with pytest.raises(RuntimeError) as e:
        lin.load_state_dict({"weight": torch.zeros(2, 3)})
    assert str(e.value) == (
        'Error(s) in loading state_dict for Lin:\n\tMissing key(s) in state_dict: "bias". '
    )
    with pytest.raises(RuntimeError) as e:
        lin.load_state_dict(
            {"weight": torch.zeros(2, 3), "bias": torch.zeros(3), "x": torch.ones(1)}
        )
    assert str(e.value) == (
        "Error(s) in loading state_dict for Lin:\n\t"
        'Unexpected key(s) in state_dict: "x". \n\t'
        "size mismatch for bias: copying a param with shape torch.Size([3]) from checkpoint, "
        "the shape in current model is torch.Size([2])."
    )
    # nothing was written by the failed loads
    for k, v in lin.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), before[k])
    res = lin.load_state_dict({"weight": torch.zeros(2, 3), "y": torch.ones(1)}, strict=False)
    assert res.missing_keys == ["bias"] and res.unexpected_keys == ["y"]
    assert float(lin.weight.abs().sum()) == 0.0


def test_hooks_order_and_removal() -> None:
    m = Lin(2, 2)
    calls: List[str] = []

    def pre(mod: Any, args: Any) -> Any:
        calls.append("pre")
        return (args[0] * 0,)

    def post(mod: Any, args: Any, out: Any) -> Any:
        calls.append("post")
        return out + 1

    h1 = m.register_forward_pre_hook(pre)
    h2 = m.register_forward_hook(post)
    m.register_forward_hook(lambda mod, a, o: calls.append("first"), prepend=True)
    out = m(torch.ones(1, 2))
    assert calls == ["pre", "first", "post"]
    np.testing.assert_allclose(out.detach().numpy(), m.bias.detach().numpy()[None] + 1, rtol=1e-6)
    h1.remove()
    h2.remove()
    calls.clear()
    m(torch.ones(1, 2))
    assert calls == ["first"]


def test_hooks_registered_after_hookless_calls_fire() -> None:
    # A module without hooks skips the hook bookkeeping; registering one later must still
    # take effect on the next call, and removing them all must restore the plain output.
    m = Lin(2, 2)
    x = torch.ones(1, 2, requires_grad=True)
    plain = m(x).detach().numpy()
    want = x.detach().numpy() @ m.weight.detach().numpy().T + m.bias.detach().numpy()
    np.testing.assert_allclose(plain, want, rtol=1e-6)
    seen: List[str] = []
    handles = [
        m.register_forward_pre_hook(lambda mod, a: (a[0] * 2,)),
        m.register_forward_hook(lambda mod, a, o: o - 1),
        m.register_full_backward_hook(lambda mod, gi, go: seen.append("backward")),
    ]
    out = m(x)
    want2 = 2 * x.detach().numpy() @ m.weight.detach().numpy().T + m.bias.detach().numpy() - 1
    np.testing.assert_allclose(out.detach().numpy(), want2, rtol=1e-6)
    out.sum().backward()
    assert seen == ["backward"]
    for h in handles:
        h.remove()
    np.testing.assert_allclose(m(x).detach().numpy(), plain, rtol=1e-6)


def test_full_backward_hook() -> None:
    m = Lin(2, 3)
    got: List[Any] = []

    def hook(mod: Any, grad_input: Any, grad_output: Any) -> Any:
        got.append((grad_input, grad_output))
        return (grad_input[0] * 2,)

    h = m.register_full_backward_hook(hook)
    x = torch.ones(1, 2, requires_grad=True)
    m(x).sum().backward()
    assert len(got) == 1
    (gi,), (go,) = got[0]
    np.testing.assert_allclose(go.numpy(), np.ones((1, 3)))
    expected = m.weight.detach().numpy().sum(0)[None]
    np.testing.assert_allclose(gi.numpy(), expected, rtol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), 2 * expected, rtol=1e-6)
    h.remove()
    x.grad = None
    m(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-6)


def test_repr_nested() -> None:
    m = TwoLayer()
    assert repr(m) == (
        "TwoLayer(\n"
        "  (fc): Lin(in_features=3, out_features=4)\n"
        "  (out): Lin(in_features=4, out_features=2)\n"
        ")"
    )
    outer = nn.Module()
    outer.inner = m
    assert repr(outer) == (
        "Module(\n"
        "  (inner): TwoLayer(\n"
        "    (fc): Lin(in_features=3, out_features=4)\n"
        "    (out): Lin(in_features=4, out_features=2)\n"
        "  )\n"
        ")"
    )
    assert repr(nn.Module()) == "Module()"


def test_parameter_data_assignment_keeps_identity() -> None:
    """The old-style update ``p.data -= lr * p.grad`` (and ``p.data = t``) works in place."""
    m = Lin(2, 1)
    w = m.weight
    w.grad = torch.ones(1, 2)
    before = w.detach().numpy().copy()
    w.data -= 0.5 * w.grad
    assert m.weight is w and w.requires_grad and w.is_leaf
    np.testing.assert_allclose(w.detach().numpy(), before - 0.5)
    w.data = torch.zeros(1, 2)
    assert float(w.abs().sum()) == 0.0
    with pytest.raises(RuntimeError, match="another shape or dtype"):
        w.data = torch.zeros(3)
    assert isinstance(w.data, torch.Tensor) and not w.data.requires_grad


def test_deepcopy_of_parameter() -> None:
    import copy

    p = nn.Parameter(torch.tensor([1.0, 2.0]))
    q = copy.deepcopy(p)
    assert type(q) is nn.Parameter and q is not p and q.requires_grad
    np.testing.assert_array_equal(q.detach().numpy(), [1.0, 2.0])
    assert q.data_ptr() != p.data_ptr()


def test_hooks_with_kwargs() -> None:
    class Scale(nn.Module):
        def forward(self, x: Any, factor: float = 1.0) -> Any:
            return x * factor

    m = Scale()
    m.register_forward_pre_hook(lambda mod, a, kw: (a, {"factor": 3.0}), with_kwargs=True)
    seen: List[Any] = []
    m.register_forward_hook(lambda mod, a, kw, out: seen.append(kw), with_kwargs=True)
    np.testing.assert_allclose(m(torch.ones(2), factor=2.0).numpy(), [3.0, 3.0])
    assert seen == [{"factor": 3.0}]
    bad = Scale()
    bad.register_forward_pre_hook(lambda mod, a, kw: 5, with_kwargs=True)
    with pytest.raises(RuntimeError, match="forward pre-hook must return None or a tuple"):
        bad(torch.ones(1))


def test_deepcopy_of_module_with_buffers_and_shared_weights() -> None:
    import copy

    m = TwoLayer()
    m.out.extra = m.fc  # the same submodule twice
    c = copy.deepcopy(m)
    assert c is not m and c.fc is not m.fc and c.out.extra is c.fc
    assert isinstance(c.fc.weight, nn.Parameter) and c.fc.weight is not m.fc.weight
    assert c.steps is not m.steps and c.steps.data_ptr() != m.steps.data_ptr()
    assert list(c.state_dict()) == list(m.state_dict())
    for (_, a), (_, b) in zip(c.state_dict().items(), m.state_dict().items()):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    c(torch.randn(2, 3)).sum().backward()
    assert c.fc.weight.grad is not None and m.fc.weight.grad is None
