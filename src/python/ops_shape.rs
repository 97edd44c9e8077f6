//! Python bindings of the shape, indexing and linear-algebra ops (argument parsing only).

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;

use crate::python::args::{Int, Ints};
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyTuple};

use super::args;
use super::errors::guarded;
use super::tensor::{dims_arg, operand, tensor_of, wrap, PyTensor};
use crate::tensor::Tensor;

/// An int or a sequence of ints.
fn int_or_seq(obj: &Bound<'_, PyAny>) -> PyResult<Vec<i64>> {
    if obj.is_instance_of::<PyTuple>() || obj.is_instance_of::<PyList>() {
        Ok(obj.extract::<Ints>()?.0)
    } else {
        Ok(vec![obj.extract::<Int>()?.0])
    }
}

/// Wrap several tensors as a Python tuple.
fn wrap_all<'py>(py: Python<'py>, ts: Vec<Tensor>) -> PyResult<Bound<'py, PyTuple>> {
    let objs: Vec<Py<PyTensor>> = ts
        .into_iter()
        .map(|t| wrap(py, t))
        .collect::<PyResult<_>>()?;
    PyTuple::new(py, objs)
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

#[pymethods]
impl PyTensor {
    /// A view with `other`'s shape.
    fn view_as(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyTensor>> {
        let o = tensor_of(other, "other")?;
        let s: Vec<i64> = o.shape().iter().map(|&v| v as i64).collect();
        let t = guarded(|| self.inner.view_i(&s))?;
        wrap(py, t)
    }
    /// Split dim `dim` into `sizes` (a view).
    fn unflatten(
        &self,
        py: Python<'_>,
        dim: Int,
        sizes: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyTensor>> {
        let dim = dim.0;
        let s = int_or_seq(sizes)?;
        let t = guarded(|| self.inner.unflatten(dim, &s))?;
        wrap(py, t)
    }
    /// Move dims `source` to `destination` (a view).
    fn movedim(
        &self,
        py: Python<'_>,
        source: &Bound<'_, PyAny>,
        destination: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyTensor>> {
        let (s, d) = (int_or_seq(source)?, int_or_seq(destination)?);
        let t = guarded(|| self.inner.movedim(&s, &d))?;
        wrap(py, t)
    }
    /// Alias of `movedim`.
    fn moveaxis(
        &self,
        py: Python<'_>,
        source: &Bound<'_, PyAny>,
        destination: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyTensor>> {
        self.movedim(py, source, destination)
    }
    /// Broadcast to `other`'s shape (a view).
    fn expand_as(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyTensor>> {
        let o = tensor_of(other, "other")?;
        let t = guarded(|| self.inner.expand(o.shape()))?;
        wrap(py, t)
    }
    /// Broadcast to `size` (a view).
    fn broadcast_to(&self, py: Python<'_>, size: &Bound<'_, PyAny>) -> PyResult<Py<PyTensor>> {
        let s = int_or_seq(size)?;
        let t = guarded(|| self.inner.expand_i(&s))?;
        wrap(py, t)
    }
    /// Pieces of `split_size_or_sections` along `dim` (views).
    #[pyo3(signature = (split_size_or_sections, dim = Int(0)), text_signature = "($self, split_size_or_sections, dim=0)")]
    fn split<'py>(
        &self,
        py: Python<'py>,
        split_size_or_sections: &Bound<'py, PyAny>,
        dim: Int,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let dim = dim.0;
        let ts = if split_size_or_sections.is_instance_of::<PyInt>() {
            let n = split_size_or_sections.extract::<Int>()?.0;
            let n = args::non_negative(n, || {
                format!("split expects split_size be non-negative, but got split_size={n}")
            })?;
            guarded(|| self.inner.split(n, dim))?
        } else {
            let s = split_size_or_sections.extract::<Ints>()?.0;
            guarded(|| self.inner.split_with_sizes(&s, dim))?
        };
        wrap_all(py, ts)
    }
    /// Pieces of the given sizes along `dim` (views).
    #[pyo3(signature = (split_sizes, dim = Int(0)), text_signature = "($self, split_sizes, dim=0)")]
    fn split_with_sizes<'py>(
        &self,
        py: Python<'py>,
        split_sizes: Ints,
        dim: Int,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let split_sizes = split_sizes.0;
        let dim = dim.0;
        let ts = guarded(|| self.inner.split_with_sizes(&split_sizes, dim))?;
        wrap_all(py, ts)
    }
    /// At most `chunks` equal pieces along `dim` (views).
    #[pyo3(signature = (chunks, dim = Int(0)), text_signature = "($self, chunks, dim=0)")]
    fn chunk<'py>(&self, py: Python<'py>, chunks: Int, dim: Int) -> PyResult<Bound<'py, PyTuple>> {
        let chunks = chunks.0;
        let dim = dim.0;
        let ts = guarded(|| self.inner.chunk(chunks, dim))?;
        wrap_all(py, ts)
    }
    /// The slices along `dim` (views).
    #[pyo3(signature = (dim = Int(0)), text_signature = "($self, dim=0)")]
    fn unbind<'py>(&self, py: Python<'py>, dim: Int) -> PyResult<Bound<'py, PyTuple>> {
        let dim = dim.0;
        let ts = guarded(|| self.inner.unbind(dim))?;
        wrap_all(py, ts)
    }
    /// Reverse along `dims` (a copy); `flip(0, 1)`, `flip((0, 1))` or `flip(dims=(0, 1))`.
    #[pyo3(signature = (*args, **kwargs))]
    fn flip(
        &self,
        py: Python<'_>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyTensor>> {
        let d = match kwargs.and_then(|k| k.get_item("dims").ok().flatten()) {
            Some(v) if args.is_empty() => int_or_seq(&v)?,
            _ => dims_arg(args)?,
        };
        let t = guarded(|| self.inner.flip(&d))?;
        wrap(py, t)
    }
    /// Shift elements cyclically (a copy).
    #[pyo3(signature = (shifts, dims=None))]
    fn roll(
        &self,
        py: Python<'_>,
        shifts: &Bound<'_, PyAny>,
        dims: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyTensor>> {
        let s = int_or_seq(shifts)?;
        let d = match dims {
            Some(d) if !d.is_none() => int_or_seq(d)?,
            _ => Vec::new(),
        };
        let t = guarded(|| self.inner.roll(&s, &d))?;
        wrap(py, t)
    }
    /// Tile `sizes[i]` times along each dim (a copy).
    #[pyo3(signature = (*sizes))]
    fn repeat(&self, py: Python<'_>, sizes: &Bound<'_, PyTuple>) -> PyResult<Py<PyTensor>> {
        let s = dims_arg(sizes)?;
        let t = guarded(|| self.inner.repeat(&s))?;
        wrap(py, t)
    }
    /// `repeat` with missing leading sizes taken as 1 (a copy).
    #[pyo3(signature = (*dims))]
    fn tile(&self, py: Python<'_>, dims: &Bound<'_, PyTuple>) -> PyResult<Py<PyTensor>> {
        let s = dims_arg(dims)?;
        let t = guarded(|| self.inner.tile(&s))?;
        wrap(py, t)
    }

    // ----- indexing -----

    /// Advanced indexing with one optional index tensor per leading dim.
    fn _index(&self, py: Python<'_>, indices: &Bound<'_, PyAny>) -> PyResult<Py<PyTensor>> {
        let ix = super::opt_tensors(indices, "indices")?;
        let t = guarded(|| self.inner.index(&ix))?;
        wrap(py, t)
    }
    /// Out-of-place `index_put`.
    #[pyo3(signature = (indices, values, accumulate=false))]
    fn index_put(
        &self,
        py: Python<'_>,
        indices: &Bound<'_, PyAny>,
        values: &Bound<'_, PyAny>,
        accumulate: bool,
    ) -> PyResult<Py<PyTensor>> {
        let ix = super::opt_tensors(indices, "indices")?;
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
        let ix = super::opt_tensors(indices, "indices")?;
        let v = operand(values)?;
        guarded(|| slf.get().inner.index_put_(&ix, &v, accumulate))?;
        Ok(slf.clone().unbind())
    }
    /// Elements along `dim` at `index`.
    fn index_select(
        &self,
        py: Python<'_>,
        dim: Int,
        index: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyTensor>> {
        let dim = dim.0;
        let i = tensor_of(index, "index")?;
        let t = guarded(|| self.inner.index_select(dim, &i))?;
        wrap(py, t)
    }
    /// Values along `dim` at `index`, shaped like `index`.
    fn gather(&self, py: Python<'_>, dim: Int, index: &Bound<'_, PyAny>) -> PyResult<Py<PyTensor>> {
        let dim = dim.0;
        let i = tensor_of(index, "index")?;
        let t = guarded(|| self.inner.gather(dim, &i))?;
        wrap(py, t)
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
    /// A copy with `src` added along `dim` at `index`.
    fn scatter_add(
        &self,
        py: Python<'_>,
        dim: Int,
        index: &Bound<'_, PyAny>,
        src: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyTensor>> {
        let dim = dim.0;
        let i = tensor_of(index, "index")?;
        let s = tensor_of(src, "src")?;
        let t = guarded(|| self.inner.scatter_add(dim, &i, &s))?;
        wrap(py, t)
    }
    /// A copy with `alpha * source` added along `dim` at `index`.
    #[pyo3(signature = (dim, index, source, *, alpha=1.0))]
    fn index_add(
        &self,
        py: Python<'_>,
        dim: Int,
        index: &Bound<'_, PyAny>,
        source: &Bound<'_, PyAny>,
        alpha: f64,
    ) -> PyResult<Py<PyTensor>> {
        let dim = dim.0;
        let i = tensor_of(index, "index")?;
        let s = tensor_of(source, "source")?;
        let t = guarded(|| self.inner.index_add(dim, &i, &s, alpha))?;
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
    /// The elements where `mask` is true (1-D).
    fn masked_select(&self, py: Python<'_>, mask: &Bound<'_, PyAny>) -> PyResult<Py<PyTensor>> {
        let m = tensor_of(mask, "mask")?;
        let t = guarded(|| self.inner.masked_select(&m))?;
        wrap(py, t)
    }
    /// `gather` with broadcasting; flattened without `dim`.
    #[pyo3(signature = (indices, dim=None))]
    fn take_along_dim(
        &self,
        py: Python<'_>,
        indices: &Bound<'_, PyAny>,
        dim: Option<Int>,
    ) -> PyResult<Py<PyTensor>> {
        let dim = dim.map(|v| v.0);
        let i = tensor_of(indices, "indices")?;
        let t = guarded(|| self.inner.take_along_dim(&i, dim))?;
        wrap(py, t)
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

    // ----- linear algebra -----

    /// Strict 2-D matrix product.
    fn mm(&self, py: Python<'_>, mat2: &Bound<'_, PyAny>) -> PyResult<Py<PyTensor>> {
        let m = tensor_of(mat2, "mat2")?;
        let t = guarded(|| self.inner.mm(&m))?;
        wrap(py, t)
    }
    /// Strict 3-D batched matrix product.
    fn bmm(&self, py: Python<'_>, mat2: &Bound<'_, PyAny>) -> PyResult<Py<PyTensor>> {
        let m = tensor_of(mat2, "mat2")?;
        let t = guarded(|| self.inner.bmm(&m))?;
        wrap(py, t)
    }
    /// Outer product of two vectors.
    fn outer(&self, py: Python<'_>, vec2: &Bound<'_, PyAny>) -> PyResult<Py<PyTensor>> {
        let v = tensor_of(vec2, "vec2")?;
        let t = guarded(|| self.inner.outer(&v))?;
        wrap(py, t)
    }
    /// Sum of the main diagonal.
    fn trace(&self, py: Python<'_>) -> PyResult<Py<PyTensor>> {
        let t = guarded(|| self.inner.trace())?;
        wrap(py, t)
    }
    /// Vector → diagonal matrix; matrix → diagonal.
    #[pyo3(signature = (diagonal = Int(0)), text_signature = "($self, diagonal=0)")]
    fn diag(&self, py: Python<'_>, diagonal: Int) -> PyResult<Py<PyTensor>> {
        let diagonal = diagonal.0;
        let t = guarded(|| self.inner.diag(diagonal))?;
        wrap(py, t)
    }
    /// A diagonal as the last dim (a view).
    #[pyo3(signature = (offset = Int(0), dim1 = Int(0), dim2 = Int(1)), text_signature = "($self, offset=0, dim1=0, dim2=1)")]
    fn diagonal(
        &self,
        py: Python<'_>,
        offset: Int,
        dim1: Int,
        dim2: Int,
    ) -> PyResult<Py<PyTensor>> {
        let offset = offset.0;
        let dim1 = dim1.0;
        let dim2 = dim2.0;
        let t = guarded(|| self.inner.diagonal(offset, dim1, dim2))?;
        wrap(py, t)
    }
    /// Lower triangle.
    #[pyo3(signature = (diagonal = Int(0)), text_signature = "($self, diagonal=0)")]
    fn tril(&self, py: Python<'_>, diagonal: Int) -> PyResult<Py<PyTensor>> {
        let diagonal = diagonal.0;
        let t = guarded(|| self.inner.tril(diagonal))?;
        wrap(py, t)
    }
    /// Upper triangle.
    #[pyo3(signature = (diagonal = Int(0)), text_signature = "($self, diagonal=0)")]
    fn triu(&self, py: Python<'_>, diagonal: Int) -> PyResult<Py<PyTensor>> {
        let diagonal = diagonal.0;
        let t = guarded(|| self.inner.triu(diagonal))?;
        wrap(py, t)
    }
}

/// Concatenate tensors along `dim`.
#[pyfunction]
#[pyo3(signature = (tensors, dim = Int(0)), text_signature = "(tensors, dim=0)")]
fn _cat(py: Python<'_>, tensors: &Bound<'_, PyAny>, dim: Int) -> PyResult<Py<PyTensor>> {
    let dim = dim.0;
    let ts = super::tensors(tensors, "cat(): tensors")?;
    let t = guarded(|| Tensor::cat(&ts, dim))?;
    wrap(py, t)
}

/// Stack tensors along a new dim.
#[pyfunction]
#[pyo3(signature = (tensors, dim = Int(0)), text_signature = "(tensors, dim=0)")]
fn _stack(py: Python<'_>, tensors: &Bound<'_, PyAny>, dim: Int) -> PyResult<Py<PyTensor>> {
    let dim = dim.0;
    let ts = super::tensors(tensors, "stack(): tensors")?;
    let t = guarded(|| Tensor::stack(&ts, dim))?;
    wrap(py, t)
}

/// Einstein summation.
#[pyfunction]
fn _einsum(py: Python<'_>, equation: &str, operands: &Bound<'_, PyAny>) -> PyResult<Py<PyTensor>> {
    let ts = super::tensors(operands, "einsum(): operands")?;
    let t = guarded(|| Tensor::einsum(equation, &ts))?;
    wrap(py, t)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_cat, m)?)?;
    m.add_function(wrap_pyfunction!(_stack, m)?)?;
    m.add_function(wrap_pyfunction!(_einsum, m)?)?;
    Ok(())
}
