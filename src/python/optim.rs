//! `ferrograd._C._sgd_step` and friends: one call updates a whole parameter group in place
//! (see `crate::optim`), with the GIL released.

use pyo3::prelude::*;

use super::errors::detached;
use super::tensors;
use crate::optim::{
    adagrad_step, adam_step, rmsprop_step, sgd_step, AdagradOptions, AdamOptions, RmspropOptions,
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
}
