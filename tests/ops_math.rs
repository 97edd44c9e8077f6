//! The math ops through the crate API: forwards against closed forms, gradients against
//! float64 finite differences (including zeros for prod/cumprod and ties for amax/maximum),
//! second derivatives through create_graph, and the errors.

mod common;
use common::{assert_close, fd_grad, leaf};
use ferrograd::autograd::{self, GradOptions};
use ferrograd::ops::binary::RoundingMode;
use ferrograd::{DType, Tensor};

type Op = fn(&Tensor) -> Tensor;
type Scalar = fn(f64) -> f64;

/// Weights so that sum(w * op(x)) has a non-trivial gradient.
fn weighted(t: &Tensor) -> Tensor {
    let w = Tensor::from_vec(
        (0..t.numel())
            .map(|i| 0.5 + (i as f64 * 0.7).sin().abs())
            .collect::<Vec<_>>(),
        t.shape(),
    )
    .unwrap();
    t.mul(&w).unwrap().sum().unwrap()
}

fn grad_of(op: Op, xs: &[f64], shape: &[usize]) -> Vec<f64> {
    let x = leaf(xs, shape);
    weighted(&op(&x)).backward().unwrap();
    x.grad().unwrap().to_vec::<f64>().unwrap()
}

fn check_fd(name: &str, op: Op, xs: &[f64], shape: &[usize]) {
    let got = grad_of(op, xs, shape);
    let want = fd_grad(|x| weighted(&op(x)), xs, shape);
    for (g, w) in got.iter().zip(&want) {
        assert!(
            (g - w).abs() <= 1e-5 * (1.0 + w.abs()),
            "{name}: grad {got:?} vs finite differences {want:?}"
        );
    }
}

/// Second derivative of sum(w * op(x)) contracted with ones, against finite differences of
/// the first derivative.
fn check_gradgrad(name: &str, op: Op, xs: &[f64], shape: &[usize]) {
    let first = |x: &Tensor| -> Tensor {
        let x = x.detach().requires_grad_(true).unwrap();
        let opts = GradOptions {
            create_graph: true,
            ..Default::default()
        };
        let g = autograd::grad(&[weighted(&op(&x))], std::slice::from_ref(&x), opts).unwrap()[0]
            .clone()
            .unwrap();
        g.sum().unwrap()
    };
    let x = leaf(xs, shape);
    let opts = GradOptions {
        create_graph: true,
        ..Default::default()
    };
    let g = autograd::grad(&[weighted(&op(&x))], std::slice::from_ref(&x), opts).unwrap()[0]
        .clone()
        .unwrap();
    let gg = autograd::grad(
        &[g.sum().unwrap()],
        std::slice::from_ref(&x),
        GradOptions::default(),
    )
    .unwrap()[0]
        .clone()
        .unwrap()
        .to_vec::<f64>()
        .unwrap();
    let want = fd_grad(|t| first(t).detach(), xs, shape);
    for (a, b) in gg.iter().zip(&want) {
        assert!(
            (a - b).abs() <= 1e-4 * (1.0 + b.abs()),
            "{name}: second derivative {gg:?} vs {want:?}"
        );
    }
}

const XS: [f64; 6] = [0.3, -1.2, 0.8, 1.5, -0.4, 0.9];

