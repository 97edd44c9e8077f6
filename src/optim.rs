//! Optimizer updates: torch's `SGD`, `Adam`/`AdamW`, `RMSprop`, `Adagrad`, `NAdam`, `RAdam`,
//! `Adamax`, `Rprop`, `ASGD` and `Adafactor` steps over a whole parameter group in one call
//! (torch's multi-tensor "foreach" path), with the arithmetic of torch's single-tensor
//! implementations (the formulas of the `torch.optim` docs).
//!
//! Parameters and state tensors are updated in place, outside autograd: nothing is recorded, and
//! each written tensor's version counter is bumped, so a graph that saved a parameter before the
//! step refuses to run backward afterwards, as in torch. Large tensors are updated in chunks on
//! the pool; every element is computed by the same expression whatever the chunking, so results
//! do not depend on the thread count.

use crate::error::{Error, Result};
use crate::ops::elementwise::PAR_MIN_ELEMENTS;
use crate::parallel::{self, SendPtr};
use crate::tensor::shape::fmt_shape;
use crate::tensor::{scalar_type_name, DType, Element, Tensor};

/// Fewest elements per parallel chunk.
const CHUNK_MIN: usize = 1 << 12;

/// The float types the updates run in.
trait Float:
    Element
    + Copy
    + Send
    + Sync
    + PartialOrd
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
    + std::ops::Neg<Output = Self>
{
    fn of(x: f64) -> Self;
    fn f64(self) -> f64;
    fn sqrt(self) -> Self;
    fn abs(self) -> Self;
}

impl Float for f32 {
    fn of(x: f64) -> Self {
        x as f32
    }
    fn f64(self) -> f64 {
        self as f64
    }
    fn sqrt(self) -> Self {
        f32::sqrt(self)
    }
    fn abs(self) -> Self {
        f32::abs(self)
    }
}

impl Float for f64 {
    fn of(x: f64) -> Self {
        x
    }
    fn f64(self) -> f64 {
        self
    }
    fn sqrt(self) -> Self {
        f64::sqrt(self)
    }
    fn abs(self) -> Self {
        f64::abs(self)
    }
}

/// torch's `lerp(a, b, w)` (CPU kernel): two formulas, switching at |w| = 0.5.
#[inline]
fn lerp<T: Float>(a: T, b: T, w: T) -> T {
    if w.abs() < T::of(0.5) {
        a + w * (b - a)
    } else {
        b - (b - a) * (T::of(1.0) - w)
    }
}

/// torch's `maximum` (NaN propagates).
#[inline]
fn maximum<T: Float>(a: T, b: T) -> T {
    #[allow(clippy::eq_op)]
    if a != a || a > b {
        a
    } else {
        b
    }
}

/// Options of [`sgd_step`] (torch.optim.SGD).
#[derive(Clone, Debug)]
pub struct SgdOptions {
    /// Learning rate.
    pub lr: f64,
    /// Momentum factor (0: no momentum buffers are used).
    pub momentum: f64,
    /// Dampening of the momentum.
    pub dampening: f64,
    /// Nesterov momentum.
    pub nesterov: bool,
    /// L2 penalty added to the gradient.
    pub weight_decay: f64,
    /// Maximize the objective instead of minimizing it.
    pub maximize: bool,
    /// The momentum buffers are new: they are set to the gradient instead of updated (torch
    /// creates them as a copy of the first gradient).
    pub first_step: bool,
}

/// Options of [`adam_step`] (torch.optim.Adam and, with `decoupled_weight_decay`, AdamW).
#[derive(Clone, Debug)]
pub struct AdamOptions {
    /// The step number after this step (1 on the first step), as torch's `state['step']`.
    pub step: f64,
    /// Learning rate.
    pub lr: f64,
    /// Decay of the first moment.
    pub beta1: f64,
    /// Decay of the second moment.
    pub beta2: f64,
    /// Added to the denominator.
    pub eps: f64,
    /// Weight decay (L2 penalty, or AdamW's decoupled decay).
    pub weight_decay: f64,
    /// Use the running maximum of the second moment (`max_exp_avg_sqs` must be given).
    pub amsgrad: bool,
    /// Maximize the objective instead of minimizing it.
    pub maximize: bool,
    /// AdamW: decay the parameter by `1 - lr * weight_decay` instead of adding to the gradient.
    pub decoupled_weight_decay: bool,
}

/// Options of [`rmsprop_step`] (torch.optim.RMSprop).
#[derive(Clone, Debug)]
pub struct RmspropOptions {
    /// Learning rate.
    pub lr: f64,
    /// Smoothing constant.
    pub alpha: f64,
    /// Added to the denominator.
    pub eps: f64,
    /// L2 penalty.
    pub weight_decay: f64,
    /// Momentum factor (momentum buffers must be given when > 0).
    pub momentum: f64,
    /// Normalize by the estimated variance (grad averages must be given).
    pub centered: bool,
    /// Maximize the objective instead of minimizing it.
    pub maximize: bool,
}

/// Options of [`adagrad_step`] (torch.optim.Adagrad).
#[derive(Clone, Debug)]
pub struct AdagradOptions {
    /// The step number after this step (1 on the first step).
    pub step: f64,
    /// Learning rate.
    pub lr: f64,
    /// Learning rate decay.
    pub lr_decay: f64,
    /// L2 penalty.
    pub weight_decay: f64,
    /// Added to the denominator.
    pub eps: f64,
    /// Maximize the objective instead of minimizing it.
    pub maximize: bool,
}

fn check_len(what: &str, n: usize, got: usize) -> Result<()> {
    if n != got {
        return Err(Error::runtime(format!(
            "Tensor lists must have the same number of tensors, got {n} and {got} ({what})"
        )));
    }
    Ok(())
}

/// Checks a parameter group: as many gradients, and states of each kind, as parameters
/// (`states`: each list's name in messages, the name of one of its states, the list), then each
/// parameter with its gradient and states.
fn check_group<const K: usize>(
    params: &[Tensor],
    grads: &[Tensor],
    states: [(&str, &str, &[Tensor]); K],
) -> Result<()> {
    let n = params.len();
    check_len("params and grads", n, grads.len())?;
    for (list, _, ts) in &states {
        check_len(&format!("params and {list}"), n, ts.len())?;
    }
    for (i, (p, g)) in params.iter().zip(grads).enumerate() {
        check_param(i, p, g, &states.map(|(_, name, ts)| (name, &ts[i])))?;
    }
    Ok(())
}

/// Checks one-element state lists (`mu_product`, `eta`...): one per parameter, each a
/// one-element floating point tensor.
fn check_scalar_states<const K: usize>(
    n: usize,
    states: [(&str, &str, &[Tensor]); K],
) -> Result<()> {
    for (list, _, ts) in &states {
        check_len(&format!("params and {list}"), n, ts.len())?;
    }
    for i in 0..n {
        for (_, name, ts) in &states {
            scalar_state(i, name, &ts[i])?;
        }
    }
    Ok(())
}

/// Torch's and ferrograd's requirements on one parameter, its gradient and its state tensors.
fn check_param(i: usize, p: &Tensor, g: &Tensor, states: &[(&str, &Tensor)]) -> Result<()> {
    if !p.is_leaf() {
        return Err(Error::value("can't optimize a non-leaf Tensor"));
    }
    if !p.dtype().is_float() {
        return Err(Error::runtime(format!(
            "optimizers update floating point parameters; parameter {i} has dtype {}",
            scalar_type_name(p.dtype())
        )));
    }
    if p.layout().has_broadcast_dims() {
        return Err(Error::runtime(format!(
            "parameter {i} is an expanded tensor (several elements share one memory location) \
             and cannot be updated in place; pass a contiguous copy (.contiguous()) as the parameter"
        )));
    }
    if !p.is_contiguous() {
        return Err(Error::runtime(format!(
            "parameter {i} is not contiguous; ferrograd's optimizers update contiguous \
             parameters in place: pass .contiguous() copies as parameters"
        )));
    }
    if g.shape() != p.shape() {
        return Err(Error::runtime(format!(
            "the gradient of parameter {i} has shape {} but the parameter has shape {}",
            fmt_shape(g.shape()),
            fmt_shape(p.shape())
        )));
    }
    if g.dtype() != p.dtype() {
        return Err(Error::runtime(format!(
            "the gradient of parameter {i} has dtype {} but the parameter has dtype {}",
            scalar_type_name(g.dtype()),
            scalar_type_name(p.dtype())
        )));
    }
    for (name, s) in states {
        if s.shape() != p.shape() || s.dtype() != p.dtype() || !s.is_contiguous() {
            return Err(Error::runtime(format!(
                "the {name} of parameter {i} must be a contiguous tensor of the parameter's \
                 shape {} and dtype {}, got shape {} and dtype {}",
                fmt_shape(p.shape()),
                scalar_type_name(p.dtype()),
                fmt_shape(s.shape()),
                scalar_type_name(s.dtype())
            )));
        }
        if std::sync::Arc::ptr_eq(s.storage(), p.storage()) {
            return Err(Error::runtime(format!(
                "the {name} of parameter {i} shares memory with the parameter"
            )));
        }
        for (other, o) in states {
            if other != name && std::sync::Arc::ptr_eq(s.storage(), o.storage()) {
                return Err(Error::runtime(format!(
                    "the {name} and {other} of parameter {i} share memory"
                )));
            }
        }
    }
    Ok(())
}

