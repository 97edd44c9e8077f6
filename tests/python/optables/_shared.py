"""Arguments and helpers used by entries of several op-table files (a file's own ones stay in
that file)."""

from __future__ import annotations

import math
from typing import Any, Callable

import ferrograd.nn.functional  # noqa: F401  (makes ``ferrograd.nn`` an attribute)
import numpy as np

from .spec import Arg, OpSpec

A = Arg((2, 3))
A35 = Arg((3, 5))
A3 = Arg((2, 3, 4))
B3 = Arg((3,))
C3 = Arg((2, 3, 4))
X4 = Arg((2, 3, 4))
POS = Arg((2, 3), low=0.2, high=2.0)
BIG = Arg((2, 3), low=-60.0, high=60.0)
INT = Arg((2, 3), kind="int", int_high=7)
BOOL = Arg((2, 3), kind="bool")
INF = math.inf

STEP_NOTE = "a step function: zero gradient everywhere (torch's choice too)"
KINK_NOTE = "piecewise linear: the second derivative is 0 a.e.; FD across kinks is unstable"
BOOL_NOTE = "bool/int output: compared by value only"
_KINK = "piecewise linear: the second derivative is 0 almost everywhere"
ZERO_ROW_NOTE = (
    "torch's double backward is NaN at the zero row; ferrograd's is 0, the finite-difference value"
)


def F(L):  # noqa: N802 - torch's conventional name
    return L.nn.functional


def _mask(L, x, values):  # type: ignore[no-untyped-def]
    """A constant tensor like ``x``'s dtype (to plant zeros or ties)."""
    return L.tensor(values, dtype=x.dtype)


def _long(L: Any, v: Any) -> Any:
    return L.tensor(np.array(v, dtype=np.int64))


def _sum_to(g: np.ndarray, shape: tuple) -> np.ndarray:
    """``g`` summed over the dims that broadcasting added or stretched, back to ``shape``."""
    g = g.sum(axis=tuple(range(g.ndim - len(shape))))
    stretched = tuple(i for i, s in enumerate(shape) if s == 1)
    return g.sum(axis=stretched, keepdims=True).reshape(shape)


def _rearranged(name: str, shape: tuple, fn: Callable[..., Any], np_fn: Callable[..., Any], **kw):
    """An op that only moves ``x``'s elements (a view, a copy, basic indexing): its values
    must equal ``np_fn``'s exactly, and the gradient of its sum counts how many outputs each
    element reaches (``np_fn`` applied to the elements' indices)."""

    def grad(a: np.ndarray) -> np.ndarray:
        index = np.asarray(np_fn(np.arange(a.size).reshape(a.shape)))
        return np.bincount(index.ravel(), minlength=a.size).reshape(a.shape).astype(float)

    return OpSpec(name, fn, [Arg(shape)], reference=np_fn, derivative=grad, exact=True, **kw)
