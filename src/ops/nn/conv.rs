//! Sliding-window primitives behind convolution, pooling and padding: `im2col` (torch's
//! `unfold`) and its adjoint `col2im` (torch's `fold`), built on a gather/scatter pair by flat
//! index in which a missing index (padding) reads as zero and is skipped on scatter. Each of the
//! pair is the other's backward, so everything built on them is differentiable to any order.

mod direct;
mod phases;
mod winograd;

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::graph::node::{grad_if_wanted, needs_grad, record, wants_grad};
use crate::kernels::gemm::gemm_block;
use crate::ops::indexing::take::{by_dtype, gather, scatter_add};
use crate::parallel::SendPtr;
use crate::tensor::shape::fmt_shape;
use crate::tensor::{DType, Dims, Element, Tensor};

pub use crate::ops::indexing::take::PAD_INDEX;

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

/// The number of samples in the `nb` leading (batch) dims of a physical tensor, and those dims.
fn lead_of(p: &Tensor, nb: usize) -> (usize, Vec<usize>) {
    let lead = p.shape()[..nb].to_vec();
    (lead.iter().product(), lead)
}

/// `idx` once per sample of `per` elements, the `k`-th copy shifted to sample `k`'s elements
/// ([`PAD_INDEX`] stays): the positions of a gather or scatter done on every sample at once.
fn per_sample_positions(idx: &[usize], per: usize, count: usize) -> Result<Vec<usize>> {
    let mut out = crate::tensor::creation::try_vec(idx.len().saturating_mul(count))?;
    for k in 0..count {
        let base = k * per;
        out.extend(
            idx.iter()
                .map(|&i| if i == PAD_INDEX { i } else { base + i }),
        );
    }
    Ok(out)
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
        // Inside vmap: one gather over every sample, each at its own copy of the positions.
        let per = self.numel();
        let batched = crate::tensor::batched::unary_all(self, |p, nb| {
            let (count, lead) = lead_of(p, nb);
            p.detach().gather_padded(
                &Arc::new(per_sample_positions(idx, per, count)?),
                &[lead, shape.to_vec()].concat(),
                names,
            )
        });
        let out = match batched {
            Some(r) => r?,
            None => crate::tensor::storage::with_dtype!(self.dtype(), T => Tensor::from_vec(
                self.with_contiguous_slice::<T, _>(|s| gather::<_, true>(s, idx))??,
                shape,
            )?),
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
        let batched = crate::tensor::batched::unary_all(self, |p, nb| {
            let (count, lead) = lead_of(p, nb);
            p.detach().scatter_add_padded(
                &[lead, shape.to_vec()].concat(),
                &Arc::new(per_sample_positions(idx, n, count)?),
                names,
            )
        });
        let out = if let Some(r) = batched {
            r?
        } else if self.dtype().is_half() {
            // Sums in float32, rounded once.
            crate::kernels::copy::via_compute(self, |w| {
                Tensor::from_vec(
                    w.with_contiguous_slice::<f32, _>(|s| scatter_add::<_, true>(s, idx, n))??,
                    shape,
                )
            })?
        } else {
            by_dtype!(self, shape, |s| scatter_add::<_, true>(s, idx, n),
                DType::Float32 => f32, _ => f64)
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
        if plane_table_applies(self) {
            let (table, out_shape, _) =
                window_table("im2col", self.shape(), kernel, dilation, padding, stride)?;
            let t = Arc::new(PlaneTable {
                table,
                plane: self.shape()[2..].iter().product(),
                planes: self.shape()[0] * self.shape()[1],
            });
            return t.gather(self, &out_shape);
        }
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
        if plane_table_applies(self) {
            let (table, _, _) =
                window_table("col2im", &in_shape, kernel, dilation, padding, stride)?;
            let t = Arc::new(PlaneTable {
                table,
                plane: in_shape[2..].iter().product(),
                planes: in_shape[0] * in_shape[1],
            });
            return t.scatter(self, &in_shape);
        }
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
    let (local, out_shape, grid) = window_table(op, in_shape, kernel, dilation, padding, stride)?;
    let (n, c) = (in_shape[0], in_shape[1]);
    let plane: usize = in_shape[2..].iter().product();
    let mut idx = crate::tensor::creation::try_vec(crate::tensor::creation::checked_numel(&[
        n * c,
        local.len(),
    ])?)?;
    for plane_nr in 0..n * c {
        let base = plane_nr * plane;
        idx.extend(
            local
                .iter()
                .map(|&o| if o == PAD_INDEX { o } else { base + o }),
        );
    }
    Ok((idx, out_shape, grid))
}

/// [`window_index`] for one `(n, c)` plane: the offset in the plane (or [`PAD_INDEX`]) of
/// every `(kernel offset, window position)`, which every plane repeats.
fn window_table(
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
    crate::tensor::creation::checked_numel(&[n, c, kn, ln])?;
    Ok((local, vec![n, c * kn, ln], grid))
}

/// The gather of [`Tensor::im2col`] as one table repeated over planes: output plane `p` reads
/// input plane `p` at the table's offsets. Building and walking a flat index per output
/// element (N·C times the table) cost as much as the copy itself.
struct PlaneTable {
    table: Vec<usize>,
    plane: usize,
    planes: usize,
}

impl PlaneTable {
    /// `x`'s planes through the table, shaped `shape`; recorded with [`PlaneTable::scatter`].
    fn gather(self: &Arc<Self>, x: &Tensor, shape: &[usize]) -> Result<Tensor> {
        let x = x.contiguous()?;
        let out = match x.dtype() {
            DType::Float32 => self.gather_as::<f32>(&x, shape)?,
            _ => self.gather_as::<f64>(&x, shape)?,
        };
        if needs_grad(&[&x]) {
            let (t, in_shape) = (self.clone(), x.shape().to_vec());
            record(IM2COL.gather, &[&x], &[&out], &[], false, move |g, _| {
                Ok(vec![Some(t.scatter(&g[0], &in_shape)?)])
            })?;
        }
        Ok(out)
    }

    fn gather_as<T: Element + num_traits::Float>(
        &self,
        x: &Tensor,
        shape: &[usize],
    ) -> Result<Tensor> {
        let (k, plane) = (self.table.len(), self.plane);
        let n = self.planes * k;
        let mut out = crate::tensor::creation::try_vec::<T>(n)?;
        let base = SendPtr(out.spare_capacity_mut().as_mut_ptr());
        x.with_contiguous_slice::<T, _>(|xs| {
            self.for_planes(k, &|p| {
                let src = &xs[p * plane..(p + 1) * plane];
                // SAFETY: output plane p belongs to this task alone.
                let o = unsafe { std::slice::from_raw_parts_mut(base.get().add(p * k), k) };
                for (v, &i) in o.iter_mut().zip(&self.table) {
                    v.write(if i == PAD_INDEX { T::zero() } else { src[i] });
                }
            });
        })?;
        // SAFETY: every output plane was written whole.
        unsafe { out.set_len(n) };
        Tensor::from_vec(out, shape)
    }

    /// `g`'s planes added back at the table's offsets (the adjoint), shaped `shape`; recorded
    /// with [`PlaneTable::gather`].
    fn scatter(self: &Arc<Self>, g: &Tensor, shape: &[usize]) -> Result<Tensor> {
        let g = g.contiguous()?;
        let out = match g.dtype() {
            DType::Float32 => self.scatter_as::<f32>(&g, shape)?,
            _ => self.scatter_as::<f64>(&g, shape)?,
        };
        if needs_grad(&[&g]) {
            let (t, g_shape) = (self.clone(), g.shape().to_vec());
            record(IM2COL.scatter, &[&g], &[&out], &[], false, move |gg, _| {
                Ok(vec![Some(t.gather(&gg[0], &g_shape)?)])
            })?;
        }
        Ok(out)
    }

    fn scatter_as<T: Element + num_traits::Float>(
        &self,
        g: &Tensor,
        shape: &[usize],
    ) -> Result<Tensor> {
        let (k, plane) = (self.table.len(), self.plane);
        let mut out = crate::tensor::creation::try_filled_vec(self.planes * plane, T::zero())?;
        let base = SendPtr(out.as_mut_ptr());
        g.with_contiguous_slice::<T, _>(|gs| {
            self.for_planes(k, &|p| {
                let src = &gs[p * k..(p + 1) * k];
                // SAFETY: input plane p belongs to this task alone.
                let o = unsafe { std::slice::from_raw_parts_mut(base.get().add(p * plane), plane) };
                for (&v, &i) in src.iter().zip(&self.table) {
                    if i != PAD_INDEX {
                        o[i] = o[i] + v;
                    }
                }
            });
        })?;
        Tensor::from_vec(out, shape)
    }

    /// `f(p)` for every plane, planes shared among threads when the work is large.
    fn for_planes(&self, k: usize, f: &(dyn Fn(usize) + Sync)) {
        let helpers = if self.planes * k >= crate::ops::elementwise::PAR_MIN_ELEMENTS {
            crate::parallel::helpers()
        } else {
            0
        };
        crate::parallel::share_work(helpers, self.planes, f);
    }
}

/// Whether the plane-table kernels take `t` (float32/float64, outside vmap).
fn plane_table_applies(t: &Tensor) -> bool {
    !t.is_batched() && matches!(t.dtype(), DType::Float32 | DType::Float64)
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

// ----- convolution ------------------------------------------------------------------------------
//
// Three kernels share one geometry: `Forward` (conv), `GradInput` (its adjoint in the input:
// conv_transpose's forward) and `GradWeight` (its adjoint in the weight). Each is bilinear, and
// the derivatives of each are the other two, so recording them as nodes whose backward calls
// them again makes every convolution differentiable to any order, while a backward that builds
// no graph runs the plain kernels.

/// The three bilinear convolution kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ConvKind {
    /// `(x, w) -> y`: the convolution (cross-correlation) itself.
    Forward,
    /// `(g, w) -> x-shaped`: the adjoint in the input (transposed convolution).
    GradInput,
    /// `(g, x) -> w-shaped`: the adjoint in the weight.
    GradWeight,
}

/// The geometry of one convolution, seen from the convolution's side: the "input" is the large
/// side (a conv's input, a conv_transpose's output) and the "output" the small one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConvGeometry {
    /// Batch size `N`.
    pub batch: usize,
    /// Channels of the input side.
    pub in_channels: usize,
    /// Channels of the output side.
    pub out_channels: usize,
    /// Channel groups (`in_channels` and `out_channels` are multiples of it).
    pub groups: usize,
    /// Spatial sizes of the input side.
    pub input: Vec<usize>,
    /// Spatial sizes of the output side.
    pub output: Vec<usize>,
    /// Kernel sizes.
    pub kernel: Vec<usize>,
    /// Strides.
    pub stride: Vec<usize>,
    /// Zero padding before each spatial dim (after it is implied by `output`).
    pub padding: Vec<usize>,
    /// Kernel dilation.
    pub dilation: Vec<usize>,
}

impl ConvGeometry {
    fn x_shape(&self) -> Vec<usize> {
        let mut s = vec![self.batch, self.in_channels];
        s.extend_from_slice(&self.input);
        s
    }

    fn y_shape(&self) -> Vec<usize> {
        let mut s = vec![self.batch, self.out_channels];
        s.extend_from_slice(&self.output);
        s
    }

    fn w_shape(&self) -> Vec<usize> {
        let mut s = vec![self.out_channels, self.in_channels / self.groups.max(1)];
        s.extend_from_slice(&self.kernel);
        s
    }

    /// The windows as rows along the last spatial dim (see [`Windows`]).
    fn windows(&self) -> Result<Windows> {
        let sd = self.kernel.len();
        let last = sd - 1;
        let outer_k = &self.kernel[..last];
        let outer_o = &self.output[..last];
        let (ko_n, rows): (usize, usize) = (outer_k.iter().product(), outer_o.iter().product());
        // Input strides of the outer dims (elements per step along each).
        let mut in_stride = vec![1usize; sd];
        for d in (0..last).rev() {
            in_stride[d] = in_stride[d + 1] * self.input[d + 1];
        }
        let mut base =
            crate::tensor::creation::try_vec(crate::tensor::creation::checked_numel(&[
                ko_n, rows,
            ])?)?;
        let mut kpos = vec![0usize; last];
        for _ in 0..ko_n {
            let mut rpos = vec![0usize; last];
            for _ in 0..rows {
                let mut off = Some(0usize);
                for d in 0..last {
                    let p = (rpos[d] * self.stride[d] + kpos[d] * self.dilation[d]) as isize
                        - self.padding[d] as isize;
                    if p < 0 || p as usize >= self.input[d] {
                        off = None;
                        break;
                    }
                    off = off.map(|o| o + p as usize * in_stride[d]);
                }
                base.push(off.unwrap_or(PAD_INDEX));
                increment(&mut rpos, outer_o);
            }
            increment(&mut kpos, outer_k);
        }
        let (w, ow, s) = (self.input[last], self.output[last], self.stride[last]);
        let spans = (0..self.kernel[last])
            .map(|j| {
                let shift = (j * self.dilation[last]) as isize - self.padding[last] as isize;
                let inside = |o: usize| {
                    let c = (o * s) as isize + shift;
                    c >= 0 && (c as usize) < w
                };
                let lo = (0..ow).find(|&o| inside(o)).unwrap_or(ow);
                let hi = (lo..ow).find(|&o| !inside(o)).unwrap_or(ow);
                (lo, hi, shift)
            })
            .collect();
        Ok(Windows {
            base,
            rows,
            ow,
            stride: s,
            spans,
        })
    }

    /// Whether the windows are the input itself (a 1x1 kernel, stride 1, no padding), so the
    /// input plane can serve as the column matrix without a copy.
    fn is_pointwise(&self) -> bool {
        self.kernel.iter().all(|&k| k == 1)
            && self.stride.iter().all(|&s| s == 1)
            && self.padding.iter().all(|&p| p == 0)
            && self.input == self.output
    }
}

/// Element types of the convolution kernels.
trait ConvScalar:
    crate::kernels::gemm::GemmScalar
    + Element
    + std::ops::Add<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::AddAssign
{
    /// This thread's scratch buffer of this type.
    fn scratch() -> &'static std::thread::LocalKey<std::cell::RefCell<Vec<Self>>>;

    /// The forward by Winograd's F(2x2, 3x3) where it applies to this type and geometry.
    fn winograd(
        _geo: &ConvGeometry,
        _x: &[Self],
        _w: &[Self],
        _bias: Option<&[Self]>,
    ) -> Option<Result<Vec<Self>>> {
        None
    }

    /// The stride-1 rewrite of a strided geometry where the stride-1 kernels take it.
    fn phases(_geo: &ConvGeometry) -> Option<phases::Phases> {
        None
    }

    /// The forward by the direct kernel where it applies to this type and geometry.
    fn direct(
        _geo: &ConvGeometry,
        _x: &[Self],
        _w: &[Self],
        _bias: Option<&[Self]>,
    ) -> Option<Result<Vec<Self>>> {
        None
    }

    /// The weight gradient by the direct kernel where it applies to this type and geometry.
    fn direct_grad_weight(
        _geo: &ConvGeometry,
        _gy: &[Self],
        _x: &[Self],
    ) -> Option<Result<Vec<Self>>> {
        None
    }

    /// The weight gradient by F(2x2, 3x3) where it applies to this type and geometry.
    fn winograd_grad_weight(
        _geo: &ConvGeometry,
        _gy: &[Self],
        _x: &[Self],
    ) -> Option<Result<Vec<Self>>> {
        None
    }
}

/// Scratch buffers up to this many elements stay with their thread between calls: zeroing a
/// fresh one costs as much as the im2col of a small layer.
const KEEP_SCRATCH: usize = 1 << 22;

thread_local! {
    static SCRATCH_F32: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
    static SCRATCH_F64: std::cell::RefCell<Vec<f64>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl ConvScalar for f32 {
    fn scratch() -> &'static std::thread::LocalKey<std::cell::RefCell<Vec<Self>>> {
        &SCRATCH_F32
    }

    fn winograd(
        geo: &ConvGeometry,
        x: &[f32],
        w: &[f32],
        bias: Option<&[f32]>,
    ) -> Option<Result<Vec<f32>>> {
        winograd::applies(geo).then(|| winograd::forward(geo, x, w, bias))
    }

    fn phases(geo: &ConvGeometry) -> Option<phases::Phases> {
        // 1-d layers keep im2col: on conv_transpose1d 32x32x128 (k 4, stride 2) the splits
        // cost more than the products save (0.42 against 0.36 ms). So do kernels the stride
        // does not divide well: a 3x3 kernel at stride 2 becomes four 2x2 ones, 16/9 the
        // products (64→128 channels on 56x56: 17.7 against 10.2 ms); 7x7 at stride 2 (16·4/49)
        // and 4x4 (exact) pay.
        phases::Phases::of(geo).filter(|p| {
            geo.kernel.len() >= 2
                && 3 * p.products() <= 4 * geo.kernel.iter().product::<usize>()
                && direct::applies(&p.geo).is_some()
        })
    }

    fn direct(
        geo: &ConvGeometry,
        x: &[f32],
        w: &[f32],
        bias: Option<&[f32]>,
    ) -> Option<Result<Vec<f32>>> {
        direct::applies(geo).map(|pp| direct::forward(geo, &pp, x, w, bias))
    }

    fn winograd_grad_weight(geo: &ConvGeometry, gy: &[f32], x: &[f32]) -> Option<Result<Vec<f32>>> {
        winograd::applies(geo).then(|| winograd::grad_weight(geo, gy, x))
    }

    fn direct_grad_weight(geo: &ConvGeometry, gy: &[f32], x: &[f32]) -> Option<Result<Vec<f32>>> {
        direct::applies(geo).map(|pp| direct::grad_weight(geo, &pp, gy, x))
    }
}
impl ConvScalar for f64 {
    fn scratch() -> &'static std::thread::LocalKey<std::cell::RefCell<Vec<Self>>> {
        &SCRATCH_F64
    }
}

