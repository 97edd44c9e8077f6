//! Pointwise activations of `torch.nn.functional` (gelu, silu, mish, the elu family, softplus,
//! the hard* functions, leaky_relu, logsigmoid), glu and dropout.
//!
//! Each activation is one elementwise kernel and one node named as torch's. The formulas are
//! written once over f64 and generic in `Math`: float32 tensors run them on f64 lanes with
//! the branch-free vectorisable exp/erfc of `vmath` (then round once), float64 tensors with
//! std/libm. Exact gelu, silu, logsigmoid, softplus (beta 1) and the elu family (input scale 1)
//! on float32 run on float32 lanes instead (`vmath`). The backward is one fused pass `g * f'(x)` unless a graph of the backward
//! is being built; then `f'(x)` is written with differentiable ops, so double backward works.

use crate::error::{Error, Result};
use crate::graph::node::{needs_grad, record};
use crate::tensor::grad_mode::GradModeGuard;
use std::mem::MaybeUninit;

use multiversion::multiversion;

use crate::kernels::vmath::{
    elu_grad_slice, elu_slice, erfc_pos, exp_f64, fma, gelu_grad_slice, gelu_slice, glu_grad_slice,
    glu_slice, logsigmoid_grad_slice, logsigmoid_slice, silu_grad_slice, silu_slice,
    softplus_grad_slice, softplus_slice, EluF32, INV_FACTORIALS,
};
use crate::ops::elementwise::{
    collect_chunks, fusable, kernel_over_grad, map_with, zip_with, PAR_MIN_VMATH,
};
use crate::ops::nn::softmax::{fill_blocks, RowFloat};
use crate::tensor::{DType, Tensor};

/// The scalar functions the activation formulas need.
trait Math {
    /// e^x.
    fn exp(x: f64) -> f64;
    /// e^x - 1, accurate near 0.
    fn expm1(x: f64) -> f64;
    /// ln(1 + e) for e in [0, 1], accurate for tiny e.
    fn ln1p_unit(e: f64) -> f64;
    /// erfc(z) for any z.
    fn erfc(z: f64) -> f64;
}

/// float32 tensors: f64 lanes with branch-free kernels (relative error near 2^-27, below
/// float32's half ulp), so the loops vectorise; `F`: the target has fused multiply-add.
struct Fast<const F: bool>;
/// float64 tensors: std and libm.
struct Exact;

/// e^r - 1 = r (1 + r/2 + r²/6 + ...) for |r| <= 1/2: 1/k! for k = 13 down to 1.
const EXPM1_TAYLOR: &[f64] = INV_FACTORIALS.split_at(13).0;

impl<const F: bool> Math for Fast<F> {
    #[inline(always)]
    fn exp(x: f64) -> f64 {
        exp_f64::<F, false>(x.clamp(-700.0, 700.0))
    }
    #[inline(always)]
    fn expm1(x: f64) -> f64 {
        let mut p = EXPM1_TAYLOR[0];
        for &c in &EXPM1_TAYLOR[1..] {
            p = fma::<F>(p, x, c);
        }
        let small = x * p;
        let big = Self::exp(x) - 1.0;
        if x.abs() < 0.5 {
            small
        } else {
            big
        }
    }
    #[inline(always)]
    fn ln1p_unit(e: f64) -> f64 {
        // 2 atanh(s), s = e / (2 + e) <= 1/3: the series in s² to s^17 (relative error below
        // 2^-29, float32 needs 2^-25).
        let s = e / (2.0 + e);
        let z = s * s;
        let mut p = 2.0 / 17.0;
        for k in (0..8).rev() {
            p = fma::<F>(p, z, 2.0 / (2 * k + 1) as f64);
        }
        s * p
    }
    #[inline(always)]
    fn erfc(z: f64) -> f64 {
        let a = z.abs();
        let c = erfc_pos::<F>(a);
        if z < 0.0 {
            2.0 - c
        } else {
            c
        }
    }
}

impl Math for Exact {
    #[inline(always)]
    fn exp(x: f64) -> f64 {
        x.exp()
    }
    #[inline(always)]
    fn expm1(x: f64) -> f64 {
        x.exp_m1()
    }
    #[inline(always)]
    fn ln1p_unit(e: f64) -> f64 {
        e.ln_1p()
    }
    #[inline(always)]
    fn erfc(z: f64) -> f64 {
        libm::erfc(z)
    }
}

/// 1/√2 and 1/√(2π), for the normal distribution in gelu.
const FRAC_1_SQRT_2: f64 = std::f64::consts::FRAC_1_SQRT_2;
const FRAC_1_SQRT_2PI: f64 = 0.398_942_280_401_432_7;
/// √(2/π) and the cubic coefficient of gelu's tanh approximation.
const SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;
const GELU_CUBIC: f64 = 0.044_715;
/// selu's constants (Klambauer et al.), as torch spells them.
const SELU_ALPHA: f64 = 1.673_263_242_354_377_284_817_042_991_671_7;
const SELU_SCALE: f64 = 1.050_700_987_355_480_493_419_334_985_294_6;

/// The input scale celu's backward uses: torch's is `1.0 / alpha.toFloat()`, alpha rounded to
/// float32 (its forward uses the double).
#[inline(always)]
fn grad_input_scale(input_scale: f64) -> f64 {
    if input_scale == 1.0 {
        1.0
    } else {
        1.0 / ((1.0 / input_scale) as f32 as f64)
    }
}

/// sigmoid(x) from e = e^(-|x|) (never overflows).
#[inline(always)]
fn sigmoid_from<M: Math>(x: f64) -> f64 {
    let e = M::exp(-x.abs());
    let r = 1.0 / (1.0 + e);
    if x >= 0.0 {
        r
    } else {
        e * r
    }
}

/// ln(1 + e^x) = max(x, 0) + ln(1 + e^-|x|).
#[inline(always)]
fn softplus_of<M: Math>(x: f64) -> f64 {
    x.max(0.0) + M::ln1p_unit(M::exp(-x.abs()))
}

