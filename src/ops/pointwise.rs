//! Pointwise ops of three operands (`lerp`, `addcmul`, `addcdiv`) and closeness tests
//! (`isclose`, `allclose`, `equal`). The three-operand ops compute their forward without a graph
//! and record one node under torch's name whose backward is written with differentiable ops, so
//! `create_graph` works.

use crate::error::{Error, Result};
use crate::graph::node::{needs_grad, record};
use crate::tensor::grad_mode::GradModeGuard;
use crate::tensor::{scalar_type_name, DType, Tensor};

/// torch's lower-case dtype name in `lerp`'s messages (`float`, `double`).
fn lower_name(d: DType) -> String {
    scalar_type_name(d).to_lowercase()
}

/// `g` summed back to the shape of `like` (undoing broadcasting).
fn reduce_to(g: &Tensor, like: &[usize]) -> Result<Tensor> {
    g.sum_to(like)
}

impl Tensor {
    /// `self + weight * (end - self)`: linear interpolation towards `end`. `weight` is a Python
    /// number (a wrapped 0-d tensor, torch's `LerpBackward0`) or a tensor of `self`'s dtype
    /// (`LerpBackward1`, differentiable in the weight too); all three broadcast.
    pub fn lerp(&self, end: &Tensor, weight: &Tensor) -> Result<Tensor> {
        if !self.dtype().is_float() {
            return Err(Error::not_implemented(format!(
                "\"lerp_kernel_scalar\" not implemented for '{}'",
                scalar_type_name(self.dtype())
            )));
        }
        if end.dtype() != self.dtype() {
            return Err(Error::runtime(format!(
                "expected dtype {} for `end` but got dtype {}",
                lower_name(self.dtype()),
                lower_name(end.dtype())
            )));
        }
        let scalar_weight = weight.is_wrapped_number();
        if !scalar_weight && weight.dtype() != self.dtype() {
            return Err(Error::runtime(format!(
                "expected dtype {} for `weight` but got dtype {}",
                lower_name(self.dtype()),
                lower_name(weight.dtype())
            )));
        }
        let w = if weight.dtype() == self.dtype() {
            weight.clone()
        } else {
            weight.to_dtype(self.dtype())?
        };
        let out = {
            let _g = GradModeGuard::new(false);
            self.add(&w.mul(&end.sub(self)?)?)?
        };
        let inputs: Vec<&Tensor> = if scalar_weight {
            vec![self, end]
        } else {
            vec![self, end, weight]
        };
        if needs_grad(&inputs) {
            let shapes = [
                self.shape().to_vec(),
                end.shape().to_vec(),
                weight.shape().to_vec(),
            ];
            let name = if scalar_weight {
                "LerpBackward0"
            } else {
                "LerpBackward1"
            };
            record(
                name,
                &inputs,
                &[&out],
                &[self, end, &w],
                scalar_weight,
                move |g, s| {
                    let (a, b, w) = (&s[0], &s[1], &s[2]);
                    let ga = reduce_to(&g[0].mul(&w.rsub_scalar(1.0)?)?, &shapes[0])?;
                    let gb = reduce_to(&g[0].mul(w)?, &shapes[1])?;
                    let mut grads = vec![Some(ga), Some(gb)];
                    if !scalar_weight {
                        grads.push(Some(reduce_to(&g[0].mul(&b.sub(a)?)?, &shapes[2])?));
                    }
                    Ok(grads)
                },
            )?;
        }
        Ok(out)
    }

    /// `self + value * tensor1 * tensor2`, broadcasting (torch's `addcmul`).
    pub fn addcmul(&self, tensor1: &Tensor, tensor2: &Tensor, value: f64) -> Result<Tensor> {
        self.addc(tensor1, tensor2, value, false)
    }

    /// `self + value * tensor1 / tensor2`, broadcasting (torch's `addcdiv`); integer
    /// `tensor1`/`tensor2` are refused as in torch.
    pub fn addcdiv(&self, tensor1: &Tensor, tensor2: &Tensor, value: f64) -> Result<Tensor> {
        if !tensor1.dtype().is_float() && !tensor2.dtype().is_float() {
            return Err(Error::runtime("Integer division with addcdiv is no longer supported, and in a future  release addcdiv will perform a true division of tensor1 and tensor2. The historic addcdiv behavior can be implemented as (input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for integer inputs and as (input + value * tensor1 / tensor2) for float inputs. The future addcdiv behavior is just the latter implementation: (input + value * tensor1 / tensor2), for all dtypes."));
        }
        self.addc(tensor1, tensor2, value, true)
    }

