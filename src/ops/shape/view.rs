//! Shape ops. Views share storage and the version counter with their base; their backward rules
//! map the gradient back to the base's shape.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::graph::node::{map_tangent, needs_grad, record, record_with_jvp};
use crate::tensor::grad_mode;
use crate::tensor::shape::{fmt_shape, wrap_dim};
use crate::tensor::storage::contiguous_strides;
use crate::tensor::{Dims, Layout, Tensor};

impl Tensor {
    /// A view of this tensor's storage through `layout`, remembering the root base so in-place
    /// writes through the view can rebase the base's history.
    pub(crate) fn make_view(&self, layout: Layout) -> Tensor {
        let v = self.alias_with_layout(layout);
        let (base, no_grad_view) = {
            let m = self.meta();
            (
                m.view_base.clone().unwrap_or_else(|| self.clone()),
                m.view_created_without_grad,
            )
        };
        let created_without_grad =
            no_grad_view || (!grad_mode::is_recording() && self.requires_grad());
        {
            let mut m = v.meta();
            m.view_base = Some(base);
            m.view_created_without_grad = created_without_grad;
        }
        v
    }

    /// Same elements with another shape (one `-1` is inferred); a view when the layout allows,
    /// a copy otherwise.
    pub fn reshape(&self, shape: &[usize]) -> Result<Tensor> {
        self.reshape_impl(shape, "ViewBackward0", false)
    }

    /// Like [`Tensor::reshape`] with torch's `-1` inference.
    pub fn reshape_i(&self, shape: &[i64]) -> Result<Tensor> {
        let s = infer_shape(shape, self.numel())?;
        self.reshape(&s)
    }

    /// A view with another shape; fails for layouts that would need a copy.
    pub fn view_i(&self, shape: &[i64]) -> Result<Tensor> {
        let s = infer_shape(shape, self.numel())?;
        self.reshape_impl(&s, "ViewBackward0", true)
    }

    fn reshape_impl(&self, shape: &[usize], name: &'static str, view_only: bool) -> Result<Tensor> {
        let n: usize = shape.iter().product();
        if n != self.numel() {
            return Err(Error::runtime(format!(
                "shape '{}' is invalid for input of size {}",
                fmt_shape(shape),
                self.numel()
            )));
        }
        if shape == self.shape() {
            // A no-op reshape still returns a new view, like torch.
            return self.reshaped_view(self.layout().clone(), name);
        }
        if !self.is_contiguous() {
            // Still a view when the dims that merge or split are laid out as one run (torch's
            // computeStride); a batched tensor's logical layout is rarely contiguous.
            if let Some(strides) = viewed_strides(self.shape(), self.strides(), shape) {
                let offset = self.layout().offset;
                return self.reshaped_view(
                    Layout {
                        shape: shape.into(),
                        strides,
                        offset,
                    },
                    name,
                );
            }
            if view_only {
                return Err(Error::runtime("view size is not compatible with input tensor's size and stride (at least one dimension spans across two contiguous subspaces). Use .reshape(...) instead."));
            }
            let c = self.contiguous()?;
            return c.reshape(shape);
        }
        self.reshaped_view(
            Layout {
                shape: shape.into(),
                strides: contiguous_strides(shape),
                offset: self.layout().offset,
            },
            name,
        )
    }

    /// A view of this tensor with `layout` (of the same elements), recorded as a node `name`
    /// whose backward reshapes the gradient back to this tensor's shape.
    pub(crate) fn reshaped_view(&self, layout: Layout, name: &'static str) -> Result<Tensor> {
        let out = self.make_view(layout);
        if needs_grad(&[self]) {
            let in_shape: Dims = self.shape().into();
            record_with_jvp(
                name,
                &[self],
                &[&out],
                &[],
                false,
                move |g, _| Ok(vec![Some(g[0].reshape(&in_shape)?)]),
                // Linear: the tangent is reshaped the same way.
                &|t| map_tangent(t, |t| t.reshape(out.shape())),
            )?;
        }
        Ok(out)
    }

