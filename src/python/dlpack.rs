//! DLPack: `Tensor.__dlpack__`, `Tensor.__dlpack_device__` and `_from_dlpack_capsule` (behind
//! `ferrograd.from_dlpack`), sharing memory both ways with NumPy, torch, JAX and any producer.
//!
//! The C structs of `dlpack.h` (v1.x, with the legacy unversioned `DLManagedTensor`) are declared
//! here rather than taken from a crate. `dlpark` 0.10 was evaluated: it builds on pyo3 0.30 and
//! is maintained (DLPack 1.3), but it is ~11k lines with its own ownership model
//! (managed/metadata/allocation layers) and adds `snafu` and `bitflags`; mapping it onto
//! `Arc<Storage>` and `Storage::from_foreign` took about as much code as the structs themselves,
//! which are ~40 lines and fixed by the ABI.
//!
//! Ownership. Export: the capsule's `DLManagedTensor[Versioned]` lives in one heap block that
//! also holds an `Arc` of the tensor's storage, so the memory outlives the producer tensor until
//! the consumer calls the deleter (or the unconsumed capsule dies). Import: the capsule is renamed
//! `used_dltensor[_versioned]` and the managed tensor moves into a [`DlpackOwner`] held by the new
//! storage; the producer's deleter runs when the last ferrograd alias of it is gone (under the GIL,
//! through PyO3's reference pool when that happens on a worker thread).
//!
//! Version counter: ferrograd's in-place ops on either side bump the storage's counter, and a
//! capsule made by ferrograd and read back by ferrograd shares the storage (and so the counter).
//! Writes made by another library through its own view are not seen by the counter, as with
//! `from_numpy` (and as in torch).

use std::ffi::{c_void, CStr};
use std::ptr::NonNull;
use std::sync::Arc;

