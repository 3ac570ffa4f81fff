//! `bir-proxy --lazy`: a stdio server started only when a request needs it.
//!
//! N configured servers mean N servers started with every session, most
//! of which are asked for nothing but their tools. With `--lazy`, the
//! proxy looks in the run store for the last snapshot of the same server
//! (`ServerSnapshot::command_digest`: the same command line, the same
//! program file) and, when it finds a usable one, starts without the
//! server: it answers `initialize`, `tools/list` (without a cursor) and
//! `ping` itself, from that snapshot (`relay::LazyGate`). The first other
//! request wakes the server: the proxy starts it, replays the host's
//! `initialize` (its own id) and `notifications/initialized`, waits for the
//! handshake to finish, then relays the request. It also asks the live
//! server for its tools; if they differ from what the host was given, the
//! host gets `notifications/tools/list_changed` and asks again.
//!
//! A snapshot is usable only if it holds the whole `initialize` answer and
//! the tools, was taken with the protocol version the host asks for, and
//! nothing in it was redacted (a redacted answer would not be what the
//! server says). Anything else, and the server starts at once, as without
//! `--lazy`.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::config::ProxyConfig;
use super::relay::LazyGate;
use crate::record::model::{ServerSnapshot, canonical};
use crate::record::store::{Store, load_path};

/// How many of the most recently written runs are searched for a
/// snapshot. Each is read whole, and this is on the proxy's start: a
/// server used recently is found within a few runs, and one that is not
/// starts eagerly, as before.
const SCAN_RUNS: usize = 30;

/// The command digest of a stdio server: its program and arguments, and
/// the program file's size and modification time (a reinstalled or
/// upgraded program is another version; a launcher such as `npx` that
/// fetches a newer package is caught later, when the live tools differ).
pub fn command_digest(cfg: &ProxyConfig) -> String {
    let (size, mtime) = program_path(&cfg.program)
        .and_then(|p| fs::metadata(p).ok())
        .map_or((0, 0), |m| (m.size(), m.mtime()));
    let line = json!({"program": cfg.program, "args": cfg.args, "size": size, "mtime": mtime});
    crate::codec::sha256_hex(&canonical(&line))
}

/// Where the program a command names lives: itself if it has a `/`,
/// else the first executable of that name on `PATH`.
fn program_path(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return Some(PathBuf::from(program));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    fs::metadata(p).is_ok_and(|m| m.is_file() && m.mode() & 0o111 != 0)
}

/// The gate a lazy proxy starts with: answers from the last usable
/// snapshot of this server, or `None` (start the server now).
pub fn gate_for(cfg: &ProxyConfig) -> Option<LazyGate> {
    if !cfg.lazy || cfg.upstream_http.is_some() {
        return None;
    }
    let digest = command_digest(cfg);
    let store = Store::open_default().ok()?;
    let mut journals = store.journals_written_after(None).ok()?;
    journals.reverse();
    for (_, path) in journals.into_iter().take(SCAN_RUNS) {
        let Ok(run) = load_path(&path) else {
            continue;
        };
        // The newest usable snapshot: a lazy session records only what
        // it relayed (no `initialize` it answered itself), so its own
        // snapshot may be partial; an older whole one is still right, and
        // if the tools moved on since, the host is told once the server
        // starts.
        let usable = run
            .snapshots
            .iter()
            .rev()
            .filter(|s| {
                s.server_name == *cfg.server_name && s.command_digest.as_deref() == Some(&digest)
            })
            .find_map(gate_of);
        if usable.is_some() {
            return usable;
        }
    }
    log::debug!("--lazy: no usable snapshot of this server; starting it");
    None
}

