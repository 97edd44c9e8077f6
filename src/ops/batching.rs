//! Batching rules shared by the ops, and the two ops that cross a vmap boundary.
//!
//! A batched tensor (see [`crate::tensor::batched`]) is computed on through its physical
//! tensor: an op's rule takes the place of its kernel, runs the op on the physical operands
//! (batch dimension in front, logical dimensions shifted by one) without recording, and batches
//! the result again. The op then records its own node on the logical tensors as usual, so its
//! backward rule runs on batched gradients through the same rules.
//!
//! Elementwise kernels (`ops::elementwise`, `kernels::copy::cast`) and views (every view is an
//! alias, see `Tensor::alias_with_layout`) batch with no rule of their own.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::graph::node::{needs_grad, record};
use crate::tensor::batched::{move_to_front, physical_front, top_level, Level};
use crate::tensor::grad_mode::GradModeGuard;
use crate::tensor::{Dims, Tensor};

/// `f` of a batched `t`'s physical tensor (batch dimension in front), batched again at the same
/// level; `None` when `t` is not batched. `f` runs without recording and sees logical
/// dimension `d` as `d + 1`.
pub(crate) fn on_physical(
    t: &Tensor,
    f: impl FnOnce(&Tensor) -> Result<Tensor>,
) -> Option<Result<Tensor>> {
    let s = t.batch_slot()?;
    let _off = GradModeGuard::new(false);
    let p = move_to_front(&s.value, s.bdim);
    Some(f(&p).and_then(|out| Tensor::batched(out, 0, s.level.clone())))
}

/// Logical dimensions (already wrapped) as physical ones behind a leading batch dimension.
pub(crate) fn shifted(dims: &[usize]) -> Vec<i64> {
    dims.iter().map(|&d| d as i64 + 1).collect()
}

/// `value` seen one sample at a time along `bdim` at `level` (torch's `_add_batch_dim`). When
/// `value` requires grad, the batched tensor's history leads back to it, so gradients of what
/// a vmapped function computes reach `value` (`grad(vmap(f))`).
pub fn add_batch_dim(value: &Tensor, bdim: usize, level: &Arc<Level>) -> Result<Tensor> {
    let out = Tensor::batched(value.clone(), bdim, level.clone())?;
    if needs_grad(&[value]) {
        let (level, size) = (level.clone(), level.size());
        record(
            "AddBatchDimBackward0",
            &[value],
            &[&out],
            &[],
            false,
            move |g, _| Ok(vec![Some(remove_batch_dim(&g[0], &level, size, bdim)?)]),
        )?;
    }
    Ok(out)
}

/// The physical tensor of `t` at `level`, its batch dimension at `out_dim` (torch's
/// `_remove_batch_dim`); a `t` not batched at `level` is the same for every sample and is
/// expanded to `size` there. Gradients flow back into the batched `t`.
pub fn remove_batch_dim(
    t: &Tensor,
    level: &Arc<Level>,
    size: usize,
    out_dim: usize,
) -> Result<Tensor> {
    if out_dim > t.dim() {
        return Err(Error::index(format!(
            "vmap: out_dim {out_dim} is out of range for an output of {} dimensions",
            t.dim() + 1
        )));
    }
    let out = match unbatched_at(t, level, out_dim) {
        Some(out) => out,
        None => {
            let mut shape = t.shape().to_vec();
            shape.insert(out_dim, size);
            return t.unsqueeze(out_dim as i64)?.expand(&shape);
        }
    };
    if needs_grad(&[t]) {
        let level = level.clone();
        record(
            "RemoveBatchDimBackward0",
            &[t],
            &[&out],
            &[],
            false,
            move |g, _| Ok(vec![Some(add_batch_dim(&g[0], out_dim, &level)?)]),
        )?;
    }
    Ok(out)
}

