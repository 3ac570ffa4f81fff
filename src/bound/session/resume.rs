//! A run another daemon left open, taken up again.
//!
//! A daemon killed mid-session (SIGKILL, a crash, the machine's OOM killer)
//! writes no `run_finished`; one stopped while a session is live
//! (`bir down`) leaves the run open on purpose (`Engine::shutdown`). The
//! next daemon of that `$BIR_HOME` reads such runs back from their journals
//! (`daemon::sinks`) and continues each as the same run, so a session is
//! one run whatever happened to the recorder in its middle:
//!
//! * the same run id and journal: records continue at the next `seq`, steps
//!   at the next `stepIndex`, turns at the next number;
//! * calls told in full are `done` (a late view of them is dropped, and the
//!   transcript does not tell them again); a call told as chosen but never
//!   answered is in flight again, at the place its `tool_selected` took, and
//!   its answer comes from a live hook, the proxy or the transcript;
//! * the session's first hook then reads its transcript from the start
//!   (never from an offset a daemon kept: what the stopped daemon read but
//!   had not told yet would be lost), and everything the run does not hold
//!   is told from it, marked `recovered`, before that hook;
//! * a run whose session never comes back ends as any idle run does
//!   (`idle_timeout`), counted from when its journal was last written.

use std::time::SystemTime;

use super::{Call, Session};
use crate::record::model::{StepKind, StepType};
use crate::record::store::LoadedRun;

impl Session {
    /// The session of `run`, an unfinished bound run whose journal was last
    /// written at `written`; `None` for a run that is not one (standalone,
    /// finished, no header or session id).
    pub(in crate::bound) fn resume(run: &LoadedRun, written: SystemTime) -> Option<Session> {
        let header = run.header.as_ref()?;
        let meta = &header.metadata;
        if meta.tier != "bound" || run.finish.is_some() {
            return None;
        }
        let session_id = meta.session_id.as_deref()?;
        let mut s = Session::new(session_id, written);
        s.run_id = header.id.clone();
        if let Some(at) =
            crate::time::parse_rfc3339(&header.started_at).and_then(|secs| u64::try_from(secs).ok())
        {
            s.started_at = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(at);
        }
        s.opened = true;
        s.hooks_seen = true;
        s.resuming = true;
        s.cwd = meta.cwd.clone();
        s.lossy = meta.lossy;
        s.note = meta.note.clone();
        s.model = meta.model.clone();
        s.model_in_header = meta.model.is_some();
        s.wrapped = meta.wrapped_servers.iter().cloned().collect();
        if let Some(host) = &meta.host {
            if let Some(app) = crate::bound::host::Host::ALL
                .into_iter()
                .find(|h| h.app() == host.app)
            {
                s.adapter.host = app;
            }
            if !host.version.is_empty() {
                s.host_version = Some(host.version.clone());
            }
        }
        s.next_seq = run.last_seq() + 1;
        s.next_step = run.steps.iter().map(|st| st.step_index).max().unwrap_or(0) + 1;
        s.turn = run.turns.iter().map(|t| t.turn).max().unwrap_or(0);
        // Every prompt the run holds is met again when the transcript is
        // read from its start.
        s.live_prompts = run.turns.len() as u32;
        if run
            .steps
            .iter()
            .any(|st| st.step_type == StepType::FinalAnswer && st.turn == s.current_turn())
        {
            s.answered_turn = s.current_turn();
        }
        if let Some(answer) = run
            .steps
            .iter()
            .rev()
            .find(|st| st.step_type == StepType::FinalAnswer)
            .and_then(|st| st.output.as_ref())
            .and_then(|o| o.text_at(""))
        {
            s.last_answer = Some(answer);
        }
        for step in run
            .steps
            .iter()
            .filter(|st| st.step_type == StepType::ToolResponse)
        {
            s.metrics.tool_calls += 1;
            s.metrics.errors += u64::from(step.is_error);
            s.metrics.total_tool_ms += step.duration_ms.unwrap_or(0.0);
            if let Some(id) = &step.tool_use_id {
                s.done.insert(id.as_str().to_owned(), written);
            }
        }
        for step in run
            .steps
            .iter()
            .filter(|st| st.step_type == StepType::ToolSelected)
        {
            let Some(id) = step.tool_use_id.as_ref().map(|id| id.as_str().to_owned()) else {
                continue;
            };
            if s.done.contains_key(&id) || s.find(&id).is_some() {
                continue;
            }
            let kind = step.kind.unwrap_or(StepKind::Mcp);
            let mut call = Call::new(
                (
                    step.qualified_name.as_str().to_owned(),
                    step.server_name.clone(),
                    step.tool_name.as_str().to_owned(),
                    kind,
                ),
                step.turn,
                step.started_at.clone(),
                written,
            );
            call.tool_use_id = Some(id);
            call.agent_id = step.agent_id.as_ref().map(|a| a.as_str().to_owned());
            call.agent_type = step.agent_type.clone();
            call.hooked = true;
            call.input = step.input.clone();
            call.input_digest = step.args_digest.clone();
            call.selected_index = Some(step.step_index);
            call.selected_emitted = true;
            call.context = step.context.clone();
            call.words_known = true;
            call.recovered = step.recovered;
            s.calls.push(call);
        }
        Some(s)
    }
}

impl Session {
    /// The daemon stops while this session is live: the run stays open for
    /// the next daemon ([`Session::resume`]). What is fully known is told
    /// now (a call with its answer, held for its other view, keeps the
    /// proxy's result); a call still running stays as chosen, and what the
    /// transcript showed but was not told yet is read again by the next
    /// daemon. Nothing is written for a session whose run never opened.
    pub(in crate::bound) fn suspend(&mut self, cx: &mut super::Cx) {
        let mut i = 0;
        while i < self.calls.len() {
            let c = &self.calls[i];
            if c.result.is_some() || c.proxy.is_some() {
                self.advance(cx, i, true);
                self.retire(cx, i);
            } else {
                i += 1;
            }
        }
        self.finished = true;
    }

    /// Whether the host said this session ended (its run finishes at a
    /// daemon's stop; any other is left open for the next daemon).
    pub(in crate::bound) fn ended(&self) -> bool {
        self.ending.is_some()
    }
}
