//! Norms and distances along one dim (torch's `nn.functional` `normalize`, `cosine_similarity`,
//! `pairwise_distance`, and the `p`-norm they share).
//!
//! Each op is one node over "lanes": the tensor seen as `(outer, n, inner)` with `n` the reduced
//! dim, a lane being the `n` elements at one `(outer, inner)` position. Forward and fused backward
//! reduce each lane in f64 and run blocks of lanes in parallel. When a graph of the backward is
//! being built, the backward is written with differentiable ops instead (recomputing the norms
//! from the saved inputs), so second derivatives are exact.

use crate::error::{Error, Result};
use crate::graph::node::{needs_grad, record};
use crate::kernels::copy::as_dtype;
use crate::ops::elementwise::PAR_MIN_VMATH;
use crate::ops::nn::softmax::{geometry, RowFloat};
use crate::ops::reduce::reduced_shape;
use crate::parallel::{self, SendPtr};
use crate::tensor::shape::{broadcast_shapes, wrap_dim};
use crate::tensor::{DType, Tensor};

/// The lane geometry of a shape reduced over `d`.
#[derive(Clone, Copy)]
struct Lanes {
    n: usize,
    inner: usize,
    count: usize,
}

impl Lanes {
    fn of(shape: &[usize], d: usize) -> Lanes {
        let (outer, n, inner) = geometry(shape, d);
        Lanes {
            n,
            inner,
            count: outer * inner,
        }
    }
    /// Flat index of lane `l`'s first element; its elements are `inner` apart.
    #[inline(always)]
    fn base(&self, l: usize) -> usize {
        (l / self.inner) * self.n * self.inner + l % self.inner
    }
}

/// Runs `job(lanes range)` over all lanes, in blocks of about 8K elements shared among the pool
/// when the tensor is large. Blocks must write disjoint lanes only.
fn par_lanes(g: Lanes, job: &(dyn Fn(std::ops::Range<usize>) + Sync)) {
    let per_task = (8192 / g.n.max(1)).max(1);
    let tasks = g.count.div_ceil(per_task);
    let helpers = if g.count * g.n >= PAR_MIN_VMATH {
        parallel::helpers()
    } else {
        0
    };
    parallel::share_work(helpers, tasks, &|t| {
        job(t * per_task..((t + 1) * per_task).min(g.count))
    });
}

/// An output buffer of `len` elements that lanes write through a shared pointer; every element
/// must be written (each belongs to exactly one lane) before `finish`.
struct Out<T> {
    v: Vec<T>,
    len: usize,
}

impl<T: Copy> Out<T> {
    fn new(len: usize) -> Result<Out<T>> {
        // Not zero-filled: the kernels write every element, a fill would be one more pass.
        Ok(Out {
            v: crate::tensor::creation::try_vec(len)?,
            len,
        })
    }
    fn ptr(&mut self) -> SendPtr<*mut T> {
        SendPtr(self.v.as_mut_ptr())
    }
    fn finish(mut self) -> Vec<T> {
        // SAFETY: the capacity is `len` and the kernel wrote every element (the type's contract).
        unsafe { self.v.set_len(self.len) };
        self.v
    }
}

/// Write `v` at `i` of a buffer shared by lane blocks.
///
/// SAFETY: `i` is in bounds and written by one block only.
#[inline(always)]
unsafe fn put<T>(p: &SendPtr<*mut T>, i: usize, v: T) {
    unsafe { p.get().add(i).write(v) }
}

/// The `p`-norm of one lane: p = 0 counts nonzeros, ±inf are max/min |x|.
#[inline(always)]
fn lane_norm<T: RowFloat>(x: &[T], base: usize, g: Lanes, p: f64) -> f64 {
    let at = |k: usize| x[base + k * g.inner].f();
    let it = (0..g.n).map(at);
    if p == 2.0 {
        if g.inner == 1 {
            return crate::ops::nn::softmax::sum_by(
                &x[base..base + g.n],
                &x[base..base + g.n],
                |a, b| a.f() * b.f(),
            )
            .sqrt();
        }
        it.map(|v| v * v).sum::<f64>().sqrt()
    } else if p == 1.0 {
        it.map(f64::abs).sum()
    } else if p == 0.0 {
        it.filter(|&v| v != 0.0).count() as f64
    } else if p == f64::INFINITY {
        it.map(f64::abs).fold(
            f64::NEG_INFINITY,
            |a, b| {
                if b > a || b.is_nan() {
                    b
                } else {
                    a
                }
            },
        )
    } else if p == f64::NEG_INFINITY {
        it.map(f64::abs).fold(
            f64::INFINITY,
            |a, b| if b < a || b.is_nan() { b } else { a },
        )
    } else {
        it.map(|v| v.abs().powf(p)).sum::<f64>().powf(1.0 / p)
    }
}

/// `∂‖x‖_p / ∂x` at one element `x` of a lane with norm `nrm` (`ties`: how many elements reach
/// the max/min for p = ±inf), with torch's conventions at 0 (`norm_backward`).
#[inline(always)]
fn dnorm(x: f64, nrm: f64, p: f64, ties: f64) -> f64 {
    let sgn = if x > 0.0 {
        1.0
    } else if x < 0.0 {
        -1.0
    } else {
        x // 0 or NaN
    };
    if p == 0.0 {
        0.0
    } else if p == 1.0 {
        sgn
    } else if p == 2.0 {
        if nrm == 0.0 {
            0.0
        } else {
            x / nrm
        }
    } else if p.is_infinite() {
        if x.abs() == nrm || x.is_nan() {
            sgn / ties
        } else {
            0.0
        }
    } else if p < 1.0 {
        if x == 0.0 {
            0.0
        } else {
            sgn * x.abs().powf(p - 1.0) * nrm.powf(1.0 - p)
        }
    } else if nrm == 0.0 {
        0.0
    } else {
        sgn * x.abs().powf(p - 1.0) / nrm.powf(p - 1.0)
    }
}

