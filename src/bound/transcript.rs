//! A tolerant, incremental reader of Claude Code's session transcript.
//!
//! The transcript (`transcript_path`, and one file per subagent,
//! `agent_transcript_path`) is JSONL the host keeps appending to: one
//! record per line, `{type: "user"|"assistant"|…, message: {role, model,
//! content: [{type: "text"|"thinking"|"tool_use"|"tool_result", …}]}, …}`.
//! The engine does not read files (sans-IO): it asks the daemon for the
//! bytes from the last offset and feeds them here.
//!
//! Tolerance rules, because the file is written while we read and its
//! format is the host's, not ours:
//! * Only whole lines are read. A last line without its newline is still
//!   being written: its bytes are kept and completed by the next read (the
//!   offset always moves past everything received, so a reader may answer
//!   with as many bytes as it likes).
//! * A line longer than [`MAX_LINE`] (a huge tool result or file write) is
//!   skipped, not buffered without end.
//! * A line that is not JSON, or a record type we do not know, is skipped.
//!
//! What it yields: for each `tool_use` id seen, the model's words before it (its
//! `context`: text blocks, and thinking blocks where the transcript has
//! them, since the last tool result or prompt; parallel calls of one
//! message share it); the last assistant text after the last tool call
//! (the final answer so far); and the model that answered.
//!
//! It also yields, in file order, what the session's hooks tell live
//! ([`Seen`]: prompts, calls, results, a turn's answer), with the
//! transcript's own times: what the recorder recovers when it missed the
//! hooks (no daemon, a daemon that died or was stopped, an HTTP hook that
//! could not connect, an event bir does not register). Only the main
//! thread's rows of a file count (sidechain rows older versions wrote into
//! the main file are left out).

use std::collections::{HashMap, VecDeque};

use serde_json::Value;

use super::hosts::{TranscriptFormat, call_digest, pairing_key};
use crate::record::model::TokenUsage;

/// Words kept per context while reading (the stored context is capped
/// again, smaller, when a step takes it).
const ACC_MAX: usize = 8 * 1024;
/// Contexts kept for calls not told yet (a first read after a restart may
/// hold a whole session's): with [`ACC_MAX`], at most 512 KiB a file.
const MAX_CONTEXTS: usize = 64;
/// Model messages whose token counts are kept (a bound on memory for
/// very long sessions; later ones are not counted).
const MAX_MESSAGES: usize = 100_000;
/// The longest line kept while it is being completed.
pub(crate) const MAX_LINE: usize = 2 * 1024 * 1024;
/// [`Seen`] items held until the session takes them (it takes them after
/// every read); more are counted in [`Transcript::seen_dropped`].
const MAX_SEEN: usize = 4096;

/// Something the transcript shows that the hooks tell live.
#[derive(Debug, Clone)]
pub(crate) enum Seen {
    /// A prompt (the user's or the host's, not a tool result).
    Prompt { text: String, at: Option<String> },
    /// A `tool_use` block.
    Call {
        id: String,
        name: String,
        input: Value,
        at: Option<String>,
    },
    /// A `tool_result` block: the structured result (`toolUseResult`, what
    /// `PostToolUse` carries) where the row has one, else the block's
    /// content.
    Result {
        id: String,
        output: Value,
        is_error: bool,
        at: Option<String>,
    },
    /// The text the model ended a turn with (seen when the next prompt
    /// starts another turn).
    Answer { text: String, at: Option<String> },
}

/// A Codex rollout call's tool, as its hooks name it where the rollout
/// says enough: an MCP tool (`namespace: "mcp__<server>"`) is
/// `mcp__<server>__<tool>`; any other keeps the rollout's name.
fn codex_tool_name(p: &Value) -> String {
    let name = p["name"].as_str().unwrap_or("");
    match p["namespace"].as_str() {
        Some(ns) if ns.starts_with("mcp__") => format!("{}__{name}", ns.trim_end_matches('_')),
        _ => name.to_owned(),
    }
}

/// A Codex rollout call's arguments: `arguments` (a string holding JSON)
/// or a custom tool's `input`.
fn codex_arguments(p: &Value) -> Value {
    match &p["arguments"] {
        Value::String(s) => serde_json::from_str(s).unwrap_or_else(|_| Value::String(s.clone())),
        Value::Null => p["input"].clone(),
        other => other.clone(),
    }
}

