//! Shape ops over several tensors or pieces, and rearranging copies: `unflatten`, `movedim`, `cat`, `stack`, `split`, `chunk`, `unbind`, `flip`,
//! `roll`, `repeat`, `tile`. Views (`unflatten`, `movedim`, `split`/`chunk`/`unbind`) share
//! storage with their input; the others copy through the differentiable gather
//! (`gather_named`), whose backward scatters the gradient back.

use crate::error::{Error, Result};
use crate::graph::node::{needs_grad, record};
use crate::ops::indexing::{flat, positions, rm_strides};
use crate::tensor::grad_mode::GradModeGuard;
use crate::tensor::shape::{fmt_shape, wrap_dim};
use crate::tensor::{DType, Dims, Layout, Tensor};

impl Tensor {
    /// Split dim `dim` into `sizes` (one `-1` inferred); a view.
    pub fn unflatten(&self, dim: i64, sizes: &[i64]) -> Result<Tensor> {
        if self.dim() == 0 {
            return Err(Error::runtime(format!(
                "unflatten got an unexpected error:\nDimension specified as {dim} but tensor has no dimensions"
            )));
        }
        let d = wrap_dim(dim, self.dim())?;
        if sizes.is_empty() {
            return Err(Error::runtime("unflatten: sizes must be non-empty"));
        }
        let n = self.shape()[d];
        let inferred = super::view::infer_shape(sizes, n).map_err(|_| {
            let parts: Vec<String> = sizes.iter().map(|s| s.to_string()).collect();
            Error::runtime(format!(
                "unflatten: Provided sizes [{}] don't multiply up to the size of dim {d} ({n}) in the input tensor",
                parts.join(", ")
            ))
        })?;
        if inferred.iter().product::<usize>() != n {
            let parts: Vec<String> = sizes.iter().map(|s| s.to_string()).collect();
            return Err(Error::runtime(format!(
                "unflatten: Provided sizes [{}] don't multiply up to the size of dim {d} ({n}) in the input tensor",
                parts.join(", ")
            )));
        }
        let l = self.layout();
        let mut shape: Dims = l.shape[..d].into();
        let mut strides: Dims = l.strides[..d].into();
        let inner = rm_strides(&inferred);
        for (s, st) in inferred.iter().zip(&inner) {
            shape.push(*s);
            strides.push(st * l.strides[d]);
        }
        shape.extend(l.shape[d + 1..].iter().copied());
        strides.extend(l.strides[d + 1..].iter().copied());
        self.reshaped_view(
            Layout {
                shape,
                strides,
                offset: l.offset,
            },
            "ViewBackward0",
        )
    }

    /// Move dims `source` to positions `destination` (a view through `permute`).
    pub fn movedim(&self, source: &[i64], destination: &[i64]) -> Result<Tensor> {
        let nd = self.dim();
        if source.len() != destination.len() {
            return Err(Error::runtime(format!(
                "movedim: Invalid source or destination dims: source ({:?} dims) should contain the same number of dims as destination ({:?} dims)",
                source, destination
            )));
        }
        if nd == 0 {
            // torch accepts dim 0 / -1 on a 0-d tensor and returns a view of it.
            for &d in source.iter().chain(destination) {
                wrap_dim(d, nd)?;
            }
            return self.permute(&[]);
        }
        let src: Vec<usize> = source
            .iter()
            .map(|&d| wrap_dim(d, nd))
            .collect::<Result<_>>()?;
        let dst: Vec<usize> = destination
            .iter()
            .map(|&d| wrap_dim(d, nd))
            .collect::<Result<_>>()?;
        for (v, what) in [(&src, "source"), (&dst, "destination")] {
            for (i, a) in v.iter().enumerate() {
                if v[..i].contains(a) {
                    return Err(Error::runtime(format!(
                        "movedim: repeated dim in `{what}` ({:?})",
                        if what == "source" {
                            source
                        } else {
                            destination
                        }
                    )));
                }
            }
        }
        let mut perm = vec![usize::MAX; nd];
        for (&s, &d) in src.iter().zip(&dst) {
            perm[d] = s;
        }
        let mut rest = (0..nd).filter(|d| !src.contains(d));
        for p in perm.iter_mut() {
            if *p == usize::MAX {
                *p = rest.next().unwrap_or(0);
            }
        }
        let perm: Vec<i64> = perm.iter().map(|&p| p as i64).collect();
        self.permute(&perm)
    }

