//! Scaled dot-product attention, `softmax(Q Kᵀ · scale + mask) V`, with torch's semantics
//! (boolean or additive masks broadcast over the batch, `is_causal`, dropout on the weights,
//! grouped-query heads, fully masked rows giving zeros as torch's math backend does).
//!
//! The fused path is FlashAttention-2 on the CPU: the forward walks key blocks with an online
//! softmax and keeps only the output and each row's logsumexp, never the `L x S` weights; the
//! backward recomputes the scores tile by tile (`dS = P ∘ (dP - D)`, `D = rowsum(dO ∘ O)`) and
//! regenerates the dropout mask from a saved seed. When a graph of the backward is being built
//! (`create_graph`), the backward is written in differentiable ops instead, so second
//! derivatives are exact.

use crate::error::{Error, Result};
use crate::graph::node::{needs_grad, record};
use crate::kernels::gemm::{batch_offset, GemmScalar};
use crate::kernels::vmath::UnaryF32;
use crate::parallel::SendPtr;
use crate::tensor::grad_mode::GradModeGuard;
use crate::tensor::shape::broadcast_shapes;
use crate::tensor::{DType, Element, Tensor};
use multiversion::multiversion;

/// Query rows per tile of the forward: one tile's scores (`ROWS x COLS`) and output rows stay
/// in L2.
const ROWS: usize = 128;
/// Key columns per tile of the forward.
const COLS: usize = 512;
/// Query rows per tile of the backward.
const BWD_ROWS: usize = 128;
/// Key columns per tile of the backward (it keeps three `BWD_ROWS x BWD_COLS` buffers).
const BWD_COLS: usize = 128;
/// Below this many multiply-adds (`nb * L * S * (E + Ev)`) one thread does everything.
const PARALLEL_MIN_WORK: usize = 1 << 18;

/// Options of [`scaled_dot_product_attention`] beyond the three inputs, defaulting to torch's.
#[derive(Clone, Debug, Default)]
pub struct SdpaOptions<'a> {
    /// Boolean (true: take part) or additive float mask, broadcastable to `(..., L, S)`.
    pub attn_mask: Option<&'a Tensor>,
    /// Probability of zeroing an attention weight (the rest are scaled by `1 / (1 - p)`).
    pub dropout_p: f64,
    /// Mask out key `j > i` for query `i` (top-left aligned lower triangle).
    pub is_causal: bool,
    /// Factor on the scores; `1 / sqrt(E)` when `None`.
    pub scale: Option<f64>,
    /// Let query heads (dim -3) be a multiple of key/value heads, each group sharing one.
    pub enable_gqa: bool,
}

/// Float types the fused kernel runs on.
trait AttnFloat: GemmScalar + Element + num_traits::Float {
    fn of(x: f64) -> Self;
    /// `x[i] = e^(x[i] - shift)`, `tmp` a scratch slice at least as long.
    fn exp_shifted_in_place(x: &mut [Self], shift: Self, tmp: &mut [Self]);
    /// A tile product as [`mm`] computes it, by the fastest kernel for the type and CPU.
    ///
    /// # Safety
    /// As [`mm`].
    #[allow(clippy::too_many_arguments)]
    unsafe fn tile(
        dims: (usize, usize, usize),
        dst: *mut Self,
        dst_rs: usize,
        acc: bool,
        lhs: (*const Self, usize, usize),
        rhs: (*const Self, usize, usize),
        beta: Self,
    ) {
        unsafe { mm(dims, dst, dst_rs, acc, lhs, rhs, beta) }
    }
}

impl AttnFloat for f32 {
    fn of(x: f64) -> Self {
        x as f32
    }
    fn exp_shifted_in_place(x: &mut [f32], shift: f32, tmp: &mut [f32]) {
        let tmp = &mut tmp[..x.len()];
        for (t, &v) in tmp.iter_mut().zip(x.iter()) {
            *t = v - shift;
        }
        UnaryF32::Exp.apply(tmp, x);
    }

    unsafe fn tile(
        dims: (usize, usize, usize),
        dst: *mut f32,
        dst_rs: usize,
        acc: bool,
        lhs: (*const f32, usize, usize),
        rhs: (*const f32, usize, usize),
        beta: f32,
    ) {
        // The gemm crate runs AVX2 kernels only; on AVX-512 machines a plain register-blocked
        // kernel is about twice as fast on these small tiles. It needs rows of `rhs` contiguous.
        #[cfg(target_arch = "x86_64")]
        if rhs.2 == 1 && std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the feature is present; the caller vouches for the pointers.
            unsafe { tile_avx512(dims, dst, dst_rs, acc, lhs, (rhs.0, rhs.1), beta) };
            return;
        }
        unsafe { mm(dims, dst, dst_rs, acc, lhs, rhs, beta) }
    }
}

/// `MR` rows by `NR` columns of `dst (+)= beta * lhs @ rhs` (`rhs` rows contiguous), the
/// accumulators in registers.
///
/// # Safety
/// As [`mm`]; `NR` columns of `rhs` and `dst` and `MR` rows of `lhs` and `dst` are valid.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn block_f32<const MR: usize, const NR: usize>(
    k: usize,
    dst: *mut f32,
    dst_rs: usize,
    acc: bool,
    (a, a_rs, a_cs): (*const f32, usize, usize),
    (b, b_rs): (*const f32, usize),
    beta: f32,
) {
    let mut s = [[0f32; NR]; MR];
    for kk in 0..k {
        // SAFETY (whole block): in bounds by the caller's contract.
        let bv: [f32; NR] =
            unsafe { std::ptr::read_unaligned(b.add(kk * b_rs) as *const [f32; NR]) };
        for (i, row) in s.iter_mut().enumerate() {
            let av = unsafe { *a.add(i * a_rs + kk * a_cs) };
            for (x, &y) in row.iter_mut().zip(&bv) {
                *x = av.mul_add(y, *x);
            }
        }
    }
    for (i, row) in s.iter().enumerate() {
        let c = unsafe { dst.add(i * dst_rs) };
        for (j, &x) in row.iter().enumerate() {
            unsafe {
                let old = if acc { *c.add(j) } else { 0.0 };
                *c.add(j) = beta.mul_add(x, old);
            }
        }
    }
}

