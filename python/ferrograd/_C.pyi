"""Type stubs for ``ferrograd._C``, the compiled (Rust/PyO3) core of ferrograd.

Signatures are hand-written from ``src/python/``; checked against the built module with
``python -m mypy.stubtest ferrograd._C --allowlist python/stubtest-allowlist.txt``. Docstrings
are generated from the Rust doc comments (the runtime ``__doc__``) by
``python tools/stub_docs.py``; ``tests/python/test_stub_docs.py`` fails when they are stale.
"""

from __future__ import annotations

from builtins import bool as _bool
from builtins import float as _float
from builtins import int as _int
from collections.abc import Callable, Iterable, Iterator, Sequence
from types import EllipsisType, TracebackType
from typing import Any, SupportsIndex, TypeVar, final, overload

import numpy.typing as npt
from typing_extensions import TypeAlias, disjoint_base

from ferrograd._device import device as _Device
from ferrograd._size import Size as _Size
from ferrograd._tensor import Node as _GradFn

# The other operand of arithmetic and comparison ops: a tensor or a Python number (wrapped as a
# 0-dim tensor of dtype bool / int64 / float64, like torch's wrapped scalars).
_Operand: TypeAlias = Tensor | _float | _int | _bool
# Where anything array-like is accepted too (converted with ``ferrograd.tensor``).
_ArrayOperand: TypeAlias = Tensor | _float | _int | _bool | npt.NDArray[Any] | Sequence[Any]
# One item of a ``tensor[...]`` index.
_IndexItem: TypeAlias = (
    SupportsIndex | slice | EllipsisType | None | Tensor | Sequence[Any] | npt.NDArray[Any]
)
_Index: TypeAlias = _IndexItem | tuple[_IndexItem, ...]
# ``Tensor`` has a ``dtype`` property, which shadows the class name inside its body.
_dtype: TypeAlias = dtype

__all__ = [
    "Tensor",
    "_registry",
    "exp",
    "log",
    "sin",
    "cos",
    "tanh",
    "sigmoid",
    "relu",
    "sqrt",
    "abs",
    "neg",
    "sign",
    "exp2",
    "log2",
    "log10",
    "log1p",
    "expm1",
    "rsqrt",
    "reciprocal",
    "tan",
    "asin",
    "acos",
    "atan",
    "sinh",
    "cosh",
    "asinh",
    "acosh",
    "atanh",
    "erf",
    "erfc",
    "erfinv",
    "floor",
    "ceil",
    "trunc",
    "frac",
    "isnan",
    "isinf",
    "isfinite",
    "logical_not",
    "bitwise_not",
    "dtype",
    "Node",
    "RemovableHandle",
    "SavedVariables",
    "StorageOwner",
    "bool",
    "int64",
    "int32",
    "int16",
    "int8",
    "uint8",
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "_from_numpy",
    "_from_dlpack_capsule",
    "_make_dot",
    "_full",
    "_arange",
    "_linspace",
    "_eye",
    "_searchsorted",
    "_bucketize",
    "_rand",
    "_randn",
    "_randperm",
    "_randint",
    "_logspace",
    "_initial_seed",
    "_triangle_indices",
    "_hstack",
    "_vstack",
    "_dstack",
    "_column_stack",
    "_cartesian_prod",
    "_block_diag",
    "_broadcast_tensors",
    "_meshgrid",
    "_broadcast_shapes",
    "_combinations",
    "_tensordot",
    "_repeat_index",
    "get_default_dtype",
    "_memory_allocated",
    "_empty_meta",
    "_result_type",
    "_is_autocast_enabled",
    "_set_autocast_enabled",
    "_get_autocast_dtype",
    "_set_autocast_dtype",
    "_is_autocast_cache_enabled",
    "_set_autocast_cache_enabled",
    "_autocast_increment_nesting",
    "_autocast_decrement_nesting",
    "_clear_autocast_cache",
    "_autocast_cast",
    "can_cast",
    "promote_types",
    "_max_memory_allocated",
    "_reset_peak_memory_stats",
    "set_default_dtype",
    "manual_seed",
    "_backward",
    "_grad",
    "_push_node_creation_hook",
    "_pop_node_creation_hook",
    "_set_multithreading_enabled",
    "_is_multithreading_enabled",
    "_enter_dual_level",
    "_exit_dual_level",
    "_current_dual_level",
    "_make_dual",
    "_unpack_dual",
    "_set_tangent",
    "_suspend_forward_ad",
    "_vmap_increment_nesting",
    "_vmap_decrement_nesting",
    "_add_batch_dim",
    "_remove_batch_dim",
    "is_batchedtensor",
    "_batch_info",
    "get_unwrapped",
    "_current_vmap_level",
    "RngState",
    "_Reducer",
    "_current_graph_task_id",
    "_get_rng_state",
    "_gradient_edge",
    "_increment_version",
    "_is_checkpoint_valid",
    "_pop_saved_tensors_hooks",
    "_push_saved_tensors_hooks",
    "_allow_mutation_on_saved_tensors",
    "_AllowMutationContext",
    "_queue_callback",
    "_set_rng_state",
    "_set_saved_tensors_hooks_disabled",
    "_will_engine_execute_node",
    "_record_function",
    "_save_tensors",
    "is_grad_enabled",
    "_set_grad_enabled",
    "is_inference_mode_enabled",
    "_set_inference_mode",
    "_set_detect_anomaly",
    "is_anomaly_enabled",
    "is_anomaly_check_nan_enabled",
    "get_num_threads",
    "set_num_threads",
    "_where_tensors",
    # ----- optim -----
    "_sgd_step",
    "_adam_step",
    "_rmsprop_step",
    "_adagrad_step",
    "_nadam_step",
    "_radam_step",
    "_adamax_step",
    "_rprop_step",
    "_asgd_step",
    "_adafactor_step",
    # ----- safetensors -----
    "_safetensors_save",
    "_safetensors_save_file",
    "_safetensors_load",
    # ----- src/python/nn/sparse.rs -----
    "_nn_embedding",
    "_nn_embedding_bag",
    "_nn_one_hot",
    "_nn_embedding_renorm_",
    # ----- src/python/nn/rnn.rs -----
    "_nn_rnn",
    "_nn_rnn_cell",
    "_nn_lstm_cell",
    "_nn_gru_cell",
    # ----- src/python/nn/*.rs -----
    "_nn_im2col",
    "_nn_col2im",
    "_nn_pad",
    "_nn_interpolate",
    "_nn_shuffle",
    "_nn_cosine_similarity",
    "_nn_pairwise_distance",
    "_nn_normalize",
    "_nn_prelu",
    "_nn_linear",
    "_cdist",
    "_nn_cosine_embedding_loss",
    "_nn_margin_ranking_loss",
    "_nn_triplet_margin_loss",
    "_nn_hinge_embedding_loss",
    "_nn_soft_margin_loss",
    "_nn_multilabel_soft_margin_loss",
    "_nn_poisson_nll_loss",
    "_nn_gaussian_nll_loss",
    "_nn_layer_norm",
    "_nn_rms_norm",
    "_nn_group_norm",
    "_nn_batch_norm",
    "_nn_instance_norm",
    "_nn_local_response_norm",
    "_nn_scaled_dot_product_attention",
    "_nn_gelu",
    "_nn_silu",
    "_nn_mish",
    "_nn_elu",
    "_nn_selu",
    "_nn_celu",
    "_nn_softplus",
    "_nn_hardswish",
    "_nn_hardsigmoid",
    "_nn_leaky_relu",
    "_nn_hardtanh",
    "_nn_logsigmoid",
    "_nn_glu",
    "_nn_dropout",
    "_nn_dropout_ext",
    "_nn_shrink",
    "_nn_rrelu",
    "_nn_cross_entropy",
    "_nn_nll_loss",
    "_nn_pointwise_loss",
    "_nn_conv",
    "_nn_conv_transpose",
    "_nn_max_pool",
    "_nn_avg_pool",
    "_nn_adaptive_pool",
    "_nn_max_unpool",
    "_nn_lp_pool",
    "_cat",
    "_stack",
    "_einsum",
    "_linalg_inv",
    "_linalg_inv_ex",
    "_linalg_solve",
    "_linalg_det",
    "_linalg_slogdet",
    "_linalg_logdet",
    "_linalg_cholesky",
    "_linalg_cholesky_ex",
    "_linalg_qr",
    "_linalg_eigh",
    "_linalg_eigvalsh",
    "_linalg_svd",
    "_linalg_svdvals",
    "_linalg_pinv",
    "_linalg_lstsq",
    "_linalg_matrix_power",
    "_linalg_matrix_exp",
    "_linalg_cross",
    "_linalg_vecdot",
    "_linalg_multi_dot",
]

# ----- classes ------------------------------------------------------------------------------------

@final
class dtype:
    """An element type (`ferrograd.float32`, ...)."""

    @property
    def is_floating_point(self) -> _bool:
        """Whether this is a floating point type."""
    @property
    def is_signed(self) -> _bool:
        """Whether the type holds negative values (false for bool and uint8)."""
    @property
    def is_complex(self) -> _bool:
        """Always false: complex types are not supported."""
    @property
    def itemsize(self) -> _int:
        """Bytes per element."""
    @property
    def _numpy_name(self) -> str:
        """The NumPy dtype name."""
    def __eq__(self, other: object, /) -> _bool: ...
    def __hash__(self) -> _int: ...

@final
class Node:
    """A node of the backward graph (`tensor.grad_fn`)."""

    def name(self) -> str:
        """torch's name, e.g. `MulBackward0` (`torch::autograd::AccumulateGrad` for a leaf's
        accumulator: torch names its C++ nodes with their namespace)."""
    @property
    def next_functions(self) -> tuple[tuple[Node | None, _int], ...]:
        """`((node or None, input_nr), ...)`, one per forward input."""
    @property
    def variable(self) -> Tensor | None:
        """For `AccumulateGrad`: the leaf it accumulates into."""
    def _sequence_nr(self) -> _int:
        """Creation order."""
    def register_prehook(
        self, hook: Callable[[tuple[Tensor | None, ...]], Sequence[Tensor | None] | None]
    ) -> RemovableHandle:
        """Register `hook(grad_outputs) -> tuple | None`, run on the gradients arriving at this
        node before it runs."""
    def register_hook(
        self,
        hook: Callable[
            [tuple[Tensor | None, ...], tuple[Tensor | None, ...]],
            Sequence[Tensor | None] | None,
        ],
    ) -> RemovableHandle:
        """Register `hook(grad_inputs, grad_outputs) -> tuple | None`, run after this node
        computed
        its gradients."""
    @property
    def metadata(self) -> dict[Any, Any]:
        """A dict kept with the node (empty until something is put in it)."""
    def __eq__(self, other: object, /) -> _bool: ...
    def __hash__(self) -> _int: ...

@final
class RngState:
    """A snapshot of the global random generator (opaque; for `_set_rng_state`)."""

    ...

@final
class RemovableHandle:
    """A handle that unregisters a hook."""

    def remove(self) -> None:
        """Unregister the hook (idempotent)."""
    def __enter__(self) -> RemovableHandle:
        """Return the handle itself."""
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
        /,
    ) -> None:
        """Remove the hook."""

@final
class SavedVariables:
    """Tensors a custom Function saved; read with `unpack()` (version-checked, freed with the
    graph)."""

    def unpack(self) -> tuple[Tensor | None, ...]:
        """The saved tensors (None where None was saved)."""

@final
class _Reducer:
    """The gradient reducer of one data-parallel module: buckets of parameters, filled as
    gradients are accumulated and summed across processes by the given collective."""
    def __new__(
        cls, params: Iterable[Tensor], bucket_cap_bytes: _int, first_bucket_cap_bytes: _int
    ) -> _Reducer: ...
    def bucket_indices(self) -> list[list[_int]]:
        """The parameter indices of each bucket, in the order the buckets are reduced."""
    def bucket_buffer(self, b: _int) -> Tensor:
        """The flat buffer of bucket `b`."""
    def in_pass(self) -> _bool:
        """Whether a backward pass marked parameters ready and was not finalized yet."""
    def mark_ready(self, index: _int, collective: Any) -> None:
        """Parameter `index`'s gradient is accumulated: copy it into its bucket and start the
        buckets that are complete."""
    def finalize(self, collective: Any, find_unused: _bool) -> list[_int]:
        """End the pass: wait for every bucket and write the averaged gradients into `.grad`.
        Returns the indices of the parameters that got no gradient on this process."""

# Not registered with the module (no ``m.add_class``), so ``ferrograd._C.StorageOwner`` does not
# exist at runtime; declared for the type of ``t.numpy().base`` (allowlisted for stubtest).
@final
class StorageOwner:
    """Keeps a tensor's storage alive while a NumPy array views it."""

_TensorT = TypeVar("_TensorT", bound="Tensor")

