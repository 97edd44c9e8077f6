//! Shared element buffers and the strided layout that views them.
//!
//! A buffer is shared by every tensor that aliases it (views, `detach`, `from_numpy`), so an
//! in-place write through one alias is seen by all, as in torch. ndarray's `ArcArray` would copy
//! on write instead, so storage is a flat buffer behind a lock and kernels work on ndarray views
//! built over it.

use std::any::Any;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use ndarray::{ArrayViewD, ArrayViewMutD, IxDyn, ShapeBuilder};
use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use smallvec::SmallVec;

use super::dtype::DType;
use crate::error::{Error, Result};
pub use half::{bf16, f16};

/// Dimension sizes or strides; four inline before spilling to the heap.
pub type Dims = SmallVec<[usize; 4]>;

/// Memory owned elsewhere (a NumPy array) and kept alive by `keep`.
pub struct Foreign<T> {
    ptr: *mut T,
    len: usize,
    _keep: Box<dyn Any + Send + Sync>,
}

// SAFETY: the pointer is only dereferenced under the storage lock; the owner object keeps the
// memory alive and is itself Send + Sync.
unsafe impl<T: Send> Send for Foreign<T> {}
unsafe impl<T: Sync> Sync for Foreign<T> {}

/// The elements of one dtype: owned, or borrowed from a foreign owner.
pub enum Data<T> {
    /// Memory owned by ferrograd.
    Own(Vec<T>),
    /// Memory borrowed from a foreign owner (no copy).
    Foreign(Foreign<T>),
}

impl<T> Data<T> {
    /// The elements as a slice.
    pub fn as_slice(&self) -> &[T] {
        match self {
            Data::Own(v) => v,
            // SAFETY: ptr/len describe memory kept alive by `_keep` (see `Storage::from_foreign`).
            Data::Foreign(f) => unsafe { std::slice::from_raw_parts(f.ptr, f.len) },
        }
    }
    /// The elements as a mutable slice.
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        match self {
            Data::Own(v) => v,
            // SAFETY: as above; `&mut self` means we hold the storage's write lock.
            Data::Foreign(f) => unsafe { std::slice::from_raw_parts_mut(f.ptr, f.len) },
        }
    }
}

/// A buffer of one of the supported dtypes.
pub enum Buffer {
    /// bool elements
    Bool(Data<bool>),
    /// uint8 elements
    U8(Data<u8>),
    /// int8 elements
    I8(Data<i8>),
    /// int16 elements
    I16(Data<i16>),
    /// int32 elements
    I32(Data<i32>),
    /// int64 elements
    I64(Data<i64>),
    /// float16 elements
    F16(Data<f16>),
    /// bfloat16 elements
    BF16(Data<bf16>),
    /// float32 elements
    F32(Data<f32>),
    /// float64 elements
    F64(Data<f64>),
}

/// `$body` with `$T` the element type of `$dtype` (a [`DType`]): one generic body for every
/// storage type, e.g. `with_dtype!(t.dtype(), T => t.to_vec::<T>().map(...))`.
macro_rules! with_dtype {
    ($dtype:expr, $T:ident => $body:expr) => {{
        use $crate::tensor::DType as __D;
        #[allow(unused_imports)]
        use $crate::tensor::Element as _;
        match $dtype {
            __D::Bool => {
                type $T = bool;
                $body
            }
            __D::UInt8 => {
                type $T = u8;
                $body
            }
            __D::Int8 => {
                type $T = i8;
                $body
            }
            __D::Int16 => {
                type $T = i16;
                $body
            }
            __D::Int32 => {
                type $T = i32;
                $body
            }
            __D::Int64 => {
                type $T = i64;
                $body
            }
            __D::Float16 => {
                type $T = $crate::tensor::f16;
                $body
            }
            __D::BFloat16 => {
                type $T = $crate::tensor::bf16;
                $body
            }
            __D::Float32 => {
                type $T = f32;
                $body
            }
            __D::Float64 => {
                type $T = f64;
                $body
            }
        }
    }};
}

