//! Lookup tables (torch's `nn.functional.sparse`): `embedding`, the rows of a weight matrix at
//! integer indices, whose gradient adds each position's gradient into its row.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::graph::node::{needs_grad, record};
use crate::ops::nn::conv::{GatherNames, PAD_INDEX};
use crate::ops::nn::softmax::RowFloat;
use crate::parallel::SendPtr;
use crate::tensor::shape::fmt_shape;
use crate::tensor::{DType, Element, Tensor};

/// torch's node names: the lookup and, for double backward, its adjoint.
const EMBEDDING: GatherNames = GatherNames {
    gather: "EmbeddingBackward0",
    scatter: "EmbeddingBackwardBackward0",
};

/// torch's checks of an embedding table and its int64 indices, named for `op`.
fn check_table(op: &str, weight: &Tensor, indices: &Tensor) -> Result<()> {
    if indices.dtype() != DType::Int64 {
        return Err(Error::runtime(format!(
            "Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, Int; but got {} instead (while checking arguments for {op})",
            crate::tensor::scalar_type_name(indices.dtype())
        )));
    }
    if weight.dim() != 2 {
        return Err(Error::runtime(format!(
            "'weight' must be 2-D, got {}",
            fmt_shape(weight.shape())
        )));
    }
    Ok(())
}

/// Rows of the 2-D float `weight` at the int64 `indices`: shape `indices.shape + [D]`.
///
/// The row at `padding_idx` (already wrapped into `0..num_embeddings`) gets no gradient;
/// `scale_grad_by_freq` divides each position's gradient by how often its index occurs in
/// `indices`. The backward adds gradients into a dense `(num_embeddings, D)` tensor and is
/// itself differentiable (its adjoint is the same lookup).
pub fn embedding(
    weight: &Tensor,
    indices: &Tensor,
    padding_idx: Option<usize>,
    scale_grad_by_freq: bool,
) -> Result<Tensor> {
    check_table("embedding", weight, indices)?;
    if indices.is_batched() && !weight.is_batched() && !scale_grad_by_freq {
        // Inside vmap with a shared table: the samples are one more leading dim of the
        // indices (the frequencies of scale_grad_by_freq are per sample, so not there).
        let batched = crate::ops::batching::lead_batch(&[indices], |p| {
            embedding(weight, &p[0], padding_idx, scale_grad_by_freq)
        });
        if let Some(r) = batched {
            return r;
        }
    }
    if indices.is_batched() {
        // Inside vmap with indices that differ from sample to sample (a batched weight alone
        // goes through the batched gather below).
        let per = crate::ops::batching::per_sample_op1(&[weight, indices], |p| {
            embedding(&p[0], &p[1], padding_idx, scale_grad_by_freq)
        });
        if let Some(r) = per {
            return r;
        }
    }
    let (num, d) = (weight.shape()[0], weight.shape()[1]);
    let idx: Vec<usize> = indices
        .to_vec::<i64>()?
        .into_iter()
        .map(|i| {
            usize::try_from(i)
                .ok()
                .filter(|&u| u < num)
                .ok_or_else(|| Error::index("index out of range in self"))
        })
        .collect::<Result<_>>()?;
    if !weight.is_batched() && matches!(weight.dtype(), DType::Float32 | DType::Float64) {
        return embedding_rows(weight, indices, idx, padding_idx, scale_grad_by_freq);
    }
    let positions = |skip: Option<usize>| -> Result<Vec<usize>> {
        let mut pos = crate::tensor::creation::try_vec(idx.len().saturating_mul(d))?;
        for &i in &idx {
            if Some(i) == skip {
                pos.extend(std::iter::repeat_n(PAD_INDEX, d));
            } else {
                pos.extend(i * d..(i + 1) * d);
            }
        }
        Ok(pos)
    };
    let mut shape = indices.shape().to_vec();
    shape.push(d);
    let out = weight
        .detach()
        .gather_padded(&Arc::new(positions(None)?), &shape, EMBEDDING)?;
    if needs_grad(&[weight]) {
        let back = Arc::new(positions(padding_idx)?);
        let scale = if scale_grad_by_freq {
            let mut counts = vec![0u32; num];
            idx.iter().for_each(|&i| counts[i] += 1);
            let per: Vec<f64> = idx.iter().map(|&i| 1.0 / f64::from(counts[i])).collect();
            let mut s_shape = indices.shape().to_vec();
            s_shape.push(1);
            Some(crate::kernels::copy::cast(
                &Tensor::from_vec(per, &s_shape)?,
                out.dtype(),
            )?)
        } else {
            None
        };
        let wshape = [num, d];
        record(
            EMBEDDING.gather,
            &[weight],
            &[&out],
            &[],
            false,
            move |g, _| {
                let g = match &scale {
                    Some(s) => g[0].mul(s)?,
                    None => g[0].clone(),
                };
                Ok(vec![Some(g.scatter_add_padded(&wshape, &back, EMBEDDING)?)])
            },
        )?;
    }
    Ok(out)
}

