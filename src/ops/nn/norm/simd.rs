//! The float32 span sums and the fused layer-norm row backward in explicit AVX-512.
//!
//! The generic lane loops (`lane_sum`) fold their 32 lanes through memory after every block,
//! which on 512-element rows cost about as much as the sums themselves (stores of whole vectors
//! read back as scalars stall). Here the partial sums stay in registers: float32 lanes for up to
//! [`BLOCK`] elements, widened and added into f64 lanes between blocks (as `lane_sum` adds its
//! blocks in f64), one fixed-order reduction per span. A partial last vector is read under a
//! mask, so any length runs on vectors. Every order depends on the span alone, never on threads.

use std::arch::x86_64::*;

/// Elements summed in float32 lanes before they join the f64 lanes (`SUM_BLOCK`'s length).
const BLOCK: usize = 256;

/// Whether the CPU runs AVX-512F (std caches the detection).
#[inline]
pub(super) fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
}

/// Mask of the first `n` (< 16) lanes.
#[inline(always)]
fn head(n: usize) -> __mmask16 {
    ((1u32 << n) - 1) as __mmask16
}

/// Adds the 16 float32 lanes of `v` into 16 f64 lanes.
#[inline(always)]
unsafe fn widen_add(acc: &mut [__m512d; 2], v: __m512) {
    // SAFETY: register-only intrinsics; the caller runs with AVX-512F.
    unsafe {
        let lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
        let hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(
            _mm512_castps_pd(v),
        )));
        acc[0] = _mm512_add_pd(acc[0], lo);
        acc[1] = _mm512_add_pd(acc[1], hi);
    }
}

/// The f64 lanes summed in a fixed order.
#[inline(always)]
unsafe fn total(acc: [__m512d; 2]) -> f64 {
    // SAFETY: register-only intrinsics; the caller runs with AVX-512F.
    unsafe { _mm512_reduce_add_pd(_mm512_add_pd(acc[0], acc[1])) }
}

/// Σ f(x) over `xs` for a vector map `f` with f(0) not necessarily 0 (masked lanes are
/// dropped): two float32 accumulators per block, the blocks widened into f64 lanes.
macro_rules! span_reduce {
    ($xs:expr, |$v:ident| $f:expr) => {{
        let xs: &[f32] = $xs;
        let (n, p) = (xs.len(), xs.as_ptr());
        let mut acc = [_mm512_setzero_pd(); 2];
        let mut i = 0;
        while i < n {
            let end = (i + BLOCK).min(n);
            let (mut a0, mut a1) = (_mm512_setzero_ps(), _mm512_setzero_ps());
            while i + 32 <= end {
                let $v = _mm512_loadu_ps(p.add(i));
                a0 = _mm512_add_ps(a0, $f);
                let $v = _mm512_loadu_ps(p.add(i + 16));
                a1 = _mm512_add_ps(a1, $f);
                i += 32;
            }
            if i + 16 <= end {
                let $v = _mm512_loadu_ps(p.add(i));
                a0 = _mm512_add_ps(a0, $f);
                i += 16;
            }
            if i < end {
                let k = head(end - i);
                let $v = _mm512_maskz_loadu_ps(k, p.add(i));
                a1 = _mm512_add_ps(a1, _mm512_maskz_mov_ps(k, $f));
                i = end;
            }
            widen_add(&mut acc, _mm512_add_ps(a0, a1));
        }
        total(acc)
    }};
}

/// Σ x.
///
/// # Safety
/// AVX-512F must be available ([`available`]).
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn sum(xs: &[f32]) -> f64 {
    // SAFETY: every load lies inside `xs` (the last under a mask).
    unsafe { span_reduce!(xs, |v| v) }
}

/// Σ (x - m)², centred in float32 (the second pass of the two-pass variance).
///
/// # Safety
/// As [`sum`].
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn sumsq(xs: &[f32], m: f32) -> f64 {
    // SAFETY: as in `sum`.
    unsafe {
        let mv = _mm512_set1_ps(m);
        span_reduce!(xs, |v| {
            let d = _mm512_sub_ps(v, mv);
            _mm512_mul_ps(d, d)
        })
    }
}

