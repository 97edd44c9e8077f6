//! The tensor handle: shared storage, a layout, a dtype and autograd metadata.
//!
//! Creating tensors, reading them back, and views that share storage:
//!
//! ```
//! use ferrograd::{DType, Tensor};
//! # fn main() -> ferrograd::Result<()> {
//! let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])?;
//! assert_eq!(a.shape(), &[2, 3]);
//! assert_eq!(a.dtype(), DType::Float32);
//! let z = Tensor::zeros(&[2, 3], DType::Float64);
//! let r = Tensor::arange(0.0, 5.0, 1.0, DType::Int64)?;
//! assert_eq!(r.to_vec::<i64>()?, vec![0, 1, 2, 3, 4]);
//! let e = Tensor::eye(3, 3, DType::Float64)?;
//! assert_eq!(e.sum()?.item()?, 3.0);
//! // A transpose is a view: no copy, and the same elements seen in another order.
//! let t = a.t()?;
//! assert_eq!(t.shape(), &[3, 2]);
//! assert_eq!(t.contiguous()?.to_vec::<f32>()?, vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
//! assert_eq!(z.to_dtype(DType::Float32)?.dtype(), DType::Float32);
//! # Ok(())
//! # }
//! ```

mod alloc;
pub mod batched;
pub mod creation;
pub mod dtype;
pub mod grad_mode;
pub mod shape;
pub(crate) mod spin;
pub mod storage;

use std::any::Any;
use std::sync::{Arc, Weak};

use ndarray::{ArrayD, ArrayViewD, IxDyn};

pub use dtype::DType;
pub use storage::{bf16, f16, Buffer, Dims, Element, Layout, Storage};

use crate::error::{Error, Result};

/// A hook on a tensor's gradient: returns a replacement, or `None` to keep it.
pub type TensorHook = Arc<dyn Fn(&Tensor) -> Result<Option<Tensor>> + Send + Sync>;

/// A user hook run after a leaf's `.grad` has been accumulated.
pub type PostAccumulateHook = Arc<dyn Fn(&Tensor) -> Result<()> + Send + Sync>;

/// A graph node as tensors hold it (`grad_fn`, a leaf's accumulator). The graph layer's
/// `Node` is the one implementation; tensors see it through this trait so that they sit below
/// the graph, as `c10::TensorImpl` holds autograd metadata behind an interface.
pub(crate) trait GraphNode: Any + Send + Sync {
    /// Give up this hold on a node; the last hold on a long chain frees it without recursing
    /// once per node.
    fn release_chain(self: Arc<Self>);
}

/// Autograd state of one tensor. Behind a lock so in-place ops can rebase history.
#[derive(Default)]
pub(crate) struct AutogradMeta {
    /// For leaves: whether gradients are accumulated into this tensor.
    pub requires_grad: bool,
    /// The node that produced this tensor (non-leaves only).
    pub grad_fn: Option<Arc<dyn GraphNode>>,
    /// Which output of `grad_fn` this tensor is.
    pub output_nr: usize,
    /// The accumulated gradient.
    pub grad: Option<Tensor>,
    /// The leaf's accumulator node, held weakly: the graph owns it (PyTorch's arrangement).
    pub grad_accumulator: Option<Weak<dyn GraphNode>>,
    /// Whether a non-leaf keeps its `.grad`.
    pub retains_grad: bool,
    /// A leaf's hooks; boxed, since few tensors have any and every tensor carries the slot.
    pub leaf_hooks: Option<Box<LeafHooks>>,
    /// For a view: the tensor it views, so in-place writes can rebase the base's history.
    pub view_base: Option<Tensor>,
    /// For a view created under no_grad of a tensor requiring grad (in-place on it is forbidden).
    pub view_created_without_grad: bool,
    /// For outputs of multi-output view ops (`unbind`, `split`): the op's name.
    pub multi_view_op: Option<&'static str>,
    /// Set by `detach_()`: saved copies of this tensor may no longer be used.
    pub detached_in_place: bool,
}