/// `t` with its batch at `level` made a real dimension at `out_dim` (a fresh handle on the same
/// elements; inner levels above it stay batched), or `None` when `t` is not batched there.
fn unbatched_at(t: &Tensor, level: &Level, out_dim: usize) -> Option<Tensor> {
    let s = t.batch_slot()?;
    let front = move_to_front(&s.value, s.bdim);
    if s.level.id() == level.id() {
        let mut l = front.layout().clone();
        let (n, st) = (l.shape.remove(0), l.strides.remove(0));
        l.shape.insert(out_dim, n);
        l.strides.insert(out_dim, st);
        return Some(front.alias_with_layout(l));
    }
    if s.level.id() < level.id() {
        return None;
    }
    // An inner level on top: remove `level` for each of its samples.
    let inner = unbatched_at(&front, level, out_dim + 1)?;
    Tensor::batched(inner, 0, s.level.clone()).ok()
}

/// A gradient on its way into a tensor batched at level `keep` (0: not batched) from a node
/// whose outputs were batched up to level `seen`: summed over the batch of every level in
/// between, since the tensor was the same for all of those samples (an unbatched tensor a
/// vmapped function used). Levels opened after the node (batched cotangents,
/// `is_grads_batched`, jacrev) are kept.
pub(crate) fn sum_out_levels(g: Tensor, keep: u32, seen: u32) -> Result<Tensor> {
    let mut g = g;
    // Innermost first; levels opened after the node (above `seen`) stay, per sample.
    while let Some(level) = level_between(&g, keep, seen) {
        let size = level.size();
        g = remove_batch_dim(&g, &level, size, 0)?.sum_dims(&[0], false)?;
    }
    Ok(g)
}

/// The innermost level `g` is batched at (through nested levels) within `(keep, seen]`.
fn level_between(g: &Tensor, keep: u32, seen: u32) -> Option<Arc<Level>> {
    let s = g.batch_slot()?;
    let id = s.level.id();
    if id <= keep {
        return None;
    }
    if id <= seen {
        return Some(s.level.clone());
    }
    level_between(&s.value, keep, seen)
}

/// Sample `b` of each operand batched in front (`true`) and the others as they are: the
/// arguments of one call of a per-sample fallback.
fn sample_args(phys: &[(Tensor, bool)], b: usize) -> Result<Vec<Tensor>> {
    phys.iter()
        .map(|(p, batched)| {
            if *batched {
                p.select(0, b as i64)
            } else {
                Ok(p.clone())
            }
        })
        .collect()
}

/// The fallback rule for kernels without a batched form: `f` once per sample, on that
/// sample of each batched operand and on the others as they are, the results stacked (what
/// torch's vmap fallback does). `None` when no operand is batched. Runs without recording.
pub(crate) fn per_sample(
    ts: &[&Tensor],
    f: impl Fn(&[Tensor]) -> Result<Tensor>,
) -> Option<Result<Tensor>> {
    let level = top_level(ts)?;
    let _off = GradModeGuard::new(false);
    let phys: Vec<(Tensor, bool)> = ts.iter().map(|t| physical_front(t, &level)).collect();
    let run = || -> Result<Tensor> {
        let mut outs = Vec::with_capacity(level.size());
        for b in 0..level.size() {
            let args = sample_args(&phys, b)?;
            outs.push(f(&args)?);
        }
        Tensor::batched(Tensor::stack(&outs, 0)?, 0, level.clone())
    };
    Some(run())
}

/// `f` of the operands made physical at the innermost level among them, batched again there;
/// `None` when none is batched. Batched operands get the batch dimension in front, the others
/// are expanded over it (no copy), so `f` sees every operand with the same leading batch
/// dimension and logical dimension `d` as `d + 1` (index ops whose index is batched).
/// Runs without recording.
pub(crate) fn on_physical_all(
    ts: &[&Tensor],
    f: impl FnOnce(&[Tensor]) -> Result<Tensor>,
) -> Option<Result<Tensor>> {
    let level = top_level(ts)?;
    let _off = GradModeGuard::new(false);
    let phys: Vec<Tensor> = ts
        .iter()
        .map(|t| {
            let (p, batched) = physical_front(t, &level);
            if batched {
                return p;
            }
            let mut l = p.layout().clone();
            l.shape.insert(0, level.size());
            l.strides.insert(0, 0);
            p.alias_with_layout(l)
        })
        .collect();
    Some(f(&phys).and_then(|out| Tensor::batched(out, 0, level)))
}

