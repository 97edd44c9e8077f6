//! Numerically stable log-sum-exp, softmax and log-softmax (each subtracts the maximum first).
//!
//! Softmax and log-softmax are fused row kernels along any dim: the tensor is seen as
//! `(outer, n, inner)` with `n` the softmax dim; one pass finds the maxima, one writes
//! `exp(x - m)` (vectorised for float32) and sums it, one scales or shifts. Blocks of rows run in
//! parallel. Their backward is one fused pass too, unless a graph of the backward is being built
//! (then it is written with differentiable ops on the saved output).

use std::mem::MaybeUninit;

use multiversion::multiversion;

use crate::error::Result;
use crate::graph::node::{needs_grad, record};
use crate::kernels::copy::cast;
use crate::kernels::vmath::{exp_row_f32, UnaryF32};
use crate::ops::elementwise::PAR_MIN_VMATH;
use crate::ops::reduce::reduce_dims;
use crate::parallel::{self, SendPtr};
use crate::tensor::grad_mode::GradModeGuard;
use crate::tensor::shape::{broadcast_shapes, wrap_dim};
use crate::tensor::{DType, Element, Tensor};

/// Softmax kernels take floats only (torch raises NotImplementedError for integers).
fn float_only(t: &Tensor, kernel: &str) -> Result<()> {
    if t.dtype().is_float() {
        Ok(())
    } else {
        Err(crate::error::Error::not_implemented(format!(
            "\"{kernel}\" not implemented for '{}'",
            crate::tensor::scalar_type_name(t.dtype())
        )))
    }
}

/// A float version of `t` (integers and bools become float32, as torch promotes them).
fn floated(t: &Tensor) -> Result<Tensor> {
    if t.dtype().is_float() {
        Ok(t.clone())
    } else {
        cast(t, crate::tensor::dtype::default_float())
    }
}

/// The per-group maximum over `dims` (kept as size 1), with infinities replaced by 0 so that
/// `x - m` never becomes inf - inf; a constant (no gradient).
fn stable_shift(x: &Tensor, dims: &[i64]) -> Result<Tensor> {
    let _g = GradModeGuard::new(false);
    let x = x.detach();
    if x.numel() == 0 {
        return Ok(Tensor::zeros(
            &crate::ops::reduce::reduced_shape(x.shape(), &reduce_dims(dims, x.dim())?, true),
            x.dtype(),
        ));
    }
    let m = x.amax(dims, true)?;
    Tensor::where_cond(&m.isinf()?, &Tensor::wrapped_scalar(0.0, m.dtype()), &m)
}

impl Tensor {
    /// log Σ exp(x) over `dims`, computed as `m + log Σ exp(x - m)` with `m` the maximum, so
    /// large inputs do not overflow. Its gradient is the softmax.
    pub fn logsumexp(&self, dims: &[i64], keepdim: bool) -> Result<Tensor> {
        let x = floated(self)?;
        let rd = reduce_dims(dims, x.dim())?;
        let out = {
            let _g = GradModeGuard::new(false);
            let xd = x.detach();
            let m = stable_shift(&xd, dims)?;
            let s = xd.sub(&m)?.exp()?.sum_dims(dims, true)?.log()?.add(&m)?;
            if keepdim {
                s
            } else {
                let shape = crate::ops::reduce::reduced_shape(x.shape(), &rd, false);
                s.reshape(&shape)?
            }
        };
        if needs_grad(&[&x]) {
            let keep_shape = crate::ops::reduce::reduced_shape(x.shape(), &rd, true);
            record(
                "LogsumexpBackward0",
                &[&x],
                &[&out],
                &[&x, &out],
                false,
                move |g, s| {
                    // d/dx = exp(x - out), the softmax.
                    let o = s[1].reshape(&keep_shape)?;
                    let p = s[0].sub(&o)?.exp()?;
                    Ok(vec![Some(g[0].reshape(&keep_shape)?.mul(&p)?)])
                },
            )?;
        }
        Ok(out)
    }

