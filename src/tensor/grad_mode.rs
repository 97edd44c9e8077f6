//! Thread-local grad mode, inference mode and anomaly mode.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};

/// This thread's modes, in one thread-local: from a shared library each thread-local access is
/// a `__tls_get_addr` call, and `is_recording` (asked by every op) needs both.
struct Modes {
    grad: Cell<bool>,
    inference: Cell<bool>,
}

thread_local! {
    static MODES: Modes = const {
        Modes {
            grad: Cell::new(true),
            inference: Cell::new(false),
        }
    };
}

static ANOMALY: AtomicBool = AtomicBool::new(false);
static ANOMALY_CHECK_NAN: AtomicBool = AtomicBool::new(true);

/// Whether ops on this thread record the graph.
pub fn is_grad_enabled() -> bool {
    MODES.with(|m| m.grad.get())
}

/// Turn recording on or off for this thread.
pub fn set_grad_enabled(enabled: bool) {
    MODES.with(|m| m.grad.set(enabled));
}

/// Whether inference mode is on for this thread.
pub fn is_inference_mode_enabled() -> bool {
    MODES.with(|m| m.inference.get())
}

/// Turn inference mode on or off for this thread.
pub fn set_inference_mode(enabled: bool) {
    MODES.with(|m| m.inference.set(enabled));
}

/// Whether an op recorded now would build graph: grad mode on and not in inference mode.
pub fn is_recording() -> bool {
    MODES.with(|m| m.grad.get() && !m.inference.get())
}

/// Sets grad mode for a scope and restores the previous mode when dropped.
pub struct GradModeGuard {
    prev: bool,
}

impl GradModeGuard {
    /// Enter a scope with grad mode `enabled`.
    pub fn new(enabled: bool) -> Self {
        let prev = is_grad_enabled();
        set_grad_enabled(enabled);
        GradModeGuard { prev }
    }
}

impl Drop for GradModeGuard {
    fn drop(&mut self) {
        set_grad_enabled(self.prev);
    }
}

/// A scope without graph recording, like `torch.no_grad()`.
pub fn no_grad() -> GradModeGuard {
    GradModeGuard::new(false)
}

/// Whether anomaly detection is on (process-wide, as in torch).
pub fn is_anomaly_enabled() -> bool {
    ANOMALY.load(Ordering::Relaxed)
}

/// Whether anomaly mode checks backward outputs for NaN.
pub fn is_anomaly_check_nan_enabled() -> bool {
    ANOMALY_CHECK_NAN.load(Ordering::Relaxed)
}

/// Turn anomaly detection on or off; with `check_nan`, a backward output with NaN raises.
pub fn set_detect_anomaly(enabled: bool, check_nan: bool) {
    ANOMALY.store(enabled, Ordering::Relaxed);
    ANOMALY_CHECK_NAN.store(check_nan, Ordering::Relaxed);
}

/// Captures where an op was recorded (e.g. the Python stack), for anomaly reports.
pub type ForwardTracer = fn() -> Option<String>;
/// Reports a failing backward node under anomaly mode: its name and its forward trace.
pub type AnomalyReporter = fn(&str, Option<&str>);

static TRACER: std::sync::OnceLock<ForwardTracer> = std::sync::OnceLock::new();
static REPORTER: std::sync::OnceLock<AnomalyReporter> = std::sync::OnceLock::new();

/// Install the functions anomaly mode uses to record forward traces and report failures
/// (the Python bindings install ones that capture the Python stack and emit a warning).
pub fn set_anomaly_hooks(tracer: ForwardTracer, reporter: AnomalyReporter) {
    let _ = TRACER.set(tracer);
    let _ = REPORTER.set(reporter);
}

pub(crate) fn forward_trace() -> Option<String> {
    if is_anomaly_enabled() {
        TRACER.get().and_then(|t| t())
    } else {
        None
    }
}

pub(crate) fn report_anomaly(node: &str, trace: Option<&str>) {
    if let Some(r) = REPORTER.get() {
        r(node, trace);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grad_mode_is_thread_local_and_restored() {
        {
            let _g = no_grad();
            assert!(!is_grad_enabled());
            let other = std::thread::spawn(is_grad_enabled).join().unwrap();
            assert!(other, "a new thread starts with grad enabled");
        }
        assert!(is_grad_enabled());
    }
}
