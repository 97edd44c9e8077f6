//! Losses of `torch.nn.functional`: cross_entropy and nll_loss over class indices as one fused
//! node (log-softmax and the pick in one pass, no dense one-hot), cross_entropy over class
//! probabilities, and the pointwise regression and binary losses, each with torch's reductions.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::graph::node::{grad_if_wanted, needs_grad, record};
use crate::tensor::grad_mode::GradModeGuard;
use std::mem::MaybeUninit;

use crate::kernels::vmath::bce_slice;
use crate::ops::elementwise::PAR_MIN_VMATH;
use crate::ops::nn::softmax::{
    assume_init, fill_blocks, geometry, lane_dot, lane_sum, lane_sums2, row_max, RowFloat,
    SUM_BLOCK,
};
use crate::parallel::{self, SendPtr};
use crate::tensor::creation::try_vec;
use crate::tensor::{scalar_type_name, DType, Element, Tensor};

/// How per-element losses are combined (torch's `reduction`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reduction {
    /// One loss per element (per sample for the class losses).
    None,
    /// The mean (the weighted mean for the class losses).
    Mean,
    /// The sum.
    Sum,
}

impl Reduction {
    /// Parse torch's name ("none", "mean", "sum").
    pub fn parse(s: &str) -> Result<Reduction> {
        match s {
            "none" => Ok(Reduction::None),
            "mean" => Ok(Reduction::Mean),
            "sum" => Ok(Reduction::Sum),
            _ => Err(Error::value(format!(
                "{s} is not a valid value for reduction"
            ))),
        }
    }
}

