//! Recurrent layers: torch's `rnn_tanh`, `rnn_relu`, `lstm` and `gru` over a whole sequence
//! (multi-layer, bidirectional, inter-layer dropout, LSTM projections) and their single-step
//! cells.
//!
//! The input projections of every step of a layer are one gemm up front. An LSTM layer (no
//! projections, unpacked) then runs as one node over the whole sequence (`lstm_layer`, as
//! torch's CPU `mkldnn_rnn_layer`); other layers run a node per step: one gemm for the hidden
//! state plus one fused pointwise node (the gate nonlinearities and the state update, forward
//! and backward each in one sweep, as torch's `_thnn_fused_lstm_cell`). The pointwise backward
//! is written with differentiable ops when a graph of the backward is being built, and the
//! layer node then recomputes its steps that way, so second derivatives work.

use std::mem::MaybeUninit;
use std::sync::{Arc, OnceLock};

use multiversion::multiversion;
use num_traits::Float;

use crate::error::{Error, Result};
use crate::graph::forward_ad;
use crate::graph::node::{grad_if_wanted, needs_grad, record, record_with_jvp, wants_grad};
use crate::kernels::copy::cast;
use crate::kernels::gemm::{matmul_strided, GemmScalar, MatRef};
use crate::kernels::vmath::{sigmoid_scalar, UnaryF32};
use crate::ops::nn::linear::{linear, linear_with};
use crate::parallel::{get_num_threads, helpers, share_work, SendPtr};
use crate::tensor::creation::try_vec;
use crate::tensor::grad_mode::{self, GradModeGuard};
use crate::tensor::shape::fmt_shape;
use crate::tensor::{DType, Element, Tensor};

/// Which recurrence a layer runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RnnMode {
    /// `h' = tanh(W_ih x + b_ih + W_hh h + b_hh)`.
    RnnTanh,
    /// `h' = relu(W_ih x + b_ih + W_hh h + b_hh)`.
    RnnRelu,
    /// Long short-term memory: gates `i, f, g, o` in that order.
    Lstm,
    /// Gated recurrent unit: gates `r, z, n` in that order.
    Gru,
}

impl RnnMode {
    /// Rows of `W_ih` per hidden unit (torch's `gate_size / hidden_size`).
    pub fn gates(self) -> usize {
        match self {
            RnnMode::RnnTanh | RnnMode::RnnRelu => 1,
            RnnMode::Lstm => 4,
            RnnMode::Gru => 3,
        }
    }
}

/// The weights of one layer in one direction, as torch names them (`weight_ih_l0`, ...).
#[derive(Clone, Debug)]
pub struct CellWeights {
    /// `(gates * hidden, input)`.
    pub w_ih: Tensor,
    /// `(gates * hidden, hidden or proj)`.
    pub w_hh: Tensor,
    /// `(gates * hidden)`, absent when the layer has no biases.
    pub b_ih: Option<Tensor>,
    /// `(gates * hidden)`, absent when the layer has no biases.
    pub b_hh: Option<Tensor>,
    /// LSTM projection `(proj, hidden)`, absent unless `proj_size > 0`.
    pub w_hr: Option<Tensor>,
}

/// How a multi-layer recurrence runs (torch's `RNNBase` options).
#[derive(Clone, Copy, Debug)]
pub struct RnnConfig {
    /// The recurrence.
    pub mode: RnnMode,
    /// Stacked layers; layer `k > 0` reads layer `k - 1`'s output.
    pub num_layers: usize,
    /// Dropout probability on each layer's output but the last's (training only).
    pub dropout: f64,
    /// Whether dropout applies.
    pub training: bool,
    /// Run each layer forward and backward in time, concatenating the two outputs.
    pub bidirectional: bool,
    /// Input and output are `(batch, seq, feature)` instead of `(seq, batch, feature)`.
    pub batch_first: bool,
}

/// What a recurrence returns: the last layer's output at every step, and each layer and
/// direction's final hidden state (and cell state for an LSTM), stacked in torch's order.
#[derive(Clone, Debug)]
pub struct RnnOutput {
    /// `(seq, batch, directions * hidden)` (batch first when so configured).
    pub output: Tensor,
    /// `(layers * directions, batch, hidden)`.
    pub h_n: Tensor,
    /// The LSTM's `(layers * directions, batch, hidden)` cell state; `None` for other modes.
    pub c_n: Option<Tensor>,
}

/// Inverted dropout with a fresh Bernoulli mask (`p == 1` zeroes everything, as torch).
fn dropout(x: &Tensor, p: f64) -> Result<Tensor> {
    if p >= 1.0 {
        return x.mul_scalar(0.0);
    }
    let keep = Tensor::rand(x.shape(), x.dtype())?.ge_scalar(p)?;
    x.mul(&cast(&keep, x.dtype())?.mul_scalar(1.0 / (1.0 - p))?)
}

/// Checks that every weight has the shape the configuration implies (torch checks this in
/// `RNNBase`; a hand-built weight list reaches the crate directly).
fn check_weights(
    input_size: usize,
    hidden: usize,
    proj: usize,
    cfg: &RnnConfig,
    weights: &[CellWeights],
) -> Result<()> {
    let dirs = if cfg.bidirectional { 2 } else { 1 };
    if weights.len() != cfg.num_layers * dirs {
        return Err(Error::runtime(format!(
            "expected {} sets of weights ({} layers x {} directions), got {}",
            cfg.num_layers * dirs,
            cfg.num_layers,
            dirs,
            weights.len()
        )));
    }
    let real_hidden = if proj > 0 { proj } else { hidden };
    let rows = cfg.mode.gates() * hidden;
    for (k, w) in weights.iter().enumerate() {
        let layer_in = if k < dirs {
            input_size
        } else {
            real_hidden * dirs
        };
        let mut expect = vec![
            ("weight_ih", &w.w_ih, vec![rows, layer_in]),
            ("weight_hh", &w.w_hh, vec![rows, real_hidden]),
        ];
        if let Some(b) = &w.b_ih {
            expect.push(("bias_ih", b, vec![rows]));
        }
        if let Some(b) = &w.b_hh {
            expect.push(("bias_hh", b, vec![rows]));
        }
        if let Some(p) = &w.w_hr {
            expect.push(("weight_hr", p, vec![proj, hidden]));
        }
        for (name, t, shape) in expect {
            if t.shape() != shape.as_slice() {
                return Err(Error::runtime(format!(
                    "{name} of layer {} has shape {}, expected {}",
                    k / dirs,
                    fmt_shape(t.shape()),
                    fmt_shape(&shape)
                )));
            }
        }
    }
    Ok(())
}

/// torch's check of an initial state's shape ("Expected hidden size (2, 3, 4), got [...]").
fn check_state(name: &str, t: &Tensor, want: [usize; 3]) -> Result<()> {
    if t.shape() == want {
        return Ok(());
    }
    Err(Error::runtime(format!(
        "Expected {name} size ({}, {}, {}), got {}",
        want[0],
        want[1],
        want[2],
        fmt_shape(t.shape())
    )))
}

