"""Convolution and pooling: values and every gradient (first and second order) against torch
over a grid of strides, paddings, dilations, groups and ceil modes; module reprs, shapes and
outputs; error types and messages. Tests without torch check against direct loops."""

from __future__ import annotations

import itertools
import re
from typing import Any, Callable, List, Sequence

import ferrograd as fg
import ferrograd.nn.functional as F
import numpy as np
import pytest
from ferrograd import nn


@pytest.fixture
def torch() -> Any:
    return pytest.importorskip("torch")


def _first(out: Any) -> Any:
    return out[0] if isinstance(out, tuple) else out


def _name(t: Any) -> str:
    f = t.grad_fn
    return f.name() if hasattr(f, "name") else type(f).__name__


def _run(lib: Any, fn: Callable[..., Any], arrays: Sequence[np.ndarray], cot: np.ndarray) -> Any:
    """Output, indices, first gradients and the gradient of their squared norm, in float64."""
    ts = [lib.tensor(a, dtype=lib.float64).requires_grad_() for a in arrays]
    out = fn(lib.nn.functional, *ts)
    y = _first(out)
    grads = lib.autograd.grad((y * lib.tensor(cot)).sum(), ts, create_graph=True)
    norm = sum((g * g * lib.tensor(np.cos(a))).sum() for g, a in zip(grads, arrays))
    second = lib.autograd.grad(norm, ts, allow_unused=True) if norm.requires_grad else []
    res = {"out": y.detach().numpy(), "name": _name(y)}
    if isinstance(out, tuple):
        res["idx"] = out[1].numpy()
    res["grads"] = [g.detach().numpy() for g in grads]
    res["second"] = [np.zeros(a.shape) if g is None else g.numpy() for g, a in zip(second, arrays)]
    return res


def _compare(torch: Any, fn: Callable[..., Any], shapes: List[tuple], seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s) for s in shapes]
    ref_out = _first(fn(torch.nn.functional, *[torch.tensor(a) for a in arrays]))
    cot = rng.standard_normal(tuple(ref_out.shape))
    got, want = _run(fg, fn, arrays, cot), _run(torch, fn, arrays, cot)
    assert got["name"] == want["name"]
    np.testing.assert_allclose(got["out"], want["out"], rtol=1e-10, atol=1e-12)
    if "idx" in want:
        np.testing.assert_array_equal(got["idx"], want["idx"])
    for g, w in zip(got["grads"], want["grads"]):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)
    if want["second"]:
        for g, w in zip(got["second"], want["second"]):
            np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-11)


# ----- convolution ------------------------------------------------------------------------------

CONV2D_GRID = [
    dict(stride=s, padding=p, dilation=d)
    for s, p, d in itertools.product([1, 2, (2, 1)], [0, 1, (2, 0)], [1, 2, (1, 3)])
]


@pytest.mark.parametrize("kw", CONV2D_GRID, ids=str)
def test_conv2d_grid_matches_torch(torch: Any, kw: dict) -> None:
    _compare(torch, lambda F, x, w, b: F.conv2d(x, w, b, **kw), [(2, 4, 9, 8), (6, 4, 3, 2), (6,)])


@pytest.mark.parametrize(
    "groups,wshape",
    [(2, (6, 2, 3, 3)), (4, (4, 1, 3, 3)), (4, (8, 1, 3, 3)), (1, (5, 4, 1, 1))],
    ids=["groups", "depthwise", "depthwise_x2", "pointwise"],
)
@pytest.mark.parametrize("stride", [1, 2])
def test_conv2d_groups_match_torch(torch: Any, groups: int, wshape: tuple, stride: int) -> None:
    pad = 1 if wshape[-1] == 3 else 0
    _compare(
        torch,
        lambda F, x, w, b: F.conv2d(x, w, b, stride=stride, padding=pad, groups=groups),
        [(3, 4, 7, 6), wshape, (wshape[0],)],
    )


@pytest.mark.parametrize("dilation", [1, 2])
@pytest.mark.parametrize("kernel", [(2, 3), (3, 3), (1, 4)])
def test_conv2d_same_and_valid_match_torch(torch: Any, kernel: tuple, dilation: int) -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns about the padded copy for even kernels
        _compare(
            torch,
            lambda F, x, w: (
                F.conv2d(x, w, padding="same", dilation=dilation)
                + F.conv2d(x, w, padding="same", dilation=dilation)
            ),
            [(2, 3, 7, 8), (4, 3, *kernel)],
        )
    _compare(
        torch, lambda F, x, w: F.conv2d(x, w, padding="valid"), [(2, 3, 7, 8), (4, 3, *kernel)]
    )


@pytest.mark.parametrize(
    "kw", [dict(), dict(stride=2, padding=2, dilation=2), dict(groups=3, padding="same")], ids=str
)
@pytest.mark.parametrize("batched", [True, False])
def test_conv1d_matches_torch(torch: Any, kw: dict, batched: bool) -> None:
    xs = (2, 6, 11) if batched else (6, 11)
    cg = 2 if kw.get("groups") else 6
    _compare(torch, lambda F, x, w, b: F.conv1d(x, w, b, **kw), [xs, (9, cg, 3), (9,)])


@pytest.mark.parametrize(
    "kw", [dict(), dict(stride=(1, 2, 2), padding=1, dilation=(2, 1, 1)), dict(groups=2)], ids=str
)
def test_conv3d_matches_torch(torch: Any, kw: dict) -> None:
    cg = 1 if kw.get("groups") else 2
    _compare(
        torch, lambda F, x, w, b: F.conv3d(x, w, b, **kw), [(2, 2, 5, 6, 5), (4, cg, 2, 3, 2), (4,)]
    )


@pytest.mark.parametrize(
    "kw",
    [
        dict(),
        dict(stride=2, padding=1, output_padding=1),
        dict(stride=(3, 2), padding=(2, 0), output_padding=(2, 1), dilation=(1, 2)),
        dict(stride=1, padding=1, dilation=2, output_padding=1),
        dict(stride=2, groups=2),
        dict(groups=4, padding=1),
    ],
    ids=str,
)
def test_conv_transpose2d_matches_torch(torch: Any, kw: dict) -> None:
    og = 1 if kw.get("groups") == 4 else 3
    _compare(
        torch,
        lambda F, x, w, b: F.conv_transpose2d(x, w, b, **kw),
        [(2, 4, 5, 4), (4, og, 3, 2), (og * kw.get("groups", 1),)],
    )


