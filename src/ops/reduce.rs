//! Reductions: sum and mean over all or some dimensions, and `sum_to` (undoing broadcasting).

use std::sync::{Arc, OnceLock};

use ndarray::{ArrayD, Axis, IxDyn};

use crate::error::{Error, Result};
use crate::graph::node::{needs_grad, record};
use crate::kernels::copy::cast;
use crate::tensor::creation::{ensure_allocatable, try_filled};
use crate::tensor::shape::wrap_dim;
use crate::tensor::{DType, Dims, Element, Layout, Tensor};

/// Sorted, de-duplicated, wrapped dimensions; empty `dims` means all of them.
pub(crate) fn reduce_dims(dims: &[i64], ndim: usize) -> Result<Vec<usize>> {
    if dims.is_empty() {
        return Ok((0..ndim).collect());
    }
    let mut out = Vec::with_capacity(dims.len());
    for &d in dims {
        let w = wrap_dim(d, ndim)?;
        if out.contains(&w) {
            return Err(crate::error::Error::runtime(format!(
                "dim {w} appears multiple times in the list of dims"
            )));
        }
        out.push(w);
    }
    out.sort_unstable();
    if ndim == 0 {
        out.clear();
    }
    Ok(out)
}

/// The shape after reducing `dims` with `keepdim`.
pub(crate) fn reduced_shape(shape: &[usize], dims: &[usize], keepdim: bool) -> Dims {
    shape
        .iter()
        .enumerate()
        .filter_map(|(i, &s)| {
            if dims.contains(&i) {
                keepdim.then_some(1)
            } else {
                Some(s)
            }
        })
        .collect()
}

fn sum_kernel<T: Element + num_traits::Zero + std::ops::Add<Output = T>>(
    t: &Tensor,
    dims: &[usize],
    keepdim: bool,
    scale: fn(T, usize) -> T,
) -> Result<Tensor> {
    let out_shape = reduced_shape(t.shape(), dims, keepdim);
    if t.numel() == 0 {
        // Nothing to add, whatever the sizes of the other dims: never walk them.
        return try_filled(&out_shape, T::DTYPE, 0.0);
    }
    // A reduced dim along which the view repeats one element (stride 0: an expanded tensor)
    // adds the same partial sums `size` times. Sum without it and scale once, so an expanded
    // tensor (every sum's gradient is one) is neither copied nor walked element by element.
    let mut layout = t.layout().clone();
    let mut repeats = 1usize;
    for &d in dims {
        if layout.strides[d] == 0 && layout.shape[d] > 1 {
            repeats *= layout.shape[d];
            layout.shape[d] = 1;
        }
    }
    let t = &t.alias_with_layout(layout);
    // The sums, scaled once for the repeats, as the output tensor.
    let finish = |mut v: Vec<T>| {
        if repeats > 1 {
            v.iter_mut().for_each(|x| *x = scale(*x, repeats));
        }
        Tensor::from_vec(v, &out_shape)
    };
    // Size-1 dims change neither the elements nor their order. Without them a `(2000, 1)`
    // column summed over 0 (the bias gradient of `Linear(n, 1)`) is one contiguous run, where
    // ndarray's per-axis sum added 2000 one-element rows, allocating for each (140 µs; 2 in
    // torch).
    let shape = t.shape();
    if shape.len() > 1 && shape.contains(&1) {
        let keep: Vec<usize> = (0..shape.len()).filter(|&d| shape[d] != 1).collect();
        let squeezed = Layout {
            shape: keep.iter().map(|&d| shape[d]).collect(),
            strides: keep.iter().map(|&d| t.layout().strides[d]).collect(),
            offset: t.layout().offset,
        };
        let rd: Vec<usize> = (0..keep.len())
            .filter(|&i| dims.contains(&keep[i]))
            .collect();
        let sum = sum_kernel(&t.alias_with_layout(squeezed), &rd, false, scale)?;
        return finish(sum.to_vec::<T>()?);
    }
    let runs = match sum_trailing_runs(t, dims, scale)? {
        Some(v) => Some(v),
        None => sum_row_blocks(t, dims)?,
    };
    if let Some(v) = runs {
        return finish(v);
    }
    let arr: ArrayD<T> = if dims.len() == t.dim() && t.is_contiguous() {
        let s = t.with_contiguous_slice::<T, _>(|s| sum_slice(s))?;
        ArrayD::from_elem(IxDyn(&[]), s)
    } else {
        // The first partial sum is the largest buffer made here.
        let first = dims.last().map_or(1, |&d| t.shape()[d].max(1));
        ensure_allocatable(t.numel() / first, T::DTYPE)?;
        t.with_view::<T, _>(|v| match dims.split_last() {
            None => v.to_owned(),
            Some((&last, rest)) => rest
                .iter()
                .rev()
                .fold(v.sum_axis(Axis(last)), |a, &d| a.sum_axis(Axis(d))),
        })?
    };
    // sum_axis returns row-major arrays, so the raw vector is already in order.
    finish(if arr.is_standard_layout() {
        arr.into_raw_vec_and_offset().0
    } else {
        arr.iter().copied().collect()
    })
}

