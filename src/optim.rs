//! Optimizer updates: torch's `SGD`, `Adam`/`AdamW`, `RMSprop` and `Adagrad` steps over a whole
//! parameter group in one call (torch's multi-tensor "foreach" path), with the arithmetic of
//! torch's single-tensor implementations (the formulas of the `torch.optim` docs).
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
    fn sqrt(self) -> Self;
    fn abs(self) -> Self;
}

impl Float for f32 {
    fn of(x: f64) -> Self {
        x as f32
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
    let n = params.len();
    check_len("params and grads", n, grads.len())?;
    check_len("params and state_sums", n, state_sums.len())?;
    for (i, (p, g)) in params.iter().zip(grads).enumerate() {
        check_param(i, p, g, &[("sum", &state_sums[i])])?;
    }
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
