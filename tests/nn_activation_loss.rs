//! The native activation, softmax and loss kernels (`ops::nn::{activation, softmax, loss}`):
//! values against closed forms, first derivatives (fused path) and second derivatives (the
//! differentiable path) against float64 finite differences, and the vectorised float32 erf
//! against float64 erf in ulps.

mod common;

use common::{assert_close, fd_grad, leaf};
use ferrograd::autograd::{self, GradOptions};
use ferrograd::kernels::vmath::UnaryF32;
use ferrograd::ops::nn::activation as act;
use ferrograd::ops::nn::loss::{self, Reduction};
use ferrograd::{DType, ErrorKind, Tensor};

/// A scalar function of one tensor, boxed so a test can list several.
type Loss<'a> = Box<dyn Fn(&Tensor) -> Tensor + 'a>;

fn grid() -> Vec<f64> {
    (0..23).map(|i| -5.3 + i as f64 * 0.47).collect()
}

/// Weights so the loss is not a plain sum (every gradient element differs).
fn weighted_sum(y: &Tensor) -> Tensor {
    let n = y.numel();
    let w = Tensor::from_vec(
        (0..n).map(|i| (i as f64 * 0.37).cos()).collect::<Vec<_>>(),
        y.shape(),
    )
    .unwrap();
    y.mul(&w).unwrap().sum().unwrap()
}

fn grad_of(f: &dyn Fn(&Tensor) -> Tensor, x: &Tensor, create_graph: bool) -> Tensor {
    let opts = GradOptions {
        create_graph,
        ..Default::default()
    };
    autograd::grad(&[f(x)], std::slice::from_ref(x), opts).unwrap()[0]
        .clone()
        .unwrap()
}

/// First derivative (fused) and a Hessian-vector product (through the differentiable backward)
/// against central differences.
fn check_derivatives(f: &dyn Fn(&Tensor) -> Tensor, xs: &[f64], shape: &[usize]) {
    let x = leaf(xs, shape);
    let g = grad_of(f, &x, false);
    assert_close(&g.to_vec::<f64>().unwrap(), &fd_grad(f, xs, shape), 1e-6);
    let gg = grad_of(f, &x, true);
    let v = Tensor::from_vec(
        (0..xs.len()).map(|i| (i as f64).sin()).collect::<Vec<_>>(),
        shape,
    )
    .unwrap();
    let hv = autograd::grad(
        &[gg.mul(&v).unwrap().sum().unwrap()],
        std::slice::from_ref(&x),
        GradOptions::default(),
    )
    .unwrap()[0]
        .clone()
        .unwrap();
    let gv = |y: &Tensor| {
        grad_of(f, &y.detach().requires_grad_(true).unwrap(), false)
            .mul(&v)
            .unwrap()
            .sum()
            .unwrap()
    };
    assert_close(&hv.to_vec::<f64>().unwrap(), &fd_grad(gv, xs, shape), 1e-5);
}

