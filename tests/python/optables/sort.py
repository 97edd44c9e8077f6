"""Sorting and selection (``src/ops/sort.rs``): sort/argsort/msort, topk, kthvalue,
median/nanmedian, mode, cummax/cummin, quantile/nanquantile. Inputs are uniform random draws,
free of ties, so each gradient (the incoming one scattered back to the chosen elements) is
unambiguous; ``mode`` gets a planted repeat so its choice is one value held twice."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._shared import A3, KINK_NOTE, A
from .spec import Arg, OpSpec

SEL_NOTE = "selects elements: piecewise linear, the second derivative is 0"


def _sort_ref(a: np.ndarray, dim: int, descending: bool) -> Any:
    if a.ndim == 0:
        return a, np.array(0)
    idx = np.argsort(-a if descending else a, axis=dim, kind="stable")
    return np.take_along_axis(a, idx, axis=dim), idx


def _kth_ref(a: np.ndarray, k: int, dim: int, keepdim: bool) -> Any:
    if a.ndim == 0:
        return a, np.array(0)
    idx = np.take(np.argsort(a, axis=dim, kind="stable"), [k - 1], axis=dim)
    vals = np.take_along_axis(a, idx, axis=dim)
    return (vals, idx) if keepdim else (vals.squeeze(dim), idx.squeeze(dim))


def _cummax_ref(a: np.ndarray, dim: int) -> Any:
    """Running max and, for tie-free data, where each record was set."""
    if a.ndim == 0:
        return a, np.array(0)
    cm = np.maximum.accumulate(a, axis=dim)
    shape = [1] * a.ndim
    shape[dim] = a.shape[dim]
    pos = np.arange(a.shape[dim]).reshape(shape)
    return cm, np.maximum.accumulate(np.where(a == cm, pos, 0), axis=dim)


def _q(L: Any, x: Any, values: Any) -> Any:
    return L.tensor(values, dtype=x.dtype)


def _with_repeat(L: Any, x: Any) -> Any:
    """``x`` with its first column repeated at the end: that value is each row's mode."""
    return L.cat([x, x[..., :1]], -1)


