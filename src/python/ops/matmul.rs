//! Bindings of the matrix products (`crate::ops::matmul`): `matmul` with torch's broadcasting,
//! the strict `mm`/`bmm`, `dot`, `mv` and `outer`.

use pyo3::prelude::*;

use crate::python::autocast::lowered;
use crate::python::bind::tensor_methods;
use crate::python::errors::detached;
use crate::python::tensor::{operand, wrap, PyTensor};
tensor_methods! {
    /// Matrix product with torch's broadcasting rules.
    fn matmul(x, other: &Bound<'_, PyAny>) detached => {
        let [a, b] = lowered([x, &other])?;
        a.matmul(&b)
    };

    /// Strict 2-D matrix product.
    fn mm(x, mat2: &Bound<'_, PyAny>) => {
        let [a, b] = lowered([x, &mat2])?;
        a.mm(&b)
    };

    /// Strict 3-D batched matrix product.
    fn bmm(x, mat2: &Bound<'_, PyAny>) => {
        let [a, b] = lowered([x, &mat2])?;
        a.bmm(&b)
    };

    /// Inner product of two 1-D tensors.
    fn dot(x, other: &Bound<'_, PyAny>) => x.dot(&other);

    /// Matrix-vector product.
    fn mv(x, vec: &Bound<'_, PyAny>) => x.mv(&vec);

    /// Outer product of two vectors.
    fn outer(x, vec2: &Bound<'_, PyAny>) => x.outer(&vec2);

    /// `beta * self + alpha * (mat1 @ mat2)`.
    #[pyo3(signature = (mat1, mat2, *, beta=1.0, alpha=1.0))]
    fn addmm(x, mat1: &Bound<'_, PyAny>, mat2: &Bound<'_, PyAny>, beta: f64, alpha: f64) detached => {
        let [c, a, b] = lowered([x, &mat1, &mat2])?;
        c.addmm(&a, &b, beta, alpha)
    };

    /// `beta * self + alpha * (mat @ vec)`.
    #[pyo3(signature = (mat, vec, *, beta=1.0, alpha=1.0))]
    fn addmv(x, mat: &Bound<'_, PyAny>, vec: &Bound<'_, PyAny>, beta: f64, alpha: f64) =>
        x.addmv(&mat, &vec, beta, alpha);

    /// `beta * self + alpha * (batch1 @ batch2)` per batch.
    #[pyo3(signature = (batch1, batch2, *, beta=1.0, alpha=1.0))]
    fn baddbmm(x, batch1: &Bound<'_, PyAny>, batch2: &Bound<'_, PyAny>, beta: f64, alpha: f64) detached => {
        let [c, a, b] = lowered([x, &batch1, &batch2])?;
        c.baddbmm(&a, &b, beta, alpha)
    };

    /// `beta * self + alpha * sum_b(batch1[b] @ batch2[b])`.
    #[pyo3(signature = (batch1, batch2, *, beta=1.0, alpha=1.0))]
    fn addbmm(x, batch1: &Bound<'_, PyAny>, batch2: &Bound<'_, PyAny>, beta: f64, alpha: f64) detached => {
        let [c, a, b] = lowered([x, &batch1, &batch2])?;
        c.addbmm(&a, &b, beta, alpha)
    };

    /// The Kronecker product.
    fn kron(x, other: &Bound<'_, PyAny>) => x.kron(&other);
}

#[pymethods]
impl PyTensor {
    fn __matmul__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyTensor>> {
        self.matmul(py, other)
    }
    fn __rmatmul__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyTensor>> {
        let o = operand(other)?;
        let a = self.inner.clone();
        let t = detached(py, move || {
            let [o, a] = lowered([&o, &a])?;
            o.matmul(&a)
        })?;
        wrap(py, t)
    }
}
