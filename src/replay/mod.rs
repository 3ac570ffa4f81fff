//! Reusing runs: scenarios, replay, verify, the mock and guided replay
//! (a layer above the other engines: a guide's plan is the bound tier's).
//!
//! A run is immutable; [`scenario`] is the editable form derived from it
//! ([`derive`]). Replay and verify drive the live servers as an MCP client
//! ([`client`]) through the safety gate ([`gate`]) and compare in recorded
//! space ([`compare`]); the mock serves a recording over stdio ([`mock`])
//! through an index ([`matcher`]). Templates in arguments are resolved by
//! [`template`]. [`guide_plan`] turns a scenario into the steps of a
//! guided replay (`bir guide`). [`junit`] writes a replay's JUnit report;
//! [`targets`] picks where each of a scenario's servers is; [`verify`]
//! holds what `bir verify` does with a report (age, `--update`,
//! `--calibrate --write`, the exit status of several sources).
//! The commands (`bir
//! scenario|replay|verify|mock|guide`) live in the command layer
//! (`crate::cmd::replay`, `crate::cmd::guide`); `bir-proxy --replay` calls
//! [`serve_mock`].

pub(crate) mod builtin;
pub(crate) mod client;
pub(crate) mod compare;
pub(crate) mod derive;
pub(crate) mod guide_plan;
pub(crate) mod junit;
pub(crate) mod matcher;
pub(crate) mod mock;
pub(crate) mod params;
pub(crate) mod recording;
pub(crate) mod runner;
pub(crate) mod safety;
pub(crate) mod scenario;
pub(crate) mod targets;
pub(crate) mod template;
pub(crate) mod trust;
pub(crate) mod verify;

use std::path::Path;

use crate::error::{Error, ExitStatus};
use crate::record::store::Store;
use scenario::Scenario;

/// A scenario from a `*.json` file, or derived in memory from a run (its
/// id, a unique prefix, or `latest`).
pub(crate) fn load_source(source: &str) -> Result<Scenario, Error> {
    let path = Path::new(source);
    if names_a_file(source) {
        return Scenario::load(path);
    }
    let store = Store::open_default()
        .map_err(|e| Error::failure("cannot open the run store").because(e))?;
    let run = store.find(source)?;
    Ok(derive::derive(
        &run,
        &derive::DeriveOptions {
            apply_bindings: true,
        },
    ))
}

/// Whether `source` names a scenario file rather than a run: anything at
/// that path is the scenario (a FIFO or a directory is then refused by
/// `Scenario::load`, never taken for a run id or waited on).
fn names_a_file(source: &str) -> bool {
    source.ends_with(".json")
        || std::fs::symlink_metadata(Path::new(source)).is_ok_and(|m| !m.is_dir())
}

/// What a run made from `source` says it replayed: the scenario file as
/// given, or the id of the run `source` resolved to (never `latest` or a
/// prefix, which name another run once more runs are recorded).
pub(crate) fn source_label(source: &str, scenario: &Scenario) -> String {
    match &scenario.source {
        Some(from) if !names_a_file(source) && !from.run.is_empty() => from.run.clone(),
        _ => source.to_owned(),
    }
}

/// The redactor a recorder would use here (its rules, this process's
/// secret-named environment values): live data passes it before it is
/// compared with recorded data.
pub(crate) fn recorded_space_redactor() -> crate::redact::Redactor {
    recorded_space_redactor_knowing(&[])
}

/// [`recorded_space_redactor`] that also redacts `known_secrets` (the
/// static headers bir itself sends a remote server), in any encoding, as
/// the proxy's recorder does for its `--url` upstream.
pub(crate) fn recorded_space_redactor_knowing(known_secrets: &[String]) -> crate::redact::Redactor {
    crate::record::payload::build_redactor(crate::redact::RedactConfig::default(), known_secrets)
}

/// `value` as the recorder would have stored it: binaries stubbed,
/// redacted, capped (`Null` if redaction failed: nothing of it is kept).
pub(crate) fn in_recorded_space(
    redactor: &crate::redact::Redactor,
    cap: usize,
    value: serde_json::Value,
) -> serde_json::Value {
    crate::record::payload::value(redactor, value, cap)
        .value
        .map(|r| r.into_inner())
        .unwrap_or(serde_json::Value::Null)
}

/// The cap the recorder applies (`BIR_MAX_PAYLOAD_BYTES`).
pub(crate) fn payload_cap() -> usize {
    crate::record::RecorderConfig::from_env("replay".into(), None)
        .map_or(crate::record::truncate::DEFAULT_CAP, |c| c.payload_cap)
}

