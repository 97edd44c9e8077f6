//! The backward engine: count dependencies from the roots, then run nodes as they become ready,
//! on a rayon pool. Incoming gradients are summed in a fixed order (by producer), so results are
//! bitwise identical whatever the thread count or timing.

use std::collections::hash_map::{Entry, VacantEntry};
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use rustc_hash::FxHashMap;
use smallvec::SmallVec;

use super::accumulate_grad;
use crate::error::{Error, Result};
use crate::graph::node::{run_hook, Edge, Node, NodeKind, NodePostHook};
use crate::graph::saved_hooks::{self, InheritGuard, SavedTensorHooks};
use crate::graph::{creation_hooks, forward_ad};
use crate::parallel::{get_num_threads, pool};
use crate::tensor::grad_mode::{self, GradModeGuard};
use crate::tensor::shape::{fmt_shape, is_expandable_to};
use crate::tensor::spin::SpinLock;
use crate::tensor::Tensor;

/// Gradients smaller than this run inline on the current worker: a task hand-off costs more
/// than the node itself.
const SPAWN_MIN_ELEMENTS: usize = 16 * 1024;

/// A ready node in a queue: highest sequence number first, and among equals (leaf
/// accumulators) the one made ready first, as torch's ready queue pops them.
type Ready1 = (u64, std::cmp::Reverse<usize>);

/// Nodes made ready by one node's gradients.
type Ready = SmallVec<[usize; 4]>;

/// The gradients arriving at a node, one per forward output (most ops have one).
type Grads = SmallVec<[Option<Tensor>; 2]>;

/// Key that fixes the summation order of gradients arriving at one slot: (producer, edge).
type Key = (u64, usize);

/// Contributions to one gradient slot, summed in key order once the node is ready.
type Slot = SmallVec<[(Key, Tensor); 1]>;

struct NodeState {
    node: Arc<Node>,
    /// Index into `states` of each next edge's node (None when the edge is absent or unused).
    children: Children,
    deps: AtomicUsize,
    /// Spun on, not parked: held only for a push or a take, and a parking mutex makes its
    /// release a second locked instruction on every node of every pass.
    buffer: SpinLock<SmallVec<[Slot; 1]>>,
    execute: bool,
    /// (slot, result index) pairs captured for `grad()`.
    captures: SmallVec<[(usize, usize); 1]>,
}

/// One backward pass over a graph.
struct GraphTask {
    states: Vec<NodeState>,
    keep_graph: bool,
    create_graph: bool,
    accumulate: bool,
    results: Mutex<Vec<Option<Tensor>>>,
    failed: AtomicBool,
    error: Mutex<Option<Error>>,
    /// Heavy ready nodes offered to other threads (by sequence number, highest first). Whoever
    /// is free takes them, the calling thread included, so the pool can have one worker fewer
    /// than the configured threads without leaving the caller idle while work queues up.
    offered: Mutex<BinaryHeap<Ready1>>,
    /// Jobs spawned on the pool that have not finished; the caller waits for them itself (not
    /// in rayon's scope join), so it can keep taking offered nodes and answer Ctrl-C.
    pending: AtomicUsize,
    /// The thread that called backward: workers wake it when they offer a node or finish.
    caller: std::thread::Thread,
    /// The caller's saved-tensor hooks, active on the workers too.
    saved_hooks: Option<Arc<SavedTensorHooks>>,
    /// Distinguishes passes, for hooks that gather gradients across one pass.
    id: u64,
    /// Node address to index into `states`.
    index: NodeIndex,
    /// Run on the caller's thread once the pass has succeeded ([`queue_callback`]).
    callbacks: Mutex<Vec<Callback>>,
    /// Runs every node reachable from the roots (`backward()` without `inputs`).
    runs_all: bool,
    /// The caller computes a tangent (forward mode): the pass's ops propagate none, on the
    /// workers too.
    fw_suspended: bool,
    /// The caller's node-creation hooks, active on the workers too.
    creation_hooks: Vec<creation_hooks::NodeCreationHook>,
}