@disjoint_base
class Tensor:
    """A ferrograd tensor. Subclassable so that `nn.Parameter` is a `Tensor`, as in torch."""

    # ----- subclasses -----------------------------------------------------------------------------

    def __new__(cls: type[_TensorT], data: Tensor, requires_grad: _bool = False) -> _TensorT: ...
    @staticmethod
    def _make_subclass(cls: type[_TensorT], data: Tensor, require_grad: _bool = False) -> _TensorT:
        """An instance of the subclass `cls` sharing `data`'s storage and version counter, a leaf
        with `requires_grad=require_grad` (torch's `Tensor._make_subclass`, used by
        `nn.Parameter`). It is registered as the object of its tensor, so the engine hands this
        very object back (`p.grad` accumulates into it; `model.weight is model.weight`)."""

    # ----- properties -----------------------------------------------------------------------------

    @property
    def shape(self) -> _Size:
        """Sizes of the dimensions, as a `ferrograd.Size`."""
    @property
    def ndim(self) -> _int:
        """Number of dimensions."""
    @property
    def dtype(self) -> _dtype:
        """Element type."""
    @property
    def device(self) -> _Device:
        """Where the tensor lives: the CPU, or `meta` for a tensor without data."""
    @property
    def is_meta(self) -> _bool:
        """Whether this is a meta tensor (a shape and dtype without data)."""
    @property
    def _version(self) -> _int:
        """The version counter shared with aliases (bumped by in-place ops)."""
    @property
    def requires_grad(self) -> _bool:
        """Whether gradients flow to or through this tensor."""
    @requires_grad.setter
    def requires_grad(self, value: _bool) -> None:
        """Whether gradients flow to or through this tensor."""
    @property
    def is_leaf(self) -> _bool:
        """A leaf is a tensor no recorded op produced."""
    @property
    def retains_grad(self) -> _bool:
        """Whether a non-leaf keeps its `.grad`."""

    # ----- shape and metadata -----------------------------------------------------------------

    @overload
    def size(self, dim: None = None) -> _Size:
        """Size of one dimension, or all sizes."""
    @overload
    def size(self, dim: _int) -> _int:
        """Size of one dimension, or all sizes."""
    @overload
    def stride(self, dim: None = None) -> tuple[_int, ...]:
        """Strides in elements."""
    @overload
    def stride(self, dim: _int) -> _int:
        """Strides in elements."""
    def dim(self) -> _int:
        """Number of dimensions."""
    def numel(self) -> _int:
        """Number of elements."""
    def is_contiguous(self) -> _bool:
        """Whether the elements are row-major without gaps."""
    def is_floating_point(self) -> _bool:
        """Whether the dtype is float32 or float64."""
    def is_inference(self) -> _bool:
        """Whether this tensor was made in inference mode."""
    def data_ptr(self) -> _int:
        """Address of the first element (shared by aliases of one storage)."""
    def storage_offset(self) -> _int:
        """Offset of the first element in the storage, in elements."""
    def element_size(self) -> _int:
        """Bytes per element."""

    # ----- autograd -------------------------------------------------------------------------------

    def requires_grad_(self, requires_grad: _bool = True) -> Tensor:
        """Set `requires_grad` on a leaf and return it."""
    def retain_grad(self) -> None:
        """Keep `.grad` for this non-leaf after backward."""
    def detach(self) -> Tensor:
        """A tensor sharing storage, cut from the graph."""
    def detach_(self) -> Tensor:
        """Cut this tensor from the graph in place."""
    def register_hook(self, hook: Callable[[Tensor], Tensor | None]) -> RemovableHandle:
        """Register `hook(grad) -> Tensor | None` on this tensor's gradient."""
    def register_post_accumulate_grad_hook(self, hook: Callable[[Tensor], None]) -> RemovableHandle:
        """Register `hook(tensor) -> None` run after this leaf's `.grad` was accumulated."""

    # ----- conversion -----------------------------------------------------------------------------

    def item(self) -> _int | _float | _bool:
        """The value of a one-element tensor as a Python number."""
    def _to_dtype(self, dtype: _dtype) -> Tensor:
        """Convert to `dtype` (a copy unless it already has it)."""
    def clone(self) -> Tensor:
        """A copy in new memory that keeps the graph."""
    def contiguous(self) -> Tensor:
        """Row-major (itself when already so)."""
    def numpy(self) -> npt.NDArray[Any]:
        """A NumPy array sharing this tensor's memory."""
    def __dlpack__(
        self,
        *,
        stream: Any | None = None,
        max_version: tuple[_int, _int] | None = None,
        dl_device: tuple[_int, _int] | None = None,
        copy: _bool | None = None,
    ) -> Any:
        """A DLPack capsule sharing this tensor's memory (for `np.from_dlpack(t)`,
        `torch.from_dlpack(t)`): `dltensor_versioned` when the consumer passes
        `max_version >= (1, 0)`, the legacy `dltensor` otherwise; `copy=True` exports a copy."""
    def __dlpack_device__(self) -> tuple[_int, _int]:
        """The DLPack device of this tensor: `(1, 0)`, kDLCPU."""

    # ----- elementwise ----------------------------------------------------------------------------

    def exp(self) -> Tensor:
        """e^x elementwise."""
    def log(self) -> Tensor:
        """Natural logarithm elementwise."""
    def sin(self) -> Tensor:
        """Sine elementwise."""
    def cos(self) -> Tensor:
        """Cosine elementwise."""
    def tanh(self) -> Tensor:
        """Hyperbolic tangent elementwise."""
    def sigmoid(self) -> Tensor:
        """Logistic sigmoid elementwise."""
    def relu(self) -> Tensor:
        """max(x, 0) elementwise."""
    def sqrt(self) -> Tensor:
        """Square root elementwise."""
    def abs(self) -> Tensor:
        """Absolute value elementwise."""
    def neg(self) -> Tensor:
        """Negation elementwise."""
    def sign(self) -> Tensor:
        """Sign (-1, 0, 1) elementwise."""
    def add(self, other: _Operand, *, alpha: _float | None = None) -> Tensor:
        """`self + alpha * other`, broadcasting."""
    def sub(self, other: _Operand, *, alpha: _float | None = None) -> Tensor:
        """`self - alpha * other`, broadcasting."""
    def mul(self, other: _Operand) -> Tensor:
        """`self * other`, broadcasting."""
    def pow(self, other: _Operand) -> Tensor:
        """`self ** other`, broadcasting."""
    def eq(self, other: _Operand) -> Tensor:
        """`self == other` elementwise (a bool tensor)."""
    def ne(self, other: _Operand) -> Tensor:
        """`self != other` elementwise (a bool tensor)."""
    def lt(self, other: _Operand) -> Tensor:
        """`self < other` elementwise (a bool tensor)."""
    def le(self, other: _Operand) -> Tensor:
        """`self <= other` elementwise (a bool tensor)."""
    def gt(self, other: _Operand) -> Tensor:
        """`self > other` elementwise (a bool tensor)."""
    def ge(self, other: _Operand) -> Tensor:
        """`self >= other` elementwise (a bool tensor)."""
    def add_(self, other: _Operand, *, alpha: _float | None = None) -> Tensor:
        """`self += alpha * other` in place; returns self."""
    def sub_(self, other: _Operand, *, alpha: _float | None = None) -> Tensor:
        """`self -= alpha * other` in place; returns self."""
    def mul_(self, other: _Operand) -> Tensor:
        """`self *= other` in place; returns self."""
    def div_(self, other: _Operand) -> Tensor:
        """`self /= other` in place; returns self."""

    # ----- operators ------------------------------------------------------------------------------

    def __add__(self, other: _Operand, /) -> Tensor: ...
    def __radd__(self, other: _Operand, /) -> Tensor: ...
    def __sub__(self, other: _Operand, /) -> Tensor: ...
    def __rsub__(self, other: _Operand, /) -> Tensor: ...
    def __mul__(self, other: _Operand, /) -> Tensor: ...
    def __rmul__(self, other: _Operand, /) -> Tensor: ...
    def __truediv__(self, other: _Operand, /) -> Tensor: ...
    def __rtruediv__(self, other: _Operand, /) -> Tensor: ...
    def __pow__(self, other: _Operand, modulo: None = None, /) -> Tensor: ...
    def __rpow__(self, other: _Operand, modulo: None = None, /) -> Tensor: ...
    def __matmul__(self, other: Tensor, /) -> Tensor: ...
    def __rmatmul__(self, other: Tensor, /) -> Tensor: ...
    def __iadd__(self, other: _Operand, /) -> Tensor: ...
    def __isub__(self, other: _Operand, /) -> Tensor: ...
    def __imul__(self, other: _Operand, /) -> Tensor: ...
    def __itruediv__(self, other: _Operand, /) -> Tensor: ...
    def __neg__(self) -> Tensor: ...
    def __eq__(self, other: _Operand, /) -> Tensor:  # type: ignore[override]
        ...
    def __ne__(self, other: _Operand, /) -> Tensor:  # type: ignore[override]
        ...
    def __lt__(self, other: _Operand, /) -> Tensor: ...
    def __le__(self, other: _Operand, /) -> Tensor: ...
    def __gt__(self, other: _Operand, /) -> Tensor: ...
    def __ge__(self, other: _Operand, /) -> Tensor: ...
    def __hash__(self) -> _int: ...
    def __len__(self) -> _int: ...
    def __bool__(self) -> _bool: ...
    def __float__(self) -> _float: ...
    def __int__(self) -> _int: ...
    def __index__(self) -> _int: ...

    # ----- reductions, linear algebra, views ------------------------------------------------------

    def sum(self, dim: _int | Sequence[_int] | None = None, keepdim: _bool = False) -> Tensor:
        """Sum over all elements or `dim`."""
    def mean(self, dim: _int | Sequence[_int] | None = None, keepdim: _bool = False) -> Tensor:
        """Mean over all elements or `dim`."""
    def dot(self, other: Tensor) -> Tensor:
        """Inner product of two 1-D tensors."""
    def mv(self, vec: Tensor) -> Tensor:
        """Matrix-vector product."""
    def matmul(self, other: Tensor) -> Tensor:
        """Matrix product with torch's broadcasting rules."""
    @overload
    def reshape(self, shape: Sequence[_int], /) -> Tensor:
        """Same elements with another shape (a view when possible)."""
    @overload
    def reshape(self, *shape: _int) -> Tensor:
        """Same elements with another shape (a view when possible)."""
    @overload
    def view(self, shape: Sequence[_int], /) -> Tensor:
        """A view with another shape."""
    @overload
    def view(self, *shape: _int) -> Tensor:
        """A view with another shape."""
    @overload
    def expand(self, sizes: Sequence[_int], /) -> Tensor:
        """Broadcast to a shape without copying (-1 keeps a size)."""
    @overload
    def expand(self, *sizes: _int) -> Tensor:
        """Broadcast to a shape without copying (-1 keeps a size)."""
    @overload
    def permute(self, dims: Sequence[_int], /) -> Tensor:
        """Reorder dimensions."""
    @overload
    def permute(self, *dims: _int) -> Tensor:
        """Reorder dimensions."""
    def transpose(self, dim0: _int, dim1: _int) -> Tensor:
        """Swap two dimensions."""
    def t(self) -> Tensor:
        """Matrix transpose (≤ 2-D)."""
    def unsqueeze(self, dim: _int) -> Tensor:
        """Insert a size-1 dimension."""
    def squeeze(self, dim: _int | None = None) -> Tensor:
        """Remove size-1 dimensions."""
    def flatten(self, start_dim: _int = 0, end_dim: _int = ...) -> Tensor:
        """Flatten dims `start_dim..=end_dim`."""
    def _slice(self, dim: _int, start: _int | None, stop: _int | None, step: _int) -> Tensor:
        """Elements `start..stop` by `step` along `dim` (a view)."""
    def select(self, dim: _int, index: _int) -> Tensor:
        """The sub-tensor at `index` along `dim` (a view)."""
    def narrow(self, dim: _int, start: _int, length: _int) -> Tensor:
        """`length` elements from `start` along `dim` (a view)."""
    def unfold(self, dimension: _int, size: _int, step: _int) -> Tensor:
        """Every window of `size` elements along `dimension`, `step` apart, as a new last
        dimension
        (a view; windows overlap when `step < size`)."""

    # ----- in place -------------------------------------------------------------------------------

    def fill_(self, value: _float) -> Tensor:
        """Fill with `value` in place."""
    def zero_(self) -> Tensor:
        """Fill with zeros in place."""
    def copy_(self, src: _ArrayOperand) -> Tensor:
        """Copy `src` into this tensor in place (broadcast, converted)."""
    def _where(self, cond: _ArrayOperand, other: _ArrayOperand) -> Tensor:
        """`cond ? self : other` elementwise."""

    # ----- autograd, conversion and Python protocol (``__repr__``, ``__str__``, ``__getitem__``
    # and ``__setitem__`` are attached from python/ferrograd/_tensor.py, ``_install``) -----------

    @property
    def grad(self) -> Tensor | None:
        """The accumulated gradient (warns when read on a non-leaf that does not retain it)."""
    @grad.setter
    def grad(self, value: Tensor | None) -> None:
        """The accumulated gradient (warns when read on a non-leaf that does not retain it)."""
    @grad.deleter
    def grad(self) -> None:
        """The accumulated gradient (warns when read on a non-leaf that does not retain it)."""
    @property
    def grad_fn(self) -> _GradFn | None:
        """The node that produced this tensor, or None for leaves."""
    @property
    def data(self) -> Tensor:
        """A detached alias of this tensor."""
    @property
    def T(self) -> Tensor:
        """All dimensions reversed."""
    @property
    def mT(self) -> Tensor:
        """The last two dimensions swapped."""
    is_cuda: _bool
    """Always False: ferrograd computes on the CPU."""
    __array_priority__: _int
    """Makes NumPy defer binary operators to the tensor."""
    @overload
    def to(self, dtype: _dtype, /, *, non_blocking: _bool = False, copy: _bool = False) -> Tensor:
        """Convert to a dtype (given, or another tensor's); a device must be the CPU.
        `to(dtype)`, `to(device, dtype)`, `to(other)`, with `non_blocking` and `copy` keywords."""
    @overload
    def to(
        self,
        device: str | _Device | None = None,
        dtype: _dtype | None = None,
        *,
        non_blocking: _bool = False,
        copy: _bool = False,
    ) -> Tensor:
        """Convert to a dtype (given, or another tensor's); a device must be the CPU.
        `to(dtype)`, `to(device, dtype)`, `to(other)`, with `non_blocking` and `copy` keywords."""
    @overload
    def to(self, other: Tensor, /, *, non_blocking: _bool = False, copy: _bool = False) -> Tensor:
        """Convert to a dtype (given, or another tensor's); a device must be the CPU.
        `to(dtype)`, `to(device, dtype)`, `to(other)`, with `non_blocking` and `copy` keywords."""
    def cpu(self, memory_format: Any = None) -> Tensor:
        """This tensor: it is on the CPU already."""
    def cuda(self, *args: Any, **kwargs: Any) -> Tensor:
        """Raises: ferrograd computes on the CPU only."""
    def float(self) -> Tensor:
        """`self.to(float32)`."""
    def double(self) -> Tensor:
        """`self.to(float64)`."""
    def long(self) -> Tensor:
        """`self.to(int64)`."""
    def int(self) -> Tensor:
        """`self.to(int32)`."""
    def short(self) -> Tensor:
        """`self.to(int16)`."""
    def char(self) -> Tensor:
        """`self.to(int8)`."""
    def byte(self) -> Tensor:
        """`self.to(uint8)`."""
    def half(self) -> Tensor:
        """`self.to(float16)`."""
    def pin_memory(self, device: Any = None) -> Tensor:
        """This tensor: pinned memory speeds copies to an accelerator, and ferrograd has none
        (torch's CPU-only build raises here; DataLoader's ``pin_memory=True`` works either way)."""
    def is_pinned(self, device: Any = None) -> _bool:
        """False: ferrograd never pins memory (see ``pin_memory``)."""
    def bfloat16(self) -> Tensor:
        """`self.to(bfloat16)`."""
    def bool(self) -> Tensor:
        """`self.to(bool)`."""
    def type_as(self, other: Tensor) -> Tensor:
        """`self.to(other.dtype)`."""
    def tolist(self) -> Any:
        """The elements as (nested) Python lists, or a number for a 0-d tensor."""
    def __array__(
        self, dtype: npt.DTypeLike | None = None, copy: _bool | None = None
    ) -> npt.NDArray[Any]:
        """The tensor as a NumPy array (NumPy's array protocol)."""
    def __getitem__(self, index: _Index) -> Tensor:
        """Indexing: ints, slices, `...` and `None` give a view; int64/bool tensors and lists
        (advanced indexing, NumPy's placement rule with ints applied first, as torch) copy."""
    def __setitem__(self, index: _Index, value: _ArrayOperand) -> None:
        """Assign `value` (broadcast) at the index (`index_put_` for advanced indices)."""
    def __iter__(self) -> Iterator[Tensor]: ...
    def backward(
        self,
        gradient: Tensor | None = None,
        retain_graph: _bool | None = None,
        create_graph: _bool = False,
        inputs: Tensor | Sequence[Tensor] | None = None,
    ) -> None:
        """Accumulate the gradient of this tensor into the graph leaves' `.grad`
        (`ferrograd.autograd.backward` with this tensor as the root)."""
    def ndimension(self) -> _int:
        """Number of dimensions (`dim()`)."""
    def nelement(self) -> _int:
        """Number of elements (`numel()`)."""
    def new_tensor(self, data: Any, dtype: _dtype | None = None) -> Tensor:
        """A new tensor from `data`, with this tensor's dtype by default."""
    @overload
    def new_zeros(self, size: Sequence[_int], /, *, dtype: _dtype | None = None) -> Tensor:
        """Zeros of shape `size`, with this tensor's dtype by default."""
    @overload
    def new_zeros(self, *size: _int, dtype: _dtype | None = None) -> Tensor:
        """Zeros of shape `size`, with this tensor's dtype by default."""
    @overload
    def new_ones(self, size: Sequence[_int], /, *, dtype: _dtype | None = None) -> Tensor:
        """Ones of shape `size`, with this tensor's dtype by default."""
    @overload
    def new_ones(self, *size: _int, dtype: _dtype | None = None) -> Tensor:
        """Ones of shape `size`, with this tensor's dtype by default."""
    def where(self, condition: _ArrayOperand, other: _ArrayOperand) -> Tensor:
        """`self` where `condition` else `other`, broadcasting."""
    def square(self) -> Tensor:
        """`self * self`."""
    def __abs__(self) -> Tensor: ...
    def __pos__(self) -> Tensor: ...
    def __repr__(self) -> str:
        """torch-style `tensor([...])` formatting (`BatchedTensor(...)` inside vmap, as torch)."""
    def __str__(self) -> str:
        """torch-style `tensor([...])` formatting (`BatchedTensor(...)` inside vmap, as torch)."""

    # ----- src/python/ops/{unary,binary,reduce}.rs, src/python/nn/softmax.rs ----------------------

    def exp2(self) -> Tensor:
        """2^x elementwise."""
    def log2(self) -> Tensor:
        """Base-2 logarithm elementwise."""
    def log10(self) -> Tensor:
        """Base-10 logarithm elementwise."""
    def log1p(self) -> Tensor:
        """ln(1 + x) elementwise."""
    def expm1(self) -> Tensor:
        """e^x - 1 elementwise."""
    def rsqrt(self) -> Tensor:
        """1 / sqrt(x) elementwise."""
    def reciprocal(self) -> Tensor:
        """1 / x elementwise."""
    def tan(self) -> Tensor:
        """Tangent elementwise."""
    def asin(self) -> Tensor:
        """Arcsine elementwise."""
    def acos(self) -> Tensor:
        """Arccosine elementwise."""
    def atan(self) -> Tensor:
        """Arctangent elementwise."""
    def sinh(self) -> Tensor:
        """Hyperbolic sine elementwise."""
    def cosh(self) -> Tensor:
        """Hyperbolic cosine elementwise."""
    def asinh(self) -> Tensor:
        """Inverse hyperbolic sine elementwise."""
    def acosh(self) -> Tensor:
        """Inverse hyperbolic cosine elementwise."""
    def atanh(self) -> Tensor:
        """Inverse hyperbolic tangent elementwise."""
    def erf(self) -> Tensor:
        """Error function elementwise."""
    def erfc(self) -> Tensor:
        """Complementary error function elementwise."""
    def erfinv(self) -> Tensor:
        """Inverse error function elementwise."""
    def floor(self) -> Tensor:
        """Round down elementwise (zero gradient)."""
    def ceil(self) -> Tensor:
        """Round up elementwise (zero gradient)."""
    def trunc(self) -> Tensor:
        """Round towards zero elementwise (zero gradient)."""
    def frac(self) -> Tensor:
        """Fractional part x - trunc(x) elementwise."""
    def isnan(self) -> Tensor:
        """Elementwise NaN test (bool)."""
    def isinf(self) -> Tensor:
        """Elementwise infinity test (bool)."""
    def isfinite(self) -> Tensor:
        """Elementwise finiteness test (bool)."""
    def logical_not(self) -> Tensor:
        """Elementwise logical not (bool)."""
    def bitwise_not(self) -> Tensor:
        """Bitwise not (bool or integer tensors)."""
    def __invert__(self) -> Tensor: ...
    def maximum(self, other: _Operand) -> Tensor:
        """`maximum(self, other)` elementwise, broadcasting."""
    def minimum(self, other: _Operand) -> Tensor:
        """`minimum(self, other)` elementwise, broadcasting."""
    def fmod(self, other: _Operand) -> Tensor:
        """`fmod(self, other)` elementwise, broadcasting."""
    def remainder(self, other: _Operand) -> Tensor:
        """`remainder(self, other)` elementwise, broadcasting."""
    def atan2(self, other: _Operand) -> Tensor:
        """`atan2(self, other)` elementwise, broadcasting."""
    def arctan2(self, other: _Operand) -> Tensor:
        """`arctan2(self, other)` elementwise, broadcasting."""
    def logical_and(self, other: _Operand) -> Tensor:
        """`logical_and(self, other)` elementwise, broadcasting."""
    def logical_or(self, other: _Operand) -> Tensor:
        """`logical_or(self, other)` elementwise, broadcasting."""
    def logical_xor(self, other: _Operand) -> Tensor:
        """`logical_xor(self, other)` elementwise, broadcasting."""
    def bitwise_and(self, other: _Operand) -> Tensor:
        """`bitwise_and(self, other)` elementwise, broadcasting."""
    def bitwise_or(self, other: _Operand) -> Tensor:
        """`bitwise_or(self, other)` elementwise, broadcasting."""
    def bitwise_xor(self, other: _Operand) -> Tensor:
        """`bitwise_xor(self, other)` elementwise, broadcasting."""
    def floor_divide(self, other: _Operand) -> Tensor:
        """Division rounded down (`//`)."""
    def __and__(self, other: _Operand, /) -> Tensor: ...
    def __rand__(self, other: _Operand, /) -> Tensor: ...
    def __or__(self, other: _Operand, /) -> Tensor: ...
    def __ror__(self, other: _Operand, /) -> Tensor: ...
    def __xor__(self, other: _Operand, /) -> Tensor: ...
    def __rxor__(self, other: _Operand, /) -> Tensor: ...
    def __mod__(self, other: _Operand, /) -> Tensor: ...
    def __rmod__(self, other: _Operand, /) -> Tensor: ...
    def __floordiv__(self, other: _Operand, /) -> Tensor: ...
    def __rfloordiv__(self, other: _Operand, /) -> Tensor: ...
    def round(self, *, decimals: _int = 0) -> Tensor:
        """Nearest integer (halves to even), or to `decimals` decimal places."""
    def clamp(self, min: _Operand | None = None, max: _Operand | None = None) -> Tensor:
        """Clamp into `[min, max]` (numbers or tensors; either may be None)."""
    def clip(self, min: _Operand | None = None, max: _Operand | None = None) -> Tensor:
        """Alias of `clamp`."""
    def nan_to_num(
        self, nan: _float = 0.0, posinf: _float | None = None, neginf: _float | None = None
    ) -> Tensor:
        """Replace NaN, +inf and -inf with finite numbers."""
    def div(self, other: _Operand, *, rounding_mode: str | None = None) -> Tensor:
        """`self / other`; `rounding_mode` "trunc" or "floor" rounds the quotient."""
    def divide(self, other: _Operand, *, rounding_mode: str | None = None) -> Tensor:
        """Alias of `div`."""
    def prod(
        self,
        dim: _int | Sequence[_int] | None = None,
        keepdim: _bool = False,
        *,
        dtype: _dtype | None = None,
    ) -> Tensor:
        """Product over all elements or `dim`."""
    def amax(self, dim: _int | Sequence[_int] | None = None, keepdim: _bool = False) -> Tensor:
        """Largest elements over `dim` (all when empty); ties share the gradient."""
    def amin(self, dim: _int | Sequence[_int] | None = None, keepdim: _bool = False) -> Tensor:
        """Smallest elements over `dim` (all when empty); ties share the gradient."""
    def max(self, dim: _int | Tensor | None = None, keepdim: _bool = False) -> Any:
        """`max()` (all), `max(dim, keepdim=False)` -> `(values, indices)`, or `max(other)`."""
    def min(self, dim: _int | Tensor | None = None, keepdim: _bool = False) -> Any:
        """`min()` (all), `min(dim, keepdim=False)` -> `(values, indices)`, or `min(other)`."""
    def argmax(self, dim: _int | None = None, keepdim: _bool = False) -> Tensor:
        """Index of the largest element (of the flattened tensor when `dim` is None)."""
    def argmin(self, dim: _int | None = None, keepdim: _bool = False) -> Tensor:
        """Index of the smallest element (of the flattened tensor when `dim` is None)."""
    def var(
        self,
        dim: _int | Sequence[_int] | _bool | None = None,
        unbiased: _bool | None = None,
        keepdim: _bool = False,
        *,
        correction: _float | None = None,
    ) -> Tensor:
        """Variance over `dim` with `correction` (default 1) or the legacy `unbiased` flag."""
    def std(
        self,
        dim: _int | Sequence[_int] | _bool | None = None,
        unbiased: _bool | None = None,
        keepdim: _bool = False,
        *,
        correction: _float | None = None,
    ) -> Tensor:
        """Standard deviation over `dim` with `correction` (default 1) or `unbiased`."""
    def norm(
        self,
        p: _float | str | None = None,
        dim: _int | Sequence[_int] | None = None,
        keepdim: _bool = False,
        dtype: _dtype | None = None,
    ) -> Tensor:
        """The `p`-norm over `dim` (all when None); `'fro'` is the 2-norm."""
    def _vector_norm(
        self, ord: _float = 2.0, dim: _int | Sequence[_int] | None = None, keepdim: _bool = False
    ) -> Tensor:
        """The vector `ord`-norm (`torch.linalg.vector_norm`)."""
    def logsumexp(self, dim: _int | Sequence[_int], keepdim: _bool = False) -> Tensor:
        """log Σ exp over `dim`, stable for large inputs."""
    def softmax(self, dim: _int, dtype: _dtype | None = None) -> Tensor:
        """Softmax along `dim` (after converting to `dtype` when given)."""
    def log_softmax(self, dim: _int, dtype: _dtype | None = None) -> Tensor:
        """Log-softmax along `dim` (after converting to `dtype` when given)."""
    def cumsum(self, dim: _int, *, dtype: _dtype | None = None) -> Tensor:
        """Cumulative sum along `dim`."""
    def cumprod(self, dim: _int, *, dtype: _dtype | None = None) -> Tensor:
        """Cumulative product along `dim`."""
    def all(self, dim: _int | Sequence[_int] | None = None, keepdim: _bool = False) -> Tensor:
        """Whether all elements (over `dim`) are nonzero."""
    def any(self, dim: _int | Sequence[_int] | None = None, keepdim: _bool = False) -> Tensor:
        """Whether any element (over `dim`) is nonzero."""
    # ----- src/python/ops/sort.rs ----------------------------------------------------------------
    def sort(
        self, dim: _int = -1, descending: _bool = False, *, stable: _bool | None = None
    ) -> Any:
        """`(values, indices)` sorted along `dim`; NaN is the largest value."""
    def argsort(
        self, dim: _int = -1, descending: _bool = False, *, stable: _bool | None = None
    ) -> Tensor:
        """The indices that sort the tensor along `dim`."""
    def msort(self) -> Tensor:
        """Sorted along the first dimension."""
    def topk(self, k: _int, dim: _int = -1, largest: _bool = True, sorted: _bool = True) -> Any:
        """`(values, indices)` of the `k` largest (or smallest) elements along `dim`."""
    def kthvalue(self, k: _int, dim: _int = -1, keepdim: _bool = False) -> Any:
        """`(values, indices)` of the `k`-th smallest element along `dim`."""
    def median(self, dim: _int | None = None, keepdim: _bool = False) -> Any:
        """The lower median of all elements, or `(values, indices)` along `dim`."""
    def nanmedian(self, dim: _int | None = None, keepdim: _bool = False) -> Any:
        """`median` ignoring NaN."""
    def mode(self, dim: _int = -1, keepdim: _bool = False) -> Any:
        """`(values, indices)` of the most frequent value along `dim`."""
    def cummax(self, dim: _int) -> Any:
        """`(values, indices)` of the running maximum along `dim`."""
    def cummin(self, dim: _int) -> Any:
        """`(values, indices)` of the running minimum along `dim`."""
    def quantile(
        self,
        q: _float | Tensor,
        dim: _int | None = None,
        keepdim: _bool = False,
        *,
        interpolation: str = "linear",
    ) -> Tensor:
        """The `q`-quantiles over `dim` (all elements when None)."""
    def nanquantile(
        self,
        q: _float | Tensor,
        dim: _int | None = None,
        keepdim: _bool = False,
        *,
        interpolation: str = "linear",
    ) -> Tensor:
        """`quantile` ignoring NaN."""
    def unique(
        self,
        sorted: _bool = True,
        return_inverse: _bool = False,
        return_counts: _bool = False,
        dim: _int | None = None,
    ) -> Any:
        """The sorted distinct elements (slices along `dim`), with the inverse and the counts
        when asked."""
    def unique_consecutive(
        self, return_inverse: _bool = False, return_counts: _bool = False, dim: _int | None = None
    ) -> Any:
        """The elements (slices along `dim`) with runs of equal neighbours collapsed, with the
        inverse and the counts when asked."""
    def bincount(self, weights: Tensor | None = None, minlength: _int = 0) -> Tensor:
        """How often each non-negative integer occurs (or the sum of `weights` per value)."""
    def histc(self, bins: _int = 100, min: _float = 0, max: _float = 0) -> Tensor:
        """Histogram with `bins` equal bins over `[min, max]` (the data's range when equal)."""
    def argwhere(self) -> Tensor:
        """Coordinates of the nonzero elements, `[count, ndim]`."""
    def count_nonzero(self, dim: _int | Sequence[_int] | None = None) -> Tensor:
        """The number of nonzero elements over `dim` (all when None)."""
    # ----- src/python/ops/{shape,indexing,matmul,linalg}.rs ---------------------------------------
    def view_as(self, other: Tensor) -> Tensor:
        """A view with `other`'s shape."""
    def unflatten(self, dim: _int, sizes: Sequence[_int]) -> Tensor:
        """Split dim `dim` into `sizes` (a view)."""
    def movedim(self, source: _int | Sequence[_int], destination: _int | Sequence[_int]) -> Tensor:
        """Move dims `source` to `destination` (a view)."""
    def moveaxis(self, source: _int | Sequence[_int], destination: _int | Sequence[_int]) -> Tensor:
        """Alias of `movedim`."""
    def expand_as(self, other: Tensor) -> Tensor:
        """Broadcast to `other`'s shape (a view)."""
    def broadcast_to(self, size: Sequence[_int]) -> Tensor:
        """Broadcast to `size` (a view)."""
    def split(
        self, split_size_or_sections: _int | Sequence[_int], dim: _int = 0
    ) -> tuple[Tensor, ...]:
        """Pieces of `split_size_or_sections` along `dim` (views)."""
    def split_with_sizes(self, split_sizes: Sequence[_int], dim: _int = 0) -> tuple[Tensor, ...]:
        """Pieces of the given sizes along `dim` (views)."""
    def chunk(self, chunks: _int, dim: _int = 0) -> tuple[Tensor, ...]:
        """At most `chunks` equal pieces along `dim` (views)."""
    def unbind(self, dim: _int = 0) -> tuple[Tensor, ...]:
        """The slices along `dim` (views)."""
    def flip(self, *args: _int | Sequence[_int], **kwargs: Sequence[_int]) -> Tensor:
        """Reverse along `dims` (a copy); `flip(0, 1)`, `flip((0, 1))` or `flip(dims=(0, 1))`."""
    def roll(
        self, shifts: _int | Sequence[_int], dims: _int | Sequence[_int] | None = None
    ) -> Tensor:
        """Shift elements cyclically (a copy)."""
    def repeat(self, *sizes: _int | Sequence[_int]) -> Tensor:
        """Tile `sizes[i]` times along each dim (a copy)."""
    def tile(self, *dims: _int | Sequence[_int]) -> Tensor:
        """`repeat` with missing leading sizes taken as 1 (a copy)."""
    def _index(self, indices: Sequence[Tensor | None]) -> Tensor:
        """Advanced indexing with one optional index tensor per leading dim."""
    def index_put(
        self, indices: Sequence[Tensor | None], values: _ArrayOperand, accumulate: _bool = False
    ) -> Tensor:
        """Out-of-place `index_put`."""
    def index_put_(
        self, indices: Sequence[Tensor | None], values: _ArrayOperand, accumulate: _bool = False
    ) -> Tensor:
        """In-place `index_put_`."""
    def index_select(self, dim: _int, index: Tensor) -> Tensor:
        """Elements along `dim` at `index`."""
    def gather(self, dim: _int, index: Tensor) -> Tensor:
        """Values along `dim` at `index`, shaped like `index`."""
    def scatter(
        self,
        dim: _int,
        index: Tensor,
        src: Tensor | _float | None = None,
        value: Tensor | _float | None = None,
    ) -> Tensor:
        """A copy with `src` (tensor or number) written along `dim` at `index`."""
    def scatter_add(self, dim: _int, index: Tensor, src: Tensor) -> Tensor:
        """A copy with `src` added along `dim` at `index`."""
    def index_add(self, dim: _int, index: Tensor, source: Tensor, *, alpha: _float = 1.0) -> Tensor:
        """A copy with `alpha * source` added along `dim` at `index`."""
    def masked_fill(self, mask: Tensor, value: Tensor | _float) -> Tensor:
        """`value` where `mask` is true."""
    def masked_fill_(self, mask: Tensor, value: Tensor | _float) -> Tensor:
        """In-place `masked_fill`."""
    def masked_select(self, mask: Tensor) -> Tensor:
        """The elements where `mask` is true (1-D)."""
    def take_along_dim(self, indices: Tensor, dim: _int | None = None) -> Tensor:
        """`gather` with broadcasting; flattened without `dim`."""
    def nonzero(self, *, as_tuple: _bool = False) -> Any:
        """Coordinates of the non-zero elements."""
    def mm(self, mat2: Tensor) -> Tensor:
        """Strict 2-D matrix product."""
    def bmm(self, mat2: Tensor) -> Tensor:
        """Strict 3-D batched matrix product."""
    def outer(self, vec2: Tensor) -> Tensor:
        """Outer product of two vectors."""
    def trace(self) -> Tensor:
        """Sum of the main diagonal."""
    def diag(self, diagonal: _int = 0) -> Tensor:
        """Vector → diagonal matrix; matrix → diagonal."""
    def diagonal(self, offset: _int = 0, dim1: _int = 0, dim2: _int = 1) -> Tensor:
        """A diagonal as the last dim (a view)."""
    def tril(self, diagonal: _int = 0) -> Tensor:
        """Lower triangle."""
    def triu(self, diagonal: _int = 0) -> Tensor:
        """Upper triangle."""
    def inverse(self) -> Tensor:
        """The inverse of a square matrix (batched), as `torch.inverse`."""
    def det(self) -> Tensor:
        """The determinant (batched)."""
    def logdet(self) -> Tensor:
        """`log det`: NaN for a negative determinant."""
    def slogdet(self) -> Any:
        """`(sign, logabsdet)`."""
    def svd(self, some: _bool = True, compute_uv: _bool = True) -> Any:
        """`(U, S, V)` with torch.svd's `some` and `compute_uv`."""
    def qr(self, some: _bool = True) -> Any:
        """`(Q, R)`, reduced when `some`."""
    def cholesky(self, upper: _bool = False) -> Tensor:
        """The Cholesky factor, lower unless `upper`."""
    def pinverse(self, rcond: _float = 1e-15) -> Tensor:
        """The pseudo-inverse with cutoff `rcond`."""
    def matrix_power(self, n: _int) -> Tensor:
        """`A^n` for an integer `n`."""
    def matrix_exp(self) -> Tensor:
        """The matrix exponential."""
    def cross(self, other: Tensor, dim: _int | None = None) -> Tensor:
        """The cross product of 3-vectors along `dim` (the first dim of size 3 when None)."""

    # ----- everyday API: pointwise, products, indexing, shape, creation ---------------------------

    def lerp(self, end: Tensor, weight: _Operand) -> Tensor:
        """`self + weight * (end - self)`; `weight` a number or a tensor."""
    def addcmul(self, tensor1: Tensor, tensor2: Tensor, *, value: _float = 1.0) -> Tensor:
        """`self + value * tensor1 * tensor2`."""
    def addcdiv(self, tensor1: Tensor, tensor2: Tensor, *, value: _float = 1.0) -> Tensor:
        """`self + value * tensor1 / tensor2`."""
    def isclose(
        self, other: Tensor, rtol: _float = 1e-05, atol: _float = 1e-08, equal_nan: _bool = False
    ) -> Tensor:
        """Elementwise `|self - other| <= atol + rtol * |other|` (bool)."""
    def allclose(
        self, other: Tensor, rtol: _float = 1e-05, atol: _float = 1e-08, equal_nan: _bool = False
    ) -> _bool:
        """Whether every element is close to `other`'s (see `isclose`)."""
    def equal(self, other: Tensor) -> _bool:
        """Whether `other` has this shape and equal elements."""
    def clamp_min(self, min: _Operand) -> Tensor:
        """`max(self, min)` elementwise (`min` a number or tensor)."""
    def clamp_max(self, max: _Operand) -> Tensor:
        """`min(self, max)` elementwise (`max` a number or tensor)."""
    def addmm(
        self, mat1: Tensor, mat2: Tensor, *, beta: _float = 1.0, alpha: _float = 1.0
    ) -> Tensor:
        """`beta * self + alpha * (mat1 @ mat2)`."""
    def addmv(
        self, mat: Tensor, vec: Tensor, *, beta: _float = 1.0, alpha: _float = 1.0
    ) -> Tensor:
        """`beta * self + alpha * (mat @ vec)`."""
    def baddbmm(
        self, batch1: Tensor, batch2: Tensor, *, beta: _float = 1.0, alpha: _float = 1.0
    ) -> Tensor:
        """`beta * self + alpha * (batch1 @ batch2)` per batch."""
    def addbmm(
        self, batch1: Tensor, batch2: Tensor, *, beta: _float = 1.0, alpha: _float = 1.0
    ) -> Tensor:
        """`beta * self + alpha * sum_b(batch1[b] @ batch2[b])`."""
    def kron(self, other: Tensor) -> Tensor:
        """The Kronecker product."""
    def index_copy(self, dim: _int, index: Tensor, source: Tensor) -> Tensor:
        """A copy with the slices along `dim` at `index` replaced by `source`'s."""
    def index_fill(self, dim: _int, index: Tensor, value: Tensor | _float) -> Tensor:
        """A copy with the slices along `dim` at `index` set to `value`."""
    def take(self, index: Tensor) -> Tensor:
        """The elements (taken as 1-D) at `index`, shaped like `index`."""
    def masked_scatter(self, mask: Tensor, source: Tensor) -> Tensor:
        """A copy with the positions where `mask` is true filled with `source`'s elements."""
    def scatter_reduce(
        self, dim: _int, index: Tensor, src: Tensor, reduce: str, *, include_self: _bool = True
    ) -> Tensor:
        """`src` reduced into a copy of self along `dim` at `index` ("sum", "prod", "mean",
        "amax" or "amin"; `include_self`: the old values take part)."""
    def repeat_interleave(
        self, repeats: Tensor | _int, dim: _int | None = None, *, output_size: _int | None = None
    ) -> Tensor:
        """Each slice along `dim` repeated `repeats` times (an int, or a tensor of one count per
        slice); without `dim` the flattened tensor."""
    def diff(
        self,
        n: _int = 1,
        dim: _int = -1,
        prepend: Tensor | None = None,
        append: Tensor | None = None,
    ) -> Tensor:
        """The `n`-th forward difference along `dim`, after `prepend`/`append` are joined on."""
    def _atleast_1d(self) -> Tensor:
        """At least one dim (a scalar becomes `[1]`)."""
    def _atleast_2d(self) -> Tensor:
        """At least two dims."""
    def _atleast_3d(self) -> Tensor:
        """At least three dims."""
    def rot90(self, k: _int = 1, dims: Sequence[_int] = [0, 1]) -> Tensor:
        """Rotated by 90 degrees `k` times in the plane of `dims`."""
    def bernoulli(self, p: Tensor | _float | None = None, *, generator: Any = None) -> Tensor:
        """0/1 samples shaped like this tensor, each 1 with probability its element (or ``p``)."""
    def hypot(self, other: Tensor) -> Tensor:
        """`sqrt(self² + other²)` elementwise."""
    def logaddexp(self, other: Tensor) -> Tensor:
        """`log(exp(self) + exp(other))` elementwise."""
    def multinomial(
        self, num_samples: _int, replacement: _bool = False, *, generator: Any = None
    ) -> Tensor:
        """`num_samples` category indices (int64) per row of the non-negative weights `self`
        (1-D or 2-D); without `replacement` each category at most once per row."""
    def nansum(
        self,
        dim: _int | Sequence[_int] | None = None,
        keepdim: _bool = False,
        *,
        dtype: _dtype | None = None,
    ) -> Tensor:
        """Sum over all elements or `dim`, NaN taken as zero."""
    def nanmean(
        self,
        dim: _int | Sequence[_int] | None = None,
        keepdim: _bool = False,
        *,
        dtype: _dtype | None = None,
    ) -> Tensor:
        """Mean over all elements or `dim` of the elements that are not NaN."""
    def reshape_as(self, other: Tensor) -> Tensor:
        """Same elements with `other`'s shape (a view when possible)."""
    @overload
    def new_empty(self, size: Sequence[_int], /, *, dtype: _dtype | None = None) -> Tensor:
        """A tensor of shape `size` (zeros, one valid content of torch's uninitialised memory),
        with this tensor's dtype by default."""
    @overload
    def new_empty(self, *size: _int, dtype: _dtype | None = None) -> Tensor:
        """A tensor of shape `size` (zeros, one valid content of torch's uninitialised memory),
        with this tensor's dtype by default."""
    def new_full(
        self,
        size: Sequence[_int],
        fill_value: _float,
        *,
        dtype: _dtype | None = None,
        device: Any = None,
        requires_grad: _bool = False,
    ) -> Tensor:
        """`fill_value` in shape `size`, with this tensor's dtype by default."""
    def type(self, dtype: Any = None, non_blocking: _bool = False, **kwargs: Any) -> Any:
        """Without ``dtype`` the type's name (``'ferrograd.FloatTensor'``, the spelling of
        ``ferrograd.float32``'s repr); with one (a dtype, a legacy class such as
        ``ferrograd.DoubleTensor`` or its name, also spelt ``torch.``) a copy of that dtype, or
        this tensor when it has it already."""

    # ----- in-place forms -----------------------------------------------------------------------

    def _unary_(self, name: str) -> Tensor:
        """The op registry's unary op `name` in place (behind `exp_`, `sin_`, ...)."""
    def exp_(self) -> Tensor:
        """In-place :meth:`exp`; returns self."""
    def log_(self) -> Tensor:
        """In-place :meth:`log`; returns self."""
    def sin_(self) -> Tensor:
        """In-place :meth:`sin`; returns self."""
    def cos_(self) -> Tensor:
        """In-place :meth:`cos`; returns self."""
    def tanh_(self) -> Tensor:
        """In-place :meth:`tanh`; returns self."""
    def sigmoid_(self) -> Tensor:
        """In-place :meth:`sigmoid`; returns self."""
    def relu_(self) -> Tensor:
        """In-place :meth:`relu`; returns self."""
    def sqrt_(self) -> Tensor:
        """In-place :meth:`sqrt`; returns self."""
    def abs_(self) -> Tensor:
        """In-place :meth:`abs`; returns self."""
    def neg_(self) -> Tensor:
        """In-place :meth:`neg`; returns self."""
    def sign_(self) -> Tensor:
        """In-place :meth:`sign`; returns self."""
    def exp2_(self) -> Tensor:
        """In-place :meth:`exp2`; returns self."""
    def log2_(self) -> Tensor:
        """In-place :meth:`log2`; returns self."""
    def log10_(self) -> Tensor:
        """In-place :meth:`log10`; returns self."""
    def log1p_(self) -> Tensor:
        """In-place :meth:`log1p`; returns self."""
    def expm1_(self) -> Tensor:
        """In-place :meth:`expm1`; returns self."""
    def rsqrt_(self) -> Tensor:
        """In-place :meth:`rsqrt`; returns self."""
    def reciprocal_(self) -> Tensor:
        """In-place :meth:`reciprocal`; returns self."""
    def tan_(self) -> Tensor:
        """In-place :meth:`tan`; returns self."""
    def asin_(self) -> Tensor:
        """In-place :meth:`asin`; returns self."""
    def acos_(self) -> Tensor:
        """In-place :meth:`acos`; returns self."""
    def atan_(self) -> Tensor:
        """In-place :meth:`atan`; returns self."""
    def sinh_(self) -> Tensor:
        """In-place :meth:`sinh`; returns self."""
    def cosh_(self) -> Tensor:
        """In-place :meth:`cosh`; returns self."""
    def asinh_(self) -> Tensor:
        """In-place :meth:`asinh`; returns self."""
    def acosh_(self) -> Tensor:
        """In-place :meth:`acosh`; returns self."""
    def atanh_(self) -> Tensor:
        """In-place :meth:`atanh`; returns self."""
    def erf_(self) -> Tensor:
        """In-place :meth:`erf`; returns self."""
    def erfc_(self) -> Tensor:
        """In-place :meth:`erfc`; returns self."""
    def erfinv_(self) -> Tensor:
        """In-place :meth:`erfinv`; returns self."""
    def floor_(self) -> Tensor:
        """In-place :meth:`floor`; returns self."""
    def ceil_(self) -> Tensor:
        """In-place :meth:`ceil`; returns self."""
    def trunc_(self) -> Tensor:
        """In-place :meth:`trunc`; returns self."""
    def logical_not_(self) -> Tensor:
        """In-place :meth:`logical_not`; returns self."""
    def bitwise_not_(self) -> Tensor:
        """In-place :meth:`bitwise_not`; returns self."""
    def negative_(self) -> Tensor:
        """In-place :meth:`neg`; returns self."""
    def arcsin_(self) -> Tensor:
        """In-place :meth:`asin`; returns self."""
    def arccos_(self) -> Tensor:
        """In-place :meth:`acos`; returns self."""
    def arctan_(self) -> Tensor:
        """In-place :meth:`atan`; returns self."""
    def arcsinh_(self) -> Tensor:
        """In-place :meth:`asinh`; returns self."""
    def arccosh_(self) -> Tensor:
        """In-place :meth:`acosh`; returns self."""
    def arctanh_(self) -> Tensor:
        """In-place :meth:`atanh`; returns self."""
    def fix_(self) -> Tensor:
        """In-place :meth:`trunc`; returns self."""
    def frac_(self) -> Tensor:
        """In-place :meth:`frac`; returns self."""
    def hypot_(self, other: _Operand) -> Tensor:
        """`hypot(self, other)` in place; returns self."""
    def round_(self, *, decimals: _int = 0) -> Tensor:
        """Round (halves to even) in place, to `decimals` places; returns self."""
    def square_(self) -> Tensor:
        """`self * self` in place; returns self."""
    def pow_(self, other: _Operand) -> Tensor:
        """`self ** exponent` in place; returns self."""
    def fmod_(self, other: _Operand) -> Tensor:
        """`fmod(self, other)` in place; returns self."""
    def remainder_(self, other: _Operand) -> Tensor:
        """`remainder(self, other)` in place; returns self."""
    def atan2_(self, other: _Operand) -> Tensor:
        """`atan2(self, other)` in place; returns self."""
    def arctan2_(self, other: _Operand) -> Tensor:
        """`arctan2(self, other)` in place; returns self."""
    def true_divide_(self, other: _Operand) -> Tensor:
        """`self / other` in place; returns self."""
    def floor_divide_(self, other: _Operand) -> Tensor:
        """Division rounded down in place; returns self."""
    def eq_(self, other: _Operand) -> Tensor:
        """`self == other` in place (1 or 0 in this dtype); returns self."""
    def ne_(self, other: _Operand) -> Tensor:
        """`self != other` in place; returns self."""
    def lt_(self, other: _Operand) -> Tensor:
        """`self < other` in place; returns self."""
    def le_(self, other: _Operand) -> Tensor:
        """`self <= other` in place; returns self."""
    def gt_(self, other: _Operand) -> Tensor:
        """`self > other` in place; returns self."""
    def ge_(self, other: _Operand) -> Tensor:
        """`self >= other` in place; returns self."""
    def logical_and_(self, other: _Operand) -> Tensor:
        """`logical_and(self, other)` in place; returns self."""
    def logical_or_(self, other: _Operand) -> Tensor:
        """`logical_or(self, other)` in place; returns self."""
    def logical_xor_(self, other: _Operand) -> Tensor:
        """`logical_xor(self, other)` in place; returns self."""
    def bitwise_and_(self, other: _Operand) -> Tensor:
        """`bitwise_and(self, other)` in place; returns self."""
    def bitwise_or_(self, other: _Operand) -> Tensor:
        """`bitwise_or(self, other)` in place; returns self."""
    def bitwise_xor_(self, other: _Operand) -> Tensor:
        """`bitwise_xor(self, other)` in place; returns self."""
    def clamp_min_(self, other: _Operand) -> Tensor:
        """`max(self, min)` in place; returns self."""
    def clamp_max_(self, other: _Operand) -> Tensor:
        """`min(self, max)` in place; returns self."""
    def clamp_(self, min: _Operand | None = None, max: _Operand | None = None) -> Tensor:
        """Clamp into `[min, max]` in place; returns self."""
    def clip_(self, min: _Operand | None = None, max: _Operand | None = None) -> Tensor:
        """Alias of `clamp_`."""
    def lerp_(self, end: Tensor, weight: _Operand) -> Tensor:
        """`self + weight * (end - self)` in place; returns self."""
    def addcmul_(self, tensor1: Tensor, tensor2: Tensor, *, value: _float = 1.0) -> Tensor:
        """`self + value * tensor1 * tensor2` in place; returns self."""
    def addcdiv_(self, tensor1: Tensor, tensor2: Tensor, *, value: _float = 1.0) -> Tensor:
        """`self + value * tensor1 / tensor2` in place; returns self."""
    def scatter_(
        self,
        dim: _int,
        index: Tensor,
        src: Tensor | _float | None = None,
        value: Tensor | _float | None = None,
        *,
        reduce: str | None = None,
    ) -> Tensor:
        """Write `src` (tensor or number) along `dim` at `index` in place; returns self."""
    def scatter_add_(self, dim: _int, index: Tensor, src: Tensor) -> Tensor:
        """Add `src` along `dim` at `index` in place; returns self."""
    def scatter_reduce_(
        self, dim: _int, index: Tensor, src: Tensor, reduce: str, *, include_self: _bool = True
    ) -> Tensor:
        """Reduce `src` into self along `dim` at `index` in place; returns self."""
    def index_add_(
        self, dim: _int, index: Tensor, source: Tensor, *, alpha: _float = 1.0
    ) -> Tensor:
        """Add `alpha * source` slices along `dim` at `index` in place; returns self."""
    def index_copy_(self, dim: _int, index: Tensor, source: Tensor) -> Tensor:
        """Replace slices along `dim` at `index` by `source`'s in place; returns self."""
    def index_fill_(self, dim: _int, index: Tensor, value: Tensor | _float) -> Tensor:
        """Set the slices along `dim` at `index` to `value` in place; returns self."""
    def masked_scatter_(self, mask: Tensor, source: Tensor) -> Tensor:
        """Fill the positions where `mask` is true with `source`'s elements in place."""
    def normal_(
        self, mean: _float = 0.0, std: _float = 1.0, *, generator: Any = None
    ) -> Tensor:
        """Fill with samples of N(mean, std²) in place; returns self."""
    def uniform_(self, from_: _float = 0.0, to: _float = 1.0, *, generator: Any = None) -> Tensor:
        """Fill with samples of U[from, to) in place; returns self."""
    def exponential_(self, lambd: _float = 1.0, *, generator: Any = None) -> Tensor:
        """Fill with exponential samples of rate `lambd` in place; returns self."""
    def bernoulli_(self, p: Tensor | _float | None = None, *, generator: Any = None) -> Tensor:
        """Fill with 0/1 samples, 1 with probability `p` (a number or a tensor) in place."""
    def random_(
        self, from_: _int | None = None, to: _int | None = None, *, generator: Any = None
    ) -> Tensor:
        """Fill with integers from `[from, to)` in place: `random_(to)` draws from `[0, to)` and
        `random_()` from `[0, 2^mantissa]` of a float dtype (`[0, 2^63 - 1]` for int64)."""

