//! The everyday API through the crate: the three-operand pointwise ops and scaled products
//! against closed forms with gradients against float64 finite differences, the index and shape
//! compositions against hand-computed values, the in-place forms (values, versions, the leaf
//! error, gradients equal to the out-of-place op's) and the random fills' moments.

mod common;
use common::{assert_close, fd_grad, leaf};
use ferrograd::ops::indexing::ScatterReduce;
use ferrograd::ops::shape::combine::MeshIndexing;
use ferrograd::{DType, Tensor};

fn t(v: &[f64], shape: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape).unwrap()
}

fn ints(v: &[i64]) -> Tensor {
    Tensor::from_vec(v.to_vec(), &[v.len()]).unwrap()
}

fn vals(x: &Tensor) -> Vec<f64> {
    x.to_dtype(DType::Float64).unwrap().to_vec::<f64>().unwrap()
}

/// The gradient of `sum(w * f(x))` against finite differences, `w` fixed and uneven.
fn check_grad(f: impl Fn(&Tensor) -> Tensor, xs: &[f64], shape: &[usize]) {
    let weighted = |x: &Tensor| {
        let y = f(x);
        let w: Vec<f64> = (0..y.numel())
            .map(|i| 0.5 + (i as f64 * 0.9).sin())
            .collect();
        y.mul(&t(&w, y.shape())).unwrap().sum().unwrap()
    };
    let x = leaf(xs, shape);
    weighted(&x).backward().unwrap();
    assert_close(
        &vals(&x.grad().unwrap()),
        &fd_grad(weighted, xs, shape),
        1e-6,
    );
}

const XS: [f64; 6] = [0.3, -0.8, 1.7, 0.45, -1.4, 0.9];

#[test]
fn lerp_addcmul_addcdiv_values_and_gradients() {
    let a = t(&XS, &[2, 3]);
    let b = t(&[1.0, 2.0, -1.0], &[3]);
    let w = Tensor::wrapped_scalar(0.25, DType::Float64);
    let got = vals(&a.lerp(&b, &w).unwrap());
    let want: Vec<f64> = XS
        .iter()
        .enumerate()
        .map(|(i, &x)| x + 0.25 * ([1.0, 2.0, -1.0][i % 3] - x))
        .collect();
    assert_close(&got, &want, 1e-15);
    assert_eq!(
        a.lerp(&b, &w).unwrap().dtype(),
        DType::Float64,
        "lerp keeps the dtype"
    );
    check_grad(
        |x| x.lerp(&b, &t(&[0.1, 0.5, 0.9], &[3])).unwrap(),
        &XS,
        &[2, 3],
    );
    check_grad(|x| a.lerp(&b, x).unwrap(), &XS, &[2, 3]);
    check_grad(|x| x.addcmul(&a, &b, 0.5).unwrap(), &XS, &[2, 3]);
    check_grad(|x| a.addcmul(x, &b, -2.0).unwrap(), &XS, &[2, 3]);
    check_grad(
        |x| b.addcdiv(&a, &x.add_scalar(3.0).unwrap(), 2.0).unwrap(),
        &XS,
        &[2, 3],
    );
    let q = vals(&b.addcdiv(&a, &a, 2.0).unwrap());
    assert_close(&q, &[3.0, 4.0, 1.0, 3.0, 4.0, 1.0], 1e-15);
}

