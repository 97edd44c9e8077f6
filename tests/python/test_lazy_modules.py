"""Lazy modules (``nn.LazyLinear``, the lazy convolutions and norms) and the
``UninitializedParameter``/``UninitializedBuffer`` placeholders: shapes inferred from the first
input, the class they become, state_dict behaviour, torch's errors, and torch's outputs."""

from __future__ import annotations

import copy
import math
import re

import ferrograd as fg
import numpy as np
import pytest
from ferrograd import nn
from ferrograd.nn.parameter import UninitializedBuffer, UninitializedParameter, is_lazy

USE_MSG = re.escape("Attempted to use an uninitialized parameter in ")
SHAPE_MSG = re.escape("Can't access the shape of an uninitialized parameter or buffer.")

# (lazy class, constructor args, input shape, plain class, weight shape, kwargs for plain class)
CONVS = [
    ("LazyConv1d", (6, 3), (2, 4, 9), "Conv1d", (6, 4, 3)),
    ("LazyConv2d", (6, 3), (2, 4, 7, 7), "Conv2d", (6, 4, 3, 3)),
    ("LazyConv3d", (6, 3), (2, 4, 5, 5, 5), "Conv3d", (6, 4, 3, 3, 3)),
    ("LazyConvTranspose1d", (6, 3), (2, 4, 9), "ConvTranspose1d", (4, 6, 3)),
    ("LazyConvTranspose2d", (6, 3), (2, 4, 5, 5), "ConvTranspose2d", (4, 6, 3, 3)),
    ("LazyConvTranspose3d", (6, 3), (2, 4, 4, 4, 4), "ConvTranspose3d", (4, 6, 3, 3, 3)),
]

NORMS = [
    ("LazyBatchNorm1d", (5, 4), "BatchNorm1d"),
    ("LazyBatchNorm2d", (2, 4, 3, 3), "BatchNorm2d"),
    ("LazyBatchNorm3d", (2, 4, 3, 3, 2), "BatchNorm3d"),
    ("LazyInstanceNorm1d", (2, 4, 7), "InstanceNorm1d"),
    ("LazyInstanceNorm2d", (2, 4, 3, 3), "InstanceNorm2d"),
    ("LazyInstanceNorm3d", (2, 4, 3, 3, 2), "InstanceNorm3d"),
]


def test_lazy_linear_before_forward():
    m = nn.LazyLinear(3)
    assert repr(m) == "LazyLinear(in_features=0, out_features=3, bias=True)"
    assert isinstance(m.weight, UninitializedParameter) and is_lazy(m.bias)
    assert isinstance(m.weight, nn.Parameter)
    assert repr(m.weight) == "<UninitializedParameter>"
    assert m.has_uninitialized_params()
    sd = m.state_dict()
    assert list(sd) == ["weight", "bias"] and all(is_lazy(v) for v in sd.values())
    assert [n for n, _ in m.named_parameters()] == ["weight", "bias"]


def test_lazy_linear_materializes_as_linear():
    fg.manual_seed(0)
    m = nn.LazyLinear(3, dtype=fg.float64)
    x = fg.randn(2, 7, 5, dtype=fg.float64)
    y = m(x)
    assert type(m) is nn.Linear
    assert m.in_features == 5 and m.out_features == 3
    assert tuple(m.weight.shape) == (3, 5) and tuple(m.bias.shape) == (3,)
    assert type(m.weight) is nn.Parameter and m.weight.requires_grad
    assert m.weight.dtype == fg.float64
    assert not m._forward_pre_hooks and not m._load_state_dict_pre_hooks
    # torch's default initialisation: both bounded by 1/sqrt(fan_in), and not all zero.
    bound = 1 / math.sqrt(5)
    w, b = m.weight.detach().numpy(), m.bias.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound and np.abs(w).max() > 0
    expected = x.numpy() @ w.T + b
    np.testing.assert_allclose(y.detach().numpy(), expected, rtol=1e-12)
    y.sum().backward()
    np.testing.assert_allclose(
        m.weight.grad.numpy(), np.broadcast_to(x.numpy().reshape(-1, 5).sum(0), (3, 5)), rtol=1e-12
    )


def test_lazy_linear_no_bias_and_second_call():
    m = nn.LazyLinear(2, bias=False)
    m(fg.randn(4, 3))
    assert m.bias is None and tuple(m.weight.shape) == (2, 3)
    w = m.weight
    m(fg.randn(1, 3))
    assert m.weight is w  # initialised once


@pytest.mark.parametrize("lazy, args, in_shape, plain, wshape", CONVS, ids=[c[0] for c in CONVS])
def test_lazy_conv(lazy, args, in_shape, plain, wshape):
    fg.manual_seed(1)
    m = getattr(nn, lazy)(*args, dtype=fg.float64)
    assert repr(m).startswith(f"{lazy}(0, 6, kernel_size=")
    x = fg.randn(*in_shape, dtype=fg.float64)
    y = m(x)
    assert type(m) is getattr(nn, plain)
    assert m.in_channels == 4 and tuple(m.weight.shape) == wshape
    assert tuple(m.bias.shape) == (6,)
    ref = getattr(nn, plain)(4, *args, dtype=fg.float64)
    ref.load_state_dict(m.state_dict())
    np.testing.assert_allclose(y.detach().numpy(), ref(x).detach().numpy(), rtol=1e-12)


