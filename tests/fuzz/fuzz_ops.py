"""Crash-isolating fuzzer for ferrograd's Python API (issue 10: "No input crashes the process").

Cases (ops x shapes x dtypes x odd values x bad arguments) are drawn from hypothesis strategies in
the parent process, deterministically for a ``--seed``.  Each case is a few lines of Python
source; batches of cases run in child processes (``python fuzz_ops.py --child``), so a segfault,
an abort, an OOM kill or a hang costs one child, not the runner.  When a child dies, the case it
was running is replayed alone in a fresh child to confirm it (and, if it only crashes after
earlier cases, the shortest crashing run of preceding cases is found by bisection); the cases
after it run in a new child.

Outcome classes of one case:

* ``ok``; ``error`` -- a clean exception (TypeError, ValueError, IndexError, RuntimeError,
  NotImplementedError) with a non-empty message;
* BAD: ``segfault``, ``abort``, ``killed`` (SIGKILL: the OOM killer), ``signal:<NAME>``,
  ``exit:<code>``, ``hang`` (no progress within ``--timeout`` seconds), ``panic``
  (``pyo3_runtime.PanicException``: a Rust panic reaching Python), ``bad-exception:<Type>`` (any
  other exception type, e.g. OverflowError, ZeroDivisionError, RecursionError, MemoryError),
  ``empty-message:<Type>``, ``mutated-input`` (an op that raised, or an out-of-place op, changed
  the values of its inputs).

Usage::

    python tests/fuzz/fuzz_ops.py --cases 3000 --seed 0          # CI-sized run
    python tests/fuzz/fuzz_ops.py --cases 100000 --seed 1        # release check
    python tests/fuzz/fuzz_ops.py --replay 'import ferrograd as torch; torch.eye(10**7)'

Exit status: 0 when no BAD outcome was seen, 1 otherwise.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

HEADER = "import ferrograd as torch; import ferrograd.nn.functional as F"
CLEAN_ERRORS = ("TypeError", "ValueError", "IndexError", "RuntimeError", "NotImplementedError")
# Exceptions of another type that torch raises itself for the same call, word for word: code
# ported from torch may catch them by that type.
TORCH_OWN_ERRORS = (("AssertionError", "Padding_idx must be within num_embeddings"),)
MEM_LIMIT = 6 * 1024**3  # address-space limit of a child: huge allocations fail fast
MAX_CONTEXT_BISECT = 64
IMPORT_FAILED = 97  # exit status of a child that could not import ferrograd
IMPORT_RETRIES = 60  # ... after which the parent waits 2 s and tries again, this many times

# ================================================================================================
# Case generation (parent process only; hypothesis is imported lazily so children start fast)
# ================================================================================================

FLOAT_DTYPES = ("torch.float32", "torch.float64")
DTYPES = ("torch.float32", "torch.float64", "torch.int64", "torch.bool")
ODD_FLOATS = (
    math.nan,
    math.inf,
    -math.inf,
    -0.0,
    0.0,
    1e38,
    -3e38,
    1e300,
    -1e308,
    1e-45,
    5e-324,
    1e-40,
    1.0,
    -1.0,
    0.5,
    2.0,
    -2.5,
    3.0,
    88.7,
    710.0,
    1e-7,
)
ODD_INTS = (0, 1, -1, 2, 3, -7, 100, 2**31, -(2**31), 2**62, 2**63 - 1, -(2**63))
HUGE = (10**6, 10**7, 2**31, 2**32 + 1, 10**12, 2**62, 2**63 - 1, 2**63, 2**64 + 3, 10**30)
# Shapes whose element count is huge or overflows 64 bits (a wrapped product is a classic crash).
EXTREME_SHAPES = (
    (2**32, 2**32),
    (2**62, 4),
    (2**63 - 1, 2),
    (3, 2**62, 0),
    (0, 2**63 - 1),
    (10**6, 10**6),
    (2**31, 2**31, 2),
    (10**12, 0),
    (1, 2**61, 8),
    (2**64,),
    (10**10,),
    (-1, 2**62),
)


def lit(v: Any) -> str:
    """Python source for a literal value (floats including nan/inf/-0.0)."""
    if isinstance(v, bool) or v is None:
        return repr(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "float('nan')"
        if math.isinf(v):
            return "float('inf')" if v > 0 else "float('-inf')"
        return repr(v)
    if isinstance(v, (list, tuple)):
        inner = ", ".join(lit(x) for x in v)
        return (
            f"({inner},)"
            if isinstance(v, tuple) and len(v) == 1
            else (f"({inner})" if isinstance(v, tuple) else f"[{inner}]")
        )
    return repr(v)


def numel(shape: Sequence[int]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


class Gen:
    """Drawing helpers around hypothesis' ``draw``; every op generator gets one."""

    def __init__(self, draw: Callable[[Any], Any]) -> None:
        import hypothesis.strategies as st

        self.st = st
        self.draw = draw
        self.setup: List[str] = []
        self.names = iter("abcdefghijklmnopqrstuvwxyz")

    # ----- scalars --------------------------------------------------------------------------

    def choice(self, seq: Sequence[Any]) -> Any:
        return self.draw(self.st.sampled_from(list(seq)))

    def p(self, prob: float) -> bool:
        """True with roughly ``prob`` probability (drawn, so hypothesis controls it)."""
        # hypothesis favours the simplest value (0): let it stand for the more likely answer
        v = self.draw(self.st.integers(0, 999))
        return v < int(prob * 1000) if prob >= 0.5 else v >= 1000 - int(prob * 1000)

    def small_int(self, lo: int = 0, hi: int = 4) -> int:
        return self.draw(self.st.integers(lo, hi))

    def odd_int(self) -> int:
        return self.choice(ODD_INTS + HUGE[:3])

    def float_value(self) -> float:
        if self.p(0.5):
            return self.choice(ODD_FLOATS)
        return self.draw(self.st.floats(-10, 10, allow_nan=False, width=32))

    def scalar(self) -> Any:
        kind = self.choice(("float", "int", "bool", "odd"))
        if kind == "float":
            return self.float_value()
        if kind == "int":
            return self.small_int(-3, 5)
        if kind == "bool":
            return self.p(0.5)
        return self.choice((2**70, -(2**64), 2**63, math.nan, math.inf, -0.0, 1e308))

    def dim(self, ndim: int, *, allow_bad: bool = True) -> int:
        """A dimension index for an ``ndim``-D tensor, sometimes out of range."""
        if allow_bad and (ndim == 0 or self.p(0.12)):
            return self.choice((ndim, -ndim - 1, ndim + 3, 2**63 - 1, -(2**63), 64))
        if ndim == 0:
            return self.choice((0, -1))
        return self.small_int(-ndim, ndim - 1)

    def size(self, *, hi: int = 4) -> int:
        """A size argument: usually small, sometimes 0, negative or huge."""
        r = self.small_int(0, 99)
        if r < 4:
            return self.choice((-1, -2, -(2**63)))
        if r < 8:
            return self.choice(HUGE)
        return self.small_int(0, hi)

    def extreme_shape(self) -> List[int]:
        return list(self.choice(EXTREME_SHAPES))

    # ----- shapes and tensors ---------------------------------------------------------------

    def shape(self, *, min_dims: int = 0, max_dims: int = 4, max_numel: int = 96) -> List[int]:
        nd = self.small_int(min_dims, max_dims)
        shape = [self.choice((0, 1, 1, 2, 3, 4, 5)) for _ in range(nd)]
        while numel(shape) > max_numel:
            shape[shape.index(max(shape))] -= 1
        return shape

    def dtype(self, floats_only: bool = False) -> str:
        if floats_only or self.p(0.55):
            return self.choice(FLOAT_DTYPES)
        return self.choice(DTYPES)

    def values(self, n: int, dtype: str) -> List[Any]:
        if dtype == "torch.bool":
            return [self.p(0.5) for _ in range(n)]
        if dtype == "torch.int64":
            if self.p(0.2):
                return [self.choice(ODD_INTS) for _ in range(n)]
            return [self.small_int(-5, 5) for _ in range(n)]
        if self.p(0.3):
            return [self.float_value() for _ in range(n)]
        return [self.draw(self.st.floats(-4, 4, width=32)) for _ in range(n)]

    def raw(self, shape: Sequence[int], dtype: str, rg: bool) -> str:
        """Source of a contiguous tensor with ``shape``."""
        n = numel(shape)
        grad = ", requires_grad=True" if rg else ""
        if n <= 16 or self.p(0.3) and n <= 40:
            vals = self.values(n, dtype)
            src = f"torch.tensor({lit(vals)}, dtype={dtype}{grad})"
            return f"{src}.reshape({lit(tuple(shape))})"
        if dtype in FLOAT_DTYPES:
            fn = self.choice(("randn", "rand", "ones", "zeros"))
            return f"torch.{fn}({lit(tuple(shape))}, dtype={dtype}{grad})"
        if dtype == "torch.int64":
            return f"torch.arange({n}).reshape({lit(tuple(shape))})"
        return f"torch.ones({lit(tuple(shape))}, dtype={dtype})"

    def tensor_src(self, shape: Sequence[int], dtype: str, rg: Optional[bool] = None) -> str:
        """Source of a tensor with ``shape``/``dtype``; maybe non-contiguous, maybe needing grad."""
        shape = list(shape)
        if rg is None:
            rg = dtype in FLOAT_DTYPES and self.p(0.6)
        rg = rg and dtype in FLOAT_DTYPES
        layout = self.choice(("contig", "contig", "t", "slice", "expand"))
        nd = len(shape)
        if layout == "t" and nd >= 2:
            sw = shape[:-2] + [shape[-1], shape[-2]]
            return f"{self.raw(sw, dtype, rg)}.transpose(-1, -2)"
        if layout == "slice" and nd >= 1:
            big = shape[:-1] + [shape[-1] * 2]
            return f"{self.raw(big, dtype, rg)}[..., ::2]"
        if layout == "expand" and nd >= 1:
            i = self.small_int(0, nd - 1)
            base = shape[:i] + [1] + shape[i + 1 :]
            return f"{self.raw(base, dtype, rg)}.expand({lit(tuple(shape))})"
        return self.raw(shape, dtype, rg)

    def tensor(
        self,
        shape: Optional[Sequence[int]] = None,
        dtype: Optional[str] = None,
        rg: Optional[bool] = None,
        **shape_kw: Any,
    ) -> Tuple[str, List[int], str]:
        """Add ``x = <tensor>`` to the setup; returns (name, shape, dtype)."""
        shape = list(shape) if shape is not None else self.shape(**shape_kw)
        dtype = dtype or self.dtype()
        name = next(self.names)
        self.setup.append(f"{name} = {self.tensor_src(shape, dtype, rg)}")
        return name, shape, dtype

    def index_tensor(self, n: int, shape: Sequence[int]) -> str:
        """Source of an int64 index tensor of ``shape`` with values mostly in [-n, n)."""
        cnt = numel(shape)
        vals = [
            self.choice((n, -n - 1, 2**62, -(2**63)))
            if self.p(0.06)
            else (self.small_int(-n, n - 1) if n > 0 else 0)
            for _ in range(cnt)
        ]
        dt = "torch.int64" if not self.p(0.05) else self.choice(("torch.float32", "torch.bool"))
        return f"torch.tensor({lit(vals)}, dtype={dt}).reshape({lit(tuple(shape))})"

    def broadcast_shape(self, shape: Sequence[int]) -> List[int]:
        """A shape that broadcasts with ``shape`` (or, sometimes, one that does not)."""
        if self.p(0.08):
            return self.shape()
        out = list(shape[self.small_int(0, len(shape)) :]) if shape else []
        out = [1 if self.p(0.3) else s for s in out]
        if self.p(0.15):
            out = [self.choice((1, 2))] + out
        return out


