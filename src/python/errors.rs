//! The one place Rust errors become Python exceptions (and Python exceptions raised inside
//! callbacks travel through the engine unchanged).

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use pyo3::exceptions::{
    PyIndexError, PyNotImplementedError, PyRuntimeError, PyTypeError, PyValueError,
};
use pyo3::prelude::*;

use crate::error::{Error, ErrorKind};

/// A Python exception raised by user code that the engine called.
pub(crate) struct PyCallbackError(pub PyErr);

/// Wrap a Python exception so it can cross the engine.
pub(crate) fn from_py(e: PyErr) -> Error {
    let msg = e.to_string();
    Error::External(Arc::new(PyCallbackError(e)), msg)
}

/// Map a ferrograd error to the Python exception a torch user expects.
pub(crate) fn to_py(e: Error) -> PyErr {
    match e {
        Error::External(payload, msg) => {
            match (payload.as_ref() as &dyn std::any::Any).downcast_ref::<PyCallbackError>() {
                Some(p) => Python::attach(|py| p.0.clone_ref(py)),
                None => PyRuntimeError::new_err(msg),
            }
        }
        Error::Msg(kind, msg) => match kind {
            ErrorKind::Type => PyTypeError::new_err(msg),
            ErrorKind::Value => PyValueError::new_err(msg),
            ErrorKind::Index => PyIndexError::new_err(msg),
            ErrorKind::NotImplemented => PyNotImplementedError::new_err(msg),
            ErrorKind::Runtime => PyRuntimeError::new_err(msg),
        },
    }
}

/// `.py()` turns a ferrograd result into a Python one.
pub(crate) trait IntoPyResult<T> {
    fn py(self) -> PyResult<T>;
}

impl<T> IntoPyResult<T> for crate::error::Result<T> {
    fn py(self) -> PyResult<T> {
        self.map_err(to_py)
    }
}

/// The RuntimeError a caught panic becomes: an op without a batching rule meeting a tensor
/// inside vmap says so; anything else is a bug of ours.
fn panic_error(p: Box<dyn std::any::Any + Send>) -> PyErr {
    let msg = panic_message(p);
    if msg == crate::tensor::batched::NO_RULE_MESSAGE {
        PyRuntimeError::new_err(msg)
    } else if msg == crate::tensor::storage::META_MESSAGE {
        pyo3::exceptions::PyNotImplementedError::new_err(msg)
    } else {
        PyRuntimeError::new_err(format!("internal error in ferrograd: {msg}"))
    }
}

fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_string()
    }
}

/// Run `f` with the GIL released, turning a panic into `RuntimeError` instead of letting it
/// reach Python as `PanicException` (a `BaseException`).
pub(crate) fn detached<T: Send>(
    py: Python<'_>,
    f: impl FnOnce() -> crate::error::Result<T> + Send,
) -> PyResult<T> {
    match py.detach(|| std::panic::catch_unwind(AssertUnwindSafe(f))) {
        Ok(r) => r.py(),
        Err(p) => Err(panic_error(p)),
    }
}

/// Run `f` (holding the GIL), turning a panic into `RuntimeError`.
pub(crate) fn guarded<T>(f: impl FnOnce() -> crate::error::Result<T>) -> PyResult<T> {
    match std::panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r.py(),
        Err(p) => Err(panic_error(p)),
    }
}
