//! The recorder daemon: one per user and `$BIR_HOME`, the home of bound
//! (Tier 1) runs.
//!
//! It is started on demand by the first hook or proxy that needs it
//! (`client::ensure_running` runs the hidden `bir daemon` detached), serves
//! loopback HTTP with a bearer token, feeds what it hears to the sans-IO
//! [`crate::bound::Engine`] and carries out what the engine asks (journal
//! records, transcript reads). It exits after an idle period, on
//! `POST /shutdown` (`bir down`) or on SIGTERM/SIGINT.
//!
//! * [`discovery`] — `$BIR_HOME/control/daemon.json`: written by the daemon,
//!   checked by every reader.
//! * [`client`] — find, start, and talk to the daemon (hooks, proxies, CLI).
//! * [`server`] — the daemon process: lock, listener, routes, timers.
//! * [`http`] — its strict, capped HTTP/1.1 request reader.
//! * [`sinks`] — carrying out the engine's outputs (journals, the
//!   recording service, transcript reads handed to the reader).
//! * [`transcripts`] — the transcript reader thread: reads off the
//!   engine's lock, a pass at a time, from offsets kept across restarts.
//! * [`uds`] — the Unix socket the Claude Code mod posts to: where it may
//!   live, stale vs live, the peer's uid.
//! * [`tcpowner`] — who owns a loopback TCP socket (`sock_diag`, else
//!   `/proc/net/tcp`): the peer-uid check both ends make.
//!
//! * [`control`] — what the command line asks of the daemon: its
//!   sessions, stopping it and waiting for its exit, who holds its kept
//!   port, its live socket.
//!
//! `bir down`, and the daemon's lines in `bir status` and `bir doctor`,
//! are commands (`crate::cmd::down`): they say in words what `control`
//! finds.

pub(crate) mod armed_guides;
pub(crate) mod client;
pub(crate) mod control;
pub(crate) mod discovery;
pub(crate) mod hookaddr;
pub(crate) mod http;
pub(crate) mod server;
pub(crate) mod sinks;
pub(crate) mod tcpowner;
pub(crate) mod transcripts;
pub(crate) mod uds;

use serde::{Deserialize, Serialize};

/// The largest hook payload the daemon takes (`/hook` body cap); `bir-hooks`
/// drops a larger one rather than send it.
pub(crate) const MAX_HOOK_PAYLOAD: usize = 8 * 1024 * 1024;

/// How long a `Stop` that an armed guide may answer waits, at most, for
/// the proxies' reports of the session's pinned calls before the daemon
/// answers it (`server::await_pin_reports`). It fits, with the rest of the
/// answer, in Claude Code's wait for an HTTP hook (2 s,
/// `clientconfig::hook_entries::HTTP_TIMEOUT_SECS`), and `bir-hooks` waits
/// this much longer for a `Stop`'s answer.
pub(crate) const STOP_PATIENCE: std::time::Duration = std::time::Duration::from_secs(1);

/// `GET /health`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Health {
    pub version: String,
    pub pid: u32,
    pub sessions: usize,
    /// Milliseconds since the Unix epoch.
    pub started_at: u64,
}

/// One session in `GET /sessions`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SessionView {
    pub session_id: String,
    pub run_id: String,
    pub cwd: String,
    pub steps: u64,
    pub proxies: Vec<String>,
    pub last_event_at: String,
}

impl From<&crate::bound::SessionSummary> for SessionView {
    fn from(s: &crate::bound::SessionSummary) -> SessionView {
        SessionView {
            session_id: s.session_id.clone(),
            run_id: s.run_id.clone(),
            cwd: s.cwd.clone(),
            steps: s.steps,
            proxies: s.proxies.clone(),
            last_event_at: crate::time::rfc3339(s.last_event_at),
        }
    }
}

/// `GET /sessions`: the daemon and what it is recording.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SessionsAnswer {
    pub daemon: Health,
    pub sessions: Vec<SessionView>,
}
