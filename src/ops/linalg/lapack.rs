//! The dense factorisations behind `torch.linalg`, through `faer`: batched over leading dims,
//! computed in float64 (float32 inputs are widened and the results rounded back), recording
//! nothing. The differentiable ops in `solve.rs` and `factor.rs` call these and write their
//! backward rules with tensor ops.

use faer::linalg::solvers::{DenseSolveCore, Solve};
use faer::{Mat, MatRef, Side};

use parking_lot::Mutex;

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::tensor::batched::{peel, rewrap, Level};
use crate::tensor::grad_mode::GradModeGuard;
use crate::tensor::{scalar_type_name, DType, Tensor};

/// A stack of `rows x cols` matrices in row-major float64, with the leading (batch) shape.
pub(crate) struct Batch {
    data: Vec<f64>,
    /// The leading dims.
    pub(crate) batch: Vec<usize>,
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    /// The input's dtype, which the results take.
    pub(crate) dtype: DType,
    /// Inside vmap: the levels the input was batched at (innermost first). Their batch
    /// dims lead `batch`, so every sample's matrices go through the kernel at once, and the
    /// results are batched again at them.
    levels: Vec<Arc<Level>>,
}

/// The machine epsilon of a float dtype (float32's for float32, else float64's).
pub(crate) fn eps(dtype: DType) -> f64 {
    if dtype == DType::Float32 {
        f32::EPSILON as f64
    } else {
        f64::EPSILON
    }
}

/// torch's check that `x` has a floating dtype, with `op`'s name.
pub(crate) fn check_float(x: &Tensor, op: &str) -> Result<()> {
    if x.dtype().is_float() {
        return Ok(());
    }
    Err(Error::not_implemented(format!(
        "{op}: Expected a floating point or complex tensor as input. Got {}",
        scalar_type_name(x.dtype())
    )))
}

/// torch's check that `x` is a floating matrix (or a batch of them), with `op`'s name.
pub(crate) fn check_matrix(x: &Tensor, op: &str, name: &str) -> Result<()> {
    if x.dim() < 2 {
        return Err(Error::runtime(format!(
            "{op}: The input tensor {name} must have at least 2 dimensions."
        )));
    }
    check_float(x, op)
}

/// [`check_matrix`] and squareness, as torch words it.
pub(crate) fn check_square(x: &Tensor, op: &str, name: &str) -> Result<()> {
    check_matrix(x, op, name)?;
    let s = x.shape();
    let (m, n) = (s[s.len() - 2], s[s.len() - 1]);
    if m != n {
        return Err(Error::runtime(format!(
            "{op}: {name} must be batches of square matrices, but they are {m} by {n} matrices"
        )));
    }
    Ok(())
}

/// torch's prefix for an error in one matrix of a batch.
pub(crate) fn batch_prefix(batched: bool, k: usize) -> String {
    if !batched {
        String::new()
    } else {
        format!("(Batch element {k}): ")
    }
}

impl Batch {
    /// The matrices of `x` (at least 2-D, float), copied out as float64.
    pub(crate) fn of(x: &Tensor) -> Result<Batch> {
        let (x, levels) = peel(x);
        let nd = x.dim();
        let s = x.shape();
        let (rows, cols) = (s[nd - 2], s[nd - 1]);
        let data = {
            let _g = GradModeGuard::new(false);
            x.detach().to_vec::<f64>()?
        };
        Ok(Batch {
            data,
            batch: s[..nd - 2].to_vec(),
            rows,
            cols,
            dtype: x.dtype(),
            levels,
        })
    }

    /// A tensor over this batch (leading shape `batch`) as the per-sample function sees it:
    /// batched again at the input's levels.
    pub(crate) fn wrap(&self, t: Tensor) -> Result<Tensor> {
        rewrap(t, &self.levels)
    }

    /// How many matrices.
    pub(crate) fn len(&self) -> usize {
        self.batch.iter().product()
    }

    /// Matrix `k`.
    pub(crate) fn mat(&self, k: usize) -> MatRef<'_, f64> {
        let size = self.rows * self.cols;
        MatRef::from_row_major_slice(&self.data[k * size..(k + 1) * size], self.rows, self.cols)
    }

    /// One output per matrix, each `tail`-shaped, stacked into a tensor of the input's dtype.
    pub(crate) fn collect(&self, data: Vec<f64>, tail: &[usize]) -> Result<Tensor> {
        let mut shape = self.batch.clone();
        shape.extend_from_slice(tail);
        self.wrap(Tensor::from_vec(data, &shape)?.to_dtype(self.dtype)?)
    }
}

