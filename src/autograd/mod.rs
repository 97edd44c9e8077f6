//! Reverse-mode automatic differentiation: `backward`, `grad`, hooks, grad modes and custom
//! functions, with the semantics of `torch::autograd`.
//!
//! `backward` accumulates into the leaves' `.grad`; `grad` returns gradients instead, and with
//! `create_graph` they can be differentiated again:
//!
//! ```
//! use ferrograd::autograd::{self, GradOptions};
//! use ferrograd::Tensor;
//! # fn main() -> ferrograd::Result<()> {
//! let x = Tensor::from_vec(vec![2.0f64], &[1])?.requires_grad_(true)?;
//! let y = x.mul(&x)?.mul(&x)?.sum()?; // x³
//! let opts = GradOptions { create_graph: true, ..Default::default() };
//! let dy = autograd::grad(&[y], std::slice::from_ref(&x), opts)?[0].clone().unwrap();
//! assert_eq!(dy.to_vec::<f64>()?, vec![12.0]); // 3x²
//! dy.sum()?.backward()?; // d²y/dx² = 6x, into x.grad
//! assert_eq!(x.grad().unwrap().to_vec::<f64>()?, vec![12.0]);
//! // Nothing is recorded under no_grad.
//! let _guard = autograd::no_grad();
//! assert!(!x.mul(&x)?.requires_grad());
//! # Ok(())
//! # }
//! ```
//!
//! Hooks see (and may replace) a tensor's gradient as backward passes it:
//!
//! ```
//! use std::sync::Arc;
//! use ferrograd::Tensor;
//! # fn main() -> ferrograd::Result<()> {
//! let x = Tensor::from_vec(vec![1.0f64, 2.0], &[2])?.requires_grad_(true)?;
//! let y = x.mul_scalar(3.0)?;
//! // Double the gradient flowing into y: returning Some(g) replaces it.
//! let handle = y.register_hook(Arc::new(|g: &Tensor| Ok(Some(g.mul_scalar(2.0)?))))?;
//! y.sum()?.backward()?;
//! assert_eq!(x.grad().unwrap().to_vec::<f64>()?, vec![6.0, 6.0]);
//! handle.remove();
//! # Ok(())
//! # }
//! ```

mod accumulate_grad;
pub mod engine;
pub mod forward_ad;
mod vmap;

pub use crate::graph::{allow_mutation, function, node, saved_hooks};
pub use crate::tensor::grad_mode;

use std::sync::{Arc, Weak};

pub use crate::parallel::{get_num_threads, set_num_threads};
pub use function::{CustomFunction, FunctionCtx};
pub use grad_mode::{
    is_grad_enabled, no_grad, set_detect_anomaly, set_grad_enabled, GradModeGuard,
};
pub use node::{Edge, Node};
pub use vmap::vmap;

use crate::error::{Error, Result};
use crate::tensor::shape::fmt_shape;
use crate::tensor::{Tensor, TensorImpl};
use engine::Targets;

use crate::graph::{next_hook_id, node_of};
pub use crate::tensor::TensorHook;

/// Options of [`backward`], the parameters of C++ `torch::autograd::backward` after `tensors`.
#[derive(Clone, Default)]
pub struct BackwardOptions {
    /// One gradient per tensor ("the vector" of the vector-Jacobian product); `None` entries (or
    /// an empty list) mean implicit ones, allowed for one-element outputs only.
    pub grad_tensors: Vec<Option<Tensor>>,
    /// Keep saved tensors for another backward; defaults to `create_graph`.
    pub retain_graph: Option<bool>,
    /// Build the graph of the derivative so it can be differentiated again.
    pub create_graph: bool,
    /// Accumulate only into these tensors (`None`: every leaf). An empty list is an error.
    pub inputs: Option<Vec<Tensor>>,
}

