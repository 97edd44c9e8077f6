//! Each op's forward against a closed form and its backward against float64 finite
//! differences: the unary ops from the crate's registry (`ferrograd::ops::registry`), the
//! others from tables here; plus second derivatives through create_graph.

mod common;
use common::{assert_close, fd_grad, leaf};
use ferrograd::autograd::{self, GradOptions};
use ferrograd::ops::registry::{Domain, Grad, UNARY};
use ferrograd::{DType, Tensor};

type Op = fn(&Tensor) -> Tensor;
type Scalar = fn(f64) -> f64;
type Binary = fn(&Tensor, &Tensor) -> Tensor;
type ScalarBinary = fn(f64, f64) -> f64;

/// Weights so that sum(w * op(x)) has a non-trivial gradient.
fn weighted(t: &Tensor) -> Tensor {
    let n = t.numel();
    let w = Tensor::from_vec(
        (0..n)
            .map(|i| 0.5 + (i as f64 * 0.7).sin())
            .collect::<Vec<_>>(),
        t.shape(),
    )
    .unwrap();
    t.mul(&w).unwrap().sum().unwrap()
}

fn check(name: &str, op: Op, xs: &[f64], shape: &[usize]) {
    let f = |x: &Tensor| weighted(&op(x));
    let x = leaf(xs, shape);
    f(&x).backward().unwrap();
    let got = x.grad().unwrap().to_vec::<f64>().unwrap();
    let want = fd_grad(f, xs, shape);
    for (g, w) in got.iter().zip(&want) {
        assert!(
            (g - w).abs() <= 1e-6 * (1.0 + w.abs()),
            "{name}: grad {got:?} vs finite differences {want:?}"
        );
    }
}

const XS: [f64; 6] = [0.3, -0.8, 1.7, 0.05, -1.4, 0.9];
const POS: [f64; 6] = [0.3, 0.8, 1.7, 0.05, 1.4, 0.9];

/// Inputs for a registry domain: away from kinks, integers and the domain's ends.
fn inputs(domain: Domain) -> Tensor {
    let v: &[f64] = match domain {
        Domain::Real | Domain::NonZero => &XS,
        Domain::Positive => &POS,
        Domain::OpenUnit => &[0.3, -0.8, 0.7, 0.05, -0.4, 0.9],
        Domain::AboveOne => &[1.3, 1.8, 2.7, 1.05, 2.4, 1.9],
        Domain::Integer => {
            return Tensor::from_vec(vec![3i64, -8, 17, 0, -14, 9], &[2, 3]).unwrap();
        }
    };
    Tensor::from_vec(v.to_vec(), &[2, 3]).unwrap()
}

#[test]
fn every_registered_unary_op_matches_its_reference_and_finite_differences() {
    assert!(UNARY.len() >= 37, "the registry lost rows: {}", UNARY.len());
    for info in UNARY {
        let x = inputs(info.domain);
        let out = (info.op)(&x).unwrap_or_else(|e| panic!("{}: {e}", info.name));
        assert_eq!(out.shape(), x.shape(), "{}", info.name);
        if let Some(reference) = info.reference {
            let xs = x.to_vec::<f64>().unwrap();
            let want: Vec<f64> = xs.iter().map(|&v| reference(v)).collect();
            assert_close(&out.to_vec::<f64>().unwrap(), &want, 1e-14);
        }
        match info.grad {
            Grad::Smooth => {
                let xs = x.to_vec::<f64>().unwrap();
                let f = |t: &Tensor| weighted(&(info.op)(t).unwrap());
                let leaf = leaf(&xs, &[2, 3]);
                f(&leaf).backward().unwrap();
                let got = leaf.grad().unwrap().to_vec::<f64>().unwrap();
                let want = fd_grad(f, &xs, &[2, 3]);
                for (g, w) in got.iter().zip(&want) {
                    assert!(
                        (g - w).abs() <= 1e-6 * (1.0 + w.abs()),
                        "{}: grad {got:?} vs finite differences {want:?}",
                        info.name
                    );
                }
            }
            Grad::Zero => {
                let leaf = leaf(&x.to_vec::<f64>().unwrap(), &[2, 3]);
                weighted(&(info.op)(&leaf).unwrap()).backward().unwrap();
                let g = leaf.grad().unwrap().to_vec::<f64>().unwrap();
                assert!(g.iter().all(|&v| v == 0.0), "{}: {g:?}", info.name);
            }
            Grad::None => {
                assert!(!out.dtype().is_float(), "{}: {}", info.name, out.dtype());
            }
        }
    }
}

