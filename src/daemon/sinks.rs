//! Where the engine's [`Output`]s go: the local store (one
//! [`LocalWriter`] per open run, the same journals `bir runs` reads), the
//! recording service and the OpenTelemetry exporter when configured, and
//! transcript reads fed back to the engine.
//!
//! Invariants:
//! * Records reach a run's writer in the order the engine emitted them;
//!   the engine and the sinks sit behind one lock in the daemon.
//! * A run's writer is synced at its `run_finished`; nothing of that run is
//!   written after it. If the store does not take the records then (a short
//!   outage: read-only, full, remounted), the writer is kept and retried at
//!   every tick until the store takes them, for [`STORE_PATIENCE`] at most
//!   and [`MAX_WAITING_RUNS`] runs at once; only then is the run given up,
//!   with an error naming it and what it lost. Records a writer had to drop
//!   (its memory is bounded) make the run's `run_finished` say `lossy`.
//! * Transcript reads are handed to the reader thread (`transcripts`):
//!   never done under the daemon's lock, which this `Core` sits behind.
//!   Without a reader (tests) they are done at once, one pass each.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use super::transcripts::{PASS_BYTES, ReadRequest, TranscriptReader, read_transcript};
use crate::bound::{Engine, Input, Output};
use crate::record::Forwarder;
use crate::record::model::{Record, RunEvent};
use crate::record::store::Store;
use crate::record::writer::LocalWriter;

/// How long a finished run's records wait in memory for a store that does
/// not take them before the run is given up.
const STORE_PATIENCE: Duration = Duration::from_secs(600);
/// Finished runs waiting for the store at once; past it, the one waiting
/// longest is given up (each writer's memory is bounded on its own).
const MAX_WAITING_RUNS: usize = 64;

/// How long the daemon's shutdown waits for each forwarder.
const FORWARD_DEADLINE: Duration = Duration::from_millis(1000);

/// The engine with the sinks that carry out its outputs.
pub(crate) struct Core {
    pub engine: Engine,
    store: Option<Store>,
    writers: HashMap<String, LocalWriter>,
    /// Where transcript reads go (see the module's invariants).
    reader: Option<Arc<TranscriptReader>>,
    /// Writers of finished runs whose records the store has not taken yet,
    /// oldest first, with when their run finished.
    waiting: VecDeque<(LocalWriter, Instant)>,
    /// The recording service, the OpenTelemetry exporter: each gets every
    /// record, in order.
    forwarders: Vec<Box<dyn Forwarder>>,
}

impl Core {
    pub(crate) fn new(
        engine: Engine,
        store: Option<Store>,
        forwarders: Vec<Box<dyn Forwarder>>,
    ) -> Core {
        Core {
            engine,
            store,
            writers: HashMap::new(),
            reader: None,
            waiting: VecDeque::new(),
            forwarders,
        }
    }

    /// Transcript reads go to `reader`'s thread from now on.
    pub(crate) fn with_reader(mut self, reader: Arc<TranscriptReader>) -> Core {
        self.reader = Some(reader);
        self
    }

    /// Takes up the bound runs a previous daemon left open (killed, or
    /// stopped while their session was live) whose journal was written in
    /// the last `window`: each continues as its session's run
    /// (`Engine::resume`). Returns how many. A journal some writer holds is
    /// left alone.
    pub(crate) fn take_up_left_runs(&mut self, window: Duration) -> usize {
        let Some(store) = &self.store else {
            return 0;
        };
        let since = SystemTime::now().checked_sub(window);
        let journals = match store.journals_written_after(since) {
            Ok(found) => found,
            Err(err) => {
                log::warn!("cannot look for runs left open: {err}");
                return 0;
            }
        };
        let mut taken = 0;
        for (written, path) in journals {
            if !may_be_left_open(&path) || crate::record::journal::is_held(&path) {
                continue;
            }
            let Ok(run) = crate::record::store::load_path(&path) else {
                continue;
            };
            if self.engine.resume(&run, written) {
                taken += 1;
            }
        }
        taken
    }

    /// Gives `input` to the engine and carries out what it asks.
    pub(crate) fn handle(&mut self, input: Input, now: SystemTime) {
        let outputs = self.engine.handle(input, now);
        self.carry_out(outputs, now);
    }