#[test]
fn activations_match_closed_forms() {
    let xs = grid();
    let x = Tensor::from_vec(xs.clone(), &[xs.len()]).unwrap();
    let sig = |v: f64| 1.0 / (1.0 + (-v).exp());
    let sp = |v: f64| (1.0 + v.exp()).ln();
    type Case = (Tensor, Box<dyn Fn(f64) -> f64>);
    let cases: Vec<Case> = vec![
        (
            act::gelu(&x, false).unwrap(),
            Box::new(|v| 0.5 * v * (1.0 + libm::erf(v / 2f64.sqrt()))),
        ),
        (
            act::gelu(&x, true).unwrap(),
            Box::new(|v| {
                0.5 * v
                    * (1.0
                        + ((2.0 / std::f64::consts::PI).sqrt() * (v + 0.044715 * v * v * v)).tanh())
            }),
        ),
        (act::silu(&x).unwrap(), Box::new(move |v| v * sig(v))),
        (act::mish(&x).unwrap(), Box::new(move |v| v * sp(v).tanh())),
        (
            act::elu(&x, 0.7).unwrap(),
            Box::new(|v| if v > 0.0 { v } else { 0.7 * (v.exp() - 1.0) }),
        ),
        (
            act::celu(&x, 1.3).unwrap(),
            Box::new(|v| v.max(0.0) + (1.3 * ((v / 1.3).exp() - 1.0)).min(0.0)),
        ),
        (act::softplus(&x, 1.0, 20.0).unwrap(), Box::new(sp)),
        (
            act::softplus(&x, 2.0, 3.0).unwrap(),
            Box::new(|v| {
                if 2.0 * v > 3.0 {
                    v
                } else {
                    (1.0 + (2.0 * v).exp()).ln() / 2.0
                }
            }),
        ),
        (
            act::hardswish(&x).unwrap(),
            Box::new(|v| v * (v + 3.0).clamp(0.0, 6.0) / 6.0),
        ),
        (
            act::hardsigmoid(&x).unwrap(),
            Box::new(|v| (v + 3.0).clamp(0.0, 6.0) / 6.0),
        ),
        (
            act::leaky_relu(&x, 0.1).unwrap(),
            Box::new(|v| if v > 0.0 { v } else { 0.1 * v }),
        ),
        (
            act::hardtanh(&x, -1.0, 2.0).unwrap(),
            Box::new(|v| v.clamp(-1.0, 2.0)),
        ),
        (act::logsigmoid(&x).unwrap(), Box::new(move |v| sig(v).ln())),
    ];
    for (k, (y, f)) in cases.iter().enumerate() {
        let want: Vec<f64> = xs.iter().map(|&v| f(v)).collect();
        let got = y.to_vec::<f64>().unwrap();
        for (i, (a, b)) in got.iter().zip(&want).enumerate() {
            assert!(
                (a - b).abs() <= 1e-12 * (1.0 + b.abs()),
                "case {k} at {}: {a} vs {b}",
                xs[i]
            );
        }
    }
}

#[test]
fn activation_derivatives_match_finite_differences() {
    // Away from the kinks of the piecewise functions (x = -3, 0, 3, and the clamps).
    let xs: Vec<f64> = grid().iter().map(|v| v + 0.013).collect();
    let fs: Vec<Loss<'_>> = vec![
        Box::new(|x| weighted_sum(&act::gelu(x, false).unwrap())),
        Box::new(|x| weighted_sum(&act::gelu(x, true).unwrap())),
        Box::new(|x| weighted_sum(&act::silu(x).unwrap())),
        Box::new(|x| weighted_sum(&act::mish(x).unwrap())),
        Box::new(|x| weighted_sum(&act::elu(x, 0.7).unwrap())),
        Box::new(|x| weighted_sum(&act::selu(x).unwrap())),
        Box::new(|x| weighted_sum(&act::softplus(x, 1.5, 4.0).unwrap())),
        Box::new(|x| weighted_sum(&act::hardswish(x).unwrap())),
        Box::new(|x| weighted_sum(&act::logsigmoid(x).unwrap())),
        Box::new(|x| weighted_sum(&act::glu(&x.reshape(&[1, 24]).unwrap(), 1).unwrap())),
        Box::new(|x| weighted_sum(&x.reshape(&[4, 6]).unwrap().softmax(1).unwrap())),
        Box::new(|x| weighted_sum(&x.reshape(&[4, 6]).unwrap().softmax(0).unwrap())),
        Box::new(|x| weighted_sum(&x.reshape(&[2, 3, 4]).unwrap().log_softmax(1).unwrap())),
        Box::new(|x| weighted_sum(&x.reshape(&[4, 6]).unwrap().log_softmax(-1).unwrap())),
    ];
    let mut xs24 = xs.clone();
    xs24.push(0.77);
    for f in &fs {
        check_derivatives(f.as_ref(), &xs24, &[24]);
    }
}

