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
        let k: usize = kernel.iter().product();
        let s = self.shape();
        if s.len() != 3 {
            return Err(Error::runtime(format!(
                "Expected 3D (batched) input to col2im, but got input of size: {}",
                fmt_shape(s)
            )));
        }
        if k == 0 || s[1] % k != 0 {
            return Err(Error::runtime(format!(
                "Expected size of input's dimension 1 to be divisible by the product of kernel_size, but got input.size(1)={} and kernel_size={}",
                s[1],
                fmt_shape(kernel)
            )));
        }
        let mut in_shape = vec![s[0], s[1] / k];
        in_shape.extend_from_slice(output_size);
        let (idx, cols_shape, grid) =
            window_index("col2im", &in_shape, kernel, dilation, padding, stride)?;
        if cols_shape[2] != s[2] {
            let tuple = |v: &[usize]| {
                let items: Vec<String> = v.iter().map(|x| x.to_string()).collect();
                format!("({})", items.join(", "))
            };
            let blocks: Vec<String> = grid.iter().map(|x| x.to_string()).collect();
            return Err(Error::runtime(format!(
                "Given output_size={}, kernel_size={}, dilation={}, padding={}, stride={}, expected size of input's dimension 2 to match the calculated number of sliding blocks {} = {}, but got input.size(2)={}.",
                tuple(output_size),
                tuple(kernel),
                tuple(dilation),
                tuple(padding),
                tuple(stride),
                blocks.join(" * "),
                cols_shape[2],
                s[2]
            )));
        }
        self.scatter_add_padded(&in_shape, &Arc::new(idx), IM2COL)
    }
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
