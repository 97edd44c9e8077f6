"""Containers: ``Sequential``, ``ModuleList``, ``ModuleDict``, ``ParameterList``,
``ParameterDict``, with torch's indexing, naming and repr."""

from __future__ import annotations

import operator
from collections import OrderedDict
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple, Union

from ... import _C
from ..parameter import Parameter
from .module import Module, _addindent

Tensor = _C.Tensor

__all__ = ["Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict"]


def _index(idx: int, size: int) -> int:
    idx = operator.index(idx)
    if not (-size <= idx < size):
        raise IndexError(f"index {idx} is out of range")
    return idx % size if size else idx


class Sequential(Module):
    """Modules called in order, each on the previous one's output."""

    def __init__(self, *args: Any) -> None:
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for key, module in args[0].items():
                self.add_module(key, module)
        else:
            for idx, module in enumerate(args):
                self.add_module(str(idx), module)

    def __getitem__(self, idx: Union[slice, int]) -> Any:
        if isinstance(idx, slice):
            return self.__class__(OrderedDict(list(self._modules.items())[idx]))
        keys = list(self._modules.keys())
        return self._modules[keys[_index(idx, len(keys))]]

    def __setitem__(self, idx: int, module: Module) -> None:
        keys = list(self._modules.keys())
        setattr(self, keys[_index(idx, len(keys))], module)

    def __delitem__(self, idx: Union[slice, int]) -> None:
        keys = list(self._modules.keys())
        if isinstance(idx, slice):
            for key in keys[idx]:
                delattr(self, key)
        else:
            delattr(self, keys[_index(idx, len(keys))])
        # torch renumbers the remaining modules so indexing stays positional
        items = list(self._modules.items())
        self._modules.clear()
        for i, (_, m) in enumerate(items):
            self._modules[str(i)] = m

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __add__(self, other: Sequential) -> Sequential:
        if not isinstance(other, Sequential):
            raise ValueError(
                "add operator supports only objects of Sequential class, but "
                f"{str(type(other))} is given."
            )
        ret = Sequential()
        for layer in self:
            ret.append(layer)
        for layer in other:
            ret.append(layer)
        return ret

    def append(self, module: Module) -> Sequential:
        """Add ``module`` at the end."""
        self.add_module(str(len(self)), module)
        return self

    def insert(self, index: int, module: Module) -> Sequential:
        """Insert ``module`` before position ``index``."""
        if not isinstance(module, Module):
            raise AssertionError(f"module should be of type: {Module}")
        n = len(self._modules)
        if not (-n <= index <= n):
            raise IndexError(f"Index out of range: {index}")
        if index < 0:
            index += n
        for i in range(n, index, -1):
            self._modules[str(i)] = self._modules[str(i - 1)]
        self._modules[str(index)] = module
        return self

    def extend(self, sequential: Iterable[Module]) -> Sequential:
        """Append every module of ``sequential``."""
        for layer in sequential:
            self.append(layer)
        return self

    def pop(self, key: Union[int, slice]) -> Module:
        v = self[key]
        del self[key]
        return v  # type: ignore[no-any-return]

    def forward(self, input: Any) -> Any:
        for module in self:
            input = module(input)
        return input


class ModuleList(Module):
    """A list of submodules, registered under their positions."""

    def __init__(self, modules: Optional[Iterable[Module]] = None) -> None:
        super().__init__()
        if modules is not None:
            self += modules

    def _get_abs_string_index(self, idx: int) -> str:
        return str(_index(idx, len(self)))

    def __getitem__(self, idx: Union[int, slice]) -> Any:
        if isinstance(idx, slice):
            return self.__class__(list(self._modules.values())[idx])
        return self._modules[self._get_abs_string_index(idx)]

    def __setitem__(self, idx: int, module: Module) -> None:
        setattr(self, self._get_abs_string_index(idx), module)

    def __delitem__(self, idx: Union[int, slice]) -> None:
        if isinstance(idx, slice):
            for k in range(len(self._modules))[idx]:
                delattr(self, str(k))
        else:
            delattr(self, self._get_abs_string_index(idx))
        remaining = list(self._modules.values())
        self._modules.clear()
        for i, m in enumerate(remaining):
            self._modules[str(i)] = m

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __iadd__(self, modules: Iterable[Module]) -> ModuleList:
        return self.extend(modules)

    def __add__(self, other: Iterable[Module]) -> ModuleList:
        combined = ModuleList()
        for i, module in enumerate(list(self) + list(other)):
            combined.add_module(str(i), module)
        return combined

    def append(self, module: Module) -> ModuleList:
        """Add ``module`` at the end."""
        self.add_module(str(len(self)), module)
        return self

    def insert(self, index: int, module: Module) -> None:
        """Insert ``module`` before position ``index``."""
        for i in range(len(self._modules), index, -1):
            self._modules[str(i)] = self._modules[str(i - 1)]
        self._modules[str(index)] = module

    def extend(self, modules: Iterable[Module]) -> ModuleList:
        """Append every module of ``modules``."""
        if not isinstance(modules, Iterable):
            raise TypeError(
                "ModuleList.extend should be called with an iterable, but got "
                + type(modules).__name__
            )
        offset = len(self)
        for i, module in enumerate(modules):
            self.add_module(str(offset + i), module)
        return self

    def pop(self, key: Union[int, slice]) -> Module:
        v = self[key]
        del self[key]
        return v  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        """Runs of identical modules print once, as ``(0-2): 3 x Linear(...)`` (torch's)."""
        list_of_reprs = [repr(item) for item in self]
        if len(list_of_reprs) == 0:
            return self._get_name() + "()"
        start_end_indices = [[0, 0]]
        repeated_blocks = [list_of_reprs[0]]
        for i, r in enumerate(list_of_reprs[1:], 1):
            if r == repeated_blocks[-1]:
                start_end_indices[-1][1] += 1
                continue
            start_end_indices.append([i, i])
            repeated_blocks.append(r)
        lines = []
        for (start_id, end_id), b in zip(start_end_indices, repeated_blocks):
            local_repr = f"({start_id}): {b}"
            if start_id != end_id:
                n = end_id - start_id + 1
                local_repr = f"({start_id}-{end_id}): {n} x {b}"
            lines.append(_addindent(local_repr, 2))
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"


