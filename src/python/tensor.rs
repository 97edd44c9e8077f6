//! The Python `Tensor` class: argument parsing and conversion only; every computation is a call
//! into the crate.

use std::sync::atomic::{AtomicBool, Ordering};

use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::prelude::*;

use crate::python::args::Int;
use pyo3::types::{PyBool, PyFloat, PyInt, PyTuple, PyType};

use super::errors::{detached, guarded, IntoPyResult};
use super::{dtype_object, PyDType};
use crate::tensor::{DType, Tensor};

/// A ferrograd tensor. Subclassable so that `nn.Parameter` is a `Tensor`, as in torch.
#[pyclass(
    name = "Tensor",
    module = "ferrograd._C",
    frozen,
    weakref,
    dict,
    subclass
)]
pub struct PyTensor {
    pub(crate) inner: Tensor,
    /// Whether this object is the one in `inner`'s binding slot. Only such an object clears the
    /// slot when it dies: one made by `Tensor.__new__` outside `_make_subclass` is never
    /// registered, and must not unregister the object the engine hands back.
    registered: AtomicBool,
}

/// The Python object for a tensor: the existing one if it is alive (so identity holds, as in
/// torch), else a new one registered in the tensor's binding slot.
pub(crate) fn wrap(py: Python<'_>, t: Tensor) -> PyResult<Py<PyTensor>> {
    let slot = &t.0.binding_slot;
    let existing = slot.load(Ordering::Acquire);
    if !existing.is_null() {
        // SAFETY: the slot holds a live PyTensor; it is cleared (under the GIL) in Drop before
        // the object is freed, and we hold the GIL here.
        let obj = unsafe { Bound::from_borrowed_ptr(py, existing as *mut pyo3::ffi::PyObject) };
        return Ok(obj.cast_into::<PyTensor>().map_err(PyErr::from)?.unbind());
    }
    let obj = Py::new(
        py,
        PyTensor {
            inner: t.clone(),
            registered: AtomicBool::new(true),
        },
    )?;
    slot.store(obj.as_ptr() as *mut std::ffi::c_void, Ordering::Release);
    Ok(obj)
}

impl Drop for PyTensor {
    fn drop(&mut self) {
        // Only one Python object per tensor is ever registered; an unregistered one leaves the
        // slot alone.
        if !self.registered.load(Ordering::Acquire) {
            return;
        }
        self.inner
            .0
            .binding_slot
            .store(std::ptr::null_mut(), Ordering::Release);
    }
}

/// The tensor inside a Python `Tensor`, or a TypeError naming `what`.
pub(crate) fn tensor_of(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Tensor> {
    match obj.cast::<PyTensor>() {
        Ok(t) => Ok(t.get().inner.clone()),
        Err(_) => Err(PyTypeError::new_err(format!(
            "{what} must be a Tensor, not {}",
            obj.get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_default()
        ))),
    }
}

/// A tensor or `None`.
pub(crate) fn opt_tensor_of(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Option<Tensor>> {
    if obj.is_none() {
        Ok(None)
    } else {
        tensor_of(obj, what).map(Some)
    }
}

/// The other operand of a binary op: a tensor, or a Python number wrapped like torch does.
pub(crate) fn operand(obj: &Bound<'_, PyAny>) -> PyResult<Tensor> {
    if let Ok(t) = obj.cast::<PyTensor>() {
        return Ok(t.get().inner.clone());
    }
    if obj.is_instance_of::<PyBool>() {
        let v: bool = obj.extract()?;
        return Ok(Tensor::wrapped_scalar(v as u8 as f64, DType::Bool));
    }
    if obj.is_instance_of::<PyInt>() {
        let v = obj.extract::<Int>()?.0;
        return Ok(Tensor::wrapped_scalar(v as f64, DType::Int64));
    }
    if obj.is_instance_of::<PyFloat>() {
        let v: f64 = obj.extract()?;
        return Ok(Tensor::wrapped_scalar(v, DType::Float64));
    }
    // Anything array-like goes through numpy, as torch.tensor would take it.
    let py = obj.py();
    let module = py.import("ferrograd")?;
    let t = module.getattr("tensor")?.call1((obj,))?;
    tensor_of(&t, "other")
}

/// From this many elements an op releases the GIL while it runs (below, the hand-off costs more
/// than it frees).
pub(crate) const HEAVY_ELEMENTS: usize = 1 << 15;

/// Run `f(t)`, releasing the GIL when `t` is large.
pub(crate) fn heavy(
    py: Python<'_>,
    t: &Tensor,
    f: impl FnOnce(&Tensor) -> crate::error::Result<Tensor> + Send,
) -> PyResult<Tensor> {
    if t.numel() >= HEAVY_ELEMENTS {
        let t = t.clone();
        detached(py, move || f(&t))
    } else {
        guarded(|| f(t))
    }
}

/// Wrap several tensors as a Python tuple.
pub(crate) fn wrap_all<'py>(py: Python<'py>, ts: Vec<Tensor>) -> PyResult<Bound<'py, PyTuple>> {
    let objs: Vec<Py<PyTensor>> = ts
        .into_iter()
        .map(|t| wrap(py, t))
        .collect::<PyResult<_>>()?;
    PyTuple::new(py, objs)
}