/// An elementwise activation: its forward value and derivative as f64 formulas, and the
/// derivative as differentiable tensor ops for double backward.
#[derive(Clone, Copy, Debug)]
enum Act {
    /// gelu; `tanh` picks torch's `approximate='tanh'`.
    Gelu {
        tanh: bool,
    },
    Silu,
    Mish,
    /// `scale * (x if x > 0 else alpha * (e^(x * input_scale) - 1))` (elu, selu, celu).
    Elu {
        alpha: f64,
        scale: f64,
        input_scale: f64,
    },
    Softplus {
        beta: f64,
        threshold: f64,
    },
    Hardswish,
    Hardsigmoid,
    LeakyRelu {
        slope: f64,
    },
    Hardtanh {
        lo: f64,
        hi: f64,
    },
    LogSigmoid,
    /// `x` where `|x| > lambd`, else 0.
    Hardshrink {
        lambd: f64,
    },
    /// `x ∓ lambd` where `|x| > lambd`, else 0.
    Softshrink {
        lambd: f64,
    },
}

impl Act {
    /// The node name (torch's).
    fn node(self) -> &'static str {
        match self {
            Act::Gelu { .. } => "GeluBackward0",
            Act::Silu => "SiluBackward0",
            Act::Mish => "MishBackward0",
            Act::Elu { input_scale, .. } if input_scale != 1.0 => "CeluBackward0",
            Act::Elu { .. } => "EluBackward0",
            Act::Softplus { .. } => "SoftplusBackward0",
            Act::Hardswish => "HardswishBackward0",
            Act::Hardsigmoid => "HardsigmoidBackward0",
            Act::LeakyRelu { .. } => "LeakyReluBackward0",
            Act::Hardtanh { .. } => "HardtanhBackward0",
            Act::LogSigmoid => "LogSigmoidBackward0",
            Act::Hardshrink { .. } => "HardshrinkBackward0",
            Act::Softshrink { .. } => "SoftshrinkBackward0",
        }
    }

    /// torch's kernel name in its "not implemented for 'Long'" error (hardtanh takes integers).
    fn kernel(self) -> Option<&'static str> {
        Some(match self {
            Act::Gelu { .. } => "GeluKernelImpl",
            Act::Silu => "silu_cpu",
            Act::Mish => "mish_cpu",
            Act::Elu { .. } => "elu_cpu",
            Act::Softplus { .. } => "softplus_cpu",
            Act::Hardswish => "hardswish_cpu",
            Act::Hardsigmoid => "hardsigmoid_cpu",
            Act::LeakyRelu { .. } => "leaky_relu_cpu",
            Act::LogSigmoid => "log_sigmoid_cpu",
            Act::Hardshrink { .. } => "hardshrink_cpu",
            Act::Softshrink { .. } => "softshrink_cpu",
            Act::Hardtanh { .. } => return None,
        })
    }

    #[inline(always)]
    fn f<M: Math>(self, x: f64) -> f64 {
        match self {
            Act::Gelu { tanh: false } => x * 0.5 * M::erfc(-x * FRAC_1_SQRT_2),
            Act::Gelu { tanh: true } => {
                let u = SQRT_2_OVER_PI * (x + GELU_CUBIC * x * x * x);
                // 0.5 (1 + tanh u) = sigmoid(2u).
                x * sigmoid_from::<M>(2.0 * u)
            }
            Act::Silu => x * sigmoid_from::<M>(x),
            Act::Mish => {
                // tanh(ln(1 + e)) = n / (n + 2) with n = e² + 2e: no cancellation anywhere.
                let e = M::exp(x.min(40.0));
                let n = e * (e + 2.0);
                x * (n / (n + 2.0))
            }
            Act::Elu {
                alpha,
                scale,
                input_scale,
            } => {
                let neg = alpha * M::expm1(x.min(0.0) * input_scale);
                scale * if x > 0.0 { x } else { neg }
            }
            Act::Softplus { beta, threshold } => {
                let bx = x * beta;
                if bx > threshold {
                    x
                } else {
                    softplus_of::<M>(bx) / beta
                }
            }
            Act::Hardswish => x * (x + 3.0).clamp(0.0, 6.0) / 6.0,
            Act::Hardsigmoid => (x / 6.0 + 0.5).clamp(0.0, 1.0),
            Act::LeakyRelu { slope } => {
                if x > 0.0 {
                    x
                } else {
                    x * slope
                }
            }
            Act::Hardtanh { lo, hi } => {
                if x < lo {
                    lo
                } else if x > hi {
                    hi
                } else {
                    x
                }
            }
            Act::LogSigmoid => x.min(0.0) - M::ln1p_unit(M::exp(-x.abs())),
            Act::Hardshrink { lambd } => {
                if x >= -lambd && x <= lambd {
                    0.0
                } else {
                    x
                }
            }
            Act::Softshrink { lambd } => {
                if x > lambd {
                    x - lambd
                } else if x < -lambd {
                    x + lambd
                } else {
                    0.0
                }
            }
        }
    }

    #[inline(always)]
    fn df<M: Math>(self, x: f64) -> f64 {
        match self {
            Act::Gelu { tanh: false } => {
                let cdf = 0.5 * M::erfc(-x * FRAC_1_SQRT_2);
                cdf + x * FRAC_1_SQRT_2PI * M::exp(-0.5 * x * x)
            }
            Act::Gelu { tanh: true } => {
                let u = SQRT_2_OVER_PI * (x + GELU_CUBIC * x * x * x);
                let s = sigmoid_from::<M>(2.0 * u);
                // d/dx x s(2u) = s + x · 2 s (1 - s) · u'.
                let du = SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_CUBIC * x * x);
                s + x * 2.0 * s * (1.0 - s) * du
            }
            Act::Silu => {
                let s = sigmoid_from::<M>(x);
                s * (1.0 + x * (1.0 - s))
            }
            Act::Mish => {
                let e = M::exp(x.min(40.0));
                let n = e * (e + 2.0);
                let t = n / (n + 2.0);
                // sech²(softplus x) = 4 (n + 1) / (n + 2)²; d softplus = sigmoid.
                let sech2 = 4.0 * (n + 1.0) / ((n + 2.0) * (n + 2.0));
                t + x * sech2 * sigmoid_from::<M>(x)
            }
            Act::Elu {
                alpha,
                scale,
                input_scale,
            } => {
                let is = grad_input_scale(input_scale);
                let neg = alpha * is * M::exp(x.min(0.0) * is);
                scale * if x > 0.0 { 1.0 } else { neg }
            }
            Act::Softplus { beta, threshold } => {
                let bx = x * beta;
                if bx > threshold {
                    1.0
                } else {
                    sigmoid_from::<M>(bx)
                }
            }
            // torch's rules at the kinks: 0 at -3, 1 at 3; 1/6 as a float32 constant.
            Act::Hardswish => {
                if x <= -3.0 {
                    0.0
                } else if x < 3.0 {
                    x / 3.0 + 0.5
                } else {
                    1.0
                }
            }
            Act::Hardsigmoid => {
                if x > -3.0 && x < 3.0 {
                    (1.0f32 / 6.0) as f64
                } else {
                    0.0
                }
            }
            Act::LeakyRelu { slope } => {
                if x > 0.0 {
                    1.0
                } else {
                    slope
                }
            }
            Act::Hardtanh { lo, hi } => {
                if x <= lo || x >= hi {
                    0.0
                } else {
                    1.0
                }
            }
            Act::LogSigmoid => sigmoid_from::<M>(-x),
            // NaN passes the gradient as it passes the value.
            Act::Hardshrink { lambd } | Act::Softshrink { lambd } => {
                if x >= -lambd && x <= lambd {
                    0.0
                } else {
                    1.0
                }
            }
        }
    }

    /// f'(x) with differentiable ops (the double-backward path).
    fn df_graph(self, x: &Tensor) -> Result<Tensor> {
        let dt = x.dtype();
        // 0-d tensors of x's dtype, not wrapped numbers: where() of two wrapped numbers is float32.
        let c = |v: f64| Tensor::full(&[], v, dt);
        let pick = |cond: Tensor, a: &Tensor, b: &Tensor| -> Result<Tensor> {
            Tensor::where_cond(&cond, a, b)
        };
        match self {
            Act::Gelu { tanh: false } => {
                let cdf = x
                    .mul_scalar(FRAC_1_SQRT_2)?
                    .erf()?
                    .add_scalar(1.0)?
                    .mul_scalar(0.5)?;
                let pdf = x
                    .mul(x)?
                    .mul_scalar(-0.5)?
                    .exp()?
                    .mul_scalar(FRAC_1_SQRT_2PI)?;
                cdf.add(&x.mul(&pdf)?)
            }
            Act::Gelu { tanh: true } => {
                let x2 = x.mul(x)?;
                let u = x
                    .add(&x2.mul(x)?.mul_scalar(GELU_CUBIC)?)?
                    .mul_scalar(SQRT_2_OVER_PI)?;
                let s = u.mul_scalar(2.0)?.sigmoid()?;
                let du = x2
                    .mul_scalar(3.0 * GELU_CUBIC)?
                    .add_scalar(1.0)?
                    .mul_scalar(SQRT_2_OVER_PI)?;
                let ds = s.mul(&s.rsub_scalar(1.0)?)?.mul_scalar(2.0)?.mul(&du)?;
                s.add(&x.mul(&ds)?)
            }
            Act::Silu => {
                let s = x.sigmoid()?;
                s.mul(&x.mul(&s.rsub_scalar(1.0)?)?.add_scalar(1.0)?)
            }
            Act::Mish => {
                let t = softplus(x, 1.0, 20.0)?.tanh()?;
                let sech2 = t.mul(&t)?.rsub_scalar(1.0)?;
                t.add(&x.mul(&sech2)?.mul(&x.sigmoid()?)?)
            }
            Act::Elu {
                alpha,
                scale,
                input_scale,
            } => {
                // exp only of min(x, 0): no inf for large x, no NaN gradient through it.
                let pos = x.gt_scalar(0.0)?;
                let xn = pick(pos.clone(), &c(0.0), x)?;
                let is = grad_input_scale(input_scale);
                let neg = xn.mul_scalar(is)?.exp()?.mul_scalar(alpha * is * scale)?;
                pick(pos, &c(scale), &neg)
            }
            Act::Softplus { beta, threshold } => {
                let bx = x.mul_scalar(beta)?;
                pick(bx.gt_scalar(threshold)?, &c(1.0), &bx.sigmoid()?)
            }
            Act::Hardswish => {
                let mid = x.mul_scalar(1.0 / 3.0)?.add_scalar(0.5)?;
                let d = pick(x.ge_scalar(3.0)?, &c(1.0), &mid)?;
                pick(x.le_scalar(-3.0)?, &c(0.0), &d)
            }
            Act::Hardsigmoid => {
                let inside = x.gt_scalar(-3.0)?.logical_and(&x.lt_scalar(3.0)?)?;
                pick(inside, &c((1.0f32 / 6.0) as f64), &c(0.0))?.expand(x.shape())
            }
            Act::LeakyRelu { slope } => {
                pick(x.gt_scalar(0.0)?, &c(1.0), &c(slope))?.expand(x.shape())
            }
            Act::Hardtanh { lo, hi } => {
                let out = x.le_scalar(lo)?.logical_or(&x.ge_scalar(hi)?)?;
                pick(out, &c(0.0), &c(1.0))?.expand(x.shape())
            }
            Act::LogSigmoid => x.neg()?.sigmoid(),
            Act::Hardshrink { lambd } | Act::Softshrink { lambd } => {
                let inside = x.ge_scalar(-lambd)?.logical_and(&x.le_scalar(lambd)?)?;
                pick(inside, &c(0.0), &c(1.0))?.expand(x.shape())
            }
        }
    }
}