/// How many elements of a lane reach the ±inf-norm `nrm` (or are NaN): torch splits the
/// gradient evenly among them.
fn lane_ties<T: RowFloat>(x: &[T], base: usize, g: Lanes, nrm: f64) -> f64 {
    (0..g.n)
        .filter(|&k| {
            let v = x[base + k * g.inner].f();
            v.abs() == nrm || v.is_nan()
        })
        .count() as f64
}

/// torch's `norm_backward` with differentiable ops: `grad` and `nrm` have the reduced dim kept.
fn norm_backward_ops(grad: &Tensor, x: &Tensor, nrm: &Tensor, p: f64, dim: i64) -> Result<Tensor> {
    let zero = |t: &Tensor| Tensor::wrapped_scalar(0.0, t.dtype());
    if p == 0.0 {
        return x.mul_scalar(0.0)?.mul(grad);
    }
    if p == 1.0 {
        return x.sign()?.mul(grad);
    }
    let n0 = nrm.eq_scalar(0.0)?;
    let safe = |t: Tensor| -> Result<Tensor> {
        // The value where the norm is 0 is replaced, then masked: no inf * 0 in either pass.
        Tensor::where_cond(&n0, &Tensor::wrapped_scalar(1.0, t.dtype()), &t)
    };
    if p == 2.0 {
        let scale = Tensor::where_cond(&n0, &zero(grad), &grad.div(&safe(nrm.clone())?)?)?;
        return x.mul(&scale);
    }
    if p.is_infinite() {
        let a = x.abs()?;
        let mask = a.eq_t(nrm)?.logical_or(&a.isnan()?)?;
        let maskf = as_dtype(&mask, x.dtype())?;
        let ties = maskf.sum_dims(&[dim], true)?;
        return x.sign()?.mul(&grad.div(&ties)?.mul(&maskf)?);
    }
    if p < 1.0 {
        let x0 = x.eq_scalar(0.0)?;
        let xs = Tensor::where_cond(&x0, &Tensor::wrapped_scalar(1.0, x.dtype()), x)?;
        let scaled = Tensor::where_cond(
            &x0,
            &zero(x),
            &xs.sign()?.mul(&xs.abs()?.pow_scalar(p - 1.0)?)?,
        )?;
        return scaled.mul(grad)?.mul(&nrm.pow_scalar(1.0 - p)?);
    }
    let scaled = x.sign()?.mul(&x.abs()?.pow_scalar(p - 1.0)?)?;
    let scale = Tensor::where_cond(
        &n0,
        &zero(grad),
        &grad.div(&safe(nrm.clone())?.pow_scalar(p - 1.0)?)?,
    )?;
    scaled.mul(&scale)
}

/// A float version of `t`: floats unchanged, others in the default float dtype.
fn float_of(t: &Tensor) -> Result<Tensor> {
    if t.dtype().is_float() {
        Ok(t.clone())
    } else {
        t.to_dtype(crate::tensor::dtype::default_float())
    }
}

/// The `p`-norm of `x` over `dim` (torch's `norm(x, p, dim, keepdim)`): p = 0 counts nonzeros,
/// ±inf are max/min |x|, any other p (fractional or negative too) is `(Σ|x|^p)^(1/p)`.
/// Integer inputs are promoted to the default float. Its gradient follows torch's conventions:
/// 0 where the norm is 0 (p ≥ 1) or where x is 0 (p < 1), split evenly among ties for ±inf.
/// A bad `dim` is an `IndexError`.
pub fn p_norm(x: &Tensor, p: f64, dim: i64, keepdim: bool) -> Result<Tensor> {
    if let Some(r) = Tensor::lift_half([x], [], |[x], []| p_norm(x, p, dim, keepdim)) {
        return r;
    }
    let x = &float_of(x)?;
    let d = wrap_dim(dim, x.dim())?;
    let out_shape = reduced_shape(x.shape(), &[d], keepdim);
    let forward = |x: &Tensor, d: usize| match x.dtype() {
        DType::Float32 => norm_forward::<f32>(x, d, p),
        _ => norm_forward::<f64>(x, d, p),
    };
    // Inside vmap the lanes run along `d` behind the batch dimensions.
    let batched = (x.dim() > 0)
        .then(|| crate::tensor::batched::unary_all(x, |px, nb| forward(px, d + nb)))
        .flatten();
    let out = match batched {
        Some(out) => out?,
        None => forward(x, d)?,
    }
    .reshape(&out_shape)?;
    if needs_grad(&[x]) {
        record(
            "NormBackward1",
            &[x],
            &[&out],
            &[x, &out],
            true,
            move |g, s| {
                let (x, n) = (&s[0], &s[1]);
                if crate::ops::elementwise::fusable(&g[0], n)
                    && !x.is_batched()
                    && !g[0].is_batched()
                {
                    let gi = match x.dtype() {
                        DType::Float32 => norm_backward_fused::<f32>(&g[0], x, n, d, p)?,
                        _ => norm_backward_fused::<f64>(&g[0], x, n, d, p)?,
                    };
                    return Ok(vec![Some(gi)]);
                }
                // Differentiable: the norm recomputed from x, so its own gradient flows.
                let n = p_norm(x, p, d as i64, true)?;
                let gk = g[0].reshape(n.shape())?;
                Ok(vec![Some(norm_backward_ops(&gk, x, &n, p, d as i64)?)])
            },
        )?;
    }
    Ok(out)
}

