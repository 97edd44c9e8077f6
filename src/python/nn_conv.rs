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

/// `conv_transpose{nd}d`.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn _nn_conv_transpose(
    py: Python<'_>,
    nd: usize,
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
        x.conv_transpose_nd(
            nd,
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

/// The single value of a 1-d pooling argument (the caller passes one-element lists).
fn one(v: &[i64]) -> i64 {
    v.first().copied().unwrap_or(0)
}

/// `max_pool{nd}d_with_indices`: values and indices; an empty `stride` means the kernel.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn _nn_max_pool(
    py: Python<'_>,
    nd: usize,
    input: &Bound<'_, PyAny>,
    kernel_size: Ints,
    stride: Ints,
    padding: Ints,
    dilation: Ints,
    ceil_mode: bool,
) -> PyResult<(Py<PyTensor>, Py<PyTensor>)> {
    let x = tensor_of(input, "input")?;
    let (k, s, p, d) = (kernel_size.0, stride.0, padding.0, dilation.0);
    let (v, i) = detached(py, move || match nd {
        1 => x.max_pool1d(one(&k), s.first().copied(), one(&p), one(&d), ceil_mode),
        3 => x.max_pool3d(&k, &s, &p, &d, ceil_mode),
        _ => x.max_pool2d(&k, &s, &p, &d, ceil_mode),
    })?;
    Ok((wrap(py, v)?, wrap(py, i)?))
}

/// `avg_pool{nd}d`; an empty `stride` means the kernel.
#[pyfunction]
#[pyo3(signature = (nd, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override=None))]
#[allow(clippy::too_many_arguments)]
fn _nn_avg_pool(
    py: Python<'_>,
    nd: usize,
    input: &Bound<'_, PyAny>,
    kernel_size: Ints,
    stride: Ints,
    padding: Ints,
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: Option<i64>,
) -> PyResult<Py<PyTensor>> {
    let x = tensor_of(input, "input")?;
    let (k, s, p) = (kernel_size.0, stride.0, padding.0);
    let out = detached(py, move || match nd {
        1 => x.avg_pool1d(
            one(&k),
            s.first().copied(),
            one(&p),
            ceil_mode,
            count_include_pad,
        ),
        3 => x.avg_pool3d(&k, &s, &p, ceil_mode, count_include_pad, divisor_override),
        _ => x.avg_pool2d(&k, &s, &p, ceil_mode, count_include_pad, divisor_override),
    })?;
    wrap(py, out)
}

/// `adaptive_{avg,max}_pool{1,2,3}d` (`kind` "avg" or "max"): the values, and the indices for
/// max pooling.
#[pyfunction]
fn _nn_adaptive_pool(
    py: Python<'_>,
    kind: &str,
    nd: usize,
    input: &Bound<'_, PyAny>,
    output_size: Ints,
) -> PyResult<(Py<PyTensor>, Option<Py<PyTensor>>)> {
    let x = tensor_of(input, "input")?;
    let o = output_size.0;
    let is_max = kind == "max";
    let (v, i) = detached(py, move || {
        Ok(match (is_max, nd) {
            (true, 1) => x.adaptive_max_pool1d(one(&o)).map(|(v, i)| (v, Some(i)))?,
            (true, 2) => x.adaptive_max_pool2d(&o).map(|(v, i)| (v, Some(i)))?,
            (true, _) => x.adaptive_max_pool3d(&o).map(|(v, i)| (v, Some(i)))?,
            (false, 1) => (x.adaptive_avg_pool1d(one(&o))?, None),
            (false, 2) => (x.adaptive_avg_pool2d(&o)?, None),
            (false, _) => (x.adaptive_avg_pool3d(&o)?, None),
        })
    })?;
    Ok((wrap(py, v)?, i.map(|i| wrap(py, i)).transpose()?))
}

/// `max_unpool{2,3}d` to the spatial `output_size` (checked by the caller).
#[pyfunction]
fn _nn_max_unpool(
    py: Python<'_>,
    input: &Bound<'_, PyAny>,
    indices: &Bound<'_, PyAny>,
    output_size: Vec<usize>,
) -> PyResult<Py<PyTensor>> {
    let x = tensor_of(input, "input")?;
    let i = tensor_of(indices, "indices")?;
    wrap(py, detached(py, move || x.max_unpool(&i, &output_size))?)
}

/// `lp_pool{1,2,3}d` (`stride` empty: the kernel size).
#[pyfunction]
fn _nn_lp_pool(
    py: Python<'_>,
    input: &Bound<'_, PyAny>,
    norm_type: f64,
    kernel_size: Ints,
    stride: Ints,
    ceil_mode: bool,
) -> PyResult<Py<PyTensor>> {
    let x = tensor_of(input, "input")?;
    wrap(
        py,
        detached(py, move || {
            x.lp_pool(norm_type, &kernel_size.0, &stride.0, ceil_mode)
        })?,
    )
}

/// Register the convolution and pooling bindings on `ferrograd._C`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_nn_conv, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_conv_transpose, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_max_pool, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_avg_pool, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_adaptive_pool, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_max_unpool, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_lp_pool, m)?)?;
    Ok(())
}