/// `f(start, len)` over consecutive chunks of `0..n`, in parallel for large `n`.
fn for_chunks(n: usize, f: &(dyn Fn(usize, usize) + Sync)) {
    let helpers = if n >= PAR_MIN_ELEMENTS {
        parallel::helpers()
    } else {
        0
    };
    if helpers == 0 {
        f(0, n);
        return;
    }
    let chunk = n
        .div_ceil(4 * (helpers + 1))
        .max(CHUNK_MIN)
        .next_multiple_of(64);
    parallel::share_work(helpers, n.div_ceil(chunk), &|i| {
        let start = i * chunk;
        f(start, chunk.min(n - start));
    });
}

/// The per-chunk update: parameter, gradient and up to three state slices of the same length
/// (unused states are empty).
type Kernel<'a, T> = dyn Fn(&mut [T], &[T], [&mut [T]; 3]) + Sync + 'a;

/// [`update_one`] for a float16 or bfloat16 parameter: the parameter, its gradient and its
/// states are widened to float32, updated there, and rounded back in place (torch's CPU
/// optimizers compute half parameters in float32 as well).
fn update_half(p: &Tensor, g: &Tensor, states: &[&Tensor], kernel: &Kernel<'_, f32>) -> Result<()> {
    use crate::kernels::copy::cast;
    let (p32, g32) = (cast(p, DType::Float32)?, cast(g, DType::Float32)?);
    let s32 = states
        .iter()
        .map(|s| cast(s, DType::Float32))
        .collect::<Result<Vec<_>>>()?;
    update_one::<f32>(&p32, &g32, &s32.iter().collect::<Vec<_>>(), kernel)?;
    let _no_grad = crate::tensor::grad_mode::GradModeGuard::new(false);
    p.copy_(&p32)?;
    for (s, w) in states.iter().zip(&s32) {
        s.copy_(w)?;
    }
    Ok(())
}

/// Run `kernel` over one parameter (already checked by [`check_param`]), writing the parameter
/// and its state tensors in place and bumping their versions.
fn update_one<T: Float>(
    p: &Tensor,
    g: &Tensor,
    states: &[&Tensor],
    kernel: &Kernel<'_, T>,
) -> Result<()> {
    let n = p.numel();
    // A gradient sharing memory with what is written, or strided, is read from a copy.
    let aliased = std::sync::Arc::ptr_eq(g.storage(), p.storage())
        || states
            .iter()
            .any(|s| std::sync::Arc::ptr_eq(g.storage(), s.storage()));
    let owned_grad = if aliased || !g.is_contiguous() {
        Some(g.to_vec::<T>()?)
    } else {
        None
    };
    let grad_guard = if owned_grad.is_none() {
        Some(g.storage().read())
    } else {
        None
    };
    let grad: &[T] = match (&owned_grad, &grad_guard) {
        (Some(v), _) => v,
        (None, Some(guard)) => {
            let data =
                T::data(guard).ok_or_else(|| Error::runtime("internal error: grad dtype"))?;
            let off = g.layout().offset;
            data.as_slice()
                .get(off..off + n)
                .ok_or_else(|| Error::runtime("internal error: grad out of its storage"))?
        }
        (None, None) => return Err(Error::runtime("internal error: no grad")),
    };
    let mut p_guard = p.storage().write();
    let mut s_guards: Vec<_> = states.iter().map(|s| s.storage().write()).collect();
    let p_ptr = {
        let data = T::data_mut(&mut p_guard)
            .ok_or_else(|| Error::runtime("internal error: param dtype"))?;
        let off = p.layout().offset;
        data.as_mut_slice()
            .get_mut(off..off + n)
            .ok_or_else(|| Error::runtime("internal error: param out of its storage"))?
            .as_mut_ptr()
    };
    let mut s_ptrs: [*mut T; 3] = [std::ptr::null_mut(); 3];
    for (k, (guard, s)) in s_guards.iter_mut().zip(states).enumerate() {
        let data =
            T::data_mut(guard).ok_or_else(|| Error::runtime("internal error: state dtype"))?;
        let off = s.layout().offset;
        s_ptrs[k] = data
            .as_mut_slice()
            .get_mut(off..off + n)
            .ok_or_else(|| Error::runtime("internal error: state out of its storage"))?
            .as_mut_ptr();
    }
    let used = states.len();
    let ptrs = SendPtr((p_ptr, s_ptrs));
    for_chunks(n, &|start, len| {
        let (pp, sp) = ptrs.get();
        // SAFETY: the chunks are disjoint ranges of buffers of `n` elements, which stay locked
        // for writing (and alive) until `for_chunks` returns; the buffers are distinct storages
        // (checked), so no two slices alias. Unused states are empty slices.
        let (pc, s0, s1, s2) = unsafe {
            let slice = |k: usize| -> &mut [T] {
                if k < used {
                    std::slice::from_raw_parts_mut(sp[k].add(start), len)
                } else {
                    &mut []
                }
            };
            (
                std::slice::from_raw_parts_mut(pp.add(start), len),
                slice(0),
                slice(1),
                slice(2),
            )
        };
        kernel(pc, &grad[start..start + len], [s0, s1, s2]);
    });
    drop(s_guards);
    drop(p_guard);
    p.storage().bump_version();
    for s in states {
        s.storage().bump_version();
    }
    Ok(())
}

/// One SGD step over a parameter group (torch.optim.SGD's update):
///
/// ```text
/// g = -grad if maximize else grad;  g += weight_decay * p
/// if momentum != 0: b = g if first_step else momentum * b + (1 - dampening) * g
///                   g = g + momentum * b if nesterov else b
/// p -= lr * g
/// ```
///
/// `momentum_buffers` holds one tensor per parameter when `momentum != 0` (empty otherwise).
pub fn sgd_step(
    params: &[Tensor],
    grads: &[Tensor],
    momentum_buffers: &[Tensor],
    opts: &SgdOptions,
) -> Result<()> {
    check_len("params and grads", params.len(), grads.len())?;
    let use_buf = opts.momentum != 0.0;
    if use_buf {
        check_len(
            "params and momentum_buffers",
            params.len(),
            momentum_buffers.len(),
        )?;
    }
    for (i, (p, g)) in params.iter().zip(grads).enumerate() {
        let st: Vec<(&str, &Tensor)> = if use_buf {
            vec![("momentum_buffer", &momentum_buffers[i])]
        } else {
            vec![]
        };
        check_param(i, p, g, &st)?;
    }
    let o = opts.clone();
    for (i, (p, g)) in params.iter().zip(grads).enumerate() {
        let states: Vec<&Tensor> = if use_buf {
            vec![&momentum_buffers[i]]
        } else {
            vec![]
        };
        fn kernel<T: Float>(o: &SgdOptions) -> impl Fn(&mut [T], &[T], [&mut [T]; 3]) + Sync + '_ {
            move |p, g, [b, _, _]| sgd_chunk(o, p, g, b)
        }
        match p.dtype() {
            h if h.is_half() => update_half(p, g, &states, &kernel::<f32>(&o))?,
            DType::Float32 => update_one::<f32>(p, g, &states, &kernel::<f32>(&o))?,
            _ => update_one::<f64>(p, g, &states, &kernel::<f64>(&o))?,
        }
    }
    Ok(())
}

