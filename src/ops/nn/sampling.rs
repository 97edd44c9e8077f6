//! Resampling: `interpolate` (nearest, nearest-exact, linear/bilinear/trilinear, bicubic, area)
//! and the pure permutations `pixel_shuffle`, `pixel_unshuffle` and `channel_shuffle`.
//!
//! Every interpolation mode is separable: along each spatial dim, output index `j` reads a few
//! input indices with fixed weights ("taps"), computed once per call with torch's index and
//! weight conventions in the input's precision. The forward applies the 1-d passes plane by
//! plane (last dim first, as torch's kernels nest them, so float32 rounding agrees); the
//! backward is the adjoint: the transposed passes, scattering in reverse order. Both are linear,
//! so each one's backward is the other and second derivatives come for free.

use std::mem::MaybeUninit;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::graph::node::{needs_grad, record};
use crate::ops::nn::softmax::{fill_blocks, RowFloat};
use crate::tensor::shape::fmt_shape;
use crate::tensor::{DType, Tensor};

/// How `interpolate` computes each output element from the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InterpMode {
    /// torch's `nearest`: source index `floor(j * scale)` (OpenCV's historical rule).
    Nearest,
    /// torch's `nearest-exact`: source index `floor((j + 0.5) * scale)` (Pillow, scikit-image).
    NearestExact,
    /// Linear in every spatial dim: torch's `linear`, `bilinear`, `trilinear`.
    Linear,
    /// Cubic convolution with `A = -0.75`, border indices clamped: torch's `bicubic` (2-d only).
    Cubic,
    /// Average over each output cell's window, torch's `area` (adaptive average pooling).
    Area,
}

/// One 1-d resampling: output index `j` is `Σ_t w[j k + t] · x[idx[j k + t]]` for `t < k`.
/// A tap with index [`SKIP`] takes no part (area and antialias windows shorter than `k`).
#[derive(Debug)]
struct Taps {
    n_in: usize,
    n_out: usize,
    k: usize,
    idx: Vec<usize>,
    /// Weights as computed in the input's precision (exact in f64).
    w: Vec<f64>,
}

/// The index of a tap that takes no part.
const SKIP: usize = usize::MAX;

/// torch's node names of a resampling and of its adjoint.
#[derive(Clone, Copy, Debug)]
struct Names {
    forward: &'static str,
    adjoint: &'static str,
}

/// Everything a resampling of one input shape needs, shared by the nodes of both directions.
#[derive(Debug)]
struct Plan {
    /// Per spatial dim, outermost first.
    taps: Vec<Taps>,
    names: Names,
}

/// torch's `area_pixel_compute_scale` in the input's precision.
fn pixel_scale<T: RowFloat>(n_in: usize, n_out: usize, align: bool, scale: Option<f64>) -> T {
    if align {
        if n_out > 1 {
            T::of((n_in - 1) as f64) / T::of((n_out - 1) as f64)
        } else {
            T::zero()
        }
    } else {
        match scale {
            Some(s) if s > 0.0 => T::of(1.0 / s),
            _ => T::of(n_in as f64) / T::of(n_out as f64),
        }
    }
}

/// torch's `area_pixel_compute_source_index`.
fn source_index<T: RowFloat>(scale: T, j: usize, align: bool, cubic: bool, fused: bool) -> T {
    if align {
        scale * T::of(j as f64)
    } else {
        let s = if fused {
            scale.mul_add(T::of(j as f64) + T::of(0.5), -T::of(0.5))
        } else {
            scale * (T::of(j as f64) + T::of(0.5)) - T::of(0.5)
        };
        if !cubic && s < T::zero() {
            T::zero()
        } else {
            s
        }
    }
}

/// C's `floorf` of a value of the input's precision: torch narrows it to float first.
fn floorf<T: RowFloat>(v: T) -> i64 {
    (v.f() as f32).floor() as i64
}

/// torch's `guard_index_and_lambda`: the floor index (at most `n_in - 1`) and the fraction
/// past it, clamped to [0, 1].
fn guard<T: RowFloat>(real: T, n_in: usize) -> (i64, T) {
    let i = floorf(real).min(n_in as i64 - 1);
    let lambda = (real - T::of(i as f64)).max(T::zero()).min(T::one());
    (i, lambda)
}

/// The cubic convolution weights of the four taps around fraction `t` (`A = -0.75`).
fn cubic_coefficients<T: RowFloat>(t: T, fused: bool) -> [T; 4] {
    let a = T::of(-0.75);
    let (one, two, three) = (T::one(), T::of(2.0), T::of(3.0));
    let (five, eight, four) = (T::of(5.0), T::of(8.0), T::of(4.0));
    let conv1 = |x: T| {
        if fused {
            ((a + two).mul_add(x, -(a + three)) * x).mul_add(x, one)
        } else {
            ((a + two) * x - (a + three)) * x * x + one
        }
    };
    let conv2 = |x: T| {
        if fused {
            (a.mul_add(x, -(five * a)))
                .mul_add(x, eight * a)
                .mul_add(x, -(four * a))
        } else {
            ((a * x - five * a) * x + eight * a) * x - four * a
        }
    };
    let x2 = one - t;
    [conv2(t + one), conv1(t), conv1(x2), conv2(x2 + one)]
}