@pytest.mark.parametrize("batched", [True, False])
def test_conv_transpose1d_and_3d_match_torch(torch: Any, batched: bool) -> None:
    xs = (2, 3, 6) if batched else (3, 6)
    _compare(
        torch,
        lambda F, x, w, b: F.conv_transpose1d(x, w, b, stride=3, padding=1, output_padding=2),
        [xs, (3, 2, 4), (2,)],
    )
    _compare(
        torch,
        lambda F, x, w: F.conv_transpose3d(
            x, w, stride=(1, 2, 2), padding=1, output_padding=(0, 1, 0)
        ),
        [(2, 3, 3, 4, 3) if batched else (3, 3, 4, 3), (3, 2, 2, 3, 3)],
    )


def _conv2d_loops(
    x: np.ndarray, w: np.ndarray, stride: int, pad: int, dil: int, groups: int
) -> np.ndarray:
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh = (h + 2 * pad - dil * (kh - 1) - 1) // stride + 1
    ow = (wd + 2 * pad - dil * (kw - 1) - 1) // stride + 1
    og = o // groups
    y = np.zeros((n, o, oh, ow))
    for b, oc, i, j in itertools.product(range(n), range(o), range(oh), range(ow)):
        g = oc // og
        for ci, a, e in itertools.product(range(cg), range(kh), range(kw)):
            y[b, oc, i, j] += (
                xp[b, g * cg + ci, i * stride + a * dil, j * stride + e * dil] * w[oc, ci, a, e]
            )
    return y


@pytest.mark.parametrize("stride,pad,dil,groups", [(1, 0, 1, 1), (2, 1, 2, 2), (1, 2, 1, 4)])
def test_conv2d_matches_direct_loops(stride: int, pad: int, dil: int, groups: int) -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 4, 6, 7))
    w = rng.standard_normal((4, 4 // groups, 3, 2))
    got = F.conv2d(
        fg.tensor(x), fg.tensor(w), stride=stride, padding=pad, dilation=dil, groups=groups
    )
    np.testing.assert_allclose(
        got.numpy(), _conv2d_loops(x, w, stride, pad, dil, groups), atol=1e-12
    )


def test_conv_transpose_is_the_adjoint_of_conv() -> None:
    """<conv(x, w), y> == <x, conv_transpose(y, w)>: the defining identity, no torch needed."""
    rng = np.random.default_rng(2)
    x = fg.tensor(rng.standard_normal((2, 4, 9, 8)))
    w = fg.tensor(rng.standard_normal((6, 2, 3, 2)))
    y = F.conv2d(x, w, stride=2, padding=1, dilation=(1, 2), groups=2)
    v = fg.tensor(rng.standard_normal(tuple(y.shape)))
    op = [(9 + 2 - 5) % 2, (8 + 2 - 3) % 2]  # output_padding recovering 9 x 8
    xt = F.conv_transpose2d(v, w, stride=2, padding=1, dilation=(1, 2), groups=2, output_padding=op)
    assert tuple(xt.shape) == (2, 4, 9, 8)
    np.testing.assert_allclose(float((y * v).sum()), float((x * xt).sum()), rtol=1e-12)


def test_conv_with_an_empty_batch_and_huge_padding_returns_at_once() -> None:
    """No element to compute: an empty result of torch's shape and a zero weight gradient, without
    building the (2^41-wide) geometry of the windows (the fuzzer found it hanging)."""
    x = fg.zeros(0, 3, 3, requires_grad=True)
    w = fg.tensor([[[3.0], [-4.0], [1.0]]], requires_grad=True)
    y = F.conv1d(x, w, None, 1, 2**40)
    assert tuple(y.shape) == (0, 1, 3 + 2 * 2**40)
    y.sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), np.zeros((1, 3, 1), np.float32))
    assert tuple(x.grad.shape) == (0, 3, 3)
    # An empty input whose output would have more elements than an index can count: an error,
    # not an abort in the allocator.
    x2 = fg.zeros(1, 1, 6, 0, dtype=fg.float64)
    w2 = fg.ones(1, 1, 1, 2, dtype=fg.float64)
    with pytest.raises(RuntimeError, match="overflows"):
        F.conv2d(x2, w2, None, 1, 2**40, (2, 2))


def test_conv_without_input_channels_gives_the_bias() -> None:
    """An empty sum per output element: the output is the bias, each bias gets one gradient per
    output position, and the empty weight and input get empty gradients."""
    x = fg.randn(2, 0, 5, requires_grad=True)
    w = fg.randn(4, 0, 3, requires_grad=True)
    b = fg.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    y = F.conv1d(x, w, b, padding=1)
    expected = np.broadcast_to([[1.0], [2], [3], [4]], (2, 4, 5))
    np.testing.assert_array_equal(y.detach().numpy(), expected)
    y.sum().backward()
    np.testing.assert_array_equal(b.grad.numpy(), np.full(4, 2 * 5, np.float32))
    assert tuple(w.grad.shape) == (4, 0, 3) and tuple(x.grad.shape) == (2, 0, 5)


@pytest.mark.parametrize(
    "xshape,wshape",
    # 8 channels: im2col; 32: Winograd forward and input gradient, transposed weight gradient;
    # 128 on one small image: im2col in bands of output channels.
    [
        ((16, 8, 12, 12), (16, 8, 3, 3)),
        ((6, 32, 13, 10), (40, 32, 3, 3)),
        ((1, 128, 6, 6), (144, 128, 3, 3)),
    ],
)
def test_conv_backward_is_the_same_at_any_thread_count(xshape: tuple, wshape: tuple) -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal(xshape).astype(np.float32)
    w = rng.standard_normal(wshape).astype(np.float32)
    results = []
    before = fg.get_num_threads()
    try:
        for threads in (1, 2, 3):
            fg.set_num_threads(threads)
            xt, wt = fg.tensor(x).requires_grad_(), fg.tensor(w).requires_grad_()
            y = F.conv2d(xt, wt, padding=1)
            (y * y).sum().backward()
            results.append((y.detach().numpy(), xt.grad.numpy(), wt.grad.numpy()))
    finally:
        fg.set_num_threads(before)
    for other in results[1:]:
        for a, b in zip(results[0], other):
            np.testing.assert_array_equal(a, b)


