//! Batched tensors, the representation behind `vmap` (functorch's `BatchedTensorImpl`).
//!
//! A batched tensor is an ordinary [`Tensor`] whose handle carries a `BatchSlot`: the
//! physical tensor holding every sample (`value`), the dimension of `value` the samples run
//! along (`bdim`) and the vmap [`Level`] it belongs to. Its own layout is the *logical* one,
//! `value`'s with `bdim` removed, so shapes, strides and offsets are what the per-sample
//! function sees, and they still address `value`'s storage: a view computed on the logical
//! layout becomes a physical view by putting the batch dimension back (see
//! `Tensor::alias_with_layout`). Its storage is a placeholder without elements, so a kernel
//! that reaches it without a batching rule stops with [`NO_RULE_MESSAGE`] instead of reading
//! something wrong.
//!
//! Autograd always records on the logical tensors: every handle has its own metadata, and the
//! batching rules compute on the physical tensors without recording. Gradients cross a vmap
//! boundary through two nodes (`ops::batching`).

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;

use super::storage::{Layout, Storage};
use super::{AutogradMeta, Tensor, TensorImpl};
use crate::error::{Error, Result};

pub use super::storage::NO_RULE_MESSAGE;

/// How random operations inside a vmap level draw (torch's `randomness` argument).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Randomness {
    /// Random operations raise.
    Error,
    /// Every sample gets the same draw.
    Same,
    /// Every sample gets its own draw.
    Different,
}

/// One vmap level: a batch size, and an id that orders nested levels (inner levels have larger
/// ids; ids are never reused).
#[derive(Debug)]
pub struct Level {
    id: u32,
    size: usize,
    randomness: Randomness,
    alive: AtomicBool,
}

impl Level {
    /// The level's id (larger for inner levels).
    pub fn id(&self) -> u32 {
        self.id
    }
    /// The batch size.
    pub fn size(&self) -> usize {
        self.size
    }
    /// How random operations draw at this level.
    pub fn randomness(&self) -> Randomness {
        self.randomness
    }
    /// Whether the vmap call that opened the level is still running.
    pub fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }
}

/// The batch part of a batched tensor's handle.
pub(crate) struct BatchSlot {
    /// The physical tensor (itself batched at an outer level under nested vmap).
    pub value: Tensor,
    /// The dimension of `value` that runs over the samples.
    pub bdim: usize,
    /// The level the batch belongs to.
    pub level: Arc<Level>,
}

thread_local! {
    static LEVELS: RefCell<Vec<Arc<Level>>> = const { RefCell::new(Vec::new()) };
}

static NEXT_LEVEL: AtomicU32 = AtomicU32::new(1);

/// Open a vmap level of `size` samples on this thread (torch's `_vmap_increment_nesting`).
pub fn push_level(size: usize, randomness: Randomness) -> Result<Arc<Level>> {
    // Ids order levels (and node metadata keeps them in 32 bits), so they never wrap.
    let id = NEXT_LEVEL
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |i| i.checked_add(1))
        .map_err(|_| {
            Error::runtime("vmap: this process has opened 2^32 vmap levels, the most it can")
        })?;
    let level = Arc::new(Level {
        id,
        size,
        randomness,
        alive: AtomicBool::new(true),
    });
    LEVELS.with(|l| l.borrow_mut().push(level.clone()));
    Ok(level)
}

/// Close the innermost open level (torch's `_vmap_decrement_nesting`); tensors still batched
/// at it then refuse to be unwrapped.
pub fn pop_level() -> Result<Arc<Level>> {
    let level = LEVELS
        .with(|l| l.borrow_mut().pop())
        .ok_or_else(|| Error::runtime("vmap: no vmap level is open"))?;
    level.alive.store(false, Ordering::Release);
    Ok(level)
}

/// The innermost open level of this thread, if any.
pub fn current_level() -> Option<Arc<Level>> {
    LEVELS.with(|l| l.borrow().last().cloned())
}

/// The open level with this id.
pub fn level_by_id(id: u32) -> Result<Arc<Level>> {
    LEVELS
        .with(|l| l.borrow().iter().find(|v| v.id == id).cloned())
        .ok_or_else(|| Error::runtime(format!("vmap: level {id} is not open on this thread")))
}