# ----- dtype constants ----------------------------------------------------------------------------

bool: dtype
"""Boolean element type."""
uint8: dtype
"""8-bit unsigned integer element type (computed in int64, wrapped on store)."""
int8: dtype
"""8-bit signed integer element type (computed in int64, wrapped on store)."""
int16: dtype
"""16-bit signed integer element type (computed in int64, wrapped on store)."""
int32: dtype
"""32-bit signed integer element type (computed in int64, wrapped on store)."""
int64: dtype
"""64-bit signed integer element type."""
float16: dtype
"""IEEE half precision element type (computed in float32, rounded on store)."""
bfloat16: dtype
"""bfloat16 element type (computed in float32, rounded on store)."""
float32: dtype
"""32-bit floating point element type."""
float64: dtype
"""64-bit floating point element type."""

# ----- creation -----------------------------------------------------------------------------------

def _from_numpy(array: npt.NDArray[Any], share: _bool) -> Tensor:
    """A tensor from a NumPy array: `share=True` keeps the memory (from_numpy), else copies."""

def _from_dlpack_capsule(capsule: Any) -> Tensor:
    """The tensor a DLPack capsule holds, sharing its memory; the capsule is consumed (renamed)."""
def _make_dot(
    outputs: Sequence[Tensor],
    params: Sequence[tuple[str, Tensor]],
    show_attrs: _bool,
    show_saved: _bool,
) -> str:
    """The Graphviz DOT text of the backward graph behind `outputs` (torchviz's look): `params`
    names leaves as `(name, tensor)` pairs."""
