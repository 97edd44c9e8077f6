"""Every op in ``optables/*`` checked the same way: float64 gradients and second derivatives
against central finite differences, float32 against float64, non-contiguous inputs, and torch
parity when torch is installed; forward values against NumPy and gradients against closed forms
where the entry gives them; and the coverage list of the public ops the tables exercise
(``pytest -s -k coverage`` prints it)."""

from __future__ import annotations

import importlib
import pkgutil
import types
from typing import Any, Dict, List, Optional

import ferrograd as fg
import numpy as np
import optables
import pytest
from optables.spec import Arg, OpSpec

try:  # parity is checked only where torch is installed
    import torch
except ImportError:  # pragma: no cover - depends on the machine
    torch = None


def _collect() -> List[OpSpec]:
    specs: List[OpSpec] = []
    for mod in pkgutil.iter_modules(optables.__path__):
        if mod.name == "spec" or mod.name.startswith("_"):
            continue
        specs.extend(importlib.import_module(f"{optables.__name__}.{mod.name}").OPS)
    return specs


SPECS = _collect()
CASES = [
    pytest.param(spec, i, id=f"{spec.name}-{i}")
    for spec in SPECS
    for i in range(len(spec.all_arg_sets()))
]


def _make_arrays(args: List[Arg], seed: int) -> List[Any]:
    rng = np.random.default_rng(seed)
    out: List[Any] = []
    for a in args:
        if a.kind == "float":
            out.append(rng.uniform(a.low, a.high, size=a.shape))
        elif a.kind == "int":
            out.append(rng.integers(0, a.int_high, size=a.shape).astype(np.int64))
        elif a.kind == "bool":
            out.append(rng.random(size=a.shape) < 0.5)
        else:
            out.append(a.value)
    return out


def _to_lib(
    lib: Any, arrays: List[Any], args: List[Arg], dtype: Any, grad: bool, noncontig: bool = False
) -> List[Any]:
    vals = []
    for arr, a in zip(arrays, args):
        if a.kind == "const":
            vals.append(arr)
            continue
        if a.kind == "float":
            t = lib.tensor(np.array(arr), dtype=dtype)
        else:
            t = lib.tensor(np.array(arr))
        if noncontig and t.dim() >= 2:
            # same values, transposed memory layout
            t = lib.tensor(
                np.ascontiguousarray(np.array(arr).swapaxes(0, 1)), dtype=t.dtype
            ).transpose(0, 1)
        if grad and a.kind == "float" and a.requires_grad:
            t.requires_grad_(True)
        vals.append(t)
    return vals


def _outputs(res: Any) -> List[Any]:
    return list(res) if isinstance(res, (tuple, list)) else [res]


def _float_outputs(res: Any) -> List[Any]:
    return [
        o
        for o in _outputs(res)
        if o.dtype in (fg.float32, fg.float64)
        or (torch is not None and isinstance(o, torch.Tensor) and o.is_floating_point())
    ]


def _weights(outs: List[Any], seed: int) -> List[np.ndarray]:
    rng = np.random.default_rng(seed + 1000)
    return [rng.uniform(0.5, 1.5, size=tuple(o.shape)) for o in outs]


def _scalar_loss(lib: Any, outs: List[Any], weights: List[np.ndarray]) -> Any:
    total = None
    for o, w in zip(outs, weights):
        term = (o * lib.tensor(w, dtype=o.dtype)).sum()
        total = term if total is None else total + term
    return total


def _loss_value(
    spec: OpSpec, arrays: List[Any], args: List[Arg], weights: List[np.ndarray]
) -> float:
    vals = _to_lib(fg, arrays, args, fg.float64, grad=False)
    with fg.no_grad():
        outs = _float_outputs(spec.fn(fg, *vals))
        return float(_scalar_loss(fg, outs, weights).item())


