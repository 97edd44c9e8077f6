"""get_default_dtype / set_default_dtype: the type Python floats, float factories and integer
division take (torch's rules), process-wide."""

import ferrograd as fg
import pytest

EXPRS = [
    "L.tensor([1.5]).dtype",
    "L.ones(2).dtype",
    "L.rand(2).dtype",
    "L.full((1,), 2.5).dtype",
    "L.arange(0.0, 1.0).dtype",
    "(L.arange(3) / 2).dtype",
    "(L.arange(3) * 1.5).dtype",
    "(L.ones(2, dtype=L.float32) * 1.5).dtype",
    "L.tensor([1, 2]).dtype",
]


@pytest.fixture
def float64_default():
    fg.set_default_dtype(fg.float64)
    try:
        yield
    finally:
        fg.set_default_dtype(fg.float32)


def names(lib, exprs):
    return [str(eval(e, {"L": lib})).split(".")[-1] for e in exprs]


def test_float64_default_reaches_factories_and_promotion(float64_default):
    assert fg.get_default_dtype() == fg.float64
    assert names(fg, EXPRS) == [
        "float64",
        "float64",
        "float64",
        "float64",
        "float64",
        "float64",
        "float64",
        "float32",
        "int64",
    ]


def test_float32_is_the_default_and_ints_are_refused():
    assert fg.get_default_dtype() == fg.float32 and fg.ones(1).dtype == fg.float32
    with pytest.raises(TypeError, match="only floating-point types are supported"):
        fg.set_default_dtype(fg.int64)
    assert fg.get_default_dtype() == fg.float32


def test_matches_torch(float64_default):
    torch = pytest.importorskip("torch")
    torch.set_default_dtype(torch.float64)
    try:
        assert names(fg, EXPRS) == names(torch, EXPRS)
    finally:
        torch.set_default_dtype(torch.float32)
