"""The meta device: tensors with a shape and dtype but no data (``.to("meta")``,
``Module.to("meta")``, ``Module.to_empty``). Views and shape queries work; anything that reads
elements raises a clear NotImplementedError instead of reading nothing; a meta module whose
parameters ``functional_call`` supplies computes what the original does (the torch.func
ensembling tutorial's pattern)."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import ferrograd as fg
import numpy as np
import pytest
from ferrograd import nn

try:
    import torch
except ImportError:  # pragma: no cover - depends on the machine
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")


def test_meta_tensors_keep_shape_dtype_and_views() -> None:
    x = fg.randn(2, 3, 4, dtype=fg.float64)
    m = x.to("meta")
    assert m.is_meta and not x.is_meta and str(m.device) == "meta" and str(x.device) == "cpu"
    assert tuple(m.shape) == (2, 3, 4) and m.dtype == fg.float64 and m.data_ptr() == 0
    assert tuple(m.transpose(0, 2).shape) == (4, 3, 2) and m.transpose(0, 2).stride() == (1, 4, 12)
    assert tuple(m.reshape(6, 4)[1:, ::2].shape) == (5, 2) and m[0].is_meta
    assert m.to(fg.float32).dtype == fg.float32 and m.to(fg.float32).is_meta
    assert fg.randn(2).to(device="meta", dtype=fg.float16).dtype == fg.float16


@pytest.mark.parametrize(
    "op",
    [
        lambda m: m + 1,
        lambda m: m.sum(),
        lambda m: m.clone(),
        lambda m: m @ m.t(),
        lambda m: fg.zeros(2, 3).copy_(m),
        lambda m: float(m[0, 0]),
        lambda m: m.numpy(),
        lambda m: m.tolist(),
        lambda m: m.to("cpu"),
        lambda m: np.asarray(m),
    ],
)
def test_reading_elements_raises_not_implemented(op: Any) -> None:
    m = fg.randn(2, 3).to("meta")
    with pytest.raises(NotImplementedError, match="meta tensor"):
        op(m)


def test_repr_pickle_and_deepcopy() -> None:
    m = fg.randn(2, 3).to("meta")
    assert repr(m) == "tensor(..., device='meta', size=(2, 3))"
    assert repr(m.to(fg.int64)) == "tensor(..., device='meta', size=(2, 3), dtype=ferrograd.int64)"
    for copied in (copy.deepcopy(m), pickle.loads(pickle.dumps(m))):
        assert copied.is_meta and tuple(copied.shape) == (2, 3)
    p = nn.Parameter(fg.randn(3)).to("meta")
    assert "requires_grad=True" in repr(nn.Parameter(p))


def test_meta_module_with_functional_call_computes_the_original() -> None:
    fg.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    base = copy.deepcopy(model).to("meta")
    assert all(p.is_meta for p in base.parameters())
    x = fg.randn(5, 4)
    params = {k: v.detach() for k, v in model.named_parameters()}
    got = fg.func.functional_call(base, params, (x,))
    np.testing.assert_array_equal(got.detach().numpy(), model(x).detach().numpy())
    with pytest.raises(NotImplementedError, match="meta tensor"):
        base(x)
    with pytest.raises(NotImplementedError, match="to_empty"):
        base.to("cpu")


def test_to_empty_gives_real_storage_to_fill() -> None:
    base = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2)).to("meta")
    real = base.to_empty(device="cpu")
    for t in list(real.parameters()) + list(real.buffers()):
        assert not t.is_meta
    assert isinstance(real[0].weight, nn.Parameter) and tuple(real[0].weight.shape) == (2, 3)
    with fg.no_grad():
        real[0].weight.fill_(0.5)
        real[0].bias.zero_()
    real.eval()
    real[1].reset_parameters()  # running stats and the affine weight and bias
    out = real(fg.ones(1, 3))
    expected = 1.5 / np.sqrt(1 + 1e-5)
    np.testing.assert_allclose(out.detach().numpy(), [[expected, expected]], rtol=1e-6)


@needs_torch
def test_reprs_and_errors_match_torch() -> None:
    ours, theirs = fg.randn(2, 3).to("meta"), torch.randn(2, 3).to("meta")
    assert repr(ours) == repr(theirs)
    assert repr(ours.to(fg.float64)).replace("ferrograd", "torch") == repr(theirs.double())
    for f in (lambda t: t.to("cpu"), lambda t: t.tolist()):
        with pytest.raises(NotImplementedError):
            f(theirs)
        with pytest.raises(NotImplementedError):
            f(ours)
