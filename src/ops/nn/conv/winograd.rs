//! Winograd's minimal filtering F(2x2, 3x3) (Lavin & Gray, "Fast Algorithms for Convolutional
//! Neural Networks", 2016) for float32 3x3 convolutions with stride 1 and no dilation: each 2x2
//! output tile is `Aᵀ [(G g Gᵀ) ⊙ (Bᵀ d B)] A` of the 4x4 input tile `d`, so the channel
//! reduction becomes 16 products of `out x in` by `in x tiles` (2.25x fewer multiplies than
//! im2col's one product). The transforms' constants are 0, ±1 and ±1/2, so the result stays
//! within a few ulp of the direct sum.
//!
//! F(4x4, 3x3) (36 products per 16 outputs, 4x fewer multiplies) was measured here and is not
//! used: on 64-channel 32x32 layers its transforms cost more than its products save (forward
//! 4.1-4.9 ms against 3.8-3.9), and its float32 error is 8x larger.
//!
//! The weight gradient is the adjoint in the filter: per point, the output gradient's tiles
//! transformed by `A g Aᵀ` times the same input transform, summed over tiles, then `Gᵀ Z G`.
//!
//! Work is cut into (image, band of tile rows) units, the bands sized so the transformed input
//! and the products stay in the core's L2 cache; every unit writes its own output rows, so the
//! result is the same at any thread count.

use super::{dims, for_units, sum_partials, ConvGeometry, Dims3, WEIGHT_CHUNKS};
use crate::error::Result;
use crate::kernels::gemm::gemm_block;
use crate::parallel::SendPtr;

/// Whether the geometry is one F(2x2, 3x3) computes and where it pays: a 2-d 3x3 kernel,
/// stride and dilation 1, padding below the kernel, enough channels per group that the
/// transforms (linear in channels) are small beside the products (quadratic): measured on
/// 28x28 and 32x32 images, 32 in and out channels break even with im2col, 64 run 1.5x faster,
/// 16 run 1.2x slower; and enough tiles in the batch that the products pay for transforming
/// the weight (16 floats per filter, read once per tile): on 512 channels of 7x7, one image
/// (20 tiles) took 6.1 ms against im2col's 1.2 and eight (160) 12.3 against 9.2, while one
/// 128-channel 28x28 image (210) took 0.83 against 1.11.
pub(super) fn applies(geo: &ConvGeometry) -> bool {
    let Dims3 { cg, og, .. } = dims(geo);
    let tiles = |geo: &ConvGeometry| {
        let grid = Grid::of(geo, M);
        geo.batch * grid.th * grid.pitch()
    };
    geo.kernel == [3, 3]
        && geo.stride == [1, 1]
        && geo.dilation == [1, 1]
        && geo.padding.iter().all(|&p| p <= 2)
        && geo.output.iter().all(|&o| o >= 2)
        && cg >= 32
        && og >= 32
        && tiles(geo) >= MIN_TILES
}

/// The fewest tiles (in the whole batch) [`applies`] takes.
const MIN_TILES: usize = 200;

/// Outputs per tile side.
const M: usize = 2;
/// Input rows and columns per tile.
const A: usize = 4;
/// Transform points per tile.
const POINTS: usize = A * A;
/// Tiles per unit: the transformed input and the products (`16 * (in + out) * TILES` floats per
/// group) stay near 1 MiB for 64 channels, within a core's L2.
const TILES: usize = 128;
/// The filter transform G (rows: the points 0, 1, -1 and infinity).
const G: [[f64; 3]; A] = [
    [1.0, 0.0, 0.0],
    [0.5, 0.5, 0.5],
    [0.5, -0.5, 0.5],
    [0.0, 0.0, 1.0],
];

// The data transforms as straight-line functions of one tile column (or row): with no loops
// and no coefficient tables, they inline into the loops over the tiles, which then vectorise.

/// `Bᵀ d` of one column (or row) of an input tile.
#[inline(always)]
fn bt([d0, d1, d2, d3]: [f32; A]) -> [f32; A] {
    [d0 - d2, d1 + d2, d2 - d1, d1 - d3]
}

