//! The fused `linear` (one node, leading dims folded into rows, bias added in place) against
//! the definition written as loops in float64: outputs, and the gradients of Σ y · v in closed
//! form (gx = v w, gw = vᵀ x, gb = Σ v), at sizes large enough to be shared among threads;
//! float32 against float64; second derivatives against finite differences.

mod common;

use common::{assert_close, fd_grad, leaf};
use ferrograd::autograd::{self, GradOptions};
use ferrograd::ops::nn::linear::linear;
use ferrograd::{DType, Tensor};

fn vals(n: usize, seed: f64) -> Vec<f64> {
    (0..n)
        .map(|i| (i as f64 * 0.713 + seed).sin() + (i as f64 * 0.29).cos() * 0.5)
        .collect()
}

fn f64s(t: &Tensor) -> Vec<f64> {
    t.to_dtype(DType::Float64).unwrap().to_vec::<f64>().unwrap()
}

/// y[r, o] = Σ_i x[r, i] w[o, i] + b[o], and the closed-form gradients of Σ y · v.
#[allow(clippy::type_complexity)]
fn reference(
    x: &[f64],
    w: &[f64],
    b: &[f64],
    v: &[f64],
    (rows, inn, out): (usize, usize, usize),
) -> (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>) {
    let mut y = vec![0.0; rows * out];
    let (mut gx, mut gw, mut gb) = (vec![0.0; rows * inn], vec![0.0; out * inn], vec![0.0; out]);
    for r in 0..rows {
        for o in 0..out {
            let dot: f64 = (0..inn).map(|i| x[r * inn + i] * w[o * inn + i]).sum();
            y[r * out + o] = dot + b[o];
            let g = v[r * out + o];
            gb[o] += g;
            for i in 0..inn {
                gx[r * inn + i] += g * w[o * inn + i];
                gw[o * inn + i] += g * x[r * inn + i];
            }
        }
    }
    (y, gx, gw, gb)
}

fn check(lead: &[usize], inn: usize, out: usize, dtype: DType, tol: f64) {
    let rows: usize = lead.iter().product();
    let (xv, wv, bv, vv) = (
        vals(rows * inn, 0.1),
        vals(out * inn, 0.7),
        vals(out, 1.3),
        vals(rows * out, 2.1),
    );
    let mut xs: Vec<usize> = lead.to_vec();
    xs.push(inn);
    let mut ys: Vec<usize> = lead.to_vec();
    ys.push(out);
    let mk = |v: &[f64], s: &[usize]| {
        Tensor::from_vec(v.to_vec(), s)
            .unwrap()
            .to_dtype(dtype)
            .unwrap()
            .requires_grad_(true)
            .unwrap()
    };
    let (x, w, b) = (mk(&xv, &xs), mk(&wv, &[out, inn]), mk(&bv, &[out]));
    let y = linear(&x, &w, Some(&b)).unwrap();
    assert_eq!(y.shape(), &ys[..]);
    let v = Tensor::from_vec(vv.clone(), &ys)
        .unwrap()
        .to_dtype(dtype)
        .unwrap();
    let loss = y.mul(&v).unwrap().sum().unwrap();
    let g = autograd::grad(
        &[loss],
        &[x.clone(), w.clone(), b.clone()],
        GradOptions::default(),
    )
    .unwrap();
    let (ry, rgx, rgw, rgb) = reference(&xv, &wv, &bv, &vv, (rows, inn, out));
    assert_close(&f64s(&y), &ry, tol);
    assert_close(&f64s(g[0].as_ref().unwrap()), &rgx, tol);
    assert_close(&f64s(g[1].as_ref().unwrap()), &rgw, tol);
    assert_close(&f64s(g[2].as_ref().unwrap()), &rgb, tol);
}

#[test]
fn outputs_and_gradients_match_the_definition() {
    check(&[5], 3, 4, DType::Float64, 1e-12);
    check(&[2, 3, 4], 7, 5, DType::Float64, 1e-12);
    // Large enough for the product and the bias pass to be split among threads.
    check(&[8, 64], 128, 384, DType::Float64, 1e-10);
    check(&[8, 64], 128, 384, DType::Float32, 2e-3);
    check(&[0, 3], 4, 2, DType::Float64, 0.0);
}

#[test]
fn second_derivatives_match_finite_differences() {
    // d/dx of Σ (∂L/∂w)², L = Σ sin(linear(x)): the weight gradient's graph is differentiated.
    let (wv, bv) = (vals(6, 0.4), vals(2, 0.9));
    let xv = vals(12, 0.2);
    let f = |x: &Tensor| {
        let w = leaf(&wv, &[2, 3]);
        let b = leaf(&bv, &[2]);
        let l = linear(x, &w, Some(&b))
            .unwrap()
            .sin()
            .unwrap()
            .sum()
            .unwrap();
        let opts = GradOptions {
            create_graph: true,
            ..GradOptions::default()
        };
        let gw = autograd::grad(&[l], &[w], opts).unwrap()[0]
            .clone()
            .unwrap();
        gw.mul(&gw).unwrap().sum().unwrap()
    };
    let x = leaf(&xv, &[2, 2, 3]);
    let got = autograd::grad(&[f(&x)], &[x], GradOptions::default()).unwrap()[0]
        .clone()
        .unwrap();
    assert_close(&f64s(&got), &fd_grad(f, &xv, &[2, 2, 3]), 1e-6);
}

#[test]
fn in_place_ops_on_the_output_are_allowed_and_differentiated() {
    // The output is a fresh tensor, not a view made without grad: mul_ on it must work.
    let (xv, wv) = (vals(8, 0.3), vals(12, 0.5));
    let x = leaf(&xv, &[2, 2, 2]);
    let w = leaf(&wv, &[6, 2]);
    let y = linear(&x, &w, None).unwrap();
    let mask: Vec<f64> = f64s(&y)
        .iter()
        .map(|&a| f64::from(u8::from(a > 0.0)))
        .collect();
    y.mul_(&Tensor::from_vec(mask.clone(), &[2, 2, 6]).unwrap())
        .unwrap();
    let g = autograd::grad(&[y.sum().unwrap()], &[w], GradOptions::default()).unwrap();
    let (_, _, rgw, _) = reference(&xv, &wv, &[0.0; 6], &mask, (4, 2, 6));
    assert_close(&f64s(g[0].as_ref().unwrap()), &rgw, 1e-12);
}

#[test]
fn mismatched_sizes_are_errors() {
    let x = Tensor::zeros(&[4, 3], DType::Float32);
    let w = Tensor::zeros(&[5, 2], DType::Float32);
    let e = linear(&x, &w, None).unwrap_err().to_string();
    assert!(
        e.contains("mat1 and mat2 shapes cannot be multiplied (4x3 and 2x5)"),
        "{e}"
    );
    let s = Tensor::scalar(1.0f32);
    assert!(linear(&s, &w, None).is_err());
}
