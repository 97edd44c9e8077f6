"""Padding layers: constant (and zero), reflection, replication and circular, in 1, 2 and 3
spatial dims, each a thin module over :func:`ferrograd.nn.functional.pad` as in torch."""

from __future__ import annotations

from typing import Any, Sequence, Tuple

from ... import _C
from .. import functional as F
from .module import Module

Tensor = _C.Tensor

__all__ = [
    "CircularPad1d",
    "CircularPad2d",
    "CircularPad3d",
    "ConstantPad1d",
    "ConstantPad2d",
    "ConstantPad3d",
    "ReflectionPad1d",
    "ReflectionPad2d",
    "ReflectionPad3d",
    "ReplicationPad1d",
    "ReplicationPad2d",
    "ReplicationPad3d",
    "ZeroPad1d",
    "ZeroPad2d",
    "ZeroPad3d",
]


def _sides(padding: Any, n: int) -> Tuple[int, ...]:
    """torch's ``_ntuple``: one int pads every side, a sequence is taken as given."""
    if isinstance(padding, Sequence):
        return tuple(padding)
    return (padding,) * n


class _ConstantPadNd(Module):
    _sides = 2

    def __init__(self, padding: Any, value: float) -> None:
        super().__init__()
        self.padding = _sides(padding, self._sides)
        self.value = value

    def forward(self, input: Tensor) -> Tensor:
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    """Pad the last dim with ``value`` (``padding``: int or ``(left, right)``)."""


class ConstantPad2d(_ConstantPadNd):
    """Pad the last two dims with ``value`` (``(left, right, top, bottom)``)."""

    _sides = 4


class ConstantPad3d(_ConstantPadNd):
    """Pad the last three dims with ``value`` (six sides)."""

    _sides = 6


class _ZeroPadNd(_ConstantPadNd):
    def __init__(self, padding: Any) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad1d(_ZeroPadNd):
    """Pad the last dim with zeros."""


class ZeroPad2d(_ZeroPadNd):
    """Pad the last two dims with zeros."""

    _sides = 4


class ZeroPad3d(_ZeroPadNd):
    """Pad the last three dims with zeros."""

    _sides = 6


class _ModePadNd(Module):
    _sides = 2
    _mode = "reflect"

    def __init__(self, padding: Any) -> None:
        super().__init__()
        self.padding = _sides(padding, self._sides)

    def forward(self, input: Tensor) -> Tensor:
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ReflectionPad1d(_ModePadNd):
    """Pad the last dim with its reflection (the edge itself not repeated)."""


class ReflectionPad2d(_ModePadNd):
    """Pad the last two dims by reflection."""

    _sides = 4


class ReflectionPad3d(_ModePadNd):
    """Pad the last three dims by reflection."""

    _sides = 6


class ReplicationPad1d(_ModePadNd):
    """Pad the last dim by repeating its edge value."""

    _mode = "replicate"


class ReplicationPad2d(_ModePadNd):
    """Pad the last two dims by replication."""

    _sides = 4
    _mode = "replicate"


class ReplicationPad3d(_ModePadNd):
    """Pad the last three dims by replication."""

    _sides = 6
    _mode = "replicate"


class _CircularPadNd(_ModePadNd):
    _mode = "circular"
    _dims = (2, 3)

    def forward(self, input: Tensor) -> Tensor:
        if input.dim() not in self._dims:
            a, b = self._dims
            raise ValueError(f"expected {a}D or {b}D input (got {input.dim()}D input)")
        return F.pad(input, self.padding, "circular")


class CircularPad1d(_CircularPadNd):
    """Pad the last dim by wrapping around."""


class CircularPad2d(_CircularPadNd):
    """Pad the last two dims by wrapping around."""

    _sides = 4
    _dims = (3, 4)


class CircularPad3d(_CircularPadNd):
    """Pad the last three dims by wrapping around."""

    _sides = 6
    _dims = (4, 5)