fn norm_forward<T: RowFloat>(x: &Tensor, d: usize, p: f64) -> Result<Tensor> {
    let g = Lanes::of(x.shape(), d);
    let mut out = Out::<T>::new(g.count)?;
    let o = out.ptr();
    x.with_contiguous_slice::<T, _>(|xs| {
        par_lanes(g, &|r| {
            for l in r {
                // SAFETY: lane l is written by this block only.
                unsafe { put(&o, l, T::of(lane_norm(xs, g.base(l), g, p))) };
            }
        })
    })?;
    Tensor::from_vec(out.finish(), &reduced_shape(x.shape(), &[d], true))
}

/// `g · ∂‖x‖/∂x` in one pass; `g` and `n` hold one value per lane.
fn norm_backward_fused<T: RowFloat>(
    g: &Tensor,
    x: &Tensor,
    n: &Tensor,
    d: usize,
    p: f64,
) -> Result<Tensor> {
    let geo = Lanes::of(x.shape(), d);
    let (gv, nv) = (g.to_vec::<T>()?, n.to_vec::<T>()?);
    let mut out = Out::<T>::new(x.numel())?;
    let o = out.ptr();
    x.with_contiguous_slice::<T, _>(|xs| {
        par_lanes(geo, &|r| {
            for l in r {
                let (base, nrm, gl) = (geo.base(l), nv[l].f(), gv[l].f());
                let ties = if p.is_infinite() {
                    lane_ties(xs, base, geo, nrm)
                } else {
                    1.0
                };
                if p == 2.0 && geo.inner == 1 {
                    // x / ‖x‖ in T over the contiguous lane (vectorises).
                    let k = T::of(if nrm == 0.0 { 0.0 } else { gl / nrm });
                    for (i, &xv) in (base..base + geo.n).zip(&xs[base..base + geo.n]) {
                        // SAFETY: element i belongs to lane l, written by this block only.
                        unsafe { put(&o, i, k * xv) };
                    }
                    continue;
                }
                for k in 0..geo.n {
                    let i = base + k * geo.inner;
                    // SAFETY: element i belongs to lane l, written by this block only.
                    unsafe { put(&o, i, T::of(gl * dnorm(xs[i].f(), nrm, p, ties))) };
                }
            }
        })
    })?;
    Tensor::from_vec(out.finish(), x.shape())
}

/// `x1 - x2 + eps` and its `p`-norm over the last dim (torch's `pairwise_distance`; x1 and x2
/// broadcast). A 0-d result for 1-d inputs, unless `keepdim`. Shapes that do not broadcast are
/// a `RuntimeError` naming both sizes.
pub fn pairwise_distance(
    x1: &Tensor,
    x2: &Tensor,
    p: f64,
    eps: f64,
    keepdim: bool,
) -> Result<Tensor> {
    let last = x1.dim().max(x2.dim()) as i64 - 1;
    let diff = x1.sub(x2)?.add_scalar(eps)?;
    p_norm(&diff, p, last, keepdim)
}

/// `x / max(‖x‖_p, eps)` along `dim` (torch's `normalize`), one node. The gradient of the clamp
/// is torch's: none through the norm where it is below `eps` (a zero row gets `g / eps`).
/// Integer inputs are an error, as for torch's `vector_norm`.
pub fn normalize(x: &Tensor, p: f64, dim: i64, eps: f64) -> Result<Tensor> {
    if let Some(r) = Tensor::lift_half([x], [], |[x], []| normalize(x, p, dim, eps)) {
        return r;
    }
    if !x.dtype().is_float() {
        return Err(Error::not_implemented(format!(
            "linalg.vector_norm: Expected a floating point or complex tensor as input. Got {}",
            crate::tensor::scalar_type_name(x.dtype())
        )));
    }
    let d = wrap_dim(dim, x.dim())?;
    let forward = |x: &Tensor, d: usize| match x.dtype() {
        DType::Float32 => normalize_forward::<f32>(x, d, p, eps),
        _ => normalize_forward::<f64>(x, d, p, eps),
    };
    let batched = (x.dim() > 0)
        .then(|| crate::tensor::batched::unary_all(x, |px, nb| Ok(forward(px, d + nb)?.0)))
        .flatten();
    let (out, nrm) = match batched {
        // Inside vmap the backward takes the composite path, which does not read the norms.
        Some(out) => {
            let out = out?;
            (out.clone(), out)
        }
        None => forward(x, d)?,
    };
    if needs_grad(&[x]) {
        record(
            "DivBackward0",
            &[x],
            &[&out],
            &[x, &nrm],
            true,
            move |g, s| {
                let (x, n) = (&s[0], &s[1]);
                if crate::ops::elementwise::fusable(&g[0], x)
                    && !x.is_batched()
                    && !g[0].is_batched()
                {
                    let gi = match x.dtype() {
                        DType::Float32 => normalize_backward_fused::<f32>(&g[0], x, n, d, p, eps)?,
                        _ => normalize_backward_fused::<f64>(&g[0], x, n, d, p, eps)?,
                    };
                    return Ok(vec![Some(gi)]);
                }
                let di = d as i64;
                let n = p_norm(x, p, di, true)?;
                let mask = n.ge_scalar(eps)?;
                let den = Tensor::where_cond(&mask, &n, &Tensor::wrapped_scalar(eps, n.dtype()))?;
                let gs = g[0].mul(x)?.sum_dims(&[di], true)?;
                let coef = Tensor::where_cond(
                    &mask,
                    &gs.div(&den.mul(&den)?)?,
                    &Tensor::wrapped_scalar(0.0, n.dtype()),
                )?;
                let gi = g[0]
                    .div(&den)?
                    .sub(&norm_backward_ops(&coef, x, &n, p, di)?)?;
                Ok(vec![Some(gi)])
            },
        )?;
    }
    Ok(out)
}

