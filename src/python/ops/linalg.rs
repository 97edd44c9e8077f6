//! Bindings of `crate::ops::linalg`: traces, diagonals, triangles and `einsum`.

use pyo3::prelude::*;

use crate::python::args::Int;
use crate::python::bind::tensor_methods;
use crate::python::errors::guarded;
use crate::python::tensor::{wrap, PyTensor};
use crate::tensor::Tensor;

tensor_methods! {
    /// Sum of the main diagonal.
    fn trace(x) => x.trace();

    /// Vector → diagonal matrix; matrix → diagonal.
    #[pyo3(signature = (diagonal = Int(0)), text_signature = "($self, diagonal=0)")]
    fn diag(x, diagonal: Int) => x.diag(diagonal);

    /// A diagonal as the last dim (a view).
    #[pyo3(signature = (offset = Int(0), dim1 = Int(0), dim2 = Int(1)), text_signature = "($self, offset=0, dim1=0, dim2=1)")]
    fn diagonal(x, offset: Int, dim1: Int, dim2: Int) => x.diagonal(offset, dim1, dim2);

    /// Lower triangle.
    #[pyo3(signature = (diagonal = Int(0)), text_signature = "($self, diagonal=0)")]
    fn tril(x, diagonal: Int) => x.tril(diagonal);

    /// Upper triangle.
    #[pyo3(signature = (diagonal = Int(0)), text_signature = "($self, diagonal=0)")]
    fn triu(x, diagonal: Int) => x.triu(diagonal);
}

/// Einstein summation.
#[pyfunction]
fn _einsum(py: Python<'_>, equation: &str, operands: &Bound<'_, PyAny>) -> PyResult<Py<PyTensor>> {
    let ts = crate::python::tensors(operands, "einsum(): operands")?;
    let t = guarded(|| Tensor::einsum(equation, &ts))?;
    wrap(py, t)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_einsum, m)?)?;
    Ok(())
}
