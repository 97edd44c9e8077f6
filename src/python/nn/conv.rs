//! Bindings of `crate::ops::nn::conv` (`ferrograd.nn.functional`'s convolutions, `unfold` and
//! `fold`): the arguments as torch's Python layer passes them, the work with the GIL released.

use pyo3::prelude::*;

use crate::ops::nn::conv::{col2im_shape_check, im2col_args_check, ConvPadding};
use crate::python::args::Ints;
use crate::python::autocast::{lowered, lowered_opt};
use crate::python::bind::{tensor_functions, Arg};
use crate::python::errors::detached;
use crate::python::tensor::{tensor_of, wrap, PyTensor};

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
    let b = bias.value("bias")?;
    let pad_str: Option<String> = padding.extract().ok();
    let pad_ints: Vec<i64> = if pad_str.is_some() {
        Vec::new()
    } else {
        padding.extract::<Ints>()?.0
    };
    let out = detached(py, move || {
        let [x, w] = lowered([&x, &w])?;
        let b = lowered_opt(b.as_ref())?;
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

tensor_functions! {
    register_generated;

    /// `conv_transpose{nd}d`.
    #[allow(clippy::too_many_arguments)]
    fn _nn_conv_transpose(
        nd: usize,
        input: &Bound<'_, PyAny>,
        weight: &Bound<'_, PyAny>,
        bias: Option<&Bound<'_, PyAny>>,
        stride: Ints,
        padding: Ints,
        output_padding: Ints,
        groups: i64,
        dilation: Ints,
    ) => {
        let [x, w] = lowered([&input, &weight])?;
        x.conv_transpose_nd(
            nd, &w, lowered_opt(bias.as_ref())?.as_ref(), &stride, &padding, &output_padding,
            groups, &dilation,
        )
    };

    /// `unfold` (im2col): `(N, C, *spatial)` to `(N, C*prod(kernel_size), L)`. The integer
    /// arguments are checked (torch's messages) before they become sizes.
    fn _nn_im2col(
        input: &Bound<'_, PyAny>,
        kernel_size: Ints,
        dilation: Ints,
        padding: Ints,
        stride: Ints,
    ) => {
        im2col_args_check(&kernel_size, &dilation, &padding, &stride)?;
        let (k, d) = (checked(&kernel_size), checked(&dilation));
        input.im2col(&k, &d, &checked(&padding), &checked(&stride))
    };

    /// `fold` (col2im): `(N, C*prod(kernel_size), L)` to `(N, C, *output_size)`, checked like
    /// `_nn_im2col`.
    fn _nn_col2im(
        input: &Bound<'_, PyAny>,
        output_size: Ints,
        kernel_size: Ints,
        dilation: Ints,
        padding: Ints,
        stride: Ints,
    ) => {
        let (o, k, d, p, s) = (&output_size, &kernel_size, &dilation, &padding, &stride);
        col2im_shape_check(input.shape(), o, k, d, p, s)?;
        input.col2im(&checked(o), &checked(k), &checked(d), &checked(p), &checked(s))
    };
}

/// Values that a check has already found non-negative, as sizes.
fn checked(v: &[i64]) -> Vec<usize> {
    v.iter().map(|&x| x.max(0) as usize).collect()
}

/// Register the convolution bindings on `ferrograd._C`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_nn_conv, m)?)?;
    register_generated(m)
}