#[test]
fn softmax_rows_sum_to_one_and_log_softmax_is_x_minus_logsumexp() {
    let xs: Vec<f64> = (0..60)
        .map(|i| ((i * 7) % 13) as f64 * 3.1 - 20.0)
        .collect();
    let x = Tensor::from_vec(xs.clone(), &[3, 4, 5]).unwrap();
    for d in 0..3 {
        let s = x.softmax(d).unwrap().sum_dims(&[d], false).unwrap();
        assert_close(&s.to_vec::<f64>().unwrap(), &vec![1.0; s.numel()], 1e-14);
        let l = x.log_softmax(d).unwrap();
        let want = x.sub(&x.logsumexp(&[d], true).unwrap()).unwrap();
        assert_close(
            &l.to_vec::<f64>().unwrap(),
            &want.to_vec::<f64>().unwrap(),
            1e-13,
        );
    }
    // float32 through the vectorised path agrees with float64
    let x32 = x.to_dtype(DType::Float32).unwrap();
    let a = x32.log_softmax(2).unwrap().to_vec::<f64>().unwrap();
    let b = x.log_softmax(2).unwrap().to_vec::<f64>().unwrap();
    assert_close(&a, &b, 1e-5);
}

/// Cross entropy in f64 from its definition, per sample: (1-ε)(lse - x_t) w_t +
/// ε/C Σ_c w_c (lse - x_c), zero where ignored; mean divides by Σ w_t over counted samples.
fn ce_reference(
    x: &[f64],
    c: usize,
    t: &[i64],
    w: &[f64],
    ignore: i64,
    eps: f64,
) -> (Vec<f64>, f64) {
    let mut per = vec![];
    let mut denom = 0.0;
    for (i, &ti) in t.iter().enumerate() {
        let row = &x[i * c..(i + 1) * c];
        let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let lse = m + row.iter().map(|v| (v - m).exp()).sum::<f64>().ln();
        if ti == ignore {
            per.push(0.0);
            continue;
        }
        let smooth: f64 = (0..c).map(|k| w[k] * (lse - row[k])).sum();
        per.push((1.0 - eps) * (lse - row[ti as usize]) * w[ti as usize] + eps / c as f64 * smooth);
        denom += w[ti as usize];
    }
    (per, denom)
}

#[test]
fn cross_entropy_and_nll_match_their_definitions() {
    let (n, c) = (6, 5);
    let xs: Vec<f64> = (0..n * c)
        .map(|i| ((i * 11) % 17) as f64 * 0.9 - 7.0)
        .collect();
    let ts: Vec<i64> = vec![0, 4, 2, 1, 2, 3];
    let ws: Vec<f64> = vec![0.5, 1.0, 2.0, 0.3, 1.7];
    let x = Tensor::from_vec(xs.clone(), &[n, c]).unwrap();
    let t = Tensor::from_vec(ts.clone(), &[n]).unwrap();
    let w = Tensor::from_vec(ws.clone(), &[c]).unwrap();
    for (eps, ignore) in [(0.0, -100), (0.2, 2), (1.0, 4)] {
        let (per, denom) = ce_reference(&xs, c, &ts, &ws, ignore, eps);
        let none = loss::cross_entropy(&x, &t, Some(&w), ignore, Reduction::None, eps).unwrap();
        assert_close(&none.to_vec::<f64>().unwrap(), &per, 1e-13);
        let mean = loss::cross_entropy(&x, &t, Some(&w), ignore, Reduction::Mean, eps).unwrap();
        let want = per.iter().sum::<f64>() / denom;
        assert_close(&mean.to_vec::<f64>().unwrap(), &[want], 1e-13);
        let f = |y: &Tensor| {
            loss::cross_entropy(y, &t, Some(&w), ignore, Reduction::Mean, eps).unwrap()
        };
        check_derivatives(&f, &xs, &[n, c]);
        let g = |y: &Tensor| {
            weighted_sum(&loss::cross_entropy(y, &t, None, ignore, Reduction::None, eps).unwrap())
        };
        check_derivatives(&g, &xs, &[n, c]);
    }
    // nll_loss of log_softmax is cross_entropy
    let lp = x.log_softmax(1).unwrap();
    let a = loss::nll_loss(&lp, &t, Some(&w), 1, Reduction::Sum).unwrap();
    let b = loss::cross_entropy(&x, &t, Some(&w), 1, Reduction::Sum, 0.0).unwrap();
    assert_close(
        &a.to_vec::<f64>().unwrap(),
        &b.to_vec::<f64>().unwrap(),
        1e-13,
    );
    // nll_loss is linear in its input: first derivative only.
    let f = |y: &Tensor| loss::nll_loss(y, &t, Some(&w), 1, Reduction::Mean).unwrap();
    let g = grad_of(&f, &leaf(&xs, &[n, c]), false);
    assert_close(&g.to_vec::<f64>().unwrap(), &fd_grad(f, &xs, &[n, c]), 1e-6);
}