/// An object of the Python package (a class, function or constant) that a binding uses,
/// imported on first use.
pub(crate) struct PyItem {
    cell: pyo3::sync::PyOnceLock<Py<PyAny>>,
    module: &'static str,
    name: &'static str,
}

impl PyItem {
    pub(crate) const fn new(module: &'static str, name: &'static str) -> Self {
        PyItem {
            cell: pyo3::sync::PyOnceLock::new(),
            module,
            name,
        }
    }

    pub(crate) fn get<'py>(&'static self, py: Python<'py>) -> PyResult<&'py Bound<'py, PyAny>> {
        let obj = self.cell.get_or_try_init(py, || -> PyResult<_> {
            Ok(py.import(self.module)?.getattr(self.name)?.unbind())
        })?;
        Ok(obj.bind(py))
    }
}

/// `Size` from a tuple of ints, skipping `Size(...)`'s per-element validation.
static SIZE_FROM_INTS: PyItem = PyItem::new("ferrograd._size", "_from_ints");
static CPU: PyItem = PyItem::new("ferrograd._device", "CPU");
static META: PyItem = PyItem::new("ferrograd._device", "META");
pub(crate) static CHECK_DEVICE: PyItem = PyItem::new("ferrograd._device", "check_device");
static REBUILD_TENSOR: PyItem = PyItem::new("ferrograd._tensor", "_rebuild_tensor");
static REBUILD_META: PyItem = PyItem::new("ferrograd._tensor", "_rebuild_meta");
static BACKWARD: PyItem = PyItem::new("ferrograd.autograd", "backward");
static NEW_TENSOR: PyItem = PyItem::new("ferrograd._creation", "tensor");
static NEW_FULL: PyItem = PyItem::new("ferrograd._creation", "full");

/// torch's warning for reading `.grad` of a non-leaf that does not retain it.
const NONLEAF_GRAD_WARNING: &std::ffi::CStr = c"The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad attribute won't be populated during autograd.backward(). If you indeed want the .grad field to be populated for a non-leaf Tensor, use .retain_grad() on the non-leaf Tensor. If you access the non-leaf Tensor by mistake, make sure you access the leaf Tensor instead. See github.com/pytorch/pytorch/pull/30531 for more information.";

/// `dims` as a `ferrograd.Size` (torch's tuple subclass for shapes).
fn size_object<'py>(py: Python<'py>, dims: &[usize]) -> PyResult<Bound<'py, PyAny>> {
    SIZE_FROM_INTS.get(py)?.call1((PyTuple::new(py, dims)?,))
}

#[pymethods]
impl PyTensor {
    // ----- subclasses -----------------------------------------------------------------------

    /// The allocator behind `_make_subclass`: an unregistered alias of `data` of type `cls`.
    /// Direct construction is refused (torch's legacy `Tensor(...)` constructor is not offered;
    /// `ferrograd.tensor` makes tensors).
    #[new]
    #[classmethod]
    #[pyo3(signature = (data, requires_grad=false))]
    fn py_new(
        cls: &Bound<'_, PyType>,
        data: &Bound<'_, PyAny>,
        requires_grad: bool,
    ) -> PyResult<Self> {
        if cls.is(cls.py().get_type::<PyTensor>()) {
            return Err(PyTypeError::new_err(
                "Tensor cannot be constructed directly; use ferrograd.tensor(...)",
            ));
        }
        let t = tensor_of(data, "data")?.detach();
        let t = guarded(|| t.requires_grad_(requires_grad))?;
        Ok(PyTensor {
            inner: t,
            registered: AtomicBool::new(false),
        })
    }

