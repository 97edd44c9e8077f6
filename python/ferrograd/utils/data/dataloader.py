"""``DataLoader``: batches from a dataset, in this process or in worker processes."""

from __future__ import annotations

import collections.abc
import multiprocessing
import queue
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from ... import _C
from ..._generator import Generator, next_seed
from ..._lazy import is_numpy, np
from .dataset import Dataset, IterableDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler

Tensor = _C.Tensor


# ----- collation ------------------------------------------------------------------------------


def default_collate(batch: Sequence[Any]) -> Any:
    """torch's default collation: tensors, NumPy arrays and numbers are stacked along a new first
    dim; mappings, named tuples and sequences are collated field by field; strings stay lists."""
    from ... import stack, tensor
    from ..._dtypes import float64

    elem = batch[0]
    if isinstance(elem, Tensor):
        return stack(list(batch), 0)
    if is_numpy(elem, "ndarray"):
        if elem.dtype.kind in "OSUa":
            raise TypeError(
                "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or "
                f"lists; found {elem.dtype}"
            )
        return stack([tensor(np.asarray(b)) for b in batch], 0)
    if is_numpy(elem, "generic"):
        return tensor(np.array(batch))
    if isinstance(elem, bool):
        return tensor(list(batch))
    if isinstance(elem, float):
        return tensor(list(batch), dtype=float64)
    if isinstance(elem, int):
        return tensor(list(batch))
    if isinstance(elem, (str, bytes)):
        return list(batch)
    if isinstance(elem, collections.abc.Mapping):
        return type(elem)({k: default_collate([d[k] for d in batch]) for k in elem})  # type: ignore[call-arg]
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):
        return type(elem)(*(default_collate(list(s)) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        if any(len(e) != len(elem) for e in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        return [default_collate(list(s)) for s in zip(*batch)]
    raise TypeError(
        "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; "
        f"found {type(elem)}"
    )


# ----- workers --------------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkerInfo:
    """What ``get_worker_info()`` returns inside a worker process."""

    id: int
    num_workers: int
    seed: int
    dataset: Any


_worker_info: Optional[WorkerInfo] = None


def get_worker_info() -> Optional[WorkerInfo]:
    """The current worker's id, count, seed and dataset copy; ``None`` in the main process."""
    return _worker_info


class _WorkerError:
    """An exception raised in a worker, carried to the main process as text."""

    def __init__(self, worker_id: int, exc: BaseException) -> None:
        self.worker_id = worker_id
        self.exc_type = type(exc)
        self.text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))

    def reraise(self) -> None:
        msg = f"Caught {self.exc_type.__name__} in DataLoader worker process {self.worker_id}.\n"
        msg += f"Original {self.text}"
        try:
            err = self.exc_type(msg)
        except Exception:  # noqa: BLE001 - an exception type that needs other arguments
            err = RuntimeError(msg)
        raise err


def _worker_loop(
    dataset: Any,
    index_queue: Any,
    result_queue: Any,
    fetch: Callable[[Any], Any],
    info: WorkerInfo,
    init_fn: Optional[Callable[[int], None]],
) -> None:
    global _worker_info
    from ... import manual_seed

    _worker_info = info
    manual_seed(info.seed)
    try:
        if init_fn is not None:
            init_fn(info.id)
    except Exception as e:  # noqa: BLE001
        result_queue.put((None, _WorkerError(info.id, e)))
        return
    while True:
        job = index_queue.get()
        if job is None:
            return
        n, indices = job
        try:
            result_queue.put((n, fetch(indices)))
        except Exception as e:  # noqa: BLE001
            result_queue.put((n, _WorkerError(info.id, e)))


class _MapFetcher:
    """Fetch and collate one batch of a map-style dataset (picklable, for workers)."""

    def __init__(self, dataset: Any, collate_fn: Callable[[Any], Any], batched: bool) -> None:
        self.dataset, self.collate_fn, self.batched = dataset, collate_fn, batched

    def __call__(self, indices: Any) -> Any:
        if not self.batched:
            return self.collate_fn(self.dataset[indices])
        return self.collate_fn([self.dataset[i] for i in indices])


class _StreamEnd:
    """A worker's answer once its copy of an IterableDataset is exhausted."""

    def __init__(self, worker_id: int) -> None:
        self.worker_id = worker_id


class _StreamFetcher:
    """The next batch of a worker's own iterator over an IterableDataset (made on first use, in
    the worker, after ``get_worker_info()`` is set, so the dataset can shard itself)."""

    def __init__(
        self,
        dataset: Any,
        collate_fn: Callable[[Any], Any],
        batch_size: Optional[int],
        drop_last: bool,
    ) -> None:
        self.dataset, self.collate_fn = dataset, collate_fn
        self.batch_size, self.drop_last = batch_size, drop_last
        self.it: Optional[Iterator[Any]] = None
        self.done = False

    def __call__(self, _task: Any) -> Any:
        info = get_worker_info()
        wid = info.id if info is not None else 0
        if self.done:
            return _StreamEnd(wid)
        if self.it is None:
            self.it = iter(self.dataset)
        if self.batch_size is None:
            try:
                return self.collate_fn(next(self.it))
            except StopIteration:
                self.done = True
                return _StreamEnd(wid)
        batch: List[Any] = []
        for x in self.it:
            batch.append(x)
            if len(batch) == self.batch_size:
                return self.collate_fn(batch)
        self.done = True
        if batch and not self.drop_last:
            return self.collate_fn(batch)
        return _StreamEnd(wid)


# ----- the loader -------------------------------------------------------------------------------


class DataLoader:
    """Batches of ``dataset`` (torch's signature): ``batch_size`` items per batch, in order or
    shuffled (``generator`` seeds the order), collated by ``collate_fn``; ``num_workers > 0``
    fetches batches in that many processes, yielded in order."""

    def __init__(
        self,
        dataset: Dataset[Any],
        batch_size: Optional[int] = 1,
        shuffle: Optional[bool] = None,
        sampler: Optional[Any] = None,
        batch_sampler: Optional[Any] = None,
        num_workers: int = 0,
        collate_fn: Optional[Callable[[List[Any]], Any]] = None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float = 0,
        worker_init_fn: Optional[Callable[[int], None]] = None,
        multiprocessing_context: Any = None,
        generator: Optional[Generator] = None,
        *,
        prefetch_factor: Optional[int] = None,
        persistent_workers: bool = False,
        pin_memory_device: str = "",
        in_order: bool = True,
    ) -> None:
        if num_workers < 0:
            raise ValueError(
                "num_workers option should be non-negative; use num_workers=0 to disable "
                "multiprocessing."
            )
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError(
                "prefetch_factor option could only be specified in multiprocessing."
                "let num_workers > 0 to enable multiprocessing, otherwise set prefetch_factor "
                "to None."
            )
        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = 2 if prefetch_factor is None and num_workers > 0 else prefetch_factor
        self.pin_memory = pin_memory
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.generator = generator
        self.persistent_workers = persistent_workers
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:
            if shuffle not in (None, False):
                raise ValueError(
                    "DataLoader with IterableDataset: expected unspecified shuffle option, but "
                    f"got shuffle={shuffle}"
                )
            if sampler is not None or batch_sampler is not None:
                raise ValueError(
                    "DataLoader with IterableDataset: expected unspecified sampler option, but "
                    f"got sampler={sampler}"
                )
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError(
                    "batch_sampler option is mutually exclusive with batch_size, shuffle, "
                    "sampler, and drop_last"
                )
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError(
                "batch_size=None option disables auto-batching and is mutually exclusive with "
                "drop_last"
            )
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if sampler is None and not self._iterable:
            sampler = (
                RandomSampler(dataset, generator=generator)  # type: ignore[arg-type]
                if shuffle
                else SequentialSampler(dataset)  # type: ignore[arg-type]
            )
        if batch_size is not None and batch_sampler is None and not self._iterable:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler: Optional[Sampler] = sampler
        self.batch_sampler = batch_sampler
        self._auto_collation = batch_sampler is not None or (
            self._iterable and batch_size is not None
        )
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else _convert
        self.collate_fn = collate_fn

    def __len__(self) -> int:
        if self._iterable:
            n = len(self.dataset)  # type: ignore[arg-type]
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        if self.batch_sampler is not None:
            return len(self.batch_sampler)
        return len(self.sampler)  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[Any]:
        if self._iterable:
            return self._iter_stream()
        indices = self.batch_sampler if self.batch_sampler is not None else self.sampler
        fetch = _MapFetcher(self.dataset, self.collate_fn, self.batch_sampler is not None)
        if self.num_workers == 0:
            return (fetch(i) for i in indices)  # type: ignore[union-attr]
        return self._iter_workers(iter(indices), fetch)  # type: ignore[arg-type]

    def _iter_stream(self) -> Iterator[Any]:
        fetch = _StreamFetcher(self.dataset, self.collate_fn, self.batch_size, self.drop_last)
        if self.num_workers > 0:
            yield from self._iter_stream_workers(fetch)
            return
        while True:
            data = fetch(None)
            if isinstance(data, _StreamEnd):
                return
            yield data

    def _start_workers(self, fetch: Callable[[Any], Any]) -> Tuple[List[Any], List[Any], Any]:
        ctx = self.multiprocessing_context
        if ctx is None or isinstance(ctx, str):
            ctx = multiprocessing.get_context(ctx)
        base_seed = next_seed(self.generator)
        result_queue = ctx.Queue()
        index_queues = []
        workers = []
        for w in range(self.num_workers):
            iq = ctx.Queue()
            info = WorkerInfo(w, self.num_workers, (base_seed + w) % 2**63, self.dataset)
            p = ctx.Process(
                target=_worker_loop,
                args=(self.dataset, iq, result_queue, fetch, info, self.worker_init_fn),
                daemon=True,
            )
            p.start()
            index_queues.append(iq)
            workers.append(p)
        return index_queues, workers, result_queue

    @staticmethod
    def _stop_workers(index_queues: List[Any], workers: List[Any]) -> None:
        for iq in index_queues:
            iq.put(None)
        for p in workers:
            p.join(timeout=5)
            if p.is_alive():
                p.terminate()

    def _next_result(
        self, n: int, waiting: Dict[int, Any], results: Any, workers: List[Any]
    ) -> Any:
        """Result number ``n``, buffering the ones that arrive earlier (yielded in order)."""
        while n not in waiting:
            k, data = self._get(results, workers)
            if isinstance(data, _WorkerError):
                data.reraise()
            waiting[k] = data
        return waiting.pop(n)

    def _in_flight(self) -> int:
        return self.num_workers * (self.prefetch_factor or 2)

    def _iter_workers(self, indices: Iterator[Any], fetch: _MapFetcher) -> Iterator[Any]:
        index_queues, workers, results = self._start_workers(fetch)
        sent = received = 0
        waiting: Dict[int, Any] = {}
        exhausted = False
        try:
            while True:
                while not exhausted and sent - received < self._in_flight():
                    try:
                        job = next(indices)
                    except StopIteration:
                        exhausted = True
                        break
                    index_queues[sent % self.num_workers].put((sent, job))
                    sent += 1
                if received == sent:
                    return
                data = self._next_result(received, waiting, results, workers)
                received += 1
                yield data
        finally:
            self._stop_workers(index_queues, workers)

    def _iter_stream_workers(self, fetch: _StreamFetcher) -> Iterator[Any]:
        """torch's order for an IterableDataset in workers: each worker iterates its own copy
        of the dataset; batches are taken from the workers in turn, skipping finished ones."""
        index_queues, workers, results = self._start_workers(fetch)
        active = list(range(self.num_workers))
        turn = sent = received = 0
        waiting: Dict[int, Any] = {}
        try:
            while True:
                while active and sent - received < self._in_flight():
                    while turn % self.num_workers not in active:
                        turn += 1
                    w = turn % self.num_workers
                    turn += 1
                    index_queues[w].put((sent, None))
                    sent += 1
                if received == sent:
                    return
                data = self._next_result(received, waiting, results, workers)
                received += 1
                if isinstance(data, _StreamEnd):
                    if data.worker_id in active:
                        active.remove(data.worker_id)
                    continue
                yield data
        finally:
            self._stop_workers(index_queues, workers)

    def _get(self, results: Any, workers: List[Any]) -> Any:
        """The next result, checking every second that the workers are alive."""
        waited = 0.0
        while True:
            try:
                return results.get(timeout=1.0)
            except queue.Empty:
                waited += 1.0
                dead = [p.pid for p in workers if not p.is_alive()]
                if dead:
                    raise RuntimeError(
                        f"DataLoader worker (pid(s) {', '.join(map(str, dead))}) exited "
                        "unexpectedly"
                    ) from None
                if self.timeout and waited >= self.timeout:
                    raise RuntimeError(
                        f"DataLoader timed out after {self.timeout} seconds"
                    ) from None


def _convert(data: Any) -> Any:
    """Collation without batching (``batch_size=None``): NumPy arrays become tensors."""
    from ... import tensor

    if is_numpy(data, "ndarray"):
        return tensor(data)
    return data
