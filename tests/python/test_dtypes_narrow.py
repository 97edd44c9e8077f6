"""The narrow dtypes (uint8, int8, int16, int32, float16, bfloat16): torch's promotion table,
integer arithmetic that wraps in the type's width (NumPy's fixed-width arithmetic is the truth),
conversions, NumPy and DLPack without copies, safetensors, and autograd through half types."""

from __future__ import annotations

import itertools

import ferrograd as fg
import numpy as np
import pytest

try:
    import torch
except ImportError:  # pragma: no cover - depends on the machine
    torch = None

INTS = {
    "uint8": (fg.uint8, np.uint8),
    "int8": (fg.int8, np.int8),
    "int16": (fg.int16, np.int16),
    "int32": (fg.int32, np.int32),
    "int64": (fg.int64, np.int64),
}
ALL = [
    fg.bool, fg.uint8, fg.int8, fg.int16, fg.int32, fg.int64,
    fg.float16, fg.bfloat16, fg.float32, fg.float64,
]  # fmt: skip

# torch.promote_types, written out from its documented lattice: bool < integers < floats;
# within integers the wider wins and uint8 with int8 is int16; float16 with bfloat16 is float32.
_INT_ORDER = [fg.uint8, fg.int8, fg.int16, fg.int32, fg.int64]
_FLOAT_ORDER = [fg.float16, fg.bfloat16, fg.float32, fg.float64]


def _promote(a, b):  # type: ignore[no-untyped-def]
    if a == b:
        return a
    if a == fg.bool or b == fg.bool:
        return b if a == fg.bool else a
    if a in _FLOAT_ORDER and b in _INT_ORDER:
        return a
    if b in _FLOAT_ORDER and a in _INT_ORDER:
        return b
    if a in _INT_ORDER:
        if {a, b} == {fg.uint8, fg.int8}:
            return fg.int16
        return max(a, b, key=lambda d: (d.itemsize, d.is_signed))
    if {a, b} == {fg.float16, fg.bfloat16}:
        return fg.float32
    return max(a, b, key=lambda d: d.itemsize)


@pytest.mark.parametrize("a,b", list(itertools.product(ALL, ALL)))
def test_promotion_follows_torchs_lattice(a, b) -> None:  # type: ignore[no-untyped-def]
    x, y = fg.ones(2, dtype=a), fg.ones(2, dtype=b)
    want = _promote(a, b)
    if a != fg.bool or b != fg.bool:
        assert (x + y).dtype == want
    if torch is not None:
        ta, tb = getattr(torch, str(a).split(".")[1]), getattr(torch, str(b).split(".")[1])
        assert str(torch.promote_types(ta, tb)).split(".")[1] == str(want).split(".")[1]


def test_python_numbers_keep_the_tensors_narrow_type() -> None:
    assert (fg.ones(2, dtype=fg.int8) + 1).dtype == fg.int8
    assert (fg.ones(2, dtype=fg.uint8) * 2.5).dtype == fg.float32
    assert (fg.ones(2, dtype=fg.float16) * 2.5).dtype == fg.float16
    assert (fg.ones(2, dtype=fg.bfloat16) + fg.tensor(1.0, dtype=fg.float64)).dtype == fg.bfloat16
    assert (fg.ones(2, dtype=fg.int32) / 2).dtype == fg.float32


