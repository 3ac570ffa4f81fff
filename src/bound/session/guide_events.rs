//! What a guide (`bound::guidance`, `bir guide`) adds to a session's run:
//! one `bir.guide` session event per decision (started, followed, pinned,
//! advised, extra, handover, nudged), and for every pin a check that the
//! server received the pinned arguments.
//!
//! The check: Claude Code puts `_meta["claudecode/toolUseId"]` on each
//! `tools/call`, so the proxy's report of a pinned call finds its pin by
//! `tool_use_id`. The digest of the arguments the proxy recorded is
//! compared with the digest of the pinned arguments (both redacted the
//! same way); a mismatch means something between the hook's answer and the
//! server dropped or changed the rewrite (a sibling hook answering `ask`
//! does, anthropics/claude-code#75915). The run then says
//! `pin_checked applied:false`, and the daemon hands the guide over
//! ([`Session::take_pins_not_applied`]).
//!
//! The pin is remembered before the hook's answer leaves the daemon, and
//! the host sends the call only after it read that answer: the proxy's
//! report cannot overtake its pin.

use serde_json::{Value, json};

use super::{Cx, Session};
use crate::bound::join;
use crate::record::model::{RunEvent, SessionEvent, Step, StepKind};
use crate::time::rfc3339;

/// The session events a guide writes.
pub(in crate::bound) const GUIDE_EVENT: &str = "bir.guide";

/// Pins remembered per session at most (a guide pins once per step).
const MAX_PINS: usize = 1024;

/// The pins of one session waiting for the proxy's report.
#[derive(Debug, Default)]
pub(in crate::bound) struct GuidePins {
    /// tool_use_id → digest of the pinned arguments (redacted).
    waiting: Vec<(String, String)>,
    /// Calls whose server did not get the pinned arguments.
    not_applied: Vec<String>,
}

impl Session {
    /// A guide's decision for one of this session's hooks.
    pub(in crate::bound) fn on_guide(
        &mut self,
        cx: &mut Cx,
        note: Value,
        pin: Option<(String, Value)>,
    ) {
        self.last_event_at = cx.now;
        if let Some((tool_use_id, args)) = pin
            && let Some(prepared) = cx.value(args).value
        {
            if self.guide.waiting.len() >= MAX_PINS {
                self.guide.waiting.remove(0);
            }
            self.guide
                .waiting
                .push((tool_use_id, join::args_digest(&prepared)));
        }
        self.guide_event(cx, note);
    }

    fn guide_event(&mut self, cx: &mut Cx, note: Value) {
        let event = RunEvent::SessionEvent(SessionEvent {
            name: cx.label(GUIDE_EVENT),
            at: rfc3339(cx.now),
            agent_id: None,
            data: cx.value(note).value,
        });
        self.emit(cx, event);
    }

    /// The proxy reported call `tool_use_id` (arguments as the server got
    /// them, after an injected call id was stripped): if it was pinned,
    /// record whether the pin arrived.
    pub(in crate::bound) fn check_pin(&mut self, cx: &mut Cx, tool_use_id: &str, selected: &Step) {
        let Some(pos) = self
            .guide
            .waiting
            .iter()
            .position(|(id, _)| id == tool_use_id)
        else {
            return;
        };
        let (_, expected) = self.guide.waiting.remove(pos);
        let actual = match &selected.input {
            Some(input) if input.get("truncated") != Some(&Value::Bool(true)) => {
                Some(join::args_digest(input))
            }
            _ => selected.args_digest.clone(),
        };
        let applied = actual.as_deref() == Some(expected.as_str());
        if !applied {
            self.guide.not_applied.push(tool_use_id.to_owned());
        }
        self.guide_event(
            cx,
            json!({"action": "pin_checked", "toolUseId": tool_use_id, "applied": applied}),
        );
    }

    /// A pinned call is still in flight on a server whose proxy is bound
    /// here, and that proxy has not reported it: its check is yet to come.
    /// A call of a server bir does not wrap (or whose proxy left) is never
    /// reported, so it is not waited for.
    pub(in crate::bound) fn awaits_pin_report(&self) -> bool {
        self.guide.waiting.iter().any(|(id, _)| {
            self.calls.iter().any(|c| {
                c.tool_use_id.as_deref() == Some(id.as_str())
                    && c.kind == StepKind::Mcp
                    && c.proxy.is_none()
                    && self.server_is_bound(&c.server)
            })
        })
    }

    /// Pinned calls whose server got other arguments, since last asked.
    pub(in crate::bound) fn take_pins_not_applied(&mut self) -> Vec<String> {
        std::mem::take(&mut self.guide.not_applied)
    }
}
