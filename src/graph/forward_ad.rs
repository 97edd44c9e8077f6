//! Forward-mode AD's state: the dual level, the tangent of each dual tensor, and how an op
//! computes its outputs' tangents.
//!
//! Tangents live in a side table keyed by tensor, not in the tensor: forward mode is rare, and
//! every tensor would otherwise pay for the slot. Ops record tangents through the same
//! `record` (graph::node) call that records their backward node: while a level is
//! open and an input has a tangent, `record` asks for the outputs' tangents (`J v`) and sets
//! them, with or without making the node.
//!
//! `J v` comes from the op's backward rule, which computes `Jᵀ g` and is linear in `g`: the
//! engine differentiates `<Jᵀ g, v>` with respect to `g` (that gradient is `J v`). Every op with
//! a twice-differentiable backward rule gets a correct forward rule this way, at the cost of
//! running the rule and a small backward pass per op. Elementwise ops of one input (recorded
//! with `record_elementwise`) have a diagonal Jacobian, and their rule applied to the tangent
//! is already `J v`.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use rustc_hash::FxHashMap;

use crate::error::{Error, Result};
use crate::tensor::{Tensor, TensorImpl};

/// Whether a dual level is open (checked by every op before anything else of forward mode).
static OPEN: AtomicBool = AtomicBool::new(false);

struct State {
    /// The open level (torch numbers them from 0; one at a time).
    level: Option<u64>,
    /// Tensor address to (the tensor, held weakly so the table keeps nothing alive; its tangent).
    tangents: FxHashMap<usize, (Weak<TensorImpl>, Tensor)>,
}

static STATE: Mutex<State> = Mutex::new(State {
    level: None,
    tangents: FxHashMap::with_hasher(rustc_hash::FxBuildHasher),
});

thread_local! {
    /// Set while an op's tangents are being computed: the ops doing that propagate none.
    static SUSPENDED: Cell<u32> = const { Cell::new(0) };
}

/// Whether ops on this thread propagate tangents now.
pub(crate) fn is_active() -> bool {
    OPEN.load(Ordering::Acquire) && SUSPENDED.get() == 0
}

/// Open a dual level; its number. Only one level at a time, as in torch.
pub fn enter_dual_level() -> Result<u64> {
    let mut s = STATE.lock();
    if s.level.is_some() {
        return Err(Error::runtime(
            "Nested forward mode AD is not supported at the moment",
        ));
    }
    // Levels are numbered by depth, as in torch; with one at a time it is always 0.
    let level = 0;
    s.level = Some(level);
    OPEN.store(true, Ordering::Release);
    Ok(level)
}

/// Close the open dual level: every tangent made in it is dropped.
pub fn exit_dual_level(level: Option<u64>) -> Result<()> {
    let mut s = STATE.lock();
    match (s.level, level) {
        (None, _) => return Err(Error::runtime("Dual level must be a positive number.")),
        (Some(open), Some(l)) if l != open => {
            return Err(Error::runtime(
                "Trying to exit a forward AD level that was not the last one that was created. This is not supported.",
            ))
        }
        _ => {}
    }
    s.level = None;
    OPEN.store(false, Ordering::Release);
    let dropped = std::mem::take(&mut s.tangents);
    drop(s);
    drop(dropped);
    Ok(())
}

/// The open level, if any.
pub fn current_level() -> Option<u64> {
    STATE.lock().level
}

/// `t`'s tangent at the open level.
pub fn tangent(t: &Tensor) -> Option<Tensor> {
    if !OPEN.load(Ordering::Acquire) {
        return None;
    }
    let s = STATE.lock();
    let (w, tan) = s.tangents.get(&t.id())?;
    (w.as_ptr() == Arc::as_ptr(&t.0)).then(|| tan.clone())
}

/// Give `t` a tangent at the open level (replacing any). Dead tensors' entries are swept as the
/// table grows, so a long forward pass does not keep every tangent it made.
pub(crate) fn set_tangent(t: &Tensor, tangent: Tensor) {
    let mut s = STATE.lock();
    if s.level.is_none() {
        return;
    }
    let n = s.tangents.len();
    if n >= 64 && n.is_power_of_two() {
        s.tangents.retain(|_, (w, _)| w.strong_count() > 0);
    }
    s.tangents.insert(t.id(), (t.downgrade(), tangent));
}

/// `t.detach()` that keeps `t`'s tangent: a rule reading a saved output must see the output's
/// tangent (torch's SavedVariable keeps the forward grad), and `grad()` without `create_graph`
/// detaches its results from the backward graph, not from forward mode.
pub fn detach_keeping_tangent(t: &Tensor) -> Tensor {
    let d = t.detach();
    if let Some(tan) = tangent(t) {
        set_tangent(&d, tan);
    }
    d
}

/// `tangent` as the tangent of `target`: the same shape (torch's error otherwise), cast to
/// `target`'s dtype.
pub fn checked_tangent(target: &Tensor, tangent: &Tensor) -> Result<Tensor> {
    if tangent.shape() != target.shape() {
        return Err(Error::runtime(format!(
            "Trying to set a forward gradient that has a different size than that of the original Tensor, this is not supported. Tensor is of size {} while the given forward gradient is of size {}.",
            crate::tensor::shape::fmt_shape(target.shape()),
            crate::tensor::shape::fmt_shape(tangent.shape())
        )));
    }
    if tangent.dtype() == target.dtype() {
        return Ok(tangent.clone());
    }
    let _quiet = Suspend::new();
    tangent.to_dtype(target.dtype())
}

/// Drop `t`'s tangent (an in-place op overwrote it with values that have none).
pub(crate) fn clear_tangent(t: &Tensor) {
    STATE.lock().tangents.remove(&t.id());
}

/// The tangent of each input, if forward mode is on and any has one.
pub(crate) fn tangents_of(inputs: &[&Tensor]) -> Option<Vec<Option<Tensor>>> {
    if !is_active() {
        return None;
    }
    let ts: Vec<Option<Tensor>> = inputs.iter().map(|t| tangent(t)).collect();
    ts.iter().any(Option::is_some).then_some(ts)
}

/// Whether any input carries a tangent ops must propagate.
pub(crate) fn any_tangent(inputs: &[&Tensor]) -> bool {
    is_active() && inputs.iter().any(|t| tangent(t).is_some())
}

/// [`any_tangent`] for owned tensors.
pub(crate) fn any_tangent_in(ts: &[Tensor]) -> bool {
    is_active() && ts.iter().any(|t| tangent(t).is_some())
}

/// Stops tangent propagation on this thread while alive.
pub struct Suspend(());

impl Suspend {
    /// Ops run while this is alive propagate no tangents (those computing a tangent).
    pub fn new() -> Self {
        suspend_push();
        Suspend(())
    }
}

/// Suspend tangent propagation on this thread until the matching [`suspend_pop`] (for
/// bindings, where a guard cannot span the calls).
pub fn suspend_push() {
    SUSPENDED.set(SUSPENDED.get() + 1);
}

/// End one [`suspend_push`].
pub fn suspend_pop() {
    SUSPENDED.set(SUSPENDED.get().saturating_sub(1));
}

impl Default for Suspend {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Suspend {
    fn drop(&mut self) {
        suspend_pop();
    }
}

/// Whether this thread has tangent propagation suspended (the engine carries it to workers).
pub(crate) fn is_suspended() -> bool {
    SUSPENDED.get() > 0
}
