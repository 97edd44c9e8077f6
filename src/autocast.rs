//! Autocast (torch's `torch.autocast("cpu")`): inside an enabled region, ops that are safe in
//! lower precision (matrix products, linear layers, convolutions, attention) run on operands
//! cast to the region's half type (bfloat16 unless set to float16), and ops that need the
//! range of float32 (losses, norms, `prod`...) run on operands cast to float32.
//!
//! The state is per thread, as torch's: the engine's backward threads never see it, so each
//! backward op runs in the dtype its forward ran in (the casts are recorded like any other op).
//! float64 tensors are never cast (torch leaves doubles alone too), nor integers.
//!
//! The casts of leaf tensors that require grad (a model's weights) are cached until the
//! outermost region exits, so a weight used by several ops in one forward is cast once.
//!
//! ```
//! use ferrograd::{autocast, DType, Tensor};
//! let w = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
//! let y = {
//!     let _region = autocast::Region::enter(DType::BFloat16).unwrap();
//!     autocast::lower(&w).unwrap().matmul(&autocast::lower(&w).unwrap()).unwrap()
//! };
//! assert_eq!(y.dtype(), DType::BFloat16);
//! assert!(!autocast::is_enabled());
//! ```

use std::cell::{Cell, RefCell};

use crate::error::{Error, Result};
use crate::tensor::{DType, Tensor};

thread_local! {
    static ENABLED: Cell<bool> = const { Cell::new(false) };
    static DTYPE: Cell<DType> = const { Cell::new(DType::BFloat16) };
    static CACHE_ENABLED: Cell<bool> = const { Cell::new(true) };
    static NESTING: Cell<usize> = const { Cell::new(0) };
    /// (weight, its cast): the weight is held, so its address stays its identity.
    static CACHE: RefCell<Vec<(Tensor, Tensor)>> = const { RefCell::new(Vec::new()) };
}

/// Whether autocast is on for this thread.
pub fn is_enabled() -> bool {
    ENABLED.with(Cell::get)
}

/// Turn autocast on or off for this thread (prefer [`Region`], which restores the state).
pub fn set_enabled(enabled: bool) {
    ENABLED.with(|e| e.set(enabled));
}

/// The half type lower-precision ops run in (bfloat16 unless set).
pub fn dtype() -> DType {
    DTYPE.with(Cell::get)
}

/// Set the half type: bfloat16 or float16, the two torch's CPU autocast supports.
pub fn set_dtype(dtype: DType) -> Result<()> {
    if !dtype.is_half() {
        return Err(Error::value(format!(
            "CPU autocast only supports torch.bfloat16 and torch.float16, got {}",
            dtype.name()
        )));
    }
    DTYPE.with(|d| d.set(dtype));
    Ok(())
}

/// Whether weights' casts are cached within a region.
pub fn is_cache_enabled() -> bool {
    CACHE_ENABLED.with(Cell::get)
}

/// Turn the cast cache on or off.
pub fn set_cache_enabled(enabled: bool) {
    CACHE_ENABLED.with(|c| c.set(enabled));
}

/// Enter one more region level; returns the new depth.
pub fn increment_nesting() -> usize {
    NESTING.with(|n| {
        n.set(n.get() + 1);
        n.get()
    })
}

/// Leave a region level; returns the depth left (0: the outermost exited, the cache should
/// be cleared).
pub fn decrement_nesting() -> usize {
    NESTING.with(|n| {
        n.set(n.get().saturating_sub(1));
        n.get()
    })
}

/// Drop the cached casts.
pub fn clear_cache() {
    // Taken out first: dropping tensors must not run while the cell is borrowed.
    let cached = CACHE.with(|c| std::mem::take(&mut *c.borrow_mut()));
    drop(cached);
}

/// Whether autocast would cast `t` (a float tensor other than float64).
fn eligible(t: &Tensor) -> bool {
    let d = t.dtype();
    d.is_float() && d != DType::Float64
}

/// `t` cast to `dtype`, through the cache for weights (leaves that require grad).
fn cached_cast(t: &Tensor, dtype: DType) -> Result<Tensor> {
    let cache = is_cache_enabled() && t.is_leaf() && t.requires_grad();
    if cache {
        let hit = CACHE.with(|c| {
            c.borrow()
                .iter()
                .find(|(w, cast)| w.same(t) && cast.dtype() == dtype)
                .map(|(_, cast)| cast.clone())
        });
        if let Some(cast) = hit {
            return Ok(cast);
        }
    }
    let cast = t.to_dtype(dtype)?;
    if cache {
        CACHE.with(|c| c.borrow_mut().push((t.clone(), cast.clone())));
    }
    Ok(cast)
}

/// The operand of a lower-precision op: `t` in the region's half type when autocast is on and
/// `t` is eligible, else `t` itself.
pub fn lower(t: &Tensor) -> Result<Tensor> {
    if is_enabled() && eligible(t) && t.dtype() != dtype() {
        cached_cast(t, dtype())
    } else {
        Ok(t.clone())
    }
}

/// The operand of a float32 op: `t` in float32 when autocast is on and `t` is a half tensor,
/// else `t` itself.
pub fn float32(t: &Tensor) -> Result<Tensor> {
    if is_enabled() && eligible(t) && t.dtype() != DType::Float32 {
        cached_cast(t, DType::Float32)
    } else {
        Ok(t.clone())
    }
}

/// An enabled autocast region for this thread: entering saves the state and turns autocast on
/// with `dtype`; dropping restores it (and clears the cache when the outermost region ends).
#[derive(Debug)]
pub struct Region {
    prev_enabled: bool,
    prev_dtype: DType,
}

impl Region {
    /// Enter a region running lower-precision ops in `dtype` (bfloat16 or float16).
    pub fn enter(dtype: DType) -> Result<Region> {
        let prev_dtype = self::dtype();
        // Checked before the guard exists, so a refused dtype leaves the state untouched.
        set_dtype(dtype)?;
        let region = Region {
            prev_enabled: is_enabled(),
            prev_dtype,
        };
        set_enabled(true);
        increment_nesting();
        Ok(region)
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        if decrement_nesting() == 0 {
            clear_cache();
        }
        set_enabled(self.prev_enabled);
        DTYPE.with(|d| d.set(self.prev_dtype));
    }
}
