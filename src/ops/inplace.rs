//! In-place ops. Each computes its result out of place (recording as usual), writes it into
//! the tensor's storage, bumps the shared version counter and rebases the tensor's history onto
//! the new node; a write through a view rebases its base (torch's CopySlices).

use std::collections::HashMap;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::graph::forward_ad;
use crate::graph::node::{needs_grad, record, record_node};
use crate::kernels::copy::{cast, copy_raw};
use crate::ops::convert::check_can_cast;
use crate::ops::indexing::ScatterReduce;
use crate::tensor::grad_mode::{self, GradModeGuard};
use crate::tensor::shape::fmt_shape;
use crate::tensor::{DType, Dims, Element, Tensor};

/// Writes `src` into `dst`'s elements; `write_into` has made sure they are in other storages,
/// so the read and write locks cannot meet.
fn write_typed<T: Element>(dst: &Tensor, src: &Tensor) -> Result<()> {
    src.with_contiguous_slice::<T, _>(|values| {
        let mut guard = dst.storage().write();
        let data = T::data_mut(&mut guard)
            .ok_or_else(|| Error::runtime("internal error: in-place dtype"))?;
        let layout = dst.layout();
        let data = data.as_mut_slice();
        match data.get_mut(layout.offset..layout.offset + values.len()) {
            Some(run) if layout.is_contiguous() && values.len() >= PARALLEL_COPY => {
                parallel_copy(run, values);
                Ok(())
            }
            _ => layout.scatter(data, values),
        }
    })?
}

/// Elements from which a contiguous write is shared among the pool's threads: one thread's
/// copy stops short of the memory bandwidth (4 MiB: 0.30 -> 0.17 ms on two threads).
const PARALLEL_COPY: usize = 1 << 18;

/// `dst.copy_from_slice(src)` in blocks shared among the pool's threads.
fn parallel_copy<T: Copy + Send + Sync>(dst: &mut [T], src: &[T]) {
    const BLOCK: usize = 1 << 16;
    let blocks = dst.len().div_ceil(BLOCK);
    let out = crate::parallel::SendPtr(dst.as_mut_ptr());
    crate::parallel::share_work(crate::parallel::helpers(), blocks, &|b| {
        let start = b * BLOCK;
        let len = BLOCK.min(src.len() - start);
        // SAFETY: block b alone writes elements start..start + len of `dst` (same length as
        // `src`), which outlives the call.
        let d = unsafe { std::slice::from_raw_parts_mut(out.get().add(start), len) };
        d.copy_from_slice(&src[start..start + len]);
    });
}

/// torch's refusal to write values batched over a vmap level into a tensor that is not.
const INPLACE_BATCHED_INTO_UNBATCHED: &str = "vmap: inplace arithmetic(self, *extra_args) is not possible because there exists a Tensor `other` in extra_args that has more elements than `self`. This happened due to `other` being vmapped over but `self` not being vmapped over in a vmap. Please try to use out-of-place operators instead of inplace arithmetic. If said operator is being called inside the PyTorch framework, please file a bug report instead.";

/// Copy `src` (same shape) into `dst`'s memory, converting to `dst`'s dtype. Inside vmap
/// (either is batched) the write goes to `dst`'s physical tensor: `src`'s samples into
/// `dst`'s, an unbatched `src` into every sample.
fn write_into(dst: &Tensor, src: &Tensor) -> Result<()> {
    if dst.is_batched() || src.is_batched() {
        let (d, s) = crate::tensor::batched::physical_for_write(dst, src)
            .ok_or_else(|| Error::runtime(INPLACE_BATCHED_INTO_UNBATCHED))?;
        return write_into(&d, &s);
    }
    let src = if Arc::ptr_eq(dst.storage(), src.storage()) {
        copy_raw(src)?
    } else {
        src.clone()
    };
    let src = if src.dtype() == dst.dtype() {
        src
    } else {
        cast(&src, dst.dtype())?
    };
    crate::tensor::storage::with_dtype!(dst.dtype(), T => write_typed::<T>(dst, &src))
}