    /// Flatten dims `start..=end` into one.
    pub fn flatten(&self, start: i64, end: i64) -> Result<Tensor> {
        if self.dim() == 0 {
            return self.reshape(&[1]);
        }
        let (s, e) = (wrap_dim(start, self.dim())?, wrap_dim(end, self.dim())?);
        if s > e {
            return Err(Error::runtime(
                "flatten() has invalid args: start_dim cannot come after end_dim",
            ));
        }
        let mut shape: Vec<usize> = self.shape()[..s].to_vec();
        shape.push(self.shape()[s..=e].iter().product());
        shape.extend_from_slice(&self.shape()[e + 1..]);
        self.reshape(&shape)
    }

    /// Swap two dimensions (a view).
    pub fn transpose(&self, d0: i64, d1: i64) -> Result<Tensor> {
        self.transpose_named(d0, d1, "TransposeBackward0")
    }

    fn transpose_named(&self, d0: i64, d1: i64, name: &'static str) -> Result<Tensor> {
        let (a, b) = (wrap_dim(d0, self.dim())?, wrap_dim(d1, self.dim())?);
        let mut l = self.layout().clone();
        if self.dim() > 0 {
            l.shape.swap(a, b);
            l.strides.swap(a, b);
        }
        let out = self.make_view(l);
        if needs_grad(&[self]) {
            record_with_jvp(
                name,
                &[self],
                &[&out],
                &[],
                false,
                move |g, _| Ok(vec![Some(g[0].transpose(a as i64, b as i64)?)]),
                &|t| map_tangent(t, |t| t.transpose(a as i64, b as i64)),
            )?;
        }
        Ok(out)
    }

    /// Transpose of a matrix (a view); 0-D and 1-D tensors are returned as they are.
    pub fn t(&self) -> Result<Tensor> {
        if self.dim() > 2 {
            return Err(Error::runtime(format!(
                "t() expects a tensor with <= 2 dimensions, but self is {}D",
                self.dim()
            )));
        }
        if self.dim() < 2 {
            return self.transpose_named(0, 0, "TBackward0");
        }
        self.transpose_named(0, 1, "TBackward0")
    }

    /// Reorder dimensions (a view).
    pub fn permute(&self, dims: &[i64]) -> Result<Tensor> {
        if dims.len() != self.dim() {
            return Err(Error::runtime(format!(
                "permute(sparse_coo): number of dimensions in the tensor input does not match the length of the desired ordering of dimensions i.e. input.dim() = {} is not equal to len(dims) = {}",
                self.dim(),
                dims.len()
            )));
        }
        let mut perm = Vec::with_capacity(dims.len());
        for &d in dims {
            let w = wrap_dim(d, self.dim())?;
            if perm.contains(&w) {
                return Err(Error::runtime("permute(): duplicate dims are not allowed."));
            }
            perm.push(w);
        }
        let l = self.layout();
        let out = self.make_view(Layout {
            shape: perm.iter().map(|&p| l.shape[p]).collect(),
            strides: perm.iter().map(|&p| l.strides[p]).collect(),
            offset: l.offset,
        });
        if needs_grad(&[self]) {
            let mut inv = vec![0i64; perm.len()];
            for (i, &p) in perm.iter().enumerate() {
                inv[p] = i as i64;
            }
            let fwd: Vec<i64> = perm.iter().map(|&p| p as i64).collect();
            record_with_jvp(
                "PermuteBackward0",
                &[self],
                &[&out],
                &[],
                false,
                move |g, _| Ok(vec![Some(g[0].permute(&inv)?)]),
                &|t| map_tangent(t, |t| t.permute(&fwd)),
            )?;
        }
        Ok(out)
    }

