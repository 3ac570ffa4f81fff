//! The recording service: what `bir-proxy` sends it during a session, what
//! `bir sync` sends later, and what never leaves (the token, anywhere but
//! the `Authorization` header of the configured origin).
//!
//! The service is a fake on 127.0.0.1 (the suite's HTTP stub) that records
//! every request and answers as each test scripts it.

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::http;
use crate::support::{Host, Seen, TempDir, bir, command};
use crate::support::{poll_until, scaled, serial, wait_until};

pub(crate) const TOKEN: &str = "tok_S3CRETS3CRET_0123456789abcdef";
pub(crate) const REFRESH: &str = "ref_R3FR3SHR3FR3SH_0123456789abcdef";
pub(crate) const NEW_TOKEN: &str = "tok_N3WN3WN3W_fedcba9876543210";

/// One request the fake service received.
#[derive(Debug, Clone)]
pub(crate) struct Req {
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: String,
}

impl Req {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        crate::support::http::header_in(&self.headers, name)
    }

    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }

    pub(crate) fn line(&self) -> String {
        format!("{} {}", self.method, self.path)
    }
}

/// How the fake answers one request.
pub(crate) enum Reply {
    Status(u16),
    With(u16, Vec<(&'static str, String)>, String),
    /// Holds the request this long, then drops it.
    Hang(Duration),
}

impl Req {
    fn of(r: &http::Request) -> Req {
        Req {
            method: r.method.clone(),
            path: r.path.clone(),
            headers: r.headers.clone(),
            body: r.text(),
        }
    }
}

impl Reply {
    fn into_stub(self) -> http::Reply {
        match self {
            Reply::Status(code) => http::Reply::Status(code),
            Reply::With(code, headers, text) => http::Reply::With(
                code,
                headers
                    .into_iter()
                    .map(|(k, v)| (k.to_owned(), v))
                    .collect(),
                text.into_bytes(),
            ),
            Reply::Hang(d) => http::Reply::Hang(d),
        }
    }
}

/// A fake recording service: records every request, answers by `rule`
/// (given the request and every earlier one). The suite's HTTP stub.
pub(crate) struct FakeService {
    pub(crate) base: String,
    stub: http::Stub,
}

/// The stub's script for a service rule.
fn scripted(
    mut rule: impl FnMut(&Req, &[Req]) -> Reply + Send + 'static,
) -> impl FnMut(&http::Request, &[http::Request]) -> http::Reply + Send + 'static {
    move |r, seen| {
        let seen: Vec<Req> = seen.iter().map(Req::of).collect();
        rule(&Req::of(r), &seen).into_stub()
    }
}

impl FakeService {
    pub(crate) fn start(rule: impl FnMut(&Req, &[Req]) -> Reply + Send + 'static) -> FakeService {
        let stub = http::Stub::start(scripted(rule));
        FakeService {
            base: stub.base(),
            stub,
        }
    }

    pub(crate) fn ok() -> FakeService {
        FakeService::start(|_, _| Reply::Status(200))
    }

    pub(crate) fn requests(&self) -> Vec<Req> {
        self.stub.requests().iter().map(Req::of).collect()
    }

    pub(crate) fn lines(&self) -> Vec<String> {
        self.requests().iter().map(Req::line).collect()
    }

    pub(crate) fn set_rule(&self, rule: impl FnMut(&Req, &[Req]) -> Reply + Send + 'static) {
        self.stub.set_script(scripted(rule));
    }

    fn clear(&self) {
        self.stub.clear();
    }
}

/// A URL where nothing listens.
pub(crate) fn closed_port_url() -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    format!("http://127.0.0.1:{port}")
}

fn bir_home(dir: &TempDir) -> std::path::PathBuf {
    dir.join("home/.baseinstrunner")
}

/// Writes `$BIR_HOME/credentials.json` (0600 in a 0700 directory).
pub(crate) fn write_creds(dir: &TempDir, creds: &Value) {
    let home = bir_home(dir);
    std::fs::create_dir_all(&home).expect("mkdir");
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let path = home.join("credentials.json");
    let _ = std::fs::remove_file(&path);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .expect("create credentials");
    f.write_all(creds.to_string().as_bytes()).expect("write");
}