OPS = [
    OpSpec(
        "sort",
        lambda L, x, dim, desc: tuple(x.sort(dim, desc)),
        [A3, Arg(kind="const", value=-1), Arg(kind="const", value=False)],
        shape_sets=[
            [A3, Arg(kind="const", value=0), Arg(kind="const", value=True)],
            [A3, Arg(kind="const", value=1), Arg(kind="const", value=False)],
            [Arg(()), Arg(kind="const", value=0), Arg(kind="const", value=False)],
            [Arg((0, 3)), Arg(kind="const", value=1), Arg(kind="const", value=True)],
        ],
        reference=_sort_ref,
        exact=True,
        forms=("function", "method"),
        note=SEL_NOTE,
    ),
    OpSpec(
        "sort_stable_keyword",
        lambda L, x: L.sort(x, dim=1, descending=True, stable=True).values,
        [A3],
        torch_grad_fn=True,
    ),
    OpSpec(
        "argsort",
        lambda L, x: L.argsort(x, 1, descending=True),
        [A3],
        grad=False,
        reference=lambda a: np.argsort(-a, axis=1, kind="stable"),
        exact=True,
        note="int64 output",
    ),
    OpSpec(
        "msort",
        lambda L, x: L.msort(x),
        [A3],
        shape_sets=[[Arg((4,))]],
        reference=lambda a: np.sort(a, axis=0),
        exact=True,
        torch_grad_fn=True,
    ),
    OpSpec(
        "topk",
        lambda L, x, k, dim, largest: tuple(x.topk(k, dim, largest)),
        [
            A3,
            Arg(kind="const", value=2),
            Arg(kind="const", value=-1),
            Arg(kind="const", value=True),
        ],
        shape_sets=[
            [
                A3,
                Arg(kind="const", value=3),
                Arg(kind="const", value=1),
                Arg(kind="const", value=False),
            ],
            [
                A3,
                Arg(kind="const", value=0),
                Arg(kind="const", value=0),
                Arg(kind="const", value=True),
            ],
        ],
        forms=("function", "method"),
    ),
    OpSpec(
        "kthvalue",
        lambda L, x, k, dim, keepdim: tuple(L.kthvalue(x, k, dim, keepdim)),
        [
            A3,
            Arg(kind="const", value=2),
            Arg(kind="const", value=1),
            Arg(kind="const", value=False),
        ],
        shape_sets=[
            [
                A3,
                Arg(kind="const", value=4),
                Arg(kind="const", value=-1),
                Arg(kind="const", value=True),
            ],
            [
                Arg(()),
                Arg(kind="const", value=1),
                Arg(kind="const", value=0),
                Arg(kind="const", value=False),
            ],
        ],
        reference=_kth_ref,
        exact=True,
        forms=("function", "method"),
    ),
    OpSpec(
        "median_all",
        lambda L, x: x.median(),
        [A],
        shape_sets=[[Arg((3, 3))], [Arg(())]],
        reference=lambda a: np.sort(a.ravel())[(a.size - 1) // 2],
        op="median",
        torch_grad_fn=True,
    ),
    OpSpec(
        "median_all_ties",
        lambda L, x: L.median(x.expand(3, 3)),
        [Arg((3,))],
        note="ties share the gradient evenly, as torch's",
        op="median",
    ),
    OpSpec(
        "median_dim",
        lambda L, x, dim, keepdim: tuple(L.median(x, dim, keepdim)),
        [A3, Arg(kind="const", value=1), Arg(kind="const", value=False)],
        shape_sets=[[A3, Arg(kind="const", value=-1), Arg(kind="const", value=True)]],
        op="median",
    ),
    OpSpec(
        "nanmedian_all",
        lambda L, x: x.nanmedian(),
        [A3],
        reference=lambda a: np.sort(a.ravel())[(a.size - 1) // 2],
        op="nanmedian",
        torch_grad_fn=True,
    ),
    OpSpec(
        "nanmedian_dim",
        lambda L, x: tuple(L.nanmedian(x, 0, keepdim=True)),
        [A3],
        op="nanmedian",
    ),
    OpSpec(
        "mode",
        lambda L, x, dim: tuple(L.mode(_with_repeat(L, x), dim)),
        [A3, Arg(kind="const", value=-1)],
        shape_sets=[[A, Arg(kind="const", value=1)]],
        op="mode",
        note="planted repeat: the mode is the first column's value, at its last position",
    ),
    OpSpec(
        "mode_keepdim",
        lambda L, x: tuple(_with_repeat(L, x).mode(keepdim=True)),
        [A],
        op="mode",
    ),
    OpSpec(
        "cummax",
        lambda L, x, dim: tuple(L.cummax(x, dim)),
        [A3, Arg(kind="const", value=1)],
        shape_sets=[[A3, Arg(kind="const", value=-1)], [Arg(()), Arg(kind="const", value=0)]],
        reference=_cummax_ref,
        exact=True,
        forms=("function", "method"),
    ),
    OpSpec(
        "cummin",
        lambda L, x: L.cummin(x, 0).values,
        [A3],
        reference=lambda a: np.minimum.accumulate(a, axis=0),
        forms=(),
        torch_grad_fn=True,
    ),
    OpSpec(
        "quantile_scalar",
        lambda L, x, q, dim, keepdim, interp: L.quantile(x, q, dim, keepdim, interpolation=interp),
        [
            A3,
            Arg(kind="const", value=0.3),
            Arg(kind="const", value=1),
            Arg(kind="const", value=False),
            Arg(kind="const", value="linear"),
        ],
        shape_sets=[
            [
                A3,
                Arg(kind="const", value=q),
                Arg(kind="const", value=dim),
                Arg(kind="const", value=keep),
                Arg(kind="const", value=interp),
            ]
            for q, dim, keep, interp in [
                (0.3, None, False, "linear"),
                (0.8, -1, True, "midpoint"),
                (0.35, 0, False, "lower"),
                (0.35, 2, True, "higher"),
                (0.45, None, True, "nearest"),
                (1.0, 1, False, "linear"),
            ]
        ],
        reference=lambda a, q, dim, keepdim, interp: np.quantile(
            a, q, axis=dim, keepdims=keepdim, method=interp
        ),
        op="quantile",
        note=KINK_NOTE,
    ),
    OpSpec(
        "quantile_tensor",
        lambda L, x: x.quantile(_q(L, x, [0.1, 0.5, 0.9]), dim=1, keepdim=True),
        [A3],
        reference=lambda a: np.quantile(a, [0.1, 0.5, 0.9], axis=1, keepdims=True),
        op="quantile",
    ),
    OpSpec(
        "nanquantile",
        lambda L, x: L.nanquantile(x, _q(L, x, [0.25, 0.75]), -1, interpolation="midpoint"),
        [A3],
        reference=lambda a: np.nanquantile(a, [0.25, 0.75], axis=-1, method="midpoint"),
        op="nanquantile",
    ),
    # The grad_fn names against torch's (values outputs; the entries above return tuples).
    *[
        OpSpec(
            f"{name}_grad_fn",
            fn,
            [A3],
            op=name,
            torch_grad_fn=True,
            note=SEL_NOTE,
        )
        for name, fn in [
            ("sort", lambda L, x: x.sort(1).values),
            ("topk", lambda L, x: L.topk(x, 2).values),
            ("kthvalue", lambda L, x: x.kthvalue(2, 0).values),
            ("median", lambda L, x: L.median(x, 1).values),
            ("nanmedian", lambda L, x: x.nanmedian(-1).values),
            ("mode", lambda L, x: L.mode(_with_repeat(L, x)).values),
            ("cummax", lambda L, x: x.cummax(2).values),
        ]
    ],
]
