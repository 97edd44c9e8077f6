//! Vectorised float32 math: exp, log, sin, cos, tanh, sigmoid and erf over slices.
//!
//! tanh on AVX-512 CPUs reads a polynomial per interval from register tables
//! (`vmath_avx512.rs` beside this file).
//!
//! log, sin, cos, tanh (on other CPUs) and erf widen each lane to f64 and evaluate it
//! branch-free (polynomials, bit tricks, selects), so the loops autovectorise and the f64
//! headroom keeps every result within about one ulp of the correctly rounded float32 value
//! without float32 error analysis. Lanes the fast path cannot reduce (sin/cos beyond 2^28·π/2, inf, NaN; log of non-positive, inf,
//! NaN) are recomputed with std's scalar functions, chunk by chunk, so the common case pays only
//! a vectorised range check.
//!
//! exp, sigmoid, gelu, silu, softplus, logsigmoid, the elu family and their gradients (for the
//! activation kernels) and the softmax rows' e^y run on float32 lanes instead (twice the lanes
//! per vector), with error terms carried in extra floats where a rounding would cost an ulp (see
//! those sections).
//!
//! Each kernel is compiled for AVX-512, AVX2+FMA and the baseline target by `multiversion`,
//! which picks one at first call from the running CPU (a wheel cannot assume AVX2).

// Polynomial and reduction constants are quoted with the digits fdlibm and musl publish, so
// they can be checked against those sources; they round to the same doubles.
#![allow(clippy::excessive_precision)]

use std::mem::MaybeUninit;

use multiversion::multiversion;

/// A float32 function with a vectorised kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnaryF32 {
    /// e^x
    Exp,
    /// Natural logarithm.
    Log,
    /// Sine.
    Sin,
    /// Cosine.
    Cos,
    /// Hyperbolic tangent.
    Tanh,
    /// Logistic sigmoid 1 / (1 + e^-x).
    Sigmoid,
    /// The error function.
    Erf,
}

impl UnaryF32 {
    /// Every function, for tests and benches.
    pub const ALL: [UnaryF32; 7] = [
        UnaryF32::Exp,
        UnaryF32::Log,
        UnaryF32::Sin,
        UnaryF32::Cos,
        UnaryF32::Tanh,
        UnaryF32::Sigmoid,
        UnaryF32::Erf,
    ];

    /// `out[i] = f(x[i])`; `out` must be as long as `x` (the shorter length is used otherwise).
    pub fn apply(self, x: &[f32], out: &mut [f32]) {
        let n = x.len().min(out.len());
        // SAFETY: `MaybeUninit<f32>` has the layout of `f32`, and every slot is written.
        let out = unsafe { &mut *(&mut out[..n] as *mut [f32] as *mut [MaybeUninit<f32>]) };
        self.apply_uninit(&x[..n], out);
    }

    /// `out[i] = f(x[i])`, writing every element of `out` (which must be as long as `x`).
    pub(crate) fn apply_uninit(self, x: &[f32], out: &mut [MaybeUninit<f32>]) {
        assert_eq!(x.len(), out.len(), "vmath: input and output lengths differ");
        match self {
            UnaryF32::Exp => exp_slice(x, out),
            UnaryF32::Log => log_slice(x, out),
            UnaryF32::Sin => sin_slice(x, out),
            UnaryF32::Cos => cos_slice(x, out),
            UnaryF32::Tanh => tanh_any(x, out),
            UnaryF32::Sigmoid => sigmoid_slice(x, out),
            UnaryF32::Erf => erf_slice(x, out),
        }
    }

    /// The scalar f64 formula of this function (the float64 kernel and the tests' reference).
    pub fn f64(self, x: f64) -> f64 {
        match self {
            UnaryF32::Exp => x.exp(),
            UnaryF32::Log => x.ln(),
            UnaryF32::Sin => x.sin(),
            UnaryF32::Cos => x.cos(),
            UnaryF32::Tanh => x.tanh(),
            UnaryF32::Sigmoid => sigmoid_scalar(x),
            UnaryF32::Erf => libm::erf(x),
        }
    }
}

/// 1 / (1 + e^-x) without overflow on either side.
pub(crate) fn sigmoid_scalar<F: num_traits::Float>(x: F) -> F {
    if x >= F::zero() {
        F::one() / (F::one() + (-x).exp())
    } else {
        x.exp() / (F::one() + x.exp())
    }
}

// ----- lane formulas (f64 inside, branch-free) -------------------------------------------------

/// `a * b + c`, fused when the target has FMA (a library call otherwise, so not then).
#[inline(always)]
pub(crate) fn fma<const F: bool>(a: f64, b: f64, c: f64) -> f64 {
    if F {
        a.mul_add(b, c)
    } else {
        a * b + c
    }
}

/// 1.5·2^52: adding it rounds a double below 2^51 in magnitude to an integer, which then sits
/// in the low mantissa bits (no float-to-int conversion, which AVX2 lacks for 64-bit lanes).
const ROUND_MAGIC: f64 = 6_755_399_441_055_744.0;
const LOG2_E: f64 = std::f64::consts::LOG2_E;
/// ln 2 split so `n * LN2_HI` is exact for |n| < 2^20 (fdlibm's constants).
const LN2_HI: f64 = 6.931_471_803_691_238_164_90e-01;
const LN2_LO: f64 = 1.908_214_929_270_587_700_02e-10;

/// 1/k! for k = 13 down to 0: the Taylor coefficients of e^r in Horner order (e^r - 1 takes
/// all but the last, divided by r).
pub(crate) const INV_FACTORIALS: [f64; 14] = [
    1.0 / 6_227_020_800.0,
    1.0 / 479_001_600.0,
    1.0 / 39_916_800.0,
    1.0 / 3_628_800.0,
    1.0 / 362_880.0,
    1.0 / 40_320.0,
    1.0 / 5_040.0,
    1.0 / 720.0,
    1.0 / 120.0,
    1.0 / 24.0,
    1.0 / 6.0,
    0.5,
    1.0,
    1.0,
];

/// 1/k! for k = 11 down to 0.
const EXP_TAYLOR: &[f64] = INV_FACTORIALS.split_at(2).1;

/// e^x for |x| <= 700 (callers clamp), relative error below 2^-27 (`HI`: below 2^-46, for
/// tanh's cancellation near 0). NaN propagates.
#[inline(always)]
pub(crate) fn exp_f64<const F: bool, const HI: bool>(x: f64) -> f64 {
    let t = fma::<F>(x, LOG2_E, ROUND_MAGIC);
    let n = t - ROUND_MAGIC;
    let r = fma::<F>(n, -LN2_HI, x);
    let r = fma::<F>(n, -LN2_LO, r);
    // Taylor series on |r| <= ln2/2, to r^11 (HI) or r^7: the first omitted term bounds the
    // error.
    let terms: &[f64] = if HI { EXP_TAYLOR } else { &EXP_TAYLOR[4..] };
    let mut p = terms[0];
    for &c in &terms[1..] {
        p = fma::<F>(p, r, c);
    }
    // 2^n from the integer in t's low bits: shifted into the exponent field.
    let scale = f64::from_bits(t.to_bits().wrapping_add(1023) << 52);
    p * scale
}

const SIGN: u64 = 1 << 63;

/// erfc(z)·e^(z²) for z in [0, 10] as a polynomial in s, the affine image on [-1, 1] of
/// t = 1 / (1 + z/2) (so the slow 1/(z√π) tail becomes smooth): a degree-12 Chebyshev
/// least-squares fit (relative weights) against 40-digit mpmath, converted to monomials, highest
/// power first. Relative error below 3e-10 on [0, 10].
const ERFCX_POLY: [f64; 13] = [
    -9.779176172914838e-07,
    8.732563726897091e-07,
    8.414351137773573e-06,
    -2.010773793292886e-05,
    -3.9010200031477175e-05,
    0.00024772923060611957,
    9.05702861900075e-05,
    -0.002924261075150543,
    -0.0011055762749856177,
    0.045990476233166114,
    0.1954434234502811,
    0.4286347935781614,
    0.33367365252961634,
];
/// t at z = 10, the lower end of the fit's range.
const ERFCX_TMIN: f64 = 1.0 / 6.0;

/// erfc(z) for z >= 0 (NaN propagates), relative error below 1e-8: e^(-z²) times the fitted
/// scaled complement. Beyond z = 10 erfc is below float32's smallest denormal times 1e-2, so the
/// fit is held at 10 while e^(-z²) keeps falling.
#[inline(always)]
pub(crate) fn erfc_pos<const F: bool>(z: f64) -> f64 {
    // Written so that NaN passes through both holds.
    let zc = if z > 10.0 { 10.0 } else { z };
    let t = 1.0 / (1.0 + 0.5 * zc);
    // Times the constant's reciprocal: a second division per lane cost a fifth of erf's time
    // on Intel cores (their 512-bit f64 division is slow); the fit is good to 3e-10 either way.
    let s = (2.0 * t - (1.0 + ERFCX_TMIN)) * (1.0 / (1.0 - ERFCX_TMIN));
    let mut p = ERFCX_POLY[0];
    for &c in &ERFCX_POLY[1..] {
        p = fma::<F>(p, s, c);
    }
    let zz = if z > 26.0 { 26.0 } else { z };
    p * exp_f64::<F, false>(-zz * zz)
}

