//! `prelu`: `x` where `x > 0`, else `w[c] · x`, with one learned slope or one per channel
//! (dim 1). One elementwise node; its backward gives the input gradient and the per-channel sum
//! of `g · x` over the negative part in one pass.

use crate::error::{Error, Result};
use crate::graph::node::{needs_grad, record};
use crate::ops::elementwise::PAR_MIN_VMATH;
use crate::ops::nn::softmax::RowFloat;
use crate::parallel::{self, SendPtr};
use crate::tensor::grad_mode::GradModeGuard;
use crate::tensor::{DType, Tensor};

/// `(blocks, channels, inner)`: the tensor as blocks of `inner` elements sharing one slope,
/// block `b` using slope `b % channels` (channels = 1 for a single slope).
fn geometry(x: &Tensor, wn: usize) -> (usize, usize, usize) {
    // One slope: fixed-size blocks (the last may be short), so large tensors still split.
    let inner: usize = if wn == 1 || x.dim() < 2 {
        4096
    } else {
        x.shape()[2..].iter().product::<usize>().max(1)
    };
    (
        x.numel().div_ceil(inner),
        if wn == 1 { 1 } else { wn },
        inner,
    )
}

/// PReLU of `x` with slopes `weight` (a scalar or 1-D tensor of 1 or `x.shape[1]` values).
///
/// Errors as torch's: a weight of more than one dim, a slope count that is neither 1 nor the
/// channel count, a 0-d input with several slopes, different dtypes (no promotion) or integer
/// dtypes.
pub fn prelu(x: &Tensor, weight: &Tensor) -> Result<Tensor> {
    if let Some(r) = Tensor::lift_half([x, weight], [], |[x, w], []| prelu(x, w)) {
        return r;
    }
    if weight.dim() > 1 {
        return Err(Error::runtime(format!(
            "prelu: Expected `weight` to be a scalar or 1D tensor, but got: ndim = {}",
            weight.dim()
        )));
    }
    let wn = weight.numel();
    if wn != 1 {
        if x.dim() == 0 {
            return Err(Error::runtime("Not allow zero-dim input tensor."));
        }
        let channels = if x.dim() > 1 { x.shape()[1] } else { 1 };
        if channels != wn {
            return Err(Error::runtime(format!(
                "Mismatch of parameter numbers and input channel size. Found parameter numbers = {wn} and channel size = {channels}."
            )));
        }
    }
    if x.dtype() != weight.dtype() {
        return Err(Error::runtime(format!(
            "prelu: Type promoting not supported. Got {} and {}",
            crate::tensor::scalar_type_name(x.dtype()),
            crate::tensor::scalar_type_name(weight.dtype())
        )));
    }
    if !x.dtype().is_float() {
        return Err(Error::not_implemented(format!(
            "\"prelu_cpu\" not implemented for '{}'",
            crate::tensor::scalar_type_name(x.dtype())
        )));
    }
    let out = if x.is_batched() || weight.is_batched() {
        // Inside vmap: the same formula in elementwise ops, which batch.
        let _off = GradModeGuard::new(false);
        let (x, w) = (x.detach(), weight.detach());
        Tensor::where_cond(&x.gt_scalar(0.0)?, &x, &x.mul(&slopes(&w, &x)?)?)?
    } else {
        match x.dtype() {
            DType::Float32 => forward::<f32>(x, weight)?,
            _ => forward::<f64>(x, weight)?,
        }
    };
    if needs_grad(&[x, weight]) {
        record(
            "PreluKernelBackward0",
            &[x, weight],
            &[&out],
            &[x, weight],
            false,
            move |g, s| {
                let (x, w) = (&s[0], &s[1]);
                let batched = [&g[0], x, w].iter().any(|t| t.is_batched());
                if crate::ops::elementwise::fusable(&g[0], x) && !needs_grad(&[w]) && !batched {
                    let (gx, gw) = match x.dtype() {
                        DType::Float32 => backward::<f32>(&g[0], x, w)?,
                        _ => backward::<f64>(&g[0], x, w)?,
                    };
                    return Ok(vec![Some(gx), Some(gw)]);
                }
                let channelwise = w.numel() != 1 && x.dim() >= 2;
                let wb = slopes(w, x)?;
                let pos = x.gt_scalar(0.0)?;
                let gx = Tensor::where_cond(&pos, &g[0], &g[0].mul(&wb)?)?;
                let zero = Tensor::wrapped_scalar(0.0, x.dtype());
                let gwx = Tensor::where_cond(&pos, &zero, &g[0].mul(x)?)?;
                let gw = if channelwise {
                    let dims: Vec<i64> = (0..x.dim() as i64).filter(|&d| d != 1).collect();
                    gwx.sum_dims(&dims, false)?
                } else {
                    gwx.sum()?
                };
                Ok(vec![Some(gx), Some(gw.reshape(w.shape())?)])
            },
        )?;
    }
    Ok(out)
}

