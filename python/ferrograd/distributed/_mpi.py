"""The MPI backend: collectives on NumPy views of tensors through mpi4py, no copies.

Every buffer handed to MPI here is a NumPy array sharing a tensor's memory (``Tensor.numpy()``
on a detached alias), so MPI reads and writes the tensor itself.
"""

from __future__ import annotations

import sys
import threading
from typing import Any, Dict, List, Optional

_INSTALL_HINT = (
    "the MPI backend needs the mpi4py package and an MPI library: "
    "`pip install mpi4py mpich` (or `pip install ferrograd[test]`), or Debian's "
    "`apt-get install openmpi-bin libopenmpi-dev` followed by `pip install mpi4py`"
)


def load_mpi() -> Any:
    """mpi4py's ``MPI`` module, initialising MPI; a ``RuntimeError`` naming what is missing when
    mpi4py or the MPI library cannot be loaded."""
    try:
        from mpi4py import MPI
    except ImportError as e:
        name = getattr(e, "name", None)
        what = "mpi4py is not installed" if name == "mpi4py" else f"MPI could not be loaded ({e})"
        raise RuntimeError(f"{what}: {_INSTALL_HINT}") from e
    except RuntimeError as e:  # mpi4py found no usable MPI library
        raise RuntimeError(f"MPI could not be loaded ({e}): {_INSTALL_HINT}") from e
    return MPI


def mpi_importable() -> bool:
    """Whether mpi4py is installed (checked without importing it: importing starts MPI, which
    ``init_process_group`` does; a missing MPI library is reported there)."""
    if sys.modules.get("mpi4py.MPI") is not None:
        return True
    if "mpi4py" in sys.modules:
        return sys.modules["mpi4py"] is not None
    import importlib.util

    return importlib.util.find_spec("mpi4py") is not None


#: The most integers ``MPIBackend.same_everywhere`` compares.
SIGNATURE_LEN = 34


class MPIBackend:
    """One communicator (a duplicate of ``COMM_WORLD``) and the requests in flight on it."""

    name = "mpi"

    def __init__(self) -> None:
        self.MPI = load_mpi()
        self.comm = self.MPI.COMM_WORLD.Dup()
        self.rank: int = self.comm.Get_rank()
        self.world_size: int = self.comm.Get_size()
        self._requests: Dict[int, Any] = {}
        self._signature: Any = None
        # Backward's hooks call in from worker threads: one MPI call on the requests at a time
        # (MPI forbids testing one request from two threads at once).
        self._lock = threading.Lock()
        self._next_ticket = 0
        self._ops = {
            "sum": self.MPI.SUM,
            "avg": self.MPI.SUM,
            "product": self.MPI.PROD,
            "min": self.MPI.MIN,
            "max": self.MPI.MAX,
            "band": self.MPI.BAND,
            "bor": self.MPI.BOR,
            "bxor": self.MPI.BXOR,
        }

    def thread_level_ok(self) -> bool:
        """Whether MPI may be called from backward's worker threads (one at a time)."""
        return bool(self.MPI.Query_thread() >= self.MPI.THREAD_SERIALIZED)

    def free(self) -> None:
        with self._lock:
            for r in self._requests.values():
                r.Wait()
            self._requests.clear()
        self.comm.Free()

    def abort(self, code: int = 1) -> None:
        self.comm.Abort(code)

    def barrier(self) -> None:
        self.comm.Barrier()

    def allreduce(self, buf: Any, op: str, blocking: bool = True) -> Any:
        """Sum (or ``op``) ``buf`` across processes in place; a request when not blocking."""
        mop = self._ops[op]
        if blocking:
            self.comm.Allreduce(self.MPI.IN_PLACE, buf, op=mop)
            return None
        return self.comm.Iallreduce(self.MPI.IN_PLACE, buf, op=mop)

    def bcast(self, buf: Any, root: int, blocking: bool = True) -> Any:
        if blocking:
            self.comm.Bcast(buf, root=root)
            return None
        return self.comm.Ibcast(buf, root=root)

    def allgather(self, send: Any, recv: Any, blocking: bool = True) -> Any:
        if blocking:
            self.comm.Allgather(send, recv)
            return None
        return self.comm.Iallgather(send, recv)

    def reduce_scatter_block(self, send: Any, recv: Any, op: str, blocking: bool = True) -> Any:
        mop = self._ops[op]
        if blocking:
            self.comm.Reduce_scatter_block(send, recv, op=mop)
            return None
        return self.comm.Ireduce_scatter_block(send, recv, op=mop)

    def same_everywhere(self, values: List[int]) -> bool:
        """Whether every process passed the same integers (at most ``SIGNATURE_LEN``; one small
        all-reduce of their maximum and the maximum of their negation)."""
        import numpy as np

        n = len(values)
        if n > SIGNATURE_LEN:
            raise ValueError(f"at most {SIGNATURE_LEN} values, got {n}")
        buf = self._signature
        if buf is None:
            buf = self._signature = np.zeros(2 * SIGNATURE_LEN, dtype=np.int64)
        buf[:] = 0
        buf[:n] = values
        np.negative(buf[:SIGNATURE_LEN], out=buf[SIGNATURE_LEN:])
        self.comm.Allreduce(self.MPI.IN_PLACE, buf, op=self.MPI.MAX)
        return bool((buf[:SIGNATURE_LEN] == -buf[SIGNATURE_LEN:]).all())

    # The collective of ``_C._Reducer``: ``start_sum`` / ``wait`` on bucket tensors.

    def start_sum(self, tensor: Any) -> int:
        """Start summing ``tensor`` (a contiguous bucket) in place; returns a ticket."""
        buf = tensor.numpy()
        with self._lock:
            self._test_all()
            ticket = self._next_ticket
            self._next_ticket += 1
            self._requests[ticket] = self.comm.Iallreduce(self.MPI.IN_PLACE, buf, op=self.MPI.SUM)
        return ticket

    def wait(self, ticket: int) -> None:
        with self._lock:
            req = self._requests.pop(ticket, None)
            if req is not None:
                req.Wait()

    def progress(self) -> None:
        """Let MPI advance the reductions in flight (MPI progresses non-blocking collectives
        only inside MPI calls unless it runs a progress thread of its own); skipped when
        another thread is in an MPI call on them."""
        if self._requests and self._lock.acquire(blocking=False):
            try:
                self._test_all()
            finally:
                self._lock.release()

    def _test_all(self) -> None:
        if self._requests:
            self.MPI.Request.Testall(list(self._requests.values()))


def wait_request(req: Optional[Any]) -> None:
    if req is not None:
        req.Wait()


def test_request(req: Optional[Any]) -> bool:
    return True if req is None else bool(req.Test())
