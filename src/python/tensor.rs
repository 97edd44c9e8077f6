//! The Python `Tensor` class: argument parsing and conversion only; every computation is a call
//! into the crate.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::prelude::*;

use crate::python::args::{Int, Ints};
use pyo3::types::{PyBool, PyFloat, PyInt, PyList, PyTuple, PyType};

use super::args;
use super::errors::{detached, from_py, guarded, IntoPyResult};
use super::node::{PyHookHandle, PyNode};
use super::{dtype_object, PyDType};
use crate::autograd::TensorHook;
use crate::error::Error;
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

static SIZE_TYPE: pyo3::sync::PyOnceLock<Py<PyAny>> = pyo3::sync::PyOnceLock::new();

/// `dims` as a `ferrograd.Size` (torch's tuple subclass for shapes).
fn size_object<'py>(py: Python<'py>, dims: &[usize]) -> PyResult<Bound<'py, PyAny>> {
    let cls = SIZE_TYPE.get_or_try_init(py, || -> PyResult<_> {
        Ok(py.import("ferrograd._size")?.getattr("Size")?.unbind())
    })?;
    cls.bind(py).call1((PyTuple::new(py, dims)?,))
}

/// Dimensions given as `*dims` or as one sequence.
pub(crate) fn dims_arg(args: &Bound<'_, PyTuple>) -> PyResult<Vec<i64>> {
    if args.len() == 1 {
        let a = args.get_item(0)?;
        if a.is_instance_of::<PyTuple>() || a.is_instance_of::<PyList>() {
            return Ok(a.extract::<Ints>()?.0);
        }
        if let Ok(s) = a.getattr("__index__") {
            let _ = s;
            return Ok(vec![a.extract::<Int>()?.0]);
        }
        return Ok(a.extract::<Ints>()?.0);
    }
    args.iter().map(|a| Ok(a.extract::<Int>()?.0)).collect()
}