/// A scratch buffer of at least `n` elements (its contents are stale: every kernel writes
/// what it reads), taken from this thread's cache when it has one.
fn take_scratch<T: ConvScalar>(n: usize) -> Result<Vec<T>> {
    let mut buf = T::scratch().with(|c| std::mem::take(&mut *c.borrow_mut()));
    if buf.len() < n {
        buf = crate::tensor::creation::try_filled_vec(n, T::ZERO)?;
    }
    Ok(buf)
}

fn return_scratch<T: ConvScalar>(buf: Vec<T>) {
    if buf.len() <= KEEP_SCRATCH {
        T::scratch().with(|c| {
            let mut cached = c.borrow_mut();
            if cached.len() < buf.len() {
                *cached = buf;
            }
        });
    }
}

/// Sizes the kernels share: channels per group, kernel and plane sizes.
struct Dims3 {
    cg: usize,
    og: usize,
    kn: usize,
    ln: usize,
    plane: usize,
}

impl Dims3 {
    /// All five, `(cg, og, kn, ln, plane)`.
    fn all(self) -> (usize, usize, usize, usize, usize) {
        (self.cg, self.og, self.kn, self.ln, self.plane)
    }
}

fn dims(geo: &ConvGeometry) -> Dims3 {
    Dims3 {
        cg: geo.in_channels / geo.groups,
        og: geo.out_channels / geo.groups,
        kn: geo.kernel.iter().product(),
        ln: geo.output.iter().product(),
        plane: geo.input.iter().product(),
    }
}

/// What the three kernels set up first: [`dims`] `(cg, og, kn, ln, plane)`, the number of
/// groups and the window table (`None` for a pointwise layer, whose input is its own column
/// matrix).
type Setup = (usize, usize, usize, usize, usize, usize, Option<Windows>);

fn setup(geo: &ConvGeometry) -> Result<Setup> {
    let win = if geo.is_pointwise() {
        None
    } else {
        Some(geo.windows()?)
    };
    let (cg, og, kn, ln, plane) = dims(geo).all();
    Ok((cg, og, kn, ln, plane, geo.groups, win))
}

/// A convolution's windows, row by row along the last spatial dim: where each output row of
/// each outer kernel offset starts in an input plane, and for each last-dim kernel offset the
/// span of output columns inside the input. Rows are then copied (stride 1) or strided, and
/// padding is filled without a test per element.
struct Windows {
    /// Per (outer kernel offset, output row): the input offset of that row, or [`PAD_INDEX`].
    base: Vec<usize>,
    /// Output rows (product of all output sizes but the last).
    rows: usize,
    /// Output columns (the last output size).
    ow: usize,
    /// Stride along the last dim.
    stride: usize,
    /// Per last-dim kernel offset: output columns `lo..hi` read the input, at column
    /// `o * stride + shift`.
    spans: Vec<(usize, usize, isize)>,
}

impl Windows {
    /// Call `f(window row, output row, input row start, lo, hi, shift)` for every row of the
    /// column matrix of one channel (`window row` counts kernel offsets; rows of padding get
    /// `None`).
    #[inline]
    fn each_row(&self, mut f: impl FnMut(usize, usize, Option<usize>, (usize, usize, isize))) {
        let kw = self.spans.len();
        for (ko, bases) in self.base.chunks_exact(self.rows.max(1)).enumerate() {
            for (j, &span) in self.spans.iter().enumerate() {
                for (r, &b) in bases.iter().enumerate() {
                    f(ko * kw + j, r, (b != PAD_INDEX).then_some(b), span);
                }
            }
        }
    }

    fn kernel_len(&self) -> usize {
        self.base.len() / self.rows.max(1) * self.spans.len()
    }
}

/// Fill the `cg * K` x `L` column matrix at `cols` (rows `ld` apart) with the windows of `cg`
/// input planes starting at `x`.
fn im2col_into<T: ConvScalar>(x: &[T], win: &Windows, plane: usize, cols: &mut [T], ld: usize) {
    let (ow, s) = (win.ow, win.stride);
    let kn = win.kernel_len();
    for c in 0..x.len() / plane.max(1) {
        let src = &x[c * plane..(c + 1) * plane];
        win.each_row(|k, r, base, (lo, hi, shift)| {
            let row = &mut cols[(c * kn + k) * ld + r * ow..][..ow];
            let Some(b) = base else {
                row.fill(T::ZERO);
                return;
            };
            row[..lo].fill(T::ZERO);
            row[hi..].fill(T::ZERO);
            let start = (b as isize + (lo * s) as isize + shift) as usize;
            if s == 1 {
                // A plain loop: rows are often a few elements (8 in LeNet's second layer),
                // where a memcpy call costs more than the copy.
                for (d, &v) in row[lo..hi].iter_mut().zip(&src[start..start + (hi - lo)]) {
                    *d = v;
                }
            } else {
                for (i, d) in row[lo..hi].iter_mut().enumerate() {
                    *d = src[start + i * s];
                }
            }
        });
    }
}

