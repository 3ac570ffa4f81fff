//! Proxies bind: a proxy in a host session sends its prepared records to the
//! recorder daemon (here a fake one on 127.0.0.1 that checks the bearer
//! token and keeps every body), falls back to a standalone run when there
//! is none or it dies, and rebinds; the off switch and passthrough; and the
//! relayed bytes are the same in every mode.

use std::io::Write;
use std::net::TcpListener;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use serde_json::{Value, json};

use crate::record::{bir_cmd, init};
use crate::support::http::{Reply, Request, Stub};
use crate::support::{Host, TempDir, bir, command, read_pid};
use crate::support::{eventually, poll_until, wait_for, wait_until};

const TOKEN: &str = "test-token-0123456789abcdef";
const SECRET: &str = "sk-live-4f9a8b7c6d5e4f3a2b1c0d9e";

/// A fake recorder daemon (the suite's HTTP stub): answers `GET /health`
/// and every `POST` with 200 when the bearer token is right (401
/// otherwise), and keeps what it got.
struct FakeDaemon {
    port: u16,
    got: Arc<Mutex<Vec<(String, Value)>>>,
    refused: Arc<Mutex<u32>>,
    stub: Option<Stub>,
}

impl FakeDaemon {
    fn start() -> FakeDaemon {
        FakeDaemon::serve(0, Arc::new(Mutex::new(Vec::new()))).expect("bind 127.0.0.1")
    }

    /// A daemon back on the port of one that was stopped, keeping the log.
    fn restart(port: u16, got: Arc<Mutex<Vec<(String, Value)>>>) -> FakeDaemon {
        let mut last = String::new();
        eventually(Duration::from_secs(10), || {
            FakeDaemon::serve(port, Arc::clone(&got))
                .map_err(|err| last = err)
                .ok()
        })
        .unwrap_or_else(|| panic!("cannot rebind {port}: {last}"))
    }

    fn serve(port: u16, got: Arc<Mutex<Vec<(String, Value)>>>) -> Result<FakeDaemon, String> {
        let refused = Arc::new(Mutex::new(0));
        let (got2, refused2) = (Arc::clone(&got), Arc::clone(&refused));
        let stub = Stub::on_port(port, move |r, _| answer(r, &got2, &refused2))?;
        Ok(FakeDaemon {
            port: stub.port(),
            got,
            refused,
            stub: Some(stub),
        })
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The bodies posted to `path`, whatever query string the post carried
    /// (a PreToolUse hook adds where its session's Claude settings live).
    fn bodies(&self, path: &str) -> Vec<Value> {
        self.got
            .lock()
            .expect("lock")
            .iter()
            .filter(|(p, _)| p.split('?').next() == Some(path))
            .map(|(_, b)| b.clone())
            .collect()
    }

    /// The calls received, in order.
    fn calls(&self) -> Vec<Value> {
        self.bodies("/proxy/records")
            .iter()
            .flat_map(|b| b["items"].as_array().cloned().unwrap_or_default())
            .filter(|i| i["kind"] == "call")
            .collect()
    }

    fn wait_for(&self, what: &str, ok: impl Fn(&FakeDaemon) -> bool) {
        if !poll_until(Duration::from_secs(30), || ok(self)) {
            panic!(
                "the daemon never got {what}: {:?}",
                self.got.lock().expect("lock")
            );
        }
    }

    /// Stops listening: the port refuses connections from now on.
    fn stop(mut self) -> Arc<Mutex<Vec<(String, Value)>>> {
        if let Some(stub) = self.stub.take() {
            stub.stop();
        }
        Arc::clone(&self.got)
    }
}

/// The fake daemon's answer to one request.
fn answer(r: &Request, got: &Mutex<Vec<(String, Value)>>, refused: &Mutex<u32>) -> Reply {
    let authorized = r.header("authorization") == Some(&format!("Bearer {TOKEN}"));
    let (status, answer) = if !authorized {
        *refused.lock().expect("lock") += 1;
        (401, "{}".to_owned())
    } else if r.method == "GET" && r.path == "/health" {
        (
            200,
            json!({"version": "fake", "pid": 1, "sessions": 0, "startedAt": 0}).to_string(),
        )
    } else if r.method == "POST" {
        let value = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
        got.lock().expect("lock").push((r.path.clone(), value));
        (200, "{}".to_owned())
    } else {
        (404, "{}".to_owned())
    };
    let json = vec![("content-type".to_owned(), "application/json".to_owned())];
    Reply::With(status, json, answer.into_bytes())
}

fn script(pidfile: Option<&Path>) -> Value {
    let mut s = json!({"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]});
    if let Some(p) = pidfile {
        s["on_start"] = json!([{"pidfile": p}]);
    }
    s
}

/// A `tools/call` as Claude Code sends it: the join key in `_meta`, and a
/// secret in the arguments that must never leave the proxy unredacted.
fn call(id: u64) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{
        "name":"echo",
        "arguments":{"n": id, "api_key": SECRET},
        "_meta":{"claudecode/toolUseId": format!("toolu_{id}"), "progressToken": id}}})
}

