//! Compositions of views, `cat` and products that torch offers as functions of their own:
//! `hstack vstack dstack column_stack`, `atleast_1d/2d/3d`, `meshgrid`, `broadcast_tensors`,
//! `cartesian_prod`, `combinations`, `kron`, `tensordot` and `diff`. Each is made of
//! differentiable ops, so gradients of any order come with them.

use crate::error::{Error, Result};
use crate::tensor::shape::{broadcast_shapes, fmt_shape, wrap_dim};
use crate::tensor::{Dims, Tensor};

/// `tensors` is not empty, else torch's error for `op`.
fn non_empty(tensors: &[Tensor], op: &str) -> Result<()> {
    if tensors.is_empty() {
        return Err(Error::runtime(format!(
            "{op} expects a non-empty TensorList"
        )));
    }
    Ok(())
}

/// One-dimensional, else torch's error.
fn check_vector(t: &Tensor) -> Result<()> {
    if t.dim() != 1 {
        return Err(Error::runtime(format!(
            "Expect a 1D vector, but got shape {}",
            fmt_shape(t.shape())
        )));
    }
    Ok(())
}

/// Whether `meshgrid` lays out its grids matrix-style (`"ij"`) or Cartesian-style (`"xy"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MeshIndexing {
    /// The first input varies along dim 0.
    Ij,
    /// The first two dims swapped (NumPy's default).
    Xy,
}

impl Tensor {
    /// `self` with size-1 dims added in front until it has at least one dim.
    pub fn atleast_1d(&self) -> Result<Tensor> {
        match self.dim() {
            0 => self.reshape(&[1]),
            _ => Ok(self.clone()),
        }
    }

    /// At least two dims: a scalar becomes `[1, 1]`, a vector `[1, n]`.
    pub fn atleast_2d(&self) -> Result<Tensor> {
        match self.dim() {
            0 => self.reshape(&[1, 1]),
            1 => self.unsqueeze(0),
            _ => Ok(self.clone()),
        }
    }

    /// At least three dims: a scalar becomes `[1, 1, 1]`, a vector `[1, n, 1]`, a matrix
    /// `[m, n, 1]`.
    pub fn atleast_3d(&self) -> Result<Tensor> {
        match self.dim() {
            0 => self.reshape(&[1, 1, 1]),
            1 => self.unsqueeze(0)?.unsqueeze(2),
            2 => self.unsqueeze(2),
            _ => Ok(self.clone()),
        }
    }

    /// Concatenation along dim 1 (dim 0 for vectors).
    pub fn hstack(tensors: &[Tensor]) -> Result<Tensor> {
        non_empty(tensors, "hstack")?;
        let ts = tensors
            .iter()
            .map(Tensor::atleast_1d)
            .collect::<Result<Vec<_>>>()?;
        let dim = if ts[0].dim() == 1 { 0 } else { 1 };
        Tensor::cat(&ts, dim)
    }

    /// Concatenation along dim 0 of the inputs made at least 2-D.
    pub fn vstack(tensors: &[Tensor]) -> Result<Tensor> {
        non_empty(tensors, "vstack")?;
        let ts = tensors
            .iter()
            .map(Tensor::atleast_2d)
            .collect::<Result<Vec<_>>>()?;
        Tensor::cat(&ts, 0)
    }

    /// Concatenation along dim 2 of the inputs made at least 3-D.
    pub fn dstack(tensors: &[Tensor]) -> Result<Tensor> {
        non_empty(tensors, "dstack")?;
        let ts = tensors
            .iter()
            .map(Tensor::atleast_3d)
            .collect::<Result<Vec<_>>>()?;
        Tensor::cat(&ts, 2)
    }

    /// Vectors (and scalars) as columns, matrices as they are, concatenated along dim 1.
    pub fn column_stack(tensors: &[Tensor]) -> Result<Tensor> {
        non_empty(tensors, "column_stack")?;
        let ts = tensors
            .iter()
            .map(|t| match t.dim() {
                0 => t.reshape(&[1, 1]),
                1 => t.unsqueeze(1),
                _ => Ok(t.clone()),
            })
            .collect::<Result<Vec<_>>>()?;
        Tensor::cat(&ts, 1)
    }

