"""``torch.distributed`` on MPI: a process group over ``mpiexec``'s processes and collectives on
ferrograd tensors.

Launch with ``mpiexec -n N python script.py``; call ``init_process_group(backend="mpi")`` once in
each process. Collectives hand the tensors' own memory to MPI (NumPy views, no copies, except
where noted: ``all_gather``'s list and ``reduce_scatter``'s input list are gathered through one
flat buffer, as MPI wants one), write in place and bump the written tensors' version counters
as torch's in-place ops do.

Faults: MPI collectives have no timeout; once the group is initialised, an exception that
escapes a process calls ``MPI_Abort``, so the whole job ends instead of the other processes
waiting forever in their next collective; a process killed by a signal makes ``mpiexec`` end
the job; a hung process is ended by the launcher's timeout (``MPIEXEC_TIMEOUT=seconds`` with
MPICH, ``mpiexec --timeout`` with Open MPI). Tensors of
different shapes or dtypes across processes are caught before the collective (one small extra
all-reduce per call) and raise a ``RuntimeError`` on every process.
"""

from __future__ import annotations

import enum
import sys
from datetime import timedelta
from typing import Any, List, Optional

from .. import _C
from .._C import Tensor
from ._mpi import SIGNATURE_LEN, MPIBackend, mpi_importable, test_request, wait_request

__all__ = [
    "Backend",
    "GroupMember",
    "ReduceOp",
    "Work",
    "all_gather",
    "all_gather_into_tensor",
    "all_reduce",
    "barrier",
    "broadcast",
    "destroy_process_group",
    "get_backend",
    "get_rank",
    "get_world_size",
    "group",
    "init_process_group",
    "is_available",
    "is_initialized",
    "is_mpi_available",
    "reduce_scatter",
    "reduce_scatter_tensor",
]


class ReduceOp:
    """How ``all_reduce`` and ``reduce_scatter`` combine the processes' values (torch's
    ``ReduceOp``: ``ReduceOp.SUM``, ``AVG``, ``PRODUCT``, ``MIN``, ``MAX``, ``BAND``, ``BOR``,
    ``BXOR``)."""

    class RedOpType(enum.Enum):
        SUM = 0
        AVG = 1
        PRODUCT = 2
        MIN = 3
        MAX = 4
        BAND = 5
        BOR = 6
        BXOR = 7

    SUM = RedOpType.SUM
    AVG = RedOpType.AVG
    PRODUCT = RedOpType.PRODUCT
    MIN = RedOpType.MIN
    MAX = RedOpType.MAX
    BAND = RedOpType.BAND
    BOR = RedOpType.BOR
    BXOR = RedOpType.BXOR


class Backend(str):
    """Backend names; ferrograd has ``Backend.MPI`` only."""

    MPI = "mpi"
    UNDEFINED = "undefined"


class GroupMember:
    """``GroupMember.WORLD``: the default group (every process)."""

    WORLD: Any = object()
    NON_GROUP_MEMBER: Any = object()


group = GroupMember

_backend: Optional[MPIBackend] = None
_previous_excepthook: Any = None

_NOT_INITIALIZED = (
    "Default process group has not been initialized, please make sure to call "
    "init_process_group."
)


def is_available() -> bool:
    """Whether the distributed package can run here: mpi4py is installed (a missing MPI
    library is reported by ``init_process_group``)."""
    return mpi_importable()


def is_mpi_available() -> bool:
    """Whether the MPI backend is available: the same as ``is_available()``."""
    return mpi_importable()


def is_initialized() -> bool:
    """Whether ``init_process_group`` has run (and ``destroy_process_group`` has not)."""
    return _backend is not None


def _abort_on_uncaught(exc_type: Any, exc: Any, tb: Any) -> None:
    """An exception that escapes a process of a running job aborts the whole job."""
    hook = _previous_excepthook or sys.__excepthook__
    hook(exc_type, exc, tb)
    b = _backend
    if b is not None and b.world_size > 1:
        sys.stderr.write(
            f"ferrograd.distributed: rank {b.rank} raised {exc_type.__name__}; aborting the job\n"
        )
        sys.stderr.flush()
        b.abort(1)


