//! Bindings of the normalisation ops (`layer_norm`, `rms_norm`, `group_norm`, `batch_norm`,
//! `instance_norm`): parse the arguments, release the GIL for large inputs.

use pyo3::prelude::*;

use super::args::{self, Ints};
use super::errors::{detached, guarded};
use super::tensor::{opt_tensor_of, tensor_of, wrap, PyTensor, HEAVY_ELEMENTS};
use crate::ops::nn::norm;
use crate::tensor::Tensor;

/// Run `f`, without the GIL when `x` is large.
fn run(
    py: Python<'_>,
    x: &Tensor,
    f: impl FnOnce() -> crate::error::Result<Tensor> + Send,
) -> PyResult<Py<PyTensor>> {
    let out = if x.numel() >= HEAVY_ELEMENTS {
        detached(py, f)?
    } else {
        guarded(f)?
    };
    wrap(py, out)
}

/// `layer_norm(input, normalized_shape, weight, bias, eps)`.
#[pyfunction]
fn _nn_layer_norm(
    py: Python<'_>,
    input: &Bound<'_, PyAny>,
    normalized_shape: Ints,
    weight: &Bound<'_, PyAny>,
    bias: &Bound<'_, PyAny>,
    eps: f64,
) -> PyResult<Py<PyTensor>> {
    let x = tensor_of(input, "input")?;
    let ns = args::shape(&normalized_shape.0)?;
    let (w, b) = (
        opt_tensor_of(weight, "weight")?,
        opt_tensor_of(bias, "bias")?,
    );
    run(py, &x, || {
        norm::layer_norm(&x, &ns, w.as_ref(), b.as_ref(), eps)
    })
}

/// `rms_norm(input, normalized_shape, weight, eps)`; `eps` None is `finfo(dtype).eps`.
#[pyfunction]
#[pyo3(signature = (input, normalized_shape, weight, eps))]
fn _nn_rms_norm(
    py: Python<'_>,
    input: &Bound<'_, PyAny>,
    normalized_shape: Ints,
    weight: &Bound<'_, PyAny>,
    eps: Option<f64>,
) -> PyResult<Py<PyTensor>> {
    let x = tensor_of(input, "input")?;
    let ns = args::shape(&normalized_shape.0)?;
    let w = opt_tensor_of(weight, "weight")?;
    run(py, &x, || norm::rms_norm(&x, &ns, w.as_ref(), eps))
}

/// `group_norm(input, num_groups, weight, bias, eps)`.
#[pyfunction]
fn _nn_group_norm(
    py: Python<'_>,
    input: &Bound<'_, PyAny>,
    num_groups: i64,
    weight: &Bound<'_, PyAny>,
    bias: &Bound<'_, PyAny>,
    eps: f64,
) -> PyResult<Py<PyTensor>> {
    let x = tensor_of(input, "input")?;
    let (w, b) = (
        opt_tensor_of(weight, "weight")?,
        opt_tensor_of(bias, "bias")?,
    );
    run(py, &x, || {
        norm::group_norm(&x, num_groups, w.as_ref(), b.as_ref(), eps)
    })
}

/// The input and the optional running statistics, weight and bias that batch and instance
/// norm take in the same order.
fn with_stats(
    input: &Bound<'_, PyAny>,
    running_mean: &Bound<'_, PyAny>,
    running_var: &Bound<'_, PyAny>,
    weight: &Bound<'_, PyAny>,
    bias: &Bound<'_, PyAny>,
) -> PyResult<(Tensor, [Option<Tensor>; 4])> {
    Ok((
        tensor_of(input, "input")?,
        [
            opt_tensor_of(running_mean, "running_mean")?,
            opt_tensor_of(running_var, "running_var")?,
            opt_tensor_of(weight, "weight")?,
            opt_tensor_of(bias, "bias")?,
        ],
    ))
}

/// `batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)`;
/// the running statistics are updated in place when training.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn _nn_batch_norm(
    py: Python<'_>,
    input: &Bound<'_, PyAny>,
    running_mean: &Bound<'_, PyAny>,
    running_var: &Bound<'_, PyAny>,
    weight: &Bound<'_, PyAny>,
    bias: &Bound<'_, PyAny>,
    training: bool,
    momentum: f64,
    eps: f64,
) -> PyResult<Py<PyTensor>> {
    let (x, [rm, rv, w, b]) = with_stats(input, running_mean, running_var, weight, bias)?;
    run(py, &x, || {
        norm::batch_norm(
            &x,
            rm.as_ref(),
            rv.as_ref(),
            w.as_ref(),
            b.as_ref(),
            training,
            momentum,
            eps,
        )
    })
}

/// `instance_norm(input, running_mean, running_var, weight, bias, use_input_stats, momentum,
/// eps)`.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn _nn_instance_norm(
    py: Python<'_>,
    input: &Bound<'_, PyAny>,
    running_mean: &Bound<'_, PyAny>,
    running_var: &Bound<'_, PyAny>,
    weight: &Bound<'_, PyAny>,
    bias: &Bound<'_, PyAny>,
    use_input_stats: bool,
    momentum: f64,
    eps: f64,
) -> PyResult<Py<PyTensor>> {
    let (x, [rm, rv, w, b]) = with_stats(input, running_mean, running_var, weight, bias)?;
    run(py, &x, || {
        norm::instance_norm(
            &x,
            rm.as_ref(),
            rv.as_ref(),
            w.as_ref(),
            b.as_ref(),
            use_input_stats,
            momentum,
            eps,
        )
    })
}

/// `local_response_norm(input, size, alpha, beta, k)`.
#[pyfunction]
fn _nn_local_response_norm(
    py: Python<'_>,
    input: &Bound<'_, PyAny>,
    size: i64,
    alpha: f64,
    beta: f64,
    k: f64,
) -> PyResult<Py<PyTensor>> {
    let x = tensor_of(input, "input")?;
    run(py, &x, || {
        norm::local_response_norm(&x, size, alpha, beta, k)
    })
}

/// Register the normalisation bindings on `ferrograd._C`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_nn_layer_norm, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_rms_norm, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_group_norm, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_batch_norm, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_instance_norm, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_local_response_norm, m)?)?;
    Ok(())
}
