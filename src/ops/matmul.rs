//! Matrix products: `matmul` in every case (1-D·1-D, matrix, batched with broadcast batch
//! dims), and the strict forms `mm`, `bmm`, `mv`, `dot` and `outer`.

use ndarray::linalg::general_mat_mul;
use ndarray::{ArrayView2, ArrayViewMut2, ShapeBuilder};

use crate::error::{Error, Result};
use crate::graph::node::{
    grad_if_wanted, needs_grad, record, record_with_jvp, sum_tangents, wants_grad,
};
use crate::kernels::copy::as_dtype;
use crate::kernels::gemm::{batch_offset, matmul_strided, GemmScalar, MatRef};
use crate::ops::binary::result_dtype;
use crate::parallel::get_num_threads;
use crate::tensor::creation::{checked_numel, ensure_allocatable};
use crate::tensor::grad_mode::GradModeGuard;
use crate::tensor::shape::{broadcast_shapes, fmt_shape};
use crate::tensor::{DType, Dims, Element, Layout, Tensor};

/// Strides of `l`'s batch dimensions lined up with the broadcast `batch` shape: 0 where `l` has
/// no such dimension or size 1, so broadcasting needs no expanded copy.
fn batch_strides(l: &Layout, batch: &[usize]) -> Dims {
    let nd = l.shape.len() - 2;
    let lead = batch.len() - nd;
    (0..batch.len())
        .map(|i| match i.checked_sub(lead) {
            Some(j) if l.shape[j] != 1 => l.strides[j],
            _ => 0,
        })
        .collect()
}

/// Row and column strides of `l`'s two trailing dimensions.
fn mat_strides(l: &Layout) -> (usize, usize) {
    let nd = l.shape.len();
    (l.strides[nd - 2], l.strides[nd - 1])
}

fn typed<T: Element>(b: &crate::tensor::storage::Buffer) -> Result<&[T]> {
    Ok(T::data(b)
        .ok_or_else(|| Error::runtime("internal error: matmul dtype"))?
        .as_slice())
}

/// `f` on both operands as [`MatRef`]s: their storages read-locked, batch strides lined up
/// with the broadcast `batch` shape.
fn with_operands<T: Element, R>(
    a: &Tensor,
    b: &Tensor,
    batch: &[usize],
    f: impl FnOnce(MatRef<'_, T>, MatRef<'_, T>) -> Result<R>,
) -> Result<R> {
    let (a_l, b_l) = (a.layout(), b.layout());
    let (sa, sb) = (batch_strides(a_l, batch), batch_strides(b_l, batch));
    let ga = a.storage().read();
    let gb = b.storage().read();
    f(
        mat_ref(a_l, typed::<T>(&ga)?, &sa),
        mat_ref(b_l, typed::<T>(&gb)?, &sb),
    )
}

/// The matrices of layout `l` inside `data`.
fn mat_ref<'a, T>(l: &Layout, data: &'a [T], batch_strides: &'a [usize]) -> MatRef<'a, T> {
    let (row_stride, col_stride) = mat_strides(l);
    MatRef {
        data,
        offset: l.offset,
        batch_strides,
        row_stride,
        col_stride,
    }
}

/// `a` [.., n, k] @ `b` [.., k, m] (batch dims broadcast to `batch`) through the SIMD kernel,
/// reading both operands in place through their strides.
fn bmm_gemm<T: Element + GemmScalar>(
    a: &Tensor,
    b: &Tensor,
    batch: &[usize],
    n: usize,
    k: usize,
    m: usize,
) -> Result<Vec<T>> {
    with_operands(a, b, batch, |ma, mb| {
        matmul_strided(batch, n, k, m, ma, mb, get_num_threads())
    })
}

