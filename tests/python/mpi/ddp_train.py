"""DistributedDataParallel on 2+ processes; run by tests/python/test_distributed.py under
``mpiexec -n 2``. The independent truth is the same model trained in one process on the whole
batch (each process computes it itself). Exits non-zero (the job aborts) on a failed check."""

from __future__ import annotations

import threading

import ferrograd as torch
import ferrograd.distributed as dist
import numpy as np
from ferrograd import nn
from ferrograd.nn.parallel import DistributedDataParallel as DDP

STEPS = 20
PER_RANK = 4


def mlp(dtype) -> nn.Module:
    return nn.Sequential(
        nn.Linear(6, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 1)
    ).to(dtype)


def batch(rank: int, step: int, dtype, size: int = PER_RANK):
    g = np.random.default_rng(1000 * step + rank)
    x = torch.tensor(g.standard_normal((size, 6)), dtype=dtype)
    y = torch.tensor(g.standard_normal((size, 1)), dtype=dtype)
    return x, y


def flat_params(m: nn.Module) -> np.ndarray:
    return np.concatenate([p.detach().numpy().ravel() for p in m.parameters()])


def check_identical_across_ranks(m: nn.Module, n: int, what: str) -> None:
    mine = torch.tensor(flat_params(m).astype(np.float64))
    allp = torch.zeros(n * mine.numel(), dtype=torch.float64)
    dist.all_gather_into_tensor(allp, mine)
    rows = allp.numpy().reshape(n, -1)
    for k in range(1, n):
        assert rows[k].tobytes() == rows[0].tobytes(), f"{what}: rank {k} differs from rank 0"


