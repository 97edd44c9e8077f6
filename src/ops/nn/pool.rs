//! Max, average and adaptive pooling over 1 to 3 spatial dims, with torch's geometry and checks.
//!
//! Every pooling op is described by the same `Windows`: for each spatial dim and output
//! position, the input positions its window reads. The kernels run over the `N * C` planes in
//! parallel. Max pooling keeps the argmax of each window in its node: its backward scatters
//! the gradient to those indices and the double backward gathers by the same indices. Average
//! pooling is linear; its backward is its adjoint, whose backward is the pooling again.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::graph::node::{needs_grad, record};
use crate::ops::nn::conv::with_dense;
use crate::parallel::SendPtr;
use crate::tensor::grad_mode::GradModeGuard;
use crate::tensor::shape::fmt_shape;
use crate::tensor::{DType, Element, Tensor};

/// Planes' worth of elements below which pooling runs on one thread.
const PARALLEL_MIN_ELEMENTS: usize = 1 << 15;

/// For each spatial dim (padded to three with size-1 dims in front) and each output position,
/// the input positions the window reads (padding left out), as compressed rows.
#[derive(Clone, Debug)]
struct Windows {
    /// `N * C`.
    planes: usize,
    /// Input spatial sizes.
    input: [usize; 3],
    /// Output spatial sizes.
    output: [usize; 3],
    /// Per dim: `starts[o]..starts[o + 1]` indexes `pos` for output position `o`.
    starts: [Vec<usize>; 3],
    /// Per dim: the input positions.
    pos: [Vec<usize>; 3],
    /// Average pooling: 1 / divisor per output position of a plane.
    inv_div: Vec<f64>,
    /// Shape of the (batched) input and output tensors.
    in_shape: Vec<usize>,
    out_shape: Vec<usize>,
}

impl Windows {
    /// The same windows over `b` times the planes: a vmap batch folded in front.
    fn batched(&self, b: usize) -> Windows {
        let mut w = self.clone();
        w.planes *= b;
        w.in_shape.insert(0, b);
        w.out_shape.insert(0, b);
        w
    }

    fn in_plane(&self) -> usize {
        self.input.iter().product()
    }

    fn out_plane(&self) -> usize {
        self.output.iter().product()
    }

    /// Call `f(o, window)` for every output position `o` of a plane, in row-major order; the
    /// window visits its input positions (plane offsets) in row-major order too.
    #[inline]
    fn for_each(&self, mut f: impl FnMut(usize, &Window<'_>)) {
        let [_, in1, in2] = self.input;
        let mut o = 0;
        for o0 in 0..self.output[0] {
            let p0 = &self.pos[0][self.starts[0][o0]..self.starts[0][o0 + 1]];
            for o1 in 0..self.output[1] {
                let p1 = &self.pos[1][self.starts[1][o1]..self.starts[1][o1 + 1]];
                for o2 in 0..self.output[2] {
                    let p2 = &self.pos[2][self.starts[2][o2]..self.starts[2][o2 + 1]];
                    f(
                        o,
                        &Window {
                            p0,
                            p1,
                            p2,
                            in1,
                            in2,
                        },
                    );
                    o += 1;
                }
            }
        }
    }
}

/// One pooling window: its input positions per dim and the plane's inner sizes.
struct Window<'a> {
    p0: &'a [usize],
    p1: &'a [usize],
    p2: &'a [usize],
    in1: usize,
    in2: usize,
}

/// The shortest innermost window row [`Window::visit_runs`] hands out as a slice.
const MIN_RUN: usize = 8;

impl Window<'_> {
    /// Call `g(start..end)` for each innermost row of the window (plane offsets), in row-major
    /// order, when the innermost positions are consecutive and at least [`MIN_RUN`] of them
    /// (`None` otherwise, nothing called): a slice per row instead of an index per element lets
    /// the loops vectorise; on shorter rows the slices cost more than they save (2x2x2 average
    /// pooling of 8x16x16³: 0.34 ms by index, 0.50 by slices).
    #[inline(always)]
    fn visit_runs(&self, mut g: impl FnMut(std::ops::Range<usize>)) -> Option<()> {
        let (&first, &last) = (self.p2.first()?, self.p2.last()?);
        if last - first + 1 != self.p2.len() || self.p2.len() < MIN_RUN {
            return None;
        }
        for &i0 in self.p0 {
            for &i1 in self.p1 {
                let base = (i0 * self.in1 + i1) * self.in2;
                g(base + first..base + last + 1);
            }
        }
        Some(())
    }

    /// Call `g(i)` for each input position (plane offset) of the window, in row-major order.
    #[inline(always)]
    fn visit(&self, mut g: impl FnMut(usize)) {
        for &i0 in self.p0 {
            for &i1 in self.p1 {
                let base = (i0 * self.in1 + i1) * self.in2;
                for &i2 in self.p2 {
                    g(base + i2);
                }
            }
        }
    }
}

/// Builds [`Windows`] one dim at a time.
struct DimWindows {
    input: usize,
    output: usize,
    starts: Vec<usize>,
    pos: Vec<usize>,
    /// Divisor factor of each output position (window size with or without padding).
    div: Vec<f64>,
}

impl DimWindows {
    /// No windows yet, for `output` positions over `input`.
    fn new(input: usize, output: usize) -> Self {
        DimWindows {
            input,
            output,
            starts: vec![0],
            pos: Vec::new(),
            div: Vec::new(),
        }
    }
}

fn regular_dim(
    input: usize,
    output: usize,
    (k, s, p, d): (usize, usize, usize, usize),
    count_include_pad: bool,
) -> DimWindows {
    let mut w = DimWindows::new(input, output);
    for o in 0..output {
        let start = (o * s) as isize - p as isize;
        for j in 0..k {
            let i = start + (j * d) as isize;
            if i >= 0 && (i as usize) < input {
                w.pos.push(i as usize);
            }
        }
        w.starts.push(w.pos.len());
        // torch's avg divisor: the window clipped to the padded input, or to the input itself.
        let end = (start + k as isize).min((input + p) as isize);
        let inside = end.min(input as isize) - start.max(0);
        w.div.push(if count_include_pad {
            (end - start) as f64
        } else {
            inside as f64
        });
    }
    w
}

fn adaptive_dim(input: usize, output: usize) -> DimWindows {
    let mut w = DimWindows::new(input, output);
    for o in 0..output {
        let start = o * input / output;
        let end = ((o + 1) * input).div_ceil(output);
        w.pos.extend(start..end);
        w.starts.push(w.pos.len());
        w.div.push((end - start) as f64);
    }
    w
}

fn unit_dim() -> DimWindows {
    DimWindows {
        input: 1,
        output: 1,
        starts: vec![0, 1],
        pos: vec![0],
        div: vec![1.0],
    }
}

