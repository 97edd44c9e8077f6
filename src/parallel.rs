//! The thread pool, the thread count and fork handling, below everything that runs in
//! parallel (kernels and the backward engine alike), as `at::parallel_for` sits below autograd.
//!
//! Fork-join for one kernel: the calling thread and helpers from ferrograd's pool claim the
//! blocks of one operation from a shared counter.
//!
//! The caller starts on the blocks at once and helpers take whatever is left when they arrive,
//! so a caller never waits for a helper that is busy or asleep, only for blocks already being
//! computed.
//!
//! Helpers linger: after their last block they keep polling for the next operation (and run
//! any rayon work that turns up) for `LINGER` before giving their worker back to the pool.
//! Waking a sleeping thread costs tens of microseconds on a virtual machine, as much as a
//! 192x192 matmul takes; with helpers woken per product, an op-by-op loop from Python ran most
//! products on one thread (192^3 in a loop: 125 µs median on 2 threads vs 66 µs best case).
//! OpenMP runtimes, torch's included, spin between parallel regions for the same reason.

use std::any::Any;
use std::cell::Cell;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use std::time::{Duration, Instant};

use crate::error::{Error, Result};
pub(crate) use crate::tensor::spin::SpinLock;

/// How long an idle helper keeps polling for the next operation before its worker sleeps.
const LINGER: Duration = Duration::from_micros(500);

/// Polls of a tight spin (a `pause` each, ~20 ns) between yields of the core.
const SPIN_POLLS: u32 = 64;

/// How long a caller spins for blocks still running elsewhere before it parks.
const CALLER_SPIN: Duration = Duration::from_micros(200);

// ----- the pool and the thread count -----------------------------------------------------
// A spin lock, not a parking RwLock: the fork handlers must be able to reset it in the child.
static POOL: SpinLock<Option<Arc<rayon::ThreadPool>>> = SpinLock::new(None);
static NUM_THREADS: AtomicUsize = AtomicUsize::new(0);

fn default_threads() -> usize {
    ["FERROGRAD_NUM_THREADS", "RAYON_NUM_THREADS"]
        .iter()
        .find_map(|k| {
            std::env::var(k)
                .ok()
                .and_then(|v| v.trim().parse::<usize>().ok())
                .filter(|&n| n > 0)
                .map(|n| n.min(MAX_THREADS))
        })
        .unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        })
}

/// Threads used by backward and parallel kernels (`FERROGRAD_NUM_THREADS`, then
/// `RAYON_NUM_THREADS`, then the number of cores).
pub fn get_num_threads() -> usize {
    match NUM_THREADS.load(Ordering::Relaxed) {
        0 => {
            let n = default_threads();
            NUM_THREADS.store(n, Ordering::Relaxed);
            n
        }
        n => n,
    }
}

/// Most threads ferrograd will start. torch accepts any positive count and OpenMP starts them
/// lazily; a pool is started at once, and 2^31 threads would never finish starting.
pub const MAX_THREADS: usize = 1024;

/// Set the number of threads (at most [`MAX_THREADS`]; larger requests are clamped to it);
/// 0 is an error.
pub fn set_num_threads(n: usize) -> Result<()> {
    if n == 0 {
        return Err(Error::runtime("set_num_threads expects a positive integer"));
    }
    NUM_THREADS.store(n.min(MAX_THREADS), Ordering::Relaxed);
    *POOL.lock() = None;
    Ok(())
}

/// A process forked from this one (multiprocessing, DataLoader workers) inherits the pool but
/// none of its threads: work queued there would wait forever. The child starts a new pool.
#[cfg(unix)]
fn register_fork_handlers() {
    extern "C" fn prepare() {
        // Held across fork, so the child cannot inherit either lock mid-update.
        POOL.lock_for_fork();
        before_fork();
    }
    extern "C" fn parent() {
        after_fork_in_parent();
        POOL.unlock_after_fork();
    }
    extern "C" fn child() {
        after_fork_in_child();
        POOL.unlock_after_fork();
        // Dropping the old pool would signal threads that are not here; it is leaked instead.
        std::mem::forget(POOL.lock().take());
    }
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: the handlers only touch this crate's statics. A failure (ENOMEM) leaves forked
        // children as they were before, which is not worth failing pool creation for.
        unsafe { libc::pthread_atfork(Some(prepare), Some(parent), Some(child)) };
    });
}

