"""Data-parallel wrappers: ``DistributedDataParallel`` (on ``ferrograd.distributed``)."""

from __future__ import annotations

from .distributed import DistributedDataParallel

__all__ = ["DistributedDataParallel"]
