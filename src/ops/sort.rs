//! Sorting, selection and counting: sort/argsort/msort, topk, kthvalue, median/nanmedian,
//! mode, cummax/cummin, quantile, unique/unique_consecutive, searchsorted/bucketize, bincount,
//! histc, argwhere and count_nonzero.
//!
//! The kernels only choose positions. Values are then gathered from the input at them, so each
//! gradient is a scatter back to the chosen positions, whose adjoint is the gather again: every
//! rule here is differentiable to any order. NaN sorts above every number, as in torch.

use std::cmp::Ordering;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::graph::node::{needs_grad, record};
use crate::kernels::copy::cast;
use crate::ops::reduce::{grouped, record_evenly_distributed, reduce_dims, reduced_shape};
use crate::tensor::shape::{fmt_shape, wrap_dim};
use crate::tensor::{scalar_type_name, DType, Dims, Element, Tensor};

/// Runs `$body` with `$T` the element type of `$t`'s dtype.
macro_rules! by_elem {
    ($t:expr, $T:ident => $body:expr) => {
        $crate::tensor::storage::with_dtype!($t.dtype(), $T => $body)
    };
}

/// Whether `v` is NaN (`v != v`), for any element type.
#[allow(clippy::eq_op)]
fn is_nan<T: PartialOrd>(v: &T) -> bool {
    v != v
}

/// torch's order: NaN above every number, NaNs equal among themselves.
fn cmp_nan_last<T: PartialOrd>(a: &T, b: &T) -> Ordering {
    match (is_nan(a), is_nan(b)) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        _ => a.partial_cmp(b).unwrap_or(Ordering::Equal),
    }
}

/// The total order behind every selection: by value (reversed with `descending`), then by
/// position, so any selection agrees with a stable sort.
fn key_cmp<T: PartialOrd>(row: &[T], a: usize, b: usize, descending: bool) -> Ordering {
    let by_value = if descending {
        cmp_nan_last(&row[b], &row[a])
    } else {
        cmp_nan_last(&row[a], &row[b])
    };
    by_value.then(a.cmp(&b))
}

/// Positions of the first `k` elements of `row` in stable sorted order, written to `out`.
fn first_k<T: PartialOrd>(row: &[T], k: usize, descending: bool, out: &mut [usize]) {
    let mut idx: Vec<usize> = (0..row.len()).collect();
    let cmp = |a: &usize, b: &usize| key_cmp(row, *a, *b, descending);
    if k == 0 {
        return;
    }
    if k < row.len() {
        idx.select_nth_unstable_by(k - 1, cmp);
        idx.truncate(k);
    }
    idx.sort_unstable_by(cmp);
    out.copy_from_slice(&idx[..k]);
}

/// Position of the `k`-th smallest (0-based) element of `row` in stable sorted order.
fn kth<T: PartialOrd>(row: &[T], k: usize) -> usize {
    let mut idx: Vec<usize> = (0..row.len()).collect();
    idx.select_nth_unstable_by(k, |a, b| key_cmp(row, *a, *b, false));
    idx[k]
}

/// A selection kernel: fills the picks of every row of a tensor along the given dim.
type PickRows<'a> = dyn Fn(&Tensor, usize, &mut Vec<usize>) -> Result<()> + 'a;

/// The shape as the kernels see it: a 0-d tensor is one row of one element.
fn shape1(t: &Tensor) -> Dims {
    if t.dim() == 0 {
        Dims::from(&[1usize][..])
    } else {
        t.shape().into()
    }
}

/// The elements of `t` as rows along dim `d` (every other coordinate fixed, row-major over
/// them), concatenated: returns the data, the row length and the number of rows.
fn rows<T: Element>(t: &Tensor, d: usize) -> Result<(Vec<T>, usize, usize)> {
    if t.dim() == 0 {
        return Ok((t.to_vec::<T>()?, 1, 1));
    }
    let n = t.shape()[d];
    let (data, _) = grouped::<T>(t, &[d])?;
    let count = data.len().checked_div(n).unwrap_or(0);
    Ok((data, n, count))
}

/// `f(row, out)` for each of the `count` rows of length `n` in `data`, each filling its `m`
/// outputs; rows are shared among threads when there is enough work.
fn map_rows<T: Sync, U: Copy + Default + Send>(
    data: &[T],
    n: usize,
    count: usize,
    m: usize,
    f: impl Fn(&[T], &mut [U]) + Sync,
) -> Result<Vec<U>> {
    let mut out = crate::tensor::creation::try_filled_vec(count * m, U::default())?;
    let blocks = if count > 1 && data.len() >= 1 << 15 {
        count.min(64)
    } else {
        1
    };
    let helpers = if blocks > 1 {
        crate::parallel::helpers()
    } else {
        0
    };
    let ptr = crate::parallel::SendPtr(out.as_mut_ptr());
    crate::parallel::share_work(helpers, blocks, &|b| {
        let (lo, hi) = (b * count / blocks, (b + 1) * count / blocks);
        for r in lo..hi {
            // SAFETY: row r's outputs `r*m..(r+1)*m` are written by this block alone, and `out`
            // has `count * m` slots that outlive share_work.
            let o = unsafe { std::slice::from_raw_parts_mut(ptr.get().add(r * m), m) };
            f(&data[r * n..(r + 1) * n], o);
        }
    });
    Ok(out)
}

