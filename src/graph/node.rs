//! Graph nodes: one per recorded op (its backward rule and saved tensors), plus the leaf
//! accumulators. Nodes are reference counted; a graph lives as long as something reaches it.

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use smallvec::SmallVec;

use super::forward_ad;
use super::saved_hooks::{self, Payload, SavedTensorHooks};
use crate::error::{Error, Result};
use crate::tensor::grad_mode;
use crate::tensor::shape::fmt_shape;
use crate::tensor::spin::SpinLock;
use crate::tensor::{DType, Tensor, TensorHook, TensorImpl};

/// The message torch gives when a freed graph is run again (or its saved tensors read).
pub const ERR_TWICE: &str = "Trying to backward through the graph a second time (or directly access saved tensors after they have already been freed). Saved intermediate values of the graph are freed when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the graph a second time or if you need to access saved tensors after calling backward.";

static NEXT_SEQ: AtomicU64 = AtomicU64::new(0);

/// Sequence numbers a thread takes from [`NEXT_SEQ`] at a time: one locked add per block
/// instead of one per recorded op. Numbers stay unique and increase along each thread, as
/// torch's (which are per thread) do.
const SEQ_BLOCK: u64 = 1024;

thread_local! {
    /// This thread's next sequence number and the end of its block.
    static SEQ: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
}

fn next_seq() -> u64 {
    SEQ.with(|c| {
        let (mut next, mut end) = c.get();
        if next == end {
            next = NEXT_SEQ.fetch_add(SEQ_BLOCK, Ordering::Relaxed);
            end = next + SEQ_BLOCK;
        }
        c.set((next + 1, end));
        next
    })
}

/// Where a gradient goes: input slot `input_nr` of `node`.
#[derive(Clone)]
pub struct Edge {
    /// The node that receives the gradient.
    pub node: Arc<Node>,
    /// Which of the node's forward outputs the gradient is for.
    pub input_nr: usize,
}

/// Shape and dtype of a tensor at record time (to reduce, cast or materialise gradients).
#[derive(Clone, Debug)]
pub struct TensorMeta {
    /// Sizes (three inline: every node keeps one per input and output, so this is per-op
    /// memory in a long graph).
    pub shape: MetaDims,
    /// Element type.
    pub dtype: DType,
    /// The innermost vmap level the tensor is batched at (its id; 0: not batched). A gradient
    /// batched at a level the tensor was not is summed over that batch on its way in: the
    /// tensor was the same for every sample.
    pub batch_level: u32,
}

impl TensorMeta {
    pub(crate) fn of(t: &Tensor) -> Self {
        TensorMeta {
            shape: MetaDims::from_slice(t.shape()),
            dtype: t.dtype(),
            batch_level: t.batch_parts().map_or(0, |(_, _, l)| l.id()),
        }
    }
}

/// A node's outgoing edges, one per forward input (most ops have one or two).
pub type EdgeList = SmallVec<[Option<Edge>; 2]>;
/// Sizes as a node records them.
pub type MetaDims = SmallVec<[usize; 3]>;
/// Shapes and dtypes of a node's inputs.
pub type MetaList = SmallVec<[TensorMeta; 2]>;
/// Shapes and dtypes of a node's outputs (nearly every op has one).
pub type OutputMetaList = SmallVec<[TensorMeta; 1]>;

/// A backward rule of the outputs and the saved tensors in, one gradient per input out.
pub type BackwardFn = dyn Fn(&[Tensor], &[Tensor]) -> Result<Vec<Option<Tensor>>> + Send + Sync;

/// A node whose backward is user code (a custom Function, from Rust or Python).
pub trait CustomBackward: Send + Sync {
    /// Gradients of the forward inputs from those of the outputs (`None` where nothing arrived,
    /// unless [`CustomBackward::materialize_grads`]).
    fn apply(&self, node: &Arc<Node>, grads: Vec<Option<Tensor>>) -> Result<Vec<Option<Tensor>>>;
    /// Free what the node saved; called after backward unless the graph is retained.
    fn release(&self) {}
    /// Whether missing output gradients arrive as zeros (default) or `None`.
    fn materialize_grads(&self) -> bool {
        true
    }
}

/// A tensor saved for backward with the version it had when saved.
/// What a saved tensor keeps of the tensor it saved.
enum SavedData {
    /// The tensor itself.
    Tensor(Tensor),
    /// A leaf that requires grad, held weakly with its elements held strongly: its `.grad` can
    /// hold a graph that saved it (backward with `create_graph`), and a strong reference would
    /// close a cycle that no collector sees. Once nothing else holds the leaf, no gradient can
    /// reach it observably, and its elements alone are what the rule needs.
    Leaf(Box<SavedLeaf>),
    /// What a saved-tensor `pack` hook made of it; `unpack` gives the tensor back.
    Packed(Box<PackedTensor>),
    /// Moved out to a running backward ([`LentSaved`]); never in a node's state.
    Lent,
}

struct PackedTensor {
    payload: Payload,
    hooks: Arc<SavedTensorHooks>,
    /// The saved tensor's storage, watched for in-place changes without keeping it alive (a
    /// hook that offloads or recomputes exists to let it go).
    storage: Weak<crate::tensor::Storage>,
    /// For a leaf that requires grad: its accumulator, which the unpacked tensor is attached to
    /// under `create_graph` so that second-order gradients still reach the leaf (torch sets
    /// the saved variable's grad accumulator the same way).
    leaf_edge: Option<Edge>,
}

