//! Cooperative interruption of long work (a backward pass, a huge product).
//!
//! The thread that started the work asks, at most every [`INTERVAL`], whether it should stop:
//! the engine between nodes, parallel kernels between blocks. What "should stop" means is up
//! to the embedding: the Python bindings install a check that runs Python's pending signal
//! handlers, so Ctrl-C raises `KeyboardInterrupt` within tens of milliseconds; a Rust program
//! can install its own (e.g. a flag set by a signal handler). Without a check nothing is asked.
//!
//! Work stops only between units (nodes, blocks), never inside one, so nothing is left
//! half-written; the check's error is returned to the caller unchanged.

use std::cell::Cell;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::error::Result;

/// Longest time between two checks while work runs.
pub const INTERVAL: Duration = Duration::from_millis(20);

/// Polls between two looks at the clock: reading it costs more than most tiny nodes.
const POLLS_PER_CLOCK: u32 = 32;

static CHECK: OnceLock<fn() -> Result<()>> = OnceLock::new();

thread_local! {
    /// (polls since the last look at the clock, when the check last ran).
    static STATE: Cell<(u32, Option<Instant>)> = const { Cell::new((0, None)) };
    /// The check is running on this thread (it may run code that starts work of its own).
    static CHECKING: Cell<bool> = const { Cell::new(false) };
}

/// Install the function long work calls to ask whether to stop: it returns an error to stop
/// (that error is what the interrupted call returns). It is called on the thread that started
/// the work. Only the first call has an effect; returns whether this one did.
pub fn set_interrupt_check(check: fn() -> Result<()>) -> bool {
    CHECK.set(check).is_ok()
}

/// Interruptible work running on this thread, from creation to drop: the thread polls
/// meanwhile, and the first check comes one [`INTERVAL`] after the start. Threads that started
/// nothing do not poll (pool workers), and a nested start restores the outer one's state.
pub(crate) struct Started {
    outer: Option<(u32, Option<Instant>)>,
}

impl Started {
    /// Start interruptible work on this thread.
    pub(crate) fn new() -> Started {
        if CHECK.get().is_none() {
            return Started { outer: None };
        }
        let outer = STATE.replace((0, Some(Instant::now())));
        // Nested work keeps the outer clock, so a check is not put off by each inner call.
        if let (_, Some(t)) = outer {
            STATE.set((0, Some(t)));
        }
        Started { outer: Some(outer) }
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        if let Some(outer) = self.outer {
            STATE.set(outer);
        }
    }
}

/// Between two units of work on the starting thread: run the check when [`INTERVAL`] has
/// passed since the last one. Cheap when it has not (a counter; the clock every few calls).
#[inline]
pub(crate) fn poll() -> Result<()> {
    match CHECK.get() {
        Some(check) => poll_with(*check, false),
        None => Ok(()),
    }
}

/// Like [`poll`] but looking at the clock every time: for units that may each take long.
pub(crate) fn poll_now() -> Result<()> {
    match CHECK.get() {
        Some(check) => poll_with(*check, true),
        None => Ok(()),
    }
}

fn poll_with(check: fn() -> Result<()>, now: bool) -> Result<()> {
    let (n, last) = STATE.get();
    let Some(last) = last else {
        return Ok(());
    };
    if !now && n + 1 < POLLS_PER_CLOCK {
        STATE.set((n + 1, Some(last)));
        return Ok(());
    }
    let t = Instant::now();
    if t.duration_since(last) < INTERVAL {
        STATE.set((0, Some(last)));
        return Ok(());
    }
    STATE.set((0, Some(t)));
    run(check)
}

fn run(check: fn() -> Result<()>) -> Result<()> {
    if CHECKING.get() {
        return Ok(());
    }
    CHECKING.set(true);
    let r = check();
    CHECKING.set(false);
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    static CALLS: AtomicUsize = AtomicUsize::new(0);

    fn count_and_stop() -> Result<()> {
        CALLS.fetch_add(1, Ordering::SeqCst);
        Err(crate::Error::runtime("stop"))
    }

    #[test]
    fn check_runs_only_after_the_interval_on_a_started_thread() {
        poll_with(count_and_stop, true).expect("a thread that started nothing never checks");
        STATE.set((0, Some(Instant::now())));
        for _ in 0..1000 {
            poll_with(count_and_stop, false).expect("no check within the first interval");
        }
        assert_eq!(CALLS.load(Ordering::SeqCst), 0);
        std::thread::sleep(INTERVAL + Duration::from_millis(5));
        assert!(poll_with(count_and_stop, true).is_err());
        assert_eq!(CALLS.load(Ordering::SeqCst), 1);
        // The next check is one interval later.
        assert!(poll_with(count_and_stop, true).is_ok());
    }
}
