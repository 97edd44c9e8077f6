//! Bindings of `crate::ops::pointwise`: `lerp`, `addcmul`, `addcdiv` and the closeness tests.

use pyo3::prelude::*;

use crate::python::bind::{tensor_methods, Operand};
use crate::python::errors::guarded;
use crate::python::tensor::{tensor_of, PyTensor};

tensor_methods! {
    /// `self + weight * (end - self)`; `weight` a number or a tensor.
    fn lerp(x, end: &Bound<'_, PyAny>, weight: Operand<'_>) => x.lerp(&end, &weight);

    /// `self + value * tensor1 * tensor2`.
    #[pyo3(signature = (tensor1, tensor2, *, value=1.0))]
    fn addcmul(x, tensor1: &Bound<'_, PyAny>, tensor2: &Bound<'_, PyAny>, value: f64) =>
        x.addcmul(&tensor1, &tensor2, value);

    /// `self + value * tensor1 / tensor2`.
    #[pyo3(signature = (tensor1, tensor2, *, value=1.0))]
    fn addcdiv(x, tensor1: &Bound<'_, PyAny>, tensor2: &Bound<'_, PyAny>, value: f64) =>
        x.addcdiv(&tensor1, &tensor2, value);

    /// `sqrt(self² + other²)` elementwise.
    fn hypot(x, other: &Bound<'_, PyAny>) => x.hypot(&other);

    /// `log(exp(self) + exp(other))` elementwise.
    fn logaddexp(x, other: &Bound<'_, PyAny>) => x.logaddexp(&other);

    /// Elementwise `|self - other| <= atol + rtol * |other|` (bool).
    #[pyo3(signature = (other, rtol=1e-05, atol=1e-08, equal_nan=false))]
    fn isclose(x, other: &Bound<'_, PyAny>, rtol: f64, atol: f64, equal_nan: bool) =>
        x.isclose(&other, rtol, atol, equal_nan);
}

#[pymethods]
impl PyTensor {
    /// Whether every element is close to `other`'s (see `isclose`).
    #[pyo3(signature = (other, rtol=1e-05, atol=1e-08, equal_nan=false))]
    fn allclose(
        &self,
        other: &Bound<'_, PyAny>,
        rtol: f64,
        atol: f64,
        equal_nan: bool,
    ) -> PyResult<bool> {
        let o = tensor_of(other, "other")?;
        guarded(|| self.inner.allclose(&o, rtol, atol, equal_nan))
    }

    /// Whether `other` has this shape and equal elements.
    fn equal(&self, other: &Bound<'_, PyAny>) -> PyResult<bool> {
        let o = tensor_of(other, "other")?;
        guarded(|| self.inner.equal(&o))
    }
}
