//! Linear algebra on top of `matmul` and the shape ops: `einsum`, `trace`, `diag`, `diagonal`, `tril`, `triu`. All are compositions of differentiable ops or
//! have backward rules written with them. The `torch.linalg` family lives in the submodules:
//! factorisations through `faer` (`lapack`), inverse/solve/determinants/`matrix_exp`
//! (`solve`), Cholesky/QR/eigh/SVD/pinv/lstsq (`factor`) and `cross`/`vecdot`/`multi_dot`
//! (`products`).

mod factor;
mod lapack;
mod products;
mod solve;

pub use factor::QrMode;

/// The per-matrix status codes of [`Tensor::inv_ex`] or [`Tensor::cholesky_ex`] on `a` as an
/// int64 tensor shaped like `a`'s batch (batched as `a` is inside vmap, where `info` has one
/// code per matrix of every sample).
pub fn info_tensor(info: &[usize], a: &Tensor) -> Result<Tensor> {
    let (phys, levels) = crate::tensor::batched::peel(a);
    let batch = &phys.shape()[..phys.dim().saturating_sub(2)];
    let codes: Vec<i64> = info.iter().map(|&i| i as i64).collect();
    crate::tensor::batched::rewrap(Tensor::from_vec(codes, batch)?, &levels)
}

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::graph::node::{needs_grad, record};
use crate::ops::indexing::{flat, positions, rm_strides};
use crate::tensor::grad_mode::GradModeGuard;
use crate::tensor::shape::wrap_dim;
use crate::tensor::{Dims, Layout, Tensor};

impl Tensor {
    /// The diagonal `offset` of the planes spanned by `dim1` and `dim2`, as the last dim
    /// (a view).
    pub fn diagonal(&self, offset: i64, dim1: i64, dim2: i64) -> Result<Tensor> {
        let nd = self.dim();
        let (a, b) = (wrap_dim(dim1, nd)?, wrap_dim(dim2, nd)?);
        if a == b {
            return Err(Error::runtime(format!(
                "diagonal dimensions cannot be identical {dim1}, {dim2}"
            )));
        }
        let transform = move |l: &Layout| -> Layout {
            let (na, nb) = (l.shape[a] as i64, l.shape[b] as i64);
            let len = if offset >= 0 {
                (na).min(nb - offset).max(0)
            } else {
                (na + offset).min(nb).max(0)
            } as usize;
            let mut off = l.offset;
            if len > 0 {
                if offset >= 0 {
                    off += offset as usize * l.strides[b];
                } else {
                    off += (-offset) as usize * l.strides[a];
                }
            }
            let stride = l.strides[a] + l.strides[b];
            let mut shape = Dims::new();
            let mut strides = Dims::new();
            for i in 0..l.shape.len() {
                if i != a && i != b {
                    shape.push(l.shape[i]);
                    strides.push(l.strides[i]);
                }
            }
            shape.push(len);
            strides.push(stride);
            Layout {
                shape,
                strides,
                offset: off,
            }
        };
        let out = self.make_view(transform(self.layout()));
        if needs_grad(&[self]) {
            let idx = Arc::new(transform(&Layout::contiguous(self.shape())).offsets()?);
            let in_shape: Dims = self.shape().into();
            record(
                "DiagonalBackward0",
                &[self],
                &[&out],
                &[],
                false,
                move |g, _| {
                    let gc = g[0].contiguous()?;
                    Ok(vec![Some(gc.scatter_add_flat(&in_shape, &idx)?)])
                },
            )?;
        }
        Ok(out)
    }

    /// Sum of the main diagonal of a matrix.
    pub fn trace(&self) -> Result<Tensor> {
        if self.dim() != 2 {
            return Err(Error::runtime(format!(
                "trace: expected a matrix, but got tensor with dim {}",
                self.dim()
            )));
        }
        self.diagonal(0, 0, 1)?.sum()
    }

