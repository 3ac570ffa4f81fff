//! Preparation: what the proxy observed → records that may leave the relay.
//!
//! [`Preparation`] is the one choke point every payload of a proxy passes,
//! whatever the report path (the local Tier 2 run, or the recorder
//! daemon): parse a copy → stub binaries → redact → cap ([`payload`],
//! the same rules the daemon applies to hook payloads). It also learns the server's
//! identity and tools from the `initialize` / `server/discover` /
//! `tools/list` exchanges and turns them into [`ServerSnapshot`]s.
//!
//! It writes nothing: it hands out [`ProxyItem`]s (a snapshot, or one call's
//! `tool_selected` + `tool_response` steps) and the caller decides where
//! they go. Step indices it assigns are the proxy's own; a run numbers
//! them again.
//!
//! Invariants:
//! * Nothing raw leaves: only this module's output reaches an item. If
//!   redaction panics, the step keeps no bodies and is marked
//!   `withheld: "redaction_failed"`.
//! * An idle proxy (no `tools/call` yet) never parses, hashes or redacts:
//!   exchanges wait raw until the first call, so servers that sit idle keep
//!   that work and memory out of their resident set.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

use super::RecorderConfig;
use super::model::{self, HostInfo, ListPage, Redacted, ServerSnapshot, Step, StepType};
use super::payload::{self, Prepared};
use crate::observe::step::StepReport;
use crate::redact::Redactor;
use serde::{Deserialize, Serialize};

/// At most this many exchanges wait for the first call (a handshake is two
/// or three; a server that keeps re-listing its tools only needs its latest
/// lists).
const MAX_PENDING_EXCHANGES: usize = 32;
/// At most this many redacted names are remembered (see
/// `Preparation::names`); the memory is emptied when it is full.
const MAX_REMEMBERED_NAMES: usize = 64;

/// At most this many pages of one list are kept in a snapshot: a lazy
/// proxy asked for a page past them starts the server, and a server that
/// hands out endless cursors cannot grow the snapshot without bound.
const MAX_LIST_PAGES: usize = 64;

/// What the recorder learned about the server and the host.
#[derive(Default)]
struct Knowledge {
    host: Option<HostInfo>,
    protocol_version: Option<Redacted<String>>,
    snapshot: ServerSnapshot,
    /// `tools/list` pages being collected (a request without `cursor`
    /// starts over).
    tools_pages: Vec<Redacted<Value>>,
    snapshot_known: bool,
    /// The upstream session (its epoch) last put in the snapshot.
    session_seen: u64,
}

struct PendingExchange {
    method: String,
    request: Vec<u8>,
    response: Vec<u8>,
}

/// One thing a proxy recorded, prepared: what [`Preparation`] hands out,
/// and the items of the daemon's `POST /proxy/records` (`bound::wire`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", content = "data", rename_all = "snake_case")]
pub(crate) enum ProxyItem {
    /// The server's `initialize` answer and `tools/list`, as for standalone runs.
    Snapshot(Box<ServerSnapshot>),
    /// One `tools/call`: its `tool_selected` and `tool_response` steps as
    /// the proxy's recorder prepared them. Their `stepIndex` is the
    /// proxy's own and is replaced by the run's; `toolUseId` (from
    /// `_meta["claudecode/toolUseId"]`) is the join key.
    Call {
        selected: Box<Step>,
        response: Box<Step>,
    },
}

/// Redacts and shapes what the proxy observed; see the module docs.
pub(crate) struct Preparation {
    cfg: RecorderConfig,
    /// Built at first use, on the observer thread: compiling the redactor's
    /// patterns must not delay the proxy's start.
    redactor: Option<Redactor>,
    knowledge: Knowledge,
    /// Exchanges seen before the first call, still raw.
    pending_exchanges: Vec<PendingExchange>,
    /// A call was prepared: exchanges are read as they come.
    active: bool,
    /// The proxy's own step counter (a run renumbers).
    next_step: u64,
    /// Tool names and their qualified forms as the redactor returned them,
    /// by the exact text it was given: a session calls the same few tools
    /// over and over, and the redactor's text layers cost more than
    /// anything else a small call's steps need. Every name stored still
    /// came out of the redactor, which is deterministic for one text (its
    /// rules and known secrets are fixed for the process).
    names: HashMap<String, Redacted<String>>,
}

impl Preparation {
    pub(crate) fn new(cfg: RecorderConfig) -> Preparation {
        Preparation {
            cfg,
            redactor: None,
            knowledge: Knowledge::default(),
            pending_exchanges: Vec::new(),
            active: false,
            next_step: 1,
            names: HashMap::new(),
        }
    }