use pyo3::exceptions::{PyBufferError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;

use super::errors::guarded;
use super::tensor::{wrap, PyTensor};
use crate::tensor::storage::{Dims, Element};
use crate::tensor::{DType, Layout, Storage, Tensor};

/// The structs of `dlpack.h`, laid out as the C ABI fixes them.
mod abi {
    use std::ffi::c_void;

    /// `kDLCPU`.
    pub const CPU: i32 = 1;
    /// `kDLCUDAHost`, `kDLROCMHost`: pinned host memory, readable from the CPU.
    pub const CUDA_HOST: i32 = 3;
    pub const ROCM_HOST: i32 = 11;

    pub const INT: u8 = 0;
    pub const UINT: u8 = 1;
    pub const FLOAT: u8 = 2;
    pub const BFLOAT: u8 = 4;
    pub const BOOL: u8 = 6;

    /// `DLPACK_FLAG_BITMASK_READ_ONLY`, `DLPACK_FLAG_BITMASK_IS_COPIED`.
    pub const READ_ONLY: u64 = 1;
    pub const IS_COPIED: u64 = 1 << 1;

    #[repr(C)]
    #[derive(Clone, Copy)]
    pub struct DLDevice {
        pub device_type: i32,
        pub device_id: i32,
    }

    #[repr(C)]
    #[derive(Clone, Copy)]
    pub struct DLDataType {
        pub code: u8,
        pub bits: u8,
        pub lanes: u16,
    }

    #[repr(C)]
    pub struct DLTensor {
        pub data: *mut c_void,
        pub device: DLDevice,
        pub ndim: i32,
        pub dtype: DLDataType,
        pub shape: *mut i64,
        /// In elements; null means row-major.
        pub strides: *mut i64,
        pub byte_offset: u64,
    }

    #[repr(C)]
    pub struct DLManagedTensor {
        pub dl_tensor: DLTensor,
        pub manager_ctx: *mut c_void,
        pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
    }

    #[repr(C)]
    pub struct DLPackVersion {
        pub major: u32,
        pub minor: u32,
    }

    #[repr(C)]
    pub struct DLManagedTensorVersioned {
        pub version: DLPackVersion,
        pub manager_ctx: *mut c_void,
        pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
        pub flags: u64,
        pub dl_tensor: DLTensor,
    }
}

use abi::{DLDataType, DLDevice, DLManagedTensor, DLManagedTensorVersioned, DLTensor};

const LEGACY: &CStr = c"dltensor";
const LEGACY_USED: &CStr = c"used_dltensor";
const VERSIONED: &CStr = c"dltensor_versioned";
const VERSIONED_USED: &CStr = c"used_dltensor_versioned";

/// torch's message for a capsule that is not an unconsumed DLPack capsule.
const INVALID_CAPSULE: &str = "from_dlpack received an invalid capsule. Note that DLTensor capsules can be consumed only once, so you might have already constructed a tensor from it once.";

// ----- export ---------------------------------------------------------------------------------

/// One heap block per exported capsule: the managed tensor first (its address is the block's),
/// then what its pointers point into and the storage it keeps alive.
#[repr(C)]
struct Exported<M> {
    managed: M,
    storage: Arc<Storage>,
    layout: Layout,
    dtype: DType,
    shape: Vec<i64>,
    strides: Vec<i64>,
}

/// What an exported block holds besides its managed tensor.
struct Parts {
    storage: Arc<Storage>,
    layout: Layout,
    dtype: DType,
    shape: Vec<i64>,
    strides: Vec<i64>,
}

/// Moves `managed` and `parts` into one leaked [`Exported`] block whose managed tensor points at
/// its own shape, strides and block (`fields` gives the managed struct's `dl_tensor` and
/// `manager_ctx`); returns the block's address, which is the managed tensor's.
fn leak<M>(
    managed: M,
    parts: Parts,
    fields: impl Fn(&mut M) -> (&mut DLTensor, &mut *mut c_void),
) -> *mut c_void {
    let Parts {
        storage,
        layout,
        dtype,
        shape,
        strides,
    } = parts;
    let mut block = Box::new(Exported {
        managed,
        storage,
        layout,
        dtype,
        shape,
        strides,
    });
    // The Vecs' buffers do not move with the box, so their pointers stay valid.
    let (shape, strides) = (block.shape.as_mut_ptr(), block.strides.as_mut_ptr());
    let (dl, _) = fields(&mut block.managed);
    dl.shape = shape;
    dl.strides = strides;
    let raw = Box::into_raw(block);
    // SAFETY: `raw` is a live box just leaked.
    let (_, ctx) = fields(unsafe { &mut (*raw).managed });
    *ctx = raw.cast();
    raw.cast()
}

/// Drops `v` attached to the interpreter: the storage may hold a Python object (a NumPy array
/// under `from_numpy`), and a deleter runs outside PyO3 (from CPython's capsule destructor or a
/// consumer's thread), where PyO3 would only queue its release until the next binding call.
fn drop_attached<T>(v: T) {
    let mut slot = Some(v);
    // At interpreter shutdown this cannot attach; the release is then queued as usual.
    let _ = Python::try_attach(|_| drop(slot.take()));
    drop(slot);
}

unsafe extern "C" fn delete_legacy(m: *mut DLManagedTensor) {
    if !m.is_null() {
        // SAFETY: `m` is the first field of a leaked `Box<Exported<DLManagedTensor>>`, and a
        // DLPack deleter is called once.
        drop_attached(unsafe { Box::from_raw(m.cast::<Exported<DLManagedTensor>>()) });
    }
}

unsafe extern "C" fn delete_versioned(m: *mut DLManagedTensorVersioned) {
    if !m.is_null() {
        // SAFETY: as in `delete_legacy`.
        drop_attached(unsafe { Box::from_raw(m.cast::<Exported<DLManagedTensorVersioned>>()) });
    }
}

/// The capsule's destructor: frees the managed tensor unless a consumer took it (renamed it).
unsafe extern "C" fn capsule_destructor(capsule: *mut ffi::PyObject) {
    // SAFETY: called by Python with the GIL on a live capsule of ours; `PyCapsule_IsValid` sets
    // no error, and a name not yet renamed means no consumer took the managed tensor.
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, VERSIONED.as_ptr()) == 1 {
            let m = ffi::PyCapsule_GetPointer(capsule, VERSIONED.as_ptr())
                .cast::<DLManagedTensorVersioned>();
            if let Some(d) = (*m).deleter {
                d(m)
            }
        } else if ffi::PyCapsule_IsValid(capsule, LEGACY.as_ptr()) == 1 {
            let m = ffi::PyCapsule_GetPointer(capsule, LEGACY.as_ptr()).cast::<DLManagedTensor>();
            if let Some(d) = (*m).deleter {
                d(m)
            }
        }
    }
}