/// The normalised tensor and each lane's norm (not clamped; kept dim).
fn normalize_forward<T: RowFloat>(
    x: &Tensor,
    d: usize,
    p: f64,
    eps: f64,
) -> Result<(Tensor, Tensor)> {
    let g = Lanes::of(x.shape(), d);
    let mut out = Out::<T>::new(x.numel())?;
    let mut norms = Out::<T>::new(g.count)?;
    let (o, on) = (out.ptr(), norms.ptr());
    x.with_contiguous_slice::<T, _>(|xs| {
        par_lanes(g, &|r| {
            for l in r {
                let base = g.base(l);
                let nrm = lane_norm(xs, base, g, p);
                // clamp_min: a NaN norm stays NaN.
                let den = T::of(if nrm < eps { eps } else { nrm });
                // SAFETY: lane l and its elements are written by this block only.
                unsafe { put(&on, l, T::of(nrm)) };
                for k in 0..g.n {
                    let i = base + k * g.inner;
                    unsafe { put(&o, i, xs[i] / den) };
                }
            }
        })
    })?;
    Ok((
        Tensor::from_vec(out.finish(), x.shape())?,
        Tensor::from_vec(norms.finish(), &reduced_shape(x.shape(), &[d], true))?,
    ))
}

/// `g / den - [‖x‖ ≥ eps] (Σ g x) / den² · ∂‖x‖/∂x` per lane, `den = max(‖x‖, eps)`.
fn normalize_backward_fused<T: RowFloat>(
    g: &Tensor,
    x: &Tensor,
    n: &Tensor,
    d: usize,
    p: f64,
    eps: f64,
) -> Result<Tensor> {
    let geo = Lanes::of(x.shape(), d);
    let nv = n.to_vec::<T>()?;
    let mut out = Out::<T>::new(x.numel())?;
    let o = out.ptr();
    x.with_contiguous_slice::<T, _>(|xs| {
        g.with_contiguous_slice::<T, _>(|gs| {
            par_lanes(geo, &|r| {
                for l in r {
                    let (base, nrm) = (geo.base(l), nv[l].f());
                    let den = if nrm < eps { eps } else { nrm };
                    let through = nrm >= eps;
                    let gx = if geo.inner == 1 {
                        let r = base..base + geo.n;
                        crate::ops::nn::softmax::sum_by(&gs[r.clone()], &xs[r], |a, b| {
                            a.f() * b.f()
                        })
                    } else {
                        (0..geo.n)
                            .map(|k| base + k * geo.inner)
                            .map(|i| gs[i].f() * xs[i].f())
                            .sum()
                    };
                    let coef = if through { gx / (den * den) } else { 0.0 };
                    if geo.inner == 1 && (p == 2.0 || !through) {
                        // g / den - coef x / ‖x‖ in T over the contiguous lane.
                        let a = T::of(den);
                        let c = T::of(if through && nrm != 0.0 {
                            coef / nrm
                        } else {
                            0.0
                        });
                        let r = base..base + geo.n;
                        for ((i, &gv), &xv) in r.clone().zip(&gs[r.clone()]).zip(&xs[r]) {
                            // SAFETY: element i belongs to lane l, written by this block only.
                            unsafe { put(&o, i, gv / a - c * xv) };
                        }
                        continue;
                    }
                    let ties = if p.is_infinite() && through {
                        lane_ties(xs, base, geo, nrm)
                    } else {
                        1.0
                    };
                    for k in 0..geo.n {
                        let i = base + k * geo.inner;
                        let mut v = gs[i].f() / den;
                        if through {
                            v -= coef * dnorm(xs[i].f(), nrm, p, ties);
                        }
                        // SAFETY: element i belongs to lane l, written by this block only.
                        unsafe { put(&o, i, T::of(v)) };
                    }
                }
            })
        })
    })??;
    Tensor::from_vec(out.finish(), x.shape())
}

