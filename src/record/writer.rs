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
//!
//! If the journal is deleted under it (`rm -rf` of the store, `bir runs
//! rm`), what it held is lost: the writer says so once, counts it, and
//! continues in a new journal of the same name that starts with the run's
//! header again, so the rest of the run still reads (and syncs) as that
//! run, finished as `lossy`.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::journal::{self, JournalFile};
use super::store::Store;

/// How long the disk is left alone after a failure: short, so that a
/// store back from a brief outage (a remount, a full disk cleaned up) takes
/// the waiting records within a second; one failed open a second costs
/// nothing while it lasts.
const RETRY: Duration = Duration::from_secs(1);
const MAX_QUEUED_RECORDS: usize = 2000;
const MAX_QUEUED_BYTES: usize = 32 * 1024 * 1024;
/// Queued bytes that trigger a write before the next `sync`.
const BATCH_BYTES: usize = 256 * 1024;
/// How often, at most, an idle moment makes the journal durable. Records
/// still reach the file at every idle moment (a crash of the proxy loses
/// nothing written); only the `fsync` waits, because a fast sequence of
/// calls would otherwise pay one per call, in the disk and in the kernel's
/// journalling threads that run beside the relay.
const SYNC_EVERY: Duration = Duration::from_millis(100);

pub(crate) struct LocalWriter {
    store: Store,
    run_id: String,
    file: Option<Box<dyn JournalFile>>,
    /// Framed records not yet written, with their sequence numbers.
    queued: VecDeque<(u64, Vec<u8>)>,
    queued_bytes: usize,
    failed_at: Option<Instant>,
    /// How long to leave the disk alone after a failure.
    retry: Duration,
    warned: bool,
    lost: u64,
    /// Of `lost`, what a warning already named (a deleted journal's
    /// records): the end of the run does not say it again.
    lost_told: u64,
    /// The run's first record, framed: its header (the recorder writes it
    /// first). A journal started again after a deletion begins with it.
    header: Option<(u64, Vec<u8>)>,
    /// Written since the last successful sync.
    dirty: bool,
    /// Records appended to the current file.
    written: u64,
    /// The last successful `fsync`.
    synced_at: Option<Instant>,
    /// The size of the last record serialised here: the next one's buffer
    /// is allocated that large (records of a run are alike).
    last_payload: usize,
}

impl LocalWriter {
    pub(crate) fn new(store: Store, run_id: String) -> LocalWriter {
        LocalWriter {
            store,
            run_id,
            file: None,
            queued: VecDeque::new(),
            queued_bytes: 0,
            failed_at: None,
            retry: RETRY,
            warned: false,
            lost: 0,
            lost_told: 0,
            header: None,
            dirty: false,
            written: 0,
            synced_at: None,
            last_payload: 0,
        }
    }

    #[cfg(test)]
    fn with_retry(mut self, retry: Duration) -> LocalWriter {
        self.retry = retry;
        self
    }

    /// Records lost because the disk failed for too long, or with a
    /// journal deleted under the writer.
    pub(crate) fn lost(&self) -> u64 {
        self.lost
    }

    /// [`LocalWriter::lost`], after looking whether the journal was deleted
    /// since the last flush: called when the run's end is written, so that
    /// the end counts a deletion its own `sync` would only notice after it
    /// (a writer held up in an `fsync` meanwhile).
    pub(crate) fn lost_by_now(&mut self) -> u64 {
        self.check_journal_still_there();
        self.lost
    }

    /// Queues one record (its sequence number and JSON payload). Records
    /// are written in batches: when enough are queued, and at every `sync`.
    pub(crate) fn write(&mut self, seq: u64, payload: &[u8]) {
        self.queue_framed(seq, journal::frame(payload));
    }

    /// Queues one record, serialising `record` straight into its frame
    /// (see [`journal::frame_with`]). Nothing is queued if it does not
    /// serialise.
    pub(crate) fn write_json<T: serde::Serialize>(
        &mut self,
        seq: u64,
        record: &T,
    ) -> serde_json::Result<()> {
        let framed = journal::frame_with(self.last_payload, |out| {
            serde_json::to_writer(&mut *out, record)
        })?;
        self.last_payload = framed.len();
        self.queue_framed(seq, framed);
        Ok(())
    }