#[test]
fn test_scalar_ops_forward_and_backward() {
    let table: &[(&str, Op, Scalar, &[f64])] = &[
        ("pow3", |t| t.pow_scalar(3.0).unwrap(), |v| v.powi(3), &XS),
        ("pow_half", |t| t.pow_scalar(0.5).unwrap(), f64::sqrt, &POS),
        (
            "rpow",
            |t| t.rpow_scalar(2.0).unwrap(),
            |v| 2f64.powf(v),
            &XS,
        ),
        ("rsub", |t| t.rsub_scalar(1.5).unwrap(), |v| 1.5 - v, &XS),
        ("rdiv", |t| t.rdiv_scalar(2.0).unwrap(), |v| 2.0 / v, &POS),
    ];
    for (name, op, f, xs) in table {
        let out = op(&Tensor::from_vec(xs.to_vec(), &[2, 3]).unwrap())
            .to_vec::<f64>()
            .unwrap();
        let want: Vec<f64> = xs.iter().map(|&v| f(v)).collect();
        assert_close(&out, &want, 1e-14);
        check(name, *op, xs, &[2, 3]);
    }
}

#[test]
fn test_binary_ops_with_broadcasting() {
    let other = Tensor::from_vec(vec![1.3f64, -0.4, 0.7], &[3]).unwrap();
    let table: &[(&str, Binary, ScalarBinary)] = &[
        ("add", |a, b| a.add(b).unwrap(), |a, b| a + b),
        ("sub", |a, b| a.sub(b).unwrap(), |a, b| a - b),
        ("mul", |a, b| a.mul(b).unwrap(), |a, b| a * b),
        ("div", |a, b| a.div(b).unwrap(), |a, b| a / b),
        (
            "pow",
            |a, b| a.abs().unwrap().add_scalar(0.1).unwrap().pow(b).unwrap(),
            |a, b| (a.abs() + 0.1).powf(b),
        ),
    ];
    let ov = other.to_vec::<f64>().unwrap();
    for (name, op, f) in table {
        let a = Tensor::from_vec(XS.to_vec(), &[2, 3]).unwrap();
        let out = op(&a, &other).to_vec::<f64>().unwrap();
        let want: Vec<f64> = XS
            .iter()
            .enumerate()
            .map(|(i, &v)| f(v, ov[i % 3]))
            .collect();
        assert_close(&out, &want, 1e-14);
        // Gradient with respect to each side, the broadcast one summed back to [3].
        let lhs = |x: &Tensor| weighted(&op(x, &other));
        let x = leaf(&XS, &[2, 3]);
        lhs(&x).backward().unwrap();
        assert_close(
            &x.grad().unwrap().to_vec::<f64>().unwrap(),
            &fd_grad(lhs, &XS, &[2, 3]),
            1e-6,
        );
        let rhs = |y: &Tensor| weighted(&op(&a, y));
        let y = leaf(&ov, &[3]);
        rhs(&y).backward().unwrap();
        let g = y.grad().unwrap();
        assert_eq!(g.shape(), &[3], "{name}");
        assert_close(&g.to_vec::<f64>().unwrap(), &fd_grad(rhs, &ov, &[3]), 1e-6);
    }
}

#[test]
fn test_reductions_and_views() {
    let table: &[(&str, Op)] = &[
        ("sum_all", |t| t.sum().unwrap()),
        ("sum_dim0", |t| t.sum_dims(&[0], false).unwrap()),
        ("sum_dim1_keep", |t| t.sum_dims(&[-1], true).unwrap()),
        ("mean_all", |t| t.mean().unwrap()),
        ("mean_dim1", |t| t.mean_dims(&[1], false).unwrap()),
        ("reshape", |t| t.reshape(&[3, 2]).unwrap()),
        ("transpose", |t| {
            t.transpose(0, 1).unwrap().mul_scalar(2.0).unwrap()
        }),
        ("permute", |t| t.permute(&[1, 0]).unwrap()),
        ("unsqueeze_squeeze", |t| {
            t.unsqueeze(1).unwrap().squeeze(None).unwrap()
        }),
        ("expand", |t| {
            t.unsqueeze(0).unwrap().expand(&[4, 2, 3]).unwrap()
        }),
        ("slice_step", |t| t.slice(1, Some(0), None, 2).unwrap()),
        ("select", |t| t.select(1, -1).unwrap()),
        ("narrow", |t| t.narrow(1, 1, 2).unwrap()),
        ("flatten", |t| t.flatten(0, -1).unwrap()),
        ("matmul_self_t", |t| t.matmul(&t.t().unwrap()).unwrap()),
    ];
    for (name, op) in table {
        check(name, *op, &XS, &[2, 3]);
    }
}