pub(crate) fn creds_for(service: &str) -> Value {
    json!({"service": service, "token": TOKEN})
}

fn peer_script() -> Value {
    json!({"tools": [{"name": "echo", "description": "echoes", "inputSchema": {"type": "object"}}]})
}

/// `bir-proxy --server-name peer -- bir testpeer <script>` sending to
/// `service`.
pub(crate) fn proxy(dir: &TempDir, service: &str) -> Command {
    let mut cmd = crate::record::proxy(dir, &peer_script());
    cmd.env("BIR_SERVICE_URL", service).env("RUST_LOG", "debug");
    cmd
}

/// A host session: initialize, tools/list, `calls` tool calls, end of
/// input. Returns what the host saw and the latency of each call.
pub(crate) fn session(cmd: Command, calls: u64) -> (Seen, Vec<Duration>) {
    let mut host = Host::start(cmd);
    host.send(&json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"it","version":"1"}}}));
    assert!(
        host.wait_lines(1, Duration::from_secs(10)),
        "no initialize answer"
    );
    host.send(&json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    host.send(&json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}));
    assert!(
        host.wait_lines(2, Duration::from_secs(10)),
        "no tools/list answer"
    );
    let mut latencies = Vec::new();
    for i in 0..calls {
        let sent = Instant::now();
        host.send(&json!({"jsonrpc":"2.0","id":10 + i,"method":"tools/call","params":{"name":"echo","arguments":{"n": i, "text": format!("call {i}")}}}));
        assert!(
            host.wait_lines(3 + i as usize, Duration::from_secs(10)),
            "no answer to call {i}"
        );
        latencies.push(sent.elapsed());
    }
    (host.finish(Duration::from_secs(10)), latencies)
}

pub(crate) fn run_bir(dir: &TempDir, service: &str, args: &[&str]) -> Output {
    command(bir(), dir)
        .env("BIR_SERVICE_URL", service)
        .env("RUST_LOG", "debug")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run bir")
}

/// The records of the only run in the store.
fn journal_records(dir: &TempDir) -> Vec<Value> {
    let records = try_journal_records(dir);
    assert!(!records.is_empty(), "no run in the store");
    records
}

