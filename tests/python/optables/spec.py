"""The format of an op-table entry.

Each entry says how to call an op through a library module (``ferrograd`` or, for parity,
``torch``) and which inputs to feed it; ``test_op_table.py`` then checks, for every shape set:
float64 gradients against central finite differences, second derivatives the same way, float32
forward against float64, non-contiguous inputs, and (when torch is installed) values,
gradients and Hessian-vector products against torch. Entries with a ``reference`` are also
checked against NumPy, entries with a ``derivative``/``derivative2`` against the closed-form
first/second derivative, and every entry's public op names go into the coverage list.

To add an op: one entry in the table file of its crate family (``unary.py`` for
``src/ops/unary.rs``, ``nn_activation.py`` for ``src/ops/nn/activation.rs``, ...).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, List, Optional, Sequence, Tuple

Shape = Tuple[int, ...]


@dataclass
class Arg:
    """One input. ``kind`` is "float" (random uniform in [low, high]), "int" (random in
    [0, int_high)), "bool" (random mask) or "const" (``value`` passed through as a Python
    object, e.g. a dim or a scalar)."""

    shape: Shape = ()
    kind: str = "float"
    low: float = -2.0
    high: float = 2.0
    int_high: int = 3
    value: Any = None
    requires_grad: bool = True


@dataclass
class OpSpec:
    """An op and the inputs to check it with.

    ``fn(lib, *inputs)`` calls the op through ``lib`` (``ferrograd`` or ``torch``) and returns a
    tensor or a tuple of tensors; non-float outputs are compared by value only.
    ``shape_sets`` lists extra argument lists (broadcasting, size-0/size-1 dims, scalars) checked
    like ``args``.
    """

    name: str
    fn: Callable[..., Any]
    args: List[Arg]
    shape_sets: List[List[Arg]] = field(default_factory=list)
    grad: bool = True
    gradgrad: bool = True
    torch_fn: Optional[Callable[..., Any]] = None
    atol: float = 1e-6
    rtol: float = 1e-5
    f32_rtol: float = 1e-4
    noncontiguous: bool = True
    torch_parity: bool = True
    # With torch parity: also the Hessian-vector product against torch's (off where the two
    # pick different values at a kink), and the output's grad_fn name against torch's.
    torch_gradgrad: bool = True
    torch_grad_fn: bool = False
    note: str = ""
    # NumPy forward on the inputs' float64 arrays (consts passed as they are): float64 outputs
    # must match it to 1e-12, float32 ones (of float32-rounded inputs) to 1e-5.
    reference: Optional[Callable[..., Any]] = None
    # The outputs are input elements moved around: compared with ``reference`` exactly.
    exact: bool = False
    # Closed-form gradient of ``out.sum()`` with respect to each differentiable input, from the
    # same arrays as ``reference``: one array (one such input) or a tuple (several).
    derivative: Optional[Callable[..., Any]] = None
    # Closed-form second derivative of a one-input elementwise op: the gradient of
    # ``grad(out.sum(), x, create_graph=True).sum()``.
    derivative2: Optional[Callable[..., Any]] = None
    # Other spellings checked against ``reference``/``derivative`` too: "function" calls
    # ``L.<op>(*inputs)``, "method" calls ``inputs[0].<op>(*inputs[1:])``, with ``<op>`` the
    # last name in ``op`` (else ``name``).
    forms: Tuple[str, ...] = ()
    # The public name(s) the entry exercises, space-separated (``linalg.norm``,
    # ``__getitem__``), when the name does not start with one: they make the coverage list.
    op: str = ""

    def all_arg_sets(self) -> Sequence[List[Arg]]:
        return [self.args, *self.shape_sets]