/// One Adam (or AdamW) step over a parameter group (torch.optim.Adam / AdamW):
///
/// ```text
/// g = -grad if maximize else grad
/// if weight_decay != 0: p *= 1 - lr * weight_decay (decoupled)  or  g += weight_decay * p
/// m = lerp(m, g, 1 - beta1);  v = beta2 * v + (1 - beta2) * g * g
/// vmax = max(vmax, v) (amsgrad);  denom = sqrt(vmax or v) / sqrt(1 - beta2^step) + eps
/// p -= lr / (1 - beta1^step) * m / denom
/// ```
///
/// `max_exp_avg_sqs` holds one tensor per parameter when `amsgrad` (empty otherwise).
pub fn adam_step(
    params: &[Tensor],
    grads: &[Tensor],
    exp_avgs: &[Tensor],
    exp_avg_sqs: &[Tensor],
    max_exp_avg_sqs: &[Tensor],
    opts: &AdamOptions,
) -> Result<()> {
    let n = params.len();
    check_len("params and grads", n, grads.len())?;
    check_len("params and exp_avgs", n, exp_avgs.len())?;
    check_len("params and exp_avg_sqs", n, exp_avg_sqs.len())?;
    if opts.amsgrad {
        check_len("params and max_exp_avg_sqs", n, max_exp_avg_sqs.len())?;
    }
    let states_of = |i: usize| -> Vec<(&str, &Tensor)> {
        let mut v = vec![("exp_avg", &exp_avgs[i]), ("exp_avg_sq", &exp_avg_sqs[i])];
        if opts.amsgrad {
            v.push(("max_exp_avg_sq", &max_exp_avg_sqs[i]));
        }
        v
    };
    for (i, (p, g)) in params.iter().zip(grads).enumerate() {
        check_param(i, p, g, &states_of(i))?;
    }
    let bc1 = 1.0 - opts.beta1.powf(opts.step);
    let bc2 = 1.0 - opts.beta2.powf(opts.step);
    let step_size = opts.lr / bc1;
    let bc2_sqrt = bc2.powf(0.5);
    fn kernel<T: Float>(
        o: &AdamOptions,
        step_size: f64,
        bc2_sqrt: f64,
    ) -> impl Fn(&mut [T], &[T], [&mut [T]; 3]) + Sync + '_ {
        move |p, g, [m, v, vmax]| adam_chunk(o, step_size, bc2_sqrt, p, g, m, v, vmax)
    }
    for (i, (p, g)) in params.iter().zip(grads).enumerate() {
        let states: Vec<&Tensor> = states_of(i).into_iter().map(|(_, t)| t).collect();
        match p.dtype() {
            h if h.is_half() => {
                update_half(p, g, &states, &kernel::<f32>(opts, step_size, bc2_sqrt))?
            }
            DType::Float32 => {
                update_one::<f32>(p, g, &states, &kernel::<f32>(opts, step_size, bc2_sqrt))?
            }
            _ => update_one::<f64>(p, g, &states, &kernel::<f64>(opts, step_size, bc2_sqrt))?,
        }
    }
    Ok(())
}

/// `$f::<T, ...>(args)` with each runtime flag turned into a const generic argument, one
/// straight loop per combination: flags tested inside an optimizer's loop kept the release build
/// (fat LTO) from vectorising it (AdamW ran 4.5x slower than Adam, SGD with momentum 4x).
macro_rules! with_const_flags {
    ($f:ident::<$T:ty $(, $done:literal)*>($($arg:expr),*);) => {
        $f::<$T $(, $done)*>($($arg),*)
    };
    ($f:ident::<$T:ty $(, $done:literal)*>($($arg:expr),*); $flag:expr $(, $rest:expr)*) => {
        if $flag {
            with_const_flags!($f::<$T $(, $done)*, true>($($arg),*); $($rest),*)
        } else {
            with_const_flags!($f::<$T $(, $done)*, false>($($arg),*); $($rest),*)
        }
    };
}

/// One chunk of [`sgd_step`] (targets as [`adam_chunk`]).
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq+avx2+avx+fma",
    "x86_64+avx2+avx+fma",
    "aarch64+neon"
))]
fn sgd_chunk<T: Float>(o: &SgdOptions, p: &mut [T], g: &[T], b: &mut [T]) {
    let c = [
        T::of(-o.lr),
        T::of(o.momentum),
        T::of(1.0 - o.dampening),
        T::of(o.weight_decay),
    ];
    let use_buf = o.momentum != 0.0;
    with_const_flags!(sgd_loop::<T>(c, p, g, b);
        o.maximize, o.weight_decay != 0.0, use_buf, o.first_step, o.nesterov);
}

/// [`sgd_chunk`]'s loop for one choice of options; `c` is (-lr, momentum, 1 - dampening,
/// weight_decay).
#[inline(always)]
fn sgd_loop<
    T: Float,
    const MAXIMIZE: bool,
    const DECAY: bool,
    const BUF: bool,
    const FIRST: bool,
    const NESTEROV: bool,
>(
    c: [T; 4],
    p: &mut [T],
    g: &[T],
    b: &mut [T],
) {
    let [lr, mom, damp, wd] = c;
    let n = p.len();
    let g = &g[..n];
    let b = if BUF { &mut b[..n] } else { b };
    for k in 0..n {
        let mut d = if MAXIMIZE { -g[k] } else { g[k] };
        if DECAY {
            d = d + wd * p[k];
        }
        if BUF {
            b[k] = if FIRST { d } else { b[k] * mom + damp * d };
            d = if NESTEROV { d + mom * b[k] } else { b[k] };
        }
        p[k] = p[k] + lr * d;
    }
}

/// One chunk of [`rmsprop_step`] (targets as [`adam_chunk`]).
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq+avx2+avx+fma",
    "x86_64+avx2+avx+fma",
    "aarch64+neon"
))]
fn rmsprop_chunk<T: Float>(
    o: &RmspropOptions,
    p: &mut [T],
    g: &[T],
    s: &mut [T],
    x: &mut [T],
    y: &mut [T],
) {
    let use_mom = o.momentum > 0.0;
    // States come in order: square_avg, [momentum_buffer], [grad_avg].
    let (b, ga): (&mut [T], &mut [T]) = if !use_mom && o.centered {
        (y, x)
    } else {
        (x, y)
    };
    let c = [
        T::of(o.alpha),
        T::of(1.0 - o.alpha),
        T::of(o.weight_decay),
        T::of(o.eps),
        T::of(o.momentum),
        T::of(-o.lr),
    ];
    with_const_flags!(rmsprop_loop::<T>(c, p, g, s, b, ga);
        o.maximize, o.weight_decay != 0.0, o.centered, use_mom);
}

/// [`rmsprop_chunk`]'s loop for one choice of options; `c` is (alpha, 1 - alpha, weight_decay,
/// eps, momentum, -lr).
#[inline(always)]
fn rmsprop_loop<
    T: Float,
    const MAXIMIZE: bool,
    const DECAY: bool,
    const CENTERED: bool,
    const MOMENTUM: bool,
>(
    c: [T; 6],
    p: &mut [T],
    g: &[T],
    s: &mut [T],
    b: &mut [T],
    ga: &mut [T],
) {
    let [alpha, c1, wd, eps, mom, lr] = c;
    let n = p.len();
    let (g, s) = (&g[..n], &mut s[..n]);
    let b = if MOMENTUM { &mut b[..n] } else { b };
    let ga = if CENTERED { &mut ga[..n] } else { ga };
    for k in 0..n {
        let mut d = if MAXIMIZE { -g[k] } else { g[k] };
        if DECAY {
            d = d + wd * p[k];
        }
        s[k] = s[k] * alpha + c1 * d * d;
        let mut avg = if CENTERED {
            ga[k] = lerp(ga[k], d, c1);
            (s[k] + T::of(-1.0) * ga[k] * ga[k]).sqrt()
        } else {
            s[k].sqrt()
        };
        avg = avg + eps;
        if MOMENTUM {
            b[k] = b[k] * mom + d / avg;
            p[k] = p[k] + lr * b[k];
        } else {
            p[k] = p[k] + lr * d / avg;
        }
    }
}

/// One chunk of [`adagrad_step`] (targets as [`adam_chunk`]).
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq+avx2+avx+fma",
    "x86_64+avx2+avx+fma",
    "aarch64+neon"
))]
fn adagrad_chunk<T: Float>(o: &AdagradOptions, clr: f64, p: &mut [T], g: &[T], s: &mut [T]) {
    let (wd, eps, neg) = (T::of(o.weight_decay), T::of(o.eps), T::of(-clr));
    for k in 0..p.len() {
        let mut d = if o.maximize { -g[k] } else { g[k] };
        if o.weight_decay != 0.0 {
            d = d + wd * p[k];
        }
        s[k] = s[k] + T::of(1.0) * d * d;
        let std = s[k].sqrt() + eps;
        p[k] = p[k] + neg * d / std;
    }
}