/// The text of a Gemini message's `content`: a string, or parts with
/// `text`.
fn gemini_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str().or(p.as_str()))
            .collect::<Vec<_>>()
            .join(""),
        Value::Object(_) => content["text"].as_str().unwrap_or("").to_owned(),
        _ => String::new(),
    }
}

/// One transcript file being followed.
#[derive(Debug, Default)]
pub(crate) struct Transcript {
    pub path: String,
    /// Where the next read starts: after every byte received.
    pub offset: u64,
    /// The start of a line still being written.
    partial: Vec<u8>,
    /// The rest of an overlong line is being skipped.
    skipping: bool,
    /// A read was asked for at this time and not answered yet.
    pub reading: Option<std::time::SystemTime>,
    /// Another read is wanted once the current one is answered (the file
    /// grew while it was being read).
    pub again: bool,
    /// tool_use id → the model's words before that call (empty: none),
    /// for every call the file has shown so far.
    pub contexts: HashMap<String, String>,
    /// The ids of `contexts`, oldest first.
    order: VecDeque<String>,
    /// tool_use id → when the file shows the model made that call (Codex's
    /// rollout: its `function_call` line), for the calls of `contexts`.
    pub call_at: HashMap<String, String>,
    /// The assistant's text after its last tool call, so far.
    pub last_text: Option<String>,
    /// `message.model` of the last assistant record.
    pub model: Option<String>,
    /// Separate running state for the main thread and for sidechain
    /// (subagent) records that older versions wrote into the main file.
    acc: [Acc; 2],
    /// What the file showed since the session last took it (file order).
    pub seen: Vec<Seen>,
    /// [`Seen`] items dropped over [`MAX_SEEN`].
    pub seen_dropped: u64,
    /// Whose transcript this is (`hosts`).
    pub format: TranscriptFormat,
    /// The host's version where the transcript says it (Codex's
    /// `session_meta.cli_version`).
    pub host_version: Option<String>,
    /// The session's turn when this reader was made: a subagent's file
    /// counts its tokens in the turn that started the subagent.
    pub opened_in_turn: u32,
    /// Prompts this file has shown so far: the turn (1, 2, … in this
    /// file; 0 before its first prompt) what it shows now belongs to.
    pub turn: u32,
    /// Tokens per model message id (the host may write a message's record
    /// several times, one per content block: the message is counted once,
    /// its last record's counts, in the turn it first appeared in).
    usage_by_message: HashMap<String, MessageUsage>,
    /// Tokens of a host that reports a running total instead (Codex's
    /// `total_token_usage`): each growth of the total, added to the turn
    /// and model it happened in.
    usage_running: Vec<UsageRow>,
    /// The last running total seen.
    usage_total: Option<TokenUsage>,
    /// Gemini: call ids already numbered, and calls per (name, arguments).
    seen_calls: std::collections::HashSet<String>,
    occurrences: HashMap<String, u32>,
}

/// One model message's tokens, and where they belong.
#[derive(Debug)]
struct MessageUsage {
    turn: u32,
    model: Option<String>,
    usage: TokenUsage,
}

/// Tokens of one model in one turn of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UsageRow {
    /// The file's turn ([`Transcript::turn`]).
    pub turn: u32,
    pub model: Option<String>,
    pub usage: TokenUsage,
}

/// Adds `usage` to the row of (`turn`, `model`) in `rows`, or a new row.
fn add_row(rows: &mut Vec<UsageRow>, turn: u32, model: Option<&str>, usage: &TokenUsage) {
    match rows
        .iter_mut()
        .find(|r| r.turn == turn && r.model.as_deref() == model)
    {
        Some(row) => row.usage.add(usage),
        None => rows.push(UsageRow {
            turn,
            model: model.map(str::to_owned),
            usage: *usage,
        }),
    }
}

/// `now − before`, field by field; `now` itself when a count went down
/// (the host started counting again).
fn growth(before: &TokenUsage, now: &TokenUsage) -> TokenUsage {
    let fields = [
        (before.input, now.input),
        (before.output, now.output),
        (before.cache_read, now.cache_read),
        (before.cache_write, now.cache_write),
    ];
    if fields.iter().any(|(b, n)| n < b) {
        return *now;
    }
    TokenUsage {
        input: now.input - before.input,
        output: now.output - before.output,
        cache_read: now.cache_read - before.cache_read,
        cache_write: now.cache_write - before.cache_write,
    }
}