thread_local! {
    static MULTITHREADING: std::cell::Cell<bool> = const { std::cell::Cell::new(true) };
}

/// Whether backward passes started on this thread may use the pool (torch's
/// `set_multithreading_enabled`, thread-local): off, a pass runs on the calling thread alone.
pub fn set_multithreading_enabled(enabled: bool) {
    MULTITHREADING.set(enabled);
}

/// See [`set_multithreading_enabled`].
pub fn is_multithreading_enabled() -> bool {
    MULTITHREADING.get()
}

/// A function run once a backward pass has completed.
pub type Callback = Box<dyn FnOnce() -> Result<()> + Send>;

/// Run `f` after the backward pass running on this thread completes successfully (torch's
/// `autograd.graph.queue_callback`, what data-parallel training uses to wait for its
/// all-reduces). Callbacks run in the order queued, on the thread that called backward; a
/// callback may queue another. An error outside backward.
pub fn queue_callback(f: Callback) -> Result<()> {
    with_current(|t| t.callbacks.lock().push(f)).ok_or_else(|| {
        Error::runtime("Final callbacks can only be installed during backward pass.")
    })
}

static NEXT_TASK_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

thread_local! {
    /// The pass this thread is running nodes of (null outside backward).
    static CURRENT: std::cell::Cell<*const GraphTask> = const { std::cell::Cell::new(std::ptr::null()) };
}

/// Marks this thread as running `task`'s nodes; restores the outer pass (a backward called
/// from a hook) when dropped.
struct CurrentTask(*const GraphTask);

impl CurrentTask {
    fn enter(task: &GraphTask) -> Self {
        CurrentTask(CURRENT.replace(task))
    }
}

impl Drop for CurrentTask {
    fn drop(&mut self) {
        CURRENT.set(self.0);
    }
}

/// Run `f` on the pass this thread is running, if any.
fn with_current<R>(f: impl FnOnce(&GraphTask) -> R) -> Option<R> {
    let p = CURRENT.get();
    // SAFETY: CURRENT holds a task only while a `CurrentTask` guard made from a live
    // `&GraphTask` is alive on this thread (inside `drain`), and the task outlives `drain`.
    (!p.is_null()).then(|| f(unsafe { &*p }))
}

/// The id of the backward pass whose node or hook is running on this thread (torch's
/// `_current_graph_task_id`), `None` outside backward.
pub fn current_graph_task_id() -> Option<u64> {
    with_current(|t| t.id)
}

/// Whether a backward run from inside this pass (as reentrant checkpointing does) reaches
/// what it must: true outside backward and in a `backward()` without `inputs`, false in
/// `grad()` and `backward(inputs=...)`, which run only part of the graph (torch's
/// `_is_checkpoint_valid`).
pub fn is_checkpoint_valid() -> bool {
    with_current(|t| t.runs_all).unwrap_or(true)
}

/// Whether the running backward pass will run `node` (torch's `_will_engine_execute_node`):
/// it is reachable from the roots and, when the pass has targets, on the way to one. An error
/// outside backward.
pub fn will_engine_execute_node(node: &Arc<Node>) -> Result<bool> {
    with_current(|t| {
        t.index
            .get(&(Arc::as_ptr(node) as usize))
            .is_some_and(|&i| {
                let st = &t.states[i];
                st.execute || !st.captures.is_empty()
            })
    })
    .ok_or_else(|| {
        Error::runtime("_will_engine_execute_node should only be called during the backward pass")
    })
}

/// What a pass computes besides running the graph.
pub(crate) enum Targets {
    /// Accumulate into every reachable leaf (`backward()` without `inputs`).
    AllLeaves,
    /// Accumulate only through these edges (`backward(inputs=...)`).
    Only(Vec<Edge>),
    /// Capture the gradients arriving at these edges and return them (`grad()`).
    Capture(Vec<Option<Edge>>),
}

