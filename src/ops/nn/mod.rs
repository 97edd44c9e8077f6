//! The operations of `torch.nn.functional`, one file per family (convolution and its sliding-
//! window primitives, softmax and log-softmax, ...): each op's forward kernel and backward rule
//! side by side, as elsewhere in `ops`. Rust users build models from these functions directly;
//! the Python package's `nn.functional` only parses arguments and raises torch's errors.

pub mod activation;
pub mod attention;
pub mod conv;
pub mod distance;
pub mod linear;
pub mod loss;
pub mod margin_loss;
pub mod norm;
pub mod padding;
pub mod pool;
pub mod prelu;
pub mod rnn;
pub mod sampling;
pub mod softmax;
pub mod sparse;
