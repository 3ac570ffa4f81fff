//! The bound tier (Tier 1): one run per host session, told by the host's
//! hooks and the session's proxies together.
//!
//! This module is the daemon's brain and does no I/O of its own (sans-IO):
//! the daemon (`crate::daemon`) feeds it [`Input`]s with the time they
//! arrived and carries out the [`Output`]s it returns — journal records to
//! write, transcripts to read. Everything here can therefore be tested on
//! plain event sequences, in any order and at any simulated time.
//!
//! ```text
//! bir-hooks ──POST /hook/<Event>──┐
//!                                 ├─▶ daemon ─▶ Engine::handle ─▶ Output::Record ─▶ sinks
//! bir-proxy ──POST /proxy/*───────┘                            └▶ Output::ReadTranscript
//! ```
//!
//! Invariants:
//! * One `stepIndex` counter and one `seq` counter per run, both allocated
//!   here, so a run's order is the order the engine decided, whoever
//!   reported first. `stepIndex` is given when a step's first view says it
//!   happened; a step that then waits for its other view keeps it, so a
//!   joined step may be written (`seq`) after a later one: read a run in
//!   `stepIndex` order (see `session.rs`).
//! * Every string that leaves the engine in a [`Record`] has been through
//!   the redactor (the join's ids — session, tool use and agent ids — are
//!   kept as sent, as the standalone recorder keeps them). Hook payloads
//!   arrive raw (from the host, on loopback); proxy records arrive already
//!   redacted by the proxy's recorder.
//! * The engine never waits: a view that is still missing (the proxy's
//!   answer after the hook's, or the other way round) is held for a grace
//!   period and released by [`Engine::tick`]. Choose `join_grace` at least
//!   as long as a proxy may buffer its reports while it looks for the
//!   daemon (10 s).
//! * A run ends at `SessionEnd` (once nothing waits any more, at most
//!   `join_grace` later), after `idle_end` without any input, or at
//!   [`Engine::shutdown`] — never at `Stop`: Claude Code's Agent tool is
//!   asynchronous and its result starts another turn of the same session.

mod answer;
mod engine;
pub(crate) mod guidance;
mod hook;
pub(crate) mod host;
pub(crate) mod hosts;
mod join;
pub(crate) mod process;
mod session;
mod transcript;
pub(crate) mod wire;

pub(crate) use answer::Correlation;
pub(crate) use engine::Engine;
pub(crate) use join::spelled;

#[cfg(test)]
mod tests;

use std::time::SystemTime;

use serde_json::Value;

use crate::record::model::Record;

/// Something the daemon heard.
#[derive(Debug)]
pub(crate) enum Input {
    /// A hook event exactly as the host posted it (`bir-hooks <Event>`
    /// forwards stdin unchanged). `event` is the route's event name; the
    /// payload's own `hook_event_name` wins when they differ.
    Hook { event: String, payload: Value },
    /// A hook event of another agent (`bir-hooks --host <host>`), in its
    /// own words: its adapter (`hosts`) makes it the engine's.
    HostHook {
        host: hosts::Host,
        event: String,
        payload: Value,
        /// The agent's process that ran the hook (`process`), when
        /// `bir-hooks` could tell: what a proxy whose environment names no
        /// session is bound by.
        host_process: Option<process::ProcessId>,
    },
    /// A proxy announced itself for a session.
    ProxyRegistered(wire::ProxyRegister),
    /// A batch of a proxy's prepared (redacted) records.
    ProxyRecords(wire::ProxyRecords),
    /// A proxy said goodbye, or its registration expired.
    ProxyGone { proxy_id: String },
    /// What the Claude Code mod saw in a session (over the daemon's Unix
    /// socket): the model's words and the turn's answer, live.
    Mod(wire::ModBatch),
    /// What a guide (`guidance.rs`) decided for one of the session's hooks:
    /// recorded as a `bir.guide` session event; a pin (`tool_use_id`, the
    /// arguments the server should get) is checked against the proxy's
    /// report of the call.
    Guide {
        session_id: String,
        note: Value,
        pin: Option<(String, Value)>,
    },
    /// The transcript the engine asked for ([`Output::ReadTranscript`]),
    /// read from `offset`: whatever bytes were there (possibly ending in a
    /// line still being written).
    TranscriptRead {
        session_id: String,
        agent_id: Option<String>,
        offset: u64,
        bytes: Vec<u8>,
    },
}

/// Something the daemon must do.
#[derive(Debug)]
pub(crate) enum Output {
    /// Append `record` to run `run_id`'s journal and hand it to the other
    /// sinks. The first record of a run is its `run_started`; after
    /// `run_finished` no record of that run follows.
    Record { run_id: String, record: Box<Record> },
    /// Read `path` from byte `offset` and answer with
    /// [`Input::TranscriptRead`] — always, with no bytes if the file cannot
    /// be read (an unanswered read holds steps back until `join_grace`
    /// runs out, then is asked again). The answer may stop anywhere, even
    /// within a line (a cap of a few MiB a read is fine): the engine keeps
    /// an unfinished line and asks again after a large answer.
    ReadTranscript {
        session_id: String,
        agent_id: Option<String>,
        path: String,
        offset: u64,
        /// Read from `offset` even where a daemon kept a later one for this
        /// file: a run taken up again must see what the last daemon read
        /// but had not told.
        from_start: bool,
    },
}

/// A session as `bir status` shows it.
#[derive(Debug, Clone)]
pub(crate) struct SessionSummary {
    pub session_id: String,
    pub run_id: String,
    pub cwd: String,
    pub steps: u64,
    pub proxies: Vec<String>,
    pub last_event_at: SystemTime,
}

/// Tunables of the engine (the daemon reads them from the environment).
#[derive(Debug, Clone)]
pub(crate) struct EngineConfig {
    pub redact: crate::redact::RedactConfig,
    /// Cap per stored payload, as for standalone runs.
    pub payload_cap: usize,
    /// A session with no event for this long is finished as `idle_timeout`.
    pub idle_end: std::time::Duration,
    /// How long a step waits for its other view (hook or proxy).
    pub join_grace: std::time::Duration,
    /// How far apart a fingerprint match may be.
    pub fingerprint_window: std::time::Duration,
}

#[cfg(test)]
impl EngineConfig {
    /// The settings every whole-session test uses (the engine's and the
    /// hosts' alike).
    pub(crate) fn for_tests() -> EngineConfig {
        EngineConfig {
            redact: crate::redact::RedactConfig::default(),
            payload_cap: 64 * 1024,
            idle_end: std::time::Duration::from_secs(30 * 60),
            join_grace: std::time::Duration::from_secs(5),
            fingerprint_window: std::time::Duration::from_secs(600),
        }
    }
}
