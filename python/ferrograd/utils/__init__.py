"""Utilities with torch's layout: ``ferrograd.utils.data``."""

from __future__ import annotations

from . import data

__all__ = ["data"]