/// For picks `picks[r*m + j]` (positions along dim `d` of `shape`, `m` per row, rows as in
/// [`rows`]): the flat source positions in the row-major order of the output (`shape` with
/// `d` of size `m`) and the picks laid out the same way.
fn place_picks(shape: &[usize], d: usize, m: usize, picks: &[usize]) -> (Vec<usize>, Vec<i64>) {
    let n = shape[d];
    let inner: usize = shape[d + 1..].iter().product();
    let mut pos = vec![0usize; picks.len()];
    let mut idx = vec![0i64; picks.len()];
    for (k, &p) in picks.iter().enumerate() {
        let (r, j) = (k / m, k % m);
        let (outer, rest) = (r / inner.max(1), r % inner.max(1));
        let o = outer * m * inner + j * inner + rest;
        pos[o] = outer * n * inner + p * inner + rest;
        idx[o] = p as i64;
    }
    (pos, idx)
}

/// Torch's error for selecting along an empty dimension.
fn check_dim_nonempty(t: &Tensor, d: usize, op: &str) -> Result<()> {
    if t.dim() > 0 && t.shape()[d] == 0 {
        return Err(Error::index(format!(
            "{op}(): Expected reduction dim {d} to have non-zero size."
        )));
    }
    Ok(())
}

/// The `"<op>_cpu" not implemented for 'Bool'` error of ops without a bool kernel.
fn refuse_bool(t: &Tensor, op: &str) -> Result<()> {
    if t.dtype() == DType::Bool {
        return Err(Error::not_implemented(format!(
            "\"{op}_cpu\" not implemented for 'Bool'"
        )));
    }
    Ok(())
}

/// How [`Tensor::quantile`] picks a value between the two data points around a quantile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interpolation {
    /// `a + (b - a) * frac`
    Linear,
    /// The lower data point.
    Lower,
    /// The higher data point.
    Higher,
    /// `(a + b) / 2`
    Midpoint,
    /// The nearer data point (ties to the even rank).
    Nearest,
}

impl Interpolation {
    /// From torch's name (`'linear'`, `'lower'`, `'higher'`, `'midpoint'`, `'nearest'`).
    pub fn parse(name: &str) -> Result<Self> {
        Ok(match name {
            "linear" => Self::Linear,
            "lower" => Self::Lower,
            "higher" => Self::Higher,
            "midpoint" => Self::Midpoint,
            "nearest" => Self::Nearest,
            _ => {
                return Err(Error::runtime(format!(
                    "quantile() interpolation must be one of linear, lower, higher, midpoint or nearest, but got {name}"
                )))
            }
        })
    }
}

impl Tensor {
    /// The elements at flat row-major positions `pos`, shaped `out_shape`, recorded as node
    /// `name`: its backward scatters the gradient back to `pos` (differentiable again).
    fn picked(&self, pos: Vec<usize>, out_shape: &[usize], name: &'static str) -> Result<Tensor> {
        let pos = Arc::new(pos);
        let values = {
            let _g = crate::tensor::grad_mode::GradModeGuard::new(false);
            self.detach().take_flat(&pos, out_shape)?
        };
        if needs_grad(&[self]) {
            let in_shape: Dims = self.shape().into();
            record(name, &[self], &[&values], &[], false, move |g, _| {
                Ok(vec![Some(g[0].scatter_add_flat(&in_shape, &pos)?)])
            })?;
        }
        Ok(values)
    }

    /// `m` picks per row along `d` from `kernel(row, out)`, as `(values, int64 indices)` of
    /// this tensor's shape with `d` of size `m`, without `d` when `drop_dim` (`keepdim=False`).
    fn select_rows(
        &self,
        d: usize,
        m: usize,
        drop_dim: bool,
        name: &'static str,
        kernel: &PickRows<'_>,
    ) -> Result<(Tensor, Tensor)> {
        if self.is_batched() {
            return self.select_rows_batched(d, m, drop_dim, name, kernel);
        }
        let shape = shape1(self);
        let mut picks = Vec::new();
        kernel(self, d, &mut picks)?;
        let (pos, idx) = place_picks(&shape, d, m, &picks);
        let mut out_shape: Vec<usize> = shape.to_vec();
        out_shape[d] = m;
        if self.dim() == 0 {
            out_shape.clear();
        } else if drop_dim {
            out_shape.remove(d);
        }
        let values = self.picked(pos, &out_shape, name)?;
        Ok((values, Tensor::from_vec(idx, &out_shape)?))
    }

