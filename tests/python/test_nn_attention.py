"""scaled_dot_product_attention, MultiheadAttention and the Transformer layers: values and
gradients against a NumPy float64 reference and, when installed, against torch (same weights
through the state dict), plus reprs, dropout and torch's error messages."""

from __future__ import annotations

from typing import Any, Optional

import ferrograd as fg
import numpy as np
import pytest
from ferrograd import nn
from ferrograd.nn import functional as F

RNG = np.random.default_rng(0)


@pytest.fixture
def torch() -> Any:
    return pytest.importorskip("torch")


def _rand(*shape: int, dtype: Any = np.float64) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


def _reference(q, k, v, mask=None, causal=False, scale=None):  # noqa: ANN001, ANN202
    """softmax(q k^T scale + mask) v in float64 NumPy, fully masked rows giving 0."""
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ np.swapaxes(k, -1, -2) * scale
    if mask is not None:
        s = s + (np.where(mask, 0.0, -np.inf) if mask.dtype == bool else mask)
    if causal:
        s = np.where(np.triu(np.ones(s.shape[-2:], bool), 1), -np.inf, s)
    m = s.max(-1, keepdims=True)
    dead = np.isinf(m)
    e = np.exp(s - np.where(dead, 0.0, m))
    p = np.where(dead, 0.0, e / np.where(dead, 1.0, e.sum(-1, keepdims=True)))
    return p @ v


CASES = [
    # q, k, v shapes, mask shape (None / bool / float), causal, scale
    ((2, 3, 5, 4), (2, 3, 6, 4), (2, 3, 6, 7), None, False, None),
    ((2, 3, 5, 4), (2, 3, 6, 4), (2, 3, 6, 7), None, True, None),
    ((6, 4), (9, 4), (9, 3), None, False, 0.5),
    ((2, 2, 130, 16), (2, 2, 300, 16), (2, 2, 300, 24), ("bool", (130, 300)), False, None),
    ((2, 2, 70, 16), (2, 2, 150, 16), (2, 2, 150, 8), ("float", (2, 1, 150)), False, 0.3),
    ((1, 2, 200, 8), (1, 2, 140, 8), (1, 2, 140, 8), None, True, None),
    ((3, 1, 40, 8), (1, 2, 33, 8), (3, 2, 33, 5), ("bool", (3, 1, 40, 33)), False, None),
]


def _mask(spec: Optional[tuple], dtype: Any) -> Optional[np.ndarray]:
    if spec is None:
        return None
    kind, shape = spec
    if kind == "bool":
        m = RNG.random(shape) > 0.3
        m[..., 1, :] = False  # a fully masked row
        return m
    return _rand(*shape, dtype=dtype)


@pytest.mark.parametrize("case", CASES)
def test_sdpa_matches_float64_reference_and_finite_differences(case: tuple) -> None:
    qs, ks, vs, mspec, causal, scale = case
    q, k, v = _rand(*qs), _rand(*ks), _rand(*vs)
    mask = _mask(mspec, np.float64)
    want = _reference(q, k, v, mask, causal, scale)
    tq, tk, tv = (fg.tensor(a, requires_grad=True) for a in (q, k, v))
    tm = None if mask is None else fg.tensor(mask)
    out = F.scaled_dot_product_attention(tq, tk, tv, tm, is_causal=causal, scale=scale)
    np.testing.assert_allclose(out.detach().numpy(), want, atol=1e-12)
    g = _rand(*want.shape)
    out.backward(fg.tensor(g))
    # directional derivative of <g, out> along a random direction, by central differences
    for arr, t in ((q, tq), (k, tk), (v, tv)):
        d = _rand(*arr.shape)
        eps = 1e-6
        args = [q, k, v]
        i = [id(q), id(k), id(v)].index(id(arr))
        plus, minus = list(args), list(args)
        plus[i], minus[i] = arr + eps * d, arr - eps * d
        fd = (
            (_reference(*plus, mask, causal, scale) - _reference(*minus, mask, causal, scale)) * g
        ).sum() / (2 * eps)
        assert abs((t.grad.numpy() * d).sum() - fd) < 1e-6 * max(1.0, abs(fd))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", CASES)
