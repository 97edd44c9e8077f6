//! The registry of ops: one row per op, from which the rest is derived. The Python bindings
//! make a `Tensor` method and a `ferrograd` function of each row, `_C._registry()` hands the rows
//! to the Python op table, and `tests/ops.rs` checks every row's forward against its reference
//! and its gradient against finite differences, so a new op is its kernel and rule (in its
//! family's file), its row here, and its stub.
//!
//! Rows are kept in a macro so that code can be generated from them at compile time (the
//! bindings are `#[pymethods]`); [`UNARY`] is the same table as data.

use crate::error::Result;
use crate::tensor::Tensor;

/// Where the tests derived from the registry draw an op's inputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Domain {
    /// Any real number.
    Real,
    /// x > 0.
    Positive,
    /// -1 < x < 1.
    OpenUnit,
    /// x > 1.
    AboveOne,
    /// x ≠ 0.
    NonZero,
    /// Integers (ops defined on bool and integer tensors only).
    Integer,
}

impl Domain {
    /// The name the Python table reads (`_C._registry()`).
    pub fn name(self) -> &'static str {
        match self {
            Domain::Real => "real",
            Domain::Positive => "positive",
            Domain::OpenUnit => "open_unit",
            Domain::AboveOne => "above_one",
            Domain::NonZero => "nonzero",
            Domain::Integer => "integer",
        }
    }
}

/// What backward does with an op.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Grad {
    /// Differentiable: the gradient is checked against finite differences.
    Smooth,
    /// Piecewise constant (rounding, sign): the gradient is zero.
    Zero,
    /// The output is bool or integer: nothing to differentiate.
    None,
}

impl Grad {
    /// The name the Python table reads (`_C._registry()`).
    pub fn name(self) -> &'static str {
        match self {
            Grad::Smooth => "smooth",
            Grad::Zero => "zero",
            Grad::None => "none",
        }
    }
}

/// One elementwise unary op.
#[derive(Clone, Copy)]
pub struct UnaryInfo {
    /// torch's name (the `Tensor` method and the `ferrograd` function).
    pub name: &'static str,
    /// One line for the Python docstring.
    pub doc: &'static str,
    /// The op.
    pub op: fn(&Tensor) -> Result<Tensor>,
    /// Where its inputs come from in tests.
    pub domain: Domain,
    /// How it differentiates.
    pub grad: Grad,
    /// Its value in float64 from the standard library or a closed form (`None` where Rust has
    /// no independent one; Python's table checks those against `math`).
    pub reference: Option<fn(f64) -> f64>,
}

