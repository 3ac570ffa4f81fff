//! `bir-proxy --lazy`: a server started (or, for `--url`, connected to)
//! only when a request needs it.
//!
//! N configured servers mean N servers started with every session, most
//! of which are asked for nothing but their tools. With `--lazy`, the
//! proxy looks in the run store for the last snapshot of the same server
//! (`ServerSnapshot::command_digest`: the same command line, the same
//! program file; for a remote server, the same URL) and, when it finds a
//! usable one, starts without the server: it answers `initialize`, `ping`,
//! the `*/list` pages the snapshot holds, and the `server/discover` probe
//! Claude Code sends every server first (with the error an older server
//! gave it; a 2026-07-28 server is woken by it) itself ([`LazyGate`]). The
//! first other request wakes the server: the proxy starts it, replays the
//! host's `initialize` (its own id) and `notifications/initialized`, waits
//! for the handshake to finish, then relays the request. It also asks the
//! live server for its tools, page by page ([`ToolsCheck`]); if they differ
//! from what the host was given, the host gets
//! `notifications/tools/list_changed` and asks again.
//!
//! A remote upstream (`--url`) has no process to spare, but each session
//! costs a connection (TLS), an `initialize` round trip and a session the
//! server keeps. Lazily, the HTTP transport is started at the wake like a
//! child: the replayed `initialize` is the one that opens the HTTP
//! session, so the `Mcp-Session-Id` it gets is the transport's own from
//! the start (the host, on stdio, never sees one), and a session that
//! never calls a tool opens no session on the server at all.
//!
//! A snapshot is usable only if it holds the whole `initialize` answer and
//! the tools, was taken with the protocol version the host asks for, and
//! nothing in it was redacted (a redacted answer would not be what the
//! server says). Anything else, and the server starts at once, as without
//! `--lazy`.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::config::{ProxyConfig, UpstreamHttpConfig};
use crate::record::model::{ServerSnapshot, canonical};
use crate::record::store::{Store, load_path};

/// How many of the most recently written runs are searched for a
/// snapshot. Each is read whole, and this is on the proxy's start: a
/// server used recently is found within a few runs, and one that is not
/// starts eagerly, as before.
const SCAN_RUNS: usize = 30;

/// The command digest of a server. For a stdio server: its program and
/// arguments, and the program file's size and modification time (a
/// reinstalled or upgraded program is another version; a launcher such as
/// `npx` that fetches a newer package is caught later, when the live tools
/// differ). For a remote one: [`remote_digest`].
pub(crate) fn command_digest(cfg: &ProxyConfig) -> String {
    if let Some(remote) = &cfg.upstream_http {
        return remote_digest(remote);
    }
    let (size, mtime) = program_path(&cfg.program)
        .and_then(|p| fs::metadata(p).ok())
        .map_or((0, 0), |m| (m.size(), m.mtime()));
    let line = json!({"program": cfg.program, "args": cfg.args, "size": size, "mtime": mtime});
    crate::codec::sha256_hex(&canonical(&line))
}

