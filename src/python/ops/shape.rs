//! Bindings of the shape ops (`crate::ops::shape`): views, reshapes, splits, concatenation,
//! flips and repeats. Argument parsing only.

use pyo3::prelude::*;

use pyo3::types::{PyDict, PyInt, PyTuple};

use crate::ops::shape::combine::MeshIndexing;
use crate::python::args::{self, Int, Ints};
use crate::python::bind::{dims_arg, int_or_seq, tensor_methods, IntOrSeq};
use crate::python::errors::guarded;
use crate::python::tensor::{wrap, wrap_all, PyTensor};
use crate::tensor::Tensor;

tensor_methods! {
    /// Same elements with another shape (a view when possible).
    #[pyo3(signature = (*shape))]
    fn reshape(x, shape: &Bound<'_, PyTuple>) => x.reshape_i(&shape);

    /// A view with another shape.
    #[pyo3(signature = (*shape))]
    fn view(x, shape: &Bound<'_, PyTuple>) => x.view_i(&shape);

    /// A view with `other`'s shape.
    fn view_as(x, other: &Bound<'_, PyAny>) =>
        x.view_i(&other.shape().iter().map(|&v| v as i64).collect::<Vec<_>>());

    /// All dimensions reversed.
    #[getter(T)]
    fn big_t(x) => x.permute(&(0..x.dim() as i64).rev().collect::<Vec<_>>());

    /// The last two dimensions swapped.
    #[getter(mT)]
    fn m_t(x) => x.transpose(-2, -1);

    /// Swap two dimensions.
    fn transpose(x, dim0: Int, dim1: Int) => x.transpose(dim0, dim1);

    /// Matrix transpose (≤ 2-D).
    fn t(x) => x.t();

    /// Reorder dimensions.
    #[pyo3(signature = (*dims))]
    fn permute(x, dims: &Bound<'_, PyTuple>) => x.permute(&dims);

    /// Insert a size-1 dimension.
    fn unsqueeze(x, dim: Int) => x.unsqueeze(dim);

    /// Remove size-1 dimensions.
    #[pyo3(signature = (dim=None))]
    fn squeeze(x, dim: Option<Int>) => x.squeeze(dim);

    /// Broadcast to a shape without copying (-1 keeps a size).
    #[pyo3(signature = (*sizes))]
    fn expand(x, sizes: &Bound<'_, PyTuple>) => x.expand_i(&sizes);

    /// Same elements with `other`'s shape (a view when possible).
    fn reshape_as(x, other: &Bound<'_, PyAny>) => x.reshape(other.shape());

    /// Broadcast to `other`'s shape (a view).
    fn expand_as(x, other: &Bound<'_, PyAny>) => x.expand(other.shape());

    /// Broadcast to `size` (a view).
    fn broadcast_to(x, size: IntOrSeq<'_>) => x.expand_i(&size);

    /// The `n`-th forward difference along `dim`, after `prepend`/`append` are joined on.
    #[pyo3(
        signature = (n = Int(1), dim = Int(-1), prepend = None, append = None),
        text_signature = "($self, n=1, dim=-1, prepend=None, append=None)"
    )]
    fn diff(x, n: Int, dim: Int, prepend: Option<&Bound<'_, PyAny>>, append: Option<&Bound<'_, PyAny>>) =>
        x.diff(n, dim, prepend.as_ref(), append.as_ref());

    /// Rotated by 90 degrees `k` times in the plane of `dims`.
    #[pyo3(signature = (k = Int(1), dims = Ints(vec![0, 1])), text_signature = "($self, k=1, dims=[0, 1])")]
    fn rot90(x, k: Int, dims: Ints) => x.rot90(k, &dims);

    /// At least one dim (a scalar becomes `[1]`).
    fn _atleast_1d(x) => x.atleast_1d();

    /// At least two dims.
    fn _atleast_2d(x) => x.atleast_2d();

    /// At least three dims.
    fn _atleast_3d(x) => x.atleast_3d();

    /// Flatten dims `start_dim..=end_dim`.
    #[pyo3(signature = (start_dim = Int(0), end_dim = Int(-1)), text_signature = "($self, start_dim=0, end_dim=-1)")]
    fn flatten(x, start_dim: Int, end_dim: Int) => x.flatten(start_dim, end_dim);

    /// Split dim `dim` into `sizes` (a view).
    fn unflatten(x, dim: Int, sizes: IntOrSeq<'_>) => x.unflatten(dim, &sizes);

    /// Move dims `source` to `destination` (a view).
    fn movedim(x, source: IntOrSeq<'_>, destination: IntOrSeq<'_>) =>
        x.movedim(&source, &destination);

    /// Alias of `movedim`.
    fn moveaxis(x, source: IntOrSeq<'_>, destination: IntOrSeq<'_>) =>
        x.movedim(&source, &destination);

    /// Elements `start..stop` by `step` along `dim` (a view).
    #[pyo3(signature = (dim, start, stop, step))]
    fn _slice(x, dim: Int, start: Option<Int>, stop: Option<Int>, step: Int) =>
        x.slice(dim, start, stop, step);

    /// The sub-tensor at `index` along `dim` (a view).
    fn select(x, dim: Int, index: Int) => x.select(dim, index);

    /// Shift elements cyclically (a copy).
    #[pyo3(signature = (shifts, dims=None))]
    fn roll(x, shifts: IntOrSeq<'_>, dims: Option<IntOrSeq<'_>>) => x.roll(&shifts, &dims);

    /// Tile `sizes[i]` times along each dim (a copy).
    #[pyo3(signature = (*sizes))]
    fn repeat(x, sizes: &Bound<'_, PyTuple>) => x.repeat(&sizes);

    /// `repeat` with missing leading sizes taken as 1 (a copy).
    #[pyo3(signature = (*dims))]
    fn tile(x, dims: &Bound<'_, PyTuple>) => x.tile(&dims);
}

#[pymethods]
impl PyTensor {
    /// `length` elements from `start` along `dim` (a view).
    fn narrow(&self, py: Python<'_>, dim: Int, start: Int, length: Int) -> PyResult<Py<PyTensor>> {
        let dim = dim.0;
        let start = start.0;
        let length = length.0;
        // torch rejects a 0-dim tensor before looking at the length; the crate op says so.
        let length = if self.inner.dim() == 0 {
            0
        } else {
            args::non_negative(length, || "narrow(): length must be non-negative.".into())?
        };
        let t = guarded(|| self.inner.narrow(dim, start, length))?;
        wrap(py, t)
    }
    /// Every window of `size` elements along `dimension`, `step` apart, as a new last dimension
    /// (a view; windows overlap when `step < size`).
    fn unfold(
        &self,
        py: Python<'_>,
        dimension: Int,
        size: Int,
        step: Int,
    ) -> PyResult<Py<PyTensor>> {
        let t = guarded(|| self.inner.unfold(dimension.0, size.0, step.0))?;
        wrap(py, t)
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
}

/// Concatenate tensors along `dim`.
#[pyfunction]
#[pyo3(signature = (tensors, dim = Int(0)), text_signature = "(tensors, dim=0)")]
fn _cat(py: Python<'_>, tensors: &Bound<'_, PyAny>, dim: Int) -> PyResult<Py<PyTensor>> {
    let dim = dim.0;
    let ts = crate::python::tensors(tensors, "cat(): tensors")?;
    let t = guarded(|| Tensor::cat(&ts, dim))?;
    wrap(py, t)
}

/// Stack tensors along a new dim.
#[pyfunction]
#[pyo3(signature = (tensors, dim = Int(0)), text_signature = "(tensors, dim=0)")]
fn _stack(py: Python<'_>, tensors: &Bound<'_, PyAny>, dim: Int) -> PyResult<Py<PyTensor>> {
    let dim = dim.0;
    let ts = crate::python::tensors(tensors, "stack(): tensors")?;
    let t = guarded(|| Tensor::stack(&ts, dim))?;
    wrap(py, t)
}

/// A function of a list of tensors giving one tensor: `name(tensors) => call;` each, with
/// `ts` the converted list.
macro_rules! list_functions {
    ($($(#[$doc:meta])* fn $name:ident($what:literal) => |$ts:ident| $call:expr;)*) => {
        $(
            $(#[$doc])*
            #[pyfunction]
            fn $name(py: Python<'_>, tensors: &Bound<'_, PyAny>) -> PyResult<Py<PyTensor>> {
                let $ts = crate::python::tensors(tensors, $what)?;
                wrap(py, guarded(|| $call)?)
            }
        )*
    };
}

list_functions! {
    /// Concatenation along dim 1 (dim 0 for vectors).
    fn _hstack("hstack(): tensors") => |ts| Tensor::hstack(&ts);
    /// Concatenation along dim 0 of the inputs made at least 2-D.
    fn _vstack("vstack(): tensors") => |ts| Tensor::vstack(&ts);
    /// Concatenation along dim 2 of the inputs made at least 3-D.
    fn _dstack("dstack(): tensors") => |ts| Tensor::dstack(&ts);
    /// Vectors as columns, concatenated along dim 1.
    fn _column_stack("column_stack(): tensors") => |ts| Tensor::column_stack(&ts);
    /// The inputs on the diagonal of a matrix of zeros.
    fn _block_diag("block_diag(): tensors") => |ts| Tensor::block_diag(&ts);
    /// Every combination of one element from each 1-D tensor, one row each.
    fn _cartesian_prod("cartesian_prod(): tensors") => |ts| Tensor::cartesian_prod(&ts);
}

/// Every tensor expanded to the shape they broadcast to (views).
#[pyfunction]
fn _broadcast_tensors<'py>(
    py: Python<'py>,
    tensors: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyTuple>> {
    let ts = crate::python::tensors(tensors, "broadcast_tensors(): tensors")?;
    wrap_all(py, guarded(|| Tensor::broadcast_tensors(&ts))?)
}

/// Coordinate grids (`indexing` "ij" or "xy").
#[pyfunction]
fn _meshgrid<'py>(
    py: Python<'py>,
    tensors: &Bound<'py, PyAny>,
    indexing: &str,
) -> PyResult<Bound<'py, PyTuple>> {
    let ts = crate::python::tensors(tensors, "meshgrid(): tensors")?;
    let how = match indexing {
        "ij" => MeshIndexing::Ij,
        "xy" => MeshIndexing::Xy,
        _ => {
            return Err(pyo3::exceptions::PyRuntimeError::new_err(format!(
                "torch.meshgrid: indexing must be one of \"xy\" or \"ij\", but received: {indexing}"
            )))
        }
    };
    wrap_all(py, guarded(|| Tensor::meshgrid(&ts, how))?)
}

/// The shape the given shapes broadcast to.
#[pyfunction]
fn _broadcast_shapes(shapes: Vec<Vec<i64>>) -> PyResult<Vec<usize>> {
    let shapes = shapes
        .iter()
        .map(|s| args::shape(s))
        .collect::<PyResult<Vec<_>>>()?;
    Ok(guarded(|| Tensor::broadcast_all_shapes(&shapes))?.to_vec())
}

/// The length-`r` combinations of a vector's elements, one row each.
#[pyfunction]
#[pyo3(
    signature = (input, r = Int(2), with_replacement = false),
    text_signature = "(input, r=2, with_replacement=False)"
)]
fn _combinations(
    py: Python<'_>,
    input: &Bound<'_, PyAny>,
    r: Int,
    with_replacement: bool,
) -> PyResult<Py<PyTensor>> {
    let x = crate::python::tensor::tensor_of(input, "input")?;
    let r = args::non_negative(r.0, || {
        format!("Expect a non-negative number, but got {}", r.0)
    })?;
    wrap(py, guarded(|| x.combinations(r, with_replacement))?)
}

/// The sum of products over `dims_a` of `a` and `dims_b` of `b`.
#[pyfunction]
fn _tensordot(
    py: Python<'_>,
    a: &Bound<'_, PyAny>,
    b: &Bound<'_, PyAny>,
    dims_a: Vec<i64>,
    dims_b: Vec<i64>,
) -> PyResult<Py<PyTensor>> {
    let x = crate::python::tensor::tensor_of(a, "a")?;
    let y = crate::python::tensor::tensor_of(b, "b")?;
    wrap(py, guarded(|| x.tensordot(&y, &dims_a, &dims_b))?)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_hstack, m)?)?;
    m.add_function(wrap_pyfunction!(_vstack, m)?)?;
    m.add_function(wrap_pyfunction!(_dstack, m)?)?;
    m.add_function(wrap_pyfunction!(_column_stack, m)?)?;
    m.add_function(wrap_pyfunction!(_cartesian_prod, m)?)?;
    m.add_function(wrap_pyfunction!(_block_diag, m)?)?;
    m.add_function(wrap_pyfunction!(_broadcast_tensors, m)?)?;
    m.add_function(wrap_pyfunction!(_meshgrid, m)?)?;
    m.add_function(wrap_pyfunction!(_broadcast_shapes, m)?)?;
    m.add_function(wrap_pyfunction!(_combinations, m)?)?;
    m.add_function(wrap_pyfunction!(_tensordot, m)?)?;
    m.add_function(wrap_pyfunction!(_cat, m)?)?;
    m.add_function(wrap_pyfunction!(_stack, m)?)?;
    Ok(())
}
