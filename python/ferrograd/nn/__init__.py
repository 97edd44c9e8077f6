"""Neural-network building blocks. Today: ``ferrograd.nn.functional`` (import it as
``import ferrograd.nn.functional as F``)."""

from __future__ import annotations

from . import functional

__all__ = ["functional"]