/// (Σ g, Σ g (x - m)) over zipped `g`, `x` (the shorter length).
///
/// # Safety
/// As [`sum`].
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn sums_gx(g: &[f32], x: &[f32], m: f32) -> (f64, f64) {
    let n = g.len().min(x.len());
    let (gp, xp) = (g.as_ptr(), x.as_ptr());
    // SAFETY: every load lies inside the first `n` elements of `g` and `x`.
    unsafe {
        let mv = _mm512_set1_ps(m);
        let (mut t1, mut t2) = ([_mm512_setzero_pd(); 2], [_mm512_setzero_pd(); 2]);
        let mut i = 0;
        while i < n {
            let end = (i + BLOCK).min(n);
            let (mut s1, mut s2) = (_mm512_setzero_ps(), _mm512_setzero_ps());
            let (mut u1, mut u2) = (_mm512_setzero_ps(), _mm512_setzero_ps());
            while i + 32 <= end {
                let (gv, xv) = (_mm512_loadu_ps(gp.add(i)), _mm512_loadu_ps(xp.add(i)));
                s1 = _mm512_add_ps(s1, gv);
                s2 = _mm512_add_ps(s2, _mm512_mul_ps(gv, _mm512_sub_ps(xv, mv)));
                let (gv, xv) = (
                    _mm512_loadu_ps(gp.add(i + 16)),
                    _mm512_loadu_ps(xp.add(i + 16)),
                );
                u1 = _mm512_add_ps(u1, gv);
                u2 = _mm512_add_ps(u2, _mm512_mul_ps(gv, _mm512_sub_ps(xv, mv)));
                i += 32;
            }
            while i < end {
                let k = if end - i >= 16 { 0xffff } else { head(end - i) };
                let gv = _mm512_maskz_loadu_ps(k, gp.add(i));
                let xv = _mm512_maskz_loadu_ps(k, xp.add(i));
                // Masked lanes have g = 0, so both terms vanish there.
                s1 = _mm512_add_ps(s1, gv);
                s2 = _mm512_add_ps(s2, _mm512_mul_ps(gv, _mm512_sub_ps(xv, mv)));
                i = (i + 16).min(end);
            }
            widen_add(&mut t1, _mm512_add_ps(s1, u1));
            widen_add(&mut t2, _mm512_add_ps(s2, u2));
        }
        (total(t1), total(t2))
    }
}

/// One row of the layer/RMS-norm backward (see `row_grad` in the parent, the generic form).
pub(super) struct Row<'a> {
    pub x: &'a [f32],
    pub g: &'a [f32],
    pub w: Option<&'a [f32]>,
    pub mean: f32,
    pub rstd: f32,
    pub center: bool,
}