# ----- op generators ----------------------------------------------------------------------------
# Each returns (expr, flags); flags: "inplace" (mutates its first input), "multi" (returns a tuple
# whose first item is the tensor to differentiate), "nobw" (never run backward).

OPS: Dict[str, Callable[[Gen], Tuple[str, Tuple[str, ...]]]] = {}


def op(*names: str) -> Callable[[Callable[..., Tuple[str, Tuple[str, ...]]]], Any]:
    def deco(fn: Callable[..., Tuple[str, Tuple[str, ...]]]) -> Any:
        for n in names:
            OPS[n] = lambda g, _n=n: fn(g, _n)
        return fn

    return deco


UNARY = (
    "exp log sin cos tanh sigmoid relu sqrt abs neg sign square exp2 log2 log10 log1p expm1 rsqrt "
    "reciprocal tan asin acos atan sinh cosh asinh acosh atanh erf erfc floor ceil trunc isnan "
    "isinf isfinite logical_not bitwise_not"
).split()


@op(*UNARY)
def _unary(g: Gen, name: str) -> Tuple[str, Tuple[str, ...]]:
    a, _, _ = g.tensor()
    return (f"torch.{name}({a})" if g.p(0.5) else f"{a}.{name}()"), ()


BINARY = (
    "add sub mul div pow maximum minimum fmod remainder atan2 eq ne lt le gt ge logical_and "
    "logical_or logical_xor bitwise_and bitwise_or bitwise_xor floor_divide"
).split()
OPERATORS = {
    "add": "+",
    "sub": "-",
    "mul": "*",
    "div": "/",
    "pow": "**",
    "remainder": "%",
    "floor_divide": "//",
    "bitwise_and": "&",
    "bitwise_or": "|",
    "bitwise_xor": "^",
    "eq": "==",
    "lt": "<",
    "ge": ">=",
}


@op(*BINARY)
def _binary(g: Gen, name: str) -> Tuple[str, Tuple[str, ...]]:
    a, shape, _ = g.tensor()
    if g.p(0.25):
        b = lit(g.scalar())
    else:
        b, _, _ = g.tensor(g.broadcast_shape(shape))
    form = g.small_int(0, 3)
    if form == 0 and name in OPERATORS:
        sym = OPERATORS[name]
        return (f"{b} {sym} {a}" if g.p(0.3) else f"{a} {sym} {b}"), ()
    if form == 1:
        return f"{a}.{name}({b})", ()
    if name == "div" and g.p(0.4):
        mode = g.choice(("'floor'", "'trunc'", "'bogus'", "None"))
        return f"torch.div({a}, {b}, rounding_mode={mode})", ()
    return f"torch.{name}({a}, {b})", ()


@op("where")
def _where(g: Gen, name: str) -> Tuple[str, Tuple[str, ...]]:
    c, shape, _ = g.tensor(dtype="torch.bool" if g.p(0.85) else None)
    a, _, _ = g.tensor(g.broadcast_shape(shape))
    b = lit(g.scalar()) if g.p(0.3) else g.tensor(g.broadcast_shape(shape))[0]
    return f"torch.where({c}, {a}, {b})", ()


@op("add_", "sub_", "mul_", "div_", "iadd")
def _inplace_binary(g: Gen, name: str) -> Tuple[str, Tuple[str, ...]]:
    a, shape, _ = g.tensor(rg=g.p(0.15))
    b = lit(g.scalar()) if g.p(0.3) else g.tensor(g.broadcast_shape(shape))[0]
    if name == "iadd":
        return f"{a}.__iadd__({b})", ("inplace",)
    return f"{a}.{name}({b})", ("inplace",)


@op("fill_", "zero_", "copy_", "masked_fill_", "setitem", "index_put_")
def _inplace_misc(g: Gen, name: str) -> Tuple[str, Tuple[str, ...]]:
    a, shape, _ = g.tensor(rg=g.p(0.1))
    if name == "fill_":
        return f"{a}.fill_({lit(g.scalar())})", ("inplace",)
    if name == "zero_":
        return f"{a}.zero_()", ("inplace",)
    if name == "copy_":
        b, _, _ = g.tensor(g.broadcast_shape(shape))
        return f"{a}.copy_({b})", ("inplace",)
    if name == "masked_fill_":
        m, _, _ = g.tensor(g.broadcast_shape(shape), dtype="torch.bool" if g.p(0.9) else None)
        return f"{a}.masked_fill_({m}, {lit(g.scalar())})", ("inplace",)
    if name == "index_put_":
        n = shape[0] if shape else 0
        idx = g.index_tensor(n, [g.small_int(0, 3)])
        v = lit(g.scalar()) if g.p(0.3) else g.tensor(g.shape(max_dims=2))[0]
        if not v.isidentifier():
            v = f"torch.tensor({v})"
        return f"{a}.index_put_(({idx},), {v}, accumulate={g.p(0.5)})", ("inplace",)
    index = index_expr(g, shape, colons=False)
    v = lit(g.scalar()) if g.p(0.5) else g.tensor(g.shape(max_dims=2))[0]
    return f"{a}.__setitem__({index}, {v})", ("inplace",)


@op("round", "clamp", "nan_to_num", "clip")
def _unary_args(g: Gen, name: str) -> Tuple[str, Tuple[str, ...]]:
    a, shape, _ = g.tensor()
    if name == "round":
        return f"torch.round({a}, decimals={g.choice((0, 1, 3, -2, 400, -400, 2**40))})", ()
    if name == "nan_to_num":
        vals = [g.choice((None, 0.0, 1e39, math.inf, -5.0, math.nan)) for _ in range(3)]
        return f"torch.nan_to_num({a}, {lit(vals[0] or 0.0)}, {lit(vals[1])}, {lit(vals[2])})", ()
    lo = g.choice((None, -1.0, 0, math.nan, 2.0, 2**70))
    hi = g.choice((None, 1.0, 3, math.nan, -2.0))
    if g.p(0.2):
        lo = g.tensor(g.broadcast_shape(shape))[0]
    return f"torch.{name}({a}, {lo if isinstance(lo, str) else lit(lo)}, {lit(hi)})", ()


# ----- reductions ---------------------------------------------------------------------------


def dim_arg(g: Gen, ndim: int) -> str:
    r = g.small_int(0, 9)
    if r == 0:
        return "None"
    if r == 1:
        return lit(tuple(g.dim(ndim) for _ in range(g.small_int(0, 3))))
    if r == 2:
        return "()"
    return lit(g.dim(ndim))