fn dl_dtype(d: DType) -> DLDataType {
    let (code, bits) = match d {
        DType::Float16 | DType::Float32 | DType::Float64 => (abi::FLOAT, 8 * d.size() as u8),
        DType::BFloat16 => (abi::BFLOAT, 16),
        DType::UInt8 => (abi::UINT, 8),
        DType::Int8 | DType::Int16 | DType::Int32 | DType::Int64 => (abi::INT, 8 * d.size() as u8),
        DType::Bool => (abi::BOOL, 8),
    };
    DLDataType {
        code,
        bits,
        lanes: 1,
    }
}

fn to_i64(v: usize) -> PyResult<i64> {
    i64::try_from(v).map_err(|_| PyBufferError::new_err("DLPack: a size does not fit in int64"))
}

/// A capsule exporting `t` (which the caller has checked may be exported).
fn export(py: Python<'_>, t: &Tensor, versioned: bool, copied: bool) -> PyResult<Py<PyAny>> {
    let layout = t.layout().clone();
    let storage = t.storage().clone();
    let shape = layout
        .shape
        .iter()
        .map(|&s| to_i64(s))
        .collect::<PyResult<Vec<_>>>()?;
    let strides = layout
        .strides
        .iter()
        .map(|&s| to_i64(s))
        .collect::<PyResult<Vec<_>>>()?;
    let ndim = i32::try_from(shape.len())
        .map_err(|_| PyBufferError::new_err("DLPack: too many dimensions"))?;
    let base = storage.read().as_ptr();
    // The first element's address, as torch and NumPy export it (byte_offset 0): the buffer is
    // never reallocated, and `storage` in the block keeps it alive.
    let data = base.wrapping_add(layout.offset * t.dtype().size()) as *mut c_void;
    let dtype = t.dtype();
    // Shape and strides point into the block once it is on the heap.
    let tensor = || DLTensor {
        data,
        device: DLDevice {
            device_type: abi::CPU,
            device_id: 0,
        },
        ndim,
        dtype: dl_dtype(dtype),
        shape: std::ptr::null_mut(),
        strides: std::ptr::null_mut(),
        byte_offset: 0,
    };
    let parts = Parts {
        storage,
        layout,
        dtype,
        shape,
        strides,
    };
    let (ptr, name): (*mut c_void, &'static CStr) = if versioned {
        let managed = DLManagedTensorVersioned {
            version: abi::DLPackVersion { major: 1, minor: 0 },
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete_versioned),
            flags: if copied { abi::IS_COPIED } else { 0 },
            dl_tensor: tensor(),
        };
        let raw = leak(managed, parts, |m| (&mut m.dl_tensor, &mut m.manager_ctx));
        (raw, VERSIONED)
    } else {
        let managed = DLManagedTensor {
            dl_tensor: tensor(),
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete_legacy),
        };
        let raw = leak(managed, parts, |m| (&mut m.dl_tensor, &mut m.manager_ctx));
        (raw, LEGACY)
    };
    // SAFETY: `ptr` is a managed tensor of the kind `name` says; the destructor frees it unless a
    // consumer renames the capsule and takes it.
    let capsule = unsafe { ffi::PyCapsule_New(ptr, name.as_ptr(), Some(capsule_destructor)) };
    if capsule.is_null() {
        // SAFETY: no capsule owns `ptr`: free it here.
        unsafe { capsule_free(ptr, name) };
        return Err(PyErr::fetch(py));
    }
    // SAFETY: a new reference just returned by Python.
    Ok(unsafe { Bound::from_owned_ptr(py, capsule) }.unbind())
}

