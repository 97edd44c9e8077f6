"""``ferrograd.save`` / ``ferrograd.load`` in torch's checkpoint format.

A checkpoint is a zip archive as ``torch.save`` writes it: ``archive/data.pkl`` (a pickle whose
tensors are ``torch._utils._rebuild_tensor_v2`` calls on persistent storage ids) and one raw
little-endian file per storage under ``archive/data/``. So torch loads what ferrograd saves and
ferrograd loads what torch saves, without torch installed. Loading is restricted by default
(``weights_only=True``, as torch's default): only tensors, containers, numbers and strings are
rebuilt, never arbitrary objects, so a checkpoint cannot run code.
"""

from __future__ import annotations

import collections
import io
import os
import pickle
import zipfile
from typing import IO, Any, Callable, Dict, Optional, Tuple, Union

from . import _C
from ._lazy import np

Tensor = _C.Tensor
_FileLike = Union[str, "os.PathLike[str]", IO[bytes]]

# torch's storage class for each dtype, and the little-endian NumPy type of its elements
# (bfloat16's are read and written as their 16 bits: NumPy has no bfloat16).
_STORAGE_OF = {
    "float16": "HalfStorage",
    "bfloat16": "BFloat16Storage",
    "float32": "FloatStorage",
    "float64": "DoubleStorage",
    "uint8": "ByteStorage",
    "int8": "CharStorage",
    "int16": "ShortStorage",
    "int32": "IntStorage",
    "int64": "LongStorage",
    "bool": "BoolStorage",
}
_NUMPY_OF_STORAGE = {
    "HalfStorage": "<f2",
    "BFloat16Storage": "<u2",
    "FloatStorage": "<f4",
    "DoubleStorage": "<f8",
    "ByteStorage": "|u1",
    "CharStorage": "|i1",
    "ShortStorage": "<i2",
    "IntStorage": "<i4",
    "LongStorage": "<i8",
    "BoolStorage": "|b1",
}


def _bfloat16_bits(t: Tensor) -> Any:
    """A bfloat16 tensor's elements as their 16 bits (the top half of the float32 value)."""
    return (t.float().numpy().view(np.uint32) >> 16).astype(np.uint16)


# ----- saving ---------------------------------------------------------------------------------


class _Global:
    """A name written as a pickle GLOBAL without importing it (``torch._utils`` need not exist
    here for torch to find it when it loads the file)."""

    def __init__(self, module: str, name: str) -> None:
        self.module, self.name = module, name

    def __call__(self, *args: Any) -> Any:  # pickle asks that a reduce function be callable
        raise TypeError(f"{self.module}.{self.name} is a name in a checkpoint, not a function")


_REBUILD_TENSOR = _Global("torch._utils", "_rebuild_tensor_v2")
_REBUILD_PARAMETER = _Global("torch._utils", "_rebuild_parameter")
_ORDERED_DICT = _Global("collections", "OrderedDict")


class _StorageRef:
    """One tensor's elements, saved as its own file and named by a persistent id."""

    def __init__(self, key: str, storage: str, array: Any) -> None:
        self.key, self.storage, self.array = key, storage, array


