//! Normalisation: layer norm, RMS norm, group norm, batch norm (training and eval, running
//! statistics updated in place) and instance norm.
//!
//! All five share one kernel. The input is seen as `[n, c, l]` (contiguous) and its elements
//! fall into statistics groups: a row of `l` (layer and RMS norm, affine weight per element),
//! a channel over batch and space (batch norm), or a `(sample, group)` block (group norm;
//! instance norm is group norm with one channel per group). The forward computes each group's
//! mean and rstd in f64 (two passes: mean, then centred squares) and writes the output in the
//! same sweep; the backward makes `grad_input`, `grad_weight` and `grad_bias` in one pass per
//! group. Groups run in parallel; sums across groups (the weight gradients) are taken in a
//! fixed order, so results do not depend on the thread count.
//!
//! When a graph of the backward is being built (`create_graph`), the backward is written in
//! differentiable tensor ops instead, the statistics recomputed from the input, so second
//! derivatives are exact.

use crate::error::{Error, Result};
use crate::graph::node::{needs_grad, record, wants_grad};
use crate::ops::nn::softmax::{lane_sum, lane_sums2};
use crate::parallel::{helpers, share_work, SendPtr};
use crate::tensor::creation::try_vec;
use crate::tensor::grad_mode::GradModeGuard;
use crate::tensor::shape::fmt_shape;
use crate::tensor::{DType, Element, Tensor};

#[cfg(target_arch = "x86_64")]
mod simd;

/// Below this many elements a kernel runs on the calling thread alone.
const PAR_MIN: usize = 1 << 15;
/// Elements per block of rows (layer/RMS norm): the unit of parallel work and of the weight
/// gradient's partial sums (fixed by the shape, never by the thread count).
const ROW_BLOCK: usize = 1 << 14;
/// Most blocks of rows: larger inputs take longer blocks, so the weight gradient's partial sums
/// (2 l per block, then added across blocks in f64) stay few. 256 blocks of 32 rows made
/// 64 x 128 x 512's backward ~10% slower than 64 of 128.
const MAX_ROW_BLOCKS: usize = 64;

/// Which elements share statistics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// `n` rows of `l`; affine per element of a row.
    Rows,
    /// Per channel over batch and space; affine per channel.
    Channel,
    /// Per `(sample, group)` with this many groups; affine per channel.
    Group(usize),
}

/// The input as `[n, c, l]` and how its elements group.
#[derive(Clone, Copy, Debug)]
struct Geo {
    kind: Kind,
    n: usize,
    c: usize,
    l: usize,
}

impl Geo {
    fn groups(&self) -> usize {
        match self.kind {
            Kind::Rows => self.n,
            Kind::Channel => self.c,
            Kind::Group(g) => self.n * g,
        }
    }

    /// Elements of one statistics group.
    fn per_group(&self) -> usize {
        self.n * self.c * self.l / self.groups().max(1)
    }

    /// Contiguous spans of `l` elements in one group.
    fn spans(&self) -> usize {
        match self.kind {
            Kind::Rows => 1,
            Kind::Channel => self.n,
            Kind::Group(g) => self.c / g,
        }
    }

    /// Offset and affine channel of span `k` of group `s`.
    #[inline]
    fn span(&self, s: usize, k: usize) -> (usize, usize) {
        match self.kind {
            Kind::Rows => (s * self.l, 0),
            Kind::Channel => ((k * self.c + s) * self.l, s),
            Kind::Group(g) => {
                let (ni, gi) = (s / g, s % g);
                let ch = gi * (self.c / g) + k;
                ((ni * self.c + ch) * self.l, ch)
            }
        }
    }

    /// Shape of the affine parameters for the differentiable backward (broadcasts against
    /// [`Geo::affine_view`]).
    fn affine_view(&self) -> Vec<usize> {
        match self.kind {
            Kind::Rows => vec![self.n, self.l],
            _ => vec![self.n, self.c, self.l],
        }
    }

    fn param_view(&self) -> Vec<usize> {
        match self.kind {
            Kind::Rows => vec![self.l],
            _ => vec![self.c, 1],
        }
    }

    /// Dims of the affine view that the weight gradient sums over.
    fn param_reduce(&self) -> Vec<i64> {
        match self.kind {
            Kind::Rows => vec![0],
            _ => vec![0, 2],
        }
    }

    /// The input seen so that each group's statistics reduce over `stat_dims`.
    fn stat_view(&self) -> Vec<usize> {
        match self.kind {
            Kind::Rows => vec![self.n, self.l],
            Kind::Channel => vec![self.n, self.c, self.l],
            Kind::Group(g) => vec![self.n, g, self.c / g * self.l],
        }
    }

    fn stat_dims(&self) -> Vec<i64> {
        match self.kind {
            Kind::Rows => vec![1],
            Kind::Channel => vec![0, 2],
            Kind::Group(_) => vec![2],
        }
    }

    fn threads(&self) -> usize {
        if self.n * self.c * self.l >= PAR_MIN {
            helpers()
        } else {
            0
        }
    }

    /// Rows per block and block count (Rows kind).
    fn row_blocks(&self) -> (usize, usize) {
        let per = (ROW_BLOCK / self.l.max(1))
            .max(self.n.div_ceil(MAX_ROW_BLOCKS))
            .max(1);
        (per, self.n.div_ceil(per))
    }
}

/// Options of one normalisation.
#[derive(Clone, Copy, Debug)]
struct Opts {
    eps: f64,
    /// Subtract the mean (false for RMS norm).
    center: bool,
    name: &'static str,
}

// ----- scalar helpers ------------------------------------------------------------------------

/// `xs` as float32 when `T` is f32 and the CPU runs the AVX-512 span kernels ([`simd`]).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn f32_simd<T: Element>(xs: &[T]) -> Option<&[f32]> {
    (T::DTYPE == DType::Float32 && simd::available()).then(|| {
        // SAFETY: T is f32 (its dtype says so), so the slice is the same memory.
        unsafe { std::slice::from_raw_parts(xs.as_ptr().cast(), xs.len()) }
    })
}

/// `xs` as mutable float32, as [`f32_simd`].
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn f32_simd_mut<T: Element>(xs: &mut [T]) -> Option<&mut [f32]> {
    (T::DTYPE == DType::Float32 && simd::available()).then(|| {
        // SAFETY: as in `f32_simd`.
        unsafe { std::slice::from_raw_parts_mut(xs.as_mut_ptr().cast(), xs.len()) }
    })
}

/// Σ x over one span, compiled for the vector targets (the helpers above inline into it).
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq+avx2+avx+fma",
    "x86_64+avx2+avx+fma",
    "aarch64+neon"
))]
fn span_sum<T: Element + num_traits::Float>(xs: &[T]) -> f64 {
    #[cfg(target_arch = "x86_64")]
    if let Some(xs) = f32_simd(xs) {
        // SAFETY: f32_simd checked for AVX-512F.
        return unsafe { simd::sum(xs) };
    }
    sum64(xs)
}

/// Σ (x - m)² over one span (targets as [`span_sum`]).
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq+avx2+avx+fma",
    "x86_64+avx2+avx+fma",
    "aarch64+neon"
))]
fn span_sumsq<T: Element + num_traits::Float>(xs: &[T], m: f64) -> f64 {
    #[cfg(target_arch = "x86_64")]
    if let Some(xs) = f32_simd(xs) {
        // SAFETY: f32_simd checked for AVX-512F.
        return unsafe { simd::sumsq(xs, m as f32) };
    }
    sumsq64(xs, m)
}