def test_sdpa_matches_torch(torch: Any, case: tuple, dtype: str) -> None:
    qs, ks, vs, mspec, causal, scale = case
    npd = np.float32 if dtype == "float32" else np.float64
    arrs = [_rand(*s, dtype=npd) for s in (qs, ks, vs)]
    mask = _mask(mspec, npd)
    tt = [torch.tensor(a, requires_grad=True) for a in arrs]
    ff = [fg.tensor(a, requires_grad=True) for a in arrs]
    tm = None if mask is None else torch.tensor(mask)
    fm = None if mask is None else fg.tensor(mask)
    to = torch.nn.functional.scaled_dot_product_attention(
        *tt, attn_mask=tm, is_causal=causal, scale=scale
    )
    fo = F.scaled_dot_product_attention(*ff, attn_mask=fm, is_causal=causal, scale=scale)
    tol = 2e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(fo.detach().numpy(), to.detach().numpy(), atol=tol)
    g = _rand(*to.shape, dtype=npd)
    to.backward(torch.tensor(g))
    fo.backward(fg.tensor(g))
    for f, t in zip(ff, tt):
        np.testing.assert_allclose(f.grad.numpy(), t.grad.numpy(), atol=tol * 5)


def test_sdpa_long_sequence_float32_crosses_tiles(torch: Any) -> None:
    q, k, v = (_rand(1, 4, 517, 64, dtype=np.float32) for _ in range(3))
    for causal in (False, True):
        tt = [torch.tensor(a, requires_grad=True) for a in (q, k, v)]
        ff = [fg.tensor(a, requires_grad=True) for a in (q, k, v)]
        to = torch.nn.functional.scaled_dot_product_attention(*tt, is_causal=causal)
        fo = F.scaled_dot_product_attention(*ff, is_causal=causal)
        np.testing.assert_allclose(fo.detach().numpy(), to.detach().numpy(), atol=1e-5)
        to.sum().backward()
        fo.sum().backward()
        for f, t in zip(ff, tt):
            np.testing.assert_allclose(f.grad.numpy(), t.grad.numpy(), atol=5e-5)


def test_sdpa_float_mask_gets_its_gradient(torch: Any) -> None:
    q, k, v, m = _rand(2, 3, 4), _rand(2, 5, 4), _rand(2, 5, 3), _rand(3, 5)
    tt = [torch.tensor(a, requires_grad=True) for a in (q, k, v, m)]
    ff = [fg.tensor(a, requires_grad=True) for a in (q, k, v, m)]
    torch.nn.functional.scaled_dot_product_attention(*tt[:3], attn_mask=tt[3]).sum().backward()
    F.scaled_dot_product_attention(*ff[:3], attn_mask=ff[3]).sum().backward()
    for f, t in zip(ff, tt):
        np.testing.assert_allclose(f.grad.numpy(), t.grad.numpy(), atol=1e-12)


def test_sdpa_fully_masked_rows_give_zeros_and_zero_gradients() -> None:
    q, k, v = (fg.tensor(_rand(2, 4, 3), requires_grad=True) for _ in range(3))
    mask = np.ones((4, 4), bool)
    mask[2] = False
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=fg.tensor(mask))
    assert np.all(out.detach().numpy()[:, 2] == 0)
    out.sum().backward()
    assert np.all(q.grad.numpy()[:, 2] == 0)
    assert np.isfinite(k.grad.numpy()).all()


def test_sdpa_node_name_and_create_graph() -> None:
    q, k, v = (fg.tensor(_rand(2, 4, 3), requires_grad=True) for _ in range(3))
    out = F.scaled_dot_product_attention(q, k, v)
    assert out.grad_fn.name() == "ScaledDotProductFlashAttentionForCpuBackward0"
    (gq,) = fg.autograd.grad((out * out).sum(), q, create_graph=True)
    assert gq.grad_fn is not None
    # the composed backward and the fused one agree
    (fused,) = fg.autograd.grad((out * out).sum(), q, retain_graph=True)
    np.testing.assert_allclose(gq.detach().numpy(), fused.numpy(), atol=1e-12)


def test_sdpa_dropout_mask_is_shared_by_forward_and_backward() -> None:
    q, k = fg.tensor(_rand(1, 70, 8)), fg.tensor(_rand(1, 90, 8))
    # v = identity columns: the output rows are then the dropped-out weights themselves
    v = fg.tensor(np.eye(90)[None], requires_grad=True)
    fg.manual_seed(3)
    out = F.scaled_dot_product_attention(q, k, v, dropout_p=0.4)
    w = out.detach().numpy()[0]
    kept = w != 0
    assert 0.45 < kept.mean() < 0.75
    p = _reference(q.numpy(), k.numpy(), np.eye(90)[None])[0]
    np.testing.assert_allclose(w[kept], p[kept] / 0.6, rtol=1e-10)
    g = _rand(1, 70, 90)
    out.backward(fg.tensor(g))
    # dV = Pd^T g with the same dropped weights
    np.testing.assert_allclose(v.grad.numpy()[0], w.T @ g[0], atol=1e-10)
    fg.manual_seed(3)
    again = F.scaled_dot_product_attention(q, k, v, dropout_p=0.4)
    np.testing.assert_array_equal(again.detach().numpy()[0], w)


