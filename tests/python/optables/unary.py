"""Elementwise unary ops (``src/ops/unary.rs``): exp/log/trig/hyperbolic/erf, rounding,
clamp, nan_to_num, the is* predicates and integer/bool promotion. Entries with ``reference``
and ``derivative`` are also checked against NumPy and the closed-form derivative."""

from __future__ import annotations

import math
from typing import Any, Callable, List, Sequence

import ferrograd
import numpy as np

from ._shared import A3, B3, BOOL, BOOL_NOTE, INF, INT, KINK_NOTE, POS, STEP_NOTE, A, _mask
from .spec import Arg, OpSpec

UNIT = Arg((2, 3), low=-0.9, high=0.9)
NEG = Arg((2, 3), low=-2.0, high=-0.3)
# Standard extra shapes for elementwise unary ops: a 0-d tensor, a size-0 dim, size-1 dims, 3-D.
UNARY_SETS = [[Arg(())], [Arg((0, 3))], [Arg((1, 1, 3))], [A3]]


def _unary_sets(low: float, high: float) -> list:
    return [[Arg(s.shape, low=low, high=high)] for (s,) in UNARY_SETS]


def _sigmoid(a):  # type: ignore[no-untyped-def]
    return 1.0 / (1.0 + np.exp(-a))


_erf = np.vectorize(math.erf, otypes=[float])


def _elementwise(
    name: str,
    arg: Arg,
    reference: Callable[..., Any],
    derivative: Callable[..., Any],
    method: bool = False,
    shape_sets: Sequence[List[Arg]] = (),
    **kw: Any,
) -> OpSpec:
    """``L.<name>(x)`` (``x.<name>()`` with ``method``), checked against the NumPy
    ``reference`` and the closed-form ``derivative`` in the other spelling too."""

    def fn(L: Any, x: Any) -> Any:
        return getattr(x, name)() if method else getattr(L, name)(x)

    forms = ("function",) if method else ("method",)
    return OpSpec(
        name,
        fn,
        [arg],
        list(shape_sets),
        reference=reference,
        derivative=derivative,
        forms=forms,
        **kw,
    )


