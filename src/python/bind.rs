//! The shapes every op binding shares, written once: argument conversion ([`Arg`]) and the
//! macros that turn a one-entry description of a method or function into its PyO3 binding.
//!
//! An entry names the Python parameters with their PyO3 types and the crate call that uses
//! them; the macro adds `py`, converts each parameter with [`Arg::value`] (inside the binding,
//! so errors keep their own message instead of PyO3's `argument 'x': ` prefix), runs the call
//! with torch's error mapping and wraps the result:
//!
//! ```ignore
//! tensor_methods! {
//!     /// Lower triangle.
//!     #[pyo3(signature = (diagonal = Int(0)), text_signature = "($self, diagonal=0)")]
//!     fn tril(x, diagonal: Int) => x.tril(diagonal);
//! }
//! tensor_functions! {
//!     register_generated;
//!     /// elu with `alpha`.
//!     fn _nn_elu(input: &Bound<'_, PyAny>, alpha: f64) => act::elu(&input, alpha);
//! }
//! ```

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyInt, PyList, PyTuple};

use super::args::{Int, Ints};
use super::tensor::{opt_tensor_of, tensor_of};
use super::PyDType;
use crate::tensor::{DType, Tensor};

/// A binding parameter as the value the crate call takes; `name` is its Python name (for
/// messages such as `input must be a Tensor, not int`).
pub(crate) trait Arg: Sized {
    type Value;
    fn value(self, name: &str) -> PyResult<Self::Value>;
}

/// Parameters PyO3 already converts completely.
macro_rules! plain_args {
    ($($t:ty),*) => {
        $(impl Arg for $t {
            type Value = $t;
            #[inline(always)]
            fn value(self, _name: &str) -> PyResult<$t> {
                Ok(self)
            }
        })*
    };
}
plain_args!(
    bool,
    f64,
    i64,
    usize,
    Vec<usize>,
    Option<f64>,
    Option<bool>,
    Option<i64>,
    Option<usize>
);

impl<'a> Arg for &'a str {
    type Value = &'a str;
    #[inline(always)]
    fn value(self, _name: &str) -> PyResult<&'a str> {
        Ok(self)
    }
}

impl<'a> Arg for Option<&'a str> {
    type Value = Option<&'a str>;
    #[inline(always)]
    fn value(self, _name: &str) -> PyResult<Option<&'a str>> {
        Ok(self)
    }
}

impl Arg for Int {
    type Value = i64;
    #[inline(always)]
    fn value(self, _name: &str) -> PyResult<i64> {
        Ok(self.0)
    }
}

impl Arg for Option<Int> {
    type Value = Option<i64>;
    #[inline(always)]
    fn value(self, _name: &str) -> PyResult<Option<i64>> {
        Ok(self.map(|v| v.0))
    }
}

impl Arg for Ints {
    type Value = Vec<i64>;
    #[inline(always)]
    fn value(self, _name: &str) -> PyResult<Vec<i64>> {
        Ok(self.0)
    }
}

/// A tensor parameter: `TypeError("<name> must be a Tensor, not <type>")` otherwise.
impl Arg for &Bound<'_, PyAny> {
    type Value = Tensor;
    #[inline(always)]
    fn value(self, name: &str) -> PyResult<Tensor> {
        tensor_of(self, name)
    }
}

/// An optional tensor parameter (`None` or absent is `None`).
impl Arg for Option<&Bound<'_, PyAny>> {
    type Value = Option<Tensor>;
    #[inline(always)]
    fn value(self, name: &str) -> PyResult<Option<Tensor>> {
        self.map(|o| opt_tensor_of(o, name))
            .transpose()
            .map(Option::flatten)
    }
}

/// torch's `dtype=` keyword: the element type to convert to first.
impl Arg for Option<&PyDType> {
    type Value = Option<DType>;
    #[inline(always)]
    fn value(self, _name: &str) -> PyResult<Option<DType>> {
        Ok(self.map(|d| d.d))
    }
}

impl Arg for &PyDType {
    type Value = DType;
    #[inline(always)]
    fn value(self, _name: &str) -> PyResult<DType> {
        Ok(self.d)
    }
}