/// Runs a recurrence over a sequence.
///
/// `input` is `(seq, batch, input_size)` (`(batch, seq, input_size)` with `batch_first`);
/// `h0` is `(layers * directions, batch, hidden or proj)`; `c0` the LSTM's
/// `(layers * directions, batch, hidden)`. `weights` holds one [`CellWeights`] per layer and
/// direction, layer-major as torch orders them. All tensors share one float dtype.
///
/// `lengths` (one per batch row, each in `1..=seq`) runs variable-length sequences padded to
/// `seq`, as torch runs a `PackedSequence`: a row's state is final after its own last step (the
/// backward direction starts there) and its outputs beyond it are zero.
pub fn rnn(
    input: &Tensor,
    h0: &Tensor,
    c0: Option<&Tensor>,
    weights: &[CellWeights],
    cfg: &RnnConfig,
    lengths: Option<&[usize]>,
) -> Result<RnnOutput> {
    if input.dim() != 3 {
        return Err(Error::runtime(format!(
            "input must have 3 dimensions, got {}",
            input.dim()
        )));
    }
    if !input.dtype().is_float() {
        return Err(Error::runtime(format!(
            "rnn: expected a floating point input, got {:?}",
            input.dtype()
        )));
    }
    let x = if cfg.batch_first {
        input.transpose(0, 1)?
    } else {
        input.clone()
    };
    let (seq, batch, input_size) = (x.shape()[0], x.shape()[1], x.shape()[2]);
    if let Some(l) = lengths {
        if l.len() != batch || l.iter().any(|&v| v == 0 || v > seq) {
            return Err(Error::runtime(format!(
                "rnn: expected {batch} sequence lengths in 1..={seq}, got {l:?}"
            )));
        }
    }
    let dirs = if cfg.bidirectional { 2 } else { 1 };
    let first = weights
        .first()
        .ok_or_else(|| Error::runtime("rnn: no weights given"))?;
    let hidden = first.w_ih.shape().first().copied().unwrap_or(0) / cfg.mode.gates();
    let proj = first.w_hr.as_ref().map_or(0, |p| p.shape()[0]);
    check_weights(input_size, hidden, proj, cfg, weights)?;
    let real_hidden = if proj > 0 { proj } else { hidden };
    let states = cfg.num_layers * dirs;
    check_state("hidden", h0, [states, batch, real_hidden])?;
    let c0 = match (cfg.mode, c0) {
        (RnnMode::Lstm, Some(c)) => {
            check_state("hidden[1]", c, [states, batch, hidden])?;
            Some(c)
        }
        (RnnMode::Lstm, None) => {
            return Err(Error::runtime("lstm: the initial cell state is missing"))
        }
        _ => None,
    };

    let mut layer_input = x;
    let (mut h_n, mut c_n) = (Vec::new(), Vec::new());
    for layer in 0..cfg.num_layers {
        let mut outs = Vec::with_capacity(dirs);
        for d in 0..dirs {
            let k = layer * dirs + d;
            let w = &weights[k];
            let h = h0.select(0, k as i64)?;
            let c = c0.map(|c| c.select(0, k as i64)).transpose()?;
            let pass = Pass {
                mode: cfg.mode,
                reverse: d == 1,
                seq,
                lengths,
            };
            let (out, h, c) = run_direction(&layer_input, h, c, w, &pass)?;
            outs.push(out);
            h_n.push(h);
            if let Some(c) = c {
                c_n.push(c);
            }
        }
        let mut out = if dirs == 2 {
            Tensor::cat(&outs, 2)?
        } else {
            outs.pop().ok_or_else(|| Error::runtime("rnn: no output"))?
        };
        if cfg.training && cfg.dropout > 0.0 && layer + 1 < cfg.num_layers {
            out = dropout(&out, cfg.dropout)?;
        }
        layer_input = out;
    }
    let output = if cfg.batch_first {
        layer_input.transpose(0, 1)?
    } else {
        layer_input
    };
    Ok(RnnOutput {
        output,
        h_n: Tensor::stack(&h_n, 0)?,
        c_n: if c_n.is_empty() {
            None
        } else {
            Some(Tensor::stack(&c_n, 0)?)
        },
    })
}

/// How one layer runs in one direction.
struct Pass<'a> {
    mode: RnnMode,
    reverse: bool,
    seq: usize,
    /// Per-batch-row sequence lengths (packed input); `None` when every row runs `seq` steps.
    lengths: Option<&'a [usize]>,
}

/// `(t < length)` per batch row as a `(batch, 1)` column of `dtype`, or `None` when every row
/// is still running at step `t`.
fn step_mask(lengths: Option<&[usize]>, t: usize, dtype: DType) -> Result<Option<Tensor>> {
    let Some(lens) = lengths else {
        return Ok(None);
    };
    if lens.iter().all(|&l| l > t) {
        return Ok(None);
    }
    let m: Vec<f64> = lens
        .iter()
        .map(|&l| if l > t { 1.0 } else { 0.0 })
        .collect();
    Ok(Some(cast(&Tensor::from_vec(m, &[lens.len(), 1])?, dtype)?))
}

/// `new` where the mask is 1 and `old` where it is 0 (rows past their length keep their state).
fn keep(mask: &Tensor, new: &Tensor, old: &Tensor) -> Result<Tensor> {
    new.mul(mask)?.add(&old.mul(&mask.rsub_scalar(1.0)?)?)
}

/// One layer in one direction: the input projections of all steps in one gemm, then the
/// recurrence. Returns the `(seq, batch, hidden)` outputs and the final states. With lengths,
/// a row's state stops changing after its last step and its outputs beyond it are zero, which
/// is the result torch computes on a packed sequence.
fn run_direction(
    x: &Tensor,
    mut h: Tensor,
    mut c: Option<Tensor>,
    w: &CellWeights,
    pass: &Pass<'_>,
) -> Result<(Tensor, Tensor, Option<Tensor>)> {
    let seq = pass.seq;
    // One node hands out every step's slice: its backward stacks the step gradients once,
    // where a `select` per step would scatter each into a zeroed full-size gradient (O(T^2)).
    // Except in a GRU's `n` gate (scaled by `r`), the recurrent bias only adds to the input
    // projection: folded into it, it is added once per layer instead of once per step, and
    // its gradient is one reduction instead of one per step.
    let fold = pass.mode != RnnMode::Gru;
    let (b_in, b_rec) = match (&w.b_ih, &w.b_hh) {
        (Some(a), Some(b)) if fold => (Some(a.add(b)?), None),
        (a, b) => (a.clone(), b.as_ref()),
    };
    let xp = linear(x, &w.w_ih, b_in.as_ref())?;
    if let Some(c0) = c
        .as_ref()
        .filter(|c0| runs_as_one_node(pass, &xp, &h, c0, w))
    {
        let (out, h_n, c_n) = lstm_layer(&xp, &h, c0, &w.w_hh, pass.reverse)?;
        return Ok((out, h_n, Some(c_n)));
    }
    let (xp, mut deferred) = if defers_recurrent_weight_grad(pass.mode, x, &h, w, seq) {
        let (xp, slot) = defer_recurrent_weight_grad(&xp, &w.w_hh)?;
        let hidden = HiddenInputs {
            slot,
            steps: vec![None; seq],
        };
        (xp, Some(hidden))
    } else {
        (xp, None)
    };
    let xp = xp.unbind(0)?;
    // The recurrent weight, transposed once for all steps' products (see `linear_with`).
    let w_hh_t = if seq > 1 && !w.w_hh.is_batched() {
        let _g = GradModeGuard::new(false);
        Some(w.w_hh.t()?.contiguous()?)
    } else {
        None
    };
    let mut steps: Vec<Option<Tensor>> = vec![None; seq];
    for i in 0..seq {
        let t = if pass.reverse { seq - 1 - i } else { i };
        let gi = xp[t].clone();
        if let Some(d) = &mut deferred {
            d.steps[t] = Some(h.detach());
        }
        let defer = deferred.is_some();
        let gh = linear_with(&h, &w.w_hh, w_hh_t.as_ref(), b_rec, defer)?;
        let mask = step_mask(pass.lengths, t, h.dtype())?;
        let h_new = match pass.mode {
            RnnMode::RnnTanh => gi.add(&gh)?.tanh()?,
            RnnMode::RnnRelu => gi.add(&gh)?.relu()?,
            RnnMode::Lstm => {
                let cx = c
                    .take()
                    .ok_or_else(|| Error::runtime("lstm: missing cell state"))?;
                let (hy, cy) = lstm_step(&gi, Some(&gh), &cx)?;
                c = Some(match &mask {
                    Some(m) => keep(m, &cy, &cx)?,
                    None => cy,
                });
                match &w.w_hr {
                    Some(p) => linear(&hy, p, None)?,
                    None => hy,
                }
            }
            RnnMode::Gru => gru_pointwise(&gi, &gh, &h)?,
        };
        match &mask {
            Some(m) => {
                steps[t] = Some(h_new.mul(m)?);
                h = keep(m, &h_new, &h)?;
            }
            None => {
                steps[t] = Some(h_new.clone());
                h = h_new;
            }
        }
    }
    if let Some(d) = deferred {
        let hs: Vec<Tensor> = d.steps.into_iter().flatten().collect();
        // Filled once, here; a failed forward leaves it empty, and its graph unreachable.
        let _ = d.slot.set(Tensor::stack(&hs, 0)?);
    }
    let steps: Vec<Tensor> = steps.into_iter().flatten().collect();
    let out = if steps.is_empty() {
        Tensor::zeros(&[0, h.shape()[0], h.shape()[1]], h.dtype())
    } else {
        Tensor::stack(&steps, 0)?
    };
    Ok((out, h, c))
}

/// The hidden state each step of a layer reads (detached, by time index), gathered for
/// [`defer_recurrent_weight_grad`]'s node, whose `slot` gets them stacked.
struct HiddenInputs {
    slot: Arc<OnceLock<Tensor>>,
    steps: Vec<Option<Tensor>>,
}

