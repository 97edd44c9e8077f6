//! Normalisation ops: forward against closed forms, gradients (fused kernel) and second
//! derivatives (differentiable backward) against float64 finite differences, running
//! statistics, and errors.

mod common;

use common::{assert_close, fd_grad, leaf};
use ferrograd::autograd::{self, GradOptions};
use ferrograd::ops::nn::norm::{batch_norm, group_norm, instance_norm, layer_norm, rms_norm};
use ferrograd::{ErrorKind, Tensor};

fn vals(n: usize, seed: f64) -> Vec<f64> {
    (0..n)
        .map(|i| (i as f64 * 0.913 + seed).sin() * 1.7 + (i as f64 * 0.37).cos())
        .collect()
}

fn t(v: Vec<f64>, shape: &[usize]) -> Tensor {
    Tensor::from_vec(v, shape).unwrap()
}

/// A fixed weighting so the scalar loss has a non-trivial gradient.
fn loss(y: &Tensor, seed: f64) -> Tensor {
    let w = t(vals(y.numel(), seed), y.shape());
    y.mul(&w).unwrap().sum().unwrap()
}

fn grad_of(y: &Tensor, x: &Tensor) -> Vec<f64> {
    let g = autograd::grad(
        std::slice::from_ref(y),
        std::slice::from_ref(x),
        GradOptions::default(),
    )
    .unwrap();
    g[0].clone().unwrap().to_vec::<f64>().unwrap()
}

/// Gradient of every input of `f` (fused backward) against finite differences.
fn check_grads(f: &dyn Fn(&[Tensor]) -> Tensor, inputs: &[(Vec<f64>, Vec<usize>)]) {
    for k in 0..inputs.len() {
        let leaves: Vec<Tensor> = inputs.iter().map(|(v, s)| leaf(v, s)).collect();
        let y = loss(&f(&leaves), 0.3);
        let analytic = grad_of(&y, &leaves[k]);
        let numeric = fd_grad(
            |xk| {
                let mut ins: Vec<Tensor> = inputs.iter().map(|(v, s)| t(v.clone(), s)).collect();
                ins[k] = xk.clone();
                loss(&f(&ins), 0.3)
            },
            &inputs[k].0,
            &inputs[k].1,
        );
        assert_close(&analytic, &numeric, 1e-6);
    }
}

/// d/dx of Σ (df/dx · v) (through the differentiable backward) against finite differences of
/// the first derivative.
fn check_second(f: &dyn Fn(&Tensor) -> Tensor, x0: &[f64], shape: &[usize]) {
    let v = t(vals(x0.len(), 2.0), shape);
    let first = |x: &Tensor, create: bool| -> Tensor {
        let y = loss(&f(x), 0.7);
        let g = autograd::grad(
            &[y],
            std::slice::from_ref(x),
            GradOptions {
                create_graph: create,
                ..Default::default()
            },
        )
        .unwrap();
        g[0].clone().unwrap().mul(&v).unwrap().sum().unwrap()
    };
    let x = leaf(x0, shape);
    let analytic = grad_of(&first(&x, true), &x);
    let numeric = fd_grad(
        |xp| first(&xp.clone().requires_grad_(true).unwrap(), false),
        x0,
        shape,
    );
    assert_close(&analytic, &numeric, 1e-5);
}

#[test]
fn layer_norm_matches_closed_form() {
    let (n, d) = (3, 5);
    let x = vals(n * d, 0.0);
    let (w, b) = (vals(d, 1.0), vals(d, 2.0));
    let y = layer_norm(
        &t(x.clone(), &[n, d]),
        &[d],
        Some(&t(w.clone(), &[d])),
        Some(&t(b.clone(), &[d])),
        1e-5,
    )
    .unwrap();
    let mut expected = Vec::new();
    for r in x.chunks(d) {
        let m = r.iter().sum::<f64>() / d as f64;
        let var = r.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / d as f64;
        for (i, v) in r.iter().enumerate() {
            expected.push((v - m) / (var + 1e-5).sqrt() * w[i] + b[i]);
        }
    }
    assert_close(&y.to_vec::<f64>().unwrap(), &expected, 1e-12);
}