/// `dim=None | int | sequence of int` (torch's `dim` of reductions), converted in the binding
/// so a bad one keeps the message `dim must be an int or a tuple of ints, not float`.
pub(crate) struct Dims<'py>(Bound<'py, PyAny>);

impl<'a, 'py> FromPyObject<'a, 'py> for Dims<'py> {
    type Error = PyErr;
    #[inline(always)]
    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        Ok(Dims(obj.to_owned()))
    }
}

impl Arg for Dims<'_> {
    type Value = Vec<i64>;
    #[inline(always)]
    fn value(self, _name: &str) -> PyResult<Vec<i64>> {
        dim_list(Some(&self.0))
    }
}

impl Arg for Option<Dims<'_>> {
    type Value = Vec<i64>;
    #[inline(always)]
    fn value(self, _name: &str) -> PyResult<Vec<i64>> {
        dim_list(self.as_ref().map(|d| &d.0))
    }
}

/// An int or a sequence of ints (`movedim`'s `source`, `roll`'s `shifts`), converted in the
/// binding.
pub(crate) struct IntOrSeq<'py>(Bound<'py, PyAny>);

impl<'a, 'py> FromPyObject<'a, 'py> for IntOrSeq<'py> {
    type Error = PyErr;
    #[inline(always)]
    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        Ok(IntOrSeq(obj.to_owned()))
    }
}

impl Arg for IntOrSeq<'_> {
    type Value = Vec<i64>;
    #[inline(always)]
    fn value(self, _name: &str) -> PyResult<Vec<i64>> {
        int_or_seq(&self.0)
    }
}

/// Absent or `None` is no ints.
impl Arg for Option<IntOrSeq<'_>> {
    type Value = Vec<i64>;
    #[inline(always)]
    fn value(self, _name: &str) -> PyResult<Vec<i64>> {
        match self {
            Some(v) if !v.0.is_none() => int_or_seq(&v.0),
            _ => Ok(Vec::new()),
        }
    }
}

/// An int or a sequence of ints.
pub(crate) fn int_or_seq(obj: &Bound<'_, PyAny>) -> PyResult<Vec<i64>> {
    if obj.is_instance_of::<PyTuple>() || obj.is_instance_of::<PyList>() {
        Ok(obj.extract::<Ints>()?.0)
    } else {
        Ok(vec![obj.extract::<Int>()?.0])
    }
}

/// A tensor or a Python number (wrapped as torch wraps one), converted in the binding.
pub(crate) struct Operand<'py>(Bound<'py, PyAny>);

impl<'a, 'py> FromPyObject<'a, 'py> for Operand<'py> {
    type Error = PyErr;
    #[inline(always)]
    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        Ok(Operand(obj.to_owned()))
    }
}

impl Arg for Operand<'_> {
    type Value = Tensor;
    #[inline(always)]
    fn value(self, _name: &str) -> PyResult<Tensor> {
        super::tensor::operand(&self.0)
    }
}

/// An iterable of tensors or `None` (advanced indices), converted in the binding.
pub(crate) struct OptTensors<'py>(Bound<'py, PyAny>);

impl<'a, 'py> FromPyObject<'a, 'py> for OptTensors<'py> {
    type Error = PyErr;
    #[inline(always)]
    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        Ok(OptTensors(obj.to_owned()))
    }
}

impl Arg for OptTensors<'_> {
    type Value = Vec<Option<Tensor>>;
    #[inline(always)]
    fn value(self, name: &str) -> PyResult<Vec<Option<Tensor>>> {
        super::opt_tensors(&self.0, name)
    }
}

/// `*dims` given as separate ints or as one sequence.
impl Arg for &Bound<'_, PyTuple> {
    type Value = Vec<i64>;
    #[inline(always)]
    fn value(self, _name: &str) -> PyResult<Vec<i64>> {
        dims_arg(self)
    }
}

