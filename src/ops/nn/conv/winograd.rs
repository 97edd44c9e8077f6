//! Winograd's minimal filtering F(2x2, 3x3) (Lavin & Gray, "Fast Algorithms for Convolutional
//! Neural Networks", 2016) for float32 3x3 convolutions with stride 1 and no dilation: each 2x2
//! output tile is `A^T [(G g G^T) ⊙ (B^T d B)] A` of the 4x4 input tile `d`, so the channel
//! reduction becomes 16 products of `out x in` by `in x tiles` (2.25x fewer multiplies than
//! im2col's one product). The transform constants are 0, ±1 and ±1/2, so the result stays within
//! a few ulp of the direct sum (float32; float64 keeps im2col, which is exact to its rounding).
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

/// Transform points per tile (4x4).
const POINTS: usize = 16;

/// Tiles per unit: the transformed input and the products (`16 * (in + out) * TILES` floats per
/// group) stay near 1 MiB for 64 channels, within a core's L2.
const TILES: usize = 128;

/// Whether the geometry is one F(2x2, 3x3) computes and where it pays: a 2-d 3x3 kernel,
/// stride and dilation 1, padding below the kernel, and enough channels per group that the
/// transforms (linear in channels) are small beside the products (quadratic): measured on
/// 28x28 and 32x32 images, 32 in and out channels break even with im2col, 64 run 1.5x faster,
/// 16 run 1.2x slower.
pub(super) fn applies(geo: &ConvGeometry) -> bool {
    let Dims3 { cg, og, .. } = dims(geo);
    geo.kernel == [3, 3]
        && geo.stride == [1, 1]
        && geo.dilation == [1, 1]
        && geo.padding.iter().all(|&p| p <= 2)
        && geo.output.iter().all(|&o| o >= 2)
        && cg >= 32
        && og >= 32
}

/// `G g G^T` of each 3x3 filter, laid out per group as `[point][out][in]`: the right-hand
/// operand of the per-point products, read column-major (`in` contiguous).
fn transform_weights(geo: &ConvGeometry, w: &[f32]) -> Result<Vec<f32>> {
    let Dims3 { cg, og, .. } = dims(geo);
    let per_group = POINTS * og * cg;
    let mut v = crate::tensor::creation::try_filled_vec(geo.groups * per_group, 0.0f32)?;
    for gi in 0..geo.groups {
        for o in 0..og {
            for c in 0..cg {
                let g = &w[((gi * og + o) * cg + c) * 9..][..9];
                // Rows: (g0, (g0+g1+g2)/2, (g0-g1+g2)/2, g2) for each of the three rows.
                let mut k = [[0.0f32; 4]; 3];
                for (r, kr) in k.iter_mut().enumerate() {
                    let (a, b, e) = (g[r * 3], g[r * 3 + 1], g[r * 3 + 2]);
                    *kr = [a, 0.5 * (a + b + e), 0.5 * (a - b + e), e];
                }
                for q in 0..4 {
                    let (a, b, e) = (k[0][q], k[1][q], k[2][q]);
                    let col = [a, 0.5 * (a + b + e), 0.5 * (a - b + e), e];
                    for (p, &val) in col.iter().enumerate() {
                        v[gi * per_group + ((p * 4 + q) * og + o) * cg + c] = val;
                    }
                }
            }
        }
    }
    Ok(v)
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
    fn of(geo: &ConvGeometry) -> Grid {
        let (oh, ow) = (geo.output[0], geo.output[1]);
        Grid {
            h: geo.input[0],
            w: geo.input[1],
            oh,
            ow,
            ph: geo.padding[0],
            pw: geo.padding[1],
            th: oh.div_ceil(2),
            tw: ow.div_ceil(2),
        }
    }

    /// The images in the batch's global tile rows `band`, each with its local tile rows and
    /// the first column of those in the band's layout (tile rows `tw + 1` apart).
    fn segments(
        &self,
        band: std::ops::Range<usize>,
    ) -> impl Iterator<Item = (usize, std::ops::Range<usize>, usize)> + '_ {
        let (first, th, pitch) = (band.start, self.th, self.tw + 1);
        (band.start / th..band.end.div_ceil(th)).map(move |n| {
            let lo = band.start.max(n * th) - n * th;
            let hi = band.end.min((n + 1) * th) - n * th;
            (n, lo..hi, (n * th + lo - first) * pitch)
        })
    }
}

