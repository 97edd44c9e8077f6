//! Bindings of the activation and loss kernels of `ferrograd.nn.functional`
//! (`crate::ops::nn::{activation, loss}`): argument parsing only, the GIL released while the
//! kernels run.

use pyo3::prelude::*;

use super::errors::detached;
use super::tensor::{tensor_of, wrap, PyTensor};
use crate::error::Error;
use crate::ops::nn::activation as act;
use crate::ops::nn::loss::{self, Reduction};
use crate::tensor::Tensor;

fn opt_tensor(obj: Option<&Bound<'_, PyAny>>, what: &str) -> PyResult<Option<Tensor>> {
    match obj {
        Some(o) if !o.is_none() => Ok(Some(tensor_of(o, what)?)),
        _ => Ok(None),
    }
}

fn reduction(s: &str) -> PyResult<Reduction> {
    super::errors::guarded(|| Reduction::parse(s))
}

/// One-tensor activations without parameters.
macro_rules! plain {
    ($(#[$doc:meta] $py:ident => $f:path;)*) => {$(
        #[$doc]
        #[pyfunction]
        fn $py(py: Python<'_>, input: &Bound<'_, PyAny>) -> PyResult<Py<PyTensor>> {
            let x = tensor_of(input, "input")?;
            wrap(py, detached(py, move || $f(&x))?)
        }
    )*};
}

plain! {
    /// `x · sigmoid(x)`.
    _nn_silu => act::silu;
    /// `x · tanh(softplus(x))`.
    _nn_mish => act::mish;
    /// Scaled elu with torch's constants.
    _nn_selu => act::selu;
    /// `x · relu6(x + 3) / 6`.
    _nn_hardswish => act::hardswish;
    /// `relu6(x + 3) / 6`.
    _nn_hardsigmoid => act::hardsigmoid;
    /// `-softplus(-x)`.
    _nn_logsigmoid => act::logsigmoid;
}

/// gelu, `approximate` "none" or "tanh".
#[pyfunction]
fn _nn_gelu(py: Python<'_>, input: &Bound<'_, PyAny>, approximate: &str) -> PyResult<Py<PyTensor>> {
    let x = tensor_of(input, "input")?;
    let tanh = match approximate {
        "none" => false,
        "tanh" => true,
        _ => {
            return Err(pyo3::exceptions::PyRuntimeError::new_err(
                "approximate argument must be either none or tanh.",
            ))
        }
    };
    wrap(py, detached(py, move || act::gelu(&x, tanh))?)
}

/// elu with `alpha`.
#[pyfunction]
fn _nn_elu(py: Python<'_>, input: &Bound<'_, PyAny>, alpha: f64) -> PyResult<Py<PyTensor>> {
    let x = tensor_of(input, "input")?;
    wrap(py, detached(py, move || act::elu(&x, alpha))?)
}

/// celu with `alpha` (non-zero).
#[pyfunction]
fn _nn_celu(py: Python<'_>, input: &Bound<'_, PyAny>, alpha: f64) -> PyResult<Py<PyTensor>> {
    let x = tensor_of(input, "input")?;
    if alpha == 0.0 {
        return Err(pyo3::exceptions::PyRuntimeError::new_err(
            "ZeroDivisionError: alpha cannot be 0 for CELU",
        ));
    }
    wrap(py, detached(py, move || act::celu(&x, alpha))?)
}

/// softplus with `beta` and `threshold`.
#[pyfunction]
fn _nn_softplus(
    py: Python<'_>,
    input: &Bound<'_, PyAny>,
    beta: f64,
    threshold: f64,
) -> PyResult<Py<PyTensor>> {
    let x = tensor_of(input, "input")?;
    wrap(
        py,
        detached(py, move || act::softplus(&x, beta, threshold))?,
    )
}

/// leaky_relu with `negative_slope`.
#[pyfunction]
fn _nn_leaky_relu(
    py: Python<'_>,
    input: &Bound<'_, PyAny>,
    negative_slope: f64,
) -> PyResult<Py<PyTensor>> {
    let x = tensor_of(input, "input")?;
    wrap(
        py,
        detached(py, move || act::leaky_relu(&x, negative_slope))?,
    )
}

/// hardtanh clamping to `[min_val, max_val]`.
#[pyfunction]
fn _nn_hardtanh(
    py: Python<'_>,
    input: &Bound<'_, PyAny>,
    min_val: f64,
    max_val: f64,
) -> PyResult<Py<PyTensor>> {
    let x = tensor_of(input, "input")?;
    wrap(
        py,
        detached(py, move || act::hardtanh(&x, min_val, max_val))?,
    )
}

/// glu along `dim`.
#[pyfunction]
fn _nn_glu(py: Python<'_>, input: &Bound<'_, PyAny>, dim: i64) -> PyResult<Py<PyTensor>> {
    let x = tensor_of(input, "input")?;
    wrap(py, detached(py, move || act::glu(&x, dim))?)
}

/// Inverted dropout with probability `p` (training mode).
#[pyfunction]
fn _nn_dropout(py: Python<'_>, input: &Bound<'_, PyAny>, p: f64) -> PyResult<Py<PyTensor>> {
    let x = tensor_of(input, "input")?;
    wrap(py, detached(py, move || act::dropout(&x, p))?)
}

/// hardshrink (`soft` false) or softshrink with threshold `lambd`.
#[pyfunction]
fn _nn_shrink(
    py: Python<'_>,
    input: &Bound<'_, PyAny>,
    lambd: f64,
    soft: bool,
) -> PyResult<Py<PyTensor>> {
    let x = tensor_of(input, "input")?;
    wrap(
        py,
        detached(py, move || {
            if soft {
                act::softshrink(&x, lambd)
            } else {
                act::hardshrink(&x, lambd)
            }
        })?,
    )
}

/// Channel-wise (`feature`) and/or alpha dropout with probability `p` (training mode).
#[pyfunction]
fn _nn_dropout_ext(
    py: Python<'_>,
    input: &Bound<'_, PyAny>,
    p: f64,
    feature: bool,
    alpha: bool,
) -> PyResult<Py<PyTensor>> {
    let x = tensor_of(input, "input")?;
    let kind = act::Dropout { feature, alpha };
    wrap(py, detached(py, move || act::dropout_with(&x, p, kind))?)
}

/// Randomized leaky ReLU with slopes in `[lower, upper]`.
#[pyfunction]
fn _nn_rrelu(
    py: Python<'_>,
    input: &Bound<'_, PyAny>,
    lower: f64,
    upper: f64,
    training: bool,
) -> PyResult<Py<PyTensor>> {
    let x = tensor_of(input, "input")?;
    wrap(
        py,
        detached(py, move || act::rrelu(&x, lower, upper, training))?,
    )
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
    let r = self::reduction(reduction)?;
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
    let r = self::reduction(reduction)?;
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
    let r = self::reduction(reduction)?;
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

/// Register the activation and loss bindings on `ferrograd._C`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_nn_gelu, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_silu, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_mish, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_elu, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_selu, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_celu, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_softplus, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_hardswish, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_hardsigmoid, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_leaky_relu, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_hardtanh, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_logsigmoid, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_glu, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_dropout, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_shrink, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_dropout_ext, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_rrelu, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_cross_entropy, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_nll_loss, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_pointwise_loss, m)?)?;
    Ok(())
}