/// The values of `x` at the batched index `idx` along `d` (`idx` has `x`'s shape but for `d`),
/// without `d` when `drop_dim`, recorded as `name` whose backward adds the gradient back at
/// `idx`: torch's value-selecting reductions (sort, max along a dim, ...) inside vmap, where
/// the picked positions differ from sample to sample.
pub(crate) fn picked_along(
    x: &Tensor,
    d: usize,
    idx: &Tensor,
    drop_dim: bool,
    name: &'static str,
) -> Result<Tensor> {
    let values = {
        let _g = GradModeGuard::new(false);
        let v = take_along(&x.detach(), d, idx)?;
        if drop_dim {
            v.squeeze(Some(d as i64))?
        } else {
            v
        }
    };
    if needs_grad(&[x]) {
        let (in_shape, idx): (Dims, Tensor) = (x.shape().into(), idx.clone());
        record(name, &[x], &[&values], &[], false, move |g, _| {
            let g = if drop_dim {
                g[0].unsqueeze(d as i64)?
            } else {
                g[0].clone()
            };
            Ok(vec![Some(put_along(&g, d, &idx, &in_shape)?)])
        })?;
    }
    Ok(values)
}

/// `src.gather(d, idx)` for a batched `idx` (picks that differ from sample to sample): along
/// `d` behind the batch dimension at each level. Differentiable to any order with
/// [`put_along`].
pub(crate) fn take_along(src: &Tensor, d: usize, idx: &Tensor) -> Result<Tensor> {
    let out = match on_physical_all(&[src, idx], |p| take_along(&p[0], d + 1, &p[1])) {
        Some(r) => r?,
        None => {
            let _g = GradModeGuard::new(false);
            src.detach().gather(d as i64, idx)?
        }
    };
    if needs_grad(&[src]) {
        let (shape, idx): (Dims, Tensor) = (src.shape().into(), idx.clone());
        record(
            "GatherBackward0",
            &[src],
            &[&out],
            &[],
            false,
            move |g, _| Ok(vec![Some(put_along(&g[0], d, &idx, &shape)?)]),
        )?;
    }
    Ok(out)
}

/// Zeros of `shape` with `g` added along `d` at `idx` (`scatter_add`, the adjoint of
/// [`take_along`]), for a batched `idx`.
pub(crate) fn put_along(g: &Tensor, d: usize, idx: &Tensor, shape: &[usize]) -> Result<Tensor> {
    let out = match on_physical_all(&[g, idx], |p| {
        let mut s = vec![p[0].shape()[0]];
        s.extend_from_slice(shape);
        put_along(&p[0], d + 1, &p[1], &s)
    }) {
        Some(r) => r?,
        None => {
            let _g = GradModeGuard::new(false);
            Tensor::try_full(shape, 0.0, g.dtype())?.scatter_add(d as i64, idx, &g.detach())?
        }
    };
    if needs_grad(&[g]) {
        let idx = idx.clone();
        record(
            "ScatterAddBackward0",
            &[g],
            &[&out],
            &[],
            false,
            move |gg, _| Ok(vec![Some(take_along(&gg[0], d, &idx)?)]),
        )?;
    }
    Ok(out)
}

/// The fallback for an op whose backward rule, not only its kernel, depends on each sample's
/// values (indices that decide where gradients go): the whole op, recorded as usual, once per
/// sample of the innermost level among `ts`, on that sample of each operand batched there and
/// on the others as they are; its outputs stacked and batched again. The samples are taken
/// from the operands (and the results batched) through differentiable nodes, so gradients
/// reach the logical operands, to any order. `None` when no operand is batched.
pub(crate) fn per_sample_op(
    ts: &[&Tensor],
    f: impl Fn(&[Tensor]) -> Result<Vec<Tensor>>,
) -> Option<Result<Vec<Tensor>>> {
    let level = top_level(ts)?;
    let size = level.size();
    let run = || -> Result<Vec<Tensor>> {
        let phys = ts
            .iter()
            .map(|t| match t.batch_slot() {
                Some(s) if s.level.id() == level.id() => {
                    Ok((remove_batch_dim(t, &level, size, 0)?, true))
                }
                _ => Ok(((*t).clone(), false)),
            })
            .collect::<Result<Vec<_>>>()?;
        let mut per: Vec<Vec<Tensor>> = Vec::new();
        for b in 0..size {
            let args = sample_args(&phys, b)?;
            for (k, out) in f(&args)?.into_iter().enumerate() {
                if per.len() <= k {
                    per.push(Vec::with_capacity(size));
                }
                per[k].push(out);
            }
        }
        per.iter()
            .map(|outs| add_batch_dim(&Tensor::stack(outs, 0)?, 0, &level))
            .collect()
    };
    Some(run())
}

