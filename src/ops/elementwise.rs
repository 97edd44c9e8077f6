//! Elementwise kernels: maps over one tensor and broadcasting zips over two.
//!
//! Operands that are contiguous in the output's shape, or a single value broadcast over it (a
//! number, or the expanded gradient of a sum), take slice loops that autovectorise; anything
//! else goes through ndarray's strided iteration. Outputs are written once into uninitialised
//! memory (no zero fill) and, for large tensors, in chunks across rayon's threads.

use std::borrow::Cow;
use std::mem::MaybeUninit;
use std::sync::Arc;

use multiversion::multiversion;
use ndarray::{IxDyn, Zip};
use parking_lot::RwLockReadGuard;

use crate::error::{Error, Result};
use crate::kernels::copy::cast;
use crate::kernels::vmath::UnaryF32;
use crate::parallel::{self, SendPtr};
use crate::tensor::creation::{checked_numel, ensure_allocatable};
use crate::tensor::shape::broadcast_shapes;
use crate::tensor::storage::Buffer;
use crate::tensor::{batched, DType, Element, Tensor};

/// Above this many elements, maps, zips and sums split the work across rayon threads. Waking
/// the pool costs ~15-20 µs from the Python thread on a busy 2-core machine; an add runs at
/// ~0.14 ns per element, so below ~256K elements the split loses (measured: 1M-element add
/// 140 µs on one thread vs 170 µs on two; 2M 540 vs 310 µs).
pub(crate) const PAR_MIN_ELEMENTS: usize = 1 << 18;

/// The same for the vectorised transcendental kernels (~0.5-1 ns per element). Measured on a
/// quiet machine: tanh of 192x192 (36,864 elements) takes 38 µs on one thread, 27 µs on two;
/// under load from other processes a second thread gains less (128K exp: 69 vs 84 µs).
pub(crate) const PAR_MIN_VMATH: usize = 1 << 15;

/// Elements the one-pass sums add a part at a time: the running sum stays in L1 (8 KiB of f32).
const SUM_BLOCK: usize = 2048;

/// Fewest elements per parallel chunk (16 KiB of f32): claiming a chunk costs an atomic
/// increment and, per helper, a cache line bouncing between cores.
const PAR_CHUNK_MIN: usize = 1 << 12;

/// `fill(start, chunk)` over consecutive chunks of `out`, `start` being the chunk's first index.
/// Parallel from `par_min` elements on; callers' chunks are independent, so the result does not
/// depend on the thread count.
fn for_chunks_mut<E: Send>(out: &mut [E], par_min: usize, fill: impl Fn(usize, &mut [E]) + Sync) {
    let n = out.len();
    let helpers = if n >= par_min { parallel::helpers() } else { 0 };
    if helpers == 0 {
        fill(0, out);
        return;
    }
    // A few chunks per thread, so one slowed thread (or a helper arriving late) holds up less;
    // multiples of 64 elements keep every chunk but the last aligned for SIMD.
    let chunk = n
        .div_ceil(4 * (helpers + 1))
        .max(PAR_CHUNK_MIN)
        .next_multiple_of(64);
    let base = SendPtr(out.as_mut_ptr());
    parallel::share_work(helpers, n.div_ceil(chunk), &|i| {
        let start = i * chunk;
        let len = chunk.min(n - start);
        // SAFETY: chunks are disjoint ranges of `out`, which outlives `share_work`.
        let c = unsafe { std::slice::from_raw_parts_mut(base.get().add(start), len) };
        fill(start, c);
    });
}

/// A vector of `n` elements built chunk by chunk: `fill(start, out)` writes elements
/// `start..start + out.len()` (see [`for_chunks_mut`]).
///
/// `fill` must write every slot of `out`; callers zip `out` with input slices of the same
/// length taken by indexing (which panics rather than leaving a slot unwritten).
pub(crate) fn collect_chunks<U: Send>(
    n: usize,
    par_min: usize,
    fill: impl Fn(usize, &mut [MaybeUninit<U>]) + Sync,
) -> Vec<U> {
    let mut v = Vec::with_capacity(n);
    for_chunks_mut(&mut v.spare_capacity_mut()[..n], par_min, fill);
    // SAFETY: `fill` wrote each of the first `n` slots (its contract above).
    unsafe { v.set_len(n) };
    v
}

/// How an operand covers the output's elements on a fast path.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Cover {
    /// Row-major, in the output's shape: element i is slice element i.
    Slice,
    /// One value broadcast everywhere (a 0-d or one-element tensor, or an all-zero-stride view).
    Uniform,
}

fn cover(t: &Tensor, shape: &[usize]) -> Option<Cover> {
    // A batched tensor's elements are reached only through its physical tensor.
    if t.is_batched() {
        return None;
    }
    if t.shape() == shape && t.is_contiguous() {
        return Some(Cover::Slice);
    }
    let l = t.layout();
    let uniform = t.numel() > 0
        && l.shape
            .iter()
            .zip(&l.strides)
            .all(|(&n, &s)| n == 1 || s == 0);
    uniform.then_some(Cover::Uniform)
}

/// The element a [`Cover::Uniform`] tensor repeats.
pub(crate) fn uniform_value<T: Element>(t: &Tensor) -> Result<T> {
    let guard = t.storage().read();
    let data = T::data(&guard).ok_or_else(|| crate::tensor::dtype_mismatch(T::DTYPE, t.dtype()))?;
    data.as_slice()
        .get(t.layout().offset)
        .copied()
        .ok_or_else(|| Error::runtime("internal error: tensor offset outside its storage"))
}

/// One operand of a fast kernel.
#[derive(Clone, Copy)]
enum Src<'a, T> {
    Slice(&'a [T]),
    Uniform(T),
}