/// `y = (x - m) r (w) (+ b)` over one row of a layer/RMS norm (targets as [`span_sum`]).
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq+avx2+avx+fma",
    "x86_64+avx2+avx+fma",
    "aarch64+neon"
))]
fn normalize_row<T: Element + num_traits::Float>(
    ys: &mut [T],
    xs: &[T],
    m: T,
    rr: T,
    w: Option<&[T]>,
    b: Option<&[T]>,
) {
    match (w, b) {
        (Some(w), Some(b)) => {
            for (((y, &xv), &wv), &bv) in ys.iter_mut().zip(xs).zip(w).zip(b) {
                *y = (xv - m) * rr * wv + bv;
            }
        }
        (Some(w), None) => {
            for ((y, &xv), &wv) in ys.iter_mut().zip(xs).zip(w) {
                *y = (xv - m) * rr * wv;
            }
        }
        (None, Some(b)) => {
            for ((y, &xv), &bv) in ys.iter_mut().zip(xs).zip(b) {
                *y = (xv - m) * rr + bv;
            }
        }
        (None, None) => {
            for (y, &xv) in ys.iter_mut().zip(xs) {
                *y = (xv - m) * rr;
            }
        }
    }
}

/// (Σ g, Σ g (x - m)) over one span (targets as [`span_sum`]; closures would not inherit them).
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq+avx2+avx+fma",
    "x86_64+avx2+avx+fma",
    "aarch64+neon"
))]
fn span_sums_gx<T: Element + num_traits::Float>(g: &[T], x: &[T], m: f64) -> (f64, f64) {
    #[cfg(target_arch = "x86_64")]
    if let (Some(g), Some(x)) = (f32_simd(g), f32_simd(x)) {
        // SAFETY: f32_simd checked for AVX-512F.
        return unsafe { simd::sums_gx(g, x, m as f32) };
    }
    sums_gx(g, x, m)
}

/// `out = a g + b x + c` over one span (targets as [`span_sum`]).
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq+avx2+avx+fma",
    "x86_64+avx2+avx+fma",
    "aarch64+neon"
))]
fn span_affine2<T: Element + num_traits::Float>(
    out: &mut [T],
    g: &[T],
    x: &[T],
    [a, b, c]: [T; 3],
) {
    for ((o, &gv), &xv) in out.iter_mut().zip(g).zip(x) {
        *o = a * gv + b * xv + c;
    }
}

/// Σ x.
#[inline(always)]
fn sum64<T: Element + num_traits::Float>(xs: &[T]) -> f64 {
    lane_sum(xs, |v| v)
}

/// Σ (x - m)², centred in `T` (the second pass of the two-pass variance).
#[inline(always)]
fn sumsq64<T: Element + num_traits::Float>(xs: &[T], m: f64) -> f64 {
    let m = T::from_f64(m);
    lane_sum(xs, |v| (v - m) * (v - m))
}

/// (Σ g, Σ g (x - m)) in `T` lanes per block, the blocks added in f64 (as [`lane_sum`]);
/// centring by the mean first keeps the second sum free of cancellation.
#[inline(always)]
fn sums_gx<T: Element + num_traits::Float>(g: &[T], x: &[T], m: f64) -> (f64, f64) {
    let m = T::from_f64(m);
    lane_sums2(g, x, |gv, _| gv, |gv, xv| gv * (xv - m))
}

fn rstd_of(var: f64, eps: f64) -> f64 {
    1.0 / (var + eps).sqrt()
}

// ----- forward kernel ------------------------------------------------------------------------

/// What the forward kernel returns: the output and, per group, mean, rstd and the biased
/// variance (f64).
struct Forward<T> {
    out: Vec<T>,
    mean: Vec<f64>,
    rstd: Vec<f64>,
    var: Vec<f64>,
}

/// Normalise `x` (`[n, c, l]`, contiguous). `fixed`: per-channel mean and rstd to use instead
/// of the batch's (batch norm in eval mode; Channel kind only).
fn forward_kernel<T: Element + num_traits::Float>(
    geo: Geo,
    opts: Opts,
    x: &[T],
    w: Option<&[T]>,
    b: Option<&[T]>,
    fixed: Option<(&[f64], &[f64])>,
) -> Result<Forward<T>> {
    let total = x.len();
    let groups = geo.groups();
    let mut out: Vec<T> = try_vec(total)?;
    // SAFETY (set_len): every element is written below, each by exactly one group.
    unsafe { out.set_len(total) };
    let mut mean = vec![0f64; groups];
    let mut rstd = vec![0f64; groups];
    let mut var = vec![0f64; groups];
    let m_count = geo.per_group() as f64;
    let ptrs = SendPtr((
        out.as_mut_ptr(),
        mean.as_mut_ptr(),
        rstd.as_mut_ptr(),
        var.as_mut_ptr(),
    ));
    let one_group = |s: usize| {
        let (po, pm, pr, pv) = ptrs.get();
        let (mu, r, v) = if let Some((fm, fr)) = fixed {
            (fm[s], fr[s], 0.0)
        } else {
            let mut sum = 0.0;
            if opts.center {
                for k in 0..geo.spans() {
                    let (off, _) = geo.span(s, k);
                    sum += span_sum(&x[off..off + geo.l]);
                }
            }
            let mu = sum / m_count;
            let mut sq = 0.0;
            for k in 0..geo.spans() {
                let (off, _) = geo.span(s, k);
                sq += span_sumsq(&x[off..off + geo.l], mu);
            }
            let v = sq / m_count;
            (mu, rstd_of(v, opts.eps), v)
        };
        // SAFETY: group s alone writes slot s of the statistics and its own spans of `out`.
        unsafe {
            *pm.add(s) = mu;
            *pr.add(s) = r;
            *pv.add(s) = v;
        }
        for k in 0..geo.spans() {
            let (off, ch) = geo.span(s, k);
            let xs = &x[off..off + geo.l];
            // SAFETY: spans of distinct groups are disjoint ranges of `out`.
            let ys = unsafe { std::slice::from_raw_parts_mut(po.add(off), geo.l) };
            if geo.kind == Kind::Rows {
                normalize_row(ys, xs, T::from_f64(mu), T::from_f64(r), w, b);
            } else {
                let wc = w.map_or(1.0, |w| Element::to_f64(w[ch]));
                let bc = b.map_or(0.0, |b| Element::to_f64(b[ch]));
                let scale = wc * r;
                let (sc, sh) = (T::from_f64(scale), T::from_f64(bc - mu * scale));
                for (y, &xv) in ys.iter_mut().zip(xs) {
                    *y = xv * sc + sh;
                }
            }
        }
    };
    if geo.kind == Kind::Rows {
        let (per, blocks) = geo.row_blocks();
        share_work(geo.threads(), blocks, &|blk| {
            for s in blk * per..((blk + 1) * per).min(groups) {
                one_group(s);
            }
        });
    } else {
        share_work(geo.threads(), groups, &one_group);
    }
    Ok(Forward {
        out,
        mean,
        rstd,
        var,
    })
}