    /// Vector → square matrix with it on diagonal `diagonal`; matrix → that diagonal (a copy).
    pub fn diag(&self, diagonal: i64) -> Result<Tensor> {
        match self.dim() {
            1 => {
                let n = self.shape()[0];
                let k = diagonal.unsigned_abs() as usize;
                let m = n + k;
                let pos: Vec<usize> = (0..n)
                    .map(|i| {
                        if diagonal >= 0 {
                            i * m + i + k
                        } else {
                            (i + k) * m + i
                        }
                    })
                    .collect();
                let idx = Arc::new(pos);
                let out = {
                    let _g = GradModeGuard::new(false);
                    self.contiguous()?.scatter_add_flat(&[m, m], &idx)?
                };
                if needs_grad(&[self]) {
                    record(
                        "DiagEmbedBackward0",
                        &[self],
                        &[&out],
                        &[],
                        false,
                        move |g, _| Ok(vec![Some(g[0].contiguous()?.take_flat(&idx, &[n])?)]),
                    )?;
                }
                Ok(out)
            }
            2 => {
                let d = self.diagonal(diagonal, 0, 1)?;
                let n = d.numel();
                let st = rm_strides(self.shape());
                let (r0, c0) = if diagonal >= 0 {
                    (0, diagonal as usize)
                } else {
                    ((-diagonal) as usize, 0)
                };
                drop(d);
                let pos = positions(&[n], |c| Ok(flat(&[r0 + c[0], c0 + c[0]], &st)))?;
                self.gather_named("DiagonalBackward0", pos, &[n])
            }
            d => Err(Error::runtime(format!(
                "diag(): Supports 1D or 2D tensors. Got {d}D"
            ))),
        }
    }

    fn tri(&self, diagonal: i64, lower: bool) -> Result<Tensor> {
        let name = if lower { "tril" } else { "triu" };
        if self.dim() < 2 {
            return Err(Error::runtime(format!(
                "{name}: input tensor must have at least 2 dimensions"
            )));
        }
        let shape = self.shape().to_vec();
        let nd = shape.len();
        let keep = positions(&shape, |c| {
            let (r, col) = (c[nd - 2] as i64, c[nd - 1] as i64);
            Ok(usize::from(if lower {
                col - r <= diagonal
            } else {
                col - r >= diagonal
            }))
        })?;
        let mask = Tensor::from_vec(keep.iter().map(|&k| k == 1).collect::<Vec<_>>(), &shape)?;
        let out = {
            let _g = GradModeGuard::new(false);
            Tensor::where_cond(&mask, self, &Tensor::wrapped_scalar(0.0, self.dtype()))?
        };
        if needs_grad(&[self]) {
            let node = if lower {
                "TrilBackward0"
            } else {
                "TriuBackward0"
            };
            record(node, &[self], &[&out], &[], false, move |g, _| {
                Ok(vec![Some(g[0].tri(diagonal, lower)?)])
            })?;
        }
        Ok(out)
    }

    /// Lower triangle (elements with `col - row <= diagonal`), zeros elsewhere.
    pub fn tril(&self, diagonal: i64) -> Result<Tensor> {
        self.tri(diagonal, true)
    }

    /// Upper triangle (elements with `col - row >= diagonal`), zeros elsewhere.
    pub fn triu(&self, diagonal: i64) -> Result<Tensor> {
        self.tri(diagonal, false)
    }

