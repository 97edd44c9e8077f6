"""Which functions torch's CPU autocast runs in lower precision and which in float32.

The wrappers of the ops on torch's CPU lists (``linear``, convolutions, attention, ``prelu``;
losses, ``cdist``, ``trace``, the ``linalg`` factorisations) are decorated here: inside an
enabled ``autocast`` region their tensor arguments are cast (by the crate, which caches the
casts of weights) before the op runs. The matrix products bound in Rust (``matmul``, ``mm``,
``bmm``, ``addmm``, ``baddbmm``, ``addbmm``, ``@``) cast in their bindings.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, TypeVar

from . import _C

_F = TypeVar("_F", bound=Callable[..., Any])


def _casting(fn: _F, to_float32: bool) -> _F:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if _C._is_autocast_enabled():
            args = tuple(_C._autocast_cast(list(args), to_float32))
            if kwargs:
                kwargs = dict(zip(kwargs, _C._autocast_cast(list(kwargs.values()), to_float32)))
        return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def lower_precision(fn: _F) -> _F:
    """``fn`` runs on tensors in the autocast dtype inside an autocast region."""
    return _casting(fn, False)


def float32(fn: _F) -> _F:
    """``fn`` runs on float32 tensors inside an autocast region."""
    return _casting(fn, True)
