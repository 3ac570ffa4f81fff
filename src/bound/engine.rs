//! The engine: routes each input to its session, and keeps the sessions.
//!
//! A session is created by the first input that names it — a hook event, a
//! proxy's registration or records (a proxy may start before the host's
//! `SessionStart` fires). Its run opens when there is something to tell
//! (the first prompt, step or session event), so a session that only
//! started and ended leaves no run.
//!
//! After its run finished, a session id is remembered (for the longer of
//! the fingerprint window and the idle end): late inputs for it (a proxy flushing at exit, a hook that lost
//! the race with SessionEnd) are dropped instead of opening a new run. A
//! `SessionStart` or `UserPromptSubmit` for it (`claude --resume`) starts a
//! new run.
//!
//! A daemon restart mid-session: a run the last daemon left open (killed,
//! or stopped while the session was live) is taken up again at start
//! ([`Engine::resume`]): the session stays one run. A session the new
//! engine has never seen, whose first hook event is neither `SessionStart`
//! nor a prompt, starts a new run caught up from the transcript, or marked
//! `lossy` with a `note` that says what is missing (see `Session::on_hook`).

use std::collections::HashMap;
use std::time::SystemTime;

use super::hook::Hook;
use super::process::ProcessId;
use super::session::{Cx, Session};
use super::{EngineConfig, Input, Output, SessionSummary};
use crate::redact::Redactor;

/// All sessions the daemon is recording.
pub(crate) struct Engine {
    shared: Shared,
    sessions: HashMap<String, Session>,
    /// Sessions whose run finished, and when.
    finished: HashMap<String, SystemTime>,
    /// proxy_id → session_id.
    proxies: HashMap<String, String>,
    /// Each live session's redactor: the shared one, knowing the session's
    /// id as an identifier ([`Redactor::knowing_identifier`]), so the id
    /// the run is filed under is never redacted in its own records.
    redactors: HashMap<String, Redactor>,
}

/// The redactor for session `id` (made the first time it is asked for).
fn session_redactor<'a>(
    redactors: &'a mut HashMap<String, Redactor>,
    shared: &Redactor,
    id: &str,
) -> &'a Redactor {
    redactors
        .entry(id.to_owned())
        .or_insert_with(|| shared.knowing_identifier(id))
}

/// What every session's handlers read.
struct Shared {
    cfg: EngineConfig,
    redactor: Redactor,
}

impl Shared {
    fn cx<'a>(
        &'a self,
        redactor: &'a Redactor,
        now: SystemTime,
        out: &'a mut Vec<Output>,
    ) -> Cx<'a> {
        Cx {
            cfg: &self.cfg,
            redactor,
            now,
            out,
        }
    }
}

impl Engine {
    pub(crate) fn new(cfg: EngineConfig) -> Engine {
        let redactor = crate::record::payload::build_redactor(cfg.redact, &[]);
        Engine {
            shared: Shared { cfg, redactor },
            sessions: HashMap::new(),
            finished: HashMap::new(),
            proxies: HashMap::new(),
            redactors: HashMap::new(),
        }
    }