/// The taps of one dim, torch's conventions in precision `T`.
fn taps_for<T: RowFloat>(
    mode: InterpMode,
    n_in: usize,
    n_out: usize,
    align: bool,
    scale: Option<f64>,
    small_2d: bool,
) -> Result<Taps> {
    let k = match mode {
        InterpMode::Nearest | InterpMode::NearestExact => 1,
        InterpMode::Linear => 2,
        InterpMode::Cubic => 4,
        // The longest adaptive window: ceil(n_in / n_out) + 1 covers every alignment.
        InterpMode::Area => n_in.div_ceil(n_out) + 1,
    };
    let len = n_out
        .checked_mul(k)
        .ok_or_else(|| Error::runtime("interpolate: output too large"))?;
    let mut idx = crate::tensor::creation::try_vec::<usize>(len)?;
    let mut w = crate::tensor::creation::try_vec::<f64>(len)?;
    let last = n_in as i64 - 1;
    let scale_t: T = pixel_scale(n_in, n_out, align, scale);
    // torch's builds contract the source index into a fused multiply-add in the bicubic and
    // nearest-exact kernels and in the channels-last bilinear one, not in the generic linear
    // one (measured against torch 2.15: it moves float32 samples by an ulp, and indices).
    let fused = mode == InterpMode::Cubic || (mode == InterpMode::Linear && small_2d);
    // The channels-last kernels' `nearest_idx`: a float scale, and exact shortcuts for the
    // same size and for doubling.
    let scale_f32 = match scale {
        Some(s) if s > 0.0 => (1.0 / s) as f32,
        _ => n_in as f32 / n_out as f32,
    };
    for j in 0..n_out {
        match mode {
            InterpMode::Nearest if small_2d => {
                let i = if n_out == n_in {
                    j
                } else if n_out == 2 * n_in {
                    j >> 1
                } else {
                    ((j as f32 * scale_f32).floor() as i64).min(last) as usize
                };
                idx.push(i);
                w.push(1.0);
            }
            InterpMode::NearestExact if small_2d => {
                let i = (((j as f64 + 0.5) * scale_f32 as f64) as f32).floor() as i64;
                idx.push(i.min(last) as usize);
                w.push(1.0);
            }
            InterpMode::Nearest => {
                let real = source_index(scale_t, j, true, false, false);
                idx.push(floorf(real).min(last) as usize);
                w.push(1.0);
            }
            InterpMode::NearestExact => {
                let real = source_index(scale_t, j, false, false, true);
                // `real + 0.5` is a double in torch, narrowed by floorf.
                let i = ((real.f() + 0.5) as f32).floor() as i64;
                idx.push(i.min(last) as usize);
                w.push(1.0);
            }
            InterpMode::Linear => {
                if n_in == n_out {
                    idx.extend([j, j]);
                    w.extend([1.0, 0.0]);
                } else {
                    let real = source_index(scale_t, j, align, false, fused);
                    let (i0, l1) = guard(real, n_in);
                    let i1 = if i0 < last { i0 + 1 } else { i0 };
                    idx.extend([i0 as usize, i1 as usize]);
                    w.extend([(T::one() - l1).f(), l1.f()]);
                }
            }
            InterpMode::Cubic => {
                let real = source_index(scale_t, j, align, true, fused);
                let (i, t) = guard(real, n_in);
                let c = cubic_coefficients(t, fused);
                for (q, cq) in c.iter().enumerate() {
                    idx.push((i - 1 + q as i64).clamp(0, last) as usize);
                    w.push(cq.f());
                }
            }
            InterpMode::Area => {
                let start = (j * n_in) / n_out;
                let end = ((j + 1) * n_in).div_ceil(n_out);
                let inv = T::one() / T::of((end - start) as f64);
                for q in 0..k {
                    if start + q < end {
                        idx.push(start + q);
                        w.push(inv.f());
                    } else {
                        idx.push(SKIP);
                        w.push(0.0);
                    }
                }
            }
        }
    }
    Ok(Taps {
        n_in,
        n_out,
        k,
        idx,
        w,
    })
}

/// Pillow's resampling filters (torch's `aa_filter`): the triangle, and the cubic with
/// `A = -0.5` (its polynomials in fused multiply-adds, as torch's build contracts them).
fn aa_filter<T: RowFloat>(mode: InterpMode, x: T) -> T {
    let x = x.abs();
    let one = T::one();
    if mode == InterpMode::Linear {
        return if x < one { one - x } else { T::zero() };
    }
    let a = T::of(-0.5);
    if x < one {
        ((a + T::of(2.0)).mul_add(x, -(a + T::of(3.0))) * x).mul_add(x, one)
    } else if x < T::of(2.0) {
        a.mul_add(x, -(T::of(5.0) * a))
            .mul_add(x, T::of(8.0) * a)
            .mul_add(x, -(T::of(4.0) * a))
    } else {
        T::zero()
    }
}

/// The antialiased taps of one dim (torch's `_compute_indices_min_size_weights_aa`): when
/// downscaling, the filter's support grows with the scale, so every input pixel counts. A dim
/// whose size does not change is copied, as torch skips it.
fn taps_antialias<T: RowFloat>(
    mode: InterpMode,
    n_in: usize,
    n_out: usize,
    align: bool,
    scale: Option<f64>,
) -> Result<Taps> {
    if n_in == n_out {
        return Ok(Taps {
            n_in,
            n_out,
            k: 1,
            idx: (0..n_out).collect(),
            w: vec![1.0; n_out],
        });
    }
    let interp = if mode == InterpMode::Linear { 2.0 } else { 4.0 };
    let scale_t: T = pixel_scale(n_in, n_out, align, scale);
    let big = scale_t >= T::one();
    let support = if big {
        T::of(interp * 0.5) * scale_t
    } else {
        T::of(interp * 0.5)
    };
    let k = (support.f().ceil() as usize) * 2 + 1;
    let len = n_out
        .checked_mul(k)
        .ok_or_else(|| Error::runtime("interpolate: output too large"))?;
    let mut idx = crate::tensor::creation::try_vec::<usize>(len)?;
    let mut w = crate::tensor::creation::try_vec::<f64>(len)?;
    let invscale = if big {
        T::of(1.0 / scale_t.f())
    } else {
        T::one()
    };
    let mut ws: Vec<T> = Vec::with_capacity(k);
    for i in 0..n_out {
        // The mixed float/double arithmetic of torch's C++, rounded where it rounds.
        let center = T::of(scale_t.f() * (i as f64 + 0.5));
        let xmin = (((center - support).f() + 0.5) as i64).max(0);
        let xmax = (((center + support).f() + 0.5) as i64).min(n_in as i64);
        let xsize = (xmax - xmin).clamp(0, k as i64) as usize;
        ws.clear();
        let mut total = T::zero();
        for j in 0..xsize {
            let arg = T::of(((T::of((j as i64 + xmin) as f64) - center).f() + 0.5) * invscale.f());
            let v = aa_filter(mode, arg);
            ws.push(v);
            total = total + v;
        }
        for (j, &v) in ws.iter().enumerate() {
            let v = if total != T::zero() { v / total } else { v };
            idx.push(xmin as usize + j);
            w.push(v.f());
        }
        for _ in xsize..k {
            idx.push(SKIP);
            w.push(0.0);
        }
    }
    Ok(Taps {
        n_in,
        n_out,
        k,
        idx,
        w,
    })
}

