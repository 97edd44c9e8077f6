"""Normalisation: ``nn.functional`` layer_norm, rms_norm, group_norm, batch_norm and
instance_norm, and the BatchNorm/InstanceNorm/GroupNorm/RMSNorm/LayerNorm modules.

Closed forms (normalised output has mean 0 and variance 1, running statistics follow torch's
update formula computed in NumPy) run without torch; parity tests (values, gradients, running
statistics over several steps, reprs, state_dict keys, error messages) skip without it.
Gradients and second derivatives against finite differences are in ``optables/nn_norm.py``.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, List

import ferrograd as fg
import ferrograd.nn as nn
import ferrograd.nn.functional as F
import numpy as np
import pytest


@pytest.fixture
def torch() -> Any:
    return pytest.importorskip("torch")


def _rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape)


def _both(torch: Any, a: np.ndarray, grad: bool = True, dtype: str = "float64") -> Any:
    a = a.astype(dtype)
    return (
        fg.tensor(a).requires_grad_(grad),
        torch.tensor(a).requires_grad_(grad),
    )


# ----- closed forms (no torch) ------------------------------------------------------------------


def test_layer_norm_rows_have_mean_zero_and_variance_one() -> None:
    x = fg.tensor(_rand(6, 7, 33) * 3 + 2)
    y = F.layer_norm(x, [33], eps=0.0).numpy()
    np.testing.assert_allclose(y.mean(-1), 0, atol=1e-12)
    np.testing.assert_allclose(y.var(-1), 1, atol=1e-12)


def test_layer_norm_affine_closed_form() -> None:
    a, w, b = _rand(4, 3, 5), _rand(3, 5, seed=1), _rand(3, 5, seed=2)
    y = F.layer_norm(fg.tensor(a), [3, 5], fg.tensor(w), fg.tensor(b), eps=1e-3).numpy()
    r = a.reshape(4, -1)
    ref = (r - r.mean(1, keepdims=True)) / np.sqrt(r.var(1, keepdims=True) + 1e-3)
    np.testing.assert_allclose(y, ref.reshape(a.shape) * w + b, rtol=1e-12, atol=1e-12)


def test_rms_norm_closed_form_and_default_eps() -> None:
    a, w = _rand(5, 8), _rand(8, seed=1)
    y = F.rms_norm(fg.tensor(a), [8], fg.tensor(w)).numpy()
    ref = a / np.sqrt((a * a).mean(1, keepdims=True) + np.finfo(np.float64).eps) * w
    np.testing.assert_allclose(y, ref, rtol=1e-12)
    z = F.rms_norm(fg.tensor(a.astype(np.float32)), [8], eps=None).numpy()
    ref32 = a / np.sqrt((a * a).mean(1, keepdims=True) + np.finfo(np.float32).eps)
    np.testing.assert_allclose(z, ref32, rtol=1e-5)


def test_group_norm_closed_form() -> None:
    a, w, b = _rand(3, 6, 4, 2), _rand(6, seed=1), _rand(6, seed=2)
    y = F.group_norm(fg.tensor(a), 3, fg.tensor(w), fg.tensor(b), eps=1e-4).numpy()
    g = a.reshape(3, 3, -1)
    ref = (g - g.mean(2, keepdims=True)) / np.sqrt(g.var(2, keepdims=True) + 1e-4)
    ref = ref.reshape(a.shape) * w[:, None, None] + b[:, None, None]
    np.testing.assert_allclose(y, ref, rtol=1e-12, atol=1e-12)


def test_batch_norm_training_channels_normalised_and_running_stats_updated() -> None:
    a = _rand(8, 3, 5) * 2 + 1
    rm, rv = fg.zeros(3, dtype=fg.float64), fg.ones(3, dtype=fg.float64)
    v0 = rm._version
    y = F.batch_norm(fg.tensor(a), rm, rv, training=True, momentum=0.25, eps=0.0).numpy()
    np.testing.assert_allclose(y.mean((0, 2)), 0, atol=1e-12)
    np.testing.assert_allclose(y.var((0, 2)), 1, atol=1e-12)
    mean = a.mean((0, 2))
    var_unbiased = a.transpose(1, 0, 2).reshape(3, -1).var(1, ddof=1)
    np.testing.assert_allclose(rm.numpy(), 0.25 * mean, rtol=1e-12)
    np.testing.assert_allclose(rv.numpy(), 0.75 + 0.25 * var_unbiased, rtol=1e-12)
    assert rm._version > v0 and rv._version > v0
    assert rm.grad_fn is None and not rm.requires_grad


def test_batch_norm_eval_uses_running_stats() -> None:
    a, m, v = _rand(4, 3, 2), _rand(3, seed=1), np.abs(_rand(3, seed=2)) + 0.5
    w, b = _rand(3, seed=3), _rand(3, seed=4)
    y = F.batch_norm(
        fg.tensor(a), fg.tensor(m), fg.tensor(v), fg.tensor(w), fg.tensor(b), False, 0.1, 1e-5
    ).numpy()
    ref = (a - m[:, None]) / np.sqrt(v[:, None] + 1e-5) * w[:, None] + b[:, None]
    np.testing.assert_allclose(y, ref, rtol=1e-12)


def test_instance_norm_closed_form_and_running_stats() -> None:
    a = _rand(2, 3, 7) * 3
    rm, rv = fg.zeros(3, dtype=fg.float64), fg.ones(3, dtype=fg.float64)
    y = F.instance_norm(fg.tensor(a), rm, rv, momentum=0.5, eps=0.0).numpy()
    np.testing.assert_allclose(y.mean(2), 0, atol=1e-12)
    np.testing.assert_allclose(y.var(2), 1, atol=1e-12)
    np.testing.assert_allclose(rm.numpy(), 0.5 * a.mean(2).mean(0), rtol=1e-12)
    np.testing.assert_allclose(rv.numpy(), 0.5 + 0.5 * a.var(2, ddof=1).mean(0), rtol=1e-12)


def test_local_response_norm_closed_form() -> None:
    a = _rand(2, 5, 3)
    y = F.local_response_norm(fg.tensor(a), 3, alpha=0.2, beta=0.5, k=2.0).numpy()
    sq = np.pad(a * a, ((0, 0), (1, 1), (0, 0)))
    avg = (sq[:, :-2] + sq[:, 1:-1] + sq[:, 2:]) / 3
    np.testing.assert_allclose(y, a / (2.0 + 0.2 * avg) ** 0.5, rtol=1e-12)


def test_float32_statistics_are_stable_with_a_large_offset() -> None:
    # f64 accumulation: a naive f32 E[x²] - E[x]² would lose every digit here
    a = (np.random.default_rng(0).standard_normal((4, 4096)) + 1e4).astype(np.float32)
    y = F.layer_norm(fg.tensor(a), [4096]).numpy().astype(np.float64)
    a64 = a.astype(np.float64)
    ref = (a64 - a64.mean(1, keepdims=True)) / np.sqrt(a64.var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(y, ref, atol=2e-3)


def test_float32_batch_norm_gradients_are_stable_with_a_large_offset() -> None:
    """The backward's Σ g (x - mean) in float32 against the float64 gradient: an offset of 1e3
    with unit spread, where Σ g x - mean Σ g would cancel away float32's digits."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((8, 3, 40, 40)) + 1e3
    g = rng.standard_normal(x.shape)
    w = rng.standard_normal(3)
    grads = {}
    for dtype in (fg.float32, fg.float64):
        ts = [fg.tensor(a, dtype=dtype).requires_grad_() for a in (x, w)]
        y = F.batch_norm(ts[0], None, None, ts[1], None, training=True)
        y.backward(fg.tensor(g, dtype=dtype))
        grads[dtype] = [t.grad.numpy().astype(np.float64) for t in ts]
    for g32, g64 in zip(grads[fg.float32], grads[fg.float64]):
        assert np.abs(g32 - g64).max() <= 1e-4 * np.abs(g64).max()


