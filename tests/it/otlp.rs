//! Runs exported to OpenTelemetry, against a stub OTLP/HTTP
//! receiver on 127.0.0.1 (the suite's HTTP stub) that records every request and
//! answers as each test scripts it: what a proxy exports (protobuf by
//! default, JSON on request, headers, gzip), the retry policy (429/503
//! with `Retry-After`, no retry on other 4xx, partial success), a receiver
//! down for a whole session and back for the next, `bir runs export
//! --otlp`, and that `OTEL_*` alone never turns export on.

use std::io::Read;
use std::process::{Command, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::remote::closed_port_url;
use crate::support::{Host, Seen, TempDir, bir, command};
use crate::support::{http, poll_until};

/// One request the stub received.
#[derive(Debug, Clone)]
pub(crate) struct Got {
    pub(crate) path: String,
    pub(crate) headers: Vec<(String, String)>,
    /// The body as sent (gunzipped when it came gzipped).
    pub(crate) body: Vec<u8>,
    pub(crate) gzipped: bool,
    pub(crate) at: Instant,
}

impl Got {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        crate::support::http::header_in(&self.headers, name)
    }

    pub(crate) fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    /// The body as text (protobuf keeps its strings readable).
    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// How the stub answers: status, headers, body.
pub(crate) type Answer = (u16, Vec<(&'static str, String)>, Vec<u8>);
/// The suite's HTTP stub, answering as an OTLP/HTTP receiver would.
pub(crate) struct Stub {
    pub(crate) base: String,
    stub: http::Stub,
}

impl Got {
    /// The request as sent, its body gunzipped when it came gzipped.
    fn of(r: &http::Request) -> Got {
        let gzipped = r.header("content-encoding") == Some("gzip");
        let body = if gzipped {
            let mut out = Vec::new();
            flate2::read::GzDecoder::new(r.body.as_slice())
                .read_to_end(&mut out)
                .expect("a gzip body");
            out
        } else {
            r.body.clone()
        };
        Got {
            path: r.path.clone(),
            headers: r.headers.clone(),
            body,
            gzipped,
            at: r.at,
        }
    }
}

impl Stub {
    /// Answers the nth request (0-based) by `rule`.
    pub(crate) fn start(mut rule: impl FnMut(usize) -> Answer + Send + 'static) -> Stub {
        let stub = http::Stub::start(move |_, earlier| {
            let (code, headers, body) = rule(earlier.len());
            let headers = headers.into_iter().map(|(k, v)| (k.to_owned(), v));
            http::Reply::With(code, headers.collect(), body)
        });
        Stub {
            base: stub.base(),
            stub,
        }
    }

    pub(crate) fn ok() -> Stub {
        Stub::start(|_| (200, Vec::new(), Vec::new()))
    }

    pub(crate) fn requests(&self) -> Vec<Got> {
        self.stub.requests().iter().map(Got::of).collect()
    }

    /// Waits (generously) until `n` requests came.
    pub(crate) fn wait_for(&self, n: usize) -> Vec<Got> {
        poll_until(Duration::from_secs(30), || self.stub.requests().len() >= n);
        self.requests()
    }
}

pub(crate) fn peer_script() -> Value {
    json!({"tools": [
        {"name": "echo", "inputSchema": {"type": "object"}},
        {"name": "fail", "inputSchema": {"type": "object"}}],
      "rules": [{"method": "tools/call", "tool": "fail",
                 "do": [{"reply": {"content": [{"type": "text", "text": "no"}], "isError": true}}]}]})
}

/// `bir-proxy --server-name peer -- bir testpeer <script>` with `env`.
fn proxy(dir: &TempDir, env: &[(&str, &str)]) -> Command {
    let mut cmd = crate::record::proxy(dir, &peer_script());
    cmd.env("RUST_LOG", "debug");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

/// A host session: initialize, an echo call, a failing call; then it
/// stays open until `until` holds (or 30 s pass) and ends.
fn session(cmd: Command, until: impl Fn() -> bool) -> Seen {
    let mut host = Host::start(cmd);
    host.send(&json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"it","version":"1"}}}));
    host.send(&json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}));
    host.send(&json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"fail","arguments":{}}}));
    assert!(host.wait_lines(3, Duration::from_secs(10)), "no answers");
    poll_until(Duration::from_secs(30), until);
    host.finish(Duration::from_secs(20))
}

