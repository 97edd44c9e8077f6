"""NumPy, imported on first use.

Importing NumPy costs about 100 ms, two thirds of what ``import ferrograd`` would otherwise take;
autograd code that never converts data to or from arrays need not pay it.
"""

from __future__ import annotations

import sys
from typing import Any


class _LazyNumpy:
    """Stands in for the ``numpy`` module: the first attribute read imports it."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        import numpy

        value = getattr(numpy, name)
        # Kept on the class, so the next read of `np.<name>` is a plain attribute lookup and
        # not this import (0.6 µs a read: half of what `tensor(array)` cost); staticmethod so
        # a NumPy function is not bound to this object.
        setattr(_LazyNumpy, name, staticmethod(value))
        return value


np: Any = _LazyNumpy()


def is_numpy(x: Any, kind: str) -> bool:
    """Whether ``x`` is an instance of ``numpy.<kind>`` (``"ndarray"``, ``"integer"``, ...).

    Never imports NumPy: a NumPy array or scalar can only exist once something imported it.
    """
    npm = sys.modules.get("numpy")
    return npm is not None and isinstance(x, getattr(npm, kind))