/// [`embedding`] of a float32/float64 table by whole rows: the lookup copies one row per
/// index and the backward adds one row per index, where the element-wise gather/scatter (kept
/// for half types and vmap) builds and walks an index per element (`4096 x 20` lookups of
/// 128-wide rows: 29 ms forward, against a 42 MB copy).
fn embedding_rows(
    weight: &Tensor,
    indices: &Tensor,
    idx: Vec<usize>,
    padding_idx: Option<usize>,
    scale_grad_by_freq: bool,
) -> Result<Tensor> {
    let (num, d) = (weight.shape()[0], weight.shape()[1]);
    let mut shape = indices.shape().to_vec();
    shape.push(d);
    let scale = if scale_grad_by_freq && needs_grad(&[weight]) {
        let mut counts = vec![0u32; num];
        idx.iter().for_each(|&i| counts[i] += 1);
        Some(Arc::new(
            idx.iter()
                .map(|&i| 1.0 / f64::from(counts[i]))
                .collect::<Vec<f64>>(),
        ))
    } else {
        None
    };
    let rows = Rows {
        idx: Arc::new(idx),
        num,
        d,
        skip: padding_idx,
        scale,
    };
    rows.gather(weight, &shape, false)
}

/// One embedding lookup's rows: the index of each position, the table's size, the row that
/// gets no gradient and the per-position gradient scale (`scale_grad_by_freq`).
#[derive(Clone)]
struct Rows {
    idx: Arc<Vec<usize>>,
    num: usize,
    d: usize,
    skip: Option<usize>,
    scale: Option<Arc<Vec<f64>>>,
}

impl Rows {
    /// The rows of `w` at the indices, shaped `shape`; with `masked` (the adjoint of
    /// [`Rows::scatter`]), positions that scatter skips or scales read as it does. Recorded
    /// with the scatter as backward.
    fn gather(&self, w: &Tensor, shape: &[usize], masked: bool) -> Result<Tensor> {
        let out = match w.dtype() {
            DType::Float32 => self.gather_as::<f32>(w, shape, masked)?,
            _ => self.gather_as::<f64>(w, shape, masked)?,
        };
        if needs_grad(&[w]) {
            let rows = self.clone();
            record(EMBEDDING.gather, &[w], &[&out], &[], false, move |g, _| {
                Ok(vec![Some(rows.scatter(&g[0])?)])
            })?;
        }
        Ok(out)
    }

    fn gather_as<T: Element + num_traits::Float>(
        &self,
        w: &Tensor,
        shape: &[usize],
        masked: bool,
    ) -> Result<Tensor> {
        let (d, idx) = (self.d, &self.idx);
        let w = w.contiguous()?;
        let v = w.with_contiguous_slice::<T, _>(|ws| {
            fill_rows::<T>(idx.len(), d, |p, out| {
                let i = idx[p];
                let k = match (&self.scale, masked) {
                    (_, true) if self.skip == Some(i) => T::zero(),
                    (Some(s), true) => T::from_f64(s[p]),
                    _ => T::one(),
                };
                for (o, &v) in out.iter_mut().zip(&ws[i * d..(i + 1) * d]) {
                    o.write(v * k);
                }
            })
        })??;
        Tensor::from_vec(v, shape)
    }

    /// The `(num, d)` sum of `g`'s rows (one per position) at the indices, the skipped row
    /// left zero and rows scaled; recorded with the masked gather as backward.
    fn scatter(&self, g: &Tensor) -> Result<Tensor> {
        let out = match g.dtype() {
            DType::Float32 => self.scatter_as::<f32>(g)?,
            _ => self.scatter_as::<f64>(g)?,
        };
        if needs_grad(&[g]) {
            let (rows, shape) = (self.clone(), g.shape().to_vec());
            record(
                EMBEDDING.scatter,
                &[g],
                &[&out],
                &[],
                false,
                move |gg, _| Ok(vec![Some(rows.gather(&gg[0], &shape, true)?)]),
            )?;
        }
        Ok(out)
    }

    fn scatter_as<T: Element + num_traits::Float>(&self, g: &Tensor) -> Result<Tensor> {
        let (d, num, idx) = (self.d, self.num, &self.idx);
        let g = g.contiguous()?;
        let mut out = crate::tensor::creation::try_filled_vec(num * d, T::zero())?;
        let base = SendPtr(out.as_mut_ptr());
        g.with_contiguous_slice::<T, _>(|gs| {
            // Rows split into ranges, each task adding, in position order, the positions that
            // land in its range: no two tasks write one row, and every row's sum has the same
            // order at any thread count.
            let tasks = if idx.len() * d >= crate::ops::elementwise::PAR_MIN_ELEMENTS {
                4 * (crate::parallel::helpers() + 1)
            } else {
                1
            };
            let helpers = if tasks > 1 {
                crate::parallel::helpers()
            } else {
                0
            };
            crate::parallel::share_work(helpers, tasks, &|t| {
                let (lo, hi) = (t * num / tasks, (t + 1) * num / tasks);
                for (p, &i) in idx.iter().enumerate() {
                    if i < lo || i >= hi || self.skip == Some(i) {
                        continue;
                    }
                    let k = self.scale.as_ref().map_or(T::one(), |s| T::from_f64(s[p]));
                    // SAFETY: row i lies in this task's range, which no other task writes.
                    let dst = unsafe { std::slice::from_raw_parts_mut(base.get().add(i * d), d) };
                    add_row(dst, &gs[p * d..(p + 1) * d], k);
                }
            });
        })?;
        Tensor::from_vec(out, &[num, d])
    }
}