#[test]
fn cross_entropy_over_extra_dims_equals_the_moved_class_dim() {
    // (N, C, d) against the same samples laid out as (N*d, C).
    let (n, c, d) = (2, 3, 4);
    let xs: Vec<f64> = (0..n * c * d).map(|i| ((i * 5) % 7) as f64 - 3.0).collect();
    let x = Tensor::from_vec(xs.clone(), &[n, c, d]).unwrap();
    let ts: Vec<i64> = (0..n * d).map(|i| (i % c) as i64).collect();
    let t = Tensor::from_vec(ts.clone(), &[n, d]).unwrap();
    let flat = x.permute(&[0, 2, 1]).unwrap().reshape(&[n * d, c]).unwrap();
    let tf = Tensor::from_vec(ts, &[n * d]).unwrap();
    let a = loss::cross_entropy(&x, &t, None, -100, Reduction::None, 0.1).unwrap();
    let b = loss::cross_entropy(&flat, &tf, None, -100, Reduction::None, 0.1).unwrap();
    assert_close(
        &a.to_vec::<f64>().unwrap(),
        &b.to_vec::<f64>().unwrap(),
        1e-13,
    );
    let f = |y: &Tensor| loss::cross_entropy(y, &t, None, 0, Reduction::Mean, 0.1).unwrap();
    check_derivatives(&f, &xs, &[n, c, d]);
}

#[test]
fn pointwise_losses_match_definitions_and_finite_differences() {
    let xs: Vec<f64> = (0..12).map(|i| 0.05 + 0.075 * i as f64).collect();
    let ys: Vec<f64> = (0..12).map(|i| ((i * 5) % 12) as f64 / 12.0).collect();
    let x = Tensor::from_vec(xs.clone(), &[3, 4]).unwrap();
    let y = Tensor::from_vec(ys.clone(), &[3, 4]).unwrap();
    let mean = |f: &dyn Fn(f64, f64) -> f64| {
        xs.iter().zip(&ys).map(|(&a, &b)| f(a, b)).sum::<f64>() / 12.0
    };
    let checks: Vec<(Tensor, f64)> = vec![
        (
            loss::mse_loss(&x, &y, None, Reduction::Mean).unwrap(),
            mean(&|a, b| (a - b) * (a - b)),
        ),
        (
            loss::huber_loss(&x, &y, None, Reduction::Mean, 0.3).unwrap(),
            mean(&|a, b| {
                let z = (a - b).abs();
                if z < 0.3 {
                    0.5 * z * z
                } else {
                    0.3 * (z - 0.15)
                }
            }),
        ),
        (
            loss::smooth_l1_loss(&x, &y, Reduction::Mean, 0.4).unwrap(),
            mean(&|a, b| {
                let z = (a - b).abs();
                if z < 0.4 {
                    0.5 * z * z / 0.4
                } else {
                    z - 0.2
                }
            }),
        ),
        (
            loss::binary_cross_entropy(&x, &y, None, Reduction::Mean).unwrap(),
            mean(&|a, b| -(b * a.ln() + (1.0 - b) * (1.0 - a).ln())),
        ),
        (
            loss::binary_cross_entropy_with_logits(&x, &y, None, None, Reduction::Mean).unwrap(),
            mean(&|a, b| {
                let s = 1.0 / (1.0 + (-a).exp());
                -(b * s.ln() + (1.0 - b) * (1.0 - s).ln())
            }),
        ),
    ];
    for (k, (got, want)) in checks.iter().enumerate() {
        let g = got.to_vec::<f64>().unwrap()[0];
        assert!((g - want).abs() < 1e-13, "loss {k}: {g} vs {want}");
    }
    let fs: Vec<Loss<'_>> = vec![
        Box::new(|v| loss::mse_loss(v, &y, None, Reduction::Sum).unwrap()),
        Box::new(|v| loss::huber_loss(v, &y, None, Reduction::Mean, 0.3).unwrap()),
        Box::new(|v| loss::smooth_l1_loss(v, &y, Reduction::Mean, 0.4).unwrap()),
        Box::new(|v| loss::binary_cross_entropy(v, &y, None, Reduction::Mean).unwrap()),
        Box::new(|v| {
            weighted_sum(&loss::binary_cross_entropy(v, &y, None, Reduction::None).unwrap())
        }),
    ];
    // Off the huber / smooth-l1 kinks: shift x by a small irrational step.
    let xs2: Vec<f64> = xs.iter().map(|v| v + 0.0123).collect();
    for f in &fs {
        check_derivatives(f.as_ref(), &xs2, &[3, 4]);
    }
}

