"""ferrograd: reverse-mode automatic differentiation with PyTorch's autograd API.

Code written for ``torch.autograd`` runs by changing the import::

    import ferrograd as torch
"""

from __future__ import annotations

import builtins
from typing import Any

from . import _C
from ._creation import (
    arange,
    as_tensor,
    bernoulli,
    empty,
    empty_like,
    eye,
    from_numpy,
    full,
    full_like,
    initial_seed,
    linspace,
    logspace,
    multinomial,
    ones,
    ones_like,
    rand,
    rand_like,
    randint,
    randint_like,
    randn,
    randn_like,
    seed,
    tensor,
    tril_indices,
    triu_indices,
    zeros,
    zeros_like,
)
from ._dtypes import (  # noqa: A004
    bfloat16,
    bool,
    can_cast,
    double,
    finfo,
    float,
    float16,
    float32,
    float64,
    half,
    iinfo,
    int,
    int8,
    int16,
    int32,
    int64,
    long,
    promote_types,
    result_type,
    short,
    uint8,
)
from ._size import Size
from ._tensor import _install

_install()

from . import autograd  # noqa: E402
from .autograd.grad_mode import (  # noqa: E402
    enable_grad,
    inference_mode,
    no_grad,
    set_grad_enabled,
)

Tensor = _C.Tensor
dtype = _C.dtype
is_grad_enabled = _C.is_grad_enabled
is_inference_mode_enabled = _C.is_inference_mode_enabled
set_num_threads = _C.set_num_threads
get_num_threads = _C.get_num_threads
manual_seed = _C.manual_seed
get_default_dtype = _C.get_default_dtype
set_default_dtype = _C.set_default_dtype
is_anomaly_enabled = _C.is_anomaly_enabled
is_anomaly_check_nan_enabled = _C.is_anomaly_check_nan_enabled

__version__ = "0.1.0"


def is_tensor(obj: Any) -> builtins.bool:
    """Whether ``obj`` is a ferrograd tensor."""
    return isinstance(obj, Tensor)


def is_floating_point(input: Tensor) -> builtins.bool:
    """Whether ``input``'s dtype is a floating point type."""
    return input.is_floating_point()


def dropout(input: Tensor, p: builtins.float = 0.5, train: builtins.bool = True) -> Tensor:
    """``nn.functional.dropout(input, p, train)``."""
    from .nn.functional import dropout as _dropout

    return _dropout(input, p, train)


def numel(t: Tensor) -> int:
    """Number of elements of ``t``."""
    return t.numel()


def detach(input: Tensor) -> Tensor:
    """``input.detach()`` as a function."""
    return input.detach()


# The op families (each public name is defined in exactly one of them), then the subpackages
# (torch.nn is usable after `import torch`).
from . import (  # noqa: E402,F401
    _ops_binary,
    _ops_convert,
    _ops_distance,
    _ops_indexing,
    _ops_linalg,
    _ops_matmul,
    _ops_pointwise,
    _ops_reduce,
    _ops_shape,
    _ops_softmax,
    _ops_sort,
    _ops_unary,
    amp,
    backends,
    compiler,
    cpu,
    cuda,
    distributed,
    func,
    linalg,
    nn,
    optim,
    testing,
    utils,
    viz,
)
from ._compile import compile  # noqa: E402
from ._device import device  # noqa: E402
from ._dlpack import from_dlpack  # noqa: E402
from ._generator import Generator, randperm  # noqa: E402
from ._legacy import (  # noqa: E402
    BFloat16Tensor,
    BoolTensor,
    ByteTensor,
    CharTensor,
    DoubleTensor,
    FloatTensor,
    HalfTensor,
    IntTensor,
    LongTensor,
    ShortTensor,
    normal,
)
from ._ops_binary import *  # noqa: E402,F401,F403
from ._ops_convert import *  # noqa: E402,F401,F403
from ._ops_distance import *  # noqa: E402,F401,F403
from ._ops_indexing import *  # noqa: E402,F401,F403
from ._ops_linalg import *  # noqa: E402,F401,F403
from ._ops_matmul import *  # noqa: E402,F401,F403
from ._ops_pointwise import *  # noqa: E402,F401,F403
from ._ops_reduce import *  # noqa: E402,F401,F403
from ._ops_shape import *  # noqa: E402,F401,F403
from ._ops_softmax import *  # noqa: E402,F401,F403
from ._ops_sort import *  # noqa: E402,F401,F403
from ._ops_unary import *  # noqa: E402,F401,F403
from .amp.autocast_mode import (  # noqa: E402
    autocast,
    autocast_decrement_nesting,
    autocast_increment_nesting,
    clear_autocast_cache,
    get_autocast_cpu_dtype,
    get_autocast_dtype,
    get_autocast_gpu_dtype,
    is_autocast_cache_enabled,
    is_autocast_cpu_enabled,
    is_autocast_enabled,
    set_autocast_cache_enabled,
    set_autocast_cpu_dtype,
    set_autocast_cpu_enabled,
    set_autocast_dtype,
    set_autocast_enabled,
)
from .func import vmap  # noqa: E402
from .serialization import load, save  # noqa: E402

