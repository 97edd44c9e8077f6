"""``nn.Parameter``: a leaf tensor that ``nn.Module`` registers when assigned as an attribute."""

from __future__ import annotations

from typing import Any, Dict, Optional

from .. import _C

Tensor = _C.Tensor


class Parameter(Tensor):
    """A tensor that is a module parameter. It shares ``data``'s storage and is the very object
    the engine hands back for its tensor, so ``p.grad`` accumulates into it."""

    def __new__(cls, data: Optional[Tensor] = None, requires_grad: bool = True) -> Parameter:
        if data is None:
            data = _C._full((0,), 0.0, _C.float32)
        return Tensor._make_subclass(cls, data, requires_grad)

    def __init__(self, data: Optional[Tensor] = None, requires_grad: bool = True) -> None:
        """Everything happens in ``__new__`` (the object is allocated by the Rust class)."""

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    __str__ = __repr__

    @property
    def data(self) -> Tensor:
        """A detached alias (shares storage and version counter)."""
        return self.detach()

    @data.setter
    def data(self, value: Tensor) -> None:
        """``p.data = t`` / ``p.data -= x``: copied in place, so identity and ``.grad`` stay;
        torch swaps the storage, which also allows another shape or dtype (not supported)."""
        if tuple(value.shape) != tuple(self.shape) or value.dtype != self.dtype:
            raise RuntimeError(
                "ferrograd: assigning .data of another shape or dtype to a Parameter is not "
                f"supported (got {tuple(value.shape)} {value.dtype}, have {tuple(self.shape)} "
                f"{self.dtype})"
            )
        from ..autograd.grad_mode import no_grad

        with no_grad():
            self.copy_(value)

    def __deepcopy__(self, memo: Dict[int, Any]) -> Parameter:
        if id(self) in memo:
            return memo[id(self)]  # type: ignore[no-any-return]
        result = type(self)(self.detach().clone(), self.requires_grad)
        memo[id(self)] = result
        return result

    def __reduce_ex__(self, protocol: Any) -> Any:
        # A Parameter pickles as one (a plain tensor's reduce would rebuild a Tensor).
        return (_rebuild_parameter, (self.detach().clone(), self.requires_grad))


def _rebuild_parameter(data: Any, requires_grad: bool) -> Parameter:
    return Parameter(data, requires_grad)
