//! A tensor's place in the graph: the node that produced it, or the accumulator that takes its
//! gradient, and the operations that change either. The tensor layer stores these as
//! [`GraphNode`] handles; this is where they are the graph's own [`Node`] again.

use std::any::Any;
use std::sync::{Arc, Weak};

use super::node::{Edge, Node};
use crate::error::{Error, Result};
use crate::tensor::{GraphNode, Tensor};

impl GraphNode for Node {
    fn release_chain(self: Arc<Self>) {
        super::node::drop_iteratively(self);
    }
}

/// The graph node behind a tensor's handle (`Node` is the only `GraphNode`).
#[inline]
pub(crate) fn node_of(n: &Arc<dyn GraphNode>) -> Arc<Node> {
    into_node(n.clone())
}

#[inline]
fn into_node(n: Arc<dyn GraphNode>) -> Arc<Node> {
    let any: Arc<dyn Any + Send + Sync> = n;
    match any.downcast::<Node>() {
        Ok(node) => node,
        Err(_) => unreachable!("every GraphNode is a graph Node"),
    }
}

fn upgrade(w: &Option<Weak<dyn GraphNode>>) -> Option<Arc<Node>> {
    w.as_ref()?.upgrade().map(into_node)
}

impl Tensor {
    /// The node that produced this tensor, if any.
    pub fn grad_fn(&self) -> Option<Arc<Node>> {
        self.meta().grad_fn.as_ref().map(node_of)
    }

    /// The node that produced this tensor and which of its outputs this is, if any.
    pub(crate) fn producer(&self) -> Option<(Arc<Node>, usize)> {
        let m = self.meta();
        m.grad_fn.as_ref().map(|f| (node_of(f), m.output_nr))
    }
    /// Keep `.grad` on a non-leaf after backward; a no-op on leaves.
    pub fn retain_grad(&self) -> Result<()> {
        let mut m = self.meta();
        if m.grad_fn.is_none() {
            if !m.requires_grad {
                return Err(Error::runtime(
                    "can't retain_grad on Tensor that has requires_grad=False",
                ));
            }
            return Ok(());
        }
        if m.retains_grad {
            return Ok(());
        }
        m.retains_grad = true;
        let f = m.grad_fn.as_ref().map(node_of).expect("checked above");
        let nr = m.output_nr;
        drop(m);
        f.add_retain_grad(nr, self.downgrade());
        Ok(())
    }

    /// Cut this tensor from the graph in place: it becomes a leaf that does not require grad.
    pub fn detach_(&self) -> Result<()> {
        let mut m = self.meta();
        if m.view_base.is_some() {
            return Err(Error::runtime("Can't detach views in-place. Use detach() instead. If you are using DistributedDataParallel (DDP) for training, and gradient_as_bucket_view is set as True, gradients are views of DDP buckets, and hence detach_() cannot be called on these gradients. To fix this error, please refer to the Optimizer.zero_grad() function in torch/optim/optimizer.py as the solution."));
        }
        let f = m.grad_fn.take();
        m.requires_grad = false;
        m.output_nr = 0;
        m.detached_in_place = true;
        drop(m);
        if let Some(f) = f {
            f.release_chain();
        }
        Ok(())
    }

    /// Where gradients for this tensor enter the graph: its grad_fn slot, or its leaf
    /// accumulator (created on first use). `None` when it does not require grad.
    pub(crate) fn gradient_edge(&self) -> Option<Edge> {
        let m = self.meta();
        if let Some(f) = &m.grad_fn {
            return Some(Edge {
                node: node_of(f),
                input_nr: m.output_nr,
            });
        }
        if !m.requires_grad {
            return None;
        }
        if let Some(acc) = upgrade(&m.grad_accumulator) {
            return Some(Edge {
                node: acc,
                input_nr: 0,
            });
        }
        drop(m);
        let acc = Node::accumulate_grad(self.clone());
        let mut m = self.meta();
        // Another thread may have raced us; keep the first accumulator.
        if let Some(existing) = upgrade(&m.grad_accumulator) {
            return Some(Edge {
                node: existing,
                input_nr: 0,
            });
        }
        let weak: Weak<dyn GraphNode> = Arc::downgrade(&acc) as Weak<Node>;
        m.grad_accumulator = Some(weak);
        // Queued for node-creation hooks; made inside one it is simply not reported (there
        // is no error path here, and an accumulator is bookkeeping, not a recorded op).
        let _ = super::node::node_created(&acc);
        Some(Edge {
            node: acc,
            input_nr: 0,
        })
    }

    /// The leaf's accumulator if the graph still holds it.
    pub(crate) fn existing_grad_accumulator(&self) -> Option<Arc<Node>> {
        upgrade(&self.meta().grad_accumulator)
    }

    /// Make output `nr` of `node` this tensor's history (an in-place op's result took its
    /// place); `retain_grad` follows the tensor to its new history (torch PR #79996).
    pub(crate) fn set_history(&self, node: Option<Arc<Node>>, nr: usize) {
        let mut m = self.meta();
        let old = std::mem::replace(
            &mut m.grad_fn,
            node.clone().map(|n| n as Arc<dyn GraphNode>),
        );
        m.output_nr = nr;
        let retains = m.retains_grad;
        drop(m);
        if retains {
            if let Some(old) = &old {
                node_of(old).remove_retain_grad(&self.downgrade());
            }
            if let Some(f) = node {
                f.add_retain_grad(nr, self.downgrade());
            }
        }
        if let Some(old) = old {
            old.release_chain();
        }
    }
}