#[test]
fn unary_forwards_match_closed_forms() {
    let x = Tensor::from_vec(vec![0.25f64, 0.5, 0.75], &[3]).unwrap();
    let cases: Vec<(&str, Tensor, Scalar)> = vec![
        ("exp2", x.exp2().unwrap(), f64::exp2),
        ("log2", x.log2().unwrap(), f64::log2),
        ("log10", x.log10().unwrap(), f64::log10),
        ("log1p", x.log1p().unwrap(), f64::ln_1p),
        ("expm1", x.expm1().unwrap(), f64::exp_m1),
        ("rsqrt", x.rsqrt().unwrap(), |v| 1.0 / v.sqrt()),
        ("reciprocal", x.reciprocal().unwrap(), |v| 1.0 / v),
        ("tan", x.tan().unwrap(), f64::tan),
        ("asin", x.asin().unwrap(), f64::asin),
        ("acos", x.acos().unwrap(), f64::acos),
        ("atanh", x.atanh().unwrap(), f64::atanh),
    ];
    for (name, got, f) in cases {
        let want: Vec<f64> = [0.25f64, 0.5, 0.75].iter().map(|&v| f(v)).collect();
        let got = got.to_vec::<f64>().unwrap();
        for (g, w) in got.iter().zip(&want) {
            assert!(
                (g - w).abs() <= 1e-14 * (1.0 + w.abs()),
                "{name}: {got:?} vs {want:?}"
            );
        }
    }
    // erf(0.5) and erfc(0.5) from tables.
    let e = x.erf().unwrap().to_vec::<f64>().unwrap();
    assert!((e[1] - 0.520_499_877_813_046_5).abs() < 1e-15);
    let c = x.erfc().unwrap().to_vec::<f64>().unwrap();
    assert!((c[1] - 0.479_500_122_186_953_5).abs() < 1e-15);
}

#[test]
fn unary_gradients_and_second_derivatives_match_finite_differences() {
    let unit: Vec<f64> = XS.iter().map(|v| v * 0.5).collect();
    let pos: Vec<f64> = XS.iter().map(|v| v.abs() + 0.2).collect();
    let ops: Vec<(&str, Op, &[f64])> = vec![
        ("exp2", |x| x.exp2().unwrap(), &XS),
        ("log2", |x| x.log2().unwrap(), &pos),
        ("log10", |x| x.log10().unwrap(), &pos),
        ("log1p", |x| x.log1p().unwrap(), &pos),
        ("expm1", |x| x.expm1().unwrap(), &XS),
        ("rsqrt", |x| x.rsqrt().unwrap(), &pos),
        ("square", |x| x.square().unwrap(), &XS),
        ("reciprocal", |x| x.reciprocal().unwrap(), &pos),
        ("tan", |x| x.tan().unwrap(), &unit),
        ("asin", |x| x.asin().unwrap(), &unit),
        ("acos", |x| x.acos().unwrap(), &unit),
        ("atan", |x| x.atan().unwrap(), &XS),
        ("sinh", |x| x.sinh().unwrap(), &XS),
        ("cosh", |x| x.cosh().unwrap(), &XS),
        ("asinh", |x| x.asinh().unwrap(), &XS),
        (
            "acosh",
            |x| x.add_scalar(2.0).unwrap().acosh().unwrap(),
            &pos,
        ),
        ("atanh", |x| x.atanh().unwrap(), &unit),
        ("erf", |x| x.erf().unwrap(), &XS),
        ("erfc", |x| x.erfc().unwrap(), &XS),
        ("softmax", |x| x.softmax(1).unwrap(), &XS),
        ("log_softmax", |x| x.log_softmax(0).unwrap(), &XS),
        ("logsumexp", |x| x.logsumexp(&[1], false).unwrap(), &XS),
        ("prod", |x| x.prod_dims(&[1], false).unwrap(), &XS),
        ("cumprod", |x| x.cumprod(1).unwrap(), &XS),
        ("cumsum", |x| x.cumsum(0).unwrap().mul(x).unwrap(), &XS),
        ("var", |x| x.var_dims(&[1], 1.0, false).unwrap(), &XS),
        ("std", |x| x.std_dims(&[], 1.0, false).unwrap(), &XS),
        ("norm2", |x| x.vector_norm(2.0, &[0], false).unwrap(), &XS),
        ("norm3", |x| x.vector_norm(3.0, &[], false).unwrap(), &XS),
        ("atan2", |x| x.atan2(&x.exp().unwrap()).unwrap(), &XS),
    ];
    for (name, op, xs) in ops {
        check_fd(name, op, xs, &[2, 3]);
        check_gradgrad(name, op, xs, &[2, 3]);
    }
}

