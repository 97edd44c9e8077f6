//! The float32 silu-family kernels (forward and fused backward on float32 lanes) against
//! float64 closed forms: every 1/64 on [-20, 20], every float near the kernels' splits, a few
//! million random floats (uniform and random bit patterns) and the special values.

mod common;

use common::check_grad_f32 as check_grad;
use common::{ulps, worst_ulps, Bits};
use ferrograd::autograd::{self, GradOptions};
use ferrograd::ops::nn::activation as act;
use ferrograd::Tensor;

/// Every 1/64 on [-20, 20], every float within 2^15 steps of `splits`, 2M uniform draws on
/// [-20, 20], 500k on [-120, 120], 1M random bit patterns (every magnitude, NaNs too) and the
/// special values.
fn sweep(splits: &[f32]) -> Vec<f32> {
    let mut xs: Vec<f32> = (-1280..=1280).map(|i| i as f32 / 64.0).collect();
    for &c in splits {
        let b = c.to_bits();
        xs.extend((b - 32_768..b + 32_768).map(f32::from_bits));
    }
    let mut r = Bits(0x9e37_79b9_7f4a_7c15);
    let unit = |r: &mut Bits| (r.next() >> 40) as f32 / (1u64 << 24) as f32;
    xs.extend((0..2_000_000).map(|_| unit(&mut r) * 40.0 - 20.0));
    xs.extend((0..500_000).map(|_| unit(&mut r) * 240.0 - 120.0));
    xs.extend((0..1_000_000).map(|_| f32::from_bits((r.next() >> 32) as u32)));
    xs.extend(common::SPECIAL_F32);
    xs
}

/// sigmoid(x) in float64 without overflow.
fn sigmoid64(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        x.exp() / (1.0 + x.exp())
    }
}

fn silu64(x: f64) -> f64 {
    x * sigmoid64(x)
}

fn silu_grad64(x: f64) -> (f64, f64) {
    let s = sigmoid64(x);
    let t = x * s * (1.0 - s);
    (s + t, s.abs() + t.abs())
}

/// The splits of the silu kernels: the short path's end (±86) and its denominator's two forms
/// (n = 0 | 1 near x = -1/2 ln2 ... -3/2 ln2), the long path's clamps (±20, ±40, ±112).
const SILU_SPLITS: [f32; 9] = [
    86.0,
    -86.0,
    -0.346_573_6,
    -1.039_720_8,
    20.0,
    40.0,
    -40.0,
    112.0,
    -112.0,
];

#[test]
fn float32_silu_is_within_two_ulps_of_float64_everywhere() {
    let (e, at) = worst_ulps(act::silu, silu64, &sweep(&SILU_SPLITS));
    assert!(e <= 2.0, "{e} ulp at {at:e}");
    // Specials as float64 computes them: -inf · 0 is NaN, -0 keeps its sign, far below -0.
    let s = act::silu(
        &Tensor::from_vec(
            vec![
                f32::NEG_INFINITY,
                f32::INFINITY,
                f32::NAN,
                -0.0,
                -200.0,
                0.0,
            ],
            &[6],
        )
        .unwrap(),
    )
    .unwrap()
    .to_vec::<f32>()
    .unwrap();
    assert!(s[0].is_nan() && s[2].is_nan());
    assert_eq!(s[1], f32::INFINITY);
    assert!(s[3] == 0.0 && s[3].is_sign_negative());
    assert!(s[4] == 0.0 && s[4].is_sign_negative());
    assert!(s[5] == 0.0 && s[5].is_sign_positive());
}

#[test]
fn float32_silu_gradient_matches_float64() {
    let xs: Vec<f32> = sweep(&SILU_SPLITS)
        .into_iter()
        .filter(|x| x.is_finite())
        .step_by(5)
        .collect();
    check_grad(act::silu, silu_grad64, &xs, "silu");
    // ±inf and NaN give NaN (inf · 0 in s (1 + x (1 - s))); ±0 gives 1/2.
    let x = Tensor::from_vec(
        vec![f32::NEG_INFINITY, f32::INFINITY, f32::NAN, -0.0, 0.0],
        &[5],
    )
    .unwrap()
    .requires_grad_(true)
    .unwrap();
    let l = act::silu(&x).unwrap().sum().unwrap();
    let g = autograd::grad(&[l], std::slice::from_ref(&x), GradOptions::default()).unwrap()[0]
        .clone()
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    assert!(g[..3].iter().all(|v| v.is_nan()));
    assert_eq!(&g[3..], &[0.5, 0.5]);
}