    /// Softmax along `dim` (float inputs only, like torch): `exp(x - m) / Σ exp(x - m)`, one
    /// fused kernel. Backward: `y (g - Σ g y)`, fused, or with differentiable ops on the saved
    /// output when a graph of the backward is built.
    pub fn softmax(&self, dim: i64) -> Result<Tensor> {
        softmax_rows(self, dim, false)
    }

    /// Log-softmax along `dim`: `x - m - log Σ exp(x - m)`, one fused kernel. Backward:
    /// `g - exp(y) Σ g`.
    pub fn log_softmax(&self, dim: i64) -> Result<Tensor> {
        softmax_rows(self, dim, true)
    }

    /// Softmin along `dim`: `softmax(-x)`.
    pub fn softmin(&self, dim: i64) -> Result<Tensor> {
        self.neg()?.softmax(dim)
    }
}

/// A float element the row kernels run on: f64 accumulation, vectorised exp for f32.
pub(crate) trait RowFloat: Element + num_traits::Float {
    /// `dst[i] = e^src[i]`.
    fn exp_into(src: &[Self], dst: &mut [MaybeUninit<Self>]);
    /// Widen.
    fn f(self) -> f64;
    /// Narrow.
    fn of(v: f64) -> Self;
    /// Softmax (`log` false) or log-softmax of one contiguous row by a dedicated kernel;
    /// false (nothing written) where the type has none.
    fn row_forward(_x: &[Self], _out: &mut [MaybeUninit<Self>], _log: bool) -> bool {
        false
    }
    /// The fused backward of one contiguous row by a dedicated kernel; false (nothing
    /// written) where the type has none.
    fn row_backward(
        _g: std::result::Result<&[Self], Self>,
        _y: &[Self],
        _out: &mut [MaybeUninit<Self>],
        _log: bool,
    ) -> bool {
        false
    }
}

impl RowFloat for f32 {
    fn exp_into(src: &[f32], dst: &mut [MaybeUninit<f32>]) {
        UnaryF32::Exp.apply_uninit(src, dst)
    }
    #[inline(always)]
    fn f(self) -> f64 {
        self as f64
    }
    #[inline(always)]
    fn of(v: f64) -> f32 {
        v as f32
    }
    fn row_forward(x: &[f32], out: &mut [MaybeUninit<f32>], log: bool) -> bool {
        row_forward_f32(x, out, log);
        true
    }
    fn row_backward(
        g: std::result::Result<&[f32], f32>,
        y: &[f32],
        out: &mut [MaybeUninit<f32>],
        log: bool,
    ) -> bool {
        row_backward_f32(g, y, out, log);
        true
    }
}

impl RowFloat for f64 {
    fn exp_into(src: &[f64], dst: &mut [MaybeUninit<f64>]) {
        for (o, &v) in dst.iter_mut().zip(src) {
            o.write(v.exp());
        }
    }
    #[inline(always)]
    fn f(self) -> f64 {
        self
    }
    #[inline(always)]
    fn of(v: f64) -> f64 {
        v
    }
}

/// Independent accumulators in the reductions, so they vectorise (a single running sum is
/// bound by the add latency).
const LANES: usize = 8;

/// Σ f(a[i], b[i]) in f64, eight partial sums.
#[inline(always)]
pub(crate) fn sum_by<T: RowFloat>(a: &[T], b: &[T], f: impl Fn(T, T) -> f64) -> f64 {
    let mut acc = [0.0f64; LANES];
    let (ac, bc) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let (ar, br) = (ac.remainder(), bc.remainder());
    for (x, y) in ac.zip(bc) {
        for k in 0..LANES {
            acc[k] += f(x[k], y[k]);
        }
    }
    let mut s: f64 = acc.iter().sum();
    for (&x, &y) in ar.iter().zip(br) {
        s += f(x, y);
    }
    s
}

/// Lanes of [`lane_sum`]: two AVX-512 (four AVX2) accumulators of float32.
const SUM_LANES: usize = 32;
/// Elements summed in `T` lanes before the partial sum joins the f64 total: short enough that
/// float32 lanes lose nothing visible, long enough to run at vector speed.
pub(crate) const SUM_BLOCK: usize = 256;

