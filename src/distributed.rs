//! Data-parallel gradient reduction, independent of the transport: the bucketing that torch's
//! `DistributedDataParallel` reducer does (`torch/csrc/distributed/c10d/reducer.cpp`).
//!
//! Parameters are grouped into buckets of about `bucket_cap` bytes, walking them in reverse
//! registration order (the order backward produces their gradients), one open bucket per dtype.
//! During backward each parameter is marked ready once its gradient is accumulated: the gradient,
//! times `1 / world_size`, is copied into its place in the bucket's flat buffer, and when a
//! bucket's last parameter arrives the bucket is handed to a [`Collective`] that starts summing it
//! across processes without waiting. Buckets are started strictly in index order (a bucket that
//! fills early waits for its predecessors), because every process must start the same reductions
//! in the same order. At the end of backward, [`Reducer::finalize`] waits for every bucket and
//! copies the averaged values back into each parameter's `.grad`.
//!
//! The transport is a trait so that MPI (driven from Python through mpi4py), an in-process fake
//! for tests, or another backend can be plugged in.
//!
//! ```
//! use ferrograd::distributed::{Collective, Reducer};
//! use ferrograd::{Result, Tensor};
//!
//! /// One process: nothing to sum.
//! struct Alone;
//! impl Collective for Alone {
//!     fn world_size(&self) -> usize { 1 }
//!     fn start_sum(&mut self, _buffer: &Tensor) -> Result<usize> { Ok(0) }
//!     fn wait(&mut self, _ticket: usize) -> Result<()> { Ok(()) }
//! }
//!
//! let w = Tensor::from_vec(vec![1.0f64, 2.0], &[2])?.requires_grad_(true)?;
//! let mut reducer = Reducer::new(vec![w.clone()], 25 << 20, 1 << 20)?;
//! w.mul(&w)?.sum()?.backward()?;
//! reducer.mark_ready(0, &mut Alone)?; // from a post-accumulate-grad hook in real use
//! reducer.finalize(&mut Alone, false)?; // at the end of backward
//! let g = w.grad().expect("accumulated");
//! assert_eq!(g.to_vec::<f64>()?, vec![2.0, 4.0]);
//! # Ok::<(), ferrograd::Error>(())
//! ```

use crate::error::{Error, Result};
use crate::tensor::{DType, Element, Tensor};

/// torch's `dist._DEFAULT_FIRST_BUCKET_BYTES`: the first bucket is small so that the first
/// reduction starts early in backward.
pub const DEFAULT_FIRST_BUCKET_BYTES: usize = 1 << 20;

/// A transport that sums buffers element-wise across all processes, in place.
///
/// Every process calls `start_sum` for the same buffers (same sizes and dtypes) in the same
/// order; the reducer guarantees that order for its buckets.
pub trait Collective {
    /// Number of processes taking part (at least 1).
    fn world_size(&self) -> usize;
    /// Start summing `buffer` (a contiguous 1-d float tensor) across processes in place; may
    /// return before the sum is complete. Returns a ticket for [`Collective::wait`].
    fn start_sum(&mut self, buffer: &Tensor) -> Result<usize>;
    /// Block until the sum started with `ticket` is complete and written into its buffer.
    fn wait(&mut self, ticket: usize) -> Result<()>;
}

/// Group parameters into buckets: walk `params` (numel, dtype) from the last to the first, add
/// each to the open bucket of its dtype, and close that bucket once it holds at least its cap
/// in bytes. The first bucket closed for each dtype uses `caps[0]`, the next `caps[1]`, and so
/// on, the last cap repeating. Buckets are returned in the order they close (still-open ones
/// last, by dtype), each listing parameter indices in the order they were added.
///
/// Returns a `ValueError` when `caps` is empty or holds a zero.
pub fn assign_buckets(params: &[(usize, DType)], caps: &[usize]) -> Result<Vec<Vec<usize>>> {
    if caps.is_empty() || caps.contains(&0) {
        return Err(Error::value("bucket size limits must be positive"));
    }
    struct Open {
        dtype: DType,
        indices: Vec<usize>,
        bytes: usize,
        closed: usize,
    }
    let mut open: Vec<Open> = Vec::new();
    let mut out = Vec::new();
    for i in (0..params.len()).rev() {
        let (numel, dtype) = params[i];
        let slot = match open.iter().position(|o| o.dtype == dtype) {
            Some(s) => s,
            None => {
                open.push(Open {
                    dtype,
                    indices: Vec::new(),
                    bytes: 0,
                    closed: 0,
                });
                open.len() - 1
            }
        };
        let o = &mut open[slot];
        o.indices.push(i);
        o.bytes += numel * dtype.size();
        let cap = caps[o.closed.min(caps.len() - 1)];
        if o.bytes >= cap {
            out.push(std::mem::take(&mut o.indices));
            o.bytes = 0;
            o.closed += 1;
        }
    }
    out.extend(
        open.into_iter()
            .filter(|o| !o.indices.is_empty())
            .map(|o| o.indices),
    );
    Ok(out)
}

