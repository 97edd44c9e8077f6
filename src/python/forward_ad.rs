//! Bindings of forward-mode AD (`crate::autograd::forward_ad`), behind
//! `ferrograd.autograd.forward_ad`.

use pyo3::prelude::*;

use super::errors::{guarded, IntoPyResult};
use super::tensor::{wrap, PyTensor};
use crate::autograd::forward_ad;

/// Open a dual level; its number.
#[pyfunction]
fn _enter_dual_level() -> PyResult<u64> {
    forward_ad::enter_dual_level().py()
}

/// Close the open dual level (`level`, when given, must be it).
#[pyfunction]
#[pyo3(signature = (level=None))]
fn _exit_dual_level(level: Option<u64>) -> PyResult<()> {
    forward_ad::exit_dual_level(level).py()
}

/// The open dual level, or None.
#[pyfunction]
fn _current_dual_level() -> Option<u64> {
    forward_ad::current_level()
}

/// A view of `primal` carrying `tangent`.
#[pyfunction]
fn _make_dual(
    py: Python<'_>,
    primal: PyRef<'_, PyTensor>,
    tangent: PyRef<'_, PyTensor>,
) -> PyResult<Py<PyTensor>> {
    let t = guarded(|| forward_ad::make_dual(&primal.inner, &tangent.inner))?;
    wrap(py, t)
}

/// `(primal, tangent or None)`.
#[pyfunction]
fn _unpack_dual(
    py: Python<'_>,
    t: PyRef<'_, PyTensor>,
) -> PyResult<(Py<PyTensor>, Option<Py<PyTensor>>)> {
    let (p, tan) = guarded(|| forward_ad::unpack_dual(&t.inner))?;
    Ok((wrap(py, p)?, tan.map(|x| wrap(py, x)).transpose()?))
}

/// Give `t` a tangent at the open level (what a custom Function's `jvp` returned).
#[pyfunction]
fn _set_tangent(t: PyRef<'_, PyTensor>, tangent: PyRef<'_, PyTensor>) -> PyResult<()> {
    guarded(|| forward_ad::set_output_tangent(&t.inner, &tangent.inner))
}

/// Stop (`True`) or resume (`False`) tangent propagation on this thread (a custom Function's
/// forward runs without it: its `jvp` gives the tangents).
#[pyfunction]
fn _suspend_forward_ad(suspend: bool) {
    if suspend {
        forward_ad::suspend_push();
    } else {
        forward_ad::suspend_pop();
    }
}

/// Register the module functions.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_enter_dual_level, m)?)?;
    m.add_function(wrap_pyfunction!(_exit_dual_level, m)?)?;
    m.add_function(wrap_pyfunction!(_current_dual_level, m)?)?;
    m.add_function(wrap_pyfunction!(_make_dual, m)?)?;
    m.add_function(wrap_pyfunction!(_unpack_dual, m)?)?;
    m.add_function(wrap_pyfunction!(_set_tangent, m)?)?;
    m.add_function(wrap_pyfunction!(_suspend_forward_ad, m)?)?;
    Ok(())
}
