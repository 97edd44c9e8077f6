"""``torch.nn.functional`` for ferrograd: activations, losses, normalisation, embedding,
padding, convolution and pooling.

Convolution and pooling (``src/ops/nn/conv.rs``, ``pool.rs``), normalisation
(``norm.rs``: ``layer_norm``, ``rms_norm``, ``group_norm``, ``batch_norm``, ``instance_norm``),
activations, softmax and losses (``activation.rs``, ``softmax.rs``, ``loss.rs``) and
``scaled_dot_product_attention`` (``attention.rs``) are native ops of the crate: their functions
here only normalise arguments and raise torch's errors. The rest is a composition of
differentiable ferrograd ops plus two Rust primitive pairs, im2col/col2im and a padded
gather/scatter, each the other's backward. So every function here is differentiable to any
order (``create_graph=True`` works through all of them).

Numerics follow torch's stable formulations: ``softplus`` and
``binary_cross_entropy_with_logits`` use ``max(x, 0) + log1p(exp(-|x|))``, ``log_softmax``
subtracts the (constant) row maximum, ``elu`` never evaluates ``exp`` of a positive number.
"""

from __future__ import annotations

import math
import operator
import warnings
from typing import Any, List, Optional, Sequence, Tuple, Union

from .. import _C
from .._autocast_policy import float32 as _autocast_float32

Tensor = _C.Tensor
_int_or_tuple = Union[int, Sequence[int]]

__all__ = [
    "adaptive_avg_pool1d",
    "adaptive_avg_pool2d",
    "adaptive_avg_pool3d",
    "adaptive_max_pool1d",
    "adaptive_max_pool1d_with_indices",
    "adaptive_max_pool2d",
    "adaptive_max_pool2d_with_indices",
    "adaptive_max_pool3d",
    "adaptive_max_pool3d_with_indices",
    "alpha_dropout",
    "avg_pool1d",
    "avg_pool2d",
    "avg_pool3d",
    "batch_norm",
    "bilinear",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "celu",
    "celu_",
    "channel_shuffle",
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
    "cosine_embedding_loss",
    "cosine_similarity",
    "cross_entropy",
    "dropout",
    "dropout1d",
    "dropout2d",
    "dropout3d",
    "elu",
    "elu_",
    "embedding",
    "embedding_bag",
    "feature_alpha_dropout",
    "fold",
    "gaussian_nll_loss",
    "gelu",
    "glu",
    "group_norm",
    "hardshrink",
    "hardsigmoid",
    "hardswish",
    "hardtanh",
    "hardtanh_",
    "hinge_embedding_loss",
    "huber_loss",
    "instance_norm",
    "interpolate",
    "kl_div",
    "l1_loss",
    "layer_norm",
    "leaky_relu",
    "leaky_relu_",
    "linear",
    "local_response_norm",
    "log_softmax",
    "logsigmoid",
    "lp_pool1d",
    "lp_pool2d",
    "lp_pool3d",
    "margin_ranking_loss",
    "max_pool1d",
    "max_pool1d_with_indices",
    "max_pool2d",
    "max_pool2d_with_indices",
    "max_pool3d",
    "max_pool3d_with_indices",
    "max_unpool1d",
    "max_unpool2d",
    "max_unpool3d",
    "mish",
    "mse_loss",
    "multi_head_attention_forward",
    "multilabel_soft_margin_loss",
    "native_channel_shuffle",
    "nll_loss",
    "normalize",
    "one_hot",
    "pad",
    "pairwise_distance",
    "pixel_shuffle",
    "pixel_unshuffle",
    "poisson_nll_loss",
    "prelu",
    "relu",
    "relu6",
    "relu_",
    "rms_norm",
    "rrelu",
    "rrelu_",
    "scaled_dot_product_attention",
    "selu",
    "selu_",
    "sigmoid",
    "silu",
    "smooth_l1_loss",
    "soft_margin_loss",
    "softmax",
    "softmin",
    "softplus",
    "softshrink",
    "softsign",
    "tanh",
    "tanhshrink",
    "threshold",
    "threshold_",
    "triplet_margin_loss",
    "unfold",
    "upsample",
    "upsample_bilinear",
    "upsample_nearest",
]


# ----- helpers ------------------------------------------------------------------------------------


def _fg() -> Any:
    import ferrograd

    return ferrograd


def _size(t: Tensor) -> str:
    return "[" + ", ".join(str(s) for s in t.shape) + "]"


def _where(cond: Any, a: Any, b: Any) -> Tensor:
    return _C._where_tensors(cond, a, b)


def _src(input: Tensor, inplace: bool) -> Tensor:
    """The operand of an activation whose result is copied back into ``input``: a copy when
    autograd will save it, since ``copy_`` bumps the version of the saved one."""
    return input.clone() if inplace and input.requires_grad else input


def _inplace(input: Tensor, result: Tensor, inplace: bool) -> Tensor:
    if not inplace:
        return result
    input.copy_(result)
    return input


def _check_reduction(reduction: str) -> None:
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")


def _legacy_reduction(size_average: Optional[bool], reduce: Optional[bool], reduction: str) -> str:
    if size_average is None and reduce is None:
        return reduction
    warnings.warn(
        "size_average and reduce args will be deprecated, please use reduction='"
        + ("mean" if (size_average is not False and reduce is not False) else "sum")
        + "' instead.",
        UserWarning,
        stacklevel=3,
    )
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    if size_average and reduce:
        return "mean"
    if reduce:
        return "sum"
    return "none"


def _tuple(v: _int_or_tuple, n: int, name: str) -> List[int]:
    if isinstance(v, (list, tuple)):
        if len(v) == 1:
            return [int(v[0])] * n
        if len(v) != n:
            raise RuntimeError(
                f"expected {name} to be a single integer value or a list of {n} values"
            )
        return [int(a) for a in v]
    return [int(v)] * n


def _softmax_dim(ndim: int, name: str, stacklevel: int) -> int:
    warnings.warn(
        f"Implicit dimension choice for {name} has been deprecated. Change the call to include "
        "dim=X as an argument.",
        UserWarning,
        stacklevel=stacklevel,
    )
    return 0 if ndim in (0, 1, 3) else 1


def _type_name(t: Tensor) -> str:
    return {
        _C.float16: "Half",
        _C.bfloat16: "BFloat16",
        _C.float32: "Float",
        _C.float64: "Double",
        _C.uint8: "Byte",
        _C.int8: "Char",
        _C.int16: "Short",
        _C.int32: "Int",
        _C.int64: "Long",
        _C.bool: "Bool",
    }[t.dtype]


# ----- activations --------------------------------------------------------------------------------


def bilinear(
    input1: Tensor, input2: Tensor, weight: Tensor, bias: Optional[Tensor] = None
) -> Tensor:
    """``y[..., o] = x1[..., i] W[o, i, j] x2[..., j] + b[o]``."""
    from .. import _ops_shape

    # torch's checks, in its order
    if input1.dim() != input2.dim():
        raise RuntimeError(
            f"bilinear(): input dimensions do not match: got {input1.dim()} and {input2.dim()}"
        )
    for i, (a, b) in enumerate(zip(input1.shape[:-1], input2.shape[:-1])):
        if a != b:
            raise RuntimeError(
                f"bilinear(): input batch dimensions do not match at dim {i}: got {a} and {b}"
            )
    if input1.shape[-1] != weight.shape[1]:
        raise RuntimeError(
            f"bilinear(): input1 size does not match weight size: got {input1.shape[-1]} "
            f"but expected {weight.shape[1]}"
        )
    if input2.shape[-1] != weight.shape[2]:
        raise RuntimeError(
            f"bilinear(): input2 size does not match weight size: got {input2.shape[-1]} "
            f"but expected {weight.shape[2]}"
        )
    if bias is not None and bias.shape[0] != weight.shape[0]:
        raise RuntimeError(
            f"bilinear(): bias size does not match weight size: got {bias.shape[0]} "
            f"but expected {weight.shape[0]}"
        )
    out = _ops_shape.einsum("...i,oij,...j->...o", input1, weight, input2)
    return out + bias if bias is not None else out


def linear(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None) -> Tensor:
    """``input @ weight.T + bias``."""
    return _C._nn_linear(input, weight, bias)


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """``x`` where ``|x| > lambd``, else 0."""
    return _C._nn_shrink(input, float(lambd), False)


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """``x - lambd`` above ``lambd``, ``x + lambd`` below ``-lambd``, else 0."""
    return _C._nn_shrink(input, float(lambd), True)


def rrelu(
    input: Tensor,
    lower: float = 1.0 / 8,
    upper: float = 1.0 / 3,
    training: bool = False,
    inplace: bool = False,
) -> Tensor:
    """Randomized leaky ReLU: in training each negative element gets its own slope drawn
    uniformly from ``[lower, upper]``; in eval the slope is ``(lower + upper) / 2``."""
    out = _C._nn_rrelu(_src(input, inplace), float(lower), float(upper), bool(training))
    return _inplace(input, out, inplace)


def rrelu_(
    input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False
) -> Tensor:
    """In-place :func:`rrelu`."""
    return rrelu(input, lower, upper, training, True)


def relu_(input: Tensor) -> Tensor:
    """In-place :func:`relu`."""
    return relu(input, inplace=True)


def elu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """In-place :func:`elu`."""
    return elu(input, alpha, inplace=True)


def selu_(input: Tensor) -> Tensor:
    """In-place :func:`selu`."""
    return selu(input, inplace=True)


def celu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """In-place :func:`celu`."""
    return celu(input, alpha, inplace=True)


