//! Bindings of convolution and pooling (`ferrograd.nn.functional`'s conv and pool ops): the
//! arguments as torch's Python layer passes them, the work with the GIL released.

use pyo3::prelude::*;

use super::args::Ints;
use super::errors::detached;
use super::tensor::{tensor_of, wrap, PyTensor};
use crate::ops::nn::conv::ConvPadding;

fn optional(obj: Option<&Bound<'_, PyAny>>, what: &str) -> PyResult<Option<crate::tensor::Tensor>> {
    obj.filter(|o| !o.is_none())
        .map(|o| tensor_of(o, what))
        .transpose()
}

/// `conv{nd}d`: `padding` is a list of ints or `'same'` / `'valid'` (checked by the caller).
#[pyfunction]
#[pyo3(signature = (nd, input, weight, bias, stride, padding, dilation, groups))]
#[allow(clippy::too_many_arguments)]
fn _nn_conv(
    py: Python<'_>,
    nd: usize,
    input: &Bound<'_, PyAny>,
    weight: &Bound<'_, PyAny>,
    bias: Option<&Bound<'_, PyAny>>,
    stride: Ints,
    padding: &Bound<'_, PyAny>,
    dilation: Ints,
    groups: i64,
) -> PyResult<Py<PyTensor>> {
    let x = tensor_of(input, "input")?;
    let w = tensor_of(weight, "weight")?;
    let b = optional(bias, "bias")?;
    let pad_str: Option<String> = padding.extract().ok();
    let pad_ints: Vec<i64> = if pad_str.is_some() {
        Vec::new()
    } else {
        padding.extract::<Ints>()?.0
    };
    let out = detached(py, move || {
        let p = match pad_str.as_deref() {
            Some("same") => ConvPadding::Same,
            Some("valid") => ConvPadding::Valid,
            Some(other) => {
                return Err(crate::error::Error::runtime(format!(
                    "Invalid padding string: '{other}'"
                )))
            }
            None => ConvPadding::Explicit(&pad_ints),
        };
        let (s, d) = (&stride.0, &dilation.0);
        match nd {
            1 => x.conv1d(&w, b.as_ref(), s, p, d, groups),
            3 => x.conv3d(&w, b.as_ref(), s, p, d, groups),
            _ => x.conv2d(&w, b.as_ref(), s, p, d, groups),
        }
    })?;
    wrap(py, out)
}

/// `conv_transpose{1,2,3}d` (the rank follows the weight).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn _nn_conv_transpose(
    py: Python<'_>,
    input: &Bound<'_, PyAny>,
    weight: &Bound<'_, PyAny>,
    bias: Option<&Bound<'_, PyAny>>,
    stride: Ints,
    padding: Ints,
    output_padding: Ints,
    groups: i64,
    dilation: Ints,
) -> PyResult<Py<PyTensor>> {
    let x = tensor_of(input, "input")?;
    let w = tensor_of(weight, "weight")?;
    let b = optional(bias, "bias")?;
    let out = detached(py, move || {
        x.conv_transpose(
            &w,
            b.as_ref(),
            &stride.0,
            &padding.0,
            &output_padding.0,
            groups,
            &dilation.0,
        )
    })?;
    wrap(py, out)
}

/// Register the convolution and pooling bindings on `ferrograd._C`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_nn_conv, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_conv_transpose, m)?)?;
    Ok(())
}