pub(crate) use with_dtype;

/// `$body` with `$d` bound to the typed [`Data`] inside `$buf`, whatever its type.
macro_rules! each_data {
    ($buf:expr, $d:ident => $body:expr) => {
        match $buf {
            Buffer::Bool($d) => $body,
            Buffer::U8($d) => $body,
            Buffer::I8($d) => $body,
            Buffer::I16($d) => $body,
            Buffer::I32($d) => $body,
            Buffer::I64($d) => $body,
            Buffer::F16($d) => $body,
            Buffer::BF16($d) => $body,
            Buffer::F32($d) => $body,
            Buffer::F64($d) => $body,
        }
    };
}

impl Buffer {
    /// The dtype of the elements.
    pub fn dtype(&self) -> DType {
        match self {
            Buffer::Bool(_) => DType::Bool,
            Buffer::U8(_) => DType::UInt8,
            Buffer::I8(_) => DType::Int8,
            Buffer::I16(_) => DType::Int16,
            Buffer::I32(_) => DType::Int32,
            Buffer::I64(_) => DType::Int64,
            Buffer::F16(_) => DType::Float16,
            Buffer::BF16(_) => DType::BFloat16,
            Buffer::F32(_) => DType::Float32,
            Buffer::F64(_) => DType::Float64,
        }
    }
    /// Number of elements.
    pub fn len(&self) -> usize {
        each_data!(self, d => d.as_slice().len())
    }
    /// True when ferrograd owns the memory (not borrowed from NumPy).
    pub fn is_owned(&self) -> bool {
        each_data!(self, d => matches!(d, Data::Own(_)))
    }
    /// True when the buffer holds no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The raw address of the first element (for NumPy interop).
    pub fn as_ptr(&self) -> *const u8 {
        each_data!(self, d => d.as_slice().as_ptr().cast::<u8>())
    }
}

/// A scalar element type stored in tensors.
pub trait Element:
    Copy + Send + Sync + Default + PartialEq + PartialOrd + std::fmt::Debug + 'static
{
    /// The matching dtype.
    const DTYPE: DType;
    /// The typed data, if the buffer holds this type.
    fn data(b: &Buffer) -> Option<&Data<Self>>;
    /// The typed data, mutably.
    fn data_mut(b: &mut Buffer) -> Option<&mut Data<Self>>;
    /// Wrap typed data (owned or foreign).
    fn wrap_data(d: Data<Self>) -> Buffer;
    /// Wrap owned elements.
    fn wrap(v: Vec<Self>) -> Buffer {
        Self::wrap_data(Data::Own(v))
    }
    /// Convert to f64 (bool is 0/1).
    fn to_f64(self) -> f64;
    /// Convert from f64 (non-zero is true for bool; integers see [`Element::from_f64`]'s
    /// callers, which truncate through int64 as torch does).
    fn from_f64(v: f64) -> Self;
    /// Convert to i64.
    fn to_i64(self) -> i64;
    /// Convert from i64 (narrow integers wrap, as a C cast does in torch).
    fn from_i64(v: i64) -> Self;
}