def leaky_relu_(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    """In-place :func:`leaky_relu`."""
    return leaky_relu(input, negative_slope, inplace=True)


def hardtanh_(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    """In-place :func:`hardtanh`."""
    return hardtanh(input, min_val, max_val, inplace=True)


def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:
    """In-place :func:`threshold`."""
    return globals()["threshold"](input, threshold, value, inplace=True)


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """``max(x, 0)``; gradient 0 at 0 (as torch)."""
    return _inplace(input, input.relu(), inplace)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """``x * Phi(x)``: exact (``approximate='none'``) or torch's tanh form; one fused kernel."""
    return _C._nn_gelu(input, approximate)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * sigmoid(x)``."""
    return _inplace(input, _C._nn_silu(_src(input, inplace)), inplace)


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * tanh(softplus(x))``."""
    return _inplace(input, _C._nn_mish(_src(input, inplace)), inplace)


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """``log(1 + exp(beta x)) / beta``, linear where ``beta x > threshold``."""
    return _C._nn_softplus(input, float(beta), float(threshold))


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``x`` for ``x > 0``, else ``alpha (exp(x) - 1)``; gradient ``alpha`` at 0, as torch."""
    return _inplace(input, _C._nn_elu(_src(input, inplace), float(alpha)), inplace)


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """``scale * elu(x, alpha)`` with torch's fixed constants."""
    return _inplace(input, _C._nn_selu(_src(input, inplace)), inplace)


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``max(0, x) + min(0, alpha (exp(x / alpha) - 1))``."""
    return _inplace(input, _C._nn_celu(_src(input, inplace), float(alpha)), inplace)


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """``x`` for ``x > 0`` else ``negative_slope * x`` (slope used at 0, as torch)."""
    return _inplace(input, _C._nn_leaky_relu(_src(input, inplace), float(negative_slope)), inplace)


def hardtanh(
    input: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False
) -> Tensor:
    """``clamp(x, min_val, max_val)``; gradient 1 strictly inside, 0 at and beyond the ends
    (as torch)."""
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    return _inplace(
        input, _C._nn_hardtanh(_src(input, inplace), float(min_val), float(max_val)), inplace
    )


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """``hardtanh(x, 0, 6)``."""
    return hardtanh(input, 0.0, 6.0, inplace)


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * relu6(x + 3) / 6``."""
    return _inplace(input, _C._nn_hardswish(_src(input, inplace)), inplace)


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """``relu6(x + 3) / 6``."""
    return _inplace(input, _C._nn_hardsigmoid(_src(input, inplace)), inplace)


def logsigmoid(input: Tensor) -> Tensor:
    """``log(sigmoid(x)) = -softplus(-x)``, stable."""
    return _C._nn_logsigmoid(input)


def glu(input: Tensor, dim: int = -1) -> Tensor:
    """``a * sigmoid(b)`` with ``a``, ``b`` the halves of ``input`` along ``dim``."""
    return _C._nn_glu(input, int(dim))


def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """``x`` where ``x > threshold``, else ``value``."""
    return _inplace(input, _where(input > threshold, input, float(value)), inplace)


def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """``x`` where ``x > 0``, else ``weight * x``; ``weight`` holds one slope or one per channel
    (dim 1). One native node (``src/ops/nn/prelu.rs``)."""
    return _C._nn_prelu(input, weight)


def softsign(input: Tensor) -> Tensor:
    """``x / (1 + |x|)`` (torch composes it the same way)."""
    return input / (input.abs() + 1)


def tanhshrink(input: Tensor) -> Tensor:
    """``x - tanh(x)`` (torch composes it the same way)."""
    return input - input.tanh()


def tanh(input: Tensor) -> Tensor:
    """Hyperbolic tangent."""
    return input.tanh()


def sigmoid(input: Tensor) -> Tensor:
    """Logistic sigmoid."""
    return input.sigmoid()


def softmax(
    input: Tensor, dim: Optional[int] = None, _stacklevel: int = 3, dtype: Any = None
) -> Tensor:
    """``exp(x) / sum(exp(x))`` along ``dim``, computed with the maximum subtracted."""
    if dim is None:
        dim = _softmax_dim(input.dim(), "softmax", _stacklevel)
    return input.softmax(dim, dtype)


def softmin(
    input: Tensor, dim: Optional[int] = None, _stacklevel: int = 3, dtype: Any = None
) -> Tensor:
    """``softmax(-x)`` along ``dim``."""
    if dim is None:
        dim = _softmax_dim(input.dim(), "softmin", _stacklevel)
    if dtype is not None:
        input = input.to(dtype)
    return (-input).softmax(dim)


def log_softmax(
    input: Tensor, dim: Optional[int] = None, _stacklevel: int = 3, dtype: Any = None
) -> Tensor:
    """``x - logsumexp(x)`` along ``dim``, computed with the maximum subtracted."""
    if dim is None:
        dim = _softmax_dim(input.dim(), "log_softmax", _stacklevel)
    return input.log_softmax(dim, dtype)


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)``. The mask
    comes from ferrograd's generator (seed it with ``ferrograd.manual_seed``)."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    return _inplace(input, _C._nn_dropout(input, float(p)), inplace)


def _dropout_ext(
    input: Tensor, p: float, training: bool, inplace: bool, feature: bool, alpha: bool
) -> Tensor:
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training:
        return input
    return _inplace(input, _C._nn_dropout_ext(input, float(p), feature, alpha), inplace)


def _feature_dropout(
    name: str, spatial: int, input: Tensor, p: float, training: bool, inplace: bool
) -> Tensor:
    """dropout1d/2d/3d: one draw per (sample, channel), unbatched input lifted to a batch of
    one. As torch, dropout1d refuses other ranks and the others warn."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    inp_dim = input.dim()
    if inp_dim not in (spatial + 1, spatial + 2):
        if spatial == 1:
            raise RuntimeError(
                f"dropout1d: Expected 2D or 3D input, but received a {inp_dim}D input. "
                "Note that dropout1d exists to provide channel-wise dropout on inputs with 1 "
                "spatial dimension, a channel dimension, and an optional batch dimension "
                "(i.e. 2D or 3D inputs)."
            )
        warnings.warn(
            f"{name}: Received a {inp_dim}-D input to {name}, which is deprecated "
            "and will result in an error in a future release. To retain the behavior "
            f"and silence this warning, please use dropout instead. Note that {name} "
            f"exists to provide channel-wise dropout on inputs with {spatial} spatial "
            "dimensions, a channel dimension, and an optional batch dimension (i.e. "
            f"{spatial + 1}D or {spatial + 2}D inputs).",
            stacklevel=3,
        )
    if spatial == 2 and inp_dim == 3:
        warnings.warn(
            "dropout2d: Received a 3D input to dropout2d and assuming that channel-wise "
            "1D dropout behavior is desired - input is interpreted as shape (N, C, L), where C "
            "is the channel dim. This behavior will change in a future release to interpret the "
            "input as one without a batch dimension, i.e. shape (C, H, W). To maintain the 1D "
            "channel-wise dropout behavior, please switch to using dropout1d instead.",
            stacklevel=3,
        )
    batched = inp_dim != spatial + 1 or spatial == 2
    x = input if batched else input.unsqueeze(0)
    out = _dropout_ext(x, p, training, False, True, False)
    if not batched:
        out = out.squeeze(0)
    return _inplace(input, out, inplace) if out is not input else input


def dropout1d(
    input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False
) -> Tensor:
    """Zero whole channels of ``(N, C, L)`` or ``(C, L)`` input with probability ``p``."""
    return _feature_dropout("dropout1d", 1, input, p, training, inplace)


def dropout2d(
    input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False
) -> Tensor:
    """Zero whole channels of ``(N, C, H, W)`` input with probability ``p`` (3-D input is
    read as ``(N, C, L)``, with torch's warning)."""
    return _feature_dropout("dropout2d", 2, input, p, training, inplace)


def dropout3d(
    input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False
) -> Tensor:
    """Zero whole channels of ``(N, C, D, H, W)`` or ``(C, D, H, W)`` input."""
    return _feature_dropout("dropout3d", 3, input, p, training, inplace)


def alpha_dropout(
    input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False
) -> Tensor:
    """Dropout for SELU networks: dropped values take SELU's negative saturation and the
    result is rescaled and shifted to keep zero mean and unit variance."""
    return _dropout_ext(input, p, training, inplace, False, True)


def feature_alpha_dropout(
    input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False
) -> Tensor:
    """:func:`alpha_dropout` with one draw per (sample, channel)."""
    return _dropout_ext(input, p, training, inplace, True, True)


# ----- losses -------------------------------------------------------------------------------------


def _warn_target_size(input: Tensor, target: Tensor) -> None:
    if tuple(target.shape) != tuple(input.shape):
        warnings.warn(
            f"Using a target size ({_size(target)}) that is different to the input size "
            f"({_size(input)}). This will likely lead to incorrect results due to "
            "broadcasting. Please ensure they have the same size.",
            UserWarning,
            stacklevel=3,
        )


@_autocast_float32
def mse_loss(
    input: Tensor,
    target: Tensor,
    size_average: Optional[bool] = None,
    reduce: Optional[bool] = None,
    reduction: str = "mean",
    weight: Optional[Tensor] = None,
) -> Tensor:
    """Squared error ``(x - y)^2``, reduced (optionally weighted elementwise)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    _warn_target_size(input, target)
    return _C._nn_pointwise_loss("mse", input, target, weight, reduction)


def l1_loss(
    input: Tensor,
    target: Tensor,
    size_average: Optional[bool] = None,
    reduce: Optional[bool] = None,
    reduction: str = "mean",
    weight: Optional[Tensor] = None,
) -> Tensor:
    """Absolute error ``|x - y|``, reduced; gradient 0 where ``x == y`` (as torch)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    _warn_target_size(input, target)
    return _C._nn_pointwise_loss("l1", input, target, weight, reduction)


@_autocast_float32
def smooth_l1_loss(
    input: Tensor,
    target: Tensor,
    size_average: Optional[bool] = None,
    reduce: Optional[bool] = None,
    reduction: str = "mean",
    beta: float = 1.0,
) -> Tensor:
    """``0.5 d^2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 beta``; ``beta=0`` is L1."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    _warn_target_size(input, target)
    return _C._nn_pointwise_loss("smooth_l1", input, target, None, reduction, float(beta))


@_autocast_float32
def huber_loss(
    input: Tensor,
    target: Tensor,
    reduction: str = "mean",
    delta: float = 1.0,
    weight: Optional[Tensor] = None,
) -> Tensor:
    """``0.5 d^2`` where ``|d| < delta``, else ``delta (|d| - 0.5 delta)``."""
    _check_reduction(reduction)
    _warn_target_size(input, target)
    return _C._nn_pointwise_loss("huber", input, target, weight, reduction, float(delta))


@_autocast_float32
def nll_loss(
    input: Tensor,
    target: Tensor,
    weight: Optional[Tensor] = None,
    size_average: Optional[bool] = None,
    ignore_index: int = -100,
    reduce: Optional[bool] = None,
    reduction: str = "mean",
) -> Tensor:
    """Negative log likelihood: ``-w[t] * input[..., t, ...]``. ``input`` is ``(C)``, ``(N, C)``
    or ``(N, C, d1, ...)`` with class indices ``target`` of shape ``()``, ``(N)`` or
    ``(N, d1, ...)``. ``mean`` divides by the total weight of the non-ignored targets."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    return _C._nn_nll_loss(input, target, weight, int(ignore_index), reduction)


@_autocast_float32
def cross_entropy(
    input: Tensor,
    target: Tensor,
    weight: Optional[Tensor] = None,
    size_average: Optional[bool] = None,
    ignore_index: int = -100,
    reduce: Optional[bool] = None,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> Tensor:
    """``nll_loss(log_softmax(input, class dim), target)`` for class indices (one fused kernel),
    or ``-sum(target * log_softmax(input))`` for class probabilities (``target`` of ``input``'s
    shape), with torch's ``label_smoothing`` and weighting rules."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    return _C._nn_cross_entropy(
        input, target, weight, int(ignore_index), reduction, float(label_smoothing)
    )


@_autocast_float32
def binary_cross_entropy(
    input: Tensor,
    target: Tensor,
    weight: Optional[Tensor] = None,
    size_average: Optional[bool] = None,
    reduce: Optional[bool] = None,
    reduction: str = "mean",
) -> Tensor:
    """``-w (t log x + (1 - t) log(1 - x))`` with each log clamped at -100 (as torch)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    return _C._nn_pointwise_loss("bce", input, target, weight, reduction)


@_autocast_float32
def binary_cross_entropy_with_logits(
    input: Tensor,
    target: Tensor,
    weight: Optional[Tensor] = None,
    size_average: Optional[bool] = None,
    reduce: Optional[bool] = None,
    reduction: str = "mean",
    pos_weight: Optional[Tensor] = None,
) -> Tensor:
    """``BCE(sigmoid(x), t)`` computed stably as
    ``(1 - t) x + (1 + (pw - 1) t) softplus(-x)``."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    return _C._nn_pointwise_loss("bce_logits", input, target, weight, reduction, 0.0, pos_weight)


@_autocast_float32
def kl_div(
    input: Tensor,
    target: Tensor,
    size_average: Optional[bool] = None,
    reduce: Optional[bool] = None,
    reduction: str = "mean",
    log_target: bool = False,
) -> Tensor:
    """Pointwise KL divergence ``t (log t - x)`` (``input`` holds log-probabilities; ``target``
    too when ``log_target``), with ``0 log 0 = 0``; ``batchmean`` divides by the batch size."""
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce, reduction)
    elif reduction == "mean":
        warnings.warn(
            "reduction: 'mean' divides the total loss by both the batch size and the support "
            "size.'batchmean' divides only by the batch size, and aligns with the KL div math "
            "definition.'mean' will be changed to behave the same as 'batchmean' in the next "
            "major release.",
            UserWarning,
            stacklevel=2,
        )
    if reduction not in ("none", "mean", "sum", "batchmean"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if reduction == "batchmean":
        total = _C._nn_pointwise_loss("kl_div", input, target, None, "sum", float(log_target))
        return total / input.shape[0] if input.dim() != 0 else total
    return _C._nn_pointwise_loss("kl_div", input, target, None, reduction, float(log_target))


def _reduction_arg(size_average: Optional[bool], reduce: Optional[bool], reduction: str) -> str:
    """torch's ``_Reduction.get_enum`` check after the legacy arguments are folded in."""
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    return reduction


@_autocast_float32
def cosine_embedding_loss(
    input1: Tensor,
    input2: Tensor,
    target: Tensor,
    margin: float = 0,
    size_average: Optional[bool] = None,
    reduce: Optional[bool] = None,
    reduction: str = "mean",
) -> Tensor:
    """``1 - cos(x1, x2)`` for ``target == 1``, ``max(0, cos(x1, x2) - margin)`` for -1."""
    reduction = _reduction_arg(size_average, reduce, reduction)
    return _C._nn_cosine_embedding_loss(input1, input2, target, float(margin), reduction)


@_autocast_float32
def margin_ranking_loss(
    input1: Tensor,
    input2: Tensor,
    target: Tensor,
    margin: float = 0,
    size_average: Optional[bool] = None,
    reduce: Optional[bool] = None,
    reduction: str = "mean",
) -> Tensor:
    """``max(0, -target * (x1 - x2) + margin)``."""
    reduction = _reduction_arg(size_average, reduce, reduction)
    if input1.dim() != input2.dim() or input1.dim() != target.dim():
        raise RuntimeError(
            f"margin_ranking_loss : All input tensors should have same dimension but got sizes: "
            f"input1: {input1.size()}, input2: {input2.size()}, target: {target.size()} "
        )
    return _C._nn_margin_ranking_loss(input1, input2, target, float(margin), reduction)


@_autocast_float32
def triplet_margin_loss(
    anchor: Tensor,
    positive: Tensor,
    negative: Tensor,
    margin: float = 1.0,
    p: float = 2,
    eps: float = 1e-6,
    swap: bool = False,
    size_average: Optional[bool] = None,
    reduce: Optional[bool] = None,
    reduction: str = "mean",
) -> Tensor:
    """``max(0, margin + d(a, p) - d(a, n))`` with the ``p``-norm ``pairwise_distance``."""
    reduction = _reduction_arg(size_average, reduce, reduction)
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    return _C._nn_triplet_margin_loss(
        anchor, positive, negative, float(margin), float(p), float(eps), bool(swap), reduction
    )


@_autocast_float32
def hinge_embedding_loss(
    input: Tensor,
    target: Tensor,
    margin: float = 1.0,
    size_average: Optional[bool] = None,
    reduce: Optional[bool] = None,
    reduction: str = "mean",
) -> Tensor:
    """``x`` for ``target == 1``, ``max(0, margin - x)`` for -1."""
    reduction = _reduction_arg(size_average, reduce, reduction)
    return _C._nn_hinge_embedding_loss(input, target, float(margin), reduction)


@_autocast_float32
def soft_margin_loss(
    input: Tensor,
    target: Tensor,
    size_average: Optional[bool] = None,
    reduce: Optional[bool] = None,
    reduction: str = "mean",
) -> Tensor:
    """``log(1 + exp(-target * x))``."""
    reduction = _reduction_arg(size_average, reduce, reduction)
    return _C._nn_soft_margin_loss(input, target, reduction)


def multilabel_soft_margin_loss(
    input: Tensor,
    target: Tensor,
    weight: Optional[Tensor] = None,
    size_average: Optional[bool] = None,
    reduce: Optional[bool] = None,
    reduction: str = "mean",
) -> Tensor:
    """Per-class logistic loss averaged over the classes (last dim), one value per sample."""
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce, reduction)
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    return _C._nn_multilabel_soft_margin_loss(input, target, weight, reduction)


@_autocast_float32
def poisson_nll_loss(
    input: Tensor,
    target: Tensor,
    log_input: bool = True,
    full: bool = False,
    size_average: Optional[bool] = None,
    eps: float = 1e-8,
    reduce: Optional[bool] = None,
    reduction: str = "mean",
) -> Tensor:
    """Poisson negative log-likelihood (``full`` adds Stirling's term where ``target > 1``)."""
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce, reduction)
    if reduction != "none" and reduction != "mean" and reduction != "sum":
        raise ValueError(reduction + " is not a valid value for reduction")
    return _C._nn_poisson_nll_loss(
        input, target, bool(log_input), bool(full), float(eps), reduction
    )


def gaussian_nll_loss(
    input: Tensor,
    target: Tensor,
    var: Union[Tensor, float],
    full: bool = False,
    eps: float = 1e-6,
    reduction: str = "mean",
) -> Tensor:
    """Gaussian negative log-likelihood ``(log v + (x - y)^2 / v) / 2`` with
    ``v = max(var, eps)``; ``var`` may be a float, or one dim short of ``input``, or differ from
    it in one broadcast dim (torch's rules)."""
    if isinstance(var, float):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        var = _fg().full_like(input, var)
    if tuple(var.shape) != tuple(input.shape):
        ishape, vshape = tuple(input.shape), tuple(var.shape)
        if ishape[:-1] == vshape:
            var = var.unsqueeze(-1)
        elif input.dim() == var.dim() and sum(y for x, y in zip(ishape, vshape) if x != y) == 1:
            pass
        else:
            raise ValueError("var is of incorrect size")
    if reduction != "none" and reduction != "mean" and reduction != "sum":
        raise ValueError(reduction + " is not valid")
    return _C._nn_gaussian_nll_loss(input, target, var, bool(full), float(eps), reduction)


# ----- normalisation, embedding, one_hot -------------------------------------------------------


def _shape_list(op: str, normalized_shape: Sequence[int]) -> List[int]:
    # torch's argument parser: a sequence of ints (a bare int is refused)
    where = f"{op}(): argument 'normalized_shape' (position 2) must be tuple of ints"
    if not isinstance(normalized_shape, (list, tuple)):
        raise TypeError(f"{where}, not {type(normalized_shape).__name__}")
    out = []
    for i, s in enumerate(normalized_shape):
        if isinstance(s, bool) or not hasattr(s, "__index__"):
            raise TypeError(f"{where}, but found element of type {type(s).__name__} at pos {i}")
        out.append(s.__index__())
    return out


def _torch_size(size: Sequence[int]) -> str:
    # torch's messages print the size as torch.Size, whatever the module is imported as
    return "torch.Size([" + ", ".join(str(int(s)) for s in size) + "])"


def _verify_batch_size(size: Sequence[int]) -> None:
    size_prods = size[0]
    for i in range(len(size) - 2):
        size_prods *= size[i + 2]
    if size_prods == 1:
        raise ValueError(
            "Expected more than 1 value per channel when training, got input size "
            + _torch_size(size)
        )


def _verify_spatial_size(size: Sequence[int]) -> None:
    size_prods = 1
    for i in range(2, len(size)):
        size_prods *= size[i]
    if size_prods == 1:
        raise ValueError(
            "Expected more than 1 spatial element when training, got input size "
            + _torch_size(size)
        )


def layer_norm(
    input: Tensor,
    normalized_shape: Sequence[int],
    weight: Optional[Tensor] = None,
    bias: Optional[Tensor] = None,
    eps: float = 1e-5,
) -> Tensor:
    """Normalise over the trailing ``normalized_shape`` dims with the biased variance."""
    return _C._nn_layer_norm(
        input, _shape_list("layer_norm", normalized_shape), weight, bias, float(eps)
    )


def rms_norm(
    input: Tensor,
    normalized_shape: Sequence[int],
    weight: Optional[Tensor] = None,
    eps: Optional[float] = None,
) -> Tensor:
    """``x / sqrt(mean(x**2) + eps) * weight`` over the trailing ``normalized_shape`` dims;
    ``eps=None`` is ``finfo(input.dtype).eps``."""
    e = None if eps is None else float(eps)
    return _C._nn_rms_norm(input, _shape_list("rms_norm", normalized_shape), weight, e)


def group_norm(
    input: Tensor,
    num_groups: int,
    weight: Optional[Tensor] = None,
    bias: Optional[Tensor] = None,
    eps: float = 1e-5,
) -> Tensor:
    """Normalise each group of ``num_groups`` channel groups per sample."""
    if input.dim() < 2:
        raise RuntimeError(
            f"Expected at least 2 dimensions for input tensor but received {input.dim()}"
        )
    _verify_batch_size(
        [input.size(0) * input.size(1) // num_groups, num_groups, *list(input.size()[2:])]
    )
    return _C._nn_group_norm(input, int(num_groups), weight, bias, float(eps))


def batch_norm(
    input: Tensor,
    running_mean: Optional[Tensor],
    running_var: Optional[Tensor],
    weight: Optional[Tensor] = None,
    bias: Optional[Tensor] = None,
    training: bool = False,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    """Per-channel normalisation; when training, batch statistics normalise and the running
    statistics are updated in place (unbiased variance), else the running ones normalise."""
    if training:
        _verify_batch_size(input.size())
    return _C._nn_batch_norm(
        input, running_mean, running_var, weight, bias, bool(training), float(momentum), float(eps)
    )


def instance_norm(
    input: Tensor,
    running_mean: Optional[Tensor] = None,
    running_var: Optional[Tensor] = None,
    weight: Optional[Tensor] = None,
    bias: Optional[Tensor] = None,
    use_input_stats: bool = True,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    """Normalise each (sample, channel) over its spatial elements."""
    if use_input_stats:
        _verify_spatial_size(input.size())
    return _C._nn_instance_norm(
        input,
        running_mean,
        running_var,
        weight,
        bias,
        bool(use_input_stats),
        float(momentum),
        float(eps),
    )


def local_response_norm(
    input: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0
) -> Tensor:
    """Normalise each element by the mean of squares over ``size`` neighbouring channels."""
    return _C._nn_local_response_norm(input, int(size), float(alpha), float(beta), float(k))


def embedding(
    input: Tensor,
    weight: Tensor,
    padding_idx: Optional[int] = None,
    max_norm: Optional[float] = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> Tensor:
    """Rows of ``weight`` at the indices ``input`` (shape ``input.shape + (D,)``). The row at
    ``padding_idx`` gets no gradient; ``max_norm`` renormalises the used rows of ``weight`` in
    place (as torch); ``scale_grad_by_freq`` divides each row's gradient by its count in
    ``input``; ``sparse`` is accepted, gradients are dense."""
    del sparse
    if input.dtype == _C.int32:
        input = input.long()
    if input.dtype != _C.int64:
        raise RuntimeError(
            "Expected tensor for argument #1 'indices' to have one of the following scalar "
            f"types: Long, Int; but got ferrograd.{_type_name(input)}Tensor instead (while "
            "checking arguments for embedding)"
        )
    if weight.dim() != 2:
        raise RuntimeError("'weight' must be 2-D")
    num = weight.shape[0]
    if padding_idx is not None:
        if padding_idx > 0:
            assert padding_idx < num, "Padding_idx must be within num_embeddings"
        elif padding_idx < 0:
            assert padding_idx >= -num, "Padding_idx must be within num_embeddings"
            padding_idx = num + padding_idx
    if max_norm is not None:
        _embedding_renorm(weight, input, float(max_norm), float(norm_type))
    return _C._nn_embedding(weight, input, padding_idx, bool(scale_grad_by_freq))


def _embedding_renorm(weight: Tensor, input: Tensor, max_norm: float, norm_type: float) -> None:
    """torch's ``embedding_renorm_``: each used row whose ``norm_type``-norm exceeds
    ``max_norm`` is scaled in place to ``max_norm / (norm + 1e-7)`` of itself (in the crate)."""
    _C._nn_embedding_renorm_(weight, input, max_norm, norm_type)


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """int64 one-hot encoding along a new last dim of size ``num_classes`` (default: max + 1)."""
    return _C._nn_one_hot(tensor, int(num_classes))


def normalize(
    input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out: Any = None
) -> Tensor:
    """``x / max(||x||_p, eps)`` along ``dim``, one native node."""
    if out is not None:
        raise NotImplementedError("normalize(out=...) is not supported by ferrograd")
    return _C._nn_normalize(input, float(p), int(dim), float(eps))


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """Cosine similarity of ``x1`` and ``x2`` (broadcast) along ``dim``; each norm is clamped
    to at least ``eps`` on its own, as torch does."""
    return _C._nn_cosine_similarity(x1, x2, int(dim), float(eps))


def pairwise_distance(
    x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False
) -> Tensor:
    """The ``p``-norm of ``x1 - x2 + eps`` over the last dim (``x1``, ``x2`` broadcast)."""
    return _C._nn_pairwise_distance(x1, x2, float(p), float(eps), bool(keepdim))


def embedding_bag(
    input: Tensor,
    weight: Tensor,
    offsets: Optional[Tensor] = None,
    max_norm: Optional[float] = None,
    norm_type: float = 2,
    scale_grad_by_freq: bool = False,
    mode: str = "mean",
    sparse: bool = False,
    per_sample_weights: Optional[Tensor] = None,
    include_last_offset: bool = False,
    padding_idx: Optional[int] = None,
) -> Tensor:
    """Sums, means or maxima of bags of rows of ``weight``: ``input`` 2-D (one bag per row) or
    1-D split into bags at ``offsets``. Rows at ``padding_idx`` are skipped (and not counted by
    the mean); empty bags give zeros. ``per_sample_weights`` (mode "sum" only) scale each row.
    ``sparse=True`` is accepted but the weight's gradient is dense (ferrograd has no sparse
    tensors)."""
    if weight.dtype == _C.int64 and input.is_floating_point():
        warnings.warn(
            "Argument order of nn.functional.embedding_bag was changed. "
            "Usage `embedding_bag(weight, input, ...)` is deprecated, "
            "and should now be `embedding_bag(input, weight, ...)`.",
            stacklevel=2,
        )
        weight, input = input, weight
    if per_sample_weights is not None and input.size() != per_sample_weights.size():
        raise ValueError(
            f"embedding_bag: If per_sample_weights ({per_sample_weights.shape}) is not None, "
            f"then it must have the same shape as the input ({input.shape})"
        )
    if not weight.dim() == 2:
        raise ValueError(
            f"weight has to be a 2D Tensor, but got Tensor of dimension {weight.dim()}"
        )
    if input.dim() == 2:
        if offsets is not None:
            type_str = (
                "<class 'ferrograd.Tensor'>" if isinstance(offsets, Tensor) else type(offsets)
            )
            raise ValueError(
                "if input is 2D, then offsets has to be None, as input is treated is a "
                f"mini-batch of fixed length sequences. However, found offsets of type {type_str}"
            )
        offsets = _fg().arange(0, input.numel(), input.size(1), dtype=input.dtype)
        include_last_offset = False
        input = input.reshape(-1)
        if per_sample_weights is not None:
            per_sample_weights = per_sample_weights.reshape(-1)
    elif input.dim() == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        if offsets.dim() != 1:
            raise ValueError("offsets has to be a 1D Tensor")
    else:
        raise ValueError(
            f"input has to be 1D or 2D Tensor, but got Tensor of dimension {input.dim()}"
        )
    if input.dtype == _C.int32:
        input = input.long()
    if offsets is not None and offsets.dtype == _C.int32:
        offsets = offsets.long()
    for t in (input, offsets):
        if t.dtype != _C.int64:
            raise RuntimeError(
                "Expected tensor for argument #1 'indices' to have one of the following scalar "
                f"types: Long, Int; but got ferrograd.{_type_name(t)}Tensor instead (while "
                "checking arguments for embedding_bag)"
            )
    modes = {"sum": 0, "mean": 1, "max": 2}
    if mode not in modes:
        raise ValueError("mode has to be one of sum, mean or max")
    if mode == "max":
        if scale_grad_by_freq:
            raise ValueError("max mode does not support scaling the gradient by the frequency")
        if sparse:
            raise ValueError("max mode does not support sparse weights")
    if max_norm is not None:
        _embedding_renorm(weight, input, float(max_norm), float(norm_type))
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(
            "embedding_bag: per_sample_weights was not None. "
            "per_sample_weights is only supported for mode='sum' "
            f"(got mode='{mode}'). Please open a feature request on GitHub."
        )
    num = weight.shape[0]
    if padding_idx is not None:
        padding_idx = int(padding_idx)
        if not -num <= padding_idx < num:
            raise RuntimeError(
                f"padding_idx must be within the number of embeddings, -{num} through "
                f"{num - 1}, but got {padding_idx}"
            )
        if padding_idx < 0:
            padding_idx += num
    return _C._nn_embedding_bag(
        weight,
        input,
        offsets,
        modes[mode],
        per_sample_weights,
        bool(include_last_offset),
        padding_idx,
        bool(scale_grad_by_freq),
    )


# ----- padding ----------------------------------------------------------------------------------


def pad(
    input: Tensor, pad: Sequence[int], mode: str = "constant", value: Optional[float] = None
) -> Tensor:
    """Pad (or, with negative amounts, crop) the last ``len(pad) // 2`` dims; ``pad`` lists
    ``(left, right)`` pairs starting from the last dim. Modes ``constant``, ``reflect``,
    ``replicate`` and ``circular``, any number of dims (torch limits the non-constant modes to
    the last 1-3 dims). Float tensors only."""
    pads = [int(v) for v in pad]
    if mode not in ("constant", "reflect", "replicate", "circular"):
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    if mode != "constant" and value is not None and value != 0:
        raise RuntimeError(f'Padding mode "{mode}" doesn\'t take in value argument')
    return _C._nn_pad(input, pads, mode, 0.0 if value is None else float(value))


# ----- resampling: interpolate, pixel and channel shuffles ---------------------------------------


def _is_integer(x: Any) -> bool:
    """torch's ``_is_integer``: Python and NumPy ints (anything with ``__index__``), and
    integer tensors."""
    if isinstance(x, Tensor):
        return not x.is_floating_point()
    try:
        operator.index(x)
    except TypeError:
        return False
    return True


def interpolate(
    input: Tensor,
    size: Any = None,
    scale_factor: Any = None,
    mode: str = "nearest",
    align_corners: Optional[bool] = None,
    recompute_scale_factor: Optional[bool] = None,
    antialias: bool = False,
) -> Tensor:
    """Resample ``input`` (``(N, C, *spatial)``, 1 to 3 spatial dims) to ``size`` or by
    ``scale_factor``. Modes ``nearest``, ``nearest-exact``, ``linear`` (3-D), ``bilinear`` and
    ``bicubic`` (4-D), ``trilinear`` (5-D) and ``area`` (adaptive average pooling). torch's
    argument checks and messages; the resampling runs in the crate."""
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError(
                "align_corners option can only be set with the "
                "interpolating modes: linear | bilinear | bicubic | trilinear"
            )
    else:
        if align_corners is None:
            align_corners = False

    dim = input.dim() - 2  # Number of spatial dimensions.

    output_size: Optional[List[int]]
    scale_factors: Optional[List[float]]
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    elif size is not None:
        scale_factors = None
        if isinstance(size, (list, tuple)):
            if len(size) != dim:
                raise ValueError(
                    "Input and output must have the same number of spatial dimensions, but got "
                    f"input with spatial dimensions of {list(input.shape[2:])} and output size of "
                    f"{size}. Please provide input tensor in (N, C, d1, d2, ...,dK) format and "
                    "output size in (o1, o2, ...,oK) format."
                )
            if not all(_is_integer(x) for x in size):
                raise TypeError(
                    "expected size to be one of int or Tuple[int] or Tuple[int, int] or "
                    f"Tuple[int, int, int], but got size with types {[type(x) for x in size]}"
                )
            output_size = [int(x) for x in size]
        else:
            output_size = [int(size) for _ in range(dim)]
    elif scale_factor is not None:
        output_size = None
        if isinstance(scale_factor, (list, tuple)):
            if len(scale_factor) != dim:
                raise ValueError(
                    "Input and scale_factor must have the same number of spatial dimensions, but "
                    f"got input with spatial dimensions of {list(input.shape[2:])} and "
                    f"scale_factor of shape {scale_factor}. "
                    "Please provide input tensor in (N, C, d1, d2, ...,dK) format and "
                    "scale_factor in (s1, s2, ...,sK) format."
                )
            scale_factors = [float(s) for s in scale_factor]
        else:
            scale_factors = [float(scale_factor) for _ in range(dim)]
    else:
        raise ValueError("either size or scale_factor should be defined")

    if recompute_scale_factor is not None and recompute_scale_factor and size is not None:
        raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")

    # "area" mode always requires an explicit size rather than scale factor.
    if mode == "area" and output_size is None:
        recompute_scale_factor = True

    if recompute_scale_factor is not None and recompute_scale_factor:
        # The output size from the scales; the kernel then derives its scales from the sizes.
        if scale_factors is None:
            raise AssertionError("scale_factors is unexpectedly None")
        output_size = [int(input.size(i + 2) * scale_factors[i]) for i in range(dim)]
        scale_factors = None

    if antialias and not (mode in ("bilinear", "bicubic", "lanczos") and input.ndim == 4):
        raise ValueError(
            "Anti-alias option is restricted to bilinear, bicubic, and lanczos modes and "
            "requires a 4-D tensor as input"
        )
    if mode == "lanczos":
        raise NotImplementedError("interpolate: the lanczos mode is not implemented in ferrograd")

    kernel = {
        (3, "nearest"): "nearest",
        (4, "nearest"): "nearest",
        (5, "nearest"): "nearest",
        (3, "nearest-exact"): "nearest-exact",
        (4, "nearest-exact"): "nearest-exact",
        (5, "nearest-exact"): "nearest-exact",
        (3, "linear"): "linear",
        (4, "bilinear"): "linear",
        (5, "trilinear"): "linear",
        (4, "bicubic"): "cubic",
    }.get((input.dim(), mode))
    if kernel is not None:
        return _C._nn_interpolate(
            input, output_size, scale_factors, kernel, bool(align_corners), bool(antialias)
        )
    if mode == "area" and input.dim() in (3, 4, 5):
        if output_size is None:
            raise AssertionError("output_size is unexpectedly None")
        if input.dim() == 3:
            return adaptive_avg_pool1d(input, output_size)
        if input.dim() == 4:
            return adaptive_avg_pool2d(input, output_size)
        return _C._nn_interpolate(input, output_size, None, "area", False)

    wrong = {
        (3, "bilinear"): "Got 3D input, but bilinear mode needs 4D input",
        (3, "trilinear"): "Got 3D input, but trilinear mode needs 5D input",
        (4, "linear"): "Got 4D input, but linear mode needs 3D input",
        (4, "trilinear"): "Got 4D input, but trilinear mode needs 5D input",
        (5, "linear"): "Got 5D input, but linear mode needs 3D input",
        (5, "bilinear"): "Got 5D input, but bilinear mode needs 4D input",
    }.get((input.dim(), mode))
    if wrong is not None:
        raise NotImplementedError(wrong)
    raise NotImplementedError(
        "Input Error: Only 3D, 4D and 5D input Tensors supported"
        f" (got {input.dim()}D) for the modes: nearest | linear | bilinear | bicubic | trilinear"
        f" | lanczos | area | nearest-exact (got {mode})"
    )


def upsample(
    input: Tensor,
    size: Any = None,
    scale_factor: Any = None,
    mode: str = "nearest",
    align_corners: Optional[bool] = None,
) -> Tensor:
    """Deprecated alias of :func:`interpolate` (warns, as torch does)."""
    warnings.warn(
        "`nn.functional.upsample` is deprecated. Use `nn.functional.interpolate` instead.",
        stacklevel=2,
    )
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input: Tensor, size: Any = None, scale_factor: Any = None) -> Tensor:
    """Deprecated: :func:`interpolate` with ``mode="nearest"``."""
    warnings.warn(
        "`nn.functional.upsample_nearest` is deprecated. Use `nn.functional.interpolate` instead.",
        stacklevel=2,
    )
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input: Tensor, size: Any = None, scale_factor: Any = None) -> Tensor:
    """Deprecated: :func:`interpolate` with ``mode="bilinear", align_corners=True``."""
    warnings.warn(
        "`nn.functional.upsample_bilinear` is deprecated. Use `nn.functional.interpolate` instead.",
        stacklevel=2,
    )
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


def _int_arg(fn: str, name: str, value: Any) -> int:
    """torch's argument parser for an int in position 2: a 0-d int64 tensor passes, bools,
    floats and other tensors are TypeErrors."""
    if isinstance(value, Tensor):
        if value.dim() == 0 and value.dtype == _C.int64:
            return int(value.item())
    elif not isinstance(value, bool) and _is_integer(value):
        return int(value)
    raise TypeError(
        f"{fn}(): argument '{name}' (position 2) must be int, not {type(value).__name__}"
    )


def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """``(*, C r², H, W)`` to ``(*, C, H r, W r)``."""
    return _C._nn_shuffle(
        "shuffle", input, _int_arg("pixel_shuffle", "upscale_factor", upscale_factor)
    )


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """``(*, C, H r, W r)`` to ``(*, C r², H, W)``, the inverse of :func:`pixel_shuffle`."""
    return _C._nn_shuffle(
        "unshuffle", input, _int_arg("pixel_unshuffle", "downscale_factor", downscale_factor)
    )


def channel_shuffle(input: Tensor, groups: int) -> Tensor:
    """Split the channels of ``(N, C, *)`` into ``groups`` and interleave them."""
    return _C._nn_shuffle("channel", input, _int_arg("channel_shuffle", "groups", groups))


native_channel_shuffle = channel_shuffle


# ----- unfold / fold, convolution, pooling ------------------------------------------------------


def unfold(
    input: Tensor,
    kernel_size: _int_or_tuple,
    dilation: _int_or_tuple = 1,
    padding: _int_or_tuple = 0,
    stride: _int_or_tuple = 1,
) -> Tensor:
    """im2col: ``(N, C, H, W)`` to ``(N, C * kh * kw, L)`` sliding blocks (zero padding)."""
    if input.dim() not in (3, 4):
        raise NotImplementedError(
            f"Input Error: Only 3D or 4D input Tensors are supported (got {input.dim()}D)"
        )
    batched = input.dim() == 4
    x = input if batched else input.unsqueeze(0)
    out = _C._nn_im2col(
        x,
        _tuple(kernel_size, 2, "kernel_size"),
        _tuple(dilation, 2, "dilation"),
        _tuple(padding, 2, "padding"),
        _tuple(stride, 2, "stride"),
    )
    return out if batched else out.squeeze(0)


def fold(
    input: Tensor,
    output_size: _int_or_tuple,
    kernel_size: _int_or_tuple,
    dilation: _int_or_tuple = 1,
    padding: _int_or_tuple = 0,
    stride: _int_or_tuple = 1,
) -> Tensor:
    """col2im, the adjoint of :func:`unfold`: sums the blocks back into ``(N, C, *output_size)``."""
    if input.dim() not in (2, 3):
        raise NotImplementedError(
            "Input Error: Only unbatched (2D) or batched (3D) input Tensors are supported "
            f"(got {input.dim()}D)"
        )
    batched = input.dim() == 3
    x = input if batched else input.unsqueeze(0)
    out = _C._nn_col2im(
        x,
        _tuple(output_size, 2, "output_size"),
        _tuple(kernel_size, 2, "kernel_size"),
        _tuple(dilation, 2, "dilation"),
        _tuple(padding, 2, "padding"),
        _tuple(stride, 2, "stride"),
    )
    return out if batched else out.squeeze(0)


def _ints(v: _int_or_tuple, n: int) -> List[int]:
    """An int-list argument as torch's binding takes it: one int stands for ``n`` copies, a
    sequence passes as is (its length is checked by the op)."""
    if isinstance(v, (list, tuple)):
        return [int(a) for a in v]
    return [int(v)] * n


def _conv(
    nd: int,
    input: Tensor,
    weight: Tensor,
    bias: Optional[Tensor],
    stride: _int_or_tuple,
    padding: Union[str, _int_or_tuple],
    dilation: _int_or_tuple,
    groups: int,
) -> Tensor:
    p = padding if isinstance(padding, str) else _ints(padding, nd)
    return _C._nn_conv(
        nd, input, weight, bias, _ints(stride, nd), p, _ints(dilation, nd), int(groups)
    )


def conv1d(
    input: Tensor,
    weight: Tensor,
    bias: Optional[Tensor] = None,
    stride: _int_or_tuple = 1,
    padding: Union[str, _int_or_tuple] = 0,
    dilation: _int_or_tuple = 1,
    groups: int = 1,
) -> Tensor:
    """1-D cross-correlation ``(N, C, L)`` * ``(O, C/groups, k)`` (native kernel)."""
    return _conv(1, input, weight, bias, stride, padding, dilation, groups)


def conv2d(
    input: Tensor,
    weight: Tensor,
    bias: Optional[Tensor] = None,
    stride: _int_or_tuple = 1,
    padding: Union[str, _int_or_tuple] = 0,
    dilation: _int_or_tuple = 1,
    groups: int = 1,
) -> Tensor:
    """2-D cross-correlation ``(N, C, H, W)`` * ``(O, C/groups, kh, kw)`` (native kernel)."""
    return _conv(2, input, weight, bias, stride, padding, dilation, groups)


def conv3d(
    input: Tensor,
    weight: Tensor,
    bias: Optional[Tensor] = None,
    stride: _int_or_tuple = 1,
    padding: Union[str, _int_or_tuple] = 0,
    dilation: _int_or_tuple = 1,
    groups: int = 1,
) -> Tensor:
    """3-D cross-correlation ``(N, C, D, H, W)`` * ``(O, C/groups, kd, kh, kw)``."""
    return _conv(3, input, weight, bias, stride, padding, dilation, groups)


def _conv_transpose(
    nd: int,
    input: Tensor,
    weight: Tensor,
    bias: Optional[Tensor],
    stride: _int_or_tuple,
    padding: _int_or_tuple,
    output_padding: _int_or_tuple,
    groups: int,
    dilation: _int_or_tuple,
) -> Tensor:
    if isinstance(padding, str):
        raise TypeError(f"conv_transpose{nd}d(): argument 'padding' must be tuple of ints, not str")
    return _C._nn_conv_transpose(
        nd,
        input,
        weight,
        bias,
        _ints(stride, nd),
        _ints(padding, nd),
        _ints(output_padding, nd),
        int(groups),
        _ints(dilation, nd),
    )


def conv_transpose1d(
    input: Tensor,
    weight: Tensor,
    bias: Optional[Tensor] = None,
    stride: _int_or_tuple = 1,
    padding: _int_or_tuple = 0,
    output_padding: _int_or_tuple = 0,
    groups: int = 1,
    dilation: _int_or_tuple = 1,
) -> Tensor:
    """1-D transposed convolution, weight ``(C, O/groups, k)`` (the adjoint of conv1d)."""
    return _conv_transpose(
        1, input, weight, bias, stride, padding, output_padding, groups, dilation
    )


def conv_transpose2d(
    input: Tensor,
    weight: Tensor,
    bias: Optional[Tensor] = None,
    stride: _int_or_tuple = 1,
    padding: _int_or_tuple = 0,
    output_padding: _int_or_tuple = 0,
    groups: int = 1,
    dilation: _int_or_tuple = 1,
) -> Tensor:
    """2-D transposed convolution, weight ``(C, O/groups, kh, kw)`` (the adjoint of conv2d)."""
    return _conv_transpose(
        2, input, weight, bias, stride, padding, output_padding, groups, dilation
    )


def conv_transpose3d(
    input: Tensor,
    weight: Tensor,
    bias: Optional[Tensor] = None,
    stride: _int_or_tuple = 1,
    padding: _int_or_tuple = 0,
    output_padding: _int_or_tuple = 0,
    groups: int = 1,
    dilation: _int_or_tuple = 1,
) -> Tensor:
    """3-D transposed convolution, weight ``(C, O/groups, kd, kh, kw)``."""
    return _conv_transpose(
        3, input, weight, bias, stride, padding, output_padding, groups, dilation
    )


def _stride(stride: Optional[_int_or_tuple], n: int) -> List[int]:
    """Pooling's stride argument: omitted (``None`` or empty) means the kernel size."""
    if stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0):
        return []
    return _ints(stride, n)


def max_pool1d(
    input: Tensor,
    kernel_size: _int_or_tuple,
    stride: Optional[_int_or_tuple] = None,
    padding: _int_or_tuple = 0,
    dilation: _int_or_tuple = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Any:
    """1-D max pooling over ``(N, C, L)``; ``return_indices`` also gives each argmax."""
    out, idx = _C._nn_max_pool(
        1,
        input,
        _ints(kernel_size, 1),
        _stride(stride, 1),
        _ints(padding, 1),
        _ints(dilation, 1),
        bool(ceil_mode),
    )
    return (out, idx) if return_indices else out


def max_pool2d(
    input: Tensor,
    kernel_size: _int_or_tuple,
    stride: Optional[_int_or_tuple] = None,
    padding: _int_or_tuple = 0,
    dilation: _int_or_tuple = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Any:
    """2-D max pooling (padding counts as ``-inf``; the first maximum wins ties, a NaN wins
    always). ``return_indices`` also gives each argmax's flat index in its ``H * W`` plane."""
    out, idx = _C._nn_max_pool(
        2,
        input,
        _ints(kernel_size, 2),
        _stride(stride, 2),
        _ints(padding, 2),
        _ints(dilation, 2),
        bool(ceil_mode),
    )
    return (out, idx) if return_indices else out


def max_pool3d(
    input: Tensor,
    kernel_size: _int_or_tuple,
    stride: Optional[_int_or_tuple] = None,
    padding: _int_or_tuple = 0,
    dilation: _int_or_tuple = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Any:
    """3-D max pooling over ``(N, C, D, H, W)``; see :func:`max_pool2d`."""
    out, idx = _C._nn_max_pool(
        3,
        input,
        _ints(kernel_size, 3),
        _stride(stride, 3),
        _ints(padding, 3),
        _ints(dilation, 3),
        bool(ceil_mode),
    )
    return (out, idx) if return_indices else out


def avg_pool1d(
    input: Tensor,
    kernel_size: _int_or_tuple,
    stride: Optional[_int_or_tuple] = None,
    padding: _int_or_tuple = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
) -> Tensor:
    """1-D average pooling over ``(N, C, L)``; see :func:`avg_pool2d`."""
    return _C._nn_avg_pool(
        1,
        input,
        _ints(kernel_size, 1),
        _stride(stride, 1),
        _ints(padding, 1),
        bool(ceil_mode),
        bool(count_include_pad),
    )


def avg_pool2d(
    input: Tensor,
    kernel_size: _int_or_tuple,
    stride: Optional[_int_or_tuple] = None,
    padding: _int_or_tuple = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: Optional[int] = None,
) -> Tensor:
    """2-D average pooling with torch's divisor rules (zero padding counts unless
    ``count_include_pad=False``; the ``ceil_mode`` overhang never counts)."""
    return _C._nn_avg_pool(
        2,
        input,
        _ints(kernel_size, 2),
        _stride(stride, 2),
        _ints(padding, 2),
        bool(ceil_mode),
        bool(count_include_pad),
        None if divisor_override is None else int(divisor_override),
    )


def avg_pool3d(
    input: Tensor,
    kernel_size: _int_or_tuple,
    stride: Optional[_int_or_tuple] = None,
    padding: _int_or_tuple = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: Optional[int] = None,
) -> Tensor:
    """3-D average pooling over ``(N, C, D, H, W)``; see :func:`avg_pool2d`."""
    return _C._nn_avg_pool(
        3,
        input,
        _ints(kernel_size, 3),
        _stride(stride, 3),
        _ints(padding, 3),
        bool(ceil_mode),
        bool(count_include_pad),
        None if divisor_override is None else int(divisor_override),
    )


def _output_size_1d(name: str, output_size: Any) -> List[int]:
    if isinstance(output_size, (list, tuple)):
        if len(output_size) != 1:
            raise RuntimeError(
                f"{name}() argument 'output_size' should contain one int (got {len(output_size)})"
            )
        return [int(output_size[0])]
    return [int(output_size)]


def _output_size_2d(input: Tensor, output_size: Any, n: int = 2) -> List[int]:
    """torch's ``_list_with_default``: an int repeats, ``None`` keeps the input's size."""
    if not isinstance(output_size, (list, tuple)):
        return [int(output_size)] * n
    sizes = list(input.shape)[-len(output_size) :] if len(output_size) else []
    return [int(sizes[i]) if v is None else int(v) for i, v in enumerate(output_size)]


def adaptive_avg_pool1d(input: Tensor, output_size: _int_or_tuple) -> Tensor:
    """Adaptive 1-D average pooling to ``output_size`` positions."""
    out, _ = _C._nn_adaptive_pool(
        "avg", 1, input, _output_size_1d("adaptive_avg_pool1d", output_size)
    )
    return out


def adaptive_avg_pool2d(input: Tensor, output_size: Any) -> Tensor:
    """Adaptive 2-D average pooling to ``output_size`` (``None`` keeps a dim's size)."""
    out, _ = _C._nn_adaptive_pool("avg", 2, input, _output_size_2d(input, output_size))
    return out


def adaptive_max_pool1d(
    input: Tensor, output_size: _int_or_tuple, return_indices: bool = False
) -> Any:
    """Adaptive 1-D max pooling; ``return_indices`` also gives each argmax."""
    out, idx = _C._nn_adaptive_pool(
        "max", 1, input, _output_size_1d("adaptive_max_pool1d", output_size)
    )
    return (out, idx) if return_indices else out


def adaptive_max_pool2d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    """Adaptive 2-D max pooling; ``return_indices`` also gives each argmax's flat index."""
    out, idx = _C._nn_adaptive_pool("max", 2, input, _output_size_2d(input, output_size))
    return (out, idx) if return_indices else out


def adaptive_avg_pool3d(input: Tensor, output_size: Any) -> Tensor:
    """Adaptive 3-D average pooling to ``output_size`` (``None`` keeps a dim's size)."""
    out, _ = _C._nn_adaptive_pool("avg", 3, input, _output_size_2d(input, output_size, 3))
    return out


def adaptive_max_pool3d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    """Adaptive 3-D max pooling; ``return_indices`` also gives each argmax's flat index."""
    out, idx = _C._nn_adaptive_pool("max", 3, input, _output_size_2d(input, output_size, 3))
    return (out, idx) if return_indices else out


def max_pool1d_with_indices(input: Tensor, *args: Any, **kwargs: Any) -> Tuple[Tensor, Tensor]:
    """:func:`max_pool1d` returning ``(values, indices)``."""
    kwargs["return_indices"] = True
    return max_pool1d(input, *args, **kwargs)  # type: ignore[no-any-return]


def max_pool2d_with_indices(input: Tensor, *args: Any, **kwargs: Any) -> Tuple[Tensor, Tensor]:
    """:func:`max_pool2d` returning ``(values, indices)``."""
    kwargs["return_indices"] = True
    return max_pool2d(input, *args, **kwargs)  # type: ignore[no-any-return]


def max_pool3d_with_indices(input: Tensor, *args: Any, **kwargs: Any) -> Tuple[Tensor, Tensor]:
    """:func:`max_pool3d` returning ``(values, indices)``."""
    kwargs["return_indices"] = True
    return max_pool3d(input, *args, **kwargs)  # type: ignore[no-any-return]


def adaptive_max_pool1d_with_indices(
    input: Tensor, output_size: _int_or_tuple, return_indices: bool = False
) -> Tuple[Tensor, Tensor]:
    """:func:`adaptive_max_pool1d` returning ``(values, indices)``."""
    return adaptive_max_pool1d(input, output_size, True)  # type: ignore[no-any-return]


def adaptive_max_pool2d_with_indices(
    input: Tensor, output_size: Any, return_indices: bool = False
) -> Tuple[Tensor, Tensor]:
    """:func:`adaptive_max_pool2d` returning ``(values, indices)``."""
    return adaptive_max_pool2d(input, output_size, True)  # type: ignore[no-any-return]


def adaptive_max_pool3d_with_indices(
    input: Tensor, output_size: Any, return_indices: bool = False
) -> Tuple[Tensor, Tensor]:
    """:func:`adaptive_max_pool3d` returning ``(values, indices)``."""
    return adaptive_max_pool3d(input, output_size, True)  # type: ignore[no-any-return]


def _unpool_output_size(
    input: Tensor,
    kernel_size: List[int],
    stride: List[int],
    padding: List[int],
    output_size: Optional[Sequence[int]],
) -> List[int]:
    """The spatial output size of max_unpool: the pooling's input size by default, or a given
    size within one stride of it (torch's checks and messages)."""
    n = len(kernel_size)
    shape = list(input.shape)
    default = [(shape[-n + d] - 1) * stride[d] + kernel_size[d] - 2 * padding[d] for d in range(n)]
    if output_size is None:
        ret = default
    else:
        sizes = list(output_size)
        if len(sizes) == n + 2:
            sizes = sizes[2:]
        if len(sizes) != n:
            raise ValueError(
                "output_size should be a sequence containing "
                f"{n} or {n + 2} elements, but it has a length of '{len(sizes)}'"
            )
        for d in range(n):
            lo, hi = default[d] - stride[d], default[d] + stride[d]
            if not (lo < sizes[d] < hi):
                raise ValueError(
                    f'invalid output_size "{output_size}" (dim {d} must be between {lo} and {hi})'
                )
        ret = [int(v) for v in sizes]
    for d in range(n):
        if ret[d] < 0:
            raise ValueError(
                "max_unpooling: output_size must contain non-negative spatial "
                f"dimensions, but got output_size[{d}]={ret[d]}"
            )
    return ret


def _max_unpool(
    n: int,
    input: Tensor,
    indices: Tensor,
    kernel_size: _int_or_tuple,
    stride: Optional[_int_or_tuple],
    padding: _int_or_tuple,
    output_size: Optional[Sequence[int]],
) -> Tensor:
    k = _ints(kernel_size, n)
    st = _ints(stride, n) if stride is not None else k
    size = _unpool_output_size(input, k, st, _ints(padding, n), output_size)
    if n == 1:
        # torch runs the 2-d op on a trailing unit dim
        out = _C._nn_max_unpool(input.unsqueeze(-1), indices.unsqueeze(-1), size + [1])
        return out.squeeze(-1)
    return _C._nn_max_unpool(input, indices, size)


def max_unpool1d(
    input: Tensor,
    indices: Tensor,
    kernel_size: _int_or_tuple,
    stride: Optional[_int_or_tuple] = None,
    padding: _int_or_tuple = 0,
    output_size: Optional[Sequence[int]] = None,
) -> Tensor:
    """The partial inverse of :func:`max_pool1d`: values back at their argmax, zeros elsewhere."""
    return _max_unpool(1, input, indices, kernel_size, stride, padding, output_size)


def max_unpool2d(
    input: Tensor,
    indices: Tensor,
    kernel_size: _int_or_tuple,
    stride: Optional[_int_or_tuple] = None,
    padding: _int_or_tuple = 0,
    output_size: Optional[Sequence[int]] = None,
) -> Tensor:
    """The partial inverse of :func:`max_pool2d`."""
    return _max_unpool(2, input, indices, kernel_size, stride, padding, output_size)


def max_unpool3d(
    input: Tensor,
    indices: Tensor,
    kernel_size: _int_or_tuple,
    stride: Optional[_int_or_tuple] = None,
    padding: _int_or_tuple = 0,
    output_size: Optional[Sequence[int]] = None,
) -> Tensor:
    """The partial inverse of :func:`max_pool3d`."""
    return _max_unpool(3, input, indices, kernel_size, stride, padding, output_size)


def _lp_pool(
    n: int,
    input: Tensor,
    norm_type: Union[int, float],
    kernel_size: _int_or_tuple,
    stride: Optional[_int_or_tuple],
    ceil_mode: bool,
) -> Tensor:
    return _C._nn_lp_pool(
        input, float(norm_type), _ints(kernel_size, n), _stride(stride, n), bool(ceil_mode)
    )


def lp_pool1d(
    input: Tensor,
    norm_type: Union[int, float],
    kernel_size: int,
    stride: Optional[_int_or_tuple] = None,
    ceil_mode: bool = False,
) -> Tensor:
    """Power-average pooling ``(sum x^p)^(1/p)`` over windows of ``(N, C, L)`` input."""
    return _lp_pool(1, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool2d(
    input: Tensor,
    norm_type: Union[int, float],
    kernel_size: _int_or_tuple,
    stride: Optional[_int_or_tuple] = None,
    ceil_mode: bool = False,
) -> Tensor:
    """2-D power-average pooling; ``p = inf`` is max pooling of ``|x|``."""
    return _lp_pool(2, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool3d(
    input: Tensor,
    norm_type: Union[int, float],
    kernel_size: _int_or_tuple,
    stride: Optional[_int_or_tuple] = None,
    ceil_mode: bool = False,
) -> Tensor:
    """3-D power-average pooling."""
    return _lp_pool(3, input, norm_type, kernel_size, stride, ceil_mode)


# ----- attention ----------------------------------------------------------------------------------


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Optional[Tensor] = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: Optional[float] = None,
    enable_gqa: bool = False,
) -> Tensor:
    """``softmax(query @ key.T * scale + attn_mask) @ value`` over any leading batch dims, by
    the crate's fused (flash-style, memory-efficient) kernel. ``attn_mask``: bool (True takes
    part) or float (added). Fully masked rows give zeros, as torch's math backend."""
    return _C._nn_scaled_dot_product_attention(
        query,
        key,
        value,
        attn_mask,
        float(dropout_p),
        bool(is_causal),
        None if scale is None else float(scale),
        bool(enable_gqa),
    )


def _mha_shape_check(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    key_padding_mask: Optional[Tensor],
    attn_mask: Optional[Tensor],
    num_heads: int,
) -> bool:
    """Whether the inputs are batched (3-D), raising torch's AssertionErrors on bad ranks."""
    if query.dim() == 3:
        if key.dim() != 3 or value.dim() != 3:
            raise AssertionError(
                "For batched (3-D) `query`, expected `key` and `value` to be 3-D"
                f" but found {key.dim()}-D and {value.dim()}-D tensors respectively"
            )
        if key_padding_mask is not None and key_padding_mask.dim() != 2:
            raise AssertionError(
                "For batched (3-D) `query`, expected `key_padding_mask` to be `None` or 2-D"
                f" but found {key_padding_mask.dim()}-D tensor instead"
            )
        if attn_mask is not None and attn_mask.dim() not in (2, 3):
            raise AssertionError(
                "For batched (3-D) `query`, expected `attn_mask` to be `None`, 2-D or 3-D"
                f" but found {attn_mask.dim()}-D tensor instead"
            )
        return True
    if query.dim() == 2:
        if key.dim() != 2 or value.dim() != 2:
            raise AssertionError(
                "For unbatched (2-D) `query`, expected `key` and `value` to be 2-D"
                f" but found {key.dim()}-D and {value.dim()}-D tensors respectively"
            )
        if key_padding_mask is not None and key_padding_mask.dim() != 1:
            raise AssertionError(
                "For unbatched (2-D) `query`, expected `key_padding_mask` to be `None` or 1-D"
                f" but found {key_padding_mask.dim()}-D tensor instead"
            )
        if attn_mask is not None:
            if attn_mask.dim() not in (2, 3):
                raise AssertionError(
                    "For unbatched (2-D) `query`, expected `attn_mask` to be `None`, 2-D or 3-D"
                    f" but found {attn_mask.dim()}-D tensor instead"
                )
            if attn_mask.dim() == 3:
                expected = (num_heads, query.shape[0], key.shape[0])
                if tuple(attn_mask.shape) != expected:
                    raise AssertionError(
                        f"Expected `attn_mask` shape to be {expected} but got {attn_mask.shape}"
                    )
        return False
    raise AssertionError(
        "query should be unbatched 2D or batched 3D tensor but received "
        f"{query.dim()}-D query tensor"
    )


def _canonical_mask(
    mask: Optional[Tensor],
    mask_name: str,
    other_type: Any,
    other_name: str,
    target_type: Any,
    check_other: bool = True,
) -> Optional[Tensor]:
    """A bool mask as an additive float one (True -> -inf); float masks pass through."""
    if mask is None:
        return None
    is_float = mask.is_floating_point()
    if mask.dtype != _fg().bool and not is_float:
        raise AssertionError(f"only bool and floating types of {mask_name} are supported")
    if check_other and other_type is not None and mask.dtype != other_type:
        warnings.warn(
            f"Support for mismatched {mask_name} and {other_name} "
            "is deprecated. Use same type for both instead.",
            stacklevel=2,
        )
    if not is_float:
        mask = _fg().zeros_like(mask, dtype=target_type).masked_fill(mask, float("-inf"))
    return mask


def _none_or_dtype(input: Optional[Tensor]) -> Any:
    if input is None:
        return None
    if isinstance(input, Tensor):
        return input.dtype
    raise RuntimeError("input to _none_or_dtype() must be None or torch.Tensor")


def _in_projection_packed(
    q: Tensor, k: Tensor, v: Tensor, w: Tensor, b: Optional[Tensor] = None
) -> List[Tensor]:
    """q, k, v through the packed ``(3E, E)`` projection (one product when they are one tensor)."""
    E = q.size(-1)
    if k is v:
        if q is k:
            proj = linear(q, w, b).unflatten(-1, (3, E))
            return [proj.select(-2, 0), proj.select(-2, 1), proj.select(-2, 2)]
        w_q, w_kv = w.split([E, E * 2])
        b_q, b_kv = (None, None) if b is None else b.split([E, E * 2])
        kv = linear(k, w_kv, b_kv).unflatten(-1, (2, E))
        return [linear(q, w_q, b_q), kv.select(-2, 0), kv.select(-2, 1)]
    w_q, w_k, w_v = w.chunk(3)
    b_q, b_k, b_v = (None, None, None) if b is None else b.chunk(3)
    return [linear(q, w_q, b_q), linear(k, w_k, b_k), linear(v, w_v, b_v)]


def _in_projection(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    w_q: Tensor,
    w_k: Tensor,
    w_v: Tensor,
    b_q: Optional[Tensor] = None,
    b_k: Optional[Tensor] = None,
    b_v: Optional[Tensor] = None,
) -> Tuple[Tensor, Tensor, Tensor]:
    """q, k, v through separate projections, with torch's shape assertions."""
    Eq, Ek, Ev = q.size(-1), k.size(-1), v.size(-1)
    shapes = (("query", w_q, (Eq, Eq)), ("key", w_k, (Eq, Ek)), ("value", w_v, (Eq, Ev)))
    for name, w, want in shapes:
        if tuple(w.shape) != want:
            raise AssertionError(f"expecting {name} weights shape of {want}, but got {w.shape}")
    for name, b in (("query", b_q), ("key", b_k), ("value", b_v)):
        if b is not None and tuple(b.shape) != (Eq,):
            raise AssertionError(f"expecting {name} bias shape of {(Eq,)}, but got {b.shape}")
    return linear(q, w_q, b_q), linear(k, w_k, b_k), linear(v, w_v, b_v)


def multi_head_attention_forward(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    embed_dim_to_check: int,
    num_heads: int,
    in_proj_weight: Optional[Tensor],
    in_proj_bias: Optional[Tensor],
    bias_k: Optional[Tensor],
    bias_v: Optional[Tensor],
    add_zero_attn: bool,
    dropout_p: float,
    out_proj_weight: Tensor,
    out_proj_bias: Optional[Tensor],
    training: bool = True,
    key_padding_mask: Optional[Tensor] = None,
    need_weights: bool = True,
    attn_mask: Optional[Tensor] = None,
    use_separate_proj_weight: bool = False,
    q_proj_weight: Optional[Tensor] = None,
    k_proj_weight: Optional[Tensor] = None,
    v_proj_weight: Optional[Tensor] = None,
    static_k: Optional[Tensor] = None,
    static_v: Optional[Tensor] = None,
    average_attn_weights: bool = True,
    is_causal: bool = False,
) -> Tuple[Tensor, Optional[Tensor]]:
    """torch's multi-head attention, sequence-first ``(L, N, E)`` (or unbatched ``(L, E)``):
    projections, heads split, attention, output projection. Glue over ``linear`` and
    ``scaled_dot_product_attention``; with ``need_weights`` the weights are formed explicitly
    (as torch does) so they can be returned."""
    fg = _fg()
    is_batched = _mha_shape_check(query, key, value, key_padding_mask, attn_mask, num_heads)
    if not is_batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    tgt_len, bsz, embed_dim = query.shape
    src_len = key.shape[0]
    key_padding_mask = _canonical_mask(
        key_padding_mask, "key_padding_mask", _none_or_dtype(attn_mask), "attn_mask", query.dtype
    )
    if is_causal and attn_mask is None:
        raise RuntimeError(
            "Need attn_mask if specifying the is_causal hint. "
            "You may use the Transformer module method "
            "`generate_square_subsequent_mask` to create this mask."
        )
    if is_causal and key_padding_mask is None and not need_weights:
        attn_mask = None
    else:
        attn_mask = _canonical_mask(attn_mask, "attn_mask", None, "", query.dtype, False)
        if key_padding_mask is not None:
            is_causal = False
    if embed_dim != embed_dim_to_check:
        raise AssertionError(
            f"was expecting embedding dimension of {embed_dim_to_check}, but got {embed_dim}"
        )
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise AssertionError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    if use_separate_proj_weight:
        if tuple(key.shape[:2]) != tuple(value.shape[:2]):
            raise AssertionError(
                f"key's sequence and batch dims {key.shape[:2]} do not match value's "
                f"{value.shape[:2]}"
            )
        for name, w in (("q", q_proj_weight), ("k", k_proj_weight), ("v", v_proj_weight)):
            if w is None:
                raise AssertionError(
                    f"use_separate_proj_weight is True but {name}_proj_weight is None"
                )
        b_q, b_k, b_v = (None, None, None) if in_proj_bias is None else in_proj_bias.chunk(3)
        q, k, v = _in_projection(
            query, key, value, q_proj_weight, k_proj_weight, v_proj_weight, b_q, b_k, b_v
        )
    else:
        if tuple(key.shape) != tuple(value.shape):
            raise AssertionError(f"key shape {key.shape} does not match value shape {value.shape}")
        if in_proj_weight is None:
            raise AssertionError("use_separate_proj_weight is False but in_proj_weight is None")
        q, k, v = _in_projection_packed(query, key, value, in_proj_weight, in_proj_bias)
    if attn_mask is not None:
        if attn_mask.dim() == 2:
            if tuple(attn_mask.shape) != (tgt_len, src_len):
                raise RuntimeError(
                    f"The shape of the 2D attn_mask is {attn_mask.shape}, but should be "
                    f"{(tgt_len, src_len)}."
                )
            attn_mask = attn_mask.unsqueeze(0)
        elif attn_mask.dim() == 3:
            if tuple(attn_mask.shape) != (bsz * num_heads, tgt_len, src_len):
                raise RuntimeError(
                    f"The shape of the 3D attn_mask is {attn_mask.shape}, but should be "
                    f"{(bsz * num_heads, tgt_len, src_len)}."
                )
        else:
            raise RuntimeError(f"attn_mask's dimension {attn_mask.dim()} is not supported")
    if bias_k is not None and bias_v is not None:
        if static_k is not None:
            raise AssertionError("bias cannot be added to static key.")
        if static_v is not None:
            raise AssertionError("bias cannot be added to static value.")
        k = fg.cat([k, bias_k.repeat(1, bsz, 1)])
        v = fg.cat([v, bias_v.repeat(1, bsz, 1)])
        if attn_mask is not None:
            attn_mask = pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = pad(key_padding_mask, (0, 1))
    elif bias_k is not None:
        raise AssertionError("bias_k is set but bias_v is None")
    elif bias_v is not None:
        raise AssertionError("bias_v is set but bias_k is None")
    q = q.reshape(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)
    if static_k is None:
        k = k.reshape(k.shape[0], bsz * num_heads, head_dim).transpose(0, 1)
    else:
        if static_k.size(0) != bsz * num_heads:
            raise AssertionError(
                f"expecting static_k.size(0) of {bsz * num_heads}, but got {static_k.size(0)}"
            )
        if static_k.size(2) != head_dim:
            raise AssertionError(
                f"expecting static_k.size(2) of {head_dim}, but got {static_k.size(2)}"
            )
        k = static_k
    if static_v is None:
        v = v.reshape(v.shape[0], bsz * num_heads, head_dim).transpose(0, 1)
    else:
        if static_v.size(0) != bsz * num_heads:
            raise AssertionError(
                f"expecting static_v.size(0) of {bsz * num_heads}, but got {static_v.size(0)}"
            )
        if static_v.size(2) != head_dim:
            raise AssertionError(
                f"expecting static_v.size(2) of {head_dim}, but got {static_v.size(2)}"
            )
        v = static_v
    if add_zero_attn:
        zeros = fg.zeros((bsz * num_heads, 1, head_dim), dtype=k.dtype)
        k = fg.cat([k, zeros], dim=1)
        v = fg.cat([v, zeros], dim=1)
        if attn_mask is not None:
            attn_mask = pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = pad(key_padding_mask, (0, 1))
    src_len = k.size(1)
    if key_padding_mask is not None:
        if key_padding_mask.shape[0] != bsz:
            raise AssertionError(
                f"Expected key_padded_mask.shape[0] to be {bsz}, but got "
                f"{key_padding_mask.shape[0]}"
            )
        if key_padding_mask.shape[1] != src_len:
            raise AssertionError(
                f"Expected key_padded_mask.shape[1] to be {src_len}, but got "
                f"{key_padding_mask.shape[1]}"
            )
        key_padding_mask = (
            key_padding_mask.reshape(bsz, 1, 1, src_len)
            .expand(-1, num_heads, -1, -1)
            .reshape(bsz * num_heads, 1, src_len)
        )
        attn_mask = key_padding_mask if attn_mask is None else attn_mask + key_padding_mask
    if not training:
        dropout_p = 0.0
    if need_weights:
        if is_causal and attn_mask is None:
            raise AssertionError("FIXME: is_causal not implemented for need_weights")
        scores = (q * math.sqrt(1.0 / float(q.shape[-1]))).matmul(k.transpose(-2, -1))
        if attn_mask is not None:
            scores = attn_mask + scores
        weights = softmax(scores, dim=-1)
        if dropout_p > 0.0:
            weights = dropout(weights, p=dropout_p)
        out = weights.matmul(v).transpose(0, 1).reshape(tgt_len * bsz, embed_dim)
        out = linear(out, out_proj_weight, out_proj_bias).reshape(tgt_len, bsz, -1)
        weights = weights.reshape(bsz, num_heads, tgt_len, src_len)
        if average_attn_weights:
            weights = weights.mean(dim=1)
        if not is_batched:
            out, weights = out.squeeze(1), weights.squeeze(0)
        return out, weights
    if attn_mask is not None:
        if attn_mask.size(0) == 1 and attn_mask.dim() == 3:
            attn_mask = attn_mask.unsqueeze(0)
        else:
            attn_mask = attn_mask.reshape(bsz, num_heads, -1, src_len)
    q = q.reshape(bsz, num_heads, tgt_len, head_dim)
    k = k.reshape(bsz, num_heads, src_len, head_dim)
    v = v.reshape(bsz, num_heads, src_len, head_dim)
    out = scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal)
    out = out.permute(2, 0, 1, 3).reshape(bsz * tgt_len, embed_dim)
    out = linear(out, out_proj_weight, out_proj_bias).reshape(tgt_len, bsz, -1)
    if not is_batched:
        out = out.squeeze(1)
    return out, None