/// Dimensions given as `*dims` or as one sequence.
pub(crate) fn dims_arg(args: &Bound<'_, PyTuple>) -> PyResult<Vec<i64>> {
    if args.len() == 1 {
        let a = args.get_item(0)?;
        if a.is_instance_of::<PyTuple>() || a.is_instance_of::<PyList>() {
            return Ok(a.extract::<Ints>()?.0);
        }
        if let Ok(s) = a.getattr("__index__") {
            let _ = s;
            return Ok(vec![a.extract::<Int>()?.0]);
        }
        return Ok(a.extract::<Ints>()?.0);
    }
    args.iter().map(|a| Ok(a.extract::<Int>()?.0)).collect()
}

/// `dim=None | int | sequence of int` as a list (empty: all dims).
pub(crate) fn dim_list(dim: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<i64>> {
    if let Some(d) = dim {
        if d.is_instance_of::<PyBool>() || d.is_instance_of::<PyFloat>() {
            return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                "dim must be an int or a tuple of ints, not {}",
                d.get_type().name()?
            )));
        }
    }
    match dim {
        None => Ok(Vec::new()),
        Some(d) if d.is_none() => Ok(Vec::new()),
        Some(d) if d.is_instance_of::<PyInt>() => Ok(vec![d.extract::<Int>()?.0]),
        Some(d) => Ok(d.extract::<Ints>()?.0),
    }
}

/// `x` converted to `dtype` first when given (torch's `dtype=` on reductions and softmax).
pub(crate) fn with_dtype(x: &Tensor, dtype: Option<DType>) -> crate::error::Result<Tensor> {
    match dtype {
        Some(d) => x.to_dtype(d),
        None => Ok(x.clone()),
    }
}