@pytest.mark.parametrize("name", sorted(INTS))
def test_integer_arithmetic_wraps_like_numpy(name: str) -> None:
    dt, npt = INTS[name]
    info = np.iinfo(npt)
    rng = np.random.default_rng(0)
    a = rng.integers(info.min, info.max, size=64, endpoint=True).astype(npt)
    b = rng.integers(1, min(info.max, 1000), size=64, endpoint=True).astype(npt)
    x, y = fg.from_numpy(a.copy()), fg.from_numpy(b.copy())
    with np.errstate(over="ignore"):
        for got, want in [
            (x + y, a + b),
            (x - y, a - b),
            (x * y, a * b),
            (x // y, a // b),
            (x % y, a % b),
            (x & y, a & b),
            (x | y, a | b),
            (x ^ y, a ^ b),
            (~x, ~a),
            (x.maximum(y), np.maximum(a, b)),
            (x.clamp(0, 100), np.clip(a, 0, 100)),
        ]:
            assert got.dtype == dt
            np.testing.assert_array_equal(got.numpy(), want)
    for got, want in [(x < y, a < b), (x == y, a == b), (x >= 3, a >= 3)]:
        assert got.dtype == fg.bool
        np.testing.assert_array_equal(got.numpy(), want)
    # Reductions that sum give int64 (torch's rule); extremes keep the type.
    assert x.sum().dtype == fg.int64 and x.sum().item() == int(a.astype(np.int64).sum())
    np.testing.assert_array_equal(x.cumsum(0).numpy(), np.cumsum(a.astype(np.int64)))
    assert x.max().dtype == dt and x.max().item() == int(a.max())
    assert x.argmax().dtype == fg.int64 and x.argmax().item() == int(a.argmax())
    assert isinstance(x[0].item(), int) and x.tolist() == a.tolist()
    assert (x / y).dtype == fg.float32
    np.testing.assert_allclose((x / y).numpy(), (a / b).astype(np.float32), rtol=1e-6)


@pytest.mark.parametrize("name", sorted(INTS))
def test_integer_tensors_move_through_shape_and_index_ops(name: str) -> None:
    dt, npt = INTS[name]
    a = (np.arange(24) % 100).astype(npt).reshape(2, 3, 4)
    x = fg.tensor(a)
    assert x.dtype == dt
    idx = fg.tensor([2, 0])
    for got, want in [
        (x.permute(2, 0, 1).contiguous(), a.transpose(2, 0, 1)),
        (fg.cat([x, x], 1), np.concatenate([a, a], 1)),
        (fg.stack([x, x]), np.stack([a, a])),
        (x.index_select(2, idx), a[:, :, [2, 0]]),
        (x[:, idx], a[:, [2, 0]]),
        (x.flip(0), a[::-1]),
        (fg.where(x > 5, x, fg.zeros_like(x)), np.where(a > 5, a, 0)),
        (x.gather(2, fg.zeros(2, 3, 1, dtype=fg.int64)), a[:, :, :1]),
        (x.sort(dim=2, descending=True)[0], -np.sort(-a.astype(np.int64), 2)),
    ]:
        assert got.dtype == dt
        np.testing.assert_array_equal(got.numpy(), want)
    y = x.clone()
    y[0, 0] = 7
    assert y.dtype == dt and (y[0, 0] == 7).all().item()
    # int32 indices index as torch's do.
    np.testing.assert_array_equal(
        fg.arange(10)[fg.tensor([3, 1], dtype=fg.int32)].numpy(), [3, 1]
    )


def test_float_to_integer_conversion_truncates_through_int64() -> None:
    v = [300.7, -1.5, 255.0, -129.9]
    for dt, npt in INTS.values():
        got = fg.tensor(v, dtype=fg.float64).to(dt).numpy()
        np.testing.assert_array_equal(got, np.array(v).astype(np.int64).astype(npt))


def test_float16_rounding_matches_numpy() -> None:
    rng = np.random.default_rng(1)
    v = np.concatenate([rng.normal(0, 100, 1000), [65504.0, 65520.0, 1e-8, -0.0, np.inf]])
    got = fg.tensor(v).to(fg.float16).numpy()
    # float64 goes through float32 first, as torch's casts do (NumPy rounds once).
    np.testing.assert_array_equal(got, v.astype(np.float32).astype(np.float16))
    a, b = rng.normal(size=100).astype(np.float16), rng.normal(size=100).astype(np.float16)
    # NumPy's float16 arithmetic also computes in float32 and rounds once.
    np.testing.assert_array_equal((fg.from_numpy(a) * fg.from_numpy(b)).numpy(), a * b)
    np.testing.assert_array_equal((fg.from_numpy(a) + fg.from_numpy(b)).numpy(), a + b)


def _bf16_round(x: np.ndarray) -> np.ndarray:
    """Round float32 values to bfloat16 (nearest, ties to even) on their bits."""
    bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16
    return rounded.astype(np.uint32).view(np.float32)


def test_bfloat16_rounding_is_round_to_nearest_even() -> None:
    rng = np.random.default_rng(2)
    v = rng.normal(0, 10, 200_000).astype(np.float32)
    # Values just above a halfway point, which a rounding through float64 got wrong.
    v[:4] = np.array([0x3F3A8005, 0x4F088004, 0x5ED68003, 0x45868006], np.uint32).view(np.float32)
    got = fg.from_numpy(v).to(fg.bfloat16).float().numpy()
    np.testing.assert_array_equal(got, _bf16_round(v))
    v64 = rng.normal(0, 10, 1000)
    got = fg.tensor(v64).to(fg.bfloat16).float().numpy()
    np.testing.assert_array_equal(got, _bf16_round(v64.astype(np.float32)))
    with pytest.raises(TypeError, match="BFloat16"):
        fg.ones(2, dtype=fg.bfloat16).numpy()


@pytest.mark.parametrize("npt", [np.uint8, np.int8, np.int16, np.int32, np.float16])
def test_numpy_shares_memory_both_ways(npt: type) -> None:
    a = np.arange(6).astype(npt)
    t = fg.from_numpy(a)
    assert str(t.dtype) == f"ferrograd.{np.dtype(npt).name}"
    a[0] = 5
    assert t[0].item() == 5
    back = t.numpy()
    assert back.dtype == npt and np.shares_memory(back, a)


@pytest.mark.parametrize("dt", [d for d in ALL if d != fg.bfloat16])
def test_dlpack_round_trip_with_numpy(dt) -> None:  # type: ignore[no-untyped-def]
    t = fg.arange(6).to(dt)
    arr = np.from_dlpack(t)
    assert arr.dtype == t.numpy().dtype
    np.testing.assert_array_equal(arr, t.numpy())
    back = fg.from_dlpack(arr)
    assert back.dtype == dt and back.data_ptr() == t.data_ptr()


@pytest.mark.skipif(torch is None, reason="torch is not installed")
def test_dlpack_bfloat16_with_torch() -> None:
    t = fg.tensor([1.5, -2.25, 3.0], dtype=fg.bfloat16)
    tt = torch.from_dlpack(t)
    assert tt.dtype == torch.bfloat16 and tt.tolist() == [1.5, -2.25, 3.0]
    back = fg.from_dlpack(torch.tensor([0.5, 7.0], dtype=torch.bfloat16))
    assert back.dtype == fg.bfloat16 and back.tolist() == [0.5, 7.0]


def test_safetensors_keep_every_dtype(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from safetensors import safe_open
    from safetensors.numpy import save_file

    tensors = {str(d): fg.arange(5).to(d) for d in ALL}
    path = tmp_path / "all.safetensors"
    from ferrograd import safetensors as fst

    fst.save_file(tensors, str(path))
    loaded = fst.load_file(str(path))
    for k, t in tensors.items():
        assert loaded[k].dtype == t.dtype and loaded[k].tolist() == t.tolist()
    # A file written by the reference implementation keeps its dtypes too.
    ref = {"u8": np.arange(4, dtype=np.uint8), "h": np.linspace(0, 1, 4).astype(np.float16)}
    save_file(ref, str(tmp_path / "ref.safetensors"))
    got = fst.load_file(str(tmp_path / "ref.safetensors"))
    assert got["u8"].dtype == fg.uint8 and got["h"].dtype == fg.float16
    np.testing.assert_array_equal(got["h"].numpy(), ref["h"])
    with safe_open(str(path), "numpy") as f:  # the reference reads our int16 as int16
        assert f.get_tensor("ferrograd.int16").dtype == np.int16


def test_only_float_types_require_grad_and_half_grads_are_half() -> None:
    with pytest.raises(RuntimeError, match="floating point"):
        fg.ones(2, dtype=fg.int32).requires_grad_()
    for dt in (fg.float16, fg.bfloat16):
        x = fg.tensor([0.5, -1.0, 2.0], dtype=dt, requires_grad=True)
        (x.exp() * x).sum().backward()
        assert x.grad.dtype == dt
        xv = x.detach().double().numpy()
        np.testing.assert_allclose(
            x.grad.float().numpy(), np.exp(xv) * (1 + xv), rtol=2e-2 if dt == fg.float16 else 8e-2
        )


def test_a_half_module_runs_in_half() -> None:
    fg.manual_seed(0)
    net = fg.nn.Sequential(fg.nn.Linear(4, 8), fg.nn.ReLU(), fg.nn.Linear(8, 2))
    x = fg.randn(3, 4)
    want = net(x)
    for dt, tol in ((fg.float16, 2e-2), (fg.bfloat16, 8e-2)):
        h = net.to(dt) if dt == fg.bfloat16 else net.half()
        assert all(p.dtype == dt for p in h.parameters())
        out = h(x.to(dt))
        assert out.dtype == dt
        np.testing.assert_allclose(out.float().detach().numpy(), want.detach().numpy(), atol=tol)
        out.float().sum().backward()
        assert all(p.grad.dtype == dt for p in h.parameters())
        net.float()
        for p in net.parameters():
            p.grad = None


def test_casting_methods_and_legacy_types() -> None:
    x = fg.tensor([1.7, -2.2])
    for meth, dt in [
        ("half", fg.float16), ("bfloat16", fg.bfloat16), ("int", fg.int32),
        ("short", fg.int16), ("char", fg.int8), ("byte", fg.uint8),
    ]:  # fmt: skip
        assert getattr(x, meth)().dtype == dt
    assert isinstance(fg.IntTensor([1, 2]), fg.IntTensor)
    assert fg.HalfTensor([1.0]).dtype == fg.float16
    assert fg.half is fg.float16 and fg.int is fg.int32 and fg.short is fg.int16
    assert not fg.uint8.is_signed and fg.int8.is_signed and fg.bfloat16.itemsize == 2
    assert "dtype=ferrograd.int32" in repr(fg.tensor([1, 2], dtype=fg.int32))
    assert "dtype=ferrograd.bfloat16" in repr(fg.tensor([1.0], dtype=fg.bfloat16))


@pytest.mark.parametrize("opt", ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad"])
@pytest.mark.parametrize("dt", [fg.float16, fg.bfloat16])
def test_optimizers_update_half_parameters_in_float32(opt: str, dt) -> None:  # type: ignore[no-untyped-def]
    """A half parameter is updated as its float32 value would be, then rounded: three steps
    track a float32 run from the same start within the half type's rounding."""
    start = fg.tensor([0.5, -1.25, 2.0, 0.1]).to(dt)
    runs = []
    for d in (dt, fg.float32):
        p = fg.nn.Parameter(start.to(d).clone())
        kw = {"momentum": 0.9} if opt == "SGD" else {}
        o = getattr(fg.optim, opt)([p], lr=0.05, **kw)
        for _ in range(3):
            o.zero_grad()
            (p.float() ** 2).sum().backward()
            o.step()
        assert p.dtype == d
        runs.append(p.detach().float().numpy())
    np.testing.assert_allclose(runs[0], runs[1], atol=2e-2 if dt == fg.float16 else 6e-2)


def test_finfo_and_iinfo_give_each_types_limits() -> None:
    for dt, npt in [(fg.float16, np.float16), (fg.float32, np.float32), (fg.float64, np.float64)]:
        fi, ni = fg.finfo(dt), np.finfo(npt)
        assert (fi.bits, fi.eps, fi.max, fi.min, fi.tiny) == (
            ni.bits, float(ni.eps), float(ni.max), float(ni.min), float(ni.smallest_normal),
        )  # fmt: skip
        # the limits are the type's: max stays finite in the type, twice it does not
        assert np.isfinite(fg.tensor(fi.max, dtype=dt).item())
    bf = fg.finfo(fg.bfloat16)
    top = fg.tensor(bf.max, dtype=fg.float64).to(fg.bfloat16).item()
    assert top == bf.max and bf.eps == 2.0**-7  # max is representable; 1 + eps is the next value
    assert fg.tensor(1.0 + bf.eps, dtype=fg.float64).to(fg.bfloat16).item() == 1.0 + bf.eps
    assert fg.finfo().dtype == "float32"
    for dt, npt in INTS.values():
        assert (fg.iinfo(dt).min, fg.iinfo(dt).max) == (np.iinfo(npt).min, np.iinfo(npt).max)
    with pytest.raises(TypeError, match="requires a floating point input type"):
        fg.finfo(fg.int32)
    with pytest.raises(TypeError, match="requires an integer input type"):
        fg.iinfo(fg.float16)
    with pytest.raises(TypeError, match="torch.bool is not supported by torch.iinfo"):
        fg.iinfo(fg.bool)
    if torch is not None:
        for d in ("float16", "bfloat16", "float32"):
            assert repr(fg.finfo(getattr(fg, d))) == repr(torch.finfo(getattr(torch, d)))
        assert repr(fg.iinfo(fg.int32)) == repr(torch.iinfo(torch.int32))


@pytest.mark.parametrize(
    "make, want",
    [
        # torch 2.15's behaviour, case by case: numbers an integer type cannot hold raise,
        # unsigned types take the negatives that wrap, float types overflow to inf.
        (lambda: fg.tensor([300], dtype=fg.int8), "type int8 without overflow"),
        (lambda: fg.tensor([1e10], dtype=fg.int8), "type int8 without overflow"),
        (lambda: fg.tensor([float("nan")], dtype=fg.int16), "type int16 without overflow"),
        (lambda: fg.tensor([3 * 10**11], dtype=fg.int32), "type int32 without overflow"),
        (lambda: fg.full((2,), 300, dtype=fg.uint8), "type uint8_t without overflow"),
        (lambda: fg.zeros(1, dtype=fg.int8).fill_(300), "type int8_t without overflow"),
        (lambda: fg.zeros(2, dtype=fg.uint8).__setitem__(0, 300), "type uint8_t without"),
        (lambda: fg.tensor([-1], dtype=fg.uint8).tolist(), [255]),
        (lambda: fg.tensor([2.7, -3.9], dtype=fg.int8).tolist(), [2, -3]),
        (lambda: fg.tensor([1e6], dtype=fg.float16).tolist(), [float("inf")]),
        (lambda: (fg.zeros(1, dtype=fg.int8) + 300).tolist(), [44]),
    ],
)
def test_numbers_out_of_an_integer_types_range_raise_as_in_torch(make, want) -> None:  # type: ignore[no-untyped-def]
    if isinstance(want, str):
        with pytest.raises(RuntimeError, match=f"value cannot be converted to {want}"):
            make()
    else:
        assert make() == want