/// Cosine similarity of `x1` and `x2` along `dim` after broadcasting them (torch's formula:
/// `Σ (x1 / max(‖x1‖, eps)) (x2 / max(‖x2‖, eps))`, each norm clamped on its own, the clamp
/// passing the gradient through as torch's in-place no-grad clamp does). The dim is removed.
/// Errors: a non-float common dtype (`RuntimeError`), shapes that do not broadcast, a bad dim.
pub fn cosine_similarity(x1: &Tensor, x2: &Tensor, dim: i64, eps: f64) -> Result<Tensor> {
    if let Some(r) = Tensor::lift_half([x1, x2], [], |[a, b], []| cosine_similarity(a, b, dim, eps))
    {
        return r;
    }
    let ct = crate::ops::binary::result_dtype(x1, x2);
    if !ct.is_float() {
        return Err(Error::runtime(format!(
            "expected common dtype to be floating point, yet common dtype is {}",
            crate::tensor::scalar_type_name(ct)
        )));
    }
    let shape = broadcast_shapes(x1.shape(), x2.shape())?;
    let d = wrap_dim(dim, shape.len())?;
    let a = as_dtype(x1, ct)?.expand(&shape)?;
    let b = as_dtype(x2, ct)?.expand(&shape)?;
    let batched = (!shape.is_empty())
        .then(|| {
            // Inside vmap: the same op on the physical operands, `d` behind the batch dim.
            crate::ops::batching::on_physical_all(&[&a, &b], |p| {
                cosine_similarity(&p[0], &p[1], d as i64 + 1, eps)
            })
        })
        .flatten();
    let (out, norms) = match batched {
        // The composite backward (taken inside vmap) does not read the norms.
        Some(out) => {
            let out = out?;
            (out.clone(), out)
        }
        None => match ct {
            DType::Float32 => cosine_forward::<f32>(&a, &b, d, eps)?,
            _ => cosine_forward::<f64>(&a, &b, d, eps)?,
        },
    };
    if needs_grad(&[x1, x2]) {
        record(
            "SumBackward1",
            &[x1, x2],
            &[&out],
            &[x1, x2, &norms, &out],
            true,
            move |g, s| {
                let shape = broadcast_shapes(s[0].shape(), s[1].shape())?;
                if crate::ops::elementwise::fusable(&g[0], &s[3])
                    && !g[0].is_batched()
                    && !s[3].is_batched()
                {
                    let a = as_dtype(&s[0], ct)?.expand(&shape)?;
                    let b = as_dtype(&s[1], ct)?.expand(&shape)?;
                    let (ga, gb) = match ct {
                        DType::Float32 => {
                            cosine_backward_fused::<f32>(&g[0], &a, &b, &s[2], &s[3], d, eps)?
                        }
                        _ => cosine_backward_fused::<f64>(&g[0], &a, &b, &s[2], &s[3], d, eps)?,
                    };
                    return Ok(vec![Some(ga), Some(gb)]);
                }
                let a = s[0].to_dtype(ct)?.expand(&shape)?;
                let b = s[1].to_dtype(ct)?.expand(&shape)?;
                let di = d as i64;
                let clamped = |r: &Tensor| -> Result<Tensor> {
                    // max(r, eps) whose gradient is r's (torch clamps in place under no_grad).
                    let rd = r.detach();
                    let shift = Tensor::where_cond(
                        &rd.lt_scalar(eps)?,
                        &rd.rsub_scalar(eps)?,
                        &Tensor::wrapped_scalar(0.0, rd.dtype()),
                    )?;
                    r.add(&shift)
                };
                let (ra, rb) = (p_norm(&a, 2.0, di, true)?, p_norm(&b, 2.0, di, true)?);
                let (na, nb) = (clamped(&ra)?, clamped(&rb)?);
                let (ua, ub) = (a.div(&na)?, b.div(&nb)?);
                let out = ua.mul(&ub)?.sum_dims(&[di], true)?;
                let gk = g[0].unsqueeze(di)?;
                let side = |u_other: &Tensor, n: &Tensor, x: &Tensor, r: &Tensor| {
                    let gn = gk.div(n)?;
                    u_other
                        .mul(&gn)?
                        .sub(&norm_backward_ops(&gn.mul(&out)?, x, r, 2.0, di)?)
                };
                Ok(vec![
                    Some(side(&ub, &na, &a, &ra)?),
                    Some(side(&ua, &nb, &b, &rb)?),
                ])
            },
        )?;
    }
    Ok(out)
}

/// The similarities and the two unclamped norms of every lane (stacked: `[2, lanes]`).
fn cosine_forward<T: RowFloat>(
    a: &Tensor,
    b: &Tensor,
    d: usize,
    eps: f64,
) -> Result<(Tensor, Tensor)> {
    let g = Lanes::of(a.shape(), d);
    let mut out = Out::<T>::new(g.count)?;
    let mut norms = Out::<T>::new(2 * g.count)?;
    let (o, on) = (out.ptr(), norms.ptr());
    a.with_contiguous_slice::<T, _>(|xs| {
        b.with_contiguous_slice::<T, _>(|ys| {
            par_lanes(g, &|r| {
                for l in r {
                    let base = g.base(l);
                    let (mut sa, mut sb, mut sab) = (0.0f64, 0.0f64, 0.0f64);
                    if g.inner == 1 {
                        (sa, sb, sab) = dots(&xs[base..base + g.n], &ys[base..base + g.n]);
                    } else {
                        for k in 0..g.n {
                            let i = base + k * g.inner;
                            let (u, v) = (xs[i].f(), ys[i].f());
                            sa += u * u;
                            sb += v * v;
                            sab += u * v;
                        }
                    }
                    let (ra, rb) = (sa.sqrt(), sb.sqrt());
                    let clamp = |r: f64| if r < eps { eps } else { r };
                    // SAFETY: lane l's slots are written by this block only.
                    unsafe {
                        put(&o, l, T::of(sab / (clamp(ra) * clamp(rb))));
                        put(&on, l, T::of(ra));
                        put(&on, g.count + l, T::of(rb));
                    }
                }
            })
        })
    })??;
    let shape = reduced_shape(a.shape(), &[d], false);
    Ok((
        Tensor::from_vec(out.finish(), &shape)?,
        Tensor::from_vec(norms.finish(), &[2, g.count])?,
    ))
}

/// `(Σ x², Σ y², Σ x y)` in one pass, eight f64 partial sums each (so the loop vectorises).
#[inline(always)]
fn dots<T: RowFloat>(x: &[T], y: &[T]) -> (f64, f64, f64) {
    const L: usize = 8;
    let (mut a, mut b, mut c) = ([0.0f64; L], [0.0f64; L], [0.0f64; L]);
    let (xc, yc) = (x.chunks_exact(L), y.chunks_exact(L));
    let (xr, yr) = (xc.remainder(), yc.remainder());
    for (u, v) in xc.zip(yc) {
        for k in 0..L {
            let (p, q) = (u[k].f(), v[k].f());
            a[k] += p * p;
            b[k] += q * q;
            c[k] += p * q;
        }
    }
    let (mut sa, mut sb, mut sc): (f64, f64, f64) =
        (a.iter().sum(), b.iter().sum(), c.iter().sum());
    for (&u, &v) in xr.iter().zip(yr) {
        let (p, q) = (u.f(), v.f());
        sa += p * p;
        sb += q * q;
        sc += p * q;
    }
    (sa, sb, sc)
}