/// The lanes added in a fixed order (a halving tree). Kept out of line: inlined, any fold of
/// the lanes stops LLVM from vectorising the callers' main loops at full width.
#[inline(never)]
fn fold_lanes<T: Element + num_traits::Float>(acc: &[T; SUM_LANES]) -> T {
    let mut acc = *acc;
    let mut h = SUM_LANES;
    while h > 1 {
        h /= 2;
        let (lo, hi) = acc.split_at_mut(h);
        for (a, &b) in lo.iter_mut().zip(hi.iter()) {
            *a = *a + b;
        }
    }
    acc[0]
}

/// Σ f(a) in [`SUM_LANES`] `T` lanes per block of [`SUM_BLOCK`], the blocks added in f64. The
/// lane loops are written with zipped iterators, the form LLVM vectorises at full width; call it
/// from a multiversioned function so the vector target applies.
#[inline(always)]
pub(crate) fn lane_sum<T: Element + num_traits::Float>(a: &[T], f: impl Fn(T) -> T) -> f64 {
    let mut total = 0f64;
    for blk in a.chunks(SUM_BLOCK) {
        let mut acc = [T::zero(); SUM_LANES];
        let mut it = blk.chunks_exact(SUM_LANES);
        for c in &mut it {
            for (s, &v) in acc.iter_mut().zip(c) {
                *s = *s + f(v);
            }
        }
        let mut rest = fold_lanes(&acc);
        for &v in it.remainder() {
            rest = rest + f(v);
        }
        total += Element::to_f64(rest);
    }
    total
}

/// (Σ f1(a, b), Σ f2(a, b)) over zipped `a`, `b`, blocked as [`lane_sum`].
#[inline(always)]
pub(crate) fn lane_sums2<T: Element + num_traits::Float>(
    a: &[T],
    b: &[T],
    f1: impl Fn(T, T) -> T,
    f2: impl Fn(T, T) -> T,
) -> (f64, f64) {
    let n = a.len().min(b.len());
    let (mut t1, mut t2) = (0f64, 0f64);
    for (ab, bb) in a[..n].chunks(SUM_BLOCK).zip(b[..n].chunks(SUM_BLOCK)) {
        let mut acc1 = [T::zero(); SUM_LANES];
        let mut acc2 = [T::zero(); SUM_LANES];
        let (mut ai, mut bi) = (ab.chunks_exact(SUM_LANES), bb.chunks_exact(SUM_LANES));
        for (ac, bc) in (&mut ai).zip(&mut bi) {
            for (((s1, s2), &x), &y) in acc1.iter_mut().zip(acc2.iter_mut()).zip(ac).zip(bc) {
                *s1 = *s1 + f1(x, y);
                *s2 = *s2 + f2(x, y);
            }
        }
        let (mut r1, mut r2) = (fold_lanes(&acc1), fold_lanes(&acc2));
        for (&x, &y) in ai.remainder().iter().zip(bi.remainder()) {
            r1 = r1 + f1(x, y);
            r2 = r2 + f2(x, y);
        }
        t1 += Element::to_f64(r1);
        t2 += Element::to_f64(r2);
    }
    (t1, t2)
}

/// Σ a b, blocked as [`lane_sum`].
#[inline(always)]
pub(crate) fn lane_dot<T: Element + num_traits::Float>(a: &[T], b: &[T]) -> f64 {
    lane_sums2(a, b, |x, y| x * y, |_, _| T::zero()).0
}

/// The largest element, ignoring NaN (a NaN row still comes out NaN through exp); an infinite
/// maximum is kept, so such rows come out NaN as torch's do.
#[inline(always)]
pub(crate) fn row_max<T: RowFloat>(x: &[T]) -> T {
    let mut acc = [T::neg_infinity(); LANES];
    let c = x.chunks_exact(LANES);
    let r = c.remainder();
    for v in c {
        for k in 0..LANES {
            acc[k] = if v[k] > acc[k] { v[k] } else { acc[k] };
        }
    }
    let mut m = acc
        .iter()
        .fold(T::neg_infinity(), |a, &b| if b > a { b } else { a });
    for &v in r {
        m = if v > m { v } else { m };
    }
    m
}

