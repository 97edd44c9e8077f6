//! Inverse, linear solve, determinants, matrix powers and the matrix exponential, with torch's
//! backward rules written in differentiable ops (`create_graph` works through them).

use super::lapack::{self, batch_prefix, check_float, check_matrix, check_square, Batch};
use crate::error::{Error, Result};
use crate::graph::node::{needs_grad, record};
use crate::tensor::grad_mode::GradModeGuard;
use crate::tensor::Tensor;

/// The transpose of the last two dims (torch's `mT`).
pub(crate) fn mt(x: &Tensor) -> Result<Tensor> {
    x.transpose(-2, -1)
}

/// The index of the first batch element with a nonzero `info`, and that info.
pub(crate) fn first_failure(info: &[usize]) -> Option<(usize, usize)> {
    info.iter()
        .enumerate()
        .find(|(_, &i)| i != 0)
        .map(|(k, &i)| (k, i))
}

impl Tensor {
    /// The inverse of a square matrix (or of each in a batch): `A.inv()?.matmul(&A)` is the
    /// identity. A singular matrix is an error with torch's message (`linalg.inv: The diagonal
    /// element k is zero, ...`); [`Tensor::inv_ex`] returns the status instead.
    ///
    /// ```
    /// use ferrograd::Tensor;
    /// let a = Tensor::from_vec(vec![2.0f64, 0.0, 0.0, 4.0], &[2, 2]).unwrap();
    /// assert_eq!(a.inv().unwrap().to_vec::<f64>().unwrap(), vec![0.5, 0.0, 0.0, 0.25]);
    /// ```
    pub fn inv(&self) -> Result<Tensor> {
        let (out, info) = self.inv_ex_named("linalg.inv")?;
        if let Some((k, i)) = first_failure(&info) {
            return Err(Error::runtime(format!(
                "linalg.inv: {}The diagonal element {i} is zero, the inversion could not be completed because the input matrix is singular.",
                batch_prefix(self.dim() > 2, k)
            )));
        }
        Ok(out)
    }

    /// [`Tensor::inv`] without the singularity check: the inverse and, per matrix, LAPACK's
    /// `info` (0, or the 1-based index of the zero pivot of a singular matrix, whose inverse
    /// then holds non-finite values).
    pub fn inv_ex(&self) -> Result<(Tensor, Vec<usize>)> {
        self.inv_ex_named("linalg.inv_ex")
    }

    fn inv_ex_named(&self, op: &str) -> Result<(Tensor, Vec<usize>)> {
        check_square(self, op, "A")?;
        let b = Batch::of(self)?;
        let (data, info) = lapack::inverse(&b)?;
        let out = b.collect(data, &[b.rows, b.cols])?;
        if needs_grad(&[self]) {
            // d(A⁻¹) = -A⁻¹ dA A⁻¹, so gA = -A⁻ᵀ g A⁻ᵀ.
            record(
                "LinalgInvExBackward0",
                &[self],
                &[&out],
                &[&out],
                false,
                |g, s| {
                    let it = mt(&s[0])?;
                    Ok(vec![Some(it.matmul(&g[0])?.matmul(&it)?.neg()?)])
                },
            )?;
        }
        Ok((out, info))
    }