    /// An instance of the subclass `cls` sharing `data`'s storage and version counter, a leaf
    /// with `requires_grad=require_grad` (torch's `Tensor._make_subclass`, used by
    /// `nn.Parameter`). It is registered as the object of its tensor, so the engine hands this
    /// very object back (`p.grad` accumulates into it; `model.weight is model.weight`).
    #[staticmethod]
    #[pyo3(signature = (cls, data, require_grad=false))]
    fn _make_subclass(
        cls: &Bound<'_, PyType>,
        data: &Bound<'_, PyAny>,
        require_grad: bool,
    ) -> PyResult<Py<PyTensor>> {
        let py = cls.py();
        let base = py.get_type::<PyTensor>();
        if !cls.is_subclass(&base)? || cls.is(&base) {
            return Err(PyTypeError::new_err(format!(
                "_make_subclass: cls must be a strict subclass of Tensor, not {}",
                cls.name()?
            )));
        }
        let obj = base.call_method1("__new__", (cls, data, require_grad))?;
        let obj = obj.cast_into::<PyTensor>().map_err(PyErr::from)?;
        let me = obj.get();
        // The alias is new, so no other object can be in its slot.
        me.inner
            .0
            .binding_slot
            .store(obj.as_ptr() as *mut std::ffi::c_void, Ordering::Release);
        me.registered.store(true, Ordering::Release);
        Ok(obj.unbind())
    }

    // ----- properties -----------------------------------------------------------------------

