"""The format of an op-table entry.

Each entry says how to call an op through a library module (``ferrograd`` or, for parity,
``torch``) and which inputs to feed it; ``test_op_table.py`` then checks, for every shape set:
float64 gradients against central finite differences, second derivatives the same way, float32
forward against float64, non-contiguous inputs, and (when torch is installed) values and
gradients against torch.
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
    note: str = ""

    def all_arg_sets(self) -> Sequence[List[Arg]]:
        return [self.args, *self.shape_sets]
