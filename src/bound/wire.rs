//! The bodies of the daemon's `/proxy/*` routes, shared by the proxy (which
//! sends them) and the daemon (which reads them). JSON, camelCase.
//!
//! A proxy sends only what its own recorder prepared — redacted, truncated
//! records — so nothing raw leaves the proxy process (the same rule as for
//! the local store and the recording service).

use serde::{Deserialize, Serialize};

use super::process::ProcessId;
use crate::record::model::HostInfo;

/// `POST /proxy/register`: a proxy announces itself.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ProxyRegister {
    /// Random per proxy process; names it in later requests.
    pub proxy_id: String,
    /// `CLAUDE_CODE_SESSION_ID` (or the SDK session's id); empty when the
    /// environment names none (then `ancestors` say).
    pub session_id: String,
    pub server_name: String,
    pub pid: u32,
    pub cwd: String,
    pub bir_version: String,
    /// The host as the proxy knows it (`initialize`'s `clientInfo`, or
    /// `AI_AGENT` in its environment): hook payloads carry no version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<HostInfo>,
    /// The proxy's ancestor processes, nearest first, sent when
    /// `session_id` is empty (its environment names no session): the
    /// daemon binds it to the session whose host process is among them
    /// (`bound::process`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ancestors: Vec<ProcessId>,
}

/// `POST /proxy/records`: what a bound proxy recorded since its last post.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ProxyRecords {
    pub proxy_id: String,
    pub session_id: String,
    pub server_name: String,
    pub items: Vec<ProxyItem>,
    /// Observations the proxy lost before they were prepared (its queue
    /// overflowed, or it was unbound while they happened): the run becomes
    /// `lossy`.
    #[serde(default)]
    pub lost: u64,
}

/// One thing a proxy recorded: defined beside the proxy's preparation
/// (`record` sits below `bound`), the wire's shape all the same.
pub(crate) use crate::record::preparation::ProxyItem;

/// `POST /proxy/unregister`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ProxyUnregister {
    pub proxy_id: String,
}

/// `POST /mod/events` over the daemon's Unix socket: what the Claude Code
/// mod (`bir install --mod`) saw in one session since its last post, in
/// the order the host raised it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ModBatch {
    /// `$.session.id()`: the hooks' `session_id`.
    pub session_id: String,
    pub events: Vec<ModEvent>,
    /// Events the mod dropped before this post (its queue was full while
    /// the daemon could not be reached).
    #[serde(default)]
    pub lost: u64,
}

/// One hooks-module event, as the mod forwards it: never changed, only
/// wrapped.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ModEvent {
    /// Per mod instance, from 1, in the order the host raised the events:
    /// the order the daemon applies them in, whatever order posts land.
    pub seq: u64,
    /// `session.start`, `session.append`, `turn.step`, `tool.call`,
    /// `tool.result`, `turn.complete`, `session.end`.
    pub kind: String,
    /// The event's input as the host handed it (for `tool.result`:
    /// `{tool_use_id, tool, result}`).
    #[serde(default)]
    pub e: serde_json::Value,
}