    /// Einstein summation (`"ij,jk->ik"`, `"ii->"`, `"...ij,...jk->...ik"`, ...). Operands are
    /// aligned on a common subscript order by diagonal/permute/unsqueeze, multiplied with
    /// broadcasting and summed over the contracted subscripts, so it is differentiable.
    pub fn einsum(equation: &str, operands: &[Tensor]) -> Result<Tensor> {
        const ELL: u32 = 0x100;
        let eq: String = equation.chars().filter(|c| !c.is_whitespace()).collect();
        let (lhs, rhs) = match eq.split_once("->") {
            Some((l, r)) => (l.to_string(), Some(r.to_string())),
            None => (eq.clone(), None),
        };
        let terms: Vec<&str> = lhs.split(',').collect();
        if terms.len() < operands.len() {
            return Err(Error::runtime(
                "einsum(): more operands were provided than specified in the equation",
            ));
        }
        if terms.len() > operands.len() {
            return Err(Error::runtime(
                "einsum(): fewer operands were provided than specified in the equation",
            ));
        }
        // Subscripts of each operand, with ellipsis dims as private chars aligned right.
        let mut n_ell = 0usize;
        let mut subs: Vec<Vec<char>> = Vec::new();
        for (t, x) in terms.iter().zip(operands) {
            let explicit: Vec<char> = t.replace("...", "").chars().collect();
            for &c in &explicit {
                if !c.is_ascii_alphabetic() {
                    return Err(Error::runtime(format!(
                        "einsum(): invalid subscript given at index {}",
                        t.find(c).unwrap_or(0)
                    )));
                }
            }
            let has_ell = t.contains("...");
            if (!has_ell && explicit.len() != x.dim()) || (has_ell && explicit.len() > x.dim()) {
                return Err(Error::runtime(format!(
                    "einsum(): the number of subscripts in the equation ({}) does not match the number of dimensions ({}) for operand {}{}",
                    explicit.len(),
                    x.dim(),
                    subs.len(),
                    if has_ell { "" } else { " and no ellipsis was given" }
                )));
            }
            let mut s = Vec::new();
            if has_ell {
                let k = x.dim() - explicit.len();
                n_ell = n_ell.max(k);
                let (pre, post) = t.split_once("...").unwrap_or((t, ""));
                s.extend(pre.chars());
                // placeholder count filled below once n_ell is known
                for j in 0..k {
                    s.push(char::from_u32(ELL + 1000 + j as u32).unwrap_or('?'));
                }
                s.extend(post.chars());
            } else {
                s.extend(explicit);
            }
            subs.push(s);
        }
        // Right-align ellipsis dims: operand with k ellipsis dims uses the last k of n_ell.
        for (s, x) in subs.iter_mut().zip(operands) {
            let k = s.iter().filter(|c| (**c as u32) >= ELL + 1000).count();
            let _ = x;
            for c in s.iter_mut() {
                let v = *c as u32;
                if v >= ELL + 1000 {
                    let j = (v - ELL - 1000) as usize;
                    *c = char::from_u32(ELL + (n_ell - k + j) as u32).unwrap_or('?');
                }
            }
        }
        let ell: Vec<char> = (0..n_ell)
            .map(|j| char::from_u32(ELL + j as u32).unwrap_or('?'))
            .collect();
        let mut count = std::collections::BTreeMap::new();
        for s in &subs {
            for &c in s {
                *count.entry(c).or_insert(0usize) += 1;
            }
        }
        let out: Vec<char> = match rhs {
            Some(r) => {
                let mut o = Vec::new();
                let (pre, post) = r.split_once("...").unwrap_or((&r, ""));
                o.extend(pre.chars());
                if r.contains("...") {
                    o.extend(ell.iter().copied());
                }
                o.extend(post.chars());
                for (i, &c) in o.iter().enumerate() {
                    if (c as u32) < ELL && !count.contains_key(&c) {
                        return Err(Error::runtime(format!(
                            "einsum(): output subscript {c} does not appear in the equation for any input operand"
                        )));
                    }
                    if o[..i].contains(&c) {
                        return Err(Error::runtime(format!(
                            "einsum(): output subscript {c} appears more than once in the output"
                        )));
                    }
                }
                o
            }
            None => {
                let mut o = ell.clone();
                o.extend(
                    count
                        .iter()
                        .filter(|(c, &n)| n == 1 && (**c as u32) < ELL)
                        .map(|(c, _)| *c),
                );
                o
            }
        };
        let mut order = out.clone();
        for &c in count.keys() {
            if !order.contains(&c) {
                order.push(c);
            }
        }
        // Align each operand to `order`.
        let mut sizes: std::collections::HashMap<char, usize> = Default::default();
        let mut aligned = Vec::new();
        let mut prepped = Vec::new();
        for (k, (s, x)) in subs.iter().zip(operands).enumerate() {
            let mut s = s.clone();
            let mut x = x.clone();
            // Repeated subscripts within one operand take a diagonal.
            loop {
                let dup = (0..s.len())
                    .find_map(|i| (i + 1..s.len()).find(|&j| s[j] == s[i]).map(|j| (i, j)));
                let Some((i, j)) = dup else { break };
                if x.shape()[i] != x.shape()[j] {
                    return Err(Error::runtime(format!(
                        "einsum(): subscript {} is repeated for operand {k} but the sizes don't match, {} != {}",
                        s[i],
                        x.shape()[i],
                        x.shape()[j]
                    )));
                }
                x = x.diagonal(0, i as i64, j as i64)?;
                let c = s[i];
                s.remove(j);
                s.remove(i);
                s.push(c);
            }
            for (i, &c) in s.iter().enumerate() {
                let n = x.shape()[i];
                match sizes.get(&c) {
                    Some(&m) if m != n && m != 1 && n != 1 => {
                        return Err(Error::runtime(format!(
                            "einsum(): subscript {} has size {n} for operand {k} which does not broadcast with previously seen size {m}",
                            if (c as u32) >= ELL { '.' } else { c }
                        )));
                    }
                    Some(&m) if m != 1 => {}
                    _ => {
                        sizes.insert(c, n);
                    }
                }
            }
            prepped.push((s.clone(), x.clone()));
            let present: Vec<char> = order.iter().copied().filter(|c| s.contains(c)).collect();
            let perm: Vec<i64> = present
                .iter()
                .map(|c| s.iter().position(|d| d == c).unwrap_or(0) as i64)
                .collect();
            let mut y = x.permute(&perm)?;
            for (i, c) in order.iter().enumerate() {
                if !s.contains(c) {
                    y = y.unsqueeze(i as i64)?;
                }
            }
            aligned.push(y);
        }
        if let [a, b] = prepped.as_slice() {
            if let Some(r) = einsum_pair(a, b, &out)? {
                return Ok(r);
            }
        }
        let mut acc = aligned[0].clone();
        for y in &aligned[1..] {
            acc = acc.mul(y)?;
        }
        // Broadcast dims that no operand has at full size stay 1; expand to the known sizes.
        let full: Vec<usize> = order
            .iter()
            .map(|c| sizes.get(c).copied().unwrap_or(1))
            .collect();
        if acc.shape() != full.as_slice() {
            acc = acc.expand(&full)?;
        }
        let red: Vec<i64> = (out.len()..order.len()).map(|i| i as i64).collect();
        if red.is_empty() {
            Ok(acc)
        } else {
            acc.sum_dims(&red, false)
        }
    }
}