/// One activation's formulas as a type of its own, so that each kernel loop is compiled for one
/// activation with its formula inlined (a `match` on [`Act`] per element was called, not
/// inlined, and ran at 5 ns per element).
#[derive(Clone, Copy)]
struct Monomorphic<const V: u8>(Act);

/// Variant numbers for [`Monomorphic`].
const V_GELU: u8 = 0;
const V_GELU_TANH: u8 = 1;
const V_SILU: u8 = 2;
const V_MISH: u8 = 3;
const V_ELU: u8 = 4;
const V_SOFTPLUS: u8 = 5;
const V_HARDSWISH: u8 = 6;
const V_HARDSIGMOID: u8 = 7;
const V_LEAKY: u8 = 8;
const V_HARDTANH: u8 = 9;
const V_LOGSIGMOID: u8 = 10;
const V_HARDSHRINK: u8 = 11;
const V_SOFTSHRINK: u8 = 12;

impl<const V: u8> Monomorphic<V> {
    /// The activation with its variant re-stated from `V`, so the `match` in [`Act::f`] folds
    /// at compile time (the fields stay run-time values).
    #[inline(always)]
    fn act(self) -> Act {
        match (V, self.0) {
            (V_GELU, _) => Act::Gelu { tanh: false },
            (V_GELU_TANH, _) => Act::Gelu { tanh: true },
            (V_SILU, _) => Act::Silu,
            (V_MISH, _) => Act::Mish,
            (
                V_ELU,
                Act::Elu {
                    alpha,
                    scale,
                    input_scale,
                },
            ) => Act::Elu {
                alpha,
                scale,
                input_scale,
            },
            (V_SOFTPLUS, Act::Softplus { beta, threshold }) => Act::Softplus { beta, threshold },
            (V_HARDSWISH, _) => Act::Hardswish,
            (V_HARDSIGMOID, _) => Act::Hardsigmoid,
            (V_LEAKY, Act::LeakyRelu { slope }) => Act::LeakyRelu { slope },
            (V_HARDTANH, Act::Hardtanh { lo, hi }) => Act::Hardtanh { lo, hi },
            (V_HARDSHRINK, Act::Hardshrink { lambd }) => Act::Hardshrink { lambd },
            (V_SOFTSHRINK, Act::Softshrink { lambd }) => Act::Softshrink { lambd },
            _ => Act::LogSigmoid,
        }
    }
}

