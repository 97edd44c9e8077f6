//! Distances, normalisation, prelu, one_hot and embedding_bag from Rust: values against closed
//! forms, gradients against float64 central finite differences (first order, and second order
//! through the differentiable backward), torch's conventions at zero, and bad input as errors.

mod common;

use common::{assert_close, fd_grad, leaf};
use ferrograd::autograd::{self, GradOptions};
use ferrograd::ops::nn::distance::{cosine_similarity, normalize, p_norm, pairwise_distance};
use ferrograd::ops::nn::prelu::prelu;
use ferrograd::ops::nn::sparse::{embedding_bag, one_hot, BagMode};
use ferrograd::{ErrorKind, Tensor};

/// Deterministic values in [-2, 2) away from 0.
fn vals(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let u = (s >> 11) as f64 / (1u64 << 53) as f64;
            let v = 4.0 * u - 2.0;
            if v.abs() < 0.1 {
                v + 0.3
            } else {
                v
            }
        })
        .collect()
}

fn grad_of(out: &Tensor, x: &Tensor, create_graph: bool) -> Tensor {
    autograd::grad(
        std::slice::from_ref(out),
        std::slice::from_ref(x),
        GradOptions {
            create_graph,
            ..Default::default()
        },
    )
    .unwrap()[0]
        .clone()
        .unwrap()
}

/// A weighted sum of `f(x)`, so every output element matters to the finite differences.
fn weighted(y: &Tensor) -> Tensor {
    let w: Vec<f64> = (0..y.numel()).map(|i| 0.3 + 0.1 * i as f64).collect();
    y.mul(&Tensor::from_vec(w, y.shape()).unwrap())
        .unwrap()
        .sum()
        .unwrap()
}

/// First and second derivatives of `weighted(f(x))` against finite differences.
fn check(f: &dyn Fn(&Tensor) -> Tensor, shape: &[usize], seed: u64) {
    let n: usize = shape.iter().product();
    let xv = vals(n, seed);
    let x = leaf(&xv, shape);
    let g = grad_of(&weighted(&f(&x)), &x, true);
    let want = fd_grad(|t| weighted(&f(t)), &xv, shape);
    assert_close(&g.to_vec::<f64>().unwrap(), &want, 1e-6);
    // second order: d/dx Σ_i g_i(x) c_i
    let c: Vec<f64> = (0..n).map(|i| 1.0 - 0.05 * i as f64).collect();
    let ct = Tensor::from_vec(c.clone(), shape).unwrap();
    let h = grad_of(&g.mul(&ct).unwrap().sum().unwrap(), &x, false);
    let want2 = fd_grad(
        |t| {
            let t = t.clone().requires_grad_(true).unwrap();
            let gt = grad_of(&weighted(&f(&t)), &t, false);
            gt.mul(&Tensor::from_vec(c.clone(), shape).unwrap())
                .unwrap()
                .sum()
                .unwrap()
        },
        &xv,
        shape,
    );
    assert_close(&h.to_vec::<f64>().unwrap(), &want2, 1e-5);
}

#[test]
fn p_norm_matches_closed_form_and_differences() {
    let x = Tensor::from_vec(vec![3.0, -4.0, 0.0, 1.0, 2.0, -2.0], &[2, 3]).unwrap();
    let n2 = p_norm(&x, 2.0, 1, false).unwrap().to_vec::<f64>().unwrap();
    assert_close(&n2, &[5.0, 3.0], 1e-15);
    let ninf = p_norm(&x, f64::INFINITY, 0, false)
        .unwrap()
        .to_vec::<f64>()
        .unwrap();
    assert_close(&ninf, &[3.0, 4.0, 2.0], 0.0);
    let n0 = p_norm(&x, 0.0, 1, true).unwrap();
    assert_eq!(n0.shape(), &[2, 1]);
    assert_close(&n0.to_vec::<f64>().unwrap(), &[2.0, 3.0], 0.0);
    for p in [2.0, 1.0, 3.0, 0.5, 1.5, -1.0] {
        check(&|t| p_norm(t, p, 1, false).unwrap(), &[3, 4], 1);
        check(&|t| p_norm(t, p, 0, true).unwrap(), &[3, 4], 2);
    }
}