#[test]
fn scaled_products_match_their_definitions() {
    let c = t(&[1.0, 2.0], &[2, 1]);
    let m1 = t(&XS, &[2, 3]);
    let m2 = t(&[1.0, 0.0, -1.0, 2.0, 0.5, 1.0], &[3, 2]);
    let got = vals(&c.addmm(&m1, &m2, 0.5, 2.0).unwrap());
    let prod = vals(&m1.mm(&m2).unwrap());
    let want: Vec<f64> = (0..4)
        .map(|i| 0.5 * [1.0, 2.0][i / 2] + 2.0 * prod[i])
        .collect();
    assert_close(&got, &want, 1e-14);
    check_grad(|x| c.addmm(x, &m2, 0.5, 2.0).unwrap(), &XS, &[2, 3]);
    check_grad(
        |x| x.addmm(&m1, &m2, 0.5, 2.0).unwrap(),
        &[1.0, 2.0],
        &[2, 1],
    );
    let v = t(&[1.0, -1.0, 2.0], &[3]);
    let mv = vals(&t(&[0.0, 1.0], &[2]).addmv(&m1, &v, 1.0, 1.0).unwrap());
    assert_close(&mv, &[0.3 + 0.8 + 3.4, 1.0 + 0.45 + 1.4 + 1.8], 1e-14);
    let b1 = t(&[XS, XS].concat(), &[2, 2, 3]);
    let b2 = t(
        &[1.0, 0.0, -1.0, 2.0, 0.5, 1.0, 0.0, 1.0, 1.0, 0.0, 2.0, 2.0],
        &[2, 3, 2],
    );
    let summed = vals(
        &Tensor::zeros(&[2, 2], DType::Float64)
            .addbmm(&b1, &b2, 1.0, 1.0)
            .unwrap(),
    );
    let per = vals(&b1.bmm(&b2).unwrap());
    let want: Vec<f64> = (0..4).map(|i| per[i] + per[4 + i]).collect();
    assert_close(&summed, &want, 1e-14);
    check_grad(
        |x| {
            Tensor::zeros(&[2], DType::Float64)
                .baddbmm(&b1, x, 1.0, 3.0)
                .unwrap()
        },
        &[XS, XS].concat(),
        &[2, 3, 2],
    );
}

#[test]
fn index_ops_move_the_right_elements() {
    let x = t(&XS, &[2, 3]);
    let copied = x
        .index_copy(1, &ints(&[2, 0]), &t(&[10.0, 20.0, 30.0, 40.0], &[2, 2]))
        .unwrap();
    assert_eq!(vals(&copied), vec![20.0, -0.8, 10.0, 40.0, -1.4, 30.0]);
    let filled = x.index_fill(0, &ints(&[1]), 7.0).unwrap();
    assert_eq!(vals(&filled), vec![0.3, -0.8, 1.7, 7.0, 7.0, 7.0]);
    assert_eq!(
        vals(&x.take(&ints(&[5, -6, 2])).unwrap()),
        vec![0.9, 0.3, 1.7]
    );
    let r = x.repeat_interleave(&[2, 0, 1], Some(1)).unwrap();
    assert_eq!(vals(&r), vec![0.3, 0.3, 1.7, 0.45, 0.45, 0.9]);
    assert_eq!(
        vals(&Tensor::repeat_index(&[1, 0, 2], 3).unwrap()),
        vec![0.0, 2.0, 2.0]
    );
    let mask = Tensor::from_vec(vec![false, true, true], &[3]).unwrap();
    let ms = x
        .masked_scatter(&mask, &t(&[1.0, 2.0, 3.0, 4.0], &[4]))
        .unwrap();
    assert_eq!(vals(&ms), vec![0.3, 1.0, 2.0, 0.45, 3.0, 4.0]);
    check_grad(|x| x.take(&ints(&[5, 0, 5])).unwrap(), &XS, &[2, 3]);
    check_grad(|x| x.index_fill(1, &ints(&[1]), 0.0).unwrap(), &XS, &[2, 3]);
}

#[test]
fn scatter_reduce_each_reduction() {
    let x = t(&[1.0, 2.0, 3.0], &[3]);
    let idx = ints(&[0, 0, 2, 0]);
    let src = t(&[4.0, -1.0, 5.0, 2.0], &[4]);
    let cases = [
        (ScatterReduce::Sum, true, [6.0, 2.0, 8.0]),
        (ScatterReduce::Sum, false, [5.0, 2.0, 5.0]),
        (ScatterReduce::Prod, true, [-8.0, 2.0, 15.0]),
        (ScatterReduce::Mean, true, [1.5, 2.0, 4.0]),
        (ScatterReduce::Mean, false, [5.0 / 3.0, 2.0, 5.0]),
        (ScatterReduce::Amax, true, [4.0, 2.0, 5.0]),
        (ScatterReduce::Amin, false, [-1.0, 2.0, 5.0]),
    ];
    for (how, inc, want) in cases {
        let got = vals(&x.scatter_reduce(0, &idx, &src, how, inc).unwrap());
        assert_close(&got, &want, 1e-15);
    }
    for how in [ScatterReduce::Sum, ScatterReduce::Prod, ScatterReduce::Mean] {
        for inc in [true, false] {
            check_grad(
                |s| x.scatter_reduce(0, &idx, s, how, inc).unwrap(),
                &[4.0, -1.0, 5.0, 2.0],
                &[4],
            );
            check_grad(
                |y| y.scatter_reduce(0, &idx, &src, how, inc).unwrap(),
                &[1.0, 2.0, 3.0],
                &[3],
            );
        }
    }
    let e = x.scatter_reduce(
        0,
        &idx,
        &src.to_dtype(DType::Float32).unwrap(),
        ScatterReduce::Sum,
        true,
    );
    assert!(e
        .unwrap_err()
        .to_string()
        .contains("Expected self.dtype to be equal to src.dtype"));
    assert!(ScatterReduce::parse("max").is_err());
}