/// Frees a block `export` made when no capsule could be made around it.
unsafe fn capsule_free(ptr: *mut c_void, name: &CStr) {
    // SAFETY: `ptr` is the block `export` leaked for `name`'s kind.
    unsafe {
        if name == VERSIONED {
            delete_versioned(ptr.cast())
        } else {
            delete_legacy(ptr.cast())
        }
    }
}

#[pymethods]
impl PyTensor {
    /// A DLPack capsule sharing this tensor's memory (for `np.from_dlpack(t)`,
    /// `torch.from_dlpack(t)`): `dltensor_versioned` when the consumer passes
    /// `max_version >= (1, 0)`, the legacy `dltensor` otherwise; `copy=True` exports a copy.
    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__(
        &self,
        py: Python<'_>,
        stream: Option<&Bound<'_, PyAny>>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Py<PyAny>> {
        let t = &self.inner;
        if t.is_meta() {
            return Err(pyo3::exceptions::PyNotImplementedError::new_err(
                "Cannot copy out of meta tensor; no data!",
            ));
        }
        if t.requires_grad() {
            return Err(PyBufferError::new_err(
                "Can't export tensors that require gradient, use tensor.detach()",
            ));
        }
        if t.is_batched() {
            return Err(PyRuntimeError::new_err(
                "Cannot access data pointer of Tensor that doesn't have storage",
            ));
        }
        if let Some(s) = stream {
            // -1 is torch's "no synchronisation", the same as None on the CPU.
            match s.extract::<i64>() {
                Ok(-1) => {}
                Ok(_) => {
                    return Err(PyBufferError::new_err(
                        "stream should be None on cpu: ferrograd tensors live on the CPU",
                    ))
                }
                Err(_) => return Err(PyTypeError::new_err("stream must be ``int`` or ``none``")),
            }
        }
        if let Some((kind, _)) = dl_device {
            if kind != abi::CPU {
                return Err(PyBufferError::new_err("unsupported device requested"));
            }
        }
        let versioned = max_version.is_some_and(|(major, _)| major >= 1);
        if copy == Some(true) {
            let c = guarded(|| t.copy_detached())?;
            export(py, &c, versioned, true)
        } else {
            export(py, t, versioned, false)
        }
    }

    /// The DLPack device of this tensor: `(1, 0)`, kDLCPU.
    fn __dlpack_device__(&self) -> (i32, i32) {
        (abi::CPU, 0)
    }
}

// ----- import ---------------------------------------------------------------------------------

/// A consumed producer's managed tensor: its deleter runs when this dies.
enum Managed {
    Legacy(NonNull<DLManagedTensor>),
    Versioned(NonNull<DLManagedTensorVersioned>),
}

/// Keeps another library's tensor memory alive while a ferrograd storage views it (a Python
/// object, not registered with the module, so that its release waits for the GIL).
#[pyclass(module = "ferrograd._C", frozen)]
pub struct DlpackOwner {
    managed: Managed,
}

// SAFETY: DLPack requires a deleter callable from any thread, and nothing else touches the
// pointer after import.
unsafe impl Send for DlpackOwner {}
unsafe impl Sync for DlpackOwner {}

impl Drop for DlpackOwner {
    fn drop(&mut self) {
        // SAFETY: we own the managed tensor since the capsule was renamed; its deleter runs once.
        unsafe {
            match self.managed {
                Managed::Legacy(m) => {
                    if let Some(d) = (*m.as_ptr()).deleter {
                        d(m.as_ptr())
                    }
                }
                Managed::Versioned(m) => {
                    if let Some(d) = (*m.as_ptr()).deleter {
                        d(m.as_ptr())
                    }
                }
            }
        }
    }
}