@pytest.mark.parametrize(
    "op",
    [
        lambda x, w, b: F.layer_norm(x, [256], None, None),
        lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
        lambda x, w, b: F.group_norm(x, 4, w, b),
        lambda x, w, b: F.instance_norm(x, weight=w, bias=b),
    ],
)
def test_results_do_not_depend_on_the_thread_count(op: Callable[..., Any]) -> None:
    a = _rand(16, 32, 256).astype(np.float32)
    g = _rand(16, 32, 256, seed=5).astype(np.float32)
    w, b = _rand(32, seed=1).astype(np.float32), _rand(32, seed=2).astype(np.float32)
    before = fg.get_num_threads()
    runs = []
    try:
        for threads in (1, 2, 3):
            fg.set_num_threads(threads)
            x, wt, bt = (fg.tensor(v).requires_grad_() for v in (a, w, b))
            y = op(x, wt, bt)
            y.backward(fg.tensor(g))
            runs.append(
                [y.detach().numpy(), x.grad.numpy()]
                + [t.grad.numpy() for t in (wt, bt) if t.grad is not None]
            )
    finally:
        fg.set_num_threads(before)
    for r in runs[1:]:
        for u, v in zip(runs[0], r):
            np.testing.assert_array_equal(u, v)


@pytest.mark.parametrize("length", [1, 5, 16, 17, 31, 255, 256, 257, 300, 513, 1000])
@pytest.mark.parametrize("kind", ["layer", "layer_noaffine", "layer_weight", "rms", "group"])
def test_float32_row_kernels_match_float64_at_any_length(kind: str, length: int) -> None:
    """The float32 span sums and the fused row backward (vector kernels with a masked last
    vector, f64 lanes between blocks of 256) against the float64 kernel, at lengths around the
    vector width and the block, with an offset that a float32 E[x²] - E[x]² would not
    survive; the input is a non-contiguous view."""
    rng = np.random.default_rng(length)
    rows = 6
    x = rng.standard_normal((length, rows)).T * 3.0 + 50.0
    g = rng.standard_normal((rows, length))
    w, b = rng.standard_normal(length), rng.standard_normal(length)
    wc, bc = rng.standard_normal(3), rng.standard_normal(3)
    results = {}
    for dtype in (fg.float32, fg.float64):
        xt = fg.tensor(x.T.copy(), dtype=dtype).t().requires_grad_()
        assert length == 1 or not xt.is_contiguous()
        params = {
            "layer": (w, b),
            "layer_noaffine": (),
            "layer_weight": (w,),
            "rms": (w,),
            "group": (wc, bc),
        }[kind]
        ps = [fg.tensor(p, dtype=dtype).requires_grad_() for p in params]
        if kind == "rms":
            y = F.rms_norm(xt, [length], ps[0])
        elif kind == "group":
            y = F.group_norm(xt.reshape(2, 3, length), 1, *ps)
        else:
            y = F.layer_norm(xt, [length], *ps)
        y.backward(fg.tensor(g.reshape(y.shape), dtype=dtype))
        results[dtype] = [y.detach(), xt.grad] + [p.grad for p in ps]
    for a32, a64 in zip(results[fg.float32], results[fg.float64]):
        a32, a64 = a32.numpy().astype(np.float64), a64.numpy()
        scale = max(np.abs(a64).max(), 1.0)
        np.testing.assert_allclose(a32, a64, rtol=0, atol=2e-5 * scale * max(1, length**0.5))