fn windows(x_shape: &[usize], dims: Vec<DimWindows>, divisor: Option<f64>) -> Windows {
    let nd = dims.len();
    let mut all: Vec<DimWindows> = (0..3 - nd).map(|_| unit_dim()).collect();
    all.extend(dims);
    let [a, b, c]: [DimWindows; 3] = match all.try_into() {
        Ok(v) => v,
        Err(_) => unreachable!("three dims"),
    };
    let mut inv_div = Vec::with_capacity(a.output * b.output * c.output);
    for &d0 in &a.div {
        for &d1 in &b.div {
            for &d2 in &c.div {
                inv_div.push(1.0 / divisor.unwrap_or(d0 * d1 * d2));
            }
        }
    }
    let lead = &x_shape[..x_shape.len() - nd];
    let mut out_shape = lead.to_vec();
    let spatial = [a.output, b.output, c.output];
    out_shape.extend_from_slice(&spatial[3 - nd..]);
    Windows {
        planes: lead.iter().product(),
        input: [a.input, b.input, c.input],
        output: spatial,
        starts: [a.starts, b.starts, c.starts],
        pos: [a.pos, b.pos, c.pos],
        inv_div,
        in_shape: x_shape.to_vec(),
        out_shape,
    }
}

/// Element types of the pooling kernels.
trait PoolScalar: Element + std::ops::Add<Output = Self> + std::ops::Mul<Output = Self> {
    fn is_nan(self) -> bool;
}
impl PoolScalar for f32 {
    fn is_nan(self) -> bool {
        f32::is_nan(self)
    }
}
impl PoolScalar for f64 {
    fn is_nan(self) -> bool {
        f64::is_nan(self)
    }
}

/// A kernel on one plane: `(plane, source plane, destination plane)`.
type PlaneFn<'a, S, D> = dyn Fn(usize, &[S], &mut [D]) + Sync + 'a;

/// Run `f(plane, src, dst)` over planes of `src` (`src_len` each) and `dst` (`dst_len` each),
/// in parallel when there is enough work.
fn per_plane<S: Sync, D: Send>(
    planes: usize,
    src: &[S],
    src_len: usize,
    dst: &mut [D],
    dst_len: usize,
    work: usize,
    f: &PlaneFn<'_, S, D>,
) {
    let helpers = if planes * work < PARALLEL_MIN_ELEMENTS {
        0
    } else {
        crate::parallel::helpers()
    };
    let blocks = if helpers == 0 {
        1
    } else {
        planes.min(4 * (helpers + 1))
    };
    let dp = SendPtr(dst.as_mut_ptr());
    crate::parallel::share_work(helpers, blocks, &|b| {
        for p in b * planes / blocks..(b + 1) * planes / blocks {
            // SAFETY: plane p owns `dst[p * dst_len..][..dst_len]`; planes are disjoint.
            let d = unsafe { std::slice::from_raw_parts_mut(dp.get().add(p * dst_len), dst_len) };
            f(p, &src[p * src_len..][..src_len], d);
        }
    });
}

fn float_only(t: &Tensor, op: &str) -> Result<()> {
    if t.dtype().is_float() {
        Ok(())
    } else {
        Err(Error::not_implemented(format!(
            "\"{op}\" not implemented for '{}'",
            crate::tensor::scalar_type_name(t.dtype())
        )))
    }
}

/// torch's node names of one pooling op: the op's own node and that of its backward.
#[derive(Clone, Copy, Debug)]
struct Names {
    forward: &'static str,
    backward: &'static str,
}

/// A dim whose windows all have `k` positions `first[j] + o * step` (no window clipped by the
/// border): the shape of unpadded pooling, which [`max_rows`] runs row by row.
struct Regular<'a> {
    first: &'a [usize],
    step: usize,
    out: usize,
}

fn regular(w: &Windows, d: usize) -> Option<Regular<'_>> {
    let (starts, pos) = (&w.starts[d], &w.pos[d]);
    let out = w.output[d];
    if out == 0 {
        return None;
    }
    let first = &pos[starts[0]..starts[1]];
    if first.is_empty() {
        return None;
    }
    let step = if out > 1 {
        pos[starts[1]].checked_sub(first[0])?
    } else {
        0
    };
    for o in 0..out {
        let win = &pos[starts[o]..starts[o + 1]];
        if win.len() != first.len() || win.iter().zip(first).any(|(&a, &b)| a != b + o * step) {
            return None;
        }
    }
    Some(Regular { first, step, out })
}