struct SavedLeaf {
    leaf: Weak<TensorImpl>,
    storage: Arc<crate::tensor::Storage>,
    layout: crate::tensor::Layout,
    dtype: crate::tensor::DType,
}

impl SavedData {
    fn of(t: Tensor) -> SavedData {
        // A batched leaf has no elements of its own to keep: it is held as it is.
        if t.is_leaf() && t.requires_grad() && !t.is_batched() {
            SavedData::Leaf(Box::new(SavedLeaf {
                leaf: Arc::downgrade(&t.0),
                storage: t.0.storage.clone(),
                layout: t.layout().clone(),
                dtype: t.dtype(),
            }))
        } else {
            SavedData::Tensor(t)
        }
    }

    fn tensor(&self) -> Result<Tensor> {
        Ok(match self {
            SavedData::Tensor(t) => t.clone(),
            SavedData::Leaf(l) => match l.leaf.upgrade() {
                Some(t) => Tensor(t),
                None => Tensor::from_parts(l.storage.clone(), l.layout.clone(), l.dtype),
            },
            SavedData::Packed(p) => (p.hooks.unpack)(&p.payload)?,
            SavedData::Lent => return Err(Error::runtime(ERR_TWICE)),
        })
    }

    /// Hand `t` to the active `pack` hook, which must not modify it.
    fn pack(t: &Tensor, hooks: Arc<SavedTensorHooks>) -> Result<SavedData> {
        let before = t.version();
        let payload = {
            // torch runs pack hooks without recording.
            let _off = grad_mode::no_grad();
            (hooks.pack)(t)?
        };
        if t.version() != before {
            return Err(Error::runtime("A saved tensor pack hook is modifying its input in place. Tensors provided as input to pack hook cannot be modified by in-place operations as this can lead to unexpected side-effects. Please open an issue if you need to perform in-place operations on the input to a pack hook."));
        }
        let leaf_edge = if t.is_leaf() && t.requires_grad() {
            t.gradient_edge()
        } else {
            None
        };
        Ok(SavedData::Packed(Box::new(PackedTensor {
            payload,
            hooks,
            storage: Arc::downgrade(t.data_storage()),
            leaf_edge,
        })))
    }

    /// The version the saved tensor's storage is at now (None: the storage is gone, so nothing
    /// can have changed it since).
    fn version_now(&self, unpacked: &Tensor) -> Option<u64> {
        match self {
            SavedData::Packed(p) => p.storage.upgrade().map(|s| s.version()),
            _ => Some(unpacked.version()),
        }
    }
}

pub(crate) struct SavedTensor {
    data: SavedData,
    version: u64,
    origin: Origin,
}

/// Where a saved tensor came from.
enum Origin {
    /// Output `nr` of the node saving it: kept without its grad_fn to avoid a cycle, rebuilt
    /// with it on unpack.
    OwnOutput(u32),
    /// Output `nr` of another node, named in the in-place error (the tensor's own grad_fn
    /// changes when it is modified in place).
    Produced(Arc<Node>, u32),
    /// A leaf, or a tensor outside autograd.
    Leaf,
}

impl SavedTensor {
    pub(crate) fn new(t: &Tensor, output_nr: Option<usize>) -> Result<Self> {
        if t.is_inference() && !grad_mode::is_inference_mode_enabled() {
            return Err(Error::runtime("Inference tensors cannot be saved for backward. Please do not use Tensors created in inference mode in computation tracked by autograd. To work around this, you can make a clone to get a normal tensor and use it in autograd, or use `torch.no_grad()` instead of `torch.inference_mode()`."));
        }
        let version = t.version();
        let (data, origin) = match output_nr {
            Some(nr) => (
                forward_ad::detach_keeping_tangent(t),
                Origin::OwnOutput(nr as u32),
            ),
            // The producer and output number read under one lock (an output's own producer
            // is not attached yet, so it is not looked up).
            None => match t.producer() {
                Some((f, nr)) => (t.clone(), Origin::Produced(f, nr as u32)),
                None => (t.clone(), Origin::Leaf),
            },
        };
        let data = match saved_hooks::current() {
            Some(hooks) => SavedData::pack(t, hooks)?,
            None => SavedData::of(data),
        };
        Ok(SavedTensor {
            data,
            version,
            origin,
        })
    }

    /// The saved tensor, version-checked. `owner` is the node that saved it (named in the
    /// in-place error); `rebuild` gives a saved output its grad_fn back.
    pub(crate) fn unpack(&self, owner: Option<&Arc<Node>>, rebuild: bool) -> Result<Tensor> {
        let data = self.data.tensor()?;
        self.check(&data, owner)?;
        let attach = |node: &Arc<Node>, nr: usize| {
            let t = forward_ad::detach_keeping_tangent(&data);
            {
                let mut m = t.meta();
                m.grad_fn = Some(node.clone());
                m.output_nr = nr;
            }
            t
        };
        Ok(match (&self.origin, owner, &self.data) {
            (&Origin::OwnOutput(nr), Some(node), _) if rebuild => attach(node, nr as usize),
            // What `unpack` returned stands for the saved tensor in the graph: the producer's
            // (or the leaf's) history goes on it, as torch rebuilds a hooked saved variable.
            (Origin::Produced(node, nr), _, SavedData::Packed(_)) if rebuild => {
                attach(node, *nr as usize)
            }
            (Origin::Leaf, _, SavedData::Packed(p)) if rebuild => match &p.leaf_edge {
                Some(e) => attach(&e.node, e.input_nr),
                None => data,
            },
            _ => data,
        })
    }