/// The answers a snapshot gives, if it is usable (see the module docs).
fn gate_of(s: &ServerSnapshot) -> Option<LazyGate> {
    let protocol = s.protocol_version.as_deref()?.to_owned();
    let mut result = serde_json::Map::new();
    result.insert("protocolVersion".into(), Value::from(protocol.clone()));
    result.insert("capabilities".into(), s.capabilities.as_deref()?.clone());
    result.insert("serverInfo".into(), s.server_info.as_deref()?.clone());
    if let Some(instructions) = s.instructions.as_deref() {
        result.insert("instructions".into(), instructions.clone());
    }
    let tools: Vec<Value> = s.tools.iter().map(|t| (**t).clone()).collect();
    if tools.len() != s.tool_hashes.len() {
        return None; // a tool without a name, or pages missing
    }
    let initialize_result = Value::Object(result).to_string();
    let tools_result = json!({"tools": tools}).to_string();
    let list = |key: &str, items: &Option<Vec<crate::record::model::Redacted<Value>>>| {
        items.as_ref().map(|items| {
            let items: Vec<Value> = items.iter().map(|i| (**i).clone()).collect();
            json!({key: items}).to_string()
        })
    };
    let gate = LazyGate {
        protocol_version: protocol,
        initialize_result,
        tools_result,
        tools_canonical: canonical(&Value::Array(tools)),
        prompts_result: list("prompts", &s.prompts),
        resources_result: list("resources", &s.resources),
        templates_result: list("resourceTemplates", &s.resource_templates),
    };
    let texts = [
        Some(&gate.initialize_result),
        Some(&gate.tools_result),
        gate.prompts_result.as_ref(),
        gate.resources_result.as_ref(),
        gate.templates_result.as_ref(),
    ];
    if texts.into_iter().flatten().any(|t| t.contains("[REDACTED")) {
        return None;
    }
    Some(gate)
}

/// Whether a live `tools/list` answer (the whole line) lists other tools
/// than the snapshot the host was given. An answer that cannot be read,
/// or one with more pages, counts as different: the host asking again
/// costs little, missing a change costs much.
pub fn tools_differ(gate_tools_canonical: &[u8], answer: &[u8]) -> bool {
    let Ok(v) = serde_json::from_slice::<Value>(answer) else {
        return true;
    };
    if v.pointer("/result/nextCursor")
        .is_some_and(|c| !c.is_null())
    {
        return true;
    }
    match v.pointer("/result/tools") {
        Some(tools) => canonical(tools) != gate_tools_canonical,
        None => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(v: Value) -> ServerSnapshot {
        serde_json::from_value(v).expect("snapshot")
    }

    #[test]
    fn a_snapshot_is_usable_only_when_whole_and_unredacted() {
        let whole = json!({"serverName": "s", "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}}, "serverInfo": {"name": "t", "version": "1"},
            "tools": [{"name": "echo", "inputSchema": {"type": "object"}}],
            "toolHashes": {"echo": "h"}, "toolsDigest": "d"});
        let gate = gate_of(&snapshot(whole.clone())).expect("usable");
        assert_eq!(
            gate.initialize_result,
            r#"{"capabilities":{"tools":{}},"protocolVersion":"2025-11-25","serverInfo":{"name":"t","version":"1"}}"#
        );
        assert_eq!(
            gate.tools_result,
            r#"{"tools":[{"inputSchema":{"type":"object"},"name":"echo"}]}"#
        );
        let mut no_info = whole.clone();
        no_info.as_object_mut().expect("o").remove("serverInfo");
        assert!(gate_of(&snapshot(no_info)).is_none());
        let mut redacted = whole.clone();
        redacted["serverInfo"]["name"] = json!("[REDACTED:api-key]");
        assert!(gate_of(&snapshot(redacted)).is_none());
        let mut missing_page = whole;
        missing_page["toolHashes"] = json!({"echo": "h", "other": "h2"});
        assert!(gate_of(&snapshot(missing_page)).is_none());
    }

    #[test]
    fn live_tools_are_compared_with_what_the_host_was_given() {
        let tools = canonical(&json!([{"name": "echo"}]));
        assert!(!tools_differ(
            &tools,
            br#"{"jsonrpc":"2.0","id":"x","result":{"tools":[{"name":"echo"}]}}"#
        ));
        assert!(tools_differ(
            &tools,
            br#"{"jsonrpc":"2.0","id":"x","result":{"tools":[{"name":"echo","description":"new"}]}}"#
        ));
        assert!(tools_differ(&tools, b"not json"));
    }
}