def _conv2d_reference(x: np.ndarray, w: np.ndarray, b: np.ndarray, pad: tuple, groups: int) -> Any:
    """Direct float64 convolution (stride 1) by windows and einsum."""
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    win = np.lib.stride_tricks.sliding_window_view(xp, w.shape[2:], axis=(2, 3))
    n, c = x.shape[:2]
    og, cg = w.shape[0] // groups, w.shape[1]
    parts = [
        np.einsum("nchwij,ocij->nohw", win[:, g * cg : (g + 1) * cg], w[g * og : (g + 1) * og])
        for g in range(groups)
    ]
    return np.concatenate(parts, axis=1) + b[None, :, None, None]


@pytest.mark.parametrize(
    "xshape,wshape,pad,groups",
    [
        # Batches large enough for Winograd's tile minimum (200 tiles of 2x2 outputs, each
        # tile row one longer), except where the output is too thin for it.
        ((3, 32, 16, 16), (48, 32, 3, 3), (1, 1), 1),
        ((13, 32, 9, 7), (40, 32, 3, 3), (0, 0), 1),
        ((10, 32, 8, 5), (32, 32, 3, 3), (2, 1), 1),
        ((1, 32, 2, 3), (32, 32, 3, 3), (2, 0), 1),
        ((12, 64, 11, 6), (64, 32, 3, 3), (1, 0), 2),
        ((2, 32, 70, 3), (33, 32, 3, 3), (1, 2), 1),
        ((34, 32, 4, 3), (32, 32, 3, 3), (1, 1), 1),
        ((3, 32, 90, 10), (32, 32, 3, 3), (1, 1), 1),
        # Few tiles: im2col, one unit shared among the threads by bands of output channels.
        ((1, 256, 7, 7), (256, 256, 3, 3), (1, 1), 1),
        ((2, 160, 5, 6), (200, 160, 3, 3), (1, 1), 1),
    ],
    ids=str,
)
def test_conv2d_float32_3x3_layers_match_float64(
    xshape: tuple, wshape: tuple, pad: tuple, groups: int
) -> None:
    """Many-channel float32 3x3 layers (the shapes fast paths take: Winograd forward and input
    gradient, the weight gradient's transposed product) against a float64 direct sum, and their
    gradients against the float64 path, to float32 accuracy."""
    rng = np.random.default_rng(7)
    x, w = rng.standard_normal(xshape), rng.standard_normal(wshape) * 0.2
    b = rng.standard_normal(wshape[0])
    want = _conv2d_reference(x, w, b, pad, groups)
    cot = rng.standard_normal(want.shape)
    grads = {}
    for dtype in (fg.float32, fg.float64):
        ts = [fg.tensor(a, dtype=dtype).requires_grad_() for a in (x, w, b)]
        y = F.conv2d(*ts, padding=pad, groups=groups)
        if dtype == fg.float32:
            scale = np.abs(want).max()
            assert np.abs(y.detach().numpy() - want).max() <= 2e-6 * scale
        y.backward(fg.tensor(cot, dtype=dtype))
        grads[dtype] = [t.grad.numpy().astype(np.float64) for t in ts]
    for g32, g64 in zip(grads[fg.float32], grads[fg.float64]):
        assert np.abs(g32 - g64).max() <= 2e-6 * np.abs(g64).max()


