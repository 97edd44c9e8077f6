"""``ferrograd.cuda``: there is no GPU backend, so scripts that ask take the CPU path."""

from __future__ import annotations

from typing import Any


def is_available() -> bool:
    """False: ferrograd computes on the CPU."""
    return False


def device_count() -> int:
    return 0


def manual_seed(seed: int) -> None:
    """Does nothing, as torch's does without CUDA."""


def manual_seed_all(seed: int) -> None:
    """Does nothing, as torch's does without CUDA."""


def current_device() -> Any:
    raise RuntimeError("ferrograd has no CUDA backend; torch.cuda.is_available() is False")


def synchronize(device: Any = None) -> None:
    raise RuntimeError("ferrograd has no CUDA backend; torch.cuda.is_available() is False")


from . import amp  # noqa: E402,F401
