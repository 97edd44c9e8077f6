//! Binding of `crate::ops::nn::prelu`.

use pyo3::prelude::*;

use crate::ops::nn::prelu;
use crate::python::autocast::lowered;
use crate::python::bind::tensor_functions;

tensor_functions! {
    register;

    /// PReLU with one slope or one per channel (dim 1).
    fn _nn_prelu(input: &Bound<'_, PyAny>, weight: &Bound<'_, PyAny>) => {
        let [x, w] = lowered([&input, &weight])?;
        prelu::prelu(&x, &w)
    };
}