def _full(shape: Sequence[_int], value: _float, dtype: dtype) -> Tensor:
    """A tensor filled with `value`."""

def _arange(start: _float, end: _float, step: _float, dtype: dtype) -> Tensor:
    """Values from `start` to `end` by `step`."""

def _linspace(start: _float, end: _float, steps: _int, dtype: dtype) -> Tensor:
    """`steps` evenly spaced values from `start` to `end`."""

def _eye(n: _int, m: _int, dtype: dtype) -> Tensor:
    """An identity matrix."""

def _searchsorted(
    sorted_sequence: Tensor, values: Tensor, right: _bool, sorter: Tensor | None = None
) -> Tensor:
    """Insertion indices of `values` into the sorted `sorted_sequence` (see torch.searchsorted)."""

def _bucketize(input: Tensor, boundaries: Tensor, right: _bool) -> Tensor:
    """Bucket indices of `input` among the 1-D sorted `boundaries`."""

def _rand(shape: Sequence[_int], dtype: dtype) -> Tensor:
    """Uniform [0, 1) samples."""

def _randn(shape: Sequence[_int], dtype: dtype) -> Tensor:
    """Standard normal samples."""

def _randperm(n: _int, seed: _int | None = None) -> Tensor:
    """A random permutation of `0..n` (int64), from the global generator or a seeded one."""