/// `Aᵀ m` of one column (or row) of a tile's products.
#[inline(always)]
fn at([m0, m1, m2, m3]: [f32; A]) -> [f32; M] {
    [m0 + m1 + m2, m1 - m2 - m3]
}

/// `A g` of one column (or row) of an output-gradient tile.
#[inline(always)]
fn a_of([g0, g1]: [f32; M]) -> [f32; A] {
    [g0, g0 + g1, g0 - g1, -g1]
}

/// Workspace the transforms need for a unit of `tiles` tiles: the input's padded rows or the
/// output transform's two passes.
fn work_len(tiles: usize) -> usize {
    (A * (M * tiles + M)).max((A + M) * M * tiles)
}

/// `G g Gᵀ` of each 3x3 filter, laid out per group as
/// `[point][out][in]`: the right-hand operand of the per-point products, read column-major
/// (`in` contiguous).
fn transform_weights(geo: &ConvGeometry, w: &[f32]) -> Result<Vec<f32>> {
    let Dims3 { cg, og, .. } = dims(geo);
    let per_group = POINTS * og * cg;
    let total = geo.groups * per_group;
    let mut v = crate::tensor::creation::try_vec::<f32>(total)?;
    // SAFETY: every element is written below (each filter its 16 points) before `v` is read.
    unsafe { v.set_len(total) };
    let vp = SendPtr(v.as_mut_ptr());
    // Blocks of filters of one group, shared among the threads. A filter's points lie
    // `og * cg` apart and a block's filters are adjacent, so each block is computed across its
    // filters and written as 16 contiguous runs: one filter at a time, with its points
    // scattered, it took 40 ns, longer than a 7x7 layer's product.
    let per = og * cg;
    let blocks = per.div_ceil(FILTERS);
    crate::parallel::share_work(crate::parallel::helpers(), geo.groups * blocks, &|u| {
        let (gi, b) = (u / blocks, u % blocks);
        let first = b * FILTERS;
        let n = FILTERS.min(per - first);
        let mut out = [[0.0f32; FILTERS]; POINTS];
        filter_block(&w[(gi * per + first) * 9..][..n * 9], &mut out);
        for (pq, run) in out.iter().enumerate() {
            let at = gi * per_group + pq * per + first;
            // SAFETY: this block alone writes filters first..first + n of group gi at
            // point pq, a run inside `v`.
            unsafe { std::ptr::copy_nonoverlapping(run.as_ptr(), vp.get().add(at), n) };
        }
    });
    Ok(v)
}

/// Filters per block of [`transform_weights`].
const FILTERS: usize = 64;

/// `G f Gᵀ` of up to [`FILTERS`] filters (9 values each in `src`), point `pq` of filter t at
/// `out[pq][t]`: the loops run across the filters, so they vectorise. G's entries are 0, ±1/2
/// and 1, so float32 loses at most an ulp or so to the sums' rounding.
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq+avx2+avx+fma",
    "x86_64+avx2+avx+fma",
    "aarch64+neon"
))]
fn filter_block(src: &[f32], out: &mut [[f32; FILTERS]; POINTS]) {
    let mut f = [[0.0f32; FILTERS]; 9];
    for (t, filter) in src.chunks_exact(9).enumerate().take(FILTERS) {
        for (i, &x) in filter.iter().enumerate() {
            f[i][t] = x;
        }
    }
    // k = G f per filter (4 x 3), then the points (G f) Gᵀ.
    let mut k = [[[0.0f32; FILTERS]; 3]; A];
    for (kp, gp) in k.iter_mut().zip(&G) {
        let gp = gp.map(|g| g as f32);
        for (j, kpj) in kp.iter_mut().enumerate() {
            for t in 0..FILTERS {
                kpj[t] = gp[0] * f[j][t] + gp[1] * f[3 + j][t] + gp[2] * f[6 + j][t];
            }
        }
    }
    for (p, kp) in k.iter().enumerate() {
        for (q, gq) in G.iter().enumerate() {
            let gq = gq.map(|g| g as f32);
            for (t, o) in out[p * A + q].iter_mut().enumerate() {
                *o = kp[0][t] * gq[0] + kp[1][t] * gq[1] + kp[2][t] * gq[2];
            }
        }
    }
}

