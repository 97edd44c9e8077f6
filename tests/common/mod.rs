//! Shared helpers for the Rust integration tests.
#![allow(dead_code)]

use ferrograd::autograd::{self, GradOptions};
use ferrograd::Tensor;

/// A float64 leaf requiring grad.
pub fn leaf(v: &[f64], shape: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape)
        .unwrap()
        .requires_grad_(true)
        .unwrap()
}

/// Central finite-difference gradient of the scalar function `f` at `x` (float64).
pub fn fd_grad(f: impl Fn(&Tensor) -> Tensor, x: &[f64], shape: &[usize]) -> Vec<f64> {
    let eps = 1e-6;
    (0..x.len())
        .map(|i| {
            let mut p = x.to_vec();
            p[i] += eps;
            let mut m = x.to_vec();
            m[i] -= eps;
            let fp = f(&Tensor::from_vec(p, shape).unwrap()).item().unwrap();
            let fm = f(&Tensor::from_vec(m, shape).unwrap()).item().unwrap();
            (fp - fm) / (2.0 * eps)
        })
        .collect()
}

pub fn assert_close(a: &[f64], b: &[f64], tol: f64) {
    assert_eq!(a.len(), b.len(), "lengths differ: {a:?} vs {b:?}");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(
            (x - y).abs() <= tol * (1.0 + y.abs()),
            "element {i}: {x} vs {y} (all: {a:?} vs {b:?})"
        );
    }
}

/// The gradient of `f` at `xs` for a uniform (the sum's) and a per-element upstream gradient,
/// against `want(x) = (f'(x), scale)`: within 4 ulp of f' plus 2^-22 of `scale` (the size of
/// the terms that cancel where f' crosses zero).
pub fn check_grad_f32(
    f: fn(&Tensor) -> ferrograd::Result<Tensor>,
    want: fn(f64) -> (f64, f64),
    xs: &[f32],
    name: &str,
) {
    let n = xs.len();
    let x = Tensor::from_vec(xs.to_vec(), &[n])
        .unwrap()
        .requires_grad_(true)
        .unwrap();
    let w: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).cos()).collect();
    let wt = Tensor::from_vec(w.clone(), &[n]).unwrap();
    for weighted in [false, true] {
        let y = f(&x).unwrap();
        let l = if weighted { y.mul(&wt).unwrap() } else { y }
            .sum()
            .unwrap();
        let g = autograd::grad(&[l], std::slice::from_ref(&x), GradOptions::default()).unwrap()[0]
            .clone()
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        let mut worst = (0.0, 0.0f32);
        for i in 0..n {
            let c = if weighted { w[i] as f64 } else { 1.0 };
            let (d, scale) = want(xs[i] as f64);
            let err = (g[i] as f64 - c * d).abs();
            let tol = 4.0 * (c * d).abs() * 2f64.powi(-24) + c.abs() * scale * 2f64.powi(-22);
            // A denormal derivative and its product with g round twice on the 2^-149 grid.
            let r = err / tol.max(2f64.powi(-148));
            if r > worst.0 || r.is_nan() {
                worst = (r, xs[i]);
            }
        }
        assert!(
            worst.0 <= 1.0,
            "{name} weighted {weighted}: {} at {:e}",
            worst.0,
            worst.1
        );
    }
}

/// The float32 values every elementwise sweep includes: signed zeros, denormals, tiny and
/// huge magnitudes, the infinities and NaN.
pub const SPECIAL_F32: [f32; 15] = [
    0.0,
    -0.0,
    1e-45,
    -1e-45,
    1e-38,
    -1e-38,
    1e-30,
    -1e-30,
    1e-10,
    -1e-10,
    f32::MAX,
    f32::MIN,
    f32::INFINITY,
    f32::NEG_INFINITY,
    f32::NAN,
];

/// Distance in float32 ulps at the exact value (denormal spacing below the normal range).
pub fn ulps(got: f32, want: f64) -> f64 {
    if got as f64 == want || (got.is_nan() && want.is_nan()) {
        return 0.0;
    }
    let a = want.abs().max(f32::MIN_POSITIVE as f64);
    let ulp = 2f64.powi(a.log2().floor() as i32 - 23).max(2f64.powi(-149));
    ((got as f64) - want).abs() / ulp
}

/// xorshift64*: a fixed stream of bits, no dependency.
pub struct Bits(pub u64);
impl Bits {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// The worst ulp distance of `f` (float32 kernel) from `want` (float64 truth) over `xs`.
pub fn worst_ulps(
    f: fn(&Tensor) -> ferrograd::Result<Tensor>,
    want: fn(f64) -> f64,
    xs: &[f32],
) -> (f64, f32) {
    let y = f(&Tensor::from_vec(xs.to_vec(), &[xs.len()]).unwrap())
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    let mut worst = (0.0, 0.0f32);
    for (&x, &v) in xs.iter().zip(&y) {
        let e = ulps(v, want(x as f64));
        if e > worst.0 || e.is_nan() {
            worst = (e, x);
        }
    }
    worst
}
