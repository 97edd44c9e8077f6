"""Reductions and scans (``src/ops/reduce.rs``): sum, mean, prod, amax/amin, max/min,
argmax, var/std, norms (incl. ``linalg.vector_norm``/``matrix_norm``), cumsum/cumprod,
all/any."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ._shared import A3, B3, BOOL_NOTE, INF, INT, KINK_NOTE, ZERO_ROW_NOTE, A, _mask
from .spec import Arg, OpSpec

# (x, dim, keepdim) over every dim spelling: int, negative int, tuple, unordered tuple.
DIM_SETS = [
    [A3, Arg(kind="const", value=dim), Arg(kind="const", value=keepdim)]
    for dim in (0, 1, -1, (0, 2), (-1, 0))
    for keepdim in (False, True)
]


def _mean_grad(a: np.ndarray, dim: Any = None, keepdim: bool = False) -> np.ndarray:
    """d mean / d x: one over the number of elements averaged."""
    return np.full_like(a, np.size(np.mean(a, axis=dim)) / a.size)


def _over_dims(
    name: str, reference: Callable[..., Any], derivative: Callable[..., Any], **kw: Any
) -> OpSpec:
    """``x.<name>(dim=, keepdim=)`` over ``DIM_SETS``, in every spelling, against NumPy."""
    return OpSpec(
        f"{name}_dims",
        lambda L, x, dim, keepdim: getattr(x, name)(dim=dim, keepdim=keepdim),
        DIM_SETS[0],
        shape_sets=DIM_SETS[1:],
        op=name,
        reference=lambda a, dim, keepdim: reference(a, axis=dim, keepdims=keepdim),
        derivative=derivative,
        forms=("function", "method"),
        **kw,
    )


OPS = [
    # ----- reductions ---------------------------------------------------------------------------
    OpSpec(
        "sum",
        lambda L, x: x.sum(),
        [A],
        shape_sets=[[Arg((0, 3))], [Arg(())]],
        reference=np.sum,
        derivative=np.ones_like,
        forms=("function",),
        torch_grad_fn=True,
    ),
    OpSpec("sum_dim", lambda L, x: x.sum(dim=(0, -1), keepdim=True), [Arg((2, 3, 4))]),
    _over_dims("sum", np.sum, lambda a, dim, keepdim: np.ones_like(a), torch_grad_fn=True),
    OpSpec(
        "mean",
        lambda L, x: x.mean(),
        [A],
        reference=np.mean,
        derivative=_mean_grad,
        forms=("function",),
        torch_grad_fn=True,
    ),
    OpSpec("mean_dim", lambda L, x: x.mean(dim=1), [Arg((2, 3, 4))]),
    _over_dims("mean", np.mean, _mean_grad, torch_grad_fn=True),
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
        op="argmax argmin",
    ),
    OpSpec("argmax_int", lambda L, a: (a.argmax(), a.argmin(1)), [INT], op="argmax argmin"),
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
        torch_gradgrad=False,
        note=ZERO_ROW_NOTE,
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
        op="all any",
    ),
    OpSpec("all_any_empty", lambda L, x: (x.all(), x.any(), x.all(0)), [Arg((0, 3))], op="all any"),
    OpSpec(
        "nansum",
        lambda L, x: L.nansum(x.masked_fill(L.tensor([[True, False, False]]), float("nan")), 1),
        [Arg((2, 3))],
        forms=(),
        note="a fixed NaN planted: its gradient is zero",
    ),
    OpSpec(
        "nanmean",
        lambda L, x: x.masked_fill(
            L.tensor([[False, True, False], [False, False, False]]), float("nan")
        ).nanmean(dim=0, keepdim=True),
        [Arg((2, 3))],
        torch_grad_fn=True,
    ),
]