    /// The engine's timers (join grace, idle sessions).
    pub(crate) fn tick(&mut self, now: SystemTime) {
        let outputs = self.engine.tick(now);
        self.carry_out(outputs, now);
        for writer in self.writers.values_mut() {
            writer.sync_soon();
        }
        self.retry_waiting();
    }

    /// Whether finished runs still wait for the store (the daemon does not
    /// leave for idleness meanwhile).
    pub(crate) fn waiting_for_store(&self) -> bool {
        !self.waiting.is_empty()
    }

    /// Tries the store again for the finished runs it has not taken; gives
    /// up those that waited past [`STORE_PATIENCE`].
    fn retry_waiting(&mut self) {
        let mut still = VecDeque::with_capacity(self.waiting.len());
        for (mut writer, since) in self.waiting.drain(..) {
            writer.sync();
            if writer.waiting() == 0 {
                log::warn!(
                    "run {}: written after all, {:.1}s after it ended",
                    writer.run_id(),
                    since.elapsed().as_secs_f64()
                );
                writer.report_if_degraded();
            } else if since.elapsed() >= STORE_PATIENCE {
                give_up(&writer, since);
            } else {
                still.push_back((writer, since));
            }
        }
        self.waiting = still;
    }

    /// Finishes every open run and makes everything durable.
    pub(crate) fn shutdown(&mut self, now: SystemTime) {
        let outputs = self.engine.shutdown(now);
        self.carry_out(outputs, now);
        for (_, mut writer) in self.writers.drain() {
            writer.sync();
            writer.report_if_degraded();
        }
        for (mut writer, since) in self.waiting.drain(..) {
            writer.sync();
            if writer.waiting() > 0 {
                give_up(&writer, since);
            }
        }
        for forwarder in &mut self.forwarders {
            forwarder.finish(FORWARD_DEADLINE);
        }
    }

    fn carry_out(&mut self, outputs: Vec<Output>, now: SystemTime) {
        let mut queue: VecDeque<Output> = outputs.into();
        while let Some(output) = queue.pop_front() {
            match output {
                Output::Record { run_id, record } => self.record(&run_id, &record),
                Output::ReadTranscript {
                    session_id,
                    agent_id,
                    path,
                    offset,
                    from_start,
                } => {
                    if let Some(reader) = &self.reader {
                        reader.submit(ReadRequest {
                            session_id,
                            agent_id,
                            path,
                            offset,
                            from_start,
                        });
                        continue;
                    }
                    let bytes = match read_transcript(&path, offset, PASS_BYTES) {
                        Ok(bytes) => bytes,
                        Err(err) => {
                            log::debug!("transcript {path}: {err}");
                            Vec::new()
                        }
                    };
                    let input = Input::TranscriptRead {
                        session_id,
                        agent_id,
                        offset,
                        bytes,
                    };
                    queue.extend(self.engine.handle(input, now));
                }
            }
        }
    }

    fn record(&mut self, run_id: &str, record: &Record) {
        let finished = matches!(record.event, RunEvent::RunFinished(_));
        if let Some(store) = &self.store {
            let writer = self
                .writers
                .entry(run_id.to_owned())
                .or_insert_with(|| LocalWriter::new(store.clone(), run_id.to_owned()));
            // Records the writer had to drop (the store failed for longer
            // than its memory lasts, or the journal was deleted): the run's
            // end says so.
            let lost = if finished {
                writer.lost_by_now()
            } else {
                writer.lost()
            };
            let json = match &record.event {
                RunEvent::RunFinished(finish) if lost > 0 => {
                    let mut finish = finish.clone();
                    finish.lossy = true;
                    finish.dropped += lost;
                    serde_json::to_vec(&Record {
                        seq: record.seq,
                        event: RunEvent::RunFinished(finish),
                    })
                }
                _ => serde_json::to_vec(record),
            };
            match json {
                Ok(json) => writer.write(record.seq, &json),
                Err(err) => log::warn!("a record could not be serialised: {err}"),
            }
        }
        for forwarder in &mut self.forwarders {
            forwarder.forward(run_id, record);
        }
        if finished && let Some(mut writer) = self.writers.remove(run_id) {
            writer.sync();
            if writer.waiting() == 0 {
                writer.report_if_degraded();
                return;
            }
            log::warn!(
                "run {run_id} ended while the store does not take its records: {} record(s) wait in memory for up to {}s",
                writer.waiting(),
                STORE_PATIENCE.as_secs()
            );
            if self.waiting.len() >= MAX_WAITING_RUNS
                && let Some((oldest, since)) = self.waiting.pop_front()
            {
                give_up(&oldest, since);
            }
            self.waiting.push_back((writer, Instant::now()));
        }
    }
}