/// torch's node names for a mode over `d` spatial dims.
fn names_for(mode: InterpMode, d: usize) -> Result<Names> {
    let n = |forward, adjoint| Ok(Names { forward, adjoint });
    match (mode, d) {
        (InterpMode::Nearest, 1) => n(
            "UpsampleNearest1DBackward0",
            "UpsampleNearest1DBackwardBackward0",
        ),
        (InterpMode::Nearest, 2) => n(
            "UpsampleNearest2DBackward0",
            "UpsampleNearest2DBackwardBackward0",
        ),
        (InterpMode::Nearest, 3) => n(
            "UpsampleNearest3DBackward0",
            "UpsampleNearest3DBackwardBackward0",
        ),
        (InterpMode::NearestExact, 1) => n(
            "UpsampleNearestExact1DBackward0",
            "UpsampleNearestExact1DBackwardBackward0",
        ),
        (InterpMode::NearestExact, 2) => n(
            "UpsampleNearestExact2DBackward0",
            "UpsampleNearestExact2DBackwardBackward0",
        ),
        (InterpMode::NearestExact, 3) => n(
            "UpsampleNearestExact3DBackward0",
            "UpsampleNearestExact3DBackwardBackward0",
        ),
        (InterpMode::Linear, 1) => n(
            "UpsampleLinear1DBackward0",
            "UpsampleLinear1DBackwardBackward0",
        ),
        (InterpMode::Linear, 2) => n(
            "UpsampleBilinear2DBackward0",
            "UpsampleBilinear2DBackwardBackward0",
        ),
        (InterpMode::Linear, 3) => n(
            "UpsampleTrilinear3DBackward0",
            "UpsampleTrilinear3DBackwardBackward0",
        ),
        (InterpMode::Cubic, 2) => n(
            "UpsampleBicubic2DBackward0",
            "UpsampleBicubic2DBackwardBackward0",
        ),
        (InterpMode::Area, 3) => n(
            "AdaptiveAvgPool3DBackward0",
            "AdaptiveAvgPool3DBackwardBackward0",
        ),
        _ => Err(Error::not_implemented(format!(
            "Got {}D input, but {} mode is not available for it",
            d + 2,
            mode_name(mode, d)
        ))),
    }
}

fn mode_name(mode: InterpMode, d: usize) -> &'static str {
    match (mode, d) {
        (InterpMode::Nearest, _) => "nearest",
        (InterpMode::NearestExact, _) => "nearest-exact",
        (InterpMode::Linear, 1) => "linear",
        (InterpMode::Linear, 2) => "bilinear",
        (InterpMode::Linear, _) => "trilinear",
        (InterpMode::Cubic, _) => "bicubic",
        (InterpMode::Area, _) => "area",
    }
}

