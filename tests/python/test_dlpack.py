"""DLPack both ways: NumPy always, torch when installed. Sharing is checked by writing through one
side and reading through the other; lifetimes with weakrefs, refcounts and gc."""

from __future__ import annotations

import ctypes
import gc
import sys
import warnings
import weakref

import ferrograd as fg
import numpy as np
import pytest
from ferrograd.utils.dlpack import to_dlpack

DTYPES = [np.float32, np.float64, np.int64, np.bool_]


def _sample(dtype, shape=(3, 4)):
    n = int(np.prod(shape))
    return (
        (np.arange(n) % 3 == 1 if dtype is np.bool_ else np.arange(n)).astype(dtype).reshape(shape)
    )


def _other(arr):
    """Values differing from ``arr``'s everywhere (a write to detect)."""
    return ~arr if arr.dtype == np.bool_ else arr * 2 + 7


# ----- ferrograd -> NumPy ------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_numpy_reads_and_writes_ferrograd_memory(dtype):
    src = _sample(dtype)
    t = fg.tensor(src)
    a = np.from_dlpack(t)
    assert a.dtype == src.dtype and a.shape == src.shape
    np.testing.assert_array_equal(a, src)
    a[...] = _other(src)  # through NumPy ...
    np.testing.assert_array_equal(t.numpy(), _other(src))  # ... seen by ferrograd
    t.zero_()  # and back
    np.testing.assert_array_equal(a, np.zeros_like(src))


@pytest.mark.parametrize("dtype", DTYPES)
def test_ferrograd_reads_and_writes_numpy_memory(dtype):
    src = _sample(dtype)
    arr = src.copy()
    t = fg.from_dlpack(arr)
    assert t.dtype == fg.from_numpy(src).dtype and tuple(t.shape) == src.shape
    np.testing.assert_array_equal(t.numpy(), src)
    t.zero_()
    np.testing.assert_array_equal(arr, np.zeros_like(src))
    arr[...] = _other(src)
    np.testing.assert_array_equal(t.numpy(), _other(src))


def test_non_contiguous_views_keep_their_strides():
    base = fg.tensor(_sample(np.float64, (4, 6)))
    for view in (base.t(), base[:, ::2], base[1:, 2:].t()):
        a = np.from_dlpack(view)
        expect = view.numpy()
        np.testing.assert_array_equal(a, expect)
        assert a.strides == tuple(s * 8 for s in view.stride())
        a[...] = -1.0
        np.testing.assert_array_equal(view.numpy(), -np.ones(expect.shape))
    arr = _sample(np.float32, (5, 6))
    for view in (arr.T, arr[::2, 1:], arr[1:, ::3].T):
        t = fg.from_dlpack(view)
        np.testing.assert_array_equal(t.numpy(), view)
        assert tuple(s * 4 for s in t.stride()) == view.strides
        t.fill_(9.0)
        assert (view == 9.0).all()


def test_offsets_of_slices():
    base = fg.arange(10, dtype=fg.float64)
    tail = base[3:]
    a = np.from_dlpack(tail)
    np.testing.assert_array_equal(a, np.arange(3, 10, dtype=np.float64))
    a[0] = 100.0
    assert base[3].item() == 100.0 and base[2].item() == 2.0
    arr = np.arange(12, dtype=np.int64)
    t = fg.from_dlpack(arr[5:9])
    assert t.tolist() == [5, 6, 7, 8]
    t[0] = -5
    assert arr[5] == -5 and arr[4] == 4


def test_zero_dim_and_empty():
    s = fg.tensor(2.5)
    a = np.from_dlpack(s)
    assert a.shape == () and a[()] == 2.5
    back = fg.from_dlpack(np.array(7, dtype=np.int64))
    assert back.shape == () and back.item() == 7
    for shape in [(0,), (2, 0, 3)]:
        e = fg.zeros(*shape)
        a = np.from_dlpack(e)
        assert a.shape == shape and a.dtype == np.float32
        t = fg.from_dlpack(np.zeros(shape, dtype=np.float64))
        assert tuple(t.shape) == shape and t.dtype == fg.float64 and t.numel() == 0