/// The proxy under test, with the session environment `env`.
fn proxy(dir: &TempDir, cwd: &Path, pidfile: Option<&Path>, env: &[(&str, String)]) -> Command {
    let mut cmd = crate::record::proxy(dir, &script(pidfile));
    cmd.current_dir(cwd);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

fn bound_env(daemon_url: &str) -> Vec<(&'static str, String)> {
    vec![
        ("CLAUDE_CODE_SESSION_ID", "sess-bind-1".to_owned()),
        ("BIR_CONTROL_URL", daemon_url.to_owned()),
        ("BIR_CONTROL_TOKEN", TOKEN.to_owned()),
        ("BIR_BIND_RETRY_MS", "200".to_owned()),
    ]
}

/// The `toolUseId`s of the calls in the local runs, in order.
fn local_calls(dir: &TempDir) -> Vec<String> {
    let (code, list, _) = bir_cmd(dir, &["runs", "--json"]);
    if code != 0 {
        return Vec::new();
    }
    let mut ids = Vec::new();
    for run in list
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
    {
        let Some(id) = run["id"].as_str() else {
            continue;
        };
        let (code, out, _) = bir_cmd(dir, &["runs", "export", id]);
        if code != 0 {
            continue;
        }
        let export: Value = serde_json::from_str(&out).unwrap_or(Value::Null);
        for step in export["steps"].as_array().cloned().unwrap_or_default() {
            if step["type"] == "tool_selected" {
                ids.push(step["toolUseId"].as_str().unwrap_or("").to_owned());
            }
        }
    }
    ids
}

fn wait_local(dir: &TempDir, want: &[&str]) {
    let held = |have: &[String]| want.iter().all(|w| have.iter().any(|h| h == w));
    if !poll_until(Duration::from_secs(30), || held(&local_calls(dir))) {
        panic!("local runs hold {:?}, want {want:?}", local_calls(dir));
    }
}

fn call_ids(calls: &[Value]) -> Vec<String> {
    calls
        .iter()
        .map(|c| {
            c["data"]["selected"]["toolUseId"]
                .as_str()
                .unwrap_or("")
                .to_owned()
        })
        .collect()
}

#[test]
fn a_proxy_in_a_session_binds_and_sends_only_prepared_records() {
    let dir = TempDir::new("bind-live");
    let daemon = FakeDaemon::start();
    let mut env = bound_env(&daemon.url());
    // Never give up waiting within this test: the records can reach the
    // daemon only by binding.
    env.push(("BIR_BIND_WAIT_MS", "600000".to_owned()));
    let mut host = Host::start(proxy(&dir, dir.path(), None, &env));
    host.send(&init());
    host.send(&json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}));
    host.send(&call(2));
    assert!(host.wait_lines(3, Duration::from_secs(10)));
    daemon.wait_for("the call", |d| !d.calls().is_empty());

    let register = daemon.bodies("/proxy/register");
    assert_eq!(register.len(), 1, "{register:?}");
    assert_eq!(register[0]["sessionId"], "sess-bind-1");
    assert_eq!(register[0]["serverName"], "peer");
    assert_eq!(register[0]["pid"], host.pid());
    let records = daemon.bodies("/proxy/records");
    let first = &records[0];
    assert_eq!(first["sessionId"], "sess-bind-1");
    assert_eq!(first["proxyId"], register[0]["proxyId"]);
    assert_eq!(first["lost"], 0);
    let items = first["items"].as_array().expect("items");
    assert_eq!(items[0]["kind"], "snapshot", "the snapshot comes first");
    assert_eq!(items[0]["data"]["tools"][0]["name"], "echo");
    let calls = daemon.calls();
    assert_eq!(call_ids(&calls), ["toolu_2"]);
    let selected = &calls[0]["data"]["selected"];
    let response = &calls[0]["data"]["response"];
    assert_eq!(selected["requestId"], 2);
    assert_eq!(selected["input"]["n"], 2);
    assert_eq!(response["toolUseId"], "toolu_2");
    assert_eq!(response["isError"], false);
    assert!(response["durationMs"].is_number());
    // Prepared: redacted before it left the proxy.
    let sent = serde_json::to_string(&daemon.bodies("/proxy/records")).expect("json");
    assert!(
        !sent.contains(SECRET),
        "a secret reached the daemon: {sent}"
    );
    assert!(selected["redactions"].as_u64() > Some(0));

    let seen = host.finish(Duration::from_secs(10));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
    assert_eq!(daemon.bodies("/proxy/unregister").len(), 1);
    assert_eq!(*daemon.refused.lock().expect("lock"), 0);
    // Bound: nothing went into a standalone run.
    assert!(local_calls(&dir).is_empty());
}

#[test]
fn without_a_daemon_the_proxy_records_standalone_after_the_wait() {
    let dir = TempDir::new("bind-none");
    // A port nobody listens on.
    let dead = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", dead.local_addr().expect("addr"));
    drop(dead);
    let mut env = bound_env(&url);
    env.push(("BIR_BIND_WAIT_MS", "300".to_owned()));
    let mut host = Host::start(proxy(&dir, dir.path(), None, &env));
    host.send(&init());
    host.send(&call(1));
    assert!(host.wait_lines(2, Duration::from_secs(10)));
    // Written while the proxy still runs: the wait ended, it went standalone.
    wait_local(&dir, &["toolu_1"]);
    host.send(&call(2));
    assert!(host.wait_lines(3, Duration::from_secs(10)));
    wait_local(&dir, &["toolu_2"]);
    let seen = host.finish(Duration::from_secs(10));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
    assert_eq!(local_calls(&dir), ["toolu_1", "toolu_2"]);
    let (_, out, _) = bir_cmd(&dir, &["runs", "export", "latest"]);
    let run: Value = serde_json::from_str(&out).expect("export");
    assert_eq!(run["run"]["metadata"]["tier"], "standalone");
    assert_eq!(run["run"]["metadata"]["sessionId"], "sess-bind-1");
    assert!(!out.contains(SECRET));
}

