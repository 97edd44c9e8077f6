//! `torch.linalg` through the crate API: factorisations against closed forms (A A⁻¹ = I,
//! Q orthonormal and R upper, U diag(S) Vᵀ = A, det of a triangular matrix, exp of diagonal
//! and nilpotent matrices), gradients against float64 finite differences (det at a singular
//! matrix included), and torch's error messages.

mod common;
use common::{assert_close, fd_grad, leaf};
use ferrograd::ops::linalg::QrMode;
use ferrograd::{DType, Tensor};

const A3: [f64; 9] = [4.0, 1.0, -2.0, 0.5, 3.0, 1.0, -1.0, 2.0, 5.0];

fn t(v: &[f64], shape: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape).unwrap()
}

fn vals(x: &Tensor) -> Vec<f64> {
    x.to_dtype(DType::Float64).unwrap().to_vec::<f64>().unwrap()
}

fn eye(n: usize) -> Vec<f64> {
    vals(&Tensor::eye(n, n, DType::Float64).unwrap())
}

/// The gradient of `f(x).sum()` at `x` against central finite differences.
fn check_grad(f: impl Fn(&Tensor) -> Tensor, x: &[f64], shape: &[usize], tol: f64) {
    let l = leaf(x, shape);
    f(&l).sum().unwrap().backward().unwrap();
    let got = vals(&l.grad().unwrap());
    let want = fd_grad(|y| f(y).sum().unwrap(), x, shape);
    assert_close(&got, &want, tol);
}

#[test]
fn inverse_times_matrix_is_identity_batched() {
    let a = t(&[A3, A3.map(|v| v * 0.5 + 1.0)].concat(), &[2, 3, 3]);
    let p = a.inv().unwrap().matmul(&a).unwrap();
    assert_close(&vals(&p), &[eye(3), eye(3)].concat(), 1e-12);
}

#[test]
fn singular_inverse_is_torchs_error_and_inv_ex_reports_the_pivot() {
    let s = t(&[1.0, 2.0, 2.0, 4.0], &[2, 2]);
    let e = s.inv().unwrap_err();
    assert_eq!(
        e.message(),
        "linalg.inv: The diagonal element 2 is zero, the inversion could not be completed because the input matrix is singular."
    );
    assert_eq!(s.inv_ex().unwrap().1, vec![2]);
    let batched = t(&[1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0], &[2, 2, 2]);
    assert!(batched
        .inv()
        .unwrap_err()
        .message()
        .starts_with("linalg.inv: (Batch element 1): The diagonal element 1 is zero"));
}

#[test]
fn non_square_and_integer_inputs_are_torchs_errors() {
    let e = t(&[1.0; 6], &[2, 3]).inv().unwrap_err();
    assert_eq!(
        e.message(),
        "linalg.inv: A must be batches of square matrices, but they are 2 by 3 matrices"
    );
    let i = Tensor::from_vec(vec![1i64, 0, 0, 1], &[2, 2]).unwrap();
    assert_eq!(
        i.det().unwrap_err().message(),
        "linalg.det: Expected a floating point or complex tensor as input. Got Long"
    );
    assert_eq!(
        t(&[1.0; 3], &[3]).svd(false).unwrap_err().message(),
        "linalg.svd: The input tensor A must have at least 2 dimensions."
    );
}

#[test]
fn solve_matches_inverse_and_broadcasts_a_vector() {
    let a = t(&A3, &[3, 3]);
    let b = t(&[1.0, -2.0, 0.5], &[3]);
    let x = a.solve(&b, true).unwrap();
    assert_eq!(x.shape(), &[3]);
    assert_close(&vals(&a.matmul(&x).unwrap()), &vals(&b), 1e-12);
    // X A = B with a batch of right-hand sides against one A.
    let bb = t(&[1.0, 0.0, 0.0, 0.0, 1.0, 0.0], &[2, 1, 3]);
    let xr = a.solve(&bb, false).unwrap();
    assert_eq!(xr.shape(), &[2, 1, 3]);
    assert_close(&vals(&xr.matmul(&a).unwrap()), &vals(&bb), 1e-12);
    assert_eq!(
        a.solve(&t(&[1.0; 4], &[4, 1]), true).unwrap_err().message(),
        "linalg.solve: Incompatible shapes of A and B for the equation AX = B (3x3 and 4x1)"
    );
}