/// Whether the journal at `path` may hold a bound run left open, read
/// from its ends only: a bound run's header is its first record, and a
/// finished run's `run_finished` its last (a string's quotes are escaped
/// in JSON, so a payload cannot spell these). Only such a journal is read
/// whole; a long finished run is not read again at every daemon start.
fn may_be_left_open(path: &std::path::Path) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    const HEAD: u64 = 160 * 1024;
    const TAIL: u64 = 256 * 1024;
    let Ok(mut file) = std::fs::File::open(path) else {
        return false;
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut head = Vec::new();
    if (&mut file).take(HEAD).read_to_end(&mut head).is_err()
        || memchr::memmem::find(&head, br#""tier":"bound""#).is_none()
    {
        return false;
    }
    let mut tail = Vec::new();
    if file
        .seek(SeekFrom::Start(len.saturating_sub(TAIL)))
        .is_err()
        || file.read_to_end(&mut tail).is_err()
    {
        return false;
    }
    memchr::memmem::find(&tail, br#""kind":"run_finished""#).is_none()
}

/// A finished run the store would not take: said once, as an error.
fn give_up(writer: &LocalWriter, since: Instant) {
    log::error!(
        "run {}: the store did not take its last {} record(s) in {:.0}s; giving the run up (it is incomplete, and lossy wherever it was begun)",
        writer.run_id(),
        writer.waiting(),
        since.elapsed().as_secs_f64()
    );
}

/// The test suites' one wait (`tests/it/support/wait.rs`), shared by path
/// (each module whose tests wait includes it: no module of the library is
/// test-only, so there is no one place below all of them to put it).
#[cfg(test)]
#[allow(dead_code, unreachable_pub, clippy::duplicate_mod)]
#[path = "../../tests/it/support/wait.rs"]
mod test_wait;

#[cfg(test)]
mod tests {
    use super::test_wait as wait;
    use super::*;
    use crate::record::journal::{self, DiskStorage, JournalFile, Storage};
    use serde_json::{Value, json};
    use std::io;
    use std::path::Path;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// The disk, failing every open, append and sync (as a read-only
    /// `runs/` does) while `down` is set.
    struct Outage(Arc<AtomicBool>);
    struct OutageFile(Box<dyn JournalFile>, Arc<AtomicBool>);

    fn read_only() -> io::Error {
        io::Error::from_raw_os_error(libc::EROFS)
    }

    impl Storage for Outage {
        fn open_append(&self, path: &Path) -> io::Result<Box<dyn JournalFile>> {
            if self.0.load(Ordering::SeqCst) {
                return Err(read_only());
            }
            Ok(Box::new(OutageFile(
                DiskStorage.open_append(path)?,
                Arc::clone(&self.0),
            )))
        }
    }

    impl JournalFile for OutageFile {
        fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
            if self.1.load(Ordering::SeqCst) {
                return Err(read_only());
            }
            self.0.append(bytes)
        }
        fn sync(&mut self) -> io::Result<()> {
            if self.1.load(Ordering::SeqCst) {
                return Err(read_only());
            }
            self.0.sync()
        }
    }

    fn hook(core: &mut Core, event: &str, extra: Value) {
        let mut payload = json!({
            "session_id": "5e55e55e-0000-4000-8000-000000000001",
            "transcript_path": "/nonexistent/transcript.jsonl",
            "cwd": "/work/project",
            "hook_event_name": event,
        });
        if let (Some(p), Value::Object(extra)) = (payload.as_object_mut(), extra) {
            p.extend(extra);
        }
        let input = Input::Hook {
            event: event.to_owned(),
            payload,
        };
        core.handle(input, SystemTime::now());
    }

    fn bash_call(core: &mut Core, id: &str) {
        let pre = json!({"tool_name": "Bash", "tool_use_id": id,
                         "tool_input": {"command": format!("echo {id}")}});
        hook(core, "PreToolUse", pre.clone());
        let mut post = pre;
        post["tool_response"] = json!({"stdout": id, "stderr": "", "interrupted": false});
        hook(core, "PostToolUse", post);
    }

    /// The records of the one journal in `runs`, parsed.
    fn journal_records(runs: &Path) -> Vec<Value> {
        let Some(path) = std::fs::read_dir(runs).ok().and_then(|d| {
            d.flatten()
                .map(|e| e.path())
                .find(|p| p.extension().is_some_and(|x| x == "journal"))
        }) else {
            return Vec::new();
        };
        journal::read(&path)
            .map(|j| j.records)
            .unwrap_or_default()
            .iter()
            .filter_map(|r| serde_json::from_slice(r).ok())
            .collect()
    }

    /// The store fails mid-session and is back just before the session
    /// ends: the run, finished while its records still waited, reaches the
    /// store whole once the store takes them.
    #[test]
    fn a_run_ended_during_a_store_outage_is_written_once_the_store_is_back() {
        let dir = std::env::temp_dir().join(format!("bir-sinks-outage-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let down = Arc::new(AtomicBool::new(false));
        let runs = dir.join("runs");
        let store = Store::open(&runs, Arc::new(Outage(Arc::clone(&down)))).expect("store");
        let engine = Engine::new(crate::bound::EngineConfig {
            redact: crate::redact::RedactConfig::default(),
            payload_cap: 64 * 1024,
            idle_end: Duration::from_secs(1800),
            join_grace: Duration::from_millis(0),
            fingerprint_window: Duration::from_secs(600),
        });
        let mut core = Core::new(engine, Some(store), Vec::new());

        hook(&mut core, "SessionStart", json!({"source": "startup"}));
        hook(
            &mut core,
            "UserPromptSubmit",
            json!({"prompt": "list the files"}),
        );
        bash_call(&mut core, "toolu_1");
        core.tick(SystemTime::now());
        assert!(
            !journal_records(&runs).is_empty(),
            "written before the outage"
        );

        down.store(true, Ordering::SeqCst);
        bash_call(&mut core, "toolu_2");
        core.tick(SystemTime::now());
        down.store(false, Ordering::SeqCst);
        // The session ends as soon as the store is writable again: before
        // the writer looks at the disk again.
        hook(&mut core, "Stop", json!({"last_assistant_message": "done"}));
        hook(&mut core, "SessionEnd", json!({"reason": "other"}));

        // The daemon's ticks, until the run's end is in its journal.
        let finished =
            |records: &[Value]| records.iter().any(|r| r["event"]["kind"] == "run_finished");
        let mut records = journal_records(&runs);
        wait::poll_until(Duration::from_secs(30), || {
            finished(&records) || {
                core.tick(SystemTime::now());
                records = journal_records(&runs);
                finished(&records)
            }
        });
        let _ = std::fs::remove_dir_all(&dir);
        assert!(
            finished(&records),
            "the run's end never reached the store: {records:?}"
        );
        let seqs: Vec<u64> = records.iter().filter_map(|r| r["seq"].as_u64()).collect();
        assert_eq!(
            seqs,
            (1..=seqs.len() as u64).collect::<Vec<_>>(),
            "each record once, in order"
        );
        let kinds: Vec<&str> = records
            .iter()
            .filter_map(|r| r["event"]["kind"].as_str())
            .collect();
        assert_eq!(kinds.first(), Some(&"run_started"), "{kinds:?}");
        assert_eq!(kinds.last(), Some(&"run_finished"), "{kinds:?}");
        let text = serde_json::to_string(&records).expect("json");
        assert!(
            text.contains("toolu_1") && text.contains("toolu_2"),
            "{text}"
        );
        let finish = &records[records.len() - 1]["event"]["data"];
        assert_eq!(finish["lossy"], false, "{finish}");
    }

    #[test]
    fn transcript_reads_from_offset_and_refuses_fifos() {
        let dir = std::env::temp_dir().join(format!("bir-sinks-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("mkdir");
        let file = dir.join("t.jsonl");
        std::fs::write(&file, b"{\"a\":1}\n{\"b\":2}\n{\"c\"").expect("write");
        let path = file.to_string_lossy().into_owned();
        assert_eq!(
            read_transcript(&path, 8, PASS_BYTES).expect("read"),
            b"{\"b\":2}\n{\"c\""
        );
        assert!(
            read_transcript(&path, 100, PASS_BYTES)
                .expect("past end")
                .is_empty()
        );
        let fifo = dir.join("fifo");
        let c = std::ffi::CString::new(fifo.to_string_lossy().as_bytes()).expect("cstr");
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let err = read_transcript(&fifo.to_string_lossy(), 0, PASS_BYTES).expect_err("fifo");
        assert!(err.to_string().contains("regular"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
