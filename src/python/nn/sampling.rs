//! Bindings of `crate::ops::nn::sampling`: `interpolate` and the pixel/channel shuffles.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::ops::nn::sampling::{self, InterpMode};
use crate::python::args::{Int, Ints};
use crate::python::errors::detached;
use crate::python::tensor::{tensor_of, wrap, PyTensor};

/// `input` resampled to `size` or by `scale_factor` (exactly one given, one entry per spatial
/// dim); `mode` one of nearest, nearest-exact, linear, cubic, area; `antialias` for linear and
/// cubic over 2 dims.
#[pyfunction]
#[pyo3(signature = (input, size, scale_factor, mode, align_corners, antialias=false))]
fn _nn_interpolate(
    py: Python<'_>,
    input: &Bound<'_, PyAny>,
    size: Option<Ints>,
    scale_factor: Option<Vec<f64>>,
    mode: &str,
    align_corners: bool,
    antialias: bool,
) -> PyResult<Py<PyTensor>> {
    let x = tensor_of(input, "input")?;
    let mode = match mode {
        "nearest" => InterpMode::Nearest,
        "nearest-exact" => InterpMode::NearestExact,
        "linear" => InterpMode::Linear,
        "cubic" => InterpMode::Cubic,
        "area" => InterpMode::Area,
        other => {
            return Err(PyValueError::new_err(format!(
                "unknown interpolation mode {other:?}"
            )))
        }
    };
    let size = size.map(|s| s.0);
    let out = detached(py, || {
        sampling::interpolate(
            &x,
            size.as_deref(),
            scale_factor.as_deref(),
            mode,
            align_corners,
            antialias,
        )
    })?;
    wrap(py, out)
}

/// `pixel_shuffle` (`kind` "shuffle"), `pixel_unshuffle` ("unshuffle") or `channel_shuffle`
/// ("channel") of `input` by `factor`.
#[pyfunction]
#[pyo3(signature = (kind, input, factor))]
fn _nn_shuffle(
    py: Python<'_>,
    kind: &str,
    input: &Bound<'_, PyAny>,
    factor: Int,
) -> PyResult<Py<PyTensor>> {
    let x = tensor_of(input, "input")?;
    let f = factor.0;
    let op = match kind {
        "shuffle" => sampling::pixel_shuffle,
        "unshuffle" => sampling::pixel_unshuffle,
        "channel" => sampling::channel_shuffle,
        other => return Err(PyValueError::new_err(format!("unknown shuffle {other:?}"))),
    };
    let out = detached(py, || op(&x, f))?;
    wrap(py, out)
}

/// Register the resampling bindings on `ferrograd._C`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_nn_interpolate, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_shuffle, m)?)?;
    Ok(())
}
