//! Bindings of `crate::ops::convert`: dtype conversion (`to`, `float`, `type_as`, ...),
//! `clone` and `contiguous`.

use pyo3::exceptions::{PyNotImplementedError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

use crate::python::bind::tensor_methods;
use crate::python::errors::guarded;
use crate::python::tensor::{wrap, PyTensor};
use crate::python::{dtype_object, PyDType};
use crate::tensor::{DType, Tensor};

tensor_methods! {
    /// Convert to `dtype` (a copy unless it already has it).
    fn _to_dtype(x, dtype: &PyDType) => x.to_dtype(dtype);

    /// A copy in new memory that keeps the graph.
    fn clone(x) => x.clone_tensor();
}

/// `self.to(dtype)` methods without arguments, `name => DType` each.
macro_rules! cast_methods {
    ($($name:ident => $dtype:ident, $doc:literal;)*) => {
        #[pymethods]
        impl PyTensor {
            $(
                #[doc = $doc]
                fn $name(slf: &Bound<'_, Self>) -> PyResult<Py<PyTensor>> {
                    to_dtype(slf, DType::$dtype, false)
                }
            )*
        }
    };
}

cast_methods! {
    float => Float32, "`self.to(float32)`.";
    double => Float64, "`self.to(float64)`.";
    long => Int64, "`self.to(int64)`.";
    int => Int32, "`self.to(int32)`.";
    short => Int16, "`self.to(int16)`.";
    char => Int8, "`self.to(int8)`.";
    byte => UInt8, "`self.to(uint8)`.";
    half => Float16, "`self.to(float16)`.";
    bfloat16 => BFloat16, "`self.to(bfloat16)`.";
    bool => Bool, "`self.to(bool)`.";
}

/// `slf` converted to `dtype`: itself when it has it already (a copy when `copy`).
fn to_dtype(slf: &Bound<'_, PyTensor>, dtype: DType, copy: bool) -> PyResult<Py<PyTensor>> {
    let t = &slf.get().inner;
    if t.dtype() == dtype {
        if copy {
            return wrap(slf.py(), guarded(|| t.clone_tensor())?);
        }
        return Ok(slf.clone().unbind());
    }
    wrap(slf.py(), guarded(|| t.to_dtype(dtype))?)
}

#[pymethods]
impl PyTensor {
    /// Row-major (itself when already so).
    fn contiguous(slf: &Bound<'_, Self>) -> PyResult<Py<PyTensor>> {
        if slf.get().inner.is_contiguous() {
            return Ok(slf.clone().unbind());
        }
        let t = guarded(|| slf.get().inner.contiguous())?;
        wrap(slf.py(), t)
    }

    /// Convert to a dtype (given, or another tensor's); a device must be the CPU.
    /// `to(dtype)`, `to(device, dtype)`, `to(other)`, with `non_blocking` and `copy` keywords.
    #[pyo3(signature = (*args, **kwargs))]
    fn to(
        slf: &Bound<'_, Self>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyTensor>> {
        let py = slf.py();
        let mut dtype: Option<Bound<'_, PyAny>> = None;
        let mut copy = false;
        // "cpu" or "meta" when a device is named (others raise).
        let mut target: Option<String> = None;
        if let Some(kw) = kwargs {
            let kw = kw.copy()?;
            dtype = pop(&kw, "dtype")?.filter(|d| !d.is_none());
            let device = pop(&kw, "device")?;
            target = TARGET.get(py)?.call1((device,))?.extract()?;
            pop(&kw, "non_blocking")?;
            copy = match pop(&kw, "copy")? {
                Some(c) => c.is_truthy()?,
                None => false,
            };
            if !kw.is_empty() {
                let keys = PyList::new(py, kw.keys())?;
                keys.sort()?;
                return Err(PyTypeError::new_err(format!(
                    "to() got unexpected keyword arguments {}",
                    keys.repr()?
                )));
            }
        }
        for a in args.iter() {
            if let Ok(d) = a.cast::<PyDType>() {
                dtype = Some(d.clone().into_any());
            } else if let Ok(t) = a.cast::<PyTensor>() {
                dtype = Some(
                    dtype_object(py, t.get().inner.dtype())?
                        .into_bound(py)
                        .into_any(),
                );
            } else if a.is_instance_of::<PyString>() || a.is_instance(DEVICE.get(py)?)? {
                target = TARGET.get(py)?.call1((&a,))?.extract()?;
            } else {
                return Err(PyTypeError::new_err(format!(
                    "to() received an invalid combination of arguments: {}",
                    a.repr()?
                )));
            }
        }
        let t = &slf.get().inner;
        // A meta tensor stays meta unless a device is named.
        if target.is_none() && t.is_meta() {
            target = Some("meta".into());
        }
        match target.as_deref() {
            Some("meta") => {
                let d = match &dtype {
                    Some(d) => d.cast::<PyDType>()?.get().d,
                    None => t.dtype(),
                };
                return wrap(py, Tensor::new_meta(t.shape(), d));
            }
            Some(_) if t.is_meta() => {
                return Err(PyNotImplementedError::new_err(
                    "Cannot copy out of meta tensor; no data!",
                ))
            }
            _ => {}
        }
        let Some(dtype) = dtype else {
            return to_same(slf, copy);
        };
        match dtype.cast::<PyDType>() {
            Ok(d) => to_dtype(slf, d.get().d, copy),
            Err(_) if dtype.eq(dtype_object(py, slf.get().inner.dtype())?)? => to_same(slf, copy),
            Err(_) => Err(PyTypeError::new_err(format!(
                "dtype must be a ferrograd.dtype, not {}",
                dtype.get_type().name()?
            ))),
        }
    }

    /// `self.to(other.dtype)`.
    fn type_as(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyTensor>> {
        let dtype = other.getattr("dtype")?;
        match dtype.cast::<PyDType>() {
            Ok(d) => to_dtype(slf, d.get().d, false),
            Err(_) => PyTensor::to(slf, &PyTuple::new(slf.py(), [dtype])?, None),
        }
    }
}

static DEVICE: crate::python::tensor::PyItem =
    crate::python::tensor::PyItem::new("ferrograd._device", "device");
static TARGET: crate::python::tensor::PyItem =
    crate::python::tensor::PyItem::new("ferrograd._device", "device_target");

/// `self` or, with `copy`, a clone.
fn to_same(slf: &Bound<'_, PyTensor>, copy: bool) -> PyResult<Py<PyTensor>> {
    let t = &slf.get().inner;
    to_dtype(slf, t.dtype(), copy)
}

/// `dict.pop(key, None)`.
fn pop<'py>(d: &Bound<'py, PyDict>, key: &str) -> PyResult<Option<Bound<'py, PyAny>>> {
    let v = d.get_item(key)?;
    if v.is_some() {
        d.del_item(key)?;
    }
    Ok(v)
}
