"""Three-operand pointwise ops and closeness tests (``src/ops/pointwise.rs``): lerp (number or
tensor weight), addcmul, addcdiv, isclose; with them clamp_min/clamp_max (``src/ops/unary.rs``)
and the in-place forms, checked through the same gradients as the out-of-place ops."""

from __future__ import annotations

import numpy as np

from ._shared import KINK_NOTE, A, _sum_to
from .spec import Arg, OpSpec

B3 = Arg((3,))
DIV = Arg((2, 3), low=0.5, high=2.0)


def _lerp_grad(a: np.ndarray, b: np.ndarray, w: np.ndarray) -> tuple:
    x, y, ww = np.broadcast_arrays(a, b, w)
    return (
        _sum_to(1 - ww, a.shape),
        _sum_to(ww, b.shape),
        _sum_to(y - x, np.shape(w)),
    )


def _addcmul_grad(a: np.ndarray, t1: np.ndarray, t2: np.ndarray) -> tuple:
    x, p, q = np.broadcast_arrays(a, t1, t2)
    return _sum_to(np.ones_like(x), a.shape), _sum_to(0.5 * q, t1.shape), _sum_to(0.5 * p, t2.shape)


def _addcdiv_grad(a: np.ndarray, t1: np.ndarray, t2: np.ndarray) -> tuple:
    x, p, q = np.broadcast_arrays(a, t1, t2)
    return (
        _sum_to(np.ones_like(x), a.shape),
        _sum_to(-2.0 / q, t1.shape),
        _sum_to(2.0 * p / q**2, t2.shape),
    )


OPS = [
    OpSpec(
        "lerp_scalar",
        lambda L, a, b: L.lerp(a, b, 0.3),
        [A, B3],
        shape_sets=[[Arg(()), A]],
        op="lerp",
        reference=lambda a, b: a + 0.3 * (b - a),
        torch_grad_fn=True,
    ),
    OpSpec(
        "lerp_tensor",
        lambda L, a, b, w: L.lerp(a, b, w),
        [A, B3, Arg((2, 1))],
        shape_sets=[[B3, B3, B3]],
        op="lerp",
        reference=lambda a, b, w: a + w * (b - a),
        derivative=_lerp_grad,
        forms=("method",),
        torch_grad_fn=True,
    ),
    OpSpec(
        "lerp_",
        lambda L, a, b, w: a.clone().lerp_(b, w),
        [A, B3, Arg((2, 1))],
        torch_grad_fn=True,
    ),
    OpSpec(
        "addcmul",
        lambda L, a, t1, t2: L.addcmul(a, t1, t2, value=0.5),
        [A, B3, Arg((2, 1))],
        shape_sets=[[Arg(()), B3, B3]],
        reference=lambda a, t1, t2: a + 0.5 * t1 * t2,
        derivative=_addcmul_grad,
        torch_grad_fn=True,
    ),
    OpSpec(
        "addcmul_",
        lambda L, a, t1, t2: a.clone().addcmul_(t1, t2, value=0.5),
        [A, B3, Arg((2, 1))],
        torch_grad_fn=True,
    ),
    OpSpec(
        "addcdiv",
        lambda L, a, t1, t2: L.addcdiv(a, t1, t2, value=-2.0),
        [A, B3, DIV],
        reference=lambda a, t1, t2: a - 2.0 * t1 / t2,
        derivative=_addcdiv_grad,
        torch_grad_fn=True,
    ),
    OpSpec(
        "addcdiv_",
        lambda L, a, t1, t2: a.clone().addcdiv_(t1, t2),
        [A, B3, DIV],
        torch_grad_fn=True,
    ),
    OpSpec(
        "clamp_min_scalar",
        lambda L, x: L.clamp_min(x, 0.1),
        [A],
        op="clamp_min",
        reference=lambda a: np.maximum(a, 0.1),
        note=KINK_NOTE,
        torch_grad_fn=True,
    ),
    OpSpec(
        "clamp_min_tensor",
        lambda L, x, m: x.clamp_min(m),
        [A, B3],
        op="clamp_min",
        reference=np.maximum,
        note=KINK_NOTE,
        torch_grad_fn=True,
    ),
    OpSpec(
        "clamp_max_scalar",
        lambda L, x: x.clamp_max(-0.2),
        [A],
        op="clamp_max",
        reference=lambda a: np.minimum(a, -0.2),
        note=KINK_NOTE,
        torch_grad_fn=True,
    ),
    OpSpec(
        "clamp_max_tensor",
        lambda L, x, m: L.clamp_max(x, m),
        [A, Arg((2, 1))],
        op="clamp_max",
        reference=np.minimum,
        note=KINK_NOTE,
        torch_grad_fn=True,
    ),
    OpSpec("clamp_", lambda L, x: x.clone().clamp_(-0.5, 0.7), [A], torch_grad_fn=True),
    OpSpec("clamp_min_", lambda L, x: x.clone().clamp_min_(0.1), [A], torch_grad_fn=True),
    OpSpec("clamp_max_", lambda L, x, m: x.clone().clamp_max_(m), [A, B3], torch_grad_fn=True),
    OpSpec(
        "isclose",
        lambda L, x, y: L.isclose(x, y * 1e-6 + x, rtol=1e-5, atol=1e-7),
        [A, A],
        grad=False,
        op="isclose",
        forms=(),
    ),
    OpSpec(
        "isclose_nan",
        lambda L, x: L.isclose(x, x.clone(), equal_nan=True),
        [A],
        grad=False,
        op="isclose",
        reference=lambda a: np.isclose(a, a, equal_nan=True),
    ),
    OpSpec(
        "pow_",
        lambda L, x, p: x.clone().pow_(p),
        [Arg((2, 3), low=0.5, high=2.0), B3],
        torch_grad_fn=True,
    ),
    OpSpec("pow_scalar_", lambda L, x: x.clone().pow_(3), [A], op="pow_", torch_grad_fn=True),
    OpSpec("fmod_", lambda L, x: x.clone().fmod_(0.7), [A], torch_grad_fn=True),
    OpSpec("remainder_", lambda L, x: x.clone().remainder_(0.9), [A], torch_grad_fn=True),
    OpSpec("atan2_", lambda L, y, x: y.clone().atan2_(x), [A, B3], torch_grad_fn=True),
    OpSpec(
        "hypot",
        lambda L, a, b: L.hypot(a, b),
        [A, B3],
        shape_sets=[[Arg((2, 1)), Arg(())]],
        reference=np.hypot,
        derivative=lambda a, b: (
            _sum_to(np.broadcast_arrays(a, b)[0] / np.hypot(a, b), a.shape),
            _sum_to(np.broadcast_arrays(a, b)[1] / np.hypot(a, b), np.shape(b)),
        ),
        forms=("method",),
        torch_grad_fn=True,
    ),
    OpSpec("hypot_", lambda L, a, b: a.clone().hypot_(b), [A, B3], torch_grad_fn=True),
    OpSpec(
        "logaddexp",
        lambda L, a, b: L.logaddexp(a, b),
        [A, B3],
        shape_sets=[[Arg((2, 1), low=-30, high=30), Arg((3,), low=-30, high=30)]],
        reference=np.logaddexp,
        forms=("method",),
        torch_grad_fn=True,
    ),
]
