//! Reductions: sum and mean over all or some dimensions, and `sum_to` (undoing broadcasting).

use ndarray::{ArrayD, Axis};

use crate::autograd::node::{needs_grad, record};
use crate::error::Result;
use crate::ops::convert::cast;
use crate::tensor::shape::wrap_dim;
use crate::tensor::{DType, Dims, Element, Tensor};

/// Sorted, de-duplicated, wrapped dimensions; empty `dims` means all of them.
pub(crate) fn reduce_dims(dims: &[i64], ndim: usize) -> Result<Vec<usize>> {
    if dims.is_empty() {
        return Ok((0..ndim).collect());
    }
    let mut out = Vec::with_capacity(dims.len());
    for &d in dims {
        let w = wrap_dim(d, ndim)?;
        if out.contains(&w) {
            return Err(crate::error::Error::runtime(format!(
                "dim {w} appears multiple times in the list of dims"
            )));
        }
        out.push(w);
    }
    out.sort_unstable();
    if ndim == 0 {
        out.clear();
    }
    Ok(out)
}

/// The shape after reducing `dims` with `keepdim`.
pub(crate) fn reduced_shape(shape: &[usize], dims: &[usize], keepdim: bool) -> Dims {
    shape
        .iter()
        .enumerate()
        .filter_map(|(i, &s)| {
            if dims.contains(&i) {
                keepdim.then_some(1)
            } else {
                Some(s)
            }
        })
        .collect()
}

fn sum_kernel<T: Element + num_traits::Zero + std::ops::Add<Output = T>>(
    t: &Tensor,
    dims: &[usize],
    keepdim: bool,
) -> Result<Tensor> {
    let out_shape = reduced_shape(t.shape(), dims, keepdim);
    if dims.len() == t.dim() && t.is_contiguous() {
        let s = t.with_contiguous_slice::<T, _>(|s| sum_slice(s))?;
        return Tensor::from_vec(vec![s], &out_shape);
    }
    let arr: ArrayD<T> = t.with_view::<T, _>(|v| {
        let mut a = v.to_owned();
        for &d in dims.iter().rev() {
            a = a.sum_axis(Axis(d));
        }
        a
    })?;
    // sum_axis returns row-major arrays, so the raw vector is already in order.
    let v = if arr.is_standard_layout() {
        arr.into_raw_vec_and_offset().0
    } else {
        arr.iter().copied().collect()
    };
    Tensor::from_vec(v, &out_shape)
}

/// Pairwise summation in blocks: accurate and independent of thread count.
fn sum_slice<T: Element + num_traits::Zero + std::ops::Add<Output = T>>(s: &[T]) -> T {
    const BLOCK: usize = 128;
    if s.len() <= BLOCK {
        let mut acc = [T::zero(); 8];
        let chunks = s.chunks_exact(8);
        let rem = chunks.remainder();
        for c in chunks {
            for k in 0..8 {
                acc[k] = acc[k] + c[k];
            }
        }
        let mut total = T::zero();
        for a in acc {
            total = total + a;
        }
        for &r in rem {
            total = total + r;
        }
        return total;
    }
    let mid = (s.len() / 2).div_ceil(BLOCK) * BLOCK;
    sum_slice(&s[..mid]) + sum_slice(&s[mid..])
}

impl Tensor {
    /// Sum of all elements (integers and bools sum to int64).
    pub fn sum(&self) -> Result<Tensor> {
        self.sum_dims(&[], false)
    }

    /// Sum over `dims` (empty: all), keeping them as size 1 with `keepdim`.
    pub fn sum_dims(&self, dims: &[i64], keepdim: bool) -> Result<Tensor> {
        let rd = reduce_dims(dims, self.dim())?;
        let out = match self.dtype() {
            DType::Float32 => sum_kernel::<f32>(self, &rd, keepdim)?,
            DType::Float64 => sum_kernel::<f64>(self, &rd, keepdim)?,
            _ => sum_kernel::<i64>(&cast(self, DType::Int64)?, &rd, keepdim)?,
        };
        if needs_grad(&[self]) {
            let in_shape: Dims = self.shape().into();
            let keep_shape = reduced_shape(self.shape(), &rd, true);
            let name = if dims.is_empty() {
                "SumBackward0"
            } else {
                "SumBackward1"
            };
            record(name, &[self], &[&out], &[], false, move |g, _| {
                Ok(vec![Some(g[0].reshape(&keep_shape)?.expand(&in_shape)?)])
            })?;
        }
        Ok(out)
    }

    /// Mean of all elements (floats only, like torch).
    pub fn mean(&self) -> Result<Tensor> {
        self.mean_dims(&[], false)
    }

    /// Mean over `dims` (empty: all).
    pub fn mean_dims(&self, dims: &[i64], keepdim: bool) -> Result<Tensor> {
        if !self.dtype().is_float() {
            return Err(crate::error::Error::runtime(format!(
                "mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: {}",
                crate::tensor::scalar_type_name(self.dtype())
            )));
        }
        let rd = reduce_dims(dims, self.dim())?;
        let n: usize = rd.iter().map(|&d| self.shape()[d]).product();
        let s = {
            let _g = crate::autograd::grad_mode::GradModeGuard::new(false);
            self.sum_dims(dims, keepdim)?
        };
        let out = crate::ops::elementwise::map_float_fn(
            &s,
            move |x| x / n as f32,
            move |x| x / n as f64,
        )?;
        if needs_grad(&[self]) {
            let in_shape: Dims = self.shape().into();
            let keep_shape = reduced_shape(self.shape(), &rd, true);
            let name = if dims.is_empty() {
                "MeanBackward0"
            } else {
                "MeanBackward1"
            };
            record(name, &[self], &[&out], &[], false, move |g, _| {
                Ok(vec![Some(
                    g[0].div_scalar(n as f64)?
                        .reshape(&keep_shape)?
                        .expand(&in_shape)?,
                )])
            })?;
        }
        Ok(out)
    }

    /// Sum this (broadcast) tensor down to `shape`, the inverse of broadcasting `shape` to it.
    pub fn sum_to(&self, shape: &[usize]) -> Result<Tensor> {
        if self.shape() == shape {
            return Ok(self.clone());
        }
        let lead = self.dim() - shape.len();
        let mut dims: Vec<i64> = (0..lead as i64).collect();
        for (i, &s) in shape.iter().enumerate() {
            if s == 1 && self.shape()[lead + i] != 1 {
                dims.push((lead + i) as i64);
            }
        }
        let r = if dims.is_empty() {
            self.clone()
        } else {
            self.sum_dims(&dims, true)?
        };
        r.reshape(shape)
    }
}

/// Whether a float tensor holds a NaN (anomaly mode).
pub(crate) fn has_nan(t: &Tensor) -> Result<bool> {
    match t.dtype() {
        DType::Float32 => t.with_contiguous_slice::<f32, _>(|s| s.iter().any(|x| x.is_nan())),
        DType::Float64 => t.with_contiguous_slice::<f64, _>(|s| s.iter().any(|x| x.is_nan())),
        _ => Ok(false),
    }
}