/// Appends `m` in row-major order.
fn push_mat(out: &mut Vec<f64>, m: MatRef<'_, f64>) {
    for i in 0..m.nrows() {
        for j in 0..m.ncols() {
            out.push(m[(i, j)]);
        }
    }
}

/// LU with partial pivoting of a square matrix: the factorisation and LAPACK's `info` (the
/// 1-based index of the first exactly-zero pivot, 0 when there is none).
pub(crate) fn lu(a: MatRef<'_, f64>) -> (faer::linalg::solvers::PartialPivLu<f64>, usize) {
    let f = a.partial_piv_lu();
    let u = f.U();
    let info = (0..u.nrows())
        .find(|&i| u[(i, i)] == 0.0)
        .map_or(0, |i| i + 1);
    (f, info)
}

/// `f(k)` for every matrix `k` of the batch, in order: spread over the pool's threads when
/// there are several matrices with enough work between them, else on this thread.
fn per_matrix<T: Send>(b: &Batch, f: impl Fn(usize) -> Result<T> + Sync) -> Result<Vec<T>> {
    let count = b.len();
    let work = count * b.rows * b.cols * b.rows.min(b.cols).max(1);
    let helpers = crate::parallel::helpers();
    if count <= 1 || helpers == 0 || work < (1 << 16) {
        return (0..count).map(f).collect();
    }
    let slots: Vec<Mutex<Option<Result<T>>>> = (0..count).map(|_| Mutex::new(None)).collect();
    crate::parallel::share_work(helpers, count, &|k| {
        *slots[k].lock() = Some(f(k));
    });
    slots
        .into_iter()
        .map(|s| {
            s.into_inner()
                .unwrap_or_else(|| Err(Error::runtime("linalg: a batch element was not computed")))
        })
        .collect()
}

/// The per-matrix pieces concatenated, as a batch's data.
fn concat(parts: Vec<Vec<f64>>) -> Vec<f64> {
    parts.concat()
}

/// `m` in row-major order.
fn row_major(m: MatRef<'_, f64>) -> Vec<f64> {
    let mut out = Vec::with_capacity(m.nrows() * m.ncols());
    push_mat(&mut out, m);
    out
}

/// Inverses of a batch of square matrices and each one's `info` (see [`lu`]); a singular
/// matrix's entry holds whatever the elimination produced.
pub(crate) fn inverse(b: &Batch) -> Result<(Vec<f64>, Vec<usize>)> {
    let parts = per_matrix(b, |k| {
        let (f, i) = lu(b.mat(k));
        Ok((row_major(f.inverse().as_ref()), i))
    })?;
    let (mats, info): (Vec<_>, Vec<_>) = parts.into_iter().unzip();
    Ok((concat(mats), info))
}

/// `A⁻¹ B` for batches of equal batch shape; `info` as in [`inverse`].
pub(crate) fn solve(a: &Batch, rhs: &Batch) -> Result<(Vec<f64>, Vec<usize>)> {
    let parts = per_matrix(a, |k| {
        let (f, i) = lu(a.mat(k));
        Ok((row_major(f.solve(rhs.mat(k)).as_ref()), i))
    })?;
    let (mats, info): (Vec<_>, Vec<_>) = parts.into_iter().unzip();
    Ok((concat(mats), info))
}

/// Sign of a permutation given as an index array.
fn permutation_sign(p: &[usize]) -> f64 {
    let mut seen = vec![false; p.len()];
    let mut sign = 1.0;
    for s in 0..p.len() {
        if seen[s] {
            continue;
        }
        let (mut j, mut len) = (s, 0usize);
        while !seen[j] {
            seen[j] = true;
            j = p[j];
            len += 1;
        }
        if len % 2 == 0 {
            sign = -sign;
        }
    }
    sign
}