/// Whether a layer's recurrent weight gradient is computed once for all steps
/// ([`defer_recurrent_weight_grad`]): the step's hidden projection only adds to its input
/// projection (not in a GRU, whose `n` gate scales it by `r`), so both get the same gradient;
/// the weight needs one; there are steps to gather; and the products take `linear`'s fused
/// path (float32/float64, nothing batched by vmap).
fn defers_recurrent_weight_grad(
    mode: RnnMode,
    x: &Tensor,
    h0: &Tensor,
    w: &CellWeights,
    seq: usize,
) -> bool {
    mode != RnnMode::Gru
        && seq > 1
        && grad_mode::is_recording()
        && w.w_hh.requires_grad()
        && matches!(w.w_hh.dtype(), DType::Float32 | DType::Float64)
        && [x, h0, &w.w_ih, &w.w_hh]
            .into_iter()
            .chain(w.b_ih.as_ref())
            .chain(w.b_hh.as_ref())
            .all(|t| !t.is_batched())
}

/// The input projections `xp` `(seq, batch, gates)` passed on unchanged by a node that also
/// has the recurrent weight `w_hh` as an input: its backward receives every step's gate
/// gradient at once (stacked by `unbind`'s backward) and gives the weight's gradient as one
/// product, `Σ_t dgates_tᵀ h_t = Gᵀ H`, where the steps' own nodes (which then leave it out,
/// see [`linear_with`]) would each make a small product, summed afterwards in a `seq`-part
/// sum. `H`, the hidden state each step read, stacked in time order, goes into the returned
/// slot once the recurrence has run. Under `create_graph` the steps compute the gradient
/// themselves, differentiably, and this node gives none; its forward-mode rule passes `xp`'s
/// tangent on (the weight's tangent enters through the steps' products).
fn defer_recurrent_weight_grad(
    xp: &Tensor,
    w_hh: &Tensor,
) -> Result<(Tensor, Arc<OnceLock<Tensor>>)> {
    let out = xp.detach();
    let slot: Arc<OnceLock<Tensor>> = Arc::new(OnceLock::new());
    let hs = slot.clone();
    let gates = xp.shape()[2];
    record_with_jvp(
        "RecurrentWeightBackward0",
        &[xp, w_hh],
        &[&out],
        &[],
        false,
        move |g, _| {
            let gw = if grad_mode::is_grad_enabled() {
                None
            } else {
                grad_if_wanted(1, || {
                    let h = hs.get().ok_or_else(|| {
                        Error::runtime("rnn: the recurrence's hidden states were not recorded")
                    })?;
                    let hidden = h.shape()[2];
                    let rows = h.shape()[0] * h.shape()[1];
                    g[0].reshape(&[rows, gates])?
                        .t()?
                        .matmul(&h.reshape(&[rows, hidden])?)
                })?
            };
            Ok(vec![Some(g[0].clone()), gw])
        },
        &|t| Ok(vec![t[0].clone()]),
    )?;
    Ok((out, slot))
}

/// Checks a cell's input and state against its weights (torch's `check_forward_input` and
/// `check_forward_hidden`).
fn check_cell(
    input: &Tensor,
    states: &[(&Tensor, &str)],
    w_ih: &Tensor,
    w_hh: &Tensor,
    gates: usize,
) -> Result<()> {
    if input.dim() != 2 || w_ih.dim() != 2 || w_hh.dim() != 2 {
        return Err(Error::runtime(format!(
            "cell: expected a 2-D input and 2-D weights, got input {}, weight_ih {}, weight_hh {}",
            fmt_shape(input.shape()),
            fmt_shape(w_ih.shape()),
            fmt_shape(w_hh.shape())
        )));
    }
    let hidden = w_hh.shape()[1];
    if w_ih.shape()[0] != gates * hidden || w_hh.shape()[0] != gates * hidden {
        return Err(Error::runtime(format!(
            "cell: weight_ih {} and weight_hh {} do not have {gates} x hidden_size ({hidden}) rows",
            fmt_shape(w_ih.shape()),
            fmt_shape(w_hh.shape())
        )));
    }
    if input.shape()[1] != w_ih.shape()[1] {
        return Err(Error::runtime(format!(
            "input has inconsistent input_size: got {} expected {}",
            input.shape()[1],
            w_ih.shape()[1]
        )));
    }
    for (s, name) in states {
        if s.shape().first() != input.shape().first() {
            return Err(Error::runtime(format!(
                "Input batch size {} doesn't match {name} batch size {}",
                input.shape()[0],
                s.shape().first().copied().unwrap_or(0)
            )));
        }
        if s.dim() != 2 || s.shape()[1] != hidden {
            return Err(Error::runtime(format!(
                "{name} has inconsistent hidden_size: got {} expected {hidden}",
                s.shape().last().copied().unwrap_or(0)
            )));
        }
    }
    Ok(())
}

/// One step of an Elman RNN: `act(x W_ih^T + b_ih + h W_hh^T + b_hh)` with `act` tanh or relu.
/// `input` is `(batch, input)`, `hx` `(batch, hidden)`.
pub fn rnn_cell(
    input: &Tensor,
    hx: &Tensor,
    w_ih: &Tensor,
    w_hh: &Tensor,
    b_ih: Option<&Tensor>,
    b_hh: Option<&Tensor>,
    relu: bool,
) -> Result<Tensor> {
    check_cell(input, &[(hx, "hidden")], w_ih, w_hh, 1)?;
    let pre = linear(input, w_ih, b_ih)?.add(&linear(hx, w_hh, b_hh)?)?;
    if relu {
        pre.relu()
    } else {
        pre.tanh()
    }
}

/// One LSTM step: returns `(h', c')`. `input` is `(batch, input)`, `hx` and `cx`
/// `(batch, hidden)`.
pub fn lstm_cell(
    input: &Tensor,
    hx: &Tensor,
    cx: &Tensor,
    w_ih: &Tensor,
    w_hh: &Tensor,
    b_ih: Option<&Tensor>,
    b_hh: Option<&Tensor>,
) -> Result<(Tensor, Tensor)> {
    check_cell(input, &[(hx, "hx[0]"), (cx, "hx[1]")], w_ih, w_hh, 4)?;
    let gates = linear(input, w_ih, b_ih)?.add(&linear(hx, w_hh, b_hh)?)?;
    lstm_pointwise(&gates, cx)
}

/// One GRU step: returns `h'`. `input` is `(batch, input)`, `hx` `(batch, hidden)`.
pub fn gru_cell(
    input: &Tensor,
    hx: &Tensor,
    w_ih: &Tensor,
    w_hh: &Tensor,
    b_ih: Option<&Tensor>,
    b_hh: Option<&Tensor>,
) -> Result<Tensor> {
    check_cell(input, &[(hx, "hidden")], w_ih, w_hh, 3)?;
    let gi = linear(input, w_ih, b_ih)?;
    let gh = linear(hx, w_hh, b_hh)?;
    gru_pointwise(&gi, &gh, hx)
}

// ----- fused pointwise steps ---------------------------------------------------------------------
//
// Forward computes the gate activations once (vectorised for f32) into a workspace the node
// keeps, as torch's fused cells do; the fused backward is then multiply-adds plus one tanh.

/// A float the step kernels run on: slice-wide sigmoid and tanh, vectorised for f32.
trait StepFloat: Float + Element {
    /// Writes every element of `out` (as long as `x`).
    fn sigmoid_uninit(x: &[Self], out: &mut [MaybeUninit<Self>]);
    /// Writes every element of `out` (as long as `x`).
    fn tanh_uninit(x: &[Self], out: &mut [MaybeUninit<Self>]);

    fn sigmoid_into(x: &[Self], out: &mut [Self]) {
        Self::sigmoid_uninit(x, as_uninit(out));
    }
    fn tanh_into(x: &[Self], out: &mut [Self]) {
        Self::tanh_uninit(x, as_uninit(out));
    }
}

/// Slots every one of which has been written, seen as values.
///
/// # Safety
/// Every element of `s` must have been written.
unsafe fn assume_init<T>(s: &[MaybeUninit<T>]) -> &[T] {
    // SAFETY: `MaybeUninit<T>` has `T`'s layout, and the caller vouches every slot holds a `T`.
    unsafe { &*(s as *const [MaybeUninit<T>] as *const [T]) }
}