/// SAFETY contract helper: the slice was fully written.
#[inline(always)]
pub(crate) unsafe fn assume_init<T>(s: &mut [MaybeUninit<T>]) -> &mut [T] {
    // SAFETY: the caller wrote every element; MaybeUninit<T> has T's layout.
    unsafe { &mut *(s as *mut [MaybeUninit<T>] as *mut [T]) }
}

/// `(outer, n, inner)`: the sizes before, at and after `d`.
pub(crate) fn geometry(shape: &[usize], d: usize) -> (usize, usize, usize) {
    if shape.is_empty() {
        return (1, 1, 1);
    }
    let outer = shape[..d].iter().product();
    let inner = shape[d + 1..].iter().product();
    (outer, shape[d], inner)
}

/// A new vector of `outer` blocks of `block` elements, `fill(o, block)` writing every element of
/// block `o` (with a per-task scratch vector); blocks are shared among threads when there are
/// many elements.
pub(crate) fn fill_blocks<T: Element>(
    outer: usize,
    block: usize,
    fill: impl Fn(usize, &mut [MaybeUninit<T>], &mut Vec<T>) + Sync,
) -> Result<Vec<T>> {
    let n = outer * block;
    let mut v = crate::tensor::creation::try_vec::<T>(n)?;
    let base = SendPtr(v.spare_capacity_mut().as_mut_ptr());
    let per_task = (8192 / block.max(1)).max(1);
    let tasks = outer.div_ceil(per_task);
    let helpers = if n >= PAR_MIN_VMATH {
        parallel::helpers()
    } else {
        0
    };
    parallel::share_work(helpers, tasks, &|t| {
        let mut scratch = Vec::new();
        for o in t * per_task..((t + 1) * per_task).min(outer) {
            // SAFETY: blocks are disjoint ranges of the vector's spare capacity, which outlives
            // share_work.
            let out = unsafe { std::slice::from_raw_parts_mut(base.get().add(o * block), block) };
            fill(o, out, &mut scratch);
        }
    });
    // SAFETY: every block was written by `fill` (its contract).
    unsafe { v.set_len(n) };
    Ok(v)
}

/// Softmax (`log` false) or log-softmax of `x` along `d`.
fn rows_forward(x: &Tensor, d: usize, log: bool) -> Result<Tensor> {
    if let Some(r) = crate::ops::batching::on_physical(x, |p| {
        // A 0-d sample is a row of one.
        let q = if x.dim() == 0 {
            p.unsqueeze(1)?
        } else {
            p.clone()
        };
        rows_forward(&q, d + 1, log)?.reshape(p.shape())
    }) {
        return r;
    }
    match x.dtype() {
        DType::Float32 => rows_forward_as::<f32>(x, d, log),
        h if h.is_half() => {
            crate::kernels::copy::via_compute(x, |w| rows_forward_as::<f32>(w, d, log))
        }
        _ => rows_forward_as::<f64>(x, d, log),
    }
}

fn rows_forward_as<T: RowFloat>(x: &Tensor, d: usize, log: bool) -> Result<Tensor> {
    let (outer, n, inner) = geometry(x.shape(), d);
    let block = n * inner;
    let v = x.with_contiguous_slice::<T, _>(|xs| {
        fill_blocks::<T>(outer, block, |o, out, scratch| {
            let xb = &xs[o * block..(o + 1) * block];
            if inner == 1 {
                if !T::row_forward(xb, out, log) {
                    forward_row(xb, out, log, scratch)
                }
            } else {
                forward_cols(xb, out, inner, log, scratch)
            }
        })
    })??;
    Tensor::from_vec(v, x.shape())
}

