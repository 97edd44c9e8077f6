"""Map-style and iterable datasets, and splitting them."""

from __future__ import annotations

import bisect
import math
from typing import Any, Generic, Iterator, List, Optional, Sequence, TypeVar, Union

from ... import _C
from ..._generator import Generator, randperm

T_co = TypeVar("T_co", covariant=True)
Tensor = _C.Tensor


class Dataset(Generic[T_co]):
    """A map-style dataset: subclasses define ``__getitem__`` (and usually ``__len__``)."""

    def __getitem__(self, index: Any) -> T_co:
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other: Dataset[T_co]) -> ConcatDataset[T_co]:
        return ConcatDataset([self, other])


class IterableDataset(Dataset[T_co]):
    """A dataset read as a stream: subclasses define ``__iter__``."""

    def __iter__(self) -> Iterator[T_co]:
        raise NotImplementedError("Subclasses of IterableDataset should implement __iter__.")


class TensorDataset(Dataset[Any]):
    """Rows of tensors that share their first dimension: item ``i`` is ``(t[i] for t in ...)``."""

    def __init__(self, *tensors: Tensor) -> None:
        if not tensors:
            raise ValueError("TensorDataset needs at least one tensor")
        n = tensors[0].shape[0] if tensors[0].dim() > 0 else None
        if n is None or any(t.dim() == 0 or t.shape[0] != n for t in tensors):
            raise AssertionError("Size mismatch between tensors")
        self.tensors = tensors

    def __getitem__(self, index: Any) -> Any:
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return int(self.tensors[0].shape[0])


class ConcatDataset(Dataset[T_co]):
    """Datasets one after another."""

    def __init__(self, datasets: Sequence[Dataset[T_co]]) -> None:
        self.datasets = list(datasets)
        if not self.datasets:
            raise AssertionError("datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise AssertionError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes: List[int] = []
        total = 0
        for d in self.datasets:
            total += len(d)  # type: ignore[arg-type]
            self.cumulative_sizes.append(total)

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx: int) -> T_co:
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx = len(self) + idx
        d = bisect.bisect_right(self.cumulative_sizes, idx)
        start = 0 if d == 0 else self.cumulative_sizes[d - 1]
        return self.datasets[d][idx - start]


class Subset(Dataset[T_co]):
    """The items of ``dataset`` at ``indices``."""

    def __init__(self, dataset: Dataset[T_co], indices: Sequence[int]) -> None:
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx: Any) -> Any:
        if isinstance(idx, list):
            return [self.dataset[self.indices[i]] for i in idx]
        return self.dataset[self.indices[idx]]

    def __len__(self) -> int:
        return len(self.indices)


def random_split(
    dataset: Dataset[T_co],
    lengths: Sequence[Union[int, float]],
    generator: Optional[Generator] = None,
) -> List[Subset[T_co]]:
    """Split ``dataset`` into non-overlapping random subsets of the given lengths, or of the given
    fractions (summing to 1; the remainder is dealt round-robin, as torch does)."""
    n = len(dataset)  # type: ignore[arg-type]
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        counts = []
        for i, frac in enumerate(lengths):
            if frac < 0 or frac > 1:
                raise ValueError(f"Fraction at index {i} is not between 0 and 1")
            counts.append(int(math.floor(n * frac)))
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
        lengths = counts
    if sum(lengths) != n:
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    order = randperm(n, generator=generator).tolist()
    out: List[Subset[T_co]] = []
    start = 0
    for length in lengths:
        out.append(Subset(dataset, order[start : start + int(length)]))
        start += int(length)
    return out