// ----- backward kernel -----------------------------------------------------------------------

/// Gradients from the fused backward.
struct Grads<T> {
    dx: Option<Vec<T>>,
    dw: Option<Vec<T>>,
    db: Option<Vec<T>>,
}

/// One pass per group: `dx = rstd (g w - mean(g w) - x̂ mean(g w x̂))` (batch statistics) or
/// `dx = rstd g w` (fixed statistics), and the weight and bias gradients `Σ g x̂`, `Σ g`.
#[allow(clippy::too_many_arguments)]
fn backward_kernel<T: Element + num_traits::Float>(
    geo: Geo,
    opts: Opts,
    fixed: bool,
    x: &[T],
    g: &[T],
    w: Option<&[T]>,
    mean: &[f64],
    rstd: &[f64],
    want: [bool; 3],
) -> Result<Grads<T>> {
    let total = x.len();
    let groups = geo.groups();
    let m_count = geo.per_group() as f64;
    let mut dx: Vec<T> = if want[0] { try_vec(total)? } else { Vec::new() };
    if want[0] {
        // SAFETY: every element is written below, each by exactly one group.
        unsafe { dx.set_len(total) };
    }
    let dxp = SendPtr(dx.as_mut_ptr());
    let want_wb = want[1] || want[2];
    if geo.kind == Kind::Rows {
        let (dw, db) = rows_backward(geo, opts, x, g, w, mean, rstd, want, dxp)?;
        return Ok(Grads {
            dx: want[0].then_some(dx),
            dw,
            db,
        });
    }
    // Channel and Group kinds: per span (Σ g, Σ g x̂), then dx = A g + B x + C per span.
    let spans = geo.spans();
    let mut sg = vec![0f64; groups * spans];
    let mut sgx = vec![0f64; groups * spans];
    let sp = SendPtr((sg.as_mut_ptr(), sgx.as_mut_ptr()));
    share_work(geo.threads(), groups, &|s| {
        let (psg, psgx) = sp.get();
        let (mu, r) = (mean[s], rstd[s]);
        let mut sum_gw = 0.0;
        let mut sum_gwx = 0.0;
        for k in 0..spans {
            let (off, ch) = geo.span(s, k);
            let (a, b) = span_sums_gx(&g[off..off + geo.l], &x[off..off + geo.l], mu);
            let gxh = r * b;
            // SAFETY: slot (s, k) belongs to group s alone.
            unsafe {
                *psg.add(s * spans + k) = a;
                *psgx.add(s * spans + k) = gxh;
            }
            let wc = w.map_or(1.0, |w| Element::to_f64(w[ch]));
            sum_gw += wc * a;
            sum_gwx += wc * gxh;
        }
        if !want[0] {
            return;
        }
        let (bcoef, ccoef) = if fixed {
            (0.0, 0.0)
        } else {
            let bc = -r * r * sum_gwx / m_count;
            (bc, r * (mu * r * sum_gwx / m_count - sum_gw / m_count))
        };
        let (bt, ct) = (T::from_f64(bcoef), T::from_f64(ccoef));
        for k in 0..spans {
            let (off, ch) = geo.span(s, k);
            let wc = w.map_or(1.0, |w| Element::to_f64(w[ch]));
            let at = T::from_f64(r * wc);
            // SAFETY: spans of distinct groups are disjoint ranges of dx.
            let out = unsafe { std::slice::from_raw_parts_mut(dxp.get().add(off), geo.l) };
            span_affine2(
                out,
                &g[off..off + geo.l],
                &x[off..off + geo.l],
                [at, bt, ct],
            );
        }
    });
    let mut dw = vec![0f64; geo.c];
    let mut db = vec![0f64; geo.c];
    if want_wb {
        for s in 0..groups {
            for k in 0..spans {
                let (_, ch) = geo.span(s, k);
                dw[ch] += sgx[s * spans + k];
                db[ch] += sg[s * spans + k];
            }
        }
    }
    Ok(Grads {
        dx: want[0].then_some(dx),
        dw: want[1].then(|| dw.into_iter().map(T::from_f64).collect()),
        db: want[2].then(|| db.into_iter().map(T::from_f64).collect()),
    })
}

/// One row of the layer/RMS norm backward.
struct RowGrad<'a, T> {
    x: &'a [T],
    g: &'a [T],
    w: Option<&'a [T]>,
    mean: T,
    rstd: T,
    center: bool,
}

/// The weight and bias partial sums (`part`: `Σ g x̂`, `Σ g`), and `dx = rstd (g w - mean(g w)
/// - x̂ mean(g w x̂))` into `out`, for one row; `gw` is scratch of the row's length. Every loop
/// is one zipped pass the compiler vectorises (compiled for AVX2+FMA and AVX-512 too, picked at
/// run time); only the first pass over the row reads it from beyond L1.
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq+avx2+avx+fma",
    "x86_64+avx2+avx+fma",
    "aarch64+neon"
))]
fn row_grad<T: Element + num_traits::Float>(
    row: &RowGrad<'_, T>,
    part: Option<(&mut [T], &mut [T])>,
    out: Option<&mut [T]>,
    gw: &mut [T],
) {
    let (m, r) = (row.mean, row.rstd);
    if let Some((pw, pb)) = part {
        for (((a, bb), &gv), &xv) in pw.iter_mut().zip(pb.iter_mut()).zip(row.g).zip(row.x) {
            *a = *a + gv * ((xv - m) * r);
            *bb = *bb + gv;
        }
    }
    let Some(out) = out else { return };
    let gws: &[T] = match row.w {
        Some(w) => {
            for ((o, &gv), &wv) in gw.iter_mut().zip(row.g).zip(w) {
                *o = gv * wv;
            }
            gw
        }
        None => row.g,
    };
    // Σ g w and Σ g w (x - m); mean(g w x̂) = r Σ g w (x - m) / n.
    let (s1, s2) = lane_sums2(gws, row.x, |a, _| a, |a, xv| a * (xv - m));
    let n = row.x.len() as f64;
    let rf = Element::to_f64(r);
    let s1 = if row.center { s1 } else { 0.0 };
    let (c1, k) = (T::from_f64(s1 / n), T::from_f64(rf * rf * s2 / n));
    for ((o, &gv), &xv) in out.iter_mut().zip(gws).zip(row.x) {
        *o = r * (gv - c1 - (xv - m) * k);
    }
}