    /// Concatenate along `dim` (a copy; dtypes promote). Size-`[0]` 1-D tensors are skipped,
    /// as torch does.
    pub fn cat(tensors: &[Tensor], dim: i64) -> Result<Tensor> {
        if tensors.is_empty() {
            return Err(Error::runtime(
                "torch.cat(): expected a non-empty list of Tensors",
            ));
        }
        let used: Vec<&Tensor> = tensors
            .iter()
            .filter(|t| !(t.dim() == 1 && t.numel() == 0))
            .collect();
        let reference = used.first().copied().unwrap_or(&tensors[0]);
        let nd = reference.dim();
        if nd == 0 {
            return Err(Error::runtime(
                "zero-dimensional tensor (at position 0) cannot be concatenated",
            ));
        }
        let d = wrap_dim(dim, nd)?;
        let mut dtype = tensors[0].dtype();
        for t in tensors {
            dtype = DType::promote(dtype, t.dtype());
        }
        let mut total = 0usize;
        for (i, t) in tensors.iter().enumerate() {
            if t.dim() == 1 && t.numel() == 0 {
                continue;
            }
            if t.dim() == 0 {
                return Err(Error::runtime(format!(
                    "zero-dimensional tensor (at position {i}) cannot be concatenated"
                )));
            }
            if t.dim() != nd {
                return Err(Error::runtime(format!(
                    "Tensors must have same number of dimensions: got {nd} and {}",
                    t.dim()
                )));
            }
            for k in 0..nd {
                if k != d && t.shape()[k] != reference.shape()[k] {
                    return Err(Error::runtime(format!(
                        "Sizes of tensors must match except in dimension {d}. Expected size {} but got size {} for tensor number {i} in the list.",
                        reference.shape()[k],
                        t.shape()[k]
                    )));
                }
            }
            total += t.shape()[d];
        }
        let mut out_shape: Vec<usize> = reference.shape().to_vec();
        out_shape[d] = total;
        let out = {
            let _g = GradModeGuard::new(false);
            match crate::tensor::batched::top_level(&used) {
                // Inside vmap: the physical pieces, unbatched ones repeated for every sample.
                Some(level) => {
                    let size = level.size();
                    let mut phys_shape = vec![size];
                    phys_shape.extend_from_slice(&out_shape);
                    let parts = used
                        .iter()
                        .map(
                            |t| match crate::tensor::batched::physical_front(t, &level) {
                                (p, true) => Ok(p),
                                (p, false) => {
                                    let mut shape = vec![size];
                                    shape.extend_from_slice(p.shape());
                                    p.unsqueeze(0)?.expand(&shape)
                                }
                            },
                        )
                        .collect::<Result<Vec<_>>>()?;
                    let refs: Vec<&Tensor> = parts.iter().collect();
                    let out = concat_blocks(&refs, dtype, d + 1, &phys_shape)?;
                    Tensor::batched(out, 0, level)?
                }
                None => concat_blocks(&used, dtype, d, &out_shape)?,
            }
        };
        let refs: Vec<&Tensor> = tensors.iter().collect();
        if needs_grad(&refs) {
            let spans: Vec<Option<(usize, usize)>> = {
                let mut off = 0usize;
                tensors
                    .iter()
                    .map(|t| {
                        if t.dim() == 1 && t.numel() == 0 {
                            None
                        } else {
                            let s = (off, t.shape()[d]);
                            off += t.shape()[d];
                            Some(s)
                        }
                    })
                    .collect()
            };
            record("CatBackward0", &refs, &[&out], &[], false, move |g, _| {
                spans
                    .iter()
                    .map(|s| match s {
                        Some((o, n)) => Ok(Some(g[0].narrow(d as i64, *o as i64, *n)?)),
                        None => Ok(None),
                    })
                    .collect()
            })?;
        }
        Ok(out)
    }

