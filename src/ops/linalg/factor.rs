//! Factorisations (Cholesky, QR, symmetric eigen, SVD), the pseudo-inverse and least squares,
//! with torch's backward rules (`FunctionsManual.cpp`) written in differentiable ops.

use super::lapack::{self, batch_prefix, check_matrix, check_square, Batch};
use super::solve::{first_failure, mt, solve_square};
use crate::error::{Error, Result};
use crate::graph::node::{needs_grad, record};
use crate::tensor::grad_mode::{is_grad_enabled, GradModeGuard};
use crate::tensor::shape::broadcast_shapes;
use crate::tensor::Tensor;

/// The QR variants of `torch.linalg.qr`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QrMode {
    /// `Q` is `m x k`, `R` is `k x n` (`k = min(m, n)`).
    Reduced,
    /// `Q` is `m x m`, `R` is `m x n`.
    Complete,
    /// Only `R` (`k x n`); `Q` is empty and there is no gradient.
    R,
}

impl QrMode {
    /// `"reduced"`, `"complete"` or `"r"`; anything else is torch's error.
    pub fn parse(mode: &str) -> Result<QrMode> {
        match mode {
            "reduced" => Ok(QrMode::Reduced),
            "complete" => Ok(QrMode::Complete),
            "r" => Ok(QrMode::R),
            _ => Err(Error::runtime(format!(
                "qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), 'r', or 'complete'"
            ))),
        }
    }
}

/// A gradient that is exactly zero and not part of a graph: an output nothing flowed into
/// (the engine fills those with zeros), which torch's rules treat as undefined. Inside vmap,
/// zero for every sample.
fn absent(g: &Tensor) -> bool {
    !g.requires_grad()
        && crate::tensor::batched::innermost(g)
            .to_vec::<f64>()
            .map(|v| v.iter().all(|x| *x == 0.0))
            .unwrap_or(false)
}

/// `x + xᵀ`-free lower copy: `tril(x) + tril(x, -1)ᵀ` (torch's `copyltu`).
fn copyltu(x: &Tensor) -> Result<Tensor> {
    x.tril(0)?.add(&mt(&x.tril(-1)?)?)
}

/// `diag_embed` of the last dim: `[..., k]` to `[..., k, k]`.
fn diag_embed(d: &Tensor) -> Result<Tensor> {
    let k = d.shape()[d.dim() - 1];
    d.unsqueeze(-1)?.mul(&Tensor::eye(k, k, d.dtype())?)
}

impl Tensor {
    /// The lower Cholesky factor `L` of a symmetric positive-definite matrix (`A = L Lᵀ`,
    /// read from the lower triangle), or `U = Lᵀ` when `upper`; batched. A matrix that is not
    /// positive-definite is an error with torch's message.
    ///
    /// ```
    /// use ferrograd::Tensor;
    /// let a = Tensor::from_vec(vec![4.0f64, 2.0, 2.0, 5.0], &[2, 2]).unwrap();
    /// assert_eq!(a.cholesky(false).unwrap().to_vec::<f64>().unwrap(), vec![2.0, 0.0, 1.0, 2.0]);
    /// ```
    pub fn cholesky(&self, upper: bool) -> Result<Tensor> {
        let (l, info) = self.cholesky_named(upper, "linalg.cholesky")?;
        if let Some((k, i)) = first_failure(&info) {
            return Err(Error::runtime(format!(
                "linalg.cholesky: {}The factorization could not be completed because the input is not positive-definite (the leading minor of order {i} is not positive-definite).",
                batch_prefix(self.dim() > 2, k)
            )));
        }
        Ok(l)
    }

    /// [`Tensor::cholesky`] without the check: the factor and, per matrix, the order of the
    /// first leading minor that is not positive-definite (0 when it is; the factor is then 0).
    pub fn cholesky_ex(&self, upper: bool) -> Result<(Tensor, Vec<usize>)> {
        self.cholesky_named(upper, "linalg.cholesky_ex")
    }

