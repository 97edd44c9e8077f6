//! Lookup tables (torch's `nn.functional.sparse`): `embedding`, the rows of a weight matrix at
//! integer indices, whose gradient adds each position's gradient into its row.

use std::sync::Arc;

use crate::autograd::node::{needs_grad, record};
use crate::error::{Error, Result};
use crate::ops::nn::conv::{GatherNames, PAD_INDEX};
use crate::tensor::shape::fmt_shape;
use crate::tensor::{DType, Tensor};

/// torch's node names: the lookup and, for double backward, its adjoint.
const EMBEDDING: GatherNames = GatherNames {
    gather: "EmbeddingBackward0",
    scatter: "EmbeddingBackwardBackward0",
};

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
    if indices.dtype() != DType::Int64 {
        return Err(Error::runtime(format!(
            "Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, Int; but got {} instead (while checking arguments for embedding)",
            crate::tensor::scalar_type_name(indices.dtype())
        )));
    }
    if weight.dim() != 2 {
        return Err(Error::runtime(format!(
            "'weight' must be 2-D, got {}",
            fmt_shape(weight.shape())
        )));
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
            Some(crate::ops::convert::cast(
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