fn size_str(s: &[usize]) -> String {
    format!(
        "[{}]",
        s.iter()
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// Checks of a class-index loss's arguments (torch's messages); the class dim.
fn check_class_args(x: &Tensor, target: &Tensor, weight: Option<&Tensor>) -> Result<usize> {
    if x.dim() < 1 {
        return Err(Error::value(format!(
            "Expected 1 or more dimensions (got {})",
            x.dim()
        )));
    }
    let (xs, ts) = (x.shape(), target.shape());
    if x.dim() == 1 {
        if target.dim() != 0 && !(target.dim() == 1 && ts[0] == 1) {
            return Err(Error::value(format!(
                "Expected input batch_size (1) to match target batch_size ({}).",
                ts[0]
            )));
        }
    } else if target.dim() == 0 || xs[0] != ts[0] {
        let tb = if target.dim() == 0 { 1 } else { ts[0] };
        return Err(Error::value(format!(
            "Expected input batch_size ({}) to match target batch_size ({tb}).",
            xs[0]
        )));
    } else if x.dim() == 2 && target.dim() != 1 {
        return Err(Error::runtime(
            "0D or 1D target tensor expected, multi-target not supported",
        ));
    } else if x.dim() > 2 && (ts.len() != xs.len() - 1 || ts[1..] != xs[2..]) {
        let mut want = vec![xs[0]];
        want.extend_from_slice(&xs[2..]);
        return Err(Error::runtime(format!(
            "Expected target size {}, got {}",
            size_str(&want),
            size_str(ts)
        )));
    }
    if target.dtype() != DType::Int64 {
        return Err(Error::runtime(format!(
            "expected target dtype to be Long or Byte, but got {}",
            scalar_type_name(target.dtype())
        )));
    }
    let cd = usize::from(x.dim() > 1);
    class_weight_check(weight, xs[cd])?;
    if !x.dtype().is_float() {
        return Err(Error::not_implemented(format!(
            "\"log_softmax_lastdim_kernel_impl\" not implemented for '{}'",
            scalar_type_name(x.dtype())
        )));
    }
    Ok(cd)
}

/// What the backward of a class-index loss needs besides the input.
struct ClassParts {
    /// Target class per sample (any value where ignored).
    target: Vec<i64>,
    /// Whether each sample counts (its target is not `ignore_index`).
    valid: Vec<bool>,
    /// Class weights (ones when none were given).
    w: Vec<f64>,
    /// log Σ exp over the classes per sample (0 for nll_loss, whose input is log-probabilities).
    lse: Vec<f64>,
    /// Label smoothing ε.
    eps: f64,
    /// Whether the input holds logits (cross_entropy) or log-probabilities (nll_loss).
    logits: bool,
    /// `(outer, C, inner)` of the input along the class dim.
    geo: (usize, usize, usize),
    /// 1 / Σ w[t] over counted samples for `mean`, 1 otherwise.
    scale: f64,
    /// Rows of logits (`inner == 1`) with a graph: the forward's `e^(x - max)` per element and
    /// `1 / Σ e` per row, so the backward is one affine pass with no second exp.
    exps: Option<(Tensor, Vec<f64>)>,
}

impl ClassParts {
    /// Weight of sample i's picked class (0 when ignored).
    #[inline(always)]
    fn a(&self, i: usize) -> f64 {
        if self.valid[i] {
            self.w[self.target[i] as usize]
        } else {
            0.0
        }
    }
}

/// torch's check of `label_smoothing`.
fn label_smoothing_check(eps: f64) -> Result<()> {
    if !(0.0..=1.0).contains(&eps) {
        return Err(Error::runtime(format!(
            "label_smoothing must be between 0.0 and 1.0. Got: {eps}"
        )));
    }
    Ok(())
}

/// torch's check of a class `weight`: none, or one value for each of the `c` classes.
fn class_weight_check(weight: Option<&Tensor>, c: usize) -> Result<()> {
    if let Some(w) = weight {
        if w.dim() != 1 || w.shape()[0] != c {
            return Err(Error::runtime(format!(
                "weight tensor should be defined either for all {c} classes or no classes but got weight tensor of shape: {}",
                size_str(w.shape())
            )));
        }
    }
    Ok(())
}

/// cross_entropy over class indices: `log_softmax` along the class dim and the negative
/// log-likelihood of the target class in one fused pass, with torch's class `weight`,
/// `ignore_index`, `label_smoothing` ε and reductions (`mean` divides by the total weight of the
/// counted targets). Input `(C)`, `(N, C)` or `(N, C, d1, ...)`; target `()`, `(N)` or
/// `(N, d1, ...)`.
pub fn cross_entropy(
    x: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    ignore_index: i64,
    reduction: Reduction,
    label_smoothing: f64,
) -> Result<Tensor> {
    if let Some(r) = Tensor::lift_half([x], [weight], |[x], [w]| {
        cross_entropy(x, target, w, ignore_index, reduction, label_smoothing)
    }) {
        return r;
    }
    class_loss(
        x,
        target,
        weight,
        ignore_index,
        reduction,
        label_smoothing,
        true,
    )
}

/// nll_loss: `-w[t] · input[t]` per sample (input holds log-probabilities), reduced as
/// cross_entropy.
pub fn nll_loss(
    x: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    ignore_index: i64,
    reduction: Reduction,
) -> Result<Tensor> {
    if let Some(r) = Tensor::lift_half([x], [weight], |[x], [w]| {
        nll_loss(x, target, w, ignore_index, reduction)
    }) {
        return r;
    }
    class_loss(x, target, weight, ignore_index, reduction, 0.0, false)
}

fn class_loss(
    x: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    ignore_index: i64,
    reduction: Reduction,
    eps: f64,
    logits: bool,
) -> Result<Tensor> {
    label_smoothing_check(eps)?;
    let cd = check_class_args(x, target, weight)?;
    if x.is_batched() || target.is_batched() || weight.is_some_and(|w| w.is_batched()) {
        let args = (ignore_index, reduction, eps, logits, cd);
        return class_loss_batched(x, target, weight, args);
    }
    let geo = geometry(x.shape(), cd);
    let (outer, c, inner) = geo;
    let t: Vec<i64> = target.contiguous()?.to_vec::<i64>()?;
    let valid: Vec<bool> = t.iter().map(|&v| v != ignore_index).collect();
    if let Some((&bad, _)) = t
        .iter()
        .zip(&valid)
        .find(|(&v, &ok)| ok && (v < 0 || v >= c as i64))
    {
        return Err(Error::index(format!("Target {bad} is out of bounds.")));
    }
    let w: Vec<f64> = match weight {
        Some(w) => w.contiguous()?.to_vec::<f64>()?,
        None => vec![1.0; c],
    };
    let xc = x.contiguous()?;
    // Per-sample losses (f64) and log Σ exp.
    let keep = needs_grad(&[x]);
    let (per, lse, exps) = match x.dtype() {
        DType::Float32 => sample_losses::<f32>(&xc, geo, &t, &valid, &w, eps, logits, keep)?,
        _ => sample_losses::<f64>(&xc, geo, &t, &valid, &w, eps, logits, keep)?,
    };
    let mut parts = ClassParts {
        target: t,
        valid,
        w,
        lse,
        eps,
        logits,
        geo,
        scale: 1.0,
        exps,
    };
    let denom: f64 = (0..outer * inner).map(|i| parts.a(i)).sum();
    let tshape: Vec<usize> = target.shape().to_vec();
    let out = match reduction {
        Reduction::None => Tensor::from_vec(per, &tshape)?,
        Reduction::Sum => Tensor::from_vec(vec![per.iter().sum::<f64>()], &[])?,
        Reduction::Mean => {
            parts.scale = 1.0 / denom;
            Tensor::from_vec(vec![per.iter().sum::<f64>() / denom], &[])?
        }
    };
    let out = crate::kernels::copy::as_dtype(&out, x.dtype())?;
    if needs_grad(&[x]) {
        let parts = Arc::new(parts);
        let name = if x.dim() > 2 {
            "NllLoss2DBackward0"
        } else {
            "NllLossBackward0"
        };
        record(name, &[x], &[&out], &[x], true, move |g, s| {
            let (g, x) = (&g[0], &s[0]);
            let gx = if needs_grad(&[g, x]) {
                class_grad_graph(g, x, &parts, cd, reduction)?
            } else {
                class_grad_fused(g, x, &parts)?
            };
            Ok(vec![Some(gx)])
        })?;
    }
    Ok(out)
}

/// [`class_loss`] inside vmap, from batch-aware ops (the fused kernel reads elements
/// directly): log-softmax, a one-hot of the targets made by comparing them with the class
/// numbers, and sums along the class dim `cd`. `mean` divides by the weight of the counted
/// targets, as the fused kernel does.
fn class_loss_batched(
    x: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    (ignore_index, reduction, eps, logits, cd): (i64, Reduction, f64, bool, usize),
) -> Result<Tensor> {
    let c = x.shape()[cd];
    let targets = crate::tensor::batched::innermost(target)
        .contiguous()?
        .to_vec::<i64>()?;
    if let Some(bad) = targets
        .iter()
        .find(|&&v| v != ignore_index && (v < 0 || v >= c as i64))
    {
        return Err(Error::index(format!("Target {bad} is out of bounds.")));
    }
    let dt = x.dtype();
    let lp = if logits {
        x.log_softmax(cd as i64)?
    } else {
        x.clone()
    };
    // The class numbers along `cd`, broadcasting over the dims after it.
    let mut cshape = vec![1usize; x.dim() - cd];
    cshape[0] = c;
    let classes = Tensor::arange(0.0, c as f64, 1.0, DType::Int64)?.reshape(&cshape)?;
    let onehot = target.unsqueeze(cd as i64)?.eq_t(&classes)?.to_dtype(dt)?;
    let valid = target.ne_scalar(ignore_index as f64)?.to_dtype(dt)?;
    let wc = weight
        .map(|w| w.to_dtype(dt)?.reshape(&cshape))
        .transpose()?;
    let class_sum = |t: &Tensor| t.sum_dims(&[cd as i64], false);
    // The weight of each sample's target class, 0 where it is ignored.
    let a = match &wc {
        Some(w) => class_sum(&onehot.mul(w)?)?.mul(&valid)?,
        None => valid.clone(),
    };
    let mut per = class_sum(&lp.mul(&onehot)?)?.neg()?.mul(&a)?;
    if eps > 0.0 {
        let wlp = match &wc {
            Some(w) => lp.mul(w)?,
            None => lp.clone(),
        };
        let smooth = class_sum(&wlp)?.neg()?.mul(&valid)?;
        per = per
            .mul_scalar(1.0 - eps)?
            .add(&smooth.mul_scalar(eps / c as f64)?)?;
    }
    match reduction {
        Reduction::None => Ok(per),
        Reduction::Sum => per.sum(),
        Reduction::Mean => per.sum()?.div(&a.sum()?),
    }
}

/// Per-sample losses (f64, sample order), each sample's log Σ exp over the classes and, for
/// rows of logits when `keep`, the exponentials the backward reuses.
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
fn sample_losses<T: RowFloat>(
    x: &Tensor,
    (outer, c, inner): (usize, usize, usize),
    t: &[i64],
    valid: &[bool],
    w: &[f64],
    eps: f64,
    logits: bool,
    keep: bool,
) -> Result<(Vec<f64>, Vec<f64>, Option<(Tensor, Vec<f64>)>)> {
    let block = c * inner;
    let wsum: f64 = w.iter().sum();
    let wt: Vec<T> = w.iter().map(|&v| T::of(v)).collect();
    let unweighted = w.iter().all(|&v| v == 1.0);
    let cf = c as f64;
    // The loss of sample i from its lse, picked logit and Σ w_k x_k (label smoothing).
    let loss_of = |i: usize, lse: f64, picked: f64, wx: f64| -> f64 {
        if !valid[i] {
            return 0.0;
        }
        let wti = w[t[i] as usize];
        let nll = -(picked - lse) * wti;
        if eps > 0.0 {
            // Σ_k w_k (lse - x_k) = lse Σw - Σ w_k x_k
            (1.0 - eps) * nll + eps / cf * (lse * wsum - wx)
        } else {
            nll
        }
    };
    if inner == 1 && logits {
        let wopt = (!unweighted).then_some(wt.as_slice());
        let rows =
            x.with_contiguous_slice::<T, _>(|xs| logit_rows(xs, outer, c, wopt, eps > 0.0, keep))??;
        let mut per = Vec::with_capacity(outer);
        let mut lses = Vec::with_capacity(outer);
        x.with_contiguous_slice::<T, _>(|xs| {
            for i in 0..outer {
                let lse = rows.lse[i];
                let picked = if valid[i] {
                    xs[i * c + t[i] as usize].f()
                } else {
                    0.0
                };
                per.push(loss_of(i, lse, picked, rows.wx[i]));
                lses.push(lse);
            }
        })?;
        let exps = match rows.exps {
            Some(e) => Some((Tensor::from_vec(e, x.shape())?, rows.inv)),
            None => None,
        };
        return Ok((per, lses, exps));
    }
    let res = x.with_contiguous_slice::<T, _>(|xs| {
        // Per outer block: inner pairs (loss, lse), interleaved.
        fill_blocks::<f64>(outer, 2 * inner, |o, out, _| {
            let xb = &xs[o * block..(o + 1) * block];
            for j in 0..inner {
                let i = o * inner + j;
                let lse = if !logits {
                    0.0
                } else {
                    let col = (0..c).map(|k| xb[k * inner + j].f());
                    let m = col.clone().fold(f64::NEG_INFINITY, f64::max);
                    m + col.map(|v| (v - m).exp()).sum::<f64>().ln()
                };
                let (picked, wx) = if valid[i] {
                    let picked = xb[t[i] as usize * inner + j].f();
                    let wx = if eps > 0.0 {
                        (0..c).map(|k| w[k] * xb[k * inner + j].f()).sum()
                    } else {
                        0.0
                    };
                    (picked, wx)
                } else {
                    (0.0, 0.0)
                };
                out[2 * j].write(loss_of(i, lse, picked, wx));
                out[2 * j + 1].write(lse);
            }
        })
    })??;
    let per = res.iter().step_by(2).copied().collect();
    let lse = res.iter().skip(1).step_by(2).copied().collect();
    Ok((per, lse, None))
}

/// Per-row results of [`logit_rows`].
struct LogitRows<T> {
    /// log Σ_k e^(x_k).
    lse: Vec<f64>,
    /// Σ_k w_k x_k (0 unless asked for).
    wx: Vec<f64>,
    /// 1 / Σ_k e^(x_k - max).
    inv: Vec<f64>,
    /// e^(x - max) per element, when kept.
    exps: Option<Vec<T>>,
}

/// log Σ exp (and Σ w x when `want_wx`) of each of `rows` contiguous rows of `c` logits, the
/// rows shared among the pool's threads by the size of the input (the per-row results alone
/// would never reach the parallel threshold). `keep`: also return `e^(x - max)`.
fn logit_rows<T: RowFloat>(
    xs: &[T],
    rows: usize,
    c: usize,
    w: Option<&[T]>,
    want_wx: bool,
    keep: bool,
) -> Result<LogitRows<T>> {
    let mut lse = vec![0f64; rows];
    let mut wx = vec![0f64; rows];
    let mut inv = vec![0f64; rows];
    let mut exps: Vec<T> = if keep { try_vec(rows * c)? } else { Vec::new() };
    let ptrs = SendPtr((
        lse.as_mut_ptr(),
        wx.as_mut_ptr(),
        inv.as_mut_ptr(),
        exps.spare_capacity_mut().as_mut_ptr(),
    ));
    let per_task = (8192 / c.max(1)).max(1);
    let helpers = if rows * c >= PAR_MIN_VMATH {
        parallel::helpers()
    } else {
        0
    };
    parallel::share_work(helpers, rows.div_ceil(per_task), &|task| {
        let (pl, pw, pi, pe) = ptrs.get();
        let mut z: Vec<T> = vec![T::zero(); c];
        let mut scratch: Vec<MaybeUninit<T>> = if keep {
            Vec::new()
        } else {
            (0..c).map(|_| MaybeUninit::uninit()).collect()
        };
        for r in task * per_task..((task + 1) * per_task).min(rows) {
            let xr = &xs[r * c..(r + 1) * c];
            let (m, dot) = max_and_dot(xr, w, want_wx);
            shift_row(&mut z, xr, m);
            let er: &mut [MaybeUninit<T>] = if keep {
                // SAFETY: row r of the spare capacity belongs to this task alone.
                unsafe { std::slice::from_raw_parts_mut(pe.add(r * c), c) }
            } else {
                &mut scratch
            };
            T::exp_into(&z, er);
            // SAFETY: exp_into wrote every element.
            let er = unsafe { &*(er as *const [MaybeUninit<T>] as *const [T]) };
            let s = row_sum(er);
            // SAFETY: slot r belongs to this task alone.
            unsafe {
                *pl.add(r) = m.f() + s.ln();
                *pw.add(r) = dot;
                *pi.add(r) = 1.0 / s;
            }
        }
    });
    if keep {
        // SAFETY: every row was written by exp_into above.
        unsafe { exps.set_len(rows * c) };
    }
    Ok(LogitRows {
        lse,
        wx,
        inv,
        exps: keep.then_some(exps),
    })
}

/// The row's maximum and, when `want_dot`, Σ w x (Σ x without weights); compiled for the
/// vector targets (closures handed to the pool would run them as baseline code).
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq+avx2+avx+fma",
    "x86_64+avx2+avx+fma",
    "aarch64+neon"
))]
fn max_and_dot<T: RowFloat>(x: &[T], w: Option<&[T]>, want_dot: bool) -> (T, f64) {
    let dot = match (want_dot, w) {
        (false, _) => 0.0,
        (true, Some(w)) => lane_dot(x, w),
        (true, None) => lane_sum(x, |v| v),
    };
    (row_max(x), dot)
}

