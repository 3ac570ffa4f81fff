//! The sender thread behind a [`super::Forwarder`]: the mechanism the
//! recording service (`service::forwarder`) and the OpenTelemetry export
//! (`otlp::forwarder`) share, each with its own queue, wire and catch-up.
//!
//! A forwarder's `forward` only queues, under a [`Monitor`]; one thread of
//! its own takes the queue ([`next_work`]): a queued item first, then,
//! when the forwarder says so, a turn of the background catch-up on
//! earlier runs ([`CatchUpState::turn`]); after a failure it pauses
//! ([`Pace`], [`cool_down_for`]) rather than hammer a destination that is
//! down. At the end of a run, `finish` waits a bounded time for what is
//! queued ([`wait_settled`]). Nothing here knows what is sent or where:
//! the item, the send and the catch-up are the forwarder's.

use std::sync::MutexGuard;
use std::time::{Duration, Instant};

use crate::locks::Monitor;

/// First cool-down after a failure, and its ceiling.
pub(crate) const COOL_DOWN_FIRST: Duration = Duration::from_secs(5);
pub(crate) const COOL_DOWN_MAX: Duration = Duration::from_secs(60);

/// The cool-down after `failures` failures in a row: 5 s, doubling to 60 s.
pub(crate) fn cool_down_for(failures: u32) -> Duration {
    if failures == 0 {
        return Duration::ZERO;
    }
    COOL_DOWN_FIRST
        .saturating_mul(1u32 << (failures - 1).min(16))
        .min(COOL_DOWN_MAX)
}

/// What every sender's shared state holds besides its queue.
#[derive(Debug, Default)]
pub(crate) struct Pace {
    /// The sender is working on an item.
    pub busy: bool,
    /// Stop the sender (the forwarder was dropped, or its thread died).
    pub stop: bool,
    /// Failed sends in a row.
    pub failures: u32,
    /// Nothing is sent before this.
    pub cool_until: Option<Instant>,
}

impl Pace {
    /// How long the cool-down still lasts, if one is on.
    pub(crate) fn cooling(&self, now: Instant) -> Option<Duration> {
        self.cool_until
            .and_then(|t| t.checked_duration_since(now))
            .filter(|d| !d.is_zero())
    }

    /// The live item was sent (`ok`) or not: on failure the sender pauses
    /// for `pause(failures)`, which is returned.
    pub(crate) fn settle(
        &mut self,
        ok: bool,
        pause: impl FnOnce(u32) -> Duration,
    ) -> Option<Duration> {
        self.busy = false;
        if ok {
            self.failures = 0;
            self.cool_until = None;
            return None;
        }
        self.failures += 1;
        let pause = pause(self.failures);
        self.cool_until = Some(Instant::now() + pause);
        Some(pause)
    }
}

/// A forwarder's queue, as the sender sees it.
pub(crate) trait Outbox {
    type Item;
    /// The next queued item.
    fn take(&mut self) -> Option<Self::Item>;
    fn is_empty(&self) -> bool;
    /// Forgets the queue (the sender is gone).
    fn clear(&mut self);
}

/// What a forwarder and its sender thread share: the [`Pace`] and the
/// forwarder's own state `S` (its queue and bookkeeping), which the
/// wrapper derefs to.
#[derive(Debug, Default)]
pub(crate) struct Sending<S> {
    pub pace: Pace,
    state: S,
}

impl<S> Sending<S> {
    pub(crate) fn new(state: S) -> Sending<S> {
        Sending {
            pace: Pace::default(),
            state,
        }
    }
}

impl<S> std::ops::Deref for Sending<S> {
    type Target = S;
    fn deref(&self) -> &S {
        &self.state
    }
}

impl<S> std::ops::DerefMut for Sending<S> {
    fn deref_mut(&mut self) -> &mut S {
        &mut self.state
    }
}

/// What the sender does next.
pub(crate) enum Work<I> {
    /// A queued item of this session.
    Live(I),
    /// A turn of the background catch-up on earlier runs.
    CatchUp,
}

/// Whether the catch-up may take a turn now that the queue is empty.
pub(crate) enum CatchUpWhen {
    Now,
    /// Not yet: ask again after this long (or when something is queued).
    After(Duration),
    /// Not until something changes.
    Not,
}

/// Waits for the sender's next work: the queue first (outside a
/// cool-down), then the catch-up when `catch_up` allows it. `None` once
/// the sender is to stop.
pub(crate) fn next_work<S: Outbox>(
    shared: &Monitor<Sending<S>>,
    mut catch_up: impl FnMut(&S, Instant) -> CatchUpWhen,
) -> Option<Work<S::Item>> {
    let mut st = shared.lock();
    loop {
        if st.pace.stop {
            return None;
        }
        let now = Instant::now();
        if let Some(wait) = st.pace.cooling(now) {
            st = shared.wait_timeout(st, wait);
            continue;
        }
        if let Some(item) = st.take() {
            st.pace.busy = true;
            return Some(Work::Live(item));
        }
        st = match catch_up(&st, now) {
            CatchUpWhen::Now => return Some(Work::CatchUp),
            CatchUpWhen::After(d) => shared.wait_timeout(st, d),
            CatchUpWhen::Not => shared.wait(st),
        };
    }
}