    fn cholesky_named(&self, upper: bool, op: &str) -> Result<(Tensor, Vec<usize>)> {
        check_square(self, op, "A")?;
        let b = Batch::of(self)?;
        let (data, info) = lapack::cholesky(&b)?;
        let l = b.collect(data, &[b.rows, b.cols])?;
        let out = if upper { mt(&l)?.contiguous()? } else { l };
        if needs_grad(&[self]) {
            // Murray (2016): gA = L⁻ᴴ Φ L⁻¹ with Φ = ½ (P + tril(P, -1)ᴴ), P = tril(Lᴴ gL).
            record(
                "LinalgCholeskyExBackward0",
                &[self],
                &[&out],
                &[&out],
                false,
                move |g, s| {
                    let (l, gl) = if upper {
                        (mt(&s[0])?, mt(&g[0])?)
                    } else {
                        (s[0].clone(), g[0].clone())
                    };
                    let p = mt(&l)?.matmul(&gl)?.tril(0)?;
                    let phi = p.add(&mt(&p.tril(-1)?)?)?.mul_scalar(0.5)?;
                    let linv = l.inv()?;
                    Ok(vec![Some(mt(&linv)?.matmul(&phi)?.matmul(&linv)?)])
                },
            )?;
        }
        Ok((out, info))
    }

    /// QR decomposition `A = Q R` (Householder), batched: `Q` with orthonormal columns, `R`
    /// upper triangular, shaped by `mode`. With [`QrMode::R`], `Q` is an empty tensor.
    pub fn qr(&self, mode: QrMode) -> Result<(Tensor, Tensor)> {
        check_matrix(self, "linalg.qr", "A")?;
        let b = Batch::of(self)?;
        let (m, n) = (b.rows, b.cols);
        let k = m.min(n);
        let complete = mode == QrMode::Complete;
        let (qs, rs) = lapack::qr(&b, complete, mode != QrMode::R)?;
        let q = if mode == QrMode::R {
            Tensor::zeros(&[0], self.dtype())
        } else {
            b.collect(qs, &[m, if complete { m } else { k }])?
        };
        let r = b.collect(rs, &[if complete { m } else { k }, n])?;
        if needs_grad(&[self]) {
            record(
                "LinalgQrBackward0",
                &[self],
                &[&q, &r],
                &[self, &q, &r],
                false,
                move |g, s| {
                    if mode == QrMode::R {
                        return Err(Error::runtime("The derivative of linalg.qr depends on Q, which is not computed when mode='r'. Please use linalg.qr(A, mode='reduced') if you are going to differentiate through linalg.qr."));
                    }
                    if complete && m > n {
                        return Err(Error::runtime(
                            "The QR decomposition is not differentiable when mode='complete' and nrows > ncols.",
                        ));
                    }
                    Ok(vec![Some(qr_backward(&s[0], &s[1], &s[2], &g[0], &g[1])?)])
                },
            )?;
        }
        Ok((q, r))
    }

    /// Eigenvalues (ascending) and orthonormal eigenvectors (columns) of a symmetric matrix,
    /// read from its lower triangle (`lower`) or upper one; batched. The eigenvectors'
    /// gradient divides by eigenvalue gaps, so it is finite only for distinct eigenvalues
    /// (as in torch); the eigenvalues' alone is always finite.
    pub fn eigh(&self, lower: bool) -> Result<(Tensor, Tensor)> {
        check_square(self, "linalg.eigh", "A")?;
        let b = Batch::of(self)?;
        let n = b.rows;
        let (vals, vecs) = lapack::eigh(&b, lower, true)?;
        let l = b.collect(vals, &[n])?;
        let v = b.collect(vecs, &[n, n])?;
        if needs_grad(&[self]) {
            record(
                "LinalgEighBackward0",
                &[self],
                &[&l, &v],
                &[&l, &v],
                false,
                |g, s| {
                    let (l, v) = (&s[0], &s[1]);
                    let (gl, gv) = (&g[0], &g[1]);
                    let vt = mt(v)?;
                    let mut inner = diag_embed(gl)?;
                    if !absent(gv) {
                        // Off the diagonal, skew(Vᵀ gV)_ij / (λ_j - λ_i).
                        let vhgv = vt.matmul(gv)?;
                        let skew = vhgv.sub(&mt(&vhgv)?)?.mul_scalar(0.5)?;
                        let k = l.shape()[l.dim() - 1];
                        let id = Tensor::eye(k, k, l.dtype())?;
                        let e = l.unsqueeze(-2)?.sub(&l.unsqueeze(-1)?)?.add(&id)?;
                        inner = inner.add(&skew.div(&e)?)?;
                    }
                    Ok(vec![Some(v.matmul(&inner)?.matmul(&vt)?)])
                },
            )?;
        }
        Ok((l, v))
    }