// ----- graph discovery ------------------------------------------------------------------------

/// Run backward from `roots` (edge and seed gradient each).
pub(crate) fn execute(
    roots: Vec<(Edge, Tensor)>,
    keep_graph: bool,
    create_graph: bool,
    targets: Targets,
) -> Result<Vec<Option<Tensor>>> {
    if roots.is_empty() {
        return Ok(match &targets {
            Targets::Capture(c) => vec![None; c.len()],
            _ => Vec::new(),
        });
    }
    // The caller asks between nodes whether to stop (Ctrl-C from Python): see crate::interrupt.
    let _interruptible = crate::interrupt::Started::new();
    let task = build(&roots, keep_graph, create_graph, targets)?;
    let index = &task.index;
    // Seed the roots in a fixed order (after every producer: key u64::MAX). Only roots hold
    // gradients now, so only they can be ready.
    let mut ready = Vec::with_capacity(roots.len());
    for (i, (edge, grad)) in roots.into_iter().enumerate() {
        let Some(&idx) = index.get(&(Arc::as_ptr(&edge.node) as usize)) else {
            continue;
        };
        task.states[idx].buffer.lock()[edge.input_nr].push(((u64::MAX, i), grad));
        if task.states[idx].deps.load(Ordering::Relaxed) == 0 && !ready.contains(&idx) {
            ready.push(idx);
        }
    }
    run(&task, ready)?;
    if let Some(e) = task.error.lock().take() {
        return Err(e);
    }
    // Callbacks may queue more callbacks, so the task stays current while they run.
    {
        let _current = CurrentTask::enter(&task);
        loop {
            let batch = std::mem::take(&mut *task.callbacks.lock());
            if batch.is_empty() {
                break;
            }
            for f in batch {
                f()?;
            }
        }
    }
    let results = std::mem::take(&mut *task.results.lock());
    Ok(results)
}

/// Keyed by node address (as an integer, so the task can be shared with workers).
type NodeIndex = FxHashMap<usize, usize>;