/// `dst += src` with no graph (for accumulating `.grad`).
pub(crate) fn add_into_nograd(dst: &Tensor, src: &Tensor) -> Result<()> {
    if dst.shape() == src.shape() && crate::ops::elementwise::add_assign_nograd(dst, src)? {
        dst.data_storage().bump_version();
        return Ok(());
    }
    let sum = {
        let _g = GradModeGuard::new(false);
        dst.add(src)?
    };
    write_into(dst, &sum)?;
    dst.data_storage().bump_version();
    Ok(())
}

/// Logical (row-major) index in `base` of every element of the view `view`.
fn view_indices(base: &Tensor, view: &Tensor) -> Result<Vec<usize>> {
    let bl = base.layout();
    let lookup: HashMap<usize, usize> = bl
        .offsets()?
        .into_iter()
        .enumerate()
        .map(|(i, o)| (o, i))
        .collect();
    view.layout()
        .offsets()?
        .into_iter()
        .map(|o| {
            lookup
                .get(&o)
                .copied()
                .ok_or_else(|| Error::runtime("internal error: view element outside its base"))
        })
        .collect()
}

impl Tensor {
    fn check_inplace(&self, others: &[&Tensor]) -> Result<()> {
        if self.is_inference() && !grad_mode::is_inference_mode_enabled() {
            return Err(Error::runtime("Inplace update to inference tensor outside InferenceMode is not allowed.You can make a clone to get a normal tensor before doing inplace update.See https://github.com/pytorch/rfcs/pull/17 for more details."));
        }
        if !grad_mode::is_recording() {
            return Ok(());
        }
        let m = self.meta();
        let base_is_grad_leaf = m
            .view_base
            .as_ref()
            .is_some_and(|b| !b.same(self) && b.is_leaf() && b.requires_grad());
        if base_is_grad_leaf {
            return Err(Error::runtime("a view of a leaf Variable that requires grad is being used in an in-place operation."));
        }
        if m.grad_fn.is_none() && m.requires_grad {
            return Err(Error::runtime(
                "a leaf Variable that requires grad is being used in an in-place operation.",
            ));
        }
        if let Some(op) = m.multi_view_op {
            return Err(Error::runtime(format!("Output {} of {op} is a view and is being modified inplace. This view is the output of a function that returns multiple views. Such functions do not allow the output views to be modified inplace. You should replace the inplace operation by an out-of-place one.", m.output_nr)));
        }
        let view_without_grad = m.view_created_without_grad;
        drop(m);
        if view_without_grad && (self.requires_grad() || others.iter().any(|o| o.requires_grad())) {
            return Err(Error::runtime("A view was created in no_grad mode and is being modified inplace with grad mode enabled. Given that this use case is ambiguous and error-prone, it is forbidden. You can clarify your code by moving both the view and the inplace either both inside the no_grad block (if you don't want the inplace to be tracked) or both outside (if you want the inplace to be tracked)."));
        }
        Ok(())
    }

    /// Replace this tensor's values by `result` (computed from it out of place) and rebase its
    /// history onto `result`'s node.
    fn commit_inplace(&self, result: Tensor) -> Result<()> {
        if result.shape() != self.shape() {
            return Err(Error::runtime(format!(
                "output with shape {} doesn't match the broadcast shape {}",
                fmt_shape(self.shape()),
                fmt_shape(result.shape())
            )));
        }
        check_can_cast(result.dtype(), self.dtype())?;
        write_into(self, &result)?;
        self.data_storage().bump_version();
        if forward_ad::is_active() {
            self.commit_tangent(&result)?;
        }
        if !(grad_mode::is_recording() && result.requires_grad()) {
            return Ok(());
        }
        let result = if result.dtype() != self.dtype() {
            result.to_dtype(self.dtype())?
        } else {
            result
        };
        let base = self.meta().view_base.clone();
        match base {
            Some(base) if !base.same(self) => self.rebase_view(&base, &result),
            _ => {
                self.set_history(result.grad_fn(), result.output_nr());
                Ok(())
            }
        }
    }

