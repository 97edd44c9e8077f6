"""The math ops: elementwise unary and binary functions, rounding division, logical and
bitwise operators, reductions, scans, norms and softmax."""

from __future__ import annotations

import math

from .spec import Arg, OpSpec

A = Arg((2, 3))
B3 = Arg((3,))
POS = Arg((2, 3), low=0.2, high=2.0)
UNIT = Arg((2, 3), low=-0.9, high=0.9)
NEG = Arg((2, 3), low=-2.0, high=-0.3)
DIVISOR = Arg((3,), low=0.5, high=2.0)
NEG_DIVISOR = Arg((3,), low=-2.0, high=-0.5)
A3 = Arg((2, 3, 4))
INT = Arg((2, 3), kind="int", int_high=7)
INT3 = Arg((3,), kind="int", int_high=4)
BOOL = Arg((2, 3), kind="bool")
BOOL3 = Arg((3,), kind="bool")
INF = math.inf

# Standard extra shapes for elementwise unary ops: a 0-d tensor, a size-0 dim, size-1 dims, 3-D.
UNARY_SETS = [[Arg(())], [Arg((0, 3))], [Arg((1, 1, 3))], [A3]]


def _unary_sets(low: float, high: float) -> list:
    return [[Arg(s.shape, low=low, high=high)] for (s,) in UNARY_SETS]


def _mask(L, x, values):  # type: ignore[no-untyped-def]
    """A constant tensor like ``x``'s dtype (to plant zeros or ties)."""
    return L.tensor(values, dtype=x.dtype)


STEP_NOTE = "a step function: zero gradient everywhere (torch's choice too)"
KINK_NOTE = "piecewise linear: the second derivative is 0 a.e.; FD across kinks is unstable"
BOOL_NOTE = "bool/int output: compared by value only"

