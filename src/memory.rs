//! Giving memory back to the system after a large graph is freed.
//!
//! Allocators keep freed pages for reuse (mimalloc, which the Python extension uses, returns
//! them only when it is next called after a delay), so a process that built and dropped a
//! million-node graph would keep its peak memory for good. Freeing that many nodes at once is
//! rare and already costs milliseconds, so the embedding's release function runs then.

use std::sync::OnceLock;

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
