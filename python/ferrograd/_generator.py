"""``Generator`` and ``randperm``: seeded randomness for shuffling and splitting data."""

from __future__ import annotations

import os
from typing import Any, Optional

from . import _C
from ._dtypes import check_dtype, int64
from ._lazy import np

Tensor = _C.Tensor

_MASK = (1 << 64) - 1
# torch's default seed for a new Generator.
_DEFAULT_SEED = 67280421310721


def _mix(x: int) -> int:
    """splitmix64: well-spread 64-bit seeds from consecutive counters."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


class Generator:
    """A random stream of its own (torch's ``Generator``), for ``randperm``, ``DataLoader``
    shuffling and ``random_split``: the same seed gives the same draws. The numbers differ from
    torch's (another algorithm), as ``manual_seed`` does for the global generator."""

    def __init__(self, device: Any = "cpu") -> None:
        if str(device) != "cpu":
            raise RuntimeError(f"ferrograd runs on the CPU only; got device {device!r}")
        self.device = "cpu"
        self._seed = _DEFAULT_SEED
        self._draws = 0

    def manual_seed(self, seed: int) -> Generator:
        """Seed the stream (negative seeds are taken as their two's complement); returns self."""
        seed = int(seed)
        if not -(1 << 63) <= seed < (1 << 64):
            raise RuntimeError("Overflow when unpacking long")
        self._seed, self._draws = seed & _MASK, 0
        return self

    def seed(self) -> int:
        """Seed the stream from the OS's entropy; returns the seed."""
        self.manual_seed(int.from_bytes(os.urandom(8), "little"))
        return self._seed

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self) -> Tensor:
        """The stream's position (seed and draws so far), for ``set_state``."""
        state = np.array([self._seed, self._draws], dtype=np.uint64).view(np.int64)
        return _C._from_numpy(state, False)

    def set_state(self, state: Tensor) -> Generator:
        seed, draws = (int(v) & _MASK for v in state.tolist())
        self._seed, self._draws = seed, draws
        return self

    def _next_seed(self) -> int:
        self._draws += 1
        return _mix(self._seed ^ _mix(self._draws))


def next_seed(generator: Optional[Generator]) -> int:
    """A fresh 53-bit seed from ``generator``'s stream, or from the global one (``manual_seed``)
    without one: for streams of other libraries (NumPy draws, worker processes)."""
    if generator is not None:
        return generator._next_seed() >> 11
    from ._creation import rand
    from ._dtypes import float64

    return int(rand(1, dtype=float64).item() * 2**53)


def randperm(
    n: int,
    *,
    generator: Optional[Generator] = None,
    dtype: Any = None,
    requires_grad: bool = False,
    device: Any = None,
) -> Tensor:
    """A random permutation of ``0..n``; from ``generator`` if given, else the global stream."""
    seed = None if generator is None else generator._next_seed()
    t = _C._randperm(n, seed)
    if dtype is not None and check_dtype(dtype) != int64:
        t = t.to(check_dtype(dtype))
    if requires_grad:
        t.requires_grad = True
    return t