/// A contiguous tensor whose reduced dims include its last ones (a bias gradient `(N, C, H, W)`
/// over `(0, 2, 3)`, spatial means): each trailing run is summed by [`sum_slice`], rows shared
/// among threads, and only the rest goes through ndarray's per-axis sums. `None` otherwise.
fn sum_trailing_runs<T: Element + num_traits::Zero + std::ops::Add<Output = T>>(
    t: &Tensor,
    dims: &[usize],
    scale: fn(T, usize) -> T,
) -> Result<Option<Vec<T>>> {
    let nd = t.dim();
    let mut k = nd;
    while k > 0 && dims.contains(&(k - 1)) {
        k -= 1;
    }
    let run: usize = t.shape()[k..].iter().product();
    if k == 0 || k == nd || run < 16 || !t.is_contiguous() {
        return Ok(None);
    }
    let rows = t.numel() / run;
    let mut partial = crate::tensor::creation::try_vec::<T>(rows)?;
    partial.resize(rows, T::zero());
    t.with_contiguous_slice::<T, _>(|s| {
        let out = crate::parallel::SendPtr(partial.as_mut_ptr());
        // A few blocks per thread: one per row made every row a trip through the work board.
        let blocks = if t.numel() >= 1 << 16 {
            rows.min(4 * (crate::parallel::helpers() + 1))
        } else {
            1
        };
        let helpers = if blocks > 1 {
            crate::parallel::helpers()
        } else {
            0
        };
        crate::parallel::share_work(helpers, blocks, &|b| {
            let (lo, hi) = (b * rows / blocks, (b + 1) * rows / blocks);
            for r in lo..hi {
                // SAFETY: row r is written by this block alone; `partial` has `rows` slots.
                unsafe { *out.get().add(r) = sum_slice(&s[r * run..(r + 1) * run]) };
            }
        });
    })?;
    let rest: Vec<usize> = dims.iter().copied().filter(|&d| d < k).collect();
    if rest.is_empty() {
        return Ok(Some(partial));
    }
    let pt = Tensor::from_vec(partial, &t.shape()[..k])?;
    Ok(Some(sum_kernel(&pt, &rest, false, scale)?.to_vec::<T>()?))
}

/// A contiguous tensor reduced over consecutive dims that stop before its last one: seen as
/// `(outer, rows, cols)` (`outer` 1 for a bias gradient `(N, C)` over `0`; `(B, T, C)` over
/// `1` a mean over time), each column of each outer block is summed down its rows in row
/// order, as ndarray's `sum_axis` does, with outer blocks and bands of columns shared among
/// threads, so every sum is the same at any thread count. ndarray's per-axis sum, which these
/// took before, spent ~100 ns a row on one thread ((2000, 10) over 0: 206 µs, torch 4;
/// (64, 100, 3) over 1: 41 µs, torch 9). `None` when the tensor is not of that form.
fn sum_row_blocks<T: Element + num_traits::Zero + std::ops::Add<Output = T>>(
    t: &Tensor,
    dims: &[usize],
) -> Result<Option<Vec<T>>> {
    let (Some(&first), nd) = (dims.first(), t.dim()) else {
        return Ok(None);
    };
    let end = first + dims.len();
    let consecutive = dims.iter().enumerate().all(|(i, &d)| d == first + i);
    if !consecutive || end >= nd || !t.is_contiguous() {
        return Ok(None);
    }
    let shape = t.shape();
    let outer: usize = shape[..first].iter().product();
    let rows: usize = shape[first..end].iter().product();
    let cols: usize = shape[end..].iter().product();
    let mut out = crate::tensor::creation::try_vec::<T>(outer * cols)?;
    out.resize(outer * cols, T::zero());
    let big = t.numel() >= 1 << 16;
    let threads = crate::parallel::helpers() + 1;
    // Bands of whole cache lines (16 floats), at least 64 columns each, when there are fewer
    // outer blocks than threads.
    let bands = if big && outer < threads {
        threads.min(cols / 64).max(1)
    } else {
        1
    };
    let width = cols.div_ceil(bands).div_ceil(16) * 16;
    let bands = cols.div_ceil(width);
    let units = outer * bands;
    let blocks = if big { units.min(4 * threads) } else { 1 };
    t.with_contiguous_slice::<T, _>(|s| {
        let dst = crate::parallel::SendPtr(out.as_mut_ptr());
        let helpers = if blocks > 1 {
            crate::parallel::helpers()
        } else {
            0
        };
        crate::parallel::share_work(helpers, blocks, &|c| {
            for u in c * units / blocks..(c + 1) * units / blocks {
                let (o, b) = (u / bands, u % bands);
                let (lo, hi) = (b * width, ((b + 1) * width).min(cols));
                // SAFETY: columns lo..hi of outer block o are written by this unit alone;
                // `out` has `outer * cols` slots.
                let acc = unsafe {
                    std::slice::from_raw_parts_mut(dst.get().add(o * cols + lo), hi - lo)
                };
                let block = &s[o * rows * cols..(o + 1) * rows * cols];
                for row in block.chunks_exact(cols) {
                    for (a, &x) in acc.iter_mut().zip(&row[lo..hi]) {
                        *a = *a + x;
                    }
                }
            }
        });
    })?;
    Ok(Some(out))
}

/// Pairwise summation over blocks: the error grows with log n rather than n, and since the split
/// points depend only on the length, the result is the same at any thread count. Halves of
/// large slices are summed on two threads.
fn sum_slice<T: Element + num_traits::Zero + std::ops::Add<Output = T>>(s: &[T]) -> T {
    // 16 independent accumulators let the block loop run as two or four vector adds per step;
    // each sums only BLOCK/16 elements before the pairwise tree takes over.
    const LANES: usize = 16;
    const BLOCK: usize = 512;
    if s.len() <= BLOCK {
        let mut acc = [T::zero(); LANES];
        let chunks = s.chunks_exact(LANES);
        let rem = chunks.remainder();
        for c in chunks {
            for k in 0..LANES {
                acc[k] = acc[k] + c[k];
            }
        }
        let mut width = LANES;
        while width > 1 {
            width /= 2;
            for k in 0..width {
                acc[k] = acc[k] + acc[k + width];
            }
        }
        let mut total = acc[0];
        for &r in rem {
            total = total + r;
        }
        return total;
    }
    let mid = (s.len() / 2).div_ceil(BLOCK) * BLOCK;
    let (lo, hi) = s.split_at(mid);
    let helpers = crate::parallel::helpers();
    if s.len() >= crate::ops::elementwise::PAR_MIN_ELEMENTS && helpers > 0 {
        let halves = [lo, hi];
        let sums: [OnceLock<T>; 2] = Default::default();
        crate::parallel::share_work(helpers, 2, &|i| {
            let _ = sums[i].set(sum_slice(halves[i]));
        });
        // share_work ran both halves (or re-raised a panic); recomputing is the safe fallback.
        let [a, b] = sums;
        a.into_inner().unwrap_or_else(|| sum_slice(lo))
            + b.into_inner().unwrap_or_else(|| sum_slice(hi))
    } else {
        sum_slice(lo) + sum_slice(hi)
    }
}