    /// [`Tensor::select_rows`] inside vmap: `kernel` picks on the physical tensor (`d` behind
    /// the batch dimensions), and the values are gathered sample by sample at the picked
    /// indices (`batching::picked_along`).
    fn select_rows_batched(
        &self,
        d: usize,
        m: usize,
        drop_dim: bool,
        name: &'static str,
        kernel: &PickRows<'_>,
    ) -> Result<(Tensor, Tensor)> {
        if self.dim() == 0 {
            return self.reshape(&[1])?.select_rows(0, m, true, name, kernel);
        }
        let idx = crate::tensor::batched::unary_all(self, |p, nb| {
            let pd = d + nb;
            let mut picks = Vec::new();
            kernel(p, pd, &mut picks)?;
            let (_, idx) = place_picks(p.shape(), pd, m, &picks);
            let mut shape = p.shape().to_vec();
            shape[pd] = m;
            Tensor::from_vec(idx, &shape)
        })
        .ok_or_else(|| Error::runtime("internal error: select_rows_batched on a plain tensor"))??;
        let values = crate::ops::batching::picked_along(self, d, &idx, drop_dim, name)?;
        let idx = if drop_dim {
            idx.squeeze(Some(d as i64))?
        } else {
            idx
        };
        Ok((values, idx))
    }

    /// `(values, indices)` sorted along `dim`, ascending unless `descending`; NaN counts as the
    /// largest value. Equal elements always keep their order (torch promises it only with
    /// `stable=True`); `stable` given (`Some`) is torch's `stable=` overload, whose node is
    /// `SortBackward1`. The gradient goes back to the original positions.
    pub fn sort(
        &self,
        dim: i64,
        descending: bool,
        stable: Option<bool>,
    ) -> Result<(Tensor, Tensor)> {
        let d = wrap_dim(dim, self.dim())?;
        let n = shape1(self)[d];
        let name = if stable.is_some() {
            "SortBackward1"
        } else {
            "SortBackward0"
        };
        self.select_rows(d, n, false, name, &|t, d, picks| {
            *picks = by_elem!(t, T => {
                let (data, n, count) = rows::<T>(t, d)?;
                map_rows(&data, n, count, n, |row, out| first_k(row, n, descending, out))?
            });
            Ok(())
        })
    }

    /// The indices that sort this tensor along `dim` (int64; see [`Tensor::sort`]).
    pub fn argsort(&self, dim: i64, descending: bool, stable: Option<bool>) -> Result<Tensor> {
        let _g = crate::tensor::grad_mode::GradModeGuard::new(false);
        Ok(self.detach().sort(dim, descending, stable)?.1)
    }

    /// Sorted along the first dimension (values only), like `torch.msort`.
    pub fn msort(&self) -> Result<Tensor> {
        Ok(self.sort(0, false, None)?.0)
    }

    /// The `k` largest (`largest`) or smallest elements along `dim` and their indices, in
    /// sorted order (also when `sorted` is false, which torch leaves unspecified).
    pub fn topk(&self, k: i64, dim: i64, largest: bool, sorted: bool) -> Result<(Tensor, Tensor)> {
        let _ = sorted;
        let d = wrap_dim(dim, self.dim())?;
        let n = shape1(self)[d];
        if k < 0 || k as usize > n {
            return Err(Error::runtime("selected index k out of range"));
        }
        if self.dtype() == DType::Bool {
            return Err(Error::not_implemented(
                "topk does not support bool dtypes on CPU",
            ));
        }
        let k = k as usize;
        self.select_rows(d, k, false, "TopkBackward0", &|t, d, picks| {
            *picks = by_elem!(t, T => {
                let (data, n, count) = rows::<T>(t, d)?;
                map_rows(&data, n, count, k, |row, out| first_k(row, k, largest, out))?
            });
            Ok(())
        })
    }

    /// The `k`-th smallest element (1-based) along `dim` and its index.
    pub fn kthvalue(&self, k: i64, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
        let d = wrap_dim(dim, self.dim())?;
        check_dim_nonempty(self, d, "kthvalue")?;
        let n = shape1(self)[d];
        if k < 1 || k as usize > n {
            return Err(Error::runtime(format!(
                "kthvalue(): selected number k out of range for dimension {d}"
            )));
        }
        refuse_bool(self, "kthvalue")?;
        let k = k as usize - 1;
        self.select_rows(d, 1, !keepdim, "KthvalueBackward0", &|t, d, picks| {
            *picks = by_elem!(t, T => {
                let (data, n, count) = rows::<T>(t, d)?;
                map_rows(&data, n, count, 1, |row, out| out[0] = kth(row, k))?
            });
            Ok(())
        })
    }

    /// The lower median along `dim` and its index. A row holding NaN gives NaN (the first
    /// one) unless `ignore_nan` (`nanmedian`), which takes the median of the other values.
    pub fn median_dim(
        &self,
        dim: i64,
        keepdim: bool,
        ignore_nan: bool,
    ) -> Result<(Tensor, Tensor)> {
        let op = if ignore_nan { "nanmedian" } else { "median" };
        let d = wrap_dim(dim, self.dim())?;
        check_dim_nonempty(self, d, op)?;
        refuse_bool(self, op)?;
        let name = if ignore_nan {
            "NanmedianBackward1"
        } else {
            "MedianBackward1"
        };
        self.select_rows(d, 1, !keepdim, name, &|t, d, picks| {
            *picks = by_elem!(t, T => {
                let (data, n, count) = rows::<T>(t, d)?;
                map_rows(&data, n, count, 1, |row, out| out[0] = median_pick(row, ignore_nan))?
            });
            Ok(())
        })
    }