/// erf's Maclaurin coefficients 2/√π (-1)^n / (n! (2n + 1)) for n = 8 down to 0, in x².
const ERF_TAYLOR: [f64; 9] = [
    1.6462114365889246e-06,
    -1.492565035840625e-05,
    0.00012055332981789664,
    -0.0008548327023450852,
    0.005223977625442188,
    -0.026866170645131252,
    0.11283791670955126,
    -0.37612638903183754,
    std::f64::consts::FRAC_2_SQRT_PI,
];

#[inline(always)]
fn erf_lane<const F: bool>(x: f32) -> f32 {
    let xd = x as f64;
    let a = f64::from_bits(xd.to_bits() & !SIGN);
    // Below 1/2 the series (next term under 3e-13); above, 1 - erfc has no cancellation.
    let z = a * a;
    let mut p = ERF_TAYLOR[0];
    for &c in &ERF_TAYLOR[1..] {
        p = fma::<F>(p, z, c);
    }
    let small = a * p;
    let big = 1.0 - erfc_pos::<F>(a);
    let v = if a < 0.5 { small } else { big };
    (f64::from_bits(v.to_bits() | (xd.to_bits() & SIGN))) as f32
}

#[inline(always)]
fn tanh_lane<const F: bool>(x: f32) -> f32 {
    let xd = x as f64;
    let a = f64::from_bits(xd.to_bits() & !SIGN);
    // tanh(10) rounds to 1 in float32.
    let c = if a > 10.0 { 10.0 } else { a };
    let e = exp_f64::<F, true>(2.0 * c);
    let t = 1.0 - 2.0 / (e + 1.0);
    // Below 2^-12, tanh(x) = x(1 - x²/3) rounds to x (this also keeps -0 and denormals).
    let t = if a < 1.0 / 4096.0 { a } else { t };
    (f64::from_bits(t.to_bits() | (xd.to_bits() & SIGN))) as f32
}

const LN2: f64 = std::f64::consts::LN_2;

/// Valid for finite x > 0 (others take the scalar path).
#[inline(always)]
fn log_lane<const F: bool>(x: f32) -> f32 {
    log_f64::<F>(x as f64) as f32
}

/// ln x for a normal double x > 0, to about 2^-34 relative (enough for a float32 result).
#[inline(always)]
fn log_f64<const F: bool>(xd: f64) -> f64 {
    let bits = xd.to_bits();
    // x = 2^e · m with m in [sqrt(1/2), sqrt(2)); float32 denormals are normal doubles.
    let m = f64::from_bits((bits & ((1 << 52) - 1)) | (1023 << 52));
    let biased = f64::from_bits(0x4330_0000_0000_0000 | (bits >> 52)) - 4_503_599_627_370_496.0;
    let big = m > std::f64::consts::SQRT_2;
    let m = if big { m * 0.5 } else { m };
    let e = biased - if big { 1022.0 } else { 1023.0 };
    // log(1 + f) = 2 atanh(s), s = f / (2 + f), |s| <= 0.172: series in s² to 2^-34.
    let f = m - 1.0;
    let s = f / (2.0 + f);
    let z = s * s;
    let mut p = 2.0 / 11.0;
    for c in [2.0 / 9.0, 2.0 / 7.0, 2.0 / 5.0, 2.0 / 3.0, 2.0] {
        p = fma::<F>(p, z, c);
    }
    fma::<F>(e, LN2, s * p)
}

#[inline(always)]
fn log_ok(x: f32) -> bool {
    // Positive, finite (NaN has a larger bit pattern than inf; negatives have the sign bit).
    x.to_bits().wrapping_sub(1) < 0x7f7f_ffff
}

const INV_PIO2: f64 = std::f64::consts::FRAC_2_PI;
/// π/2 in two parts: the first has 25 bits, so `n * PIO2_1` is exact for n < 2^28 (musl).
const PIO2_1: f64 = 1.570_796_310_901_641_845_70e+00;
const PIO2_1T: f64 = 1.589_325_477_352_819_669_16e-08;

/// sin(x) (`COS` false) or cos(x) for |x| < 2^28·π/2; NaN/inf/huge lanes are replaced by the
/// scalar path.
#[inline(always)]
fn sincos_lane<const F: bool, const COS: bool>(x: f32) -> f32 {
    let xd = x as f64;
    let t = fma::<F>(xd, INV_PIO2, ROUND_MAGIC);
    let n = t - ROUND_MAGIC;
    let y = fma::<F>(n, -PIO2_1, xd);
    let y = fma::<F>(n, -PIO2_1T, y);
    // Quadrant: cos(x) = sin(x + π/2).
    let q = t.to_bits().wrapping_add(COS as u64);
    let z = y * y;
    let w = z * z;
    // musl's __sindf and __cosdf: |error| < 2^-37 on |y| <= π/4.
    let s = {
        let r = fma::<F>(
            z,
            2.718_311_493_989_821_906_4e-6,
            -1.983_933_483_609_663_173_47e-4,
        );
        let u = fma::<F>(
            z,
            8.333_329_385_889_463_175_6e-3,
            -1.666_666_664_162_652_355_95e-1,
        );
        let zy = z * y;
        (y + zy * u) + zy * w * r
    };
    let c = {
        let r = fma::<F>(
            z,
            2.439_044_879_627_740_906_54e-5,
            -1.388_676_377_460_992_946_92e-3,
        );
        ((1.0 + z * -4.999_999_972_510_310_031_20e-1) + w * 4.166_662_332_373_906_318_94e-2)
            + (w * z) * r
    };
    let v = if q & 1 == 0 { s } else { c };
    let v = f64::from_bits(v.to_bits() ^ ((q & 2) << 62));
    if !COS && (x.to_bits() & 0x7fff_ffff) < 0x3980_0000 {
        // |x| < 2^-12: sin x rounds to x (keeps -0, which the polynomial would lose).
        return x;
    }
    v as f32
}

#[inline(always)]
fn sincos_ok(x: f32) -> bool {
    (x.to_bits() & 0x7fff_ffff) < 0x4dc9_0fdb
}

// ----- slice drivers ---------------------------------------------------------------------------

/// Elements per chunk: the range check and any scalar fix-up stay in L1.
const CHUNK: usize = 512;

/// `out = fast(x)` lane by lane, then `exact` where `ok` fails.
#[inline(always)]
fn drive(
    x: &[f32],
    out: &mut [MaybeUninit<f32>],
    fast: impl Fn(f32) -> f32,
    ok: impl Fn(f32) -> bool,
    exact: impl Fn(f32) -> f32,
) {
    for (xc, oc) in x.chunks(CHUNK).zip(out.chunks_mut(CHUNK)) {
        for (o, &v) in oc.iter_mut().zip(xc) {
            o.write(fast(v));
        }
        let bad = xc.iter().fold(0u32, |acc, &v| acc | u32::from(!ok(v)));
        if bad != 0 {
            for (o, &v) in oc.iter_mut().zip(xc) {
                if !ok(v) {
                    o.write(exact(v));
                }
            }
        }
    }
}

/// The vector targets: AVX-512 (Zen 4, Ice Lake and later), AVX2+FMA (Haswell, Zen), NEON.
macro_rules! kernel {
    ($(#[$doc:meta])* $name:ident, $lane:ident $(::<$arg:literal>)?, $ok:expr, $exact:expr) => {
        $(#[$doc])*
        #[multiversion(targets(
            "x86_64+avx512f+avx512vl+avx512dq+avx2+avx+fma",
            "x86_64+avx2+avx+fma",
            "aarch64+neon"
        ))]
        fn $name(x: &[f32], out: &mut [MaybeUninit<f32>]) {
            if multiversion::target::target_cfg_f!(any(
                target_feature = "fma",
                target_arch = "aarch64"
            )) {
                drive(x, out, $lane::<true $(, $arg)?>, $ok, $exact)
            } else {
                drive(x, out, $lane::<false $(, $arg)?>, $ok, $exact)
            }
        }
    };
}

kernel!(
    /// e^x.
    exp_slice, exp_f32, |_| true, f32::exp
);
kernel!(
    /// ln x.
    log_slice, log_lane, log_ok, f32::ln
);
kernel!(
    /// sin x.
    sin_slice, sincos_lane::<false>, sincos_ok, f32::sin
);
kernel!(
    /// cos x.
    cos_slice, sincos_lane::<true>, sincos_ok, f32::cos
);
kernel!(
    /// tanh x (the f64 formula, for CPUs without AVX-512).
    tanh_slice, tanh_lane, |_| true, f32::tanh
);

