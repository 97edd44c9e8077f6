//! The margin and embedding losses of torch (`cosine_embedding_loss`, `margin_ranking_loss`,
//! `triplet_margin_loss`, `hinge_embedding_loss`, `soft_margin_loss`,
//! `multilabel_soft_margin_loss`) and the Poisson and Gaussian negative log-likelihoods.
//!
//! Each is torch's formula composed of native differentiable ops (as ATen composes them), so
//! gradients of any order follow, and bad shapes give torch's errors.

use crate::error::{Error, Result};
use crate::ops::nn::distance::pairwise_distance;
use crate::ops::nn::loss::{reduce, Reduction};
use crate::tensor::shape::fmt_shape;
use crate::tensor::Tensor;

/// A 0-d constant of `t`'s dtype.
fn scalar(v: f64, t: &Tensor) -> Tensor {
    Tensor::wrapped_scalar(v, t.dtype())
}

/// `max(x, 0)`, passing the gradient where `x >= 0` (torch's `clamp_min`).
fn clamp_min0(x: &Tensor) -> Result<Tensor> {
    x.clamp(Some(&scalar(0.0, x)), None)
}

/// `x` clamped below at `eps` with the gradient of `x` (torch clamps a clone in place under
/// `no_grad`, which leaves the graph as if no clamp happened).
fn clamp_keep_grad(x: &Tensor, eps: f64) -> Result<Tensor> {
    let xd = x.detach();
    let shift = Tensor::where_cond(&xd.lt_scalar(eps)?, &xd.rsub_scalar(eps)?, &scalar(0.0, x))?;
    x.add(&shift)
}

/// `1 - cos(x1, x2)` where `target == 1`, `max(0, cos - margin)` where `target == -1`, with
/// `cos = Σ x1 x2 / sqrt((Σ x1² + 1e-12)(Σ x2² + 1e-12))` over the last dim. A 1-D `target`
/// needs 2-D inputs, a 0-d one 1-D inputs (torch's `RuntimeError` otherwise).
pub fn cosine_embedding_loss(
    x1: &Tensor,
    x2: &Tensor,
    target: &Tensor,
    margin: f64,
    reduction: Reduction,
) -> Result<Tensor> {
    const EPSILON: f64 = 1e-12;
    let td = target.dim();
    if td > 1 {
        return Err(Error::runtime(
            "0D or 1D target tensor expected, multi-target not supported",
        ));
    }
    let want = td + 1;
    if x1.dim() != want || x2.dim() != want {
        return Err(Error::runtime(format!(
            "{}D target tensor expects {}D input tensors, but found inputs with sizes {} and {}.",
            td,
            want,
            fmt_shape(x1.shape()),
            fmt_shape(x2.shape())
        )));
    }
    let d = [td as i64];
    let prod = x1.mul(x2)?.sum_dims(&d, false)?;
    let m1 = x1.mul(x1)?.sum_dims(&d, false)?.add_scalar(EPSILON)?;
    let m2 = x2.mul(x2)?.sum_dims(&d, false)?.add_scalar(EPSILON)?;
    let cos = prod.div(&m1.mul(&m2)?.sqrt()?)?;
    let zero = scalar(0.0, &cos);
    let pos = cos.rsub_scalar(1.0)?;
    let neg = clamp_min0(&cos.sub_scalar(margin)?)?;
    let out = Tensor::where_cond(&target.eq_scalar(1.0)?, &pos, &zero)?
        .add(&Tensor::where_cond(&target.eq_scalar(-1.0)?, &neg, &zero)?)?;
    reduce(out, reduction)
}

/// `max(0, -target (x1 - x2) + margin)`; the caller checks that the three have one rank.
pub fn margin_ranking_loss(
    x1: &Tensor,
    x2: &Tensor,
    target: &Tensor,
    margin: f64,
    reduction: Reduction,
) -> Result<Tensor> {
    let out = clamp_min0(&target.neg()?.mul(&x1.sub(x2)?)?.add_scalar(margin)?)?;
    reduce(out, reduction)
}

/// `max(0, margin + d(a, p) - d(a, n))` with `d` the `pairwise_distance` of norm `p`; with
/// `swap`, `d(a, n)` is replaced by `min(d(a, n), d(p, n))`. The three must share a rank.
#[allow(clippy::too_many_arguments)]
pub fn triplet_margin_loss(
    anchor: &Tensor,
    positive: &Tensor,
    negative: &Tensor,
    margin: f64,
    p: f64,
    eps: f64,
    swap: bool,
    reduction: Reduction,
) -> Result<Tensor> {
    let (a, pd, n) = (anchor.dim(), positive.dim(), negative.dim());
    if a != pd || pd != n {
        return Err(Error::runtime(format!(
            "The anchor, positive, and negative tensors are expected to have the same number of dimensions, but got: anchor {a}D, positive {pd}D, and negative {n}D inputs"
        )));
    }
    let dist_pos = pairwise_distance(anchor, positive, p, eps, false)?;
    let mut dist_neg = pairwise_distance(anchor, negative, p, eps, false)?;
    if swap {
        dist_neg = dist_neg.minimum(&pairwise_distance(positive, negative, p, eps, false)?)?;
    }
    let out = clamp_min0(&dist_pos.sub(&dist_neg)?.add_scalar(margin)?)?;
    reduce(out, reduction)
}