    /// The shape all `shapes` broadcast to, or torch's error (`broadcast_shapes`).
    pub fn broadcast_all_shapes(shapes: &[Vec<usize>]) -> Result<Dims> {
        let n = shapes.iter().map(Vec::len).max().unwrap_or(0);
        let mut out = vec![1usize; n];
        for (i, s) in shapes.iter().enumerate() {
            for k in 1..=s.len() {
                let (have, want) = (s[s.len() - k], &mut out[n - k]);
                if have == 1 || have == *want {
                    continue;
                }
                if *want == 1 {
                    *want = have;
                    continue;
                }
                let had: Vec<String> = s.iter().map(usize::to_string).collect();
                let had = if had.len() == 1 {
                    format!("({},)", had[0])
                } else {
                    format!("({})", had.join(", "))
                };
                return Err(Error::runtime(format!(
                    "Attempting to broadcast a dimension of length {have} at -{k}! Mismatching argument at index {i} had {had}; but expected shape should be broadcastable to {}",
                    fmt_shape(&out)
                )));
            }
        }
        Ok(out.into())
    }

    /// Every tensor expanded (a view) to the shape they broadcast to.
    pub fn broadcast_tensors(tensors: &[Tensor]) -> Result<Vec<Tensor>> {
        let mut shape = Dims::new();
        for t in tensors {
            shape = broadcast_shapes(&shape, t.shape())?;
        }
        tensors.iter().map(|t| t.expand(&shape)).collect()
    }

    /// Coordinate grids of 0-D or 1-D tensors: with `Ij` grid `i` varies along dim `i` and
    /// has shape `[n0, n1, ...]`; with `Xy` the first two dims are swapped.
    pub fn meshgrid(tensors: &[Tensor], indexing: MeshIndexing) -> Result<Vec<Tensor>> {
        for t in tensors {
            if t.dim() > 1 {
                return Err(Error::runtime(format!(
                    "torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got a tensor of shape {}",
                    fmt_shape(t.shape())
                )));
            }
        }
        let swap = indexing == MeshIndexing::Xy && tensors.len() >= 2;
        let mut order: Vec<usize> = (0..tensors.len()).collect();
        if swap {
            order.swap(0, 1);
        }
        let sizes: Vec<usize> = order.iter().map(|&i| tensors[i].numel()).collect();
        let mut grids = vec![None; tensors.len()];
        for (pos, &i) in order.iter().enumerate() {
            let mut view = vec![1usize; sizes.len()];
            view[pos] = sizes[pos];
            grids[i] = Some(tensors[i].reshape(&view)?.expand(&sizes)?);
        }
        grids
            .into_iter()
            .map(|g| g.ok_or_else(|| Error::runtime("internal error: meshgrid")))
            .collect()
    }

    /// Every combination of one element from each 1-D tensor, one row each (`[N, k]`; a
    /// single input comes back as it is).
    pub fn cartesian_prod(tensors: &[Tensor]) -> Result<Tensor> {
        for t in tensors {
            check_vector(t)?;
        }
        non_empty(tensors, "cartesian_prod")?;
        if tensors.len() == 1 {
            return Ok(tensors[0].clone());
        }
        let grids = Tensor::meshgrid(tensors, MeshIndexing::Ij)?;
        let cols = grids
            .iter()
            .map(|g| g.reshape(&[g.numel()]))
            .collect::<Result<Vec<_>>>()?;
        Tensor::stack(&cols, 1)
    }

    /// The length-`r` combinations of a vector's elements, in lexicographic order of their
    /// positions, one row each; `with_replacement` allows repeats (torch's `combinations`).
    pub fn combinations(&self, r: usize, with_replacement: bool) -> Result<Tensor> {
        check_vector(self)?;
        let n = self.shape()[0];
        if r == 0 {
            return Tensor::try_full(&[0], 0.0, self.dtype());
        }
        let mut rows: Vec<Vec<usize>> = Vec::new();
        let mut c: Vec<usize> = vec![0; r];
        // Enumerate non-decreasing (with replacement) or increasing index tuples.
        fn rec(
            k: usize,
            start: usize,
            n: usize,
            rep: bool,
            c: &mut Vec<usize>,
            rows: &mut Vec<Vec<usize>>,
        ) {
            if k == c.len() {
                rows.push(c.clone());
                return;
            }
            for i in start..n {
                c[k] = i;
                rec(k + 1, if rep { i } else { i + 1 }, n, rep, c, rows);
            }
        }
        rec(0, 0, n, with_replacement, &mut c, &mut rows);
        let m = rows.len();
        let idx: Vec<i64> = rows.into_iter().flatten().map(|i| i as i64).collect();
        let idx = Tensor::from_vec(idx, &[m * r])?;
        self.index_select(0, &idx)?.reshape(&[m, r])
    }