    /// Sizes of the dimensions, as a `ferrograd.Size`.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        size_object(py, self.inner.shape())
    }

    /// Size of one dimension, or all sizes.
    #[pyo3(signature = (dim=None))]
    fn size<'py>(&self, py: Python<'py>, dim: Option<Int>) -> PyResult<Bound<'py, PyAny>> {
        let dim = dim.map(|v| v.0);
        match dim {
            None => size_object(py, self.inner.shape()),
            Some(d) => {
                let w = crate::tensor::shape::wrap_dim(d, self.inner.dim()).py()?;
                if self.inner.dim() == 0 {
                    return Err(pyo3::exceptions::PyIndexError::new_err(
                        "dimension specified as 0 but tensor has no dimensions",
                    ));
                }
                Ok(self.inner.shape()[w].into_pyobject(py)?.into_any())
            }
        }
    }

    /// Strides in elements.
    #[pyo3(signature = (dim=None))]
    fn stride<'py>(&self, py: Python<'py>, dim: Option<Int>) -> PyResult<Bound<'py, PyAny>> {
        let dim = dim.map(|v| v.0);
        match dim {
            None => Ok(PyTuple::new(py, self.inner.strides())?.into_any()),
            Some(d) => {
                let w = crate::tensor::shape::wrap_dim(d, self.inner.dim()).py()?;
                Ok(self.inner.strides()[w].into_pyobject(py)?.into_any())
            }
        }
    }

    /// Number of dimensions.
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    /// Number of dimensions.
    #[getter]
    fn ndim(&self) -> usize {
        self.inner.dim()
    }
    /// Number of elements.
    fn numel(&self) -> usize {
        self.inner.numel()
    }
    /// Element type.
    #[getter]
    fn dtype(&self, py: Python<'_>) -> PyResult<Py<PyDType>> {
        dtype_object(py, self.inner.dtype())
    }
    /// Whether the elements are row-major without gaps.
    fn is_contiguous(&self) -> bool {
        self.inner.is_contiguous()
    }
    /// Whether the dtype is float32 or float64.
    fn is_floating_point(&self) -> bool {
        self.inner.dtype().is_float()
    }
    /// The version counter shared with aliases (bumped by in-place ops).
    #[getter]
    fn _version(&self) -> PyResult<u64> {
        if self.inner.is_inference() {
            return Err(PyRuntimeError::new_err(
                "Inference tensors do not track version counter.",
            ));
        }
        Ok(self.inner.version())
    }
    /// Whether this tensor was made in inference mode.
    fn is_inference(&self) -> bool {
        self.inner.is_inference()
    }
    /// Address of the first element (shared by aliases of one storage).
    fn data_ptr(&self) -> usize {
        // A meta tensor has no memory (torch says 0 too).
        if self.inner.is_meta() {
            return 0;
        }
        let base = self.inner.storage().read().as_ptr() as usize;
        base + self.inner.layout().offset * self.inner.dtype().size()
    }
    /// Offset of the first element in the storage, in elements.
    fn storage_offset(&self) -> usize {
        self.inner.layout().offset
    }
    /// Bytes per element.
    fn element_size(&self) -> usize {
        self.inner.dtype().size()
    }
    /// Where the tensor lives: the CPU, or `meta` for a tensor without data.
    #[getter]
    fn device<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        if self.inner.is_meta() {
            return META.get(py).cloned();
        }
        CPU.get(py).cloned()
    }
    /// Whether this is a meta tensor (a shape and dtype without data).
    #[getter]
    fn is_meta(&self) -> bool {
        self.inner.is_meta()
    }

    // ----- autograd ------------------------------------------------------------------------

    /// Whether gradients flow to or through this tensor.
    #[getter]
    fn get_requires_grad(&self) -> bool {
        self.inner.requires_grad()
    }
    #[setter]
    fn set_requires_grad(&self, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let v: bool = value
            .extract()
            .map_err(|_| PyTypeError::new_err("requires_grad must be a bool"))?;
        guarded(|| self.inner.set_requires_grad(v))
    }
    /// Set `requires_grad` on a leaf and return it.
    #[pyo3(signature = (requires_grad=true))]
    fn requires_grad_(slf: &Bound<'_, Self>, requires_grad: bool) -> PyResult<Py<PyTensor>> {
        let t = &slf.get().inner;
        if requires_grad && !t.dtype().is_float() && t.is_leaf() {
            return Err(PyRuntimeError::new_err(
                "only Tensors of floating point dtype can require gradients",
            ));
        }
        guarded(|| t.set_requires_grad(requires_grad))?;
        Ok(slf.clone().unbind())
    }
    /// A leaf is a tensor no recorded op produced.
    #[getter]
    fn is_leaf(&self) -> bool {
        self.inner.is_leaf()
    }
    /// The accumulated gradient (warns when read on a non-leaf that does not retain it).
    #[getter]
    fn get_grad(&self, py: Python<'_>) -> PyResult<Option<Py<PyTensor>>> {
        let t = &self.inner;
        if !t.is_leaf() && !t.retains_grad() && t.requires_grad() {
            let category = py.get_type::<pyo3::exceptions::PyUserWarning>();
            PyErr::warn(py, &category, NONLEAF_GRAD_WARNING, 1)?;
        }
        t.grad().map(|g| wrap(py, g)).transpose()
    }
    /// Set `.grad` (None clears it).
    #[setter]
    fn set_grad(&self, value: &Bound<'_, PyAny>) -> PyResult<()> {
        if !value.is_none() && value.cast::<PyTensor>().is_err() {
            return Err(PyTypeError::new_err(format!(
                "assigned grad expected to be a Tensor or None but got grad of type {}",
                value.get_type().name()?
            )));
        }
        let g = opt_tensor_of(value, "grad")?;
        guarded(|| self.inner.set_grad(g))
    }
    /// `del t.grad` clears it.
    #[deleter]
    fn delete_grad(&self) -> PyResult<()> {
        guarded(|| self.inner.set_grad(None))
    }
    /// A detached alias of this tensor.
    #[getter]
    fn data(&self, py: Python<'_>) -> PyResult<Py<PyTensor>> {
        wrap(py, self.inner.detach())
    }
    /// Accumulate the gradient of this tensor into the graph leaves' `.grad`
    /// (`ferrograd.autograd.backward` with this tensor as the root).
    #[pyo3(signature = (gradient=None, retain_graph=None, create_graph=false, inputs=None))]
    fn backward(
        slf: &Bound<'_, Self>,
        gradient: Option<&Bound<'_, PyAny>>,
        retain_graph: Option<bool>,
        create_graph: bool,
        inputs: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let py = slf.py();
        let kwargs = pyo3::types::PyDict::new(py);
        kwargs.set_item("inputs", inputs)?;
        BACKWARD
            .get(py)?
            .call((slf, gradient, retain_graph, create_graph), Some(&kwargs))?;
        Ok(())
    }
    /// Whether a non-leaf keeps its `.grad`.
    #[getter]
    fn retains_grad(&self) -> bool {
        self.inner.retains_grad()
    }
    /// Keep `.grad` for this non-leaf after backward.
    fn retain_grad(&self) -> PyResult<()> {
        guarded(|| self.inner.retain_grad())
    }
    /// A tensor sharing storage, cut from the graph.
    fn detach(&self, py: Python<'_>) -> PyResult<Py<PyTensor>> {
        wrap(py, self.inner.detach())
    }
    /// Cut this tensor from the graph in place.
    fn detach_(slf: &Bound<'_, Self>) -> PyResult<Py<PyTensor>> {
        guarded(|| slf.get().inner.detach_())?;
        Ok(slf.clone().unbind())
    }
    // ----- conversion ----------------------------------------------------------------------

    /// The value of a one-element tensor as a Python number.
    fn item<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        refuse_batched(&self.inner, VMAP_ITEM)?;
        let v = guarded(|| self.inner.item_f64())?;
        Ok(match self.inner.dtype() {
            DType::Bool => PyBool::new(py, v != 0.0).to_owned().into_any(),
            d if d.is_integer() => (guarded(|| self.inner.to_vec::<i64>())?[0])
                .into_pyobject(py)?
                .into_any(),
            _ => v.into_pyobject(py)?.into_any(),
        })
    }
    /// A NumPy array sharing this tensor's memory.
    fn numpy<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        refuse_batched(&self.inner, VMAP_DATA)?;
        if self.inner.requires_grad() {
            return Err(PyRuntimeError::new_err("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead."));
        }
        refuse_meta(&self.inner)?;
        super::numpy_interop::to_numpy(py, &self.inner)
    }

    // ----- Python protocol -----------------------------------------------------------------

    fn __len__(&self) -> PyResult<usize> {
        if self.inner.dim() == 0 {
            return Err(PyTypeError::new_err("len() of a 0-d tensor"));
        }
        Ok(self.inner.shape()[0])
    }
    fn __bool__(&self) -> PyResult<bool> {
        if self.inner.numel() != 1 {
            return Err(PyRuntimeError::new_err(format!(
                "Boolean value of Tensor with {} values is ambiguous",
                if self.inner.numel() == 0 {
                    "no"
                } else {
                    "more than one"
                }
            )));
        }
        refuse_batched(&self.inner, VMAP_CONTROL_FLOW)?;
        Ok(guarded(|| self.inner.item_f64())? != 0.0)
    }
    fn __float__(&self) -> PyResult<f64> {
        refuse_batched(&self.inner, VMAP_ITEM)?;
        guarded(|| self.inner.item_f64())
    }
    fn __int__(&self) -> PyResult<i64> {
        refuse_batched(&self.inner, VMAP_ITEM)?;
        Ok(guarded(|| self.inner.item_f64())? as i64)
    }
    fn __index__(&self) -> PyResult<i64> {
        refuse_batched(&self.inner, VMAP_ITEM)?;
        if self.inner.dtype() != DType::Int64 || self.inner.numel() != 1 {
            return Err(PyTypeError::new_err(
                "only integer tensors of a single element can be converted to an index",
            ));
        }
        Ok(guarded(|| self.inner.to_vec::<i64>())?[0])
    }
    fn __hash__(&self) -> isize {
        self.inner.id() as isize
    }
    /// The sub-tensors along the first dimension.
    fn __iter__(&self) -> PyResult<PyTensorIter> {
        if self.inner.dim() == 0 {
            return Err(PyTypeError::new_err("iteration over a 0-d tensor"));
        }
        Ok(PyTensorIter {
            tensor: self.inner.clone(),
            next: std::sync::atomic::AtomicUsize::new(0),
        })
    }
    /// Pickling: the elements and whether the leaf requires grad (a non-leaf's history is not
    /// pickled; torch does not either).
    fn __reduce_ex__<'py>(&self, py: Python<'py>, _protocol: i64) -> PyResult<Bound<'py, PyTuple>> {
        refuse_batched(&self.inner, VMAP_DATA)?;
        let requires_grad = self.inner.requires_grad() && self.inner.is_leaf();
        if self.inner.is_meta() {
            // No elements to pickle: the shape and dtype rebuild it.
            let shape = PyTuple::new(py, self.inner.shape())?;
            let args = (shape, self.inner.dtype().name(), requires_grad);
            let args = args.into_pyobject(py)?;
            return PyTuple::new(py, [REBUILD_META.get(py)?.clone(), args.into_any()]);
        }
        let array =
            super::numpy_interop::to_numpy(py, &self.inner.detach())?.call_method0("copy")?;
        let args = (array, requires_grad).into_pyobject(py)?;
        PyTuple::new(py, [REBUILD_TENSOR.get(py)?.clone(), args.into_any()])
    }
    /// The tensor as a NumPy array (NumPy's array protocol).
    #[pyo3(signature = (dtype=None, copy=None))]
    fn __array__<'py>(
        &self,
        py: Python<'py>,
        dtype: Option<&Bound<'py, PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let mut arr = self.numpy(py)?;
        if let Some(d) = dtype.filter(|d| !d.is_none()) {
            let kwargs = pyo3::types::PyDict::new(py);
            kwargs.set_item("copy", false)?;
            arr = arr.call_method("astype", (d,), Some(&kwargs))?;
        }
        if copy == Some(true) {
            arr = arr.call_method0("copy")?;
        }
        Ok(arr)
    }
    /// The elements as (nested) Python lists, or a number for a 0-d tensor.
    fn tolist<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        refuse_batched(&self.inner, VMAP_DATA)?;
        refuse_meta(&self.inner)?;
        let t = self.inner.detach();
        // NumPy has no bfloat16: its values are exact in float32.
        let t = if t.dtype() == DType::BFloat16 {
            guarded(|| t.to_dtype(DType::Float32))?
        } else {
            t
        };
        super::numpy_interop::to_numpy(py, &t)?.call_method0("tolist")
    }
    /// Makes NumPy defer binary operators to the tensor.
    #[classattr]
    fn __array_priority__() -> i64 {
        1000
    }

    // ----- device and factories -----------------------------------------------------------

    /// Always False: ferrograd computes on the CPU.
    #[classattr]
    fn is_cuda() -> bool {
        false
    }
    /// This tensor: it is on the CPU already.
    #[pyo3(signature = (memory_format=None))]
    fn cpu(slf: &Bound<'_, Self>, memory_format: Option<&Bound<'_, PyAny>>) -> Py<PyTensor> {
        let _ = memory_format;
        slf.clone().unbind()
    }
    /// Raises: ferrograd computes on the CPU only.
    #[pyo3(signature = (*args, **kwargs))]
    fn cuda<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
        kwargs: Option<&Bound<'py, pyo3::types::PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let _ = (args, kwargs);
        CHECK_DEVICE.get(py)?.call1(("cuda",))
    }
    /// A new tensor from `data`, with this tensor's dtype by default.
    #[pyo3(signature = (data, dtype=None))]
    fn new_tensor<'py>(
        &self,
        py: Python<'py>,
        data: &Bound<'py, PyAny>,
        dtype: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let kwargs = pyo3::types::PyDict::new(py);
        kwargs.set_item("dtype", self.dtype_or(py, dtype)?)?;
        NEW_TENSOR.get(py)?.call((data,), Some(&kwargs))
    }
    /// Number of dimensions (`dim()`).
    fn ndimension(&self) -> usize {
        self.inner.dim()
    }
    /// Number of elements (`numel()`).
    fn nelement(&self) -> usize {
        self.inner.numel()
    }
}

