"""``torch.nn.functional`` for ferrograd: activations, losses, normalisation, embedding,
padding, convolution and pooling.

Convolution and pooling are native (``src/ops/nn/conv.rs``, ``pool.rs``): their functions
here only normalise arguments; geometry, torch's checks and kernels live in the crate. The
rest is a composition of differentiable ferrograd ops (elementwise ops, reductions, matmul,
views, ``where``) plus two Rust primitive pairs, im2col/col2im and a padded gather/scatter,
each the other's backward. So every function here is differentiable to any order
(``create_graph=True`` works through all of them).

Numerics follow torch's stable formulations: ``softplus`` and
``binary_cross_entropy_with_logits`` use ``max(x, 0) + log1p(exp(-|x|))``, ``log_softmax``
subtracts the (constant) row maximum, ``elu`` never evaluates ``exp`` of a positive number.

Where a torch op from another part of ferrograd is present (``log_softmax``, ``erf``,
``log1p``, ``expm1``, ``norm``, ``stack``) it is used; otherwise an equivalent composition is
(see ``_log1p`` and friends). ``gelu(approximate='none')`` needs ``Tensor.erf``.

Differences from torch (besides those noted on each function): ``inplace=True`` computes
out of place and copies the result into ``input``; ``dropout`` draws its mask from ferrograd's
generator (``ferrograd.manual_seed``), so masks differ from torch's for the same seed;
``embedding(sparse=True)`` returns dense gradients; integer tensors cannot be padded.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, List, Optional, Sequence, Tuple, Union

from .. import _C
from .._lazy import np

Tensor = _C.Tensor
_int_or_tuple = Union[int, Sequence[int]]

__all__ = [
    "adaptive_avg_pool1d",
    "adaptive_avg_pool2d",
    "adaptive_max_pool1d",
    "adaptive_max_pool2d",
    "avg_pool1d",
    "avg_pool2d",
    "avg_pool3d",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
    "cross_entropy",
    "dropout",
    "elu",
    "embedding",
    "fold",
    "gelu",
    "hardtanh",
    "huber_loss",
    "kl_div",
    "l1_loss",
    "layer_norm",
    "leaky_relu",
    "linear",
    "log_softmax",
    "max_pool1d",
    "max_pool2d",
    "max_pool3d",
    "mse_loss",
    "nll_loss",
    "normalize",
    "one_hot",
    "pad",
    "relu",
    "sigmoid",
    "silu",
    "smooth_l1_loss",
    "softmax",
    "softplus",
    "tanh",
    "unfold",
]


# ----- helpers ------------------------------------------------------------------------------------


def _fg() -> Any:
    import ferrograd

    return ferrograd


def _has(name: str) -> bool:
    return hasattr(Tensor, name)


def _const(arr: Any, like: Tensor) -> Tensor:
    """A constant (no grad) tensor with ``like``'s dtype."""
    return _fg().tensor(np.asarray(arr), dtype=like.dtype)


def _np(t: Tensor) -> np.ndarray:
    return np.asarray(t.detach().numpy())


def _size(t: Tensor) -> str:
    return "[" + ", ".join(str(s) for s in t.shape) + "]"


def _where(cond: Any, a: Any, b: Any) -> Tensor:
    return _C._where_tensors(cond, a, b)


def _log1p(x: Tensor) -> Tensor:
    """``log(1 + x)``, accurate for tiny ``x``: ``Tensor.log1p`` when present, else Goldberg's
    ``log(w) * x / (w - 1)`` with ``w = 1 + x`` (exactly ``x`` where ``w`` rounds to 1)."""
    if _has("log1p"):
        return x.log1p()
    w = x + 1.0
    d = w - 1.0
    tiny = d == 0
    return _where(tiny, x, w.log() * x / _where(tiny, 1.0, d))


def _expm1(x: Tensor) -> Tensor:
    return x.expm1() if _has("expm1") else x.exp() - 1.0


def _log1pexp(z: Tensor) -> Tensor:
    """``log(1 + exp(z))`` without overflow and with the exact derivative ``sigmoid(z)`` at every
    point (including 0): ``z + log1p(exp(-z))`` for ``z > 0``, ``log1p(exp(z))`` otherwise; each
    branch only ever sees non-positive exponents, so the unused one stays finite."""
    pos = z > 0
    zp = _where(pos, z, 0.0)
    zn = _where(pos, 0.0, z)
    return _where(pos, zp + _log1p((-zp).exp()), _log1p(zn.exp()))


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


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    _check_reduction(reduction)
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


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