#[derive(Debug, Default)]
struct Acc {
    context: String,
    answer: String,
}

impl Acc {
    fn push(&mut self, part: &str) {
        if self.context.len() < ACC_MAX {
            if !self.context.is_empty() {
                self.context.push_str("\n\n");
            }
            self.context.push_str(part);
        }
    }
}

impl Transcript {
    #[cfg(test)]
    pub(crate) fn new(path: String) -> Transcript {
        Transcript {
            path,
            ..Transcript::default()
        }
    }

    /// A reader of a transcript written in `format`.
    pub(crate) fn with_format(path: String, format: TranscriptFormat) -> Transcript {
        Transcript {
            path,
            format,
            ..Transcript::default()
        }
    }

    /// Takes the bytes a read returned from `offset`. Returns `false` (and
    /// changes nothing) if they are not from where this reader stands (a
    /// stale answer). The one exception: a file not read at all yet may be
    /// answered from further on, the end of a line an earlier daemon had
    /// read up to (the daemon remembers it across restarts, so a long
    /// transcript is not read again from its start).
    pub(crate) fn consume(&mut self, offset: u64, bytes: &[u8]) -> bool {
        let fresh = self.offset == 0 && self.partial.is_empty() && !self.skipping;
        if offset != self.offset && !(fresh && offset > 0) {
            return false;
        }
        self.offset = offset;
        self.offset += bytes.len() as u64;
        let mut rest = bytes;
        if self.skipping {
            let Some(end) = memchr::memchr(b'\n', rest) else {
                return true;
            };
            rest = &rest[end + 1..];
            self.skipping = false;
        }
        let Some(end) = memchr::memrchr(b'\n', rest) else {
            self.keep_partial(rest);
            return true;
        };
        let (lines, tail) = (&rest[..end], &rest[end + 1..]);
        for (i, line) in lines.split(|b| *b == b'\n').enumerate() {
            if i == 0 && !self.partial.is_empty() {
                let mut whole = std::mem::take(&mut self.partial);
                whole.extend_from_slice(line);
                self.line(&whole);
            } else {
                self.line(line);
            }
        }
        self.keep_partial(tail);
        true
    }

    fn keep_partial(&mut self, bytes: &[u8]) {
        if self.partial.len() + bytes.len() > MAX_LINE {
            self.partial = Vec::new();
            self.skipping = true;
        } else {
            self.partial.extend_from_slice(bytes);
        }
    }

    fn line(&mut self, line: &[u8]) {
        if let Ok(record) = serde_json::from_slice::<Value>(line) {
            self.record(&record);
        }
    }

    /// A read was asked for less than `patience` ago and is not answered:
    /// one asked for longer ago is taken as lost (the engine asks again).
    pub(crate) fn is_reading(
        &self,
        now: std::time::SystemTime,
        patience: std::time::Duration,
    ) -> bool {
        self.reading
            .is_some_and(|at| now.duration_since(at).map_or(true, |d| d < patience))
    }

    /// Drops the contexts no call will ask for any more (`told`: the call
    /// was recorded in full), and the oldest beyond [`MAX_CONTEXTS`].
    pub(crate) fn forget(&mut self, told: impl Fn(&str) -> bool) {
        self.order.retain(|id| !told(id));
        while self.order.len() > MAX_CONTEXTS {
            self.order.pop_front();
        }
        let order = &self.order;
        if order.len() != self.contexts.len() {
            self.contexts.retain(|id, _| order.contains(id));
        }
        if !self.call_at.is_empty() {
            let contexts = &self.contexts;
            self.call_at.retain(|id, _| contexts.contains_key(id));
        }
    }

    fn see(&mut self, item: Seen) {
        if self.seen.len() < MAX_SEEN {
            self.seen.push(item);
        } else {
            self.seen_dropped += 1;
        }
    }

    fn record(&mut self, r: &Value) {
        match self.format {
            TranscriptFormat::ClaudeCode => self.claude_record(r),
            TranscriptFormat::CodexRollout => self.codex_record(r),
            TranscriptFormat::GeminiChat => self.gemini_record(r),
        }
    }

    /// The tokens the file reports so far (`None`: none).
    #[cfg(test)]
    pub(crate) fn usage(&self) -> Option<TokenUsage> {
        let mut sum = TokenUsage::default();
        for row in self.usage_rows() {
            sum.add(&row.usage);
        }
        (!sum.is_empty()).then_some(sum)
    }