def _randint(
    low: _int, high: _int, shape: Sequence[_int], dtype: dtype, seed: _int | None = None
) -> Tensor:
    """Integers drawn uniformly from `[low, high)`, from a generator seeded with `seed` when
    given (how a Python `Generator` draws), else from the global one."""
def _triangle_indices(row: _int, col: _int, offset: _int, upper: _bool) -> Tensor:
    """The coordinates of a `row` x `col` matrix's lower (or, with `upper`, upper) triangle."""
def _initial_seed() -> _int:
    """The seed of the global generator (the last `manual_seed`, or the default one)."""
def _logspace(start: _float, end: _float, steps: _int, base: _float, dtype: dtype) -> Tensor:
    """`steps` values `base ** x` for `x` evenly spaced from `start` to `end`."""

def _memory_allocated() -> _int:
    """Bytes of the storages live tensors hold."""
def _max_memory_allocated() -> _int:
    """The most bytes tensors owned at once since start or the last reset."""
def _reset_peak_memory_stats() -> None:
    """Start a new peak from what tensors own now."""

def promote_types(type1: dtype, type2: dtype) -> dtype:
    """`torch.promote_types`: the smallest dtype both convert to within the higher category."""

def can_cast(from_: dtype, to: dtype) -> _bool:
    """`torch.can_cast`: whether torch's casting rules allow `from_` to `to`."""