/// The same product for element types without a SIMD kernel (int64), through ndarray.
fn bmm_ndarray<T: Element + ndarray::LinalgScalar>(
    a: &Tensor,
    b: &Tensor,
    batch: &[usize],
    n: usize,
    k: usize,
    m: usize,
) -> Result<Vec<T>> {
    let nb: usize = batch.iter().product();
    let numel = crate::tensor::creation::checked_numel(&[nb, n, m])?;
    let mut out = crate::tensor::creation::try_filled_vec(numel, T::zero())?;
    if out.is_empty() || k == 0 {
        return Ok(out);
    }
    let internal = |e: ndarray::ShapeError| Error::runtime(format!("internal error: {e}"));
    with_operands::<T, _>(a, b, batch, |ma, mb| {
        for (i, chunk) in out.chunks_mut(n * m).enumerate() {
            let ta = ma
                .data
                .get(ma.offset + batch_offset(i, batch, ma.batch_strides)..);
            let tb = mb
                .data
                .get(mb.offset + batch_offset(i, batch, mb.batch_strides)..);
            let a_shape = (n, k).strides((ma.row_stride, ma.col_stride));
            let b_shape = (k, m).strides((mb.row_stride, mb.col_stride));
            let av = ArrayView2::from_shape(a_shape, ta.unwrap_or(&[])).map_err(internal)?;
            let bv = ArrayView2::from_shape(b_shape, tb.unwrap_or(&[])).map_err(internal)?;
            let mut cv = ArrayViewMut2::from_shape((n, m), chunk).map_err(internal)?;
            general_mat_mul(T::one(), &av, &bv, T::zero(), &mut cv);
        }
        Ok(())
    })?;
    Ok(out)
}

impl Tensor {
    /// Matrix product with torch's `matmul` rules: 1-D operands are promoted to matrices and the
    /// added dimension removed afterwards; batch dimensions broadcast.
    pub fn matmul(&self, other: &Tensor) -> Result<Tensor> {
        let (da, db) = (self.dim(), other.dim());
        if da == 0 || db == 0 {
            return Err(Error::runtime(format!(
                "both arguments to matmul need to be at least 1D, but they are {da}D and {db}D"
            )));
        }
        match (da, db) {
            (1, 1) => {
                if self.shape()[0] != other.shape()[0] {
                    return Err(Error::runtime(format!(
                        "inconsistent tensor size, expected tensor [{}] and src [{}] to have the same number of elements, but got {} and {} elements respectively",
                        self.shape()[0], other.shape()[0], self.shape()[0], other.shape()[0]
                    )));
                }
                self.dot(other)
            }
            (1, _) => {
                let r = self.unsqueeze(0)?.mm_batched(other)?;
                r.squeeze(Some(-2))
            }
            (2, 1) => self.mv(other),
            (_, 1 | 2) if self.folds_into_rows(other) => {
                // One (B·n) x k product instead of B broadcast ones, as torch folds: the weight's
                // gradient is then one product, not B products the engine sums afterwards.
                let (sa, k) = (self.shape(), self.shape()[da - 1]);
                let rows = self.reshape(&[sa[..da - 1].iter().product(), k])?;
                let mut shape: Dims = sa[..da - 1].into();
                if db == 2 {
                    shape.push(other.shape()[1]);
                    rows.mm_batched(other)?.reshape(&shape)
                } else {
                    rows.mv(other)?.reshape(&shape)
                }
            }
            (_, 1) => {
                let r = self.mm_batched(&other.unsqueeze(1)?)?;
                r.squeeze(Some(-1))
            }
            _ => self.mm_batched(other),
        }
    }

    /// Whether a batched `self` (3 or more dims) times a matrix or vector is computed as one
    /// product over its rows: when its leading dims merge without a copy, or when it needs a
    /// gradient (the copy costs less than the batched gradients it avoids).
    fn folds_into_rows(&self, other: &Tensor) -> bool {
        let (shape, strides) = (self.shape(), self.strides());
        let nd = shape.len();
        nd >= 3
            && (self.requires_grad()
                || other.requires_grad()
                || self.numel() == 0
                || (0..nd - 2)
                    .all(|i| shape[i] == 1 || strides[i] == strides[i + 1] * shape[i + 1]))
    }

    /// Inner product of two vectors of the same length.
    pub fn dot(&self, other: &Tensor) -> Result<Tensor> {
        if self.dim() != 1 || other.dim() != 1 {
            return Err(Error::runtime(format!(
                "1D tensors expected, but got {}D and {}D tensors",
                self.dim(),
                other.dim()
            )));
        }
        if self.shape()[0] != other.shape()[0] {
            return Err(Error::runtime(format!(
                "inconsistent tensor size, expected tensor [{}] and src [{}] to have the same number of elements, but got {} and {} elements respectively",
                self.shape()[0], other.shape()[0], self.shape()[0], other.shape()[0]
            )));
        }
        let out = {
            let _g = crate::tensor::grad_mode::GradModeGuard::new(false);
            self.unsqueeze(0)?
                .mm_batched(&other.unsqueeze(1)?)?
                .reshape(&[])?
        };
        if needs_grad(&[self, other]) {
            record(
                "DotBackward0",
                &[self, other],
                &[&out],
                &[self, other],
                false,
                |g, s| {
                    let ga = grad_if_wanted(0, || s[1].mul(&g[0]))?;
                    let gb = grad_if_wanted(1, || s[0].mul(&g[0]))?;
                    Ok(vec![ga, gb])
                },
            )?;
        }
        Ok(out)
    }