/// Options of [`grad`], the parameters of C++ `torch::autograd::grad` after `inputs`.
#[derive(Clone, Default)]
pub struct GradOptions {
    /// One gradient per output; `None` means implicit ones for one-element outputs.
    pub grad_outputs: Vec<Option<Tensor>>,
    /// Keep saved tensors for another backward; defaults to `create_graph`.
    pub retain_graph: Option<bool>,
    /// Build the graph of the derivative so it can be differentiated again.
    pub create_graph: bool,
    /// Return `None` for inputs the outputs do not depend on instead of failing; defaults to
    /// `materialize_grads`.
    pub allow_unused: Option<bool>,
    /// Return zeros instead of `None` for unused inputs.
    pub materialize_grads: bool,
}

/// Where a gradient computation starts or what it differentiates with respect to: a tensor, or
/// a place in the graph (torch's `GradientEdge`: the gradient flowing into output slot
/// `input_nr` of `node`, which a tensor may no longer stand for, e.g. after an in-place op).
#[derive(Clone)]
pub enum GradPoint {
    /// A tensor (its grad_fn and output number, or its accumulator).
    Tensor(Tensor),
    /// An edge, as from [`get_gradient_edge`].
    Edge(Edge),
}

/// What `grad` takes as an output or input: a tensor, or a [`GradPoint`] (tensor or edge).
/// Generic, so that `grad` on tensors builds no list of points.
trait Point {
    /// Shape and dtype of the gradient at this point.
    fn meta(&self) -> (&[usize], crate::tensor::DType);
    /// Whether a gradient can start here without a seed check failing (edges always can).
    fn requires_grad(&self) -> bool;
    /// Where a gradient seeded here enters the graph.
    fn root_edge(&self) -> Option<Edge>;
    /// Where the gradient with respect to this point is captured (an error for a tensor that
    /// does not require grad).
    fn capture_edge(&self) -> Result<Option<Edge>>;
}

impl Point for Tensor {
    fn meta(&self) -> (&[usize], crate::tensor::DType) {
        (self.shape(), self.dtype())
    }
    fn requires_grad(&self) -> bool {
        Tensor::requires_grad(self)
    }
    fn root_edge(&self) -> Option<Edge> {
        self.gradient_edge()
    }
    fn capture_edge(&self) -> Result<Option<Edge>> {
        if !Tensor::requires_grad(self) {
            return Err(Error::runtime(
                "One of the differentiated Tensors does not require grad",
            ));
        }
        Ok(match self.grad_fn() {
            Some(f) => Some(Edge {
                node: f,
                input_nr: self.output_nr(),
            }),
            None => self.existing_grad_accumulator().map(|acc| Edge {
                node: acc,
                input_nr: 0,
            }),
        })
    }
}

impl Point for GradPoint {
    fn meta(&self) -> (&[usize], crate::tensor::DType) {
        match self {
            GradPoint::Tensor(t) => Point::meta(t),
            GradPoint::Edge(e) => {
                let m = &e.node.output_meta[e.input_nr];
                (&m.shape, m.dtype)
            }
        }
    }
    fn requires_grad(&self) -> bool {
        match self {
            GradPoint::Tensor(t) => Point::requires_grad(t),
            GradPoint::Edge(_) => true,
        }
    }
    fn root_edge(&self) -> Option<Edge> {
        match self {
            GradPoint::Tensor(t) => t.root_edge(),
            GradPoint::Edge(e) => Some(e.clone()),
        }
    }
    fn capture_edge(&self) -> Result<Option<Edge>> {
        match self {
            GradPoint::Tensor(t) => t.capture_edge(),
            GradPoint::Edge(e) => Ok(Some(e.clone())),
        }
    }
}

/// The edge a tensor's gradient flows through (torch's `autograd.graph.get_gradient_edge`):
/// its grad_fn and output number, or for a leaf its accumulator (made if needed). Holding it
/// keeps that part of the graph alive; `grad` accepts it in place of the tensor.
pub fn get_gradient_edge(t: &Tensor) -> Result<Edge> {
    if !t.requires_grad() {
        return Err(Error::runtime(
            "It is not possible to get the gradient edge for a Tensor that does not require gradients",
        ));
    }
    t.gradient_edge()
        .ok_or_else(|| Error::runtime("no gradient edge for this tensor"))
}

