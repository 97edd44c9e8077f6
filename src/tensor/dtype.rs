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
///
/// The narrow types are storage types: integer kernels compute in int64 and half kernels in
/// float32 (see [`DType::compute`]), and the result is rounded or wrapped on store, as torch's
/// CPU kernels do for float16/bfloat16.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    /// `bool`
    Bool,
    /// `uint8`
    UInt8,
    /// `int8`
    Int8,
    /// `int16`
    Int16,
    /// `int32`
    Int32,
    /// `int64`
    Int64,
    /// `float16` (IEEE half precision)
    Float16,
    /// `bfloat16` (float32's exponent, 8 bits of mantissa)
    BFloat16,
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
    /// Every dtype, narrowest category first.
    pub const ALL: [DType; 10] = [
        DType::Bool,
        DType::UInt8,
        DType::Int8,
        DType::Int16,
        DType::Int32,
        DType::Int64,
        DType::Float16,
        DType::BFloat16,
        DType::Float32,
        DType::Float64,
    ];
    /// True for the floating types (float16, bfloat16, float32, float64).
    pub fn is_float(self) -> bool {
        matches!(
            self,
            DType::Float16 | DType::BFloat16 | DType::Float32 | DType::Float64
        )
    }
    /// True for the integer types (not bool).
    pub fn is_integer(self) -> bool {
        matches!(
            self,
            DType::UInt8 | DType::Int8 | DType::Int16 | DType::Int32 | DType::Int64
        )
    }
    /// True for float16 and bfloat16, which compute in float32.
    pub fn is_half(self) -> bool {
        matches!(self, DType::Float16 | DType::BFloat16)
    }
    /// True for the types that are only stored, never computed in: kernels widen them to
    /// [`DType::compute`] and narrow the result on store.
    pub fn is_narrow(self) -> bool {
        self.compute() != self
    }
    /// The type kernels compute in for elements of this type: int64 for the narrow integers,
    /// float32 for the half types, the type itself otherwise.
    pub fn compute(self) -> DType {
        match self {
            DType::UInt8 | DType::Int8 | DType::Int16 | DType::Int32 => DType::Int64,
            DType::Float16 | DType::BFloat16 => DType::Float32,
            d => d,
        }
    }
    /// 0 for bool, 1 for integers, 2 for floats.
    fn category(self) -> u8 {
        if self == DType::Bool {
            0
        } else if self.is_integer() {
            1
        } else {
            2
        }
    }
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::Bool | DType::UInt8 | DType::Int8 => 1,
            DType::Int16 | DType::Float16 | DType::BFloat16 => 2,
            DType::Int32 | DType::Float32 => 4,
            DType::Int64 | DType::Float64 => 8,
        }
    }
    /// torch's name, e.g. `float32`.
    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::UInt8 => "uint8",
            DType::Int8 => "int8",
            DType::Int16 => "int16",
            DType::Int32 => "int32",
            DType::Int64 => "int64",
            DType::Float16 => "float16",
            DType::BFloat16 => "bfloat16",
            DType::Float32 => "float32",
            DType::Float64 => "float64",
        }
    }
    /// The dtype named `name` (torch's names and aliases: `float`, `half`, `long`, `int`, ...).
    pub fn from_name(name: &str) -> Option<DType> {
        Some(match name {
            "bool" => DType::Bool,
            "uint8" => DType::UInt8,
            "int8" => DType::Int8,
            "int16" | "short" => DType::Int16,
            "int32" | "int" => DType::Int32,
            "int64" | "long" => DType::Int64,
            "float16" | "half" => DType::Float16,
            "bfloat16" => DType::BFloat16,
            "float32" | "float" => DType::Float32,
            "float64" | "double" => DType::Float64,
            _ => return None,
        })
    }
    /// torch's legacy tensor type name, e.g. `FloatTensor`, used in error messages.
    pub fn legacy_name(self) -> &'static str {
        match self {
            DType::Bool => "BoolTensor",
            DType::UInt8 => "ByteTensor",
            DType::Int8 => "CharTensor",
            DType::Int16 => "ShortTensor",
            DType::Int32 => "IntTensor",
            DType::Int64 => "LongTensor",
            DType::Float16 => "HalfTensor",
            DType::BFloat16 => "BFloat16Tensor",
            DType::Float32 => "FloatTensor",
            DType::Float64 => "DoubleTensor",
        }
    }
    /// The C type name torch prints in some messages (`float`, `double`, `long int`, `bool`).
    pub fn c_name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::UInt8 => "unsigned char",
            DType::Int8 => "signed char",
            DType::Int16 => "short int",
            DType::Int32 => "int",
            DType::Int64 => "long int",
            DType::Float16 => "c10::Half",
            DType::BFloat16 => "c10::BFloat16",
            DType::Float32 => "float",
            DType::Float64 => "double",
        }
    }
    /// torch's ScalarType name (`Float`, `Double`, `Long`, `Half`, ...), used in messages.
    pub fn scalar_type_name(self) -> &'static str {
        match self {
            DType::Bool => "Bool",
            DType::UInt8 => "Byte",
            DType::Int8 => "Char",
            DType::Int16 => "Short",
            DType::Int32 => "Int",
            DType::Int64 => "Long",
            DType::Float16 => "Half",
            DType::BFloat16 => "BFloat16",
            DType::Float32 => "Float",
            DType::Float64 => "Double",
        }
    }
    /// Whether the number `v` fits this type as torch's scalar conversion checks it
    /// (`c10::overflows`): integers take their range (unsigned ones also the negatives that
    /// wrap, -255 for uint8), never NaN or inf; floats and bool take anything (a float beyond a
    /// half type's range becomes inf, as in torch). `Err` is torch's message, naming the C type.
    pub fn check_scalar(self, v: f64) -> crate::error::Result<()> {
        let (lo, hi) = match self {
            DType::UInt8 => (-255.0, 255.0),
            DType::Int8 => (-128.0, 127.0),
            DType::Int16 => (-32768.0, 32767.0),
            DType::Int32 => (-2_147_483_648.0, 2_147_483_647.0),
            // 2^63 itself is let through: it is what the largest int64 becomes as an f64.
            DType::Int64 => (-9_223_372_036_854_775_808.0, 9_223_372_036_854_775_808.0),
            _ => return Ok(()),
        };
        if (lo..=hi).contains(&v) {
            Ok(())
        } else {
            Err(crate::error::Error::runtime(format!(
                "value cannot be converted to type {}_t without overflow",
                self.name()
            )))
        }
    }
    /// The smallest type both `a` and `b` convert to without loss of category (torch's
    /// `promoteTypes`): uint8 with int8 is int16, float16 with bfloat16 is float32.
    pub fn promote(a: DType, b: DType) -> DType {
        if a == b {
            return a;
        }
        let (ca, cb) = (a.category(), b.category());
        if ca != cb {
            return if ca > cb { a } else { b };
        }
        match (a, b) {
            (DType::UInt8, DType::Int8) | (DType::Int8, DType::UInt8) => DType::Int16,
            (DType::Float16, DType::BFloat16) | (DType::BFloat16, DType::Float16) => DType::Float32,
            _ if a.size() >= b.size() => a,
            _ => b,
        }
    }
}