thread_local! {
    /// Nodes in the last graph this thread ran backward through (a capacity hint for the next).
    static LAST_GRAPH_SIZE: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Per next edge of a node: the index of the node it leads to (most nodes have one or two).
type Children = SmallVec<[Option<usize>; 2]>;

/// Give a newly found node the next index and queue it for the DFS (its edges from the first).
fn add_node(
    node: Arc<Node>,
    slot: VacantEntry<'_, usize, usize>,
    nodes: &mut Vec<Arc<Node>>,
    children: &mut Vec<Children>,
    stack: &mut Vec<(usize, usize)>,
) -> usize {
    let i = nodes.len();
    slot.insert(i);
    children.push(smallvec::smallvec![None; node.next_edges.len()]);
    nodes.push(node);
    stack.push((i, 0));
    i
}

fn build(
    roots: &[(Edge, Tensor)],
    keep_graph: bool,
    create_graph: bool,
    targets: Targets,
) -> Result<GraphTask> {
    // Iterative DFS: post-order so children come before parents. Each edge is looked up once,
    // and where it leads is recorded on the way.
    // Sized like this thread's previous graph: a training loop builds the same graph every
    // step, and growing the index from empty rehashed it a dozen times per backward.
    let hint = LAST_GRAPH_SIZE.get().min(1 << 17);
    let mut index = NodeIndex::with_capacity_and_hasher(hint, Default::default());
    let mut nodes: Vec<Arc<Node>> = Vec::with_capacity(hint);
    let mut children: Vec<Children> = Vec::with_capacity(hint);
    let mut post: Vec<usize> = Vec::with_capacity(hint);
    let mut stack: Vec<(usize, usize)> = Vec::new();
    for (edge, _) in roots {
        if let Entry::Vacant(v) = index.entry(Arc::as_ptr(&edge.node) as usize) {
            add_node(edge.node.clone(), v, &mut nodes, &mut children, &mut stack);
        }
        while let Some((n, next)) = stack.pop() {
            crate::interrupt::poll()?;
            let Some(slot) = nodes[n].next_edges.get(next) else {
                post.push(n);
                continue;
            };
            stack.push((n, next + 1));
            let Some(e) = slot else { continue };
            let c = match index.entry(Arc::as_ptr(&e.node) as usize) {
                Entry::Occupied(o) => *o.get(),
                Entry::Vacant(v) => {
                    add_node(e.node.clone(), v, &mut nodes, &mut children, &mut stack)
                }
            };
            children[n][next] = Some(c);
        }
    }

    let n = nodes.len();
    LAST_GRAPH_SIZE.set(n);
    let mut is_target = vec![false; n];
    let mut captures: Vec<SmallVec<[(usize, usize); 1]>> = vec![SmallVec::new(); n];
    let (restrict, accumulate, n_results) = match &targets {
        Targets::AllLeaves => (false, true, 0),
        Targets::Only(edges) => {
            for e in edges {
                if let Some(&i) = index.get(&(Arc::as_ptr(&e.node) as usize)) {
                    is_target[i] = true;
                }
            }
            (true, true, 0)
        }
        Targets::Capture(edges) => {
            for (r, e) in edges.iter().enumerate() {
                if let Some(e) = e {
                    if let Some(&i) = index.get(&(Arc::as_ptr(&e.node) as usize)) {
                        captures[i].push((e.input_nr, r));
                    }
                }
            }
            (true, false, edges.len())
        }
    };
    let mut useful = vec![!restrict; n];
    let mut execute = vec![!restrict; n];
    if restrict {
        for &i in &post {
            let child_useful = children[i].iter().flatten().any(|&c| useful[c]);
            execute[i] = is_target[i] || child_useful;
            useful[i] = execute[i] || !captures[i].is_empty();
        }
    }
    // Counted in plain integers: nothing else sees them yet, and an atomic add per edge was a
    // locked instruction each.
    let mut deps = vec![0usize; n];
    for i in 0..n {
        if execute[i] {
            for &c in children[i].iter().flatten() {
                if useful[c] {
                    deps[c] += 1;
                }
            }
        }
    }
    let states = nodes
        .into_iter()
        .zip(children)
        .zip(deps)
        .enumerate()
        .map(|(i, ((node, mut ch), deps))| {
            for c in ch.iter_mut() {
                if c.is_some_and(|c| !useful[c]) || !execute[i] {
                    *c = None;
                }
            }
            let slots = node.num_outputs().max(1);
            NodeState {
                node,
                children: ch,
                deps: AtomicUsize::new(deps),
                buffer: SpinLock::new(smallvec::smallvec![SmallVec::new(); slots]),
                execute: execute[i],
                captures: std::mem::take(&mut captures[i]),
            }
        })
        .collect();
    let task = GraphTask {
        states,
        keep_graph,
        create_graph,
        accumulate,
        results: Mutex::new(vec![None; n_results]),
        failed: AtomicBool::new(false),
        error: Mutex::new(None),
        offered: Mutex::new(BinaryHeap::new()),
        pending: AtomicUsize::new(0),
        caller: std::thread::current(),
        saved_hooks: saved_hooks::current(),
        id: NEXT_TASK_ID.fetch_add(1, Ordering::Relaxed),
        index,
        callbacks: Mutex::new(Vec::new()),
        runs_all: !restrict,
        fw_suspended: forward_ad::is_suspended(),
        creation_hooks: creation_hooks::current(),
    };
    Ok(task)
}

// ----- scheduling -----------------------------------------------------------------------------

fn run(task: &GraphTask, ready: Vec<usize>) -> Result<()> {
    if get_num_threads() <= 1 || !is_multithreading_enabled() {
        let _mode = GradModeGuard::new(task.create_graph);
        drain(task, ready, None, true);
        return Ok(());
    }
    let pool = pool()?;
    let create_graph = task.create_graph;
    // in_place_scope: the calling thread works too, so a chain of tiny nodes never hops threads.
    pool.in_place_scope(|scope| {
        let _mode = GradModeGuard::new(create_graph);
        drain(task, ready, Some(scope), true);
    });
    Ok(())
}

/// Stop the pass with `e` (the first error wins); threads stop taking nodes, and nodes already
/// running finish, so none is left half-run.
fn fail(task: &GraphTask, e: Error) {
    let mut slot = task.error.lock();
    if slot.is_none() {
        *slot = Some(e);
    }
    task.failed.store(true, Ordering::Relaxed);
}

/// Run ready nodes, highest sequence number first (most recently created), continuing inline
/// with newly ready nodes and offering heavy ones to other threads; then take offered nodes
/// until none are left. The `caller` (the thread that called backward) also waits for the
/// pool's jobs here, checking for interrupts while it waits.
fn drain<'s>(
    task: &'s GraphTask,
    ready: Vec<usize>,
    scope: Option<&rayon::Scope<'s>>,
    caller: bool,
) {
    let _current = CurrentTask::enter(task);
    let mut heap: BinaryHeap<Ready1> = ready
        .into_iter()
        .map(|i| (task.states[i].node.sequence_nr(), std::cmp::Reverse(i)))
        .collect();
    let mut next = heap.pop().map(|(_, i)| i.0);
    loop {
        if caller {
            if let Err(e) = crate::interrupt::poll() {
                return fail(task, e);
            }
        }
        // The offered lock is released here, before any wait below: a worker offering a node
        // needs it to wake this thread.
        let offered = if next.is_none() && scope.is_some() {
            task.offered.lock().pop()
        } else {
            None
        };
        let i = match next.take() {
            Some(i) => i,
            None if scope.is_some() => match offered {
                Some((_, i)) => i.0,
                None if caller && task.pending.load(Ordering::Acquire) > 0 => {
                    // Workers still run nodes that may offer more: wait for a wake-up (a
                    // node offered, a job done) or the next interrupt check.
                    std::thread::park_timeout(crate::interrupt::INTERVAL);
                    if let Err(e) = crate::interrupt::poll_now() {
                        return fail(task, e);
                    }
                    continue;
                }
                None => return,
            },
            None => return,
        };
        if task.failed.load(Ordering::Relaxed) {
            return;
        }
        match evaluate(task, i) {
            Ok(newly_ready) => {
                // A chain's only successor runs next without a trip through the heap: nothing
                // else is waiting, so the order is the same.
                if newly_ready.len() == 1 && heap.is_empty() {
                    next = Some(newly_ready[0]);
                    continue;
                }
                for c in newly_ready {
                    let st = &task.states[c];
                    let heavy =
                        st.node.output_meta.first().is_some_and(|m| {
                            m.shape.iter().product::<usize>() >= SPAWN_MIN_ELEMENTS
                        });
                    let seq = st.node.sequence_nr();
                    match scope {
                        Some(s) if heavy && !heap.is_empty() => {
                            task.offered.lock().push((seq, std::cmp::Reverse(c)));
                            task.pending.fetch_add(1, Ordering::AcqRel);
                            task.caller.unpark();
                            let create_graph = task.create_graph;
                            // A job that finds nothing left (the caller took it) returns.
                            s.spawn(move |s2| {
                                // Counted done even if a node panics, or the caller would wait
                                // for it forever (the scope re-raises the panic afterwards).
                                let _done = JobDone(task);
                                // Workers do not inherit the caller's thread-locals.
                                let _mode = GradModeGuard::new(create_graph);
                                let _hooks = InheritGuard::new(task.saved_hooks.clone());
                                let _fw = task.fw_suspended.then(forward_ad::Suspend::new);
                                let _creation =
                                    creation_hooks::InheritHooks::new(&task.creation_hooks);
                                drain(task, Vec::new(), Some(s2), false);
                            });
                        }
                        _ => heap.push((seq, std::cmp::Reverse(c))),
                    }
                }
            }
            Err(e) => return fail(task, e),
        }
        next = heap.pop().map(|(_, i)| i.0);
    }
}