    /// The tokens the file reports so far, per turn of the file and model:
    /// turns in order, models by name within a turn.
    pub(crate) fn usage_rows(&self) -> Vec<UsageRow> {
        let mut rows = self.usage_running.clone();
        for m in self.usage_by_message.values() {
            add_row(&mut rows, m.turn, m.model.as_deref(), &m.usage);
        }
        rows.retain(|r| !r.usage.is_empty());
        rows.sort_by(|a, b| (a.turn, &a.model).cmp(&(b.turn, &b.model)));
        rows
    }

    /// A model message's tokens: counted once per `message_id` (the last
    /// record's counts), in the turn and under the model it first came
    /// with.
    fn note_usage(&mut self, message_id: Option<&str>, model: Option<&str>, usage: TokenUsage) {
        if usage.is_empty() {
            return;
        }
        if let Some(seen) = message_id.and_then(|id| self.usage_by_message.get_mut(id)) {
            seen.usage = usage;
            return;
        }
        if self.usage_by_message.len() >= MAX_MESSAGES {
            return;
        }
        let key = message_id
            .map(str::to_owned)
            .unwrap_or_else(|| format!("#{}", self.usage_by_message.len()));
        self.usage_by_message.insert(
            key,
            MessageUsage {
                turn: self.turn,
                model: model.map(str::to_owned),
                usage,
            },
        );
    }

    /// A host's running total of tokens (Codex): its growth since the last
    /// one is the current turn's, under the current model.
    fn note_running_total(&mut self, total: TokenUsage) {
        let grown = growth(&self.usage_total.unwrap_or_default(), &total);
        self.usage_total = Some(total);
        if !grown.is_empty() {
            let model = self.model.clone();
            add_row(&mut self.usage_running, self.turn, model.as_deref(), &grown);
        }
    }

    /// Notes call `id` with the words said before it (once).
    fn note_call(&mut self, id: &str, side: usize) {
        let acc = &mut self.acc[side];
        if self
            .contexts
            .insert(id.to_owned(), acc.context.clone())
            .is_none()
        {
            self.order.push_back(id.to_owned());
        }
        acc.answer.clear();
    }

    /// Text the model wrote: context for its next call, and the answer so
    /// far.
    fn note_text(&mut self, text: &str, side: usize) {
        if text.trim().is_empty() {
            return;
        }
        let acc = &mut self.acc[side];
        acc.push(text);
        if !acc.answer.is_empty() {
            acc.answer.push_str("\n\n");
        }
        acc.answer.push_str(text);
    }

    fn settle_answer(&mut self) {
        let answer = &self.acc[0].answer;
        self.last_text = (!answer.is_empty()).then(|| answer.clone());
    }