impl DType {
    /// Whether a value of `from` may be cast to `to` under torch's casting rules
    /// (`torch.can_cast`): never to a lower category (float to integer, non-bool to bool).
    pub fn can_cast(from: DType, to: DType) -> bool {
        from.category() <= to.category()
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
    fn promotion_follows_torchs_table() {
        use DType::*;
        // torch.promote_types over the pairs that are not "the wider of one category".
        let cases = [
            (UInt8, Int8, Int16),
            (UInt8, Int16, Int16),
            (Int8, Int32, Int32),
            (UInt8, Int64, Int64),
            (Float16, BFloat16, Float32),
            (BFloat16, Float32, Float32),
            (Float16, Float64, Float64),
            (Int64, Float16, Float16),
            (UInt8, BFloat16, BFloat16),
            (Bool, UInt8, UInt8),
            (Bool, Float16, Float16),
        ];
        for (a, b, want) in cases {
            assert_eq!(DType::promote(a, b), want, "{a} with {b}");
            assert_eq!(DType::promote(b, a), want, "{b} with {a}");
        }
    }

    #[test]
    fn scalar_checks_follow_c10_overflows() {
        use DType::*;
        assert!(Int8.check_scalar(127.0).is_ok() && Int8.check_scalar(128.0).is_err());
        assert!(UInt8.check_scalar(-255.0).is_ok() && UInt8.check_scalar(256.0).is_err());
        assert!(
            Int32.check_scalar(f64::NAN).is_err() && Int64.check_scalar(f64::INFINITY).is_err()
        );
        assert!(Float16.check_scalar(1e6).is_ok() && Bool.check_scalar(f64::NAN).is_ok());
    }

    #[test]
    fn half_tensor_times_python_float_stays_half() {
        let t = result_type(&[
            (DType::Float16, Priority::Dim),
            (DType::Float32, Priority::Scalar),
        ]);
        assert_eq!(t, DType::Float16);
        let t = result_type(&[
            (DType::Int8, Priority::Dim),
            (DType::Int64, Priority::Scalar),
        ]);
        assert_eq!(t, DType::Int8);
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