/// The gradients of both (broadcast) inputs:
/// `g / n1 · (x2 / n2 - out · x1 / ‖x1‖)` and its mirror, `x / ‖x‖` taken as 0 at a zero norm.
fn cosine_backward_fused<T: RowFloat>(
    g: &Tensor,
    a: &Tensor,
    b: &Tensor,
    norms: &Tensor,
    out: &Tensor,
    d: usize,
    eps: f64,
) -> Result<(Tensor, Tensor)> {
    let geo = Lanes::of(a.shape(), d);
    let (gv, nv, ov) = (g.to_vec::<T>()?, norms.to_vec::<T>()?, out.to_vec::<T>()?);
    let mut outa = Out::<T>::new(a.numel())?;
    let mut outb = Out::<T>::new(a.numel())?;
    let (pa, pb) = (outa.ptr(), outb.ptr());
    a.with_contiguous_slice::<T, _>(|xs| {
        b.with_contiguous_slice::<T, _>(|ys| {
            par_lanes(geo, &|r| {
                for l in r {
                    let base = geo.base(l);
                    let (ra, rb) = (nv[l].f(), nv[geo.count + l].f());
                    let clamp = |r: f64| if r < eps { eps } else { r };
                    let (na, nb) = (clamp(ra), clamp(rb));
                    let (gl, cos) = (gv[l].f(), ov[l].f());
                    let inv = |r: f64| if r == 0.0 { 0.0 } else { 1.0 / r };
                    // ga = ca y + da x and gb = cb x + db y, coefficients per lane.
                    let c = T::of(gl / (na * nb));
                    let da = T::of(-gl * cos * inv(ra) / na);
                    let db = T::of(-gl * cos * inv(rb) / nb);
                    if geo.inner == 1 {
                        let (u, v) = (&xs[base..base + geo.n], &ys[base..base + geo.n]);
                        // SAFETY: lane l's elements are written by this block only (uninit
                        // until then, hence MaybeUninit).
                        let (oa, ob) = unsafe {
                            (
                                std::slice::from_raw_parts_mut(
                                    pa.get().add(base) as *mut std::mem::MaybeUninit<T>,
                                    geo.n,
                                ),
                                std::slice::from_raw_parts_mut(
                                    pb.get().add(base) as *mut std::mem::MaybeUninit<T>,
                                    geo.n,
                                ),
                            )
                        };
                        for (((oa, ob), &u), &v) in oa.iter_mut().zip(ob.iter_mut()).zip(u).zip(v) {
                            oa.write(c * v + da * u);
                            ob.write(c * u + db * v);
                        }
                        continue;
                    }
                    for k in 0..geo.n {
                        let i = base + k * geo.inner;
                        let (u, v) = (xs[i], ys[i]);
                        // SAFETY: element i belongs to lane l, written by this block only.
                        unsafe {
                            put(&pa, i, c * v + da * u);
                            put(&pb, i, c * u + db * v);
                        }
                    }
                }
            })
        })
    })??;
    Ok((
        Tensor::from_vec(outa.finish(), a.shape())?,
        Tensor::from_vec(outb.finish(), a.shape())?,
    ))
}

/// How `cdist` computes Euclidean distances (torch's `compute_mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CdistMode {
    /// Through a matrix product when either side has more than 25 rows (torch's default).
    MmIfNecessary,
    /// Always through a matrix product (p = 2 only).
    Mm,
    /// Never: the differences are taken pair by pair.
    Direct,
}

