//! Bindings of `crate::ops::inplace`: the in-place arithmetic operators, `fill_`, `zero_` and
//! `copy_`, each returning `self`.

use pyo3::prelude::*;

use crate::python::errors::guarded;
use crate::python::tensor::{operand, PyTensor};

/// `name_(other)` returning `self` and the augmented assignment `__iname__`, both calling
/// `Tensor::call(other)`.
macro_rules! inplace_methods {
    ($($(#[$doc:meta])* $name:ident, $dunder:ident => $call:ident),* $(,)?) => {
        #[pymethods]
        impl PyTensor {
            $(
                $(#[$doc])*
                fn $name(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyTensor>> {
                    let o = operand(other)?;
                    guarded(|| slf.get().inner.$call(&o))?;
                    Ok(slf.clone().unbind())
                }
                fn $dunder(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>) -> PyResult<()> {
                    let o = operand(other)?;
                    guarded(|| slf.get().inner.$call(&o))
                }
            )*
        }
    };
}
inplace_methods!(
    /// `self += other` in place; returns self.
    add_, __iadd__ => add_,
    /// `self -= other` in place; returns self.
    sub_, __isub__ => sub_,
    /// `self *= other` in place; returns self.
    mul_, __imul__ => mul_,
    /// `self /= other` in place; returns self.
    div_, __itruediv__ => div_,
);

#[pymethods]
impl PyTensor {
    /// Fill with `value` in place.
    fn fill_(slf: &Bound<'_, Self>, value: f64) -> PyResult<Py<PyTensor>> {
        guarded(|| slf.get().inner.fill_(value))?;
        Ok(slf.clone().unbind())
    }
    /// Fill with zeros in place.
    fn zero_(slf: &Bound<'_, Self>) -> PyResult<Py<PyTensor>> {
        guarded(|| slf.get().inner.zero_())?;
        Ok(slf.clone().unbind())
    }
    /// Copy `src` into this tensor in place (broadcast, converted).
    fn copy_(slf: &Bound<'_, Self>, src: &Bound<'_, PyAny>) -> PyResult<Py<PyTensor>> {
        let s = operand(src)?;
        guarded(|| slf.get().inner.copy_(&s))?;
        Ok(slf.clone().unbind())
    }
}