def test_device_and_dlpack_device():
    assert fg.ones(2).__dlpack_device__() == (1, 0)
    assert fg.ones(2).__dlpack_device__() == tuple(np.ones(2).__dlpack_device__())


# ----- capsules ----------------------------------------------------------------------------------


def test_legacy_and_versioned_capsules_are_renamed_when_consumed():
    t = fg.arange(4, dtype=fg.float64)
    legacy = t.__dlpack__()
    assert 'capsule object "dltensor"' in repr(legacy)
    u = fg.from_dlpack(legacy)
    assert 'capsule object "used_dltensor"' in repr(legacy)
    versioned = t.__dlpack__(max_version=(1, 0))
    assert 'capsule object "dltensor_versioned"' in repr(versioned)
    v = fg.from_dlpack(versioned)
    assert 'capsule object "used_dltensor_versioned"' in repr(versioned)
    u[0] = 10.0
    v[1] = 11.0
    assert t.tolist() == [10.0, 11.0, 2.0, 3.0]
    for cap in (legacy, versioned):
        with pytest.raises(RuntimeError, match="can be consumed only once"):
            fg.from_dlpack(cap)
    with pytest.raises(RuntimeError, match="invalid capsule"):
        fg.from_dlpack(42)


def test_foreign_capsules_legacy_and_versioned():
    arr = np.arange(6, dtype=np.float64)
    # NumPy's own capsules, as an old-style consumer gets them.
    t = fg.from_dlpack(arr.__dlpack__())
    v = fg.from_dlpack(arr.__dlpack__(max_version=(1, 0)))
    arr[2] = -2.0
    assert t[2].item() == -2.0 and v[2].item() == -2.0


def test_own_capsule_shares_the_version_counter():
    t = fg.zeros(3)
    u = fg.from_dlpack(to_dlpack(t))
    before = t._version
    u.add_(1.0)
    assert t._version == before + 1 and t.tolist() == [1.0, 1.0, 1.0]
    direct = fg.from_dlpack(t)
    direct.mul_(2.0)
    assert t._version == before + 2


def test_version_counter_of_an_imported_tensor_counts_ferrograd_writes():
    arr = np.zeros(3)
    t = fg.from_dlpack(arr)
    v0 = t._version
    t.add_(1.0)
    assert t._version == v0 + 1
    # A write through NumPy is invisible to the counter (as with from_numpy, and in torch).
    arr[0] = 5.0
    assert t._version == v0 + 1 and t[0].item() == 5.0


def test_copy_argument():
    arr = np.arange(3, dtype=np.float64)
    shared = fg.from_dlpack(arr, copy=False)
    copied = fg.from_dlpack(arr, copy=True)
    arr[0] = 42.0
    assert shared[0].item() == 42.0 and copied[0].item() == 0.0
    t = fg.arange(3, dtype=fg.float64)
    a = np.from_dlpack(t, copy=True)
    a[0] = 9.0
    assert t[0].item() == 0.0
    b = np.from_dlpack(t, copy=False)
    b[0] = 9.0
    assert t[0].item() == 9.0


def test_read_only_producer_warns_and_shares():
    arr = np.arange(3, dtype=np.float64)
    arr.flags.writeable = False
    with pytest.warns(UserWarning, match="read-only"):
        t = fg.from_dlpack(arr)
    assert t.tolist() == [0.0, 1.0, 2.0]
    assert t.data_ptr() == arr.ctypes.data


# ----- lifetimes ---------------------------------------------------------------------------------


def test_numpy_consumer_outlives_ferrograd_producer():
    t = fg.arange(5, dtype=fg.float64)
    a = np.from_dlpack(t[1:])
    del t
    gc.collect()
    np.testing.assert_array_equal(a, [1.0, 2.0, 3.0, 4.0])
    a += 1.0  # the memory is still ours to write
    np.testing.assert_array_equal(a, [2.0, 3.0, 4.0, 5.0])