def test_second_derivative_through_batch_norm_training() -> None:
    # create_graph: the backward is itself differentiable (the finite-difference check of
    # every op is in the op table; this one runs through autograd.grad as users do)
    x = fg.tensor(_rand(4, 3, 2)).requires_grad_()
    y = F.batch_norm(x, None, None, training=True)
    (g,) = fg.autograd.grad((y**3).sum(), x, create_graph=True)
    assert g.requires_grad
    (h,) = fg.autograd.grad(g.sum(), x)
    assert h.shape == x.shape and np.isfinite(h.numpy()).all()


def test_modules_default_init() -> None:
    bn = nn.BatchNorm2d(4)
    np.testing.assert_array_equal(bn.weight.detach().numpy(), np.ones(4))
    np.testing.assert_array_equal(bn.bias.detach().numpy(), np.zeros(4))
    np.testing.assert_array_equal(bn.running_mean.numpy(), np.zeros(4))
    np.testing.assert_array_equal(bn.running_var.numpy(), np.ones(4))
    assert bn.num_batches_tracked.dtype == fg.int64 and bn.num_batches_tracked.item() == 0
    gn, rms = nn.GroupNorm(2, 4), nn.RMSNorm([2, 3])
    np.testing.assert_array_equal(gn.weight.detach().numpy(), np.ones(4))
    np.testing.assert_array_equal(gn.bias.detach().numpy(), np.zeros(4))
    np.testing.assert_array_equal(rms.weight.detach().numpy(), np.ones((2, 3)))
    inst = nn.InstanceNorm1d(3)
    assert inst.weight is None and inst.running_mean is None


