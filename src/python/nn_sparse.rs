//! Bindings of `crate::ops::nn::sparse`: `embedding`.

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

/// Register the lookup bindings on `ferrograd._C`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_nn_embedding, m)?)?;
    Ok(())
}