impl Tensor {
    /// Sum of all elements (integers and bools sum to int64).
    pub fn sum(&self) -> Result<Tensor> {
        self.sum_dims(&[], false)
    }

    /// Sum over `dims` (empty: all), keeping them as size 1 with `keepdim`.
    pub fn sum_dims(&self, dims: &[i64], keepdim: bool) -> Result<Tensor> {
        let rd = reduce_dims(dims, self.dim())?;
        let batched = crate::ops::batching::on_physical(self, |p| {
            if rd.is_empty() {
                // A 0-d sample sums to itself (integers widen to int64).
                let dt = if p.dtype().is_float() {
                    p.dtype()
                } else {
                    DType::Int64
                };
                return cast(p, dt);
            }
            p.sum_dims(&crate::ops::batching::shifted(&rd), keepdim)
        });
        let out = match batched {
            Some(r) => r?,
            None => self.sum_kernel_dims(&rd, keepdim)?,
        };
        if needs_grad(&[self]) {
            let in_shape: Dims = self.shape().into();
            let keep_shape = reduced_shape(self.shape(), &rd, true);
            let name = if dims.is_empty() {
                "SumBackward0"
            } else {
                "SumBackward1"
            };
            record(name, &[self], &[&out], &[], false, move |g, _| {
                Ok(vec![Some(g[0].reshape(&keep_shape)?.expand(&in_shape)?)])
            })?;
        }
        Ok(out)
    }

    /// Mean of all elements (floats only, like torch).
    pub fn mean(&self) -> Result<Tensor> {
        self.mean_dims(&[], false)
    }

    /// Mean over `dims` (empty: all).
    pub fn mean_dims(&self, dims: &[i64], keepdim: bool) -> Result<Tensor> {
        if !self.dtype().is_float() {
            return Err(crate::error::Error::runtime(format!(
                "mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: {}",
                crate::tensor::scalar_type_name(self.dtype())
            )));
        }
        let rd = reduce_dims(dims, self.dim())?;
        let n: usize = rd.iter().map(|&d| self.shape()[d]).product();
        let s = {
            let _g = crate::tensor::grad_mode::GradModeGuard::new(false);
            self.sum_dims(dims, keepdim)?
        };
        let out = crate::ops::elementwise::map_float_fn(
            &s,
            move |x| x / n as f32,
            move |x| x / n as f64,
        )?;
        if needs_grad(&[self]) {
            let in_shape: Dims = self.shape().into();
            let keep_shape = reduced_shape(self.shape(), &rd, true);
            let name = if dims.is_empty() {
                "MeanBackward0"
            } else {
                "MeanBackward1"
            };
            record(name, &[self], &[&out], &[], false, move |g, _| {
                Ok(vec![Some(
                    g[0].div_scalar(n as f64)?
                        .reshape(&keep_shape)?
                        .expand(&in_shape)?,
                )])
            })?;
        }
        Ok(out)
    }

    /// The kernel of [`Tensor::sum_dims`] over wrapped, sorted `rd`.
    fn sum_kernel_dims(&self, rd: &[usize], keepdim: bool) -> Result<Tensor> {
        match self.dtype() {
            DType::Float32 => {
                sum_kernel::<f32>(self, rd, keepdim, |x, n| (x as f64 * n as f64) as f32)
            }
            DType::Float64 => sum_kernel::<f64>(self, rd, keepdim, |x, n| x * n as f64),
            // Half types accumulate in float32 and round once (torch's CPU sum).
            d if d.is_half() => {
                crate::kernels::copy::via_compute(self, |w| w.sum_kernel_dims(rd, keepdim))
            }
            _ => sum_kernel::<i64>(&cast(self, DType::Int64)?, rd, keepdim, |x, n| {
                x.wrapping_mul(n as i64)
            }),
        }
    }

    /// Sum this (broadcast) tensor down to `shape`, the inverse of broadcasting `shape` to it.
    pub fn sum_to(&self, shape: &[usize]) -> Result<Tensor> {
        if self.shape() == shape {
            return Ok(self.clone());
        }
        let lead = self.dim() - shape.len();
        let mut dims: Vec<i64> = (0..lead as i64).collect();
        for (i, &s) in shape.iter().enumerate() {
            if s == 1 && self.shape()[lead + i] != 1 {
                dims.push((lead + i) as i64);
            }
        }
        let r = if dims.is_empty() {
            self.clone()
        } else {
            self.sum_dims(&dims, true)?
        };
        r.reshape(shape)
    }
}

/// Whether a float tensor holds a NaN (anomaly mode).
pub(crate) fn has_nan(t: &Tensor) -> Result<bool> {
    if let Some((value, _, _)) = t.batch_parts() {
        return has_nan(value);
    }
    match t.dtype() {
        DType::Float32 => t.with_contiguous_slice::<f32, _>(|s| s.iter().any(|x| x.is_nan())),
        DType::Float64 => t.with_contiguous_slice::<f64, _>(|s| s.iter().any(|x| x.is_nan())),
        d if d.is_half() => has_nan(&cast(t, DType::Float32)?),
        _ => Ok(false),
    }
}

// ----- general reductions ------------------------------------------------------------------------

/// The elements of `t` regrouped so each reduction group (the elements sharing the kept
/// coordinates) is one contiguous run of `n`: returns the row-major data and `n`.
pub(crate) fn grouped<T: Element>(t: &Tensor, dims: &[usize]) -> Result<(Vec<T>, usize)> {
    let n: usize = dims.iter().map(|&d| t.shape()[d]).product();
    if dims.is_empty()
        || dims
            .iter()
            .enumerate()
            .all(|(i, &d)| d == t.dim() - dims.len() + i)
    {
        return Ok((t.to_vec::<T>()?, n));
    }
    let mut order: Vec<i64> = (0..t.dim())
        .filter(|d| !dims.contains(d))
        .map(|d| d as i64)
        .collect();
    order.extend(dims.iter().map(|&d| d as i64));
    let p = {
        let _g = crate::tensor::grad_mode::GradModeGuard::new(false);
        t.detach().permute(&order)?
    };
    Ok((p.to_vec::<T>()?, n))
}