#[test]
fn prod_and_cumprod_gradients_are_exact_with_zeros() {
    let with_zero = [0.3, 0.0, 0.8, 1.5, -0.4, 0.9];
    let two_zeros = [0.0, 0.0, 0.8, 1.5, 0.0, 0.9];
    for xs in [&with_zero, &two_zeros] {
        check_fd("prod", |x| x.prod().unwrap(), xs, &[2, 3]);
        check_fd(
            "prod_dim",
            |x| x.prod_dims(&[1], false).unwrap(),
            xs,
            &[2, 3],
        );
        check_fd("cumprod", |x| x.cumprod(1).unwrap(), xs, &[2, 3]);
        check_fd("cumprod0", |x| x.cumprod(0).unwrap(), xs, &[2, 3]);
        check_gradgrad("prod", |x| x.prod_dims(&[1], false).unwrap(), xs, &[2, 3]);
        check_gradgrad("cumprod", |x| x.cumprod(1).unwrap(), xs, &[2, 3]);
    }
    // Closed form: d/dx0 prod([0, 2, 3]) = 6, the others 0.
    let x = leaf(&[0.0, 2.0, 3.0], &[3]);
    x.prod().unwrap().backward().unwrap();
    assert_close(
        &x.grad().unwrap().to_vec::<f64>().unwrap(),
        &[6.0, 0.0, 0.0],
        0.0,
    );
}

#[test]
fn ties_split_the_gradient_like_torch() {
    let a = leaf(&[1.0, 2.0, 5.0], &[3]);
    let b = leaf(&[1.0, 3.0, 4.0], &[3]);
    a.maximum(&b).unwrap().sum().unwrap().backward().unwrap();
    assert_close(
        &a.grad().unwrap().to_vec::<f64>().unwrap(),
        &[0.5, 0.0, 1.0],
        0.0,
    );
    assert_close(
        &b.grad().unwrap().to_vec::<f64>().unwrap(),
        &[0.5, 1.0, 0.0],
        0.0,
    );
    let x = leaf(&[3.0, 1.0, 3.0, 3.0], &[4]);
    x.amax(&[], false).unwrap().backward().unwrap();
    let third = 1.0 / 3.0;
    assert_close(
        &x.grad().unwrap().to_vec::<f64>().unwrap(),
        &[third, 0.0, third, third],
        1e-15,
    );
    // The dim form sends everything to the first index, like torch.
    let y = leaf(&[3.0, 1.0, 3.0], &[3]);
    let (v, i) = y.extreme_dim(0, false, true).unwrap();
    assert_eq!(i.to_vec::<i64>().unwrap(), vec![0]);
    v.backward().unwrap();
    assert_close(
        &y.grad().unwrap().to_vec::<f64>().unwrap(),
        &[1.0, 0.0, 0.0],
        0.0,
    );
}

#[test]
fn clamp_gradient_passes_on_the_closed_interval() {
    let x = leaf(&[-1.0, 0.0, 0.5, 1.0, 2.0], &[5]);
    let lo = Tensor::wrapped_scalar(0.0, DType::Float64);
    let hi = Tensor::wrapped_scalar(1.0, DType::Float64);
    let y = x.clamp(Some(&lo), Some(&hi)).unwrap();
    assert_close(&y.to_vec::<f64>().unwrap(), &[0.0, 0.0, 0.5, 1.0, 1.0], 0.0);
    y.sum().unwrap().backward().unwrap();
    assert_close(
        &x.grad().unwrap().to_vec::<f64>().unwrap(),
        &[0.0, 1.0, 1.0, 1.0, 0.0],
        0.0,
    );
}

