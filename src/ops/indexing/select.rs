//! Index ops that copy or fill whole slices or flat positions: `index_copy`, `index_fill`,
//! `take`, `masked_scatter`, `repeat_interleave`, and `scatter_reduce`. Each forward runs
//! without a graph and records one node under torch's name; the backward rules are made of
//! `take_flat` / `scatter_add_flat` / `masked_fill` (differentiable), so `create_graph` works.

use std::sync::Arc;

use super::{flat, index_values, positions, rm_strides, wrap_index};
use crate::error::{Error, Result};
use crate::graph::node::{needs_grad, record};
use crate::tensor::creation::try_filled_vec;
use crate::tensor::grad_mode::GradModeGuard;
use crate::tensor::shape::{broadcast_shapes, wrap_dim};
use crate::tensor::{scalar_type_name, DType, Dims, Tensor};

/// The reduction of [`Tensor::scatter_reduce`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScatterReduce {
    /// Sum of the values.
    Sum,
    /// Product of the values.
    Prod,
    /// Mean of the values.
    Mean,
    /// Largest value.
    Amax,
    /// Smallest value.
    Amin,
}

impl ScatterReduce {
    /// torch's name (`"sum"`, `"prod"`, `"mean"`, `"amax"`, `"amin"`), or torch's error.
    pub fn parse(name: &str) -> Result<ScatterReduce> {
        Ok(match name {
            "sum" => ScatterReduce::Sum,
            "prod" => ScatterReduce::Prod,
            "mean" => ScatterReduce::Mean,
            "amax" => ScatterReduce::Amax,
            "amin" => ScatterReduce::Amin,
            _ => {
                return Err(Error::runtime(format!(
                    "reduce argument must be either sum, prod, mean, amax or amin, got {name}"
                )))
            }
        })
    }
}

/// A bool tensor of `shape`, true at the flat positions `pos`.
fn mask_at(shape: &[usize], pos: &[usize]) -> Result<Tensor> {
    let n: usize = shape.iter().product();
    let mut m = try_filled_vec(n, false)?;
    for &p in pos {
        m[p] = true;
    }
    Tensor::from_vec(m, shape)
}

/// `t` made row-major (a copy only when it is not).
fn rowmajor(t: &Tensor) -> Result<Tensor> {
    if t.is_contiguous() {
        Ok(t.clone())
    } else {
        t.contiguous()
    }
}

impl Tensor {
    /// For `index_copy`/`index_fill` along `dim`: the wrapped dim, the flat positions in `self`
    /// of every element of the slices `index` picks (row-major over `self`'s shape with `dim`
    /// resized to the number of indices), and that shape.
    fn slice_positions(
        &self,
        dim: i64,
        iv: &[i64],
        op: &str,
    ) -> Result<(usize, Vec<usize>, Vec<usize>)> {
        let d = wrap_dim(dim, self.dim().max(1))?;
        let sshape: Vec<usize> = if self.dim() == 0 {
            vec![1]
        } else {
            self.shape().to_vec()
        };
        let idx: Vec<usize> = iv
            .iter()
            .map(|&i| {
                wrap_index(i, d, sshape[d]).map_err(|e| match op {
                    "" => e,
                    _ => Error::index(format!("{op}(): {}", e.message())),
                })
            })
            .collect::<Result<_>>()?;
        let mut picked = sshape.clone();
        picked[d] = idx.len();
        let st = rm_strides(&sshape);
        let pos = positions(&picked, |c| {
            let mut c = c.to_vec();
            c[d] = idx[c[d]];
            Ok(flat(&c, &st))
        })?;
        Ok((d, pos, picked))
    }