#[test]
fn a_daemon_that_dies_mid_session_loses_no_call_and_the_proxy_rebinds() {
    let dir = TempDir::new("bind-dies");
    let daemon = FakeDaemon::start();
    let port = daemon.port;
    let mut env = bound_env(&daemon.url());
    env.push(("BIR_BIND_WAIT_MS", "600000".to_owned()));
    let mut host = Host::start(proxy(&dir, dir.path(), None, &env));
    host.send(&init());
    host.send(&call(1));
    assert!(host.wait_lines(2, Duration::from_secs(10)));
    daemon.wait_for("call 1", |d| d.calls().len() == 1);

    let log = daemon.stop();
    host.send(&call(2));
    host.send(&call(3));
    assert!(host.wait_lines(4, Duration::from_secs(10)));
    // The calls the daemon could not get are in a standalone run.
    wait_local(&dir, &["toolu_2", "toolu_3"]);

    let daemon = FakeDaemon::restart(port, log);
    daemon.wait_for("a new registration", |d| {
        d.bodies("/proxy/register").len() == 2
    });
    host.send(&call(4));
    assert!(host.wait_lines(5, Duration::from_secs(10)));
    daemon.wait_for("call 4", |d| d.calls().len() == 2);
    let seen = host.finish(Duration::from_secs(10));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);

    assert_eq!(call_ids(&daemon.calls()), ["toolu_1", "toolu_4"]);
    let lost: u64 = daemon
        .bodies("/proxy/records")
        .iter()
        .map(|b| b["lost"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(lost, 2, "the bound run is told what it missed");
    assert_eq!(local_calls(&dir), ["toolu_2", "toolu_3"]);
}

/// `bir off --here` / `bir on --here` run in `project`.
fn switch_here(dir: &TempDir, project: &Path, word: &str) {
    let out = command(bir(), dir)
        .current_dir(project)
        .args([word, "--here"])
        .output()
        .expect("run bir");
    assert!(out.status.success(), "bir {word} --here: {out:?}");
}

/// What the host receives for the same session, whatever the mode, and
/// whether the server took the proxy's place (its pid is the proxy's).
/// `recorded` is polled before the session ends: the recorder thread runs
/// at the lowest priority, and a busy machine may starve it past the
/// proxy's shutdown budget (the run would then be lossy, not wrong).
fn session_bytes(
    dir: &TempDir,
    cwd: &Path,
    env: &[(&str, String)],
    recorded: &dyn Fn() -> bool,
) -> (Vec<u8>, bool) {
    static SESSIONS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = SESSIONS.fetch_add(1, Ordering::SeqCst);
    let pidfile = dir.join(&format!("peer-{n}.pid"));
    let mut host = Host::start(proxy(dir, cwd, Some(&pidfile), env));
    let proxy_pid = host.pid();
    host.send(&init());
    host.send(&json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}));
    host.send(&call(2));
    host.send(&call(3));
    assert!(host.wait_lines(4, Duration::from_secs(10)));
    let server_pid = read_pid(&pidfile, Duration::from_secs(10));
    wait_until(
        "the session to be recorded",
        Duration::from_secs(30),
        recorded,
    );
    let seen = host.finish(Duration::from_secs(10));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
    (
        seen.stdout,
        u32::try_from(server_pid).expect("pid") == proxy_pid,
    )
}

#[test]
fn off_and_passthrough_proxies_become_their_server_and_every_mode_relays_the_same_bytes() {
    let dir = TempDir::new("bind-modes");
    let (standalone, exec) = session_bytes(&dir, dir.path(), &[], &|| local_calls(&dir).len() == 2);
    assert!(!exec, "a recording proxy is not its server");
    assert_eq!(local_calls(&dir).len(), 2);

    let daemon = FakeDaemon::start();
    let mut env = bound_env(&daemon.url());
    env.push(("BIR_BIND_WAIT_MS", "600000".to_owned()));
    let (bound, exec) = session_bytes(&dir, dir.path(), &env, &|| daemon.calls().len() == 2);
    assert!(!exec);
    assert_eq!(bound, standalone, "bound relays the same bytes");
    assert_eq!(daemon.calls().len(), 2);

    // BIR_OFF=1: the proxy execs the server (same pid) and records nothing.
    let before = local_calls(&dir).len();
    let (off, exec) = session_bytes(&dir, dir.path(), &[("BIR_OFF", "1".to_owned())], &|| true);
    assert!(exec, "BIR_OFF=1: the server took the proxy's place");
    assert_eq!(off, standalone);

    // `bir off --here` in a project: proxies started there (and below) exec.
    let project = dir.join("project");
    std::fs::create_dir_all(project.join("sub")).expect("mkdir");
    switch_here(&dir, &project, "off");
    let (here, exec) = session_bytes(&dir, &project.join("sub"), &[], &|| true);
    assert!(exec, "off here: exec");
    assert_eq!(here, standalone);
    let (_, exec) = session_bytes(&dir, dir.path(), &[], &|| {
        local_calls(&dir).len() == before + 2
    });
    assert!(!exec, "elsewhere it records");
    switch_here(&dir, &project, "on");
    let (_, exec) = session_bytes(&dir, &project, &[], &|| {
        local_calls(&dir).len() == before + 4
    });
    assert!(!exec, "back on");
    assert_eq!(
        local_calls(&dir).len(),
        before + 4,
        "off sessions left no calls"
    );

    // Passthrough: a user-wide entry (wrapped in Cursor's user config while
    // in another project) used in a project never set up.
    let ledger = json!({"version": 1, "changes": [{
        "client": "cursor", "file": dir.join("home/.cursor/mcp.json"),
        "path": ["mcpServers", "peer"], "action": "wrapped_in_place", "server": "peer",
        "project": "/somewhere/else", "sourceScope": "user",
        "entrySha256": "", "fileSha256": "", "at": ""}]});
    std::fs::write(
        dir.join("home/.baseinstrunner/installed.json"),
        serde_json::to_vec(&ledger).expect("json"),
    )
    .expect("write ledger");
    let (pass, exec) = session_bytes(&dir, &project, &[], &|| true);
    assert!(exec, "passthrough: exec");
    assert_eq!(pass, standalone);
    assert_eq!(local_calls(&dir).len(), before + 4);
}