def _amax_const(x: Tensor, dim: int) -> Tensor:
    """The maximum along ``dim`` (kept), as a constant; non-finite maxima become 0 (as in
    torch's logsumexp), so subtracting it never produces ``inf - inf``."""
    a = _np(x)
    if a.ndim == 0:
        m = np.where(np.isfinite(a), a, 0.0)
    elif a.shape[dim] == 0:
        m = np.zeros(a.shape[:dim] + (1,) + a.shape[dim + 1 :])
    else:
        m = np.max(a, axis=dim, keepdims=True)
        m = np.where(np.isfinite(m), m, 0.0)
    return _const(m, x)


def _softmax_dim(ndim: int, name: str, stacklevel: int) -> int:
    warnings.warn(
        f"Implicit dimension choice for {name} has been deprecated. Change the call to include "
        "dim=X as an argument.",
        UserWarning,
        stacklevel=stacklevel,
    )
    return 0 if ndim in (0, 1, 3) else 1


def _wrap_dim(dim: int, ndim: int) -> int:
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})"
        )
    return dim % n


# ----- activations --------------------------------------------------------------------------------


def linear(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None) -> Tensor:
    """``input @ weight.T + bias``."""
    out = input.matmul(weight.t() if weight.dim() == 2 else weight)
    return out if bias is None else out + bias


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """``max(x, 0)``; gradient 0 at 0 (as torch)."""
    return _inplace(input, input.relu(), inplace)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """``x * Phi(x)``: exact through ``erf`` (``approximate='none'``), or torch's tanh form."""
    if approximate == "tanh":
        inner = (input + input * input * input * 0.044715) * math.sqrt(2.0 / math.pi)
        return input * 0.5 * (inner.tanh() + 1.0)
    if approximate != "none":
        raise RuntimeError("approximate argument must be either none or tanh.")
    return input * 0.5 * ((input * (1.0 / math.sqrt(2.0))).erf() + 1.0)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * sigmoid(x)``."""
    return _inplace(input, input * input.sigmoid(), inplace)


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """``log(1 + exp(beta x)) / beta``, linear where ``beta x > threshold``; evaluated so that
    ``exp`` never sees a positive number (see ``_log1pexp``)."""
    bx = input * beta
    return _where(bx > threshold, input, _log1pexp(bx) / beta)


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``x`` for ``x > 0``, else ``alpha (exp(x) - 1)`` (``exp`` only sees ``min(x, 0)``, so no
    overflow and no ``0 * inf`` in the gradient). Gradient ``alpha`` at 0, as torch."""
    neg = _where(input > 0, 0.0, input)  # min(x, 0), slope 1 at 0
    return _inplace(input, _where(input > 0, input, _expm1(neg) * alpha), inplace)


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """``x`` for ``x > 0`` else ``negative_slope * x`` (slope used at 0, as torch)."""
    return _inplace(input, _where(input > 0, input, input * negative_slope), inplace)


def hardtanh(
    input: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False
) -> Tensor:
    """``clamp(x, min_val, max_val)``; gradient 1 strictly inside, 0 at and beyond the ends
    (as torch)."""
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    out = _where(input <= min_val, min_val, _where(input >= max_val, max_val, input))
    return _inplace(input, out, inplace)


def tanh(input: Tensor) -> Tensor:
    """Hyperbolic tangent."""
    return input.tanh()


def sigmoid(input: Tensor) -> Tensor:
    """Logistic sigmoid."""
    return input.sigmoid()


def _log_softmax(x: Tensor, dim: int) -> Tensor:
    if _has("log_softmax"):
        return x.log_softmax(dim)
    if x.dim() == 0:
        return x - x.detach()  # zero, with gradient 0 (as torch)
    shifted = x - _amax_const(x, dim)
    return shifted - shifted.exp().sum(dim, keepdim=True).log()