/// A forwarder's `finish`: waits until nothing is queued or being sent,
/// the sender stopped, `until` passed, or the sender sits idle in a
/// cool-down (nothing will be sent before `until` then). Returns the lock.
pub(crate) fn wait_settled<'a, S: Outbox>(
    shared: &'a Monitor<Sending<S>>,
    mut st: MutexGuard<'a, Sending<S>>,
    until: Instant,
) -> MutexGuard<'a, Sending<S>> {
    loop {
        let now = Instant::now();
        let pace = &st.pace;
        let idle = st.is_empty() && !pace.busy;
        if idle || pace.stop || now >= until || (!pace.busy && pace.cooling(now).is_some()) {
            return st;
        }
        st = shared.wait_timeout(st, until - now);
    }
}

/// The sender thread ended (its loop returned, or panicked): nothing more
/// will be sent, and whoever waits is told.
pub(crate) fn sender_gone<S: Outbox>(shared: &Monitor<Sending<S>>) {
    let mut st = shared.lock();
    st.pace.stop = true;
    st.pace.busy = false;
    st.clear();
    shared.notify_all();
}

/// The forwarder is dropped: its sender stops.
pub(crate) fn stop<S>(shared: &Monitor<Sending<S>>) {
    shared.lock().pace.stop = true;
    shared.notify_all();
}

/// Where a sender's background catch-up stands.
pub(crate) enum CatchUpState<C> {
    /// Not begun.
    Waiting,
    Running(C),
    Over,
}

impl<C> CatchUpState<C> {
    /// One turn: begins the catch-up if it was waiting (`begin`; `None`:
    /// there is none to do), then takes one `step` (`Ok(true)`: more to
    /// do). A step that fails ends it for this process (`failed` says
    /// why); what it did not send waits in the store.
    pub(crate) fn turn<E>(
        self,
        begin: impl FnOnce() -> Option<C>,
        step: impl FnOnce(&mut C) -> Result<bool, E>,
        failed: impl FnOnce(E),
    ) -> CatchUpState<C> {
        let mut running = match self {
            CatchUpState::Waiting => match begin() {
                Some(c) => c,
                None => return CatchUpState::Over,
            },
            CatchUpState::Running(c) => c,
            CatchUpState::Over => return CatchUpState::Over,
        };
        match step(&mut running) {
            Ok(true) => CatchUpState::Running(running),
            Ok(false) => CatchUpState::Over,
            Err(e) => {
                failed(e);
                CatchUpState::Over
            }
        }
    }

    pub(crate) fn is_over(&self) -> bool {
        matches!(self, CatchUpState::Over)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;
    use std::sync::Arc;

    #[derive(Default)]
    struct Queue {
        items: VecDeque<u32>,
    }

    impl Outbox for Queue {
        type Item = u32;
        fn take(&mut self) -> Option<u32> {
            self.items.pop_front()
        }
        fn is_empty(&self) -> bool {
            self.items.is_empty()
        }
        fn clear(&mut self) {
            self.items.clear();
        }
    }

    #[test]
    fn cool_down_doubles_to_a_minute() {
        let secs: Vec<u64> = (0..8).map(|n| cool_down_for(n).as_secs()).collect();
        assert_eq!(secs, vec![0, 5, 10, 20, 40, 60, 60, 60]);
        assert_eq!(cool_down_for(u32::MAX), COOL_DOWN_MAX);
    }

    #[test]
    fn the_queue_comes_before_the_catch_up_and_a_stop_ends_it() {
        let m = Monitor::new(Sending::new(Queue::default()));
        m.lock().items.extend([1, 2]);
        let asked = std::cell::Cell::new(0);
        let next = || {
            next_work(&m, |_, _| {
                asked.set(asked.get() + 1);
                CatchUpWhen::Now
            })
        };
        assert!(matches!(next(), Some(Work::Live(1))));
        assert!(m.lock().pace.busy);
        assert!(matches!(next(), Some(Work::Live(2))));
        assert_eq!(asked.get(), 0, "not asked while items wait");
        assert!(matches!(next(), Some(Work::CatchUp)));
        stop(&m);
        assert!(next().is_none());
    }

    #[test]
    fn a_failure_pauses_and_finish_does_not_wait_out_the_pause() {
        let m = Arc::new(Monitor::new(Sending::new(Queue::default())));
        m.lock().items.push_back(7);
        let paused = m.lock().pace.settle(false, cool_down_for);
        assert_eq!(paused, Some(Duration::from_secs(5)));
        assert!(m.lock().pace.cooling(Instant::now()).is_some());
        // Queued, idle, cooling: finish returns at once, not at its deadline.
        let started = Instant::now();
        let st = wait_settled(&m, m.lock(), started + Duration::from_secs(600));
        assert_eq!(st.items.len(), 1);
        drop(st);
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "it waited out the pause"
        );
        assert_eq!(m.lock().pace.settle(true, cool_down_for), None);
        assert_eq!(m.lock().pace.failures, 0);
        sender_gone(&m);
        let st = m.lock();
        assert!(st.pace.stop && st.items.is_empty());
    }

    #[test]
    fn a_catch_up_runs_until_it_is_done_or_fails() {
        let begun = CatchUpState::<u32>::Waiting.turn(
            || Some(0),
            |c| {
                Ok::<_, ()>({
                    *c += 1;
                    true
                })
            },
            |_| {},
        );
        assert!(matches!(begun, CatchUpState::Running(1)));
        let done = begun.turn(|| None, |_| Ok::<_, ()>(false), |_| {});
        assert!(done.is_over());
        let mut why = None;
        let failed = CatchUpState::Running(3).turn(|| None, |_| Err("down"), |e| why = Some(e));
        assert!(failed.is_over() && why == Some("down"));
        let none = CatchUpState::<u32>::Waiting.turn(|| None, |_| Ok::<_, ()>(true), |_| {});
        assert!(none.is_over());
    }
}