/// Marks a spawned job finished when dropped, and wakes the caller waiting for it.
struct JobDone<'a>(&'a GraphTask);

impl Drop for JobDone<'_> {
    fn drop(&mut self) {
        self.0.pending.fetch_sub(1, Ordering::AcqRel);
        self.0.caller.unpark();
    }
}

/// Sum the contributions to each slot in key order.
fn sum_slots(slots: SmallVec<[Slot; 1]>) -> Result<Grads> {
    // A plain loop: most slots hold one part, and an iterator of Results collected into the
    // SmallVec cost ~120 instructions a node on the tiny_chain benchmark.
    let mut out = Grads::with_capacity(slots.len());
    for mut parts in slots {
        let g = match parts.len() {
            0 => None,
            1 => parts.pop().map(|(_, t)| t),
            _ => Some(sum_parts_in_order(&mut parts)?),
        };
        out.push(g);
    }
    Ok(out)
}

/// The sum of two or more parts, added in key order.
fn sum_parts_in_order(parts: &mut Slot) -> Result<Tensor> {
    parts.sort_by_key(|(k, _)| *k);
    // Moved out, not cloned: a part nobody else holds can take the sum in place.
    let ts: SmallVec<[Tensor; 4]> = parts.drain(..).map(|(_, t)| t).collect();
    // Three or more same-shape parts without a graph: one pass instead of chained adds.
    // (Not with tangents: the one-pass kernel records nothing, so forward mode would lose them.)
    if ts.len() > 2 && !grad_mode::is_recording() && !forward_ad::any_tangent_in(&ts) {
        if let Some(sum) = crate::ops::elementwise::sum_parts(&ts)? {
            return Ok(sum);
        }
    }
    let mut acc = ts[0].clone();
    for t in &ts[1..] {
        acc = acc.add(t)?;
    }
    Ok(acc)
}

