"""A process that raises mid-step while the other waits in a collective: the job must end (MPI
has no timeout; ferrograd.distributed aborts the job on an uncaught exception) instead of
hanging; with the argument ``kill`` the process is killed by a signal instead, with ``hang`` it
hangs (MPICH's ``MPIEXEC_TIMEOUT`` ends the job). Run by
tests/python/test_distributed.py under ``mpiexec -n 2``."""

from __future__ import annotations

import os
import signal
import sys
import time

import ferrograd as torch
import ferrograd.distributed as dist

dist.init_process_group("mpi")
t = torch.ones(4)
dist.all_reduce(t)
if dist.get_rank() == 1:
    if sys.argv[1:] == ["kill"]:
        os.kill(os.getpid(), signal.SIGKILL)
    if sys.argv[1:] == ["hang"]:
        time.sleep(600)  # alive but gone: only mpiexec's timeout ends the job
    raise ValueError("rank 1 fails mid-step")
dist.all_reduce(t)  # rank 0 would wait here forever without the abort
print("unreachable: rank 0 finished a collective rank 1 never joined", flush=True)
