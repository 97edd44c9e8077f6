//! Bindings of `crate::ops::nn::sparse`: `embedding`, `embedding_bag`, `one_hot`.

use pyo3::prelude::*;

use crate::ops::nn::sparse;
use crate::python::bind::tensor_functions;
use crate::python::errors::detached;
use crate::python::tensor::{tensor_of, wrap, PyTensor};

tensor_functions! {
    register_generated;

    /// Rows of `weight` at `indices` (`padding_idx` already wrapped, or None).
    #[pyo3(signature = (weight, indices, padding_idx, scale_grad_by_freq))]
    fn _nn_embedding(
        weight: &Bound<'_, PyAny>,
        indices: &Bound<'_, PyAny>,
        padding_idx: Option<usize>,
        scale_grad_by_freq: bool,
    ) => sparse::embedding(&weight, &indices, padding_idx, scale_grad_by_freq);

    /// One-hot int64 encoding (`num_classes` -1: max + 1).
    fn _nn_one_hot(tensor: &Bound<'_, PyAny>, num_classes: i64) => sparse::one_hot(&tensor, num_classes);
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
    m.add_function(wrap_pyfunction!(_nn_embedding_bag, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_embedding_renorm_, m)?)?;
    register_generated(m)
}
