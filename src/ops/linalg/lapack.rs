//! The dense factorisations behind `torch.linalg`, through `faer`: batched over leading dims,
//! computed in float64 (float32 inputs are widened and the results rounded back), recording
//! nothing. The differentiable ops in `solve.rs` and `factor.rs` call these and write their
//! backward rules with tensor ops.

use faer::linalg::solvers::Solve;
use faer::{Mat, MatRef, Par, Side};

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

    /// Matrix `k` copied column-major, the layout faer's factorisations work in, by the
    /// tensors' tiled transpose (faer's own copy of a row-major view goes element by element).
    pub(crate) fn col_major(&self, k: usize) -> Result<Vec<f64>> {
        let (r, c) = (self.rows, self.cols);
        let layout = crate::tensor::storage::Layout {
            shape: [c, r].as_slice().into(),
            strides: [1, c].as_slice().into(),
            offset: 0,
        };
        crate::kernels::copy::permuted_copy(&layout, &self.data[k * r * c..(k + 1) * r * c])
    }

    /// [`Batch::col_major`] as a faer view over `v`.
    pub(crate) fn view<'v>(&self, v: &'v [f64]) -> MatRef<'v, f64> {
        MatRef::from_column_major_slice(v, self.rows, self.cols)
    }

    /// One output per matrix, each `tail`-shaped, stacked into a tensor of the input's dtype.
    pub(crate) fn collect(&self, data: Vec<f64>, tail: &[usize]) -> Result<Tensor> {
        let mut shape = self.batch.clone();
        shape.extend_from_slice(tail);
        self.wrap(Tensor::from_vec(data, &shape)?.to_dtype(self.dtype)?)
    }
}

/// LU with partial pivoting of a square matrix, left in one matrix as LAPACK's `getrf` leaves
/// it (faer's `PartialPivLu` copies the input and then L and U apart again: two copies fewer).
pub(crate) struct Lu {
    /// Column-major `n x n`: U on and above the diagonal, L's multipliers below it (its unit
    /// diagonal implied).
    lu: Vec<f64>,
    n: usize,
    /// Row `i` of `P A` is row `perm[i]` of `A`.
    perm: Vec<usize>,
    transpositions: usize,
    /// LAPACK's `info`: the 1-based index of the first exactly-zero pivot, 0 when there is none.
    pub(crate) info: usize,
}

impl Lu {
    /// Factors the column-major `n x n` matrix `lu` in place (on this thread: faer's parallel
    /// LU measured slower at 256²).
    pub(crate) fn new(mut lu: Vec<f64>, n: usize) -> Lu {
        use faer::dyn_stack::{MemBuffer, MemStack};
        use faer::linalg::lu::partial_pivoting::factor::{lu_in_place, lu_in_place_scratch};
        let (mut perm, mut perm_inv) = (vec![0usize; n], vec![0usize; n]);
        let scratch = lu_in_place_scratch::<usize, f64>(n, n, Par::Seq, Default::default());
        let (info, _) = lu_in_place(
            faer::MatMut::from_column_major_slice_mut(&mut lu, n, n),
            &mut perm,
            &mut perm_inv,
            Par::Seq,
            MemStack::new(&mut MemBuffer::new(scratch)),
            Default::default(),
        );
        let transpositions = info.transposition_count;
        let info = (0..n).find(|&i| lu[i * n + i] == 0.0).map_or(0, |i| i + 1);
        Lu {
            lu,
            n,
            perm,
            transpositions,
            info,
        }
    }

    /// `P B` for the row-major `n x k` matrix `b`: the right-hand side as the triangular
    /// solves take it, gathered row by row (faer permutes in place through a scratch copy).
    pub(crate) fn permuted(&self, b: &[f64], k: usize) -> Vec<f64> {
        let mut x = Vec::with_capacity(b.len());
        for &r in &self.perm {
            x.extend_from_slice(&b[r * k..(r + 1) * k]);
        }
        x
    }

    /// `P` as a row-major `n x n` matrix (`P I`, for the inverse).
    fn permutation_matrix(&self) -> Vec<f64> {
        let n = self.n;
        let mut x = vec![0.0; n * n];
        for (i, &r) in self.perm.iter().enumerate() {
            x[i * n + r] = 1.0;
        }
        x
    }

    /// `A⁻¹ B` written over `x = P B` ([`Lu::permuted`], row-major `n x k`): the two
    /// triangular solves, in bands of [`SOLVE_BAND`] columns shared among the pool's threads
    /// (faer's parallel mode would use rayon's global pool, not ferrograd's).
    pub(crate) fn solve_permuted_in_place(&self, x: &mut [f64], k: usize) {
        use faer::linalg::triangular_solve::{
            solve_unit_lower_triangular_in_place, solve_upper_triangular_in_place,
        };
        let n = self.n;
        debug_assert_eq!(x.len(), n * k);
        let lu = MatRef::from_column_major_slice(&self.lu, n, n);
        if n == 0 || k == 0 {
            return;
        }
        let bands = k.div_ceil(SOLVE_BAND);
        let work = n.saturating_mul(n).saturating_mul(k);
        let helpers = if work >= SOLVE_PAR_MIN_WORK {
            crate::parallel::helpers()
        } else {
            0
        };
        let base = crate::parallel::SendPtr(x.as_mut_ptr());
        crate::parallel::share_work(helpers, bands, &|band| {
            let c0 = band * SOLVE_BAND;
            let w = SOLVE_BAND.min(k - c0);
            // SAFETY: bands are disjoint column ranges of the row-major `x` (row stride `k`),
            // which outlives `share_work`.
            let mut cols = unsafe {
                faer::MatMut::from_raw_parts_mut(base.get().add(c0), n, w, k as isize, 1)
            };
            // Each reads only its own triangle of the shared factor (L's diagonal implied).
            solve_unit_lower_triangular_in_place(lu, cols.as_mut(), Par::Seq);
            solve_upper_triangular_in_place(lu, cols, Par::Seq);
        });
    }