    /// The lower median of all elements (NaN when any is NaN, unless `ignore_nan`); ties
    /// share the gradient evenly, as in torch.
    pub fn median_all(&self, ignore_nan: bool) -> Result<Tensor> {
        refuse_bool(self, if ignore_nan { "nanmedian" } else { "median" })?;
        if self.numel() == 0 {
            // torch's NaN, which an int64 result holds as the smallest value.
            if self.dtype() == DType::Int64 {
                return Tensor::from_vec(vec![i64::MIN], &[]);
            }
            return Ok(Tensor::full(&[], f64::NAN, self.dtype()));
        }
        let flat = self.detach().reshape(&[self.numel()])?;
        let (out, _) = {
            let _g = crate::tensor::grad_mode::GradModeGuard::new(false);
            flat.median_dim(0, false, ignore_nan)?
        };
        if needs_grad(&[self]) {
            let name = if ignore_nan {
                "NanmedianBackward0"
            } else {
                "MedianBackward0"
            };
            let all: Vec<usize> = (0..self.dim()).collect();
            record_evenly_distributed(name, self, &out, &all)?;
        }
        Ok(out)
    }

    /// The most frequent value along `dim` (the smallest among equally frequent ones) and the
    /// index of its last occurrence.
    pub fn mode(&self, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
        let d = wrap_dim(dim, self.dim())?;
        check_dim_nonempty(self, d, "mode")?;
        self.select_rows(d, 1, !keepdim, "ModeBackward0", &|t, d, picks| {
            *picks = by_elem!(t, T => {
                let (data, n, count) = rows::<T>(t, d)?;
                map_rows(&data, n, count, 1, |row, out| out[0] = mode_pick(row))?
            });
            Ok(())
        })
    }

    /// Running maximum along `dim` and where it was reached (the latest among ties; once NaN
    /// is seen it stays, at the latest NaN). The gradient goes to those positions.
    pub fn cummax(&self, dim: i64) -> Result<(Tensor, Tensor)> {
        self.cum_extreme(dim, true)
    }

    /// Running minimum along `dim` and where it was reached (see [`Tensor::cummax`]).
    pub fn cummin(&self, dim: i64) -> Result<(Tensor, Tensor)> {
        self.cum_extreme(dim, false)
    }

    fn cum_extreme(&self, dim: i64, is_max: bool) -> Result<(Tensor, Tensor)> {
        let d = wrap_dim(dim, self.dim())?;
        let n = shape1(self)[d];
        let name = if is_max {
            "CummaxBackward0"
        } else {
            "CumminBackward0"
        };
        self.select_rows(d, n, false, name, &|t, d, picks| {
            *picks = by_elem!(t, T => {
                let (data, n, count) = rows::<T>(t, d)?;
                map_rows(&data, n, count, n, |row, out| scan_extreme(row, is_max, out))?
            });
            Ok(())
        })
    }