/// tanh x: the table kernel of [`super::vmath_avx512`] where the CPU has AVX-512 (2.7x faster),
/// else the f64 formula.
fn tanh_any(x: &[f32], out: &mut [MaybeUninit<f32>]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f") {
        // SAFETY: the CPU has AVX-512F (checked just above).
        return unsafe { super::vmath_avx512::tanh_slice(x, out) };
    }
    tanh_slice(x, out)
}
kernel!(
    /// erf x.
    erf_slice, erf_lane, |_| true, libm::erff
);
/// 1 / (1 + e^-x) on float32 lanes ([`sigmoid_near_f32`] for blocks of |x| below
/// [`SILU_NEAR`], [`sigmoid_f32`] otherwise): the float64 lanes it replaced divided in f64,
/// twice the cost (32 x 384 on one thread: 7.6 against 3.4 µs).
#[multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq+avx2+avx+fma",
    "x86_64+avx2+avx+fma",
    "aarch64+neon"
))]
fn sigmoid_slice(x: &[f32], out: &mut [MaybeUninit<f32>]) {
    if multiversion::target::target_cfg_f!(any(target_feature = "fma", target_arch = "aarch64")) {
        blocked_slice::<SILU_BLOCK>(
            x,
            out,
            SILU_NEAR,
            sigmoid_near_f32::<true>,
            sigmoid_f32::<true>,
        )
    } else {
        blocked_slice::<SILU_BLOCK>(
            x,
            out,
            SILU_NEAR,
            sigmoid_near_f32::<false>,
            sigmoid_f32::<false>,
        )
    }
}

// ----- binary cross entropy ---------------------------------------------------------------------

/// torch's floor for BCE's logs.
const BCE_LOG_FLOOR: f64 = -100.0;

/// `-(y max(ln x, -100) + (1 - y) max(ln(1 - x), -100))` for 0 < x < 1, both logs in f64:
/// there 1 - x is exact, so ln(1 - x) is as accurate as torch's log1p(-x).
#[inline(always)]
fn bce_lane<const F: bool>(x: f32, y: f32) -> f32 {
    let (xd, yd) = (x as f64, y as f64);
    let lx = log_f64::<F>(xd).max(BCE_LOG_FLOOR);
    let l1x = log_f64::<F>(1.0 - xd).max(BCE_LOG_FLOOR);
    (-(yd * lx + (1.0 - yd) * l1x)) as f32
}

/// [`bce_lane`] for any x, in float32 with std's logs (x of 0 or 1, out of range or NaN).
fn bce_exact(x: f32, y: f32) -> f32 {
    let floor = BCE_LOG_FLOOR as f32;
    -(y * x.ln().max(floor) + (1.0 - y) * (-x).ln_1p().max(floor))
}

/// Binary cross entropy of probabilities `x` against targets `y`, per element (torch's
/// formula, logs floored at -100). `x`, `y` and `out` must have the same length.
#[multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq+avx2+avx+fma",
    "x86_64+avx2+avx+fma",
    "aarch64+neon"
))]
pub(crate) fn bce_slice(x: &[f32], y: &[f32], out: &mut [MaybeUninit<f32>]) {
    assert!(
        x.len() == out.len() && y.len() == out.len(),
        "vmath: lengths differ"
    );
    let fused =
        multiversion::target::target_cfg_f!(any(target_feature = "fma", target_arch = "aarch64"));
    for ((xc, yc), oc) in x
        .chunks(CHUNK)
        .zip(y.chunks(CHUNK))
        .zip(out.chunks_mut(CHUNK))
    {
        if fused {
            for ((o, &xv), &yv) in oc.iter_mut().zip(xc).zip(yc) {
                o.write(bce_lane::<true>(xv, yv));
            }
        } else {
            for ((o, &xv), &yv) in oc.iter_mut().zip(xc).zip(yc) {
                o.write(bce_lane::<false>(xv, yv));
            }
        }
        let ok = |v: f32| v > 0.0 && v < 1.0;
        let bad = xc.iter().fold(0u32, |acc, &v| acc | u32::from(!ok(v)));
        if bad != 0 {
            for ((o, &xv), &yv) in oc.iter_mut().zip(xc).zip(yc) {
                if !ok(xv) {
                    o.write(bce_exact(xv, yv));
                }
            }
        }
    }
}

// ----- float32 lanes: gelu -------------------------------------------------------------------
//
// gelu(x) = x Φ(x) and gelu'(x) = Φ(x) + x φ(x) on float32 lanes (16 per AVX-512 vector).
// |x| <= 1/2: odd/even series in x² (no exp). Beyond: Φ(-a) e^(a²/2) is smooth and slowly
// varying, so it is a polynomial in t = 1/(1 + c a), and e^(-a²/2) is taken from a² split
// exactly into two floats, so the exponent's rounding (the cause of erfc's large-argument error
// in float32) never enters. The gradient reuses the same e^(-x²/2) for Φ and φ.
//
// The polynomials are least-squares fits (relative weights, 3000 Chebyshev nodes) against
// 40-digit mpmath in s, the affine image of the variable on [-1, 1]; coefficients were rounded
// to float32 one at a time from the constant term up, the rest refitted after each.

/// `a * b + c` in float32, fused when the target has FMA.
#[inline(always)]
pub(crate) fn fma32<const F: bool>(a: f32, b: f32, c: f32) -> f32 {
    if F {
        a.mul_add(b, c)
    } else {
        a * b + c
    }
}

/// Horner in `s`, coefficients highest power first.
#[inline(always)]
fn horner32<const F: bool, const N: usize>(s: f32, c: &[f32; N]) -> f32 {
    let mut p = c[0];
    for &k in &c[1..] {
        p = fma32::<F>(p, s, k);
    }
    p
}

/// 1.5·2^23: adding it rounds a float below 2^22 in magnitude to an integer in the low bits.
const ROUND_MAGIC_F32: f32 = 12_582_912.0;
/// ln 2 in two parts; the high one has 16 bits, so `y - n·LN2_HI_F32` is exact (fdlibm's expf).
const LN2_HI_F32: f32 = 6.931_457_519_5e-01;
const LN2_LO_F32: f32 = 1.428_606_765_3e-06;
/// 1/k! for k = 7 down to 2: (e^r - 1 - r) / r² in Horner order.
const EXPM1_R2: [f32; 6] = [
    1.0 / 5_040.0,
    1.0 / 720.0,
    1.0 / 120.0,
    1.0 / 24.0,
    1.0 / 6.0,
    0.5,
];
/// |x| beyond which the tail is taken at the clamp: above 7, gelu is x and gelu' is 1 in
/// float32 (the tail is below half an ulp of them, yet a normal float); beyond -15 both are -0
/// or 0, and [`gelu_unscale`] makes them so without an underflow (whose microcode assist cost
/// 100 cycles a vector).
const GELU_CLAMP_POS: f32 = 7.0;
const GELU_CLAMP_NEG: f32 = 15.0;

/// The clamped |x| of the tails.
#[inline(always)]
fn gelu_clamp(x: f32, a: f32) -> f32 {
    let lim = if x > 0.0 {
        GELU_CLAMP_POS
    } else {
        GELU_CLAMP_NEG
    };
    // NaN passes (the comparison is false).
    if a > lim {
        lim
    } else {
        a
    }
}

/// 2^-64 undoing [`exp_half_square`]'s scale, or 0 where the tail vanishes (|x| >= 15).
#[inline(always)]
fn gelu_unscale(a: f32) -> f32 {
    if a < GELU_CLAMP_NEG {
        TWO_M64
    } else {
        0.0
    }
}
/// Where the series in x² hands over to e^(-x²/2) times the fitted tails.
const GELU_SPLIT: f32 = 0.5;

/// `x²` as `h + l` exactly.
#[inline(always)]
fn square_split<const F: bool>(x: f32) -> (f32, f32) {
    if F {
        let h = x * x;
        (h, x.mul_add(x, -h))
    } else {
        // Without FMA: the square of a float32 is exact in f64.
        let d = x as f64 * x as f64;
        let h = d as f32;
        (h, (d - h as f64) as f32)
    }
}

/// e^(-a²/2) for 0 <= a <= 15 as `(2^(n + 64), r, e)` with e^(-a²/2) = 2^n (1 + r + e),
/// |r| <= ln2/2 and e = e^r - 1 - r plus r's rounding error: kept apart so the caller adds
/// them to its own terms without rounding 1 + r + e. Scaled by 2^64 so the deepest tail
/// (2^-159) is still a normal float.
#[inline(always)]
fn exp_half_square<const F: bool>(a: f32) -> (f32, f32, f32) {
    let (h, l) = square_split::<F>(a);
    let y = -0.5 * h;
    let t = fma32::<F>(y, std::f32::consts::LOG2_E, ROUND_MAGIC_F32);
    let n = t - ROUND_MAGIC_F32;
    // r = y - n ln2 - l/2: the first part exact, the small rest added once, its rounding
    // error recovered (Fast2Sum; where |rest| > |first| both are tiny and so is the error).
    let r0 = fma32::<F>(n, -LN2_HI_F32, y);
    let rest = fma32::<F>(n, -LN2_LO_F32, -0.5 * l);
    let r = r0 + rest;
    let d = (r0 - r) + rest;
    let q = horner32::<F, 6>(r, &EXPM1_R2);
    let e = fma32::<F>(r * r, q, d);
    // n + 64 + 127 in [29, 191] sits in t's low bits; shifted into the exponent field.
    let scale = f32::from_bits(t.to_bits().wrapping_add(191) << 23);
    (scale, r, e)
}

