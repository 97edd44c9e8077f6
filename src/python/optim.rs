//! `ferrograd._C._sgd_step` and friends: one call updates a whole parameter group in place
//! (see `crate::optim`), with the GIL released.

use pyo3::prelude::*;

use super::errors::detached;
use super::tensors;
use crate::optim::{
    adagrad_step, adam_step, rmsprop_step, sgd_step, AdagradOptions, AdamOptions, RmspropOptions,
    SgdOptions,
};

/// One SGD step over lists of parameters, gradients and momentum buffers.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn _sgd_step(
    py: Python<'_>,
    params: &Bound<'_, PyAny>,
    grads: &Bound<'_, PyAny>,
    momentum_buffers: &Bound<'_, PyAny>,
    lr: f64,
    momentum: f64,
    dampening: f64,
    nesterov: bool,
    weight_decay: f64,
    maximize: bool,
    first_step: bool,
) -> PyResult<()> {
    let (p, g, b) = (
        tensors(params, "params")?,
        tensors(grads, "grads")?,
        tensors(momentum_buffers, "momentum_buffers")?,
    );
    let opts = SgdOptions {
        lr,
        momentum,
        dampening,
        nesterov,
        weight_decay,
        maximize,
        first_step,
    };
    detached(py, move || sgd_step(&p, &g, &b, &opts))
}

/// One Adam / AdamW step over lists of parameters, gradients and moment estimates.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn _adam_step(
    py: Python<'_>,
    params: &Bound<'_, PyAny>,
    grads: &Bound<'_, PyAny>,
    exp_avgs: &Bound<'_, PyAny>,
    exp_avg_sqs: &Bound<'_, PyAny>,
    max_exp_avg_sqs: &Bound<'_, PyAny>,
    step: f64,
    lr: f64,
    beta1: f64,
    beta2: f64,
    eps: f64,
    weight_decay: f64,
    amsgrad: bool,
    maximize: bool,
    decoupled_weight_decay: bool,
) -> PyResult<()> {
    let (p, g, m, v, vm) = (
        tensors(params, "params")?,
        tensors(grads, "grads")?,
        tensors(exp_avgs, "exp_avgs")?,
        tensors(exp_avg_sqs, "exp_avg_sqs")?,
        tensors(max_exp_avg_sqs, "max_exp_avg_sqs")?,
    );
    let opts = AdamOptions {
        step,
        lr,
        beta1,
        beta2,
        eps,
        weight_decay,
        amsgrad,
        maximize,
        decoupled_weight_decay,
    };
    detached(py, move || adam_step(&p, &g, &m, &v, &vm, &opts))
}

/// One RMSprop step over lists of parameters, gradients and running averages.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn _rmsprop_step(
    py: Python<'_>,
    params: &Bound<'_, PyAny>,
    grads: &Bound<'_, PyAny>,
    square_avgs: &Bound<'_, PyAny>,
    momentum_buffers: &Bound<'_, PyAny>,
    grad_avgs: &Bound<'_, PyAny>,
    lr: f64,
    alpha: f64,
    eps: f64,
    weight_decay: f64,
    momentum: f64,
    centered: bool,
    maximize: bool,
) -> PyResult<()> {
    let (p, g, s, b, a) = (
        tensors(params, "params")?,
        tensors(grads, "grads")?,
        tensors(square_avgs, "square_avgs")?,
        tensors(momentum_buffers, "momentum_buffers")?,
        tensors(grad_avgs, "grad_avgs")?,
    );
    let opts = RmspropOptions {
        lr,
        alpha,
        eps,
        weight_decay,
        momentum,
        centered,
        maximize,
    };
    detached(py, move || rmsprop_step(&p, &g, &s, &b, &a, &opts))
}

/// One Adagrad step over lists of parameters, gradients and squared-gradient sums.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn _adagrad_step(
    py: Python<'_>,
    params: &Bound<'_, PyAny>,
    grads: &Bound<'_, PyAny>,
    state_sums: &Bound<'_, PyAny>,
    step: f64,
    lr: f64,
    lr_decay: f64,
    weight_decay: f64,
    eps: f64,
    maximize: bool,
) -> PyResult<()> {
    let (p, g, s) = (
        tensors(params, "params")?,
        tensors(grads, "grads")?,
        tensors(state_sums, "state_sums")?,
    );
    let opts = AdagradOptions {
        step,
        lr,
        lr_decay,
        weight_decay,
        eps,
        maximize,
    };
    detached(py, move || adagrad_step(&p, &g, &s, &opts))
}

/// Add the optimizer functions to `_C`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_sgd_step, m)?)?;
    m.add_function(wrap_pyfunction!(_adam_step, m)?)?;
    m.add_function(wrap_pyfunction!(_rmsprop_step, m)?)?;
    m.add_function(wrap_pyfunction!(_adagrad_step, m)?)?;
    Ok(())
}