    /// Matrix-vector product.
    pub fn mv(&self, vec: &Tensor) -> Result<Tensor> {
        if self.dim() != 2 || vec.dim() != 1 {
            return Err(Error::runtime(format!(
                "vector + matrix @ vector expected, got {}, {}, {}",
                1,
                self.dim(),
                vec.dim()
            )));
        }
        let out = {
            let _g = crate::tensor::grad_mode::GradModeGuard::new(false);
            self.mm_batched(&vec.unsqueeze(1)?)?.squeeze(Some(-1))?
        };
        if needs_grad(&[self, vec]) {
            record(
                "MvBackward0",
                &[self, vec],
                &[&out],
                &[self, vec],
                false,
                |g, s| {
                    let (m, v) = (&s[0], &s[1]);
                    let gm = grad_if_wanted(0, || g[0].unsqueeze(1)?.matmul(&v.unsqueeze(0)?))?;
                    let gv = grad_if_wanted(1, || m.t()?.matmul(&g[0]))?;
                    Ok(vec![gm, gv])
                },
            )?;
        }
        Ok(out)
    }

    /// `self @ other` for operands of at least two dimensions, broadcasting batch dimensions.
    fn mm_batched(&self, other: &Tensor) -> Result<Tensor> {
        let (sa, sb) = (self.shape(), other.shape());
        let (n, k) = (sa[sa.len() - 2], sa[sa.len() - 1]);
        let (k2, m) = (sb[sb.len() - 2], sb[sb.len() - 1]);
        if k != k2 {
            return Err(Error::runtime(format!(
                "mat1 and mat2 shapes cannot be multiplied ({}x{} and {}x{})",
                sa[..sa.len() - 1].iter().product::<usize>(),
                k,
                k2,
                m
            )));
        }
        let batch = broadcast_shapes(&sa[..sa.len() - 2], &sb[..sb.len() - 2]).map_err(|_| {
            Error::runtime(format!(
                "matmul: batch dimensions of {} and {} do not broadcast",
                fmt_shape(sa),
                fmt_shape(sb)
            ))
        })?;
        let rt = result_dtype(self, other);
        if !rt.is_float() && !rt.is_integer() {
            return Err(Error::runtime(format!(
                "\"addmm_impl_cpu_\" not implemented for '{}'",
                crate::tensor::scalar_type_name(rt)
            )));
        }
        // Inside vmap: the operands padded after the batch dim to one logical rank, so their
        // samples pair up as broadcast batch dims of one product.
        let batched = {
            let _off = crate::tensor::grad_mode::GradModeGuard::new(false);
            crate::tensor::batched::elementwise(&[self, other], |p| p[0].mm_batched(&p[1]))
        };
        let out = match batched {
            Some(r) => r?,
            None => {
                let mut shape: Dims = batch.clone();
                shape.extend([n, m]);
                // Refuse an output beyond RAM before converting operands: the lazily-mapping allocator
                // would grant it and the OOM killer would end the process on first touch.
                ensure_allocatable(checked_numel(&shape)?, rt)?;
                // Narrow types multiply in their compute type and round once on store.
                let ct = rt.compute();
                let (a, b) = (as_dtype(self, ct)?, as_dtype(other, ct)?);
                let out = match ct {
                    DType::Float32 => {
                        Tensor::from_vec(bmm_gemm::<f32>(&a, &b, &batch, n, k, m)?, &shape)?
                    }
                    DType::Float64 => {
                        Tensor::from_vec(bmm_gemm::<f64>(&a, &b, &batch, n, k, m)?, &shape)?
                    }
                    _ => Tensor::from_vec(bmm_ndarray::<i64>(&a, &b, &batch, n, k, m)?, &shape)?,
                };
                crate::kernels::copy::as_dtype(&out, rt)?
            }
        };
        if needs_grad(&[self, other]) {
            let name = if batch.is_empty() {
                "MmBackward0"
            } else {
                "BmmBackward0"
            };
            record_with_jvp(
                name,
                &[self, other],
                &[&out],
                &[self, other],
                false,
                |g, s| {
                    // Gradients come out with the broadcast batch shape; the engine sums them back.
                    // Transposes are views: the kernel reads them through their strides.
                    let (a, b) = (&s[0], &s[1]);
                    let ga = grad_if_wanted(0, || g[0].mm_batched(&b.transpose(-1, -2)?))?;
                    let gb = grad_if_wanted(1, || a.transpose(-1, -2)?.mm_batched(&g[0]))?;
                    Ok(vec![ga, gb])
                },
                &|t| {
                    let mut parts = Vec::new();
                    if let Some(ta) = &t[0] {
                        parts.push(ta.mm_batched(other)?);
                    }
                    if let Some(tb) = &t[1] {
                        parts.push(self.mm_batched(tb)?);
                    }
                    Ok(vec![sum_tangents(parts, &out)?])
                },
            )?;
        }
        Ok(out)
    }