/// softplus on float32 lanes: beta 1 (else beta x would round before the formula) and a
/// threshold a float32 holds (so `x > threshold` decides as in float64).
#[inline(always)]
fn f32_lanes_softplus(beta: f64, threshold: f64) -> bool {
    beta == 1.0 && threshold as f32 as f64 == threshold
}

/// `out = f(x)` over one chunk of float32 (f64 lanes, or float32 lanes where `vmath` has them).
#[multiversion(targets("x86_64+avx512f+avx512vl+avx512dq+avx2+avx+fma", "x86_64+avx2+avx+fma"))]
fn fwd_chunk<const V: u8>(k: Monomorphic<V>, x: &[f32], out: &mut [MaybeUninit<f32>]) {
    if multiversion::target::target_cfg_f!(target_feature = "fma") {
        fwd_loop::<V, true>(k, x, out)
    } else {
        fwd_loop::<V, false>(k, x, out)
    }
}

#[inline(always)]
fn fwd_loop<const V: u8, const F: bool>(
    k: Monomorphic<V>,
    x: &[f32],
    out: &mut [MaybeUninit<f32>],
) {
    // float32 lanes where written (twice the width of the f64 formulas below).
    match (V, k.act()) {
        (V_GELU, _) => gelu_slice::<F>(x, out),
        (V_SILU, _) => silu_slice::<F>(x, out),
        (V_LOGSIGMOID, _) => logsigmoid_slice::<F>(x, out),
        (
            V_ELU,
            Act::Elu {
                alpha,
                scale,
                input_scale: 1.0,
            },
        ) => elu_slice::<F>(x, EluF32::new(alpha, scale), out),
        (V_SOFTPLUS, Act::Softplus { beta, threshold }) if f32_lanes_softplus(beta, threshold) => {
            softplus_slice::<F>(x, threshold as f32, out)
        }
        // torch's float formula (the f64 lanes' division took most of hardswish's time).
        (V_HARDSWISH, _) => {
            for (o, &v) in out.iter_mut().zip(x) {
                o.write(v * (v + 3.0).clamp(0.0, 6.0) / 6.0);
            }
        }
        // torch's float formula, on float32 lanes as hardswish.
        (V_HARDSIGMOID, _) => {
            for (o, &v) in out.iter_mut().zip(x) {
                o.write((v + 3.0).clamp(0.0, 6.0) / 6.0);
            }
        }
        _ => {
            for (o, &v) in out.iter_mut().zip(x) {
                o.write(k.act().f::<Fast<F>>(v as f64) as f32);
            }
        }
    }
}

/// `out = g · f'(x)` over one chunk of float32; `g` a slice or one broadcast value.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx512dq+avx2+avx+fma", "x86_64+avx2+avx+fma"))]
fn bwd_chunk<const V: u8>(
    k: Monomorphic<V>,
    g: std::result::Result<&[f32], f32>,
    x: &[f32],
    out: &mut [MaybeUninit<f32>],
) {
    if multiversion::target::target_cfg_f!(target_feature = "fma") {
        bwd_loop::<V, true>(k, g, x, out)
    } else {
        bwd_loop::<V, false>(k, g, x, out)
    }
}

#[inline(always)]
fn bwd_loop<const V: u8, const F: bool>(
    k: Monomorphic<V>,
    g: std::result::Result<&[f32], f32>,
    x: &[f32],
    out: &mut [MaybeUninit<f32>],
) {
    // float32 lanes where written (the f64 formulas below run at half the width).
    match (V, k.act()) {
        (V_GELU, _) => return gelu_grad_slice::<F>(g, x, out),
        (V_SILU, _) => return silu_grad_slice::<F>(g, x, out),
        (V_LOGSIGMOID, _) => return logsigmoid_grad_slice::<F>(g, x, out),
        (
            V_ELU,
            Act::Elu {
                alpha,
                scale,
                input_scale: 1.0,
            },
        ) => return elu_grad_slice::<F>(g, x, EluF32::new(alpha, scale), out),
        (V_SOFTPLUS, Act::Softplus { beta, threshold }) if f32_lanes_softplus(beta, threshold) => {
            return softplus_grad_slice::<F>(g, x, threshold as f32, out)
        }
        (V_HARDSWISH, _) => {
            // torch's float formula and kinks (0 at -3, 1 from 3 on).
            let d = |v: f32| {
                if v <= -3.0 {
                    0.0
                } else if v < 3.0 {
                    v / 3.0 + 0.5
                } else {
                    1.0
                }
            };
            return crate::kernels::vmath::grad_slice(g, x, out, d);
        }
        // g · (1/6 in float32) rounds once either way: the f64 product of two floats is exact.
        (V_HARDSIGMOID, _) => {
            let d = |v: f32| {
                if v > -3.0 && v < 3.0 {
                    1.0f32 / 6.0
                } else {
                    0.0
                }
            };
            return crate::kernels::vmath::grad_slice(g, x, out, d);
        }
        _ => {}
    }
    match g {
        Ok(g) => {
            for ((o, &v), &gv) in out.iter_mut().zip(x).zip(g) {
                o.write((gv as f64 * k.act().df::<Fast<F>>(v as f64)) as f32);
            }
        }
        Err(gv) => {
            for (o, &v) in out.iter_mut().zip(x) {
                o.write((gv as f64 * k.act().df::<Fast<F>>(v as f64)) as f32);
            }
        }
    }
}

