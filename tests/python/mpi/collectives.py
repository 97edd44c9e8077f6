"""Collectives on 2+ processes against closed forms; run by tests/python/test_distributed.py
under ``mpiexec -n 2``. Exits non-zero (the job aborts) on the first failed check."""

from __future__ import annotations

import ferrograd as torch
import ferrograd.distributed as dist
import numpy as np
from ferrograd.utils.data import DistributedSampler


def expect_error(kind: type, text: str, fn, *args, **kwargs) -> None:
    try:
        fn(*args, **kwargs)
    except kind as e:
        assert text in str(e), f"expected {text!r} in {e!r}"
        return
    raise AssertionError(f"expected {kind.__name__}({text!r})")


def main() -> None:
    expect_error(ValueError, "Default process group has not been initialized", dist.get_rank)
    expect_error(ValueError, "has not been initialized", dist.all_reduce, torch.ones(2))
    assert not dist.is_initialized()
    expect_error(RuntimeError, "doesn't have GLOO built in", dist.init_process_group, "gloo")
    dist.init_process_group(backend="mpi")
    assert dist.is_initialized() and dist.get_backend() == "mpi"
    expect_error(ValueError, "twice", dist.init_process_group, "mpi")
    r, n = dist.get_rank(), dist.get_world_size()
    assert n >= 2, "run under mpiexec -n 2"
    ranks = np.arange(n, dtype=np.float64)

    # all_reduce: each op against its closed form, in place and without copies.
    for op, expected in [
        (dist.ReduceOp.SUM, (ranks + 1).sum()),
        (dist.ReduceOp.AVG, (ranks + 1).mean()),
        (dist.ReduceOp.MAX, n),
        (dist.ReduceOp.MIN, 1.0),
        (dist.ReduceOp.PRODUCT, np.prod(ranks + 1)),
    ]:
        for dtype in (torch.float32, torch.float64):
            t = torch.full((2, 3), float(r + 1), dtype=dtype)
            ptr, version = t.data_ptr(), t._version
            dist.all_reduce(t, op=op)
            assert t.data_ptr() == ptr
            assert t._version > version, "in-place writes bump the version"
            np.testing.assert_allclose(t.numpy(), np.full((2, 3), expected), rtol=1e-6)
    ti = torch.tensor([r, 10 * r])
    dist.all_reduce(ti)
    assert ti.tolist() == [int(ranks.sum()), int(10 * ranks.sum())]
    # A contiguous view of a larger tensor: MPI writes into the base tensor's memory.
    big = torch.zeros(6)
    big[2:5] = float(r + 1)
    dist.all_reduce(big[2:5])
    assert big.tolist() == [0, 0, *[float((ranks + 1).sum())] * 3, 0]
    # async_op: a Work whose wait() delivers the result.
    t = torch.full((4,), float(r))
    work = dist.all_reduce(t, op=dist.ReduceOp.AVG, async_op=True)
    assert work.wait() and work.is_completed()
    np.testing.assert_allclose(t.numpy(), np.full(4, ranks.mean()))

    # broadcast from every root.
    for root in range(n):
        t = torch.full((3,), float(r * 7 + 1))
        dist.broadcast(t, src=root)
        assert t.tolist() == [float(root * 7 + 1)] * 3
    # all_gather into a list, and into one tensor.
    mine = torch.tensor([float(r), float(r) + 0.5])
    out = [torch.zeros(2) for _ in range(n)]
    dist.all_gather(out, mine)
    assert [o.tolist() for o in out] == [[float(k), k + 0.5] for k in range(n)]
    flat = torch.zeros(2 * n)
    dist.all_gather_into_tensor(flat, mine)
    assert flat.tolist() == [v for k in range(n) for v in (float(k), k + 0.5)]
    # reduce_scatter: output of rank k = sum over processes of their input_list[k].
    ins = [torch.full((2,), float(10 * k + r)) for k in range(n)]
    o = torch.zeros(2)
    dist.reduce_scatter(o, ins)
    assert o.tolist() == [float(10 * r * n + ranks.sum())] * 2
    big_in = torch.cat([torch.full((2,), float(10 * k + r)) for k in range(n)])
    o2 = torch.zeros(2)
    dist.reduce_scatter_tensor(o2, big_in, op=dist.ReduceOp.MAX)
    assert o2.tolist() == [float(10 * r + n - 1)] * 2

    # Bad input: a clear error on every process, and no hang.
    expect_error(RuntimeError, "Tensors must be contiguous", dist.all_reduce, torch.ones(3, 2).t())
    expect_error(TypeError, "of type torch.Tensor", dist.all_reduce, [1.0])
    expect_error(TypeError, "must be a ReduceOp", dist.all_reduce, torch.ones(1), op="sum")
    expect_error(ValueError, "AVG needs a floating-point", dist.all_reduce, torch.tensor([1]),
                 op=dist.ReduceOp.AVG)
    expect_error(ValueError, "Invalid src rank", dist.broadcast, torch.ones(1), src=n)
    expect_error(ValueError, "world_size", dist.all_gather, [torch.zeros(2)], mine)
    expect_error(RuntimeError, "different shapes", dist.all_reduce, torch.ones(r + 1))
    expect_error(RuntimeError, "different shapes", dist.broadcast,
                 torch.ones(2, dtype=torch.float64 if r else torch.float32))
    # The group is still usable after those errors.
    t = torch.ones(1)
    dist.all_reduce(t)
    assert t.item() == n
    dist.barrier()

    # DistributedSampler takes rank and world size from the group.
    s = DistributedSampler(list(range(11)), shuffle=False)
    total = -(-11 // n) * n
    padded = (list(range(11)) * 2)[:total]
    assert (s.rank, s.num_replicas) == (r, n)
    assert list(s) == padded[r::n]

    dist.destroy_process_group()
    assert not dist.is_initialized()
    expect_error(ValueError, "has not been initialized", dist.barrier)
    print(f"rank {r}: collectives OK", flush=True)


if __name__ == "__main__":
    main()
