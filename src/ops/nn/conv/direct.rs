//! A direct float32 kernel for stride-1 convolutions (1 to 3 spatial dims) with few channels,
//! where im2col's column matrix (kernel-size times the input) and the gemm's packing of it cost
//! more than the product: on a 16→32-channel 3x3 layer they were a third of the time. The input
//! is zero-padded once per image ([`PaddedPlanes`]), so every kernel offset is a shift of one
//! plane, and a register-blocked AVX-512 kernel accumulates `P` output channels by `R` vectors
//! of output positions over (input channel, offset), reading the shifted input straight from
//! the padded planes. The gradient in the input runs through here too, as the forward
//! convolution of the flipped weight (`as_forward`).
//!
//! Every output is summed in one fixed order (channel, then offset), so the result is the same
//! at any thread count. CPUs without AVX-512 keep im2col: an AVX2 version of the kernel (4
//! channels by 3 vectors of 8) ran at 45% of that instruction set's peak, well below the gemm.
//! `FERROGRAD_CPU_CAPABILITY=default` keeps im2col on any CPU (as torch's
//! `ATEN_CPU_CAPABILITY` picks a lesser kernel), to test or compare the two.

use super::{dims, for_units, sum_partials, ConvGeometry, Dims3, PaddedPlanes, WEIGHT_CHUNKS};
use crate::error::Result;
use crate::parallel::SendPtr;

/// Output channels per register block.
const P: usize = 4;
/// Vectors of 16 output positions per register block: `P * R` accumulators and `R` input
/// vectors fill 30 of the 32 registers.
const R: usize = 6;
/// Output positions per register block.
const SPAN: usize = 16 * R;

/// Whether the direct kernel runs `geo` here: float32 on an AVX-512 CPU, a stride-1 layer
/// whose padded layout applies, not depthwise (its own kernel) and not pointwise (the input is
/// its own column matrix, so im2col costs nothing), with few enough channels per group that
/// the padded input of one block of positions stays in L1.
pub(super) fn applies(geo: &ConvGeometry) -> Option<PaddedPlanes> {
    let Dims3 { cg, og, kn, .. } = dims(geo);
    let depthwise = geo.groups == geo.in_channels && geo.groups == geo.out_channels;
    if depthwise || kn <= 1 || cg * kn > MAX_REDUCTION || og * cg * kn > MAX_WEIGHT || !has_avx512()
    {
        return None;
    }
    PaddedPlanes::of(geo)
}

/// The largest reduction (`in_channels / groups * kernel size`) run directly: measured faster
/// than im2col up to 256 channels of 3x3 and 64 of 5x5 (the largest tried).
const MAX_REDUCTION: usize = 64 * 64;

/// The largest weight (per group, in floats) run directly: every block of positions reads all
/// of it, so it should stay in the core's L2.
const MAX_WEIGHT: usize = 1 << 17;

fn has_avx512() -> bool {
    static USE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *USE.get_or_init(|| {
        std::env::var("FERROGRAD_CPU_CAPABILITY").as_deref() != Ok("default") && cpu_has_avx512()
    })
}

fn cpu_has_avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The sizes both kernels work with: [`dims`], the reduction `ck = cg · kn`, the output width,
/// positions per output depth slice, and the padded layout's output rows rounded up to whole
/// vectors (`lpr`) with the input buffer (`xlen`) given the same slack after its last volume,
/// so the last block's loads stay inside it.
struct Sizes {
    cg: usize,
    og: usize,
    kn: usize,
    ln: usize,
    plane: usize,
    ck: usize,
    ow: usize,
    per_slice: usize,
    lpr: usize,
    xlen: usize,
}

impl Sizes {
    fn of(geo: &ConvGeometry, pp: &PaddedPlanes) -> Sizes {
        let Dims3 {
            cg,
            og,
            kn,
            ln,
            plane,
        } = dims(geo);
        let lpr = pp.lp.div_ceil(16) * 16;
        Sizes {
            cg,
            og,
            kn,
            ln,
            plane,
            ck: cg * kn,
            ow: geo.output[geo.output.len() - 1],
            per_slice: ln / pp.depth.max(1),
            lpr,
            xlen: cg * pp.pitch + lpr - pp.lp,
        }
    }
}

