//! `--transcript FILE`: a JSONL debugging record of everything relayed.
//!
//! One line per relayed message — `{"type":"message","at":…,"dir":…,
//! "message":<the message>}` — and one per tool call — `{"type":"step",…}`
//! (the [`StepReport`] fields) — plus `{"type":"event",…}` lifecycle lines.
//! A message that is valid JSON is embedded as is (its exact bytes); any
//! other line is stored as `"raw":"<text>"` (invalid UTF-8 replaced); a
//! message over 4 MiB as `"bytes":N,"clipped":true,"head":"<its start>"`.
//! The transcript is written off the relay's path through a bounded queue:
//! when the writer falls behind, entries are dropped, and a final
//! `{"type":"event","event":"observations dropped","dropped":N}` says so.
//!
//! The transcript holds raw traffic, secrets included, like a packet
//! capture: it is written only when asked for, with mode 0600.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::step::StepReport;
use super::{Direction, Sink};
use crate::jsonrpc::scan::{LineScanner, Shape};
use crate::time;

pub(crate) struct Transcript {
    path: PathBuf,
    out: BufWriter<File>,
    failed: bool,
}

impl Transcript {
    pub(crate) fn create(path: &Path) -> std::io::Result<Transcript> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(path)?;
        Ok(Transcript {
            path: path.to_owned(),
            out: BufWriter::with_capacity(256 * 1024, file),
            failed: false,
        })
    }

    fn write_line(&mut self, line: &[u8]) {
        if self.failed {
            return;
        }
        if let Err(err) = self
            .out
            .write_all(line)
            .and_then(|_| self.out.write_all(b"\n"))
        {
            self.failed = true;
            log::warn!("transcript {} stopped: {err}", self.path.display());
        }
    }
}

/// True when `bytes` (a line without its newline) can be embedded verbatim
/// as a JSON value: syntactically valid and UTF-8.
fn embeddable(bytes: &[u8]) -> bool {
    if std::str::from_utf8(bytes).is_err() {
        return false;
    }
    let mut scanner = LineScanner::new();
    if scanner.scan(bytes).is_some() {
        return false; // contains a newline: not one message
    }
    !matches!(scanner.end_line().shape, Shape::Invalid | Shape::Blank)
}

/// A relayed line without its line terminator.
fn trim_terminator(bytes: &[u8]) -> &[u8] {
    let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    bytes.strip_suffix(b"\r").unwrap_or(bytes)
}

impl Sink for Transcript {
    fn message(&mut self, at: SystemTime, direction: Direction, bytes: &[u8], total: Option<u64>) {
        let body = trim_terminator(bytes);
        let mut line = format!(
            r#"{{"type":"message","at":"{}","dir":"{}","#,
            time::rfc3339(at),
            direction.as_str()
        )
        .into_bytes();
        if let Some(total) = total {
            // A large message: its size and its start only.
            line.extend_from_slice(format!(r#""bytes":{total},"clipped":true,"#).as_bytes());
            let text = String::from_utf8_lossy(body);
            let quoted = serde_json::to_string(&text).unwrap_or_default();
            line.extend_from_slice(br#""head":"#);
            line.extend_from_slice(quoted.as_bytes());
        } else if embeddable(body) {
            line.extend_from_slice(br#""message":"#);
            line.extend_from_slice(body);
        } else {
            let text = String::from_utf8_lossy(body);
            let quoted = serde_json::to_string(&text).unwrap_or_default();
            line.extend_from_slice(br#""raw":"#);
            line.extend_from_slice(quoted.as_bytes());
        }
        line.push(b'}');
        self.write_line(&line);
    }

    fn step(&mut self, step: &StepReport) {
        match serde_json::to_vec(step) {
            Ok(json) => {
                // `{"type":"step",` + the report's own fields.
                let mut line = br#"{"type":"step","#.to_vec();
                line.extend_from_slice(json.get(1..).unwrap_or(b"}"));
                self.write_line(&line);
            }
            Err(err) => log::warn!("step not written to the transcript: {err}"),
        }
    }

    fn event(&mut self, at: SystemTime, text: &str) {
        let line = serde_json::json!({"type": "event", "at": time::rfc3339(at), "event": text});
        self.write_line(line.to_string().as_bytes());
    }

    fn finish(&mut self, dropped: u64) {
        if dropped > 0 {
            let line = serde_json::json!({"type": "event", "at": time::rfc3339(SystemTime::now()),
                "event": "observations dropped", "dropped": dropped,
                "detail": "the writer fell behind; this transcript is incomplete"});
            self.write_line(line.to_string().as_bytes());
        }
        self.flush();
    }

    fn flush(&mut self) {
        if !self.failed
            && let Err(err) = self.out.flush()
        {
            self.failed = true;
            log::warn!("transcript {} stopped: {err}", self.path.display());
        }
    }

    /// A flush writes the whole buffer out (or the transcript stopped).
    fn settled(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embeds_valid_json_and_quotes_the_rest() {
        assert!(embeddable(br#"{"a":1}"#));
        assert!(!embeddable(b"{"));
        assert!(!embeddable(b"\xff{}"));
        assert!(!embeddable(b""));
        assert_eq!(trim_terminator(b"{}\r\n"), b"{}");
    }
}