    /// Matrix product of two 2-D tensors (strict: no broadcasting, no 1-D promotion).
    pub fn mm(&self, mat2: &Tensor) -> Result<Tensor> {
        want_dims([(self, "self"), (mat2, "mat2")], 2, |arg, d| {
            format!("mm: {arg} must be a matrix, got {d}-D tensor")
        })?;
        let (a, b) = (self.shape(), mat2.shape());
        if a[1] != b[0] {
            return Err(Error::runtime(format!(
                "mm: mat1 and mat2 shapes cannot be multiplied ({}x{} and {}x{})",
                a[0], a[1], b[0], b[1]
            )));
        }
        self.matmul(mat2)
    }

    /// Batched matrix product of two 3-D tensors with equal batch sizes.
    pub fn bmm(&self, mat2: &Tensor) -> Result<Tensor> {
        want_dims([(self, "batch1"), (mat2, "batch2")], 3, |arg, _| {
            format!("{arg} must be a 3D tensor")
        })?;
        let (a, b) = (self.shape(), mat2.shape());
        if a[0] != b[0] || a[2] != b[1] {
            return Err(Error::runtime(format!(
                "Expected size for first two dimensions of batch2 tensor to be: [{}, {}] but got: [{}, {}].",
                a[0], a[2], b[0], b[1]
            )));
        }
        self.matmul(mat2)
    }

    /// Outer product of two vectors.
    pub fn outer(&self, vec2: &Tensor) -> Result<Tensor> {
        want_dims([(self, "self"), (vec2, "vec2")], 1, |arg, d| {
            format!("outer: Expected 1-D argument {arg}, but got {d}-D")
        })?;
        self.unsqueeze(1)?.mul(&vec2.unsqueeze(0)?)
    }
}

/// Each operand has `n` dims, checked in order; else the runtime error `message(its name, its
/// number of dims)`.
fn want_dims(
    args: [(&Tensor, &str); 2],
    n: usize,
    message: impl Fn(&str, usize) -> String,
) -> Result<()> {
    for (t, arg) in args {
        if t.dim() != n {
            return Err(Error::runtime(message(arg, t.dim())));
        }
    }
    Ok(())
}

/// A product op of two operands: its forward and the gradients of both operands from the
/// output's gradient `g` (written with differentiable ops).
struct Product {
    name: &'static str,
    op: &'static str,
    forward: fn(&Tensor, &Tensor) -> Result<Tensor>,
    vjp: fn(&Tensor, &Tensor, &Tensor) -> Result<(Tensor, Tensor)>,
}

const ADDMM: Product = Product {
    name: "AddmmBackward0",
    op: "addmm",
    forward: Tensor::mm,
    vjp: |g, a, b| Ok((g.mm(&b.t()?)?, a.t()?.mm(g)?)),
};

const ADDMV: Product = Product {
    name: "AddmvBackward0",
    op: "addmv",
    forward: Tensor::mv,
    vjp: |g, a, b| Ok((g.unsqueeze(1)?.mul(&b.unsqueeze(0)?)?, a.t()?.mv(g)?)),
};

const BADDBMM: Product = Product {
    name: "BaddbmmBackward0",
    op: "baddbmm",
    forward: Tensor::bmm,
    vjp: |g, a, b| Ok((g.bmm(&b.transpose(1, 2)?)?, a.transpose(1, 2)?.bmm(g)?)),
};

const ADDBMM: Product = Product {
    name: "AddbmmBackward0",
    op: "addbmm",
    forward: |a, b| a.bmm(b)?.sum_dims(&[0], false),
    vjp: |g, a, b| {
        let ge = g
            .unsqueeze(0)?
            .expand(&[a.shape()[0], g.shape()[0], g.shape()[1]])?;
        Ok((ge.bmm(&b.transpose(1, 2)?)?, a.transpose(1, 2)?.bmm(&ge)?))
    },
};

