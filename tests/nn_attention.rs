//! Scaled dot-product attention: the fused kernel against a direct float64 reference
//! `softmax(Q Kᵀ scale + mask) V`, its gradients against central finite differences of that
//! reference (directional, across tile boundaries), the composed double-backward against the
//! fused backward, and errors instead of panics on bad input.

mod common;

use common::{assert_close, leaf};
use ferrograd::autograd::{self, GradOptions};
use ferrograd::ops::nn::attention::{scaled_dot_product_attention, SdpaOptions};
use ferrograd::{DType, Tensor};

/// Deterministic pseudo-random values in (-1, 1).
fn values(n: usize, seed: u64) -> Vec<f64> {
    let mut z = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            z ^= z << 13;
            z ^= z >> 7;
            z ^= z << 17;
            (z >> 11) as f64 / (1u64 << 52) as f64 - 1.0
        })
        .collect()
}

struct Problem {
    nb: usize,
    l: usize,
    s: usize,
    e: usize,
    ev: usize,
    causal: bool,
    /// `l x s`, true = take part (shared by every batch entry).
    mask: Option<Vec<bool>>,
}

/// The reference: per batch entry, scores, a softmax with fully masked rows giving 0, times V.
fn reference(p: &Problem, q: &[f64], k: &[f64], v: &[f64]) -> Vec<f64> {
    let scale = 1.0 / (p.e as f64).sqrt();
    let mut out = vec![0.0; p.nb * p.l * p.ev];
    for b in 0..p.nb {
        for i in 0..p.l {
            let mut sc: Vec<f64> = (0..p.s)
                .map(|j| {
                    let allowed =
                        p.mask.as_ref().is_none_or(|m| m[i * p.s + j]) && !(p.causal && j > i);
                    if !allowed {
                        return f64::NEG_INFINITY;
                    }
                    (0..p.e)
                        .map(|c| q[(b * p.l + i) * p.e + c] * k[(b * p.s + j) * p.e + c])
                        .sum::<f64>()
                        * scale
                })
                .collect();
            let m = sc.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            if m == f64::NEG_INFINITY {
                continue;
            }
            sc.iter_mut().for_each(|x| *x = (*x - m).exp());
            let z: f64 = sc.iter().sum();
            for c in 0..p.ev {
                out[(b * p.l + i) * p.ev + c] = (0..p.s)
                    .map(|j| sc[j] / z * v[(b * p.s + j) * p.ev + c])
                    .sum();
            }
        }
    }
    out
}

fn mask_tensor(p: &Problem) -> Option<Tensor> {
    p.mask
        .as_ref()
        .map(|m| Tensor::from_vec(m.clone(), &[p.l, p.s]).unwrap())
}

fn run(p: &Problem, q: &Tensor, k: &Tensor, v: &Tensor) -> Tensor {
    let mask = mask_tensor(p);
    let opts = SdpaOptions {
        attn_mask: mask.as_ref(),
        is_causal: p.causal,
        ..Default::default()
    };
    scaled_dot_product_attention(q, k, v, &opts).unwrap()
}

fn check(p: Problem) {
    let (qs, ks, vs) = ([p.nb, p.l, p.e], [p.nb, p.s, p.e], [p.nb, p.s, p.ev]);
    let qv = values(p.nb * p.l * p.e, 1);
    let kv = values(p.nb * p.s * p.e, 2);
    let vv = values(p.nb * p.s * p.ev, 3);
    let (q, k, v) = (leaf(&qv, &qs), leaf(&kv, &ks), leaf(&vv, &vs));
    let out = run(&p, &q, &k, &v);
    assert_eq!(out.shape(), &[p.nb, p.l, p.ev]);
    let want = reference(&p, &qv, &kv, &vv);
    assert_close(&out.to_vec::<f64>().unwrap(), &want, 1e-12);
    // float32 through the same kernel
    let f32s = |t: &Tensor| t.detach().to_dtype(DType::Float32).unwrap();
    let o32 = run(&p, &f32s(&q), &f32s(&k), &f32s(&v));
    assert_close(
        &o32.to_dtype(DType::Float64)
            .unwrap()
            .to_vec::<f64>()
            .unwrap(),
        &want,
        1e-5,
    );
    // gradients of <g, out> against directional central differences of the reference
    let g = values(want.len(), 4);
    let gt = Tensor::from_vec(g.clone(), out.shape()).unwrap();
    let grads = autograd::grad(
        &[out],
        &[q.clone(), k.clone(), v.clone()],
        GradOptions {
            grad_outputs: vec![Some(gt)],
            ..Default::default()
        },
    )
    .unwrap();
    let loss = |q: &[f64], k: &[f64], v: &[f64]| -> f64 {
        reference(&p, q, k, v)
            .iter()
            .zip(&g)
            .map(|(a, b)| a * b)
            .sum()
    };
    let eps = 1e-6;
    for (which, grad) in grads.iter().enumerate() {
        let grad = grad.as_ref().unwrap().to_vec::<f64>().unwrap();
        for seed in 10..13 {
            let d = values(grad.len(), seed + which as u64 * 7);
            let shifted = |sign: f64| {
                let mut xs = [qv.clone(), kv.clone(), vv.clone()];
                for (x, dx) in xs[which].iter_mut().zip(&d) {
                    *x += sign * eps * dx;
                }
                loss(&xs[0], &xs[1], &xs[2])
            };
            let fd = (shifted(1.0) - shifted(-1.0)) / (2.0 * eps);
            let an: f64 = grad.iter().zip(&d).map(|(a, b)| a * b).sum();
            assert!(
                (an - fd).abs() <= 1e-6 * (1.0 + fd.abs()),
                "input {which}: analytic {an} vs finite differences {fd}"
            );
        }
    }
}