    /// Takes one input that arrived at `now`.
    pub(crate) fn handle(&mut self, input: Input, now: SystemTime) -> Vec<Output> {
        let mut out = Vec::new();
        let session_id = match &input {
            Input::Hook { .. } | Input::HostHook { .. } => None,
            Input::ProxyRegistered(reg) => Some(reg.session_id.clone()),
            Input::ProxyRecords(recs) => Some(recs.session_id.clone()),
            Input::ProxyGone { proxy_id } => self.proxies.get(proxy_id).cloned(),
            Input::TranscriptRead { session_id, .. } => Some(session_id.clone()),
            Input::Mod(batch) => Some(batch.session_id.clone()),
            Input::Guide { session_id, .. } => Some(session_id.clone()),
        };
        match input {
            Input::Hook { event, payload } => {
                let hook = Hook::new(event, payload);
                let Some(id) = hook.session_id().map(str::to_owned) else {
                    log::debug!("a {} hook without session_id; ignored", hook.name);
                    return out;
                };
                let restarts = matches!(hook.name.as_str(), "SessionStart" | "UserPromptSubmit");
                self.with_session(&id, now, restarts, &mut out, |s, cx| s.on_hook(cx, &hook));
                self.reap(&id, now);
                return out;
            }
            Input::HostHook {
                host,
                event,
                payload,
                host_process,
            } => {
                let Some(id) = host.session_id(&payload) else {
                    log::debug!(
                        "a {event} hook of {} without a session; ignored",
                        host.app()
                    );
                    return out;
                };
                let restarts = matches!(
                    super::hosts::engine_event(host, &event, &payload),
                    Some("SessionStart" | "UserPromptSubmit")
                );
                self.with_session(&id, now, restarts, &mut out, |s, cx| {
                    s.adapter.host = host;
                    if host_process.is_some() {
                        s.host_process = host_process;
                    }
                    for hook in s.adapter.normalize(&event, payload) {
                        s.on_hook(cx, &hook);
                    }
                });
                self.reap(&id, now);
                return out;
            }
            Input::ProxyRegistered(reg) => {
                let live = self.with_session(&reg.session_id, now, false, &mut out, |s, cx| {
                    s.on_register(cx, &reg)
                });
                if live {
                    self.proxies
                        .insert(reg.proxy_id.clone(), reg.session_id.clone());
                }
            }
            Input::ProxyRecords(recs) => {
                let id = recs.session_id.clone();
                self.with_session(&id, now, false, &mut out, |s, cx| s.on_records(cx, recs));
            }
            Input::ProxyGone { proxy_id } => {
                self.proxies.remove(&proxy_id);
                let session = session_id.as_ref().and_then(|id| self.sessions.get_mut(id));
                if let Some(session) = session {
                    let redactor =
                        session_redactor(&mut self.redactors, &self.shared.redactor, &session.id);
                    let mut cx = self.shared.cx(redactor, now, &mut out);
                    session.on_proxy_gone(&mut cx, &proxy_id);
                }
            }
            Input::Mod(batch) => {
                let id = batch.session_id.clone();
                self.with_session(&id, now, false, &mut out, |s, cx| s.on_mod(cx, batch));
            }
            Input::Guide {
                session_id,
                note,
                pin,
            } => {
                self.with_session(&session_id, now, false, &mut out, |s, cx| {
                    s.on_guide(cx, note, pin)
                });
            }
            Input::TranscriptRead {
                session_id,
                agent_id,
                offset,
                bytes,
            } => {
                if let Some(session) = self.sessions.get_mut(&session_id) {
                    let redactor =
                        session_redactor(&mut self.redactors, &self.shared.redactor, &session_id);
                    let mut cx = self.shared.cx(redactor, now, &mut out);
                    session.on_transcript(&mut cx, agent_id, offset, &bytes);
                }
            }
        }
        if let Some(id) = session_id {
            self.reap(&id, now);
        }
        out
    }

    /// Runs `f` on the live session `id`, created if new. Nothing for a
    /// session whose run finished, unless `restarts` (the input starts a
    /// new run). Returns whether `f` ran.
    fn with_session(
        &mut self,
        id: &str,
        now: SystemTime,
        restarts: bool,
        out: &mut Vec<Output>,
        f: impl FnOnce(&mut Session, &mut Cx),
    ) -> bool {
        if self.finished.contains_key(id) {
            if !restarts {
                log::debug!("an input for finished session {id}; ignored");
                return false;
            }
            self.finished.remove(id);
        }
        let session = self
            .sessions
            .entry(id.to_owned())
            .or_insert_with(|| Session::new(id, now));
        let redactor = session_redactor(&mut self.redactors, &self.shared.redactor, id);
        let mut cx = self.shared.cx(redactor, now, out);
        f(session, &mut cx);
        true
    }

    /// Forgets a session whose run is over.
    fn reap(&mut self, id: &str, now: SystemTime) {
        if self.sessions.get(id).is_some_and(|s| s.finished)
            && let Some(session) = self.sessions.remove(id)
        {
            self.proxies.retain(|_, sid| sid != id);
            self.redactors.remove(id);
            self.finished.insert(session.id, now);
        }
    }

    /// Releases what waited long enough (join grace, idle sessions).
    pub(crate) fn tick(&mut self, now: SystemTime) -> Vec<Output> {
        let mut out = Vec::new();
        for (id, session) in self.sessions.iter_mut() {
            let redactor = session_redactor(&mut self.redactors, &self.shared.redactor, id);
            let mut cx = self.shared.cx(redactor, now, &mut out);
            session.tick(&mut cx);
        }
        let ids: Vec<String> = self.sessions.keys().cloned().collect();
        for id in ids {
            self.reap(&id, now);
        }
        let window = self
            .shared
            .cfg
            .fingerprint_window
            .max(self.shared.cfg.idle_end);
        self.finished
            .retain(|_, at| now.duration_since(*at).map_or(true, |age| age <= window));
        out
    }

    /// The daemon is going down: the run of a session the host said ended
    /// is finished; every other is left open, with what is known told, for
    /// the next daemon to take up ([`Engine::resume`]), so a session the
    /// recorder was stopped in the middle of stays one run.
    pub(crate) fn shutdown(&mut self, now: SystemTime) -> Vec<Output> {
        let mut out = Vec::new();
        for (id, session) in self.sessions.iter_mut() {
            let redactor = session_redactor(&mut self.redactors, &self.shared.redactor, id);
            let mut cx = self.shared.cx(redactor, now, &mut out);
            if session.ended() {
                session.finish(&mut cx, "daemon_shutdown");
            } else {
                session.suspend(&mut cx);
            }
        }
        self.sessions.clear();
        self.proxies.clear();
        self.redactors.clear();
        out
    }