/// `dst += k · src` (vectorised).
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx2+avx+fma",
    "x86_64+avx2+avx+fma"
))]
fn add_row<T: num_traits::Float>(dst: &mut [T], src: &[T], k: T) {
    for (o, &v) in dst.iter_mut().zip(src) {
        *o = *o + k * v;
    }
}

/// `n` rows of `d`, row `p` written whole by `fill(p, row)`, rows shared among threads when
/// large.
fn fill_rows<T: Element>(
    n: usize,
    d: usize,
    fill: impl Fn(usize, &mut [std::mem::MaybeUninit<T>]) + Sync,
) -> Result<Vec<T>> {
    let mut out = crate::tensor::creation::try_vec::<T>(n * d)?;
    let base = SendPtr(out.spare_capacity_mut().as_mut_ptr());
    let per_task = (16384 / d.max(1)).max(1);
    let tasks = n.div_ceil(per_task);
    let helpers = if n * d >= crate::ops::elementwise::PAR_MIN_ELEMENTS {
        crate::parallel::helpers()
    } else {
        0
    };
    crate::parallel::share_work(helpers, tasks, &|t| {
        for p in t * per_task..((t + 1) * per_task).min(n) {
            // SAFETY: row p of the spare capacity belongs to this task alone.
            let row = unsafe { std::slice::from_raw_parts_mut(base.get().add(p * d), d) };
            fill(p, row);
        }
    });
    // SAFETY: `fill` wrote every element of every row (its contract).
    unsafe { out.set_len(n * d) };
    Ok(out)
}

/// One-hot encoding of the int64 `indices`: int64, shape `indices.shape + [num_classes]`;
/// `num_classes = -1` takes `max + 1`.
///
/// Errors as torch's: a non-int64 input, negative classes, classes not below `num_classes`, an
/// empty input without `num_classes`.
pub fn one_hot(indices: &Tensor, num_classes: i64) -> Result<Tensor> {
    if indices.dtype() != DType::Int64 {
        return Err(Error::runtime(
            "one_hot is only applicable to index tensor of type LongTensor.",
        ));
    }
    if indices.is_batched() {
        if num_classes <= 0 {
            return Err(Error::runtime(
                "When vmap-ing torch.nn.functional.one_hot, please provide an explicit positive num_classes argument.",
            ));
        }
        // Inside vmap: the samples are more leading dims of the indices.
        if let Some(r) = crate::tensor::batched::unary_all(indices, |p, _| one_hot(p, num_classes))
        {
            return r;
        }
    }
    let idx = indices.to_vec::<i64>()?;
    if idx.is_empty() && num_classes <= 0 {
        return Err(Error::runtime(
            "Can not infer total number of classes from empty tensor.",
        ));
    }
    let (lo, hi) = idx
        .iter()
        .fold((i64::MAX, i64::MIN), |(a, b), &v| (a.min(v), b.max(v)));
    let classes = if num_classes == -1 {
        hi + 1
    } else {
        num_classes
    };
    if !idx.is_empty() && lo < 0 {
        return Err(Error::runtime("Class values must be non-negative."));
    }
    if !idx.is_empty() && hi >= classes {
        return Err(Error::runtime(
            "Class values must be smaller than num_classes.",
        ));
    }
    let classes = usize::try_from(classes)
        .map_err(|_| Error::runtime("Class values must be smaller than num_classes."))?;
    let mut out = crate::tensor::creation::try_filled_vec(idx.len().saturating_mul(classes), 0i64)?;
    for (row, &i) in idx.iter().enumerate() {
        out[row * classes + i as usize] = 1;
    }
    let mut shape = indices.shape().to_vec();
    shape.push(classes);
    Tensor::from_vec(out, &shape)
}

/// How `embedding_bag` reduces the rows of a bag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BagMode {
    /// Σ of the rows (times `per_sample_weights` when given).
    Sum,
    /// Their mean (the padding rows not counted).
    Mean,
    /// The elementwise maximum; the gradient goes to the row that gave each maximum.
    Max,
}

/// The validated bags: weight row per position (`None`: padding), bag of each position, and
/// each bag's non-padding count.
struct Bags {
    rows: Vec<Option<usize>>,
    bag_of: Vec<usize>,
    count: Vec<usize>,
}