/// Run `f` on `t` as a [`Src`] (holding its storage lock for the slice case).
fn with_src<T: Element, R>(t: &Tensor, c: Cover, f: impl FnOnce(Src<'_, T>) -> R) -> Result<R> {
    match c {
        Cover::Slice => t.with_contiguous_slice::<T, _>(|s| f(Src::Slice(s))),
        Cover::Uniform => Ok(f(Src::Uniform(uniform_value::<T>(t)?))),
    }
}

/// `out[i] = f(a[i], b[i])` for one chunk starting at element `start`.
///
/// Compiled for AVX2 besides the baseline (SSE2) and picked at run time: these loops are bound
/// by memory, and wider loads keep more of it in flight (4M-element float32 multiply on one
/// thread: 1.25 ms with SSE2, 1.01 ms with AVX2; NumPy 1.07 ms). An AVX-512 build of them was
/// no faster (deep_mlp, lstm_train and wide_graph within noise on an AVX-512 Xeon), so it is
/// left out. Only IEEE operations the closure spells out run, so every target gives the same
/// bits.
#[multiversion(targets("x86_64+avx2+avx+fma"))]
fn zip_chunk<T: Copy, U: Copy, F: Fn(T, T) -> U>(
    a: Src<'_, T>,
    b: Src<'_, T>,
    start: usize,
    out: &mut [MaybeUninit<U>],
    f: &F,
) {
    let r = start..start + out.len();
    match (a, b) {
        (Src::Slice(x), Src::Slice(y)) => {
            for ((o, &p), &q) in out.iter_mut().zip(&x[r.clone()]).zip(&y[r]) {
                o.write(f(p, q));
            }
        }
        (Src::Slice(x), Src::Uniform(q)) => {
            for (o, &p) in out.iter_mut().zip(&x[r]) {
                o.write(f(p, q));
            }
        }
        (Src::Uniform(p), Src::Slice(y)) => {
            for (o, &q) in out.iter_mut().zip(&y[r]) {
                o.write(f(p, q));
            }
        }
        (Src::Uniform(p), Src::Uniform(q)) => {
            let v = f(p, q);
            for o in out.iter_mut() {
                o.write(v);
            }
        }
    }
}

/// `out[i] = f(x[i])` for one chunk starting at element `start` (targets as [`zip_chunk`]).
#[multiversion(targets("x86_64+avx2+avx+fma"))]
fn map_chunk<T: Copy, U: Copy, F: Fn(T) -> U>(
    x: Src<'_, T>,
    start: usize,
    out: &mut [MaybeUninit<U>],
    f: &F,
) {
    match x {
        Src::Slice(x) => {
            let x = &x[start..start + out.len()];
            for (o, &v) in out.iter_mut().zip(x) {
                o.write(f(v));
            }
        }
        Src::Uniform(v) => {
            let y = f(v);
            for o in out.iter_mut() {
                o.write(y);
            }
        }
    }
}

/// `parts[0] + parts[1] + ...` in one pass, added left to right (the same bits as chained adds),
/// for float parts of one shape and dtype that are each contiguous or one broadcast value: the
/// engine's sum of the gradients reaching one input. `None` for any other case.
///
/// Chained adds would write and re-read an intermediate per part; a 4M-element sum of three
/// parts reads 48 MB and writes 16 MB here against 64 and 32.
pub(crate) fn sum_parts(parts: &[Tensor]) -> Result<Option<Tensor>> {
    let Some(first) = parts.first() else {
        return Ok(None);
    };
    let (shape, dtype) = (first.shape(), first.dtype());
    if parts
        .iter()
        .any(|p| p.shape() != shape || p.dtype() != dtype)
    {
        return Ok(None);
    }
    let Some(covers) = parts
        .iter()
        .map(|p| cover(p, shape))
        .collect::<Option<Vec<_>>>()
    else {
        return Ok(None);
    };
    match dtype {
        DType::Float32 => sum_parts_as::<f32>(parts, &covers).map(Some),
        DType::Float64 => sum_parts_as::<f64>(parts, &covers).map(Some),
        _ => Ok(None),
    }
}

fn sum_parts_as<T: Element + std::ops::Add<Output = T>>(
    parts: &[Tensor],
    covers: &[Cover],
) -> Result<Tensor> {
    let shape = parts[0].shape();
    let n = checked_numel(shape)?;
    if covers[0] == Cover::Slice && is_exclusive(&parts[0]) {
        // (The other parts have other storages: the first one's is not shared.)
        return add_parts_into::<T>(&parts[0], &parts[1..], &covers[1..], n)
            .map(|()| parts[0].clone());
    }
    let guards: Vec<_> = parts.iter().map(|p| p.storage().read()).collect();
    let srcs = part_srcs::<T>(parts, &guards, covers, n)?;
    let out = collect_chunks(n, PAR_MIN_ELEMENTS, |start, out| {
        for (k, block) in out.chunks_mut(SUM_BLOCK).enumerate() {
            let s = start + k * SUM_BLOCK;
            map_chunk(srcs[0], s, block, &|v: T| v);
            // SAFETY: map_chunk wrote every element of `block`.
            let acc = unsafe { &mut *(block as *mut [MaybeUninit<T>] as *mut [T]) };
            for &src in &srcs[1..] {
                add_into(acc, src, s);
            }
        }
    });
    Tensor::from_vec(out, shape)
}

/// The `n` elements of each part (read through `guards`, its storage locks) as kernel operands.
fn part_srcs<'g, T: Element>(
    parts: &[Tensor],
    guards: &'g [RwLockReadGuard<'_, Buffer>],
    covers: &[Cover],
    n: usize,
) -> Result<Vec<Src<'g, T>>> {
    let bad = || Error::runtime("internal error: tensor outside its storage");
    let mut srcs = Vec::with_capacity(parts.len());
    for ((p, g), c) in parts.iter().zip(guards).zip(covers) {
        let data = T::data(g).ok_or_else(|| crate::tensor::dtype_mismatch(T::DTYPE, p.dtype()))?;
        let off = p.layout().offset;
        srcs.push(match c {
            Cover::Slice => Src::Slice(data.as_slice().get(off..off + n).ok_or_else(bad)?),
            Cover::Uniform => Src::Uniform(*data.as_slice().get(off).ok_or_else(bad)?),
        });
    }
    Ok(srcs)
}