    /// The `q`-quantiles (a 0-d or 1-D tensor of values in [0, 1], this tensor's float dtype)
    /// over `dim` (`None`: all elements), torch's rules: with a 1-D `q` its dim comes first;
    /// a NaN in a row gives NaN unless `ignore_nan` (`nanquantile`). Built from the
    /// differentiable sort and gathers, so the gradient reaches the data points used.
    pub fn quantile(
        &self,
        q: &Tensor,
        dim: Option<i64>,
        keepdim: bool,
        interpolation: Interpolation,
        ignore_nan: bool,
    ) -> Result<Tensor> {
        if self.numel() == 0 {
            return Err(Error::runtime("quantile() input tensor must be non-empty"));
        }
        // Inside vmap (torch's fallback too): one sample at a time.
        let per = crate::ops::batching::per_sample_op1(&[self, q], |p| {
            p[0].quantile(&p[1], dim, keepdim, interpolation, ignore_nan)
        });
        if let Some(r) = per {
            return r;
        }
        if q.dim() > 1 {
            return Err(Error::runtime("quantile() q must be a scalar or 1D tensor"));
        }
        if !self.dtype().is_float() {
            return Err(Error::runtime(
                "quantile() input tensor must be either float or double dtype",
            ));
        }
        if self.dtype() != q.dtype() {
            return Err(Error::runtime(
                "quantile() q tensor must be same dtype as the input tensor",
            ));
        }
        let qs = q.to_vec::<f64>()?;
        if qs.iter().any(|&v| !(0.0..=1.0).contains(&v)) {
            return Err(Error::runtime(
                "quantile() q values must be in the range [0, 1]",
            ));
        }
        let (x, d) = match dim {
            None => (self.reshape(&[self.numel()])?, 0),
            Some(dm) => (self.clone(), wrap_dim(dm, self.dim())?),
        };
        let x = if x.dim() == 0 { x.reshape(&[1])? } else { x };
        let sorted = x.sort(d as i64, false, None)?.0;
        let shape = x.shape().to_vec();
        let n = shape[d];
        let inner: usize = shape[d + 1..].iter().product();
        let nan_counts: Vec<usize> = by_elem!(x, T => {
            let (data, n, count) = rows::<T>(&x.detach(), d)?;
            map_rows(&data, n, count, 1, |row, out| {
                out[0] = row.iter().filter(|v| is_nan(*v)).count()
            })?
        });
        let count = nan_counts.len();
        let total = qs.len() * count;
        let (mut below, mut above, mut weight) = (
            Vec::with_capacity(total),
            Vec::with_capacity(total),
            Vec::with_capacity(total),
        );
        for &qv in &qs {
            for (r, &nans) in nan_counts.iter().enumerate() {
                let rank = if ignore_nan {
                    (qv * (n as f64 - nans as f64 - 1.0)).max(0.0)
                } else if nans > 0 {
                    (n - 1) as f64
                } else {
                    qv * (n - 1) as f64
                };
                let rank = match interpolation {
                    Interpolation::Lower => rank.floor(),
                    Interpolation::Higher => rank.ceil(),
                    Interpolation::Nearest => rank.round_ties_even(),
                    _ => rank,
                };
                let lo = rank.floor();
                let w = match interpolation {
                    Interpolation::Linear => rank - lo,
                    Interpolation::Midpoint => 0.5,
                    _ => 0.0,
                };
                let (outer, rest) = (r / inner, r % inner);
                let at = |k: usize| outer * n * inner + k * inner + rest;
                below.push(at(lo as usize));
                above.push(at(rank.ceil() as usize));
                weight.push(w);
            }
        }
        let mut kept: Vec<usize> = match dim {
            None if keepdim => vec![1; self.dim()],
            None => vec![],
            Some(_) => reduced_shape(&shape1(self), &[d], keepdim).to_vec(),
        };
        if self.dim() == 0 {
            kept.clear();
        }
        let mut out_shape = kept;
        if q.dim() == 1 {
            out_shape.insert(0, qs.len());
        }
        let lo = sorted.take_flat(&Arc::new(below), &out_shape)?;
        if matches!(
            interpolation,
            Interpolation::Linear | Interpolation::Midpoint
        ) {
            let hi = sorted.take_flat(&Arc::new(above), &out_shape)?;
            let w = Tensor::from_vec(weight, &out_shape)?.to_dtype(self.dtype())?;
            return lo.add(&w.mul(&hi.sub(&lo)?)?);
        }
        Ok(lo)
    }

    /// [`Tensor::quantile`] at one `q` in [0, 1] (torch's message for one outside).
    pub fn quantile_scalar(
        &self,
        q: f64,
        dim: Option<i64>,
        keepdim: bool,
        interpolation: Interpolation,
        ignore_nan: bool,
    ) -> Result<Tensor> {
        if !(0.0..=1.0).contains(&q) {
            return Err(Error::runtime(format!(
                "quantile() q must be in the range [0, 1] but got {q}"
            )));
        }
        let qt = Tensor::full(&[], q, self.dtype());
        self.quantile(&qt, dim, keepdim, interpolation, ignore_nan)
    }

    /// The distinct elements (`dim` None, flattened) or distinct slices along `dim`, sorted,
    /// as `(values, inverse, counts)`: `inverse` maps each element (slice) to its entry in
    /// `values`, `counts` says how often each occurs. Not differentiable. NaNs are each
    /// distinct, as in torch.
    pub fn unique(&self, dim: Option<i64>) -> Result<(Tensor, Tensor, Tensor)> {
        self.unique_impl(dim, true)
    }

    /// Like [`Tensor::unique`] but only collapsing runs of equal neighbours, in order.
    pub fn unique_consecutive(&self, dim: Option<i64>) -> Result<(Tensor, Tensor, Tensor)> {
        self.unique_impl(dim, false)
    }