/// Which server of `scenario` to serve: `wanted`, or the only one.
pub(crate) fn pick_server(scenario: &Scenario, wanted: Option<&str>) -> Result<String, Error> {
    if let Some(w) = wanted {
        let known =
            scenario.servers.contains_key(w) || scenario.steps.iter().any(|s| s.server == w);
        if !known && !scenario.servers.is_empty() {
            return Err(Error::usage(format!(
                "the scenario has no server {w:?} (it has: {})",
                scenario
                    .servers
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        return Ok(w.to_owned());
    }
    let mut names: Vec<&str> = scenario.servers.keys().map(String::as_str).collect();
    if names.is_empty() {
        names = scenario.steps.iter().map(|s| s.server.as_str()).collect();
        names.sort();
        names.dedup();
    }
    match names.as_slice() {
        [one] => Ok((*one).to_owned()),
        [] => Ok(String::new()),
        many => Err(Error::usage(format!(
            "the scenario has several servers ({}): name one with --server",
            many.join(", ")
        ))),
    }
}

/// Staleness: how old the scenario's reference time is, in seconds.
pub(crate) fn age_secs(scenario: &Scenario) -> Option<i64> {
    let at = crate::time::parse_rfc3339(scenario.reference_time()?)?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_secs() as i64;
    Some(now - at)
}

/// How `bir mock` / `bir-proxy --replay` are asked to serve.
pub(crate) struct ServeRequest<'a> {
    pub source: &'a str,
    pub server: Option<&'a str>,
    pub match_mode: Option<&'a str>,
    pub repeats: &'a str,
    pub on_miss: &'a str,
    pub require_all: bool,
    pub strict_redaction: bool,
    pub max_age: Option<std::time::Duration>,
    pub expired_error: bool,
    /// The real server, for `--on-miss passthrough` and `--live-check`.
    pub upstream: &'a [String],
    /// Compare the snapshot with the real server's `tools/list` at start.
    pub live_check: bool,
    /// Journal the session as a run (recorder `bir-mock`).
    pub record: bool,
}

/// Serves a recording, reading `input` (the host's messages) and writing
/// stdout, until `input` ends.
pub(crate) fn serve_mock(
    req: &ServeRequest,
    input: &mut dyn std::io::BufRead,
) -> Result<ExitStatus, Error> {
    let scenario = load_source(req.source)?;
    let server = pick_server(&scenario, req.server)?;
    let mode_name = req.match_mode.unwrap_or(&scenario.rules.match_mode);
    let mode = matcher::Mode::parse(mode_name).ok_or_else(|| {
        Error::usage(format!(
            "--match {mode_name:?} is not keyed, ordered, strict or tool"
        ))
    })?;
    let repeats_last = match req.repeats {
        "error" => false,
        "last" => true,
        other => {
            return Err(Error::usage(format!(
                "--repeats {other:?} is not error or last"
            )));
        }
    };
    let passthrough = match req.on_miss {
        "error" => false,
        "passthrough" => true,
        other => {
            return Err(Error::usage(format!(
                "--on-miss {other:?} is not error or passthrough"
            )));
        }
    };
    if passthrough && req.upstream.is_empty() {
        return Err(Error::usage(
            "--on-miss passthrough needs the real server after --",
        ));
    }
    let max_age = req
        .max_age
        .unwrap_or(std::time::Duration::from_secs(30 * 86_400));
    if let Some(age) = age_secs(&scenario)
        && age > max_age.as_secs() as i64
    {
        if req.expired_error {
            log::error!(
                "the recording is {} days old (--max-age {} days, --expired error): not serving it",
                age / 86_400,
                max_age.as_secs() / 86_400
            );
            return Ok(ExitStatus::Stale);
        }
        log::warn!(
            "the recording is {} days old: its answers may be stale",
            age / 86_400
        );
    }
    let upstream = if passthrough || req.live_check {
        let cwd = scenario
            .source
            .as_ref()
            .map(|s| s.cwd.clone())
            .unwrap_or_default();
        let redactor = recorded_space_redactor();
        let cap = payload_cap();
        let live = runner::start_server(
            &server,
            req.upstream,
            &scenario,
            &cwd,
            std::time::Duration::from_secs(30),
            &|v| in_recorded_space(&redactor, cap, v),
        )
        .map_err(|e| Error::failure(e.to_string()).with_status(ExitStatus::Environment))?;
        if req.live_check {
            let live_tools: Vec<serde_json::Value> = live.tools.values().cloned().collect();
            let recorded = scenario
                .servers
                .get(&server)
                .map(|s| s.tools.as_slice())
                .unwrap_or_default();
            let drift = runner::drift_of(&server, recorded, &live_tools);
            if drift.any() {
                log::warn!(
                    "--live-check: {server} drifted from the recording: added [{}] removed [{}] changed [{}]",
                    drift.added.join(", "),
                    drift.removed.join(", "),
                    drift.changed.join(", ")
                );
            } else {
                log::info!("--live-check: {server}'s tools match the recording");
            }
        }
        passthrough.then_some(live.client)
    } else {
        None
    };
    let options = mock::MockOptions {
        mode,
        repeats_last,
        require_all: req.require_all,
        strict_redaction: req.strict_redaction,
        payload_cap: payload_cap(),
    };
    let require_all = options.require_all;
    let mut mock = mock::Mock::new(
        &scenario,
        &server,
        options,
        recorded_space_redactor(),
        upstream,
    );
    if req.record
        && let Some(recorder) = recording::SessionRecorder::open(
            recording::MOCK_RECORDER,
            crate::record::model::MadeBy::Mock,
            &source_label(req.source, &scenario),
            std::slice::from_ref(&server),
            Vec::new(),
        )
    {
        mock = mock.recording(recorder);
    }
    let stdout = std::io::stdout();
    let mut output = stdout.lock();
    let summary = mock.serve(input, &mut output);
    log::info!("{}", summary.line());
    crate::output::note(&summary.line());
    Ok(ExitStatus::failure_if(summary.failed(require_all)))
}
