//! The read side of the recording service: `bir runs --remote` and
//! `bir runs show|export --remote <id>`.
//!
//! | request | answer |
//! |---|---|
//! | `GET {base}/recordings/runs?limit=N` | `{"runs": [<run>, …]}`, newest first |
//! | `GET {base}/recordings/runs/{id}` | `<run>` |
//!
//! A `<run>` is what bir sent, gathered in one document: the
//! `POST /recordings/runs` body (`id`, `startedAt`, `input`?, `metadata`,
//! with the `PATCH`ed `metadata.servers` merged in), the finish body's
//! fields when the run finished (`finishedAt`, `finalOutput`?, `metrics`,
//! `lossy`, `dropped`), and `steps`: the step bodies as posted.
//!
//! The documents are turned back into journal records (the inverse of
//! [`super::wire`]) and written, as journals, into a private scratch store
//! under `$BIR_HOME` that lives as long as the command: `bir runs` then
//! reads them with the same loader and renders them with the same code as
//! local runs. Nothing the service says becomes a path: a run id that is not
//! `run_` + letters, digits, `-` or `_` is refused.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::client::{Client, ServiceConfig};
use super::url::segment;
use crate::error::{Context, Error, ExitStatus};
use crate::home::bir_home;
use crate::output::out;
use crate::record::journal::{self, DiskStorage};
use crate::record::model::{Record, RunMetadata};
use crate::record::store::{LoadedRun, Store, load_path};

/// The most runs one listing asks for.
const MAX_LIST: usize = 500;

/// Runs fetched from the service, as journals in a scratch store that is
/// removed when this is dropped.
pub(crate) struct Fetched {
    /// The service's base URL (for messages).
    base: String,
    store: Store,
    root: PathBuf,
    ids: Vec<String>,
}

impl Fetched {
    /// Lists the fetched runs with `list` (the local listing, given the
    /// scratch store); no runs at all is said in the service's words, not
    /// the scratch store's (and with `json`, as no lines at all).
    pub(crate) fn list_with(
        &self,
        json: bool,
        list: impl FnOnce(&Store) -> Result<ExitStatus, Error>,
    ) -> Result<ExitStatus, Error> {
        if self.ids.is_empty() && json {
            return Ok(ExitStatus::Success);
        }
        if self.ids.is_empty() {
            out(&format!(
                "No runs on the recording service at {}.",
                crate::urls::display(&self.base)
            ));
            return Ok(ExitStatus::Success);
        }
        list(&self.store)
    }

    /// The first fetched run, loaded as a local run is.
    pub(crate) fn first(&self) -> Result<LoadedRun, Error> {
        let id = self
            .ids
            .first()
            .ok_or_else(|| Error::failure("the recording service has no runs"))?;
        load_path(&self.store.journal_path(id))
            .context(|| format!("cannot read the fetched run {id}"))
    }
}