/// `f` over each reduction group of `t` (dims already wrapped and sorted).
fn reduce_groups<T: Element, U: Element>(
    t: &Tensor,
    dims: &[usize],
    keepdim: bool,
    f: impl Fn(&[T]) -> U,
) -> Result<Tensor> {
    match crate::tensor::batched::unary_all(t, |p, nb| {
        let pd: Vec<usize> = dims.iter().map(|&d| d + nb).collect();
        reduce_groups_dense(p, &pd, keepdim, &f)
    }) {
        Some(r) => r,
        None => reduce_groups_dense(t, dims, keepdim, &f),
    }
}

fn reduce_groups_dense<T: Element, U: Element>(
    t: &Tensor,
    dims: &[usize],
    keepdim: bool,
    f: &impl Fn(&[T]) -> U,
) -> Result<Tensor> {
    let out_shape = reduced_shape(t.shape(), dims, keepdim);
    let (data, n) = grouped::<T>(t, dims)?;
    let groups: usize = out_shape.iter().product();
    let out: Vec<U> = if n == 0 {
        (0..groups).map(|_| f(&[])).collect()
    } else {
        data.chunks(n).map(f).collect()
    };
    Tensor::from_vec(out, &out_shape)
}

/// The gradient `g` of a reduction over `dims` that picked the value `out` of `x`, shared evenly
/// among the elements equal to it (or among the NaNs when it is NaN), as torch's
/// `evenly_distribute_backward`; differentiable. `keep_shape` is `out`'s shape with `dims` kept.
pub(crate) fn evenly_distribute(
    g: &Tensor,
    x: &Tensor,
    out: &Tensor,
    keep_shape: &[usize],
    in_shape: &[usize],
    dims: &[i64],
) -> Result<Tensor> {
    let ok = out.reshape(keep_shape)?;
    let mask = x
        .eq_t(&ok)?
        .logical_or(&x.isnan()?.logical_and(&ok.isnan()?)?)?;
    let count = mask.sum_dims(dims, true)?;
    let share = g
        .reshape(keep_shape)?
        .div(&cast(&count, g.dtype())?)?
        .expand(in_shape)?;
    let zero = Tensor::wrapped_scalar(0.0, g.dtype());
    Tensor::where_cond(&mask, &share, &zero)
}

/// Records `out`, the value a reduction of `x` over `dims` picked, with the backward
/// [`evenly_distribute`] (max, min, median over all elements).
pub(crate) fn record_evenly_distributed(
    name: &'static str,
    x: &Tensor,
    out: &Tensor,
    dims: &[usize],
) -> Result<()> {
    let in_shape: Dims = x.shape().into();
    let keep_shape = reduced_shape(x.shape(), dims, true);
    let dims: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
    record(name, &[x], &[out], &[x, out], false, move |g, s| {
        Ok(vec![Some(evenly_distribute(
            &g[0],
            &s[0],
            &s[1],
            &keep_shape,
            &in_shape,
            &dims,
        )?)])
    })
}

/// Torch's error for reducing an empty dimension without identity (max, amin, argmax, ...).
fn check_nonempty(t: &Tensor, dims: &[usize], op: &str) -> Result<()> {
    if t.numel() != 0 {
        return Ok(());
    }
    for &d in dims {
        if t.shape()[d] == 0 {
            return Err(Error::index(format!(
                "{op}(): Expected reduction dim {d} to have non-zero size."
            )));
        }
    }
    if dims.is_empty() && t.dim() > 0 || dims.len() == t.dim() {
        return Err(Error::runtime(format!(
            "{op}(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim with the 'dim' argument."
        )));
    }
    Ok(())
}

/// Largest (or smallest) element and its position within a group; NaN wins (first NaN).
fn arg_extreme<F: Copy + PartialOrd>(s: &[F], is_max: bool) -> (usize, F) {
    let mut best = 0;
    #[allow(clippy::eq_op)]
    let is_nan = |v: F| v != v;
    for (i, &v) in s.iter().enumerate().skip(1) {
        let b = s[best];
        if is_nan(b) {
            break;
        }
        if is_nan(v) || (is_max && v > b) || (!is_max && v < b) {
            best = i;
        }
    }
    (best, s[best])
}

/// Row-major flat positions in `shape` of the elements picked by `idx` (one per group, the
/// position within the group) when reducing the single dimension `dim`.
fn picked_positions(shape: &[usize], dim: usize, idx: &[i64]) -> Vec<usize> {
    let n = shape[dim];
    let inner: usize = shape[dim + 1..].iter().product();
    idx.iter()
        .enumerate()
        .map(|(g, &i)| {
            let (outer, rest) = (g / inner.max(1), g % inner.max(1));
            outer * n * inner + i as usize * inner + rest
        })
        .collect()
}

/// Flat row-major indices mapping each position of `shape` to the one with coordinate `f(i)`
/// along `dim` (the rest kept): the gather behind flip and shift.
fn remap_dim(shape: &[usize], dim: usize, f: impl Fn(usize, usize) -> usize) -> Vec<usize> {
    let n = shape[dim];
    let inner: usize = shape[dim + 1..].iter().product();
    let total: usize = shape.iter().product();
    (0..total)
        .map(|p| {
            let outer = p / (n * inner);
            let i = (p / inner) % n;
            let rest = p % inner;
            outer * n * inner + f(i, n) * inner + rest
        })
        .collect()
}

