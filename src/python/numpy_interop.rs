//! NumPy without copies where the layout allows: `from_numpy` and `Tensor.numpy()` share memory.

use numpy::{PyArray, PyArrayDyn, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

use super::errors::IntoPyResult;
use crate::tensor::storage::Element;
use crate::tensor::{DType, Layout, Storage, Tensor};
use std::sync::Arc;

/// Keeps a tensor's storage alive while a NumPy array views it.
#[pyclass(module = "ferrograd._C", frozen)]
pub struct StorageOwner {
    _storage: Arc<Storage>,
}

/// A NumPy array sharing `t`'s memory.
pub(crate) fn to_numpy<'py>(py: Python<'py>, t: &Tensor) -> PyResult<Bound<'py, PyAny>> {
    fn typed<'py, T: Element + numpy::Element>(
        py: Python<'py>,
        t: &Tensor,
    ) -> PyResult<Bound<'py, PyAny>> {
        let owner = Bound::new(
            py,
            StorageOwner {
                _storage: t.storage().clone(),
            },
        )?;
        let guard = t.storage().read();
        let data = T::data(&guard).ok_or_else(|| PyTypeError::new_err("dtype mismatch"))?;
        let view = t.layout().view(data.as_slice()).py()?;
        // SAFETY: the storage buffer is never reallocated and `owner` keeps it alive for as long
        // as the array exists. Writes through NumPy bypass the lock, as they bypass torch's.
        let arr = unsafe { PyArray::borrow_from_array(&view, owner.into_any()) };
        Ok(arr.into_any())
    }
    match t.dtype() {
        // NumPy has no bfloat16 (torch refuses the same way).
        DType::BFloat16 => Err(PyTypeError::new_err("Got unsupported ScalarType BFloat16")),
        d => crate::tensor::storage::with_dtype!(d, T => typed::<T>(py, t)),
    }
}

fn shared<T: Element + numpy::Element>(arr: &Bound<'_, PyArrayDyn<T>>) -> PyResult<Tensor> {
    let itemsize = std::mem::size_of::<T>() as isize;
    let shape: Vec<usize> = arr.shape().to_vec();
    let mut strides = Vec::with_capacity(shape.len());
    for &s in arr.strides() {
        if s < 0 {
            return Err(PyValueError::new_err("At least one stride in the given numpy array is negative, and tensors with negative strides are not currently supported. (You can probably work around this by making a copy of your array  with array.copy().) "));
        }
        if s % itemsize != 0 {
            return Err(PyValueError::new_err("given numpy array strides not a multiple of the element byte size. Copy the numpy array to reallocate the memory."));
        }
        strides.push((s / itemsize) as usize);
    }
    let ptr = arr.data();
    if !(ptr as usize).is_multiple_of(std::mem::align_of::<T>()) {
        return Err(PyValueError::new_err(
            "the numpy array is not aligned for its dtype; copy it first",
        ));
    }
    let numel: usize = shape.iter().product();
    let span = if numel == 0 {
        0
    } else {
        1 + shape
            .iter()
            .zip(&strides)
            .map(|(&d, &s)| (d - 1) * s)
            .sum::<usize>()
    };
    let keep: Py<PyAny> = arr.clone().into_any().unbind();
    // SAFETY: `ptr` addresses `span` elements of the array's buffer, kept alive by `keep`.
    let storage = unsafe { Storage::from_foreign(ptr, span, Box::new(keep)) };
    Ok(Tensor::from_parts(
        Arc::new(storage),
        Layout {
            shape: shape.into(),
            strides: strides.into(),
            offset: 0,
        },
        T::DTYPE,
    ))
}

fn copied<T: Element + numpy::Element>(arr: &Bound<'_, PyArrayDyn<T>>) -> PyResult<Tensor> {
    let a = arr.readonly();
    Ok(Tensor::from_array(a.as_array().to_owned()))
}

/// A tensor from a NumPy array of a supported dtype, sharing memory or copying.
pub(crate) fn from_numpy(arr: &Bound<'_, PyAny>, share: bool) -> PyResult<Tensor> {
    macro_rules! try_type {
        ($t:ty) => {
            if let Ok(a) = arr.cast::<PyArrayDyn<$t>>() {
                return if share {
                    shared::<$t>(a)
                } else {
                    copied::<$t>(a)
                };
            }
        };
    }
    try_type!(f32);
    try_type!(f64);
    try_type!(i64);
    try_type!(bool);
    try_type!(i32);
    try_type!(i16);
    try_type!(i8);
    try_type!(u8);
    try_type!(crate::tensor::f16);
    let dt = arr
        .getattr("dtype")
        .map(|d| d.to_string())
        .unwrap_or_default();
    Err(PyTypeError::new_err(format!(
        "can't convert np.ndarray of type numpy.{dt}. The only supported types are: float64, float32, float16, int64, int32, int16, int8, uint8, and bool."
    )))
}