    /// A copy of `self` whose slices along `dim` at `index` are replaced by `source`'s slices
    /// in order (torch's `index_copy`).
    pub fn index_copy(&self, dim: i64, index: &Tensor, source: &Tensor) -> Result<Tensor> {
        if index.dtype() != DType::Int64 {
            return Err(Error::runtime(format!(
                "index_copy_(): Expected a long tensor for index, but got {}",
                scalar_type_name(index.dtype())
            )));
        }
        if index.dim() > 1 {
            return Err(Error::index(
                "index_copy_(): Index should have dimension 1 or 0 (got 2)",
            ));
        }
        let iv = index.to_vec::<i64>()?;
        let d = wrap_dim(dim, self.dim().max(1))?;
        let src_n = if source.dim() == 0 {
            1
        } else {
            source.shape().get(d).copied().unwrap_or(0)
        };
        if src_n != iv.len() {
            return Err(Error::index(format!(
                "index_copy_(): Number of indices ({}) should be equal to source.size(dim) ({src_n})",
                iv.len()
            )));
        }
        let (d, pos, picked) = self.slice_positions(dim, &iv, "index_copy_")?;
        let src_shape: Vec<usize> = if source.dim() == 0 {
            vec![1]
        } else {
            source.shape().to_vec()
        };
        if src_shape != picked {
            return Err(Error::runtime(format!(
                "index_copy_(): Source/destination tensor must have same slice shapes. Destination slice shape: {} at dimension {d} and source slice shape: {} at dimension 0.",
                crate::tensor::shape::fmt_shape(self.shape()),
                crate::tensor::shape::fmt_shape(source.shape())
            )));
        }
        let out = {
            let _g = GradModeGuard::new(false);
            let src = rowmajor(&source.detach())?;
            self.detach().put_flat(&pos, &src, false)?
        };
        if needs_grad(&[self, source]) {
            let mask = mask_at(self.shape(), &pos)?;
            let idx = Arc::new(pos);
            let src_dims: Dims = source.shape().into();
            record(
                "IndexCopyBackward0",
                &[self, source],
                &[&out],
                &[],
                false,
                move |g, _| {
                    let gs = g[0].masked_fill(&mask, 0.0)?;
                    let gsrc = rowmajor(&g[0])?.take_flat(&idx, &src_dims)?;
                    Ok(vec![Some(gs), Some(gsrc)])
                },
            )?;
        }
        Ok(out)
    }

    /// A copy of `self` with the slices along `dim` at `index` set to `value` (torch's
    /// `index_fill`).
    pub fn index_fill(&self, dim: i64, index: &Tensor, value: f64) -> Result<Tensor> {
        if index.dtype() != DType::Int64 {
            return Err(Error::index(
                "index_fill_(): Expected dtype int64 for index.",
            ));
        }
        if index.dim() > 1 {
            return Err(Error::runtime("Index has to be a vector/scalar"));
        }
        let iv = index.to_vec::<i64>()?;
        let (_, pos, _) = self.slice_positions(dim, &iv, "")?;
        let mask = mask_at(self.shape(), &pos)?;
        let out = {
            let _g = GradModeGuard::new(false);
            let r = self.detach().masked_fill(&mask, value)?;
            rowmajor(&r)?
        };
        if needs_grad(&[self]) {
            record(
                "IndexFillBackward0",
                &[self],
                &[&out],
                &[],
                false,
                move |g, _| Ok(vec![Some(g[0].masked_fill(&mask, 0.0)?)]),
            )?;
        }
        Ok(out)
    }

    /// The elements of `self` (taken as 1-D) at `index`, shaped like `index` (torch's `take`).
    pub fn take(&self, index: &Tensor) -> Result<Tensor> {
        if index.dtype() != DType::Int64 {
            return Err(Error::runtime(format!(
                "take(): Expected a long tensor for index, but got {}",
                scalar_type_name(index.dtype())
            )));
        }
        let n = self.numel() as i64;
        let pos: Vec<usize> = index
            .to_vec::<i64>()?
            .into_iter()
            .map(|i| {
                if i < -n || i >= n {
                    Err(Error::index(format!(
                        "out of range: tried to access index {i} on a tensor of {n} elements."
                    )))
                } else {
                    Ok(if i < 0 { i + n } else { i } as usize)
                }
            })
            .collect::<Result<_>>()?;
        rowmajor(self)?.gather_named("TakeBackward0", pos, index.shape())
    }