class ModuleDict(Module):
    """A dict of submodules, registered under their keys (insertion order kept)."""

    def __init__(self, modules: Optional[Mapping[str, Module]] = None) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]  # type: ignore[no-any-return]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __contains__(self, key: str) -> bool:
        return key in self._modules

    def clear(self) -> None:
        self._modules.clear()

    def pop(self, key: str) -> Module:
        v = self[key]
        del self[key]
        return v

    def keys(self) -> Iterable[str]:
        return self._modules.keys()

    def items(self) -> Iterable[Tuple[str, Module]]:
        return self._modules.items()

    def values(self) -> Iterable[Module]:
        return self._modules.values()

    def update(self, modules: Any) -> None:
        """Add the ``(key, module)`` pairs of a mapping or an iterable of pairs."""
        if isinstance(modules, Mapping):
            for key, module in modules.items():
                self[key] = module
        else:
            for j, m in enumerate(modules):
                if len(m) != 2:
                    raise ValueError(
                        f"ModuleDict update sequence element #{j} has length {len(m)}; "
                        "2 is required"
                    )
                self[m[0]] = m[1]


def _param_repr(p: Tensor) -> str:
    size_str = "x".join(str(size) for size in p.shape)
    typename = "torch." + str(p.dtype).split(".")[-1]
    kind = "Parameter containing" if isinstance(p, Parameter) else "Tensor"
    return f"{kind}: [{typename} of size {size_str}]"


class ParameterList(Module):
    """A list of parameters, registered under their positions (tensors become Parameters)."""

    def __init__(self, values: Optional[Iterable[Any]] = None) -> None:
        super().__init__()
        self._size = 0
        if values is not None:
            self += values

    def __getitem__(self, idx: Union[int, slice]) -> Any:
        if isinstance(idx, slice):
            return self.__class__([self[i] for i in range(len(self))[idx]])
        return getattr(self, str(_index(idx, len(self))))

    def __setitem__(self, idx: int, param: Any) -> None:
        idx = _index(idx, len(self))
        if isinstance(param, Tensor) and not isinstance(param, Parameter):
            param = Parameter(param)
        setattr(self, str(idx), param)

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[Any]:
        return iter(self[i] for i in range(len(self)))

    def __iadd__(self, parameters: Iterable[Any]) -> ParameterList:
        return self.extend(parameters)

    def append(self, value: Any) -> ParameterList:
        """Add ``value`` at the end (a tensor is made a Parameter)."""
        new_idx = len(self)
        self._size += 1
        self[new_idx] = value
        return self

    def extend(self, values: Iterable[Any]) -> ParameterList:
        """Append every value."""
        for value in values:
            self.append(value)
        return self

    def extra_repr(self) -> str:
        child_lines = []
        for k, p in enumerate(self):
            if isinstance(p, Tensor):
                child_lines.append(f"  ({k}): {_param_repr(p)}")
            else:
                child_lines.append(f"  ({k}): Object of type: {type(p).__name__}")
        return "\n".join(child_lines)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("ParameterList should not be called.")


class ParameterDict(Module):
    """A dict of parameters, registered under their keys (tensors become Parameters)."""

    def __init__(self, parameters: Any = None) -> None:
        super().__init__()
        self._keys: Dict[str, None] = {}
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key: str) -> Any:
        return getattr(self, key)

    def __setitem__(self, key: str, value: Any) -> None:
        self._keys[key] = None
        if isinstance(value, Tensor) and not isinstance(value, Parameter):
            value = Parameter(value)
        setattr(self, key, value)

    def __delitem__(self, key: str) -> None:
        del self._keys[key]
        delattr(self, key)

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def keys(self) -> Iterable[str]:
        return self._keys.keys()

    def items(self) -> Iterable[Tuple[str, Any]]:
        return ((k, self[k]) for k in self._keys)

    def values(self) -> Iterable[Any]:
        return (self[k] for k in self._keys)

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self else default

    def pop(self, key: str) -> Any:
        v = self[key]
        del self[key]
        return v

    def clear(self) -> None:
        for k in list(self._keys):
            del self[k]

    def update(self, parameters: Any) -> None:
        """Add the ``(key, value)`` pairs of a mapping or an iterable of pairs."""
        items: List[Tuple[str, Any]]
        if isinstance(parameters, (OrderedDict, ParameterDict)):
            items = list(parameters.items())
        elif isinstance(parameters, Mapping):
            items = sorted(parameters.items())
        else:
            items = [tuple(p) for p in parameters]  # type: ignore[misc]
        for key, value in items:
            self[key] = value

    def extra_repr(self) -> str:
        child_lines = []
        for k, p in self.items():
            if isinstance(p, Tensor):
                child_lines.append(f"  ({k}): {_param_repr(p)}")
            else:
                child_lines.append(f"  ({k}): Object of type: {type(p).__name__}")
        return "\n".join(child_lines)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("ParameterDict should not be called.")
