"""NumPy is imported on first use, not by ``import ferrograd``; everything that takes or gives
NumPy values still does once it is."""

import subprocess
import sys

import ferrograd as fg
import numpy as np


def _run(code: str) -> str:
    return subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout.strip()


def test_import_and_autograd_do_not_load_numpy():
    out = _run(
        "import sys, ferrograd as fg\n"
        "x = fg.ones(3, 2, requires_grad=True)\n"
        "y = (x[0] * 2 + x[1:].sum()).tanh().sum()\n"
        "y.backward()\n"
        "print('numpy' in sys.modules, tuple(x.grad.shape))\n"
    )
    assert out == "False (3, 2)"


def test_numpy_values_are_recognised_once_numpy_is_loaded():
    a = np.arange(6, dtype=np.float64).reshape(2, 3)
    t = fg.tensor(a)
    assert t.dtype == fg.float64 and t.tolist() == a.tolist()
    assert fg.from_numpy(a).tolist() == a.tolist()
    assert t[np.int64(1)].tolist() == a[1].tolist()
    assert t[np.array([1, 0])].tolist() == a[[1, 0]].tolist()
    assert fg.zeros(np.int64(2), 3).shape == (2, 3)
    t[0] = np.float32(7.0)
    assert t[0].tolist() == [7.0, 7.0, 7.0]


def test_tensor_from_list_loads_numpy_in_a_fresh_process():
    out = _run(
        "import sys, ferrograd as fg\n"
        "t = fg.tensor([[1, 2], [3, 4]])\n"
        "print('numpy' in sys.modules, t.dtype, t.sum().item())\n"
    )
    assert out == "True ferrograd.int64 10"


def test_lazy_module_reads_stay_numpys_objects_on_every_read():
    # The proxy keeps each attribute on its class after the first read: later reads must give
    # NumPy's own object, with Python functions unbound (no proxy passed as first argument).
    from ferrograd._lazy import np as lazy

    for _ in range(2):
        assert lazy.float32 is np.float32 and lazy.dtype is np.dtype and lazy.pi == np.pi
        assert lazy.newaxis is None and lazy.moveaxis is np.moveaxis
        assert lazy.moveaxis(np.zeros((2, 3)), 0, 1).shape == (3, 2)
        assert lazy.asarray([1, 2]).tolist() == [1, 2]