/// Add the `cg * K` x `L` column matrix at `cols` (rows `ld` apart) back into the `cg` planes
/// of `x`.
fn col2im_into<T: ConvScalar>(cols: &[T], win: &Windows, plane: usize, x: &mut [T], ld: usize) {
    let (ow, s) = (win.ow, win.stride);
    let kn = win.kernel_len();
    for c in 0..x.len() / plane.max(1) {
        let dst = &mut x[c * plane..(c + 1) * plane];
        win.each_row(|k, r, base, (lo, hi, shift)| {
            let Some(b) = base else { return };
            let row = &cols[(c * kn + k) * ld + r * ow..][..ow];
            let start = (b as isize + (lo * s) as isize + shift) as usize;
            for (i, &v) in row[lo..hi].iter().enumerate() {
                dst[start + i * s] += v;
            }
        });
    }
}

/// Images per gemm: enough columns (`images * L`) that the product is not dominated by its
/// fixed cost (LeNet's second layer has `L = 64`), and a fixed function of the shape, so the
/// result does not depend on the thread count.
fn images_per_block(batch: usize, ln: usize) -> usize {
    const COLUMNS: usize = 512;
    COLUMNS.div_ceil(ln.max(1)).clamp(1, batch.max(1))
}

/// Run `unit(u, scratch)` for `u` in `0..units`, in contiguous runs shared among threads when
/// the work (`flops` multiply-adds in all) pays for it; each run gets one scratch buffer.
fn for_units<T: ConvScalar>(
    units: usize,
    flops: usize,
    scratch: usize,
    unit: &(dyn Fn(usize, &mut Vec<T>) + Sync),
) -> Result<()> {
    let helpers = crate::parallel::helpers();
    let blocks = if helpers == 0 || flops < crate::kernels::gemm::PARALLEL_MIN_WORK {
        1
    } else {
        units.min(4 * (helpers + 1))
    };
    let failed = std::sync::atomic::AtomicBool::new(false);
    let block = |b: usize| {
        let Ok(mut buf) = take_scratch::<T>(scratch) else {
            failed.store(true, std::sync::atomic::Ordering::Relaxed);
            return;
        };
        for u in b * units / blocks..(b + 1) * units / blocks {
            unit(u, &mut buf);
        }
        return_scratch(buf);
    };
    crate::parallel::share_work(helpers, blocks, &block);
    if failed.load(std::sync::atomic::Ordering::Relaxed) {
        return Err(crate::tensor::creation::cannot_allocate(
            scratch as u128 * std::mem::size_of::<T>() as u128,
        ));
    }
    Ok(())
}

/// `y = conv(x, w) (+ bias)`, shape `(N, out_channels, *output)`.
fn conv_forward<T: ConvScalar>(
    geo: &ConvGeometry,
    x: &[T],
    w: &[T],
    bias: Option<&[T]>,
) -> Result<Vec<T>> {
    if let Some(ph) = T::phases(geo) {
        let (xs, ws) = (ph.split_input(x)?, ph.split_weight(w)?);
        return conv_forward(&ph.geo, &xs, &ws, bias);
    }
    if let Some(y) = T::winograd(geo, x, w, bias) {
        return y;
    }
    if let Some(pp) = depthwise_planes(geo) {
        return conv_forward_depthwise(geo, &pp, x, w, bias);
    }
    if let Some(y) = T::direct(geo, x, w, bias) {
        return y;
    }
    let (cg, og, kn, ln, plane, g, win) = setup(geo)?;
    let nb = images_per_block(geo.batch, ln);
    if takes_bands(geo.batch.div_ceil(nb) * g, og) {
        return conv_forward_banded(geo, x, w, bias, nb, &win);
    }
    let total = geo.batch * geo.out_channels * ln;
    let mut y = crate::tensor::creation::try_vec::<T>(total)?;
    // SAFETY: every element is written below (each unit its rows of its images) before `y` is
    // read; on an error `y` is dropped unread. `T` is a plain float.
    unsafe { y.set_len(total) };
    let yp = SendPtr(y.as_mut_ptr());
    let ck = cg * kn;
    let blocks = geo.batch.div_ceil(nb);
    let flops = geo.batch * geo.out_channels * ln * ck;
    // Column matrix (ck x nb*L) then the block's output (og x nb*L).
    let scratch = nb * ln * (ck + og);
    for_units::<T>(blocks * g, flops, scratch, &|u, buf| {
        let (blk, gi) = (u / g, u % g);
        let (n0, n1) = (blk * nb, ((blk + 1) * nb).min(geo.batch));
        let cols_n = (n1 - n0) * ln;
        let (cols, out) = buf.split_at_mut(ck * nb * ln);
        let image = |n: usize| &x[(n * geo.in_channels + gi * cg) * plane..][..cg * plane];
        // A single image read in place when the windows are the input itself.
        let (b, ldb): (&[T], usize) = match (&win, n1 - n0) {
            (None, 1) => (image(n0), ln),
            _ => {
                for n in n0..n1 {
                    let dst = &mut cols[(n - n0) * ln..];
                    match &win {
                        Some(win) => im2col_into(image(n), win, plane, dst, cols_n),
                        None => {
                            for (c, row) in image(n).chunks_exact(plane).enumerate() {
                                dst[c * cols_n..][..plane].copy_from_slice(row);
                            }
                        }
                    }
                }
                (&cols[..], cols_n)
            }
        };
        // A single image's product goes straight into its rows of `y`; a block of images is
        // computed side by side and then split per image.
        let single = n1 - n0 == 1;
        let out: &mut [T] = if single {
            // SAFETY: unit (block, group) alone owns rows `gi*og..(gi+1)*og` of image n0 of `y`.
            unsafe {
                std::slice::from_raw_parts_mut(
                    yp.get().add((n0 * geo.out_channels + gi * og) * ln),
                    og * ln,
                )
            }
        } else {
            out
        };
        // SAFETY: `w` holds `og` rows of `ck` for the group, `b` is `ck` x `cols_n` with rows
        // `ldb` apart, `out` has room for `og` x `cols_n` and overlaps neither.
        unsafe {
            gemm_block(
                (cols_n, og, ck),
                (out.as_mut_ptr(), 1, cols_n),
                false,
                (b.as_ptr(), 1, ldb as isize),
                (w[gi * og * ck..].as_ptr(), 1, ck as isize),
            );
        }
        if single {
            if let Some(bias) = bias {
                for (o, row) in out.chunks_exact_mut(ln.max(1)).enumerate() {
                    let v = bias[gi * og + o];
                    row.iter_mut().for_each(|d| *d += v);
                }
            }
            return;
        }
        for n in n0..n1 {
            // SAFETY: unit (block, group) owns rows `gi*og..(gi+1)*og` of its images of `y`.
            let dst = unsafe {
                std::slice::from_raw_parts_mut(
                    yp.get().add((n * geo.out_channels + gi * og) * ln),
                    og * ln,
                )
            };
            for (o, row) in dst.chunks_exact_mut(ln.max(1)).enumerate() {
                let src = &out[o * cols_n + (n - n0) * ln..][..ln];
                let v = bias.map_or(T::ZERO, |b| b[gi * og + o]);
                for (d, &s) in row.iter_mut().zip(src) {
                    *d = s + v;
                }
            }
        }
    })?;
    Ok(y)
}

/// The column matrix (`cg * K` x `(n1 - n0) * L`) of images `n0..n1`, group `gi`, at the
/// start of `cols`, built by ranges of input channels shared among the threads.
fn im2col_shared<T: ConvScalar>(
    geo: &ConvGeometry,
    x: &[T],
    win: &Option<Windows>,
    (n0, n1, gi): (usize, usize, usize),
    cols: &mut [T],
) {
    let Dims3 {
        cg, kn, ln, plane, ..
    } = dims(geo);
    let cols_n = (n1 - n0) * ln;
    let image = |n: usize| &x[(n * geo.in_channels + gi * cg) * plane..][..cg * plane];
    // A few ranges per thread, whole rows of `kn` each.
    let ranges = cg.min(16);
    let cp = SendPtr(cols[..cg * kn * cols_n].as_mut_ptr());
    crate::parallel::share_work(crate::parallel::helpers(), ranges, &|r| {
        let (c0, c1) = (r * cg / ranges, (r + 1) * cg / ranges);
        // SAFETY: range r alone writes rows c0*kn..c1*kn of the column matrix, inside `cols`.
        let dst = unsafe {
            std::slice::from_raw_parts_mut(cp.get().add(c0 * kn * cols_n), (c1 - c0) * kn * cols_n)
        };
        for n in n0..n1 {
            let src = &image(n)[c0 * plane..c1 * plane];
            let at = &mut dst[(n - n0) * ln..];
            match win {
                Some(win) => im2col_into(src, win, plane, at, cols_n),
                None => {
                    for (c, row) in src.chunks_exact(plane).enumerate() {
                        at[c * cols_n..][..plane].copy_from_slice(row);
                    }
                }
            }
        }
    });
}

/// Below this many (block of images, group) units the im2col forward shares each unit among
/// the threads instead ([`conv_forward_banded`]). A fixed count, not the thread count, so the
/// path and the result do not depend on the threads.
const BANDED_UNITS: usize = 4;

/// The fewest output channels per band of [`conv_forward_banded`].
const OUT_BAND: usize = 64;

/// Whether an im2col layer of `units` (block of images, group) units and `og` output channels
/// per group takes the banded forward and weight gradient.
fn takes_bands(units: usize, og: usize) -> bool {
    units < BANDED_UNITS && og >= 2 * OUT_BAND
}

/// The banded paths' bands of output channels, `(band, bands)`: at least OUT_BAND channels,
/// at most BANDED_UNITS bands. Every band packs the column matrix again, which costs about
/// 32 / band of its product (8x512x7x7: 64-channel bands 8.7 ms, 128-channel ones 7.4).
fn out_bands(og: usize) -> (usize, usize) {
    let band = og.div_ceil(BANDED_UNITS).next_multiple_of(16).max(OUT_BAND);
    (band, og.div_ceil(band))
}