/// An initialised slice seen as slots to write (always sound: they are only ever written).
fn as_uninit<T>(s: &mut [T]) -> &mut [MaybeUninit<T>] {
    // SAFETY: `MaybeUninit<T>` has `T`'s layout, and writing a valid `T` keeps the slice valid.
    unsafe { &mut *(s as *mut [T] as *mut [MaybeUninit<T>]) }
}

impl StepFloat for f32 {
    fn sigmoid_uninit(x: &[f32], out: &mut [MaybeUninit<f32>]) {
        UnaryF32::Sigmoid.apply_uninit(x, out);
    }
    fn tanh_uninit(x: &[f32], out: &mut [MaybeUninit<f32>]) {
        UnaryF32::Tanh.apply_uninit(x, out);
    }
}

impl StepFloat for f64 {
    fn sigmoid_uninit(x: &[f64], out: &mut [MaybeUninit<f64>]) {
        out.iter_mut().zip(x).for_each(|(o, &v)| {
            o.write(sigmoid_scalar(v));
        });
    }
    fn tanh_uninit(x: &[f64], out: &mut [MaybeUninit<f64>]) {
        out.iter_mut().zip(x).for_each(|(o, &v)| {
            o.write(v.tanh());
        });
    }
}

/// The float dtype shared by a step's operands.
fn step_dtype(ts: &[&Tensor]) -> Result<DType> {
    let dt = ts[0].dtype();
    if !dt.is_float() || ts.iter().any(|t| t.dtype() != dt) {
        return Err(Error::runtime(format!(
            "rnn step: expected operands of one float dtype, got {:?}",
            ts.iter().map(|t| t.dtype()).collect::<Vec<_>>()
        )));
    }
    Ok(dt)
}

/// Contiguous copies of `ts` (no copy when already contiguous) as `T` slices, handed to `f`.
fn with_slices<T: Element, R>(ts: &[&Tensor], f: impl FnOnce(&[&[T]]) -> Result<R>) -> Result<R> {
    let owned: Vec<Tensor> = ts.iter().map(|t| t.contiguous()).collect::<Result<_>>()?;
    fn go<T: Element, R>(
        rest: &[Tensor],
        acc: &mut Vec<*const [T]>,
        f: &mut dyn FnMut(&[&[T]]) -> Result<R>,
    ) -> Result<R> {
        match rest.split_first() {
            None => {
                // SAFETY: every pointer was taken inside an enclosing `with_contiguous_slice`
                // call that is still running, so the slices are alive and unaliased by writes.
                let refs: Vec<&[T]> = acc.iter().map(|p| unsafe { &**p }).collect();
                f(&refs)
            }
            Some((t, tail)) => t.with_contiguous_slice::<T, _>(|s| {
                acc.push(s as *const [T]);
                go(tail, acc, f)
            })?,
        }
    }
    let mut f = Some(f);
    go(&owned, &mut Vec::new(), &mut |s| {
        (f.take()
            .ok_or_else(|| Error::runtime("rnn step: kernel ran twice"))?)(s)
    })
}

/// Runs the generic kernel `f` in the operands' dtype.
macro_rules! by_dtype {
    ($ts:expr, |$s:ident: $t:ident| $body:expr) => {
        match step_dtype($ts)? {
            DType::Float32 => {
                type $t = f32;
                with_slices::<f32, _>($ts, |$s| $body)
            }
            _ => {
                type $t = f64;
                with_slices::<f64, _>($ts, |$s| $body)
            }
        }
    };
}

#[inline(always)]
fn dsig<T: Float>(s: T) -> T {
    s * (T::one() - s)
}

/// Gate elements below which an LSTM step's pointwise kernel stays on the calling thread, and
/// the least a parallel block of rows holds (the sigmoids and tanhs cost ~0.5 ns an element,
/// so a block is a few microseconds: worth a hand-off).
const STEP_PAR_MIN: usize = 1 << 13;

/// Runs `f(r0, n)` on blocks of `rows` rows of `width` elements (rows `r0..r0 + n`), shared
/// among threads: blocks of at least [`STEP_PAR_MIN`] elements, one per thread at most. Each
/// row's result is computed alone, so the split changes no bits.
fn share_row_blocks(rows: usize, width: usize, f: &(dyn Fn(usize, usize) + Sync)) {
    let threads = helpers() + 1;
    let by_size = (rows * width / STEP_PAR_MIN).max(1);
    let blocks = by_size.min(threads).min(rows.max(1));
    let per = rows.div_ceil(blocks).max(1);
    share_work(threads - 1, rows.div_ceil(per), &|b| {
        let r0 = b * per;
        f(r0, per.min(rows - r0));
    });
}

/// `len` elements from row `r0` of a buffer of rows `width` wide, behind `p`.
///
/// # Safety
/// The range must lie inside the buffer, and no other live slice may overlap it.
unsafe fn rows_mut<'a, T>(p: *mut T, r0: usize, rows: usize, width: usize) -> &'a mut [T] {
    // SAFETY: forwarded from the caller.
    unsafe { std::slice::from_raw_parts_mut(p.add(r0 * width), rows * width) }
}

/// Rows `r0..r0 + n` of a buffer of rows `width` wide.
fn rows_of<T>(src: &[T], r0: usize, n: usize, width: usize) -> &[T] {
    &src[r0 * width..(r0 + n) * width]
}

/// LSTM forward of the gates `g` (plus `g2` when the hidden projection comes separately):
/// activated gates `[i, f, g, o]` per row (the workspace), `hy`, `cy` and `tanh(cy)` (kept for
/// the backward, which would otherwise compute it again). Blocks of rows run in parallel.
fn lstm_fwd<T: StepFloat>(g: &[T], g2: Option<&[T]>, cx: &[T], h: usize) -> Result<[Vec<T>; 4]> {
    // Every output is written once, by the kernels, without zeroing first (zeroing the
    // workspace was a tenth of the step; the states' zeroing, 2% of a training forward).
    let mut act: Vec<T> = try_vec(g.len())?;
    let mut cy: Vec<T> = try_vec(cx.len())?;
    let mut hy: Vec<T> = try_vec(cx.len())?;
    let mut tc: Vec<T> = try_vec(cx.len())?;
    lstm_fwd_into(
        g,
        g2,
        cx,
        h,
        (
            &mut act.spare_capacity_mut()[..g.len()],
            &mut cy.spare_capacity_mut()[..cx.len()],
            &mut hy.spare_capacity_mut()[..cx.len()],
            &mut tc.spare_capacity_mut()[..cx.len()],
        ),
    );
    // SAFETY: `lstm_fwd_into` wrote every slot of each (the lengths it was given).
    unsafe {
        act.set_len(g.len());
        for v in [&mut cy, &mut hy, &mut tc] {
            v.set_len(cx.len());
        }
    }
    Ok([act, hy, cy, tc])
}

/// [`lstm_fwd`] into the caller's slots (workspace `4h` per row, the states `h` per row), every
/// one of which it writes.
fn lstm_fwd_into<T: StepFloat>(
    g: &[T],
    g2: Option<&[T]>,
    cx: &[T],
    h: usize,
    (act, cy, hy, tc): StepOut<'_, T>,
) {
    if h == 0 {
        return;
    }
    let rows = cx.len() / h;
    let ptrs = SendPtr((
        act.as_mut_ptr(),
        cy.as_mut_ptr(),
        hy.as_mut_ptr(),
        tc.as_mut_ptr(),
    ));
    share_row_blocks(rows, 4 * h, &|r0, n| {
        let (pa, pc, ph, pt) = ptrs.get();
        // SAFETY: this block owns rows r0..r0 + n of each output, disjoint from every other
        // block's, and the slices outlive `share_row_blocks`.
        let (a, c, hh, t) = unsafe {
            (
                rows_mut(pa, r0, n, 4 * h),
                rows_mut(pc, r0, n, h),
                rows_mut(ph, r0, n, h),
                rows_mut(pt, r0, n, h),
            )
        };
        let gates = |src| rows_of(src, r0, n, 4 * h);
        lstm_fwd_rows(
            gates(g),
            g2.map(gates),
            rows_of(cx, r0, n, h),
            h,
            (a, c, hh, t),
        );
    });
}

/// One block's rows of an LSTM step's outputs: the workspace (written first), `cy`, `hy`,
/// `tanh(cy)`.
type StepOut<'a, T> = (
    &'a mut [MaybeUninit<T>],
    &'a mut [MaybeUninit<T>],
    &'a mut [MaybeUninit<T>],
    &'a mut [MaybeUninit<T>],
);

