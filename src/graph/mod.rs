//! The autograd graph's types, below the ops that record them and above the tensors they
//! hold: nodes (an op's backward rule and saved tensors, a custom function, a leaf's
//! accumulator), edges, and how ops record a node for their outputs. What runs a graph (the
//! engine) sits above the ops, in [`crate::autograd`].

pub mod allow_mutation;
pub mod creation_hooks;
pub mod dot;
pub mod forward_ad;
pub mod function;
mod history;
pub mod node;
pub mod saved_hooks;

pub(crate) use history::node_of;

use std::sync::atomic::{AtomicU64, Ordering};

static NEXT_HOOK: AtomicU64 = AtomicU64::new(1);

/// A fresh id for a hook handle (tensor, node or post-accumulate hooks share one sequence).
pub(crate) fn next_hook_id() -> u64 {
    NEXT_HOOK.fetch_add(1, Ordering::Relaxed)
}