/// `y = conv(x, w) (+ bias)` for a geometry [`applies`] accepted, shape `(N, out, *output)`.
pub(super) fn forward(
    geo: &ConvGeometry,
    pp: &PaddedPlanes,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
) -> Result<Vec<f32>> {
    let Sizes {
        cg,
        og,
        kn,
        ln,
        plane,
        ck,
        ow,
        per_slice,
        lpr,
        xlen,
    } = Sizes::of(geo, pp);
    let g = geo.groups;
    let total = geo.batch * geo.out_channels * ln;
    let mut y = crate::tensor::creation::try_vec::<f32>(total)?;
    let yp = SendPtr(y.spare_capacity_mut().as_mut_ptr());
    let flops = geo.batch * geo.out_channels * ln * ck;
    for_units::<f32>(geo.batch * g, flops, xlen + og * lpr, &|u, buf| {
        let (n, gi) = (u / g, u % g);
        let (xp, out) = buf.split_at_mut(xlen);
        let xs = &x[(n * geo.in_channels + gi * cg) * plane..][..cg * plane];
        pp.fill(xs, &mut xp[..cg * pp.pitch]);
        xp[cg * pp.pitch..].fill(0.0);
        let wg = &w[gi * og * ck..][..og * ck];
        let out = &mut out[..og * lpr];
        for z in 0..pp.depth {
            products(pp, z * pp.slice, (cg, kn, og, lpr), xp, wg, out);
            for o in 0..og {
                let b = bias.map_or(0.0, |b| b[gi * og + o]);
                let src = &out[o * lpr..][..pp.lp];
                // SAFETY: unit (n, gi) alone writes channels gi*og..(gi+1)*og of image n.
                let dst = unsafe {
                    std::slice::from_raw_parts_mut(
                        yp.get()
                            .add((n * geo.out_channels + gi * og + o) * ln + z * per_slice),
                        per_slice,
                    )
                };
                for (drow, srow) in dst.chunks_exact_mut(ow.max(1)).zip(src.chunks(pp.wp)) {
                    for (d, &v) in drow.iter_mut().zip(srow) {
                        d.write(v + b);
                    }
                }
            }
        }
    })?;
    // SAFETY: every slice of every plane of `y` was written whole above.
    unsafe { y.set_len(total) };
    Ok(y)
}

/// Reduction items (input channel, kernel offset) per register block of the weight gradient.
const J: usize = 6;

