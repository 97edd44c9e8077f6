//! Numerically stable log-sum-exp, softmax and log-softmax (each subtracts the maximum first).

use crate::autograd::grad_mode::GradModeGuard;
use crate::autograd::node::{needs_grad, record};
use crate::error::Result;
use crate::ops::convert::cast;
use crate::ops::reduce::reduce_dims;
use crate::tensor::shape::wrap_dim;
use crate::tensor::Tensor;

/// Softmax kernels take floats only (torch raises NotImplementedError for integers).
fn float_only(t: &Tensor, kernel: &str) -> Result<()> {
    if t.dtype().is_float() {
        Ok(())
    } else {
        Err(crate::error::Error::not_implemented(format!(
            "\"{kernel}\" not implemented for '{}'",
            crate::tensor::scalar_type_name(t.dtype())
        )))
    }
}

/// A float version of `t` (integers and bools become float32, as torch promotes them).
fn floated(t: &Tensor) -> Result<Tensor> {
    if t.dtype().is_float() {
        Ok(t.clone())
    } else {
        cast(t, crate::tensor::dtype::default_float())
    }
}

/// The per-group maximum over `dims` (kept as size 1), with infinities replaced by 0 so that
/// `x - m` never becomes inf - inf; a constant (no gradient).
fn stable_shift(x: &Tensor, dims: &[i64]) -> Result<Tensor> {
    let _g = GradModeGuard::new(false);
    let x = x.detach();
    if x.numel() == 0 {
        return Ok(Tensor::zeros(
            &crate::ops::reduce::reduced_shape(x.shape(), &reduce_dims(dims, x.dim())?, true),
            x.dtype(),
        ));
    }
    let m = x.amax(dims, true)?;
    Tensor::where_cond(&m.isinf()?, &Tensor::wrapped_scalar(0.0, m.dtype()), &m)
}

impl Tensor {
    /// log Σ exp(x) over `dims`, computed as `m + log Σ exp(x - m)` with `m` the maximum, so
    /// large inputs do not overflow. Its gradient is the softmax.
    pub fn logsumexp(&self, dims: &[i64], keepdim: bool) -> Result<Tensor> {
        let x = floated(self)?;
        let rd = reduce_dims(dims, x.dim())?;
        let out = {
            let _g = GradModeGuard::new(false);
            let xd = x.detach();
            let m = stable_shift(&xd, dims)?;
            let s = xd.sub(&m)?.exp()?.sum_dims(dims, true)?.log()?.add(&m)?;
            if keepdim {
                s
            } else {
                let shape = crate::ops::reduce::reduced_shape(x.shape(), &rd, false);
                s.reshape(&shape)?
            }
        };
        if needs_grad(&[&x]) {
            let keep_shape = crate::ops::reduce::reduced_shape(x.shape(), &rd, true);
            record(
                "LogsumexpBackward0",
                &[&x],
                &[&out],
                &[&x, &out],
                false,
                move |g, s| {
                    // d/dx = exp(x - out), the softmax.
                    let o = s[1].reshape(&keep_shape)?;
                    let p = s[0].sub(&o)?.exp()?;
                    Ok(vec![Some(g[0].reshape(&keep_shape)?.mul(&p)?)])
                },
            )?;
        }
        Ok(out)
    }

    /// Softmax along `dim` (float inputs only, like torch): `exp(x - m) / Σ exp(x - m)`. Backward: `y (g - Σ g y)`, written with
    /// differentiable ops on the saved output.
    pub fn softmax(&self, dim: i64) -> Result<Tensor> {
        float_only(self, "softmax_kernel_impl")?;
        let x = floated(self)?;
        let d = wrap_dim(dim, x.dim())? as i64;
        let out = {
            let _g = GradModeGuard::new(false);
            let e = x.detach().sub(&stable_shift(&x, &[d])?)?.exp()?;
            e.div(&e.sum_dims(&[d], true)?)?
        };
        if needs_grad(&[&x]) {
            record(
                "SoftmaxBackward0",
                &[&x],
                &[&out],
                &[&out],
                false,
                move |g, s| {
                    let y = &s[0];
                    let gy = g[0].mul(y)?;
                    Ok(vec![Some(gy.sub(&y.mul(&gy.sum_dims(&[d], true)?)?)?)])
                },
            )?;
        }
        Ok(out)
    }

    /// Log-softmax along `dim`: `x - m - log Σ exp(x - m)`. Backward: `g - exp(y) Σ g`.
    pub fn log_softmax(&self, dim: i64) -> Result<Tensor> {
        float_only(self, "log_softmax_kernel_impl")?;
        let x = floated(self)?;
        let d = wrap_dim(dim, x.dim())? as i64;
        let out = {
            let _g = GradModeGuard::new(false);
            let z = x.detach().sub(&stable_shift(&x, &[d])?)?;
            z.sub(&z.exp()?.sum_dims(&[d], true)?.log()?)?
        };
        if needs_grad(&[&x]) {
            record(
                "LogSoftmaxBackward0",
                &[&x],
                &[&out],
                &[&out],
                false,
                move |g, s| {
                    let y = &s[0];
                    Ok(vec![Some(
                        g[0].sub(&y.exp()?.mul(&g[0].sum_dims(&[d], true)?)?)?,
                    )])
                },
            )?;
        }
        Ok(out)
    }
}