def test_sdpa_enable_gqa_matches_repeated_heads() -> None:
    q, k, v = _rand(2, 4, 5, 3), _rand(2, 2, 6, 3), _rand(2, 2, 6, 3)
    out = F.scaled_dot_product_attention(fg.tensor(q), fg.tensor(k), fg.tensor(v), enable_gqa=True)
    want = _reference(q, np.repeat(k, 2, axis=1), np.repeat(v, 2, axis=1))
    np.testing.assert_allclose(out.numpy(), want, atol=1e-12)


@pytest.mark.parametrize(
    "shapes,kw",
    [
        (((4,), (4,), (4,)), {}),
        (((2, 5, 4), (2, 6, 3), (2, 6, 7)), {}),
        (((2, 5, 4), (2, 6, 4), (2, 5, 7)), {}),
        (((2, 3, 5, 4), (2, 2, 6, 4), (2, 2, 6, 7)), {}),
        (((2, 5, 4), (2, 6, 4), (2, 6, 7)), {"mask": (4, 6)}),
        (((2, 5, 4), (2, 6, 4), (2, 6, 7)), {"mask": (5, 6), "is_causal": True}),
        (((2, 5, 4), (2, 6, 4), (2, 6, 7)), {"mask_long": (5, 6)}),
        (((2, 5, 4), (2, 6, 4), (2, 6, 7)), {"dropout_p": 1.5}),
        (((5, 4), (6, 3), (6, 7)), {}),
    ],
)
def test_sdpa_errors_match_torch(torch: Any, shapes: tuple, kw: dict) -> None:
    def call(lib: Any) -> Any:
        args = [lib.tensor(_rand(*s, dtype=np.float32)) for s in shapes]
        extra: dict = {}
        if "mask" in kw:
            extra["attn_mask"] = lib.ones(*kw["mask"], dtype=lib.bool)
        if "mask_long" in kw:
            extra["attn_mask"] = lib.ones(*kw["mask_long"], dtype=lib.int64)
        for name in ("is_causal", "dropout_p"):
            if name in kw:
                extra[name] = kw[name]
        return lib.nn.functional.scaled_dot_product_attention(*args, **extra)

    with pytest.raises(Exception) as te:
        call(torch)
    with pytest.raises(type(te.value)) as fe:
        call(fg)
    assert str(fe.value) == str(te.value)


def test_sdpa_mixed_dtypes_error_matches_torch(torch: Any) -> None:
    def call(lib: Any) -> Any:
        q = lib.zeros(2, 3, 4)
        return lib.nn.functional.scaled_dot_product_attention(q, q.double(), q)

    with pytest.raises(RuntimeError) as te:
        call(torch)
    with pytest.raises(RuntimeError, match=None) as fe:
        call(fg)
    assert str(fe.value) == str(te.value)


# ----- modules ------------------------------------------------------------------------------------


def _load(src: Any, dst: Any) -> None:
    state = {k: fg.tensor(v.detach().numpy()) for k, v in src.state_dict().items()}
    dst.load_state_dict(state)


def _pair(torch: Any, name: str, *args: Any, **kw: Any) -> Any:
    t = getattr(torch.nn, name)(*args, **kw)
    f = getattr(nn, name)(*args, **kw)
    assert list(f.state_dict()) == list(t.state_dict())
    assert repr(f) == repr(t)
    _load(t, f)
    return t, f


MHA_CONFIGS = [
    {},
    {"batch_first": True},
    {"bias": False},
    {"add_bias_kv": True},
    {"add_zero_attn": True},
    {"kdim": 5, "vdim": 3},
]


