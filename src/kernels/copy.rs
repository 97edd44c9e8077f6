//! Copies that record nothing: dtype conversion ([`cast`]) and row-major copies of permuted and
//! strided views (`contiguous()` of a `permute`, a `.t()`, a
//! sliced tensor), kept apart from `Layout::gather` on purpose: a tiled branch inside gather's
//! hot loop made pixel_shuffle's gathers 30% slower even when switched off (commit fddc2d6).
//!
//! The copy walks the view's dimensions outermost first, after dropping size-1 dimensions and
//! merging neighbours that are contiguous in the source. The innermost destination dimension
//! decides the inner kernel: a memcpy when it is contiguous in the source; a tiled transpose
//! with the dimension that is most nearly contiguous in the source when it is not, so reads and
//! writes both stay within a few cache lines; a strided loop otherwise. Large copies are split
//! over the outer dimensions among the pool's threads (a copy is the same at any thread count).

use crate::error::{Error, Result};
use crate::parallel::SendPtr;
use crate::tensor::storage::contiguous_strides;
use crate::tensor::{DType, Element, Layout, Tensor};

/// One dimension of the copy: size, stride in the source, stride in the destination.
#[derive(Clone, Copy, Debug)]
struct Dim {
    n: usize,
    src: usize,
    dst: usize,
}

/// How the innermost destination dimension is filled.
#[derive(Clone, Copy, Debug)]
enum Inner {
    /// Contiguous in the source too: `n` elements at once.
    Run { n: usize },
    /// Strided in the source, with no better dimension to pair it with.
    Strided { n: usize, src: usize },
    /// Tiled with dimension `k`, the one read most nearly contiguously: `tile.0` is `k`
    /// (strided in the destination), `tile.1` the innermost destination dimension.
    Tile(Dim, Dim),
}

/// Elements below which a copy stays on the calling thread.
const PAR_MIN: usize = 1 << 16;

/// Side of the square blocks a transpose is cut into (32 × 32 f32 reads touch 64 cache lines).
const BLOCK: usize = 32;

/// The elements `layout` addresses in `data`, in row-major order (what `Layout::gather`
/// returns), at memory speed for any permutation or slicing.
///
/// Errors: the layout reaching past `data` (an internal error), or torch's allocation error
/// when the copy cannot be held.
pub(crate) fn permuted_copy<T: Copy + Send + Sync>(layout: &Layout, data: &[T]) -> Result<Vec<T>> {
    let numel = crate::tensor::creation::checked_numel(&layout.shape)?;
    let mut out = crate::tensor::creation::try_vec::<T>(numel)?;
    if numel == 0 {
        return Ok(out);
    }
    let last = layout.offset
        + layout
            .shape
            .iter()
            .zip(&layout.strides)
            .map(|(&d, &s)| (d - 1) * s)
            .sum::<usize>();
    if last >= data.len() {
        return Err(Error::runtime(format!(
            "internal error: layout {layout:?} reaches past a storage of {} elements",
            data.len()
        )));
    }
    let (outer, inner) = plan(layout);
    let src = SendPtr(data[layout.offset..].as_ptr());
    let dst = SendPtr(out.as_mut_ptr());
    let count: usize = outer.iter().map(|d| d.n).product();
    let helpers = if numel >= PAR_MIN {
        crate::parallel::helpers()
    } else {
        0
    };
    // A few blocks per thread so one slow thread does not hold the others up.
    let want = (helpers + 1) * 4;
    if let Inner::Tile(k, l) = inner {
        if helpers > 0 && count < want && k.n >= 2 * BLOCK {
            // Too few outer indices to share (a plain 2-D transpose has one): split each
            // plane's `k` rows too, in whole blocks.
            let chunk = BLOCK * (k.n.div_ceil(BLOCK)).div_ceil(want.div_ceil(count)).max(1);
            let units = count * k.n.div_ceil(chunk);
            crate::parallel::share_work(helpers, units, &|u| {
                // SAFETY: as below; each unit writes the rows `chunk · c ..` of one plane.
                unsafe { copy_tile_chunk(&outer, k, l, chunk, u, src.get(), dst.get()) };
            });
            // SAFETY: the units above wrote all `numel` elements.
            unsafe { out.set_len(numel) };
            return Ok(out);
        }
    }
    let tasks = if helpers == 0 { 1 } else { count.min(want) };
    let per = count.div_ceil(tasks);
    crate::parallel::share_work(helpers, tasks, &|t| {
        let range = t * per..((t + 1) * per).min(count);
        // SAFETY: every (outer index, inner element) pair writes a distinct destination element
        // below `numel` (the destination strides are row-major), each task writes only its own
        // outer indices, and every source offset is at most `last`, checked above.
        unsafe { copy_outer(&outer, inner, range, src.get(), dst.get()) };
    });
    // SAFETY: the tasks above wrote all `numel` elements.
    unsafe { out.set_len(numel) };
    Ok(out)
}