/// `gw = Gᵀ Z G` of every filter from the per-point sums `z` (`[group][point][in][out]`, the
/// products' column-major layout), in float64.
fn filter_gradient(geo: &ConvGeometry, z: &[f32]) -> Result<Vec<f32>> {
    let Dims3 { cg, og, .. } = dims(geo);
    let (a, g, points) = (A, &G, POINTS);
    let mut gw = crate::tensor::creation::try_filled_vec(geo.out_channels * cg * 9, 0.0f32)?;
    let mut zs = [0.0f64; 36];
    for gi in 0..geo.groups {
        for o in 0..og {
            for c in 0..cg {
                for (p, zp) in zs[..points].iter_mut().enumerate() {
                    *zp = f64::from(z[((gi * points + p) * cg + c) * og + o]);
                }
                let dst = &mut gw[((gi * og + o) * cg + c) * 9..][..9];
                for i in 0..3 {
                    for j in 0..3 {
                        let mut acc = 0.0f64;
                        for (p, gp) in g.iter().enumerate() {
                            for (q, gq) in g.iter().enumerate() {
                                acc += gp[i] * gq[j] * zs[p * a + q];
                            }
                        }
                        dst[i * 3 + j] = acc as f32;
                    }
                }
            }
        }
    }
    Ok(gw)
}

/// Geometry of the tile grid of one image.
#[derive(Clone, Copy)]
struct Grid {
    /// Input rows and columns.
    h: usize,
    w: usize,
    /// Output rows and columns.
    oh: usize,
    ow: usize,
    /// Padding before rows and columns.
    ph: usize,
    pw: usize,
    /// Tile rows and columns (2x2 outputs each).
    th: usize,
    tw: usize,
}

impl Grid {
    fn of(geo: &ConvGeometry, m: usize) -> Grid {
        let (oh, ow) = (geo.output[0], geo.output[1]);
        Grid {
            h: geo.input[0],
            w: geo.input[1],
            oh,
            ow,
            ph: geo.padding[0],
            pw: geo.padding[1],
            th: oh.div_ceil(m),
            tw: ow.div_ceil(m),
        }
    }

    /// Tile rows are laid out `tw + 1` apart: the extra column is the overlap the input
    /// transform reads past each row's last tile, so each step runs over a whole band at once
    /// instead of over rows of a few tiles (its junk products are never read).
    fn pitch(&self) -> usize {
        self.tw + 1
    }

    /// The images in the batch's global tile rows `band`, each with its local tile rows and
    /// the first column of those in the band's layout.
    fn segments(
        &self,
        band: std::ops::Range<usize>,
    ) -> impl Iterator<Item = (usize, std::ops::Range<usize>, usize)> + '_ {
        let (first, th, pitch) = (band.start, self.th, self.pitch());
        (band.start / th..band.end.div_ceil(th)).map(move |n| {
            let lo = band.start.max(n * th) - n * th;
            let hi = band.end.min((n + 1) * th) - n * th;
            (n, lo..hi, (n * th + lo - first) * pitch)
        })
    }
}

/// The batch's tile rows and the band of them a unit takes: a run of tile rows, across images
/// when they are small, so the products stay long enough to run at the kernel's speed.
fn band_of(grid: &Grid, batch: usize) -> (usize, usize) {
    let total = batch * grid.th;
    (total, (TILES / grid.pitch()).clamp(1, total))
}