/// One chunk of [`adam_step`], compiled for the vector targets (a closure would run at the
/// baseline's width: four float32 lanes for the square root and the division).
#[allow(clippy::too_many_arguments)]
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq+avx2+avx+fma",
    "x86_64+avx2+avx+fma",
    "aarch64+neon"
))]
fn adam_chunk<T: Float>(
    o: &AdamOptions,
    step_size: f64,
    bc2_sqrt: f64,
    p: &mut [T],
    g: &[T],
    m: &mut [T],
    v: &mut [T],
    vmax: &mut [T],
) {
    let c = AdamConsts {
        decay: T::of(1.0 - o.lr * o.weight_decay),
        wd: T::of(o.weight_decay),
        w1: T::of(1.0 - o.beta1),
        b2: T::of(o.beta2),
        c2: T::of(1.0 - o.beta2),
        bc2s: T::of(bc2_sqrt),
        eps: T::of(o.eps),
        neg_step: T::of(-step_size),
    };
    let decoupled = o.weight_decay != 0.0 && o.decoupled_weight_decay;
    let l2 = o.weight_decay != 0.0 && !o.decoupled_weight_decay;
    with_const_flags!(adam_loop::<T>(&c, p, g, m, v, vmax); o.maximize, decoupled, l2, o.amsgrad);
}

/// Adam's constants in the parameters' type.
struct AdamConsts<T> {
    decay: T,
    wd: T,
    w1: T,
    b2: T,
    c2: T,
    bc2s: T,
    eps: T,
    neg_step: T,
}

/// [`adam_chunk`]'s loop for one choice of options (inlined into each vector target).
#[inline(always)]
fn adam_loop<
    T: Float,
    const MAXIMIZE: bool,
    const DECOUPLED: bool,
    const L2: bool,
    const AMSGRAD: bool,
>(
    c: &AdamConsts<T>,
    p: &mut [T],
    g: &[T],
    m: &mut [T],
    v: &mut [T],
    vmax: &mut [T],
) {
    // Equal lengths up front, so the loop runs without bounds checks.
    let n = p.len();
    let (g, m, v) = (&g[..n], &mut m[..n], &mut v[..n]);
    let vmax = if AMSGRAD { &mut vmax[..n] } else { vmax };
    for k in 0..n {
        let mut d = if MAXIMIZE { -g[k] } else { g[k] };
        if DECOUPLED {
            p[k] = p[k] * c.decay;
        }
        if L2 {
            d = d + c.wd * p[k];
        }
        m[k] = lerp(m[k], d, c.w1);
        v[k] = v[k] * c.b2 + c.c2 * d * d;
        let second = if AMSGRAD {
            vmax[k] = maximum(vmax[k], v[k]);
            vmax[k]
        } else {
            v[k]
        };
        let denom = second.sqrt() / c.bc2s + c.eps;
        p[k] = p[k] + c.neg_step * m[k] / denom;
    }
}

/// One RMSprop step over a parameter group (torch.optim.RMSprop):
///
/// ```text
/// g = -grad if maximize else grad;  g += weight_decay * p
/// s = alpha * s + (1 - alpha) * g * g
/// avg = sqrt(s - ga * ga) with ga = lerp(ga, g, 1 - alpha) (centered), else sqrt(s);  avg += eps
/// momentum > 0: b = momentum * b + g / avg;  p -= lr * b    else: p -= lr * g / avg
/// ```
///
/// `momentum_buffers` is needed when `momentum > 0`, `grad_avgs` when `centered` (else empty).
pub fn rmsprop_step(
    params: &[Tensor],
    grads: &[Tensor],
    square_avgs: &[Tensor],
    momentum_buffers: &[Tensor],
    grad_avgs: &[Tensor],
    opts: &RmspropOptions,
) -> Result<()> {
    let n = params.len();
    check_len("params and grads", n, grads.len())?;
    check_len("params and square_avgs", n, square_avgs.len())?;
    let use_mom = opts.momentum > 0.0;
    if use_mom {
        check_len("params and momentum_buffers", n, momentum_buffers.len())?;
    }
    if opts.centered {
        check_len("params and grad_avgs", n, grad_avgs.len())?;
    }
    let states_of = |i: usize| -> Vec<(&str, &Tensor)> {
        let mut v = vec![("square_avg", &square_avgs[i])];
        if use_mom {
            v.push(("momentum_buffer", &momentum_buffers[i]));
        }
        if opts.centered {
            v.push(("grad_avg", &grad_avgs[i]));
        }
        v
    };
    for (i, (p, g)) in params.iter().zip(grads).enumerate() {
        check_param(i, p, g, &states_of(i))?;
    }
    fn kernel<T: Float>(o: &RmspropOptions) -> impl Fn(&mut [T], &[T], [&mut [T]; 3]) + Sync + '_ {
        move |p, g, [s, x, y]| rmsprop_chunk(o, p, g, s, x, y)
    }
    for (i, (p, g)) in params.iter().zip(grads).enumerate() {
        let states: Vec<&Tensor> = states_of(i).into_iter().map(|(_, t)| t).collect();
        match p.dtype() {
            h if h.is_half() => update_half(p, g, &states, &kernel::<f32>(opts))?,
            DType::Float32 => update_one::<f32>(p, g, &states, &kernel::<f32>(opts))?,
            _ => update_one::<f64>(p, g, &states, &kernel::<f64>(opts))?,
        }
    }
    Ok(())
}

/// One Adagrad step over a parameter group (torch.optim.Adagrad):
///
/// ```text
/// g = -grad if maximize else grad;  g += weight_decay * p
/// clr = lr / (1 + (step - 1) * lr_decay)
/// sum += g * g;  p -= clr * g / (sqrt(sum) + eps)
/// ```
pub fn adagrad_step(
    params: &[Tensor],
    grads: &[Tensor],
    state_sums: &[Tensor],
    opts: &AdagradOptions,
) -> Result<()> {
    check_group(params, grads, [("state_sums", "sum", state_sums)])?;
    let clr = opts.lr / (1.0 + (opts.step - 1.0) * opts.lr_decay);
    fn kernel<T: Float>(
        o: &AdagradOptions,
        clr: f64,
    ) -> impl Fn(&mut [T], &[T], [&mut [T]; 3]) + Sync + '_ {
        move |p, g, [s, _, _]| adagrad_chunk(o, clr, p, g, s)
    }
    for (i, (p, g)) in params.iter().zip(grads).enumerate() {
        let states = [&state_sums[i]];
        match p.dtype() {
            h if h.is_half() => update_half(p, g, &states, &kernel::<f32>(opts, clr))?,
            DType::Float32 => update_one::<f32>(p, g, &states, &kernel::<f32>(opts, clr))?,
            _ => update_one::<f64>(p, g, &states, &kernel::<f64>(opts, clr))?,
        }
    }
    Ok(())
}

/// Options of [`nadam_step`] (torch.optim.NAdam).
#[derive(Clone, Debug)]
pub struct NadamOptions {
    /// The step number after this step (1 on the first step), as torch's `state['step']`.
    pub step: f64,
    /// Learning rate.
    pub lr: f64,
    /// Decay of the first moment.
    pub beta1: f64,
    /// Decay of the second moment.
    pub beta2: f64,
    /// Added to the denominator.
    pub eps: f64,
    /// Weight decay (L2 penalty, or decoupled decay with `decoupled_weight_decay`).
    pub weight_decay: f64,
    /// Momentum decay (psi): the momentum of step t is `beta1 * (1 - 0.5 * 0.96^(t * psi))`.
    pub momentum_decay: f64,
    /// Decay the parameter by `1 - lr * weight_decay` instead of adding to the gradient.
    pub decoupled_weight_decay: bool,
    /// Maximize the objective instead of minimizing it.
    pub maximize: bool,
}

/// Options of [`radam_step`] (torch.optim.RAdam).
#[derive(Clone, Debug)]
pub struct RadamOptions {
    /// The step number after this step (1 on the first step), as torch's `state['step']`.
    pub step: f64,
    /// Learning rate.
    pub lr: f64,
    /// Decay of the first moment.
    pub beta1: f64,
    /// Decay of the second moment.
    pub beta2: f64,
    /// Added to the denominator.
    pub eps: f64,
    /// Weight decay (L2 penalty, or decoupled decay with `decoupled_weight_decay`).
    pub weight_decay: f64,
    /// Decay the parameter by `1 - lr * weight_decay` instead of adding to the gradient.
    pub decoupled_weight_decay: bool,
    /// Maximize the objective instead of minimizing it.
    pub maximize: bool,
}

