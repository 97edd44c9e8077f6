//! Bindings of `crate::ops::nn::{distance, prelu, margin_loss}`: `cosine_similarity`,
//! `pairwise_distance`, `normalize`, `prelu` and the margin/embedding losses, the GIL released
//! while the kernels run.

use pyo3::prelude::*;

use super::errors::detached;
use super::tensor::{tensor_of, wrap, PyTensor};
use crate::ops::nn::loss::Reduction;
use crate::ops::nn::{distance, margin_loss as ml, prelu};
use crate::tensor::Tensor;

fn parse_reduction(s: &str) -> PyResult<Reduction> {
    super::errors::guarded(|| Reduction::parse(s))
}

fn tensors<const N: usize>(objs: [(&Bound<'_, PyAny>, &str); N]) -> PyResult<[Tensor; N]> {
    let v = objs
        .iter()
        .map(|(o, what)| tensor_of(o, what))
        .collect::<PyResult<Vec<_>>>()?;
    v.try_into()
        .map_err(|_| pyo3::exceptions::PyRuntimeError::new_err("internal error: tensor count"))
}

/// Cosine similarity of `x1` and `x2` (broadcast) along `dim`.
#[pyfunction]
#[pyo3(signature = (x1, x2, dim, eps))]
fn _nn_cosine_similarity(
    py: Python<'_>,
    x1: &Bound<'_, PyAny>,
    x2: &Bound<'_, PyAny>,
    dim: i64,
    eps: f64,
) -> PyResult<Py<PyTensor>> {
    let (a, b) = (tensor_of(x1, "x1")?, tensor_of(x2, "x2")?);
    wrap(
        py,
        detached(py, move || distance::cosine_similarity(&a, &b, dim, eps))?,
    )
}

/// The `p`-norm of `x1 - x2 + eps` over the last dim.
#[pyfunction]
#[pyo3(signature = (x1, x2, p, eps, keepdim))]
fn _nn_pairwise_distance(
    py: Python<'_>,
    x1: &Bound<'_, PyAny>,
    x2: &Bound<'_, PyAny>,
    p: f64,
    eps: f64,
    keepdim: bool,
) -> PyResult<Py<PyTensor>> {
    let (a, b) = (tensor_of(x1, "x1")?, tensor_of(x2, "x2")?);
    wrap(
        py,
        detached(py, move || {
            distance::pairwise_distance(&a, &b, p, eps, keepdim)
        })?,
    )
}

/// `x / max(‖x‖_p, eps)` along `dim`.
#[pyfunction]
#[pyo3(signature = (input, p, dim, eps))]
fn _nn_normalize(
    py: Python<'_>,
    input: &Bound<'_, PyAny>,
    p: f64,
    dim: i64,
    eps: f64,
) -> PyResult<Py<PyTensor>> {
    let x = tensor_of(input, "input")?;
    wrap(
        py,
        detached(py, move || distance::normalize(&x, p, dim, eps))?,
    )
}

/// PReLU with one slope or one per channel (dim 1).
#[pyfunction]
fn _nn_prelu(
    py: Python<'_>,
    input: &Bound<'_, PyAny>,
    weight: &Bound<'_, PyAny>,
) -> PyResult<Py<PyTensor>> {
    let (x, w) = (tensor_of(input, "input")?, tensor_of(weight, "weight")?);
    wrap(py, detached(py, move || prelu::prelu(&x, &w))?)
}

/// `torch.cdist` (`compute_mode` 0: matrix product if either side has more than 25 rows,
/// 1: always for p = 2, 2: never).
#[pyfunction]
fn _cdist(
    py: Python<'_>,
    x1: &Bound<'_, PyAny>,
    x2: &Bound<'_, PyAny>,
    p: f64,
    compute_mode: i64,
) -> PyResult<Py<PyTensor>> {
    let [a, b] = tensors([(x1, "x1"), (x2, "x2")])?;
    let mode = match compute_mode {
        0 => distance::CdistMode::MmIfNecessary,
        1 => distance::CdistMode::Mm,
        2 => distance::CdistMode::Direct,
        _ => {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "{compute_mode} is not a valid value for compute_mode"
            )))
        }
    };
    wrap(py, detached(py, move || distance::cdist(&a, &b, p, mode))?)
}

/// `cosine_embedding_loss`.
#[pyfunction]
fn _nn_cosine_embedding_loss(
    py: Python<'_>,
    input1: &Bound<'_, PyAny>,
    input2: &Bound<'_, PyAny>,
    target: &Bound<'_, PyAny>,
    margin: f64,
    reduction: &str,
) -> PyResult<Py<PyTensor>> {
    let [a, b, t] = tensors([(input1, "input1"), (input2, "input2"), (target, "target")])?;
    let r = parse_reduction(reduction)?;
    wrap(
        py,
        detached(py, move || ml::cosine_embedding_loss(&a, &b, &t, margin, r))?,
    )
}