/// 2^-64, undoing [`exp_half_square`]'s scale (the one rounding of a denormal result).
const TWO_M64: f32 = 5.421_010_862_427_522e-20;

/// Φ(x) - 1/2 on |x| <= 1/2 as x·P(x²): P(h) = erf(x/√2) / (2x), s = 8h - 1.
const GELU_P: [f32; 5] = [
    3.706390572e-08,
    -2.209586683e-06,
    1.490332215e-04,
    -8.006469347e-03,
    3.907845318e-01,
];
/// gelu'(x) = 1/2 + x D(x²) on |x| <= 1/2: D(h) = (Φ(x) - 1/2 + x φ(x)) / x, s = 8h - 1.
const GELU_D: [f32; 6] = [
    1.460377513e-10,
    1.974924686e-07,
    -1.746252201e-05,
    8.811063017e-04,
    -3.142969310e-02,
    7.655560970e-01,
];
/// s = 8h - 1 for h in [0, 1/4].
const GELU_SERIES_AFFINE: (f32, f32) = (8.0, -1.0);
/// The tails' fits: G(a) = a Φ(-a) e^(a²/2) and H(a) = Φ(-a) e^(a²/2) = G(a)/a, degree 13,
/// in variables computed without rounding where G's slope would magnify it. Near (a in
/// [1/2, 3]): in u = a - 3/2, exact there (both are multiples of a's ulp, |u| < 2). Far (a in
/// [3, 16]): in u = t - 1/4 with t = 1/(1 + a/2) corrected for its division's rounding. Each
/// constant term is split into `_HI` and the array's last entry, so the fit (below 2e-9
/// relative) is not capped by one float32's rounding.
const GELU_G_NEAR: [f32; 14] = [
    5.103824918e-08,
    -3.403604865e-07,
    1.203206693e-06,
    -4.190361324e-06,
    1.638896174e-05,
    -6.160944031e-05,
    2.159014257e-04,
    -7.135540945e-04,
    2.210738137e-03,
    -6.331461947e-03,
    1.644142903e-02,
    -3.749097139e-02,
    7.037374377e-02,
    2.864313897e-09,
];
const GELU_G_NEAR_HI: f32 = 3.086709976e-01;
const GELU_G_FAR: [f32; 14] = [
    -8.437841187e+02,
    1.974842429e+00,
    6.214477158e+01,
    -3.393172100e-02,
    -1.018054605e+00,
    -1.532203704e-01,
    -4.519607723e-01,
    1.544334888e-01,
    3.514366448e-01,
    -7.126738876e-02,
    -3.992725909e-01,
    -3.337556124e-01,
    -1.017903239e-01,
    -1.236652647e-08,
];
const GELU_G_FAR_HI: f32 = 3.886758983e-01;
const GELU_H_NEAR: [f32; 14] = [
    -1.759923940e-08,
    1.125056031e-07,
    -4.154130124e-07,
    1.617710723e-06,
    -6.783542176e-06,
    2.701081212e-05,
    -1.019972042e-04,
    3.684421536e-04,
    -1.266260166e-03,
    4.110360984e-03,
    -1.249699853e-02,
    3.518687189e-02,
    -9.027127922e-02,
    -3.076495059e-09,
];
const GELU_H_NEAR_HI: f32 = 2.057806700e-01;
const GELU_H_FAR: [f32; 14] = [
    -3.794104736e+03,
    2.805160828e+02,
    2.724517517e+02,
    -1.683767128e+01,
    -7.899304390e+00,
    2.418060005e-01,
    2.522077858e-01,
    8.534675092e-02,
    -1.287253350e-01,
    -1.042444482e-01,
    1.303490251e-01,
    3.145466447e-01,
    3.285246193e-01,
    2.905959917e-09,
];
const GELU_H_FAR_HI: f32 = 6.477931142e-02;
/// Where the near fits hand over to the far ones.
const GELU_NEAR_END: f32 = 3.0;

/// A tail fit at `ac` as `(c, v)` with the value `c + v`: `c` its constant's high part,
/// `near` below a = 3 or `far` beyond, picked per lane (one Horner pass with a blend per
/// coefficient, not two passes).
#[inline(always)]
fn gelu_tail_poly<const F: bool, const FULL: bool>(
    ac: f32,
    near: (&[f32; 14], f32),
    far: (&[f32; 14], f32),
) -> (f32, f32) {
    if !FULL {
        // Every lane below a = 3: no division, no per-coefficient blend.
        return (near.1, horner32::<F, 14>(ac - 1.5, near.0));
    }
    let is_near = ac < GELU_NEAR_END;
    // 1 + a/2 = dh + dl exactly (a/2 >= 1 where it is used), t = 1/dh, then t's error.
    let dh = fma32::<F>(ac, 0.5, 1.0);
    let dl = (0.5 * ac - dh) + 1.0;
    let t = 1.0 / dh;
    let tc = t * (fma32::<F>(-t, dh, 1.0) - t * dl);
    let s = if is_near { ac - 1.5 } else { (t - 0.25) + tc };
    // A bit mask, not `if`: a select of the two arrays' elements compiled to a select of
    // their addresses and a gather per coefficient.
    let m = (is_near as u32).wrapping_neg();
    let pick = |a: f32, b: f32| f32::from_bits((a.to_bits() & m) | (b.to_bits() & !m));
    let mut p = pick(near.0[0], far.0[0]);
    for i in 1..14 {
        p = fma32::<F>(p, s, pick(near.0[i], far.0[i]));
    }
    (pick(near.1, far.1), p)
}
/// 1/√(2π) = φ(0).
const FRAC_1_SQRT_2PI_F32: f32 = 0.398_942_3;

/// gelu(x) = x Φ(x) in float32 (`FULL`: any x; else only |x| < 3), within 2 ulp of the
/// exact value (denormals included). NaN and -inf give NaN (x · 0), +inf gives inf, -0 gives
/// -0.
#[inline(always)]
fn gelu_f32<const F: bool, const FULL: bool>(x: f32) -> f32 {
    let a = x.abs();
    // Series: x/2 + x (x P(x²)) with one rounding of the sum: x P is at most 0.2, so its
    // own rounding costs under a quarter ulp where the sum partly cancels (x near -1/2).
    let p = horner32::<F, 5>(
        fma32::<F>(x * x, GELU_SERIES_AFFINE.0, GELU_SERIES_AFFINE.1),
        &GELU_P,
    );
    let series = fma32::<F>(x, x * p, 0.5 * x);
    // Tail: a Φ(-a) = e^(-a²/2) G(a) = 2^n (g + w): g = c + v rounded, w = its rounding
    // error + (r + e) g, so 1 + r + e is never rounded and w's own rounding is scaled by |r|.
    let ac = gelu_clamp(x, a);
    let (c, v) = gelu_tail_poly::<F, FULL>(
        ac,
        (&GELU_G_NEAR, GELU_G_NEAR_HI),
        (&GELU_G_FAR, GELU_G_FAR_HI),
    );
    let g = c + v;
    let gl = (c - g) + v;
    let (scale, r, e) = exp_half_square::<F>(ac);
    let w = fma32::<F>(r, g, fma32::<F>(e, g, gl));
    let tail = scale * (g + w) * gelu_unscale(a);
    // x Φ(x) = -a Φ(-a) for x < 0, x - a Φ(-a) above.
    let tail = if x < 0.0 { -tail } else { x - tail };
    let v = if a <= GELU_SPLIT { series } else { tail };
    // Below 2^-30, x/2 is the correctly rounded value (and keeps -0's sign).
    let v = if a < 9.313_226e-10 { 0.5 * x } else { v };
    if x == f32::NEG_INFINITY {
        f32::NAN
    } else {
        v
    }
}

/// gelu'(x) = Φ(x) + x φ(x) in float32 (`FULL` as [`gelu_f32`]; NaN at ±inf and NaN, as
/// x φ(x) is inf · 0 there).
#[inline(always)]
fn gelu_grad_f32<const F: bool, const FULL: bool>(x: f32) -> f32 {
    let a = x.abs();
    let h = x * x;
    let d = horner32::<F, 6>(
        fma32::<F>(h, GELU_SERIES_AFFINE.0, GELU_SERIES_AFFINE.1),
        &GELU_D,
    );
    let series = fma32::<F>(x, d, 0.5);
    // Tail: Φ(-a) - a φ(a) = e^(-a²/2) (H(a) - a φ(0)); gelu' is that for x < 0, 1 minus it
    // above.
    let ac = gelu_clamp(x, a);
    let (c, v) = gelu_tail_poly::<F, FULL>(
        ac,
        (&GELU_H_NEAR, GELU_H_NEAR_HI),
        (&GELU_H_FAR, GELU_H_FAR_HI),
    );
    let m = c + fma32::<F>(-ac, FRAC_1_SQRT_2PI_F32, v);
    let (scale, r, e) = exp_half_square::<F>(ac);
    let w = scale * fma32::<F>(r, m, fma32::<F>(e, m, m)) * gelu_unscale(a);
    let tail = if x < 0.0 { w } else { 1.0 - w };
    let v = if a <= GELU_SPLIT { series } else { tail };
    if a == f32::INFINITY {
        f32::NAN
    } else {
        v
    }
}