/// Nothing but this handle reaches `t` or its storage (a backward rule's fresh output), and it
/// spans its whole owned buffer: it may be overwritten in place unobserved.
fn is_exclusive(t: &Tensor) -> bool {
    Arc::strong_count(&t.0) == 1
        && Arc::weak_count(&t.0) == 0
        && Arc::strong_count(t.storage()) == 1
        && t.layout().offset == 0
        && {
            let buf = t.storage().read();
            buf.len() == t.numel() && buf.is_owned()
        }
}

/// `dst += others[0] + others[1] + ...` in place, for a contiguous `dst` (its elements at
/// its offset) and parts in other storages covering its shape: [`sum_parts`] into an exclusive
/// first part (no output buffer, no copy of it) and [`add_assign_nograd`].
fn add_parts_into<T: Element + std::ops::Add<Output = T>>(
    dst: &Tensor,
    others: &[Tensor],
    covers: &[Cover],
    n: usize,
) -> Result<()> {
    let off = dst.layout().offset;
    let mut acc_guard = dst.storage().write();
    let acc = T::data_mut(&mut acc_guard)
        .ok_or_else(|| crate::tensor::dtype_mismatch(T::DTYPE, dst.dtype()))?
        .as_mut_slice()
        .get_mut(off..off + n)
        .ok_or_else(|| Error::runtime("internal error: tensor outside its storage"))?;
    let guards: Vec<_> = others.iter().map(|p| p.storage().read()).collect();
    let srcs = part_srcs::<T>(others, &guards, covers, n)?;
    for_chunks_mut(acc, PAR_MIN_ELEMENTS, |start, out| {
        for (k, block) in out.chunks_mut(SUM_BLOCK).enumerate() {
            for &src in &srcs {
                add_into(block, src, start + k * SUM_BLOCK);
            }
        }
    });
    Ok(())
}

/// `dst += src` in place, without a graph, for a contiguous float `dst` and a `src` of its dtype
/// that is contiguous in its shape or one broadcast value, in other memory: accumulating into
/// `.grad` in one pass instead of an out-of-place sum and a copy back. `false` (nothing
/// written) for any other case.
pub(crate) fn add_assign_nograd(dst: &Tensor, src: &Tensor) -> Result<bool> {
    if src.dtype() != dst.dtype()
        || dst.is_batched()
        || !dst.is_contiguous()
        || Arc::ptr_eq(dst.storage(), src.storage())
    {
        return Ok(false);
    }
    let Some(c) = cover(src, dst.shape()) else {
        return Ok(false);
    };
    let n = checked_numel(dst.shape())?;
    let src = std::slice::from_ref(src);
    match dst.dtype() {
        DType::Float32 => add_parts_into::<f32>(dst, src, &[c], n).map(|()| true),
        DType::Float64 => add_parts_into::<f64>(dst, src, &[c], n).map(|()| true),
        _ => Ok(false),
    }
}

/// `dst[r, :] += row` for every row of `dst` (a whole number of `row.len()` runs), in place:
/// the bias of a fused `linear`. Parallel over rows from [`PAR_MIN_ELEMENTS`].
pub(crate) fn add_rows_assign<T: Element + std::ops::Add<Output = T>>(dst: &mut [T], row: &[T]) {
    let p = row.len();
    if p == 0 {
        return;
    }
    let rows = dst.len() / p;
    let per = PAR_CHUNK_MIN.div_ceil(p).max(1);
    let helpers = if dst.len() >= PAR_MIN_ELEMENTS {
        parallel::helpers()
    } else {
        0
    };
    if helpers == 0 {
        add_rows_chunk(dst, row);
        return;
    }
    let base = SendPtr(dst.as_mut_ptr());
    parallel::share_work(helpers, rows.div_ceil(per), &|i| {
        let lo = i * per;
        let hi = (lo + per).min(rows);
        // SAFETY: row ranges are disjoint parts of `dst`, which outlives `share_work`.
        let c = unsafe { std::slice::from_raw_parts_mut(base.get().add(lo * p), (hi - lo) * p) };
        add_rows_chunk(c, row);
    });
}

/// `dst[r, :] += row` over whole rows (targets as [`zip_chunk`]).
#[multiversion(targets("x86_64+avx2+avx+fma"))]
fn add_rows_chunk<T: Copy + std::ops::Add<Output = T>>(dst: &mut [T], row: &[T]) {
    for d in dst.chunks_exact_mut(row.len()) {
        for (a, &b) in d.iter_mut().zip(row) {
            *a = *a + b;
        }
    }
}

/// `acc[i] = acc[i] + x[start + i]` (targets as [`zip_chunk`]).
#[multiversion(targets("x86_64+avx2+avx+fma"))]
fn add_into<T: Copy + std::ops::Add<Output = T>>(acc: &mut [T], x: Src<'_, T>, start: usize) {
    match x {
        Src::Slice(x) => {
            let x = &x[start..start + acc.len()];
            for (a, &v) in acc.iter_mut().zip(x) {
                *a = *a + v;
            }
        }
        Src::Uniform(v) => {
            for a in acc.iter_mut() {
                *a = *a + v;
            }
        }
    }
}