/// `x` as a contiguous tensor (copied when strided).
fn dense(x: &Tensor) -> Result<std::borrow::Cow<'_, Tensor>> {
    // Borrowed when contiguous: a clone is two locked instructions per op.
    if x.is_contiguous() {
        Ok(std::borrow::Cow::Borrowed(x))
    } else {
        crate::kernels::copy::copy_raw(x).map(std::borrow::Cow::Owned)
    }
}

fn forward_k<const V: u8>(x: &Tensor, k: Monomorphic<V>) -> Result<Tensor> {
    if x.dtype() == DType::Float64 {
        return map_with::<f64, f64>(x, PAR_MIN_VMATH, move |v| k.act().f::<Exact>(v));
    }
    let x = dense(x)?;
    let n = x.numel();
    let v = x.with_contiguous_slice::<f32, _>(|xs| {
        collect_chunks(n, PAR_MIN_VMATH, |start, out| {
            fwd_chunk(k, &xs[start..start + out.len()], out)
        })
    })?;
    Tensor::from_vec(v, x.shape())
}

fn backward_k<const V: u8>(g: &Tensor, x: &Tensor, k: Monomorphic<V>) -> Result<Tensor> {
    if x.dtype() == DType::Float64 {
        return zip_with::<f64, f64>(g, x, PAR_MIN_VMATH, move |g, x| g * k.act().df::<Exact>(x));
    }
    let x = dense(x)?;
    let n = x.numel();
    // Over the gradient when nothing else holds it (the same bits: each block of it is read
    // before it is written).
    let over = |gb: &[f32], xb: &[f32], out: &mut [MaybeUninit<f32>]| bwd_chunk(k, Ok(gb), xb, out);
    if let Some(t) = kernel_over_grad(g, &x, PAR_MIN_VMATH, &over)? {
        return Ok(t);
    }
    // The expanded gradient of a sum is one value: read it once instead of copying it out.
    let l = g.layout();
    let uniform = n > 0 && l.strides.iter().all(|&s| s == 0);
    let g = if uniform || g.is_contiguous() {
        g.clone()
    } else {
        crate::kernels::copy::copy_raw(g)?
    };
    let v = x.with_contiguous_slice::<f32, _>(|xs| -> Result<Vec<f32>> {
        if uniform {
            let gv = crate::ops::elementwise::uniform_value::<f32>(&g)?;
            Ok(collect_chunks(n, PAR_MIN_VMATH, |start, out| {
                bwd_chunk(k, Err(gv), &xs[start..start + out.len()], out)
            }))
        } else {
            g.with_contiguous_slice::<f32, _>(|gs| {
                collect_chunks(n, PAR_MIN_VMATH, |start, out| {
                    let r = start..start + out.len();
                    bwd_chunk(k, Ok(&gs[r.clone()]), &xs[r], out)
                })
            })
        }
    })??;
    Tensor::from_vec(v, x.shape())
}

/// `$e` with `$k` a [`Monomorphic`] of `act`'s variant.
macro_rules! monomorphic {
    ($act:expr, $k:ident => $e:expr) => {
        match $act {
            Act::Gelu { tanh: false } => {
                let $k = Monomorphic::<V_GELU>($act);
                $e
            }
            Act::Gelu { tanh: true } => {
                let $k = Monomorphic::<V_GELU_TANH>($act);
                $e
            }
            Act::Silu => {
                let $k = Monomorphic::<V_SILU>($act);
                $e
            }
            Act::Mish => {
                let $k = Monomorphic::<V_MISH>($act);
                $e
            }
            Act::Elu { .. } => {
                let $k = Monomorphic::<V_ELU>($act);
                $e
            }
            Act::Softplus { .. } => {
                let $k = Monomorphic::<V_SOFTPLUS>($act);
                $e
            }
            Act::Hardswish => {
                let $k = Monomorphic::<V_HARDSWISH>($act);
                $e
            }
            Act::Hardsigmoid => {
                let $k = Monomorphic::<V_HARDSIGMOID>($act);
                $e
            }
            Act::LeakyRelu { .. } => {
                let $k = Monomorphic::<V_LEAKY>($act);
                $e
            }
            Act::Hardtanh { .. } => {
                let $k = Monomorphic::<V_HARDTANH>($act);
                $e
            }
            Act::LogSigmoid => {
                let $k = Monomorphic::<V_LOGSIGMOID>($act);
                $e
            }
            Act::Hardshrink { .. } => {
                let $k = Monomorphic::<V_HARDSHRINK>($act);
                $e
            }
            Act::Softshrink { .. } => {
                let $k = Monomorphic::<V_SOFTSHRINK>($act);
                $e
            }
        }
    };
}

fn forward(x: &Tensor, act: Act) -> Result<Tensor> {
    monomorphic!(act, k => forward_k(x, k))
}

fn backward_fused(g: &Tensor, x: &Tensor, act: Act) -> Result<Tensor> {
    monomorphic!(act, k => backward_k(g, x, k))
}