/// [`lstm_fwd`] on one block of rows.
fn lstm_fwd_rows<T: StepFloat>(
    g: &[T],
    g2: Option<&[T]>,
    cx: &[T],
    h: usize,
    (act, cy, hy, tc): StepOut<'_, T>,
) {
    // The two projections are summed a row at a time into one reused row.
    let mut sum = vec![T::zero(); if g2.is_some() { 4 * h } else { 0 }];
    for (r, a) in act.chunks_exact_mut(4 * h).enumerate() {
        let row = rows_of(g, r, 1, 4 * h);
        let row = match g2 {
            Some(g2) => {
                add_rows(row, rows_of(g2, r, 1, 4 * h), &mut sum);
                &sum[..]
            }
            None => row,
        };
        T::sigmoid_uninit(&row[..2 * h], &mut a[..2 * h]);
        T::tanh_uninit(&row[2 * h..3 * h], &mut a[2 * h..3 * h]);
        T::sigmoid_uninit(&row[3 * h..], &mut a[3 * h..]);
    }
    // SAFETY: the three calls above wrote every element of every row.
    let act = unsafe { assume_init(act) };
    lstm_cell_rows(act, cx, h, cy);
    // SAFETY: `lstm_cell_rows` wrote every element.
    let cy = unsafe { assume_init(cy) };
    T::tanh_uninit(cy, tc);
    // SAFETY: `tanh_uninit` wrote every element.
    let tc = unsafe { assume_init(tc) };
    lstm_out_rows(act, tc, h, hy);
}

/// `out = a + b` (targets as [`lstm_cell_rows`]).
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+avx+fma", "x86_64+avx2+avx+fma"))]
fn add_rows<T: Float>(a: &[T], b: &[T], out: &mut [T]) {
    for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
        *o = x + y;
    }
}

/// `cy = f ∘ cx + i ∘ g` row by row. Named and multiversioned so the lanes are the machine's
/// (a closure or a generic helper without it compiles for the baseline target).
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+avx+fma", "x86_64+avx2+avx+fma"))]
fn lstm_cell_rows<T: Float>(act: &[T], cx: &[T], h: usize, cy: &mut [MaybeUninit<T>]) {
    for ((a, c), out) in act
        .chunks_exact(4 * h)
        .zip(cx.chunks_exact(h))
        .zip(cy.chunks_exact_mut(h))
    {
        let (i, f, g) = (&a[..h], &a[h..2 * h], &a[2 * h..3 * h]);
        for ((((o, &c), &i), &f), &g) in out.iter_mut().zip(c).zip(i).zip(f).zip(g) {
            o.write(f * c + i * g);
        }
    }
}

/// `hy = o ∘ tanh(cy)` row by row (targets as [`lstm_cell_rows`]).
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+avx+fma", "x86_64+avx2+avx+fma"))]
fn lstm_out_rows<T: Float>(act: &[T], tc: &[T], h: usize, hy: &mut [MaybeUninit<T>]) {
    for ((hr, t), a) in hy
        .chunks_exact_mut(h)
        .zip(tc.chunks_exact(h))
        .zip(act.chunks_exact(4 * h))
    {
        for ((v, &t), &o) in hr.iter_mut().zip(t).zip(&a[3 * h..]) {
            v.write(o * t);
        }
    }
}

/// LSTM backward in one sweep from the workspace and `tc = tanh(cy)`: `(d gates, d cx)` from
/// `d hy`, `d cy`. Blocks of rows run in parallel.
fn lstm_bwd<T: StepFloat>(
    act: &[T],
    cx: &[T],
    tc: &[T],
    dhy: &[T],
    dcy: &[T],
    h: usize,
) -> Result<[Vec<T>; 2]> {
    let mut dg: Vec<T> = try_vec(act.len())?;
    let mut dcx: Vec<T> = try_vec(cx.len())?;
    lstm_bwd_into(
        act,
        (cx, tc, dhy, dcy),
        h,
        &mut dg.spare_capacity_mut()[..act.len()],
        &mut dcx.spare_capacity_mut()[..cx.len()],
    );
    // SAFETY: `lstm_bwd_into` wrote every slot of both (the lengths it was given).
    unsafe {
        dg.set_len(act.len());
        dcx.set_len(cx.len());
    }
    Ok([dg, dcx])
}

/// [`lstm_bwd`] into the caller's slots (`4h` gate gradients and `h` cell gradients per row),
/// every one of which it writes.
fn lstm_bwd_into<T: StepFloat>(
    act: &[T],
    (cx, tc, dhy, dcy): (&[T], &[T], &[T], &[T]),
    h: usize,
    dg: &mut [MaybeUninit<T>],
    dcx: &mut [MaybeUninit<T>],
) {
    if h == 0 {
        return;
    }
    let rows = cx.len() / h;
    let ptrs = SendPtr((dg.as_mut_ptr(), dcx.as_mut_ptr()));
    share_row_blocks(rows, 4 * h, &|r0, n| {
        let (pg, pc) = ptrs.get();
        // SAFETY: this block owns rows r0..r0 + n of both outputs, disjoint from every other
        // block's, and the slices outlive `share_row_blocks`.
        let (dg, dcx) = unsafe { (rows_mut(pg, r0, n, 4 * h), rows_mut(pc, r0, n, h)) };
        let state = |src| rows_of(src, r0, n, h);
        let a = rows_of(act, r0, n, 4 * h);
        lstm_bwd_rows(
            a,
            (state(cx), state(tc), state(dhy), state(dcy)),
            h,
            dg,
            dcx,
        );
    });
}

/// The gate and cell gradients of [`lstm_bwd`] row by row (targets as [`lstm_cell_rows`]).
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+avx+fma", "x86_64+avx2+avx+fma"))]
fn lstm_bwd_rows<T: Float>(
    act: &[T],
    (cx, tc, dhy, dcy): (&[T], &[T], &[T], &[T]),
    h: usize,
    dg: &mut [MaybeUninit<T>],
    dcx: &mut [MaybeUninit<T>],
) {
    let one = T::one();
    let rows = act
        .chunks_exact(4 * h)
        .zip(dg.chunks_exact_mut(4 * h))
        .zip(dcx.chunks_exact_mut(h))
        .zip(cx.chunks_exact(h).zip(tc.chunks_exact(h)))
        .zip(dhy.chunks_exact(h).zip(dcy.chunks_exact(h)));
    for ((((a, d), dcx), (cx, tc)), (dhy, dcy)) in rows {
        let (di, d) = d.split_at_mut(h);
        let (df, d) = d.split_at_mut(h);
        let (dgg, d_o) = d.split_at_mut(h);
        let (ai, af, ag, ao) = (&a[..h], &a[h..2 * h], &a[2 * h..3 * h], &a[3 * h..4 * h]);
        for j in 0..h {
            let (i, f, gg, o) = (ai[j], af[j], ag[j], ao[j]);
            let dc = dcy[j] + dhy[j] * o * (one - tc[j] * tc[j]);
            di[j].write(dc * gg * dsig(i));
            df[j].write(dc * cx[j] * dsig(f));
            dgg[j].write(dc * i * (one - gg * gg));
            d_o[j].write(dhy[j] * tc[j] * dsig(o));
            dcx[j].write(dc * f);
        }
    }
}

// ----- an LSTM layer as one node ------------------------------------------------------------------

/// Whether a layer runs as one node ([`lstm_layer`]): an LSTM without projections over whole
/// (unpacked) sequences, its operands non-empty and of one float32/float64 dtype, none batched
/// by vmap or carrying a forward-mode tangent. The rest takes the per-step nodes.
fn runs_as_one_node(
    pass: &Pass<'_>,
    xp: &Tensor,
    h0: &Tensor,
    c0: &Tensor,
    w: &CellWeights,
) -> bool {
    let ops = [xp, h0, c0, &w.w_hh];
    let dt = xp.dtype();
    pass.mode == RnnMode::Lstm
        && pass.lengths.is_none()
        && w.w_hr.is_none()
        && matches!(dt, DType::Float32 | DType::Float64)
        && ops
            .iter()
            .all(|t| t.dtype() == dt && !t.is_batched() && t.numel() > 0)
        && !forward_ad::any_tangent(&ops)
}

/// The extent of one layer run by [`lstm_layer`], and its direction.
struct LayerDims {
    seq: usize,
    batch: usize,
    hidden: usize,
    reverse: bool,
}