    /// A Codex rollout line: `{timestamp, type, payload}`.
    fn codex_record(&mut self, r: &Value) {
        let p = &r["payload"];
        match (r["type"].as_str(), p["type"].as_str()) {
            (Some("session_meta"), _) => {
                if let Some(v) = p["cli_version"].as_str().filter(|v| !v.is_empty()) {
                    self.host_version = Some(v.to_owned());
                }
            }
            (Some("event_msg"), Some("token_count")) => {
                let t = &p["info"]["total_token_usage"];
                let n = |k: &str| t[k].as_u64().unwrap_or(0);
                if t.is_object() {
                    // OpenAI's `input_tokens` already holds the cached ones.
                    self.note_running_total(TokenUsage {
                        input: n("input_tokens"),
                        output: n("output_tokens"),
                        cache_read: n("cached_input_tokens"),
                        cache_write: n("cache_write_input_tokens"),
                    });
                }
            }
            // A turn starts (the prompt's `response_item` may come before
            // or after it, and the host adds user-role items of its own).
            (Some("event_msg"), Some("task_started")) => self.turn += 1,
            (Some("turn_context"), _) => {
                if let Some(m) = p["model"].as_str().filter(|m| !m.is_empty()) {
                    self.model = Some(m.to_owned());
                }
            }
            (Some("response_item"), Some("message")) => match p["role"].as_str() {
                Some("assistant") => {
                    for block in p["content"].as_array().map(Vec::as_slice).unwrap_or(&[]) {
                        if let Some(text) = block["text"].as_str() {
                            self.note_text(text, 0);
                        }
                    }
                    self.settle_answer();
                }
                Some("user") => {
                    let acc = &mut self.acc[0];
                    acc.context.clear();
                    acc.answer.clear();
                    self.settle_answer();
                }
                _ => {}
            },
            (Some("response_item"), Some("reasoning")) => {
                for part in p["summary"].as_array().map(Vec::as_slice).unwrap_or(&[]) {
                    if let Some(text) = part["text"].as_str().filter(|t| !t.trim().is_empty()) {
                        self.acc[0].push(&format!("[thinking] {text}"));
                    }
                }
            }
            (
                Some("response_item"),
                Some("function_call" | "custom_tool_call" | "local_shell_call"),
            ) => {
                if let Some(id) = p["call_id"].as_str() {
                    self.note_call(id, 0);
                    self.settle_answer();
                    if let Some(at) = r["timestamp"].as_str() {
                        self.call_at.insert(id.to_owned(), at.to_owned());
                    }
                    // Told only if no hook tells it (a call the user
                    // interrupted has no PostToolUse, and its PreToolUse
                    // may not be registered: `Host::before_tool_matcher`).
                    self.see(Seen::Call {
                        id: id.to_owned(),
                        name: codex_tool_name(p),
                        input: codex_arguments(p),
                        at: r["timestamp"].as_str().map(str::to_owned),
                    });
                }
            }
            (Some("response_item"), Some("function_call_output" | "custom_tool_call_output")) => {
                self.acc[0].context.clear();
                if let Some(id) = p["call_id"].as_str() {
                    self.see(Seen::Result {
                        id: id.to_owned(),
                        output: p["output"].clone(),
                        is_error: false,
                        at: r["timestamp"].as_str().map(str::to_owned),
                    });
                }
            }
            _ => {}
        }
    }

    /// A Gemini CLI chats line: a message `{id, type: "user"|"gemini",
    /// content, thoughts, model, toolCalls}` (written again under its id
    /// when its calls are added: the last record wins), or metadata and
    /// `$set` lines (skipped). Calls are keyed as the Gemini adapter keys
    /// them ([`pairing_key`]): its hooks carry no id.
    fn gemini_record(&mut self, r: &Value) {
        match r["type"].as_str() {
            Some("user") => {
                // A prompt has text; a tool's answer only function
                // responses.
                if !gemini_text(&r["content"]).trim().is_empty() {
                    self.turn += 1;
                }
                let acc = &mut self.acc[0];
                acc.context.clear();
                acc.answer.clear();
                self.settle_answer();
            }
            Some("gemini") => {
                let model = r["model"].as_str().filter(|m| !m.is_empty());
                if let Some(m) = model {
                    self.model = Some(m.to_owned());
                }
                let t = &r["tokens"];
                let n = |k: &str| t[k].as_u64().unwrap_or(0);
                // Gemini's `input` (promptTokenCount) holds the cached ones.
                self.note_usage(
                    r["id"].as_str(),
                    model,
                    TokenUsage {
                        input: n("input"),
                        output: n("output").saturating_add(n("thoughts")),
                        cache_read: n("cached"),
                        cache_write: 0,
                    },
                );
                // The record is the message as it now stands.
                let acc = &mut self.acc[0];
                acc.context.clear();
                acc.answer.clear();
                for thought in r["thoughts"].as_array().map(Vec::as_slice).unwrap_or(&[]) {
                    let text = [&thought["subject"], &thought["description"]]
                        .iter()
                        .filter_map(|v| v.as_str())
                        .filter(|t| !t.trim().is_empty())
                        .collect::<Vec<_>>()
                        .join(": ");
                    if !text.is_empty() {
                        acc.push(&format!("[thinking] {text}"));
                    }
                }
                let text = gemini_text(&r["content"]);
                self.note_text(&text, 0);
                for call in r["toolCalls"].as_array().map(Vec::as_slice).unwrap_or(&[]) {
                    let Some(id) = call["id"].as_str() else {
                        continue;
                    };
                    if !self.seen_calls.insert(id.to_owned()) {
                        continue;
                    }
                    let digest = call_digest(
                        call["name"].as_str().unwrap_or(""),
                        call.get("args").unwrap_or(&Value::Null),
                    );
                    let n = self.occurrences.entry(digest.clone()).or_insert(0);
                    *n += 1;
                    let key = pairing_key(&digest, *n);
                    self.note_call(&key, 0);
                    // Told only if no hook tells it (its BeforeTool may not
                    // be registered, `Host::before_tool_matcher`, and a
                    // cancelled call may have no AfterTool). Gemini writes
                    // a call once it is over: with its result.
                    let at = call["timestamp"].as_str().map(str::to_owned);
                    self.see(Seen::Call {
                        id: key.clone(),
                        name: call["name"].as_str().unwrap_or("").to_owned(),
                        input: call.get("args").cloned().unwrap_or(Value::Null),
                        at: at.clone(),
                    });
                    if let Some(result) = call.get("result").filter(|r| !r.is_null()) {
                        self.see(Seen::Result {
                            id: key,
                            output: result.clone(),
                            is_error: call["status"].as_str().is_some_and(|s| s != "success"),
                            at,
                        });
                    }
                }
                self.settle_answer();
            }
            _ => {}
        }
    }