/// The same, or nothing (no run yet).
fn try_journal_records(dir: &TempDir) -> Vec<Value> {
    let out = command(bir(), dir)
        .args(["runs", "export", "latest", "--format", "jsonl"])
        .output()
        .expect("export");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn kinds(records: &[Value]) -> Vec<String> {
    records
        .iter()
        .map(|r| r["event"]["kind"].as_str().unwrap_or("?").to_owned())
        .collect()
}

/// `upTo` of the last `remote_ack`, if any.
fn acked(records: &[Value]) -> Option<u64> {
    records
        .iter()
        .rev()
        .find(|r| r["event"]["kind"] == "remote_ack")
        .and_then(|r| r["event"]["data"]["upTo"].as_u64())
}

fn last_sent_seq(records: &[Value]) -> u64 {
    records
        .iter()
        .filter(|r| r["event"]["kind"] != "remote_ack")
        .filter_map(|r| r["seq"].as_u64())
        .max()
        .unwrap_or(0)
}

/// Every byte under `$BIR_HOME/runs` (journals hold JSON text).
fn store_bytes(dir: &TempDir) -> String {
    let mut all = String::new();
    if let Ok(entries) = std::fs::read_dir(bir_home(dir).join("runs")) {
        for e in entries.flatten() {
            all.push_str(&String::from_utf8_lossy(
                &std::fs::read(e.path()).unwrap_or_default(),
            ));
        }
    }
    all
}

/// The token appears in no URL, no body, and no header but
/// `Authorization: Bearer`.
fn assert_token_only_in_auth_header(requests: &[Req], token: &str) {
    for r in requests {
        assert!(!r.path.contains(token), "token in a URL: {}", r.path);
        assert!(!r.body.contains(token), "token in a body of {}", r.line());
        for (k, v) in &r.headers {
            if v.contains(token) {
                assert!(
                    k.eq_ignore_ascii_case("authorization") && v == &format!("Bearer {token}"),
                    "token in header {k}"
                );
            }
        }
    }
}

/// The run-level requests of one session, in the order expected.
fn expected_lines(run: &str, calls: usize) -> Vec<String> {
    let mut want = vec![
        "POST /recordings/runs".to_owned(),
        format!("PATCH /recordings/runs/{run}"),
    ];
    for _ in 0..calls * 2 {
        want.push(format!("POST /recordings/runs/{run}/steps"));
    }
    want.push(format!("POST /recordings/runs/{run}/finish"));
    want
}

fn run_id_of(requests: &[Req]) -> String {
    requests
        .iter()
        .find(|r| r.line() == "POST /recordings/runs")
        .map(|r| r.json()["id"].as_str().unwrap_or("").to_owned())
        .expect("a run was created")
}

#[test]
fn a_session_reaches_the_service_in_order() {
    let _serial = serial();
    let dir = TempDir::new("remote-order");
    // A service without the optional snapshot endpoint (PATCH → 404).
    let service = FakeService::start(|r, _| match r.method.as_str() {
        "PATCH" => Reply::Status(404),
        _ => Reply::Status(200),
    });
    write_creds(&dir, &creds_for(&service.base));
    let (seen, _) = session(proxy(&dir, &service.base), 2);
    assert_eq!(seen.exit(), "code 0", "stderr:\n{}", seen.stderr);
    let requests = service.requests();
    let run = run_id_of(&requests);
    assert!(run.starts_with("run_"), "{run}");
    assert_eq!(service.lines(), expected_lines(&run, 2));
    for r in &requests {
        assert_eq!(r.header("Authorization"), Some(&*format!("Bearer {TOKEN}")));
        assert_eq!(r.header("Content-Type"), Some("application/json"));
    }
    // The run header, then the steps as the design's rows plus our fields.
    let header = requests[0].json();
    assert_eq!(header["metadata"]["tier"], "standalone");
    assert_eq!(header["metadata"]["recorder"], "bir");
    assert!(header["startedAt"].is_string());
    let steps: Vec<Value> = requests
        .iter()
        .filter(|r| r.path.ends_with("/steps"))
        .map(Req::json)
        .collect();
    let types: Vec<&str> = steps.iter().filter_map(|s| s["type"].as_str()).collect();
    assert_eq!(
        types,
        [
            "tool_selected",
            "tool_response",
            "tool_selected",
            "tool_response"
        ]
    );
    let indexes: Vec<u64> = steps
        .iter()
        .filter_map(|s| s["stepIndex"].as_u64())
        .collect();
    assert_eq!(indexes, [1, 2, 3, 4]);
    let first = &steps[0];
    assert_eq!(first["toolName"], "mcp__peer__echo");
    assert_eq!(first["tool"], "echo");
    assert_eq!(first["serverName"], "peer");
    let input: Value =
        serde_json::from_str(first["toolInput"].as_str().expect("toolInput is a string"))
            .expect("toolInput is JSON");
    assert_eq!(input, json!({"n": 0, "text": "call 0"}));
    let response = &steps[1];
    assert!(response["toolOutput"].is_string());
    assert_eq!(response["isError"], false);
    assert_eq!(response["outcome"], "answered");
    assert!(response["durationMs"].is_number());
    let finish = requests.last().expect("finish").json();
    assert_eq!(finish["metrics"]["toolCalls"], 2);
    assert_eq!(finish["lossy"], false);
    // Everything acknowledged, noted locally.
    let records = journal_records(&dir);
    assert_eq!(
        acked(&records),
        Some(last_sent_seq(&records)),
        "{:?}",
        kinds(&records)
    );
    // So `bir sync` has nothing to send.
    service.clear();
    let out = run_bir(&dir, &service.base, &["sync"]);
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("Nothing to send"));
    assert!(service.requests().is_empty());
    // The token is nowhere but its header.
    assert_token_only_in_auth_header(&requests, TOKEN);
    assert!(!seen.stderr.contains(TOKEN), "token in the proxy's log");
    assert!(!store_bytes(&dir).contains(TOKEN), "token in the journal");
}