#[test]
fn p_norm_gradient_is_zero_at_a_zero_norm() {
    let x = leaf(&[0.0, 0.0, 0.0], &[3]);
    for p in [2.0, 3.0, 1.5, 0.5] {
        let g = grad_of(&p_norm(&x, p, 0, false).unwrap(), &x, false);
        assert_eq!(g.to_vec::<f64>().unwrap(), vec![0.0; 3], "p = {p}");
    }
    // inf: split evenly among the ties
    let y = leaf(&[1.0, -3.0, 3.0], &[3]);
    let g = grad_of(&p_norm(&y, f64::INFINITY, 0, false).unwrap(), &y, false);
    assert_close(&g.to_vec::<f64>().unwrap(), &[0.0, -0.5, 0.5], 0.0);
}

#[test]
fn pairwise_distance_is_the_norm_of_the_difference() {
    let a = vals(8, 3);
    let b = vals(4, 4);
    let at = Tensor::from_vec(a.clone(), &[2, 4]).unwrap();
    let bt = Tensor::from_vec(b.clone(), &[4]).unwrap();
    let d = pairwise_distance(&at, &bt, 2.0, 1e-6, false).unwrap();
    let want: Vec<f64> = (0..2)
        .map(|r| {
            (0..4)
                .map(|k| (a[r * 4 + k] - b[k] + 1e-6).powi(2))
                .sum::<f64>()
                .sqrt()
        })
        .collect();
    assert_close(&d.to_vec::<f64>().unwrap(), &want, 1e-14);
    let bt2 = Tensor::from_vec(b, &[4]).unwrap();
    check(
        &|t| pairwise_distance(t, &bt2, 3.0, 1e-6, true).unwrap(),
        &[2, 4],
        5,
    );
}

#[test]
fn cosine_similarity_matches_closed_form_and_differences() {
    let a = vals(12, 6);
    let b = vals(12, 7);
    let at = Tensor::from_vec(a.clone(), &[3, 4]).unwrap();
    let bt = Tensor::from_vec(b.clone(), &[3, 4]).unwrap();
    let c = cosine_similarity(&at, &bt, 1, 1e-8).unwrap();
    let want: Vec<f64> = (0..3)
        .map(|r| {
            let (x, y) = (&a[r * 4..r * 4 + 4], &b[r * 4..r * 4 + 4]);
            let dot: f64 = x.iter().zip(y).map(|(u, v)| u * v).sum();
            let nx: f64 = x.iter().map(|u| u * u).sum::<f64>().sqrt();
            let ny: f64 = y.iter().map(|u| u * u).sum::<f64>().sqrt();
            dot / (nx * ny)
        })
        .collect();
    assert_close(&c.to_vec::<f64>().unwrap(), &want, 1e-14);
    // broadcast: (2, 1, 4) against (3, 4) along the last dim
    let b34 = Tensor::from_vec(b.clone(), &[3, 4]).unwrap();
    check(
        &|t| cosine_similarity(t, &b34, -1, 1e-8).unwrap(),
        &[2, 1, 4],
        8,
    );
    let a34 = Tensor::from_vec(a, &[3, 4]).unwrap();
    check(
        &|t| cosine_similarity(&a34, t, 0, 1e-8).unwrap(),
        &[3, 4],
        9,
    );
}

#[test]
fn cosine_similarity_clamps_each_norm() {
    // ‖x1‖ = 1e-10 < eps: x1 is divided by eps, not by its norm.
    let a = Tensor::from_vec(vec![1e-10, 0.0], &[1, 2]).unwrap();
    let b = Tensor::from_vec(vec![1e3, 0.0], &[1, 2]).unwrap();
    let c = cosine_similarity(&a, &b, 1, 1e-8).unwrap().item().unwrap();
    assert!((c - 0.01).abs() < 1e-15, "{c}");
    let z = Tensor::zeros(&[1, 2], ferrograd::DType::Float64);
    assert_eq!(
        cosine_similarity(&z, &b, 1, 1e-8).unwrap().item().unwrap(),
        0.0
    );
}