/// Waits until the proxy's log says it noticed the switch (`times`: how
/// many such lines in all), so the test does not race the observer.
fn wait_switch(host: &Host, word: &str, times: usize) {
    let line = format!("recording switched {word}");
    if !poll_until(Duration::from_secs(30), || {
        host.stderr_so_far().matches(&line).count() >= times
    }) {
        panic!("the proxy never noticed: {}", host.stderr_so_far());
    }
}

#[test]
fn bir_off_mid_session_stops_recording_and_bir_on_resumes_it() {
    let dir = TempDir::new("bind-switch");
    let mut cmd = proxy(&dir, dir.path(), None, &[]);
    cmd.env("RUST_LOG", "info");
    let mut host = Host::start(cmd);
    host.send(&init());
    host.send(&call(1));
    assert!(host.wait_lines(2, Duration::from_secs(10)));
    wait_local(&dir, &["toolu_1"]);

    let (code, _, err) = bir_cmd(&dir, &["off"]);
    assert_eq!(code, 0, "{err}");
    let (_, status, _) = bir_cmd(&dir, &["status"]);
    assert!(status.contains("Recording: off everywhere"), "{status}");
    // The proxy looks at the switch every ~500 ms on its observer thread.
    wait_switch(&host, "off", 1);
    host.send(&call(2));
    assert!(
        host.wait_lines(3, Duration::from_secs(10)),
        "still relaying"
    );
    // Call 2 is queued for the observer before it can look again. No
    // outside sign shows it passed the gate: a pause, not an event.
    thread::sleep(Duration::from_millis(200));

    let (code, _, err) = bir_cmd(&dir, &["on"]);
    assert_eq!(code, 0, "{err}");
    wait_switch(&host, "on", 1);
    host.send(&call(3));
    assert!(host.wait_lines(4, Duration::from_secs(10)));
    wait_local(&dir, &["toolu_3"]);
    let seen = host.finish(Duration::from_secs(10));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
    assert_eq!(seen.messages().len(), 4);
    assert_eq!(local_calls(&dir), ["toolu_1", "toolu_3"]);
}

#[test]
fn hooks_answer_with_nothing_and_post_nothing_while_recording_is_off() {
    let dir = TempDir::new("bind-hooks");
    let daemon = FakeDaemon::start();
    let payload = json!({"session_id": "s", "hook_event_name": "PreToolUse", "tool_name": "Bash"});
    let hook = |extra: &[(&str, &str)]| {
        let mut env = vec![
            ("BIR_CONTROL_URL", daemon.url()),
            ("BIR_CONTROL_TOKEN", TOKEN.to_owned()),
        ];
        env.extend(extra.iter().map(|(k, v)| (*k, (*v).to_owned())));
        run_hook(&dir, "PreToolUse", &payload, &env)
    };
    let (code, _, err) = bir_cmd(&dir, &["off"]);
    assert_eq!(code, 0, "{err}");
    assert!(hook(&[]).is_empty(), "bir off: no answer");
    let (code, _, err) = bir_cmd(&dir, &["on"]);
    assert_eq!(code, 0, "{err}");
    assert!(hook(&[("BIR_OFF", "1")]).is_empty(), "BIR_OFF=1: no answer");
    assert!(
        daemon.bodies("/hook/PreToolUse").is_empty(),
        "nothing posted while off"
    );
    // Switched on, the same hook reaches the daemon (which answers `{}`).
    assert_eq!(hook(&[]), b"{}");
    daemon.wait_for("the hook", |d| d.bodies("/hook/PreToolUse").len() == 1);
}

/// Runs `bir hooks EVENT` in `dir` with `payload` on stdin; its stdout.
fn run_hook(dir: &TempDir, event: &str, payload: &Value, env: &[(&str, String)]) -> Vec<u8> {
    run_hook_with(dir, &[event], payload, env)
}

/// A hook event `session` fired in `cwd`: `extra` beside the common fields.
fn hook_payload(session: &str, cwd: &str, event: &str, extra: Value) -> Value {
    let mut payload = json!({"session_id": session, "cwd": cwd, "hook_event_name": event});
    if let (Some(p), Some(e)) = (payload.as_object_mut(), extra.as_object()) {
        p.extend(e.clone());
    }
    payload
}