    /// The host, as its `initialize` (or `server/discover`) named itself.
    pub(crate) fn host(&self) -> Option<&HostInfo> {
        self.knowledge.host.as_ref()
    }

    pub(crate) fn protocol_version(&self) -> Option<&Redacted<String>> {
        self.knowledge.protocol_version.as_ref()
    }

    /// The server's snapshot, once anything about it is known.
    pub(crate) fn snapshot(&self) -> Option<&ServerSnapshot> {
        self.knowledge
            .snapshot_known
            .then_some(&self.knowledge.snapshot)
    }

    /// An answered `initialize`, `server/discover` or `tools/list`. Before
    /// the first call it is only kept; after it, a snapshot item is pushed
    /// whenever the snapshot may have changed (a `tools/list` once its last
    /// page is in). Destinations skip a snapshot whose digest they wrote.
    pub(crate) fn exchange(
        &mut self,
        method: &str,
        request: &[u8],
        response: &[u8],
        out: &mut Vec<ProxyItem>,
    ) {
        if !self.active {
            if self.pending_exchanges.len() == MAX_PENDING_EXCHANGES {
                self.pending_exchanges.remove(0);
            }
            self.pending_exchanges.push(PendingExchange {
                method: method.to_owned(),
                request: request.to_vec(),
                response: response.to_vec(),
            });
            return;
        }
        let complete = self.learn_from_exchange(method, request, response);
        if complete && let Some(snapshot) = self.snapshot() {
            out.push(ProxyItem::Snapshot(Box::new(snapshot.clone())));
        }
    }

    /// One `tools/call`: pushes the snapshot first if this is the first call
    /// (the exchanges kept until now are read here), then the call.
    pub(crate) fn call(&mut self, report: &StepReport, out: &mut Vec<ProxyItem>) {
        if !self.active {
            self.active = true;
            for pending in std::mem::take(&mut self.pending_exchanges) {
                self.learn_from_exchange(&pending.method, &pending.request, &pending.response);
            }
            self.note_session(report.session_epoch);
            if let Some(snapshot) = self.snapshot() {
                out.push(ProxyItem::Snapshot(Box::new(snapshot.clone())));
            }
        } else if self.note_session(report.session_epoch)
            && let Some(snapshot) = self.snapshot()
        {
            // A renewed session: the calls from here on are under it.
            out.push(ProxyItem::Snapshot(Box::new(snapshot.clone())));
        }
        let (selected, response) = self.steps(report);
        out.push(ProxyItem::Call {
            selected: Box::new(selected),
            response: Box::new(response),
        });
    }