def _fd(
    spec: OpSpec,
    arrays: List[Any],
    args: List[Arg],
    weights: List[np.ndarray],
    k: int,
    eps: float = 1e-6,
) -> np.ndarray:
    base = np.array(arrays[k], dtype=np.float64)
    grad = np.zeros_like(base)
    for idx in np.ndindex(base.shape):
        plus = [a.copy() if isinstance(a, np.ndarray) else a for a in arrays]
        minus = [a.copy() if isinstance(a, np.ndarray) else a for a in arrays]
        plus[k][idx] += eps
        minus[k][idx] -= eps
        grad[idx] = (
            _loss_value(spec, plus, args, weights) - _loss_value(spec, minus, args, weights)
        ) / (2 * eps)
    return grad


def _grad_inputs(args: List[Arg]) -> List[int]:
    return [i for i, a in enumerate(args) if a.kind == "float" and a.requires_grad]


@pytest.mark.parametrize("spec,case", CASES)
def test_gradient_matches_finite_differences(spec: OpSpec, case: int) -> None:
    args = spec.all_arg_sets()[case]
    arrays = _make_arrays(args, seed=case)
    vals = _to_lib(fg, arrays, args, fg.float64, grad=spec.grad)
    res = spec.fn(fg, *vals)
    outs = _float_outputs(res)
    if not spec.grad or not outs or not _grad_inputs(args):
        for o in _outputs(res):
            assert not o.requires_grad or o.dtype in (fg.float32, fg.float64), (
                f"{spec.name}: int/bool output requires grad"
            )
        return
    weights = _weights(outs, case)
    loss = _scalar_loss(fg, outs, weights)
    ins = [vals[i] for i in _grad_inputs(args)]
    grads = fg.autograd.grad(loss, ins, allow_unused=True)
    for k, g in zip(_grad_inputs(args), grads):
        fd = _fd(spec, arrays, args, weights, k)
        got = np.zeros_like(fd) if g is None else g.detach().numpy()
        assert got.shape == fd.shape, f"{spec.name}: grad shape {got.shape} vs {fd.shape}"
        np.testing.assert_allclose(
            got, fd, atol=spec.atol, rtol=spec.rtol, err_msg=f"{spec.name} input {k}"
        )


@pytest.mark.parametrize("spec,case", CASES)
def test_second_derivative_matches_finite_differences(spec: OpSpec, case: int) -> None:
    if not (spec.grad and spec.gradgrad):
        pytest.skip(spec.note or "not twice differentiable")
    args = spec.all_arg_sets()[case]
    gi = _grad_inputs(args)
    if not gi:
        pytest.skip("no differentiable input")
    arrays = _make_arrays(args, seed=case)
    vals = _to_lib(fg, arrays, args, fg.float64, grad=True)
    outs = _float_outputs(spec.fn(fg, *vals))
    if not outs:
        pytest.skip("no float output")
    weights = _weights(outs, case)
    k = gi[0]
    rng = np.random.default_rng(case + 7)

    def first_grad_dot(xs: List[Any], v: np.ndarray) -> float:
        vv = _to_lib(fg, xs, args, fg.float64, grad=True)
        o = _float_outputs(spec.fn(fg, *vv))
        (g,) = fg.autograd.grad(_scalar_loss(fg, o, weights), [vv[k]], allow_unused=True)
        return 0.0 if g is None else float((g.detach().numpy() * v).sum())

    v = rng.uniform(-1, 1, size=np.shape(arrays[k]))
    (g,) = fg.autograd.grad(
        _scalar_loss(fg, outs, weights), [vals[k]], create_graph=True, allow_unused=True
    )
    if g is None or not g.requires_grad:
        return  # the first derivative does not depend on the inputs (a linear op)
    (gg,) = fg.autograd.grad((g * fg.tensor(v)).sum(), [vals[k]], allow_unused=True)
    got = np.zeros(np.shape(arrays[k])) if gg is None else gg.detach().numpy()
    eps = 1e-5
    fd = np.zeros(np.shape(arrays[k]))
    for idx in np.ndindex(fd.shape):
        plus = [a.copy() if isinstance(a, np.ndarray) else a for a in arrays]
        minus = [a.copy() if isinstance(a, np.ndarray) else a for a in arrays]
        plus[k][idx] += eps
        minus[k][idx] -= eps
        fd[idx] = (first_grad_dot(plus, v) - first_grad_dot(minus, v)) / (2 * eps)
    np.testing.assert_allclose(got, fd, atol=1e-5, rtol=1e-4, err_msg=spec.name)


