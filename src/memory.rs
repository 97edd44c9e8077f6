//! Tensor memory: how many bytes tensors own now and at their peak (the CPU counterpart of
//! `torch.cuda.memory_allocated`), and giving memory back to the system after a large graph
//! is freed.
//!
//! The counters see only tensor storage, so they measure what a program keeps alive (saved
//! activations, gradients) whatever the allocator keeps cached; RSS cannot tell the two apart.
//! Memory shared with NumPy counts while a tensor holds it: `tensor(array)` copies through a
//! NumPy array the tensor then owns.
//!
//! Allocators keep freed pages for reuse (mimalloc, which the Python extension uses, returns
//! them only when it is next called after a delay), so a process that built and dropped a
//! million-node graph would keep its peak memory for good. Freeing that many nodes at once is
//! rare and already costs milliseconds, so the embedding's release function runs then.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

static ALLOCATED: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// Bytes of the storages live tensors hold, memory shared with NumPy or DLPack included (while
/// a tensor holds it).
pub fn allocated() -> usize {
    ALLOCATED.load(Ordering::Relaxed)
}

/// The highest [`allocated`] since the process started or the last [`reset_peak`].
///
/// ```
/// use ferrograd::{memory, DType, Tensor};
/// memory::reset_peak();
/// let t = Tensor::zeros(&[1024], DType::Float32); // 4 KiB
/// assert!(memory::allocated() >= 4096);
/// assert!(memory::max_allocated() >= memory::allocated());
/// drop(t);
/// ```
pub fn max_allocated() -> usize {
    PEAK.load(Ordering::Relaxed)
}

/// Start a new peak from what is allocated now.
pub fn reset_peak() {
    PEAK.store(ALLOCATED.load(Ordering::Relaxed), Ordering::Relaxed);
}

/// A storage of `bytes` was made.
pub(crate) fn count_alloc(bytes: usize) {
    if bytes != 0 {
        let now = ALLOCATED.fetch_add(bytes, Ordering::Relaxed) + bytes;
        // fetch_max is a compare-exchange loop even when the peak stands (nearly always): a
        // plain load first spares every allocation a locked instruction.
        if now > PEAK.load(Ordering::Relaxed) {
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
    }
}

/// A storage of `bytes` was freed.
pub(crate) fn count_free(bytes: usize) {
    if bytes != 0 {
        ALLOCATED.fetch_sub(bytes, Ordering::Relaxed);
    }
}

/// Nodes freed in one go from which memory is handed back: a graph of ~100 MB, which took
/// over 100 ms to record and run, so re-faulting its pages in a loop costs a few percent.
pub(crate) const RELEASE_FROM_NODES: usize = 1 << 18;

static RELEASE: OnceLock<fn()> = OnceLock::new();

/// Install the function that returns freed memory to the system (e.g. a call to the global
/// allocator's collect). Only the first call has an effect; returns whether this one did.
pub fn set_release_hook(release: fn()) -> bool {
    RELEASE.set(release).is_ok()
}

/// A large graph was just freed: hand its memory back if a release function is installed.
pub(crate) fn after_large_free() {
    if let Some(release) = RELEASE.get() {
        release();
    }
}