#[test]
fn det_of_triangular_is_product_of_diagonal_and_slogdet_agrees() {
    let u = t(&[2.0, 7.0, -3.0, 0.0, -1.5, 4.0, 0.0, 0.0, 0.5], &[3, 3]);
    assert_close(&vals(&u.det().unwrap()), &[-1.5], 1e-12);
    let (sign, logabs) = u.slogdet().unwrap();
    assert_eq!(vals(&sign), vec![-1.0]);
    assert_close(&vals(&logabs), &[1.5f64.ln()], 1e-12);
    let (s0, l0) = t(&[1.0, 2.0, 2.0, 4.0], &[2, 2]).slogdet().unwrap();
    assert_eq!((vals(&s0)[0], vals(&l0)[0]), (0.0, f64::NEG_INFINITY));
}

#[test]
fn det_gradient_is_cofactor_matrix_even_when_singular() {
    check_grad(|x| x.det().unwrap(), &A3, &[3, 3], 1e-6);
    // Rank 1 (exactly singular in LU): the cofactor matrix [[4, -2], [-2, 1]].
    let s = leaf(&[1.0, 2.0, 2.0, 4.0], &[2, 2]);
    s.det().unwrap().backward().unwrap();
    assert_close(&vals(&s.grad().unwrap()), &[4.0, -2.0, -2.0, 1.0], 1e-10);
}

#[test]
fn cholesky_factor_reconstructs_and_not_positive_definite_is_torchs_error() {
    let a = t(&[4.0, 2.0, 2.0, 5.0], &[2, 2]);
    let l = a.cholesky(false).unwrap();
    assert_close(&vals(&l), &[2.0, 0.0, 1.0, 2.0], 1e-12);
    let u = a.cholesky(true).unwrap();
    assert_close(&vals(&u), &[2.0, 1.0, 0.0, 2.0], 1e-12);
    let bad = t(&[1.0, 2.0, 2.0, 1.0], &[2, 2]);
    assert_eq!(
        bad.cholesky(false).unwrap_err().message(),
        "linalg.cholesky: The factorization could not be completed because the input is not positive-definite (the leading minor of order 2 is not positive-definite)."
    );
    assert_eq!(bad.cholesky_ex(false).unwrap().1, vec![2]);
}

#[test]
fn qr_gives_orthonormal_q_and_upper_r() {
    for (m, n) in [(4, 3), (3, 4), (3, 3)] {
        let a = Tensor::randn(&[m, n], DType::Float64).unwrap();
        let (q, r) = a.qr(QrMode::Reduced).unwrap();
        let k = m.min(n);
        assert_close(&vals(&q.matmul(&r).unwrap()), &vals(&a), 1e-12);
        assert_close(&vals(&q.t().unwrap().matmul(&q).unwrap()), &eye(k), 1e-12);
        assert_close(&vals(&r.tril(-1).unwrap()), &vec![0.0; k * n], 0.0);
        let (qc, rc) = a.qr(QrMode::Complete).unwrap();
        assert_eq!((qc.shape(), rc.shape()), (&[m, m][..], &[m, n][..]));
        assert_close(&vals(&qc.matmul(&rc).unwrap()), &vals(&a), 1e-12);
    }
}

#[test]
fn svd_reconstructs_with_descending_singular_values() {
    for (m, n) in [(4, 3), (3, 4)] {
        let a = Tensor::randn(&[2, m, n], DType::Float64).unwrap();
        let (u, s, vh) = a.svd(false).unwrap();
        let usv = u
            .mul(&s.unsqueeze(-2).unwrap())
            .unwrap()
            .matmul(&vh)
            .unwrap();
        assert_close(&vals(&usv), &vals(&a), 1e-12);
        let sv = vals(&s);
        for row in sv.chunks(m.min(n)) {
            assert!(row.windows(2).all(|w| w[0] >= w[1]), "{row:?}");
        }
        assert_close(&vals(&a.svdvals().unwrap()), &sv, 1e-12);
    }
}

#[test]
fn eigh_diagonalises_a_symmetric_matrix() {
    let a = t(&[2.0, 1.0, 0.0, 1.0, 3.0, 1.0, 0.0, 1.0, 4.0], &[3, 3]);
    let (w, v) = a.eigh(true).unwrap();
    // Eigenvalues of this tridiagonal matrix: 3 and 3 ± √3.
    assert_close(
        &vals(&w),
        &[3.0 - 3f64.sqrt(), 3.0, 3.0 + 3f64.sqrt()],
        1e-12,
    );
    let back = v
        .mul(&w.unsqueeze(-2).unwrap())
        .unwrap()
        .matmul(&v.t().unwrap())
        .unwrap();
    assert_close(&vals(&back), &vals(&a), 1e-12);
}