/// `bir hooks ARGS…` (the event and any flags), as [`run_hook`].
fn run_hook_with(dir: &TempDir, args: &[&str], payload: &Value, env: &[(&str, String)]) -> Vec<u8> {
    let event = args.first().copied().unwrap_or_default();
    let mut cmd = command(bir(), dir);
    cmd.arg("hooks")
        .args(args)
        .current_dir(dir.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("spawn bir hooks");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(payload.to_string().as_bytes())
        .expect("write payload");
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success(), "{event}: {out:?}");
    out.stdout
}

/// Stops the real daemon a test started (`bir down`), pass or fail.
struct DaemonDown<'a>(&'a TempDir);

impl Drop for DaemonDown<'_> {
    fn drop(&mut self) {
        let _ = command(bir(), self.0).arg("down").output();
    }
}

#[test]
fn a_proxy_binds_to_the_real_daemon_and_its_call_joins_the_hooks_view() {
    let dir = TempDir::new("bind-real");
    let _down = DaemonDown(&dir);
    let session = "sess-real-1";
    let cwd = dir.path().display().to_string();
    let hook = |event: &str, extra: Value| {
        run_hook(&dir, event, &hook_payload(session, &cwd, event, extra), &[]);
    };
    hook("SessionStart", json!({"source": "startup"}));
    hook("UserPromptSubmit", json!({"prompt": "echo something"}));

    let env = [
        ("CLAUDE_CODE_SESSION_ID", session.to_owned()),
        ("BIR_BIND_WAIT_MS", "600000".to_owned()),
    ];
    let mut host = Host::start(proxy(&dir, dir.path(), None, &env));
    host.send(&init());
    hook(
        "PreToolUse",
        json!({"tool_name": "mcp__peer__echo", "tool_input": {"n": 2, "api_key": SECRET},
               "tool_use_id": "toolu_2"}),
    );
    host.send(&call(2));
    assert!(host.wait_lines(2, Duration::from_secs(10)));
    hook(
        "PostToolUse",
        json!({"tool_name": "mcp__peer__echo", "tool_input": {"n": 2, "api_key": SECRET},
               "tool_use_id": "toolu_2", "tool_response": [{"type": "text", "text": "the hook's view"}]}),
    );

    // The proxy's result reaches the session's run while the proxy lives.
    let run = eventually(Duration::from_secs(30), || {
        let (code, out, _) = bir_cmd(&dir, &["runs", "export", "latest"]);
        (code == 0 && out.contains("\\\"n\\\":2") && out.contains("toolu_2")).then_some(out)
    })
    .unwrap_or_else(|| {
        panic!(
            "the proxy's call never reached the bound run: {}\n{}",
            bir_cmd(&dir, &["runs", "export", "latest"]).1,
            host.stderr_so_far()
        )
    });
    let seen = host.finish(Duration::from_secs(10));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
    hook("SessionEnd", json!({"reason": "other"}));

    let doc: Value = serde_json::from_str(&run).expect("export");
    assert_eq!(doc["run"]["metadata"]["tier"], "bound", "{doc}");
    assert_eq!(doc["run"]["metadata"]["sessionId"], session);
    let of_call: Vec<&Value> = doc["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .filter(|s| s["toolUseId"] == "toolu_2")
        .collect();
    assert!(
        of_call
            .iter()
            .any(|s| s["type"] == "tool_response" && s["durationMs"].is_number()),
        "{doc}"
    );
    assert!(!run.contains(SECRET), "{run}");
    // One run: the session's; nothing standalone.
    let (_, list, _) = bir_cmd(&dir, &["runs", "--json"]);
    assert_eq!(list.lines().count(), 1, "{list}");
}

/// A session whose hooks never reach the daemon (bir's hooks not installed,
/// only its proxies) would have a bound run that nothing ever ends: the
/// daemon refuses such a proxy, which records standalone, as before.
#[test]
fn a_proxy_in_a_session_without_hooks_records_standalone_beside_a_live_daemon() {
    let dir = TempDir::new("bind-unhooked");
    let _down = DaemonDown(&dir);
    let cwd = dir.path().display().to_string();
    // Another session's hook starts the daemon.
    let other = json!({"session_id": "sess-other", "cwd": cwd, "hook_event_name": "SessionStart",
                       "source": "startup"});
    run_hook(&dir, "SessionStart", &other, &[]);

    let env = [
        ("CLAUDE_CODE_SESSION_ID", "sess-unhooked".to_owned()),
        ("BIR_BIND_WAIT_MS", "500".to_owned()),
    ];
    let mut host = Host::start(proxy(&dir, dir.path(), None, &env));
    host.send(&init());
    host.send(&call(1));
    assert!(host.wait_lines(2, Duration::from_secs(10)));
    wait_local(&dir, &["toolu_1"]);
    let seen = host.finish(Duration::from_secs(10));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);

    let (_, out, _) = bir_cmd(&dir, &["runs", "export", "latest"]);
    let run: Value = serde_json::from_str(&out).expect("export");
    assert_eq!(run["run"]["metadata"]["tier"], "standalone", "{run}");
    assert_eq!(run["run"]["metadata"]["sessionId"], "sess-unhooked");
    // The daemon holds no session for it.
    let (_, status, _) = bir_cmd(&dir, &["status"]);
    assert!(!status.contains("sess-unhooked"), "{status}");
}

