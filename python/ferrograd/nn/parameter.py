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


def _uninitialized_use(cls_name: str, what: str) -> ValueError:
    return ValueError(
        f"Attempted to use an uninitialized parameter in {what}. This error happens when you "
        "are using a `LazyModule` or explicitly manipulating "
        f"`torch.nn.parameter.{cls_name}` objects. When using LazyModules Call `forward` with "
        "a dummy batch to initialize the parameters before calling torch functions"
    )


def _blocked(name: str) -> Any:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise _uninitialized_use(type(self).__name__, repr(getattr(Tensor, name)))

    method.__name__ = name
    method.__doc__ = "Raises: the tensor has no data until it is materialized."
    return method


class UninitializedTensorMixin:
    """A parameter or buffer whose shape is not known yet (lazy modules): it has no data, its
    ``shape`` raises, and using it in the common tensor operations raises torch's ValueError.

    ferrograd cannot give an existing tensor new storage of another shape, so
    :meth:`materialize` cannot turn this very object into a Parameter as torch does: it creates
    the new tensor and records it, and ``LazyModuleMixin`` puts it in the module's place."""

    cls_to_become: Any = None
    _materialized: Optional[Tensor]

    def materialize(self, shape: Any, device: Any = None, dtype: Any = None) -> None:
        """Create the tensor of ``shape`` (and ``dtype``, default this one's) that replaces this
        placeholder in its module (see the class doc)."""
        from .._creation import empty

        tensor: Tensor = self  # type: ignore[assignment]
        if dtype is None:
            dtype = tensor.dtype
        data = empty(tuple(shape), dtype=dtype, device=device)
        new: Tensor
        if self.cls_to_become is Parameter:
            new = Parameter(data, tensor.requires_grad)
        else:
            new = data.requires_grad_(tensor.requires_grad) if tensor.requires_grad else data
        self._materialized = new

    @property
    def shape(self) -> Any:
        """Raises: an uninitialized tensor has no shape yet."""
        raise RuntimeError(
            "Can't access the shape of an uninitialized parameter or buffer. This error usually "
            "happens in `load_state_dict` when trying to load an uninitialized parameter into "
            "an initialized one. Call `forward` to initialize the parameters before accessing "
            "their attributes."
        )

    def share_memory_(self) -> Any:
        """Raises: nothing to share yet."""
        raise RuntimeError(
            "Can't share memory on an uninitialized parameter or buffer. Call `forward` to "
            "initialize the parameters before calling `module.share_memory()`."
        )

    def __repr__(self) -> str:
        return f"<{self.__class__.__name__}>"

    __str__ = __repr__

    def __reduce_ex__(self, protocol: Any) -> Any:
        tensor: Tensor = self  # type: ignore[assignment]
        persistent = getattr(self, "persistent", True)
        dtype_name = str(tensor.dtype).rsplit(".", 1)[-1]
        return (_rebuild_uninitialized, (type(self), tensor.requires_grad, dtype_name, persistent))


# The operations that read an uninitialized tensor's data or shape (torch blocks every function
# but a few conversions through __torch_function__, which ferrograd does not have).
for _name in (
    "numel dim view reshape expand t mm matmul mv sum mean item tolist numpy detach clone "
    "contiguous abs neg exp log sqrt pow norm fill_ zero_ normal_ uniform_ add_ sub_ mul_ div_ "
    "__add__ __radd__ __sub__ __rsub__ __mul__ __rmul__ __truediv__ __rtruediv__ __matmul__ "
    "__rmatmul__ __neg__ __pow__ __getitem__ __setitem__ __len__ __iter__ __float__ __int__ "
    "__bool__ __array__"
).split():
    if hasattr(Tensor, _name):
        setattr(UninitializedTensorMixin, _name, _blocked(_name))


class UninitializedParameter(UninitializedTensorMixin, Parameter):
    """A Parameter of a lazy module, before the first forward gives it a shape."""

    cls_to_become = Parameter

    def __new__(  # type: ignore[misc]
        cls, requires_grad: bool = True, device: Any = None, dtype: Any = None
    ) -> UninitializedParameter:
        from .._creation import empty

        data = empty(0, dtype=dtype, device=device)
        return Tensor._make_subclass(cls, data, requires_grad)

    def __init__(self, requires_grad: bool = True, device: Any = None, dtype: Any = None) -> None:
        """Everything happens in ``__new__``."""

    def __deepcopy__(self, memo: Dict[int, Any]) -> UninitializedParameter:
        if id(self) in memo:
            return memo[id(self)]  # type: ignore[no-any-return]
        result = type(self)(self.requires_grad, None, self.dtype)
        memo[id(self)] = result
        return result


class UninitializedBuffer(UninitializedTensorMixin, Tensor):
    """A buffer of a lazy module (e.g. ``running_mean``), before the first forward."""

    cls_to_become = Tensor

    def __new__(  # type: ignore[misc]
        cls,
        requires_grad: bool = False,
        device: Any = None,
        dtype: Any = None,
        persistent: bool = True,
    ) -> UninitializedBuffer:
        from .._creation import empty

        data = empty(0, dtype=dtype, device=device)
        ret = Tensor._make_subclass(cls, data, requires_grad)
        ret.persistent = persistent
        ret._is_buffer = True
        return ret

    persistent: bool
    _is_buffer: bool

    def __init__(
        self,
        requires_grad: bool = False,
        device: Any = None,
        dtype: Any = None,
        persistent: bool = True,
    ) -> None:
        """Everything happens in ``__new__``."""

    def __deepcopy__(self, memo: Dict[int, Any]) -> UninitializedBuffer:
        if id(self) in memo:
            return memo[id(self)]  # type: ignore[no-any-return]
        result = type(self)(self.requires_grad, None, self.dtype, self.persistent)
        memo[id(self)] = result
        return result


def is_lazy(param: Any) -> bool:
    """Whether ``param`` is an ``UninitializedParameter`` or ``UninitializedBuffer``."""
    return isinstance(param, UninitializedTensorMixin)


def _rebuild_uninitialized(cls: Any, requires_grad: bool, dtype_name: str, persistent: bool) -> Any:
    from .. import _dtypes

    dtype = getattr(_dtypes, dtype_name)
    if cls is UninitializedBuffer:
        return cls(requires_grad, None, dtype, persistent)
    return cls(requires_grad, None, dtype)