/// The im2col forward for layers with few units (small images, few images, many channels: a
/// 512-channel 7x7 layer on one image is one unit, which ran on one thread): each unit's
/// column matrix is built by channel ranges in parallel, then its product is cut into bands
/// of output channels shared among the threads.
fn conv_forward_banded<T: ConvScalar>(
    geo: &ConvGeometry,
    x: &[T],
    w: &[T],
    bias: Option<&[T]>,
    nb: usize,
    win: &Option<Windows>,
) -> Result<Vec<T>> {
    let Dims3 { cg, og, kn, ln, .. } = dims(geo);
    let ck = cg * kn;
    let total = geo.batch * geo.out_channels * ln;
    let mut y = crate::tensor::creation::try_vec::<T>(total)?;
    // SAFETY: every element is written below (each band its channels of each block's images)
    // before `y` is read; on an error `y` is dropped unread. `T` is a plain float.
    unsafe { y.set_len(total) };
    let yp = SendPtr(y.as_mut_ptr());
    let mut cols = crate::tensor::creation::try_vec::<T>(ck * nb * ln)?;
    // SAFETY: each block's column matrix is written whole (every channel range) before its
    // product reads it. `T` is a plain float.
    unsafe { cols.set_len(ck * nb * ln) };
    let helpers = crate::parallel::helpers();
    let (band, bands) = out_bands(og);
    for blk in 0..geo.batch.div_ceil(nb) {
        let (n0, n1) = (blk * nb, ((blk + 1) * nb).min(geo.batch));
        let cols_n = (n1 - n0) * ln;
        for gi in 0..geo.groups {
            im2col_shared(geo, x, win, (n0, n1, gi), &mut cols);
            let cols = &cols[..ck * cols_n];
            crate::parallel::share_work(helpers, bands, &|b| {
                let (o0, o1) = (b * band, ((b + 1) * band).min(og));
                let mut out = vec![T::ZERO; (o1 - o0) * cols_n];
                // SAFETY: `w` holds og rows of `ck` for the group (rows o0..o1 read), `cols`
                // is ck x cols_n, `out` has room for (o1 - o0) x cols_n and overlaps neither.
                unsafe {
                    crate::kernels::gemm::gemm_block(
                        (cols_n, o1 - o0, ck),
                        (out.as_mut_ptr(), 1, cols_n),
                        false,
                        (cols.as_ptr(), 1, cols_n as isize),
                        (w[(gi * og + o0) * ck..].as_ptr(), 1, ck as isize),
                    );
                }
                for n in n0..n1 {
                    for o in o0..o1 {
                        let ch = n * geo.out_channels + gi * og + o;
                        // SAFETY: band b alone writes channels o0..o1 of group gi of image n.
                        let dst =
                            unsafe { std::slice::from_raw_parts_mut(yp.get().add(ch * ln), ln) };
                        let src = &out[(o - o0) * cols_n + (n - n0) * ln..][..ln];
                        let v = bias.map_or(T::ZERO, |bv| bv[gi * og + o]);
                        for (d, &s) in dst.iter_mut().zip(src) {
                            *d = s + v;
                        }
                    }
                }
            });
        }
    }
    Ok(y)
}

/// The block of `g` for images `n0..n1` and group `gi` as one `og` x `(n1 - n0) * L` matrix.
fn gather_grad_block<T: ConvScalar>(
    geo: &ConvGeometry,
    gy: &[T],
    (n0, n1, gi): (usize, usize, usize),
    dst: &mut [T],
) {
    let Dims3 { og, ln, .. } = dims(geo);
    let cols_n = (n1 - n0) * ln;
    for n in n0..n1 {
        let src = &gy[(n * geo.out_channels + gi * og) * ln..][..og * ln];
        for (o, row) in src.chunks_exact(ln.max(1)).enumerate() {
            dst[o * cols_n + (n - n0) * ln..][..ln].copy_from_slice(row);
        }
    }
}

/// [`gather_grad_block`] transposed: `(n1 - n0) * L` rows of `og`, so the weight gradient's
/// product reads both operands along its reduction with unit stride (no transposing pack).
fn gather_grad_block_t<T: ConvScalar>(
    geo: &ConvGeometry,
    gy: &[T],
    (n0, n1, gi): (usize, usize, usize),
    dst: &mut [T],
) {
    let Dims3 { og, ln, .. } = dims(geo);
    for n in n0..n1 {
        let src = &gy[(n * geo.out_channels + gi * og) * ln..][..og * ln];
        let dst = &mut dst[(n - n0) * ln * og..][..ln * og];
        // Blocks of positions keep the og source lines in L1 while they are read across.
        for l0 in (0..ln).step_by(16) {
            for o in 0..og {
                let row = &src[o * ln..][..ln];
                for l in l0..(l0 + 16).min(ln) {
                    dst[l * og + o] = row[l];
                }
            }
        }
    }
}

/// With stride 1 the adjoint in the input is itself a convolution: of `g` with the weight
/// flipped in space and transposed in channels, padded by `dilation * (kernel - 1) - padding`.
/// That runs as a forward convolution (a long gemm reduction over `out_channels * K`) instead
/// of a short one over `out_channels` followed by a scatter: about 1.6x faster on 3x3 layers.
/// `None` where it does not apply (strides, or padding beyond the dilated kernel) or does not
/// pay: it computes a product per input position, the scatter one per output position, so an
/// input much larger than the output (LeNet's valid 5x5 on 12x12: 2.25x) keeps the scatter.
#[allow(clippy::type_complexity)]
fn as_forward<T: ConvScalar>(
    geo: &ConvGeometry,
    w: &[T],
) -> Result<Option<(ConvGeometry, Vec<T>)>> {
    let sd = geo.kernel.len();
    let span = |d: usize| geo.dilation[d] * (geo.kernel[d].max(1) - 1);
    if geo.stride.iter().any(|&s| s != 1)
        || (0..sd).any(|d| geo.padding[d] > span(d))
        || geo.kernel.contains(&0)
        || geo.is_pointwise()
        || geo.input.iter().product::<usize>() * 4 > geo.output.iter().product::<usize>() * 5
    {
        return Ok(None);
    }
    let Dims3 { cg, og, kn, .. } = dims(geo);
    let g = geo.groups;
    // w: (g, og, cg, K) -> flipped: (g, cg, og, K reversed)
    let mut wf = crate::tensor::creation::try_filled_vec(w.len(), T::ZERO)?;
    for gi in 0..g {
        for o in 0..og {
            for c in 0..cg {
                let src = &w[((gi * og + o) * cg + c) * kn..][..kn];
                let dst = &mut wf[((gi * cg + c) * og + o) * kn..][..kn];
                for (d, &v) in dst.iter_mut().zip(src.iter().rev()) {
                    *d = v;
                }
            }
        }
    }
    let flipped = ConvGeometry {
        batch: geo.batch,
        in_channels: geo.out_channels,
        out_channels: geo.in_channels,
        groups: g,
        input: geo.output.clone(),
        output: geo.input.clone(),
        kernel: geo.kernel.clone(),
        stride: geo.stride.clone(),
        padding: (0..sd).map(|d| span(d) - geo.padding[d]).collect(),
        dilation: geo.dilation.clone(),
    };
    Ok(Some((flipped, wf)))
}

/// The adjoint of [`conv_forward`] in `x`: `(N, in_channels, *input)` from `g`
/// `(N, out_channels, *output)` (plus `bias` per channel: conv_transpose's bias).
fn conv_grad_input<T: ConvScalar>(
    geo: &ConvGeometry,
    gy: &[T],
    w: &[T],
    bias: Option<&[T]>,
) -> Result<Vec<T>> {
    if let Some(ph) = T::phases(geo) {
        let gs = conv_grad_input(&ph.geo, gy, &ph.split_weight(w)?, None)?;
        let mut gx = ph.merge_input(&gs)?;
        if let Some(bias) = bias {
            let plane = geo.input.iter().product::<usize>().max(1);
            for (i, p) in gx.chunks_exact_mut(plane).enumerate() {
                let v = bias[i % geo.in_channels];
                p.iter_mut().for_each(|e| *e += v);
            }
        }
        return Ok(gx);
    }
    if let Some((flipped, w_flipped)) = as_forward(geo, w)? {
        return conv_forward(&flipped, gy, &w_flipped, bias);
    }
    let (cg, og, kn, ln, plane, g, win) = setup(geo)?;
    let mut x =
        crate::tensor::creation::try_filled_vec(geo.batch * geo.in_channels * plane, T::ZERO)?;
    let xp = SendPtr(x.as_mut_ptr());
    let ck = cg * kn;
    let nb = images_per_block(geo.batch, ln);
    let blocks = geo.batch.div_ceil(nb);
    let flops = geo.batch * geo.out_channels * ln * ck;
    // The block's gradient (og x nb*L), then its column matrix (ck x nb*L).
    let scratch = nb * ln * (og + ck);
    for_units::<T>(blocks * g, flops, scratch, &|u, buf| {
        let (blk, gi) = (u / g, u % g);
        let (n0, n1) = (blk * nb, ((blk + 1) * nb).min(geo.batch));
        let cols_n = (n1 - n0) * ln;
        let (gb, cols) = buf.split_at_mut(og * nb * ln);
        gather_grad_block(geo, gy, (n0, n1, gi), gb);
        // cols (ck x cols_n) = W_g^T (ck x og) @ g (og x cols_n): `w` read transposed.
        // SAFETY: as in `conv_forward`.
        unsafe {
            gemm_block(
                (ck, cols_n, og),
                (cols.as_mut_ptr(), cols_n, 1),
                false,
                (w[gi * og * ck..].as_ptr(), 1, ck as isize),
                (gb.as_ptr(), cols_n as isize, 1),
            );
        }
        for n in n0..n1 {
            // SAFETY: unit (block, group) owns planes `gi*cg..(gi+1)*cg` of its images of `x`.
            let xs = unsafe {
                std::slice::from_raw_parts_mut(
                    xp.get().add((n * geo.in_channels + gi * cg) * plane),
                    cg * plane,
                )
            };
            let src = &cols[(n - n0) * ln..];
            match &win {
                Some(win) => col2im_into(src, win, plane, xs, cols_n),
                None => {
                    for (c, p) in xs.chunks_exact_mut(plane.max(1)).enumerate() {
                        p.copy_from_slice(&src[c * cols_n..][..plane]);
                    }
                }
            }
            if let Some(bias) = bias {
                for (c, p) in xs.chunks_exact_mut(plane.max(1)).enumerate() {
                    let v = bias[gi * cg + c];
                    p.iter_mut().for_each(|e| *e += v);
                }
            }
        }
    })?;
    Ok(x)
}

/// The partial results (consecutive runs of `n` in `partial`) added into the first, in order,
/// so the sum is the same at any thread count; returns that first run.
fn sum_partials<T: ConvScalar>(partial: &mut [T], n: usize) -> &mut [T] {
    let (first, rest) = partial.split_at_mut(n.min(partial.len()));
    if n > 0 {
        for part in rest.chunks_exact(n) {
            for (o, &v) in first.iter_mut().zip(part) {
                *o += v;
            }
        }
    }
    first
}

/// Images summed per partial result in [`conv_grad_weight`]: a fixed split (not one per thread)
/// so the sum's order, and so the result, is the same at any thread count.
const WEIGHT_CHUNKS: usize = 8;