    /// Stack equally shaped tensors along a new dim `dim`.
    pub fn stack(tensors: &[Tensor], dim: i64) -> Result<Tensor> {
        if tensors.is_empty() {
            return Err(Error::runtime("stack expects a non-empty TensorList"));
        }
        let s0 = tensors[0].shape();
        for (i, t) in tensors.iter().enumerate() {
            if t.shape() != s0 {
                return Err(Error::runtime(format!(
                    "stack expects each tensor to be equal size, but got {} at entry 0 and {} at entry {i}",
                    fmt_shape(s0),
                    fmt_shape(t.shape())
                )));
            }
        }
        let d = wrap_dim(dim, s0.len() + 1)?;
        let out = {
            let _g = GradModeGuard::new(false);
            let parts: Vec<Tensor> = tensors
                .iter()
                .map(|t| t.detach().unsqueeze(d as i64))
                .collect::<Result<_>>()?;
            Tensor::cat(&parts, d as i64)?
        };
        let refs: Vec<&Tensor> = tensors.iter().collect();
        if needs_grad(&refs) {
            let n = tensors.len();
            record("StackBackward0", &refs, &[&out], &[], false, move |g, _| {
                (0..n)
                    .map(|i| Ok(Some(g[0].select(d as i64, i as i64)?)))
                    .collect()
            })?;
        }
        Ok(out)
    }

    /// Views of consecutive pieces along `dim`; one node `name` with several outputs, each
    /// marked with `op` so in-place writes on it raise torch's multi-output-view error
    /// (`Output 1 of Split is a view ...`).
    fn split_views(
        &self,
        d: usize,
        sizes: &[usize],
        name: &'static str,
        op: &'static str,
    ) -> Result<Vec<Tensor>> {
        let mut outs = Vec::with_capacity(sizes.len());
        let mut off = 0usize;
        for &n in sizes {
            let mut l = self.layout().clone();
            l.offset += off * l.strides[d];
            l.shape[d] = n;
            outs.push(self.make_view(l));
            off += n;
        }
        if needs_grad(&[self]) {
            let refs: Vec<&Tensor> = outs.iter().collect();
            record(name, &[self], &refs, &[], false, move |g, _| {
                Ok(vec![Some(Tensor::cat(g, d as i64)?)])
            })?;
            for o in &outs {
                o.meta().multi_view_op = Some(op);
            }
        }
        Ok(outs)
    }

    /// Pieces of `split_size` along `dim` (the last may be smaller); views.
    pub fn split(&self, split_size: usize, dim: i64) -> Result<Vec<Tensor>> {
        if self.dim() == 0 {
            return Err(Error::runtime(
                "split expects at least a 1-dimensional tensor",
            ));
        }
        let d = wrap_dim(dim, self.dim())?;
        let n = self.shape()[d];
        if split_size == 0 && n != 0 {
            return Err(Error::runtime(format!(
                "split_size can only be 0 if dimension size is 0, but got dimension size of {n}"
            )));
        }
        let mut sizes = Vec::new();
        if split_size == 0 {
            sizes.push(0);
        } else {
            let mut left = n;
            while left > 0 {
                let s = left.min(split_size);
                sizes.push(s);
                left -= s;
            }
            if sizes.is_empty() {
                sizes.push(0);
            }
        }
        self.split_views(d, &sizes, "SplitBackward0", "Split")
    }

    /// Pieces of the given sizes along `dim` (they must add up to its size); views.
    pub fn split_with_sizes(&self, sizes: &[i64], dim: i64) -> Result<Vec<Tensor>> {
        if self.dim() == 0 {
            return Err(Error::runtime(
                "split expects at least a 1-dimensional tensor",
            ));
        }
        let d = wrap_dim(dim, self.dim())?;
        let n = self.shape()[d] as i64;
        if sizes.iter().any(|&s| s < 0) || sizes.iter().sum::<i64>() != n {
            let parts: Vec<String> = sizes.iter().map(|s| s.to_string()).collect();
            return Err(Error::runtime(format!(
                "split_with_sizes expects split_sizes to sum exactly to {n} (input tensor's size at dimension {d}), but got split_sizes=[{}]",
                parts.join(", ")
            )));
        }
        let s: Vec<usize> = sizes.iter().map(|&v| v as usize).collect();
        self.split_views(d, &s, "SplitWithSizesBackward0", "SplitWithSizes")
    }

