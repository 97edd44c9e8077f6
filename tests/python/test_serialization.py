"""ferrograd.save / ferrograd.load: torch's checkpoint format both ways, bit for bit, loaded
with a restricted unpickler. data/torch_checkpoint.pt was written by torch.save (torch 2.15) from
values given here in closed form, so it checks reading torch's files without torch installed."""

import fractions
import io
import pickle
import zipfile

import ferrograd as fg
import numpy as np
import pytest

TORCH_FILE = __file__.rsplit("/", 1)[0] + "/data/torch_checkpoint.pt"


def roundtrip(obj, **kwargs):
    buf = io.BytesIO()
    fg.save(obj, buf)
    buf.seek(0)
    return fg.load(buf, **kwargs)


def same_bits(a, b):
    return (
        a.dtype == b.dtype
        and tuple(a.shape) == tuple(b.shape)
        and a.detach().contiguous().numpy().tobytes() == b.detach().contiguous().numpy().tobytes()
    )


def test_round_trip_is_bit_for_bit():
    fg.manual_seed(0)
    tensors = {
        "f32": fg.randn(3, 4),
        "f64": fg.randn(5, dtype=fg.float64) * 1e300,
        "i64": fg.tensor([-(2**63), 2**63 - 1, 0]),
        "bool": fg.tensor([[True, False]]),
        "transposed": fg.arange(12.0).reshape(3, 4).t(),
        "expanded": fg.ones(1, 3).expand(2, 3),
        "scalar": fg.tensor(2.5),
        "empty": fg.zeros(0, 5),
        "nan": fg.tensor([float("nan"), float("inf"), -0.0]),
    }
    back = roundtrip(tensors)
    for k, t in tensors.items():
        assert same_bits(back[k], t), k


def test_containers_numbers_and_shared_tensors():
    t = fg.arange(3.0)
    obj = {"a": t, "b": [t, (1, 2.5, "x", None, True)], "c": {"nested": {1: t}}}
    back = roundtrip(obj)
    assert back["b"][1] == (1, 2.5, "x", None, True)
    assert back["a"] is back["b"][0] is back["c"]["nested"][1]
    assert same_bits(back["a"], t)


def test_leaf_requires_grad_is_kept():
    w = fg.randn(2, requires_grad=True)
    back = roundtrip({"w": w, "y": w * 2})
    assert back["w"].requires_grad and back["w"].is_leaf
    assert not back["y"].requires_grad  # a non-leaf's history is not saved


def test_reads_a_checkpoint_torch_wrote_without_torch():
    ck = fg.load(TORCH_FILE)
    assert ck["epoch"] == 7 and ck["lrs"] == [0.1, 0.01] and ck["name"] == "tiny"
    sd = ck["model"]
    assert list(sd) == [
        "linear.weight",
        "linear.bias",
        "steps",
        "mask",
        "transposed",
        "half",
        "scalar",
        "empty",
    ]
    np.testing.assert_array_equal(
        sd["linear.weight"].detach().numpy(), np.arange(6, dtype=np.float32).reshape(2, 3) / 4
    )
    assert sd["linear.weight"].requires_grad
    assert sd["linear.bias"].dtype == fg.float64 and sd["linear.bias"].tolist() == [-1.5, 2.25]
    assert sd["steps"].dtype == fg.int64 and sd["steps"].tolist() == [0, 1, 2, 3, 4]
    assert sd["mask"].tolist() == [True, False, True]
    assert sd["transposed"].tolist() == np.arange(6.0).reshape(2, 3).T.tolist()
    assert sd["half"].dtype == fg.float16 and sd["half"].tolist() == [0.5, -1.0]
    assert sd["scalar"].item() == 3.5 and sd["scalar"].dim() == 0
    assert tuple(sd["empty"].shape) == (0, 4)