def _outputs_at(spec: OpSpec, arrays: List[Any], args: List[Arg]) -> List[np.ndarray]:
    vals = _to_lib(fg, arrays, args, fg.float64, grad=False)
    with fg.no_grad():
        return [o.numpy().astype(np.float64) for o in _float_outputs(spec.fn(fg, *vals))]


@pytest.mark.parametrize("spec,case", CASES)
def test_forward_mode_matches_finite_differences(spec: OpSpec, case: int) -> None:
    """Forward-mode AD: each float output's tangent for random input tangents is the central
    difference of the op along them (every differentiable input perturbed at once)."""
    if not spec.grad:
        pytest.skip(spec.note or "not differentiable")
    args = spec.all_arg_sets()[case]
    gi = _grad_inputs(args)
    if not gi:
        pytest.skip("no differentiable input")
    arrays = _make_arrays(args, seed=case)
    rng = np.random.default_rng(case + 11)
    tangents = {k: rng.uniform(-1, 1, size=np.shape(arrays[k])) for k in gi}
    fwAD = fg.autograd.forward_ad
    with fwAD.dual_level():
        vals = _to_lib(fg, arrays, args, fg.float64, grad=False)
        for k in gi:
            vals[k] = fwAD.make_dual(vals[k], fg.tensor(tangents[k]))
        outs = _float_outputs(spec.fn(fg, *vals))
        got = []
        for o in outs:
            t = fwAD.unpack_dual(o).tangent
            got.append(np.zeros(tuple(o.shape)) if t is None else t.numpy())
    if not outs:
        pytest.skip("no float output")
    eps = 1e-6
    plus = [a.copy() if isinstance(a, np.ndarray) else a for a in arrays]
    minus = [a.copy() if isinstance(a, np.ndarray) else a for a in arrays]
    for k in gi:
        plus[k] = plus[k] + eps * tangents[k]
        minus[k] = minus[k] - eps * tangents[k]
    for j, (g, hi, lo) in enumerate(
        zip(got, _outputs_at(spec, plus, args), _outputs_at(spec, minus, args))
    ):
        # Outputs at infinity (logsumexp over an empty dim) have no difference quotient.
        finite = np.isfinite(hi) & np.isfinite(lo)
        np.testing.assert_allclose(
            np.asarray(g)[finite],
            ((hi - lo) / (2 * eps))[finite],
            atol=max(spec.atol, 1e-5),
            rtol=max(spec.rtol, 1e-4),
            err_msg=f"{spec.name} output {j}",
        )


@pytest.mark.parametrize("spec,case", CASES)
def test_float32_forward_close_to_float64(spec: OpSpec, case: int) -> None:
    args = spec.all_arg_sets()[case]
    arrays = _make_arrays(args, seed=case)
    r64 = _outputs(spec.fn(fg, *_to_lib(fg, arrays, args, fg.float64, grad=False)))
    r32 = _outputs(spec.fn(fg, *_to_lib(fg, arrays, args, fg.float32, grad=False)))
    for a, b in zip(r32, r64):
        if a.dtype == fg.float32:
            np.testing.assert_allclose(
                a.numpy(), b.numpy(), rtol=spec.f32_rtol, atol=1e-5, err_msg=spec.name
            )
        else:
            np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=spec.name)