/// Backward of the Rows kind (layer and RMS norm), written into `dxp` when `want[0]`: per
/// row `x̂`, `g w` and their two sums, then `dx`; the weight and bias gradients are summed per
/// block of rows in `T` and across blocks in f64, in block order.
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
fn rows_backward<T: Element + num_traits::Float>(
    geo: Geo,
    opts: Opts,
    x: &[T],
    g: &[T],
    w: Option<&[T]>,
    mean: &[f64],
    rstd: &[f64],
    want: [bool; 3],
    dxp: SendPtr<*mut T>,
) -> Result<(Option<Vec<T>>, Option<Vec<T>>)> {
    let (per, blocks) = geo.row_blocks();
    let (l, groups) = (geo.l, geo.groups());
    let want_wb = want[1] || want[2];
    let mut part: Vec<T> = if want_wb {
        vec![T::zero(); blocks * 2 * l]
    } else {
        Vec::new()
    };
    let pp = SendPtr(part.as_mut_ptr());
    share_work(geo.threads(), blocks, &|blk| {
        let mut gw: Vec<T> = vec![T::zero(); l];
        for s in blk * per..((blk + 1) * per).min(groups) {
            let off = s * l;
            let part = want_wb.then(|| {
                // SAFETY: block blk alone writes its 2 l partial sums.
                let p = unsafe { std::slice::from_raw_parts_mut(pp.get().add(blk * 2 * l), 2 * l) };
                p.split_at_mut(l)
            });
            // SAFETY: row s is written by this block alone.
            let out =
                want[0].then(|| unsafe { std::slice::from_raw_parts_mut(dxp.get().add(off), l) });
            #[cfg(target_arch = "x86_64")]
            if let (Some(xs), Some(gs)) = (f32_simd(&x[off..off + l]), f32_simd(&g[off..off + l])) {
                let row = simd::Row {
                    x: xs,
                    g: gs,
                    w: w.and_then(f32_simd),
                    mean: mean[s] as f32,
                    rstd: rstd[s] as f32,
                    center: opts.center,
                };
                let part = part.map(|(a, b)| (f32_simd_mut(a), f32_simd_mut(b)));
                let part = part.and_then(|(a, b)| a.zip(b));
                let (out, gw) = (out.and_then(f32_simd_mut), f32_simd_mut(&mut gw));
                if let Some(gw) = gw {
                    // SAFETY: f32_simd checked for AVX-512F; every slice is a row long.
                    unsafe { simd::row_grad(&row, part, out, gw) };
                }
                continue;
            }
            let row = RowGrad {
                x: &x[off..off + l],
                g: &g[off..off + l],
                w,
                mean: T::from_f64(mean[s]),
                rstd: T::from_f64(rstd[s]),
                center: opts.center,
            };
            row_grad(&row, part, out, &mut gw);
        }
    });
    if !want_wb {
        return Ok((None, None));
    }
    // Across blocks in f64, in block order, columns shared among threads (a serial sum here
    // was a tenth of the threaded backward).
    const COLS: usize = 256;
    let width = 2 * l;
    let mut tot = vec![0f64; width];
    let tp = SendPtr(tot.as_mut_ptr());
    let threads = if part.len() >= PAR_MIN { helpers() } else { 0 };
    share_work(threads, width.div_ceil(COLS), &|task| {
        let (c0, c1) = (task * COLS, ((task + 1) * COLS).min(width));
        // SAFETY: columns c0..c1 of `tot` belong to this task alone.
        let acc = unsafe { std::slice::from_raw_parts_mut(tp.get().add(c0), c1 - c0) };
        for p in part.chunks_exact(width.max(1)) {
            for (a, &v) in acc.iter_mut().zip(&p[c0..c1]) {
                *a += Element::to_f64(v);
            }
        }
    });
    let (sw, sb) = tot.split_at(l);
    let dw = want[1].then(|| sw.iter().map(|&v| T::from_f64(v)).collect());
    let db = want[2].then(|| sb.iter().map(|&v| T::from_f64(v)).collect());
    Ok((dw, db))
}

// ----- differentiable backward ---------------------------------------------------------------

/// The backward in tensor ops (for `create_graph`): statistics recomputed from `x` so that
/// their dependence on the input is differentiated too. `fixed`: per-channel mean and rstd
/// (eval-mode batch norm), constants.
#[allow(clippy::too_many_arguments)]
fn backward_graph(
    geo: Geo,
    opts: Opts,
    x: &Tensor,
    g: &Tensor,
    w: Option<&Tensor>,
    fixed: Option<(&Tensor, &Tensor)>,
    bias_shape: &[usize],
    want: [bool; 3],
) -> Result<[Option<Tensor>; 3]> {
    let aff = geo.affine_view();
    let stat = geo.stat_view();
    let sd = geo.stat_dims();
    let xa = x.reshape(&aff)?;
    let ga = g.reshape(&aff)?;
    let wp = w.map(|w| w.reshape(&geo.param_view())).transpose()?;
    // x̂ in the affine view, and rstd (stat view) for dx.
    let (xhat, rstd_s) = match fixed {
        Some((m, r)) => {
            let (m, r) = (m.reshape(&[geo.c, 1])?, r.reshape(&[geo.c, 1])?);
            (xa.sub(&m)?.mul(&r)?, r)
        }
        None => {
            let xs = x.reshape(&stat)?;
            let xc = if opts.center {
                xs.sub(&xs.mean_dims(&sd, true)?)?
            } else {
                xs
            };
            let r = xc
                .mul(&xc)?
                .mean_dims(&sd, true)?
                .add_scalar(opts.eps)?
                .rsqrt()?;
            (xc.mul(&r)?.reshape(&aff)?, r)
        }
    };
    let mut res: [Option<Tensor>; 3] = [None, None, None];
    if want[0] {
        let gw = match &wp {
            Some(w) => ga.mul(w)?,
            None => ga.clone(),
        };
        let dx = match fixed {
            Some(_) => gw.mul(&rstd_s)?,
            None => {
                let gws = gw.reshape(&stat)?;
                let xhs = xhat.reshape(&stat)?;
                let mut inner = gws.sub(&xhs.mul(&gws.mul(&xhs)?.mean_dims(&sd, true)?)?)?;
                if opts.center {
                    inner = inner.sub(&gws.mean_dims(&sd, true)?)?;
                }
                inner.mul(&rstd_s)?
            }
        };
        res[0] = Some(dx.reshape(x.shape())?);
    }
    if let Some(w) = w {
        if want[1] {
            let dw = ga.mul(&xhat)?.sum_dims(&geo.param_reduce(), false)?;
            res[1] = Some(dw.reshape(w.shape())?);
        }
    }
    if want[2] {
        res[2] = Some(
            ga.sum_dims(&geo.param_reduce(), false)?
                .reshape(bias_shape)?,
        );
    }
    Ok(res)
}

// ----- the op --------------------------------------------------------------------------------

fn check_float(x: &Tensor, kernel: &str) -> Result<()> {
    if x.dtype().is_float() {
        Ok(())
    } else {
        Err(Error::not_implemented(format!(
            "\"{kernel}\" not implemented for '{}'",
            crate::tensor::scalar_type_name(x.dtype())
        )))
    }
}

fn check_param_dtype(x: &Tensor, p: Option<&Tensor>) -> Result<()> {
    match p {
        Some(p) if p.dtype() != x.dtype() => Err(Error::runtime(format!(
            "mixed dtype (CPU): expect parameter to have scalar type of {}",
            crate::tensor::scalar_type_name(x.dtype())
        ))),
        _ => Ok(()),
    }
}

/// Result of [`normalize`]: the output and the f64 statistics (per group).
struct Normalized {
    out: Tensor,
    var: Vec<f64>,
    mean: Vec<f64>,
}

fn typed_forward<T: Element + num_traits::Float>(
    geo: Geo,
    opts: Opts,
    x: &Tensor,
    w: Option<&Tensor>,
    b: Option<&Tensor>,
    fixed: Option<(&[f64], &[f64])>,
) -> Result<Forward<T>> {
    let wv = w.map(|w| w.to_vec::<T>()).transpose()?;
    let bv = b.map(|b| b.to_vec::<T>()).transpose()?;
    x.with_contiguous_slice::<T, _>(|xs| {
        forward_kernel(geo, opts, xs, wv.as_deref(), bv.as_deref(), fixed)
    })?
}

