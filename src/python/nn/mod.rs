//! Bindings of `crate::ops::nn`, one file per family (the names of `src/ops/nn/`).

mod activation;
mod attention;
mod conv;
mod distance;
mod linear;
mod loss;
mod margin_loss;
mod norm;
mod padding;
mod pool;
mod prelu;
mod rnn;
mod sampling;
mod softmax;
mod sparse;

use pyo3::prelude::*;

/// Register the nn functions on `ferrograd._C`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    activation::register(m)?;
    attention::register(m)?;
    conv::register(m)?;
    distance::register(m)?;
    linear::register(m)?;
    loss::register(m)?;
    margin_loss::register(m)?;
    norm::register(m)?;
    padding::register(m)?;
    pool::register(m)?;
    prelu::register(m)?;
    rnn::register(m)?;
    sampling::register(m)?;
    sparse::register(m)?;
    Ok(())
}