    fn unique_impl(&self, dim: Option<i64>, sort: bool) -> Result<(Tensor, Tensor, Tensor)> {
        if self.is_batched() {
            // The count differs from sample to sample: torch's vmap refuses it too.
            let op = if sort {
                "_unique2"
            } else {
                "unique_consecutive"
            };
            return Err(Error::runtime(format!("vmap: We do not support batching operators that can output dynamic shape. Attempted to vmap over aten::{op}. Please file an issue at https://github.com/pytorch/pytorch/issues if you need this feature.")));
        }
        let x = self.detach();
        let (src, d) = match dim {
            None => (x.reshape(&[x.numel()])?, 0usize),
            Some(dm) => {
                let d = wrap_dim(dm, x.dim())?;
                (if x.dim() == 0 { x.reshape(&[1])? } else { x }, d)
            }
        };
        let n = src.shape()[d];
        let inverse_shape: Vec<usize> = match dim {
            None => self.shape().to_vec(),
            Some(_) => vec![n],
        };
        // Slices along d: move d to the front, so slice i is one contiguous run.
        let mut order: Vec<i64> = vec![d as i64];
        order.extend((0..src.dim() as i64).filter(|&k| k != d as i64));
        let front = src.permute(&order)?.contiguous()?;
        let slice_len = front.numel().checked_div(n).unwrap_or(0);
        let (values, inverse, counts) = by_elem!(front, T => {
            let data = front.to_vec::<T>()?;
            let slice = |i: usize| &data[i * slice_len..(i + 1) * slice_len];
            let mut perm: Vec<usize> = (0..n).collect();
            if sort {
                perm.sort_by(|&a, &b| {
                    slice(a)
                        .iter()
                        .zip(slice(b))
                        .map(|(u, v)| cmp_nan_last(u, v))
                        .find(|o| o.is_ne())
                        .unwrap_or(Ordering::Equal)
                });
            }
            let mut inverse = vec![0i64; n];
            let mut counts: Vec<i64> = Vec::new();
            let mut vals: Vec<T> = Vec::new();
            for (k, &i) in perm.iter().enumerate() {
                // torch compares with ==, so NaN never equals its neighbour.
                let same = k > 0 && slice(perm[k - 1]).iter().zip(slice(i)).all(|(u, v)| u == v);
                if !same {
                    counts.push(0);
                    vals.extend_from_slice(slice(i));
                }
                let c = counts.len() - 1;
                counts[c] += 1;
                inverse[i] = c as i64;
            }
            let mut vshape: Vec<usize> = front.shape().to_vec();
            vshape[0] = counts.len();
            (Tensor::from_vec(vals, &vshape)?, inverse, counts)
        });
        let mut back: Vec<i64> = vec![0; order.len()];
        for (i, &o) in order.iter().enumerate() {
            back[o as usize] = i as i64;
        }
        let values = values.permute(&back)?.contiguous()?;
        let nu = counts.len();
        Ok((
            values,
            Tensor::from_vec(inverse, &inverse_shape)?,
            Tensor::from_vec(counts, &[nu])?,
        ))
    }

    /// For each of `values`, the index in this sorted sequence (1-D, or rows matching the
    /// leading dims of `values`) where it would be inserted to keep the order: before equal
    /// elements, or after them with `right`. `sorter` gives the sorting order of an unsorted
    /// sequence. Int64, not differentiable.
    pub fn searchsorted(
        &self,
        values: &Tensor,
        right: bool,
        sorter: Option<&Tensor>,
    ) -> Result<Tensor> {
        if let Some(s) = sorter {
            if s.shape() != self.shape() {
                return Err(Error::runtime(format!(
                    "torch.searchsorted(): boundary and sorter must have the same size, but got boundary tensor {}and got sorter tensor {}",
                    fmt_shape(self.shape()),
                    fmt_shape(s.shape())
                )));
            }
            if s.dtype() != DType::Int64 {
                return Err(Error::runtime(format!(
                    "torch.searchsorted(): sorter must be a tensor of long dtype but got dtype {}",
                    scalar_type_name(s.dtype())
                )));
            }
        }
        if let Some(r) = self.searchsorted_batched(values, right, sorter) {
            return r;
        }
        let sorter_v = match sorter {
            Some(s) => {
                let v = s.to_vec::<i64>()?;
                let last = *self.shape().last().unwrap_or(&0) as i64;
                if v.iter().any(|&i| i < 0 || i >= last) {
                    return Err(Error::runtime(
                        "torch.searchsorted(): sorter index out of range",
                    ));
                }
                Some(v)
            }
            None => None,
        };
        if values.dim() == 0 && self.dim() != 1 {
            return Err(Error::runtime(format!(
                "torch.searchsorted(): input value can be a scalar only when boundaries tensor dimension is 1, but we got boundaries tensor dim({}) and input value's dim(0) numel(1)",
                self.dim()
            )));
        }
        if self.dim() == 0 {
            return Err(Error::runtime(
                "torch.searchsorted(): boundaries tensor should have positive dimension, but got 0 dimension",
            ));
        }
        let bd = self.shape();
        let vd = values.shape();
        if bd.len() != 1 && (bd.len() != vd.len() || bd[..bd.len() - 1] != vd[..vd.len() - 1]) {
            return Err(Error::runtime(format!(
                "torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 dimensions of boundaries tensor and input value tensor must match, but we got boundaries tensor {} and input value tensor {}",
                fmt_shape(bd),
                fmt_shape(vd)
            )));
        }
        let len = bd[bd.len() - 1];
        let per_row = if bd.len() == 1 {
            values.numel()
        } else {
            *vd.last().unwrap_or(&0)
        };
        let out = if self.dtype() == DType::Int64 && values.dtype() == DType::Int64 {
            search_kernel(
                &self.to_vec::<i64>()?,
                &values.to_vec::<i64>()?,
                len,
                per_row,
                right,
                sorter_v.as_deref(),
            )
        } else {
            search_kernel(
                &self.to_vec::<f64>()?,
                &values.to_vec::<f64>()?,
                len,
                per_row,
                right,
                sorter_v.as_deref(),
            )
        };
        Tensor::from_vec(out, vd)
    }

