//! Bindings of `crate::autocast`: the thread's autocast state, which `ferrograd.autocast` sets,
//! and the operand casts the Python wrappers of lower-precision and float32 ops apply.

use pyo3::prelude::*;

use super::errors::{guarded, IntoPyResult};
use super::tensor::{wrap, PyTensor};
use super::{dtype_object, PyDType};
use crate::autocast;
use crate::error::Result;
use crate::tensor::Tensor;

/// The operands of an op torch's CPU autocast runs in lower precision (the products, linear,
/// convolutions, attention, prelu): cast to the autocast dtype inside an enabled region,
/// unchanged otherwise. Done here, in the bindings, so the check costs these hot ops no Python.
pub(crate) fn lowered<const N: usize>(ts: [&Tensor; N]) -> Result<[Tensor; N]> {
    let mut out = ts.map(Tensor::clone);
    if autocast::is_enabled() {
        for t in &mut out {
            *t = autocast::lower(t)?;
        }
    }
    Ok(out)
}

/// [`lowered`] for an optional operand (a bias, a mask).
pub(crate) fn lowered_opt(t: Option<&Tensor>) -> Result<Option<Tensor>> {
    t.map(|t| lowered([t]).map(|[t]| t)).transpose()
}

/// Whether CPU autocast is on in this thread.
#[pyfunction]
fn _is_autocast_enabled() -> bool {
    autocast::is_enabled()
}

/// Turn CPU autocast on or off in this thread.
#[pyfunction]
fn _set_autocast_enabled(enabled: bool) {
    autocast::set_enabled(enabled)
}

/// The dtype lower-precision ops run in under CPU autocast.
#[pyfunction]
fn _get_autocast_dtype(py: Python<'_>) -> PyResult<Py<PyDType>> {
    dtype_object(py, autocast::dtype())
}

/// Set the dtype of CPU autocast (bfloat16 or float16).
#[pyfunction]
fn _set_autocast_dtype(d: PyRef<'_, PyDType>) -> PyResult<()> {
    autocast::set_dtype(d.d).py()
}

/// Whether weights' casts are cached within an autocast region.
#[pyfunction]
fn _is_autocast_cache_enabled() -> bool {
    autocast::is_cache_enabled()
}

/// Turn the autocast cast cache on or off.
#[pyfunction]
fn _set_autocast_cache_enabled(enabled: bool) {
    autocast::set_cache_enabled(enabled)
}

/// Enter one autocast level; returns the depth.
#[pyfunction]
fn _autocast_increment_nesting() -> usize {
    autocast::increment_nesting()
}

/// Leave one autocast level; returns the depth left.
#[pyfunction]
fn _autocast_decrement_nesting() -> usize {
    autocast::decrement_nesting()
}

/// Drop the cached casts of weights.
#[pyfunction]
fn _clear_autocast_cache() {
    autocast::clear_cache()
}

/// The operands of an op under autocast: each tensor cast to the autocast dtype
/// (`to_float32` false) or to float32; anything else (None, numbers) passed through.
#[pyfunction]
fn _autocast_cast(
    py: Python<'_>,
    operands: Vec<Bound<'_, PyAny>>,
    to_float32: bool,
) -> PyResult<Vec<Py<PyAny>>> {
    operands
        .into_iter()
        .map(|o| {
            let Ok(t) = o.cast::<PyTensor>() else {
                return Ok(o.unbind());
            };
            let t = t.get().inner.clone();
            let cast = guarded(|| {
                if to_float32 {
                    autocast::float32(&t)
                } else {
                    autocast::lower(&t)
                }
            })?;
            Ok(wrap(py, cast)?.into_any())
        })
        .collect()
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_is_autocast_enabled, m)?)?;
    m.add_function(wrap_pyfunction!(_set_autocast_enabled, m)?)?;
    m.add_function(wrap_pyfunction!(_get_autocast_dtype, m)?)?;
    m.add_function(wrap_pyfunction!(_set_autocast_dtype, m)?)?;
    m.add_function(wrap_pyfunction!(_is_autocast_cache_enabled, m)?)?;
    m.add_function(wrap_pyfunction!(_set_autocast_cache_enabled, m)?)?;
    m.add_function(wrap_pyfunction!(_autocast_increment_nesting, m)?)?;
    m.add_function(wrap_pyfunction!(_autocast_decrement_nesting, m)?)?;
    m.add_function(wrap_pyfunction!(_clear_autocast_cache, m)?)?;
    m.add_function(wrap_pyfunction!(_autocast_cast, m)?)?;
    Ok(())
}