#[allow(clippy::too_many_arguments)]
fn typed_backward<T: Element + num_traits::Float>(
    geo: Geo,
    opts: Opts,
    fixed: bool,
    x: &Tensor,
    g: &Tensor,
    w: Option<&Tensor>,
    mean: &Tensor,
    rstd: &Tensor,
    want: [bool; 3],
) -> Result<Grads<T>> {
    let wv = w.map(|w| w.to_vec::<T>()).transpose()?;
    let (mean, rstd) = (mean.to_vec::<f64>()?, rstd.to_vec::<f64>()?);
    let g = g.contiguous()?;
    x.with_contiguous_slice::<T, _>(|xs| {
        g.with_contiguous_slice::<T, _>(|gs| {
            backward_kernel(geo, opts, fixed, xs, gs, wv.as_deref(), &mean, &rstd, want)
        })
    })??
}

fn vec_tensor<T: Element>(v: Option<Vec<T>>, shape: &[usize]) -> Result<Option<Tensor>> {
    v.map(|v| Tensor::from_vec(v, shape)).transpose()
}

/// Normalise `x` with geometry `geo` and record the node. `fixed`: per-channel mean and rstd
/// (eval mode) instead of the batch's.
fn normalize(
    geo: Geo,
    opts: Opts,
    x: &Tensor,
    w: Option<&Tensor>,
    b: Option<&Tensor>,
    fixed: Option<(Vec<f64>, Vec<f64>)>,
) -> Result<Normalized> {
    let x = x.contiguous()?;
    let fx = fixed.as_ref().map(|(m, r)| (m.as_slice(), r.as_slice()));
    let (out, mean, rstd, var) = {
        let _g = GradModeGuard::new(false);
        let xd = x.detach();
        match x.dtype() {
            DType::Float32 => {
                let f = typed_forward::<f32>(geo, opts, &xd, w, b, fx)?;
                (Tensor::from_vec(f.out, x.shape())?, f.mean, f.rstd, f.var)
            }
            _ => {
                let f = typed_forward::<f64>(geo, opts, &xd, w, b, fx)?;
                (Tensor::from_vec(f.out, x.shape())?, f.mean, f.rstd, f.var)
            }
        }
    };
    let mut inputs: Vec<&Tensor> = vec![&x];
    inputs.extend(w);
    inputs.extend(b);
    if needs_grad(&inputs) {
        let mean_t = Tensor::from_vec(mean.clone(), &[mean.len()])?;
        let rstd_t = Tensor::from_vec(rstd.clone(), &[rstd.len()])?;
        let mut saved: Vec<&Tensor> = vec![&x, &mean_t, &rstd_t];
        saved.extend(w);
        let has_w = w.is_some();
        let has_b = b.is_some();
        let wshape = w.map_or_else(Vec::new, |w| w.shape().to_vec());
        let bshape = b.map_or_else(Vec::new, |b| b.shape().to_vec());
        let is_fixed = fixed.is_some();
        record(opts.name, &inputs, &[&out], &saved, true, move |gr, s| {
            let (x, mean, rstd) = (&s[0], &s[1], &s[2]);
            let w = if has_w { Some(&s[3]) } else { None };
            let want = [
                wants_grad(0),
                has_w && wants_grad(1),
                has_b && wants_grad(1 + has_w as usize),
            ];
            let g = &gr[0];
            let mut all: Vec<&Tensor> = vec![g, x];
            all.extend(w);
            let [dx, dw, db] = if needs_grad(&all) || g.dtype() != x.dtype() {
                let fixed_t = if is_fixed {
                    Some((mean.to_dtype(x.dtype())?, rstd.to_dtype(x.dtype())?))
                } else {
                    None
                };
                let fr = fixed_t.as_ref().map(|(m, r)| (m, r));
                backward_graph(geo, opts, x, g, w, fr, &bshape, want)?
            } else {
                let (pshape, bshape) = (&wshape, &bshape);
                let (dx, dw, db) = match x.dtype() {
                    DType::Float32 => {
                        let r =
                            typed_backward::<f32>(geo, opts, is_fixed, x, g, w, mean, rstd, want)?;
                        (
                            vec_tensor(r.dx, x.shape())?,
                            vec_tensor(r.dw, pshape)?,
                            vec_tensor(r.db, bshape)?,
                        )
                    }
                    _ => {
                        let r =
                            typed_backward::<f64>(geo, opts, is_fixed, x, g, w, mean, rstd, want)?;
                        (
                            vec_tensor(r.dx, x.shape())?,
                            vec_tensor(r.dw, pshape)?,
                            vec_tensor(r.db, bshape)?,
                        )
                    }
                };
                [dx, dw, db]
            };
            let mut res = vec![dx];
            if has_w {
                res.push(dw);
            }
            if has_b {
                res.push(db);
            }
            Ok(res)
        })?;
    }
    Ok(Normalized { out, var, mean })
}

// ----- public API ----------------------------------------------------------------------------

/// torch's `finfo(dtype).eps`, the default `eps` of [`rms_norm`].
pub fn finfo_eps(dtype: DType) -> f64 {
    match dtype {
        DType::Float16 => 0.0009765625,
        DType::BFloat16 => 0.0078125,
        DType::Float32 => f32::EPSILON as f64,
        _ => f64::EPSILON,
    }
}

fn check_normalized_shape(
    input: &Tensor,
    normalized_shape: &[usize],
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    rms: bool,
) -> Result<()> {
    let ns = fmt_shape(normalized_shape);
    if normalized_shape.is_empty() {
        return Err(Error::runtime(format!("Expected normalized_shape to be at least 1-dimensional, i.e., containing at least one element, but got normalized_shape = {ns}")));
    }
    for (name, p) in [("weight", weight), ("bias", bias)] {
        if let Some(p) = p {
            if p.shape() != normalized_shape {
                return Err(Error::runtime(format!("Expected {name} to be of same shape as normalized_shape, but got {name} of shape {} and normalized_shape = {ns}", fmt_shape(p.shape()))));
            }
        }
    }
    let k = normalized_shape.len();
    let d = input.dim();
    if d < k || &input.shape()[d - k..] != normalized_shape {
        let inner = normalized_shape
            .iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        let star = if rms { "*" } else { "*, " };
        return Err(Error::runtime(format!(
            "Given normalized_shape={ns}, expected input with shape [{star}{inner}], but got input of size{}",
            fmt_shape(input.shape())
        )));
    }
    check_param_dtype(input, weight)?;
    check_param_dtype(input, bias)
}

/// layer_norm (`center`) or rms_norm inside vmap, from batch-aware ops (the fused kernels read
/// rows of elements and keep per-row statistics): `(x - mean) / sqrt(var + eps) * w + b` over
/// the trailing `k` dims, with the biased variance (or the mean square for rms_norm). `None`
/// when nothing is batched.
fn rows_batched(
    x: &Tensor,
    k: usize,
    w: Option<&Tensor>,
    b: Option<&Tensor>,
    eps: f64,
    center: bool,
) -> Option<Result<Tensor>> {
    let batched =
        x.is_batched() || w.is_some_and(Tensor::is_batched) || b.is_some_and(Tensor::is_batched);
    if !batched {
        return None;
    }
    let run = || -> Result<Tensor> {
        let dims: Vec<i64> = (x.dim() - k..x.dim()).map(|d| d as i64).collect();
        let xc = if center {
            x.sub(&x.mean_dims(&dims, true)?)?
        } else {
            x.clone()
        };
        let var = xc.mul(&xc)?.mean_dims(&dims, true)?;
        let mut y = xc.mul(&var.add_scalar(eps)?.rsqrt()?)?;
        if let Some(w) = w {
            y = y.mul(w)?;
        }
        match b {
            Some(b) => y.add(b),
            None => Ok(y),
        }
    };
    Some(run())
}

