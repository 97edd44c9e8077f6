//! Bindings of `crate::ops::nn::margin_loss`: the margin, embedding and likelihood losses, the
//! GIL released while the kernels run.

use pyo3::prelude::*;

use crate::ops::nn::loss::Reduction;
use crate::ops::nn::margin_loss as ml;
use crate::python::bind::tensor_functions;
use crate::python::tensor::{tensor_of, wrap, PyTensor};

/// The losses of `(input1, input2, target, margin, reduction)`, `name => kernel, "doc"` each.
macro_rules! pair_margin_losses {
    ($($name:ident => $kernel:path, $doc:literal;)*) => {
        $(
            #[doc = $doc]
            #[pyfunction]
            fn $name(
                py: Python<'_>,
                input1: &Bound<'_, PyAny>,
                input2: &Bound<'_, PyAny>,
                target: &Bound<'_, PyAny>,
                margin: f64,
                reduction: &str,
            ) -> PyResult<Py<PyTensor>> {
                let (a, b) = (tensor_of(input1, "input1")?, tensor_of(input2, "input2")?);
                let t = tensor_of(target, "target")?;
                let out = crate::python::errors::detached(py, move || {
                    $kernel(&a, &b, &t, margin, Reduction::parse(reduction)?)
                })?;
                wrap(py, out)
            }
        )*

        /// Register the margin and embedding losses on `ferrograd._C`.
        pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
            $(m.add_function(wrap_pyfunction!($name, m)?)?;)*
            register_generated(m)
        }
    };
}

pair_margin_losses! {
    _nn_cosine_embedding_loss => ml::cosine_embedding_loss, "`cosine_embedding_loss`.";
    _nn_margin_ranking_loss => ml::margin_ranking_loss, "`margin_ranking_loss`.";
}

tensor_functions! {
    register_generated;

    /// `triplet_margin_loss`.
    #[allow(clippy::too_many_arguments)]
    fn _nn_triplet_margin_loss(
        anchor: &Bound<'_, PyAny>,
        positive: &Bound<'_, PyAny>,
        negative: &Bound<'_, PyAny>,
        margin: f64,
        p: f64,
        eps: f64,
        swap: bool,
        reduction: &str,
    ) => ml::triplet_margin_loss(
        &anchor, &positive, &negative, margin, p, eps, swap, Reduction::parse(reduction)?,
    );

    /// `hinge_embedding_loss`.
    fn _nn_hinge_embedding_loss(
        input: &Bound<'_, PyAny>,
        target: &Bound<'_, PyAny>,
        margin: f64,
        reduction: &str,
    ) => ml::hinge_embedding_loss(&input, &target, margin, Reduction::parse(reduction)?);

    /// `soft_margin_loss`.
    fn _nn_soft_margin_loss(input: &Bound<'_, PyAny>, target: &Bound<'_, PyAny>, reduction: &str) =>
        ml::soft_margin_loss(&input, &target, Reduction::parse(reduction)?);

    /// `multilabel_soft_margin_loss`.
    #[pyo3(signature = (input, target, weight, reduction))]
    fn _nn_multilabel_soft_margin_loss(
        input: &Bound<'_, PyAny>,
        target: &Bound<'_, PyAny>,
        weight: Option<&Bound<'_, PyAny>>,
        reduction: &str,
    ) => ml::multilabel_soft_margin_loss(&input, &target, weight.as_ref(), Reduction::parse(reduction)?);

    /// `poisson_nll_loss`.
    fn _nn_poisson_nll_loss(
        input: &Bound<'_, PyAny>,
        target: &Bound<'_, PyAny>,
        log_input: bool,
        full: bool,
        eps: f64,
        reduction: &str,
    ) => ml::poisson_nll_loss(&input, &target, log_input, full, eps, Reduction::parse(reduction)?);

    /// `gaussian_nll_loss` (`var` already shaped to broadcast against `input`).
    fn _nn_gaussian_nll_loss(
        input: &Bound<'_, PyAny>,
        target: &Bound<'_, PyAny>,
        var: &Bound<'_, PyAny>,
        full: bool,
        eps: f64,
        reduction: &str,
    ) => ml::gaussian_nll_loss(&input, &target, &var, full, eps, Reduction::parse(reduction)?);
}