macro_rules! element {
    ($t:ty, $variant:ident, $dtype:expr, $to:expr, $from:expr, $toi:expr, $fromi:expr) => {
        impl Element for $t {
            const DTYPE: DType = $dtype;
            fn data(b: &Buffer) -> Option<&Data<Self>> {
                match b {
                    Buffer::$variant(d) => Some(d),
                    _ => None,
                }
            }
            fn data_mut(b: &mut Buffer) -> Option<&mut Data<Self>> {
                match b {
                    Buffer::$variant(d) => Some(d),
                    _ => None,
                }
            }
            fn wrap_data(d: Data<Self>) -> Buffer {
                Buffer::$variant(d)
            }
            fn to_f64(self) -> f64 {
                ($to)(self)
            }
            fn from_f64(v: f64) -> Self {
                ($from)(v)
            }
            fn to_i64(self) -> i64 {
                ($toi)(self)
            }
            fn from_i64(v: i64) -> Self {
                ($fromi)(v)
            }
        }
    };
}
/// An integer type: conversions are plain (wrapping) casts.
macro_rules! int_element {
    ($t:ty, $variant:ident, $dtype:expr) => {
        element!(
            $t,
            $variant,
            $dtype,
            |x: $t| x as f64,
            |v: f64| v as i64 as $t,
            |x: $t| x as i64,
            |v: i64| v as $t
        );
    };
}
/// A half type: stored as 16 bits, rounded to nearest-even from float32. Wider values go
/// through float32 first, as torch's casts do (bit for bit the same results; `half`'s own
/// `bf16::from_f64` also misrounds some values just above a halfway point).
macro_rules! half_element {
    ($t:ty, $variant:ident, $dtype:expr) => {
        element!(
            $t,
            $variant,
            $dtype,
            |x: $t| x.to_f64(),
            |v: f64| <$t>::from_f32(v as f32),
            |x: $t| x.to_f64() as i64,
            |v: i64| <$t>::from_f32(v as f32)
        );
    };
}
element!(
    f32,
    F32,
    DType::Float32,
    |x: f32| x as f64,
    |v: f64| v as f32,
    |x: f32| x as i64,
    |v: i64| v as f32
);
element!(
    f64,
    F64,
    DType::Float64,
    |x: f64| x,
    |v: f64| v,
    |x: f64| x as i64,
    |v: i64| v as f64
);
int_element!(i64, I64, DType::Int64);
int_element!(i32, I32, DType::Int32);
int_element!(i16, I16, DType::Int16);
int_element!(i8, I8, DType::Int8);
int_element!(u8, U8, DType::UInt8);
half_element!(f16, F16, DType::Float16);
half_element!(bf16, BF16, DType::BFloat16);
element!(
    bool,
    Bool,
    DType::Bool,
    |x: bool| x as u8 as f64,
    |v: f64| v != 0.0,
    |x: bool| x as i64,
    |v: i64| v != 0
);

/// What an op says when it reaches the elements of a meta tensor.
pub const META_MESSAGE: &str = "Cannot compute on a meta tensor: it has a shape and a dtype but no data (ferrograd runs shape, dtype and view queries on meta tensors, not ops). Give the module real tensors first, e.g. with Module.to_empty(device='cpu') and an initialisation.";

/// What a kernel says when it meets a batched tensor it has no rule for.
pub const NO_RULE_MESSAGE: &str = "vmap: this operation has no batching rule in ferrograd yet, so it cannot run on a tensor inside vmap (the batched tensor has no elements of its own). Please file an issue naming the operation; until then, compute it outside vmap or loop over the batch.";

/// Called with a storage just before its elements are written in place, while any watcher is
/// registered (`allow_mutation_on_saved_tensors` keeps the values saved for backward).
static PRE_WRITE: std::sync::OnceLock<fn(&Storage)> = std::sync::OnceLock::new();
/// Registered watchers: while there is none, a write costs one atomic load.
static PRE_WRITE_WATCHERS: AtomicUsize = AtomicUsize::new(0);

/// Install the pre-write hook (once per process; later calls keep the first).
pub(crate) fn set_pre_write_hook(hook: fn(&Storage)) {
    let _ = PRE_WRITE.set(hook);
}