    /// A copy of `self` with the positions where `mask` (broadcast to `self`) is true filled,
    /// in row-major order, with `source`'s first elements (torch's `masked_scatter`).
    pub fn masked_scatter(&self, mask: &Tensor, source: &Tensor) -> Result<Tensor> {
        if mask.dtype() != DType::Bool {
            return Err(Error::runtime(format!(
                "masked_scatter_ only supports boolean masks, but got mask with dtype {}",
                mask.dtype().c_name()
            )));
        }
        if source.dtype() != self.dtype() {
            return Err(Error::runtime(format!(
                "masked_scatter: expected self and source to have same dtypes but got {} and {}",
                scalar_type_name(self.dtype()),
                scalar_type_name(source.dtype())
            )));
        }
        let shape = broadcast_shapes(self.shape(), mask.shape())?;
        if shape.as_slice() != self.shape() {
            return Err(Error::runtime(format!(
                "output with shape {} doesn't match the broadcast shape {}",
                crate::tensor::shape::fmt_shape(self.shape()),
                crate::tensor::shape::fmt_shape(&shape)
            )));
        }
        let m = mask.expand(&shape)?.to_vec::<bool>()?;
        let pos: Vec<usize> = (0..m.len()).filter(|&i| m[i]).collect();
        let k = pos.len();
        if k > source.numel() {
            return Err(Error::runtime(
                "masked_scatter: expected source to have at least as many elements as the ones in mask",
            ));
        }
        let first = Arc::new((0..k).collect::<Vec<usize>>());
        let out = {
            let _g = GradModeGuard::new(false);
            let vals = rowmajor(&source.detach())?.take_flat(&first, &[k])?;
            self.detach().put_flat(&pos, &vals, false)?
        };
        if needs_grad(&[self, source]) {
            let mmask = mask_at(self.shape(), &pos)?;
            let idx = Arc::new(pos);
            let src_dims: Dims = source.shape().into();
            record(
                "MaskedScatterBackward0",
                &[self, source],
                &[&out],
                &[],
                false,
                move |g, _| {
                    let gs = g[0].masked_fill(&mmask, 0.0)?;
                    let picked = rowmajor(&g[0])?.take_flat(&idx, &[k])?;
                    let gsrc = picked.scatter_add_flat(&src_dims, &first)?;
                    Ok(vec![Some(gs), Some(gsrc)])
                },
            )?;
        }
        Ok(out)
    }

    /// Each slice along `dim` repeated `repeats[i]` times (one count for all when `repeats`
    /// has one element); without `dim` the flattened tensor (torch's `repeat_interleave`).
    pub fn repeat_interleave(&self, repeats: &[i64], dim: Option<i64>) -> Result<Tensor> {
        let (x, d) = match dim {
            Some(d) => (self.clone(), wrap_dim(d, self.dim().max(1))?),
            None => (self.reshape(&[self.numel()])?, 0),
        };
        let x = if x.dim() == 0 { x.reshape(&[1])? } else { x };
        let n = x.shape()[d];
        if repeats.len() != 1 && repeats.len() != n {
            return Err(Error::runtime(format!(
                "repeats must have the same size as input along dim, but got repeats.size(0) = {} and input.size({d}) = {n}",
                repeats.len()
            )));
        }
        let idx = Tensor::repeat_index(repeats, n)?;
        x.index_select(d as i64, &idx)
    }

    /// `[0, .., 0, 1, .., 1, ...]` with `i` repeated `repeats[i]` times (one count for all `n`
    /// when `repeats` has one element): `repeat_interleave(repeats)` of an int64 tensor.
    pub fn repeat_index(repeats: &[i64], n: usize) -> Result<Tensor> {
        if repeats.iter().any(|&r| r < 0) {
            return Err(Error::runtime("repeats can not be negative"));
        }
        let count = |i: usize| repeats[if repeats.len() == 1 { 0 } else { i }] as usize;
        let total: usize = (0..n).map(count).sum();
        let mut v = crate::tensor::creation::try_vec::<i64>(total)?;
        for i in 0..n {
            v.extend(std::iter::repeat_n(i as i64, count(i)));
        }
        Tensor::from_vec(v, &[total])
    }

    /// [`Tensor::repeat_index`] of a 1-D int64 tensor of counts inside vmap, each sample's
    /// result of `output_size` elements (without it, torch's error: the size would differ from
    /// sample to sample).
    pub fn repeat_index_batched(repeats: &Tensor, output_size: Option<usize>) -> Result<Tensor> {
        let per = crate::tensor::batched::unary_all(repeats, |p, nb| {
            let Some(size) = output_size else {
                return Err(Error::runtime("repeat_interleave: vmapping over the `repeats` tensor requires the `output_size` argument to be specified, because the size of the output equals the sum of `repeats`, which is data-dependent and may differ between batch elements. Please pass output_size, e.g. output_size=int(repeats.sum(-1).max())."));
            };
            let lead = p.shape()[..nb].to_vec();
            let n = p.shape()[nb..].iter().product::<usize>();
            let counts = p.to_vec::<i64>()?;
            let mut rows = Vec::with_capacity(counts.len().checked_div(n).unwrap_or(0));
            for row in counts.chunks(n.max(1)).take(lead.iter().product()) {
                let r = Tensor::repeat_index(row, n)?;
                if r.numel() != size {
                    return Err(Error::runtime(
                        "allocated size does not match required size",
                    ));
                }
                rows.push(r);
            }
            Tensor::stack(&rows, 0)?.reshape(&[lead, vec![size]].concat())
        });
        per.unwrap_or_else(|| {
            let counts = repeats.to_vec::<i64>()?;
            Tensor::repeat_index(&counts, counts.len())
        })
    }

