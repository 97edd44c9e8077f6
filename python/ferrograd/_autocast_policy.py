"""The functions torch's CPU autocast runs in float32.

The wrappers of the ops on torch's CPU float32 list (losses, ``cdist``, ``trace``, the
``linalg`` factorisations) are decorated here: inside an enabled ``autocast`` region their
tensor arguments are cast to float32 (by the crate) before the op runs. The lower-precision
ops (the matrix products, ``linear``, convolutions, attention, ``prelu``) cast in their Rust
bindings instead (``src/python/autocast.rs``), which keeps a Python frame off those hot paths.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, TypeVar

from . import _C

_F = TypeVar("_F", bound=Callable[..., Any])


def float32(fn: _F) -> _F:
    """``fn`` runs on float32 tensors inside an autocast region."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if _C._is_autocast_enabled():
            args = tuple(_C._autocast_cast(list(args), True))
            if kwargs:
                kwargs = dict(zip(kwargs, _C._autocast_cast(list(kwargs.values()), True)))
        return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]
