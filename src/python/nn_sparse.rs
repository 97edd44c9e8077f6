//! Bindings of `crate::ops::nn::sparse`: `embedding`, `embedding_bag`, `one_hot`.

use pyo3::prelude::*;

use super::errors::detached;
use super::tensor::{tensor_of, wrap, PyTensor};
use crate::ops::nn::sparse;

/// Rows of `weight` at `indices` (`padding_idx` already wrapped, or None).
#[pyfunction]
#[pyo3(signature = (weight, indices, padding_idx, scale_grad_by_freq))]
fn _nn_embedding(
    py: Python<'_>,
    weight: &Bound<'_, PyAny>,
    indices: &Bound<'_, PyAny>,
    padding_idx: Option<usize>,
    scale_grad_by_freq: bool,
) -> PyResult<Py<PyTensor>> {
    let (w, i) = (tensor_of(weight, "weight")?, tensor_of(indices, "indices")?);
    let out = detached(py, || {
        sparse::embedding(&w, &i, padding_idx, scale_grad_by_freq)
    })?;
    wrap(py, out)
}

/// Bags of rows of `weight` (`indices` 1-D, split at `offsets`; `mode` 0 sum, 1 mean, 2 max;
/// `padding_idx` already wrapped, or None).
#[pyfunction]
#[pyo3(signature = (weight, indices, offsets, mode, per_sample_weights, include_last_offset, padding_idx, scale_grad_by_freq))]
#[allow(clippy::too_many_arguments)]
fn _nn_embedding_bag(
    py: Python<'_>,
    weight: &Bound<'_, PyAny>,
    indices: &Bound<'_, PyAny>,
    offsets: &Bound<'_, PyAny>,
    mode: i64,
    per_sample_weights: Option<&Bound<'_, PyAny>>,
    include_last_offset: bool,
    padding_idx: Option<usize>,
    scale_grad_by_freq: bool,
) -> PyResult<Py<PyTensor>> {
    let (w, i, o) = (
        tensor_of(weight, "weight")?,
        tensor_of(indices, "indices")?,
        tensor_of(offsets, "offsets")?,
    );
    let p = per_sample_weights
        .map(|p| tensor_of(p, "per_sample_weights"))
        .transpose()?;
    let mode = match mode {
        0 => sparse::BagMode::Sum,
        1 => sparse::BagMode::Mean,
        2 => sparse::BagMode::Max,
        _ => {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "mode has to be one of sum, mean or max",
            ))
        }
    };
    let out = detached(py, || {
        sparse::embedding_bag(
            &w,
            &i,
            &o,
            mode,
            p.as_ref(),
            include_last_offset,
            padding_idx,
            scale_grad_by_freq,
        )
    })?;
    wrap(py, out)
}

/// One-hot int64 encoding (`num_classes` -1: max + 1).
#[pyfunction]
fn _nn_one_hot(
    py: Python<'_>,
    tensor: &Bound<'_, PyAny>,
    num_classes: i64,
) -> PyResult<Py<PyTensor>> {
    let t = tensor_of(tensor, "tensor")?;
    wrap(py, detached(py, || sparse::one_hot(&t, num_classes))?)
}

/// Rows of `weight` used by `indices` rescaled in place to at most `max_norm`.
#[pyfunction]
fn _nn_embedding_renorm_(
    py: Python<'_>,
    weight: &Bound<'_, PyAny>,
    indices: &Bound<'_, PyAny>,
    max_norm: f64,
    norm_type: f64,
) -> PyResult<()> {
    let (w, i) = (tensor_of(weight, "weight")?, tensor_of(indices, "indices")?);
    detached(py, || {
        sparse::embedding_renorm_(&w, &i, max_norm, norm_type)
    })
}

/// Register the lookup bindings on `ferrograd._C`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_nn_embedding, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_embedding_bag, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_one_hot, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_embedding_renorm_, m)?)?;
    Ok(())
}