fn bags(
    indices: &Tensor,
    offsets: &Tensor,
    num: usize,
    include_last_offset: bool,
    padding_idx: Option<usize>,
) -> Result<Bags> {
    for t in [indices, offsets] {
        if t.dtype() != DType::Int64 {
            return Err(Error::runtime(format!(
                "Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, Int; but got {} instead (while checking arguments for embedding_bag)",
                crate::tensor::scalar_type_name(t.dtype())
            )));
        }
    }
    let (idx, offs) = (indices.to_vec::<i64>()?, offsets.to_vec::<i64>()?);
    let n = idx.len() as i64;
    let out_of_range = || {
        Error::runtime("Expected i < index_size to be true, but got false.  (Could this error message be improved?  If so, please report an enhancement request to PyTorch.)")
    };
    if let Some(&first) = offs.first() {
        if first != 0 {
            return Err(Error::runtime(format!(
                "offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start from position 0. However, got {first}"
            )));
        }
    }
    if let Some(&last) = offs.last() {
        if last > n {
            return Err(Error::runtime(format!(
                "offsets[-1] can not be greater than input's length {n} but got offsets[-1] of {last}"
            )));
        }
    }
    if offs.windows(2).any(|w| w[1] < w[0]) {
        return Err(out_of_range());
    }
    let nb = if include_last_offset {
        offs.len().saturating_sub(1)
    } else {
        offs.len()
    };
    let end = |b: usize| -> usize {
        if b + 1 < offs.len() {
            offs[b + 1] as usize
        } else {
            idx.len()
        }
    };
    let mut rows = Vec::with_capacity(idx.len());
    let mut bag_of = Vec::with_capacity(idx.len());
    let mut count = vec![0usize; nb];
    for (b, c) in count.iter_mut().enumerate() {
        for &i in &idx[offs[b] as usize..end(b)] {
            let r = usize::try_from(i)
                .ok()
                .filter(|&r| r < num)
                .ok_or_else(out_of_range)?;
            let r = (Some(r) != padding_idx).then_some(r);
            *c += usize::from(r.is_some());
            rows.push(r);
            bag_of.push(b);
        }
    }
    // Positions after the last bag (include_last_offset with offsets[-1] < n) belong to none.
    for &i in &idx[rows.len()..] {
        usize::try_from(i)
            .ok()
            .filter(|&r| r < num)
            .ok_or_else(out_of_range)?;
    }
    Ok(Bags {
        rows,
        bag_of,
        count,
    })
}

