"""Calling a module with parameters and buffers swapped in from a dict
(``torch.nn.utils.stateless``). ``functional_call`` here is the deprecated alias of
:func:`ferrograd.func.functional_call`; both run through ``_functional_call``.
"""

from __future__ import annotations

import contextlib
import warnings
from typing import Any, Dict, Iterator, List, Optional, Set, Tuple

from ... import _C
from ..modules.module import Module

__all__ = ["functional_call"]

Tensor = _C.Tensor
_MISSING: Any = object()


def _submodule(root: Module, path: str, memo: Dict[str, Module]) -> Module:
    """The submodule at dotted ``path`` (the root for ""), cached in ``memo``."""
    if not path:
        return root
    if path in memo:
        return memo[path]
    prefix, dot, attr = path.rpartition(".")
    parent = _submodule(root, prefix, memo) if dot else root
    try:
        sub = getattr(parent, attr)
    except AttributeError as ex:
        raise AttributeError(f"{parent._get_name()} has no attribute `{attr}`") from ex
    if not isinstance(sub, Module):
        raise TypeError(f"submodule `{path}`: {sub} is not an instance of torch.nn.Module")
    memo[path] = sub
    return sub


def _swap_tensor(module: Module, name: str, tensor: Any) -> Any:
    """Put ``tensor`` (``_MISSING``: remove) at ``module.name``, in ``_parameters`` or
    ``_buffers`` when the name is there (no Parameter check, as torch); return what was
    there (``_MISSING`` if nothing)."""
    if tensor is not _MISSING and tensor is not None and not isinstance(tensor, Tensor):
        raise TypeError(f"{tensor} is not an instance of torch.Tensor")
    for store in (module._parameters, module._buffers):
        if name in store:
            orig = store[name]
            if tensor is _MISSING:
                del store[name]
            else:
                store[name] = tensor
            return orig
    orig = getattr(module, name) if hasattr(module, name) else _MISSING
    if orig is not _MISSING and orig is not None and not isinstance(orig, Tensor):
        raise TypeError(f"attribute `{name}`: {orig} is not an instance of torch.Tensor")
    if tensor is not _MISSING:
        setattr(module, name, tensor)
    elif hasattr(module, name):
        delattr(module, name)
    return orig


def _swap_tensors_dict(
    root: Module, named: Dict[str, Any], memo: Dict[str, Module]
) -> Dict[str, Any]:
    """Swap every ``named`` tensor in; the originals by name. On an error the ones already
    swapped are swapped back before it propagates."""
    orig: Dict[str, Any] = {}
    try:
        for name, tensor in named.items():
            prefix, _, attr = name.rpartition(".")
            orig[name] = _swap_tensor(_submodule(root, prefix, memo), attr, tensor)
    except Exception:
        for name, tensor in orig.items():
            prefix, _, attr = name.rpartition(".")
            _swap_tensor(_submodule(root, prefix, memo), attr, tensor)
        raise
    return orig


def _untie_named_tensors_map(
    module: Module, parameters_and_buffers: Dict[str, Any]
) -> Dict[str, Any]:
    """``parameters_and_buffers`` plus, for every given name of a tied tensor, the other names
    of that tensor with the same value. ValueError when tied names got different values."""
    names_of: Dict[int, Set[str]] = {}
    for name, tensor in list(module.named_parameters(remove_duplicate=False)) + list(
        module.named_buffers(remove_duplicate=False)
    ):
        names_of.setdefault(id(tensor), set()).add(name)
    tied: Dict[str, Set[str]] = {}
    for names in names_of.values():
        if len(names) > 1:
            for name in names:
                tied[name] = names
    given = [name for name in parameters_and_buffers if name in tied]
    for name in given:
        group = tied[name]
        values = {id(parameters_and_buffers[n]) for n in group if n in parameters_and_buffers}
        if len(values) > 1:
            raise ValueError(
                f"functional_call got multiple values for keys {sorted(group)}, which are tied. "
                "Consider using tie_weights=False"
            )
    untied = dict(parameters_and_buffers)
    for name in given:
        for other in tied[name]:
            untied[other] = parameters_and_buffers[name]
    return untied


def _check_keys(module: Module, keys: Any) -> Tuple[List[str], List[str]]:
    keys = set(keys)
    valid = {n for n, _ in module.named_parameters(remove_duplicate=False)}
    valid |= {n for n, _ in module.named_buffers(remove_duplicate=False)}
    return sorted(valid - keys), sorted(keys - valid)


@contextlib.contextmanager
def _reparametrize_module(
    module: Module,
    parameters_and_buffers: Dict[str, Any],
    tie_weights: bool = False,
    strict: bool = False,
) -> Iterator[None]:
    """Within the block ``module`` sees ``parameters_and_buffers`` in place of its own; its
    own are back afterwards, also when the block raises."""
    untied = (
        _untie_named_tensors_map(module, parameters_and_buffers)
        if tie_weights
        else parameters_and_buffers
    )
    if strict:
        missing, unexpected = _check_keys(module, untied)
        msgs = []
        if unexpected:
            msgs.append(f"Unexpected key(s): {', '.join(map(repr, unexpected))}.")
        if missing:
            msgs.append(f"Missing key(s): {', '.join(map(repr, missing))}.")
        if msgs:
            raise RuntimeError(
                "Error(s) in reparametrizing for {}:\n\t{}".format(
                    module._get_name(), "\n\t".join(msgs)
                )
            )
    memo: Dict[str, Module] = {}
    orig: Dict[str, Any] = {}
    try:
        orig = _swap_tensors_dict(module, untied, memo)
        yield
    finally:
        current = _swap_tensors_dict(module, orig, memo)
        # A module that assigned to its own parameters/buffers in forward leaves the new tensors
        # in the caller's dict, as torch does.
        parameters_and_buffers.update(
            {
                k: current[k]
                for k in parameters_and_buffers
                if k in current and current[k] is not _MISSING
            }
        )


def _functional_call(
    module: Module,
    parameters_and_buffers: Dict[str, Any],
    args: Any,
    kwargs: Optional[Dict[str, Any]],
    tie_weights: bool,
    strict: bool,
) -> Any:
    """The call both ``functional_call``s make: ``args`` None is no argument, a non-tuple is
    one argument."""
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    with _reparametrize_module(module, parameters_and_buffers, tie_weights, strict):
        return module(*args, **(kwargs or {}))


def functional_call(
    module: Module,
    parameters_and_buffers: Dict[str, Any],
    args: Any = None,
    kwargs: Optional[Dict[str, Any]] = None,
    *,
    tie_weights: bool = True,
    strict: bool = False,
) -> Any:
    """Deprecated (FutureWarning): :func:`ferrograd.func.functional_call` with one dict."""
    warnings.warn(
        "`torch.nn.utils.stateless.functional_call` is deprecated as of PyTorch 2.0 and will be "
        "removed in a future version of PyTorch. Please use `torch.func.functional_call` "
        "instead which is a drop-in replacement.",
        FutureWarning,
        stacklevel=2,
    )
    return _functional_call(module, parameters_and_buffers, args, kwargs, tie_weights, strict)