/// Options of [`adamax_step`] (torch.optim.Adamax).
#[derive(Clone, Debug)]
pub struct AdamaxOptions {
    /// The step number after this step (1 on the first step), as torch's `state['step']`.
    pub step: f64,
    /// Learning rate.
    pub lr: f64,
    /// Decay of the first moment.
    pub beta1: f64,
    /// Decay of the infinity norm.
    pub beta2: f64,
    /// Added to the infinity norm's new term.
    pub eps: f64,
    /// L2 penalty.
    pub weight_decay: f64,
    /// Maximize the objective instead of minimizing it.
    pub maximize: bool,
}

/// Options of [`rprop_step`] (torch.optim.Rprop's `etas` and `step_sizes`).
#[derive(Clone, Debug)]
pub struct RpropOptions {
    /// Step size factor when the gradient changed sign (`etas[0]`).
    pub etaminus: f64,
    /// Step size factor when the gradient kept its sign (`etas[1]`).
    pub etaplus: f64,
    /// Smallest step size (`step_sizes[0]`).
    pub step_size_min: f64,
    /// Largest step size (`step_sizes[1]`).
    pub step_size_max: f64,
    /// Maximize the objective instead of minimizing it.
    pub maximize: bool,
}

/// Options of [`asgd_step`] (torch.optim.ASGD).
#[derive(Clone, Debug)]
pub struct AsgdOptions {
    /// The step number after this step (1 on the first step), as torch's `state['step']`.
    pub step: f64,
    /// Learning rate (the next `eta` is computed from it).
    pub lr: f64,
    /// Decay term.
    pub lambd: f64,
    /// Power of the `eta` update.
    pub alpha: f64,
    /// The step after which averaging starts.
    pub t0: f64,
    /// L2 penalty.
    pub weight_decay: f64,
    /// Maximize the objective instead of minimizing it.
    pub maximize: bool,
}

/// Options of [`adafactor_step`] (torch.optim.Adafactor).
#[derive(Clone, Debug)]
pub struct AdafactorOptions {
    /// The step number after this step (1 on the first step), as torch's `state['step']`.
    pub step: f64,
    /// Learning rate: the largest relative step size, and the weight decay's factor.
    pub lr: f64,
    /// Decay rate of beta2 (`1 - beta2_t = step^beta2_decay`), <= 0.
    pub beta2_decay: f64,
    /// Floor of the variance estimate's square root (`None`: the machine epsilon of the first
    /// parameter's dtype, which torch then keeps for the whole group).
    pub eps1: Option<f64>,
    /// Floor of the parameter's root mean square in the step size.
    pub eps2: f64,
    /// Clipping threshold of the update's root mean square.
    pub d: f64,
    /// Decoupled weight decay: the parameter is scaled by `1 - lr * weight_decay`.
    pub weight_decay: f64,
    /// Maximize the objective instead of minimizing it.
    pub maximize: bool,
}

/// A one-element floating state tensor of parameter `i` (NAdam's `mu_product`, ASGD's `eta`
/// and `mu`), as torch's `.item()`.
fn scalar_state(i: usize, name: &str, t: &Tensor) -> Result<f64> {
    if t.numel() != 1 || !t.dtype().is_float() {
        return Err(Error::runtime(format!(
            "the {name} of parameter {i} must be a one-element floating point tensor, got shape \
             {} and dtype {}",
            fmt_shape(t.shape()),
            scalar_type_name(t.dtype())
        )));
    }
    t.item_f64()
}

/// Write `value` into a one-element state tensor (rounded to its dtype), outside autograd.
fn set_scalar_state(t: &Tensor, value: f64) -> Result<()> {
    let _no_grad = crate::tensor::grad_mode::GradModeGuard::new(false);
    t.fill_(value)
}

/// `kernel` over one parameter in its float type (float32 for float16/bfloat16, see
/// [`update_half`]).
fn update_any(
    p: &Tensor,
    g: &Tensor,
    states: &[&Tensor],
    k32: &Kernel<'_, f32>,
    k64: &Kernel<'_, f64>,
) -> Result<()> {
    match p.dtype() {
        h if h.is_half() => update_half(p, g, states, k32),
        DType::Float32 => update_one::<f32>(p, g, states, k32),
        _ => update_one::<f64>(p, g, states, k64),
    }
}

/// One NAdam step over a parameter group (torch.optim.NAdam):
///
/// ```text
/// g = -grad if maximize else grad
/// if weight_decay != 0: p *= 1 - lr * weight_decay (decoupled)  or  g += weight_decay * p
/// mu = beta1 * (1 - 0.5 * 0.96^(step * momentum_decay)), mu_next likewise at step + 1
/// mu_product *= mu  (in the state tensor's dtype)
/// m = lerp(m, g, 1 - beta1);  v = beta2 * v + (1 - beta2) * g * g
/// denom = sqrt(v / (1 - beta2^step)) + eps
/// p += -lr * (1 - mu) / (1 - mu_product) * g / denom
/// p += -lr * mu_next / (1 - mu_product * mu_next) * m / denom
/// ```
///
/// `mu_products` holds each parameter's one-element `mu_product` state, updated in place.
pub fn nadam_step(
    params: &[Tensor],
    grads: &[Tensor],
    exp_avgs: &[Tensor],
    exp_avg_sqs: &[Tensor],
    mu_products: &[Tensor],
    opts: &NadamOptions,
) -> Result<()> {
    let n = params.len();
    check_group(
        params,
        grads,
        [
            ("exp_avgs", "exp_avg", exp_avgs),
            ("exp_avg_sqs", "exp_avg_sq", exp_avg_sqs),
        ],
    )?;
    check_scalar_states(n, [("mu_products", "mu_product", mu_products)])?;
    let o = opts;
    let mu = o.beta1 * (1.0 - 0.5 * 0.96f64.powf(o.step * o.momentum_decay));
    let mu_next = o.beta1 * (1.0 - 0.5 * 0.96f64.powf((o.step + 1.0) * o.momentum_decay));
    let bc2 = 1.0 - o.beta2.powf(o.step);
    fn kernel<T: Float>(
        o: &NadamOptions,
        c: [f64; 3],
    ) -> impl Fn(&mut [T], &[T], [&mut [T]; 3]) + Sync + '_ {
        move |p, g, [m, v, _]| nadam_chunk(o, c, p, g, m, v)
    }
    for (i, (p, g)) in params.iter().zip(grads).enumerate() {
        // torch multiplies the (float32) state tensor in place, then reads it back.
        let mp_t = &mu_products[i];
        let old = scalar_state(i, "mu_product", mp_t)?;
        let mp = match mp_t.dtype() {
            DType::Float64 => old * mu,
            _ => ((old as f32) * (mu as f32)) as f64,
        };
        set_scalar_state(mp_t, mp)?;
        let mp = scalar_state(i, "mu_product", mp_t)?;
        let c = [
            -o.lr * (1.0 - mu) / (1.0 - mp),
            (-o.lr * mu_next) / (1.0 - mp * mu_next),
            bc2,
        ];
        let states = [&exp_avgs[i], &exp_avg_sqs[i]];
        update_any(p, g, &states, &kernel::<f32>(o, c), &kernel::<f64>(o, c))?;
    }
    Ok(())
}

/// The first half of a NAdam or RAdam element update: the sign for `maximize`, torch's weight
/// decay (the parameter decayed when decoupled, the gradient given an L2 term otherwise) and the
/// two moments `m = lerp(m, g, 1 - beta1)`, `v = beta2 v + (1 - beta2) g²`.
struct Moments<T> {
    decay: T,
    wd: T,
    w1: T,
    b2: T,
    c2: T,
    decoupled: bool,
    l2: bool,
    maximize: bool,
}

impl<T: Float> Moments<T> {
    fn new(
        lr: f64,
        weight_decay: f64,
        decoupled: bool,
        [beta1, beta2]: [f64; 2],
        maximize: bool,
    ) -> Self {
        Moments {
            decay: T::of(1.0 - lr * weight_decay),
            wd: T::of(weight_decay),
            w1: T::of(1.0 - beta1),
            b2: T::of(beta2),
            c2: T::of(1.0 - beta2),
            decoupled: weight_decay != 0.0 && decoupled,
            l2: weight_decay != 0.0 && !decoupled,
            maximize,
        }
    }