fn rows_geo(input: &Tensor, normalized_shape: &[usize]) -> Geo {
    let l: usize = normalized_shape.iter().product();
    let k = normalized_shape.len();
    let n: usize = input.shape()[..input.dim() - k].iter().product();
    Geo {
        kind: Kind::Rows,
        n,
        c: 1,
        l,
    }
}

/// Layer normalisation over the trailing `normalized_shape` dims (biased variance), then
/// `* weight + bias` elementwise (each of shape `normalized_shape`, optional). Node
/// `NativeLayerNormBackward0`.
pub fn layer_norm(
    input: &Tensor,
    normalized_shape: &[usize],
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    eps: f64,
) -> Result<Tensor> {
    if let Some(r) = Tensor::lift_half([input], [weight, bias], |[x], [w, b]| {
        layer_norm(x, normalized_shape, w, b, eps)
    }) {
        return r;
    }
    check_normalized_shape(input, normalized_shape, weight, bias, false)?;
    check_float(input, "LayerNormKernelImpl")?;
    if let Some(r) = rows_batched(input, normalized_shape.len(), weight, bias, eps, true) {
        return r;
    }
    let geo = rows_geo(input, normalized_shape);
    let opts = Opts {
        eps,
        center: true,
        name: "NativeLayerNormBackward0",
    };
    Ok(normalize(geo, opts, input, weight, bias, None)?.out)
}

/// RMS normalisation over the trailing `normalized_shape` dims: `x / sqrt(mean(x²) + eps) *
/// weight`. `eps` None is torch's default, `finfo(dtype).eps`. torch composes it, so its node
/// is named as torch's last op, `MulBackward0`.
pub fn rms_norm(
    input: &Tensor,
    normalized_shape: &[usize],
    weight: Option<&Tensor>,
    eps: Option<f64>,
) -> Result<Tensor> {
    // The default eps is the input's own type's (a half input's, not float32's).
    let eps = eps.unwrap_or_else(|| finfo_eps(input.dtype()));
    if let Some(r) = Tensor::lift_half([input], [weight], |[x], [w]| {
        rms_norm(x, normalized_shape, w, Some(eps))
    }) {
        return r;
    }
    check_normalized_shape(input, normalized_shape, weight, None, true)?;
    check_float(input, "rms_norm")?;
    if let Some(r) = rows_batched(input, normalized_shape.len(), weight, None, eps, false) {
        return r;
    }
    let geo = rows_geo(input, normalized_shape);
    let opts = Opts {
        eps,
        center: false,
        name: "MulBackward0",
    };
    Ok(normalize(geo, opts, input, weight, None, None)?.out)
}

fn channel_geo(input: &Tensor, kind: Kind) -> Geo {
    let s = input.shape();
    Geo {
        kind,
        n: s[0],
        c: s[1],
        l: s[2..].iter().product(),
    }
}

fn check_vector(name: &str, p: Option<&Tensor>, expected: usize) -> Result<()> {
    if let Some(p) = p {
        if p.numel() != expected {
            return Err(Error::runtime(format!(
                "{name} should contain {expected} elements not {}",
                p.numel()
            )));
        }
    }
    Ok(())
}

/// Group normalisation: the channels of `input` (`(N, C, *)`) split into `num_groups` groups,
/// each `(sample, group)` normalised over its channels and space, then per-channel `weight`
/// and `bias` (shape `(C,)`). Node `NativeGroupNormBackward0`.
pub fn group_norm(
    input: &Tensor,
    num_groups: i64,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    eps: f64,
) -> Result<Tensor> {
    if let Some(r) = Tensor::lift_half([input], [weight, bias], |[x], [w, b]| {
        group_norm(x, num_groups, w, b, eps)
    }) {
        return r;
    }
    if input.dim() < 2 {
        return Err(Error::runtime(format!(
            "Expected at least 2 dimensions for input tensor but received {}",
            input.dim()
        )));
    }
    if num_groups <= 0 {
        return Err(Error::runtime(format!(
            "Expected num groups to be greater than 0, got {num_groups}"
        )));
    }
    let geo = channel_geo(input, Kind::Group(num_groups as usize));
    let g = num_groups as usize;
    if !geo.c.is_multiple_of(g) {
        return Err(Error::runtime(format!("Expected number of channels in input to be divisible by num_groups, but got input of shape {} and num_groups={num_groups}", fmt_shape(input.shape()))));
    }
    for (name, p) in [("weight", weight), ("bias", bias)] {
        if let Some(p) = p {
            if p.dim() != 1 || p.numel() != geo.c {
                return Err(Error::runtime(format!("Expected {name} to be a vector of size equal to the number of channels in input, but got {name} of shape {} and input of shape {}", fmt_shape(p.shape()), fmt_shape(input.shape()))));
            }
        }
    }
    if geo.n * geo.c > 0 && geo.l == 0 {
        return Err(Error::runtime(format!(
            "Expected HxW to be greater than 0, got {}",
            geo.l
        )));
    }
    check_float(input, "GroupNormKernelImpl")?;
    check_param_dtype(input, weight)?;
    check_param_dtype(input, bias)?;
    if any_batched(input, &[weight, bias]) {
        // Each sample's groups keep their own statistics: (N, G, rest) per sample.
        let grouped = input.reshape(&[geo.n, g, geo.c / g * geo.l])?;
        let (y, _, _) = standardize(&grouped, &[2], eps)?;
        return affine(&y.reshape(input.shape())?, weight, bias);
    }
    let opts = Opts {
        eps,
        center: true,
        name: "NativeGroupNormBackward0",
    };
    Ok(normalize(geo, opts, input, weight, bias, None)?.out)
}

// ----- inside vmap --------------------------------------------------------------------------
// The fused kernels read a whole batch at once; inside vmap the normalisations are composed of
// reductions along dims and elementwise ops, which batch (each sample keeps its statistics)
// and carry their own backward rules.

/// Whether `x` or any of `params` is batched (inside vmap).
fn any_batched(x: &Tensor, params: &[Option<&Tensor>]) -> bool {
    x.is_batched() || params.iter().flatten().any(|p| p.is_batched())
}

/// `(x - mean) / sqrt(var + eps)` with the mean and biased variance over `dims` (kept), and
/// those statistics.
fn standardize(x: &Tensor, dims: &[i64], eps: f64) -> Result<(Tensor, Tensor, Tensor)> {
    let mean = x.mean_dims(dims, true)?;
    let centered = x.sub(&mean)?;
    let var = centered.mul(&centered)?.mean_dims(dims, true)?;
    let y = centered.mul(&var.add_scalar(eps)?.rsqrt()?)?;
    Ok((y, mean, var))
}