pub(super) fn forward(
    geo: &ConvGeometry,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
) -> Result<Vec<f32>> {
    let Dims3 { cg, og, .. } = dims(geo);
    let (oh, ow) = (geo.output[0], geo.output[1]);
    let grid = Grid::of(geo, M);
    let points = POINTS;
    let v = transform_weights(geo, w)?;
    let total_len = geo.batch * geo.out_channels * oh * ow;
    let mut y = crate::tensor::creation::try_vec::<f32>(total_len)?;
    // SAFETY: the units' output transforms write every element (each its tile rows of every
    // image, channel and column) before `y` is read; on an error `y` is dropped unread.
    unsafe { y.set_len(total_len) };
    let yp = SendPtr(y.as_mut_ptr());
    let pitch = grid.pitch();
    let (total, band) = band_of(&grid, geo.batch);
    let tiles = band * pitch;
    // Transformed input, products, then the transforms' workspace.
    let scratch = points * (cg + og) * tiles + work_len(tiles);
    let flops = geo.batch * geo.out_channels * oh * ow * cg * 4;
    for_units::<f32>(total.div_ceil(band), flops, scratch, &|unit, buf| {
        let rows = unit * band..((unit + 1) * band).min(total);
        let t = rows.len() * pitch;
        let (u, rest) = buf.split_at_mut(points * cg * tiles);
        let (m, work) = rest.split_at_mut(points * og * tiles);
        for gi in 0..geo.groups {
            for (n, local, col) in grid.segments(rows.clone()) {
                for c in 0..cg {
                    let plane = &x[(n * geo.in_channels + gi * cg + c) * grid.h * grid.w..]
                        [..grid.h * grid.w];
                    let dst = &mut u[c * tiles + col..];
                    transform_input(plane, &grid, local.clone(), dst, cg * tiles, work);
                }
            }
            let vg = &v[gi * points * og * cg..][..points * og * cg];
            for p in 0..points {
                // M_p^T (t x og) = U_p^T (t x cg) @ V_p^T (cg x og), all three column-major.
                // SAFETY: `u` holds cg rows of `tiles` for point p, `vg` og x cg for point p,
                // `m` og rows of `tiles`; the destination does not overlap the operands.
                unsafe {
                    gemm_block(
                        (t, og, cg),
                        (m[p * og * tiles..].as_mut_ptr(), 1, tiles),
                        false,
                        (u[p * cg * tiles..].as_ptr(), 1, tiles as isize),
                        (vg[p * og * cg..].as_ptr(), 1, cg as isize),
                    );
                }
            }
            for (n, local, col) in grid.segments(rows.clone()) {
                for o in 0..og {
                    let ch = n * geo.out_channels + gi * og + o;
                    // SAFETY: this unit alone writes output rows `2 * local` of image n.
                    let out = unsafe {
                        std::slice::from_raw_parts_mut(yp.get().add(ch * oh * ow), oh * ow)
                    };
                    let shift = bias.map_or(0.0, |bv| bv[gi * og + o]);
                    let src = &m[o * tiles + col..];
                    transform_output(src, og * tiles, &grid, local.clone(), out, shift, work);
                }
            }
        }
    })?;
    Ok(y)
}