/// The digest of a remote server: its URL without credentials (no user
/// or password; a secret-named query value is left out, its name kept),
/// the transport asked for, and the names (never the values) of the
/// headers sent. The digest is recorded in runs, so no credential may go
/// into it, even hashed. A server upgraded behind the same URL is caught
/// when the live tools differ.
pub(crate) fn remote_digest(remote: &UpstreamHttpConfig) -> String {
    let mut url = remote.url.clone();
    let _ = url.set_username("");
    let _ = url.set_password(None);
    let query: Vec<(String, String)> = remote
        .url
        .query_pairs()
        .map(|(k, v)| {
            let v = if crate::redact::is_secret_key(&k, false) {
                String::new()
            } else {
                v.into_owned()
            };
            (k.into_owned(), v)
        })
        .collect();
    url.set_query(None);
    let mut headers: Vec<String> = remote
        .headers
        .iter()
        .map(|(name, _)| name.to_ascii_lowercase())
        .collect();
    headers.sort();
    let line = json!({"url": url.as_str(), "query": query,
        "mode": format!("{:?}", remote.mode), "headers": headers});
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
pub(crate) fn gate_for(cfg: &ProxyConfig) -> Option<LazyGate> {
    if !cfg.lazy {
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

/// The answers a lazy proxy gives in place of a server not yet started
/// (made from the last usable snapshot of the same server).
#[derive(Debug, Clone)]
pub(crate) struct LazyGate {
    /// The protocol version the snapshot was taken with: a host asking
    /// for another one gets the real server.
    pub protocol_version: String,
    /// The `result` of `initialize`, as JSON text.
    pub initialize_result: String,
    /// `tools/list`, `prompts/list`, `resources/list`,
    /// `resources/templates/list` → the pages the snapshot holds. A list
    /// the snapshot does not hold, or a page of it asked with a cursor it
    /// has no page for, wakes the server.
    pub lists: BTreeMap<&'static str, Vec<CachedPage>>,
    /// The `error` the server answered a `server/discover` probe with, as
    /// JSON text (`None`: a probe wakes the server).
    pub discover_error: Option<String>,
}

/// One page of a list, as the server answered it.
#[derive(Debug, Clone)]
pub(crate) struct CachedPage {
    /// The cursor it answers (canonical JSON); `None`: the first page.
    pub cursor: Option<Vec<u8>>,
    /// The whole `result`, as JSON text.
    pub result: String,
}

/// The list methods a lazy proxy can answer.
pub(crate) const LIST_METHODS: [&str; 4] = [
    "tools/list",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
];

impl LazyGate {
    /// The answer (`result` text) to `method` asked with `cursor` (the
    /// request's `params.cursor`, canonical JSON), if the snapshot has it.
    pub(crate) fn page(&self, method: &str, cursor: Option<&[u8]>) -> Option<&str> {
        self.lists
            .get(method)?
            .iter()
            .find(|p| p.cursor.as_deref() == cursor)
            .map(|p| p.result.as_str())
    }
}

#[derive(Deserialize)]
struct ListParams<'a> {
    #[serde(borrow, default)]
    cursor: Option<&'a RawValue>,
}

/// A list request's `params.cursor`, canonical JSON (`None`: the first
/// page). `Err`: params the proxy cannot read (the server will answer).
pub(crate) fn list_cursor(params: Option<&RawValue>) -> Result<Option<Vec<u8>>, ()> {
    let Some(params) = params else {
        return Ok(None);
    };
    let parsed = serde_json::from_str::<ListParams>(params.get()).map_err(|_| ())?;
    match parsed.cursor {
        None => Ok(None),
        Some(raw) => serde_json::from_str::<serde_json::Value>(raw.get())
            .map(|v| (!v.is_null()).then(|| canonical(&v)))
            .map_err(|_| ()),
    }
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
        return None; // a tool without a name
    }
    let one_page = |result: Value| {
        vec![CachedPage {
            cursor: None,
            result: result.to_string(),
        }]
    };
    let flat = |key: &str, items: &Option<Vec<crate::record::model::Redacted<Value>>>| {
        items.as_ref().map(|items| {
            let items: Vec<Value> = items.iter().map(|i| (**i).clone()).collect();
            one_page(json!({key: items}))
        })
    };
    let mut lists = BTreeMap::new();
    lists.insert("tools/list", one_page(json!({"tools": tools})));
    let others = [
        ("prompts/list", flat("prompts", &s.prompts)),
        ("resources/list", flat("resources", &s.resources)),
        (
            "resources/templates/list",
            flat("resourceTemplates", &s.resource_templates),
        ),
    ];
    for (method, pages) in others {
        if let Some(pages) = pages {
            lists.insert(method, pages);
        }
    }
    // A paginated list is answered page by page, as the server paged it
    // (its cursors included), never flattened into one page.
    for (method, pages) in s.list_pages.iter().flatten() {
        let Some(method) = LIST_METHODS.iter().find(|m| **m == method.as_str()) else {
            continue;
        };
        let pages = pages
            .iter()
            .map(|p| CachedPage {
                cursor: p.cursor.as_deref().map(canonical),
                result: p.result.to_string(),
            })
            .collect();
        lists.insert(method, pages);
    }
    let gate = LazyGate {
        protocol_version: protocol,
        initialize_result: Value::Object(result).to_string(),
        lists,
        discover_error: s.discover_error.as_ref().map(|e| e.to_string()),
    };
    let redacted = std::iter::once(&gate.initialize_result)
        .chain(gate.discover_error.as_ref())
        .chain(gate.lists.values().flatten().map(|p| &p.result))
        .any(|t| t.contains("[REDACTED"));
    if redacted {
        return None;
    }
    Some(gate)
}

/// `--lazy`, once the server is started: compares its tools, page by
/// page, with the pages the host was given from the snapshot. The host
/// is told the list changed (`notifications/tools/list_changed`) if a
/// page differs (its tools, or the cursor to the next one); pages the
/// snapshot does not hold were never given, so the walk stops there.
#[derive(Debug)]
pub(crate) struct ToolsCheck {
    given: Vec<CachedPage>,
    /// The cursor of the page asked for (`None`: the first).
    asking: Option<Vec<u8>>,
    /// Pages compared so far (a bound: a server answering with a cursor
    /// loop must not keep the check going).
    compared: usize,
}

/// What the lifecycle loop does with a live page of tools.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum CheckStep {
    /// Same as what the host was given, as far as it was given.
    Same,
    /// Different: tell the host.
    Differ,
    /// Same so far: ask for the page at this cursor (JSON text).
    Next(String),
}