/// `z = x - m` (targets as [`max_and_dot`]).
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq+avx2+avx+fma",
    "x86_64+avx2+avx+fma",
    "aarch64+neon"
))]
fn shift_row<T: RowFloat>(z: &mut [T], x: &[T], m: T) {
    for (o, &v) in z.iter_mut().zip(x) {
        *o = v - m;
    }
}

/// Σ e (targets as [`max_and_dot`]).
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq+avx2+avx+fma",
    "x86_64+avx2+avx+fma",
    "aarch64+neon"
))]
fn row_sum<T: RowFloat>(e: &[T]) -> f64 {
    lane_sum(e, |v| v)
}

/// `out = p e - q w` (`q w` left out when `q` is 0; targets as [`max_and_dot`]).
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq+avx2+avx+fma",
    "x86_64+avx2+avx+fma",
    "aarch64+neon"
))]
fn grad_row<T: RowFloat>(out: &mut [MaybeUninit<T>], e: &[T], p: T, q: T, w: &[T]) {
    if q == T::zero() {
        for (o, &ev) in out.iter_mut().zip(e) {
            o.write(p * ev);
        }
    } else {
        for ((o, &ev), &wv) in out.iter_mut().zip(e).zip(w) {
            o.write(p * ev - q * wv);
        }
    }
}

/// The input gradient of a class loss in one pass: per sample,
/// `gs · (coef · softmax - K)` with `coef = a(1-ε) + ε/C · Σw` and
/// `K_c = a(1-ε)[c = t] + ε/C · w_c` (ignored samples: 0); nll_loss has no softmax term.
fn class_grad_fused(g: &Tensor, x: &Tensor, p: &ClassParts) -> Result<Tensor> {
    match x.dtype() {
        DType::Float32 => class_grad_as::<f32>(g, x, p),
        _ => class_grad_as::<f64>(g, x, p),
    }
}