impl Tensor {
    /// This tensor reversed along `dim` (differentiable: a gather whose adjoint is a scatter).
    pub(crate) fn flip_dim(&self, dim: usize) -> Result<Tensor> {
        if self.numel() == 0 {
            return Ok(self.clone());
        }
        let idx = Arc::new(remap_dim(self.shape(), dim, |i, n| n - 1 - i));
        self.take_flat(&idx, self.shape())
    }

    /// Shifted one step along `dim` (element `i` takes `i - 1`) with 1 in the first slot.
    fn shift_right_one(&self, dim: usize) -> Result<Tensor> {
        if self.numel() == 0 {
            return Ok(self.clone());
        }
        let idx = Arc::new(remap_dim(self.shape(), dim, |i, _| i.saturating_sub(1)));
        let taken = self.take_flat(&idx, self.shape())?;
        let first = Arc::new(remap_dim(self.shape(), dim, |i, _| i));
        let mask: Vec<bool> = {
            let n = self.shape()[dim];
            let inner: usize = self.shape()[dim + 1..].iter().product();
            first
                .iter()
                .map(|&p| (p / inner).is_multiple_of(n))
                .collect()
        };
        let mask = Tensor::from_vec(mask, self.shape())?;
        Tensor::where_cond(&mask, &Tensor::wrapped_scalar(1.0, self.dtype()), &taken)
    }

    /// For each element, the product of the others along `dim` (zeros handled), with
    /// differentiable exclusive cumulative products from both ends.
    fn prod_others_dim(&self, dim: usize) -> Result<Tensor> {
        let d = dim as i64;
        let left = self.cumprod(d)?.shift_right_one(dim)?;
        let right = self
            .flip_dim(dim)?
            .cumprod(d)?
            .shift_right_one(dim)?
            .flip_dim(dim)?;
        left.mul(&right)
    }

    /// Product of all elements (integers and bools give int64).
    pub fn prod(&self) -> Result<Tensor> {
        self.prod_dims(&[], false)
    }

    /// Product over `dims` (empty: all). The gradient is the product of the other elements,
    /// exact when zeros are present (no division by them).
    pub fn prod_dims(&self, dims: &[i64], keepdim: bool) -> Result<Tensor> {
        let rd = reduce_dims(dims, self.dim())?;
        let out = match self.dtype() {
            DType::Float32 => {
                reduce_groups::<f32, f32>(self, &rd, keepdim, |s| s.iter().product())?
            }
            DType::Float64 => {
                reduce_groups::<f64, f64>(self, &rd, keepdim, |s| s.iter().product())?
            }
            d if d.is_half() => crate::kernels::copy::via_compute(self, |w| {
                reduce_groups::<f32, f32>(w, &rd, keepdim, |s| s.iter().product())
            })?,
            _ => reduce_groups::<i64, i64>(&cast(self, DType::Int64)?, &rd, keepdim, |s| {
                s.iter().fold(1i64, |a, &b| a.wrapping_mul(b))
            })?,
        };
        if needs_grad(&[self]) {
            let in_shape: Dims = self.shape().into();
            let keep_shape = reduced_shape(self.shape(), &rd, true);
            let name = if dims.is_empty() {
                "ProdBackward0"
            } else {
                "ProdBackward1"
            };
            let rd2 = rd.clone();
            record(name, &[self], &[&out], &[self, &out], false, move |g, s| {
                let (x, out) = (&s[0], &s[1]);
                let gk = g[0].reshape(&keep_shape)?.expand(&in_shape)?;
                let others = if !has_zero(x)? {
                    out.reshape(&keep_shape)?.expand(&in_shape)?.div(x)?
                } else {
                    prod_others(x, &rd2)?
                };
                Ok(vec![Some(gk.mul(&others)?)])
            })?;
        }
        Ok(out)
    }

    /// Largest elements over `dims` (empty: all). The gradient is split evenly among ties.
    pub fn amax(&self, dims: &[i64], keepdim: bool) -> Result<Tensor> {
        self.extreme_reduce(dims, keepdim, true, "amax", "AmaxBackward0")
    }

    /// Smallest elements over `dims` (empty: all). The gradient is split evenly among ties.
    pub fn amin(&self, dims: &[i64], keepdim: bool) -> Result<Tensor> {
        self.extreme_reduce(dims, keepdim, false, "amin", "AminBackward0")
    }

    /// The largest element (`x.max()`); ties share the gradient evenly, as in torch.
    pub fn max_all(&self) -> Result<Tensor> {
        self.extreme_reduce(&[], false, true, "max", "MaxBackward1")
    }

    /// The smallest element (`x.min()`); ties share the gradient evenly, as in torch.
    pub fn min_all(&self) -> Result<Tensor> {
        self.extreme_reduce(&[], false, false, "min", "MinBackward1")
    }

    fn extreme_reduce(
        &self,
        dims: &[i64],
        keepdim: bool,
        is_max: bool,
        op: &str,
        name: &'static str,
    ) -> Result<Tensor> {
        let rd = reduce_dims(dims, self.dim())?;
        if self.numel() == 0 && (op == "max" || op == "min") {
            return Err(Error::runtime(format!(
                "{op}(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim with the 'dim' argument."
            )));
        }
        check_nonempty(self, &rd, op)?;
        let out = crate::tensor::storage::with_dtype!(self.dtype(), T => {
            reduce_groups::<T, T>(self, &rd, keepdim, |s| arg_extreme(s, is_max).1)?
        });
        if needs_grad(&[self]) {
            record_evenly_distributed(name, self, &out, &rd)?;
        }
        Ok(out)
    }

    /// Positions of the largest (`is_max`) or smallest elements along `dim` (`None`: of the
    /// flattened tensor), int64; the first one among ties; NaN counts as the extreme.
    pub fn arg_extreme(&self, dim: Option<i64>, keepdim: bool, is_max: bool) -> Result<Tensor> {
        let op = if is_max { "argmax" } else { "argmin" };
        let (rd, src) = match dim {
            None => {
                if self.numel() == 0 {
                    return Err(Error::index(format!(
                        "{op}(): Expected reduction dim to be specified for input.numel() == 0."
                    )));
                }
                (vec![0], self.reshape(&[self.numel()])?.detach())
            }
            Some(d) => {
                let w = reduce_dims(&[d], self.dim())?;
                check_nonempty(self, &w, op)?;
                (w, self.detach())
            }
        };
        let out = crate::tensor::storage::with_dtype!(src.dtype(), T => {
            reduce_groups::<T, i64>(&src, &rd, keepdim, |s| arg_extreme(s, is_max).0 as i64)?
        });
        if dim.is_none() && keepdim {
            return out.reshape(&vec![1; self.dim()]);
        }
        Ok(out)
    }