def test_lazy_conv_unbatched_and_groups():
    m = nn.LazyConv2d(4, 3, groups=2)
    y = m(fg.randn(6, 5, 5))  # unbatched: channels are dimension 0
    assert tuple(m.weight.shape) == (4, 3, 3, 3) and tuple(y.shape) == (4, 3, 3)
    with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
        nn.LazyConv2d(4, 3, groups=2)(fg.randn(1, 5, 5, 5))
    with pytest.raises(
        RuntimeError,
        match=re.escape(
            "Expected 3D (unbatched) or 4D (batched) input to LazyConv2d, but got input of size: "
        ),
    ):
        nn.LazyConv2d(4, 3)(fg.randn(5, 5))


@pytest.mark.parametrize("lazy, in_shape, plain", NORMS, ids=[n[0] for n in NORMS])
def test_lazy_norm(lazy, in_shape, plain):
    fg.manual_seed(2)
    m = getattr(nn, lazy)()
    assert repr(m).startswith(f"{lazy}(0, eps=1e-05")
    if "BatchNorm" in lazy:
        assert isinstance(m.running_mean, UninitializedBuffer)
    x = fg.randn(*in_shape) * 3 + 1
    y = m(x)
    assert type(m) is getattr(nn, plain)
    assert m.num_features == 4
    np.testing.assert_array_equal(m.weight.detach().numpy(), np.ones(4, np.float32))
    np.testing.assert_array_equal(m.bias.detach().numpy(), np.zeros(4, np.float32))
    ref = getattr(nn, plain)(4, affine=True, track_running_stats=True)
    yr = ref(x)
    np.testing.assert_allclose(y.detach().numpy(), yr.detach().numpy(), rtol=1e-6, atol=1e-6)
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        np.testing.assert_allclose(getattr(m, name).numpy(), getattr(ref, name).numpy(), 1e-6)
    assert int(m.num_batches_tracked) == (1 if "BatchNorm" in lazy else 0)


def test_lazy_norm_without_affine_or_stats():
    m = nn.LazyBatchNorm1d(affine=False, track_running_stats=False)
    assert not m.has_uninitialized_params()
    y = m(fg.randn(8, 3))
    assert type(m) is nn.BatchNorm1d and m.num_features == 0  # nothing to infer, as torch
    assert m.weight is None and m.running_mean is None and tuple(y.shape) == (8, 3)


def test_load_state_dict_materializes():
    src = nn.Linear(4, 3)
    m = nn.LazyLinear(3)
    result = m.load_state_dict(src.state_dict())
    assert not result.missing_keys and not result.unexpected_keys
    assert not m.has_uninitialized_params()
    assert type(m) is nn.LazyLinear  # becomes Linear at the first forward, as torch
    np.testing.assert_array_equal(m.weight.detach().numpy(), src.weight.detach().numpy())
    x = fg.randn(2, 4)
    np.testing.assert_array_equal(m(x).detach().numpy(), src(x).detach().numpy())
    assert type(m) is nn.Linear and m.in_features == 4


def test_lazy_into_lazy_and_into_initialized():
    m = nn.LazyLinear(3)
    m.load_state_dict(nn.LazyLinear(3).state_dict())
    assert m.has_uninitialized_params()
    with pytest.raises(RuntimeError, match=SHAPE_MSG):
        nn.Linear(4, 3).load_state_dict(nn.LazyLinear(3).state_dict())


def test_uninitialized_use_errors():
    p = UninitializedParameter()
    with pytest.raises(
        ValueError,
        match=USE_MSG + r".*add.*torch\.nn\.parameter\."
        r"UninitializedParameter",
    ):
        p + 1
    with pytest.raises(ValueError, match=USE_MSG):
        p.numel()
    with pytest.raises(RuntimeError, match=SHAPE_MSG):
        _ = p.shape
    b = UninitializedBuffer()
    assert repr(b) == "<UninitializedBuffer>" and not b.requires_grad and b.persistent
    with pytest.raises(ValueError, match=USE_MSG + r".*UninitializedBuffer"):
        b.sum()


def test_optimizer_refuses_uninitialized():
    with pytest.raises(ValueError, match=USE_MSG + "Optimizer.add_param_group"):
        fg.optim.SGD(nn.LazyLinear(3).parameters(), lr=0.1)
    m = nn.LazyLinear(3)
    m(fg.randn(1, 2))
    fg.optim.SGD(m.parameters(), lr=0.1)  # after the forward it is fine


def test_dtype_conversion_before_forward():
    m = nn.LazyLinear(3).double()
    assert is_lazy(m.weight) and m.weight.dtype == fg.float64
    m(fg.randn(2, 4, dtype=fg.float64))
    assert m.weight.dtype == fg.float64 and m.bias.dtype == fg.float64


