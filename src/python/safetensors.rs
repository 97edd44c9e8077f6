//! Bindings of `crate::safetensors`: `.safetensors` bytes and files to and from named tensors.

use std::collections::HashMap;

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::errors::detached;
use super::tensor::{tensor_of, wrap, PyTensor};
use crate::tensor::Tensor;

type Named = Vec<(String, Py<PyTensor>)>;

fn named(tensors: Vec<(String, Bound<'_, PyAny>)>) -> PyResult<Vec<(String, Tensor)>> {
    tensors
        .into_iter()
        .map(|(k, v)| Ok((k, tensor_of(&v, "tensor")?)))
        .collect()
}

fn wrap_all(py: Python<'_>, ts: Vec<(String, Tensor)>) -> PyResult<Named> {
    ts.into_iter().map(|(k, t)| Ok((k, wrap(py, t)?))).collect()
}

/// The `.safetensors` bytes of `(name, tensor)` pairs with optional header metadata.
#[pyfunction]
#[pyo3(signature = (tensors, metadata=None))]
fn _safetensors_save<'py>(
    py: Python<'py>,
    tensors: Vec<(String, Bound<'py, PyAny>)>,
    metadata: Option<HashMap<String, String>>,
) -> PyResult<Bound<'py, PyBytes>> {
    let ts = named(tensors)?;
    let bytes = detached(py, || crate::safetensors::save(&ts, metadata))?;
    Ok(PyBytes::new(py, &bytes))
}

/// Writes `(name, tensor)` pairs to the file `path`.
#[pyfunction]
#[pyo3(signature = (tensors, path, metadata=None))]
fn _safetensors_save_file(
    py: Python<'_>,
    tensors: Vec<(String, Bound<'_, PyAny>)>,
    path: std::path::PathBuf,
    metadata: Option<HashMap<String, String>>,
) -> PyResult<()> {
    let ts = named(tensors)?;
    detached(py, || crate::safetensors::save_file(&ts, metadata, &path))
}

/// The `(name, tensor)` pairs (in stored order) and the header metadata of `.safetensors` bytes.
#[pyfunction]
fn _safetensors_load(
    py: Python<'_>,
    data: &[u8],
) -> PyResult<(Named, Option<HashMap<String, String>>)> {
    let (ts, meta) = detached(py, || crate::safetensors::load(data))?;
    Ok((wrap_all(py, ts)?, meta))
}

/// Register the safetensors bindings on `ferrograd._C`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_safetensors_save, m)?)?;
    m.add_function(wrap_pyfunction!(_safetensors_save_file, m)?)?;
    m.add_function(wrap_pyfunction!(_safetensors_load, m)?)?;
    Ok(())
}
