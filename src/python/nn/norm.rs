//! Bindings of `crate::ops::nn::norm` (`layer_norm`, `rms_norm`, `group_norm`, `batch_norm`,
//! `instance_norm`, `local_response_norm`): parse the arguments, release the GIL for large
//! inputs. Optional tensors (`weight`, `bias`, running statistics) are positional and may be
//! None.

use pyo3::prelude::*;

use crate::ops::nn::norm;
use crate::python::args::{self, Ints};
use crate::python::bind::tensor_functions;

tensor_functions! {
    register_norms;

    /// `layer_norm(input, normalized_shape, weight, bias, eps)`.
    fn _nn_layer_norm(
        input: &Bound<'_, PyAny>,
        normalized_shape: Shape,
        weight: Option<&Bound<'_, PyAny>>,
        bias: Option<&Bound<'_, PyAny>>,
        eps: f64,
    ) heavy(input) => norm::layer_norm(&input, &normalized_shape, weight.as_ref(), bias.as_ref(), eps);

    /// `rms_norm(input, normalized_shape, weight, eps)`; `eps` None is `finfo(dtype).eps`.
    #[pyo3(signature = (input, normalized_shape, weight, eps))]
    fn _nn_rms_norm(
        input: &Bound<'_, PyAny>,
        normalized_shape: Shape,
        weight: Option<&Bound<'_, PyAny>>,
        eps: Option<f64>,
    ) heavy(input) => norm::rms_norm(&input, &normalized_shape, weight.as_ref(), eps);

    /// `group_norm(input, num_groups, weight, bias, eps)`.
    fn _nn_group_norm(
        input: &Bound<'_, PyAny>,
        num_groups: i64,
        weight: Option<&Bound<'_, PyAny>>,
        bias: Option<&Bound<'_, PyAny>>,
        eps: f64,
    ) heavy(input) => norm::group_norm(&input, num_groups, weight.as_ref(), bias.as_ref(), eps);

    /// `local_response_norm(input, size, alpha, beta, k)`.
    fn _nn_local_response_norm(input: &Bound<'_, PyAny>, size: i64, alpha: f64, beta: f64, k: f64)
        heavy(input) => norm::local_response_norm(&input, size, alpha, beta, k);
}

/// `batch_norm` and `instance_norm`: `(input, running_mean, running_var, weight, bias, flag,
/// momentum, eps)`, the optional tensors positional and None when absent; one
/// `name => kernel, flag, "doc"` each.
macro_rules! stats_norms {
    ($($name:ident => $kernel:path, $flag:ident, $doc:literal;)*) => {
        tensor_functions! {
            register_stats;
            $(
                #[doc = $doc]
                #[allow(clippy::too_many_arguments)]
                fn $name(
                    input: &Bound<'_, PyAny>,
                    running_mean: Option<&Bound<'_, PyAny>>,
                    running_var: Option<&Bound<'_, PyAny>>,
                    weight: Option<&Bound<'_, PyAny>>,
                    bias: Option<&Bound<'_, PyAny>>,
                    $flag: bool,
                    momentum: f64,
                    eps: f64,
                ) heavy(input) => $kernel(
                    &input,
                    running_mean.as_ref(),
                    running_var.as_ref(),
                    weight.as_ref(),
                    bias.as_ref(),
                    $flag,
                    momentum,
                    eps,
                );
            )*
        }
    };
}

stats_norms! {
    _nn_batch_norm => norm::batch_norm, training,
        "`batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)`;\nthe running statistics are updated in place when training.";
    _nn_instance_norm => norm::instance_norm, use_input_stats,
        "`instance_norm(input, running_mean, running_var, weight, bias, use_input_stats, momentum,\neps)`.";
}

/// Register the normalisation bindings on `ferrograd._C`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    register_norms(m)?;
    register_stats(m)
}

/// A shape from the user (`normalized_shape`): ints, torch's message for a negative one.
struct Shape(Ints);

impl<'a, 'py> FromPyObject<'a, 'py> for Shape {
    type Error = PyErr;
    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        obj.extract().map(Shape)
    }
}

impl crate::python::bind::Arg for Shape {
    type Value = Vec<usize>;
    fn value(self, _name: &str) -> PyResult<Vec<usize>> {
        args::shape(&self.0 .0)
    }
}