#[test]
fn bad_class_targets_are_errors_not_panics() {
    let x = Tensor::zeros(&[3, 5], DType::Float64);
    let t = Tensor::from_vec(vec![0i64, 7, 1], &[3]).unwrap();
    let e = loss::cross_entropy(&x, &t, None, -100, Reduction::Mean, 0.0).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Index);
    assert_eq!(e.to_string(), "Target 7 is out of bounds.");
    let tf = Tensor::from_vec(vec![0.0f64, 1.0, 1.0], &[3]).unwrap();
    let e = loss::nll_loss(&x, &tf, None, -100, Reduction::Mean).unwrap_err();
    assert_eq!(
        e.to_string(),
        "expected target dtype to be Long or Byte, but got Double"
    );
    let short = Tensor::from_vec(vec![0i64, 1], &[2]).unwrap();
    let e = loss::nll_loss(&x, &short, None, -100, Reduction::Mean).unwrap_err();
    assert_eq!(
        e.to_string(),
        "Expected input batch_size (3) to match target batch_size (2)."
    );
}

/// Distance in float32 ulps at the exact value (denormal spacing below the normal range).
fn ulps(got: f32, want: f64) -> f64 {
    if got as f64 == want {
        return 0.0;
    }
    let a = want.abs().max(f32::MIN_POSITIVE as f64);
    let ulp = 2f64.powi(a.log2().floor() as i32 - 23).max(2f64.powi(-149));
    ((got as f64) - want).abs() / ulp
}

#[test]
fn vectorised_erf_is_within_one_ulp_of_float64_erf() {
    let xs: Vec<f32> = (0..400_001)
        .map(|i| -8.0 + 16.0 * i as f32 / 400_000.0)
        .chain([0.0, -0.0, 1e-30, -1e-30, 1e-40, 3.9, 4.0, 10.0, 1e30])
        .collect();
    let mut out = vec![0f32; xs.len()];
    UnaryF32::Erf.apply(&xs, &mut out);
    let mut worst = (0.0, 0.0f32);
    for (&x, &y) in xs.iter().zip(&out) {
        let e = ulps(y, libm::erf(x as f64));
        if e > worst.0 {
            worst = (e, x);
        }
    }
    assert!(worst.0 <= 1.0, "{} ulp at {}", worst.0, worst.1);
    let mut special = [0f32; 3];
    UnaryF32::Erf.apply(&[f32::NAN, f32::INFINITY, f32::NEG_INFINITY], &mut special);
    assert!(special[0].is_nan());
    assert_eq!(&special[1..], &[1.0, -1.0]);
    // -0 keeps its sign
    let mut z = [1f32];
    UnaryF32::Erf.apply(&[-0.0], &mut z);
    assert!(z[0] == 0.0 && z[0].is_sign_negative());
}

