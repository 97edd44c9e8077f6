"""``ferrograd.backends``: flags scripts set or query (``cudnn``, ``mps``); only the CPU exists."""

from __future__ import annotations

from types import SimpleNamespace

# Settable like torch's, read by nothing: there is no cuDNN.
cudnn = SimpleNamespace(
    deterministic=False, benchmark=False, enabled=True, is_available=lambda: False
)
mps = SimpleNamespace(is_available=lambda: False, is_built=lambda: False)
cuda = SimpleNamespace(is_built=lambda: False)

__all__ = ["cuda", "cudnn", "mps"]