    fn addc(&self, t1: &Tensor, t2: &Tensor, value: f64, divide: bool) -> Result<Tensor> {
        let out = {
            let _g = GradModeGuard::new(false);
            let q = if divide { t1.div(t2)? } else { t1.mul(t2)? };
            let q = if value == 1.0 {
                q
            } else {
                let v = if q.dtype().is_float() {
                    Tensor::wrapped_scalar(value, DType::Float64)
                } else if value.fract() == 0.0 {
                    Tensor::wrapped_scalar(value, DType::Int64)
                } else {
                    Tensor::wrapped_scalar(value, DType::Float64)
                };
                q.mul(&v)?
            };
            let r = self.add(&q)?;
            if r.same(self) {
                crate::kernels::copy::copy_raw(&r)?
            } else {
                r
            }
        };
        if needs_grad(&[self, t1, t2]) {
            let shapes = [
                self.shape().to_vec(),
                t1.shape().to_vec(),
                t2.shape().to_vec(),
            ];
            let name = if divide {
                "AddcdivBackward0"
            } else {
                "AddcmulBackward0"
            };
            record(
                name,
                &[self, t1, t2],
                &[&out],
                &[t1, t2],
                true,
                move |g, s| {
                    let (a, b) = (&s[0], &s[1]);
                    let gv = g[0].mul_scalar(value)?;
                    let (g1, g2) = if divide {
                        (gv.div(b)?, gv.mul(a)?.div(&b.mul(b)?)?.neg()?)
                    } else {
                        (gv.mul(b)?, gv.mul(a)?)
                    };
                    Ok(vec![
                        Some(reduce_to(&g[0], &shapes[0])?),
                        Some(reduce_to(&g1, &shapes[1])?),
                        Some(reduce_to(&g2, &shapes[2])?),
                    ])
                },
            )?;
        }
        Ok(out)
    }

    /// Elementwise `|self - other| <= atol + rtol * |other|` (bool, broadcasting); equal
    /// values (also infinities of one sign) are close, NaN is close to NaN only with
    /// `equal_nan`. Both operands must have one dtype, as in torch.
    pub fn isclose(&self, other: &Tensor, rtol: f64, atol: f64, equal_nan: bool) -> Result<Tensor> {
        if self.dtype() != other.dtype() {
            return Err(Error::runtime(format!(
                "{} did not match {}",
                scalar_type_name(self.dtype()),
                scalar_type_name(other.dtype())
            )));
        }
        if rtol < 0.0 {
            return Err(Error::runtime(format!(
                "rtol must be greater than or equal to zero, but got {rtol}"
            )));
        }
        if atol < 0.0 {
            return Err(Error::runtime(format!(
                "atol must be greater than or equal to zero, but got {atol}"
            )));
        }
        let _g = GradModeGuard::new(false);
        let (a, b) = (self.detach(), other.detach());
        let equal = a.eq_t(&b)?;
        if !self.dtype().is_float() {
            if self.dtype() == DType::Bool {
                return Ok(equal);
            }
            // Integers: the tolerance in float64, as torch computes it for integral types.
            let (a, b) = (a.to_dtype(DType::Float64)?, b.to_dtype(DType::Float64)?);
            let within = a
                .sub(&b)?
                .abs()?
                .le_t(&b.abs()?.mul_scalar(rtol)?.add_scalar(atol)?)?;
            return equal.logical_or(&within);
        }
        let finite = a.isfinite()?.logical_and(&b.isfinite()?)?;
        let within = a
            .sub(&b)?
            .abs()?
            .le_t(&b.abs()?.mul_scalar(rtol)?.add_scalar(atol)?)?;
        let mut close = equal.logical_or(&finite.logical_and(&within)?)?;
        if equal_nan {
            close = close.logical_or(&a.isnan()?.logical_and(&b.isnan()?)?)?;
        }
        Ok(close)
    }

