"""Data-parallel training on N processes with DistributedDataParallel, beside the same model
trained in one process on the whole batch: the two losses agree to float rounding.

Run: mpiexec -n 2 python examples/ddp.py   (any N; plain `python examples/ddp.py` is N = 1)

Each process reads its own share of every global batch (DistributedSampler), computes the
mean loss over it, and DDP averages the gradients across processes while backward runs, so
every process takes the step that the whole-batch gradient gives. Rank 0 also trains a copy of
the model on the whole batch and prints both losses. Swap the imports for torch's
(`import torch`, backend "gloo") and it runs on torch unchanged.
"""

import argparse

import ferrograd as torch
import ferrograd.distributed as dist
import numpy as np
from ferrograd import nn
from ferrograd.nn.parallel import DistributedDataParallel as DDP
from ferrograd.utils.data import DataLoader, DistributedSampler, TensorDataset

GLOBAL_BATCH = 64


def make_model():
    return nn.Sequential(nn.Linear(8, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(),
                         nn.Linear(64, 1))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()

    dist.init_process_group(backend="mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    if GLOBAL_BATCH % world:
        raise SystemExit(f"the global batch ({GLOBAL_BATCH}) must divide among {world} processes")

    rng = np.random.default_rng(0)  # the same data on every process
    x = rng.standard_normal((GLOBAL_BATCH * args.steps, 8)).astype(np.float32)
    y = np.sin(x.sum(axis=1, keepdims=True)).astype(np.float32)
    data = TensorDataset(torch.from_numpy(x), torch.from_numpy(y))
    local_batch = GLOBAL_BATCH // world
    sampler = DistributedSampler(data, shuffle=False)  # seed / set_epoch for shuffled epochs
    loader = DataLoader(data, batch_size=local_batch, sampler=sampler)

    torch.manual_seed(0)
    model = make_model()
    ddp = DDP(model)  # broadcasts rank 0's parameters
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)

    # The reference: one process, the whole global batch per step (rank 0 only).
    ref = make_model()
    ref.load_state_dict(model.state_dict())
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    shares = [list(DistributedSampler(data, world, r, shuffle=False)) for r in range(world)]

    worst = 0.0
    for step, (xb, yb) in enumerate(loader):
        opt.zero_grad()
        loss = ((ddp(xb) - yb) ** 2).mean()
        loss.backward()
        opt.step()
        # The global loss: the mean of the processes' means (equal shares).
        global_loss = loss.detach().clone()
        dist.all_reduce(global_loss, op=dist.ReduceOp.AVG)
        if rank == 0:
            idx = [i for r in range(world)
                   for i in shares[r][step * local_batch:(step + 1) * local_batch]]
            ref_opt.zero_grad()
            ref_loss = ((ref(data.tensors[0][idx]) - data.tensors[1][idx]) ** 2).mean()
            ref_loss.backward()
            ref_opt.step()
            worst = max(worst, abs(global_loss.item() - ref_loss.item()))
            print(f"step {step:2d}: {world} processes {global_loss.item():.6f}   "
                  f"1 process, whole batch {ref_loss.item():.6f}")
    if rank == 0:
        print(f"max |loss difference| = {worst:.2e}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
