//! Bindings of `crate::tensor::creation`: the `_C` constructors behind `ferrograd.full`,
//! `arange`, `linspace`, `eye`, `rand`, `randn`, `randperm` and `from_numpy`.

use pyo3::prelude::*;

use super::args::{self, Int};
use super::errors::guarded;
use super::tensor::{wrap, PyTensor};
use super::{numpy_interop, PyDType};
use crate::tensor::Tensor;

fn shape_of(shape: &Bound<'_, PyAny>) -> PyResult<Vec<usize>> {
    args::shape(&shape.extract::<args::Ints>()?.0)
}

/// A tensor from a NumPy array: `share=True` keeps the memory (from_numpy), else copies.
#[pyfunction]
fn _from_numpy(py: Python<'_>, array: &Bound<'_, PyAny>, share: bool) -> PyResult<Py<PyTensor>> {
    wrap(py, numpy_interop::from_numpy(array, share)?)
}

/// A tensor filled with `value`.
#[pyfunction]
fn _full(
    py: Python<'_>,
    shape: &Bound<'_, PyAny>,
    value: f64,
    dtype: PyRef<'_, PyDType>,
) -> PyResult<Py<PyTensor>> {
    let s = shape_of(shape)?;
    wrap(py, guarded(|| Tensor::try_full(&s, value, dtype.d))?)
}

/// Values from `start` to `end` by `step`.
#[pyfunction]
fn _arange(
    py: Python<'_>,
    start: f64,
    end: f64,
    step: f64,
    dtype: PyRef<'_, PyDType>,
) -> PyResult<Py<PyTensor>> {
    wrap(py, guarded(|| Tensor::arange(start, end, step, dtype.d))?)
}

/// `steps` evenly spaced values from `start` to `end`.
#[pyfunction]
fn _linspace(
    py: Python<'_>,
    start: f64,
    end: f64,
    steps: Int,
    dtype: PyRef<'_, PyDType>,
) -> PyResult<Py<PyTensor>> {
    let steps = steps.0;
    let steps = args::non_negative(steps, || "number of steps must be non-negative".into())?;
    wrap(
        py,
        guarded(|| Tensor::linspace(start, end, steps, dtype.d))?,
    )
}

/// `steps` values `base ** x` for `x` evenly spaced from `start` to `end`.
#[pyfunction]
fn _logspace(
    py: Python<'_>,
    start: f64,
    end: f64,
    steps: Int,
    base: f64,
    dtype: PyRef<'_, PyDType>,
) -> PyResult<Py<PyTensor>> {
    let steps = args::non_negative(steps.0, || "number of steps must be non-negative".into())?;
    wrap(
        py,
        guarded(|| Tensor::logspace(start, end, steps, base, dtype.d))?,
    )
}

/// Integers drawn uniformly from `[low, high)`, from a generator seeded with `seed` when
/// given (how a Python `Generator` draws), else from the global one.
#[pyfunction]
#[pyo3(signature = (low, high, shape, dtype, seed=None))]
fn _randint(
    py: Python<'_>,
    low: Int,
    high: Int,
    shape: &Bound<'_, PyAny>,
    dtype: PyRef<'_, PyDType>,
    seed: Option<u64>,
) -> PyResult<Py<PyTensor>> {
    let s = shape_of(shape)?;
    let draw = || Tensor::randint(low.0, high.0, &s, dtype.d);
    let t = match seed {
        None => guarded(draw)?,
        Some(seed) => {
            let saved = crate::tensor::creation::rng_state();
            crate::tensor::creation::reseed(seed);
            let r = guarded(draw);
            crate::tensor::creation::set_rng_state(&saved);
            r?
        }
    };
    wrap(py, t)
}

/// The coordinates of a `row` x `col` matrix's lower (or, with `upper`, upper) triangle.
#[pyfunction]
fn _triangle_indices(
    py: Python<'_>,
    row: Int,
    col: Int,
    offset: Int,
    upper: bool,
) -> PyResult<Py<PyTensor>> {
    let row = args::non_negative(row.0, || format!("row must be non-negative, got{}", row.0))?;
    let col = args::non_negative(col.0, || format!("col must be non-negative, got{}", col.0))?;
    wrap(
        py,
        guarded(|| Tensor::triangle_indices(row, col, offset.0, upper))?,
    )
}