/// The AVX-512 tile product: 8 x 32 register blocks, narrower blocks at the edges.
///
/// # Safety
/// AVX-512F must be available; otherwise as [`mm`] with `rhs` rows contiguous.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn tile_avx512(
    (m, n, k): (usize, usize, usize),
    dst: *mut f32,
    dst_rs: usize,
    acc: bool,
    (a, a_rs, a_cs): (*const f32, usize, usize),
    (b, b_rs): (*const f32, usize),
    beta: f32,
) {
    const MR: usize = 8;
    let mut j = 0;
    // SAFETY (whole function): every block lies inside the m x n output and its operands.
    unsafe {
        while j < n {
            let w = n - j;
            let mut i = 0;
            // Blocks of `$mr` rows while they fit.
            macro_rules! rows {
                ($mr:expr, $nr:literal) => {
                    // `i + 1 <= m` for single rows: the form of the wider blocks.
                    #[allow(clippy::int_plus_one)]
                    while i + $mr <= m {
                        block_f32::<{ $mr }, $nr>(
                            k,
                            dst.add(i * dst_rs + j),
                            dst_rs,
                            acc,
                            (a.add(i * a_rs), a_rs, a_cs),
                            (b.add(j), b_rs),
                            beta,
                        );
                        i += $mr;
                    }
                };
            }
            macro_rules! cols {
                ($nr:literal) => {{
                    rows!(MR, $nr);
                    rows!(1, $nr);
                    j += $nr;
                }};
            }
            if w >= 32 {
                cols!(32)
            } else if w >= 16 {
                cols!(16)
            } else if w >= 8 {
                cols!(8)
            } else {
                cols!(1)
            }
        }
    }
}

impl AttnFloat for f64 {
    fn of(x: f64) -> Self {
        x
    }
    fn exp_shifted_in_place(x: &mut [f64], shift: f64, _tmp: &mut [f64]) {
        x.iter_mut().for_each(|v| *v = (*v - shift).exp());
    }
}

/// The largest of `init` and the elements of `row` (NaN is passed over), in eight lanes so the
/// compiler vectorises it.
#[inline]
fn row_max<T: AttnFloat>(row: &[T], init: T) -> T {
    let mut lanes = [init; 8];
    let chunks = row.chunks_exact(8);
    let tail = chunks.remainder();
    for c in chunks {
        for (l, &x) in lanes.iter_mut().zip(c) {
            *l = if x > *l { x } else { *l };
        }
    }
    tail.iter()
        .chain(&lanes)
        .fold(init, |a, &x| if x > a { x } else { a })
}

/// The sum of `row`, in eight lanes so the compiler vectorises it.
#[inline]
fn row_sum<T: AttnFloat>(row: &[T]) -> T {
    let mut lanes = [T::ZERO; 8];
    let chunks = row.chunks_exact(8);
    let tail = chunks.remainder();
    for c in chunks {
        for (l, &x) in lanes.iter_mut().zip(c) {
            *l = *l + x;
        }
    }
    tail.iter().chain(&lanes).fold(T::ZERO, |a, &x| a + x)
}

/// `dst[m x n]` (row stride `dst_rs`) `= (dst if acc) + beta * lhs @ rhs`, one thread.
///
/// # Safety
/// Every element addressed through the strides must be valid; `dst` must not overlap the others.
#[allow(clippy::too_many_arguments)]
#[inline]
unsafe fn mm<T: GemmScalar>(
    (m, n, k): (usize, usize, usize),
    dst: *mut T,
    dst_rs: usize,
    acc: bool,
    (lhs, lhs_rs, lhs_cs): (*const T, usize, usize),
    (rhs, rhs_rs, rhs_cs): (*const T, usize, usize),
    beta: T,
) {
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst,
            1,
            dst_rs as isize,
            acc,
            lhs,
            lhs_cs as isize,
            lhs_rs as isize,
            rhs,
            rhs_cs as isize,
            rhs_rs as isize,
            T::ONE,
            beta,
            false,
            false,
            false,
            gemm::Parallelism::None,
        )
    }
}

/// The dropout decision for score `idx` (flat over batch, query, key): a SplitMix64 hash of the
/// seed and the position, so forward and backward (and the composed path) agree without storing
/// a mask.
#[inline]
fn dropout_keep(seed: u64, idx: u64, threshold: u64) -> bool {
    let mut z = seed ^ idx.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    z >= threshold
}

/// Dropout of the fused path: the seed and `1 / (1 - p)` (0 when `p == 1`).
#[derive(Clone, Copy, Debug)]
struct Dropout {
    seed: u64,
    threshold: u64,
    factor: f64,
}

impl Dropout {
    fn new(p: f64) -> Result<Option<Dropout>> {
        if p <= 0.0 {
            return Ok(None);
        }
        // The seed comes from ferrograd's generator, so `manual_seed` makes runs reproducible.
        let r = Tensor::rand(&[2], DType::Float64)?.to_vec::<f64>()?;
        let seed = ((r[0] * 2f64.powi(32)) as u64) << 32 | (r[1] * 2f64.powi(32)) as u64;
        let threshold = if p >= 1.0 {
            u64::MAX
        } else {
            (p * 2f64.powi(64)) as u64
        };
        let factor = if p >= 1.0 { 0.0 } else { 1.0 / (1.0 - p) };
        Ok(Some(Dropout {
            seed,
            threshold,
            factor,
        }))
    }

    /// The multiplier of score `idx`: `1 / (1 - p)` or 0.
    #[inline]
    fn scale(&self, idx: u64) -> f64 {
        if self.threshold != u64::MAX && dropout_keep(self.seed, idx, self.threshold) {
            self.factor
        } else {
            0.0
        }
    }
}

/// Geometry shared by the forward and backward kernels: `nb` independent problems of `l`
/// queries and `s` keys, all operands contiguous.
#[derive(Clone, Copy)]
struct Dims {
    nb: usize,
    l: usize,
    s: usize,
    e: usize,
    ev: usize,
    scale: f64,
    causal: bool,
    dropout: Option<Dropout>,
}

/// The additive mask as the kernels read it: element `(b, i, j)` at
/// `offsets[b] + i * row_stride + j * col_stride` of `data`.
struct Bias<'a, T> {
    data: &'a [T],
    offsets: Vec<usize>,
    row_stride: usize,
    col_stride: usize,
}

/// Adds the mask, the causal cut and nothing else to the scores `s` of rows `i0..i0+br` and
/// keys `j0..j0+bc` of problem `b` (`s` row-major, `bc` wide).
#[inline]
fn mask_tile<T: AttnFloat>(
    s: &mut [T],
    (b, i0, j0, br, bc): (usize, usize, usize, usize, usize),
    d: &Dims,
    bias: Option<&Bias<'_, T>>,
) {
    if let Some(m) = bias {
        let base = m.offsets[b];
        for r in 0..br {
            let row = base + (i0 + r) * m.row_stride + j0 * m.col_stride;
            let srow = &mut s[r * bc..(r + 1) * bc];
            if m.col_stride == 1 {
                for (x, &a) in srow.iter_mut().zip(&m.data[row..row + bc]) {
                    *x = *x + a;
                }
            } else {
                for (c, x) in srow.iter_mut().enumerate() {
                    *x = *x + m.data[row + c * m.col_stride];
                }
            }
        }
    }
    if d.causal && j0 + bc > i0 + 1 {
        for r in 0..br {
            let first = (i0 + r + 1).saturating_sub(j0).min(bc);
            s[r * bc + first..(r + 1) * bc].fill(T::neg_infinity());
        }
    }
}