/// `act`'s values over `x` (no node).
fn values(x: &Tensor, act: Act) -> Result<Tensor> {
    match x.dtype() {
        DType::Float32 | DType::Float64 => forward(x, act),
        // Half types compute in float32 and round on store; their backward takes the composed
        // rule (`fusable` is false for them).
        h if h.is_half() => crate::kernels::copy::via_compute(x, |w| forward(w, act)),
        DType::Int64 if act.kernel().is_none() => {
            let (lo, hi) = match act {
                Act::Hardtanh { lo, hi } => (lo, hi),
                _ => (f64::NEG_INFINITY, f64::INFINITY),
            };
            crate::ops::elementwise::map::<i64, i64>(x, move |v| (v as f64).clamp(lo, hi) as i64)
        }
        d => Err(Error::not_implemented(format!(
            "\"{}\" not implemented for '{}'",
            act.kernel().unwrap_or("clamp_cpu"),
            crate::tensor::scalar_type_name(d)
        ))),
    }
}

/// `act` over `x` with its node.
fn apply(x: &Tensor, act: Act) -> Result<Tensor> {
    // Pointwise: under vmap the kernel runs once over the physical tensor (every sample).
    let out = match crate::tensor::batched::elementwise(&[x], |p| values(&p[0], act)) {
        Some(r) => r?,
        None => values(x, act)?,
    };
    if !x.dtype().is_float() {
        return Ok(out);
    }
    if needs_grad(&[x]) {
        record(act.node(), &[x], &[&out], &[x], true, move |g, s| {
            let (g, x) = (&g[0], &s[0]);
            // Batched operands (vmap over the backward) take the composed rule's batching rules.
            let d = if fusable(g, x) && !g.is_batched() && !x.is_batched() {
                backward_fused(g, x, act)?
            } else {
                g.mul(&act.df_graph(x)?)?
            };
            Ok(vec![Some(d)])
        })?;
    }
    Ok(out)
}

/// gelu(x) = x Φ(x), exactly through erfc or (`tanh`) torch's tanh approximation.
pub fn gelu(x: &Tensor, tanh: bool) -> Result<Tensor> {
    apply(x, Act::Gelu { tanh })
}

/// silu(x) = x sigmoid(x).
pub fn silu(x: &Tensor) -> Result<Tensor> {
    apply(x, Act::Silu)
}

/// mish(x) = x tanh(softplus(x)).
pub fn mish(x: &Tensor) -> Result<Tensor> {
    apply(x, Act::Mish)
}

/// elu: `x` for x > 0, else `alpha (e^x - 1)`; gradient `alpha` at 0, as torch.
pub fn elu(x: &Tensor, alpha: f64) -> Result<Tensor> {
    apply(
        x,
        Act::Elu {
            alpha,
            scale: 1.0,
            input_scale: 1.0,
        },
    )
}

/// selu: elu with torch's fixed alpha, scaled.
pub fn selu(x: &Tensor) -> Result<Tensor> {
    apply(
        x,
        Act::Elu {
            alpha: SELU_ALPHA,
            scale: SELU_SCALE,
            input_scale: 1.0,
        },
    )
}

/// celu: `max(0, x) + min(0, alpha (e^(x / alpha) - 1))` (the caller rejects alpha = 0).
pub fn celu(x: &Tensor, alpha: f64) -> Result<Tensor> {
    apply(
        x,
        Act::Elu {
            alpha,
            scale: 1.0,
            input_scale: 1.0 / alpha,
        },
    )
}

/// softplus: `ln(1 + e^(beta x)) / beta`, or `x` where `beta x > threshold`.
pub fn softplus(x: &Tensor, beta: f64, threshold: f64) -> Result<Tensor> {
    apply(x, Act::Softplus { beta, threshold })
}

/// hardswish: `x · relu6(x + 3) / 6`.
pub fn hardswish(x: &Tensor) -> Result<Tensor> {
    apply(x, Act::Hardswish)
}

/// hardsigmoid: `relu6(x + 3) / 6`.
pub fn hardsigmoid(x: &Tensor) -> Result<Tensor> {
    apply(x, Act::Hardsigmoid)
}

/// leaky_relu: `x` for x > 0, else `slope · x`.
pub fn leaky_relu(x: &Tensor, slope: f64) -> Result<Tensor> {
    apply(x, Act::LeakyRelu { slope })
}

/// hardtanh: x clamped to `[lo, hi]`, gradient 1 strictly inside (relu6 is `[0, 6]`).
pub fn hardtanh(x: &Tensor, lo: f64, hi: f64) -> Result<Tensor> {
    apply(x, Act::Hardtanh { lo, hi })
}

/// logsigmoid: `-softplus(-x)`.
pub fn logsigmoid(x: &Tensor) -> Result<Tensor> {
    apply(x, Act::LogSigmoid)
}

/// hardshrink: `x` where `|x| > lambd`, else 0.
pub fn hardshrink(x: &Tensor, lambd: f64) -> Result<Tensor> {
    apply(x, Act::Hardshrink { lambd })
}

/// softshrink: `x - lambd` above `lambd`, `x + lambd` below `-lambd`, else 0 (`lambd >= 0`;
/// NaN and negative thresholds are refused, as torch).
pub fn softshrink(x: &Tensor, lambd: f64) -> Result<Tensor> {
    if lambd.is_nan() || lambd < 0.0 {
        // torch prints the dtype's largest value with C++'s six significant digits.
        let (max, name) = match x.dtype() {
            DType::Float64 => ("1.79769e+308", "Double"),
            DType::Float32 => ("3.40282e+38", "Float"),
            _ => ("9.22337e+18", "Long"),
        };
        return Err(Error::runtime(format!(
            "lambda must be in range [0, {max}] for input dtype {name}, but found {lambd}"
        )));
    }
    apply(x, Act::Softshrink { lambd })
}

