//! The local writer: appends a run's records to its journal and degrades
//! gracefully when the disk says no.
//!
//! On a write error (disk full, read-only, the store deleted…) the writer
//! warns once, keeps records in a bounded memory queue, and tries the disk
//! again at most every [`RETRY`]. When the disk recovers, the queued records
//! are written in order (the journal's torn tail is cut on reopen). Records
//! that do not fit in memory are dropped oldest first and counted; the run
//! is then finished as `lossy`. The relay never notices any of this: the
//! writer runs on the observer thread.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::journal::{self, JournalFile};
use super::store::Store;

const RETRY: Duration = Duration::from_secs(5);
const MAX_QUEUED_RECORDS: usize = 2000;
const MAX_QUEUED_BYTES: usize = 32 * 1024 * 1024;

pub struct LocalWriter {
    store: Store,
    run_id: String,
    file: Option<Box<dyn JournalFile>>,
    queued: VecDeque<Vec<u8>>,
    queued_bytes: usize,
    failed_at: Option<Instant>,
    warned: bool,
    lost: u64,
    /// Written since the last successful sync.
    dirty: bool,
}

impl LocalWriter {
    pub fn new(store: Store, run_id: String) -> LocalWriter {
        LocalWriter {
            store,
            run_id,
            file: None,
            queued: VecDeque::new(),
            queued_bytes: 0,
            failed_at: None,
            warned: false,
            lost: 0,
            dirty: false,
        }
    }

    /// Records lost because the disk failed for too long.
    pub fn lost(&self) -> u64 {
        self.lost
    }

    /// Queues one record (a JSON payload) and writes what it can.
    pub fn write(&mut self, payload: &[u8]) {
        let framed = journal::frame(payload);
        self.queued_bytes += framed.len();
        self.queued.push_back(framed);
        while self.queued.len() > MAX_QUEUED_RECORDS || self.queued_bytes > MAX_QUEUED_BYTES {
            if let Some(old) = self.queued.pop_front() {
                self.queued_bytes -= old.len();
                self.lost += 1;
            }
        }
        self.drain();
    }

    /// Writes what is queued and makes it durable.
    pub fn sync(&mut self) {
        self.drain();
        if !self.dirty {
            return;
        }
        if let Some(file) = self.file.as_mut() {
            match file.sync() {
                Ok(()) => self.dirty = false,
                Err(err) => self.failed(&err),
            }
        }
    }

    /// At the end of a run: one last word if records are stuck in memory.
    pub fn report_if_degraded(&self) {
        if !self.queued.is_empty() || self.lost > 0 {
            log::warn!(
                "run {}: {} record(s) could not be written to {} and {} were dropped; the run is incomplete",
                self.run_id,
                self.queued.len(),
                self.store.dir().display(),
                self.lost
            );
        }
    }

    fn drain(&mut self) {
        if self.queued.is_empty() {
            return;
        }
        if self.failed_at.is_some_and(|t| t.elapsed() < RETRY) {
            return;
        }
        if self.file.is_none() {
            match self.store.open_writer(&self.run_id) {
                Ok(file) => self.file = Some(file),
                Err(err) => return self.failed(&err),
            }
        }
        while let Some(front) = self.queued.front() {
            let Some(file) = self.file.as_mut() else {
                return;
            };
            match file.append(front) {
                Ok(()) => {
                    if let Some(done) = self.queued.pop_front() {
                        self.queued_bytes -= done.len();
                    }
                    self.dirty = true;
                }
                Err(err) => return self.failed(&err),
            }
        }
        if self.failed_at.take().is_some() && self.warned {
            log::warn!("recording to {} works again", self.store.dir().display());
        }
    }

    fn failed(&mut self, err: &std::io::Error) {
        // Reopen next time: that also cuts a partly written record.
        self.file = None;
        self.failed_at = Some(Instant::now());
        if !self.warned {
            self.warned = true;
            log::warn!(
                "cannot write run {} to {}: {err}. Keeping records in memory and retrying every {}s; the relay is not affected",
                self.run_id,
                self.store.dir().display(),
                RETRY.as_secs()
            );
        }
    }
}