    /// At most `chunks` equal pieces (of size ceil(n / chunks)) along `dim`; views.
    pub fn chunk(&self, chunks: i64, dim: i64) -> Result<Vec<Tensor>> {
        if self.dim() == 0 {
            return Err(Error::runtime(
                "chunk expects at least a 1-dimensional tensor",
            ));
        }
        if chunks <= 0 {
            return Err(Error::runtime(format!(
                "chunk expects `chunks` to be greater than 0, got: {chunks}"
            )));
        }
        let d = wrap_dim(dim, self.dim())?;
        let n = self.shape()[d];
        let size = n.div_ceil(chunks as usize);
        if size == 0 {
            // torch returns `chunks` empty pieces for an empty dim.
            let sizes = vec![0usize; chunks as usize];
            return self.split_views(d, &sizes, "SplitBackward0", "Split");
        }
        self.split(size, d as i64)
    }

    /// The slices along `dim`, with that dim removed; views.
    pub fn unbind(&self, dim: i64) -> Result<Vec<Tensor>> {
        if self.dim() == 0 {
            return Err(Error::index(
                "Dimension specified as 0 but tensor has no dimensions",
            ));
        }
        let d = wrap_dim(dim, self.dim())?;
        let n = self.shape()[d];
        let mut outs = Vec::with_capacity(n);
        for i in 0..n {
            let mut l = self.layout().clone();
            l.offset += i * l.strides[d];
            l.shape.remove(d);
            l.strides.remove(d);
            outs.push(self.make_view(l));
        }
        if needs_grad(&[self]) {
            let refs: Vec<&Tensor> = outs.iter().collect();
            record(
                "UnbindBackward0",
                &[self],
                &refs,
                &[],
                false,
                move |g, _| Ok(vec![Some(Tensor::stack(g, d as i64)?)]),
            )?;
            for o in &outs {
                o.meta().multi_view_op = Some("Unbind");
            }
        }
        Ok(outs)
    }

    /// A copy reversed along `dims`.
    pub fn flip(&self, dims: &[i64]) -> Result<Tensor> {
        let nd = self.dim();
        let mut ds = Vec::new();
        for &d in dims {
            let w = wrap_dim(d, nd.max(1))?;
            if ds.contains(&w) {
                return Err(Error::runtime(format!(
                    "dims has duplicates, original flip dims size={}, but unique flip dims size={}",
                    dims.len(),
                    ds.len()
                )));
            }
            ds.push(w);
        }
        if nd == 0 {
            ds.clear();
        }
        let shape = self.shape().to_vec();
        let st = rm_strides(&shape);
        let pos = positions(&shape, |c| {
            let mut c = c.to_vec();
            for &d in &ds {
                c[d] = shape[d] - 1 - c[d];
            }
            Ok(flat(&c, &st))
        })?;
        self.gather_named("FlipBackward0", pos, &shape)
    }

    /// A copy with elements shifted by `shifts` along `dims` (wrapping around); without dims
    /// the flattened tensor is rolled.
    pub fn roll(&self, shifts: &[i64], dims: &[i64]) -> Result<Tensor> {
        if dims.is_empty() {
            if shifts.len() != 1 {
                return Err(Error::runtime(format!(
                    "shifts and dimensions must align. shifts: {}, dims:0",
                    shifts.len()
                )));
            }
            let n = self.numel();
            let shape = self.shape().to_vec();
            let s = shifts[0];
            let pos: Vec<usize> = (0..n)
                .map(|i| ((i as i64 - s).rem_euclid(n.max(1) as i64)) as usize)
                .collect();
            return self.gather_named("RollBackward0", pos, &shape);
        }
        if shifts.len() != dims.len() {
            return Err(Error::runtime(format!(
                "shifts and dimensions must align. shifts: {}, dims:{}",
                shifts.len(),
                dims.len()
            )));
        }
        if self.dim() == 0 {
            return Err(Error::index(format!(
                "Dimension specified as {} but tensor has no dimensions",
                dims[0]
            )));
        }
        let shape = self.shape().to_vec();
        let ds: Vec<usize> = dims
            .iter()
            .map(|&d| wrap_dim(d, self.dim()))
            .collect::<Result<_>>()?;
        let st = rm_strides(&shape);
        let pos = positions(&shape, |c| {
            let mut c = c.to_vec();
            for (&d, &s) in ds.iter().zip(shifts) {
                let n = shape[d] as i64;
                c[d] = (c[d] as i64 - s).rem_euclid(n.max(1)) as usize;
            }
            Ok(flat(&c, &st))
        })?;
        self.gather_named("RollBackward0", pos, &shape)
    }