/// Hooks registered on a leaf.
#[derive(Default)]
pub(crate) struct LeafHooks {
    /// Run on its summed gradient before accumulation.
    pub pre: Vec<(u64, TensorHook)>,
    /// Run after its `.grad` was accumulated.
    pub post_accumulate: Vec<(u64, PostAccumulateHook)>,
}

impl AutogradMeta {
    /// The leaf's hooks, made on first use.
    pub(crate) fn leaf_hooks_mut(&mut self) -> &mut LeafHooks {
        self.leaf_hooks.get_or_insert_with(Default::default)
    }

    /// The hooks to run on the leaf's gradient before accumulation, in registration order.
    pub(crate) fn pre_hooks(&self) -> Vec<TensorHook> {
        self.leaf_hooks
            .iter()
            .flat_map(|h| h.pre.iter().map(|(_, f)| f.clone()))
            .collect()
    }

    /// The hooks to run after accumulation, in registration order.
    pub(crate) fn post_accumulate_hooks(&self) -> Vec<PostAccumulateHook> {
        self.leaf_hooks
            .iter()
            .flat_map(|h| h.post_accumulate.iter().map(|(_, f)| f.clone()))
            .collect()
    }
}

/// The shared part of a tensor.
pub struct TensorImpl {
    pub(crate) storage: Arc<Storage>,
    pub(crate) layout: Layout,
    pub(crate) dtype: DType,
    pub(crate) meta: spin::SpinLock<AutogradMeta>,
    pub(crate) inference: bool,
    /// A Python number wrapped as a tensor: lowest priority in type promotion.
    pub(crate) wrapped_number: bool,
    /// Opaque slot for language bindings (the Python object currently representing this
    /// tensor, so identity is preserved: `x.grad is x.grad`).
    #[cfg_attr(not(feature = "python"), allow(dead_code))]
    pub(crate) binding_slot: std::sync::atomic::AtomicPtr<std::ffi::c_void>,
    /// For a batched tensor (inside vmap): its physical tensor, batch dim and level.
    pub(crate) batch: Option<Box<batched::BatchSlot>>,
}

impl Drop for TensorImpl {
    fn drop(&mut self) {
        // Dropping a long chain must not recurse once per node.
        if let Some(f) = self.meta.get_mut().grad_fn.take() {
            f.release_chain();
        }
    }
}

/// A handle to a tensor; cloning it is cheap and shares everything (it is the same tensor).
#[derive(Clone)]
pub struct Tensor(pub(crate) Arc<TensorImpl>);

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Tensor(shape={:?}, dtype={}, requires_grad={})",
            self.shape(),
            self.dtype(),
            self.requires_grad()
        )
    }
}

impl Tensor {
    // ----- construction -------------------------------------------------------------------

    /// A tensor over `storage` with `layout`; no autograd history.
    pub(crate) fn from_parts(storage: Arc<Storage>, layout: Layout, dtype: DType) -> Tensor {
        Tensor(Arc::new(TensorImpl {
            storage,
            layout,
            dtype,
            meta: spin::SpinLock::new(AutogradMeta::default()),
            inference: grad_mode::is_inference_mode_enabled(),
            wrapped_number: false,
            binding_slot: Default::default(),
            batch: None,
        }))
    }

    /// A meta tensor (torch's `device='meta'`): `shape` and `dtype` without elements. Views
    /// and shape queries work on it; an op that reads elements panics with
    /// [`storage::META_MESSAGE`] (the Python bindings raise NotImplementedError).
    pub fn new_meta(shape: &[usize], dtype: DType) -> Tensor {
        Tensor::from_parts(Arc::new(Storage::meta()), Layout::contiguous(shape), dtype)
    }

    /// Whether this is a meta tensor (no elements; see [`Tensor::new_meta`]).
    pub fn is_meta(&self) -> bool {
        self.0.storage.is_meta()
    }