def softmax(
    input: Tensor, dim: Optional[int] = None, _stacklevel: int = 3, dtype: Any = None
) -> Tensor:
    """``exp(x) / sum(exp(x))`` along ``dim``, computed with the maximum subtracted."""
    if dim is None:
        dim = _softmax_dim(input.dim(), "softmax", _stacklevel)
    if dtype is not None:
        input = input.to(dtype)
    dim = _wrap_dim(dim, input.dim())
    if _has("softmax"):
        return input.softmax(dim)
    if input.dim() == 0:
        return input - input.detach() + 1.0
    e = (input - _amax_const(input, dim)).exp()
    return e / e.sum(dim, keepdim=True)


def log_softmax(
    input: Tensor, dim: Optional[int] = None, _stacklevel: int = 3, dtype: Any = None
) -> Tensor:
    """``x - logsumexp(x)`` along ``dim``, computed with the maximum subtracted."""
    if dim is None:
        dim = _softmax_dim(input.dim(), "log_softmax", _stacklevel)
    if dtype is not None:
        input = input.to(dtype)
    dim = _wrap_dim(dim, input.dim())
    return _log_softmax(input, dim)


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)``. The mask
    comes from ferrograd's generator (seed it with ``ferrograd.manual_seed``)."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return _inplace(input, input * 0.0, inplace)
    keep = (_fg().rand(*input.shape, dtype=input.dtype) < (1.0 - p)).to(input.dtype)
    return _inplace(input, input * (keep * (1.0 / (1.0 - p))), inplace)


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
    d = input - target
    loss = d * d
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


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
    loss = (input - target).abs()
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


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
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    d = input - target
    z = d.abs()
    if beta == 0.0:
        return _reduce(z, reduction)
    return _reduce(_where(z < beta, d * d * (0.5 / beta), z - 0.5 * beta), reduction)


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
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    d = input - target
    z = d.abs()
    loss = _where(z < delta, d * d * 0.5, (z - 0.5 * delta) * delta)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def _class_last(x: Tensor) -> Tensor:
    """Move dim 1 (classes) of an ``(N, C, d1, ...)`` tensor last."""
    if x.dim() <= 2:
        return x
    perm = [0, *range(2, x.dim()), 1]
    return x.permute(*perm)


def _check_target(target: Tensor, name: str) -> None:
    if target.dtype != _C.int64:
        raise RuntimeError(
            f"expected target dtype to be Long or Byte, but got {_type_name(target)}"
        )


def _type_name(t: Tensor) -> str:
    return {_C.float32: "Float", _C.float64: "Double", _C.int64: "Long", _C.bool: "Bool"}[t.dtype]


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
    picked, w = _nll_parts(input, target, weight, ignore_index)
    loss = -(picked * w)
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return loss.sum() / w.sum()


