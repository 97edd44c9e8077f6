//! Bindings of batched tensors (`crate::tensor::batched`, `crate::ops::batching`) behind
//! `ferrograd.func.vmap`, with the names of torch's `torch._C._functorch`.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use super::errors::guarded;
use super::tensor::{wrap, PyTensor};
use crate::ops::batching;
use crate::tensor::batched::{self, Randomness};

/// Open a vmap level of `batch_size` samples; its id.
#[pyfunction]
fn _vmap_increment_nesting(batch_size: usize, randomness: &str) -> PyResult<u32> {
    let r = match randomness {
        "error" => Randomness::Error,
        "same" => Randomness::Same,
        "different" => Randomness::Different,
        other => {
            return Err(PyValueError::new_err(format!(
            "Only allowed values for randomness are 'error', 'different', or 'same'. Got {other}"
        )))
        }
    };
    guarded(|| batched::push_level(batch_size, r).map(|l| l.id()))
}

/// Close the innermost vmap level; its id.
#[pyfunction]
fn _vmap_decrement_nesting() -> PyResult<u32> {
    guarded(|| batched::pop_level().map(|l| l.id()))
}

/// `t` seen one sample at a time along `bdim` at level `level`.
#[pyfunction]
fn _add_batch_dim(
    py: Python<'_>,
    t: PyRef<'_, PyTensor>,
    bdim: usize,
    level: u32,
) -> PyResult<Py<PyTensor>> {
    let out = guarded(|| {
        let level = batched::level_by_id(level)?;
        batching::add_batch_dim(&t.inner, bdim, &level)
    })?;
    wrap(py, out)
}

/// The physical tensor of `t` at `level`, batch dimension at `out_dim` (expanded to
/// `batch_size` when `t` is the same for every sample).
#[pyfunction]
fn _remove_batch_dim(
    py: Python<'_>,
    t: PyRef<'_, PyTensor>,
    level: u32,
    batch_size: usize,
    out_dim: usize,
) -> PyResult<Py<PyTensor>> {
    let out = guarded(|| {
        let level = batched::level_by_id(level)?;
        batching::remove_batch_dim(&t.inner, &level, batch_size, out_dim)
    })?;
    wrap(py, out)
}

/// Whether `t` is batched (inside vmap).
#[pyfunction]
fn is_batchedtensor(t: PyRef<'_, PyTensor>) -> bool {
    t.inner.is_batched()
}

/// `(level, bdim)` of a batched tensor, or `(-1, -1)`.
#[pyfunction]
fn _batch_info(t: PyRef<'_, PyTensor>) -> (i64, i64) {
    match t.inner.batch_parts() {
        Some((_, bdim, level)) => (level.id() as i64, bdim as i64),
        None => (-1, -1),
    }
}

/// The physical tensor of a batched `t` (`t` itself otherwise).
#[pyfunction]
fn get_unwrapped(py: Python<'_>, t: PyRef<'_, PyTensor>) -> PyResult<Py<PyTensor>> {
    let v = match t.inner.batch_parts() {
        Some((v, _, _)) => v.clone(),
        None => t.inner.clone(),
    };
    wrap(py, v)
}

/// The innermost open vmap level's `(id, batch size, randomness)`, or None.
#[pyfunction]
fn _current_vmap_level() -> Option<(u32, usize, &'static str)> {
    batched::current_level().map(|l| {
        let r = match l.randomness() {
            Randomness::Error => "error",
            Randomness::Same => "same",
            Randomness::Different => "different",
        };
        (l.id(), l.size(), r)
    })
}

/// Register the module functions.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_vmap_increment_nesting, m)?)?;
    m.add_function(wrap_pyfunction!(_vmap_decrement_nesting, m)?)?;
    m.add_function(wrap_pyfunction!(_add_batch_dim, m)?)?;
    m.add_function(wrap_pyfunction!(_remove_batch_dim, m)?)?;
    m.add_function(wrap_pyfunction!(is_batchedtensor, m)?)?;
    m.add_function(wrap_pyfunction!(_batch_info, m)?)?;
    m.add_function(wrap_pyfunction!(get_unwrapped, m)?)?;
    m.add_function(wrap_pyfunction!(_current_vmap_level, m)?)?;
    Ok(())
}