fn run_bir(dir: &TempDir, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut cmd = command(bir(), dir);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run bir")
}

/// The id of the newest run in the store.
fn latest_run_id(dir: &TempDir) -> String {
    let out = run_bir(dir, &[], &["runs", "export", "latest", "--format", "jsonl"]);
    let first = String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .map(str::to_owned)
        .unwrap_or_default();
    let v: Value = serde_json::from_str(&first).expect("a record");
    v["event"]["data"]["id"]
        .as_str()
        .expect("run id")
        .to_owned()
}

/// The spans of an OTLP/JSON body.
pub(crate) fn spans(body: &Value) -> Vec<Value> {
    body["resourceSpans"][0]["scopeSpans"][0]["spans"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

pub(crate) fn attr(span: &Value, key: &str) -> Value {
    span["attributes"]
        .as_array()
        .and_then(|a| a.iter().find(|kv| kv["key"] == key))
        .map(|kv| kv["value"].clone())
        .unwrap_or(Value::Null)
}

/// A session recorded with export off, and its run id.
fn recorded_run(dir: &TempDir) -> String {
    let seen = session(proxy(dir, &[]), || true);
    assert_eq!(seen.exit(), "code 0");
    latest_run_id(dir)
}

#[test]
fn a_proxy_exports_its_run_as_protobuf_by_default() {
    let dir = TempDir::new("otlp-proto");
    let stub = Stub::ok();
    let seen = session(proxy(&dir, &[("BIR_OTLP_ENDPOINT", &stub.base)]), || true);
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
    let got = stub.wait_for(1);
    assert_eq!(got.len(), 1, "one request for the run");
    let req = &got[0];
    assert_eq!(req.path, "/v1/traces");
    assert_eq!(req.header("content-type"), Some("application/x-protobuf"));
    assert!(
        req.header("user-agent")
            .is_some_and(|u| u.starts_with("bir-otlp/"))
    );
    let text = req.text();
    for needle in [
        "invoke_agent",
        "tools/call echo",
        "tools/call fail",
        "tool_error",
        "service.name",
    ] {
        assert!(text.contains(needle), "{needle} not in the protobuf body");
    }
    // Marked: `--since` finds nothing left to send.
    let out = run_bir(
        &dir,
        &[("BIR_OTLP_ENDPOINT", &stub.base)],
        &["runs", "export", "--otlp", "--since", "1d"],
    );
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("nothing to export"));
    assert_eq!(stub.requests().len(), 1);
}

#[test]
fn json_on_request_with_headers_gzip_and_the_same_bytes_on_re_export() {
    let dir = TempDir::new("otlp-json");
    let id = recorded_run(&dir);
    let stub = Stub::ok();
    let env = [
        ("BIR_OTLP_ENDPOINT", stub.base.as_str()),
        ("BIR_OTLP_PROTOCOL", "http/json"),
        (
            "BIR_OTLP_HEADERS",
            "x-project-name=bir-it,authorization=Bearer%20s3cret",
        ),
        ("BIR_OTLP_COMPRESSION", "gzip"),
    ];
    for _ in 0..2 {
        let out = run_bir(&dir, &env, &["runs", "export", "--otlp", &id]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!String::from_utf8_lossy(&out.stderr).contains("s3cret"));
    }
    let got = stub.wait_for(2);
    assert_eq!(got.len(), 2);
    let req = &got[0];
    assert_eq!(req.header("content-type"), Some("application/json"));
    assert!(req.gzipped);
    assert_eq!(req.header("x-project-name"), Some("bir-it"));
    assert_eq!(req.header("authorization"), Some("Bearer s3cret"));
    // Exported again: the same bytes (the same ids), not copies.
    assert_eq!(got[0].body, got[1].body);
    let body = req.json();
    let spans = spans(&body);
    assert_eq!(spans.len(), 3);
    let root = &spans[0];
    assert_eq!(attr(root, "bir.run.id")["stringValue"], id.as_str());
    assert!(root.get("parentSpanId").is_none());
    let fail = spans
        .iter()
        .find(|s| s["name"] == "tools/call fail")
        .expect("fail span");
    assert_eq!(fail["kind"], 3);
    assert_eq!(fail["status"]["code"], 2);
    assert_eq!(attr(fail, "error.type")["stringValue"], "tool_error");
    assert_eq!(fail["parentSpanId"], root["spanId"]);
    // The proxy recorded how it reached the server: stdio is `pipe`, and
    // stdio has no protocol session to name.
    assert_eq!(attr(fail, "network.transport")["stringValue"], "pipe");
    assert_eq!(attr(fail, "mcp.session.id"), Value::Null);
}

#[test]
fn retries_honour_retry_after_and_stop_on_other_4xx() {
    let dir = TempDir::new("otlp-retry");
    let id = recorded_run(&dir);
    // 400: bad data, never sent again; the run stays unexported.
    let bad = Stub::start(|_| (400, Vec::new(), b"{\"message\":\"bad\"}".to_vec()));
    let env = [("BIR_OTLP_ENDPOINT", bad.base.as_str())];
    let out = run_bir(&dir, &env, &["runs", "export", "--otlp", "--since", "1d"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("HTTP 400"), "{err}");
    assert_eq!(bad.requests().len(), 1, "a 400 is not retried");
    // 415 to JSON says what to do.
    let json_refused = Stub::start(|_| (415, Vec::new(), Vec::new()));
    let env = [
        ("BIR_OTLP_ENDPOINT", json_refused.base.as_str()),
        ("BIR_OTLP_PROTOCOL", "http/json"),
    ];
    let out = run_bir(&dir, &env, &["runs", "export", "--otlp", &id]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("http/protobuf"));
    assert_eq!(json_refused.requests().len(), 1);

    // Still unexported: 429 with Retry-After: 2, then 503 without, then 200.
    let stub = Stub::start(|n| match n {
        0 => (429, vec![("Retry-After", "2".to_owned())], Vec::new()),
        1 => (503, Vec::new(), Vec::new()),
        _ => (200, Vec::new(), Vec::new()),
    });
    let env = [
        ("BIR_OTLP_ENDPOINT", stub.base.as_str()),
        ("BIR_OTLP_PROTOCOL", "http/json"),
    ];
    let out = run_bir(&dir, &env, &["runs", "export", "--otlp", "--since", "1d"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got = stub.requests();
    assert_eq!(got.len(), 3);
    assert!(
        got[1].at.duration_since(got[0].at) >= Duration::from_millis(1900),
        "Retry-After: 2 was not honoured"
    );
    assert_eq!(got[0].body, got[2].body);
    assert!(got[0].text().contains(&id));
}

#[test]
fn partial_success_is_logged_and_not_retried() {
    let dir = TempDir::new("otlp-partial");
    let id = recorded_run(&dir);
    let stub = Stub::start(|_| {
        (
            200,
            vec![("Content-Type", "application/json".to_owned())],
            b"{\"partialSuccess\":{\"rejectedSpans\":\"1\",\"errorMessage\":\"span too old\"}}"
                .to_vec(),
        )
    });
    let env = [
        ("BIR_OTLP_ENDPOINT", stub.base.as_str()),
        ("BIR_OTLP_PROTOCOL", "http/json"),
    ];
    let out = run_bir(&dir, &env, &["runs", "export", "--otlp", &id]);
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("1 rejected"), "{stdout}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("span too old"));
    assert_eq!(stub.requests().len(), 1);
}

#[test]
fn a_receiver_down_for_a_session_gets_its_run_from_the_next() {
    let dir = TempDir::new("otlp-down");
    let down = closed_port_url();
    let seen = session(
        proxy(
            &dir,
            &[
                ("BIR_OTLP_ENDPOINT", &down),
                ("BIR_OTLP_PROTOCOL", "http/json"),
            ],
        ),
        || true,
    );
    // The relay did not notice.
    assert_eq!(seen.exit(), "code 0");
    assert_eq!(seen.messages().len(), 3);
    let missed = latest_run_id(&dir);

    let stub = Stub::ok();
    let has_run = |s: &Stub, id: &str| {
        s.requests().iter().any(|r| {
            spans(&r.json())
                .first()
                .is_some_and(|root| attr(root, "bir.run.id")["stringValue"] == id)
        })
    };
    // The next session, held open until the earlier run arrived.
    let seen = session(
        proxy(
            &dir,
            &[
                ("BIR_OTLP_ENDPOINT", &stub.base),
                ("BIR_OTLP_PROTOCOL", "http/json"),
            ],
        ),
        || has_run(&stub, &missed),
    );
    assert_eq!(seen.exit(), "code 0");
    assert!(
        has_run(&stub, &missed),
        "the earlier run was not caught up: {}",
        seen.stderr
    );
    let own = latest_run_id(&dir);
    let got = stub.wait_for(2);
    assert!(has_run(&stub, &own), "{got:?}");
    // Each went out once; nothing is left.
    assert_eq!(got.len(), 2);
    let out = run_bir(
        &dir,
        &[("BIR_OTLP_ENDPOINT", &stub.base)],
        &["runs", "export", "--otlp", "--since", "1d"],
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("nothing to export"));
}

#[test]
fn otel_variables_alone_never_turn_export_on_and_grpc_is_refused() {
    let dir = TempDir::new("otlp-off");
    let stub = Stub::ok();
    let claude_code_env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", stub.base.as_str()),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
        ("CLAUDE_CODE_ENABLE_TELEMETRY", "1"),
    ];
    let seen = session(proxy(&dir, &claude_code_env), || true);
    assert_eq!(seen.exit(), "code 0");
    // An absence has no event to wait on: the time lets a late export show.
    thread::sleep(Duration::from_millis(300));
    assert!(stub.requests().is_empty(), "exported without BIR_OTLP");
    // With bir's switch, gRPC gets a clear no.
    let out = run_bir(
        &dir,
        &[("BIR_OTLP", "1"), ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")],
        &["runs", "export", "--otlp", "latest"],
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("gRPC") && err.contains("4318"), "{err}");
    // Under BIR_OTLP=1, the OTEL_* endpoint is used.
    let out = run_bir(
        &dir,
        &[
            ("BIR_OTLP", "1"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", stub.base.as_str()),
        ],
        &["runs", "export", "--otlp", "latest"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stub.requests().len(), 1);
}

// ------------------------------------------------- traceparent (opt-in)

/// The host's lines of the traceparent session: a plain call, a call that
/// carries its own `traceparent`, a batch holding a call, a notification
/// and a `tools/list`, in host bytes (odd spacing and key order kept).
const HOST_LINES: [&str; 7] = [
    r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"it","version":"1"}}}"#,
    r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi","n":1.50}}}"#,
    r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{ "_meta" : {"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","k":1},"name":"fail","arguments":{}}}"#,
    r#"[{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{}}}]"#,
    r#"{"jsonrpc":"2.0","id":4,"method":"tools/list"}"#,
    r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"_meta":{"claudecode/toolUseId":"toolu_tp"},"name":"echo","arguments":{}}}"#,
];

