//! Transcript reads, off the engine's lock.
//!
//! The engine asks for a session's transcript from an offset
//! (`Output::ReadTranscript`); the file may be gigabytes (a long session,
//! a huge tool result, a `transcript_path` pointing anywhere). Reading it
//! inside the engine's lock, which every hook, proxy post and `/health`
//! needs, stalled them all. Here one reader thread does the reads:
//!
//! * A read takes at most [`PASS_BYTES`] (the engine asks again after an
//!   answer that large, from the new offset). Requests are served first
//!   come, first served, so a session with a huge transcript gets one pass
//!   and then waits behind every other session's: no session's transcript
//!   delays another's for more than a pass, and the engine's lock is held
//!   only to hand the bytes over, never while reading.
//! * Where each file was read up to (the end of its last whole line) is
//!   remembered and kept in `$BIR_HOME/control/transcripts.json` (0600,
//!   written by temp file + rename, at most every [`SAVE_EVERY`] and at
//!   shutdown, [`MAX_REMEMBERED`] files at most). A session the engine
//!   starts reading from 0 whose file is remembered (same file: device,
//!   inode, and not shorter) is read from there: a daemon restarted in the
//!   middle of a long session does not read it all again. A read marked
//!   `from_start` (a run another daemon left open, taken up again) is
//!   read from where it asks.
//! * Reads never block and never follow a FIFO or a device (see
//!   [`read_transcript`]).

use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::locks::lock;

/// The most of a transcript read in one pass.
pub(crate) const PASS_BYTES: u64 = 1024 * 1024;
/// How often, at most, the remembered offsets are written out.
const SAVE_EVERY: Duration = Duration::from_secs(2);
/// Files remembered at most (the least recently read go first).
const MAX_REMEMBERED: usize = 512;

/// One read the engine asked for.
#[derive(Debug, Clone)]
pub(crate) struct ReadRequest {
    pub session_id: String,
    pub agent_id: Option<String>,
    pub path: String,
    pub offset: u64,
    /// Never a remembered offset (a run taken up again reads the file from
    /// where it asks).
    pub from_start: bool,
}

/// Where a file was read up to.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Remembered {
    dev: u64,
    ino: u64,
    /// The end of the last whole line read.
    line_end: u64,
    /// Order of last use (larger is more recent).
    used: u64,
}

#[derive(Default)]
struct State {
    queue: VecDeque<ReadRequest>,
    remembered: HashMap<String, Remembered>,
    uses: u64,
    dirty: bool,
    stop: bool,
    /// Bytes read from files since start (for `/health`-free inspection in
    /// logs and tests).
    bytes_read: u64,
}

/// The reader's handle: the engine's side submits, the thread reads.
pub(crate) struct TranscriptReader {
    state: Mutex<State>,
    wake: Condvar,
    /// Where the remembered offsets are kept (`None`: nowhere).
    file: Option<PathBuf>,
    /// When they were last written.
    saved_at: Mutex<Option<Instant>>,
}

impl TranscriptReader {
    /// A reader remembering offsets in `file` (loaded now, if present).
    pub(crate) fn new(file: Option<PathBuf>) -> Arc<TranscriptReader> {
        let remembered = file.as_deref().map(load).unwrap_or_default();
        let uses = remembered.values().map(|r| r.used).max().unwrap_or(0);
        Arc::new(TranscriptReader {
            state: Mutex::new(State {
                remembered,
                uses,
                ..State::default()
            }),
            wake: Condvar::new(),
            file,
            saved_at: Mutex::new(None),
        })
    }

    /// Queues a read (never blocks on the file).
    pub(crate) fn submit(&self, request: ReadRequest) {
        lock(&self.state).queue.push_back(request);
        self.wake.notify_one();
    }

    /// Starts the thread: each pass's bytes go to `deliver` (which hands
    /// them to the engine under its lock), with the offset they start at.
    pub(crate) fn start(
        self: &Arc<Self>,
        deliver: impl Fn(ReadRequest, Vec<u8>) + Send + 'static,
    ) -> io::Result<()> {
        let reader = Arc::clone(self);
        std::thread::Builder::new()
            .name("bir-transcripts".into())
            .spawn(move || reader.run(&deliver))
            .map(|_| ())
    }

    /// Stops the thread (after the pass under way) and writes the offsets.
    pub(crate) fn stop(&self) {
        lock(&self.state).stop = true;
        self.wake.notify_all();
        self.save(true);
    }

    fn run(&self, deliver: &dyn Fn(ReadRequest, Vec<u8>)) {
        loop {
            let request = {
                let mut state = lock(&self.state);
                loop {
                    if state.stop {
                        return;
                    }
                    if let Some(request) = state.queue.pop_front() {
                        break request;
                    }
                    let (next, _) = self
                        .wake
                        .wait_timeout(state, SAVE_EVERY)
                        .unwrap_or_else(|p| p.into_inner());
                    state = next;
                }
            };
            let (request, bytes) = self.pass(request);
            deliver(request, bytes);
            self.save(false);
        }
    }