/// A stride-1 convolution's input (1 to 3 spatial dims, read as depth x height x width with
/// missing leading dims of 1) zero-padded so that every window is a shift of one volume: with
/// the output laid out at the padded width `wp` (columns `ow..wp` unused), the input under
/// kernel offset `(a, i, j)` for output position `l` of output depth `z` is
/// `xp[z·slice + l + a·dd·slice + i·dh·wp + j·dw]`.
struct PaddedPlanes {
    /// Padded width: the output width plus the dilated kernel's extent.
    wp: usize,
    /// Elements per padded depth slice (padded height x `wp`).
    slice: usize,
    /// Elements per padded volume, with room for the last window's overhang.
    pitch: usize,
    /// Output positions per output depth slice at the padded width (`oh · wp`).
    lp: usize,
    /// Output depth slices (1 below 3 dims).
    depth: usize,
    /// Per kernel offset, its shift in the padded volume.
    shifts: Vec<usize>,
    /// Zero slices/rows/columns before the input: (front, top, left).
    before: (usize, usize, usize),
    /// The input's (depth, height, width).
    input: (usize, usize, usize),
}

impl PaddedPlanes {
    /// The layout for `geo`, or `None` unless it has 1 to 3 spatial dims, stride 1, and its
    /// output does not crop the input's far side.
    fn of(geo: &ConvGeometry) -> Option<PaddedPlanes> {
        let sd = geo.kernel.len();
        if !(1..=3).contains(&sd)
            || geo.stride.iter().any(|&s| s != 1)
            || geo.output.contains(&0)
            || geo.input.contains(&0)
        {
            return None;
        }
        // Per dim (depth, height, width), the missing leading ones of size 1.
        let at = |v: &[usize], d: usize, one: usize| (d + sd).checked_sub(3).map_or(one, |i| v[i]);
        let ext = |d: usize| at(&geo.dilation, d, 1) * (at(&geo.kernel, d, 1).max(1) - 1);
        let out = |d: usize| at(&geo.output, d, 1);
        let (inp, pad) = (
            |d: usize| at(&geo.input, d, 1),
            |d: usize| at(&geo.padding, d, 0),
        );
        let (dp, hp, wp) = (out(0) + ext(0), out(1) + ext(1), out(2) + ext(2));
        if [dp, hp, wp]
            .iter()
            .enumerate()
            .any(|(d, &p)| p < pad(d) + inp(d))
        {
            return None;
        }
        let slice = hp * wp;
        let (dil, k) = (|d| at(&geo.dilation, d, 1), |d| at(&geo.kernel, d, 1));
        let mut shifts = Vec::with_capacity(k(0) * k(1) * k(2));
        for a in 0..k(0) {
            for i in 0..k(1) {
                for j in 0..k(2) {
                    shifts.push(a * dil(0) * slice + i * dil(1) * wp + j * dil(2));
                }
            }
        }
        Some(PaddedPlanes {
            wp,
            slice,
            pitch: dp * slice + ext(2),
            lp: out(1) * wp,
            depth: out(0),
            shifts,
            before: (pad(0), pad(1), pad(2)),
            input: (inp(0), inp(1), inp(2)),
        })
    }

    /// Copy the planes of one image (`x`: whole input volumes one after another) into `dst`
    /// (padded volumes, `pitch` apart), writing the zeros around them too.
    fn fill<T: ConvScalar>(&self, x: &[T], dst: &mut [T]) {
        let (front, top, left) = self.before;
        let (id, ih, iw) = self.input;
        let volume = id * ih * iw;
        for (src, d) in x
            .chunks_exact(volume.max(1))
            .zip(dst.chunks_exact_mut(self.pitch))
        {
            let mut done = (front * self.slice) + top * self.wp + left;
            d[..done].fill(T::ZERO);
            for (z, plane) in src.chunks_exact((ih * iw).max(1)).enumerate() {
                if z > 0 {
                    // The previous slice's bottom rows and this one's top rows are zeros.
                    let start = (front + z) * self.slice + top * self.wp + left;
                    d[done..start].fill(T::ZERO);
                    done = start;
                }
                for row in plane.chunks_exact(iw.max(1)) {
                    d[done..done + iw].copy_from_slice(row);
                    // This row's right padding and the next one's left padding are adjacent.
                    let next = (done + self.wp).min(self.pitch);
                    d[done + iw..next].fill(T::ZERO);
                    done = next;
                }
            }
            d[done..].fill(T::ZERO);
        }
    }
}

/// The padded-plane layout of a depthwise 2-d stride-1 layer (one input and one output channel
/// per group), which [`conv_forward_depthwise`] and [`conv_grad_weight_depthwise`] run
/// directly: as a gemm its products are 1 x K by K x L, far too thin for the kernels.
fn depthwise_planes(geo: &ConvGeometry) -> Option<PaddedPlanes> {
    let depthwise = geo.groups == geo.in_channels && geo.groups == geo.out_channels;
    PaddedPlanes::of(geo)
        .filter(|_| depthwise && geo.kernel.len() == 2 && geo.kernel.iter().product::<usize>() > 1)
}

/// `acc += k · x` (vectorised).
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx2+avx+fma",
    "x86_64+avx2+avx+fma"
))]
fn axpy<T: ConvScalar>(acc: &mut [T], x: &[T], k: T) {
    for (a, &v) in acc.iter_mut().zip(x) {
        *a += k * v;
    }
}

/// `Σ a · b` in `T` lanes, added in order (vectorised).
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx2+avx+fma",
    "x86_64+avx2+avx+fma"
))]
fn dot<T: ConvScalar>(a: &[T], b: &[T]) -> T {
    let mut lanes = [T::ZERO; 16];
    let (ac, bc) = (a.chunks_exact(16), b.chunks_exact(16));
    let (ar, br) = (ac.remainder(), bc.remainder());
    for (x, y) in ac.zip(bc) {
        for ((l, &p), &q) in lanes.iter_mut().zip(x).zip(y) {
            *l += p * q;
        }
    }
    let mut s = lanes.iter().fold(T::ZERO, |s, &l| s + l);
    for (&p, &q) in ar.iter().zip(br) {
        s += p * q;
    }
    s
}

/// A depthwise layer's output: per `(n, c)` plane, the zero-padded input shifted by each
/// kernel offset times that tap, summed at the padded width, then compacted with the bias.
fn conv_forward_depthwise<T: ConvScalar>(
    geo: &ConvGeometry,
    pp: &PaddedPlanes,
    x: &[T],
    w: &[T],
    bias: Option<&[T]>,
) -> Result<Vec<T>> {
    let (kn, ln, plane) = (dims(geo).kn, dims(geo).ln, dims(geo).plane);
    let (c, ow) = (geo.in_channels, geo.output[1]);
    let units = geo.batch * c;
    let mut y = crate::tensor::creation::try_vec::<T>(units * ln)?;
    let yp = SendPtr(y.spare_capacity_mut().as_mut_ptr());
    for_units::<T>(units, units * ln * kn, pp.pitch + pp.lp, &|u, buf| {
        let ch = u % c;
        let (xp, acc) = buf.split_at_mut(pp.pitch);
        let acc = &mut acc[..pp.lp];
        pp.fill(&x[u * plane..(u + 1) * plane], xp);
        acc.fill(T::ZERO);
        for (k, &shift) in pp.shifts.iter().enumerate() {
            axpy(acc, &xp[shift..shift + pp.lp], w[ch * kn + k]);
        }
        let b = bias.map_or(T::ZERO, |b| b[ch]);
        // SAFETY: unit u alone writes plane u of `y`.
        let dst = unsafe { std::slice::from_raw_parts_mut(yp.get().add(u * ln), ln) };
        for (drow, srow) in dst.chunks_exact_mut(ow.max(1)).zip(acc.chunks(pp.wp)) {
            for (d, &v) in drow.iter_mut().zip(srow) {
                d.write(v + b);
            }
        }
    })?;
    // SAFETY: every plane of `y` was written whole above.
    unsafe { y.set_len(units * ln) };
    Ok(y)
}

/// A depthwise layer's weight gradient: per `(n, c)` plane and kernel offset, the dot of the
/// output gradient (laid out at the padded width) with the shifted padded input; the planes'
/// partial sums added over the batch in order, so the result is the same at any thread count.
fn conv_grad_weight_depthwise<T: ConvScalar>(
    geo: &ConvGeometry,
    pp: &PaddedPlanes,
    gy: &[T],
    x: &[T],
) -> Result<Vec<T>> {
    let (kn, ln, plane) = (dims(geo).kn, dims(geo).ln, dims(geo).plane);
    let (c, ow) = (geo.in_channels, geo.output[1]);
    let units = geo.batch * c;
    let mut partial = crate::tensor::creation::try_filled_vec(units * kn, T::ZERO)?;
    let pp_ptr = SendPtr(partial.as_mut_ptr());
    for_units::<T>(units, units * ln * kn, pp.pitch + pp.lp, &|u, buf| {
        let (xp, gp) = buf.split_at_mut(pp.pitch);
        let gp = &mut gp[..pp.lp];
        pp.fill(&x[u * plane..(u + 1) * plane], xp);
        gp.fill(T::ZERO);
        for (drow, srow) in gp
            .chunks_mut(pp.wp)
            .zip(gy[u * ln..(u + 1) * ln].chunks(ow.max(1)))
        {
            drow[..ow].copy_from_slice(srow);
        }
        // SAFETY: unit u alone writes its kn partial sums.
        let out = unsafe { std::slice::from_raw_parts_mut(pp_ptr.get().add(u * kn), kn) };
        for (o, &shift) in out.iter_mut().zip(&pp.shifts) {
            *o = dot(gp, &xp[shift..shift + pp.lp]);
        }
    })?;
    let mut gw = vec![T::ZERO; c * kn];
    for n in 0..geo.batch {
        for (acc, &v) in gw.iter_mut().zip(&partial[n * c * kn..(n + 1) * c * kn]) {
            *acc += v;
        }
    }
    Ok(gw)
}

/// [`conv_grad_weight`] for 2-d stride-1 layers with many output channels, as implicit
/// products: per kernel offset, `gw[:, :, k] += gᵀ-block (og x lp) @ shifted padded input
/// (lp x cg)`, the reduction running along output positions. No column matrix is built (for a
/// 64-channel 3x3 layer it is 9x the input), only a zero-padded copy of the input.
fn conv_grad_weight_implicit<T: ConvScalar>(
    geo: &ConvGeometry,
    pp: &PaddedPlanes,
    gy: &[T],
    x: &[T],
) -> Result<Vec<T>> {
    let (cg, og, kn, ln, plane) = dims(geo).all();
    let (g, ck, ow) = (geo.groups, cg * kn, geo.output[1]);
    let wn = geo.out_channels * ck;
    let chunks = geo.batch.clamp(1, WEIGHT_CHUNKS);
    // Partial sums per chunk of images, laid out (group, offset, c, o): each product writes a
    // column-major og x cg block.
    let mut partial = crate::tensor::creation::try_filled_vec(chunks * wn, T::ZERO)?;
    let ptr = SendPtr(partial.as_mut_ptr());
    let flops = geo.batch * geo.out_channels * ln * ck;
    let (gt_len, xp_len) = (pp.lp * og, cg * pp.pitch);
    for_units::<T>(chunks, flops, gt_len + xp_len, &|c, buf| {
        // SAFETY: chunk c owns partial result c.
        let acc = unsafe { std::slice::from_raw_parts_mut(ptr.get().add(c * wn), wn) };
        let (gt, xp) = buf.split_at_mut(gt_len);
        // Unused columns of gᵀ stay zero; only the valid ones are rewritten per image.
        gt.fill(T::ZERO);
        for n in c * geo.batch / chunks..(c + 1) * geo.batch / chunks {
            for gi in 0..g {
                // gᵀ at the padded width: row l = oh·wp + ow holds the og channels.
                let src = &gy[(n * geo.out_channels + gi * og) * ln..][..og * ln];
                for oh in 0..geo.output[0] {
                    for o in 0..og {
                        let row = &src[o * ln + oh * ow..][..ow];
                        for (j, &v) in row.iter().enumerate() {
                            gt[(oh * pp.wp + j) * og + o] = v;
                        }
                    }
                }
                let xs = &x[(n * geo.in_channels + gi * cg) * plane..][..cg * plane];
                pp.fill(xs, xp);
                for (k, &shift) in pp.shifts.iter().enumerate() {
                    // SAFETY: a is og x lp (rows 1 apart, columns og) inside gt; b is lp x cg
                    // (columns a pitch apart) inside xp: shift + lp <= pitch by construction;
                    // the destination block lies inside acc.
                    unsafe {
                        gemm_block(
                            (og, cg, pp.lp),
                            (acc[(gi * kn + k) * cg * og..].as_mut_ptr(), 1, og),
                            true,
                            (gt.as_ptr(), 1, og as isize),
                            (xp[shift..].as_ptr(), 1, pp.pitch as isize),
                        );
                    }
                }
            }
        }
    })?;
    let first = sum_partials(&mut partial, wn);
    let mut out = crate::tensor::creation::try_filled_vec(wn, T::ZERO)?;
    for gi in 0..g {
        for k in 0..kn {
            let src = &first[(gi * kn + k) * cg * og..][..cg * og];
            for (ci, col) in src.chunks_exact(og.max(1)).enumerate() {
                for (o, &v) in col.iter().enumerate() {
                    out[(gi * og + o) * ck + ci * kn + k] = v;
                }
            }
        }
    }
    Ok(out)
}

