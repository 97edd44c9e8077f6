//! A lock that spins instead of parking: for values held only for a read, a clone or a swap
//! (a tensor's autograd metadata, the pool handle). Taking it is one compare-exchange and
//! releasing it a plain store, where a parking mutex makes both a locked instruction, and it
//! can be reset in a forked child.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, Ordering};

/// Failed attempts between yields of the core.
const SPIN_POLLS: u32 = 64;

/// A lock that spins (yielding the core) instead of parking, for values held only for a clone
/// or a swap. Unlike a parking mutex it can be reset in a forked child whatever state the
/// parent's threads left it in: a parked waiter leaves bits that send the child's next unlock
/// into parking_lot's global table, whose own lock may have been held mid-fork (a hang seen in
/// `test_forked_child_runs_parallel_work`, one fork in ten).
pub(crate) struct SpinLock<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: `value` is only reached through a guard, and a guard exists only while `locked` was
// taken by this thread (or in a forked child that is the only thread).
unsafe impl<T: Send> Sync for SpinLock<T> {}

impl<T> SpinLock<T> {
    pub(crate) const fn new(value: T) -> Self {
        SpinLock {
            locked: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    pub(crate) fn lock(&self) -> SpinGuard<'_, T> {
        let mut spins = 0u32;
        while self
            .locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            spins += 1;
            if spins.is_multiple_of(SPIN_POLLS) {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
        SpinGuard(self)
    }

    /// The value, through exclusive access (no locking needed).
    pub(crate) fn get_mut(&mut self) -> &mut T {
        self.value.get_mut()
    }

    /// Take the lock and keep it until [`SpinLock::unlock_after_fork`] (fork handlers).
    pub(crate) fn lock_for_fork(&self) {
        std::mem::forget(self.lock());
    }

    /// Release a lock taken by [`SpinLock::lock_for_fork`] (in the parent or the child).
    pub(crate) fn unlock_after_fork(&self) {
        self.locked.store(false, Ordering::Release);
    }
}

/// Access to a [`SpinLock`]'s value; unlocks when dropped.
pub(crate) struct SpinGuard<'a, T>(&'a SpinLock<T>);

impl<T> std::ops::Deref for SpinGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: this guard holds the lock.
        unsafe { &*self.0.value.get() }
    }
}

impl<T> std::ops::DerefMut for SpinGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: this guard holds the lock.
        unsafe { &mut *self.0.value.get() }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    fn drop(&mut self) {
        self.0.locked.store(false, Ordering::Release);
    }
}
