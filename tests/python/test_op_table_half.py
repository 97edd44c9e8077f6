"""Every op-table entry in float16 and bfloat16: the half types are storage types that compute in
float32 and round on store (torch's CPU rule), so an op on half inputs must give the float32
op's result on the same (half-representable) values, rounded to the half type, with float
outputs in the half dtype and gradients in the half dtype of their input. The truth is the
float32 run of the same entry; the tolerance allows the roundings a composed op takes.

Entries listed in ``half_unsupported.txt`` have no half path yet: they must raise a clear
exception naming the dtype (never a wrong number), and the list may only shrink."""

from __future__ import annotations

import pathlib
from typing import Any, List

import ferrograd as fg
import numpy as np
import pytest
from test_op_table import CASES, _grad_inputs, _make_arrays, _outputs, _to_lib

try:  # parity is checked only where torch is installed
    import torch
except ImportError:  # pragma: no cover - depends on the machine
    torch = None

HALF = {"float16": (fg.float16, 2e-2), "bfloat16": (fg.bfloat16, 8e-2)}

_LIST = pathlib.Path(__file__).with_name("half_unsupported.txt")
UNSUPPORTED = {
    line.strip()
    for line in _LIST.read_text().splitlines()
    if line.strip() and not line.startswith("#")
}


# Gradients the half type cannot hold whatever the kernel does (torch's are off the same way).
HALF_RANGE = {
    # Inputs near 1e3: the output's half rounding (ulp 0.5-8) enters exp(x - out).
    "logsumexp_large": "output rounding at large magnitude",
    # A zero row divides by eps = 1e-12: the float32 gradient (1e12) overflows float16.
    "nn_normalize_zero_row:float16": "gradient beyond float16's range",
}


# Where torch's own half kernels lose the value (they compute in the half type) and ours,
# computing in float32, keep it: compared by dtype only.
TORCH_HALF_LOSES = {
    "linalg_matrix_exp": "torch's Pade steps overflow in half; ours run in float32",
    "matrix_exp_large": "as linalg_matrix_exp",
    "nn_normalize_zero_row:float16": "torch's eps 1e-12 underflows to 0 in half: 0/0 is NaN",
}


def _is_float(t: Any) -> bool:
    return isinstance(t, fg.Tensor) and t.dtype.is_floating_point


def _close(got: Any, want: Any, tol: float, what: str) -> None:
    g = got.detach().float().numpy().astype(np.float64)
    w = want.detach().numpy().astype(np.float64)
    assert g.shape == w.shape, f"{what}: shape {g.shape} vs {w.shape}"
    finite = np.isfinite(w)
    np.testing.assert_array_equal(np.isfinite(g), finite, err_msg=f"{what}: non-finite pattern")
    scale = max(1.0, float(np.abs(w[finite]).max())) if finite.any() else 1.0
    np.testing.assert_allclose(g[finite], w[finite], rtol=tol, atol=tol * scale, err_msg=what)


