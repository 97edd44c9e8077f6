//! Strided, batched matrix products for `f32`/`f64` on the `gemm` crate (SIMD kernels picked at
//! run time, so one build serves every x86-64 CPU), parallelised on ferrograd's own pool.
//!
//! Operands are read through their strides (transposed, sliced or broadcast views cost no copy)
//! and the output is written without being zeroed first.
//!
//! Threads: the output is split into independent blocks (whole batch matrices, or row/column
//! bands of one matrix) and shared through `parallel::share_work`: the caller starts at
//! once and helpers take what is left (engine branches running in parallel simply do all their
//! blocks themselves). Nothing nests: each block is a single-threaded kernel call.
//!
//! Determinism: every output element is computed by the same sequence of floating-point
//! operations whatever the thread count, because bands are only cut where the kernel's blocking
//! along `k` and its choice of code path stay those of the unsplit product (see `plan`).
//! Results are therefore bitwise identical for 1, 2 or more threads.

use std::sync::OnceLock;

use crate::error::{Error, Result};
use crate::parallel::SendPtr;

/// Products with fewer multiply-adds than this (`batches * n * m * k`) run on one thread: below
/// it, handing blocks to a helper costs more than it saves (measured: 48^3 ~ break-even, 64^3
/// 5.3 -> 3.3 µs with a lingering helper).
pub const PARALLEL_MIN_WORK: usize = 1 << 18;

/// Products with a shorter reduction than this run on one thread unless their output has at
/// least `SHORT_K_MIN_OUTPUT` elements: they are bound by writing the output, which a second
/// core does not speed up while it fits in cache (measured on 128x10 @ 10x512).
pub const PARALLEL_MIN_K: usize = 16;

/// Outputs this large are written faster by two cores even after a short reduction (a weight
/// gradient at batch 8, 4096x8 @ 8x1024: 940 µs on one thread, torch 481 on two).
const SHORT_K_MIN_OUTPUT: usize = 1 << 17;

/// Whether a product runs on the calling thread alone (see the constants above).
fn runs_serially(threads: usize, (nb, n, m, k): (usize, usize, usize, usize)) -> bool {
    let outputs = nb.saturating_mul(n).saturating_mul(m);
    threads <= 1
        || outputs.saturating_mul(k) < PARALLEL_MIN_WORK
        || (k < PARALLEL_MIN_K && outputs < SHORT_K_MIN_OUTPUT)
}

/// Narrowest band cut beyond one per thread. Column bands this wide lose nothing measurable to
/// repeated packing (one thread, 1024^3 in 16 bands: 98.8 GFLOP/s against 98.0 unsplit;
/// 64x256x256 in 4: 100.9 against 101.1); narrower ones start to (192^3 in 8: 86 against 108).
const BALANCE_BAND: usize = 64;

/// Products of at most this many rows that read `a` along its rows and `b` down its columns
/// (`x @ W.T`, every `linear`'s forward) run on faer's kernel in [`DOT_BAND`]-column bands:
/// `gemm` 0.19 packs such a `b` element by element and lost up to 3x there, faer's does not.
/// One thread, float32, `gemm` against faer in bands, µs: 8x512 @ 512x2048 1015 / 346,
/// 32x512 @ 512x128 72 / 34, 128x512 @ 512x2048 2462 / 1766, 512x512 @ 512x2048 7303 / 6907;
/// with 1024 rows and more `gemm` wins (1024x512 @ 512x2048 14398 / 15529, 4096x256 @ 256x256
/// 3253 / 4193).
const DOT_LAYOUT_MAX_ROWS: usize = 512;

/// Columns per band on faer's path, whatever the thread count, so every output element comes
/// from the same kernel call at any thread count.
const DOT_BAND: usize = 64;

/// Most multiply-adds computed between two checks for Ctrl-C in a huge product (~5 ms of one
/// thread). Products below it run as before; above it, bands are cut into slices this size,
/// which costs one more packing of the other operand per slice (under 2% at 64 rows).
const SLICE_WORK: usize = 1 << 29;

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}