def _empty_meta(shape: list[_int], dtype: dtype) -> Tensor:
    """A meta tensor (torch's `device='meta'`): a shape and dtype without data."""

def _result_type(operands: list[tuple[dtype, _int]]) -> dtype:
    """The dtype of an op over operands given as `(dtype, priority)`: priority 0 for a Python
    number, 1 for a 0-d tensor, 2 for a tensor with dimensions (`torch.result_type`'s rule)."""

def _is_autocast_enabled() -> _bool:
    """Whether CPU autocast is on in this thread."""

def _set_autocast_enabled(enabled: _bool) -> None:
    """Turn CPU autocast on or off in this thread."""

def _get_autocast_dtype() -> dtype:
    """The dtype lower-precision ops run in under CPU autocast."""

def _set_autocast_dtype(d: dtype) -> None:
    """Set the dtype of CPU autocast (bfloat16 or float16)."""

def _is_autocast_cache_enabled() -> _bool:
    """Whether weights' casts are cached within an autocast region."""

def _set_autocast_cache_enabled(enabled: _bool) -> None:
    """Turn the autocast cast cache on or off."""

def _autocast_increment_nesting() -> _int:
    """Enter one autocast level; returns the depth."""

def _autocast_decrement_nesting() -> _int:
    """Leave one autocast level; returns the depth left."""

def _clear_autocast_cache() -> None:
    """Drop the cached casts of weights."""

def _autocast_cast(operands: list[Any], to_float32: _bool) -> list[Any]:
    """The operands of an op under autocast: each tensor cast to the autocast dtype
    (`to_float32` false) or to float32; anything else (None, numbers) passed through."""

def get_default_dtype() -> dtype:
    """The default floating type (float32 unless set)."""

def set_default_dtype(d: dtype) -> None:
    """Set the default floating type: float32 or float64."""

def manual_seed(seed: _int) -> None:
    """Seed the random generator (negative seeds are taken as their two's complement, as torch)."""

def _get_rng_state() -> RngState:
    """The global generator's state now."""

def _set_rng_state(state: RngState) -> None:
    """Put the global generator back to a state from `_get_rng_state`."""

# ----- autograd -----------------------------------------------------------------------------------

def _push_saved_tensors_hooks(
    pack: Callable[[Tensor], Any], unpack: Callable[[Any], Tensor]
) -> None:
    """Make `pack`/`unpack` the active saved-tensor hooks of this thread (`saved_tensors_hooks`)."""

@final
class _AllowMutationContext:
    """An open `allow_mutation_on_saved_tensors` context; `close()` (or losing the object) ends
    it."""

    def close(self) -> None:
        """End the context: saved tensors recorded in it can no longer be read by backward."""

def _allow_mutation_on_saved_tensors() -> _AllowMutationContext:
    """Open an `allow_mutation_on_saved_tensors` context on this thread."""

def _enter_dual_level() -> _int:
    """Open a dual level; its number."""

def _exit_dual_level(level: _int | None = None) -> None:
    """Close the open dual level (`level`, when given, must be it)."""

def _current_dual_level() -> _int | None:
    """The open dual level, or None."""

def _make_dual(primal: Tensor, tangent: Tensor) -> Tensor:
    """A view of `primal` carrying `tangent`."""

def _unpack_dual(t: Tensor) -> tuple[Tensor, Tensor | None]:
    """`(primal, tangent or None)`."""

def _set_tangent(t: Tensor, tangent: Tensor) -> None:
    """Give `t` a tangent at the open level (what a custom Function's `jvp` returned)."""

def _suspend_forward_ad(suspend: _bool) -> None:
    """Stop (`True`) or resume (`False`) tangent propagation on this thread (a custom Function's
    forward runs without it: its `jvp` gives the tangents)."""

def _vmap_increment_nesting(batch_size: _int, randomness: str) -> _int:
    """Open a vmap level of `batch_size` samples; its id."""
def _vmap_decrement_nesting() -> _int:
    """Close the innermost vmap level; its id."""
def _add_batch_dim(t: Tensor, bdim: _int, level: _int) -> Tensor:
    """`t` seen one sample at a time along `bdim` at level `level`."""
def _remove_batch_dim(t: Tensor, level: _int, batch_size: _int, out_dim: _int) -> Tensor:
    """The physical tensor of `t` at `level`, batch dimension at `out_dim` (expanded to
    `batch_size` when `t` is the same for every sample)."""
def is_batchedtensor(t: Tensor) -> _bool:
    """Whether `t` is batched (inside vmap)."""
def _batch_info(t: Tensor) -> tuple[_int, _int]:
    """`(level, bdim)` of a batched tensor, or `(-1, -1)`."""
def get_unwrapped(t: Tensor) -> Tensor:
    """The physical tensor of a batched `t` (`t` itself otherwise)."""
def _current_vmap_level() -> tuple[_int, _int, str] | None:
    """The innermost open vmap level's `(id, batch size, randomness)`, or None."""

def _push_node_creation_hook(hook: Callable[[Any], Any]) -> None:
    """Call `hook(node)` for every node created on this thread until the matching pop."""

def _pop_node_creation_hook() -> None:
    """Remove this thread's innermost node-creation hook."""

def _set_multithreading_enabled(enabled: _bool) -> None:
    """Let backward passes started on this thread use the pool, or not."""

def _is_multithreading_enabled() -> _bool:
    """Whether backward passes started on this thread may use the pool."""

def _pop_saved_tensors_hooks() -> None:
    """Leave the innermost `saved_tensors_hooks`."""

def _set_saved_tensors_hooks_disabled(message: str | None) -> str | None:
    """Disable saved-tensor hooks on this thread (`message`: the error for entering them) or
    enable
    them again (None); returns the previous message."""

def _current_graph_task_id() -> _int:
    """The id of the backward pass running on this thread (-1 outside backward)."""

def _is_checkpoint_valid() -> _bool:
    """False inside `grad()` or `backward(inputs=...)`, which run only part of the graph."""

def _will_engine_execute_node(node: Node) -> _bool:
    """Whether the running backward pass will run `node`."""

def _gradient_edge(t: Tensor) -> tuple[Node, _int]:
    """`(node, output_nr)` of a tensor's gradient edge (`autograd.graph.get_gradient_edge`)."""

def _queue_callback(callback: Callable[[], Any]) -> None:
    """Run `callback()` once the backward pass running on this thread has completed."""

def _increment_version(t: Tensor) -> None:
    """Record an in-place change ferrograd did not see (`autograd.graph.increment_version`)."""

def _backward(
    tensors: Iterable[Tensor],
    grad_tensors: Iterable[Tensor | None],
    retain_graph: _bool | None,
    create_graph: _bool,
    inputs: Iterable[Tensor] | None,
) -> None:
    """`autograd.backward` after Python normalised the arguments."""

def _grad(
    outputs: Iterable[Tensor | tuple[Node, _int]],
    inputs: Iterable[Tensor | tuple[Node, _int]],
    grad_outputs: Iterable[Tensor | None],
    retain_graph: _bool | None,
    create_graph: _bool,
    allow_unused: _bool | None,
    materialize_grads: _bool,
) -> tuple[Tensor | None, ...]:
    """`autograd.grad` after Python normalised the arguments."""

def _record_function(
    name: str,
    args: Iterable[Tensor | None],
    outputs: Iterable[Tensor],
    non_differentiable: Iterable[Tensor],
    dirty: Iterable[Tensor],
    to_save: Iterable[Tensor | None],
    materialize_grads: _bool,
    backward: Callable[..., Sequence[Tensor | None]],
) -> tuple[list[Tensor], SavedVariables | None]:
    """Record a Python `autograd.Function` call: returns the outputs to hand back and the saved
    tensors object."""

def _save_tensors(to_save: Iterable[Tensor | None], outputs: Iterable[Tensor]) -> SavedVariables:
    """Save tensors outside a recorded node (forward without inputs requiring grad)."""

def is_grad_enabled() -> _bool:
    """Whether ops record the graph on this thread."""

def _set_grad_enabled(enabled: _bool) -> None:
    """Turn graph recording on or off for this thread."""

def is_inference_mode_enabled() -> _bool:
    """Whether inference mode is on for this thread."""

def _set_inference_mode(enabled: _bool) -> None:
    """Turn inference mode on or off for this thread."""

def _set_detect_anomaly(mode: _bool, check_nan: _bool = True) -> None:
    """Turn anomaly detection on or off."""

def is_anomaly_enabled() -> _bool:
    """Whether anomaly detection is on."""

def is_anomaly_check_nan_enabled() -> _bool:
    """Whether anomaly detection checks for NaN."""

def get_num_threads() -> _int:
    """Threads used by backward and parallel kernels."""

def set_num_threads(n: _int) -> None:
    """Set the number of threads used by backward and parallel kernels."""

# ----- ops ----------------------------------------------------------------------------------------

def _where_tensors(cond: _ArrayOperand, a: _ArrayOperand, b: _ArrayOperand) -> Tensor:
    """`cond ? a : b` elementwise, broadcasting."""

# ----- src/python/ops/unary.rs: the op registry (src/ops/registry.rs) ----------------------------

def _registry() -> list[dict[str, str]]:
    """The op registry's rows, for the Python op table: `name`, `family`, `doc`, `domain`,
    `grad`."""

def exp(input: Tensor) -> Tensor:
    """e^x elementwise."""

def log(input: Tensor) -> Tensor:
    """Natural logarithm elementwise."""

def sin(input: Tensor) -> Tensor:
    """Sine elementwise."""

def cos(input: Tensor) -> Tensor:
    """Cosine elementwise."""

def tanh(input: Tensor) -> Tensor:
    """Hyperbolic tangent elementwise."""

def sigmoid(input: Tensor) -> Tensor:
    """Logistic sigmoid elementwise."""

def relu(input: Tensor) -> Tensor:
    """max(x, 0) elementwise."""

def sqrt(input: Tensor) -> Tensor:
    """Square root elementwise."""

def abs(input: Tensor) -> Tensor:
    """Absolute value elementwise."""

def neg(input: Tensor) -> Tensor:
    """Negation elementwise."""

def sign(input: Tensor) -> Tensor:
    """Sign (-1, 0, 1) elementwise."""

def exp2(input: Tensor) -> Tensor:
    """2^x elementwise."""

def log2(input: Tensor) -> Tensor:
    """Base-2 logarithm elementwise."""

def log10(input: Tensor) -> Tensor:
    """Base-10 logarithm elementwise."""

def log1p(input: Tensor) -> Tensor:
    """ln(1 + x) elementwise."""

def expm1(input: Tensor) -> Tensor:
    """e^x - 1 elementwise."""

def rsqrt(input: Tensor) -> Tensor:
    """1 / sqrt(x) elementwise."""