/// One contiguous row.
fn forward_row<T: RowFloat>(x: &[T], out: &mut [MaybeUninit<T>], log: bool, z: &mut Vec<T>) {
    let m = row_max(x);
    z.clear();
    z.extend(x.iter().map(|&v| v - m));
    T::exp_into(z, out);
    // SAFETY: exp_into wrote every element.
    let out = unsafe { assume_init(out) };
    let s = sum_by(out, out, |a, _| a.f());
    if log {
        let l = T::of(s.ln());
        for (o, &v) in out.iter_mut().zip(z.iter()) {
            *o = v - l;
        }
    } else {
        let inv = T::of(1.0 / s);
        for o in out.iter_mut() {
            *o = *o * inv;
        }
    }
}

/// One `(n, inner)` block, reduced over n: the loops run along the contiguous inner axis.
fn forward_cols<T: RowFloat>(
    x: &[T],
    out: &mut [MaybeUninit<T>],
    inner: usize,
    log: bool,
    z: &mut Vec<T>,
) {
    let n = x.len() / inner;
    let mut m = vec![T::neg_infinity(); inner];
    for row in x.chunks_exact(inner) {
        for (a, &v) in m.iter_mut().zip(row) {
            *a = if v > *a { v } else { *a };
        }
    }
    let mut s = vec![0.0f64; inner];
    z.resize(inner, T::zero());
    for k in 0..n {
        let row = &x[k * inner..(k + 1) * inner];
        for ((zz, &v), &mm) in z.iter_mut().zip(row).zip(&m) {
            *zz = v - mm;
        }
        let o = &mut out[k * inner..(k + 1) * inner];
        T::exp_into(z, o);
        // SAFETY: exp_into wrote every element.
        let o = unsafe { assume_init(o) };
        for (a, &e) in s.iter_mut().zip(o.iter()) {
            *a += e.f();
        }
    }
    // SAFETY: every row was written above.
    let out = unsafe { assume_init(out) };
    if log {
        let l: Vec<T> = s.iter().map(|&v| T::of(v.ln())).collect();
        for (orow, row) in out.chunks_exact_mut(inner).zip(x.chunks_exact(inner)) {
            for (((o, &v), &mm), &ll) in orow.iter_mut().zip(row).zip(&m).zip(&l) {
                *o = (v - mm) - ll;
            }
        }
    } else {
        let inv: Vec<T> = s.iter().map(|&v| T::of(1.0 / v)).collect();
        for orow in out.chunks_exact_mut(inner) {
            for (o, &i) in orow.iter_mut().zip(&inv) {
                *o = *o * i;
            }
        }
    }
}

/// The fused backward of softmax (`y (g - Σ g y)`) or log-softmax (`g - e^y Σ g`) along `d`;
/// `g` and `y` share shape and float dtype.
fn rows_backward(g: &Tensor, y: &Tensor, d: usize, log: bool) -> Result<Tensor> {
    // Inside vmap: every level peeled (the batch dims lead), a side the same for every sample
    // expanded to the other's shape.
    let rank = y.dim();
    let batched = {
        let _off = GradModeGuard::new(false);
        crate::tensor::batched::elementwise(&[g, y], |p| {
            let shape = broadcast_shapes(p[0].shape(), p[1].shape())?;
            let (g, y) = (p[0].expand(&shape)?, p[1].expand(&shape)?);
            let lead = shape.len() - rank;
            if rank == 0 {
                // 0-d samples: rows of one.
                let (g1, y1) = (g.unsqueeze(-1)?, y.unsqueeze(-1)?);
                return rows_backward(&g1, &y1, lead, log)?.reshape(&shape);
            }
            rows_backward(&g, &y, d + lead, log)
        })
    };
    if let Some(r) = batched {
        return r;
    }
    match y.dtype() {
        DType::Float32 => rows_backward_as::<f32>(g, y, d, log),
        h if h.is_half() => {
            let (g, y) = (cast(g, DType::Float32)?, cast(y, DType::Float32)?);
            cast(&rows_backward_as::<f32>(&g, &y, d, log)?, h)
        }
        _ => rows_backward_as::<f64>(g, y, d, log),
    }
}