/// A backward rule's `f(g)` when `g` is one value broadcast (the expanded gradient of a sum or
/// mean) and no graph of the backward is built: `f` of that one value, broadcast again. Scalar
/// rules (`g * c`, `g / c`, `-g`) would otherwise write n copies of one number for the next rule
/// to read back.
pub(crate) fn keep_uniform(
    g: &Tensor,
    f: impl FnOnce(&Tensor) -> Result<Tensor>,
) -> Result<Tensor> {
    let uniform = g.numel() > 1
        && !crate::graph::node::needs_grad(&[g])
        && cover(g, g.shape()) == Some(Cover::Uniform);
    if !uniform {
        return f(g);
    }
    let one = match g.dtype() {
        DType::Float32 => Tensor::from_vec(vec![uniform_value::<f32>(g)?], &[])?,
        DType::Float64 => Tensor::from_vec(vec![uniform_value::<f64>(g)?], &[])?,
        _ => return f(g),
    };
    f(&one)?.expand(g.shape())
}

/// `f` over every element of `t` (of type `T`), producing a new contiguous tensor.
pub(crate) fn map<T: Element, U: Element>(
    t: &Tensor,
    f: impl Fn(T) -> U + Sync + Send,
) -> Result<Tensor> {
    map_with(t, PAR_MIN_ELEMENTS, f)
}

/// [`map`], split across threads from `par_min` elements on (lower for costly `f`).
pub(crate) fn map_with<T: Element, U: Element>(
    t: &Tensor,
    par_min: usize,
    f: impl Fn(T) -> U + Sync + Send,
) -> Result<Tensor> {
    match batched::elementwise(&[t], |p| map_dense(&p[0], par_min, &f)) {
        Some(r) => r,
        None => map_dense(t, par_min, &f),
    }
}

/// [`map_with`] of an unbatched tensor.
fn map_dense<T: Element, U: Element>(
    t: &Tensor,
    par_min: usize,
    f: &(impl Fn(T) -> U + Sync + Send),
) -> Result<Tensor> {
    let n = t.numel();
    // An expanded input can name far more elements than it stores.
    ensure_allocatable(n, U::DTYPE)?;
    // A strided input is gathered first: run by run that is memory speed, where an ndarray
    // iterator over a dynamic-rank view costs ~20 ns per element.
    let dense;
    let (t, c) = match cover(t, t.shape()) {
        Some(c) => (t, c),
        None => {
            dense = crate::kernels::copy::copy_raw(t)?;
            (&dense, Cover::Slice)
        }
    };
    let out: Vec<U> = with_src::<T, _>(t, c, |s| {
        collect_chunks(n, par_min, |start, out| map_chunk(s, start, out, f))
    })?;
    Tensor::from_vec(out, t.shape())
}

/// `f` over broadcast pairs of elements of `a` and `b` (both of type `T`).
pub(crate) fn zip<T: Element, U: Element>(
    a: &Tensor,
    b: &Tensor,
    f: impl Fn(T, T) -> U + Sync + Send,
) -> Result<Tensor> {
    zip_with(a, b, PAR_MIN_ELEMENTS, f)
}

/// [`zip`], split across threads from `par_min` elements on (lower for costly `f`).
pub(crate) fn zip_with<T: Element, U: Element>(
    a: &Tensor,
    b: &Tensor,
    par_min: usize,
    f: impl Fn(T, T) -> U + Sync + Send,
) -> Result<Tensor> {
    match batched::elementwise(&[a, b], |p| zip_dense(&p[0], &p[1], par_min, &f)) {
        Some(r) => r,
        None => zip_dense(a, b, par_min, &f),
    }
}

/// [`zip_with`] of unbatched tensors.
fn zip_dense<T: Element, U: Element>(
    a: &Tensor,
    b: &Tensor,
    par_min: usize,
    f: &(impl Fn(T, T) -> U + Sync + Send),
) -> Result<Tensor> {
    let shape = broadcast_shapes(a.shape(), b.shape())?;
    let n = checked_numel(&shape)?;
    ensure_allocatable(n, U::DTYPE)?;
    // Strided operands of the output's shape are gathered (see `map_with`); broadcast ones
    // go through ndarray's Zip, which walks the inner dimension in a loop.
    let (da, db);
    let gathered = |t: &Tensor| t.shape() == shape.as_slice() && cover(t, &shape).is_none();
    let a = if gathered(a) {
        da = crate::kernels::copy::copy_raw(a)?;
        &da
    } else {
        a
    };
    let b = if gathered(b) {
        db = crate::kernels::copy::copy_raw(b)?;
        &db
    } else {
        b
    };
    if let (Some(ca), Some(cb)) = (cover(a, &shape), cover(b, &shape)) {
        let out = with_src::<T, _>(a, ca, |sa| {
            with_src::<T, _>(b, cb, |sb| {
                collect_chunks(n, par_min, |start, out| zip_chunk(sa, sb, start, out, f))
            })
        })??;
        return Tensor::from_vec(out, &shape);
    }
    // One operand whole, the other repeated along leading dims (a bias row): by rows.
    for (whole, row, row_second) in [(a, b, true), (b, a, false)] {
        if cover(whole, &shape) == Some(Cover::Slice) && is_trailing_row(row, &shape) {
            let out = whole.with_contiguous_slice::<T, _>(|sw| {
                row.with_contiguous_slice::<T, _>(|sr| {
                    collect_chunks(n, par_min, |start, out| {
                        zip_rows_chunk(sw, sr, row_second, start, out, f)
                    })
                })
            })??;
            return Tensor::from_vec(out, &shape);
        }
    }
    let arr = a.with_view::<T, _>(|av| {
        b.with_view::<T, _>(|bv| -> Result<ndarray::ArrayD<U>> {
            let dim = IxDyn(&shape);
            match (av.broadcast(dim.clone()), bv.broadcast(dim)) {
                (Some(av), Some(bv)) => Ok(Zip::from(&av).and(&bv).map_collect(|&p, &q| f(p, q))),
                _ => Err(Error::runtime(
                    "internal error: broadcast failed after shape check",
                )),
            }
        })
    })???;
    Ok(Tensor::from_array(arr))
}