def train_matches_full_batch(dtype, rtol: float, r: int, n: int) -> None:
    torch.manual_seed(r)  # different initial weights per rank: DDP must broadcast rank 0's
    model = mlp(dtype)
    ddp = DDP(model, bucket_cap_mb=0.0002)  # ~200 B buckets: several of them
    assert len(ddp.reducer.bucket_indices()) >= 3, ddp.reducer.bucket_indices()
    check_identical_across_ranks(model, n, "after construction")
    ref = mlp(dtype)
    ref.load_state_dict(model.state_dict())
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.05, momentum=0.9)
    for step in range(STEPS):
        x, y = batch(r, step, dtype)
        opt.zero_grad()
        loss = ((ddp(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        check_identical_across_ranks(model, n, f"{dtype} step {step}")
        # One process, the whole batch (every rank's share), mean over it.
        xs, ys = zip(*(batch(k, step, dtype) for k in range(n)))
        ref_opt.zero_grad()
        ref_loss = ((ref(torch.cat(xs)) - torch.cat(ys)) ** 2).mean()
        ref_loss.backward()
        ref_opt.step()
        np.testing.assert_allclose(
            flat_params(model), flat_params(ref), rtol=rtol, atol=rtol,
            err_msg=f"{dtype} step {step}",
        )


class Branches(nn.Module):
    """Independent branches: backward runs them (and their hooks) on several threads at once."""

    def __init__(self) -> None:
        super().__init__()
        self.branches = nn.ModuleList(
            [nn.Sequential(nn.Linear(6, 256), nn.Tanh(), nn.Linear(256, 1)) for _ in range(8)]
        )

    def forward(self, x):
        return sum(b(x) for b in self.branches)


def concurrent_hooks_with_one_bucket_per_parameter(r: int, n: int) -> None:
    torch.manual_seed(r)
    model = Branches().double()
    ddp = DDP(model, bucket_cap_mb=1e-9)
    assert len(ddp.reducer.bucket_indices()) == len(list(model.parameters()))
    ref = Branches().double()
    ref.load_state_dict(model.state_dict())
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.01)
    threads = set()
    for p in model.parameters():
        p.register_post_accumulate_grad_hook(lambda p: threads.add(threading.get_ident()))
    for step in range(5):
        # 256 rows x 256 units per branch: large enough for backward to spread the branches
        # over its threads, so hooks start all-reduces from several threads at once.
        x, y = batch(r, step, torch.float64, 256)
        opt.zero_grad()
        ((ddp(x) - y) ** 2).mean().backward()
        opt.step()
        check_identical_across_ranks(model, n, f"branches step {step}")
        xs, ys = zip(*(batch(k, step, torch.float64, 256) for k in range(n)))
        ref_opt.zero_grad()
        ((ref(torch.cat(xs)) - torch.cat(ys)) ** 2).mean().backward()
        ref_opt.step()
        np.testing.assert_allclose(flat_params(model), flat_params(ref), rtol=1e-10, atol=1e-12)
    assert len(threads) > 1 or torch.get_num_threads() == 1, "hooks ran on one thread only"


def buckets_start_during_backward(r: int, n: int) -> None:
    torch.manual_seed(0)
    model = mlp(torch.float64)
    ddp = DDP(model, bucket_cap_mb=0.0002)
    backend = ddp._backend
    accumulated = []
    started_after = []
    for p in model.parameters():
        p.register_post_accumulate_grad_hook(lambda p: accumulated.append(1))
    start_sum = backend.start_sum

    def recording_start_sum(t):
        started_after.append(len(accumulated))
        return start_sum(t)

    backend.start_sum = recording_start_sum
    try:
        x, y = batch(r, 0, torch.float64)
        ((ddp(x) - y) ** 2).mean().backward()
    finally:
        del backend.start_sum
    total = len(list(model.parameters()))
    assert len(started_after) == len(ddp.reducer.bucket_indices())
    assert started_after[0] < total - 1, f"first bucket started only at the end: {started_after}"


def no_sync_accumulates_then_averages(r: int, n: int) -> None:
    torch.manual_seed(0)
    model = mlp(torch.float64)
    ddp = DDP(model, bucket_cap_mb=0.0002)
    ref = mlp(torch.float64)
    ref.load_state_dict(model.state_dict())
    x, y = batch(r, 99, torch.float64)
    with ddp.no_sync():
        ((ddp(x[:2]) - y[:2]) ** 2).mean().backward()
    local = [p.grad.clone() for p in model.parameters()]
    ((ddp(x[2:]) - y[2:]) ** 2).mean().backward()
    for k in range(n):
        xk, yk = batch(k, 99, torch.float64)
        ((ref(xk[:2]) - yk[:2]) ** 2).mean().backward()
        ((ref(xk[2:]) - yk[2:]) ** 2).mean().backward()
    for p, q in zip(model.parameters(), ref.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy() / n, rtol=1e-12, atol=1e-14)
    # Inside no_sync the gradient was this process's own.
    x0, y0 = batch(r, 99, torch.float64)
    ref.zero_grad()
    ((ref(x0[:2]) - y0[:2]) ** 2).mean().backward()
    for g, q in zip(local, ref.parameters()):
        np.testing.assert_allclose(g.numpy(), q.grad.numpy(), rtol=1e-12, atol=1e-14)


def forward_decides_whether_backward_averages(r: int, n: int) -> None:
    """torch's rule: a forward inside no_sync gives a local backward even outside it, and a
    forward outside gives an averaged one even when backward runs inside it."""
    torch.manual_seed(0)
    model = mlp(torch.float64)
    ddp = DDP(model)
    x, y = batch(r, 7, torch.float64)
    ref = mlp(torch.float64)
    ref.load_state_dict(model.state_dict())
    ((ref(x) - y) ** 2).mean().backward()
    own = [q.grad.clone() for q in ref.parameters()]

    with ddp.no_sync():
        loss = ((ddp(x) - y) ** 2).mean()
    loss.backward()
    for p, g in zip(model.parameters(), own):
        np.testing.assert_array_equal(p.grad.numpy(), g.numpy())

    ddp.zero_grad()
    loss = ((ddp(x) - y) ** 2).mean()
    with ddp.no_sync():
        loss.backward()
    ref.zero_grad()
    for k in range(n):
        xk, yk = batch(k, 7, torch.float64)
        ((ref(xk) - yk) ** 2).mean().backward()
    for p, q in zip(model.parameters(), ref.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy() / n, rtol=1e-12, atol=1e-14)


class Heads(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(3, 1).double()
        self.b = nn.Linear(3, 1).double()
        self.c = nn.Linear(3, 1).double()  # never used

    def forward(self, x, use_b: bool):
        out = self.a(x)
        return out + self.b(x) if use_b else out


def unused_parameters(r: int, n: int) -> None:
    torch.manual_seed(0)
    m = Heads()
    ddp = DDP(m, find_unused_parameters=True)
    x = torch.full((2, 3), float(r + 1), dtype=torch.float64)
    ddp(x, use_b=(r == 0)).sum().backward()
    # Closed form: d/dW sum(W x + b) = column sums of x; rank k's x is all k + 1.
    rows = 2.0
    mean_x = rows * np.mean(np.arange(1, n + 1))
    np.testing.assert_allclose(m.a.weight.grad.numpy(), np.full((1, 3), mean_x))
    np.testing.assert_allclose(m.a.bias.grad.numpy(), [rows])
    # Only rank 0 used b: every rank gets rank 0's gradient / n.
    np.testing.assert_allclose(m.b.weight.grad.numpy(), np.full((1, 3), rows * 1.0 / n))
    np.testing.assert_allclose(m.b.bias.grad.numpy(), [rows / n])
    assert m.c.weight.grad is None and m.c.bias.grad is None, "used by nobody: left alone"

    strict = DDP(Heads())
    try:
        strict(x, use_b=True).sum().backward()
    except RuntimeError as e:
        assert "Expected to have finished reduction in the prior iteration" in str(e), e
        assert "find_unused_parameters=True" in str(e)
    else:
        raise AssertionError("an unused parameter without find_unused_parameters must raise")


def mismatched_models_are_refused(r: int, n: int) -> None:
    try:
        DDP(nn.Linear(3 + r, 2))
    except RuntimeError as e:
        assert "different parameter shapes" in str(e), e
    else:
        raise AssertionError("models of different shapes must be refused")
    try:
        DDP(nn.Linear(3, 2).double() if r else nn.Linear(3, 2))
    except RuntimeError as e:
        assert "different parameter shapes, dtypes" in str(e), e
    else:
        raise AssertionError("models of different dtypes must be refused")
    try:
        DDP(nn.Linear(3, 2), bucket_cap_mb=25 + r)
    except RuntimeError as e:
        assert "different bucket_cap_mb" in str(e), e
    else:
        raise AssertionError("different bucket sizes must be refused")


def main() -> None:
    dist.init_process_group("mpi")
    r, n = dist.get_rank(), dist.get_world_size()
    assert n >= 2, "run under mpiexec -n 2"
    train_matches_full_batch(torch.float64, 1e-10, r, n)
    train_matches_full_batch(torch.float32, 2e-5, r, n)
    buckets_start_during_backward(r, n)
    concurrent_hooks_with_one_bucket_per_parameter(r, n)
    no_sync_accumulates_then_averages(r, n)
    forward_decides_whether_backward_averages(r, n)
    unused_parameters(r, n)
    mismatched_models_are_refused(r, n)
    dist.destroy_process_group()
    print(f"rank {r}: ddp OK", flush=True)


if __name__ == "__main__":
    main()
