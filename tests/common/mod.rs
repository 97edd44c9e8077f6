//! Shared helpers for the Rust integration tests.
#![allow(dead_code)]

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