/// Element types with a SIMD kernel: `f32` and `f64`.
pub trait GemmScalar: sealed::Sealed + Copy + Send + Sync + 'static {
    /// Additive identity.
    const ZERO: Self;
    /// Multiplicative identity.
    const ONE: Self;

    /// `dst` (row-major, `dst_rs` between rows, not read) = `a` @ `b` for one `n` x `k` @
    /// `k` x `m` block through faer's kernel ([`DOT_LAYOUT_MAX_ROWS`] says when).
    ///
    /// # Safety
    /// As [`kernel`]'s.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn faer_block(
        n: usize,
        m: usize,
        k: usize,
        dst: *mut Self,
        dst_rs: isize,
        a: (*const Self, isize, isize),
        b: (*const Self, isize, isize),
    );
}

macro_rules! gemm_scalar {
    ($t:ty) => {
        impl GemmScalar for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;

            unsafe fn faer_block(
                n: usize,
                m: usize,
                k: usize,
                dst: *mut Self,
                dst_rs: isize,
                (a, a_rs, a_cs): (*const Self, isize, isize),
                (b, b_rs, b_cs): (*const Self, isize, isize),
            ) {
                // SAFETY: the caller vouches for every element addressed; `Replace` writes
                // `dst` without reading it.
                unsafe {
                    let a = faer::MatRef::<$t>::from_raw_parts(a, n, k, a_rs, a_cs);
                    let b = faer::MatRef::<$t>::from_raw_parts(b, k, m, b_rs, b_cs);
                    let dst = faer::MatMut::<$t>::from_raw_parts_mut(dst, n, m, dst_rs, 1);
                    faer::linalg::matmul::matmul(
                        dst,
                        faer::Accum::Replace,
                        a,
                        b,
                        1.0,
                        faer::Par::Seq,
                    );
                }
            }
        }
    };
}

gemm_scalar!(f32);
gemm_scalar!(f64);

/// One operand of [`matmul_strided`]: a (batch of) matrices inside a flat buffer.
#[derive(Clone, Copy, Debug)]
pub struct MatRef<'a, T> {
    /// The buffer holding the elements.
    pub data: &'a [T],
    /// Index in `data` of the first element of the first matrix.
    pub offset: usize,
    /// Step between consecutive matrices along each batch dimension; 0 repeats (broadcasts) one
    /// matrix. Must have one entry per batch dimension.
    pub batch_strides: &'a [usize],
    /// Step between consecutive rows.
    pub row_stride: usize,
    /// Step between consecutive columns.
    pub col_stride: usize,
}

impl<'a, T> MatRef<'a, T> {
    /// One matrix (no batch dimensions) starting at `data[0]`, with the given strides.
    pub fn matrix(data: &'a [T], row_stride: usize, col_stride: usize) -> Self {
        MatRef {
            data,
            offset: 0,
            batch_strides: &[],
            row_stride,
            col_stride,
        }
    }
}

/// Validated operand: strides of size-1 dimensions normalised, every address checked.
#[derive(Clone, Copy)]
struct Operand<T> {
    ptr: *const T,
    rs: isize,
    cs: isize,
}

/// Checks that every element of `op` (shape `batch` x `rows` x `cols`) lies inside its buffer
/// and returns its base pointer and signed strides.
fn operand<T>(op: &MatRef<'_, T>, batch: &[usize], rows: usize, cols: usize) -> Result<Operand<T>> {
    let bad = || Error::runtime("internal error: matmul operand outside its buffer");
    if op.batch_strides.len() != batch.len() {
        return Err(Error::runtime(
            "internal error: matmul batch strides do not match the batch shape",
        ));
    }
    let mut last = op.offset;
    let extents = batch
        .iter()
        .zip(op.batch_strides)
        .chain([(&rows, &op.row_stride), (&cols, &op.col_stride)]);
    for (&d, &s) in extents {
        let span = (d - 1).checked_mul(s).ok_or_else(bad)?;
        last = last.checked_add(span).ok_or_else(bad)?;
    }
    if last >= op.data.len() {
        return Err(bad());
    }
    // A size-1 dimension's stride is never used to address anything but may be arbitrary; give
    // it the value of a contiguous row-major matrix so the kernel sees a familiar layout.
    let rs = if rows <= 1 { cols } else { op.row_stride };
    let cs = if cols <= 1 { 1 } else { op.col_stride };
    // In bounds of a slice, so below isize::MAX; the fallbacks are at most `cols`.
    Ok(Operand {
        ptr: op.data[op.offset..].as_ptr(),
        rs: rs as isize,
        cs: cs as isize,
    })
}

