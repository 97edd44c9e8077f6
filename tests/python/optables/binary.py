"""Elementwise binary ops (``src/ops/binary.rs``): arithmetic with broadcasting and
scalars, pow, where, maximum/minimum, fmod/remainder, atan2, rounding division, comparisons,
logical and bitwise operators."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ._shared import B3, BOOL, BOOL_NOTE, INT, KINK_NOTE, POS, STEP_NOTE, A, _sum_to
from .spec import Arg, OpSpec

DIVISOR = Arg((3,), low=0.5, high=2.0)
NEG_DIVISOR = Arg((3,), low=-2.0, high=-0.5)
INT3 = Arg((3,), kind="int", int_high=4)
BOOL3 = Arg((3,), kind="bool")
NEGV = Arg((2, 3), low=-2.0, high=-0.2)


def _grads(da: Callable[..., Any], db: Callable[..., Any]) -> Callable[..., Any]:
    """The gradient of ``(a op b).sum()`` from the partial derivatives ``da``/``db`` (taken
    elementwise on the broadcast inputs), summed back to each input's shape."""

    def grad(a: np.ndarray, b: np.ndarray) -> tuple:
        x, y = np.broadcast_arrays(a, b)
        return _sum_to(da(x, y), np.shape(a)), _sum_to(db(x, y), np.shape(b))

    return grad