    /// A copy tiled `sizes[i]` times along each dim (leading extra sizes add dims).
    pub fn repeat(&self, sizes: &[i64]) -> Result<Tensor> {
        if sizes.len() < self.dim() {
            return Err(Error::runtime("Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor"));
        }
        let lead = sizes.len() - self.dim();
        let mut in_shape = vec![1usize; lead];
        in_shape.extend_from_slice(self.shape());
        // torch allocates `size * repeat` per dim and reports a negative one there (a negative
        // repeat of an empty dim gives an empty dim).
        let target: Vec<i64> = in_shape
            .iter()
            .zip(sizes)
            .map(|(&a, &b)| (a as i64).saturating_mul(b))
            .collect();
        if let Some(&s) = target.iter().find(|&&s| s < 0) {
            return Err(Error::runtime(format!(
                "Trying to create tensor with negative dimension {s}: {target:?}"
            )));
        }
        let out_shape: Vec<usize> = target.iter().map(|&s| s as usize).collect();
        // Checked before any position is computed: a huge repeat must fail at once.
        crate::tensor::creation::ensure_allocatable(
            crate::tensor::creation::checked_numel(&out_shape)?,
            self.dtype(),
        )?;
        let st = rm_strides(&in_shape);
        let pos = positions(&out_shape, |c| {
            let src: Vec<usize> = c.iter().zip(&in_shape).map(|(&a, &n)| a % n).collect();
            Ok(flat(&src, &st))
        })?;
        self.gather_named("RepeatBackward0", pos, &out_shape)
    }

    /// [`Tensor::repeat`] where fewer `dims` than tensor dims are padded with leading 1s.
    pub fn tile(&self, dims: &[i64]) -> Result<Tensor> {
        let mut d: Vec<i64> = vec![1; self.dim().saturating_sub(dims.len())];
        d.extend_from_slice(dims);
        self.repeat(&d)
    }
}

/// The elements of `ts` (converted to `dtype`) back to back as one 1-D tensor (no graph).
/// The concatenation of `ts` along `d` into `out_shape`: for each index of the dims before `d`,
/// each input's contiguous block (its extent along `d` times the trailing dims) in turn.
fn concat_blocks(ts: &[&Tensor], dtype: DType, d: usize, out_shape: &[usize]) -> Result<Tensor> {
    fn join<T: crate::tensor::Element>(
        ts: &[&Tensor],
        dtype: DType,
        d: usize,
        out_shape: &[usize],
    ) -> Result<Tensor> {
        let inner: usize = out_shape[d + 1..].iter().product();
        let outer: usize = out_shape[..d].iter().product();
        let parts: Vec<Tensor> = ts
            .iter()
            .map(|t| {
                if t.dtype() == dtype {
                    Ok((*t).clone())
                } else {
                    t.to_dtype(dtype)
                }?
                .contiguous()
            })
            .collect::<Result<_>>()?;
        let n = crate::tensor::creation::checked_numel(out_shape)?;
        // Written once, block by block, without zeroing first (a third of a stack's time).
        let mut v: Vec<T> = crate::tensor::creation::try_vec(n)?;
        let dst = &mut v.spare_capacity_mut()[..n];
        let row = out_shape[d] * inner;
        let (mut off, mut written) = (0, 0);
        for p in &parts {
            let blk = p.shape()[d] * inner;
            p.with_contiguous_slice::<T, _>(|s| {
                for (o, src) in s.chunks_exact(blk.max(1)).take(outer).enumerate() {
                    let (to, from) = (&mut dst[o * row + off..o * row + off + blk], &src[..blk]);
                    // SAFETY: both ranges are in bounds (checked by the slicing above) and
                    // `blk` long; the output is a fresh buffer, so they cannot overlap.
                    unsafe {
                        std::ptr::copy_nonoverlapping(from.as_ptr(), to.as_mut_ptr().cast(), blk)
                    };
                    written += blk;
                }
            })?;
            off += blk;
        }
        if written != n {
            return Err(crate::error::Error::runtime(format!(
                "cat: the inputs hold {written} elements for an output of {n}"
            )));
        }
        // SAFETY: the blocks tile the output (each of the `outer` rows gets every part's block
        // at its offset, and the offsets sum to `row`), and `written == n` counts every one.
        unsafe { v.set_len(n) };
        Tensor::from_vec(v, out_shape)
    }
    crate::tensor::storage::with_dtype!(dtype, T => join::<T>(ts, dtype, d, out_shape))
}