    fn claude_record(&mut self, r: &Value) {
        let side = usize::from(r["isSidechain"].as_bool().unwrap_or(false));
        let at = r["timestamp"].as_str().map(str::to_owned);
        match r["type"].as_str() {
            Some("assistant") => self.assistant(&r["message"], side, at),
            Some("user") => {
                // A new prompt (not a tool result) starts a new turn: the
                // previous turn's answer is no longer "the last text".
                let content = &r["message"]["content"];
                let results: Vec<&Value> = content
                    .as_array()
                    .map(|c| c.iter().filter(|b| b["type"] == "tool_result").collect())
                    .unwrap_or_default();
                if side == 0 && !r["isMeta"].as_bool().unwrap_or(false) {
                    for block in &results {
                        let Some(id) = block["tool_use_id"].as_str() else {
                            continue;
                        };
                        // One result per row is the host's shape; the
                        // structured result belongs to it.
                        let output = match &r["toolUseResult"] {
                            v if results.len() == 1 && !v.is_null() => v.clone(),
                            _ => block["content"].clone(),
                        };
                        self.see(Seen::Result {
                            id: id.to_owned(),
                            output,
                            is_error: block["is_error"].as_bool().unwrap_or(false),
                            at: at.clone(),
                        });
                    }
                    if results.is_empty()
                        && let Some(text) = prompt_text(content)
                    {
                        let answer = std::mem::take(&mut self.acc[0].answer);
                        if !answer.is_empty() {
                            self.see(Seen::Answer {
                                text: answer,
                                at: at.clone(),
                            });
                        }
                        self.turn += 1;
                        self.see(Seen::Prompt { text, at });
                    }
                }
                let acc = &mut self.acc[side];
                acc.context.clear();
                if results.is_empty() {
                    acc.answer.clear();
                }
            }
            _ => {}
        }
    }

    fn assistant(&mut self, message: &Value, side: usize, at: Option<String>) {
        let u = &message["usage"];
        if u.is_object() {
            let n = |k: &str| u[k].as_u64().unwrap_or(0);
            let (read, write) = (
                n("cache_read_input_tokens"),
                n("cache_creation_input_tokens"),
            );
            // `<synthetic>` marks messages the host made up (no model ran).
            let model = message["model"]
                .as_str()
                .filter(|m| !m.is_empty() && !m.starts_with('<'));
            self.note_usage(
                message["id"].as_str(),
                model,
                TokenUsage {
                    // Anthropic's `input_tokens` leaves the cached parts out.
                    input: n("input_tokens").saturating_add(read).saturating_add(write),
                    output: n("output_tokens"),
                    cache_read: read,
                    cache_write: write,
                },
            );
        }
        if let Some(model) = message["model"].as_str() {
            // `<synthetic>` marks messages the host made up (errors).
            if !model.is_empty() && !model.starts_with('<') && side == 0 {
                self.model = Some(model.to_owned());
            }
        }
        let blocks: Vec<Value> = match &message["content"] {
            Value::Array(blocks) => blocks.clone(),
            Value::String(text) => vec![serde_json::json!({"type": "text", "text": text})],
            _ => Vec::new(),
        };
        for block in &blocks {
            let acc = &mut self.acc[side];
            match block["type"].as_str() {
                Some("text") => {
                    let text = block["text"].as_str().unwrap_or("");
                    if text.trim().is_empty() {
                        continue;
                    }
                    acc.push(text);
                    if !acc.answer.is_empty() {
                        acc.answer.push_str("\n\n");
                    }
                    acc.answer.push_str(text);
                }
                Some("thinking") => {
                    let text = block["thinking"].as_str().unwrap_or("");
                    if !text.trim().is_empty() {
                        acc.push(&format!("[thinking] {text}"));
                    }
                }
                Some("tool_use") => {
                    // Every call is noted, with no words too: "the model
                    // said nothing before it" is known, and a call waiting
                    // for its words stops waiting.
                    if let Some(id) = block["id"].as_str()
                        && self
                            .contexts
                            .insert(id.to_owned(), acc.context.clone())
                            .is_none()
                    {
                        self.order.push_back(id.to_owned());
                        if side == 0 {
                            self.see(Seen::Call {
                                id: id.to_owned(),
                                name: block["name"].as_str().unwrap_or("").to_owned(),
                                input: block["input"].clone(),
                                at: at.clone(),
                            });
                        }
                    }
                    self.acc[side].answer.clear();
                }
                _ => {}
            }
        }
        let answer = &self.acc[0].answer;
        self.last_text = (!answer.is_empty()).then(|| answer.clone());
    }
}

