//! Saved-tensor hooks (torch's `autograd.graph.saved_tensors_hooks`): while a pair is active on
//! a thread, every tensor an op saves for backward is handed to `pack`, and what `pack` returns
//! is kept instead of the tensor; backward gets the tensor back from `unpack`. Checkpointing
//! (recompute instead of keep), offloading and compression are built on this.
//!
//! Unlike torch, the in-place version check still runs on tensors that went through hooks: the
//! saved tensor's storage is watched (weakly) and a change to it after saving is the usual
//! error, where torch silently computes with whatever `unpack` returns.
//!
//! ```
//! use std::sync::Arc;
//! use ferrograd::autograd::saved_hooks::{Payload, SavedTensorHooks};
//! use ferrograd::Tensor;
//!
//! // Keep a copy of every saved tensor (what an offloading hook does).
//! let hooks = SavedTensorHooks::new(
//!     |t: &Tensor| Ok(Box::new(t.copy_detached()?) as Payload),
//!     |p: &Payload| Ok(p.downcast_ref::<Tensor>().expect("packed a Tensor").clone()),
//! );
//! let x = Tensor::from_vec(vec![1.0f64, 2.0], &[2])?.requires_grad_(true)?;
//! let y = {
//!     let _active = hooks.enter()?;
//!     x.mul(&x)?.sum()?
//! };
//! y.backward()?;
//! assert_eq!(x.grad().unwrap().to_vec::<f64>()?, vec![2.0, 4.0]);
//! # Ok::<(), ferrograd::Error>(())
//! ```

use std::any::Any;
use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// What `pack` turns a saved tensor into; `unpack` gets it back.
pub type Payload = Box<dyn Any + Send + Sync>;
/// Called when an op saves a tensor for backward.
pub type PackHook = dyn Fn(&Tensor) -> Result<Payload> + Send + Sync;
/// Called each time backward (or `saved_tensors`) reads a saved tensor.
pub type UnpackHook = dyn Fn(&Payload) -> Result<Tensor> + Send + Sync;

/// A pack/unpack pair.
pub struct SavedTensorHooks {
    pub(crate) pack: Box<PackHook>,
    pub(crate) unpack: Box<UnpackHook>,
    /// Whether backward still checks the saved tensor's version: true for user hooks; false
    /// for `allow_mutation_on_saved_tensors`, whose unpack returns the values as saved.
    pub(crate) check_version: bool,
}

impl SavedTensorHooks {
    /// A hook pair, shared by the scopes it is entered in and the tensors it packed.
    pub fn new(
        pack: impl Fn(&Tensor) -> Result<Payload> + Send + Sync + 'static,
        unpack: impl Fn(&Payload) -> Result<Tensor> + Send + Sync + 'static,
    ) -> Arc<Self> {
        Arc::new(SavedTensorHooks {
            pack: Box::new(pack),
            unpack: Box::new(unpack),
            check_version: true,
        })
    }

    /// Make this pair the active one on this thread until the guard is dropped (the innermost
    /// pair wins; outer pairs are not called). An error inside
    /// [`disable_saved_tensors_hooks`].
    pub fn enter(self: &Arc<Self>) -> Result<SavedHooksGuard> {
        push(self.clone())?;
        Ok(SavedHooksGuard { _private: () })
    }
}

/// Pops the hook pair it was made for when dropped.
pub struct SavedHooksGuard {
    _private: (),
}

impl Drop for SavedHooksGuard {
    fn drop(&mut self) {
        pop();
    }
}

#[derive(Default)]
struct State {
    stack: Vec<Arc<SavedTensorHooks>>,
    /// Set by `disable_saved_tensors_hooks`: entering hooks is then this error.
    disabled: Option<String>,
}

thread_local! {
    static STATE: RefCell<State> = RefCell::new(State::default());
}

/// Hook pairs active on any thread: while none is, saving a tensor skips the thread-local.
static ACTIVE: AtomicUsize = AtomicUsize::new(0);

/// Push a hook pair on this thread's stack (Python's `saved_tensors_hooks.__enter__`).
pub fn push(hooks: Arc<SavedTensorHooks>) -> Result<()> {
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        if let Some(msg) = &s.disabled {
            return Err(Error::runtime(msg.clone()));
        }
        s.stack.push(hooks);
        ACTIVE.fetch_add(1, Ordering::Relaxed);
        Ok(())
    })
}

/// Pop this thread's innermost hook pair (no-op when none is active).
pub fn pop() {
    STATE.with(|s| {
        if s.borrow_mut().stack.pop().is_some() {
            ACTIVE.fetch_sub(1, Ordering::Relaxed);
        }
    })
}

/// The hook pair saving a tensor now would use.
pub(crate) fn current() -> Option<Arc<SavedTensorHooks>> {
    if ACTIVE.load(Ordering::Relaxed) == 0 {
        return None;
    }
    STATE.with(|s| {
        let s = s.borrow();
        if s.disabled.is_some() {
            None
        } else {
            s.stack.last().cloned()
        }
    })
}

/// Disable saved-tensor hooks on this thread (`Some(message)`: entering a pair is then a
/// RuntimeError with that message) or enable them again (`None`). Returns the previous setting.
pub fn disable_saved_tensors_hooks(message: Option<String>) -> Option<String> {
    STATE.with(|s| std::mem::replace(&mut s.borrow_mut().disabled, message))
}

/// Runs an engine worker with the caller's hook pair (from [`current`]): a backward with
/// `create_graph` saves tensors on workers, and torch hands the caller's hooks to its workers.
/// Restores the worker's own stack when dropped.
pub(crate) struct InheritGuard {
    pushed: bool,
}

impl InheritGuard {
    pub(crate) fn new(hooks: Option<Arc<SavedTensorHooks>>) -> Self {
        let Some(h) = hooks else {
            return InheritGuard { pushed: false };
        };
        STATE.with(|s| s.borrow_mut().stack.push(h));
        ACTIVE.fetch_add(1, Ordering::Relaxed);
        InheritGuard { pushed: true }
    }
}

impl Drop for InheritGuard {
    fn drop(&mut self) {
        if self.pushed {
            pop();
        }
    }
}
