//! Binding of `crate::ops::nn::linear`, the GIL released while the products run.

use pyo3::prelude::*;

use crate::ops::nn::linear;
use crate::python::autocast::{lowered, lowered_opt};
use crate::python::bind::tensor_functions;

tensor_functions! {
    register;

    /// `input @ weight.T + bias` as one node.
    #[pyo3(signature = (input, weight, bias=None))]
    fn _nn_linear(
        input: &Bound<'_, PyAny>,
        weight: &Bound<'_, PyAny>,
        bias: Option<&Bound<'_, PyAny>>,
    ) => {
        let [x, w] = lowered([&input, &weight])?;
        linear::linear(&x, &w, lowered_opt(bias.as_ref())?.as_ref())
    };
}