    /// The eigenvalues of a symmetric matrix, ascending (see [`Tensor::eigh`]).
    pub fn eigvalsh(&self, lower: bool) -> Result<Tensor> {
        check_square(self, "linalg.eigvalsh", "A")?;
        if needs_grad(&[self]) {
            return Ok(self.eigh(lower)?.0);
        }
        let b = Batch::of(self)?;
        let (vals, _) = lapack::eigh(&b, lower, false)?;
        b.collect(vals, &[b.rows])
    }

    /// Singular value decomposition `A = U diag(S) Vᴴ`, batched: `S` descending; `U`, `Vᴴ`
    /// square when `full_matrices`, else `k = min(m, n)` columns/rows. The gradient of `U` or
    /// `Vᴴ` divides by gaps between squared singular values (finite only when they are
    /// distinct, as in torch); with `full_matrices` only the first `k` vectors take part.
    ///
    /// ```
    /// use ferrograd::Tensor;
    /// let a = Tensor::from_vec(vec![3.0f64, 0.0, 0.0, -2.0], &[2, 2]).unwrap();
    /// let (_u, s, _vh) = a.svd(false).unwrap();
    /// assert_eq!(s.to_vec::<f64>().unwrap(), vec![3.0, 2.0]);
    /// ```
    pub fn svd(&self, full_matrices: bool) -> Result<(Tensor, Tensor, Tensor)> {
        check_matrix(self, "linalg.svd", "A")?;
        let b = Batch::of(self)?;
        let (m, n) = (b.rows, b.cols);
        let k = m.min(n);
        let (us, ss, vhs) = lapack::svd(&b, full_matrices)?;
        let (uc, vr) = if full_matrices { (m, n) } else { (k, k) };
        let u = b.collect(us, &[m, uc])?;
        let s = b.collect(ss, &[k])?;
        let vh = b.collect(vhs, &[vr, n])?;
        if needs_grad(&[self]) {
            record(
                "LinalgSvdBackward0",
                &[self],
                &[&u, &s, &vh],
                &[&u, &s, &vh],
                false,
                move |g, sv| {
                    let narrow = |x: &Tensor, dim: i64| -> Result<Tensor> {
                        if full_matrices {
                            x.narrow(dim, 0, k)
                        } else {
                            Ok(x.clone())
                        }
                    };
                    let (u, s, vh) = (narrow(&sv[0], -1)?, &sv[1], narrow(&sv[2], -2)?);
                    let (gu, gs, gvh) = (narrow(&g[0], -1)?, &g[1], narrow(&g[2], -2)?);
                    Ok(vec![Some(svd_backward(&u, s, &vh, &gu, gs, &gvh, m, n)?)])
                },
            )?;
        }
        Ok((u, s, vh))
    }

    /// The singular values, descending (see [`Tensor::svd`]).
    pub fn svdvals(&self) -> Result<Tensor> {
        check_matrix(self, "linalg.svdvals", "A")?;
        if needs_grad(&[self]) {
            return Ok(self.svd(false)?.1);
        }
        let b = Batch::of(self)?;
        let k = b.rows.min(b.cols);
        b.collect(lapack::singular_values(&b)?, &[k])
    }

    /// The Moore–Penrose pseudo-inverse, batched: singular values at most
    /// `max(atol, rtol · σ_max)` are treated as zero. `rtol` defaults to `eps · max(m, n)`
    /// when neither is given and to 0 when only `atol` is; `hermitian` uses the symmetric
    /// eigendecomposition of the lower triangle. The gradient is torch's `pinv_backward`.
    pub fn pinv(&self, atol: Option<f64>, rtol: Option<f64>, hermitian: bool) -> Result<Tensor> {
        if hermitian {
            check_square(self, "linalg.pinv", "A")?;
        } else {
            check_matrix(self, "linalg.pinv", "A")?;
        }
        let b = Batch::of(self)?;
        let (m, n) = (b.rows, b.cols);
        let eps = lapack::eps(self.dtype());
        let rtol = match (atol, rtol) {
            (_, Some(r)) => r,
            (None, None) => eps * m.max(n) as f64,
            (Some(_), None) => 0.0,
        };
        let atol = atol.unwrap_or(0.0);
        let p = b.collect(lapack::pinv(&b, hermitian, atol, rtol)?, &[n, m])?;
        if needs_grad(&[self]) {
            record(
                "LinalgPinvBackward0",
                &[self],
                &[&p],
                &[self, &p],
                false,
                |g, s| Ok(vec![Some(pinv_backward(&g[0], &s[1], &s[0])?)]),
            )?;
        }
        Ok(p)
    }

