//! The wire format: one record, one request (see [`super`] for the table).

use serde_json::{Map, Value, json};

use super::url::segment;
use crate::record::model::{Record, RunEvent, Step, StepType};

/// One request to the service.
#[derive(Debug, Clone)]
pub(crate) struct WireRequest {
    pub method: &'static str,
    /// Relative to the base URL, starting with `/recordings/`.
    pub path: String,
    pub body: Vec<u8>,
    /// A service that does not implement it (404/405/501) is fine.
    pub optional: bool,
}

/// The request that delivers `record` of run `run_id`; `None` for records
/// that stay local (`remote_ack`).
pub(crate) fn request_for(run_id: &str, record: &Record) -> Option<WireRequest> {
    let run = segment(run_id);
    let (method, path, body, optional) = match &record.event {
        RunEvent::RunStarted(header) => (
            "POST",
            "/recordings/runs".to_owned(),
            serde_json::to_value(header).ok()?,
            false,
        ),
        RunEvent::ServerSnapshot(snapshot) => {
            let mut servers = Map::new();
            servers.insert(
                snapshot.server_name.clone(),
                serde_json::to_value(snapshot).ok()?,
            );
            (
                "PATCH",
                format!("/recordings/runs/{run}"),
                json!({"metadata": {"servers": servers}}),
                true,
            )
        }
        RunEvent::Step(step) => (
            "POST",
            format!("/recordings/runs/{run}/steps"),
            step_body(step),
            false,
        ),
        RunEvent::RunFinished(finish) => {
            let mut body = json!({
                "finishedAt": finish.finished_at,
                "metrics": finish.metrics,
                "lossy": finish.lossy,
                "dropped": finish.dropped,
            });
            if let Some(output) = &finish.output {
                body["finalOutput"] = Value::from(output.as_str());
            }
            (
                "POST",
                format!("/recordings/runs/{run}/finish"),
                body,
                false,
            )
        }
        // The service's API has no place for a later prompt or a session
        // event yet; they stay in the local journal (the first prompt
        // travels as the run's `input`).
        RunEvent::RemoteAck(_) | RunEvent::Turn(_) | RunEvent::SessionEvent(_) => return None,
    };
    Some(WireRequest {
        method,
        path,
        body: serde_json::to_vec(&body).ok()?,
        optional,
    })
}

/// A step as the service's row (see the module docs).
pub(crate) fn step_body(step: &Step) -> Value {
    let mut m = Map::new();
    let mut put = |k: &str, v: Value| {
        m.insert(k.to_owned(), v);
    };
    put("id", Value::from(step.id.clone()));
    put("stepIndex", Value::from(step.step_index));
    put(
        "type",
        serde_json::to_value(step.step_type).unwrap_or(Value::Null),
    );
    put("toolName", Value::from(step.qualified_name.as_str()));
    put("serverName", Value::from(step.server_name.clone()));
    put("tool", Value::from(step.tool_name.as_str()));
    put("startedAt", Value::from(step.started_at.clone()));
    let as_text = |v: &Value| Value::String(serde_json::to_string(v).unwrap_or_default());
    match step.step_type {
        StepType::ToolSelected => {
            if let Some(input) = &step.input {
                put("toolInput", as_text(input));
            }
            if let Some(d) = &step.args_digest {
                put("argsDigest", Value::from(d.clone()));
            }
        }
        StepType::ToolResponse => {
            if let Some(output) = &step.output {
                put("toolOutput", as_text(output));
            }
            if let Some(err) = tool_error(step) {
                put("toolError", Value::String(err));
            }
            put("isError", Value::Bool(step.is_error));
            if let Some(ms) = step.duration_ms {
                put("durationMs", json!(ms));
            }
            if let Some(o) = &step.outcome {
                put("outcome", Value::from(o.clone()));
            }
            if let Some(c) = &step.correlation {
                put("correlation", Value::from(c.clone()));
            }
        }
        StepType::FinalAnswer => {
            if let Some(answer) = &step.output {
                let text = match &**answer {
                    Value::String(s) => s.clone(),
                    other => serde_json::to_string(other).unwrap_or_default(),
                };
                put("answer", Value::String(text));
            }
        }
    }
    if let Some(v) = &step.tool_use_id {
        put("toolUseId", Value::from(v.as_str()));
    }
    if let Some(v) = &step.request_id {
        put("requestId", (**v).clone());
    }
    if let Some(v) = &step.agent_id {
        put("agentId", Value::from(v.as_str()));
    }
    if let Some(v) = &step.withheld {
        put("withheld", Value::from(v.clone()));
    }
    if step.redactions > 0 {
        put("redactions", Value::from(step.redactions));
    }
    Value::Object(m)
}

/// `toolError` of a response step: the JSON-RPC error (as JSON text), the
/// text of an `isError` result, or the outcome when the call did not end
/// with an answer.
fn tool_error(step: &Step) -> Option<String> {
    if let Some(err) = &step.error {
        return serde_json::to_string(err).ok();
    }
    if step.is_error {
        let text: Vec<&str> = step
            .output
            .as_ref()
            .and_then(|o| o["content"].as_array())
            .map(|blocks| {
                blocks
                    .iter()
                    .filter(|b| b["type"] == "text")
                    .filter_map(|b| b["text"].as_str())
                    .collect()
            })
            .unwrap_or_default();
        return Some(if text.is_empty() {
            step.outcome.clone().unwrap_or_else(|| "isError".into())
        } else {
            text.join("\n")
        });
    }
    match step.outcome.as_deref() {
        Some("answered") | None => None,
        Some(other) => Some(other.to_owned()),
    }
}
