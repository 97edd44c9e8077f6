//! Reading and writing `.safetensors` checkpoints through the format's reference implementation
//! (the `safetensors` crate, the core of the Python package of the same name).
//!
//! Tensors are written in their own dtype (F32, F64, I64, BOOL), little-endian, row-major.
//! Reading also accepts the dtypes ferrograd does not store: F16 and BF16 are widened to
//! float32, and the narrower or unsigned integers to int64 (values are exact); the float8,
//! sub-byte and complex dtypes are refused with an error naming the tensor.

use std::collections::HashMap;
use std::path::Path;

use safetensors::tensor::{Dtype, Metadata, SafeTensors, TensorView};

use crate::error::{Error, Result};
use crate::tensor::{DType, Tensor};

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

fn encode(t: &Tensor) -> Result<Encoded> {
    let (dtype, bytes) = match t.dtype() {
        DType::Float32 => (
            Dtype::F32,
            t.to_vec::<f32>()?
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
        ),
        DType::Float64 => (
            Dtype::F64,
            t.to_vec::<f64>()?
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
        ),
        DType::Int64 => (
            Dtype::I64,
            t.to_vec::<i64>()?
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
        ),
        DType::Bool => (
            Dtype::BOOL,
            t.to_vec::<bool>()?.iter().map(|&v| u8::from(v)).collect(),
        ),
    };
    Ok(Encoded {
        dtype,
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
    match view.dtype() {
        Dtype::F32 => Tensor::from_vec(decode(b, f32::from_le_bytes), shape),
        Dtype::F64 => Tensor::from_vec(decode(b, f64::from_le_bytes), shape),
        Dtype::I64 => Tensor::from_vec(decode(b, i64::from_le_bytes), shape),
        Dtype::BOOL => Tensor::from_vec(b.iter().map(|&v| v != 0).collect::<Vec<bool>>(), shape),
        Dtype::F16 => Tensor::from_vec(
            decode(b, |a| half::f16::from_le_bytes(a).to_f32()),
            shape,
        ),
        Dtype::BF16 => Tensor::from_vec(
            decode(b, |a| half::bf16::from_le_bytes(a).to_f32()),
            shape,
        ),
        Dtype::I32 => Tensor::from_vec(decode(b, |a| i64::from(i32::from_le_bytes(a))), shape),
        Dtype::I16 => Tensor::from_vec(decode(b, |a| i64::from(i16::from_le_bytes(a))), shape),
        Dtype::I8 => Tensor::from_vec(decode(b, |a: [u8; 1]| i64::from(a[0] as i8)), shape),
        Dtype::U8 => Tensor::from_vec(decode(b, |a: [u8; 1]| i64::from(a[0])), shape),
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
            "safetensors: tensor {name:?} has dtype {other:?}, which ferrograd cannot load (it stores float32, float64, int64 and bool; float16/bfloat16 and integer files are converted)"
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
