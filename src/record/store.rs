//! The local store: one journal per run under `$BIR_HOME/runs/`.
//!
//! Invariants:
//! * `$BIR_HOME` and `runs/` are directories owned by the user with mode
//!   0700 (tightened if we own them, refused if a symlink or someone
//!   else's); journals are 0600 and opened with `O_NOFOLLOW`.
//! * Durability: records are written as they come and `fsync`ed in batches
//!   — whenever the recorder's queue runs dry, and at the end of a run. A
//!   record the recorder has synced survives a crash; a torn tail is cut on
//!   the next open and never read as data.
//! * Each proxy process writes only its own run files, so concurrent
//!   sessions never interleave bytes; it holds its journal's lock while it
//!   lives (see `journal.rs`), and nothing else writes or deletes a journal
//!   whose lock is held.

use std::fs::{self};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::index::{self, RunSummary};
use super::journal::{self, DiskStorage, JOURNAL_SUFFIX, JournalFile, Storage};
use super::model::{
    Record, RunEvent, RunFinish, RunHeader, ServerSnapshot, SessionEvent, Step, Turn,
};
use crate::error::{Context, Error};
use crate::home::{bir_home, ensure_private_dir, report_page};

/// The word that names the newest agent session wherever a run is asked
/// for: the newest run whose header names no bir command that made it
/// (`replay`, `verify`, `mock`), so `bir verify latest` after `bir replay`
/// checks the agent's session again, not the replay.
pub(crate) const LATEST: &str = "latest";

/// The runs directory and how to write into it.
#[derive(Clone)]
pub(crate) struct Store {
    dir: PathBuf,
    storage: Arc<dyn Storage>,
}

/// One run as read back from its journal.
#[derive(Debug, Default)]
pub(crate) struct LoadedRun {
    pub path: PathBuf,
    pub header: Option<RunHeader>,
    pub snapshots: Vec<ServerSnapshot>,
    pub steps: Vec<Step>,
    /// Bound runs: the prompts, in order.
    pub turns: Vec<Turn>,
    /// Bound runs: session events that are not steps.
    pub events: Vec<SessionEvent>,
    pub finish: Option<RunFinish>,
    pub records: Vec<Record>,
    /// Highest sequence number the recording service acknowledged.
    pub acked: u64,
    /// Bytes at the end of the journal that were not a valid record.
    pub torn_bytes: u64,
    /// Records that did not parse as events (a newer format, say).
    pub unknown_records: u64,
}

impl LoadedRun {
    pub(crate) fn id(&self) -> String {
        self.header
            .as_ref()
            .map(|h| h.id.clone())
            .unwrap_or_else(|| {
                self.path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .and_then(|n| n.strip_suffix(JOURNAL_SUFFIX))
                    .unwrap_or("?")
                    .to_owned()
            })
    }

    /// Unfinished, and no writer holds its journal: its proxy died before
    /// it could end the run (killed, or the machine stopped). Such a run
    /// will never be finished; it is not `open`.
    pub(crate) fn interrupted(&self) -> bool {
        self.finish.is_none() && !journal::is_held(&self.path)
    }

    pub(crate) fn last_seq(&self) -> u64 {
        self.records.last().map_or(0, |r| r.seq)
    }

    /// Adds one journal record's payload to the run (a reader following a
    /// live journal adds them as they arrive). One that does not parse as
    /// a record (a newer format, say) is counted, not kept.
    pub(crate) fn absorb(&mut self, payload: &[u8]) {
        let Ok(record) = serde_json::from_slice::<Record>(payload) else {
            self.unknown_records += 1;
            return;
        };
        match &record.event {
            RunEvent::RunStarted(h) => self.header = Some(h.clone()),
            RunEvent::ServerSnapshot(s) => self.snapshots.push(s.clone()),
            RunEvent::Step(s) => self.steps.push(s.clone()),
            RunEvent::RunFinished(f) => self.finish = Some(f.clone()),
            RunEvent::RemoteAck(a) => self.acked = self.acked.max(a.up_to),
            RunEvent::Turn(t) => self.turns.push(t.clone()),
            RunEvent::SessionEvent(e) => self.events.push(e.clone()),
        }
        self.records.push(record);
    }
}

impl Store {
    /// The store under `$BIR_HOME/runs`, created if needed.
    pub(crate) fn open_default() -> io::Result<Store> {
        let home = bir_home().ok_or_else(|| {
            io::Error::other("no home directory: set BIR_HOME to choose where runs are stored")
        })?;
        Store::open(&home.join("runs"), Arc::new(DiskStorage))
    }