/// Per matrix: the sign of the determinant (0 when singular) and `log |det|` (`-inf` when
/// singular), from one LU.
pub(crate) fn slogdet(b: &Batch) -> Result<(Vec<f64>, Vec<f64>)> {
    let parts = per_matrix(b, |k| {
        let (f, info) = lu(b.mat(k));
        if info != 0 {
            // An exactly-zero pivot: later pivots may be NaN (0/0); the determinant is 0.
            return Ok((0.0, f64::NEG_INFINITY));
        }
        let u = f.U();
        let mut sign = permutation_sign(f.P().arrays().0);
        let mut log = 0.0;
        for i in 0..u.nrows() {
            let d = u[(i, i)];
            if d < 0.0 {
                sign = -sign;
            }
            log += d.abs().ln();
        }
        Ok((sign, log))
    })?;
    Ok(parts.into_iter().unzip())
}

/// Lower Cholesky factors (read from the lower triangle) and `info`: the order of the first
/// leading minor that is not positive-definite, 0 when all are (the factor is then zeros).
pub(crate) fn cholesky(b: &Batch) -> Result<(Vec<f64>, Vec<usize>)> {
    let n = b.rows;
    let parts = per_matrix(b, |k| {
        Ok(match b.mat(k).llt(Side::Lower) {
            Ok(f) => (row_major(f.L()), 0),
            Err(faer::linalg::solvers::LltError::NonPositivePivot { index }) => {
                (vec![0.0; n * n], index + 1)
            }
        })
    })?;
    let (mats, info): (Vec<_>, Vec<_>) = parts.into_iter().unzip();
    Ok((concat(mats), info))
}

/// Householder QR per matrix: `Q` (`m x k`, or `m x m` when `complete`) and `R` (`k x n` or
/// `m x n`), `k = min(m, n)`; `Q` is left out when `want_q` is false.
pub(crate) fn qr(b: &Batch, complete: bool, want_q: bool) -> Result<(Vec<f64>, Vec<f64>)> {
    let parts = per_matrix(b, |k| {
        let f = b.mat(k).qr();
        let q = match (want_q, complete) {
            (false, _) => Vec::new(),
            (true, true) => row_major(f.compute_Q().as_ref()),
            (true, false) => row_major(f.compute_thin_Q().as_ref()),
        };
        let r = if complete {
            // faer's R has min(m, n) rows; the complete R is padded with zero rows.
            let r = f.R();
            let mut out = row_major(r);
            out.resize(b.rows * b.cols, 0.0);
            out
        } else {
            row_major(f.thin_R())
        };
        Ok((q, r))
    })?;
    let (qs, rs): (Vec<_>, Vec<_>) = parts.into_iter().unzip();
    Ok((concat(qs), concat(rs)))
}

/// Symmetric eigendecomposition per matrix, reading the `lower` (or upper) triangle:
/// eigenvalues ascending and the eigenvectors as columns (left out unless `want_vectors`).
pub(crate) fn eigh(b: &Batch, lower: bool, want_vectors: bool) -> Result<(Vec<f64>, Vec<f64>)> {
    let side = if lower { Side::Lower } else { Side::Upper };
    let parts = per_matrix(b, |k| {
        let a = b.mat(k);
        if want_vectors {
            let e = a
                .self_adjoint_eigen(side)
                .map_err(|_| eig_failed(b, k, "linalg.eigh"))?;
            Ok((
                e.S().column_vector().iter().copied().collect(),
                row_major(e.U()),
            ))
        } else {
            let v = a
                .self_adjoint_eigenvalues(side)
                .map_err(|_| eig_failed(b, k, "linalg.eigvalsh"))?;
            Ok((v, Vec::new()))
        }
    })?;
    let (vals, vecs): (Vec<_>, Vec<_>) = parts.into_iter().unzip();
    Ok((concat(vals), concat(vecs)))
}

fn eig_failed(b: &Batch, k: usize, op: &str) -> Error {
    Error::runtime(format!(
        "{op}: {}The algorithm failed to converge because the input matrix is ill-conditioned or has too many repeated eigenvalues.",
        batch_prefix(!b.batch.is_empty(), k)
    ))
}