    /// Least squares `min ‖A X - B‖` (minimum-norm for rank-deficient `A`): `pinv(A, rtol =
    /// rcond) @ B`, batched with broadcasting; the gradient is that of this product (torch's
    /// rule). `rcond` defaults to `eps · max(m, n)`.
    pub fn lstsq(&self, rhs: &Tensor, rcond: Option<f64>) -> Result<Tensor> {
        check_matrix(self, "linalg.lstsq", "A")?;
        if rhs.dim() < 1 {
            return Err(Error::runtime(
                "linalg.lstsq: input.dim() must be greater or equal to other.dim() and (input.dim() - other.dim()) <= 1",
            ));
        }
        let m = self.shape()[self.dim() - 2];
        let vector = rhs.dim() + 1 == self.dim();
        let b = if vector {
            rhs.unsqueeze(-1)?
        } else {
            rhs.clone()
        };
        if b.dim() < 2 || b.shape()[b.dim() - 2] != m {
            return Err(Error::runtime(format!(
                "torch.linalg.lstsq: input.size(-2) should match other.size(-{})",
                if vector { 1 } else { 2 }
            )));
        }
        if self.dtype() != rhs.dtype() {
            return Err(Error::runtime(format!(
                "torch.linalg.lstsq: Expected input and other to have the same dtype, but got input's dtype {} and other's dtype {}",
                crate::tensor::scalar_type_name(self.dtype()),
                crate::tensor::scalar_type_name(rhs.dtype())
            )));
        }
        broadcast_shapes(&self.shape()[..self.dim() - 2], &b.shape()[..b.dim() - 2])?;
        let (x, p) = {
            let _off = GradModeGuard::new(false);
            let p = self.detach().pinv(None, rcond, false)?;
            let x = p.matmul(&b.detach())?;
            (if vector { x.squeeze(Some(-1))? } else { x }, p)
        };
        if needs_grad(&[self, rhs]) {
            // X = A⁺ B: gB = A⁺ᵀ g, and A⁺'s gradient g Bᵀ goes through pinv's rule. Under
            // create_graph A⁺ is recomputed with its graph, so the rule is differentiable.
            record(
                "LinalgLstsqBackward0",
                &[self, rhs],
                &[&x],
                &[self, rhs],
                false,
                move |g, s| {
                    let p = if is_grad_enabled() {
                        s[0].pinv(None, rcond, false)?
                    } else {
                        p.clone()
                    };
                    let col = |t: &Tensor| {
                        if vector {
                            t.unsqueeze(-1)
                        } else {
                            Ok(t.clone())
                        }
                    };
                    let (g, b) = (col(&g[0])?, col(&s[1])?);
                    let gb = mt(&p)?.matmul(&g)?;
                    let gb = if vector { gb.squeeze(Some(-1))? } else { gb };
                    let gp = g.matmul(&mt(&b)?)?;
                    Ok(vec![Some(pinv_backward(&gp, &p, &s[0])?), Some(gb)])
                },
            )?;
        }
        Ok(x)
    }
}

/// torch's `linalg_qr_backward` for `m >= n` (reduced) or `m <= n`:
/// `gA = (gQ + Q copyltu(M)) R⁻ᵀ` with `M = R gRᵀ - gQᵀ Q` on the square part, and for
/// `m < n` the trailing columns `Y = Q V` of `A` contribute `gQ += Y gVᵀ`, `gY = Q gV`.
fn qr_backward(a: &Tensor, q: &Tensor, r: &Tensor, gq: &Tensor, gr: &Tensor) -> Result<Tensor> {
    let (m, n) = (q.shape()[q.dim() - 2], r.shape()[r.dim() - 1]);
    let square = |q: &Tensor, r: &Tensor, gq: &Tensor, gr: &Tensor| -> Result<Tensor> {
        let mm = r.matmul(&mt(gr)?)?.sub(&mt(gq)?.matmul(q)?)?;
        let b = gq.add(&q.matmul(&copyltu(&mm)?)?)?;
        // B R⁻ᵀ
        solve_square(&mt(r)?, &b, false)
    };
    if m >= n {
        return square(q, r, gq, gr);
    }
    let (u, gu) = (r.narrow(-1, 0, m)?, gr.narrow(-1, 0, m)?);
    let gv = gr.narrow(-1, m as i64, n - m)?;
    let y = a.narrow(-1, m as i64, n - m)?;
    let gx = square(q, &u, &gq.add(&y.matmul(&mt(&gv)?)?)?, &gu)?;
    let gy = q.matmul(&gv)?;
    Tensor::cat(&[gx, gy], -1)
}