#[test]
fn matrix_exp_of_diagonal_and_nilpotent_matrices() {
    let d = t(&[1.0, 0.0, 0.0, -2.0], &[2, 2]);
    assert_close(
        &vals(&d.matrix_exp().unwrap()),
        &[1f64.exp(), 0.0, 0.0, (-2f64).exp()],
        1e-14,
    );
    // N³ = 0: exp(N) = I + N + N²/2.
    let n = t(&[0.0, 1.0, 2.0, 0.0, 0.0, 3.0, 0.0, 0.0, 0.0], &[3, 3]);
    assert_close(
        &vals(&n.matrix_exp().unwrap()),
        &[1.0, 1.0, 3.5, 0.0, 1.0, 3.0, 0.0, 0.0, 1.0],
        1e-14,
    );
    // A large norm goes through scaling and squaring: exp(diag(10, -10)).
    let big = t(&[10.0, 0.0, 0.0, -10.0], &[2, 2]);
    assert_close(
        &vals(&big.matrix_exp().unwrap()),
        &[10f64.exp(), 0.0, 0.0, (-10f64).exp()],
        1e-13,
    );
}

#[test]
fn gradients_match_finite_differences() {
    let spd = |x: &Tensor| {
        x.matmul(&x.t().unwrap())
            .unwrap()
            .add(&Tensor::eye(3, 3, DType::Float64).unwrap())
            .unwrap()
    };
    let sym = |x: &Tensor| x.add(&x.t().unwrap()).unwrap();
    check_grad(|x| x.inv().unwrap(), &A3, &[3, 3], 1e-6);
    check_grad(|x| x.slogdet().unwrap().1, &A3, &[3, 3], 1e-6);
    check_grad(
        |x| x.matrix_exp().unwrap().mul_scalar(0.1).unwrap(),
        &A3.map(|v| v * 0.3),
        &[3, 3],
        1e-6,
    );
    check_grad(
        |x| spd(x).cholesky(false).unwrap().pow_scalar(2.0).unwrap(),
        &A3,
        &[3, 3],
        1e-6,
    );
    check_grad(
        |x| sym(x).eigh(true).unwrap().0.pow_scalar(2.0).unwrap(),
        &A3,
        &[3, 3],
        1e-6,
    );
    check_grad(
        |x| x.svdvals().unwrap().pow_scalar(3.0).unwrap(),
        &A3,
        &[3, 3],
        1e-6,
    );
    check_grad(
        |x| x.pinv(None, None, false).unwrap().pow_scalar(2.0).unwrap(),
        &A3[..6],
        &[2, 3],
        1e-6,
    );
    check_grad(
        |x| x.qr(QrMode::Reduced).unwrap().1.pow_scalar(2.0).unwrap(),
        &A3,
        &[3, 3],
        1e-6,
    );
    check_grad(|x| x.matrix_power(-2).unwrap(), &A3, &[3, 3], 1e-6);
}

#[test]
fn products_cross_vecdot_multi_dot() {
    let x = t(&[1.0, 2.0, 3.0], &[3]);
    let y = t(&[4.0, 5.0, 6.0], &[3]);
    assert_eq!(
        vals(&x.linalg_cross(&y, -1).unwrap()),
        vec![-3.0, 6.0, -3.0]
    );
    assert_eq!(vals(&x.vecdot(&y, -1).unwrap()), vec![32.0]);
    let m = t(&[1.0, 0.0, 2.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0], &[3, 3]);
    let chain = Tensor::multi_dot(&[x.clone(), m.clone(), m.clone(), y.clone()]).unwrap();
    let direct = x
        .unsqueeze(0)
        .unwrap()
        .matmul(&m)
        .unwrap()
        .matmul(&m)
        .unwrap()
        .matmul(&y.unsqueeze(-1).unwrap())
        .unwrap();
    assert_eq!(chain.shape(), &[] as &[usize]);
    assert_close(&vals(&chain), &vals(&direct), 1e-12);
    assert_eq!(
        x.linalg_cross(&t(&[1.0, 2.0], &[2]), -1)
            .unwrap_err()
            .message(),
        "linalg.cross: inputs dimension -1 must have length 3. Got 3 and 2"
    );
}
