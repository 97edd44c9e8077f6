"""``DistributedDataParallel``: one model replica per process, gradients averaged across the
processes while backward still runs (torch's ``torch.nn.parallel.DistributedDataParallel``)."""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator, List, Optional

from ... import _C
from ..._C import Tensor
from ...autograd.grad_mode import is_grad_enabled, no_grad
from ...autograd.graph import queue_callback
from ..modules.module import Module

__all__ = ["DistributedDataParallel"]

#: torch's ``dist._DEFAULT_FIRST_BUCKET_BYTES``.
_DEFAULT_FIRST_BUCKET_BYTES = 1024 * 1024


class DistributedDataParallel(Module):
    """Wraps ``module`` so that each ``backward`` leaves every process with the gradients
    averaged over all processes (the gradient of the loss over the whole global batch when each
    process's loss is a mean over its share).

    At construction, parameters and buffers are broadcast from rank 0 (every process starts
    from the same model; shapes are checked to agree first). Parameters are grouped into buckets
    of about ``bucket_cap_mb`` MiB in reverse registration order, the first bucket 1 MiB, as
    torch's reducer does after its first iteration. During backward, a post-accumulate-grad
    hook copies each gradient (divided by the world size) into its bucket; a full bucket
    starts a non-blocking ``MPI_Iallreduce`` at once, so communication overlaps the rest of
    backward. At the end of backward (an engine callback) the buckets are waited for and the
    averages written into ``.grad``, so ``optimizer.step()`` sees them.

    ``no_sync()`` skips the reduction (gradients accumulate locally; the next synchronised
    backward averages the sum). As in torch, the forward decides: a backward through a forward
    run inside ``no_sync()`` does not average, one through a forward run outside it does.
    ``find_unused_parameters=True`` lets parameters that got no gradient on some process count
    as zeros; without it such a parameter raises torch's
    "Expected to have finished reduction" ``RuntimeError`` at the end of backward. Unused
    parameters are found when backward ends, not by tracing the graph after forward as torch
    does, so their bucket is reduced then.
    """

    def __init__(
        self,
        module: Module,
        device_ids: Any = None,
        output_device: Any = None,
        dim: int = 0,
        broadcast_buffers: bool = True,
        process_group: Any = None,
        bucket_cap_mb: Optional[float] = None,
        find_unused_parameters: bool = False,
        check_reduction: bool = False,
        gradient_as_bucket_view: bool = False,
        static_graph: bool = False,
    ) -> None:
        super().__init__()
        from ... import distributed as dist

        if not isinstance(module, Module):
            raise TypeError(f"DistributedDataParallel expects an nn.Module, got {type(module)}")
        backend = dist._get(process_group)
        if bucket_cap_mb is None:
            bucket_cap_mb = 25
        if not bucket_cap_mb > 0:
            raise ValueError(f"bucket_cap_mb must be positive, got {bucket_cap_mb}")
        if backend.world_size > 1 and not backend.thread_level_ok():
            raise RuntimeError(
                "DistributedDataParallel calls MPI from backward's worker threads and needs "
                "MPI_THREAD_SERIALIZED or more; MPI was initialised with less (leave "
                "mpi4py.rc.thread_level at its default, 'multiple')"
            )
        self.module = module
        self.dim = dim
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.static_graph = static_graph
        self.require_backward_grad_sync = True
        self._expect_hooks = False
        self.bucket_bytes_cap = max(1, int(bucket_cap_mb * 1024 * 1024))
        object.__setattr__(self, "_backend", backend)
        params: List[Tensor] = [p for p in module.parameters() if p.requires_grad]
        object.__setattr__(self, "_ddp_params", params)

        self._check_same_model(backend, module)
        self._broadcast_state(backend, module)
        first = min(_DEFAULT_FIRST_BUCKET_BYTES, self.bucket_bytes_cap)
        reducer = _C._Reducer(params, self.bucket_bytes_cap, first)
        object.__setattr__(self, "reducer", reducer)
        object.__setattr__(self, "_queued", {})
        object.__setattr__(self, "_lock", threading.Lock())
        handles = [p.register_post_accumulate_grad_hook(self._make_hook(i)) for i, p in
                   enumerate(params)]
        object.__setattr__(self, "_hook_handles", handles)

    # ----- construction -------------------------------------------------------------------

    def _check_same_model(self, backend: Any, module: Module) -> None:
        """Every process must wrap the same model (parameter and buffer shapes, dtypes, which
        parameters require grad) with the same bucket size and unused-parameter setting:
        otherwise the buckets' all-reduces would not match (torch checks the shapes too)."""
        if backend.world_size == 1:
            return
        sig: List[int] = []
        for p in module.parameters():
            sig += [p.dim(), *p.shape, p.dtype.itemsize, int(p.requires_grad)]
        for b in module.buffers():
            sig += [b.dim(), *b.shape, b.dtype.itemsize]
        model = [len(sig), hash(tuple(sig)) & 0x7FFFFFFFFFFFFFFF]
        settings = [self.bucket_bytes_cap, int(self.find_unused_parameters)]
        if backend.same_everywhere(model + settings):
            return
        if backend.same_everywhere(model):
            raise RuntimeError(
                "DistributedDataParallel: the processes passed different bucket_cap_mb or "
                f"find_unused_parameters (this process, rank {backend.rank}: bucket_cap_mb="
                f"{self.bucket_bytes_cap / 2**20:g}, find_unused_parameters="
                f"{self.find_unused_parameters})"
            )
        raise RuntimeError(
            "DistributedDataParallel: the processes' models have different parameter "
            f"shapes, dtypes or buffers (this process, rank {backend.rank}: parameters "
            f"{[tuple(p.shape) for p in module.parameters()]})"
        )

    @staticmethod
    def _broadcast_state(backend: Any, module: Module) -> None:
        """Copy rank 0's parameters and buffers into every process's, in place."""
        if backend.world_size == 1:
            return
        with no_grad():
            for t in [*module.parameters(), *module.buffers()]:
                _broadcast(backend, t)

    # ----- the reduction --------------------------------------------------------------------

    def _make_hook(self, index: int) -> Any:
        def hook(param: Tensor) -> None:
            if not self._expect_hooks:
                return
            task = _C._current_graph_task_id()
            with self._lock:
                first = task not in self._queued
                self._queued[task] = True
            if first:
                queue_callback(lambda: self._finalize(task))
            self.reducer.mark_ready(index, self._backend)
            self._backend.progress()

        return hook

    def _finalize(self, task: int) -> None:
        with self._lock:
            self._queued.pop(task, None)
        self._expect_hooks = False
        self.reducer.finalize(self._backend, self.find_unused_parameters)

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Forward passes run within this context give backward passes that accumulate
        gradients locally without averaging them; the next backward through a forward run
        outside it averages everything accumulated."""
        previous = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = previous

    # ----- forward ------------------------------------------------------------------------

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        if self.reducer.in_pass():
            raise RuntimeError(
                "Expected to have finished reduction in the prior iteration before starting a "
                "new one: the previous backward did not complete"
            )
        if self.broadcast_buffers and self._backend.world_size > 1:
            with no_grad():
                for b in self.module.buffers():
                    _broadcast(self._backend, b)
        if is_grad_enabled() and self.require_backward_grad_sync:
            # As torch's reducer: the next backward averages (whatever no_sync says then).
            self._expect_hooks = True
        return self.module(*inputs, **kwargs)

    def __getstate__(self) -> Any:
        raise TypeError("DistributedDataParallel cannot be pickled: pickle its .module instead")


def _broadcast(backend: Any, t: Tensor) -> None:
    """Rank 0's ``t`` into every process's ``t`` (in place, a contiguous copy if needed)."""
    if t.is_contiguous():
        backend.bcast(t.detach().numpy(), 0)
        _C._increment_version(t)
        return
    c = t.detach().contiguous()
    backend.bcast(c.numpy(), 0)
    t.detach().copy_(c)