@pytest.mark.parametrize("spec,case", CASES)
def test_noncontiguous_inputs_give_same_values_and_grads(spec: OpSpec, case: int) -> None:
    args = spec.all_arg_sets()[case]
    if not spec.noncontiguous or not any(a.kind != "const" and len(a.shape) >= 2 for a in args):
        pytest.skip("no input of two or more dims")
    arrays = _make_arrays(args, seed=case)
    grad = spec.grad and bool(_grad_inputs(args))
    a = _to_lib(fg, arrays, args, fg.float64, grad=grad)
    b = _to_lib(fg, arrays, args, fg.float64, grad=grad, noncontig=True)
    ra, rb = _outputs(spec.fn(fg, *a)), _outputs(spec.fn(fg, *b))
    for x, y in zip(ra, rb):
        np.testing.assert_allclose(
            x.detach().numpy(), y.detach().numpy(), rtol=1e-12, atol=1e-12, err_msg=spec.name
        )
    fa, fb = _float_outputs(ra), _float_outputs(rb)
    if grad and fa:
        w = _weights(fa, case)
        ins = _grad_inputs(args)
        ga = fg.autograd.grad(_scalar_loss(fg, fa, w), [a[i] for i in ins], allow_unused=True)
        gb = fg.autograd.grad(_scalar_loss(fg, fb, w), [b[i] for i in ins], allow_unused=True)
        for x, y in zip(ga, gb):
            if x is not None and y is not None:
                np.testing.assert_allclose(
                    x.numpy(), y.numpy(), rtol=1e-12, atol=1e-12, err_msg=spec.name
                )


@pytest.mark.parametrize("spec,case", CASES)
def test_matches_torch(spec: OpSpec, case: int) -> None:
    if torch is None:
        pytest.skip("torch is not installed")
    if not spec.torch_parity:
        pytest.skip(spec.note or "no torch counterpart")
    args = spec.all_arg_sets()[case]
    arrays = _make_arrays(args, seed=case)
    grad = spec.grad and bool(_grad_inputs(args))
    ours = _to_lib(fg, arrays, args, fg.float64, grad=grad)
    theirs = _to_lib(torch, arrays, args, torch.float64, grad=grad)
    tfn = spec.torch_fn or spec.fn
    ro, rt = _outputs(spec.fn(fg, *ours)), _outputs(tfn(torch, *theirs))
    assert len(ro) == len(rt), spec.name
    for x, y in zip(ro, rt):
        assert tuple(x.shape) == tuple(y.shape), (
            f"{spec.name}: shape {tuple(x.shape)} vs torch {tuple(y.shape)}"
        )
        np.testing.assert_allclose(
            x.detach().numpy(), y.detach().numpy(), rtol=1e-12, atol=1e-14, err_msg=spec.name
        )
    fo, ft = _float_outputs(ro), _float_outputs(rt)
    if grad and fo:
        w = _weights(fo, case)
        ins = _grad_inputs(args)
        go = fg.autograd.grad(_scalar_loss(fg, fo, w), [ours[i] for i in ins], allow_unused=True)
        try:
            gt = torch.autograd.grad(
                _scalar_loss(torch, ft, w), [theirs[i] for i in ins], allow_unused=True
            )
        except RuntimeError as e:  # some torch versions fail on valid inputs (their bug)
            pytest.skip(f"torch {torch.__version__} raised in backward: {e}")
        for x, y in zip(go, gt):
            if x is None or y is None:
                assert x is None or not x.numpy().any(), spec.name
                continue
            np.testing.assert_allclose(
                x.numpy(), y.numpy(), rtol=1e-10, atol=1e-12, err_msg=spec.name
            )


def _hvp(lib: Any, spec: OpSpec, case: int) -> Optional[List[Any]]:
    """Hessian-vector product of the weighted sum of ``spec``'s squared outputs with a fixed
    random vector, through ``lib``'s double backward: one array per differentiable input (None
    where the gradient does not depend on it); None without such inputs or float outputs."""
    args = spec.all_arg_sets()[case]
    arrays = _make_arrays(args, seed=case)
    vals = _to_lib(lib, arrays, args, lib.float64, grad=True)
    fn = spec.fn if lib is fg else (spec.torch_fn or spec.fn)
    outs = _float_outputs(fn(lib, *vals))
    ins = [vals[i] for i in _grad_inputs(args)]
    if not outs or not ins:
        return None
    # squared, so that linear ops get a second derivative too (their backward's backward)
    squares = [o * o for o in outs]
    grads = lib.autograd.grad(
        _scalar_loss(lib, squares, _weights(outs, case)), ins, create_graph=True, allow_unused=True
    )
    rng = np.random.default_rng(case + 7)
    total = None
    for g, x in zip(grads, ins):
        v = rng.uniform(-1, 1, size=tuple(x.shape))
        if g is not None and g.requires_grad:
            term = (g * lib.tensor(v, dtype=g.dtype)).sum()
            total = term if total is None else total + term
    if total is None:
        return [None] * len(ins)
    hs = lib.autograd.grad(total, ins, allow_unused=True)
    return [None if h is None else (h + 0).detach().numpy() for h in hs]


