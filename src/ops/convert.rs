//! dtype conversion, copies and contiguity.

use crate::error::{Error, Result};
use crate::graph::node::{needs_grad, record};
use crate::kernels::copy::{cast, copy_raw};
use crate::tensor::{DType, Tensor};

impl Tensor {
    /// This tensor converted to `dtype` (itself when it already has it). Differentiable
    /// between float types.
    pub fn to_dtype(&self, dtype: DType) -> Result<Tensor> {
        if self.dtype() == dtype {
            return Ok(self.clone());
        }
        let out = cast(self, dtype)?;
        if needs_grad(&[self]) && dtype.is_float() {
            let src = self.dtype();
            record(
                "ToCopyBackward0",
                &[self],
                &[&out],
                &[],
                false,
                move |g, _| Ok(vec![Some(g[0].to_dtype(src)?)]),
            )?;
        }
        Ok(out)
    }

    /// For ops whose kernels are written for float32 and float64 only: when an operand is
    /// float16 or bfloat16, `f` runs on float32 copies of the required operands `req` and the
    /// optional ones `opt` (recorded casts, so gradients flow back in the half type), and the
    /// float32 results are rounded to the operands' half type once, as torch's CPU kernels
    /// compute half in float32. `None` when no operand is half: the caller runs its kernel.
    pub fn lift_half<const R: usize, const O: usize, T: HalfOutputs>(
        req: [&Tensor; R],
        opt: [Option<&Tensor>; O],
        f: impl FnOnce([&Tensor; R], [Option<&Tensor>; O]) -> Result<T>,
    ) -> Option<Result<T>> {
        let half = req
            .iter()
            .copied()
            .chain(opt.iter().flatten().copied())
            .map(Tensor::dtype)
            .filter(|d| d.is_half())
            .reduce(DType::promote)?;
        let widen = |t: &Tensor| -> Result<Tensor> {
            if t.dtype().is_half() {
                t.to_dtype(DType::Float32)
            } else {
                Ok(t.clone())
            }
        };
        let run = || -> Result<T> {
            let wide_req = req.iter().map(|t| widen(t)).collect::<Result<Vec<_>>>()?;
            let wide_opt = opt
                .iter()
                .map(|o| o.map(widen).transpose())
                .collect::<Result<Vec<_>>>()?;
            let req_refs: [&Tensor; R] = std::array::from_fn(|i| &wide_req[i]);
            let opt_refs: [Option<&Tensor>; O] = std::array::from_fn(|i| wide_opt[i].as_ref());
            f(req_refs, opt_refs)?.round_to(half)
        };
        Some(run())
    }

    /// A copy in new memory that keeps the graph (`clone()`).
    pub fn clone_tensor(&self) -> Result<Tensor> {
        let out = copy_raw(self)?;
        if needs_grad(&[self]) {
            record("CloneBackward0", &[self], &[&out], &[], false, |g, _| {
                Ok(vec![Some(g[0].clone())])
            })?;
        }
        Ok(out)
    }

    /// This tensor if row-major already, otherwise a row-major copy (differentiable).
    pub fn contiguous(&self) -> Result<Tensor> {
        if self.is_contiguous() {
            Ok(self.clone())
        } else {
            self.clone_tensor()
        }
    }

    /// A row-major copy in new memory, cut from the graph.
    pub fn copy_detached(&self) -> Result<Tensor> {
        copy_raw(self)
    }

    /// Take this gradient as `.grad` without copying when nothing else can see its memory;
    /// otherwise copy it.
    pub(crate) fn steal_or_copy(self) -> Result<Tensor> {
        let unique = std::sync::Arc::strong_count(&self.0) == 1
            && std::sync::Arc::strong_count(&self.0.storage) == 1
            && self.is_contiguous()
            && self.layout().offset == 0
            && self.storage().read().len() == self.numel();
        if unique {
            Ok(self.detach())
        } else {
            copy_raw(&self)
        }
    }

    /// A one-element tensor's value.
    pub fn item(&self) -> Result<f64> {
        self.item_f64()
    }
}

/// torch's `can_cast`: no float to integer/bool and no integer to bool.
pub(crate) fn check_can_cast(from: DType, to: DType) -> Result<()> {
    let bad = (from.is_float() && !to.is_float()) || (from == DType::Int64 && to == DType::Bool);
    if bad {
        return Err(Error::runtime(format!(
            "result type {} can't be cast to the desired output type {}",
            crate::tensor::scalar_type_name(from),
            crate::tensor::scalar_type_name(to)
        )));
    }
    Ok(())
}

/// What [`Tensor::lift_half`] rounds back: the float32 tensors of an op's result.
pub trait HalfOutputs: Sized {
    /// The float32 tensors converted to `half` (recorded), others kept.
    fn round_to(self, half: DType) -> Result<Self>;
}

impl HalfOutputs for Tensor {
    fn round_to(self, half: DType) -> Result<Self> {
        if self.dtype() == DType::Float32 {
            self.to_dtype(half)
        } else {
            Ok(self)
        }
    }
}

impl HalfOutputs for (Tensor, Tensor) {
    fn round_to(self, half: DType) -> Result<Self> {
        Ok((self.0.round_to(half)?, self.1.round_to(half)?))
    }
}

impl HalfOutputs for (Tensor, Tensor, Tensor) {
    fn round_to(self, half: DType) -> Result<Self> {
        Ok((
            self.0.round_to(half)?,
            self.1.round_to(half)?,
            self.2.round_to(half)?,
        ))
    }
}
