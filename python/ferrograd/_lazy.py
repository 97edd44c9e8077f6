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

        return getattr(numpy, name)


np: Any = _LazyNumpy()


def loaded_numpy() -> Any:
    """The ``numpy`` module if something imported it already, else None.

    For type checks: a NumPy array or scalar can only exist once NumPy is imported, so a value
    is never one of them when this is None.
    """
    return sys.modules.get("numpy")