/// Each of the `nb` row-major `rows x cols` matrices of `src` transposed, so the tile kernels
/// read `Kᵀ` and `Vᵀ` by contiguous rows (done once per call, not once per tile). Rows of the
/// result are `ld` apart, padded past a multiple of 4 KiB: a tile product walks down a column
/// of rows, and rows exactly 4 KiB apart would all land in one L1 set.
fn transposed<T: Copy + Default + Send + Sync>(
    src: &Rows<'_, T>,
    nb: usize,
    rows: usize,
    cols: usize,
) -> Result<(Vec<T>, usize)> {
    let ld = rows.next_multiple_of(16) + 16;
    let per = cols * ld;
    let mut dst = crate::tensor::creation::try_vec::<T>(nb * per)?;
    // SAFETY: every element, the padding past `rows` included, is written below before the
    // vector is read; `T` is a plain float.
    unsafe { dst.set_len(nb * per) };
    let base = SendPtr(dst.as_mut_ptr());
    let one = |b: usize| {
        // SAFETY: problem b owns its `cols` rows of `ld` in `dst`.
        let d = unsafe { std::slice::from_raw_parts_mut(base.get().add(b * per), per) };
        // Blocks of 16 source rows: their `cols` values stay in L1 while written across.
        for r0 in (0..rows).step_by(16) {
            for r in r0..(r0 + 16).min(rows) {
                for (c, &x) in src.at(b, r)[..cols].iter().enumerate() {
                    d[c * ld + r] = x;
                }
            }
        }
        for row in d.chunks_exact_mut(ld) {
            row[rows..].fill(T::default());
        }
    };
    let helpers = if nb * rows * cols < 1 << 16 {
        0
    } else {
        crate::parallel::helpers()
    };
    crate::parallel::share_work(helpers, nb, &one);
    Ok((dst, ld))
}

/// The online-softmax step of the forward for one tile of scores `s` (rows `bc` wide): each
/// row's running maximum `m` and sum `l` are updated, its output row in `acc` (`ev` wide)
/// rescaled to the new maximum, and `s` replaced by `exp(s - m)`. Rows still fully masked are
/// zeroed. Compiled for AVX-512 and AVX2 as well, picked at run time.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx512dq+avx2+avx+fma", "x86_64+avx2+avx+fma"))]
fn online_softmax<T: AttnFloat>(
    s: &mut [T],
    bc: usize,
    m: &mut [T],
    l: &mut [T],
    acc: &mut [T],
    ev: usize,
    tmp: &mut [T],
) {
    for (r, row) in s.chunks_exact_mut(bc).enumerate() {
        let mx = row_max(row, m[r]);
        if mx == T::neg_infinity() {
            row.fill(T::ZERO);
            continue;
        }
        T::exp_shifted_in_place(row, mx, tmp);
        let corr = (m[r] - mx).exp();
        m[r] = mx;
        l[r] = l[r] * corr + row_sum(row);
        if corr != T::ONE {
            acc[r * ev..(r + 1) * ev]
                .iter_mut()
                .for_each(|x| *x = *x * corr);
        }
    }
}

/// The backward's elementwise steps on one tile: `p = exp(p - lse)` row by row, then (with
/// `dp` holding `dO Vᵀ` and `z` the dropout multipliers) `dp = scale · p ∘ (dp ∘ z - D)`.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx512dq+avx2+avx+fma", "x86_64+avx2+avx+fma"))]
fn softmax_grad_tile<T: AttnFloat>(
    p: &[T],
    dp: &mut [T],
    z: Option<&[T]>,
    dsum: &[T],
    scale: T,
    bc: usize,
) {
    for (r, (pr, dpr)) in p.chunks_exact(bc).zip(dp.chunks_exact_mut(bc)).enumerate() {
        let di = dsum[r];
        match z {
            Some(z) => {
                for ((g, &x), &w) in dpr.iter_mut().zip(pr).zip(&z[r * bc..(r + 1) * bc]) {
                    *g = scale * x * (*g * w - di);
                }
            }
            None => {
                for (g, &x) in dpr.iter_mut().zip(pr) {
                    *g = scale * x * (*g - di);
                }
            }
        }
    }
}

/// `p = exp(p - lse[r])` for each row `r` of the tile (rows `bc` wide).
#[multiversion(targets("x86_64+avx512f+avx512vl+avx512dq+avx2+avx+fma", "x86_64+avx2+avx+fma"))]
fn exp_shifted<T: AttnFloat>(p: &mut [T], lse: &[T], bc: usize, tmp: &mut [T]) {
    for (row, &m) in p.chunks_exact_mut(bc).zip(lse) {
        T::exp_shifted_in_place(row, m, tmp);
    }
}

/// The `br` x `bc` score tile `s = scale * Q_i K_jᵀ` of rows `i0..` and keys `j0..` of
/// problem `b`, masked: `ktj` holds the columns `j0..` of `Kᵀ` (rows `ld` apart). The forward
/// and the backward (which recomputes P) share it.
///
/// # Safety
/// As [`mm`] for those operands: `br` rows of `q` from `i0`, `e` rows of `ktj` with `bc`
/// columns.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn score_tile<T: AttnFloat>(
    s: &mut [T],
    tile: (usize, usize, usize, usize, usize),
    d: &Dims,
    q: &Rows<'_, T>,
    (ktj, ld): (&[T], usize),
    scale: T,
    bias: Option<&Bias<'_, T>>,
) {
    let (b, i0, _, br, bc) = tile;
    let qi = q.at(b, i0);
    unsafe {
        T::tile(
            (br, bc, d.e),
            s.as_mut_ptr(),
            bc,
            false,
            (qi.as_ptr(), q.rs, 1),
            (ktj.as_ptr(), ld, 1),
            scale,
        )
    };
    mask_tile(s, tile, d, bias);
}

/// Whether the causal cut removes the whole tile.
#[inline]
fn tile_masked(d: &Dims, i0: usize, br: usize, j0: usize) -> bool {
    d.causal && j0 >= i0 + br
}