def _ones(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.ones_like(a)


def _scalar(
    name: str, op: str, fn: Callable[..., Any], d: Callable[..., Any], *args: Arg, **kw: Any
) -> OpSpec:
    """``x op 2.5`` (or reflected) with the scalar as a Python number."""
    return OpSpec(
        name, lambda L, x: fn(x), list(args) or [A], op=op, reference=fn, derivative=d, **kw
    )


OPS = [
    # ----- arithmetic: operators, functions and methods, broadcasting --------------------------
    OpSpec(
        "add",
        lambda L, x, y: x + y,
        [A, Arg((3,))],
        shape_sets=[
            [Arg((2, 1, 3)), Arg((4, 1))],
            [Arg(()), Arg((2, 3))],
            [Arg((0, 3)), Arg((3,))],
        ],
        op="__add__ add",
        reference=np.add,
        derivative=_grads(_ones, _ones),
        forms=("function", "method"),
        torch_grad_fn=True,
    ),
    OpSpec(
        "sub",
        lambda L, x, y: x - y,
        [A, Arg((3,))],
        shape_sets=[[Arg((1,)), Arg((2, 3))], [Arg((2, 1, 3)), Arg((4, 1))]],
        op="__sub__ sub",
        reference=np.subtract,
        derivative=_grads(_ones, lambda a, b: -np.ones_like(b)),
        forms=("function", "method"),
        torch_grad_fn=True,
    ),
    OpSpec(
        "mul",
        lambda L, x, y: x * y,
        [A, Arg((3,))],
        shape_sets=[[Arg((2, 1, 3)), Arg((4, 1))], [Arg(()), Arg(())], [A, Arg(())]],
        op="__mul__ mul",
        reference=np.multiply,
        derivative=_grads(lambda a, b: b, lambda a, b: a),
        forms=("function", "method"),
        torch_grad_fn=True,
    ),
    OpSpec(
        "div",
        lambda L, x, y: x / y,
        [A, Arg((3,), low=0.5, high=2.0)],
        shape_sets=[
            [A, NEGV],
            [Arg((2, 1, 3)), Arg((4, 1), low=0.5, high=2.0)],
            [Arg((3, 1)), Arg((1, 4), low=0.5, high=2.0)],
        ],
        op="__truediv__ div",
        reference=np.divide,
        derivative=_grads(lambda a, b: 1.0 / b, lambda a, b: -a / b**2),
        forms=("function", "method"),
        torch_grad_fn=True,
    ),
    OpSpec(
        "pow",
        lambda L, x, y: x**y,
        [POS, Arg((3,))],
        shape_sets=[[Arg((2, 1, 3), low=0.5, high=3.0), Arg((4, 1))]],
        op="__pow__ pow",
        reference=np.power,
        derivative=_grads(lambda a, b: b * a ** (b - 1), lambda a, b: a**b * np.log(a)),
        forms=("function", "method"),
        torch_grad_fn=True,
    ),
    OpSpec(
        "mul_self",
        lambda L, x: x * x,
        [A],
        op="__mul__",
        reference=np.square,
        derivative=lambda a: 2.0 * a,
        derivative2=lambda a: np.full_like(a, 2.0),
    ),
    # ----- a Python number on either side --------------------------------------------------------
    OpSpec(
        "pow_scalar",
        lambda L, x: x**3,
        [A],
        op="__pow__",
        reference=lambda a: a**3,
        derivative=lambda a: 3 * a**2,
        derivative2=lambda a: 6.0 * a,
        torch_grad_fn=True,
    ),
    OpSpec(
        "rpow_scalar",
        lambda L, x: 2.0**x,
        [A],
        reference=lambda a: 2.0**a,
        derivative=lambda a: 2.0**a * np.log(2.0),
    ),
    OpSpec(
        "scalar_ops",
        lambda L, x: (2.0 - x) * 3.0 / 1.5 + 1.0,
        [A],
        op="__rsub__ __mul__ __truediv__ __add__",
        reference=lambda a: (2.0 - a) * 3.0 / 1.5 + 1.0,
        derivative=lambda a: np.full_like(a, -2.0),
    ),
    _scalar("add_scalar", "__add__", lambda x: x + 2.5, np.ones_like),
    _scalar("radd_scalar", "__radd__", lambda x: 2.5 + x, np.ones_like),
    _scalar("add_int_scalar", "__add__", lambda x: x + 3, np.ones_like),
    _scalar("sub_scalar", "__sub__", lambda x: x - 2.5, np.ones_like),
    _scalar("rsub_scalar", "__rsub__", lambda x: 2.5 - x, lambda a: -np.ones_like(a)),
    _scalar(
        "mul_scalar",
        "__mul__",
        lambda x: x * 2.5,
        lambda a: np.full_like(a, 2.5),
        torch_grad_fn=True,
    ),
    _scalar("rmul_scalar", "__rmul__", lambda x: 2.5 * x, lambda a: np.full_like(a, 2.5)),
    _scalar(
        "div_scalar",
        "__truediv__",
        lambda x: x / 2.5,
        lambda a: np.full_like(a, 0.4),
        torch_grad_fn=True,
    ),
    _scalar(
        "rdiv_scalar",
        "__rtruediv__",
        lambda x: 2.5 / x,
        lambda a: -2.5 / a**2,
        POS,
        derivative2=lambda a: 5.0 / a**3,
    ),
    _scalar("rdiv_scalar_neg", "__rtruediv__", lambda x: 2.5 / x, lambda a: -2.5 / a**2, NEGV),
    _scalar(
        "pow_scalar_frac",
        "__pow__",
        lambda x: x**2.5,
        lambda a: 2.5 * a**1.5,
        POS,
        torch_grad_fn=True,
    ),
    _scalar("pow_scalar_neg", "__pow__", lambda x: x**-1, lambda a: -(a**-2.0), NEGV),
    _scalar("rpow_scalar_frac", "__rpow__", lambda x: 2.5**x, lambda a: 2.5**a * np.log(2.5)),
    OpSpec(
        "where",
        lambda L, c, x, y: L.where(c, x, y),
        [Arg((2, 3), kind="bool"), A, Arg((3,))],
        shape_sets=[[Arg((3,), kind="bool"), Arg((2, 1)), Arg(())]],
    ),
    # ----- where, maximum/minimum, fmod/remainder, atan2, rounding division, logic -----
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
    OpSpec("fmod_scalar", lambda L, x: x.fmod(0.7), [A], torch_grad_fn=True),
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
        op="eq ne lt le gt ge",
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
        op="logical_and logical_or logical_xor logical_not",
    ),
    OpSpec(
        "bool_operators",
        lambda L, a, b: (a & b, a | b, a ^ b, ~a, a & True, False | b),
        [BOOL, BOOL3],
        note=BOOL_NOTE,
        op="__and__ __or__ __xor__ __invert__ __rand__ __ror__",
    ),
    OpSpec(
        "int_bitwise",
        lambda L, a, b: (a & b, a | b, a ^ b, ~a, L.bitwise_and(a, b)),
        [INT, INT3],
        note=BOOL_NOTE,
        op="__and__ __or__ __xor__ __invert__ bitwise_and",
    ),
]