/// Opt-in call-id injection through the real daemon and `bir hooks`: a
/// `PreToolUse` that asks (`BIR_CORRELATE=inject`) is answered with
/// `updatedInput` + `__bir_call_id__` (never a permission decision), only
/// once the server's proxy is bound; a hook that does not ask, or says
/// `--no-correlation`, gets nothing. `bir doctor` shows, for the live
/// session in this project, which wrapped server's proxy is bound.
#[test]
fn injection_answers_only_for_bound_servers_and_doctor_shows_which_proxy_is_bound() {
    let dir = TempDir::new("bind-inject");
    let _down = DaemonDown(&dir);
    let session = "sess-inject-1";
    let cwd = dir.path().display().to_string();
    let inject = [("BIR_CORRELATE", "inject".to_owned())];
    let payload = |event: &str, extra: Value| hook_payload(session, &cwd, event, extra);
    let pre = |id: &str| {
        payload(
            "PreToolUse",
            json!({"tool_name": "mcp__peer__echo", "tool_input": {"n": 2}, "tool_use_id": id}),
        )
    };
    let start = payload("SessionStart", json!({"source": "startup"}));
    assert!(run_hook(&dir, "SessionStart", &start, &inject).is_empty());
    let prompt = payload("UserPromptSubmit", json!({"prompt": "echo"}));
    assert!(run_hook(&dir, "UserPromptSubmit", &prompt, &inject).is_empty());
    // No proxy of `peer` bound yet: nothing to inject into.
    assert!(run_hook(&dir, "PreToolUse", &pre("toolu_1"), &inject).is_empty());

    // Two wrapped servers in the user's Claude Code config; only `peer`
    // runs in the session.
    let wrapped = |name: &str| {
        let script = dir.script(&format!("{name}.json"), &script(None));
        json!({"command": dir.proxy_link(),
               "args": ["--server-name", name, "--", bir(), "testpeer", script]})
    };
    let claude = json!({"mcpServers": {"peer": wrapped("peer"), "ghost": wrapped("ghost")}});
    std::fs::write(dir.join("home/.claude.json"), claude.to_string()).expect("claude.json");

    let env = [
        ("CLAUDE_CODE_SESSION_ID", session.to_owned()),
        ("BIR_BIND_WAIT_MS", "600000".to_owned()),
    ];
    let mut host = Host::start(proxy(&dir, dir.path(), None, &env));
    host.send(&init());
    assert!(host.wait_lines(1, Duration::from_secs(10)));
    wait_until("the proxy to bind", Duration::from_secs(30), || {
        bir_cmd(&dir, &["status"]).1.contains("proxies: peer")
    });

    let answer = run_hook(&dir, "PreToolUse", &pre("toolu_2"), &inject);
    let answer: Value = serde_json::from_slice(&answer).expect("a JSON answer");
    assert_eq!(
        answer,
        json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
               "updatedInput": {"n": 2, "__bir_call_id__": "bir-toolu_2"}}})
    );
    // Not asked for, or refused on the hook's command line: nothing.
    assert!(run_hook(&dir, "PreToolUse", &pre("toolu_3"), &[]).is_empty());
    let args = ["PreToolUse", "--no-correlation"];
    assert!(run_hook_with(&dir, &args, &pre("toolu_4"), &inject).is_empty());

    let doctor = command(bir(), &dir)
        .args(["doctor", "--timeout-ms", "20000", "--project"])
        .arg(dir.path())
        .current_dir(dir.path())
        .output()
        .expect("doctor");
    let text = String::from_utf8_lossy(&doctor.stdout).into_owned();
    assert!(
        text.contains(&format!("live session {session} in ")) && text.contains("(this project)"),
        "{text}"
    );
    let row = |name: &str| {
        text.lines()
            .find(|l| l.trim_start().starts_with(name) && l.starts_with("    "))
            .unwrap_or_default()
            .to_owned()
    };
    assert!(row("peer").ends_with(" bound"), "{text}");
    assert!(row("ghost").contains("PROBLEM: not bound"), "{text}");
    assert!(
        !doctor.status.success(),
        "an unbound wrapped server is a problem: {text}"
    );

    let seen = host.finish(Duration::from_secs(10));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
}

/// Codex CLI and Gemini CLI name no session to the MCP servers they start:
/// such a proxy binds by ancestry. Here this test process is the agent: it
/// runs `bir hooks --host gemini` and starts the proxy, so the hooks' host
/// process is the proxy's parent; the call (no call id in its `_meta`, as
/// Gemini sends it) joins the hooks' view live, by fingerprint, and no
/// standalone run is left.
#[test]
fn a_proxy_naming_no_session_binds_to_the_session_of_its_host_process() {
    let dir = TempDir::new("bind-ancestry");
    let _down = DaemonDown(&dir);
    let session = "sess-gemini-ancestry";
    let cwd = dir.path().display().to_string();
    let hook = |event: &str, extra: Value| {
        let payload = hook_payload(session, &cwd, event, extra);
        run_hook_with(&dir, &["--host", "gemini", event], &payload, &[]);
    };
    hook("SessionStart", json!({"source": "startup"}));
    hook("BeforeAgent", json!({"prompt": "echo something"}));

    let env = [("BIR_BIND_WAIT_MS", "600000".to_owned())];
    let mut host = Host::start(proxy(&dir, dir.path(), None, &env));
    host.send(&init());
    let tool = json!({"tool_name": "mcp_peer_echo", "tool_input": {"n": 2},
                      "mcp_context": {"server_name": "peer", "tool_name": "echo"}});
    hook("BeforeTool", tool.clone());
    host.send(
        &json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{
        "name":"echo","arguments":{"n": 2},"_meta":{"progressToken": "p-1"}}}),
    );
    assert!(host.wait_lines(2, Duration::from_secs(10)));
    let mut after = tool;
    after["tool_response"] = json!({"llmContent": [{"text": "the hook's view"}]});
    hook("AfterTool", after);

    let run = joined_run(&dir).unwrap_or_else(|| {
        panic!(
            "the proxy's call never joined the bound run: {}\n{}",
            bir_cmd(&dir, &["runs", "export", "latest"]).1,
            host.stderr_so_far()
        )
    });
    let seen = host.finish(Duration::from_secs(10));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
    hook("SessionEnd", json!({"reason": "exit"}));

    assert_eq!(run["run"]["metadata"]["tier"], "bound", "{run}");
    assert_eq!(run["run"]["metadata"]["sessionId"], session);
    let response = run["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .find(|s| s["type"] == "tool_response" && s["kind"] == "mcp")
        .expect("the MCP call's response");
    assert_eq!(response["correlation"], "fingerprint", "{run}");
    assert_eq!(response["toolName"], "echo");
    let (_, list, _) = bir_cmd(&dir, &["runs", "--json"]);
    assert_eq!(list.lines().count(), 1, "one run, the session's: {list}");
}

