//! Bindings of `crate::ops::inplace`: every in-place op (the arithmetic operators, `fill_`,
//! `copy_`, the binary, clamping, indexing and random ones), each returning `self`.

use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;

use crate::ops::binary::{BitOp, RoundingMode};
use crate::ops::indexing::ScatterReduce;
use crate::python::args::Int;
use crate::python::errors::guarded;
use crate::python::tensor::{operand, tensor_of, PyTensor};
use crate::tensor::{DType, Tensor};

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
/// `name_(other, *, alpha)` returning `self` (`self op= alpha * other`) and the augmented
/// assignment `__iname__`, both calling `Tensor::call`.
macro_rules! inplace_alpha_methods {
    ($($(#[$doc:meta])* $name:ident, $dunder:ident => $call:ident),* $(,)?) => {
        #[pymethods]
        impl PyTensor {
            $(
                $(#[$doc])*
                #[pyo3(signature = (other, *, alpha=None))]
                fn $name(
                    slf: &Bound<'_, Self>,
                    other: &Bound<'_, PyAny>,
                    alpha: Option<&Bound<'_, PyAny>>,
                ) -> PyResult<Py<PyTensor>> {
                    let o = match crate::python::ops::binary::scaled_by_alpha(
                        stringify!($name),
                        &slf.get().inner,
                        other,
                        alpha,
                    )? {
                        Some(o) => o,
                        None => operand(other)?,
                    };
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
inplace_alpha_methods!(
    /// `self += alpha * other` in place; returns self.
    add_, __iadd__ => add_,
    /// `self -= alpha * other` in place; returns self.
    sub_, __isub__ => sub_,
);
inplace_methods!(
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

/// `name_(other)` returning `self`, computing `Tensor::binary_(other, call)` (the in-place
/// forms of binary ops without an operator).
macro_rules! binary_inplace_methods {
    ($($(#[$doc:meta])* $name:ident => $call:expr),* $(,)?) => {
        #[pymethods]
        impl PyTensor {
            $(
                $(#[$doc])*
                fn $name(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyTensor>> {
                    let o = operand(other)?;
                    guarded(|| slf.get().inner.binary_(&o, $call))?;
                    Ok(slf.clone().unbind())
                }
            )*
        }
    };
}
binary_inplace_methods!(
    /// `self ** exponent` in place; returns self.
    pow_ => Tensor::pow,
    /// `fmod(self, other)` in place; returns self.
    fmod_ => Tensor::fmod,
    /// `remainder(self, other)` in place; returns self.
    remainder_ => Tensor::remainder,
    /// `hypot(self, other)` in place; returns self.
    hypot_ => Tensor::hypot,
    /// `atan2(self, other)` in place; returns self.
    atan2_ => Tensor::atan2,
    /// `arctan2(self, other)` in place; returns self.
    arctan2_ => Tensor::atan2,
    /// `self / other` in place; returns self.
    true_divide_ => Tensor::div,
    /// Division rounded down in place; returns self.
    floor_divide_ => |a, b| a.div_mode(b, Some(RoundingMode::Floor)),
    /// `self == other` in place (1 or 0 in this dtype); returns self.
    eq_ => Tensor::eq_t,
    /// `self != other` in place; returns self.
    ne_ => Tensor::ne_t,
    /// `self < other` in place; returns self.
    lt_ => Tensor::lt_t,
    /// `self <= other` in place; returns self.
    le_ => Tensor::le_t,
    /// `self > other` in place; returns self.
    gt_ => Tensor::gt_t,
    /// `self >= other` in place; returns self.
    ge_ => Tensor::ge_t,
    /// `logical_and(self, other)` in place; returns self.
    logical_and_ => Tensor::logical_and,
    /// `logical_or(self, other)` in place; returns self.
    logical_or_ => Tensor::logical_or,
    /// `logical_xor(self, other)` in place; returns self.
    logical_xor_ => Tensor::logical_xor,
    /// `bitwise_and(self, other)` in place; returns self.
    bitwise_and_ => |a, b| a.bitwise(b, BitOp::And),
    /// `bitwise_or(self, other)` in place; returns self.
    bitwise_or_ => |a, b| a.bitwise(b, BitOp::Or),
    /// `bitwise_xor(self, other)` in place; returns self.
    bitwise_xor_ => |a, b| a.bitwise(b, BitOp::Xor),
    /// `max(self, min)` in place; returns self.
    clamp_min_ => Tensor::clamp_min,
    /// `min(self, max)` in place; returns self.
    clamp_max_ => Tensor::clamp_max,
);

/// `None` or absent is `None`; a number or tensor is an operand.
fn opt_operand(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Tensor>> {
    obj.filter(|o| !o.is_none()).map(operand).transpose()
}

/// A Python number (or one-element tensor) as f64, for scalar parameters.
fn number(obj: &Bound<'_, PyAny>) -> PyResult<f64> {
    if let Ok(t) = obj.cast::<PyTensor>() {
        let t = &t.get().inner;
        return guarded(|| t.item_f64());
    }
    obj.extract::<f64>()
}

#[pymethods]
impl PyTensor {
    /// The op registry's unary op `name` in place (behind `exp_`, `sin_`, ...).
    fn _unary_(slf: &Bound<'_, Self>, name: &str) -> PyResult<Py<PyTensor>> {
        let row = crate::ops::registry::UNARY
            .iter()
            .find(|r| r.name == name)
            .ok_or_else(|| PyValueError::new_err(format!("no unary op named {name}")))?;
        guarded(|| slf.get().inner.unary_(row.op))?;
        Ok(slf.clone().unbind())
    }

    /// Round (halves to even) in place, to `decimals` places; returns self.
    #[pyo3(signature = (*, decimals = Int(0)), text_signature = "($self, *, decimals=0)")]
    fn round_(slf: &Bound<'_, Self>, decimals: Int) -> PyResult<Py<PyTensor>> {
        guarded(|| slf.get().inner.round_(decimals.0))?;
        Ok(slf.clone().unbind())
    }

    /// `self * self` in place; returns self.
    fn square_(slf: &Bound<'_, Self>) -> PyResult<Py<PyTensor>> {
        guarded(|| slf.get().inner.unary_(Tensor::square))?;
        Ok(slf.clone().unbind())
    }

    /// Clamp into `[min, max]` in place; returns self.
    #[pyo3(signature = (min=None, max=None))]
    fn clamp_(
        slf: &Bound<'_, Self>,
        min: Option<&Bound<'_, PyAny>>,
        max: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyTensor>> {
        let (lo, hi) = (opt_operand(min)?, opt_operand(max)?);
        guarded(|| slf.get().inner.clamp_(lo.as_ref(), hi.as_ref()))?;
        Ok(slf.clone().unbind())
    }

    /// Alias of `clamp_`.
    #[pyo3(signature = (min=None, max=None))]
    fn clip_(
        slf: &Bound<'_, Self>,
        min: Option<&Bound<'_, PyAny>>,
        max: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyTensor>> {
        Self::clamp_(slf, min, max)
    }

    /// `self + weight * (end - self)` in place; returns self.
    fn lerp_(
        slf: &Bound<'_, Self>,
        end: &Bound<'_, PyAny>,
        weight: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyTensor>> {
        let e = tensor_of(end, "end")?;
        let w = operand(weight)?;
        guarded(|| slf.get().inner.lerp_(&e, &w))?;
        Ok(slf.clone().unbind())
    }

    /// `self + value * tensor1 * tensor2` in place; returns self.
    #[pyo3(signature = (tensor1, tensor2, *, value=1.0))]
    fn addcmul_(
        slf: &Bound<'_, Self>,
        tensor1: &Bound<'_, PyAny>,
        tensor2: &Bound<'_, PyAny>,
        value: f64,
    ) -> PyResult<Py<PyTensor>> {
        let (a, b) = (
            tensor_of(tensor1, "tensor1")?,
            tensor_of(tensor2, "tensor2")?,
        );
        guarded(|| slf.get().inner.addcmul_(&a, &b, value))?;
        Ok(slf.clone().unbind())
    }

    /// `self + value * tensor1 / tensor2` in place; returns self.
    #[pyo3(signature = (tensor1, tensor2, *, value=1.0))]
    fn addcdiv_(
        slf: &Bound<'_, Self>,
        tensor1: &Bound<'_, PyAny>,
        tensor2: &Bound<'_, PyAny>,
        value: f64,
    ) -> PyResult<Py<PyTensor>> {
        let (a, b) = (
            tensor_of(tensor1, "tensor1")?,
            tensor_of(tensor2, "tensor2")?,
        );
        guarded(|| slf.get().inner.addcdiv_(&a, &b, value))?;
        Ok(slf.clone().unbind())
    }

    /// Write `src` (tensor or number) along `dim` at `index` in place; returns self.
    #[pyo3(signature = (dim, index, src=None, value=None, *, reduce=None))]
    fn scatter_(
        slf: &Bound<'_, Self>,
        dim: Int,
        index: &Bound<'_, PyAny>,
        src: Option<&Bound<'_, PyAny>>,
        value: Option<&Bound<'_, PyAny>>,
        reduce: Option<&str>,
    ) -> PyResult<Py<PyTensor>> {
        let i = tensor_of(index, "index")?;
        let arg = src.or(value).ok_or_else(|| {
            PyTypeError::new_err("scatter_() missing required argument 'src' or 'value'")
        })?;
        let x = &slf.get().inner;
        match reduce {
            None => {
                if let Ok(s) = arg.cast::<PyTensor>() {
                    let s = s.get().inner.clone();
                    guarded(|| x.scatter_(dim.0, &i, &s))?;
                } else {
                    let v = number(arg)?;
                    guarded(|| x.scatter_value_(dim.0, &i, v))?;
                }
            }
            Some(r) => {
                // torch's legacy `reduce=` of scatter_: "add" or "multiply".
                let how = match r {
                    "add" => ScatterReduce::Sum,
                    "multiply" => ScatterReduce::Prod,
                    _ => {
                        return Err(PyRuntimeError::new_err(format!(
                            "reduce argument must be either add or multiply. Got {r}"
                        )))
                    }
                };
                let s = match arg.cast::<PyTensor>() {
                    Ok(s) => s.get().inner.clone(),
                    Err(_) => Tensor::full(i.shape(), number(arg)?, x.dtype()),
                };
                guarded(|| x.scatter_reduce_(dim.0, &i, &s, how, true))?;
            }
        }
        Ok(slf.clone().unbind())
    }

    /// Add `src` along `dim` at `index` in place; returns self.
    fn scatter_add_(
        slf: &Bound<'_, Self>,
        dim: Int,
        index: &Bound<'_, PyAny>,
        src: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyTensor>> {
        let (i, s) = (tensor_of(index, "index")?, tensor_of(src, "src")?);
        guarded(|| slf.get().inner.scatter_add_(dim.0, &i, &s))?;
        Ok(slf.clone().unbind())
    }

    /// Reduce `src` into self along `dim` at `index` in place; returns self.
    #[pyo3(signature = (dim, index, src, reduce, *, include_self=true))]
    fn scatter_reduce_(
        slf: &Bound<'_, Self>,
        dim: Int,
        index: &Bound<'_, PyAny>,
        src: &Bound<'_, PyAny>,
        reduce: &str,
        include_self: bool,
    ) -> PyResult<Py<PyTensor>> {
        let (i, s) = (tensor_of(index, "index")?, tensor_of(src, "src")?);
        let how = guarded(|| ScatterReduce::parse(reduce))?;
        guarded(|| {
            slf.get()
                .inner
                .scatter_reduce_(dim.0, &i, &s, how, include_self)
        })?;
        Ok(slf.clone().unbind())
    }

    /// Add `alpha * source` slices along `dim` at `index` in place; returns self.
    #[pyo3(signature = (dim, index, source, *, alpha=1.0))]
    fn index_add_(
        slf: &Bound<'_, Self>,
        dim: Int,
        index: &Bound<'_, PyAny>,
        source: &Bound<'_, PyAny>,
        alpha: f64,
    ) -> PyResult<Py<PyTensor>> {
        let (i, s) = (tensor_of(index, "index")?, tensor_of(source, "source")?);
        guarded(|| slf.get().inner.index_add_(dim.0, &i, &s, alpha))?;
        Ok(slf.clone().unbind())
    }

    /// Replace slices along `dim` at `index` by `source`'s in place; returns self.
    fn index_copy_(
        slf: &Bound<'_, Self>,
        dim: Int,
        index: &Bound<'_, PyAny>,
        source: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyTensor>> {
        let (i, s) = (tensor_of(index, "index")?, tensor_of(source, "source")?);
        guarded(|| slf.get().inner.index_copy_(dim.0, &i, &s))?;
        Ok(slf.clone().unbind())
    }

    /// Set the slices along `dim` at `index` to `value` in place; returns self.
    fn index_fill_(
        slf: &Bound<'_, Self>,
        dim: Int,
        index: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyTensor>> {
        let i = tensor_of(index, "index")?;
        let v = number(value)?;
        guarded(|| slf.get().inner.index_fill_(dim.0, &i, v))?;
        Ok(slf.clone().unbind())
    }

    /// Fill the positions where `mask` is true with `source`'s elements in place.
    fn masked_scatter_(
        slf: &Bound<'_, Self>,
        mask: &Bound<'_, PyAny>,
        source: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyTensor>> {
        let (m, s) = (tensor_of(mask, "mask")?, tensor_of(source, "source")?);
        guarded(|| slf.get().inner.masked_scatter_(&m, &s))?;
        Ok(slf.clone().unbind())
    }

    /// `num_samples` category indices (int64) per row of the non-negative weights `self`
    /// (1-D or 2-D); without `replacement` each category at most once per row.
    #[pyo3(signature = (num_samples, replacement=false, *, generator=None))]
    fn multinomial(
        &self,
        py: Python<'_>,
        num_samples: Int,
        replacement: bool,
        generator: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyTensor>> {
        let n = crate::python::args::non_negative(num_samples.0, || {
            "cannot sample n_sample <= 0 samples".to_string()
        })?;
        let t = with_generator(generator, || {
            Tensor::multinomial(&self.inner, n, replacement)
        })?;
        crate::python::tensor::wrap(py, t)
    }

    /// Fill with samples of N(mean, std²) in place; returns self.
    #[pyo3(signature = (mean=0.0, std=1.0, *, generator=None))]
    fn normal_(
        slf: &Bound<'_, Self>,
        mean: f64,
        std: f64,
        generator: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyTensor>> {
        with_generator(generator, || slf.get().inner.normal_(mean, std))?;
        Ok(slf.clone().unbind())
    }

    /// Fill with samples of U[from, to) in place; returns self.
    #[pyo3(signature = (from_=0.0, to=1.0, *, generator=None))]
    #[pyo3(text_signature = "($self, from_=0.0, to=1.0, *, generator=None)")]
    fn uniform_(
        slf: &Bound<'_, Self>,
        from_: f64,
        to: f64,
        generator: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyTensor>> {
        with_generator(generator, || slf.get().inner.uniform_(from_, to))?;
        Ok(slf.clone().unbind())
    }

    /// Fill with exponential samples of rate `lambd` in place; returns self.
    #[pyo3(signature = (lambd=1.0, *, generator=None))]
    fn exponential_(
        slf: &Bound<'_, Self>,
        lambd: f64,
        generator: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyTensor>> {
        with_generator(generator, || slf.get().inner.exponential_(lambd))?;
        Ok(slf.clone().unbind())
    }

    /// Fill with 0/1 samples, 1 with probability `p` (a number or a tensor) in place.
    #[pyo3(signature = (p=None, *, generator=None))]
    fn bernoulli_(
        slf: &Bound<'_, Self>,
        p: Option<&Bound<'_, PyAny>>,
        generator: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyTensor>> {
        let x = &slf.get().inner;
        match p {
            Some(p) if p.cast::<PyTensor>().is_ok() => {
                let pt = tensor_of(p, "p")?;
                with_generator(generator, || x.bernoulli_tensor_(&pt))?;
            }
            Some(p) if !p.is_none() => {
                let v: f64 = p.extract()?;
                with_generator(generator, || x.bernoulli_(v))?;
            }
            _ => with_generator(generator, || x.bernoulli_(0.5))?,
        }
        Ok(slf.clone().unbind())
    }

    /// Fill with integers from `[from, to)` in place: `random_(to)` draws from `[0, to)` and
    /// `random_()` from `[0, 2^mantissa]` of a float dtype (`[0, 2^63 - 1]` for int64).
    #[pyo3(signature = (from_=None, to=None, *, generator=None))]
    fn random_(
        slf: &Bound<'_, Self>,
        from_: Option<Int>,
        to: Option<Int>,
        generator: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyTensor>> {
        let x = &slf.get().inner;
        let top = match x.dtype() {
            DType::Float16 => (1i64 << 11) + 1,
            DType::BFloat16 => (1i64 << 8) + 1,
            DType::Float32 => (1i64 << 24) + 1,
            DType::Float64 => (1i64 << 53) + 1,
            DType::UInt8 => 256,
            DType::Int8 => 128,
            DType::Int16 => 1 << 15,
            DType::Int32 => 1 << 31,
            DType::Int64 => i64::MAX,
            DType::Bool => 2,
        };
        let (lo, hi) = match (from_, to) {
            (Some(f), Some(t)) => (f.0, t.0),
            (Some(t), None) => (0, t.0),
            (None, Some(t)) => (0, t.0),
            (None, None) => (0, top),
        };
        with_generator(generator, || x.random_(lo, hi))?;
        Ok(slf.clone().unbind())
    }
}

/// Run a random op drawing from `generator` (a `ferrograd.Generator`: the global stream is
/// reseeded from it and put back afterwards) or from the global stream.
fn with_generator<R>(
    generator: Option<&Bound<'_, PyAny>>,
    f: impl FnOnce() -> crate::error::Result<R>,
) -> PyResult<R> {
    match generator.filter(|g| !g.is_none()) {
        None => guarded(f),
        Some(g) => {
            let seed: u64 = g.call_method0("_next_seed")?.extract()?;
            let saved = crate::tensor::creation::rng_state();
            crate::tensor::creation::reseed(seed);
            let r = guarded(f);
            crate::tensor::creation::set_rng_state(&saved);
            r
        }
    }
}