fn rows_backward_as<T: RowFloat>(g: &Tensor, y: &Tensor, d: usize, log: bool) -> Result<Tensor> {
    let (outer, n, inner) = geometry(y.shape(), d);
    let block = n * inner;
    // The expanded gradient of a sum is one value: read it once instead of copying it out.
    let uniform = y.numel() > 0 && g.layout().strides.iter().all(|&s| s == 0);
    let v = y.with_contiguous_slice::<T, _>(|ys| -> Result<Vec<T>> {
        if uniform {
            let gv = crate::ops::elementwise::uniform_value::<T>(g)?;
            return fill_blocks::<T>(outer, block, |o, out, scratch| {
                let r = o * block..(o + 1) * block;
                if inner != 1 || !T::row_backward(Err(gv), &ys[r.clone()], out, log) {
                    backward_block(Err(gv), &ys[r], out, inner, log, scratch)
                }
            });
        }
        g.with_contiguous_slice::<T, _>(|gs| {
            fill_blocks::<T>(outer, block, |o, out, scratch| {
                let r = o * block..(o + 1) * block;
                let (gr, yr) = (&gs[r.clone()], &ys[r]);
                if inner != 1 || !T::row_backward(Ok(gr), yr, out, log) {
                    backward_block(Ok(gr), yr, out, inner, log, scratch)
                }
            })
        })?
    })??;
    Tensor::from_vec(v, y.shape())
}

/// One `(n, inner)` block of the fused backward; `g` a slice or one broadcast value.
fn backward_block<T: RowFloat>(
    g: std::result::Result<&[T], T>,
    y: &[T],
    out: &mut [MaybeUninit<T>],
    inner: usize,
    log: bool,
    e: &mut Vec<T>,
) {
    if log {
        // e^y, then the per-column Σ g.
        e.resize(y.len(), T::zero());
        // SAFETY: T is plain data; exp_into writes every element of the view.
        let ev = unsafe { &mut *(e.as_mut_slice() as *mut [T] as *mut [MaybeUninit<T>]) };
        T::exp_into(y, ev);
    }
    let n = y.len() / inner.max(1);
    let mut acc = vec![0.0f64; inner];
    match g {
        Err(gv) => {
            if log {
                acc.iter_mut().for_each(|a| *a = gv.f() * n as f64);
            } else if inner == 1 {
                acc[0] = gv.f() * sum_by(y, y, |a, _| a.f());
            } else {
                for yr in y.chunks_exact(inner) {
                    for (a, &yv) in acc.iter_mut().zip(yr) {
                        *a += gv.f() * yv.f();
                    }
                }
            }
        }
        Ok(g) => {
            if inner == 1 {
                acc[0] = if log {
                    sum_by(g, g, |a, _| a.f())
                } else {
                    sum_by(g, y, |a, b| a.f() * b.f())
                };
            } else {
                for (gr, yr) in g.chunks_exact(inner).zip(y.chunks_exact(inner)) {
                    for ((a, &gv), &yv) in acc.iter_mut().zip(gr).zip(yr) {
                        *a += if log { gv.f() } else { gv.f() * yv.f() };
                    }
                }
            }
        }
    }
    let acc: Vec<T> = acc.into_iter().map(T::of).collect();
    let src = if log { &e[..] } else { y };
    if inner == 1 {
        // A contiguous row and one sum: one flat loop (per-element chunks of one were half
        // of the backward's time).
        let a = acc[0];
        let rule = |gv: T, sv: T| if log { gv - sv * a } else { sv * (gv - a) };
        match g {
            Ok(g) => out
                .iter_mut()
                .zip(g)
                .zip(src)
                .for_each(|((o, &gv), &sv)| _ = o.write(rule(gv, sv))),
            Err(gv) => out
                .iter_mut()
                .zip(src)
                .for_each(|(o, &sv)| _ = o.write(rule(gv, sv))),
        }
        return;
    }
    for (k, (orow, sr)) in out
        .chunks_exact_mut(inner)
        .zip(src.chunks_exact(inner))
        .enumerate()
    {
        match g {
            Ok(g) => {
                let gr = &g[k * inner..(k + 1) * inner];
                for (((o, &gv), &sv), &a) in orow.iter_mut().zip(gr).zip(sr).zip(&acc) {
                    o.write(if log { gv - sv * a } else { sv * (gv - a) });
                }
            }
            Err(gv) => {
                for ((o, &sv), &a) in orow.iter_mut().zip(sr).zip(&acc) {
                    o.write(if log { gv - sv * a } else { sv * (gv - a) });
                }
            }
        }
    }
}