impl PyTensor {
    /// `dtype` unless it is absent or falsy (`dtype or self.dtype`).
    fn dtype_or<'py>(
        &self,
        py: Python<'py>,
        dtype: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        match dtype {
            Some(d) if d.is_truthy()? => Ok(d.clone()),
            _ => Ok(self.dtype(py)?.into_bound(py).into_any()),
        }
    }

    /// `ferrograd.full(size, value, dtype=dtype or self.dtype)`, `size` as `*size` or one
    /// sequence.
    fn new_filled<'py>(
        &self,
        py: Python<'py>,
        size: &Bound<'py, PyTuple>,
        value: f64,
        dtype: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let mut size = size.clone().into_any();
        if let Ok(one) = size.cast::<PyTuple>().map(|t| t.len() == 1) {
            if one {
                let first = size.get_item(0)?;
                if first.is_instance_of::<PyTuple>()
                    || first.is_instance_of::<pyo3::types::PyList>()
                {
                    size = PyTuple::new(py, first.try_iter()?.collect::<PyResult<Vec<_>>>()?)?
                        .into_any();
                }
            }
        }
        let kwargs = pyo3::types::PyDict::new(py);
        kwargs.set_item("dtype", self.dtype_or(py, dtype)?)?;
        NEW_FULL.get(py)?.call((size, value), Some(&kwargs))
    }
}