fn class_grad_as<T: RowFloat>(g: &Tensor, x: &Tensor, p: &ClassParts) -> Result<Tensor> {
    let (outer, c, inner) = p.geo;
    let block = c * inner;
    let gv: Vec<f64> = g.contiguous()?.to_vec::<f64>()?;
    let per_sample = gv.len() == outer * inner && g.dim() > 0;
    let wsum: f64 = p.w.iter().sum();
    let wt: Vec<T> = p.w.iter().map(|&v| T::of(v)).collect();
    let cf = c as f64;
    if let Some((e, inv)) = &p.exps {
        // Rows of logits: softmax = e · inv from the forward, one affine pass per row.
        let v = e.with_contiguous_slice::<T, _>(|es| {
            fill_blocks::<T>(outer, c, |i, out, _| {
                let gs = if per_sample { gv[i] } else { gv[0] } * p.scale;
                let valid = p.valid[i];
                let a = p.a(i);
                let coef = if valid {
                    a * (1.0 - p.eps) + p.eps / cf * wsum
                } else {
                    0.0
                };
                let q = if valid { p.eps / cf * gs } else { 0.0 };
                let er = &es[i * c..(i + 1) * c];
                grad_row(out, er, T::of(gs * coef * inv[i]), T::of(q), &wt);
                if valid {
                    let t = p.target[i] as usize;
                    // SAFETY: grad_row wrote every element of the row.
                    let ot = unsafe { out[t].assume_init() };
                    out[t].write(ot - T::of(gs * a * (1.0 - p.eps)));
                }
            })
        })??;
        return Tensor::from_vec(v, x.shape());
    }
    if !p.logits && p.eps == 0.0 {
        // nll_loss: every gradient is zero but the target's, so a zero fill and one write per
        // sample (the general loop below costs a branchy f64 step per element), on this
        // thread: the fill is memory-bound, and handing half to a helper made 512 x 1000 slower
        // (0.072 ms a step on two threads against 0.044 on one).
        let n = outer * block;
        let mut v = try_vec::<T>(n)?;
        // SAFETY: all-zero bits are 0.0 in f32 and f64 (RowFloat's types), and the n slots are
        // in the capacity. write_bytes is the C library's memset (vector stores, twice the
        // speed of filling element by element at 512 x 1000).
        unsafe {
            std::ptr::write_bytes(v.as_mut_ptr(), 0, n);
            v.set_len(n);
        }
        for (o, out) in v.chunks_exact_mut(block.max(1)).enumerate() {
            for j in 0..inner {
                let i = o * inner + j;
                if p.valid[i] {
                    let gs = if per_sample { gv[i] } else { gv[0] } * p.scale;
                    out[p.target[i] as usize * inner + j] = T::of(-gs * p.a(i));
                }
            }
        }
        return Tensor::from_vec(v, x.shape());
    }
    let v = x.with_contiguous_slice::<T, _>(|xs| {
        fill_blocks::<T>(outer, block, |o, out, _| {
            let xb = &xs[o * block..(o + 1) * block];
            for j in 0..inner {
                let i = o * inner + j;
                let gs = if per_sample { gv[i] } else { gv[0] } * p.scale;
                let valid = p.valid[i];
                let a = p.a(i);
                let coef = if valid {
                    a * (1.0 - p.eps) + p.eps / cf * wsum
                } else {
                    0.0
                };
                let lse = p.lse[i];
                let ti = p.target[i];
                for k in 0..c {
                    let mut d = 0.0;
                    if p.logits {
                        d += coef * (xb[k * inner + j].f() - lse).exp();
                    }
                    if valid {
                        if k as i64 == ti {
                            d -= a * (1.0 - p.eps);
                        }
                        d -= p.eps / cf * p.w[k];
                    }
                    out[k * inner + j].write(T::of(gs * d));
                }
            }
        })
    })??;
    Tensor::from_vec(v, x.shape())
}

/// The same gradient with differentiable ops (double backward): the constant `coef` and `K`
/// built densely, the softmax through its own differentiable node.
fn class_grad_graph(
    g: &Tensor,
    x: &Tensor,
    p: &ClassParts,
    cd: usize,
    reduction: Reduction,
) -> Result<Tensor> {
    let (outer, c, inner) = p.geo;
    let wsum: f64 = p.w.iter().sum();
    let cf = c as f64;
    let mut coef = vec![0.0f64; outer * inner];
    let mut k = vec![0.0f64; outer * c * inner];
    for o in 0..outer {
        for j in 0..inner {
            let i = o * inner + j;
            if !p.valid[i] {
                continue;
            }
            let a = p.a(i);
            coef[i] = a * (1.0 - p.eps) + p.eps / cf * wsum;
            for cl in 0..c {
                let mut v = p.eps / cf * p.w[cl];
                if cl as i64 == p.target[i] {
                    v += a * (1.0 - p.eps);
                }
                k[(o * c + cl) * inner + j] = v;
            }
        }
    }
    let dt = x.dtype();
    let mut kshape = x.shape().to_vec();
    if !kshape.is_empty() {
        kshape[cd] = 1;
    }
    let k = crate::kernels::copy::cast(&Tensor::from_vec(k, x.shape())?, dt)?;
    let gi = match reduction {
        Reduction::None => g.reshape(&kshape)?,
        _ => g.mul_scalar(p.scale)?,
    };
    let inner_term = if p.logits {
        let coef = crate::kernels::copy::cast(&Tensor::from_vec(coef, &kshape)?, dt)?;
        coef.mul(&x.softmax(cd as i64)?)?.sub(&k)?
    } else {
        k.neg()?
    };
    gi.mul(&inner_term)
}

/// cross_entropy over class probabilities (`target` of the input's shape, float):
/// `-Σ_c w_c t'_c log_softmax(x)_c` with `t' = t (1 - ε) + ε / C`; `mean` divides by the
/// number of samples. Composed of differentiable ops (the log-softmax is fused).
pub fn cross_entropy_probs(
    x: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction: Reduction,
    label_smoothing: f64,
) -> Result<Tensor> {
    if let Some(r) = Tensor::lift_half([x, target], [weight], |[x, t], [w]| {
        cross_entropy_probs(x, t, w, reduction, label_smoothing)
    }) {
        return r;
    }
    label_smoothing_check(label_smoothing)?;
    if x.dim() < 1 {
        return Err(Error::value(format!(
            "Expected 1 or more dimensions (got {})",
            x.dim()
        )));
    }
    if !target.dtype().is_float() {
        return Err(Error::runtime(format!(
            "Expected floating point type for target with class probabilities, got {}",
            scalar_type_name(target.dtype())
        )));
    }
    let cd = usize::from(x.dim() > 1);
    let c = x.shape()[cd];
    class_weight_check(weight, c)?;
    let logp = x.log_softmax(cd as i64)?;
    let t = if label_smoothing > 0.0 {
        let per = if c == 0 {
            f64::NAN
        } else {
            label_smoothing / c as f64
        };
        target.mul_scalar(1.0 - label_smoothing)?.add_scalar(per)?
    } else {
        target.clone()
    };
    let mut prod = logp.mul(&t)?;
    if let Some(w) = weight {
        let mut ws = vec![1usize; x.dim()];
        ws[cd] = c;
        prod = prod.mul(&w.reshape(&ws)?)?;
    }
    match reduction {
        Reduction::None => prod.sum_dims(&[cd as i64], false)?.neg(),
        Reduction::Sum => prod.sum()?.neg(),
        Reduction::Mean => {
            let n = x.numel() / c.max(1);
            let n = if n == 0 { f64::NAN } else { n as f64 };
            prod.sum()?.neg()?.div_scalar(n)
        }
    }
}

/// `loss` reduced.
pub(crate) fn reduce(loss: Tensor, reduction: Reduction) -> Result<Tensor> {
    match reduction {
        Reduction::None => Ok(loss),
        Reduction::Sum => loss.sum(),
        Reduction::Mean => loss.mean(),
    }
}

/// A pointwise loss of (input, target) as one node: values and both derivatives as f64
/// formulas (fused path) and as differentiable ops (double backward).
#[derive(Clone, Copy, Debug)]
enum Pointwise {
    Mse,
    SmoothL1 {
        beta: f64,
    },
    Huber {
        delta: f64,
    },
    /// Binary cross entropy on probabilities, logs clamped at -100 (torch).
    Bce,
}

/// torch's BCE floor for the log and its gradient's denominator.
const LOG_FLOOR: f64 = -100.0;
const BCE_EPS: f64 = 1e-12f32 as f64;

