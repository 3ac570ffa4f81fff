//! The service's client, wire mapping and forwarder against a local fake.

use crate::record::payload::fixture;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::client::*;
use super::credentials::Credentials;
use super::forwarder::*;
use super::url::*;
use super::wire::*;
use crate::record::Forwarder;
use crate::record::model::{Record, RunEvent, Step, StepType};
use crate::record::model::{RemoteAck, RunFinish, RunHeader, RunMetadata, RunMetrics};
use crate::secret::Secret;

fn step(kind: StepType) -> Step {
    Step {
        id: "step_1".into(),
        qualified_name: fixture("mcp__gh__create_issue".into()),
        server_name: "gh".into(),
        tool_name: fixture("create_issue".into()),
        input: serde_json::from_str(r#"{"title":"x","n":1.50}"#).ok(),
        request_id: Some(fixture(json!(7))),
        tool_use_id: Some(fixture("toolu_1".into())),
        args_digest: Some("abc".into()),
        ..Step::new(1, kind, "2026-01-01T00:00:00.000Z".into())
    }
}

fn rec(seq: u64, event: RunEvent) -> Record {
    Record { seq, event }
}

#[test]
fn a_selected_step_on_the_wire() {
    let req = request_for(
        "run_a",
        &rec(3, RunEvent::Step(step(StepType::ToolSelected))),
    )
    .expect("sent");
    assert_eq!(
        (req.method, req.path.as_str()),
        ("POST", "/recordings/runs/run_a/steps")
    );
    let body: Value = serde_json::from_slice(&req.body).expect("json");
    assert_eq!(body["type"], "tool_selected");
    assert_eq!(body["toolName"], "mcp__gh__create_issue");
    assert_eq!(body["tool"], "create_issue");
    assert_eq!(body["serverName"], "gh");
    assert_eq!(body["stepIndex"], 1);
    // toolInput is a JSON string, with numbers as written.
    assert_eq!(body["toolInput"], r#"{"n":1.50,"title":"x"}"#);
    assert_eq!(body["toolUseId"], "toolu_1");
    assert_eq!(body["requestId"], 7);
    assert_eq!(body["argsDigest"], "abc");
    assert!(body.get("toolOutput").is_none() && body.get("isError").is_none());
}

#[test]
fn a_response_step_on_the_wire() {
    let mut s = step(StepType::ToolResponse);
    s.input = None;
    s.output = Some(fixture(
        json!({"content": [{"type": "text", "text": "boom"}], "isError": true}),
    ));
    s.is_error = true;
    s.duration_ms = Some(12.5);
    s.outcome = Some("answered".into());
    s.correlation = Some("ambiguous".into());
    let body: Value = serde_json::from_slice(
        &request_for("r", &rec(4, RunEvent::Step(s.clone())))
            .expect("sent")
            .body,
    )
    .expect("json");
    assert_eq!(body["type"], "tool_response");
    assert_eq!(body["toolError"], "boom");
    assert_eq!(body["isError"], true);
    assert_eq!(body["durationMs"], json!(12.5));
    assert_eq!(body["outcome"], "answered");
    assert_eq!(body["correlation"], "ambiguous");
    let output: Value =
        serde_json::from_str(body["toolOutput"].as_str().expect("string")).expect("json");
    assert_eq!(output["isError"], true);
    // A JSON-RPC error is sent as JSON text.
    s.output = None;
    s.error = Some(fixture(json!({"code": -32602, "message": "bad"})));
    let body: Value = serde_json::from_slice(
        &request_for("r", &rec(4, RunEvent::Step(s.clone())))
            .expect("sent")
            .body,
    )
    .expect("json");
    assert_eq!(body["toolError"], r#"{"code":-32602,"message":"bad"}"#);
    // A call that never got an answer says how it ended.
    s.error = None;
    s.is_error = false;
    s.outcome = Some("cancelled".into());
    let body: Value = serde_json::from_slice(
        &request_for("r", &rec(4, RunEvent::Step(s)))
            .expect("sent")
            .body,
    )
    .expect("json");
    assert_eq!(body["toolError"], "cancelled");
}

#[test]
fn runs_snapshots_and_finishes_on_the_wire() {
    let header = RunHeader {
        id: "run_a".into(),
        started_at: "t0".into(),
        input: None,
        metadata: RunMetadata {
            recorder: "bir".into(),
            tier: "standalone".into(),
            ..RunMetadata::default()
        },
    };
    let req = request_for("run_a", &rec(1, RunEvent::RunStarted(header))).expect("sent");
    assert_eq!(
        (req.method, req.path.as_str()),
        ("POST", "/recordings/runs")
    );
    let body: Value = serde_json::from_slice(&req.body).expect("json");
    assert_eq!(body["id"], "run_a");
    assert_eq!(body["startedAt"], "t0");
    assert_eq!(body["metadata"]["tier"], "standalone");

    let snap = crate::record::model::ServerSnapshot {
        server_name: "gh".into(),
        ..Default::default()
    };
    let req = request_for("run_a", &rec(2, RunEvent::ServerSnapshot(snap))).expect("sent");
    assert_eq!(
        (req.method, req.path.as_str(), req.optional),
        ("PATCH", "/recordings/runs/run_a", true)
    );
    let body: Value = serde_json::from_slice(&req.body).expect("json");
    assert_eq!(body["metadata"]["servers"]["gh"]["serverName"], "gh");

    let finish = RunFinish {
        finished_at: "t1".into(),
        output: None,
        metrics: RunMetrics::default(),
        lossy: true,
        dropped: 2,
        reason: None,
        model: None,
    };
    let req = request_for("run_a", &rec(9, RunEvent::RunFinished(finish))).expect("sent");
    assert_eq!(req.path, "/recordings/runs/run_a/finish");
    let body: Value = serde_json::from_slice(&req.body).expect("json");
    assert_eq!(body["finishedAt"], "t1");
    assert_eq!(body["lossy"], true);
    assert_eq!(body["metrics"]["toolCalls"], 0);
    assert!(body.get("finalOutput").is_none());

    let ack = RunEvent::RemoteAck(RemoteAck {
        up_to: 3,
        at: "t".into(),
    });
    assert!(request_for("run_a", &rec(10, ack)).is_none());
    // Odd ids cannot change the path's shape.
    let req = request_for(
        "../x?y",
        &rec(9, RunEvent::RunFinished(RunFinish::default())),
    )
    .expect("sent");
    assert_eq!(req.path, "/recordings/runs/..%2Fx%3Fy/finish");
}

#[test]
fn service_urls() {
    assert_eq!(
        parse_service_url("https://S.example/api/").ok().as_deref(),
        Some("https://s.example/api")
    );
    assert_eq!(
        parse_service_url("http://127.0.0.1:8080").ok().as_deref(),
        Some("http://127.0.0.1:8080")
    );
    assert!(parse_service_url("http://localhost:1/x").is_ok());
    assert!(parse_service_url("http://[::1]:9/").is_ok());
    assert!(parse_service_url("http://recordings.example.com").is_err());
    assert!(parse_service_url("ftp://x").is_err());
    assert!(parse_service_url("recordings.example.com").is_err());
    let err = parse_service_url("https://user:hunter2@s.example").expect_err("userinfo");
    assert!(!err.to_string().contains("hunter2"), "{err}");
    let err = parse_service_url("https://s.example/?token=hunter2").expect_err("query");
    assert!(!err.to_string().contains("hunter2"), "{err}");
    assert_eq!(origin("https://S.example:443/a"), "https://s.example");
    assert_eq!(origin("http://127.0.0.1:80"), "http://127.0.0.1");
    assert_ne!(origin("http://127.0.0.1:1"), origin("http://127.0.0.1:2"));
    assert_eq!(
        crate::urls::display("https://u:p@h/x?token=1#f"),
        "https://h/x"
    );
}

/// A one-shot in-process service: answers each request with the next
/// scripted status and reports what it saw.
fn service(
    script: Vec<(u16, Vec<(&'static str, &'static str)>)>,
) -> (
    String,
    std::sync::mpsc::Receiver<(String, String, Option<String>)>,
) {
    let server = tiny_http::Server::http("127.0.0.1:0").expect("bind");
    let base = format!("http://{}", server.server_addr().to_ip().expect("ip"));
    let (tx, rx) = std::sync::mpsc::channel();
    thread::spawn(move || {
        for (status, headers) in script {
            let Ok(Some(req)) = server.recv_timeout(Duration::from_secs(10)) else {
                return;
            };
            let auth = req
                .headers()
                .iter()
                .find(|h| h.field.equiv("Authorization"))
                .map(|h| h.value.to_string());
            let _ = tx.send((req.method().to_string(), req.url().to_owned(), auth));
            let mut resp = tiny_http::Response::from_string("{}").with_status_code(status);
            for (k, v) in headers {
                resp.add_header(
                    tiny_http::Header::from_bytes(k.as_bytes(), v.as_bytes()).expect("header"),
                );
            }
            let _ = req.respond(resp);
        }
    });
    (base, rx)
}

fn client(base: &str, token: Option<&str>) -> Client {
    Client::new(ServiceConfig {
        base: base.into(),
        creds: token.map(|t| Credentials {
            service: base.into(),
            token: Secret::new(t),
            refresh_token: None,
            expires_at: None,
            refresh_url: None,
        }),
        creds_path: None,
        timeout: Duration::from_secs(5),
    })
}

fn req() -> WireRequest {
    WireRequest {
        method: "POST",
        path: "/recordings/runs".into(),
        body: b"{}".to_vec(),
        optional: false,
    }
}

#[test]
fn the_retry_policy() {
    let mut no_wait = |_d: Duration, _f: &SendFailure| true;
    // 503 then 200: delivered on the one retry.
    let (base, seen) = service(vec![(503, vec![("Retry-After", "0")]), (200, vec![])]);
    let mut c = client(&base, Some("tok_abcdefghijklmnopqrstuvwxyz"));
    assert!(c.deliver(&req(), &mut no_wait).is_ok());
    let (_, url, auth) = seen.recv().expect("first");
    assert_eq!(url, "/recordings/runs");
    assert_eq!(
        auth.as_deref(),
        Some("Bearer tok_abcdefghijklmnopqrstuvwxyz")
    );
    assert!(seen.recv().is_ok(), "retried");
    // 429 twice: one retry only.
    let (base, seen) = service(vec![(429, vec![]), (429, vec![]), (200, vec![])]);
    let mut waited = Vec::new();
    let err = client(&base, None)
        .deliver(&req(), &mut |d, _| {
            waited.push(d);
            true
        })
        .expect_err("busy");
    assert_eq!(err.kind, FailKind::Busy);
    assert_eq!(waited.len(), 1);
    assert!(
        waited[0] >= BUSY_RETRY_DELAY && waited[0] <= BUSY_RETRY_DELAY * 6 / 5,
        "{waited:?}"
    );
    assert_eq!(seen.try_iter().count(), 2);
    // 500: no retry.
    let (base, seen) = service(vec![(500, vec![]), (200, vec![])]);
    let err = client(&base, None)
        .deliver(&req(), &mut no_wait)
        .expect_err("500");
    assert_eq!(err.kind, FailKind::Status(500));
    // An absence has no event to wait on: the time a retry would show in.
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(seen.try_iter().count(), 1);
    // A long Retry-After is capped.
    let (base, _seen) = service(vec![(503, vec![("Retry-After", "3600")]), (200, vec![])]);
    let mut waited = Vec::new();
    client(&base, None)
        .deliver(&req(), &mut |d, _| {
            waited.push(d);
            true
        })
        .expect("second try");
    assert_eq!(waited, vec![RETRY_AFTER_CAP]);
    // 409: the service has it already.
    let (base, _seen) = service(vec![(409, vec![])]);
    assert!(client(&base, None).deliver(&req(), &mut no_wait).is_ok());
    // A redirect is not followed.
    let (base, seen) = service(vec![(302, vec![("Location", "http://127.0.0.1:9/x")])]);
    let err = client(&base, Some("tok"))
        .deliver(&req(), &mut no_wait)
        .expect_err("3xx");
    assert_eq!(err.kind, FailKind::Redirected);
    assert_eq!(seen.try_iter().count(), 1);
}

#[test]
fn a_refused_connection_is_retried_once() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let mut tries = 0;
    let err = client(&format!("http://127.0.0.1:{port}"), None)
        .deliver(&req(), &mut |_, _| {
            tries += 1;
            true
        })
        .expect_err("refused");
    assert_eq!(err.kind, FailKind::Unreachable);
    assert_eq!(tries, 1);
    assert!(err.service_down());
}

#[test]
fn a_failed_tls_handshake_is_not_retried() {
    // Something that answers a TLS hello with plain HTTP.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop = Arc::clone(&done);
    let accepted = thread::spawn(move || {
        listener.set_nonblocking(true).expect("nonblocking");
        let mut n = 0;
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until && !stop.load(std::sync::atomic::Ordering::Relaxed) {
            match listener.accept() {
                Ok((mut conn, _)) => {
                    n += 1;
                    let _ = std::io::Write::write_all(
                        &mut conn,
                        b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n",
                    );
                }
                // Polls accept, so the thread ends by itself: not a wait.
                Err(_) => thread::sleep(Duration::from_millis(10)),
            }
        }
        n
    });
    let mut retried = false;
    let err = client(&format!("https://127.0.0.1:{port}"), Some("tok"))
        .deliver(&req(), &mut |_, _| {
            retried = true;
            true
        })
        .expect_err("not TLS");
    // Let a (wrong) second connection show up, if there were one.
    thread::sleep(Duration::from_millis(100));
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(err.kind, FailKind::Tls, "{err}");
    assert!(!retried);
    assert!(err.service_down());
    assert_eq!(accepted.join().expect("join"), 1);
}

fn plain(base: String) -> ServiceConfig {
    ServiceConfig {
        base,
        creds: None,
        creds_path: None,
        timeout: Duration::from_secs(5),
    }
}

/// Forwards a run of three records (header, step, end) and finishes.
fn forward_a_run(fwd: &mut ServiceForwarder, deadline: Duration) {
    let header = RunHeader {
        id: "run_a".into(),
        started_at: "t0".into(),
        input: None,
        metadata: RunMetadata::default(),
    };
    fwd.forward("run_a", &rec(1, RunEvent::RunStarted(header)));
    fwd.forward(
        "run_a",
        &rec(2, RunEvent::Step(step(StepType::ToolSelected))),
    );
    fwd.forward(
        "run_a",
        &rec(3, RunEvent::RunFinished(RunFinish::default())),
    );
    fwd.finish(deadline);
}

/// The whole run reached the service, in order, and was acknowledged.
fn assert_run_delivered(
    fwd: &ServiceForwarder,
    seen: &std::sync::mpsc::Receiver<(String, String, Option<String>)>,
) {
    assert_eq!(fwd.acked("run_a"), 3);
    assert_eq!(fwd.acked("run_b"), 0);
    let paths: Vec<String> = seen
        .try_iter()
        .map(|(m, p, _)| format!("{m} {p}"))
        .collect();
    assert_eq!(
        paths,
        vec![
            "POST /recordings/runs",
            "POST /recordings/runs/run_a/steps",
            "POST /recordings/runs/run_a/finish"
        ]
    );
}

#[test]
fn the_forwarder_acks_in_order_and_finishes() {
    let (base, seen) = service(vec![(200, vec![]), (200, vec![]), (200, vec![])]);
    let mut fwd = ServiceForwarder::start(plain(base)).expect("started");
    forward_a_run(&mut fwd, Duration::from_secs(5));
    assert_run_delivered(&fwd, &seen);
    assert!(!format!("{fwd:?}").is_empty());
}

/// The sender thread does not run before the end (on a busy CPU it steps
/// back for the relay): the finishing thread sends the run itself.
#[test]
fn a_finishing_forwarder_sends_what_its_sender_did_not() {
    let (base, seen) = service(vec![(200, vec![]), (200, vec![]), (200, vec![])]);
    let (release, hold) = std::sync::mpsc::channel();
    let mut fwd = ServiceForwarder::start_held(plain(base), Some(hold)).expect("started");
    forward_a_run(&mut fwd, Duration::from_secs(20));
    assert_run_delivered(&fwd, &seen);
    drop(release);
}

#[test]
fn debug_of_a_client_hides_the_token() {
    let c = client("https://s.example", Some("tok_supersecret_value"));
    let shown = format!("{c:?}");
    assert!(!shown.contains("supersecret"), "{shown}");
    assert!(shown.contains("authenticated: true"));
}