/// Fused forward: writes `out` (`nb x l x ev`, zeroed) and `lse` (`nb x l`), the logsumexp of
/// each row's scores (`+inf` for a fully masked row, whose output stays 0).
fn forward_kernel<T: AttnFloat>(
    d: &Dims,
    (q, (kt, ld), v): (&Rows<'_, T>, (&[T], usize), &Rows<'_, T>),
    bias: Option<&Bias<'_, T>>,
    out: &mut [T],
    lse: &mut [T],
) {
    let blocks = d.l.div_ceil(ROWS);
    let units = d.nb * blocks;
    let (po, pl) = (SendPtr(out.as_mut_ptr()), SendPtr(lse.as_mut_ptr()));
    let scale = T::of(d.scale);
    let (rows, cols) = (ROWS.min(d.l), COLS.min(d.s));
    let unit = |u: usize, s: &mut [T], tmp: &mut [T], m: &mut [T], l: &mut [T]| {
        let (b, ib) = (u / blocks, u % blocks);
        let i0 = ib * ROWS;
        let br = ROWS.min(d.l - i0);
        let (m, l) = (&mut m[..br], &mut l[..br]);
        m.fill(T::neg_infinity());
        l.fill(T::ZERO);
        // SAFETY: unit (b, ib) owns rows i0..i0+br of problem b in `out` and `lse`.
        let acc = unsafe {
            std::slice::from_raw_parts_mut(po.get().add((b * d.l + i0) * d.ev), br * d.ev)
        };
        let lse = unsafe { std::slice::from_raw_parts_mut(pl.get().add(b * d.l + i0), br) };
        // Zeroed here, by the thread that fills them, rather than by the allocation.
        acc.fill(T::ZERO);
        let mut j0 = 0;
        while j0 < d.s && !tile_masked(d, i0, br, j0) {
            let bc = COLS.min(d.s - j0);
            let s = &mut s[..br * bc];
            let ktj = &kt[b * d.e * ld + j0..];
            let vj = v.at(b, j0);
            // SAFETY: the operands are the (br x e) block of q and k's block transposed.
            unsafe { score_tile(s, (b, i0, j0, br, bc), d, q, (ktj, ld), scale, bias) };
            online_softmax(s, bc, m, l, acc, d.ev, tmp);
            if let Some(dr) = &d.dropout {
                for (r, row) in s.chunks_exact_mut(bc).enumerate() {
                    let base = ((b * d.l + i0 + r) * d.s + j0) as u64;
                    for (c, x) in row.iter_mut().enumerate() {
                        *x = *x * T::of(dr.scale(base + c as u64));
                    }
                }
            }
            // SAFETY: (br x bc) @ (bc x ev) into the unit's own output rows.
            unsafe {
                T::tile(
                    (br, d.ev, bc),
                    acc.as_mut_ptr(),
                    d.ev,
                    true,
                    (s.as_ptr(), bc, 1),
                    (vj.as_ptr(), v.rs, 1),
                    T::ONE,
                )
            };
            j0 += bc;
        }
        for r in 0..br {
            if l[r] == T::ZERO {
                lse[r] = T::infinity();
                acc[r * d.ev..(r + 1) * d.ev].fill(T::ZERO);
            } else {
                let inv = T::ONE / l[r];
                acc[r * d.ev..(r + 1) * d.ev]
                    .iter_mut()
                    .for_each(|x| *x = *x * inv);
                lse[r] = m[r] + l[r].ln();
            }
        }
    };
    let units_in = |range: std::ops::Range<usize>| {
        // Scratch sized to the problem and allocated once per range: many small problems
        // (8 x 4 heads of 64 tokens) would otherwise zero-fill a full tile each.
        let mut s = vec![T::ZERO; rows * cols];
        let mut tmp = vec![T::ZERO; cols];
        let mut m = vec![T::neg_infinity(); rows];
        let mut l = vec![T::ZERO; rows];
        for u in range {
            unit(u, &mut s, &mut tmp, &mut m, &mut l);
        }
    };
    let work = d.nb * d.l * d.s * (d.e + d.ev);
    let helpers = if work < PARALLEL_MIN_WORK {
        0
    } else {
        crate::parallel::helpers()
    };
    share_ranges(helpers, units, &units_in);
}

/// `job(range)` over consecutive ranges covering `0..units`, a few per thread (a slowed thread
/// takes fewer), so scratch buffers are allocated once per range and not once per unit.
fn share_ranges(helpers: usize, units: usize, job: &(dyn Fn(std::ops::Range<usize>) + Sync)) {
    let chunks = units.min(4 * (helpers + 1)).max(1);
    crate::parallel::share_work(helpers, chunks, &|c| {
        job(c * units / chunks..(c + 1) * units / chunks)
    });
}

