//! The pause watch: looks at the clock for the observer's worker, at idle
//! priority, so that the relay's pauses are found without costing the
//! relay's calls.
//!
//! Why: the worker records in the relay's pauses (no read for
//! [`super::QUIET`]), so while the relay is busy something must look, about
//! every millisecond, whether it went quiet. When the worker looked itself
//! (a normal-weight thread), each look cost the call it landed on 30–60 µs
//! on the development VM, far more than the look's own few microseconds; a
//! burst of back-to-back 15 µs calls takes a look every 60 or so calls,
//! more than one in a hundred, so the looks alone made recording's p99
//! twice recording-off's. A bare 1 ms `nanosleep` loop on the same CPU
//! costs the same, as a normal or `SCHED_BATCH` thread, and nothing
//! measurable as a `SCHED_IDLE` one (which the kernel runs only when a CPU
//! has nothing else to do, or for a sliver of its time).
//!
//! How: a helper thread in `SCHED_IDLE`. The worker *arms* it when it has
//! a backlog and the relay is busy, then sleeps with no timer shorter than
//! its longest deferral; the helper looks at the relay's last read as the
//! worker did, sleeping until the relay may be quiet, and when it is,
//! nudges the worker ([`super::queue::Queue::nudge`]) and disarms. So the
//! worker wakes once per pause instead of once per millisecond of a
//! burst.
//!
//! The helper's own looks are wake-ups on the relay's CPU too, cheaper
//! but not free, so while the relay stays busy it looks less and less
//! often: a millisecond after the last read, then after gaps that double
//! up to [`LONGEST_GAP`] (a burst of 15 ms gets four looks, not fifteen),
//! and its timers may fire a little late ([`super::sched::TIMER_SLACK`]):
//! longer than the scheduler's tick, so on a busy CPU the kernel serves
//! them from a tick it takes anyway rather than with an interrupt of
//! their own (on the VM we measured, every timer interrupt cost the call
//! it landed on 20 µs or more). The price: a long burst is recorded up to
//! [`LONGEST_GAP`] plus that slack after it ends instead of a millisecond
//! after, and nobody waits for that (the end of a session still records
//! at once).
//!
//! The helper holds no lock anyone waits for and touches no sink, so its
//! lowly class can never hold recording up: on a saturated CPU it may not
//! get to look, and the worker's own triggers (half the queue waiting,
//! the longest deferral, the end of the session) record at normal weight,
//! as before. Where the kernel refuses `SCHED_IDLE` (or off Linux) the
//! watch is unavailable and the worker looks at the clock itself.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::Duration;

use super::queue::Queue;
use super::sched::{allow_late_timers, enter_idle_class};
use super::{Observation, QUIET, RelayActivity};

/// The longest the helper sleeps between two looks at a busy relay.
const LONGEST_GAP: Duration = Duration::from_millis(16);

/// The worker's side of the pause watch.
pub(super) struct PauseWatch {
    shared: Arc<Shared>,
}

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
    /// The helper runs in `SCHED_IDLE` and takes requests.
    available: AtomicBool,
}

#[derive(Default)]
struct State {
    armed: bool,
    closed: bool,
}

impl PauseWatch {
    /// Starts the helper, watching `activity` for `queue`'s consumer. The
    /// watch is available once the helper runs in `SCHED_IDLE`.
    pub(super) fn start(
        queue: Arc<Queue<Observation>>,
        activity: Arc<RelayActivity>,
    ) -> PauseWatch {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            available: AtomicBool::new(false),
        });
        let helper = Arc::clone(&shared);
        let spawned = thread::Builder::new()
            .name("bir-pause-watch".into())
            .spawn(move || watch(&helper, &queue, &activity));
        if let Err(err) = spawned {
            log::debug!("no pause watch ({err}); the recorder looks at the clock itself");
        }
        PauseWatch { shared }
    }

    /// Whether the helper runs and will nudge the worker at the pause.
    pub(super) fn available(&self) -> bool {
        self.shared.available.load(Ordering::Acquire)
    }

    /// Asks to be nudged once the relay is quiet. No system call when
    /// already armed.
    pub(super) fn arm(&self) {
        let Ok(mut state) = self.shared.state.lock() else {
            return;
        };
        if state.armed || state.closed {
            return;
        }
        state.armed = true;
        drop(state);
        self.shared.changed.notify_one();
    }

    /// Ends the helper thread.
    pub(super) fn close(&self) {
        self.shared.available.store(false, Ordering::Release);
        if let Ok(mut state) = self.shared.state.lock() {
            state.closed = true;
        }
        self.shared.changed.notify_one();
    }
}

