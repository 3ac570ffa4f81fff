//! Where the engine's [`Output`]s go: the local store (one
//! [`LocalWriter`] per open run, the same journals `bir runs` reads), the
//! recording service and the OpenTelemetry exporter when configured, and
//! transcript reads fed back to the engine.
//!
//! Invariants:
//! * Records reach a run's writer in the order the engine emitted them;
//!   the engine and the sinks sit behind one lock in the daemon.
//! * A run's writer is synced and dropped at its `run_finished`; nothing of
//!   that run is written after it.
//! * Transcript reads never block and never follow a FIFO or a device: the
//!   file is opened `O_NONBLOCK`, must be a regular file, and at most
//!   [`MAX_TRANSCRIPT_READ`] bytes are read per request.

use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::OpenOptionsExt;
use std::time::{Duration, SystemTime};

use crate::bound::{Engine, Input, Output};
use crate::record::Forwarder;
use crate::record::model::{Record, RunEvent};
use crate::record::store::Store;
use crate::record::writer::LocalWriter;

/// The most of a transcript read at once (the engine asks again from the
/// new offset for the rest).
pub(crate) const MAX_TRANSCRIPT_READ: u64 = 8 * 1024 * 1024;

/// How long the daemon's shutdown waits for each forwarder.
const FORWARD_DEADLINE: Duration = Duration::from_millis(1000);

/// The engine with the sinks that carry out its outputs.
pub(crate) struct Core {
    pub engine: Engine,
    store: Option<Store>,
    writers: HashMap<String, LocalWriter>,
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
            forwarders,
        }
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
    }

    /// Finishes every open run and makes everything durable.
    pub(crate) fn shutdown(&mut self, now: SystemTime) {
        let outputs = self.engine.shutdown(now);
        self.carry_out(outputs, now);
        for (_, mut writer) in self.writers.drain() {
            writer.sync();
            writer.report_if_degraded();
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
                } => {
                    let bytes = match read_transcript(&path, offset) {
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
            match serde_json::to_vec(record) {
                Ok(json) => writer.write(record.seq, &json),
                Err(err) => log::warn!("a record could not be serialised: {err}"),
            }
        }
        for forwarder in &mut self.forwarders {
            forwarder.forward(run_id, record);
        }
        if finished && let Some(mut writer) = self.writers.remove(run_id) {
            writer.sync();
            writer.report_if_degraded();
        }
    }
}

/// Reads `path` from `offset`: at most [`MAX_TRANSCRIPT_READ`] bytes, from a
/// regular file only, without blocking (a FIFO put in its place would
/// otherwise hang the daemon).
pub(crate) fn read_transcript(path: &str, offset: u64) -> io::Result<Vec<u8>> {
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.file_type().is_file() {
        return Err(io::Error::other("not a regular file"));
    }
    if offset >= meta.len() {
        return Ok(Vec::new());
    }
    file.seek(SeekFrom::Start(offset))?;
    let mut bytes = Vec::new();
    file.take(MAX_TRANSCRIPT_READ).read_to_end(&mut bytes)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transcript_reads_from_offset_and_refuses_fifos() {
        let dir = std::env::temp_dir().join(format!("bir-sinks-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("mkdir");
        let file = dir.join("t.jsonl");
        std::fs::write(&file, b"{\"a\":1}\n{\"b\":2}\n{\"c\"").expect("write");
        let path = file.to_string_lossy().into_owned();
        assert_eq!(
            read_transcript(&path, 8).expect("read"),
            b"{\"b\":2}\n{\"c\""
        );
        assert!(read_transcript(&path, 100).expect("past end").is_empty());
        let fifo = dir.join("fifo");
        let c = std::ffi::CString::new(fifo.to_string_lossy().as_bytes()).expect("cstr");
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let err = read_transcript(&fifo.to_string_lossy(), 0).expect_err("fifo");
        assert!(err.to_string().contains("regular"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
