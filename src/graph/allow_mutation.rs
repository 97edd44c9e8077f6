//! torch's `autograd.graph.allow_mutation_on_saved_tensors`: while the context is open, a
//! tensor saved for backward may be modified in place. Saved tensors go through a built-in
//! saved-tensor hook pair; the first in-place write to a saved tensor's storage first copies the
//! saved tensor, and backward reads that copy (the values as they were saved) instead of
//! raising the in-place error. The copy is made by a pre-write watch on storages, so every
//! in-place path (ops, `copy_`, indexing assignment, optimizers) is covered.
//!
//! ```
//! use ferrograd::autograd::allow_mutation::allow_mutation_on_saved_tensors;
//! use ferrograd::Tensor;
//!
//! let a = Tensor::from_vec(vec![1.0f64, 2.0], &[2])?.requires_grad_(true)?;
//! let ctx = allow_mutation_on_saved_tensors()?;
//! let b = a.mul_scalar(1.0)?;
//! let out = b.mul(&b)?.sum()?; // saves b
//! b.fill_(7.0)?; // allowed: backward uses b as it was saved
//! out.backward()?;
//! assert_eq!(a.grad().unwrap().to_vec::<f64>()?, vec![2.0, 4.0]);
//! drop(ctx);
//! # Ok::<(), ferrograd::Error>(())
//! ```

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

use super::saved_hooks::{self, Payload, SavedTensorHooks};
use crate::error::{Error, Result};
use crate::tensor::{storage, Storage, Tensor};

/// One saved tensor: the original until its storage is first written, then a copy of it.
struct Slot {
    original: Option<Tensor>,
    copy: Option<Tensor>,
}

/// A saved tensor's slot and the storage whose writes it watches.
struct Watched {
    storage: Weak<Storage>,
    slot: Weak<Mutex<Slot>>,
}

/// The state of one open context.
#[derive(Default)]
struct Context {
    open: AtomicBool,
    watched: Mutex<Vec<Watched>>,
}

/// The open context (one at a time: contexts cannot be nested, as in torch).
static CURRENT: Mutex<Option<Arc<Context>>> = Mutex::new(None);

const OUTSIDE: &str = "Trying to backward outside of the 'allow_mutation_on_saved_tensors' context in which the graph was originally recorded.";

/// Before `s` is written: copy every tensor saved from it that has no copy yet.
fn before_write(s: &Storage) {
    let Some(ctx) = CURRENT.lock().clone() else {
        return;
    };
    let slots: Vec<Arc<Mutex<Slot>>> = {
        let mut watched = ctx.watched.lock();
        // Drop entries whose slot is gone (backward freed the graph).
        watched.retain(|w| w.slot.strong_count() > 0);
        watched
            .iter()
            .filter(|w| std::ptr::eq(w.storage.as_ptr(), s))
            .filter_map(|w| w.slot.upgrade())
            .collect()
    };
    for slot in slots {
        let mut slot = slot.lock();
        if slot.copy.is_some() {
            continue;
        }
        if let Some(original) = slot.original.take() {
            // A copy that fails (out of memory) leaves the original: backward then reports the
            // in-place change rather than computing with changed values.
            match original.copy_detached() {
                Ok(c) => slot.copy = Some(c),
                Err(_) => slot.original = Some(original),
            }
        }
    }
}

/// Keeps the context open; dropping it closes it (its saved tensors can no longer be read).
pub struct AllowMutationGuard {
    ctx: Arc<Context>,
}

impl Drop for AllowMutationGuard {
    fn drop(&mut self) {
        self.ctx.open.store(false, Ordering::Release);
        self.ctx.watched.lock().clear();
        saved_hooks::pop();
        storage::watch_writes(false);
        *CURRENT.lock() = None;
    }
}

/// Open an `allow_mutation_on_saved_tensors` context on this thread until the guard is dropped.
/// Errors: a context already open (torch's "contexts cannot be nested"), or saved-tensor hooks
/// disabled on this thread.
pub fn allow_mutation_on_saved_tensors() -> Result<AllowMutationGuard> {
    let ctx = Arc::new(Context::default());
    {
        let mut cur = CURRENT.lock();
        if cur.is_some() {
            return Err(Error::runtime(
                "allow_mutation_on_saved_tensors contexts cannot be nested",
            ));
        }
        *cur = Some(ctx.clone());
    }
    let (pack_ctx, unpack_ctx) = (Arc::downgrade(&ctx), Arc::downgrade(&ctx));
    let mut hooks = SavedTensorHooks::new(
        move |t: &Tensor| {
            let slot = Arc::new(Mutex::new(Slot {
                original: Some(t.clone()),
                copy: None,
            }));
            if let Some(ctx) = pack_ctx.upgrade() {
                ctx.watched.lock().push(Watched {
                    storage: Arc::downgrade(t.data_storage()),
                    slot: Arc::downgrade(&slot),
                });
            }
            Ok(Box::new(slot) as Payload)
        },
        move |p: &Payload| {
            let open = unpack_ctx
                .upgrade()
                .is_some_and(|c| c.open.load(Ordering::Acquire));
            if !open {
                return Err(Error::runtime(OUTSIDE));
            }
            let slot = p
                .downcast_ref::<Arc<Mutex<Slot>>>()
                .ok_or_else(|| Error::runtime("internal error: a foreign saved-tensor payload"))?
                .lock();
            slot.copy
                .clone()
                .or_else(|| slot.original.clone())
                .ok_or_else(|| Error::runtime(OUTSIDE))
        },
    );
    if let Some(h) = Arc::get_mut(&mut hooks) {
        // The unpacked copy holds the saved values, so the in-place check has nothing to catch.
        h.check_version = false;
    }
    if let Err(e) = saved_hooks::push(hooks) {
        *CURRENT.lock() = None;
        return Err(e);
    }
    storage::set_pre_write_hook(before_write);
    storage::watch_writes(true);
    ctx.open.store(true, Ordering::Release);
    Ok(AllowMutationGuard { ctx })
}