def test_deepcopy_keeps_lazy():
    m = nn.Sequential(nn.LazyLinear(3), nn.ReLU(), nn.LazyBatchNorm1d())
    c = copy.deepcopy(m)
    assert is_lazy(c[0].weight) and c[0].weight is not m[0].weight
    assert is_lazy(c[2].running_mean)
    c(fg.randn(4, 2))
    assert is_lazy(m[0].weight) and tuple(c[0].weight.shape) == (3, 2)
    assert type(c[2]) is nn.BatchNorm1d and type(m[2]) is nn.LazyBatchNorm1d


def test_custom_lazy_module_errors():
    class NoInit(nn.LazyModuleMixin, nn.Module):
        def __init__(self):
            super().__init__()
            self.w = UninitializedParameter()

        def forward(self, x):
            return x

    with pytest.raises(
        NotImplementedError, match="initialize_parameters is not implemented for NoInit"
    ):
        NoInit()(fg.ones(1))

    class Partial(NoInit):
        def initialize_parameters(self, x):
            pass

    with pytest.raises(RuntimeError, match="module Partial has not been fully initialized"):
        Partial()(fg.ones(1))

    class Custom(NoInit):
        def initialize_parameters(self, x):
            self.w.materialize((x.shape[0], 2))
            with fg.no_grad():
                self.w.fill_(0.5)  # the new tensor, reached through the module

        def forward(self, x):
            return x @ self.w

    m = Custom()
    y = m(fg.ones(3))
    np.testing.assert_allclose(y.detach().numpy(), [1.5, 1.5])
    assert type(m) is Custom and [n for n, _ in m.named_parameters()] == ["w"]


# ----- torch -------------------------------------------------------------------------------


def _to_torch_state(torch, module):
    return {k: torch.tensor(v.numpy()) for k, v in module.state_dict().items()}


@pytest.mark.parametrize(
    "name, args, in_shape",
    [
        ("LazyLinear", (3,), (2, 5)),
        ("LazyConv2d", (3, 2), (2, 4, 5, 5)),
        ("LazyConvTranspose1d", (3, 2), (2, 4, 6)),
        ("LazyBatchNorm2d", (), (3, 4, 2, 2)),
        ("LazyInstanceNorm1d", (), (2, 4, 6)),
    ],
)
def test_against_torch(name, args, in_shape):
    torch = pytest.importorskip("torch")
    fm = getattr(nn, name)(*args, dtype=fg.float64)
    tm = getattr(torch.nn, name)(*args, dtype=torch.float64)
    assert repr(fm) == repr(tm)
    assert list(fm.state_dict()) == list(tm.state_dict())
    x = np.random.default_rng(0).standard_normal(in_shape)
    fx = fg.tensor(x, requires_grad=True)
    tx = torch.tensor(x, requires_grad=True)
    fm(fx)
    tm(tx)
    assert type(fm).__name__ == type(tm).__name__
    assert repr(fm) == repr(tm)
    # Same parameters, then the same outputs and gradients.
    tm.load_state_dict(_to_torch_state(torch, fm))
    fy, ty = fm(fx), tm(tx)
    np.testing.assert_allclose(fy.detach().numpy(), ty.detach().numpy(), rtol=1e-10, atol=1e-12)
    fy.pow(2).sum().backward()
    ty.pow(2).sum().backward()
    np.testing.assert_allclose(fx.grad.numpy(), tx.grad.numpy(), rtol=1e-8, atol=1e-10)
    for (n, p), (_, q) in zip(fm.named_parameters(), tm.named_parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-8, atol=1e-10, err_msg=n)


def test_errors_match_torch():
    torch = pytest.importorskip("torch")

    def message(fn):
        with pytest.raises(Exception) as info:
            fn()
        return type(info.value), str(info.value)

    ft, fmsg = message(lambda: nn.Linear(4, 3).load_state_dict(nn.LazyLinear(3).state_dict()))
    tt, tmsg = message(
        lambda: torch.nn.Linear(4, 3).load_state_dict(torch.nn.LazyLinear(3).state_dict())
    )
    assert (ft, fmsg) == (tt, tmsg)
    ft, fmsg = message(lambda: nn.LazyConv1d(2, 3)(fg.randn(2, 2, 2, 5)))
    tt, tmsg = message(lambda: torch.nn.LazyConv1d(2, 3)(torch.randn(2, 2, 2, 5)))
    assert ft is tt and fmsg.replace("ferrograd.Size", "torch.Size") == tmsg
    ft, fmsg = message(lambda: UninitializedParameter().sum())
    tt, tmsg = message(lambda: torch.nn.parameter.UninitializedParameter().sum())
    assert ft is tt
    assert fmsg.split(" in ")[0] == tmsg.split(" in ")[0]
    assert fmsg.split(". ", 1)[1] == tmsg.split(". ", 1)[1]