/// `dim=None | int | sequence of int`.
pub(crate) fn dim_list(dim: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<i64>> {
    if let Some(d) = dim {
        if d.is_instance_of::<PyBool>() || d.is_instance_of::<PyFloat>() {
            return Err(PyTypeError::new_err(format!(
                "dim must be an int or a tuple of ints, not {}",
                d.get_type().name()?
            )));
        }
    }
    match dim {
        None => Ok(Vec::new()),
        Some(d) if d.is_none() => Ok(Vec::new()),
        Some(d) if d.is_instance_of::<PyInt>() => Ok(vec![d.extract::<Int>()?.0]),
        Some(d) => Ok(d.extract::<Ints>()?.0),
    }
}

macro_rules! unary_methods {
    ($($name:ident => $doc:literal),* $(,)?) => {
        #[pymethods]
        impl PyTensor {
            $(
                #[doc = $doc]
                fn $name(&self, py: Python<'_>) -> PyResult<Py<PyTensor>> {
                    let t = heavy(py, &self.inner, |x| x.$name())?;
                    wrap(py, t)
                }
            )*
        }
    };
}
pub(crate) use unary_methods;

unary_methods!(
    exp => "e^x elementwise.",
    log => "Natural logarithm elementwise.",
    sin => "Sine elementwise.",
    cos => "Cosine elementwise.",
    tanh => "Hyperbolic tangent elementwise.",
    sigmoid => "Logistic sigmoid elementwise.",
    relu => "max(x, 0) elementwise.",
    sqrt => "Square root elementwise.",
    abs => "Absolute value elementwise.",
    neg => "Negation elementwise.",
    sign => "Sign (-1, 0, 1) elementwise.",
);

/// `f(a, other)` for a tensor or number `other`, releasing the GIL when the operands are large.
pub(crate) fn binary_call(
    py: Python<'_>,
    a: &Tensor,
    other: &Bound<'_, PyAny>,
    f: fn(&Tensor, &Tensor) -> crate::error::Result<Tensor>,
) -> PyResult<Py<PyTensor>> {
    let o = operand(other)?;
    let t = if a.numel().max(o.numel()) >= HEAVY_ELEMENTS {
        let a = a.clone();
        detached(py, move || f(&a, &o))?
    } else {
        guarded(|| f(a, &o))?
    };
    wrap(py, t)
}

/// A Python int or float (not bool) as its value and the dtype it promotes as.
fn number(obj: &Bound<'_, PyAny>) -> Option<(f64, DType)> {
    if let Ok(f) = obj.cast::<PyFloat>() {
        return Some((f.value(), DType::Float64));
    }
    if obj.is_instance_of::<PyInt>() && !obj.is_instance_of::<PyBool>() {
        // An int beyond i64 takes the general path, which raises torch's overflow error.
        return obj.extract::<i64>().ok().map(|v| (v as f64, DType::Int64));
    }
    None
}

macro_rules! binary_methods {
    ($($name:ident => $call:expr),* $(,)?) => {
        #[pymethods]
        impl PyTensor {
            $(
                fn $name(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyTensor>> {
                    $crate::python::tensor::binary_call(py, &self.inner, other, $call)
                }
            )*
        }
    };
}
pub(crate) use binary_methods;

/// Arithmetic operators: a Python number operand skips the wrapped 0-d tensor (the op with
/// the most calls per second in scalar-heavy code).
macro_rules! arith_methods {
    ($($name:ident => $op:ident, $number_first:expr, $call:expr);* $(;)?) => {
        #[pymethods]
        impl PyTensor {
            $(
                fn $name(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyTensor>> {
                    if let Some((v, dtype)) = number(other) {
                        let op = crate::ops::binary::ArithOp::$op;
                        let t = heavy(py, &self.inner, move |x| {
                            x.arith_number(op, v, dtype, $number_first)
                        })?;
                        return wrap(py, t);
                    }
                    binary_call(py, &self.inner, other, $call)
                }
            )*
        }
    };
}

arith_methods!(
    add => Add, false, |a, b| a.add(b);
    sub => Sub, false, |a, b| a.sub(b);
    mul => Mul, false, |a, b| a.mul(b);
    __add__ => Add, false, |a, b| a.add(b);
    __radd__ => Add, true, |a, b| b.add(a);
    __sub__ => Sub, false, |a, b| a.sub(b);
    __rsub__ => Sub, true, |a, b| b.sub(a);
    __mul__ => Mul, false, |a, b| a.mul(b);
    __rmul__ => Mul, true, |a, b| b.mul(a);
    __truediv__ => Div, false, |a, b| a.div(b);
    __rtruediv__ => Div, true, |a, b| b.div(a);
);

binary_methods!(
    pow => |a, b| a.pow(b),
    eq => |a, b| a.eq_t(b),
    ne => |a, b| a.ne_t(b),
    lt => |a, b| a.lt_t(b),
    le => |a, b| a.le_t(b),
    gt => |a, b| a.gt_t(b),
    ge => |a, b| a.ge_t(b),
    __eq__ => |a, b| a.eq_t(b),
    __ne__ => |a, b| a.ne_t(b),
    __lt__ => |a, b| a.lt_t(b),
    __le__ => |a, b| a.le_t(b),
    __gt__ => |a, b| a.gt_t(b),
    __ge__ => |a, b| a.ge_t(b),
);

macro_rules! inplace_methods {
    ($($name:ident, $dunder:ident => $call:ident),* $(,)?) => {
        #[pymethods]
        impl PyTensor {
            $(
                fn $name(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyTensor>> {
                    let o = operand(other)?;
                    guarded(|| slf.get().inner.$call(&o))?;
                    Ok(slf.clone().unbind())
                }
                fn $dunder(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>) -> PyResult<()> {
                    let o = operand(other)?;
                    guarded(|| slf.get().inner.$call(&o))
                }
            )*
        }
    };
}
inplace_methods!(
    add_, __iadd__ => add_,
    sub_, __isub__ => sub_,
    mul_, __imul__ => mul_,
    div_, __itruediv__ => div_,
);

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
    /// The device; ferrograd computes on the CPU.
    #[getter]
    fn device(&self) -> &'static str {
        "cpu"
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
    /// The node that produced this tensor, or None (wrapped in Python as `grad_fn`).
    #[getter(_grad_fn)]
    fn grad_fn(&self) -> Option<PyNode> {
        self.inner.grad_fn().map(|n| PyNode { inner: n })
    }
    /// The accumulated gradient (the raw value; the Python property adds torch's warning).
    fn _get_grad(&self, py: Python<'_>) -> PyResult<Option<Py<PyTensor>>> {
        self.inner.grad().map(|g| wrap(py, g)).transpose()
    }
    /// Set `.grad` (None clears it).
    fn _set_grad(&self, value: &Bound<'_, PyAny>) -> PyResult<()> {
        if !value.is_none() && value.cast::<PyTensor>().is_err() {
            return Err(PyTypeError::new_err(format!(
                "assigned grad expected to be a Tensor or None but got grad of type {}",
                value.get_type().name()?
            )));
        }
        let g = opt_tensor_of(value, "grad")?;
        guarded(|| self.inner.set_grad(g))
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
    /// Register `hook(grad) -> Tensor | None` on this tensor's gradient.
    fn register_hook(&self, hook: Py<PyAny>) -> PyResult<PyHookHandle> {
        let name = Python::attach(|py| hook_name(hook.bind(py)));
        let h = python_hook(hook, name);
        let handle = guarded(|| self.inner.register_hook(h))?;
        Ok(PyHookHandle {
            inner: Arc::new(handle),
        })
    }
    /// Register `hook(tensor) -> None` run after this leaf's `.grad` was accumulated.
    fn register_post_accumulate_grad_hook(&self, hook: Py<PyAny>) -> PyResult<PyHookHandle> {
        let h: crate::tensor::PostAccumulateHook = Arc::new(move |t: &Tensor| {
            Python::attach(|py| {
                let arg = wrap(py, t.clone()).map_err(from_py)?;
                let r = hook.call1(py, (arg,)).map_err(from_py)?;
                if r.is_none(py) {
                    Ok(())
                } else {
                    Err(Error::runtime(
                        "Tensor post accumulate grad hooks should return None.",
                    ))
                }
            })
        });
        let handle = guarded(|| self.inner.register_post_accumulate_grad_hook(h))?;
        Ok(PyHookHandle {
            inner: Arc::new(handle),
        })
    }

    // ----- conversion ----------------------------------------------------------------------

    /// The value of a one-element tensor as a Python number.
    fn item<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let v = guarded(|| self.inner.item_f64())?;
        Ok(match self.inner.dtype() {
            DType::Bool => PyBool::new(py, v != 0.0).to_owned().into_any(),
            DType::Int64 => (guarded(|| self.inner.to_vec::<i64>())?[0])
                .into_pyobject(py)?
                .into_any(),
            _ => v.into_pyobject(py)?.into_any(),
        })
    }
    /// Convert to `dtype` (a copy unless it already has it).
    fn _to_dtype(&self, py: Python<'_>, dtype: &PyDType) -> PyResult<Py<PyTensor>> {
        let t = guarded(|| self.inner.to_dtype(dtype.d))?;
        wrap(py, t)
    }
    /// A copy in new memory that keeps the graph.
    fn clone(&self, py: Python<'_>) -> PyResult<Py<PyTensor>> {
        let t = guarded(|| self.inner.clone_tensor())?;
        wrap(py, t)
    }
    /// Row-major (itself when already so).
    fn contiguous(slf: &Bound<'_, Self>) -> PyResult<Py<PyTensor>> {
        if slf.get().inner.is_contiguous() {
            return Ok(slf.clone().unbind());
        }
        let t = guarded(|| slf.get().inner.contiguous())?;
        wrap(slf.py(), t)
    }
    /// A NumPy array sharing this tensor's memory.
    fn numpy<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        if self.inner.requires_grad() {
            return Err(PyRuntimeError::new_err("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead."));
        }
        super::numpy_interop::to_numpy(py, &self.inner)
    }

    // ----- ops -----------------------------------------------------------------------------

    /// Sum over all elements or `dim`.
    #[pyo3(signature = (dim=None, keepdim=false))]
    fn sum(
        &self,
        py: Python<'_>,
        dim: Option<&Bound<'_, PyAny>>,
        keepdim: bool,
    ) -> PyResult<Py<PyTensor>> {
        let dims = dim_list(dim)?;
        let t = heavy(py, &self.inner, move |x| x.sum_dims(&dims, keepdim))?;
        wrap(py, t)
    }
    /// Mean over all elements or `dim`.
    #[pyo3(signature = (dim=None, keepdim=false))]
    fn mean(
        &self,
        py: Python<'_>,
        dim: Option<&Bound<'_, PyAny>>,
        keepdim: bool,
    ) -> PyResult<Py<PyTensor>> {
        let dims = dim_list(dim)?;
        let t = heavy(py, &self.inner, move |x| x.mean_dims(&dims, keepdim))?;
        wrap(py, t)
    }
    /// Matrix product with torch's broadcasting rules.
    fn matmul(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyTensor>> {
        let o = tensor_of(other, "other")?;
        let a = self.inner.clone();
        let t = detached(py, move || a.matmul(&o))?;
        wrap(py, t)
    }
    /// Inner product of two 1-D tensors.
    fn dot(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyTensor>> {
        let o = tensor_of(other, "other")?;
        let t = guarded(|| self.inner.dot(&o))?;
        wrap(py, t)
    }
    /// Matrix-vector product.
    fn mv(&self, py: Python<'_>, vec: &Bound<'_, PyAny>) -> PyResult<Py<PyTensor>> {
        let v = tensor_of(vec, "vec")?;
        let t = guarded(|| self.inner.mv(&v))?;
        wrap(py, t)
    }
    fn __matmul__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyTensor>> {
        self.matmul(py, other)
    }
    fn __rmatmul__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyTensor>> {
        let o = operand(other)?;
        let a = self.inner.clone();
        let t = detached(py, move || o.matmul(&a))?;
        wrap(py, t)
    }
    fn __pow__(
        &self,
        py: Python<'_>,
        other: &Bound<'_, PyAny>,
        _modulo: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyTensor>> {
        self.pow(py, other)
    }
    fn __rpow__(
        &self,
        py: Python<'_>,
        other: &Bound<'_, PyAny>,
        _modulo: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyTensor>> {
        let o = operand(other)?;
        let t = guarded(|| o.pow(&self.inner))?;
        wrap(py, t)
    }
    fn __neg__(&self, py: Python<'_>) -> PyResult<Py<PyTensor>> {
        self.neg(py)
    }
    /// Same elements with another shape (a view when possible).
    #[pyo3(signature = (*shape))]
    fn reshape(&self, py: Python<'_>, shape: &Bound<'_, PyTuple>) -> PyResult<Py<PyTensor>> {
        let s = dims_arg(shape)?;
        let t = guarded(|| self.inner.reshape_i(&s))?;
        wrap(py, t)
    }
    /// A view with another shape.
    #[pyo3(signature = (*shape))]
    fn view(&self, py: Python<'_>, shape: &Bound<'_, PyTuple>) -> PyResult<Py<PyTensor>> {
        let s = dims_arg(shape)?;
        let t = guarded(|| self.inner.view_i(&s))?;
        wrap(py, t)
    }
    /// Swap two dimensions.
    fn transpose(&self, py: Python<'_>, dim0: Int, dim1: Int) -> PyResult<Py<PyTensor>> {
        let dim0 = dim0.0;
        let dim1 = dim1.0;
        let t = guarded(|| self.inner.transpose(dim0, dim1))?;
        wrap(py, t)
    }
    /// Matrix transpose (≤ 2-D).
    fn t(&self, py: Python<'_>) -> PyResult<Py<PyTensor>> {
        let t = guarded(|| self.inner.t())?;
        wrap(py, t)
    }
    /// Reorder dimensions.
    #[pyo3(signature = (*dims))]
    fn permute(&self, py: Python<'_>, dims: &Bound<'_, PyTuple>) -> PyResult<Py<PyTensor>> {
        let d = dims_arg(dims)?;
        let t = guarded(|| self.inner.permute(&d))?;
        wrap(py, t)
    }
    /// Insert a size-1 dimension.
    fn unsqueeze(&self, py: Python<'_>, dim: Int) -> PyResult<Py<PyTensor>> {
        let dim = dim.0;
        let t = guarded(|| self.inner.unsqueeze(dim))?;
        wrap(py, t)
    }
    /// Remove size-1 dimensions.
    #[pyo3(signature = (dim=None))]
    fn squeeze(&self, py: Python<'_>, dim: Option<Int>) -> PyResult<Py<PyTensor>> {
        let dim = dim.map(|v| v.0);
        let t = guarded(|| self.inner.squeeze(dim))?;
        wrap(py, t)
    }
    /// Broadcast to a shape without copying (-1 keeps a size).
    #[pyo3(signature = (*sizes))]
    fn expand(&self, py: Python<'_>, sizes: &Bound<'_, PyTuple>) -> PyResult<Py<PyTensor>> {
        let s = dims_arg(sizes)?;
        let t = guarded(|| self.inner.expand_i(&s))?;
        wrap(py, t)
    }
    /// Flatten dims `start_dim..=end_dim`.
    #[pyo3(signature = (start_dim = Int(0), end_dim = Int(-1)), text_signature = "($self, start_dim=0, end_dim=-1)")]
    fn flatten(&self, py: Python<'_>, start_dim: Int, end_dim: Int) -> PyResult<Py<PyTensor>> {
        let start_dim = start_dim.0;
        let end_dim = end_dim.0;
        let t = guarded(|| self.inner.flatten(start_dim, end_dim))?;
        wrap(py, t)
    }
    /// Elements `start..stop` by `step` along `dim` (a view).
    #[pyo3(signature = (dim, start, stop, step))]
    fn _slice(
        &self,
        py: Python<'_>,
        dim: Int,
        start: Option<Int>,
        stop: Option<Int>,
        step: Int,
    ) -> PyResult<Py<PyTensor>> {
        let dim = dim.0;
        let start = start.map(|v| v.0);
        let stop = stop.map(|v| v.0);
        let step = step.0;
        let t = guarded(|| self.inner.slice(dim, start, stop, step))?;
        wrap(py, t)
    }
    /// The sub-tensor at `index` along `dim` (a view).
    fn select(&self, py: Python<'_>, dim: Int, index: Int) -> PyResult<Py<PyTensor>> {
        let dim = dim.0;
        let index = index.0;
        let t = guarded(|| self.inner.select(dim, index))?;
        wrap(py, t)
    }
    /// `length` elements from `start` along `dim` (a view).
    fn narrow(&self, py: Python<'_>, dim: Int, start: Int, length: Int) -> PyResult<Py<PyTensor>> {
        let dim = dim.0;
        let start = start.0;
        let length = length.0;
        // torch rejects a 0-dim tensor before looking at the length; the crate op says so.
        let length = if self.inner.dim() == 0 {
            0
        } else {
            args::non_negative(length, || "narrow(): length must be non-negative.".into())?
        };
        let t = guarded(|| self.inner.narrow(dim, start, length))?;
        wrap(py, t)
    }
    /// Fill with `value` in place.
    fn fill_(slf: &Bound<'_, Self>, value: f64) -> PyResult<Py<PyTensor>> {
        guarded(|| slf.get().inner.fill_(value))?;
        Ok(slf.clone().unbind())
    }
    /// Fill with zeros in place.
    fn zero_(slf: &Bound<'_, Self>) -> PyResult<Py<PyTensor>> {
        guarded(|| slf.get().inner.zero_())?;
        Ok(slf.clone().unbind())
    }
    /// Copy `src` into this tensor in place (broadcast, converted).
    fn copy_(slf: &Bound<'_, Self>, src: &Bound<'_, PyAny>) -> PyResult<Py<PyTensor>> {
        let s = operand(src)?;
        guarded(|| slf.get().inner.copy_(&s))?;
        Ok(slf.clone().unbind())
    }
    /// `cond ? self : other` elementwise.
    fn _where(
        &self,
        py: Python<'_>,
        cond: &Bound<'_, PyAny>,
        other: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyTensor>> {
        let c = operand(cond)?;
        let o = operand(other)?;
        let t = guarded(|| Tensor::where_cond(&c, &self.inner, &o))?;
        wrap(py, t)
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
        Ok(guarded(|| self.inner.item_f64())? != 0.0)
    }
    fn __float__(&self) -> PyResult<f64> {
        guarded(|| self.inner.item_f64())
    }
    fn __int__(&self) -> PyResult<i64> {
        Ok(guarded(|| self.inner.item_f64())? as i64)
    }
    fn __index__(&self) -> PyResult<i64> {
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
}

/// A short name for a hook in messages (`<lambda>`, the function's `__name__`).
fn hook_name(hook: &Bound<'_, PyAny>) -> String {
    hook.getattr("__name__")
        .and_then(|n| n.extract::<String>())
        .unwrap_or_else(|_| "hook".into())
}

/// A tensor hook that calls a Python callable, with torch's checks on what it returns.
pub(crate) fn python_hook(hook: Py<PyAny>, name: String) -> TensorHook {
    Arc::new(move |g: &Tensor| {
        Python::attach(|py| {
            let arg = wrap(py, g.clone()).map_err(from_py)?;
            let r = hook.call1(py, (arg,)).map_err(from_py)?;
            let r = r.bind(py);
            if r.is_none() {
                return Ok(None);
            }
            let Ok(t) = r.cast::<PyTensor>() else {
                let tn = r
                    .get_type()
                    .name()
                    .map(|n| n.to_string())
                    .unwrap_or_default();
                return Err(Error::type_error(format!(
                    "expected Variable, but hook returned '{tn}'"
                )));
            };
            let t = t.get().inner.clone();
            if t.shape() != g.shape() {
                return Err(Error::runtime(format!(
                    "hook '{name}' has changed the size of value"
                )));
            }
            if t.dtype() != g.dtype() {
                return Err(Error::runtime(format!(
                    "hook '{name}' has changed the type of value (was ferrograd.{} got ferrograd.{})",
                    g.dtype().legacy_name(),
                    t.dtype().legacy_name()
                )));
            }
            Ok(Some(t))
        })
    })
}