    /// The Kronecker product: block `(i, j)` is `self[i, j] * other` (inputs of fewer dims
    /// get leading size-1 dims).
    pub fn kron(&self, other: &Tensor) -> Result<Tensor> {
        let nd = self.dim().max(other.dim());
        let pad = |t: &Tensor| -> Result<Tensor> {
            let mut s = vec![1usize; nd - t.dim()];
            s.extend_from_slice(t.shape());
            t.reshape(&s)
        };
        let (a, b) = (pad(self)?, pad(other)?);
        // a as [a0, 1, a1, 1, ...], b as [1, b0, 1, b1, ...]: their product interleaves.
        let mut sa = Vec::with_capacity(2 * nd);
        let mut sb = Vec::with_capacity(2 * nd);
        let mut out = Vec::with_capacity(nd);
        for d in 0..nd {
            sa.extend([a.shape()[d], 1]);
            sb.extend([1, b.shape()[d]]);
            out.push(a.shape()[d] * b.shape()[d]);
        }
        a.reshape(&sa)?.mul(&b.reshape(&sb)?)?.reshape(&out)
    }

    /// The sum of products over `dims_a` of `self` and `dims_b` of `other` (paired in order);
    /// the other dims of `self` then of `other` make the result (torch's `tensordot`).
    pub fn tensordot(&self, other: &Tensor, dims_a: &[i64], dims_b: &[i64]) -> Result<Tensor> {
        if dims_a.len() != dims_b.len() {
            return Err(Error::runtime(
                "both dimension lists should have same length",
            ));
        }
        let da = dims_a
            .iter()
            .map(|&d| wrap_dim(d, self.dim()))
            .collect::<Result<Vec<_>>>()?;
        let db = dims_b
            .iter()
            .map(|&d| wrap_dim(d, other.dim()))
            .collect::<Result<Vec<_>>>()?;
        for (&x, &y) in da.iter().zip(&db) {
            if self.shape()[x] != other.shape()[y] {
                return Err(Error::runtime(format!(
                    "contracted dimensions need to match, but first has size {} in dim {} and second has size {} in dim {}",
                    self.shape()[x],
                    dims_a[da.iter().position(|&v| v == x).unwrap_or(0)],
                    other.shape()[y],
                    dims_b[db.iter().position(|&v| v == y).unwrap_or(0)]
                )));
            }
        }
        let free_a: Vec<usize> = (0..self.dim()).filter(|d| !da.contains(d)).collect();
        let free_b: Vec<usize> = (0..other.dim()).filter(|d| !db.contains(d)).collect();
        let perm_a: Vec<i64> = free_a.iter().chain(&da).map(|&d| d as i64).collect();
        let perm_b: Vec<i64> = db.iter().chain(&free_b).map(|&d| d as i64).collect();
        let m: usize = free_a.iter().map(|&d| self.shape()[d]).product();
        let k: usize = da.iter().map(|&d| self.shape()[d]).product();
        let n: usize = free_b.iter().map(|&d| other.shape()[d]).product();
        let a = self.permute(&perm_a)?.reshape(&[m, k])?;
        let b = other.permute(&perm_b)?.reshape(&[k, n])?;
        let mut shape: Vec<usize> = free_a.iter().map(|&d| self.shape()[d]).collect();
        shape.extend(free_b.iter().map(|&d| other.shape()[d]));
        a.mm(&b)?.reshape(&shape)
    }

