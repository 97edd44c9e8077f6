//! Index-driven ops (`index`, `index_put`, `gather`, `scatter`, `index_select`, `masked_select`,
//! ...). Each computes flat row-major source positions and moves elements with the adjoint pair
//! `take_flat` / `scatter_add_flat` (`indexing::take`), so every backward is itself made of
//! differentiable ops and higher-order gradients work.

mod select;
pub(crate) mod take;

pub use select::ScatterReduce;

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::graph::node::{needs_grad, record};
use crate::tensor::creation::{checked_numel, try_filled_vec, try_vec};
use crate::tensor::grad_mode::GradModeGuard;
use crate::tensor::shape::{broadcast_shapes, fmt_shape, wrap_dim};
use crate::tensor::{DType, Dims, Tensor};

/// Row-major strides of `shape`.
pub(crate) fn rm_strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1usize; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// For every element of `shape` in row-major order, the value of `f(coordinates)`.
pub(crate) fn positions(
    shape: &[usize],
    mut f: impl FnMut(&[usize]) -> Result<usize>,
) -> Result<Vec<usize>> {
    let n = checked_numel(shape)?;
    let mut out = try_vec(n)?;
    let mut c = vec![0usize; shape.len()];
    for _ in 0..n {
        out.push(f(&c)?);
        for d in (0..shape.len()).rev() {
            c[d] += 1;
            if c[d] < shape[d] {
                break;
            }
            c[d] = 0;
        }
    }
    Ok(out)
}

/// Row-major flat index of `c` for a tensor with strides `st`.
pub(crate) fn flat(c: &[usize], st: &[usize]) -> usize {
    c.iter().zip(st).map(|(a, b)| a * b).sum()
}

/// `i` wrapped into `0..size`, or torch's IndexError.
fn wrap_index(i: i64, dim: usize, size: usize) -> Result<usize> {
    let s = size as i64;
    if i < -s || i >= s {
        return Err(Error::index(format!(
            "index {i} is out of bounds for dimension {dim} with size {size}"
        )));
    }
    Ok(if i < 0 { i + s } else { i } as usize)
}

/// The values of an int64 index tensor, or torch's error for another dtype.
fn index_values(index: &Tensor, op: &str) -> Result<Vec<i64>> {
    if index.dtype() != DType::Int64 {
        let msg = match op {
            "index_select" => "index_select(): Expected dtype int32 or int64 for index".to_string(),
            "index_add_" => "index_add_(): Expected dtype int32/int64 for index".to_string(),
            _ => format!("{op}(): Expected dtype int32/int64 for index"),
        };
        return Err(Error::runtime(msg));
    }
    index.to_vec::<i64>()
}

impl Tensor {
    /// Elements at flat positions `idx` shaped `shape`, recorded as `name` whose backward
    /// scatters the gradient back (`scatter_add_flat`, itself differentiable).
    pub(crate) fn gather_named(
        &self,
        name: &'static str,
        idx: Vec<usize>,
        shape: &[usize],
    ) -> Result<Tensor> {
        let idx = Arc::new(idx);
        let out = {
            let _g = GradModeGuard::new(false);
            self.take_flat(&idx, shape)?
        };
        if needs_grad(&[self]) {
            let in_shape: Dims = self.shape().into();
            record(name, &[self], &[&out], &[], false, move |g, _| {
                Ok(vec![Some(g[0].scatter_add_flat(&in_shape, &idx)?)])
            })?;
        }
        Ok(out)
    }