fn svd_failed(b: &Batch, k: usize, op: &str) -> Error {
    let m = b.mat(k);
    let finite = (0..m.nrows()).all(|i| (0..m.ncols()).all(|j| m[(i, j)].is_finite()));
    let why = if finite {
        "is ill-conditioned or has too many repeated singular values"
    } else {
        "contained non-finite values"
    };
    Error::runtime(format!(
        "{op}: {}The algorithm failed to converge because the input matrix {why}.",
        batch_prefix(!b.batch.is_empty(), k)
    ))
}

/// SVD per matrix: `U`, `S` (descending) and `Vᴴ`; full (`m x m`, `n x n`) or thin
/// (`k = min(m, n)` columns/rows) singular vectors.
pub(crate) fn svd(b: &Batch, full: bool) -> Result<(Vec<f64>, Vec<f64>, Vec<f64>)> {
    let parts = per_matrix(b, |k| {
        let a = b.mat(k);
        let f = if full { a.svd() } else { a.thin_svd() }
            .map_err(|_| svd_failed(b, k, "linalg.svd"))?;
        let s: Vec<f64> = f.S().column_vector().iter().copied().collect();
        Ok((row_major(f.U()), s, row_major(f.V().transpose())))
    })?;
    let (mut us, mut ss, mut vhs) = (Vec::new(), Vec::new(), Vec::new());
    for (u, s, vh) in parts {
        us.extend(u);
        ss.extend(s);
        vhs.extend(vh);
    }
    Ok((us, ss, vhs))
}

/// Singular values only (descending), per matrix.
pub(crate) fn singular_values(b: &Batch) -> Result<Vec<f64>> {
    let parts = per_matrix(b, |k| {
        b.mat(k)
            .singular_values()
            .map_err(|_| svd_failed(b, k, "linalg.svd"))
    })?;
    Ok(concat(parts))
}

/// Pseudo-inverse per matrix: singular values (eigenvalues by magnitude when `hermitian`) at
/// most `max(atol, rtol · largest)` count as zero.
pub(crate) fn pinv(b: &Batch, hermitian: bool, atol: f64, rtol: f64) -> Result<Vec<f64>> {
    let (m, n) = (b.rows, b.cols);
    let parts = per_matrix(b, |k| {
        let a = b.mat(k);
        // A⁺ = V diag(1/s) Uᴴ over the kept singular values (for hermitian, A = U diag(l) Uᴴ
        // and A⁺ = U diag(1/l) Uᴴ).
        let (u, s, v): (Mat<f64>, Vec<f64>, Mat<f64>) = if hermitian {
            let e = a
                .self_adjoint_eigen(Side::Lower)
                .map_err(|_| eig_failed(b, k, "linalg.pinv"))?;
            let u = e.U().to_owned();
            (
                u.clone(),
                e.S().column_vector().iter().copied().collect(),
                u,
            )
        } else {
            let f = a.thin_svd().map_err(|_| svd_failed(b, k, "linalg.svd"))?;
            let s = f.S().column_vector().iter().copied().collect();
            (f.U().to_owned(), s, f.V().to_owned())
        };
        let largest = s.iter().fold(0.0f64, |acc, x| acc.max(x.abs()));
        let cut = atol.max(rtol * largest);
        let mut p = Mat::<f64>::zeros(n, m);
        for (j, &sj) in s.iter().enumerate() {
            if sj.abs() <= cut || sj == 0.0 {
                continue;
            }
            let inv = 1.0 / sj;
            for r in 0..n {
                let vr = v[(r, j)] * inv;
                for c in 0..m {
                    p[(r, c)] += vr * u[(c, j)];
                }
            }
        }
        Ok(row_major(p.as_ref()))
    })?;
    Ok(concat(parts))
}

/// Padé coefficients `b_0..b_m` of degree 3, 5, 7 and 9 with the 1-norm up to which each is
/// accurate to double precision (Higham 2005, Table 2.3).
const PADE_LOW: [(f64, &[f64]); 4] = [
    (1.495585217958292e-2, &[120.0, 60.0, 12.0, 1.0]),
    (
        2.53939833006323e-1,
        &[30240.0, 15120.0, 3360.0, 420.0, 30.0, 1.0],
    ),
    (
        9.504178996162932e-1,
        &[
            17297280.0, 8648640.0, 1995840.0, 277200.0, 25200.0, 1512.0, 56.0, 1.0,
        ],
    ),
    (
        2.097847961257068e0,
        &[
            17643225600.0,
            8821612800.0,
            2075673600.0,
            302702400.0,
            30270240.0,
            2162160.0,
            110880.0,
            3960.0,
            90.0,
            1.0,
        ],
    ),
];

