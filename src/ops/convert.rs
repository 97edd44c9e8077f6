//! dtype conversion, copies and contiguity.

use crate::autograd::node::{needs_grad, record};
use crate::error::{Error, Result};
use crate::tensor::storage::Data;
use crate::tensor::{Buffer, DType, Element, Tensor};

fn convert_vec<S: Element, D: Element>(src: &[S]) -> Vec<D> {
    match D::DTYPE {
        DType::Bool => src
            .iter()
            .map(|&x| D::from_i64((x.to_f64() != 0.0) as i64))
            .collect(),
        DType::Int64 if S::DTYPE.is_float() => src
            .iter()
            .map(|&x| D::from_i64(x.to_f64() as i64))
            .collect(),
        DType::Int64 => src.iter().map(|&x| D::from_i64(x.to_i64())).collect(),
        _ => src.iter().map(|&x| D::from_f64(x.to_f64())).collect(),
    }
}

fn convert_to<D: Element>(t: &Tensor) -> Result<Vec<D>> {
    if t.dtype() == D::DTYPE {
        // A plain copy, no per-element conversion; a strided view through the tiled copy
        // kernel (a permute's or a transpose's `contiguous()`), except tiny ones, where the
        // kernel's planning costs more than gather's walk (~20 ns a call on a 6x8 transpose).
        if t.is_contiguous() || t.numel() <= 64 {
            return t.to_vec::<D>();
        }
        return crate::ops::permute_copy::copy_layout(t, t.layout());
    }
    Ok(match t.dtype() {
        DType::Float32 => t.with_contiguous_slice::<f32, _>(convert_vec::<f32, D>)?,
        DType::Float64 => t.with_contiguous_slice::<f64, _>(convert_vec::<f64, D>)?,
        DType::Int64 => t.with_contiguous_slice::<i64, _>(convert_vec::<i64, D>)?,
        DType::Bool => t.with_contiguous_slice::<bool, _>(convert_vec::<bool, D>)?,
    })
}

/// A contiguous copy of `t` converted to `dtype`, without recording.
pub(crate) fn cast(t: &Tensor, dtype: DType) -> Result<Tensor> {
    crate::tensor::creation::ensure_allocatable(t.numel(), dtype)?;
    let buf = match dtype {
        DType::Float32 => Buffer::F32(Data::Own(convert_to::<f32>(t)?)),
        DType::Float64 => Buffer::F64(Data::Own(convert_to::<f64>(t)?)),
        DType::Int64 => Buffer::I64(Data::Own(convert_to::<i64>(t)?)),
        DType::Bool => Buffer::Bool(Data::Own(convert_to::<bool>(t)?)),
    };
    Tensor::from_buffer(buf, t.shape())
}

/// `t` itself when it already has dtype `d`, else a converted copy (no recording).
pub(crate) fn as_dtype(t: &Tensor, d: DType) -> Result<Tensor> {
    if t.dtype() == d {
        Ok(t.clone())
    } else {
        cast(t, d)
    }
}

/// A contiguous copy with the same dtype, without recording.
pub(crate) fn copy_raw(t: &Tensor) -> Result<Tensor> {
    cast(t, t.dtype())
}

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
