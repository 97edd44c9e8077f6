"""The layers of ``ferrograd.nn``, one file per family as in torch."""

from __future__ import annotations

from .module import Module

__all__ = ["Module"]