    /// Like [`SavedTensor::unpack`], moving a plainly held tensor out (leaving
    /// [`SavedData::Lent`]) instead of cloning it when nothing is rebuilt.
    fn unpack_moving(&mut self, owner: &Arc<Node>, rebuild: bool) -> Result<Tensor> {
        if rebuild {
            return self.unpack(Some(owner), true);
        }
        match std::mem::replace(&mut self.data, SavedData::Lent) {
            SavedData::Tensor(t) => match self.check(&t, Some(owner)) {
                Ok(()) => Ok(t),
                Err(e) => {
                    self.data = SavedData::Tensor(t);
                    Err(e)
                }
            },
            other => {
                self.data = other;
                self.unpack(Some(owner), false)
            }
        }
    }

    /// Errors if `data` (what this saved tensor holds) was detached or modified in place
    /// since it was saved.
    fn check(&self, data: &Tensor, owner: Option<&Arc<Node>>) -> Result<()> {
        let packed = matches!(self.data, SavedData::Packed(_));
        if !packed && data.meta().detached_in_place {
            return Err(Error::runtime("Trying to use a saved tensor that has been detached in-place, i.e. with .detach_().This is not supported, please use out-of-place `.detach()` instead"));
        }
        let now = match &self.data {
            SavedData::Packed(p) if !p.hooks.check_version => self.version,
            _ => self.data.version_now(data).unwrap_or(self.version),
        };
        if now != self.version {
            let desc = match (&self.origin, owner) {
                (Origin::Produced(producer, nr), _) => {
                    format!(", which is output {nr} of {},", producer.forward_name())
                }
                (Origin::OwnOutput(nr), Some(node)) => {
                    format!(", which is output {nr} of {},", node.forward_name())
                }
                _ => String::new(),
            };
            let hint = if grad_mode::is_anomaly_enabled() {
                "Hint: the backtrace further above shows the operation that failed to compute its gradient. The variable in question was changed in there or anywhere later. Good luck!"
            } else {
                "Hint: enable anomaly detection to find the operation that failed to compute its gradient, with torch.autograd.set_detect_anomaly(True, check_nan=False)."
            };
            return Err(Error::runtime(format!(
                "one of the variables needed for gradient computation has been modified by an inplace operation: [ferrograd.{} {}]{desc} is at version {now}; expected version {} instead. {hint}",
                data.dtype().legacy_name(),
                fmt_shape(data.shape()),
                self.version
            )));
        }
        Ok(())
    }
}

/// A node's saved tensors lent to one backward that frees them ([`Node::lend_saved`]).
pub(crate) struct LentSaved<'a> {
    node: &'a Arc<Node>,
    shells: SmallVec<[SavedTensor; 2]>,
    /// The unpacked tensors, one per shell unpacked so far.
    tensors: SmallVec<[Tensor; 2]>,
}

impl LentSaved<'_> {
    /// The saved tensors, version-checked; under grad mode (`create_graph`) a saved output
    /// gets its grad_fn back, as [`Node::unpack_saved`] gives it.
    pub(crate) fn unpack(&mut self) -> Result<&[Tensor]> {
        let rebuild = grad_mode::is_grad_enabled();
        for s in self.shells.iter_mut().skip(self.tensors.len()) {
            let t = s.unpack_moving(self.node, rebuild)?;
            self.tensors.push(t);
        }
        Ok(&self.tensors)
    }

    /// Put everything back in the node, as it was before [`Node::lend_saved`] (the backward
    /// failed, and the graph must be left as the caller had it).
    pub(crate) fn give_back(mut self) {
        for (s, t) in self.shells.iter_mut().zip(self.tensors.drain(..)) {
            if matches!(s.data, SavedData::Lent) {
                s.data = SavedData::Tensor(t);
            }
        }
        if let NodeKind::Op { saved, .. } = &self.node.kind {
            let mut st = saved.lock();
            st.tensors = std::mem::take(&mut self.shells);
            st.released = false;
        }
    }
}

pub(crate) struct SavedState {
    tensors: SmallVec<[SavedTensor; 2]>,
    /// Whether anything (tensor or scalar) was saved; freeing then makes a re-run an error.
    has_saved: bool,
    released: bool,
}

pub(crate) enum NodeKind {
    Op {
        backward: Box<BackwardFn>,
        /// Spun on, not parked (see [`SpinLock`]): taken once per node per backward.
        saved: SpinLock<SavedState>,
    },
    Accumulate {
        /// Held weakly: the leaf's `.grad` can hold a graph that reaches this node (backward
        /// with `create_graph`), and a strong reference would make that a cycle no collector
        /// sees. A leaf nobody else holds has a `.grad` nobody can read, so it is skipped.
        variable: Weak<TensorImpl>,
    },
    Custom(Box<dyn CustomBackward>),
}

/// A hook on a node's incoming gradients (one per forward output, `None` where none arrived);
/// it may return replacements, one per output.
pub type NodePreHook =
    Arc<dyn Fn(&[Option<Tensor>]) -> Result<Option<Vec<Option<Tensor>>>> + Send + Sync>;
/// A hook run after a node: `(grad_inputs, grad_outputs)`, what it computed (one per forward
/// input) and what it was given; it may return replacements for `grad_inputs`.
pub type NodePostHook = Arc<
    dyn Fn(&[Option<Tensor>], &[Option<Tensor>]) -> Result<Option<Vec<Option<Tensor>>>>
        + Send
        + Sync,
>;