    /// Forward mode: this tensor's tangent becomes `result`'s; written through a view, the
    /// base's tangent gets the view's region replaced (torch updates both the same way).
    fn commit_tangent(&self, result: &Tensor) -> Result<()> {
        let new = forward_ad::tangent(result);
        let base = self.meta().view_base.clone().filter(|b| !b.same(self));
        if let Some(base) = base {
            let old = forward_ad::tangent(&base);
            if new.is_some() || old.is_some() {
                let _quiet = forward_ad::Suspend::new();
                let idx = Arc::new(view_indices(&base, self)?);
                let mut mask = crate::tensor::creation::try_filled_vec(base.numel(), false)?;
                for &i in idx.iter() {
                    mask[i] = true;
                }
                let mask = Tensor::from_vec(mask, base.shape())?;
                let old = match old {
                    Some(t) => t,
                    None => Tensor::try_full(base.shape(), 0.0, base.dtype())?,
                };
                let region = match &new {
                    Some(t) => t.to_dtype(base.dtype())?.contiguous()?,
                    None => Tensor::try_full(self.shape(), 0.0, base.dtype())?,
                };
                let merged = old
                    .masked_fill(&mask, 0.0)?
                    .add(&region.scatter_add_flat(base.shape(), &idx)?)?;
                forward_ad::set_tangent(&base, merged.detach());
            }
        }
        match new {
            Some(t) => {
                let t = if t.dtype() != self.dtype() {
                    let _quiet = forward_ad::Suspend::new();
                    t.to_dtype(self.dtype())?
                } else {
                    t
                };
                forward_ad::set_tangent(self, t);
            }
            None => forward_ad::clear_tangent(self),
        }
        Ok(())
    }

    /// After writing `result` through the view `self` of `base`: the base's new history is
    /// "old base with the view's region replaced by `result`" and the view reads from it.
    fn rebase_view(&self, base: &Tensor, result: &Tensor) -> Result<()> {
        let idx = Arc::new(view_indices(base, self)?);
        let base_shape: Dims = base.shape().into();
        let view_shape: Dims = self.shape().into();
        let mut mask = crate::tensor::creation::try_filled_vec(base.numel(), false)?;
        for &i in idx.iter() {
            mask[i] = true;
        }
        let mask = Tensor::from_vec(mask, &base_shape)?;
        let idx_b = idx.clone();
        let vs = view_shape.clone();
        record_node(
            "CopySlices".into(),
            &[base, result],
            &[base],
            &[],
            false,
            Box::new(move |g, _| {
                let gb = g[0].masked_fill(&mask, 0.0)?;
                let gr = g[0].take_flat(&idx_b, &vs)?;
                Ok(vec![Some(gb), Some(gr)])
            }),
        )?;
        let bs = base_shape.clone();
        record_node(
            "AsStridedBackward0".into(),
            &[base],
            &[self],
            &[],
            false,
            Box::new(move |g, _| Ok(vec![Some(g[0].scatter_add_flat(&bs, &idx)?)])),
        )
    }

    /// The one way an op runs in place: `op` computes the result out of place from this tensor
    /// (recording its node, whose name becomes this tensor's `grad_fn`, as in torch), then it is
    /// written back. `others` are the op's other tensor operands. `saves_self`: the op's
    /// backward reads `self`, whose memory is about to be overwritten, so it works on a copy of
    /// the old values (torch's `original_self`).
    pub(crate) fn inplace_with(
        &self,
        others: &[&Tensor],
        saves_self: bool,
        op: impl FnOnce(&Tensor) -> Result<Tensor>,
    ) -> Result<()> {
        self.check_inplace(others)?;
        let mut inputs = vec![self];
        inputs.extend_from_slice(others);
        let result = if saves_self && needs_grad(&inputs) {
            op(&self.clone_tensor()?)?
        } else {
            op(self)?
        };
        self.commit_inplace(result)
    }

