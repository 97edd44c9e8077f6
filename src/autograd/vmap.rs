//! `vmap` for Rust users: a function of one sample evaluated on a whole batch at once.
//!
//! The inputs are batched tensors (see [`crate::tensor::batched`]) whose shape is one sample's;
//! every op runs once on the physical tensor holding all the samples, through its batching rule.
//! Autograd records per sample, so gradients taken inside are per-sample gradients, and
//! gradients of the results taken outside flow back into the inputs.

use crate::error::{Error, Result};
use crate::ops::batching::{add_batch_dim, remove_batch_dim};
use crate::tensor::batched::{self, Randomness};
use crate::tensor::Tensor;

/// Closes the level it opened, also when the function fails.
struct LevelGuard;

impl Drop for LevelGuard {
    fn drop(&mut self) {
        let _ = batched::pop_level();
    }
}

/// `f` mapped over a dimension of its inputs (torch's `vmap` with `out_dims=0`): `in_dims[i]` is
/// the dimension of `inputs[i]` that runs over the samples (`None`: the same tensor for every
/// sample). `f` sees each input with one sample's shape; each of its outputs comes back with
/// the samples along a new first dimension. Random ops inside raise (torch's
/// `randomness="error"`).
///
/// ```
/// use ferrograd::autograd::{grad, vmap, GradOptions};
/// use ferrograd::Tensor;
/// # fn main() -> ferrograd::Result<()> {
/// // Per-sample gradients of (w · x)² for three samples x and one weight w.
/// let w = Tensor::from_vec(vec![1.0f64, -2.0], &[2])?;
/// let x = Tensor::from_vec(vec![1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0], &[3, 2])?;
/// let per_sample = w.unsqueeze(0)?.expand(&[3, 2])?; // one (shared) weight per sample
/// let grads = vmap(&[per_sample, x.clone()], &[Some(0), Some(0)], |args| {
///     let w = args[0].detach().requires_grad_(true)?;
///     let loss = w.dot(&args[1])?.pow_scalar(2.0)?;
///     let g = grad(&[loss], &[w], GradOptions::default())?;
///     g[0].clone().ok_or_else(|| ferrograd::Error::runtime("no gradient")).map(|g| vec![g])
/// })?;
/// // d/dw (w · x)² = 2 (w · x) x, one row per sample
/// assert_eq!(grads[0].shape(), &[3, 2]);
/// assert_eq!(grads[0].to_vec::<f64>()?, vec![-6.0, -12.0, -30.0, -40.0, -70.0, -84.0]);
/// # Ok(())
/// # }
/// ```
pub fn vmap<F>(inputs: &[Tensor], in_dims: &[Option<usize>], f: F) -> Result<Vec<Tensor>>
where
    F: FnOnce(&[Tensor]) -> Result<Vec<Tensor>>,
{
    if inputs.len() != in_dims.len() {
        return Err(Error::value(format!(
            "vmap: in_dims has {} entries for {} inputs",
            in_dims.len(),
            inputs.len()
        )));
    }
    let mut size = None;
    for (t, d) in inputs.iter().zip(in_dims) {
        let Some(d) = *d else { continue };
        if d >= t.dim() {
            return Err(Error::value(format!(
                "vmap: Got in_dim={d} for some input, but that input is a Tensor of dimensionality {} so expected in_dim to satisfy 0 <= in_dim < {}.",
                t.dim(),
                t.dim()
            )));
        }
        match size {
            None => size = Some(t.shape()[d]),
            Some(n) if n != t.shape()[d] => {
                return Err(Error::value(format!(
                    "vmap: Expected all tensors to have the same size in the mapped dimension, got sizes {n} and {} for the mapped dimension",
                    t.shape()[d]
                )))
            }
            Some(_) => {}
        }
    }
    let size =
        size.ok_or_else(|| Error::value("vmap: Expected at least one Tensor to vmap over"))?;
    let level = batched::push_level(size, Randomness::Error)?;
    let _close = LevelGuard;
    let wrapped = inputs
        .iter()
        .zip(in_dims)
        .map(|(t, d)| match d {
            Some(d) => add_batch_dim(t, *d, &level),
            None => Ok(t.clone()),
        })
        .collect::<Result<Vec<_>>>()?;
    f(&wrapped)?
        .iter()
        .map(|o| remove_batch_dim(o, &level, size, 0))
        .collect()
}