    /// `(sign, log |det|)`: `(0, -inf)` when a pivot is exactly zero.
    fn slogdet(&self) -> (f64, f64) {
        if self.info != 0 {
            // Later pivots may be NaN (0/0); the determinant is 0.
            return (0.0, f64::NEG_INFINITY);
        }
        let mut sign = if self.transpositions.is_multiple_of(2) {
            1.0
        } else {
            -1.0
        };
        let mut log = 0.0;
        for i in 0..self.n {
            let d = self.lu[i * self.n + i];
            if d < 0.0 {
                sign = -sign;
            }
            log += d.abs().ln();
        }
        (sign, log)
    }
}

/// Columns per band of [`Lu::solve_permuted_in_place`]. Each band is one single-threaded faer
/// call whatever the thread count, so every column's result is the same on 1 or more threads.
const SOLVE_BAND: usize = 64;

/// Solves below this many multiply-adds (`n² k`) stay on the calling thread.
const SOLVE_PAR_MIN_WORK: usize = 1 << 18;

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
fn concat(mut parts: Vec<Vec<f64>>) -> Vec<f64> {
    if parts.len() == 1 {
        return parts.pop().unwrap_or_default();
    }
    parts.concat()
}

/// `m` in row-major order: faer's results are column-major (often views), so this is the
/// tensors' tiled transpose where the strides allow it.
fn row_major(m: MatRef<'_, f64>) -> Vec<f64> {
    let (r, c) = (m.nrows(), m.ncols());
    let (rs, cs) = (m.row_stride(), m.col_stride());
    if r > 0 && c > 0 && rs >= 0 && cs >= 0 {
        let (rs, cs) = (rs as usize, cs as usize);
        let len = (r - 1) * rs + (c - 1) * cs + 1;
        // SAFETY: a view with non-negative strides addresses `len` elements from its pointer.
        let data = unsafe { std::slice::from_raw_parts(m.as_ptr(), len) };
        let layout = crate::tensor::storage::Layout {
            shape: [r, c].as_slice().into(),
            strides: [rs, cs].as_slice().into(),
            offset: 0,
        };
        if let Ok(v) = crate::kernels::copy::permuted_copy(&layout, data) {
            return v;
        }
    }
    (0..r)
        .flat_map(|i| (0..c).map(move |j| m[(i, j)]))
        .collect()
}

/// Inverses of a batch of square matrices and each one's `info` (see [`Lu`]); a singular
/// matrix's entry holds whatever the elimination produced.
pub(crate) fn inverse(b: &Batch) -> Result<(Vec<f64>, Vec<usize>)> {
    let n = b.rows;
    let parts = per_matrix(b, |k| {
        let f = Lu::new(b.col_major(k)?, n);
        // A⁻¹ I through the banded solve: faer's `inverse` (inverting U and L, then their
        // product) runs on one thread.
        let mut x = f.permutation_matrix();
        f.solve_permuted_in_place(&mut x, n);
        Ok((x, f.info))
    })?;
    let (mats, info): (Vec<_>, Vec<_>) = parts.into_iter().unzip();
    Ok((concat(mats), info))
}

/// `A⁻¹ B` for batches of equal batch shape; `info` as in [`inverse`].
pub(crate) fn solve(a: &Batch, rhs: &Batch) -> Result<(Vec<f64>, Vec<usize>)> {
    let size = rhs.rows * rhs.cols;
    let parts = per_matrix(a, |k| {
        let f = Lu::new(a.col_major(k)?, a.rows);
        let mut x = f.permuted(&rhs.data[k * size..(k + 1) * size], rhs.cols);
        f.solve_permuted_in_place(&mut x, rhs.cols);
        Ok((x, f.info))
    })?;
    let (mats, info): (Vec<_>, Vec<_>) = parts.into_iter().unzip();
    Ok((concat(mats), info))
}

/// Per matrix: the sign of the determinant (0 when singular) and `log |det|` (`-inf` when
/// singular), from one LU.
pub(crate) fn slogdet(b: &Batch) -> Result<(Vec<f64>, Vec<f64>)> {
    let parts = per_matrix(b, |k| Ok(Lu::new(b.col_major(k)?, b.rows).slogdet()))?;
    Ok(parts.into_iter().unzip())
}

/// Lower Cholesky factors (read from the lower triangle) and `info`: the order of the first
/// leading minor that is not positive-definite, 0 when all are (the factor is then zeros).
pub(crate) fn cholesky(b: &Batch) -> Result<(Vec<f64>, Vec<usize>)> {
    let n = b.rows;
    let parts = per_matrix(b, |k| {
        Ok(match b.view(&b.col_major(k)?).llt(Side::Lower) {
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
        let f = b.view(&b.col_major(k)?).qr();
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
        let a = b.col_major(k)?;
        let a = b.view(&a);
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
        let a = b.col_major(k)?;
        let a = b.view(&a);
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
        b.view(&b.col_major(k)?)
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