/// `Tensor` methods returning one tensor, one entry each:
/// `/// doc`, optional `#[pyo3(...)]`, then `fn name(x, param: PyType, ...) => call;` where `x`
/// is the tensor (`&Tensor`) and each param is its converted [`Arg::value`]. An entry marked
/// `heavy` (`fn sum(x, ...) heavy => ...`) releases the GIL on large tensors, one marked
/// `detached` always.
macro_rules! tensor_methods {
    ($(
        $(#[$($attr:tt)*])*
        fn $name:ident($x:ident $(, $arg:ident : $ty:ty)* $(,)?) $($heavy:ident)? => $call:expr;
    )*) => {
        #[pyo3::pymethods]
        impl $crate::python::tensor::PyTensor {
            $(
                $(#[$($attr)*])*
                fn $name(
                    &self,
                    py: pyo3::Python<'_>,
                    $($arg: $ty),*
                ) -> pyo3::PyResult<pyo3::Py<$crate::python::tensor::PyTensor>> {
                    $(let $arg = $crate::python::bind::Arg::value($arg, stringify!($arg))?;)*
                    let t = $crate::python::bind::tensor_methods!(
                        @run $($heavy)? py, &self.inner, |$x| $call
                    );
                    $crate::python::tensor::wrap(py, t)
                }
            )*
        }
    };
    (@run $py:ident, $t:expr, |$x:ident| $call:expr) => {{
        let $x: &$crate::tensor::Tensor = $t;
        $crate::python::errors::guarded(|| $call)?
    }};
    (@run heavy $py:ident, $t:expr, |$x:ident| $call:expr) => {
        $crate::python::tensor::heavy($py, $t, move |$x| $call)?
    };
    (@run detached $py:ident, $t:expr, |$x:ident| $call:expr) => {{
        let $x: $crate::tensor::Tensor = ($t).clone();
        $crate::python::errors::detached($py, move || {
            let $x = &$x;
            $call
        })?
    }};
}
pub(crate) use tensor_methods;

/// Module functions returning one tensor, run with the GIL released, one entry each:
/// `/// doc`, optional `#[pyo3(...)]`, then `fn name(param: PyType, ...) => call;` with each
/// param its converted [`Arg::value`] (a `&Bound<PyAny>` is a tensor, an
/// `Option<&Bound<PyAny>>` an optional one). An entry marked `heavy(param)` keeps the GIL when
/// that tensor is small. The first item names the generated `register(m)` that adds them all.
macro_rules! tensor_functions {
    (
        $register:ident;
        $(
            $(#[$($attr:tt)*])*
            fn $name:ident($($arg:ident : $ty:ty),* $(,)?) $(heavy($h:ident))? => $call:expr;
        )*
    ) => {
        $(
            #[pyo3::pyfunction]
            $(#[$($attr)*])*
            fn $name(
                py: pyo3::Python<'_>,
                $($arg: $ty),*
            ) -> pyo3::PyResult<pyo3::Py<$crate::python::tensor::PyTensor>> {
                $(let $arg = $crate::python::bind::Arg::value($arg, stringify!($arg))?;)*
                let t = $crate::python::bind::tensor_functions!(
                    @run py $(heavy($h))? move || $call
                );
                $crate::python::tensor::wrap(py, t)
            }
        )*

        pub(crate) fn $register(
            m: &pyo3::Bound<'_, pyo3::types::PyModule>,
        ) -> pyo3::PyResult<()> {
            use pyo3::types::PyModuleMethods;
            $(m.add_function(pyo3::wrap_pyfunction!($name, m)?)?;)*
            Ok(())
        }
    };
    (@run $py:ident $f:expr) => {
        $crate::python::errors::detached($py, $f)?
    };
    (@run $py:ident heavy($h:ident) $f:expr) => {{
        let big = $h.numel() >= $crate::python::tensor::HEAVY_ELEMENTS;
        let f = $f;
        if big {
            $crate::python::errors::detached($py, f)?
        } else {
            $crate::python::errors::guarded(f)?
        }
    }};
}
pub(crate) use tensor_functions;

/// Elementwise `Tensor` methods without parameters, `name => "doc"` each: the GIL is released
/// on large tensors. Also takes the rows of an op registry (`name: "doc", Domain, Grad,
/// [reference];`), so a registry macro can hand its rows here (`registry_macro!(unary_methods)`).
macro_rules! unary_methods {
    ($($name:ident: $doc:literal, $domain:ident, $grad:ident, [$($reference:tt)*];)+) => {
        $crate::python::bind::unary_methods!($($name => $doc),*);
    };
    ($($name:ident => $doc:literal),* $(,)?) => {
        #[pyo3::pymethods]
        impl $crate::python::tensor::PyTensor {
            $(
                #[doc = $doc]
                fn $name(
                    &self,
                    py: pyo3::Python<'_>,
                ) -> pyo3::PyResult<pyo3::Py<$crate::python::tensor::PyTensor>> {
                    let t = $crate::python::tensor::heavy(py, &self.inner, |x| x.$name())?;
                    $crate::python::tensor::wrap(py, t)
                }
            )*
        }
    };
}
pub(crate) use unary_methods;

/// `ferrograd._C.<name>(input)` for each row of the op registry's unary table (the function
/// form of the method `unary_methods!` makes), registered by the generated `register_functions`.
macro_rules! unary_functions {
    ($($name:ident: $doc:literal, $domain:ident, $grad:ident, [$($reference:tt)*];)+) => {
        fn register_functions(m: &pyo3::Bound<'_, pyo3::types::PyModule>) -> pyo3::PyResult<()> {
            use pyo3::types::PyModuleMethods;
            $(
                #[pyo3::pyfunction]
                #[doc = $doc]
                fn $name(
                    py: pyo3::Python<'_>,
                    input: &pyo3::Bound<'_, pyo3::PyAny>,
                ) -> pyo3::PyResult<pyo3::Py<$crate::python::tensor::PyTensor>> {
                    use pyo3::types::PyAnyMethods;
                    let input = input
                        .cast::<$crate::python::tensor::PyTensor>()
                        .map_err(|_| {
                            pyo3::exceptions::PyTypeError::new_err(format!(
                                "{}(): argument 'input' (position 1) must be Tensor, not {}",
                                stringify!($name),
                                input.get_type().name().map(|n| n.to_string()).unwrap_or_default()
                            ))
                        })?
                        .borrow();
                    let t = $crate::python::tensor::heavy(py, &input.inner, |x| x.$name())?;
                    $crate::python::tensor::wrap(py, t)
                }
                m.add_function(pyo3::wrap_pyfunction!($name, m)?)?;
            )+
            Ok(())
        }
    };
}
pub(crate) use unary_functions;