def _nll_parts(
    input: Tensor, target: Tensor, weight: Optional[Tensor], ignore_index: int
) -> Tuple[Tensor, Tensor]:
    """``(input at the target class, weight of the target)``, both of the target's shape."""
    fg = _fg()
    if input.dim() < 1:
        raise ValueError(f"Expected 1 or more dimensions (got {input.dim()})")
    _check_target(target, "nll_loss")
    if input.dim() == 1:
        if target.dim() != 0:
            raise ValueError(
                f"Expected input batch_size (1) to match target batch_size ({target.shape[0]})."
            )
    elif target.dim() == 0 or input.shape[0] != target.shape[0]:
        tb = 1 if target.dim() == 0 else target.shape[0]
        raise ValueError(
            f"Expected input batch_size ({input.shape[0]}) to match target batch_size ({tb})."
        )
    elif input.dim() > 2 and tuple(target.shape) != (input.shape[0], *input.shape[2:]):
        raise RuntimeError(
            f"Expected target size [{input.shape[0]}, "
            + ", ".join(str(s) for s in input.shape[2:])
            + f"], got {_size(target)}"
        )
    elif input.dim() == 2 and target.dim() != 1:
        raise RuntimeError(
            f"0D or 1D target tensor expected, multi-target not supported; got {_size(target)}"
        )
    n_classes = input.shape[0] if input.dim() == 1 else input.shape[1]
    if weight is not None and (weight.dim() != 1 or weight.shape[0] != n_classes):
        raise RuntimeError(
            f"weight tensor should be defined either for all {n_classes} classes or no classes "
            f"but got weight tensor of shape: {_size(weight)}"
        )
    t = _np(target)
    valid_np = t != ignore_index
    bad = valid_np & ((t < 0) | (t >= n_classes))
    if bad.any():
        raise IndexError(f"Target {int(t[bad].reshape(-1)[0])} is out of bounds.")
    x = _class_last(input)
    safe = _where(target == ignore_index, 0, target)
    onehot = (safe.unsqueeze(-1) == fg.arange(n_classes)).to(input.dtype)
    picked = (x * onehot).sum(-1)
    valid = (target != ignore_index).to(input.dtype)
    w = valid if weight is None else (onehot * weight).sum(-1) * valid
    return picked, w


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
    """``nll_loss(log_softmax(input, class dim), target)`` for class indices, or
    ``-sum(target * log_softmax(input))`` for class probabilities (``target`` of ``input``'s
    shape), with torch's ``label_smoothing`` and weighting rules."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    class_dim = 0 if input.dim() == 1 else 1
    if input.dim() < 1:
        raise ValueError(f"Expected 1 or more dimensions (got {input.dim()})")
    n_classes = input.shape[class_dim]
    logp = _log_softmax(input, class_dim)
    if tuple(target.shape) == tuple(input.shape) and target.dtype in (_C.float32, _C.float64):
        if label_smoothing > 0:
            target = target * (1.0 - label_smoothing) + label_smoothing / (n_classes or math.nan)
        wshape = [1] * input.dim()
        wshape[class_dim] = n_classes
        prod = logp * target
        if weight is not None:
            prod = prod * weight.reshape(*wshape)
        if reduction == "none":
            return -prod.sum(class_dim)
        if reduction == "sum":
            return -prod.sum()
        n = input.numel() // max(n_classes, 1)
        return -prod.sum() / (n if n else float("nan"))
    picked, w = _nll_parts(logp, target, weight, ignore_index)
    nll = -(picked * w)
    if reduction == "sum":
        nll_red = nll.sum()
    elif reduction == "mean":
        nll_red = nll.sum() / w.sum()
    else:
        nll_red = nll
    if label_smoothing <= 0.0:
        return nll_red
    x = _class_last(logp)
    if weight is not None:
        smooth = -(x * weight).sum(-1)
    else:
        smooth = -x.sum(-1)
    valid = (target != ignore_index).to(input.dtype)
    smooth = smooth * valid
    if reduction == "mean":
        denom = w.sum() if weight is not None else valid.sum()
        smooth_red = smooth.sum() / denom
    elif reduction == "sum":
        smooth_red = smooth.sum()
    else:
        smooth_red = smooth
    # No classes: torch's mean over them is nan, not a division error.
    per_class = label_smoothing / (n_classes or math.nan)
    return nll_red * (1.0 - label_smoothing) + smooth_red * per_class


def binary_cross_entropy(
    input: Tensor,
    target: Tensor,
    weight: Optional[Tensor] = None,
    size_average: Optional[bool] = None,
    reduce: Optional[bool] = None,
    reduction: str = "mean",
) -> Tensor:
    """``-w (t log x + (1 - t) log(1 - x))`` with each log clamped at -100 (as torch). At
    ``x`` exactly 0 or 1 the gradient is 0 where torch's is ``(x - t) / 1e-12``."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(
            f"Using a target size ({_size(target)}) that is different to the input size "
            f"({_size(input)}) is deprecated. Please ensure they have the same size."
        )
    a = _np(input)
    if a.size and ((a < 0) | (a > 1)).any():
        raise RuntimeError("all elements of input should be between 0 and 1")
    floor = math.exp(-100.0)

    def clamped_log(v: Tensor) -> Tensor:
        ok = v > floor
        return _where(ok, _where(ok, v, 1.0).log(), -100.0)

    loss = -(target * clamped_log(input) + (1.0 - target) * clamped_log(1.0 - input))
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


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
    ``(1 - t) x + (1 + (pw - 1) t) (log1p(exp(-|x|)) + max(-x, 0))``."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(
            f"Target size ({_size(target)}) must be the same as input size ({_size(input)})"
        )
    softplus_neg = _log1pexp(-input)  # log(1 + exp(-x)), stable
    if pos_weight is not None:
        log_weight = (pos_weight - 1.0) * target + 1.0
        loss = (1.0 - target) * input + log_weight * softplus_neg
    else:
        loss = (1.0 - target) * input + softplus_neg
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


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
    if log_target:
        loss = target.exp() * (target - input)
    else:
        positive = target > 0
        xlogx = target * _where(positive, target, 1.0).log()
        loss = xlogx - target * input
    if reduction == "batchmean":
        total = loss.sum()
        return total / input.shape[0] if input.dim() != 0 else total
    return _reduce(loss, reduction)