/// Softmax rows `[0, x_1, ..., x_999]` with every x <= -45 sum to exactly 1 in f64, so each
/// output is the float32 kernel's e^x itself: within 1.5 ulp of f64's exp on a dense sweep of
/// [-110, -45] (denormal results and underflow to 0 included). Rows `[0, x]` cover [-45, 0]
/// through e^x / (1 + e^x), within 3 ulp (e^x, a reciprocal, a product).
#[test]
fn float32_softmax_exp_matches_float64() {
    let mut r = Bits(0x1234_5678_9abc_def1);
    let unit = |r: &mut Bits| (r.next() >> 40) as f64 / (1u64 << 24) as f64;
    let far: Vec<f32> = (0..999_000)
        .map(|i| {
            if i % 2 == 0 {
                (-45.0 - 65.0 * i as f64 / 999_000.0) as f32
            } else {
                (-45.0 - 65.0 * unit(&mut r)) as f32
            }
        })
        .collect();
    let mut rows = Vec::with_capacity(1_000_000);
    for c in far.chunks(999) {
        rows.push(0.0f32);
        rows.extend_from_slice(c);
    }
    let y = Tensor::from_vec(rows.clone(), &[1000, 1000])
        .unwrap()
        .softmax(-1)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    for (&x, &v) in rows.iter().zip(&y) {
        let e = ulps(v, (x as f64).exp());
        assert!(e <= 1.5, "e^{x:e}: {e} ulp");
    }
    let near: Vec<f32> = (0..=45 * 1024)
        .map(|i| -(i as f32) / 1024.0)
        .chain((0..200_000).map(|_| (-45.0 * unit(&mut r)) as f32))
        .collect();
    let pairs: Vec<f32> = near.iter().flat_map(|&x| [0.0, x]).collect();
    let y = Tensor::from_vec(pairs, &[near.len(), 2])
        .unwrap()
        .softmax(-1)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    for (i, &x) in near.iter().enumerate() {
        let e = (x as f64).exp();
        let (a, b) = (
            ulps(y[2 * i], 1.0 / (1.0 + e)),
            ulps(y[2 * i + 1], e / (1.0 + e)),
        );
        assert!(a <= 3.0 && b <= 3.0, "[0, {x:e}]: {a}, {b} ulp");
    }
}

/// Long float32 rows (the f64 lane sums) against float64 softmax and log-softmax of the same
/// float32 `x - max`.
#[test]
fn float32_softmax_long_rows_match_float64() {
    let mut r = Bits(0x0bad_cafe_f00d_d00d);
    let n = 300_001;
    let x: Vec<f32> = (0..2 * n)
        .map(|_| ((r.next() >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 20.0)
        .collect();
    let t = Tensor::from_vec(x.clone(), &[2, n]).unwrap();
    let y = t.softmax(-1).unwrap().to_vec::<f32>().unwrap();
    let ly = t.log_softmax(-1).unwrap().to_vec::<f32>().unwrap();
    for row in 0..2 {
        let xs = &x[row * n..(row + 1) * n];
        let m = xs.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b));
        let z: Vec<f64> = xs.iter().map(|&v| (v - m) as f64).collect();
        let s: f64 = z.iter().map(|v| v.exp()).sum();
        for (k, &zv) in z.iter().enumerate() {
            let e = ulps(y[row * n + k], zv.exp() / s);
            assert!(e <= 3.0, "softmax {e} ulp at {}", xs[k]);
            let want = zv - s.ln();
            let tol = 2.0 * (want.abs() * 2f64.powi(-23)) + (zv.abs() + s.ln()) * 2f64.powi(-24);
            assert!(
                (ly[row * n + k] as f64 - want).abs() <= tol,
                "log_softmax at {}",
                xs[k]
            );
        }
    }
}

fn softplus64(x: f64) -> f64 {
    if x > 20.0 {
        x
    } else {
        x.max(0.0) + (-x.abs()).exp().ln_1p()
    }
}

fn softplus_grad64(x: f64) -> (f64, f64) {
    let d = if x > 20.0 { 1.0 } else { sigmoid64(x) };
    (d, d)
}