    fn inplace_binary(
        &self,
        other: &Tensor,
        saves_self: bool,
        op: impl FnOnce(&Tensor, &Tensor) -> Result<Tensor>,
    ) -> Result<()> {
        self.inplace_with(&[other], saves_self, |x| op(x, other))
    }

    /// Any unary op in place, e.g. `x.unary_(Tensor::exp)` (the rows of the op registry are
    /// bound to Python as `exp_`, `sin_`, ... this way).
    pub fn unary_(&self, op: fn(&Tensor) -> Result<Tensor>) -> Result<()> {
        self.inplace_with(&[], true, op)
    }

    /// Any binary op with `other` in place, e.g. `x.binary_(&y, Tensor::fmod)`; the result
    /// must keep this tensor's shape and be castable to its dtype.
    pub fn binary_(
        &self,
        other: &Tensor,
        op: fn(&Tensor, &Tensor) -> Result<Tensor>,
    ) -> Result<()> {
        self.inplace_binary(other, true, op)
    }

    /// [`Tensor::round_decimals`] in place.
    pub fn round_(&self, decimals: i64) -> Result<()> {
        self.inplace_with(&[], false, |x| x.round_decimals(decimals))
    }

    /// [`Tensor::clamp`] in place.
    pub fn clamp_(&self, min: Option<&Tensor>, max: Option<&Tensor>) -> Result<()> {
        let others: Vec<&Tensor> = min.into_iter().chain(max).collect();
        self.inplace_with(&others, true, |x| x.clamp(min, max))
    }

    /// [`Tensor::clamp_min`] in place.
    pub fn clamp_min_(&self, min: &Tensor) -> Result<()> {
        self.inplace_with(&[min], true, |x| x.clamp_min(min))
    }

    /// [`Tensor::clamp_max`] in place.
    pub fn clamp_max_(&self, max: &Tensor) -> Result<()> {
        self.inplace_with(&[max], true, |x| x.clamp_max(max))
    }

    /// `self ** exponent` in place.
    pub fn pow_(&self, exponent: &Tensor) -> Result<()> {
        self.inplace_binary(exponent, true, Tensor::pow)
    }

    /// [`Tensor::lerp`] in place.
    pub fn lerp_(&self, end: &Tensor, weight: &Tensor) -> Result<()> {
        self.inplace_with(&[end, weight], true, |x| x.lerp(end, weight))
    }

    /// [`Tensor::addcmul`] in place.
    pub fn addcmul_(&self, tensor1: &Tensor, tensor2: &Tensor, value: f64) -> Result<()> {
        self.inplace_with(&[tensor1, tensor2], false, |x| {
            x.addcmul(tensor1, tensor2, value)
        })
    }

    /// [`Tensor::addcdiv`] in place.
    pub fn addcdiv_(&self, tensor1: &Tensor, tensor2: &Tensor, value: f64) -> Result<()> {
        self.inplace_with(&[tensor1, tensor2], false, |x| {
            x.addcdiv(tensor1, tensor2, value)
        })
    }

    /// [`Tensor::scatter`] in place.
    pub fn scatter_(&self, dim: i64, index: &Tensor, src: &Tensor) -> Result<()> {
        self.inplace_with(&[src], false, |x| x.scatter(dim, index, src))
    }

    /// [`Tensor::scatter_value`] in place.
    pub fn scatter_value_(&self, dim: i64, index: &Tensor, value: f64) -> Result<()> {
        self.inplace_with(&[], false, |x| x.scatter_value(dim, index, value))
    }