/// Offset of batch matrix `index` (row-major over `batch`) for an operand with `strides`.
#[inline]
pub(crate) fn batch_offset(mut index: usize, batch: &[usize], strides: &[usize]) -> usize {
    let mut off = 0;
    for (&d, &s) in batch.iter().zip(strides).rev() {
        off += (index % d) * s;
        index /= d;
    }
    off
}

/// How the output is cut into blocks for threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Plan {
    /// Bands each batch matrix is cut into (1: whole matrices).
    pieces: usize,
    /// Rows (true) or columns (false) per band.
    by_rows: bool,
    /// Rows or columns per band (the last one may be shorter, never below the minimum).
    band: usize,
    /// Blocks handed out: groups of consecutive (matrix, band) units.
    blocks: usize,
}

/// The split of a `nb` x (`n` x `k` @ `k` x `m`) product over `threads` threads; `blocks == 1`
/// means one thread. `a_rows_contiguous` / `b_rows_contiguous`: the operand's columns are
/// adjacent in memory (column stride 1).
///
/// Every band is a separate kernel call, which packs the operand it does not split again unless
/// that operand can be read in place: `a` for column bands when its rows are contiguous. So only
/// that case gets more than one band per thread; otherwise the split follows the operand that
/// would be re-packed (1024^3, 16 bands on 2 threads: `a.T @ b` 143 GFLOP/s by columns, 188 by
/// rows, 209 in 2 bands; `a @ b.T` 135 by rows, 210 by columns).
///
/// Bands keep the result independent of the split, which relies on how `gemm` 0.19 picks its
/// code path: matrices with at most 64 rows and columns block `k` by 512, larger ones by a
/// cache-derived size (equal when `k <= 512`); outputs of at most 256 elements use a separate
/// dot-product kernel. So a band must be a "large" matrix whenever the whole one is (more than
/// 64 along the cut dimension when the other is at most 64 and `k > 512`), and must have more
/// than 256 elements. Bands are multiples of 16 so only the last one has a ragged edge.
fn plan(
    threads: usize,
    (nb, n, m, k): (usize, usize, usize, usize),
    a_rows_contiguous: bool,
    b_rows_contiguous: bool,
) -> Plan {
    const SERIAL: Plan = Plan {
        pieces: 1,
        by_rows: true,
        band: 0,
        blocks: 1,
    };
    if runs_serially(threads, (nb, n, m, k)) {
        return SERIAL;
    }
    if nb >= threads {
        // Whole matrices per block; a few blocks per thread even out a late or busy helper.
        return Plan {
            blocks: nb.min(4 * threads),
            ..SERIAL
        };
    }
    // Split the operand that is not read in place. With both alike, row bands unless the output
    // is wider than tall: each thread then reads only its rows of `a` and writes whole rows,
    // where a column band reads all of `a`, half of it just written by the other core when `a`
    // is the previous op's output (a chain of `(h @ W).tanh()` at 192^3, 4 links: 270 -> 230
    // µs; wide_graph 2-thread scaling 1.62x -> 1.75x). Re-packing all of `b` per band costs
    // nothing measurable at two bands (1024^3: 6.6 ms either way).
    let preferred = match (a_rows_contiguous, b_rows_contiguous) {
        (false, true) => true,
        (true, false) => false,
        _ => n >= m,
    };
    let want = threads.div_ceil(nb);
    // The most bands along rows or columns (up to `most`) whose last, shorter band still meets
    // the minimum, preferring a multiple of the threads wanted: 3 bands on 2 threads leave one
    // thread two of them, 1.5x at best (192^3 in 2 bands: 128 us on 1 thread, 66 us on 2).
    let cut = |by_rows: bool| {
        let balance = !by_rows && a_rows_contiguous;
        let (d, other) = if by_rows { (n, m) } else { (m, n) };
        let mut min_band = 16usize.max(257usize.div_ceil(other.max(1)));
        if k > 512 && other <= 64 && d > 64 {
            min_band = min_band.max(65);
        }
        // Up to eight bands per thread when they stay at least BALANCE_BAND wide, so a thread
        // that is slowed (a core shared with another process, a helper woken late) takes fewer.
        let most = if balance {
            want.max((8 * want).min(d / BALANCE_BAND))
        } else {
            want
        };
        let fits = |pieces: usize| {
            let band = d.div_ceil(pieces).next_multiple_of(16);
            let last = d.checked_sub((pieces - 1) * band)?;
            (band >= min_band && last >= min_band).then_some((pieces, band))
        };
        (2..=most)
            .rev()
            .filter(|p| p % want == 0)
            .find_map(fits)
            .or_else(|| (2..=most).rev().find_map(fits))
    };
    // When the preferred direction has no legal cut, the other one (which re-packs the operand
    // it does not split, per band) still beats one thread: 64x1000 @ 1000x100, whose column
    // bands would drop below gemm's "large" size, runs in two row bands (111 -> 64 us).
    let (by_rows, cut) = match cut(preferred) {
        Some(c) => (preferred, Some(c)),
        None => (!preferred, cut(!preferred)),
    };
    let (pieces, band) = match cut {
        Some(c) => c,
        None if nb >= 2 => (1, 0),
        None => return SERIAL,
    };
    Plan {
        pieces,
        by_rows,
        band,
        blocks: nb * pieces,
    }
}