    fn steps(&mut self, report: &StepReport) -> (Step, Step) {
        // The envelope's strings are the server's and the host's too: the
        // tool name, the request id and `_meta["claudecode/toolUseId"]`
        // pass the redactor like the payloads do.
        let raw_tool = report.tool_name.as_deref().unwrap_or_default();
        let tool = self.name(raw_tool);
        let qualified = match &report.qualified_name {
            Some(q) if tool.as_str() == raw_tool => self.name(q),
            _ => {
                let name = format!("mcp__{}__{tool}", report.server_name);
                self.name(&name)
            }
        };
        let tool_use_id = report
            .tool_use_id
            .as_deref()
            .map(|id| payload::label(self.redactor(), id));
        let mut args = self.prepare(report.arguments.as_deref().map(|r| r.get()));
        // A request the proxy kept clipped (in-flight memory budget): its
        // arguments are stored as the marker a payload over the cap gets.
        if let Some(clipped) = &report.arguments_clipped {
            args = self.preview_only(&clipped.head, clipped.original_bytes as usize);
        }
        let mut result = self.prepare(report.result.as_deref().map(|r| r.get()));
        if let Some(clipped) = &report.result_clipped {
            result = self.preview_only(&clipped.head, clipped.original_bytes as usize);
        }
        let error = self.prepare(report.error.as_deref().map(|r| r.get()));
        // Each step says only what its own side lost.
        let request_unparseable = report.request_unparseable.then_some("unparseable");
        let response_unparseable = report.response_unparseable.then_some("unparseable");
        let request_id = report
            .request_id
            .as_deref()
            .and_then(|r| serde_json::from_str::<Value>(r.get()).ok())
            .map(|id| payload::whole_or_marker(self.redactor(), id));
        let base = Step {
            qualified_name: qualified,
            server_name: report.server_name.clone(),
            tool_name: tool,
            request_id,
            tool_use_id,
            ..Step::new(
                self.next_step,
                StepType::ToolSelected,
                report.started_at.clone(),
            )
        };
        let selected = Step {
            traceparent: report.traceparent.clone(),
            input: args.value,
            args_digest: args.digest,
            withheld: request_unparseable.or(args.withheld).map(str::to_owned),
            redactions: args.redactions,
            repaired: report
                .request_repairs
                .plus(args.repairs)
                .describe()
                .map(String::into_boxed_str),
            ..base.clone()
        };
        let response = Step {
            id: model::new_step_id(),
            step_index: self.next_step + 1,
            step_type: StepType::ToolResponse,
            output: result.value,
            error: error.value,
            is_error: report.is_error,
            duration_ms: Some((report.duration_ms * 1000.0).round() / 1000.0),
            outcome: serde_json::to_value(report.outcome)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned)),
            withheld: response_unparseable
                .or(result.withheld)
                .or(error.withheld)
                .map(str::to_owned),
            redactions: result.redactions + error.redactions,
            repaired: report
                .response_repairs
                .plus(result.repairs)
                .plus(error.repairs)
                .describe()
                .map(String::into_boxed_str),
            correlation: report.id_shared.then(|| "ambiguous".to_owned()),
            ..base
        };
        self.next_step += 2;
        (selected, response)
    }

    /// Takes the session a call was answered in (its `epoch`, see
    /// `observe::session`) into the snapshot; true when that is a newer
    /// session than the snapshot's (one started or was renewed) and the
    /// snapshot is known. Only forward: a slow call of an older session
    /// does not bring its snapshot back.
    fn note_session(&mut self, epoch: u64) -> bool {
        let Some(cell) = &self.cfg.upstream_session else {
            return false;
        };
        if epoch <= self.knowledge.session_seen {
            return false;
        }
        let id = cell.id_at(epoch);
        let label = id.as_deref().map(|id| payload::label(self.redactor(), id));
        self.knowledge.session_seen = epoch;
        self.knowledge.snapshot.mcp_session_id = label;
        self.knowledge.snapshot_known
    }

    /// A tool's name (or qualified name) through the redactor, or as the
    /// redactor returned it for the same text before (see `names`).
    fn name(&mut self, text: &str) -> Redacted<String> {
        if let Some(known) = self.names.get(text) {
            return known.clone();
        }
        let redacted = payload::label(self.redactor(), text);
        if self.names.len() >= MAX_REMEMBERED_NAMES {
            self.names.clear();
        }
        self.names.insert(text.to_owned(), redacted.clone());
        redacted
    }

    /// The run's redactor; the host session id the run is filed under is
    /// an identifier it keeps (`Redactor::knowing_identifier`).
    fn redactor(&mut self) -> &Redactor {
        let cfg = self.cfg.redact;
        let known = &self.cfg.known_secrets;
        let session = self.cfg.session_id.as_deref();
        self.redactor.get_or_insert_with(|| {
            let redactor = payload::build_redactor(cfg, known);
            match session {
                Some(id) => redactor.knowing_identifier(id),
                None => redactor,
            }
        })
    }

    /// The one choke point ([`payload::raw`]): a raw JSON payload → what
    /// may be stored.
    fn prepare(&mut self, raw: Option<&str>) -> Prepared {
        let cap = self.cfg.payload_cap;
        payload::raw(self.redactor(), raw, cap)
    }

    /// A result too large to parse: its size and a redacted preview.
    fn preview_only(&mut self, text: &str, size: usize) -> Prepared {
        payload::preview_only(self.redactor(), text, size)
    }

    /// Reads an answered `initialize`, `server/discover` or `tools/list`.
    /// True when the snapshot is complete enough to write (anything but a
    /// `tools/list` page with more to come).
    fn learn_from_exchange(&mut self, method: &str, request: &[u8], response: &[u8]) -> bool {
        let (Ok(request), Ok(response)) = (
            serde_json::from_slice::<Value>(request),
            serde_json::from_slice::<Value>(response),
        ) else {
            return false;
        };
        // Everything learnt from an exchange (the server's instructions,
        // serverInfo and capabilities, the client's clientInfo and
        // capabilities, the tools) is read from redacted copies: the
        // snapshot's fields are parts of them, so nothing of it can reach
        // a record unredacted.
        let redactor = self.redactor();
        let (Some(request), Some(response)) = (
            payload::whole(redactor, request),
            payload::whole(redactor, response),
        ) else {
            log::error!("redaction failed; the `{method}` exchange is not recorded");
            return false;
        };
        if method == "server/discover" {
            // An old-era server refuses the probe: its error is what a
            // lazy proxy answers the next probe with.
            self.knowledge.snapshot.discover_error = response.part("/error");
        }
        let Some(result) = response.part("/result") else {
            return false;
        };
        match method {
            "initialize" => self.on_initialize(&request, &result),
            "server/discover" => self.on_discover(&request, &result),
            "tools/list" => {
                self.on_list_page(method, &request, &result);
                return self.on_tools_list(&request, &result);
            }
            "prompts/list" | "resources/list" | "resources/templates/list" => {
                self.on_list_page(method, &request, &result);
                self.on_other_list(method, &request, &result);
                return false;
            }
            _ => return false,
        }
        true
    }

    fn on_initialize(&mut self, request: &Redacted<Value>, result: &Redacted<Value>) {
        if let Some(info) = client_info(request, "/params/clientInfo") {
            self.knowledge.host = Some(info);
        }
        let k = &mut self.knowledge;
        k.protocol_version = result.text_at("/protocolVersion");
        k.snapshot.protocol_version = k.protocol_version.clone();
        k.snapshot.server_info = result.part("/serverInfo");
        k.snapshot.capabilities = result.part("/capabilities");
        k.snapshot.instructions = result.part("/instructions");
        k.snapshot.client_capabilities = request.part("/params/capabilities");
        k.snapshot.client_protocol_version = request.text_at("/params/protocolVersion");
        k.snapshot_known = true;
        self.refresh_snapshot_digest();
    }

    /// The 2026-07-28 era: identity travels in `_meta` (`~1` is a `/` in a
    /// JSON pointer).
    fn on_discover(&mut self, request: &Redacted<Value>, result: &Redacted<Value>) {
        const META: &str = "/params/_meta/io.modelcontextprotocol~1";
        if self.knowledge.host.is_none() {
            self.knowledge.host = client_info(request, &format!("{META}clientInfo"));
        }
        let k = &mut self.knowledge;
        if k.snapshot.server_info.is_some() {
            return; // an initialize answer is more complete
        }
        k.snapshot.server_info = result.part("/_meta/io.modelcontextprotocol~1serverInfo");
        k.snapshot.capabilities = result.part("/capabilities");
        k.snapshot.instructions = result.part("/instructions");
        k.snapshot.client_capabilities = request.part(&format!("{META}clientCapabilities"));
        k.protocol_version = request.text_at(&format!("{META}protocolVersion"));
        k.snapshot.protocol_version = k.protocol_version.clone();
        k.snapshot_known = true;
        self.refresh_snapshot_digest();
    }

    /// True once the last page is in.
    fn on_tools_list(&mut self, request: &Redacted<Value>, result: &Redacted<Value>) -> bool {
        if request.part("/params/cursor").is_none() {
            self.knowledge.tools_pages.clear();
        }
        if let Some(tools) = result.part("/tools") {
            self.knowledge.tools_pages.extend(tools.elements());
        }
        let pages = self.knowledge.tools_pages.clone();
        let mut tools = Vec::with_capacity(pages.len());
        let mut hashes = BTreeMap::new();
        let redactor = self.redactor();
        for tool in pages {
            // Each tool is redacted again on its own, as its hash has
            // always been taken (a tool's hash must not change between
            // versions of bir for the same definition).
            let tool = payload::whole(redactor, (*tool).clone()).unwrap_or(tool);
            if let Some(name) = tool.text_at("/name") {
                hashes.insert(name, crate::codec::sha256_hex(&model::canonical(&tool)));
            }
            tools.push(tool);
        }
        let k = &mut self.knowledge;
        k.snapshot.tools = tools;
        k.snapshot.tool_hashes = hashes;
        k.snapshot_known = true;
        self.refresh_snapshot_digest();
        result.part("/nextCursor").is_none()
    }

    /// `prompts/list`, `resources/list`, `resources/templates/list`: kept
    /// when one page (asked without a cursor, answered without a next one)
    /// holds the whole list; otherwise forgotten, so a lazy proxy never
    /// answers with part of a list.
    fn on_other_list(&mut self, method: &str, request: &Redacted<Value>, result: &Redacted<Value>) {
        let (key, slot) = match method {
            "prompts/list" => ("/prompts", &mut self.knowledge.snapshot.prompts),
            "resources/list" => ("/resources", &mut self.knowledge.snapshot.resources),
            _ => (
                "/resourceTemplates",
                &mut self.knowledge.snapshot.resource_templates,
            ),
        };
        let whole =
            request.part("/params/cursor").is_none() && result.part("/nextCursor").is_none();
        *slot = result
            .part(key)
            .filter(|_| whole)
            .map(|items| items.elements());
    }

    /// Keeps one page of a paginated list (`ServerSnapshot::list_pages`).
    /// A list is paginated when the host asked with a cursor or the server
    /// answered with a `nextCursor`; asking without a cursor starts the
    /// list over (its earlier pages may be stale), and a list that turns
    /// out to be one page has none kept (the flat fields hold it).
    fn on_list_page(&mut self, method: &str, request: &Redacted<Value>, result: &Redacted<Value>) {
        let cursor = request.part("/params/cursor");
        let paginated = cursor.is_some() || result.part("/nextCursor").is_some();
        let all = self
            .knowledge
            .snapshot
            .list_pages
            .get_or_insert_with(BTreeMap::new);
        if cursor.is_none() {
            all.remove(method);
        }
        if paginated {
            let pages = all.entry(method.to_owned()).or_default();
            pages.retain(|p| p.cursor != cursor);
            if pages.len() < MAX_LIST_PAGES {
                pages.push(ListPage {
                    cursor,
                    result: result.clone(),
                });
            }
        }
        if all.is_empty() {
            self.knowledge.snapshot.list_pages = None;
        }
    }

    fn refresh_snapshot_digest(&mut self) {
        let s = &mut self.knowledge.snapshot;
        s.server_name = self.cfg.server_name.to_string();
        s.command_digest = self.cfg.command_digest.clone();
        s.transport = self.cfg.transport.map(str::to_owned);
        let joined: String = s
            .tool_hashes
            .iter()
            .map(|(name, hash)| format!("{name}:{hash}\n"))
            .collect();
        s.tools_digest = crate::codec::sha256_hex(joined.as_bytes());
    }
}