class _Pickler(pickle._Pickler):  # type: ignore[name-defined,misc]
    """The pure-Python pickler, for its overridable ``save``: tensors become torch's rebuild
    calls and their elements storage files."""

    def __init__(self, file: IO[bytes], protocol: int) -> None:
        super().__init__(file, protocol)
        self.storages: list = []

    def persistent_id(self, obj: Any) -> Any:
        if isinstance(obj, _StorageRef):
            return ("storage", _Global("torch", obj.storage), obj.key, "cpu", int(obj.array.size))
        return None

    def save(self, obj: Any, save_persistent_id: bool = True) -> None:
        if isinstance(obj, _Global):
            self.write(pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode())
            return
        if isinstance(obj, Tensor):
            self.save_reduce_tensor(obj)
            return
        super().save(obj, save_persistent_id)

    def save_reduce_tensor(self, t: Tensor) -> None:
        if id(t) in self.memo:
            self.write(self.get(self.memo[id(t)][0]))
            return
        # copy(order="C"), not ascontiguousarray: that would make a 0-d tensor 1-d.
        d = t.detach()
        name = str(d.dtype).split(".")[1]
        arr = (_bfloat16_bits(d) if name == "bfloat16" else d.numpy()).copy(order="C")
        ref = _StorageRef(str(len(self.storages)), _STORAGE_OF[name], arr)
        self.storages.append(ref)
        shape = tuple(int(s) for s in arr.shape)
        strides = _contiguous_strides(shape)
        args = (ref, 0, shape, strides, False, _Call(_ORDERED_DICT))
        if type(t).__name__ == "Parameter":
            inner = _Call(_REBUILD_TENSOR, args)
            self.save_reduce(
                _REBUILD_PARAMETER, (inner, t.requires_grad, _Call(_ORDERED_DICT)), obj=t
            )
        else:
            rg = bool(t.requires_grad and t.is_leaf)
            self.save_reduce(_REBUILD_TENSOR, args[:4] + (rg, args[5]), obj=t)


class _Call:
    """``func(*args)`` inside the pickle (torch's ``OrderedDict()`` hooks, a Parameter's data)."""

    def __init__(self, func: _Global, args: Tuple[Any, ...] = ()) -> None:
        self.func, self.args = func, args

    def __reduce__(self) -> Any:
        return (self.func, self.args)


def _contiguous_strides(shape: Tuple[int, ...]) -> Tuple[int, ...]:
    out, acc = [], 1
    for s in reversed(shape):
        out.append(acc)
        acc *= max(s, 1)
    return tuple(reversed(out))


def save(
    obj: Any,
    f: _FileLike,
    pickle_module: Any = None,
    pickle_protocol: int = 2,
    _use_new_zipfile_serialization: bool = True,
) -> None:
    """Write ``obj`` (tensors, state dicts, nested containers, numbers) to ``f`` in torch's
    checkpoint format. Tensors are saved contiguous: views do not share storage after loading."""
    buf = io.BytesIO()
    p = _Pickler(buf, pickle_protocol)
    p.dump(obj)
    target = open(f, "wb") if isinstance(f, (str, os.PathLike)) else f  # noqa: SIM115
    try:
        with zipfile.ZipFile(target, "w", zipfile.ZIP_STORED) as z:
            z.writestr("archive/data.pkl", buf.getvalue())
            z.writestr("archive/byteorder", "little")
            for ref in p.storages:
                z.writestr(f"archive/data/{ref.key}", ref.array.tobytes())
            z.writestr("archive/version", "3\n")
    finally:
        if target is not f:
            target.close()


# ----- loading --------------------------------------------------------------------------------


def _rebuild_tensor(
    storage: Any,
    offset: int,
    size: Any,
    stride: Any,
    requires_grad: bool,
    backward_hooks: Any = None,
    metadata: Any = None,
) -> Tensor:
    from . import tensor

    size, stride = tuple(size), tuple(stride)
    if any(s == 0 for s in size):
        arr = np.zeros(size, dtype=storage.dtype)
    else:
        end = offset + sum((n - 1) * s for n, s in zip(size, stride)) + 1
        if offset < 0 or end > storage.size or any(s < 0 for s in stride):
            raise RuntimeError(
                f"checkpoint is corrupt: a tensor of size {list(size)} and stride {list(stride)} "
                f"at offset {offset} reaches past its storage of {storage.size} elements"
            )
        arr = np.lib.stride_tricks.as_strided(
            storage[offset:], size, tuple(s * storage.itemsize for s in stride)
        )
    if arr.dtype == np.uint16:
        # bfloat16 bits: widened to float32 exactly, then stored as bfloat16 again.
        wide = (np.array(arr).astype(np.uint32) << 16).view(np.float32)
        t = tensor(wide).to(_C.bfloat16)
    else:
        t = tensor(np.array(arr))
    if requires_grad:
        t.requires_grad = True
    return t


def _rebuild_parameter(data: Tensor, requires_grad: bool, backward_hooks: Any = None) -> Any:
    from .nn import Parameter

    return Parameter(data, requires_grad)


