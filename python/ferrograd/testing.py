"""``torch.testing``: ``assert_close`` with torch's default tolerances per dtype, its
comparison of nested sequences and mappings, and its failure messages."""

from __future__ import annotations

import builtins
import collections.abc
from typing import Any, Callable, List, Optional, Tuple, Union

from . import _C
from ._creation import tensor as _tensor
from ._lazy import np

__all__ = ["assert_close"]

# (rtol, atol) per dtype, torch's `_DTYPE_PRECISIONS`; exact for the others.
_PRECISIONS = {
    _C.float16: (0.001, 1e-5),
    _C.bfloat16: (0.016, 1e-5),
    _C.float32: (1.3e-6, 1e-5),
    _C.float64: (1e-7, 1e-7),
}
# Python numbers compare at their NumPy dtype's tolerances (float is float64).
_NUMBER_PRECISIONS = {builtins.float: (1e-7, 1e-7)}


class _Mismatch(Exception):
    """A failed comparison: the exception type to raise and its message."""

    def __init__(self, kind: type, msg: str) -> None:
        super().__init__(msg)
        self.kind = kind
        self.msg = msg


def _is_tensor_like(x: Any) -> bool:
    return isinstance(x, _C.Tensor) or type(x).__module__ == "numpy" and hasattr(x, "dtype")


def _tolerances(
    rtol: Optional[float], atol: Optional[float], *defaults: Tuple[float, float]
) -> Tuple[float, float]:
    if (rtol is None) != (atol is None):
        missing = "rtol" if rtol is None else "atol"
        raise ValueError(
            f"Both 'rtol' and 'atol' must be either specified or omitted, but got no {missing}."
        )
    if rtol is not None and atol is not None:
        return rtol, atol
    return max(d[0] for d in defaults), max(d[1] for d in defaults)


def _make_msg(
    identifier: str, rtol: float, atol: float, extra: str, abs_diff: Any, rel_diff: Any, idx: Any
) -> str:
    equality = rtol == 0 and atol == 0
    msg = f"{identifier} are not {'equal' if equality else 'close'}!\n\n"
    if extra:
        msg += extra.strip() + "\n"
    for kind, diff, at, tol in (
        ("absolute", abs_diff, idx[0], atol),
        ("relative", rel_diff, idx[1], rtol),
    ):
        line = (
            f"{kind.title()} difference: {diff}"
            if at is None
            else f"Greatest {kind} difference: {diff} at index {at}"
        )
        if not equality:
            line += f" (up to {tol} allowed)"
        msg += line + "\n"
    return msg.strip()


def _compare_numbers(
    actual: Any,
    expected: Any,
    rtol: Optional[float],
    atol: Optional[float],
    equal_nan: bool,
    check_dtype: bool,
) -> None:
    if check_dtype and type(actual) is not type(expected):
        raise _Mismatch(
            AssertionError,
            f"The (d)types do not match: {type(actual)} != {type(expected)}.",
        )
    r, a = _tolerances(
        rtol,
        atol,
        _NUMBER_PRECISIONS.get(type(actual), (0.0, 0.0)),
        _NUMBER_PRECISIONS.get(type(expected), (0.0, 0.0)),
    )
    if actual == expected:
        return
    both_nan = actual != actual and expected != expected
    if both_nan and equal_nan:
        return
    diff = abs(actual - expected)
    if diff <= a + r * abs(expected) and diff != float("inf"):
        return
    rel = float("inf") if expected == 0 else diff / abs(expected)
    raise _Mismatch(
        AssertionError,
        _make_msg(
            "Scalars", r, a, f"Expected {expected} but got {actual}.", diff, rel, (None, None)
        ),
    )


def _as_tensor(x: Any) -> Any:
    return x if isinstance(x, _C.Tensor) else _tensor(x)


def _numpy(t: Any) -> Any:
    t = t.detach()
    if t.dtype in (_C.float16, _C.bfloat16):
        t = t.float()
    return t.numpy()


