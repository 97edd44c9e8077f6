//! `ferrograd._C._sgd_step` and friends: one call updates a whole parameter group in place
//! (see `crate::optim`), with the GIL released.

use pyo3::prelude::*;

use super::errors::detached;
use super::tensors;
use crate::optim::{
    adafactor_step, adagrad_step, adam_step, adamax_step, asgd_step, nadam_step, radam_step,
    rmsprop_step, rprop_step, sgd_step, AdafactorOptions, AdagradOptions, AdamOptions,
    AdamaxOptions, AsgdOptions, NadamOptions, RadamOptions, RmspropOptions, RpropOptions,
    SgdOptions,
};

/// One binding per optimizer: `fn name(tensor lists; Options { scalar fields }) => kernel;`.
/// The Python parameters are the tensor lists, then the fields, in the order written.
macro_rules! optimizer_steps {
    ($(
        $(#[$doc:meta])*
        fn $name:ident($($list:ident),*; $opts:ident { $($field:ident: $ty:ty),* $(,)? }) => $kernel:path;
    )*) => {
        $(
            $(#[$doc])*
            #[pyfunction]
            #[allow(clippy::too_many_arguments)]
            fn $name(
                py: Python<'_>,
                $($list: &Bound<'_, PyAny>,)*
                $($field: $ty),*
            ) -> PyResult<()> {
                $(let $list = tensors($list, stringify!($list))?;)*
                let opts = $opts { $($field),* };
                detached(py, move || $kernel($(&$list,)* &opts))
            }
        )*

        /// Add the optimizer functions to `_C`.
        pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
            $(m.add_function(wrap_pyfunction!($name, m)?)?;)*
            Ok(())
        }
    };
}

optimizer_steps! {
    /// One SGD step over lists of parameters, gradients and momentum buffers.
    fn _sgd_step(params, grads, momentum_buffers; SgdOptions {
        lr: f64, momentum: f64, dampening: f64, nesterov: bool, weight_decay: f64, maximize: bool,
        first_step: bool,
    }) => sgd_step;

    /// One Adam / AdamW step over lists of parameters, gradients and moment estimates.
    fn _adam_step(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs; AdamOptions {
        step: f64, lr: f64, beta1: f64, beta2: f64, eps: f64, weight_decay: f64, amsgrad: bool,
        maximize: bool, decoupled_weight_decay: bool,
    }) => adam_step;

    /// One RMSprop step over lists of parameters, gradients and running averages.
    fn _rmsprop_step(params, grads, square_avgs, momentum_buffers, grad_avgs; RmspropOptions {
        lr: f64, alpha: f64, eps: f64, weight_decay: f64, momentum: f64, centered: bool,
        maximize: bool,
    }) => rmsprop_step;

    /// One Adagrad step over lists of parameters, gradients and squared-gradient sums.
    fn _adagrad_step(params, grads, state_sums; AdagradOptions {
        step: f64, lr: f64, lr_decay: f64, weight_decay: f64, eps: f64, maximize: bool,
    }) => adagrad_step;

    /// One NAdam step over lists of parameters, gradients, moment estimates and mu products
    /// (one-element tensors, updated in place).
    fn _nadam_step(params, grads, exp_avgs, exp_avg_sqs, mu_products; NadamOptions {
        step: f64, lr: f64, beta1: f64, beta2: f64, eps: f64, weight_decay: f64,
        momentum_decay: f64, decoupled_weight_decay: bool, maximize: bool,
    }) => nadam_step;

    /// One RAdam step over lists of parameters, gradients and moment estimates.
    fn _radam_step(params, grads, exp_avgs, exp_avg_sqs; RadamOptions {
        step: f64, lr: f64, beta1: f64, beta2: f64, eps: f64, weight_decay: f64,
        decoupled_weight_decay: bool, maximize: bool,
    }) => radam_step;

    /// One Adamax step over lists of parameters, gradients, first moments and infinity norms.
    fn _adamax_step(params, grads, exp_avgs, exp_infs; AdamaxOptions {
        step: f64, lr: f64, beta1: f64, beta2: f64, eps: f64, weight_decay: f64, maximize: bool,
    }) => adamax_step;

    /// One Rprop step over lists of parameters, gradients, previous gradients and step sizes.
    fn _rprop_step(params, grads, prevs, step_sizes; RpropOptions {
        etaminus: f64, etaplus: f64, step_size_min: f64, step_size_max: f64, maximize: bool,
    }) => rprop_step;

    /// One ASGD step over lists of parameters, gradients, averages and the one-element eta and
    /// mu states (updated in place for the next step).
    fn _asgd_step(params, grads, axs, etas, mus; AsgdOptions {
        step: f64, lr: f64, lambd: f64, alpha: f64, t0: f64, weight_decay: f64, maximize: bool,
    }) => asgd_step;

    /// One Adafactor step over lists of parameters and gradients; row/column variances belong to
    /// the parameters of two or more dimensions in order, variances to the others.
    fn _adafactor_step(params, grads, row_vars, col_vars, variances; AdafactorOptions {
        step: f64, lr: f64, beta2_decay: f64, eps1: Option<f64>, eps2: f64, d: f64,
        weight_decay: f64, maximize: bool,
    }) => adafactor_step;
}