/// Runs the traceparent session through a proxy with `env` (export to a
/// stub as JSON); what the server received, and the stub.
fn traceparent_session(dir: &TempDir, env: &[(&str, &str)]) -> (Vec<String>, Stub) {
    let stub = Stub::ok();
    let log = dir.join("upstream.log");
    let mut cmd = crate::record::proxy(dir, &peer_script());
    cmd.arg("--log")
        .arg(&log)
        .env("BIR_OTLP_ENDPOINT", &stub.base)
        .env("BIR_OTLP_PROTOCOL", "http/json");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut host = Host::start(cmd);
    for line in HOST_LINES {
        host.send_raw(format!("{line}\n").as_bytes());
    }
    // Answers: initialize, three calls, the batch, tools/list.
    assert!(host.wait_lines(6, Duration::from_secs(10)), "no answers");
    let seen = host.finish(Duration::from_secs(20));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
    let received = std::fs::read_to_string(&log).expect("upstream log");
    (received.lines().map(str::to_owned).collect(), stub)
}

/// Off means off: with export on but `BIR_OTLP_TRACEPARENT` unset (or
/// `0`), the server receives the host's bytes, every one of them.
#[test]
fn without_the_switch_not_a_byte_of_a_call_changes() {
    for env in [&[][..], &[("BIR_OTLP_TRACEPARENT", "0")][..]] {
        let dir = TempDir::new("otlp-tp-off");
        let (received, stub) = traceparent_session(&dir, env);
        assert_eq!(received, HOST_LINES, "{env:?}");
        assert_eq!(stub.wait_for(1).len(), 1, "the run was exported");
    }
}

