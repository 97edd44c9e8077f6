//! Forward-mode AD (torch's `autograd.forward_ad`): inside a dual level, a tensor made with
//! [`make_dual`] carries a tangent, and every op on it computes its output's tangent (the
//! Jacobian-vector product) as it runs, so one forward pass gives `J v`. The state and how ops
//! record tangents are in [`crate::graph::forward_ad`]; this module is the API and the
//! rule-transposing `J v` that every op falls back on.
//!
//! ```
//! use ferrograd::autograd::forward_ad;
//! use ferrograd::Tensor;
//!
//! let x = Tensor::from_vec(vec![0.5f64, 1.0], &[2])?;
//! let v = Tensor::from_vec(vec![1.0f64, 0.0], &[2])?;
//! let _level = forward_ad::dual_level()?;
//! let y = forward_ad::make_dual(&x, &v)?.sin()?;
//! let (_primal, tangent) = forward_ad::unpack_dual(&y)?;
//! // d/dx sin(x) · v = cos(x) v
//! assert_eq!(tangent.unwrap().to_vec::<f64>()?, vec![0.5f64.cos(), 0.0]);
//! # Ok::<(), ferrograd::Error>(())
//! ```

use crate::error::{Error, Result};
use crate::graph::forward_ad as state;
use crate::graph::node::{BackwardFn, TensorMeta};
use crate::tensor::grad_mode::GradModeGuard;
use crate::tensor::Tensor;

pub use state::{current_level, suspend_pop, suspend_push, tangent, Suspend};

/// The open dual level; closing it (dropping the guard) drops every tangent made in it.
pub struct DualLevel {
    level: u64,
}

impl DualLevel {
    /// The level's number.
    pub fn level(&self) -> u64 {
        self.level
    }
}

impl Drop for DualLevel {
    fn drop(&mut self) {
        let _ = state::exit_dual_level(Some(self.level));
    }
}

/// Open a dual level (one at a time, as in torch).
pub fn dual_level() -> Result<DualLevel> {
    Ok(DualLevel {
        level: enter_dual_level()?,
    })
}

/// Open a dual level without a guard; close it with [`exit_dual_level`].
pub fn enter_dual_level() -> Result<u64> {
    crate::graph::node::set_generic_jvp(generic_jvp);
    state::enter_dual_level()
}

/// Close the open dual level (`level`, when given, must be it).
pub fn exit_dual_level(level: Option<u64>) -> Result<()> {
    state::exit_dual_level(level)
}

/// A view of `primal` that carries `tangent` at the open level (torch's `make_dual`); it
/// requires grad when `primal` does, so forward and reverse mode compose.
pub fn make_dual(primal: &Tensor, tangent: &Tensor) -> Result<Tensor> {
    let Some(level) = state::current_level() else {
        return Err(Error::runtime(
            "Trying to create a dual Tensor for forward AD but no level exists, make sure to enter_dual_level() first.",
        ));
    };
    if !primal.dtype().is_float() {
        return Err(Error::value(format!(
            "Expected primal to be floating point or complex, but got: ferrograd.{}",
            primal.dtype().name()
        )));
    }
    if !tangent.dtype().is_float() {
        return Err(Error::value(format!(
            "Expected tangent to be floating point or complex, but got: ferrograd.{}",
            tangent.dtype().name()
        )));
    }
    let tangent = state::checked_tangent(primal, tangent)?;
    if state::tangent(primal).is_some() {
        return Err(Error::runtime(format!(
            "Making a dual Tensor based on a Tensor that already has a forward gradient at the same level {level} is not supported."
        )));
    }
    let dual = {
        let _quiet = Suspend::new();
        primal.reshape(primal.shape())?
    };
    state::set_tangent(&dual, tangent);
    Ok(dual)
}

/// Give an output of a custom function the tangent its forward rule computed (same shape;
/// cast to its dtype).
pub fn set_output_tangent(output: &Tensor, tangent: &Tensor) -> Result<()> {
    state::set_tangent(output, state::checked_tangent(output, tangent)?);
    Ok(())
}

/// `(primal, tangent)` of a tensor (torch's `unpack_dual`): the primal is a view without the
/// tangent; the tangent is `None` for a tensor that has none (or outside a dual level).
pub fn unpack_dual(t: &Tensor) -> Result<(Tensor, Option<Tensor>)> {
    let tangent = state::tangent(t);
    if tangent.is_none() {
        return Ok((t.clone(), None));
    }
    let primal = {
        let _quiet = Suspend::new();
        t.reshape(t.shape())?
    };
    Ok((primal, tangent))
}