# ----- normalisation, embedding, one_hot -------------------------------------------------------


def layer_norm(
    input: Tensor,
    normalized_shape: Sequence[int],
    weight: Optional[Tensor] = None,
    bias: Optional[Tensor] = None,
    eps: float = 1e-5,
) -> Tensor:
    """Normalise over the trailing ``normalized_shape`` dims with the biased variance."""
    ns = [int(normalized_shape)] if isinstance(normalized_shape, int) else list(normalized_shape)
    k = len(ns)
    if k == 0 or input.dim() < k or list(input.shape[input.dim() - k :]) != ns:
        raise RuntimeError(
            f"Given normalized_shape={ns}, expected input with shape [*, "
            + ", ".join(str(s) for s in ns)
            + f"], but got input of size{_size(input)}"
        )
    dims = tuple(range(input.dim() - k, input.dim()))
    mean = input.mean(dims, keepdim=True)
    centred = input - mean
    var = (centred * centred).mean(dims, keepdim=True)
    out = centred * (var + eps) ** -0.5
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out


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
    if input.dtype != _C.int64:
        raise RuntimeError(
            "Expected tensor for argument #1 'indices' to have one of the following scalar "
            f"types: Long, Int; but got ferrograd.{_type_name(input)}Tensor instead (while "
            "checking arguments for embedding)"
        )
    if weight.dim() != 2:
        raise RuntimeError("'weight' must be 2-D")
    num, d = weight.shape
    if padding_idx is not None:
        if padding_idx > 0:
            assert padding_idx < num, "Padding_idx must be within num_embeddings"
        elif padding_idx < 0:
            assert padding_idx >= -num, "Padding_idx must be within num_embeddings"
            padding_idx = num + padding_idx
    idx = _np(input).astype(np.int64)
    if idx.size and (idx.min() < 0 or idx.max() >= num):
        raise IndexError("index out of range in self")
    if max_norm is not None:
        _embedding_renorm(weight, idx, float(max_norm), float(norm_type))
    w = weight
    if padding_idx is not None:
        rows = np.zeros((num, 1), dtype=bool)
        rows[padding_idx] = True
        w = _where(_fg().tensor(rows), weight.detach(), weight)
    flat = (idx.reshape(-1, 1) * d + np.arange(d).reshape(1, -1)).reshape(-1)
    shape = [*idx.shape, d]
    out = _C._nn_gather(w.contiguous(), flat.tolist(), shape, "embedding")
    if scale_grad_by_freq and idx.size:
        _, inverse, counts = np.unique(idx.reshape(-1), return_inverse=True, return_counts=True)
        s = _const((1.0 / counts[inverse]).reshape(*idx.shape, 1), out)
        out = out * s + out.detach() * (1.0 - s)  # same values, gradient divided by the count
    return out


def _embedding_renorm(weight: Tensor, idx: np.ndarray, max_norm: float, norm_type: float) -> None:
    fg = _fg()
    with fg.no_grad():
        w = _np(weight).copy()
        for r in np.unique(idx.reshape(-1)):
            n = float(np.sum(np.abs(w[r]) ** norm_type) ** (1.0 / norm_type))
            if n > max_norm:
                w[r] = w[r] * (max_norm / (n + 1e-7))
        weight.detach().copy_(fg.tensor(w, dtype=weight.dtype))


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """int64 one-hot encoding along a new last dim of size ``num_classes`` (default: max + 1)."""
    if tensor.dtype != _C.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    a = _np(tensor)
    if a.size == 0 and num_classes <= 0:
        raise RuntimeError("Can not infer total number of classes from empty tensor.")
    if num_classes == -1:
        num_classes = int(a.max()) + 1
    if a.size and a.min() < 0:
        raise RuntimeError("Class values must be non-negative.")
    if a.size and a.max() >= num_classes:
        raise RuntimeError("Class values must be smaller than num_classes.")
    return (tensor.unsqueeze(-1) == _fg().arange(num_classes)).to(_C.int64)


