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
    empty,
    empty_like,
    eye,
    from_numpy,
    full,
    full_like,
    linspace,
    ones,
    ones_like,
    rand,
    rand_like,
    randn,
    randn_like,
    tensor,
    zeros,
    zeros_like,
)
from ._dtypes import bool, double, float, float32, float64, int64, long  # noqa: A004
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


def numel(t: Tensor) -> int:
    """Number of elements of ``t``."""
    return t.numel()


def _method(name: str) -> Any:
    def fn(input: Tensor, *args: Any, **kwargs: Any) -> Any:
        return getattr(input, name)(*args, **kwargs)

    fn.__name__ = name
    fn.__doc__ = f"``input.{name}(...)`` as a function."
    return fn


exp = _method("exp")
log = _method("log")
sin = _method("sin")
cos = _method("cos")
tanh = _method("tanh")
sigmoid = _method("sigmoid")
relu = _method("relu")
sqrt = _method("sqrt")
abs = _method("abs")  # noqa: A001
neg = _method("neg")
negative = neg
sign = _method("sign")
square = _method("square")
sum = _method("sum")  # noqa: A001
mean = _method("mean")
matmul = _method("matmul")
mm = _method("matmul")
dot = _method("dot")
mv = _method("mv")
reshape = _method("reshape")
transpose = _method("transpose")
permute = _method("permute")
t = _method("t")
unsqueeze = _method("unsqueeze")
squeeze = _method("squeeze")
flatten = _method("flatten")
narrow = _method("narrow")
select = _method("select")
clone = _method("clone")
detach = _method("detach")


def _binary(name: str) -> Any:
    def fn(input: Any, other: Any) -> Any:
        if not isinstance(input, Tensor):
            input = tensor(input) if not isinstance(other, Tensor) else other.new_tensor(input)
        return getattr(input, name)(other)

    fn.__name__ = name
    fn.__doc__ = f"``input.{name}(other)`` as a function, broadcasting."
    return fn


add = _binary("add")
sub = _binary("sub")
subtract = sub
mul = _binary("mul")
multiply = mul
div = _binary("div")
divide = div
true_divide = div
pow = _binary("pow")  # noqa: A001
eq = _binary("eq")
ne = _binary("ne")
lt = _binary("lt")
le = _binary("le")
gt = _binary("gt")
ge = _binary("ge")


def where(condition: Any, input: Any, other: Any) -> Tensor:
    """``input`` where ``condition`` else ``other``, broadcasting; differentiable in both."""
    return _C._where_tensors(condition, input, other)


__all__ = [
    "Size",
    "Tensor",
    "abs",
    "add",
    "arange",
    "as_tensor",
    "autograd",
    "bool",
    "clone",
    "cos",
    "detach",
    "div",
    "dot",
    "divide",
    "double",
    "dtype",
    "empty",
    "empty_like",
    "enable_grad",
    "eq",
    "exp",
    "eye",
    "flatten",
    "float",
    "float32",
    "float64",
    "from_numpy",
    "full",
    "full_like",
    "ge",
    "get_num_threads",
    "gt",
    "inference_mode",
    "int64",
    "is_anomaly_check_nan_enabled",
    "is_anomaly_enabled",
    "is_grad_enabled",
    "is_inference_mode_enabled",
    "is_tensor",
    "le",
    "linspace",
    "log",
    "long",
    "lt",
    "manual_seed",
    "get_default_dtype",
    "set_default_dtype",
    "matmul",
    "mean",
    "mm",
    "mul",
    "mv",
    "multiply",
    "narrow",
    "ne",
    "neg",
    "negative",
    "no_grad",
    "numel",
    "ones",
    "ones_like",
    "permute",
    "pow",
    "rand",
    "rand_like",
    "randn",
    "randn_like",
    "relu",
    "reshape",
    "select",
    "set_grad_enabled",
    "set_num_threads",
    "sigmoid",
    "sign",
    "sin",
    "sqrt",
    "square",
    "squeeze",
    "sub",
    "subtract",
    "sum",
    "t",
    "tanh",
    "tensor",
    "transpose",
    "true_divide",
    "unsqueeze",
    "where",
    "zeros",
    "zeros_like",
]

# The op families; imported last so their strict forms (e.g. `mm`) replace the generic ones above.
from . import (  # noqa: E402,F401  (torch.nn is usable after `import torch`)
    _ops_distance,
    _ops_math,
    _ops_shape,
    backends,
    cuda,
    nn,
    optim,
    utils,
)
from ._device import device  # noqa: E402
from ._generator import Generator, randperm  # noqa: E402
from ._legacy import BoolTensor, DoubleTensor, FloatTensor, LongTensor, normal  # noqa: E402
from ._ops_distance import *  # noqa: E402,F401,F403
from ._ops_math import *  # noqa: E402,F401,F403
from ._ops_shape import *  # noqa: E402,F401,F403
from .serialization import load, save  # noqa: E402

__all__ += ["nn", "optim", "utils", "cuda", "backends", "device", "Generator", "randperm"]
__all__ += ["save", "load"]
__all__ += ["FloatTensor", "DoubleTensor", "LongTensor", "BoolTensor", "normal"]
__all__ += [*_ops_math.__all__, *_ops_shape.__all__]
__all__ += _ops_distance.__all__
