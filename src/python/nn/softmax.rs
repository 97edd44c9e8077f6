//! Bindings of `crate::ops::nn::softmax`: `softmax`, `log_softmax` and `logsumexp` as `Tensor`
//! methods.

use crate::python::args::Int;
use crate::python::bind::{tensor_methods, with_dtype, Dims};
use crate::python::PyDType;

tensor_methods! {
    /// log Σ exp over `dim`, stable for large inputs.
    #[pyo3(signature = (dim, keepdim=false))]
    fn logsumexp(x, dim: Dims<'_>, keepdim: bool) => x.logsumexp(&dim, keepdim);

    /// Softmax along `dim` (after converting to `dtype` when given).
    #[pyo3(signature = (dim, dtype=None))]
    fn softmax(x, dim: Int, dtype: Option<&PyDType>) => with_dtype(x, dtype)?.softmax(dim);

    /// Log-softmax along `dim` (after converting to `dtype` when given).
    #[pyo3(signature = (dim, dtype=None))]
    fn log_softmax(x, dim: Int, dtype: Option<&PyDType>) =>
        with_dtype(x, dtype)?.log_softmax(dim);
}
