//! What the Claude Code mod (`bir install --mod`) adds to a session's run:
//! the model's words before each tool call as the host appends them (live,
//! not after the fact from `transcript_path`), and the turn's exact answer.
//!
//! The mod is a second reporter beside the hooks, never a replacement for
//! them: hooks keep telling turns and calls (a mod can be switched off
//! host-side at any time — `--bare`, `disableAllHooks`, a rollout flag —
//! and the hooks are what then records the session without loss). Where
//! both report the same thing one record results:
//! * a call's context is keyed by its `tool_use_id`, whichever of the
//!   mod's row, `PreToolUse` or the transcript read comes first; the mod's
//!   words win over the transcript's (they are the same text, earlier);
//! * a row the host appends is applied once, by its `uuid` (a post the mod
//!   sent again changes nothing), and rows are applied in the mod's
//!   sequence, which is the host's own order;
//! * one final answer per turn: the mod's `turn.complete` text when it
//!   comes first, else the `Stop` hook's (`on_stop` asks [`ModState`]).

use std::collections::{HashMap, HashSet, VecDeque};

use serde_json::Value;

use super::{CONTEXT_CAP, Cx, Session};
use crate::bound::wire::{ModBatch, ModEvent};
use crate::record::model::{RunEvent, SessionEvent};
use crate::time::rfc3339;

/// The session event that says the mod link was active for a run.
pub(in crate::bound) const MOD_LINK_EVENT: &str = "ModLink";

/// Rows remembered by uuid, to apply each once.
const MAX_UUIDS: usize = 4096;
/// Contexts kept for calls not told yet.
const MAX_CONTEXTS: usize = 256;
/// Words kept per loop while a message is being appended.
const WORDS_MAX: usize = 8 * 1024;

/// The mod's view of one session.
#[derive(Debug, Default)]
pub(in crate::bound) struct ModState {
    /// Any mod event was seen for this session.
    pub active: bool,
    /// The last sequence number applied (events at or below it are old).
    applied: u64,
    uuids: HashSet<String>,
    uuid_order: VecDeque<String>,
    /// Per loop (`None`: main, `Some(agent_id)`): the model's words since
    /// the last prompt or tool result.
    words: HashMap<Option<String>, String>,
    /// Loops whose words a `tool_use` row already took: the next words
    /// start afresh (the mod sends no tool-result rows, so the first words
    /// after a call are what says a new response began; consecutive
    /// `tool_use` rows of one message share the words).
    taken: HashSet<Option<String>>,
    /// (loop, tool_use_id) → the model's words before that call.
    contexts: HashMap<(Option<String>, String), String>,
    context_order: VecDeque<(Option<String>, String)>,
    /// The main loop's text after its last tool call, so far.
    answer: String,
    /// The turn whose final answer the mod gave.
    pub answered_turn: Option<u32>,
    /// Events the mod said it dropped.
    pub lost: u64,
}

impl ModState {
    /// The model's words before call `tool_use_id` of loop `agent`, if
    /// the mod reported them.
    pub(in crate::bound) fn context(&self, agent: Option<&str>, tool_use_id: &str) -> Option<&str> {
        self.contexts
            .get(&(agent.map(str::to_owned), tool_use_id.to_owned()))
            .map(String::as_str)
    }

    /// Whether the row `uuid` is new (and remembers it).
    fn first_time(&mut self, uuid: &str) -> bool {
        if uuid.is_empty() {
            return true;
        }
        if !self.uuids.insert(uuid.to_owned()) {
            return false;
        }
        self.uuid_order.push_back(uuid.to_owned());
        while self.uuid_order.len() > MAX_UUIDS {
            if let Some(old) = self.uuid_order.pop_front() {
                self.uuids.remove(&old);
            }
        }
        true
    }

    fn push_words(&mut self, agent: &Option<String>, part: &str) {
        if self.taken.remove(agent) {
            self.words.remove(agent);
        }
        let words = self.words.entry(agent.clone()).or_default();
        if words.len() >= WORDS_MAX {
            return;
        }
        if !words.is_empty() {
            words.push_str("\n\n");
        }
        words.push_str(part);
    }

    fn keep_context(&mut self, agent: &Option<String>, id: &str) {
        let Some(words) = self.words.get(agent).filter(|w| !w.is_empty()) else {
            return;
        };
        let key = (agent.clone(), id.to_owned());
        if self.contexts.insert(key.clone(), words.clone()).is_none() {
            self.context_order.push_back(key);
        }
        while self.context_order.len() > MAX_CONTEXTS {
            if let Some(old) = self.context_order.pop_front() {
                self.contexts.remove(&old);
            }
        }
    }

