//! Custom differentiable functions (torch's `autograd.Function`) for Rust and, through the same
//! recording path, for Python.
//!
//! A function gives its forward and backward; [`apply`] runs the forward without recording and
//! records one node whose backward is the function's:
//!
//! ```
//! use std::sync::Arc;
//! use ferrograd::autograd::{function::apply, CustomFunction, FunctionCtx};
//! use ferrograd::Tensor;
//!
//! /// exp(x), saving its output for backward (torch's `Exp` example).
//! struct Exp;
//!
//! impl CustomFunction for Exp {
//!     fn name(&self) -> String {
//!         "Exp".into()
//!     }
//!     fn forward(&self, ctx: &mut FunctionCtx, inputs: &[Tensor]) -> ferrograd::Result<Vec<Tensor>> {
//!         let out = inputs[0].exp()?;
//!         ctx.to_save = vec![Some(out.clone())];
//!         Ok(vec![out])
//!     }
//!     fn backward(
//!         &self,
//!         ctx: &FunctionCtx,
//!         grads: &[Option<Tensor>],
//!     ) -> ferrograd::Result<Vec<Option<Tensor>>> {
//!         let out = ctx.saved_tensors()?[0].clone().expect("saved in forward");
//!         let g = grads[0].clone().expect("materialized");
//!         Ok(vec![Some(g.mul(&out)?)])
//!     }
//! }
//!
//! # fn main() -> ferrograd::Result<()> {
//! let x = Tensor::from_vec(vec![0.0f64, 1.0], &[2])?.requires_grad_(true)?;
//! let y = apply(Arc::new(Exp), std::slice::from_ref(&x))?.remove(0);
//! y.sum()?.backward()?;
//! assert_eq!(x.grad().unwrap().to_vec::<f64>()?, vec![1.0, 1.0f64.exp()]);
//! # Ok(())
//! # }
//! ```

use std::borrow::Cow;
use std::sync::{Arc, OnceLock, Weak};

use parking_lot::Mutex;

use super::node::{CustomBackward, Node, NodeKind, SavedTensor, TensorMeta, ERR_TWICE};
use crate::error::{Error, Result};
use crate::tensor::grad_mode::{self, GradModeGuard};
use crate::tensor::Tensor;

/// Tensors a custom function saved for backward: version-checked when read, freed with the
/// graph.
#[derive(Default)]
pub struct SavedVariables {
    inner: Mutex<(Vec<Option<SavedTensor>>, bool)>,
    node: OnceLock<Weak<Node>>,
}