/// Gemini's post script names only its shell's parent (`$PPID`): the
/// daemon reads that process's start time itself, so a proxy started by
/// the same agent binds to the session. Here `SessionStart` comes through
/// a `python3` in between (its host process another, which exits), and
/// the later hooks are the post scripts `bir install --client gemini`
/// registered, run by this test process as Gemini runs them (`bash -c`):
/// the proxy this process starts binds only if the daemon took this
/// process from the scripts' `$PPID`.
#[test]
fn a_post_scripts_ppid_names_the_host_process_a_proxy_binds_to() {
    let dir = TempDir::new("bind-post-script");
    let _down = DaemonDown(&dir);
    let out = command(bir(), &dir)
        .args([
            "install",
            "--client",
            "gemini",
            "--scope",
            "project",
            "--project",
        ])
        .arg(dir.path())
        .current_dir(dir.path())
        .output()
        .expect("install");
    assert!(out.status.success(), "{out:?}");
    let settings: Value = serde_json::from_slice(
        &std::fs::read(dir.join(".gemini/settings.json")).expect("settings"),
    )
    .expect("json");
    let script = |event: &str| {
        settings["hooks"][event][0]["hooks"][0]["command"]
            .as_str()
            .filter(|c| c.contains("/dev/tcp/127.0.0.1/"))
            .unwrap_or_else(|| panic!("{event}: no post script in {settings}"))
            .to_owned()
    };
    let session = "sess-gemini-post-script";
    let cwd = dir.path().display().to_string();
    let posted = |event: &str, extra: Value| {
        let payload = hook_payload(session, &cwd, event, extra);
        let mut child = command("bash", &dir)
            .arg("-c")
            .arg(script(event))
            .current_dir(dir.path())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("bash");
        if let Some(mut stdin) = child.stdin.take() {
            let _ = stdin.write_all(payload.to_string().as_bytes());
        }
        let out = child.wait_with_output().expect("hook");
        assert_eq!(out.status.code(), Some(0), "{event}: {out:?}");
        assert!(out.stdout.is_empty() && out.stderr.is_empty(), "{out:?}");
    };
    // SessionStart through another process, which starts the daemon.
    let start = hook_payload(session, &cwd, "SessionStart", json!({"source": "startup"}));
    let mut child = command("python3", &dir)
        .args([
            "-c",
            "import subprocess, sys; sys.exit(subprocess.run(sys.argv[1:]).returncode)",
        ])
        .arg(bir())
        .args(["hooks", "--host", "gemini", "SessionStart"])
        .current_dir(dir.path())
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("python3");
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(start.to_string().as_bytes());
    }
    let _ = child.wait();
    let discovery = dir.join("home/.baseinstrunner/control/daemon.json");
    wait_until("the daemon", Duration::from_secs(60), || discovery.exists());
    posted("BeforeAgent", json!({"prompt": "echo something"}));

    let env = [("BIR_BIND_WAIT_MS", "600000".to_owned())];
    let mut host = Host::start(proxy(&dir, dir.path(), None, &env));
    host.send(&init());
    let tool = json!({"tool_name": "mcp_peer_echo", "tool_input": {"n": 3},
                      "mcp_context": {"server_name": "peer", "tool_name": "echo"}});
    posted("BeforeTool", tool.clone());
    host.send(
        &json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{
        "name":"echo","arguments":{"n": 3},"_meta":{"progressToken": "p-1"}}}),
    );
    assert!(host.wait_lines(2, Duration::from_secs(10)));
    let mut after = tool;
    after["tool_response"] = json!({"llmContent": [{"text": "the hook's view"}]});
    posted("AfterTool", after);
    let joined = joined_run(&dir);
    let seen = host.finish(Duration::from_secs(10));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
    let run = joined.unwrap_or_else(|| {
        panic!(
            "the proxy's call never joined the bound run: {}",
            bir_cmd(&dir, &["runs", "export", "latest"]).1
        )
    });
    assert_eq!(run["run"]["metadata"]["sessionId"], session, "{run}");
}