/// Run one node: hooks, captures, its backward, then hand gradients to its children.
/// Returns the children that became ready.
fn evaluate(task: &GraphTask, i: usize) -> Result<Ready> {
    let st = &task.states[i];
    let node = &st.node;
    let slots = std::mem::take(&mut *st.buffer.lock());
    let mut grads = sum_slots(slots)?;

    run_tensor_pre_hooks(node, &mut grads)?;
    if !st.captures.is_empty() {
        let mut res = task.results.lock();
        for &(slot, r) in &st.captures {
            res[r] = match grads.get(slot).cloned().flatten() {
                // Rules may pass one value broadcast on (`keep_uniform`) where torch's would
                // have materialised it: what grad() returns is the caller's to write into.
                Some(g) if !task.create_graph && g.layout().has_broadcast_dims() => {
                    Some(g.contiguous()?)
                }
                g => g,
            };
        }
    }
    if !st.execute {
        return Ok(Ready::new());
    }

    let (node_pre, post) = node.node_hooks();
    for h in &node_pre {
        if let Some(new) = h(&grads)? {
            check_hook_arity(new.len(), grads.len())?;
            grads = Grads::from_vec(new);
        }
    }
    let given = (!post.is_empty()).then(|| grads.to_vec());
    // Post hooks run before the saved tensors are freed (as torch's do), so only a node
    // without them has its saved tensors freed as its rule runs.
    let lend = !task.keep_graph && post.is_empty();
    let (outputs, freed) = match apply_node(task, node, &st.children, grads, lend) {
        Ok(o) => o,
        Err(e) => {
            if grad_mode::is_anomaly_enabled() {
                grad_mode::report_anomaly(node.name(), node.trace.as_deref().map(String::as_str));
            }
            return Err(e);
        }
    };
    let outputs = match given {
        Some(given) => run_post_hooks(node, &post, outputs, &given)?,
        None => outputs,
    };
    if !task.keep_graph && !freed {
        node.release_saved();
    }
    if grad_mode::is_anomaly_enabled() && grad_mode::is_anomaly_check_nan_enabled() {
        for (k, g) in outputs.iter().enumerate() {
            if let Some(g) = g {
                if g.dtype().is_float() && crate::ops::reduce::has_nan(g)? {
                    grad_mode::report_anomaly(
                        node.name(),
                        node.trace.as_deref().map(String::as_str),
                    );
                    return Err(Error::runtime(format!(
                        "Function '{}' returned nan values in its {k}th output.",
                        node.name()
                    )));
                }
            }
        }
    }

    let mut newly_ready = Ready::new();
    for (k, g) in outputs.into_iter().enumerate() {
        let Some(c) = st.children.get(k).copied().flatten() else {
            continue;
        };
        let child = &task.states[c];
        if let Some(g) = g {
            let input_nr = node.next_edges[k].as_ref().map_or(0, |e| e.input_nr);
            child.buffer.lock()[input_nr].push(((node.sequence_nr(), k), g));
        }
        if child.deps.fetch_sub(1, Ordering::AcqRel) == 1 {
            newly_ready.push(c);
        }
    }
    Ok(newly_ready)
}

