"""``DistributedSampler``: each process of a data-parallel job reads its own share of a dataset
(torch's ``torch.utils.data.distributed``)."""

from __future__ import annotations

import math
from typing import Any, Iterator, List, Optional

from ..._generator import Generator, randperm
from .sampler import Sampler

__all__ = ["DistributedSampler"]


class DistributedSampler(Sampler):
    """Indices ``rank, rank + num_replicas, ...`` of the (shuffled) dataset, so the processes of
    a job split it without overlap.

    As in torch: with ``drop_last=False`` the index list is padded by repeating its start until
    it divides evenly (every process gets ``ceil(len / num_replicas)`` indices); with
    ``drop_last=True`` the tail is dropped instead. ``shuffle`` permutes with a generator seeded by
    ``seed + epoch``, the same on every process; call ``set_epoch`` before each epoch for a new
    order. ``num_replicas`` and ``rank`` default to the process group's. The permutation differs
    from torch's for the same seed (ferrograd's generator is another algorithm).
    """

    def __init__(
        self,
        dataset: Any,
        num_replicas: Optional[int] = None,
        rank: Optional[int] = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
    ) -> None:
        if num_replicas is None or rank is None:
            from ... import distributed as dist

            if not dist.is_available():
                raise RuntimeError("Requires distributed package to be available")
            if num_replicas is None:
                num_replicas = dist.get_world_size()
            if rank is None:
                rank = dist.get_rank()
        if rank >= num_replicas or rank < 0:
            raise ValueError(
                f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]"
            )
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        n = len(dataset)
        if self.drop_last and n % self.num_replicas != 0:
            self.num_samples = math.ceil((n - self.num_replicas) / self.num_replicas)
        else:
            self.num_samples = math.ceil(n / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self) -> Iterator[int]:
        n = len(self.dataset)
        if self.shuffle:
            g = Generator()
            g.manual_seed(self.seed + self.epoch)
            indices: List[int] = randperm(n, generator=g).tolist()
        else:
            indices = list(range(n))
        if not self.drop_last:
            padding = self.total_size - len(indices)
            if padding <= len(indices):
                indices += indices[:padding]
            else:
                indices += (indices * math.ceil(padding / len(indices)))[:padding]
        else:
            indices = indices[: self.total_size]
        assert len(indices) == self.total_size
        own = indices[self.rank : self.total_size : self.num_replicas]
        assert len(own) == self.num_samples
        return iter(own)

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Use ``seed + epoch`` for the next shuffle, so each epoch has its own order (the same
        on every process)."""
        self.epoch = epoch