    pub(crate) fn open(dir: &Path, storage: Arc<dyn Storage>) -> io::Result<Store> {
        if let Some(parent) = dir.parent() {
            ensure_private_dir(parent)?;
        }
        ensure_private_dir(dir)?;
        Ok(Store {
            dir: dir.to_owned(),
            storage,
        })
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    pub(crate) fn journal_path(&self, run_id: &str) -> PathBuf {
        self.dir.join(format!("{run_id}{JOURNAL_SUFFIX}"))
    }

    pub(crate) fn open_writer(&self, run_id: &str) -> io::Result<Box<dyn JournalFile>> {
        // The directory may have been deleted under us: recreate it.
        ensure_private_dir(&self.dir)?;
        self.storage.open_append(&self.journal_path(run_id))
    }

    /// The journals in the store last written after `since` (all of them
    /// if `None`), least recently written first, with that time, without
    /// reading them (a caller that goes through them one at a time holds
    /// one run in memory, not the whole store).
    pub(crate) fn journals_written_after(
        &self,
        since: Option<SystemTime>,
    ) -> io::Result<Vec<(SystemTime, PathBuf)>> {
        let mut found = Vec::new();
        for entry in fs::read_dir(&self.dir)? {
            let entry = entry?;
            let path = entry.path();
            if !path.to_string_lossy().ends_with(JOURNAL_SUFFIX) || !is_regular(&entry) {
                continue;
            }
            let written = entry
                .metadata()
                .and_then(|m| m.modified())
                .unwrap_or(SystemTime::UNIX_EPOCH);
            if since.is_none_or(|t| written > t) {
                found.push((written, path));
            }
        }
        found.sort();
        Ok(found)
    }

    /// Every journal in the store, newest first (by start time).
    pub(crate) fn list(&self) -> io::Result<Vec<LoadedRun>> {
        let mut runs = Vec::new();
        for entry in fs::read_dir(&self.dir)? {
            let entry = entry?;
            let path = entry.path();
            if path.to_string_lossy().ends_with(JOURNAL_SUFFIX)
                && is_regular(&entry)
                && let Ok(run) = load_path(&path)
            {
                runs.push(run);
            }
        }
        runs.sort_by(|a, b| {
            start_of(b)
                .cmp(&start_of(a))
                .then_with(|| b.id().cmp(&a.id()))
        });
        Ok(runs)
    }

    /// Every run in the store, newest first, as the listing index
    /// summarises it (see `index.rs`): without reading every journal
    /// whole, and always as fresh as the journals.
    pub(crate) fn summaries(&self) -> io::Result<Vec<RunSummary>> {
        index::summaries(&self.dir)
    }

    /// Finds a run by id, unique id prefix (with or without `run_`), or
    /// `latest`, and reads it: only its own journal is read whole. Every
    /// command that takes a run resolves it here, so `latest` means the
    /// same everywhere: the newest agent session ([`LATEST`]).
    pub(crate) fn find(&self, wanted: &str) -> Result<LoadedRun, Error> {
        let summary = self.find_summary(wanted)?;
        load_path(&self.dir.join(&summary.file))
            .context(|| format!("cannot read {}", self.dir.join(&summary.file).display()))
    }

    /// The summary of the run `wanted` names (as [`Store::find`] reads it).
    pub(crate) fn find_summary(&self, wanted: &str) -> Result<RunSummary, Error> {
        let runs = self
            .summaries()
            .context(|| format!("cannot read {}", self.dir.display()))?;
        if wanted == LATEST {
            let any = !runs.is_empty();
            return runs
                .into_iter()
                .find(RunSummary::is_agent_session)
                .ok_or_else(|| {
                    Error::failure(if any {
                        format!(
                            "no agent session in {} (`latest` never names a run bir's replay, verify or mock made; see `bir runs --all` and give its id)",
                            self.dir.display()
                        )
                    } else {
                        format!("no runs in {}", self.dir.display())
                    })
                });
        }
        let bare = wanted.strip_prefix("run_").unwrap_or(wanted);
        if bare.trim().is_empty() {
            // An empty id (an unset `"$ID"` in a script) is a prefix of
            // every run: it must name none, not whichever run is alone.
            return Err(Error::usage(format!(
                "`{wanted}` is not a run id; give an id, a unique prefix of one, or `latest`"
            )));
        }
        let mut matches: Vec<RunSummary> = runs
            .into_iter()
            .filter(|r| r.id.strip_prefix("run_").unwrap_or("").starts_with(bare))
            .collect();
        match matches.len() {
            0 => Err(Error::failure(format!(
                "no run matches `{wanted}` (see `bir runs`)"
            ))),
            1 => Ok(matches.remove(0)),
            n => Err(Error::failure(format!(
                "`{wanted}` matches {n} runs; give more of the id"
            ))),
        }
    }

    /// The watermark `name` (a file in the store): the time a sender's
    /// last complete pass began (see `service::sync::CatchUp`). `None`
    /// when absent or unreadable, which only means a full pass next time.
    pub(crate) fn read_watermark(&self, name: &str) -> Option<SystemTime> {
        let text = fs::read_to_string(self.dir.join(name)).ok()?;
        let nanos: u64 = text.trim().parse().ok()?;
        SystemTime::UNIX_EPOCH.checked_add(Duration::from_nanos(nanos))
    }

    /// Replaces the watermark `name` atomically (a torn one would be
    /// unreadable, and an unreadable one costs a full pass).
    pub(crate) fn write_watermark(&self, name: &str, at: SystemTime) -> io::Result<()> {
        let nanos = at
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_err(io::Error::other)?
            .as_nanos();
        let tmp = self.dir.join(format!("{name}.{}", std::process::id()));
        let mut file = crate::home::private_file()
            .create(true)
            .truncate(true)
            .write(true)
            .open(&tmp)?;
        std::io::Write::write_all(&mut file, format!("{nanos}\n").as_bytes())?;
        drop(file);
        fs::rename(&tmp, self.dir.join(name))
    }

    /// Deletes the run's journal, and the report page `bir report` wrote
    /// for it by default (a copy of the run's data).
    pub(crate) fn remove(&self, run: &LoadedRun) -> io::Result<()> {
        fs::remove_file(&run.path)?;
        remove_report_page(&run.id());
        Ok(())
    }

    /// Deletes finished runs beyond `keep` (newest kept) or older than
    /// `max_age`. Unfinished runs are left alone: a proxy may be writing.
    /// So is a finished run whose journal someone holds (its proxy still
    /// noting what the service acknowledged, or `bir sync` sending it):
    /// the journal is claimed before it is deleted.
    pub(crate) fn apply_retention(
        &self,
        keep: Option<usize>,
        max_age: Option<Duration>,
    ) -> io::Result<usize> {
        let runs = self.summaries()?;
        let now = SystemTime::now();
        let mut removed = 0;
        for (i, run) in runs.iter().enumerate() {
            let path = self.dir.join(&run.file);
            let too_many = keep.is_some_and(|k| i >= k);
            let too_old = max_age.is_some_and(|age| {
                fs::metadata(&path)
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|m| now.duration_since(m).ok())
                    .is_some_and(|d| d > age)
            });
            if (too_many || too_old)
                && run.finished
                && let Ok(Some(_held)) = journal::claim(&path)
                && fs::remove_file(&path).is_ok()
            {
                remove_report_page(&run.id);
                removed += 1;
            }
        }
        Ok(removed)
    }
}