impl ToolsCheck {
    /// A check against the `tools/list` pages of `gate`, if it has any.
    pub(crate) fn of(gate: &LazyGate) -> Option<ToolsCheck> {
        let given = gate.lists.get("tools/list")?.clone();
        Some(ToolsCheck {
            given,
            asking: None,
            compared: 0,
        })
    }

    /// The live server's answer (the whole line) to the page asked for.
    /// An answer that cannot be read counts as different: the host asking
    /// again costs little, missing a change costs much.
    pub(crate) fn on_answer(&mut self, answer: &[u8]) -> CheckStep {
        let Some(cached) = self
            .given
            .iter()
            .find(|p| p.cursor == self.asking)
            .and_then(|p| serde_json::from_str::<Value>(&p.result).ok())
        else {
            return CheckStep::Same;
        };
        let Ok(live) = serde_json::from_slice::<Value>(answer) else {
            return CheckStep::Differ;
        };
        let Some(live) = live.get("result") else {
            return CheckStep::Differ;
        };
        let part = |v: &Value, key: &str| v.get(key).filter(|x| !x.is_null()).map(canonical);
        if part(live, "tools").is_none()
            || part(live, "tools") != part(&cached, "tools")
            || part(live, "nextCursor") != part(&cached, "nextCursor")
        {
            return CheckStep::Differ;
        }
        self.compared += 1;
        match live.get("nextCursor").filter(|c| !c.is_null()) {
            Some(next) if self.compared < self.given.len() => {
                self.asking = Some(canonical(next));
                CheckStep::Next(next.to_string())
            }
            _ => CheckStep::Same,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(v: Value) -> ServerSnapshot {
        serde_json::from_value(v).expect("snapshot")
    }

    fn whole() -> Value {
        json!({"serverName": "s", "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}}, "serverInfo": {"name": "t", "version": "1"},
            "tools": [{"name": "echo", "inputSchema": {"type": "object"}}],
            "toolHashes": {"echo": "h"}, "toolsDigest": "d"})
    }

    #[test]
    fn a_snapshot_is_usable_only_when_whole_and_unredacted() {
        let gate = gate_of(&snapshot(whole())).expect("usable");
        assert_eq!(
            gate.initialize_result,
            r#"{"capabilities":{"tools":{}},"protocolVersion":"2025-11-25","serverInfo":{"name":"t","version":"1"}}"#
        );
        assert_eq!(
            gate.page("tools/list", None),
            Some(r#"{"tools":[{"inputSchema":{"type":"object"},"name":"echo"}]}"#)
        );
        assert_eq!(gate.page("tools/list", Some(b"\"c\"")), None);
        assert_eq!(gate.page("prompts/list", None), None, "never listed");
        assert_eq!(gate.discover_error, None, "a probe wakes the server");
        let mut probed = whole();
        probed["discoverError"] = json!({"code": -32601, "message": "Method not found"});
        assert_eq!(
            gate_of(&snapshot(probed)).and_then(|g| g.discover_error),
            Some(r#"{"code":-32601,"message":"Method not found"}"#.to_owned())
        );
        let mut no_info = whole();
        no_info.as_object_mut().expect("o").remove("serverInfo");
        assert!(gate_of(&snapshot(no_info)).is_none());
        let mut redacted = whole();
        redacted["serverInfo"]["name"] = json!("[REDACTED:api-key]");
        assert!(gate_of(&snapshot(redacted)).is_none());
        let mut unnamed = whole();
        unnamed["toolHashes"] = json!({"echo": "h", "other": "h2"});
        assert!(gate_of(&snapshot(unnamed)).is_none());
    }

    /// A paginated list is answered page by page, cursors and all, and a
    /// page the snapshot lacks is not made up.
    #[test]
    fn paginated_lists_are_answered_page_by_page() {
        let mut s = whole();
        s["listPages"] = json!({
            "resources/list": [
                {"result": {"resources": [{"uri": "a"}], "nextCursor": "p2"}},
                {"cursor": "p2", "result": {"resources": [{"uri": "b"}], "nextCursor": "p3"}}
            ],
            "tools/list": [
                {"result": {"tools": [{"name": "echo"}], "nextCursor": {"n": 2}}}
            ]
        });
        let gate = gate_of(&snapshot(s.clone())).expect("usable");
        assert_eq!(
            gate.page("resources/list", None),
            Some(r#"{"nextCursor":"p2","resources":[{"uri":"a"}]}"#)
        );
        assert_eq!(
            gate.page("resources/list", Some(b"\"p2\"")),
            Some(r#"{"nextCursor":"p3","resources":[{"uri":"b"}]}"#)
        );
        assert_eq!(gate.page("resources/list", Some(b"\"p3\"")), None);
        assert_eq!(
            gate.page("tools/list", None),
            Some(r#"{"nextCursor":{"n":2},"tools":[{"name":"echo"}]}"#),
            "not the flat list: the page"
        );
        s["listPages"]["resources/list"][1]["result"]["resources"][0]["uri"] =
            json!("[REDACTED:token]");
        assert!(gate_of(&snapshot(s)).is_none(), "a redacted page");
    }

    fn answer(result: Value) -> Vec<u8> {
        json!({"jsonrpc": "2.0", "id": "x", "result": result})
            .to_string()
            .into_bytes()
    }

    #[test]
    fn live_tools_are_compared_with_what_the_host_was_given() {
        let gate = gate_of(&snapshot(whole())).expect("usable");
        let check = || ToolsCheck::of(&gate).expect("tools");
        let same = answer(json!({"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}));
        assert_eq!(check().on_answer(&same), CheckStep::Same);
        let changed = answer(json!({"tools": [{"name": "echo", "description": "new"}]}));
        assert_eq!(check().on_answer(&changed), CheckStep::Differ);
        assert_eq!(check().on_answer(b"not json"), CheckStep::Differ);
        let now_paged = answer(
            json!({"tools": [{"name": "echo", "inputSchema": {"type": "object"}}], "nextCursor": "2"}),
        );
        assert_eq!(check().on_answer(&now_paged), CheckStep::Differ);
    }

    #[test]
    fn paginated_tools_are_checked_page_by_page() {
        let mut s = whole();
        s["listPages"] = json!({"tools/list": [
            {"result": {"tools": [{"name": "a"}], "nextCursor": "c2"}},
            {"cursor": "c2", "result": {"tools": [{"name": "b"}]}}
        ]});
        let gate = gate_of(&snapshot(s)).expect("usable");
        let mut check = ToolsCheck::of(&gate).expect("tools");
        let page1 = answer(json!({"tools": [{"name": "a"}], "nextCursor": "c2"}));
        assert_eq!(check.on_answer(&page1), CheckStep::Next("\"c2\"".into()));
        assert_eq!(
            check.on_answer(&answer(json!({"tools": [{"name": "b"}]}))),
            CheckStep::Same
        );
        let mut check = ToolsCheck::of(&gate).expect("tools");
        check.on_answer(&page1);
        assert_eq!(
            check.on_answer(&answer(json!({"tools": [{"name": "b2"}]}))),
            CheckStep::Differ,
            "the second page changed"
        );
        let mut check = ToolsCheck::of(&gate).expect("tools");
        let moved = answer(json!({"tools": [{"name": "a"}], "nextCursor": "other"}));
        assert_eq!(check.on_answer(&moved), CheckStep::Differ, "a new cursor");
    }

    fn remote(url: &str, headers: &[(&str, &str)]) -> UpstreamHttpConfig {
        UpstreamHttpConfig {
            url: url::Url::parse(url).expect("url"),
            mode: crate::proxy::config::TransportMode::Auto,
            headers: headers
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            connect_timeout: std::time::Duration::from_secs(1),
            session_note: Default::default(),
        }
    }

    /// The digest names the server, never a credential: other tokens,
    /// passwords or secret query values give the same digest; another
    /// path, host or plain query value another one.
    #[test]
    fn a_remote_digest_holds_no_credential() {
        let base = remote_digest(&remote(
            "https://u:pw1@mcp.example/v1?team=a&api_key=k1",
            &[("Authorization", "Bearer t1")],
        ));
        let other_secrets = remote_digest(&remote(
            "https://v:pw2@mcp.example/v1?team=a&api_key=k2",
            &[("authorization", "Bearer t2")],
        ));
        assert_eq!(base, other_secrets);
        for other in [
            "https://mcp.example/v2?team=a&api_key=k1",
            "https://mcp.example/v1?team=b&api_key=k1",
            "https://other.example/v1?team=a&api_key=k1",
        ] {
            let d = remote_digest(&remote(other, &[("Authorization", "Bearer t1")]));
            assert_ne!(base, d, "{other}");
        }
        assert_ne!(
            base,
            remote_digest(&remote("https://mcp.example/v1?team=a&api_key=k1", &[])),
            "the header names count"
        );
    }
}