    /// Update `p` (decoupled decay), `m` and `v` from the gradient `g`; returns the gradient
    /// the moments saw.
    #[inline(always)]
    fn update(&self, p: &mut T, g: T, m: &mut T, v: &mut T) -> T {
        let mut d = if self.maximize { -g } else { g };
        if self.decoupled {
            *p = *p * self.decay;
        }
        if self.l2 {
            d = d + self.wd * *p;
        }
        *m = lerp(*m, d, self.w1);
        *v = *v * self.b2 + self.c2 * d * d;
        d
    }
}

/// One chunk of [`nadam_step`]; `c` is (gradient coefficient, momentum coefficient, 1 -
/// beta2^step).
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq+avx2+avx+fma",
    "x86_64+avx2+avx+fma",
    "aarch64+neon"
))]
fn nadam_chunk<T: Float>(
    o: &NadamOptions,
    c: [f64; 3],
    p: &mut [T],
    g: &[T],
    m: &mut [T],
    v: &mut [T],
) {
    let moments = Moments::new(
        o.lr,
        o.weight_decay,
        o.decoupled_weight_decay,
        [o.beta1, o.beta2],
        o.maximize,
    );
    let (cg, cm, bc2, eps) = (T::of(c[0]), T::of(c[1]), T::of(c[2]), T::of(o.eps));
    let n = p.len();
    let (g, m, v) = (&g[..n], &mut m[..n], &mut v[..n]);
    for k in 0..n {
        let d = moments.update(&mut p[k], g[k], &mut m[k], &mut v[k]);
        let denom = (v[k] / bc2).sqrt() + eps;
        p[k] = p[k] + cg * d / denom;
        p[k] = p[k] + cm * m[k] / denom;
    }
}

/// One RAdam step over a parameter group (torch.optim.RAdam):
///
/// ```text
/// g = -grad if maximize else grad
/// if weight_decay != 0: p *= 1 - lr * weight_decay (decoupled)  or  g += weight_decay * p
/// m = lerp(m, g, 1 - beta1);  v = beta2 * v + (1 - beta2) * g * g
/// rho_inf = 2 / (1 - beta2) - 1;  rho = rho_inf - 2 * step * beta2^step / (1 - beta2^step)
/// rho > 5: rect = sqrt((rho - 4)(rho - 2) rho_inf / ((rho_inf - 4)(rho_inf - 2) rho))
///          p -= m / (1 - beta1^step) * lr * (1 / (sqrt(v) + eps) * sqrt(1 - beta2^step)) * rect
/// else:    p -= m / (1 - beta1^step) * lr
/// ```
pub fn radam_step(
    params: &[Tensor],
    grads: &[Tensor],
    exp_avgs: &[Tensor],
    exp_avg_sqs: &[Tensor],
    opts: &RadamOptions,
) -> Result<()> {
    check_group(
        params,
        grads,
        [
            ("exp_avgs", "exp_avg", exp_avgs),
            ("exp_avg_sqs", "exp_avg_sq", exp_avg_sqs),
        ],
    )?;
    let o = opts;
    let bc1 = 1.0 - o.beta1.powf(o.step);
    let bc2 = 1.0 - o.beta2.powf(o.step);
    let rho_inf = 2.0 / (1.0 - o.beta2) - 1.0;
    let rho = rho_inf - 2.0 * o.step * o.beta2.powf(o.step) / bc2;
    // Without rectification the update is plain momentum SGD (torch's `rho_t > 5` test).
    let rect = (rho > 5.0).then(|| {
        ((rho - 4.0) * (rho - 2.0) * rho_inf / ((rho_inf - 4.0) * (rho_inf - 2.0) * rho)).powf(0.5)
    });
    let c = RadamConsts {
        bc1,
        bc2_sqrt: bc2.powf(0.5),
        rect,
    };
    fn kernel<'a, T: Float>(
        o: &'a RadamOptions,
        c: &'a RadamConsts,
    ) -> impl Fn(&mut [T], &[T], [&mut [T]; 3]) + Sync + 'a {
        move |p, g, [m, v, _]| radam_chunk(o, c, p, g, m, v)
    }
    for (i, (p, g)) in params.iter().zip(grads).enumerate() {
        let states = [&exp_avgs[i], &exp_avg_sqs[i]];
        update_any(p, g, &states, &kernel::<f32>(o, &c), &kernel::<f64>(o, &c))?;
    }
    Ok(())
}

/// RAdam's per-step scalars.
struct RadamConsts {
    bc1: f64,
    bc2_sqrt: f64,
    /// The variance rectification term, `None` while `rho_t <= 5`.
    rect: Option<f64>,
}

/// One chunk of [`radam_step`].
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq+avx2+avx+fma",
    "x86_64+avx2+avx+fma",
    "aarch64+neon"
))]
fn radam_chunk<T: Float>(
    o: &RadamOptions,
    c: &RadamConsts,
    p: &mut [T],
    g: &[T],
    m: &mut [T],
    v: &mut [T],
) {
    let moments = Moments::new(
        o.lr,
        o.weight_decay,
        o.decoupled_weight_decay,
        [o.beta1, o.beta2],
        o.maximize,
    );
    let (bc1, bc2s, lr, eps) = (T::of(c.bc1), T::of(c.bc2_sqrt), T::of(o.lr), T::of(o.eps));
    let rect = c.rect.map(T::of);
    let n = p.len();
    let (g, m, v) = (&g[..n], &mut m[..n], &mut v[..n]);
    for k in 0..n {
        moments.update(&mut p[k], g[k], &mut m[k], &mut v[k]);
        let corrected = m[k] / bc1 * lr;
        // torch: `scalar / tensor` is `tensor.reciprocal() * scalar`.
        let delta = match rect {
            Some(r) => corrected * (T::of(1.0) / (v[k].sqrt() + eps) * bc2s) * r,
            None => corrected,
        };
        p[k] = p[k] - delta;
    }
}

/// One Adamax step over a parameter group (torch.optim.Adamax):
///
/// ```text
/// g = -grad if maximize else grad;  g += weight_decay * p
/// m = lerp(m, g, 1 - beta1);  u = max(beta2 * u, |g| + eps)
/// p -= lr / (1 - beta1^step) * m / u
/// ```
pub fn adamax_step(
    params: &[Tensor],
    grads: &[Tensor],
    exp_avgs: &[Tensor],
    exp_infs: &[Tensor],
    opts: &AdamaxOptions,
) -> Result<()> {
    check_group(
        params,
        grads,
        [
            ("exp_avgs", "exp_avg", exp_avgs),
            ("exp_infs", "exp_inf", exp_infs),
        ],
    )?;
    let clr = opts.lr / (1.0 - opts.beta1.powf(opts.step));
    fn kernel<T: Float>(
        o: &AdamaxOptions,
        clr: f64,
    ) -> impl Fn(&mut [T], &[T], [&mut [T]; 3]) + Sync + '_ {
        move |p, g, [m, u, _]| adamax_chunk(o, clr, p, g, m, u)
    }
    for (i, (p, g)) in params.iter().zip(grads).enumerate() {
        let states = [&exp_avgs[i], &exp_infs[i]];
        update_any(
            p,
            g,
            &states,
            &kernel::<f32>(opts, clr),
            &kernel::<f64>(opts, clr),
        )?;
    }
    Ok(())
}

/// One chunk of [`adamax_step`].
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq+avx2+avx+fma",
    "x86_64+avx2+avx+fma",
    "aarch64+neon"
))]
fn adamax_chunk<T: Float>(
    o: &AdamaxOptions,
    clr: f64,
    p: &mut [T],
    g: &[T],
    m: &mut [T],
    u: &mut [T],
) {
    let (wd, w1, b2, eps, neg) = (
        T::of(o.weight_decay),
        T::of(1.0 - o.beta1),
        T::of(o.beta2),
        T::of(o.eps),
        T::of(-clr),
    );
    let n = p.len();
    let (g, m, u) = (&g[..n], &mut m[..n], &mut u[..n]);
    for k in 0..n {
        let mut d = if o.maximize { -g[k] } else { g[k] };
        if o.weight_decay != 0.0 {
            d = d + wd * p[k];
        }
        m[k] = lerp(m[k], d, w1);
        u[k] = maximum(u[k] * b2, d.abs() + eps);
        p[k] = p[k] + neg * m[k] / u[k];
    }
}

/// torch's `sign` (0 for zero and NaN).
#[inline]
fn sign<T: Float>(x: T) -> T {
    let zero = T::of(0.0);
    if x > zero {
        T::of(1.0)
    } else if x < zero {
        T::of(-1.0)
    } else {
        zero
    }
}

