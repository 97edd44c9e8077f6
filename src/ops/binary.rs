//! Broadcasting binary ops with torch's type promotion: arithmetic and comparisons.

use crate::error::{Error, Result};
use crate::graph::node::{
    grad_if_wanted, needs_grad, record, record_with_jvp, record_with_scalar, sum_tangents,
    ScalarOperand,
};
use crate::kernels::copy::{as_dtype, cast};
use crate::ops::elementwise::{zip, zip_float_grad};
use crate::tensor::dtype::result_type;
use crate::tensor::{DType, Tensor};

/// The dtype torch gives `a (op) b`.
pub fn result_dtype(a: &Tensor, b: &Tensor) -> DType {
    result_type(&[
        (a.promotion_dtype(), a.promotion_priority()),
        (b.promotion_dtype(), b.promotion_priority()),
    ])
}

/// Compute `f` in dtype `ct` over the broadcast operands (no recording).
fn arith(
    a: &Tensor,
    b: &Tensor,
    ct: DType,
    f32f: impl Fn(f32, f32) -> f32 + Sync + Send,
    f64f: impl Fn(f64, f64) -> f64 + Sync + Send,
    i64f: impl Fn(i64, i64) -> i64 + Sync + Send,
) -> Result<Tensor> {
    // Narrow types compute in their compute type and are narrowed on store.
    let wide = ct.compute();
    let (a, b) = (as_dtype(a, wide)?, as_dtype(b, wide)?);
    let out = match wide {
        DType::Float32 => zip::<f32, f32>(&a, &b, f32f),
        DType::Float64 => zip::<f64, f64>(&a, &b, f64f),
        _ => zip::<i64, i64>(&a, &b, i64f),
    }?;
    as_dtype(&out, ct)
}

/// Arithmetic in the promoted dtype; bool and narrow results are computed wider then narrowed.
fn promoted(
    a: &Tensor,
    b: &Tensor,
    f32f: impl Fn(f32, f32) -> f32 + Sync + Send,
    f64f: impl Fn(f64, f64) -> f64 + Sync + Send,
    i64f: impl Fn(i64, i64) -> i64 + Sync + Send,
) -> Result<Tensor> {
    let rt = result_dtype(a, b);
    // Bool and the narrow types compute in int64 / float32 and are narrowed on store (integer
    // results wrap as torch's do in their own width).
    let ct = if rt == DType::Bool {
        DType::Int64
    } else {
        rt.compute()
    };
    let out = arith(a, b, ct, f32f, f64f, i64f)?;
    if rt != ct {
        cast(&out, rt)
    } else {
        Ok(out)
    }
}