/// Elements per block of the gelu drivers: a block whose |x| are all below 3 (nearly every
/// block of activations) skips the far fit's division and blends.
const GELU_BLOCK: usize = 32;

/// Whether every |x| is below `bound` (a NaN is not, so it takes the full path).
#[inline(always)]
fn all_below(x: &[f32], bound: f32) -> bool {
    x.iter().fold(true, |acc, &v| acc & (v.abs() < bound))
}

/// `out = f(x)` in blocks of `B` lanes: by `near` for a block whose |x| are all below `bound`,
/// by `far` (the full range) otherwise.
#[inline(always)]
fn blocked_slice<const B: usize>(
    x: &[f32],
    out: &mut [MaybeUninit<f32>],
    bound: f32,
    near: impl Fn(f32) -> f32,
    far: impl Fn(f32) -> f32,
) {
    for (xc, oc) in x.chunks(B).zip(out.chunks_mut(B)) {
        if all_below(xc, bound) {
            for (o, &v) in oc.iter_mut().zip(xc) {
                o.write(near(v));
            }
        } else {
            for (o, &v) in oc.iter_mut().zip(xc) {
                o.write(far(v));
            }
        }
    }
}

/// `out = g · f'(x)` in blocks of `B` lanes, `g` a slice as long as `x` or one broadcast value;
/// `near` and `far` as in [`blocked_slice`].
#[inline(always)]
fn blocked_grad_slice<const B: usize>(
    g: Result<&[f32], f32>,
    x: &[f32],
    out: &mut [MaybeUninit<f32>],
    bound: f32,
    near: impl Fn(f32) -> f32 + Copy,
    far: impl Fn(f32) -> f32 + Copy,
) {
    // `near` and `far` go by value: through `&near` the call went via `<&F as Fn>::call`, a
    // shim compiled without the caller's target features, so its inlined body called libm's
    // `fmaf` per element (gelu's backward ran 9x slower than its forward).
    for (k, (xc, oc)) in x.chunks(B).zip(out.chunks_mut(B)).enumerate() {
        let gc = g.map(|g| &g[k * B..k * B + xc.len()]);
        if all_below(xc, bound) {
            grad_slice(gc, xc, oc, near);
        } else {
            grad_slice(gc, xc, oc, far);
        }
    }
}

