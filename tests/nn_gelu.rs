//! The float32 gelu kernels (forward and fused backward on float32 lanes) against float64
//! truth from libm's erfc, over a dense sweep, every float near the range splits, a few million
//! random floats and the special values.

mod common;

use common::{check_grad_f32, ulps, worst_ulps, Bits};
use ferrograd::ops::nn::activation as act;
use ferrograd::Tensor;

/// gelu(x) = x Φ(x) and gelu'(x) = Φ(x) + x φ(x) in float64.
fn gelu64(x: f64) -> f64 {
    x * 0.5 * libm::erfc(-x * std::f64::consts::FRAC_1_SQRT_2)
}
fn gelu_grad64(x: f64) -> (f64, f64) {
    let cdf = 0.5 * libm::erfc(-x * std::f64::consts::FRAC_1_SQRT_2);
    let xpdf = x * (-0.5 * x * x).exp() / (2.0 * std::f64::consts::PI).sqrt();
    (cdf + xpdf, cdf.abs() + xpdf.abs())
}

/// Every 1/64 on [-16, 16], every float within 2^16 steps of the splits (±1/2, ±3), the
/// clamps (±7, ±15) and ±14.4 (near the last nonzero results), 2M uniform draws on [-16, 16],
/// 1M random bit patterns (every magnitude, NaNs too) and the special values.
fn sweep() -> Vec<f32> {
    let mut xs: Vec<f32> = (-1024..=1024).map(|i| i as f32 / 64.0).collect();
    for c in [0.5f32, -0.5, 3.0, -3.0, 7.0, -7.0, 15.0, -15.0, 14.4, -14.4] {
        let b = c.to_bits();
        xs.extend((b - 65_536..b + 65_536).map(f32::from_bits));
    }
    let mut r = Bits(0x9e37_79b9_7f4a_7c15);
    xs.extend((0..2_000_000).map(|_| (r.next() >> 40) as f32 / (1u64 << 24) as f32 * 32.0 - 16.0));
    xs.extend((0..1_000_000).map(|_| f32::from_bits((r.next() >> 32) as u32)));
    xs.extend(common::SPECIAL_F32);
    xs
}

#[test]
fn float32_gelu_is_within_two_ulps_of_float64_everywhere() {
    let worst = worst_ulps(|x| act::gelu(x, false), gelu64, &sweep());
    assert!(worst.0 <= 2.0, "{} ulp at {:e}", worst.0, worst.1);
    // The specials as float64 computes them: -inf · 0 is NaN, -0 keeps its sign.
    let s = act::gelu(
        &Tensor::from_vec(
            vec![f32::NEG_INFINITY, f32::INFINITY, f32::NAN, -0.0, -20.0],
            &[5],
        )
        .unwrap(),
        false,
    )
    .unwrap()
    .to_vec::<f32>()
    .unwrap();
    assert!(s[0].is_nan() && s[2].is_nan());
    assert_eq!(s[1], f32::INFINITY);
    assert!(s[3] == 0.0 && s[3].is_sign_negative());
    assert!(s[4] == 0.0 && s[4].is_sign_negative());
}

/// The fused backward, for a uniform gradient (the sum's) and a per-element one: within 4 ulp
/// of the float64 derivative plus 4·2^-24 of |Φ| + |x φ| (its terms cancel near x = -0.75,
/// where float32 Φ and x φ carry that much absolute error).
#[test]
fn float32_gelu_gradient_matches_float64() {
    let xs: Vec<f32> = sweep()
        .into_iter()
        .filter(|x| x.is_finite())
        .step_by(7)
        .collect();
    check_grad_f32(|x| act::gelu(x, false), gelu_grad64, &xs, "gelu");
}

/// The other float32 activations on f64 lanes (exp to 2^-27 relative): within 2 ulp of their
/// float64 kernels (std/libm) over every 1/64 on [-40, 40] and 500k uniform draws.
#[test]
fn other_float32_activations_are_within_two_ulps_of_float64() {
    let mut r = Bits(0x2545_f491_4f6c_dd1d);
    let xs: Vec<f32> = (-2560..=2560)
        .map(|i| i as f32 / 64.0)
        .chain((0..500_000).map(|_| (r.next() >> 40) as f32 / (1u64 << 24) as f32 * 80.0 - 40.0))
        .collect();
    let x32 = Tensor::from_vec(xs.clone(), &[xs.len()]).unwrap();
    let x64 = x32.to_dtype(ferrograd::DType::Float64).unwrap();
    type Act = fn(&Tensor) -> ferrograd::Result<Tensor>;
    let fs: [(&str, Act); 8] = [
        ("gelu_tanh", |x| act::gelu(x, true)),
        ("silu", act::silu),
        ("mish", act::mish),
        ("softplus", |x| act::softplus(x, 1.0, 20.0)),
        ("logsigmoid", act::logsigmoid),
        ("elu", |x| act::elu(x, 1.0)),
        ("selu", act::selu),
        ("celu", |x| act::celu(x, 0.7)),
    ];
    for (name, f) in fs {
        let a = f(&x32).unwrap().to_vec::<f32>().unwrap();
        let b = f(&x64).unwrap().to_vec::<f64>().unwrap();
        for (i, (&p, &q)) in a.iter().zip(&b).enumerate() {
            assert!(ulps(p, q) <= 2.0, "{name} at {}: {p} vs {q}", xs[i]);
        }
    }
}
