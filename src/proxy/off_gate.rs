//! The off switch, as a running proxy sees it: a [`Sink`] wrapper that
//! stops handing observations to the recorder while `bir off` (or `bir off
//! --here` for the proxy's directory) is in force, and resumes after
//! `bir on`.
//!
//! The switch files are looked at on the observer thread, at most every
//! [`CHECK_EVERY`] (the worker wakes at least every 50 ms, so a switch
//! takes effect within about half a second). The relay never looks: it
//! relays the same bytes whether recording is on or off.

use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use crate::observe::step::StepReport;
use crate::observe::{Direction, Sink};

/// How often the switch files are looked at.
const CHECK_EVERY: Duration = Duration::from_millis(500);

pub(crate) struct OffGate<S: Sink> {
    inner: S,
    home: Option<PathBuf>,
    cwd: PathBuf,
    checked: Option<Instant>,
    off: bool,
}

impl<S: Sink> OffGate<S> {
    pub(crate) fn new(inner: S) -> OffGate<S> {
        OffGate {
            inner,
            home: crate::home::bir_home(),
            cwd: std::env::current_dir().unwrap_or_default(),
            checked: None,
            off: false,
        }
    }

    fn off(&mut self) -> bool {
        if self.checked.is_none_or(|at| at.elapsed() >= CHECK_EVERY) {
            let off = self
                .home
                .as_deref()
                .is_some_and(|home| crate::switch::files_off(home, &self.cwd));
            if off != self.off {
                log::info!("recording switched {}", if off { "off" } else { "on" });
            }
            self.off = off;
            self.checked = Some(Instant::now());
        }
        self.off
    }
}

impl<S: Sink> Sink for OffGate<S> {
    fn message(&mut self, at: SystemTime, direction: Direction, bytes: &[u8], total: Option<u64>) {
        if !self.off() {
            self.inner.message(at, direction, bytes, total);
        }
    }

    fn step(&mut self, step: &StepReport) {
        if !self.off() {
            self.inner.step(step);
        }
    }

    fn event(&mut self, at: SystemTime, text: &str) {
        if !self.off() {
            self.inner.event(at, text);
        }
    }

    fn exchange(&mut self, method: &str, request: &[u8], response: &[u8]) {
        if !self.off() {
            self.inner.exchange(method, request, response);
        }
    }

    fn flush(&mut self) {
        self.off();
        self.inner.flush();
    }

    /// The switch is looked at again with the next observation.
    fn settled(&self) -> bool {
        self.inner.settled()
    }

    fn finish(&mut self, dropped: u64) {
        self.inner.finish(dropped);
    }
}