    /// A contiguous tensor owning `buf`, checked against `shape`.
    pub fn from_buffer(buf: Buffer, shape: &[usize]) -> Result<Tensor> {
        // Checked: a shape whose count wraps must not match a short buffer.
        let n = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        if n != Some(buf.len()) {
            return Err(Error::value(format!(
                "shape {} is invalid for input of size {}",
                shape::fmt_shape(shape),
                buf.len()
            )));
        }
        let dtype = buf.dtype();
        Ok(Tensor::from_parts(
            Arc::new(Storage::new(buf)),
            Layout::contiguous(shape),
            dtype,
        ))
    }

    /// A contiguous tensor from a vector of elements and a shape.
    pub fn from_vec<T: Element>(data: Vec<T>, shape: &[usize]) -> Result<Tensor> {
        Tensor::from_buffer(T::wrap(data), shape)
    }

    /// A tensor from an owned ndarray (copied into row-major order if needed).
    pub fn from_array<T: Element>(a: ArrayD<T>) -> Tensor {
        let shape: Vec<usize> = a.shape().to_vec();
        let data = if a.is_standard_layout() {
            a.into_raw_vec_and_offset().0
        } else {
            a.iter().copied().collect()
        };
        Tensor::from_buffer(T::wrap(data), &shape).expect("length matches shape by construction")
    }

    /// A zero-dimensional tensor holding `v`.
    pub fn scalar<T: Element>(v: T) -> Tensor {
        Tensor::from_buffer(T::wrap(vec![v]), &[]).expect("one element for shape []")
    }

    /// A Python number as a zero-dimensional tensor that promotes like torch's wrapped numbers.
    pub fn wrapped_scalar(v: f64, dtype: DType) -> Tensor {
        let t = Tensor::full(&[], v, dtype);
        Tensor(Arc::new(TensorImpl {
            storage: t.0.storage.clone(),
            layout: t.0.layout.clone(),
            dtype,
            meta: spin::SpinLock::new(AutogradMeta::default()),
            inference: false,
            wrapped_number: true,
            binding_slot: Default::default(),
            batch: None,
        }))
    }

    /// Whether this tensor is a wrapped Python number.
    pub fn is_wrapped_number(&self) -> bool {
        self.0.wrapped_number
    }

    /// This operand's weight in type promotion.
    pub fn promotion_priority(&self) -> dtype::Priority {
        if self.0.wrapped_number {
            dtype::Priority::Scalar
        } else if self.dim() == 0 {
            dtype::Priority::ZeroDim
        } else {
            dtype::Priority::Dim
        }
    }

    /// The dtype this operand contributes to promotion (wrapped floats count as the default).
    pub fn promotion_dtype(&self) -> DType {
        if self.0.wrapped_number && self.dtype().is_float() {
            dtype::default_float()
        } else {
            self.dtype()
        }
    }

    /// A view of the same storage with another layout (no autograd recorded here).
    /// On a batched tensor, `layout` is logical and the alias is batched too.
    pub(crate) fn alias_with_layout(&self, layout: Layout) -> Tensor {
        if self.is_batched() {
            return self.batched_alias(layout);
        }
        Tensor::from_parts(self.0.storage.clone(), layout, self.0.dtype)
    }

    // ----- properties ---------------------------------------------------------------------