/// Whether `t` is contiguous and, leading size-1 dims aside, the trailing dims of `shape` (so
/// output element i reads `t` at i mod its length), with at least a vector's worth per row.
fn is_trailing_row(t: &Tensor, shape: &[usize]) -> bool {
    let own: &[usize] = {
        let s = t.shape();
        let lead = s.iter().take_while(|&&d| d == 1).count();
        &s[lead..]
    };
    t.is_contiguous() && own.len() < shape.len() && shape.ends_with(own) && t.numel() >= 16
}

/// `out[i] = f(whole[start + i], row[(start + i) % row.len()])` (arguments swapped when
/// `!row_second`), run by runs within a row so each run is a plain loop (targets as
/// [`zip_chunk`]).
#[multiversion(targets("x86_64+avx2+avx+fma"))]
fn zip_rows_chunk<T: Copy, U: Copy, F: Fn(T, T) -> U>(
    whole: &[T],
    row: &[T],
    row_second: bool,
    start: usize,
    out: &mut [MaybeUninit<U>],
    f: &F,
) {
    let p = row.len();
    let mut done = 0;
    while done < out.len() {
        let pos = start + done;
        let off = pos % p;
        let len = (p - off).min(out.len() - done);
        let (o, w, r) = (
            &mut out[done..done + len],
            &whole[pos..pos + len],
            &row[off..off + len],
        );
        if row_second {
            for ((o, &x), &y) in o.iter_mut().zip(w).zip(r) {
                o.write(f(x, y));
            }
        } else {
            for ((o, &x), &y) in o.iter_mut().zip(w).zip(r) {
                o.write(f(y, x));
            }
        }
        done += len;
    }
}

/// Apply a float function to a float tensor, dispatching on f32/f64; non-float inputs are first
/// converted to float32 as torch does for `exp`, `sin`, ...
pub(crate) fn map_float_fn(
    t: &Tensor,
    f32f: impl Fn(f32) -> f32 + Sync + Send,
    f64f: impl Fn(f64) -> f64 + Sync + Send,
) -> Result<Tensor> {
    match t.dtype() {
        DType::Float32 => map::<f32, f32>(t, f32f),
        DType::Float64 => map::<f64, f64>(t, f64f),
        d if d.is_half() => crate::kernels::copy::via_compute(t, |w| map::<f32, f32>(w, f32f)),
        _ => map::<f32, f32>(&crate::kernels::copy::cast(t, DType::Float32)?, f32f),
    }
}

/// The same float function written once for f32 and f64.
macro_rules! map_float {
    ($t:expr, |$x:ident| $body:expr) => {
        $crate::ops::elementwise::map_float_fn($t, |$x: f32| $body, |$x: f64| $body)
    };
}
pub(crate) use map_float;

/// `f` over broadcast pairs of two float tensors of one dtype, written once for f32 and f64
/// (fused backward rules, whose operands already share the gradient's dtype).
fn zip_float_fn(
    a: &Tensor,
    b: &Tensor,
    f32f: impl Fn(f32, f32) -> f32 + Sync + Send,
    f64f: impl Fn(f64, f64) -> f64 + Sync + Send,
) -> Result<Tensor> {
    match (a.dtype(), b.dtype()) {
        (DType::Float32, DType::Float32) => zip::<f32, f32>(a, b, f32f),
        (DType::Float64, DType::Float64) => zip::<f64, f64>(a, b, f64f),
        (x, y) if x == y && x.is_half() => {
            let (a, b) = (cast(a, DType::Float32)?, cast(b, DType::Float32)?);
            cast(&zip::<f32, f32>(&a, &b, f32f)?, x)
        }
        (x, y) => Err(Error::runtime(format!(
            "internal error: fused kernel on {x:?} and {y:?}"
        ))),
    }
}

/// `f` of a float tensor through the vectorised float32 kernel (float64 uses std's scalar
/// function, integers and bools are converted to float32 first, as torch does).
pub(crate) fn map_vmath(t: &Tensor, f: UnaryF32) -> Result<Tensor> {
    if let Some(r) = batched::elementwise(&[t], |p| map_vmath(&p[0], f)) {
        return r;
    }
    // Borrowed when already contiguous float32: a clone is two locked instructions per op.
    let t: Cow<'_, Tensor> = match t.dtype() {
        DType::Float64 => return map::<f64, f64>(t, move |x| f.f64(x)),
        d if d.is_half() => return crate::kernels::copy::via_compute(t, |w| map_vmath(w, f)),
        DType::Float32 if t.is_contiguous() => Cow::Borrowed(t),
        // Strided and integer inputs: one contiguous float32 copy, then the slice kernel.
        _ => Cow::Owned(crate::kernels::copy::cast(t, DType::Float32)?),
    };
    let n = t.numel();
    let out = t.with_contiguous_slice::<f32, _>(|x| {
        collect_chunks(n, PAR_MIN_VMATH, |start, out| {
            f.apply_uninit(&x[start..start + out.len()], out)
        })
    })?;
    Tensor::from_vec(out, t.shape())
}