def _compare_tensors(
    actual: Any,
    expected: Any,
    rtol: Optional[float],
    atol: Optional[float],
    equal_nan: bool,
    check_dtype: bool,
    check_stride: bool,
) -> None:
    from ._dtypes import promote_types

    actual, expected = _as_tensor(actual), _as_tensor(expected)
    if actual.shape != expected.shape:
        raise _Mismatch(
            AssertionError,
            f"The values for attribute 'shape' do not match: {actual.shape!r} != "
            f"{expected.shape!r}.",
        )
    if check_dtype and actual.dtype != expected.dtype:
        raise _Mismatch(
            AssertionError,
            f"The values for attribute 'dtype' do not match: {actual.dtype!r} != "
            f"{expected.dtype!r}.",
        )
    if check_stride and actual.stride() != expected.stride():
        raise _Mismatch(
            AssertionError,
            f"The values for attribute 'stride()' do not match: {actual.stride()} != "
            f"{expected.stride()}.",
        )
    r, a = _tolerances(
        rtol,
        atol,
        _PRECISIONS.get(actual.dtype, (0.0, 0.0)),
        _PRECISIONS.get(expected.dtype, (0.0, 0.0)),
    )
    if actual.dtype != expected.dtype:
        common = promote_types(actual.dtype, expected.dtype)
        actual, expected = actual.to(common), expected.to(common)
    x, y = np.asarray(_numpy(actual)), np.asarray(_numpy(expected))
    floating = actual.dtype.is_floating_point
    if floating:
        with np.errstate(invalid="ignore", over="ignore"):
            matches = (x == y) | (np.abs(x - y) <= a + r * np.abs(y))
        if equal_nan:
            matches |= np.isnan(x) & np.isnan(y)
    else:
        matches = x == y
    if matches.all():
        return
    if x.ndim == 0:
        raise _Mismatch(
            AssertionError,
            _make_msg_scalar(x.item(), y.item(), r, a),
        )
    n = matches.size
    bad = n - int(matches.sum())
    extra = f"Mismatched elements: {bad} / {n} ({bad / n:.1%})"
    xf, yf, mf = x.ravel(), y.ravel(), matches.ravel()
    if not floating:
        xf, yf = xf.astype(np.int64), yf.astype(np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        abs_diff = np.abs(xf - yf)
        abs_diff[mf] = 0
        # torch divides integers in its default float type.
        num = abs_diff if floating else abs_diff.astype(np.float32)
        den = np.abs(yf) if floating else np.abs(yf).astype(np.float32)
        rel_diff = num / den
        rel_diff[mf] = 0
    if actual.dtype in (_C.float16, _C.bfloat16):
        # torch computes the differences in the half type: round them to it.
        abs_diff, rel_diff = (
            _tensor(v).to(actual.dtype).float().numpy() for v in (abs_diff, rel_diff)
        )
    ia, ir = _argmax(abs_diff), _argmax(rel_diff)
    raise _Mismatch(
        AssertionError,
        _make_msg(
            "Tensor-likes",
            r,
            a,
            extra,
            abs_diff[ia].item(),
            rel_diff[ir].item(),
            (_index(ia, x.shape), _index(ir, x.shape)),
        ),
    )


def _index(flat: builtins.int, shape: Tuple[builtins.int, ...]) -> Tuple[builtins.int, ...]:
    return tuple(builtins.int(i) for i in np.unravel_index(flat, shape))


def _argmax(v: Any) -> builtins.int:
    """The first maximum, or the first NaN (torch.max propagates NaN)."""
    nan = np.isnan(v) if v.dtype.kind == "f" else np.zeros(v.shape, bool)
    if nan.any():
        return builtins.int(np.argmax(nan))
    return builtins.int(np.argmax(v))


def _make_msg_scalar(actual: Any, expected: Any, rtol: float, atol: float) -> str:
    diff = abs(actual - expected)
    rel = float("inf") if expected == 0 else diff / abs(expected)
    return _make_msg(
        "Scalars", rtol, atol, f"Expected {expected} but got {actual}.", diff, rel, (None, None)
    )


def _compare(
    actual: Any, expected: Any, path: List[Any], kwargs: dict
) -> Optional[Tuple[_Mismatch, List[Any]]]:
    if _is_tensor_like(actual) and _is_tensor_like(expected):
        try:
            _compare_tensors(actual, expected, **kwargs)
        except _Mismatch as m:
            return m, path
        return None
    numbers = (builtins.bool, builtins.int, builtins.float)
    if isinstance(actual, numbers) and isinstance(expected, numbers):
        try:
            _compare_numbers(
                actual,
                expected,
                kwargs["rtol"],
                kwargs["atol"],
                kwargs["equal_nan"],
                kwargs["check_dtype"],
            )
        except _Mismatch as m:
            return m, path
        return None
    seq = collections.abc.Sequence
    if (
        isinstance(actual, seq)
        and isinstance(expected, seq)
        and not isinstance(actual, str)
        and not isinstance(expected, str)
    ):
        if len(actual) != len(expected):
            return (
                _Mismatch(
                    AssertionError,
                    f"The length of the sequences mismatch: {len(actual)} != {len(expected)}",
                ),
                path,
            )
        for i, (a, e) in enumerate(zip(actual, expected)):
            failed = _compare(a, e, path + [i], kwargs)
            if failed:
                return failed
        return None
    mapping = collections.abc.Mapping
    if isinstance(actual, mapping) and isinstance(expected, mapping):
        ka, ke = set(actual), set(expected)
        if ka != ke:
            return (
                _Mismatch(
                    AssertionError,
                    "The keys of the mappings do not match:\n"
                    f"Missing keys in the actual mapping: {sorted(ke - ka)}\n"
                    f"Additional keys in the actual mapping: {sorted(ka - ke)}",
                ),
                path,
            )
        keys: Any = list(actual)
        try:  # torch sorts the keys where it can, so the first failure reported is stable
            keys = sorted(keys)
        except TypeError:
            pass
        for k in keys:
            failed = _compare(actual[k], expected[k], path + [k], kwargs)
            if failed:
                return failed
        return None
    raise TypeError(
        f"No comparison pair was able to handle inputs of type {type(actual)} and {type(expected)}."
    )


def assert_close(
    actual: Any,
    expected: Any,
    *,
    allow_subclasses: bool = True,
    rtol: Optional[float] = None,
    atol: Optional[float] = None,
    equal_nan: bool = False,
    check_device: bool = True,
    check_dtype: bool = True,
    check_layout: bool = True,
    check_stride: bool = False,
    msg: Union[str, Callable[[str], str], None] = None,
) -> None:
    """``torch.testing.assert_close``: ``actual`` and ``expected`` (tensors, NumPy arrays,
    Python numbers, or sequences and mappings of them) are close, elementwise
    ``|actual - expected| <= atol + rtol * |expected|`` with torch's defaults per dtype (exact
    for integers and bool); raises AssertionError with torch's message otherwise."""
    if (rtol is None) != (atol is None):
        _tolerances(rtol, atol)
    options = dict(
        rtol=rtol,
        atol=atol,
        equal_nan=equal_nan,
        check_dtype=check_dtype,
        check_stride=check_stride,
    )
    failed = _compare(actual, expected, [], options)
    if failed is None:
        return
    mismatch, path = failed
    text = mismatch.msg
    if path:
        text += "\n\nThe failure occurred for item " + "".join(f"[{p!r}]" for p in path)
    if msg is not None:
        text = msg(text) if callable(msg) else msg
    raise mismatch.kind(text)