/// The elements of `t`'s storage that `layout` addresses, in row-major order.
///
/// Errors: `t` not holding `T`, or those of [`permuted_copy`].
pub(crate) fn copy_layout<T: Element>(t: &Tensor, layout: &Layout) -> Result<Vec<T>> {
    let guard = t.storage().read();
    let data = T::data(&guard)
        .ok_or_else(|| Error::runtime(format!("internal error: storage is not {:?}", T::DTYPE)))?;
    permuted_copy(layout, data.as_slice())
}

/// `x` read as the row-major shape `view`, permuted by `perm` and copied into a new row-major
/// tensor of shape `shape` (as many elements), without recording: pixel_shuffle's
/// `reshape(view).permute(perm).contiguous().reshape(shape)` in one copy, the result owning its
/// storage alone (a reshaped view keeps its base alive, so the engine could not take it as
/// `.grad` without another copy).
pub(crate) fn permute_reshape_copy(
    x: &Tensor,
    view: &[usize],
    perm: &[usize],
    shape: &[usize],
) -> Result<Tensor> {
    let x = if x.is_contiguous() {
        x.clone()
    } else {
        copy_raw(x)?
    };
    let strides = contiguous_strides(view);
    let layout = Layout {
        shape: perm.iter().map(|&p| view[p]).collect(),
        strides: perm.iter().map(|&p| strides[p]).collect(),
        offset: x.layout().offset,
    };
    let buf = crate::tensor::storage::with_dtype!(x.dtype(), T => T::wrap(copy_layout::<T>(&x, &layout)?));
    Tensor::from_buffer(buf, shape)
}

/// The outer dimensions (outermost first) and the inner kernel for a copy of `layout`.
fn plan(layout: &Layout) -> (Vec<Dim>, Inner) {
    let dst = crate::tensor::storage::contiguous_strides(&layout.shape);
    let mut dims: Vec<Dim> = Vec::with_capacity(layout.shape.len());
    for ((&n, &src), &dst) in layout.shape.iter().zip(&layout.strides).zip(&dst) {
        if n == 1 {
            continue;
        }
        match dims.last_mut() {
            // Destination strides are row-major, so only the source decides a merge.
            Some(prev) if prev.src == src * n => {
                *prev = Dim {
                    n: prev.n * n,
                    src,
                    dst,
                }
            }
            _ => dims.push(Dim { n, src, dst }),
        }
    }
    let Some(last) = dims.pop() else {
        return (dims, Inner::Run { n: 1 });
    };
    if last.src == 1 {
        return (dims, Inner::Run { n: last.n });
    }
    // The dimension read most nearly contiguously, when it reads closer than `last` does.
    let k = (0..dims.len())
        .filter(|&i| dims[i].src != 0 && dims[i].src < last.src)
        .min_by_key(|&i| (dims[i].src, std::cmp::Reverse(dims[i].n)));
    match k {
        Some(k) => {
            let kd = dims.remove(k);
            (dims, Inner::Tile(kd, last))
        }
        None => (
            dims,
            Inner::Strided {
                n: last.n,
                src: last.src,
            },
        ),
    }
}

/// Copies the outer indices `range` (row-major over `outer`) with the `inner` kernel.
///
/// # Safety
/// `src` and `dst` must be valid for every offset the plan reaches from these indices.
unsafe fn copy_outer<T: Copy>(
    outer: &[Dim],
    inner: Inner,
    range: std::ops::Range<usize>,
    src: *const T,
    dst: *mut T,
) {
    if range.is_empty() {
        return;
    }
    // Multi-index and offsets of the first outer index.
    let mut idx = vec![0usize; outer.len()];
    let (mut so, mut dof) = (0usize, 0usize);
    let mut rem = range.start;
    for (d, i) in outer.iter().zip(idx.iter_mut()).rev() {
        *i = rem % d.n;
        rem /= d.n;
        so += *i * d.src;
        dof += *i * d.dst;
    }
    for _ in range {
        unsafe {
            match inner {
                Inner::Run { n } => std::ptr::copy_nonoverlapping(src.add(so), dst.add(dof), n),
                Inner::Strided { n, src: s } => {
                    let (sp, dp) = (src.add(so), dst.add(dof));
                    for j in 0..n {
                        *dp.add(j) = *sp.add(j * s);
                    }
                }
                Inner::Tile(k, l) => tile(src.add(so), dst.add(dof), k, l),
            }
        }
        for (d, i) in outer.iter().zip(idx.iter_mut()).rev() {
            *i += 1;
            so += d.src;
            dof += d.dst;
            if *i < d.n {
                break;
            }
            so -= d.src * d.n;
            dof -= d.dst * d.n;
            *i = 0;
        }
    }
}