OPS = [
    # ----- elementwise unary --------------------------------------------------------------------
    OpSpec(
        "neg",
        lambda L, x: -x,
        [A],
        op="__neg__ neg",
        reference=np.negative,
        derivative=lambda a: -np.ones_like(a),
        forms=("function", "method"),
        torch_grad_fn=True,
    ),
    _elementwise("exp", A, np.exp, np.exp, derivative2=np.exp, torch_grad_fn=True),
    _elementwise(
        "log", POS, np.log, lambda a: 1.0 / a, derivative2=lambda a: -1.0 / a**2, torch_grad_fn=True
    ),
    _elementwise("sin", A, np.sin, np.cos, derivative2=lambda a: -np.sin(a), torch_grad_fn=True),
    _elementwise(
        "cos", A, np.cos, lambda a: -np.sin(a), derivative2=lambda a: -np.cos(a), torch_grad_fn=True
    ),
    _elementwise(
        "tanh",
        A,
        np.tanh,
        lambda a: 1.0 - np.tanh(a) ** 2,
        derivative2=lambda a: -2.0 * np.tanh(a) * (1.0 - np.tanh(a) ** 2),
        torch_grad_fn=True,
    ),
    _elementwise(
        "sigmoid",
        A,
        _sigmoid,
        lambda a: _sigmoid(a) * (1.0 - _sigmoid(a)),
        derivative2=lambda a: _sigmoid(a) * (1.0 - _sigmoid(a)) * (1.0 - 2.0 * _sigmoid(a)),
        torch_grad_fn=True,
    ),
    _elementwise(
        "relu",
        A,
        lambda a: np.maximum(a, 0.0),
        lambda a: (a > 0).astype(a.dtype),
        gradgrad=False,
        note="relu'' is 0 a.e.; FD across the kink is unstable",
        torch_grad_fn=True,
    ),
    _elementwise("sqrt", POS, np.sqrt, lambda a: 0.5 / np.sqrt(a)),
    _elementwise("abs", A, np.abs, np.sign, gradgrad=False, note="|x|'' is 0 a.e."),
    OpSpec(
        "sign",
        lambda L, x: L.sign(x) * x,
        [A],
        gradgrad=False,
        note="sign'' is 0 a.e.",
        reference=lambda a: np.sign(a) * a,
        derivative=np.sign,
    ),
    _elementwise("exp2", A, np.exp2, lambda a: np.exp2(a) * np.log(2.0), shape_sets=UNARY_SETS),
    OpSpec("exp2_method", lambda L, x: x.exp2(), [A]),
    _elementwise(
        "log2", POS, np.log2, lambda a: 1.0 / (a * np.log(2.0)), shape_sets=_unary_sets(0.2, 2.0)
    ),
    _elementwise(
        "log10",
        POS,
        np.log10,
        lambda a: 1.0 / (a * np.log(10.0)),
        method=True,
        shape_sets=_unary_sets(0.2, 2.0),
    ),
    _elementwise(
        "log1p",
        Arg((2, 3), low=-0.5),
        np.log1p,
        lambda a: 1.0 / (1.0 + a),
        shape_sets=_unary_sets(-0.5, 2),
    ),
    _elementwise("expm1", A, np.expm1, np.exp, method=True, shape_sets=UNARY_SETS),
    _elementwise(
        "rsqrt",
        POS,
        lambda a: 1.0 / np.sqrt(a),
        lambda a: -0.5 * a**-1.5,
        shape_sets=_unary_sets(0.2, 2.0),
    ),
    _elementwise("square", A, np.square, lambda a: 2.0 * a, shape_sets=UNARY_SETS),
    OpSpec("square_method", lambda L, x: x.square(), [A]),
    _elementwise(
        "reciprocal",
        POS,
        np.reciprocal,
        lambda a: -1.0 / a**2,
        shape_sets=[[NEG], *_unary_sets(0.3, 2.0)],
        derivative2=lambda a: 2.0 / a**3,
    ),
    _elementwise("tan", Arg((2, 3), low=-1.2, high=1.2), np.tan, lambda a: 1.0 / np.cos(a) ** 2),
    _elementwise(
        "asin",
        UNIT,
        np.arcsin,
        lambda a: 1.0 / np.sqrt(1.0 - a**2),
        shape_sets=_unary_sets(-0.9, 0.9),
    ),
    _elementwise(
        "acos",
        UNIT,
        np.arccos,
        lambda a: -1.0 / np.sqrt(1.0 - a**2),
        method=True,
        shape_sets=_unary_sets(-0.9, 0.9),
    ),
    _elementwise("atan", A, np.arctan, lambda a: 1.0 / (1.0 + a**2), shape_sets=UNARY_SETS),
    _elementwise("sinh", A, np.sinh, np.cosh, shape_sets=UNARY_SETS),
    _elementwise("cosh", A, np.cosh, np.sinh, method=True, shape_sets=UNARY_SETS),
    _elementwise(
        "asinh", A, np.arcsinh, lambda a: 1.0 / np.sqrt(a**2 + 1.0), shape_sets=UNARY_SETS
    ),
    _elementwise(
        "acosh", Arg((2, 3), low=1.2, high=3.0), np.arccosh, lambda a: 1.0 / np.sqrt(a**2 - 1.0)
    ),
    _elementwise(
        "atanh",
        UNIT,
        np.arctanh,
        lambda a: 1.0 / (1.0 - a**2),
        method=True,
        shape_sets=_unary_sets(-0.9, 0.9),
    ),
    _elementwise(
        "erf", A, _erf, lambda a: 2.0 / np.sqrt(np.pi) * np.exp(-(a**2)), shape_sets=UNARY_SETS
    ),
    _elementwise(
        "erfc",
        A,
        lambda a: 1.0 - _erf(a),
        lambda a: -2.0 / np.sqrt(np.pi) * np.exp(-(a**2)),
        method=True,
        shape_sets=UNARY_SETS,
    ),
    OpSpec("floor", lambda L, x: L.floor(x * 3.0), [A], shape_sets=UNARY_SETS, note=STEP_NOTE),
    OpSpec("ceil", lambda L, x: (x * 3.0).ceil(), [A], shape_sets=UNARY_SETS, note=STEP_NOTE),
    OpSpec("round", lambda L, x: L.round(x * 3.0), [A], shape_sets=UNARY_SETS, note=STEP_NOTE),
    OpSpec("round_decimals", lambda L, x: L.round(x, decimals=2), [A], note=STEP_NOTE),
    OpSpec("round_neg_decimals", lambda L, x: (x * 300.0).round(decimals=-1), [A]),
    OpSpec("trunc", lambda L, x: L.trunc(x * 3.0), [A], shape_sets=UNARY_SETS, note=STEP_NOTE),
    OpSpec("floor_int", lambda L, a: L.floor(a), [INT], note="integers stay integers"),
    OpSpec("exp2_int_promotes", lambda L, a: L.exp2(a), [INT]),
    OpSpec("erf_int_promotes", lambda L, a: L.erf(a), [INT]),
    OpSpec("log1p_bool_promotes", lambda L, a: L.log1p(a), [BOOL]),
    OpSpec("square_int", lambda L, a: L.square(a), [INT]),
    OpSpec(
        "clamp_scalars",
        lambda L, x: x.clamp(-0.5, 0.7),
        [A],
        shape_sets=[[Arg(())], [Arg((0, 2))], [A3]],
        note=KINK_NOTE,
    ),
    OpSpec("clamp_min_only", lambda L, x: L.clamp(x, min=-0.5), [A]),
    OpSpec("clamp_max_only", lambda L, x: L.clamp(x, max=0.5), [A]),
    OpSpec(
        "clamp_tensors",
        lambda L, x, lo, hi: L.clamp(x, lo, hi),
        [A, Arg((3,), low=-1.0, high=0.0), Arg((2, 1), low=0.0, high=1.0)],
        shape_sets=[[Arg(()), Arg((2, 3), low=-1.0, high=0.0), Arg((3,), low=0.0, high=1.0)]],
    ),
    OpSpec(
        "clamp_min_above_max",
        lambda L, x, lo, hi: L.clamp(x, min=lo, max=hi),
        [A, Arg((3,), low=0.5, high=1.0), Arg((3,), low=-1.0, high=0.0)],
    ),
    OpSpec("clamp_tensor_min_only", lambda L, x, lo: x.clamp(min=lo), [A, B3]),
    OpSpec("clip", lambda L, x: L.clip(x, -0.5, 0.5), [A]),
    OpSpec("clip_method", lambda L, x: x.clip(max=0.25), [A]),
    OpSpec("clamp_int_float_bound", lambda L, a: L.clamp(a, 0.5, 4.5), [INT]),
    OpSpec("nan_to_num", lambda L, x: L.nan_to_num(L.log(x), nan=0.5), [A]),
    OpSpec("nan_to_num_method", lambda L, x: x.nan_to_num(), [A]),
    OpSpec(
        "nan_to_num_inf",
        lambda L, x: (
            (x * 0.0 + _mask(L, x, [math.nan, INF, -INF])).nan_to_num(
                nan=1.0, posinf=2.0, neginf=-3.0
            )
            + x
        ),
        [B3],
    ),
    OpSpec(
        "isnan_isinf_isfinite",
        lambda L, x: (
            L.isnan(L.log(x)),
            L.isinf(L.log(x.abs()) * 0.0 + x / (x * 0.0 + _mask(L, x, [0.0, 1.0, 1.0]))),
            L.isfinite(L.log(x)),
            x.isnan(),
        ),
        [B3],
        note=BOOL_NOTE,
        op="isnan isinf isfinite",
    ),
    OpSpec(
        "isfinite_int",
        lambda L, a: (L.isfinite(a), L.isnan(a), L.isinf(a)),
        [INT],
        op="isfinite isnan isinf",
    ),
]