/// [`per_sample_op`] for an op with one output.
pub(crate) fn per_sample_op1(
    ts: &[&Tensor],
    f: impl Fn(&[Tensor]) -> Result<Tensor>,
) -> Option<Result<Tensor>> {
    let outs = per_sample_op(ts, |p| Ok(vec![f(p)?]))?;
    Some(outs.and_then(|o| {
        o.into_iter()
            .next()
            .ok_or_else(|| Error::runtime("vmap: the op gave no output"))
    }))
}

/// The rule for an op whose dim 0 runs over independent items (images, planes): the samples
/// of the innermost level among `ts` folded into it, `f` (the op, recorded as usual) run once
/// on the folded operands, and its result's dim 0 unfolded into the batch again. Operands not
/// batched there are expanded over the samples. Every operand has at least one dim.
/// Differentiable to any order through the nodes that cross the level. `None` when no
/// operand is batched.
pub(crate) fn fold_front(
    ts: &[&Tensor],
    f: impl FnOnce(&[Tensor]) -> Result<Tensor>,
) -> Option<Result<Tensor>> {
    let level = top_level(ts)?;
    let size = level.size();
    let run = || -> Result<Tensor> {
        let folded = ts
            .iter()
            .map(|t| {
                let p = batch_to_front(t, &level)?;
                let mut shape = p.shape()[1..].to_vec();
                shape[0] *= size;
                p.reshape(&shape)
            })
            .collect::<Result<Vec<_>>>()?;
        let out = f(&folded)?;
        let mut shape = vec![size, out.shape()[0] / size.max(1)];
        shape.extend_from_slice(&out.shape()[1..]);
        add_batch_dim(&out.reshape(&shape)?, 0, &level)
    };
    Some(run())
}

/// `t` with the samples of `level` as a real leading dim, through the nodes that carry
/// gradients across the level (the inverse is [`add_batch_dim`] at 0); a `t` not batched there
/// is the same for every sample and is expanded over them (no copy).
pub(crate) fn batch_to_front(t: &Tensor, level: &Arc<Level>) -> Result<Tensor> {
    let size = level.size();
    match t.batch_slot() {
        Some(s) if s.level.id() == level.id() => remove_batch_dim(t, level, size, 0),
        _ => {
            let mut shape = t.shape().to_vec();
            shape.insert(0, size);
            t.unsqueeze(0)?.expand(&shape)
        }
    }
}

/// The rule for an op that takes any number of leading batch dims (right-aligned, broadcast):
/// the samples of the innermost level among `ts` become one more leading dim of each operand
/// (size-1 dims pad the lower-rank operands behind it, so the samples pair up), `f` (the op,
/// recorded as usual) runs once, and its result's leading dim is batched again.
/// Differentiable to any order through the nodes that cross the level. `None` when no operand
/// is batched.
pub(crate) fn lead_batch(
    ts: &[&Tensor],
    f: impl FnOnce(&[Tensor]) -> Result<Tensor>,
) -> Option<Result<Tensor>> {
    let level = top_level(ts)?;
    let rank = ts.iter().map(|t| t.dim()).max().unwrap_or(0);
    let run = || -> Result<Tensor> {
        let lifted = ts
            .iter()
            .map(|t| {
                let mut p = batch_to_front(t, &level)?;
                for _ in t.dim()..rank {
                    p = p.unsqueeze(1)?;
                }
                Ok(p)
            })
            .collect::<Result<Vec<_>>>()?;
        add_batch_dim(&f(&lifted)?, 0, &level)
    };
    Some(run())
}