/// A DLPack dtype's name, as NumPy would spell it.
fn dtype_name(d: DLDataType) -> String {
    let base = match d.code {
        0 => format!("int{}", d.bits),
        1 => format!("uint{}", d.bits),
        2 => format!("float{}", d.bits),
        3 => "opaque_handle".to_string(),
        4 => format!("bfloat{}", d.bits),
        5 => format!("complex{}", d.bits),
        6 => "bool".to_string(),
        7 => "float8_e3m4".to_string(),
        8 => "float8_e4m3".to_string(),
        9 => "float8_e4m3b11fnuz".to_string(),
        10 => "float8_e4m3fn".to_string(),
        11 => "float8_e4m3fnuz".to_string(),
        12 => "float8_e5m2".to_string(),
        13 => "float8_e5m2fnuz".to_string(),
        14 => "float8_e8m0fnu".to_string(),
        15 => "float6_e2m3fn".to_string(),
        16 => "float6_e3m2fn".to_string(),
        17 => "float4_e2m1fn".to_string(),
        c => format!("code {c} with {} bits", d.bits),
    };
    if d.lanes == 1 {
        base
    } else {
        format!("{base}x{}", d.lanes)
    }
}

fn element_dtype(d: DLDataType) -> PyResult<DType> {
    match (d.code, d.bits, d.lanes) {
        (abi::FLOAT, 16, 1) => Ok(DType::Float16),
        (abi::FLOAT, 32, 1) => Ok(DType::Float32),
        (abi::FLOAT, 64, 1) => Ok(DType::Float64),
        (abi::BFLOAT, 16, 1) => Ok(DType::BFloat16),
        (abi::UINT, 8, 1) => Ok(DType::UInt8),
        (abi::INT, 8, 1) => Ok(DType::Int8),
        (abi::INT, 16, 1) => Ok(DType::Int16),
        (abi::INT, 32, 1) => Ok(DType::Int32),
        (abi::INT, 64, 1) => Ok(DType::Int64),
        (abi::BOOL, 8, 1) => Ok(DType::Bool),
        _ => Err(PyTypeError::new_err(format!(
            "can't convert a DLPack tensor of type {}. The only supported types are: float64, float32, float16, bfloat16, int64, int32, int16, int8, uint8, and bool.",
            dtype_name(d)
        ))),
    }
}

/// What a DLTensor describes, checked: shape, strides in elements, address of element 0.
struct Described {
    dtype: DType,
    shape: Dims,
    strides: Dims,
    data: *mut u8,
    /// Elements spanned from `data` (0 when the tensor is empty).
    span: usize,
}