/// A missing page is the common case (not every run has one); any other
/// failure leaves a page behind, which `bir runs rm` is not the place to
/// report over the run's own removal.
fn remove_report_page(run_id: &str) {
    if let Some(page) = report_page(run_id) {
        let _ = fs::remove_file(page);
    }
}

/// A directory entry that is a regular file (not a FIFO, socket, device,
/// directory or symlink); journals are only ever regular files.
fn is_regular(entry: &fs::DirEntry) -> bool {
    entry.file_type().is_ok_and(|t| t.is_file())
}

fn start_of(run: &LoadedRun) -> String {
    run.header
        .as_ref()
        .map(|h| h.started_at.clone())
        .unwrap_or_default()
}

/// Reads and interprets one journal.
pub(crate) fn load_path(path: &Path) -> io::Result<LoadedRun> {
    let read = journal::read(path)?;
    let mut run = LoadedRun {
        path: path.to_owned(),
        torn_bytes: read.torn_bytes,
        ..LoadedRun::default()
    };
    for bytes in read.records {
        run.absorb(&bytes);
    }
    Ok(run)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::model::{Record, RunFinish, RunMetrics};

    /// A `run_finished` record (a run retention may remove).
    fn finished_record() -> Record {
        Record {
            seq: 1,
            event: RunEvent::RunFinished(RunFinish {
                finished_at: "2026-01-01T00:00:00.000Z".into(),
                output: None,
                metrics: RunMetrics::default(),
                lossy: false,
                dropped: 0,
                reason: None,
                model: None,
            }),
        }
    }

    /// A finished run whose journal someone holds (its proxy noting the
    /// service's acknowledgements, or `bir sync` sending it) outlives
    /// retention; once let go, it is removed.
    #[test]
    fn retention_leaves_a_held_journal_alone() {
        let dir = std::env::temp_dir().join(format!("bir-store-held-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = Store::open(&dir.join("runs"), Arc::new(DiskStorage)).expect("store");
        let finished = finished_record();
        let json = serde_json::to_vec(&finished).expect("json");
        let mut held = store.open_writer("run_held").expect("open");
        held.append(&journal::frame(&json)).expect("append");
        held.sync().expect("sync");

        assert_eq!(store.apply_retention(Some(0), None).expect("retention"), 0);
        assert!(store.journal_path("run_held").exists(), "a held run");
        assert!(
            journal::claim(&store.journal_path("run_held"))
                .expect("claim")
                .is_none(),
            "one writer at a time"
        );
        drop(held);
        assert_eq!(store.apply_retention(Some(0), None).expect("retention"), 1);
        assert!(!store.journal_path("run_held").exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Runs `f` on its own thread and waits for it (generously): a call
    /// that blocks on a FIFO would never return, so "did not finish" is
    /// the failure, not a hang of the whole test binary.
    fn finishes<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("{what} blocked on a FIFO named like a journal"))
    }

    /// A FIFO (or any non-regular file) named like a journal is not a run:
    /// listing, lookup, retention, claiming and reading all pass it by
    /// without opening it for good, and without waiting for a writer.
    #[test]
    fn a_fifo_named_like_a_journal_blocks_nothing() {
        let dir = std::env::temp_dir().join(format!("bir-store-fifo-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = Store::open(&dir.join("runs"), Arc::new(DiskStorage)).expect("store");
        let mut real = store.open_writer("run_real").expect("open");
        let finished = finished_record();
        real.append(&journal::frame(
            &serde_json::to_vec(&finished).expect("json"),
        ))
        .expect("append");
        drop(real);
        let fifo = store.journal_path("run_fifo");
        let c = std::ffi::CString::new(fifo.to_string_lossy().as_bytes()).expect("path");
        // SAFETY: `c` is a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");

        let s = store.clone();
        let ids: Vec<String> = finishes("list", move || {
            s.list().expect("list").iter().map(LoadedRun::id).collect()
        });
        assert_eq!(ids, ["run_real"]);
        let s = store.clone();
        let found = finishes("find", move || s.find("f").map(|r| r.id()));
        assert!(found.is_err(), "the FIFO is no run: {found:?}");
        let path = fifo.clone();
        let read = finishes("read", move || journal::read(&path).map(|_| ()));
        assert!(read.is_err(), "a FIFO is not read as a journal");
        let path = fifo.clone();
        let claimed = finishes("claim", move || journal::claim(&path).map(|j| j.is_some()));
        assert!(claimed.is_err(), "a FIFO is not claimed as a journal");
        let s = store.clone();
        let writer = finishes("open_writer", move || s.open_writer("run_fifo").map(|_| ()));
        assert!(writer.is_err(), "a FIFO is not appended to");
        let s = store.clone();
        let removed = finishes("retention", move || s.apply_retention(Some(0), None));
        assert_eq!(removed.expect("retention"), 1, "the real run goes");
        assert!(fifo.exists(), "the FIFO is left alone");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A run nobody finished reads `interrupted` once no writer holds its
    /// journal, `open` while one does.
    #[test]
    fn an_unfinished_run_without_a_writer_is_interrupted() {
        let dir = std::env::temp_dir().join(format!("bir-store-dead-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = Store::open(&dir.join("runs"), Arc::new(DiskStorage)).expect("store");
        let mut writer = store.open_writer("run_live").expect("open");
        writer.append(&journal::frame(b"{}")).expect("append");
        let run = load_path(&store.journal_path("run_live")).expect("load");
        assert!(!run.interrupted(), "its writer is alive");
        drop(writer);
        assert!(run.interrupted(), "its writer is gone");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// An empty id (an unset `"$ID"`) is a prefix of every id: it names no
    /// run, even when the store holds just one.
    #[test]
    fn an_empty_id_names_no_run() {
        let dir = std::env::temp_dir().join(format!("bir-store-empty-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = Store::open(&dir.join("runs"), Arc::new(DiskStorage)).expect("store");
        let mut only = store.open_writer("run_only").expect("open");
        only.append(&journal::frame(b"{}")).expect("append");
        drop(only);
        for wanted in ["", "run_", " ", "run_ "] {
            assert!(store.find(wanted).is_err(), "`{wanted}` named a run");
        }
        assert_eq!(
            store.find("on").map(|r| r.id()).ok().as_deref(),
            Some("run_only")
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