/// `new_zeros`/`new_ones`: `ferrograd.full(size, value, dtype=dtype or self.dtype)`, one
/// `name => value, "doc"` each.
macro_rules! new_filled_methods {
    ($($name:ident => $value:expr, $doc:literal;)*) => {
        #[pymethods]
        impl PyTensor {
            $(
                #[doc = $doc]
                #[pyo3(signature = (*size, dtype=None))]
                fn $name<'py>(
                    &self,
                    py: Python<'py>,
                    size: &Bound<'py, PyTuple>,
                    dtype: Option<&Bound<'py, PyAny>>,
                ) -> PyResult<Bound<'py, PyAny>> {
                    self.new_filled(py, size, $value, dtype)
                }
            )*
        }
    };
}

new_filled_methods! {
    new_zeros => 0.0, "Zeros of shape `size`, with this tensor's dtype by default.";
    new_ones => 1.0, "Ones of shape `size`, with this tensor's dtype by default.";
    new_empty => 0.0, "A tensor of shape `size` (zeros, one valid content of torch's uninitialised memory), with this tensor's dtype by default.";
}

#[pymethods]
impl PyTensor {
    /// `fill_value` in shape `size`, with this tensor's dtype by default.
    #[pyo3(signature = (size, fill_value, *, dtype=None, device=None, requires_grad=false))]
    fn new_full<'py>(
        &self,
        py: Python<'py>,
        size: &Bound<'py, PyAny>,
        fill_value: f64,
        dtype: Option<&Bound<'py, PyAny>>,
        device: Option<&Bound<'py, PyAny>>,
        requires_grad: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let kwargs = pyo3::types::PyDict::new(py);
        kwargs.set_item("dtype", self.dtype_or(py, dtype)?)?;
        kwargs.set_item("device", device)?;
        kwargs.set_item("requires_grad", requires_grad)?;
        NEW_FULL.get(py)?.call((size, fill_value), Some(&kwargs))
    }
}

