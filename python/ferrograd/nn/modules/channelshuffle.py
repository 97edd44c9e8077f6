"""``ChannelShuffle``: a face of ``F.channel_shuffle``."""

from __future__ import annotations

from ... import _C
from .. import functional as F
from .module import Module

Tensor = _C.Tensor

__all__ = ["ChannelShuffle"]


class ChannelShuffle(Module):
    """Split the channels of ``(N, C, *)`` into ``groups`` and interleave them."""

    __constants__ = ["groups"]

    def __init__(self, groups: int) -> None:
        super().__init__()
        self.groups = groups

    def forward(self, input: Tensor) -> Tensor:
        return F.channel_shuffle(input, self.groups)

    def extra_repr(self) -> str:
        return f"groups={self.groups}"