/// `y = conv(x, w) (+ bias)` by F(2x2, 3x3); the caller checked [`applies`].
pub(super) fn forward(
    geo: &ConvGeometry,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
) -> Result<Vec<f32>> {
    let Dims3 { cg, og, .. } = dims(geo);
    let (oh, ow) = (geo.output[0], geo.output[1]);
    let grid = Grid::of(geo);
    let v = transform_weights(geo, w)?;
    let mut y =
        crate::tensor::creation::try_filled_vec(geo.batch * geo.out_channels * oh * ow, 0.0)?;
    let yp = SendPtr(y.as_mut_ptr());
    // Tile rows are laid out `pitch = tw + 1` apart: the extra column is the overlap the
    // input transform reads past each row's last tile, so each step runs over the whole band
    // at once instead of over rows of a few tiles (its junk products are never read). A band
    // is a run of the batch's tile rows, across images when they are small, so the products
    // stay long enough to run at the kernel's speed.
    let pitch = grid.tw + 1;
    let total = geo.batch * grid.th;
    let band = (TILES / pitch).clamp(1, total);
    let tiles = band * pitch;
    // Transformed input, products, then the transforms' workspace (even and odd columns of four
    // input rows and one padded row: at most 10 rows of `tiles`).
    let scratch = POINTS * (cg + og) * tiles + 10 * tiles;
    let flops = geo.batch * geo.out_channels * oh * ow * cg * 4;
    for_units::<f32>(total.div_ceil(band), flops, scratch, &|unit, buf| {
        let rows = unit * band..((unit + 1) * band).min(total);
        let t = rows.len() * pitch;
        let (u, rest) = buf.split_at_mut(POINTS * cg * tiles);
        let (m, work) = rest.split_at_mut(POINTS * og * tiles);
        for gi in 0..geo.groups {
            for (n, local, col) in grid.segments(rows.clone()) {
                for c in 0..cg {
                    let plane = &x[(n * geo.in_channels + gi * cg + c) * grid.h * grid.w..]
                        [..grid.h * grid.w];
                    let dst = &mut u[c * tiles + col..];
                    transform_input(plane, &grid, local.clone(), dst, cg * tiles, work);
                }
            }
            let vg = &v[gi * POINTS * og * cg..][..POINTS * og * cg];
            for p in 0..POINTS {
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

/// The weight gradient by F(2x2, 3x3), the forward's adjoint in the filter: per point p of the
/// 4x4 transform, `Z_p (out x in) = Σ over tiles of (A g Aᵀ)_p (B^T d B)_p`, then
/// `gw = Gᵀ Z G` per filter. The input transform is the forward's; the output gradient's
/// 2x2 tiles get `A g Aᵀ` (zero past the output's edge and in the junk column). 16 products
/// over the tiles instead of one over 9x the positions: 2.25x fewer multiplies than im2col.
/// Partial sums per fixed chunk of bands, added in order: the same at any thread count.
pub(super) fn grad_weight(geo: &ConvGeometry, gy: &[f32], x: &[f32]) -> Result<Vec<f32>> {
    let Dims3 { cg, og, .. } = dims(geo);
    let grid = Grid::of(geo);
    let pitch = grid.tw + 1;
    let total = geo.batch * grid.th;
    let band = (TILES / pitch).clamp(1, total);
    let tiles = band * pitch;
    let units = total.div_ceil(band);
    let chunks = units.clamp(1, WEIGHT_CHUNKS);
    let zlen = geo.groups * POINTS * og * cg;
    let mut partial = crate::tensor::creation::try_filled_vec(chunks * zlen, 0.0f32)?;
    let zp = SendPtr(partial.as_mut_ptr());
    let scratch = POINTS * (cg + og) * tiles + 10 * tiles;
    let flops = geo.batch * geo.out_channels * grid.oh * grid.ow * cg * 4;
    let (oplane, iplane) = (grid.oh * grid.ow, grid.h * grid.w);
    for_units::<f32>(chunks, flops, scratch, &|chunk, buf| {
        // SAFETY: chunk `chunk` alone owns its partial sums.
        let z = unsafe { std::slice::from_raw_parts_mut(zp.get().add(chunk * zlen), zlen) };
        let (u, rest) = buf.split_at_mut(POINTS * cg * tiles);
        let (m, work) = rest.split_at_mut(POINTS * og * tiles);
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
                for p in 0..POINTS {
                    // Z_p (og x cg, column-major) += M_p (og x t) @ U_pᵀ (t x cg).
                    // SAFETY: `m` holds og rows of `tiles` for point p, `u` cg rows of `tiles`;
                    // the destination block lies in this chunk's sums.
                    unsafe {
                        gemm_block(
                            (og, cg, t),
                            (z[(gi * POINTS + p) * og * cg..].as_mut_ptr(), 1, og),
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
    // gw[o, c, i, j] = Σ_{p,q} G[p][i] G[q][j] Z_{4p+q}[o, c].
    const G: [[f32; 3]; 4] = [
        [1.0, 0.0, 0.0],
        [0.5, 0.5, 0.5],
        [0.5, -0.5, 0.5],
        [0.0, 0.0, 1.0],
    ];
    let mut gw = crate::tensor::creation::try_filled_vec(geo.out_channels * cg * 9, 0.0f32)?;
    for gi in 0..geo.groups {
        for o in 0..og {
            for c in 0..cg {
                let zs: [f32; POINTS] =
                    std::array::from_fn(|p| first[((gi * POINTS + p) * cg + c) * og + o]);
                let dst = &mut gw[((gi * og + o) * cg + c) * 9..][..9];
                for i in 0..3 {
                    for j in 0..3 {
                        let mut acc = 0.0f32;
                        for (p, gp) in G.iter().enumerate() {
                            for (q, gq) in G.iter().enumerate() {
                                acc += gp[i] * gq[j] * zs[p * 4 + q];
                            }
                        }
                        dst[i * 3 + j] = acc;
                    }
                }
            }
        }
    }
    Ok(gw)
}

/// `A g Aᵀ` of the 2x2 tiles in tile rows `rows` of one output-gradient plane, written like
/// [`transform_input`]'s result: 16 rows (one per point, `stride` apart) of
/// `rows.len() * (tw + 1)` values, zero where a tile lies past the output and in each tile
/// row's junk column, so those add nothing to the weight gradient.
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
    let pitch = grid.tw + 1;
    let len = rows.len() * pitch;
    // Even and odd columns of each tile row's two output rows, over the band, zero past the
    // plane (the junk column included): each step below is then one loop over the band.
    let (e0, rest) = work.split_at_mut(len);
    let (o0, rest) = rest.split_at_mut(len);
    let (e1, rest) = rest.split_at_mut(len);
    let (o1, rest) = rest.split_at_mut(len);
    let padded = &mut rest[..2 * pitch];
    for (ti, tr) in rows.enumerate() {
        let at = ti * pitch..(ti + 1) * pitch;
        for (r, (e, od)) in [(&mut *e0, &mut *o0), (&mut *e1, &mut *o1)]
            .into_iter()
            .enumerate()
        {
            let gr = 2 * tr + r;
            if gr >= grid.oh {
                e[at.clone()].fill(0.0);
                od[at.clone()].fill(0.0);
                continue;
            }
            padded[..grid.ow].copy_from_slice(&plane[gr * grid.ow..][..grid.ow]);
            padded[grid.ow..].fill(0.0);
            deinterleave(padded, &mut e[at.clone()], &mut od[at.clone()]);
        }
    }
    // Rows of A g: (g0, g0 + g1, g0 - g1, -g1) of the even and odd columns, then the same
    // across columns, (x, x + y, x - y, -y): point 4a + b.
    let (e0, o0, e1, o1) = (&*e0, &*o0, &*e1, &*o1);
    let rows_of = |a: usize| {
        [
            4 * a * stride,
            (4 * a + 1) * stride,
            (4 * a + 2) * stride,
            (4 * a + 3) * stride,
        ]
    };
    grad_columns::<0>([e0, o0, e1, o1], four_rows(dst, rows_of(0), len));
    grad_columns::<1>([e0, o0, e1, o1], four_rows(dst, rows_of(1), len));
    grad_columns::<2>([e0, o0, e1, o1], four_rows(dst, rows_of(2), len));
    grad_columns::<3>([e0, o0, e1, o1], four_rows(dst, rows_of(3), len));
}

/// One row combination `A` of [`transform_grad`] and the four column combinations of it. A
/// function of its own so the slices arrive as distinct arguments (it vectorises).
#[inline(always)]
fn grad_columns<const A: usize>([e0, o0, e1, o1]: [&[f32]; 4], [d0, d1, d2, d3]: [&mut [f32]; 4]) {
    let n = d0.len();
    let (e0, o0, e1, o1) = (&e0[..n], &o0[..n], &e1[..n], &o1[..n]);
    let (d1, d2, d3) = (&mut d1[..n], &mut d2[..n], &mut d3[..n]);
    for j in 0..n {
        let (x, y) = match A {
            0 => (e0[j], o0[j]),
            1 => (e0[j] + e1[j], o0[j] + o1[j]),
            2 => (e0[j] - e1[j], o0[j] - o1[j]),
            _ => (-e1[j], -o1[j]),
        };
        d0[j] = x;
        d1[j] = x + y;
        d2[j] = x - y;
        d3[j] = -y;
    }
}

/// `B^T d B` of the tiles in tile rows `rows` of one input plane, written as 16 rows (one per
/// point, `stride` apart) of `rows.len() * (tw + 1)` values at `dst`. The input rows each tile
/// row reads are split into even and odd columns (zero outside the plane), which turns every
/// tile's 4x4 window into unit-stride runs: each step is then one loop over the whole band.
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
    let pitch = grid.tw + 1;
    let len = rows.len() * pitch;
    // even/odd: [r][tile row][pitch]; padded: one input row with its zero padding.
    let (even, rest) = work.split_at_mut(4 * len);
    let (odd, rest) = rest.split_at_mut(4 * len);
    let padded = &mut rest[..2 * pitch];
    for (ti, tr) in rows.enumerate() {
        for r in 0..4 {
            let e = &mut even[r * len + ti * pitch..][..pitch];
            let od = &mut odd[r * len + ti * pitch..][..pitch];
            let ih = (2 * tr + r) as isize - grid.ph as isize;
            if ih < 0 || ih as usize >= grid.h {
                e.fill(0.0);
                od.fill(0.0);
                continue;
            }
            // Padded column q is input column q - pw.
            let src = &plane[ih as usize * grid.w..][..grid.w];
            let inside = grid.w.min(2 * pitch - grid.pw);
            padded[..grid.pw].fill(0.0);
            padded[grid.pw..grid.pw + inside].copy_from_slice(&src[..inside]);
            padded[grid.pw + inside..].fill(0.0);
            deinterleave(padded, e, od);
        }
    }
    // Both transforms fused, over the band at once, per column combination b (d0 = E[j],
    // d1 = O[j], d2 = E[j+1], d3 = O[j+1] of each input row, then the same combination
    // across the four rows): no intermediate rows are written and read back. The last entry
    // of each run has no right neighbour: it only feeds the junk column.
    let ev: [&[f32]; 4] = std::array::from_fn(|r| &even[r * len..][..len]);
    let od: [&[f32]; 4] = std::array::from_fn(|r| &odd[r * len..][..len]);
    let at = |b: usize| {
        [
            b * stride,
            (4 + b) * stride,
            (8 + b) * stride,
            (12 + b) * stride,
        ]
    };
    input_points::<0>(ev, od, four_rows(dst, at(0), len));
    input_points::<1>(ev, od, four_rows(dst, at(1), len));
    input_points::<2>(ev, od, four_rows(dst, at(2), len));
    input_points::<3>(ev, od, four_rows(dst, at(3), len));
}

/// Points `4a + B` (a = 0..4) of [`transform_input`]: the row combination `B` of each of the
/// four input rows, `(d0 - d2, d1 + d2, d2 - d1, d1 - d3)[B]`, then the four combinations of
/// those across the rows. A function of its own so the slices arrive as distinct arguments.
#[inline(always)]
fn input_points<const B: usize>(
    [e0, e1, e2, e3]: [&[f32]; 4],
    [o0, o1, o2, o3]: [&[f32]; 4],
    [p0, p1, p2, p3]: [&mut [f32]; 4],
) {
    let n = p0.len();
    if n == 0 {
        return;
    }
    let m = n - 1;
    let (e0, e1, e2, e3) = (&e0[..n], &e1[..n], &e2[..n], &e3[..n]);
    let (o0, o1, o2, o3) = (&o0[..n], &o1[..n], &o2[..n], &o3[..n]);
    let (p1, p2, p3) = (&mut p1[..n], &mut p2[..n], &mut p3[..n]);
    // The row combination B of input row r at entry j.
    #[inline(always)]
    fn row<const B: usize>(e: &[f32], o: &[f32], j: usize) -> f32 {
        match B {
            0 => e[j] - e[j + 1],
            1 => o[j] + e[j + 1],
            2 => e[j + 1] - o[j],
            _ => o[j] - o[j + 1],
        }
    }
    for j in 0..m {
        let (h0, h1, h2, h3) = (
            row::<B>(e0, o0, j),
            row::<B>(e1, o1, j),
            row::<B>(e2, o2, j),
            row::<B>(e3, o3, j),
        );
        p0[j] = h0 - h2;
        p1[j] = h1 + h2;
        p2[j] = h2 - h1;
        p3[j] = h1 - h3;
    }
    p0[m] = 0.0;
    p1[m] = 0.0;
    p2[m] = 0.0;
    p3[m] = 0.0;
}

/// Disjoint mutable runs of `len` at increasing `offsets` of `buf`.
fn four_rows(buf: &mut [f32], offsets: [usize; 4], len: usize) -> [&mut [f32]; 4] {
    let (a, rest) = buf[offsets[0]..].split_at_mut(offsets[1] - offsets[0]);
    let (b, rest) = rest.split_at_mut(offsets[2] - offsets[1]);
    let (c, d) = rest.split_at_mut(offsets[3] - offsets[2]);
    [&mut a[..len], &mut b[..len], &mut c[..len], &mut d[..len]]
}

/// Even and odd elements of `src` into `even` and `odd` (as long as `src` holds pairs).
#[inline(always)]
fn deinterleave(src: &[f32], even: &mut [f32], odd: &mut [f32]) {
    for ((pair, e), o) in src.chunks_exact(2).zip(even.iter_mut()).zip(odd.iter_mut()) {
        *e = pair[0];
        *o = pair[1];
    }
}

/// `A^T m A` of the products of one output channel (16 rows `stride` apart, one per point, tile
/// rows `tw + 1` apart), plus `shift`, written into tile rows `rows` of the output plane `out`.
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq+avx2+avx+fma",
    "x86_64+avx2+avx+fma",
    "aarch64+neon"
))]
fn transform_output(
    m: &[f32],
    stride: usize,
    grid: &Grid,
    rows: std::ops::Range<usize>,
    out: &mut [f32],
    shift: f32,
    work: &mut [f32],
) {
    let pitch = grid.tw + 1;
    let len = rows.len() * pitch;
    let mr: [&[f32]; POINTS] = std::array::from_fn(|p| &m[p * stride..][..len]);
    let (y, _) = work.split_at_mut(4 * len);
    let [y00, y01, y10, y11] = four_rows(y, [0, len, 2 * len, 3 * len], len);
    // Rows of A^T m (p = 0: m0 + m1 + m2, p = 1: m1 - m2 - m3, per column b), then the same
    // across b for the two output columns; y_pq is output (p, q) of every tile. No closures:
    // they would not inherit this function's target features.
    for j in 0..len {
        let s0 = mr[0][j] + mr[4][j] + mr[8][j];
        let s1 = mr[1][j] + mr[5][j] + mr[9][j];
        let s2 = mr[2][j] + mr[6][j] + mr[10][j];
        let s3 = mr[3][j] + mr[7][j] + mr[11][j];
        y00[j] = s0 + s1 + s2 + shift;
        y01[j] = s1 - s2 - s3 + shift;
        let s0 = mr[4][j] - mr[8][j] - mr[12][j];
        let s1 = mr[5][j] - mr[9][j] - mr[13][j];
        let s2 = mr[6][j] - mr[10][j] - mr[14][j];
        let s3 = mr[7][j] - mr[11][j] - mr[15][j];
        y10[j] = s0 + s1 + s2 + shift;
        y11[j] = s1 - s2 - s3 + shift;
    }
    for (ti, tr) in rows.enumerate() {
        for (p, (ya, yb)) in [(&*y00, &*y01), (&*y10, &*y11)].into_iter().enumerate() {
            let r = 2 * tr + p;
            if r >= grid.oh {
                continue;
            }
            let (ya, yb) = (&ya[ti * pitch..][..pitch], &yb[ti * pitch..][..pitch]);
            let dst = &mut out[r * grid.ow..][..grid.ow];
            let (pairs, tail) = dst.split_at_mut(grid.ow / 2 * 2);
            for (d, (&a, &b)) in pairs.chunks_exact_mut(2).zip(ya.iter().zip(yb)) {
                d[0] = a;
                d[1] = b;
            }
            if let Some(t) = tail.first_mut() {
                *t = ya[grid.tw - 1];
            }
        }
    }
}