/// The weight gradient, the forward's adjoint in the filter: per point p of the transform,
/// `Z_p (out x in) = Σ over tiles of (A g Aᵀ)_p (Bᵀ d B)_p`, then `gw = Gᵀ Z G` per filter.
/// The input transform is the forward's; the output gradient's 2x2 tiles get `A g Aᵀ` (zero
/// past the output's edge and in the junk column). Partial sums per fixed chunk of bands,
/// added in order: the same at any thread count.
pub(super) fn grad_weight(geo: &ConvGeometry, gy: &[f32], x: &[f32]) -> Result<Vec<f32>> {
    let Dims3 { cg, og, .. } = dims(geo);
    let grid = Grid::of(geo, M);
    let points = POINTS;
    let pitch = grid.pitch();
    let (total, band) = band_of(&grid, geo.batch);
    let tiles = band * pitch;
    let units = total.div_ceil(band);
    let chunks = units.clamp(1, WEIGHT_CHUNKS);
    let zlen = geo.groups * points * og * cg;
    let mut partial = crate::tensor::creation::try_filled_vec(chunks * zlen, 0.0f32)?;
    let zp = SendPtr(partial.as_mut_ptr());
    let scratch = points * (cg + og) * tiles + work_len(tiles);
    let flops = geo.batch * geo.out_channels * grid.oh * grid.ow * cg * 4;
    let (oplane, iplane) = (grid.oh * grid.ow, grid.h * grid.w);
    for_units::<f32>(chunks, flops, scratch, &|chunk, buf| {
        // SAFETY: chunk `chunk` alone owns its partial sums.
        let z = unsafe { std::slice::from_raw_parts_mut(zp.get().add(chunk * zlen), zlen) };
        let (u, rest) = buf.split_at_mut(points * cg * tiles);
        let (m, work) = rest.split_at_mut(points * og * tiles);
        for unit in chunk * units / chunks..(chunk + 1) * units / chunks {
            let rows = unit * band..((unit + 1) * band).min(total);
            let t = rows.len() * pitch;
            for gi in 0..geo.groups {
                for (n, local, col) in grid.segments(rows.clone()) {
                    for c in 0..cg {
                        let plane = &x[(n * geo.in_channels + gi * cg + c) * iplane..][..iplane];
                        let dst = &mut u[c * tiles + col..];
                        transform_input(plane, &grid, local.clone(), dst, cg * tiles, work);
                    }
                    for o in 0..og {
                        let plane = &gy[(n * geo.out_channels + gi * og + o) * oplane..][..oplane];
                        let dst = &mut m[o * tiles + col..];
                        transform_grad(plane, &grid, local.clone(), dst, og * tiles, work);
                    }
                }
                for p in 0..points {
                    // Z_p (og x cg, column-major) += M_p (og x t) @ U_pᵀ (t x cg).
                    // SAFETY: `m` holds og rows of `tiles` for point p, `u` cg rows of `tiles`;
                    // the destination block lies in this chunk's sums.
                    unsafe {
                        gemm_block(
                            (og, cg, t),
                            (z[(gi * points + p) * og * cg..].as_mut_ptr(), 1, og),
                            true,
                            (m[p * og * tiles..].as_ptr(), tiles as isize, 1),
                            (u[p * cg * tiles..].as_ptr(), 1, tiles as isize),
                        );
                    }
                }
            }
        }
    })?;
    let first = sum_partials(&mut partial, zlen);
    filter_gradient(geo, first)
}

/// Rows `M tr + r - top` (r < `R`) of each tile row `tr` in `rows` of a `h x w` plane, padded
/// by `left` zero columns and zero outside the plane, copied into `work`: row r of the band is
/// a run of `rows.len() M pitch + M` values at `r (rows.len() M pitch + M)`, tile row after
/// tile row. Column c of tile j of the band (in all its tile rows) is then entry `M j + c`,
/// a run of stride M over the whole band; the last M are zero for the junk column to read.
#[inline(always)]
fn pad_rows<const R: usize>(
    plane: &[f32],
    (h, w): (usize, usize),
    (top, left): (usize, usize),
    rows: std::ops::Range<usize>,
    pitch: usize,
    work: &mut [f32],
) {
    let run = rows.len() * M * pitch + M;
    let inside = w.min(M * pitch - left);
    for (r, dst) in work[..R * run].chunks_exact_mut(run).enumerate() {
        for (ti, tr) in rows.clone().enumerate() {
            let d = &mut dst[ti * M * pitch..][..M * pitch];
            let ih = (M * tr + r) as isize - top as isize;
            if ih < 0 || ih as usize >= h {
                d.fill(0.0);
                continue;
            }
            let src = &plane[ih as usize * w..][..w];
            let (pad, rest) = d.split_at_mut(left);
            let (row, tail) = rest.split_at_mut(inside);
            zero_few(pad);
            copy_short(row, &src[..inside]);
            zero_few(tail);
        }
        dst[run - M..].fill(0.0);
    }
}