@op("sum", "mean", "prod", "amax", "amin", "all", "any", "logsumexp")
def _reduce(g: Gen, name: str) -> Tuple[str, Tuple[str, ...]]:
    a, shape, _ = g.tensor()
    if name == "prod" and g.p(0.3):
        return f"{a}.prod()", ()
    d = dim_arg(g, len(shape))
    if name == "prod" and d.startswith("("):
        d = lit(g.dim(len(shape)))
    if g.p(0.2) and name in ("sum", "mean"):
        return f"{a}.{name}()", ()
    return f"torch.{name}({a}, {d}, keepdim={g.p(0.5)})", ()


@op("max", "min", "argmax", "argmin")
def _argreduce(g: Gen, name: str) -> Tuple[str, Tuple[str, ...]]:
    a, shape, _ = g.tensor()
    r = g.small_int(0, 3)
    if r == 0:
        return f"torch.{name}({a})", ()
    if r == 1 and name in ("max", "min"):
        b, _, _ = g.tensor(g.broadcast_shape(shape))
        return f"torch.{name}({a}, {b})", ()
    d = g.dim(len(shape))
    flags = ("multi",) if name in ("max", "min") else ()
    return f"torch.{name}({a}, {d}, keepdim={g.p(0.5)})", flags


@op("var", "std", "norm")
def _stat(g: Gen, name: str) -> Tuple[str, Tuple[str, ...]]:
    a, shape, _ = g.tensor()
    d = dim_arg(g, len(shape))
    if name == "norm":
        p = g.choice(("'fro'", "'nuc'", "2", "1", "0", "float('inf')", "-1", "0.5", "'bogus'"))
        return f"torch.norm({a}, {p}, {d}, keepdim={g.p(0.5)})", ()
    corr = g.choice((0, 1, 2, -1, 1000, 0.5))
    return f"torch.{name}({a}, {d}, keepdim={g.p(0.5)}, correction={corr})", ()


@op("softmax", "log_softmax", "cumsum", "cumprod")
def _along(g: Gen, name: str) -> Tuple[str, Tuple[str, ...]]:
    a, shape, _ = g.tensor()
    d = g.dim(len(shape))
    if g.p(0.2):
        return f"torch.{name}({a}, {d}, dtype={g.choice(DTYPES)})", ()
    return f"torch.{name}({a}, {d})", ()


# ----- shape ops ----------------------------------------------------------------------------


def sizes_like(g: Gen, shape: Sequence[int]) -> List[int]:
    """A target shape for reshape/view: a refactoring of numel, with -1, or something wrong."""
    n = numel(shape)
    r = g.small_int(0, 9)
    if r <= 3:
        out = list(shape)
        if len(out) >= 2 and g.p(0.5):
            out = [out[0] * out[1]] + out[2:]
        if out and g.p(0.4):
            out[g.small_int(0, len(out) - 1)] = -1
        return out
    if r <= 5:
        return [n] if g.p(0.5) else [-1]
    if r == 6:
        return [1, n, 1]
    return [g.size() for _ in range(g.small_int(0, 3))]


@op("reshape", "view", "expand", "broadcast_to", "repeat", "tile", "permute")
def _shape_seq(g: Gen, name: str) -> Tuple[str, Tuple[str, ...]]:
    a, shape, _ = g.tensor()
    nd = len(shape)
    if name in ("reshape", "view"):
        sizes = sizes_like(g, shape)
    elif name in ("expand", "broadcast_to"):
        sizes = [s if s != 1 or g.p(0.5) else g.size() for s in shape]
        if g.p(0.4):
            sizes = [g.size(hi=3)] + sizes
        if sizes and g.p(0.2):
            sizes[g.small_int(0, len(sizes) - 1)] = -1
    elif name == "permute":
        sizes = g.draw(g.st.permutations(list(range(nd))))
        if g.p(0.2):
            sizes = sizes + [g.dim(nd)] if g.p(0.5) else sizes[:-1]
        elif sizes and g.p(0.15):
            sizes[0] = g.dim(nd)
    else:
        sizes = [g.size(hi=3) for _ in range(g.small_int(0, nd + 1))]
    if name != "permute" and g.p(0.06):
        sizes = g.extreme_shape()
        if name in ("expand", "broadcast_to") and len(sizes) < nd:
            sizes = sizes + list(shape[len(sizes) :])
    if name == "broadcast_to":
        return f"torch.broadcast_to({a}, {lit(tuple(sizes))})", ()
    if name == "tile":
        return f"torch.tile({a}, {lit(tuple(sizes))})", ()
    return (f"{a}.{name}(*{lit(sizes)})" if g.p(0.5) else f"{a}.{name}({lit(tuple(sizes))})"), ()


@op(
    "flatten",
    "unflatten",
    "squeeze",
    "unsqueeze",
    "transpose",
    "t",
    "mT",
    "movedim",
    "narrow",
    "select",
    "flip",
    "roll",
    "diag",
    "diagonal",
    "tril",
    "triu",
    "trace",
    "contiguous",
    "clone",
)
def _shape_misc(g: Gen, name: str) -> Tuple[str, Tuple[str, ...]]:
    a, shape, _ = g.tensor(max_dims=4 if name not in ("diag", "trace", "t") else 3)
    nd = len(shape)
    d = g.dim(nd)
    if name == "flatten":
        return f"torch.flatten({a}, {d}, {g.dim(nd)})" if g.p(0.7) else f"{a}.flatten()", ()
    if name == "unflatten":
        n = shape[d] if -nd <= d < nd else 3
        sizes = g.choice(([n], [1, n], [-1, 1], [n, -1], [2, -1], [-1, -1], [0], [g.size()]))
        return f"{a}.unflatten({d}, {lit(tuple(sizes))})", ()
    if name == "squeeze":
        return (f"{a}.squeeze({d})" if g.p(0.7) else f"{a}.squeeze()"), ()
    if name == "unsqueeze":
        return f"{a}.unsqueeze({g.dim(nd + 1)})", ()
    if name == "transpose":
        return f"{a}.transpose({d}, {g.dim(nd)})", ()
    if name in ("t", "mT", "contiguous", "clone"):
        return (f"{a}.{name}()" if name != "mT" else f"{a}.mT"), ()
    if name == "movedim":
        return f"torch.movedim({a}, {d}, {g.dim(nd)})", ()
    if name == "narrow":
        ln = g.choice((0, 1, 2, -1, 5, 2**63 - 1))
        return f"{a}.narrow({d}, {g.choice((0, 1, -1, 3, -(2**63), 2**40))}, {ln})", ()
    if name == "select":
        return f"{a}.select({d}, {g.choice((0, 1, -1, 4, -6, 2**63 - 1))})", ()
    if name == "flip":
        return f"torch.flip({a}, {lit(tuple(g.dim(nd) for _ in range(g.small_int(0, 2))))})", ()
    if name == "roll":
        shifts = g.choice((1, -1, 0, 7, 2**63 - 1, -(2**63)))
        if g.p(0.4):
            return f"torch.roll({a}, {shifts})", ()
        if g.p(0.3):
            return f"torch.roll({a}, ({shifts}, 1), ({d}, {g.dim(nd)}))", ()
        return f"torch.roll({a}, {shifts}, {d})", ()
    off = g.choice((0, 1, -1, 2, -3, 2**62, -(2**63)))
    if name == "diagonal":
        return f"torch.diagonal({a}, {off}, {d}, {g.dim(nd)})", ()
    if name == "trace":
        return f"torch.trace({a})", ()
    return f"torch.{name}({a}, {off})", ()


@op("split", "chunk", "unbind", "split_with_sizes")
def _split(g: Gen, name: str) -> Tuple[str, Tuple[str, ...]]:
    a, shape, _ = g.tensor()
    nd = len(shape)
    d = g.dim(nd)
    if name == "split":
        s = g.choice((1, 2, 3, 0, -1, 10**9)) if g.p(0.7) else [g.size(hi=3) for _ in range(2)]
        return f"torch.split({a}, {lit(s)}, {d})", ("multi",)
    if name == "split_with_sizes":
        n = shape[d] if -nd <= d < nd else 2
        s = g.choice(([n], [0, n], [1, n - 1], [n + 1], [-1, n + 1], [g.size(), 0]))
        return f"{a}.split_with_sizes({lit(s)}, {d})", ("multi",)
    if name == "chunk":
        return f"torch.chunk({a}, {g.choice((1, 2, 3, 7, 0, -1, 2**63 - 1))}, {d})", ("multi",)
    return f"torch.unbind({a}, {d})", ("multi",)


@op("cat", "stack")
def _cat(g: Gen, name: str) -> Tuple[str, Tuple[str, ...]]:
    a, shape, dt = g.tensor(max_dims=3)
    names = [a]
    for _ in range(g.small_int(0, 2)):
        other = list(shape)
        if other and g.p(0.5) and name == "cat":
            other[g.small_int(0, len(other) - 1)] = g.small_int(0, 3)
        if g.p(0.1):
            other = g.shape(max_dims=3)
        names.append(g.tensor(other, dtype=dt if g.p(0.8) else None)[0])
    if g.p(0.05):
        names = []
    return f"torch.{name}([{', '.join(names)}], {g.dim(len(shape) + (name == 'stack'))})", ()


# ----- indexing -----------------------------------------------------------------------------