/// The slopes `w` shaped to broadcast against `x`: one per channel (dim 1), or a scalar.
fn slopes(w: &Tensor, x: &Tensor) -> Result<Tensor> {
    if w.numel() != 1 && x.dim() >= 2 {
        let mut shape = vec![w.numel()];
        shape.extend(std::iter::repeat_n(1, x.dim() - 2));
        w.reshape(&shape)
    } else {
        w.reshape(&[])
    }
}

/// Run `block(b, range)` for each of `blocks` blocks of `inner` elements (the range clipped to
/// `len`), in tasks of about 16K elements shared among threads when `len` pays for it.
fn each_block(
    len: usize,
    blocks: usize,
    inner: usize,
    block: impl Fn(usize, std::ops::Range<usize>) + Sync,
) {
    let per_task = (16384 / inner.max(1)).max(1);
    let helpers = if len >= PAR_MIN_VMATH {
        parallel::helpers()
    } else {
        0
    };
    parallel::share_work(helpers, blocks.div_ceil(per_task), &|t| {
        for b in t * per_task..((t + 1) * per_task).min(blocks) {
            block(b, b * inner..((b + 1) * inner).min(len));
        }
    });
}

fn forward<T: RowFloat>(x: &Tensor, weight: &Tensor) -> Result<Tensor> {
    let w = weight.to_vec::<T>()?;
    let (blocks, channels, inner) = geometry(x, w.len());
    let mut out = crate::tensor::creation::try_filled_vec(x.numel(), T::zero())?;
    let o = SendPtr(out.as_mut_ptr());
    x.with_contiguous_slice::<T, _>(|xs| {
        each_block(xs.len(), blocks, inner, |b, r| {
            let a = w[b % channels];
            // SAFETY: block b's range is written by this task only; `out` outlives the call.
            let dst = unsafe { std::slice::from_raw_parts_mut(o.get().add(r.start), r.len()) };
            for (d, &v) in dst.iter_mut().zip(&xs[r]) {
                *d = if v > T::zero() { v } else { a * v };
            }
        });
    })?;
    Tensor::from_vec(out, x.shape())
}

/// `(g · (x > 0 ? 1 : w), Σ_{x ≤ 0} g · x per slope)`; the slope sums are per block in f64,
/// then added in block order (deterministic at any thread count).
fn backward<T: RowFloat>(g: &Tensor, x: &Tensor, weight: &Tensor) -> Result<(Tensor, Tensor)> {
    let w = weight.to_vec::<T>()?;
    let (blocks, channels, inner) = geometry(x, w.len());
    let mut gx = crate::tensor::creation::try_filled_vec(x.numel(), T::zero())?;
    let mut part = vec![0.0f64; blocks];
    let (o, po) = (SendPtr(gx.as_mut_ptr()), SendPtr(part.as_mut_ptr()));
    x.with_contiguous_slice::<T, _>(|xs| {
        g.with_contiguous_slice::<T, _>(|gs| {
            each_block(xs.len(), blocks, inner, |b, r| {
                let a = w[b % channels];
                // SAFETY: block b's range and slot are written by this task only.
                let dst = unsafe { std::slice::from_raw_parts_mut(o.get().add(r.start), r.len()) };
                let mut s = 0.0f64;
                for ((d, &v), &gv) in dst.iter_mut().zip(&xs[r.clone()]).zip(&gs[r]) {
                    if v > T::zero() {
                        *d = gv;
                    } else {
                        *d = a * gv;
                        s += gv.f() * v.f();
                    }
                }
                unsafe { *po.get().add(b) = s };
            });
        })
    })??;
    let mut gw = vec![0.0f64; channels];
    for (b, s) in part.iter().enumerate() {
        gw[b % channels] += s;
    }
    let gw: Vec<T> = gw.into_iter().map(T::of).collect();
    Ok((
        Tensor::from_vec(gx, x.shape())?,
        Tensor::from_vec(gw, weight.shape())?,
    ))
}