/// `dst.copy_from_slice(src)` for a short row, in fixed blocks the compiler moves inline:
/// called per input row, a `memcpy` call took a fifth of the input transform.
#[inline(always)]
fn copy_short(dst: &mut [f32], src: &[f32]) {
    let mut d = dst.chunks_exact_mut(16);
    let mut s = src.chunks_exact(16);
    for (dc, sc) in (&mut d).zip(&mut s) {
        dc.copy_from_slice(sc);
    }
    for (x, y) in d.into_remainder().iter_mut().zip(s.remainder()) {
        // black_box: a plain loop becomes a `memcpy` call again.
        *x = std::hint::black_box(*y);
    }
}

/// Zeroes the few padding entries at a row's ends (at most 3) without a `memset` call.
#[inline(always)]
fn zero_few(dst: &mut [f32]) {
    for x in dst {
        *x = std::hint::black_box(0.0);
    }
}

/// `dst[M j + k] = src[k][j]` for the whole groups of M of `dst`. Indexed unchecked: checked,
/// the loop stays scalar.
#[inline(always)]
fn interleave(src: [&[f32]; M], dst: &mut [f32]) {
    let n = dst.len() / M;
    assert!(src.iter().all(|s| s.len() >= n));
    for j in 0..n {
        for (k, s) in src.iter().enumerate() {
            // SAFETY: j < n <= s.len() and M j + k < M n <= dst.len().
            unsafe { *dst.get_unchecked_mut(M * j + k) = *s.get_unchecked(j) };
        }
    }
}

/// `Bᵀ d B` of the tiles in tile rows `rows` of one input plane: 16 rows (one per point,
/// `stride` apart) of `rows.len() * (tw + 1)` values at `dst`.
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq+avx2+avx+fma",
    "x86_64+avx2+avx+fma",
    "aarch64+neon"
))]
fn transform_input(
    plane: &[f32],
    grid: &Grid,
    rows: std::ops::Range<usize>,
    dst: &mut [f32],
    stride: usize,
    work: &mut [f32],
) {
    let pitch = grid.pitch();
    let len = rows.len() * pitch;
    if len == 0 {
        return;
    }
    pad_rows::<A>(
        plane,
        (grid.h, grid.w),
        (grid.ph, grid.pw),
        rows,
        pitch,
        work,
    );
    let src = &work[..A * (M * len + M)];
    // One call per column combination b, a constant: each computes only its own.
    points::<A, 0>(bt, src, dst, stride, len);
    points::<A, 1>(bt, src, dst, stride, len);
    points::<A, 2>(bt, src, dst, stride, len);
    points::<A, 3>(bt, src, dst, stride, len);
}

/// Points `(a, B)` of a tile transform for every `a`: `f` (Bᵀ for the input, A for the output
/// gradient) applied to each of the tile's `R` rows, keeping combination `B`, then across
/// those. Column c of row r at tile j is `src[r (M len + M) + M j + c]` ([`pad_rows`]'
/// layout); the band's last entry only feeds a junk column.
///
/// The operands are indexed unchecked from one base each: bounds checks, or slices held in
/// arrays (which the stores might alias), keep the loop over j from vectorising.
#[inline(always)]
#[allow(clippy::needless_range_loop)]
fn points<const R: usize, const B: usize>(
    f: impl Fn([f32; R]) -> [f32; A],
    src: &[f32],
    dst: &mut [f32],
    stride: usize,
    len: usize,
) {
    let run = M * len + M;
    // The largest index read is (R - 1) run + M (len - 1) + R - 1 < R run (R <= M + 2), and
    // written (A² - 1) stride + len - 1.
    assert!(src.len() >= R * run && dst.len() >= (A * A - 1) * stride + len);
    for j in 0..len {
        let mut h = [0.0f32; R];
        for r in 0..R {
            let mut v = [0.0f32; R];
            for c in 0..R {
                // SAFETY: r run + M j + c < R run (asserted).
                v[c] = unsafe { *src.get_unchecked(r * run + M * j + c) };
            }
            h[r] = f(v)[B];
        }
        let p = f(h);
        for a in 0..A {
            // SAFETY: (a A + B) stride + j < (A² - 1) stride + len (asserted).
            unsafe { *dst.get_unchecked_mut((a * A + B) * stride + j) = p[a] };
        }
    }
}