/// Max pooling of one plane with regular windows in every dim (a 1-d or 2-d plane has unit
/// leading dims), values and indices equal to the per-window loop's (torch's rule: a larger
/// value or any NaN takes over; ties keep the first). Per output row the window's input rows
/// are folded whole, column by column (contiguous, so vectorised), and each output then picks
/// among its few columns: adaptive_max_pool2d 32x64x28x28 -> 7x7 compared each of 16 window
/// positions against 7 outputs at stride 4 before.
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq+avx2+avx+fma",
    "x86_64+avx2+avx+fma",
    "aarch64+neon"
))]
fn max_rows<T: PoolScalar>(
    [deps, rows, cols]: &[Regular<'_>; 3],
    [in_h, in_w]: [usize; 2],
    src: &[T],
    dst: &mut [T],
    id: &mut [i64],
) {
    let ow = cols.out;
    // Per output row, first the running maxima of every input column over the window's rows
    // (contiguous rows, so the loop vectorises), then per output the window's columns. The
    // same winner as a row-major scan under torch's rule: the maximum, the first on ties (the
    // smaller flat index), and where NaNs are, the last NaN (the larger flat index).
    let mut best = vec![T::default(); in_w];
    let mut at = vec![0i64; in_w];
    for o0 in 0..deps.out {
        for o1 in 0..rows.out {
            let mut first = true;
            for &dd in deps.first {
                let i0 = dd + o0 * deps.step;
                for &r in rows.first {
                    let base = (i0 * in_h + r + o1 * rows.step) * in_w;
                    let line = &src[base..base + in_w];
                    if first {
                        best.copy_from_slice(line);
                        for (j, a) in at.iter_mut().enumerate() {
                            *a = (base + j) as i64;
                        }
                        first = false;
                        continue;
                    }
                    for (j, ((b, a), &v)) in
                        best.iter_mut().zip(at.iter_mut()).zip(line).enumerate()
                    {
                        if v > *b || v.is_nan() {
                            *b = v;
                            *a = (base + j) as i64;
                        }
                    }
                }
            }
            let row = (o0 * rows.out + o1) * ow;
            for (o2, (d, i)) in dst[row..row + ow]
                .iter_mut()
                .zip(&mut id[row..row + ow])
                .enumerate()
            {
                let (mut bv, mut bi) = (T::default(), 0i64);
                for (k, &c) in cols.first.iter().enumerate() {
                    let j = c + o2 * cols.step;
                    let (v, vi) = (best[j], at[j]);
                    let take = k == 0
                        || if v.is_nan() {
                            !bv.is_nan() || vi > bi
                        } else {
                            !bv.is_nan() && (v > bv || (v == bv && vi < bi))
                        };
                    if take {
                        (bv, bi) = (v, vi);
                    }
                }
                *d = bv;
                *i = bi;
            }
        }
    }
}

fn max_kernel<T: PoolScalar>(w: &Windows, x: &[T]) -> Result<(Vec<T>, Vec<i64>)> {
    let (li, lo) = (w.in_plane(), w.out_plane());
    let mut vals = crate::tensor::creation::try_filled_vec(w.planes * lo, T::default())?;
    let mut idx = crate::tensor::creation::try_filled_vec(w.planes * lo, 0i64)?;
    let ip = SendPtr(idx.as_mut_ptr());
    let work = li.max(lo);
    // Pooling whose windows are never clipped by the border (3-d too: max_pool3d of
    // 8x16x16^3 took 1.1 ms forward through the per-window loop below).
    let fast = match (regular(w, 0), regular(w, 1), regular(w, 2)) {
        (Some(d), Some(r), Some(c)) => Some([d, r, c]),
        _ => None,
    };
    per_plane(w.planes, x, li, &mut vals, lo, work, &|p, src, dst| {
        // SAFETY: plane p owns this range of `idx` too.
        let id = unsafe { std::slice::from_raw_parts_mut(ip.get().add(p * lo), lo) };
        if let Some(dims) = &fast {
            max_rows(dims, [w.input[1], w.input[2]], src, dst, id);
            return;
        }
        w.for_each(|o, win| {
            let mut best = T::from_f64(f64::NEG_INFINITY);
            let mut at = None;
            win.visit(|i| {
                let v = src[i];
                at = at.or(Some(i));
                // torch's rule: a larger value or any NaN takes over; ties keep the first.
                if v > best || v.is_nan() {
                    best = v;
                    at = Some(i);
                }
            });
            dst[o] = best;
            id[o] = at.unwrap_or(0) as i64;
        });
    });
    Ok((vals, idx))
}

fn avg_kernel<T: PoolScalar>(w: &Windows, x: &[T]) -> Result<Vec<T>> {
    let (li, lo) = (w.in_plane(), w.out_plane());
    let mut out = crate::tensor::creation::try_filled_vec(w.planes * lo, T::default())?;
    per_plane(w.planes, x, li, &mut out, lo, li.max(lo), &|_, src, dst| {
        w.for_each(|o, win| {
            let mut s = T::default();
            // The same additions in the same order either way.
            if win
                .visit_runs(|r| s = src[r].iter().fold(s, |a, &v| a + v))
                .is_none()
            {
                win.visit(|i| s = s + src[i]);
            }
            dst[o] = s * T::from_f64(w.inv_div[o]);
        });
    });
    Ok(out)
}

fn avg_adjoint_kernel<T: PoolScalar>(w: &Windows, g: &[T]) -> Result<Vec<T>> {
    let (li, lo) = (w.in_plane(), w.out_plane());
    let mut out = crate::tensor::creation::try_filled_vec(w.planes * li, T::default())?;
    per_plane(w.planes, g, lo, &mut out, li, li.max(lo), &|_, src, dst| {
        w.for_each(|o, win| {
            let v = src[o] * T::from_f64(w.inv_div[o]);
            let runs = win.visit_runs(|r| dst[r].iter_mut().for_each(|d| *d = *d + v));
            if runs.is_none() {
                win.visit(|i| dst[i] = dst[i] + v);
            }
        });
    });
    Ok(out)
}

fn scatter_kernel<T: PoolScalar>(w: &Windows, idx: &[i64], g: &[T]) -> Result<Vec<T>> {
    let (li, lo) = (w.in_plane(), w.out_plane());
    let mut out = crate::tensor::creation::try_filled_vec(w.planes * li, T::default())?;
    per_plane(w.planes, g, lo, &mut out, li, lo, &|p, src, dst| {
        for (&v, &i) in src.iter().zip(&idx[p * lo..][..lo]) {
            dst[i as usize] = dst[i as usize] + v;
        }
    });
    Ok(out)
}

fn gather_kernel<T: PoolScalar>(w: &Windows, idx: &[i64], x: &[T]) -> Result<Vec<T>> {
    let (li, lo) = (w.in_plane(), w.out_plane());
    let mut out = crate::tensor::creation::try_filled_vec(w.planes * lo, T::default())?;
    per_plane(w.planes, x, li, &mut out, lo, lo, &|p, src, dst| {
        for (d, &i) in dst.iter_mut().zip(&idx[p * lo..][..lo]) {
            *d = src[i as usize];
        }
    });
    Ok(out)
}

macro_rules! float_dispatch {
    ($t:expr, $shape:expr, |$v:ident: $T:ident| $body:expr) => {{
        match $t.dtype() {
            DType::Float32 => {
                type $T = f32;
                Tensor::from_vec(with_dense::<f32, _>($t, |$v| $body)??, $shape)?
            }
            _ => {
                type $T = f64;
                Tensor::from_vec(with_dense::<f64, _>($t, |$v| $body)??, $shape)?
            }
        }
    }};
}

/// Max pooling on batched `x`: values and plane-local argmax indices.
fn max_pool_apply(x: &Tensor, w: &Arc<Windows>, names: Names) -> Result<(Tensor, Tensor)> {
    let mut idx_out: Option<Vec<i64>> = None;
    // Inside vmap the samples' planes are pooled as more planes of one call.
    let folded = on_folded_planes(x, w, false, |p, wb| {
        Ok(float_dispatch!(p, &wb.out_shape, |xs: T| {
            max_kernel::<T>(wb, xs).map(|(v, i)| {
                idx_out = Some(i);
                v
            })
        }))
    });
    let (vals, level) = match folded {
        Some(r) => (r?, crate::tensor::batched::top_level(&[x])),
        None => {
            let vals = float_dispatch!(x, &w.out_shape, |xs: T| {
                max_kernel::<T>(w, xs).map(|(v, i)| {
                    idx_out = Some(i);
                    v
                })
            });
            (vals, None)
        }
    };
    let idx = Arc::new(idx_out.unwrap_or_default());
    let indices = match &level {
        Some(_) => on_folded_planes(x, w, false, |_, wb| {
            Tensor::from_vec(idx.to_vec(), &wb.out_shape)
        })
        .unwrap_or_else(|| Err(Error::runtime("internal error: max pool indices")))?,
        None => Tensor::from_vec(idx.to_vec(), &w.out_shape)?,
    };
    if needs_grad(&[x]) {
        let (w, idx) = (w.clone(), idx.clone());
        record(names.forward, &[x], &[&vals], &[], true, move |g, _| {
            // The indices cover every sample: a gradient the same for all is spread first.
            let g = match &level {
                Some(l) if !g[0].is_batched() => {
                    let mut shape = vec![l.size()];
                    shape.extend_from_slice(g[0].shape());
                    crate::ops::batching::add_batch_dim(&g[0].unsqueeze(0)?.expand(&shape)?, 0, l)?
                }
                _ => g[0].clone(),
            };
            Ok(vec![Some(index_scatter(&g, &idx, &w, names)?)])
        })?;
    }
    Ok((vals, indices))
}

/// Whether saved argmax indices are those of one sample's planes (an unbatched forward).
fn covers_one_sample(idx: &[i64], w: &Windows) -> bool {
    idx.len() == w.planes * w.out_plane()
}

/// Saved indices that cover a vmap batch need a batched gradient (double backward inside vmap
/// of a gradient the same for every sample is not supported yet).
fn check_unfolded(idx: &[i64], w: &Windows) -> Result<()> {
    if !covers_one_sample(idx, w) {
        return Err(Error::not_implemented(
            "vmap: max pooling's double backward with a gradient shared by all samples is not supported yet",
        ));
    }
    Ok(())
}

/// Inside vmap: `f` on the physical tensor under batched `x` with every sample's planes
/// folded into one call (`w.batched`), the result batched again; `None` for an unbatched `x`.
/// `adjoint`: `x` has the windows' output shape (a gradient) instead of their input shape.
fn on_folded_planes(
    x: &Tensor,
    w: &Windows,
    adjoint: bool,
    f: impl FnOnce(&Tensor, &Windows) -> Result<Tensor>,
) -> Option<Result<Tensor>> {
    crate::tensor::batched::unary_all(x, |p, nb| {
        let b: usize = p.shape()[..nb].iter().product();
        let wb = w.batched(b);
        let (from, to) = if adjoint {
            (&wb.out_shape, &wb.in_shape)
        } else {
            (&wb.in_shape, &wb.out_shape)
        };
        let out = f(&p.reshape(from)?, &wb)?;
        let mut shape = p.shape()[..nb].to_vec();
        shape.extend_from_slice(&to[1..]);
        debug_assert_eq!(out.shape(), to.as_slice());
        out.reshape(&shape)
    })
}

/// The backward of max pooling: `g` added at the saved indices of each plane.
fn index_scatter(
    g: &Tensor,
    idx: &Arc<Vec<i64>>,
    w: &Arc<Windows>,
    names: Names,
) -> Result<Tensor> {
    let out = if g.is_batched() && covers_one_sample(idx, w) {
        // The indices of an unbatched forward, used per sample (forward-mode tangents).
        crate::ops::batching::per_sample(&[g], |p| index_scatter(&p[0], idx, w, names))
            .unwrap_or_else(|| Err(Error::runtime("internal error: pooling indices")))?
    } else {
        match on_folded_planes(g, w, true, |p, wb| {
            Ok(float_dispatch!(
                p,
                &wb.in_shape,
                |gs: T| scatter_kernel::<T>(wb, idx, gs)
            ))
        }) {
            Some(r) => r?,
            None => {
                check_unfolded(idx, w)?;
                float_dispatch!(g, &w.in_shape, |gs: T| scatter_kernel::<T>(w, idx, gs))
            }
        }
    };
    if needs_grad(&[g]) {
        let (w, idx) = (w.clone(), idx.clone());
        record(names.backward, &[g], &[&out], &[], true, move |gg, _| {
            Ok(vec![Some(index_gather(&gg[0], &idx, &w, names)?)])
        })?;
    }
    Ok(out)
}

/// The adjoint of [`index_scatter`]: each plane's elements at the saved indices.
fn index_gather(x: &Tensor, idx: &Arc<Vec<i64>>, w: &Arc<Windows>, names: Names) -> Result<Tensor> {
    let out = if x.is_batched() && covers_one_sample(idx, w) {
        // The indices of an unbatched forward, used per sample (forward-mode tangents).
        crate::ops::batching::per_sample(&[x], |p| index_gather(&p[0], idx, w, names))
            .unwrap_or_else(|| Err(Error::runtime("internal error: pooling indices")))?
    } else {
        match on_folded_planes(x, w, false, |p, wb| {
            Ok(float_dispatch!(
                p,
                &wb.out_shape,
                |xs: T| gather_kernel::<T>(wb, idx, xs)
            ))
        }) {
            Some(r) => r?,
            None => {
                check_unfolded(idx, w)?;
                float_dispatch!(x, &w.out_shape, |xs: T| gather_kernel::<T>(w, idx, xs))
            }
        }
    };
    if needs_grad(&[x]) {
        let (w, idx) = (w.clone(), idx.clone());
        record(names.forward, &[x], &[&out], &[], true, move |g, _| {
            Ok(vec![Some(index_scatter(&g[0], &idx, &w, names)?)])
        })?;
    }
    Ok(out)
}

/// Average pooling (`adjoint == false`) of batched `x`, or its adjoint (from output-shaped
/// gradients to input-shaped ones); each is the other's backward.
fn avg_pool_apply(x: &Tensor, w: &Arc<Windows>, adjoint: bool, names: Names) -> Result<Tensor> {
    let kernel = |x: &Tensor, w: &Windows| -> Result<Tensor> {
        Ok(if adjoint {
            float_dispatch!(x, &w.in_shape, |xs: T| avg_adjoint_kernel::<T>(w, xs))
        } else {
            float_dispatch!(x, &w.out_shape, |xs: T| avg_kernel::<T>(w, xs))
        })
    };
    let out = match on_folded_planes(x, w, adjoint, kernel) {
        Some(r) => r?,
        None => kernel(x, w)?,
    };
    if needs_grad(&[x]) {
        let w = w.clone();
        let name = if adjoint {
            names.backward
        } else {
            names.forward
        };
        record(name, &[x], &[&out], &[], false, move |g, _| {
            Ok(vec![Some(avg_pool_apply(&g[0], &w, !adjoint, names)?)])
        })?;
    }
    Ok(out)
}

// ----- geometry and torch's checks ----------------------------------------------------------

fn ordinal_words(nd: usize) -> &'static str {
    match nd {
        1 => "one int",
        2 => "two ints",
        _ => "three ints",
    }
}