/// One Rprop step over a parameter group (torch.optim.Rprop):
///
/// ```text
/// g = -grad if maximize else grad
/// s = sign(g * prev);  f = etaplus if s > 0, etaminus if s < 0, else 1
/// step_size = clamp(step_size * f, step_size_min, step_size_max)
/// if s < 0: g = 0
/// p -= sign(g) * step_size;  prev = g
/// ```
pub fn rprop_step(
    params: &[Tensor],
    grads: &[Tensor],
    prevs: &[Tensor],
    step_sizes: &[Tensor],
    opts: &RpropOptions,
) -> Result<()> {
    check_group(
        params,
        grads,
        [
            ("prevs", "prev", prevs),
            ("step_sizes", "step_size", step_sizes),
        ],
    )?;
    fn kernel<T: Float>(o: &RpropOptions) -> impl Fn(&mut [T], &[T], [&mut [T]; 3]) + Sync + '_ {
        move |p, g, [prev, ss, _]| rprop_chunk(o, p, g, prev, ss)
    }
    for (i, (p, g)) in params.iter().zip(grads).enumerate() {
        let states = [&prevs[i], &step_sizes[i]];
        update_any(p, g, &states, &kernel::<f32>(opts), &kernel::<f64>(opts))?;
    }
    Ok(())
}

/// One chunk of [`rprop_step`].
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq+avx2+avx+fma",
    "x86_64+avx2+avx+fma",
    "aarch64+neon"
))]
fn rprop_chunk<T: Float>(o: &RpropOptions, p: &mut [T], g: &[T], prev: &mut [T], ss: &mut [T]) {
    let (minus, plus) = (T::of(o.etaminus), T::of(o.etaplus));
    let (lo, hi) = (T::of(o.step_size_min), T::of(o.step_size_max));
    let zero = T::of(0.0);
    let n = p.len();
    let (g, prev, ss) = (&g[..n], &mut prev[..n], &mut ss[..n]);
    for k in 0..n {
        let mut d = if o.maximize { -g[k] } else { g[k] };
        let s = sign(d * prev[k]);
        let f = if s > zero {
            plus
        } else if s < zero {
            minus
        } else {
            T::of(1.0)
        };
        // torch's clamp: NaN stays NaN.
        let x = ss[k] * f;
        ss[k] = if x < lo {
            lo
        } else if x > hi {
            hi
        } else {
            x
        };
        if s < zero {
            d = zero;
        }
        p[k] = p[k] + T::of(-1.0) * sign(d) * ss[k];
        prev[k] = d;
    }
}

/// One ASGD step over a parameter group (torch.optim.ASGD):
///
/// ```text
/// g = -grad if maximize else grad;  g += weight_decay * p
/// p *= 1 - lambd * eta;  p -= eta * g
/// ax = p if mu == 1 else ax + (p - ax) * mu
/// eta = lr / (1 + lambd * lr * step)^alpha;  mu = 1 / max(1, step - t0)
/// ```
///
/// `etas` and `mus` hold each parameter's one-element `eta` and `mu` states: the update reads
/// them, then stores the values of the next step in them.
pub fn asgd_step(
    params: &[Tensor],
    grads: &[Tensor],
    axs: &[Tensor],
    etas: &[Tensor],
    mus: &[Tensor],
    opts: &AsgdOptions,
) -> Result<()> {
    let n = params.len();
    check_group(params, grads, [("axs", "ax", axs)])?;
    check_scalar_states(n, [("etas", "eta", etas), ("mus", "mu", mus)])?;
    let o = opts;
    fn kernel<T: Float>(
        o: &AsgdOptions,
        eta: f64,
        mu: f64,
    ) -> impl Fn(&mut [T], &[T], [&mut [T]; 3]) + Sync + '_ {
        move |p, g, [ax, _, _]| asgd_chunk(o, eta, mu, p, g, ax)
    }
    let next_eta = o.lr / (1.0 + o.lambd * o.lr * o.step).powf(o.alpha);
    let next_mu = 1.0 / f64::max(1.0, o.step - o.t0);
    for (i, (p, g)) in params.iter().zip(grads).enumerate() {
        let eta = scalar_state(i, "eta", &etas[i])?;
        let mu = scalar_state(i, "mu", &mus[i])?;
        let states = [&axs[i]];
        update_any(
            p,
            g,
            &states,
            &kernel::<f32>(o, eta, mu),
            &kernel::<f64>(o, eta, mu),
        )?;
        set_scalar_state(&etas[i], next_eta)?;
        set_scalar_state(&mus[i], next_mu)?;
    }
    Ok(())
}

/// One chunk of [`asgd_step`] with this parameter's `eta` and `mu`.
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq+avx2+avx+fma",
    "x86_64+avx2+avx+fma",
    "aarch64+neon"
))]
fn asgd_chunk<T: Float>(o: &AsgdOptions, eta: f64, mu: f64, p: &mut [T], g: &[T], ax: &mut [T]) {
    let (wd, decay, neg_eta, mu_t) = (
        T::of(o.weight_decay),
        T::of(1.0 - o.lambd * eta),
        T::of(-eta),
        T::of(mu),
    );
    let n = p.len();
    let (g, ax) = (&g[..n], &mut ax[..n]);
    for k in 0..n {
        let mut d = if o.maximize { -g[k] } else { g[k] };
        if o.weight_decay != 0.0 {
            d = d + wd * p[k];
        }
        p[k] = p[k] * decay;
        p[k] = p[k] + neg_eta * d;
        // torch copies the parameter while mu is 1 (before t0), instead of averaging.
        ax[k] = if mu != 1.0 {
            ax[k] + (p[k] - ax[k]) * mu_t
        } else {
            p[k]
        };
    }
}

/// torch.finfo(dtype).eps, Adafactor's default `eps1`.
fn machine_eps(d: DType) -> f64 {
    match d {
        DType::Float16 => 2f64.powi(-10),
        DType::BFloat16 => 2f64.powi(-7),
        DType::Float32 => f32::EPSILON as f64,
        _ => f64::EPSILON,
    }
}

/// Elements per block of [`block_sum`]: fixed, so the sums do not depend on the thread count.
const SUM_BLOCK: usize = 1 << 14;

/// The sum of `f(k)` over `0..n` in float64: fixed blocks summed on the pool, then added in order.
fn block_sum(n: usize, f: impl Fn(usize) -> f64 + Sync) -> f64 {
    let blocks = n.div_ceil(SUM_BLOCK);
    let block = |b: usize| -> f64 { (b * SUM_BLOCK..n.min((b + 1) * SUM_BLOCK)).map(&f).sum() };
    let mut sums = vec![0.0f64; blocks];
    let helpers = if n >= PAR_MIN_ELEMENTS {
        parallel::helpers()
    } else {
        0
    };
    let ptr = SendPtr(sums.as_mut_ptr());
    parallel::share_work(helpers, blocks, &|b| {
        // SAFETY: each block index runs once and writes only its own element of `sums`, which
        // outlives `share_work`.
        unsafe { *ptr.get().add(b) = block(b) };
    });
    sums.iter().sum()
}

/// Check one of Adafactor's factored statistics of parameter `i` against the shape it needs.
fn check_factor(i: usize, name: &str, s: &Tensor, p: &Tensor, shape: &[usize]) -> Result<()> {
    if s.shape() != shape || s.dtype() != p.dtype() || !s.is_contiguous() {
        return Err(Error::runtime(format!(
            "the {name} of parameter {i} must be a contiguous tensor of shape {} and dtype {}, \
             got shape {} and dtype {}",
            fmt_shape(shape),
            scalar_type_name(p.dtype()),
            fmt_shape(s.shape()),
            scalar_type_name(s.dtype())
        )));
    }
    if std::sync::Arc::ptr_eq(s.storage(), p.storage()) {
        return Err(Error::runtime(format!(
            "the {name} of parameter {i} shares memory with the parameter"
        )));
    }
    Ok(())
}