    /// The solution `X` of `A X = B` (`left`) or `X A = B` (not `left`), batched with
    /// broadcasting; `B` may be a vector (`B.dim() == 1`, or `A.dim() - 1` dims matching `A`'s
    /// leading shape), as in `torch.linalg.solve`. Singular `A` is an error.
    pub fn solve(&self, rhs: &Tensor, left: bool) -> Result<Tensor> {
        let op = "linalg.solve";
        check_square(self, op, "A")?;
        check_float(rhs, op)?;
        if self.dtype() != rhs.dtype() {
            return Err(Error::runtime(format!(
                "{op}: Expected A and B to have the same dtype, but found A of type {} and B of type {} instead",
                crate::tensor::scalar_type_name(self.dtype()),
                crate::tensor::scalar_type_name(rhs.dtype())
            )));
        }
        let n = self.shape()[self.dim() - 1];
        let vector = rhs.dim() == 1
            || (rhs.dim() + 1 == self.dim() && rhs.shape() == &self.shape()[..self.dim() - 1]);
        let b = if vector {
            rhs.unsqueeze(-1)?
        } else {
            rhs.clone()
        };
        if b.dim() < 2 {
            return Err(Error::runtime(format!(
                "{op}: The input tensor B must have at least 2 dimensions."
            )));
        }
        let (br, bc) = (b.shape()[b.dim() - 2], b.shape()[b.dim() - 1]);
        // The dim of B that meets A: its rows for AX = B, its columns for XA = B.
        let meets = if left { br } else { bc };
        if meets != n {
            let what = if left { "AX = B" } else { "XA = B" };
            return Err(Error::runtime(format!(
                "{op}: Incompatible shapes of A and B for the equation {what} ({n}x{n} and {br}x{bc})"
            )));
        }
        // torch broadcasts B's batch dims against A's (its message names them in that order).
        let batch = crate::tensor::shape::broadcast_shapes(
            &b.shape()[..b.dim() - 2],
            &self.shape()[..self.dim() - 2],
        )?;
        let full = |x: &Tensor| -> Result<Tensor> {
            let mut s: Vec<usize> = batch.to_vec();
            s.extend_from_slice(&x.shape()[x.dim() - 2..]);
            if x.shape() == s.as_slice() {
                Ok(x.clone())
            } else {
                x.expand(&s)
            }
        };
        let (a, b) = (full(self)?, full(&b)?);
        let x = solve_square(&a, &b, left)?;
        if vector {
            x.squeeze(Some(-1))
        } else {
            Ok(x)
        }
    }

    /// `det(A)` of a square matrix (or of each in a batch). The gradient is `det · A⁻ᵀ` for an
    /// invertible matrix and the cofactor matrix, through an SVD, for a singular one (finite,
    /// as torch's).
    ///
    /// ```
    /// use ferrograd::Tensor;
    /// let a = Tensor::from_vec(vec![1.0f64, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    /// assert!((a.det().unwrap().item_f64().unwrap() + 2.0).abs() < 1e-12);
    /// ```
    pub fn det(&self) -> Result<Tensor> {
        check_square(self, "linalg.det", "A")?;
        let b = Batch::of(self)?;
        let (signs, logs) = lapack::slogdet(&b)?;
        let dets: Vec<f64> = signs
            .iter()
            .zip(&logs)
            .map(|(s, l)| if *s == 0.0 { 0.0 } else { s * l.exp() })
            .collect();
        let eps = lapack::eps(self.dtype());
        let singular: Vec<bool> = dets.iter().map(|d| d.abs() < 100.0 * eps).collect();
        let out = b.collect(dets, &[])?;
        if needs_grad(&[self]) {
            let mask = b.wrap(Tensor::from_vec(singular.clone(), &b.batch)?)?;
            let n = b.rows;
            record(
                "LinalgDetBackward0",
                &[self],
                &[&out],
                &[self, &out],
                false,
                move |g, s| {
                    let (a, det) = (&s[0], &s[1]);
                    let gd = g[0].mul(det)?.unsqueeze(-1)?.unsqueeze(-1)?;
                    let any_singular = singular.iter().any(|&x| x);
                    let all_singular = singular.iter().all(|&x| x);
                    let id = Tensor::eye(n, n, a.dtype())?;
                    let m = mask.unsqueeze(-1)?.unsqueeze(-1)?;
                    let regular = if all_singular {
                        None
                    } else {
                        // (det g) A⁻ᵀ, on A with the singular matrices replaced by I.
                        let safe = if any_singular {
                            Tensor::where_cond(&m, &id, a)?
                        } else {
                            a.clone()
                        };
                        Some(mt(&safe.inv()?)?.mul(&gd)?)
                    };
                    let cof = if any_singular {
                        Some(singular_det_grad(a, &g[0])?)
                    } else {
                        None
                    };
                    let ga = match (regular, cof) {
                        (Some(r), None) => r,
                        (None, Some(c)) => c,
                        (Some(r), Some(c)) => Tensor::where_cond(&m, &c, &r)?,
                        (None, None) => return Ok(vec![None]),
                    };
                    Ok(vec![Some(ga)])
                },
            )?;
        }
        Ok(out)
    }