impl Pointwise {
    fn node(self) -> &'static str {
        match self {
            Pointwise::Mse => "MseLossBackward0",
            Pointwise::SmoothL1 { .. } => "SmoothL1LossBackward0",
            Pointwise::Huber { .. } => "HuberLossBackward0",
            Pointwise::Bce => "BinaryCrossEntropyBackward0",
        }
    }

    /// (∂/∂x, ∂/∂y) with differentiable ops.
    fn df_graph(self, x: &Tensor, y: &Tensor) -> Result<(Tensor, Tensor)> {
        let d = x.sub(y)?;
        let c = |v: f64| Tensor::wrapped_scalar(v, d.dtype());
        let dx = match self {
            Pointwise::Mse => d.mul_scalar(2.0)?,
            Pointwise::SmoothL1 { beta } => {
                let inside = d.abs()?.lt_scalar(beta)?;
                let lin = d.sign()?;
                if beta > 0.0 {
                    Tensor::where_cond(&inside, &d.div_scalar(beta)?, &lin)?
                } else {
                    lin
                }
            }
            Pointwise::Huber { delta } => {
                let inside = d.abs()?.lt_scalar(delta)?;
                Tensor::where_cond(&inside, &d, &d.sign()?.mul_scalar(delta)?)?
            }
            Pointwise::Bce => {
                let den = x.mul(&x.rsub_scalar(1.0)?)?;
                let den = Tensor::where_cond(&den.lt_scalar(BCE_EPS)?, &c(BCE_EPS), &den)?;
                d.div(&den)?
            }
        };
        let dy = match self {
            Pointwise::Bce => x.rsub_scalar(1.0)?.log()?.sub(&x.log()?)?,
            _ => dx.neg()?,
        };
        Ok((dx, dy))
    }
}

/// `$body` with `$f`, `$dx` and `$dy` bound to closures computing one element's loss and its
/// derivatives in x and y, in `$T`'s own arithmetic (as torch's kernels). The variant is
/// matched here, outside any loop, so each closure is a plain expression the element loops
/// vectorise (a match inside the loop kept them scalar: smooth_l1 took 3.5 ns per element).
macro_rules! pointwise_fns {
    ($kind:expr, $T:ty, |$f:ident, $dx:ident, $dy:ident| $body:expr) => {{
        type E = $T;
        let c = |v: f64| <E as crate::tensor::Element>::from_f64(v);
        let (zero, one, half) = (c(0.0), c(1.0), c(0.5));
        let sgn = move |d: E| {
            if d > zero {
                one
            } else if d < zero {
                -one
            } else {
                zero
            }
        };
        match $kind {
            Pointwise::Mse => {
                let two = c(2.0);
                let $f = move |x: E, y: E| (x - y) * (x - y);
                let $dx = move |x: E, y: E| two * (x - y);
                let $dy = move |x: E, y: E| -(two * (x - y));
                $body
            }
            Pointwise::SmoothL1 { beta } => {
                let b = c(beta);
                let $f = move |x: E, y: E| {
                    let z = (x - y).abs();
                    if z < b {
                        half * z * z / b
                    } else {
                        z - half * b
                    }
                };
                let $dx = move |x: E, y: E| {
                    let d = x - y;
                    if d.abs() < b {
                        d / b
                    } else {
                        sgn(d)
                    }
                };
                let $dy = move |x: E, y: E| -$dx(x, y);
                $body
            }
            Pointwise::Huber { delta } => {
                let dl = c(delta);
                let $f = move |x: E, y: E| {
                    let z = (x - y).abs();
                    if z < dl {
                        half * z * z
                    } else {
                        dl * (z - half * dl)
                    }
                };
                let $dx = move |x: E, y: E| {
                    let d = x - y;
                    if d.abs() < dl {
                        d
                    } else {
                        dl * sgn(d)
                    }
                };
                let $dy = move |x: E, y: E| -$dx(x, y);
                $body
            }
            Pointwise::Bce => {
                let (floor, eps) = (c(LOG_FLOOR), c(BCE_EPS));
                let $f = move |x: E, y: E| {
                    let lx = x.ln().max(floor);
                    let l1x = (-x).ln_1p().max(floor);
                    -(y * lx + (one - y) * l1x)
                };
                let $dx = move |x: E, y: E| (x - y) / ((one - x) * x).max(eps);
                // torch's target gradient takes the logs unclamped (inf at x = 0 or 1).
                let $dy = move |x: E, _y: E| (-x).ln_1p() - x.ln();
                $body
            }
        }
    }};
}

/// Σ f(a_i, b_i) over two same-shape tensors: blocks of [`SUM_BLOCK`] summed in `T` lanes and
/// added in f64 in order, so the total is the same at any thread count; runs of blocks are
/// shared among threads.
fn zip_sum<T, F>(a: &Tensor, b: &Tensor, f: F) -> Result<f64>
where
    T: Element + num_traits::Float,
    F: Fn(T, T) -> T + Sync + Copy,
{
    let (a, b) = (a.contiguous()?, b.contiguous()?);
    a.with_contiguous_slice::<T, _>(|xs| {
        b.with_contiguous_slice::<T, _>(|ys| {
            let n = xs.len().min(ys.len());
            let blocks = n.div_ceil(SUM_BLOCK);
            let per_task = 64;
            let tasks = blocks.div_ceil(per_task);
            let mut partial = vec![0f64; tasks];
            let out = SendPtr(partial.as_mut_ptr());
            let helpers = if n >= PAR_MIN_VMATH {
                parallel::helpers()
            } else {
                0
            };
            parallel::share_work(helpers, tasks, &|task| {
                let lo = (task * per_task * SUM_BLOCK).min(n);
                let hi = ((task + 1) * per_task * SUM_BLOCK).min(n);
                // SAFETY: slot `task` belongs to this task alone.
                unsafe { *out.get().add(task) = span_zip_sum(&xs[lo..hi], &ys[lo..hi], f) };
            });
            partial.iter().sum::<f64>()
        })
    })?
}

/// One run of [`zip_sum`], compiled for the vector targets.
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq+avx2+avx+fma",
    "x86_64+avx2+avx+fma",
    "aarch64+neon"
))]
fn span_zip_sum<T: Element + num_traits::Float, F: Fn(T, T) -> T>(a: &[T], b: &[T], f: F) -> f64 {
    lane_sums2(a, b, f, |_, _| T::zero()).0
}

