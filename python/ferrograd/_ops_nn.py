"""Makes ``ferrograd.nn`` (and ``ferrograd.nn.functional``) available after ``import ferrograd``,
as ``torch.nn`` is after ``import torch``."""

from __future__ import annotations

from . import nn

__all__ = ["nn"]