/// Unit `u` of a tiled copy whose `k` rows are cut into chunks of `chunk`: outer index
/// `u / chunks`, rows `chunk · (u % chunks)..` of that index's `k × l` plane.
///
/// # Safety
/// As [`copy_outer`].
unsafe fn copy_tile_chunk<T: Copy>(
    outer: &[Dim],
    k: Dim,
    l: Dim,
    chunk: usize,
    u: usize,
    src: *const T,
    dst: *mut T,
) {
    let chunks = k.n.div_ceil(chunk);
    let (mut rem, c) = (u / chunks, u % chunks);
    let (mut so, mut dof) = (0usize, 0usize);
    for d in outer.iter().rev() {
        let i = rem % d.n;
        rem /= d.n;
        so += i * d.src;
        dof += i * d.dst;
    }
    let k0 = c * chunk;
    let part = Dim {
        n: chunk.min(k.n - k0),
        ..k
    };
    unsafe { tile(src.add(so + k0 * k.src), dst.add(dof + k0 * k.dst), part, l) };
}

/// `dst[i·k.dst + j] = src[i·k.src + j·l.src]` for `i < k.n`, `j < l.n`: a transpose of one
/// `k × l` plane. Blocks of [`BLOCK`]² keep the strided side within the cache; a short `l`
/// (pixel_shuffle's `r`) is read row by row of `k` instead, each read run contiguous.
///
/// # Safety
/// Every offset named above must be valid in `src` / `dst`.
#[inline]
unsafe fn tile<T: Copy>(src: *const T, dst: *mut T, k: Dim, l: Dim) {
    unsafe {
        if l.n < 8 {
            for j in 0..l.n {
                let (sp, dp) = (src.add(j * l.src), dst.add(j));
                for i in 0..k.n {
                    *dp.add(i * k.dst) = *sp.add(i * k.src);
                }
            }
            return;
        }
        for i0 in (0..k.n).step_by(BLOCK) {
            for j0 in (0..l.n).step_by(BLOCK) {
                let j1 = (j0 + BLOCK).min(l.n);
                for i in i0..(i0 + BLOCK).min(k.n) {
                    let (sp, dp) = (src.add(i * k.src), dst.add(i * k.dst));
                    for j in j0..j1 {
                        *dp.add(j) = *sp.add(j * l.src);
                    }
                }
            }
        }
    }
}

// ----- dtype conversion ----------------------------------------------------------------------

fn convert_to<D: Element>(t: &Tensor) -> Result<Vec<D>> {
    // A strided view of the same dtype goes through the tiled copy kernel (a permute's or a
    // transpose's `contiguous()`), except tiny ones, where the kernel's planning costs more than
    // gather's walk (~20 ns a call on a 6x8 transpose); the rest is `to_vec`'s conversion.
    if t.dtype() == D::DTYPE && !t.is_contiguous() && t.numel() > 64 {
        return copy_layout(t, t.layout());
    }
    t.to_vec::<D>()
}

/// A contiguous copy of `t` converted to `dtype`, without recording.
pub(crate) fn cast(t: &Tensor, dtype: DType) -> Result<Tensor> {
    if let Some(r) = crate::tensor::batched::elementwise(&[t], |p| cast(&p[0], dtype)) {
        return r;
    }
    crate::tensor::creation::ensure_allocatable(t.numel(), dtype)?;
    let buf = crate::tensor::storage::with_dtype!(dtype, T => T::wrap(convert_to::<T>(t)?));
    Tensor::from_buffer(buf, t.shape())
}

/// `t` itself when it already has dtype `d`, else a converted copy (no recording).
pub(crate) fn as_dtype(t: &Tensor, d: DType) -> Result<Tensor> {
    if t.dtype() == d {
        Ok(t.clone())
    } else {
        cast(t, d)
    }
}

/// A contiguous copy with the same dtype, without recording.
pub(crate) fn copy_raw(t: &Tensor) -> Result<Tensor> {
    cast(t, t.dtype())
}

/// `f` of `t` widened to its compute type ([`DType::compute`]), the result narrowed back to
/// `t`'s dtype, without recording: how a kernel written for int64, float32 and float64 serves
/// the narrow storage types (half types compute in float32 and round on store, as torch's CPU
/// kernels do).
pub(crate) fn via_compute(t: &Tensor, f: impl FnOnce(&Tensor) -> Result<Tensor>) -> Result<Tensor> {
    let d = t.dtype();
    let out = f(&cast(t, d.compute())?)?;
    if out.dtype() == d.compute() {
        cast(&out, d)
    } else {
        Ok(out)
    }
}