/// On: the server sees `_meta.traceparent` naming the run's trace and the
/// span bir exports for that very call; a call with its own traceparent,
/// the batch and other methods pass unchanged; the journal keeps the
/// host's arguments and the traceparent beside them.
#[test]
fn with_the_switch_a_call_carries_the_span_bir_exports_for_it() {
    let dir = TempDir::new("otlp-tp-on");
    let (received, stub) = traceparent_session(&dir, &[("BIR_OTLP_TRACEPARENT", "1")]);
    assert_eq!(received.len(), HOST_LINES.len());
    let mut injected = Vec::new();
    for (got, sent) in received.iter().zip(HOST_LINES) {
        if got == sent {
            continue;
        }
        // The only change: one member put first in `params._meta`.
        let v: Value = serde_json::from_str(got).expect("json");
        let tp = v["params"]["_meta"]["traceparent"]
            .as_str()
            .expect("a traceparent")
            .to_owned();
        let without = got
            .replacen(&format!("\"_meta\":{{\"traceparent\":\"{tp}\"}},"), "", 1)
            .replacen(&format!("\"traceparent\":\"{tp}\","), "", 1);
        assert_eq!(without, sent, "nothing else changed");
        injected.push((v["id"].clone(), tp));
    }
    let ids: Vec<&Value> = injected.iter().map(|(id, _)| id).collect();
    assert_eq!(
        ids,
        [&json!(1), &json!(5)],
        "plain calls only: {received:?}"
    );

    let got = stub.wait_for(1);
    let spans = spans(&got[0].json());
    let root = &spans[0];
    for (id, tp) in &injected {
        let span = spans
            .iter()
            .find(|s| {
                attr(s, "jsonrpc.request.id")["stringValue"].as_str() == Some(&id.to_string())
            })
            .unwrap_or_else(|| panic!("no span for call {id}"));
        let want = format!(
            "00-{}-{}-01",
            root["traceId"].as_str().expect("trace"),
            span["spanId"].as_str().expect("span")
        );
        assert_eq!(tp, &want, "call {id}");
        assert_eq!(span["parentSpanId"], root["spanId"]);
    }
    assert_ne!(injected[0].1, injected[1].1);
    // The call that brought its own context keeps its usual span.
    let own = spans
        .iter()
        .find(|s| attr(s, "jsonrpc.request.id")["stringValue"] == "2")
        .expect("call 2");
    assert_ne!(own["spanId"], "b7ad6b7169203331");

    // The journal: the host's arguments, the traceparent beside them.
    let out = run_bir(
        &dir,
        &[],
        &["runs", "export", "latest", "--format", "jsonl"],
    );
    let selected: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|r| r["event"]["data"].clone())
        .filter(|d| d["type"] == "tool_selected")
        .collect();
    let first = selected
        .iter()
        .find(|d| d["requestId"] == 1)
        .expect("call 1");
    let host_args: Value = serde_json::from_str(r#"{"text":"hi","n":1.50}"#).expect("json");
    assert_eq!(first["input"], host_args);
    assert_eq!(first["traceparent"].as_str(), Some(injected[0].1.as_str()));
    let second = selected
        .iter()
        .find(|d| d["requestId"] == 2)
        .expect("call 2");
    assert!(second.get("traceparent").is_none());
}