/// The iterator of `iter(tensor)`: `tensor.select(0, i)` for each `i`.
#[pyclass(module = "ferrograd._C", frozen)]
pub(crate) struct PyTensorIter {
    tensor: Tensor,
    next: std::sync::atomic::AtomicUsize,
}

#[pymethods]
impl PyTensorIter {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }
    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Py<PyTensor>>> {
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        if i >= self.tensor.shape()[0] {
            return Ok(None);
        }
        let t = guarded(|| self.tensor.select(0, i as i64))?;
        wrap(py, t).map(Some)
    }
}

/// torch's errors for reading one sample's elements as Python values inside vmap.
const VMAP_ITEM: &str = "vmap: It looks like you're calling .item() on a Tensor. We don't support vmap over calling .item() on a Tensor, please try to rewrite what you're doing with other operations. If error is occurring somewhere inside PyTorch internals, please file a bug report.";
const VMAP_CONTROL_FLOW: &str = "vmap: It looks like you're attempting to use a Tensor in some data-dependent control flow. We don't support that yet, please file an issue at https://github.com/pytorch/pytorch/issues .";
const VMAP_DATA: &str = "Cannot access data pointer of Tensor that doesn't have storage";

/// torch's error for reading the elements of a meta tensor (which has none).
fn refuse_meta(t: &Tensor) -> PyResult<()> {
    if t.is_meta() {
        return Err(pyo3::exceptions::PyNotImplementedError::new_err(
            "Cannot copy out of meta tensor; no data!",
        ));
    }
    Ok(())
}

fn refuse_batched(t: &Tensor, message: &str) -> PyResult<()> {
    if t.is_batched() {
        return Err(PyRuntimeError::new_err(message.to_string()));
    }
    Ok(())
}