impl Drop for Fetched {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn client() -> Result<Client, Error> {
    match ServiceConfig::resolve()? {
        Some(cfg) => Ok(Client::new(cfg)),
        None => Err(Error::failure(
            "no recording service is configured: `bir login --service URL` (or set BIR_SERVICE_URL) first",
        )),
    }
}

fn failed(client: &Client, f: super::client::SendFailure) -> Error {
    Error::failure(format!(
        "cannot read runs from the recording service at {}: {}",
        crate::urls::display(client.base()),
        f.detail
    ))
}

/// The newest `limit` runs on the service.
pub(crate) fn list(limit: usize) -> Result<Fetched, Error> {
    let mut client = client()?;
    let limit = limit.clamp(1, MAX_LIST);
    let doc = client
        .get_json(&format!("/recordings/runs?limit={limit}"))
        .map_err(|f| failed(&client, f))?;
    let runs = doc
        .get("runs")
        .and_then(Value::as_array)
        .ok_or_else(|| Error::failure("the service's run list has no `runs` array"))?;
    materialize(client.base(), runs.iter().take(limit))
}

/// One run: its id, or `latest` (the service's newest).
pub(crate) fn fetch(id: &str) -> Result<Fetched, Error> {
    if id == "latest" {
        return list(1);
    }
    if !safe_id(id) {
        return Err(Error::usage(format!(
            "`{id}` is not a run id (with --remote give the whole id, e.g. run_…, or `latest`)"
        )));
    }
    let mut client = client()?;
    let doc = client
        .get_json(&format!("/recordings/runs/{}", segment(id)))
        .map_err(|f| match f.kind {
            super::client::FailKind::Status(404) => Error::failure(format!(
                "the recording service has no run {id} (see `bir runs --remote`)"
            )),
            _ => failed(&client, f),
        })?;
    materialize(client.base(), std::iter::once(&doc))
}

/// `run_` and then letters, digits, `-`, `_`: safe as a file name.
fn safe_id(id: &str) -> bool {
    id.strip_prefix("run_").is_some_and(|rest| {
        !rest.is_empty()
            && rest.len() <= 128
            && rest
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    })
}

/// Writes each run document as a journal of a fresh scratch store.
fn materialize<'a>(base: &str, docs: impl Iterator<Item = &'a Value>) -> Result<Fetched, Error> {
    let home = bir_home().ok_or_else(|| {
        Error::failure("no home directory: set BIR_HOME to choose where bir keeps its files")
    })?;
    let root = home.join("remote").join(format!(
        "{}-{}",
        std::process::id(),
        crate::record::model::uuid_v4()
    ));
    let store = Store::open(&root.join("runs"), Arc::new(DiskStorage))
        .context(|| format!("cannot create {}", root.display()))?;
    let mut fetched = Fetched {
        base: base.to_owned(),
        store,
        root,
        ids: Vec::new(),
    };
    for doc in docs {
        let id = doc.get("id").and_then(Value::as_str).unwrap_or_default();
        if !safe_id(id) {
            log::warn!("skipped a run from the service whose id is not a bir run id");
            continue;
        }
        let records = records_of(doc)?;
        let mut file = fetched
            .store
            .open_writer(id)
            .context(|| format!("cannot write the fetched run {id}"))?;
        for record in &records {
            let bytes = serde_json::to_vec(record)
                .map_err(|e| Error::failure(format!("cannot store run {id}: {e}")))?;
            file.append(&journal::frame(&bytes))
                .context(|| format!("cannot write the fetched run {id}"))?;
        }
        fetched.ids.push(id.to_owned());
    }
    Ok(fetched)
}

/// A run document → the records bir would have journaled for it.
fn records_of(doc: &Value) -> Result<Vec<Record>, Error> {
    let id = doc.get("id").and_then(Value::as_str).unwrap_or_default();
    let bad = |what: &str, e: serde_json::Error| {
        Error::failure(format!(
            "the service's run {id} has a {what} bir cannot read ({e})"
        ))
    };
    let mut events: Vec<Value> = Vec::new();
    // Metadata fields the service may leave out get bir's defaults.
    let mut metadata = serde_json::to_value(RunMetadata::default()).unwrap_or(json!({}));
    let mut servers = Map::new();
    if let (Some(m), Some(given)) = (metadata.as_object_mut(), doc["metadata"].as_object()) {
        for (k, v) in given {
            if k == "servers" {
                servers = v.as_object().cloned().unwrap_or_default();
            } else {
                m.insert(k.clone(), v.clone());
            }
        }
    }
    let mut header = json!({"id": id, "startedAt": doc["startedAt"], "metadata": metadata});
    if let Some(input) = doc.get("input").filter(|v| !v.is_null()) {
        header["input"] = input.clone();
    }
    events.push(json!({"kind": "run_started", "data": header}));
    for (name, snapshot) in servers {
        let mut snapshot = snapshot;
        if snapshot.get("serverName").is_none() {
            snapshot["serverName"] = Value::from(name);
        }
        events.push(json!({"kind": "server_snapshot", "data": snapshot}));
    }
    for step in doc["steps"].as_array().into_iter().flatten() {
        events.push(json!({"kind": "step", "data": step_of(step)}));
    }
    if let Some(finished) = doc.get("finishedAt").filter(|v| v.is_string()) {
        let mut finish = json!({
            "finishedAt": finished,
            "metrics": doc.get("metrics").cloned().unwrap_or(json!({"toolCalls": 0, "errors": 0, "totalToolMs": 0.0})),
            "lossy": doc["lossy"].as_bool().unwrap_or(false),
            "dropped": doc["dropped"].as_u64().unwrap_or(0),
        });
        if let Some(output) = doc.get("finalOutput").filter(|v| v.is_string()) {
            finish["output"] = output.clone();
        }
        events.push(json!({"kind": "run_finished", "data": finish}));
    }
    events
        .into_iter()
        .enumerate()
        .map(|(i, event)| {
            serde_json::from_value::<Record>(json!({"seq": i + 1, "event": event}))
                .map_err(|e| bad("record", e))
        })
        .collect()
}