/// The weight gradient of a geometry [`applies`] accepted: `gw[o][c][k] = Σ_n Σ_l g[n][o][l] ·
/// xp[n][c][l + shift_k]`, with `g` laid out at the padded width (zeros in the unused columns).
/// Blocks of [`P`] output channels by [`J`] items accumulate 16 lanes of positions each;
/// the lanes are kept per chunk of images ([`WEIGHT_CHUNKS`], a fixed split) and summed once
/// at its end, and the chunks are added in order, so the result is the same at any thread
/// count. Channels and items are padded to whole blocks (zero gradient rows, and items reading
/// the first plane), so one kernel shape serves every layer.
pub(super) fn grad_weight(
    geo: &ConvGeometry,
    pp: &PaddedPlanes,
    gy: &[f32],
    x: &[f32],
) -> Result<Vec<f32>> {
    let Sizes {
        cg,
        og,
        kn,
        ln,
        plane,
        ck,
        ow,
        per_slice,
        lpr,
        xlen,
    } = Sizes::of(geo, pp);
    let g = geo.groups;
    let (og4, ck6) = (og.div_ceil(P) * P, ck.div_ceil(J) * J);
    // Per item, its input's offset: plane c shifted by offset k (padding items read plane 0).
    let offs: Vec<usize> = (0..ck6)
        .map(|j| {
            if j < ck {
                (j / kn) * pp.pitch + pp.shifts[j % kn]
            } else {
                0
            }
        })
        .collect();
    let wn = geo.out_channels * ck;
    let lanes = g * og4 * ck6 * 16;
    let flops = geo.batch * geo.out_channels * ln * ck;
    // Each chunk ends by summing its lanes (scalar adds): fewer chunks where that would rival
    // the products (a transposed 4x4 layer on 16x16 images: a third of the weight gradient's
    // time at 8), at least two and a power of two so two (or four) threads share the work
    // evenly. A function of the shape, so the result is the same at any thread count.
    let most = (flops / (64 * lanes).max(1)).max(2);
    let chunks = geo.batch.clamp(1, WEIGHT_CHUNKS).min(1 << most.ilog2());
    let mut partial = crate::tensor::creation::try_filled_vec(chunks * wn, 0.0f32)?;
    let pptr = SendPtr(partial.as_mut_ptr());
    for_units::<f32>(chunks, flops, xlen + og4 * lpr + lanes, &|c, buf| {
        let (xp, rest) = buf.split_at_mut(xlen);
        let (gp, acc) = rest.split_at_mut(og4 * lpr);
        let acc = &mut acc[..lanes];
        acc.fill(0.0);
        // Unused columns, the tail and the padding rows of gp stay zero; images rewrite the
        // rest.
        gp.fill(0.0);
        xp[cg * pp.pitch..].fill(0.0);
        for n in c * geo.batch / chunks..(c + 1) * geo.batch / chunks {
            for gi in 0..g {
                let xs = &x[(n * geo.in_channels + gi * cg) * plane..][..cg * plane];
                pp.fill(xs, &mut xp[..cg * pp.pitch]);
                let acc_g = &mut acc[gi * og4 * ck6 * 16..][..og4 * ck6 * 16];
                for z in 0..pp.depth {
                    for (o, row) in gp.chunks_mut(lpr).take(og).enumerate() {
                        let src = &gy[(n * geo.out_channels + gi * og + o) * ln + z * per_slice..]
                            [..per_slice];
                        for (srow, drow) in src
                            .chunks_exact(ow.max(1))
                            .zip(row[..pp.lp].chunks_mut(pp.wp))
                        {
                            drow[..ow].copy_from_slice(srow);
                        }
                    }
                    for o0 in (0..og4).step_by(P) {
                        for j0 in (0..ck6).step_by(J) {
                            // SAFETY: `applies` checked for AVX-512; rows o0..o0+P of gp and
                            // items j0..j0+J lie inside their buffers; an item reads from
                            // z·slice + its offset for lpr elements, at most xlen (see
                            // `products`); the lanes of block (o0, j0) lie inside acc_g.
                            unsafe {
                                weight_block(
                                    gp.as_ptr().add(o0 * lpr),
                                    lpr,
                                    xp.as_ptr().add(z * pp.slice),
                                    &offs[j0..j0 + J],
                                    acc_g.as_mut_ptr().add((o0 * ck6 + j0) * 16),
                                    ck6 * 16,
                                );
                            }
                        }
                    }
                }
            }
        }
        // SAFETY: chunk c alone writes partial result c.
        let out = unsafe { std::slice::from_raw_parts_mut(pptr.get().add(c * wn), wn) };
        for gi in 0..g {
            for o in 0..og {
                for j in 0..ck {
                    let l = &acc[((gi * og4 + o) * ck6 + j) * 16..][..16];
                    out[(gi * og + o) * ck + j] = l.iter().sum();
                }
            }
        }
    })?;
    sum_partials(&mut partial, wn);
    partial.truncate(wn);
    Ok(partial)
}