/// glu: `a · sigmoid(b)` with `a`, `b` the halves of `x` along `dim`.
pub fn glu(x: &Tensor, dim: i64) -> Result<Tensor> {
    if x.dim() == 0 {
        return Err(Error::runtime(
            "glu does not support scalars because halving size must be even",
        ));
    }
    let d = crate::tensor::shape::wrap_dim(dim, x.dim())?;
    let n = x.shape()[d];
    if !n.is_multiple_of(2) {
        return Err(Error::runtime(format!(
            "Halving dimension must be even, but dimension {d} is size {n}"
        )));
    }
    if !x.dtype().is_float() {
        return Err(Error::not_implemented(format!(
            "\"glu_cpu\" not implemented for '{}'",
            crate::tensor::scalar_type_name(x.dtype())
        )));
    }
    let h = n / 2;
    // The halves as `outer` blocks of `a` then `b`, each `span` long, in a contiguous input.
    let outer: usize = x.shape()[..d].iter().product();
    let span = h * x.shape()[d + 1..].iter().product::<usize>();
    let mut oshape = x.shape().to_vec();
    oshape[d] = h;
    // The fused kernels cover float32/float64; half types and batched tensors compose.
    let fused = !x.is_batched() && matches!(x.dtype(), DType::Float32 | DType::Float64);
    let out = {
        let _g = GradModeGuard::new(false);
        let x = x.detach();
        if fused {
            let xc = x.contiguous()?;
            match x.dtype() {
                DType::Float32 => {
                    glu_forward::<f32>(&xc, outer, span, &oshape, &|a, b, out, _| {
                        glu_slice(a, b, out)
                    })?
                }
                _ => glu_forward::<f64>(&xc, outer, span, &oshape, &|a, b, out, neg| {
                    exp_neg_into(b, neg, out);
                    glu_rows(a, out);
                })?,
            }
        } else {
            let a = x.narrow(d as i64, 0, h)?;
            let b = x.narrow(d as i64, h as i64, h)?;
            a.mul(&b.sigmoid()?)?
        }
    };
    if needs_grad(&[x]) {
        record("GluBackward0", &[x], &[&out], &[x], false, move |g, s| {
            let (x, g) = (&s[0], &g[0]);
            if fused && !needs_grad(&[g, x]) && !g.is_batched() {
                let (xc, gc) = (x.contiguous()?, g.contiguous()?);
                let gx = match x.dtype() {
                    DType::Float32 => {
                        glu_backward::<f32>(&xc, &gc, outer, span, &|a, b, g, ga, gb, _| {
                            glu_grad_slice(a, b, g, ga, gb)
                        })?
                    }
                    _ => glu_backward::<f64>(&xc, &gc, outer, span, &|a, b, g, ga, gb, neg| {
                        exp_neg_into(b, neg, gb);
                        glu_grad_rows(a, g, ga, gb);
                    })?,
                };
                return Ok(vec![Some(gx)]);
            }
            let a = x.narrow(d as i64, 0, h)?;
            let sb = x.narrow(d as i64, h as i64, h)?.sigmoid()?;
            let ga = g.mul(&sb)?;
            let gb = g.mul(&a)?.mul(&sb.mul(&sb.rsub_scalar(1.0)?)?)?;
            Ok(vec![Some(Tensor::cat(&[ga, gb], d as i64)?)])
        })?;
    }
    Ok(out)
}

/// `dst = e^-b` for one span, through the type's exp (vectorised for f32); `neg` is scratch.
fn exp_neg_into<T: RowFloat>(b: &[T], neg: &mut Vec<T>, dst: &mut [MaybeUninit<T>]) {
    neg.clear();
    neg.extend(b.iter().map(|&v| -v));
    T::exp_into(neg, dst);
}

/// A GLU forward kernel over one span: `out = a sigmoid(b)` (last: scratch).
type GluSpan<T> = dyn Fn(&[T], &[T], &mut [MaybeUninit<T>], &mut Vec<T>) + Sync;
/// A GLU backward kernel over one span: `ga = g s`, `gb = g a s (1 - s)`, `s = sigmoid(b)`
/// (last: scratch).
type GluGradSpan<T> =
    dyn Fn(&[T], &[T], &[T], &mut [MaybeUninit<T>], &mut [MaybeUninit<T>], &mut Vec<T>) + Sync;

/// GLU forward per block (no sigmoid tensor in between); `kernel`: float32 lanes
/// ([`glu_slice`]) or the type's exp ([`glu_rows`]).
fn glu_forward<T: RowFloat>(
    x: &Tensor,
    outer: usize,
    span: usize,
    shape: &[usize],
    kernel: &GluSpan<T>,
) -> Result<Tensor> {
    let v = x.with_contiguous_slice::<T, _>(|xs| {
        fill_blocks::<T>(outer, span, |o, out, scratch| {
            let (a, b) = xs[o * 2 * span..(o + 1) * 2 * span].split_at(span);
            kernel(a, b, out, scratch);
        })
    })??;
    Tensor::from_vec(v, shape)
}

/// GLU backward into the input's layout, `s` recomputed from `b` (torch keeps only the input
/// too); `kernel` as in [`glu_forward`].
fn glu_backward<T: RowFloat>(
    x: &Tensor,
    g: &Tensor,
    outer: usize,
    span: usize,
    kernel: &GluGradSpan<T>,
) -> Result<Tensor> {
    let v = x.with_contiguous_slice::<T, _>(|xs| {
        g.with_contiguous_slice::<T, _>(|gs| {
            fill_blocks::<T>(outer, 2 * span, |o, out, scratch| {
                let (a, b) = xs[o * 2 * span..(o + 1) * 2 * span].split_at(span);
                let (ga, gb) = out.split_at_mut(span);
                kernel(a, b, &gs[o * span..(o + 1) * span], ga, gb, scratch);
            })
        })
    })???;
    Tensor::from_vec(v, x.shape())
}

/// `out = a / (1 + out)`, `out` holding `e^-b` (targets as the other activation loops).
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+avx+fma", "x86_64+avx2+avx+fma"))]
fn glu_rows<T: num_traits::Float>(a: &[T], out: &mut [MaybeUninit<T>]) {
    for (o, &av) in out.iter_mut().zip(a) {
        // SAFETY: the caller wrote every element of `out` (e^-b).
        let ev = unsafe { o.assume_init() };
        o.write(av / (T::one() + ev));
    }
}