    /// Insert a size-1 dimension at `dim` (a view).
    pub fn unsqueeze(&self, dim: i64) -> Result<Tensor> {
        let d = wrap_dim(dim, self.dim() + 1)?;
        let mut l = self.layout().clone();
        let stride = if d < l.shape.len() {
            l.strides[d] * l.shape[d]
        } else {
            1
        };
        l.shape.insert(d, 1);
        l.strides.insert(d, stride);
        self.reshaped_view(l, "UnsqueezeBackward0")
    }

    /// Remove size-1 dimensions: all of them, or only `dim` (a view).
    pub fn squeeze(&self, dim: Option<i64>) -> Result<Tensor> {
        let l = self.layout();
        let drop_dim = |i: usize| -> Result<bool> {
            Ok(match dim {
                None => l.shape[i] == 1,
                Some(d) => wrap_dim(d, self.dim())? == i && l.shape[i] == 1,
            })
        };
        if let Some(d) = dim {
            wrap_dim(d, self.dim())?;
        }
        let mut shape = Dims::new();
        let mut strides = Dims::new();
        for i in 0..l.shape.len() {
            if !drop_dim(i)? {
                shape.push(l.shape[i]);
                strides.push(l.strides[i]);
            }
        }
        let name = if dim.is_some() {
            "SqueezeBackward1"
        } else {
            "SqueezeBackward0"
        };
        self.reshaped_view(
            Layout {
                shape,
                strides,
                offset: l.offset,
            },
            name,
        )
    }

    /// Broadcast to `shape` without copying (stride 0 along expanded dims).
    pub fn expand(&self, shape: &[usize]) -> Result<Tensor> {
        let sizes: Vec<i64> = shape.iter().map(|&s| s as i64).collect();
        self.expand_i(&sizes)
    }

    /// [`Tensor::expand`] with torch's `-1` meaning "keep this size".
    pub fn expand_i(&self, sizes: &[i64]) -> Result<Tensor> {
        let l = self.layout();
        if sizes.len() < l.shape.len() {
            return Err(Error::runtime(format!(
                "expand(torch.FloatTensor{{{}}}, size=[{}]): the number of sizes provided ({}) must be greater or equal to the number of dimensions in the tensor ({})",
                fmt_shape(&l.shape), sizes.len(), sizes.len(), l.shape.len()
            )));
        }
        let lead = sizes.len() - l.shape.len();
        let mut shape = Dims::new();
        let mut strides = Dims::new();
        for (i, &s) in sizes.iter().enumerate() {
            if i < lead {
                if s < 0 {
                    return Err(Error::runtime(format!("The expanded size of the tensor ({s}) isn't allowed in a leading, non-existing dimension {i}")));
                }
                shape.push(s as usize);
                strides.push(0);
                continue;
            }
            let (cur, st) = (l.shape[i - lead], l.strides[i - lead]);
            if s == -1 || s as usize == cur {
                shape.push(cur);
                strides.push(st);
            } else if cur == 1 && s >= 0 {
                shape.push(s as usize);
                strides.push(0);
            } else {
                let target: Vec<String> = sizes.iter().map(|v| v.to_string()).collect();
                return Err(Error::runtime(format!(
                    "The expanded size of the tensor ({s}) must match the existing size ({cur}) at non-singleton dimension {i}.  Target sizes: [{}].  Tensor sizes: {}",
                    target.join(", "),
                    fmt_shape(&l.shape)
                )));
            }
        }
        if shape.as_slice() == self.shape() {
            return Ok(self.clone());
        }
        let out = self.make_view(Layout {
            shape,
            strides,
            offset: l.offset,
        });
        if needs_grad(&[self]) {
            let in_shape: Dims = self.shape().into();
            record(
                "ExpandBackward0",
                &[self],
                &[&out],
                &[],
                false,
                move |g, _| Ok(vec![Some(g[0].sum_to(&in_shape)?)]),
            )?;
        }
        Ok(out)
    }