/// Check the seeds against the roots (torch's `_make_grads`) and pair each root with its edge.
fn make_roots<P: Point>(
    points: &[P],
    grads: &[Option<Tensor>],
    create_graph: bool,
) -> Result<Vec<(Edge, Tensor)>> {
    if !grads.is_empty() && grads.len() < points.len() {
        return Err(Error::runtime(format!(
            "got {} tensors and {} gradients",
            points.len(),
            grads.len()
        )));
    }
    let mut roots = Vec::with_capacity(points.len());
    for (i, p) in points.iter().enumerate() {
        let (shape, dtype) = p.meta();
        let requires_grad = p.requires_grad();
        let seed = grads.get(i).cloned().flatten();
        let seed = match seed {
            Some(g) => {
                if g.shape() != shape {
                    return Err(Error::runtime(format!(
                        "Mismatch in shape: grad_output[{i}] has a shape of {} and output[{i}] has a shape of {}.",
                        fmt_shape(g.shape()),
                        fmt_shape(shape)
                    )));
                }
                let g = if g.dtype() != dtype {
                    g.to_dtype(dtype)?
                } else {
                    g
                };
                if create_graph {
                    g
                } else {
                    g.detach()
                }
            }
            None => {
                if !requires_grad {
                    return Err(Error::runtime(format!(
                        "element {i} of tensors does not require grad and does not have a grad_fn"
                    )));
                }
                if shape.iter().product::<usize>() != 1 {
                    return Err(Error::runtime(
                        "grad can be implicitly created only for scalar outputs",
                    ));
                }
                Tensor::ones(shape, dtype)
            }
        };
        match p.root_edge() {
            Some(edge) => roots.push((edge, seed)),
            None => {
                return Err(Error::runtime(format!(
                    "element {i} of tensors does not require grad and does not have a grad_fn"
                )))
            }
        }
    }
    Ok(roots)
}

/// Compute the sum of gradients of `tensors` with respect to graph leaves and accumulate them
/// into the leaves' `.grad` (or only into `opts.inputs`).
///
/// Errors (never panics) on: non-scalar roots without a gradient, shape or count mismatches,
/// roots that do not require grad, a second pass through a freed graph, and any error raised
/// inside a node or hook.
pub fn backward(tensors: &[Tensor], opts: BackwardOptions) -> Result<()> {
    let keep_graph = opts.retain_graph.unwrap_or(opts.create_graph);
    let targets = match &opts.inputs {
        None => Targets::AllLeaves,
        Some(inputs) => {
            if inputs.is_empty() {
                return Err(Error::runtime(
                    "`inputs` argument to `backward()` cannot be empty.",
                ));
            }
            let mut edges = Vec::new();
            for t in inputs {
                t.retain_grad()?;
                if !t.requires_grad() {
                    return Err(Error::runtime(
                        "One of the differentiated Tensors does not require grad",
                    ));
                }
                if let Some(f) = t.grad_fn() {
                    edges.push(Edge {
                        node: f,
                        input_nr: t.output_nr(),
                    });
                } else if let Some(acc) = t.existing_grad_accumulator() {
                    edges.push(Edge {
                        node: acc,
                        input_nr: 0,
                    });
                }
            }
            Targets::Only(edges)
        }
    };
    let roots = make_roots(tensors, &opts.grad_tensors, opts.create_graph)?;
    engine::execute(roots, keep_graph, opts.create_graph, targets)?;
    Ok(())
}

/// Compute and return the gradients of `outputs` with respect to `inputs` without touching any
/// `.grad`. Unused inputs are an error unless `allow_unused` (then `None`) or
/// `materialize_grads` (then zeros).
pub fn grad(
    outputs: &[Tensor],
    inputs: &[Tensor],
    opts: GradOptions,
) -> Result<Vec<Option<Tensor>>> {
    grad_at(outputs, inputs, opts)
}

/// [`grad`] where outputs and inputs may also be gradient edges ([`get_gradient_edge`]).
pub fn grad_points(
    outputs: &[GradPoint],
    inputs: &[GradPoint],
    opts: GradOptions,
) -> Result<Vec<Option<Tensor>>> {
    grad_at(outputs, inputs, opts)
}