fn check_hook_arity(got: usize, expected: usize) -> Result<()> {
    if got != expected {
        return Err(Error::runtime(format!(
            "hook has returned an incorrect number of values (got {got}, but expected {expected})"
        )));
    }
    Ok(())
}

/// Node post-hooks see what the node computed and what it was given, and may replace the former.
fn run_post_hooks(
    node: &Node,
    post: &[NodePostHook],
    mut outputs: Vec<Option<Tensor>>,
    given: &[Option<Tensor>],
) -> Result<Vec<Option<Tensor>>> {
    for h in post {
        if let Some(new) = h(&outputs, given)? {
            check_hook_arity(new.len(), outputs.len())?;
            outputs = validate_outputs(node, new)?;
        }
    }
    Ok(outputs)
}

fn run_tensor_pre_hooks(node: &Arc<Node>, grads: &mut [Option<Tensor>]) -> Result<()> {
    if let NodeKind::Accumulate { .. } = &node.kind {
        return accumulate_grad::run_leaf_hooks(node, grads);
    }
    if !node.may_have_hooks() {
        return Ok(());
    }
    let (pre, retain) = match node.hooks.lock().as_ref() {
        None => return Ok(()),
        Some(h) => (
            h.pre
                .iter()
                .map(|(nr, _, f)| (*nr, f.clone()))
                .collect::<Vec<_>>(),
            h.retain
                .iter()
                .map(|(nr, w)| (*nr, w.clone()))
                .collect::<Vec<_>>(),
        ),
    };
    for (nr, h) in pre {
        if let Some(g) = grads.get_mut(nr) {
            run_hook(&h, g)?;
        }
    }
    // retains_grad runs after every other tensor hook (torch's documented order).
    for (nr, w) in retain {
        let (Some(t), Some(Some(g))) = (w.upgrade(), grads.get(nr)) else {
            continue;
        };
        let t = Tensor(t);
        let mut m = t.meta();
        m.grad = Some(match m.grad.take() {
            None => g.copy_detached()?,
            Some(old) => old.add(g)?.detach(),
        });
    }
    Ok(())
}