    /// The inputs (each taken as a matrix: a scalar is `[1, 1]`, a vector `[1, n]`) on the
    /// diagonal of a matrix of zeros (torch's `block_diag`); dtypes promote.
    pub fn block_diag(tensors: &[Tensor]) -> Result<Tensor> {
        for (i, t) in tensors.iter().enumerate() {
            if t.dim() > 2 {
                return Err(Error::runtime(format!(
                    "torch.block_diag: Input tensors must have 2 or fewer dimensions. Input {i} has {} dimensions",
                    t.dim()
                )));
            }
        }
        let mats = tensors
            .iter()
            .map(|t| match t.dim() {
                0 => t.reshape(&[1, 1]),
                1 => t.unsqueeze(0),
                _ => Ok(t.clone()),
            })
            .collect::<Result<Vec<_>>>()?;
        let dtype = mats
            .iter()
            .map(Tensor::dtype)
            .fold(crate::tensor::DType::Bool, crate::tensor::DType::promote);
        let cols: usize = mats.iter().map(|m| m.shape()[1]).sum();
        let mut rows = Vec::with_capacity(mats.len());
        let mut left = 0;
        for m in &mats {
            let (r, c) = (m.shape()[0], m.shape()[1]);
            let mut parts = Vec::new();
            if left > 0 {
                parts.push(Tensor::try_full(&[r, left], 0.0, dtype)?);
            }
            parts.push(m.to_dtype(dtype)?);
            if cols - left - c > 0 {
                parts.push(Tensor::try_full(&[r, cols - left - c], 0.0, dtype)?);
            }
            rows.push(Tensor::cat(&parts, 1)?);
            left += c;
        }
        if rows.is_empty() {
            return Tensor::try_full(&[0, 0], 0.0, crate::tensor::dtype::default_float());
        }
        Tensor::cat(&rows, 0)
    }

    /// Rotated by 90 degrees `k` times in the plane of `dims` (from the first dim towards the
    /// second), torch's `rot90`: flips and a transpose, so the result is a view-backed copy.
    pub fn rot90(&self, k: i64, dims: &[i64]) -> Result<Tensor> {
        if dims.len() != 2 {
            return Err(Error::runtime(format!(
                "expected total rotation dims == 2, but got dims = {}",
                dims.len()
            )));
        }
        if self.dim() < 2 {
            return Err(Error::runtime(format!(
                "expected total dims >= 2, but got total dims = {}",
                self.dim()
            )));
        }
        let (d0, d1) = (
            wrap_dim(dims[0], self.dim())?,
            wrap_dim(dims[1], self.dim())?,
        );
        if d0 == d1 {
            return Err(Error::runtime(format!(
                "expected rotation dims to be different, but got dim0 = {} and dim1 = {}",
                dims[0], dims[1]
            )));
        }
        let (d0, d1) = (d0 as i64, d1 as i64);
        match k.rem_euclid(4) {
            1 => self.flip(&[d1])?.transpose(d0, d1),
            2 => self.flip(&[d0, d1]),
            3 => self.flip(&[d0])?.transpose(d0, d1),
            _ => self.clone_tensor(),
        }
    }

    /// The `n`-th forward difference along `dim` (`out[i] = x[i + 1] - x[i]`), after
    /// `prepend` and `append` are joined on (torch's `diff`).
    pub fn diff(
        &self,
        n: i64,
        dim: i64,
        prepend: Option<&Tensor>,
        append: Option<&Tensor>,
    ) -> Result<Tensor> {
        if self.dim() == 0 {
            return Err(Error::runtime(
                "diff expects input to be at least one-dimensional",
            ));
        }
        if n < 0 {
            return Err(Error::runtime(format!(
                "order must be non-negative but got {n}"
            )));
        }
        let d = wrap_dim(dim, self.dim())?;
        let mut parts = Vec::new();
        for t in [prepend, Some(self), append].into_iter().flatten() {
            if t.dim() != self.dim() {
                return Err(Error::runtime(
                    "diff expects prepend or append to be the same dimension as input",
                ));
            }
            parts.push(t.clone());
        }
        let mut x = if parts.len() == 1 {
            self.clone()
        } else {
            Tensor::cat(&parts, d as i64)?
        };
        for _ in 0..n {
            let len = x.shape()[d];
            if len == 0 {
                break;
            }
            let hi = x.narrow(d as i64, 1, len - 1)?;
            let lo = x.narrow(d as i64, 0, len - 1)?;
            x = if x.dtype() == crate::tensor::DType::Bool {
                hi.logical_xor(&lo)?
            } else {
                hi.sub(&lo)?
            };
        }
        Ok(x)
    }
}
