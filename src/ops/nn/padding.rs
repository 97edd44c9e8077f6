//! `pad`: constant, reflect, replicate and circular padding (negative amounts crop) over the
//! last `pads.len() / 2` dims, as one gather whose backward scatters back.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::kernels::copy::cast;
use crate::ops::nn::conv::{GatherNames, PAD_INDEX};
use crate::tensor::shape::fmt_shape;
use crate::tensor::Tensor;

/// How positions outside the input are filled.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PadMode {
    /// A constant value.
    Constant(f64),
    /// The input mirrored at its edges, edges not repeated (`[c b | a b c d | c b]`).
    Reflect,
    /// The edge elements repeated.
    Replicate,
    /// The input wrapped around.
    Circular,
}

impl PadMode {
    /// torch's node names for `dims` padded dims (its kernels exist for 1 to 3; circular padding
    /// is a composition there, whose last node is a CopySlices).
    fn names(self, dims: usize) -> GatherNames {
        let (gather, scatter) = match (self, dims) {
            (PadMode::Constant(_), _) => {
                ("ConstantPadNdBackward0", "ConstantPadNdBackwardBackward0")
            }
            (PadMode::Reflect, 1) => (
                "ReflectionPad1DBackward0",
                "ReflectionPad1DBackwardBackward0",
            ),
            (PadMode::Reflect, 2) => (
                "ReflectionPad2DBackward0",
                "ReflectionPad2DBackwardBackward0",
            ),
            (PadMode::Reflect, 3) => (
                "ReflectionPad3DBackward0",
                "ReflectionPad3DBackwardBackward0",
            ),
            (PadMode::Reflect, _) => ("ReflectionPadBackward0", "ReflectionPadBackwardBackward0"),
            (PadMode::Replicate, 1) => (
                "ReplicationPad1DBackward0",
                "ReplicationPad1DBackwardBackward0",
            ),
            (PadMode::Replicate, 2) => (
                "ReplicationPad2DBackward0",
                "ReplicationPad2DBackwardBackward0",
            ),
            (PadMode::Replicate, 3) => (
                "ReplicationPad3DBackward0",
                "ReplicationPad3DBackwardBackward0",
            ),
            (PadMode::Replicate, _) => {
                ("ReplicationPadBackward0", "ReplicationPadBackwardBackward0")
            }
            (PadMode::Circular, _) => ("CircularPadBackward0", "CircularPadBackwardBackward0"),
        };
        GatherNames { gather, scatter }
    }
}

/// For each output index along one dim of size `n` padded by `(left, right)`, the input index
/// it reads, or `None` for a constant-filled position. torch's checks and messages.
fn source_indices(
    n: usize,
    left: i64,
    right: i64,
    dim: usize,
    mode: PadMode,
    input: &Tensor,
) -> Result<Vec<Option<usize>>> {
    let ni = n as i64;
    let size = ni + left + right;
    if size < 0 || (size == 0 && n > 0 && !matches!(mode, PadMode::Constant(_))) {
        return Err(Error::runtime(format!(
            "The input size {n}, plus negative padding {left} and {right} resulted in a negative output size, which is invalid. Check dimension {dim} of your input."
        )));
    }
    let shifted = (0..size).map(|j| j - left);
    if (left, right) == (0, 0) || matches!(mode, PadMode::Constant(_)) {
        return Ok(shifted
            .map(|s| (0..ni).contains(&s).then_some(s as usize))
            .collect());
    }
    Ok(match mode {
        PadMode::Reflect => {
            if left >= ni || right >= ni {
                return Err(Error::runtime(format!(
                    "Argument #4: Padding size should be less than the corresponding input dimension, but got: padding ({left}, {right}) at dimension {dim} of input {}",
                    fmt_shape(input.shape())
                )));
            }
            let period = if n > 1 { 2 * (ni - 1) } else { 1 };
            shifted
                .map(|s| {
                    let m = s.rem_euclid(period);
                    Some((if m < ni { m } else { period - m }) as usize)
                })
                .collect()
        }
        PadMode::Replicate => {
            if n == 0 {
                return Err(Error::runtime(format!(
                    "padding size is expected to be positive, but got input of size {n} at dim {dim}"
                )));
            }
            shifted.map(|s| Some(s.clamp(0, ni - 1) as usize)).collect()
        }
        _ => {
            if left > ni || right > ni {
                return Err(Error::runtime(
                    "Padding value causes wrapping around more than once.",
                ));
            }
            shifted
                .map(|s| Some(s.rem_euclid(ni.max(1)) as usize))
                .collect()
        }
    })
}

/// `input` padded by `pads`, `(left, right)` pairs starting from the last dim (negative amounts
/// crop). Float tensors only; differentiable to any order.
pub fn pad(input: &Tensor, pads: &[i64], mode: PadMode) -> Result<Tensor> {
    if !pads.len().is_multiple_of(2) {
        return Err(Error::runtime("Padding length must be divisible by 2"));
    }
    let nd = input.dim();
    if pads.len() / 2 > nd {
        return Err(Error::runtime(format!(
            "Padding length should be less than or equal to two times the input dimension but got padding length {} and input of dimension {nd}",
            pads.len()
        )));
    }
    let shape = input.shape().to_vec();
    let mut per_dim = Vec::with_capacity(nd);
    for (d, &n) in shape.iter().enumerate() {
        let k = nd - 1 - d;
        let (l, r) = if 2 * k < pads.len() {
            (pads[2 * k], pads[2 * k + 1])
        } else {
            (0, 0)
        };
        per_dim.push(source_indices(n, l, r, d, mode, input)?);
    }
    let out_shape: Vec<usize> = per_dim.iter().map(Vec::len).collect();
    let numel = crate::tensor::creation::checked_numel(&out_shape)?;
    // Flat source positions in row-major output order, built one dim at a time.
    let mut flat: Vec<usize> = vec![0];
    let mut stride = 1usize;
    let strides: Vec<usize> = shape
        .iter()
        .rev()
        .map(|&n| {
            let s = stride;
            stride *= n;
            s
        })
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    for (src, &st) in per_dim.iter().zip(&strides) {
        let mut next = crate::tensor::creation::try_vec(flat.len().saturating_mul(src.len()))?;
        for &base in &flat {
            next.extend(src.iter().map(|s| match s {
                Some(i) if base != PAD_INDEX => base + i * st,
                _ => PAD_INDEX,
            }));
        }
        flat = next;
    }
    flat.truncate(numel);
    let x = input.contiguous()?;
    let out = x.gather_padded(
        &Arc::new(flat.clone()),
        &out_shape,
        mode.names(pads.len() / 2),
    )?;
    if let PadMode::Constant(v) = mode {
        if v != 0.0 {
            // The fill is a constant: written into the fresh output without a node of its own,
            // so the result's node stays the pad's (its backward only gathers).
            let fill: Vec<f64> = flat
                .iter()
                .map(|&p| if p == PAD_INDEX { v } else { 0.0 })
                .collect();
            let fill = cast(&Tensor::from_vec(fill, &out_shape)?, out.dtype())?;
            // (A fresh contiguous output: the in-place add always applies, version untouched.)
            if !crate::ops::elementwise::add_assign_nograd(&out, &fill)? {
                crate::ops::inplace::add_into_nograd(&out, &fill)?;
            }
        }
    }
    Ok(out)
}
