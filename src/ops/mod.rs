//! Every differentiable op: its forward kernel and its backward rule side by side. Backward
//! rules are written with these same ops, so `create_graph` gives higher-order gradients.

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
pub mod unary;