def init_process_group(
    backend: Optional[str] = None,
    init_method: Optional[str] = None,
    timeout: Optional[timedelta] = None,
    world_size: int = -1,
    rank: int = -1,
    store: Any = None,
    group_name: str = "",
    pg_options: Any = None,
    device_id: Any = None,
) -> None:
    """Join the processes ``mpiexec`` started into the default group: rank and world size come
    from MPI. ``backend`` must be ``"mpi"`` (or ``None``); ``world_size``/``rank``, when given,
    must agree with MPI's. ``init_method``, ``store`` and ``timeout`` are accepted for torch's
    signature: MPI needs no rendezvous, and its collectives have no timeout (give the launcher
    one: ``MPIEXEC_TIMEOUT`` with MPICH). A ``RuntimeError`` names the missing package when
    mpi4py or MPI cannot be loaded."""
    global _backend, _previous_excepthook
    if _backend is not None:
        raise ValueError("trying to initialize the default process group twice!")
    name = "mpi" if backend is None else str(backend).lower()
    if name != "mpi":
        raise RuntimeError(
            f"Distributed package doesn't have {name.upper()} built in: ferrograd runs on MPI "
            'only; use init_process_group(backend="mpi") under mpiexec'
        )
    b = MPIBackend()
    if world_size not in (-1, b.world_size):
        raise ValueError(
            f"init_process_group: world_size={world_size} but mpiexec started {b.world_size} "
            "processes"
        )
    if rank not in (-1, b.rank):
        raise ValueError(f"init_process_group: rank={rank} but MPI gave this process rank {b.rank}")
    _backend = b
    if sys.excepthook is not _abort_on_uncaught:
        _previous_excepthook = sys.excepthook
        sys.excepthook = _abort_on_uncaught


def destroy_process_group(group: Any = None) -> None:
    """Leave the default group (waiting for its requests in flight)."""
    global _backend
    b = _get(group)
    _backend = None
    if sys.excepthook is _abort_on_uncaught:
        sys.excepthook = _previous_excepthook or sys.__excepthook__
    b.free()


def _get(group: Any = None) -> MPIBackend:
    if _backend is None:
        raise ValueError(_NOT_INITIALIZED)
    if group is not None and group is not GroupMember.WORLD:
        raise ValueError(
            "ferrograd.distributed has only the default group: pass group=None "
            "(or GroupMember.WORLD)"
        )
    return _backend


def _backend_for_ddp() -> MPIBackend:
    return _get()


def get_rank(group: Any = None) -> int:
    """This process's rank in the default group."""
    return _get(group).rank


def get_world_size(group: Any = None) -> int:
    """The number of processes in the default group."""
    return _get(group).world_size


def get_backend(group: Any = None) -> str:
    """The backend's name: ``"mpi"``."""
    return _get(group).name


class Work:
    """A collective started with ``async_op=True``: ``wait()`` blocks until it is done and its
    results are in the tensors."""

    def __init__(self, requests: List[Any], finish: Any = None) -> None:
        self._requests = requests
        self._finish = finish
        self._done = False

    def wait(self, timeout: Optional[timedelta] = None) -> bool:
        if not self._done:
            for r in self._requests:
                wait_request(r)
            self._done = True
            if self._finish is not None:
                self._finish()
        return True

    def is_completed(self) -> bool:
        if self._done:
            return True
        if all(test_request(r) for r in self._requests):
            self.wait()
        return self._done

    def is_success(self) -> bool:
        return self.is_completed()


def _result(requests: List[Any], finish: Any, async_op: bool) -> Optional[Work]:
    work = Work(requests, finish)
    if async_op:
        return work
    work.wait()
    return None


def _check_tensor(t: Any, name: str) -> Tensor:
    if not isinstance(t, Tensor):
        raise TypeError(
            f"Invalid function argument. Expected parameter `{name}` of type torch.Tensor "
            f"but got {type(t)} instead."
        )
    if not t.is_contiguous():
        raise RuntimeError("Tensors must be contiguous")
    return t


