//! Binding of `crate::ops::nn::linear`, the GIL released while the products run.

use pyo3::prelude::*;

use super::errors::detached;
use super::tensor::{tensor_of, wrap, PyTensor};
use crate::ops::nn::linear;

/// `input @ weight.T + bias` as one node.
#[pyfunction]
#[pyo3(signature = (input, weight, bias=None))]
fn _nn_linear(
    py: Python<'_>,
    input: &Bound<'_, PyAny>,
    weight: &Bound<'_, PyAny>,
    bias: Option<&Bound<'_, PyAny>>,
) -> PyResult<Py<PyTensor>> {
    let (x, w) = (tensor_of(input, "input")?, tensor_of(weight, "weight")?);
    let b = bias.map(|b| tensor_of(b, "bias")).transpose()?;
    wrap(
        py,
        detached(py, move || linear::linear(&x, &w, b.as_ref()))?,
    )
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_nn_linear, m)?)
}
