"""``ferrograd.safetensors``: bytes checked against the format's specification parsed by hand
(8-byte little-endian header length, JSON header, raw little-endian data), bit-exact round trips,
dtype widening on load, torch's checks and errors; and interchange with the ``safetensors``
package and torch when they are installed."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any, Dict

import ferrograd as fg
import numpy as np
import pytest
from ferrograd import nn
from ferrograd import safetensors as st

RNG = np.random.default_rng(0)


def _parse(data: bytes) -> Dict[str, Any]:
    """The format by its specification: u64 LE header size, JSON header, then the data."""
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    body = data[8 + n :]
    out: Dict[str, Any] = {"__metadata__": header.pop("__metadata__", None)}
    for name, info in header.items():
        a, b = info["data_offsets"]
        out[name] = (info["dtype"], info["shape"], body[a:b])
    return out


def _build(tensors: Dict[str, np.ndarray], dtypes: Dict[str, str]) -> bytes:
    """A file written by hand from the specification (for dtypes ferrograd cannot write)."""
    header: Dict[str, Any] = {}
    body = b""
    for name, arr in tensors.items():
        raw = np.ascontiguousarray(arr).tobytes()
        header[name] = {
            "dtype": dtypes[name],
            "shape": list(arr.shape),
            "data_offsets": [len(body), len(body) + len(raw)],
        }
        body += raw
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + body


def _sample() -> Dict[str, Any]:
    return {
        "w": fg.tensor(RNG.standard_normal((3, 4)).astype(np.float32)),
        "d": fg.tensor(RNG.standard_normal((2, 2, 2))),
        "i": fg.tensor(RNG.integers(-(2**40), 2**40, size=(5,))),
        "b": fg.tensor(RNG.random(6) > 0.5),
        "s": fg.tensor(3.5),
        "e": fg.zeros(0, 3),
    }


def test_bytes_follow_the_specification() -> None:
    tensors = _sample()
    parsed = _parse(st.save(tensors, metadata={"format": "pt"}))
    assert parsed["__metadata__"] == {"format": "pt"}
    kinds = {"w": "F32", "d": "F64", "i": "I64", "b": "BOOL", "s": "F32", "e": "F32"}
    for name, t in tensors.items():
        dtype, shape, raw = parsed[name]
        assert dtype == kinds[name]
        assert shape == list(t.shape)
        assert (
            raw
            == np.ascontiguousarray(t.numpy()).astype(t.numpy().dtype.newbyteorder("<")).tobytes()
        )


def test_round_trip_is_bit_exact(tmp_path: Path) -> None:
    tensors = _sample()
    for loaded in (st.load(st.save(tensors)), _via_file(tensors, tmp_path / "x.safetensors")):
        assert set(loaded) == set(tensors)
        for k, t in tensors.items():
            assert loaded[k].dtype == t.dtype and tuple(loaded[k].shape) == tuple(t.shape)
            assert loaded[k].numpy().tobytes() == t.numpy().tobytes()


def _via_file(tensors: Dict[str, Any], path: Path) -> Dict[str, Any]:
    st.save_file(tensors, path)
    return st.load_file(path)


def test_narrow_dtypes_load_in_their_own_type() -> None:
    f16 = RNG.standard_normal((2, 3)).astype(np.float16)
    i32 = RNG.integers(-(2**31), 2**31 - 1, size=4, dtype=np.int32)
    u8 = np.arange(250, 256, dtype=np.uint8)
    i8 = np.array([-128, -1, 0, 127], dtype=np.int8)
    # bfloat16 is the top half of a float32's bits
    bf16 = (np.array([1.0, -2.5, 3.0e20, 1.5e-20], np.float32).view(np.uint32) >> 16).astype(
        np.uint16
    )
    f32 = (bf16.astype(np.uint32) << 16).view(np.float32)
    data = _build(
        {"h": f16, "i": i32, "u": u8, "c": i8, "bf": bf16},
        {"h": "F16", "i": "I32", "u": "U8", "c": "I8", "bf": "BF16"},
    )
    out = st.load(data)
    assert [out[k].dtype for k in ("h", "i", "u", "c", "bf")] == [
        fg.float16, fg.int32, fg.uint8, fg.int8, fg.bfloat16,
    ]  # fmt: skip
    np.testing.assert_array_equal(out["h"].numpy(), f16)
    np.testing.assert_array_equal(out["i"].numpy(), i32)
    np.testing.assert_array_equal(out["u"].numpy(), u8)
    np.testing.assert_array_equal(out["c"].numpy(), i8)
    np.testing.assert_array_equal(out["bf"].float().numpy(), f32)
    assert list(out) == ["h", "i", "u", "c", "bf"]  # stored order


def test_checks_and_errors(tmp_path: Path) -> None:
    base = fg.randn(4, 4)
    with pytest.raises(RuntimeError, match="Some tensors share memory"):
        st.save({"a": base, "b": base[1]})
    with pytest.raises(ValueError, match="non contiguous tensor: `t`"):
        st.save({"t": base.t()})
    with pytest.raises(ValueError, match="Key `x` is invalid, expected torch.Tensor"):
        st.save({"x": [1, 2]})
    with pytest.raises(ValueError, match="metadata must be a dict of str to str"):
        st.save({"a": base}, metadata={"n": 1})
    good = st.save({"a": base})
    with pytest.raises(RuntimeError, match="safetensors"):
        st.load(good[:-3])  # truncated data
    with pytest.raises(RuntimeError, match="safetensors"):
        st.load(b"\xff" * 16)  # header size beyond the buffer
    with pytest.raises(RuntimeError, match="safetensors"):
        st.load(b"")
    with pytest.raises(TypeError, match="has dtype F8_E4M3"):
        st.load(_build({"q": np.zeros(3, np.uint8)}, {"q": "F8_E4M3"}))
    with pytest.raises(FileNotFoundError):
        st.load_file(tmp_path / "missing.safetensors")
    with pytest.raises(RuntimeError, match="CPU only"):
        st.load_file(tmp_path / "missing.safetensors", device="cuda")


class Tied(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(7, 3)
        self.head = nn.Linear(3, 7, bias=False)
        self.head.weight = self.emb.weight
        self.norm = nn.LayerNorm(3)


def test_save_model_and_load_model_with_tied_weights(tmp_path: Path) -> None:
    m = Tied()
    path = tmp_path / "m.safetensors"
    st.save_model(m, path)
    assert set(st.load_file(path)) == {"emb.weight", "norm.weight", "norm.bias"}
    m2 = Tied()
    missing, unexpected = st.load_model(m2, path)
    assert missing == [] and unexpected == []
    x = fg.tensor([[1, 2, 6]])
    np.testing.assert_array_equal(
        m2.head(m2.emb(x)).detach().numpy(), m.head(m.emb(x)).detach().numpy()
    )
    with pytest.raises(RuntimeError, match='Missing key\\(s\\): "extra.weight"'):
        bigger = Tied()
        bigger.extra = nn.Linear(2, 2, bias=False)
        st.load_model(bigger, path)


def test_interchange_with_the_safetensors_package(tmp_path: Path) -> None:
    snp = pytest.importorskip("safetensors.numpy")
    arrays = {
        "a": RNG.standard_normal((3, 5)).astype(np.float32),
        "b": RNG.integers(0, 9, (4,)),
        "c": RNG.standard_normal(2),
        "m": np.array([True, False]),
    }
    snp.save_file(arrays, tmp_path / "np.safetensors")
    ours = st.load_file(tmp_path / "np.safetensors")
    for k, v in arrays.items():
        np.testing.assert_array_equal(ours[k].numpy(), v)
    st.save_file(ours, tmp_path / "fg.safetensors", metadata={"who": "ferrograd"})
    back = snp.load_file(tmp_path / "fg.safetensors")
    for k, v in arrays.items():
        np.testing.assert_array_equal(back[k], v)
        assert back[k].dtype == v.dtype


def test_torch_model_checkpoint_loads_into_the_same_model(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    storch = pytest.importorskip("safetensors.torch")
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    storch.save_model(tm, tmp_path / "t.safetensors")
    fm = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    st.load_model(fm, tmp_path / "t.safetensors")
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    np.testing.assert_allclose(
        fm(fg.tensor(x)).detach().numpy(), tm(torch.tensor(x)).detach().numpy(), rtol=1e-6
    )
    # and back: ferrograd's file into torch
    st.save_model(fm, tmp_path / "f.safetensors")
    tm2 = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    storch.load_model(tm2, tmp_path / "f.safetensors")
    np.testing.assert_array_equal(
        tm2(torch.tensor(x)).detach().numpy(), tm(torch.tensor(x)).detach().numpy()
    )