    /// Sizes of the dimensions.
    pub fn shape(&self) -> &[usize] {
        &self.0.layout.shape
    }
    /// The layout (sizes, strides, offset) in the storage.
    pub fn layout(&self) -> &Layout {
        &self.0.layout
    }
    /// Strides in elements.
    pub fn strides(&self) -> &[usize] {
        &self.0.layout.strides
    }
    /// Number of dimensions.
    pub fn dim(&self) -> usize {
        self.0.layout.shape.len()
    }
    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.0.layout.numel()
    }
    /// Element type.
    pub fn dtype(&self) -> DType {
        self.0.dtype
    }
    /// True when the elements are row-major without gaps.
    pub fn is_contiguous(&self) -> bool {
        self.0.layout.is_contiguous()
    }
    /// The storage shared by all aliases of this tensor.
    pub fn storage(&self) -> &Arc<Storage> {
        &self.0.storage
    }
    /// The version counter shared by aliases of the storage.
    pub fn version(&self) -> u64 {
        self.data_storage().version()
    }
    /// True when both handles are the same tensor.
    pub fn same(&self, other: &Tensor) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
    /// A stable identity for the tensor (its address).
    pub fn id(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }
    /// Whether this tensor was created in inference mode.
    pub fn is_inference(&self) -> bool {
        self.0.inference
    }
    /// A weak handle.
    pub(crate) fn downgrade(&self) -> Weak<TensorImpl> {
        Arc::downgrade(&self.0)
    }

    // ----- autograd metadata --------------------------------------------------------------

    pub(crate) fn meta(&self) -> spin::SpinGuard<'_, AutogradMeta> {
        self.0.meta.lock()
    }
    /// Whether gradients flow to or through this tensor.
    pub fn requires_grad(&self) -> bool {
        let m = self.meta();
        m.requires_grad || m.grad_fn.is_some()
    }
    /// A tensor is a leaf when no recorded op produced it.
    pub fn is_leaf(&self) -> bool {
        self.meta().grad_fn.is_none()
    }
    /// Which output of its `grad_fn` this tensor is.
    pub fn output_nr(&self) -> usize {
        self.meta().output_nr
    }
    /// The accumulated gradient, if any.
    pub fn grad(&self) -> Option<Tensor> {
        self.meta().grad.clone()
    }
    /// Whether a non-leaf keeps its gradient.
    pub fn retains_grad(&self) -> bool {
        self.meta().retains_grad
    }

    /// Set or clear `.grad`, with torch's checks on size and dtype.
    pub fn set_grad(&self, grad: Option<Tensor>) -> Result<()> {
        if let Some(g) = &grad {
            if g.shape() != self.shape() {
                return Err(Error::runtime(format!(
                    "attempting to assign a gradient of size '{}' to a tensor of size '{}'. Please ensure that the gradient and the tensor are the same size",
                    shape::fmt_shape(g.shape()),
                    shape::fmt_shape(self.shape())
                )));
            }
            if g.dtype() != self.dtype() {
                return Err(Error::runtime(format!(
                    "attempting to assign a gradient with dtype '{}' to a tensor with grad_dtype '{}'. The gradient must match the tensor's grad_dtype (defaults to the tensor's dtype). You can set the tensor's grad_dtype attribute with a specific dtype, or None to allow any dtype. Set grad_dtype with caution. Diverging the dtypes of a tensor and its gradient may break downstream systems that assume they match.",
                    g.dtype().c_name(),
                    scalar_type_name(self.dtype())
                )));
            }
        }
        self.meta().grad = grad;
        Ok(())
    }

    /// Mark a leaf as requiring (or not) gradients, with torch's errors.
    pub fn set_requires_grad(&self, requires_grad: bool) -> Result<()> {
        let mut m = self.meta();
        if m.grad_fn.is_some() {
            if requires_grad {
                return Ok(());
            }
            return Err(Error::runtime(
                "you can only change requires_grad flags of leaf variables. If you want to use a computed variable in a subgraph that doesn't require differentiation use var_no_grad = var.detach().",
            ));
        }
        if requires_grad && !self.dtype().is_float() {
            return Err(Error::runtime(
                "only Tensors of floating point and complex dtype can require gradients",
            ));
        }
        if requires_grad && self.0.inference && !grad_mode::is_inference_mode_enabled() {
            return Err(Error::runtime("Setting requires_grad=True on inference tensor outside InferenceMode is not allowed."));
        }
        m.requires_grad = requires_grad;
        Ok(())
    }

    /// Builder form of [`Tensor::set_requires_grad`].
    pub fn requires_grad_(self, requires_grad: bool) -> Result<Tensor> {
        if requires_grad && !self.dtype().is_float() && self.is_leaf() {
            return Err(Error::runtime(
                "only Tensors of floating point dtype can require gradients",
            ));
        }
        self.set_requires_grad(requires_grad)?;
        Ok(self)
    }

    /// A tensor sharing storage and version counter, cut from the graph.
    pub fn detach(&self) -> Tensor {
        self.alias_with_layout(self.0.layout.clone())
    }

    // ----- element access -----------------------------------------------------------------

    /// Run `f` on an ndarray view of the elements, which must be of type `T`.
    pub fn with_view<T: Element, R>(&self, f: impl FnOnce(ArrayViewD<'_, T>) -> R) -> Result<R> {
        let guard = self.0.storage.read();
        let data = T::data(&guard).ok_or_else(|| dtype_mismatch(T::DTYPE, self.dtype()))?;
        let view = self.0.layout.view(data.as_slice())?;
        Ok(f(view))
    }

    /// Run `f` on the elements as a row-major slice when the layout allows it without copying.
    pub fn with_contiguous_slice<T: Element, R>(&self, f: impl FnOnce(&[T]) -> R) -> Result<R> {
        if self.is_contiguous() {
            let guard = self.0.storage.read();
            let data = T::data(&guard).ok_or_else(|| dtype_mismatch(T::DTYPE, self.dtype()))?;
            let start = self.0.layout.offset;
            let slice = data
                .as_slice()
                .get(start..start + self.numel())
                .unwrap_or(&[]);
            Ok(f(slice))
        } else {
            let v = self.to_vec::<T>()?;
            Ok(f(&v))
        }
    }

    /// The elements in row-major order, converted to `T`.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        creation::ensure_allocatable(self.numel(), T::DTYPE)?;
        if self.dtype() == T::DTYPE {
            if self.is_contiguous() {
                let guard = self.0.storage.read();
                let data = T::data(&guard).ok_or_else(|| dtype_mismatch(T::DTYPE, self.dtype()))?;
                let start = self.0.layout.offset;
                return Ok(data
                    .as_slice()
                    .get(start..start + self.numel())
                    .unwrap_or(&[])
                    .to_vec());
            }
            let guard = self.0.storage.read();
            let data = T::data(&guard).ok_or_else(|| dtype_mismatch(T::DTYPE, self.dtype()))?;
            return self.0.layout.gather(data.as_slice());
        }
        crate::tensor::storage::with_dtype!(self.dtype(), S => {
            self.with_contiguous_slice::<S, _>(storage::convert_vec::<S, T>)
        })
    }

    /// The elements as an owned ndarray of type `T` (converted if needed).
    pub fn to_array<T: Element>(&self) -> Result<ArrayD<T>> {
        let v = self.to_vec::<T>()?;
        ArrayD::from_shape_vec(IxDyn(self.shape()), v)
            .map_err(|e| Error::runtime(format!("internal error: {e}")))
    }

    /// The single element of a one-element tensor, as f64.
    pub fn item_f64(&self) -> Result<f64> {
        if self.numel() != 1 {
            return Err(Error::runtime(format!(
                "a Tensor with {} elements cannot be converted to Scalar",
                self.numel()
            )));
        }
        Ok(self.to_vec::<f64>()?[0])
    }
}

/// torch's ScalarType name (`Float`, `Double`, `Long`, `Bool`, `Half`, ...).
pub fn scalar_type_name(d: DType) -> &'static str {
    d.scalar_type_name()
}

pub(crate) fn dtype_mismatch(expected: DType, got: DType) -> Error {
    Error::runtime(format!(
        "expected scalar type {} but found {}",
        scalar_type_name(expected),
        scalar_type_name(got)
    ))
}

#[cfg(test)]
mod size_tests {
    use super::*;

    #[test]
    fn a_tensor_fits_mimallocs_256_byte_class() {
        // Every op allocates one TensorImpl (plus 16 bytes of Arc counts) per output; a byte
        // over the class costs the next one (320). The layering change's fat node handles took
        // it there once, a 1.7% slower tiny_chain.
        assert!(
            std::mem::size_of::<TensorImpl>() <= 240,
            "{}",
            std::mem::size_of::<TensorImpl>()
        );
    }
}