/// The weight gradient `(groups, og, ck)` from its column-major sums (`(groups, ck, og)`).
fn per_group_transposed<T: ConvScalar>(
    sums: &[T],
    groups: usize,
    og: usize,
    ck: usize,
) -> Result<Vec<T>> {
    let mut out = crate::tensor::creation::try_filled_vec(groups * og * ck, T::ZERO)?;
    for gi in 0..groups {
        let (src, dst) = (
            &sums[gi * og * ck..][..og * ck],
            &mut out[gi * og * ck..][..og * ck],
        );
        for (c, col) in src.chunks_exact(og.max(1)).enumerate() {
            for (o, &v) in col.iter().enumerate() {
                dst[o * ck + c] = v;
            }
        }
    }
    Ok(out)
}

/// [`conv_grad_weight`]'s im2col product for layers with few units, as
/// [`conv_forward_banded`] does the forward: each unit's column matrix built by channel ranges
/// in parallel, its product cut into bands of output channels, each band owning its rows of
/// the gradient (no partial sums). 8 images of 512 channels at 7x7 ran on one thread.
fn conv_grad_weight_banded<T: ConvScalar>(
    geo: &ConvGeometry,
    gy: &[T],
    x: &[T],
    nb: usize,
    win: &Option<Windows>,
) -> Result<Vec<T>> {
    let Dims3 { cg, og, kn, ln, .. } = dims(geo);
    let ck = cg * kn;
    let wn = geo.out_channels * ck;
    // The gradient column-major per group (og x ck, element (o, c) at c·og + o), the product's
    // natural layout with g read transposed (see conv_grad_weight).
    let mut acc = crate::tensor::creation::try_filled_vec(wn, T::ZERO)?;
    let mut gb = crate::tensor::creation::try_vec::<T>(og * nb * ln)?;
    let mut cols = crate::tensor::creation::try_vec::<T>(ck * nb * ln)?;
    // SAFETY: each block's prefix of both is written whole (gather, im2col) before its product
    // reads it. `T` is a plain float.
    unsafe {
        gb.set_len(og * nb * ln);
        cols.set_len(ck * nb * ln);
    }
    let helpers = crate::parallel::helpers();
    let (band, bands) = out_bands(og);
    let ap = SendPtr(acc.as_mut_ptr());
    for blk in 0..geo.batch.div_ceil(nb) {
        let (n0, n1) = (blk * nb, ((blk + 1) * nb).min(geo.batch));
        let cols_n = (n1 - n0) * ln;
        for gi in 0..geo.groups {
            gather_grad_block_t(geo, gy, (n0, n1, gi), &mut gb);
            im2col_shared(geo, x, win, (n0, n1, gi), &mut cols);
            let (gb, cols) = (&gb[..og * cols_n], &cols[..ck * cols_n]);
            crate::parallel::share_work(helpers, bands, &|b| {
                let o0 = b * band;
                let rows = band.min(og - o0);
                // acc_g[o0.., :] += g[o0.., :] (rows x cols_n) @ colsᵀ (cols_n x ck).
                // SAFETY: band b alone writes rows o0..o0 + rows of group gi's gradient (a
                // strided block inside `acc`); `gb` holds cols_n rows of og, `cols` ck rows of
                // cols_n; neither overlaps `acc`.
                unsafe {
                    gemm_block(
                        (rows, ck, cols_n),
                        (ap.get().add(gi * og * ck + o0), 1, og),
                        true,
                        (gb[o0..].as_ptr(), 1, og as isize),
                        (cols.as_ptr(), 1, cols_n as isize),
                    );
                }
            });
        }
    }
    per_group_transposed(&acc, geo.groups, og, ck)
}

/// The adjoint of [`conv_forward`] in `w`: `(out_channels, in_channels / groups, *kernel)`
/// from `g` `(N, out_channels, *output)` and `x`.
fn conv_grad_weight<T: ConvScalar>(geo: &ConvGeometry, gy: &[T], x: &[T]) -> Result<Vec<T>> {
    if let Some(ph) = T::phases(geo) {
        let gs = conv_grad_weight(&ph.geo, gy, &ph.split_input(x)?)?;
        return ph.merge_weight(&gs);
    }
    if let Some(gw) = T::winograd_grad_weight(geo, gy, x) {
        return gw;
    }
    if let Some(pp) = depthwise_planes(geo) {
        return conv_grad_weight_depthwise(geo, &pp, gy, x);
    }
    if let Some(gw) = T::direct_grad_weight(geo, gy, x) {
        return gw;
    }
    if let Some(pp) = PaddedPlanes::of(geo)
        .filter(|pp| geo.kernel.len() == 2 && dims(geo).og >= 16 && pp.lp >= 256)
    {
        return conv_grad_weight_implicit(geo, &pp, gy, x);
    }
    let (cg, og, kn, ln, plane, g, win) = setup(geo)?;
    let ck = cg * kn;
    let wn = geo.out_channels * ck;
    let nb = images_per_block(geo.batch, ln);
    let blocks = geo.batch.div_ceil(nb);
    if takes_bands(blocks * g, og) {
        return conv_grad_weight_banded(geo, gy, x, nb, &win);
    }
    let chunks = blocks.clamp(1, WEIGHT_CHUNKS);
    let mut partial = crate::tensor::creation::try_filled_vec(chunks * wn, T::ZERO)?;
    let pp = SendPtr(partial.as_mut_ptr());
    let flops = geo.batch * geo.out_channels * ln * ck;
    let scratch = nb * ln * (og + ck);
    let col_major = og >= 16;
    for_units::<T>(chunks, flops, scratch, &|c, buf| {
        // SAFETY: chunk c owns partial result c.
        let acc = unsafe { std::slice::from_raw_parts_mut(pp.get().add(c * wn), wn) };
        let (gb, cols) = buf.split_at_mut(og * nb * ln);
        for blk in c * blocks / chunks..(c + 1) * blocks / chunks {
            let (n0, n1) = (blk * nb, ((blk + 1) * nb).min(geo.batch));
            let cols_n = (n1 - n0) * ln;
            for gi in 0..g {
                if col_major {
                    gather_grad_block_t(geo, gy, (n0, n1, gi), gb);
                } else {
                    gather_grad_block(geo, gy, (n0, n1, gi), gb);
                }
                for n in n0..n1 {
                    let xs = &x[(n * geo.in_channels + gi * cg) * plane..][..cg * plane];
                    let dst = &mut cols[(n - n0) * ln..];
                    match &win {
                        Some(win) => im2col_into(xs, win, plane, dst, cols_n),
                        None => {
                            for (ci, row) in xs.chunks_exact(plane.max(1)).enumerate() {
                                dst[ci * cols_n..][..plane].copy_from_slice(row);
                            }
                        }
                    }
                }
                // acc_g (og x ck) += g (og x cols_n) @ cols^T (cols_n x ck). With many
                // output channels acc_g is held column-major and g read from its transposed
                // copy: the product's natural layouts, so packing transposes nothing (2x on a
                // 64-channel 3x3 layer). With few, the copy costs more than it saves.
                let (dst_rs, dst_cs, a_rs, a_cs) = if col_major {
                    (1, og, 1, og as isize)
                } else {
                    (ck, 1, cols_n as isize, 1)
                };
                // SAFETY: both operands lie in `buf`, the destination in `acc`.
                unsafe {
                    gemm_block(
                        (og, ck, cols_n),
                        (acc[gi * og * ck..].as_mut_ptr(), dst_rs, dst_cs),
                        true,
                        (gb.as_ptr(), a_rs, a_cs),
                        (cols.as_ptr(), 1, cols_n as isize),
                    );
                }
            }
        }
    })?;
    let first = sum_partials(&mut partial, wn);
    if !col_major {
        partial.truncate(wn);
        return Ok(partial);
    }
    per_group_transposed(first, g, og, ck)
}

/// Run `f` on the elements of `t` (of type `T`) in row-major order: borrowed when contiguous,
/// else copied by a loop over the strides. Gradients often arrive as broadcast views (the
/// backward of a sum), which a generic n-d iterator copies many times slower.
pub(crate) fn with_dense<T: Element, R>(t: &Tensor, f: impl FnOnce(&[T]) -> R) -> Result<R> {
    if t.is_contiguous() {
        return t.with_contiguous_slice(f);
    }
    let mut out = crate::tensor::creation::try_vec(t.numel())?;
    {
        let guard = t.storage().read();
        let data = T::data(&guard)
            .ok_or_else(|| crate::tensor::dtype_mismatch(T::DTYPE, t.dtype()))?
            .as_slice();
        let l = t.layout();
        strided_copy(data, l.offset, &l.shape, &l.strides, &mut out);
    }
    Ok(f(&out))
}

fn strided_copy<T: Copy>(
    src: &[T],
    off: usize,
    shape: &[usize],
    strides: &[usize],
    out: &mut Vec<T>,
) {
    match shape {
        [] => out.push(src[off]),
        [n] if strides[0] == 0 => out.extend(std::iter::repeat_n(src[off], *n)),
        [n] => out.extend((0..*n).map(|i| src[off + i * strides[0]])),
        [n, ..] => {
            for i in 0..*n {
                strided_copy(src, off + i * strides[0], &shape[1..], &strides[1..], out);
            }
        }
    }
}