/// The fused row backward: one pass reads `x` and `g` (the only pass that reaches beyond L1)
/// and adds `g x̂`, `g` to the weight and bias partial sums `part`, stores `g w` into the
/// scratch `gw` and sums `g w` and `g w (x - m)`; a second pass writes
/// `dx = rstd (g w - mean(g w) - (x - m) rstd² mean(g w (x - m)))` into `out`.
///
/// # Safety
/// As [`sum`]; `part`'s slices, `out` and `gw` at least as long as the row.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn row_grad(
    row: &Row<'_>,
    part: Option<(&mut [f32], &mut [f32])>,
    out: Option<&mut [f32]>,
    gw: &mut [f32],
) {
    let n = row.x.len().min(row.g.len());
    let (xp, gp) = (row.x.as_ptr(), row.g.as_ptr());
    let wp = row.w.map(|w| w.as_ptr());
    let (pw, pb) = match part {
        Some((a, b)) => (a.as_mut_ptr(), b.as_mut_ptr()),
        None => (std::ptr::null_mut(), std::ptr::null_mut()),
    };
    let want_part = !pw.is_null();
    let gwp = gw.as_mut_ptr();
    // Whole vectors load and store plainly: after a masked store, Zen 4 held back the next
    // loads (the backward ran at half speed); only the last partial vector takes masks.
    macro_rules! ld {
        (full, $k:expr, $p:expr) => {
            _mm512_loadu_ps($p)
        };
        (tail, $k:expr, $p:expr) => {
            _mm512_maskz_loadu_ps($k, $p)
        };
    }
    macro_rules! st {
        (full, $k:expr, $p:expr, $v:expr) => {
            _mm512_storeu_ps($p, $v)
        };
        (tail, $k:expr, $p:expr, $v:expr) => {
            _mm512_mask_storeu_ps($p, $k, $v)
        };
    }
    // SAFETY (whole body): each access is at an index below `n` (the last vector under a
    // mask), inside every slice by the caller's contract.
    unsafe {
        let (mv, rv) = (_mm512_set1_ps(row.mean), _mm512_set1_ps(row.rstd));
        let want_out = out.is_some();
        let (mut t1, mut t2) = ([_mm512_setzero_pd(); 2], [_mm512_setzero_pd(); 2]);
        let (mut s1, mut s2) = (_mm512_setzero_ps(), _mm512_setzero_ps());
        // Pass 1 at vector `i` (mask `k` for the tail): masked lanes have g = 0, so both sums
        // skip them.
        macro_rules! pass1 {
            ($mode:tt, $i:expr, $k:expr) => {{
                let i = $i;
                let gv = ld!($mode, $k, gp.add(i));
                let xc = _mm512_sub_ps(ld!($mode, $k, xp.add(i)), mv);
                if want_part {
                    let xh = _mm512_mul_ps(xc, rv);
                    let a = _mm512_add_ps(ld!($mode, $k, pw.add(i)), _mm512_mul_ps(gv, xh));
                    st!($mode, $k, pw.add(i), a);
                    let b = _mm512_add_ps(ld!($mode, $k, pb.add(i)), gv);
                    st!($mode, $k, pb.add(i), b);
                }
                if want_out {
                    let gwv = match wp {
                        Some(w) => {
                            let v = _mm512_mul_ps(gv, ld!($mode, $k, w.add(i)));
                            st!($mode, $k, gwp.add(i), v);
                            v
                        }
                        None => gv,
                    };
                    s1 = _mm512_add_ps(s1, gwv);
                    s2 = _mm512_add_ps(s2, _mm512_mul_ps(gwv, xc));
                }
            }};
        }
        let mut i = 0;
        while i < n {
            let end = (i + BLOCK).min(n);
            while i + 16 <= end {
                pass1!(full, i, 0xffff);
                i += 16;
            }
            if i < end {
                pass1!(tail, i, head(end - i));
                i = end;
            }
            widen_add(&mut t1, s1);
            widen_add(&mut t2, s2);
            (s1, s2) = (_mm512_setzero_ps(), _mm512_setzero_ps());
        }
        let Some(out) = out else { return };
        let op = out.as_mut_ptr();
        let src = if wp.is_some() { gwp as *const f32 } else { gp };
        let nf = n as f64;
        let rf = row.rstd as f64;
        let s1 = if row.center { total(t1) } else { 0.0 };
        let c1 = _mm512_set1_ps((s1 / nf) as f32);
        let kv = _mm512_set1_ps((rf * rf * total(t2) / nf) as f32);
        macro_rules! pass2 {
            ($mode:tt, $i:expr, $k:expr) => {{
                let i = $i;
                let gwv = ld!($mode, $k, src.add(i));
                let xc = _mm512_sub_ps(ld!($mode, $k, xp.add(i)), mv);
                let d = _mm512_sub_ps(_mm512_sub_ps(gwv, c1), _mm512_mul_ps(xc, kv));
                st!($mode, $k, op.add(i), _mm512_mul_ps(rv, d));
            }};
        }
        let mut i = 0;
        while i + 16 <= n {
            pass2!(full, i, 0xffff);
            i += 16;
        }
        if i < n {
            pass2!(tail, i, head(n - i));
        }
    }
}
