//! `pad`: constant, reflect, replicate and circular padding (negative amounts crop) over the
//! last `pads.len() / 2` dims, as one gather whose backward scatters back.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::graph::node::{needs_grad, record};
use crate::kernels::copy::cast;
use crate::ops::nn::conv::{GatherNames, PAD_INDEX};
use crate::ops::nn::softmax::assume_init;
use crate::parallel::SendPtr;
use crate::tensor::shape::fmt_shape;
use crate::tensor::{DType, Element, Tensor};

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
    if nd >= 1 && !input.is_batched() && matches!(input.dtype(), DType::Float32 | DType::Float64) {
        let fill = match mode {
            PadMode::Constant(v) => v,
            _ => 0.0,
        };
        let map = Arc::new(RowMap::new(
            &shape,
            &per_dim,
            fill,
            mode.names(pads.len() / 2),
        ));
        return map.gather(&input.contiguous()?, false);
    }
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

/// A pad as whole rows along the last dim: for each output row the input row it reads (`None`:
/// a row of the fill), and the output columns as one contiguous run of input columns (copied
/// whole) plus the columns outside it (the reflected or wrapped edges, or the fill). The gather
/// copies rows and its adjoint adds them back, each input row summing its output rows in order,
/// so results do not depend on the thread count. Replaces a flat index per element (16x32x64x64
/// constant pad: 9.5 ms).
struct RowMap {
    in_shape: Vec<usize>,
    out_shape: Vec<usize>,
    rows: Vec<Option<usize>>,
    /// Output rows reading input row `i`: `readers[reader_start[i]..reader_start[i + 1]]`, in
    /// order (the adjoint's work per input row; one flat list, not a vector per row).
    reader_start: Vec<usize>,
    readers: Vec<usize>,
    /// Output columns `start..start + len` read input columns `first..first + len`.
    run: (usize, usize, usize),
    /// The other output columns and the input column each reads (`None`: the fill).
    edges: Vec<(usize, Option<usize>)>,
    fill: f64,
    names: GatherNames,
}

impl RowMap {
    fn new(
        in_shape: &[usize],
        per_dim: &[Vec<Option<usize>>],
        fill: f64,
        names: GatherNames,
    ) -> Self {
        let nd = in_shape.len();
        let cols = &per_dim[nd - 1];
        let mut rows: Vec<Option<usize>> = vec![Some(0)];
        for (d, src) in per_dim[..nd - 1].iter().enumerate() {
            let mut next = Vec::with_capacity(rows.len() * src.len());
            for &r in &rows {
                next.extend(src.iter().map(|s| match (r, s) {
                    (Some(r), Some(i)) => Some(r * in_shape[d] + i),
                    _ => None,
                }));
            }
            rows = next;
        }
        // Readers grouped by input row (a counting sort keeps each group in output order).
        let in_rows: usize = in_shape[..nd - 1].iter().product();
        let mut reader_start = vec![0usize; in_rows + 1];
        for i in rows.iter().flatten() {
            reader_start[i + 1] += 1;
        }
        for i in 0..in_rows {
            reader_start[i + 1] += reader_start[i];
        }
        let mut next = reader_start.clone();
        let mut readers = vec![0usize; reader_start[in_rows]];
        for (r, src) in rows.iter().enumerate() {
            if let Some(i) = src {
                readers[next[*i]] = r;
                next[*i] += 1;
            }
        }
        // The longest run of consecutive output columns reading consecutive input columns.
        let (mut run, mut j) = ((0, 0, 0), 0);
        while j < cols.len() {
            let Some(c) = cols[j] else {
                j += 1;
                continue;
            };
            let mut len = 1;
            while j + len < cols.len() && cols[j + len] == Some(c + len) {
                len += 1;
            }
            if len > run.2 {
                run = (j, c, len);
            }
            j += len;
        }
        let edges = cols
            .iter()
            .enumerate()
            .filter(|&(j, _)| !(run.0..run.0 + run.2).contains(&j))
            .map(|(j, &c)| (j, c))
            .collect();
        RowMap {
            in_shape: in_shape.to_vec(),
            out_shape: per_dim.iter().map(Vec::len).collect(),
            rows,
            reader_start,
            readers,
            run,
            edges,
            fill,
            names,
        }
    }

    /// The padded tensor; `adjoint` (the backward's backward) fills with zero, not the value.
    fn gather(self: &Arc<Self>, x: &Tensor, adjoint: bool) -> Result<Tensor> {
        let out = match x.dtype() {
            DType::Float32 => self.gather_as::<f32>(x, adjoint)?,
            _ => self.gather_as::<f64>(x, adjoint)?,
        };
        if needs_grad(&[x]) {
            let map = self.clone();
            record(self.names.gather, &[x], &[&out], &[], false, move |g, _| {
                Ok(vec![Some(map.scatter(&g[0].contiguous()?)?)])
            })?;
        }
        Ok(out)
    }