/// Reads and checks `t`.
///
/// # Safety
/// `t` must be a live DLTensor whose shape/strides arrays hold `ndim` entries.
unsafe fn describe(t: &DLTensor) -> PyResult<Described> {
    let dev = t.device.device_type;
    if dev != abi::CPU && dev != abi::CUDA_HOST && dev != abi::ROCM_HOST {
        return Err(PyBufferError::new_err(format!(
            "from_dlpack: the tensor is on DLPack device ({dev}, {}), and ferrograd reads CPU memory only; move it to the CPU first",
            t.device.device_id
        )));
    }
    let dtype = element_dtype(t.dtype)?;
    let ndim = usize::try_from(t.ndim)
        .map_err(|_| PyBufferError::new_err("from_dlpack: negative ndim"))?;
    let raw_shape: &[i64] = if ndim == 0 {
        &[]
    } else if t.shape.is_null() {
        return Err(PyBufferError::new_err("from_dlpack: null shape"));
    } else {
        // SAFETY: the producer gives `ndim` sizes.
        unsafe { std::slice::from_raw_parts(t.shape, ndim) }
    };
    let mut shape = Dims::new();
    for &s in raw_shape {
        shape.push(
            usize::try_from(s)
                .map_err(|_| PyBufferError::new_err(format!("from_dlpack: negative size {s}")))?,
        );
    }
    let strides: Dims = if ndim == 0 || t.strides.is_null() {
        crate::tensor::storage::contiguous_strides(&shape)
    } else {
        // SAFETY: as for the shape.
        let raw = unsafe { std::slice::from_raw_parts(t.strides, ndim) };
        let mut out = Dims::new();
        for &s in raw {
            out.push(usize::try_from(s).map_err(|_| {
                PyValueError::new_err("from_dlpack: the tensor has a negative stride, and tensors with negative strides are not supported; copy it first")
            })?);
        }
        out
    };
    let numel = shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| PyBufferError::new_err("from_dlpack: the tensor's size overflows"))?;
    let span = if numel == 0 {
        0
    } else {
        shape
            .iter()
            .zip(&strides)
            .try_fold(1usize, |a, (&d, &s)| (d - 1).checked_mul(s)?.checked_add(a))
            .ok_or_else(|| PyBufferError::new_err("from_dlpack: the tensor's strides overflow"))?
    };
    let offset = usize::try_from(t.byte_offset)
        .map_err(|_| PyBufferError::new_err("from_dlpack: byte_offset too large"))?;
    let data = (t.data as *mut u8).wrapping_add(offset);
    if span > 0 {
        if t.data.is_null() {
            return Err(PyBufferError::new_err("from_dlpack: null data pointer"));
        }
        if !(data as usize).is_multiple_of(dtype.size()) {
            return Err(PyValueError::new_err(
                "from_dlpack: the tensor's data is not aligned for its dtype; copy it first",
            ));
        }
    }
    Ok(Described {
        dtype,
        shape,
        strides,
        data,
        span,
    })
}

/// A storage over `d`'s memory, kept alive by `keep`.
///
/// # Safety
/// `d` must describe memory that stays valid while `keep` lives.
unsafe fn foreign(d: &Described, keep: Py<DlpackOwner>) -> Tensor {
    unsafe fn typed<T: Element>(d: &Described, keep: Py<DlpackOwner>) -> Storage {
        // An empty tensor may carry a null pointer; slices need an aligned non-null one.
        let ptr = if d.span == 0 {
            NonNull::<T>::dangling().as_ptr()
        } else {
            d.data.cast::<T>()
        };
        // SAFETY: `ptr` addresses `span` elements kept alive by `keep` (the caller's promise).
        unsafe { Storage::from_foreign(ptr, d.span, Box::new(keep)) }
    }
    // SAFETY: forwarded from the caller.
    let storage = unsafe { crate::tensor::storage::with_dtype!(d.dtype, T => typed::<T>(d, keep)) };
    Tensor::from_parts(
        Arc::new(storage),
        Layout {
            shape: d.shape.clone(),
            strides: d.strides.clone(),
            offset: 0,
        },
        d.dtype,
    )
}

/// torch's warning for memory it cannot write safely (from_numpy on a read-only array).
fn warn_read_only(py: Python<'_>) -> PyResult<()> {
    let warning = py.get_type::<pyo3::exceptions::PyUserWarning>();
    PyErr::warn(
        py,
        &warning,
        c"The given DLPack tensor is read-only, and ferrograd does not support read-only tensors. This means writing to this tensor will result in undefined behavior. You may want to copy it (from_dlpack(x, copy=True)) to protect its data.",
        1,
    )
}