/// `combine(g, f(x))` elementwise for same-shape float tensors `g` and `x` of one dtype (a
/// backward rule's gradient and saved input, e.g. `g * cos(x)`): one pass, `f` vectorised for
/// float32. Callers check shapes and dtypes.
pub(crate) fn zip_vmath(
    g: &Tensor,
    x: &Tensor,
    f: UnaryF32,
    combine: impl Fn(f64, f64) -> f64 + Sync + Send,
) -> Result<Tensor> {
    match batched::elementwise(&[g, x], |p| {
        // Same logical shapes; an unbatched side is expanded over the batch.
        let shape = broadcast_shapes(p[0].shape(), p[1].shape())?;
        zip_vmath_dense(&p[0].expand(&shape)?, &p[1].expand(&shape)?, f, &combine)
    }) {
        Some(r) => r,
        None => zip_vmath_dense(g, x, f, &combine),
    }
}

fn zip_vmath_dense(
    g: &Tensor,
    x: &Tensor,
    f: UnaryF32,
    combine: &(impl Fn(f64, f64) -> f64 + Sync + Send),
) -> Result<Tensor> {
    if x.dtype() == DType::Float64 {
        return zip::<f64, f64>(g, x, move |g, x| combine(g, f.f64(x)));
    }
    if x.dtype().is_half() {
        let (gw, xw) = (cast(g, DType::Float32)?, cast(x, DType::Float32)?);
        return cast(&zip_vmath_dense(&gw, &xw, f, combine)?, x.dtype());
    }
    // x as a slice (a strided x is copied once); g as a slice or one broadcast value.
    let x: Cow<'_, Tensor> = if x.is_contiguous() {
        Cow::Borrowed(x)
    } else {
        Cow::Owned(crate::kernels::copy::copy_raw(x)?)
    };
    let (g, cg): (Cow<'_, Tensor>, Cover) = match cover(g, x.shape()) {
        Some(c) => (Cow::Borrowed(g), c),
        None => (Cow::Owned(crate::kernels::copy::copy_raw(g)?), Cover::Slice),
    };
    let n = x.numel();
    let out = with_src::<f32, _>(&g, cg, |sg| {
        x.with_contiguous_slice::<f32, _>(|xs| {
            collect_chunks(n, PAR_MIN_VMATH, |start, out| {
                // f(x) a block at a time into a stack buffer, then combined with g.
                const B: usize = 256;
                let mut buf = [MaybeUninit::<f32>::uninit(); B];
                for (k, oc) in out.chunks_mut(B).enumerate() {
                    let s = start + k * B;
                    let fx = &mut buf[..oc.len()];
                    f.apply_uninit(&xs[s..s + oc.len()], fx);
                    // SAFETY: apply_uninit wrote every element of `fx`.
                    let fx = unsafe { &*(fx as *const [MaybeUninit<f32>] as *const [f32]) };
                    let gs = match sg {
                        Src::Slice(gs) => Src::Slice(&gs[s..s + oc.len()]),
                        u => u,
                    };
                    zip_chunk(gs, Src::Slice(fx), 0, oc, &|g: f32, y: f32| {
                        combine_f32(combine, g, y)
                    });
                }
            })
        })
    })??;
    Tensor::from_vec(out, x.shape())
}

/// Whether a backward rule may run its fused kernel on the incoming gradient `g` and the saved
/// tensor `s`: only when the composite rule would record nothing (grad mode off, or nothing
/// requiring grad), so `create_graph` still gets a differentiable graph; and only on float
/// tensors of one dtype and shape (anything else takes the composite rule's promotions).
pub(crate) fn fusable(g: &Tensor, s: &Tensor) -> bool {
    // Half types take the composed rule, whose ops each compute in float32.
    !crate::graph::node::needs_grad(&[g, s])
        && g.dtype() == s.dtype()
        && matches!(g.dtype(), DType::Float32 | DType::Float64)
        && g.shape() == s.shape()
}

/// Whether a backward rule may write its result over `g`, the gradient the engine handed it
/// (its last use in the rule): no other handle or weak reference reaches it or its storage,
/// it is contiguous from the storage's start, outside any graph, and no graph is recorded. A
/// hook, a retained `.grad` or a captured result holds another handle, so what a user can
/// reach is never overwritten.
///
/// That the buffer is owned and exactly `g`'s elements is checked by [`over_grad`] under the
/// write lock it takes anyway.
fn reusable_grad(g: &Tensor) -> bool {
    !crate::tensor::grad_mode::is_recording()
        && !g.is_batched()
        && g.is_contiguous()
        && g.layout().offset == 0
        && Arc::strong_count(&g.0) == 1
        && Arc::weak_count(&g.0) == 0
        && Arc::strong_count(g.storage()) == 1
        && Arc::weak_count(g.storage()) == 0
        && !g.requires_grad()
}

/// `f(g[i], b[i])` written over `g` (see [`over_grad`]), for `b` contiguous in g's shape.
fn zip_over_grad<T: Element>(
    g: &Tensor,
    b: &Tensor,
    f: &(impl Fn(T, T) -> T + Sync + Send),
) -> Result<Option<Tensor>> {
    if b.dtype() != T::DTYPE || cover(b, g.shape()) != Some(Cover::Slice) {
        return Ok(None);
    }
    over_grad::<T>(g, b, |gs| {
        b.with_contiguous_slice::<T, _>(|bs| {
            for_chunks_mut(gs, PAR_MIN_ELEMENTS, |start, out| {
                zip_over_chunk(out, &bs[start..start + out.len()], f)
            })
        })
    })
}

/// `f(g[i])` written over `g`, a backward rule's gradient at its last use, when it can be
/// reused (see [`over_grad`]); `f` written for f32 and f64. None, nothing written, otherwise.
pub(crate) fn map_float_over_grad(
    g: &Tensor,
    f32f: impl Fn(f32) -> f32 + Sync + Send,
    f64f: impl Fn(f64) -> f64 + Sync + Send,
) -> Result<Option<Tensor>> {
    match g.dtype() {
        DType::Float32 => map_over_grad::<f32>(g, f32f),
        DType::Float64 => map_over_grad::<f64>(g, f64f),
        _ => Ok(None),
    }
}