    /// `self` with `values` written at flat positions `pos` (one per element of `values`, in
    /// row-major order). With `accumulate` duplicates add up; otherwise the last write wins.
    /// Differentiable in both `self` and `values` (composed of where/take/scatter_add).
    pub(crate) fn put_flat(
        &self,
        pos: &[usize],
        values: &Tensor,
        accumulate: bool,
    ) -> Result<Tensor> {
        let values = if values.dtype() != self.dtype() {
            values.to_dtype(self.dtype())?
        } else {
            values.clone()
        };
        let values = values.reshape(&[values.numel()])?;
        let shape: Dims = self.shape().into();
        if accumulate {
            let add = values.scatter_add_flat(&shape, &Arc::new(pos.to_vec()))?;
            return self.add(&add);
        }
        let n = self.numel();
        let mut last = try_filled_vec(n, usize::MAX)?;
        for (k, &p) in pos.iter().enumerate() {
            if p < n {
                last[p] = k;
            }
        }
        let mut src = Vec::new();
        let mut dst = Vec::new();
        let mut hit = try_filled_vec(n, false)?;
        for (p, &k) in last.iter().enumerate() {
            if k != usize::MAX {
                src.push(k);
                dst.push(p);
                hit[p] = true;
            }
        }
        let m = src.len();
        let chosen = values.take_flat(&Arc::new(src), &[m])?;
        let scattered = chosen.scatter_add_flat(&shape, &Arc::new(dst))?;
        let mask = Tensor::from_vec(hit, &shape)?;
        Tensor::where_cond(&mask, &scattered, self)
    }

    /// Elements along `dim` at `index` (1-D or 0-D int64).
    pub fn index_select(&self, dim: i64, index: &Tensor) -> Result<Tensor> {
        if index.dim() > 1 {
            return Err(Error::index(
                "index_select(): Index is supposed to be a vector",
            ));
        }
        let iv = index_values(index, "index_select")?;
        if self.dim() == 0 && iv.len() != 1 {
            return Err(Error::runtime(format!(
                "index_select(): Index to scalar can have only 1 value, got {} value(s)",
                iv.len()
            )));
        }
        let nd = self.dim().max(1);
        let d = wrap_dim(dim, nd)?;
        let in_shape: Vec<usize> = if self.dim() == 0 {
            vec![1]
        } else {
            self.shape().to_vec()
        };
        let idx: Vec<usize> = iv
            .iter()
            .map(|&i| wrap_index(i, d, in_shape[d]))
            .collect::<Result<_>>()?;
        let mut out_shape = in_shape.clone();
        out_shape[d] = idx.len();
        let st = rm_strides(&in_shape);
        let pos = positions(&out_shape, |c| {
            let mut c = c.to_vec();
            c[d] = idx[c[d]];
            Ok(flat(&c, &st))
        })?;
        let out_shape: Vec<usize> = if self.dim() == 0 && index.dim() == 0 {
            vec![]
        } else {
            out_shape
        };
        self.gather_named("IndexSelectBackward0", pos, &out_shape)
    }

    /// Flat source positions of `gather(dim, index)` (also the targets of `scatter`).
    fn gather_positions(&self, dim: usize, index: &Tensor, op: &str) -> Result<Vec<usize>> {
        let iv = index_values(index, op)?;
        let nd = self.dim().max(1);
        let ishape: Vec<usize> = if index.dim() == 0 {
            vec![1; nd]
        } else {
            index.shape().to_vec()
        };
        let sshape: Vec<usize> = if self.dim() == 0 {
            vec![1]
        } else {
            self.shape().to_vec()
        };
        if ishape.len() != sshape.len() && index.numel() > 0 {
            return Err(Error::runtime(
                "Index tensor must have the same number of dimensions as input tensor",
            ));
        }
        for (i, (&a, &b)) in ishape.iter().zip(&sshape).enumerate() {
            if i != dim && a > b {
                return Err(Error::runtime(format!(
                    "Size does not match at dimension {i} expected index {} to be smaller than self {} apart from dimension {dim}",
                    fmt_shape(&ishape),
                    fmt_shape(&sshape)
                )));
            }
        }
        let st = rm_strides(&sshape);
        let mut k = 0usize;
        positions(&ishape, |c| {
            let i = iv[k];
            k += 1;
            let mut c = c.to_vec();
            c[dim] = wrap_index(i, dim, sshape[dim]).map_err(|_| {
                Error::runtime(format!(
                    "index {i} is out of bounds for dimension {dim} with size {}",
                    sshape[dim]
                ))
            })?;
            Ok(flat(&c, &st))
        })
    }

