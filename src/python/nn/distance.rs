//! Bindings of `crate::ops::nn::distance`: `cosine_similarity`, `pairwise_distance`,
//! `normalize` and `cdist`, the GIL released while the kernels run.

use pyo3::prelude::*;

use crate::error::Error;
use crate::ops::nn::distance::{self, CdistMode};
use crate::python::bind::tensor_functions;

tensor_functions! {
    register;

    /// Cosine similarity of `x1` and `x2` (broadcast) along `dim`.
    #[pyo3(signature = (x1, x2, dim, eps))]
    fn _nn_cosine_similarity(x1: &Bound<'_, PyAny>, x2: &Bound<'_, PyAny>, dim: i64, eps: f64) =>
        distance::cosine_similarity(&x1, &x2, dim, eps);

    /// The `p`-norm of `x1 - x2 + eps` over the last dim.
    #[pyo3(signature = (x1, x2, p, eps, keepdim))]
    fn _nn_pairwise_distance(
        x1: &Bound<'_, PyAny>,
        x2: &Bound<'_, PyAny>,
        p: f64,
        eps: f64,
        keepdim: bool,
    ) => distance::pairwise_distance(&x1, &x2, p, eps, keepdim);

    /// `x / max(‖x‖_p, eps)` along `dim`.
    #[pyo3(signature = (input, p, dim, eps))]
    fn _nn_normalize(input: &Bound<'_, PyAny>, p: f64, dim: i64, eps: f64) =>
        distance::normalize(&input, p, dim, eps);

    /// `torch.cdist` (`compute_mode` 0: matrix product if either side has more than 25 rows,
    /// 1: always for p = 2, 2: never).
    fn _cdist(x1: &Bound<'_, PyAny>, x2: &Bound<'_, PyAny>, p: f64, compute_mode: i64) => {
        let mode = match compute_mode {
            0 => CdistMode::MmIfNecessary,
            1 => CdistMode::Mm,
            2 => CdistMode::Direct,
            _ => {
                return Err(Error::value(format!(
                    "{compute_mode} is not a valid value for compute_mode"
                )))
            }
        };
        distance::cdist(&x1, &x2, p, mode)
    };
}