impl Drop for PauseWatch {
    fn drop(&mut self) {
        self.close();
    }
}

/// The helper: in the idle class, waits to be armed, then looks at the
/// relay's last read until it is quiet, and nudges the consumer.
fn watch(shared: &Shared, queue: &Queue<Observation>, activity: &RelayActivity) {
    if !enter_idle_class() {
        log::debug!("no idle class for the pause watch; the recorder looks at the clock itself");
        return;
    }
    shared.available.store(true, Ordering::Release);
    allow_late_timers();
    let Ok(mut state) = shared.state.lock() else {
        return;
    };
    // The gap before the next look at a relay that stayed busy.
    let mut gap = Duration::ZERO;
    loop {
        if state.closed {
            return;
        }
        if !state.armed {
            gap = Duration::ZERO;
            state = match shared.changed.wait(state) {
                Ok(next) => next,
                Err(_) => return,
            };
            continue;
        }
        let Some(quiet_in) = activity.quiet_in() else {
            state.armed = false;
            queue.nudge();
            continue;
        };
        gap = next_gap(gap);
        // Asleep (a timed wait, so `close` ends it) until the relay may
        // be quiet, and at least the gap.
        state = match shared.changed.wait_timeout(state, quiet_in.max(gap)) {
            Ok((next, _)) => next,
            Err(_) => return,
        };
    }
}

/// The gap after `gap` while the relay stays busy: [`QUIET`] first, then
/// twice the last, up to [`LONGEST_GAP`].
fn next_gap(gap: Duration) -> Duration {
    if gap.is_zero() {
        return QUIET;
    }
    (gap * 2).min(LONGEST_GAP)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// How long the helper may take to look: the test waits this long at
    /// most (a loaded machine may starve an idle-class thread a while).
    const TEST_DEADLINE: Duration = Duration::from_secs(60);

    /// A burst of 15 ms gets four looks (at 1, 3, 7 and 15 ms), and a long
    /// one a look every [`LONGEST_GAP`].
    #[test]
    fn looks_at_a_busy_relay_thin_out() {
        let mut gap = Duration::ZERO;
        let mut at = Duration::ZERO;
        let mut looks = Vec::new();
        while at < Duration::from_millis(100) {
            gap = next_gap(gap);
            at += gap;
            looks.push(at.as_millis());
        }
        assert_eq!(looks, [1, 3, 7, 15, 31, 47, 63, 79, 95, 111]);
    }

    /// Armed while the relay reads, the watch stays quiet; once the relay
    /// stops reading it nudges the consumer, once per arming.
    #[test]
    fn an_armed_watch_nudges_the_consumer_once_the_relay_is_quiet() {
        let queue = Arc::new(Queue::new(8, 1024));
        let activity = Arc::new(RelayActivity::new());
        let watch = PauseWatch::start(Arc::clone(&queue), Arc::clone(&activity));
        if !crate::observe::test_wait::poll_until(TEST_DEADLINE, || watch.available()) {
            // A kernel without SCHED_IDLE: the worker's fallback is used.
            return;
        }
        // Busy: a read every 100 µs for a while; the watch must not nudge.
        activity.read_now();
        watch.arm();
        let busy_until = Instant::now() + Duration::from_millis(30);
        while Instant::now() < busy_until {
            activity.read_now();
            // The busy relay's pace, not a wait for an event.
            thread::sleep(Duration::from_micros(100));
        }
        // (A nudge that came anyway would show here only if the relay
        // really went quiet for a millisecond on a loaded machine, so
        // this is not asserted; what is asserted is that it comes.)
        crate::observe::test_wait::wait_until("nudged once quiet", TEST_DEADLINE, || {
            queue.take_nudge()
        });
        // An absence has no event to wait on: the time a second nudge
        // would come in.
        thread::sleep(Duration::from_millis(20));
        assert!(!queue.take_nudge(), "once per arming");
        watch.close();
    }
}