    /// [`Tensor::searchsorted`] inside vmap: shared 1-D boundaries search every sample's values
    /// at once; otherwise one sample at a time. `None` when nothing is batched.
    fn searchsorted_batched(
        &self,
        values: &Tensor,
        right: bool,
        sorter: Option<&Tensor>,
    ) -> Option<Result<Tensor>> {
        if !self.is_batched() && sorter.is_none_or(|s| !s.is_batched()) && self.dim() == 1 {
            return crate::tensor::batched::unary_all(values, |p, _| {
                self.searchsorted(p, right, sorter)
            });
        }
        let mut operands = vec![self, values];
        operands.extend(sorter);
        crate::ops::batching::per_sample(&operands, |p| p[0].searchsorted(&p[1], right, p.get(2)))
    }

    /// For each element of this tensor, the index of its bucket among the 1-D sorted
    /// `boundaries` (`torch.bucketize`): the count of boundaries below it (`right`: at or
    /// below it). Int64.
    pub fn bucketize(&self, boundaries: &Tensor, right: bool) -> Result<Tensor> {
        if boundaries.dim() != 1 {
            return Err(Error::runtime(format!(
                "boundaries tensor must be 1 dimension, but got dim({})",
                boundaries.dim()
            )));
        }
        boundaries.searchsorted(self, right, None)
    }

    /// How often each value 0..=max occurs in this 1-D tensor of non-negative integers (at
    /// least `minlength` bins), or the sum of `weights` per value: int64 counts, float32
    /// sums for float32 weights, float64 otherwise. Not differentiable.
    pub fn bincount(&self, weights: Option<&Tensor>, minlength: i64) -> Result<Tensor> {
        if self.dtype().is_integer() && self.dtype() != DType::Int64 {
            return crate::kernels::copy::cast(self, DType::Int64)?.bincount(weights, minlength);
        }
        if self.dtype() != DType::Int64 {
            return Err(Error::not_implemented(format!(
                "\"bincount_cpu\" not implemented for '{}'",
                scalar_type_name(self.dtype())
            )));
        }
        if minlength < 0 {
            return Err(Error::runtime("minlength should be >= 0"));
        }
        let minlength = minlength as usize;
        if self.dim() == 1 && self.numel() == 0 {
            return Ok(Tensor::zeros(&[minlength], DType::Int64));
        }
        let v = self.to_vec::<i64>()?;
        if self.dim() != 1 || v.iter().any(|&i| i < 0) {
            return Err(Error::runtime(
                "bincount only supports 1-d non-negative integral inputs.",
            ));
        }
        if let Some(w) = weights {
            if w.dim() != 1 || w.shape()[0] != v.len() {
                return Err(Error::runtime(
                    "weights should be 1-d and have the same length as input",
                ));
            }
        }
        let bins = (v.iter().copied().max().unwrap_or(-1) + 1) as usize;
        let bins = bins.max(minlength);
        crate::tensor::creation::ensure_allocatable(bins, DType::Float64)?;
        match weights {
            None => {
                let mut out = vec![0i64; bins];
                v.iter().for_each(|&i| out[i as usize] += 1);
                Tensor::from_vec(out, &[bins])
            }
            Some(w) => {
                let wv = w.to_vec::<f64>()?;
                let mut out = vec![0f64; bins];
                v.iter().zip(&wv).for_each(|(&i, &x)| out[i as usize] += x);
                let t = Tensor::from_vec(out, &[bins])?;
                if w.dtype() == DType::Float32 {
                    cast(&t, DType::Float32)
                } else {
                    Ok(t)
                }
            }
        }
    }

    /// Histogram of this float tensor with `bins` equal bins over `[min, max]` (both 0, or
    /// equal: the data's range, widened by 1 each way when flat); elements outside are
    /// ignored, the last bin includes `max`. Same dtype as the input; not differentiable.
    pub fn histc(&self, bins: i64, min: f64, max: f64) -> Result<Tensor> {
        if !self.dtype().is_float() {
            return Err(Error::not_implemented(format!(
                "\"histogram_cpu\" not implemented for '{}'",
                scalar_type_name(self.dtype())
            )));
        }
        if bins <= 0 {
            return Err(Error::runtime(format!(
                "torch.histogram(): bins must be > 0, but got {bins} for dimension 0"
            )));
        }
        // Inside vmap (torch's fallback too): one sample at a time.
        if let Some(r) = crate::ops::batching::per_sample(&[self], |p| p[0].histc(bins, min, max)) {
            return r;
        }
        let data = self.to_vec::<f64>()?;
        let (mut lo, mut hi) = (min, max);
        if lo == hi && !data.is_empty() {
            lo = data.iter().copied().fold(f64::INFINITY, f64::min);
            hi = data.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            if data.iter().any(|v| v.is_nan()) {
                (lo, hi) = (f64::NAN, f64::NAN);
            }
        }
        if lo == hi {
            lo -= 1.0;
            hi += 1.0;
        }
        if !lo.is_finite() || !hi.is_finite() {
            return Err(Error::runtime(format!(
                "torch.histc: range of [{lo}, {hi}] is not finite"
            )));
        }
        if lo >= hi {
            return Err(Error::runtime("torch.histc: max must be larger than min"));
        }
        let nb = bins as usize;
        crate::tensor::creation::ensure_allocatable(nb, DType::Float64)?;
        match self.dtype() {
            DType::Float32 => {
                let v = self.to_vec::<f32>()?;
                Tensor::from_vec(histc_kernel(&v, nb, lo as f32, hi as f32), &[nb])
            }
            _ => Tensor::from_vec(histc_kernel(&data, nb, lo, hi), &[nb]),
        }
    }