    /// [`Tensor::scatter_add`] in place.
    pub fn scatter_add_(&self, dim: i64, index: &Tensor, src: &Tensor) -> Result<()> {
        self.inplace_with(&[src], false, |x| x.scatter_add(dim, index, src))
    }

    /// [`Tensor::scatter_reduce`] in place.
    pub fn scatter_reduce_(
        &self,
        dim: i64,
        index: &Tensor,
        src: &Tensor,
        reduce: ScatterReduce,
        include_self: bool,
    ) -> Result<()> {
        self.inplace_with(&[src], true, |x| {
            x.scatter_reduce(dim, index, src, reduce, include_self)
        })
    }

    /// [`Tensor::index_add`] in place.
    pub fn index_add_(&self, dim: i64, index: &Tensor, source: &Tensor, alpha: f64) -> Result<()> {
        self.inplace_with(&[source], false, |x| x.index_add(dim, index, source, alpha))
    }

    /// [`Tensor::index_copy`] in place.
    pub fn index_copy_(&self, dim: i64, index: &Tensor, source: &Tensor) -> Result<()> {
        self.inplace_with(&[source], false, |x| x.index_copy(dim, index, source))
    }

    /// [`Tensor::index_fill`] in place.
    pub fn index_fill_(&self, dim: i64, index: &Tensor, value: f64) -> Result<()> {
        self.inplace_with(&[], false, |x| x.index_fill(dim, index, value))
    }

    /// [`Tensor::masked_scatter`] in place.
    pub fn masked_scatter_(&self, mask: &Tensor, source: &Tensor) -> Result<()> {
        self.inplace_with(&[source], false, |x| x.masked_scatter(mask, source))
    }

    /// Replace the values by `sample` (drawn for this tensor's shape and dtype), recorded as
    /// `name` with a zero gradient to the old values (torch's random in-place ops).
    fn fill_random_(&self, name: &'static str, sample: Tensor) -> Result<()> {
        // randomness="different" drew one sample per batch entry: they cannot all land in a
        // tensor that is not batched there.
        if sample.is_batched()
            && crate::tensor::batched::physical_for_write(self, &sample).is_none()
        {
            return Err(Error::runtime("vmap: Cannot ask for different inplace randomness on an unbatched tensor. This will appear like same randomness. If this is necessary for your usage, please file an issue with functorch."));
        }
        self.inplace_with(&[], false, |x| {
            if needs_grad(&[x]) {
                record(name, &[x], &[&sample], &[], false, |g, _| {
                    Ok(vec![Some(g[0].mul_scalar(0.0)?)])
                })?;
            }
            Ok(sample)
        })
    }

    /// Fill with samples of N(`mean`, `std`²) in place.
    pub fn normal_(&self, mean: f64, std: f64) -> Result<()> {
        let s = Tensor::normal(self.shape(), mean, std, self.dtype())?;
        self.fill_random_("NormalBackward0", s)
    }

    /// Fill with samples of U[`low`, `high`) in place.
    pub fn uniform_(&self, low: f64, high: f64) -> Result<()> {
        if !self.dtype().is_float() {
            return Err(Error::not_implemented(format!(
                "\"check_uniform_bounds\" not implemented for '{}'",
                crate::tensor::scalar_type_name(self.dtype())
            )));
        }
        let s = Tensor::uniform(self.shape(), low, high, self.dtype())?;
        self.fill_random_("UniformBackward0", s)
    }

    /// Fill with integers drawn uniformly from `[low, high)` in place.
    pub fn random_(&self, low: i64, high: i64) -> Result<()> {
        let s = Tensor::randint(low, high, self.shape(), self.dtype())?;
        self.fill_random_("RandomBackward0", s)
    }

    /// Fill with exponential samples of rate `lambd` in place.
    pub fn exponential_(&self, lambd: f64) -> Result<()> {
        let s = Tensor::exponential(self.shape(), lambd, self.dtype())?;
        self.fill_random_("ExponentialBackward0", s)
    }

