"""``ferrograd.cpu``: torch.cpu's device functions, and the tensor-memory counters that
``torch.cuda`` has for GPUs (``memory_allocated``, ``max_memory_allocated``,
``reset_peak_memory_stats``), here for the CPU where ferrograd's tensors live.

The counters see the bytes of the storages tensors hold (a NumPy array shared without a copy
counts while a tensor holds it), so they measure what a program keeps alive, e.g. the
activations saved for backward, whatever memory the allocator keeps cached for reuse.
"""

from __future__ import annotations

from typing import Any, Optional

from .. import _C


def is_available() -> bool:
    """True: ferrograd computes on the CPU."""
    return True


def device_count() -> int:
    """1, as ``torch.cpu.device_count``."""
    return 1


def current_device() -> str:
    """``"cpu"``, as ``torch.cpu.current_device``."""
    return "cpu"


def set_device(device: Any) -> None:
    """Does nothing, as ``torch.cpu.set_device``."""


def synchronize(device: Any = None) -> None:
    """Does nothing: CPU work has finished when an op returns."""


def memory_allocated(device: Optional[Any] = None) -> int:
    """Bytes of the storages live tensors hold now."""
    return _C._memory_allocated()


def max_memory_allocated(device: Optional[Any] = None) -> int:
    """The most bytes tensors owned at once since the start or the last
    :func:`reset_peak_memory_stats`."""
    return _C._max_memory_allocated()


def reset_peak_memory_stats(device: Optional[Any] = None) -> None:
    """Start :func:`max_memory_allocated` again from what tensors own now."""
    _C._reset_peak_memory_stats()


__all__ = [
    "current_device",
    "device_count",
    "is_available",
    "max_memory_allocated",
    "memory_allocated",
    "reset_peak_memory_stats",
    "set_device",
    "synchronize",
]


from . import amp  # noqa: E402,F401