    /// `self` with `src`'s values along `dim` at `index` reduced into it (torch's
    /// `scatter_reduce`): with `include_self` the old value takes part, otherwise a position
    /// that receives values forgets it. The gradient of `prod` divides by the inputs (an input
    /// of exactly zero gives a non-finite gradient, where torch's special-cases zeros); `amax`
    /// and `amin` share the gradient evenly among the tied elements, as torch.
    pub fn scatter_reduce(
        &self,
        dim: i64,
        index: &Tensor,
        src: &Tensor,
        reduce: ScatterReduce,
        include_self: bool,
    ) -> Result<Tensor> {
        if src.dtype() != self.dtype() {
            return Err(Error::runtime(
                "scatter(): Expected self.dtype to be equal to src.dtype",
            ));
        }
        let d = wrap_dim(dim, self.dim().max(1))?;
        // Inside vmap: the samples are one more leading dim of all three (the index only moves
        // values along `dim`, so each sample's stay its own).
        let operands = [self, index, src];
        let batched = if operands
            .iter()
            .all(|t| t.dim() == self.dim() && t.dim() > 0)
        {
            crate::ops::batching::lead_batch(&operands, |p| {
                p[0].scatter_reduce(d as i64 + 1, &p[1], &p[2], reduce, include_self)
            })
        } else {
            crate::ops::batching::per_sample_op1(&operands, |p| {
                p[0].scatter_reduce(dim, &p[1], &p[2], reduce, include_self)
            })
        };
        if let Some(r) = batched {
            return r;
        }
        index_values(index, "scatter_reduce")?;
        if index.dim() != src.dim() && index.numel() > 0 && src.dim() > 0 {
            return Err(Error::runtime(
                "Index tensor must have the same number of dimensions as src tensor",
            ));
        }
        let pos = self.gather_positions(d, index, "scatter_reduce")?;
        // The positions in `src` of the elements that `index` covers.
        let sst = rm_strides(if src.dim() == 0 { &[1] } else { src.shape() });
        let ishape: Vec<usize> = if index.dim() == 0 {
            vec![1]
        } else {
            index.shape().to_vec()
        };
        let src_pos = positions(&ishape, |c| Ok(flat(c, &sst)))?;
        let k = pos.len();
        let src_pos = Arc::new(src_pos);
        let (out, touched, counts) = {
            let _g = GradModeGuard::new(false);
            let sv = rowmajor(&src.detach())?
                .take_flat(&src_pos, &[k])?
                .to_vec::<f64>()
                .or_else(|_| {
                    rowmajor(&src.detach())?
                        .take_flat(&src_pos, &[k])?
                        .to_dtype(DType::Float64)?
                        .to_vec::<f64>()
                })?;
            let mut acc = self.detach().to_dtype(DType::Float64)?.to_vec::<f64>()?;
            let mut count = vec![if include_self { 1.0 } else { 0.0 }; acc.len()];
            let mut hit = vec![false; acc.len()];
            for (j, &p) in pos.iter().enumerate() {
                let v = sv[j];
                if !include_self && !hit[p] {
                    acc[p] = v;
                } else {
                    acc[p] = match reduce {
                        ScatterReduce::Sum | ScatterReduce::Mean => acc[p] + v,
                        ScatterReduce::Prod => acc[p] * v,
                        ScatterReduce::Amax => {
                            if v.is_nan() || v > acc[p] {
                                v
                            } else {
                                acc[p]
                            }
                        }
                        ScatterReduce::Amin => {
                            if v.is_nan() || v < acc[p] {
                                v
                            } else {
                                acc[p]
                            }
                        }
                    };
                }
                hit[p] = true;
                count[p] += 1.0;
            }
            if reduce == ScatterReduce::Mean {
                let integral = !self.dtype().is_float();
                for (a, (&c, &h)) in acc.iter_mut().zip(count.iter().zip(&hit)) {
                    if h {
                        *a /= c;
                        if integral {
                            *a = a.floor();
                        }
                    }
                }
            }
            let count: Vec<f64> = count
                .iter()
                .zip(&hit)
                .map(|(&c, &h)| if h { c } else { 1.0 })
                .collect();
            let out = Tensor::from_vec(acc, self.shape())?.to_dtype(self.dtype())?;
            (out, mask_at(self.shape(), &pos)?, count)
        };
        if needs_grad(&[self, src]) {
            let idx = Arc::new(pos);
            let shape: Dims = self.shape().into();
            let src_dims: Dims = src.shape().into();
            let counts = Tensor::from_vec(counts, self.shape())?.to_dtype(self.dtype())?;
            let dropped = if include_self {
                Tensor::zeros(self.shape(), DType::Bool)
            } else {
                touched.clone()
            };
            let out_c = out.detach();
            record(
                "ScatterReduceBackward0",
                &[self, src],
                &[&out],
                &[self, src],
                true,
                move |g, s| {
                    let (x, y) = (&s[0], &s[1]);
                    let g = rowmajor(&g[0])?;
                    let y_part = rowmajor(y)?.take_flat(&src_pos, &[k])?;
                    let to_src = |part: Tensor| part.scatter_add_flat(&src_dims, &src_pos);
                    let (gx, gy) = match reduce {
                        ScatterReduce::Sum => (
                            g.masked_fill(&dropped, 0.0)?,
                            to_src(g.take_flat(&idx, &[k])?)?,
                        ),
                        ScatterReduce::Mean => {
                            let gm = g.div(&counts)?;
                            (
                                gm.masked_fill(&dropped, 0.0)?,
                                to_src(gm.take_flat(&idx, &[k])?)?,
                            )
                        }
                        ScatterReduce::Amax | ScatterReduce::Amin => {
                            let at = out_c.take_flat(&idx, &[k])?;
                            let hit_x = x
                                .detach()
                                .eq_t(&out_c)?
                                .logical_and(&dropped.logical_not()?)?;
                            let hit_y = y_part.detach().eq_t(&at)?;
                            let num = hit_x
                                .to_dtype(g.dtype())?
                                .add(&hit_y.to_dtype(g.dtype())?.scatter_add_flat(&shape, &idx)?)?;
                            let num = num.clamp_min(&Tensor::wrapped_scalar(1.0, g.dtype()))?;
                            let share = g.div(&num)?;
                            let zero = Tensor::wrapped_scalar(0.0, g.dtype());
                            (
                                Tensor::where_cond(&hit_x, &share, &zero)?,
                                to_src(Tensor::where_cond(
                                    &hit_y,
                                    &share.take_flat(&idx, &[k])?,
                                    &zero,
                                )?)?,
                            )
                        }
                        ScatterReduce::Prod => {
                            // The result again, recorded, so its dependence on both inputs
                            // reaches a second derivative.
                            let res =
                                x.scatter_reduce_positions(y, &idx, &src_pos, include_self)?;
                            let gr = g.mul(&res)?;
                            let gx = Tensor::where_cond(
                                &touched,
                                &gr.div(x)?.masked_fill(&dropped, 0.0)?,
                                &g,
                            )?;
                            let gy = to_src(gr.take_flat(&idx, &[k])?.div(&y_part)?)?;
                            (gx, gy)
                        }
                    };
                    Ok(vec![Some(gx), Some(gy)])
                },
            )?;
        }
        Ok(out)
    }