/// Fused backward: `dq`, `dk`, `dv` (shaped like q, k, v; zeroed here) from `dout` and the saved
/// `out` and `lse`. Work is split by whole problems when there are enough of them for the
/// threads (one FlashAttention-2 loop each); otherwise into a pass over key blocks for `dk`,
/// `dv` and one over query blocks for `dq`. Both orders add every term in the same sequence, so
/// the result does not depend on the split.
#[allow(clippy::too_many_arguments)]
fn backward_kernel<T: AttnFloat>(
    d: &Dims,
    (q, k, (kt, vt, ld)): (&Rows<'_, T>, &Rows<'_, T>, KvT<'_, T>),
    bias: Option<&Bias<'_, T>>,
    (out, lse, dout): (&[T], &[T], &Rows<'_, T>),
    dq: &mut [T],
    dk: &mut [T],
    dv: &mut [T],
) {
    let work = d.nb * d.l * d.s * (d.e + d.ev);
    let helpers = if work < PARALLEL_MIN_WORK {
        0
    } else {
        crate::parallel::helpers()
    };
    // D_i = rowsum(dO ∘ O), the softmax backward's per-row term, problem by problem.
    let mut dsum = vec![T::ZERO; d.nb * d.l];
    let pds = SendPtr(dsum.as_mut_ptr());
    let row_terms = |b: usize| {
        // SAFETY: problem b owns its `l` entries of `dsum`.
        let ds = unsafe { std::slice::from_raw_parts_mut(pds.get().add(b * d.l), d.l) };
        for (i, v) in ds.iter_mut().enumerate() {
            let o = &out[(b * d.l + i) * d.ev..][..d.ev];
            let g = &dout.at(b, i)[..d.ev];
            *v = o.iter().zip(g).fold(T::ZERO, |a, (&x, &y)| a + x * y);
        }
    };
    crate::parallel::share_work(helpers, d.nb, &row_terms);
    let qblocks = d.l.div_ceil(BWD_ROWS);
    let kblocks = d.s.div_ceil(BWD_COLS);
    let (pdq, pdk, pdv) = (
        SendPtr(dq.as_mut_ptr()),
        SendPtr(dk.as_mut_ptr()),
        SendPtr(dv.as_mut_ptr()),
    );
    let scale = T::of(d.scale);
    // Tiles (kb in kbs) x (ib in ibs) of problem b; `want_dq` / `want_dkv` pick the outputs.
    // Tile buffers on the heap (three 64 KiB f32 tiles would strain a pool worker's stack),
    // sized to the problem and made once per range of work, not per problem.
    let tile_len = BWD_ROWS.min(d.l) * BWD_COLS.min(d.s);
    let buffers = || {
        (
            vec![T::ZERO; tile_len],
            vec![T::ZERO; tile_len],
            vec![T::ZERO; tile_len],
            vec![T::ZERO; BWD_COLS.min(d.s)],
        )
    };
    let tiles = |(p, pd, dp, tmp): &mut (Vec<T>, Vec<T>, Vec<T>, Vec<T>),
                 b: usize,
                 kbs: std::ops::Range<usize>,
                 ibs: std::ops::Range<usize>,
                 want_dq: bool,
                 want_dkv: bool| {
        // Zero the rows this call owns (by the thread that fills them, not the allocation).
        // SAFETY: the caller hands each (problem, key block) for dk/dv and (problem, query
        // block) for dq to exactly one call.
        let rows = |blocks: &std::ops::Range<usize>, size: usize, len: usize| {
            (blocks.start * size).min(len)..(blocks.end * size).min(len)
        };
        if want_dkv {
            let r = rows(&kbs, BWD_COLS, d.s);
            unsafe {
                std::slice::from_raw_parts_mut(
                    pdk.get().add((b * d.s + r.start) * d.e),
                    r.len() * d.e,
                )
                .fill(T::ZERO);
                std::slice::from_raw_parts_mut(
                    pdv.get().add((b * d.s + r.start) * d.ev),
                    r.len() * d.ev,
                )
                .fill(T::ZERO);
            }
        }
        if want_dq {
            let r = rows(&ibs, BWD_ROWS, d.l);
            unsafe {
                std::slice::from_raw_parts_mut(
                    pdq.get().add((b * d.l + r.start) * d.e),
                    r.len() * d.e,
                )
                .fill(T::ZERO);
            }
        }
        for kb in kbs {
            let j0 = kb * BWD_COLS;
            let bc = BWD_COLS.min(d.s - j0);
            let kj = k.at(b, j0);
            let ktj = &kt[b * d.e * ld + j0..];
            let vtj = &vt[b * d.ev * ld + j0..];
            for ib in ibs.clone() {
                let i0 = ib * BWD_ROWS;
                let br = BWD_ROWS.min(d.l - i0);
                if tile_masked(d, i0, br, j0) {
                    continue;
                }
                let qi = q.at(b, i0);
                let doi = dout.at(b, i0);
                let (p, pd, dp) = (&mut p[..br * bc], &mut pd[..br * bc], &mut dp[..br * bc]);
                // SAFETY (all products): operands are blocks inside q, k, v, dout and the
                // tile buffers; destinations are the tile buffers or rows this call owns.
                unsafe { score_tile(p, (b, i0, j0, br, bc), d, q, (ktj, ld), scale, bias) };
                exp_shifted(p, &lse[b * d.l + i0..b * d.l + i0 + br], bc, tmp);
                // pd: the weights after dropout (those that multiplied V).
                let z: Option<Vec<T>> = d.dropout.as_ref().map(|dr| {
                    (0..br * bc)
                        .map(|t| {
                            let (r, c) = (t / bc, t % bc);
                            T::of(dr.scale(((b * d.l + i0 + r) * d.s + j0 + c) as u64))
                        })
                        .collect()
                });
                let pv: &[T] = match &z {
                    Some(z) => {
                        for ((o, &x), &w) in pd.iter_mut().zip(p.iter()).zip(z) {
                            *o = x * w;
                        }
                        pd
                    }
                    None => p,
                };
                if want_dkv {
                    // dV_j += Pdᵀ dO_i
                    unsafe {
                        T::tile(
                            (bc, d.ev, br),
                            pdv.get().add((b * d.s + j0) * d.ev),
                            d.ev,
                            true,
                            (pv.as_ptr(), 1, bc),
                            (doi.as_ptr(), dout.rs, 1),
                            T::ONE,
                        )
                    };
                }
                // dPd = dO_i V_jᵀ
                unsafe {
                    T::tile(
                        (br, bc, d.ev),
                        dp.as_mut_ptr(),
                        bc,
                        false,
                        (doi.as_ptr(), dout.rs, 1),
                        (vtj.as_ptr(), ld, 1),
                        T::ONE,
                    )
                };
                // dS = scale * P ∘ (dPd ∘ z - D)
                softmax_grad_tile(
                    p,
                    dp,
                    z.as_deref(),
                    &dsum[b * d.l + i0..b * d.l + i0 + br],
                    scale,
                    bc,
                );
                if want_dq {
                    // dQ_i += dS K_j
                    unsafe {
                        T::tile(
                            (br, d.e, bc),
                            pdq.get().add((b * d.l + i0) * d.e),
                            d.e,
                            true,
                            (dp.as_ptr(), bc, 1),
                            (kj.as_ptr(), k.rs, 1),
                            T::ONE,
                        )
                    };
                }
                if want_dkv {
                    // dK_j += dSᵀ Q_i
                    unsafe {
                        T::tile(
                            (bc, d.e, br),
                            pdk.get().add((b * d.s + j0) * d.e),
                            d.e,
                            true,
                            (dp.as_ptr(), 1, bc),
                            (qi.as_ptr(), q.rs, 1),
                            T::ONE,
                        )
                    };
                }
            }
        }
    };
    if helpers == 0 || d.nb > helpers {
        let job = |range: std::ops::Range<usize>| {
            let mut bufs = buffers();
            for b in range {
                tiles(&mut bufs, b, 0..kblocks, 0..qblocks, true, true);
            }
        };
        share_ranges(helpers, d.nb, &job);
    } else {
        let kv = |range: std::ops::Range<usize>| {
            let mut bufs = buffers();
            for u in range {
                let (b, kb) = (u / kblocks, u % kblocks);
                tiles(&mut bufs, b, kb..kb + 1, 0..qblocks, false, true);
            }
        };
        share_ranges(helpers, d.nb * kblocks, &kv);
        let qj = |range: std::ops::Range<usize>| {
            let mut bufs = buffers();
            for u in range {
                let (b, ib) = (u / qblocks, u % qblocks);
                tiles(&mut bufs, b, 0..kblocks, ib..ib + 1, true, false);
            }
        };
        share_ranges(helpers, d.nb * qblocks, &qj);
    }
}

/// The elements of contiguous `t` as a slice (with its storage read-locked by `guard`).
fn slice_of<'a, T: Element>(
    t: &Tensor,
    guard: &'a crate::tensor::storage::Buffer,
) -> Result<&'a [T]> {
    let data = T::data(guard)
        .ok_or_else(|| Error::runtime("internal error: attention dtype"))?
        .as_slice();
    let off = t.layout().offset;
    data.get(off..off + t.numel())
        .ok_or_else(|| Error::runtime("internal error: attention operand outside its buffer"))
}

/// The mask as the kernels read it: strides lined up with `batch + [l, s]` (0 where broadcast).
fn bias_view<'a, T: Element>(
    m: &Tensor,
    guard: &'a crate::tensor::storage::Buffer,
    batch: &[usize],
) -> Result<Bias<'a, T>> {
    let data = T::data(guard)
        .ok_or_else(|| Error::runtime("internal error: attention mask dtype"))?
        .as_slice();
    let lay = m.layout();
    let full = batch.len() + 2;
    let lead = full - lay.shape.len();
    let stride = |i: usize| match i.checked_sub(lead) {
        Some(j) if lay.shape[j] != 1 => lay.strides[j],
        _ => 0,
    };
    let bstrides: Vec<usize> = (0..batch.len()).map(stride).collect();
    let nb: usize = batch.iter().product();
    Ok(Bias {
        data,
        offsets: (0..nb)
            .map(|b| lay.offset + batch_offset(b, batch, &bstrides))
            .collect(),
        row_stride: stride(full - 2),
        col_stride: stride(full - 1),
    })
}