/// torch's `embedding_bag` on 1-D int64 `indices` split into bags at `offsets` (2-D input is
/// reshaped by the caller): one `(bags, D)` row per bag, the sum, mean or max of its rows of
/// `weight`. Rows at `padding_idx` (already wrapped) are skipped; empty bags give zeros.
/// `per_sample_weights` (mode Sum only, one per index) scale the rows and get a gradient;
/// `scale_grad_by_freq` divides each row's gradient by its count in `indices`. Max mode keeps
/// its argmax in the node. Bags run in parallel; the backward is deterministic.
///
/// Errors as torch's: non-int64 indices or offsets, `offsets[0] != 0`, offsets past the end,
/// indices out of range.
#[allow(clippy::too_many_arguments)]
pub fn embedding_bag(
    weight: &Tensor,
    indices: &Tensor,
    offsets: &Tensor,
    mode: BagMode,
    per_sample_weights: Option<&Tensor>,
    include_last_offset: bool,
    padding_idx: Option<usize>,
    scale_grad_by_freq: bool,
) -> Result<Tensor> {
    if let Some(r) = Tensor::lift_half([weight], [per_sample_weights], |[w], [psw]| {
        embedding_bag(
            w,
            indices,
            offsets,
            mode,
            psw,
            include_last_offset,
            padding_idx,
            scale_grad_by_freq,
        )
    }) {
        return r;
    }
    if weight.dim() != 2 {
        return Err(Error::value(format!(
            "weight has to be a 2D Tensor, but got Tensor of dimension {}",
            weight.dim()
        )));
    }
    // Inside vmap: bags, their rows and their gradients differ from sample to sample.
    let mut operands = vec![weight, indices, offsets];
    operands.extend(per_sample_weights);
    let per = crate::ops::batching::per_sample_op1(&operands, |p| {
        embedding_bag(
            &p[0],
            &p[1],
            &p[2],
            mode,
            p.get(3),
            include_last_offset,
            padding_idx,
            scale_grad_by_freq,
        )
    });
    if let Some(r) = per {
        return r;
    }
    if !weight.dtype().is_float() {
        return Err(Error::not_implemented(format!(
            "\"embedding_bag_cpu\" not implemented for '{}'",
            crate::tensor::scalar_type_name(weight.dtype())
        )));
    }
    let num = weight.shape()[0];
    let b = Arc::new(bags(
        indices,
        offsets,
        num,
        include_last_offset,
        padding_idx,
    )?);
    let psw = match per_sample_weights {
        Some(p) if mode == BagMode::Sum => {
            if p.numel() != indices.numel() {
                return Err(Error::value(format!(
                    "embedding_bag: If per_sample_weights ({}) is not None, then it must have the same shape as the input ({})",
                    fmt_shape(p.shape()),
                    fmt_shape(indices.shape())
                )));
            }
            Some(crate::kernels::copy::as_dtype(p, weight.dtype())?.reshape(&[p.numel()])?)
        }
        Some(_) => {
            return Err(Error::not_implemented(
                "embedding_bag: per_sample_weights was not None. per_sample_weights is only supported for mode='sum'",
            ))
        }
        None => None,
    };
    let (out, argmax) = match weight.dtype() {
        DType::Float32 => bag_forward::<f32>(weight, &b, mode, psw.as_ref())?,
        _ => bag_forward::<f64>(weight, &b, mode, psw.as_ref())?,
    };
    let psw_in = per_sample_weights.filter(|_| mode == BagMode::Sum);
    let inputs: Vec<&Tensor> = std::iter::once(weight).chain(psw_in).collect();
    if needs_grad(&inputs) {
        let freq: Option<Arc<Vec<f64>>> = scale_grad_by_freq.then(|| {
            let mut counts = vec![0u32; num];
            b.rows.iter().flatten().for_each(|&r| counts[r] += 1);
            Arc::new(counts.into_iter().map(f64::from).collect())
        });
        let argmax = Arc::new(argmax);
        let wshape = [num, weight.shape()[1]];
        let mut saved: Vec<&Tensor> = vec![weight];
        saved.extend(psw.as_ref());
        record(
            "EmbeddingBagBackward0",
            &inputs,
            &[&out],
            &saved,
            false,
            move |g, s| {
                let (w, p) = (&s[0], s.get(1));
                let want_p = p.is_some();
                let graph = needs_grad(&[&g[0], w]) || p.is_some_and(|p| needs_grad(&[p]));
                let freq = freq.as_ref().map(|f| f.as_slice());
                let args: BagGrad<'_> = (&g[0], &wshape, &b, mode, p, &argmax, freq);
                if !graph {
                    let gw = match w.dtype() {
                        DType::Float32 => bag_backward_weight::<f32>(args)?,
                        _ => bag_backward_weight::<f64>(args)?,
                    };
                    let gp = if want_p {
                        Some(match w.dtype() {
                            DType::Float32 => bag_backward_psw::<f32>(&g[0], w, &b)?,
                            _ => bag_backward_psw::<f64>(&g[0], w, &b)?,
                        })
                    } else {
                        None
                    };
                    let mut v = vec![Some(gw)];
                    if want_p {
                        v.push(gp);
                    }
                    return Ok(v);
                }
                let gw = bag_backward_ops(args)?;
                let mut v = vec![Some(gw)];
                if p.is_some() {
                    let (pos, bag): (Vec<i64>, Vec<i64>) = b
                        .rows
                        .iter()
                        .zip(&b.bag_of)
                        .map(|(r, &bg)| (r.unwrap_or(0) as i64, bg as i64))
                        .unzip();
                    let live: Vec<f64> = b
                        .rows
                        .iter()
                        .map(|r| f64::from(u8::from(r.is_some())))
                        .collect();
                    let n = pos.len();
                    let rows = w.index_select(0, &Tensor::from_vec(pos, &[n])?)?;
                    let gs = g[0].index_select(0, &Tensor::from_vec(bag, &[n])?)?;
                    let live =
                        crate::kernels::copy::cast(&Tensor::from_vec(live, &[n])?, w.dtype())?;
                    v.push(Some(rows.mul(&gs)?.sum_dims(&[1], false)?.mul(&live)?));
                }
                Ok(v)
            },
        )?;
    }
    Ok(out)
}

/// The per-position scale of the gradient to the weight (Sum: the sample weight; Mean: one
/// over the bag's count), times one over the row's frequency.
fn position_scale(
    b: &Bags,
    mode: BagMode,
    psw: Option<&[f64]>,
    freq: Option<&[f64]>,
    i: usize,
) -> f64 {
    let mut s = match (mode, psw) {
        (BagMode::Mean, _) => 1.0 / b.count[b.bag_of[i]].max(1) as f64,
        (_, Some(p)) => p[i],
        _ => 1.0,
    };
    if let (Some(f), Some(r)) = (freq, b.rows[i]) {
        s /= f[r];
    }
    s
}

