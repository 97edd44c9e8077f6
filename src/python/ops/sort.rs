//! Bindings of `crate::ops::sort`: sort/argsort/msort, topk, kthvalue, median, mode, cummax,
//! quantile, unique, searchsorted, bincount, histc, argwhere, count_nonzero. Argument parsing
//! only.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyInt, PyTuple};

use crate::ops::sort::Interpolation;
use crate::python::args::Int;
use crate::python::bind::{tensor_functions, tensor_methods, Dims};
use crate::python::errors::guarded;
use crate::python::tensor::{tensor_of, wrap, PyTensor};
use crate::tensor::Tensor;

tensor_methods! {
    /// The indices that sort the tensor along `dim`.
    #[pyo3(signature = (dim=Int(-1), descending=false, *, stable=None),
           text_signature = "($self, dim=-1, descending=False, *, stable=None)")]
    fn argsort(x, dim: Int, descending: bool, stable: Option<bool>) =>
        x.argsort(dim, descending, stable);

    /// Sorted along the first dimension.
    fn msort(x) => x.msort();

    /// Histogram with `bins` equal bins over `[min, max]` (the data's range when equal).
    #[pyo3(signature = (bins=Int(100), min=0.0, max=0.0),
           text_signature = "($self, bins=100, min=0, max=0)")]
    fn histc(x, bins: Int, min: f64, max: f64) => x.histc(bins, min, max);

    /// Coordinates of the nonzero elements, `[count, ndim]`.
    fn argwhere(x) => x.argwhere();

    /// The number of nonzero elements over `dim` (all when None).
    #[pyo3(signature = (dim=None))]
    fn count_nonzero(x, dim: Option<Dims<'_>>) => x.count_nonzero(&dim);

    /// How often each non-negative integer occurs (or the sum of `weights` per value).
    #[pyo3(signature = (weights=None, minlength=Int(0)),
           text_signature = "($self, weights=None, minlength=0)")]
    fn bincount(x, weights: Option<&Bound<'_, PyAny>>, minlength: Int) =>
        x.bincount(weights.as_ref(), minlength);
}

tensor_functions! {
    register;
    /// Insertion indices of `values` into the sorted `sorted_sequence` (see torch.searchsorted).
    #[pyo3(signature = (sorted_sequence, values, right, sorter=None))]
    fn _searchsorted(
        sorted_sequence: &Bound<'_, PyAny>,
        values: &Bound<'_, PyAny>,
        right: bool,
        sorter: Option<&Bound<'_, PyAny>>,
    ) => sorted_sequence.searchsorted(&values, right, sorter.as_ref());

    /// Bucket indices of `input` among the 1-D sorted `boundaries`.
    fn _bucketize(input: &Bound<'_, PyAny>, boundaries: &Bound<'_, PyAny>, right: bool) =>
        input.bucketize(&boundaries, right);
}

/// `(values, indices)` as the `ferrograd.return_types.<name>` named tuple.
fn named(py: Python<'_>, name: &str, (v, i): (Tensor, Tensor)) -> PyResult<Py<PyAny>> {
    let factory = py.import("ferrograd._ops_sort")?.getattr("_return_type")?;
    Ok(factory.call1((name, wrap(py, v)?, wrap(py, i)?))?.unbind())
}

/// An optional `dim` argument that must be an int when given.
fn opt_dim(op: &str, dim: Option<&Bound<'_, PyAny>>) -> PyResult<Option<i64>> {
    match dim {
        Some(d) if !d.is_none() => {
            if d.is_instance_of::<PyInt>() && !d.is_instance_of::<PyBool>() {
                return Ok(Some(d.extract::<Int>()?.0));
            }
            Err(PyTypeError::new_err(format!(
                "{op}(): argument 'dim' must be int, not {}",
                d.get_type().name()?
            )))
        }
        _ => Ok(None),
    }
}