/// A batch of matrices read in place: matrix `b` starts at `offs[b]` of `data`, rows are `rs`
/// apart and columns adjacent. Lets permuted views (the heads of a fused qkv projection) reach
/// the kernels without a copy.
struct Rows<'a, T> {
    data: &'a [T],
    offs: Vec<usize>,
    rs: usize,
}

impl<T> Rows<'_, T> {
    /// Row `i` of matrix `b` onwards.
    #[inline]
    fn at(&self, b: usize, i: usize) -> &[T] {
        &self.data[self.offs[b] + i * self.rs..]
    }
}

/// `t` (shape `batch + [rows, cols]`, last dim adjacent) as [`Rows`] over its storage.
fn rows_of<'a, T: Element>(
    t: &Tensor,
    guard: &'a crate::tensor::storage::Buffer,
    batch: &[usize],
) -> Result<Rows<'a, T>> {
    let data = T::data(guard)
        .ok_or_else(|| Error::runtime("internal error: attention dtype"))?
        .as_slice();
    let lay = t.layout();
    let n = lay.shape.len();
    let nb: usize = batch.iter().product();
    let offs = (0..nb)
        .map(|b| lay.offset + batch_offset(b, batch, &lay.strides[..n - 2]))
        .collect();
    let rows = Rows {
        data,
        offs,
        rs: lay.strides[n - 2],
    };
    // Every element the kernels address must lie in the buffer.
    let (r, c) = (lay.shape[n - 2], lay.shape[n - 1]);
    let last = rows.offs.iter().max().copied().unwrap_or(0) + r.saturating_sub(1) * rows.rs + c;
    if t.numel() > 0 && (last > data.len() || (c > 1 && lay.strides[n - 1] != 1)) {
        return Err(Error::runtime("internal error: attention operand layout"));
    }
    Ok(rows)
}

/// `Kᵀ`, `Vᵀ` (from [`transposed`]) and their row stride.
type KvT<'a, T> = (&'a [T], &'a [T], usize);

/// Problem geometry and the saved state of the fused node.
struct Saved {
    dims: Dims,
    batch: Vec<usize>,
}

/// Fused forward on contiguous `q`, `k`, `v` (batch `batch`): `(out, lse)`.
fn fused_forward<T: AttnFloat>(
    sv: &Saved,
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    bias: Option<&Tensor>,
) -> Result<(Tensor, Tensor)> {
    let d = &sv.dims;
    let mut out = crate::tensor::creation::try_vec::<T>(d.nb * d.l * d.ev)?;
    let mut lse = crate::tensor::creation::try_vec::<T>(d.nb * d.l)?;
    // SAFETY: the forward kernel's units cover every row of every problem, zeroing its output
    // row before accumulating into it and setting its lse; `T` is a plain float.
    unsafe {
        out.set_len(d.nb * d.l * d.ev);
        lse.set_len(d.nb * d.l);
    }
    {
        let (gq, gk, gv) = (q.storage().read(), k.storage().read(), v.storage().read());
        let gm = bias.map(|m| m.storage().read());
        let bv = match (bias, &gm) {
            (Some(m), Some(g)) => Some(bias_view::<T>(m, g, &sv.batch)?),
            _ => None,
        };
        let (qr, kr, vr) = (
            rows_of::<T>(q, &gq, &sv.batch)?,
            rows_of::<T>(k, &gk, &sv.batch)?,
            rows_of::<T>(v, &gv, &sv.batch)?,
        );
        let (kt, ld) = transposed(&kr, d.nb, d.s, d.e)?;
        let ops = (&qr, (&kt[..], ld), &vr);
        forward_kernel(d, ops, bv.as_ref(), &mut out, &mut lse);
    }
    let mut oshape = sv.batch.clone();
    oshape.extend([d.l, d.ev]);
    let mut lshape = sv.batch.clone();
    lshape.push(d.l);
    Ok((
        Tensor::from_vec(out, &oshape)?,
        Tensor::from_vec(lse, &lshape)?,
    ))
}

/// Fused backward: `(dq, dk, dv)`.
fn fused_backward<T: AttnFloat>(
    sv: &Saved,
    s: &[Tensor],
    bias: Option<&Tensor>,
    dout: &Tensor,
) -> Result<[Tensor; 3]> {
    let d = &sv.dims;
    let (q, k, v, out, lse) = (&s[0], &s[1], &s[2], &s[3], &s[4]);
    // Read in place when rows are strided (the gradient of a transposed output), copied only
    // when its last dim is.
    let dout = if dout.shape()[dout.dim() - 1] > 1 && dout.layout().strides[dout.dim() - 1] != 1 {
        dout.contiguous()?
    } else {
        dout.clone()
    };
    let mut dq = crate::tensor::creation::try_vec::<T>(q.numel())?;
    let mut dk = crate::tensor::creation::try_vec::<T>(k.numel())?;
    let mut dv = crate::tensor::creation::try_vec::<T>(v.numel())?;
    // SAFETY: the backward kernel's work units zero every row they own before adding into it,
    // and together own every row; `T` is a plain float.
    unsafe {
        dq.set_len(q.numel());
        dk.set_len(k.numel());
        dv.set_len(v.numel());
    }
    {
        let g: Vec<_> = [q, k, v, out, lse, &dout]
            .iter()
            .map(|t| t.storage().read())
            .collect();
        let gm = bias.map(|m| m.storage().read());
        let bv = match (bias, &gm) {
            (Some(m), Some(gd)) => Some(bias_view::<T>(m, gd, &sv.batch)?),
            _ => None,
        };
        let (qr, kr, vr) = (
            rows_of::<T>(q, &g[0], &sv.batch)?,
            rows_of::<T>(k, &g[1], &sv.batch)?,
            rows_of::<T>(v, &g[2], &sv.batch)?,
        );
        let (kt, ld) = transposed(&kr, d.nb, d.s, d.e)?;
        let (vt, _) = transposed(&vr, d.nb, d.s, d.ev)?;
        backward_kernel(
            d,
            (&qr, &kr, (&kt, &vt, ld)),
            bv.as_ref(),
            (
                slice_of::<T>(out, &g[3])?,
                slice_of::<T>(lse, &g[4])?,
                &rows_of::<T>(&dout, &g[5], &sv.batch)?,
            ),
            &mut dq,
            &mut dk,
            &mut dv,
        );
    }
    Ok([
        Tensor::from_vec(dq, q.shape())?,
        Tensor::from_vec(dk, k.shape())?,
        Tensor::from_vec(dv, v.shape())?,
    ])
}

