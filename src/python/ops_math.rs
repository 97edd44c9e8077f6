//! Python bindings of the math ops: elementwise unary and binary functions, rounding division,
//! logical and bitwise operators, reductions, scans and softmax. Argument parsing only.

use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::prelude::*;

use crate::python::args::Int;
use pyo3::types::{PyBool, PyFloat, PyInt, PyString};

use super::errors::guarded;
use super::tensor::{binary_methods, dim_list, heavy, operand, unary_methods, wrap, PyTensor};
use super::PyDType;
use crate::ops::binary::{BitOp, RoundingMode};
use crate::tensor::Tensor;

unary_methods!(
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

binary_methods!(
    maximum => |a, b| a.maximum(b),
    minimum => |a, b| a.minimum(b),
    fmod => |a, b| a.fmod(b),
    remainder => |a, b| a.remainder(b),
    atan2 => |a, b| a.atan2(b),
    arctan2 => |a, b| a.atan2(b),
    logical_and => |a, b| a.logical_and(b),
    logical_or => |a, b| a.logical_or(b),
    logical_xor => |a, b| a.logical_xor(b),
    bitwise_and => |a, b| a.bitwise(b, BitOp::And),
    bitwise_or => |a, b| a.bitwise(b, BitOp::Or),
    bitwise_xor => |a, b| a.bitwise(b, BitOp::Xor),
    __and__ => |a, b| a.bitwise(b, BitOp::And),
    __rand__ => |a, b| b.bitwise(a, BitOp::And),
    __or__ => |a, b| a.bitwise(b, BitOp::Or),
    __ror__ => |a, b| b.bitwise(a, BitOp::Or),
    __xor__ => |a, b| a.bitwise(b, BitOp::Xor),
    __rxor__ => |a, b| b.bitwise(a, BitOp::Xor),
    __mod__ => |a, b| a.remainder(b),
    __rmod__ => |a, b| b.remainder(a),
    __floordiv__ => |a, b| a.div_mode(b, Some(RoundingMode::Floor)),
    __rfloordiv__ => |a, b| b.div_mode(a, Some(RoundingMode::Floor)),
);

/// `rounding_mode=None | "trunc" | "floor"` with torch's error otherwise.
fn rounding_mode(mode: Option<&str>) -> PyResult<Option<RoundingMode>> {
    match mode {
        None => Ok(None),
        Some("trunc") => Ok(Some(RoundingMode::Trunc)),
        Some("floor") => Ok(Some(RoundingMode::Floor)),
        Some(m) => Err(PyRuntimeError::new_err(format!(
            "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '{m}'"
        ))),
    }
}

/// `self` converted to `dtype` first when given (torch's `dtype=` on reductions).
fn with_dtype(t: &Tensor, dtype: Option<&PyDType>) -> PyResult<Tensor> {
    match dtype {
        Some(d) => guarded(|| t.to_dtype(d.d)),
        None => Ok(t.clone()),
    }
}

/// The `torch.return_types`-like named tuple `(values, indices)`.
fn values_indices(
    py: Python<'_>,
    name: &str,
    values: Tensor,
    indices: Tensor,
) -> PyResult<Py<PyAny>> {
    let factory = py.import("ferrograd._ops_math")?.getattr("_return_type")?;
    let v = wrap(py, values)?;
    let i = wrap(py, indices)?;
    Ok(factory.call1((name, v, i))?.unbind())
}

/// A norm order: a number, inf, or `'fro'` (2 over all given dims).
fn norm_order(p: &Bound<'_, PyAny>) -> PyResult<f64> {
    if let Ok(s) = p.cast::<PyString>() {
        let s = s.to_str()?;
        return match s {
            "fro" => Ok(2.0),
            _ => Err(PyRuntimeError::new_err(format!(
                "norm(): ord '{s}' is not supported for vector norms (use 'fro' or a number)"
            ))),
        };
    }
    if p.is_instance_of::<PyInt>() || p.is_instance_of::<PyFloat>() {
        return p.extract();
    }
    Err(PyTypeError::new_err(format!(
        "norm(): p must be a number or 'fro', not {}",
        p.get_type().name()?
    )))
}

#[pymethods]
impl PyTensor {
    /// Nearest integer (halves to even), or to `decimals` decimal places.
    #[pyo3(signature = (*, decimals = Int(0)), text_signature = "($self, *, decimals=0)")]
    fn round(&self, py: Python<'_>, decimals: Int) -> PyResult<Py<PyTensor>> {
        let decimals = decimals.0;
        let t = guarded(|| self.inner.round_decimals(decimals))?;
        wrap(py, t)
    }

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
        let t = guarded(|| self.inner.clamp(lo.as_ref(), hi.as_ref()))?;
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

    /// Replace NaN, +inf and -inf with finite numbers.
    #[pyo3(signature = (nan=0.0, posinf=None, neginf=None))]
    fn nan_to_num(
        &self,
        py: Python<'_>,
        nan: f64,
        posinf: Option<f64>,
        neginf: Option<f64>,
    ) -> PyResult<Py<PyTensor>> {
        let t = guarded(|| self.inner.nan_to_num(nan, posinf, neginf))?;
        wrap(py, t)
    }

    /// `self / other`; `rounding_mode` "trunc" or "floor" rounds the quotient.
    #[pyo3(signature = (other, *, rounding_mode=None))]
    fn div(
        &self,
        py: Python<'_>,
        other: &Bound<'_, PyAny>,
        rounding_mode: Option<&str>,
    ) -> PyResult<Py<PyTensor>> {
        let mode = self::rounding_mode(rounding_mode)?;
        let o = operand(other)?;
        let t = guarded(|| self.inner.div_mode(&o, mode))?;
        wrap(py, t)
    }

    /// Alias of `div`.
    #[pyo3(signature = (other, *, rounding_mode=None))]
    fn divide(
        &self,
        py: Python<'_>,
        other: &Bound<'_, PyAny>,
        rounding_mode: Option<&str>,
    ) -> PyResult<Py<PyTensor>> {
        self.div(py, other, rounding_mode)
    }

    /// Division rounded down (`//`).
    fn floor_divide(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyTensor>> {
        self.div(py, other, Some("floor"))
    }

    fn __invert__(&self, py: Python<'_>) -> PyResult<Py<PyTensor>> {
        self.bitwise_not(py)
    }

    /// Product over all elements or `dim`.
    #[pyo3(signature = (dim=None, keepdim=false, *, dtype=None))]
    fn prod(
        &self,
        py: Python<'_>,
        dim: Option<&Bound<'_, PyAny>>,
        keepdim: bool,
        dtype: Option<&PyDType>,
    ) -> PyResult<Py<PyTensor>> {
        let dims = dim_list(dim)?;
        let x = with_dtype(&self.inner, dtype)?;
        let t = guarded(|| x.prod_dims(&dims, keepdim))?;
        wrap(py, t)
    }

    /// Largest elements over `dim` (all when empty); ties share the gradient.
    #[pyo3(signature = (dim=None, keepdim=false))]
    fn amax(
        &self,
        py: Python<'_>,
        dim: Option<&Bound<'_, PyAny>>,
        keepdim: bool,
    ) -> PyResult<Py<PyTensor>> {
        let dims = dim_list(dim)?;
        let t = guarded(|| self.inner.amax(&dims, keepdim))?;
        wrap(py, t)
    }

    /// Smallest elements over `dim` (all when empty); ties share the gradient.
    #[pyo3(signature = (dim=None, keepdim=false))]
    fn amin(
        &self,
        py: Python<'_>,
        dim: Option<&Bound<'_, PyAny>>,
        keepdim: bool,
    ) -> PyResult<Py<PyTensor>> {
        let dims = dim_list(dim)?;
        let t = guarded(|| self.inner.amin(&dims, keepdim))?;
        wrap(py, t)
    }

    /// `max()` (all), `max(dim, keepdim=False)` -> `(values, indices)`, or `max(other)`.
    #[pyo3(signature = (dim=None, keepdim=false))]
    fn max(
        &self,
        py: Python<'_>,
        dim: Option<&Bound<'_, PyAny>>,
        keepdim: bool,
    ) -> PyResult<Py<PyAny>> {
        self.extreme(py, dim, keepdim, true)
    }

    /// `min()` (all), `min(dim, keepdim=False)` -> `(values, indices)`, or `min(other)`.
    #[pyo3(signature = (dim=None, keepdim=false))]
    fn min(
        &self,
        py: Python<'_>,
        dim: Option<&Bound<'_, PyAny>>,
        keepdim: bool,
    ) -> PyResult<Py<PyAny>> {
        self.extreme(py, dim, keepdim, false)
    }

    /// Index of the largest element (of the flattened tensor when `dim` is None).
    #[pyo3(signature = (dim=None, keepdim=false))]
    fn argmax(&self, py: Python<'_>, dim: Option<Int>, keepdim: bool) -> PyResult<Py<PyTensor>> {
        let dim = dim.map(|v| v.0);
        let t = guarded(|| self.inner.arg_extreme(dim, keepdim, true))?;
        wrap(py, t)
    }

    /// Index of the smallest element (of the flattened tensor when `dim` is None).
    #[pyo3(signature = (dim=None, keepdim=false))]
    fn argmin(&self, py: Python<'_>, dim: Option<Int>, keepdim: bool) -> PyResult<Py<PyTensor>> {
        let dim = dim.map(|v| v.0);
        let t = guarded(|| self.inner.arg_extreme(dim, keepdim, false))?;
        wrap(py, t)
    }

    /// Variance over `dim` with `correction` (default 1) or the legacy `unbiased` flag.
    #[pyo3(signature = (dim=None, unbiased=None, keepdim=false, *, correction=None))]
    fn var(
        &self,
        py: Python<'_>,
        dim: Option<&Bound<'_, PyAny>>,
        unbiased: Option<bool>,
        keepdim: bool,
        correction: Option<f64>,
    ) -> PyResult<Py<PyTensor>> {
        let (dims, c) = var_args(dim, unbiased, correction)?;
        let t = guarded(|| self.inner.var_dims(&dims, c, keepdim))?;
        wrap(py, t)
    }

    /// Standard deviation over `dim` with `correction` (default 1) or `unbiased`.
    #[pyo3(signature = (dim=None, unbiased=None, keepdim=false, *, correction=None))]
    fn std(
        &self,
        py: Python<'_>,
        dim: Option<&Bound<'_, PyAny>>,
        unbiased: Option<bool>,
        keepdim: bool,
        correction: Option<f64>,
    ) -> PyResult<Py<PyTensor>> {
        let (dims, c) = var_args(dim, unbiased, correction)?;
        let t = guarded(|| self.inner.std_dims(&dims, c, keepdim))?;
        wrap(py, t)
    }

    /// The `p`-norm over `dim` (all when None); `'fro'` is the 2-norm.
    #[pyo3(signature = (p=None, dim=None, keepdim=false, dtype=None))]
    fn norm(
        &self,
        py: Python<'_>,
        p: Option<&Bound<'_, PyAny>>,
        dim: Option<&Bound<'_, PyAny>>,
        keepdim: bool,
        dtype: Option<&PyDType>,
    ) -> PyResult<Py<PyTensor>> {
        let ord = match p {
            Some(p) if !p.is_none() => norm_order(p)?,
            _ => 2.0,
        };
        let dims = dim_list(dim)?;
        let x = with_dtype(&self.inner, dtype)?;
        let t = guarded(|| x.vector_norm(ord, &dims, keepdim))?;
        wrap(py, t)
    }

    /// The vector `ord`-norm (`torch.linalg.vector_norm`).
    #[pyo3(signature = (ord=2.0, dim=None, keepdim=false))]
    fn _vector_norm(
        &self,
        py: Python<'_>,
        ord: f64,
        dim: Option<&Bound<'_, PyAny>>,
        keepdim: bool,
    ) -> PyResult<Py<PyTensor>> {
        let dims = dim_list(dim)?;
        let t = guarded(|| self.inner.vector_norm(ord, &dims, keepdim))?;
        wrap(py, t)
    }

    /// log Σ exp over `dim`, stable for large inputs.
    #[pyo3(signature = (dim, keepdim=false))]
    fn logsumexp(
        &self,
        py: Python<'_>,
        dim: &Bound<'_, PyAny>,
        keepdim: bool,
    ) -> PyResult<Py<PyTensor>> {
        let dims = dim_list(Some(dim))?;
        let t = guarded(|| self.inner.logsumexp(&dims, keepdim))?;
        wrap(py, t)
    }

    /// Softmax along `dim` (after converting to `dtype` when given).
    #[pyo3(signature = (dim, dtype=None))]
    fn softmax(&self, py: Python<'_>, dim: Int, dtype: Option<&PyDType>) -> PyResult<Py<PyTensor>> {
        let dim = dim.0;
        let x = with_dtype(&self.inner, dtype)?;
        let t = guarded(|| x.softmax(dim))?;
        wrap(py, t)
    }

    /// Log-softmax along `dim` (after converting to `dtype` when given).
    #[pyo3(signature = (dim, dtype=None))]
    fn log_softmax(
        &self,
        py: Python<'_>,
        dim: Int,
        dtype: Option<&PyDType>,
    ) -> PyResult<Py<PyTensor>> {
        let dim = dim.0;
        let x = with_dtype(&self.inner, dtype)?;
        let t = guarded(|| x.log_softmax(dim))?;
        wrap(py, t)
    }

    /// Cumulative sum along `dim`.
    #[pyo3(signature = (dim, *, dtype=None))]
    fn cumsum(&self, py: Python<'_>, dim: Int, dtype: Option<&PyDType>) -> PyResult<Py<PyTensor>> {
        let dim = dim.0;
        let x = with_dtype(&self.inner, dtype)?;
        let t = guarded(|| x.cumsum(dim))?;
        wrap(py, t)
    }

    /// Cumulative product along `dim`.
    #[pyo3(signature = (dim, *, dtype=None))]
    fn cumprod(&self, py: Python<'_>, dim: Int, dtype: Option<&PyDType>) -> PyResult<Py<PyTensor>> {
        let dim = dim.0;
        let x = with_dtype(&self.inner, dtype)?;
        let t = guarded(|| x.cumprod(dim))?;
        wrap(py, t)
    }

    /// Whether all elements (over `dim`) are nonzero.
    #[pyo3(signature = (dim=None, keepdim=false))]
    fn all(
        &self,
        py: Python<'_>,
        dim: Option<&Bound<'_, PyAny>>,
        keepdim: bool,
    ) -> PyResult<Py<PyTensor>> {
        let dims = dim_list(dim)?;
        let t = guarded(|| self.inner.all_dims(&dims, keepdim))?;
        wrap(py, t)
    }

    /// Whether any element (over `dim`) is nonzero.
    #[pyo3(signature = (dim=None, keepdim=false))]
    fn any(
        &self,
        py: Python<'_>,
        dim: Option<&Bound<'_, PyAny>>,
        keepdim: bool,
    ) -> PyResult<Py<PyTensor>> {
        let dims = dim_list(dim)?;
        let t = guarded(|| self.inner.any_dims(&dims, keepdim))?;
        wrap(py, t)
    }
}

impl PyTensor {
    fn extreme(
        &self,
        py: Python<'_>,
        dim: Option<&Bound<'_, PyAny>>,
        keepdim: bool,
        is_max: bool,
    ) -> PyResult<Py<PyAny>> {
        let name = if is_max { "max" } else { "min" };
        match dim {
            Some(d) if d.cast::<PyTensor>().is_ok() => {
                let o = operand(d)?;
                let t = guarded(|| {
                    if is_max {
                        self.inner.maximum(&o)
                    } else {
                        self.inner.minimum(&o)
                    }
                })?;
                Ok(wrap(py, t)?.into_any())
            }
            Some(d) if !d.is_none() => {
                let dim: i64 = d.extract().map_err(|_| {
                    PyTypeError::new_err(format!(
                        "{name}(): argument 'dim' must be int, not {}",
                        d.get_type()
                            .name()
                            .map(|n| n.to_string())
                            .unwrap_or_default()
                    ))
                })?;
                let (v, i) = guarded(|| self.inner.extreme_dim(dim, keepdim, is_max))?;
                values_indices(py, name, v, i)
            }
            _ => {
                let t = guarded(|| {
                    if is_max {
                        self.inner.max_all()
                    } else {
                        self.inner.min_all()
                    }
                })?;
                Ok(wrap(py, t)?.into_any())
            }
        }
    }
}

/// `(dims, correction)` from torch's var/std arguments: `x.var(True)` passes `unbiased`
/// positionally; `correction` and `unbiased` are exclusive.
fn var_args(
    dim: Option<&Bound<'_, PyAny>>,
    unbiased: Option<bool>,
    correction: Option<f64>,
) -> PyResult<(Vec<i64>, f64)> {
    let (dim, unbiased) = match dim {
        Some(d) if d.is_instance_of::<PyBool>() => {
            if unbiased.is_some() {
                return Err(PyTypeError::new_err(
                    "var(): unbiased given twice (positionally as dim and by name)",
                ));
            }
            (None, Some(d.extract::<bool>()?))
        }
        d => (d, unbiased),
    };
    if unbiased.is_some() && correction.is_some() {
        return Err(PyTypeError::new_err(
            "var() received an invalid combination of arguments - got both unbiased and correction",
        ));
    }
    let c = match (unbiased, correction) {
        (Some(u), _) => {
            if u {
                1.0
            } else {
                0.0
            }
        }
        (None, Some(c)) => c,
        (None, None) => 1.0,
    };
    Ok((dim_list(dim)?, c))
}

/// Register the module-level functions of this file (none yet: the Python wrappers in
/// `ferrograd._ops_math` call the methods).
pub(crate) fn register(_m: &Bound<'_, PyModule>) -> PyResult<()> {
    Ok(())
}