/// The `p`-norm distances between the rows of `x1` `(..., P, M)` and of `x2` `(..., R, M)`:
/// shape `(..., P, R)`, batch dims broadcast (torch's `cdist`). For p = 2 the matrix-product
/// form `sqrt(max(|a|² + |b|² - 2 a·b, 0))` is used as `mode` says (fast, but rounding makes
/// near-zero distances less exact); otherwise one fused node whose gradient follows torch's
/// `cdist` rules (0 at a zero distance; for p = inf every element reaching the maximum gets the
/// full gradient). Errors as torch's: fewer than 2 dims, different widths, negative p,
/// non-float or different dtypes, batch dims that do not broadcast.
pub fn cdist(x1: &Tensor, x2: &Tensor, p: f64, mode: CdistMode) -> Result<Tensor> {
    if let Some(r) = Tensor::lift_half([x1, x2], [], |[a, b], []| cdist(a, b, p, mode)) {
        return r;
    }
    // Inside vmap: the samples are one more batch dim.
    if x1.dim() >= 2 && x2.dim() >= 2 {
        let batched = crate::ops::batching::lead_batch(&[x1, x2], |t| cdist(&t[0], &t[1], p, mode));
        if let Some(r) = batched {
            return r;
        }
    }
    if x1.dim() < 2 || x2.dim() < 2 {
        let (which, t) = if x1.dim() < 2 { ("X1", x1) } else { ("X2", x2) };
        return Err(Error::runtime(format!(
            "cdist only supports at least 2D tensors, {which} got: {}D",
            t.dim()
        )));
    }
    let (m1, m2) = (x1.shape()[x1.dim() - 1], x2.shape()[x2.dim() - 1]);
    if m1 != m2 {
        return Err(Error::runtime(format!(
            "X1 and X2 must have the same number of columns. X1: {m1} X2: {m2}"
        )));
    }
    for (which, t) in [("X1", x1), ("X2", x2)] {
        if !t.dtype().is_float() {
            return Err(Error::runtime(format!(
                "cdist only supports floating-point dtypes, {which} got: {}",
                crate::tensor::scalar_type_name(t.dtype())
            )));
        }
    }
    if x1.dtype() != x2.dtype() {
        return Err(Error::runtime(format!(
            "expected scalar type {} but found {}",
            crate::tensor::scalar_type_name(x1.dtype()),
            crate::tensor::scalar_type_name(x2.dtype())
        )));
    }
    if p < 0.0 || p.is_nan() {
        return Err(Error::runtime("cdist only supports non-negative p values"));
    }
    let (r1, r2) = (x1.shape()[x1.dim() - 2], x2.shape()[x2.dim() - 2]);
    let batch = broadcast_shapes(&x1.shape()[..x1.dim() - 2], &x2.shape()[..x2.dim() - 2])?;
    let with = |rows: usize| -> Vec<usize> {
        let mut s = batch.to_vec();
        s.extend([rows, m1]);
        s
    };
    let (a, b) = (x1.expand(&with(r1))?, x2.expand(&with(r2))?);
    let use_mm = p == 2.0
        && match mode {
            CdistMode::Mm => true,
            CdistMode::MmIfNecessary => r1 > 25 || r2 > 25,
            CdistMode::Direct => false,
        };
    if use_mm {
        return euclidean_mm(&a, &b);
    }
    let out = match a.dtype() {
        DType::Float32 => cdist_forward::<f32>(&a, &b, p)?,
        _ => cdist_forward::<f64>(&a, &b, p)?,
    };
    if needs_grad(&[x1, x2]) {
        record(
            "CdistBackward0",
            &[x1, x2],
            &[&out],
            &[&a, &b, &out],
            true,
            move |g, s| {
                let (a, b, d) = (&s[0], &s[1], &s[2]);
                if crate::ops::elementwise::fusable(&g[0], d) {
                    let (ga, gb) = match a.dtype() {
                        DType::Float32 => cdist_backward_fused::<f32>(&g[0], a, b, d, p)?,
                        _ => cdist_backward_fused::<f64>(&g[0], a, b, d, p)?,
                    };
                    return Ok(vec![Some(ga), Some(gb)]);
                }
                // Differentiable: every pair's difference, then the norm over the last dim
                // (O(P·R·M) memory, only when a graph of the backward is built).
                let diff = a.unsqueeze(-2)?.sub(&b.unsqueeze(-3)?)?;
                let n = p_norm(&diff, p, -1, true)?;
                let gd = norm_backward_ops(&g[0].unsqueeze(-1)?, &diff, &n, p, -1)?;
                Ok(vec![
                    Some(gd.sum_dims(&[-2], false)?),
                    Some(gd.sum_dims(&[-3], false)?.neg()?),
                ])
            },
        )?;
    }
    Ok(out)
}

/// torch's `_euclidean_dist`: `[-2a, |a|², 1] · [b, 1, |b|²]ᵀ`, clamped at 0, square-rooted;
/// differentiable ops throughout.
fn euclidean_mm(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let an = a.mul(a)?.sum_dims(&[-1], true)?;
    let bn = b.mul(b)?.sum_dims(&[-1], true)?;
    let (ap, bp) = (
        Tensor::ones(an.shape(), a.dtype()),
        Tensor::ones(bn.shape(), b.dtype()),
    );
    let a_ = Tensor::cat(&[a.mul_scalar(-2.0)?, an, ap], -1)?;
    let b_ = Tensor::cat(&[b.clone(), bp, bn], -1)?;
    let r = a_.matmul(&b_.transpose(-1, -2)?)?;
    clamp_min(&r, 0.0)?.sqrt()
}

/// `max(x, v)` with torch's `clamp_min` gradient (passes where `x >= v`).
fn clamp_min(x: &Tensor, v: f64) -> Result<Tensor> {
    x.clamp(Some(&Tensor::wrapped_scalar(v, x.dtype())), None)
}

/// The `(batch, P, R)` distances; `a`, `b` are `(batch..., P|R, M)` with equal batch dims.
fn cdist_forward<T: RowFloat>(a: &Tensor, b: &Tensor, p: f64) -> Result<Tensor> {
    let nd = a.dim();
    let (r1, r2, m) = (a.shape()[nd - 2], b.shape()[nd - 2], a.shape()[nd - 1]);
    let nb: usize = a.shape()[..nd - 2].iter().product();
    let mut out = Out::<T>::new(nb * r1 * r2)?;
    let o = out.ptr();
    a.with_contiguous_slice::<T, _>(|xs| {
        b.with_contiguous_slice::<T, _>(|ys| {
            // One lane per (batch, i) row of the output.
            let g = Lanes {
                n: r2 * m.max(1),
                inner: 1,
                count: nb * r1,
            };
            par_lanes(g, &|rows| {
                for row in rows {
                    let (bi, i) = (row / r1.max(1), row % r1.max(1));
                    let u = &xs[(bi * r1 + i) * m..(bi * r1 + i + 1) * m];
                    for j in 0..r2 {
                        let v = &ys[(bi * r2 + j) * m..(bi * r2 + j + 1) * m];
                        // SAFETY: output row `row` is written by this block only.
                        unsafe { put(&o, row * r2 + j, T::of(pair_norm(u, v, p))) };
                    }
                }
            })
        })
    })??;
    let mut shape = a.shape()[..nd - 2].to_vec();
    shape.extend([r1, r2]);
    Tensor::from_vec(out.finish(), &shape)
}