@pytest.mark.parametrize("cfg", MHA_CONFIGS)
@pytest.mark.parametrize("need_weights", [True, False])
def test_multihead_attention_matches_torch(torch: Any, cfg: dict, need_weights: bool) -> None:
    t, f = _pair(torch, "MultiheadAttention", 8, 2, **cfg)
    bf = cfg.get("batch_first", False)
    lq, ls, n = 5, 7, 3
    qshape = (n, lq, 8) if bf else (lq, n, 8)
    kshape = (n, ls, cfg.get("kdim", 8)) if bf else (ls, n, cfg.get("kdim", 8))
    vshape = (n, ls, cfg.get("vdim", 8)) if bf else (ls, n, cfg.get("vdim", 8))
    q, k = _rand(*qshape, dtype=np.float32), _rand(*kshape, dtype=np.float32)
    v = _rand(*vshape, dtype=np.float32)
    pad = np.zeros((n, ls), bool)
    pad[0, -2:] = True
    amask = RNG.standard_normal((lq, ls)).astype(np.float32)
    outs = []
    for lib, mod in ((torch, t), (fg, f)):
        tq, tk, tv = (lib.tensor(a, requires_grad=True) for a in (q, k, v))
        o, w = mod(
            tq,
            tk,
            tv,
            key_padding_mask=lib.tensor(pad),
            need_weights=need_weights,
            attn_mask=lib.tensor(amask),
        )
        o.sum().backward()
        outs.append((o, w, [x.grad for x in (tq, tk, tv)], [p.grad for p in mod.parameters()]))
    (to, tw, tg, tp), (fo, fw, fgr, fp) = outs
    np.testing.assert_allclose(fo.detach().numpy(), to.detach().numpy(), atol=1e-5)
    if need_weights:
        np.testing.assert_allclose(fw.detach().numpy(), tw.detach().numpy(), atol=1e-6)
    else:
        assert fw is None and tw is None
    for a, b in zip(fgr + fp, tg + tp):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-4)


def test_multihead_attention_unbatched_and_per_head_weights(torch: Any) -> None:
    t, f = _pair(torch, "MultiheadAttention", 6, 3)
    x = _rand(4, 6, dtype=np.float32)
    to, tw = t(*(torch.tensor(x),) * 3, average_attn_weights=False)
    fo, fw = f(*(fg.tensor(x),) * 3, average_attn_weights=False)
    np.testing.assert_allclose(fo.detach().numpy(), to.detach().numpy(), atol=1e-5)
    np.testing.assert_allclose(fw.detach().numpy(), tw.detach().numpy(), atol=1e-6)


def test_multihead_attention_init_follows_torch() -> None:
    m = nn.MultiheadAttention(64, 4, add_bias_kv=True)
    bound = np.sqrt(6.0 / (64 + 192))
    w = m.in_proj_weight.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound
    assert np.all(m.in_proj_bias.detach().numpy() == 0)
    assert np.all(m.out_proj.bias.detach().numpy() == 0)
    assert m.bias_k.shape == (1, 1, 64)
    assert type(m.out_proj).__name__ == "NonDynamicallyQuantizableLinear"
    sep = nn.MultiheadAttention(8, 2, kdim=5, vdim=3)
    assert sep.in_proj_weight is None and sep.k_proj_weight.shape == (8, 5)


@pytest.mark.parametrize(
    "cfg",
    [
        {},
        {"norm_first": True, "activation": "gelu"},
        {"batch_first": True, "bias": False},
    ],
)
def test_transformer_encoder_matches_torch(torch: Any, cfg: dict) -> None:
    tl = torch.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, **cfg)
    fl = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, **cfg)
    assert repr(fl) == repr(tl)
    te = torch.nn.TransformerEncoder(tl, 2, norm=torch.nn.LayerNorm(16), enable_nested_tensor=False)
    fe = nn.TransformerEncoder(fl, 2, norm=nn.LayerNorm(16), enable_nested_tensor=False)
    assert list(fe.state_dict()) == list(te.state_dict())
    assert repr(fe) == repr(te)
    _load(te, fe)
    _load(tl, fl)
    x = _rand(3, 6, 16, dtype=np.float32) if cfg.get("batch_first") else _rand(6, 3, 16)
    x = x.astype(np.float32)
    pad = np.zeros((3, 6), bool)
    pad[1, -3:] = True
    causal = torch.nn.Transformer.generate_square_subsequent_mask(6)
    for kw in ({}, {"src_key_padding_mask": pad}, {"mask": causal.numpy()}):
        for tmod, fmod in ((tl, fl), (te, fe)):
            tx, fx = torch.tensor(x, requires_grad=True), fg.tensor(x, requires_grad=True)
            targs = {k: torch.tensor(v) for k, v in kw.items()}
            fargs = {k: fg.tensor(v) for k, v in kw.items()}
            if tmod is tl and "mask" in kw:
                targs["src_mask"] = targs.pop("mask")
                fargs["src_mask"] = fargs.pop("mask")
            to, fo = tmod(tx, **targs), fmod(fx, **fargs)
            np.testing.assert_allclose(fo.detach().numpy(), to.detach().numpy(), atol=2e-5)
            to.square().sum().backward()
            fo.square().sum().backward()
            np.testing.assert_allclose(fx.grad.numpy(), tx.grad.numpy(), atol=2e-4)


