"""``LazyModuleMixin``: modules whose parameters get their shapes from the first input
(torch's ``nn/modules/lazy.py``). The parameters start as ``UninitializedParameter``; a forward
pre-hook calls ``initialize_parameters(*args)`` on the first call, then the module becomes
``cls_to_become`` (``LazyLinear`` becomes ``Linear``). Loading a state_dict materializes the
parameters with the checkpoint's shapes.

ferrograd cannot change an existing tensor's shape, so a materialized parameter is a new
object that replaces the placeholder in ``_parameters``/``_buffers`` (torch changes the
placeholder in place): an optimizer must be created after the first forward (or after
``load_state_dict``), which torch's documentation asks for too; ferrograd's optimizers refuse
uninitialized parameters instead of silently never updating them."""

from __future__ import annotations

import itertools
from typing import Any, Dict, List, Optional

from ..parameter import is_lazy
from .module import Module, RemovableHandle

__all__ = ["LazyModuleMixin"]


class LazyModuleMixin:
    """Mixin for modules that infer their parameters' shapes from the first input (put it
    before the module class: ``class LazyMyLayer(LazyModuleMixin, MyLayer)``).

    The subclass implements ``initialize_parameters(*args, **kwargs)``, which calls
    ``materialize(shape)`` on each uninitialized parameter and buffer; ``cls_to_become`` is the
    class the module takes once every parameter is initialized (None keeps the class)."""

    cls_to_become: Optional[type] = None
    _parameters: Dict[str, Any]
    _buffers: Dict[str, Any]
    _non_persistent_buffers_set: set
    _load_hook: RemovableHandle
    _initialize_hook: RemovableHandle

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        me: Module = self  # type: ignore[assignment]
        self._load_hook = me._register_load_state_dict_pre_hook(self._lazy_load_hook)
        self._initialize_hook = me.register_forward_pre_hook(
            self._infer_parameters, with_kwargs=True
        )

    def _take_materialized(self) -> None:
        """Put each placeholder that ``materialize`` has replaced by its new tensor."""
        for store in (self._parameters, self._buffers):
            for name, value in store.items():
                if is_lazy(value):
                    new = value.__dict__.get("_materialized")
                    if new is not None:
                        store[name] = new

    def __getattr__(self, name: str) -> Any:
        d = self.__dict__
        for store in ("_parameters", "_buffers"):
            if store in d and name in d[store]:
                value = d[store][name]
                if is_lazy(value) and value.__dict__.get("_materialized") is not None:
                    self._take_materialized()
                    value = d[store][name]
                return value
        return super().__getattr__(name)  # type: ignore[misc]

    def _save_to_state_dict(
        self, destination: Dict[str, Any], prefix: str, keep_vars: bool
    ) -> None:
        self._take_materialized()
        super()._save_to_state_dict(destination, prefix, keep_vars)  # type: ignore[misc]

    def _lazy_load_hook(
        self,
        state_dict: Dict[str, Any],
        prefix: str,
        local_metadata: Dict[str, Any],
        strict: bool,
        missing_keys: List[str],
        unexpected_keys: List[str],
        error_msgs: List[str],
    ) -> None:
        """Materialize each placeholder the state_dict has an initialized tensor for, with
        that tensor's shape (the values are copied by ``load_state_dict`` afterwards)."""
        from ...autograd.grad_mode import no_grad

        for name, param in itertools.chain(self._parameters.items(), self._buffers.items()):
            key = prefix + name
            if key in state_dict and param is not None and is_lazy(param):
                input_param = state_dict[key]
                if not is_lazy(input_param):
                    with no_grad():
                        param.materialize(input_param.shape)
        self._take_materialized()

    def initialize_parameters(self, *args: Any, **kwargs: Any) -> None:
        """Materialize the parameters from the first input (each lazy module's own)."""
        raise NotImplementedError(
            f"initialize_parameters is not implemented for {self.__class__.__name__}"
        )

    def has_uninitialized_params(self) -> bool:
        """Whether a parameter or buffer of this module is still a placeholder."""
        self._take_materialized()
        return any(
            is_lazy(t) for t in itertools.chain(self._parameters.values(), self._buffers.values())
        )

    def _infer_parameters(
        self, module: Any, args: Any, kwargs: Optional[Dict[str, Any]] = None
    ) -> None:
        """The forward pre-hook: initialize from the first input, then stop being lazy."""
        kwargs = kwargs if kwargs else {}
        module.initialize_parameters(*args, **kwargs)
        if module.has_uninitialized_params():
            raise RuntimeError(f"module {module._get_name()} has not been fully initialized")
        module._initialize_hook.remove()
        module._load_hook.remove()
        delattr(module, "_initialize_hook")
        delattr(module, "_load_hook")
        if module.cls_to_become is not None:
            module.__class__ = module.cls_to_become

    def _replicate_for_data_parallel(self) -> Any:
        raise RuntimeError(
            "Modules with uninitialized parameters can't be used with `DataParallel`. Run a "
            "dummy forward pass to correctly initialize the modules"
        )