    /// One appended row: the words it adds, the calls it closes the words
    /// of. Returns the tool_use ids whose context it gave.
    fn append(&mut self, e: &Value) -> Vec<(Option<String>, String)> {
        let agent = e["agentId"].as_str().map(str::to_owned);
        let message = &e["message"];
        let blocks = message["content"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        let mut given = Vec::new();
        match (message["type"].as_str(), e["door"].as_str()) {
            (Some("assistant"), _) => {
                for block in blocks {
                    match block["type"].as_str() {
                        Some("text") => {
                            let text = block["text"].as_str().unwrap_or("");
                            if text.trim().is_empty() {
                                continue;
                            }
                            self.push_words(&agent, text);
                            if agent.is_none() {
                                if !self.answer.is_empty() {
                                    self.answer.push_str("\n\n");
                                }
                                self.answer.push_str(text);
                            }
                        }
                        Some("thinking") => {
                            let text = block["thinking"].as_str().unwrap_or("");
                            if !text.trim().is_empty() {
                                self.push_words(&agent, &format!("[thinking] {text}"));
                            }
                        }
                        Some("tool_use") => {
                            if let Some(id) = block["id"].as_str() {
                                self.keep_context(&agent, id);
                                given.push((agent.clone(), id.to_owned()));
                            }
                            self.taken.insert(agent.clone());
                            if agent.is_none() {
                                self.answer.clear();
                            }
                        }
                        _ => {}
                    }
                }
            }
            // A prompt or a tool result: the model's next words are about
            // what it got, so the words so far belong to the calls made.
            (Some("user"), Some("prompt" | "tool-result" | "command" | "delivery")) => {
                self.words.remove(&agent);
                self.taken.remove(&agent);
                let is_result = blocks.iter().any(|b| b["type"] == "tool_result");
                if agent.is_none() && !is_result {
                    self.answer.clear();
                }
            }
            _ => {}
        }
        given
    }
}

impl Session {
    /// A batch of the mod's events for this session.
    pub(in crate::bound) fn on_mod(&mut self, cx: &mut Cx, batch: ModBatch) {
        self.last_event_at = cx.now;
        if !self.modlink.active {
            self.modlink.active = true;
            // Said once in the run: its words came live over the mod link
            // (a reader tells the two recording paths apart by it).
            let event = RunEvent::SessionEvent(SessionEvent {
                name: cx.label(MOD_LINK_EVENT),
                at: rfc3339(cx.now),
                agent_id: None,
                data: cx
                    .value(serde_json::json!({"link": "claude-code-mod"}))
                    .value,
            });
            self.emit_early(cx, event);
        }
        if batch.lost > 0 {
            // The hooks still told every call: only live words are missing.
            self.modlink.lost += batch.lost;
            log::debug!("the mod dropped {} event(s) for {}", batch.lost, self.id);
        }
        for event in batch.events {
            if event.seq != 0 && event.seq <= self.modlink.applied {
                continue;
            }
            self.modlink.applied = self.modlink.applied.max(event.seq);
            self.mod_event(cx, event);
        }
        self.settle(cx);
    }

    fn mod_event(&mut self, cx: &mut Cx, event: ModEvent) {
        let e = &event.e;
        match event.kind.as_str() {
            "session.append" => {
                let uuid = e["uuid"].as_str().unwrap_or("");
                if !self.modlink.first_time(uuid) {
                    return;
                }
                for (agent, id) in self.modlink.append(e) {
                    self.mod_context_for(cx, agent.as_deref(), &id);
                }
            }
            "turn.step" => {
                // The model a main-loop request names (the transcript's
                // `message.model` otherwise, read later).
                if e.get("agentId").is_none()
                    && let Some(model) = e["model"].as_str().filter(|m| !m.is_empty())
                {
                    self.model = Some(cx.label(model));
                }
            }
            "turn.complete" => {
                if e.get("agentId").is_some() {
                    return;
                }
                // The turn's answer: the result's `text` the mod adds, or
                // the input's own `answer`, else the words it saw.
                let text = e["text"]
                    .as_str()
                    .or_else(|| e["answer"].as_str())
                    .map(str::to_owned)
                    .filter(|t| !t.trim().is_empty())
                    .or_else(|| Some(self.modlink.answer.clone()).filter(|a| !a.is_empty()));
                self.mod_answer(cx, text);
            }
            "session.start" => {
                if self.cwd.is_empty()
                    && let Some(cwd) = e["cwd"].as_str().filter(|c| !c.is_empty())
                {
                    self.cwd = cx.label(cwd).into_inner();
                }
            }
            // `tool.call` / `tool.result` / `session.end`: the hooks tell
            // calls and the end; the mod's copies add nothing to the run.
            _ => {}
        }
    }

    /// The mod gave call `id`'s words: a call already known takes them as
    /// its context (they are the transcript's words, earlier).
    fn mod_context_for(&mut self, cx: &Cx, agent: Option<&str>, id: &str) {
        let Some(text) = self.modlink.context(agent, id).map(str::to_owned) else {
            return;
        };
        if let Some(i) = self.find(id)
            && self.calls[i].agent_id.as_deref() == agent
        {
            self.calls[i].learn_words(Some(Some(cx.text(&text, CONTEXT_CAP))));
        }
    }

