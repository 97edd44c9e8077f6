//! Reading and writing `.safetensors` checkpoints through the format's reference implementation
//! (the `safetensors` crate, the core of the Python package of the same name).
//!
//! Tensors are written in their own dtype (BOOL, U8, I8-I64, F16, BF16, F32, F64),
//! little-endian, row-major, and read back in it: a bfloat16 checkpoint stays bfloat16, as with
//! torch. The unsigned types torch has no tensor type for (U16-U64) are widened to int64
//! (values are exact); the float8, sub-byte and complex dtypes are refused with an error naming
//! the tensor.

use std::collections::HashMap;
use std::path::Path;

use safetensors::tensor::{Dtype, Metadata, SafeTensors, TensorView};

use crate::error::{Error, Result};
use crate::tensor::{bf16, f16, DType, Tensor};

/// What a file holds: named tensors in stored order, and the header's string metadata.
pub type Loaded = (Vec<(String, Tensor)>, Option<HashMap<String, String>>);

/// A tensor's bytes as the format stores them, ready for `safetensors::serialize`.
struct Encoded {
    dtype: Dtype,
    shape: Vec<usize>,
    bytes: Vec<u8>,
}

impl safetensors::View for &Encoded {
    fn dtype(&self) -> Dtype {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn data(&self) -> std::borrow::Cow<'_, [u8]> {
        std::borrow::Cow::Borrowed(&self.bytes)
    }
    fn data_len(&self) -> usize {
        self.bytes.len()
    }
}

/// Elements as the format stores them: little-endian bytes.
trait LeBytes: Sized {
    /// Bytes per element.
    const N: usize;
    fn put(self, out: &mut Vec<u8>);
    fn get(bytes: &[u8]) -> Self;
}