/// One bucket: the flat buffer and where each of its parameters sits in it.
struct Bucket {
    params: Vec<usize>,
    offsets: Vec<usize>,
    buffer: Tensor,
    pending: usize,
    ticket: Option<usize>,
}

/// The gradient reducer of one data-parallel module (torch's `Reducer`).
pub struct Reducer {
    params: Vec<Tensor>,
    buckets: Vec<Bucket>,
    /// (bucket, position in bucket) of each parameter.
    place: Vec<(usize, usize)>,
    /// Parameters marked ready in the running backward pass.
    ready: Vec<bool>,
    /// The next bucket to start.
    next_bucket: usize,
    /// Whether some parameter was marked ready since the last `finalize`.
    in_pass: bool,
}

/// Multiply by `scale` while copying, in `T`.
trait Scaled: Element + std::ops::Mul<Output = Self> {}
impl Scaled for f32 {}
impl Scaled for f64 {}

/// `dst[dst_offset..][..numel] = src[src_offset..][..numel] * scale`, or zeros when `src` is
/// `None`, in `T`; `dst` must be contiguous and own a storage `src` does not share. Bumps
/// `dst`'s version counter.
fn copy_scaled<T: Scaled>(
    dst: &Tensor,
    dst_offset: usize,
    src: Option<(&Tensor, usize)>,
    numel: usize,
    scale: f64,
) -> Result<()> {
    let write = |values: Option<&[T]>| -> Result<()> {
        let mut guard = dst.storage().write();
        let data =
            T::data_mut(&mut guard).ok_or_else(|| Error::runtime("internal error: dtype"))?;
        let start = dst.layout().offset + dst_offset;
        let out = data
            .as_mut_slice()
            .get_mut(start..start + numel)
            .ok_or_else(|| Error::runtime("internal error: write out of its storage"))?;
        match values {
            Some(v) if scale == 1.0 => out.copy_from_slice(v),
            Some(v) => {
                let k = T::from_f64(scale);
                for (o, &x) in out.iter_mut().zip(v) {
                    *o = x * k;
                }
            }
            None => out.fill(T::default()),
        }
        Ok(())
    };
    match src {
        Some((s, src_offset)) => s.with_contiguous_slice::<T, _>(|v| {
            let v = v
                .get(src_offset..src_offset + numel)
                .ok_or_else(|| Error::runtime("internal error: read out of its storage"))?;
            write(Some(v))
        })??,
        None => write(None)?,
    }
    dst.storage().bump_version();
    Ok(())
}

/// [`copy_scaled`] for the dtype of `dst`.
fn copy_any(
    dst: &Tensor,
    dst_offset: usize,
    src: Option<(&Tensor, usize)>,
    numel: usize,
    scale: f64,
) -> Result<()> {
    match dst.dtype() {
        DType::Float32 => copy_scaled::<f32>(dst, dst_offset, src, numel, scale),
        _ => copy_scaled::<f64>(dst, dst_offset, src, numel, scale),
    }
}