/// The pool of helpers for `get_num_threads()` threads, built on first use: one worker fewer
/// than the threads (at least one), because the calling thread always works too (backward's
/// drain, a kernel's first blocks). A worker per thread put three busy threads on two cores.
pub fn pool() -> Result<Arc<rayon::ThreadPool>> {
    let n = get_num_threads().saturating_sub(1).max(1);
    if let Some(p) = POOL.lock().as_ref() {
        if p.current_num_threads() == n {
            return Ok(p.clone());
        }
    }
    #[cfg(unix)]
    register_fork_handlers();
    let mut w = POOL.lock();
    if let Some(p) = w.as_ref() {
        if p.current_num_threads() == n {
            return Ok(p.clone());
        }
    }
    let p = Arc::new(
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .thread_name(|i| format!("ferrograd-{i}"))
            .build()
            .map_err(|e| Error::runtime(format!("could not start {n} threads: {e}")))?,
    );
    *w = Some(p.clone());
    Ok(p)
}

// ----- fork-join for one kernel -------------------------------------------------------------

/// State shared by the caller and the helpers of one [`share_work`] call.
struct Shared {
    next: AtomicUsize,
    done: AtomicUsize,
    count: usize,
    /// The block function; only called for a claimed index below `count`, and the caller does
    /// not return before every claimed block is done, so it is alive whenever it is called.
    job: *const (dyn Fn(usize) + Sync + 'static),
    waiter: std::thread::Thread,
    panic: Mutex<Option<Box<dyn Any + Send>>>,
}

// SAFETY: `job` is Sync and only dereferenced under the protocol described on the field.
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

impl Shared {
    /// Claim and run blocks until none are left.
    fn work(&self) {
        loop {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            if i >= self.count {
                return;
            }
            // SAFETY: i < count was claimed, so the caller is still waiting (see `job`).
            let r = catch_unwind(AssertUnwindSafe(|| unsafe { (*self.job)(i) }));
            if let Err(e) = r {
                let mut slot = self.panic.lock().unwrap_or_else(PoisonError::into_inner);
                slot.get_or_insert(e);
            }
            if self.done.fetch_add(1, Ordering::AcqRel) + 1 == self.count {
                self.waiter.unpark();
            }
        }
    }
}

/// The operation most recently posted for helpers, and how many helpers are polling for it.
struct Board {
    /// Bumped on every post, so a polling helper notices a new operation with one load.
    generation: AtomicU64,
    current: SpinLock<Option<Arc<Shared>>>,
    lingering: AtomicUsize,
}

static BOARD: Board = Board {
    generation: AtomicU64::new(0),
    current: SpinLock::new(None),
    lingering: AtomicUsize::new(0),
};

thread_local! {
    /// This thread is running a helper loop (a nested one would only poll the same board).
    static HELPING: Cell<bool> = const { Cell::new(false) };
}

fn post(shared: Arc<Shared>) {
    *BOARD.current.lock() = Some(shared);
    BOARD.generation.fetch_add(1, Ordering::Release);
}

/// A helper: join posted operations until none has come for [`LINGER`].
fn help() {
    if HELPING.get() {
        BOARD.lingering.fetch_sub(1, Ordering::AcqRel);
        return;
    }
    HELPING.set(true);
    let mut seen = 0u64;
    let mut idle_since = Instant::now();
    let mut polls = 0u32;
    loop {
        // A short tight spin first: the next op usually arrives within a microsecond or two
        // and is then picked up without a system call; yielding comes after.
        let mut g = BOARD.generation.load(Ordering::Acquire);
        for _ in 0..SPIN_POLLS {
            if g != seen {
                break;
            }
            std::hint::spin_loop();
            g = BOARD.generation.load(Ordering::Acquire);
        }
        if g != seen {
            seen = g;
            let current = BOARD.current.lock().clone();
            if let Some(s) = current {
                s.work();
            }
            idle_since = Instant::now();
            continue;
        }
        if let Some(rayon::Yield::Executed) = rayon::yield_now() {
            idle_since = Instant::now();
            continue;
        }
        // Give the core away if anything else is runnable on it: with more threads awake
        // than cores (engine workers, the caller, other libraries), a pure spin here would
        // take time slices from the threads doing the work.
        std::thread::yield_now();
        polls = polls.wrapping_add(1);
        if polls.is_multiple_of(16) && idle_since.elapsed() > LINGER {
            // Stop counting as a helper first, then look once more: a caller that saw this one
            // lingering did not ask for another.
            BOARD.lingering.fetch_sub(1, Ordering::AcqRel);
            if BOARD.generation.load(Ordering::Acquire) == seen {
                break;
            }
            BOARD.lingering.fetch_add(1, Ordering::AcqRel);
        }
    }
    HELPING.set(false);
}

/// Runs `job(0..count)` on the calling thread plus up to `helpers` pool workers, returning when
/// all blocks have finished. A panic in a block is re-raised here after the others finish.
pub(crate) fn share_work(helpers: usize, count: usize, job: &(dyn Fn(usize) + Sync)) {
    if helpers == 0 || count <= 1 {
        (0..count).for_each(job);
        return;
    }
    let job: *const (dyn Fn(usize) + Sync + '_) = job;
    // SAFETY: lifetime erasure only; `Shared::job` documents why no call outlives `job`.
    let job: *const (dyn Fn(usize) + Sync + 'static) = unsafe { std::mem::transmute(job) };
    let shared = Arc::new(Shared {
        next: AtomicUsize::new(0),
        done: AtomicUsize::new(0),
        count,
        job,
        waiter: std::thread::current(),
        panic: Mutex::new(None),
    });
    post(Arc::clone(&shared));
    // Helpers already lingering count even when this call runs inside one of them (through
    // rayon work it picked up): more would oversubscribe the cores `helpers` was sized for.
    let wanted = helpers.min(count - 1);
    let lingering = BOARD.lingering.load(Ordering::Acquire);
    if lingering < wanted {
        if let Ok(pool) = pool() {
            for _ in lingering..wanted {
                BOARD.lingering.fetch_add(1, Ordering::AcqRel);
                pool.spawn(help);
            }
        }
    }
    shared.work();
    let start = Instant::now();
    let mut polls = 0u32;
    while shared.done.load(Ordering::Acquire) < count {
        polls = polls.wrapping_add(1);
        if !polls.is_multiple_of(SPIN_POLLS) {
            std::hint::spin_loop();
        } else if start.elapsed() < CALLER_SPIN {
            std::thread::yield_now();
        } else {
            std::thread::park_timeout(Duration::from_micros(500));
        }
    }
    // Drop the board's reference if it is still ours, so `job` is not kept reachable.
    {
        let mut cur = BOARD.current.lock();
        if cur.as_ref().is_some_and(|c| Arc::ptr_eq(c, &shared)) {
            *cur = None;
        }
    }
    let caught = shared
        .panic
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take();
    if let Some(e) = caught {
        resume_unwind(e);
    }
}

/// Fork handling (see [`pool`]): hold the board's lock across `fork` so the child never
/// inherits it locked.
#[cfg(unix)]
pub(crate) fn before_fork() {
    BOARD.current.lock_for_fork();
}

/// In the parent after `fork`: release what [`before_fork`] took.
#[cfg(unix)]
pub(crate) fn after_fork_in_parent() {
    BOARD.current.unlock_after_fork();
}

/// In the child after `fork`: the helpers the parent had do not exist here.
#[cfg(unix)]
pub(crate) fn after_fork_in_child() {
    BOARD.current.unlock_after_fork();
    // The parent's operation is not ours to finish; its memory is leaked, not freed (a helper
    // of the parent may have been inside it).
    std::mem::forget(BOARD.current.lock().take());
    BOARD.lingering.store(0, Ordering::Release);
}

/// A raw pointer (or a struct of them) that may cross threads; the code sharing it guarantees
/// that blocks touch disjoint regions of buffers that outlive every access.
#[derive(Clone, Copy)]
pub(crate) struct SendPtr<T>(pub(crate) T);
// SAFETY: see the type's contract; users pass it only to `share_work` blocks.
unsafe impl<T> Send for SendPtr<T> {}
unsafe impl<T> Sync for SendPtr<T> {}

impl<T: Copy> SendPtr<T> {
    /// The pointer (a method, so closures capture the wrapper and not the bare field).
    #[inline]
    pub(crate) fn get(&self) -> T {
        self.0
    }
}

/// Helpers worth asking for: the configured thread count minus the caller.
pub(crate) fn helpers() -> usize {
    get_num_threads().saturating_sub(1)
}
