//! Integer arguments from Python. Bindings take user-supplied counts and sizes as `i64` and
//! convert them here, so a negative value raises torch's message instead of PyO3's
//! `OverflowError: can't convert negative int to unsigned`.

use pyo3::exceptions::{PyOverflowError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;

/// `value` as a `usize`, or `RuntimeError(message())` when it is negative.
pub(crate) fn non_negative(value: i64, message: impl FnOnce() -> String) -> PyResult<usize> {
    usize::try_from(value).map_err(|_| PyRuntimeError::new_err(message()))
}

/// A tensor shape given by the user, with torch's message for a negative dimension
/// (`Trying to create tensor with negative dimension -1: [-1, 2]`).
pub(crate) fn shape(dims: &[i64]) -> PyResult<Vec<usize>> {
    dims.iter()
        .map(|&d| {
            non_negative(d, || {
                format!("Trying to create tensor with negative dimension {d}: {dims:?}")
            })
        })
        .collect()
}

/// A random seed as torch reads it: any int in `[-2**63, 2**64)`, negative ones taken as their
/// two's complement (so `-1` and `2**64 - 1` are the same seed); beyond that torch's
/// `RuntimeError: Overflow when unpacking long`. Non-ints keep PyO3's `TypeError`.
pub(crate) fn seed(obj: &Bound<'_, PyAny>) -> PyResult<u64> {
    let py = obj.py();
    let overflow = |e: &PyErr| e.is_instance_of::<PyOverflowError>(py);
    match obj.extract::<u64>() {
        Ok(v) => Ok(v),
        Err(e) if overflow(&e) => match obj.extract::<i64>() {
            Ok(v) => Ok(v as u64),
            Err(e) if overflow(&e) => Err(PyRuntimeError::new_err("Overflow when unpacking long")),
            Err(e) => Err(e),
        },
        Err(e) => Err(e),
    }
}

/// torch's error for a Python int outside int64 where an int64 is expected.
fn overflow_error() -> PyErr {
    PyValueError::new_err(
        "Overflow when unpacking long long: expected an integer in [-2**63, 2**63)",
    )
}

/// `err` with PyO3's `OverflowError` for an int beyond int64 replaced by torch's `ValueError`.
pub(crate) fn int_error(py: Python<'_>, err: PyErr) -> PyErr {
    if err.is_instance_of::<PyOverflowError>(py) {
        overflow_error()
    } else {
        err
    }
}

/// A Python int argument as `i64`: beyond int64 it is torch's `ValueError` (`Overflow when
/// unpacking long long`) instead of PyO3's `OverflowError`.
#[derive(Clone, Copy)]
pub(crate) struct Int(pub i64);

impl<'a, 'py> FromPyObject<'a, 'py> for Int {
    type Error = PyErr;
    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        obj.extract::<i64>()
            .map(Int)
            .map_err(|e| int_error(obj.py(), e))
    }
}

/// A sequence of Python ints as `Vec<i64>`, with [`Int`]'s error for one beyond int64.
pub(crate) struct Ints(pub Vec<i64>);

impl<'a, 'py> FromPyObject<'a, 'py> for Ints {
    type Error = PyErr;
    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        obj.extract::<Vec<i64>>()
            .map(Ints)
            .map_err(|e| int_error(obj.py(), e))
    }
}