impl Reducer {
    /// A reducer for `params` (floating-point tensors), with buckets of `bucket_cap` bytes and a
    /// first bucket of `first_bucket_cap` bytes (see [`assign_buckets`]).
    ///
    /// Returns a `TypeError` for a parameter that is not float32/float64 and a `ValueError` for
    /// a zero cap.
    pub fn new(params: Vec<Tensor>, bucket_cap: usize, first_bucket_cap: usize) -> Result<Self> {
        for (i, p) in params.iter().enumerate() {
            if !p.dtype().is_float() {
                return Err(Error::type_error(format!(
                    "DistributedDataParallel: parameter {i} has dtype {}; only float32 and float64 parameters are reduced",
                    p.dtype().name()
                )));
            }
        }
        let sizes: Vec<(usize, DType)> = params.iter().map(|p| (p.numel(), p.dtype())).collect();
        let groups = assign_buckets(&sizes, &[first_bucket_cap, bucket_cap])?;
        let mut place = vec![(0, 0); params.len()];
        let mut buckets = Vec::with_capacity(groups.len());
        for (b, indices) in groups.into_iter().enumerate() {
            let mut offsets = Vec::with_capacity(indices.len());
            let mut total = 0;
            for (k, &i) in indices.iter().enumerate() {
                place[i] = (b, k);
                offsets.push(total);
                total += params[i].numel();
            }
            let dtype = params[indices[0]].dtype();
            buckets.push(Bucket {
                pending: indices.len(),
                params: indices,
                offsets,
                buffer: Tensor::zeros(&[total], dtype),
                ticket: None,
            });
        }
        let n = params.len();
        Ok(Reducer {
            params,
            buckets,
            place,
            ready: vec![false; n],
            next_bucket: 0,
            in_pass: false,
        })
    }

    /// The parameter indices of each bucket, in the order the buckets are reduced.
    pub fn bucket_indices(&self) -> Vec<Vec<usize>> {
        self.buckets.iter().map(|b| b.params.clone()).collect()
    }

    /// The flat buffer of bucket `b` (what the collective sums), or an `IndexError`.
    pub fn bucket_buffer(&self, b: usize) -> Result<Tensor> {
        self.buckets
            .get(b)
            .map(|b| b.buffer.clone())
            .ok_or_else(|| Error::index(format!("bucket index {b} out of range")))
    }

    /// Whether a backward pass has marked parameters ready and not been finalized yet.
    pub fn in_pass(&self) -> bool {
        self.in_pass
    }

    /// Record that parameter `index`'s gradient is accumulated: copy it (divided by the world
    /// size) into its bucket and start every bucket that is now complete and whose turn it is.
    ///
    /// Returns an `IndexError` for an index out of range, and torch's `RuntimeError` when the
    /// parameter was already marked in this pass (e.g. a reentrant backward).
    pub fn mark_ready(&mut self, index: usize, collective: &mut dyn Collective) -> Result<()> {
        let p = self.params.get(index).ok_or_else(|| {
            Error::index(format!(
                "parameter index {index} out of range for {} parameters",
                self.params.len()
            ))
        })?;
        if self.ready[index] {
            return Err(Error::runtime(format!(
                "Expected to mark a variable ready only once. This error is caused by one of the following reasons: 1) Use of a module parameter outside the `forward` function. 2) Reused parameters in multiple reentrant backward passes. Parameter at index {index} has been marked as ready twice. This means that multiple autograd engine hooks have fired for this particular parameter during this iteration."
            )));
        }
        let grad = p.grad();
        self.fill(index, grad.as_ref(), collective.world_size())?;
        self.ready[index] = true;
        self.in_pass = true;
        let (b, _) = self.place[index];
        self.buckets[b].pending -= 1;
        self.launch_ready(collective)
    }

    /// Copy `grad / world_size` (zeros for `None`) into parameter `index`'s place.
    fn fill(&self, index: usize, grad: Option<&Tensor>, world_size: usize) -> Result<()> {
        let p = &self.params[index];
        if let Some(g) = grad {
            if g.shape() != p.shape() || g.dtype() != p.dtype() {
                return Err(Error::runtime(format!(
                    "DistributedDataParallel: the gradient of parameter {index} has shape {:?} and dtype {}, expected {:?} and {}",
                    g.shape(),
                    g.dtype().name(),
                    p.shape(),
                    p.dtype().name()
                )));
            }
        }
        let (b, k) = self.place[index];
        let bucket = &self.buckets[b];
        let scale = 1.0 / world_size.max(1) as f64;
        copy_any(
            &bucket.buffer,
            bucket.offsets[k],
            grad.map(|g| (g, 0)),
            p.numel(),
            scale,
        )
    }