/// The host as a (redacted) `clientInfo` at `pointer` names it.
fn client_info(request: &Redacted<Value>, pointer: &str) -> Option<HostInfo> {
    let info = request.part(pointer)?;
    Some(HostInfo {
        app: info.text_at("/name")?.into_inner(),
        version: info
            .text_at("/version")
            .map(Redacted::into_inner)
            .unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use super::*;
    use crate::observe::step::{CallOutcome, ObservedBody, ToolCallObserved};

    fn report(tool: &str) -> StepReport {
        let request = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": tool, "arguments": {}}});
        StepReport::from_observed(&ToolCallObserved {
            server_name: Arc::from("peer"),
            session_id: None,
            started: Instant::now(),
            duration: Duration::from_millis(1),
            request: ObservedBody::Whole(request.to_string().into_bytes()),
            raw_id: crate::jsonrpc::inline_bytes::SmallBytes::new(b"1"),
            response: Some(ObservedBody::Whole(
                br#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#.to_vec(),
            )),
            outcome: CallOutcome::Answered,
            response_bytes: None,
            id_shared: false,
            traceparent: None,
            session_epoch: 0,
        })
    }

    fn names(prep: &mut Preparation, tool: &str) -> (String, String) {
        let mut out = Vec::new();
        prep.call(&report(tool), &mut out);
        let Some(ProxyItem::Call { selected, .. }) = out.pop() else {
            panic!("a call item");
        };
        (
            selected.tool_name.to_string(),
            selected.qualified_name.to_string(),
        )
    }

    /// Tool names are remembered as the redactor returned them: a name
    /// holding a secret is redacted the first time and every time after,
    /// and a full memory starts again rather than grow.
    #[test]
    fn remembered_names_are_the_redactors_output() {
        let secret = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
        let tool = format!("tool_{secret}");
        let mut prep = Preparation::new(RecorderConfig::for_tests());
        let first = names(&mut prep, &tool);
        let again = names(&mut prep, &tool);
        assert!(
            !first.0.contains(secret) && !first.1.contains(secret),
            "{first:?}"
        );
        assert_eq!(first, again, "the same text, the same redaction");
        assert_eq!(names(&mut prep, "echo").0, "echo");
        for n in 0..3 * MAX_REMEMBERED_NAMES {
            names(&mut prep, &format!("t{n}"));
        }
        assert!(prep.names.len() <= MAX_REMEMBERED_NAMES);
        assert_eq!(
            names(&mut prep, &tool),
            first,
            "redacted again after a reset"
        );
    }
}
