//! Bindings of `crate::ops::nn::{distance, prelu}`: `cosine_similarity`, `pairwise_distance`,
//! `normalize` and `prelu`, the GIL released while the kernels run.

use pyo3::prelude::*;

use super::errors::detached;
use super::tensor::{tensor_of, wrap, PyTensor};
use crate::ops::nn::{distance, prelu};

/// Cosine similarity of `x1` and `x2` (broadcast) along `dim`.
#[pyfunction]
#[pyo3(signature = (x1, x2, dim, eps))]
fn _nn_cosine_similarity(
    py: Python<'_>,
    x1: &Bound<'_, PyAny>,
    x2: &Bound<'_, PyAny>,
    dim: i64,
    eps: f64,
) -> PyResult<Py<PyTensor>> {
    let (a, b) = (tensor_of(x1, "x1")?, tensor_of(x2, "x2")?);
    wrap(
        py,
        detached(py, move || distance::cosine_similarity(&a, &b, dim, eps))?,
    )
}

/// The `p`-norm of `x1 - x2 + eps` over the last dim.
#[pyfunction]
#[pyo3(signature = (x1, x2, p, eps, keepdim))]
fn _nn_pairwise_distance(
    py: Python<'_>,
    x1: &Bound<'_, PyAny>,
    x2: &Bound<'_, PyAny>,
    p: f64,
    eps: f64,
    keepdim: bool,
) -> PyResult<Py<PyTensor>> {
    let (a, b) = (tensor_of(x1, "x1")?, tensor_of(x2, "x2")?);
    wrap(
        py,
        detached(py, move || {
            distance::pairwise_distance(&a, &b, p, eps, keepdim)
        })?,
    )
}

/// `x / max(‖x‖_p, eps)` along `dim`.
#[pyfunction]
#[pyo3(signature = (input, p, dim, eps))]
fn _nn_normalize(
    py: Python<'_>,
    input: &Bound<'_, PyAny>,
    p: f64,
    dim: i64,
    eps: f64,
) -> PyResult<Py<PyTensor>> {
    let x = tensor_of(input, "input")?;
    wrap(
        py,
        detached(py, move || distance::normalize(&x, p, dim, eps))?,
    )
}

/// PReLU with one slope or one per channel (dim 1).
#[pyfunction]
fn _nn_prelu(
    py: Python<'_>,
    input: &Bound<'_, PyAny>,
    weight: &Bound<'_, PyAny>,
) -> PyResult<Py<PyTensor>> {
    let (x, w) = (tensor_of(input, "input")?, tensor_of(weight, "weight")?);
    wrap(py, detached(py, move || prelu::prelu(&x, &w))?)
}

/// Register the distance bindings on `ferrograd._C`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_nn_cosine_similarity, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_pairwise_distance, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_normalize, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_prelu, m)?)?;
    Ok(())
}