def _check_list(ts: Any, name: str, like: Tensor, n: int) -> List[Tensor]:
    if not isinstance(ts, list) or not all(isinstance(t, Tensor) for t in ts):
        raise TypeError(
            f"Invalid function argument. Expected parameter `{name}` of type List[torch.Tensor] "
            f"but got {type(ts)} instead."
        )
    if len(ts) != n:
        raise ValueError(f"{name} must hold world_size ({n}) tensors, got {len(ts)}")
    for t in ts:
        if t.shape != like.shape or t.dtype != like.dtype:
            raise ValueError(
                f"every tensor of {name} must have the shape {tuple(like.shape)} and dtype "
                f"{like.dtype} of the other argument, got {tuple(t.shape)} and {t.dtype}"
            )
    return ts


def _check_same_everywhere(
    b: MPIBackend, what: str, t: Tensor, extra: Optional[List[int]] = None
) -> None:
    """Raise on every process when the processes passed tensors of different shapes/dtypes."""
    if b.world_size == 1:
        return
    shape = t.shape
    # The number of dims goes first, so signatures of different lengths differ there.
    sig = [t.dtype.itemsize + 16 * t.dtype.is_floating_point, len(shape), *shape, *(extra or [])]
    if len(sig) > SIGNATURE_LEN:
        sig = [*sig[:2], hash(tuple(sig)) & 0x7FFFFFFFFFFFFFFF]
    if not b.same_everywhere(sig):
        raise RuntimeError(
            f"{what}: the processes passed tensors of different shapes or dtypes (this process: "
            f"shape {tuple(t.shape)}, dtype {t.dtype}); every process must pass the same"
        )


def _view(t: Tensor) -> Any:
    """A NumPy array sharing ``t``'s memory."""
    return t.detach().numpy()


def _wrote(*ts: Tensor) -> None:
    """Record the in-place writes MPI made (torch's collectives bump the version too)."""
    for t in ts:
        _C._increment_version(t)


def _op_name(op: Any, t: Tensor) -> str:
    if isinstance(op, ReduceOp.RedOpType):
        name = op.name.lower()
    else:
        raise TypeError(f"op must be a ReduceOp (ReduceOp.SUM, ...), got {op!r}")
    if name == "avg" and not t.is_floating_point():
        raise ValueError("ReduceOp.AVG needs a floating-point tensor")
    if name in ("band", "bor", "bxor") and t.is_floating_point():
        raise ValueError(f"ReduceOp.{name.upper()} needs an integer or bool tensor")
    return name


def barrier(group: Any = None, async_op: bool = False, device_ids: Any = None) -> Optional[Work]:
    """Wait until every process of the group reaches this call."""
    b = _get(group)
    if async_op:
        return Work([b.comm.Ibarrier()])
    b.barrier()
    return None


def all_reduce(
    tensor: Tensor, op: Any = ReduceOp.SUM, group: Any = None, async_op: bool = False
) -> Optional[Work]:
    """Combine ``tensor`` across processes with ``op`` (sum, avg, product, min, max, ...) and
    write the result into ``tensor`` on every process."""
    t = _check_tensor(tensor, "tensor")
    b = _get(group)
    name = _op_name(op, t)
    _check_same_everywhere(b, "all_reduce", t)
    req = b.allreduce(_view(t), name, blocking=not async_op)
    return _result([req], _finish_reduce(b, t, name), async_op)


def broadcast(
    tensor: Tensor, src: int = 0, group: Any = None, async_op: bool = False, group_src: Any = None
) -> Optional[Work]:
    """Copy ``tensor`` of process ``src`` into ``tensor`` of every other process."""
    t = _check_tensor(tensor, "tensor")
    b = _get(group)
    root = src if group_src is None else group_src
    if not isinstance(root, int) or not 0 <= root < b.world_size:
        raise ValueError(f"Invalid src rank {root} for a group of {b.world_size} processes")
    _check_same_everywhere(b, "broadcast", t, [root])
    req = b.bcast(_view(t), root, blocking=not async_op)
    return _result([req], lambda: _wrote(t), async_op)


