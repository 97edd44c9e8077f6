"""The two shapes of the op families' function forms: ``_method(name)`` (``f(input, ...)`` is
``input.name(...)``) and ``_binary(name)`` (``f(input, other)`` with a Python number allowed as
``input``)."""

from __future__ import annotations

from typing import Any

from . import _C

Tensor = _C.Tensor


def _method(name: str) -> Any:
    def fn(input: Tensor, *args: Any, **kwargs: Any) -> Any:
        return getattr(input, name)(*args, **kwargs)

    fn.__name__ = name
    fn.__doc__ = f"``input.{name}(...)`` as a function."
    return fn


def _self_operand(input: Any, other: Any) -> Tensor:
    """A binary op's first operand as a tensor (a number takes ``other``'s dtype rules)."""
    if isinstance(input, Tensor):
        return input
    from ._creation import tensor

    return tensor(input) if not isinstance(other, Tensor) else other.new_tensor(input)


def _binary(name: str) -> Any:
    def fn(input: Any, other: Any) -> Any:
        return getattr(_self_operand(input, other), name)(other)

    fn.__name__ = name
    fn.__doc__ = f"``input.{name}(other)`` as a function, broadcasting."
    return fn


def _as_tensor(x: Any) -> Tensor:
    """``x`` itself when a tensor, else ``ferrograd.tensor(x)``."""
    if isinstance(x, Tensor):
        return x
    from ._creation import tensor

    return tensor(x)
