//! # ferrograd
//!
//! Reverse-mode automatic differentiation with PyTorch's autograd semantics: tensors on
//! `ndarray` storage, reference-counted graph nodes, and a backward engine that runs
//! independent branches in parallel on a rayon pool with bitwise-deterministic results.
//!
//! ```
//! use ferrograd::{autograd, Tensor};
//! let x = Tensor::from_vec(vec![1.0f64, 2.0, 3.0], &[3]).unwrap().requires_grad_(true).unwrap();
//! let y = x.mul(&x).unwrap().sum().unwrap();
//! y.backward().unwrap();
//! assert_eq!(x.grad().unwrap().to_vec::<f64>().unwrap(), vec![2.0, 4.0, 6.0]);
//! # let _ = autograd::is_grad_enabled();
//! ```

pub mod autocast;
pub mod autograd;
pub mod distributed;
pub mod error;
pub mod graph;
pub mod interrupt;
pub mod kernels;
pub mod memory;
pub mod ops;
pub mod optim;
pub mod parallel;
pub mod safetensors;
pub mod tensor;

#[cfg(feature = "python")]
mod python;

pub use error::{Error, ErrorKind, Result};
pub use tensor::{DType, Tensor};
