"""Utilities with torch's layout: ``ferrograd.utils.data`` and ``ferrograd.utils.checkpoint``."""

from __future__ import annotations

from . import checkpoint, data, dlpack

__all__ = ["checkpoint", "data", "dlpack"]