/// The seed of the global generator (the last `manual_seed`, or the default one).
#[pyfunction]
fn _initial_seed() -> u64 {
    crate::tensor::creation::initial_seed()
}

/// An identity matrix.
#[pyfunction]
fn _eye(py: Python<'_>, n: Int, m: Int, dtype: PyRef<'_, PyDType>) -> PyResult<Py<PyTensor>> {
    let n = n.0;
    let m = m.0;
    let n = args::non_negative(n, || format!("n must be greater or equal to 0, got {n}"))?;
    let m = args::non_negative(m, || format!("m must be greater or equal to 0, got {m}"))?;
    wrap(py, guarded(|| Tensor::eye(n, m, dtype.d))?)
}

/// Random tensors of a shape, `name => Tensor constructor, "doc"` each.
macro_rules! random_tensors {
    ($($name:ident => $make:path, $doc:literal;)*) => {
        $(
            #[doc = $doc]
            #[pyfunction]
            fn $name(
                py: Python<'_>,
                shape: &Bound<'_, PyAny>,
                dtype: PyRef<'_, PyDType>,
            ) -> PyResult<Py<PyTensor>> {
                let s = shape_of(shape)?;
                wrap(py, guarded(|| $make(&s, dtype.d))?)
            }
        )*
    };
}

random_tensors! {
    _rand => Tensor::rand, "Uniform [0, 1) samples.";
    _randn => Tensor::randn, "Standard normal samples.";
}

/// A random permutation of `0..n` (int64), from the global generator or a seeded one.
#[pyfunction]
#[pyo3(signature = (n, seed=None))]
fn _randperm(py: Python<'_>, n: Int, seed: Option<u64>) -> PyResult<Py<PyTensor>> {
    let n = args::non_negative(n.0, || {
        format!(
            "Expected a non-negative number of elements for randperm, but got n={}",
            n.0
        )
    })?;
    wrap(py, guarded(|| Tensor::randperm(n, seed))?)
}

/// A snapshot of the global random generator (opaque; for `_set_rng_state`).
#[pyclass(name = "RngState", module = "ferrograd._C", frozen)]
pub struct PyRngState {
    inner: crate::tensor::creation::RngState,
}

/// The global generator's state now.
#[pyfunction]
fn _get_rng_state() -> PyRngState {
    PyRngState {
        inner: crate::tensor::creation::rng_state(),
    }
}

/// Put the global generator back to a state from `_get_rng_state`.
#[pyfunction]
fn _set_rng_state(state: PyRef<'_, PyRngState>) {
    crate::tensor::creation::set_rng_state(&state.inner);
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyRngState>()?;
    m.add_function(wrap_pyfunction!(_get_rng_state, m)?)?;
    m.add_function(wrap_pyfunction!(_set_rng_state, m)?)?;
    m.add_function(wrap_pyfunction!(_from_numpy, m)?)?;
    m.add_function(wrap_pyfunction!(_full, m)?)?;
    m.add_function(wrap_pyfunction!(_arange, m)?)?;
    m.add_function(wrap_pyfunction!(_linspace, m)?)?;
    m.add_function(wrap_pyfunction!(_eye, m)?)?;
    m.add_function(wrap_pyfunction!(_rand, m)?)?;
    m.add_function(wrap_pyfunction!(_randn, m)?)?;
    m.add_function(wrap_pyfunction!(_randperm, m)?)?;
    m.add_function(wrap_pyfunction!(_randint, m)?)?;
    m.add_function(wrap_pyfunction!(_logspace, m)?)?;
    m.add_function(wrap_pyfunction!(_triangle_indices, m)?)?;
    m.add_function(wrap_pyfunction!(_initial_seed, m)?)?;
    Ok(())
}
