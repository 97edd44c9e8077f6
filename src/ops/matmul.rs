//! Matrix products for every `matmul` case: 1-D·1-D, matrix, batched with broadcast batch dims.

use ndarray::linalg::general_mat_mul;
use ndarray::{ArrayView2, Ix2};

use crate::autograd::node::{needs_grad, record};
use crate::error::{Error, Result};
use crate::ops::binary::result_dtype;
use crate::ops::convert::as_dtype;
use crate::tensor::shape::{broadcast_shapes, fmt_shape};
use crate::tensor::{DType, Dims, Element, Layout, Tensor};

fn mat_view<'a, T: Element>(data: &'a [T], l: &Layout) -> Result<ArrayView2<'a, T>> {
    l.view(data)?
        .into_dimensionality::<Ix2>()
        .map_err(|e| Error::runtime(format!("internal error: {e}")))
}

/// Batched product of `a` [.., n, k] and `b` [.., k, m] whose batch dims already agree.
fn bmm_kernel<T: Element + ndarray::LinalgScalar>(
    a: &Tensor,
    b: &Tensor,
    batch: &[usize],
    n: usize,
    _k: usize,
    m: usize,
) -> Result<Tensor> {
    let nb: usize = batch.iter().product();
    let mut out = vec![T::default(); nb * n * m];
    let a_l = a.layout();
    let b_l = b.layout();
    let ga = a.storage().read();
    let gb = b.storage().read();
    let da = T::data(&ga)
        .ok_or_else(|| Error::runtime("internal error: matmul dtype"))?
        .as_slice();
    let db = T::data(&gb)
        .ok_or_else(|| Error::runtime("internal error: matmul dtype"))?
        .as_slice();
    let batch_offsets = |l: &Layout| -> Vec<usize> {
        let nd = l.shape.len();
        Layout {
            shape: l.shape[..nd - 2].into(),
            strides: l.strides[..nd - 2].into(),
            offset: l.offset,
        }
        .offsets()
    };
    let (oa, ob) = if batch.is_empty() {
        (vec![a_l.offset], vec![b_l.offset])
    } else {
        (batch_offsets(a_l), batch_offsets(b_l))
    };
    let mat = |l: &Layout, off: usize| -> Layout {
        let nd = l.shape.len();
        Layout {
            shape: l.shape[nd - 2..].into(),
            strides: l.strides[nd - 2..].into(),
            offset: off,
        }
    };
    for (i, chunk) in out.chunks_mut((n * m).max(1)).enumerate().take(nb) {
        let av = mat_view(da, &mat(a_l, oa[i]))?;
        let bv = mat_view(db, &mat(b_l, ob[i]))?;
        let mut cv = ndarray::ArrayViewMut2::from_shape((n, m), chunk)
            .map_err(|e| Error::runtime(format!("internal error: {e}")))?;
        general_mat_mul(T::one(), &av, &bv, T::zero(), &mut cv);
    }
    let mut shape: Vec<usize> = batch.to_vec();
    shape.extend([n, m]);
    Tensor::from_vec(out, &shape)
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
            (_, 1) => {
                let r = self.mm_batched(&other.unsqueeze(1)?)?;
                r.squeeze(Some(-1))
            }
            _ => self.mm_batched(other),
        }
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
            let _g = crate::autograd::grad_mode::GradModeGuard::new(false);
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
                |g, s| Ok(vec![Some(s[1].mul(&g[0])?), Some(s[0].mul(&g[0])?)]),
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
            let _g = crate::autograd::grad_mode::GradModeGuard::new(false);
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
                    let gm = g[0].unsqueeze(1)?.matmul(&v.unsqueeze(0)?)?;
                    let gv = m.t()?.matmul(&g[0])?;
                    Ok(vec![Some(gm), Some(gv)])
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
        if !rt.is_float() && rt != DType::Int64 {
            return Err(Error::runtime(format!(
                "\"addmm_impl_cpu_\" not implemented for '{}'",
                crate::tensor::scalar_type_name(rt)
            )));
        }
        let (a, b) = (as_dtype(self, rt)?, as_dtype(other, rt)?);
        let expand_to = |t: &Tensor, r: usize, c: usize| -> Result<Tensor> {
            let mut s: Dims = batch.clone();
            s.extend([r, c]);
            if t.shape() == s.as_slice() {
                Ok(t.detach())
            } else {
                t.detach().expand(&s)
            }
        };
        let (ae, be) = (expand_to(&a, n, k)?, expand_to(&b, k, m)?);
        let out = match rt {
            DType::Float32 => bmm_kernel::<f32>(&ae, &be, &batch, n, k, m)?,
            DType::Float64 => bmm_kernel::<f64>(&ae, &be, &batch, n, k, m)?,
            _ => bmm_kernel::<i64>(&ae, &be, &batch, n, k, m)?,
        };
        if needs_grad(&[self, other]) {
            let name = if batch.is_empty() {
                "MmBackward0"
            } else {
                "BmmBackward0"
            };
            record(
                name,
                &[self, other],
                &[&out],
                &[self, other],
                false,
                |g, s| {
                    // Gradients come out with the broadcast batch shape; the engine sums them back.
                    let (a, b) = (&s[0], &s[1]);
                    let ga = g[0].mm_batched(&b.transpose(-1, -2)?)?;
                    let gb = a.transpose(-1, -2)?.mm_batched(&g[0])?;
                    Ok(vec![Some(ga), Some(gb)])
                },
            )?;
        }
        Ok(out)
    }
}