#[test]
fn shape_compositions() {
    let a = t(&[1.0, 2.0], &[2]);
    let b = t(&[3.0, 4.0, 5.0], &[3]);
    assert_eq!(
        vals(&Tensor::hstack(&[a.clone(), b.clone()]).unwrap()),
        vec![1.0, 2.0, 3.0, 4.0, 5.0]
    );
    assert_eq!(
        Tensor::vstack(&[b.clone(), b.clone()]).unwrap().shape(),
        &[2, 3]
    );
    assert_eq!(
        Tensor::dstack(&[b.clone(), b.clone()]).unwrap().shape(),
        &[1, 3, 2]
    );
    assert_eq!(
        Tensor::column_stack(&[a.clone(), a.clone()])
            .unwrap()
            .shape(),
        &[2, 2]
    );
    let g = Tensor::meshgrid(&[a.clone(), b.clone()], MeshIndexing::Xy).unwrap();
    assert_eq!(g[0].shape(), &[3, 2]);
    assert_eq!(vals(&g[1]), vec![3.0, 3.0, 4.0, 4.0, 5.0, 5.0]);
    let p = Tensor::cartesian_prod(&[a.clone(), b.clone()]).unwrap();
    assert_eq!(
        vals(&p),
        vec![1.0, 3.0, 1.0, 4.0, 1.0, 5.0, 2.0, 3.0, 2.0, 4.0, 2.0, 5.0]
    );
    assert_eq!(
        vals(&b.combinations(2, false).unwrap()),
        vec![3.0, 4.0, 3.0, 5.0, 4.0, 5.0]
    );
    assert_eq!(b.combinations(2, true).unwrap().shape(), &[6, 2]);
    let k = a.kron(&t(&[1.0, 10.0], &[2])).unwrap();
    assert_eq!(vals(&k), vec![1.0, 10.0, 2.0, 20.0]);
    let m = t(&XS, &[2, 3]);
    let td = m.tensordot(&m, &[0, 1], &[0, 1]).unwrap();
    assert_close(&vals(&td), &[XS.iter().map(|v| v * v).sum::<f64>()], 1e-14);
    let d = m.diff(1, -1, None, Some(&t(&[0.0, 0.0], &[2, 1]))).unwrap();
    assert_close(&vals(&d), &[-1.1, 2.5, -1.7, -1.85, 2.3, -0.9], 1e-14);
    check_grad(|x| x.diff(2, 1, None, None).unwrap(), &XS, &[2, 3]);
    check_grad(|x| x.kron(&m).unwrap(), &XS, &[2, 3]);
    let s = Tensor::broadcast_all_shapes(&[vec![2, 1], vec![3], vec![]]).unwrap();
    assert_eq!(s.as_slice(), &[2, 3]);
    assert!(Tensor::broadcast_all_shapes(&[vec![2], vec![3]]).is_err());
    assert_eq!(
        Tensor::scalar(1.0f64).atleast_2d().unwrap().shape(),
        &[1, 1]
    );
    assert_eq!(a.atleast_3d().unwrap().shape(), &[1, 2, 1]);
}