/// The float32 drivers of the functions with a short path for blocks of small |x| (`F`: the
/// target has FMA): `$slice` writes `out = f(x)` (`x` and `out` of one length), `$grad` writes
/// `out = g · f'(x)` (`g` a slice as long as `x` or one broadcast value). Per row: the block
/// length, the bound of the short path, and the (near, far) forms of f and of f'.
macro_rules! blocked_drivers {
    (
        $($(#[$doc:meta])* $slice:ident, $grad:ident: $b:expr, $bound:expr, $f:expr, $df:expr;)*
    ) => {$(
        $(#[$doc])*
        #[inline(always)]
        pub(crate) fn $slice<const F: bool>(x: &[f32], out: &mut [MaybeUninit<f32>]) {
            let (near, far) = $f;
            blocked_slice::<{ $b }>(x, out, $bound, near, far)
        }

        $(#[$doc])*
        #[inline(always)]
        pub(crate) fn $grad<const F: bool>(
            g: Result<&[f32], f32>,
            x: &[f32],
            out: &mut [MaybeUninit<f32>],
        ) {
            let (near, far) = $df;
            blocked_grad_slice::<{ $b }>(g, x, out, $bound, near, far)
        }
    )*};
}

blocked_drivers! {
    /// gelu (the near form skips the far fit's division and blends).
    gelu_slice, gelu_grad_slice: GELU_BLOCK, GELU_NEAR_END,
        (gelu_f32::<F, false>, gelu_f32::<F, true>),
        (gelu_grad_f32::<F, false>, gelu_grad_f32::<F, true>);
    /// silu.
    silu_slice, silu_grad_slice: SILU_BLOCK, SILU_NEAR,
        (silu_near_f32::<F>, silu_f32::<F>),
        (silu_grad_near_f32::<F>, silu_grad_f32::<F>);
}

// ----- float32 lanes: e^-|x| and silu ----------------------------------------------------------
//
// silu(x) = x / (1 + e^-x) and its gradient on float32 lanes. e^-|x| comes as 2^(n+64) (1 + q)
// with q = e^r - 1 unrounded, so x e^x for x < 0 is formed as x + x q (one rounding, its error
// kept) and scaled at the end; the denominator 1 + E is split exactly into two floats and one
// Newton step corrects the quotient, so the result is within about one ulp (a plain division
// chain costs 2.4).

/// |x| beyond which silu(x) for x < 0 rounds to -0 (112 e^-112 is below half the smallest
/// denormal); e^-|x| is evaluated at this clamp there, so its scale stays a normal float.
const SILU_CLAMP: f32 = 112.0;
/// Above it, e^-|x| is below 2^-57 and vanishes beside 1 (0 is used, avoiding an underflow).
const EXP_NEG_NEGLIGIBLE: f32 = 40.0;

/// e^-a for a = min(|x|, [`SILU_CLAMP`]) as `(2^(n + 64), q)` with e^-a = 2^n (1 + q),
/// q = e^r - 1 for the reduced |r| <= ln2/2 (relative error near 2^-26; NaN propagates).
#[inline(always)]
fn exp_neg_parts<const F: bool>(ac: f32) -> (f32, f32) {
    // n + 64 + 127 lies in [19, 191].
    exp_reduced::<F>(-ac)
}

/// e^y = 2^n (1 + q) as `(2^(n + 64), q)`, q = e^r - 1 for the reduced |r| <= ln2/2, for y
/// whose n + 64 + 127 lies in the exponent field's range (the callers clamp y).
#[inline(always)]
fn exp_reduced<const F: bool>(y: f32) -> (f32, f32) {
    let t = fma32::<F>(y, std::f32::consts::LOG2_E, ROUND_MAGIC_F32);
    let n = t - ROUND_MAGIC_F32;
    // y - n ln2_hi is exact (n has at most 8 bits); the low part's rounding is below 2^-26 r.
    let r = fma32::<F>(n, -LN2_HI_F32, y);
    let r = fma32::<F>(n, -LN2_LO_F32, r);
    let q = fma32::<F>(r * r, horner32::<F, 6>(r, &EXPM1_R2), r);
    // n + 64 + 127 sits in t's low bits; shifted into the exponent field.
    let scale = f32::from_bits(t.to_bits().wrapping_add(191) << 23);
    (scale, q)
}

/// The shared part of silu and its gradient: `(a, ac, scale, q, e)` with a = |x|, ac its clamp,
/// e^-ac = scale 2^-64 (1 + q) and e = e^-|x| itself where it matters beside 1 (else 0).
#[inline(always)]
fn silu_common<const F: bool>(x: f32) -> (f32, f32, f32, f32, f32) {
    let a = x.abs();
    // NaN passes (the comparison is false).
    let ac = if a > SILU_CLAMP { SILU_CLAMP } else { a };
    let (scale, q) = exp_neg_parts::<F>(ac);
    let unscale = if a < EXP_NEG_NEGLIGIBLE { TWO_M64 } else { 0.0 };
    let e = scale * (1.0 + q) * unscale;
    (a, ac, scale, q, e)
}

/// 2^-64 where the result of an x < 0 lane is a float, 0 where it rounds to zero.
#[inline(always)]
fn silu_unscale(a: f32) -> f32 {
    if a < SILU_CLAMP {
        TWO_M64
    } else {
        0.0
    }
}

/// silu(x) = x sigmoid(x) in float32, within about one ulp of the exact value (denormals
/// included). NaN and -inf give NaN (x · 0, as float64 computes it), +inf gives inf, -0 gives
/// -0.
#[inline(always)]
fn silu_f32<const F: bool>(x: f32) -> f32 {
    let (a, ac, scale, q, e) = silu_common::<F>(x);
    // 1 + e = h + l exactly (1 >= e).
    let h = 1.0 + e;
    let l = (1.0 - h) + e;
    let inv = 1.0 / h;
    // Numerator: x for x >= 0; x e^x 2^64 / 2^n = x (1 + q) = ph + pl for x < 0 (x clamped:
    // beyond the clamp the result is -0 anyway).
    let neg = x < 0.0;
    let xn = -ac;
    let ph = fma32::<F>(xn, q, xn);
    let pl = fma32::<F>(xn, q, xn - ph);
    let (nh, nl) = if neg { (ph, pl) } else { (x, 0.0) };
    // One Newton step on nh + nl = y (h + l).
    let y0 = nh * inv;
    let res = fma32::<F>(-y0, h, nh) + (nl - y0 * l);
    let y = fma32::<F>(res, inv, y0);
    let v = if neg {
        (y * scale) * silu_unscale(a)
    } else {
        y
    };
    // Beyond 20, e^-x is below a quarter ulp of x (and +inf would give inf - inf above).
    let v = if x > 20.0 { x } else { v };
    // Below 2^-25, x/2 is the correctly rounded value (and keeps -0's sign).
    let v = if a < 2.980_232_2e-8 { 0.5 * x } else { v };
    if x == f32::NEG_INFINITY {
        f32::NAN
    } else {
        v
    }
}

/// silu'(x) = s (1 + x (1 - s)), s = sigmoid(x), in float32: 1/(1 + e) + x e/(1 + e)² for
/// x >= 0, e/(1 + e) (1 + x/(1 + e)) below (e = e^-|x|). NaN at ±inf and NaN, as float64
/// computes it (inf · 0).
#[inline(always)]
fn silu_grad_f32<const F: bool>(x: f32) -> f32 {
    let (a, _, scale, q, e) = silu_common::<F>(x);
    let inv = 1.0 / (1.0 + e);
    let neg = (scale * (1.0 + q)) * inv * fma32::<F>(x, inv, 1.0) * silu_unscale(a);
    let pos = fma32::<F>(x * e * inv, inv, inv);
    if x < 0.0 {
        neg
    } else {
        pos
    }
}

/// |x| below which [`silu_near_f32`] and [`silu_grad_near_f32`] apply: e^-x and e^x are then
/// normal floats.
const SILU_NEAR: f32 = 86.0;

/// e^-x for |x| < [`SILU_NEAR`] as `(2^n, q, n)` with e^-x = 2^n (1 + q) (no clamps, no
/// scaling: the common case's short path).
#[inline(always)]
fn exp_neg_near<const F: bool>(x: f32) -> (f32, f32, f32) {
    let y = -x;
    let t = fma32::<F>(y, std::f32::consts::LOG2_E, ROUND_MAGIC_F32);
    let n = t - ROUND_MAGIC_F32;
    let r = fma32::<F>(n, -LN2_HI_F32, y);
    let r = fma32::<F>(n, -LN2_LO_F32, r);
    let q = fma32::<F>(r * r, horner32::<F, 6>(r, &EXPM1_R2), r);
    (f32::from_bits(t.to_bits().wrapping_add(127) << 23), q, n)
}

/// silu(x) = x / (1 + e^-x) for |x| < [`SILU_NEAR`], within 1.7 ulp: the denominator
/// 1 + 2^n (1 + q) is formed with one rounding (as 2^n q + (1 + 2^n), exact for n <= 23, or
/// 2^n (q + 2^-n) + 2^n, whose inner sum rounds below 2^-26 of the total, for n >= 1), then
/// one division. -0 gives -0.
#[inline(always)]
fn silu_near_f32<const F: bool>(x: f32) -> f32 {
    let (p, q, n) = exp_neg_near::<F>(x);
    // 2^-n from n's bits, as 2^n is (only used where n >= 1).
    let t = n + ROUND_MAGIC_F32;
    let pinv = f32::from_bits(127u32.wrapping_sub(t.to_bits()) << 23);
    let (c, b) = if n >= 1.0 {
        (q + pinv, p)
    } else {
        (q, 1.0 + p)
    };
    x / fma32::<F>(p, c, b)
}

/// silu'(x) = s (1 + x (1 - s)) with s = 1/(1 + e^-x) and 1 - s = e^-x s, for
/// |x| < [`SILU_NEAR`].
#[inline(always)]
fn silu_grad_near_f32<const F: bool>(x: f32) -> f32 {
    let (p, q, _) = exp_neg_near::<F>(x);
    let e = fma32::<F>(p, q, p);
    let s = 1.0 / (1.0 + e);
    s * fma32::<F>(x, e * s, 1.0)
}

/// sigmoid(x) = 1 / (1 + e^-x) for |x| < [`SILU_NEAR`], within about one ulp: with
/// e^-x = p (1 + q), the denominator 1 + p + p q is carried as two floats (the sum 1 + p split
/// exactly, then the fma's rounding error recovered) and one Newton step corrects the
/// reciprocal (a single rounded denominator and division cost 1.5 ulp). -0 gives 1/2.
#[inline(always)]
fn sigmoid_near_f32<const F: bool>(x: f32) -> f32 {
    let (p, q, _) = exp_neg_near::<F>(x);
    // 1 + p = s + sl exactly (fast two-sum, larger part first).
    let (a, b) = if p > 1.0 { (p, 1.0) } else { (1.0, p) };
    let s = a + b;
    let sl = (a - s) + b;
    // d = s + p q rounded; s - d is exact (d / s lies in [0.6, 1.4]), so dl is d's error.
    let d = fma32::<F>(p, q, s);
    let dl = fma32::<F>(p, q, s - d) + sl;
    let y0 = 1.0 / d;
    let res = fma32::<F>(-y0, d, 1.0) - y0 * dl;
    fma32::<F>(res, y0, y0)
}

/// sigmoid(x) for any x: 1 / (1 + e) for x >= 0 and e / (1 + e) below, e = e^-|x| = h + l
/// ([`exp_neg_split`]) and 1 + e split exactly into two floats, the quotient corrected by one
/// Newton step (denormal results included). ±inf give 1 and 0, NaN passes.
#[inline(always)]
fn sigmoid_f32<const F: bool>(x: f32) -> f32 {
    let (h, l) = exp_neg_split::<F>(x.abs());
    // 1 + e = dh + dl exactly (1 >= h).
    let dh = 1.0 + h;
    let dl = ((1.0 - dh) + h) + l;
    let inv = 1.0 / dh;
    let (nh, nl) = if x < 0.0 { (h, l) } else { (1.0, 0.0) };
    let y0 = nh * inv;
    let res = fma32::<F>(-y0, dh, nh) + (nl - y0 * dl);
    fma32::<F>(res, inv, y0)
}

/// Elements per block of the silu drivers: a block whose |x| are all below [`SILU_NEAR`]
/// (every block of ordinary activations) takes the short path.
const SILU_BLOCK: usize = 64;

// ----- float32 lanes: e^y for the softmax rows -------------------------------------------------

/// y below which e^y rounds to 0 in float32 (e^-104 is under half the smallest denormal).
const EXP_ROW_CLAMP: f32 = -104.0;

/// e^y in float32 for y <= 40 (softmax's `x - max`, log-softmax's output), within about one
/// ulp (measured: 1.004), denormal results included; -inf gives 0 and NaN passes.
/// 2^(n + 64) (1 + q) is formed with one rounding and scaled by 2^-64 at the end, so only a
/// result that is itself denormal takes a denormal step.
#[inline(always)]
pub(crate) fn exp_row_f32<const F: bool>(y: f32) -> f32 {
    let (scale, q, unscale) = exp_scaled::<F>(y);
    fma32::<F>(scale, q, scale) * unscale
}

/// e^y for y <= 40 as `(2^(n + 64), q, u)` with e^y = 2^(n + 64) (1 + q) u: u is 2^-64, or 0
/// below [`EXP_ROW_CLAMP`] (NaN: 0, and NaN stays in q).
#[inline(always)]
fn exp_scaled<const F: bool>(y: f32) -> (f32, f32, f32) {
    // NaN passes the clamp (the comparison is false).
    let yc = if y < EXP_ROW_CLAMP { EXP_ROW_CLAMP } else { y };
    // n + 64 + 127 lies in [41, 249].
    let (scale, q) = exp_reduced::<F>(yc);
    // Below the clamp the result is 0; NaN gives NaN · 0.
    let unscale = if y >= EXP_ROW_CLAMP { TWO_M64 } else { 0.0 };
    (scale, q, unscale)
}

// ----- float32 lanes: softplus and logsigmoid ----------------------------------------------------
//
// Both are ln(1 + u) with u = e^-|x| in (0, 1], plus max(x, 0) or from min(x, 0). u is kept as
// two floats (its rounding error too), ln(1 + u) = 2 atanh(s) with s = u / (2 + u) from an
// exact 2 + u and one Newton step, then 2s plus a series in s² (s <= 1/3). Within 1.7 ulp.

/// 2/(2k + 3) for k = 6 down to 0: (2 atanh(s) - 2s) / s³ in s², Horner order.
const ATANH_S2: [f32; 7] = [
    2.0 / 15.0,
    2.0 / 13.0,
    2.0 / 11.0,
    2.0 / 9.0,
    2.0 / 7.0,
    2.0 / 5.0,
    2.0 / 3.0,
];

/// e^-a for a >= 0 as `(h, l)`: h rounded, l its rounding error (0 beyond 104; NaN passes).
#[inline(always)]
fn exp_neg_split<const F: bool>(a: f32) -> (f32, f32) {
    let (scale, q, unscale) = exp_scaled::<F>(-a);
    let h = fma32::<F>(scale, q, scale);
    // scale - h is exact (h / scale is in [0.7, 1.5]).
    let l = fma32::<F>(scale, q, scale - h);
    (h * unscale, l * unscale)
}

/// ln(1 + u) for u = h + l in [0, 1].
#[inline(always)]
fn ln1p_unit_f32<const F: bool>(h: f32, l: f32) -> f32 {
    // 2 + u = den + dl exactly (2 >= u); s = u / (2 + u) by one Newton step on s0.
    let den = 2.0 + h;
    let dl = ((2.0 - den) + h) + l;
    let r = 1.0 / den;
    let s0 = h * r;
    let e = (fma32::<F>(-s0, den, h) + l) - s0 * dl;
    let s = fma32::<F>(e, r, s0);
    let z = s * s;
    fma32::<F>(s * z, horner32::<F, 7>(z, &ATANH_S2), 2.0 * s)
}

/// softplus(x) = ln(1 + e^x) (beta 1), or x above `threshold`. -inf gives 0, +inf inf, NaN NaN.
#[inline(always)]
fn softplus_f32<const F: bool>(x: f32, threshold: f32) -> f32 {
    let (h, l) = exp_neg_split::<F>(x.abs());
    let v = x.max(0.0) + ln1p_unit_f32::<F>(h, l);
    if x > threshold {
        x
    } else {
        v
    }
}

/// softplus'(x) = sigmoid(x) (beta 1), or 1 above `threshold`.
#[inline(always)]
fn softplus_grad_f32<const F: bool>(x: f32, threshold: f32) -> f32 {
    let (h, _) = exp_neg_split::<F>(x.abs());
    let inv = 1.0 / (1.0 + h);
    let d = if x < 0.0 { h * inv } else { inv };
    if x > threshold {
        1.0
    } else {
        d
    }
}

/// logsigmoid(x) = min(x, 0) - ln(1 + e^-|x|). -inf gives -inf, +inf 0, NaN NaN.
#[inline(always)]
fn logsigmoid_f32<const F: bool>(x: f32) -> f32 {
    let (h, l) = exp_neg_split::<F>(x.abs());
    x.min(0.0) - ln1p_unit_f32::<F>(h, l)
}

/// logsigmoid'(x) = sigmoid(-x).
#[inline(always)]
fn logsigmoid_grad_f32<const F: bool>(x: f32) -> f32 {
    let (h, _) = exp_neg_split::<F>(x.abs());
    let inv = 1.0 / (1.0 + h);
    if x < 0.0 {
        inv
    } else {
        h * inv
    }
}

/// Binary cross entropy on logits, torch's stable `(1 - t) x + max(-x, 0) + ln(1 + e^-|x|)`
/// (summed in that order: for t = 0 and x << 0 the first two cancel exactly), on float32
/// lanes; all three the same length.
#[multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq+avx2+avx+fma",
    "x86_64+avx2+avx+fma",
    "aarch64+neon"
))]
pub(crate) fn bce_logits_slice(x: &[f32], t: &[f32], out: &mut [MaybeUninit<f32>]) {
    #[inline(always)]
    fn lanes<const F: bool>(x: &[f32], t: &[f32], out: &mut [MaybeUninit<f32>]) {
        for ((o, &xv), &tv) in out.iter_mut().zip(x).zip(t) {
            let (h, l) = exp_neg_split::<F>(xv.abs());
            o.write((1.0 - tv) * xv + (-xv).max(0.0) + ln1p_unit_f32::<F>(h, l));
        }
    }
    if multiversion::target::target_cfg_f!(any(target_feature = "fma", target_arch = "aarch64")) {
        lanes::<true>(x, t, out)
    } else {
        lanes::<false>(x, t, out)
    }
}

/// `out = (sigmoid(x) - t) g` on float32 lanes, `g` a slice as long as `x` or one value.
#[multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq+avx2+avx+fma",
    "x86_64+avx2+avx+fma",
    "aarch64+neon"
))]
pub(crate) fn bce_logits_grad_slice(
    x: &[f32],
    t: &[f32],
    g: Result<&[f32], f32>,
    out: &mut [MaybeUninit<f32>],
) {
    #[inline(always)]
    fn lanes<const F: bool>(
        x: &[f32],
        t: &[f32],
        g: Result<&[f32], f32>,
        out: &mut [MaybeUninit<f32>],
    ) {
        // sigmoid(x) = logsigmoid'(-x).
        match g {
            Ok(g) => {
                for (((o, &xv), &tv), &gv) in out.iter_mut().zip(x).zip(t).zip(g) {
                    o.write((logsigmoid_grad_f32::<F>(-xv) - tv) * gv);
                }
            }
            Err(gv) => {
                for ((o, &xv), &tv) in out.iter_mut().zip(x).zip(t) {
                    o.write((logsigmoid_grad_f32::<F>(-xv) - tv) * gv);
                }
            }
        }
    }
    if multiversion::target::target_cfg_f!(any(target_feature = "fma", target_arch = "aarch64")) {
        lanes::<true>(x, t, g, out)
    } else {
        lanes::<false>(x, t, g, out)
    }
}