/// Count a watcher in (`true`) or out (`false`).
pub(crate) fn watch_writes(on: bool) {
    if on {
        PRE_WRITE_WATCHERS.fetch_add(1, Ordering::AcqRel);
    } else {
        PRE_WRITE_WATCHERS.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A buffer shared by aliasing tensors, with the version counter they share.
pub struct Storage {
    buf: RwLock<Buffer>,
    version: AtomicU64,
    /// The storage of batched tensors' logical handles (see [`crate::tensor::batched`]): it
    /// holds no elements, and reading it means an op ran its kernel without a batching rule.
    placeholder: bool,
    /// A meta tensor's storage (torch's `device='meta'`): a shape and dtype without elements;
    /// reading it stops with [`META_MESSAGE`].
    meta: bool,
    /// Bytes counted in [`crate::memory::allocated`], given back on drop.
    counted: usize,
}

impl Drop for Storage {
    fn drop(&mut self) {
        crate::memory::count_free(self.counted);
    }
}

impl Storage {
    /// A storage owning `buf`.
    pub fn new(buf: Buffer) -> Self {
        let counted = buf.len() * buf.dtype().size();
        crate::memory::count_alloc(counted);
        Storage {
            buf: RwLock::new(buf),
            version: AtomicU64::new(0),
            placeholder: false,
            meta: false,
            counted,
        }
    }

    /// The element-less storage behind every batched tensor's logical handle.
    pub(crate) fn placeholder() -> std::sync::Arc<Storage> {
        static P: std::sync::OnceLock<std::sync::Arc<Storage>> = std::sync::OnceLock::new();
        P.get_or_init(|| {
            std::sync::Arc::new(Storage {
                buf: RwLock::new(Buffer::F32(Data::Own(Vec::new()))),
                version: AtomicU64::new(0),
                placeholder: true,
                meta: false,
                counted: 0,
            })
        })
        .clone()
    }

    /// Whether this is the batched tensors' placeholder (no elements of its own).
    pub fn is_placeholder(&self) -> bool {
        self.placeholder
    }

    /// A storage without elements for a meta tensor (one per tensor, so meta tensors never
    /// look like aliases of each other).
    pub(crate) fn meta() -> Self {
        Storage {
            buf: RwLock::new(Buffer::F32(Data::Own(Vec::new()))),
            version: AtomicU64::new(0),
            placeholder: false,
            meta: true,
            counted: 0,
        }
    }

    /// Whether this is a meta tensor's storage (no elements).
    pub fn is_meta(&self) -> bool {
        self.meta
    }

    #[cold]
    #[inline(never)]
    fn no_data() -> ! {
        // An op reached the elements of a meta tensor: only its shape, dtype and views exist.
        // Bindings turn this into NotImplementedError.
        panic!("{}", META_MESSAGE)
    }

    #[cold]
    #[inline(never)]
    fn no_batching_rule() -> ! {
        // A kernel reached the elements of a tensor inside vmap without a batching rule: stop
        // here rather than read nothing (or out of bounds). Bindings turn this into a
        // RuntimeError.
        panic!("{}", NO_RULE_MESSAGE)
    }

    /// A storage over foreign memory.
    ///
    /// # Safety
    /// `ptr` must point to `len` initialised, suitably aligned elements of `T` that stay valid
    /// (and are not freed) for as long as `keep` is alive.
    pub unsafe fn from_foreign<T: Element>(
        ptr: *mut T,
        len: usize,
        keep: Box<dyn Any + Send + Sync>,
    ) -> Self {
        let data = Data::Foreign(Foreign {
            ptr,
            len,
            _keep: keep,
        });
        Storage::new(T::wrap_data(data))
    }

    /// Shared access to the elements. Re-entrant: two aliases may be read at once.
    pub fn read(&self) -> RwLockReadGuard<'_, Buffer> {
        if self.placeholder {
            Self::no_batching_rule()
        }
        if self.meta {
            Self::no_data()
        }
        self.buf.read_recursive()
    }

    /// Exclusive access to the elements. Every in-place change goes through here, so a
    /// pre-write watcher (`allow_mutation_on_saved_tensors`) sees it before it happens.
    pub fn write(&self) -> RwLockWriteGuard<'_, Buffer> {
        if self.placeholder {
            Self::no_batching_rule()
        }
        if self.meta {
            Self::no_data()
        }
        if PRE_WRITE_WATCHERS.load(Ordering::Acquire) > 0 {
            if let Some(hook) = PRE_WRITE.get() {
                hook(self);
            }
        }
        self.buf.write()
    }

    /// The version counter: bumped by every in-place write to any alias.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// Record one in-place modification.
    pub fn bump_version(&self) {
        self.version.fetch_add(1, Ordering::AcqRel);
    }
}