/// [`plan`] for faer's path ([`DOT_LAYOUT_MAX_ROWS`]): [`DOT_BAND`]-column bands at any
/// thread count, each its own block when shared.
fn dot_plan(threads: usize, (nb, n, m, k): (usize, usize, usize, usize)) -> Plan {
    let pieces = m.div_ceil(DOT_BAND);
    let serial = runs_serially(threads, (nb, n, m, k));
    Plan {
        pieces,
        by_rows: false,
        band: DOT_BAND,
        blocks: if serial { 1 } else { nb * pieces },
    }
}

/// `dst` (row-major, `rs` between rows) = `a` @ `b` for one `n` x `k` @ `k` x `m` block, on
/// faer's kernel when `faer_path` and `gemm`'s otherwise.
///
/// # Safety
/// Every element of `a`, `b` and `dst` addressed through the strides must be valid; `dst` must
/// not overlap the inputs.
#[inline]
#[allow(clippy::too_many_arguments)]
unsafe fn kernel<T: GemmScalar>(
    faer_path: bool,
    n: usize,
    m: usize,
    k: usize,
    dst: *mut T,
    dst_rs: usize,
    a: Operand<T>,
    b: Operand<T>,
) {
    if faer_path {
        // SAFETY: forwarded from the caller.
        unsafe {
            T::faer_block(
                n,
                m,
                k,
                dst,
                dst_rs as isize,
                (a.ptr, a.rs, a.cs),
                (b.ptr, b.rs, b.cs),
            )
        };
        return;
    }
    // gemm computes dst = alpha*dst + beta*a@b; read_dst=false means dst is only written.
    unsafe {
        gemm::gemm(
            n,
            m,
            k,
            dst,
            1,
            dst_rs as isize,
            false,
            a.ptr,
            a.cs,
            a.rs,
            b.ptr,
            b.cs,
            b.rs,
            T::ZERO,
            T::ONE,
            false,
            false,
            false,
            gemm::Parallelism::None,
        )
    }
}

/// `dst` = `a` @ `b`, or `dst + a @ b` when `accumulate`, for one `n` x `k` @ `k` x `m` product
/// on the calling thread: for kernels that cut their work into blocks themselves
/// (convolution), with row and column strides given per operand and for `dst`.
///
/// # Safety
/// Every element of `a` (`n` x `k` through `a_rs`, `a_cs`), `b` (`k` x `m`) and `dst` must be
/// valid, and `dst` must not overlap the inputs.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn gemm_block<T: GemmScalar>(
    (n, m, k): (usize, usize, usize),
    (dst, dst_rs, dst_cs): (*mut T, usize, usize),
    accumulate: bool,
    (a, a_rs, a_cs): (*const T, isize, isize),
    (b, b_rs, b_cs): (*const T, isize, isize),
) {
    if n == 0 || m == 0 {
        return;
    }
    if k == 0 {
        if !accumulate {
            for r in 0..n {
                for c in 0..m {
                    // SAFETY: the caller vouches for every element of `dst`.
                    unsafe { *dst.add(r * dst_rs + c * dst_cs) = T::ZERO };
                }
            }
        }
        return;
    }
    // SAFETY: forwarded from the caller.
    unsafe {
        gemm::gemm(
            n,
            m,
            k,
            dst,
            dst_cs as isize,
            dst_rs as isize,
            accumulate,
            a,
            a_cs,
            a_rs,
            b,
            b_cs,
            b_rs,
            T::ONE,
            T::ONE,
            false,
            false,
            false,
            gemm::Parallelism::None,
        )
    }
}