    /// One pass: where to start (a remembered offset for a read from 0),
    /// the bytes, and what is remembered afterwards.
    fn pass(&self, mut request: ReadRequest) -> (ReadRequest, Vec<u8>) {
        let meta = std::fs::metadata(&request.path).ok();
        if request.offset == 0
            && !request.from_start
            && let Some(meta) = &meta
            && let Some(known) = lock(&self.state).remembered.get(&request.path)
            && known.dev == meta.dev()
            && known.ino == meta.ino()
            && known.line_end <= meta.len()
        {
            log::info!(
                "transcript {}: resuming at byte {} read before",
                request.path,
                known.line_end
            );
            request.offset = known.line_end;
        }
        let bytes = match read_transcript(&request.path, request.offset, PASS_BYTES) {
            Ok(bytes) => bytes,
            Err(err) => {
                log::debug!("transcript {}: {err}", request.path);
                Vec::new()
            }
        };
        if let Some(meta) = meta {
            let mut state = lock(&self.state);
            state.bytes_read += bytes.len() as u64;
            state.uses += 1;
            let used = state.uses;
            let line_end = memchr::memrchr(b'\n', &bytes).map(|at| request.offset + at as u64 + 1);
            let entry = state
                .remembered
                .entry(request.path.clone())
                .or_insert(Remembered {
                    dev: meta.dev(),
                    ino: meta.ino(),
                    line_end: 0,
                    used,
                });
            if entry.dev != meta.dev() || entry.ino != meta.ino() {
                *entry = Remembered {
                    dev: meta.dev(),
                    ino: meta.ino(),
                    line_end: 0,
                    used,
                };
            }
            entry.used = used;
            if let Some(end) = line_end
                && end > entry.line_end
            {
                entry.line_end = end;
                state.dirty = true;
            }
            if state.remembered.len() > MAX_REMEMBERED
                && let Some(oldest) = state
                    .remembered
                    .iter()
                    .min_by_key(|(_, r)| r.used)
                    .map(|(p, _)| p.clone())
            {
                state.remembered.remove(&oldest);
            }
        }
        (request, bytes)
    }

    /// Writes the remembered offsets if they changed (at most every
    /// [`SAVE_EVERY`] unless `now`).
    fn save(&self, now: bool) {
        let Some(file) = &self.file else {
            return;
        };
        let mut last = lock(&self.saved_at);
        if !now && last.is_some_and(|at| at.elapsed() < SAVE_EVERY) {
            return;
        }
        let snapshot = {
            let mut state = lock(&self.state);
            if !state.dirty {
                return;
            }
            state.dirty = false;
            state.remembered.clone()
        };
        *last = Some(Instant::now());
        if let Err(err) = store(file, &snapshot) {
            log::debug!(
                "cannot keep transcript offsets in {}: {err}",
                file.display()
            );
        }
    }
}

fn load(file: &Path) -> HashMap<String, Remembered> {
    // Private file, read only if it is a small regular file.
    let Ok(meta) = std::fs::symlink_metadata(file) else {
        return HashMap::new();
    };
    if !meta.file_type().is_file() || meta.len() > 4 * 1024 * 1024 {
        return HashMap::new();
    }
    std::fs::read(file)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default()
}

fn store(file: &Path, remembered: &HashMap<String, Remembered>) -> io::Result<()> {
    use std::io::Write;
    let json = serde_json::to_vec(remembered).map_err(io::Error::other)?;
    let tmp = file.with_extension(format!("json.{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&tmp)?;
    out.write_all(&json)?;
    out.sync_data()?;
    drop(out);
    std::fs::rename(&tmp, file)
}

/// Reads `path` from `offset`: at most `max` bytes, from a regular file
/// only, without blocking (a FIFO put in its place would otherwise hang
/// the reader).
pub(crate) fn read_transcript(path: &str, offset: u64, max: u64) -> io::Result<Vec<u8>> {
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
    file.take(max).read_to_end(&mut bytes)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_from_zero_resumes_where_the_file_was_read_before() {
        let dir = std::env::temp_dir().join(format!("bir-transcripts-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("mkdir");
        let t = dir.join("t.jsonl");
        std::fs::write(&t, b"{\"a\":1}\n{\"b\":2}\n{\"c\"").expect("write");
        let path = t.to_string_lossy().into_owned();
        let keep = dir.join("transcripts.json");
        let request = ReadRequest {
            session_id: "s".into(),
            agent_id: None,
            path: path.clone(),
            offset: 0,
            from_start: false,
        };
        let reader = TranscriptReader::new(Some(keep.clone()));
        let (_, bytes) = reader.pass(request.clone());
        assert_eq!(bytes.len(), 20);
        reader.stop();
        // A new daemon: the same file is read from the end of its last
        // whole line, not from 0.
        let reader = TranscriptReader::new(Some(keep));
        let (resumed, bytes) = reader.pass(request);
        assert_eq!(resumed.offset, 16);
        assert_eq!(bytes, b"{\"c\"");
        assert_eq!(lock(&reader.state).bytes_read, 4);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
