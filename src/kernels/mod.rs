//! Kernels that record nothing: matrix products, vectorised float32 math and copies (dtype
//! conversion, permuted and strided layouts). Ops build their forward passes and backward rules
//! from these; they sit below the graph, as ATen's kernels sit below autograd.

pub(crate) mod copy;
pub mod gemm;
pub mod vmath;
#[cfg(target_arch = "x86_64")]
mod vmath_avx512;