fn bag_forward<T: RowFloat>(
    weight: &Tensor,
    b: &Bags,
    mode: BagMode,
    psw: Option<&Tensor>,
) -> Result<(Tensor, Vec<i64>)> {
    let (nb, d) = (b.count.len(), weight.shape()[1]);
    let pv: Option<Vec<T>> = psw.map(|p| p.to_vec::<T>()).transpose()?;
    // Sum and mean write every element of every bag's row (zeros for an empty bag) below;
    // only max needs the zeros first.
    let mut out = crate::tensor::creation::try_vec(nb * d)?;
    if mode == BagMode::Max {
        out.resize(nb * d, T::zero());
    }
    let mut argmax = if mode == BagMode::Max {
        crate::tensor::creation::try_filled_vec(nb * d, -1i64)?
    } else {
        Vec::new()
    };
    // Each bag's first position.
    let mut start = vec![0usize; nb + 1];
    for &bg in &b.bag_of {
        start[bg + 1] += 1;
    }
    for k in 0..nb {
        start[k + 1] += start[k];
    }
    let (o, am) = (SendPtr(out.as_mut_ptr()), SendPtr(argmax.as_mut_ptr()));
    weight.with_contiguous_slice::<T, _>(|ws| {
        let per_task = (8192 / (d * (1 + b.rows.len() / nb.max(1))).max(1)).max(1);
        let helpers = if b.rows.len() * d >= crate::ops::elementwise::PAR_MIN_VMATH {
            crate::parallel::helpers()
        } else {
            0
        };
        crate::parallel::share_work(helpers, nb.div_ceil(per_task), &|t| {
            for bag in t * per_task..((t + 1) * per_task).min(nb) {
                // SAFETY: bag's output row (and argmax row) is written by this task only.
                let dst = unsafe { std::slice::from_raw_parts_mut(o.get().add(bag * d), d) };
                let span = start[bag]..start[bag + 1];
                if mode != BagMode::Max {
                    // Writes the whole row, zeros for an empty bag.
                    bag_sum(
                        dst,
                        ws,
                        &b.rows[span.clone()],
                        pv.as_ref().map(|p| &p[span.clone()]),
                    );
                } else {
                    let arg = unsafe { std::slice::from_raw_parts_mut(am.get().add(bag * d), d) };
                    let mut first = true;
                    for r in b.rows[span].iter().flatten() {
                        let src = &ws[r * d..(r + 1) * d];
                        for ((o, a), &v) in dst.iter_mut().zip(arg.iter_mut()).zip(src) {
                            if first || v > *o || v.is_nan() {
                                *o = v;
                                *a = *r as i64;
                            }
                        }
                        first = false;
                    }
                }
                if mode == BagMode::Mean && b.count[bag] > 0 {
                    let inv = T::of(1.0 / b.count[bag] as f64);
                    dst.iter_mut().for_each(|o| *o = *o * inv);
                }
            }
        });
    })?;
    // SAFETY: every bag's row was written above (or zero-filled for max).
    unsafe { out.set_len(nb * d) };
    Ok((Tensor::from_vec(out, &[nb, d])?, argmax))
}

/// `dst = Σ s_i · weight[row_i]` over one bag's positions (padding skipped; `s_i` = 1 without
/// sample weights), summed in position order. The sums stay in registers over blocks of 64
/// (f32) or 32 (f64) columns instead of a load and store of `dst` per row. Compiled for AVX2
/// and AVX-512 too.
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq+avx2+avx+fma",
    "x86_64+avx2+avx+fma"
))]
fn bag_sum<T: RowFloat>(dst: &mut [T], ws: &[T], rows: &[Option<usize>], scales: Option<&[T]>) {
    if std::mem::size_of::<T>() == 4 {
        bag_sum_blocks::<T, 64>(dst, ws, rows, scales);
    } else {
        bag_sum_blocks::<T, 32>(dst, ws, rows, scales);
    }
}

/// [`bag_sum`] in blocks of `B` columns: a full block has a constant trip count, so the
/// compiler unrolls it and keeps `acc` in vector registers across the rows (a block of
/// run-time width lived on the stack: a load and a store per element and row).
#[inline(always)]
fn bag_sum_blocks<T: RowFloat, const B: usize>(
    dst: &mut [T],
    ws: &[T],
    rows: &[Option<usize>],
    scales: Option<&[T]>,
) {
    let d = dst.len();
    let mut c0 = 0;
    while c0 + B <= d {
        let mut acc = [T::zero(); B];
        let block = |r: usize| -> Option<&[T; B]> {
            ws.get(r * d + c0..r * d + c0 + B)
                .and_then(|s| <&[T; B]>::try_from(s).ok())
        };
        match scales {
            Some(sc) => {
                for (r, &s) in rows.iter().zip(sc) {
                    let Some(src) = r.and_then(block) else {
                        continue;
                    };
                    for j in 0..B {
                        acc[j] = acc[j] + s * src[j];
                    }
                }
            }
            None => {
                for r in rows {
                    let Some(src) = r.and_then(block) else {
                        continue;
                    };
                    for j in 0..B {
                        acc[j] = acc[j] + src[j];
                    }
                }
            }
        }
        dst[c0..c0 + B].copy_from_slice(&acc);
        c0 += B;
    }
    if c0 == d {
        return;
    }
    let w = d - c0;
    let mut acc = [T::zero(); B];
    for (k, r) in rows.iter().enumerate() {
        let Some(r) = *r else { continue };
        let src = &ws[r * d + c0..r * d + d];
        let s = scales.map_or(T::of(1.0), |sc| sc[k]);
        for (a, &v) in acc.iter_mut().zip(src) {
            *a = *a + s * v;
        }
    }
    dst[c0..].copy_from_slice(&acc[..w]);
}

