"""ferrograd.device, ferrograd.cuda and device= arguments: the CPU is accepted everywhere a
tensor is made or moved; other devices are refused with a clear error."""

import pickle

import ferrograd as fg
import pytest

CPU_ONLY = "ferrograd computes on the CPU only"


def test_device_names_and_equality():
    assert str(fg.device("cpu")) == "cpu" and repr(fg.device("cpu")) == "device(type='cpu')"
    d = fg.device("cuda:1")
    assert (d.type, d.index) == ("cuda", 1) and str(d) == "cuda:1"
    assert repr(fg.device("cuda", 0)) == "device(type='cuda', index=0)"
    assert fg.device("cpu") == "cpu" and fg.device("cpu") == fg.device(fg.device("cpu"))
    assert fg.device("cpu") != fg.device("cpu", 0) and len({fg.device("cpu"), "x"}) == 2
    assert pickle.loads(pickle.dumps(d)) == d
    with pytest.raises(RuntimeError, match="Expected one of cpu, cuda"):
        fg.device("tpu")


def test_device_repr_matches_torch():
    torch = pytest.importorskip("torch")
    for args in (("cpu",), ("cuda:1",), ("cuda", 0), ("mps",)):
        assert repr(fg.device(*args)) == repr(torch.device(*args))
        assert str(fg.device(*args)) == str(torch.device(*args))


def test_the_usual_device_selection_runs_on_the_cpu():
    dev = fg.device("cuda" if fg.cuda.is_available() else "cpu")
    x = fg.ones(2, 3, device=dev).to(dev)
    assert x.device == dev and x.device.type == "cpu" and x.cpu() is x
    assert fg.zeros(2, device="cpu").tolist() == [0.0, 0.0]
    assert fg.linspace(0, 1, 3, device=dev).tolist() == [0.0, 0.5, 1.0]
    assert fg.eye(2, device=dev).sum().item() == 2.0
    assert fg.ones_like(x, device=dev).shape == x.shape
    assert fg.tensor([1.0], device=fg.device("cpu")).to(device="cpu").item() == 1.0
    fg.backends.cudnn.deterministic = True  # scripts set it; nothing reads it
    assert not fg.backends.mps.is_available() and fg.cuda.device_count() == 0


@pytest.mark.parametrize(
    "call",
    [
        lambda: fg.ones(2, device="cuda"),
        lambda: fg.randn(2, device=fg.device("cuda", 0)),
        lambda: fg.tensor([1.0], device="mps"),
        lambda: fg.ones(2).to("cuda"),
        lambda: fg.ones(2).to(device=fg.device("cuda")),
        lambda: fg.ones(2).cuda(),
        lambda: fg.linspace(0, 1, 3, device="cuda"),
        lambda: fg.eye(2, device="cuda"),
        lambda: fg.zeros_like(fg.ones(2), device="cuda"),
        lambda: fg.full_like(fg.ones(2), 3.0, device="cuda"),
    ],
)
def test_other_devices_are_refused_clearly(call):
    with pytest.raises(RuntimeError, match=CPU_ONLY):
        call()