def index_expr(g: Gen, shape: Sequence[int], *, colons: bool = True) -> str:
    """Source of an index for ``t[...]`` on a tensor of ``shape`` (with ``colons=False``, one
    that is also a valid expression, for ``t.__setitem__(index, v)``)."""
    items: List[str] = []
    nd = len(shape)
    pos = 0
    for _ in range(g.small_int(1, min(nd + 1, 4))):
        n = shape[pos] if pos < nd else 1
        kind = g.choice(("int", "slice", "slice", "none", "ellipsis", "bool", "itensor", "list"))
        if kind == "int":
            items.append(lit(g.choice((0, -1, 1, n, -n - 1, 2**63, True))))
        elif kind == "slice":
            parts = [g.choice((None, 1, -1, 0, 5, -9, 2**63)) for _ in range(2)]
            step = g.choice((None, None, 2, 3, -1, 0, 2**62))
            if colons:
                text = ":".join("" if v is None else str(v) for v in parts)
                items.append(text + ("" if step is None else f":{step}"))
            else:
                items.append(f"slice({parts[0]}, {parts[1]}, {step})")
        elif kind == "none":
            items.append("None")
            continue
        elif kind == "ellipsis":
            items.append("...")
            continue
        elif kind == "bool":
            m = [g.p(0.5) for _ in range(n if not g.p(0.1) else n + 1)]
            items.append(f"torch.tensor({lit(m)}, dtype=torch.bool)")
        elif kind == "itensor":
            items.append(g.index_tensor(n, [g.small_int(0, 3)]))
        else:
            items.append(lit([g.small_int(-n, n) if n else 0 for _ in range(g.small_int(0, 3))]))
        pos += 1
    if len(items) == 1 and g.p(0.5):
        return items[0]
    return (
        ", ".join(items) + ("," if len(items) == 1 else "")
        if colons
        else ("(" + ", ".join(items) + ",)")
    )


@op("getitem")
def _getitem(g: Gen, name: str) -> Tuple[str, Tuple[str, ...]]:
    a, shape, _ = g.tensor()
    return f"{a}[{index_expr(g, shape)}]", ()


@op(
    "index_select",
    "gather",
    "take_along_dim",
    "scatter",
    "scatter_add",
    "index_add",
    "masked_fill",
    "masked_select",
    "nonzero",
)
def _indexing(g: Gen, name: str) -> Tuple[str, Tuple[str, ...]]:
    a, shape, dt = g.tensor()
    nd = len(shape)
    d = g.dim(nd)
    n = shape[d] if -nd <= d < nd else 2
    if name == "index_select":
        return f"torch.index_select({a}, {d}, {g.index_tensor(n, [g.small_int(0, 4)])})", ()
    if name in ("gather", "take_along_dim", "scatter", "scatter_add"):
        ishape = [max(0, s - g.small_int(0, 1)) for s in shape]
        if g.p(0.15):
            ishape = g.shape()
        idx = g.index_tensor(n, ishape)
        if name == "gather":
            return f"torch.gather({a}, {d}, {idx})", ()
        if name == "take_along_dim":
            return (
                f"torch.take_along_dim({a}, {idx}, {d})"
                if g.p(0.8)
                else f"torch.take_along_dim({a}, {idx})"
            ), ()
        src = g.tensor(ishape if g.p(0.8) else g.shape(), dtype=dt if g.p(0.8) else None)[0]
        if name == "scatter" and g.p(0.3):
            return f"torch.scatter({a}, {d}, {idx}, value={lit(g.scalar())})", ()
        return f"torch.{name}({a}, {d}, {idx}, {src})", ()
    if name == "index_add":
        k = g.small_int(0, 3)
        idx = g.index_tensor(n, [k])
        sshape = list(shape)
        if -nd <= d < nd:
            sshape[d] = k
        src = g.tensor(sshape if g.p(0.85) else g.shape(), dtype=dt if g.p(0.8) else None)[0]
        return f"torch.index_add({a}, {d}, {idx}, {src}, alpha={lit(g.scalar())})", ()
    if name == "nonzero":
        return f"torch.nonzero({a}, as_tuple={g.p(0.5)})", ("nobw",)
    m, _, _ = g.tensor(g.broadcast_shape(shape), dtype="torch.bool" if g.p(0.9) else None)
    if name == "masked_select":
        return f"torch.masked_select({a}, {m})", ()
    v = lit(g.scalar()) if g.p(0.8) else g.tensor([], dtype=g.dtype())[0]
    return f"torch.masked_fill({a}, {m}, {v})", ()


# ----- matmul family ------------------------------------------------------------------------


@op("matmul", "mm", "bmm", "mv", "dot", "outer", "einsum", "linear")
def _matmul(g: Gen, name: str) -> Tuple[str, Tuple[str, ...]]:
    k = g.choice((0, 1, 2, 3, 5))
    m = g.choice((0, 1, 2, 4))
    n = g.choice((0, 1, 3))
    dt = g.choice(FLOAT_DTYPES) if g.p(0.85) else g.dtype()
    dt2 = dt if g.p(0.9) else g.dtype()
    bad = g.p(0.1)
    k2 = k + 1 if bad else k
    if name in ("mm", "linear"):
        sa, sb = [m, k], [n, k2] if name == "linear" else [k2, n]
    elif name == "bmm":
        bt = g.choice((0, 1, 2))
        sa, sb = [bt, m, k], [bt if not bad else bt + 1, k, n]
    elif name == "mv":
        sa, sb = [m, k], [k2]
    elif name in ("dot", "outer"):
        sa, sb = [k], [k2 if name == "dot" else n]
    else:
        lead = [g.choice((1, 2))] if g.p(0.4) else []
        sa = lead + ([m, k] if g.p(0.8) else [k])
        sb = ([g.choice((1, 2))] if g.p(0.3) else []) + ([k2, n] if g.p(0.8) else [k2])
    if g.p(0.05):
        sa = g.shape()
    a, _, _ = g.tensor(sa, dtype=dt)
    b, _, _ = g.tensor(sb, dtype=dt2)
    if name == "linear":
        bias = g.tensor([n if not g.p(0.1) else n + 1], dtype=dt)[0] if g.p(0.5) else "None"
        return f"F.linear({a}, {b}, {bias})", ()
    if name == "einsum":
        eq = g.choice(
            (
                "'ij,jk->ik'",
                "'i,i->'",
                "'...ij,...jk->...ik'",
                "'ii->i'",
                "'ij->ji'",
                "'ab,bc'",
                "'i,j->ij'",
                "'->'",
                "'ij,jk->ikz'",
                "'bad'",
            )
        )
        return f"torch.einsum({eq}, {a}, {b})", ()
    if name == "matmul" and g.p(0.5):
        return f"{a} @ {b}", ()
    return f"torch.{name}({a}, {b})", ()


# ----- nn.functional ------------------------------------------------------------------------


def int_or_pair(g: Gen, lo: int = 0, hi: int = 3) -> str:
    if g.p(0.05):
        return g.choice(("0", "-1", "(1, 0)", "(2, -2)", "()", "(1, 1, 1)", str(2**40)))
    v = g.small_int(lo, hi)
    return str(v) if g.p(0.6) else lit((v, g.small_int(lo, hi)))


@op("conv1d", "conv2d")
def _conv(g: Gen, name: str) -> Tuple[str, Tuple[str, ...]]:
    sp = 1 if name == "conv1d" else 2
    groups = g.choice((1, 2)) if g.p(0.9) else g.choice((0, -1, 3))
    bsz, cin, cout = g.choice((0, 1, 2)), g.choice((2, 4, 1, 3)), g.choice((2, 4, 1))
    cin_w = cin // groups if groups > 0 and cin % groups == 0 else cin
    ksz = [g.choice((1, 2, 3)) for _ in range(sp)]
    insp = [g.choice((3, 5, 6, 1, 0)) for _ in range(sp)]
    dt = g.choice(FLOAT_DTYPES) if g.p(0.9) else g.dtype()
    ishape = [bsz, cin] + insp if g.p(0.85) else g.shape()
    x = g.tensor(ishape, dtype=dt)[0]
    w = g.tensor([cout, cin_w] + ksz if g.p(0.9) else g.shape(), dtype=dt)[0]
    bias = g.tensor([cout], dtype=dt)[0] if g.p(0.4) else "None"
    stride = int_or_pair(g, 1, 3)
    if g.p(0.15):
        pad = g.choice(("'same'", "'valid'", "'bogus'"))
    else:
        pad = int_or_pair(g, 0, 2)
    dil = int_or_pair(g, 1, 2)
    return f"F.{name}({x}, {w}, {bias}, {stride}, {pad}, {dil}, {groups})", ()