    /// `(values, indices)` of the largest (`is_max`) or smallest elements along `dim`, like
    /// `x.max(dim)`. The values are gathered from `self`, so the gradient goes to the chosen
    /// index only (torch's rule for the dim form).
    pub fn extreme_dim(&self, dim: i64, keepdim: bool, is_max: bool) -> Result<(Tensor, Tensor)> {
        let w = reduce_dims(&[dim], self.dim())?;
        check_nonempty(self, &w, if is_max { "max" } else { "min" })?;
        let idx = self.arg_extreme(Some(dim), keepdim, is_max)?;
        let name = if is_max {
            "MaxBackward0"
        } else {
            "MinBackward0"
        };
        if idx.is_batched() && self.dim() > 0 {
            // Inside vmap each sample picks its own positions.
            let keep = if keepdim {
                idx.clone()
            } else {
                idx.unsqueeze(w[0] as i64)?
            };
            let values = crate::ops::batching::picked_along(self, w[0], &keep, !keepdim, name)?;
            return Ok((values, idx));
        }
        let pos = if self.dim() == 0 {
            vec![0]
        } else {
            picked_positions(self.shape(), w[0], &idx.to_vec::<i64>()?)
        };
        let pos = Arc::new(pos);
        let values = {
            let _g = crate::tensor::grad_mode::GradModeGuard::new(false);
            self.detach().take_flat(&pos, idx.shape())?
        };
        if needs_grad(&[self]) {
            let in_shape: Dims = self.shape().into();
            record(name, &[self], &[&values], &[], false, move |g, _| {
                // The gradient goes to the chosen index only (a scatter, whose adjoint is the
                // gather again, so this is differentiable too).
                Ok(vec![Some(g[0].scatter_add_flat(&in_shape, &pos)?)])
            })?;
        }
        Ok((values, idx))
    }

    /// Whether all elements (over `dims`; empty: all) are nonzero (bool result).
    pub fn all_dims(&self, dims: &[i64], keepdim: bool) -> Result<Tensor> {
        let rd = reduce_dims(dims, self.dim())?;
        reduce_groups::<bool, bool>(&cast(self, DType::Bool)?, &rd, keepdim, |s| {
            s.iter().all(|&b| b)
        })
    }

    /// Whether any element (over `dims`; empty: all) is nonzero (bool result).
    pub fn any_dims(&self, dims: &[i64], keepdim: bool) -> Result<Tensor> {
        let rd = reduce_dims(dims, self.dim())?;
        reduce_groups::<bool, bool>(&cast(self, DType::Bool)?, &rd, keepdim, |s| {
            s.iter().any(|&b| b)
        })
    }

    /// Variance over `dims` (empty: all) divided by `N - correction` (torch's `correction`,
    /// default 1). Built from differentiable ops, so it is differentiable to any order.
    pub fn var_dims(&self, dims: &[i64], correction: f64, keepdim: bool) -> Result<Tensor> {
        if !self.dtype().is_float() {
            return Err(Error::not_implemented(
                "std and var only support floating point and complex dtypes",
            ));
        }
        let rd = reduce_dims(dims, self.dim())?;
        let n: usize = rd.iter().map(|&d| self.shape()[d]).product();
        let denom = (n as f64 - correction).max(0.0);
        let out = {
            let _g = crate::tensor::grad_mode::GradModeGuard::new(false);
            let x = self.detach();
            let dev = x.sub(&x.mean_dims(dims, true)?)?;
            dev.mul(&dev)?.sum_dims(dims, keepdim)?.div_scalar(denom)?
        };
        if needs_grad(&[self]) {
            let keep_shape = reduced_shape(self.shape(), &rd, true);
            let dims_v = dims.to_vec();
            record(
                "VarBackward0",
                &[self],
                &[&out],
                &[self],
                true,
                move |g, s| {
                    // d var / dx = 2 (x - mean) / (N - correction)
                    let x = &s[0];
                    let dev = x.sub(&x.mean_dims(&dims_v, true)?)?;
                    Ok(vec![Some(
                        g[0].reshape(&keep_shape)?
                            .mul(&dev)?
                            .mul_scalar(2.0 / denom)?,
                    )])
                },
            )?;
        }
        Ok(out)
    }

    /// Standard deviation: the square root of [`Tensor::var_dims`]; d/dx = (x - mean) /
    /// ((N - correction) std), so a zero std gives NaN/inf gradients as in torch.
    pub fn std_dims(&self, dims: &[i64], correction: f64, keepdim: bool) -> Result<Tensor> {
        let out = {
            let _g = crate::tensor::grad_mode::GradModeGuard::new(false);
            self.detach().var_dims(dims, correction, keepdim)?.sqrt()?
        };
        if needs_grad(&[self]) {
            let rd = reduce_dims(dims, self.dim())?;
            let n: usize = rd.iter().map(|&d| self.shape()[d]).product();
            let denom = (n as f64 - correction).max(0.0);
            let keep_shape = reduced_shape(self.shape(), &rd, true);
            let dims_v = dims.to_vec();
            record(
                "StdBackward0",
                &[self],
                &[&out],
                &[self, &out],
                true,
                move |g, s| {
                    let (x, sd) = (&s[0], &s[1].reshape(&keep_shape)?);
                    let dev = x.sub(&x.mean_dims(&dims_v, true)?)?;
                    let scale = g[0].reshape(&keep_shape)?.div(&sd.mul_scalar(denom)?)?;
                    Ok(vec![Some(dev.mul(&scale)?)])
                },
            )?;
        }
        Ok(out)
    }