/// torch's "Input and output sizes should be greater than 0" check, with its dim letters.
fn check_sizes(input: &[usize], output: &[i64]) -> Result<()> {
    if input.iter().all(|&s| s > 0) && output.iter().all(|&s| s > 0) {
        return Ok(());
    }
    let letters: &[&str] = match input.len() {
        1 => &["W"],
        2 => &["H", "W"],
        _ => &["D", "H", "W"],
    };
    let list = |v: Vec<String>| {
        letters
            .iter()
            .zip(v)
            .map(|(l, s)| format!("{l}: {s}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let i = list(input.iter().map(|s| s.to_string()).collect());
    let o = list(output.iter().map(|s| s.to_string()).collect());
    Err(Error::runtime(if input.len() == 1 {
        format!(
            "Input and output sizes should be greater than 0, but got input ({i}) and output ({o})"
        )
    } else {
        format!("Input and output sizes should be greater than 0, but got input ({i}) output ({o})")
    }))
}

/// `input` (`(N, C, d1, .., dk)` with `k = size.len()` or `scale_factor.len()` spatial dims, 1
/// to 3) resampled to the given `size`, or to `floor(d * scale)` per dim.
///
/// Exactly one of `size` and `scale_factor` must be given. When `scale_factor` is given its
/// values (not the rounded sizes) place the samples, as torch does when
/// `recompute_scale_factor` is not true. `align_corners` (linear and cubic only) maps the corner
/// pixel centres onto each other. Float tensors only. Differentiable to any order: the backward
/// is the adjoint resampling, whose backward is the forward again.
///
/// `antialias` (linear and cubic over 2 spatial dims, as torch allows) widens the filter by the
/// downscaling factor, as Pillow does (cubic then uses `A = -0.5`).
///
/// Errors: a size or scale list whose length does not match, a non-positive input or output
/// size, a non-float input, and a mode the number of dims does not support (bicubic needs 2
/// spatial dims; area over 1 or 2 dims is adaptive average pooling).
pub fn interpolate(
    input: &Tensor,
    size: Option<&[i64]>,
    scale_factor: Option<&[f64]>,
    mode: InterpMode,
    align_corners: bool,
    antialias: bool,
) -> Result<Tensor> {
    if let Some(r) = Tensor::lift_half([input], [], |[x], []| {
        interpolate(x, size, scale_factor, mode, align_corners, antialias)
    }) {
        return r;
    }
    // Inside vmap: the samples folded into N.
    if input.dim() > 0 {
        if let Some(r) = crate::ops::batching::fold_front(&[input], |p| {
            interpolate(&p[0], size, scale_factor, mode, align_corners, antialias)
        }) {
            return r;
        }
    }
    let d = match (size, scale_factor) {
        (Some(s), None) => s.len(),
        (None, Some(s)) => s.len(),
        _ => {
            return Err(Error::runtime(
                "Must specify exactly one of output_size and scale_factors",
            ))
        }
    };
    if !(1..=3).contains(&d) || input.dim() != d + 2 {
        return Err(Error::runtime(format!(
            "It is expected input_size equals to {}, but got size {}",
            d + 2,
            input.dim()
        )));
    }
    let in_sp: Vec<usize> = input.shape()[2..].to_vec();
    let out_sp: Vec<i64> = match (size, scale_factor) {
        (Some(s), _) => s.to_vec(),
        (_, Some(f)) => in_sp
            .iter()
            .zip(f)
            .map(|(&n, &s)| (n as f64 * s) as i64)
            .collect(),
        _ => unreachable!("checked above"),
    };
    if mode == InterpMode::Area {
        return area(input, &out_sp);
    }
    check_sizes(&in_sp, &out_sp)?;
    if input.numel() == 0 && input.shape()[1..].contains(&0) {
        return Err(Error::runtime(format!(
            "Non-empty {}D data tensor expected but got a tensor with sizes {}",
            d + 2,
            fmt_shape(input.shape())
        )));
    }
    // torch's 2-d nearest and bilinear take their channels-last kernels for small outputs.
    let small_2d = d == 2 && out_sp[0] + out_sp[1] <= 128;
    let antialias = antialias && matches!(mode, InterpMode::Linear | InterpMode::Cubic);
    if antialias && d != 2 {
        return Err(Error::value(
            "Anti-alias option is restricted to bilinear, bicubic, and lanczos modes and requires a 4-D tensor as input",
        ));
    }
    if !input.dtype().is_float() {
        let kernel = match (mode, small_2d) {
            _ if antialias => "compute_index_ranges_weights",
            (InterpMode::Nearest | InterpMode::NearestExact, true) => {
                "upsample_nearest2d_channels_last"
            }
            (InterpMode::Linear, true) => "upsample_bilinear2d_channels_last",
            (InterpMode::Nearest | InterpMode::NearestExact, false) => {
                "compute_indices_weights_nearest"
            }
            (InterpMode::Linear, false) => "compute_indices_weights_linear",
            _ => "compute_indices_weights_cubic",
        };
        return Err(Error::not_implemented(format!(
            "\"{kernel}\" not implemented for '{}'",
            crate::tensor::scalar_type_name(input.dtype())
        )));
    }
    let out_sp: Vec<usize> = out_sp.iter().map(|&s| s as usize).collect();
    let names = if antialias {
        match mode {
            InterpMode::Linear => Names {
                forward: "UpsampleBilinear2DAaBackward0",
                adjoint: "UpsampleBilinear2DAaBackwardBackward0",
            },
            _ => Names {
                forward: "UpsampleBicubic2DAaBackward0",
                adjoint: "UpsampleBicubic2DAaBackwardBackward0",
            },
        }
    } else {
        names_for(mode, d)?
    };
    let scales: Vec<Option<f64>> = match scale_factor {
        Some(f) => f.iter().map(|&s| Some(s)).collect(),
        None => vec![None; d],
    };
    let align = align_corners && matches!(mode, InterpMode::Linear | InterpMode::Cubic);
    let mut taps = Vec::with_capacity(d);
    for i in 0..d {
        let (n_in, n_out, sc) = (in_sp[i], out_sp[i], scales[i]);
        taps.push(match (input.dtype(), antialias) {
            (DType::Float32, false) => taps_for::<f32>(mode, n_in, n_out, align, sc, small_2d)?,
            (_, false) => taps_for::<f64>(mode, n_in, n_out, align, sc, small_2d)?,
            (DType::Float32, true) => taps_antialias::<f32>(mode, n_in, n_out, align, sc)?,
            (_, true) => taps_antialias::<f64>(mode, n_in, n_out, align, sc)?,
        });
    }
    resample(input, &Arc::new(Plan { taps, names }), false)
}

/// torch's `area` mode: adaptive average pooling by the pooling family's ops.
fn area(input: &Tensor, out_sp: &[i64]) -> Result<Tensor> {
    match out_sp.len() {
        1 => input.adaptive_avg_pool1d(out_sp[0]),
        2 => input.adaptive_avg_pool2d(out_sp),
        _ => input.adaptive_avg_pool3d(out_sp),
    }
}

/// Adaptive 3-d average pooling of `(N, C, D, H, W)` or `(C, D, H, W)` by the separable area
/// passes (one 1-d pass per dim), with torch's checks in its order. Behind
/// [`Tensor::adaptive_avg_pool3d`].
pub(crate) fn adaptive_avg_pool3d(input: &Tensor, out_sp: &[i64]) -> Result<Tensor> {
    if out_sp.len() != 3 {
        return Err(Error::runtime("adaptive_avg_pool3d: output_size must be 3"));
    }
    if out_sp.iter().any(|&s| s < 0) {
        return Err(Error::runtime(format!(
            "adaptive_avg_pool3d: elements of output_size must be greater than or equal to 0 but received {{{}, {},{}}}",
            out_sp[0], out_sp[1], out_sp[2]
        )));
    }
    if let Some(i) = (1..input.dim()).find(|&i| input.shape()[i] == 0) {
        return Err(Error::runtime(format!(
            "adaptive_avg_pool3d(): Expected input to have non-zero size for non-batch dimensions, but input has sizes {} with dimension {i} being empty",
            fmt_shape(input.shape())
        )));
    }
    if input.dim() != 4 && input.dim() != 5 {
        return Err(Error::runtime(format!(
            "adaptive_avg_pool3d(): Expected 4D or 5D tensor, but got {}",
            fmt_shape(input.shape())
        )));
    }
    if !input.dtype().is_float() {
        return Err(Error::not_implemented(format!(
            "\"adaptive_avg_pool3d_cpu\" not implemented for '{}'",
            crate::tensor::scalar_type_name(input.dtype())
        )));
    }
    if input.dim() == 4 {
        return adaptive_avg_pool3d(&input.unsqueeze(0)?, out_sp)?.squeeze(Some(0));
    }
    let out_sp: Vec<usize> = out_sp.iter().map(|&s| s as usize).collect();
    let mut shape = input.shape()[..2].to_vec();
    shape.extend(&out_sp);
    if out_sp.contains(&0) {
        return Ok(Tensor::zeros(&shape, input.dtype()));
    }
    if out_sp.iter().all(|&s| s == 1) {
        // torch takes the mean here (its node is MeanBackward1).
        return input.mean_dims(&[-3, -2, -1], true);
    }
    let in_sp = &input.shape()[2..];
    let mut taps = Vec::with_capacity(3);
    for i in 0..3 {
        taps.push(match input.dtype() {
            DType::Float32 => {
                taps_for::<f32>(InterpMode::Area, in_sp[i], out_sp[i], false, None, false)?
            }
            _ => taps_for::<f64>(InterpMode::Area, in_sp[i], out_sp[i], false, None, false)?,
        });
    }
    let names = names_for(InterpMode::Area, 3)?;
    resample(input, &Arc::new(Plan { taps, names }), false)
}

/// The shape `x` (of the plan's input or output spatial sizes) takes on the other side.
fn other_shape(x: &Tensor, plan: &Plan, to_out: bool) -> Result<Vec<usize>> {
    let d = plan.taps.len();
    let sp: Vec<usize> = plan
        .taps
        .iter()
        .map(|t| if to_out { t.n_in } else { t.n_out })
        .collect();
    if x.dim() < d || x.shape()[x.dim() - d..] != sp[..] {
        return Err(Error::runtime(format!(
            "resampling: expected a tensor ending in {}, got {}",
            fmt_shape(&sp),
            fmt_shape(x.shape())
        )));
    }
    let mut shape = x.shape()[..x.dim() - d].to_vec();
    shape.extend(
        plan.taps
            .iter()
            .map(|t| if to_out { t.n_out } else { t.n_in }),
    );
    Ok(shape)
}

/// The forward resampling of `x` (or with `adjoint`, its transpose), recorded with the other
/// direction as its backward: each is linear, so each is the other's gradient to any order.
fn resample(x: &Tensor, plan: &Arc<Plan>, adjoint: bool) -> Result<Tensor> {
    let shape = other_shape(x, plan, !adjoint)?;
    let out = run(x, plan, &shape, adjoint)?;
    if needs_grad(&[x]) {
        let p = plan.clone();
        let name = if adjoint {
            plan.names.adjoint
        } else {
            plan.names.forward
        };
        record(name, &[x], &[&out], &[], false, move |g, _| {
            Ok(vec![Some(resample(&g[0], &p, !adjoint)?)])
        })?;
    }
    Ok(out)
}

/// Runs the passes over every plane of `x` into a new tensor of `shape`.
fn run(x: &Tensor, plan: &Plan, shape: &[usize], adjoint: bool) -> Result<Tensor> {
    if !x.dtype().is_float() {
        return Err(Error::runtime(format!(
            "resampling expects a float tensor, got {}",
            crate::tensor::scalar_type_name(x.dtype())
        )));
    }
    match x.dtype() {
        DType::Float32 => run_as::<f32>(x, plan, shape, adjoint),
        _ => run_as::<f64>(x, plan, shape, adjoint),
    }
}

/// Taps with weights in the kernel's type.
struct TapsT<T> {
    n_in: usize,
    n_out: usize,
    k: usize,
    idx: Vec<usize>,
    w: Vec<T>,
    /// No [`SKIP`] taps: the fixed-width fast paths apply.
    dense: bool,
}

fn run_as<T: RowFloat>(x: &Tensor, plan: &Plan, shape: &[usize], adjoint: bool) -> Result<Tensor> {
    let d = plan.taps.len();
    let taps: Vec<TapsT<T>> = plan
        .taps
        .iter()
        .map(|t| TapsT {
            n_in: t.n_in,
            n_out: t.n_out,
            k: t.k,
            idx: t.idx.clone(),
            w: t.w.iter().map(|&v| T::of(v)).collect(),
            dense: !t.idx.contains(&SKIP),
        })
        .collect();
    let sp_in: Vec<usize> = x.shape()[x.dim() - d..].to_vec();
    let plane_in: usize = sp_in.iter().product();
    let plane_out: usize = shape[shape.len() - d..].iter().product();
    let planes: usize = shape[..shape.len() - d].iter().product();
    crate::tensor::creation::checked_numel(shape)?;
    let v = x.with_contiguous_slice::<T, _>(|xs| {
        fill_blocks::<T>(planes, plane_out, |p, out, scratch| {
            let src = &xs[p * plane_in..(p + 1) * plane_in];
            if adjoint {
                plane_adjoint(src, out, &taps, scratch);
            } else {
                plane_forward(src, out, &taps, scratch);
            }
        })
    })??;
    Tensor::from_vec(v, shape)
}

/// Elements of a plane of these spatial sizes.
fn scratch_len(dims: &[usize]) -> usize {
    dims.iter().product()
}

/// The buffers of the next pass: what it reads (`src` before any pass, else scratch half
/// `cur`) and the first `n` elements of the other half, which it writes (returned as `next`).
fn ping_pong<'a, T>(
    bufs: &'a mut [&mut [T]; 2],
    src: &'a [T],
    cur: Option<usize>,
    n: usize,
) -> (&'a [T], &'a mut [T], usize) {
    let next = cur.map_or(0, |c| 1 - c);
    let (first, second) = bufs.split_at_mut(1);
    let (src_buf, dst_buf): (&[T], &mut [T]) = match cur {
        None => (src, &mut first[0][..n]),
        Some(0) => (&first[0][..], &mut second[0][..n]),
        _ => (&second[0][..], &mut first[0][..n]),
    };
    (src_buf, dst_buf, next)
}

/// One plane forward: passes along the last dim first, each into a scratch half, the outermost
/// pass straight into `out`.
fn plane_forward<T: RowFloat>(
    src: &[T],
    out: &mut [MaybeUninit<T>],
    taps: &[TapsT<T>],
    scratch: &mut Vec<T>,
) {
    let d = taps.len();
    let mut dims: Vec<usize> = taps.iter().map(|t| t.n_in).collect();
    // Intermediates: after pass on dim i (i = d-1 .. 1), dims[i] becomes n_out.
    let mut sizes = Vec::with_capacity(d);
    for i in (1..d).rev() {
        dims[i] = taps[i].n_out;
        sizes.push(scratch_len(&dims));
    }
    let half = sizes.iter().copied().max().unwrap_or(0);
    scratch.resize(2 * half, T::zero());
    let (a, b) = scratch.split_at_mut(half);
    let mut bufs = [a, b];
    let mut dims: Vec<usize> = taps.iter().map(|t| t.n_in).collect();
    let mut cur: Option<usize> = None; // which scratch half holds the current data
    for i in (0..d).rev() {
        let outer: usize = dims[..i].iter().product();
        let inner: usize = dims[i + 1..].iter().product();
        let n_next = outer * taps[i].n_out * inner;
        if i == 0 {
            let input: &[T] = match cur {
                None => src,
                Some(c) => &bufs[c][..outer * taps[i].n_in * inner],
            };
            pass_forward(input, out, outer, inner, &taps[i]);
        } else {
            let (src_buf, dst_buf, next) = ping_pong(&mut bufs, src, cur, n_next);
            let src_len = outer * taps[i].n_in * inner;
            // SAFETY: T is plain data; every element of the destination is written by the pass.
            let dst = unsafe { &mut *(dst_buf as *mut [T] as *mut [MaybeUninit<T>]) };
            pass_forward(&src_buf[..src_len], dst, outer, inner, &taps[i]);
            cur = Some(next);
        }
        dims[i] = taps[i].n_out;
    }
}

/// One plane backward: the transposed passes in reverse order (outermost dim first).
fn plane_adjoint<T: RowFloat>(
    src: &[T],
    out: &mut [MaybeUninit<T>],
    taps: &[TapsT<T>],
    scratch: &mut Vec<T>,
) {
    let d = taps.len();
    let mut dims: Vec<usize> = taps.iter().map(|t| t.n_out).collect();
    let mut half = 0;
    for i in 0..d - 1 {
        dims[i] = taps[i].n_in;
        half = half.max(scratch_len(&dims));
    }
    scratch.resize(2 * half, T::zero());
    let (a, b) = scratch.split_at_mut(half);
    let mut bufs = [a, b];
    let mut dims: Vec<usize> = taps.iter().map(|t| t.n_out).collect();
    let mut cur: Option<usize> = None;
    for i in 0..d {
        let outer: usize = dims[..i].iter().product();
        let inner: usize = dims[i + 1..].iter().product();
        let src_len = outer * taps[i].n_out * inner;
        let n_next = outer * taps[i].n_in * inner;
        if i == d - 1 {
            let input: &[T] = match cur {
                None => src,
                Some(c) => &bufs[c][..src_len],
            };
            for o in out.iter_mut() {
                o.write(T::zero());
            }
            // SAFETY: every element was just written.
            let out = unsafe { &mut *(out as *mut [MaybeUninit<T>] as *mut [T]) };
            pass_adjoint(input, out, outer, inner, &taps[i]);
        } else {
            let (src_buf, dst_buf, next) = ping_pong(&mut bufs, src, cur, n_next);
            dst_buf.iter_mut().for_each(|v| *v = T::zero());
            pass_adjoint(&src_buf[..src_len], dst_buf, outer, inner, &taps[i]);
            cur = Some(next);
        }
        dims[i] = taps[i].n_in;
    }
}

/// `out[o, j, :] = Σ_t w[j,t] · x[o, idx[j,t], :]` for `x` of shape `(outer, n_in, inner)`;
/// writes every element of `out` (`(outer, n_out, inner)`).
fn pass_forward<T: RowFloat>(
    x: &[T],
    out: &mut [MaybeUninit<T>],
    outer: usize,
    inner: usize,
    t: &TapsT<T>,
) {
    let (n_in, n_out, k) = (t.n_in, t.n_out, t.k);
    if inner == 1 {
        for (xr, or) in x.chunks_exact(n_in).zip(out.chunks_exact_mut(n_out)) {
            match (k, t.dense) {
                (1, true) => {
                    for (o, &i) in or.iter_mut().zip(&t.idx) {
                        o.write(xr[i]);
                    }
                }
                (2, true) => {
                    for ((o, i), w) in or
                        .iter_mut()
                        .zip(t.idx.chunks_exact(2))
                        .zip(t.w.chunks_exact(2))
                    {
                        o.write(xr[i[0]] * w[0] + xr[i[1]] * w[1]);
                    }
                }
                _ => {
                    for ((o, i), w) in or
                        .iter_mut()
                        .zip(t.idx.chunks_exact(k))
                        .zip(t.w.chunks_exact(k))
                    {
                        let mut acc: Option<T> = None;
                        for (&ii, &ww) in i.iter().zip(w) {
                            if ii != SKIP {
                                let v = xr[ii] * ww;
                                acc = Some(acc.map_or(v, |a| a + v));
                            }
                        }
                        o.write(acc.unwrap_or(T::zero()));
                    }
                }
            }
        }
        return;
    }
    for o in 0..outer {
        let xb = &x[o * n_in * inner..(o + 1) * n_in * inner];
        let ob = &mut out[o * n_out * inner..(o + 1) * n_out * inner];
        for (j, orow) in ob.chunks_exact_mut(inner).enumerate() {
            let ids = &t.idx[j * k..(j + 1) * k];
            let ws = &t.w[j * k..(j + 1) * k];
            let mut first = true;
            for (&ii, &ww) in ids.iter().zip(ws) {
                if ii == SKIP {
                    continue;
                }
                let xrow = &xb[ii * inner..(ii + 1) * inner];
                if first {
                    if k == 1 {
                        for (o, &v) in orow.iter_mut().zip(xrow) {
                            o.write(v);
                        }
                    } else {
                        for (o, &v) in orow.iter_mut().zip(xrow) {
                            o.write(v * ww);
                        }
                    }
                    first = false;
                } else {
                    // SAFETY: the first tap wrote the whole row.
                    let orow = unsafe { &mut *(orow as *mut [MaybeUninit<T>] as *mut [T]) };
                    for (o, &v) in orow.iter_mut().zip(xrow) {
                        *o = *o + v * ww;
                    }
                }
            }
            if first {
                for o in orow.iter_mut() {
                    o.write(T::zero());
                }
            }
        }
    }
}

/// The transpose of [`pass_forward`]: `out[o, idx[j,t], :] += w[j,t] · g[o, j, :]`, `out`
/// zeroed by the caller.
fn pass_adjoint<T: RowFloat>(g: &[T], out: &mut [T], outer: usize, inner: usize, t: &TapsT<T>) {
    let (n_in, n_out, k) = (t.n_in, t.n_out, t.k);
    if inner == 1 {
        for (gr, or) in g.chunks_exact(n_out).zip(out.chunks_exact_mut(n_in)) {
            match (k, t.dense) {
                (1, true) => {
                    for (&gv, &i) in gr.iter().zip(&t.idx) {
                        or[i] = or[i] + gv;
                    }
                }
                (2, true) => {
                    for ((&gv, i), w) in gr
                        .iter()
                        .zip(t.idx.chunks_exact(2))
                        .zip(t.w.chunks_exact(2))
                    {
                        or[i[0]] = or[i[0]] + gv * w[0];
                        or[i[1]] = or[i[1]] + gv * w[1];
                    }
                }
                _ => {
                    for ((&gv, i), w) in gr
                        .iter()
                        .zip(t.idx.chunks_exact(k))
                        .zip(t.w.chunks_exact(k))
                    {
                        for (&ii, &ww) in i.iter().zip(w) {
                            if ii != SKIP {
                                or[ii] = or[ii] + gv * ww;
                            }
                        }
                    }
                }
            }
        }
        return;
    }
    debug_assert_eq!(g.len(), outer * n_out * inner);
    for (gb, ob) in g
        .chunks_exact(n_out * inner)
        .zip(out.chunks_exact_mut(n_in * inner))
    {
        for (j, grow) in gb.chunks_exact(inner).enumerate() {
            let ids = &t.idx[j * k..(j + 1) * k];
            let ws = &t.w[j * k..(j + 1) * k];
            for (&ii, &ww) in ids.iter().zip(ws) {
                if ii == SKIP {
                    continue;
                }
                let orow = &mut ob[ii * inner..(ii + 1) * inner];
                if k == 1 {
                    for (o, &v) in orow.iter_mut().zip(grow) {
                        *o = *o + v;
                    }
                } else {
                    for (o, &v) in orow.iter_mut().zip(grow) {
                        *o = *o + v * ww;
                    }
                }
            }
        }
    }
}

// ----- permutations -------------------------------------------------------------------------

/// torch's node names of a permutation and of its inverse.
const PIXEL_SHUFFLE: &str = "PixelShuffleBackward0";
const PIXEL_UNSHUFFLE: &str = "PixelUnshuffleBackward0";
const CHANNEL_SHUFFLE: &str = "ChannelShuffleBackward0";

/// `x` viewed as `view`, permuted by `perm`, copied once and shaped `shape`, without recording.
fn permuted_copy(x: &Tensor, view: &[usize], perm: &[usize], shape: &[usize]) -> Result<Tensor> {
    // Inside vmap: the samples are one more leading dim that stays in front.
    if let Some(r) = crate::tensor::batched::unary_all(x, |p, nb| {
        let lead = &p.shape()[..nb];
        let view: Vec<usize> = [&[lead.iter().product()], view].concat();
        let perm: Vec<usize> = std::iter::once(0)
            .chain(perm.iter().map(|d| d + 1))
            .collect();
        permuted_copy(p, &view, &perm, &[lead, shape].concat())
    }) {
        return r;
    }
    crate::kernels::copy::permute_reshape_copy(x, view, perm, shape)
}

/// torch's first checks of pixel_shuffle / pixel_unshuffle: three or more dims, a positive
/// factor (named `what`).
fn check_shuffle(op: &str, what: &str, x: &Tensor, factor: i64) -> Result<()> {
    if x.dim() < 3 {
        return Err(Error::runtime(format!(
            "{op} expects input to have at least 3 dimensions, but got input with {} dimension(s)",
            x.dim()
        )));
    }
    if factor <= 0 {
        return Err(Error::runtime(format!(
            "{op} expects a positive {what}, but got {factor}"
        )));
    }
    Ok(())
}

/// `(*, C r², H, W)` to `(*, C, H r, W r)`: each group of `r²` channels becomes an `r × r`
/// block of pixels. Any dtype. Its backward is [`pixel_unshuffle`].
///
/// Errors (torch's messages): fewer than 3 dims, `r <= 0`, channels not divisible by `r²`.
pub fn pixel_shuffle(x: &Tensor, upscale_factor: i64) -> Result<Tensor> {
    check_shuffle("pixel_shuffle", "upscale_factor", x, upscale_factor)?;
    let r = upscale_factor as usize;
    let nd = x.dim();
    let (c, h, w) = (x.shape()[nd - 3], x.shape()[nd - 2], x.shape()[nd - 1]);
    let rr = r.saturating_mul(r);
    if !c.is_multiple_of(rr) {
        return Err(Error::runtime(format!(
            "pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of upscale_factor, but input.size(-3)={c} is not divisible by {rr}"
        )));
    }
    let lead = &x.shape()[..nd - 3];
    let b: usize = lead.iter().product();
    let oc = c / rr;
    let too_big = || Error::runtime("pixel_shuffle: output size overflows");
    let mut shape = lead.to_vec();
    shape.extend([
        oc,
        h.checked_mul(r).ok_or_else(too_big)?,
        w.checked_mul(r).ok_or_else(too_big)?,
    ]);
    // (B, oc, r, r, H, W) -> (B, oc, H, r, W, r)
    let out = permuted_copy(x, &[b, oc, r, r, h, w], &[0, 1, 4, 2, 5, 3], &shape)?;
    shuffle_node(x, out, PIXEL_SHUFFLE, pixel_unshuffle, upscale_factor)
}

/// `(*, C, H r, W r)` to `(*, C r², H, W)`, the inverse of [`pixel_shuffle`]. Any dtype.
///
/// Errors (torch's messages): fewer than 3 dims, `r <= 0`, height or width not divisible by `r`.
pub fn pixel_unshuffle(x: &Tensor, downscale_factor: i64) -> Result<Tensor> {
    check_shuffle("pixel_unshuffle", "downscale_factor", x, downscale_factor)?;
    let r = downscale_factor as usize;
    let nd = x.dim();
    let (c, h, w) = (x.shape()[nd - 3], x.shape()[nd - 2], x.shape()[nd - 1]);
    if !h.is_multiple_of(r) {
        return Err(Error::runtime(format!(
            "pixel_unshuffle expects height to be divisible by downscale_factor, but input.size(-2)={h} is not divisible by {r}"
        )));
    }
    if !w.is_multiple_of(r) {
        return Err(Error::runtime(format!(
            "pixel_unshuffle expects width to be divisible by downscale_factor, but input.size(-1)={w} is not divisible by {r}"
        )));
    }
    let lead = &x.shape()[..nd - 3];
    let b: usize = lead.iter().product();
    let (oh, ow) = (h / r, w / r);
    let mut shape = lead.to_vec();
    let channels = c
        .checked_mul(r)
        .and_then(|v| v.checked_mul(r))
        .ok_or_else(|| Error::runtime("pixel_unshuffle: output size overflows"))?;
    shape.extend([channels, oh, ow]);
    // (B, C, oh, r, ow, r) -> (B, C, r, r, oh, ow)
    let out = permuted_copy(x, &[b, c, oh, r, ow, r], &[0, 1, 3, 5, 2, 4], &shape)?;
    shuffle_node(x, out, PIXEL_UNSHUFFLE, pixel_shuffle, downscale_factor)
}

/// `out` (`x` shuffled) with a node `name` whose backward is the inverse shuffle `back` by the
/// same factor.
fn shuffle_node(
    x: &Tensor,
    out: Tensor,
    name: &'static str,
    back: fn(&Tensor, i64) -> Result<Tensor>,
    factor: i64,
) -> Result<Tensor> {
    if needs_grad(&[x]) {
        record(name, &[x], &[&out], &[], false, move |g, _| {
            Ok(vec![Some(back(&g[0], factor)?)])
        })?;
    }
    Ok(out)
}

/// `(N, C, *)` with channels reordered as `(groups, C / groups)` transposed: channel
/// `g · (C / groups) + i` moves to `i · groups + g`. Any dtype. Its backward is the shuffle
/// with `C / groups` groups.
///
/// Errors (torch's messages): fewer than 3 dims, `groups <= 0`, channels not divisible by it.
pub fn channel_shuffle(x: &Tensor, groups: i64) -> Result<Tensor> {
    if x.dim() <= 2 {
        return Err(Error::runtime(format!(
            "channel_shuffle expects input with > 2 dims, but got input with sizes {}",
            fmt_shape(x.shape())
        )));
    }
    if groups <= 0 {
        return Err(Error::runtime(format!(
            "Number of groups to divide channels in must be positive. Value of groups:{groups}"
        )));
    }
    let c = x.shape()[1];
    let g = groups as usize;
    if !c.is_multiple_of(g) {
        return Err(Error::runtime(format!(
            "Number of channels must be divisible by groups. Got {c} channels and {g} groups."
        )));
    }
    let n = x.shape()[0];
    let rest: usize = x.shape()[2..].iter().product();
    let shape = x.shape().to_vec();
    let out = permuted_copy(x, &[n, g, c / g, rest], &[0, 2, 1, 3], &shape)?;
    if needs_grad(&[x]) {
        let inverse = (c / g).max(1) as i64;
        record(CHANNEL_SHUFFLE, &[x], &[&out], &[], false, move |gr, _| {
            Ok(vec![Some(channel_shuffle(&gr[0], inverse)?)])
        })?;
    }
    Ok(out)
}