def reciprocal(input: Tensor) -> Tensor:
    """1 / x elementwise."""

def tan(input: Tensor) -> Tensor:
    """Tangent elementwise."""

def asin(input: Tensor) -> Tensor:
    """Arcsine elementwise."""

def acos(input: Tensor) -> Tensor:
    """Arccosine elementwise."""

def atan(input: Tensor) -> Tensor:
    """Arctangent elementwise."""

def sinh(input: Tensor) -> Tensor:
    """Hyperbolic sine elementwise."""

def cosh(input: Tensor) -> Tensor:
    """Hyperbolic cosine elementwise."""

def asinh(input: Tensor) -> Tensor:
    """Inverse hyperbolic sine elementwise."""

def acosh(input: Tensor) -> Tensor:
    """Inverse hyperbolic cosine elementwise."""

def atanh(input: Tensor) -> Tensor:
    """Inverse hyperbolic tangent elementwise."""

def erf(input: Tensor) -> Tensor:
    """Error function elementwise."""

def erfc(input: Tensor) -> Tensor:
    """Complementary error function elementwise."""

def erfinv(input: Tensor) -> Tensor:
    """Inverse error function elementwise."""

def floor(input: Tensor) -> Tensor:
    """Round down elementwise (zero gradient)."""

def ceil(input: Tensor) -> Tensor:
    """Round up elementwise (zero gradient)."""

def trunc(input: Tensor) -> Tensor:
    """Round towards zero elementwise (zero gradient)."""

def frac(input: Tensor) -> Tensor:
    """Fractional part x - trunc(x) elementwise."""

def isnan(input: Tensor) -> Tensor:
    """Elementwise NaN test (bool)."""

def isinf(input: Tensor) -> Tensor:
    """Elementwise infinity test (bool)."""

def isfinite(input: Tensor) -> Tensor:
    """Elementwise finiteness test (bool)."""

def logical_not(input: Tensor) -> Tensor:
    """Elementwise logical not (bool)."""

def bitwise_not(input: Tensor) -> Tensor:
    """Bitwise not (bool or integer tensors)."""

# ----- optim --------------------------------------------------------------------------------------

def _sgd_step(
    params: Iterable[Tensor],
    grads: Iterable[Tensor],
    momentum_buffers: Iterable[Tensor],
    lr: _float,
    momentum: _float,
    dampening: _float,
    nesterov: _bool,
    weight_decay: _float,
    maximize: _bool,
    first_step: _bool,
) -> None:
    """One SGD step over lists of parameters, gradients and momentum buffers."""

def _adam_step(
    params: Iterable[Tensor],
    grads: Iterable[Tensor],
    exp_avgs: Iterable[Tensor],
    exp_avg_sqs: Iterable[Tensor],
    max_exp_avg_sqs: Iterable[Tensor],
    step: _float,
    lr: _float,
    beta1: _float,
    beta2: _float,
    eps: _float,
    weight_decay: _float,
    amsgrad: _bool,
    maximize: _bool,
    decoupled_weight_decay: _bool,
) -> None:
    """One Adam / AdamW step over lists of parameters, gradients and moment estimates."""

def _rmsprop_step(
    params: Iterable[Tensor],
    grads: Iterable[Tensor],
    square_avgs: Iterable[Tensor],
    momentum_buffers: Iterable[Tensor],
    grad_avgs: Iterable[Tensor],
    lr: _float,
    alpha: _float,
    eps: _float,
    weight_decay: _float,
    momentum: _float,
    centered: _bool,
    maximize: _bool,
) -> None:
    """One RMSprop step over lists of parameters, gradients and running averages."""

def _adagrad_step(
    params: Iterable[Tensor],
    grads: Iterable[Tensor],
    state_sums: Iterable[Tensor],
    step: _float,
    lr: _float,
    lr_decay: _float,
    weight_decay: _float,
    eps: _float,
    maximize: _bool,
) -> None:
    """One Adagrad step over lists of parameters, gradients and squared-gradient sums."""

def _nadam_step(
    params: Iterable[Tensor],
    grads: Iterable[Tensor],
    exp_avgs: Iterable[Tensor],
    exp_avg_sqs: Iterable[Tensor],
    mu_products: Iterable[Tensor],
    step: _float,
    lr: _float,
    beta1: _float,
    beta2: _float,
    eps: _float,
    weight_decay: _float,
    momentum_decay: _float,
    decoupled_weight_decay: _bool,
    maximize: _bool,
) -> None:
    """One NAdam step over lists of parameters, gradients, moment estimates and mu products
    (one-element tensors, updated in place)."""

def _radam_step(
    params: Iterable[Tensor],
    grads: Iterable[Tensor],
    exp_avgs: Iterable[Tensor],
    exp_avg_sqs: Iterable[Tensor],
    step: _float,
    lr: _float,
    beta1: _float,
    beta2: _float,
    eps: _float,
    weight_decay: _float,
    decoupled_weight_decay: _bool,
    maximize: _bool,
) -> None:
    """One RAdam step over lists of parameters, gradients and moment estimates."""

def _adamax_step(
    params: Iterable[Tensor],
    grads: Iterable[Tensor],
    exp_avgs: Iterable[Tensor],
    exp_infs: Iterable[Tensor],
    step: _float,
    lr: _float,
    beta1: _float,
    beta2: _float,
    eps: _float,
    weight_decay: _float,
    maximize: _bool,
) -> None:
    """One Adamax step over lists of parameters, gradients, first moments and infinity norms."""

def _rprop_step(
    params: Iterable[Tensor],
    grads: Iterable[Tensor],
    prevs: Iterable[Tensor],
    step_sizes: Iterable[Tensor],
    etaminus: _float,
    etaplus: _float,
    step_size_min: _float,
    step_size_max: _float,
    maximize: _bool,
) -> None:
    """One Rprop step over lists of parameters, gradients, previous gradients and step sizes."""

def _asgd_step(
    params: Iterable[Tensor],
    grads: Iterable[Tensor],
    axs: Iterable[Tensor],
    etas: Iterable[Tensor],
    mus: Iterable[Tensor],
    step: _float,
    lr: _float,
    lambd: _float,
    alpha: _float,
    t0: _float,
    weight_decay: _float,
    maximize: _bool,
) -> None:
    """One ASGD step over lists of parameters, gradients, averages and the one-element eta and
    mu states (updated in place for the next step)."""

def _adafactor_step(
    params: Iterable[Tensor],
    grads: Iterable[Tensor],
    row_vars: Iterable[Tensor],
    col_vars: Iterable[Tensor],
    variances: Iterable[Tensor],
    step: _float,
    lr: _float,
    beta2_decay: _float,
    eps1: _float | None,
    eps2: _float,
    d: _float,
    weight_decay: _float,
    maximize: _bool,
) -> None:
    """One Adafactor step over lists of parameters and gradients; row/column variances belong to
    the parameters of two or more dimensions in order, variances to the others."""

# ----- safetensors --------------------------------------------------------------------------------

def _safetensors_save(
    tensors: Sequence[tuple[str, Tensor]], metadata: dict[str, str] | None = None
) -> bytes:
    """The `.safetensors` bytes of `(name, tensor)` pairs with optional header metadata."""

def _safetensors_save_file(
    tensors: Sequence[tuple[str, Tensor]], path: str, metadata: dict[str, str] | None = None
) -> None:
    """Writes `(name, tensor)` pairs to the file `path`."""

def _safetensors_load(
    data: bytes,
) -> tuple[list[tuple[str, Tensor]], dict[str, str] | None]:
    """The `(name, tensor)` pairs (in stored order) and the header metadata of `.safetensors`
    bytes."""

# ----- src/python/nn/sparse.rs --------------------------------------------------------------------

def _nn_embedding(
    weight: Tensor, indices: Tensor, padding_idx: _int | None, scale_grad_by_freq: _bool
) -> Tensor:
    """Rows of `weight` at `indices` (`padding_idx` already wrapped, or None)."""

def _nn_embedding_bag(
    weight: Tensor,
    indices: Tensor,
    offsets: Tensor,
    mode: _int,
    per_sample_weights: Tensor | None,
    include_last_offset: _bool,
    padding_idx: _int | None,
    scale_grad_by_freq: _bool,
) -> Tensor:
    """Bags of rows of `weight` (`indices` 1-D, split at `offsets`; `mode` 0 sum, 1 mean, 2 max;
    `padding_idx` already wrapped, or None)."""

def _nn_one_hot(tensor: Tensor, num_classes: _int) -> Tensor:
    """One-hot int64 encoding (`num_classes` -1: max + 1)."""

def _nn_embedding_renorm_(
    weight: Tensor, indices: Tensor, max_norm: _float, norm_type: _float
) -> None:
    """Rows of `weight` used by `indices` rescaled in place to at most `max_norm`."""

# ----- src/python/nn/rnn.rs -----------------------------------------------------------------------

def _nn_rnn(
    mode: str,
    input: Tensor,
    hx: Tensor,
    cx: Tensor | None,
    weights: Sequence[Tensor],
    has_biases: _bool,
    has_proj: _bool,
    num_layers: _int,
    dropout: _float,
    training: _bool,
    bidirectional: _bool,
    batch_first: _bool,
    lengths: Sequence[_int] | None = None,
) -> tuple[Tensor, Tensor, Tensor | None]:
    """The recurrence of `nn.RNN`/`nn.LSTM`/`nn.GRU` over a whole sequence (torch's `_VF.lstm`
    etc.): returns `(output, h_n, c_n or None)`. `lengths` runs padded variable-length rows
    (a packed sequence)."""

def _nn_rnn_cell(
    input: Tensor,
    hx: Tensor,
    w_ih: Tensor,
    w_hh: Tensor,
    b_ih: Tensor | None,
    b_hh: Tensor | None,
    nonlinearity: str,
) -> Tensor:
    """One step of `nn.RNNCell` (`nonlinearity` "tanh" or "relu")."""

def _nn_lstm_cell(
    input: Tensor,
    hx: Tensor,
    cx: Tensor,
    w_ih: Tensor,
    w_hh: Tensor,
    b_ih: Tensor | None,
    b_hh: Tensor | None,
) -> tuple[Tensor, Tensor]:
    """One step of `nn.LSTMCell`: returns `(h', c')`."""

def _nn_gru_cell(
    input: Tensor,
    hx: Tensor,
    w_ih: Tensor,
    w_hh: Tensor,
    b_ih: Tensor | None,
    b_hh: Tensor | None,
) -> Tensor:
    """One step of `nn.GRUCell`."""

# ----- src/python/nn/*.rs -------------------------------------------------------------------------

def _nn_im2col(
    input: Tensor,
    kernel_size: Sequence[_int],
    dilation: Sequence[_int],
    padding: Sequence[_int],
    stride: Sequence[_int],
) -> Tensor:
    """`unfold` (im2col): `(N, C, *spatial)` to `(N, C*prod(kernel_size), L)`. The integer
    arguments are checked (torch's messages) before they become sizes."""

def _nn_col2im(
    input: Tensor,
    output_size: Sequence[_int],
    kernel_size: Sequence[_int],
    dilation: Sequence[_int],
    padding: Sequence[_int],
    stride: Sequence[_int],
) -> Tensor:
    """`fold` (col2im): `(N, C*prod(kernel_size), L)` to `(N, C, *output_size)`, checked like
    `_nn_im2col`."""

def _nn_pad(input: Tensor, pads: Sequence[_int], mode: str, value: _float) -> Tensor:
    """`pad` (`mode` one of "constant", "reflect", "replicate", "circular"; `value` for
    constant)."""

def _nn_interpolate(
    input: Tensor,
    size: Sequence[_int] | None,
    scale_factor: Sequence[_float] | None,
    mode: str,
    align_corners: _bool,
    antialias: _bool = False,
) -> Tensor:
    """`input` resampled to `size` or by `scale_factor` (exactly one given, one entry per spatial
    dim); `mode` one of nearest, nearest-exact, linear, cubic, area; `antialias` for linear and
    cubic over 2 dims."""

def _nn_shuffle(kind: str, input: Tensor, factor: _int) -> Tensor:
    """`pixel_shuffle` (`kind` "shuffle"), `pixel_unshuffle` ("unshuffle") or `channel_shuffle`
    ("channel") of `input` by `factor`."""

def _nn_cosine_similarity(x1: Tensor, x2: Tensor, dim: _int, eps: _float) -> Tensor:
    """Cosine similarity of `x1` and `x2` (broadcast) along `dim`."""

def _nn_pairwise_distance(x1: Tensor, x2: Tensor, p: _float, eps: _float, keepdim: _bool) -> Tensor:
    """The `p`-norm of `x1 - x2 + eps` over the last dim."""

def _nn_normalize(input: Tensor, p: _float, dim: _int, eps: _float) -> Tensor:
    """`x / max(‖x‖_p, eps)` along `dim`."""

def _nn_prelu(input: Tensor, weight: Tensor) -> Tensor:
    """PReLU with one slope or one per channel (dim 1)."""

def _nn_linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """`input @ weight.T + bias` as one node."""

def _cdist(x1: Tensor, x2: Tensor, p: _float, compute_mode: _int) -> Tensor:
    """`torch.cdist` (`compute_mode` 0: matrix product if either side has more than 25 rows,
    1: always for p = 2, 2: never)."""

def _nn_cosine_embedding_loss(
    input1: Tensor, input2: Tensor, target: Tensor, margin: _float, reduction: str
) -> Tensor:
    """`cosine_embedding_loss`."""

def _nn_margin_ranking_loss(
    input1: Tensor, input2: Tensor, target: Tensor, margin: _float, reduction: str
) -> Tensor:
    """`margin_ranking_loss`."""