#[test]
fn batch_norm_training_normalises_channels_and_updates_running_stats() {
    let (n, c, l) = (4, 3, 5);
    let x = vals(n * c * l, 0.5);
    let rm = Tensor::zeros(&[c], ferrograd::DType::Float64);
    let rv = Tensor::ones(&[c], ferrograd::DType::Float64);
    let v0 = rm.version();
    let y = batch_norm(
        &t(x.clone(), &[n, c, l]),
        Some(&rm),
        Some(&rv),
        None,
        None,
        true,
        0.1,
        0.0,
    )
    .unwrap()
    .to_vec::<f64>()
    .unwrap();
    for ch in 0..c {
        let idx: Vec<usize> = (0..n)
            .flat_map(|i| (0..l).map(move |j| (i * c + ch) * l + j))
            .collect();
        let m = idx.iter().map(|&i| y[i]).sum::<f64>() / idx.len() as f64;
        let var = idx.iter().map(|&i| (y[i] - m).powi(2)).sum::<f64>() / idx.len() as f64;
        assert!(m.abs() < 1e-12 && (var - 1.0).abs() < 1e-10);
        let xm = idx.iter().map(|&i| x[i]).sum::<f64>() / idx.len() as f64;
        let xv = idx.iter().map(|&i| (x[i] - xm).powi(2)).sum::<f64>() / (idx.len() - 1) as f64;
        assert_close(&[rm.to_vec::<f64>().unwrap()[ch]], &[0.1 * xm], 1e-12);
        assert_close(&[rv.to_vec::<f64>().unwrap()[ch]], &[0.9 + 0.1 * xv], 1e-12);
    }
    assert!(rm.version() > v0);
}

#[test]
fn gradients_match_finite_differences() {
    let x = (vals(24, 0.0), vec![2, 4, 3]);
    let c = |s: f64| (vals(4, s), vec![4]);
    check_grads(
        &|i| layer_norm(&i[0], &[4, 3], Some(&i[1]), Some(&i[2]), 1e-5).unwrap(),
        &[
            x.clone(),
            (vals(12, 1.0), vec![4, 3]),
            (vals(12, 2.0), vec![4, 3]),
        ],
    );
    check_grads(
        &|i| rms_norm(&i[0], &[3], Some(&i[1]), None).unwrap(),
        &[x.clone(), (vals(3, 1.0), vec![3])],
    );
    check_grads(
        &|i| group_norm(&i[0], 2, Some(&i[1]), Some(&i[2]), 1e-5).unwrap(),
        &[x.clone(), c(1.0), c(2.0)],
    );
    check_grads(
        &|i| batch_norm(&i[0], None, None, Some(&i[1]), Some(&i[2]), true, 0.1, 1e-5).unwrap(),
        &[x.clone(), c(1.0), c(2.0)],
    );
    let (rm, rv) = (t(vals(4, 3.0), &[4]), t(vec![0.5, 1.0, 1.5, 2.0], &[4]));
    check_grads(
        &|i| {
            batch_norm(
                &i[0],
                Some(&rm),
                Some(&rv),
                Some(&i[1]),
                Some(&i[2]),
                false,
                0.1,
                1e-5,
            )
            .unwrap()
        },
        &[x.clone(), c(1.0), c(2.0)],
    );
    check_grads(
        &|i| instance_norm(&i[0], None, None, Some(&i[1]), Some(&i[2]), true, 0.1, 1e-5).unwrap(),
        &[x, c(1.0), c(2.0)],
    );
}

#[test]
fn second_derivatives_match_finite_differences() {
    let x = vals(24, 0.0);
    let s = [2, 4, 3];
    let w = t(vals(4, 1.0), &[4]);
    check_second(&|x| layer_norm(x, &[3], None, None, 1e-5).unwrap(), &x, &s);
    check_second(&|x| rms_norm(x, &[4, 3], None, Some(1e-4)).unwrap(), &x, &s);
    check_second(&|x| group_norm(x, 2, Some(&w), None, 1e-5).unwrap(), &x, &s);
    check_second(
        &|x| batch_norm(x, None, None, Some(&w), None, true, 0.1, 1e-5).unwrap(),
        &x,
        &s,
    );
}

#[test]
fn bad_input_gives_torch_errors() {
    let x = t(vals(24, 0.0), &[2, 4, 3]);
    let e = layer_norm(&x, &[4], None, None, 1e-5).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Runtime);
    assert_eq!(
        e.to_string(),
        "Given normalized_shape=[4], expected input with shape [*, 4], but got input of size[2, 4, 3]"
    );
    let e = group_norm(&x, 3, None, None, 1e-5).unwrap_err();
    assert!(e
        .to_string()
        .starts_with("Expected number of channels in input to be divisible by num_groups"));
    let rm = Tensor::zeros(&[3], ferrograd::DType::Float64);
    let e = batch_norm(&x, Some(&rm), None, None, None, true, 0.1, 1e-5).unwrap_err();
    assert_eq!(
        e.to_string(),
        "running_mean should contain 4 elements not 3"
    );
}