fn same_float(a: &Tensor, b: &Tensor) -> Result<()> {
    if a.dtype() != b.dtype() {
        if a.dtype() == DType::Float32 && b.dtype() == DType::Float64 {
            return Err(Error::runtime(format!(
                "Input type (torch.{}) and weight type (torch.{}) should be the same or input should be a MKLDNN tensor and weight is a dense tensor",
                a.dtype().legacy_name(),
                b.dtype().legacy_name()
            )));
        }
        return Err(crate::tensor::dtype_mismatch(a.dtype(), b.dtype()));
    }
    float_only(a, "convolution")
}

/// Run one of the three kernels on `a` and `b` (and a bias for the first two), recording a
/// node named `name` whose backward calls the other two.
fn conv_apply(
    kind: ConvKind,
    a: &Tensor,
    b: &Tensor,
    bias: Option<&Tensor>,
    geo: &Arc<ConvGeometry>,
    name: &'static str,
) -> Result<Tensor> {
    same_float(a, b)?;
    let (out_shape, bias_len) = match kind {
        ConvKind::Forward => (geo.y_shape(), geo.out_channels),
        ConvKind::GradInput => (geo.x_shape(), geo.in_channels),
        ConvKind::GradWeight => (geo.w_shape(), 0),
    };
    let bias = bias.filter(|_| kind != ConvKind::GradWeight);
    if let Some(bias) = bias {
        if bias.dtype() != a.dtype() {
            return Err(Error::runtime(format!(
                "Input type ({}) and bias type ({}) should be the same",
                a.dtype().c_name(),
                bias.dtype().c_name()
            )));
        }
        if bias.numel() != bias_len {
            return Err(Error::runtime("internal error: convolution bias size"));
        }
    }
    macro_rules! run {
        ($t:ty) => {{
            with_dense::<$t, _>(a, |av| {
                with_dense::<$t, _>(b, |bv| {
                    let bias_vec = bias.map(|t| t.to_vec::<$t>()).transpose()?;
                    let bias_s = bias_vec.as_deref();
                    match kind {
                        ConvKind::Forward => conv_forward(geo, av, bv, bias_s),
                        ConvKind::GradInput => conv_grad_input(geo, av, bv, bias_s),
                        ConvKind::GradWeight => conv_grad_weight(geo, av, bv),
                    }
                })
            })???
        }};
    }
    let mut operands: Vec<&Tensor> = vec![a, b];
    operands.extend(bias);
    let out = if a.numel() == 0 || b.numel() == 0 {
        // Nothing to sum over (an empty batch or channel dim): the bias alone, without the
        // kernels, whose geometry tables follow the output size, huge even when empty.
        empty_operand_result(&out_shape, a.dtype(), bias)?
    } else {
        // Inside vmap: one sample at a time (no batched kernel yet).
        let per_sample = crate::ops::batching::per_sample(&operands, |p| {
            conv_apply(kind, &p[0], &p[1], p.get(2), geo, name)
        });
        match per_sample {
            Some(r) => r?,
            None => match a.dtype() {
                DType::Float32 => Tensor::from_vec(run!(f32), &out_shape)?,
                _ => Tensor::from_vec(run!(f64), &out_shape)?,
            },
        }
    };
    let mut inputs: Vec<&Tensor> = vec![a, b];
    inputs.extend(bias);
    if needs_grad(&inputs) {
        let has_bias = bias.is_some();
        let geo = geo.clone();
        record(name, &inputs, &[&out], &[a, b], false, move |g, s| {
            let (u, a, b) = (&g[0], &s[0], &s[1]);
            let nd = geo.kernel.len();
            let spatial: Vec<i64> = std::iter::once(0).chain(2..2 + nd as i64).collect();
            let back = BACKWARD_NAME;
            let (ga, gb) = match kind {
                // y = F(x, w): dx = GI(u, w), dw = GW(u, x)
                ConvKind::Forward => (
                    grad_if_wanted(0, || {
                        conv_apply(ConvKind::GradInput, u, b, None, &geo, back)
                    })?,
                    grad_if_wanted(1, || {
                        conv_apply(ConvKind::GradWeight, u, a, None, &geo, back)
                    })?,
                ),
                // x = GI(g, w): dg = F(u, w), dw = GW(g, u); a transposed convolution's
                // backward, whose output gradient both take split into phases, once.
                ConvKind::GradInput if wants_grad(0) && wants_grad(1) => {
                    match transpose_backward_shared(&geo, u, a, b)? {
                        Some((dg, dw)) => (Some(dg), Some(dw)),
                        None => (
                            Some(conv_apply(ConvKind::Forward, u, b, None, &geo, back)?),
                            Some(conv_apply(ConvKind::GradWeight, a, u, None, &geo, back)?),
                        ),
                    }
                }
                ConvKind::GradInput => (
                    grad_if_wanted(0, || conv_apply(ConvKind::Forward, u, b, None, &geo, back))?,
                    grad_if_wanted(1, || {
                        conv_apply(ConvKind::GradWeight, a, u, None, &geo, back)
                    })?,
                ),
                // w = GW(g, x): dg = F(x, u), dx = GI(g, u)
                ConvKind::GradWeight => (
                    grad_if_wanted(0, || conv_apply(ConvKind::Forward, b, u, None, &geo, back))?,
                    grad_if_wanted(1, || {
                        conv_apply(ConvKind::GradInput, a, u, None, &geo, back)
                    })?,
                ),
            };
            let mut grads = vec![ga, gb];
            if has_bias {
                grads.push(grad_if_wanted(2, || u.sum_dims(&spatial, false))?);
            }
            Ok(grads)
        })?;
    }
    Ok(out)
}

/// Both gradients of `x = GI(g, w)` (a transposed convolution), `F(u, w)` and `GW(g, u)`, with
/// the output gradient `u` split into the geometry's phases once for both, where each kernel
/// would split it again. `None` where that path does not apply: no phase split for this
/// geometry (or float64), a graph of the backward being built, an operand batched by vmap or
/// empty; the caller then runs the two kernels through [`conv_apply`].
fn transpose_backward_shared(
    geo: &ConvGeometry,
    u: &Tensor,
    g: &Tensor,
    w: &Tensor,
) -> Result<Option<(Tensor, Tensor)>> {
    let Some(ph) = <f32 as ConvScalar>::phases(geo) else {
        return Ok(None);
    };
    let operands = [u, g, w];
    if needs_grad(&operands)
        || operands
            .iter()
            .any(|t| t.dtype() != DType::Float32 || t.is_batched() || t.numel() == 0)
    {
        return Ok(None);
    }
    let (dg, dw) = with_dense::<f32, _>(u, |uv| {
        with_dense::<f32, _>(g, |gv| {
            with_dense::<f32, _>(w, |wv| -> Result<(Vec<f32>, Vec<f32>)> {
                let us = ph.split_input(uv)?;
                let dg = conv_forward(&ph.geo, &us, &ph.split_weight(wv)?, None)?;
                let dw = ph.merge_weight(&conv_grad_weight(&ph.geo, gv, &us)?)?;
                Ok((dg, dw))
            })
        })
    })????;
    Ok(Some((
        Tensor::from_vec(dg, &geo.y_shape())?,
        Tensor::from_vec(dw, &geo.w_shape())?,
    )))
}

/// A convolution's result when an operand has no element: zeros of `shape` (channels in dim 1)
/// plus the bias.
fn empty_operand_result(shape: &[usize], dtype: DType, bias: Option<&Tensor>) -> Result<Tensor> {
    let numel = crate::tensor::creation::checked_numel(shape)?;
    let mut out = crate::tensor::creation::try_vec::<f64>(numel)?;
    out.resize(numel, 0.0);
    if let (Some(bias), Some(&channels)) = (bias, shape.get(1)) {
        let b = bias.to_dtype(DType::Float64)?.to_vec::<f64>()?;
        let inner: usize = shape[2..].iter().product();
        for (i, v) in out.iter_mut().enumerate() {
            *v = b[(i / inner.max(1)) % channels];
        }
    }
    Tensor::from_vec(out, shape)?.to_dtype(dtype)
}

/// torch's name of the node of a convolution (and of a transposed one).
const CONV_NODE: &str = "ConvolutionBackward0";

/// torch's name of the node of a convolution's backward when it is itself differentiated.
const BACKWARD_NAME: &str = "ConvolutionBackwardBackward0";

/// Padding of a convolution: sizes per spatial dim (one value is repeated), or torch's
/// `'same'` (output as large as the input; stride 1 only) or `'valid'` (no padding).
#[derive(Clone, Copy, Debug)]
pub enum ConvPadding<'a> {
    /// Zero padding on both sides of each spatial dim.
    Explicit(&'a [i64]),
    /// Pad so that the output has the input's size (any odd total goes after).
    Same,
    /// No padding.
    Valid,
}

/// `v` with one entry per spatial dim (a single value repeats), or torch's error.
fn expand(name: &str, v: &[i64], nd: usize) -> Result<Vec<i64>> {
    if v.len() == 1 {
        return Ok(vec![v[0]; nd]);
    }
    if v.len() != nd {
        let items: Vec<String> = v.iter().map(|x| x.to_string()).collect();
        return Err(Error::runtime(format!(
            "expected {name} to be a single integer value or a list of {nd} values to match the convolution dimensions, but got {name}={}",
            format_args!("[{}]", items.join(", "))
        )));
    }
    Ok(v.to_vec())
}

fn sizes(v: &[i64]) -> Vec<usize> {
    v.iter().map(|&x| x.max(0) as usize).collect()
}

fn joined(v: impl IntoIterator<Item = i64>) -> String {
    v.into_iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(" x ")
}

/// torch's checks of a convolution's arguments shared by both directions, in its order.
fn check_conv_args(
    weight: &Tensor,
    stride: &[i64],
    padding: &[i64],
    output_padding: &[i64],
    dilation: &[i64],
    groups: i64,
) -> Result<()> {
    if groups <= 0 {
        return Err(Error::runtime("non-positive groups is not supported"));
    }
    if padding.iter().any(|&p| p < 0) {
        return Err(Error::runtime("negative padding is not supported"));
    }
    if output_padding.iter().any(|&p| p < 0) {
        return Err(Error::runtime("negative output_padding is not supported"));
    }
    if stride.iter().any(|&s| s <= 0) {
        return Err(Error::runtime("non-positive stride is not supported"));
    }
    // Negative dilation fails here; zero passes torch's generic checks and fails after the
    // shape checks (see `check_zero_dilation`).
    if dilation.iter().any(|&d| d < 0) {
        return Err(Error::runtime("dilation should be greater than zero"));
    }
    let ws = weight.shape();
    let g = groups as usize;
    if ws[0] < g {
        return Err(Error::runtime(format!(
            "Given groups={groups}, expected weight to be at least {groups} at dimension 0, but got weight of size {} instead",
            fmt_shape(ws)
        )));
    }
    if !ws[0].is_multiple_of(g) {
        return Err(Error::runtime(format!(
            "Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, but got weight of size [{}] instead",
            fmt_shape(ws)
        )));
    }
    Ok(())
}

fn check_zero_dilation(dilation: &[i64]) -> Result<()> {
    if dilation.contains(&0) {
        return Err(Error::runtime("dilation should be greater than zero"));
    }
    Ok(())
}