    /// `(sign, log|det|)` of a square matrix (or each in a batch): sign 0 and `-inf` for a
    /// singular one. Only `log|det|` has a gradient, `A⁻ᵀ g`.
    pub fn slogdet(&self) -> Result<(Tensor, Tensor)> {
        check_square(self, "linalg.slogdet", "A")?;
        let b = Batch::of(self)?;
        let (signs, logs) = lapack::slogdet(&b)?;
        let sign = b.collect(signs, &[])?;
        let logabs = b.collect(logs, &[])?;
        if needs_grad(&[self]) {
            record(
                "LinalgSlogdetBackward0",
                &[self],
                &[&sign, &logabs],
                &[self],
                false,
                |g, s| {
                    let (ainv, _) = s[0].inv_ex()?;
                    Ok(vec![Some(
                        mt(&ainv)?.mul(&g[1].unsqueeze(-1)?.unsqueeze(-1)?)?,
                    )])
                },
            )?;
        }
        Ok((sign, logabs))
    }

    /// `log det(A)`: NaN when the determinant is negative, `-inf` when it is 0 (torch.logdet).
    pub fn logdet(&self) -> Result<Tensor> {
        check_square(self, "linalg.logdet", "A")?;
        let (sign, logabs) = self.slogdet()?;
        // log(sign) is 0 for +1, NaN for -1 and -inf for 0: torch's values in each case.
        logabs.add(&sign.detach().log()?)
    }

    /// `A^n` for an integer `n` (the identity for 0, powers of the inverse for negative `n`),
    /// by repeated squaring with `matmul`, batched.
    pub fn matrix_power(&self, n: i64) -> Result<Tensor> {
        let op = "linalg.matrix_power";
        if self.dim() < 2 {
            return Err(Error::runtime(format!(
                "{op}: The input tensor A must have at least 2 dimensions."
            )));
        }
        let s = self.shape();
        let (r, c) = (s[s.len() - 2], s[s.len() - 1]);
        if r != c {
            return Err(Error::runtime(format!(
                "{op}: A must be batches of square matrices, but they are {r} by {c} matrices"
            )));
        }
        if n == 0 {
            let id = Tensor::eye(r, r, self.dtype())?;
            return id.expand(s)?.contiguous();
        }
        let base = if n < 0 {
            check_matrix(self, op, "A")?;
            self.inv()?
        } else {
            self.clone()
        };
        let mut e = n.unsigned_abs();
        let mut acc: Option<Tensor> = None;
        let mut p = base;
        loop {
            if e & 1 == 1 {
                acc = Some(match acc {
                    None => p.clone(),
                    Some(a) => a.matmul(&p)?,
                });
            }
            e >>= 1;
            if e == 0 {
                break;
            }
            p = p.matmul(&p)?;
        }
        match acc {
            // A¹ is a new tensor (a differentiable copy), never the input itself.
            Some(a) if n == 1 => a.clone_tensor(),
            Some(a) => Ok(a),
            None => Err(Error::runtime("linalg.matrix_power: no power computed")),
        }
    }

    /// The matrix exponential `exp(A) = Σ Aᵏ/k!` of a square matrix (or each in a batch):
    /// Padé scaling and squaring. Its gradient is the upper-right block of
    /// `exp([[Aᵀ, g], [0, Aᵀ]])`, itself a `matrix_exp`, so it is twice differentiable.
    ///
    /// ```
    /// use ferrograd::Tensor;
    /// let a = Tensor::from_vec(vec![0.0f64, 1.0, 0.0, 0.0], &[2, 2]).unwrap();
    /// // A is nilpotent: exp(A) = I + A.
    /// assert_eq!(a.matrix_exp().unwrap().to_vec::<f64>().unwrap(), vec![1.0, 1.0, 0.0, 1.0]);
    /// ```
    pub fn matrix_exp(&self) -> Result<Tensor> {
        check_square(self, "linalg.matrix_exp", "A")?;
        let b = Batch::of(self)?;
        let out = b.collect(lapack::expm(&b)?, &[b.rows, b.cols])?;
        if needs_grad(&[self]) {
            let n = b.rows;
            record(
                "LinalgMatrixExpBackward0",
                &[self],
                &[&out],
                &[self],
                false,
                move |g, s| {
                    let at = mt(&s[0])?;
                    let zero = at.mul_scalar(0.0)?;
                    let top = Tensor::cat(&[at.clone(), g[0].clone()], -1)?;
                    let bottom = Tensor::cat(&[zero, at], -1)?;
                    let big = Tensor::cat(&[top, bottom], -2)?;
                    let e = big.matrix_exp()?;
                    Ok(vec![Some(e.narrow(-2, 0, n)?.narrow(-1, n as i64, n)?)])
                },
            )?;
        }
        Ok(out)
    }
}