#[test]
fn isclose_allclose_equal() {
    let a = t(&[1.0, f64::INFINITY, f64::NAN, 0.0], &[4]);
    let b = t(&[1.0 + 1e-7, f64::INFINITY, f64::NAN, 1e-3], &[4]);
    let c = a
        .isclose(&b, 1e-5, 1e-8, false)
        .unwrap()
        .to_vec::<bool>()
        .unwrap();
    assert_eq!(c, vec![true, true, false, false]);
    let c = a
        .isclose(&b, 1e-5, 1e-8, true)
        .unwrap()
        .to_vec::<bool>()
        .unwrap();
    assert_eq!(c, vec![true, true, true, false]);
    assert!(a
        .isclose(&a.to_dtype(DType::Float32).unwrap(), 1e-5, 1e-8, false)
        .is_err());
    assert!(t(&XS, &[6])
        .allclose(&t(&XS, &[6]), 0.0, 0.0, false)
        .unwrap());
    assert!(t(&XS, &[6]).equal(&t(&XS, &[6])).unwrap());
    assert!(!t(&XS, &[6]).equal(&t(&XS, &[2, 3])).unwrap());
}

#[test]
fn inplace_forms_write_bump_the_version_and_differentiate_like_the_op() {
    let x = t(&XS, &[2, 3]);
    let v0 = x.version();
    x.unary_(Tensor::exp).unwrap();
    assert!(x.version() > v0);
    assert_close(&vals(&x), &XS.map(f64::exp), 1e-15);
    x.clamp_(Some(&Tensor::wrapped_scalar(1.0, DType::Float64)), None)
        .unwrap();
    assert!(vals(&x).iter().all(|&v| v >= 1.0));
    x.binary_(&Tensor::wrapped_scalar(0.5, DType::Float64), Tensor::fmod)
        .unwrap();
    assert!(vals(&x).iter().all(|&v| (0.0..0.5).contains(&v)));

    let l = leaf(&XS, &[2, 3]);
    let e = l.unary_(Tensor::sin).unwrap_err().to_string();
    assert!(
        e.contains("a leaf Variable that requires grad is being used in an in-place operation.")
    );

    // d/dx sum(w * sin(x)) through the in-place form equals the out-of-place one
    check_grad(
        |x| {
            let y = x.mul_scalar(1.0).unwrap();
            y.unary_(Tensor::sin).unwrap();
            y.lerp_(&t(&[1.0, 2.0, 3.0], &[3]), &t(&[0.2, 0.4, 0.6], &[3]))
                .unwrap();
            y.index_fill_(1, &ints(&[0]), 0.0).unwrap();
            y.scatter_add_(0, &Tensor::from_vec(vec![1i64, 0, 1], &[1, 3]).unwrap(), x)
                .unwrap();
            y
        },
        &XS,
        &[2, 3],
    );
}

#[test]
fn random_fills_have_their_distributions_moments() {
    let n = 100_000usize;
    let nf = n as f64;
    ferrograd::tensor::creation::manual_seed(3);
    let mean_var = |x: &Tensor| {
        let v = vals(x);
        let m = v.iter().sum::<f64>() / nf;
        (m, v.iter().map(|a| (a - m).powi(2)).sum::<f64>() / nf)
    };
    let x = Tensor::zeros(&[n], DType::Float64);
    x.normal_(2.0, 3.0).unwrap();
    let (m, v) = mean_var(&x);
    assert!((m - 2.0).abs() < 6.0 * (9.0 / nf).sqrt(), "{m}");
    assert!(
        (v - 9.0).abs() < 6.0 * ((3.0 * 81.0 - 81.0) / nf).sqrt(),
        "{v}"
    );
    x.uniform_(-1.0, 1.0).unwrap();
    let (m, v) = mean_var(&x);
    assert!(m.abs() < 6.0 * (1.0 / 3.0 / nf).sqrt() && (v - 1.0 / 3.0).abs() < 0.01);
    x.exponential_(4.0).unwrap();
    let (m, _) = mean_var(&x);
    assert!((m - 0.25).abs() < 6.0 * (1.0 / 16.0 / nf).sqrt());
    x.bernoulli_(0.2).unwrap();
    let (m, _) = mean_var(&x);
    assert!((m - 0.2).abs() < 6.0 * (0.16 / nf).sqrt());
    let r = Tensor::randint(-3, 2, &[n], DType::Int64).unwrap();
    let rv = r.to_vec::<i64>().unwrap();
    assert!(rv.iter().all(|v| (-3..2).contains(v)));
    for k in -3..2 {
        let c = rv.iter().filter(|&&v| v == k).count() as f64;
        assert!((c - nf / 5.0).abs() < 6.0 * (nf * 0.16).sqrt(), "{k}: {c}");
    }
    assert!(Tensor::randint(2, 2, &[1], DType::Int64).is_err());
    assert!(x.normal_(0.0, -1.0).is_err());
    assert!(Tensor::zeros(&[2], DType::Int64)
        .uniform_(0.0, 1.0)
        .is_err());
    let ls = Tensor::logspace(0.0, 3.0, 4, 10.0, DType::Float64).unwrap();
    assert_close(&vals(&ls), &[1.0, 10.0, 100.0, 1000.0], 1e-12);
}