/// Calls `$then!` with every elementwise unary op, one row each:
/// `name: "doc", Domain, Grad, [reference];` (`[]` for none).
#[macro_export]
#[doc(hidden)]
macro_rules! ferrograd_unary_ops {
    ($then:ident) => {
        $then! {
            exp: "e^x elementwise.", Real, Smooth, [f64::exp];
            log: "Natural logarithm elementwise.", Positive, Smooth, [f64::ln];
            sin: "Sine elementwise.", Real, Smooth, [f64::sin];
            cos: "Cosine elementwise.", Real, Smooth, [f64::cos];
            tanh: "Hyperbolic tangent elementwise.", Real, Smooth, [f64::tanh];
            sigmoid: "Logistic sigmoid elementwise.", Real, Smooth, [|v: f64| 1.0 / (1.0 + (-v).exp())];
            relu: "max(x, 0) elementwise.", NonZero, Smooth, [|v: f64| v.max(0.0)];
            sqrt: "Square root elementwise.", Positive, Smooth, [f64::sqrt];
            abs: "Absolute value elementwise.", NonZero, Smooth, [f64::abs];
            neg: "Negation elementwise.", Real, Smooth, [|v: f64| -v];
            sign: "Sign (-1, 0, 1) elementwise.", NonZero, Zero, [f64::signum];
            exp2: "2^x elementwise.", Real, Smooth, [f64::exp2];
            log2: "Base-2 logarithm elementwise.", Positive, Smooth, [f64::log2];
            log10: "Base-10 logarithm elementwise.", Positive, Smooth, [f64::log10];
            log1p: "ln(1 + x) elementwise.", Positive, Smooth, [f64::ln_1p];
            expm1: "e^x - 1 elementwise.", Real, Smooth, [f64::exp_m1];
            rsqrt: "1 / sqrt(x) elementwise.", Positive, Smooth, [|v: f64| 1.0 / v.sqrt()];
            reciprocal: "1 / x elementwise.", NonZero, Smooth, [f64::recip];
            tan: "Tangent elementwise.", OpenUnit, Smooth, [f64::tan];
            asin: "Arcsine elementwise.", OpenUnit, Smooth, [f64::asin];
            acos: "Arccosine elementwise.", OpenUnit, Smooth, [f64::acos];
            atan: "Arctangent elementwise.", Real, Smooth, [f64::atan];
            sinh: "Hyperbolic sine elementwise.", Real, Smooth, [f64::sinh];
            cosh: "Hyperbolic cosine elementwise.", Real, Smooth, [f64::cosh];
            asinh: "Inverse hyperbolic sine elementwise.", Real, Smooth, [f64::asinh];
            acosh: "Inverse hyperbolic cosine elementwise.", AboveOne, Smooth, [f64::acosh];
            atanh: "Inverse hyperbolic tangent elementwise.", OpenUnit, Smooth, [f64::atanh];
            erf: "Error function elementwise.", Real, Smooth, [];
            erfc: "Complementary error function elementwise.", Real, Smooth, [];
            erfinv: "Inverse error function elementwise.", OpenUnit, Smooth, [|y: f64| $crate::ops::registry::invert_increasing(libm::erf, y)];
            floor: "Round down elementwise (zero gradient).", NonZero, Zero, [f64::floor];
            ceil: "Round up elementwise (zero gradient).", NonZero, Zero, [f64::ceil];
            trunc: "Round towards zero elementwise (zero gradient).", NonZero, Zero, [f64::trunc];
            frac: "Fractional part x - trunc(x) elementwise.", NonZero, Smooth, [|v: f64| v.fract()];
            isnan: "Elementwise NaN test (bool).", Real, None, [|v: f64| f64::from(u8::from(v.is_nan()))];
            isinf: "Elementwise infinity test (bool).", Real, None, [|v: f64| f64::from(u8::from(v.is_infinite()))];
            isfinite: "Elementwise finiteness test (bool).", Real, None, [|v: f64| f64::from(u8::from(v.is_finite()))];
            logical_not: "Elementwise logical not (bool).", Real, None, [|v: f64| f64::from(u8::from(v == 0.0))];
            bitwise_not: "Bitwise not (bool or integer tensors).", Integer, None, [|v: f64| -v - 1.0];
        }
    };
}

/// `f⁻¹(y)` for an increasing `f` by bisection on [-40, 40]: a slow reference that shares no
/// code with the op it checks.
pub fn invert_increasing(f: fn(f64) -> f64, y: f64) -> f64 {
    let (mut lo, mut hi) = (-40.0f64, 40.0f64);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if mid == lo || mid == hi {
            break;
        }
        if f(mid) < y {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

macro_rules! unary_table {
    ($($name:ident: $doc:literal, $domain:ident, $grad:ident, [$($reference:expr)?];)*) => {
        /// Every elementwise unary op, as data.
        pub static UNARY: &[UnaryInfo] = &[$(UnaryInfo {
            name: stringify!($name),
            doc: $doc,
            op: Tensor::$name,
            domain: Domain::$domain,
            grad: Grad::$grad,
            reference: unary_table!(@reference $($reference)?),
        }),*];
    };
    (@reference $reference:expr) => { Some($reference) };
    (@reference) => { None };
}

ferrograd_unary_ops!(unary_table);