    fn queue_framed(&mut self, seq: u64, framed: Vec<u8>) {
        if self.header.is_none() {
            self.header = Some((seq, framed.clone()));
        }
        self.queued_bytes += framed.len();
        self.queued.push_back((seq, framed));
        while self.queued.len() > MAX_QUEUED_RECORDS || self.queued_bytes > MAX_QUEUED_BYTES {
            if let Some((_, old)) = self.queued.pop_front() {
                self.queued_bytes -= old.len();
                self.lost += 1;
            }
        }
        if self.queued_bytes >= BATCH_BYTES {
            self.drain();
        }
    }

    /// Writes what is queued and makes it durable.
    pub(crate) fn sync(&mut self) {
        self.check_journal_still_there();
        self.drain();
        if !self.dirty {
            return;
        }
        if let Some(file) = self.file.as_mut() {
            match file.sync() {
                Ok(()) => {
                    self.dirty = false;
                    self.synced_at = Some(Instant::now());
                }
                Err(err) => self.failed(&err),
            }
        }
    }

    /// At an idle moment: writes what is queued, and makes it durable unless
    /// that was done less than [`SYNC_EVERY`] ago (then a later idle moment
    /// does it: until the writer is [`settled`](Self::settled), the
    /// observer has one at least every 50 ms).
    pub(crate) fn sync_soon(&mut self) {
        if self.synced_at.is_none_or(|at| at.elapsed() >= SYNC_EVERY) {
            return self.sync();
        }
        self.check_journal_still_there();
        self.drain();
    }

    /// Everything written was synced and nothing waits for a retry: no
    /// later flush has anything to do. (Whether the journal was deleted
    /// meanwhile is looked at by the next flush, after the next record.)
    pub(crate) fn settled(&self) -> bool {
        !self.dirty && self.queued.is_empty()
    }

    /// Records waiting in memory for the store to take them.
    pub(crate) fn waiting(&self) -> usize {
        self.queued.len()
    }

    /// The run's id.
    pub(crate) fn run_id(&self) -> &str {
        &self.run_id
    }

    /// At the end of a run: one last word if records are stuck in memory.
    pub(crate) fn report_if_degraded(&self) {
        if !self.queued.is_empty() || self.lost > self.lost_told {
            log::warn!(
                "run {}: {} record(s) could not be written to {} and {} were dropped; the run is incomplete",
                self.run_id,
                self.queued.len(),
                self.store.dir().display(),
                self.lost - self.lost_told
            );
        }
    }

    fn drain(&mut self) {
        if self.queued.is_empty() {
            return;
        }
        if self.failed_at.is_some_and(|t| t.elapsed() < self.retry) {
            return;
        }
        if self.file.is_none() {
            match self.store.open_writer(&self.run_id) {
                Ok(file) => {
                    self.file = Some(file);
                    self.written = 0;
                    if self.failed_at.is_some() {
                        self.skip_persisted();
                    }
                }
                Err(err) => return self.failed(&err),
            }
        }
        // One write for the whole batch. If it fails part-way, the reopen
        // above cuts the torn record and `skip_persisted` drops from the
        // queue what did land, so no record is written twice.
        let mut batch = Vec::with_capacity(self.queued_bytes);
        for (_, framed) in &self.queued {
            batch.extend_from_slice(framed);
        }
        let Some(file) = self.file.as_mut() else {
            return;
        };
        match file.append(&batch) {
            Ok(()) => {
                self.written += self.queued.len() as u64;
                self.queued.clear();
                self.queued_bytes = 0;
                self.dirty = true;
            }
            Err(err) => return self.failed(&err),
        }
        if self.failed_at.take().is_some() && self.warned {
            log::warn!("recording to {} works again", self.store.dir().display());
        }
    }

    /// After a failed write: drops queued records the journal already holds
    /// (a batch may have landed in part before the error).
    fn skip_persisted(&mut self) {
        let path = self.store.journal_path(&self.run_id);
        let last = journal::read(&path)
            .ok()
            .and_then(|r| r.records.last().cloned())
            .and_then(|bytes| serde_json::from_slice::<super::model::Record>(&bytes).ok())
            .map_or(0, |r| r.seq);
        while self.queued.front().is_some_and(|(seq, _)| *seq <= last) {
            if let Some((_, framed)) = self.queued.pop_front() {
                self.queued_bytes -= framed.len();
            }
        }
    }

