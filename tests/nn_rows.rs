//! The row kernels of layer_norm and cross_entropy at row lengths the small tests never reach:
//! longer than one summation block (256), with remainders, and large enough to be shared among
//! threads. Gradients against float64 finite differences and closed forms, float32 against
//! float64, and bitwise equality across thread counts.

mod common;

use common::{assert_close, fd_grad, leaf};
use ferrograd::autograd::{self, GradOptions};
use ferrograd::ops::nn::loss::{self, Reduction};
use ferrograd::ops::nn::norm::layer_norm;
use ferrograd::{DType, Tensor};

fn vals(n: usize, seed: f64) -> Vec<f64> {
    (0..n)
        .map(|i| (i as f64 * 0.913 + seed).sin() * 1.7 + (i as f64 * 0.37).cos() + 0.5)
        .collect()
}

fn t(v: Vec<f64>, shape: &[usize]) -> Tensor {
    Tensor::from_vec(v, shape).unwrap()
}

fn grads(y: &Tensor, xs: &[Tensor]) -> Vec<Vec<f64>> {
    autograd::grad(std::slice::from_ref(y), xs, GradOptions::default())
        .unwrap()
        .into_iter()
        .map(|g| {
            g.unwrap()
                .to_dtype(DType::Float64)
                .unwrap()
                .to_vec::<f64>()
                .unwrap()
        })
        .collect()
}

/// Σ y · v for a fixed v, so every output element carries its own gradient.
fn weigh(y: &Tensor, seed: f64) -> Tensor {
    let v = t(vals(y.numel(), seed), y.shape())
        .to_dtype(y.dtype())
        .unwrap();
    y.mul(&v).unwrap().sum().unwrap()
}

/// Closed-form layer_norm gradients of Σ y v (float64, per row).
fn ln_reference(x: &[f64], w: &[f64], v: &[f64], l: usize, eps: f64) -> [Vec<f64>; 3] {
    let (mut dx, mut dw, mut db) = (vec![0.0; x.len()], vec![0.0; l], vec![0.0; l]);
    for r in 0..x.len() / l {
        let xr = &x[r * l..(r + 1) * l];
        let vr = &v[r * l..(r + 1) * l];
        let m = xr.iter().sum::<f64>() / l as f64;
        let var = xr.iter().map(|a| (a - m) * (a - m)).sum::<f64>() / l as f64;
        let rs = 1.0 / (var + eps).sqrt();
        let xh: Vec<f64> = xr.iter().map(|a| (a - m) * rs).collect();
        let gw: Vec<f64> = (0..l).map(|i| vr[i] * w[i]).collect();
        let mg = gw.iter().sum::<f64>() / l as f64;
        let mgx = (0..l).map(|i| gw[i] * xh[i]).sum::<f64>() / l as f64;
        for i in 0..l {
            dx[r * l + i] = rs * (gw[i] - mg - xh[i] * mgx);
            dw[i] += vr[i] * xh[i];
            db[i] += vr[i];
        }
    }
    [dx, dw, db]
}

#[test]
fn layer_norm_long_rows_match_closed_form_and_finite_differences() {
    for l in [300usize, 1000] {
        let n = 40; // 40 x 1000 elements: shared among threads
        let (x0, w0, b0) = (vals(n * l, 0.1), vals(l, 1.3), vals(l, 2.1));
        let ins = [leaf(&x0, &[n, l]), leaf(&w0, &[l]), leaf(&b0, &[l])];
        let y = layer_norm(&ins[0], &[l], Some(&ins[1]), Some(&ins[2]), 1e-5).unwrap();
        let got = grads(&weigh(&y, 0.7), &ins);
        let v = vals(n * l, 0.7);
        let want = ln_reference(&x0, &w0, &v, l, 1e-5);
        for k in 0..3 {
            assert_close(&got[k], &want[k], 1e-10);
        }
        // float32 within float32 accuracy of float64
        let ins32: Vec<Tensor> = ins
            .iter()
            .map(|a| {
                a.detach()
                    .to_dtype(DType::Float32)
                    .unwrap()
                    .requires_grad_(true)
                    .unwrap()
            })
            .collect();
        let y32 = layer_norm(&ins32[0], &[l], Some(&ins32[1]), Some(&ins32[2]), 1e-5).unwrap();
        let got32 = grads(&weigh(&y32, 0.7), &ins32);
        for k in 0..3 {
            let scale = want[k].iter().fold(0f64, |a, b| a.max(b.abs()));
            for (a, b) in got32[k].iter().zip(&want[k]) {
                assert!(
                    (a - b).abs() <= 2e-5 * (scale + 1.0),
                    "l={l} input {k}: {a} vs {b}"
                );
            }
        }
    }
    // finite differences of a small long-row case (x only; w and b are linear)
    let (n, l) = (2, 300);
    let (x0, w0) = (vals(n * l, 0.4), vals(l, 1.1));
    let w = t(w0, &[l]);
    let f = |x: &Tensor| weigh(&layer_norm(x, &[l], Some(&w), None, 1e-5).unwrap(), 0.2);
    let x = leaf(&x0, &[n, l]);
    let got = grads(&f(&x), std::slice::from_ref(&x));
    assert_close(&got[0], &fd_grad(f, &x0, &[n, l]), 1e-6);
}