impl Tensor {
    /// `value` seen one sample at a time along `bdim`, at `level`: a batched tensor whose
    /// logical shape is `value`'s without `bdim`. No autograd is recorded here.
    pub(crate) fn batched(value: Tensor, bdim: usize, level: Arc<Level>) -> Result<Tensor> {
        // Levels nest outermost first (inner levels outside, as ops peel the innermost first):
        // batching a tensor already batched at an inner level puts the new level under it.
        if let Some(s) = value.batch_slot() {
            if s.level.id > level.id && bdim < value.dim() {
                let under = move_to_front(&s.value, s.bdim);
                let inner = Tensor::batched(under, bdim + 1, level)?;
                return Tensor::batched(inner, 0, s.level.clone());
            }
        }
        if bdim >= value.dim() {
            return Err(Error::index(format!(
                "vmap: batch dimension {bdim} is out of range for a tensor of {} dimensions",
                value.dim()
            )));
        }
        if value.shape()[bdim] != level.size {
            return Err(Error::value(format!(
                "vmap: Expected all tensors to have the same size in the mapped dimension, got a tensor of size {} where the batch size is {}",
                value.shape()[bdim],
                level.size
            )));
        }
        let mut layout = value.layout().clone();
        layout.shape.remove(bdim);
        layout.strides.remove(bdim);
        let dtype = value.dtype();
        Ok(Tensor(Arc::new(TensorImpl {
            storage: Storage::placeholder(),
            layout,
            dtype,
            meta: super::spin::SpinLock::new(AutogradMeta::default()),
            inference: value.is_inference(),
            wrapped_number: false,
            binding_slot: Default::default(),
            batch: Some(Box::new(BatchSlot { value, bdim, level })),
        })))
    }

    /// Whether this is a batched tensor (inside vmap).
    pub fn is_batched(&self) -> bool {
        self.0.batch.is_some()
    }

    /// The batch part of a batched tensor.
    pub(crate) fn batch_slot(&self) -> Option<&BatchSlot> {
        self.0.batch.as_deref()
    }

    /// For a batched tensor: its physical tensor, batch dimension and level.
    pub fn batch_parts(&self) -> Option<(&Tensor, usize, &Arc<Level>)> {
        self.batch_slot().map(|s| (&s.value, s.bdim, &s.level))
    }

    /// The storage that really holds the elements (the innermost physical tensor's).
    pub fn data_storage(&self) -> &Arc<Storage> {
        match self.batch_slot() {
            Some(s) => s.value.data_storage(),
            None => &self.0.storage,
        }
    }

    /// A handle over the same elements with logical layout `layout`, which was derived from
    /// this batched tensor's logical layout: the batch dimension goes back in front, with the
    /// stride it had, and the physical view is batched again at the same level.
    pub(crate) fn batched_alias(&self, layout: Layout) -> Tensor {
        let s = self.batch_slot().expect("a batched tensor");
        let mut phys = layout;
        phys.shape.insert(0, s.value.shape()[s.bdim]);
        phys.strides.insert(0, s.value.strides()[s.bdim]);
        let value = s.value.alias_with_layout(phys);
        Tensor::batched(value, 0, s.level.clone()).expect("the batch dimension was kept")
    }
}

/// The innermost level among the batched tensors of `ts`.
pub(crate) fn top_level(ts: &[&Tensor]) -> Option<Arc<Level>> {
    ts.iter()
        .filter_map(|t| t.batch_slot())
        .max_by_key(|s| s.level.id)
        .map(|s| s.level.clone())
}

/// `t` with dimension `d` moved to the front, as a raw alias (nothing recorded).
pub(crate) fn move_to_front(t: &Tensor, d: usize) -> Tensor {
    if d == 0 {
        return t.clone();
    }
    let mut l = t.layout().clone();
    let (n, s) = (l.shape.remove(d), l.strides.remove(d));
    l.shape.insert(0, n);
    l.strides.insert(0, s);
    t.alias_with_layout(l)
}

/// For a tensor batched at `level`: its physical tensor with the batch dimension in front.
/// Anything else (unbatched, or batched at an outer level) is returned as it is and counts as
/// the same for every sample.
pub(crate) fn physical_front(t: &Tensor, level: &Level) -> (Tensor, bool) {
    match t.batch_slot() {
        Some(s) if s.level.id == level.id => (move_to_front(&s.value, s.bdim), true),
        _ => (t.clone(), false),
    }
}