@pytest.mark.parametrize("half", sorted(HALF))
@pytest.mark.parametrize("spec,case", CASES)
def test_half_matches_float32_rounded(spec: Any, case: int, half: str) -> None:
    args = spec.all_arg_sets()[case]
    if not any(a.kind == "float" for a in args):
        pytest.skip("no float input")
    dtype, tol = HALF[half]
    arrays = _make_arrays(args, seed=case)
    grad = spec.grad and bool(_grad_inputs(args))
    vals_h = _to_lib(fg, arrays, args, dtype, grad=grad)
    key = f"{spec.name}:{half}"
    if key in UNSUPPORTED:
        with pytest.raises((RuntimeError, NotImplementedError, TypeError)) as info:
            spec.fn(fg, *vals_h)
        assert half in str(info.value).lower() or "Half" in str(info.value)
        return
    # The same values in float32: the half rounding of the inputs is exact there.
    vals_32: List[Any] = []
    for v, a in zip(vals_h, args):
        if a.kind == "float":
            w = v.detach().float()
            vals_32.append(w.requires_grad_(True) if v.requires_grad else w)
        else:
            vals_32.append(v)
    out_h = _outputs(spec.fn(fg, *vals_h))
    out_32 = _outputs(spec.fn(fg, *vals_32))
    assert len(out_h) == len(out_32)
    for j, (h, w) in enumerate(zip(out_h, out_32)):
        what = f"{spec.name} output {j} ({half})"
        if w.dtype == fg.float32:
            assert h.dtype == dtype, f"{what}: dtype {h.dtype}, expected {dtype}"
            _close(h, w, tol, what)
        else:
            assert h.dtype == w.dtype, f"{what}: dtype {h.dtype} vs {w.dtype}"
            np.testing.assert_array_equal(h.numpy(), w.numpy(), err_msg=what)
    floats = [(h, w) for h, w in zip(out_h, out_32) if _is_float(h) and h.requires_grad]
    if not grad or not floats or spec.name in HALF_RANGE or key in HALF_RANGE:
        return
    rng = np.random.default_rng(case + 3)
    loss_h = loss_32 = 0
    for h, w in floats:
        c = fg.tensor(rng.uniform(0.5, 1.5, size=tuple(w.shape)), dtype=fg.float32)
        loss_h = loss_h + (h.float() * c).sum()
        loss_32 = loss_32 + (w * c).sum()
    ins = _grad_inputs(args)
    g_h = fg.autograd.grad(loss_h, [vals_h[k] for k in ins], allow_unused=True)
    g_32 = fg.autograd.grad(loss_32, [vals_32[k] for k in ins], allow_unused=True)
    for k, a, b in zip(ins, g_h, g_32):
        what = f"{spec.name} grad of input {k} ({half})"
        if b is None:
            continue
        assert a is not None, f"{what}: missing"
        assert a.dtype == dtype, f"{what}: dtype {a.dtype}, expected {dtype}"
        _close(a, b, 2 * tol, what)


@pytest.mark.parametrize("half", sorted(HALF))
@pytest.mark.parametrize("spec,case", CASES)
def test_half_matches_torch(spec: Any, case: int, half: str) -> None:
    """torch on the same half inputs: the same output dtypes, values within the rounding."""
    if torch is None:
        pytest.skip("torch is not installed")
    args = spec.all_arg_sets()[case]
    if not spec.torch_parity or not any(a.kind == "float" for a in args):
        pytest.skip("no torch counterpart or no float input")
    if f"{spec.name}:{half}" in UNSUPPORTED:
        pytest.skip("no half path yet")
    dtype, tol = HALF[half]
    arrays = _make_arrays(args, seed=case)
    try:
        theirs = _outputs(
            (spec.torch_fn or spec.fn)(
                torch, *_to_lib(torch, arrays, args, getattr(torch, half), grad=False)
            )
        )
    except (RuntimeError, NotImplementedError) as e:
        pytest.skip(f"torch has no {half} kernel here: {e}")
    ours = _outputs(spec.fn(fg, *_to_lib(fg, arrays, args, dtype, grad=False)))
    for j, (o, t) in enumerate(zip(ours, theirs)):
        what = f"{spec.name} output {j} ({half})"
        assert str(o.dtype).split(".")[1] == str(t.dtype).split(".")[1], (
            f"{what}: dtype {o.dtype} vs torch {t.dtype}"
        )
        if o.dtype.is_floating_point:
            want = fg.tensor(t.detach().float().numpy())
            key = f"{spec.name}:{half}"
            if not {spec.name, key} & (HALF_RANGE.keys() | TORCH_HALF_LOSES.keys()):
                _close(o, want, 2 * tol, what)


def test_unsupported_list_names_real_entries() -> None:
    names = {f"{spec.name}:{h}" for spec, _ in (c.values for c in CASES) for h in HALF}
    assert not UNSUPPORTED - names, sorted(UNSUPPORTED - names)