/// The input as a batch: `(unbatched, batched input)`, or torch's rank error.
fn batched(x: &Tensor, nd: usize, op: &str) -> Result<(bool, Tensor)> {
    if x.dim() == nd + 2 {
        Ok((false, x.clone()))
    } else if x.dim() == nd + 1 {
        Ok((true, x.unsqueeze(0)?))
    } else {
        Err(Error::runtime(format!(
            "Expected {}D (unbatched) or {}D (batched) input to {op}, but got input of size: {}",
            nd + 1,
            nd + 2,
            fmt_shape(x.shape())
        )))
    }
}

fn unbatch(y: Tensor, unbatched: bool) -> Result<Tensor> {
    if unbatched {
        y.squeeze(Some(0))
    } else {
        Ok(y)
    }
}

fn weight_rank(x: &Tensor, weight: &Tensor) -> Result<()> {
    if weight.dim() != x.dim() {
        return Err(Error::runtime(format!(
            "Expected {wd}-dimensional input for {wd}-dimensional weight {}, but got {}-dimensional input of size {} instead",
            fmt_shape(weight.shape()),
            x.dim(),
            fmt_shape(x.shape()),
            wd = weight.dim()
        )));
    }
    Ok(())
}

fn check_bias(bias: Option<&Tensor>, weight: &Tensor, len: usize, transposed: bool) -> Result<()> {
    if let Some(b) = bias {
        if b.dim() != 1 || b.shape()[0] != len {
            return Err(Error::runtime(format!(
                "Given {}weight of size {}, expected bias to be 1-dimensional with {len} elements, but got bias of size {} instead",
                if transposed { "transposed=1, " } else { "" },
                fmt_shape(weight.shape()),
                fmt_shape(b.shape())
            )));
        }
    }
    Ok(())
}

/// `conv` and `conv{1,2,3}d`: a convolution over `nd` spatial dims (`None`: as many as the
/// weight has), the op named `conv{nd}d` in torch's errors.
macro_rules! conv_nd {
    ($($(#[$doc:meta])* $name:ident = $nd:expr;)*) => {$(
        $(#[$doc])*
        pub fn $name(
            &self,
            weight: &Tensor,
            bias: Option<&Tensor>,
            stride: &[i64],
            padding: ConvPadding<'_>,
            dilation: &[i64],
            groups: i64,
        ) -> Result<Tensor> {
            self.conv_nd($nd, weight, bias, stride, padding, dilation, groups)
        }
    )*};
}

impl Tensor {
    conv_nd! {
        /// N-d convolution (cross-correlation, as torch's `conv{1,2,3}d`) of `(N, C, *spatial)` or
        /// unbatched `(C, *spatial)` input with a `(O, C / groups, *kernel)` weight and optional
        /// `(O,)` bias. `stride` and `dilation` hold one value per spatial dim or a single one;
        /// `groups` splits the channels (`groups == C`: depthwise). Lowered to gemm over im2col
        /// windows, in parallel over images and groups; differentiable to any order. Bad ranks,
        /// channels, groups or sizes give torch's errors.
        conv = None;
        /// [`Tensor::conv`] for `(N, C, L)` inputs.
        conv1d = Some(1);
        /// [`Tensor::conv`] for `(N, C, H, W)` inputs.
        conv2d = Some(2);
        /// [`Tensor::conv`] for `(N, C, D, H, W)` inputs.
        conv3d = Some(3);
    }

    #[allow(clippy::too_many_arguments)]
    fn conv_nd(
        &self,
        nd: Option<usize>,
        weight: &Tensor,
        bias: Option<&Tensor>,
        stride: &[i64],
        padding: ConvPadding<'_>,
        dilation: &[i64],
        groups: i64,
    ) -> Result<Tensor> {
        if let Some(r) = Tensor::lift_half([self, weight], [bias], |[x, w], [b]| {
            x.conv_nd(nd, w, b, stride, padding, dilation, groups)
        }) {
            return r;
        }
        let nd = nd.unwrap_or_else(|| weight.dim().saturating_sub(2).max(1));
        let (unbatched, x) = batched(self, nd, &format!("conv{nd}d"))?;
        let k = weight.dim().saturating_sub(2);
        let stride = expand("stride", stride, k)?;
        let dilation = expand("dilation", dilation, k)?;
        let explicit = match padding {
            ConvPadding::Explicit(p) => expand("padding", p, k)?,
            _ => vec![0; k],
        };
        if matches!(padding, ConvPadding::Same) && stride.iter().any(|&s| s != 1) {
            return Err(Error::runtime(
                "padding='same' is not supported for strided convolutions",
            ));
        }
        check_conv_args(weight, &stride, &explicit, &[], &dilation, groups)?;
        weight_rank(&x, weight)?;
        let ws = weight.shape();
        let xs = x.shape();
        let g = groups as usize;
        if xs[1] != ws[1] * g {
            return Err(Error::runtime(format!(
                "Given groups={groups}, weight of size {}, expected input{} to have {} channels, but got {} channels instead",
                fmt_shape(ws),
                fmt_shape(xs),
                ws[1] * g,
                xs[1]
            )));
        }
        check_bias(bias, weight, ws[0], false)?;
        check_zero_dilation(&dilation)?;
        let kernel = ws[2..].to_vec();
        let (stride, dilation) = (sizes(&stride), sizes(&dilation));
        // Padding before and after each dim ('same' puts an odd total's extra after).
        let (lo, hi): (Vec<usize>, Vec<usize>) = match padding {
            ConvPadding::Same => (0..k)
                .map(|d| {
                    let total = dilation[d] * (kernel[d].max(1) - 1);
                    (total / 2, total - total / 2)
                })
                .unzip(),
            _ => (sizes(&explicit), sizes(&explicit)),
        };
        let spatial = &xs[2..];
        let padded: Vec<i64> = (0..k)
            .map(|d| (spatial[d] + lo[d] + hi[d]) as i64)
            .collect();
        let span: Vec<i64> = (0..k)
            .map(|d| (dilation[d] * (kernel[d].max(1) - 1) + 1) as i64)
            .collect();
        if (0..k).any(|d| padded[d] < span[d]) {
            return Err(Error::runtime(format!(
                "Calculated padded input size per channel: ({}). Kernel size: ({}). Kernel size can't be greater than actual input size",
                joined(padded.iter().copied()),
                joined(span.iter().copied())
            )));
        }
        let output = (0..k)
            .map(|d| (padded[d] - span[d]) as usize / stride[d] + 1)
            .collect();
        let geo = Arc::new(ConvGeometry {
            batch: xs[0],
            in_channels: xs[1],
            out_channels: ws[0],
            groups: g,
            input: spatial.to_vec(),
            output,
            kernel,
            stride,
            padding: lo,
            dilation,
        });
        let y = conv_apply(ConvKind::Forward, &x, weight, bias, &geo, CONV_NODE)?;
        unbatch(y, unbatched)
    }

    /// N-d transposed convolution (torch's `conv_transpose{1,2,3}d`, the adjoint of
    /// [`Tensor::conv`] in its input) of `(N, C, *spatial)` or unbatched input with a
    /// `(C, O / groups, *kernel)` weight and optional `(O,)` bias. Output size per dim:
    /// `(in - 1) * stride - 2 * padding + dilation * (kernel - 1) + output_padding + 1`;
    /// `output_padding` must be below the stride or the dilation. Torch's errors on bad input.
    #[allow(clippy::too_many_arguments)]
    pub fn conv_transpose(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        stride: &[i64],
        padding: &[i64],
        output_padding: &[i64],
        groups: i64,
        dilation: &[i64],
    ) -> Result<Tensor> {
        let nd = weight.dim().saturating_sub(2).max(1);
        self.conv_transpose_nd(
            nd,
            weight,
            bias,
            stride,
            padding,
            output_padding,
            groups,
            dilation,
        )
    }

    /// [`Tensor::conv_transpose`] as torch's `conv_transpose{nd}d`: the input must have
    /// `nd + 1` or `nd + 2` dims (the message names that op).
    #[allow(clippy::too_many_arguments)]
    pub fn conv_transpose_nd(
        &self,
        nd: usize,
        weight: &Tensor,
        bias: Option<&Tensor>,
        stride: &[i64],
        padding: &[i64],
        output_padding: &[i64],
        groups: i64,
        dilation: &[i64],
    ) -> Result<Tensor> {
        if let Some(r) = Tensor::lift_half([self, weight], [bias], |[x, w], [b]| {
            x.conv_transpose_nd(nd, w, b, stride, padding, output_padding, groups, dilation)
        }) {
            return r;
        }
        let op = format!("conv_transpose{nd}d");
        let (unbatched, x) = batched(self, nd, &op)?;
        let k = weight.dim().saturating_sub(2);
        let stride = expand("stride", stride, k)?;
        let padding = expand("padding", padding, k)?;
        let output_padding = expand("output_padding", output_padding, k)?;
        let dilation = expand("dilation", dilation, k)?;
        check_conv_args(
            weight,
            &stride,
            &padding,
            &output_padding,
            &dilation,
            groups,
        )?;
        weight_rank(&x, weight)?;
        let ws = weight.shape();
        let xs = x.shape();
        let g = groups as usize;
        if xs[1] != ws[0] {
            return Err(Error::runtime(format!(
                "Given transposed=1, weight of size {}, expected input{} to have {} channels, but got {} channels instead",
                fmt_shape(ws),
                fmt_shape(xs),
                ws[0],
                xs[1]
            )));
        }
        check_bias(bias, weight, ws[1] * g, true)?;
        check_zero_dilation(&dilation)?;
        if (0..k).any(|d| output_padding[d] >= stride[d] && output_padding[d] >= dilation[d]) {
            // torch runs 1-d as 2-d with a unit height, and names that dim in the message.
            let part = |name: &str, v: &[i64], unit: i64| -> String {
                let v: Vec<i64> = if k == 1 { vec![unit, v[0]] } else { v.to_vec() };
                v.iter()
                    .enumerate()
                    .map(|(d, x)| format!("{name}_{}: {x}", dim_name(d, v.len())))
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            return Err(Error::runtime(format!(
                "output padding must be smaller than either stride or dilation, but got {} {} {}",
                part("output_padding", &output_padding, 0),
                part("stride", &stride, 1),
                part("dilation", &dilation, 1)
            )));
        }
        let kernel = ws[2..].to_vec();
        let spatial = &xs[2..];
        let big: Vec<i64> = (0..k)
            .map(|d| {
                (spatial[d] as i64 - 1) * stride[d] - 2 * padding[d]
                    + dilation[d] * (kernel[d] as i64 - 1)
                    + output_padding[d]
                    + 1
            })
            .collect();
        if big.iter().any(|&b| b < 0) {
            return Err(Error::runtime(format!(
                "Given input size per channel: ({}). Calculated output size per channel: ({}). Output size is too small",
                joined(spatial.iter().map(|&s| s as i64)),
                joined(big.iter().copied())
            )));
        }
        let geo = Arc::new(ConvGeometry {
            batch: xs[0],
            in_channels: ws[1] * g,
            out_channels: ws[0],
            groups: g,
            input: sizes(&big),
            output: spatial.to_vec(),
            kernel,
            stride: sizes(&stride),
            padding: sizes(&padding),
            dilation: sizes(&dilation),
        });
        let y = conv_apply(ConvKind::GradInput, &x, weight, bias, &geo, CONV_NODE)?;
        unbatch(y, unbatched)
    }
}
