"""How much of the gradient all-reduce DistributedDataParallel hides behind backward.

Run: mpiexec -n 2 python benches/ddp_overlap.py [--bucket-cap-mb 25] [--batch 64] [--iters 10]

A 10M-parameter float32 MLP, on every process. Four timings per iteration (median over
iterations, slowest process), each after a barrier:

- backward:      loss.backward() alone, no communication;
- all-reduce:    averaging the gradients alone (same buckets, started after backward);
- sequential:    backward, then the all-reduce (DDP's buckets filled and reduced afterwards);
- ddp:           loss.backward() under DDP, buckets reduced while backward runs.

- mpi alone:     one blocking MPI_Allreduce of a flat buffer of every gradient (no copies);
- train step:    forward + DDP backward + SGD step, and the samples per second it gives.

hidden = (sequential - ddp) / all-reduce: the fraction of the communication overlapped.
Run with ``-n 1`` too for the scaling (the same per-process batch: weak scaling).
"""

from __future__ import annotations

import argparse
import statistics
import time

import ferrograd as torch
import ferrograd.distributed as dist
from ferrograd import nn
from ferrograd.nn.parallel import DistributedDataParallel as DDP

WIDTHS = [1024, 2048, 2048, 1024, 1024, 512]  # 9.97M parameters


def make_model() -> nn.Module:
    layers = []
    for a, b in zip(WIDTHS, WIDTHS[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(WIDTHS[-1], 1))


def timed(fn) -> float:
    dist.barrier()
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def slowest(seconds: float) -> float:
    t = torch.tensor([seconds], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bucket-cap-mb", type=float, default=25.0)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--iters", type=int, default=10)
    args = ap.parse_args()

    dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = make_model()
    ddp = DDP(model, bucket_cap_mb=args.bucket_cap_mb)
    params = list(model.parameters())
    n_params = sum(p.numel() for p in params)
    x = torch.randn(args.batch, WIDTHS[0])
    y = torch.randn(args.batch, 1)
    backend = ddp._backend

    def loss_of(m):
        return ((m(x) - y) ** 2).mean()

    def backward_only():
        with ddp.no_sync():
            loss.backward()

    def allreduce_only():
        # DDP's reducer, its buckets filled in backward's order once backward is over.
        for i in reversed(range(len(params))):
            ddp.reducer.mark_ready(i, backend)
        ddp.reducer.finalize(backend, False)

    def sequential():
        backward_only()
        allreduce_only()

    def overlapped():
        loss.backward()

    flat = torch.zeros(n_params)
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-6)

    def mpi_alone():
        backend.allreduce(flat.numpy(), "sum")

    def train_step():
        opt.zero_grad()
        loss_of(ddp).backward()
        opt.step()

    times = {"backward": [], "all-reduce": [], "sequential": [], "ddp": [], "mpi alone": [],
             "train step": []}
    for it in range(args.iters + 1):
        for name, fn in [("backward", backward_only), ("sequential", sequential),
                         ("ddp", overlapped)]:
            ddp.zero_grad()
            loss = loss_of(ddp if name == "ddp" else ddp.module)
            t = timed(fn)
            if it:
                times[name].append(t)
        # The all-reduce alone, on the gradients the last backward left.
        for name, fn in [("all-reduce", allreduce_only), ("mpi alone", mpi_alone),
                         ("train step", train_step)]:
            t = timed(fn)
            if it:
                times[name].append(t)
    med = {k: slowest(statistics.median(v)) for k, v in times.items()}
    if rank == 0:
        buckets = ddp.reducer.bucket_indices()
        sizes = [sum(params[i].numel() for i in b) * 4 / 2**20 for b in buckets]
        print(f"{world} processes, {n_params / 1e6:.2f}M float32 parameters, batch "
              f"{args.batch}/process, bucket_cap_mb={args.bucket_cap_mb}: {len(buckets)} buckets "
              f"of {', '.join(f'{s:.1f}' for s in sizes)} MiB")
        for k in ("backward", "all-reduce", "sequential", "ddp", "mpi alone", "train step"):
            print(f"  {k:<11} {med[k] * 1e3:8.1f} ms")
        if world > 1:
            hidden = (med["sequential"] - med["ddp"]) / med["all-reduce"]
            print(f"  hidden: {hidden:.0%} of the all-reduce overlapped with backward")
            gb = 2 * (world - 1) / world * n_params * 4 / 1e9
            print(f"  MPI_Allreduce: {gb / med['mpi alone']:.2f} GB/s of ring traffic per process")
        print(f"  throughput: {args.batch * world / med['train step']:.0f} samples/s")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