    /// The product `scatter_reduce` of `src`'s elements at `src_pos` into `self` at `pos`,
    /// written with differentiable ops (the `prod` backward's recomputation).
    fn scatter_reduce_positions(
        &self,
        src: &Tensor,
        pos: &Arc<Vec<usize>>,
        src_pos: &Arc<Vec<usize>>,
        include_self: bool,
    ) -> Result<Tensor> {
        let k = pos.len();
        let vals = rowmajor(src)?.take_flat(src_pos, &[k])?;
        // A product of positive factors as exp(sum(log|v|)) would lose signs; instead multiply
        // the values in one at a time per round of distinct targets.
        let mut out = if include_self {
            self.clone()
        } else {
            let touched = mask_at(self.shape(), pos)?;
            self.masked_fill(&touched, 1.0)?
        };
        let mut remaining: Vec<usize> = (0..k).collect();
        while !remaining.is_empty() {
            let mut seen = vec![false; self.numel()];
            let mut this_round = Vec::new();
            let mut later = Vec::new();
            for j in remaining {
                if seen[pos[j]] {
                    later.push(j);
                } else {
                    seen[pos[j]] = true;
                    this_round.push(j);
                }
            }
            let n = this_round.len();
            let picked = vals.take_flat(&Arc::new(this_round.clone()), &[n])?;
            let targets: Vec<usize> = this_round.iter().map(|&j| pos[j]).collect();
            // Factor 1 everywhere except the targets, which get their value.
            let ones = Tensor::ones(self.shape(), self.dtype());
            let factor = ones.put_flat(&targets, &picked, false)?;
            out = out.mul(&factor)?;
            remaining = later;
        }
        Ok(out)
    }
}