/// What the weight gradient of a bag op reads: the output gradient, the weight's shape, the
/// bags, the mode, the per-sample weights, the max mode's argmax and the
/// `scale_grad_by_freq` counts.
type BagGrad<'a> = (
    &'a Tensor,
    &'a [usize; 2],
    &'a Bags,
    BagMode,
    Option<&'a Tensor>,
    &'a [i64],
    Option<&'a [f64]>,
);

/// The dense `(num, D)` weight gradient. Max mode splits the columns among threads; the other
/// modes sort the positions by row once (a stable counting sort) and split the table's rows:
/// each row is summed in registers over its positions in position order and written once, so
/// the result is the same at any thread count and no row is read back or zero-filled twice.
fn bag_backward_weight<T: RowFloat>(
    (g, wshape, b, mode, psw, argmax, freq): BagGrad<'_>,
) -> Result<Tensor> {
    let [num, d] = *wshape;
    let helpers = if b.rows.len() * d >= crate::ops::elementwise::PAR_MIN_VMATH {
        crate::parallel::helpers()
    } else {
        0
    };
    if mode == BagMode::Max {
        return bag_backward_max::<T>(g, wshape, b, argmax, freq, helpers);
    }
    let pv: Option<Vec<f64>> = psw.map(|p| p.to_vec::<f64>()).transpose()?;
    // Positions grouped by row, in position order within a row.
    let mut start = vec![0usize; num + 1];
    for r in b.rows.iter().flatten() {
        start[r + 1] += 1;
    }
    for r in 0..num {
        start[r + 1] += start[r];
    }
    let live = start[num];
    let mut src_rows: Vec<Option<usize>> = crate::tensor::creation::try_filled_vec(live, None)?;
    let unit = mode == BagMode::Sum && pv.is_none() && freq.is_none();
    let mut scales: Vec<T> = if unit {
        Vec::new()
    } else {
        crate::tensor::creation::try_filled_vec(live, T::zero())?
    };
    let mut next = start.clone();
    for (i, r) in b.rows.iter().enumerate() {
        let Some(r) = *r else { continue };
        let k = next[r];
        next[r] += 1;
        src_rows[k] = Some(b.bag_of[i]);
        if !unit {
            scales[k] = T::of(position_scale(b, mode, pv.as_deref(), freq, i));
        }
    }
    let mut gw = crate::tensor::creation::try_vec::<T>(num * d)?;
    let o = SendPtr(gw.as_mut_ptr());
    g.with_contiguous_slice::<T, _>(|gs| {
        // Blocks of about 64k multiply-adds.
        let per_task = (65536 / (d * (1 + live / num.max(1))).max(1)).max(1);
        let tasks = if helpers == 0 {
            1
        } else {
            num.div_ceil(per_task)
        };
        let per_task = num.div_ceil(tasks.max(1));
        crate::parallel::share_work(helpers, tasks, &|t| {
            for r in t * per_task..((t + 1) * per_task).min(num) {
                // SAFETY: row r of the gradient is written by this task only, and `gw` has room
                // for all `num · d` elements.
                let dst = unsafe { std::slice::from_raw_parts_mut(o.get().add(r * d), d) };
                let span = start[r]..start[r + 1];
                let sc = (!unit).then(|| &scales[span.clone()]);
                bag_sum(dst, gs, &src_rows[span.clone()], sc);
            }
        });
    })?;
    // SAFETY: every row was written above (rows without positions get zeros from bag_sum).
    unsafe { gw.set_len(num * d) };
    Tensor::from_vec(gw, wshape)
}

/// Max mode's weight gradient: each bag's gradient element goes to the row that gave the
/// maximum. Columns are split among threads, so every element is summed in bag order.
fn bag_backward_max<T: RowFloat>(
    g: &Tensor,
    wshape: &[usize; 2],
    b: &Bags,
    argmax: &[i64],
    freq: Option<&[f64]>,
    helpers: usize,
) -> Result<Tensor> {
    let [num, d] = *wshape;
    let mut gw = crate::tensor::creation::try_filled_vec(num * d, T::zero())?;
    let o = SendPtr(gw.as_mut_ptr());
    g.with_contiguous_slice::<T, _>(|gs| {
        let tasks = (helpers + 1).min(d.div_ceil(16)).max(1);
        let width = d.div_ceil(tasks);
        crate::parallel::share_work(helpers, tasks, &|t| {
            let cols = t * width..((t + 1) * width).min(d);
            for bag in 0..b.count.len() {
                for c in cols.clone() {
                    let r = argmax[bag * d + c];
                    if r >= 0 {
                        let mut v = gs[bag * d + c].f();
                        if let Some(f) = freq {
                            v /= f[r as usize];
                        }
                        // SAFETY: column c belongs to this task only.
                        unsafe {
                            let p = o.get().add(r as usize * d + c);
                            *p = *p + T::of(v);
                        }
                    }
                }
            }
        });
    })?;
    Tensor::from_vec(gw, wshape)
}