#[test]
fn hypot_logaddexp_block_diag_rot90_frac_and_triangles() {
    let a = t(&[3.0, 1e300, 0.0, -5.0], &[4]);
    let b = t(&[4.0, 1e300, 0.0, 12.0], &[4]);
    assert_close(
        &vals(&a.hypot(&b).unwrap()),
        &[5.0, 1e300 * 2f64.sqrt(), 0.0, 13.0],
        1e-15,
    );
    check_grad(
        |x| x.hypot(&t(&[1.0, -2.0, 0.5], &[3])).unwrap(),
        &XS,
        &[2, 3],
    );
    let l = t(&[1000.0, -1.0], &[2])
        .logaddexp(&t(&[1000.0, 2.0], &[2]))
        .unwrap();
    assert_close(
        &vals(&l),
        &[1000.0 + 2f64.ln(), 2.0 + (-3f64).exp().ln_1p()],
        1e-15,
    );
    check_grad(
        |x| x.logaddexp(&t(&[1.0, -2.0, 0.5], &[3])).unwrap(),
        &XS,
        &[2, 3],
    );
    let bd = Tensor::block_diag(&[t(&[1.0, 2.0, 3.0, 4.0], &[2, 2]), t(&[5.0], &[1])]).unwrap();
    assert_eq!(vals(&bd), vec![1.0, 2.0, 0.0, 3.0, 4.0, 0.0, 0.0, 0.0, 5.0]);
    let m = t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    // rot90 once: the last column becomes the first row
    assert_eq!(
        vals(&m.rot90(1, &[0, 1]).unwrap()),
        vec![3.0, 6.0, 2.0, 5.0, 1.0, 4.0]
    );
    assert_eq!(vals(&m.rot90(4, &[0, 1]).unwrap()), vals(&m));
    assert!(m.rot90(1, &[0, 0]).is_err());
    assert_close(
        &vals(&t(&[-1.75, 2.5], &[2]).frac().unwrap()),
        &[-0.75, 0.5],
        1e-15,
    );
    let tri = Tensor::triangle_indices(3, 3, 0, false).unwrap();
    assert_eq!(
        tri.to_vec::<i64>().unwrap(),
        vec![0, 1, 1, 2, 2, 2, 0, 0, 1, 0, 1, 2]
    );
    crate_seed(9);
    let w = t(&[1.0, 0.0, 3.0], &[3]);
    let d = Tensor::multinomial(&w, 20000, true)
        .unwrap()
        .to_vec::<i64>()
        .unwrap();
    let share = d.iter().filter(|&&v| v == 2).count() as f64 / 20000.0;
    assert!(d.iter().all(|&v| v != 1));
    assert!((share - 0.75).abs() < 6.0 * (0.75 * 0.25 / 20000.0f64).sqrt());
    assert!(Tensor::multinomial(&w, 4, false).is_err());
}

fn crate_seed(s: u64) {
    ferrograd::tensor::creation::manual_seed(s);
}

#[test]
fn nansum_and_nanmean_skip_nans() {
    let x = t(&[1.0, f64::NAN, 3.0, f64::NAN, f64::NAN, 6.0], &[2, 3]);
    assert_close(&vals(&x.nansum(&[], false).unwrap()), &[10.0], 1e-15);
    assert_close(&vals(&x.nanmean(&[1], false).unwrap()), &[2.0, 6.0], 1e-15);
    let all_nan = t(&[f64::NAN], &[1]).nanmean(&[], false).unwrap();
    assert!(vals(&all_nan)[0].is_nan());
    assert!(Tensor::from_vec(vec![1i64], &[1])
        .unwrap()
        .nanmean(&[], false)
        .is_err());
}