/// Hooks of a node and its outputs, the non-leaves that retain their grad, and what the user
/// attached to the node. Boxed and made on first use: most nodes never get any.
#[derive(Default)]
pub(crate) struct NodeHooks {
    /// Tensor hooks on output `nr` (`t.register_hook`).
    pub pre: Vec<(usize, u64, TensorHook)>,
    pub retain: Vec<(usize, Weak<TensorImpl>)>,
    /// `node.register_prehook`.
    pub node_pre: Vec<(u64, NodePreHook)>,
    /// `node.register_hook`.
    pub post: Vec<(u64, NodePostHook)>,
    /// `node.metadata` (the bindings keep a Python dict here).
    pub metadata: Option<Arc<dyn std::any::Any + Send + Sync>>,
}

/// A node of the backward graph (torch's `grad_fn`).
pub struct Node {
    seq: u64,
    name: Cow<'static, str>,
    pub(crate) next_edges: EdgeList,
    pub(crate) input_meta: MetaList,
    pub(crate) output_meta: OutputMetaList,
    pub(crate) kind: NodeKind,
    pub(crate) hooks: Mutex<Option<Box<NodeHooks>>>,
    /// Set once a hook or retain_grad is added: most nodes never get one, and reading this
    /// flag is cheaper than taking the lock on every node of every backward.
    has_hooks: AtomicBool,
    /// Where the forward op was recorded (anomaly mode only).
    /// Boxed: one pointer in every node, where a String would take three (only anomaly mode
    /// records one, so the extra allocation is paid there alone).
    #[allow(clippy::box_collection)]
    pub(crate) trace: Option<Box<String>>,
}

impl Node {
    pub(crate) fn new(
        name: Cow<'static, str>,
        next_edges: EdgeList,
        input_meta: MetaList,
        output_meta: OutputMetaList,
        kind: NodeKind,
    ) -> Arc<Node> {
        let seq = next_seq();
        let trace = grad_mode::forward_trace().map(Box::new);
        Arc::new(Node {
            seq,
            name,
            next_edges,
            input_meta,
            output_meta,
            kind,
            hooks: Mutex::new(None),
            has_hooks: AtomicBool::new(false),
            trace,
        })
    }

    pub(crate) fn accumulate_grad(variable: Tensor) -> Arc<Node> {
        let meta = TensorMeta::of(&variable);
        Arc::new(Node {
            // Leaf accumulation runs as soon as it is ready (torch gives it the top priority).
            seq: u64::MAX,
            name: Cow::Borrowed("AccumulateGrad"),
            next_edges: EdgeList::new(),
            input_meta: MetaList::new(),
            output_meta: smallvec::smallvec![meta],
            kind: NodeKind::Accumulate {
                variable: Arc::downgrade(&variable.0),
            },
            hooks: Mutex::new(None),
            has_hooks: AtomicBool::new(false),
            trace: None,
        })
    }

    /// torch's name for the node, e.g. `MulBackward0`.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The forward op's name, e.g. `Mul` for `MulBackward0`.
    pub fn forward_name(&self) -> &str {
        forward_name_of(&self.name)
    }
    /// Creation order; later nodes run first among those ready.
    pub fn sequence_nr(&self) -> u64 {
        self.seq
    }
    /// Where this node sends gradients: one entry per forward input, `None` where the input
    /// needs no gradient.
    pub fn next_edges(&self) -> &[Option<Edge>] {
        &self.next_edges
    }
    /// For an accumulator, the leaf it accumulates into (None once nothing else holds it).
    pub fn variable(&self) -> Option<Tensor> {
        match &self.kind {
            NodeKind::Accumulate { variable } => variable.upgrade().map(Tensor),
            _ => None,
        }
    }
    /// Number of forward outputs (gradient slots this node receives).
    pub fn num_outputs(&self) -> usize {
        self.output_meta.len()
    }

    /// Add a hook on the gradient of output `output_nr`; returns an id for removal.
    pub(crate) fn add_pre_hook(&self, output_nr: usize, hook: TensorHook) -> u64 {
        let id = super::next_hook_id();
        self.edit_hooks(|h| h.pre.push((output_nr, id, hook)));
        id
    }

    /// Change this node's hooks (made on first use) and mark it as having some.
    fn edit_hooks(&self, f: impl FnOnce(&mut NodeHooks)) {
        f(self.hooks.lock().get_or_insert_with(Default::default));
        self.has_hooks.store(true, Ordering::Release);
    }
    /// Remove the tensor, node pre- or post-hook with this id.
    pub(crate) fn remove_pre_hook(&self, id: u64) {
        if let Some(h) = self.hooks.lock().as_mut() {
            h.pre.retain(|(_, i, _)| *i != id);
            h.node_pre.retain(|(i, _)| *i != id);
            h.post.retain(|(i, _)| *i != id);
        }
    }

    /// Run `hook` on the gradients arriving at this node before it runs (after the tensor
    /// hooks of its outputs); returns an id for removal.
    pub(crate) fn add_node_pre_hook(&self, hook: NodePreHook) -> u64 {
        let id = super::next_hook_id();
        self.edit_hooks(|h| h.node_pre.push((id, hook)));
        id
    }

    /// Run `hook` after this node computed its gradients; returns an id for removal.
    pub(crate) fn add_post_hook(&self, hook: NodePostHook) -> u64 {
        let id = super::next_hook_id();
        self.edit_hooks(|h| h.post.push((id, hook)));
        id
    }

    /// What was attached with [`Node::set_metadata`].
    pub fn metadata(&self) -> Option<Arc<dyn std::any::Any + Send + Sync>> {
        self.hooks.lock().as_ref().and_then(|h| h.metadata.clone())
    }