/// `f(g[i])` written over `g` (see [`over_grad`]).
fn map_over_grad<T: Element>(
    g: &Tensor,
    f: impl Fn(T) -> T + Sync + Send,
) -> Result<Option<Tensor>> {
    over_grad::<T>(g, g, |gs| {
        for_chunks_mut(gs, PAR_MIN_ELEMENTS, |_, out| map_over_chunk(out, &f));
        Ok(())
    })
}

/// `out[i] = f(out[i])` (targets as [`zip_chunk`]).
#[multiversion(targets("x86_64+avx2+avx+fma"))]
fn map_over_chunk<T: Copy, F: Fn(T) -> T>(out: &mut [T], f: &F) {
    for o in out.iter_mut() {
        *o = f(*o);
    }
}

/// `out[i] = f(out[i], b[i])` (targets as [`zip_chunk`]).
#[multiversion(targets("x86_64+avx2+avx+fma"))]
fn zip_over_chunk<T: Copy, F: Fn(T, T) -> T>(out: &mut [T], b: &[T], f: &F) {
    for (o, &q) in out.iter_mut().zip(b) {
        *o = f(*o, q);
    }
}

/// [`zip_float_fn`] for a backward rule's gradient `g` (its last use): written over `g` when
/// [`reusable_grad`], else into a new tensor. The same bits either way.
pub(crate) fn zip_float_grad_fn(
    g: &Tensor,
    b: &Tensor,
    f32f: impl Fn(f32, f32) -> f32 + Sync + Send,
    f64f: impl Fn(f64, f64) -> f64 + Sync + Send,
) -> Result<Tensor> {
    let reused = match (g.dtype(), b.dtype()) {
        (DType::Float32, DType::Float32) => zip_over_grad::<f32>(g, b, &f32f)?,
        (DType::Float64, DType::Float64) => zip_over_grad::<f64>(g, b, &f64f)?,
        _ => None,
    };
    match reused {
        Some(t) => Ok(t),
        None => zip_float_fn(g, b, f32f, f64f),
    }
}

/// [`zip_float_grad_fn`] with the function written once for f32 and f64.
macro_rules! zip_float_grad {
    ($g:expr, $b:expr, |$x:ident, $y:ident| $body:expr) => {
        $crate::ops::elementwise::zip_float_grad_fn(
            $g,
            $b,
            |$x: f32, $y: f32| $body,
            |$x: f64, $y: f64| $body,
        )
    };
}
pub(crate) use zip_float_grad;

/// [`zip_vmath`] for a backward rule's gradient `g` (its last use): written over `g` when
/// [`reusable_grad`], else into a new tensor. The same bits either way.
pub(crate) fn zip_vmath_grad(
    g: &Tensor,
    x: &Tensor,
    f: UnaryF32,
    combine: impl Fn(f64, f64) -> f64 + Sync + Send,
) -> Result<Tensor> {
    let reused = match (g.dtype(), x.dtype()) {
        (DType::Float64, DType::Float64) => {
            zip_over_grad::<f64>(g, x, &|g, x| combine(g, f.f64(x)))?
        }
        (DType::Float32, DType::Float32) => zip_vmath_over_grad(g, x, f, &combine)?,
        _ => None,
    };
    match reused {
        Some(t) => Ok(t),
        None => zip_vmath(g, x, f, combine),
    }
}

/// [`zip_vmath_dense`]'s float32 pass written over `g` (see [`over_grad`]).
fn zip_vmath_over_grad(
    g: &Tensor,
    x: &Tensor,
    f: UnaryF32,
    combine: &(impl Fn(f64, f64) -> f64 + Sync + Send),
) -> Result<Option<Tensor>> {
    if cover(x, g.shape()) != Some(Cover::Slice) {
        return Ok(None);
    }
    over_grad::<f32>(g, x, |gs| {
        x.with_contiguous_slice::<f32, _>(|xs| {
            for_chunks_mut(gs, PAR_MIN_VMATH, |start, out| {
                // f(x) a block at a time into a stack buffer, then combined into g, as
                // zip_vmath_dense does.
                const B: usize = 256;
                let mut buf = [MaybeUninit::<f32>::uninit(); B];
                let xs = &xs[start..start + out.len()];
                for (xc, gc) in xs.chunks(B).zip(out.chunks_mut(B)) {
                    let fx = &mut buf[..xc.len()];
                    f.apply_uninit(xc, fx);
                    // SAFETY: apply_uninit wrote every element of `fx`.
                    let fx = unsafe { &*(fx as *const [MaybeUninit<f32>] as *const [f32]) };
                    zip_over_chunk(gc, fx, &|g: f32, y: f32| combine_f32(combine, g, y));
                }
            })
        })
    })
}

/// `kernel(g_block, x_block, out_block)` written over `g` (see [`over_grad`]), for a float32
/// backward kernel that reads `g` and writes a separate output: each block of `g` is copied to
/// the stack before the kernel overwrites it. `x` must be contiguous in g's shape.
pub(crate) fn kernel_over_grad(
    g: &Tensor,
    x: &Tensor,
    par_min: usize,
    kernel: &(impl Fn(&[f32], &[f32], &mut [MaybeUninit<f32>]) + Sync),
) -> Result<Option<Tensor>> {
    if cover(x, g.shape()) != Some(Cover::Slice) || x.dtype() != DType::Float32 {
        return Ok(None);
    }
    over_grad::<f32>(g, x, |gs| {
        x.with_contiguous_slice::<f32, _>(|xs| {
            for_chunks_mut(gs, par_min, |start, out| {
                const B: usize = 256;
                let mut held = [0f32; B];
                let xs = &xs[start..start + out.len()];
                for (xc, oc) in xs.chunks(B).zip(out.chunks_mut(B)) {
                    let gc = &mut held[..oc.len()];
                    gc.copy_from_slice(oc);
                    // SAFETY: f32 and MaybeUninit<f32> have one layout, and the kernel writes
                    // only initialised values (every element).
                    let oc = unsafe { &mut *(oc as *mut [f32] as *mut [MaybeUninit<f32>]) };
                    kernel(gc, xc, oc);
                }
            })
        })
    })
}

