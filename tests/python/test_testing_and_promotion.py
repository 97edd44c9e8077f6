"""``testing.assert_close`` (tolerances at their boundary, nesting, torch's messages) and the
dtype rules ``promote_types`` / ``result_type`` / ``can_cast`` against what the arithmetic ops
themselves produce, and against torch when it is installed."""

from __future__ import annotations

import itertools
from typing import Any, Callable, List

import ferrograd as fg
import numpy as np
import pytest

try:
    import torch
except ImportError:  # pragma: no cover - depends on the machine
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")

DTYPES = [
    "bool",
    "uint8",
    "int8",
    "int16",
    "int32",
    "int64",
    "float16",
    "bfloat16",
    "float32",
    "float64",
]


def test_default_tolerances_hold_at_their_boundary() -> None:
    # float64: |a - e| <= 1e-7 + 1e-7 |e|; at e = 1 the bound is 2e-7.
    e = fg.tensor([1.0], dtype=fg.float64)
    fg.testing.assert_close(e + 1.9e-7, e)
    with pytest.raises(AssertionError, match="Tensor-likes are not close"):
        fg.testing.assert_close(e + 2.1e-7, e)
    # float32: 1e-5 + 1.3e-6 |e|; at e = 10 the bound is 2.3e-5 (float32 spacing there ~1e-6).
    e32 = fg.tensor([10.0])
    fg.testing.assert_close(e32 + 2.0e-5, e32)
    with pytest.raises(AssertionError):
        fg.testing.assert_close(e32 + 3.0e-5, e32)
    # Integers and bool compare exactly.
    with pytest.raises(AssertionError, match="are not equal"):
        fg.testing.assert_close(fg.tensor([1, 2]), fg.tensor([1, 3]))
    # Explicit tolerances replace the defaults; both or neither.
    fg.testing.assert_close(fg.tensor([1.0]), fg.tensor([1.5]), rtol=0.0, atol=0.5)
    with pytest.raises(ValueError, match="Both 'rtol' and 'atol'"):
        fg.testing.assert_close(fg.tensor([1.0]), fg.tensor([1.0]), rtol=1e-3)


def test_mismatch_statistics_and_nesting() -> None:
    with pytest.raises(AssertionError) as err:
        fg.testing.assert_close(
            fg.tensor([[1.0, 2.0], [3.0, 4.0]]), fg.tensor([[1.5, 2.0], [3.0, 0.0]])
        )
    text = str(err.value)
    assert "Mismatched elements: 2 / 4 (50.0%)" in text
    assert "Greatest absolute difference: 4.0 at index (1, 1)" in text
    assert "Greatest relative difference: inf at index (1, 1)" in text
    with pytest.raises(AssertionError, match=r"The failure occurred for item \[1\]\['b'\]"):
        fg.testing.assert_close([1, {"b": fg.tensor(1.0)}], [1, {"b": fg.tensor(2.0)}])
    with pytest.raises(AssertionError, match="shape"):
        fg.testing.assert_close(fg.zeros(2), fg.zeros(3))
    with pytest.raises(AssertionError, match="dtype"):
        fg.testing.assert_close(fg.zeros(2), fg.zeros(2, dtype=fg.float64))
    fg.testing.assert_close(fg.zeros(2), fg.zeros(2, dtype=fg.float64), check_dtype=False)
    fg.testing.assert_close(
        fg.tensor([1.0, float("nan")]), fg.tensor([1.0, float("nan")]), equal_nan=True
    )
    with pytest.raises(AssertionError, match="custom"):
        fg.testing.assert_close(fg.tensor(1.0), fg.tensor(2.0), msg="custom")
    with pytest.raises(TypeError, match="No comparison pair"):
        fg.testing.assert_close(fg.tensor([1.0]), 1.0)
    fg.testing.assert_close(np.array([1.0, 2.0]), fg.tensor([1.0, 2.0], dtype=fg.float64))