def test_batchnorm_cumulative_average_and_reset() -> None:
    bn = nn.BatchNorm1d(2, momentum=None).double()
    batches = [_rand(5, 2, seed=s) for s in range(3)]
    for a in batches:
        bn(fg.tensor(a))
    assert bn.num_batches_tracked.item() == 3
    np.testing.assert_allclose(
        bn.running_mean.numpy(), np.mean([a.mean(0) for a in batches], 0), rtol=1e-12
    )
    bn.reset_running_stats()
    assert bn.num_batches_tracked.item() == 0
    np.testing.assert_array_equal(bn.running_var.numpy(), np.ones(2))


def test_load_state_dict_without_num_batches_tracked_keeps_the_counter() -> None:
    src = nn.Sequential(nn.BatchNorm1d(3))
    src(fg.randn(4, 3))
    sd = OrderedDict((k, v) for k, v in src.state_dict().items() if "num_batches" not in k)
    dst = nn.Sequential(nn.BatchNorm1d(3))
    res = dst.load_state_dict(sd)
    assert list(res.missing_keys) == [] and list(res.unexpected_keys) == []
    np.testing.assert_array_equal(dst[0].running_mean.numpy(), src[0].running_mean.numpy())
    assert dst[0].num_batches_tracked.item() == 0


def test_layer_norm_still_importable_from_misc() -> None:
    from ferrograd.nn.modules.misc import LayerNorm
    from ferrograd.nn.modules.normalization import LayerNorm as L2

    assert LayerNorm is L2 is nn.LayerNorm


# ----- torch parity -----------------------------------------------------------------------------


