//! Gather and scatter by flat (row-major) element index: the adjoint pair behind the gradients
//! of slicing, selecting and writes into views. Each one's backward is the other.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::graph::node::{needs_grad, record};
use crate::kernels::copy::cast;
use crate::tensor::{DType, Dims, Element, Tensor};

/// `Tensor::from_vec(body, shape)` with `body` run on the contiguous elements of tensor `t` as a
/// slice `s` of the element type its dtype matches (arms `dtype pattern => element type`).
macro_rules! by_dtype {
    ($t:expr, $shape:expr, |$s:ident| $body:expr, $($dt:pat => $ty:ty),+) => {
        match $t.dtype() {
            $($dt => Tensor::from_vec($t.with_contiguous_slice::<$ty, _>(|$s| $body)??, $shape)?,)+
        }
    };
}
pub(crate) use by_dtype;

/// The flat index that stands for "outside the input" in the padded gather and scatter of
/// convolution, pooling and padding (reads as zero, scatters nowhere).
pub const PAD_INDEX: usize = usize::MAX;

/// `src[idx]`; with `PAD`, [`PAD_INDEX`] reads as zero. Out of bounds: an index error.
pub(crate) fn gather<T: Element, const PAD: bool>(src: &[T], idx: &[usize]) -> Result<Vec<T>> {
    idx.iter()
        .map(|&i| {
            if PAD && i == PAD_INDEX {
                return Ok(T::default());
            }
            src.get(i).copied().ok_or_else(|| {
                Error::index(format!("index {i} is out of bounds for size {}", src.len()))
            })
        })
        .collect()
}

/// Zeros of length `n` with `src` added at `idx`; with `PAD`, entries at [`PAD_INDEX`] are
/// dropped. Out of bounds: an index error.
pub(crate) fn scatter_add<T: Element + std::ops::Add<Output = T>, const PAD: bool>(
    src: &[T],
    idx: &[usize],
    n: usize,
) -> Result<Vec<T>> {
    let mut out = crate::tensor::creation::try_filled_vec(n, T::default())?;
    for (&i, &v) in idx.iter().zip(src) {
        if PAD && i == PAD_INDEX {
            continue;
        }
        let slot = out
            .get_mut(i)
            .ok_or_else(|| Error::index(format!("index {i} is out of bounds for size {n}")))?;
        *slot = *slot + v;
    }
    Ok(out)
}

impl Tensor {
    /// Elements at flat row-major positions `idx`, shaped `shape`.
    pub(crate) fn take_flat(&self, idx: &Arc<Vec<usize>>, shape: &[usize]) -> Result<Tensor> {
        // Inside vmap: each sample gathered at the same positions.
        let out = match crate::ops::batching::per_sample(&[self], |p| p[0].take_flat(idx, shape)) {
            Some(r) => r?,
            None => crate::tensor::storage::with_dtype!(self.dtype(), T => Tensor::from_vec(
                self.with_contiguous_slice::<T, _>(|s| gather::<_, false>(s, idx))??,
                shape,
            )?),
        };
        if needs_grad(&[self]) {
            let (idx, in_shape): (Arc<Vec<usize>>, Dims) = (idx.clone(), self.shape().into());
            record(
                "TakeBackward0",
                &[self],
                &[&out],
                &[],
                false,
                move |g, _| Ok(vec![Some(g[0].scatter_add_flat(&in_shape, &idx)?)]),
            )?;
        }
        Ok(out)
    }

    /// A zero tensor of `shape` with this tensor's elements added at flat positions `idx`.
    pub(crate) fn scatter_add_flat(
        &self,
        shape: &[usize],
        idx: &Arc<Vec<usize>>,
    ) -> Result<Tensor> {
        let n: usize = shape.iter().product();
        if self.dtype() == DType::Bool {
            return Err(Error::runtime(
                "scatter_add is not supported for bool tensors",
            ));
        }
        let per = crate::ops::batching::per_sample(&[self], |p| p[0].scatter_add_flat(shape, idx));
        let out = match per {
            Some(r) => r?,
            // Narrow types add in their compute type and are rounded back once.
            None if self.dtype().is_narrow() => {
                let wide = cast(self, self.dtype().compute())?;
                let sum = by_dtype!(wide, shape, |s| scatter_add::<_, false>(s, idx, n),
                    DType::Float32 => f32, DType::Float64 => f64, _ => i64);
                cast(&sum, self.dtype())?
            }
            None => by_dtype!(self, shape, |s| scatter_add::<_, false>(s, idx, n),
                DType::Float32 => f32, DType::Float64 => f64, _ => i64),
        };
        if needs_grad(&[self]) {
            let (idx, src_shape): (Arc<Vec<usize>>, Dims) = (idx.clone(), self.shape().into());
            record(
                "IndexAddBackward0",
                &[self],
                &[&out],
                &[],
                false,
                move |g, _| Ok(vec![Some(g[0].take_flat(&idx, &src_shape)?)]),
            )?;
        }
        Ok(out)
    }
}