fn logsigmoid64(x: f64) -> f64 {
    x.min(0.0) - (-x.abs()).exp().ln_1p()
}

fn logsigmoid_grad64(x: f64) -> (f64, f64) {
    let d = sigmoid64(-x);
    (d, d)
}

/// softplus's threshold (20) and the clamps of e^-|x| (±104).
const LOG1P_SPLITS: [f32; 4] = [20.0, -20.0, 104.0, -104.0];

#[test]
fn float32_softplus_and_logsigmoid_are_within_two_ulps_of_float64_everywhere() {
    let xs = sweep(&LOG1P_SPLITS);
    let (e, at) = worst_ulps(|x| act::softplus(x, 1.0, 20.0), softplus64, &xs);
    assert!(e <= 2.0, "softplus: {e} ulp at {at:e}");
    let (e, at) = worst_ulps(act::logsigmoid, logsigmoid64, &xs);
    assert!(e <= 2.0, "logsigmoid: {e} ulp at {at:e}");
}

#[test]
fn float32_softplus_and_logsigmoid_gradients_match_float64() {
    let xs: Vec<f32> = sweep(&LOG1P_SPLITS)
        .into_iter()
        .filter(|x| x.is_finite())
        .step_by(5)
        .collect();
    check_grad(
        |x| act::softplus(x, 1.0, 20.0),
        softplus_grad64,
        &xs,
        "softplus",
    );
    check_grad(act::logsigmoid, logsigmoid_grad64, &xs, "logsigmoid");
}

const SELU_ALPHA: f64 = 1.673_263_242_354_377_284_817_042_991_671_7;
const SELU_SCALE: f64 = 1.050_700_987_355_480_493_419_334_985_294_6;

/// scale x above 0, scale alpha (e^x - 1) below, in float64.
fn elu64(x: f64, alpha: f64, scale: f64) -> f64 {
    scale * if x > 0.0 { x } else { alpha * x.exp_m1() }
}

fn elu_grad64(x: f64, alpha: f64, scale: f64) -> (f64, f64) {
    let d = scale * if x > 0.0 { 1.0 } else { alpha * x.exp() };
    (d, d.abs())
}

/// e^x - 1's clamp (-30), where it rounds to -1 (-17.3) and the exponent's denormal range.
const ELU_SPLITS: [f32; 4] = [-30.0, -17.33, -87.3, -103.9];

#[test]
fn float32_elu_family_is_within_two_ulps_of_float64_everywhere() {
    let xs = sweep(&ELU_SPLITS);
    type Case = (
        &'static str,
        fn(&Tensor) -> ferrograd::Result<Tensor>,
        fn(f64) -> f64,
    );
    let cases: [Case; 4] = [
        ("elu", |x| act::elu(x, 1.0), |x| elu64(x, 1.0, 1.0)),
        ("elu 0.37", |x| act::elu(x, 0.37), |x| elu64(x, 0.37, 1.0)),
        ("selu", act::selu, |x| elu64(x, SELU_ALPHA, SELU_SCALE)),
        ("celu", |x| act::celu(x, 1.0), |x| elu64(x, 1.0, 1.0)),
    ];
    for (name, f, want) in cases {
        // selu's scale takes f32::MAX beyond float32's range: inf there, as float64 rounds it.
        let finite: Vec<f32> = xs
            .iter()
            .copied()
            .filter(|x| (want(*x as f64) as f32).is_finite() || !x.is_finite())
            .collect();
        let (e, at) = worst_ulps(f, want, &finite);
        assert!(e <= 2.0, "{name}: {e} ulp at {at:e}");
    }
}

#[test]
fn float32_elu_family_gradients_match_float64() {
    let xs: Vec<f32> = sweep(&ELU_SPLITS)
        .into_iter()
        .filter(|x| x.is_finite())
        .step_by(5)
        .collect();
    check_grad(
        |x| act::elu(x, 1.0),
        |x| elu_grad64(x, 1.0, 1.0),
        &xs,
        "elu",
    );
    check_grad(
        act::selu,
        |x| elu_grad64(x, SELU_ALPHA, SELU_SCALE),
        &xs,
        "selu",
    );
    check_grad(
        |x| act::elu(x, 0.37),
        |x| elu_grad64(x, 0.37, 1.0),
        &xs,
        "elu 0.37",
    );
}