def _grads(ts: List[Any]) -> List[np.ndarray]:
    return [t.grad.detach().numpy() for t in ts if t.grad is not None]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(
    "name,call,shape,pshape",
    [
        (
            "layer_norm",
            lambda L, x, w, b: L.nn.functional.layer_norm(x, [64], w, b),
            (8, 9, 64),
            (64,),
        ),
        ("rms_norm", lambda L, x, w, b: L.nn.functional.rms_norm(x, [64], w), (8, 9, 64), (64,)),
        (
            "group_norm",
            lambda L, x, w, b: L.nn.functional.group_norm(x, 3, w, b, 1e-3),
            (5, 12, 40),
            (12,),
        ),
        (
            "batch_norm",
            lambda L, x, w, b: L.nn.functional.batch_norm(x, None, None, w, b, True),
            (5, 12, 6, 7),
            (12,),
        ),
        (
            "instance_norm",
            lambda L, x, w, b: L.nn.functional.instance_norm(x, weight=w, bias=b),
            (5, 12, 40),
            (12,),
        ),
    ],
)
def test_functional_matches_torch(
    torch: Any, name: str, call: Callable[..., Any], shape: Any, pshape: Any, dtype: str
) -> None:
    x, tx = _both(torch, _rand(*shape) * 2 + 0.5, dtype=dtype)
    w, tw = _both(torch, _rand(*pshape, seed=1), dtype=dtype)
    b, tb = _both(torch, _rand(*pshape, seed=2), dtype=dtype)
    g = _rand(*shape, seed=3).astype(dtype)
    y, ty = call(fg, x, w, b), call(torch, tx, tw, tb)
    assert y.grad_fn.name() == ty.grad_fn.name()
    y.backward(fg.tensor(g))
    ty.backward(torch.tensor(g))
    tol = dict(rtol=2e-4, atol=2e-4) if dtype == "float32" else dict(rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), **tol)
    for u, v in zip(_grads([x, w, b]), _grads([tx, tw, tb])):
        np.testing.assert_allclose(u, v, **tol)


@pytest.mark.parametrize(
    "cls,args,kwargs,shape",
    [
        ("BatchNorm1d", (4,), {}, (6, 4)),
        ("BatchNorm1d", (4,), {"momentum": None}, (6, 4, 3)),
        ("BatchNorm2d", (4,), {"affine": False}, (3, 4, 5, 2)),
        ("BatchNorm3d", (4,), {"eps": 1e-3, "momentum": 0.3}, (2, 4, 3, 2, 2)),
        ("BatchNorm2d", (4,), {"track_running_stats": False}, (3, 4, 2, 2)),
        ("InstanceNorm1d", (4,), {"affine": True, "track_running_stats": True}, (3, 4, 5)),
        ("InstanceNorm2d", (4,), {"track_running_stats": True}, (3, 4, 5, 2)),
        ("InstanceNorm2d", (4,), {}, (4, 5, 2)),
        ("GroupNorm", (2, 4), {}, (3, 4, 5)),
        ("LayerNorm", ((4, 5),), {"bias": False}, (3, 4, 5)),
        ("RMSNorm", (5,), {"eps": 1e-4}, (3, 4, 5)),
        ("LocalResponseNorm", (3,), {"alpha": 0.1}, (3, 4, 5)),
    ],
)
def test_module_training_steps_then_eval_match_torch(
    torch: Any, cls: str, args: Any, kwargs: Any, shape: Any
) -> None:
    m, tm = (
        getattr(nn, cls)(*args, **kwargs).double(),
        getattr(torch.nn, cls)(*args, **kwargs).double(),
    )
    assert repr(m) == repr(tm)
    assert list(m.state_dict()) == list(tm.state_dict())
    for step in range(3):
        a = _rand(*shape, seed=10 + step) * 2 + 1
        x, tx = _both(torch, a)
        y, ty = m(x), tm(tx)
        y.sum().backward() if step else (y * y).sum().backward()
        (ty.sum() if step else (ty * ty).sum()).backward()
        np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-9, atol=1e-9)
        for (k, v), (tk, tv) in zip(m.state_dict().items(), tm.state_dict().items()):
            assert k == tk
            np.testing.assert_allclose(v.numpy(), tv.numpy(), rtol=1e-12, atol=1e-12)
    for p, tp in zip(m.parameters(), tm.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-9, atol=1e-9)
    m.eval()
    tm.eval()
    a = _rand(*shape, seed=99)
    np.testing.assert_allclose(
        m(fg.tensor(a)).detach().numpy(),
        tm(torch.tensor(a)).detach().numpy(),
        rtol=1e-10,
        atol=1e-10,
    )


def _error_of(f: Callable[[], Any]) -> Any:
    try:
        f()
    except Exception as e:  # noqa: BLE001 - the type is what is compared
        return type(e).__name__, str(e).split("\n")[0]
    return None


