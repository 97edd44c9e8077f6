//! Elementwise kernels: maps over one tensor and broadcasting zips over two, on contiguous
//! slices where possible and on ndarray views otherwise.

use ndarray::{IxDyn, Zip};

use crate::error::{Error, Result};
use crate::tensor::creation::{checked_numel, ensure_allocatable};
use crate::tensor::shape::broadcast_shapes;
use crate::tensor::{DType, Element, Tensor};

/// Above this many elements, kernels split the work across rayon threads.
pub(crate) const PAR_MIN_ELEMENTS: usize = 1 << 16;

/// `f` over every element of `t` (of type `T`), producing a new contiguous tensor.
pub(crate) fn map<T: Element, U: Element>(
    t: &Tensor,
    f: impl Fn(T) -> U + Sync + Send,
) -> Result<Tensor> {
    let shape = t.shape().to_vec();
    let out: Vec<U> = if t.is_contiguous() {
        t.with_contiguous_slice::<T, _>(|s| {
            if s.len() >= PAR_MIN_ELEMENTS {
                use rayon::prelude::*;
                s.par_iter().map(|&x| f(x)).collect()
            } else {
                s.iter().map(|&x| f(x)).collect()
            }
        })?
    } else {
        t.with_view::<T, _>(|v| v.iter().map(|&x| f(x)).collect())?
    };
    Tensor::from_vec(out, &shape)
}

/// `f` over broadcast pairs of elements of `a` and `b` (both of type `T`).
pub(crate) fn zip<T: Element, U: Element>(
    a: &Tensor,
    b: &Tensor,
    f: impl Fn(T, T) -> U + Sync + Send,
) -> Result<Tensor> {
    let shape = broadcast_shapes(a.shape(), b.shape())?;
    ensure_allocatable(checked_numel(&shape)?, U::DTYPE)?;
    if a.shape() == b.shape() && a.is_contiguous() && b.is_contiguous() {
        let out: Vec<U> = a.with_contiguous_slice::<T, _>(|x| {
            b.with_contiguous_slice::<T, _>(|y| {
                if x.len() >= PAR_MIN_ELEMENTS {
                    use rayon::prelude::*;
                    x.par_iter()
                        .zip(y.par_iter())
                        .map(|(&p, &q)| f(p, q))
                        .collect()
                } else {
                    x.iter().zip(y).map(|(&p, &q)| f(p, q)).collect()
                }
            })
        })??;
        return Tensor::from_vec(out, &shape);
    }
    if b.numel() == 1 && a.is_contiguous() && a.shape() == shape.as_slice() {
        let y = b.to_vec::<T>()?[0];
        return map::<T, U>(a, move |x| f(x, y));
    }
    if a.numel() == 1 && b.is_contiguous() && b.shape() == shape.as_slice() {
        let x = a.to_vec::<T>()?[0];
        return map::<T, U>(b, move |y| f(x, y));
    }
    let arr = a.with_view::<T, _>(|av| {
        b.with_view::<T, _>(|bv| -> Result<ndarray::ArrayD<U>> {
            let dim = IxDyn(&shape);
            match (av.broadcast(dim.clone()), bv.broadcast(dim)) {
                (Some(av), Some(bv)) => Ok(Zip::from(&av).and(&bv).map_collect(|&p, &q| f(p, q))),
                _ => Err(Error::runtime(
                    "internal error: broadcast failed after shape check",
                )),
            }
        })
    })???;
    Ok(Tensor::from_array(arr))
}

/// Apply a float function to a float tensor, dispatching on f32/f64; non-float inputs are first
/// converted to float32 as torch does for `exp`, `sin`, ...
pub(crate) fn map_float_fn(
    t: &Tensor,
    f32f: impl Fn(f32) -> f32 + Sync + Send,
    f64f: impl Fn(f64) -> f64 + Sync + Send,
) -> Result<Tensor> {
    match t.dtype() {
        DType::Float32 => map::<f32, f32>(t, f32f),
        DType::Float64 => map::<f64, f64>(t, f64f),
        _ => map::<f32, f32>(&crate::ops::convert::cast(t, DType::Float32)?, f32f),
    }
}

/// The same float function written once for f32 and f64.
macro_rules! map_float {
    ($t:expr, |$x:ident| $body:expr) => {
        $crate::ops::elementwise::map_float_fn($t, |$x: f32| $body, |$x: f64| $body)
    };
}
pub(crate) use map_float;

/// `a` where `cond` else `b`, broadcasting the three (all of one element type `T`).
pub(crate) fn select<T: Element>(cond: &Tensor, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let shape = broadcast_shapes(&broadcast_shapes(cond.shape(), a.shape())?, b.shape())?;
    ensure_allocatable(checked_numel(&shape)?, T::DTYPE)?;
    let arr = cond.with_view::<bool, _>(|cv| {
        a.with_view::<T, _>(|av| {
            b.with_view::<T, _>(|bv| -> Result<ndarray::ArrayD<T>> {
                let dim = IxDyn(&shape);
                match (
                    cv.broadcast(dim.clone()),
                    av.broadcast(dim.clone()),
                    bv.broadcast(dim),
                ) {
                    (Some(cv), Some(av), Some(bv)) => Ok(Zip::from(&cv)
                        .and(&av)
                        .and(&bv)
                        .map_collect(|&c, &x, &y| if c { x } else { y })),
                    _ => Err(Error::runtime(
                        "internal error: broadcast failed after shape check",
                    )),
                }
            })
        })
    })????;
    Ok(Tensor::from_array(arr))
}