fn grad_at<P: Point>(
    outputs: &[P],
    inputs: &[P],
    opts: GradOptions,
) -> Result<Vec<Option<Tensor>>> {
    if inputs.is_empty() {
        return Err(Error::runtime(
            "`inputs` argument to `grad()` cannot be empty.",
        ));
    }
    if opts.materialize_grads && opts.allow_unused == Some(false) {
        return Err(Error::value(
            "Expected allow_unused to be True or not passed when materialize_grads=True, but got: allow_unused=False.",
        ));
    }
    let allow_unused = opts.allow_unused.unwrap_or(opts.materialize_grads);
    let keep_graph = opts.retain_graph.unwrap_or(opts.create_graph);
    // Roots first: a leaf that is itself an output gets its accumulator here.
    let roots = make_roots(outputs, &opts.grad_outputs, opts.create_graph)?;
    let mut edges = Vec::with_capacity(inputs.len());
    for p in inputs {
        edges.push(p.capture_edge()?);
    }
    let results = engine::execute(
        roots,
        keep_graph,
        opts.create_graph,
        Targets::Capture(edges),
    )?;
    results
        .into_iter()
        .enumerate()
        .map(|(i, g)| match g {
            Some(g) => Ok(Some(if opts.create_graph {
                g
            } else {
                crate::graph::forward_ad::detach_keeping_tangent(&g)
            })),
            None if opts.materialize_grads => {
                let (shape, dtype) = inputs[i].meta();
                Ok(Some(Tensor::zeros(shape, dtype)))
            }
            None if allow_unused => Ok(None),
            None => Err(Error::runtime(format!(
                "The differentiated Tensor at index {i} appears to not have been used in the graph. Set allow_unused=True if this is the desired behavior."
            ))),
        })
        .collect()
}

/// A registered hook; `remove()` unregisters it (idempotent).
pub struct HookHandle {
    id: u64,
    target: HookTarget,
}

enum HookTarget {
    Node(Weak<Node>),
    Leaf(Weak<TensorImpl>),
    PostAccumulate(Weak<TensorImpl>),
}

impl HookHandle {
    /// Unregister the hook. Removing twice is harmless.
    pub fn remove(&self) {
        match &self.target {
            HookTarget::Node(w) => {
                if let Some(n) = w.upgrade() {
                    n.remove_pre_hook(self.id);
                }
            }
            HookTarget::Leaf(w) => {
                if let Some(t) = w.upgrade() {
                    Tensor(t)
                        .meta()
                        .leaf_hooks_mut()
                        .pre
                        .retain(|(i, _)| *i != self.id);
                }
            }
            HookTarget::PostAccumulate(w) => {
                if let Some(t) = w.upgrade() {
                    Tensor(t)
                        .meta()
                        .leaf_hooks_mut()
                        .post_accumulate
                        .retain(|(i, _)| *i != self.id);
                }
            }
        }
    }
}

impl Node {
    /// Run `hook(grad_outputs)` on the gradients arriving at this node, before it runs (torch's
    /// `node.register_prehook`); a returned list replaces them. Only runs if the node runs.
    pub fn register_prehook(self: &Arc<Self>, hook: node::NodePreHook) -> HookHandle {
        HookHandle {
            id: self.add_node_pre_hook(hook),
            target: HookTarget::Node(Arc::downgrade(self)),
        }
    }

    /// Run `hook(grad_inputs, grad_outputs)` after this node computed its gradients (torch's
    /// `node.register_hook`); a returned list replaces `grad_inputs`.
    pub fn register_hook(self: &Arc<Self>, hook: node::NodePostHook) -> HookHandle {
        HookHandle {
            id: self.add_post_hook(hook),
            target: HookTarget::Node(Arc::downgrade(self)),
        }
    }
}

impl Tensor {
    /// `backward()` of a one-element tensor: accumulate d(self)/d(leaf) into every leaf's `.grad`.
    pub fn backward(&self) -> Result<()> {
        backward(std::slice::from_ref(self), BackwardOptions::default())
    }