def test_transformer_encoder_layers_are_deep_copies() -> None:
    layer = nn.TransformerEncoderLayer(8, 2, 16)
    enc = nn.TransformerEncoder(layer, 3)
    ws = [m.linear1.weight for m in enc.layers]
    assert len({id(w) for w in ws}) == 3 and all(w is not layer.linear1.weight for w in ws)
    np.testing.assert_array_equal(ws[0].detach().numpy(), ws[2].detach().numpy())


def test_transformer_matches_torch(torch: Any) -> None:
    kw = {"num_encoder_layers": 2, "num_decoder_layers": 2, "dim_feedforward": 24, "dropout": 0.0}
    t, f = _pair(torch, "Transformer", 16, 4, **kw)
    src, tgt = _rand(7, 2, 16, dtype=np.float32), _rand(5, 2, 16, dtype=np.float32)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(5)
    fmask = nn.Transformer.generate_square_subsequent_mask(5)
    np.testing.assert_array_equal(fmask.numpy(), mask.numpy())
    to = t(torch.tensor(src), torch.tensor(tgt), tgt_mask=mask)
    fo = f(fg.tensor(src), fg.tensor(tgt), tgt_mask=fmask)
    np.testing.assert_allclose(fo.detach().numpy(), to.detach().numpy(), atol=5e-5)


def test_mha_errors_match_torch(torch: Any) -> None:
    for args, kw in (((8, 3), {}), ((0, 2), {})):
        with pytest.raises(Exception) as te:
            torch.nn.MultiheadAttention(*args, **kw)
        with pytest.raises(type(te.value)) as fe:
            nn.MultiheadAttention(*args, **kw)
        assert str(fe.value) == str(te.value)
    t, f = _pair(torch, "MultiheadAttention", 8, 2)
    for shape in ((2, 3, 4, 8), (5, 3, 6)):
        with pytest.raises(AssertionError) as te:
            t(*(torch.zeros(shape),) * 3)
        with pytest.raises(AssertionError) as fe:
            f(*(fg.zeros(shape),) * 3)
        assert str(fe.value) == str(te.value)


@pytest.mark.parametrize(
    "shape", [(1, 1, 600, 32), (3, 2, 300, 16), (8, 4, 64, 32), (5, 3, 130, 8)]
)
def test_sdpa_bitwise_identical_at_any_thread_count(shape: tuple) -> None:
    # one problem on two threads takes the two-pass backward (key blocks, then query blocks);
    # many problems share each thread's scratch tiles, ragged last tiles included
    q, k, v, g = (_rand(*shape, dtype=np.float32) for _ in range(4))
    results = []
    before = fg.get_num_threads()
    try:
        for n in (1, 2):
            fg.set_num_threads(n)
            ts = [fg.tensor(a, requires_grad=True) for a in (q, k, v)]
            out = F.scaled_dot_product_attention(*ts, is_causal=True)
            out.backward(fg.tensor(g))
            results.append([out.detach().numpy()] + [t.grad.numpy() for t in ts])
    finally:
        fg.set_num_threads(before)
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)
    want = _reference(q.astype(np.float64), k, v, causal=True)
    np.testing.assert_allclose(results[0][0], want, atol=1e-5)


def test_sdpa_reads_permuted_heads_in_place(torch: Any) -> None:
    # heads split from one qkv projection: strided views, read without a copy
    x = _rand(3, 70, 3, 2, 16, dtype=np.float32)
    res = []
    for lib in (fg, torch):
        t = lib.tensor(x, requires_grad=True)
        q, k, v = t.permute(2, 0, 3, 1, 4).unbind(0)
        out = lib.nn.functional.scaled_dot_product_attention(q, k[:, :1], v[:, :1])
        out.backward(lib.tensor(np.cos(np.arange(out.numel())).reshape(out.shape)).float())
        res.append((out.detach().numpy(), t.grad.numpy()))
    np.testing.assert_allclose(res[0][0], res[1][0], atol=1e-5)
    np.testing.assert_allclose(res[0][1], res[1][1], atol=1e-4)