    /// Attach a value to this node (torch's `node.metadata`); it lives as long as the node.
    pub fn set_metadata(&self, value: Arc<dyn std::any::Any + Send + Sync>) {
        self.hooks
            .lock()
            .get_or_insert_with(Default::default)
            .metadata = Some(value);
    }

    /// The node pre-hooks and post-hooks registered now (cloned out of the lock: hooks may
    /// register or remove hooks).
    pub(crate) fn node_hooks(&self) -> (Vec<NodePreHook>, Vec<NodePostHook>) {
        if !self.may_have_hooks() {
            return (Vec::new(), Vec::new());
        }
        match self.hooks.lock().as_ref() {
            None => (Vec::new(), Vec::new()),
            Some(h) => (
                h.node_pre.iter().map(|(_, f)| f.clone()).collect(),
                h.post.iter().map(|(_, f)| f.clone()).collect(),
            ),
        }
    }
    pub(crate) fn add_retain_grad(&self, output_nr: usize, t: Weak<TensorImpl>) {
        self.edit_hooks(|h| h.retain.push((output_nr, t)));
    }

    /// Whether hooks or retain_grad may be registered on this node's outputs.
    pub(crate) fn may_have_hooks(&self) -> bool {
        self.has_hooks.load(Ordering::Acquire)
    }
    pub(crate) fn remove_retain_grad(&self, t: &Weak<TensorImpl>) {
        if let Some(h) = self.hooks.lock().as_mut() {
            h.retain.retain(|(_, w)| !w.ptr_eq(t));
        }
    }

    /// The saved tensors, version-checked (ERR_TWICE once freed).
    ///
    /// A saved output gets its grad_fn back only under grad mode (create_graph): otherwise the
    /// rule merely reads its values, and rebuilding the tensor would cost an allocation per node.
    pub(crate) fn unpack_saved(self: &Arc<Self>) -> Result<SmallVec<[Tensor; 2]>> {
        match &self.kind {
            NodeKind::Op { saved, .. } => {
                let st = saved.lock();
                if st.released && st.has_saved {
                    return Err(Error::runtime(ERR_TWICE));
                }
                let rebuild = grad_mode::is_grad_enabled();
                st.tensors
                    .iter()
                    .map(|s| s.unpack(Some(self), rebuild))
                    .collect()
            }
            _ => Ok(SmallVec::new()),
        }
    }

    /// The saved tensors for one backward that frees them (no `retain_graph`), taken out of
    /// the node: one lock where reading them and then freeing them took two, and plainly held
    /// tensors moved rather than cloned. None for nodes without saved-tensor state. The node
    /// reads as freed from here on; [`LentSaved::give_back`] undoes that if the backward fails.
    pub(crate) fn lend_saved(self: &Arc<Self>) -> Result<Option<LentSaved<'_>>> {
        let NodeKind::Op { saved, .. } = &self.kind else {
            return Ok(None);
        };
        let mut st = saved.lock();
        if st.released && st.has_saved {
            return Err(Error::runtime(ERR_TWICE));
        }
        st.released = true;
        let shells = std::mem::take(&mut st.tensors);
        drop(st);
        Ok(Some(LentSaved {
            node: self,
            shells,
            tensors: SmallVec::new(),
        }))
    }

    /// Free saved tensors (after backward without `retain_graph`).
    pub(crate) fn release_saved(&self) {
        match &self.kind {
            NodeKind::Op { saved, .. } => {
                let mut st = saved.lock();
                st.released = true;
                let freed = std::mem::take(&mut st.tensors);
                drop(st);
                drop(freed);
            }
            NodeKind::Custom(c) => c.release(),
            _ => {}
        }
    }
}

/// `Mul` for `MulBackward0`.
fn forward_name_of(name: &str) -> &str {
    name.strip_suffix("Backward0")
        .or_else(|| name.strip_suffix("Backward"))
        .unwrap_or(name)
}

impl Drop for Node {
    fn drop(&mut self) {
        for e in self.next_edges.drain(..).flatten() {
            drop_iteratively(e.node);
        }
    }
}

thread_local! {
    static DROP_QUEUE: RefCell<Option<Vec<Arc<Node>>>> = const { RefCell::new(None) };
}

/// Drop a node handle without recursing down the chain it owns: nested drops are queued and
/// drained by the outermost call, so a million-op chain frees in constant stack.
pub(crate) fn drop_iteratively(node: Arc<Node>) {
    if Arc::strong_count(&node) > 1 {
        return;
    }
    let first = DROP_QUEUE.with(|q| {
        let mut q = q.borrow_mut();
        match q.as_mut() {
            Some(pending) => {
                pending.push(node);
                None
            }
            None => {
                *q = Some(Vec::new());
                Some(node)
            }
        }
    });
    let Some(first) = first else { return };
    drop(first);
    let mut freed = 1usize;
    while let Some(next) = DROP_QUEUE.with(|q| q.borrow_mut().as_mut().and_then(|v| v.pop())) {
        drop(next);
        freed += 1;
    }
    DROP_QUEUE.with(|q| *q.borrow_mut() = None);
    if freed >= crate::memory::RELEASE_FROM_NODES {
        crate::memory::after_large_free();
    }
}

thread_local! {
    /// Bit k set: the backward rule running on this thread must produce input k's gradient.
    static WANTED: Cell<u64> = const { Cell::new(u64::MAX) };
}

/// Whether the backward rule being run must compute the gradient of its input `k` (torch's
/// `task_should_compute_output`): false when that input needs no gradient or nothing in this
/// backward pass uses it. Rules skip the work; anything they return there is discarded anyway.
pub(crate) fn wants_grad(k: usize) -> bool {
    k >= 64 || WANTED.with(|w| (w.get() >> k) & 1 == 1)
}