/// `Σ_d g[bag(i), d] · weight[row(i), d]` per position (0 at padding).
fn bag_backward_psw<T: RowFloat>(g: &Tensor, weight: &Tensor, b: &Bags) -> Result<Tensor> {
    let d = weight.shape()[1];
    let out = g.with_contiguous_slice::<T, _>(|gs| {
        weight.with_contiguous_slice::<T, _>(|ws| {
            b.rows
                .iter()
                .zip(&b.bag_of)
                .map(|(r, &bag)| match r {
                    Some(r) => T::of(crate::ops::nn::softmax::sum_by(
                        &gs[bag * d..(bag + 1) * d],
                        &ws[r * d..(r + 1) * d],
                        |a, c| a.f() * c.f(),
                    )),
                    None => T::zero(),
                })
                .collect::<Vec<T>>()
        })
    })??;
    let n = out.len();
    Tensor::from_vec(out, &[n])
}

/// The weight gradient with differentiable ops (for `create_graph`): an `index_add` of the
/// bags' gradient rows, scaled per position, or of the max elements at their argmax.
fn bag_backward_ops((g, wshape, b, mode, psw, argmax, freq): BagGrad<'_>) -> Result<Tensor> {
    let [num, d] = *wshape;
    let zeros = Tensor::zeros(&[num * d], g.dtype());
    if mode == BagMode::Max {
        let (mut dst, mut src) = (Vec::new(), Vec::new());
        let mut scale = Vec::new();
        for (k, &r) in argmax.iter().enumerate() {
            if r >= 0 {
                dst.push(r * d as i64 + (k % d) as i64);
                src.push(k as i64);
                scale.push(freq.map_or(1.0, |f| 1.0 / f[r as usize]));
            }
        }
        let n = dst.len();
        let vals = g
            .reshape(&[g.numel()])?
            .index_select(0, &Tensor::from_vec(src, &[n])?)?
            .mul(&crate::kernels::copy::cast(
                &Tensor::from_vec(scale, &[n])?,
                g.dtype(),
            )?)?;
        return zeros
            .index_add(0, &Tensor::from_vec(dst, &[n])?, &vals, 1.0)?
            .reshape(wshape);
    }
    let live: Vec<usize> = (0..b.rows.len()).filter(|&i| b.rows[i].is_some()).collect();
    let n = live.len();
    let rows: Vec<i64> = live
        .iter()
        .map(|&i| b.rows[i].unwrap_or(0) as i64)
        .collect();
    let bag: Vec<i64> = live.iter().map(|&i| b.bag_of[i] as i64).collect();
    let consts: Vec<f64> = live
        .iter()
        .map(|&i| position_scale(b, mode, None, freq, i))
        .collect();
    let mut scale = crate::kernels::copy::cast(&Tensor::from_vec(consts, &[n])?, g.dtype())?;
    if let Some(p) = psw {
        let idx = Tensor::from_vec(live.iter().map(|&i| i as i64).collect::<Vec<_>>(), &[n])?;
        scale = scale.mul(&p.index_select(0, &idx)?)?;
    }
    let gs = g
        .index_select(0, &Tensor::from_vec(bag, &[n])?)?
        .mul(&scale.unsqueeze(1)?)?;
    Tensor::zeros(wshape, g.dtype()).index_add(0, &Tensor::from_vec(rows, &[n])?, &gs, 1.0)
}

/// torch's `embedding_renorm_`: each row of `weight` used by `indices` whose `norm_type`-norm
/// exceeds `max_norm` is scaled in place by `max_norm / (norm + 1e-7)`. Runs without recording
/// (as torch's under `no_grad`) and bumps the weight's version, so a graph that saved the old
/// weight sees the change. Non-int64 or out-of-range indices are errors.
pub fn embedding_renorm_(
    weight: &Tensor,
    indices: &Tensor,
    max_norm: f64,
    norm_type: f64,
) -> Result<()> {
    check_table("embedding_renorm_", weight, indices)?;
    let num = weight.shape()[0];
    let mut used = vec![false; num];
    for i in indices.to_vec::<i64>()? {
        let r = usize::try_from(i)
            .ok()
            .filter(|&r| r < num)
            .ok_or_else(|| Error::index("index out of range in self"))?;
        used[r] = true;
    }
    let _g = crate::tensor::grad_mode::GradModeGuard::new(false);
    let w = weight.detach();
    // Norms of the used rows only; the weight is touched only if one of them is too long.
    let rows: Vec<i64> = (0..num).filter(|&r| used[r]).map(|r| r as i64).collect();
    let n = rows.len();
    let picked = w.index_select(0, &Tensor::from_vec(rows.clone(), &[n])?)?;
    let norms = crate::ops::nn::distance::p_norm(&picked, norm_type, 1, false)?.to_vec::<f64>()?;
    let mut scale = vec![1.0f64; num];
    let mut any = false;
    for (&r, &nrm) in rows.iter().zip(&norms) {
        if nrm > max_norm {
            scale[r as usize] = max_norm / (nrm + 1e-7);
            any = true;
        }
    }
    if any {
        let s = crate::kernels::copy::cast(&Tensor::from_vec(scale, &[num, 1])?, w.dtype())?;
        w.mul_(&s)?;
    }
    Ok(())
}
