//! Binding of `crate::ops::nn::padding`: `pad`.

use pyo3::prelude::*;

use crate::error::Error;
use crate::ops::nn::padding::{pad, PadMode};
use crate::python::args::Ints;
use crate::python::bind::tensor_functions;

tensor_functions! {
    register;

    /// `pad` (`mode` one of "constant", "reflect", "replicate", "circular"; `value` for constant).
    fn _nn_pad(input: &Bound<'_, PyAny>, pads: Ints, mode: &str, value: f64) => {
        let mode = match mode {
            "constant" => PadMode::Constant(value),
            "reflect" => PadMode::Reflect,
            "replicate" => PadMode::Replicate,
            "circular" => PadMode::Circular,
            other => {
                return Err(Error::not_implemented(format!("Unrecognised padding mode {other}")))
            }
        };
        pad(&input, &pads, mode)
    };
}