    /// Elements `start..end` in steps of `step` along `dim` (Python slice semantics; a view).
    pub fn slice(
        &self,
        dim: i64,
        start: Option<i64>,
        end: Option<i64>,
        step: i64,
    ) -> Result<Tensor> {
        if step <= 0 {
            return Err(Error::value("step must be greater than zero"));
        }
        let d = wrap_dim(dim, self.dim())?;
        if self.dim() == 0 {
            return Err(Error::index("slice() cannot be applied to a 0-dim tensor."));
        }
        let size = self.shape()[d] as i64;
        let clamp = |v: i64| -> i64 {
            let v = if v < 0 { v + size } else { v };
            v.clamp(0, size)
        };
        let s = clamp(start.unwrap_or(0));
        let e = clamp(end.unwrap_or(size)).max(s);
        let len = ((e - s) + step - 1) / step;
        let transform = move |l: &Layout| -> Layout {
            let mut l = l.clone();
            l.offset += s as usize * l.strides[d];
            l.shape[d] = len as usize;
            l.strides[d] *= step as usize;
            l
        };
        self.indexed_view("SliceBackward0", transform)
    }

    /// The sub-tensor at `index` along `dim`, dropping that dimension (a view).
    pub fn select(&self, dim: i64, index: i64) -> Result<Tensor> {
        if self.dim() == 0 {
            return Err(Error::index("invalid index of a 0-dim tensor. Use `tensor.item()` in Python or `tensor.item<T>()` in C++ to convert a 0-dim tensor to a number"));
        }
        let d = wrap_dim(dim, self.dim())?;
        let size = self.shape()[d] as i64;
        if index < -size || index >= size {
            return Err(Error::index(format!(
                "index {index} is out of bounds for dimension {d} with size {size}"
            )));
        }
        let i = if index < 0 { index + size } else { index } as usize;
        let transform = move |l: &Layout| -> Layout {
            let mut l = l.clone();
            l.offset += i * l.strides[d];
            l.shape.remove(d);
            l.strides.remove(d);
            l
        };
        self.indexed_view("SelectBackward0", transform)
    }

    /// `length` elements from `start` along `dim` (a view). `start` may be negative (counted
    /// from the end) or equal to the size (an empty view); torch's errors otherwise.
    pub fn narrow(&self, dim: i64, start: i64, length: usize) -> Result<Tensor> {
        if self.dim() == 0 {
            return Err(Error::runtime(
                "narrow() cannot be applied to a 0-dim tensor.",
            ));
        }
        let d = wrap_dim(dim, self.dim())?;
        let size = self.shape()[d] as i64;
        if start < -size || start > size {
            return Err(Error::index(format!(
                "start out of range (expected to be in range of [{}, {size}], but got {start})",
                -size
            )));
        }
        let start = if start < 0 { start + size } else { start };
        // `length` can exceed i64 only from a Rust caller; it is out of range all the same.
        let len = i64::try_from(length).unwrap_or(i64::MAX);
        if start > size - len {
            return Err(Error::runtime(format!(
                "start ({start}) + length ({length}) exceeds dimension size ({size})."
            )));
        }
        self.slice(d as i64, Some(start), Some(start + len), 1)
    }

    /// Every window of `size` elements along `dimension`, `step` apart, as a new last
    /// dimension (torch's `Tensor.unfold`): a view, whose windows overlap when `step < size`;
    /// the gradient adds each window's gradient back where it was read. torch's errors for a
    /// negative size, a size beyond the dimension, or a step below 1.
    pub fn unfold(&self, dimension: i64, size: i64, step: i64) -> Result<Tensor> {
        let d = wrap_dim(dimension, self.dim().max(1))?;
        let n = if self.dim() == 0 { 1 } else { self.shape()[d] };
        if size < 0 {
            return Err(Error::runtime(format!("size is {size} but must be >= 0")));
        }
        if size as u64 > n as u64 {
            return Err(Error::runtime(format!(
                "maximum size for tensor at dimension {d} is {n} but size is {size}"
            )));
        }
        if step <= 0 {
            return Err(Error::runtime(format!("step is {step} but must be > 0")));
        }
        let (size, step) = (size as usize, step as usize);
        let scalar = self.dim() == 0;
        let transform = move |l: &Layout| -> Layout {
            let mut l = l.clone();
            if scalar {
                l.shape = Dims::from_slice(&[size]);
                l.strides = Dims::from_slice(&[1]);
                return l;
            }
            let stride = l.strides[d];
            l.shape[d] = (l.shape[d] - size) / step + 1;
            l.strides[d] = stride * step;
            l.shape.push(size);
            l.strides.push(stride);
            l
        };
        self.indexed_view("UnfoldBackward0", transform)
    }