#[test]
fn busy_answers_are_retried_once_with_the_same_ids() {
    let _serial = serial();
    let dir = TempDir::new("remote-busy");
    // The first step: 503 once. The finish: 429 twice (so it fails).
    let service = FakeService::start(|r, earlier| {
        let before = earlier.iter().filter(|e| e.path == r.path).count();
        if r.path.ends_with("/steps") && before == 0 {
            Reply::With(503, vec![("Retry-After", "0".into())], "{}".into())
        } else if r.path.ends_with("/finish") && before < 2 {
            Reply::With(429, vec![("Retry-After", "0".into())], "{}".into())
        } else {
            Reply::Status(200)
        }
    });
    let (seen, _) = session(proxy(&dir, &service.base), 1);
    assert_eq!(seen.exit(), "code 0");
    let requests = service.requests();
    let run = run_id_of(&requests);
    let steps: Vec<&Req> = requests
        .iter()
        .filter(|r| r.path.ends_with("/steps"))
        .collect();
    assert_eq!(
        steps.len(),
        3,
        "two steps, the first sent twice: {:?}",
        service.lines()
    );
    assert_eq!(
        steps[0].body, steps[1].body,
        "a retry is the same record (same id)"
    );
    assert_ne!(steps[1].json()["id"], steps[2].json()["id"]);
    let finishes = requests
        .iter()
        .filter(|r| r.path.ends_with("/finish"))
        .count();
    assert_eq!(finishes, 2, "429 is retried once, not more");
    // Acknowledged up to the record before the finish.
    let records = journal_records(&dir);
    assert_eq!(acked(&records), Some(last_sent_seq(&records) - 1));
    assert_eq!(
        seen.stderr.matches("HTTP 429").count(),
        1,
        "{}",
        seen.stderr
    );
    // `bir sync` sends just the finish.
    service.set_rule(|_, _| Reply::Status(200));
    service.clear();
    let out = run_bir(&dir, &service.base, &["sync"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        service.lines(),
        [format!("POST /recordings/runs/{run}/finish")]
    );
}

#[test]
fn a_failure_is_not_retried_and_sending_pauses() {
    let _serial = serial();
    let dir = TempDir::new("remote-500");
    let service = FakeService::start(|r, _| {
        if r.path.ends_with("/steps") {
            Reply::Status(500)
        } else {
            Reply::Status(200)
        }
    });
    let (seen, latencies) = session(proxy(&dir, &service.base), 5);
    assert_eq!(seen.exit(), "code 0");
    // One step was tried, once; then the cool-down held everything else.
    let lines = service.lines();
    let run = run_id_of(&service.requests());
    assert_eq!(
        lines,
        [
            "POST /recordings/runs".to_owned(),
            format!("PATCH /recordings/runs/{run}"),
            format!("POST /recordings/runs/{run}/steps"),
        ],
        "no retry of a 500, no send storm"
    );
    let warnings: Vec<&str> = seen
        .stderr
        .lines()
        .filter(|l| l.contains("HTTP 500"))
        .collect();
    assert_eq!(warnings.len(), 1, "one warning per run:\n{}", seen.stderr);
    assert!(warnings[0].contains("bir sync") && warnings[0].contains("pauses for 5s"));
    let slowest = latencies.iter().max().copied().unwrap_or_default();
    assert!(
        slowest < scaled(Duration::from_secs(1)),
        "a call took {slowest:?}"
    );
    let records = journal_records(&dir);
    assert_eq!(
        acked(&records),
        Some(2),
        "run and snapshot were acknowledged"
    );
    // Later, the service works: `bir sync` sends the rest, once.
    service.set_rule(|_, _| Reply::Status(200));
    service.clear();
    let out = run_bir(&dir, &service.base, &["sync"]);
    assert!(out.status.success(), "{out:?}");
    let mut want = expected_lines(&run, 5);
    want.drain(..2);
    assert_eq!(service.lines(), want);
}

#[test]
fn unauthorized_means_one_refresh_then_success() {
    let _serial = serial();
    let dir = TempDir::new("remote-401");
    let service = FakeService::start(|r, _| {
        if r.path == "/auth/refresh" {
            return if r.json()["refreshToken"] == REFRESH {
                Reply::With(
                    200,
                    vec![],
                    json!({"token": NEW_TOKEN, "refreshToken": "ref_rotated_0123456789abcdef", "expiresAt": "2999-01-01T00:00:00Z"}).to_string(),
                )
            } else {
                Reply::Status(400)
            };
        }
        if r.header("Authorization") == Some(&*format!("Bearer {NEW_TOKEN}")) {
            Reply::Status(200)
        } else {
            Reply::Status(401)
        }
    });
    write_creds(
        &dir,
        &json!({"service": service.base, "token": TOKEN, "refreshToken": REFRESH}),
    );
    let (seen, _) = session(proxy(&dir, &service.base), 1);
    assert_eq!(seen.exit(), "code 0");
    let requests = service.requests();
    let lines: Vec<String> = requests.iter().map(Req::line).collect();
    assert_eq!(lines[0], "POST /recordings/runs", "{lines:?}");
    assert_eq!(lines[1], "POST /auth/refresh", "{lines:?}");
    assert_eq!(
        lines[2], "POST /recordings/runs",
        "the same request, once more"
    );
    assert_eq!(
        lines.iter().filter(|l| l.contains("/auth/refresh")).count(),
        1
    );
    assert_eq!(requests[0].body, requests[2].body);
    assert_eq!(
        requests[1].header("Authorization"),
        None,
        "refresh carries no bearer"
    );
    for r in &requests[2..] {
        assert_eq!(
            r.header("Authorization"),
            Some(&*format!("Bearer {NEW_TOKEN}"))
        );
    }
    let run = run_id_of(&requests);
    let mut want = vec![
        "POST /recordings/runs".to_owned(),
        "POST /auth/refresh".to_owned(),
    ];
    want.extend(expected_lines(&run, 1));
    assert_eq!(lines, want);
    let records = journal_records(&dir);
    assert_eq!(acked(&records), Some(last_sent_seq(&records)));
    // The new token is saved, privately; the old one is gone.
    let path = bir_home(&dir).join("credentials.json");
    let saved: Value = serde_json::from_slice(&std::fs::read(&path).expect("read")).expect("json");
    assert_eq!(saved["token"], NEW_TOKEN);
    assert_eq!(saved["refreshToken"], "ref_rotated_0123456789abcdef");
    assert_eq!(saved["service"], service.base.as_str());
    use std::os::unix::fs::MetadataExt;
    assert_eq!(
        std::fs::metadata(&path).expect("meta").mode() & 0o777,
        0o600
    );
    for secret in [TOKEN, NEW_TOKEN, REFRESH] {
        assert!(!seen.stderr.contains(secret), "a credential in the log");
        assert!(
            !store_bytes(&dir).contains(secret),
            "a credential in the journal"
        );
    }
    assert_token_only_in_auth_header(&requests, TOKEN);
    assert_token_only_in_auth_header(&requests, NEW_TOKEN);
}

#[test]
fn a_service_down_for_the_whole_session_loses_nothing() {
    let _serial = serial();
    let dir = TempDir::new("remote-down");
    let down = closed_port_url();
    write_creds(&dir, &creds_for(&down));
    let started = Instant::now();
    let (seen, latencies) = session(proxy(&dir, &down), 3);
    assert_eq!(seen.exit(), "code 0");
    assert!(
        started.elapsed() < scaled(Duration::from_secs(5)),
        "the session took {:?}",
        started.elapsed()
    );
    let slowest = latencies.iter().max().copied().unwrap_or_default();
    assert!(
        slowest < scaled(Duration::from_secs(1)),
        "a call took {slowest:?}"
    );
    let warnings = seen
        .stderr
        .lines()
        .filter(|l| l.contains("unreachable"))
        .count();
    assert_eq!(warnings, 1, "one warning:\n{}", seen.stderr);
    assert!(!seen.stderr.contains(TOKEN));
    let records = journal_records(&dir);
    assert_eq!(acked(&records), None, "nothing was acknowledged");
    // While it is still down, `bir sync` says so and fails.
    let out = run_bir(&dir, &down, &["sync"]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("not delivered") && text.contains("Next:"),
        "{text}"
    );
    // Later the service is up: everything arrives, each id once.
    let service = FakeService::ok();
    write_creds(&dir, &creds_for(&service.base));
    let out = run_bir(&dir, &service.base, &["sync"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{out:?}");
    assert!(text.contains("1 run(s) sent"), "{text}");
    let requests = service.requests();
    let run = run_id_of(&requests);
    assert_eq!(service.lines(), expected_lines(&run, 3));
    let mut ids: BTreeMap<String, usize> = BTreeMap::new();
    for r in requests.iter().filter(|r| r.path.ends_with("/steps")) {
        *ids.entry(r.json()["id"].as_str().unwrap_or("").to_owned())
            .or_default() += 1;
    }
    assert_eq!(ids.len(), 6);
    assert!(ids.values().all(|n| *n == 1), "{ids:?}");
    let recorded: Vec<String> = records
        .iter()
        .filter(|r| r["event"]["kind"] == "step")
        .filter_map(|r| r["event"]["data"]["id"].as_str().map(str::to_owned))
        .collect();
    let mut recorded_sorted = recorded.clone();
    recorded_sorted.sort();
    assert_eq!(
        recorded_sorted,
        ids.keys().cloned().collect::<Vec<_>>(),
        "every recorded step, no other"
    );
    assert_token_only_in_auth_header(&requests, TOKEN);
    let records = journal_records(&dir);
    assert_eq!(acked(&records), Some(last_sent_seq(&records)));
    // A second sync sends nothing.
    service.clear();
    let out = run_bir(&dir, &service.base, &["sync"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("Nothing to send"));
    assert!(service.requests().is_empty());
    assert!(!String::from_utf8_lossy(&out.stderr).contains(TOKEN));
    assert!(!store_bytes(&dir).contains(TOKEN));
}

#[test]
fn a_redirect_is_not_followed_with_the_token() {
    let dir = TempDir::new("remote-redirect");
    let elsewhere = FakeService::ok();
    let target = format!("{}/recordings/runs", elsewhere.base);
    let service = FakeService::start(move |_, _| {
        Reply::With(307, vec![("Location", target.clone())], String::new())
    });
    write_creds(&dir, &creds_for(&service.base));
    let (seen, _) = session(proxy(&dir, &service.base), 1);
    assert_eq!(seen.exit(), "code 0");
    assert!(
        elsewhere.requests().is_empty(),
        "followed a redirect: {:?}",
        elsewhere.lines()
    );
    assert_eq!(
        service.requests().len(),
        1,
        "then a cool-down: {:?}",
        service.lines()
    );
    assert!(seen.stderr.contains("redirect"), "{}", seen.stderr);
    let out = run_bir(&dir, &service.base, &["sync"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("redirect"));
    assert!(elsewhere.requests().is_empty());
}

#[test]
fn a_hanging_service_does_not_hold_up_the_session() {
    let _serial = serial();
    let dir = TempDir::new("remote-hang");
    let service = FakeService::start(|_, _| Reply::Hang(Duration::from_secs(3)));
    let mut cmd = proxy(&dir, &service.base);
    cmd.env("BIR_SERVICE_TIMEOUT_MS", "300");
    let started = Instant::now();
    let (seen, latencies) = session(cmd, 3);
    assert_eq!(seen.exit(), "code 0");
    let slowest = latencies.iter().max().copied().unwrap_or_default();
    assert!(
        slowest < scaled(Duration::from_secs(1)),
        "a call took {slowest:?}"
    );
    assert!(
        started.elapsed() < scaled(Duration::from_secs(4)),
        "took {:?}",
        started.elapsed()
    );
    // A service that took the request and never answered is not retried.
    assert_eq!(service.requests().len(), 1, "{:?}", service.lines());
    let records = journal_records(&dir);
    assert_eq!(acked(&records), None);
}

#[test]
fn login_whoami_logout_never_show_the_token() {
    let dir = TempDir::new("remote-login");
    let mut login = command(bir(), &dir)
        .args(["login", "--service", "https://Recordings.example.com/"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("login");
    login
        .stdin
        .take()
        .expect("stdin")
        .write_all(format!("{TOKEN}\n").as_bytes())
        .expect("write token");
    let out = login.wait_with_output().expect("wait");
    assert!(out.status.success(), "{out:?}");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!said.contains(TOKEN), "{said}");
    let path = bir_home(&dir).join("credentials.json");
    use std::os::unix::fs::MetadataExt;
    assert_eq!(
        std::fs::metadata(&path).expect("saved").mode() & 0o777,
        0o600
    );
    let saved: Value = serde_json::from_slice(&std::fs::read(&path).expect("read")).expect("json");
    assert_eq!(
        saved,
        json!({"service": "https://recordings.example.com", "token": TOKEN})
    );

    let out = command(bir(), &dir).arg("whoami").output().expect("whoami");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(text.contains("https://recordings.example.com"), "{text}");
    assert!(text.contains("tok_") && text.contains("sha256:"), "{text}");
    assert!(!text.contains(TOKEN) && !text.contains("S3CRET"), "{text}");

    // Plain http off loopback is refused (the token would travel in clear).
    let out = command(bir(), &dir)
        .args([
            "login",
            "--service",
            "http://recordings.example.com",
            "--token",
            "x",
        ])
        .output()
        .expect("login http");
    assert_eq!(out.status.code(), Some(2));

    let out = command(bir(), &dir).arg("logout").output().expect("logout");
    assert!(out.status.success());
    assert!(!path.exists());
    let out = command(bir(), &dir).arg("whoami").output().expect("whoami");
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn a_token_for_another_origin_is_not_sent() {
    let dir = TempDir::new("remote-origin");
    let service = FakeService::ok();
    // Logged in to one service; BIR_SERVICE_URL points at another.
    write_creds(&dir, &creds_for("https://recordings.example.com"));
    let (seen, _) = session(proxy(&dir, &service.base), 1);
    assert_eq!(seen.exit(), "code 0");
    let requests = service.requests();
    assert!(!requests.is_empty());
    assert!(requests.iter().all(|r| r.header("Authorization").is_none()));
}

#[test]
fn sync_waits_for_an_unfinished_run_to_go_stale() {
    let dir = TempDir::new("remote-stale");
    // Recorded with sending switched off, then the proxy is killed: the
    // run never finishes.
    let mut host = Host::start(proxy(&dir, "off"));
    host.send(&json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"it","version":"1"}}}));
    assert!(host.wait_lines(1, Duration::from_secs(10)));
    host.send(&json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}}));
    assert!(host.wait_lines(2, Duration::from_secs(10)));
    wait_until(
        "the steps to reach the journal",
        Duration::from_secs(5),
        || try_journal_records(&dir).len() >= 4,
    );
    host.signal(libc::SIGKILL);
    let seen = host.finish(Duration::from_secs(5));
    assert_eq!(seen.exit(), "signal 9");
    let service = FakeService::ok();
    write_creds(&dir, &creds_for(&service.base));
    let out = run_bir(&dir, &service.base, &["sync"]);
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("still being recorded"));
    assert!(service.requests().is_empty(), "a live run is left alone");
    // Ten minutes without a write: the proxy is gone; send what there is.
    let journal = std::fs::read_dir(bir_home(&dir).join("runs"))
        .expect("runs dir")
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().ends_with(".journal"))
        .expect("a journal");
    std::fs::File::options()
        .append(true)
        .open(&journal)
        .expect("open journal")
        .set_modified(std::time::SystemTime::now() - Duration::from_secs(11 * 60))
        .expect("set mtime");
    let out = run_bir(&dir, &service.base, &["sync"]);
    assert!(out.status.success(), "{out:?}");
    let run = run_id_of(&service.requests());
    let mut want = expected_lines(&run, 1);
    want.pop(); // it never finished
    assert_eq!(service.lines(), want);
    service.clear();
    let out = run_bir(&dir, &service.base, &["sync"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("Nothing to send"));
    assert!(service.requests().is_empty());
}