/// `x` where `target == 1`, `max(0, margin - x)` where `target == -1` (other target values get
/// both terms, as torch's formula gives).
pub fn hinge_embedding_loss(
    x: &Tensor,
    target: &Tensor,
    margin: f64,
    reduction: Reduction,
) -> Result<Tensor> {
    let zero = scalar(0.0, x);
    let margin_clamp = clamp_min0(&x.rsub_scalar(margin)?)?;
    let out = Tensor::where_cond(&target.ne_scalar(1.0)?, &margin_clamp, &zero)?
        .add(&Tensor::where_cond(&target.ne_scalar(-1.0)?, x, &zero)?)?;
    reduce(out, reduction)
}

/// `log(1 + exp(-target x))`. Like torch's, it has no gradient for `target`: a `target` that
/// requires grad (while grad mode records) is a `RuntimeError`.
pub fn soft_margin_loss(x: &Tensor, target: &Tensor, reduction: Reduction) -> Result<Tensor> {
    if crate::tensor::grad_mode::is_grad_enabled() && target.requires_grad() {
        return Err(Error::runtime(
            "The function 'soft_margin_loss' is not differentiable with respect to argument 'target'. This input cannot have requires_grad True.",
        ));
    }
    reduce(x.neg()?.mul(target)?.exp()?.log1p()?, reduction)
}

/// `-(y log σ(x) + (1 - y) log σ(-x))`, times `weight`, averaged over the last (class) dim:
/// one loss per sample before the reduction.
pub fn multilabel_soft_margin_loss(
    x: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction: Reduction,
) -> Result<Tensor> {
    use crate::ops::nn::activation::logsigmoid;
    let mut loss = target
        .mul(&logsigmoid(x)?)?
        .add(&target.rsub_scalar(1.0)?.mul(&logsigmoid(&x.neg()?)?)?)?
        .neg()?;
    if let Some(w) = weight {
        loss = loss.mul(w)?;
    }
    let class_dim = x.dim() as i64 - 1;
    let classes = if x.dim() == 0 {
        1
    } else {
        x.shape()[x.dim() - 1]
    };
    let loss = loss
        .sum_dims(&[class_dim], false)?
        .div_scalar(classes as f64)?;
    reduce(loss, reduction)
}

/// Poisson negative log-likelihood: `exp(x) - y x` (`log_input`) or `x - y log(x + eps)`; with
/// `full`, plus Stirling's `y log y - y + log(2π y) / 2` where `y > 1`.
pub fn poisson_nll_loss(
    x: &Tensor,
    target: &Tensor,
    log_input: bool,
    full: bool,
    eps: f64,
    reduction: Reduction,
) -> Result<Tensor> {
    let mut loss = if log_input {
        x.exp()?.sub(&target.mul(x)?)?
    } else {
        x.sub(&target.mul(&x.add_scalar(eps)?.log()?)?)?
    };
    if full {
        let stirling = target.mul(&target.log()?)?.sub(target)?.add(
            &target
                .mul_scalar(2.0 * std::f64::consts::PI)?
                .log()?
                .mul_scalar(0.5)?,
        )?;
        loss = loss.add(&stirling.masked_fill(&target.le_scalar(1.0)?, 0.0)?)?;
    }
    reduce(loss, reduction)
}

/// Gaussian negative log-likelihood `(log v + (x - y)² / v) / 2` (plus `log(2π) / 2` with
/// `full`), `v = max(var, eps)` with the gradient of `var`. `var` already broadcasts against
/// `x` (the caller applies torch's shape rules); a negative entry is a `ValueError`.
pub fn gaussian_nll_loss(
    x: &Tensor,
    target: &Tensor,
    var: &Tensor,
    full: bool,
    eps: f64,
    reduction: Reduction,
) -> Result<Tensor> {
    // Inside vmap: checked over every sample at once.
    let negative = crate::tensor::batched::innermost(var).lt_scalar(0.0)?;
    if negative.any_dims(&[], false)?.item()? != 0.0 {
        return Err(Error::value("var has negative entry/entries"));
    }
    let v = clamp_keep_grad(var, eps)?;
    let diff = x.sub(target)?;
    let mut loss = v.log()?.add(&diff.mul(&diff)?.div(&v)?)?.mul_scalar(0.5)?;
    if full {
        loss = loss.add_scalar(0.5 * (2.0 * std::f64::consts::PI).ln())?;
    }
    reduce(loss, reduction)
}
