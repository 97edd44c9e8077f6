//! Sliding-window primitives behind convolution, pooling and padding: `im2col` (torch's
//! `unfold`) and its adjoint `col2im` (torch's `fold`), built on a gather/scatter pair by flat
//! index in which a missing index (padding) reads as zero and is skipped on scatter. Each of the
//! pair is the other's backward, so everything built on them is differentiable to any order.

use std::sync::Arc;

use crate::autograd::node::{needs_grad, record};
use crate::error::{Error, Result};
use crate::tensor::shape::fmt_shape;
use crate::tensor::{DType, Dims, Element, Tensor};

/// The flat index that stands for "outside the input" (reads as zero, scatters nowhere).
pub const PAD_INDEX: usize = usize::MAX;

/// torch's node names for the gather and for its adjoint scatter.
#[derive(Clone, Copy, Debug)]
pub struct GatherNames {
    /// Node name of the gather (e.g. `Im2ColBackward0`).
    pub gather: &'static str,
    /// Node name of the scatter (e.g. `Col2ImBackward0`).
    pub scatter: &'static str,
}

/// Names of `unfold` / `fold`.
pub const IM2COL: GatherNames = GatherNames {
    gather: "Im2ColBackward0",
    scatter: "Col2ImBackward0",
};

fn gather_padded<T: Element>(src: &[T], idx: &[usize]) -> Result<Vec<T>> {
    idx.iter()
        .map(|&i| {
            if i == PAD_INDEX {
                return Ok(T::default());
            }
            src.get(i).copied().ok_or_else(|| {
                Error::index(format!("index {i} is out of bounds for size {}", src.len()))
            })
        })
        .collect()
}

fn scatter_padded<T: Element + std::ops::Add<Output = T>>(
    src: &[T],
    idx: &[usize],
    n: usize,
) -> Result<Vec<T>> {
    let mut out = crate::tensor::creation::try_filled_vec(n, T::default())?;
    for (&i, &v) in idx.iter().zip(src) {
        if i == PAD_INDEX {
            continue;
        }
        let slot = out
            .get_mut(i)
            .ok_or_else(|| Error::index(format!("index {i} is out of bounds for size {n}")))?;
        *slot = *slot + v;
    }
    Ok(out)
}

fn float_only(t: &Tensor, op: &str) -> Result<()> {
    if t.dtype().is_float() {
        Ok(())
    } else {
        Err(Error::runtime(format!(
            "\"{op}\" not implemented for '{}'",
            crate::tensor::scalar_type_name(t.dtype())
        )))
    }
}

impl Tensor {
    /// Elements at flat row-major positions `idx` (where [`PAD_INDEX`] gives zero), shaped
    /// `shape`. Float tensors only. Its backward is [`Tensor::scatter_add_padded`].
    pub fn gather_padded(
        &self,
        idx: &Arc<Vec<usize>>,
        shape: &[usize],
        names: GatherNames,
    ) -> Result<Tensor> {
        float_only(self, "gather_padded")?;
        if shape.iter().product::<usize>() != idx.len() {
            return Err(Error::runtime(format!(
                "gather_padded: {} indices cannot fill shape {}",
                idx.len(),
                fmt_shape(shape)
            )));
        }
        let out = match self.dtype() {
            DType::Float32 => Tensor::from_vec(
                self.with_contiguous_slice::<f32, _>(|s| gather_padded(s, idx))??,
                shape,
            )?,
            _ => Tensor::from_vec(
                self.with_contiguous_slice::<f64, _>(|s| gather_padded(s, idx))??,
                shape,
            )?,
        };
        if needs_grad(&[self]) {
            let (idx, in_shape): (Arc<Vec<usize>>, Dims) = (idx.clone(), self.shape().into());
            record(names.gather, &[self], &[&out], &[], false, move |g, _| {
                Ok(vec![Some(g[0].scatter_add_padded(&in_shape, &idx, names)?)])
            })?;
        }
        Ok(out)
    }