    /// A view made by `transform`ing the layout; its gradient scatters back through the same
    /// transform applied to a row-major layout of this tensor's shape.
    fn indexed_view(
        &self,
        name: &'static str,
        transform: impl Fn(&Layout) -> Layout,
    ) -> Result<Tensor> {
        let out = self.make_view(transform(self.layout()));
        if needs_grad(&[self]) {
            let logical = transform(&Layout::contiguous(self.shape()));
            let idx: Arc<Vec<usize>> = Arc::new(logical.offsets()?);
            let in_shape: Dims = self.shape().into();
            record(name, &[self], &[&out], &[], false, move |g, _| {
                Ok(vec![Some(g[0].scatter_add_flat(&in_shape, &idx)?)])
            })?;
        }
        Ok(out)
    }
}

/// Resolve one `-1` in a requested shape.
pub(crate) fn infer_shape(shape: &[i64], numel: usize) -> Result<Vec<usize>> {
    let mut infer = None;
    let mut known = 1usize;
    for (i, &s) in shape.iter().enumerate() {
        if s == -1 {
            if infer.is_some() {
                return Err(Error::runtime("only one dimension can be inferred"));
            }
            infer = Some(i);
        } else if s < 0 {
            return Err(Error::runtime(format!("invalid shape dimension {s}")));
        } else {
            known *= s as usize;
        }
    }
    let mut out: Vec<usize> = shape.iter().map(|&s| s.max(0) as usize).collect();
    if let Some(i) = infer {
        if known == 0 || !numel.is_multiple_of(known) {
            let parts: Vec<String> = shape.iter().map(|s| s.to_string()).collect();
            return Err(Error::runtime(format!(
                "shape '[{}]' is invalid for input of size {numel}",
                parts.join(", ")
            )));
        }
        out[i] = numel / known;
    }
    Ok(out)
}

/// The strides under which `new` views the elements of a layout of `shape` and `strides`, or
/// `None` when some dim of `new` would span two runs of memory (torch's `computeStride`).
fn viewed_strides(shape: &[usize], strides: &[usize], new: &[usize]) -> Option<Dims> {
    if shape.iter().product::<usize>() == 0 {
        return None;
    }
    let mut out: Dims = smallvec::smallvec![0; new.len()];
    if shape.is_empty() {
        out.iter_mut().for_each(|s| *s = 1);
        return Some(out);
    }
    let mut view_d = new.len() as isize - 1;
    // Walk back over chunks of dims that are laid out as one run of memory.
    let mut chunk_base = strides[shape.len() - 1];
    let (mut tensor_numel, mut view_numel) = (1usize, 1usize);
    for d in (0..shape.len()).rev() {
        tensor_numel *= shape[d];
        let chunk_ends =
            d == 0 || (shape[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base);
        if chunk_ends {
            while view_d >= 0 && (view_numel < tensor_numel || new[view_d as usize] == 1) {
                out[view_d as usize] = view_numel * chunk_base;
                view_numel *= new[view_d as usize];
                view_d -= 1;
            }
            if view_numel != tensor_numel {
                return None;
            }
            if d > 0 {
                chunk_base = strides[d - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    (view_d == -1).then_some(out)
}