    /// The journal (or the whole store) was deleted while we had it open:
    /// what was written is gone. Say so once, count it, start a new file
    /// with the run's header, so that what follows is still this run.
    fn check_journal_still_there(&mut self) {
        if self.file.is_none() || self.written == 0 {
            return;
        }
        let path = self.store.journal_path(&self.run_id);
        if std::fs::symlink_metadata(&path).is_err() {
            // The header is written again; the rest of the file is lost.
            let lost = self.written.saturating_sub(1);
            log::warn!(
                "the journal {} was deleted while recording; {lost} record(s) are lost, the run continues in a new file",
                path.display(),
            );
            self.lost += lost;
            self.lost_told += lost;
            self.written = 0;
            self.file = None;
            if let Some((seq, framed)) = self.header.clone()
                && self.queued.front().is_none_or(|(first, _)| *first != seq)
            {
                self.queued_bytes += framed.len();
                self.queued.push_front((seq, framed));
            }
        }
    }

    fn failed(&mut self, err: &std::io::Error) {
        // Reopen next time: that also cuts a partly written record.
        self.file = None;
        self.failed_at = Some(Instant::now());
        if !self.warned {
            self.warned = true;
            log::warn!(
                "cannot write run {} to {}: {err}. Keeping records in memory (up to {MAX_QUEUED_RECORDS} records, {} MiB) and retrying every {}s; the relay is not affected",
                self.run_id,
                self.store.dir().display(),
                MAX_QUEUED_BYTES / (1024 * 1024),
                RETRY.as_secs()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::journal::{DiskStorage, Storage};
    use std::io;
    use std::path::Path;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// Fails appends number `from`..`to` (1-based, counted across files)
    /// with `errno`, writing half the bytes first (a short write).
    struct Faulty {
        ops: Arc<AtomicU64>,
        from: u64,
        to: u64,
        errno: i32,
    }

    struct FaultyFile {
        inner: Box<dyn JournalFile>,
        ops: Arc<AtomicU64>,
        from: u64,
        to: u64,
        errno: i32,
    }

    impl Storage for Faulty {
        fn open_append(&self, path: &Path) -> io::Result<Box<dyn JournalFile>> {
            Ok(Box::new(FaultyFile {
                inner: DiskStorage.open_append(path)?,
                ops: Arc::clone(&self.ops),
                from: self.from,
                to: self.to,
                errno: self.errno,
            }))
        }
    }

    impl JournalFile for FaultyFile {
        fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
            let n = self.ops.fetch_add(1, Ordering::SeqCst) + 1;
            if n >= self.from && n <= self.to {
                self.inner.append(&bytes[..bytes.len() / 2])?;
                return Err(io::Error::from_raw_os_error(self.errno));
            }
            self.inner.append(bytes)
        }
        fn sync(&mut self) -> io::Result<()> {
            self.inner.sync()
        }
    }

    fn records(n: usize) -> Vec<Vec<u8>> {
        (1..=n)
            .map(|i| {
                format!(
                    r#"{{"seq":{i},"event":{{"kind":"remote_ack","data":{{"upTo":0,"at":"t"}}}}}}"#
                )
                .into_bytes()
            })
            .collect()
    }

    fn run_with(from: u64, to: u64, errno: i32, n: usize) -> (Vec<Vec<u8>>, u64) {
        let dir = std::env::temp_dir().join(format!(
            "bir-writer-{}-{from}-{to}-{errno}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let storage = Arc::new(Faulty {
            ops: Arc::new(AtomicU64::new(0)),
            from,
            to,
            errno,
        });
        let store = Store::open(&dir.join("runs"), storage).expect("store");
        let mut w = LocalWriter::new(store.clone(), "run_x".into()).with_retry(Duration::ZERO);
        for (i, r) in records(n).iter().enumerate() {
            w.write(i as u64 + 1, r);
            w.sync();
        }
        w.sync();
        let got = journal::read(&store.journal_path("run_x"))
            .expect("read")
            .records;
        let _ = std::fs::remove_dir_all(&dir);
        (got, w.lost())
    }

    /// Counts `fsync`s.
    struct CountingSyncs(Arc<AtomicU64>);
    struct CountingFile(Box<dyn JournalFile>, Arc<AtomicU64>);

    impl Storage for CountingSyncs {
        fn open_append(&self, path: &Path) -> io::Result<Box<dyn JournalFile>> {
            Ok(Box::new(CountingFile(
                DiskStorage.open_append(path)?,
                Arc::clone(&self.0),
            )))
        }
    }

    impl JournalFile for CountingFile {
        fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
            self.0.append(bytes)
        }
        fn sync(&mut self) -> io::Result<()> {
            self.1.fetch_add(1, Ordering::SeqCst);
            self.0.sync()
        }
    }

    /// The journal is deleted after its records were written and before
    /// the run's end: the end counts them (the writer's next `sync` comes
    /// only after the end record is built).
    #[test]
    fn a_journal_deleted_before_the_end_is_counted_by_the_end() {
        let dir = std::env::temp_dir().join(format!("bir-writer-deleted-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = Store::open(&dir.join("runs"), Arc::new(DiskStorage)).expect("store");
        let mut w = LocalWriter::new(store.clone(), "run_x".into());
        for (i, r) in records(3).iter().enumerate() {
            w.write(i as u64 + 1, r);
        }
        w.sync();
        std::fs::remove_file(store.journal_path("run_x")).expect("rm the journal");
        assert_eq!(w.lost(), 0, "not noticed yet");
        assert_eq!(w.lost_by_now(), 2, "all but the header, rewritten");
        w.write(4, &records(4)[3]);
        w.sync();
        let got = journal::read(&store.journal_path("run_x"))
            .expect("read")
            .records;
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(got.len(), 2, "the header again, then the rest");
    }

    #[test]
    fn idle_moments_write_at_once_and_fsync_at_most_every_interval() {
        let dir = std::env::temp_dir().join(format!("bir-writer-syncs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let syncs = Arc::new(AtomicU64::new(0));
        let store = Store::open(
            &dir.join("runs"),
            Arc::new(CountingSyncs(Arc::clone(&syncs))),
        )
        .expect("store");
        let mut w = LocalWriter::new(store.clone(), "run_x".into());
        let read = || {
            journal::read(&store.journal_path("run_x"))
                .map(|o| o.records.len())
                .unwrap_or(0)
        };
        let recs = records(50);
        assert!(w.settled(), "nothing written yet");
        w.write(1, &recs[0]);
        assert!(!w.settled(), "written, not synced");
        w.sync_soon();
        assert_eq!(
            (read(), syncs.load(Ordering::SeqCst)),
            (1, 1),
            "the first is synced"
        );
        assert!(w.settled(), "synced");
        let started = Instant::now();
        for (i, r) in recs.iter().enumerate().skip(1) {
            w.write(i as u64 + 1, r);
            w.sync_soon();
            assert_eq!(read(), i + 1, "every record is in the file at once");
        }
        if started.elapsed() < SYNC_EVERY {
            assert_eq!(
                syncs.load(Ordering::SeqCst),
                1,
                "no fsync within the interval"
            );
            assert!(!w.settled(), "the observer must come back to sync");
        }
        // The interval passing is the point, not an event to wait on.
        std::thread::sleep(SYNC_EVERY);
        w.sync_soon();
        assert!(
            syncs.load(Ordering::SeqCst) >= 2,
            "the next idle moment after it syncs"
        );
        assert!(w.settled());
        let before = syncs.load(Ordering::SeqCst);
        w.sync_soon();
        assert_eq!(
            syncs.load(Ordering::SeqCst),
            before,
            "nothing new, no fsync"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn every_transient_failure_point_recovers_without_loss() {
        for errno in [libc::ENOSPC, libc::EIO, libc::EROFS] {
            for n in 1..=6 {
                let (got, lost) = run_with(n, n, errno, 6);
                assert_eq!(got, records(6), "fail once at op {n}, errno {errno}");
                assert_eq!(lost, 0);
            }
        }
    }

    #[test]
    fn a_persistent_failure_never_duplicates_or_reorders() {
        // Appends 2..=40 fail after writing half their bytes: whatever landed
        // is an ordered prefix of the records, each once.
        let (got, lost) = run_with(2, 40, libc::ENOSPC, 10);
        assert_eq!(got, records(10)[..got.len()].to_vec());
        // Appends 2..=5 fail: once the disk recovers, every record is there
        // exactly once, in order.
        let (got, lost2) = run_with(2, 5, libc::ENOSPC, 10);
        assert_eq!(got, records(10));
        assert_eq!(lost + lost2, 0, "nothing dropped while memory sufficed");
    }
}