    /// `out[i][j] = self[index[i][j]][j]` (for `dim=0`), shaped like `index`.
    pub fn gather(&self, dim: i64, index: &Tensor) -> Result<Tensor> {
        let d = wrap_dim(dim, self.dim().max(1))?;
        if index.is_batched() && self.dim() > 0 {
            // Inside vmap with picks that differ from sample to sample.
            return crate::ops::batching::take_along(self, d, index);
        }
        let pos = self.gather_positions(d, index, "gather")?;
        self.gather_named("GatherBackward0", pos, index.shape())
    }

    /// A copy of `self` with `src` written along `dim` at `index` (`src` broader than `index`
    /// is cut to its shape). With duplicate indices the last write wins.
    pub fn scatter(&self, dim: i64, index: &Tensor, src: &Tensor) -> Result<Tensor> {
        self.scatter_impl(dim, index, src, false, "scatter")
    }

    /// [`Tensor::scatter`] with one value for every indexed position.
    pub fn scatter_value(&self, dim: i64, index: &Tensor, value: f64) -> Result<Tensor> {
        let src = Tensor::full(index.shape(), value, self.dtype());
        self.scatter_impl(dim, index, &src, false, "scatter")
    }

    /// A copy of `self` with `src` added along `dim` at `index` (duplicates add up).
    pub fn scatter_add(&self, dim: i64, index: &Tensor, src: &Tensor) -> Result<Tensor> {
        self.scatter_impl(dim, index, src, true, "scatter_add")
    }

    fn scatter_impl(
        &self,
        dim: i64,
        index: &Tensor,
        src: &Tensor,
        accumulate: bool,
        op: &str,
    ) -> Result<Tensor> {
        let d = wrap_dim(dim, self.dim().max(1))?;
        if index.dim() != src.dim() && index.numel() > 0 && src.dim() > 0 {
            return Err(Error::runtime(
                "Index tensor must have the same number of dimensions as src tensor",
            ));
        }
        for (&a, &b) in index.shape().iter().zip(src.shape()) {
            if a > b {
                return Err(Error::runtime(format!(
                    "Expected index {} to be smaller than self {} apart from dimension {d} and to be smaller size than src {}",
                    fmt_shape(index.shape()),
                    fmt_shape(self.shape()),
                    fmt_shape(src.shape())
                )));
            }
        }
        let pos = self.gather_positions(d, index, op)?;
        // The part of src that index covers.
        let mut part = src.clone();
        if src.dim() > 0 && src.dim() == index.dim() {
            for (i, &n) in index.shape().iter().enumerate() {
                if part.shape()[i] != n {
                    part = part.narrow(i as i64, 0, n)?;
                }
            }
        }
        self.put_flat(&pos, &part, accumulate)
    }

    /// `self` with `alpha * source` slices added along `dim` at `index`.
    pub fn index_add(
        &self,
        dim: i64,
        index: &Tensor,
        source: &Tensor,
        alpha: f64,
    ) -> Result<Tensor> {
        if index.dim() > 1 {
            return Err(Error::index(
                "index_add_(): Index is supposed to be a vector",
            ));
        }
        let iv = index_values(index, "index_add_")?;
        let d = wrap_dim(dim, self.dim().max(1))?;
        let sshape: Vec<usize> = if self.dim() == 0 {
            vec![1]
        } else {
            self.shape().to_vec()
        };
        let mut expect = sshape.clone();
        expect[d] = iv.len();
        let src_shape: Vec<usize> = if source.dim() == 0 {
            vec![1]
        } else {
            source.shape().to_vec()
        };
        if src_shape.len() == expect.len() && src_shape[d] != iv.len() {
            return Err(Error::runtime(format!(
                "index_add_(): Number of indices ({}) should be equal to source.size(dim): ({}), for dim: {d}",
                iv.len(),
                src_shape[d]
            )));
        }
        if src_shape != expect {
            return Err(Error::runtime(format!(
                "index_add_(): Source/destination tensor must have same slice shapes. Destination slice shape: {} at dimension {d} and source slice shape: {} at dimension 0.",
                fmt_shape(&sshape),
                fmt_shape(&src_shape)
            )));
        }
        let idx: Vec<usize> = iv
            .iter()
            .map(|&i| wrap_index(i, d, sshape[d]))
            .collect::<Result<_>>()?;
        let st = rm_strides(&sshape);
        let pos = positions(&expect, |c| {
            let mut c = c.to_vec();
            c[d] = idx[c[d]];
            Ok(flat(&c, &st))
        })?;
        let src = if alpha == 1.0 {
            source.clone()
        } else {
            source.mul_scalar(alpha)?
        };
        self.put_flat(&pos, &src, true)
    }