impl LayerDims {
    /// The time index of the step that runs before the one at `t` (None for the first step).
    fn prev(&self, t: usize) -> Option<usize> {
        if self.reverse {
            (t + 1 < self.seq).then_some(t + 1)
        } else {
            t.checked_sub(1)
        }
    }

    /// The time index of the last step (whose states are the layer's final ones).
    fn last(&self) -> usize {
        if self.reverse {
            0
        } else {
            self.seq - 1
        }
    }
}

/// An LSTM layer over a whole sequence as one node, as torch's CPU LSTM runs
/// (`mkldnn_rnn_layer`): `xp` `(seq, batch, 4 hidden)` holds every step's input projection,
/// biases included; returns the `(seq, batch, hidden)` outputs and the final `h` and `c`.
///
/// The forward runs each step's product and fused cell straight into the layer's buffers,
/// keeping the gate activations, cell states and their tanh; the backward runs the steps in
/// reverse into one gate-gradient buffer, which is `xp`'s gradient as it stands and gives the
/// recurrent weight's in two products ([`recurrent_weight_grad`]). Per-step nodes cost a node
/// and its saved tensors per step, then stacking the steps' outputs and their gradients, and the
/// engine's sum of the two gradients reaching every hidden state. Under `create_graph` the
/// backward recomputes the steps in recorded ops and runs the same recurrence on them
/// ([`layer_bwd_graph`]), so higher derivatives are exact.
fn lstm_layer(
    xp: &Tensor,
    h0: &Tensor,
    c0: &Tensor,
    w_hh: &Tensor,
    reverse: bool,
) -> Result<(Tensor, Tensor, Tensor)> {
    let (seq, batch, gates) = (xp.shape()[0], xp.shape()[1], xp.shape()[2]);
    let hidden = gates / 4;
    let dims = LayerDims {
        seq,
        batch,
        hidden,
        reverse,
    };
    // Transposed once for every step's product, which then reads it row by row (see
    // `linear_with`).
    let w_t = {
        let _g = GradModeGuard::new(false);
        w_hh.t()?.contiguous()?
    };
    let (seq_h, seq_g, state) = ([seq, batch, hidden], [seq, batch, gates], [batch, hidden]);
    let [out, act, cs, tc, h_n, c_n] = by_dtype!(&[xp, h0, c0, &w_t], |s: T| tensors(
        layer_fwd::<T>(s, &dims)?,
        [&seq_h, &seq_g, &seq_h, &seq_h, &state, &state]
    ))?;
    let inputs = [xp, h0, c0, w_hh];
    if needs_grad(&inputs) {
        record(
            "MkldnnRnnLayerBackward0",
            &inputs,
            &[&out, &h_n, &c_n],
            &[xp, h0, c0, w_hh, &out, &act, &cs, &tc],
            false,
            move |g, s| {
                if grad_mode::is_grad_enabled() {
                    return layer_bwd_graph(&s[..4], g, reverse);
                }
                let want_w = wants_grad(3);
                let w_shape: &[usize] = if want_w { &[gates, hidden] } else { &[0] };
                let ops = [
                    &s[1], &s[2], &s[3], &s[4], &s[5], &s[6], &s[7], &g[0], &g[1], &g[2],
                ];
                let [dxp, dh0, dc0, dw] = by_dtype!(&ops, |v: T| tensors(
                    layer_bwd::<T>(v, &dims, want_w)?,
                    [&seq_g, &state, &state, w_shape]
                ))?;
                Ok(vec![
                    grad_if_wanted(0, || Ok(dxp))?,
                    grad_if_wanted(1, || Ok(dh0))?,
                    grad_if_wanted(2, || Ok(dc0))?,
                    want_w.then_some(dw),
                ])
            },
        )?;
    }
    Ok((out, h_n, c_n))
}

/// `h @ w_t` for one step: `(batch, hidden)` by `(hidden, 4 hidden)`, on the pool's threads.
fn step_product<T: GemmScalar>(
    a: &[T],
    b: &[T],
    (n, k, m): (usize, usize, usize),
) -> Result<Vec<T>> {
    let (a, b) = (MatRef::matrix(a, k, 1), MatRef::matrix(b, m, 1));
    matmul_strided(&[], n, k, m, a, b, get_num_threads())
}

/// [`lstm_layer`]'s forward from `xp`, `h0`, `c0` and the transposed recurrent weight `(h, 4h)`:
/// the outputs, gate activations, cell states and their tanh (by time index), then the final
/// `h` and `c`.
fn layer_fwd<T: StepFloat + GemmScalar>(s: &[&[T]], d: &LayerDims) -> Result<[Vec<T>; 6]> {
    let (xp, h0, c0, w_t) = (s[0], s[1], s[2], s[3]);
    let (b, h) = (d.batch, d.hidden);
    let (bh, bg) = (b * h, b * 4 * h);
    let (n, ng) = (d.seq * bh, d.seq * bg);
    let mut out: Vec<T> = try_vec(n)?;
    let mut act: Vec<T> = try_vec(ng)?;
    let mut cs: Vec<T> = try_vec(n)?;
    let mut tc: Vec<T> = try_vec(n)?;
    {
        let mut steps: Vec<_> = out.spare_capacity_mut()[..n]
            .chunks_exact_mut(bh)
            .zip(act.spare_capacity_mut()[..ng].chunks_exact_mut(bg))
            .zip(cs.spare_capacity_mut()[..n].chunks_exact_mut(bh))
            .zip(tc.spare_capacity_mut()[..n].chunks_exact_mut(bh))
            .zip(xp.chunks_exact(bg))
            .collect();
        if d.reverse {
            steps.reverse();
        }
        let (mut h_prev, mut c_prev) = (h0, c0);
        for ((((o, a), c), t), x) in steps {
            let gh = step_product(h_prev, w_t, (b, h, 4 * h))?;
            lstm_fwd_into(x, Some(&gh), c_prev, h, (a, &mut *c, &mut *o, t));
            // SAFETY: `lstm_fwd_into` wrote every slot of `o` and `c`.
            (h_prev, c_prev) = unsafe { (assume_init(o), assume_init(c)) };
        }
    }
    // SAFETY: the steps covered every time index, and `lstm_fwd_into` wrote all their slots.
    unsafe {
        out.set_len(n);
        act.set_len(ng);
        cs.set_len(n);
        tc.set_len(n);
    }
    let last = d.last() * bh..(d.last() + 1) * bh;
    let (h_n, c_n) = (out[last.clone()].to_vec(), cs[last].to_vec());
    Ok([out, act, cs, tc, h_n, c_n])
}

/// [`lstm_layer`]'s backward: from `h0, c0, w_hh`, the forward's `out, act, cs, tc` and the
/// gradients of `out, h_n, c_n`, the gradients of `xp, h0, c0` and (when `want_w`, else an
/// empty buffer) `w_hh`.
fn layer_bwd<T: StepFloat + GemmScalar>(
    v: &[&[T]],
    d: &LayerDims,
    want_w: bool,
) -> Result<[Vec<T>; 4]> {
    let (h0, c0, w_hh, out, act, cs, tc) = (v[0], v[1], v[2], v[3], v[4], v[5], v[6]);
    let (dout, dh_n, dc_n) = (v[7], v[8], v[9]);
    let (b, h) = (d.batch, d.hidden);
    let (bh, bg) = (b * h, b * 4 * h);
    let ng = d.seq * bg;
    let mut dg: Vec<T> = try_vec(ng)?;
    let (mut dh, mut dc) = (dh_n.to_vec(), dc_n.to_vec());
    let mut dhy = vec![T::zero(); bh];
    let mut dcx = vec![T::zero(); bh];
    {
        let mut steps: Vec<_> = dg.spare_capacity_mut()[..ng]
            .chunks_exact_mut(bg)
            .enumerate()
            .collect();
        // The reverse of the forward's order.
        if !d.reverse {
            steps.reverse();
        }
        for (t, dgt) in steps {
            let at = |buf| rows_of(buf, t, 1, bh);
            // h_t's gradient: the later step's, plus the output's.
            for ((o, &a), &c) in dhy.iter_mut().zip(&dh).zip(at(dout)) {
                *o = a + c;
            }
            let cx = d.prev(t).map_or(c0, |p| &cs[p * bh..(p + 1) * bh]);
            let a = &act[t * bg..(t + 1) * bg];
            lstm_bwd_into(a, (cx, at(tc), &dhy, &dc), h, dgt, as_uninit(&mut dcx));
            std::mem::swap(&mut dc, &mut dcx);
            // SAFETY: `lstm_bwd_into` wrote every slot of `dgt`.
            let dgt = unsafe { assume_init(dgt) };
            dh = step_product(dgt, w_hh, (b, 4 * h, h))?;
        }
    }
    // SAFETY: the steps covered every time index, and `lstm_bwd_into` wrote all their slots.
    unsafe { dg.set_len(ng) };
    let dw = if want_w {
        recurrent_weight_grad(&dg, out, h0, d)?
    } else {
        Vec::new()
    };
    Ok([dg, dh, dc, dw])
}

