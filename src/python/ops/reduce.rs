//! Bindings of `crate::ops::reduce`: sums, means, products, extremes, variance, norms, scans
//! and the logical reductions. Argument parsing only.

use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyInt, PyString};

use crate::python::args::Int;
use crate::python::bind::{dim_list, tensor_methods, with_dtype, Dims};
use crate::python::errors::guarded;
use crate::python::tensor::{operand, wrap, PyTensor};
use crate::python::PyDType;
use crate::tensor::Tensor;

tensor_methods! {
    /// Sum over all elements or `dim`.
    #[pyo3(signature = (dim=None, keepdim=false))]
    fn sum(x, dim: Option<Dims<'_>>, keepdim: bool) heavy => x.sum_dims(&dim, keepdim);

    /// Mean over all elements or `dim`.
    #[pyo3(signature = (dim=None, keepdim=false))]
    fn mean(x, dim: Option<Dims<'_>>, keepdim: bool) heavy => x.mean_dims(&dim, keepdim);

    /// Sum over all elements or `dim`, NaN taken as zero.
    #[pyo3(signature = (dim=None, keepdim=false, *, dtype=None))]
    fn nansum(x, dim: Option<Dims<'_>>, keepdim: bool, dtype: Option<&PyDType>) =>
        with_dtype(x, dtype)?.nansum(&dim, keepdim);

    /// Mean over all elements or `dim` of the elements that are not NaN.
    #[pyo3(signature = (dim=None, keepdim=false, *, dtype=None))]
    fn nanmean(x, dim: Option<Dims<'_>>, keepdim: bool, dtype: Option<&PyDType>) =>
        with_dtype(x, dtype)?.nanmean(&dim, keepdim);

    /// Product over all elements or `dim`.
    #[pyo3(signature = (dim=None, keepdim=false, *, dtype=None))]
    fn prod(x, dim: Option<Dims<'_>>, keepdim: bool, dtype: Option<&PyDType>) =>
        with_dtype(x, dtype)?.prod_dims(&dim, keepdim);

    /// Largest elements over `dim` (all when empty); ties share the gradient.
    #[pyo3(signature = (dim=None, keepdim=false))]
    fn amax(x, dim: Option<Dims<'_>>, keepdim: bool) => x.amax(&dim, keepdim);

    /// Smallest elements over `dim` (all when empty); ties share the gradient.
    #[pyo3(signature = (dim=None, keepdim=false))]
    fn amin(x, dim: Option<Dims<'_>>, keepdim: bool) => x.amin(&dim, keepdim);

    /// Index of the largest element (of the flattened tensor when `dim` is None).
    #[pyo3(signature = (dim=None, keepdim=false))]
    fn argmax(x, dim: Option<Int>, keepdim: bool) => x.arg_extreme(dim, keepdim, true);

    /// Index of the smallest element (of the flattened tensor when `dim` is None).
    #[pyo3(signature = (dim=None, keepdim=false))]
    fn argmin(x, dim: Option<Int>, keepdim: bool) => x.arg_extreme(dim, keepdim, false);

    /// The vector `ord`-norm (`torch.linalg.vector_norm`).
    #[pyo3(signature = (ord=2.0, dim=None, keepdim=false))]
    fn _vector_norm(x, ord: f64, dim: Option<Dims<'_>>, keepdim: bool) =>
        x.vector_norm(ord, &dim, keepdim);

    /// Cumulative sum along `dim`.
    #[pyo3(signature = (dim, *, dtype=None))]
    fn cumsum(x, dim: Int, dtype: Option<&PyDType>) => with_dtype(x, dtype)?.cumsum(dim);

    /// Cumulative product along `dim`.
    #[pyo3(signature = (dim, *, dtype=None))]
    fn cumprod(x, dim: Int, dtype: Option<&PyDType>) => with_dtype(x, dtype)?.cumprod(dim);

    /// Whether all elements (over `dim`) are nonzero.
    #[pyo3(signature = (dim=None, keepdim=false))]
    fn all(x, dim: Option<Dims<'_>>, keepdim: bool) => x.all_dims(&dim, keepdim);

    /// Whether any element (over `dim`) is nonzero.
    #[pyo3(signature = (dim=None, keepdim=false))]
    fn any(x, dim: Option<Dims<'_>>, keepdim: bool) => x.any_dims(&dim, keepdim);
}

/// `var` and `std`: torch's `(dim, unbiased, keepdim, *, correction)` arguments (see
/// [`var_args`]), one `name => Tensor method, "doc"` each.
macro_rules! variance_methods {
    ($($name:ident => $call:ident, $doc:literal;)*) => {
        #[pymethods]
        impl PyTensor {
            $(
                #[doc = $doc]
                #[pyo3(signature = (dim=None, unbiased=None, keepdim=false, *, correction=None))]
                fn $name(
                    &self,
                    py: Python<'_>,
                    dim: Option<&Bound<'_, PyAny>>,
                    unbiased: Option<bool>,
                    keepdim: bool,
                    correction: Option<f64>,
                ) -> PyResult<Py<PyTensor>> {
                    let (dims, c) = var_args(dim, unbiased, correction)?;
                    wrap(py, guarded(|| self.inner.$call(&dims, c, keepdim))?)
                }
            )*
        }
    };
}

variance_methods! {
    var => var_dims, "Variance over `dim` with `correction` (default 1) or the legacy `unbiased` flag.";
    std => std_dims, "Standard deviation over `dim` with `correction` (default 1) or `unbiased`.";
}

/// The `torch.return_types`-like named tuple `(values, indices)`.
fn values_indices(
    py: Python<'_>,
    name: &str,
    values: Tensor,
    indices: Tensor,
) -> PyResult<Py<PyAny>> {
    let factory = py
        .import("ferrograd._ops_reduce")?
        .getattr("_return_type")?;
    let v = wrap(py, values)?;
    let i = wrap(py, indices)?;
    Ok(factory.call1((name, v, i))?.unbind())
}

/// A norm order: a number, inf, or `'fro'` (2 over all given dims).
fn norm_order(p: &Bound<'_, PyAny>) -> PyResult<f64> {
    if let Ok(s) = p.cast::<PyString>() {
        // to_cow: `to_str` is not in the stable ABI before Python 3.10.
        let s = s.to_cow()?;
        return match s.as_ref() {
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
        let dtype = dtype.map(|d| d.d);
        let t = guarded(|| with_dtype(&self.inner, dtype)?.vector_norm(ord, &dims, keepdim))?;
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
