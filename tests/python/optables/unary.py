"""Elementwise unary ops (``src/ops/unary.rs``): exp/log/trig/hyperbolic/erf, rounding,
clamp, nan_to_num, the is* predicates and integer/bool promotion. Entries with ``reference``
and ``derivative`` are also checked against NumPy and the closed-form derivative."""

from __future__ import annotations

import math

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
    ),
    OpSpec(
        "exp",
        lambda L, x: L.exp(x),
        [A],
        reference=np.exp,
        derivative=np.exp,
        forms=("method",),
        derivative2=np.exp,
    ),
    OpSpec(
        "log",
        lambda L, x: L.log(x),
        [POS],
        reference=np.log,
        derivative=lambda a: 1.0 / a,
        forms=("method",),
        derivative2=lambda a: -1.0 / a**2,
    ),
    OpSpec(
        "sin",
        lambda L, x: L.sin(x),
        [A],
        reference=np.sin,
        derivative=np.cos,
        forms=("method",),
        derivative2=lambda a: -np.sin(a),
    ),
    OpSpec(
        "cos",
        lambda L, x: L.cos(x),
        [A],
        reference=np.cos,
        derivative=lambda a: -np.sin(a),
        forms=("method",),
        derivative2=lambda a: -np.cos(a),
    ),
    OpSpec(
        "tanh",
        lambda L, x: L.tanh(x),
        [A],
        reference=np.tanh,
        derivative=lambda a: 1.0 - np.tanh(a) ** 2,
        forms=("method",),
        derivative2=lambda a: -2.0 * np.tanh(a) * (1.0 - np.tanh(a) ** 2),
    ),
    OpSpec(
        "sigmoid",
        lambda L, x: L.sigmoid(x),
        [A],
        reference=_sigmoid,
        derivative=lambda a: _sigmoid(a) * (1.0 - _sigmoid(a)),
        forms=("method",),
        derivative2=lambda a: _sigmoid(a) * (1.0 - _sigmoid(a)) * (1.0 - 2.0 * _sigmoid(a)),
    ),
    OpSpec(
        "relu",
        lambda L, x: L.relu(x),
        [A],
        gradgrad=False,
        note="relu'' is 0 a.e.; FD across the kink is unstable",
        reference=lambda a: np.maximum(a, 0.0),
        derivative=lambda a: (a > 0).astype(a.dtype),
        forms=("method",),
    ),
    OpSpec(
        "sqrt",
        lambda L, x: L.sqrt(x),
        [POS],
        reference=np.sqrt,
        derivative=lambda a: 0.5 / np.sqrt(a),
        forms=("method",),
    ),
    OpSpec(
        "abs",
        lambda L, x: L.abs(x),
        [A],
        gradgrad=False,
        note="|x|'' is 0 a.e.",
        reference=np.abs,
        derivative=np.sign,
        forms=("method",),
    ),
    OpSpec(
        "sign",
        lambda L, x: L.sign(x) * x,
        [A],
        gradgrad=False,
        note="sign'' is 0 a.e.",
        reference=lambda a: np.sign(a) * a,
        derivative=np.sign,
    ),
    OpSpec(
        "exp2",
        lambda L, x: L.exp2(x),
        [A],
        shape_sets=UNARY_SETS,
        reference=np.exp2,
        derivative=lambda a: np.exp2(a) * np.log(2.0),
        forms=("method",),
    ),
    OpSpec("exp2_method", lambda L, x: x.exp2(), [A]),
    OpSpec(
        "log2",
        lambda L, x: L.log2(x),
        [POS],
        shape_sets=_unary_sets(0.2, 2.0),
        reference=np.log2,
        derivative=lambda a: 1.0 / (a * np.log(2.0)),
        forms=("method",),
    ),
    OpSpec(
        "log10",
        lambda L, x: x.log10(),
        [POS],
        shape_sets=_unary_sets(0.2, 2.0),
        reference=np.log10,
        derivative=lambda a: 1.0 / (a * np.log(10.0)),
        forms=("function",),
    ),
    OpSpec(
        "log1p",
        lambda L, x: L.log1p(x),
        [Arg((2, 3), low=-0.5)],
        shape_sets=_unary_sets(-0.5, 2),
        reference=np.log1p,
        derivative=lambda a: 1.0 / (1.0 + a),
        forms=("method",),
    ),
    OpSpec(
        "expm1",
        lambda L, x: x.expm1(),
        [A],
        shape_sets=UNARY_SETS,
        reference=np.expm1,
        derivative=np.exp,
        forms=("function",),
    ),
    OpSpec(
        "rsqrt",
        lambda L, x: L.rsqrt(x),
        [POS],
        shape_sets=_unary_sets(0.2, 2.0),
        reference=lambda a: 1.0 / np.sqrt(a),
        derivative=lambda a: -0.5 * a**-1.5,
        forms=("method",),
    ),
    OpSpec(
        "square",
        lambda L, x: L.square(x),
        [A],
        shape_sets=UNARY_SETS,
        reference=np.square,
        derivative=lambda a: 2.0 * a,
        forms=("method",),
    ),
    OpSpec("square_method", lambda L, x: x.square(), [A]),
    OpSpec(
        "reciprocal",
        lambda L, x: L.reciprocal(x),
        [POS],
        shape_sets=[[NEG], *_unary_sets(0.3, 2.0)],
        reference=np.reciprocal,
        derivative=lambda a: -1.0 / a**2,
        derivative2=lambda a: 2.0 / a**3,
        forms=("method",),
    ),
    OpSpec(
        "tan",
        lambda L, x: L.tan(x),
        [Arg((2, 3), low=-1.2, high=1.2)],
        reference=np.tan,
        derivative=lambda a: 1.0 / np.cos(a) ** 2,
        forms=("method",),
    ),
    OpSpec(
        "asin",
        lambda L, x: L.asin(x),
        [UNIT],
        shape_sets=_unary_sets(-0.9, 0.9),
        reference=np.arcsin,
        derivative=lambda a: 1.0 / np.sqrt(1.0 - a**2),
        forms=("method",),
    ),
    OpSpec(
        "acos",
        lambda L, x: x.acos(),
        [UNIT],
        shape_sets=_unary_sets(-0.9, 0.9),
        reference=np.arccos,
        derivative=lambda a: -1.0 / np.sqrt(1.0 - a**2),
        forms=("function",),
    ),
    OpSpec(
        "atan",
        lambda L, x: L.atan(x),
        [A],
        shape_sets=UNARY_SETS,
        reference=np.arctan,
        derivative=lambda a: 1.0 / (1.0 + a**2),
        forms=("method",),
    ),
    OpSpec(
        "sinh",
        lambda L, x: L.sinh(x),
        [A],
        shape_sets=UNARY_SETS,
        reference=np.sinh,
        derivative=np.cosh,
        forms=("method",),
    ),
    OpSpec(
        "cosh",
        lambda L, x: x.cosh(),
        [A],
        shape_sets=UNARY_SETS,
        reference=np.cosh,
        derivative=np.sinh,
        forms=("function",),
    ),
    OpSpec(
        "asinh",
        lambda L, x: L.asinh(x),
        [A],
        shape_sets=UNARY_SETS,
        reference=np.arcsinh,
        derivative=lambda a: 1.0 / np.sqrt(a**2 + 1.0),
        forms=("method",),
    ),
    OpSpec(
        "acosh",
        lambda L, x: L.acosh(x),
        [Arg((2, 3), low=1.2, high=3.0)],
        reference=np.arccosh,
        derivative=lambda a: 1.0 / np.sqrt(a**2 - 1.0),
        forms=("method",),
    ),
    OpSpec(
        "atanh",
        lambda L, x: x.atanh(),
        [UNIT],
        shape_sets=_unary_sets(-0.9, 0.9),
        reference=np.arctanh,
        derivative=lambda a: 1.0 / (1.0 - a**2),
        forms=("function",),
    ),
    OpSpec(
        "erf",
        lambda L, x: L.erf(x),
        [A],
        shape_sets=UNARY_SETS,
        reference=_erf,
        derivative=lambda a: 2.0 / np.sqrt(np.pi) * np.exp(-(a**2)),
        forms=("method",),
    ),
    OpSpec(
        "erfc",
        lambda L, x: x.erfc(),
        [A],
        shape_sets=UNARY_SETS,
        reference=lambda a: 1.0 - _erf(a),
        derivative=lambda a: -2.0 / np.sqrt(np.pi) * np.exp(-(a**2)),
        forms=("function",),
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