    fn gather_as<T: Element>(&self, x: &Tensor, adjoint: bool) -> Result<Tensor> {
        let (ni, no) = (
            self.in_shape[self.in_shape.len() - 1],
            self.out_shape[self.out_shape.len() - 1],
        );
        let fill = T::from_f64(if adjoint { 0.0 } else { self.fill });
        let n = self.rows.len() * no;
        let mut out = crate::tensor::creation::try_vec::<T>(n)?;
        let base = SendPtr(out.spare_capacity_mut().as_mut_ptr());
        let (j0, c0, len) = self.run;
        x.with_contiguous_slice::<T, _>(|xs| {
            for_row_blocks(self.rows.len(), no, &|r| {
                // SAFETY: output row r belongs to this task alone.
                let o = unsafe { std::slice::from_raw_parts_mut(base.get().add(r * no), no) };
                let Some(ir) = self.rows[r] else {
                    o.iter_mut().for_each(|v| {
                        v.write(fill);
                    });
                    return;
                };
                let src = &xs[ir * ni..(ir + 1) * ni];
                for (v, &s) in o[j0..j0 + len].iter_mut().zip(&src[c0..c0 + len]) {
                    v.write(s);
                }
                for &(j, c) in &self.edges {
                    o[j].write(c.map_or(fill, |c| src[c]));
                }
            });
        })?;
        // SAFETY: every output row was written whole above (the run and the edges cover it).
        unsafe { out.set_len(n) };
        Tensor::from_vec(out, &self.out_shape)
    }

    /// The input-shaped sum of `g`'s elements read from each input element (the adjoint).
    fn scatter(self: &Arc<Self>, g: &Tensor) -> Result<Tensor> {
        let out = match g.dtype() {
            DType::Float32 => self.scatter_as::<f32>(g)?,
            _ => self.scatter_as::<f64>(g)?,
        };
        if needs_grad(&[g]) {
            let map = self.clone();
            record(
                self.names.scatter,
                &[g],
                &[&out],
                &[],
                false,
                move |gg, _| Ok(vec![Some(map.gather(&gg[0].contiguous()?, true)?)]),
            )?;
        }
        Ok(out)
    }

    fn scatter_as<T: Element + num_traits::Float>(&self, g: &Tensor) -> Result<Tensor> {
        let (ni, no) = (
            self.in_shape[self.in_shape.len() - 1],
            self.out_shape[self.out_shape.len() - 1],
        );
        let in_rows = self.reader_start.len() - 1;
        let n = in_rows * ni;
        let mut out = crate::tensor::creation::try_vec::<T>(n)?;
        let base = SendPtr(out.spare_capacity_mut().as_mut_ptr());
        let (j0, c0, len) = self.run;
        // The first reader's run is copied, not added to zeros, when it covers the whole row.
        let copy_first = c0 == 0 && len == ni;
        g.with_contiguous_slice::<T, _>(|gs| {
            for_row_blocks(in_rows, ni, &|ir| {
                // SAFETY: input row ir belongs to this task alone.
                let o = unsafe { std::slice::from_raw_parts_mut(base.get().add(ir * ni), ni) };
                let readers = &self.readers[self.reader_start[ir]..self.reader_start[ir + 1]];
                let rest = match readers.split_first() {
                    Some((&r, tail)) if copy_first => {
                        let src = &gs[r * no..(r + 1) * no];
                        for (v, &s) in o.iter_mut().zip(&src[j0..j0 + len]) {
                            v.write(s);
                        }
                        // SAFETY: the run covers the row, written whole just above.
                        add_edges(unsafe { assume_init(o) }, src, &self.edges);
                        tail
                    }
                    _ => {
                        o.iter_mut().for_each(|v| {
                            v.write(T::zero());
                        });
                        readers
                    }
                };
                // SAFETY: the row was written whole just above.
                let o = unsafe { assume_init(o) };
                for &r in rest {
                    let src = &gs[r * no..(r + 1) * no];
                    for (v, &s) in o[c0..c0 + len].iter_mut().zip(&src[j0..j0 + len]) {
                        *v = *v + s;
                    }
                    add_edges(o, src, &self.edges);
                }
            });
        })?;
        // SAFETY: every input row was written whole above.
        unsafe { out.set_len(n) };
        Tensor::from_vec(out, &self.in_shape)
    }
}

/// The edge columns of one output row `src` added into their input columns of `o`.
#[inline]
fn add_edges<T: Element + num_traits::Float>(
    o: &mut [T],
    src: &[T],
    edges: &[(usize, Option<usize>)],
) {
    for &(j, c) in edges {
        if let Some(c) = c {
            o[c] = o[c] + src[j];
        }
    }
}

/// `f(r)` for rows `0..rows` of `width` elements, in runs shared among threads when large.
fn for_row_blocks(rows: usize, width: usize, f: &(dyn Fn(usize) + Sync)) {
    let per_task = (16384 / width.max(1)).max(1);
    let tasks = rows.div_ceil(per_task);
    let helpers = if rows * width >= crate::ops::elementwise::PAR_MIN_ELEMENTS {
        crate::parallel::helpers()
    } else {
        0
    };
    crate::parallel::share_work(helpers, tasks, &|t| {
        for r in t * per_task..((t + 1) * per_task).min(rows) {
            f(r);
        }
    });
}
