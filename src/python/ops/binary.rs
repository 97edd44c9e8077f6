//! Bindings of `crate::ops::binary`: arithmetic, comparison, logical and bitwise operators,
//! rounding division and `where`, with torch's Python-number operands.

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyInt};

use crate::ops::binary::{BitOp, RoundingMode};
use crate::python::errors::{detached, guarded};
use crate::python::tensor::{heavy, operand, wrap, PyTensor, HEAVY_ELEMENTS};
use crate::tensor::{DType, Tensor};

/// `f(a, other)` for a tensor or number `other`, releasing the GIL when the operands are large.
pub(crate) fn binary_call(
    py: Python<'_>,
    a: &Tensor,
    other: &Bound<'_, PyAny>,
    f: fn(&Tensor, &Tensor) -> crate::error::Result<Tensor>,
) -> PyResult<Py<PyTensor>> {
    let o = operand(other)?;
    let t = if a.numel().max(o.numel()) >= HEAVY_ELEMENTS {
        let a = a.clone();
        detached(py, move || f(&a, &o))?
    } else {
        guarded(|| f(a, &o))?
    };
    wrap(py, t)
}

/// A Python int or float (not bool) as its value and the dtype it promotes as.
fn number(obj: &Bound<'_, PyAny>) -> Option<(f64, DType)> {
    if let Ok(f) = obj.cast::<PyFloat>() {
        return Some((f.value(), DType::Float64));
    }
    if obj.is_instance_of::<PyInt>() && !obj.is_instance_of::<PyBool>() {
        // An int beyond i64 takes the general path, which raises torch's overflow error.
        return obj.extract::<i64>().ok().map(|v| (v as f64, DType::Int64));
    }
    None
}

