//! Products of `torch.linalg`: `cross` (its own node, the backward two more crosses), and
//! `vecdot` and `multi_dot` (whose chain order minimises the flops, as torch's) composed from
//! differentiable ops.

use crate::error::{Error, Result};
use crate::graph::node::{needs_grad, record};
use crate::tensor::grad_mode::GradModeGuard;
use crate::tensor::shape::{broadcast_shapes, wrap_dim};
use crate::tensor::{scalar_type_name, Tensor};

impl Tensor {
    /// The cross product of 3-vectors along `dim` (inputs broadcast against each other), as
    /// `torch.linalg.cross`. The dim must have size 3 in both inputs.
    ///
    /// ```
    /// use ferrograd::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f64, 0.0, 0.0], &[3]).unwrap();
    /// let y = Tensor::from_vec(vec![0.0f64, 1.0, 0.0], &[3]).unwrap();
    /// assert_eq!(x.linalg_cross(&y, -1).unwrap().to_vec::<f64>().unwrap(), vec![0.0, 0.0, 1.0]);
    /// ```
    pub fn linalg_cross(&self, other: &Tensor, dim: i64) -> Result<Tensor> {
        if self.dim() != other.dim() {
            return Err(Error::runtime(
                "linalg.cross: inputs must have the same number of dimensions.",
            ));
        }
        let d = wrap_dim(dim, self.dim())?;
        let (sa, sb) = (self.shape()[d], other.shape()[d]);
        if sa != 3 || sb != 3 {
            return Err(Error::runtime(format!(
                "linalg.cross: inputs dimension {dim} must have length 3. Got {sa} and {sb}"
            )));
        }
        let shape = broadcast_shapes(self.shape(), other.shape())?;
        let di = d as i64;
        let out = {
            let _off = GradModeGuard::new(false);
            let (a, b) = (
                self.detach().expand(&shape)?,
                other.detach().expand(&shape)?,
            );
            let c = |x: &Tensor, i: i64| x.narrow(di, i, 1);
            let (a0, a1, a2) = (c(&a, 0)?, c(&a, 1)?, c(&a, 2)?);
            let (b0, b1, b2) = (c(&b, 0)?, c(&b, 1)?, c(&b, 2)?);
            Tensor::cat(
                &[
                    a1.mul(&b2)?.sub(&a2.mul(&b1)?)?,
                    a2.mul(&b0)?.sub(&a0.mul(&b2)?)?,
                    a0.mul(&b1)?.sub(&a1.mul(&b0)?)?,
                ],
                di,
            )?
        };
        if needs_grad(&[self, other]) {
            // ⟨g, dx × y⟩ = ⟨dx, y × g⟩ and ⟨g, x × dy⟩ = ⟨dy, g × x⟩; the engine sums the
            // broadcast dims back.
            record(
                "LinalgCrossBackward0",
                &[self, other],
                &[&out],
                &[self, other],
                false,
                move |g, s| {
                    Ok(vec![
                        Some(s[1].linalg_cross(&g[0], di)?),
                        Some(g[0].linalg_cross(&s[0], di)?),
                    ])
                },
            )?;
        }
        Ok(out)
    }

    /// The dot product of vectors along `dim` (`Σ x·y`, inputs broadcast), as
    /// `torch.linalg.vecdot` for real tensors.
    pub fn vecdot(&self, other: &Tensor, dim: i64) -> Result<Tensor> {
        if self.dtype() != other.dtype() {
            return Err(Error::runtime(format!(
                "linalg.vecdot: Expected x and y to have the same dtype, but found x of type {} and y of type {} instead",
                scalar_type_name(self.dtype()),
                scalar_type_name(other.dtype())
            )));
        }
        let p = self.mul(other)?;
        let d = wrap_dim(dim, p.dim().max(1))?;
        p.sum_dims(&[d as i64], false)
    }

    /// The product of a chain of matrices, multiplied in the order that needs the fewest
    /// flops; the first may be a vector (a row) and the last a vector (a column), as
    /// `torch.linalg.multi_dot`.
    pub fn multi_dot(tensors: &[Tensor]) -> Result<Tensor> {
        let k = tensors.len();
        if k < 2 {
            return Err(Error::runtime(format!(
                "multi_dot(): expected at least 2 tensors but got {k}"
            )));
        }
        let (first, last) = (&tensors[0], &tensors[k - 1]);
        if first.dim() != 1 && first.dim() != 2 {
            return Err(Error::runtime(format!(
                "multi_dot(): the first tensor must be 1D or 2D but got {}D",
                first.dim()
            )));
        }
        if last.dim() != 1 && last.dim() != 2 {
            return Err(Error::runtime(format!(
                "multi_dot(): the last tensor must be 1D or 2D but got {}D",
                last.dim()
            )));
        }
        for (i, t) in tensors.iter().enumerate().take(k - 1).skip(1) {
            if t.dim() != 2 {
                return Err(Error::runtime(format!(
                    "multi_dot(): tensor {i} must be 2D but got {}D",
                    t.dim()
                )));
            }
        }
        let dtype = first.dtype();
        for t in tensors {
            if t.dtype() != dtype {
                return Err(Error::runtime(format!(
                    "multi_dot(): all tensors must have be the same dtype but tensor 0 is {} and tensor {} {}",
                    scalar_type_name(dtype),
                    tensors.iter().position(|x| x.dtype() != dtype).unwrap_or(0),
                    scalar_type_name(t.dtype())
                )));
            }
        }
        let mats: Vec<Tensor> = tensors
            .iter()
            .enumerate()
            .map(|(i, t)| match (i, t.dim()) {
                (0, 1) => t.unsqueeze(0),
                (i, 1) if i == k - 1 => t.unsqueeze(-1),
                _ => Ok(t.clone()),
            })
            .collect::<Result<_>>()?;
        for i in 0..k - 1 {
            let (a, b) = (&mats[i], &mats[i + 1]);
            if a.shape()[1] != b.shape()[0] {
                return Err(Error::runtime(format!(
                    "multi_dot(): tensors {i} and {} with shapes {:?} and {:?} cannot be multiplied",
                    i + 1,
                    tensors[i].shape(),
                    tensors[i + 1].shape()
                )));
            }
        }
        // Matrix-chain order: p[i] x p[i+1] is the shape of matrix i.
        let mut p: Vec<usize> = mats.iter().map(|t| t.shape()[0]).collect();
        p.push(mats[k - 1].shape()[1]);
        let mut cost = vec![vec![0u128; k]; k];
        let mut split = vec![vec![0usize; k]; k];
        for len in 1..k {
            for i in 0..k - len {
                let j = i + len;
                cost[i][j] = u128::MAX;
                for s in i..j {
                    let c = cost[i][s] + cost[s + 1][j] + (p[i] * p[s + 1] * p[j + 1]) as u128;
                    if c < cost[i][j] {
                        cost[i][j] = c;
                        split[i][j] = s;
                    }
                }
            }
        }
        fn chain(m: &[Tensor], split: &[Vec<usize>], i: usize, j: usize) -> Result<Tensor> {
            if i == j {
                return Ok(m[i].clone());
            }
            let s = split[i][j];
            chain(m, split, i, s)?.mm(&chain(m, split, s + 1, j)?)
        }
        let mut out = chain(&mats, &split, 0, k - 1)?;
        if first.dim() == 1 {
            out = out.squeeze(Some(0))?;
        }
        if last.dim() == 1 {
            out = out.squeeze(Some(-1))?;
        }
        Ok(out)
    }
}