    /// Start the complete buckets from `next_bucket` on, in order.
    fn launch_ready(&mut self, collective: &mut dyn Collective) -> Result<()> {
        while let Some(b) = self.buckets.get_mut(self.next_bucket) {
            if b.pending != 0 {
                break;
            }
            b.ticket = Some(collective.start_sum(&b.buffer)?);
            self.next_bucket += 1;
        }
        Ok(())
    }

    /// The parameters not marked ready in the running pass.
    pub fn unready(&self) -> Vec<usize> {
        (0..self.params.len()).filter(|&i| !self.ready[i]).collect()
    }

    /// End the backward pass: wait for every bucket and write the averaged gradients into the
    /// parameters' `.grad` (in place when it is contiguous; a new tensor otherwise).
    ///
    /// With `find_unused`, parameters that got no gradient here count as zeros, and a second sum
    /// across processes tells which parameters no process used: their `.grad` is left as it is
    /// (torch's rule); the others get the average. Without it, a parameter that got no
    /// gradient is torch's "Expected to have finished reduction" `RuntimeError` (raised after
    /// the started buckets are waited for, so the processes stay in step). The reducer is ready
    /// for the next pass afterwards, whatever the outcome. Returns the indices of parameters
    /// that got no gradient on this process.
    pub fn finalize(
        &mut self,
        collective: &mut dyn Collective,
        find_unused: bool,
    ) -> Result<Vec<usize>> {
        let result = self.finalize_inner(collective, find_unused);
        self.reset();
        result
    }

    fn finalize_inner(
        &mut self,
        collective: &mut dyn Collective,
        find_unused: bool,
    ) -> Result<Vec<usize>> {
        let unused = self.unready();
        if !unused.is_empty() && !find_unused {
            for b in &mut self.buckets[..self.next_bucket] {
                if let Some(t) = b.ticket.take() {
                    collective.wait(t)?;
                }
            }
            return Err(unfinished_reduction_error(&unused));
        }
        let ws = collective.world_size();
        for &i in &unused {
            self.fill(i, None, ws)?;
            let (b, _) = self.place[i];
            self.buckets[b].pending -= 1;
        }
        self.launch_ready(collective)?;
        // Which parameters some process used: a sum of 0/1 flags across processes.
        let used_anywhere: Option<Vec<f64>> = if find_unused {
            let flags: Vec<f64> = self.ready.iter().map(|&r| r as u8 as f64).collect();
            let n = flags.len();
            let flags = Tensor::from_vec(flags, &[n])?;
            let t = collective.start_sum(&flags)?;
            collective.wait(t)?;
            Some(flags.to_vec::<f64>()?)
        } else {
            None
        };
        for b in 0..self.buckets.len() {
            if let Some(t) = self.buckets[b].ticket.take() {
                collective.wait(t)?;
            }
            let bucket = &self.buckets[b];
            for (k, &i) in bucket.params.iter().enumerate() {
                if used_anywhere.as_ref().is_some_and(|u| u[i] == 0.0) {
                    continue;
                }
                let p = &self.params[i];
                let grad = match p.grad() {
                    Some(g) if g.is_contiguous() && g.shape() == p.shape() => g,
                    _ => {
                        let g = Tensor::zeros(p.shape(), p.dtype());
                        p.set_grad(Some(g.clone()))?;
                        g
                    }
                };
                let from = Some((&bucket.buffer, bucket.offsets[k]));
                copy_any(&grad, 0, from, p.numel(), 1.0)?;
            }
        }
        Ok(unused)
    }

    /// Forget the running pass (all parameters unready, no bucket started).
    fn reset(&mut self) {
        self.ready.fill(false);
        for b in &mut self.buckets {
            b.pending = b.params.len();
            b.ticket = None;
        }
        self.next_bucket = 0;
        self.in_pass = false;
    }
}

/// torch's error for parameters that took no part in producing the loss.
fn unfinished_reduction_error(unused: &[usize]) -> Error {
    let list: Vec<String> = unused.iter().map(|i| i.to_string()).collect();
    Error::runtime(format!(
        "Expected to have finished reduction in the prior iteration before starting a new one. This error indicates that your module has parameters that were not used in producing loss. You can enable unused parameter detection by passing the keyword argument `find_unused_parameters=True` to `torch.nn.parallel.DistributedDataParallel`, and by making sure all `forward` function outputs participate in calculating loss.\nParameter indices which did not receive grad for rank: {}",
        list.join(" ")
    ))
}
