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