/// How a tensor's elements sit in its storage: sizes, strides (in elements) and an offset.
#[derive(Debug, PartialEq, Eq)]
pub struct Layout {
    /// Size of each dimension.
    pub shape: Dims,
    /// Step in elements between neighbours along each dimension (0 for expanded dims).
    pub strides: Dims,
    /// Index of the first element in the storage.
    pub offset: usize,
}

/// Row-major strides for `shape`.
pub fn contiguous_strides(shape: &[usize]) -> Dims {
    // Filled from a copy of the shape: `smallvec![0; n]` goes through a generic element loop,
    // and every tensor an op makes needs these (~90 instructions for a 1-d shape before).
    let mut strides = Dims::from_slice(shape);
    let mut acc = 1usize;
    for s in strides.iter_mut().rev() {
        let d = *s;
        *s = acc;
        acc *= d.max(1);
    }
    strides
}

// SmallVec's Clone and From<&[T]> go through a generic iterator; `from_slice` is a copy, and
// layouts are cloned or built for every tensor an op makes.
impl Clone for Layout {
    fn clone(&self) -> Self {
        Layout {
            shape: Dims::from_slice(&self.shape),
            strides: Dims::from_slice(&self.strides),
            offset: self.offset,
        }
    }
}

impl Layout {
    /// A row-major layout starting at offset 0.
    pub fn contiguous(shape: &[usize]) -> Self {
        Layout {
            shape: Dims::from_slice(shape),
            strides: contiguous_strides(shape),
            offset: 0,
        }
    }
    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
    /// True when elements are in row-major order without gaps (size-1 dims may have any stride).
    /// A tensor with no element is contiguous whatever its strides, as in torch: there is
    /// nothing to reorder, and copying it would give the same layout again.
    pub fn is_contiguous(&self) -> bool {
        if self.shape.contains(&0) {
            return true;
        }
        let mut expected = 1usize;
        for i in (0..self.shape.len()).rev() {
            if self.shape[i] != 1 {
                if self.strides[i] != expected {
                    return false;
                }
                expected *= self.shape[i];
            }
        }
        true
    }
    /// Storage offsets of every element in row-major order, or torch's allocation error when
    /// there are too many to hold.
    pub fn offsets(&self) -> Result<Vec<usize>> {
        let n = super::alloc::checked_numel(&self.shape)?;
        let mut out = super::alloc::try_vec(n)?;
        if n == 0 {
            return Ok(out);
        }
        let nd = self.shape.len();
        let mut idx: Dims = smallvec::smallvec![0; nd];
        let mut off = self.offset;
        for _ in 0..n {
            out.push(off);
            for d in (0..nd).rev() {
                idx[d] += 1;
                off += self.strides[d];
                if idx[d] < self.shape[d] {
                    break;
                }
                off -= self.strides[d] * idx[d];
                idx[d] = 0;
            }
        }
        Ok(out)
    }
    /// An ndarray view of `data` through this layout.
    pub fn view<'a, T>(&self, data: &'a [T]) -> Result<ArrayViewD<'a, T>> {
        if self.numel() == 0 {
            // Nothing to address: strides are irrelevant and ndarray would reject them.
            return ArrayViewD::from_shape(IxDyn(&self.shape), &[]).map_err(|e| {
                Error::runtime(format!("internal error: empty layout {self:?}: {e}"))
            });
        }
        let tail = data.get(self.offset..).unwrap_or(&[]);
        let shape = IxDyn(&self.shape).strides(IxDyn(&self.strides));
        ArrayViewD::from_shape(shape, tail).map_err(|e| {
            Error::runtime(format!(
                "internal error: invalid tensor layout {self:?}: {e}"
            ))
        })
    }
    /// The elements this layout addresses in `data`, in row-major order. Dimensions that are
    /// contiguous with their neighbour are merged first, and runs along a unit-stride last
    /// dimension are copied whole: a permuted or sliced tensor copies at memory speed (an
    /// ndarray iterator over a dynamic-rank view took ~20 ns per element).
    pub fn gather<T: Copy>(&self, data: &[T]) -> Result<Vec<T>> {
        let mut out = Vec::with_capacity(self.numel());
        self.for_each_run(data.len(), |base, run, step| {
            if step == 1 {
                out.extend_from_slice(&data[base..base + run]);
            } else {
                out.extend((0..run).map(|i| data[base + i * step]));
            }
        })?;
        Ok(out)
    }

    /// Write `values` (row-major, one per element) to the elements this layout addresses in
    /// `data`: the inverse of [`Layout::gather`], at the same speed. Refuses a layout whose
    /// elements overlap (an expanded tensor), with torch's message.
    pub fn scatter<T: Copy>(&self, data: &mut [T], values: &[T]) -> Result<()> {
        if values.len() != self.numel() {
            return Err(Error::runtime(format!(
                "internal error: {} values for a layout of {} elements",
                values.len(),
                self.numel()
            )));
        }
        // ndarray checks the strides for overlap without visiting the elements.
        self.view_mut(data)?;
        let mut next = 0;
        self.for_each_run(data.len(), |base, run, step| {
            let src = &values[next..next + run];
            if step == 1 {
                data[base..base + run].copy_from_slice(src);
            } else {
                for (i, &v) in src.iter().enumerate() {
                    data[base + i * step] = v;
                }
            }
            next += run;
        })
    }

    /// Calls `f(start, run, step)` for each run of elements along the innermost remaining
    /// dimension, in row-major order, after dropping size-1 dimensions and merging contiguous
    /// neighbours. Checks first that the layout stays inside a storage of `len` elements.
    fn for_each_run(&self, len: usize, mut f: impl FnMut(usize, usize, usize)) -> Result<()> {
        if self.numel() == 0 {
            return Ok(());
        }
        let last = self.offset
            + self
                .shape
                .iter()
                .zip(&self.strides)
                .map(|(&d, &s)| (d - 1) * s)
                .sum::<usize>();
        if last >= len {
            return Err(Error::runtime(format!(
                "internal error: layout {self:?} reaches past a storage of {len} elements"
            )));
        }
        // (size, stride) outermost first, size-1 dims dropped, contiguous neighbours merged.
        let mut dims: Vec<(usize, usize)> = Vec::with_capacity(self.shape.len());
        for (&d, &st) in self.shape.iter().zip(&self.strides) {
            if d == 1 {
                continue;
            }
            match dims.last_mut() {
                Some(prev) if prev.1 == st * d => *prev = (prev.0 * d, st),
                _ => dims.push((d, st)),
            }
        }
        let Some(&(run, step)) = dims.last() else {
            f(self.offset, 1, 1);
            return Ok(());
        };
        let outer = &dims[..dims.len() - 1];
        let mut idx = vec![0usize; outer.len()];
        let mut base = self.offset;
        loop {
            f(base, run, step);
            let mut d = outer.len();
            loop {
                if d == 0 {
                    return Ok(());
                }
                d -= 1;
                idx[d] += 1;
                base += outer[d].1;
                if idx[d] < outer[d].0 {
                    break;
                }
                base -= outer[d].1 * outer[d].0;
                idx[d] = 0;
            }
        }
    }

    /// Whether some dimension repeats one element (size above 1, stride 0): an expanded view.
    pub fn has_broadcast_dims(&self) -> bool {
        self.shape
            .iter()
            .zip(&self.strides)
            .any(|(&n, &s)| n > 1 && s == 0)
    }

    /// A mutable ndarray view of `data`; fails when elements overlap (an expanded tensor).
    pub fn view_mut<'a, T>(&self, data: &'a mut [T]) -> Result<ArrayViewMutD<'a, T>> {
        if self.numel() == 0 {
            return ArrayViewMutD::from_shape(IxDyn(&self.shape), &mut []).map_err(|e| {
                Error::runtime(format!("internal error: empty layout {self:?}: {e}"))
            });
        }
        let tail = match data.get_mut(self.offset..) {
            Some(t) => t,
            None => &mut [],
        };
        let shape = IxDyn(&self.shape).strides(IxDyn(&self.strides));
        ArrayViewMutD::from_shape(shape, tail).map_err(|_| {
            Error::runtime(
                "unsupported operation: more than one element of the written-to tensor refers to a single memory location. Please clone() the tensor before performing the operation.",
            )
        })
    }
}