macro_rules! le_bytes {
    ($($t:ty),*) => {$(
        impl LeBytes for $t {
            const N: usize = std::mem::size_of::<$t>();
            fn put(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            fn get(bytes: &[u8]) -> Self {
                let mut a = [0u8; std::mem::size_of::<$t>()];
                a.copy_from_slice(bytes);
                <$t>::from_le_bytes(a)
            }
        }
    )*};
}
le_bytes!(u8, i8, i16, i32, i64, f16, bf16, f32, f64);

impl LeBytes for bool {
    const N: usize = 1;
    fn put(self, out: &mut Vec<u8>) {
        out.push(u8::from(self));
    }
    fn get(bytes: &[u8]) -> Self {
        bytes[0] != 0
    }
}

/// The format's name for a dtype ferrograd stores.
fn format_dtype(d: DType) -> Dtype {
    match d {
        DType::Bool => Dtype::BOOL,
        DType::UInt8 => Dtype::U8,
        DType::Int8 => Dtype::I8,
        DType::Int16 => Dtype::I16,
        DType::Int32 => Dtype::I32,
        DType::Int64 => Dtype::I64,
        DType::Float16 => Dtype::F16,
        DType::BFloat16 => Dtype::BF16,
        DType::Float32 => Dtype::F32,
        DType::Float64 => Dtype::F64,
    }
}

fn encode(t: &Tensor) -> Result<Encoded> {
    let bytes = crate::tensor::storage::with_dtype!(t.dtype(), T => {
        let v = t.to_vec::<T>()?;
        let mut out = Vec::with_capacity(v.len() * T::N);
        for x in v {
            x.put(&mut out);
        }
        out
    });
    Ok(Encoded {
        dtype: format_dtype(t.dtype()),
        shape: t.shape().to_vec(),
        bytes,
    })
}

fn format_error(e: safetensors::SafeTensorError) -> Error {
    Error::runtime(format!("safetensors: {e}"))
}

fn encode_all(tensors: &[(String, Tensor)]) -> Result<Vec<(String, Encoded)>> {
    let mut seen = std::collections::HashSet::new();
    tensors
        .iter()
        .map(|(name, t)| {
            if !seen.insert(name.as_str()) {
                return Err(Error::value(format!(
                    "safetensors: the name {name:?} is given twice"
                )));
            }
            Ok((name.clone(), encode(t)?))
        })
        .collect()
}

/// The `.safetensors` bytes of named tensors, with optional string metadata in the header.
pub fn save(
    tensors: &[(String, Tensor)],
    metadata: Option<HashMap<String, String>>,
) -> Result<Vec<u8>> {
    let enc = encode_all(tensors)?;
    safetensors::serialize(enc.iter().map(|(n, e)| (n.as_str(), e)), metadata).map_err(format_error)
}

/// Writes named tensors to a `.safetensors` file (created or truncated).
pub fn save_file(
    tensors: &[(String, Tensor)],
    metadata: Option<HashMap<String, String>>,
    path: &Path,
) -> Result<()> {
    let enc = encode_all(tensors)?;
    safetensors::serialize_to_file(enc.iter().map(|(n, e)| (n.as_str(), e)), metadata, path)
        .map_err(|e| match e {
            safetensors::SafeTensorError::IoError(io) => Error::runtime(format!(
                "safetensors: cannot write {}: {io}",
                path.display()
            )),
            other => format_error(other),
        })
}

/// Little-endian elements of `N` bytes, converted by `f`.
fn decode<const N: usize, T>(bytes: &[u8], f: impl Fn([u8; N]) -> T) -> Vec<T> {
    bytes
        .chunks_exact(N)
        .map(|c| {
            let mut a = [0u8; N];
            a.copy_from_slice(c);
            f(a)
        })
        .collect()
}

fn tensor_of(name: &str, view: &TensorView<'_>) -> Result<Tensor> {
    let (b, shape) = (view.data(), view.shape());
    if let Some(d) = DType::ALL
        .into_iter()
        .find(|&d| format_dtype(d) == view.dtype())
    {
        return crate::tensor::storage::with_dtype!(d, T => Tensor::from_vec(
            b.chunks_exact(T::N).map(T::get).collect::<Vec<T>>(),
            shape,
        ));
    }
    match view.dtype() {
        // Unsigned types torch has no tensor type for widen to int64 (values are exact).
        Dtype::U16 => Tensor::from_vec(decode(b, |a| i64::from(u16::from_le_bytes(a))), shape),
        Dtype::U32 => Tensor::from_vec(decode(b, |a| i64::from(u32::from_le_bytes(a))), shape),
        Dtype::U64 => {
            let v: Vec<u64> = decode(b, u64::from_le_bytes);
            let v = v
                .into_iter()
                .map(|x| {
                    i64::try_from(x).map_err(|_| {
                        Error::value(format!(
                            "safetensors: tensor {name:?} holds the uint64 value {x}, which int64 cannot hold"
                        ))
                    })
                })
                .collect::<Result<Vec<i64>>>()?;
            Tensor::from_vec(v, shape)
        }
        other => Err(Error::type_error(format!(
            "safetensors: tensor {name:?} has dtype {other:?}, which ferrograd cannot load (it stores bool, uint8, int8-int64, float16, bfloat16, float32 and float64; uint16-uint64 files are widened to int64)"
        ))),
    }
}

/// Named tensors of a `.safetensors` buffer, in the order they are stored, and the header's
/// metadata.
pub fn load(bytes: &[u8]) -> Result<Loaded> {
    let (_, meta): (usize, Metadata) = SafeTensors::read_metadata(bytes).map_err(format_error)?;
    let st = SafeTensors::deserialize(bytes).map_err(format_error)?;
    let tensors = meta
        .offset_keys()
        .into_iter()
        .map(|name| {
            let view = st.tensor(&name).map_err(format_error)?;
            let t = tensor_of(&name, &view)?;
            Ok((name, t))
        })
        .collect::<Result<_>>()?;
    Ok((tensors, meta.metadata().clone()))
}

/// Reads a `.safetensors` file: its named tensors in stored order and the header's metadata.
pub fn load_file(path: &Path) -> Result<Loaded> {
    let bytes = std::fs::read(path)
        .map_err(|e| Error::runtime(format!("safetensors: cannot read {}: {e}", path.display())))?;
    load(&bytes)
}