/// torch's `svd_backward` on the thin factors (`U` `m x k`, `Vᴴ` `k x n`):
/// `gA = U [skew(Uᵀ gU)/E · S + S · skew(Vᵀ gV)/E + diag(gS)] Vᴴ
///      + (I - U Uᵀ) gU S⁻¹ Vᴴ + U S⁻¹ gVᵀ (I - V Vᵀ)`, `E_ij = S_j² - S_i²`.
#[allow(clippy::too_many_arguments)]
fn svd_backward(
    u: &Tensor,
    s: &Tensor,
    vh: &Tensor,
    gu: &Tensor,
    gs: &Tensor,
    gvh: &Tensor,
    m: usize,
    n: usize,
) -> Result<Tensor> {
    let (has_u, has_v) = (!absent(gu), !absent(gvh));
    if !has_u && !has_v {
        return u.mul(&gs.unsqueeze(-2)?)?.matmul(vh);
    }
    let k = s.shape()[s.dim() - 1];
    let v = mt(vh)?;
    let gv = mt(gvh)?;
    let ut = mt(u)?;
    let s_row = s.unsqueeze(-2)?;
    let s_col = s.unsqueeze(-1)?;
    let s2 = s.mul(s)?;
    let id = Tensor::eye(k, k, s.dtype())?;
    let e = s2.unsqueeze(-2)?.sub(&s2.unsqueeze(-1)?)?.add(&id)?;
    let mut inner = diag_embed(gs)?;
    if has_u {
        let uhgu = ut.matmul(gu)?;
        let skew = uhgu.sub(&mt(&uhgu)?)?;
        inner = inner.add(&skew.div(&e)?.mul(&s_row)?)?;
    }
    if has_v {
        let vhgv = vh.matmul(&gv)?;
        let skew = vhgv.sub(&mt(&vhgv)?)?;
        inner = inner.add(&s_col.mul(&skew.div(&e)?)?)?;
    }
    let mut ga = u.matmul(&inner)?.matmul(vh)?;
    if m > k && has_u {
        // (I - U Uᵀ) gU S⁻¹ Vᴴ
        let gus = gu.div(&s_row)?;
        let proj = gus.sub(&u.matmul(&ut.matmul(&gus)?)?)?;
        ga = ga.add(&proj.matmul(vh)?)?;
    }
    if n > k && has_v {
        // U S⁻¹ gVᵀ (I - V Vᵀ)
        let gvs = gv.div(&s_row)?;
        let proj = gvs.sub(&v.matmul(&vh.matmul(&gvs)?)?)?;
        ga = ga.add(&u.matmul(&mt(&proj)?)?)?;
    }
    Ok(ga)
}

/// torch's `pinv_backward`: the derivative of `A⁺` (the Golub–Pereyra formula), arranged so
/// the intermediate products are of the smaller dimension.
fn pinv_backward(g: &Tensor, p: &Tensor, a: &Tensor) -> Result<Tensor> {
    let (m, n) = (a.shape()[a.dim() - 2], a.shape()[a.dim() - 1]);
    let ph = mt(p)?;
    let gh = mt(g)?;
    if m <= n {
        let k = gh.matmul(p)?;
        let kph = k.matmul(&ph)?;
        mt(&p.matmul(&k)?)?
            .neg()?
            .add(&kph)?
            .sub(&a.matmul(p)?.matmul(&kph)?)?
            .add(&ph.matmul(p)?.matmul(&gh.sub(&k.matmul(a)?)?)?)
    } else {
        let k = p.matmul(&gh)?;
        let phk = ph.matmul(&k)?;
        mt(&k.matmul(p)?)?
            .neg()?
            .add(&gh.sub(&a.matmul(&k)?)?.matmul(p)?.matmul(&ph)?)?
            .add(&phk)?
            .sub(&phk.matmul(p)?.matmul(a)?)
    }
}