def test_torch_loads_what_ferrograd_saves(tmp_path):
    torch = pytest.importorskip("torch")
    fg.manual_seed(1)
    sd = {
        "w": fg.randn(3, 2),
        "i": fg.arange(4),
        "b": fg.tensor([True]),
        "d": fg.randn(2, dtype=fg.float64),
    }
    fg.save(sd, tmp_path / "m.pt")
    theirs = torch.load(tmp_path / "m.pt")  # weights_only=True: only safe globals
    for k, t in sd.items():
        assert theirs[k].numpy().tobytes() == t.numpy().tobytes()
        assert str(theirs[k].dtype).split(".")[-1] == str(t.dtype).split(".")[-1]


def test_truncated_or_foreign_files_raise_runtime_error(tmp_path):
    buf = io.BytesIO()
    fg.save({"w": fg.ones(100)}, buf)
    data = buf.getvalue()
    for bad in (data[: len(data) // 2], b"", b"not a checkpoint at all"):
        with pytest.raises(RuntimeError, match="zip archive|corrupt"):
            fg.load(io.BytesIO(bad))
    # A storage file cut short inside a valid archive.
    src = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for n in src.namelist():
            z.writestr(n, src.read(n)[:8] if n.endswith("data/0") else src.read(n))
    with pytest.raises(RuntimeError, match="reaches past its storage"):
        fg.load(io.BytesIO(out.getvalue()))


def evil_checkpoint(obj):
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("archive/data.pkl", pickle.dumps(obj, protocol=2))
    return io.BytesIO(out.getvalue())


def test_arbitrary_objects_need_weights_only_false():
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        fg.load(evil_checkpoint(fractions.Fraction(1, 3)))
    with pytest.raises(pickle.UnpicklingError, match="posix.system|os.system"):
        fg.load(evil_checkpoint(_RunsCode()))
    assert fg.load(
        evil_checkpoint(fractions.Fraction(1, 3)), weights_only=False
    ) == fractions.Fraction(1, 3)


class _RunsCode:
    def __reduce__(self):
        import os

        return (os.system, ("echo should-never-run",))


def test_map_location_cpu_only():
    assert roundtrip({"a": fg.ones(1)}, map_location="cpu")["a"].item() == 1.0
    with pytest.raises(RuntimeError, match="CPU only"):
        roundtrip({"a": fg.ones(1)}, map_location="cuda:0")


def test_parameters_and_modules_pickle_as_themselves():
    lin = fg.nn.Linear(2, 3)
    back = pickle.loads(pickle.dumps(lin))
    assert isinstance(back.weight, fg.nn.Parameter) and back.weight.requires_grad
    assert same_bits(back.weight, lin.weight) and same_bits(back.bias, lin.bias)
    loaded = roundtrip({"p": fg.nn.Parameter(fg.ones(2))})["p"]
    assert isinstance(loaded, fg.nn.Parameter) and loaded.requires_grad


@pytest.mark.parametrize(
    "dtype", ["float16", "bfloat16", "uint8", "int8", "int16", "int32", "int64", "bool"]
)
def test_every_dtype_round_trips_bit_for_bit(dtype, tmp_path):
    t = (fg.arange(-3, 9).reshape(3, 4) * 0.75).to(getattr(fg, dtype))
    fg.save({"t": t}, tmp_path / "d.pt")
    back = fg.load(tmp_path / "d.pt")["t"]
    assert back.dtype == t.dtype and back.tolist() == t.tolist()
    torch = pytest.importorskip("torch")
    theirs = torch.load(tmp_path / "d.pt")["t"]
    assert str(theirs.dtype) == f"torch.{dtype}" and theirs.tolist() == t.tolist()
    other = theirs.flip(0)  # a tensor torch made, of the same dtype
    torch.save({"t": other}, tmp_path / "t.pt")
    mine = fg.load(tmp_path / "t.pt")["t"]
    assert mine.dtype == t.dtype and mine.tolist() == other.tolist()