/// `Aᵀ m A` of one output channel's products plus `shift`, into tile rows `rows` of the
/// output plane. Indexed unchecked as [`points`] is.
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq+avx2+avx+fma",
    "x86_64+avx2+avx+fma",
    "aarch64+neon"
))]
#[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
fn transform_output(
    m: &[f32],
    stride: usize,
    grid: &Grid,
    rows: std::ops::Range<usize>,
    out: &mut [f32],
    shift: f32,
    work: &mut [f32],
) {
    let pitch = grid.pitch();
    let len = rows.len() * pitch;
    // Two passes, each a loop over the band's tiles: the columns' `Aᵀ m[·][b]` into rows
    // `sb[b M + i]`, then the rows' `Aᵀ sb[·][i]` into `y[i M + k]`, output (i, k) of each
    // tile. In one loop the compiler vectorises within a tile instead (4 lanes of 16).
    let (sb, y) = work[..(A * M + M * M) * len].split_at_mut(A * M * len);
    assert!(m.len() >= (A * A - 1) * stride + len);
    for b in 0..A {
        for j in 0..len {
            let mut v = [0.0f32; A];
            for a in 0..A {
                // SAFETY: (a A + b) stride + j < (A² - 1) stride + len (asserted).
                v[a] = unsafe { *m.get_unchecked((a * A + b) * stride + j) };
            }
            let col = at(v);
            for i in 0..M {
                // SAFETY: (b M + i) len + j < A M len = sb.len().
                unsafe { *sb.get_unchecked_mut((b * M + i) * len + j) = col[i] };
            }
        }
    }
    for i in 0..M {
        for j in 0..len {
            let mut v = [0.0f32; A];
            for b in 0..A {
                // SAFETY: as above.
                v[b] = unsafe { *sb.get_unchecked((b * M + i) * len + j) };
            }
            let row = at(v);
            for k in 0..M {
                // SAFETY: (i M + k) len + j < M² len = y.len().
                unsafe { *y.get_unchecked_mut((i * M + k) * len + j) = row[k] + shift };
            }
        }
    }
    let y = &*y;
    let full = grid.ow / M;
    for (ti, tr) in rows.enumerate() {
        for i in 0..M {
            let r = M * tr + i;
            if r >= grid.oh {
                continue;
            }
            let src: [&[f32]; M] =
                std::array::from_fn(|k| &y[(i * M + k) * len + ti * pitch..][..pitch]);
            let dst = &mut out[r * grid.ow..][..grid.ow];
            let (tiled, tail) = dst.split_at_mut(full * M);
            interleave(src, tiled);
            for (dk, sk) in tail.iter_mut().zip(&src) {
                *dk = sk[full];
            }
        }
    }
}

/// `A g Aᵀ` of the output gradient's 2x2 tiles in tile rows `rows`, laid out as
/// [`transform_input`]'s result, zero past the output and in the junk column.
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq+avx2+avx+fma",
    "x86_64+avx2+avx+fma",
    "aarch64+neon"
))]
fn transform_grad(
    plane: &[f32],
    grid: &Grid,
    rows: std::ops::Range<usize>,
    dst: &mut [f32],
    stride: usize,
    work: &mut [f32],
) {
    let pitch = grid.pitch();
    let len = rows.len() * pitch;
    if len == 0 {
        return;
    }
    // Rows past the output, columns past it and the junk column are zero.
    pad_rows::<M>(plane, (grid.oh, grid.ow), (0, 0), rows, pitch, work);
    let src = &work[..M * (M * len + M)];
    points::<M, 0>(a_of, src, dst, stride, len);
    points::<M, 1>(a_of, src, dst, stride, len);
    points::<M, 2>(a_of, src, dst, stride, len);
    points::<M, 3>(a_of, src, dst, stride, len);
}
