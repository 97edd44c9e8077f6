//! Bindings of `crate::ops::unary`: elementwise functions of one tensor, rounding, clamping.

use pyo3::prelude::*;

use crate::python::args::Int;
use crate::python::bind::{tensor_methods, unary_methods};
use crate::python::tensor::{operand, wrap, PyTensor};

unary_methods!(
    exp => "e^x elementwise.",
    log => "Natural logarithm elementwise.",
    sin => "Sine elementwise.",
    cos => "Cosine elementwise.",
    tanh => "Hyperbolic tangent elementwise.",
    sigmoid => "Logistic sigmoid elementwise.",
    relu => "max(x, 0) elementwise.",
    sqrt => "Square root elementwise.",
    abs => "Absolute value elementwise.",
    neg => "Negation elementwise.",
    sign => "Sign (-1, 0, 1) elementwise.",
    exp2 => "2^x elementwise.",
    log2 => "Base-2 logarithm elementwise.",
    log10 => "Base-10 logarithm elementwise.",
    log1p => "ln(1 + x) elementwise.",
    expm1 => "e^x - 1 elementwise.",
    rsqrt => "1 / sqrt(x) elementwise.",
    reciprocal => "1 / x elementwise.",
    tan => "Tangent elementwise.",
    asin => "Arcsine elementwise.",
    acos => "Arccosine elementwise.",
    atan => "Arctangent elementwise.",
    sinh => "Hyperbolic sine elementwise.",
    cosh => "Hyperbolic cosine elementwise.",
    asinh => "Inverse hyperbolic sine elementwise.",
    acosh => "Inverse hyperbolic cosine elementwise.",
    atanh => "Inverse hyperbolic tangent elementwise.",
    erf => "Error function elementwise.",
    erfc => "Complementary error function elementwise.",
    floor => "Round down elementwise (zero gradient).",
    ceil => "Round up elementwise (zero gradient).",
    trunc => "Round towards zero elementwise (zero gradient).",
    isnan => "Elementwise NaN test (bool).",
    isinf => "Elementwise infinity test (bool).",
    isfinite => "Elementwise finiteness test (bool).",
    logical_not => "Elementwise logical not (bool).",
    bitwise_not => "Bitwise not (bool or integer tensors).",
);

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
    /// `self * self`.
    fn square(x) heavy => x.mul(x);
}