def normalize(
    input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out: Any = None
) -> Tensor:
    """``x / max(||x||_p, eps)`` along ``dim``."""
    if out is not None:
        raise NotImplementedError("normalize(out=...) is not supported by ferrograd")
    if _has("norm"):
        n = input.norm(p, dim, keepdim=True)
    elif p == 2.0:
        n = (input * input).sum(dim, keepdim=True).sqrt()
    elif p == 1.0:
        n = input.abs().sum(dim, keepdim=True)
    else:
        n = (input.abs() ** p).sum(dim, keepdim=True) ** (1.0 / p)
    return input / _where(n > eps, n, eps)


# ----- padding ----------------------------------------------------------------------------------


def pad(
    input: Tensor, pad: Sequence[int], mode: str = "constant", value: Optional[float] = None
) -> Tensor:
    """Pad (or, with negative amounts, crop) the last ``len(pad) // 2`` dims; ``pad`` lists
    ``(left, right)`` pairs starting from the last dim. Modes ``constant``, ``reflect``,
    ``replicate`` and ``circular``, any number of dims (torch limits the non-constant modes to
    the last 1-3 dims). Float tensors only."""
    pads = [int(v) for v in pad]
    if len(pads) % 2 != 0:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pads) // 2 > input.dim():
        raise RuntimeError(
            "Padding length should be less than or equal to two times the input dimension but "
            f"got padding length {len(pads)} and input of dimension {input.dim()}"
        )
    if mode not in ("constant", "reflect", "replicate", "circular"):
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    if mode != "constant" and value is not None and value != 0:
        raise RuntimeError(f'Padding mode "{mode}" doesn\'t take in value argument')
    shape = list(input.shape)
    per_dim: List[np.ndarray] = []
    out_shape: List[int] = []
    for d in range(input.dim()):
        k = input.dim() - 1 - d
        left, right = (pads[2 * k], pads[2 * k + 1]) if 2 * k < len(pads) else (0, 0)
        n = shape[d]
        size = n + left + right
        if size < 0 or (size == 0 and n > 0 and mode != "constant"):
            raise RuntimeError(
                f"The input size {n}, plus negative padding {left} and {right} resulted in a "
                f"negative output size, which is invalid. Check dimension {d} of your input."
            )
        src = np.arange(size) - left
        if mode == "constant":
            src = np.where((src >= 0) & (src < n), src, -1)
        elif (left, right) != (0, 0):
            if mode == "reflect":
                if left >= n or right >= n:
                    raise RuntimeError(
                        f"Argument #4: Padding size should be less than the corresponding input "
                        f"dimension, but got: padding ({left}, {right}) at dimension {d} of input "
                        f"{_size(input)}"
                    )
                period = 2 * (n - 1) if n > 1 else 1
                m = np.mod(src, period)
                src = np.where(m < n, m, period - m)
            elif mode == "replicate":
                if n == 0:
                    raise RuntimeError(
                        "padding size is expected to be positive, but got input of size "
                        f"{n} at dim {d}"
                    )
                src = np.clip(src, 0, n - 1)
            else:
                if left > n or right > n:
                    raise RuntimeError("Padding value causes wrapping around more than once.")
                src = np.mod(src, n)
        per_dim.append(src)
        out_shape.append(size)
    strides = [int(np.prod(shape[d + 1 :])) for d in range(len(shape))]
    flat = np.zeros(out_shape, dtype=np.int64)
    missing = np.zeros(out_shape, dtype=bool)
    for d, src in enumerate(per_dim):
        view = [1] * len(out_shape)
        view[d] = out_shape[d]
        s = src.reshape(view)
        flat = flat + np.where(s < 0, 0, s) * strides[d]
        missing = missing | (s < 0)
    flat = np.where(missing, -1, flat)
    kind = {
        "constant": "constant_pad",
        "reflect": "reflection_pad",
        "replicate": "replication_pad",
        "circular": "circular_pad",
    }[mode]
    out = _C._nn_gather(input.contiguous(), flat.reshape(-1).tolist(), out_shape, kind)
    if mode == "constant" and value:
        out = out + _const(np.where(missing, float(value), 0.0), input)
    return out


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


def _output_size_2d(input: Tensor, output_size: Any) -> List[int]:
    """torch's ``_list_with_default``: an int repeats, ``None`` keeps the input's size."""
    if not isinstance(output_size, (list, tuple)):
        return [int(output_size)] * 2
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
