"""nn.Module behaviour side by side with torch (skipped when torch is not installed): messages,
traversal orders, hook calls and layer outputs/gradients with the same weights."""

from __future__ import annotations

from typing import Any, List

import ferrograd as fg
import numpy as np
import pytest
from ferrograd import nn

torch = pytest.importorskip("torch")


def _build(lib: Any) -> Any:
    class Net(lib.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.ReLU())
            self.heads = lib.nn.ModuleDict({"a": lib.nn.Linear(4, 2), "b": lib.nn.Linear(4, 1)})
            self.register_buffer("count", lib.zeros(1))
            self.register_buffer("tmp", lib.zeros(1), persistent=False)
            self.scale = lib.nn.Parameter(lib.ones(1))

        def forward(self, x: Any) -> Any:
            h = self.body(x)
            return self.heads["a"](h) * self.scale, self.heads["b"](h)

    return Net()


def _sync(src: Any, dst: Any) -> None:
    dst.load_state_dict({k: fg.tensor(v.detach().numpy()) for k, v in src.state_dict().items()})


def test_names_orders_repr_and_messages_match() -> None:
    t, f = _build(torch), _build(fg)
    assert [n for n, _ in t.named_parameters()] == [n for n, _ in f.named_parameters()]
    assert [n for n, _ in t.named_buffers()] == [n for n, _ in f.named_buffers()]
    assert [n for n, _ in t.named_modules()] == [n for n, _ in f.named_modules()]
    assert list(t.state_dict()) == list(f.state_dict())
    assert repr(t) == repr(f)
    sd_t = {k: v for k, v in t.state_dict().items() if k != "heads.b.bias"}
    sd_t["heads.a.weight"] = torch.zeros(3, 3)
    sd_t["extra.thing"] = torch.zeros(1)
    with pytest.raises(RuntimeError) as et:
        t.load_state_dict(sd_t)
    with pytest.raises(RuntimeError) as ef:
        f.load_state_dict({k: fg.tensor(v.numpy()) for k, v in sd_t.items()})
    assert str(et.value).replace("Net", "X") == str(ef.value).replace("Net", "X")
    rt = t.load_state_dict(sd_t | {"heads.a.weight": torch.zeros(2, 4)}, strict=False)
    rf = f.load_state_dict(
        {k: fg.tensor(v.numpy()) for k, v in sd_t.items()} | {"heads.a.weight": fg.zeros(2, 4)},
        strict=False,
    )
    assert repr(rt) == repr(rf)
    with pytest.raises(TypeError) as et2:
        t.body[0].weight = 3
    with pytest.raises(TypeError) as ef2:
        f.body[0].weight = 3
    assert str(et2.value) == str(ef2.value)


def test_forward_backward_and_hooks_match() -> None:
    t, f = _build(torch), _build(fg)
    _sync(t, f)
    logs: List[List[str]] = [[], []]
    grads: List[List[Any]] = [[], []]
    for i, m in enumerate((t, f)):
        log = logs[i]
        m.body.register_forward_pre_hook(lambda mod, a, log=log: log.append("pre"))
        m.body.register_forward_hook(lambda mod, a, o, log=log: log.append("fwd"))
        m.heads["a"].register_full_backward_hook(
            lambda mod, gi, go, g=grads[i]: g.append((gi[0].numpy().copy(), go[0].numpy().copy()))
        )
    x = np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32)
    ot = t(torch.tensor(x))
    of = f(fg.tensor(x))
    for a, b in zip(ot, of):
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-5, atol=1e-6)
    (ot[0].square().sum() + ot[1].sum()).backward()
    (of[0].square().sum() + of[1].sum()).backward()
    assert logs[0] == logs[1] == ["pre", "fwd"]
    assert len(grads[0]) == len(grads[1]) == 1
    for a, b in zip(grads[0][0], grads[1][0]):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
    for (n1, p1), (n2, p2) in zip(t.named_parameters(), f.named_parameters()):
        assert n1 == n2
        np.testing.assert_allclose(p2.grad.numpy(), p1.grad.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "name,args",
    [
        ("ReLU6", ()),
        ("LeakyReLU", (0.1,)),
        ("ELU", (0.7,)),
        ("SELU", ()),
        ("GELU", ("tanh",)),
        ("SiLU", ()),
        ("Mish", ()),
        ("Softplus", (2.0, 5.0)),
        ("Hardtanh", (-0.5, 0.5)),
        ("Hardswish", ()),
        ("Softmax", (1,)),
        ("LogSoftmax", (1,)),
    ],
)
def test_activations_match(name: str, args: Any) -> None:
    x = np.random.default_rng(1).normal(size=(4, 6)) * 3
    mt, mf = getattr(torch.nn, name)(*args), getattr(nn, name)(*args)
    xt = torch.tensor(x, requires_grad=True)
    xf = fg.tensor(x, requires_grad=True)
    yt, yf = mt(xt), mf(xf)
    np.testing.assert_allclose(yf.detach().numpy(), yt.detach().numpy(), rtol=1e-10, atol=1e-12)
    (yt * yt).sum().backward()
    (yf * yf).sum().backward()
    np.testing.assert_allclose(xf.grad.numpy(), xt.grad.numpy(), rtol=1e-9, atol=1e-12)
    assert repr(mt) == repr(mf)