/// `write(g's elements)` when [`reusable_grad`] and `read`, what `write` reads besides, is `g`
/// itself or in another storage: a backward rule's result without a new buffer (and the page
/// faults of one), returned as `g`. None, nothing written, otherwise.
fn over_grad<T: Element>(
    g: &Tensor,
    read: &Tensor,
    write: impl FnOnce(&mut [T]) -> Result<()>,
) -> Result<Option<Tensor>> {
    let elsewhere = std::ptr::eq(g, read) || !Arc::ptr_eq(g.storage(), read.storage());
    if g.dtype() != T::DTYPE || !elsewhere || !reusable_grad(g) {
        return Ok(None);
    }
    let n = g.numel();
    {
        let mut guard = g.storage().write();
        if guard.len() != n || !guard.is_owned() {
            return Ok(None);
        }
        let gs = T::data_mut(&mut guard)
            .ok_or_else(|| crate::tensor::dtype_mismatch(T::DTYPE, g.dtype()))?
            .as_mut_slice()
            .get_mut(..n)
            .ok_or_else(|| Error::runtime("internal error: tensor outside its storage"))?;
        write(gs)?;
    }
    Ok(Some(g.clone()))
}

/// `combine` in float32: the closures are written once over f64, and f32 → f64 → f32 of a
/// product or sum of two float32 values rounds exactly as float32 arithmetic does.
#[inline(always)]
fn combine_f32(combine: &impl Fn(f64, f64) -> f64, g: f32, y: f32) -> f32 {
    combine(g as f64, y as f64) as f32
}

/// `a` where `cond` else `b`, broadcasting the three (all of one element type `T`).
pub(crate) fn select<T: Element>(cond: &Tensor, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    if let Some(r) = batched::elementwise(&[cond, a, b], |p| select::<T>(&p[0], &p[1], &p[2])) {
        return r;
    }
    let shape = broadcast_shapes(&broadcast_shapes(cond.shape(), a.shape())?, b.shape())?;
    ensure_allocatable(checked_numel(&shape)?, T::DTYPE)?;
    let arr = cond.with_view::<bool, _>(|cv| {
        a.with_view::<T, _>(|av| {
            b.with_view::<T, _>(|bv| -> Result<ndarray::ArrayD<T>> {
                let dim = IxDyn(&shape);
                match (
                    cv.broadcast(dim.clone()),
                    av.broadcast(dim.clone()),
                    bv.broadcast(dim),
                ) {
                    (Some(cv), Some(av), Some(bv)) => Ok(Zip::from(&cv)
                        .and(&av)
                        .and(&bv)
                        .map_collect(|&c, &x, &y| if c { x } else { y })),
                    _ => Err(Error::runtime(
                        "internal error: broadcast failed after shape check",
                    )),
                }
            })
        })
    })????;
    Ok(Tensor::from_array(arr))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// sum_parts gives the bits of chained adds, for slices and broadcast values, on both sides
    /// of the parallel split and of the 2048-element block.
    #[test]
    fn sum_parts_matches_chained_adds_bitwise() {
        for &n in &[1usize, 7, 2049, PAR_MIN_ELEMENTS + 333] {
            for dtype in [DType::Float32, DType::Float64] {
                let mut parts: Vec<Tensor> = (0..4)
                    .map(|_| Tensor::randn(&[n], dtype).unwrap())
                    .collect();
                let one = Tensor::randn(&[1], dtype).unwrap();
                parts.insert(2, one.expand(&[n]).unwrap());
                let mut want = parts[0].clone();
                for p in &parts[1..] {
                    want = want.add(p).unwrap();
                }
                // parts[0] is held twice here (by `keep`): a new buffer, parts[0] untouched.
                let keep = parts[0].clone();
                let before = keep.to_vec::<f64>().unwrap();
                let shared = sum_parts(&parts).unwrap().expect("fast path applies");
                assert!(!shared.same(&keep));
                assert_eq!(keep.to_vec::<f64>().unwrap(), before);
                drop(keep);
                // Now it is exclusive: the sum is taken in place, with the same bits.
                let got = sum_parts(&parts).unwrap().expect("fast path applies");
                assert!(got.same(&parts[0]));
                assert_eq!(
                    got.to_vec::<f64>().unwrap(),
                    shared.to_vec::<f64>().unwrap()
                );
                match dtype {
                    DType::Float32 => {
                        let (g, w) = (got.to_vec::<f32>().unwrap(), want.to_vec::<f32>().unwrap());
                        assert!(g.iter().zip(&w).all(|(a, b)| a.to_bits() == b.to_bits()));
                    }
                    _ => {
                        let (g, w) = (got.to_vec::<f64>().unwrap(), want.to_vec::<f64>().unwrap());
                        assert!(g.iter().zip(&w).all(|(a, b)| a.to_bits() == b.to_bits()));
                    }
                }
            }
        }
    }

    #[test]
    fn sum_parts_declines_mixed_shapes_and_strided_parts() {
        let a = Tensor::randn(&[4, 3], DType::Float32).unwrap();
        let b = Tensor::randn(&[3, 4], DType::Float32).unwrap();
        assert!(sum_parts(&[a.clone(), b.clone(), a.clone()])
            .unwrap()
            .is_none());
        let bt = b.transpose(0, 1).unwrap();
        assert!(sum_parts(&[a.clone(), bt, a]).unwrap().is_none());
    }
}
