//! Every differentiable op: its forward kernel and its backward rule side by side. Backward
//! rules are written with these same ops, so `create_graph` gives higher-order gradients.
//!
//! Ops are methods on [`Tensor`](crate::Tensor) (elementwise with NumPy broadcasting,
//! reductions, matmul, views, indexing) and functions per nn family under [`nn`]:
//!
//! ```
//! use ferrograd::ops::nn::{linear::linear, loss::{cross_entropy, Reduction}};
//! use ferrograd::{DType, Tensor};
//! # fn main() -> ferrograd::Result<()> {
//! let x = Tensor::from_vec(vec![1.0f64, 2.0, 3.0, 4.0], &[2, 2])?;
//! let b = Tensor::from_vec(vec![10.0f64, 20.0], &[2])?;
//! let y = x.add(&b)?; // broadcast over rows
//! assert_eq!(y.to_vec::<f64>()?, vec![11.0, 22.0, 13.0, 24.0]);
//! assert_eq!(x.matmul(&x)?.to_vec::<f64>()?, vec![7.0, 10.0, 15.0, 22.0]);
//! assert_eq!(x.sum_dims(&[0], false)?.to_vec::<f64>()?, vec![4.0, 6.0]);
//! let idx = Tensor::from_vec(vec![1i64, 0], &[2])?;
//! assert_eq!(x.index_select(0, &idx)?.to_vec::<f64>()?, vec![3.0, 4.0, 1.0, 2.0]);
//! // A linear layer and a loss, as nn.functional computes them.
//! let w = Tensor::eye(2, 2, DType::Float64)?;
//! let logits = linear(&x, &w, None)?;
//! let target = Tensor::from_vec(vec![1i64, 1], &[2])?;
//! let loss = cross_entropy(&logits, &target, None, -100, Reduction::Mean, 0.0)?;
//! let expected = (1.0f64 + (-1.0f64).exp()).ln(); // log(1 + e^(x0 - x1)) in both rows
//! assert!((loss.item()? - expected).abs() < 1e-12);
//! # Ok(())
//! # }
//! ```

pub mod batching;
pub mod binary;
pub mod convert;
pub(crate) mod elementwise;
pub mod indexing;
pub mod inplace;
pub mod linalg;
pub mod matmul;
pub mod nn;
pub mod pointwise;
pub mod reduce;
pub mod registry;
pub mod shape;
pub mod sort;
pub mod unary;