/// `out = softplus(x)` (beta 1) on float32 lanes.
#[inline(always)]
pub(crate) fn softplus_slice<const F: bool>(
    x: &[f32],
    threshold: f32,
    out: &mut [MaybeUninit<f32>],
) {
    for (o, &v) in out.iter_mut().zip(x) {
        o.write(softplus_f32::<F>(v, threshold));
    }
}

/// `out = logsigmoid(x)` on float32 lanes.
#[inline(always)]
pub(crate) fn logsigmoid_slice<const F: bool>(x: &[f32], out: &mut [MaybeUninit<f32>]) {
    for (o, &v) in out.iter_mut().zip(x) {
        o.write(logsigmoid_f32::<F>(v));
    }
}

/// `out = g · softplus'(x)` (beta 1), `g` a slice as long as `x` or one broadcast value.
#[inline(always)]
pub(crate) fn softplus_grad_slice<const F: bool>(
    g: Result<&[f32], f32>,
    x: &[f32],
    threshold: f32,
    out: &mut [MaybeUninit<f32>],
) {
    grad_slice(g, x, out, |v| softplus_grad_f32::<F>(v, threshold))
}

/// `out = g · logsigmoid'(x)`, `g` a slice as long as `x` or one broadcast value.
#[inline(always)]
pub(crate) fn logsigmoid_grad_slice<const F: bool>(
    g: Result<&[f32], f32>,
    x: &[f32],
    out: &mut [MaybeUninit<f32>],
) {
    grad_slice(g, x, out, logsigmoid_grad_f32::<F>)
}

/// `out = g · d(x)`, `g` a slice or one broadcast value.
#[inline(always)]
pub(crate) fn grad_slice(
    g: Result<&[f32], f32>,
    x: &[f32],
    out: &mut [MaybeUninit<f32>],
    d: impl Fn(f32) -> f32,
) {
    match g {
        Ok(g) => {
            for ((o, &v), &gv) in out.iter_mut().zip(x).zip(g) {
                o.write(gv * d(v));
            }
        }
        Err(gv) => {
            for (o, &v) in out.iter_mut().zip(x) {
                o.write(gv * d(v));
            }
        }
    }
}

// ----- float32 lanes: e^x ----------------------------------------------------------------------
//
// e^x is 2^n (1 + r + t) with the reduced argument r kept in two floats (its rounding error
// too) and the sum formed with one rounding: within 0.78 ulp over all float32 inputs (the worst
// at a denormal result), on twice the lanes of the f64 formula (1.27x faster per element on an
// Intel AVX-512 core; tanh and sigmoid written the same way were no faster than their f64
// formulas, whose f64 division costs what the float32 Newton step does, so they stay in f64).

/// Above it e^x overflows float32 (ln f32::MAX = 88.72); clamping there keeps 2^n in range.
const EXP_CLAMP_HI: f32 = 89.0;
/// 2^64, undoing the 2^-64 scale of a positive exponent.
const TWO_P64: f32 = 18_446_744_073_709_551_616.0;

/// e^x = `scale (s + low) unscale`: s = 1 + r rounded and low the rest of e^r (s's rounding
/// error and the series beyond r), scale = 2^(n ∓ 64) and unscale = 2^±64, so an exponent of
/// 128 (overflow) or a denormal result still comes from one multiplication by a normal power of
/// two after the rounding. unscale is 0 below [`EXP_ROW_CLAMP`] and for NaN (NaN stays in s).
#[inline(always)]
fn exp_parts<const F: bool>(x: f32) -> (f32, f32, f32, f32) {
    // NaN passes both clamps (the comparisons are false).
    let y = if x < EXP_ROW_CLAMP { EXP_ROW_CLAMP } else { x };
    let y = if y > EXP_CLAMP_HI { EXP_CLAMP_HI } else { y };
    let t = fma32::<F>(y, std::f32::consts::LOG2_E, ROUND_MAGIC_F32);
    let n = t - ROUND_MAGIC_F32;
    // r = rh + rl = y - n ln2: the first step is exact (fdlibm's split), the second's rounding
    // error is recovered.
    let r1 = fma32::<F>(n, -LN2_HI_F32, y);
    let rh = fma32::<F>(n, -LN2_LO_F32, r1);
    let rl = fma32::<F>(n, -LN2_LO_F32, r1 - rh);
    // e^r = 1 + rh + tail, tail = rh² P(rh) + rl (1 + rh).
    let tail = fma32::<F>(
        rh * rh,
        horner32::<F, 6>(rh, &EXPM1_R2),
        fma32::<F>(rl, rh, rl),
    );
    let s = 1.0 + rh;
    let low = ((1.0 - s) + rh) + tail;
    // n - 64 + 127 (y > 0) or n + 64 + 127 lies in [41, 191]; shifted into the exponent field.
    let pos = y > 0.0;
    let bias: u32 = if pos { 63 } else { 191 };
    let scale = f32::from_bits(t.to_bits().wrapping_add(bias) << 23);
    let unscale = if pos {
        TWO_P64
    } else if x >= EXP_ROW_CLAMP {
        TWO_M64
    } else {
        0.0
    };
    (scale, s, low, unscale)
}