/// Methods `name(other)` computing `call(self, other)`, one `name => |a, b| ...` each.
macro_rules! binary_methods {
    ($($(#[$doc:meta])* $name:ident => $call:expr),* $(,)?) => {
        #[pymethods]
        impl PyTensor {
            $(
                $(#[$doc])*
                fn $name(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyTensor>> {
                    binary_call(py, &self.inner, other, $call)
                }
            )*
        }
    };
}

/// Arithmetic operators: a Python number operand skips the wrapped 0-d tensor (the op with
/// the most calls per second in scalar-heavy code).
macro_rules! arith_methods {
    ($($(#[$doc:meta])* $name:ident => $op:ident, $number_first:expr, $call:expr);* $(;)?) => {
        #[pymethods]
        impl PyTensor {
            $(
                $(#[$doc])*
                fn $name(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyTensor>> {
                    if let Some((v, dtype)) = number(other) {
                        let op = crate::ops::binary::ArithOp::$op;
                        let t = heavy(py, &self.inner, move |x| {
                            x.arith_number(op, v, dtype, $number_first)
                        })?;
                        return wrap(py, t);
                    }
                    binary_call(py, &self.inner, other, $call)
                }
            )*
        }
    };
}

/// `other * alpha` for torch's `alpha` keyword of `add`/`sub`, or `None` when `alpha` is 1
/// (the plain op). Checked as torch checks it: an integral result takes an integral alpha, and
/// only a bool result a bool one.
pub(crate) fn scaled_by_alpha(
    name: &str,
    a: &Tensor,
    other: &Bound<'_, PyAny>,
    alpha: Option<&Bound<'_, PyAny>>,
) -> PyResult<Option<Tensor>> {
    let Some(alpha) = alpha else { return Ok(None) };
    let o = operand(other)?;
    let integral = !a.dtype().is_float() && !o.dtype().is_float();
    if alpha.is_instance_of::<PyBool>() {
        let both_bool = a.dtype() == DType::Bool && o.dtype() == DType::Bool;
        if !both_bool {
            return Err(PyRuntimeError::new_err(
                "Boolean alpha only supported for Boolean results.",
            ));
        }
        return Ok(if alpha.is_truthy()? {
            None
        } else {
            Some(guarded(|| o.logical_and(&o.logical_not()?))?)
        });
    }
    let Some((v, dtype)) = number(alpha) else {
        return Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "{name}(): argument 'alpha' must be Number, not {}",
            alpha.get_type().name()?
        )));
    };
    if integral && dtype.is_float() {
        return Err(PyRuntimeError::new_err(
            "For integral input tensors, argument alpha must not be a floating point number.",
        ));
    }
    if v == 1.0 {
        return Ok(None);
    }
    let op = crate::ops::binary::ArithOp::Mul;
    Ok(Some(guarded(|| o.arith_number(op, v, dtype, false))?))
}

#[pymethods]
impl PyTensor {
    /// `self + alpha * other`, broadcasting.
    #[pyo3(signature = (other, *, alpha=None))]
    fn add(
        &self,
        py: Python<'_>,
        other: &Bound<'_, PyAny>,
        alpha: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyTensor>> {
        match scaled_by_alpha("add", &self.inner, other, alpha)? {
            Some(o) => wrap(py, guarded(|| self.inner.add(&o))?),
            None => self.__add__(py, other),
        }
    }
    /// `self - alpha * other`, broadcasting.
    #[pyo3(signature = (other, *, alpha=None))]
    fn sub(
        &self,
        py: Python<'_>,
        other: &Bound<'_, PyAny>,
        alpha: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyTensor>> {
        match scaled_by_alpha("sub", &self.inner, other, alpha)? {
            Some(o) => wrap(py, guarded(|| self.inner.sub(&o))?),
            None => self.__sub__(py, other),
        }
    }
}

arith_methods!(
    /// `self * other`, broadcasting.
    mul => Mul, false, |a, b| a.mul(b);
    __add__ => Add, false, |a, b| a.add(b);
    __radd__ => Add, true, |a, b| b.add(a);
    __sub__ => Sub, false, |a, b| a.sub(b);
    __rsub__ => Sub, true, |a, b| b.sub(a);
    __mul__ => Mul, false, |a, b| a.mul(b);
    __rmul__ => Mul, true, |a, b| b.mul(a);
    __truediv__ => Div, false, |a, b| a.div(b);
    __rtruediv__ => Div, true, |a, b| b.div(a);
);

binary_methods!(
    /// `self ** other`, broadcasting.
    pow => |a, b| a.pow(b),
    /// `self == other` elementwise (a bool tensor).
    eq => |a, b| a.eq_t(b),
    /// `self != other` elementwise (a bool tensor).
    ne => |a, b| a.ne_t(b),
    /// `self < other` elementwise (a bool tensor).
    lt => |a, b| a.lt_t(b),
    /// `self <= other` elementwise (a bool tensor).
    le => |a, b| a.le_t(b),
    /// `self > other` elementwise (a bool tensor).
    gt => |a, b| a.gt_t(b),
    /// `self >= other` elementwise (a bool tensor).
    ge => |a, b| a.ge_t(b),
    __eq__ => |a, b| a.eq_t(b),
    __ne__ => |a, b| a.ne_t(b),
    __lt__ => |a, b| a.lt_t(b),
    __le__ => |a, b| a.le_t(b),
    __gt__ => |a, b| a.gt_t(b),
    __ge__ => |a, b| a.ge_t(b),
    /// `maximum(self, other)` elementwise, broadcasting.
    maximum => |a, b| a.maximum(b),
    /// `minimum(self, other)` elementwise, broadcasting.
    minimum => |a, b| a.minimum(b),
    /// `fmod(self, other)` elementwise, broadcasting.
    fmod => |a, b| a.fmod(b),
    /// `remainder(self, other)` elementwise, broadcasting.
    remainder => |a, b| a.remainder(b),
    /// `atan2(self, other)` elementwise, broadcasting.
    atan2 => |a, b| a.atan2(b),
    /// `arctan2(self, other)` elementwise, broadcasting.
    arctan2 => |a, b| a.atan2(b),
    /// `logical_and(self, other)` elementwise, broadcasting.
    logical_and => |a, b| a.logical_and(b),
    /// `logical_or(self, other)` elementwise, broadcasting.
    logical_or => |a, b| a.logical_or(b),
    /// `logical_xor(self, other)` elementwise, broadcasting.
    logical_xor => |a, b| a.logical_xor(b),
    /// `bitwise_and(self, other)` elementwise, broadcasting.
    bitwise_and => |a, b| a.bitwise(b, BitOp::And),
    /// `bitwise_or(self, other)` elementwise, broadcasting.
    bitwise_or => |a, b| a.bitwise(b, BitOp::Or),
    /// `bitwise_xor(self, other)` elementwise, broadcasting.
    bitwise_xor => |a, b| a.bitwise(b, BitOp::Xor),
    __and__ => |a, b| a.bitwise(b, BitOp::And),
    __rand__ => |a, b| b.bitwise(a, BitOp::And),
    __or__ => |a, b| a.bitwise(b, BitOp::Or),
    __ror__ => |a, b| b.bitwise(a, BitOp::Or),
    __xor__ => |a, b| a.bitwise(b, BitOp::Xor),
    __rxor__ => |a, b| b.bitwise(a, BitOp::Xor),
    __mod__ => |a, b| a.remainder(b),
    __rmod__ => |a, b| b.remainder(a),
    __floordiv__ => |a, b| a.div_mode(b, Some(RoundingMode::Floor)),
    __rfloordiv__ => |a, b| b.div_mode(a, Some(RoundingMode::Floor)),
);

/// `rounding_mode=None | "trunc" | "floor"` with torch's error otherwise.
fn rounding_mode(mode: Option<&str>) -> PyResult<Option<RoundingMode>> {
    match mode {
        None => Ok(None),
        Some("trunc") => Ok(Some(RoundingMode::Trunc)),
        Some("floor") => Ok(Some(RoundingMode::Floor)),
        Some(m) => Err(PyRuntimeError::new_err(format!(
            "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '{m}'"
        ))),
    }
}

#[pymethods]
impl PyTensor {
    /// `self / other`; `rounding_mode` "trunc" or "floor" rounds the quotient.
    #[pyo3(signature = (other, *, rounding_mode=None))]
    fn div(
        &self,
        py: Python<'_>,
        other: &Bound<'_, PyAny>,
        rounding_mode: Option<&str>,
    ) -> PyResult<Py<PyTensor>> {
        let mode = self::rounding_mode(rounding_mode)?;
        let o = operand(other)?;
        let t = guarded(|| self.inner.div_mode(&o, mode))?;
        wrap(py, t)
    }

    /// Alias of `div`.
    #[pyo3(signature = (other, *, rounding_mode=None))]
    fn divide(
        &self,
        py: Python<'_>,
        other: &Bound<'_, PyAny>,
        rounding_mode: Option<&str>,
    ) -> PyResult<Py<PyTensor>> {
        self.div(py, other, rounding_mode)
    }

    /// Division rounded down (`//`).
    fn floor_divide(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyTensor>> {
        self.div(py, other, Some("floor"))
    }

    fn __pow__(
        &self,
        py: Python<'_>,
        other: &Bound<'_, PyAny>,
        _modulo: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyTensor>> {
        self.pow(py, other)
    }

    fn __rpow__(
        &self,
        py: Python<'_>,
        other: &Bound<'_, PyAny>,
        _modulo: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyTensor>> {
        let o = operand(other)?;
        let t = guarded(|| o.pow(&self.inner))?;
        wrap(py, t)
    }

    /// `self` where `condition` else `other`, broadcasting.
    fn r#where(
        &self,
        py: Python<'_>,
        condition: &Bound<'_, PyAny>,
        other: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyTensor>> {
        self._where(py, condition, other)
    }

    /// `cond ? self : other` elementwise.
    fn _where(
        &self,
        py: Python<'_>,
        cond: &Bound<'_, PyAny>,
        other: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyTensor>> {
        let c = operand(cond)?;
        let o = operand(other)?;
        let t = guarded(|| Tensor::where_cond(&c, &self.inner, &o))?;
        wrap(py, t)
    }
}

/// `cond ? a : b` elementwise, broadcasting.
#[pyfunction]
fn _where_tensors(
    py: Python<'_>,
    cond: &Bound<'_, PyAny>,
    a: &Bound<'_, PyAny>,
    b: &Bound<'_, PyAny>,
) -> PyResult<Py<PyTensor>> {
    let (c, x, y) = (operand(cond)?, operand(a)?, operand(b)?);
    wrap(py, guarded(|| Tensor::where_cond(&c, &x, &y))?)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_where_tensors, m)?)?;
    Ok(())
}