@pytest.mark.parametrize(
    "xshape,wshape,kw",
    [
        ((3, 8, 16, 16), (32, 8, 3, 3), dict(padding=1)),
        ((10, 4, 12, 20), (16, 4, 3, 3), dict(padding=(2, 1), dilation=(2, 1))),
        ((2, 6, 17, 15), (32, 3, 4, 2), dict(padding="same", groups=2)),
        ((2, 5, 22, 21), (20, 5, 5, 5), dict(padding=0)),
        # One small image, many output channels: bands of output channels.
        ((1, 128, 6, 5), (160, 128, 3, 3), dict(padding=1)),
    ],
    ids=str,
)
def test_conv2d_weight_gradient_matches_float64_sums(
    xshape: tuple, wshape: tuple, kw: dict
) -> None:
    """Stride-1 layers with 16+ output channels (the weight gradient's implicit products over
    a zero-padded input) against gw[o, c, i, j] = sum over n, h, w of g[n, o, h, w] times the
    input under that window, in float64, at one and two threads."""
    rng = np.random.default_rng(11)
    x, w = rng.standard_normal(xshape), rng.standard_normal(wshape)
    groups = kw.get("groups", 1)
    dil = kw.get("dilation", (1, 1))
    results = []
    before = fg.get_num_threads()
    try:
        for threads in (1, 2):
            fg.set_num_threads(threads)
            xt, wt = fg.tensor(x), fg.tensor(w).requires_grad_()
            y = F.conv2d(xt, wt, **kw)
            cot = np.random.default_rng(12).standard_normal(tuple(y.shape))
            y.backward(fg.tensor(cot))
            results.append(wt.grad.numpy())
    finally:
        fg.set_num_threads(before)
    np.testing.assert_array_equal(results[0], results[1])
    oh, ow = cot.shape[2:]
    kh, kwd = wshape[2:]
    if kw.get("padding") == "same":
        tops = [dil[d] * (k - 1) // 2 for d, k in enumerate((kh, kwd))]
    else:
        p = kw["padding"]
        tops = list(p) if isinstance(p, tuple) else [p, p]
    xp = np.zeros((xshape[0], xshape[1], oh + dil[0] * (kh - 1), ow + dil[1] * (kwd - 1)))
    xp[:, :, tops[0] : tops[0] + xshape[2], tops[1] : tops[1] + xshape[3]] = x
    og, cg = wshape[0] // groups, wshape[1]
    want = np.zeros(wshape)
    for i, j in itertools.product(range(kh), range(kwd)):
        win = xp[:, :, i * dil[0] : i * dil[0] + oh, j * dil[1] : j * dil[1] + ow]
        for g in range(groups):
            want[g * og : (g + 1) * og, :, i, j] = np.einsum(
                "nohw,nchw->oc", cot[:, g * og : (g + 1) * og], win[:, g * cg : (g + 1) * cg]
            )
    np.testing.assert_allclose(results[0], want, rtol=1e-10, atol=1e-10)


DIRECT_CASES = [
    ((32, 16, 28, 28), (32, 16, 3, 3), dict(padding=1)),
    ((5, 1, 28, 28), (6, 1, 5, 5), {}),
    ((4, 6, 12, 12), (16, 6, 5, 5), {}),
    ((3, 8, 17, 13), (6, 4, 3, 2), dict(padding=(2, 1), groups=2, dilation=(2, 1))),
    ((2, 3, 9, 40), (7, 3, 3, 3), dict(padding="same")),
    ((3, 5, 6, 6), (9, 5, 2, 2), {}),
    ((2, 3, 20, 20), (5, 3, 7, 7), dict(padding=3)),
    ((2, 96, 7, 9), (3, 96, 3, 3), dict(padding=1)),
    ((4, 16, 200), (32, 16, 5), dict(padding=2)),
    ((3, 3, 37), (7, 3, 3), dict(dilation=3, padding="same")),
    ((2, 8, 9, 10, 11), (16, 8, 3, 3, 3), dict(padding=1)),
    ((2, 3, 5, 9, 7), (6, 3, 2, 3, 2), dict(padding=(1, 0, 2), dilation=(2, 1, 1))),
    ((2, 4, 6, 5, 7), (6, 2, 3, 1, 2), dict(groups=2, padding="same")),
    # Strided layers whose kernel the stride divides well, split into stride-1 phases (2-d and
    # 3-d), and transposed ones, whose forward is a strided layer's input gradient; the rest
    # (3x3 at stride 2) keep im2col.
    ((4, 16, 28, 28), (32, 16, 3, 3), dict(stride=2, padding=1)),
    ((2, 3, 30, 31), (16, 3, 7, 7), dict(stride=2, padding=3)),
    ((2, 8, 13, 11), (6, 4, 6, 4), dict(stride=(3, 2), padding=(1, 0), groups=2)),
    ((2, 4, 9, 10, 11), (8, 4, 4, 4, 4), dict(stride=2, padding=1)),
    ((2, 4, 5, 6, 4), (4, 3, 4, 4, 4), dict(stride=2, padding=1, transposed=True)),
    ((4, 32, 16, 16), (32, 16, 4, 4), dict(stride=2, padding=1, transposed=True)),
    ((2, 6, 7, 5), (6, 4, 3, 3), dict(stride=2, padding=1, output_padding=1, transposed=True)),
    ((2, 6, 7, 5), (6, 2, 3, 2), dict(stride=(3, 2), padding=(2, 1), groups=3, transposed=True)),
    ((2, 4, 5, 6, 4), (4, 3, 3, 3, 3), dict(stride=2, padding=1, output_padding=1,
                                           transposed=True)),
]


@pytest.mark.parametrize("xshape,wshape,kw", DIRECT_CASES, ids=str)
def test_float32_direct_conv_kernels_match_float64(xshape: tuple, wshape: tuple, kw: dict) -> None:
    """float32 layers with few channels, 1 to 3 spatial dims (the direct kernels on AVX-512
    CPUs: blocks of 4 output channels by up to 96 positions, the weight gradient in blocks of
    4 by 6 items, with partial blocks at every edge here; strided layers through their
    stride-1 phases) against the float64 path (im2col), to float32 accuracy, and the same bits
    at one and two threads."""
    kw = dict(kw)
    transposed = kw.pop("transposed", False)
    nd = len(xshape) - 2
    if transposed:
        conv = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[nd - 1]
        channels = wshape[1] * kw.get("groups", 1)
    else:
        conv = (F.conv1d, F.conv2d, F.conv3d)[nd - 1]
        channels = wshape[0]
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal(xshape), rng.standard_normal(wshape)
    b = rng.standard_normal(channels)
    y64 = None
    got = {}
    before = fg.get_num_threads()
    try:
        for dtype, threads in ((fg.float64, 2), (fg.float32, 1), (fg.float32, 2)):
            fg.set_num_threads(threads)
            ts = [fg.tensor(a, dtype=dtype).requires_grad_() for a in (x, w, b)]
            y = conv(*ts, **kw)
            if y64 is None:
                y64 = y.detach().numpy()
                cot = rng.standard_normal(y64.shape)
            y.backward(fg.tensor(cot, dtype=dtype))
            got[(dtype, threads)] = [y.detach().numpy()] + [t.grad.numpy() for t in ts]
    finally:
        fg.set_num_threads(before)
    for a, b1 in zip(got[(fg.float32, 1)], got[(fg.float32, 2)]):
        np.testing.assert_array_equal(a, b1)
    for a32, a64 in zip(got[(fg.float32, 2)], got[(fg.float64, 2)]):
        assert np.abs(a32 - a64).max() <= 3e-6 * np.abs(a64).max()


_CONV_BITS = """
import sys, numpy as np, ferrograd as fg
x = np.random.default_rng(0).standard_normal((4, 16, 20, 20)).astype(np.float32)
w = np.random.default_rng(1).standard_normal((32, 16, 3, 3)).astype(np.float32)
y = fg.nn.functional.conv2d(fg.tensor(x), fg.tensor(w), padding=1)
sys.stdout.buffer.write(y.numpy().tobytes())
"""


def test_cpu_capability_default_keeps_im2col() -> None:
    """FERROGRAD_CPU_CAPABILITY=default runs float32 convolutions through im2col (on AVX-512
    CPUs, instead of the direct kernel): both match the float64 sums to float32 accuracy."""
    import os
    import subprocess
    import sys

    def run(capability: str) -> np.ndarray:
        env = dict(os.environ, FERROGRAD_CPU_CAPABILITY=capability)
        out = subprocess.run(
            [sys.executable, "-c", _CONV_BITS], env=env, capture_output=True, check=True
        ).stdout
        return np.frombuffer(out, dtype=np.float32)

    default, best = run("default"), run("")
    x = np.random.default_rng(0).standard_normal((4, 16, 20, 20)).astype(np.float32)
    w = np.random.default_rng(1).standard_normal((32, 16, 3, 3)).astype(np.float32)
    want = _conv2d_reference(x, w, np.zeros(32), (1, 1), 1).ravel()
    for got in (default, best):
        assert np.abs(got - want).max() <= 2e-6 * np.abs(want).max()


# ----- pooling ----------------------------------------------------------------------------------

MAX2D_GRID = [
    dict(kernel_size=k, stride=s, padding=p, dilation=d, ceil_mode=c, return_indices=True)
    for k, s, p, d, c in itertools.product(
        [2, (3, 2)], [None, 1, (2, 1)], [0, 1], [1, 2], [False, True]
    )
]


@pytest.mark.parametrize("kw", MAX2D_GRID, ids=str)
def test_max_pool2d_grid_matches_torch(torch: Any, kw: dict) -> None:
    _compare(torch, lambda F, x: F.max_pool2d(x, **kw), [(2, 3, 7, 8)])


AVG2D_GRID = [
    dict(kernel_size=k, stride=s, padding=p, ceil_mode=c, count_include_pad=i, divisor_override=d)
    for k, s, p, c, i, d in itertools.product(
        [2, (3, 2)], [None, (2, 1)], [0, 1], [False, True], [True, False], [None, 5]
    )
]


@pytest.mark.parametrize("kw", AVG2D_GRID, ids=str)
def test_avg_pool2d_grid_matches_torch(torch: Any, kw: dict) -> None:
    _compare(torch, lambda F, x: F.avg_pool2d(x, **kw), [(2, 3, 7, 8)])


@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("ceil_mode", [False, True])
def test_pool1d_and_3d_match_torch(torch: Any, batched: bool, ceil_mode: bool) -> None:
    s1 = (2, 3, 10) if batched else (3, 10)
    s3 = (2, 2, 5, 6, 5) if batched else (2, 5, 6, 5)
    _compare(
        torch,
        lambda F, x: F.max_pool1d(x, 3, 2, 1, dilation=2, ceil_mode=ceil_mode, return_indices=True),
        [s1],
    )
    _compare(torch, lambda F, x: F.avg_pool1d(x, 3, 2, 1, ceil_mode, False), [s1])
    _compare(
        torch,
        lambda F, x: F.max_pool3d(
            x, (2, 3, 2), (1, 2, 2), 1, ceil_mode=ceil_mode, return_indices=True
        ),
        [s3],
    )
    _compare(torch, lambda F, x: F.avg_pool3d(x, 2, (1, 2, 1), 1, ceil_mode, False, None), [s3])


@pytest.mark.parametrize("out", [1, 3, (2, 5), (None, 4), (7, 9)], ids=str)
def test_adaptive_pools_match_torch(torch: Any, out: Any) -> None:
    _compare(torch, lambda F, x: F.adaptive_avg_pool2d(x, out), [(2, 3, 7, 9)])
    _compare(torch, lambda F, x: F.adaptive_max_pool2d(x, out, return_indices=True), [(3, 7, 9)])
    o1 = out if isinstance(out, int) else out[-1]
    _compare(torch, lambda F, x: F.adaptive_avg_pool1d(x, o1), [(2, 3, 9)])
    _compare(torch, lambda F, x: F.adaptive_max_pool1d(x, o1, return_indices=True), [(3, 9)])


@pytest.mark.parametrize("size,out", [(500, 50), (500, 47), (9, 4), (31, 31), (5, 1)])
def test_adaptive_avg_pool1d_and_gradient_against_numpy(size: int, out: int) -> None:
    """Window o spans floor(o n / out)..ceil((o + 1) n / out) (overlapping when out does not
    divide n): the float32 forward against NumPy's float64 window means, and the gradient (each
    window's g / length added to its positions) against NumPy too."""
    rng = np.random.default_rng(size + out)
    a = rng.standard_normal((3, 4, size))
    g = rng.standard_normal((3, 4, out))
    want = np.zeros((3, 4, out))
    grad = np.zeros_like(a)
    for o in range(out):
        lo, hi = o * size // out, -(-(o + 1) * size // out)
        want[..., o] = a[..., lo:hi].mean(-1)
        grad[..., lo:hi] += g[..., o : o + 1] / (hi - lo)
    x = fg.tensor(a.astype(np.float32), requires_grad=True)
    y = F.adaptive_avg_pool1d(x, out)
    np.testing.assert_allclose(y.detach().numpy(), want, rtol=1e-5, atol=1e-6)
    y.backward(fg.tensor(g.astype(np.float32)))
    np.testing.assert_allclose(x.grad.numpy(), grad, rtol=1e-5, atol=1e-6)


def _max_pool2d_reference(a: np.ndarray, k: int, s: int) -> Any:
    """Unpadded 2-d max pooling by a row-major scan of each window under torch's rule: a
    larger value or any NaN takes over, so ties keep the first and the last NaN wins."""
    oh, ow = (a.shape[-2] - k) // s + 1, (a.shape[-1] - k) // s + 1
    vals = np.zeros(a.shape[:-2] + (oh, ow), a.dtype)
    idx = np.zeros(vals.shape, np.int64)
    for lead in np.ndindex(*a.shape[:-2]):
        for i in range(oh):
            for j in range(ow):
                best, at = None, 0
                for r in range(i * s, i * s + k):
                    for c in range(j * s, j * s + k):
                        v = a[lead + (r, c)]
                        if best is None or v > best or np.isnan(v):
                            best, at = v, r * a.shape[-1] + c
                vals[lead + (i, j)], idx[lead + (i, j)] = best, at
    return vals, idx


@pytest.mark.parametrize("k,s", [(2, 2), (3, 1), (3, 2), (2, 3), (4, 4)])
def test_max_pool2d_ties_and_nans_against_a_row_major_scan(k: int, s: int) -> None:
    """Values with many ties, -inf and NaN: the kernel folds window rows column by column and
    then picks among columns; values and indices must equal the row-major scan's."""
    rng = np.random.default_rng(k * 10 + s)
    a = rng.integers(-2, 3, (2, 3, 13, 14)).astype(np.float32)
    a[rng.random(a.shape) < 0.05] = np.nan
    a[rng.random(a.shape) < 0.1] = -np.inf
    vals, idx = F.max_pool2d(fg.tensor(a), k, s, return_indices=True)
    want_v, want_i = _max_pool2d_reference(a, k, s)
    np.testing.assert_array_equal(vals.numpy(), want_v)
    np.testing.assert_array_equal(idx.numpy(), want_i)
    if s == k:
        # Adaptive pooling of a divisible plane has the same windows.
        b = np.ascontiguousarray(a[..., : 12 // k * k, : 12 // k * k])
        av, ai = F.adaptive_max_pool2d(fg.tensor(b), 12 // k, return_indices=True)
        want_v, want_i = _max_pool2d_reference(b, k, s)
        np.testing.assert_array_equal(av.numpy(), want_v)
        np.testing.assert_array_equal(ai.numpy(), want_i)


def test_max_pool_nan_and_ties_follow_torch_rules() -> None:
    nan, inf = float("nan"), float("inf")
    x = fg.tensor([[[[nan, 1, 2, nan], [3, -inf, -inf, -inf], [1, 1, 1, 1], [-inf, -inf, nan, 0]]]])
    out, idx = F.max_pool2d(x, 2, return_indices=True)
    # the last NaN wins, a tie keeps the first, a window of -inf points at its first element
    assert idx.tolist() == [[[[0, 3], [8, 14]]]]
    assert np.isnan(out.numpy()[0, 0, 0, 0]) and out.numpy()[0, 0, 1, 0] == 1


def test_unpadded_max_pool3d_against_a_window_loop() -> None:
    # Windows never clipped by the border take the row-at-a-time kernel (3-d as 1-d and 2-d):
    # values and flat indices against a per-window loop with torch's rule (a larger value or
    # any NaN takes over, ties keep the first), on small integers for ties, with NaN and -inf.
    rng = np.random.default_rng(4)
    a = rng.integers(-3, 4, size=(2, 3, 7, 8, 9)).astype(np.float32)
    a.reshape(-1)[rng.choice(a.size, 40, replace=False)] = np.nan
    a.reshape(-1)[rng.choice(a.size, 40, replace=False)] = -np.inf
    k, st, dil = (2, 3, 2), (2, 2, 3), (1, 2, 1)
    out, idx = F.max_pool3d(fg.tensor(a), k, st, 0, dil, return_indices=True)
    shape = [(n - d * (kk - 1) - 1) // s + 1 for n, kk, s, d in zip(a.shape[2:], k, st, dil)]
    want = np.empty(a.shape[:2] + tuple(shape), np.float32)
    want_idx = np.empty(want.shape, np.int64)
    for p in np.ndindex(*a.shape[:2]):
        plane = a[p].reshape(-1)
        for o in np.ndindex(*shape):
            best, at = None, None
            for w in np.ndindex(*k):
                pos = [oo * s + ww * d for oo, s, ww, d in zip(o, st, w, dil)]
                i = np.ravel_multi_index(pos, a.shape[2:])
                v = plane[i]
                if best is None or v > best or np.isnan(v):
                    best, at = v, i
            want[p + o], want_idx[p + o] = best, at
    np.testing.assert_array_equal(out.numpy(), want)
    np.testing.assert_array_equal(idx.numpy(), want_idx)


def test_max_pool_gradient_goes_to_the_argmax_only() -> None:
    rng = np.random.default_rng(4)
    x = fg.tensor(rng.standard_normal((2, 3, 6, 6))).requires_grad_()
    out, idx = F.max_pool2d(x, 3, stride=2, padding=1, return_indices=True)
    out.sum().backward()
    counts = np.zeros((2, 3, 36))
    for n, c in itertools.product(range(2), range(3)):
        np.add.at(counts[n, c], idx.numpy()[n, c].reshape(-1), 1.0)
    np.testing.assert_array_equal(x.grad.numpy().reshape(2, 3, 36), counts)


def test_avg_pool_matches_window_means() -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 2, 5, 7))
    got = F.avg_pool2d(fg.tensor(x), (2, 3), stride=(2, 2)).numpy()
    want = np.array(
        [
            [
                [
                    [x[0, c, 2 * i : 2 * i + 2, 2 * j : 2 * j + 3].mean() for j in range(3)]
                    for i in range(2)
                ]
                for c in range(2)
            ]
        ]
    )
    np.testing.assert_allclose(got, want, rtol=1e-12)


# ----- modules ----------------------------------------------------------------------------------

MODULES = [
    ("Conv1d", (3, 6, 3), dict(stride=2, padding=1, bias=False)),
    ("Conv2d", (4, 6, (3, 2)), dict(padding="same", dilation=2, groups=2)),
    ("Conv2d", (4, 4, 3), dict(padding=1, groups=4, padding_mode="reflect")),
    ("Conv2d", (2, 3, 3), dict(padding=(1, 2), padding_mode="circular")),
    ("Conv2d", (2, 3, 3), dict(padding=1, padding_mode="replicate", stride=2)),
    ("Conv3d", (2, 4, 2), dict(padding=1, stride=(1, 2, 1))),
    ("ConvTranspose1d", (3, 4, 3), dict(stride=2, output_padding=1)),
    ("ConvTranspose2d", (4, 6, (3, 2)), dict(stride=2, padding=1, groups=2, dilation=2)),
    ("ConvTranspose3d", (2, 2, 2), dict(stride=2, bias=False)),
    ("MaxPool1d", (3,), dict(stride=2, padding=1)),
    ("MaxPool2d", ((3, 2),), dict(stride=1, dilation=2, ceil_mode=True)),
    ("MaxPool3d", (2,), dict(return_indices=True)),
    ("AvgPool1d", (3,), dict(stride=2, padding=1, count_include_pad=False)),
    ("AvgPool2d", (3,), dict(stride=2, padding=1, ceil_mode=True)),
    ("AvgPool3d", (2,), dict(divisor_override=3)),
    ("AdaptiveAvgPool1d", (3,), dict()),
    ("AdaptiveAvgPool2d", ((2, None),), dict()),
    ("AdaptiveMaxPool1d", (3,), dict(return_indices=True)),
    ("AdaptiveMaxPool2d", (2,), dict()),
]


def _input_for(name: str, rng: np.random.Generator) -> np.ndarray:
    if "3d" in name:
        return rng.standard_normal((2, 2, 5, 6, 5))
    if "2d" in name:
        return rng.standard_normal((2, 4, 7, 8))
    return rng.standard_normal((2, 3, 9))


@pytest.mark.parametrize("name,args,kw", MODULES, ids=[m[0] for m in MODULES])
def test_modules_match_torch(torch: Any, name: str, args: tuple, kw: dict) -> None:
    t_mod = getattr(torch.nn, name)(*args, **kw).double()
    f_mod = getattr(nn, name)(*args, **kw).double()
    assert repr(f_mod) == repr(t_mod)
    assert [(n, tuple(p.shape)) for n, p in f_mod.named_parameters()] == [
        (n, tuple(p.shape)) for n, p in t_mod.named_parameters()
    ]
    f_mod.load_state_dict({k: fg.tensor(v.detach().numpy()) for k, v in t_mod.state_dict().items()})
    rng = np.random.default_rng(6)
    x = _input_for(name, rng)
    if name.startswith("Conv") and not name.startswith("ConvT"):
        x = x[:, : args[0]]
    if name.startswith("ConvT"):
        x = x[:, : args[0]]
    tx, fx = torch.tensor(x, requires_grad=True), fg.tensor(x).requires_grad_()
    ty, fy = _first(t_mod(tx)), _first(f_mod(fx))
    np.testing.assert_allclose(fy.detach().numpy(), ty.detach().numpy(), rtol=1e-10, atol=1e-12)
    ty.sum().backward()
    fy.sum().backward()
    np.testing.assert_allclose(fx.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)
    for (_, fp), (_, tp) in zip(f_mod.named_parameters(), t_mod.named_parameters()):
        np.testing.assert_allclose(fp.grad.numpy(), tp.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_conv_transpose_output_size_argument(torch: Any) -> None:
    t_mod = torch.nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1).double()
    f_mod = nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1).double()
    f_mod.load_state_dict({k: fg.tensor(v.detach().numpy()) for k, v in t_mod.state_dict().items()})
    x = np.random.default_rng(7).standard_normal((1, 3, 4, 5))
    for size in ([8, 10], [1, 2, 7, 9]):
        want = t_mod(torch.tensor(x), output_size=size).detach().numpy()
        got = f_mod(fg.tensor(x), output_size=size).detach().numpy()
        np.testing.assert_allclose(got, want, rtol=1e-12)
    for lib, mod in ((torch, t_mod), (fg, f_mod)):
        with pytest.raises(ValueError) as info:
            mod(lib.tensor(x), output_size=[12, 12])
        if lib is torch:
            want_msg = str(info.value)
        else:
            assert str(info.value) == want_msg.replace("torch.Size", "ferrograd.Size")


def test_conv_default_init_scale() -> None:
    """kaiming_uniform(a=sqrt(5)) bounds the weight by 1/sqrt(fan_in), the bias likewise."""
    m = nn.ConvTranspose2d(8, 4, 3, groups=2)
    fan_in = 2 * 9  # weight (8, 2, 3, 3): fan_in = 2 * 3 * 3
    assert tuple(m.weight.shape) == (8, 2, 3, 3)
    assert np.abs(m.weight.detach().numpy()).max() <= 1 / np.sqrt(fan_in) + 1e-7
    assert np.abs(m.bias.detach().numpy()).max() <= 1 / np.sqrt(fan_in) + 1e-7


def test_module_errors_match_torch(torch: Any) -> None:
    cases = [
        lambda lib: lib.nn.Conv2d(3, 4, 3, groups=2),
        lambda lib: lib.nn.Conv2d(4, 3, 3, groups=2),
        lambda lib: lib.nn.Conv2d(4, 4, 3, groups=0),
        lambda lib: lib.nn.Conv2d(4, 4, 3, padding="full"),
        lambda lib: lib.nn.Conv2d(4, 4, 3, padding="same", stride=2),
        lambda lib: lib.nn.Conv2d(4, 4, 3, padding_mode="mirror"),
        lambda lib: lib.nn.ConvTranspose2d(4, 4, 3, padding_mode="reflect"),
    ]
    for case in cases:
        with pytest.raises(Exception) as want:
            case(torch)
        with pytest.raises(type(want.value)) as got:
            case(fg)
        assert _unordered_sets(str(got.value)) == _unordered_sets(str(want.value))


def _unordered_sets(msg: str) -> Any:
    """A message with each ``{...}`` set literal as a frozenset: torch prints Python sets,
    whose order changes with the hash seed."""
    parts = re.split(r"(\{[^}]*\})", msg)
    return [frozenset(re.findall(r"'(\w+)'", p)) if p.startswith("{") else p for p in parts]


# ----- errors -----------------------------------------------------------------------------------

ERRORS = [
    lambda lib, F: F.conv2d(lib.randn(2, 3, 8, 8), lib.randn(4, 3, 3, 3).double()),
    lambda lib, F: F.conv2d(lib.randn(2, 3, 8, 8).double(), lib.randn(4, 3, 3, 3)),
    lambda lib, F: F.conv2d(lib.randn(2, 3, 8, 8), lib.randn(4, 3, 3, 3), lib.randn(4).double()),
    lambda lib, F: F.conv2d(lib.randn(2, 3, 8), lib.randn(4, 3, 3, 3)),
    lambda lib, F: F.conv2d(lib.randn(2, 3, 8, 8, 8), lib.randn(4, 3, 3, 3)),
    lambda lib, F: F.conv2d(lib.randn(2, 3, 8, 8), lib.randn(4, 3, 3)),
    lambda lib, F: F.conv2d(lib.randn(2, 3, 8, 8), lib.randn(4, 3, 3, 3), groups=2),
    lambda lib, F: F.conv2d(lib.randn(2, 3, 8, 8), lib.randn(5, 3, 3, 3), groups=2),
    lambda lib, F: F.conv2d(lib.randn(2, 3, 8, 8), lib.randn(0, 3, 3, 3)),
    lambda lib, F: F.conv2d(lib.randn(2, 3, 8, 8), lib.randn(4, 3, 9, 9)),
    lambda lib, F: F.conv2d(lib.randn(2, 3, 8, 8), lib.randn(4, 3, 3, 3), padding=-1),
    lambda lib, F: F.conv2d(lib.randn(2, 3, 8, 8), lib.randn(4, 3, 3, 3), stride=0),
    lambda lib, F: F.conv2d(lib.randn(2, 3, 8, 8), lib.randn(4, 3, 3, 3), groups=0),
    lambda lib, F: F.conv2d(lib.randn(2, 3, 8, 8), lib.randn(4, 3, 3, 3), padding="same", stride=2),
    lambda lib, F: F.conv2d(lib.randn(2, 3, 8, 8), lib.randn(4, 3, 3, 3), padding="foo"),
    lambda lib, F: F.conv2d(lib.randn(2, 3, 8, 8), lib.randn(4, 3, 3, 3), lib.randn(3)),
    lambda lib, F: F.conv2d(lib.randn(2, 3, 8, 8), lib.randn(4, 3, 3, 3), stride=(1, 1, 1)),
    lambda lib, F: F.conv2d(lib.randn(2, 3, 8, 8), lib.randn(4, 3, 3, 3), padding=(1, 2, 3)),
    lambda lib, F: F.conv3d(lib.randn(2, 3, 8, 8), lib.randn(4, 3, 3, 3, 3)),
    lambda lib, F: F.conv_transpose2d(lib.randn(2, 3, 8, 8), lib.randn(4, 3, 3, 3)),
    lambda lib, F: F.conv_transpose2d(
        lib.randn(2, 3, 8, 8), lib.randn(3, 4, 3, 3), output_padding=1
    ),
    lambda lib, F: F.conv_transpose1d(lib.randn(2, 3, 8), lib.randn(3, 4, 3), output_padding=1),
    lambda lib, F: F.conv_transpose2d(lib.randn(2, 3, 8, 8), lib.randn(3, 4, 3, 3), groups=2),
    lambda lib, F: F.conv_transpose2d(lib.randn(2, 3, 8, 8), lib.randn(3, 4, 3, 3), lib.randn(3)),
    lambda lib, F: F.conv_transpose2d(lib.randn(2, 3, 8, 8, 1), lib.randn(3, 4, 3, 3)),
    lambda lib, F: F.conv_transpose2d(lib.randn(2, 3, 8, 8), lib.randn(3, 4, 3, 3), padding=-1),
    lambda lib, F: F.conv_transpose2d(
        lib.randn(2, 3, 8, 8), lib.randn(3, 4, 3, 3), output_padding=-1
    ),
    lambda lib, F: F.conv_transpose2d(lib.randn(2, 3, 8, 8), lib.randn(3, 4, 3, 3), padding="same"),
    lambda lib, F: F.max_pool2d(lib.randn(2, 3, 8, 8), 9),
    lambda lib, F: F.max_pool2d(lib.randn(2, 3, 8, 8), 3, padding=2),
    lambda lib, F: F.max_pool2d(lib.randn(2, 3, 8, 8), 3, padding=-1),
    lambda lib, F: F.max_pool2d(lib.randn(2, 3, 8, 8), 0),
    lambda lib, F: F.max_pool2d(lib.randn(2, 3, 8, 8), -1),
    lambda lib, F: F.max_pool2d(lib.randn(2, 3, 8, 8), 2, stride=-1),
    lambda lib, F: F.max_pool2d(lib.randn(2, 3, 8, 8), 2, dilation=0),
    lambda lib, F: F.max_pool2d(lib.randn(2, 3, 8, 8), (2, 2, 2)),
    lambda lib, F: F.max_pool2d(lib.randn(2, 0, 8, 8), 2),
    lambda lib, F: F.max_pool2d(lib.randn(8, 8), 2),
    lambda lib, F: F.max_pool1d(lib.randn(8), 2),
    lambda lib, F: F.max_pool1d(lib.randn(2, 3, 8), 9),
    lambda lib, F: F.max_pool1d(lib.randn(2, 3, 8), 3, padding=2),
    lambda lib, F: F.max_pool1d(lib.randn(2, 3, 8), 0),
    lambda lib, F: F.max_pool1d(lib.randn(2, 3, 8), 2, stride=0),
    lambda lib, F: F.max_pool1d(lib.randn(2, 3, 8), 2, dilation=0),
    lambda lib, F: F.max_pool3d(lib.randn(3, 4, 4), 2),
    lambda lib, F: F.max_pool3d(lib.randn(2, 3, 4, 4, 4), 5),
    lambda lib, F: F.max_pool3d(lib.randn(2, 3, 8, 8, 8), 2, dilation=0),
    lambda lib, F: F.avg_pool1d(lib.randn(2, 3, 8), 9),
    lambda lib, F: F.avg_pool1d(lib.randn(8), 3),
    lambda lib, F: F.avg_pool1d(lib.randn(2, 3, 8), 2, stride=0),
    lambda lib, F: F.avg_pool2d(lib.randn(8, 8), 3),
    lambda lib, F: F.avg_pool2d(lib.randn(2, 3, 8, 8), 9),
    lambda lib, F: F.avg_pool2d(lib.randn(2, 3, 8, 8), 2, divisor_override=0),
    lambda lib, F: F.avg_pool2d(lib.randn(2, 3, 8, 8), (2, 2, 2)),
    lambda lib, F: F.avg_pool3d(lib.randn(2, 3, 4, 4, 4), 5),
    lambda lib, F: F.avg_pool3d(lib.randn(2, 3, 4, 4, 4), 3, padding=2),
    lambda lib, F: F.avg_pool3d(lib.randn(3, 4, 4), 3),
    lambda lib, F: F.adaptive_avg_pool2d(lib.randn(8, 8), 2),
    lambda lib, F: F.adaptive_avg_pool2d(lib.randn(2, 3, 8, 8), (2,)),
    lambda lib, F: F.adaptive_avg_pool2d(lib.randn(2, 3, 0, 8), 2),
    lambda lib, F: F.adaptive_avg_pool1d(lib.randn(8), 2),
    lambda lib, F: F.adaptive_avg_pool1d(lib.randn(2, 3, 8), (2, 3)),
    lambda lib, F: F.adaptive_max_pool2d(lib.randn(8), 2),
    lambda lib, F: F.adaptive_max_pool2d(lib.randn(2, 3, 8, 8), (2, 3, 4)),
    lambda lib, F: F.adaptive_max_pool2d(lib.randn(2, 3, 0, 8), 2),
    lambda lib, F: F.adaptive_max_pool2d(lib.randn(2, 3, 8, 8), -1),
    lambda lib, F: F.adaptive_max_pool1d(lib.randn(8), 2),
    lambda lib, F: F.adaptive_max_pool1d(lib.randn(2, 3, 8), (2, 3)),
]


@pytest.mark.parametrize("case", range(len(ERRORS)))
def test_errors_match_torch(torch: Any, case: int) -> None:
    fn = ERRORS[case]
    with pytest.raises(Exception) as want:
        fn(torch, torch.nn.functional)
    with pytest.raises(type(want.value)) as got:
        fn(fg, F)
    assert str(got.value) == str(want.value)