    /// The vector `ord`-norm over `dims` (empty: all), like `torch.linalg.vector_norm`:
    /// `ord` = inf/-inf are max/min |x|, 0 counts nonzeros, otherwise (Σ|x|^p)^(1/p). The
    /// subgradient is 0 where the norm is 0 (torch's choice).
    pub fn vector_norm(&self, ord: f64, dims: &[i64], keepdim: bool) -> Result<Tensor> {
        if !self.dtype().is_float() {
            return Err(Error::not_implemented(format!(
                "linalg.vector_norm: Expected a floating point or complex tensor as input. Got {}",
                crate::tensor::scalar_type_name(self.dtype())
            )));
        }
        let rd = reduce_dims(dims, self.dim())?;
        if ord.is_infinite() {
            if self.numel() == 0 {
                return Err(Error::runtime(
                    "linalg.vector_norm cannot compute the inf norm on an empty tensor because the operation does not have an identity",
                ));
            }
            let a = self.abs()?;
            return if ord > 0.0 {
                a.amax(dims, keepdim)
            } else {
                a.amin(dims, keepdim)
            };
        }
        if ord == 0.0 {
            let nz = self.ne_scalar(0.0)?;
            let c = cast(&nz, self.dtype())?.sum_dims(dims, keepdim)?;
            if needs_grad(&[self]) {
                // Piecewise constant: zero gradient (through a multiply by 0).
                return c.add(&self.mul_scalar(0.0)?.sum_dims(dims, keepdim)?);
            }
            return Ok(c);
        }
        if ord == 1.0 {
            return self.abs()?.sum_dims(dims, keepdim);
        }
        let out = {
            let _g = crate::tensor::grad_mode::GradModeGuard::new(false);
            let s = self.abs()?.pow_scalar(ord)?.sum_dims(dims, keepdim)?;
            if ord == 2.0 {
                s.sqrt()?
            } else {
                s.pow_scalar(1.0 / ord)?
            }
        };
        if needs_grad(&[self]) {
            let in_shape: Dims = self.shape().into();
            let keep_shape = reduced_shape(self.shape(), &rd, true);
            record(
                "LinalgVectorNormBackward0",
                &[self],
                &[&out],
                &[self, &out],
                true,
                move |g, s| {
                    let (x, n) = (&s[0], &s[1].reshape(&keep_shape)?);
                    let gk = g[0].reshape(&keep_shape)?;
                    // d/dx (Σ|x|^p)^(1/p) = sign(x) |x|^(p-1) / n^(p-1)
                    let num = if ord == 2.0 {
                        x.clone()
                    } else {
                        x.sign()?.mul(&x.abs()?.pow_scalar(ord - 1.0)?)?
                    };
                    let den = if ord == 2.0 {
                        n.clone()
                    } else {
                        n.pow_scalar(ord - 1.0)?
                    };
                    let zero = Tensor::wrapped_scalar(0.0, gk.dtype());
                    let is0 = n.eq_scalar(0.0)?;
                    let safe_den =
                        Tensor::where_cond(&is0, &Tensor::wrapped_scalar(1.0, gk.dtype()), &den)?;
                    let scale = Tensor::where_cond(&is0, &zero, &gk.div(&safe_den)?)?;
                    Ok(vec![Some(num.mul(&scale.expand(&in_shape)?)?)])
                },
            )?;
        }
        Ok(out)
    }

    /// Cumulative sum along `dim` (integers and bools give int64); the gradient is the reversed
    /// cumulative sum of the incoming gradient.
    pub fn cumsum(&self, dim: i64) -> Result<Tensor> {
        let d = wrap_dim(dim, self.dim())?;
        let out = match self.dtype() {
            DType::Float32 => scan::<f32>(self, d, |a, b| a + b)?,
            DType::Float64 => scan::<f64>(self, d, |a, b| a + b)?,
            h if h.is_half() => {
                crate::kernels::copy::via_compute(self, |w| scan::<f32>(w, d, |a, b| a + b))?
            }
            _ => scan::<i64>(&cast(self, DType::Int64)?, d, i64::wrapping_add)?,
        };
        if needs_grad(&[self]) {
            record(
                "CumsumBackward0",
                &[self],
                &[&out],
                &[],
                false,
                move |g, _| {
                    if g[0].dim() == 0 {
                        return Ok(vec![Some(g[0].clone())]);
                    }
                    Ok(vec![Some(g[0].flip_dim(d)?.cumsum(d as i64)?.flip_dim(d)?)])
                },
            )?;
        }
        Ok(out)
    }

    /// Cumulative product along `dim`. The gradient is exact with zeros present: without zeros
    /// it is `rev_cumsum(g * out) / x`; with zeros, the sum over later outputs of the products
    /// that leave each element out (O(n²) in the length of `dim`).
    pub fn cumprod(&self, dim: i64) -> Result<Tensor> {
        let d = wrap_dim(dim, self.dim())?;
        let out = match self.dtype() {
            DType::Float32 => scan::<f32>(self, d, |a, b| a * b)?,
            DType::Float64 => scan::<f64>(self, d, |a, b| a * b)?,
            h if h.is_half() => {
                crate::kernels::copy::via_compute(self, |w| scan::<f32>(w, d, |a, b| a * b))?
            }
            _ => scan::<i64>(&cast(self, DType::Int64)?, d, i64::wrapping_mul)?,
        };
        if needs_grad(&[self]) {
            record(
                "CumprodBackward0",
                &[self],
                &[&out],
                &[self, &out],
                false,
                move |g, s| {
                    let (x, out) = (&s[0], &s[1]);
                    if x.dim() == 0 {
                        return Ok(vec![Some(g[0].clone())]);
                    }
                    if !has_zero(x)? {
                        let r = g[0].mul(out)?.flip_dim(d)?.cumsum(d as i64)?.flip_dim(d)?;
                        return Ok(vec![Some(r.div(x)?)]);
                    }
                    Ok(vec![Some(cumprod_grad_with_zeros(x, &g[0], d)?)])
                },
            )?;
        }
        Ok(out)
    }
}

