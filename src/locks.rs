//! Small synchronisation helpers the threads of every personality share.
//!
//! A leaf: it imports nothing of the crate.

use std::sync::{Condvar, Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

/// Locks a mutex, recovering the data if a panicking thread poisoned it.
/// Sound for every caller because each keeps the structure it guards
/// consistent between statements (no invariant is broken across a call
/// that could panic while the guard is held).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// `try_lock`, tried again every `poll` until `until`: the lock, or what
/// the last try said (`WouldBlock` once the time is up; `Poisoned` at
/// once, for the caller to judge). For a thread that must not wait on
/// another beyond its deadline (`std`'s mutex has no timed lock).
pub(crate) fn try_lock_until<T>(
    m: &Mutex<T>,
    until: Instant,
    poll: Duration,
) -> Result<MutexGuard<'_, T>, TryLockError<MutexGuard<'_, T>>> {
    loop {
        match m.try_lock() {
            Err(TryLockError::WouldBlock) if Instant::now() < until => std::thread::sleep(poll),
            tried => return tried,
        }
    }
}

/// State a producer and a worker thread share: a mutex, and the condition
/// variable that announces each change of what it guards. Every wait
/// recovers from poisoning like [`lock`] (the senders of the recording
/// service and of OpenTelemetry are built on it).
pub(crate) struct Monitor<T> {
    state: Mutex<T>,
    changed: Condvar,
}

impl<T> Monitor<T> {
    pub(crate) fn new(state: T) -> Monitor<T> {
        Monitor {
            state: Mutex::new(state),
            changed: Condvar::new(),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        lock(&self.state)
    }

    /// Wakes every waiter: call after changing the state.
    pub(crate) fn notify_all(&self) {
        self.changed.notify_all();
    }

    pub(crate) fn wait<'a>(&self, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
        self.changed.wait(guard).unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn wait_timeout<'a>(
        &self,
        guard: MutexGuard<'a, T>,
        d: Duration,
    ) -> MutexGuard<'a, T> {
        self.changed
            .wait_timeout(guard, d)
            .unwrap_or_else(|p| p.into_inner())
            .0
    }

    /// Waits up to `d` while `cond` holds.
    pub(crate) fn wait_timeout_while<'a>(
        &self,
        guard: MutexGuard<'a, T>,
        d: Duration,
        cond: impl FnMut(&mut T) -> bool,
    ) -> MutexGuard<'a, T> {
        self.changed
            .wait_timeout_while(guard, d, cond)
            .unwrap_or_else(|p| p.into_inner())
            .0
    }
}
