//! Waiting on an event with a deadline, and the one slowness factor every
//! time limit of the test suites is multiplied by.
//!
//! The suites run on loaded machines (several builds at once on two cores,
//! a CI runner beside them). A test never sleeps a fixed time hoping an
//! event happened: it polls for the event until a generous deadline. And a
//! test that asserts how long something took (a bound on elapsed time)
//! multiplies its bound by [`slowness`], so a slow machine stretches the
//! bound instead of failing the test; what the test checks is otherwise
//! unchanged.
//!
//! This file is self-contained (std only): the library's own unit tests
//! include it by path, so both suites share the one implementation.

use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

/// The variable that sets the slowness factor (a number, at least 1).
pub const SLOWNESS_VAR: &str = "BIR_TEST_SLOWNESS";

/// The most the factor derived from the load average can be. A machine
/// slower than this needs `BIR_TEST_SLOWNESS` set by hand.
const MAX_DERIVED: f64 = 8.0;

/// How much slower than an idle machine this one is taken to be, read once.
///
/// `BIR_TEST_SLOWNESS`, when set to a number, is the factor (at least 1).
/// Unset, it is the one-minute load average per CPU when the first test
/// asks (at least 1, at most 8): on an idle machine 1, on two cores with
/// eight runnable processes 4. A value that does not parse is a mistake
/// worth a loud failure, not a silent default.
pub fn slowness() -> f64 {
    static FACTOR: OnceLock<f64> = OnceLock::new();
    *FACTOR.get_or_init(|| match std::env::var(SLOWNESS_VAR) {
        Ok(text) => match text.trim().parse::<f64>() {
            Ok(f) if f.is_finite() => f.max(1.0),
            _ => panic!("{SLOWNESS_VAR}={text:?} is not a number"),
        },
        Err(_) => derived_from_load(),
    })
}

/// The one-minute load average per CPU, clamped to `1..=MAX_DERIVED`.
fn derived_from_load() -> f64 {
    let load = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
        .unwrap_or(0.0);
    let cpus = thread::available_parallelism().map_or(1, usize::from) as f64;
    (load / cpus).clamp(1.0, MAX_DERIVED)
}

/// `limit` stretched by the slowness factor: the bound a test asserts on
/// elapsed time, and the deadline of every wait here.
pub fn scaled(limit: Duration) -> Duration {
    limit.mul_f64(slowness())
}

/// Polls `probe` until it gives a value, for up to `timeout` (scaled).
/// Polls every 2 ms at first, then every 20 ms: a quick event is seen
/// quickly (a test timing it measures little of the polling), a slow one
/// does not cost a busy loop.
pub fn eventually<T>(timeout: Duration, mut probe: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + scaled(timeout);
    let mut pause = Duration::from_millis(2);
    loop {
        if let Some(value) = probe() {
            return Some(value);
        }
        if Instant::now() >= deadline {
            return None;
        }
        thread::sleep(pause.min(deadline.saturating_duration_since(Instant::now())));
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

/// True once `ready` holds, false if it did not within `timeout` (scaled).
pub fn poll_until(timeout: Duration, mut ready: impl FnMut() -> bool) -> bool {
    eventually(timeout, || ready().then_some(())).is_some()
}

/// The value `probe` gives within `timeout` (scaled); the test fails
/// naming `what` otherwise.
pub fn wait_for<T>(what: &str, timeout: Duration, probe: impl FnMut() -> Option<T>) -> T {
    match eventually(timeout, probe) {
        Some(value) => value,
        None => panic!("timed out after {:?} waiting for {what}", scaled(timeout)),
    }
}

/// Returns once `ready` holds; the test fails naming `what` if it does not
/// within `timeout` (scaled).
pub fn wait_until(what: &str, timeout: Duration, mut ready: impl FnMut() -> bool) {
    wait_for(what, timeout, || ready().then_some(()))
}

/// Held by every test that asserts on elapsed time or loads the CPU on
/// purpose: such tests run one at a time, so no timed test shares the
/// machine with another one (or with a CPU hog) of its own suite. A test
/// that panicked while holding it does not poison it for the others.
pub fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(PoisonError::into_inner)
}
