//! Bindings of the matrix products (`crate::ops::matmul`): `matmul` with torch's broadcasting,
//! the strict `mm`/`bmm`, `dot`, `mv` and `outer`.

use pyo3::prelude::*;

use crate::python::bind::tensor_methods;
use crate::python::errors::detached;
use crate::python::tensor::{operand, wrap, PyTensor};

tensor_methods! {
    /// Matrix product with torch's broadcasting rules.
    fn matmul(x, other: &Bound<'_, PyAny>) detached => x.matmul(&other);

    /// Strict 2-D matrix product.
    fn mm(x, mat2: &Bound<'_, PyAny>) => x.mm(&mat2);

    /// Strict 3-D batched matrix product.
    fn bmm(x, mat2: &Bound<'_, PyAny>) => x.bmm(&mat2);

    /// Inner product of two 1-D tensors.
    fn dot(x, other: &Bound<'_, PyAny>) => x.dot(&other);

    /// Matrix-vector product.
    fn mv(x, vec: &Bound<'_, PyAny>) => x.mv(&vec);

    /// Outer product of two vectors.
    fn outer(x, vec2: &Bound<'_, PyAny>) => x.outer(&vec2);
}

#[pymethods]
impl PyTensor {
    fn __matmul__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyTensor>> {
        self.matmul(py, other)
    }
    fn __rmatmul__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyTensor>> {
        let o = operand(other)?;
        let a = self.inner.clone();
        let t = detached(py, move || o.matmul(&a))?;
        wrap(py, t)
    }
}