__all__ = [
    "Size",
    "Tensor",
    "arange",
    "as_tensor",
    "autograd",
    "bernoulli",
    "multinomial",
    "dropout",
    "is_floating_point",
    "tril_indices",
    "triu_indices",
    "bool",
    "detach",
    "double",
    "dtype",
    "empty",
    "empty_like",
    "enable_grad",
    "eye",
    "float",
    "float32",
    "float64",
    "from_numpy",
    "full",
    "full_like",
    "get_default_dtype",
    "get_num_threads",
    "inference_mode",
    "int64",
    "is_anomaly_check_nan_enabled",
    "is_anomaly_enabled",
    "is_grad_enabled",
    "is_inference_mode_enabled",
    "is_tensor",
    "linspace",
    "logspace",
    "long",
    "manual_seed",
    "no_grad",
    "numel",
    "ones",
    "ones_like",
    "rand",
    "rand_like",
    "randn",
    "randint",
    "randint_like",
    "randn_like",
    "set_default_dtype",
    "set_grad_enabled",
    "set_num_threads",
    "tensor",
    "zeros",
    "zeros_like",
    "nn",
    "optim",
    "utils",
    "compile",
    "compiler",
    "testing",
    "cuda",
    "cpu",
    "amp",
    "autocast",
    "autocast_decrement_nesting",
    "autocast_increment_nesting",
    "clear_autocast_cache",
    "get_autocast_cpu_dtype",
    "get_autocast_dtype",
    "get_autocast_gpu_dtype",
    "is_autocast_cache_enabled",
    "is_autocast_cpu_enabled",
    "is_autocast_enabled",
    "set_autocast_cache_enabled",
    "set_autocast_cpu_dtype",
    "set_autocast_cpu_enabled",
    "set_autocast_dtype",
    "set_autocast_enabled",
    "backends",
    "device",
    "Generator",
    "randperm",
    "initial_seed",
    "seed",
    "save",
    "load",
    "FloatTensor",
    "DoubleTensor",
    "LongTensor",
    "BoolTensor",
    "normal",
    "linalg",
    "func",
    "vmap",
    "from_dlpack",
    "viz",
]
__all__ += ["bfloat16", "float16", "half", "int", "int8", "int16", "int32", "short", "uint8"]
__all__ += ["finfo", "iinfo", "can_cast", "promote_types", "result_type"]
__all__ += ["BFloat16Tensor", "ByteTensor", "CharTensor", "HalfTensor", "IntTensor", "ShortTensor"]
__all__ += _ops_binary.__all__ + _ops_convert.__all__ + _ops_distance.__all__
__all__ += _ops_indexing.__all__ + _ops_linalg.__all__ + _ops_matmul.__all__
__all__ += _ops_pointwise.__all__
__all__ += _ops_reduce.__all__ + _ops_shape.__all__ + _ops_softmax.__all__ + _ops_unary.__all__
__all__ += _ops_sort.__all__