@op("max_pool2d", "avg_pool2d", "unfold")
def _pool(g: Gen, name: str) -> Tuple[str, Tuple[str, ...]]:
    shape = [g.choice((1, 2)), g.choice((1, 2)), g.choice((4, 3, 6, 1, 0)), g.choice((5, 2, 1))]
    if g.p(0.3):
        shape = shape[1:]
    if g.p(0.1):
        shape = g.shape()
    x = g.tensor(shape, dtype=g.choice(FLOAT_DTYPES) if g.p(0.9) else g.dtype())[0]
    k, s = int_or_pair(g, 1, 3), int_or_pair(g, 1, 2)
    p = int_or_pair(g, 0, 1) if g.p(0.4) else "0"
    if name == "unfold":
        return f"F.unfold({x}, {k}, {int_or_pair(g, 1, 2)}, {p}, {s})", ()
    ceil = g.p(0.3)
    if name == "max_pool2d":
        ri = g.p(0.3)
        return (
            f"F.max_pool2d({x}, {k}, {s}, {p}, {int_or_pair(g, 1, 2)}, ceil_mode={ceil}, "
            f"return_indices={ri})"
        ), (("multi",) if ri else ())
    div = g.choice(("None", "None", "2", "0", "-1"))
    return (
        f"F.avg_pool2d({x}, {k}, {s}, {p}, ceil_mode={ceil}, "
        f"count_include_pad={g.p(0.5)}, divisor_override={div})"
    ), ()


@op(
    "layer_norm",
    "normalize",
    "dropout",
    "gelu",
    "softplus",
    "F.relu",
    "elu",
    "leaky_relu",
    "hardtanh",
    "silu",
)
def _nn_unary(g: Gen, name: str) -> Tuple[str, Tuple[str, ...]]:
    a, shape, dt = g.tensor()
    if name == "layer_norm":
        ns = shape[-g.small_int(0, len(shape)) :] if shape and g.p(0.85) else g.shape(max_dims=2)
        w = g.tensor(ns, dtype=dt)[0] if g.p(0.4) else "None"
        b = g.tensor(ns, dtype=dt)[0] if g.p(0.3) else "None"
        eps = g.choice((1e-5, 0.0, -1.0, math.nan))
        return f"F.layer_norm({a}, {lit(tuple(ns))}, {w}, {b}, {lit(eps)})", ()
    if name == "normalize":
        pn = lit(g.choice((2.0, 1.0, 0.0, -1.0, math.inf)))
        return f"F.normalize({a}, {pn}, {g.dim(len(shape))})", ()
    if name == "dropout":
        p = g.choice((0.0, 0.5, 1.0, -0.1, 1.5, math.nan))
        inpl = g.p(0.3)
        return f"F.dropout({a}, {lit(p)}, {g.p(0.8)}, {inpl})", (("inplace",) if inpl else ())
    if name == "gelu":
        return f"F.gelu({a}, approximate={g.choice(('none', 'tanh', 'bogus'))!r})", ()
    if name == "softplus":
        return f"F.softplus({a}, {lit(g.float_value())}, {lit(g.float_value())})", ()
    if name in ("F.relu", "elu", "leaky_relu", "silu"):
        inpl = g.p(0.3)
        fn = name.split(".")[-1]
        return f"F.{fn}({a}, inplace={inpl})", (("inplace",) if inpl else ())
    return f"F.hardtanh({a}, {lit(g.float_value())}, {lit(g.float_value())})", ()


@op("cross_entropy", "nll_loss", "mse_loss", "l1_loss", "binary_cross_entropy")
def _loss(g: Gen, name: str) -> Tuple[str, Tuple[str, ...]]:
    red = g.choice(("'mean'", "'sum'", "'none'", "'bogus'"))
    if name in ("cross_entropy", "nll_loss"):
        n, c = g.choice((0, 1, 3)), g.choice((0, 1, 2, 4))
        extra = [g.choice((1, 2))] if g.p(0.2) else []
        x, _, dt = g.tensor([n, c] + extra if g.p(0.85) else g.shape(), dtype=g.dtype(True))
        if g.p(0.25):
            t = g.tensor([n] + extra, dtype="torch.float32" if g.p(0.8) else None, rg=False)[0]
            if name == "cross_entropy":
                t = g.tensor([n, c] + extra, dtype=dt, rg=False)[0]
        else:
            t = g.index_tensor(c, [n] + extra if g.p(0.9) else [n + 1])
        w = g.tensor([c], dtype=dt, rg=False)[0] if g.p(0.2) else "None"
        ii = g.choice((-100, 0, 1, -1, 2**63 - 1))
        ls = (
            f", label_smoothing={lit(g.choice((0.0, 0.1, 1.0, -0.5, 2.0)))}"
            if name == "cross_entropy"
            else ""
        )
        return f"F.{name}({x}, {t}, {w}, ignore_index={ii}, reduction={red}{ls})", ()
    x, shape, dt = g.tensor()
    t = g.tensor(g.broadcast_shape(shape), dtype=dt if g.p(0.85) else None)[0]
    return f"F.{name}({x}, {t}, reduction={red})", ()


@op("pad", "embedding", "one_hot")
def _nn_misc(g: Gen, name: str) -> Tuple[str, Tuple[str, ...]]:
    if name == "pad":
        a, shape, _ = g.tensor()
        pads = [g.choice((0, 1, 2, -1, -3)) for _ in range(g.choice((0, 1, 2, 4, 6, 10)))]
        mode = g.choice(
            ("'constant'", "'constant'", "'reflect'", "'replicate'", "'circular'", "'bogus'")
        )
        return f"F.pad({a}, {lit(pads)}, {mode}, {lit(g.choice((None, 0.0, math.nan, 2)))})", ()
    if name == "embedding":
        num, dim_ = g.choice((0, 1, 3, 5)), g.choice((0, 1, 2))
        w, _, dt = g.tensor([num, dim_] if g.p(0.9) else g.shape(), dtype=g.dtype(True))
        idx = g.index_tensor(num, g.shape(max_dims=2, max_numel=8))
        pi = g.choice(("None", "None", "0", "-1", str(num), "-100"))
        mn = g.choice(("None", "None", "1.0", "0.0", "-1.0"))
        flags = ("inplace",) if mn != "None" else ()
        return f"F.embedding({idx}, {w}, {pi}, {mn})", flags
    vals = g.index_tensor(g.choice((1, 3, 5)), g.shape(max_dims=2, max_numel=8))
    nc = g.choice((-1, -1, 0, 1, 3, 6, -5, 10**12))
    return f"F.one_hot({vals}, {nc})", ("nobw",)


# ----- creation and conversion --------------------------------------------------------------


@op(
    "zeros",
    "ones",
    "empty",
    "full",
    "rand",
    "randn",
    "arange",
    "linspace",
    "eye",
    "tensor",
    "zeros_like",
    "full_like",
    "new_zeros",
    "new_ones",
)
def _creation(g: Gen, name: str) -> Tuple[str, Tuple[str, ...]]:
    dt = g.choice(DTYPES + ("None",))
    rg = g.p(0.4)
    kw = f", dtype={dt}, requires_grad={rg}"
    if name in ("zeros", "ones", "empty", "rand", "randn", "full"):
        sizes = [g.size() for _ in range(g.small_int(0, 4))]
        if numel([max(0, s) for s in sizes]) > 10**5 and not g.p(0.3):
            sizes = [min(s, 3) for s in sizes]
        if g.p(0.08):
            sizes = g.extreme_shape()
        if name == "full":
            return f"torch.full({lit(tuple(sizes))}, {lit(g.scalar())}{kw})", ()
        if g.p(0.5):
            return f"torch.{name}(*{lit(sizes)}{kw})", ()
        return f"torch.{name}({lit(tuple(sizes))}{kw})", ()
    if name == "arange":
        vals = [
            g.choice((0, 1, -3, 5, 2.5, 0.1, math.nan, math.inf, 10**5, 2**63, 0.0))
            for _ in range(3)
        ]
        k = g.small_int(1, 3)
        return f"torch.arange({', '.join(lit(v) for v in vals[:k])}{kw})", ()
    if name == "linspace":
        steps = g.size(hi=6)
        return f"torch.linspace({lit(g.float_value())}, {lit(g.float_value())}, {steps}{kw})", ()
    if name == "eye":
        n = g.size(hi=4)
        return (f"torch.eye({n}, {g.size(hi=4)}{kw})" if g.p(0.5) else f"torch.eye({n}{kw})"), ()
    if name == "tensor":
        data = g.choice(
            (
                [],
                [[]],
                [[], []],
                [[1], [2, 3]],
                [1, 2.5, True],
                [[1.0, math.nan]],
                2**70,
                [2**63],
                [-(2**63)],
                [1e39],
                [[[0.0]]],
                math.nan,
                "'abc'",
                [None],
                [[1], 2],
            )
        )
        return f"torch.tensor({data if isinstance(data, str) else lit(data)}{kw})", ()
    a, shape, _ = g.tensor()
    if name == "zeros_like":
        return f"torch.zeros_like({a}{kw})", ()
    if name == "full_like":
        return f"torch.full_like({a}, {lit(g.scalar())}{kw})", ()
    sizes = [g.size() for _ in range(g.small_int(0, 3))]
    return f"{a}.{name}({lit(tuple(sizes))}, dtype={dt})", ()


@op("to", "item", "tolist", "numpy", "float", "long", "bool", "len", "iter", "repr")
def _convert(g: Gen, name: str) -> Tuple[str, Tuple[str, ...]]:
    a, _, _ = g.tensor()
    if name == "to":
        return f"{a}.to({g.choice(DTYPES)})", ()
    if name in ("float", "long", "bool"):
        return f"{a}.{name}()", ()
    if name == "len":
        return f"len({a})", ()
    if name == "iter":
        return f"list({a})", ("nobw",)
    if name == "repr":
        return f"repr({a})", ()
    return f"{a}.{name}()", ()


