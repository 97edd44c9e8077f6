"""``torch.compile`` and ``torch.compiler`` for scripts written for torch.

ferrograd runs eagerly: its kernels are compiled ahead of time in the crate, and there is no
graph capture to hand to a code generator. ``compile`` checks torch's arguments (with torch's
messages) and returns what runs the model as it is, in the shape torch returns it: a module
comes back inside an :class:`OptimizedModule` (so ``state_dict`` keys carry torch's
``_orig_mod.`` prefix and checkpoints load on either library), a function behind
``functools.wraps``.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Dict, Optional, Union

from ._compile_args import check_compile_args
from .nn.modules.module import Module


def compile(  # noqa: A001 - torch's name
    model: Optional[Callable[..., Any]] = None,
    *,
    fullgraph: bool = False,
    dynamic: Optional[bool] = None,
    backend: Union[str, Callable[..., Any], None] = None,
    mode: Optional[str] = None,
    options: Optional[Dict[str, Any]] = None,
    name: Optional[str] = None,
    disable: bool = False,
    recompile_limit: Optional[int] = None,
    isolate_recompiles: bool = False,
    dynamic_shapes: Any = None,
) -> Any:
    """``torch.compile``: ``model`` runs eagerly; a module comes back in an
    :class:`OptimizedModule`, a function wrapped. Without ``model``, a decorator."""
    if model is None:

        def decorate(model: Optional[Callable[..., Any]]) -> Any:
            if model is None:
                raise RuntimeError("Model can't be None")
            return compile(
                model,
                fullgraph=fullgraph,
                dynamic=dynamic,
                backend=backend,
                mode=mode,
                options=options,
                name=name,
                disable=disable,
                recompile_limit=recompile_limit,
                isolate_recompiles=isolate_recompiles,
                dynamic_shapes=dynamic_shapes,
            )

        return decorate
    check_compile_args(model, backend, mode, options)
    if disable:
        return model
    if isinstance(model, Module):
        return OptimizedModule(model)

    @functools.wraps(model)
    def compiled(*args: Any, **kwargs: Any) -> Any:
        return model(*args, **kwargs)

    return compiled


class OptimizedModule(Module):
    """What ``compile`` returns for a module: the module as its one child ``_orig_mod``,
    called through it (its hooks run), its other attributes read through."""

    def __init__(self, mod: Any) -> None:
        super().__init__()
        self._orig_mod = mod

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self._orig_mod(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            modules = self.__dict__.get("_modules", {})
            if "_orig_mod" not in modules:
                raise
            return getattr(modules["_orig_mod"], name)