/// `‖u - v‖_p`.
#[inline(always)]
fn pair_norm<T: RowFloat>(u: &[T], v: &[T], p: f64) -> f64 {
    // The difference in T, as torch takes it (so an inf-norm is exactly one |difference|).
    let d = u.iter().zip(v).map(|(&x, &y)| (x - y).f());
    use crate::ops::nn::softmax::sum_by;
    if p == 2.0 {
        sum_by(u, v, |x: T, y: T| {
            let t = (x - y).f();
            t * t
        })
        .sqrt()
    } else if p == 1.0 {
        sum_by(u, v, |x: T, y: T| (x - y).f().abs())
    } else if p == 0.0 {
        d.filter(|&t| t != 0.0).count() as f64
    } else if p.is_infinite() {
        d.map(f64::abs)
            .fold(0.0, |a, t| if t > a || t.is_nan() { t } else { a })
    } else {
        d.map(|t| t.abs().powf(p)).sum::<f64>().powf(1.0 / p)
    }
}

/// `acc += g · ∂‖u - v‖_p / ∂u` for one pair at distance `dist > 0`, the common p in their
/// own loops (branch-free, vectorisable).
#[inline(always)]
fn pair_grad<T: RowFloat>(acc: &mut [f64], u: &[T], v: &[T], g: f64, dist: f64, p: f64) {
    let it = acc.iter_mut().zip(u.iter().zip(v));
    if p == 2.0 {
        let k = g / dist;
        it.for_each(|(a, (&x, &y))| *a += k * (x - y).f());
    } else if p == 1.0 {
        it.for_each(|(a, (&x, &y))| {
            let t = (x - y).f();
            *a += if t > 0.0 {
                g
            } else if t < 0.0 {
                -g
            } else {
                0.0
            };
        });
    } else {
        it.for_each(|(a, (&x, &y))| *a += g * dnorm((x - y).f(), dist, p, 1.0));
    }
}

/// `(Σ_j g_ij ∂d_ij/∂a_i, -Σ_i g_ij ∂d_ij/∂a_i)`: one pass over the pairs per output row for
/// `a`'s gradient, one per column for `b`'s (each row or column is one task's, no atomics).
fn cdist_backward_fused<T: RowFloat>(
    g: &Tensor,
    a: &Tensor,
    b: &Tensor,
    d: &Tensor,
    p: f64,
) -> Result<(Tensor, Tensor)> {
    let nd = a.dim();
    let (r1, r2, m) = (a.shape()[nd - 2], b.shape()[nd - 2], a.shape()[nd - 1]);
    let nb: usize = a.shape()[..nd - 2].iter().product();
    let (gv, dv) = (g.to_vec::<T>()?, d.to_vec::<T>()?);
    // b's rows read a column of g and d each: transposed copies make those reads contiguous.
    let transpose = |x: &[T]| -> Result<Vec<T>> {
        let mut t = crate::tensor::creation::try_vec::<T>(x.len())?;
        for bi in 0..nb {
            for j in 0..r2 {
                t.extend((0..r1).map(|i| x[(bi * r1 + i) * r2 + j]));
            }
        }
        Ok(t)
    };
    let (gt, dt) = (transpose(&gv)?, transpose(&dv)?);
    let mut ga = crate::tensor::creation::try_filled_vec(a.numel(), T::zero())?;
    let mut gb = crate::tensor::creation::try_filled_vec(b.numel(), T::zero())?;
    let (pa, pb) = (SendPtr(ga.as_mut_ptr()), SendPtr(gb.as_mut_ptr()));
    // (every element of both is written: each row accumulates in f64, then is stored once)
    a.with_contiguous_slice::<T, _>(|xs| {
        b.with_contiguous_slice::<T, _>(|ys| {
            // side 0: rows of a (sum over j); side 1: rows of b (sum over i).
            for side in 0..2 {
                let (own, other) = if side == 0 { (r1, r2) } else { (r2, r1) };
                let lanes = Lanes {
                    n: other * m.max(1),
                    inner: 1,
                    count: nb * own,
                };
                par_lanes(lanes, &|rows| {
                    let mut acc = vec![0.0f64; m];
                    for row in rows {
                        let (bi, k) = (row / own.max(1), row % own.max(1));
                        acc.iter_mut().for_each(|v| *v = 0.0);
                        for l in 0..other {
                            let (i, j) = if side == 0 { (k, l) } else { (l, k) };
                            let (gl, dist) = if side == 0 {
                                let idx = (bi * r1 + i) * r2 + j;
                                (gv[idx].f(), dv[idx].f())
                            } else {
                                let idx = (bi * r2 + j) * r1 + i;
                                (gt[idx].f(), dt[idx].f())
                            };
                            if gl == 0.0 || dist == 0.0 || p == 0.0 {
                                continue; // every rule gives 0 at a zero distance
                            }
                            let u = &xs[(bi * r1 + i) * m..(bi * r1 + i + 1) * m];
                            let v = &ys[(bi * r2 + j) * m..(bi * r2 + j + 1) * m];
                            pair_grad(&mut acc, u, v, gl, dist, p);
                        }
                        let sign = if side == 0 { 1.0 } else { -1.0 };
                        let dst = if side == 0 { &pa } else { &pb };
                        for (c, &v) in acc.iter().enumerate() {
                            // SAFETY: row `row` of this side belongs to this block only.
                            unsafe { *dst.get().add(row * m + c) = T::of(sign * v) };
                        }
                    }
                });
            }
        })
    })??;
    Ok((
        Tensor::from_vec(ga, a.shape())?,
        Tensor::from_vec(gb, b.shape())?,
    ))
}