/// Run a node's backward, its outputs checked; with `lend`, an op's saved tensors are freed
/// as its rule runs (given back if it fails), and the flag returned says whether that happened.
fn apply_node(
    task: &GraphTask,
    node: &Arc<Node>,
    children: &[Option<usize>],
    grads: Grads,
    lend: bool,
) -> Result<(Vec<Option<Tensor>>, bool)> {
    let raw = match &node.kind {
        NodeKind::Accumulate { .. } => {
            if task.accumulate {
                accumulate_grad::apply(
                    node,
                    grads.into_iter().next().flatten(),
                    task.create_graph,
                )?;
            }
            return Ok((Vec::new(), false));
        }
        NodeKind::Op { backward, .. } => {
            if grads.iter().all(Option::is_none) {
                return Ok((vec![None; node.next_edges.len()], false));
            }
            let grads = materialize(node, grads);
            // Inputs whose gradient nothing in this pass receives need not be computed.
            let wanted = children.iter().enumerate().fold(0u64, |m, (k, c)| {
                if c.is_some() && k < 64 {
                    m | 1 << k
                } else {
                    m
                }
            });
            let _wanted = crate::graph::node::WantedGuard::new(wanted);
            let lent = if lend { node.lend_saved()? } else { None };
            if let Some(mut lent) = lent {
                let raw = lent.unpack().and_then(|saved| backward(&grads, saved));
                return match raw.and_then(|raw| validate_outputs(node, raw)) {
                    Ok(out) => Ok((out, true)),
                    Err(e) => {
                        lent.give_back();
                        Err(e)
                    }
                };
            }
            let saved = node.unpack_saved()?;
            backward(&grads, &saved)?
        }
        NodeKind::Custom(c) => {
            let grads = if c.materialize_grads() {
                materialize(node, grads).into_iter().map(Some).collect()
            } else {
                grads.into_vec()
            };
            c.apply(node, grads)?
        }
    };
    Ok((validate_outputs(node, raw)?, false))
}

fn materialize(node: &Node, grads: Grads) -> SmallVec<[Tensor; 2]> {
    grads
        .into_iter()
        .enumerate()
        .map(|(k, g)| {
            g.unwrap_or_else(|| {
                Tensor::zeros(&node.output_meta[k].shape, node.output_meta[k].dtype)
            })
        })
        .collect()
}

/// Check a node's gradients against its inputs: count, shape (summing broadcast gradients back
/// to the input's shape, the one place broadcasting is undone) and dtype (cast).
fn validate_outputs(node: &Node, mut grads: Vec<Option<Tensor>>) -> Result<Vec<Option<Tensor>>> {
    let n = node.next_edges.len();
    if grads.len() != n {
        return Err(Error::runtime(format!(
            "function {} returned an incorrect number of gradients (expected {n}, got {})",
            node.name(),
            grads.len()
        )));
    }
    for (k, slot) in grads.iter_mut().enumerate() {
        if node.next_edges[k].is_none() {
            *slot = None;
            continue;
        }
        let Some(g) = slot.take() else { continue };
        let meta = &node.input_meta[k];
        let mut g = g;
        if g.shape() != meta.shape.as_slice() {
            if !is_expandable_to(&meta.shape, g.shape()) {
                return Err(Error::runtime(format!(
                    "Function {} returned an invalid gradient at index {k} - got {} but expected shape compatible with {}",
                    node.name(),
                    fmt_shape(g.shape()),
                    fmt_shape(&meta.shape)
                )));
            }
            g = g.sum_to(&meta.shape)?;
        }
        if g.dtype() != meta.dtype {
            g = g.to_dtype(meta.dtype)?;
        }
        if g.is_batched() {
            // Batches the node's forward saw its input broadcast over (an unbatched tensor
            // used inside vmap) are summed out; later ones (batched cotangents) stay.
            let seen = node
                .output_meta
                .iter()
                .map(|m| m.batch_level)
                .max()
                .unwrap_or(0);
            g = crate::ops::batching::sum_out_levels(g, meta.batch_level, seen)?;
        }
        *slot = Some(g);
    }
    Ok(grads)
}