    /// Takes up `run`, a bound run another daemon left open (its journal
    /// last written at `written`), as the session it records
    /// (`session/resume.rs`); whether it was one. A session this engine
    /// already knows keeps its own run.
    pub(crate) fn resume(
        &mut self,
        run: &crate::record::store::LoadedRun,
        written: SystemTime,
    ) -> bool {
        let Some(session) = Session::resume(run, written) else {
            return false;
        };
        if self.sessions.contains_key(&session.id) || self.finished.contains_key(&session.id) {
            return false;
        }
        log::info!(
            "run {}: taken up again for session {} (left open by the last daemon)",
            session.run_id,
            session.id
        );
        self.sessions.insert(session.id.clone(), session);
        true
    }

    /// Whether the host's hooks have told the engine about session `id`
    /// (and its run is still open). A proxy binds only to such a session:
    /// in a session without bir's hooks, nothing would ever end the run,
    /// and the proxy's own standalone run tells the calls better.
    pub(crate) fn hooked(&self, id: &str) -> bool {
        self.sessions
            .get(id)
            .is_some_and(|s| s.hooks_seen && !s.finished)
    }

    /// The live hooked session a proxy belongs to whose environment names
    /// none: the one whose host process is the nearest of the proxy's
    /// `ancestors` (`process`); of two sessions of one process, the one
    /// heard from last.
    pub(crate) fn session_by_ancestry(&self, ancestors: &[ProcessId]) -> Option<String> {
        let mut live: Vec<&Session> = self
            .sessions
            .values()
            .filter(|s| s.hooks_seen && !s.finished && s.host_process.is_some())
            .collect();
        live.sort_by_key(|s| std::cmp::Reverse(s.last_event_at));
        let hosts: Vec<(&str, ProcessId)> = live
            .iter()
            .filter_map(|s| Some((s.id.as_str(), s.host_process?)))
            .collect();
        super::process::session_of(ancestors, &hosts).map(str::to_owned)
    }

    /// The session a registered proxy was bound to.
    pub(crate) fn session_of_proxy(&self, proxy_id: &str) -> Option<&str> {
        self.proxies.get(proxy_id).map(String::as_str)
    }

    /// The answer to a `PreToolUse` hook whose sender asked for call-id
    /// injection (`Correlation::Inject`): `updatedInput` with
    /// `__bir_call_id__` for an MCP call to a server whose proxy is bound in
    /// the payload's session, else `None` (see `answer.rs`); `raw` is the
    /// payload as posted (the answer keeps its input's text). Ask before
    /// handing the hook itself to [`Engine::handle`]; the answer does not
    /// depend on it.
    pub(crate) fn injection(&self, payload: &serde_json::Value, raw: &[u8]) -> Option<String> {
        let session_id = payload["session_id"].as_str()?;
        let session = self.sessions.get(session_id).filter(|s| !s.finished)?;
        super::answer::inject_call_id(payload, raw, |server| {
            session
                .proxies
                .values()
                .any(|bound| super::join::spelled(bound) == server)
        })
    }

    /// `value` as the recorder stores it (redacted, capped; `null` when
    /// nothing of it may be kept): the space a guide compares calls in.
    pub(crate) fn in_recorded_space(&self, value: &serde_json::Value) -> serde_json::Value {
        crate::record::payload::value(
            &self.shared.redactor,
            value.clone(),
            self.shared.cfg.payload_cap,
        )
        .value
        .map(|v| v.into_inner())
        .unwrap_or(serde_json::Value::Null)
    }

    /// Whether session `session_id` pinned an MCP call whose bound proxy
    /// has not reported it yet: the guide's `Stop` waits for that report,
    /// so it does not nudge past a pin the server may not have got.
    pub(crate) fn awaits_pin_report(&self, session_id: &str) -> bool {
        self.sessions
            .get(session_id)
            .is_some_and(|s| !s.finished && s.awaits_pin_report())
    }

    /// Pinned calls (session id, tool_use_id) whose server got other
    /// arguments than the pin, since last asked: their guide hands over.
    pub(crate) fn take_pins_not_applied(&mut self) -> Vec<(String, String)> {
        let mut all = Vec::new();
        for (id, session) in &mut self.sessions {
            for call in session.take_pins_not_applied() {
                all.push((id.clone(), call));
            }
        }
        all
    }

    pub(crate) fn sessions(&self) -> Vec<SessionSummary> {
        let mut all: Vec<SessionSummary> = self.sessions.values().map(Session::summary).collect();
        all.sort_by(|a, b| a.session_id.cmp(&b.session_id));
        all
    }
}
