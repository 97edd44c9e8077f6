"""``from_dlpack``: a tensor sharing memory with any DLPack producer (NumPy, torch, JAX, ...).

The protocol's negotiation lives here (which keyword arguments the producer's ``__dlpack__``
takes, as torch tries them); reading the capsule is ``_C._from_dlpack_capsule``."""

from __future__ import annotations

from typing import Any, Dict, Optional

from . import _C
from ._device import check_device

Tensor = _C.Tensor

# kDLCPU, and pinned host memory (kDLCUDAHost, kDLROCMHost), which the CPU reads.
_CPU_READABLE = (1, 3, 11)


def from_dlpack(ext_tensor: Any, *, device: Any = None, copy: Optional[bool] = None) -> Tensor:
    """A tensor sharing memory with ``ext_tensor``, an object with ``__dlpack__`` and
    ``__dlpack_device__`` (a NumPy array, a torch or JAX tensor, ...) or, as in older code, a
    DLPack capsule. Writes through either side are seen by the other. ``copy=True`` copies.

    The memory stays alive, and the producer's deleter uncalled, while any tensor viewing it
    lives. Only CPU memory can be read: a tensor on another device raises ``BufferError``."""
    check_device(device)
    if isinstance(ext_tensor, Tensor):
        if ext_tensor.requires_grad:
            raise BufferError("Can't export tensors that require gradient, use tensor.detach()")
        # The same storage and version counter, as the capsule round trip gives.
        return ext_tensor.detach().clone() if copy else ext_tensor.detach()
    if not hasattr(ext_tensor, "__dlpack__"):
        if copy is not None:
            raise AssertionError(
                "device and copy kwargs not supported when ext_tensor is already a DLPack capsule."
            )
        return _C._from_dlpack_capsule(ext_tensor)
    kind, index = ext_tensor.__dlpack_device__()
    if int(kind) not in _CPU_READABLE:
        raise BufferError(
            f"from_dlpack: the tensor is on DLPack device ({int(kind)}, {int(index)}), and "
            "ferrograd reads CPU memory only; move it to the CPU first"
        )
    # Producers written before DLPack 1.0 (or the array API's 2023 revision) reject some of
    # these keywords with TypeError: drop them one by one, as torch does.
    full: Dict[str, Any] = {"max_version": (1, 0)}
    if copy is not None:
        full["copy"] = copy
    attempts = [full, {k: v for k, v in full.items() if k != "max_version"}, {}]
    for i, kwargs in enumerate(attempts):
        try:
            capsule = ext_tensor.__dlpack__(**kwargs)
            break
        except TypeError:
            if i == len(attempts) - 1:
                raise
    t = _C._from_dlpack_capsule(capsule)
    if copy and "copy" not in kwargs:
        t = t.clone()
    return t