    /// `backward(gradient, retain_graph, create_graph, inputs)` with torch's semantics.
    pub fn backward_with(
        &self,
        gradient: Option<Tensor>,
        retain_graph: Option<bool>,
        create_graph: bool,
        inputs: Option<Vec<Tensor>>,
    ) -> Result<()> {
        let opts = BackwardOptions {
            grad_tensors: vec![gradient],
            retain_graph,
            create_graph,
            inputs,
        };
        backward(std::slice::from_ref(self), opts)
    }

    /// Register a hook on this tensor's gradient. Hooks run in registration order, each seeing
    /// the previous one's result; a leaf's hooks see its summed gradient once per backward.
    pub fn register_hook(&self, hook: TensorHook) -> Result<HookHandle> {
        if !self.requires_grad() {
            return Err(Error::runtime(
                "cannot register a hook on a tensor that doesn't require gradient",
            ));
        }
        let m = self.meta();
        match &m.grad_fn {
            Some(f) => {
                let f = node_of(f);
                let nr = m.output_nr;
                drop(m);
                let id = f.add_pre_hook(nr, hook);
                Ok(HookHandle {
                    id,
                    target: HookTarget::Node(Arc::downgrade(&f)),
                })
            }
            None => {
                drop(m);
                let id = next_hook_id();
                self.meta().leaf_hooks_mut().pre.push((id, hook));
                Ok(HookHandle {
                    id,
                    target: HookTarget::Leaf(self.downgrade()),
                })
            }
        }
    }

    /// Register a hook run after this leaf's `.grad` was accumulated.
    pub fn register_post_accumulate_grad_hook(
        &self,
        hook: crate::tensor::PostAccumulateHook,
    ) -> Result<HookHandle> {
        if !self.requires_grad() {
            return Err(Error::runtime(
                "cannot register a hook on a tensor that doesn't require gradient",
            ));
        }
        if !self.is_leaf() {
            return Err(Error::runtime(
                "post accumulate grad hooks cannot be registered on non-leaf tensors",
            ));
        }
        let id = next_hook_id();
        self.meta()
            .leaf_hooks_mut()
            .post_accumulate
            .push((id, hook));
        Ok(HookHandle {
            id,
            target: HookTarget::PostAccumulate(self.downgrade()),
        })
    }
}

#[cfg(test)]
mod lifetime_tests {
    use super::{backward, BackwardOptions};
    use crate::tensor::Tensor;
    use std::sync::Arc;

    fn leaf() -> Tensor {
        Tensor::from_vec(vec![1.0f64, 2.0, 3.0], &[3])
            .and_then(|t| t.requires_grad_(true))
            .expect("a small leaf")
    }

    #[test]
    fn create_graph_backward_leaves_no_cycle_through_the_leaf() {
        let x = leaf();
        let y = x
            .mul(&x)
            .and_then(|t| t.mul(&x))
            .and_then(|t| t.sum())
            .unwrap();
        let opts = BackwardOptions {
            create_graph: true,
            ..Default::default()
        };
        backward(&[y], opts).unwrap();
        // x.grad = 3x^2 has a graph that saved x and leads to x's accumulator.
        let g = x.grad().unwrap();
        assert!(g.grad_fn().is_some());
        assert_eq!(g.to_vec::<f64>().unwrap(), vec![3.0, 12.0, 27.0]);
        let w = Arc::downgrade(&x.0);
        drop(g);
        drop(x);
        assert!(w.upgrade().is_none(), "the leaf outlived its last handle");
    }

    #[test]
    fn a_graph_whose_leaf_is_gone_still_runs_for_the_other_leaves() {
        let (x, w) = (leaf(), leaf());
        let y = x.mul(&w).and_then(|t| t.sum()).unwrap();
        drop(x);
        y.backward().unwrap();
        // dy/dw = x, read from the saved elements of the dropped leaf.
        assert_eq!(
            w.grad().unwrap().to_vec::<f64>().unwrap(),
            vec![1.0, 2.0, 3.0]
        );
    }
}