/// The physical tensors under `dst` and `src` (the same logical shape), for writing `src`
/// into `dst`'s memory: every level of `dst` peeled, innermost first, each batch dimension in
/// front; `src` peeled alike where it is batched at that level and expanded over the batch
/// where it is not (its values are the same for every sample). `None` when `src` is batched
/// at a level `dst` is not: its samples would all have to land in the same elements.
pub(crate) fn physical_for_write(dst: &Tensor, src: &Tensor) -> Option<(Tensor, Tensor)> {
    let Some(s) = dst.batch_slot() else {
        return (!src.is_batched()).then(|| (dst.clone(), src.clone()));
    };
    let phys_src = match src.batch_slot() {
        // A tensor's outermost slot is its innermost level, so `src` has one `dst` lacks.
        Some(t) if t.level.id > s.level.id => return None,
        Some(t) if t.level.id == s.level.id => move_to_front(&t.value, t.bdim),
        _ => {
            let mut l = src.layout().clone();
            l.shape.insert(0, s.level.size);
            l.strides.insert(0, 0);
            src.alias_with_layout(l)
        }
    };
    physical_for_write(&move_to_front(&s.value, s.bdim), &phys_src)
}

/// The operands of a broadcasting elementwise op, made physical for the innermost level among
/// them: batched ones get the batch dimension in front and size-1 dimensions after it up to
/// the highest logical rank, so right-aligned broadcasting pairs their samples, and unbatched
/// ones are left as they are (they broadcast over the batch). `None` when nothing is batched.
pub(crate) fn align(ts: &[&Tensor]) -> Option<(Arc<Level>, Vec<Tensor>)> {
    let level = top_level(ts)?;
    let rank = ts.iter().map(|t| t.dim()).max().unwrap_or(0);
    let phys = ts
        .iter()
        .map(|t| {
            let (p, batched) = physical_front(t, &level);
            if !batched || t.dim() == rank {
                return p;
            }
            let mut l = p.layout().clone();
            for _ in t.dim()..rank {
                l.shape.insert(1, 1);
                l.strides.insert(1, 0);
            }
            p.alias_with_layout(l)
        })
        .collect();
    Some((level, phys))
}

/// Run an elementwise kernel `f` on the physical operands of `ts` (see [`align`]; every level
/// is peeled, innermost first, so `f` sees plain tensors) and batch its result again, or
/// `None` when no operand is batched.
pub(crate) fn elementwise<F: FnOnce(&[Tensor]) -> Result<Tensor>>(
    ts: &[&Tensor],
    f: F,
) -> Option<Result<Tensor>> {
    let (level, phys) = align(ts)?;
    Some(peel_all(phys, f).and_then(|o| Tensor::batched(o, 0, level)))
}

fn peel_all<F: FnOnce(&[Tensor]) -> Result<Tensor>>(ts: Vec<Tensor>, f: F) -> Result<Tensor> {
    let refs: Vec<&Tensor> = ts.iter().collect();
    match align(&refs) {
        None => f(&ts),
        Some((level, inner)) => peel_all(inner, f).and_then(|o| Tensor::batched(o, 0, level)),
    }
}

/// `f` of the fully physical tensor under a batched `t` (every level peeled, each batch
/// dimension in front, outermost level first) and the number of leading batch dimensions,
/// batched again; `None` when `t` is not batched. For kernels that read elements.
pub(crate) fn unary_all(
    t: &Tensor,
    f: impl FnOnce(&Tensor, usize) -> Result<Tensor>,
) -> Option<Result<Tensor>> {
    t.batch_slot()?;
    let (phys, levels) = peel(t);
    Some(f(&phys, levels.len()).and_then(|o| rewrap(o, &levels)))
}

/// The fully physical tensor under `t` and the levels peeled off it, innermost first: each
/// level's batch dimension in front, so the outermost level's comes first (peeling level k
/// puts its batch dim in front of the k - 1 already there). No levels when `t` is not batched.
pub(crate) fn peel(t: &Tensor) -> (Tensor, Vec<Arc<Level>>) {
    let mut levels = Vec::new();
    let mut cur = t.clone();
    while let Some(s) = cur.batch_slot() {
        levels.push(s.level.clone());
        cur = move_to_front(&s.value, s.bdim);
    }
    (cur, levels)
}

/// A physical tensor whose leading dimensions are the batches of `levels` (as [`peel`] left
/// them) batched again at those levels.
pub(crate) fn rewrap(t: Tensor, levels: &[Arc<Level>]) -> Result<Tensor> {
    levels
        .iter()
        .rev()
        .try_fold(t, |o, level| Tensor::batched(o, 0, level.clone()))
}

/// The tensor that really holds `t`'s elements (through every level of batching), for reading
/// them where the order of the samples does not matter (validating indices).
pub(crate) fn innermost(t: &Tensor) -> &Tensor {
    match t.batch_slot() {
        Some(s) => innermost(&s.value),
        None => t,
    }
}
