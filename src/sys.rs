//! Small synchronisation helpers the threads of every personality share.
//!
//! A leaf: it imports nothing of the crate.

use std::sync::{Mutex, MutexGuard};

/// Locks a mutex, recovering the data if a panicking thread poisoned it.
/// Sound for every caller because each keeps the structure it guards
/// consistent between statements (no invariant is broken across a call
/// that could panic while the guard is held).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