/// e^x in float32 (denormal results included, -inf gives 0, NaN passes), within 0.78 ulp.
#[inline(always)]
fn exp_f32<const F: bool>(x: f32) -> f32 {
    let (scale, s, low, unscale) = exp_parts::<F>(x);
    fma32::<F>(scale, s, scale * low) * unscale
}

// ----- float32 lanes: glu ------------------------------------------------------------------------
//
// glu(a, b) = a sigmoid(b) with h = e^-|b| on float32 lanes: sigmoid(b) is 1 / (1 + h) for
// b >= 0 and h / (1 + h) below, and sigmoid'(b) = s (1 - s) = h / (1 + h)² either way (no
// 1 - s cancellation).

/// `(sigmoid(b), sigmoid'(b))`.
#[inline(always)]
fn sigmoid_and_slope_f32<const F: bool>(b: f32) -> (f32, f32) {
    let (h, _) = exp_neg_split::<F>(b.abs());
    let inv = 1.0 / (1.0 + h);
    let hi = h * inv;
    (if b >= 0.0 { inv } else { hi }, hi * inv)
}

/// `out = a sigmoid(b)`; all three the same length.
#[multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq+avx2+avx+fma",
    "x86_64+avx2+avx+fma",
    "aarch64+neon"
))]
pub(crate) fn glu_slice(a: &[f32], b: &[f32], out: &mut [MaybeUninit<f32>]) {
    #[inline(always)]
    fn lanes<const F: bool>(a: &[f32], b: &[f32], out: &mut [MaybeUninit<f32>]) {
        for ((o, &av), &bv) in out.iter_mut().zip(a).zip(b) {
            o.write(av * sigmoid_and_slope_f32::<F>(bv).0);
        }
    }
    if multiversion::target::target_cfg_f!(any(target_feature = "fma", target_arch = "aarch64")) {
        lanes::<true>(a, b, out)
    } else {
        lanes::<false>(a, b, out)
    }
}

/// `ga = g sigmoid(b)`, `gb = g a sigmoid'(b)`; all five the same length.
#[multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq+avx2+avx+fma",
    "x86_64+avx2+avx+fma",
    "aarch64+neon"
))]
pub(crate) fn glu_grad_slice(
    a: &[f32],
    b: &[f32],
    g: &[f32],
    ga: &mut [MaybeUninit<f32>],
    gb: &mut [MaybeUninit<f32>],
) {
    #[inline(always)]
    fn lanes<const F: bool>(
        a: &[f32],
        b: &[f32],
        g: &[f32],
        ga: &mut [MaybeUninit<f32>],
        gb: &mut [MaybeUninit<f32>],
    ) {
        for ((((da, db), &av), &bv), &gv) in ga.iter_mut().zip(gb.iter_mut()).zip(a).zip(b).zip(g) {
            let (s, ds) = sigmoid_and_slope_f32::<F>(bv);
            da.write(gv * s);
            db.write(gv * av * ds);
        }
    }
    if multiversion::target::target_cfg_f!(any(target_feature = "fma", target_arch = "aarch64")) {
        lanes::<true>(a, b, g, ga, gb)
    } else {
        lanes::<false>(a, b, g, ga, gb)
    }
}

// ----- float32 lanes: the elu family -------------------------------------------------------------
//
// elu, selu and celu with input scale 1: scale x above 0, scale alpha (e^x - 1) below. e^x - 1
// = 2^n q + (2^n - 1) is kept as two floats and multiplied by scale alpha held as two floats,
// so the result rounds once after the polynomial (within 1.7 ulp for selu's constants).

/// e^y - 1 is -1 in float32 below this (and 2^n stays a normal float).
const EXPM1_CLAMP: f32 = -30.0;

/// e^y for y <= 0 as `(2^n, q)`, e^y = 2^n (1 + q), y clamped at [`EXPM1_CLAMP`] (NaN passes).
#[inline(always)]
fn exp_nonpos_parts<const F: bool>(y: f32) -> (f32, f32) {
    let yc = if y < EXPM1_CLAMP { EXPM1_CLAMP } else { y };
    let t = fma32::<F>(yc, std::f32::consts::LOG2_E, ROUND_MAGIC_F32);
    let n = t - ROUND_MAGIC_F32;
    let r = fma32::<F>(n, -LN2_HI_F32, yc);
    let r = fma32::<F>(n, -LN2_LO_F32, r);
    let q = fma32::<F>(r * r, horner32::<F, 6>(r, &EXPM1_R2), r);
    (f32::from_bits(t.to_bits().wrapping_add(127) << 23), q)
}

/// The elu family's constants in float32: `scale`, and `scale · alpha` as `hi + lo`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct EluF32 {
    scale: f32,
    sa_hi: f32,
    sa_lo: f32,
}

impl EluF32 {
    /// From the float64 parameters (input scale 1).
    pub(crate) fn new(alpha: f64, scale: f64) -> EluF32 {
        let sa = scale * alpha;
        let sa_hi = sa as f32;
        EluF32 {
            scale: scale as f32,
            sa_hi,
            sa_lo: (sa - sa_hi as f64) as f32,
        }
    }
}

/// `scale x` for x > 0, `scale alpha (e^x - 1)` otherwise; NaN gives NaN, -inf -scale alpha.
#[inline(always)]
fn elu_f32<const F: bool>(x: f32, c: EluF32) -> f32 {
    let pos = x > 0.0;
    // NaN stays (the comparison is false).
    let y = if pos { 0.0 } else { x };
    let (p, q) = exp_nonpos_parts::<F>(y);
    // 2^n - 1 is exact for n >= -24 and within 2^-25 of -1 below.
    let m = p - 1.0;
    let h = fma32::<F>(p, q, m);
    let l = fma32::<F>(p, q, m - h);
    let neg = fma32::<F>(c.sa_hi, h, fma32::<F>(c.sa_lo, h, c.sa_hi * l));
    if pos {
        c.scale * x
    } else {
        neg
    }
}

/// The derivative: `scale` for x > 0, `scale alpha e^x` otherwise.
#[inline(always)]
fn elu_grad_f32<const F: bool>(x: f32, c: EluF32) -> f32 {
    let pos = x > 0.0;
    let y = if pos { 0.0 } else { x };
    // Not clamped at -30 as e^x - 1 is: e^x itself runs down to the denormals.
    let e = exp_row_f32::<F>(y);
    let neg = fma32::<F>(c.sa_hi, e, c.sa_lo * e);
    if pos {
        c.scale
    } else {
        neg
    }
}

/// `out = elu(x)` (input scale 1) on float32 lanes.
#[inline(always)]
pub(crate) fn elu_slice<const F: bool>(x: &[f32], c: EluF32, out: &mut [MaybeUninit<f32>]) {
    for (o, &v) in out.iter_mut().zip(x) {
        o.write(elu_f32::<F>(v, c));
    }
}

/// `out = g · elu'(x)` (input scale 1), `g` a slice as long as `x` or one broadcast value.
#[inline(always)]
pub(crate) fn elu_grad_slice<const F: bool>(
    g: Result<&[f32], f32>,
    x: &[f32],
    c: EluF32,
    out: &mut [MaybeUninit<f32>],
) {
    grad_slice(g, x, out, |v| elu_grad_f32::<F>(v, c))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// |got - want| in ulps of float32 at `want`.
    fn ulps(got: f32, want: f64) -> f64 {
        let a = want.abs().max(f32::MIN_POSITIVE as f64);
        ((got as f64) - want).abs() / 2f64.powi(a.log2().floor() as i32 - 23)
    }

    /// The f64 tanh formula still serves CPUs without AVX-512; the integration tests reach only
    /// the kernel the running CPU picks, so this checks the formula itself.
    #[test]
    fn tanh_f64_formula_within_one_ulp() {
        let mut xs: Vec<f32> = (0x3000_0000u32..0x4120_0000)
            .step_by(101)
            .map(f32::from_bits)
            .collect();
        xs.extend([0.0, -0.0, f32::INFINITY, f32::NEG_INFINITY, -0.75, 1e-30]);
        let mut out = vec![MaybeUninit::uninit(); xs.len()];
        tanh_slice(&xs, &mut out);
        for (&x, o) in xs.iter().zip(&out) {
            // SAFETY: tanh_slice writes every element.
            let y = unsafe { o.assume_init() };
            let want = (x as f64).tanh();
            assert!(ulps(y, want) <= 1.0, "tanh({x:e}) = {y:e}, want {want:e}");
            assert_eq!(
                y.is_sign_negative(),
                x.is_sign_negative(),
                "sign of tanh({x:e})"
            );
        }
        let mut nan = [MaybeUninit::uninit()];
        tanh_slice(&[f32::NAN], &mut nan);
        // SAFETY: written above.
        assert!(unsafe { nan[0].assume_init() }.is_nan());
    }
}