/// `loss(x, y)` elementwise (broadcast), optionally times `weight`, reduced; one node over
/// `x` and `y`.
fn pointwise_loss(
    x: &Tensor,
    y: &Tensor,
    weight: Option<&Tensor>,
    reduction: Reduction,
    kind: Pointwise,
) -> Result<Tensor> {
    let shape = crate::tensor::shape::broadcast_shapes(x.shape(), y.shape())?;
    let (xe, ye) = if x.shape() == shape.as_slice() && y.shape() == shape.as_slice() {
        (x.clone(), y.clone())
    } else {
        (x.expand(&shape)?, y.expand(&shape)?)
    };
    let dt = crate::ops::binary::result_dtype(x, y);
    let dt = if dt.is_float() {
        dt
    } else {
        crate::tensor::dtype::default_float()
    };
    let loss = {
        let _g = GradModeGuard::new(false);
        let (a, b) = (
            crate::kernels::copy::as_dtype(&xe.detach(), dt)?,
            crate::kernels::copy::as_dtype(&ye.detach(), dt)?,
        );
        // Reduced and unweighted: Σ loss in one pass over x and y, no loss tensor written.
        let fused =
            weight.is_none() && reduction != Reduction::None && !a.is_batched() && !b.is_batched();
        // Float32 BCE: the logs through the vector kernel, not std's scalar ones.
        let bce32 = matches!(kind, Pointwise::Bce) && dt == DType::Float32;
        if fused {
            let total = match dt {
                DType::Float32 if bce32 => bce_sum_f32(&a, &b)?,
                DType::Float32 => pointwise_fns!(kind, f32, |f, _dx, _dy| zip_sum(&a, &b, f)?),
                _ => pointwise_fns!(kind, f64, |f, _dx, _dy| zip_sum(&a, &b, f)?),
            };
            let n = a.numel();
            let v = match reduction {
                Reduction::Mean if n > 0 => total / n as f64,
                Reduction::Mean => f64::NAN,
                _ => total,
            };
            Tensor::full(&[], v, dt)
        } else {
            let l = match dt {
                DType::Float32 if bce32 && !a.is_batched() && !b.is_batched() => {
                    bce_each_f32(&a, &b)?
                }
                DType::Float32 => pointwise_fns!(kind, f32, |f, _dx, _dy| {
                    crate::ops::elementwise::zip::<f32, f32>(&a, &b, f)?
                }),
                _ => pointwise_fns!(kind, f64, |f, _dx, _dy| {
                    crate::ops::elementwise::zip::<f64, f64>(&a, &b, f)?
                }),
            };
            let l = match weight {
                Some(w) => l.mul(&w.detach())?,
                None => l,
            };
            reduce(l, reduction)?
        }
    };
    if needs_grad(&[&xe, &ye]) {
        let n = shape.iter().product::<usize>();
        let w = weight.cloned();
        record(
            kind.node(),
            &[&xe, &ye],
            &[&loss],
            &[&xe, &ye],
            true,
            move |g, s| {
                let (x, y) = (&s[0], &s[1]);
                let g = &g[0];
                let gs = match reduction {
                    Reduction::Mean => g.div_scalar(n as f64)?,
                    _ => g.clone(),
                };
                let want_y = crate::graph::node::wants_grad(1);
                if needs_grad(&[g, x, y]) || x.dtype() != y.dtype() {
                    let (mut dx, mut dy) = kind.df_graph(x, y)?;
                    if let Some(w) = &w {
                        dx = dx.mul(w)?;
                        dy = dy.mul(w)?;
                    }
                    let gy = if want_y { Some(gs.mul(&dy)?) } else { None };
                    return Ok(vec![Some(gs.mul(&dx)?), gy]);
                }
                // A reduced loss's gradient is one number: folded into the derivative's pass.
                let scale = match (&w, gs.dim()) {
                    (None, 0) => Some(gs.item_f64()?),
                    _ => None,
                };
                let (a, b) = (x.contiguous()?, y.contiguous()?);
                let finish = |d: Tensor| -> Result<Tensor> {
                    if scale.is_some() {
                        return Ok(d);
                    }
                    let d = match &w {
                        Some(w) => d.mul(w)?,
                        None => d,
                    };
                    gs.mul(&d)
                };
                macro_rules! derivative {
                    ($T:ty, |$f:ident, $dx:ident, $dy:ident| $d:ident) => {{
                        let k = <$T as crate::tensor::Element>::from_f64(scale.unwrap_or(1.0));
                        pointwise_fns!(kind, $T, |$f, $dx, $dy| {
                            crate::ops::elementwise::zip::<$T, $T>(&a, &b, move |p, q| {
                                $d(p, q) * k
                            })?
                        })
                    }};
                }
                let dx = match x.dtype() {
                    DType::Float32 => finish(derivative!(f32, |_f, dx, _dy| dx))?,
                    _ => finish(derivative!(f64, |_f, dx, _dy| dx))?,
                };
                let dy = if want_y {
                    Some(match x.dtype() {
                        DType::Float32 => finish(derivative!(f32, |_f, _dx, dy| dy))?,
                        _ => finish(derivative!(f64, |_f, _dx, dy| dy))?,
                    })
                } else {
                    None
                };
                Ok(vec![Some(dx), dy])
            },
        )?;
    }
    Ok(loss)
}

/// Mean squared error `(x - y)²` (optionally weighted), reduced.
pub fn mse_loss(
    x: &Tensor,
    y: &Tensor,
    weight: Option<&Tensor>,
    reduction: Reduction,
) -> Result<Tensor> {
    if let Some(r) = Tensor::lift_half([x, y], [weight], |[x, y], [w]| mse_loss(x, y, w, reduction))
    {
        return r;
    }
    pointwise_loss(x, y, weight, reduction, Pointwise::Mse)
}

/// `|x - y|` (optionally weighted), reduced; gradient 0 where x == y, as torch (which composes
/// abs and the reduction, as here).
pub fn l1_loss(
    x: &Tensor,
    y: &Tensor,
    weight: Option<&Tensor>,
    reduction: Reduction,
) -> Result<Tensor> {
    let l = x.sub(y)?.abs()?;
    let l = match weight {
        Some(w) => l.mul(w)?,
        None => l,
    };
    reduce(l, reduction)
}

/// Smooth L1: `0.5 d² / beta` where `|d| < beta`, else `|d| - beta / 2` (`beta = 0`: L1).
pub fn smooth_l1_loss(x: &Tensor, y: &Tensor, reduction: Reduction, beta: f64) -> Result<Tensor> {
    if let Some(r) = Tensor::lift_half([x, y], [], |[x, y], []| {
        smooth_l1_loss(x, y, reduction, beta)
    }) {
        return r;
    }
    if beta < 0.0 {
        return Err(Error::runtime(
            "smooth_l1_loss does not support negative values for beta.",
        ));
    }
    if beta == 0.0 {
        return l1_loss(x, y, None, reduction);
    }
    pointwise_loss(x, y, None, reduction, Pointwise::SmoothL1 { beta })
}

/// Huber: `0.5 d²` where `|d| < delta`, else `delta (|d| - delta / 2)` (optionally weighted).
pub fn huber_loss(
    x: &Tensor,
    y: &Tensor,
    weight: Option<&Tensor>,
    reduction: Reduction,
    delta: f64,
) -> Result<Tensor> {
    if let Some(r) = Tensor::lift_half([x, y], [weight], |[x, y], [w]| {
        huber_loss(x, y, w, reduction, delta)
    }) {
        return r;
    }
    if delta <= 0.0 {
        return Err(Error::runtime(
            "huber_loss does not support non-positive values for delta.",
        ));
    }
    pointwise_loss(x, y, weight, reduction, Pointwise::Huber { delta })
}

/// Binary cross entropy of probabilities `x` against `y`, logs clamped at -100 (torch's
/// rule); the gradient's denominator `x (1 - x)` is held at 1e-12, as torch.
pub fn binary_cross_entropy(
    x: &Tensor,
    y: &Tensor,
    weight: Option<&Tensor>,
    reduction: Reduction,
) -> Result<Tensor> {
    if let Some(r) = Tensor::lift_half([x, y], [weight], |[x, y], [w]| {
        binary_cross_entropy(x, y, w, reduction)
    }) {
        return r;
    }
    if x.shape() != y.shape() {
        return Err(Error::value(format!(
            "Using a target size ({}) that is different to the input size ({}) is deprecated. Please ensure they have the same size.",
            size_str(y.shape()),
            size_str(x.shape())
        )));
    }
    if outside_unit(x)? {
        return Err(Error::runtime(
            "all elements of input should be between 0 and 1",
        ));
    }
    pointwise_loss(x, y, weight, reduction, Pointwise::Bce)
}

/// Whether any element of `x` is outside [0, 1] or NaN (inside vmap: any sample's), read in
/// place when `x` is float32 or float64.
fn outside_unit(x: &Tensor) -> Result<bool> {
    fn any_out<T: Element + num_traits::Float>(v: &[T]) -> bool {
        // Folded without a branch, so the loop vectorises.
        let (zero, one) = (T::zero(), T::one());
        v.iter()
            .fold(false, |acc, &p| acc | !(p >= zero && p <= one))
    }
    let _g = GradModeGuard::new(false);
    let x = crate::tensor::batched::innermost(x).detach().contiguous()?;
    match x.dtype() {
        DType::Float32 => x.with_contiguous_slice::<f32, _>(any_out),
        DType::Float64 => x.with_contiguous_slice::<f64, _>(any_out),
        _ => Ok(any_out(&x.to_vec::<f64>()?)),
    }
}

