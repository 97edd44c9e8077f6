//! Node-creation hooks (torch's `autograd.graph.node_creation_hook`): while one is active on a
//! thread, every node created there is handed to it once fully populated (edges wired, outputs
//! attached, tensors saved). Nodes are queued as they are made and the recording paths hand the
//! queue to the hooks when they finish, so a leaf's accumulator comes before the op node that
//! first used it, as in torch.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::node::{set_creation_observer, CreationObserver, Node};
use crate::error::{Error, Result};

/// Called with each node created while it is active.
pub type NodeCreationHook = Arc<dyn Fn(&Arc<Node>) -> Result<()> + Send + Sync>;

thread_local! {
    static HOOKS: RefCell<Vec<NodeCreationHook>> = const { RefCell::new(Vec::new()) };
    static PENDING: RefCell<Vec<Arc<Node>>> = const { RefCell::new(Vec::new()) };
    static RUNNING: Cell<bool> = const { Cell::new(false) };
}

/// Hooks active on any thread: while none is, making a node skips the thread-locals.
static ACTIVE: AtomicUsize = AtomicUsize::new(0);

/// Make `hook` active on this thread (nested hooks all run, outermost first).
pub fn push(hook: NodeCreationHook) {
    set_creation_observer(CreationObserver { created, fire });
    HOOKS.with(|h| h.borrow_mut().push(hook));
    ACTIVE.fetch_add(1, Ordering::Relaxed);
}

/// Deactivate this thread's innermost hook.
pub fn pop() {
    if HOOKS.with(|h| h.borrow_mut().pop()).is_some() {
        ACTIVE.fetch_sub(1, Ordering::Relaxed);
    }
}

/// This thread's hooks, to carry into the engine's workers (nodes made during backward with
/// `create_graph` fire them too).
pub(crate) fn current() -> Vec<NodeCreationHook> {
    if ACTIVE.load(Ordering::Relaxed) == 0 {
        return Vec::new();
    }
    HOOKS.with(|h| h.borrow().clone())
}

/// Runs a worker with the caller's hooks; restores the worker's own when dropped.
pub(crate) struct InheritHooks(usize);

impl InheritHooks {
    pub(crate) fn new(hooks: &[NodeCreationHook]) -> Self {
        for h in hooks {
            push(h.clone());
        }
        InheritHooks(hooks.len())
    }
}

impl Drop for InheritHooks {
    fn drop(&mut self) {
        for _ in 0..self.0 {
            pop();
        }
    }
}

/// A node was made: queue it for the hooks, or refuse it when a hook is making it.
pub(crate) fn created(node: &Arc<Node>) -> Result<()> {
    if ACTIVE.load(Ordering::Relaxed) == 0 || HOOKS.with(|h| h.borrow().is_empty()) {
        return Ok(());
    }
    if RUNNING.get() {
        return Err(Error::runtime(format!(
            "Creating a new autograd node from inside a node creation hook is not supported. Node creation hooks should only observe the node (e.g. record it, stash metadata, or register backward hooks on it); got a new node of type {} while a hook was running.",
            node.name()
        )));
    }
    PENDING.with(|p| p.borrow_mut().push(node.clone()));
    Ok(())
}

/// Hand the queued nodes to the hooks (called when a recording path has finished its node).
pub(crate) fn fire() -> Result<()> {
    if ACTIVE.load(Ordering::Relaxed) == 0 {
        return Ok(());
    }
    let nodes = PENDING.with(|p| std::mem::take(&mut *p.borrow_mut()));
    if nodes.is_empty() {
        return Ok(());
    }
    let hooks = HOOKS.with(|h| h.borrow().clone());
    RUNNING.set(true);
    let result = nodes
        .iter()
        .try_for_each(|n| hooks.iter().try_for_each(|h| h(n)));
    RUNNING.set(false);
    result
}
