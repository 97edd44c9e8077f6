//! Vectorised float32 math: exp, log, sin, cos, tanh, sigmoid and erf over slices.
//!
//! Each lane is widened to f64 and evaluated branch-free (polynomials, bit tricks, selects), so
//! the loops autovectorise and the f64 headroom keeps every result within about one ulp of the
//! correctly rounded float32 value without float32 error analysis. Lanes the fast path cannot
//! reduce (sin/cos beyond 2^28·π/2, inf, NaN; log of non-positive, inf, NaN) are recomputed with
//! std's scalar functions, chunk by chunk, so the common case pays only a vectorised range check.
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
            UnaryF32::Tanh => tanh_slice(x, out),
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

/// 1/k! for k = 11 down to 0: e^r's Taylor coefficients in Horner order.
const EXP_TAYLOR: [f64; 12] = [
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
    let terms: &[f64] = if HI { &EXP_TAYLOR } else { &EXP_TAYLOR[4..] };
    let mut p = terms[0];
    for &c in &terms[1..] {
        p = fma::<F>(p, r, c);
    }
    // 2^n from the integer in t's low bits: shifted into the exponent field.
    let scale = f64::from_bits(t.to_bits().wrapping_add(1023) << 52);
    p * scale
}

#[inline(always)]
fn exp_lane<const F: bool>(x: f32) -> f32 {
    let x = x as f64;
    // e^±200 is 0 / inf in float32; clamp (unlike min/max) lets NaN through.
    let x = x.clamp(-200.0, 200.0);
    exp_f64::<F, false>(x) as f32
}

#[inline(always)]
fn sigmoid_lane<const F: bool>(x: f32) -> f32 {
    let x = x as f64;
    let x = x.clamp(-120.0, 120.0);
    (1.0 / (1.0 + exp_f64::<F, false>(-x))) as f32
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
    let s = (2.0 * t - (1.0 + ERFCX_TMIN)) / (1.0 - ERFCX_TMIN);
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
    let xd = x as f64;
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
    fma::<F>(e, LN2, s * p) as f32
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
    exp_slice, exp_lane, |_| true, f32::exp
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
    /// tanh x.
    tanh_slice, tanh_lane, |_| true, f32::tanh
);
kernel!(
    /// erf x.
    erf_slice, erf_lane, |_| true, libm::erff
);
kernel!(
    /// 1 / (1 + e^-x).
    sigmoid_slice, sigmoid_lane, |_| true, sigmoid_scalar::<f32>
);