// ----- float32 rows on float32 lanes -----------------------------------------------------------
//
// The kernels above run in closures handed to the pool, which compile for the baseline target,
// and widen float32 to f64 (half the lanes). The contiguous float32 rows (softmax over the last
// dim, the common case) take these named, multiversioned kernels instead: e^(x - m) on float32
// lanes (`vmath::exp_row_f32`) fused with its sum (in f64 lanes), the backward's sums in
// float32 lanes per block of [`SUM_BLOCK`] joined in f64 lanes ([`sum_f32`]).

/// The largest element in [`SUM_LANES`] lanes, ignoring NaN as [`row_max`] does.
#[inline(always)]
fn max_f32(x: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; SUM_LANES];
    let mut it = x.chunks_exact(SUM_LANES);
    for c in &mut it {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a = if v > *a { v } else { *a };
        }
    }
    let mut m = fold_max(&acc);
    for &v in it.remainder() {
        m = if v > m { v } else { m };
    }
    m
}

/// The lanes' maximum (out of line, as [`fold_lanes`]).
#[inline(never)]
fn fold_max(acc: &[f32; SUM_LANES]) -> f32 {
    acc.iter()
        .fold(f32::NEG_INFINITY, |a, &b| if b > a { b } else { a })
}

/// Σ f(a, b) over zipped float32 rows: [`SUM_LANES`] float32 lanes per block of
/// [`SUM_BLOCK`], each block's lanes added into f64 lanes, those folded once at the end (in a
/// fixed order). Unlike [`lane_sums2`] no scalar fold per block (a tenth of the row kernels'
/// time at 1024 elements).
#[inline(always)]
fn sum_f32(a: &[f32], b: &[f32], f: impl Fn(f32, f32) -> f32) -> f64 {
    let n = a.len().min(b.len());
    let mut wide = [0f64; SUM_LANES];
    let mut rest = 0f64;
    for (ab, bb) in a[..n].chunks(SUM_BLOCK).zip(b[..n].chunks(SUM_BLOCK)) {
        let mut acc = [0f32; SUM_LANES];
        let (mut ai, mut bi) = (ab.chunks_exact(SUM_LANES), bb.chunks_exact(SUM_LANES));
        for (ac, bc) in (&mut ai).zip(&mut bi) {
            for ((s, &x), &y) in acc.iter_mut().zip(ac).zip(bc) {
                *s += f(x, y);
            }
        }
        widen(&mut wide, &acc);
        for (&x, &y) in ai.remainder().iter().zip(bi.remainder()) {
            rest += f(x, y) as f64;
        }
    }
    fold_lanes(&wide) + rest
}

/// `wide += acc` lane by lane. Out of line: inlined, it split [`sum_f32`]'s main loop into
/// 4- and 8-lane pieces.
#[inline(never)]
fn widen(wide: &mut [f64; SUM_LANES], acc: &[f32; SUM_LANES]) {
    for (w, &v) in wide.iter_mut().zip(acc) {
        *w += v as f64;
    }
}

/// Softmax or log-softmax of one contiguous float32 row.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx512dq+avx2+avx+fma", "x86_64+avx2+avx+fma"))]
fn row_forward_f32(x: &[f32], out: &mut [MaybeUninit<f32>], log: bool) {
    if multiversion::target::target_cfg_f!(target_feature = "fma") {
        row_forward_lanes::<true>(x, out, log)
    } else {
        row_forward_lanes::<false>(x, out, log)
    }
}