#[test]
fn normalize_matches_closed_form_and_differences() {
    let x = Tensor::from_vec(vec![3.0, 4.0, 0.0, 0.0], &[2, 2]).unwrap();
    let y = normalize(&x, 2.0, 1, 1e-12).unwrap();
    assert_close(&y.to_vec::<f64>().unwrap(), &[0.6, 0.8, 0.0, 0.0], 1e-15);
    for (p, d) in [(2.0, 1), (1.0, 0), (3.0, -1), (0.5, 1)] {
        check(&|t| normalize(t, p, d, 1e-12).unwrap(), &[2, 3, 2], 10);
    }
    // a large eps: below it the norm gets no gradient, x / eps is linear
    check(&|t| normalize(t, 2.0, 1, 10.0).unwrap(), &[2, 3], 11);
}

#[test]
fn normalize_zero_row_gradient_is_g_over_eps() {
    let x = leaf(&[0.0, 0.0, 0.0], &[1, 3]);
    let y = normalize(&x, 2.0, 1, 0.5).unwrap();
    let g = grad_of(&y.sum().unwrap(), &x, true);
    assert_close(&g.to_vec::<f64>().unwrap(), &[2.0, 2.0, 2.0], 1e-15);
}

#[test]
fn prelu_matches_closed_form_and_differences() {
    let w = leaf(&[0.25, 0.5], &[2]);
    let x = leaf(&[1.0, -2.0, -4.0, 3.0, -1.0, 2.0, 5.0, -6.0], &[2, 2, 2]);
    let y = prelu(&x, &w).unwrap();
    assert_close(
        &y.to_vec::<f64>().unwrap(),
        &[1.0, -0.5, -2.0, 3.0, -0.25, 2.0, 5.0, -3.0],
        0.0,
    );
    let gw = grad_of(&y.sum().unwrap(), &w, false);
    assert_close(&gw.to_vec::<f64>().unwrap(), &[-3.0, -10.0], 0.0);
    let wv = vec![0.2, 0.7, 0.4];
    check(
        &|t| {
            prelu(t, &Tensor::from_vec(wv.clone(), &[3]).unwrap())
                .unwrap()
                .mul(t)
                .unwrap()
        },
        &[2, 3, 2],
        12,
    );
    let xv = Tensor::from_vec(vals(12, 13), &[2, 3, 2]).unwrap();
    check(
        &|t| prelu(&xv, t).unwrap().mul(&t.sum().unwrap()).unwrap(),
        &[3],
        14,
    );
}

#[test]
fn prelu_bad_input_is_an_error() {
    let x = Tensor::zeros(&[2, 3], ferrograd::DType::Float64);
    let e = prelu(&x, &Tensor::zeros(&[2], ferrograd::DType::Float64)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Runtime);
    let e = prelu(&x, &Tensor::zeros(&[1], ferrograd::DType::Float32)).unwrap_err();
    assert!(e.to_string().contains("Type promoting not supported"));
}

#[test]
fn one_hot_encodes_and_checks() {
    let i = Tensor::from_vec(vec![2i64, 0, 1], &[3]).unwrap();
    let o = one_hot(&i, -1).unwrap();
    assert_eq!(o.shape(), &[3, 3]);
    assert_eq!(o.to_vec::<i64>().unwrap(), vec![0, 0, 1, 1, 0, 0, 0, 1, 0]);
    assert!(one_hot(&i, 2).is_err());
    let neg = Tensor::from_vec(vec![-1i64], &[1]).unwrap();
    assert!(one_hot(&neg, 3).is_err());
}

fn bag_weight() -> Tensor {
    leaf(&vals(15, 20), &[5, 3])
}