    /// The elements where `mask` (broadcast with `self`) is true, as a 1-D tensor.
    pub fn masked_select(&self, mask: &Tensor) -> Result<Tensor> {
        if mask.dtype() != DType::Bool {
            return Err(Error::runtime(
                "masked_select: expected BoolTensor for mask",
            ));
        }
        let shape = broadcast_shapes(self.shape(), mask.shape())?;
        let x = if self.shape() == shape.as_slice() {
            self.clone()
        } else {
            self.expand(&shape)?
        };
        let m = mask.expand(&shape)?.to_vec::<bool>()?;
        let pos: Vec<usize> = m
            .iter()
            .enumerate()
            .filter(|(_, &b)| b)
            .map(|(i, _)| i)
            .collect();
        let n = pos.len();
        let xc = if x.is_contiguous() {
            x
        } else {
            x.contiguous()?
        };
        xc.gather_named("MaskedSelectBackward0", pos, &[n])
    }

    /// Coordinates of the non-zero elements, shaped `[count, ndim]` (int64, no gradient).
    pub fn nonzero(&self) -> Result<Tensor> {
        if self.is_batched() {
            // The count differs from sample to sample: torch's vmap refuses it too.
            return Err(Error::runtime("vmap: We do not support batching operators that can output dynamic shape. Attempted to vmap over aten::nonzero. Please file an issue at https://github.com/pytorch/pytorch/issues if you need this feature."));
        }
        let vals: Vec<bool> = match self.dtype() {
            DType::Bool => self.to_vec::<bool>()?,
            DType::Int64 => self.to_vec::<i64>()?.iter().map(|&v| v != 0).collect(),
            _ => self
                .to_vec::<f64>()
                .or_else(|_| self.to_dtype(DType::Float64)?.to_vec::<f64>())?
                .iter()
                .map(|&v| v != 0.0)
                .collect(),
        };
        let shape = self.shape();
        let st = rm_strides(shape);
        let mut out = Vec::new();
        let mut count = 0;
        for (i, &b) in vals.iter().enumerate() {
            if b {
                count += 1;
                for (d, s) in st.iter().enumerate() {
                    out.push(((i / s) % shape[d]) as i64);
                }
            }
        }
        Tensor::from_vec(out, &[count, shape.len()])
    }

    /// `gather` with `indices` broadcast against `self` except along `dim`; with `dim=None`
    /// both are flattened.
    pub fn take_along_dim(&self, indices: &Tensor, dim: Option<i64>) -> Result<Tensor> {
        if indices.dtype() != DType::Int64 {
            return Err(Error::runtime(format!(
                "torch.take_along_dim(): dtype of indices should be Long but got {}",
                indices.dtype().c_name()
            )));
        }
        let Some(dim) = dim else {
            return self
                .reshape(&[self.numel()])?
                .gather(0, &indices.reshape(&[indices.numel()])?);
        };
        if self.dim() != indices.dim() {
            return Err(Error::runtime(format!(
                "torch.take_along_dim(): input and indices should have the same number of dimensions, but got {} dimensions for input, and {} dimensions for indices",
                self.dim(),
                indices.dim()
            )));
        }
        let d = wrap_dim(dim, self.dim().max(1))?;
        let mut a: Vec<usize> = self.shape().to_vec();
        let mut b: Vec<usize> = indices.shape().to_vec();
        if !a.is_empty() {
            a[d] = 1;
            b[d] = 1;
        }
        let bs = broadcast_shapes(&a, &b)?;
        let mut sa = bs.to_vec();
        let mut sb = bs.to_vec();
        if !sa.is_empty() {
            sa[d] = self.shape()[d];
            sb[d] = indices.shape()[d];
        }
        let x = if self.shape() == sa.as_slice() {
            self.clone()
        } else {
            self.expand(&sa)?
        };
        let i = if indices.shape() == sb.as_slice() {
            indices.clone()
        } else {
            indices.expand(&sb)?.contiguous()?
        };
        x.gather(d as i64, &i)
    }