/// The dropout multipliers (`1 / (1 - p)` or 0) of every score, shaped `batch + [l, s]`: the
/// mask the fused path regenerates, for the composed path.
fn dropout_tensor(d: &Dims, dr: &Dropout, batch: &[usize], dtype: DType) -> Result<Tensor> {
    let n = d.nb * d.l * d.s;
    let vals: Vec<f64> = (0..n as u64).map(|i| dr.scale(i)).collect();
    let mut shape = batch.to_vec();
    shape.extend([d.l, d.s]);
    crate::kernels::copy::cast(&Tensor::from_vec(vals, &shape)?, dtype)
}

/// The causal cut as a bool tensor `[l, s]`, true where a key is masked out.
fn causal_cut(l: usize, s: usize) -> Result<Tensor> {
    let v: Vec<bool> = (0..l * s).map(|t| t % s > t / s).collect();
    Tensor::from_vec(v, &[l, s])
}

/// The scores `q kᵀ · scale + bias` with the causal cut, differentiable in `q`, `k` and `bias`.
fn scores(q: &Tensor, k: &Tensor, bias: Option<&Tensor>, d: &Dims) -> Result<Tensor> {
    let mut s = q.matmul(&k.transpose(-2, -1)?)?.mul_scalar(d.scale)?;
    if let Some(b) = bias {
        s = s.add(b)?;
    }
    if d.causal {
        s = s.masked_fill(&causal_cut(d.l, d.s)?, f64::NEG_INFINITY)?;
    }
    Ok(s)
}

/// Softmax over the last dim with fully masked rows (all `-inf`) giving zeros and no NaN in
/// any gradient (torch's `_safe_softmax`).
fn safe_softmax(s: &Tensor) -> Result<Tensor> {
    let dead = {
        let _g = GradModeGuard::new(false);
        s.detach().amax(&[-1], true)?.isinf()?
    };
    let p = s.masked_fill(&dead, 0.0)?.softmax(-1)?;
    p.masked_fill(&dead, 0.0)
}

/// The whole attention in differentiable ops (used when the mask itself needs a gradient).
fn composed_forward(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    bias: Option<&Tensor>,
    d: &Dims,
    drop: Option<&Tensor>,
) -> Result<Tensor> {
    let mut p = safe_softmax(&scores(q, k, bias, d)?)?;
    if let Some(z) = drop {
        p = p.mul(z)?;
    }
    p.matmul(v)
}

/// The backward rule in differentiable ops (so `create_graph` can differentiate it again):
/// `dV = Pdᵀ dO`, `dS = P ∘ (dPd ∘ z - rowsum(P ∘ dPd ∘ z))`, `dQ = scale dS K`,
/// `dK = scale dSᵀ Q`.
fn composed_backward(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    bias: Option<&Tensor>,
    d: &Dims,
    drop: Option<&Tensor>,
    dout: &Tensor,
) -> Result<[Tensor; 3]> {
    let p = safe_softmax(&scores(q, k, bias, d)?)?;
    let (pd, mut dp) = (p.clone(), dout.matmul(&v.transpose(-2, -1)?)?);
    let pd = match drop {
        Some(z) => {
            dp = dp.mul(z)?;
            pd.mul(z)?
        }
        None => pd,
    };
    let dv = pd.transpose(-2, -1)?.matmul(dout)?;
    let ds = p.mul(&dp.sub(&p.mul(&dp)?.sum_dims(&[-1], true)?)?)?;
    let ds = ds.mul_scalar(d.scale)?;
    let dq = ds.matmul(k)?;
    let dk = ds.transpose(-2, -1)?.matmul(q)?;
    Ok([dq, dk, dv])
}

fn dtype_error(q: &Tensor, k: &Tensor, v: &Tensor) -> Error {
    Error::runtime(format!(
        "Expected query, key, and value to have the same dtype, but got query.dtype: {} key.dtype: {} and value.dtype: {} instead.",
        q.dtype().c_name(),
        k.dtype().c_name(),
        v.dtype().c_name()
    ))
}

/// Repeats each key/value head (dim -3) `groups` times, differentiably (gradients sum back).
fn repeat_heads(t: &Tensor, groups: usize) -> Result<Tensor> {
    let sh = t.shape().to_vec();
    let n = sh.len();
    let mut big = sh[..n - 2].to_vec();
    big.push(groups);
    big.extend_from_slice(&sh[n - 2..]);
    let mut out = sh.clone();
    out[n - 3] *= groups;
    t.unsqueeze(-3)?.expand(&big)?.reshape(&out)
}