/// The tensor a DLPack capsule holds, sharing its memory; the capsule is consumed (renamed).
#[pyfunction]
fn _from_dlpack_capsule(py: Python<'_>, capsule: &Bound<'_, PyAny>) -> PyResult<Py<PyTensor>> {
    let obj = capsule.as_ptr();
    // SAFETY: `obj` is a live object; the capsule calls set no error on a wrong name.
    let versioned = unsafe { ffi::PyCapsule_IsValid(obj, VERSIONED.as_ptr()) } == 1;
    let legacy = !versioned && unsafe { ffi::PyCapsule_IsValid(obj, LEGACY.as_ptr()) } == 1;
    if !versioned && !legacy {
        return Err(PyRuntimeError::new_err(INVALID_CAPSULE));
    }
    let name = if versioned { VERSIONED } else { LEGACY };
    // SAFETY: a valid capsule of that name holds a non-null pointer.
    let ptr = unsafe { ffi::PyCapsule_GetPointer(obj, name.as_ptr()) };
    let Some(ptr) = NonNull::new(ptr) else {
        return Err(PyRuntimeError::new_err(INVALID_CAPSULE));
    };
    let (dl, flags, managed, ours) = if versioned {
        let m = ptr.cast::<DLManagedTensorVersioned>();
        // SAFETY: the producer's managed tensor, alive until its deleter runs.
        let r = unsafe { m.as_ref() };
        if r.version.major != 1 {
            return Err(PyBufferError::new_err(format!(
                "from_dlpack: DLPack version {}.{} is not supported (ferrograd reads 1.x)",
                r.version.major, r.version.minor
            )));
        }
        // A false "no" (a function with two addresses) only costs the shared version counter.
        let ours = r
            .deleter
            .is_some_and(|d| std::ptr::fn_addr_eq(d, delete_versioned as unsafe extern "C" fn(_)));
        (&r.dl_tensor, r.flags, Managed::Versioned(m), ours)
    } else {
        let m = ptr.cast::<DLManagedTensor>();
        // SAFETY: as above.
        let r = unsafe { m.as_ref() };
        let ours = r
            .deleter
            .is_some_and(|d| std::ptr::fn_addr_eq(d, delete_legacy as unsafe extern "C" fn(_)));
        (&r.dl_tensor, 0, Managed::Legacy(m), ours)
    };
    // Everything is checked before the capsule is consumed: on an error it still owns the tensor.
    let ours_tensor = if ours {
        // Our own capsule: alias the storage (sharing its version counter) instead of wrapping it.
        // SAFETY: the deleter is ours, so the block is an `Exported` of this kind.
        let (storage, layout, dtype) = unsafe {
            if versioned {
                let e = &*ptr.as_ptr().cast::<Exported<DLManagedTensorVersioned>>();
                (e.storage.clone(), e.layout.clone(), e.dtype)
            } else {
                let e = &*ptr.as_ptr().cast::<Exported<DLManagedTensor>>();
                (e.storage.clone(), e.layout.clone(), e.dtype)
            }
        };
        Some(Tensor::from_parts(storage, layout, dtype))
    } else {
        None
    };
    // SAFETY: `dl` belongs to the live managed tensor.
    let described = if ours_tensor.is_none() {
        Some(unsafe { describe(dl) }?)
    } else {
        None
    };
    let used = if versioned {
        VERSIONED_USED
    } else {
        LEGACY_USED
    };
    // SAFETY: renaming is how a consumer takes the managed tensor; `used` is 'static.
    if unsafe { ffi::PyCapsule_SetName(obj, used.as_ptr()) } != 0 {
        return Err(PyErr::fetch(py));
    }
    // From here we own the managed tensor: the owner's drop runs the deleter.
    let owner = DlpackOwner { managed };
    let tensor = match (ours_tensor, described) {
        (Some(t), _) => {
            drop(owner);
            t
        }
        (None, Some(d)) => {
            if flags & abi::READ_ONLY != 0 {
                warn_read_only(py)?;
            }
            let keep = Py::new(py, owner)?;
            // SAFETY: the producer keeps the memory valid until its deleter, run by `keep`.
            unsafe { foreign(&d, keep) }
        }
        (None, None) => return Err(PyRuntimeError::new_err(INVALID_CAPSULE)),
    };
    wrap(py, tensor)
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_from_dlpack_capsule, m)?)?;
    Ok(())
}
