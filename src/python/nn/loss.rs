//! Bindings of `crate::ops::nn::loss`: cross entropy, nll and the pointwise regression and
//! binary losses, the GIL released while the kernels run.

use pyo3::prelude::*;

use crate::error::Error;
use crate::ops::nn::loss::{self, Reduction};
use crate::python::bind::tensor_functions;

tensor_functions! {
    register;

    /// cross_entropy over class indices (int64 target) or class probabilities (float target of
    /// the input's shape).
    #[pyo3(signature = (input, target, weight, ignore_index, reduction, label_smoothing))]
    fn _nn_cross_entropy(
        input: &Bound<'_, PyAny>,
        target: &Bound<'_, PyAny>,
        weight: Option<&Bound<'_, PyAny>>,
        ignore_index: i64,
        reduction: &str,
        label_smoothing: f64,
    ) => {
        let (x, t, w, r) = (&input, &target, weight.as_ref(), Reduction::parse(reduction)?);
        if x.shape() == t.shape() {
            loss::cross_entropy_probs(x, t, w, r, label_smoothing)
        } else {
            loss::cross_entropy(x, t, w, ignore_index, r, label_smoothing)
        }
    };

    /// nll_loss over class indices.
    #[pyo3(signature = (input, target, weight, ignore_index, reduction))]
    fn _nn_nll_loss(
        input: &Bound<'_, PyAny>,
        target: &Bound<'_, PyAny>,
        weight: Option<&Bound<'_, PyAny>>,
        ignore_index: i64,
        reduction: &str,
    ) => loss::nll_loss(&input, &target, weight.as_ref(), ignore_index, Reduction::parse(reduction)?);

    /// The regression and binary losses by name, with their optional weight and parameter
    /// (`beta` of smooth_l1, `delta` of huber, `log_target` of kl_div as 0/1).
    #[pyo3(signature = (kind, input, target, weight, reduction, param=0.0, pos_weight=None))]
    #[allow(clippy::too_many_arguments)]
    fn _nn_pointwise_loss(
        kind: &str,
        input: &Bound<'_, PyAny>,
        target: &Bound<'_, PyAny>,
        weight: Option<&Bound<'_, PyAny>>,
        reduction: &str,
        param: f64,
        pos_weight: Option<&Bound<'_, PyAny>>,
    ) => {
        let (x, t, w, r) = (&input, &target, weight.as_ref(), Reduction::parse(reduction)?);
        match kind {
            "mse" => loss::mse_loss(x, t, w, r),
            "l1" => loss::l1_loss(x, t, w, r),
            "smooth_l1" => loss::smooth_l1_loss(x, t, r, param),
            "huber" => loss::huber_loss(x, t, w, r, param),
            "bce" => loss::binary_cross_entropy(x, t, w, r),
            "bce_logits" => loss::binary_cross_entropy_with_logits(x, t, w, pos_weight.as_ref(), r),
            "kl_div" => loss::kl_div(x, t, r, param != 0.0),
            _ => Err(Error::value(format!("unknown loss {kind:?}"))),
        }
    };
}