#[test]
fn test_second_derivatives_match_closed_forms() {
    // (op, f'', input)
    let table: &[(&str, Op, Scalar)] = &[
        ("exp", |t| t.exp().unwrap(), f64::exp),
        ("sin", |t| t.sin().unwrap(), |v| -v.sin()),
        ("cos", |t| t.cos().unwrap(), |v| -v.cos()),
        (
            "tanh",
            |t| t.tanh().unwrap(),
            |v| -2.0 * v.tanh() * (1.0 - v.tanh().powi(2)),
        ),
        (
            "sigmoid",
            |t| t.sigmoid().unwrap(),
            |v| {
                let s = 1.0 / (1.0 + (-v).exp());
                s * (1.0 - s) * (1.0 - 2.0 * s)
            },
        ),
        ("log", |t| t.log().unwrap(), |v| -1.0 / (v * v)),
        ("sqrt", |t| t.sqrt().unwrap(), |v| -0.25 * v.powf(-1.5)),
        ("pow3", |t| t.pow_scalar(3.0).unwrap(), |v| 6.0 * v),
        ("div", |t| t.rdiv_scalar(1.0).unwrap(), |v| 2.0 / v.powi(3)),
    ];
    for (name, op, f2) in table {
        let x = leaf(&POS, &[6]);
        let opts = GradOptions {
            create_graph: true,
            ..Default::default()
        };
        let g = autograd::grad(&[op(&x).sum().unwrap()], std::slice::from_ref(&x), opts).unwrap()
            [0]
        .clone()
        .unwrap();
        let gg = autograd::grad(
            &[g.sum().unwrap()],
            std::slice::from_ref(&x),
            GradOptions::default(),
        )
        .unwrap()[0]
            .clone()
            .unwrap();
        let want: Vec<f64> = POS.iter().map(|&v| f2(v)).collect();
        let got = gg.to_vec::<f64>().unwrap();
        for (a, b) in got.iter().zip(&want) {
            assert!(
                (a - b).abs() <= 1e-10 * (1.0 + b.abs()),
                "{name}: {got:?} vs {want:?}"
            );
        }
    }
}

#[test]
fn test_float32_forward_within_tolerance_of_float64() {
    let x64 = Tensor::from_vec(XS.to_vec(), &[6]).unwrap();
    let x32 = x64.to_dtype(DType::Float32).unwrap();
    let f = |t: &Tensor| {
        t.sin()
            .unwrap()
            .mul(&t.exp().unwrap())
            .unwrap()
            .tanh()
            .unwrap()
    };
    let a = f(&x32).to_vec::<f64>().unwrap();
    let b = f(&x64).to_vec::<f64>().unwrap();
    assert_close(&a, &b, 1e-6);
    assert_eq!(f(&x32).dtype(), DType::Float32);
}

#[test]
fn test_bad_input_is_an_error_not_a_panic() {
    let a = Tensor::ones(&[2, 3], DType::Float32);
    let b = Tensor::ones(&[4], DType::Float32);
    let e = a.add(&b).unwrap_err();
    assert!(
        e.message()
            .contains("size of tensor a (3) must match the size of tensor b (4)"),
        "{e}"
    );
    let e = a
        .matmul(&Tensor::ones(&[4, 2], DType::Float32))
        .unwrap_err();
    assert!(
        e.message().contains("cannot be multiplied (2x3 and 4x2)"),
        "{e}"
    );
    assert!(a
        .sum_dims(&[2], false)
        .unwrap_err()
        .message()
        .contains("Dimension out of range"));
    assert!(a.reshape(&[4]).is_err());
    assert!(a
        .select(0, 5)
        .unwrap_err()
        .message()
        .contains("index 5 is out of bounds for dimension 0 with size 2"));
    let i = Tensor::ones(&[2], DType::Int64);
    assert_eq!(
        i.set_requires_grad(true).unwrap_err().message(),
        "only Tensors of floating point and complex dtype can require gradients"
    );
    assert!(a
        .expand(&[3, 3])
        .unwrap_err()
        .message()
        .contains("must match the existing size (2) at non-singleton dimension 0"));
}

/// A shape whose element count overflows is refused, not wrapped into a match with a short buffer.
#[test]
fn a_shape_whose_count_overflows_is_refused() {
    let big = 1usize << 40;
    // 2^40 * 2^40 * 2^40 wraps to 0 in usize arithmetic; the empty buffer must not match it.
    assert!(Tensor::from_vec(Vec::<f32>::new(), &[big, big, big]).is_err());
    assert!(Tensor::from_vec(vec![1.0f32], &[1, 1]).is_ok());
}