impl PyTensor {
    fn median_impl(
        &self,
        py: Python<'_>,
        dim: Option<&Bound<'_, PyAny>>,
        keepdim: bool,
        ignore_nan: bool,
    ) -> PyResult<Py<PyAny>> {
        let op = if ignore_nan { "nanmedian" } else { "median" };
        match opt_dim(op, dim)? {
            None => Ok(wrap(py, guarded(|| self.inner.median_all(ignore_nan))?)?.into_any()),
            Some(d) => named(
                py,
                op,
                guarded(|| self.inner.median_dim(d, keepdim, ignore_nan))?,
            ),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn quantile_impl(
        &self,
        py: Python<'_>,
        q: &Bound<'_, PyAny>,
        dim: Option<&Bound<'_, PyAny>>,
        keepdim: bool,
        interpolation: &str,
        ignore_nan: bool,
    ) -> PyResult<Py<PyTensor>> {
        let op = if ignore_nan {
            "nanquantile"
        } else {
            "quantile"
        };
        let dim = opt_dim(op, dim)?;
        let interp = guarded(|| Interpolation::parse(interpolation))?;
        let x = &self.inner;
        let t = if q.is_instance_of::<PyFloat>() || q.is_instance_of::<PyInt>() {
            let qv: f64 = q.extract()?;
            guarded(|| x.quantile_scalar(qv, dim, keepdim, interp, ignore_nan))?
        } else {
            let qt = tensor_of(q, "q")?;
            guarded(|| x.quantile(&qt, dim, keepdim, interp, ignore_nan))?
        };
        wrap(py, t)
    }

    fn unique_impl(
        &self,
        py: Python<'_>,
        return_inverse: bool,
        return_counts: bool,
        dim: Option<i64>,
        sorted: bool,
    ) -> PyResult<Py<PyAny>> {
        let (v, inv, cnt) = guarded(|| {
            if sorted {
                self.inner.unique(dim)
            } else {
                self.inner.unique_consecutive(dim)
            }
        })?;
        let v = wrap(py, v)?;
        if !return_inverse && !return_counts {
            return Ok(v.into_any());
        }
        let mut parts: Vec<Py<PyAny>> = vec![v.into_any()];
        if return_inverse {
            parts.push(wrap(py, inv)?.into_any());
        }
        if return_counts {
            parts.push(wrap(py, cnt)?.into_any());
        }
        Ok(PyTuple::new(py, parts)?.into_any().unbind())
    }
}

#[pymethods]
impl PyTensor {
    /// `(values, indices)` sorted along `dim`; NaN is the largest value.
    #[pyo3(signature = (dim=Int(-1), descending=false, *, stable=None),
           text_signature = "($self, dim=-1, descending=False, *, stable=None)")]
    fn sort(
        &self,
        py: Python<'_>,
        dim: Int,
        descending: bool,
        stable: Option<bool>,
    ) -> PyResult<Py<PyAny>> {
        named(
            py,
            "sort",
            guarded(|| self.inner.sort(dim.0, descending, stable))?,
        )
    }