#[test]
fn logsumexp_and_softmax_are_stable() {
    let x = Tensor::from_vec(vec![1000.0f64, 1000.0, 1000.0], &[3]).unwrap();
    let l = x.logsumexp(&[0], false).unwrap().item().unwrap();
    assert!((l - (1000.0 + 3f64.ln())).abs() < 1e-12, "{l}");
    let s = x.softmax(0).unwrap().to_vec::<f64>().unwrap();
    assert_close(&s, &[1.0 / 3.0; 3], 1e-15);
    let ls = x.log_softmax(0).unwrap().to_vec::<f64>().unwrap();
    assert_close(&ls, &[-(3f64.ln()); 3], 1e-15);
    let neg = Tensor::from_vec(vec![f64::NEG_INFINITY; 2], &[2]).unwrap();
    assert_eq!(
        neg.logsumexp(&[0], false).unwrap().item().unwrap(),
        f64::NEG_INFINITY
    );
}

#[test]
fn integer_rules_and_rounding_division() {
    let a = Tensor::from_vec(vec![-7i64, 7, 5], &[3]).unwrap();
    let b = Tensor::from_vec(vec![2i64, -2, 5], &[3]).unwrap();
    let fl = a.div_mode(&b, Some(RoundingMode::Floor)).unwrap();
    assert_eq!(fl.dtype(), DType::Int64);
    assert_eq!(fl.to_vec::<i64>().unwrap(), vec![-4, -4, 1]);
    let tr = a.div_mode(&b, Some(RoundingMode::Trunc)).unwrap();
    assert_eq!(tr.to_vec::<i64>().unwrap(), vec![-3, -3, 1]);
    assert_eq!(
        a.remainder(&b).unwrap().to_vec::<i64>().unwrap(),
        vec![1, -1, 0]
    );
    assert_eq!(a.fmod(&b).unwrap().to_vec::<i64>().unwrap(), vec![-1, 1, 0]);
    assert_eq!(a.exp().unwrap().dtype(), DType::Float32);
    assert_eq!(a.erf().unwrap().dtype(), DType::Float32);
    assert_eq!(a.floor().unwrap().dtype(), DType::Int64);
    assert_eq!(a.prod().unwrap().item().unwrap(), -245.0);
    assert_eq!(
        a.cumsum(0).unwrap().to_vec::<i64>().unwrap(),
        vec![-7, 0, 5]
    );
    let zero = Tensor::from_vec(vec![0i64, 1, 1], &[3]).unwrap();
    assert!(a.remainder(&zero).is_err());
    assert!(a.div_mode(&zero, Some(RoundingMode::Floor)).is_err());
    // Floats keep torch's floor-division and round-half-even conventions.
    let f = Tensor::from_vec(vec![-7.5f64, 2.5, 0.5], &[3]).unwrap();
    assert_eq!(
        f.round().unwrap().to_vec::<f64>().unwrap(),
        vec![-8.0, 2.0, 0.0]
    );
    let two = Tensor::wrapped_scalar(2.0, DType::Float64);
    let q = f.div_mode(&two, Some(RoundingMode::Floor)).unwrap();
    assert_eq!(q.to_vec::<f64>().unwrap(), vec![-4.0, 1.0, 0.0]);
}

#[test]
fn reductions_report_bad_dims_and_empty_inputs() {
    let x = Tensor::zeros(&[2, 3], DType::Float64);
    assert!(x.prod_dims(&[2], false).is_err());
    assert!(x.amax(&[0, 0], false).is_err());
    assert!(x.cumsum(-3).is_err());
    let e = Tensor::zeros(&[0, 3], DType::Float64);
    assert!(e.max_all().is_err());
    assert!(e.arg_extreme(None, false, true).is_err());
    assert!(e.extreme_dim(0, false, true).is_err());
    assert_eq!(e.amax(&[1], false).unwrap().shape(), &[0]);
    assert_eq!(e.prod().unwrap().item().unwrap(), 1.0);
}