/// `Σ_t dg_tᵀ h_in(t)`, `h_in(t)` the hidden state step `t` read: the previous step's output,
/// or `h0` for the first step. As two products: the steps that read an output (one contiguous
/// run of `out` against one of `dg`), plus the first step's.
fn recurrent_weight_grad<T: StepFloat + GemmScalar>(
    dg: &[T],
    out: &[T],
    h0: &[T],
    d: &LayerDims,
) -> Result<Vec<T>> {
    let (b, h, g) = (d.batch, d.hidden, 4 * d.hidden);
    let rows = (d.seq - 1) * b;
    let (dg_first, dg_rest, out_rest) = if d.reverse {
        (&dg[rows * g..], &dg[..rows * g], &out[b * h..])
    } else {
        (&dg[..b * g], &dg[b * g..], &out[..rows * h])
    };
    // `rows x g` gradients read as their `g x rows` transpose, times `rows x h` states.
    let product = |dg, states, rows| {
        let (a, b) = (MatRef::matrix(dg, 1, g), MatRef::matrix(states, h, 1));
        matmul_strided(&[], g, rows, h, a, b, get_num_threads())
    };
    let mut w = product(dg_first, h0, b)?;
    if rows > 0 {
        for (a, r) in w.iter_mut().zip(product(dg_rest, out_rest, rows)?) {
            *a = *a + r;
        }
    }
    Ok(w)
}

/// [`lstm_layer`]'s backward under `create_graph`, in recorded ops so it can be differentiated
/// again: the steps recomputed from the saved `xp, h0, c0, w_hh` (so the states each step read
/// are functions of the inputs), then the same recurrence as [`layer_bwd`] on them.
fn layer_bwd_graph(saved: &[Tensor], g: &[Tensor], reverse: bool) -> Result<Vec<Option<Tensor>>> {
    let (xp, h0, c0, w_hh) = (&saved[0], &saved[1], &saved[2], &saved[3]);
    let xs = xp.unbind(0)?;
    let seq = xs.len();
    let order: Vec<usize> = if reverse {
        (0..seq).rev().collect()
    } else {
        (0..seq).collect()
    };
    // Per time index: the raw gates, and the states the step read.
    let mut steps: Vec<Option<[Tensor; 3]>> = vec![None; seq];
    let (mut h, mut c) = (h0.clone(), c0.clone());
    for &t in &order {
        let gates = xs[t].add(&linear(&h, w_hh, None)?)?;
        let (hy, cy) = lstm_step_composed(&gates, &c)?;
        steps[t] = Some([gates, h, c]);
        (h, c) = (hy, cy);
    }
    let dout = g[0].unbind(0)?;
    let (mut dh, mut dc) = (g[1].clone(), g[2].clone());
    let mut dgates: Vec<Option<Tensor>> = vec![None; seq];
    let mut dw: Option<Tensor> = None;
    for &t in order.iter().rev() {
        let [gates, h_in, c_in] = steps[t]
            .take()
            .ok_or_else(|| Error::runtime("lstm layer: a step was not recomputed"))?;
        let [dg, dcx] = lstm_bwd_graph(&gates, &c_in, &dh.add(&dout[t])?, &dc)?;
        dh = dg.matmul(w_hh)?;
        let part = dg.t()?.matmul(&h_in)?;
        dw = Some(match dw {
            Some(acc) => acc.add(&part)?,
            None => part,
        });
        dc = dcx;
        dgates[t] = Some(dg);
    }
    let dgates: Vec<Tensor> = dgates.into_iter().flatten().collect();
    let dxp = Tensor::stack(&dgates, 0)?;
    let mut res = Vec::with_capacity(4);
    for (k, d) in [Some(dxp), Some(dh), Some(dc), dw].into_iter().enumerate() {
        res.push(d.filter(|_| wants_grad(k)));
    }
    Ok(res)
}

/// The LSTM's gate activations `i, f, g, o` from the raw gates, in differentiable ops.
fn lstm_gates(g: &Tensor) -> Result<[Tensor; 4]> {
    let parts = g.chunk(4, 1)?;
    Ok([
        parts[0].sigmoid()?,
        parts[1].sigmoid()?,
        parts[2].tanh()?,
        parts[3].sigmoid()?,
    ])
}

/// The LSTM step in differentiable ops, for operands batched by vmap: the fused kernel reads
/// elements, and a batched tensor has none of its own (its ops' batching rules run instead).
fn lstm_step_composed(g: &Tensor, cx: &Tensor) -> Result<(Tensor, Tensor)> {
    let [i, f, gg, o] = lstm_gates(g)?;
    let cy = f.mul(cx)?.add(&i.mul(&gg)?)?;
    Ok((o.mul(&cy.tanh()?)?, cy))
}

/// The same backward with differentiable ops on the raw gates, for `create_graph`.
fn lstm_bwd_graph(g: &Tensor, cx: &Tensor, dhy: &Tensor, dcy: &Tensor) -> Result<[Tensor; 2]> {
    let [i, f, gg, o] = lstm_gates(g)?;
    let tc = f.mul(cx)?.add(&i.mul(&gg)?)?.tanh()?;
    let dsig_t = |s: &Tensor| s.mul(&s.rsub_scalar(1.0)?);
    let dc = dcy.add(&dhy.mul(&o)?.mul(&tc.mul(&tc)?.rsub_scalar(1.0)?)?)?;
    let di = dc.mul(&gg)?.mul(&dsig_t(&i)?)?;
    let df = dc.mul(cx)?.mul(&dsig_t(&f)?)?;
    let dgg = dc.mul(&i)?.mul(&gg.mul(&gg)?.rsub_scalar(1.0)?)?;
    let d_o = dhy.mul(&tc)?.mul(&dsig_t(&o)?)?;
    Ok([Tensor::cat(&[di, df, dgg, d_o], 1)?, dc.mul(&f)?])
}

/// Whether any operand is batched by vmap (the fused kernels then give way to composed ops).
fn any_batched(ts: &[&Tensor]) -> bool {
    ts.iter().any(|t| t.is_batched())
}

/// Tensors of the given shapes from a kernel's buffers.
fn tensors<T: Element, const N: usize>(
    v: [Vec<T>; N],
    shapes: [&[usize]; N],
) -> Result<[Tensor; N]> {
    let mut out = Vec::with_capacity(N);
    for (buf, shape) in v.into_iter().zip(shapes) {
        out.push(Tensor::from_vec(buf, shape)?);
    }
    out.try_into()
        .map_err(|_| Error::runtime("rnn step: wrong number of buffers"))
}

/// The LSTM's gate nonlinearities and state update as one node: `gates` `(batch, 4 * hidden)`
/// in torch's `i, f, g, o` order and `cx` `(batch, hidden)` give `(hy, cy)`.
pub fn lstm_pointwise(gates: &Tensor, cx: &Tensor) -> Result<(Tensor, Tensor)> {
    lstm_step(gates, None, cx)
}