def all_gather(
    tensor_list: List[Tensor], tensor: Tensor, group: Any = None, async_op: bool = False
) -> Optional[Work]:
    """``tensor_list[r]`` becomes process ``r``'s ``tensor``, on every process. The results go
    through one flat buffer (MPI receives into one array) and are copied into the list."""
    t = _check_tensor(tensor, "tensor")
    b = _get(group)
    outs = _check_list(tensor_list, "tensor_list", t, b.world_size)
    _check_same_everywhere(b, "all_gather", t)
    flat = _empty_like_stacked(t, b.world_size)
    req = b.allgather(_view(t), _view(flat), blocking=not async_op)

    def finish() -> None:
        with _no_grad():
            for r, out in enumerate(outs):
                out.detach().copy_(flat[r])

    return _result([req], finish, async_op)


def all_gather_into_tensor(
    output_tensor: Tensor, input_tensor: Tensor, group: Any = None, async_op: bool = False
) -> Optional[Work]:
    """The inputs of all processes, concatenated along dim 0 (or stacked) into
    ``output_tensor``, without copies."""
    t = _check_tensor(input_tensor, "input_tensor")
    out = _check_tensor(output_tensor, "output_tensor")
    b = _get(group)
    _check_world_multiple(
        out, t, b, "output tensor size must be equal to world_size times input tensor size"
    )
    _check_same_everywhere(b, "all_gather_into_tensor", t)
    req = b.allgather(_view(t), _view(out), blocking=not async_op)
    return _result([req], lambda: _wrote(out), async_op)


def reduce_scatter(
    output: Tensor,
    input_list: List[Tensor],
    op: Any = ReduceOp.SUM,
    group: Any = None,
    async_op: bool = False,
) -> Optional[Work]:
    """Combine ``input_list[r]`` across processes with ``op`` and write it into ``output`` of
    process ``r``. The inputs are copied into one flat buffer first (MPI sends from one array);
    the result is received into ``output`` directly."""
    out = _check_tensor(output, "output")
    b = _get(group)
    ins = _check_list(input_list, "input_list", out, b.world_size)
    name = _op_name(op, out)
    _check_same_everywhere(b, "reduce_scatter", out)
    from .._ops_shape import stack

    flat = stack([x.detach() for x in ins]).contiguous()
    req = b.reduce_scatter_block(_view(flat), _view(out), name, blocking=not async_op)
    return _result([req], _finish_reduce(b, out, name), async_op)


def reduce_scatter_tensor(
    output: Tensor,
    input: Tensor,
    op: Any = ReduceOp.SUM,
    group: Any = None,
    async_op: bool = False,
) -> Optional[Work]:
    """``reduce_scatter`` of ``input`` split into ``world_size`` equal chunks along dim 0,
    without copies."""
    out = _check_tensor(output, "output")
    t = _check_tensor(input, "input")
    b = _get(group)
    _check_world_multiple(
        t, out, b, "input tensor must be the same size as output size times world size"
    )
    name = _op_name(op, out)
    _check_same_everywhere(b, "reduce_scatter_tensor", out)
    req = b.reduce_scatter_block(_view(t), _view(out), name, blocking=not async_op)
    return _result([req], _finish_reduce(b, out, name), async_op)


def _check_world_multiple(big: Tensor, small: Tensor, b: MPIBackend, what: str) -> None:
    """``big`` must hold ``world_size`` times ``small``'s elements, of the same dtype."""
    if big.numel() != small.numel() * b.world_size or big.dtype != small.dtype:
        raise ValueError(
            f"{what}, and of the same dtype (got {tuple(big.shape)} {big.dtype} and "
            f"{tuple(small.shape)} {small.dtype})"
        )


def _finish_reduce(b: MPIBackend, out: Tensor, name: str) -> Any:
    """What completes a reduction into ``out``: AVG's division, the version bump."""

    def finish() -> None:
        if name == "avg":
            with _no_grad():
                out.detach().div_(b.world_size)
        _wrote(out)

    return finish


def _empty_like_stacked(t: Tensor, n: int) -> Tensor:
    from .._creation import empty

    return empty((n, *t.shape), dtype=t.dtype)


def _no_grad() -> Any:
    from ..autograd.grad_mode import no_grad

    return no_grad()