ERROR_CASES = [
    lambda L, x: L.nn.functional.layer_norm(x, [4]),
    lambda L, x: L.nn.functional.layer_norm(x, [6, 5], L.ones(5)),
    lambda L, x: L.nn.functional.layer_norm(x, [5], None, L.ones(4)),
    lambda L, x: L.nn.functional.layer_norm(x, []),
    lambda L, x: L.nn.functional.layer_norm(x, 5),
    lambda L, x: L.nn.functional.layer_norm(x.long(), [5]),
    lambda L, x: L.nn.functional.layer_norm(x, [5], L.ones(5, dtype=L.float64)),
    lambda L, x: L.nn.functional.rms_norm(x, [6, 4]),
    lambda L, x: L.nn.functional.rms_norm(x, [5], L.ones(4)),
    lambda L, x: L.nn.functional.group_norm(x, 4),
    lambda L, x: L.nn.functional.group_norm(x, 3, L.ones(5)),
    lambda L, x: L.nn.functional.group_norm(x, 3, None, L.ones(5)),
    lambda L, x: L.nn.functional.group_norm(x[0, 0], 3),
    lambda L, x: L.nn.functional.group_norm(x, -1),
    lambda L, x: L.nn.functional.group_norm(x[:, :, :0], 3),
    lambda L, x: L.nn.functional.batch_norm(x[:1, :, :1], None, None, training=True),
    lambda L, x: L.nn.functional.batch_norm(x[:1, :, 0], None, None, training=True),
    lambda L, x: L.nn.functional.batch_norm(x, L.zeros(5), L.ones(6), training=True),
    lambda L, x: L.nn.functional.batch_norm(x, L.zeros(6), L.ones(5), training=True),
    lambda L, x: L.nn.functional.batch_norm(x, L.zeros(6), L.ones(6), L.ones(5), training=True),
    lambda L, x: L.nn.functional.batch_norm(x, None, None, None, L.ones(5), training=True),
    lambda L, x: L.nn.functional.batch_norm(x, None, None, training=False),
    lambda L, x: L.nn.functional.batch_norm(x, L.zeros(6), None, training=False),
    lambda L, x: L.nn.functional.batch_norm(x[0, 0], L.zeros(6), L.ones(6)),
    lambda L, x: L.nn.functional.batch_norm(x.long(), None, None, training=True),
    lambda L, x: L.nn.functional.instance_norm(x[:1, :, :1]),
    lambda L, x: L.nn.functional.instance_norm(x, L.zeros(5), L.ones(6)),
    lambda L, x: L.nn.functional.instance_norm(x, None, None, L.ones(5)),
    lambda L, x: L.nn.functional.instance_norm(x, use_input_stats=False),
    lambda L, x: L.nn.BatchNorm1d(6)(x.unsqueeze(0)),
    lambda L, x: L.nn.BatchNorm2d(6)(x),
    lambda L, x: L.nn.BatchNorm3d(6)(x),
    lambda L, x: L.nn.InstanceNorm1d(6)(x.unsqueeze(0)),
    lambda L, x: L.nn.InstanceNorm2d(6)(x[0, 0]),
    lambda L, x: L.nn.InstanceNorm1d(5, affine=True)(x),
    lambda L, x: L.nn.GroupNorm(4, 6),
    lambda L, x: L.nn.functional.local_response_norm(x[0], 2),
    lambda L, x: L.nn.functional.local_response_norm(x, 0),
    lambda L, x: L.nn.functional.local_response_norm(x.unsqueeze(0), 0),
]


@pytest.mark.parametrize("case", range(len(ERROR_CASES)))
def test_errors_match_torch(torch: Any, case: int) -> None:
    a = _rand(4, 6, 5).astype(np.float32)
    ours = _error_of(lambda: ERROR_CASES[case](fg, fg.tensor(a)))
    theirs = _error_of(lambda: ERROR_CASES[case](torch, torch.tensor(a)))
    assert theirs is not None
    assert ours == theirs