@pytest.mark.parametrize("spec,case", CASES)
def test_second_derivative_matches_torch(spec: OpSpec, case: int) -> None:
    if torch is None:
        pytest.skip("torch is not installed")
    # gradgrad=False entries too: both sides are exact where finite differences are not
    if not (spec.grad and spec.torch_parity and spec.torch_gradgrad):
        pytest.skip(spec.note or "no second derivative to compare")
    ours = _hvp(fg, spec, case)
    if ours is None:
        pytest.skip("no differentiable input or float output")
    try:
        theirs = _hvp(torch, spec, case)
    except RuntimeError as e:  # torch lacks some double backwards (flash attention, ...)
        pytest.skip(f"torch {torch.__version__} raised in double backward: {e}")
    for k, (x, y) in enumerate(zip(ours, theirs)):
        if x is None or y is None:
            z = y if x is None else x
            assert z is None or not z.any(), f"{spec.name} input {k}: one side has no term"
            continue
        np.testing.assert_allclose(x, y, rtol=1e-9, atol=1e-11, err_msg=f"{spec.name} {k}")


@pytest.mark.parametrize("spec,case", [c for c in CASES if c.values[0].torch_grad_fn])
def test_grad_fn_name_matches_torch(spec: OpSpec, case: int) -> None:
    if torch is None:
        pytest.skip("torch is not installed")
    args = spec.all_arg_sets()[case]
    arrays = _make_arrays(args, seed=case)
    ours = spec.fn(fg, *_to_lib(fg, arrays, args, fg.float64, grad=True))
    tfn = spec.torch_fn or spec.fn
    theirs = tfn(torch, *_to_lib(torch, arrays, args, torch.float64, grad=True))
    assert ours.grad_fn.name() == theirs.grad_fn.name(), spec.name


def test_every_table_entry_is_checked() -> None:
    names = [s.name for s in SPECS]
    assert len(names) == len(set(names)), "duplicate op names in the tables"
    assert len(SPECS) > 0


@pytest.mark.parametrize("spec", [pytest.param(s, id=s.name) for s in SPECS])
def test_float_outputs_have_a_backward_and_int_outputs_never_require_grad(spec: OpSpec) -> None:
    args = spec.args
    arrays = _make_arrays(args, seed=0)
    vals = _to_lib(fg, arrays, args, fg.float64, grad=True)
    any_grad_input = bool(_grad_inputs(args))
    for out in _outputs(spec.fn(fg, *vals)):
        if out.dtype in (fg.float32, fg.float64):
            if any_grad_input:  # also where the gradient is not checked (spec.grad False)
                assert out.requires_grad and out.grad_fn is not None, (
                    f"{spec.name}: float output from an input requiring grad has no backward"
                )
        else:
            assert not out.requires_grad and out.grad_fn is None, (
                f"{spec.name}: {out.dtype} output requires grad"
            )


# ----- NumPy references and closed-form derivatives --------------------------------------------

TOLS = {"float64": (1e-12, 1e-14, 1e-10, 1e-12), "float32": (1e-5, 1e-6, 1e-5, 1e-6)}
"""dtype -> (forward rtol, forward atol, gradient rtol, gradient atol)."""


def _form_cases(kind: str) -> List[Any]:
    return [
        pytest.param(spec, i, form, dt, id=f"{spec.name}-{i}-{form}-{dt}")
        for spec in SPECS
        if getattr(spec, kind) is not None
        for i in range(len(spec.all_arg_sets()))
        for form in ("fn", *spec.forms)
        for dt in TOLS
    ]