/// Float32 binary cross entropy of probabilities through the vector logs ([`bce_slice`]), per
/// block of [`LOGITS_BLOCK`]: into `per` when given, else each block's sum into `sums` (summed
/// in `T` lanes; the caller adds the blocks in order, so the total is the same at any thread
/// count).
fn bce_blocks(xs: &[f32], ys: &[f32], per: Option<&mut [MaybeUninit<f32>]>, sums: &mut [f64]) {
    let n = xs.len().min(ys.len());
    let each = per.is_some();
    let pp = SendPtr(per.map_or(std::ptr::null_mut(), |p| p.as_mut_ptr()));
    let sp = SendPtr(sums.as_mut_ptr());
    logits_blocks(n, &|b, lo, hi| {
        let (xb, yb) = (&xs[lo..hi], &ys[lo..hi]);
        if each {
            // SAFETY: elements lo..hi of `per` (n long) belong to this block alone.
            let o = unsafe { std::slice::from_raw_parts_mut(pp.get().add(lo), hi - lo) };
            bce_slice(xb, yb, o);
        } else {
            let mut buf = [MaybeUninit::<f32>::uninit(); LOGITS_BLOCK];
            let vals = &mut buf[..hi - lo];
            bce_slice(xb, yb, vals);
            // SAFETY: bce_slice wrote every element; slot b of `sums` is this block's alone.
            unsafe {
                let vals = &*(vals as *const [MaybeUninit<f32>] as *const [f32]);
                *sp.get().add(b) = span_sum(vals);
            }
        }
    });
}

/// Σ BCE(x, y) over float32 tensors of one shape ([`bce_blocks`]).
fn bce_sum_f32(x: &Tensor, y: &Tensor) -> Result<f64> {
    let (xc, yc) = (x.contiguous()?, y.contiguous()?);
    xc.with_contiguous_slice::<f32, _>(|xs| {
        yc.with_contiguous_slice::<f32, _>(|ys| {
            let mut sums = vec![0f64; xs.len().div_ceil(LOGITS_BLOCK)];
            bce_blocks(xs, ys, None, &mut sums);
            sums.iter().sum()
        })
    })?
}

/// BCE(x, y) per element of float32 tensors of one shape ([`bce_blocks`]).
fn bce_each_f32(x: &Tensor, y: &Tensor) -> Result<Tensor> {
    let (xc, yc) = (x.contiguous()?, y.contiguous()?);
    xc.with_contiguous_slice::<f32, _>(|xs| {
        yc.with_contiguous_slice::<f32, _>(|ys| -> Result<Tensor> {
            let n = xs.len();
            let mut per = try_vec::<f32>(n)?;
            bce_blocks(xs, ys, Some(&mut per.spare_capacity_mut()[..n]), &mut []);
            // SAFETY: bce_blocks wrote every element.
            unsafe { per.set_len(n) };
            Tensor::from_vec(per, x.shape())
        })
    })??
}

/// Σ x, compiled for the vector targets.
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq+avx2+avx+fma",
    "x86_64+avx2+avx+fma",
    "aarch64+neon"
))]
fn span_sum(xs: &[f32]) -> f64 {
    lane_sum(xs, |v| v)
}

/// Binary cross entropy on logits, stable:
/// `(1 - t) x + (1 + (pw - 1) t) softplus(-x)`, optionally weighted; composed of
/// differentiable ops around the fused softplus.
pub fn binary_cross_entropy_with_logits(
    x: &Tensor,
    t: &Tensor,
    weight: Option<&Tensor>,
    pos_weight: Option<&Tensor>,
    reduction: Reduction,
) -> Result<Tensor> {
    if let Some(r) = Tensor::lift_half([x, t], [weight, pos_weight], |[x, t], [w, pw]| {
        binary_cross_entropy_with_logits(x, t, w, pw, reduction)
    }) {
        return r;
    }
    if x.shape() != t.shape() {
        return Err(Error::value(format!(
            "Target size ({}) must be the same as input size ({})",
            size_str(t.shape()),
            size_str(x.shape())
        )));
    }
    let plain =
        |u: &Tensor| !u.is_batched() && matches!(u.dtype(), DType::Float32 | DType::Float64);
    if pos_weight.is_none() && weight.is_none() && plain(x) && plain(t) && x.dtype() == t.dtype() {
        return match x.dtype() {
            DType::Float32 => bce_logits::<f32>(x, t, reduction),
            _ => bce_logits::<f64>(x, t, reduction),
        };
    }
    let sp = crate::ops::nn::activation::softplus(&x.neg()?, 1.0, f64::INFINITY)?;
    let lin = t.rsub_scalar(1.0)?.mul(x)?;
    let loss = match pos_weight {
        Some(pw) => lin.add(&pw.sub_scalar(1.0)?.mul(t)?.add_scalar(1.0)?.mul(&sp)?)?,
        None => lin.add(&sp)?,
    };
    let loss = match weight {
        Some(w) => loss.mul(w)?,
        None => loss,
    };
    reduce(loss, reduction)
}

/// Floats with the per-block kernels of [`bce_logits`] (float32 lanes through `vmath`).
trait LogitsFloat: RowFloat {
    /// `out = (1 - t) x + max(-x, 0) + ln(1 + e^-|x|)`.
    fn loss_into(x: &[Self], t: &[Self], out: &mut [MaybeUninit<Self>]);
    /// `out = (σ(x) - t) g`, `g` a slice or one value.
    fn grad_into(
        x: &[Self],
        t: &[Self],
        g: std::result::Result<&[Self], Self>,
        out: &mut [MaybeUninit<Self>],
    );
}

impl LogitsFloat for f32 {
    fn loss_into(x: &[f32], t: &[f32], out: &mut [MaybeUninit<f32>]) {
        crate::kernels::vmath::bce_logits_slice(x, t, out)
    }
    fn grad_into(
        x: &[f32],
        t: &[f32],
        g: std::result::Result<&[f32], f32>,
        out: &mut [MaybeUninit<f32>],
    ) {
        crate::kernels::vmath::bce_logits_grad_slice(x, t, g, out)
    }
}

impl LogitsFloat for f64 {
    fn loss_into(x: &[f64], t: &[f64], out: &mut [MaybeUninit<f64>]) {
        for ((o, &xv), &tv) in out.iter_mut().zip(x).zip(t) {
            o.write((1.0 - tv) * xv + (-xv).max(0.0) + (-xv.abs()).exp().ln_1p());
        }
    }
    fn grad_into(
        x: &[f64],
        t: &[f64],
        g: std::result::Result<&[f64], f64>,
        out: &mut [MaybeUninit<f64>],
    ) {
        for (k, ((o, &xv), &tv)) in out.iter_mut().zip(x).zip(t).enumerate() {
            let gk = match g {
                Ok(g) => g[k],
                Err(v) => v,
            };
            o.write((1.0 / (1.0 + (-xv).exp()) - tv) * gk);
        }
    }
}

/// Elements per task of [`bce_logits`].
const LOGITS_BLOCK: usize = 4096;

/// `f(block, lo, hi)` over blocks of [`LOGITS_BLOCK`] elements, shared among threads when
/// large.
fn logits_blocks(n: usize, f: &(dyn Fn(usize, usize, usize) + Sync)) {
    let blocks = n.div_ceil(LOGITS_BLOCK);
    let helpers = if n >= PAR_MIN_VMATH {
        parallel::helpers()
    } else {
        0
    };
    parallel::share_work(helpers, blocks, &|b| {
        f(b, b * LOGITS_BLOCK, ((b + 1) * LOGITS_BLOCK).min(n))
    });
}