impl SavedVariables {
    /// Save `tensors` (None entries allowed); those among `outputs` are kept without a cycle.
    pub fn new(tensors: &[Option<Tensor>], outputs: &[Tensor]) -> Result<Arc<Self>> {
        let saved = tensors
            .iter()
            .map(|t| match t {
                None => Ok(None),
                Some(t) => SavedTensor::new(t, outputs.iter().position(|o| o.same(t))).map(Some),
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Arc::new(SavedVariables {
            inner: Mutex::new((saved, false)),
            node: OnceLock::new(),
        }))
    }

    /// The saved tensors; ERR_TWICE after the graph was freed, the in-place error if one changed.
    pub fn unpack(&self) -> Result<Vec<Option<Tensor>>> {
        let g = self.inner.lock();
        if g.1 && !g.0.is_empty() {
            return Err(Error::runtime(ERR_TWICE));
        }
        let node = self.node.get().and_then(Weak::upgrade);
        g.0.iter()
            .map(|s| {
                s.as_ref()
                    .map(|s| s.unpack(node.as_ref(), true))
                    .transpose()
            })
            .collect()
    }

    /// Free the saved tensors.
    pub fn release(&self) {
        let mut g = self.inner.lock();
        g.1 = true;
        let freed = std::mem::take(&mut g.0);
        let had = !freed.is_empty();
        drop(freed);
        if had {
            // Keep "something was saved" so a later unpack reports ERR_TWICE.
            g.0.push(None);
        }
    }

    pub(crate) fn bind(&self, node: &Arc<Node>) {
        let _ = self.node.set(Arc::downgrade(node));
    }
}

/// What a custom function's forward declared about its outputs and inputs.
#[derive(Default)]
pub struct FunctionCtx {
    /// Tensors to save for backward (`ctx.save_for_backward`).
    pub to_save: Vec<Option<Tensor>>,
    /// Outputs that are not differentiable (`ctx.mark_non_differentiable`).
    pub non_differentiable: Vec<Tensor>,
    /// Inputs modified in place and returned (`ctx.mark_dirty`).
    pub dirty: Vec<Tensor>,
    /// Whether missing output gradients arrive as zeros (default true).
    pub materialize_grads: Option<bool>,
    /// One flag per forward input: does it need a gradient.
    pub needs_input_grad: Vec<bool>,
    /// The saved tensors, available in backward.
    pub saved: Option<Arc<SavedVariables>>,
}

impl FunctionCtx {
    /// The saved tensors (version-checked).
    pub fn saved_tensors(&self) -> Result<Vec<Option<Tensor>>> {
        match &self.saved {
            Some(s) => s.unpack(),
            None => Ok(Vec::new()),
        }
    }
}

/// A custom differentiable function written in Rust.
pub trait CustomFunction: Send + Sync + 'static {
    /// Name shown as `grad_fn` (`<name>Backward`).
    fn name(&self) -> String;
    /// Compute the outputs (runs without recording).
    fn forward(&self, ctx: &mut FunctionCtx, inputs: &[Tensor]) -> Result<Vec<Tensor>>;
    /// Gradients of the inputs (one per input, `None` for none) from those of the outputs.
    fn backward(&self, ctx: &FunctionCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>>;
    /// Forward mode: the outputs' tangents (one per output, `None` for none) from the inputs'
    /// (`None` where an input has no tangent). Without it, calling the function on a dual
    /// tensor is an error, as in torch.
    fn jvp(&self, _ctx: &FunctionCtx, _tangents: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        Err(Error::not_implemented(
            "You must implement the jvp function for custom autograd.Function to use it with forward mode AD.",
        ))
    }
}

struct RustFunctionNode<F: CustomFunction> {
    f: Arc<F>,
    ctx: FunctionCtx,
}

impl<F: CustomFunction> CustomBackward for RustFunctionNode<F> {
    fn apply(&self, _node: &Arc<Node>, grads: Vec<Option<Tensor>>) -> Result<Vec<Option<Tensor>>> {
        self.f.backward(&self.ctx, &grads)
    }
    fn release(&self) {
        if let Some(s) = &self.ctx.saved {
            s.release();
        }
    }
    fn materialize_grads(&self) -> bool {
        self.ctx.materialize_grads.unwrap_or(true)
    }
}

/// Run a custom function: forward without recording, then record one node whose backward is
/// `f.backward`.
pub fn apply<F: CustomFunction>(f: Arc<F>, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
    let mut ctx = FunctionCtx {
        needs_input_grad: inputs
            .iter()
            .map(|t| t.requires_grad() && grad_mode::is_recording())
            .collect(),
        ..Default::default()
    };
    let refs: Vec<&Tensor> = inputs.iter().collect();
    let tangents = super::forward_ad::tangents_of(&refs);
    // With tangents, forward's own ops propagate none: `jvp` gives the outputs' tangents.
    let _quiet = tangents.as_ref().map(|_| super::forward_ad::Suspend::new());
    let outputs = {
        let _g = GradModeGuard::new(false);
        f.forward(&mut ctx, inputs)?
    };
    let out_tangents = match &tangents {
        Some(ts) => Some(f.jvp(&ctx, ts)?),
        None => None,
    };
    drop(_quiet);
    let args: Vec<Option<Tensor>> = inputs.iter().cloned().map(Some).collect();
    let name = format!("{}Backward", f.name());
    let node_name = name.clone();
    let non_diff = std::mem::take(&mut ctx.non_differentiable);
    let dirty = std::mem::take(&mut ctx.dirty);
    let to_save = std::mem::take(&mut ctx.to_save);
    let (outputs, saved) = record_custom(
        node_name,
        &args,
        outputs,
        &non_diff,
        &dirty,
        &to_save,
        |saved| {
            ctx.saved = saved;
            Box::new(RustFunctionNode { f, ctx })
        },
    )?;
    let _ = saved;
    if let Some(ts) = out_tangents {
        if ts.len() != outputs.len() {
            return Err(Error::runtime(format!(
                "function {name} returned an incorrect number of forward gradients (expected {}, got {})",
                outputs.len(),
                ts.len()
            )));
        }
        for (o, t) in outputs.iter().zip(ts) {
            if let Some(t) = t {
                super::forward_ad::set_tangent(o, super::forward_ad::checked_tangent(o, &t)?);
            }
        }
    }
    Ok(outputs)
}

/// Record a custom node over `args` (None for non-tensor arguments) and return the outputs to
/// hand to the user: a returned input becomes a new alias, a dirty input is rebased in place,
/// non-differentiable outputs get no grad_fn.
pub fn record_custom(
    name: String,
    args: &[Option<Tensor>],
    outputs: Vec<Tensor>,
    non_differentiable: &[Tensor],
    dirty: &[Tensor],
    to_save: &[Option<Tensor>],
    make: impl FnOnce(Option<Arc<SavedVariables>>) -> Box<dyn CustomBackward>,
) -> Result<(Vec<Tensor>, Option<Arc<SavedVariables>>)> {
    for d in dirty {
        if !outputs.iter().any(|o| o.same(d)) {
            return Err(Error::runtime("Some elements marked as dirty during the forward method were not returned as output. The inputs that are modified inplace must all be outputs of the Function."));
        }
    }
    let recording = grad_mode::is_recording() && args.iter().flatten().any(|t| t.requires_grad());
    for d in dirty {
        if recording && d.is_leaf() && d.requires_grad() {
            return Err(Error::runtime(
                "a leaf Variable that requires grad has been used in an in-place operation.",
            ));
        }
        d.storage().bump_version();
    }
    // Returned inputs that are not dirty become new tensors (torch never returns the input).
    let outputs: Vec<Tensor> = outputs
        .into_iter()
        .map(|o| {
            let is_input = args.iter().flatten().any(|a| a.same(&o));
            let is_dirty = dirty.iter().any(|d| d.same(&o));
            if is_input && !is_dirty && recording {
                o.detach()
            } else {
                o
            }
        })
        .collect();
    if !recording {
        return Ok((outputs, None));
    }
    let saved = if to_save.is_empty() {
        None
    } else {
        Some(SavedVariables::new(to_save, &outputs)?)
    };
    let backward = make(saved.clone());
    let next_edges = args
        .iter()
        .map(|a| a.as_ref().and_then(|t| t.gradient_edge()))
        .collect();
    let input_meta = args
        .iter()
        .map(|a| match a {
            Some(t) => TensorMeta::of(t),
            None => TensorMeta {
                shape: Default::default(),
                dtype: crate::tensor::DType::Float32,
                batch_level: 0,
            },
        })
        .collect();
    let output_meta = outputs.iter().map(TensorMeta::of).collect();
    let node = Node::new(
        Cow::Owned(name),
        next_edges,
        input_meta,
        output_meta,
        NodeKind::Custom(backward),
    );
    if let Some(s) = &saved {
        s.bind(&node);
    }
    for (i, o) in outputs.iter().enumerate() {
        if !o.dtype().is_float() || non_differentiable.iter().any(|n| n.same(o)) {
            continue;
        }
        let mut m = o.meta();
        m.grad_fn = Some(node.clone());
        m.output_nr = i;
    }
    super::node::node_created(&node)?;
    super::node::fire_creation_hooks()?;
    Ok((outputs, saved))
}