/// `A⁻¹ B` (`left`) or `B A⁻¹` for `A` and `B` of the same batch shape; `B` has at least 2
/// dims. One node, `LinalgSolveExBackward0`, either way.
pub(crate) fn solve_square(a: &Tensor, b: &Tensor, left: bool) -> Result<Tensor> {
    let x = solve_kernel(a, b, left)?;
    if needs_grad(&[a, b]) {
        // X = A⁻¹B: gB = A⁻ᵀ g, gA = -gB Xᵀ.  X = B A⁻¹: gB = g A⁻ᵀ, gA = -Xᵀ gB.
        record(
            "LinalgSolveExBackward0",
            &[a, b],
            &[&x],
            &[a, &x],
            false,
            move |g, s| {
                let gb = solve_square(&mt(&s[0])?, &g[0], left)?;
                let xt = mt(&s[1])?;
                let ga = if left {
                    gb.matmul(&xt)?
                } else {
                    xt.matmul(&gb)?
                };
                Ok(vec![Some(ga.neg()?), Some(gb)])
            },
        )?;
    }
    Ok(x)
}

/// The solution of [`solve_square`], recording nothing.
fn solve_kernel(a: &Tensor, b: &Tensor, left: bool) -> Result<Tensor> {
    // Inside vmap: A and B with the same leading batch dim (either may be shared by all
    // samples), solved together.
    if let Some(r) =
        crate::ops::batching::on_physical_all(&[a, b], |p| solve_kernel(&p[0], &p[1], left))
    {
        return r;
    }
    // B A⁻¹ = (A⁻ᵀ Bᵀ)ᵀ: the kernel solves with the transposes.
    let (ka, kb) = if left {
        (Batch::of(a)?, Batch::of(b)?)
    } else {
        (Batch::of(&mt(a)?)?, Batch::of(&mt(b)?)?)
    };
    let (data, info) = lapack::solve(&ka, &kb)?;
    if let Some((k, _)) = first_failure(&info) {
        return Err(Error::runtime(format!(
            "torch.linalg.solve: {}The solver failed because the input matrix is singular.",
            batch_prefix(!ka.batch.is_empty(), k)
        )));
    }
    let raw = kb.collect(data, &[kb.rows, kb.cols])?;
    if left {
        Ok(raw)
    } else {
        mt(&raw)?.contiguous()
    }
}

/// torch's gradient of `det` at a singular matrix: with `A = U diag(S) Vᴴ`, the cofactor
/// matrix `det(U) det(Vᴴ) U diag(∏_{j≠i} S_j) Vᴴ`, times `g`.
fn singular_det_grad(a: &Tensor, g: &Tensor) -> Result<Tensor> {
    let (u, s, vh) = a.svd(false)?;
    let alpha = {
        let _off = GradModeGuard::new(false);
        u.detach().det()?.mul(&vh.detach().det()?)?
    };
    let d = prod_others(&s)?.mul(&g.mul(&alpha)?.unsqueeze(-1)?)?;
    u.mul(&d.unsqueeze(-2)?)?.matmul(&vh)
}

/// `out_i = ∏_{j≠i} s_j` along the last dim (exclusive prefix times exclusive suffix products).
fn prod_others(s: &Tensor) -> Result<Tensor> {
    let k = s.shape()[s.dim() - 1];
    if k == 0 {
        return Ok(s.clone());
    }
    let mut one_shape = s.shape().to_vec();
    one_shape[s.dim() - 1] = 1;
    let one = Tensor::full(&one_shape, 1.0, s.dtype());
    let head = s.narrow(-1, 0, k - 1)?;
    let tail = s.narrow(-1, 1, k - 1)?;
    let pre = Tensor::cat(&[one.clone(), head], -1)?.cumprod(-1)?;
    let suf = Tensor::cat(&[tail, one], -1)?
        .flip(&[-1])?
        .cumprod(-1)?
        .flip(&[-1])?;
    pre.mul(&suf)
}