def test_losses_match() -> None:
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=(4, 3)), rng.uniform(size=(4, 3))
    p = 1 / (1 + np.exp(-a))
    cls = np.array([0, 2, 1, 2])
    cases = [
        ("MSELoss", {}, a, b),
        ("L1Loss", {"reduction": "none"}, a, b),
        ("SmoothL1Loss", {"beta": 0.3}, a, b),
        ("HuberLoss", {"delta": 0.3}, a, b),
        ("BCELoss", {}, p, b),
        ("BCEWithLogitsLoss", {}, a, b),
        ("KLDivLoss", {"reduction": "batchmean"}, np.log(p), b),
        ("CrossEntropyLoss", {"label_smoothing": 0.2}, a, cls),
        ("NLLLoss", {}, a, cls),
    ]
    for name, kw, x, y in cases:
        lt, lf = getattr(torch.nn, name)(**kw), getattr(nn, name)(**kw)
        xt = torch.tensor(x, requires_grad=True)
        xf = fg.tensor(x, requires_grad=True)
        vt, vf = lt(xt, torch.tensor(y)), lf(xf, fg.tensor(y))
        np.testing.assert_allclose(vf.detach().numpy(), vt.detach().numpy(), rtol=1e-10)
        vt.sum().backward()
        vf.sum().backward()
        np.testing.assert_allclose(xf.grad.numpy(), xt.grad.numpy(), rtol=1e-9, atol=1e-12)
        assert repr(lt) == repr(lf)


def test_layers_more_match() -> None:
    rng = np.random.default_rng(3)
    for tm, fm, x in [
        (torch.nn.Embedding(6, 3, padding_idx=2), nn.Embedding(6, 3, padding_idx=2), None),
        (
            torch.nn.Conv2d(2, 4, 3, padding=1, groups=2),
            nn.Conv2d(2, 4, 3, padding=1, groups=2),
            rng.normal(size=(2, 2, 5, 5)).astype(np.float32),
        ),
        (
            torch.nn.Conv1d(3, 2, 3, stride=2, dilation=2, bias=False),
            nn.Conv1d(3, 2, 3, stride=2, dilation=2, bias=False),
            rng.normal(size=(2, 3, 9)).astype(np.float32),
        ),
    ]:
        _sync(tm, fm)
        assert repr(tm) == repr(fm)
        if x is None:
            it, iff = torch.tensor([[0, 2, 5]]), fg.tensor([[0, 2, 5]])
        else:
            it, iff = torch.tensor(x), fg.tensor(x)
        yt, yf = tm(it), fm(iff)
        np.testing.assert_allclose(yf.detach().numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-5)
        yt.square().sum().backward()
        yf.square().sum().backward()
        for p1, p2 in zip(tm.parameters(), fm.parameters()):
            np.testing.assert_allclose(p2.grad.numpy(), p1.grad.numpy(), rtol=1e-4, atol=1e-5)