/// The latest run once the proxy's call (request id 2) is joined to it,
/// as `bir runs export` gives it; `None` if that does not happen in 30 s.
fn joined_run(dir: &TempDir) -> Option<Value> {
    eventually(Duration::from_secs(30), || {
        let (code, out, _) = bir_cmd(dir, &["runs", "export", "latest"]);
        let doc: Value = serde_json::from_str(&out).unwrap_or_default();
        let joined = doc["steps"].as_array().is_some_and(|steps| {
            steps
                .iter()
                .any(|s| s["type"] == "tool_response" && s["requestId"] == 2)
        });
        (code == 0 && joined).then_some(doc)
    })
}

/// `bir` with the fixture's managed-policy directory, in `cwd`.
fn bir_in_dir(dir: &TempDir, cwd: &Path, args: &[&str]) -> (i32, String) {
    let out = command(bir(), dir)
        .args(args)
        .env("BIR_CLAUDE_MANAGED_DIR", dir.join("managed"))
        .current_dir(cwd)
        .output()
        .expect("run bir");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

/// The user-wide hooks fire in every project, but a session is recorded
/// only where bir is installed: elsewhere the hooks answer nothing and no
/// run is stored, until the user chooses `bir install --everywhere`;
/// `bir status` says which applies in a directory.
#[test]
fn a_session_is_recorded_only_where_bir_is_installed_or_everywhere_by_choice() {
    let dir = TempDir::new("scope");
    let _down = DaemonDown(&dir);
    let installed = dir.join("installed");
    let other = dir.join("other");
    for d in [&installed, &other, &dir.join("managed")] {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    std::fs::write(dir.join("home/.claude.json"), "{}\n").expect("write");
    let (code, text) = bir_in_dir(&dir, &installed, &["install", "--hooks", "command"]);
    assert_eq!(code, 0, "{text}");

    let session = |id: &str, cwd: &Path| {
        let cwd = cwd.display().to_string();
        let mut answers = Vec::new();
        for (event, extra) in [
            ("SessionStart", json!({"source": "startup"})),
            ("UserPromptSubmit", json!({"prompt": "list the files"})),
            (
                "PreToolUse",
                json!({"tool_name": "Bash", "tool_input": {"command": "ls"}, "tool_use_id": "toolu_1"}),
            ),
            (
                "PostToolUse",
                json!({"tool_name": "Bash", "tool_input": {"command": "ls"}, "tool_use_id": "toolu_1", "tool_response": "a b"}),
            ),
            ("Stop", json!({"last_assistant_message": "done"})),
            ("SessionEnd", json!({"reason": "other"})),
        ] {
            answers.extend(run_hook(
                &dir,
                event,
                &hook_payload(id, &cwd, event, extra),
                &[],
            ));
        }
        answers
    };
    let runs = |want: usize| -> Vec<Value> {
        wait_for(
            &format!("{want} finished runs"),
            Duration::from_secs(30),
            || {
                let (_, list, _) = bir_cmd(&dir, &["runs", "--json"]);
                let lines: Vec<Value> = list
                    .lines()
                    .filter_map(|l| serde_json::from_str(l).ok())
                    .collect();
                (lines.len() >= want && lines.iter().all(|l| l["state"] == "finished"))
                    .then_some(lines)
            },
        )
    };
    let journals = || {
        std::fs::read_dir(dir.join("home/.baseinstrunner/runs"))
            .map(|d| {
                d.filter_map(Result::ok)
                    .filter(|e| e.file_name().to_string_lossy().ends_with(".journal"))
                    .count()
            })
            .unwrap_or(0)
    };

    // Not installed here: the passthrough answer, and nothing stored.
    assert!(session("sess-elsewhere", &other).is_empty());
    let (_, status) = bir_in_dir(&dir, &other, &["status"]);
    assert!(
        status.contains(&format!(
            "Recorded here: no: bir is installed in {}",
            installed.display()
        )),
        "{status}"
    );
    // A session in the installed project, after it, is recorded (the
    // daemon handles hooks in order: the first session was handled).
    session("sess-installed", &installed.join("src"));
    let listed = runs(1);
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(journals(), 1, "the session elsewhere left no journal");
    assert_eq!(
        listed[0]["cwd"],
        installed.join("src").display().to_string()
    );
    let (_, status) = bir_in_dir(&dir, &installed, &["status"]);
    assert!(
        status.contains("Recorded here: yes, bir is installed in this project"),
        "{status}"
    );

    // Everywhere, by the user's choice: recorded in the other directory.
    let (code, text) = bir_in_dir(
        &dir,
        &installed,
        &["install", "--everywhere", "--hooks", "command"],
    );
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("recorded in every directory"), "{text}");
    let (_, status) = bir_in_dir(&dir, &other, &["status"]);
    assert!(
        status.contains("Recorded here: yes: everywhere, by your choice on"),
        "{status}"
    );
    session("sess-everywhere", &other);
    assert_eq!(runs(2).len(), 2);

    // Taken back: the other directory is not recorded again.
    let (code, text) = bir_in_dir(&dir, &installed, &["uninstall", "--everywhere"]);
    assert_eq!(code, 0, "{text}");
    let (_, status) = bir_in_dir(&dir, &other, &["status"]);
    assert!(status.contains("Recorded here: no:"), "{status}");
    assert!(session("sess-elsewhere-again", &other).is_empty());
    session("sess-installed-again", &installed);
    assert_eq!(runs(3).len(), 3);
    assert_eq!(
        journals(),
        3,
        "the second session elsewhere left no journal"
    );
}