def _call(spec: OpSpec, form: str, vals: List[Any]) -> Any:
    if form == "fn":
        return spec.fn(fg, *vals)
    name = spec.op.split()[-1] if spec.op else spec.name
    if form == "function":
        return getattr(fg, name)(*vals)
    assert form == "method", f"{spec.name}: unknown form {form}"
    return getattr(vals[0], name)(*vals[1:])


def _reference_arrays(arrays: List[Any], args: List[Arg], dt: str) -> List[Any]:
    """The inputs as the op sees them: float arrays rounded to ``dt``, in float64."""
    return [
        np.asarray(a, dtype=dt).astype(np.float64) if arg.kind == "float" else a
        for a, arg in zip(arrays, args)
    ]


@pytest.mark.parametrize("spec,case,form,dt", _form_cases("reference"))
def test_forward_matches_numpy_reference(spec: OpSpec, case: int, form: str, dt: str) -> None:
    args = spec.all_arg_sets()[case]
    arrays = _make_arrays(args, seed=case)
    outs = _outputs(_call(spec, form, _to_lib(fg, arrays, args, getattr(fg, dt), grad=False)))
    refs = _outputs(spec.reference(*_reference_arrays(arrays, args, dt)))
    rtol, atol, _, _ = TOLS[dt]
    assert len(outs) == len(refs), spec.name
    for o, r in zip(outs, refs):
        assert tuple(o.shape) == np.shape(r), f"{spec.name}: shape {tuple(o.shape)}"
        if o.dtype in (fg.float32, fg.float64):
            assert o.dtype == getattr(fg, dt), f"{spec.name}: {o.dtype} output from {dt}"
        if spec.exact:
            np.testing.assert_array_equal(o.numpy(), r, err_msg=spec.name)
        else:
            np.testing.assert_allclose(o.numpy(), r, rtol=rtol, atol=atol, err_msg=spec.name)


@pytest.mark.parametrize("spec,case,form,dt", _form_cases("derivative"))
def test_gradient_matches_closed_form(spec: OpSpec, case: int, form: str, dt: str) -> None:
    args = spec.all_arg_sets()[case]
    arrays = _make_arrays(args, seed=case)
    vals = _to_lib(fg, arrays, args, getattr(fg, dt), grad=True)
    outs = _float_outputs(_call(spec, form, vals))
    loss = sum((o.sum() for o in outs[1:]), outs[0].sum())
    ins = [vals[i] for i in _grad_inputs(args)]
    grads = fg.autograd.grad(loss, ins, allow_unused=True)
    expected = spec.derivative(*_reference_arrays(arrays, args, dt))
    expected = expected if isinstance(expected, tuple) else (expected,)
    _, _, rtol, atol = TOLS[dt]
    assert len(expected) == len(ins), f"{spec.name}: one closed form per differentiable input"
    for k, (g, e) in enumerate(zip(grads, expected)):
        got = np.zeros(np.shape(e)) if g is None else g.numpy()
        if g is not None:
            assert g.dtype == getattr(fg, dt), f"{spec.name}: {g.dtype} gradient from {dt}"
        np.testing.assert_allclose(
            got, np.broadcast_to(e, got.shape), rtol=rtol, atol=atol, err_msg=f"{spec.name} {k}"
        )


@pytest.mark.parametrize("spec,case,form,dt", _form_cases("derivative2"))
def test_second_derivative_matches_closed_form(spec: OpSpec, case: int, form: str, dt: str) -> None:
    args = spec.all_arg_sets()[case]
    arrays = _make_arrays(args, seed=case)
    (x,) = _to_lib(fg, arrays, args, getattr(fg, dt), grad=True)
    (g,) = fg.autograd.grad(_call(spec, form, [x]).sum(), x, create_graph=True)
    assert g.requires_grad, f"{spec.name}: the first derivative is not differentiable"
    (h,) = fg.autograd.grad(g.sum(), x)
    (a,) = _reference_arrays(arrays, args, dt)
    _, _, rtol, atol = TOLS[dt]
    np.testing.assert_allclose(g.detach().numpy(), spec.derivative(a), rtol=rtol, atol=atol)
    np.testing.assert_allclose(h.numpy(), spec.derivative2(a), rtol=rtol, atol=atol)