/// Inclusive scan with `f` along `dim` (a contiguous result of the same shape). Batched: the
/// scan runs along `dim` behind the leading batch dimensions of the physical tensor.
fn scan<T: Element>(t: &Tensor, dim: usize, f: impl Fn(T, T) -> T) -> Result<Tensor> {
    let zero_d = t.dim() == 0;
    match crate::tensor::batched::unary_all(t, |p, nb| {
        // A 0-d sample scans to itself.
        if zero_d {
            Tensor::from_vec(p.to_vec::<T>()?, p.shape())
        } else {
            scan_dense(p, dim + nb, &f)
        }
    }) {
        Some(r) => r,
        None => scan_dense(t, dim, &f),
    }
}

fn scan_dense<T: Element>(t: &Tensor, dim: usize, f: &impl Fn(T, T) -> T) -> Result<Tensor> {
    let data = t.to_vec::<T>()?;
    if t.dim() == 0 || t.numel() == 0 {
        return Tensor::from_vec(data, t.shape());
    }
    let n = t.shape()[dim];
    let inner: usize = t.shape()[dim + 1..].iter().product();
    let mut out = data;
    for block in out.chunks_mut(n * inner) {
        for i in 1..n {
            for r in 0..inner {
                block[i * inner + r] = f(block[(i - 1) * inner + r], block[i * inner + r]);
            }
        }
    }
    Tensor::from_vec(out, t.shape())
}

/// Whether any element of `x` is zero; inside vmap, of any sample (the exact gradient path
/// that zeros need is then taken for the whole batch).
fn has_zero(x: &Tensor) -> Result<bool> {
    let x = crate::tensor::batched::innermost(x);
    Ok(x.eq_scalar(0.0)?.to_vec::<bool>()?.contains(&true))
}

/// For each element, the product of the others in its reduction group over `dims`.
fn prod_others(x: &Tensor, dims: &[usize]) -> Result<Tensor> {
    if x.dim() == 0 {
        return Ok(Tensor::ones(&[], x.dtype()));
    }
    let mut order: Vec<i64> = (0..x.dim())
        .filter(|d| !dims.contains(d))
        .map(|d| d as i64)
        .collect();
    order.extend(dims.iter().map(|&d| d as i64));
    let p = x.permute(&order)?;
    let kept: Vec<usize> = p.shape()[..x.dim() - dims.len()].to_vec();
    let n: usize = dims.iter().map(|&d| x.shape()[d]).product();
    let mut flat_shape = kept.clone();
    flat_shape.push(n);
    let last = flat_shape.len() - 1;
    let others = p.reshape(&flat_shape)?.prod_others_dim(last)?;
    let back = others.reshape(p.shape())?;
    let mut inverse = vec![0i64; order.len()];
    for (i, &o) in order.iter().enumerate() {
        inverse[o as usize] = i as i64;
    }
    back.permute(&inverse)
}

/// The cumprod gradient where `x` has zeros: for each k, Σ_{i≥k} g_i Π_{j≤i, j≠k} x_j, built
/// from differentiable ops on an n×n expansion along `dim`.
fn cumprod_grad_with_zeros(x: &Tensor, g: &Tensor, dim: usize) -> Result<Tensor> {
    let last = x.dim() as i64 - 1;
    let xt = x.transpose(dim as i64, last)?;
    let gt = g.transpose(dim as i64, last)?;
    let n = xt.shape()[xt.dim() - 1];
    let mut big: Vec<usize> = xt.shape().to_vec();
    big.insert(big.len() - 1, n);
    let xe = xt.unsqueeze(-2)?.expand(&big)?; // [..., k, j] = x_j
    let eye = Tensor::from_vec(
        (0..n * n).map(|p| p / n == p % n).collect::<Vec<bool>>(),
        &[n, n],
    )?;
    let tri = Tensor::from_vec(
        (0..n * n).map(|p| p % n >= p / n).collect::<Vec<bool>>(),
        &[n, n],
    )?;
    let one = Tensor::wrapped_scalar(1.0, x.dtype());
    let zero = Tensor::wrapped_scalar(0.0, x.dtype());
    let c = Tensor::where_cond(&eye, &one, &xe)?.cumprod(-1)?; // [k, i] = Π_{j≤i, j≠k} x_j
    let c = Tensor::where_cond(&tri, &c, &zero)?;
    let r = c.mul(&gt.unsqueeze(-2)?)?.sum_dims(&[-1], false)?;
    r.transpose(dim as i64, last)
}

impl Tensor {
    /// Sum over `dims` (all when empty) with NaN taken as zero (torch's `nansum`; the gradient
    /// is zero at the NaNs). Composed of `where` and `sum`, so its node is `SumBackward`.
    pub fn nansum(&self, dims: &[i64], keepdim: bool) -> Result<Tensor> {
        if !self.dtype().is_float() {
            return self.sum_dims(dims, keepdim);
        }
        let zero = Tensor::wrapped_scalar(0.0, self.dtype());
        Tensor::where_cond(&self.isnan()?, &zero, self)?.sum_dims(dims, keepdim)
    }

    /// The mean over `dims` (all when empty) of the elements that are not NaN (NaN where every
    /// one is), torch's `nanmean`: `nansum / count`.
    pub fn nanmean(&self, dims: &[i64], keepdim: bool) -> Result<Tensor> {
        if !self.dtype().is_float() {
            return Err(Error::runtime(format!(
                "nanmean(): expected input to have floating point or complex dtype but got {}",
                crate::tensor::scalar_type_name(self.dtype())
            )));
        }
        let count = {
            let _g = crate::tensor::grad_mode::GradModeGuard::new(false);
            self.isnan()?
                .logical_not()?
                .to_dtype(self.dtype())?
                .sum_dims(dims, keepdim)?
        };
        self.nansum(dims, keepdim)?.div(&count)
    }
}
