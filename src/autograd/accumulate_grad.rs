//! The leaf's accumulator node (torch's `AccumulateGrad`): it takes the summed gradient of a
//! leaf, runs the leaf's hooks on it, adds it into `.grad`, then runs the post-accumulate hooks.
//! The graph holds it (`NodeKind::Accumulate`), the leaf only weakly.

use std::sync::Arc;

use crate::error::Result;
use crate::graph::node::{run_hook, Node};
use crate::tensor::grad_mode;
use crate::tensor::Tensor;

/// The leaf's tensor hooks, on its summed gradient before accumulation.
pub(super) fn run_leaf_hooks(node: &Arc<Node>, grads: &mut [Option<Tensor>]) -> Result<()> {
    let Some(variable) = node.variable() else {
        return Ok(());
    };
    let hooks = variable.meta().pre_hooks();
    if let Some(g) = grads.get_mut(0) {
        for h in hooks {
            run_hook(&h, g)?;
        }
    }
    Ok(())
}

/// Run the accumulator: add `grad` into its leaf's `.grad` (a leaf that is gone, or no
/// gradient, is nothing to do).
pub(super) fn apply(node: &Arc<Node>, grad: Option<Tensor>, create_graph: bool) -> Result<()> {
    match (node.variable(), grad) {
        (Some(variable), Some(g)) => accumulate(&variable, g, create_graph),
        _ => Ok(()),
    }
}

/// Add `g` into `variable.grad` (torch's AccumulateGrad): the first gradient is stored (stolen
/// when nothing else holds it), later ones are added in place, or out of place under
/// `create_graph` so the sum stays differentiable.
fn accumulate(variable: &Tensor, g: Tensor, create_graph: bool) -> Result<()> {
    let mut m = variable.meta();
    let new = match m.grad.take() {
        None => {
            if create_graph {
                g
            } else {
                g.steal_or_copy()?
            }
        }
        Some(old) => {
            if create_graph || old.requires_grad() && grad_mode::is_grad_enabled() {
                old.add(&g)?
            } else {
                let restore = old.clone();
                if let Err(e) = crate::ops::inplace::add_into_nograd(&old, &g) {
                    m.grad = Some(restore);
                    return Err(e);
                }
                old
            }
        }
    };
    m.grad = Some(new);
    let hooks = m.post_accumulate_hooks();
    drop(m);
    for h in hooks {
        h(variable)?;
    }
    Ok(())
}