# ----- autograd engine, hooks, custom Functions, numpy interop ----------------------------

USER_RETURNS = (
    "None",
    "g",
    "g * 2",
    "(g, g)",
    "torch.ones(7)",
    "g.long()",
    "g.sum()",
    "'text'",
    "g.t()",
    "(_ for _ in ()).throw(ValueError('user error'))",
    "g.double()",
    "g[None]",
)


@op("hook", "post_hook", "function", "function_raises")
def _hooks(g: Gen, name: str) -> Tuple[str, Tuple[str, ...]]:
    a, shape, _ = g.tensor(dtype=g.choice(FLOAT_DTYPES), rg=True, min_dims=0)
    ret = g.choice(USER_RETURNS)
    if name == "hook":
        g.setup.append(f"h = {a}.register_hook(lambda g: {ret})")
        wide = g.choice(("", " + b.exp().sum() + b.sin().sum()"))
        if wide:
            g.setup.append(f"b = {a} * 3")
        return f"({a} * {a}).sum(){wide}", ()
    if name == "post_hook":
        g.setup.append(f"{a}.detach_()" if g.p(0.1) else "pass")
        return f"{a}.register_post_accumulate_grad_hook(lambda t: {ret})", ()
    fwd = g.choice(("x * 2", "x.clone()", "x", "x.sum()", "(x, x * 2)", "x.long()", "x.view(-1)"))
    if name == "function_raises":
        fwd = "(_ for _ in ()).throw(RuntimeError('forward failed'))"
    g.setup.append(
        "Fn = type('Fn', (torch.autograd.Function,), {'forward': staticmethod(lambda ctx, x: "
        f"{fwd}), 'backward': staticmethod(lambda ctx, *gs: (lambda g: {ret})(gs[0]))}})"
    )
    return f"Fn.apply({a})", ("multi",) if fwd.startswith("(x") else ()


@op("backward_api", "autograd_grad", "jacobian", "version_counter", "grad_setter")
def _engine(g: Gen, name: str) -> Tuple[str, Tuple[str, ...]]:
    a, shape, _ = g.tensor(dtype=g.choice(FLOAT_DTYPES), rg=g.p(0.9))
    gshape = list(shape) if g.p(0.6) else g.shape()
    if name == "backward_api":
        kind = g.small_int(0, 4)
        if kind == 0:
            return f"{a}.backward()", ("nobw",)
        if kind == 1:
            gr = g.tensor(gshape, dtype=g.dtype(), rg=False)[0]
            return f"({a} * 2).backward({gr})", ("nobw",)
        if kind == 2:
            g.setup.append(f"y = ({a} * {a}).sum(); y.backward(retain_graph={g.p(0.5)})")
            return "y.backward()", ("nobw",)
        if kind == 3:
            return f"torch.autograd.backward([{a}.sum(), {a}.exp().sum()], [None, None])", ("nobw",)
        return f"({a} * 2).sum().backward(inputs=[{a}])", ("nobw",)
    if name == "autograd_grad":
        b = g.tensor(g.shape(), dtype=g.choice(FLOAT_DTYPES), rg=g.p(0.7))[0]
        go = g.tensor(gshape, dtype=g.dtype(), rg=False)[0] if g.p(0.3) else "None"
        return (
            f"torch.autograd.grad([({a} * 2)], [{a}, {b}], grad_outputs=[{go}], "
            f"retain_graph={g.p(0.5)}, create_graph={g.p(0.5)}, allow_unused={g.p(0.5)}, "
            f"materialize_grads={g.p(0.3)})",
            ("nobw",),
        )
    if name == "jacobian":
        fn = g.choice(("x.exp()", "x.sum()", "x[None]", "(x, x * 2)", "x.long()", "None", "3.0"))
        which = g.choice(("jacobian", "hessian", "vjp", "jvp", "hvp", "vhp"))
        extra = f", {a}" if which in ("jvp", "hvp", "vhp") else ""
        return f"torch.autograd.functional.{which}(lambda x: {fn}, {a}{extra})", ("nobw",)
    if name == "version_counter":
        op_ = g.choice(("add_(1)", "mul_(0)", "zero_()", "fill_(2.0)", "copy_(b.detach())"))
        g.setup.append(f"b = {a} * 2; c = b.{g.choice(('exp', 'sin', 'sigmoid', 'relu'))}()")
        g.setup.append(f"{g.choice(('b', 'b[...]', 'b.view(-1)', 'c'))}.{op_}")
        return "c.sum().backward()", ("nobw",)
    val = g.choice(
        (
            "torch.ones(3)",
            f"torch.zeros({lit(tuple(shape))}, dtype=torch.int64)",
            "5",
            f"torch.zeros({lit(tuple(shape))}, dtype=torch.float64)",
            "None",
        )
    )
    g.setup.append(f"{a}.grad = {val}")
    return f"({a} * 2).sum().backward()", ("nobw",)


@op("from_numpy", "as_tensor", "numpy_roundtrip")
def _numpy(g: Gen, name: str) -> Tuple[str, Tuple[str, ...]]:
    g.setup.insert(0, "import numpy as np")
    shape = g.shape(max_dims=3)
    dt = g.choice(
        (
            "float32",
            "float64",
            "int64",
            "bool",
            "float16",
            "int32",
            "uint8",
            "complex64",
            "object",
            ">f8",
            "<f4",
        )
    )
    base = f"np.arange({numel(shape) * 2}).astype({dt!r})"
    arr = g.choice(
        (
            f"{base}[:{numel(shape)}].reshape({lit(tuple(shape))})",
            f"{base}[::-2].reshape({lit(tuple(shape))})",
            f"{base}[::2].reshape({lit(tuple(shape))})",
            f"np.broadcast_to({base}[:1], {lit(tuple(shape))})",
            f"{base}[1:{numel(shape) + 1}].view('u1')",
            f"np.zeros({lit(tuple(shape))}, dtype={dt!r}, order='F')",
            f"np.lib.stride_tricks.as_strided({base}, {lit(tuple(shape))}, "
            f"{lit(tuple(0 for _ in shape))})",
        )
    )
    g.setup.append(f"n = {arr}")
    then = g.choice(
        (
            "",
            ".add_(1)",
            ".sum()",
            ".t()",
            ".clone()",
            ".numpy()",
            "[0]",
            ".requires_grad_()",
            ".exp()",
            ".mul_(2)",
        )
    )
    if name == "numpy_roundtrip":
        g.setup.append("a = torch.from_numpy(n)")
        g.setup.append("m = a.numpy(); del a")
        return f"torch.from_numpy(m){then}", ("inplace",)
    fn = "torch.from_numpy" if name == "from_numpy" else "torch.as_tensor"
    return f"{fn}(n){then}", ("inplace",)


@op("set_num_threads", "manual_seed")
def _global(g: Gen, name: str) -> Tuple[str, Tuple[str, ...]]:
    v = g.choice((0, 1, 2, 3, 4, 16))
    if g.p(0.15):  # rarely: values that can hang or exhaust the machine (each hang costs time)
        v = g.choice((-1, 2**31, 2**63, -(2**63), 2**64, 1.5, None))
    if name == "set_num_threads":
        a, _, _ = g.tensor(dtype="torch.float32", rg=True)
        g.setup.append(f"torch.set_num_threads({lit(v)})")
        return f"(({a}.exp() + {a}.sin()) * 2).sum() + torch.get_num_threads()", ()
    return f"torch.manual_seed({lit(v)})", ("nobw",)


# ----- the case strategy ----------------------------------------------------------------------


def make_case(draw: Callable[[Any], Any], name: Optional[str] = None) -> Dict[str, Any]:
    """One case: ``name`` (or an op drawn from all of them) with drawn inputs and arguments."""
    import hypothesis.strategies as st

    if name is None:
        name = draw(st.sampled_from(sorted(OPS)))
    g = Gen(draw)
    expr, flags = OPS[name](g)
    bw = None
    if "nobw" not in flags and g.p(0.85):
        bw = g.choice(("sum", "sum", "sum", "grad", "double"))
    return {"op": name, "setup": g.setup, "expr": expr, "flags": list(flags), "bw": bw}


def case_strategy(name: Optional[str] = None) -> Any:
    """A hypothesis strategy for cases (of op ``name``, or of any op)."""
    import hypothesis.strategies as st

    return st.composite(lambda draw: make_case(draw, name))()


