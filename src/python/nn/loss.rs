//! Bindings of `crate::ops::nn::loss`: cross entropy, nll and the pointwise regression and
//! binary losses, the GIL released while the kernels run.

use pyo3::prelude::*;

use crate::error::Error;
use crate::ops::nn::loss::{self, Reduction};
use crate::python::errors::detached;
use crate::python::tensor::{opt_tensor_of, tensor_of, wrap, PyTensor};

fn opt_tensor(
    obj: Option<&Bound<'_, PyAny>>,
    what: &str,
) -> PyResult<Option<crate::tensor::Tensor>> {
    obj.map(|o| opt_tensor_of(o, what))
        .transpose()
        .map(Option::flatten)
}

fn parse_reduction(s: &str) -> PyResult<Reduction> {
    crate::python::errors::guarded(|| Reduction::parse(s))
}

/// cross_entropy over class indices (int64 target) or class probabilities (float target of
/// the input's shape).
#[pyfunction]
#[pyo3(signature = (input, target, weight, ignore_index, reduction, label_smoothing))]
fn _nn_cross_entropy(
    py: Python<'_>,
    input: &Bound<'_, PyAny>,
    target: &Bound<'_, PyAny>,
    weight: Option<&Bound<'_, PyAny>>,
    ignore_index: i64,
    reduction: &str,
    label_smoothing: f64,
) -> PyResult<Py<PyTensor>> {
    let x = tensor_of(input, "input")?;
    let t = tensor_of(target, "target")?;
    let w = opt_tensor(weight, "weight")?;
    let r = parse_reduction(reduction)?;
    wrap(
        py,
        detached(py, move || {
            if x.shape() == t.shape() {
                loss::cross_entropy_probs(&x, &t, w.as_ref(), r, label_smoothing)
            } else {
                loss::cross_entropy(&x, &t, w.as_ref(), ignore_index, r, label_smoothing)
            }
        })?,
    )
}

/// nll_loss over class indices.
#[pyfunction]
#[pyo3(signature = (input, target, weight, ignore_index, reduction))]
fn _nn_nll_loss(
    py: Python<'_>,
    input: &Bound<'_, PyAny>,
    target: &Bound<'_, PyAny>,
    weight: Option<&Bound<'_, PyAny>>,
    ignore_index: i64,
    reduction: &str,
) -> PyResult<Py<PyTensor>> {
    let x = tensor_of(input, "input")?;
    let t = tensor_of(target, "target")?;
    let w = opt_tensor(weight, "weight")?;
    let r = parse_reduction(reduction)?;
    wrap(
        py,
        detached(py, move || {
            loss::nll_loss(&x, &t, w.as_ref(), ignore_index, r)
        })?,
    )
}

/// The regression and binary losses by name, with their optional weight and parameter
/// (`beta` of smooth_l1, `delta` of huber, `log_target` of kl_div as 0/1).
#[pyfunction]
#[pyo3(signature = (kind, input, target, weight, reduction, param=0.0, pos_weight=None))]
#[allow(clippy::too_many_arguments)]
fn _nn_pointwise_loss(
    py: Python<'_>,
    kind: &str,
    input: &Bound<'_, PyAny>,
    target: &Bound<'_, PyAny>,
    weight: Option<&Bound<'_, PyAny>>,
    reduction: &str,
    param: f64,
    pos_weight: Option<&Bound<'_, PyAny>>,
) -> PyResult<Py<PyTensor>> {
    let x = tensor_of(input, "input")?;
    let t = tensor_of(target, "target")?;
    let w = opt_tensor(weight, "weight")?;
    let pw = opt_tensor(pos_weight, "pos_weight")?;
    let r = parse_reduction(reduction)?;
    let kind = kind.to_owned();
    wrap(
        py,
        detached(py, move || {
            let w = w.as_ref();
            match kind.as_str() {
                "mse" => loss::mse_loss(&x, &t, w, r),
                "l1" => loss::l1_loss(&x, &t, w, r),
                "smooth_l1" => loss::smooth_l1_loss(&x, &t, r, param),
                "huber" => loss::huber_loss(&x, &t, w, r, param),
                "bce" => loss::binary_cross_entropy(&x, &t, w, r),
                "bce_logits" => loss::binary_cross_entropy_with_logits(&x, &t, w, pw.as_ref(), r),
                "kl_div" => loss::kl_div(&x, &t, r, param != 0.0),
                _ => Err(Error::value(format!("unknown loss {kind:?}"))),
            }
        })?,
    )
}

/// Register the loss bindings on `ferrograd._C`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_nn_cross_entropy, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_nll_loss, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_pointwise_loss, m)?)?;
    Ok(())
}