def test_ferrograd_consumer_keeps_numpy_producer_alive_exactly_as_long_as_needed():
    arr = np.arange(4, dtype=np.float64)
    ref = weakref.ref(arr)
    count = sys.getrefcount(arr)
    t = fg.from_dlpack(arr)
    view = t[1:]
    assert sys.getrefcount(arr) > count  # the producer's deleter holds it
    del arr
    gc.collect()
    assert ref() is not None
    del t
    gc.collect()
    assert ref() is not None and view.tolist() == [1.0, 2.0, 3.0]  # a view still needs it
    del view
    gc.collect()
    assert ref() is None  # the deleter ran: nothing leaks


def test_refcount_restored_after_import():
    arr = np.ones(3)
    count = sys.getrefcount(arr)
    for _ in range(20):
        t = fg.from_dlpack(arr)
        del t
    gc.collect()
    assert sys.getrefcount(arr) == count


def _foreign_backed():
    """A ferrograd tensor over a NumPy array (from_numpy), and a weakref to that array: it dies
    exactly when ferrograd's storage does."""
    arr = np.arange(3, dtype=np.float64)
    return fg.from_numpy(arr), weakref.ref(arr)


def test_unconsumed_capsule_frees_the_storage():
    for versioned in (False, True):
        t, ref = _foreign_backed()
        cap = t.__dlpack__(max_version=(1, 0) if versioned else None)
        del t
        gc.collect()
        assert ref() is not None  # the capsule keeps the storage
        del cap
        gc.collect()
        assert ref() is None


def test_numpy_consumer_releases_the_storage_when_done():
    t, ref = _foreign_backed()
    a = np.from_dlpack(t)
    del t
    gc.collect()
    assert ref() is not None and a.tolist() == [0.0, 1.0, 2.0]
    del a
    gc.collect()
    assert ref() is None


def test_consumed_capsule_dies_without_freeing_twice():
    t, ref = _foreign_backed()
    cap = t.__dlpack__()
    u = fg.from_dlpack(cap)
    del cap, t
    gc.collect()
    assert ref() is not None and u.tolist() == [0.0, 1.0, 2.0]
    del u
    gc.collect()
    assert ref() is None


# ----- errors ------------------------------------------------------------------------------------


def test_requires_grad_refused_with_torchs_message():
    w = fg.ones(2, requires_grad=True)
    msg = r"Can't export tensors that require gradient, use tensor.detach\(\)"
    with pytest.raises(BufferError, match=msg):
        w.__dlpack__()
    with pytest.raises(BufferError, match=msg):
        np.from_dlpack(w)
    with pytest.raises(BufferError, match=msg):
        fg.from_dlpack(w)
    np.testing.assert_array_equal(np.from_dlpack(w.detach()), [1.0, 1.0])


@pytest.mark.parametrize("dtype", ["uint16", "uint32", "complex64"])
def test_unsupported_dtypes_are_named(dtype):
    with pytest.raises(TypeError, match=f"type {dtype}"):
        fg.from_dlpack(np.zeros(2, dtype=dtype))


def test_stream_and_device_arguments():
    t = fg.ones(2)
    t.__dlpack__(stream=None)
    t.__dlpack__(stream=-1)
    t.__dlpack__(dl_device=(1, 0))
    with pytest.raises(BufferError, match="stream"):
        t.__dlpack__(stream=1)
    with pytest.raises(TypeError, match="stream must be"):
        t.__dlpack__(stream="default")
    with pytest.raises(BufferError, match="unsupported device requested"):
        t.__dlpack__(dl_device=(2, 0))
    with pytest.raises(RuntimeError, match="CPU only"):
        fg.from_dlpack(np.ones(2), device="cuda")


class _OnGpu:
    """A producer claiming CUDA memory: ferrograd must refuse before asking for a capsule."""

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, **kwargs):  # pragma: no cover - must not be called
        raise AssertionError("called")


def test_non_cpu_producer_refused():
    with pytest.raises(BufferError, match=r"DLPack device \(2, 0\)"):
        fg.from_dlpack(_OnGpu())


class _OldProducer:
    """A pre-1.0 producer whose __dlpack__ takes no max_version/copy keywords."""

    def __init__(self, arr):
        self.arr = arr

    def __dlpack_device__(self):
        return self.arr.__dlpack_device__()

    def __dlpack__(self, stream=None):
        return self.arr.__dlpack__()