def generate(n: int, seed: int, chunk: int = 40) -> List[Dict[str, Any]]:
    """``n`` cases, deterministic for ``seed``.

    Every op gets an equal share of the cases.  An op's cases are drawn from
    ``case_strategy(op)`` by hypothesis (``@given(st.data())`` under ``@seed``), at most ``chunk``
    examples per seeded run, which keeps hypothesis from spending a long run on mutations of a
    few early examples.  The cases are then shuffled by ``random.Random(seed)``.
    """
    import random

    import hypothesis
    from hypothesis import HealthCheck, Phase, settings
    from hypothesis import strategies as st

    rng = random.Random(seed)
    names = sorted(OPS)
    rng.shuffle(names)
    cases: List[Dict[str, Any]] = []

    def collector(name: str, count: int, out: List[Dict[str, Any]]) -> Callable[[], None]:
        strat = case_strategy(name)

        @settings(
            max_examples=count,
            database=None,
            deadline=None,
            derandomize=False,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @hypothesis.seed(rng.getrandbits(64))
        @hypothesis.given(st.data())
        def collect(data: Any) -> None:
            if len(out) < count:
                out.append(data.draw(strat))

        return collect

    for k, name in enumerate(names):
        want = n // len(names) + (k < n % len(names))
        got: List[Dict[str, Any]] = []
        stalls = 0
        while len(got) < want and stalls < 5:  # a run may stop early: start one with a new seed
            before = len(got)
            part: List[Dict[str, Any]] = []
            collector(name, min(chunk, want - len(got)), part)()
            got += part
            stalls = stalls + 1 if len(got) == before else 0
        cases += got
    rng.shuffle(cases)
    return cases


def reproducer(case: Dict[str, Any], phase: str = "fwd") -> str:
    """One line of Python that replays ``case`` (including backward when it failed there)."""
    expr = case["expr"]
    parts = [HEADER] + list(case["setup"])
    if phase == "bwd" and case.get("bw"):
        out = f"({expr})[0]" if "multi" in case["flags"] else f"({expr})"
        if case["bw"] == "grad":
            parts.append(f"_o = {out}; _o.backward(torch.ones_like(_o))")
        elif case["bw"] == "double":
            parts.append(
                f"(_g,) = torch.autograd.grad({out}.sum(), [a], create_graph=True, "
                "allow_unused=True); _g.sum().backward()"
            )
        else:
            parts.append(f"{out}.sum().backward()")
    else:
        parts.append(expr)
    return "; ".join(parts)


# ================================================================================================
# Child process: run cases, report progress and outcomes as lines on stdout
# ================================================================================================


def _snapshot(ns: Dict[str, Any], torch: Any) -> Dict[str, Any]:
    import numpy as np

    snap = {}
    for k, v in ns.items():
        if isinstance(v, torch.Tensor) and len(k) == 1:
            try:
                snap[k] = np.array(v.detach().numpy(), copy=True)
            except Exception:  # noqa: BLE001
                pass
    return snap


def _changed(before: Dict[str, Any], ns: Dict[str, Any]) -> List[str]:
    import numpy as np

    out = []
    for k, arr in before.items():
        try:
            now = ns[k].detach().numpy()
            same = now.shape == arr.shape and np.array_equal(
                now, arr, equal_nan=arr.dtype.kind == "f"
            )
        except Exception:  # noqa: BLE001
            same = False
        if not same:
            out.append(k)
    return out


def classify_exception(e: BaseException) -> Tuple[str, str]:
    tname = type(e).__name__
    msg = str(e).strip()
    detail = f"{tname}: {msg[:300]}"
    if tname == "PanicException":
        return "panic", detail
    if (tname, msg) in TORCH_OWN_ERRORS:
        return "error", detail
    if tname in CLEAN_ERRORS and not isinstance(e, RecursionError):
        return ("error" if msg else f"empty-message:{tname}"), detail
    return f"bad-exception:{tname}", detail


def run_case(case: Dict[str, Any], torch: Any, F: Any, emit: Callable[[str], None]) -> Dict:
    ns: Dict[str, Any] = {"torch": torch, "F": F}
    try:
        exec("\n".join(case["setup"]), ns)  # noqa: S102
    except BaseException as e:  # noqa: BLE001
        if isinstance(e, KeyboardInterrupt):
            raise
        outcome, detail = classify_exception(e)
        return {"outcome": outcome, "detail": "setup: " + detail, "phase": "setup"}
    before = _snapshot(ns, torch)
    inplace = "inplace" in case["flags"]
    phase = "fwd"
    try:
        out = eval(case["expr"], ns)  # noqa: S307
        if not inplace:
            bad = _changed(before, ns)
            if bad:
                return {
                    "outcome": "mutated-input",
                    "phase": phase,
                    "detail": f"out-of-place op changed {bad}",
                }
        if "multi" in case["flags"] and isinstance(out, (tuple, list)):
            out = out[0] if len(out) else None
        if (
            case.get("bw")
            and isinstance(out, torch.Tensor)
            and out.requires_grad
            and out.is_floating_point()
        ):
            phase = "bwd"
            emit("B")
            if case["bw"] == "grad":
                out.backward(torch.ones_like(out))
            elif case["bw"] == "double":
                a = ns.get("a")
                if isinstance(a, torch.Tensor) and a.requires_grad:
                    (g,) = torch.autograd.grad(out.sum(), [a], create_graph=True, allow_unused=True)
                    if g is not None and g.requires_grad:
                        g.sum().backward()
            else:
                out.sum().backward()
        return {"outcome": "ok", "detail": "", "phase": phase}
    except BaseException as e:  # noqa: BLE001
        if isinstance(e, KeyboardInterrupt):
            raise
        outcome, detail = classify_exception(e)
        if phase == "fwd" and outcome == "error":
            bad = _changed(before, ns)
            if bad:
                return {
                    "outcome": "mutated-input",
                    "phase": phase,
                    "detail": f"raised {detail[:120]} after changing {bad}",
                }
        return {"outcome": outcome, "detail": detail, "phase": phase}


def child_main() -> None:
    import warnings

    warnings.simplefilter("ignore")
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (MEM_LIMIT, MEM_LIMIT))
    except (ImportError, ValueError, OSError):
        pass
    sys.setrecursionlimit(10_000)
    out = sys.stdout
    try:
        import ferrograd as torch
        import ferrograd.nn.functional as F
    except Exception as e:  # noqa: BLE001  (e.g. the extension is being rebuilt right now)
        out.write(f"IMPORT-FAILED {type(e).__name__}: {e}\n")
        out.flush()
        sys.exit(IMPORT_FAILED)

    cases = json.load(sys.stdin)

    def emit(s: str) -> None:
        out.write(s + "\n")
        out.flush()

    threads = torch.get_num_threads()
    for i, case in enumerate(cases):
        emit(f"S {i}")
        torch.manual_seed(i)
        res = run_case(case, torch, F, lambda m, i=i: emit(f"{m} {i}"))
        emit("R " + json.dumps({"i": i, **res}))
        if torch.get_num_threads() != threads:  # undo global state a case changed
            torch.set_num_threads(threads)
    emit("DONE")


# ================================================================================================
# Parent: batches, crash isolation, replay and reporting
# ================================================================================================


def _signal_name(code: int) -> str:
    if code == -signal.SIGSEGV or code == -signal.SIGBUS:
        return "segfault"
    if code == -signal.SIGABRT:
        return "abort"
    if code == -signal.SIGKILL:
        return "killed"
    if code < 0:
        try:
            return f"signal:{signal.Signals(-code).name}"
        except ValueError:
            return f"signal:{-code}"
    return f"exit:{code}"


def run_child(cases: List[Dict[str, Any]], timeout: float) -> Tuple[List[Dict], Optional[Dict]]:
    """``_run_child``, retried while ferrograd cannot be imported (a rebuild in progress)."""
    for _ in range(IMPORT_RETRIES):
        res = _run_child(cases, timeout)
        if res is not None:
            return res
        time.sleep(2.0)
    raise RuntimeError("ferrograd could not be imported in a child process")


def _run_child(
    cases: List[Dict[str, Any]], timeout: float
) -> Optional[Tuple[List[Dict], Optional[Dict]]]:
    """Run ``cases`` in one child.  Returns (results of finished cases, crash or None); the crash
    dict names the index of the case that was running, its phase and the outcome."""
    payload = json.dumps(cases)
    env = dict(os.environ, PYTHONFAULTHANDLER="", RUST_BACKTRACE="0")
    with tempfile.TemporaryFile("w+") as fout, tempfile.TemporaryFile("w+") as ferr:
        proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--child"],
            stdin=subprocess.PIPE,
            stdout=fout,
            stderr=ferr,
            env=env,
            text=True,
            start_new_session=True,
        )
        try:
            proc.stdin.write(payload)  # type: ignore[union-attr]
            proc.stdin.close()  # type: ignore[union-attr]
        except BrokenPipeError:
            pass
        last_size, last_change, hung = -1, time.monotonic(), False
        startup = 30.0
        while proc.poll() is None:
            time.sleep(0.05)
            size = os.fstat(fout.fileno()).st_size
            now = time.monotonic()
            if size != last_size:
                last_size, last_change = size, now
                startup = 0.0
            elif now - last_change > timeout + startup:
                hung = True
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
                break
        fout.seek(0)
        lines = fout.read().splitlines()
        ferr.seek(0)
        err_tail = ferr.read()[-400:]
    if proc.returncode == IMPORT_FAILED and lines and lines[0].startswith("IMPORT-FAILED"):
        return None
    results: List[Dict] = []
    current, phase, done = None, "fwd", False
    for ln in lines:
        if ln.startswith("S "):
            current, phase = int(ln[2:]), "fwd"
        elif ln.startswith("B "):
            phase = "bwd"
        elif ln.startswith("R "):
            results.append(json.loads(ln[2:]))
            current = None
        elif ln == "DONE":
            done = True
    if done and not hung:
        return results, None
    outcome = "hang" if hung else _signal_name(proc.returncode)
    if current is None:  # died between cases (start-up, or while reporting)
        current = len(results)
        if current >= len(cases):
            return results, None
    msg = " ".join(err_tail.strip().splitlines()[-2:])[:200]
    return results, {"i": current, "outcome": outcome, "phase": phase, "detail": msg}