    /// A zero tensor of `shape` with this tensor's elements added at flat positions `idx`
    /// (entries at [`PAD_INDEX`] are dropped). Float tensors only. Its backward is
    /// [`Tensor::gather_padded`].
    pub fn scatter_add_padded(
        &self,
        shape: &[usize],
        idx: &Arc<Vec<usize>>,
        names: GatherNames,
    ) -> Result<Tensor> {
        float_only(self, "scatter_add_padded")?;
        if self.numel() != idx.len() {
            return Err(Error::runtime(format!(
                "scatter_add_padded: {} indices for a source of shape {}",
                idx.len(),
                fmt_shape(self.shape())
            )));
        }
        let n: usize = shape.iter().product();
        let out = match self.dtype() {
            DType::Float32 => Tensor::from_vec(
                self.with_contiguous_slice::<f32, _>(|s| scatter_padded(s, idx, n))??,
                shape,
            )?,
            _ => Tensor::from_vec(
                self.with_contiguous_slice::<f64, _>(|s| scatter_padded(s, idx, n))??,
                shape,
            )?,
        };
        if needs_grad(&[self]) {
            let (idx, src_shape): (Arc<Vec<usize>>, Dims) = (idx.clone(), self.shape().into());
            record(names.scatter, &[self], &[&out], &[], false, move |g, _| {
                Ok(vec![Some(g[0].gather_padded(&idx, &src_shape, names)?)])
            })?;
        }
        Ok(out)
    }

    /// torch's `unfold` (im2col) for any number of spatial dims: `(N, C, *spatial)` to
    /// `(N, C * prod(kernel), L)` with `L` the number of window positions. Zero padding.
    pub fn im2col(
        &self,
        kernel: &[usize],
        dilation: &[usize],
        padding: &[usize],
        stride: &[usize],
    ) -> Result<Tensor> {
        im2col_args_check(
            &signed(kernel),
            &signed(dilation),
            &signed(padding),
            &signed(stride),
        )?;
        let (idx, out_shape, _) =
            window_index("im2col", self.shape(), kernel, dilation, padding, stride)?;
        self.gather_padded(&Arc::new(idx), &out_shape, IM2COL)
    }

    /// torch's `fold` (col2im), the adjoint of [`Tensor::im2col`]: `(N, C * prod(kernel), L)`
    /// to `(N, C, *output_size)`, summing overlapping windows.
    pub fn col2im(
        &self,
        output_size: &[usize],
        kernel: &[usize],
        dilation: &[usize],
        padding: &[usize],
        stride: &[usize],
    ) -> Result<Tensor> {
        col2im_shape_check(
            self.shape(),
            &signed(output_size),
            &signed(kernel),
            &signed(dilation),
            &signed(padding),
            &signed(stride),
        )?;
        let s = self.shape();
        let k: usize = kernel.iter().product();
        let mut in_shape = vec![s[0], s[1] / k];
        in_shape.extend_from_slice(output_size);
        let (idx, _, _) = window_index("col2im", &in_shape, kernel, dilation, padding, stride)?;
        self.scatter_add_padded(&in_shape, &Arc::new(idx), IM2COL)
    }
}

fn signed(v: &[usize]) -> Vec<i64> {
    v.iter()
        .map(|&x| i64::try_from(x).unwrap_or(i64::MAX))
        .collect()
}

/// torch's name for spatial dim `i` of `n` (`height`, `width`, ...).
fn dim_name(i: usize, n: usize) -> String {
    let names: &[&str] = match n {
        1 => &["width"],
        2 => &["height", "width"],
        3 => &["depth", "height", "width"],
        _ => &[],
    };
    names
        .get(i)
        .map_or_else(|| i.to_string(), |s| s.to_string())
}

/// One of torch's per-dim argument checks: which values pass, the message, and the label
/// of each value in it (`stride_height: 0 stride_width: 1`).
struct ArgCheck(fn(i64) -> bool, &'static str, &'static str);

const KERNEL: ArgCheck = ArgCheck(
    |x| x > 0,
    "kernel size should be greater than zero",
    "kernel",
);
const DILATION: ArgCheck = ArgCheck(
    |x| x > 0,
    "dilation should be greater than zero",
    "dilation",
);
const PADDING: ArgCheck = ArgCheck(|x| x >= 0, "padding should be non-negative", "pad");
const STRIDE: ArgCheck = ArgCheck(|x| x > 0, "stride should be greater than zero", "stride");

