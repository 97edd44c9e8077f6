//! Bindings of `crate::ops::unary`: elementwise functions of one tensor, rounding, clamping.

use pyo3::prelude::*;

use crate::python::args::Int;
use crate::python::bind::{tensor_methods, unary_functions, unary_methods, Operand};
use crate::python::tensor::{operand, wrap, PyTensor};

// One Tensor method and one `ferrograd._C` function per row of the op registry
// (src/ops/registry.rs).
crate::ferrograd_unary_ops!(unary_methods);
crate::ferrograd_unary_ops!(unary_functions);

/// The op registry's rows, for the Python op table: `name`, `family`, `doc`, `domain`, `grad`.
#[pyfunction]
fn _registry(py: Python<'_>) -> PyResult<Vec<Bound<'_, pyo3::types::PyDict>>> {
    crate::ops::registry::UNARY
        .iter()
        .map(|row| {
            let d = pyo3::types::PyDict::new(py);
            d.set_item("name", row.name)?;
            d.set_item("family", "unary")?;
            d.set_item("doc", row.doc)?;
            d.set_item("domain", row.domain.name())?;
            d.set_item("grad", row.grad.name())?;
            Ok(d)
        })
        .collect()
}

/// Register the registry's functions on `ferrograd._C`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_registry, m)?)?;
    register_functions(m)
}

tensor_methods! {
    /// Nearest integer (halves to even), or to `decimals` decimal places.
    #[pyo3(signature = (*, decimals = Int(0)), text_signature = "($self, *, decimals=0)")]
    fn round(x, decimals: Int) => x.round_decimals(decimals);

    /// Replace NaN, +inf and -inf with finite numbers.
    #[pyo3(signature = (nan=0.0, posinf=None, neginf=None))]
    fn nan_to_num(x, nan: f64, posinf: Option<f64>, neginf: Option<f64>) =>
        x.nan_to_num(nan, posinf, neginf);
}

#[pymethods]
impl PyTensor {
    /// Clamp into `[min, max]` (numbers or tensors; either may be None).
    #[pyo3(signature = (min=None, max=None))]
    fn clamp(
        &self,
        py: Python<'_>,
        min: Option<&Bound<'_, PyAny>>,
        max: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyTensor>> {
        let lo = min.filter(|m| !m.is_none()).map(operand).transpose()?;
        let hi = max.filter(|m| !m.is_none()).map(operand).transpose()?;
        let t = crate::python::errors::guarded(|| self.inner.clamp(lo.as_ref(), hi.as_ref()))?;
        wrap(py, t)
    }

    /// Alias of `clamp`.
    #[pyo3(signature = (min=None, max=None))]
    fn clip(
        &self,
        py: Python<'_>,
        min: Option<&Bound<'_, PyAny>>,
        max: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyTensor>> {
        self.clamp(py, min, max)
    }

    fn __invert__(&self, py: Python<'_>) -> PyResult<Py<PyTensor>> {
        self.bitwise_not(py)
    }

    fn __neg__(&self, py: Python<'_>) -> PyResult<Py<PyTensor>> {
        self.neg(py)
    }

    /// `abs(self)` elementwise.
    fn __abs__(&self, py: Python<'_>) -> PyResult<Py<PyTensor>> {
        self.abs(py)
    }

    /// `+self`: the tensor itself.
    fn __pos__(slf: &Bound<'_, Self>) -> Py<PyTensor> {
        slf.clone().unbind()
    }
}

tensor_methods! {
    /// `max(self, min)` elementwise (`min` a number or tensor).
    fn clamp_min(x, min: Operand<'_>) => x.clamp_min(&min);

    /// `min(self, max)` elementwise (`max` a number or tensor).
    fn clamp_max(x, max: Operand<'_>) => x.clamp_max(&max);

    /// `self * self`.
    fn square(x) heavy => x.mul(x);
}