OPS = [
    # ----- elementwise unary --------------------------------------------------------------------
    OpSpec("exp2", lambda L, x: L.exp2(x), [A], shape_sets=UNARY_SETS),
    OpSpec("exp2_method", lambda L, x: x.exp2(), [A]),
    OpSpec("log2", lambda L, x: L.log2(x), [POS], shape_sets=_unary_sets(0.2, 2.0)),
    OpSpec("log10", lambda L, x: x.log10(), [POS], shape_sets=_unary_sets(0.2, 2.0)),
    OpSpec(
        "log1p", lambda L, x: L.log1p(x), [Arg((2, 3), low=-0.5)], shape_sets=_unary_sets(-0.5, 2)
    ),
    OpSpec("expm1", lambda L, x: x.expm1(), [A], shape_sets=UNARY_SETS),
    OpSpec("rsqrt", lambda L, x: L.rsqrt(x), [POS], shape_sets=_unary_sets(0.2, 2.0)),
    OpSpec("square", lambda L, x: L.square(x), [A], shape_sets=UNARY_SETS),
    OpSpec("square_method", lambda L, x: x.square(), [A]),
    OpSpec(
        "reciprocal",
        lambda L, x: L.reciprocal(x),
        [POS],
        shape_sets=[[NEG], *_unary_sets(0.3, 2.0)],
    ),
    OpSpec("tan", lambda L, x: L.tan(x), [Arg((2, 3), low=-1.2, high=1.2)]),
    OpSpec("asin", lambda L, x: L.asin(x), [UNIT], shape_sets=_unary_sets(-0.9, 0.9)),
    OpSpec("acos", lambda L, x: x.acos(), [UNIT], shape_sets=_unary_sets(-0.9, 0.9)),
    OpSpec("atan", lambda L, x: L.atan(x), [A], shape_sets=UNARY_SETS),
    OpSpec("sinh", lambda L, x: L.sinh(x), [A], shape_sets=UNARY_SETS),
    OpSpec("cosh", lambda L, x: x.cosh(), [A], shape_sets=UNARY_SETS),
    OpSpec("asinh", lambda L, x: L.asinh(x), [A], shape_sets=UNARY_SETS),
    OpSpec("acosh", lambda L, x: L.acosh(x), [Arg((2, 3), low=1.2, high=3.0)]),
    OpSpec("atanh", lambda L, x: x.atanh(), [UNIT], shape_sets=_unary_sets(-0.9, 0.9)),
    OpSpec("erf", lambda L, x: L.erf(x), [A], shape_sets=UNARY_SETS),
    OpSpec("erfc", lambda L, x: x.erfc(), [A], shape_sets=UNARY_SETS),
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
    # ----- elementwise binary -------------------------------------------------------------------
    OpSpec(
        "maximum",
        lambda L, x, y: L.maximum(x, y),
        [A, B3],
        shape_sets=[[Arg((2, 1, 3)), Arg((4, 1))], [Arg(()), A], [Arg((0, 3)), B3]],
        note=KINK_NOTE,
    ),
    OpSpec("minimum", lambda L, x, y: x.minimum(y), [A, B3], note=KINK_NOTE),
    OpSpec("maximum_tie", lambda L, x: L.maximum(x, x) * 1.0, [A]),
    OpSpec("max_binary", lambda L, x, y: L.max(x, y), [A, B3], note=KINK_NOTE),
    OpSpec("min_binary", lambda L, x, y: x.min(y), [A, B3], note=KINK_NOTE),
    OpSpec(
        "fmod",
        lambda L, x, y: L.fmod(x, y),
        [A, DIVISOR],
        shape_sets=[[A, NEG_DIVISOR], [Arg((2, 1, 3)), Arg((4, 1), low=0.5)]],
    ),
    OpSpec("fmod_scalar", lambda L, x: x.fmod(0.7), [A]),
    OpSpec(
        "remainder",
        lambda L, x, y: L.remainder(x, y),
        [A, DIVISOR],
        shape_sets=[[A, NEG_DIVISOR], [Arg(()), Arg((2, 3), low=0.5)]],
    ),
    OpSpec("mod_operator", lambda L, x, y: x % y, [A, NEG_DIVISOR]),
    OpSpec(
        "rmod_operator",
        lambda L, x: 2.5 % x,
        [POS],
        torch_fn=lambda L, x: L.remainder(L.full_like(x, 2.5), x),
        note="torch has no derivative for remainder(Scalar, Tensor); ferrograd gives -floor(a/b)",
    ),
    OpSpec("remainder_int", lambda L, a, b: L.remainder(a - 3, b + 1), [INT, INT3]),
    OpSpec("fmod_int", lambda L, a, b: L.fmod(a - 3, -(b + 1)), [INT, INT3]),
    OpSpec(
        "atan2",
        lambda L, x, y: L.atan2(x, y),
        [A, B3],
        shape_sets=[[Arg(()), A], [Arg((2, 1, 3)), Arg((4, 1))]],
    ),
    OpSpec("atan2_method", lambda L, x, y: x.atan2(y), [A, A]),
    OpSpec(
        "div_floor",
        lambda L, x, y: L.div(x, y, rounding_mode="floor"),
        [A, Arg((3,), low=0.2, high=0.7)],
        shape_sets=[[A, Arg((3,), low=-0.7, high=-0.2)]],
        note=STEP_NOTE,
    ),
    OpSpec(
        "div_trunc",
        lambda L, x, y: x.div(y, rounding_mode="trunc"),
        [A, Arg((3,), low=-0.7, high=-0.2)],
        note=STEP_NOTE,
    ),
    OpSpec("div_none", lambda L, x, y: L.div(x, y, rounding_mode=None), [A, DIVISOR]),
    OpSpec("divide_floor", lambda L, x, y: L.divide(x, y, rounding_mode="floor"), [A, DIVISOR]),
    OpSpec(
        "floordiv_operator",
        lambda L, x, y: x // y,
        [A, DIVISOR],
        torch_fn=lambda L, x, y: L.div(x, y, rounding_mode="floor"),
        note="torch's floor_divide has no derivative (backward raises); ferrograd's is zero",
    ),
    OpSpec(
        "rfloordiv_operator",
        lambda L, x: 3.0 // x,
        [POS],
        torch_fn=lambda L, x: L.div(L.full_like(x, 3.0), x, rounding_mode="floor"),
        note="torch's floor_divide has no derivative (backward raises); ferrograd's is zero",
    ),
    OpSpec(
        "div_floor_int",
        lambda L, a, b: L.div(a - 3, b + 1, rounding_mode="floor"),
        [INT, INT3],
    ),
    OpSpec("div_trunc_int", lambda L, a, b: (a - 3).div(b + 1, rounding_mode="trunc"), [INT, INT3]),
    OpSpec("floordiv_int_scalar", lambda L, a: (a - 3) // 2, [INT]),
    OpSpec(
        "comparisons",
        lambda L, x, y: (
            L.eq(x, y),
            L.ne(x, y),
            L.lt(x, y),
            L.le(x, 0.5),
            L.gt(x, y),
            L.ge(x, y),
            x == y,
            x != 0.0,
            x < y,
            x <= y,
            x > y,
            x >= y,
        ),
        [A, B3],
        note=BOOL_NOTE,
    ),
    OpSpec(
        "logical",
        lambda L, x, y: (
            L.logical_and(x > 0, y),
            L.logical_or(x > 1, y < 0),
            L.logical_xor(x > 0, y > 0),
            L.logical_not(x > 0),
            (x > 0).logical_and(y > 0),
        ),
        [A, B3],
        note=BOOL_NOTE,
    ),
    OpSpec(
        "bool_operators",
        lambda L, a, b: (a & b, a | b, a ^ b, ~a, a & True, False | b),
        [BOOL, BOOL3],
        note=BOOL_NOTE,
    ),
    OpSpec(
        "int_bitwise",
        lambda L, a, b: (a & b, a | b, a ^ b, ~a, L.bitwise_and(a, b)),
        [INT, INT3],
        note=BOOL_NOTE,
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
    ),
    OpSpec("isfinite_int", lambda L, a: (L.isfinite(a), L.isnan(a), L.isinf(a)), [INT]),
    # ----- reductions ---------------------------------------------------------------------------
    OpSpec("prod", lambda L, x: x.prod(), [A], shape_sets=[[Arg(())], [Arg((0, 3))], [A3]]),
    OpSpec(
        "prod_dim",
        lambda L, x: L.prod(x, 1),
        [A],
        shape_sets=[[A3], [Arg((0, 3))], [Arg((2, 0))]],
    ),
    OpSpec("prod_neg_dim_keepdim", lambda L, x: x.prod(-1, keepdim=True), [A3]),
    OpSpec("prod_zero_dim_0d", lambda L, x: x.prod(0), [Arg(())]),
    OpSpec(
        "prod_one_zero",
        lambda L, x: (x * _mask(L, x, [[1.0, 0.0, 1.0], [1.0, 1.0, 1.0]])).prod(1),
        [A],
    ),
    OpSpec(
        "prod_two_zeros",
        lambda L, x: (x * _mask(L, x, [[0.0, 0.0, 1.0], [1.0, 0.0, 1.0]])).prod(),
        [A],
    ),
    OpSpec(
        "prod_tuple_dims",
        lambda L, x: x.prod((0, 2)),
        [A3],
        torch_fn=lambda L, x: x.prod(2).prod(0),
        note="torch's prod takes one dim; ferrograd also accepts a tuple",
    ),
    OpSpec("prod_int", lambda L, a: (a.prod(), L.prod(a, 0)), [INT]),
    OpSpec(
        "amax",
        lambda L, x: L.amax(x, -1),
        [A],
        shape_sets=[[A3], [Arg(())]],
        note=KINK_NOTE,
    ),
    OpSpec("amax_tuple_keepdim", lambda L, x: x.amax((0, -1), keepdim=True), [A3], note=KINK_NOTE),
    OpSpec("amax_all", lambda L, x: x.amax(), [A], note=KINK_NOTE),
    OpSpec("amax_ties", lambda L, x: x.unsqueeze(0).expand(3, 2, 3).amax(0), [A]),
    OpSpec("amin", lambda L, x: L.amin(x, (1,)), [A3], note=KINK_NOTE),
    OpSpec("amin_ties", lambda L, x: x.expand(4, 3).amin(0), [B3]),
    OpSpec("max_all", lambda L, x: x.max(), [A], shape_sets=[[Arg(())], [A3]], note=KINK_NOTE),
    OpSpec("max_all_ties", lambda L, x: L.max(x.expand(2, 3)), [B3]),
    OpSpec("min_all", lambda L, x: L.min(x), [A], note=KINK_NOTE),
    OpSpec(
        "max_dim",
        lambda L, x: tuple(x.max(1)),
        [A],
        shape_sets=[[A3], [Arg((3, 1))], [Arg((0, 2))]],
        note=KINK_NOTE,
    ),
    OpSpec(
        "max_dim_keepdim_fields",
        lambda L, x: (L.max(x, dim=-1, keepdim=True).values, L.max(x, -1, True).indices),
        [A3],
        note=KINK_NOTE,
    ),
    OpSpec("max_dim_0d", lambda L, x: tuple(x.max(0)), [Arg(())]),
    OpSpec(
        "min_dim",
        lambda L, x: tuple(L.min(x, 0)),
        [A],
        note=KINK_NOTE,
    ),
    OpSpec(
        "argmax_argmin",
        lambda L, x: (
            x.argmax(),
            x.argmin(),
            L.argmax(x, 1),
            L.argmin(x, dim=-1, keepdim=True),
            x.argmax(0, True),
        ),
        [A3],
        note=BOOL_NOTE,
    ),
    OpSpec("argmax_int", lambda L, a: (a.argmax(), a.argmin(1)), [INT]),
    OpSpec(
        "var",
        lambda L, x: x.var(),
        [A],
        shape_sets=[[A3], [Arg((1, 4))]],
    ),
    OpSpec("var_dim", lambda L, x: L.var(x, 1), [A3]),
    OpSpec("var_unbiased_false", lambda L, x: x.var(1, unbiased=False), [A3]),
    OpSpec("var_positional_unbiased", lambda L, x: x.var(0, False, True), [A]),
    OpSpec("var_bool_only", lambda L, x: x.var(False), [A]),
    OpSpec("var_correction", lambda L, x: x.var(dim=(0, 2), correction=2, keepdim=True), [A3]),
    OpSpec("std", lambda L, x: x.std(), [A], shape_sets=[[A3]]),
    OpSpec("std_dim", lambda L, x: L.std(x, dim=-1, keepdim=True), [A3]),
    OpSpec("std_correction0", lambda L, x: L.std(x, (0, 1), correction=0), [A3]),
    OpSpec("norm", lambda L, x: x.norm(), [A], shape_sets=[[A3], [Arg(())], [Arg((0, 3))]]),
    OpSpec("norm_fro_fn", lambda L, x: L.norm(x, p="fro"), [A]),
    OpSpec("norm_p1_dim", lambda L, x: x.norm(p=1, dim=1), [A], note=KINK_NOTE),
    OpSpec("norm_inf", lambda L, x: x.norm(p=INF, dim=0), [A], note=KINK_NOTE),
    OpSpec("norm_p3", lambda L, x: L.norm(x, 3, dim=(0, 1), keepdim=True), [A3]),
    OpSpec("norm_p1_5", lambda L, x: x.norm(1.5, -1), [A]),
    OpSpec(
        "norm_zero_subgradient",
        lambda L, x: (x * _mask(L, x, [[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]])).norm(dim=1),
        [A],
    ),
    OpSpec(
        "norm_zero_subgradient_p3",
        lambda L, x: (x * _mask(L, x, [[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]])).norm(p=3, dim=1),
        [A],
    ),
    OpSpec("linalg_norm", lambda L, x: L.linalg.norm(x), [A], shape_sets=[[A3], [B3]]),
    OpSpec("linalg_norm_vector_dim", lambda L, x: L.linalg.norm(x, ord=3, dim=1), [A]),
    OpSpec("linalg_norm_matrix_1", lambda L, x: L.linalg.norm(x, ord=1), [A], note=KINK_NOTE),
    OpSpec("linalg_norm_matrix_inf", lambda L, x: L.linalg.norm(x, ord=-INF), [A], note=KINK_NOTE),
    OpSpec("linalg_norm_fro_dims", lambda L, x: L.linalg.norm(x, "fro", dim=(0, 2)), [A3]),
    OpSpec("linalg_matrix_norm", lambda L, x: L.linalg.matrix_norm(x, keepdim=True), [A3]),
    OpSpec(
        "linalg_vector_norm",
        lambda L, x: L.linalg.vector_norm(x, ord=3.5, dim=-1, keepdim=True),
        [A3],
    ),
    OpSpec("linalg_vector_norm_all", lambda L, x: L.linalg.vector_norm(x), [A3]),
    OpSpec(
        "linalg_vector_norm_0",
        lambda L, x: L.linalg.vector_norm(x, ord=0, dim=0) + x.sum(0),
        [A],
    ),
    OpSpec(
        "logsumexp",
        lambda L, x: L.logsumexp(x, -1),
        [A],
        shape_sets=[[A3], [Arg(())], [Arg((2, 0))]],
    ),
    OpSpec("logsumexp_tuple_keepdim", lambda L, x: x.logsumexp((0, 2), keepdim=True), [A3]),
    OpSpec("logsumexp_large", lambda L, x: L.logsumexp(x + 1000.0, dim=-1), [A]),
    OpSpec(
        "softmax",
        lambda L, x: L.softmax(x, -1),
        [A],
        shape_sets=[[A3], [Arg(())], [Arg((0, 3))], [Arg((2, 1))]],
    ),
    OpSpec("softmax_method", lambda L, x: x.softmax(dim=0), [A3]),
    OpSpec("softmax_large", lambda L, x: (x * 400.0).softmax(-1), [A]),
    OpSpec(
        "log_softmax",
        lambda L, x: L.log_softmax(x, -1),
        [A],
        shape_sets=[[A3], [Arg(())], [Arg((2, 1))]],
    ),
    OpSpec("log_softmax_method", lambda L, x: x.log_softmax(0), [A3]),
    OpSpec("log_softmax_large", lambda L, x: (x * 400.0).log_softmax(1), [A]),
    OpSpec("logsumexp_int_promotes", lambda L, a: L.logsumexp(a, 0), [INT]),
    OpSpec(
        "cumsum",
        lambda L, x: L.cumsum(x, -1),
        [A],
        shape_sets=[[A3], [Arg(())], [Arg((0, 3))]],
    ),
    OpSpec("cumsum_neg_dim", lambda L, x: x.cumsum(-3), [A3]),
    OpSpec("cumsum_int", lambda L, a: (a.cumsum(0), L.cumsum(a > 2, 1)), [INT]),
    OpSpec(
        "cumprod",
        lambda L, x: L.cumprod(x, -1),
        [A],
        shape_sets=[[A3], [Arg(())], [Arg((0, 3))]],
    ),
    OpSpec("cumprod_dim0", lambda L, x: x.cumprod(0), [A3]),
    OpSpec(
        "cumprod_zeros",
        lambda L, x: (x * _mask(L, x, [[1.0, 0.0, 1.0, 1.0], [0.0, 1.0, 0.0, 1.0]])).cumprod(1),
        [Arg((2, 4))],
    ),
    OpSpec("cumprod_int", lambda L, a: a.cumprod(1), [INT]),
    OpSpec(
        "all_any",
        lambda L, x: (
            (x > -1).all(),
            x.any(),
            L.all(x > 0, 1),
            L.any(x > 1, dim=(0, 2)),
            (x > 0).all(dim=-1, keepdim=True),
            L.any(x, 0),
        ),
        [A3],
        note=BOOL_NOTE,
    ),
    OpSpec("all_any_empty", lambda L, x: (x.all(), x.any(), x.all(0)), [Arg((0, 3))]),
]