/// `J v` of a recorded op from its backward rule `B(g) = Jᵀ g`: the gradient of `<B(g), v>`
/// with respect to `g` (`B` is linear, so any `g` will do; zeros are used).
fn generic_jvp(
    backward: &BackwardFn,
    input_meta: &[TensorMeta],
    outputs: &[&Tensor],
    saved: &[&Tensor],
    tangents: &[Option<Tensor>],
) -> Result<Vec<Option<Tensor>>> {
    // Tangents stay differentiable by reverse mode (forward over reverse over ...): where the
    // op records and a tangent or saved tensor requires grad, the rule's graph is kept.
    let differentiable = crate::tensor::grad_mode::is_recording()
        && (tangents.iter().flatten().any(Tensor::requires_grad)
            || saved.iter().any(|t| t.requires_grad()));
    let _grad = GradModeGuard::new(true);
    // Batched tangents (jacfwd's basis under vmap) need a `g` per sample, or the reverse pass
    // would sum the samples' products into one `g`.
    let level = crate::tensor::batched::top_level(&tangents.iter().flatten().collect::<Vec<_>>());
    // Outputs batched by vmap (per-sample Hessians, `vmap(jacfwd(grad(f)))`) need a `g` per
    // sample the same way: `g` is batched at every level the output is.
    let gs: Vec<Tensor> = outputs
        .iter()
        .map(|o| {
            let mut z = zeros_batched_like(o)?;
            if let Some(l) = &level {
                if !has_level(&z, l) {
                    // Adding a per-sample zero batches `z` at the tangents' level too, in the
                    // right nesting order whichever level is outer.
                    let per_sample = Tensor::zeros(&[l.size()], o.dtype());
                    z = z.add(&Tensor::batched(per_sample, 0, l.clone())?)?;
                }
            }
            z.requires_grad_(o.dtype().is_float())
        })
        .collect::<Result<_>>()?;
    let saved: Vec<Tensor> = saved
        .iter()
        .map(|t| {
            if differentiable {
                (*t).clone()
            } else {
                t.detach()
            }
        })
        .collect();
    let grads = backward(&gs, &saved)?;
    let mut inner: Option<Tensor> = None;
    for (k, (g, v)) in grads.iter().zip(tangents).enumerate() {
        let (Some(g), Some(v)) = (g, v) else { continue };
        let meta = &input_meta[k];
        let g = if g.shape() != meta.shape.as_slice() {
            g.sum_to(&meta.shape)?
        } else {
            g.clone()
        };
        let v = if v.dtype() != g.dtype() {
            v.to_dtype(g.dtype())?
        } else {
            v.clone()
        };
        let term = g.mul(&v)?.sum()?;
        inner = Some(match inner {
            None => term,
            Some(acc) => acc.add(&term)?,
        });
    }
    let Some(inner) = inner else {
        return Ok(vec![None; outputs.len()]);
    };
    if !inner.requires_grad() {
        return Ok(vec![None; outputs.len()]);
    }
    let float: Vec<usize> = (0..gs.len()).filter(|&k| gs[k].requires_grad()).collect();
    let wrt: Vec<Tensor> = float.iter().map(|&k| gs[k].clone()).collect();
    let res = super::grad(
        &[inner],
        &wrt,
        super::GradOptions {
            allow_unused: Some(true),
            create_graph: differentiable,
            ..Default::default()
        },
    )?;
    let mut out = vec![None; outputs.len()];
    for (&k, t) in float.iter().zip(res) {
        out[k] = t;
    }
    Ok(out)
}

/// Zeros of `like`'s logical shape and dtype, batched at every vmap level `like` is.
fn zeros_batched_like(like: &Tensor) -> Result<Tensor> {
    match like.batch_parts() {
        None => Ok(Tensor::zeros(like.shape(), like.dtype())),
        Some((value, bdim, level)) => {
            Tensor::batched(zeros_batched_like(value)?, bdim, level.clone())
        }
    }
}

/// Whether `t` is batched at `level` (at any depth).
fn has_level(t: &Tensor, level: &crate::tensor::batched::Level) -> bool {
    match t.batch_parts() {
        None => false,
        Some((value, _, l)) => l.id() == level.id() || has_level(value, level),
    }
}