#[test]
fn small_problem_matches_reference_and_finite_differences() {
    check(Problem {
        nb: 2,
        l: 5,
        s: 7,
        e: 4,
        ev: 3,
        causal: false,
        mask: None,
    });
}

#[test]
fn causal_problem_crossing_tiles_matches_reference() {
    check(Problem {
        nb: 2,
        l: 150,
        s: 140,
        e: 8,
        ev: 5,
        causal: true,
        mask: None,
    });
}

#[test]
fn masked_problem_with_fully_masked_rows_matches_reference() {
    let (l, s) = (70, 135);
    let mut mask: Vec<bool> = values(l * s, 9).iter().map(|x| *x > -0.4).collect();
    mask[3 * s..4 * s].fill(false);
    check(Problem {
        nb: 3,
        l,
        s,
        e: 6,
        ev: 9,
        causal: false,
        mask: Some(mask),
    });
}

#[test]
fn create_graph_backward_matches_the_fused_one() {
    let (q, k, v) = (
        leaf(&values(24, 1), &[2, 3, 4]),
        leaf(&values(40, 2), &[2, 5, 4]),
        leaf(&values(30, 3), &[2, 5, 3]),
    );
    let out = scaled_dot_product_attention(&q, &k, &v, &SdpaOptions::default()).unwrap();
    let loss = out.mul(&out).unwrap().sum().unwrap();
    let grads = |create_graph: bool| {
        autograd::grad(
            std::slice::from_ref(&loss),
            &[q.clone(), k.clone(), v.clone()],
            GradOptions {
                retain_graph: Some(true),
                create_graph,
                ..Default::default()
            },
        )
        .unwrap()
    };
    let (fused, composed) = (grads(false), grads(true));
    for (a, b) in fused.iter().zip(&composed) {
        let b = b.as_ref().unwrap();
        assert!(
            b.requires_grad(),
            "a create_graph gradient is differentiable"
        );
        assert_close(
            &a.as_ref().unwrap().to_vec::<f64>().unwrap(),
            &b.detach().to_vec::<f64>().unwrap(),
            1e-12,
        );
    }
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    let t = |shape: &[usize]| Tensor::zeros(shape, DType::Float32);
    let opts = SdpaOptions::default();
    assert!(scaled_dot_product_attention(&t(&[4]), &t(&[4]), &t(&[4]), &opts).is_err());
    assert!(
        scaled_dot_product_attention(&t(&[2, 3, 4]), &t(&[2, 5, 3]), &t(&[2, 5, 4]), &opts)
            .is_err()
    );
    assert!(
        scaled_dot_product_attention(&t(&[2, 3, 4]), &t(&[2, 5, 4]), &t(&[2, 6, 4]), &opts)
            .is_err()
    );
    assert!(
        scaled_dot_product_attention(&t(&[3, 3, 4]), &t(&[2, 5, 4]), &t(&[2, 5, 4]), &opts)
            .is_err()
    );
    let bad_mask = t(&[4, 5]);
    let with_mask = SdpaOptions {
        attn_mask: Some(&bad_mask),
        ..Default::default()
    };
    assert!(scaled_dot_product_attention(
        &t(&[2, 3, 4]),
        &t(&[2, 5, 4]),
        &t(&[2, 5, 4]),
        &with_mask
    )
    .is_err());
    let dropout = SdpaOptions {
        dropout_p: 2.0,
        ..Default::default()
    };
    assert!(
        scaled_dot_product_attention(&t(&[2, 3, 4]), &t(&[2, 5, 4]), &t(&[2, 5, 4]), &dropout)
            .is_err()
    );
}