#[inline(always)]
fn row_forward_lanes<const F: bool>(x: &[f32], out: &mut [MaybeUninit<f32>], log: bool) {
    let m = max_f32(x);
    // e^(x - m), then its sum in f64 lanes over the row (in L1 by then): log-softmax's ln Σ is
    // subtracted from values near 0, where float32 partial sums cost ulps. (Summing inside
    // the exp loop split it into narrower vectors: 1.5x slower.)
    for (o, &v) in out.iter_mut().zip(x) {
        o.write(exp_row_f32::<F>(v - m));
    }
    // SAFETY: the loop above wrote every element.
    let out = unsafe { assume_init(out) };
    let mut wide = [0f64; SUM_LANES];
    let mut it = out.chunks_exact(SUM_LANES);
    for c in &mut it {
        for (w, &v) in wide.iter_mut().zip(c) {
            *w += v as f64;
        }
    }
    let rest: f64 = it.remainder().iter().map(|&v| v as f64).sum();
    let total = fold_lanes(&wide) + rest;
    if log {
        let l = total.ln() as f32;
        for (o, &v) in out.iter_mut().zip(x) {
            *o = (v - m) - l;
        }
    } else {
        let inv = (1.0 / total) as f32;
        for o in out.iter_mut() {
            *o *= inv;
        }
    }
}

/// The fused backward of one contiguous float32 row: `y (g - Σ g y)` or `g - e^y Σ g`; `g` a
/// slice or one broadcast value.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx512dq+avx2+avx+fma", "x86_64+avx2+avx+fma"))]
fn row_backward_f32(
    g: std::result::Result<&[f32], f32>,
    y: &[f32],
    out: &mut [MaybeUninit<f32>],
    log: bool,
) {
    if multiversion::target::target_cfg_f!(target_feature = "fma") {
        row_backward_lanes::<true>(g, y, out, log)
    } else {
        row_backward_lanes::<false>(g, y, out, log)
    }
}

#[inline(always)]
fn row_backward_lanes<const F: bool>(
    g: std::result::Result<&[f32], f32>,
    y: &[f32],
    out: &mut [MaybeUninit<f32>],
    log: bool,
) {
    match (g, log) {
        (Ok(g), false) => {
            let a = sum_f32(g, y, |p, q| p * q) as f32;
            for ((o, &gv), &yv) in out.iter_mut().zip(g).zip(y) {
                o.write(yv * (gv - a));
            }
        }
        (Err(gv), false) => {
            let a = (gv as f64 * sum_f32(y, y, |p, _| p)) as f32;
            for (o, &yv) in out.iter_mut().zip(y) {
                o.write(yv * (gv - a));
            }
        }
        (Ok(g), true) => {
            let a = sum_f32(g, g, |p, _| p) as f32;
            for ((o, &gv), &yv) in out.iter_mut().zip(g).zip(y) {
                o.write(gv - exp_row_f32::<F>(yv) * a);
            }
        }
        (Err(gv), true) => {
            let a = (gv as f64 * y.len() as f64) as f32;
            for (o, &yv) in out.iter_mut().zip(y) {
                o.write(gv - exp_row_f32::<F>(yv) * a);
            }
        }
    }
}

/// [`Tensor::softmax`] (`log` false) or [`Tensor::log_softmax`]: one fused kernel each way, or
/// differentiable ops on the saved output when a graph of the backward is built.
fn softmax_rows(x: &Tensor, dim: i64, log: bool) -> Result<Tensor> {
    let (kernel, node) = if log {
        ("log_softmax_kernel_impl", "LogSoftmaxBackward0")
    } else {
        ("softmax_kernel_impl", "SoftmaxBackward0")
    };
    float_only(x, kernel)?;
    let d = wrap_dim(dim, x.dim())?;
    let out = rows_forward(x, d, log)?;
    if needs_grad(&[x]) {
        record(node, &[x], &[&out], &[&out], false, move |g, s| {
            let y = &s[0];
            if crate::ops::elementwise::fusable(&g[0], y) {
                return Ok(vec![Some(rows_backward(&g[0], y, d, log)?)]);
            }
            let d = d as i64;
            let gx = if log {
                g[0].sub(&y.exp()?.mul(&g[0].sum_dims(&[d], true)?)?)?
            } else {
                let gy = g[0].mul(y)?;
                gy.sub(&y.mul(&gy.sum_dims(&[d], true)?)?)?
            };
            Ok(vec![Some(gx)])
        })?;
    }
    Ok(out)
}