/// Input `k`'s gradient from `f`, or `None` without running `f` when [`wants_grad`] says this
/// pass does not use it.
pub(crate) fn grad_if_wanted(
    k: usize,
    f: impl FnOnce() -> Result<Tensor>,
) -> Result<Option<Tensor>> {
    if wants_grad(k) {
        f().map(Some)
    } else {
        Ok(None)
    }
}

/// Sets the inputs the current backward rule must produce, restoring the previous set on drop
/// (a rule may itself run a nested backward).
pub(crate) struct WantedGuard(u64);

impl WantedGuard {
    pub(crate) fn new(mask: u64) -> Self {
        WantedGuard(WANTED.with(|w| w.replace(mask)))
    }
}

impl Drop for WantedGuard {
    fn drop(&mut self) {
        WANTED.with(|w| w.set(self.0));
    }
}

/// Whether an op on `inputs` must be recorded: for backward, or for forward mode (an input
/// carries a tangent).
pub(crate) fn needs_grad(inputs: &[&Tensor]) -> bool {
    (grad_mode::is_recording() && inputs.iter().any(|t| t.requires_grad()))
        || forward_ad::any_tangent(inputs)
}

/// Record an op: make its node and attach it to `outputs`.
///
/// `saved` tensors are version-checked on unpack; those among `outputs` are stored without their
/// grad_fn (no cycle). `saves_scalar` marks ops that keep a non-tensor value, which like torch
/// makes a second backward through the freed node an error.
pub(crate) fn record<F>(
    name: &'static str,
    inputs: &[&Tensor],
    outputs: &[&Tensor],
    saved: &[&Tensor],
    saves_scalar: bool,
    backward: F,
) -> Result<()>
where
    F: Fn(&[Tensor], &[Tensor]) -> Result<Vec<Option<Tensor>>> + Send + Sync + 'static,
{
    record_node(
        Cow::Borrowed(name),
        inputs,
        outputs,
        saved,
        saves_scalar,
        Box::new(backward),
    )
}

/// An op's own forward rule: the inputs' tangents (None: no tangent) to the outputs'.
pub(crate) type JvpFn<'a> = &'a dyn Fn(&[Option<Tensor>]) -> Result<Vec<Option<Tensor>>>;

/// How forward mode gets an op's `J v` (see [`crate::graph::forward_ad`]).
#[derive(Clone, Copy)]
pub(crate) enum JvpRule<'a> {
    /// Transpose the backward rule (one small reverse pass): right for every op.
    Transpose,
    /// The Jacobian is diagonal: the backward rule applied to the tangent.
    Diagonal,
    /// The op's own forward rule: tangents of the inputs (None: no tangent) to the outputs'.
    Explicit(JvpFn<'a>),
}

/// [`record`] for an op with its own forward rule `jvp` (tangents of the inputs to those of
/// the outputs; it runs with tangent propagation suspended).
#[allow(clippy::too_many_arguments)]
pub(crate) fn record_with_jvp<F>(
    name: &'static str,
    inputs: &[&Tensor],
    outputs: &[&Tensor],
    saved: &[&Tensor],
    saves_scalar: bool,
    backward: F,
    jvp: JvpFn<'_>,
) -> Result<()>
where
    F: Fn(&[Tensor], &[Tensor]) -> Result<Vec<Option<Tensor>>> + Send + Sync + 'static,
{
    record_inputs(
        Cow::Borrowed(name),
        inputs,
        outputs,
        saved,
        saves_scalar,
        Box::new(backward),
        JvpRule::Explicit(jvp),
    )
}

/// The tangent of a one-input linear op (a view): `f` applied to the input's tangent.
pub(crate) fn map_tangent(
    t: &[Option<Tensor>],
    f: impl FnOnce(&Tensor) -> Result<Tensor>,
) -> Result<Vec<Option<Tensor>>> {
    Ok(vec![t[0].as_ref().map(f).transpose()?])
}

/// The sum of an op's tangent `parts` (each broadcasting to `out`), as `out`'s tangent.
pub(crate) fn sum_tangents(parts: Vec<Tensor>, out: &Tensor) -> Result<Option<Tensor>> {
    let mut acc: Option<Tensor> = None;
    for p in parts {
        acc = Some(match acc {
            None => p,
            Some(a) => a.add(&p)?,
        });
    }
    let Some(t) = acc else { return Ok(None) };
    let t = if t.dtype() != out.dtype() {
        t.to_dtype(out.dtype())?
    } else {
        t
    };
    Ok(Some(if t.shape() != out.shape() {
        t.expand(out.shape())?
    } else {
        t
    }))
}

/// [`record`] for an elementwise op of one input whose output has the input's shape: its
/// Jacobian is diagonal, so forward mode applies the backward rule to the tangent (`J v = Jᵀ v`)
/// instead of transposing it.
pub(crate) fn record_elementwise<F>(
    name: &'static str,
    inputs: &[&Tensor],
    outputs: &[&Tensor],
    saved: &[&Tensor],
    saves_scalar: bool,
    backward: F,
) -> Result<()>
where
    F: Fn(&[Tensor], &[Tensor]) -> Result<Vec<Option<Tensor>>> + Send + Sync + 'static,
{
    record_inputs(
        Cow::Borrowed(name),
        inputs,
        outputs,
        saved,
        saves_scalar,
        Box::new(backward),
        JvpRule::Diagonal,
    )
}