#[test]
fn cross_entropy_long_rows_match_finite_differences_and_float64() {
    let (n, c) = (40, 1000); // 40 x 1000 logits: shared among threads
    let x0: Vec<f64> = vals(n * c, 0.3).iter().map(|v| v * 3.0).collect();
    let t0: Vec<i64> = (0..n as i64).map(|i| (i * 37) % c as i64).collect();
    let w0: Vec<f64> = (0..c).map(|k| 0.5 + (k % 7) as f64 * 0.25).collect();
    let target = Tensor::from_vec(t0.clone(), &[n]).unwrap();
    let w = t(w0, &[c]);
    for (eps, weight, red) in [
        (0.1, None, Reduction::Mean),
        (0.0, Some(&w), Reduction::Sum),
        (0.3, Some(&w), Reduction::None),
    ] {
        let ignore = t0[3];
        let f = |x: &Tensor| {
            let wt = weight.map(|w: &Tensor| w.to_dtype(x.dtype()).unwrap());
            let y = loss::cross_entropy(x, &target, wt.as_ref(), ignore, red, eps).unwrap();
            weigh(&y, 0.9)
        };
        let x = leaf(&x0, &[n, c]);
        let got = grads(&f(&x), std::slice::from_ref(&x));
        // finite differences on a few rows (all of them would take long)
        let rows = 3 * c;
        let fd = fd_grad(
            |xs: &Tensor| {
                let mut full = x0.clone();
                full[..rows].copy_from_slice(&xs.to_vec::<f64>().unwrap());
                f(&t(full, &[n, c]))
            },
            &x0[..rows],
            &[rows],
        );
        assert_close(&got[0][..rows], &fd, 1e-6);
        let x32 = x
            .detach()
            .to_dtype(DType::Float32)
            .unwrap()
            .requires_grad_(true)
            .unwrap();
        let got32 = grads(&f(&x32), std::slice::from_ref(&x32));
        let scale = got[0].iter().fold(0f64, |a, b| a.max(b.abs()));
        for (a, b) in got32[0].iter().zip(&got[0]) {
            assert!((a - b).abs() <= 1e-5 * scale + 1e-7, "{a} vs {b}");
        }
    }
}

#[test]
fn row_kernels_are_bitwise_equal_at_any_thread_count() {
    let (n, l) = (64, 700);
    let x0 = vals(n * l, 0.5);
    let t0: Vec<i64> = (0..n as i64).map(|i| (i * 13) % l as i64).collect();
    let run = || {
        let x = Tensor::from_vec(x0.clone(), &[n, l])
            .unwrap()
            .to_dtype(DType::Float32)
            .unwrap()
            .requires_grad_(true)
            .unwrap();
        let w = t(vals(l, 0.2), &[l])
            .to_dtype(DType::Float32)
            .unwrap()
            .requires_grad_(true)
            .unwrap();
        let y = layer_norm(&x, &[l], Some(&w), None, 1e-5).unwrap();
        let target = Tensor::from_vec(t0.clone(), &[n]).unwrap();
        let ce = loss::cross_entropy(&y, &target, None, -100, Reduction::Mean, 0.1).unwrap();
        let mut out = grads(&ce, &[x, w]);
        out.push(
            ce.to_dtype(DType::Float64)
                .unwrap()
                .to_vec::<f64>()
                .unwrap(),
        );
        out
    };
    autograd::set_num_threads(1).unwrap();
    let one = run();
    autograd::set_num_threads(2).unwrap();
    let two = run();
    autograd::set_num_threads(3).unwrap();
    let three = run();
    assert!(one == two && two == three);
}