/// `margin_ranking_loss`.
#[pyfunction]
fn _nn_margin_ranking_loss(
    py: Python<'_>,
    input1: &Bound<'_, PyAny>,
    input2: &Bound<'_, PyAny>,
    target: &Bound<'_, PyAny>,
    margin: f64,
    reduction: &str,
) -> PyResult<Py<PyTensor>> {
    let [a, b, t] = tensors([(input1, "input1"), (input2, "input2"), (target, "target")])?;
    let r = parse_reduction(reduction)?;
    wrap(
        py,
        detached(py, move || ml::margin_ranking_loss(&a, &b, &t, margin, r))?,
    )
}

/// `triplet_margin_loss`.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn _nn_triplet_margin_loss(
    py: Python<'_>,
    anchor: &Bound<'_, PyAny>,
    positive: &Bound<'_, PyAny>,
    negative: &Bound<'_, PyAny>,
    margin: f64,
    p: f64,
    eps: f64,
    swap: bool,
    reduction: &str,
) -> PyResult<Py<PyTensor>> {
    let [a, pos, neg] = tensors([
        (anchor, "anchor"),
        (positive, "positive"),
        (negative, "negative"),
    ])?;
    let r = parse_reduction(reduction)?;
    wrap(
        py,
        detached(py, move || {
            ml::triplet_margin_loss(&a, &pos, &neg, margin, p, eps, swap, r)
        })?,
    )
}

/// `hinge_embedding_loss`.
#[pyfunction]
fn _nn_hinge_embedding_loss(
    py: Python<'_>,
    input: &Bound<'_, PyAny>,
    target: &Bound<'_, PyAny>,
    margin: f64,
    reduction: &str,
) -> PyResult<Py<PyTensor>> {
    let [x, t] = tensors([(input, "input"), (target, "target")])?;
    let r = parse_reduction(reduction)?;
    wrap(
        py,
        detached(py, move || ml::hinge_embedding_loss(&x, &t, margin, r))?,
    )
}

/// `soft_margin_loss`.
#[pyfunction]
fn _nn_soft_margin_loss(
    py: Python<'_>,
    input: &Bound<'_, PyAny>,
    target: &Bound<'_, PyAny>,
    reduction: &str,
) -> PyResult<Py<PyTensor>> {
    let [x, t] = tensors([(input, "input"), (target, "target")])?;
    let r = parse_reduction(reduction)?;
    wrap(py, detached(py, move || ml::soft_margin_loss(&x, &t, r))?)
}

/// `multilabel_soft_margin_loss`.
#[pyfunction]
#[pyo3(signature = (input, target, weight, reduction))]
fn _nn_multilabel_soft_margin_loss(
    py: Python<'_>,
    input: &Bound<'_, PyAny>,
    target: &Bound<'_, PyAny>,
    weight: Option<&Bound<'_, PyAny>>,
    reduction: &str,
) -> PyResult<Py<PyTensor>> {
    let [x, t] = tensors([(input, "input"), (target, "target")])?;
    let w = weight.map(|w| tensor_of(w, "weight")).transpose()?;
    let r = parse_reduction(reduction)?;
    wrap(
        py,
        detached(py, move || {
            ml::multilabel_soft_margin_loss(&x, &t, w.as_ref(), r)
        })?,
    )
}

/// `poisson_nll_loss`.
#[pyfunction]
fn _nn_poisson_nll_loss(
    py: Python<'_>,
    input: &Bound<'_, PyAny>,
    target: &Bound<'_, PyAny>,
    log_input: bool,
    full: bool,
    eps: f64,
    reduction: &str,
) -> PyResult<Py<PyTensor>> {
    let [x, t] = tensors([(input, "input"), (target, "target")])?;
    let r = parse_reduction(reduction)?;
    wrap(
        py,
        detached(py, move || {
            ml::poisson_nll_loss(&x, &t, log_input, full, eps, r)
        })?,
    )
}

/// `gaussian_nll_loss` (`var` already shaped to broadcast against `input`).
#[pyfunction]
fn _nn_gaussian_nll_loss(
    py: Python<'_>,
    input: &Bound<'_, PyAny>,
    target: &Bound<'_, PyAny>,
    var: &Bound<'_, PyAny>,
    full: bool,
    eps: f64,
    reduction: &str,
) -> PyResult<Py<PyTensor>> {
    let [x, t, v] = tensors([(input, "input"), (target, "target"), (var, "var")])?;
    let r = parse_reduction(reduction)?;
    wrap(
        py,
        detached(py, move || ml::gaussian_nll_loss(&x, &t, &v, full, eps, r))?,
    )
}

/// Register the distance bindings on `ferrograd._C`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_nn_cosine_similarity, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_pairwise_distance, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_normalize, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_prelu, m)?)?;
    m.add_function(wrap_pyfunction!(_cdist, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_cosine_embedding_loss, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_margin_ranking_loss, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_triplet_margin_loss, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_hinge_embedding_loss, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_soft_margin_loss, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_multilabel_soft_margin_loss, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_poisson_nll_loss, m)?)?;
    m.add_function(wrap_pyfunction!(_nn_gaussian_nll_loss, m)?)?;
    Ok(())
}
