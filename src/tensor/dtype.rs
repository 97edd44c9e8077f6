//! Element types and torch's type-promotion rules for them.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether float64 is the default floating type (torch's `set_default_dtype`), else float32.
static DEFAULT_IS_F64: AtomicBool = AtomicBool::new(false);

/// The type integers become in float ops (true division, a float Python number, softmax...):
/// float32 unless [`set_default_float`] chose float64. Process-wide, as torch's is.
pub fn default_float() -> DType {
    if DEFAULT_IS_F64.load(Ordering::Relaxed) {
        DType::Float64
    } else {
        DType::Float32
    }
}

/// Choose the default floating type; only float32 and float64 are allowed (torch's message
/// otherwise).
pub fn set_default_float(d: DType) -> crate::error::Result<()> {
    if !d.is_float() {
        return Err(crate::error::Error::type_error(
            "only floating-point types are supported as the default type",
        ));
    }
    DEFAULT_IS_F64.store(d == DType::Float64, Ordering::Relaxed);
    Ok(())
}

/// The element type of a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// `bool`
    Bool,
    /// `int64`
    Int64,
    /// `float32`, the default floating type.
    Float32,
    /// `float64`
    Float64,
}

/// Where an operand of a binary op came from; torch lets higher categories of lower priority
/// operands win only when they raise the category (a Python float makes an int tensor float).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Priority {
    /// A Python number.
    Scalar,
    /// A zero-dimensional tensor.
    ZeroDim,
    /// A tensor with at least one dimension.
    Dim,
}

impl DType {
    /// True for float32 and float64.
    pub fn is_float(self) -> bool {
        matches!(self, DType::Float32 | DType::Float64)
    }
    /// 0 for bool, 1 for integers, 2 for floats.
    fn category(self) -> u8 {
        match self {
            DType::Bool => 0,
            DType::Int64 => 1,
            DType::Float32 | DType::Float64 => 2,
        }
    }
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::Bool => 1,
            DType::Int64 | DType::Float64 => 8,
            DType::Float32 => 4,
        }
    }
    /// torch's name, e.g. `float32`.
    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::Int64 => "int64",
            DType::Float32 => "float32",
            DType::Float64 => "float64",
        }
    }
    /// torch's legacy tensor type name, e.g. `FloatTensor`, used in error messages.
    pub fn legacy_name(self) -> &'static str {
        match self {
            DType::Bool => "BoolTensor",
            DType::Int64 => "LongTensor",
            DType::Float32 => "FloatTensor",
            DType::Float64 => "DoubleTensor",
        }
    }
    /// The C type name torch prints in some messages (`float`, `double`, `long int`, `bool`).
    pub fn c_name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::Int64 => "long int",
            DType::Float32 => "float",
            DType::Float64 => "double",
        }
    }
    /// The smallest type both `a` and `b` convert to without loss of category.
    pub fn promote(a: DType, b: DType) -> DType {
        a.max(b)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// torch's `result_type` over operands of different priorities (c10 `ResultTypeState`).
pub fn result_type(operands: &[(DType, Priority)]) -> DType {
    let mut by_priority: [Option<DType>; 3] = [None; 3];
    for &(d, p) in operands {
        let slot = &mut by_priority[p as usize];
        *slot = Some(slot.map_or(d, |s| DType::promote(s, d)));
    }
    let combine = |higher: Option<DType>, lower: Option<DType>| -> Option<DType> {
        match (higher, lower) {
            (None, l) => l,
            (h, None) => h,
            (Some(h), Some(l)) => {
                if l.category() > h.category() {
                    Some(DType::promote(h, l))
                } else {
                    Some(h)
                }
            }
        }
    };
    let [scalar, zero, dim] = by_priority;
    combine(dim, combine(zero, scalar)).unwrap_or_else(default_float)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float32_tensor_times_python_float_stays_float32() {
        let t = result_type(&[
            (DType::Float32, Priority::Dim),
            (DType::Float32, Priority::Scalar),
        ]);
        assert_eq!(t, DType::Float32);
    }

    #[test]
    fn int_tensor_times_python_float_is_default_float() {
        let t = result_type(&[
            (DType::Int64, Priority::Dim),
            (DType::Float32, Priority::Scalar),
        ]);
        assert_eq!(t, DType::Float32);
    }

    #[test]
    fn zero_dim_double_does_not_promote_float_tensor() {
        let t = result_type(&[
            (DType::Float32, Priority::Dim),
            (DType::Float64, Priority::ZeroDim),
        ]);
        assert_eq!(t, DType::Float32);
        let t = result_type(&[
            (DType::Int64, Priority::Dim),
            (DType::Float64, Priority::ZeroDim),
        ]);
        assert_eq!(t, DType::Float64);
    }

    #[test]
    fn bool_tensor_plus_python_int_is_int64() {
        let t = result_type(&[
            (DType::Bool, Priority::Dim),
            (DType::Int64, Priority::Scalar),
        ]);
        assert_eq!(t, DType::Int64);
    }
}