pub(crate) fn record_node(
    name: Cow<'static, str>,
    inputs: &[&Tensor],
    outputs: &[&Tensor],
    saved: &[&Tensor],
    saves_scalar: bool,
    backward: Box<BackwardFn>,
) -> Result<()> {
    record_inputs(
        name,
        inputs,
        outputs,
        saved,
        saves_scalar,
        backward,
        JvpRule::Transpose,
    )
}

fn record_inputs(
    name: Cow<'static, str>,
    inputs: &[&Tensor],
    outputs: &[&Tensor],
    saved: &[&Tensor],
    saves_scalar: bool,
    backward: Box<BackwardFn>,
    rule: JvpRule<'_>,
) -> Result<()> {
    let mut next_edges = EdgeList::new();
    let mut input_meta = MetaList::new();
    // Pushes, not collect(): SmallVec's FromIterator is generic and costs more than the one or
    // two elements most ops have.
    for t in inputs {
        next_edges.push(t.gradient_edge());
        input_meta.push(TensorMeta::of(t));
    }
    let tangents = forward_ad::tangents_of(inputs);
    record_parts(
        name,
        next_edges,
        input_meta,
        outputs,
        saved,
        saves_scalar,
        backward,
        tangents.map(|t| (t, rule)),
    )
}

/// Where a Python-number operand sits among an op's two inputs, and its dtype.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ScalarOperand {
    /// Input index of the number: 0 or 1.
    pub pos: usize,
    /// The number's dtype (Float64 or Int64), as torch's wrapped number has.
    pub dtype: DType,
}

/// Record an op of tensor `t` and a Python number `scalar`: like torch's wrapped-number
/// operand, the number is an input without an edge. `keeps_number`: the rule uses the number
/// (torch saves it, so a second backward through the freed node is an error).
pub(crate) fn record_with_scalar<F>(
    name: &'static str,
    t: &Tensor,
    scalar: ScalarOperand,
    out: &Tensor,
    saved: &[&Tensor],
    keeps_number: bool,
    backward: F,
) -> Result<()>
where
    F: Fn(&[Tensor], &[Tensor]) -> Result<Vec<Option<Tensor>>> + Send + Sync + 'static,
{
    let scalar_meta = TensorMeta {
        shape: MetaDims::new(),
        dtype: scalar.dtype,
        batch_level: 0,
    };
    let tangents = forward_ad::tangents_of(&[t]).map(|mut ts| {
        // The number's slot has no tangent.
        ts.insert(scalar.pos, None);
        ts
    });
    let (next_edges, input_meta): (EdgeList, MetaList) = if scalar.pos == 0 {
        (
            smallvec::smallvec![None, t.gradient_edge()],
            smallvec::smallvec![scalar_meta, TensorMeta::of(t)],
        )
    } else {
        (
            smallvec::smallvec![t.gradient_edge(), None],
            smallvec::smallvec![TensorMeta::of(t), scalar_meta],
        )
    };
    record_parts(
        Cow::Borrowed(name),
        next_edges,
        input_meta,
        &[out],
        saved,
        keeps_number,
        Box::new(backward),
        tangents.map(|t| (t, JvpRule::Transpose)),
    )
}

/// What node-creation hooks (`crate::graph::creation_hooks`, which installs it) do with a new
/// node, and how they are run; installed on first use so that recording imports nothing above.
pub(crate) struct CreationObserver {
    pub created: fn(&Arc<Node>) -> Result<()>,
    pub fire: fn() -> Result<()>,
}

static CREATION_OBSERVER: std::sync::OnceLock<CreationObserver> = std::sync::OnceLock::new();

pub(crate) fn set_creation_observer(o: CreationObserver) {
    let _ = CREATION_OBSERVER.set(o);
}

/// A node was made (queued for node-creation hooks, if any are installed).
pub(crate) fn node_created(node: &Arc<Node>) -> Result<()> {
    match CREATION_OBSERVER.get() {
        Some(o) => (o.created)(node),
        None => Ok(()),
    }
}

/// A recording path finished its node: run the node-creation hooks on the queued nodes.
pub(crate) fn fire_creation_hooks() -> Result<()> {
    match CREATION_OBSERVER.get() {
        Some(o) => (o.fire)(),
        None => Ok(()),
    }
}

/// How `record` gets `J v` from an op's backward rule (installed by `crate::autograd`, which
/// owns the engine that differentiates the rule).
pub type GenericJvp = fn(
    backward: &BackwardFn,
    input_meta: &[TensorMeta],
    outputs: &[&Tensor],
    saved: &[&Tensor],
    tangents: &[Option<Tensor>],
) -> Result<Vec<Option<Tensor>>>;

static GENERIC_JVP: std::sync::OnceLock<GenericJvp> = std::sync::OnceLock::new();

/// Install the rule-transposing `J v` (once; later calls are ignored).
pub fn set_generic_jvp(f: GenericJvp) {
    let _ = GENERIC_JVP.set(f);
}