    /// The turn's answer as the mod saw it end: recorded unless the `Stop`
    /// hook already answered this turn.
    fn mod_answer(&mut self, cx: &mut Cx, text: Option<String>) {
        let Some(text) = text else {
            return;
        };
        if self.turn == 0 || self.modlink.answered_turn == Some(self.turn) {
            return;
        }
        if self.turn_stopped && !self.awaiting_answer {
            // The Stop hook's answer stands for this turn.
            return;
        }
        self.modlink.answered_turn = Some(self.turn);
        let text = cx.text(&text, cx.cfg.payload_cap);
        self.final_answer(cx, text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn row(kind: &str, door: &str, content: Value) -> Value {
        json!({"message": {"type": kind, "content": content}, "door": door, "uuid": "u"})
    }

    #[test]
    fn words_become_the_context_of_the_calls_they_precede() {
        let mut m = ModState::default();
        m.append(&row(
            "user",
            "prompt",
            json!([{"type": "text", "text": "go"}]),
        ));
        m.append(&row(
            "assistant",
            "response",
            json!([{"type": "thinking", "thinking": "plan"}]),
        ));
        m.append(&row(
            "assistant",
            "response",
            json!([{"type": "text", "text": "Calling."}]),
        ));
        let given = m.append(&row(
            "assistant",
            "response",
            json!([{"type": "tool_use", "id": "t1"}, {"type": "tool_use", "id": "t2"}]),
        ));
        assert_eq!(given.len(), 2);
        assert_eq!(m.context(None, "t1"), Some("[thinking] plan\n\nCalling."));
        assert_eq!(m.context(None, "t2"), m.context(None, "t1"));
        // The tool result closes those words: the next call has its own.
        m.append(&row(
            "user",
            "tool-result",
            json!([{"type": "tool_result", "tool_use_id": "t1"}]),
        ));
        m.append(&row(
            "assistant",
            "response",
            json!([{"type": "tool_use", "id": "t3"}]),
        ));
        assert_eq!(m.context(None, "t3"), None, "no words before it");
        m.append(&row(
            "assistant",
            "response",
            json!([{"type": "text", "text": "Done."}]),
        ));
        assert_eq!(m.answer, "Done.");
        // Attachments and queue rows add nothing.
        m.append(&row(
            "attachment",
            "attachment",
            json!([{"type": "text", "text": "x"}]),
        ));
        assert_eq!(m.answer, "Done.");
    }

    /// The model's text, as a `response` row.
    fn said(text: &str) -> Value {
        row(
            "assistant",
            "response",
            json!([{"type": "text", "text": text}]),
        )
    }

    /// A call of the model's, as a `response` row.
    fn called(id: &str) -> Value {
        row(
            "assistant",
            "response",
            json!([{"type": "tool_use", "id": id}]),
        )
    }

    fn prompt(text: &str) -> Value {
        row("user", "prompt", json!([{"type": "text", "text": text}]))
    }

    #[test]
    fn without_tool_result_rows_the_next_words_start_a_new_context() {
        // What the mod sends: prompts and the model's rows only.
        let mut m = ModState::default();
        for r in [prompt("go"), said("First."), called("a"), called("b")] {
            m.append(&r);
        }
        for r in [said("Second."), called("c")] {
            m.append(&r);
        }
        assert_eq!(m.context(None, "a"), Some("First."));
        assert_eq!(
            m.context(None, "b"),
            Some("First."),
            "one message's calls share"
        );
        assert_eq!(m.context(None, "c"), Some("Second."));
        // An answer, then a new prompt: the answer is not the next call's.
        for r in [said("Done."), prompt("again"), said("Third."), called("d")] {
            m.append(&r);
        }
        assert_eq!(m.context(None, "d"), Some("Third."));
    }

    #[test]
    fn a_subagents_words_stay_in_its_loop() {
        let mut m = ModState::default();
        let mut sub = row(
            "assistant",
            "response",
            json!([{"type": "text", "text": "Helper."}]),
        );
        sub["agentId"] = json!("a1");
        m.append(&sub);
        let mut call = row(
            "assistant",
            "response",
            json!([{"type": "tool_use", "id": "s1"}]),
        );
        call["agentId"] = json!("a1");
        m.append(&call);
        assert_eq!(m.context(Some("a1"), "s1"), Some("Helper."));
        assert_eq!(m.context(None, "s1"), None);
        assert!(m.answer.is_empty(), "a subagent's text is not the answer");
    }

    #[test]
    fn rows_are_applied_once_by_uuid() {
        let mut m = ModState::default();
        assert!(m.first_time("a"));
        assert!(!m.first_time("a"));
        assert!(
            m.first_time(""),
            "a row without uuid cannot be deduplicated"
        );
        for i in 0..MAX_UUIDS + 10 {
            m.first_time(&i.to_string());
        }
        assert!(m.uuids.len() <= MAX_UUIDS);
    }
}