/// A per-channel vector shaped to broadcast along dim 1 of an `nd`-dim tensor.
fn per_channel(p: &Tensor, nd: usize) -> Result<Tensor> {
    let mut shape = vec![p.numel()];
    shape.extend(std::iter::repeat_n(1, nd.saturating_sub(2)));
    p.reshape(&shape)
}

/// `y * weight + bias`, per channel.
fn affine(y: &Tensor, weight: Option<&Tensor>, bias: Option<&Tensor>) -> Result<Tensor> {
    let mut out = y.clone();
    if let Some(w) = weight {
        out = out.mul(&per_channel(w, y.dim())?)?;
    }
    if let Some(b) = bias {
        out = out.add(&per_channel(b, y.dim())?)?;
    }
    Ok(out)
}

/// `x` normalised by the running statistics `[mean, var]` (eval mode; they get no gradient).
fn with_running(x: &Tensor, stats: &[Option<&Tensor>; 2], eps: f64) -> Result<Tensor> {
    let [Some(rm), Some(rv)] = *stats else {
        return Err(Error::runtime(
            "Expected running_mean and running_var to be defined when use_input_stats is false",
        ));
    };
    let (rm, rv) = (
        per_channel(&rm.detach(), x.dim())?,
        per_channel(&rv.detach(), x.dim())?,
    );
    x.sub(&rm)?.mul(&rv.add_scalar(eps)?.rsqrt()?)
}

/// The running statistics updated in place from a batch's `mean` and biased `var` over `m`
/// elements per channel, as [`update_running`]. torch refuses running statistics that are
/// shared by the samples (they would be written once per sample).
fn update_running_batched(
    x: &Tensor,
    stats: &[Option<&Tensor>; 2],
    mean: &Tensor,
    var: &Tensor,
    m: f64,
    momentum: f64,
) -> Result<()> {
    if stats.iter().flatten().any(|s| !s.is_batched()) && x.is_batched() {
        return Err(Error::runtime(
            "Batch norm got a batched tensor as input while the running_mean or running_var, which will be updated in place, were not batched.\nIf you are using a module and do not need eval mode, please set `track_running_stats` to be False.If you are using a prebuilt module and do not need eval mode, please see the functorch website for resources on how to patch your module to work with vmap",
        ));
    }
    let _g = GradModeGuard::new(false);
    let unbiased = var.detach().mul_scalar(m / (m - 1.0))?;
    for (dst, src) in stats.iter().zip([mean.detach(), unbiased]) {
        if let Some(dst) = dst {
            let src = src.reshape(dst.shape())?;
            dst.copy_(
                &dst.mul_scalar(1.0 - momentum)?
                    .add(&src.mul_scalar(momentum)?)?,
            )?;
        }
    }
    Ok(())
}

/// `dst = (1 - momentum) dst + momentum src`, in place without a graph (the version counter
/// is bumped like any in-place write).
fn update_running(dst: &Tensor, src: &[f64], momentum: f64) -> Result<()> {
    let _g = GradModeGuard::new(false);
    let old = dst.to_vec::<f64>()?;
    let new: Vec<f64> = old
        .iter()
        .zip(src)
        .map(|(&o, &s)| (1.0 - momentum) * o + momentum * s)
        .collect();
    let t = Tensor::from_vec(new, dst.shape())?;
    dst.copy_(&t)
}

fn check_running(
    input: &Tensor,
    running_mean: Option<&Tensor>,
    running_var: Option<&Tensor>,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    training: bool,
    c: usize,
) -> Result<()> {
    check_vector("running_mean", running_mean, c)?;
    if running_mean.is_none() && !training {
        return Err(Error::runtime(
            "running_mean must be defined in evaluation mode",
        ));
    }
    check_vector("running_var", running_var, c)?;
    if running_var.is_none() && !training {
        return Err(Error::runtime(
            "running_var must be defined in evaluation mode",
        ));
    }
    check_vector("weight", weight, c)?;
    check_vector("bias", bias, c)?;
    if input.dim() < 2 {
        return Err(Error::index(
            "Dimension out of range (expected to be in range of [-1, 0], but got 1)",
        ));
    }
    check_float(input, "batch_norm")?;
    for p in [running_mean, running_var, weight, bias] {
        check_param_dtype(input, p)?;
    }
    Ok(())
}

/// Batch normalisation of `input` (`(N, C, *)`) per channel. Training: the batch's mean and
/// biased variance normalise, and the running statistics (when given) are updated in place,
/// `running = (1 - momentum) running + momentum stat` with the unbiased variance for
/// `running_var` (no graph recorded for the update). Eval: the running statistics normalise.
/// Node `NativeBatchNormBackward0`.
#[allow(clippy::too_many_arguments)]
pub fn batch_norm(
    input: &Tensor,
    running_mean: Option<&Tensor>,
    running_var: Option<&Tensor>,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    training: bool,
    momentum: f64,
    eps: f64,
) -> Result<Tensor> {
    // Half running statistics are read as float32 copies and written back after an update.
    if let Some(r) = Tensor::lift_half(
        [input],
        [weight, bias, running_mean, running_var],
        |[x], [w, b, rm, rv]| {
            let out = batch_norm(x, rm, rv, w, b, training, momentum, eps)?;
            let _g = GradModeGuard::new(false);
            for (wide, own) in [(rm, running_mean), (rv, running_var)] {
                if let (Some(wide), Some(own)) = (wide, own) {
                    if training && !wide.same(own) {
                        own.copy_(wide)?;
                    }
                }
            }
            Ok(out)
        },
    ) {
        return r;
    }
    let c = if input.dim() >= 2 {
        input.shape()[1]
    } else {
        0
    };
    check_running(input, running_mean, running_var, weight, bias, training, c)?;
    let geo = channel_geo(input, Kind::Channel);
    let stats = [running_mean, running_var];
    if any_batched(input, &[weight, bias, running_mean, running_var]) {
        if !training {
            return affine(&with_running(input, &stats, eps)?, weight, bias);
        }
        // Each sample's batch keeps its own statistics, per channel over (N, *).
        let dims: Vec<i64> = (0..input.dim() as i64).filter(|&d| d != 1).collect();
        let (y, mean, var) = standardize(input, &dims, eps)?;
        let m = geo.per_group() as f64;
        update_running_batched(input, &stats, &mean, &var, m, momentum)?;
        return affine(&y, weight, bias);
    }
    let opts = Opts {
        eps,
        center: true,
        name: "NativeBatchNormBackward0",
    };
    if training {
        let r = normalize(geo, opts, input, weight, bias, None)?;
        let m = geo.per_group() as f64;
        if let Some(rm) = running_mean {
            update_running(rm, &r.mean, momentum)?;
        }
        if let Some(rv) = running_var {
            let unbiased: Vec<f64> = r.var.iter().map(|v| v * m / (m - 1.0)).collect();
            update_running(rv, &unbiased, momentum)?;
        }
        Ok(r.out)
    } else {
        let fixed = eval_stats(running_mean, running_var, eps)?;
        Ok(normalize(geo, opts, input, weight, bias, Some(fixed))?.out)
    }
}