/// Degree-13 Padé coefficients and their 1-norm bound.
const PADE13: [f64; 14] = [
    64764752532480000.0,
    32382376266240000.0,
    7771770303897600.0,
    1187353796428800.0,
    129060195264000.0,
    10559470521600.0,
    670442572800.0,
    33522128640.0,
    1323241920.0,
    40840800.0,
    960960.0,
    16380.0,
    182.0,
    1.0,
];
const THETA13: f64 = 5.371920351148152;

/// `Σ_k c[k] · p[k]` over matrices `p` (each `n x n`).
fn combo(n: usize, terms: &[(f64, &Mat<f64>)]) -> Mat<f64> {
    let mut out = Mat::<f64>::zeros(n, n);
    for (c, m) in terms {
        out += *m * faer::Scale(*c);
    }
    out
}

/// Matrix exponential per matrix: scaling and squaring with the Padé approximant of the
/// lowest degree (3, 5, 7, 9 or 13) accurate for the matrix's 1-norm (Higham 2005, "The
/// scaling and squaring method for the matrix exponential revisited"). The coefficients are
/// divided by `b_0`, so `V` starts at `I` and exactly representable cases (diagonal,
/// nilpotent) come out exact.
pub(crate) fn expm(b: &Batch) -> Result<Vec<f64>> {
    let n = b.rows;
    let parts = per_matrix(b, |k| {
        let a = b.mat(k);
        let norm1 = (0..n)
            .map(|j| (0..n).map(|i| a[(i, j)].abs()).sum::<f64>())
            .fold(0.0f64, f64::max);
        if !norm1.is_finite() {
            return Ok(vec![f64::NAN; n * n]);
        }
        let id = Mat::<f64>::identity(n, n);
        let low = PADE_LOW.iter().find(|(theta, _)| norm1 <= *theta);
        let (s, u, v) = if let Some((_, c)) = low {
            // U = A Σ c_{2j+1} A^{2j}, V = Σ c_{2j} A^{2j}.
            let a = a.to_owned();
            let a2 = &a * &a;
            let mut powers = vec![id.clone(), a2.clone()];
            while powers.len() * 2 < c.len() {
                let next = powers.last().map(|p| p * &a2).unwrap_or_else(|| id.clone());
                powers.push(next);
            }
            let c0 = c[0];
            let odd: Vec<(f64, &Mat<f64>)> = powers
                .iter()
                .enumerate()
                .filter(|(j, _)| 2 * j + 1 < c.len())
                .map(|(j, p)| (c[2 * j + 1] / c0, p))
                .collect();
            let even: Vec<(f64, &Mat<f64>)> = powers
                .iter()
                .enumerate()
                .filter(|(j, _)| 2 * j < c.len())
                .map(|(j, p)| (c[2 * j] / c0, p))
                .collect();
            (0, &a * combo(n, &odd), combo(n, &even))
        } else {
            let s = (norm1 / THETA13).log2().ceil().max(0.0) as i32;
            let c: Vec<f64> = PADE13.iter().map(|x| x / PADE13[0]).collect();
            let a = a.to_owned() * faer::Scale(0.5f64.powi(s));
            let a2 = &a * &a;
            let a4 = &a2 * &a2;
            let a6 = &a4 * &a2;
            let u_inner = &a6 * combo(n, &[(c[13], &a6), (c[11], &a4), (c[9], &a2)]);
            let u =
                &a * (u_inner + combo(n, &[(c[7], &a6), (c[5], &a4), (c[3], &a2), (c[1], &id)]));
            let v_inner = &a6 * combo(n, &[(c[12], &a6), (c[10], &a4), (c[8], &a2)]);
            let v = v_inner + combo(n, &[(c[6], &a6), (c[4], &a4), (c[2], &a2), (c[0], &id)]);
            (s, u, v)
        };
        let p = &v + &u;
        let q = &v - &u;
        let mut r = q.partial_piv_lu().solve(&p);
        for _ in 0..s {
            r = &r * &r;
        }
        Ok(row_major(r.as_ref()))
    })?;
    Ok(concat(parts))
}