/// [`lstm_pointwise`] of `gi + gh` (when `gh` is given) without materialising the sum, as
/// torch's `_thnn_fused_lstm_cell(input_gates, hidden_gates, cx)`: both get the gates'
/// gradient.
fn lstm_step(gi: &Tensor, gh: Option<&Tensor>, cx: &Tensor) -> Result<(Tensor, Tensor)> {
    let cs = cx.shape().to_vec();
    let h = cs.last().copied().unwrap_or(0);
    let want = [cs.first().copied().unwrap_or(0), 4 * h];
    if cx.dim() != 2 || gi.shape() != want || gh.is_some_and(|g| g.shape() != want) {
        return Err(Error::runtime(format!(
            "lstm step: expected gates (batch, 4 * hidden) and cell state (batch, hidden), got {} and {}",
            fmt_shape(gi.shape()),
            fmt_shape(cx.shape())
        )));
    }
    let gs = gi.shape().to_vec();
    let mut inputs = vec![gi];
    inputs.extend(gh);
    inputs.push(cx);
    if any_batched(&inputs) {
        let gates = match gh {
            Some(gh) => gi.add(gh)?,
            None => gi.clone(),
        };
        return lstm_step_composed(&gates, cx);
    }
    let [act, hy, cy, tc] = by_dtype!(&inputs, |s: T| tensors(
        match s {
            [g, g2, c] => lstm_fwd::<T>(g, Some(g2), c, h)?,
            [g, c] => lstm_fwd::<T>(g, None, c, h)?,
            _ => return Err(Error::runtime("lstm step: wrong operands")),
        },
        [&gs, &cs, &cs, &cs]
    ))?;
    if needs_grad(&inputs) {
        let two = gh.is_some();
        let mut saved = inputs.clone();
        saved.extend([&tc, &act]);
        record(
            "ThnnFusedLstmCellBackward0",
            &inputs,
            &[&hy, &cy],
            &saved,
            false,
            move |g, s| {
                let (dhy, dcy) = (&g[0], &g[1]);
                // Saved: the gates (one or two parts), cx, tanh(cy), the workspace.
                let (parts, rest) = s.split_at(if two { 2 } else { 1 });
                let (cx, tc, act) = (&rest[0], &rest[1], &rest[2]);
                let [dg, dcx] = if needs_grad(&[dhy, dcy, &parts[0], cx])
                    || parts.get(1).is_some_and(|p| needs_grad(&[p]))
                    || any_batched(&[dhy, dcy])
                {
                    let gates = match parts {
                        [a, b] => a.add(b)?,
                        _ => parts[0].clone(),
                    };
                    lstm_bwd_graph(&gates, cx, dhy, dcy)?
                } else {
                    by_dtype!(&[act, cx, tc, dhy, dcy], |v: T| tensors(
                        lstm_bwd::<T>(v[0], v[1], v[2], v[3], v[4], h)?,
                        [&gs, &cs]
                    ))?
                };
                Ok(if two {
                    vec![Some(dg.clone()), Some(dg), Some(dcx)]
                } else {
                    vec![Some(dg), Some(dcx)]
                })
            },
        )?;
    }
    Ok((hy, cy))
}

/// GRU forward: the workspace `[r, z, n]` per row and `hy`.
fn gru_fwd<T: StepFloat>(gi: &[T], gh: &[T], hx: &[T], h: usize) -> [Vec<T>; 2] {
    let mut act: Vec<T> = gi.iter().zip(gh).map(|(&a, &b)| a + b).collect();
    for ((a, x), y) in act
        .chunks_exact_mut(3 * h)
        .zip(gi.chunks_exact(3 * h))
        .zip(gh.chunks_exact(3 * h))
    {
        let rz = a[..2 * h].to_vec();
        T::sigmoid_into(&rz, &mut a[..2 * h]);
        for j in 0..h {
            a[2 * h + j] = x[2 * h + j] + a[j] * y[2 * h + j];
        }
        let pre = a[2 * h..].to_vec();
        T::tanh_into(&pre, &mut a[2 * h..]);
    }
    let mut hy = Vec::with_capacity(hx.len());
    for (a, hr) in act.chunks_exact(3 * h).zip(hx.chunks_exact(h)) {
        hy.extend((0..h).map(|j| a[2 * h + j] + a[h + j] * (hr[j] - a[2 * h + j])));
    }
    [act, hy]
}

/// GRU backward in one sweep from the workspace: `(d gi, d gh, d hx)` from `d hy`.
fn gru_bwd<T: StepFloat>(act: &[T], gh: &[T], hx: &[T], dhy: &[T], h: usize) -> [Vec<T>; 3] {
    let one = T::one();
    let mut dgi = vec![T::zero(); act.len()];
    let mut dgh = vec![T::zero(); act.len()];
    let mut dhx = Vec::with_capacity(hx.len());
    for (b, ((a, y), (di, dh))) in act
        .chunks_exact(3 * h)
        .zip(gh.chunks_exact(3 * h))
        .zip(dgi.chunks_exact_mut(3 * h).zip(dgh.chunks_exact_mut(3 * h)))
        .enumerate()
    {
        for j in 0..h {
            let k = b * h + j;
            let (r, z, n) = (a[j], a[h + j], a[2 * h + j]);
            let d = dhy[k];
            let dn = d * (one - z) * (one - n * n);
            let dz = d * (hx[k] - n) * dsig(z);
            let dr = dn * y[2 * h + j] * dsig(r);
            di[j] = dr;
            dh[j] = dr;
            di[h + j] = dz;
            dh[h + j] = dz;
            di[2 * h + j] = dn;
            dh[2 * h + j] = dn * r;
            dhx.push(d * z);
        }
    }
    [dgi, dgh, dhx]
}

/// The same backward with differentiable ops, for `create_graph`.
/// The GRU's gates `r, z, n` from the projections in differentiable ops, and the hidden
/// projection's `n` part (which `r` scales).
fn gru_gates(gi: &Tensor, gh: &Tensor) -> Result<[Tensor; 4]> {
    let a = gi.chunk(3, 1)?;
    let b = gh.chunk(3, 1)?;
    let r = a[0].add(&b[0])?.sigmoid()?;
    let z = a[1].add(&b[1])?.sigmoid()?;
    let n = a[2].add(&r.mul(&b[2])?)?.tanh()?;
    Ok([r, z, n, b[2].clone()])
}

fn gru_bwd_graph(gi: &Tensor, gh: &Tensor, hx: &Tensor, dhy: &Tensor) -> Result<[Tensor; 3]> {
    let [r, z, n, hn] = gru_gates(gi, gh)?;
    let dsig_t = |s: &Tensor| s.mul(&s.rsub_scalar(1.0)?);
    let dn = dhy
        .mul(&z.rsub_scalar(1.0)?)?
        .mul(&n.mul(&n)?.rsub_scalar(1.0)?)?;
    let dz = dhy.mul(&hx.sub(&n)?)?.mul(&dsig_t(&z)?)?;
    let dr = dn.mul(&hn)?.mul(&dsig_t(&r)?)?;
    Ok([
        Tensor::cat(&[dr.clone(), dz.clone(), dn.clone()], 1)?,
        Tensor::cat(&[dr, dz, dn.mul(&r)?], 1)?,
        dhy.mul(&z)?,
    ])
}

/// The GRU's gate nonlinearities and state update as one node: input projections `gi` and
/// hidden projections `gh` (`(batch, 3 * hidden)`, biases included, torch's `r, z, n` order)
/// and `hx` `(batch, hidden)` give `hy = (1 - z) n + z hx`.
pub fn gru_pointwise(gi: &Tensor, gh: &Tensor, hx: &Tensor) -> Result<Tensor> {
    let hs = hx.shape().to_vec();
    let h = hs.last().copied().unwrap_or(0);
    let want = [hs.first().copied().unwrap_or(0), 3 * h];
    if hx.dim() != 2 || gi.shape() != want || gh.shape() != want {
        return Err(Error::runtime(format!(
            "gru step: expected projections (batch, 3 * hidden) and hidden state (batch, hidden), got {}, {} and {}",
            fmt_shape(gi.shape()),
            fmt_shape(gh.shape()),
            fmt_shape(hx.shape())
        )));
    }
    if any_batched(&[gi, gh, hx]) {
        // In differentiable ops (see `lstm_step_composed`): (1 - z) n + z hx.
        let [_, z, n, _] = gru_gates(gi, gh)?;
        return n.add(&z.mul(&hx.sub(&n)?)?);
    }
    let gs = gi.shape().to_vec();
    let [act, hy] = by_dtype!(&[gi, gh, hx], |s: T| tensors(
        gru_fwd::<T>(s[0], s[1], s[2], h),
        [&gs, &hs]
    ))?;
    if needs_grad(&[gi, gh, hx]) {
        record(
            "ThnnFusedGruCellBackward0",
            &[gi, gh, hx],
            &[&hy],
            &[gi, gh, hx, &act],
            false,
            move |g, s| {
                let [dgi, dgh, dhx] =
                    if needs_grad(&[&g[0], &s[0], &s[1], &s[2]]) || g[0].is_batched() {
                        gru_bwd_graph(&s[0], &s[1], &s[2], &g[0])?
                    } else {
                        by_dtype!(&[&s[3], &s[1], &s[2], &g[0]], |v: T| tensors(
                            gru_bwd::<T>(v[0], v[1], v[2], v[3], h),
                            [&gs, &gs, &hs]
                        ))?
                    };
                Ok(vec![Some(dgi), Some(dgh), Some(dhx)])
            },
        )?;
    }
    Ok(hy)
}
