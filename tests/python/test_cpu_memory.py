"""``ferrograd.cpu``: torch.cpu's device functions, and the tensor-memory counters (what
``torch.cuda.memory_allocated`` and ``max_memory_allocated`` count on a GPU) checked against
the byte size each tensor must hold: numel x itemsize for new storage, nothing more for views,
a shared NumPy array's size while a tensor holds it."""

import importlib.util
import os

import ferrograd as fg
import numpy as np
import pytest

DTYPES = [
    fg.bool, fg.uint8, fg.int8, fg.int16, fg.int32, fg.int64,
    fg.float16, fg.bfloat16, fg.float32, fg.float64,
]  # fmt: skip


def _grown(make):
    """Bytes allocated while the result of ``make()`` is alive, then after it is dropped."""
    before = fg.cpu.memory_allocated()
    kept = make()
    during = fg.cpu.memory_allocated() - before
    del kept
    return during, fg.cpu.memory_allocated() - before


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_a_new_tensor_counts_numel_times_itemsize_until_freed(dtype):
    during, after = _grown(lambda: fg.zeros(37, 11, dtype=dtype))
    assert during == 37 * 11 * dtype.itemsize
    assert after == 0


def test_views_add_nothing_and_numpy_memory_counts_while_a_tensor_holds_it():
    x = fg.randn(64, 32)
    assert _grown(lambda: (x[3:], x.t(), x.view(32, 64), x.unsqueeze(0), x.expand(2, 64, 32))) == (
        0,
        0,
    )
    a = np.ones((100, 10), dtype=np.float32)
    assert _grown(lambda: fg.from_numpy(a)) == (4000, 0)
    assert _grown(lambda: fg.from_numpy(a[::2, 3:])) == (4 * (98 * 10 + 7), 0)  # its span
    # A copy owns its memory.
    assert _grown(lambda: fg.tensor(a)) == (4000, 0)
    assert _grown(lambda: x.t().contiguous()) == (64 * 32 * 4, 0)


def test_the_peak_holds_the_most_allocated_at_once_until_reset():
    fg.cpu.reset_peak_memory_stats()
    base = fg.cpu.memory_allocated()
    assert fg.cpu.max_memory_allocated() == base
    a = fg.empty(1000, dtype=fg.float64)  # 8000 bytes
    b = fg.empty(500, dtype=fg.float32)  # 2000 bytes
    del a
    assert fg.cpu.memory_allocated() == base + 2000
    assert fg.cpu.max_memory_allocated() == base + 10000
    fg.cpu.reset_peak_memory_stats()
    assert fg.cpu.max_memory_allocated() == base + 2000
    del b


def test_backward_frees_what_the_graph_saved():
    w = fg.randn(128, 128, requires_grad=True)
    x = fg.randn(256, 128)
    before = fg.cpu.memory_allocated()
    y = (x @ w).tanh()  # keeps the tanh output (its own and the saved one are the same tensor)
    assert fg.cpu.memory_allocated() - before == 256 * 128 * 4
    y.sum().backward()
    del y
    # What stays is w.grad.
    assert fg.cpu.memory_allocated() - before == 128 * 128 * 4


def test_device_functions_match_torch_cpu():
    assert fg.cpu.is_available() is True
    assert fg.cpu.device_count() == 1
    assert fg.cpu.current_device() == "cpu"
    fg.cpu.synchronize()
    fg.cpu.set_device("cpu")
    if importlib.util.find_spec("torch") is not None:
        import torch

        assert torch.cpu.is_available() is fg.cpu.is_available()
        assert torch.cpu.device_count() == fg.cpu.device_count()
        assert torch.cpu.current_device() == fg.cpu.current_device()


def _thp_mode():
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            return f.read().split("[")[1].split("]")[0]
    except (OSError, IndexError):
        return None


def _vm_flags_of_mapping_holding(addr):
    with open("/proc/self/smaps") as f:
        inside = False
        for line in f:
            head = line.split()[0]
            if "-" in head and ":" not in head:
                lo, hi = (int(x, 16) for x in head.split("-"))
                inside = lo <= addr < hi
            elif inside and head == "VmFlags:":
                return line.split()[1:]
    return None


@pytest.mark.skipif(_thp_mode() != "madvise", reason="needs Linux with THP in madvise mode")
@pytest.mark.skipif("MIMALLOC_ALLOW_THP" in os.environ, reason="the user chose mimalloc's THP")
def test_tensor_memory_is_not_advised_huge_and_the_process_keeps_huge_pages():
    # mimalloc madvises what it maps for transparent huge pages unless told not to, which grew
    # ferrograd's resident memory in 2 MB steps. The extension turns that off for its own
    # memory only: the kernel's flags for the mapping holding a tensor carry no huge-page
    # advice ('hg'), and the process as a whole may still use huge pages (NumPy's, torch's).
    import ctypes

    t = fg.zeros(1 << 20)
    flags = _vm_flags_of_mapping_holding(t.data_ptr())
    assert flags is not None and "hg" not in flags, flags
    pr_get_thp_disable = 42
    assert ctypes.CDLL(None).prctl(pr_get_thp_disable, 0, 0, 0, 0) == 0