impl Tensor {
    /// `beta * self + alpha * (mat1 @ mat2)` for 2-D `mat1`, `mat2`; `self` broadcasts to the
    /// product's shape (torch's `addmm`, a linear layer's op).
    pub fn addmm(&self, mat1: &Tensor, mat2: &Tensor, beta: f64, alpha: f64) -> Result<Tensor> {
        self.add_product(&ADDMM, mat1, mat2, beta, alpha)
    }

    /// `beta * self + alpha * (mat @ vec)` (torch's `addmv`).
    pub fn addmv(&self, mat: &Tensor, vec: &Tensor, beta: f64, alpha: f64) -> Result<Tensor> {
        if mat.dim() == 2 && vec.dim() == 1 && self.dim() <= 1 {
            let n = self.shape().first().copied().unwrap_or(1);
            if mat.shape()[1] != vec.shape()[0] || (n != mat.shape()[0] && n != 1) {
                return Err(Error::runtime(format!(
                    "size mismatch, got input ({}), mat ({}x{}), vec ({})",
                    n,
                    mat.shape()[0],
                    mat.shape()[1],
                    vec.shape()[0]
                )));
            }
        }
        self.add_product(&ADDMV, mat, vec, beta, alpha)
    }

    /// `beta * self + alpha * (batch1 @ batch2)` per batch (torch's `baddbmm`).
    pub fn baddbmm(
        &self,
        batch1: &Tensor,
        batch2: &Tensor,
        beta: f64,
        alpha: f64,
    ) -> Result<Tensor> {
        self.add_product(&BADDBMM, batch1, batch2, beta, alpha)
    }

    /// `beta * self + alpha * sum_b(batch1[b] @ batch2[b])` (torch's `addbmm`).
    pub fn addbmm(
        &self,
        batch1: &Tensor,
        batch2: &Tensor,
        beta: f64,
        alpha: f64,
    ) -> Result<Tensor> {
        want_dims([(batch1, "batch1"), (batch2, "batch2")], 3, |arg, _| {
            format!("{arg} must be a 3D tensor")
        })?;
        let (a, b) = (batch1.shape(), batch2.shape());
        if a[0] != b[0] || a[2] != b[1] {
            return Err(Error::runtime(format!(
                "Incompatible matrix sizes for bmm ({}x{} and {}x{})",
                a[1], a[2], b[1], b[2]
            )));
        }
        self.add_product(&ADDBMM, batch1, batch2, beta, alpha)
    }

    /// `beta * self + alpha * p.forward(a, b)`, recorded as one node named `p.name`. With
    /// `beta == 0` `self` is ignored (its NaNs do not propagate), as in torch.
    fn add_product(
        &self,
        p: &Product,
        a: &Tensor,
        b: &Tensor,
        beta: f64,
        alpha: f64,
    ) -> Result<Tensor> {
        let out = {
            let _g = GradModeGuard::new(false);
            let prod = (p.forward)(a, b).map_err(|e| match e.message().strip_prefix("mm: ") {
                Some(rest) => Error::runtime(format!("{}: {rest}", p.op)),
                None => e,
            })?;
            let shape = prod.shape().to_vec();
            let input = self.expand(&shape)?;
            let prod = if alpha == 1.0 {
                prod
            } else {
                prod.mul_scalar(alpha)?
            };
            if beta == 0.0 {
                let dt = result_dtype(self, &prod);
                prod.to_dtype(dt)?.contiguous()?.detach()
            } else if beta == 1.0 {
                prod.add(&input)?
            } else {
                prod.add(&input.mul_scalar(beta)?)?
            }
        };
        if needs_grad(&[self, a, b]) {
            let in_shape: Vec<usize> = self.shape().to_vec();
            let vjp = p.vjp;
            record(
                p.name,
                &[self, a, b],
                &[&out],
                &[a, b],
                true,
                move |g, s| {
                    let gi = grad_if_wanted(0, || g[0].mul_scalar(beta)?.sum_to(&in_shape))?;
                    let (ga, gb) = if wants_grad(1) || wants_grad(2) {
                        let ga_gb = vjp(&g[0], &s[0], &s[1])?;
                        (
                            Some(ga_gb.0.mul_scalar(alpha)?),
                            Some(ga_gb.1.mul_scalar(alpha)?),
                        )
                    } else {
                        (None, None)
                    };
                    Ok(vec![gi, ga, gb])
                },
            )?;
        }
        Ok(out)
    }
}