/// `ga = g s`, `gb = g a s (1 - s)` with `s = 1 / (1 + e)`, `gb` holding `e = e^-b`.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+avx+fma", "x86_64+avx2+avx+fma"))]
fn glu_grad_rows<T: num_traits::Float>(
    a: &[T],
    g: &[T],
    ga: &mut [MaybeUninit<T>],
    gb: &mut [MaybeUninit<T>],
) {
    for (((da, db), &av), &gv) in ga.iter_mut().zip(gb.iter_mut()).zip(a).zip(g) {
        // SAFETY: the caller wrote every element of `gb` (e^-b).
        let ev = unsafe { db.assume_init() };
        let s = T::one() / (T::one() + ev);
        da.write(gv * s);
        db.write(gv * av * s * (T::one() - s));
    }
}

/// Inverted dropout: each element zeroed with probability `p`, the rest scaled by 1/(1 - p).
/// The mask comes from the crate's generator and is kept in the node (backward `g · mask`).
pub fn dropout(x: &Tensor, p: f64) -> Result<Tensor> {
    dropout_with(x, p, Dropout::default())
}

/// Which of torch's dropouts [`dropout_with`] runs.
#[derive(Clone, Copy, Debug, Default)]
pub struct Dropout {
    /// One draw per `(sample, channel)` pair, shared by the channel's elements (dropout1d/2d/3d,
    /// feature_alpha_dropout); needs an input of two or more dims.
    pub feature: bool,
    /// Alpha dropout (for SELU networks): dropped values become SELU's negative saturation
    /// and the result is rescaled and shifted to keep zero mean and unit variance.
    pub alpha: bool,
}

/// SELU's negative saturation `-scale · alpha`, negated (torch's constant).
const ALPHA_DROPOUT_ALPHA: f64 = 1.758_099_340_847_376_6;

/// torch's `_dropout_impl` in training mode: `p = 0` returns `x` itself and `p = 1` zeros;
/// otherwise a Bernoulli(1 - p) mask `m` (per element, or per channel with `kind.feature`) gives
/// `x · m / (1 - p)`, or for alpha dropout `a (x · m + α (m - 1)) + α a p` with
/// `a = 1 / √((α² p + 1)(1 - p))`. The scaled mask is kept in the node (backward `g · a m`).
pub fn dropout_with(x: &Tensor, p: f64, kind: Dropout) -> Result<Tensor> {
    if !(0.0..=1.0).contains(&p) {
        return Err(Error::value(format!(
            "dropout probability has to be between 0 and 1, but got {p}"
        )));
    }
    if kind.feature && x.dim() < 2 {
        return Err(Error::runtime(
            "Feature dropout requires at least 2 dimensions in the input",
        ));
    }
    let plain = !kind.feature && !kind.alpha;
    if !plain && (p == 0.0 || x.numel() == 0) {
        return Ok(x.clone());
    }
    let dt = if x.dtype().is_float() {
        x.dtype()
    } else {
        crate::tensor::dtype::default_float()
    };
    let noise_shape: Vec<usize> = if kind.feature {
        let mut s = vec![1; x.dim()];
        s[..2].copy_from_slice(&x.shape()[..2]);
        s
    } else {
        x.shape().to_vec()
    };
    let (scale, shift) = if kind.alpha && p < 1.0 {
        let a = 1.0 / ((ALPHA_DROPOUT_ALPHA * ALPHA_DROPOUT_ALPHA * p + 1.0) * (1.0 - p)).sqrt();
        (a, Some(ALPHA_DROPOUT_ALPHA * a))
    } else if p < 1.0 {
        (1.0 / (1.0 - p), None)
    } else {
        (0.0, None)
    };
    let _g = GradModeGuard::new(false);
    // mask = scale where kept, 0 where dropped; alpha's shift = αa (m - 1) + αap per draw.
    let keep = if p >= 1.0 {
        Tensor::zeros(&noise_shape, dt)
    } else {
        Tensor::rand(&noise_shape, dt)?
            .lt_scalar(1.0 - p)?
            .to_dtype(dt)?
    };
    let mask = keep.mul_scalar(scale)?;
    let mut out = x.detach().mul(&mask)?;
    if let Some(aa) = shift {
        let b = keep.sub_scalar(1.0)?.mul_scalar(aa)?.add_scalar(aa * p)?;
        out = out.add(&b)?;
    }
    drop(_g);
    if needs_grad(&[x]) {
        let name = match (plain, kind.alpha) {
            (true, _) => "NativeDropoutBackward0",
            (false, false) => "MulBackward0",
            (false, true) => "AddBackward0",
        };
        record(name, &[x], &[&out], &[], false, move |g, _| {
            Ok(vec![Some(g[0].mul(&mask)?)])
        })?;
    }
    Ok(out)
}

/// Randomized leaky ReLU (torch's `rrelu_with_noise`). Training (with `upper - lower` above
/// 1e-6): each negative element is scaled by its own slope drawn uniformly from
/// `[lower, upper]`, kept in the node; otherwise the fixed slope `(lower + upper) / 2`.
pub fn rrelu(x: &Tensor, lower: f64, upper: f64, training: bool) -> Result<Tensor> {
    if lower > upper {
        return Err(Error::runtime(
            "Lower bound should be less than or equal to the upper bound",
        ));
    }
    if !x.dtype().is_float() {
        return Err(Error::not_implemented(format!(
            "\"rrelu_with_noise_out_cpu\" not implemented for '{}'",
            crate::tensor::scalar_type_name(x.dtype())
        )));
    }
    let dt = x.dtype();
    let noise = {
        let _g = GradModeGuard::new(false);
        let x = x.detach();
        let neg = x.le_scalar(0.0)?;
        let slope = if training && upper - lower > 1e-6 {
            Tensor::rand(x.shape(), dt)?
                .mul_scalar(upper - lower)?
                .add_scalar(lower)?
        } else {
            Tensor::wrapped_scalar((lower + upper) / 2.0, dt).expand(x.shape())?
        };
        Tensor::where_cond(&neg, &slope, &Tensor::wrapped_scalar(1.0, dt))?
    };
    let out = {
        let _g = GradModeGuard::new(false);
        x.detach().mul(&noise)?
    };
    if needs_grad(&[x]) {
        record(
            "RreluWithNoiseBackward0",
            &[x],
            &[&out],
            &[],
            false,
            move |g, _| Ok(vec![Some(g[0].mul(&noise)?)]),
        )?;
    }
    Ok(out)
}