/// The outputs' tangents of a recorded op (`J v`, from its backward rule through the installed
/// [`GenericJvp`], or as the op's [`JvpRule`] says), computed with tangent propagation
/// suspended.
fn output_tangents(
    backward: &BackwardFn,
    rule: JvpRule<'_>,
    input_meta: &[TensorMeta],
    outputs: &[&Tensor],
    saved: &[&Tensor],
    tangents: &[Option<Tensor>],
) -> Result<Vec<Option<Tensor>>> {
    let _quiet = forward_ad::Suspend::new();
    // Inside a backward node (forward over reverse) the engine's mask is for that node.
    let _all = WantedGuard::new(u64::MAX);
    if let JvpRule::Explicit(jvp) = rule {
        return jvp(tangents);
    }
    if let JvpRule::Diagonal = rule {
        if let ([Some(v)], [out]) = (tangents, outputs) {
            if v.shape() == out.shape() {
                // Detached unless the tangent must stay differentiable (the op records).
                let keep = grad_mode::is_recording();
                let saved: SmallVec<[Tensor; 2]> = saved
                    .iter()
                    .map(|t| if keep { (*t).clone() } else { t.detach() })
                    .collect();
                let mut g = backward(std::slice::from_ref(v), &saved)?;
                return Ok(vec![g.pop().flatten()]);
            }
        }
    }
    let f = GENERIC_JVP.get().ok_or_else(|| {
        Error::runtime("forward-mode AD: no dual level was entered through crate::autograd")
    })?;
    f(backward, input_meta, outputs, saved, tangents)
}

/// Make the node (when backward needs one) and set the outputs' tangents (when an input has
/// one: `tangents`, one per input).
#[allow(clippy::too_many_arguments)]
fn record_parts(
    name: Cow<'static, str>,
    next_edges: EdgeList,
    input_meta: MetaList,
    outputs: &[&Tensor],
    saved: &[&Tensor],
    saves_scalar: bool,
    backward: Box<BackwardFn>,
    tangents: Option<(Vec<Option<Tensor>>, JvpRule<'_>)>,
) -> Result<()> {
    // Only forward mode asked (no input requires grad, or grad mode is off): no node. Checked
    // only with tangents, so ordinary recording pays nothing for it.
    if tangents.is_some() && (!grad_mode::is_recording() || next_edges.iter().all(Option::is_none))
    {
        if let Some((tangents, rule)) = tangents {
            let out = output_tangents(&*backward, rule, &input_meta, outputs, saved, &tangents)?;
            set_output_tangents(outputs, out);
        }
        return Ok(());
    }
    let mut tensors = SmallVec::with_capacity(saved.len());
    for s in saved {
        let out_nr = outputs.iter().position(|o| o.same(s));
        tensors.push(SavedTensor::new(s, out_nr)?);
    }
    let has_saved = saves_scalar || !tensors.is_empty();
    let mut output_meta = OutputMetaList::new();
    for t in outputs {
        output_meta.push(TensorMeta::of(t));
    }
    let kind = NodeKind::Op {
        backward,
        saved: SpinLock::new(SavedState {
            tensors,
            has_saved,
            released: false,
        }),
    };
    let node = Node::new(name, next_edges, input_meta, output_meta, kind);
    let attach = |i: usize, o: &Tensor, node: Arc<Node>| {
        let mut m = o.meta();
        m.grad_fn = Some(node);
        m.output_nr = i;
    };
    if tangents.is_none() {
        // The usual case: the handle goes to the last output instead of a clone of it (an
        // atomic increment here and a decrement at the end, per recorded op).
        node_created(&node)?;
        let last = outputs.iter().rposition(|o| o.dtype().is_float());
        for (i, o) in outputs.iter().enumerate() {
            if Some(i) != last && o.dtype().is_float() {
                attach(i, o, node.clone());
            }
        }
        if let Some(i) = last {
            attach(i, outputs[i], node);
        }
        return fire_creation_hooks();
    }
    for (i, o) in outputs.iter().enumerate() {
        if o.dtype().is_float() {
            attach(i, o, node.clone());
        }
    }
    // With the node attached, the tangents computed from the outputs are differentiable by
    // reverse mode too (forward over reverse over ...).
    if let (
        Some((tangents, rule)),
        NodeKind::Op {
            backward,
            saved: st,
        },
    ) = (tangents, &node.kind)
    {
        let out = output_tangents(
            &**backward,
            rule,
            &node.input_meta,
            outputs,
            saved,
            &tangents,
        )?;
        set_output_tangents(outputs, out);
        // Saved outputs are kept as aliases: they carry the outputs' tangents.
        for s in st.lock().tensors.iter() {
            if let (Origin::OwnOutput(nr), SavedData::Tensor(alias)) = (&s.origin, &s.data) {
                if let Some(t) = outputs
                    .get(*nr as usize)
                    .and_then(|o| forward_ad::tangent(o))
                {
                    forward_ad::set_tangent(alias, t);
                }
            }
        }
    }
    node_created(&node)?;
    fire_creation_hooks()
}

fn set_output_tangents(outputs: &[&Tensor], tangents: Vec<Option<Tensor>>) {
    for (o, t) in outputs.iter().zip(tangents) {
        if let Some(t) = t {
            forward_ad::set_tangent(o, t);
        }
    }
}

/// Run a tensor hook on a gradient: the hook may replace it, with one of the same size.
pub(crate) fn run_hook(hook: &TensorHook, grad: &mut Option<Tensor>) -> Result<()> {
    let Some(g) = grad.as_ref() else {
        return Ok(());
    };
    if let Some(new) = hook(g)? {
        if new.shape() != g.shape() {
            return Err(Error::runtime("hook has changed the size of value"));
        }
        *grad = Some(new);
    }
    Ok(())
}

#[cfg(test)]
mod size_tests {
    use super::*;

    #[test]
    fn a_node_fits_mimallocs_384_byte_class() {
        // Every recorded op keeps one Node (plus its Arc counts) alive until backward: in a
        // million-op graph each byte here is a megabyte. 16 bytes of Arc header + 368 = 384.
        assert!(
            std::mem::size_of::<Node>() <= 368,
            "{}",
            std::mem::size_of::<Node>()
        );
    }
}