    /// Fill with 0/1 samples that are 1 with probability `p` in place.
    pub fn bernoulli_(&self, p: f64) -> Result<()> {
        let s = Tensor::bernoulli_scalar(self.shape(), p, self.dtype())?;
        self.fill_random_("BernoulliBackward2", s)
    }

    /// Fill with 0/1 samples, element `i` being 1 with probability `p[i]` (`p` broadcast to
    /// this tensor's shape, values in [0, 1]) in place.
    pub fn bernoulli_tensor_(&self, p: &Tensor) -> Result<()> {
        let s = {
            let _g = GradModeGuard::new(false);
            let p = p.detach().to_dtype(DType::Float64)?.expand(self.shape())?;
            let pv = p.to_vec::<f64>()?;
            if let Some(bad) = pv.iter().find(|v| !(0.0..=1.0).contains(*v)) {
                return Err(Error::runtime(format!(
                    "bernoulli_ expects p to be in [0, 1], but got p={bad}"
                )));
            }
            let u = Tensor::rand(self.shape(), DType::Float64)?;
            u.lt_t(&p)?.to_dtype(self.dtype())?
        };
        self.fill_random_("BernoulliBackward1", s)
    }

    /// `self += other` in place.
    pub fn add_(&self, other: &Tensor) -> Result<()> {
        if !needs_grad(&[self, other]) {
            // Without a graph the sum goes straight into this tensor's memory when the
            // layouts allow (optimizer updates, `out += identity` under no_grad).
            self.check_inplace(&[other])?;
            if crate::ops::elementwise::add_assign_nograd(self, other)? {
                self.data_storage().bump_version();
                return Ok(());
            }
        }
        self.inplace_binary(other, false, Tensor::add)
    }
    /// `self -= other` in place.
    pub fn sub_(&self, other: &Tensor) -> Result<()> {
        self.inplace_binary(other, false, Tensor::sub)
    }
    /// `self *= other` in place.
    pub fn mul_(&self, other: &Tensor) -> Result<()> {
        self.inplace_binary(other, true, Tensor::mul)
    }
    /// `self /= other` in place.
    pub fn div_(&self, other: &Tensor) -> Result<()> {
        self.inplace_binary(other, true, Tensor::div)
    }

    /// Fill with `value` in place; gradients to the old values are zero.
    pub fn fill_(&self, value: f64) -> Result<()> {
        self.check_inplace(&[])?;
        let result = Tensor::try_full(self.shape(), value, self.dtype())?;
        if needs_grad(&[self]) {
            record("FillBackward0", &[self], &[&result], &[], false, |g, _| {
                Ok(vec![Some(g[0].mul_scalar(0.0)?)])
            })?;
        }
        self.commit_inplace(result)
    }

    /// Fill with zeros in place.
    pub fn zero_(&self) -> Result<()> {
        self.fill_(0.0)
    }

    /// Copy `src` (broadcast to this shape, converted to this dtype) into this tensor.
    pub fn copy_(&self, src: &Tensor) -> Result<()> {
        self.check_inplace(&[src])?;
        let b = if src.shape() == self.shape() {
            src.clone()
        } else {
            src.expand(self.shape())?
        };
        // Of the same dtype, `result` is an alias of the source (its values are written into
        // this tensor below; it only carries the CopyBackwards node), not a third copy.
        let result = if b.dtype() == self.dtype() {
            b.detach()
        } else {
            let _g = GradModeGuard::new(false);
            cast(&b, self.dtype())?
        };
        if needs_grad(&[self, src]) && self.dtype().is_float() {
            record(
                "CopyBackwards",
                &[self, src],
                &[&result],
                &[],
                false,
                |g, _| Ok(vec![Some(g[0].mul_scalar(0.0)?), Some(g[0].clone())]),
            )?;
        }
        self.commit_inplace(result)
    }
}