    /// Expand advanced indices: bool masks become one int64 index per masked dim; checks dtypes.
    fn expand_indices(&self, indices: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let mut out = Vec::new();
        // A uint8 index is a mask, as in torch (which warns that it is deprecated).
        let masks: Vec<Option<Tensor>> = indices
            .iter()
            .map(|ix| match ix {
                Some(t) if t.dtype() == DType::UInt8 => {
                    crate::kernels::copy::cast(t, DType::Bool).map(Some)
                }
                other => Ok(other.clone()),
            })
            .collect::<Result<_>>()?;
        for ix in &masks {
            match ix {
                None => out.push(None),
                Some(t) if t.dtype() == DType::Bool => {
                    let d0 = out.len();
                    for (k, &s) in t.shape().iter().enumerate() {
                        let have = self.shape().get(d0 + k).copied();
                        if have != Some(s) {
                            return Err(Error::index(format!(
                                "The shape of the mask {} at index {k} does not match the shape of the indexed tensor {} at index {}",
                                fmt_shape(t.shape()),
                                fmt_shape(self.shape()),
                                d0 + k
                            )));
                        }
                    }
                    let nz = t.nonzero()?;
                    let cnt = nz.shape()[0];
                    let v = nz.to_vec::<i64>()?;
                    let nd = t.dim();
                    for k in 0..nd {
                        let col: Vec<i64> = (0..cnt).map(|r| v[r * nd + k]).collect();
                        out.push(Some(Tensor::from_vec(col, &[cnt])?));
                    }
                }
                Some(t) if t.dtype() == DType::Int64 => out.push(Some(t.clone())),
                // int32/int16/int8 indices index as int64 ones (torch accepts int32).
                Some(t) if t.dtype().is_integer() && t.dtype() != DType::UInt8 => {
                    out.push(Some(crate::kernels::copy::cast(t, DType::Int64)?))
                }
                Some(_) => {
                    return Err(Error::index(
                        "tensors used as indices must be long, int, byte or bool tensors",
                    ))
                }
            }
        }
        if out.len() > self.dim() {
            return Err(Error::index(format!(
                "too many indices for tensor of dimension {}",
                self.dim()
            )));
        }
        Ok(out)
    }