/// `acc[p][j] += Σ_l g[p][l] · xp[offs[j] + l]` in 16 lanes, for [`P`] gradient rows (`ld`
/// apart, `len` long, a multiple of 16) by [`J`] items; `acc` rows are `acc_ld` apart.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn weight_block(
    g: *const f32,
    len: usize,
    xp: *const f32,
    offs: &[usize],
    acc: *mut f32,
    acc_ld: usize,
) {
    use std::arch::x86_64::*;
    let mut s = [[_mm512_setzero_ps(); J]; P];
    let xs: [*const f32; J] = std::array::from_fn(|j| xp.add(offs[j]));
    for l in (0..len).step_by(16) {
        let mut xv = [_mm512_setzero_ps(); J];
        for (j, v) in xv.iter_mut().enumerate() {
            *v = _mm512_loadu_ps(xs[j].add(l));
        }
        for (p, row) in s.iter_mut().enumerate() {
            let gv = _mm512_loadu_ps(g.add(p * len + l));
            for (j, a) in row.iter_mut().enumerate() {
                *a = _mm512_fmadd_ps(gv, xv[j], *a);
            }
        }
    }
    for (p, row) in s.iter().enumerate() {
        for (j, v) in row.iter().enumerate() {
            let dst = acc.add(p * acc_ld + 16 * j);
            _mm512_storeu_ps(dst, _mm512_add_ps(_mm512_loadu_ps(dst), *v));
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn weight_block(
    _g: *const f32,
    _len: usize,
    _xp: *const f32,
    _offs: &[usize],
    _acc: *mut f32,
    _acc_ld: usize,
) {
    unreachable!("the direct kernel runs only where `applies` found AVX-512")
}

/// `out[o][l] = Σ_c Σ_k w[o][c][k] · xp[c][base + l + shift_k]` for `o < og`, `l < lpr`
/// (`base`: the output depth slice's start): the output channels in blocks of [`P`] (then one
/// smaller block), the positions in blocks of [`SPAN`] (then one of fewer vectors).
fn products(
    pp: &PaddedPlanes,
    base: usize,
    (cg, kn, og, lpr): (usize, usize, usize, usize),
    xp: &[f32],
    w: &[f32],
    out: &mut [f32],
) {
    let ck = cg * kn;
    // The largest base plus shift is pitch - lp (the last depth slice, the last offset), so
    // the loads below end before cg·pitch + lpr - lp.
    debug_assert!(xp.len() >= cg * pp.pitch + lpr - pp.lp);
    debug_assert!(w.len() >= og * ck && out.len() >= og * lpr);
    for l0 in (0..lpr).step_by(SPAN) {
        let vectors = ((lpr - l0) / 16).min(R);
        let mut o0 = 0;
        while o0 < og {
            let p = (og - o0).min(P);
            // SAFETY: `applies` checked for AVX-512. Loads read xp[c·pitch + base + shift +
            // l0 .. + 16·vectors], inside `xp` (above); weights w[(o0+p)·ck + c·kn + k] and
            // outputs out[(o0+p)·lpr + l0 .. + 16·vectors] lie inside their slices.
            unsafe {
                let args = Block {
                    xp: xp.as_ptr().add(base + l0),
                    pitch: pp.pitch,
                    shifts: &pp.shifts,
                    cg,
                    w: w.as_ptr().add(o0 * ck),
                    ck,
                    kn,
                    out: out.as_mut_ptr().add(o0 * lpr + l0),
                    ld: lpr,
                };
                // Every (channels, vectors) shape is its own kernel, so the accumulators stay in
                // registers.
                macro_rules! by_vectors {
                    ($np:literal) => {
                        match vectors {
                            6 => block::<$np, 6>(&args),
                            5 => block::<$np, 5>(&args),
                            4 => block::<$np, 4>(&args),
                            3 => block::<$np, 3>(&args),
                            2 => block::<$np, 2>(&args),
                            _ => block::<$np, 1>(&args),
                        }
                    };
                }
                match p {
                    4 => by_vectors!(4),
                    3 => by_vectors!(3),
                    2 => by_vectors!(2),
                    _ => by_vectors!(1),
                }
            }
            o0 += p;
        }
    }
}

/// One register block's operands: `NP` output channels (weights `ck` apart, outputs `ld`
/// apart) by `NR` vectors of 16 positions.
struct Block<'a> {
    xp: *const f32,
    pitch: usize,
    shifts: &'a [usize],
    cg: usize,
    w: *const f32,
    ck: usize,
    kn: usize,
    out: *mut f32,
    ld: usize,
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn block<const NP: usize, const NR: usize>(a: &Block<'_>) {
    use std::arch::x86_64::*;
    let mut acc = [[_mm512_setzero_ps(); NR]; NP];
    for c in 0..a.cg {
        let xc = a.xp.add(c * a.pitch);
        let wc = a.w.add(c * a.kn);
        for (k, &shift) in a.shifts.iter().enumerate() {
            let xs = xc.add(shift);
            let mut xv = [_mm512_setzero_ps(); NR];
            for (r, v) in xv.iter_mut().enumerate() {
                *v = _mm512_loadu_ps(xs.add(16 * r));
            }
            for (p, row) in acc.iter_mut().enumerate() {
                let wv = _mm512_set1_ps(*wc.add(p * a.ck + k));
                for (r, s) in row.iter_mut().enumerate() {
                    *s = _mm512_fmadd_ps(wv, xv[r], *s);
                }
            }
        }
    }
    for (p, row) in acc.iter().enumerate() {
        for (r, s) in row.iter().enumerate() {
            _mm512_storeu_ps(a.out.add(p * a.ld + 16 * r), *s);
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn block<const NP: usize, const NR: usize>(_a: &Block<'_>) {
    unreachable!("the direct kernel runs only where `applies` found AVX-512")
}