fn eval_stats(
    running_mean: Option<&Tensor>,
    running_var: Option<&Tensor>,
    eps: f64,
) -> Result<(Vec<f64>, Vec<f64>)> {
    let (rm, rv) =
        match (running_mean, running_var) {
            (Some(m), Some(v)) => (m, v),
            _ => return Err(Error::runtime(
                "Expected running_mean and running_var to be defined when use_input_stats is false",
            )),
        };
    let m = rm.to_vec::<f64>()?;
    let r = rv
        .to_vec::<f64>()?
        .into_iter()
        .map(|v| rstd_of(v, eps))
        .collect();
    Ok((m, r))
}

/// Instance normalisation of `input` (`(N, C, *)`): each `(sample, channel)` normalised over
/// space, per-channel `weight` and `bias`. With `use_input_stats` false the running
/// statistics normalise instead; otherwise they are updated in place with the mean over the
/// batch of the per-instance statistics (as torch). Like torch, the op is a batch norm of the
/// input seen as `(1, N*C, *)`: node `NativeBatchNormBackward0` under a view.
#[allow(clippy::too_many_arguments)]
pub fn instance_norm(
    input: &Tensor,
    running_mean: Option<&Tensor>,
    running_var: Option<&Tensor>,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    use_input_stats: bool,
    momentum: f64,
    eps: f64,
) -> Result<Tensor> {
    if let Some(r) = Tensor::lift_half(
        [input],
        [weight, bias, running_mean, running_var],
        |[x], [w, b, rm, rv]| {
            let out = instance_norm(x, rm, rv, w, b, use_input_stats, momentum, eps)?;
            let _g = GradModeGuard::new(false);
            for (wide, own) in [(rm, running_mean), (rv, running_var)] {
                if let (Some(wide), Some(own)) = (wide, own) {
                    if use_input_stats && !wide.same(own) {
                        own.copy_(wide)?;
                    }
                }
            }
            Ok(out)
        },
    ) {
        return r;
    }
    if input.dim() < 2 {
        return Err(Error::index(
            "Dimension out of range (expected to be in range of [-1, 0], but got 1)",
        ));
    }
    let s = input.shape();
    let (n, c) = (s[0], s[1]);
    // torch repeats the per-channel tensors n times, so it names n*c elements.
    for (name, p) in [
        ("running_mean", running_mean),
        ("running_var", running_var),
        ("weight", weight),
        ("bias", bias),
    ] {
        if let Some(p) = p {
            if p.numel() * n != n * c {
                return Err(Error::runtime(format!(
                    "{name} should contain {} elements not {}",
                    n * c,
                    p.numel() * n
                )));
            }
        }
    }
    check_float(input, "batch_norm")?;
    for p in [running_mean, running_var, weight, bias] {
        check_param_dtype(input, p)?;
    }
    let stats = [running_mean, running_var];
    if any_batched(input, &[weight, bias, running_mean, running_var]) {
        if !use_input_stats {
            return affine(&with_running(input, &stats, eps)?, weight, bias);
        }
        // Each sample's instances keep their own statistics, over space; the running
        // statistics take their mean over N.
        let dims: Vec<i64> = (2..input.dim() as i64).collect();
        let (y, mean, var) = standardize(input, &dims, eps)?;
        let m: usize = s[2..].iter().product();
        let over_n = |t: &Tensor| t.mean_dims(&[0], true);
        update_running_batched(
            input,
            &stats,
            &over_n(&mean)?,
            &over_n(&var)?,
            m as f64,
            momentum,
        )?;
        return affine(&y, weight, bias);
    }
    let mut flat = vec![1, n * c];
    flat.extend_from_slice(&s[2..]);
    let x1 = input.reshape(&flat)?;
    let opts = Opts {
        eps,
        center: true,
        name: "NativeBatchNormBackward0",
    };
    let out = if use_input_stats {
        let geo = channel_geo(input, Kind::Group(c));
        let r = normalize(geo, opts, &x1, weight, bias, None)?;
        let m = geo.l as f64;
        let avg = |v: &[f64]| -> Vec<f64> {
            (0..c)
                .map(|ch| (0..n).map(|i| v[i * c + ch]).sum::<f64>() / n as f64)
                .collect()
        };
        if let Some(rm) = running_mean {
            update_running(rm, &avg(&r.mean), momentum)?;
        }
        if let Some(rv) = running_var {
            let unbiased: Vec<f64> = r.var.iter().map(|v| v * m / (m - 1.0)).collect();
            update_running(rv, &avg(&unbiased), momentum)?;
        }
        r.out
    } else {
        let (m, r) = eval_stats(running_mean, running_var, eps)?;
        // Eval: one channel per (sample, channel) of the flat view, statistics repeated.
        let rep = |v: &[f64]| -> Vec<f64> { (0..n).flat_map(|_| v.iter().copied()).collect() };
        let geo = Geo {
            kind: Kind::Channel,
            n: 1,
            c: n * c,
            l: s[2..].iter().product(),
        };
        let (wr, br) = {
            let rept = |p: Option<&Tensor>| -> Result<Option<Tensor>> {
                p.map(|p| p.repeat(&[n as i64])).transpose()
            };
            (rept(weight)?, rept(bias)?)
        };
        normalize(
            geo,
            opts,
            &x1,
            wr.as_ref(),
            br.as_ref(),
            Some((rep(&m), rep(&r))),
        )?
        .out
    };
    out.reshape(s)
}

/// Local response normalisation across channels (dim 1 of `(N, C, *)`, at least 3-d):
/// `x / (k + alpha * avg(x², window of size channels, zero-padded))^beta`, the window covering
/// channels `c - size/2 ..= c + (size-1)/2`. Composed of differentiable ops like torch's (node
/// `DivBackward0`); the window sum is `size` shifted slices of the padded squares.
pub fn local_response_norm(
    input: &Tensor,
    size: i64,
    alpha: f64,
    beta: f64,
    k: f64,
) -> Result<Tensor> {
    if let Some(r) = Tensor::lift_half([input], [], |[x], []| {
        local_response_norm(x, size, alpha, beta, k)
    }) {
        return r;
    }
    let dim = input.dim();
    if dim < 3 {
        return Err(Error::value(format!(
            "Expected 3D or higher dimensionality                          input (got {dim} dimensions)"
        )));
    }
    if input.numel() == 0 {
        return Ok(input.clone());
    }
    if size <= 0 {
        let ks = if dim == 3 {
            format!("kH: {size} kW: 1")
        } else {
            format!("kT: {size} kH: 1 kW: 1")
        };
        return Err(Error::runtime(format!(
            "kernel size should be greater than zero, but got {ks}"
        )));
    }
    let size_u = size as usize;
    let c = input.shape()[1];
    let sq = input.mul(input)?;
    let zeros = |n: usize| {
        let mut s = input.shape().to_vec();
        s[1] = n;
        crate::tensor::creation::checked_numel(&s)?;
        Tensor::try_full(&s, 0.0, input.dtype())
    };
    let padded = Tensor::cat(&[zeros(size_u / 2)?, sq, zeros((size_u - 1) / 2)?], 1)?;
    let mut sum = padded.narrow(1, 0, c)?;
    for j in 1..size_u {
        sum = sum.add(&padded.narrow(1, j as i64, c)?)?;
    }
    let div = sum
        .div_scalar(size as f64)?
        .mul_scalar(alpha)?
        .add_scalar(k)?
        .pow_scalar(beta)?;
    input.div(&div)
}