    /// Whether every element of `self` is close to `other`'s ([`Tensor::isclose`]).
    pub fn allclose(&self, other: &Tensor, rtol: f64, atol: f64, equal_nan: bool) -> Result<bool> {
        let close = self.isclose(other, rtol, atol, equal_nan)?;
        Ok(close.to_vec::<bool>()?.into_iter().all(|c| c))
    }

    /// Whether `self` and `other` have one shape and equal elements (NaN is unequal); the
    /// dtypes are promoted as for `==`.
    pub fn equal(&self, other: &Tensor) -> Result<bool> {
        if self.shape() != other.shape() {
            return Ok(false);
        }
        let _g = GradModeGuard::new(false);
        let eq = self.detach().eq_t(&other.detach())?;
        Ok(eq.to_vec::<bool>()?.into_iter().all(|c| c))
    }
}

impl Tensor {
    /// `sqrt(self² + other²)` elementwise, broadcasting, without overflow for large inputs
    /// (torch's `hypot`). Gradients `self / out` and `other / out`.
    pub fn hypot(&self, other: &Tensor) -> Result<Tensor> {
        self.float_binary(other, "hypot")?;
        let out = {
            let _g = GradModeGuard::new(false);
            // max * sqrt(1 + (min / max)²) keeps the squares in range.
            let (a, b) = (self.abs()?, other.abs()?);
            let hi = a.maximum(&b)?;
            let lo = a.minimum(&b)?;
            let zero = hi.eq_scalar(0.0)?;
            let safe_hi = Tensor::where_cond(&zero, &Tensor::wrapped_scalar(1.0, hi.dtype()), &hi)?;
            let r = lo.div(&safe_hi)?;
            let v = hi.mul(&r.mul(&r)?.add_scalar(1.0)?.sqrt()?)?;
            // inf beats NaN, as in C's hypot
            let inf = a.isinf()?.logical_or(&b.isinf()?)?;
            Tensor::where_cond(&inf, &Tensor::wrapped_scalar(f64::INFINITY, v.dtype()), &v)?
        };
        if needs_grad(&[self, other]) {
            let shapes = [self.shape().to_vec(), other.shape().to_vec()];
            record(
                "HypotBackward0",
                &[self, other],
                &[&out],
                &[self, other, &out],
                false,
                move |g, s| {
                    let r = g[0].div(&s[2])?;
                    Ok(vec![
                        Some(r.mul(&s[0])?.sum_to(&shapes[0])?),
                        Some(r.mul(&s[1])?.sum_to(&shapes[1])?),
                    ])
                },
            )?;
        }
        Ok(out)
    }

    /// `log(exp(self) + exp(other))` elementwise, broadcasting, computed as
    /// `max + log1p(exp(-|self - other|))` (torch's `logaddexp`). Gradients
    /// `sigmoid(self - other)` and `sigmoid(other - self)`.
    pub fn logaddexp(&self, other: &Tensor) -> Result<Tensor> {
        self.float_binary(other, "logaddexp")?;
        let out = {
            let _g = GradModeGuard::new(false);
            let m = self.maximum(other)?;
            let d = self.sub(other)?.abs()?.neg()?.exp()?.log1p()?;
            // equal infinities: the max itself (their difference is NaN)
            let same_inf = self.isinf()?.logical_and(&self.eq_t(other)?)?;
            Tensor::where_cond(&same_inf, &m, &m.add(&d)?)?
        };
        if needs_grad(&[self, other]) {
            let shapes = [self.shape().to_vec(), other.shape().to_vec()];
            record(
                "LogaddexpBackward0",
                &[self, other],
                &[&out],
                &[self, other],
                false,
                move |g, s| {
                    let d = s[0].sub(&s[1])?;
                    Ok(vec![
                        Some(g[0].mul(&d.sigmoid()?)?.sum_to(&shapes[0])?),
                        Some(g[0].mul(&d.neg()?.sigmoid()?)?.sum_to(&shapes[1])?),
                    ])
                },
            )?;
        }
        Ok(out)
    }

    /// Both operands promote to a float dtype, else torch's error for `op`.
    fn float_binary(&self, other: &Tensor, op: &str) -> Result<()> {
        let rt = crate::ops::binary::result_dtype(self, other);
        if !rt.is_float() {
            return Err(Error::not_implemented(format!(
                "\"{op}_cpu\" not implemented for '{}'",
                scalar_type_name(rt)
            )));
        }
        Ok(())
    }
}