def test_old_producers_get_the_legacy_call():
    arr = np.arange(3, dtype=np.float64)
    t = fg.from_dlpack(_OldProducer(arr))
    arr[1] = 8.0
    assert t.tolist() == [0.0, 8.0, 2.0]
    c = fg.from_dlpack(_OldProducer(arr), copy=True)  # ferrograd copies itself
    arr[1] = 0.0
    assert c.tolist() == [0.0, 8.0, 2.0]


def test_negative_strides_refused():
    with pytest.raises(ValueError, match="negative stride"):
        fg.from_dlpack(np.arange(4.0)[::-1])


# ----- torch -------------------------------------------------------------------------------------

TORCH_DTYPES = ["float32", "float64", "int64", "bool"]


@pytest.mark.parametrize("name", TORCH_DTYPES)
def test_torch_round_trip_shares_memory(name):
    torch = pytest.importorskip("torch")
    src = _sample(getattr(np, name) if name != "bool" else np.bool_)
    t = fg.tensor(src)
    tt = torch.from_dlpack(t)
    assert str(tt.dtype) == f"torch.{name}" and tuple(tt.shape) == src.shape
    np.testing.assert_array_equal(tt.numpy(), src)
    tt.zero_()
    np.testing.assert_array_equal(t.numpy(), np.zeros_like(src))
    back = fg.from_dlpack(tt)
    assert back.data_ptr() == tt.data_ptr() == t.data_ptr()
    tt[0, 0] = True if name == "bool" else 5
    assert bool(back[0, 0].item())


def test_torch_strides_offsets_and_lifetime():
    torch = pytest.importorskip("torch")
    base = torch.arange(24, dtype=torch.float64).reshape(4, 6)
    view = base[1:, ::2].t()
    t = fg.from_dlpack(view)
    assert t.stride() == view.stride() and t.tolist() == view.tolist()
    del view, base
    gc.collect()
    assert t.tolist() == torch.arange(24.0).reshape(4, 6)[1:, ::2].t().tolist()
    ours = fg.arange(12, dtype=fg.float32).reshape(3, 4)[1:, 1:]
    tt = torch.from_dlpack(ours)
    assert tt.stride() == tuple(ours.stride()) and tt.tolist() == ours.tolist()
    del ours
    gc.collect()
    assert tt.sum().item() == sum(range(12)) - (0 + 1 + 2 + 3 + 4 + 8)


def test_torch_requires_grad_refused_both_ways():
    torch = pytest.importorskip("torch")
    with pytest.raises(BufferError, match="require gradient"):
        fg.from_dlpack(torch.ones(2, requires_grad=True))
    with pytest.raises(BufferError, match="require gradient"):
        torch.from_dlpack(fg.ones(2, requires_grad=True))


def test_torch_consumes_legacy_capsules():
    torch = pytest.importorskip("torch")
    t = fg.arange(3, dtype=fg.int64)
    tt = torch.from_dlpack(to_dlpack(t))
    tt += 1
    assert t.tolist() == [1, 2, 3]


# ----- a hand-made producer (ctypes): byte_offset, null strides, flags, versions, deleters -------


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _Managed(ctypes.Structure):
    pass


class _Versioned(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(_Managed))
_DELETER_V = ctypes.CFUNCTYPE(None, ctypes.POINTER(_Versioned))
_Managed._fields_ = [
    ("dl_tensor", _DLTensor),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", _DELETER),
]
_Versioned._fields_ = [
    ("major", ctypes.c_uint32),
    ("minor", ctypes.c_uint32),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", _DELETER_V),
    ("flags", ctypes.c_uint64),
    ("dl_tensor", _DLTensor),
]

_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_NAMES = {False: b"dltensor", True: b"dltensor_versioned"}  # alive as long as the capsules