#[test]
fn embedding_bag_modes_match_closed_forms() {
    let w = bag_weight();
    let wv = w.to_vec::<f64>().unwrap();
    let idx = Tensor::from_vec(vec![0i64, 2, 4, 1, 2], &[5]).unwrap();
    let off = Tensor::from_vec(vec![0i64, 3, 3], &[3]).unwrap();
    let row = |r: usize| &wv[r * 3..r * 3 + 3];
    let sum = embedding_bag(&w, &idx, &off, BagMode::Sum, None, false, None, false).unwrap();
    let mut want = vec![0.0; 9];
    for k in 0..3 {
        want[k] = row(0)[k] + row(2)[k] + row(4)[k];
        want[6 + k] = row(1)[k] + row(2)[k];
    }
    assert_close(&sum.to_vec::<f64>().unwrap(), &want, 1e-15);
    let mean = embedding_bag(&w, &idx, &off, BagMode::Mean, None, false, Some(2), false).unwrap();
    let mut want = vec![0.0; 9];
    for k in 0..3 {
        want[k] = (row(0)[k] + row(4)[k]) / 2.0;
        want[6 + k] = row(1)[k];
    }
    assert_close(&mean.to_vec::<f64>().unwrap(), &want, 1e-15);
    let max = embedding_bag(&w, &idx, &off, BagMode::Max, None, false, None, false).unwrap();
    let mut want = vec![0.0; 9];
    for k in 0..3 {
        want[k] = row(0)[k].max(row(2)[k]).max(row(4)[k]);
        want[6 + k] = row(1)[k].max(row(2)[k]);
    }
    assert_close(&max.to_vec::<f64>().unwrap(), &want, 0.0);
}

#[test]
fn embedding_bag_gradients_match_differences() {
    let idx = Tensor::from_vec(vec![0i64, 2, 4, 1, 2, 2, 3], &[7]).unwrap();
    let off = Tensor::from_vec(vec![0i64, 3, 3, 5], &[4]).unwrap();
    for mode in [BagMode::Sum, BagMode::Mean, BagMode::Max] {
        let (i, o) = (idx.clone(), off.clone());
        // times a function of w, so the second derivative is not zero
        check(
            &|w| {
                embedding_bag(w, &i, &o, mode, None, false, Some(4), false)
                    .unwrap()
                    .mul(&w.sum().unwrap())
                    .unwrap()
            },
            &[5, 3],
            21,
        );
    }
    let w = Tensor::from_vec(vals(15, 22), &[5, 3]).unwrap();
    let (i, o) = (idx.clone(), off.clone());
    check(
        &|p| {
            embedding_bag(&w, &i, &o, BagMode::Sum, Some(p), false, None, false)
                .unwrap()
                .mul(&p.sum().unwrap())
                .unwrap()
        },
        &[7],
        23,
    );
}

#[test]
fn embedding_bag_bad_input_is_an_error() {
    let w = bag_weight();
    let idx = Tensor::from_vec(vec![0i64, 7], &[2]).unwrap();
    let off = Tensor::from_vec(vec![0i64], &[1]).unwrap();
    assert!(embedding_bag(&w, &idx, &off, BagMode::Sum, None, false, None, false).is_err());
    let idx = Tensor::from_vec(vec![0i64, 1], &[2]).unwrap();
    let off = Tensor::from_vec(vec![1i64], &[1]).unwrap();
    let e = embedding_bag(&w, &idx, &off, BagMode::Sum, None, false, None, false).unwrap_err();
    assert!(e.to_string().starts_with("offsets[0] has to be 0"));
}