/// Run `checks` in order (torch's order differs between ops); the first that fails is the error.
fn check_args(checks: &[(&[i64], ArgCheck)]) -> Result<()> {
    for (v, ArgCheck(ok, what, label)) in checks {
        if !v.iter().all(|&x| ok(x)) {
            let got: Vec<String> = v
                .iter()
                .enumerate()
                .map(|(i, x)| format!("{label}_{}: {x}", dim_name(i, v.len())))
                .collect();
            return Err(Error::runtime(format!("{what}, but got {}", got.join(" "))));
        }
    }
    Ok(())
}

/// torch's checks of the integer arguments of `unfold` (im2col), in its order. Signed, so
/// that bindings can check the values users gave before converting them to sizes.
pub fn im2col_args_check(
    kernel: &[i64],
    dilation: &[i64],
    padding: &[i64],
    stride: &[i64],
) -> Result<()> {
    check_args(&[
        (kernel, KERNEL),
        (dilation, DILATION),
        (padding, PADDING),
        (stride, STRIDE),
    ])
}

/// torch's checks of `fold` (col2im) for an input of shape `in_shape` (`(N, C * K, L)`), in
/// its order: the integer arguments, the channels, the number of blocks and the output size.
/// Signed, like [`im2col_args_check`].
pub fn col2im_shape_check(
    in_shape: &[usize],
    output_size: &[i64],
    kernel: &[i64],
    dilation: &[i64],
    padding: &[i64],
    stride: &[i64],
) -> Result<()> {
    check_args(&[
        (kernel, KERNEL),
        (stride, STRIDE),
        (dilation, DILATION),
        (padding, PADDING),
    ])?;
    let sd = kernel.len();
    if [
        output_size.len(),
        dilation.len(),
        padding.len(),
        stride.len(),
    ] != [sd; 4]
    {
        return Err(Error::runtime(format!(
            "col2im: output_size, kernel_size, dilation, padding and stride must all have {sd} elements"
        )));
    }
    if in_shape.len() != 3 {
        return Err(Error::runtime(format!(
            "Expected 3D (batched) input to col2im, but got input of size: {}",
            fmt_shape(in_shape)
        )));
    }
    let tuple = |v: &[i64]| {
        let items: Vec<String> = v.iter().map(|x| x.to_string()).collect();
        format!("({})", items.join(", "))
    };
    let k = kernel.iter().try_fold(1i64, |a, &b| a.checked_mul(b));
    let channels = in_shape[1] as i64;
    if k.is_none_or(|k| channels % k != 0) {
        return Err(Error::runtime(format!(
            "Expected size of input's dimension 1 to be divisible by the product of kernel_size, but got input.size(1)={channels} and kernel_size={}.",
            tuple(kernel)
        )));
    }
    let blocks: Vec<i64> = (0..sd)
        .map(|d| {
            let span = dilation[d].saturating_mul(kernel[d] - 1).saturating_add(1);
            let room = output_size[d]
                .saturating_add(padding[d].saturating_mul(2))
                .saturating_sub(span);
            room.div_euclid(stride[d]).saturating_add(1)
        })
        .collect();
    let n_blocks = blocks.iter().fold(1i64, |a, &b| a.saturating_mul(b));
    let given = format!(
        "Given output_size={}, kernel_size={}, dilation={}, padding={}, stride={}",
        tuple(output_size),
        tuple(kernel),
        tuple(dilation),
        tuple(padding),
        tuple(stride)
    );
    if n_blocks != in_shape[2] as i64 {
        let per_dim: Vec<String> = blocks.iter().map(|x| x.to_string()).collect();
        return Err(Error::runtime(format!(
            "{given}, expected size of input's dimension 2 to match the calculated number of sliding blocks {} = {n_blocks}, but got input.size(2)={}.",
            per_dim.join(" * "),
            in_shape[2]
        )));
    }
    if blocks.iter().any(|&b| b < 1) {
        return Err(Error::runtime(format!(
            "{given}, calculated shape of the array of sliding blocks as {}, which is too small (non-positive)",
            tuple(&blocks)
        )));
    }
    if output_size.iter().any(|&o| o < 1) {
        return Err(Error::runtime(format!(
            "Expected output spatial size to be positive, but got: output_size={}.",
            tuple(output_size)
        )));
    }
    Ok(())
}