class _Producer:
    """A DLPack producer over ``buf`` (a NumPy array it keeps) that counts its deleter's calls."""

    def __init__(
        self,
        buf,
        shape,
        strides=None,
        byte_offset=0,
        dtype=(2, 64, 1),
        device=1,
        versioned=False,
        version=(1, 0),
        flags=0,
    ):
        self.buf, self.deleted, self.versioned = buf, 0, versioned
        self.shape = (ctypes.c_int64 * max(len(shape), 1))(*shape)
        self.strides = None if strides is None else (ctypes.c_int64 * len(strides))(*strides)
        t = _DLTensor(
            ctypes.c_void_p(buf.ctypes.data),
            _DLDevice(device, 0),
            len(shape),
            _DLDataType(*dtype),
            self.shape,
            self.strides,
            byte_offset,
        )
        if versioned:
            self.deleter = _DELETER_V(self._delete)
            self.managed = _Versioned(version[0], version[1], None, self.deleter, flags, t)
        else:
            self.deleter = _DELETER(self._delete)
            self.managed = _Managed(t, None, self.deleter)

    def _delete(self, _ptr):
        self.deleted += 1

    def capsule(self):
        return _capsule_new(ctypes.addressof(self.managed), _NAMES[self.versioned], None)


@pytest.mark.parametrize("versioned", [False, True])
def test_byte_offset_and_null_strides(versioned):
    buf = np.arange(10, dtype=np.float64)
    p = _Producer(buf, shape=(2, 3), byte_offset=2 * 8, versioned=versioned)  # row-major
    t = fg.from_dlpack(p.capsule())
    assert t.tolist() == [[2.0, 3.0, 4.0], [5.0, 6.0, 7.0]]
    t[1, 2] = -1.0
    assert buf[7] == -1.0 and buf[8] == 8.0
    q = _Producer(buf, shape=(3,), strides=(3,), byte_offset=8, versioned=versioned)
    assert fg.from_dlpack(q.capsule()).tolist() == [1.0, 4.0, -1.0]


def test_deleter_runs_once_when_the_last_view_dies():
    buf = np.arange(6, dtype=np.int64)
    p = _Producer(buf, shape=(6,), dtype=(0, 64, 1), versioned=True)
    cap = p.capsule()
    t = fg.from_dlpack(cap)
    view = t[2:]
    with pytest.raises(RuntimeError, match="consumed only once"):
        fg.from_dlpack(cap)
    del t
    gc.collect()
    assert p.deleted == 0 and view.tolist() == [2, 3, 4, 5]
    del view
    gc.collect()
    assert p.deleted == 1
    del cap
    gc.collect()
    assert p.deleted == 1


def test_read_only_flag_warns():
    buf = np.arange(3, dtype=np.float64)
    p = _Producer(buf, shape=(3,), versioned=True, flags=1)
    with pytest.warns(UserWarning, match="read-only"):
        t = fg.from_dlpack(p.capsule())
    assert t.tolist() == [0.0, 1.0, 2.0]


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(dtype=(1, 16, 1)), TypeError, "type uint16"),
        (dict(dtype=(2, 32, 4)), TypeError, "type float32x4"),
        (dict(dtype=(5, 128, 1)), TypeError, "type complex128"),
        (dict(device=2), BufferError, r"DLPack device \(2, 0\)"),
        (dict(versioned=True, version=(2, 0)), BufferError, "version 2.0"),
        (dict(strides=(-1,)), ValueError, "negative stride"),
    ],
)
def test_refused_capsules_stay_with_the_producer(kwargs, error, match):
    buf = np.zeros(4)
    p = _Producer(buf, shape=(4,), **kwargs)
    cap = p.capsule()
    with pytest.raises(error, match=match):
        fg.from_dlpack(cap)
    # Not consumed: the capsule keeps its name and the producer its memory.
    assert "used_" not in repr(cap) and p.deleted == 0


# ----- JAX ---------------------------------------------------------------------------------------


def test_jax_both_ways():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    x = jnp.arange(6, dtype=jnp.float32).reshape(2, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # JAX may flag its buffers read-only
        t = fg.from_dlpack(x)
    assert t.dtype == fg.float32 and t.tolist() == np.asarray(x).tolist()
    assert t.data_ptr() == x.unsafe_buffer_pointer()  # no copy
    ours = fg.arange(6, dtype=fg.float32)[1:]
    back = jnp.from_dlpack(ours)
    assert np.asarray(back).tolist() == ours.tolist()