#[test]
fn margin_losses_match_closed_forms_and_differences() {
    use ferrograd::ops::nn::loss::Reduction;
    use ferrograd::ops::nn::margin_loss as ml;
    let (a, b) = (vals(12, 30), vals(12, 31));
    let y = Tensor::from_vec(vec![1.0, -1.0, 1.0], &[3]).unwrap();
    let at = Tensor::from_vec(a.clone(), &[3, 4]).unwrap();
    let bt = Tensor::from_vec(b.clone(), &[3, 4]).unwrap();
    let l = ml::cosine_embedding_loss(&at, &bt, &y, 0.1, Reduction::None).unwrap();
    let want: Vec<f64> = (0..3)
        .map(|r| {
            let (x, z) = (&a[r * 4..r * 4 + 4], &b[r * 4..r * 4 + 4]);
            let dot: f64 = x.iter().zip(z).map(|(u, v)| u * v).sum();
            let n = |v: &[f64]| v.iter().map(|u| u * u).sum::<f64>() + 1e-12;
            let cos = dot / (n(x) * n(z)).sqrt();
            if r == 1 {
                (cos - 0.1).max(0.0)
            } else {
                1.0 - cos
            }
        })
        .collect();
    assert_close(&l.to_vec::<f64>().unwrap(), &want, 1e-14);
    let y2 = y.clone();
    check(
        &|t| ml::cosine_embedding_loss(t, &bt, &y2, -0.9, Reduction::Sum).unwrap(),
        &[3, 4],
        32,
    );
    let (p, n) = (bt.clone(), Tensor::from_vec(vals(12, 33), &[3, 4]).unwrap());
    check(
        &|t| ml::triplet_margin_loss(t, &p, &n, 5.0, 2.0, 1e-6, true, Reduction::Mean).unwrap(),
        &[3, 4],
        34,
    );
    let rate = Tensor::from_vec(a.iter().map(|v| v.abs() * 2.0).collect(), &[3, 4]).unwrap();
    check(
        &|t| ml::poisson_nll_loss(t, &rate, true, true, 1e-8, Reduction::Mean).unwrap(),
        &[3, 4],
        35,
    );
    let target = bt.clone();
    check(
        &|v| {
            let var = v.mul(v).unwrap().add_scalar(0.5).unwrap();
            ml::gaussian_nll_loss(&at, &target, &var, true, 1e-6, Reduction::Sum).unwrap()
        },
        &[3, 4],
        36,
    );
    let neg = Tensor::from_vec(vec![-1.0; 12], &[3, 4]).unwrap();
    let e = ml::gaussian_nll_loss(&at, &bt, &neg, false, 1e-6, Reduction::Mean).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
}

#[test]
fn cdist_matches_closed_form_and_differences() {
    use ferrograd::ops::nn::distance::{cdist, CdistMode};
    let (a, b) = (vals(12, 40), vals(8, 41));
    let at = Tensor::from_vec(a.clone(), &[3, 4]).unwrap();
    let bt = Tensor::from_vec(b.clone(), &[2, 4]).unwrap();
    for (p, mode) in [
        (2.0, CdistMode::Direct),
        (2.0, CdistMode::Mm),
        (1.0, CdistMode::Direct),
        (3.0, CdistMode::MmIfNecessary),
    ] {
        let d = cdist(&at, &bt, p, mode).unwrap();
        assert_eq!(d.shape(), &[3, 2]);
        let want: Vec<f64> = (0..6)
            .map(|k| {
                let (i, j) = (k / 2, k % 2);
                (0..4)
                    .map(|c| (a[i * 4 + c] - b[j * 4 + c]).abs().powf(p))
                    .sum::<f64>()
                    .powf(1.0 / p)
            })
            .collect();
        assert_close(&d.to_vec::<f64>().unwrap(), &want, 1e-12);
        check(&|t| cdist(t, &bt, p, mode).unwrap(), &[3, 4], 42);
        check(&|t| cdist(&at, t, p, mode).unwrap(), &[2, 4], 43);
    }
    let e = cdist(
        &at,
        &Tensor::zeros(&[2, 3], ferrograd::DType::Float64),
        2.0,
        CdistMode::Direct,
    )
    .unwrap_err();
    assert!(e.to_string().contains("same number of columns"));
}

#[test]
fn embedding_renorm_scales_only_used_long_rows() {
    use ferrograd::ops::nn::sparse::embedding_renorm_;
    let w = Tensor::from_vec(vec![3.0, 4.0, 0.3, 0.4, 6.0, 8.0], &[3, 2]).unwrap();
    let idx = Tensor::from_vec(vec![0i64, 1, 0], &[3]).unwrap();
    let v0 = w.version();
    embedding_renorm_(&w, &idx, 1.0, 2.0).unwrap();
    let s = 1.0 / (5.0 + 1e-7);
    assert_close(
        &w.to_vec::<f64>().unwrap(),
        &[3.0 * s, 4.0 * s, 0.3, 0.4, 6.0, 8.0],
        1e-15,
    );
    assert!(w.version() > v0);
    let bad = Tensor::from_vec(vec![3i64], &[1]).unwrap();
    assert_eq!(
        embedding_renorm_(&w, &bad, 1.0, 2.0).unwrap_err().kind(),
        ErrorKind::Index
    );
}