#[test]
fn an_expired_token_is_refreshed_before_the_first_send() {
    let dir = TempDir::new("remote-expired");
    let service = FakeService::start(|r, _| {
        if r.path == "/auth/refresh" {
            Reply::With(200, vec![], json!({"token": NEW_TOKEN}).to_string())
        } else if r.header("Authorization") == Some(&*format!("Bearer {NEW_TOKEN}")) {
            Reply::Status(200)
        } else {
            Reply::Status(401)
        }
    });
    write_creds(
        &dir,
        &json!({"service": service.base, "token": TOKEN, "refreshToken": REFRESH, "expiresAt": "2001-01-01T00:00:00Z"}),
    );
    let (seen, _) = session(proxy(&dir, &service.base), 1);
    assert_eq!(seen.exit(), "code 0");
    let lines = service.lines();
    assert_eq!(lines[0], "POST /auth/refresh", "{lines:?}");
    let run = run_id_of(&service.requests());
    assert_eq!(lines[1..], expected_lines(&run, 1)[..], "no 401 on the way");
    // The refresh answer had no new refresh token: the old one is kept.
    let saved: Value = serde_json::from_slice(
        &std::fs::read(bir_home(&dir).join("credentials.json")).expect("read"),
    )
    .expect("json");
    assert_eq!(saved["token"], NEW_TOKEN);
    assert_eq!(saved["refreshToken"], REFRESH);
}