/// One Adafactor step over a parameter group (torch.optim.Adafactor):
///
/// ```text
/// g = -grad if maximize else grad
/// w = step^beta2_decay;  rho = min(lr, 1 / sqrt(step))
/// alpha = max(eps2, ||p|| / sqrt(numel)) * rho;  p *= 1 - lr * weight_decay
/// dim >= 2 (over the last two dims, batched over the others):
///     row_var = lerp(row_var, mean(g * g, dim=-1), w);  col_var = lerp(col_var, mean(g * g, dim=-2), w)
///     v = row_var @ col_var / max(mean(row_var, dim=-2), eps1)
/// else: v = variance = lerp(variance, g * g, w)
/// u = g / sqrt(max(v, eps1^2));  p -= alpha / max(1, ||u|| / (sqrt(numel) * d)) * u
/// ```
///
/// The k-th parameter of two or more dimensions takes `row_vars[k]` (shape of the parameter with
/// the last dimension 1) and `col_vars[k]` (second-to-last dimension 1); the k-th other parameter
/// takes `variances[k]`. Norms and means are accumulated in float64.
pub fn adafactor_step(
    params: &[Tensor],
    grads: &[Tensor],
    row_vars: &[Tensor],
    col_vars: &[Tensor],
    variances: &[Tensor],
    opts: &AdafactorOptions,
) -> Result<()> {
    let n = params.len();
    check_len("params and grads", n, grads.len())?;
    let factored = params.iter().filter(|p| p.dim() > 1).count();
    check_len("matrix params and row_vars", factored, row_vars.len())?;
    check_len("matrix params and col_vars", factored, col_vars.len())?;
    check_len("vector params and variances", n - factored, variances.len())?;
    let mut stats: Vec<Vec<&Tensor>> = Vec::with_capacity(n);
    let (mut f, mut v) = (0, 0);
    for (i, (p, g)) in params.iter().zip(grads).enumerate() {
        if p.dim() > 1 {
            check_param(i, p, g, &[])?;
            let (r, c) = (&row_vars[f], &col_vars[f]);
            f += 1;
            let nd = p.dim();
            let (mut rs, mut cs) = (p.shape().to_vec(), p.shape().to_vec());
            rs[nd - 1] = 1;
            cs[nd - 2] = 1;
            check_factor(i, "row_var", r, p, &rs)?;
            check_factor(i, "col_var", c, p, &cs)?;
            if std::sync::Arc::ptr_eq(r.storage(), c.storage()) {
                return Err(Error::runtime(format!(
                    "the row_var and col_var of parameter {i} share memory"
                )));
            }
            stats.push(vec![r, c]);
        } else {
            check_param(i, p, g, &[("variance", &variances[v])])?;
            stats.push(vec![&variances[v]]);
            v += 1;
        }
    }
    // torch resolves a missing eps1 at the first parameter and keeps it for the rest.
    let mut eps1 = opts.eps1;
    for ((p, g), st) in params.iter().zip(grads).zip(&stats) {
        let e = *eps1.get_or_insert_with(|| machine_eps(p.dtype()));
        match p.dtype() {
            h if h.is_half() => {
                use crate::kernels::copy::cast;
                let (p32, g32) = (cast(p, DType::Float32)?, cast(g, DType::Float32)?);
                let s32 = st
                    .iter()
                    .map(|s| cast(s, DType::Float32))
                    .collect::<Result<Vec<_>>>()?;
                adafactor_one::<f32>(&p32, &g32, &s32.iter().collect::<Vec<_>>(), opts, e)?;
                let _no_grad = crate::tensor::grad_mode::GradModeGuard::new(false);
                p.copy_(&p32)?;
                for (s, w) in st.iter().zip(&s32) {
                    s.copy_(w)?;
                }
            }
            DType::Float32 => adafactor_one::<f32>(p, g, st, opts, e)?,
            _ => adafactor_one::<f64>(p, g, st, opts, e)?,
        }
    }
    Ok(())
}

/// [`adafactor_step`] for one checked parameter; `stats` is `[row_var, col_var]` or
/// `[variance]`.
fn adafactor_one<T: Float>(
    p: &Tensor,
    g: &Tensor,
    stats: &[&Tensor],
    o: &AdafactorOptions,
    eps1: f64,
) -> Result<()> {
    let n = p.numel();
    if n == 0 {
        return Ok(());
    }
    // An owned copy: the gradient is read three times, and may alias what is written.
    let mut grad: Vec<T> = g.to_vec::<T>()?;
    if o.maximize {
        grad.iter_mut().for_each(|x| *x = -*x);
    }
    let shape = p.shape().to_vec();
    let mut all = vec![p];
    all.extend_from_slice(stats);
    let mut guards: Vec<_> = all.iter().map(|t| t.storage().write()).collect();
    let mut slices: Vec<&mut [T]> = Vec::with_capacity(all.len());
    for (guard, t) in guards.iter_mut().zip(&all) {
        let data =
            T::data_mut(guard).ok_or_else(|| Error::runtime("internal error: state dtype"))?;
        let off = t.layout().offset;
        slices.push(
            data.as_mut_slice()
                .get_mut(off..off + t.numel())
                .ok_or_else(|| Error::runtime("internal error: state out of its storage"))?,
        );
    }
    let w = T::of(o.step.powf(o.beta2_decay));
    let rho = o.lr.min(1.0 / o.step.powf(0.5));
    let eps1sq = T::of(eps1 * eps1);
    let one = T::of(1.0);
    let sq = |x: T| x.f64() * x.f64();
    let grad = &grad[..];
    match slices.as_mut_slice() {
        [ps, rv, cv] => {
            let cols = shape[shape.len() - 1];
            let rows = shape[shape.len() - 2];
            let batches = n / (rows * cols);
            for (q, r) in rv.iter_mut().enumerate() {
                let s: f64 = grad[q * cols..(q + 1) * cols].iter().map(|&x| sq(x)).sum();
                *r = lerp(*r, T::of(s / cols as f64), w);
            }
            let mut col_sums = vec![0.0f64; batches * cols];
            for (q, row) in grad.chunks_exact(cols).enumerate() {
                let acc = &mut col_sums[(q / rows) * cols..][..cols];
                for (a, &x) in acc.iter_mut().zip(row) {
                    *a += sq(x);
                }
            }
            for (c, s) in cv.iter_mut().zip(&col_sums) {
                *c = lerp(*c, T::of(s / rows as f64), w);
            }
            let (rv, cv): (&[T], &[T]) = (rv, cv);
            let den: Vec<T> = rv
                .chunks_exact(rows)
                .map(|r| {
                    let s: f64 = r.iter().map(|x| x.f64()).sum();
                    maximum(T::of(s / rows as f64), T::of(eps1))
                })
                .collect();
            let update = |k: usize| -> T {
                let q = k / cols;
                let b = q / rows;
                let v = rv[q] * cv[b * cols + k % cols] / den[b];
                one / maximum(v, eps1sq).sqrt() * grad[k]
            };
            adafactor_apply(ps, o, rho, update);
        }
        [ps, var] => {
            for (v, &x) in var.iter_mut().zip(grad) {
                *v = lerp(*v, x * x, w);
            }
            let var: &[T] = var;
            let update = |k: usize| -> T { one / maximum(var[k], eps1sq).sqrt() * grad[k] };
            adafactor_apply(ps, o, rho, update);
        }
        _ => return Err(Error::runtime("internal error: adafactor statistics")),
    }
    drop(slices);
    drop(guards);
    for t in all {
        t.storage().bump_version();
    }
    Ok(())
}

/// Adafactor's parameter update from the unscaled update `u(k)` of each element: the step size
/// from the parameter's norm (before weight decay), the clipping from the update's norm.
fn adafactor_apply<T: Float>(
    ps: &mut [T],
    o: &AdafactorOptions,
    rho: f64,
    u: impl Fn(usize) -> T + Sync,
) {
    let n = ps.len();
    let root_n = (n as f64).powf(0.5);
    // torch reads both norms with `.item()`: rounded to the parameter's dtype.
    let p_norm = {
        let pr: &[T] = ps;
        T::of(block_sum(n, |k| pr[k].f64() * pr[k].f64()).sqrt()).f64()
    };
    let rms = p_norm / root_n;
    let alpha = if rms > o.eps2 { rms } else { o.eps2 } * rho;
    let u_norm = T::of(block_sum(n, |k| u(k).f64() * u(k).f64()).sqrt()).f64();
    let ratio = u_norm / (root_n * o.d);
    let denom = if ratio > 1.0 { ratio } else { 1.0 };
    let (decay, coef) = (T::of(1.0 - o.lr * o.weight_decay), T::of(-alpha / denom));
    let ptr = SendPtr(ps.as_mut_ptr());
    for_chunks(n, &|start, len| {
        // SAFETY: the chunks are disjoint ranges of `ps`, which is borrowed mutably (and so
        // alive and unaliased) until `for_chunks` returns.
        let pc = unsafe { std::slice::from_raw_parts_mut(ptr.get().add(start), len) };
        for (j, x) in pc.iter_mut().enumerate() {
            let mut v = *x;
            if o.weight_decay != 0.0 {
                v = v * decay;
            }
            *x = v + coef * u(start + j);
        }
    });
}
