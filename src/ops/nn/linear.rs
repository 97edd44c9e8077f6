//! `linear`: `y = x wᵀ + b` as one node (torch's `addmm`), the input's leading dims folded into
//! the rows of one product. Its backward is three products of the output gradient — no
//! transposed weight gradient to copy back and no batch of weight gradients to sum.

use crate::error::{Error, Result};
use crate::graph::node::{grad_if_wanted, needs_grad, record_with_jvp, sum_tangents};
use crate::ops::elementwise::add_rows_assign;
use crate::tensor::grad_mode::{self, GradModeGuard};
use crate::tensor::{DType, Dims, Element, Layout, Tensor};

/// `x @ weight.T + bias` over the last dim of `x` (`(*, in)` with `weight` `(out, in)` and
/// `bias` `(out,)` gives `(*, out)`), as `torch.nn.functional.linear`.
///
/// Float inputs of one dtype with a 2-D weight and a 1-D bias (or none) take the fused path;
/// other combinations (a 1-D weight, a broadcasting bias, integer or mixed dtypes) are computed
/// as `matmul` plus `add`, with those ops' checks and messages. Errors: an input of no dims, or
/// sizes that do not multiply (torch's `mat1 and mat2 shapes cannot be multiplied`).
pub fn linear(x: &Tensor, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
    linear_with(x, weight, None, bias, false)
}

/// [`linear`] with `weight_t`, a contiguous copy of `weight.T` made once by a caller that
/// applies one weight many times (a recurrence's steps): the product reads its right operand
/// row by row, which the gemm packs much faster than the transposed view (32 x 128 by 128 x 512:
/// 21 against 33 µs on one thread). The node is `linear`'s, its backward reading `weight`.
///
/// `defer_weight_grad`: the weight's gradient is left to another node that computes it for
/// every application at once (a recurrence's, see `rnn::defer_recurrent_weight_grad`), except
/// when the backward is itself recorded (`create_graph`), where this node computes it as usual.
/// Honoured on the fused path only: callers set it for float32/float64 operands with a 2-D
/// weight, which always take it.
pub(crate) fn linear_with(
    x: &Tensor,
    weight: &Tensor,
    weight_t: Option<&Tensor>,
    bias: Option<&Tensor>,
    defer_weight_grad: bool,
) -> Result<Tensor> {
    if let Some(r) = Tensor::lift_half([x, weight], [bias], |[x, w], [b]| linear(x, w, b)) {
        return r;
    }
    let dtype = x.dtype();
    let fused = dtype.is_float()
        && x.dim() >= 1
        && weight.dim() == 2
        && weight.dtype() == dtype
        && bias.is_none_or(|b| {
            b.dim() == 1 && b.dtype() == dtype && b.shape()[0] == weight.shape()[0]
        });
    if !fused {
        if x.dim() == 0 {
            return Err(Error::runtime(
                "both arguments to linear need to be at least 1D, but they are 0D and 2D",
            ));
        }
        let wt = if weight.dim() == 2 {
            weight.t()?
        } else {
            weight.clone()
        };
        let y = x.matmul(&wt)?;
        return match bias {
            Some(b) => y.add(b),
            None => Ok(y),
        };
    }
    let y = {
        let _g = GradModeGuard::new(false);
        let rows = fold_rows(x)?;
        let wt = match weight_t {
            Some(t)
                if !weight.is_batched()
                    && t.dtype() == dtype
                    && t.shape() == [weight.shape()[1], weight.shape()[0]] =>
            {
                t.clone()
            }
            _ => weight.t()?,
        };
        let mut y = rows.matmul(&wt)?;
        if let Some(b) = bias {
            if y.is_batched() || b.is_batched() {
                // Inside vmap the product has no elements of its own to add into.
                y = y.add(b)?;
            } else {
                match dtype {
                    DType::Float32 => add_bias::<f32>(&y, b)?,
                    _ => add_bias::<f64>(&y, b)?,
                }
            }
        }
        let mut shape: Dims = x.shape()[..x.dim() - 1].into();
        shape.push(weight.shape()[0]);
        // The fresh product under the input's leading dims: not a view, so in-place ops on
        // the result are as free as on any op's output.
        y.alias_with_layout(Layout::contiguous(&shape))
    };
    let mut inputs = vec![x, weight];
    inputs.extend(bias);
    if needs_grad(&inputs) {
        let name = if bias.is_some() {
            "AddmmBackward0"
        } else {
            "MmBackward0"
        };
        let has_bias = bias.is_some();
        record_with_jvp(
            name,
            &inputs,
            &[&y],
            &[x, weight],
            false,
            move |g, s| {
                let (x, w) = (&s[0], &s[1]);
                let g2 = fold_rows(&g[0])?;
                let gx = grad_if_wanted(0, || g2.matmul(w)?.reshape(x.shape()))?;
                let gw = if defer_weight_grad && !grad_mode::is_grad_enabled() {
                    None
                } else {
                    grad_if_wanted(1, || g2.t()?.matmul(&fold_rows(x)?))?
                };
                let mut grads = vec![gx, gw];
                if has_bias {
                    grads.push(grad_if_wanted(2, || g2.sum_dims(&[0], false))?);
                }
                Ok(grads)
            },
            // d(x Wᵀ + b) = dx Wᵀ + x dWᵀ + db
            &|t| {
                let mut parts = Vec::new();
                if let Some(tx) = &t[0] {
                    parts.push(tx.matmul(&weight.t()?)?);
                }
                if let Some(tw) = &t[1] {
                    parts.push(x.matmul(&tw.t()?)?);
                }
                if let Some(Some(tb)) = t.get(2) {
                    parts.push(tb.clone());
                }
                Ok(vec![sum_tangents(parts, &y)?])
            },
        )?;
    }
    Ok(y)
}

/// `t` as a matrix of its last dim's rows (a view when the layout allows).
fn fold_rows(t: &Tensor) -> Result<Tensor> {
    let nd = t.dim();
    let cols = t.shape()[nd - 1];
    t.reshape(&[t.shape()[..nd - 1].iter().product(), cols])
}

/// `y[r, :] += b` for every row of the fresh, contiguous product `y`.
fn add_bias<T: Element + std::ops::Add<Output = T>>(y: &Tensor, b: &Tensor) -> Result<()> {
    let b = b.contiguous()?;
    let bg = b.storage().read();
    let row = T::data(&bg)
        .ok_or_else(|| crate::tensor::dtype_mismatch(T::DTYPE, b.dtype()))?
        .as_slice();
    let row = &row[b.layout().offset..b.layout().offset + b.numel()];
    let mut yg = y.storage().write();
    let out = T::data_mut(&mut yg)
        .ok_or_else(|| crate::tensor::dtype_mismatch(T::DTYPE, y.dtype()))?
        .as_mut_slice();
    add_rows_assign(out, row);
    Ok(())
}
