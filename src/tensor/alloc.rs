//! Fallible allocation: buffers whose size comes from users are checked and reserved here, so
//! a request too big for the machine is torch's `DefaultCPUAllocator` error, not an abort. The
//! lowest layer of `tensor` (storage uses it), depending on nothing above it.

use super::dtype::DType;
use crate::error::{Error, Result};

/// A buffer of `n` copies of `v`, failing cleanly (not aborting) when it cannot be allocated.
pub(crate) fn try_filled_vec<T: Clone>(n: usize, v: T) -> Result<Vec<T>> {
    let mut out = try_vec(n)?;
    out.resize(n, v);
    Ok(out)
}

/// An empty vector with room for `n` elements, or torch's allocation error (not an abort) when
/// the memory cannot be had. Every buffer whose size comes from user input is made here.
pub(crate) fn try_vec<T>(n: usize) -> Result<Vec<T>> {
    let size = std::mem::size_of::<T>();
    ensure_bytes(n.checked_mul(size), n as u128 * size as u128)?;
    let mut out = Vec::new();
    out.try_reserve_exact(n)
        .map_err(|_| cannot_allocate(n as u128 * size as u128))?;
    Ok(out)
}

/// RAM plus swap in bytes (Linux), read once: no request above it can ever be backed.
fn memory_limit() -> Option<usize> {
    static LIMIT: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    *LIMIT.get_or_init(|| {
        let info = std::fs::read_to_string("/proc/meminfo").ok()?;
        let kib = |key: &str| -> Option<usize> {
            let line = info.lines().find(|l| l.starts_with(key))?;
            line.split_whitespace().nth(1)?.parse().ok()
        };
        let total = kib("MemTotal:")?.checked_add(kib("SwapTotal:").unwrap_or(0))?;
        total.checked_mul(1024)
    })
}

/// Check that `n` elements of `dtype` can be allocated, so a huge request becomes an error
/// instead of an allocation failure that aborts the process. Small requests are not checked.
///
/// An allocator that maps memory lazily (mimalloc reserves with `MAP_NORESERVE`) grants requests
/// far beyond RAM; touching the pages then ends in the OOM killer. So requests above RAM plus
/// swap are refused up front, as Linux's default overcommit policy does for glibc's malloc.
pub(crate) fn ensure_allocatable(n: usize, dtype: DType) -> Result<()> {
    ensure_bytes(
        n.checked_mul(dtype.size()),
        n as u128 * dtype.size() as u128,
    )
}

/// [`ensure_allocatable`] for a request of `bytes` (None when the size overflowed; `wanted` is
/// the true size for the message).
fn ensure_bytes(bytes: Option<usize>, wanted: u128) -> Result<()> {
    const CHECK_FROM_BYTES: usize = 1 << 26;
    let fits = |b: usize| {
        memory_limit().is_none_or(|lim| b <= lim) && Vec::<u8>::new().try_reserve_exact(b).is_ok()
    };
    match bytes {
        Some(b) if b < CHECK_FROM_BYTES || fits(b) => Ok(()),
        _ => Err(cannot_allocate(wanted)),
    }
}

/// torch's error for a buffer of `bytes` bytes that cannot be had.
pub(crate) fn cannot_allocate(bytes: u128) -> Error {
    Error::runtime(format!(
        "DefaultCPUAllocator: can't allocate memory: you tried to allocate {bytes} bytes."
    ))
}

/// The number of elements of `shape`, or an error when it overflows.
pub(crate) fn checked_numel(shape: &[usize]) -> Result<usize> {
    shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| {
            // Spelled out rather than through shape::fmt_shape: shape.rs sits above this file.
            let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
            Error::runtime(format!("numel of shape [{}] overflows", dims.join(", ")))
        })
}