#[test]
fn float32_activations_are_within_two_ulps_of_float64() {
    let xs: Vec<f64> = (0..4001).map(|i| -30.0 + 0.015 * i as f64).collect();
    let x64 = Tensor::from_vec(xs.clone(), &[xs.len()]).unwrap();
    let x32 = x64.to_dtype(DType::Float32).unwrap();
    let x64 = x32.to_dtype(DType::Float64).unwrap();
    type Act = fn(&Tensor) -> ferrograd::Result<Tensor>;
    let fs: [Act; 6] = [
        |x| act::gelu(x, false),
        |x| act::gelu(x, true),
        act::silu,
        act::mish,
        |x| act::softplus(x, 1.0, 20.0),
        act::logsigmoid,
    ];
    for (k, f) in fs.iter().enumerate() {
        let a = f(&x32).unwrap().to_vec::<f32>().unwrap();
        let b = f(&x64).unwrap().to_vec::<f64>().unwrap();
        for (i, (&p, &q)) in a.iter().zip(&b).enumerate() {
            assert!(ulps(p, q) <= 2.0, "fn {k} at {}: {p} vs {q}", xs[i]);
        }
    }
}

#[test]
fn shrinks_match_closed_forms_and_finite_differences() {
    let xs: Vec<f64> = grid().into_iter().map(|v| v * 0.3).collect();
    let n = xs.len();
    let x = leaf(&xs, &[n]);
    let h = act::hardshrink(&x, 0.5).unwrap().to_vec::<f64>().unwrap();
    let s = act::softshrink(&x, 0.5).unwrap().to_vec::<f64>().unwrap();
    for (i, &v) in xs.iter().enumerate() {
        assert_eq!(h[i], if v.abs() > 0.5 { v } else { 0.0 });
        let want = if v > 0.5 {
            v - 0.5
        } else if v < -0.5 {
            v + 0.5
        } else {
            0.0
        };
        assert!((s[i] - want).abs() < 1e-15);
    }
    let sum = |f: fn(&Tensor, f64) -> ferrograd::Result<Tensor>| {
        move |t: &Tensor| f(t, 0.5).unwrap().sum().unwrap()
    };
    for f in [act::hardshrink, act::softshrink] {
        let g = autograd::grad(
            &[sum(f)(&x)],
            std::slice::from_ref(&x),
            GradOptions::default(),
        )
        .unwrap()[0]
            .clone()
            .unwrap();
        assert_close(
            &g.to_vec::<f64>().unwrap(),
            &fd_grad(sum(f), &xs, &[n]),
            1e-8,
        );
    }
    let err = act::softshrink(&x, -0.1).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Runtime);
}

#[test]
fn feature_dropout_draws_one_mask_value_per_channel() {
    let x = Tensor::ones(&[3, 5, 4, 4], DType::Float64)
        .requires_grad_(true)
        .unwrap();
    let kind = act::Dropout {
        feature: true,
        alpha: false,
    };
    let y = act::dropout_with(&x, 0.5, kind).unwrap();
    let v = y.to_vec::<f64>().unwrap();
    for plane in v.chunks(16) {
        assert!(plane.iter().all(|&a| a == plane[0]));
        assert!(plane[0] == 0.0 || plane[0] == 2.0);
    }
    // backward multiplies by the same scaled mask
    let g = autograd::grad(
        &[y.sum().unwrap()],
        std::slice::from_ref(&x),
        GradOptions::default(),
    )
    .unwrap()[0]
        .clone()
        .unwrap();
    assert_eq!(g.to_vec::<f64>().unwrap(), v);
    let err = act::dropout_with(&Tensor::ones(&[4], DType::Float64), 0.5, kind).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Runtime);
}

#[test]
fn rrelu_eval_is_leaky_relu_at_the_mean_slope() {
    let xs = grid();
    let x = leaf(&xs, &[xs.len()]);
    let y = act::rrelu(&x, 0.1, 0.3, false).unwrap();
    let l = act::leaky_relu(&x, 0.2).unwrap();
    assert_close(
        &y.to_vec::<f64>().unwrap(),
        &l.to_vec::<f64>().unwrap(),
        1e-15,
    );
    let y = act::rrelu(&x, 0.1, 0.3, true).unwrap();
    for (o, &v) in y.to_vec::<f64>().unwrap().iter().zip(&xs) {
        if v > 0.0 {
            assert_eq!(*o, v);
        } else {
            assert!(*o / v >= 0.1 - 1e-12 && *o / v <= 0.3 + 1e-12);
        }
    }
}