_SAFE_GLOBALS: Dict[Tuple[str, str], Any] = {
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("builtins", "set"): set,
    ("builtins", "frozenset"): frozenset,
    ("builtins", "slice"): slice,
    ("builtins", "complex"): complex,
}


class _StorageType:
    """What a ``torch.XStorage`` global stands for: the NumPy dtype of its file's bytes."""

    def __init__(self, name: str) -> None:
        self.name = name


class _Unpickler(pickle.Unpickler):
    def __init__(
        self, file: IO[bytes], read_storage: Callable[[str, str], Any], weights_only: bool
    ) -> None:
        super().__init__(file)
        self.read_storage, self.weights_only = read_storage, weights_only

    def find_class(self, module: str, name: str) -> Any:
        if module == "torch" and name in _NUMPY_OF_STORAGE:
            return _StorageType(name)
        if (module, name) in _SAFE_GLOBALS:
            return _SAFE_GLOBALS[(module, name)]
        if self.weights_only:
            raise pickle.UnpicklingError(
                "Weights only load failed: this checkpoint holds an object of type "
                f"'{module}.{name}', and ferrograd.load rebuilds only tensors, containers, "
                "numbers and strings. Load it with weights_only=False if (and only if) you "
                "trust its source."
            )
        return super().find_class(module, name)

    def persistent_load(self, pid: Any) -> Any:
        if not (isinstance(pid, tuple) and len(pid) >= 3 and pid[0] == "storage"):
            raise pickle.UnpicklingError(f"checkpoint is corrupt: unknown persistent id {pid!r}")
        kind = pid[1]
        name = kind.name if isinstance(kind, _StorageType) else getattr(kind, "__name__", "")
        if name not in _NUMPY_OF_STORAGE:
            raise pickle.UnpicklingError(f"checkpoint holds an unsupported storage type {name!r}")
        return self.read_storage(str(pid[2]), _NUMPY_OF_STORAGE[name])


def load(
    f: _FileLike,
    map_location: Any = None,
    pickle_module: Any = None,
    *,
    weights_only: Optional[bool] = True,
    mmap: Optional[bool] = None,
    **pickle_load_args: Any,
) -> Any:
    """Read a checkpoint written by ``ferrograd.save`` or ``torch.save`` (its zip format).
    ``map_location`` may name the CPU only. A truncated or corrupt file raises ``RuntimeError``
    and nothing is returned half-built."""
    from ._device import check_device

    if (
        map_location is not None
        and not callable(map_location)
        and not isinstance(map_location, dict)
    ):
        check_device(map_location, "checkpoint")
    data = f.read() if hasattr(f, "read") else open(f, "rb").read()  # noqa: SIM115
    try:
        z = zipfile.ZipFile(io.BytesIO(data))
        names = z.namelist()
    except zipfile.BadZipFile as e:
        raise RuntimeError(
            "PytorchStreamReader failed reading zip archive: failed finding central directory "
            f"(the file is truncated or not a torch/ferrograd checkpoint: {e})"
        ) from None
    pkl = [n for n in names if n.endswith("/data.pkl") or n == "data.pkl"]
    if len(pkl) != 1:
        raise RuntimeError("checkpoint is corrupt: expected one data.pkl in the archive")
    prefix = pkl[0][: -len("data.pkl")]
    cache: Dict[str, Any] = {}

    def read_storage(key: str, dtype: str) -> Any:
        if key not in cache:
            try:
                raw = z.read(f"{prefix}data/{key}")
            except (KeyError, zipfile.BadZipFile, OSError) as e:
                raise RuntimeError(
                    f"checkpoint is corrupt: storage {key} unreadable ({e})"
                ) from None
            cache[key] = np.frombuffer(raw, dtype=np.dtype(dtype))
        return cache[key]

    try:
        with z.open(pkl[0]) as fh:
            return _Unpickler(io.BytesIO(fh.read()), read_storage, bool(weights_only)).load()
    except pickle.UnpicklingError:
        raise
    except (EOFError, ValueError, zipfile.BadZipFile, OSError) as e:
        raise RuntimeError(f"checkpoint is corrupt: {type(e).__name__}: {e}") from None