/// Batched product `a @ b` of shape `batch` x `n` x `m`, `k` the shared dimension, returned
/// row-major. Uses up to `threads` threads (ferrograd's pool supplies the helpers).
///
/// Fails (without touching memory) when a stride would reach outside an operand's buffer.
pub fn matmul_strided<T: GemmScalar>(
    batch: &[usize],
    n: usize,
    k: usize,
    m: usize,
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    threads: usize,
) -> Result<Vec<T>> {
    let nb: usize = batch.iter().product();
    let total = nb
        .checked_mul(n)
        .and_then(|x| x.checked_mul(m))
        .ok_or_else(|| Error::runtime("matmul: output too large"))?;
    if total == 0 {
        return Ok(Vec::new());
    }
    // Fallible, so an output too big for memory is an error and not an aborted process.
    let mut out: Vec<T> = Vec::new();
    out.try_reserve_exact(total).map_err(|_| {
        crate::tensor::creation::cannot_allocate(total as u128 * std::mem::size_of::<T>() as u128)
    })?;
    if k == 0 {
        // An empty sum: torch gives zeros, and the kernel would not write anything.
        out.resize(total, T::ZERO);
        return Ok(out);
    }
    let oa = operand(&a, batch, n, k)?;
    let ob = operand(&b, batch, k, m)?;
    let dst = SendPtr(out.as_mut_ptr());
    let (pa, pb) = (SendPtr(oa), SendPtr(ob));
    // A huge product is computed in slices of at most SLICE_WORK multiply-adds, and the thread
    // that asked for it checks for Ctrl-C between them (other threads' checks do nothing).
    let huge = nb.saturating_mul(n).saturating_mul(m).saturating_mul(k) > SLICE_WORK;
    let faer_path = !huge && n <= DOT_LAYOUT_MAX_ROWS && oa.cs == 1 && ob.rs == 1 && ob.cs != 1;
    let p = if faer_path {
        dot_plan(threads, (nb, n, m, k))
    } else {
        plan(threads, (nb, n, m, k), oa.cs == 1, ob.cs == 1)
    };
    let _interruptible = huge.then(crate::interrupt::Started::new);
    let stop: OnceLock<Error> = OnceLock::new();
    // `rows` x `cols` of the output at `dst` from `a` (rows) and `b` (cols), slice by slice.
    let product = |rows: usize, cols: usize, dst: *mut T, a: Operand<T>, b: Operand<T>| {
        let by_rows = rows >= cols;
        let (len, other) = if by_rows { (rows, cols) } else { (cols, rows) };
        let slice = if huge {
            (SLICE_WORK / (other * k).max(1))
                .max(64)
                .next_multiple_of(16)
        } else {
            len
        };
        let mut lo = 0;
        while lo < len {
            if huge {
                if stop.get().is_some() {
                    return;
                }
                if let Err(e) = crate::interrupt::poll_now() {
                    let _ = stop.set(e);
                    return;
                }
            }
            let hi = (lo + slice).min(len);
            // SAFETY: the slice lies inside the block the caller handed over.
            unsafe {
                if by_rows {
                    let a1 = Operand {
                        ptr: a.ptr.offset(lo as isize * a.rs),
                        ..a
                    };
                    kernel(faer_path, hi - lo, cols, k, dst.add(lo * m), m, a1, b);
                } else {
                    let b1 = Operand {
                        ptr: b.ptr.offset(lo as isize * b.cs),
                        ..b
                    };
                    kernel(faer_path, rows, hi - lo, k, dst.add(lo), m, a, b1);
                }
            }
            lo = hi;
        }
    };
    // One (matrix, band) unit; every element of the output belongs to exactly one unit.
    let unit = |u: usize| {
        let (i, piece) = (u / p.pieces, u % p.pieces);
        let (oa, ob, dst) = (pa.get(), pb.get(), dst.get());
        let a_off = batch_offset(i, batch, a.batch_strides) as isize;
        let b_off = batch_offset(i, batch, b.batch_strides) as isize;
        let base = i * n * m;
        // SAFETY: `operand` checked that every (batch, row, col) of a and b is in bounds and the
        // band lies inside the matrix; `out` has capacity `total` and units are disjoint.
        unsafe {
            let a0 = Operand {
                ptr: oa.ptr.offset(a_off),
                ..oa
            };
            let b0 = Operand {
                ptr: ob.ptr.offset(b_off),
                ..ob
            };
            if p.pieces == 1 {
                product(n, m, dst.add(base), a0, b0);
            } else {
                let lo = piece * p.band;
                if p.by_rows {
                    let hi = (lo + p.band).min(n);
                    let a1 = Operand {
                        ptr: a0.ptr.offset(lo as isize * a0.rs),
                        ..a0
                    };
                    product(hi - lo, m, dst.add(base + lo * m), a1, b0);
                } else {
                    let hi = (lo + p.band).min(m);
                    let b1 = Operand {
                        ptr: b0.ptr.offset(lo as isize * b0.cs),
                        ..b0
                    };
                    product(n, hi - lo, dst.add(base + lo), a0, b1);
                }
            }
        }
    };
    let units = nb * p.pieces;
    let block = |c: usize| {
        for u in c * units / p.blocks..(c + 1) * units / p.blocks {
            unit(u);
        }
    };
    if p.blocks == 1 {
        (0..units).for_each(unit);
    } else {
        crate::parallel::share_work(threads - 1, p.blocks, &block);
    }
    if let Some(e) = stop.into_inner() {
        return Err(e);
    }
    // SAFETY: the units cover all `total` elements and the kernel wrote each one.
    unsafe { out.set_len(total) };
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_small_products_run_serially() {
        assert_eq!(plan(2, (1, 32, 32, 32), true, true).blocks, 1);
        assert_eq!(plan(1, (1, 1024, 1024, 1024), true, true).blocks, 1);
        assert_eq!(plan(2, (1, 128, 512, 10), true, true).blocks, 1);
        // A short reduction into a big output is shared (memory-bound writing).
        assert!(plan(2, (1, 4096, 1024, 8), false, true).blocks > 1);
    }

    #[test]
    fn plan_bands_respect_kernel_paths() {
        // Square: one row band per thread.
        let p = plan(2, (1, 1024, 1024, 1024), true, true);
        assert_eq!((p.by_rows, p.pieces, p.band, p.blocks), (true, 2, 512, 2));
        let p = plan(2, (1, 192, 192, 192), true, true);
        assert_eq!((p.by_rows, p.pieces, p.band), (true, 2, 96));
        // Wider than tall: sixteen 64-column bands for two threads, so a slowed thread takes
        // fewer; 192 fits three 64-column bands, but two 96-column ones share evenly.
        let p = plan(2, (1, 512, 1024, 1024), true, true);
        assert_eq!((p.by_rows, p.pieces, p.band, p.blocks), (false, 16, 64, 16));
        let p = plan(2, (1, 128, 192, 192), true, true);
        assert_eq!((p.by_rows, p.pieces, p.band), (false, 2, 96));
        // Much taller than wide: row bands, one per thread (each re-packs `b`).
        let p = plan(2, (1, 784, 128, 512), true, true);
        assert_eq!((p.by_rows, p.pieces, p.band), (true, 2, 400));
        // A transposed `a` is re-packed by every column band: split by rows instead.
        let p = plan(2, (1, 1024, 1024, 1024), false, true);
        assert_eq!((p.by_rows, p.pieces), (true, 2));
        // A transposed `b` likewise by every row band: columns, where `a` is read in place.
        let p = plan(2, (1, 1024, 1024, 1024), true, false);
        assert_eq!((p.by_rows, p.pieces), (false, 16));
        let p = plan(2, (1, 1024, 1024, 1024), false, false);
        assert_eq!(p.pieces, 2);
        // Other side <= 64 and k > 512: every band, the last included, must stay above 64; when
        // the preferred direction cannot, the other one is cut (its bands stay large: the
        // other side is above 64).
        let p = plan(2, (1, 96, 32, 1000), true, true);
        assert_eq!((p.by_rows, p.pieces, p.band), (false, 2, 16));
        let p = plan(2, (1, 64, 100, 1000), true, true);
        assert_eq!((p.by_rows, p.pieces, p.band), (true, 2, 32));
        assert_eq!(plan(2, (1, 96, 40, 1000), true, true).blocks, 1);
        let p = plan(2, (1, 200, 32, 1000), true, true);
        assert_eq!((p.pieces, p.band), (2, 112));
        // Bands above 256 elements.
        let p = plan(2, (1, 8, 40, 4096), true, true);
        assert!(p.blocks == 1 || p.band * 8 > 256);
        let p = plan(2, (3, 64, 64, 64), true, true);
        assert_eq!((p.pieces, p.blocks), (1, 3));
    }
}
