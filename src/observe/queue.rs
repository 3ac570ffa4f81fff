//! A bounded hand-off queue that never blocks the producer.
//!
//! The relay pushes observations here and goes back to relaying. When the
//! consumer falls behind and the queue is full (by count or by bytes), the
//! oldest entry is dropped and counted: recording loses data, the relay never
//! waits (recording never blocks the relay). The drop count is what later marks a run
//! `lossy`.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// Something with a size, so the queue can bound memory as well as count.
pub(crate) trait Weighed {
    fn weight(&self) -> usize;
}

pub(crate) struct Queue<T> {
    state: Mutex<State<T>>,
    ready: Condvar,
    max_items: usize,
    max_bytes: usize,
    dropped: AtomicU64,
    /// Mirrors `State::closed` for lock-free checks on the hot path.
    closed: AtomicBool,
}

struct State<T> {
    items: VecDeque<T>,
    bytes: usize,
    closed: bool,
    /// The consumer is blocked in `take_all` or `wait`, waiting to be woken.
    consumer_asleep: bool,
    /// How many queued items wake it (set by `wait`).
    wake_at: usize,
    /// Someone other than a producer asked the consumer to look again
    /// ([`Queue::nudge`]); `wait` returns at once while it is set.
    nudged: bool,
}

impl<T: Weighed> Queue<T> {
    pub(crate) fn new(max_items: usize, max_bytes: usize) -> Self {
        Queue {
            state: Mutex::new(State {
                items: VecDeque::new(),
                bytes: 0,
                closed: false,
                consumer_asleep: false,
                wake_at: max_items.max(1) / 2,
                nudged: false,
            }),
            ready: Condvar::new(),
            max_items: max_items.max(1),
            max_bytes,
            dropped: AtomicU64::new(0),
            closed: AtomicBool::new(false),
        }
    }

    /// Adds an item, dropping the oldest ones if the queue is full. Never
    /// blocks beyond the short critical section.
    pub(crate) fn push(&self, item: T) {
        self.push_all(std::iter::once(item));
    }

    /// Adds items in order, as `push` would one by one, under one lock: the
    /// relay hands over what one read produced in a single critical section.
    pub(crate) fn push_all(&self, items: impl IntoIterator<Item = T>) {
        let mut items = items.into_iter();
        let Ok(mut state) = self.state.lock() else {
            // A consumer panicked while holding the lock: count and move on.
            self.dropped
                .fetch_add(items.count() as u64, Ordering::Relaxed);
            return;
        };
        if state.closed {
            drop(state);
            self.dropped
                .fetch_add(items.count() as u64, Ordering::Relaxed);
            return;
        }
        for item in items.by_ref() {
            let weight = item.weight();
            while !state.items.is_empty()
                && (state.items.len() >= self.max_items || state.bytes + weight > self.max_bytes)
            {
                if let Some(old) = state.items.pop_front() {
                    state.bytes -= old.weight();
                    self.dropped.fetch_add(1, Ordering::Relaxed);
                }
            }
            state.bytes += weight;
            state.items.push_back(item);
        }
        // Wake the consumer only when it asked to be (by default when a
        // batch has built up), and only if it sleeps: a wake-up (a system
        // call) per item would cost the relay dearly, and a consumer at
        // work needs none. An idle consumer polls on its own (see the
        // timeouts of `take_all` and `wait`).
        let wake = state.consumer_asleep && state.items.len() >= state.wake_at;
        if wake {
            state.consumer_asleep = false;
        }
        drop(state);
        if wake {
            self.ready.notify_one();
        }
    }

    /// Moves everything queued into `into` (which must be empty), waiting
    /// up to `timeout` for something to arrive; `into` stays empty on
    /// timeout, or once the queue is closed and drained.
    ///
    /// One short critical section per batch, not per item: the consumer
    /// runs at a low priority, and a producer must never wait long for a
    /// lock the consumer was preempted while holding.
    pub(crate) fn take_all(&self, timeout: Duration, into: &mut VecDeque<T>) {
        debug_assert!(into.is_empty());
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        loop {
            if !state.items.is_empty() {
                std::mem::swap(&mut state.items, into);
                state.bytes = 0;
                return;
            }
            if state.closed {
                return;
            }
            state.consumer_asleep = true;
            state.wake_at = self.max_items / 2;
            let Ok((next, result)) = self.ready.wait_timeout(state, timeout) else {
                return;
            };
            state = next;
            state.consumer_asleep = false;
            if result.timed_out() && state.items.is_empty() {
                return;
            }
        }
    }

    /// Waits up to `timeout` until at least `at_least` items are queued
    /// or the queue is closed, taking nothing: the consumer then takes the
    /// batch under its own delivery lock, so that whoever holds that lock
    /// holds every observation out of the queue (see `Observer::finish`).
    /// The push that brings the queue to `at_least` wakes it: a wake-up
    /// the producer pays for, so an idle consumer asks for a batch (half
    /// the queue) and polls for less. May return early (a spurious
    /// wake-up); callers look again.
    pub(crate) fn wait(&self, at_least: usize, timeout: Duration) {
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        let at_least = at_least.max(1);
        if state.items.len() >= at_least || state.closed || state.nudged {
            state.nudged = false;
            return;
        }
        state.consumer_asleep = true;
        state.wake_at = at_least;
        if let Ok((mut next, _)) = self.ready.wait_timeout(state, timeout) {
            next.consumer_asleep = false;
            next.nudged = false;
        }
    }

