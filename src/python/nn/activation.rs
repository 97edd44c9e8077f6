//! Bindings of `crate::ops::nn::activation` for `ferrograd.nn.functional`: argument parsing
//! only, the GIL released while the kernels run.

use pyo3::prelude::*;

use crate::error::Error;
use crate::ops::nn::activation as act;
use crate::python::bind::tensor_functions;

tensor_functions! {
    register;

    /// gelu, `approximate` "none" or "tanh".
    fn _nn_gelu(input: &Bound<'_, PyAny>, approximate: &str) => match approximate {
        "none" => act::gelu(&input, false),
        "tanh" => act::gelu(&input, true),
        _ => Err(Error::runtime("approximate argument must be either none or tanh.")),
    };

    /// `x · sigmoid(x)`.
    fn _nn_silu(input: &Bound<'_, PyAny>) => act::silu(&input);

    /// `x · tanh(softplus(x))`.
    fn _nn_mish(input: &Bound<'_, PyAny>) => act::mish(&input);

    /// elu with `alpha`.
    fn _nn_elu(input: &Bound<'_, PyAny>, alpha: f64) => act::elu(&input, alpha);

    /// Scaled elu with torch's constants.
    fn _nn_selu(input: &Bound<'_, PyAny>) => act::selu(&input);

    /// celu with `alpha` (non-zero).
    fn _nn_celu(input: &Bound<'_, PyAny>, alpha: f64) => if alpha == 0.0 {
        Err(Error::runtime("ZeroDivisionError: alpha cannot be 0 for CELU"))
    } else {
        act::celu(&input, alpha)
    };

    /// softplus with `beta` and `threshold`.
    fn _nn_softplus(input: &Bound<'_, PyAny>, beta: f64, threshold: f64) =>
        act::softplus(&input, beta, threshold);

    /// `x · relu6(x + 3) / 6`.
    fn _nn_hardswish(input: &Bound<'_, PyAny>) => act::hardswish(&input);

    /// `relu6(x + 3) / 6`.
    fn _nn_hardsigmoid(input: &Bound<'_, PyAny>) => act::hardsigmoid(&input);

    /// leaky_relu with `negative_slope`.
    fn _nn_leaky_relu(input: &Bound<'_, PyAny>, negative_slope: f64) =>
        act::leaky_relu(&input, negative_slope);

    /// hardtanh clamping to `[min_val, max_val]`.
    fn _nn_hardtanh(input: &Bound<'_, PyAny>, min_val: f64, max_val: f64) =>
        act::hardtanh(&input, min_val, max_val);

    /// `-softplus(-x)`.
    fn _nn_logsigmoid(input: &Bound<'_, PyAny>) => act::logsigmoid(&input);

    /// glu along `dim`.
    fn _nn_glu(input: &Bound<'_, PyAny>, dim: i64) => act::glu(&input, dim);

    /// Inverted dropout with probability `p` (training mode).
    fn _nn_dropout(input: &Bound<'_, PyAny>, p: f64) => act::dropout(&input, p);

    /// hardshrink (`soft` false) or softshrink with threshold `lambd`.
    fn _nn_shrink(input: &Bound<'_, PyAny>, lambd: f64, soft: bool) => if soft {
        act::softshrink(&input, lambd)
    } else {
        act::hardshrink(&input, lambd)
    };

    /// Channel-wise (`feature`) and/or alpha dropout with probability `p` (training mode).
    fn _nn_dropout_ext(input: &Bound<'_, PyAny>, p: f64, feature: bool, alpha: bool) =>
        act::dropout_with(&input, p, act::Dropout { feature, alpha });

    /// Randomized leaky ReLU with slopes in `[lower, upper]`.
    fn _nn_rrelu(input: &Bound<'_, PyAny>, lower: f64, upper: f64, training: bool) =>
        act::rrelu(&input, lower, upper, training);
}
