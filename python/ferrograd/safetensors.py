"""``.safetensors`` checkpoints, with the API of the ``safetensors.torch`` module: ``save``,
``save_file``, ``load``, ``load_file``, ``save_model``, ``load_model``.

The format is read and written by the crate through the format's reference implementation (the
Rust core of the ``safetensors`` package), so no extra Python package is needed. Files written
here load in ``safetensors.torch`` and the other way round. ferrograd stores float32, float64,
int64 and bool: on load, float16/bfloat16 tensors are widened to float32 and narrower or unsigned
integers to int64 (a deviation from torch, which keeps those dtypes)."""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Tuple, Union

from . import _C

Tensor = _C.Tensor

__all__ = ["load", "load_file", "load_model", "save", "save_file", "save_model"]

_PathLike = Union[str, "os.PathLike[str]"]


def _check(tensors: Dict[str, Tensor], metadata: Optional[Dict[str, str]]) -> List[Tuple[str, Any]]:
    """safetensors.torch's checks: a dict of str to tensors, no two sharing memory, each
    contiguous; metadata a dict of str to str."""
    if not isinstance(tensors, dict):
        raise ValueError(f"Expected a dict of [str, torch.Tensor] but received {type(tensors)}")
    invalid = {k for k, v in tensors.items() if not isinstance(v, Tensor)}
    if invalid:
        raise ValueError(
            f"Key `{sorted(invalid)[0]}` is invalid, expected torch.Tensor but received "
            f"{type(tensors[sorted(invalid)[0]])}"
        )
    if metadata is not None and not (
        isinstance(metadata, dict)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items())
    ):
        raise ValueError("metadata must be a dict of str to str")
    by_storage: Dict[int, List[str]] = {}
    for k, v in tensors.items():
        if v.numel() > 0:
            by_storage.setdefault(_storage_base(v), []).append(k)
    shared = [sorted(names) for names in by_storage.values() if len(names) > 1]
    if shared:
        raise RuntimeError(
            f"Some tensors share memory, this will lead to duplicate memory on disk and potential "
            f"differences when loading them again: {shared}.\nA potential way to correctly save "
            "your model is to use `save_model`.\nMore information at "
            "https://huggingface.co/docs/safetensors/torch_shared_tensors"
        )
    for k, v in tensors.items():
        if not v.is_contiguous():
            raise ValueError(
                f"You are trying to save a non contiguous tensor: `{k}` which is not allowed. It "
                "either means you are trying to save tensors which are reference of each other in "
                "which case it's recommended to save only the full tensors, and reslice at load "
                "time, or simply call `.contiguous()` on your tensor to pack it before saving."
            )
    return [(k, v.detach()) for k, v in tensors.items()]


def _storage_base(t: Tensor) -> int:
    """Address of the start of ``t``'s storage: equal for tensors that share memory."""
    return int(t.data_ptr() - t.storage_offset() * t.element_size())


def _check_device(device: Any) -> None:
    if str(device) != "cpu":
        raise RuntimeError(f"ferrograd runs on the CPU only; got device={device!r}")


def save(tensors: Dict[str, Tensor], metadata: Optional[Dict[str, str]] = None) -> bytes:
    """The ``.safetensors`` bytes of ``tensors`` (a dict of names to tensors)."""
    return _C._safetensors_save(_check(tensors, metadata), metadata)


def save_file(
    tensors: Dict[str, Tensor], filename: _PathLike, metadata: Optional[Dict[str, str]] = None
) -> None:
    """Writes ``tensors`` (a dict of names to tensors) to ``filename``."""
    _C._safetensors_save_file(_check(tensors, metadata), os.fspath(filename), metadata)


def load(data: bytes) -> Dict[str, Tensor]:
    """The tensors of ``.safetensors`` bytes, by name, in stored order."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"load() expects bytes, got {type(data).__name__}")
    tensors, _ = _C._safetensors_load(bytes(data))
    return dict(tensors)


def load_file(filename: _PathLike, device: Any = "cpu") -> Dict[str, Tensor]:
    """The tensors of the file ``filename``, by name, in stored order."""
    _check_device(device)
    with open(filename, "rb") as f:
        data = f.read()
    tensors, _ = _C._safetensors_load(data)
    return dict(tensors)


def _dedupe(state: Dict[str, Tensor]) -> Tuple[Dict[str, Tensor], List[str]]:
    """Keeps one name per shared storage (tied weights), as safetensors' ``save_model``."""
    kept: Dict[str, Tensor] = {}
    seen: Dict[Tuple[int, int, Tuple[int, ...]], str] = {}
    dropped: List[str] = []
    for name in sorted(state):
        t = state[name]
        key = (_storage_base(t), t.storage_offset(), tuple(t.shape))
        if t.numel() > 0 and key in seen:
            dropped.append(name)
            continue
        seen[key] = name
        kept[name] = t
    return kept, dropped


def save_model(
    model: Any,
    filename: _PathLike,
    metadata: Optional[Dict[str, str]] = None,
    force_contiguous: bool = False,
) -> None:
    """Saves ``model.state_dict()``, keeping one of each group of tied weights."""
    state, _ = _dedupe(model.state_dict())
    if force_contiguous:
        state = {k: v.contiguous() for k, v in state.items()}
    save_file(state, filename, metadata)


def load_model(
    model: Any, filename: _PathLike, strict: bool = True, device: Any = "cpu"
) -> Tuple[List[str], List[str]]:
    """Loads a file written by ``save_model`` into ``model``; returns ``(missing, unexpected)``
    keys (tied weights that ``save_model`` left out do not count as missing)."""
    state = load_file(filename, device=device)
    _, tied = _dedupe(model.state_dict())
    missing = sorted(set(model.state_dict()) - set(state) - set(tied))
    unexpected = sorted(set(state) - set(model.state_dict()))
    if strict and (missing or unexpected):
        parts = []
        if missing:
            parts.append("Missing key(s): " + ", ".join(f'"{k}"' for k in missing) + ".")
        if unexpected:
            parts.append("Unexpected key(s): " + ", ".join(f'"{k}"' for k in unexpected) + ".")
        raise RuntimeError(
            f"Error(s) in loading state_dict for {type(model).__name__}:\n\t" + "\n\t".join(parts)
        )
    model.load_state_dict(state, strict=False)
    return missing, unexpected