/// A host session that stays open until `until` holds (or 10 s pass).
fn session_held_open_until(cmd: Command, until: impl Fn() -> bool) -> Seen {
    let mut host = Host::start(cmd);
    host.send(&json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"it","version":"1"}}}));
    host.send(&json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"n": 1}}}));
    assert!(host.wait_lines(2, Duration::from_secs(10)), "no answers");
    poll_until(Duration::from_secs(10), until);
    host.finish(Duration::from_secs(10))
}

#[test]
fn a_later_session_catches_up_on_runs_the_service_missed() {
    let dir = TempDir::new("remote-catch-up");
    let down = closed_port_url();
    write_creds(&dir, &creds_for(&down));
    let (seen, _) = session(proxy(&dir, &down), 2);
    assert_eq!(seen.exit(), "code 0");
    let missed = journal_records(&dir)[0]["event"]["data"]["id"]
        .as_str()
        .expect("run id")
        .to_owned();

    let service = FakeService::ok();
    write_creds(&dir, &creds_for(&service.base));
    let finished = |s: &FakeService| {
        s.lines()
            .contains(&format!("POST /recordings/runs/{missed}/finish"))
    };

    // Switched off: a session sends its own run only.
    let mut off = proxy(&dir, &service.base);
    off.env("BIR_AUTO_SYNC", "off");
    let seen = session_held_open_until(off, || {
        let steps = service
            .lines()
            .iter()
            .filter(|l| l.ends_with("/steps"))
            .count();
        if steps >= 2 {
            // Its own call is in; a catch-up would begin now. Nothing
            // to wait on: the time lets a catch-up that must not come show.
            std::thread::sleep(Duration::from_millis(500));
        }
        steps >= 2
    });
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
    assert!(!finished(&service), "{:?}", service.lines());
    assert!(
        service.lines().iter().all(|l| !l.contains(&missed)),
        "{:?}",
        service.lines()
    );

    // On (the default): the next session's proxy delivers the missed run
    // in the background, each of its requests once and in order.
    service.clear();
    let watermark = bir_home(&dir).join("runs/.caught-up");
    let seen = session_held_open_until(proxy(&dir, &service.base), || {
        finished(&service) && watermark.exists()
    });
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
    assert!(finished(&service), "{:?}", service.lines());
    assert!(watermark.exists(), "a complete pass leaves its watermark");
    let for_missed: Vec<String> = service
        .lines()
        .into_iter()
        .filter(|l| l.contains(&missed))
        .collect();
    let mut want = expected_lines(&missed, 2);
    want.remove(0); // `POST /recordings/runs` names no run in its path
    assert_eq!(for_missed, want);
    assert_token_only_in_auth_header(&service.requests(), TOKEN);

    // It was noted as delivered: `bir sync` has nothing more for it.
    service.clear();
    let out = run_bir(&dir, &service.base, &["sync"]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        service.lines().iter().all(|l| !l.contains(&missed)),
        "sent twice: {:?}",
        service.lines()
    );
}