class Runner:
    def __init__(self, timeout: float, verbose: bool = False) -> None:
        self.timeout = timeout
        self.verbose = verbose
        self.records: List[Dict[str, Any]] = []

    def _record(self, case: Dict[str, Any], res: Dict[str, Any], **extra: Any) -> None:
        rec = {
            "op": case["op"],
            "outcome": res["outcome"],
            "detail": res.get("detail", ""),
            "phase": res.get("phase", "fwd"),
            "case": case,
            **extra,
        }
        self.records.append(rec)
        if self.verbose and rec["outcome"] not in ("ok", "error"):
            print(f"  BAD {rec['outcome']}: {reproducer(case, rec['phase'])}", flush=True)

    def run_batch(self, cases: List[Dict[str, Any]]) -> None:
        done_before: List[Dict[str, Any]] = []
        todo = list(cases)
        while todo:
            results, crash = run_child(todo, self.timeout)
            for r in results:
                self._record(todo[r["i"]], r)
            if crash is None:
                return
            k = crash["i"]
            self._isolate(done_before + todo[:k], todo[k], crash)
            done_before += todo[: k + 1]
            todo = todo[k + 1 :]

    def _isolate(self, before: List[Dict], suspect: Dict, crash: Dict) -> None:
        """Replay ``suspect`` alone in a fresh child; if it does not crash alone, find the
        shortest tail of ``before`` after which it does."""
        _, alone = run_child([suspect], self.timeout)
        if alone is not None:
            self._record(suspect, alone, isolated=True)
            return
        tail = before[-MAX_CONTEXT_BISECT:]
        _, again = run_child(tail + [suspect], self.timeout)
        if again is None or again["i"] != len(tail):
            self._record(suspect, crash, isolated=False, flaky=True)
            return
        lo, hi = 0, len(tail)  # tail[lo:] + suspect crashes; find the largest such lo
        while hi - lo > 1:
            mid = (lo + hi) // 2
            _, c = run_child(tail[mid:] + [suspect], self.timeout)
            if c is not None and c["i"] == len(tail) - mid:
                lo = mid
            else:
                hi = mid
        self._record(suspect, again, isolated=False, context=tail[lo:])


def replay_line(rec: Dict[str, Any]) -> str:
    line = reproducer(rec["case"], rec["phase"])
    ctx = rec.get("context")
    if ctx:
        pre = "; ".join("; ".join(c["setup"] + [c["expr"]]) for c in ctx)
        line = line.replace(HEADER + "; ", HEADER + "; " + pre + "; ", 1)
    return line


def signature(rec: Dict[str, Any]) -> Tuple[str, str, str]:
    """Dedup key of a BAD record: op, outcome, and the message with numbers elided."""
    detail = re.sub(r"-?\d+(\.\d+)?(e[-+]?\d+)?", "N", rec["detail"] or "")
    detail = re.sub(r"\[[^\]]*\]|\([^)]*\)", "", detail)[:80]
    if rec["outcome"] in ("hang", "abort", "segfault", "killed"):
        detail = ""
    return rec["op"], rec["outcome"], detail


def is_bad(outcome: str) -> bool:
    return outcome not in ("ok", "error")


def run(
    n: int,
    seed: int,
    *,
    jobs: int = 2,
    batch: int = 200,
    timeout: float = 10.0,
    verbose: bool = False,
    progress: bool = False,
    out: Any = sys.stdout,
) -> Dict[str, Any]:
    """Generate and run ``n`` cases; print a report to ``out``; return the summary."""
    t0 = time.monotonic()
    cases = generate(n, seed)
    t_gen = time.monotonic() - t0
    if progress:
        print(f"  generated {len(cases)} cases in {t_gen:.0f}s", file=sys.stderr, flush=True)
    runner = Runner(timeout, verbose)
    batches = [cases[i : i + batch] for i in range(0, len(cases), batch)]
    step = max(1, len(batches) // 10)

    def run_one(k: int) -> None:
        runner.run_batch(batches[k])
        if progress and (k + 1) % step == 0:
            nbad = sum(is_bad(r["outcome"]) for r in runner.records)
            print(
                f"  ... {len(runner.records)}/{len(cases)} cases, {nbad} BAD, "
                f"{time.monotonic() - t0:.0f}s",
                file=sys.stderr,
                flush=True,
            )

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        list(pool.map(run_one, range(len(batches))))
    elapsed = time.monotonic() - t0
    records = runner.records
    by_outcome = collections.Counter(r["outcome"] for r in records)
    per_op: Dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for r in records:
        per_op[r["op"]]["bad" if is_bad(r["outcome"]) else r["outcome"]] += 1
    bad: Dict[Tuple[str, str, str], Dict[str, Any]] = {}
    counts: collections.Counter = collections.Counter()
    for r in records:
        if is_bad(r["outcome"]):
            key = signature(r)
            counts[key] += 1
            line = replay_line(r)
            if key not in bad or len(line) < len(bad[key]["line"]):
                bad[key] = {"line": line, "rec": r}
    p = lambda *a: print(*a, file=out)  # noqa: E731
    p(
        f"ferrograd fuzz: seed={seed} cases={len(records)}/{n} ops={len(per_op)} "
        f"time={elapsed:.1f}s (generation {t_gen:.1f}s)"
    )
    p("outcomes: " + ", ".join(f"{k}={v}" for k, v in sorted(by_outcome.items())))
    p(f"{'op':<22}{'ok':>7}{'error':>7}{'bad':>5}")
    for name in sorted(per_op):
        c = per_op[name]
        p(f"{name:<22}{c['ok']:>7}{c['error']:>7}{c['bad']:>5}")
    causes: Dict[Tuple[str, str], List[Tuple[str, Dict[str, Any]]]] = collections.defaultdict(list)
    for key, v in bad.items():
        causes[key[1], key[2]].append((key[0], v))
    p(
        f"BAD outcomes: {sum(counts.values())} cases, {len(bad)} distinct (op, outcome, message), "
        f"{len(causes)} distinct (outcome, message)"
    )
    for (outcome, _), items in sorted(causes.items()):
        items.sort(key=lambda kv: len(kv[1]["line"]))
        ops = sorted({k for k, _ in items})
        detail = items[0][1]["rec"]["detail"][:100]
        p(f"  {outcome} in {len(ops)} op(s) [{' '.join(ops)}]: {detail}")
        p(f"      {items[0][1]['line']}")
    p("BAD outcomes by op:")
    for key in sorted(bad, key=lambda k: (k[1], k[0])):
        b = bad[key]
        r = b["rec"]
        note = "" if r.get("isolated", True) else " (only after the preceding statements)"
        if r.get("flaky"):
            note = " (did not reproduce in isolation)"
        p(f"[{r['outcome']}] {r['op']} x{counts[key]}{note}: {r['detail'][:160]}")
        p(f"    {b['line']}")
    return {
        "cases": len(records),
        "seconds": elapsed,
        "outcomes": dict(by_outcome),
        "bad": [
            {
                "op": k[0],
                "outcome": k[1],
                "detail": v["rec"]["detail"],
                "repro": v["line"],
                "count": counts[k],
            }
            for k, v in bad.items()
        ],
        "per_op": {k: dict(v) for k, v in per_op.items()},
    }


def replay(line: str, timeout: float) -> str:
    """Run one reproducer line in a fresh child and classify what happens."""
    case = {
        "op": "replay",
        "setup": [],
        "expr": "exec(" + repr(line) + ")",
        "flags": ["inplace"],
        "bw": None,
    }
    results, crash = run_child([case], timeout)
    if crash:
        return crash["outcome"]
    r = results[0]
    return f"{r['outcome']} {r['detail']}".strip()


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=3000, help="number of cases (default 3000)")
    ap.add_argument("--seed", type=int, default=0, help="hypothesis seed (default 0)")
    ap.add_argument("--jobs", type=int, default=2, help="child processes in parallel")
    ap.add_argument("--batch", type=int, default=200, help="cases per child process")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds without progress = hang")
    ap.add_argument("--json", help="also write the summary as JSON to this file")
    ap.add_argument("--replay", help="run one reproducer line in a child and print its outcome")
    ap.add_argument("--list-ops", action="store_true", help="print the fuzzed ops and exit")
    ap.add_argument("--show", type=int, default=0, help="print the first N generated cases")
    ap.add_argument("-v", "--verbose", action="store_true", help="print BAD cases as found")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child_main()
        return 0
    if args.list_ops:
        print(len(OPS), " ".join(sorted(OPS)))
        return 0
    if args.replay:
        print(replay(args.replay, args.timeout))
        return 0
    if args.show:
        for c in generate(args.show, args.seed):
            print(reproducer(c, "bwd"))
        return 0
    summary = run(
        args.cases,
        args.seed,
        jobs=args.jobs,
        batch=args.batch,
        timeout=args.timeout,
        verbose=args.verbose,
        progress=True,
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
    return 1 if summary["bad"] else 0


if __name__ == "__main__":
    sys.exit(main())
