//! Bindings of the sliding-window ops used by `ferrograd.nn.functional`: im2col (`unfold`),
//! col2im (`fold`) and `pad`.

use pyo3::prelude::*;

use crate::python::args::Ints;

use super::errors::{guarded, IntoPyResult};
use super::tensor::{tensor_of, wrap, PyTensor};
use crate::ops::nn::conv::{col2im_shape_check, im2col_args_check};
use crate::ops::nn::padding::{pad, PadMode};

/// Values that a check has already found non-negative, as sizes.
fn checked(v: &[i64]) -> Vec<usize> {
    v.iter().map(|&x| x.max(0) as usize).collect()
}

/// `unfold` (im2col): `(N, C, *spatial)` to `(N, C*prod(kernel_size), L)`. The integer
/// arguments are checked (torch's messages) before they become sizes.
#[pyfunction]
fn _nn_im2col(
    py: Python<'_>,
    input: &Bound<'_, PyAny>,
    kernel_size: Ints,
    dilation: Ints,
    padding: Ints,
    stride: Ints,
) -> PyResult<Py<PyTensor>> {
    let kernel_size = kernel_size.0;
    let dilation = dilation.0;
    let padding = padding.0;
    let stride = stride.0;
    let x = tensor_of(input, "input")?;
    im2col_args_check(&kernel_size, &dilation, &padding, &stride).py()?;
    let (k, d) = (checked(&kernel_size), checked(&dilation));
    let (p, s) = (checked(&padding), checked(&stride));
    wrap(py, guarded(|| x.im2col(&k, &d, &p, &s))?)
}

/// `fold` (col2im): `(N, C*prod(kernel_size), L)` to `(N, C, *output_size)`, checked like
/// `_nn_im2col`.
#[pyfunction]
fn _nn_col2im(
    py: Python<'_>,
    input: &Bound<'_, PyAny>,
    output_size: Ints,
    kernel_size: Ints,
    dilation: Ints,
    padding: Ints,
    stride: Ints,
) -> PyResult<Py<PyTensor>> {
    let output_size = output_size.0;
    let kernel_size = kernel_size.0;
    let dilation = dilation.0;
    let padding = padding.0;
    let stride = stride.0;
    let x = tensor_of(input, "input")?;
    col2im_shape_check(
        x.shape(),
        &output_size,
        &kernel_size,
        &dilation,
        &padding,
        &stride,
    )
    .py()?;
    let o = checked(&output_size);
    let (k, d) = (checked(&kernel_size), checked(&dilation));
    let (p, s) = (checked(&padding), checked(&stride));
    wrap(py, guarded(|| x.col2im(&o, &k, &d, &p, &s))?)
}

/// `pad` (`mode` one of "constant", "reflect", "replicate", "circular"; `value` for constant).
#[pyfunction]
fn _nn_pad(
    py: Python<'_>,
    input: &Bound<'_, PyAny>,
    pads: Ints,
    mode: &str,
    value: f64,
) -> PyResult<Py<PyTensor>> {
    let x = tensor_of(input, "input")?;
    let mode = match mode {
        "constant" => PadMode::Constant(value),
        "reflect" => PadMode::Reflect,
        "replicate" => PadMode::Replicate,
        "circular" => PadMode::Circular,
        other => {
            return Err(pyo3::exceptions::PyNotImplementedError::new_err(format!(
                "Unrecognised padding mode {other}"
            )))
        }
    };
    wrap(py, guarded(|| pad(&x, &pads.0, mode))?)
}

/// Register the nn bindings on `ferrograd._C`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_nn_im2col, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_col2im, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_pad, m)?)?;
    Ok(())
}