/// A step body as posted ([`super::wire::step_body`]) → the journal's step.
fn step_of(body: &Value) -> Value {
    let mut s = Map::new();
    let mut copy = |from: &str, to: &str| {
        if let Some(v) = body.get(from).filter(|v| !v.is_null()) {
            s.insert(to.to_owned(), v.clone());
        }
    };
    for key in [
        "id",
        "stepIndex",
        "type",
        "serverName",
        "startedAt",
        "argsDigest",
        "isError",
        "durationMs",
        "outcome",
        "correlation",
        "toolUseId",
        "requestId",
        "agentId",
        "withheld",
        "redactions",
    ] {
        copy(key, key);
    }
    copy("toolName", "qualifiedName");
    copy("tool", "toolName");
    // Payloads travel as JSON text.
    let parsed = |key: &str| {
        body.get(key)
            .and_then(Value::as_str)
            .and_then(|t| serde_json::from_str::<Value>(t).ok())
    };
    if let Some(v) = parsed("toolInput") {
        s.insert("input".into(), v);
    }
    if let Some(v) = parsed("toolOutput") {
        s.insert("output".into(), v);
    }
    // `toolError` is a JSON-RPC error as JSON text, or a text (an
    // `isError` result's, or the outcome): only the first is an error.
    if let Some(err) = parsed("toolError").filter(|v| v.get("code").is_some()) {
        s.insert("error".into(), err);
    }
    if let Some(answer) = body.get("answer").filter(|v| v.is_string()) {
        s.insert("output".into(), answer.clone());
    }
    for (key, default) in [
        ("qualifiedName", ""),
        ("serverName", ""),
        ("toolName", ""),
        ("startedAt", ""),
    ] {
        s.entry(key).or_insert(Value::from(default));
    }
    Value::Object(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::model::{RunEvent, Step};
    use crate::service::wire::step_body;

    #[test]
    fn only_bir_run_ids_become_file_names() {
        assert!(safe_id("run_0a1b-2c3d_x"));
        for bad in [
            "", "run_", "../run_x", "run_../x", "run_a/b", "x_run", "run_a b",
        ] {
            assert!(!safe_id(bad), "{bad}");
        }
    }

    /// What `wire::step_body` sends comes back as the same step.
    #[test]
    fn a_step_survives_the_round_trip_through_the_wire() {
        let mut sel: Step = serde_json::from_value(json!({"id": "step_1", "stepIndex": 1,
            "type": "tool_selected", "qualifiedName": "mcp__s__echo", "serverName": "s",
            "toolName": "echo", "startedAt": "2026-01-01T00:00:00.000Z", "requestId": 7,
            "input": {"message": "hi"}, "argsDigest": "abc"}))
        .expect("step");
        sel.redactions = 2;
        let resp: Step = serde_json::from_value(json!({"id": "step_2", "stepIndex": 2,
            "type": "tool_response", "qualifiedName": "mcp__s__echo", "serverName": "s",
            "toolName": "echo", "startedAt": "2026-01-01T00:00:00.000Z",
            "error": {"code": -32602, "message": "bad"}, "isError": true, "durationMs": 1.5,
            "outcome": "answered"}))
        .expect("step");
        for step in [sel, resp] {
            let back: Step =
                serde_json::from_value(step_of(&step_body(&step))).expect("parses back");
            assert_eq!(
                serde_json::to_value(&back).expect("json"),
                serde_json::to_value(&step).expect("json")
            );
        }
        let doc = json!({"id": "run_x", "startedAt": "2026-01-01T00:00:00.000Z",
            "metadata": {"tier": "standalone", "servers": {"s": {"tools": [], "toolHashes": {}, "toolsDigest": "d"}}},
            "steps": [], "finishedAt": "2026-01-01T00:00:01.000Z"});
        let records = records_of(&doc).expect("records");
        assert!(matches!(records[0].event, RunEvent::RunStarted(_)));
        match &records[1].event {
            RunEvent::ServerSnapshot(s) => assert_eq!(s.server_name, "s"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(records[2].event, RunEvent::RunFinished(_)));
    }
}
