//! Elementwise unary ops, each with its backward rule beside it. Rules reuse the forward output
//! where the derivative is a function of it (exp, tanh, sigmoid, sqrt).

use crate::autograd::node::{needs_grad, record};
use crate::error::Result;
use crate::ops::elementwise::{map, map_float};
use crate::tensor::{DType, Tensor};

impl Tensor {
    /// Elementwise logical not (bool result).
    pub fn logical_not(&self) -> Result<Tensor> {
        let b = if self.dtype() == DType::Bool {
            self.clone()
        } else {
            self.ne_scalar(0.0)?
        };
        map::<bool, bool>(&b, |x| !x)
    }

    /// `-self`.
    pub fn neg(&self) -> Result<Tensor> {
        let out = match self.dtype() {
            DType::Float32 => map::<f32, f32>(self, |x| -x)?,
            DType::Float64 => map::<f64, f64>(self, |x| -x)?,
            DType::Int64 => map::<i64, i64>(self, i64::wrapping_neg)?,
            DType::Bool => {
                return Err(crate::error::Error::runtime(
                    "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert a mask, use the `~` or `logical_not()` operator instead.",
                ))
            }
        };
        if needs_grad(&[self]) {
            record("NegBackward0", &[self], &[&out], &[], false, |g, _| {
                Ok(vec![Some(g[0].neg()?)])
            })?;
        }
        Ok(out)
    }

    /// e^x.
    pub fn exp(&self) -> Result<Tensor> {
        let out = map_float!(self, |x| x.exp())?;
        if needs_grad(&[self]) {
            record("ExpBackward0", &[self], &[&out], &[&out], false, |g, s| {
                Ok(vec![Some(g[0].mul(&s[0])?)])
            })?;
        }
        Ok(out)
    }

    /// Natural logarithm.
    pub fn log(&self) -> Result<Tensor> {
        let out = map_float!(self, |x| x.ln())?;
        if needs_grad(&[self]) {
            record("LogBackward0", &[self], &[&out], &[self], false, |g, s| {
                Ok(vec![Some(g[0].div(&s[0])?)])
            })?;
        }
        Ok(out)
    }

    /// Sine.
    pub fn sin(&self) -> Result<Tensor> {
        let out = map_float!(self, |x| x.sin())?;
        if needs_grad(&[self]) {
            record("SinBackward0", &[self], &[&out], &[self], false, |g, s| {
                Ok(vec![Some(g[0].mul(&s[0].cos()?)?)])
            })?;
        }
        Ok(out)
    }

    /// Cosine.
    pub fn cos(&self) -> Result<Tensor> {
        let out = map_float!(self, |x| x.cos())?;
        if needs_grad(&[self]) {
            record("CosBackward0", &[self], &[&out], &[self], false, |g, s| {
                Ok(vec![Some(g[0].mul(&s[0].sin()?.neg()?)?)])
            })?;
        }
        Ok(out)
    }

    /// Hyperbolic tangent; d/dx = 1 - tanh².
    pub fn tanh(&self) -> Result<Tensor> {
        let out = map_float!(self, |x| x.tanh())?;
        if needs_grad(&[self]) {
            record("TanhBackward0", &[self], &[&out], &[&out], false, |g, s| {
                let y = &s[0];
                Ok(vec![Some(g[0].mul(&y.mul(y)?.rsub_scalar(1.0)?)?)])
            })?;
        }
        Ok(out)
    }

    /// Logistic sigmoid; d/dx = y (1 - y).
    pub fn sigmoid(&self) -> Result<Tensor> {
        let out = map_float!(self, |x| if x >= 0.0 {
            1.0 / (1.0 + (-x).exp())
        } else {
            x.exp() / (1.0 + x.exp())
        })?;
        if needs_grad(&[self]) {
            record(
                "SigmoidBackward0",
                &[self],
                &[&out],
                &[&out],
                false,
                |g, s| {
                    let y = &s[0];
                    Ok(vec![Some(g[0].mul(&y.mul(&y.rsub_scalar(1.0)?)?)?)])
                },
            )?;
        }
        Ok(out)
    }

    /// max(x, 0). The subgradient at 0 is 0, as in torch.
    pub fn relu(&self) -> Result<Tensor> {
        let out = match self.dtype() {
            DType::Int64 => map::<i64, i64>(self, |x| x.max(0))?,
            DType::Bool => self.clone(),
            _ => map_float!(self, |x| if x > 0.0 || x.is_nan() { x } else { 0.0 })?,
        };
        if needs_grad(&[self]) {
            record("ReluBackward0", &[self], &[&out], &[&out], false, |g, s| {
                Ok(vec![Some(Tensor::where_cond(
                    &s[0].gt_scalar(0.0)?,
                    &g[0],
                    &Tensor::wrapped_scalar(0.0, g[0].dtype()),
                )?)])
            })?;
        }
        Ok(out)
    }

    /// Square root; d/dx = 1 / (2 sqrt x).
    pub fn sqrt(&self) -> Result<Tensor> {
        let out = map_float!(self, |x| x.sqrt())?;
        if needs_grad(&[self]) {
            record("SqrtBackward0", &[self], &[&out], &[&out], false, |g, s| {
                Ok(vec![Some(g[0].div(&s[0].mul_scalar(2.0)?)?)])
            })?;
        }
        Ok(out)
    }

    /// |x|; the subgradient at 0 is 0 (sign(0) = 0), as in torch.
    pub fn abs(&self) -> Result<Tensor> {
        let out = match self.dtype() {
            DType::Int64 => map::<i64, i64>(self, i64::wrapping_abs)?,
            DType::Bool => self.clone(),
            _ => map_float!(self, |x| x.abs())?,
        };
        if needs_grad(&[self]) {
            record("AbsBackward0", &[self], &[&out], &[self], false, |g, s| {
                Ok(vec![Some(g[0].mul(&s[0].sign()?)?)])
            })?;
        }
        Ok(out)
    }

    /// -1, 0 or 1 by sign (0 for 0 and NaN stays NaN); its gradient is zero.
    pub fn sign(&self) -> Result<Tensor> {
        let out = match self.dtype() {
            DType::Int64 => map::<i64, i64>(self, i64::signum)?,
            DType::Bool => self.clone(),
            _ => map_float!(self, |x| if x > 0.0 {
                1.0
            } else if x < 0.0 {
                -1.0
            } else {
                x
            })?,
        };
        if needs_grad(&[self]) {
            record("SignBackward0", &[self], &[&out], &[], false, |g, _| {
                Ok(vec![Some(g[0].mul_scalar(0.0)?)])
            })?;
        }
        Ok(out)
    }
}