# ----- rows of the crate's op registry that no entry above exercises ---------------------------
# A new unary op in src/ops/registry.rs is tested from its row alone: forward against NumPy's
# function of the same name (when NumPy has one), gradcheck and gradgradcheck, float32 against
# float64, non-contiguous input, torch parity. An entry above, with closed-form derivatives,
# replaces the derived one.

_DOMAIN_ARGS = {
    "real": A,
    "nonzero": A,
    "positive": POS,
    "open_unit": UNIT,
    "above_one": Arg((2, 3), low=1.2, high=3.0),
    "integer": INT,
}


def _from_registry(row: dict) -> OpSpec:
    name = row["name"]
    smooth = row["grad"] == "smooth"
    return OpSpec(
        name,
        lambda L, x: getattr(L, name)(x),
        [_DOMAIN_ARGS[row["domain"]]],
        grad=row["grad"] != "none",
        gradgrad=smooth,
        reference=getattr(np, name, None) if row["domain"] != "integer" else None,
        forms=("method",),
        op=name,
    )


def _covered() -> set:
    names = set()
    for spec in OPS:
        names.update(spec.op.split() if spec.op else [spec.name])
    return names


REGISTRY_ROWS = [r for r in ferrograd._C._registry() if r["family"] == "unary"]
OPS += [_from_registry(r) for r in REGISTRY_ROWS if r["name"] not in _covered()]


# ----- the in-place form of every registry row (torch has none for the bool-valued tests) ----


def _inplace_from_registry(row: dict) -> OpSpec:
    name = row["name"]
    return OpSpec(
        name + "_",
        lambda L, x: getattr(x.clone(), name + "_")(),
        [_DOMAIN_ARGS[row["domain"]]],
        grad=row["grad"] != "none",
        gradgrad=row["grad"] == "smooth",
        reference=getattr(np, name, None) if row["domain"] != "integer" else None,
        # torch names the in-place inverse hyperbolic nodes AsinhBackward1 (and so on).
        torch_grad_fn=row["grad"] != "none" and name not in ("asinh", "acosh", "atanh"),
        op=name + "_",
    )


OPS += [
    _inplace_from_registry(r)
    for r in REGISTRY_ROWS
    if r["name"] not in ("isnan", "isinf", "isfinite")
]