/// torch's per-dim prefixes in pooling messages (`kT kH kW`, `dT dH dW`, ...).
fn dim_letters(nd: usize) -> &'static [&'static str] {
    match nd {
        1 => &["W"],
        2 => &["H", "W"],
        _ => &["T", "H", "W"],
    }
}

fn labelled(prefix: &str, v: &[i64]) -> String {
    v.iter()
        .zip(dim_letters(v.len()))
        .map(|(x, l)| format!("{prefix}{l}: {x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// One int-list argument of `op` expanded to `nd` values, or torch's message.
fn expand_arg(op: &str, name: &str, v: &[i64], nd: usize, omittable: bool) -> Result<Vec<i64>> {
    match v.len() {
        1 => Ok(vec![v[0]; nd]),
        n if n == nd => Ok(v.to_vec()),
        _ => {
            let what = if omittable {
                "must either be omitted, a single int,"
            } else if name == "dilation" {
                "must be either a single int,"
            } else {
                "must either be a single int,"
            };
            let n = ordinal_words(nd);
            Err(Error::runtime(format!(
                "{op}: {name} {what} or a tuple of {n}"
            )))
        }
    }
}

/// Validated pooling arguments (all positive or non-negative as torch requires).
struct PoolArgs {
    kernel: Vec<usize>,
    stride: Vec<usize>,
    padding: Vec<usize>,
    dilation: Vec<usize>,
    output: Vec<usize>,
}

/// torch's rank check of a pooling input: `(N, C, *spatial)` or unbatched `(C, *spatial)`,
/// both taken as they are (planes are whatever precedes the spatial dims).
fn pool_input(x: &Tensor, nd: usize) -> Result<()> {
    if x.dim() == nd + 2 || x.dim() == nd + 1 {
        Ok(())
    } else {
        Err(Error::runtime(format!(
            "non-empty {}D or {}D (batch mode) tensor expected for input",
            nd + 1,
            nd + 2
        )))
    }
}

/// The windows of each spatial dim of `x` for checked arguments `a`.
fn regular_windows(
    x: &Tensor,
    nd: usize,
    a: &PoolArgs,
    count_include_pad: bool,
) -> Vec<DimWindows> {
    (0..nd)
        .map(|i| {
            regular_dim(
                x.shape()[x.dim() - nd + i],
                a.output[i],
                (a.kernel[i], a.stride[i], a.padding[i], a.dilation[i]),
                count_include_pad,
            )
        })
        .collect()
}

/// torch's `pooling_output_shape` checks and sizes, then `pool{2,3}d_shape_check`'s.
#[allow(clippy::too_many_arguments)]
fn pool_args(
    op: &str,
    x: &Tensor,
    kernel: &[i64],
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    ceil_mode: bool,
    nd: usize,
    avg3d: bool,
) -> Result<PoolArgs> {
    let k = expand_arg(op, "kernel_size", kernel, nd, false)?;
    let s = if stride.is_empty() {
        k.clone()
    } else {
        expand_arg(op, "stride", stride, nd, true)?
    };
    let p = expand_arg(op, "padding", padding, nd, false)?;
    let d = expand_arg(op, "dilation", dilation, nd, false)?;
    if [&k, &s, &p, &d]
        .iter()
        .any(|v| v.iter().any(|&x| x.abs() >= 1 << 31))
    {
        return Err(Error::runtime(
            "value cannot be converted to type int without overflow",
        ));
    }
    for i in 0..nd {
        if s[i] == 0 {
            return Err(Error::runtime("stride should not be zero"));
        }
        if p[i] < 0 {
            return Err(Error::runtime(format!(
                "pad must be non-negative, but got pad: {}",
                p[i]
            )));
        }
        // C++ division truncates towards zero.
        let eff = d[i] * (k[i] - 1) + 1;
        if p[i] > eff / 2 {
            return Err(Error::runtime(format!(
                "pad should be at most half of effective kernel size, but got pad={}, kernel_size={} and dilation={}",
                p[i], k[i], d[i]
            )));
        }
    }
    if k.iter().any(|&v| v <= 0) {
        return Err(Error::runtime(format!(
            "kernel size should be greater than zero, but got {}",
            labelled("k", &k)
        )));
    }
    if s.iter().any(|&v| v <= 0) {
        return Err(Error::runtime(format!(
            "stride should be greater than zero, but got {}",
            labelled("d", &s)
        )));
    }
    if d.iter().any(|&v| v <= 0) {
        return Err(Error::runtime(format!(
            "dilation should be greater than zero, but got {}",
            labelled("dilation", &d)
        )));
    }
    let xs = x.shape();
    let spatial = &xs[xs.len() - nd..];
    let channels = xs[xs.len() - nd - 1];
    if xs[xs.len() - nd - 1..].contains(&0) {
        return Err(Error::runtime(format!(
            "Expected {}D or {}D (batch mode) tensor with optional 0 dim batch size for input, but got:{}",
            nd + 1,
            nd + 2,
            fmt_shape(xs)
        )));
    }
    if avg3d && (0..nd).any(|i| (spatial[i] as i64) < k[i]) {
        return Err(Error::runtime(format!(
            "input image (T: {} H: {} W: {}) smaller than kernel size (kT: {} kH: {} kW: {})",
            spatial[0], spatial[1], spatial[2], k[0], k[1], k[2]
        )));
    }
    let output: Vec<i64> = (0..nd)
        .map(|i| {
            let size = spatial[i] as i64;
            let num =
                size + 2 * p[i] - d[i] * (k[i] - 1) - 1 + if ceil_mode { s[i] - 1 } else { 0 };
            let mut o = num.div_euclid(s[i]) + 1;
            if ceil_mode && (o - 1) * s[i] >= size + p[i] {
                o -= 1;
            }
            o
        })
        .collect();
    if output.iter().any(|&o| o <= 0) {
        let fmt = |v: Vec<String>| format!("{channels}x{}", v.join("x"));
        return Err(Error::runtime(format!(
            "Given input size: ({}). Calculated output size: ({}). Output size is too small",
            fmt(spatial.iter().map(|v| v.to_string()).collect()),
            fmt(output.iter().map(|v| v.to_string()).collect())
        )));
    }
    let u = |v: &[i64]| v.iter().map(|&x| x as usize).collect::<Vec<_>>();
    Ok(PoolArgs {
        kernel: u(&k),
        stride: u(&s),
        padding: u(&p),
        dilation: u(&d),
        output: u(&output),
    })
}

fn max_names(nd: usize) -> Names {
    if nd == 3 {
        Names {
            forward: "MaxPool3DWithIndicesBackward0",
            backward: "MaxPool3DWithIndicesBackwardBackward0",
        }
    } else {
        Names {
            forward: "MaxPool2DWithIndicesBackward0",
            backward: "MaxPool2DWithIndicesBackwardBackward0",
        }
    }
}

fn avg_names(nd: usize) -> Names {
    if nd == 3 {
        Names {
            forward: "AvgPool3DBackward0",
            backward: "AvgPool3DBackwardBackward0",
        }
    } else {
        Names {
            forward: "AvgPool2DBackward0",
            backward: "AvgPool2DBackwardBackward0",
        }
    }
}

/// Max pooling over 2 or 3 spatial dims of a batched or unbatched input.
#[allow(clippy::too_many_arguments)]
fn max_pool_nd<const ND: usize>(
    x: &Tensor,
    kernel: &[i64],
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    ceil_mode: bool,
) -> Result<(Tensor, Tensor)> {
    if let Some(r) = Tensor::lift_half([x], [], |[x], []| {
        max_pool_nd::<ND>(x, kernel, stride, padding, dilation, ceil_mode)
    }) {
        return r;
    }
    let nd = ND;
    let op = format!("max_pool{nd}d");
    pool_input(x, nd)?;
    let a = pool_args(
        &op, x, kernel, stride, padding, dilation, ceil_mode, nd, false,
    )?;
    float_only(x, &op)?;
    let dims = regular_windows(x, nd, &a, true);
    let w = Arc::new(windows(x.shape(), dims, None));
    max_pool_apply(x, &w, max_names(nd))
}

/// Average pooling over 2 or 3 spatial dims of a batched or unbatched input.
#[allow(clippy::too_many_arguments)]
fn avg_pool_nd<const ND: usize>(
    x: &Tensor,
    kernel: &[i64],
    stride: &[i64],
    padding: &[i64],
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: Option<i64>,
) -> Result<Tensor> {
    if let Some(r) = Tensor::lift_half([x], [], |[x], []| {
        avg_pool_nd::<ND>(
            x,
            kernel,
            stride,
            padding,
            ceil_mode,
            count_include_pad,
            divisor_override,
        )
    }) {
        return r;
    }
    let nd = ND;
    let op = format!("avg_pool{nd}d");
    if nd == 2 && x.dim() < 3 {
        // torch's avg_pool2d reads dim -3 before any check.
        return Err(Error::index(format!(
            "Dimension out of range (expected to be in range of [{}, {}], but got -3)",
            -(x.dim().max(1) as i64),
            x.dim().max(1) as i64 - 1
        )));
    }
    pool_input(x, nd)?;
    if divisor_override == Some(0) {
        return Err(Error::runtime("divisor must be not zero"));
    }
    let a = pool_args(
        &op,
        x,
        kernel,
        stride,
        padding,
        &[1],
        ceil_mode,
        nd,
        nd == 3,
    )?;
    float_only(x, &op)?;
    // `a.dilation` is all ones: average pooling has none.
    let dims = regular_windows(x, nd, &a, count_include_pad);
    let w = Arc::new(windows(x.shape(), dims, divisor_override.map(|d| d as f64)));
    avg_pool_apply(x, &w, false, avg_names(nd))
}

/// The 1-d ops run as their 2-d forms on `(N, C, 1, L)`, as torch's do.
fn lift_1d(x: &Tensor, op: &str) -> Result<Tensor> {
    if x.dim() != 2 && x.dim() != 3 {
        return Err(Error::runtime(format!(
            "Expected 2 to 3 dimensions, but got {}-dimensional tensor for argument #1 'self' (while checking arguments for {op})",
            x.dim()
        )));
    }
    x.unsqueeze(-2)
}

/// Adaptive pooling windows of `x` for `output` sizes, with torch's checks.
fn adaptive_windows(
    op: &str,
    x: &Tensor,
    output: &[i64],
    nd: usize,
    colon: bool,
) -> Result<Arc<Windows>> {
    if x.dim() != nd + 1 && x.dim() != nd + 2 {
        return Err(Error::runtime(format!(
            "{op}(): Expected {}D or {}D tensor, but got{} {}",
            nd + 1,
            nd + 2,
            if colon { ":" } else { "" },
            fmt_shape(x.shape())
        )));
    }
    if output.len() != nd {
        return Err(Error::runtime(if colon {
            format!("{op}(): internal error: output_size.size() must be {nd}")
        } else {
            format!("{op}: output_size must be {nd}")
        }));
    }
    let xs = x.shape();
    for d in x.dim() - nd..x.dim() {
        if xs[d] == 0 {
            return Err(Error::runtime(format!(
                "{op}(): Expected input to have non-zero size for non-batch dimensions, but input has sizes {} with dimension {d} being empty",
                fmt_shape(xs)
            )));
        }
    }
    if let Some(&neg) = output.iter().find(|&&o| o < 0) {
        let mut shape: Vec<String> = xs[..x.dim() - nd].iter().map(|v| v.to_string()).collect();
        shape.extend(output.iter().map(|v| v.to_string()));
        return Err(Error::runtime(format!(
            "Trying to create tensor with negative dimension {neg}: [{}]",
            shape.join(", ")
        )));
    }
    float_only(x, op)?;
    let dims = (0..nd)
        .map(|i| adaptive_dim(xs[x.dim() - nd + i], output[i] as usize))
        .collect();
    Ok(Arc::new(windows(xs, dims, None)))
}

/// Methods that are one n-d function at several ranks: its parameters and the arguments it is
/// called with written once, then a doc and a rank per method.
macro_rules! at_ranks {
    (
        $imp:ident $params:tt -> $ret:ty = $args:tt;
        $($(#[$doc:meta])* $name:ident: $nd:literal;)*
    ) => {$(
        $(#[$doc])*
        #[allow(clippy::too_many_arguments)]
        pub fn $name $params -> $ret {
            $imp::<$nd> $args
        }
    )*};
}

impl Tensor {
    at_ranks! {
        max_pool_nd(&self, kernel: &[i64], stride: &[i64], padding: &[i64], dilation: &[i64],
            ceil_mode: bool) -> Result<(Tensor, Tensor)>
            = (self, kernel, stride, padding, dilation, ceil_mode);
        /// 2-d max pooling of `(N, C, H, W)` or `(C, H, W)` (torch's `max_pool2d_with_indices`):
        /// the values and, per window, the flat index of its maximum within the `H * W` plane
        /// (the first on ties; a NaN wins). An empty `stride` means the kernel size; `padding`
        /// (at most half the dilated kernel) reads as -inf. Torch's errors on bad arguments.
        max_pool2d: 2;
        /// 3-d max pooling of `(N, C, D, H, W)` or unbatched input; see [`Tensor::max_pool2d`].
        max_pool3d: 3;
    }

    /// 1-d max pooling of `(N, C, L)` or `(C, L)` (as torch: the 2-d op on `(N, C, 1, L)`).
    pub fn max_pool1d(
        &self,
        kernel: i64,
        stride: Option<i64>,
        padding: i64,
        dilation: i64,
        ceil_mode: bool,
    ) -> Result<(Tensor, Tensor)> {
        if self.dim() != 2 && self.dim() != 3 || self.shape()[self.dim() - 1] == 0 {
            return Err(Error::runtime(format!(
                "max_pool1d: Expected 2D or 3D (batch mode) tensor with optional 0 dim batch size for input, but got:{}",
                fmt_shape(self.shape())
            )));
        }
        let s = stride.unwrap_or(kernel);
        let checks: [(bool, String); 5] = [
            (kernel <= 0, format!("kernel_size must be greater than zero, but got {kernel}")),
            (s <= 0, format!("stride must be greater than zero, but got {s}")),
            (padding < 0, format!("padding must be non-negative, but got {padding}")),
            (
                padding > kernel / 2,
                format!("padding should be at most half of kernel size, but got padding={padding} and kernel_size={kernel}"),
            ),
            (dilation <= 0, format!("dilation must be greater than zero, but got {dilation}")),
        ];
        if let Some((_, m)) = checks.into_iter().find(|(bad, _)| *bad) {
            return Err(Error::runtime(format!("max_pool1d() {m}")));
        }
        let l = self.shape()[self.dim() - 1] as i64;
        let num = l + 2 * padding - dilation * (kernel - 1) - 1 + if ceil_mode { s - 1 } else { 0 };
        let mut o = num.div_euclid(s) + 1;
        if ceil_mode && (o - 1) * s >= l + padding {
            o -= 1;
        }
        if o <= 0 {
            return Err(Error::runtime(format!(
                "max_pool1d() Invalid computed output size: {o}"
            )));
        }
        let x = self.unsqueeze(-2)?;
        let (v, i) = x.max_pool2d(
            &[1, kernel],
            &[1, s],
            &[0, padding],
            &[1, dilation],
            ceil_mode,
        )?;
        Ok((v.squeeze(Some(-2))?, i.squeeze(Some(-2))?))
    }

    at_ranks! {
        avg_pool_nd(&self, kernel: &[i64], stride: &[i64], padding: &[i64], ceil_mode: bool,
            count_include_pad: bool, divisor_override: Option<i64>) -> Result<Tensor>
            = (self, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override);
        /// 2-d average pooling of `(N, C, H, W)` or `(C, H, W)`. The divisor is the window's size
        /// within the padded input (`count_include_pad`) or within the input, or
        /// `divisor_override`; the `ceil_mode` overhang never counts. Torch's errors.
        avg_pool2d: 2;
        /// 3-d average pooling; see [`Tensor::avg_pool2d`].
        avg_pool3d: 3;
    }

    /// 1-d average pooling of `(N, C, L)` or `(C, L)` (the 2-d op on `(N, C, 1, L)`, as torch).
    pub fn avg_pool1d(
        &self,
        kernel: i64,
        stride: Option<i64>,
        padding: i64,
        ceil_mode: bool,
        count_include_pad: bool,
    ) -> Result<Tensor> {
        let x = lift_1d(self, "avg_pool1d")?;
        let s = stride.unwrap_or(kernel);
        x.avg_pool2d(
            &[1, kernel],
            &[1, s],
            &[0, padding],
            ceil_mode,
            count_include_pad,
            None,
        )?
        .squeeze(Some(-2))
    }

    /// Adaptive 2-d average pooling to `output` `(oh, ow)`: window `o` of a dim of size `n`
    /// spans `floor(o n / out)..ceil((o + 1) n / out)`.
    pub fn adaptive_avg_pool2d(&self, output: &[i64]) -> Result<Tensor> {
        if let Some(r) = Tensor::lift_half([self], [], |[x], []| x.adaptive_avg_pool2d(output)) {
            return r;
        }
        let w = adaptive_windows("adaptive_avg_pool2d", self, output, 2, false)?;
        if output == [1, 1] {
            // torch takes the mean here (its node is MeanBackward1).
            return self.mean_dims(&[-2, -1], true);
        }
        let names = Names {
            forward: "AdaptiveAvgPool2DBackward0",
            backward: "AdaptiveAvgPool2DBackwardBackward0",
        };
        avg_pool_apply(self, &w, false, names)
    }

    /// Adaptive 1-d average pooling (the 2-d op on `(N, C, 1, L)`).
    pub fn adaptive_avg_pool1d(&self, output: i64) -> Result<Tensor> {
        if let Some(r) = Tensor::lift_half([self], [], |[x], []| x.adaptive_avg_pool1d(output)) {
            return r;
        }
        let x = lift_1d(self, "adaptive_avg_pool1d")?;
        x.adaptive_avg_pool2d(&[1, output])?.squeeze(Some(-2))
    }

    /// Adaptive 2-d max pooling: values and plane-local argmax indices (windows as in
    /// [`Tensor::adaptive_avg_pool2d`]).
    pub fn adaptive_max_pool2d(&self, output: &[i64]) -> Result<(Tensor, Tensor)> {
        if let Some(r) = Tensor::lift_half([self], [], |[x], []| x.adaptive_max_pool2d(output)) {
            return r;
        }
        let w = adaptive_windows("adaptive_max_pool2d", self, output, 2, true)?;
        let names = Names {
            forward: "AdaptiveMaxPool2DBackward0",
            backward: "AdaptiveMaxPool2DBackwardBackward0",
        };
        max_pool_apply(self, &w, names)
    }

    /// Adaptive 1-d max pooling (the 2-d op on `(N, C, 1, L)`).
    pub fn adaptive_max_pool1d(&self, output: i64) -> Result<(Tensor, Tensor)> {
        if let Some(r) = Tensor::lift_half([self], [], |[x], []| x.adaptive_max_pool1d(output)) {
            return r;
        }
        let x = lift_1d(self, "adaptive_max_pool1d")?;
        let (v, i) = x.adaptive_max_pool2d(&[1, output])?;
        Ok((v.squeeze(Some(-2))?, i.squeeze(Some(-2))?))
    }

    /// Adaptive 3-d average pooling to `output` `(od, oh, ow)` (windows as in
    /// [`Tensor::adaptive_avg_pool2d`]), by the separable passes of `interpolate`'s area mode.
    pub fn adaptive_avg_pool3d(&self, output: &[i64]) -> Result<Tensor> {
        if let Some(r) = Tensor::lift_half([self], [], |[x], []| x.adaptive_avg_pool3d(output)) {
            return r;
        }
        // Inside vmap: the samples folded into the leading (N or C) dim.
        if self.dim() > 0 {
            if let Some(r) =
                crate::ops::batching::fold_front(&[self], |p| p[0].adaptive_avg_pool3d(output))
            {
                return r;
            }
        }
        crate::ops::nn::sampling::adaptive_avg_pool3d(self, output)
    }

    /// Adaptive 3-d max pooling: values and plane-local argmax indices.
    pub fn adaptive_max_pool3d(&self, output: &[i64]) -> Result<(Tensor, Tensor)> {
        if let Some(r) = Tensor::lift_half([self], [], |[x], []| x.adaptive_max_pool3d(output)) {
            return r;
        }
        let w = adaptive_windows("adaptive_max_pool3d", self, output, 3, true)?;
        let names = Names {
            forward: "AdaptiveMaxPool3DBackward0",
            backward: "AdaptiveMaxPool3DBackwardBackward0",
        };
        max_pool_apply(self, &w, names)
    }

    /// The partial inverse of max pooling (`max_unpool2d`/`3d`, `output.len()` spatial dims):
    /// an `(N, C, *output)` (or unbatched) tensor of zeros with each value of `self` written at
    /// its plane-local flat index from `indices` (as max pooling returns them). Backward
    /// gathers the gradient at those indices.
    pub fn max_unpool(&self, indices: &Tensor, output: &[usize]) -> Result<Tensor> {
        let nd = output.len();
        let (name, node) = match nd {
            2 => ("max_unpooling2d", "MaxUnpool2DBackward0"),
            3 => ("max_unpooling3d", "MaxUnpool3DBackward0"),
            _ => {
                return Err(Error::value(format!(
                    "max_unpool: output_size must have 2 or 3 spatial dims, got {nd}"
                )))
            }
        };
        if indices.dtype() != DType::Int64 {
            return Err(Error::runtime(format!(
                "elements in indices should be type int64 but got: {}",
                crate::tensor::scalar_type_name(indices.dtype())
            )));
        }
        if self.shape() != indices.shape() {
            return Err(Error::runtime(format!(
                "Expected shape of indices to be same as that of the input tensor ({}) but got indices tensor with shape: {}",
                fmt_shape(self.shape()),
                fmt_shape(indices.shape())
            )));
        }
        if self.dim() != nd + 1 && self.dim() != nd + 2 {
            return Err(Error::runtime(format!(
                "Input to {name} should be a {}d or {}d Tensor, but got a tensor with {} dimensions.",
                nd + 1,
                nd + 2,
                self.dim()
            )));
        }
        float_only(self, name)?;
        // Inside vmap: the samples folded into the leading dim (the planes are independent).
        if let Some(r) =
            crate::ops::batching::fold_front(&[self, indices], |p| p[0].max_unpool(&p[1], output))
        {
            return r;
        }
        let lead = &self.shape()[..self.dim() - nd];
        let planes: usize = lead.iter().product();
        let per_in: usize = self.shape()[self.dim() - nd..].iter().product();
        let per_out = output.iter().try_fold(1usize, |a, &b| a.checked_mul(b));
        let per_out = per_out.ok_or_else(|| Error::runtime("max_unpool: output too large"))?;
        let idx = indices.to_vec::<i64>()?;
        if let Some(&bad) = idx.iter().find(|&&i| i < 0 || i as u128 >= per_out as u128) {
            let sizes: Vec<String> = output.iter().map(|v| v.to_string()).collect();
            return Err(Error::runtime(format!(
                "Found an invalid max index: {bad} (output volumes are of size {}",
                sizes.join("x")
            )));
        }
        let mut shape = lead.to_vec();
        shape.extend_from_slice(output);
        let out = {
            let _g = GradModeGuard::new(false);
            // Flat targets over all planes: plane p's index i lands at p * per_out + i.
            let flat: Vec<i64> = idx
                .iter()
                .enumerate()
                .map(|(k, &i)| ((k / per_in.max(1)) * per_out) as i64 + i)
                .collect();
            let flat = Tensor::from_vec(flat, &[planes * per_in])?;
            Tensor::zeros(&[planes * per_out], self.dtype())
                .scatter(0, &flat, &self.detach().reshape(&[planes * per_in])?)?
                .reshape(&shape)?
        };
        if needs_grad(&[self]) {
            let (in_shape, idx_t) = (self.shape().to_vec(), indices.clone());
            record(node, &[self], &[&out], &[], false, move |g, _| {
                let g = g[0].reshape(&[planes, per_out])?;
                let i = idx_t.reshape(&[planes, per_in])?;
                Ok(vec![Some(g.gather(1, &i)?.reshape(&in_shape)?)])
            })?;
        }
        Ok(out)
    }

    /// Power-average pooling over `nd` (1 to 3) spatial dims, torch's composition:
    /// `(Σ x^p)^(1/p)` per window (`sign(s) relu(|s|)` of the window mean times its size, so a
    /// negative sum gives NaN as in torch), max pooling of `|x|` for `p = inf` and its negative
    /// for `-inf`. `stride` empty means the kernel size.
    pub fn lp_pool(
        &self,
        norm_type: f64,
        kernel: &[i64],
        stride: &[i64],
        ceil_mode: bool,
    ) -> Result<Tensor> {
        let nd = kernel.len();
        if norm_type == 0.0 {
            return Err(Error::value(format!(
                "norm_type must be a non-zero value, but got {norm_type}"
            )));
        }
        let zeros = vec![0i64; nd];
        let ones = vec![1i64; nd];
        let max_pool = |x: &Tensor| -> Result<Tensor> {
            let (v, _) = match nd {
                1 => x.max_pool1d(kernel[0], stride.first().copied(), 0, 1, ceil_mode)?,
                2 => x.max_pool2d(kernel, stride, &zeros, &ones, ceil_mode)?,
                _ => x.max_pool3d(kernel, stride, &zeros, &ones, ceil_mode)?,
            };
            Ok(v)
        };
        if norm_type == f64::INFINITY {
            return max_pool(&self.abs()?);
        }
        if norm_type == f64::NEG_INFINITY {
            return max_pool(&self.abs()?.neg()?)?.neg();
        }
        let x = self.pow_scalar(norm_type)?;
        let out = match nd {
            1 => x.avg_pool1d(kernel[0], stride.first().copied(), 0, ceil_mode, true)?,
            2 => x.avg_pool2d(kernel, stride, &zeros, ceil_mode, true, None)?,
            _ => x.avg_pool3d(kernel, stride, &zeros, ceil_mode, true, None)?,
        };
        let size: i64 = kernel.iter().product();
        out.sign()?
            .mul(&out.abs()?.relu()?)?
            .mul_scalar(size as f64)?
            .pow_scalar(1.0 / norm_type)
    }
}
