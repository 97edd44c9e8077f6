//! Gather and scatter by flat (row-major) element index: the adjoint pair behind the gradients
//! of slicing, selecting and writes into views. Each one's backward is the other.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::graph::node::{needs_grad, record};
use crate::tensor::{DType, Dims, Element, Tensor};

fn gather<T: Element>(src: &[T], idx: &[usize]) -> Result<Vec<T>> {
    idx.iter()
        .map(|&i| {
            src.get(i).copied().ok_or_else(|| {
                Error::index(format!("index {i} is out of bounds for size {}", src.len()))
            })
        })
        .collect()
}

fn scatter_add<T: Element + std::ops::Add<Output = T>>(
    src: &[T],
    idx: &[usize],
    n: usize,
) -> Result<Vec<T>> {
    let mut out = crate::tensor::creation::try_filled_vec(n, T::default())?;
    for (&i, &v) in idx.iter().zip(src) {
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
        let out = match self.dtype() {
            DType::Float32 => Tensor::from_vec(
                self.with_contiguous_slice::<f32, _>(|s| gather(s, idx))??,
                shape,
            )?,
            DType::Float64 => Tensor::from_vec(
                self.with_contiguous_slice::<f64, _>(|s| gather(s, idx))??,
                shape,
            )?,
            DType::Int64 => Tensor::from_vec(
                self.with_contiguous_slice::<i64, _>(|s| gather(s, idx))??,
                shape,
            )?,
            DType::Bool => Tensor::from_vec(
                self.with_contiguous_slice::<bool, _>(|s| gather(s, idx))??,
                shape,
            )?,
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
        let out = match self.dtype() {
            DType::Float32 => Tensor::from_vec(
                self.with_contiguous_slice::<f32, _>(|s| scatter_add(s, idx, n))??,
                shape,
            )?,
            DType::Float64 => Tensor::from_vec(
                self.with_contiguous_slice::<f64, _>(|s| scatter_add(s, idx, n))??,
                shape,
            )?,
            DType::Int64 => Tensor::from_vec(
                self.with_contiguous_slice::<i64, _>(|s| scatter_add(s, idx, n))??,
                shape,
            )?,
            DType::Bool => {
                return Err(Error::runtime(
                    "scatter_add is not supported for bool tensors",
                ))
            }
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
