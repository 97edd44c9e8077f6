//! Bindings of `crate::ops::nn::pool`: max, average, adaptive, lp pooling and max unpooling,
//! the GIL released while the kernels run.

use pyo3::prelude::*;

use crate::python::args::Ints;
use crate::python::bind::tensor_functions;
use crate::python::errors::detached;
use crate::python::tensor::{tensor_of, wrap, PyTensor};

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

tensor_functions! {
    register_generated;

    /// `avg_pool{nd}d`; an empty `stride` means the kernel.
    #[pyo3(signature = (nd, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override=None))]
    #[allow(clippy::too_many_arguments)]
    fn _nn_avg_pool(
        nd: usize,
        input: &Bound<'_, PyAny>,
        kernel_size: Ints,
        stride: Ints,
        padding: Ints,
        ceil_mode: bool,
        count_include_pad: bool,
        divisor_override: Option<i64>,
    ) => {
        let (x, k, s, p) = (&input, &kernel_size, &stride, &padding);
        match nd {
            1 => x.avg_pool1d(one(k), s.first().copied(), one(p), ceil_mode, count_include_pad),
            3 => x.avg_pool3d(k, s, p, ceil_mode, count_include_pad, divisor_override),
            _ => x.avg_pool2d(k, s, p, ceil_mode, count_include_pad, divisor_override),
        }
    };

    /// `max_unpool{2,3}d` to the spatial `output_size` (checked by the caller).
    fn _nn_max_unpool(input: &Bound<'_, PyAny>, indices: &Bound<'_, PyAny>, output_size: Vec<usize>) =>
        input.max_unpool(&indices, &output_size);

    /// `lp_pool{1,2,3}d` (`stride` empty: the kernel size).
    fn _nn_lp_pool(
        input: &Bound<'_, PyAny>,
        norm_type: f64,
        kernel_size: Ints,
        stride: Ints,
        ceil_mode: bool,
    ) => input.lp_pool(norm_type, &kernel_size, &stride, ceil_mode);
}

/// Register the pooling bindings on `ferrograd._C`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_nn_max_pool, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_adaptive_pool, m)?)?;
    register_generated(m)
}