/// Flat input indices of every window element, in im2col order `(n, c, k..., l...)`, with the
/// im2col output shape `(N, C*K, L)` and the window-position grid (the output spatial sizes).
pub fn window_index(
    op: &str,
    in_shape: &[usize],
    kernel: &[usize],
    dilation: &[usize],
    padding: &[usize],
    stride: &[usize],
) -> Result<(Vec<usize>, Vec<usize>, Vec<usize>)> {
    let sd = kernel.len();
    if sd == 0 || in_shape.len() != sd + 2 {
        return Err(Error::runtime(format!(
            "{op}: expected a {}-D (batched) input for a {sd}-D kernel, but got input of size: {}",
            sd + 2,
            fmt_shape(in_shape)
        )));
    }
    if dilation.len() != sd || padding.len() != sd || stride.len() != sd {
        return Err(Error::runtime(format!(
            "{op}: kernel_size, dilation, padding and stride must all have {sd} elements"
        )));
    }
    for (what, v) in [
        ("kernel", kernel),
        ("dilation", dilation),
        ("stride", stride),
    ] {
        if v.contains(&0) {
            return Err(Error::runtime(format!(
                "{op}: {what} should be greater than zero, but got {what}: {}",
                fmt_shape(v)
            )));
        }
    }
    let spatial = &in_shape[2..];
    let mut grid = Vec::with_capacity(sd);
    for d in 0..sd {
        let span = dilation[d] * (kernel[d] - 1) + 1;
        let padded = spatial[d] + 2 * padding[d];
        if padded < span {
            return Err(Error::runtime(format!(
                "{op}: the kernel (size {} with dilation {}) is larger than the padded input (size {}) in spatial dim {d}; input size: {}",
                kernel[d],
                dilation[d],
                padded,
                fmt_shape(in_shape)
            )));
        }
        grid.push((padded - span) / stride[d] + 1);
    }
    let (n, c) = (in_shape[0], in_shape[1]);
    let kn: usize = kernel.iter().product();
    let ln: usize = grid.iter().product();
    let plane: usize = spatial.iter().product();
    // Per (kernel offset, window position): offset into one (n, c) plane, or PAD_INDEX.
    let mut local =
        crate::tensor::creation::try_vec(crate::tensor::creation::checked_numel(&[kn, ln])?)?;
    let mut kpos = vec![0usize; sd];
    for _ in 0..kn {
        let mut lpos = vec![0usize; sd];
        for _ in 0..ln {
            let mut off = 0usize;
            let mut inside = true;
            for d in 0..sd {
                let p =
                    (lpos[d] * stride[d] + kpos[d] * dilation[d]) as isize - padding[d] as isize;
                if p < 0 || p as usize >= spatial[d] {
                    inside = false;
                    break;
                }
                off = off * spatial[d] + p as usize;
            }
            local.push(if inside { off } else { PAD_INDEX });
            increment(&mut lpos, &grid);
        }
        increment(&mut kpos, kernel);
    }
    let mut idx =
        crate::tensor::creation::try_vec(crate::tensor::creation::checked_numel(&[n, c, kn, ln])?)?;
    for plane_nr in 0..n * c {
        let base = plane_nr * plane;
        idx.extend(
            local
                .iter()
                .map(|&o| if o == PAD_INDEX { o } else { base + o }),
        );
    }
    Ok((idx, vec![n, c * kn, ln], grid))
}

/// Advance a row-major multi-index within `sizes` (wrapping to zero at the end).
fn increment(pos: &mut [usize], sizes: &[usize]) {
    for d in (0..pos.len()).rev() {
        pos[d] += 1;
        if pos[d] < sizes[d] {
            return;
        }
        pos[d] = 0;
    }
}
