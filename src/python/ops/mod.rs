//! Bindings of the op families of `crate::ops`, one file per family: `unary`, `binary`,
//! `reduce`, `shape`, `indexing`, `matmul`, `pointwise`, `linalg`, `inplace`, `convert`,
//! `sort`.

pub(crate) mod binary;
mod convert;
mod indexing;
mod inplace;
mod linalg;
mod matmul;
mod pointwise;
mod reduce;
mod shape;
mod sort;
mod unary;

use pyo3::prelude::*;

/// Register the module-level functions of the op families on `ferrograd._C`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    binary::register(m)?;
    linalg::register(m)?;
    shape::register(m)?;
    sort::register(m)?;
    indexing::register(m)?;
    unary::register(m)?;
    Ok(())
}