/// Methods `name(&self, v: f64)`: `self op v`, or `v op self` where reflected, for a Python
/// number `v` (its dtype by torch's promotion of a number).
macro_rules! number_ops {
    ($($(#[$doc:meta])* $name:ident = $op:ident, $reflected:literal;)*) => {$(
        $(#[$doc])*
        pub fn $name(&self, v: f64) -> Result<Tensor> {
            self.arith_number(ArithOp::$op, v, number_dtype(self, v), $reflected)
        }
    )*};
}

impl Tensor {
    /// `self + other`, broadcasting.
    pub fn add(&self, other: &Tensor) -> Result<Tensor> {
        if let Some(r) = scalar_fast_path(self, other, ScalarOp::Add, ScalarOp::Add) {
            return r;
        }
        let out = promoted(self, other, |x, y| x + y, |x, y| x + y, i64::wrapping_add)?;
        if needs_grad(&[self, other]) {
            record_with_jvp(
                "AddBackward0",
                &[self, other],
                &[&out],
                &[],
                false,
                |g, _| Ok(vec![Some(g[0].clone()), Some(g[0].clone())]),
                &|t| {
                    Ok(vec![sum_tangents(
                        t.iter().flatten().cloned().collect(),
                        &out,
                    )?])
                },
            )?;
        }
        Ok(out)
    }

    /// `self - other`, broadcasting.
    pub fn sub(&self, other: &Tensor) -> Result<Tensor> {
        if self.dtype() == DType::Bool && other.dtype() == DType::Bool {
            return Err(Error::runtime("Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or `logical_xor()` operator instead."));
        }
        if let Some(r) = scalar_fast_path(self, other, ScalarOp::Sub, ScalarOp::RSub) {
            return r;
        }
        let out = promoted(self, other, |x, y| x - y, |x, y| x - y, i64::wrapping_sub)?;
        if needs_grad(&[self, other]) {
            record_with_jvp(
                "SubBackward0",
                &[self, other],
                &[&out],
                &[],
                false,
                |g, _| {
                    let gb = grad_if_wanted(1, || g[0].neg())?;
                    Ok(vec![Some(g[0].clone()), gb])
                },
                &|t| {
                    let mut parts = Vec::new();
                    parts.extend(t[0].clone());
                    if let Some(tb) = &t[1] {
                        parts.push(tb.neg()?);
                    }
                    Ok(vec![sum_tangents(parts, &out)?])
                },
            )?;
        }
        Ok(out)
    }

    /// `self * other`, broadcasting.
    pub fn mul(&self, other: &Tensor) -> Result<Tensor> {
        if let Some(r) = scalar_fast_path(self, other, ScalarOp::Mul, ScalarOp::Mul) {
            return r;
        }
        let out = promoted(self, other, |x, y| x * y, |x, y| x * y, i64::wrapping_mul)?;
        if needs_grad(&[self, other]) {
            record_with_jvp(
                "MulBackward0",
                &[self, other],
                &[&out],
                &[self, other],
                false,
                |g, s| {
                    let ga = grad_if_wanted(0, || g[0].mul(&s[1]))?;
                    // g's last use: written over when nothing else holds it (the same bits).
                    let gb = grad_if_wanted(1, || {
                        if crate::ops::elementwise::fusable(&g[0], &s[0]) {
                            zip_float_grad!(&g[0], &s[0], |g, a| g * a)
                        } else {
                            g[0].mul(&s[0])
                        }
                    })?;
                    Ok(vec![ga, gb])
                },
                &|t| {
                    let mut parts = Vec::new();
                    if let Some(ta) = &t[0] {
                        parts.push(ta.mul(other)?);
                    }
                    if let Some(tb) = &t[1] {
                        parts.push(self.mul(tb)?);
                    }
                    Ok(vec![sum_tangents(parts, &out)?])
                },
            )?;
        }
        Ok(out)
    }

    /// `self / other` (true division: integers give float32), broadcasting.
    pub fn div(&self, other: &Tensor) -> Result<Tensor> {
        if let Some(r) = scalar_fast_path(self, other, ScalarOp::Div, ScalarOp::RDiv) {
            return r;
        }
        let rt = result_dtype(self, other);
        let ct = if rt.is_float() {
            rt
        } else {
            crate::tensor::dtype::default_float()
        };
        let out = arith(self, other, ct, |x, y| x / y, |x, y| x / y, |x, y| x / y)?;
        if needs_grad(&[self, other]) {
            record_with_jvp(
                "DivBackward0",
                &[self, other],
                &[&out],
                &[self, other],
                false,
                |g, s| {
                    let (a, b) = (&s[0], &s[1]);
                    let ga = grad_if_wanted(0, || g[0].div(b))?;
                    let gb = grad_if_wanted(1, || g[0].mul(a)?.div(&b.mul(b)?)?.neg())?;
                    Ok(vec![ga, gb])
                },
                // d(a / b) = da / b - (a / b) db / b
                &|t| {
                    let mut parts = Vec::new();
                    if let Some(ta) = &t[0] {
                        parts.push(ta.div(other)?);
                    }
                    if let Some(tb) = &t[1] {
                        parts.push(out.mul(tb)?.div(other)?.neg()?);
                    }
                    Ok(vec![sum_tangents(parts, &out)?])
                },
            )?;
        }
        Ok(out)
    }

    /// `self ** exponent` elementwise, broadcasting.
    pub fn pow(&self, exponent: &Tensor) -> Result<Tensor> {
        let rt = result_dtype(self, exponent);
        if exponent.is_wrapped_number() && rt.is_float() {
            return self.pow_scalar(exponent.item()?);
        }
        let out = match rt {
            DType::Float32 | DType::Float64 => {
                arith(self, exponent, rt, f32::powf, f64::powf, |_, _| 0)?
            }
            d if d.is_half() => cast(
                &arith(
                    self,
                    exponent,
                    DType::Float32,
                    f32::powf,
                    f64::powf,
                    |_, _| 0,
                )?,
                d,
            )?,
            _ => {
                let e = as_dtype(exponent, DType::Int64)?;
                if crate::tensor::batched::innermost(&e)
                    .to_vec::<i64>()?
                    .iter()
                    .any(|&v| v < 0)
                {
                    return Err(Error::runtime(
                        "Integers to negative integer powers are not allowed.",
                    ));
                }
                let o = arith(self, &e, DType::Int64, f32::powf, f64::powf, |x, y| {
                    x.wrapping_pow(y as u32)
                })?;
                if rt != DType::Int64 {
                    cast(&o, rt)?
                } else {
                    o
                }
            }
        };
        if needs_grad(&[self, exponent]) {
            let base_is_scalar = self.is_wrapped_number();
            record(
                "PowBackward1",
                &[self, exponent],
                &[&out],
                &[self, exponent, &out],
                false,
                move |g, s| {
                    let (a, b, out) = (&s[0], &s[1], &s[2]);
                    let ga = if base_is_scalar {
                        None
                    } else {
                        Some(g[0].mul(b)?.mul(&a.pow(&b.sub_scalar(1.0)?)?)?)
                    };
                    // d/db a^b = a^b ln a; torch defines it as 0 where a == 0 and b >= 0.
                    let safe = a.eq_scalar(0.0)?.logical_and(&b.ge_scalar(0.0)?)?;
                    let gb = g[0].mul(&out.mul(&a.log()?)?)?.masked_fill(&safe, 0.0)?;
                    Ok(vec![ga, Some(gb)])
                },
            )?;
        }
        Ok(out)
    }

    /// `self ** p` for a Python number `p`.
    pub fn pow_scalar(&self, p: f64) -> Result<Tensor> {
        let rt = if self.dtype().is_float() || p.fract() == 0.0 {
            self.dtype()
        } else {
            crate::tensor::dtype::default_float()
        };
        let out = match rt {
            DType::Float32 => {
                crate::ops::elementwise::map::<f32, f32>(&as_dtype(self, rt)?, move |x| {
                    pow_f32(x, p)
                })?
            }
            DType::Float64 => {
                crate::ops::elementwise::map::<f64, f64>(self, move |x| pow_f64(x, p))?
            }
            d if d.is_half() => cast(
                &crate::ops::elementwise::map::<f32, f32>(
                    &as_dtype(self, DType::Float32)?,
                    move |x| pow_f32(x, p),
                )?,
                d,
            )?,
            _ => {
                if p < 0.0 {
                    return Err(Error::runtime(
                        "Integers to negative integer powers are not allowed.",
                    ));
                }
                let o = crate::ops::elementwise::map::<i64, i64>(
                    &as_dtype(self, DType::Int64)?,
                    move |x| x.wrapping_pow(p as u32),
                )?;
                if rt != DType::Int64 {
                    cast(&o, DType::Bool)?
                } else {
                    o
                }
            }
        };
        if needs_grad(&[self]) {
            record(
                "PowBackward0",
                &[self],
                &[&out],
                &[self],
                true,
                move |g, s| {
                    if p == 0.0 {
                        return Ok(vec![Some(g[0].mul_scalar(0.0)?)]);
                    }
                    Ok(vec![Some(
                        g[0].mul(&s[0].pow_scalar(p - 1.0)?.mul_scalar(p)?)?,
                    )])
                },
            )?;
        }
        Ok(out)
    }

    /// `base ** self` for a Python number `base`.
    pub fn rpow_scalar(&self, base: f64) -> Result<Tensor> {
        let dt = if self.dtype().is_float() {
            self.dtype()
        } else {
            crate::tensor::dtype::default_float()
        };
        Tensor::wrapped_scalar(base, dt).pow(self)
    }

    number_ops! {
        /// `self + v` for a Python number.
        add_scalar = Add, false;
        /// `self - v` for a Python number.
        sub_scalar = Sub, false;
        /// `v - self` for a Python number.
        rsub_scalar = Sub, true;
        /// `self * v` for a Python number.
        mul_scalar = Mul, false;
        /// `self / v` for a Python number.
        div_scalar = Div, false;
        /// `v / self` for a Python number.
        rdiv_scalar = Div, true;
    }
}

/// The four arithmetic operators, for [`Tensor::arith_number`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArithOp {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/`
    Div,
}

impl Tensor {
    /// `self (op) v`, or `v (op) self` when `number_first`, for a Python number `v` whose type
    /// is `number_dtype` (Int64 for an int, Float64 for a float): what `x * 0.5` or `1 - x`
    /// computes, with torch's promotion (the number never widens a float tensor's dtype).
    /// Float tensors map the number straight in, without a wrapped 0-d tensor.
    pub fn arith_number(
        &self,
        op: ArithOp,
        v: f64,
        number_dtype: DType,
        number_first: bool,
    ) -> Result<Tensor> {
        if self.dtype().is_float() {
            let sop = match (op, number_first) {
                (ArithOp::Add, _) => ScalarOp::Add,
                (ArithOp::Mul, _) => ScalarOp::Mul,
                (ArithOp::Sub, false) => ScalarOp::Sub,
                (ArithOp::Sub, true) => ScalarOp::RSub,
                (ArithOp::Div, false) => ScalarOp::Div,
                (ArithOp::Div, true) => ScalarOp::RDiv,
            };
            return scalar_op(self, v, sop, usize::from(!number_first), number_dtype);
        }
        let n = Tensor::wrapped_scalar(v, number_dtype);
        let (a, b) = if number_first { (&n, self) } else { (self, &n) };
        match op {
            ArithOp::Add => a.add(b),
            ArithOp::Sub => a.sub(b),
            ArithOp::Mul => a.mul(b),
            ArithOp::Div => a.div(b),
        }
    }
}

/// Arithmetic of a float tensor `t` and a Python number `v`.
#[derive(Clone, Copy)]
enum ScalarOp {
    /// `t + v` (also `v + t`).
    Add,
    /// `t - v`.
    Sub,
    /// `v - t`.
    RSub,
    /// `t * v` (also `v * t`).
    Mul,
    /// `t / v`.
    Div,
    /// `v / t`.
    RDiv,
}

/// `a (op) b` when one side is a Python number and the other a float tensor: the result has the
/// tensor's dtype whatever the number, so the kernel maps the tensor with the number converted
/// once (torch's CPU-scalar path) instead of broadcasting a wrapped 0-d tensor. `op` applies
/// when `b` is the number, `rop` when `a` is.
fn scalar_fast_path(a: &Tensor, b: &Tensor, op: ScalarOp, rop: ScalarOp) -> Option<Result<Tensor>> {
    let (t, n, op, pos) = if b.is_wrapped_number() && !a.is_wrapped_number() {
        (a, b, op, 1)
    } else if a.is_wrapped_number() && !b.is_wrapped_number() {
        (b, a, rop, 0)
    } else {
        return None;
    };
    if !t.dtype().is_float() {
        return None;
    }
    Some(n.item().and_then(|v| scalar_op(t, v, op, pos, n.dtype())))
}

fn scalar_op(t: &Tensor, v: f64, op: ScalarOp, pos: usize, vdtype: DType) -> Result<Tensor> {
    use crate::ops::elementwise::{keep_uniform, map, map_float_over_grad};
    macro_rules! apply {
        ($t:expr, $T:ty) => {{
            let w = v as $T;
            match op {
                ScalarOp::Add => map::<$T, $T>($t, move |x| x + w),
                ScalarOp::Sub => map::<$T, $T>($t, move |x| x - w),
                ScalarOp::RSub => map::<$T, $T>($t, move |x| w - x),
                ScalarOp::Mul => map::<$T, $T>($t, move |x| x * w),
                ScalarOp::Div => map::<$T, $T>($t, move |x| x / w),
                ScalarOp::RDiv => map::<$T, $T>($t, move |x| w / x),
            }
        }};
    }
    let out = match t.dtype() {
        DType::Float64 => apply!(t, f64)?,
        DType::Float32 => apply!(t, f32)?,
        // Half types: computed in float32, rounded on store.
        d => cast(&apply!(&cast(t, DType::Float32)?, f32)?, d)?,
    };
    if !needs_grad(&[t]) {
        return Ok(out);
    }
    // A generic rule, not a fn pointer: the node's closure then holds only `v` and `pos`, so
    // it takes a 16-byte allocation (this is per-op memory in long graphs).
    fn rec<F>(
        name: &'static str,
        (t, out, v, pos, vdtype): (&Tensor, &Tensor, f64, usize, DType),
        saved: &[&Tensor],
        keeps: bool,
        f: F,
    ) -> Result<()>
    where
        F: Fn(&Tensor, f64, &[Tensor]) -> Result<Tensor> + Send + Sync + 'static,
    {
        let scalar = ScalarOperand { pos, dtype: vdtype };
        record_with_scalar(name, t, scalar, out, saved, keeps, move |g, s| {
            let mut grads = vec![None, None];
            grads[1 - pos] = Some(f(&g[0], v, s)?);
            Ok(grads)
        })
    }
    // Rules that use the number keep it (torch saves the wrapped operand): a second backward
    // through the freed node is then an error, as in torch.
    let ctx = (t, &out, v, pos, vdtype);
    match op {
        ScalarOp::Add => rec("AddBackward0", ctx, &[], false, |g, _, _| Ok(g.clone())),
        ScalarOp::Sub => rec("SubBackward0", ctx, &[], false, |g, _, _| Ok(g.clone())),
        ScalarOp::RSub => rec("SubBackward0", ctx, &[], false, |g, _, _| {
            keep_uniform(g, Tensor::neg)
        }),
        // The same bits as mul_scalar / div_scalar, over the gradient when it can be reused.
        ScalarOp::Mul => rec("MulBackward0", ctx, &[], true, |g, v, _| {
            let w = v as f32;
            match map_float_over_grad(g, move |x| x * w, move |x| x * v)? {
                Some(t) => Ok(t),
                None => keep_uniform(g, |g| g.mul_scalar(v)),
            }
        }),
        ScalarOp::Div => rec("DivBackward0", ctx, &[], true, |g, v, _| {
            let w = v as f32;
            match map_float_over_grad(g, move |x| x / w, move |x| x / v)? {
                Some(t) => Ok(t),
                None => keep_uniform(g, |g| g.div_scalar(v)),
            }
        }),
        // d/dt v/t = -v / t²
        ScalarOp::RDiv => rec("DivBackward0", ctx, &[t], true, |g, v, s| {
            g.mul_scalar(-v)?.div(&s[0].mul(&s[0])?)
        }),
    }?;
    Ok(out)
}

/// The dtype a Rust `f64` number operand of `t` takes: an integer value stays integral for
/// integer tensors.
fn number_dtype(t: &Tensor, v: f64) -> DType {
    if !t.dtype().is_float() && v.fract() == 0.0 {
        DType::Int64
    } else {
        DType::Float64
    }
}

/// A wrapped Python number of [`number_dtype`].
fn scalar_for(t: &Tensor, v: f64) -> Tensor {
    Tensor::wrapped_scalar(v, number_dtype(t, v))
}

fn pow_f64(x: f64, p: f64) -> f64 {
    if p == 2.0 {
        x * x
    } else if p == 1.0 {
        x
    } else if p == 0.5 {
        x.sqrt()
    } else if p.fract() == 0.0 && p.abs() < 64.0 {
        x.powi(p as i32)
    } else {
        x.powf(p)
    }
}

fn pow_f32(x: f32, p: f64) -> f32 {
    if p == 2.0 {
        x * x
    } else if p.fract() == 0.0 && p.abs() < 64.0 {
        x.powi(p as i32)
    } else {
        x.powf(p as f32)
    }
}

macro_rules! comparison {
    ($name:ident, $scalar:ident, $op:tt, $doc:literal) => {
        impl Tensor {
            #[doc = $doc]
            pub fn $name(&self, other: &Tensor) -> Result<Tensor> {
                // Narrow types compare exactly in the type they widen to.
                let ct = result_dtype(self, other).compute();
                let (a, b) = (as_dtype(self, ct)?, as_dtype(other, ct)?);
                match ct {
                    DType::Float32 => zip::<f32, bool>(&a, &b, |x, y| x $op y),
                    DType::Float64 => zip::<f64, bool>(&a, &b, |x, y| x $op y),
                    DType::Bool => zip::<bool, bool>(&a, &b, |x, y| x $op y),
                    _ => zip::<i64, bool>(&a, &b, |x, y| x $op y),
                }
            }
            #[doc = $doc]
            pub fn $scalar(&self, v: f64) -> Result<Tensor> {
                self.$name(&scalar_for(self, v))
            }
        }
    };
}
comparison!(eq_t, eq_scalar, ==, "Elementwise `==` (bool result).");
comparison!(ne_t, ne_scalar, !=, "Elementwise `!=` (bool result).");
comparison!(lt_t, lt_scalar, <, "Elementwise `<` (bool result).");
comparison!(le_t, le_scalar, <=, "Elementwise `<=` (bool result).");
comparison!(gt_t, gt_scalar, >, "Elementwise `>` (bool result).");
comparison!(ge_t, ge_scalar, >=, "Elementwise `>=` (bool result).");

impl Tensor {
    /// Elementwise logical and (bool result).
    pub fn logical_and(&self, other: &Tensor) -> Result<Tensor> {
        zip::<bool, bool>(
            &as_dtype(self, DType::Bool)?,
            &as_dtype(other, DType::Bool)?,
            |x, y| x && y,
        )
    }

    /// `self` with `value` where `mask` is true (differentiable in `self`).
    pub fn masked_fill(&self, mask: &Tensor, value: f64) -> Result<Tensor> {
        Tensor::where_cond(mask, &Tensor::wrapped_scalar(value, self.dtype()), self)
    }

    /// `a` where `cond` is true, else `b`, broadcasting all three. The gradient of each branch
    /// is zero where the other was chosen (selected, never multiplied, so no 0 * inf = NaN).
    pub fn where_cond(cond: &Tensor, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        let rt = result_dtype(a, b);
        let cond = as_dtype(cond, DType::Bool)?;
        let (a2, b2) = (as_dtype(a, rt)?, as_dtype(b, rt)?);
        let out = crate::tensor::storage::with_dtype!(rt, T => crate::ops::elementwise::select::<T>(&cond, &a2, &b2)?);
        if needs_grad(&[a, b]) {
            record(
                "WhereBackward0",
                &[a, b],
                &[&out],
                &[&cond],
                false,
                |g, s| {
                    let zero = Tensor::wrapped_scalar(0.0, g[0].dtype());
                    Ok(vec![
                        Some(Tensor::where_cond(&s[0], &g[0], &zero)?),
                        Some(Tensor::where_cond(&s[0], &zero, &g[0])?),
                    ])
                },
            )?;
        }
        Ok(out)
    }
}

macro_rules! std_op {
    ($trait:ident, $method:ident, $f:ident, $fs:ident) => {
        impl std::ops::$trait<&Tensor> for &Tensor {
            type Output = Result<Tensor>;
            fn $method(self, rhs: &Tensor) -> Result<Tensor> {
                self.$f(rhs)
            }
        }
        impl std::ops::$trait<f64> for &Tensor {
            type Output = Result<Tensor>;
            fn $method(self, rhs: f64) -> Result<Tensor> {
                self.$fs(rhs)
            }
        }
    };
}
std_op!(Add, add, add, add_scalar);
std_op!(Sub, sub, sub, sub_scalar);
std_op!(Mul, mul, mul, mul_scalar);
std_op!(Div, div, div, div_scalar);

impl std::ops::Neg for &Tensor {
    type Output = Result<Tensor>;
    fn neg(self) -> Result<Tensor> {
        Tensor::neg(self)
    }
}

/// Integer division by zero is an error in torch (floats give inf/NaN instead).
fn check_int_divisor(other: &Tensor, ct: DType) -> Result<()> {
    // Inside vmap every sample's divisors are checked (`innermost`).
    if !ct.is_float()
        && as_dtype(crate::tensor::batched::innermost(other), DType::Int64)?
            .to_vec::<i64>()?
            .contains(&0)
    {
        return Err(Error::runtime("ZeroDivisionError"));
    }
    Ok(())
}

/// Python-style modulus: the result takes the divisor's sign.
fn py_mod_f<F: num_traits::Float>(a: F, b: F) -> F {
    let m = a % b;
    if m != F::zero() && ((b < F::zero()) != (m < F::zero())) {
        m + b
    } else {
        m
    }
}

/// torch's floor division of floats (`div_floor_floating`): exact near integers.
fn floor_div_f<F: num_traits::Float>(a: F, b: F) -> F {
    if b == F::zero() {
        return a / b;
    }
    let m = a % b;
    let mut div = (a - m) / b;
    if m != F::zero() && ((b < F::zero()) != (m < F::zero())) {
        div = div - F::one();
    }
    if div != F::zero() {
        let mut fd = div.floor();
        if div - fd > F::from(0.5).unwrap_or_else(F::one) {
            fd = fd + F::one();
        }
        fd
    } else {
        F::zero().copysign(a / b)
    }
}

fn floor_div_i(a: i64, b: i64) -> i64 {
    let q = a.wrapping_div(b);
    if (a % b != 0) && ((a < 0) != (b < 0)) {
        q - 1
    } else {
        q
    }
}

fn py_mod_i(a: i64, b: i64) -> i64 {
    let m = a.wrapping_rem(b);
    if m != 0 && ((b < 0) != (m < 0)) {
        m + b
    } else {
        m
    }
}

fn nan_max<F: num_traits::Float>(a: F, b: F) -> F {
    if a.is_nan() || b.is_nan() {
        F::nan()
    } else if a > b {
        a
    } else {
        b
    }
}

fn nan_min<F: num_traits::Float>(a: F, b: F) -> F {
    if a.is_nan() || b.is_nan() {
        F::nan()
    } else if a < b {
        a
    } else {
        b
    }
}

impl Tensor {
    /// Elementwise maximum, broadcasting; NaN propagates. At ties the gradient is split
    /// 0.5/0.5 between the operands, as in torch.
    pub fn maximum(&self, other: &Tensor) -> Result<Tensor> {
        self.extremum(other, true)
    }

    /// Elementwise minimum, broadcasting; NaN propagates; ties split the gradient 0.5/0.5.
    pub fn minimum(&self, other: &Tensor) -> Result<Tensor> {
        self.extremum(other, false)
    }

    fn extremum(&self, other: &Tensor, is_max: bool) -> Result<Tensor> {
        let rt = result_dtype(self, other);
        let out = if rt == DType::Bool {
            let (a, b) = (as_dtype(self, rt)?, as_dtype(other, rt)?);
            if is_max {
                zip::<bool, bool>(&a, &b, |x, y| x || y)?
            } else {
                zip::<bool, bool>(&a, &b, |x, y| x && y)?
            }
        } else if is_max {
            arith(self, other, rt, nan_max, nan_max, i64::max)?
        } else {
            arith(self, other, rt, nan_min, nan_min, i64::min)?
        };
        if needs_grad(&[self, other]) {
            let name = if is_max {
                "MaximumBackward0"
            } else {
                "MinimumBackward0"
            };
            record(
                name,
                &[self, other],
                &[&out],
                &[self, other],
                false,
                move |g, s| {
                    let (a, b) = (&s[0], &s[1]);
                    let zero = Tensor::wrapped_scalar(0.0, g[0].dtype());
                    let half = g[0].mul_scalar(0.5)?;
                    let tie = a.eq_t(b)?;
                    let a_wins = if is_max { a.gt_t(b)? } else { a.lt_t(b)? };
                    let b_wins = if is_max { a.lt_t(b)? } else { a.gt_t(b)? };
                    let ga = Tensor::where_cond(
                        &tie,
                        &half,
                        &Tensor::where_cond(&a_wins, &g[0], &zero)?,
                    )?;
                    let gb = Tensor::where_cond(
                        &tie,
                        &half,
                        &Tensor::where_cond(&b_wins, &g[0], &zero)?,
                    )?;
                    Ok(vec![Some(ga), Some(gb)])
                },
            )?;
        }
        Ok(out)
    }

    /// C-style remainder `a - trunc(a / b) * b` (sign of the dividend), broadcasting.
    /// Gradients: `g` for `a`, `-g * trunc(a / b)` for `b`.
    pub fn fmod(&self, other: &Tensor) -> Result<Tensor> {
        let rt = result_dtype(self, other);
        check_int_divisor(other, rt)?;
        let out = promoted(self, other, |x, y| x % y, |x, y| x % y, i64::wrapping_rem)?;
        if needs_grad(&[self, other]) {
            // torch's node for a Python-number divisor is the Scalar overload's.
            let name = if other.is_wrapped_number() {
                "FmodBackward0"
            } else {
                "FmodBackward1"
            };
            record(
                name,
                &[self, other],
                &[&out],
                &[self, other],
                false,
                |g, s| {
                    let q = s[0].div(&s[1])?.trunc()?;
                    Ok(vec![Some(g[0].clone()), Some(g[0].mul(&q)?.neg()?)])
                },
            )?;
        }
        Ok(out)
    }

    /// Python-style remainder `a - floor(a / b) * b` (sign of the divisor), broadcasting.
    /// Gradients: `g` for `a`, `-g * floor(a / b)` for `b`.
    pub fn remainder(&self, other: &Tensor) -> Result<Tensor> {
        let rt = result_dtype(self, other);
        check_int_divisor(other, rt)?;
        let out = promoted(self, other, py_mod_f, py_mod_f, py_mod_i)?;
        if needs_grad(&[self, other]) {
            // torch's node for a Python-number divisor is the Scalar overload's.
            let name = if other.is_wrapped_number() {
                "RemainderBackward0"
            } else {
                "RemainderBackward1"
            };
            record(
                name,
                &[self, other],
                &[&out],
                &[self, other],
                false,
                |g, s| {
                    let q = s[0].div_mode(&s[1], Some(RoundingMode::Floor))?;
                    Ok(vec![Some(g[0].clone()), Some(g[0].mul(&q)?.neg()?)])
                },
            )?;
        }
        Ok(out)
    }

    /// atan2(a, b), the angle of (b, a); integers give float32.
    pub fn atan2(&self, other: &Tensor) -> Result<Tensor> {
        let rt = result_dtype(self, other);
        let ct = if rt.is_float() {
            rt
        } else {
            crate::tensor::dtype::default_float()
        };
        let out = arith(self, other, ct, f32::atan2, f64::atan2, |_, _| 0)?;
        if needs_grad(&[self, other]) {
            record(
                "Atan2Backward0",
                &[self, other],
                &[&out],
                &[self, other],
                false,
                |g, s| {
                    let (a, b) = (&s[0], &s[1]);
                    let r = a.mul(a)?.add(&b.mul(b)?)?;
                    Ok(vec![
                        Some(g[0].mul(b)?.div(&r)?),
                        Some(g[0].mul(a)?.div(&r)?.neg()?),
                    ])
                },
            )?;
        }
        Ok(out)
    }

    /// `self / other` with torch's `rounding_mode`: `None` is true division, `Trunc` rounds
    /// towards zero and `Floor` down; the rounded forms keep integer dtypes and have zero
    /// gradient (as in torch).
    pub fn div_mode(&self, other: &Tensor, mode: Option<RoundingMode>) -> Result<Tensor> {
        let Some(mode) = mode else {
            return self.div(other);
        };
        let rt = result_dtype(self, other);
        check_int_divisor(other, rt)?;
        let out = match mode {
            RoundingMode::Trunc => promoted(
                self,
                other,
                |x, y| (x / y).trunc(),
                |x, y| (x / y).trunc(),
                i64::wrapping_div,
            )?,
            RoundingMode::Floor => promoted(self, other, floor_div_f, floor_div_f, floor_div_i)?,
        };
        let out = if rt == DType::Bool {
            cast(&out, DType::Int64)?
        } else {
            out
        };
        if needs_grad(&[self, other]) {
            record(
                "DivBackward2",
                &[self, other],
                &[&out],
                &[],
                false,
                |g, _| {
                    let z = g[0].mul_scalar(0.0)?;
                    Ok(vec![Some(z.clone()), Some(z)])
                },
            )?;
        }
        Ok(out)
    }

    /// Elementwise logical or (bool result).
    pub fn logical_or(&self, other: &Tensor) -> Result<Tensor> {
        zip::<bool, bool>(
            &as_dtype(self, DType::Bool)?,
            &as_dtype(other, DType::Bool)?,
            |x, y| x || y,
        )
    }

    /// Elementwise logical exclusive or (bool result).
    pub fn logical_xor(&self, other: &Tensor) -> Result<Tensor> {
        zip::<bool, bool>(
            &as_dtype(self, DType::Bool)?,
            &as_dtype(other, DType::Bool)?,
            |x, y| x != y,
        )
    }

    /// Bitwise and/or/xor on bool or integer tensors (`&`, `|`, `^` in Python).
    pub fn bitwise(&self, other: &Tensor, op: BitOp) -> Result<Tensor> {
        let rt = result_dtype(self, other);
        if rt.is_integer() && rt != DType::Int64 {
            // Bits of the narrow types are those of their int64 widening, cut back on store.
            let wide =
                as_dtype(self, DType::Int64)?.bitwise(&as_dtype(other, DType::Int64)?, op)?;
            return cast(&wide, rt);
        }
        let (a, b) = (as_dtype(self, rt)?, as_dtype(other, rt)?);
        match rt {
            DType::Bool => zip::<bool, bool>(&a, &b, move |x, y| match op {
                BitOp::And => x & y,
                BitOp::Or => x | y,
                BitOp::Xor => x ^ y,
            }),
            DType::Int64 => zip::<i64, i64>(&a, &b, move |x, y| match op {
                BitOp::And => x & y,
                BitOp::Or => x | y,
                BitOp::Xor => x ^ y,
            }),
            _ => Err(Error::not_implemented(format!(
                "\"bitwise_{}_cpu\" not implemented for '{}'",
                match op {
                    BitOp::And => "and",
                    BitOp::Or => "or",
                    BitOp::Xor => "xor",
                },
                crate::tensor::scalar_type_name(rt)
            ))),
        }
    }
}

/// `rounding_mode` of [`Tensor::div_mode`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RoundingMode {
    /// Round towards zero.
    Trunc,
    /// Round towards negative infinity.
    Floor,
}

/// The operation of [`Tensor::bitwise`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BitOp {
    /// `&`
    And,
    /// `|`
    Or,
    /// `^`
    Xor,
}