/// `softmax(query keyᵀ · scale + mask) value` with torch's shapes: `query (..., L, E)`,
/// `key (..., S, E)`, `value (..., S, Ev)`, leading dims broadcast; returns `(..., L, Ev)`.
///
/// Errors (torch's messages): inputs below 2-D, differing dtypes, mismatched embedding or
/// sequence sizes, batch dims or a mask that do not broadcast, an integer mask, a mask together
/// with `is_causal`, `dropout_p` outside [0, 1], query heads not a multiple of key heads.
pub fn scaled_dot_product_attention(
    query: &Tensor,
    key: &Tensor,
    value: &Tensor,
    opts: &SdpaOptions<'_>,
) -> Result<Tensor> {
    let mask = opts.attn_mask.filter(|m| m.dtype().is_float());
    if let Some(r) = Tensor::lift_half([query, key, value], [mask], |[q, k, v], [m]| {
        let opts = SdpaOptions {
            attn_mask: m.or(opts.attn_mask),
            ..opts.clone()
        };
        scaled_dot_product_attention(q, k, v, &opts)
    }) {
        return r;
    }
    let (q, k, v) = (query, key, value);
    if q.dim() < 2 || k.dim() < 2 || v.dim() < 2 {
        return Err(Error::runtime(format!(
            "Expected query, key, and value to all be  at least 2 dimensional, but got query.dim: {} key.dim: {} and value.dim: {} instead.",
            q.dim(),
            k.dim(),
            v.dim()
        )));
    }
    if q.dtype() != k.dtype() || q.dtype() != v.dtype() {
        return Err(dtype_error(q, k, v));
    }
    if !q.dtype().is_float() {
        return Err(Error::runtime(format!(
            "\"baddbmm_cpu\" not implemented for '{}'",
            crate::tensor::scalar_type_name(q.dtype())
        )));
    }
    if let Some(m) = opts.attn_mask {
        if m.dtype() != DType::Bool && m.dtype() != q.dtype() {
            return Err(Error::runtime(format!(
                "Expected attn_mask dtype to be bool or float or to match query dtype, but got attn_mask.dtype: {} and  query.dtype: {} instead.",
                m.dtype().c_name(),
                q.dtype().c_name()
            )));
        }
        if opts.is_causal {
            return Err(Error::runtime(
                "_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True",
            ));
        }
    }
    if !(0.0..=1.0).contains(&opts.dropout_p) {
        return Err(Error::runtime(format!(
            "dropout probability has to be between 0 and 1, but got {}",
            opts.dropout_p
        )));
    }
    let (mut k, mut v) = (k.clone(), v.clone());
    if opts.enable_gqa && q.dim() >= 3 && k.dim() >= 3 && v.dim() >= 3 {
        let hq = q.shape()[q.dim() - 3];
        for t in [&mut k, &mut v] {
            let h = t.shape()[t.dim() - 3];
            if h != hq && h != 0 {
                if hq % h != 0 {
                    return Err(Error::runtime(
                        "number of heads in key/value must divide number of heads in query",
                    ));
                }
                *t = repeat_heads(t, hq / h)?;
            }
        }
    }
    let (qs, ks, vs) = (q.shape(), k.shape(), v.shape());
    let (l, e) = (qs[qs.len() - 2], qs[qs.len() - 1]);
    let (s, ek) = (ks[ks.len() - 2], ks[ks.len() - 1]);
    let (sv, ev) = (vs[vs.len() - 2], vs[vs.len() - 1]);
    let batch: Vec<usize> = broadcast_shapes(
        &broadcast_shapes(&qs[..qs.len() - 2], &ks[..ks.len() - 2])?,
        &vs[..vs.len() - 2],
    )?
    .to_vec();
    let nb: usize = batch.iter().product();
    let all2d = qs.len() == 2 && ks.len() == 2 && vs.len() == 2;
    if e != ek {
        return Err(Error::runtime(if all2d {
            format!("mm: mat1 and mat2 shapes cannot be multiplied ({l}x{e} and {ek}x{s})")
        } else {
            format!("Expected size for first two dimensions of batch2 tensor to be: [{nb}, {e}] but got: [{nb}, {ek}].")
        }));
    }
    if s != sv {
        return Err(Error::runtime(if all2d {
            format!("mm: mat1 and mat2 shapes cannot be multiplied ({l}x{s} and {sv}x{ev})")
        } else {
            format!("Expected size for first two dimensions of batch2 tensor to be: [{nb}, {s}] but got: [{nb}, {sv}].")
        }));
    }
    let mut attn_shape = batch.clone();
    attn_shape.extend([l, s]);
    // The mask as an additive bias of the query's dtype, in its own (unbroadcast) shape.
    let bias = match opts.attn_mask {
        None => None,
        Some(m) => {
            mask_broadcasts(&attn_shape, m.shape())?;
            Some(if m.dtype() == DType::Bool {
                let _g = GradModeGuard::new(false);
                Tensor::zeros(&[], q.dtype()).masked_fill(&m.logical_not()?, f64::NEG_INFINITY)?
            } else {
                m.clone()
            })
        }
    };
    let scale = opts.scale.unwrap_or(1.0 / (e as f64).sqrt());
    let dims = Dims {
        nb,
        l,
        s,
        e,
        ev,
        scale,
        causal: opts.is_causal,
        dropout: Dropout::new(opts.dropout_p)?,
    };
    let expand_to = |t: &Tensor, rows: usize, cols: usize| -> Result<Tensor> {
        let mut shape = batch.clone();
        shape.extend([rows, cols]);
        let t = if t.shape() == shape.as_slice() {
            t.clone()
        } else {
            t.expand(&shape)?
        };
        // The kernels read rows in place (any batch and row strides); only a strided last
        // dim needs a copy.
        let n = t.dim();
        if cols > 1 && t.layout().strides[n - 1] != 1 {
            t.contiguous()
        } else {
            Ok(t)
        }
    };
    let (q3, k3, v3) = (
        expand_to(q, l, e)?,
        expand_to(&k, s, e)?,
        expand_to(&v, s, ev)?,
    );
    let mask_grad = bias.as_ref().is_some_and(|b| needs_grad(&[b]));
    // Inside vmap the composed path's matmuls and softmax fold the samples into their
    // leading dims.
    let batched = [&q3, &k3, &v3]
        .into_iter()
        .chain(&bias)
        .any(|t| t.is_batched());
    if mask_grad || batched || nb * l * s * e * ev == 0 {
        // Empty problems and a mask that wants its own gradient take the composed path.
        let drop = match &dims.dropout {
            Some(dr) => Some(dropout_tensor(&dims, dr, &batch, q.dtype())?),
            None => None,
        };
        let out = composed_forward(&q3, &k3, &v3, bias.as_ref(), &dims, drop.as_ref())?;
        return out.reshape(&attn_out_shape(&batch, l, ev));
    }
    let saved = Saved {
        dims,
        batch: batch.clone(),
    };
    let (out, lse) = {
        let _g = GradModeGuard::new(false);
        match q.dtype() {
            DType::Float32 => fused_forward::<f32>(&saved, &q3, &k3, &v3, bias.as_ref())?,
            _ => fused_forward::<f64>(&saved, &q3, &k3, &v3, bias.as_ref())?,
        }
    };
    if needs_grad(&[&q3, &k3, &v3]) {
        let bias = bias.map(|b| b.detach());
        record(
            "ScaledDotProductFlashAttentionForCpuBackward0",
            &[&q3, &k3, &v3],
            &[&out],
            &[&q3, &k3, &v3, &out, &lse],
            false,
            move |g, s| {
                let dout = &g[0];
                let d = &saved.dims;
                let grads = if !needs_grad(&[dout, &s[0], &s[1], &s[2]])
                    && dout.dtype() == s[0].dtype()
                {
                    match s[0].dtype() {
                        DType::Float32 => fused_backward::<f32>(&saved, s, bias.as_ref(), dout)?,
                        _ => fused_backward::<f64>(&saved, s, bias.as_ref(), dout)?,
                    }
                } else {
                    let drop = match &d.dropout {
                        Some(dr) => Some(dropout_tensor(d, dr, &saved.batch, s[0].dtype())?),
                        None => None,
                    };
                    composed_backward(&s[0], &s[1], &s[2], bias.as_ref(), d, drop.as_ref(), dout)?
                };
                Ok(grads.into_iter().map(Some).collect())
            },
        )?;
    }
    Ok(out)
}

/// Checks that a mask of shape `mask` broadcasts to the scores' shape `attn` without growing
/// it. torch's math backend works on 4-d scores, so its message counts dimensions as if the
/// shapes were padded to four.
fn mask_broadcasts(attn: &[usize], mask: &[usize]) -> Result<()> {
    let rank = attn.len().max(mask.len()).max(4);
    let at = |s: &[usize], i: usize| (i + s.len()).checked_sub(rank).map_or(1, |j| s[j]);
    for i in (0..rank).rev() {
        let (a, m) = (at(attn, i), at(mask, i));
        if a != m && m != 1 {
            return Err(Error::runtime(if a == 1 {
                format!(
                    "The expanded size of the tensor ({a}) must match the existing size ({m}) at non-singleton dimension {i}.  Target sizes: {:?}.  Tensor sizes: {:?}",
                    attn, mask
                )
            } else {
                format!(
                    "The size of tensor a ({a}) must match the size of tensor b ({m}) at non-singleton dimension {i}"
                )
            }));
        }
    }
    Ok(())
}

fn attn_out_shape(batch: &[usize], l: usize, ev: usize) -> Vec<usize> {
    let mut shape = batch.to_vec();
    shape.extend([l, ev]);
    shape
}