    /// Result shape and flat source positions of advanced indexing with `indices` (one entry
    /// per leading dim; `None` keeps the dim). Adjacent index tensors put their broadcast dims
    /// where they stood; separated ones put them first (NumPy's rule, as torch).
    fn index_positions(&self, indices: &[Option<Tensor>]) -> Result<(Vec<usize>, Vec<usize>)> {
        let ix = self.expand_indices(indices)?;
        let shape = self.shape().to_vec();
        let adv: Vec<usize> = (0..ix.len()).filter(|&i| ix[i].is_some()).collect();
        if adv.is_empty() {
            let n = self.numel();
            return Ok((shape, (0..n).collect()));
        }
        let mut bshape: Dims = Dims::new();
        for &i in &adv {
            let t = ix[i]
                .as_ref()
                .map(|t| t.shape().to_vec())
                .unwrap_or_default();
            bshape = broadcast_shapes(&bshape, &t).map_err(|_| {
                let shapes: Vec<String> = adv
                    .iter()
                    .filter_map(|&j| ix[j].as_ref().map(|t| fmt_shape(t.shape())))
                    .collect();
                Error::index(format!(
                    "shape mismatch: indexing tensors could not be broadcast together with shapes {}",
                    shapes.join(", ")
                ))
            })?;
        }
        let mut vals: Vec<Vec<usize>> = Vec::new();
        for &i in &adv {
            let t = ix[i]
                .as_ref()
                .ok_or_else(|| Error::runtime("internal error: index"))?;
            let e = t.expand(&bshape)?;
            let v = e.to_vec::<i64>()?;
            vals.push(
                v.iter()
                    .map(|&x| wrap_index(x, i, shape[i]))
                    .collect::<Result<_>>()?,
            );
        }
        let adjacent = adv.windows(2).all(|w| w[1] == w[0] + 1);
        let first = if adjacent { adv[0] } else { 0 };
        let rest: Vec<usize> = (0..shape.len()).filter(|d| !adv.contains(d)).collect();
        let nb = bshape.len();
        // Output dims: rest dims before `first`, broadcast dims, remaining rest dims.
        let before: Vec<usize> = rest.iter().copied().filter(|&d| d < first).collect();
        let after: Vec<usize> = rest.iter().copied().filter(|&d| d >= first).collect();
        let mut out_shape: Vec<usize> = before.iter().map(|&d| shape[d]).collect();
        out_shape.extend(bshape.iter().copied());
        out_shape.extend(after.iter().map(|&d| shape[d]));
        let st = rm_strides(&shape);
        let bst = rm_strides(&bshape);
        let nbf = before.len();
        let pos = positions(&out_shape, |c| {
            let mut src = vec![0usize; shape.len()];
            for (k, &d) in before.iter().enumerate() {
                src[d] = c[k];
            }
            let bflat = flat(&c[nbf..nbf + nb], &bst);
            for (k, &d) in adv.iter().enumerate() {
                src[d] = vals[k][bflat];
            }
            for (k, &d) in after.iter().enumerate() {
                src[d] = c[nbf + nb + k];
            }
            Ok(flat(&src, &st))
        })?;
        Ok((out_shape, pos))
    }

    /// Advanced indexing `self[indices]` (a copy): `indices` has one entry per leading dim,
    /// `None` for a full slice, int64 or bool tensors otherwise.
    pub fn index(&self, indices: &[Option<Tensor>]) -> Result<Tensor> {
        let (shape, pos) = self.index_positions(indices)?;
        let x = if self.is_contiguous() {
            self.clone()
        } else {
            self.contiguous()?
        };
        x.gather_named("IndexBackward0", pos, &shape)
    }

    /// Out-of-place `index_put`: `self` with `values` (broadcast to the shape of
    /// `self[indices]`) written (or added, with `accumulate`) at those positions.
    pub fn index_put(
        &self,
        indices: &[Option<Tensor>],
        values: &Tensor,
        accumulate: bool,
    ) -> Result<Tensor> {
        let (shape, pos) = self.index_positions(indices)?;
        let v = if values.shape() == shape.as_slice() {
            values.clone()
        } else {
            values.expand(&shape).map_err(|_| {
                Error::runtime(format!(
                    "shape mismatch: value tensor of shape {} cannot be broadcast to indexing result of shape {}",
                    fmt_shape(values.shape()),
                    fmt_shape(&shape)
                ))
            })?
        };
        let v = if v.is_contiguous() {
            v
        } else {
            v.contiguous()?
        };
        self.put_flat(&pos, &v, accumulate)
    }

    /// In-place `index_put_` (through the in-place mechanism, so versions and views behave as
    /// torch).
    pub fn index_put_(
        &self,
        indices: &[Option<Tensor>],
        values: &Tensor,
        accumulate: bool,
    ) -> Result<()> {
        self.inplace_with(&[values], false, |x| {
            x.index_put(indices, values, accumulate)
        })
    }

    /// In-place `masked_fill_`.
    pub fn masked_fill_(&self, mask: &Tensor, value: f64) -> Result<()> {
        if mask.dtype() != DType::Bool {
            return Err(Error::runtime(format!(
                "masked_fill_ only supports boolean masks, but got mask with dtype {}",
                mask.dtype().c_name()
            )));
        }
        self.inplace_with(&[], false, |x| x.masked_fill(mask, value))
    }
}