/// Binary cross entropy with logits, unweighted, as one node: the loss
/// `(1 - t) x + max(-x, 0) + ln(1 + e^-|x|)` (stable for any x; torch's formula) and the
/// gradients `(σ(x) - t) g` and `-x g`, with the exponentials and logs through the vector
/// kernels. The composed form (six ops and their backwards) took 1.0 ms on 512 x 1000.
fn bce_logits<T: LogitsFloat>(x: &Tensor, t: &Tensor, reduction: Reduction) -> Result<Tensor> {
    let (xc, tc) = (x.contiguous()?, t.contiguous()?);
    let n = xc.numel();
    let loss = xc.with_contiguous_slice::<T, _>(|xs| {
        tc.with_contiguous_slice::<T, _>(|ts| -> Result<Tensor> {
            let blocks = n.div_ceil(LOGITS_BLOCK);
            let mut per = if reduction == Reduction::None {
                try_vec::<T>(n)?
            } else {
                Vec::new()
            };
            let mut sums = vec![0f64; blocks];
            let (pp, sp) = (
                SendPtr(per.spare_capacity_mut().as_mut_ptr()),
                SendPtr(sums.as_mut_ptr()),
            );
            logits_blocks(n, &|b, lo, hi| {
                let (xb, tb) = (&xs[lo..hi], &ts[lo..hi]);
                if reduction == Reduction::None {
                    // SAFETY: elements lo..hi of `per` belong to this block alone.
                    let o = unsafe { std::slice::from_raw_parts_mut(pp.get().add(lo), hi - lo) };
                    T::loss_into(xb, tb, o);
                } else {
                    let mut buf = [MaybeUninit::<T>::uninit(); LOGITS_BLOCK];
                    let vals = &mut buf[..hi - lo];
                    T::loss_into(xb, tb, vals);
                    // SAFETY: loss_into wrote every element; slot b is this block's alone.
                    unsafe { *sp.get().add(b) = lane_sum(assume_init(vals), |v| v) };
                }
            });
            if reduction == Reduction::None {
                // SAFETY: every block wrote its elements.
                unsafe { per.set_len(n) };
                return Tensor::from_vec(per, x.shape());
            }
            let total: f64 = sums.iter().sum();
            let v = match reduction {
                Reduction::Mean if n > 0 => total / n as f64,
                Reduction::Mean => f64::NAN,
                _ => total,
            };
            Ok(Tensor::full(&[], v, x.dtype()))
        })
    })???;
    if needs_grad(&[x, t]) {
        record(
            "BinaryCrossEntropyWithLogitsBackward0",
            &[x, t],
            &[&loss],
            &[&xc, &tc],
            true,
            move |g, s| {
                let (x, t, g) = (&s[0], &s[1], &g[0]);
                let gs = match reduction {
                    Reduction::Mean => g.div_scalar(n as f64)?,
                    _ => g.clone(),
                };
                let want_t = crate::graph::node::wants_grad(1);
                // Composed when differentiated again or when vmap batches the gradient.
                if needs_grad(&[g, x, t]) || g.is_batched() {
                    let dx = gs.mul(&x.sigmoid()?.sub(t)?)?;
                    let dt = if want_t {
                        Some(gs.mul(&x.neg()?)?)
                    } else {
                        None
                    };
                    return Ok(vec![Some(dx), dt]);
                }
                let scalar = if gs.dim() == 0 {
                    Some(T::from_f64(gs.item_f64()?))
                } else {
                    None
                };
                let gc = gs.contiguous()?;
                let dx = x.with_contiguous_slice::<T, _>(|xs| {
                    t.with_contiguous_slice::<T, _>(|ts| {
                        gc.with_contiguous_slice::<T, _>(|gv| -> Result<Tensor> {
                            let mut out = try_vec::<T>(n)?;
                            let op = SendPtr(out.spare_capacity_mut().as_mut_ptr());
                            logits_blocks(n, &|_, lo, hi| {
                                // SAFETY: elements lo..hi belong to this block alone.
                                let o = unsafe {
                                    std::slice::from_raw_parts_mut(op.get().add(lo), hi - lo)
                                };
                                let gb = match scalar {
                                    Some(v) => Err(v),
                                    None => Ok(&gv[lo..hi]),
                                };
                                T::grad_into(&xs[lo..hi], &ts[lo..hi], gb, o);
                            });
                            // SAFETY: every block wrote its elements.
                            unsafe { out.set_len(n) };
                            Tensor::from_vec(out, x.shape())
                        })
                    })
                })????;
                let dt = if want_t {
                    Some(gs.mul(&x.neg()?)?)
                } else {
                    None
                };
                Ok(vec![Some(dx), dt])
            },
        )?;
    }
    Ok(loss)
}

/// Pointwise KL divergence `t (log t - x)` (0 where t <= 0), or `e^t (t - x)` with
/// `log_target`, reduced, as one node (torch's `KlDivBackward0`); `batchmean` is handled by the
/// caller (sum / batch size). `x` and `t` broadcast. The backward is written in tensor ops, so
/// it is differentiable again; with a reduced loss its gradient is one number, folded into a
/// single pass over `e^t` (or `t`) for the input's gradient.
pub fn kl_div(x: &Tensor, t: &Tensor, reduction: Reduction, log_target: bool) -> Result<Tensor> {
    let shape = crate::tensor::shape::broadcast_shapes(x.shape(), t.shape())?;
    let (xe, te) = if x.shape() == shape.as_slice() && t.shape() == shape.as_slice() {
        (x.clone(), t.clone())
    } else {
        (x.expand(&shape)?, t.expand(&shape)?)
    };
    // t log t with 0 log 0 = 0 (and 0 for t < 0, where the log is undefined).
    let positive_part = |t: &Tensor| -> Result<(Tensor, Tensor)> {
        let pos = t.gt_scalar(0.0)?;
        let safe = Tensor::where_cond(&pos, t, &Tensor::wrapped_scalar(1.0, t.dtype()))?;
        Ok((pos, safe.log()?))
    };
    let loss = {
        let _g = GradModeGuard::new(false);
        let (x, t) = (xe.detach(), te.detach());
        let each = if log_target {
            t.exp()?.mul(&t.sub(&x)?)?
        } else {
            t.mul(&positive_part(&t)?.1.sub(&x)?)?
        };
        reduce(each, reduction)?
    };
    if needs_grad(&[&xe, &te]) {
        let n = shape.iter().product::<usize>();
        record(
            "KlDivBackward0",
            &[&xe, &te],
            &[&loss],
            &[&xe, &te],
            false,
            move |g, s| {
                let (x, t) = (&s[0], &s[1]);
                let gs = match reduction {
                    Reduction::Mean => g[0].div_scalar(n as f64)?,
                    _ => g[0].clone(),
                };
                // d/dx = -e^t (or -t); d/dt = e^t (t - x + 1) (or log t + 1 - x where t > 0,
                // -x elsewhere).
                let e = if log_target { t.exp()? } else { t.clone() };
                let dx = grad_if_wanted(0, || e.mul(&gs.neg()?))?;
                let dt = grad_if_wanted(1, || {
                    let d = if log_target {
                        e.mul(&t.sub(x)?.add_scalar(1.0)?)?
                    } else {
                        let (pos, log_t) = positive_part(t)?;
                        let one = pos.to_dtype(log_t.dtype())?;
                        log_t.add(&one)?.sub(x)?
                    };
                    d.mul(&gs)
                })?;
                Ok(vec![dx, dt])
            },
        )?;
    }
    Ok(loss)
}
