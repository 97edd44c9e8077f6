//! Bindings of the indexing ops (`crate::ops::indexing`): advanced indexing, `index_put`,
//! gather/scatter, masks and `nonzero`. Argument parsing only.

use pyo3::exceptions::{PyRuntimeError, PyTypeError};

use crate::ops::indexing::ScatterReduce;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyInt};

use crate::python::args::Int;
use crate::python::bind::{tensor_methods, OptTensors};
use crate::python::errors::guarded;
use crate::python::opt_tensors;
use crate::python::tensor::{operand, tensor_of, wrap, wrap_all, PyTensor};
use crate::tensor::Tensor;

tensor_methods! {
    /// Advanced indexing with one optional index tensor per leading dim.
    fn _index(x, indices: OptTensors<'_>) => x.index(&indices);

    /// Elements along `dim` at `index`.
    fn index_select(x, dim: Int, index: &Bound<'_, PyAny>) => x.index_select(dim, &index);

    /// Values along `dim` at `index`, shaped like `index`.
    fn gather(x, dim: Int, index: &Bound<'_, PyAny>) => x.gather(dim, &index);

    /// A copy with `src` added along `dim` at `index`.
    fn scatter_add(x, dim: Int, index: &Bound<'_, PyAny>, src: &Bound<'_, PyAny>) =>
        x.scatter_add(dim, &index, &src);

    /// A copy with `alpha * source` added along `dim` at `index`.
    #[pyo3(signature = (dim, index, source, *, alpha=1.0))]
    fn index_add(x, dim: Int, index: &Bound<'_, PyAny>, source: &Bound<'_, PyAny>, alpha: f64) =>
        x.index_add(dim, &index, &source, alpha);

    /// The elements where `mask` is true (1-D).
    fn masked_select(x, mask: &Bound<'_, PyAny>) => x.masked_select(&mask);

    /// A copy with the slices along `dim` at `index` replaced by `source`'s.
    fn index_copy(x, dim: Int, index: &Bound<'_, PyAny>, source: &Bound<'_, PyAny>) =>
        x.index_copy(dim, &index, &source);

    /// The elements (taken as 1-D) at `index`, shaped like `index`.
    fn take(x, index: &Bound<'_, PyAny>) => x.take(&index);

    /// A copy with the positions where `mask` is true filled with `source`'s elements.
    fn masked_scatter(x, mask: &Bound<'_, PyAny>, source: &Bound<'_, PyAny>) =>
        x.masked_scatter(&mask, &source);

    /// `gather` with broadcasting; flattened without `dim`.
    #[pyo3(signature = (indices, dim=None))]
    fn take_along_dim(x, indices: &Bound<'_, PyAny>, dim: Option<Int>) =>
        x.take_along_dim(&indices, dim);
}

/// A Python number as f64 (bool, int or float) or a one-element tensor.
fn scalar_value(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<f64> {
    if obj.is_instance_of::<PyBool>()
        || obj.is_instance_of::<PyInt>()
        || obj.is_instance_of::<PyFloat>()
    {
        return obj.extract::<f64>();
    }
    if let Ok(t) = obj.cast::<PyTensor>() {
        let t = &t.get().inner;
        if t.dim() == 0 {
            return guarded(|| t.item_f64());
        }
        return Err(PyTypeError::new_err(format!(
            "{what}: only supports a 0-dimensional value tensor, but got tensor with {} dimension(s).",
            t.dim()
        )));
    }
    Err(PyTypeError::new_err(format!(
        "{what}: value must be a number"
    )))
}

/// `repeat_interleave`'s counts: an int (one count for all) or an int64 tensor of 0 or 1 dims.
fn repeat_counts(repeats: &Bound<'_, PyAny>) -> PyResult<Vec<i64>> {
    if let Ok(t) = repeats.cast::<PyTensor>() {
        let t = &t.get().inner;
        if t.dtype() != crate::tensor::DType::Int64 {
            return Err(pyo3::exceptions::PyNotImplementedError::new_err(format!(
                "\"repeat_interleave_cpu\" not implemented for '{}'",
                crate::tensor::scalar_type_name(t.dtype())
            )));
        }
        if t.dim() > 1 {
            return Err(PyRuntimeError::new_err(
                "repeats must be 0-dim or 1-dim tensor",
            ));
        }
        return guarded(|| t.to_vec::<i64>());
    }
    let r = repeats.extract::<Int>()?.0;
    if r < 0 {
        return Err(PyRuntimeError::new_err("Repeats must be non-negative"));
    }
    Ok(vec![r])
}

/// `repeat_interleave(repeats)` of a 1-D int64 tensor: each index `i` repeated `repeats[i]`
/// times.
#[pyfunction]
#[pyo3(signature = (repeats, *, output_size=None))]
fn _repeat_index(
    py: Python<'_>,
    repeats: &Bound<'_, PyAny>,
    output_size: Option<Int>,
) -> PyResult<Py<PyTensor>> {
    let t = tensor_of(repeats, "repeats")?;
    if t.dim() > 1 {
        return Err(PyRuntimeError::new_err(
            "repeats must be 0-dim or 1-dim tensor",
        ));
    }
    if t.is_batched() {
        let size = output_size.map(|k| k.0.max(0) as usize);
        return wrap(py, guarded(|| Tensor::repeat_index_batched(&t, size))?);
    }
    let counts = repeat_counts(repeats)?;
    let n = counts.len();
    let out = guarded(|| Tensor::repeat_index(&counts, n))?;
    if let Some(k) = output_size {
        if out.numel() as i64 != k.0 {
            return Err(PyRuntimeError::new_err(
                "allocated size does not match required size",
            ));
        }
    }
    wrap(py, out)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_repeat_index, m)?)?;
    Ok(())
}

#[pymethods]
impl PyTensor {
    /// Out-of-place `index_put`.
    #[pyo3(signature = (indices, values, accumulate=false))]
    fn index_put(
        &self,
        py: Python<'_>,
        indices: &Bound<'_, PyAny>,
        values: &Bound<'_, PyAny>,
        accumulate: bool,
    ) -> PyResult<Py<PyTensor>> {
        let ix = opt_tensors(indices, "indices")?;
        let v = operand(values)?;
        let t = guarded(|| self.inner.index_put(&ix, &v, accumulate))?;
        wrap(py, t)
    }
    /// In-place `index_put_`.
    #[pyo3(signature = (indices, values, accumulate=false))]
    fn index_put_(
        slf: &Bound<'_, Self>,
        indices: &Bound<'_, PyAny>,
        values: &Bound<'_, PyAny>,
        accumulate: bool,
    ) -> PyResult<Py<PyTensor>> {
        let ix = opt_tensors(indices, "indices")?;
        let v = operand(values)?;
        guarded(|| slf.get().inner.index_put_(&ix, &v, accumulate))?;
        Ok(slf.clone().unbind())
    }
    /// A copy with `src` (tensor or number) written along `dim` at `index`.
    #[pyo3(signature = (dim, index, src=None, value=None))]
    fn scatter(
        &self,
        py: Python<'_>,
        dim: Int,
        index: &Bound<'_, PyAny>,
        src: Option<&Bound<'_, PyAny>>,
        value: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyTensor>> {
        let dim = dim.0;
        let i = tensor_of(index, "index")?;
        let arg = src.or(value).ok_or_else(|| {
            PyTypeError::new_err("scatter() missing required argument 'src' or 'value'")
        })?;
        let t = if let Ok(s) = arg.cast::<PyTensor>() {
            let s = s.get().inner.clone();
            guarded(|| self.inner.scatter(dim, &i, &s))?
        } else {
            let v = scalar_value(arg, "scatter")?;
            guarded(|| self.inner.scatter_value(dim, &i, v))?
        };
        wrap(py, t)
    }
    /// A copy with the slices along `dim` at `index` set to `value`.
    fn index_fill(
        &self,
        py: Python<'_>,
        dim: Int,
        index: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyTensor>> {
        let i = tensor_of(index, "index")?;
        let v = scalar_value(value, "index_fill_")?;
        let t = guarded(|| self.inner.index_fill(dim.0, &i, v))?;
        wrap(py, t)
    }
    /// `src` reduced into a copy of self along `dim` at `index` ("sum", "prod", "mean",
    /// "amax" or "amin"; `include_self`: the old values take part).
    #[pyo3(signature = (dim, index, src, reduce, *, include_self=true))]
    fn scatter_reduce(
        &self,
        py: Python<'_>,
        dim: Int,
        index: &Bound<'_, PyAny>,
        src: &Bound<'_, PyAny>,
        reduce: &str,
        include_self: bool,
    ) -> PyResult<Py<PyTensor>> {
        let (i, s) = (tensor_of(index, "index")?, tensor_of(src, "src")?);
        let how = guarded(|| ScatterReduce::parse(reduce))?;
        let t = guarded(|| self.inner.scatter_reduce(dim.0, &i, &s, how, include_self))?;
        wrap(py, t)
    }
    /// Each slice along `dim` repeated `repeats` times (an int, or a tensor of one count per
    /// slice); without `dim` the flattened tensor.
    #[pyo3(signature = (repeats, dim=None, *, output_size=None))]
    fn repeat_interleave(
        &self,
        py: Python<'_>,
        repeats: &Bound<'_, PyAny>,
        dim: Option<Int>,
        output_size: Option<Int>,
    ) -> PyResult<Py<PyTensor>> {
        let counts = repeat_counts(repeats)?;
        let t = guarded(|| self.inner.repeat_interleave(&counts, dim.map(|d| d.0)))?;
        if let Some(n) = output_size {
            let d = dim.map_or(0, |d| d.0);
            let got = guarded(|| {
                let w = crate::tensor::shape::wrap_dim(d, t.dim().max(1))?;
                Ok(t.shape().get(w).copied().unwrap_or(1))
            })?;
            if got as i64 != n.0 {
                return Err(PyRuntimeError::new_err(
                    "allocated size does not match required size",
                ));
            }
        }
        wrap(py, t)
    }
    /// `value` where `mask` is true.
    fn masked_fill(
        &self,
        py: Python<'_>,
        mask: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyTensor>> {
        let m = tensor_of(mask, "mask")?;
        let v = scalar_value(value, "masked_fill_")?;
        if m.dtype() != crate::tensor::DType::Bool {
            return Err(pyo3::exceptions::PyRuntimeError::new_err(format!(
                "masked_fill_ only supports boolean masks, but got mask with dtype {}",
                m.dtype().c_name()
            )));
        }
        let t = guarded(|| self.inner.masked_fill(&m, v))?;
        wrap(py, t)
    }
    /// In-place `masked_fill`.
    fn masked_fill_(
        slf: &Bound<'_, Self>,
        mask: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyTensor>> {
        let m = tensor_of(mask, "mask")?;
        let v = scalar_value(value, "masked_fill_")?;
        guarded(|| slf.get().inner.masked_fill_(&m, v))?;
        Ok(slf.clone().unbind())
    }
    /// Coordinates of the non-zero elements.
    #[pyo3(signature = (*, as_tuple=false))]
    fn nonzero<'py>(&self, py: Python<'py>, as_tuple: bool) -> PyResult<Bound<'py, PyAny>> {
        let nz = guarded(|| self.inner.nonzero())?;
        if !as_tuple {
            return Ok(wrap(py, nz)?.into_bound(py).into_any());
        }
        let cols = if self.inner.dim() == 0 {
            // a 0-d tensor has one "row": index 0 if it is non-zero
            vec![Tensor::zeros(&[nz.shape()[0]], crate::tensor::DType::Int64)]
        } else {
            guarded(|| nz.unbind(1)?.into_iter().map(|c| c.contiguous()).collect())?
        };
        Ok(wrap_all(py, cols)?.into_any())
    }
}