def _nn_triplet_margin_loss(
    anchor: Tensor,
    positive: Tensor,
    negative: Tensor,
    margin: _float,
    p: _float,
    eps: _float,
    swap: _bool,
    reduction: str,
) -> Tensor:
    """`triplet_margin_loss`."""

def _nn_hinge_embedding_loss(
    input: Tensor, target: Tensor, margin: _float, reduction: str
) -> Tensor:
    """`hinge_embedding_loss`."""

def _nn_soft_margin_loss(input: Tensor, target: Tensor, reduction: str) -> Tensor:
    """`soft_margin_loss`."""

def _nn_multilabel_soft_margin_loss(
    input: Tensor, target: Tensor, weight: Tensor | None, reduction: str
) -> Tensor:
    """`multilabel_soft_margin_loss`."""

def _nn_poisson_nll_loss(
    input: Tensor, target: Tensor, log_input: _bool, full: _bool, eps: _float, reduction: str
) -> Tensor:
    """`poisson_nll_loss`."""

def _nn_gaussian_nll_loss(
    input: Tensor, target: Tensor, var: Tensor, full: _bool, eps: _float, reduction: str
) -> Tensor:
    """`gaussian_nll_loss` (`var` already shaped to broadcast against `input`)."""

def _nn_layer_norm(
    input: Tensor,
    normalized_shape: Sequence[_int],
    weight: Tensor | None,
    bias: Tensor | None,
    eps: _float,
) -> Tensor:
    """`layer_norm(input, normalized_shape, weight, bias, eps)`."""

def _nn_rms_norm(
    input: Tensor,
    normalized_shape: Sequence[_int],
    weight: Tensor | None,
    eps: _float | None,
) -> Tensor:
    """`rms_norm(input, normalized_shape, weight, eps)`; `eps` None is `finfo(dtype).eps`."""

def _nn_group_norm(
    input: Tensor,
    num_groups: _int,
    weight: Tensor | None,
    bias: Tensor | None,
    eps: _float,
) -> Tensor:
    """`group_norm(input, num_groups, weight, bias, eps)`."""

def _nn_batch_norm(
    input: Tensor,
    running_mean: Tensor | None,
    running_var: Tensor | None,
    weight: Tensor | None,
    bias: Tensor | None,
    training: _bool,
    momentum: _float,
    eps: _float,
) -> Tensor:
    """`batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)`;
    the running statistics are updated in place when training."""

def _nn_instance_norm(
    input: Tensor,
    running_mean: Tensor | None,
    running_var: Tensor | None,
    weight: Tensor | None,
    bias: Tensor | None,
    use_input_stats: _bool,
    momentum: _float,
    eps: _float,
) -> Tensor:
    """`instance_norm(input, running_mean, running_var, weight, bias, use_input_stats, momentum,
    eps)`."""

def _nn_local_response_norm(
    input: Tensor, size: _int, alpha: _float, beta: _float, k: _float
) -> Tensor:
    """`local_response_norm(input, size, alpha, beta, k)`."""

def _nn_scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = None,
    dropout_p: _float = 0.0,
    is_causal: _bool = False,
    scale: _float | None = None,
    enable_gqa: _bool = False,
) -> Tensor:
    """`softmax(q kᵀ · scale + mask) v` through the fused kernel, the GIL released while it runs."""

def _nn_gelu(input: Tensor, approximate: str) -> Tensor:
    """gelu, `approximate` "none" or "tanh"."""

def _nn_silu(input: Tensor) -> Tensor:
    """`x · sigmoid(x)`."""

def _nn_mish(input: Tensor) -> Tensor:
    """`x · tanh(softplus(x))`."""

def _nn_elu(input: Tensor, alpha: _float) -> Tensor:
    """elu with `alpha`."""

def _nn_selu(input: Tensor) -> Tensor:
    """Scaled elu with torch's constants."""

def _nn_celu(input: Tensor, alpha: _float) -> Tensor:
    """celu with `alpha` (non-zero)."""

def _nn_softplus(input: Tensor, beta: _float, threshold: _float) -> Tensor:
    """softplus with `beta` and `threshold`."""

def _nn_hardswish(input: Tensor) -> Tensor:
    """`x · relu6(x + 3) / 6`."""

def _nn_hardsigmoid(input: Tensor) -> Tensor:
    """`relu6(x + 3) / 6`."""

def _nn_leaky_relu(input: Tensor, negative_slope: _float) -> Tensor:
    """leaky_relu with `negative_slope`."""

def _nn_hardtanh(input: Tensor, min_val: _float, max_val: _float) -> Tensor:
    """hardtanh clamping to `[min_val, max_val]`."""

def _nn_logsigmoid(input: Tensor) -> Tensor:
    """`-softplus(-x)`."""

def _nn_glu(input: Tensor, dim: _int) -> Tensor:
    """glu along `dim`."""

def _nn_dropout(input: Tensor, p: _float) -> Tensor:
    """Inverted dropout with probability `p` (training mode)."""

def _nn_dropout_ext(input: Tensor, p: _float, feature: _bool, alpha: _bool) -> Tensor:
    """Channel-wise (`feature`) and/or alpha dropout with probability `p` (training mode)."""

def _nn_shrink(input: Tensor, lambd: _float, soft: _bool) -> Tensor:
    """hardshrink (`soft` false) or softshrink with threshold `lambd`."""

def _nn_rrelu(input: Tensor, lower: _float, upper: _float, training: _bool) -> Tensor:
    """Randomized leaky ReLU with slopes in `[lower, upper]`."""

def _nn_cross_entropy(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None,
    ignore_index: _int,
    reduction: str,
    label_smoothing: _float,
) -> Tensor:
    """cross_entropy over class indices (int64 target) or class probabilities (float target of
    the input's shape)."""

def _nn_nll_loss(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None,
    ignore_index: _int,
    reduction: str,
) -> Tensor:
    """nll_loss over class indices."""

def _nn_pointwise_loss(
    kind: str,
    input: Tensor,
    target: Tensor,
    weight: Tensor | None,
    reduction: str,
    param: _float = 0.0,
    pos_weight: Tensor | None = None,
) -> Tensor:
    """The regression and binary losses by name, with their optional weight and parameter
    (`beta` of smooth_l1, `delta` of huber, `log_target` of kl_div as 0/1)."""

def _nn_conv(
    nd: _int,
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    stride: Sequence[_int],
    padding: str | Sequence[_int],
    dilation: Sequence[_int],
    groups: _int,
) -> Tensor:
    """`conv{nd}d`: `padding` is a list of ints or `'same'` / `'valid'` (checked by the caller)."""

def _nn_conv_transpose(
    nd: _int,
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    stride: Sequence[_int],
    padding: Sequence[_int],
    output_padding: Sequence[_int],
    groups: _int,
    dilation: Sequence[_int],
) -> Tensor:
    """`conv_transpose{nd}d`."""

def _nn_max_pool(
    nd: _int,
    input: Tensor,
    kernel_size: Sequence[_int],
    stride: Sequence[_int],
    padding: Sequence[_int],
    dilation: Sequence[_int],
    ceil_mode: _bool,
) -> tuple[Tensor, Tensor]:
    """`max_pool{nd}d_with_indices`: values and indices; an empty `stride` means the kernel."""

def _nn_avg_pool(
    nd: _int,
    input: Tensor,
    kernel_size: Sequence[_int],
    stride: Sequence[_int],
    padding: Sequence[_int],
    ceil_mode: _bool,
    count_include_pad: _bool,
    divisor_override: _int | None = None,
) -> Tensor:
    """`avg_pool{nd}d`; an empty `stride` means the kernel."""

def _nn_adaptive_pool(
    kind: str, nd: _int, input: Tensor, output_size: Sequence[_int]
) -> tuple[Tensor, Tensor | None]:
    """`adaptive_{avg,max}_pool{1,2,3}d` (`kind` "avg" or "max"): the values, and the indices for
    max pooling."""

def _nn_max_unpool(input: Tensor, indices: Tensor, output_size: Sequence[_int]) -> Tensor:
    """`max_unpool{2,3}d` to the spatial `output_size` (checked by the caller)."""

def _nn_lp_pool(
    input: Tensor,
    norm_type: _float,
    kernel_size: Sequence[_int],
    stride: Sequence[_int],
    ceil_mode: _bool,
) -> Tensor:
    """`lp_pool{1,2,3}d` (`stride` empty: the kernel size)."""

# ----- src/python/ops/{shape,indexing,matmul,linalg}.rs -------------------------------------------

def _cat(tensors: Sequence[Tensor], dim: _int = 0) -> Tensor:
    """Concatenate tensors along `dim`."""

def _stack(tensors: Sequence[Tensor], dim: _int = 0) -> Tensor:
    """Stack tensors along a new dim."""

def _hstack(tensors: Sequence[Tensor]) -> Tensor:
    """Concatenation along dim 1 (dim 0 for vectors)."""
def _vstack(tensors: Sequence[Tensor]) -> Tensor:
    """Concatenation along dim 0 of the inputs made at least 2-D."""
def _dstack(tensors: Sequence[Tensor]) -> Tensor:
    """Concatenation along dim 2 of the inputs made at least 3-D."""
def _column_stack(tensors: Sequence[Tensor]) -> Tensor:
    """Vectors as columns, concatenated along dim 1."""
def _block_diag(tensors: Sequence[Tensor]) -> Tensor:
    """The inputs on the diagonal of a matrix of zeros."""
def _cartesian_prod(tensors: Sequence[Tensor]) -> Tensor:
    """Every combination of one element from each 1-D tensor, one row each."""
def _broadcast_tensors(tensors: Sequence[Tensor]) -> tuple[Tensor, ...]:
    """Every tensor expanded to the shape they broadcast to (views)."""
def _meshgrid(tensors: Sequence[Tensor], indexing: str) -> tuple[Tensor, ...]:
    """Coordinate grids (`indexing` "ij" or "xy")."""
def _broadcast_shapes(shapes: Sequence[Sequence[_int]]) -> list[_int]:
    """The shape the given shapes broadcast to."""
def _combinations(input: Tensor, r: _int = 2, with_replacement: _bool = False) -> Tensor:
    """The length-`r` combinations of a vector's elements, one row each."""
def _tensordot(a: Tensor, b: Tensor, dims_a: Sequence[_int], dims_b: Sequence[_int]) -> Tensor:
    """The sum of products over `dims_a` of `a` and `dims_b` of `b`."""
def _repeat_index(repeats: Tensor, *, output_size: _int | None = None) -> Tensor:
    """`repeat_interleave(repeats)` of a 1-D int64 tensor: each index `i` repeated `repeats[i]`
    times."""

def _einsum(equation: str, operands: Sequence[Tensor]) -> Tensor:
    """Einstein summation."""

def _linalg_inv(a: Tensor) -> Tensor:
    """The inverse of a square matrix (batched); singular input raises."""

def _linalg_inv_ex(a: Tensor) -> tuple[Tensor, Tensor]:
    """The inverse and the int64 `info` per matrix (0: invertible)."""

def _linalg_solve(a: Tensor, b: Tensor, left: _bool) -> Tensor:
    """`X` with `A X = B` (`left`) or `X A = B`, batched with broadcasting."""

def _linalg_det(a: Tensor) -> Tensor:
    """The determinant (batched)."""

def _linalg_slogdet(a: Tensor) -> tuple[Tensor, Tensor]:
    """`(sign, log|det|)` (batched)."""

def _linalg_logdet(a: Tensor) -> Tensor:
    """`log det(A)`: NaN for a negative determinant (batched)."""

def _linalg_cholesky(a: Tensor, upper: _bool) -> Tensor:
    """The Cholesky factor, lower or `upper`; a matrix that is not positive-definite raises."""

def _linalg_cholesky_ex(a: Tensor, upper: _bool) -> tuple[Tensor, Tensor]:
    """The Cholesky factor and the int64 `info` per matrix (0: positive-definite)."""

def _linalg_qr(a: Tensor, mode: str) -> tuple[Tensor, Tensor]:
    """`(Q, R)` in `mode` `'reduced'`, `'complete'` or `'r'`."""

def _linalg_eigh(a: Tensor, lower: _bool) -> tuple[Tensor, Tensor]:
    """`(eigenvalues, eigenvectors)` of a symmetric matrix from its `lower` (or upper) triangle."""

def _linalg_eigvalsh(a: Tensor, lower: _bool) -> Tensor:
    """Eigenvalues of a symmetric matrix, ascending."""

def _linalg_svd(a: Tensor, full_matrices: _bool) -> tuple[Tensor, Tensor, Tensor]:
    """`(U, S, Vh)`, full or thin."""

def _linalg_svdvals(a: Tensor) -> Tensor:
    """Singular values, descending."""

def _linalg_pinv(
    a: Tensor, atol: _float | None, rtol: _float | None, hermitian: _bool
) -> Tensor:
    """The pseudo-inverse with tolerances `atol`/`rtol` (torch's defaults when None)."""

def _linalg_lstsq(a: Tensor, b: Tensor, rcond: _float | None) -> Tensor:
    """The least-squares solution of `A X = B`."""

def _linalg_matrix_power(a: Tensor, n: _int) -> Tensor:
    """`A^n` for an integer `n`."""

def _linalg_matrix_exp(a: Tensor) -> Tensor:
    """The matrix exponential."""

def _linalg_cross(input: Tensor, other: Tensor, dim: _int) -> Tensor:
    """The cross product of 3-vectors along `dim`."""

def _linalg_vecdot(x: Tensor, y: Tensor, dim: _int) -> Tensor:
    """The dot product along `dim`."""

def _linalg_multi_dot(tensors: Sequence[Tensor]) -> Tensor:
    """The product of a chain of matrices in the cheapest order."""
