//! Replays and mock sessions journaled as runs, through the recorder the
//! proxy uses (`record::LocalRun` and `record::Preparation`), so `bir runs`
//! lists them and `bir runs show` shows them.
//!
//! Each server gets its own [`Preparation`] (its snapshot comes from the
//! session's own `initialize` and `tools/list` exchanges); all of them
//! write into one run whose metadata names the origin (`recorder:
//! "bir-replay"` or `"bir-mock"`, and `madeBy`: `replay`, `verify` or
//! `mock`) and what was replayed (`replayOf`: the scenario file, or the
//! id of the run, never a word like `latest` that names another run
//! tomorrow).
//! Everything passes the same choke point as a proxy's recording:
//! redacted, binaries stubbed, capped. As with the proxy, the run opens at
//! the first call, so a replay that called nothing leaves no empty run.
//! `BIR_RECORDER=off` switches it off like the proxy's recorder.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::Value;
use serde_json::value::RawValue;

use crate::observe::step::{CallOutcome, StepReport};
use crate::record::model::MadeBy;
use crate::record::store::Store;
use crate::record::{LocalRun, Origin, Preparation, ProxyItem, RecorderConfig};

/// `bir replay` and `bir verify`.
pub(crate) const REPLAY_RECORDER: &str = "bir-replay";
/// `bir mock` and `bir-proxy --replay`.
pub(crate) const MOCK_RECORDER: &str = "bir-mock";

pub(crate) struct SessionRecorder {
    run: LocalRun,
    preps: BTreeMap<String, Preparation>,
    items: Vec<ProxyItem>,
    /// Values bir itself holds as credentials (a remote server's static
    /// headers): redacted wherever they turn up.
    known_secrets: Vec<String>,
}

impl SessionRecorder {
    /// A recorder for a session of `recorder` over `servers`, replaying
    /// `replay_of`; `None` when recording is off (`BIR_RECORDER=off`).
    pub(crate) fn open(
        recorder: &str,
        made_by: MadeBy,
        replay_of: &str,
        servers: &[String],
        known_secrets: Vec<String>,
    ) -> Option<SessionRecorder> {
        let first: Arc<str> = servers.first().map_or("replay", String::as_str).into();
        let cfg = RecorderConfig::from_env(first, None)?;
        let store = match Store::open_default() {
            Ok(s) => Some(s),
            Err(e) => {
                log::warn!(
                    "this {recorder} session is not recorded: cannot open the run store ({e})"
                );
                None
            }
        };
        let mut run = LocalRun::new(cfg, store);
        run.set_origin(Origin {
            recorder: recorder.to_owned(),
            replay_of: Some(replay_of.to_owned()),
            made_by,
            servers: servers.to_vec(),
        });
        Some(SessionRecorder {
            run,
            preps: BTreeMap::new(),
            items: Vec::new(),
            known_secrets,
        })
    }

    fn prep(&mut self, server: &str) -> Option<&mut Preparation> {
        if !self.preps.contains_key(server) {
            let mut cfg = RecorderConfig::from_env(server.into(), None)?;
            cfg.known_secrets = self.known_secrets.clone();
            self.preps.insert(server.to_owned(), Preparation::new(cfg));
        }
        self.preps.get_mut(server)
    }

    /// One request of the session and its answer (whole JSON-RPC
    /// messages): a `tools/call` becomes the run's two steps; the opening
    /// exchanges (`initialize`, `server/discover`, `tools/list`) make the
    /// server's snapshot; anything else is not recorded.
    pub(crate) fn exchange(
        &mut self,
        server: &str,
        request: &Value,
        answer: &Value,
        started: SystemTime,
        duration: Duration,
    ) {
        let method = request
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let mut items = std::mem::take(&mut self.items);
        let Some(prep) = self.prep(server) else {
            return;
        };
        if method == "tools/call" {
            let report = step_report(server, request, answer, started, duration);
            prep.call(&report, &mut items);
        } else {
            let (Ok(req), Ok(ans)) = (serde_json::to_vec(request), serde_json::to_vec(answer))
            else {
                return;
            };
            prep.exchange(&method, &req, &ans, &mut items);
        }
        if let Some(prep) = self.preps.get(server) {
            for item in items.drain(..) {
                self.run.write(prep, item);
            }
        }
        self.items = items;
    }

    /// Ends the run: its id, if any call opened one.
    pub(crate) fn finish(mut self) -> Option<String> {
        self.run.finish(0);
        self.run.id().map(str::to_owned)
    }
}

fn raw(v: Option<&Value>) -> Option<Box<RawValue>> {
    v.and_then(|v| serde_json::value::to_raw_value(v).ok())
}

/// What the proxy's observer would have reported of this call.
fn step_report(
    server: &str,
    request: &Value,
    answer: &Value,
    started: SystemTime,
    duration: Duration,
) -> StepReport {
    let params = request.get("params");
    let result = answer.get("result");
    let is_error = answer.get("error").is_some()
        || result
            .and_then(|r| r.get("isError"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
    StepReport {
        server_name: server.to_owned(),
        tool_name: params
            .and_then(|p| p.get("name"))
            .and_then(Value::as_str)
            .map(str::to_owned),
        qualified_name: None,
        request_id: raw(request.get("id")),
        tool_use_id: params
            .and_then(|p| p.pointer("/_meta/claudecode~1toolUseId"))
            .and_then(Value::as_str)
            .map(str::to_owned),
        session_id: None,
        arguments: raw(params.and_then(|p| p.get("arguments"))),
        result: raw(result),
        error: raw(answer.get("error")),
        result_clipped: None,
        arguments_clipped: None,
        is_error,
        outcome: CallOutcome::Answered,
        response_bytes: None,
        started_at: crate::time::rfc3339(started),
        duration_ms: duration.as_secs_f64() * 1000.0,
        request_unparseable: false,
        response_unparseable: false,
        id_shared: false,
        traceparent: None,
        session_epoch: 0,
        request_repairs: Default::default(),
        response_repairs: Default::default(),
    }
}