# ----- coverage -----------------------------------------------------------------------------------


def _namespaces(lib: Any) -> Dict[str, Any]:
    return {"": lib, "Tensor": lib.Tensor, "nn.functional": lib.nn.functional}


def _lookup(lib: Any, name: str) -> Any:
    """Where the public op ``name`` lives in ``lib`` ("" top level, "Tensor", "nn.functional",
    or the dotted path itself), or None."""
    if "." in name:
        obj = lib
        for part in name.split("."):
            obj = getattr(obj, part, None)
        return name if obj is not None else None
    for where, ns in _namespaces(lib).items():
        obj = getattr(ns, name, None)
        if obj is not None and not isinstance(obj, (types.ModuleType, type(lib.float32))):
            return where
    return None


def _op_names(spec: OpSpec) -> List[str]:
    """The entry's public ops: ``spec.op``, else the longest run of words of its name (without
    ``nn_``) that ferrograd exports, as a name or as a dunder (``getitem`` -> ``__getitem__``)."""
    if spec.op:
        return spec.op.split()
    words = spec.name.removeprefix("nn_").split("_")
    prefix = ""
    if words[0] == "linalg":  # linalg_vector_norm_all -> linalg.vector_norm
        prefix, words = "linalg.", words[1:]
    for n in range(len(words), 0, -1):
        for i in range(len(words) - n + 1):
            cand = prefix + "_".join(words[i : i + n])
            for name in (cand, f"__{cand}__"):
                if _lookup(fg, name) is not None:
                    return [name]
    return []


def test_coverage_every_table_op_is_public_in_ferrograd_and_torch() -> None:
    by_op: Dict[str, List[str]] = {}
    unnamed = []
    for spec in SPECS:
        names = _op_names(spec)
        if not names:
            unnamed.append(spec.name)
        for name in names:
            by_op.setdefault(name, []).append(spec.name)
    assert not unnamed, f"entries naming no public op (give them op=...): {unnamed}"
    private = [n for n in by_op if n.startswith("_") and not n.startswith("__")]
    assert not private, f"private names in the tables: {private}"
    where = {name: _lookup(fg, name) for name in by_op}
    missing = sorted(n for n, w in where.items() if w is None)
    assert not missing, f"not public in ferrograd: {missing}"
    kinds = [w if w in ("", "Tensor", "nn.functional") else "dotted" for w in where.values()]
    counts = {k: kinds.count(k) for k in ("", "Tensor", "nn.functional", "dotted")}
    if torch is not None:
        parity = {n for s in SPECS if s.torch_parity for n in _op_names(s)}
        not_torch = sorted(n for n in parity if _lookup(torch, n) is None)
        assert not not_torch, f"not in torch: {not_torch}"
    print(
        f"\nop tables: {len(SPECS)} entries, {len(by_op)} public ops "
        f"(ferrograd.*: {counts['']}, Tensor-only: {counts['Tensor']}, "
        f"nn.functional-only: {counts['nn.functional']}, dotted: {counts['dotted']})"
    )
    for name in sorted(by_op):
        print(f"  {name:32} {len(by_op[name]):3}  {', '.join(by_op[name])[:80]}")


def test_every_registry_row_is_in_the_table() -> None:
    """Each row of the crate's op registry (src/ops/registry.rs) is exercised by an entry: its
    own, or one derived from the row (optables/unary.py)."""
    covered = {n for s in SPECS for n in _op_names(s)}
    missing = [r["name"] for r in fg._C._registry() if r["name"] not in covered]
    assert not missing, f"registry rows no table entry exercises: {missing}"
    for row in fg._C._registry():
        assert getattr(fg, row["name"]) is getattr(fg._C, row["name"])
        assert getattr(fg.Tensor, row["name"]).__doc__ == row["doc"]