    /// `(values, indices)` of the `k` largest (or smallest) elements along `dim`.
    #[pyo3(signature = (k, dim=Int(-1), largest=true, sorted=true),
           text_signature = "($self, k, dim=-1, largest=True, sorted=True)")]
    fn topk(
        &self,
        py: Python<'_>,
        k: Int,
        dim: Int,
        largest: bool,
        sorted: bool,
    ) -> PyResult<Py<PyAny>> {
        named(
            py,
            "topk",
            guarded(|| self.inner.topk(k.0, dim.0, largest, sorted))?,
        )
    }

    /// `(values, indices)` of the `k`-th smallest element along `dim`.
    #[pyo3(signature = (k, dim=Int(-1), keepdim=false),
           text_signature = "($self, k, dim=-1, keepdim=False)")]
    fn kthvalue(&self, py: Python<'_>, k: Int, dim: Int, keepdim: bool) -> PyResult<Py<PyAny>> {
        named(
            py,
            "kthvalue",
            guarded(|| self.inner.kthvalue(k.0, dim.0, keepdim))?,
        )
    }

    /// The lower median of all elements, or `(values, indices)` along `dim`.
    #[pyo3(signature = (dim=None, keepdim=false))]
    fn median(
        &self,
        py: Python<'_>,
        dim: Option<&Bound<'_, PyAny>>,
        keepdim: bool,
    ) -> PyResult<Py<PyAny>> {
        self.median_impl(py, dim, keepdim, false)
    }

    /// `median` ignoring NaN.
    #[pyo3(signature = (dim=None, keepdim=false))]
    fn nanmedian(
        &self,
        py: Python<'_>,
        dim: Option<&Bound<'_, PyAny>>,
        keepdim: bool,
    ) -> PyResult<Py<PyAny>> {
        self.median_impl(py, dim, keepdim, true)
    }

    /// `(values, indices)` of the most frequent value along `dim`.
    #[pyo3(signature = (dim=Int(-1), keepdim=false),
           text_signature = "($self, dim=-1, keepdim=False)")]
    fn mode(&self, py: Python<'_>, dim: Int, keepdim: bool) -> PyResult<Py<PyAny>> {
        named(py, "mode", guarded(|| self.inner.mode(dim.0, keepdim))?)
    }

    /// `(values, indices)` of the running maximum along `dim`.
    fn cummax(&self, py: Python<'_>, dim: Int) -> PyResult<Py<PyAny>> {
        named(py, "cummax", guarded(|| self.inner.cummax(dim.0))?)
    }

    /// `(values, indices)` of the running minimum along `dim`.
    fn cummin(&self, py: Python<'_>, dim: Int) -> PyResult<Py<PyAny>> {
        named(py, "cummin", guarded(|| self.inner.cummin(dim.0))?)
    }

    /// The `q`-quantiles over `dim` (all elements when None).
    #[pyo3(signature = (q, dim=None, keepdim=false, *, interpolation="linear"))]
    fn quantile(
        &self,
        py: Python<'_>,
        q: &Bound<'_, PyAny>,
        dim: Option<&Bound<'_, PyAny>>,
        keepdim: bool,
        interpolation: &str,
    ) -> PyResult<Py<PyTensor>> {
        self.quantile_impl(py, q, dim, keepdim, interpolation, false)
    }

    /// `quantile` ignoring NaN.
    #[pyo3(signature = (q, dim=None, keepdim=false, *, interpolation="linear"))]
    fn nanquantile(
        &self,
        py: Python<'_>,
        q: &Bound<'_, PyAny>,
        dim: Option<&Bound<'_, PyAny>>,
        keepdim: bool,
        interpolation: &str,
    ) -> PyResult<Py<PyTensor>> {
        self.quantile_impl(py, q, dim, keepdim, interpolation, true)
    }

    /// The sorted distinct elements (slices along `dim`), with the inverse and the counts
    /// when asked.
    #[pyo3(signature = (sorted=true, return_inverse=false, return_counts=false, dim=None))]
    fn unique(
        &self,
        py: Python<'_>,
        sorted: bool,
        return_inverse: bool,
        return_counts: bool,
        dim: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let _ = sorted;
        let dim = opt_dim("unique", dim)?;
        self.unique_impl(py, return_inverse, return_counts, dim, true)
    }

    /// The elements (slices along `dim`) with runs of equal neighbours collapsed, with the
    /// inverse and the counts when asked.
    #[pyo3(signature = (return_inverse=false, return_counts=false, dim=None))]
    fn unique_consecutive(
        &self,
        py: Python<'_>,
        return_inverse: bool,
        return_counts: bool,
        dim: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let dim = opt_dim("unique_consecutive", dim)?;
        self.unique_impl(py, return_inverse, return_counts, dim, false)
    }
}