/// Two-operand einsum as one (batched) `matmul`: subscripts only in one operand and not in the
/// output are summed first; shared output subscripts are batch dims, shared others contracted.
/// `None` when a contracted subscript would need broadcasting (the generic path handles it).
fn einsum_pair(
    a: &(Vec<char>, Tensor),
    b: &(Vec<char>, Tensor),
    out: &[char],
) -> Result<Option<Tensor>> {
    let sum_alone = |s: &[char], x: &Tensor, other: &[char]| -> Result<(Vec<char>, Tensor)> {
        let keep = |c: &char| other.contains(c) || out.contains(c);
        let dims: Vec<i64> = (0..s.len())
            .filter(|&i| !keep(&s[i]))
            .map(|i| i as i64)
            .collect();
        if dims.is_empty() {
            return Ok((s.to_vec(), x.clone()));
        }
        Ok((
            s.iter().copied().filter(|c| keep(c)).collect(),
            x.sum_dims(&dims, false)?,
        ))
    };
    let (sa, xa) = sum_alone(&a.0, &a.1, &b.0)?;
    let (sb, xb) = sum_alone(&b.0, &b.1, &sa)?;
    let pos = |s: &[char], c: char| s.iter().position(|d| *d == c).unwrap_or(0);
    let batch: Vec<char> = out
        .iter()
        .copied()
        .filter(|c| sa.contains(c) && sb.contains(c))
        .collect();
    let contract: Vec<char> = sa
        .iter()
        .copied()
        .filter(|c| sb.contains(c) && !out.contains(c))
        .collect();
    let lonly: Vec<char> = out
        .iter()
        .copied()
        .filter(|c| sa.contains(c) && !sb.contains(c))
        .collect();
    let ronly: Vec<char> = out
        .iter()
        .copied()
        .filter(|c| sb.contains(c) && !sa.contains(c))
        .collect();
    for &c in &contract {
        if xa.shape()[pos(&sa, c)] != xb.shape()[pos(&sb, c)] {
            return Ok(None);
        }
    }
    let size_a = |c: char| xa.shape()[pos(&sa, c)];
    let size_b = |c: char| xb.shape()[pos(&sb, c)];
    let perm_a: Vec<i64> = batch
        .iter()
        .chain(&lonly)
        .chain(&contract)
        .map(|&c| pos(&sa, c) as i64)
        .collect();
    let perm_b: Vec<i64> = batch
        .iter()
        .chain(&contract)
        .chain(&ronly)
        .map(|&c| pos(&sb, c) as i64)
        .collect();
    let k: usize = contract.iter().map(|&c| size_a(c)).product();
    let l: usize = lonly.iter().map(|&c| size_a(c)).product();
    let r: usize = ronly.iter().map(|&c| size_b(c)).product();
    let mut shape_a: Vec<usize> = batch.iter().map(|&c| size_a(c)).collect();
    shape_a.extend([l, k]);
    let mut shape_b: Vec<usize> = batch.iter().map(|&c| size_b(c)).collect();
    shape_b.extend([k, r]);
    let ma = xa.permute(&perm_a)?.reshape(&shape_a)?;
    let mb = xb.permute(&perm_b)?.reshape(&shape_b)?;
    let prod = ma.matmul(&mb)?;
    let nb = batch.len();
    let mut shape: Vec<usize> = prod.shape()[..nb].to_vec();
    shape.extend(lonly.iter().map(|&c| size_a(c)));
    shape.extend(ronly.iter().map(|&c| size_b(c)));
    let res = prod.reshape(&shape)?;
    let now: Vec<char> = batch.iter().chain(&lonly).chain(&ronly).copied().collect();
    let perm: Vec<i64> = out.iter().map(|&c| pos(&now, c) as i64).collect();
    Ok(Some(res.permute(&perm)?))
}