/// `src`'s elements converted to `D` with torch's rules (float to integer truncates; any
/// nonzero is `true`).
pub(crate) fn convert_vec<S: Element, D: Element>(src: &[S]) -> Vec<D> {
    if let Some(v) = convert_half::<S, D>(src) {
        return v;
    }
    if D::DTYPE == DType::Bool {
        src.iter()
            .map(|&x| D::from_i64((x.to_f64() != 0.0) as i64))
            .collect()
    } else if D::DTYPE.is_integer() && S::DTYPE.is_float() {
        // Through int64, as torch's C casts do: 300.0 to uint8 is 44.
        src.iter()
            .map(|&x| D::from_i64(x.to_f64() as i64))
            .collect()
    } else if D::DTYPE.is_integer() {
        src.iter().map(|&x| D::from_i64(x.to_i64())).collect()
    } else {
        src.iter().map(|&x| D::from_f64(x.to_f64())).collect()
    }
}

/// float32 to and from the half types through the `half` crate's slice conversions (F16C
/// instructions where the CPU has them; one thread, as this layer sits below the pool): every half op
/// widens its operands and rounds its result, and the element-by-element path took ~2 ns per
/// element. `None` for other pairs of types.
fn convert_half<S: Element, D: Element>(src: &[S]) -> Option<Vec<D>> {
    use half::slice::HalfFloatSliceExt;
    fn run<A: Copy, B: Copy + Default>(src: &[A], f: impl Fn(&[A], &mut [B])) -> Vec<B> {
        let mut out = vec![B::default(); src.len()];
        f(src, &mut out);
        out
    }
    /// `v` as a slice of `T`. SAFETY: the caller has checked that `U` is `T` (same dtype).
    unsafe fn same<U, T>(v: &[U]) -> &[T] {
        unsafe { std::slice::from_raw_parts(v.as_ptr().cast(), v.len()) }
    }
    /// `v` as a `Vec<T>`. SAFETY: as [`same`].
    unsafe fn same_vec<U, T>(v: Vec<U>) -> Vec<T> {
        let mut v = std::mem::ManuallyDrop::new(v);
        unsafe { Vec::from_raw_parts(v.as_mut_ptr().cast(), v.len(), v.capacity()) }
    }
    // SAFETY (every arm): the dtypes name the element types exactly.
    unsafe {
        Some(match (S::DTYPE, D::DTYPE) {
            (DType::Float32, DType::Float16) => {
                same_vec(run(same::<S, f32>(src), |a, b: &mut [f16]| {
                    b.convert_from_f32_slice(a)
                }))
            }
            (DType::Float16, DType::Float32) => {
                same_vec(run(same::<S, f16>(src), |a, b: &mut [f32]| {
                    a.convert_to_f32_slice(b)
                }))
            }
            (DType::Float32, DType::BFloat16) => {
                same_vec(run(same::<S, f32>(src), |a, b: &mut [bf16]| {
                    b.convert_from_f32_slice(a)
                }))
            }
            (DType::BFloat16, DType::Float32) => {
                same_vec(run(same::<S, bf16>(src), |a, b: &mut [f32]| {
                    a.convert_to_f32_slice(b)
                }))
            }
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_slice_conversions_match_the_scalar_ones() {
        let v: Vec<f32> = (0..100_000)
            .map(|i| ((i as f32) * 0.37).sin() * 70000.0 / (1 + i % 97) as f32)
            .chain([f32::NAN, f32::INFINITY, -0.0, 65520.0, 1e-8])
            .collect();
        let h: Vec<f16> = convert_vec(&v);
        let b: Vec<bf16> = convert_vec(&v);
        for (i, &x) in v.iter().enumerate() {
            assert_eq!(h[i].to_bits(), f16::from_f32(x).to_bits(), "{x}");
            // bfloat16 is the top half of the bits, rounded to nearest-even.
            let bits = x.to_bits();
            let rne = ((bits as u64 + 0x7fff + ((bits as u64 >> 16) & 1)) >> 16) as u16;
            if !x.is_nan() {
                assert_eq!(b[i].to_bits(), rne, "{x}");
            }
        }
        let back: Vec<f32> = convert_vec(&h);
        assert!(back
            .iter()
            .zip(&h)
            .all(|(a, b)| a.to_bits() == b.to_f32().to_bits()));
        let back: Vec<f32> = convert_vec(&b);
        assert!(back
            .iter()
            .zip(&b)
            .all(|(a, b)| a.to_bits() == b.to_f32().to_bits()));
    }

    #[test]
    fn offsets_follow_strides() {
        let l = Layout {
            shape: smallvec::smallvec![2, 3],
            strides: smallvec::smallvec![1, 2],
            offset: 1,
        };
        assert_eq!(l.offsets().unwrap(), vec![1, 3, 5, 2, 4, 6]);
        assert!(!l.is_contiguous());
        assert!(Layout::contiguous(&[2, 1, 3]).is_contiguous());
    }

    fn layout(shape: &[usize], strides: &[usize], offset: usize) -> Layout {
        Layout {
            shape: shape.into(),
            strides: strides.into(),
            offset,
        }
    }

    #[test]
    fn gather_and_scatter_visit_the_offsets_in_row_major_order() {
        // Permuted, sliced, with size-1 and mergeable dimensions: `offsets` is the truth.
        let cases = [
            layout(&[2, 3], &[1, 2], 1),
            layout(&[2, 1, 3, 2], &[12, 5, 4, 1], 3),
            layout(&[3, 2, 2], &[4, 2, 1], 0),
            layout(&[2, 2], &[0, 1], 2),
            layout(&[1], &[1], 5),
        ];
        for l in &cases {
            let data: Vec<i64> = (0..40).map(|i| i * 10).collect();
            let want: Vec<i64> = l.offsets().unwrap().iter().map(|&o| data[o]).collect();
            assert_eq!(l.gather(&data).unwrap(), want, "{l:?}");
            if l.has_broadcast_dims() {
                let mut out = vec![0i64; 40];
                assert!(l.scatter(&mut out, &want).is_err());
                continue;
            }
            let mut out = vec![-1i64; 40];
            let values: Vec<i64> = (0..l.numel() as i64).collect();
            l.scatter(&mut out, &values).unwrap();
            for (k, &o) in l.offsets().unwrap().iter().enumerate() {
                assert_eq!(out[o], k as i64, "{l:?}");
            }
            let untouched = out.iter().filter(|&&v| v == -1).count();
            assert_eq!(untouched, 40 - l.numel(), "{l:?}");
        }
        assert!(layout(&[5], &[10], 0).gather(&[0i64; 40]).is_err());
    }
}