    /// Coordinates of the nonzero elements, `[count, ndim]` int64 (`torch.argwhere`).
    pub fn argwhere(&self) -> Result<Tensor> {
        self.nonzero()
    }

    /// The number of nonzero elements over `dims` (empty: all), int64.
    pub fn count_nonzero(&self, dims: &[i64]) -> Result<Tensor> {
        reduce_dims(dims, self.dim())?;
        let nz = {
            let _g = crate::tensor::grad_mode::GradModeGuard::new(false);
            cast(&self.detach(), DType::Bool)?
        };
        nz.sum_dims(dims, false)
    }
}

/// The pick of `median`: the first NaN if any (unless `ignore_nan`), else the lower median of
/// the non-NaN values (of all, when every one is NaN).
fn median_pick<T: PartialOrd>(row: &[T], ignore_nan: bool) -> usize {
    let nans = row.iter().filter(|v| is_nan(*v)).count();
    if !ignore_nan && nans > 0 {
        return row.iter().position(|v| is_nan(v)).unwrap_or(0);
    }
    let valid = row.len() - nans;
    kth(row, valid.saturating_sub(1) / 2)
}

/// The pick of `mode`: the last occurrence (in stable sorted order) of the most frequent value,
/// the smallest such value on a tie.
fn mode_pick<T: PartialOrd>(row: &[T]) -> usize {
    let mut idx: Vec<usize> = (0..row.len()).collect();
    idx.sort_by(|&a, &b| key_cmp(row, a, b, false));
    let (mut best, mut best_freq, mut freq) = (0usize, 0usize, 0usize);
    for (k, &i) in idx.iter().enumerate() {
        freq += 1;
        if k + 1 == idx.len() || row[i] != row[idx[k + 1]] {
            if freq > best_freq {
                best = i;
                best_freq = freq;
            }
            freq = 0;
        }
    }
    best
}

/// Positions of the running max (`is_max`) or min of `row`: a later equal value takes over; a
/// NaN takes over and stays, each later NaN taking over again (torch's rule).
fn scan_extreme<T: PartialOrd>(row: &[T], is_max: bool, out: &mut [usize]) {
    let mut best = 0usize;
    for (i, v) in row.iter().enumerate() {
        let b = &row[best];
        let better = if is_max { v >= b } else { v <= b };
        if i == 0 || is_nan(v) || (!is_nan(b) && better) {
            best = i;
        }
        out[i] = best;
    }
}

/// Counts of `data` in `nb` equal bins over `[lo, hi]`, in the input's precision as torch's
/// histc: bin `(x - lo) * nb / (hi - lo)` truncated, `hi` itself in the last bin, elements
/// outside (and NaN) skipped.
fn histc_kernel<T: num_traits::Float + num_traits::FromPrimitive>(
    data: &[T],
    nb: usize,
    lo: T,
    hi: T,
) -> Vec<T> {
    let n = T::from_usize(nb).unwrap_or_else(T::infinity);
    let mut out = vec![T::zero(); nb];
    for &x in data {
        if !(x >= lo && x <= hi) {
            continue;
        }
        let b = ((x - lo) * n / (hi - lo))
            .to_usize()
            .unwrap_or(0)
            .min(nb - 1);
        out[b] = out[b] + T::one();
    }
    out
}

/// The insertion index in each boundary row (`len` long, read through `sorter` when given)
/// of each of the `per_row` values that go with it: a binary search.
fn search_kernel<T: PartialOrd + Copy>(
    bounds: &[T],
    values: &[T],
    len: usize,
    per_row: usize,
    right: bool,
    sorter: Option<&[i64]>,
) -> Vec<i64> {
    values
        .iter()
        .enumerate()
        .map(|(k, v)| {
            let row = if per_row == 0 || bounds.len() == len {
                0
            } else {
                k / per_row
            };
            let at = |i: usize| {
                let j = sorter.map_or(i, |s| s[row * len + i] as usize);
                bounds[row * len + j]
            };
            let (mut lo, mut hi) = (0usize, len);
            while lo < hi {
                let mid = (lo + hi) / 2;
                let b = at(mid);
                let go_right = if right { b <= *v } else { b < *v };
                if go_right {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            lo as i64
        })
        .collect()
}