/// A user row's prompt text: a string, or its text blocks joined. `None`
/// for rows with nothing to say (an empty or non-text content).
fn prompt_text(content: &Value) -> Option<String> {
    let text = match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter(|b| b["type"] == "text")
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => return None,
    };
    (!text.trim().is_empty()).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(v: Value) -> String {
        format!("{v}\n")
    }

    #[test]
    fn contexts_answers_and_a_line_still_being_written() {
        let mut t = Transcript::new("/t.jsonl".into());
        let first = [
            line(
                serde_json::json!({"type": "user", "message": {"role": "user", "content": "echo hi"}}),
            ),
            line(serde_json::json!({"type": "summary", "summary": "unknown record type"})),
            "not json at all\n".to_owned(),
            line(serde_json::json!({"type": "assistant", "message": {"role": "assistant",
                "model": "claude-opus-5-5", "content": [
                    {"type": "thinking", "thinking": "the echo tool fits"},
                    {"type": "text", "text": "Calling the echo tool."},
                    {"type": "tool_use", "id": "toolu_1", "name": "mcp__e__echo", "input": {}},
                    {"type": "tool_use", "id": "toolu_2", "name": "Bash", "input": {}}]}})),
        ]
        .concat();
        let result = r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"Echo: hi"}]}}"#;
        let partial = r#"{"type":"assistant","message":{"content":[{"type":"text","text":"Now the second."},{"type":"tool_use","#;
        let bytes = format!("{first}{result}\n{partial}");
        assert!(t.consume(0, bytes.as_bytes()));
        assert_eq!(t.offset, bytes.len() as u64);
        assert_eq!(
            t.contexts.get("toolu_1").map(String::as_str),
            Some("[thinking] the echo tool fits\n\nCalling the echo tool.")
        );
        assert_eq!(t.contexts.get("toolu_2"), t.contexts.get("toolu_1"));
        assert_eq!(t.last_text, None);
        assert_eq!(t.model.as_deref(), Some("claude-opus-5-5"));
        assert!(
            !t.contexts.contains_key("toolu_3"),
            "its line is not whole yet"
        );
        // A stale answer (from an older offset) is ignored.
        assert!(!t.consume(0, bytes.as_bytes()));

        // The rest of the line still being written, and more.
        let rest = [
            r#""id":"toolu_3","name":"Bash","input":{}}]}}"#.to_owned() + "\n",
            line(
                serde_json::json!({"type": "assistant", "message": {"content": [
                {"type": "text", "text": "The echo tool said: hi"}]}}),
            ),
        ]
        .concat();
        let offset = t.offset;
        assert!(t.consume(offset, rest.as_bytes()));
        assert_eq!(
            t.contexts.get("toolu_3").map(String::as_str),
            Some("Now the second.")
        );
        assert_eq!(t.last_text.as_deref(), Some("The echo tool said: hi"));
        assert_eq!(t.offset, (bytes.len() + rest.len()) as u64);

        // Contexts of calls already told are dropped.
        t.forget(|id| id == "toolu_1");
        assert!(!t.contexts.contains_key("toolu_1"));
        assert!(t.contexts.contains_key("toolu_2"));
    }

    /// Claude Code writes one record per content block of a message, each
    /// with the message's `usage`: counted once per message id, in the
    /// turn its first record came in, under its model; input counts the
    /// cached parts too.
    #[test]
    fn tokens_are_counted_once_per_message_in_its_turn() {
        let mut t = Transcript::new("/t.jsonl".into());
        let msg = |id: &str, model: &str, out: u64| {
            line(
                serde_json::json!({"type": "assistant", "message": {"id": id, "role": "assistant",
                "model": model, "content": [{"type": "text", "text": "x"}],
                "usage": {"input_tokens": 10, "output_tokens": out,
                          "cache_read_input_tokens": 100, "cache_creation_input_tokens": 5}}}),
            )
        };
        let prompt = |text: &str| {
            line(serde_json::json!({"type": "user", "message": {"role": "user", "content": text}}))
        };
        let result = line(serde_json::json!({"type": "user", "message": {"content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]}}));
        let text = [
            // Before the file's first prompt (a reader that joined late).
            msg("m0", "opus", 2),
            prompt("first"),
            msg("m1", "opus", 3),
            result.clone(),
            msg("m2", "haiku", 1),
            prompt("second"),
            // m1 again (one record per block): counted once, in turn 1.
            msg("m1", "opus", 7),
            msg("m3", "opus", 4),
        ]
        .concat();
        assert!(t.consume(0, text.as_bytes()));
        let u = |output: u64, n: u64| TokenUsage {
            input: 115 * n,
            output,
            cache_read: 100 * n,
            cache_write: 5 * n,
        };
        let row = |turn: u32, model: &str, usage: TokenUsage| UsageRow {
            turn,
            model: Some(model.into()),
            usage,
        };
        assert_eq!(
            t.usage_rows(),
            [
                row(0, "opus", u(2, 1)),
                row(1, "haiku", u(1, 1)),
                row(1, "opus", u(7, 1)),
                row(2, "opus", u(4, 1)),
            ]
        );
        assert_eq!(t.usage(), Some(u(14, 4)));
        assert_eq!(Transcript::new("/e".into()).usage(), None);
    }

    /// Codex reports a running total: each growth is the turn's it came
    /// in (a turn starts at `task_started`), under the turn's model; a
    /// total that went down starts over.
    #[test]
    fn a_running_total_is_split_by_turn() {
        let mut t = Transcript::with_format("/r.jsonl".into(), TranscriptFormat::CodexRollout);
        let total = |input: u64, output: u64, cached: u64| {
            line(
                serde_json::json!({"type": "event_msg", "payload": {"type": "token_count",
                "info": {"total_token_usage": {"input_tokens": input, "output_tokens": output,
                    "cached_input_tokens": cached}}}}),
            )
        };
        let started =
            line(serde_json::json!({"type": "event_msg", "payload": {"type": "task_started"}}));
        let model =
            |m: &str| line(serde_json::json!({"type": "turn_context", "payload": {"model": m}}));
        let text = [
            started.clone(),
            model("gpt-a"),
            total(100, 10, 0),
            total(100, 10, 0),
            total(250, 30, 80),
            started,
            model("gpt-b"),
            total(400, 35, 200),
            total(50, 5, 0),
        ]
        .concat();
        assert!(t.consume(0, text.as_bytes()));
        let row = |turn: u32, model: &str, input, output, cache_read| UsageRow {
            turn,
            model: Some(model.into()),
            usage: TokenUsage {
                input,
                output,
                cache_read,
                cache_write: 0,
            },
        };
        assert_eq!(
            t.usage_rows(),
            [row(1, "gpt-a", 250, 30, 80), row(2, "gpt-b", 200, 10, 120)]
        );
    }

    #[test]
    fn an_overlong_line_is_skipped_not_buffered() {
        let mut t = Transcript::new("/t.jsonl".into());
        let chunk = vec![b'x'; MAX_LINE / 2 + 1];
        for _ in 0..3 {
            let offset = t.offset;
            assert!(t.consume(offset, &chunk));
            assert!(t.partial.len() <= MAX_LINE);
        }
        let tail = [
            "still the long line\n".to_owned(),
            line(
                serde_json::json!({"type": "assistant", "message": {"content": [
                {"type": "text", "text": "after it"}]}}),
            ),
        ]
        .concat();
        let offset = t.offset;
        assert!(t.consume(offset, tail.as_bytes()));
        assert_eq!(t.last_text.as_deref(), Some("after it"));
        assert!(t.partial.is_empty());
    }
}