def _cases(lib: Any) -> List[Callable[[], None]]:
    ac, t = lib.testing.assert_close, lib.tensor
    nan, inf = float("nan"), float("inf")
    return [
        lambda: ac(t([1.0, 2.0, 3.0]), t([1.0, 2.5, 3.0])),
        lambda: ac(t([1.0, 2.0]), t([1.0, 2.0], dtype=lib.float64)),
        lambda: ac(t([1.0, 2.0]), t([1.0, 2.0, 3.0])),
        lambda: ac(t([1, 2]), t([1, 3])),
        lambda: ac(t(1.0), t(2.0)),
        lambda: ac(t([nan]), t([nan])),
        lambda: ac([t(1.0), t(2.0)], [t(1.0), t(3.0)]),
        lambda: ac({"a": t(1.0)}, {"a": t(3.0)}),
        lambda: ac(1.0, 1.5),
        lambda: ac(t([True, False]), t([True, True])),
        lambda: ac([1, 2], [1, 2, 3]),
        lambda: ac(t([1.0, inf]), t([1.0, inf])),
        lambda: ac({"a": 1, "b": 2}, {"a": 1, "c": 2}),
        lambda: ac(1, 1.0),
        lambda: ac(t([1.0, 2.0], dtype=lib.bfloat16), t([1.01, 2.0], dtype=lib.bfloat16)),
        lambda: ac(t([1.0, 2.0], dtype=lib.float16), t([1.01, 2.0], dtype=lib.float16)),
        lambda: ac(t([0.0, 1.0]), t([0.0, 1e-30])),
        lambda: ac(t([[1.0, 2.0]]).t(), t([[1.0], [2.0]]), check_stride=True),
        lambda: ac(t([1, 2], dtype=lib.uint8), t([3, 2], dtype=lib.uint8)),
    ]


def _outcome(f: Callable[[], None], prefix: str) -> str:
    try:
        f()
        return "ok"
    except Exception as e:  # noqa: BLE001 - the outcome is what is compared
        return f"{type(e).__name__}: {str(e).replace(prefix, 'LIB.')}"


@needs_torch
def test_messages_match_torch() -> None:
    ours = [_outcome(f, "ferrograd.") for f in _cases(fg)]
    theirs = [_outcome(f, "torch.") for f in _cases(torch)]
    for i, (a, b) in enumerate(zip(ours, theirs)):
        assert a == b, f"case {i}"


def test_promote_types_and_result_type_match_the_arithmetic() -> None:
    for a, b in itertools.product(DTYPES, DTYPES):
        da, db = getattr(fg, a), getattr(fg, b)
        x, y = fg.zeros(2, dtype=da), fg.zeros(2, dtype=db)
        op = (lambda u, v: u | v) if a == b == "bool" else (lambda u, v: u + v)
        assert fg.promote_types(da, db) == op(x, y).dtype, (a, b)
        assert fg.result_type(x, y) == op(x, y).dtype, (a, b)
        # A 0-d operand only raises the category.
        assert fg.result_type(x, fg.zeros((), dtype=db)) == op(x, fg.zeros((), dtype=db)).dtype
    for a in DTYPES:
        x = fg.zeros(2, dtype=getattr(fg, a))
        for number in (2, 2.5) if a != "bool" else (2.5,):
            assert fg.result_type(x, number) == (x * number).dtype, (a, number)
            assert fg.result_type(number, x) == (number * x).dtype, (a, number)
    with pytest.raises(TypeError, match="result_type"):
        fg.result_type(1, 2.0)


def test_can_cast_follows_the_categories() -> None:
    order = {"bool": 0, "float16": 2, "bfloat16": 2, "float32": 2, "float64": 2}
    for a, b in itertools.product(DTYPES, DTYPES):
        want = order.get(a, 1) <= order.get(b, 1)
        assert fg.can_cast(getattr(fg, a), getattr(fg, b)) == want, (a, b)


@needs_torch
def test_promotion_matches_torch() -> None:
    for a, b in itertools.product(DTYPES, DTYPES):
        ours, theirs = (getattr(fg, a), getattr(fg, b)), (getattr(torch, a), getattr(torch, b))
        assert (
            repr(fg.promote_types(*ours)).split(".")[1]
            == str(torch.promote_types(*theirs)).split(".")[1]
        )
        assert fg.can_cast(*ours) == torch.can_cast(*theirs), (a, b)
        x, y = fg.zeros((), dtype=ours[1]), torch.zeros((), dtype=theirs[1])
        got = fg.result_type(fg.zeros(2, dtype=ours[0]), x)
        want = torch.result_type(torch.zeros(2, dtype=theirs[0]), y)
        assert repr(got).split(".")[1] == str(want).split(".")[1], (a, b)