    /// Makes the consumer look again: ends its current [`Queue::wait`], or
    /// its next one at once (the observer's idle watch says so when a CPU
    /// has nothing else to do). Producers never call it.
    pub(crate) fn nudge(&self) {
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        state.nudged = true;
        let asleep = std::mem::replace(&mut state.consumer_asleep, false);
        drop(state);
        if asleep {
            self.ready.notify_all();
        }
    }

    /// Whether the consumer was nudged since (clears it).
    #[cfg(test)]
    pub(crate) fn take_nudge(&self) -> bool {
        self.state
            .lock()
            .is_ok_and(|mut s| std::mem::replace(&mut s.nudged, false))
    }

    /// No more pushes; the consumer drains what is left and then stops.
    pub(crate) fn close(&self) {
        if let Ok(mut state) = self.state.lock() {
            state.closed = true;
        }
        self.closed.store(true, Ordering::Release);
        self.ready.notify_all();
    }

    pub(crate) fn len(&self) -> usize {
        self.state.lock().map(|s| s.items.len()).unwrap_or(0)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.state
            .lock()
            .map(|s| s.items.is_empty())
            .unwrap_or(true)
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Counts items lost before they reached the queue.
    pub(crate) fn count_lost(&self, n: u64) {
        self.dropped.fetch_add(n, Ordering::Relaxed);
    }

    /// How many items were dropped because the queue was full or closed.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Weighed for Vec<u8> {
        fn weight(&self) -> usize {
            self.len()
        }
    }

    fn take(q: &Queue<Vec<u8>>, timeout: Duration) -> Vec<Vec<u8>> {
        let mut batch = VecDeque::new();
        q.take_all(timeout, &mut batch);
        batch.into()
    }

    #[test]
    fn drops_oldest_by_count() {
        let q = Queue::new(2, usize::MAX);
        q.push(vec![1]);
        q.push(vec![2]);
        q.push(vec![3]);
        assert_eq!(q.dropped(), 1);
        assert_eq!(take(&q, Duration::ZERO), [vec![2], vec![3]]);
        assert!(take(&q, Duration::ZERO).is_empty());
        // The batch left the queue: it has room for two more.
        q.push(vec![4]);
        q.push(vec![5]);
        assert_eq!(q.dropped(), 1);
    }

    #[test]
    fn a_batch_is_admitted_as_its_items_would_be_one_by_one() {
        let one_by_one = Queue::new(3, 10);
        let batched = Queue::new(3, 10);
        let items = [
            vec![0; 4],
            vec![1; 4],
            vec![2],
            vec![3; 9],
            vec![4],
            vec![5],
        ];
        for item in items.clone() {
            one_by_one.push(item);
        }
        batched.push_all(items);
        assert_eq!(batched.dropped(), one_by_one.dropped());
        assert_eq!(
            take(&batched, Duration::ZERO),
            take(&one_by_one, Duration::ZERO)
        );
        batched.close();
        batched.push_all([vec![6], vec![7]]);
        assert_eq!(batched.dropped(), one_by_one.dropped() + 2);
    }

    #[test]
    fn drops_oldest_by_bytes_but_keeps_the_newest() {
        let q = Queue::new(100, 10);
        q.push(vec![0; 6]);
        q.push(vec![0; 6]);
        assert_eq!(q.dropped(), 1);
        q.push(vec![0; 50]);
        assert_eq!(q.dropped(), 2);
        assert_eq!(
            take(&q, Duration::ZERO)
                .iter()
                .map(Vec::len)
                .collect::<Vec<_>>(),
            [50]
        );
    }

    #[test]
    fn a_sleeping_consumer_is_woken_once_a_batch_builds_up() {
        let q = std::sync::Arc::new(Queue::new(10, usize::MAX));
        let consumer = {
            let q = std::sync::Arc::clone(&q);
            std::thread::spawn(move || {
                let started = std::time::Instant::now();
                let mut batch = VecDeque::new();
                q.take_all(Duration::from_secs(30), &mut batch);
                (batch.pop_front(), started.elapsed())
            })
        };
        // Let it fall asleep, then push half a queue's worth, slowly.
        crate::observe::test_wait::wait_until(
            "the consumer to fall asleep",
            Duration::from_secs(30),
            || q.state.lock().is_ok_and(|s| s.consumer_asleep),
        );
        for i in 0..5u8 {
            q.push(vec![i]);
            // Slowly: the pace is the point, not a wait for an event.
            std::thread::sleep(Duration::from_millis(5));
        }
        let (first, waited) = consumer.join().expect("consumer");
        assert_eq!(first, Some(vec![0]));
        assert!(
            waited < Duration::from_secs(10),
            "woken, not timed out: {waited:?}"
        );
        assert!(!q.state.lock().is_ok_and(|s| s.consumer_asleep));
    }

    #[test]
    fn close_drains_then_ends() {
        let q = Queue::new(10, 100);
        q.push(vec![1]);
        q.close();
        q.push(vec![2]);
        assert_eq!(take(&q, Duration::from_secs(1)), [vec![1]]);
        let started = std::time::Instant::now();
        assert!(take(&q, Duration::from_secs(1)).is_empty());
        assert!(
            started.elapsed() < Duration::from_millis(500),
            "closed: no wait"
        );
        assert_eq!(q.dropped(), 1);
    }
}
