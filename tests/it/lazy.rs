//! `bir-proxy --lazy`: the host sees the same bytes as with an eagerly
//! started server, for a session that calls a tool (the server is started
//! on demand, the handshake replayed) and for one that never does (the
//! server is never started); a server whose tools changed since the
//! snapshot gets the host told (`notifications/tools/list_changed`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::poll_until;
use crate::support::{Host, TempDir, bir, command};

/// The peer's script: its tools, and a pid file written when it starts
/// (so a test can tell whether the server was started at all).
fn write_script(dir: &TempDir, tools: &Value) -> PathBuf {
    dir.script(
        "peer.json",
        &json!({"tools": tools, "on_start": [{"pidfile": dir.join("started.pid")}]}),
    )
}

fn echo_tools() -> Value {
    json!([{"name": "echo", "description": "Echoes", "inputSchema": {"type": "object"}}])
}

fn proxy(dir: &TempDir, script: &Path, lazy: bool) -> Command {
    let mut cmd = command(dir.proxy_link(), dir);
    cmd.args(["--server-name", "peer"]);
    if lazy {
        cmd.arg("--lazy");
    }
    cmd.arg("--").arg(bir()).arg("testpeer").arg(script);
    cmd.current_dir(dir.path());
    cmd
}

/// Initialize, initialized, tools/list, then `calls` echo calls, each
/// answer awaited before the next message (so the bytes are the same
/// whatever the timing); then end of input. Returns the host's stdout.
fn session(cmd: Command, calls: u64) -> Vec<u8> {
    let mut host = Host::start(cmd);
    let wait = |host: &Host, n: usize| {
        assert!(
            host.wait_lines(n, Duration::from_secs(30)),
            "waited for {n} lines; got {}\nstderr: {}",
            String::from_utf8_lossy(&host.stdout_so_far()),
            host.stderr_so_far()
        );
    };
    host.send(&json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"it","version":"1"}}}));
    wait(&host, 1);
    host.send(&json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    host.send(&json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}));
    wait(&host, 2);
    for i in 0..calls {
        host.send(&json!({"jsonrpc":"2.0","id":10 + i,"method":"tools/call","params":{"name":"echo","arguments":{"n": i}}}));
        wait(&host, 3 + i as usize);
    }
    let seen = host.finish(Duration::from_secs(15));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
    seen.stdout
}

fn wait_for(path: &Path) -> bool {
    poll_until(Duration::from_secs(10), || path.exists())
}

/// Lazy and eager give the host identical bytes: in a session that calls
/// a tool (the server is started for the call) and in one that never does
/// (the server is never started). Without a snapshot, lazy starts the
/// server at once.
#[test]
fn lazy_shows_the_host_the_same_bytes_as_eager() {
    let dir = TempDir::new("lazy-same");
    let script = write_script(&dir, &echo_tools());
    let pid = dir.join("started.pid");

    // No snapshot yet: --lazy starts the server at once (and this session
    // records the snapshot the next ones use).
    let first = session(proxy(&dir, &script, true), 1);
    assert!(pid.exists(), "no snapshot: started at once");
    let eager_call = session(proxy(&dir, &script, false), 1);
    assert_eq!(first, eager_call);

    std::fs::remove_file(&pid).expect("rm pid");
    let lazy_call = session(proxy(&dir, &script, true), 1);
    assert!(wait_for(&pid), "started for the call");
    // The lazy session's run knows the server as an eager one does (the
    // exchanges it answered from the snapshot are recorded as exchanges).
    let (code, out, err) = crate::record::bir_cmd(&dir, &["runs", "export", "latest"]);
    assert_eq!(code, 0, "{err}");
    let run: Value = serde_json::from_str(&out).expect("export");
    assert_eq!(
        run["servers"][0]["serverInfo"]["name"], "testpeer",
        "the lazy run's snapshot: {run}"
    );
    assert_eq!(run["servers"][0]["tools"][0]["name"], "echo");
    assert_eq!(
        String::from_utf8_lossy(&lazy_call),
        String::from_utf8_lossy(&eager_call),
        "a session that calls a tool"
    );

    std::fs::remove_file(&pid).expect("rm pid");
    let lazy_idle = session(proxy(&dir, &script, true), 0);
    assert!(!pid.exists(), "a session that needs no server starts none");
    let eager_idle = session(proxy(&dir, &script, false), 0);
    assert_eq!(
        String::from_utf8_lossy(&lazy_idle),
        String::from_utf8_lossy(&eager_idle),
        "a session that never calls a tool"
    );
}

/// The server's tools changed since its snapshot: the host, given the old
/// list, is told to ask again once the server is started.
#[test]
fn lazy_tells_the_host_when_the_tools_changed() {
    let dir = TempDir::new("lazy-changed");
    let script = write_script(&dir, &echo_tools());
    session(proxy(&dir, &script, false), 1);
    // Same command line, new tools (the script is read at start).
    let mut tools = echo_tools();
    tools
        .as_array_mut()
        .expect("array")
        .push(json!({"name": "exfiltrate", "inputSchema": {"type": "object"}}));
    write_script(&dir, &tools);

    let out = session(proxy(&dir, &script, true), 1);
    let lines: Vec<Value> = String::from_utf8_lossy(&out)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert_eq!(
        lines[1]["result"]["tools"].as_array().map(Vec::len),
        Some(1),
        "tools/list answered from the snapshot: {lines:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l["method"] == "notifications/tools/list_changed"),
        "the host is told: {lines:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l["id"] == 10 && l["result"].is_object()),
        "the call was answered: {lines:?}"
    );
}

/// A server that also lists prompts and resources: once a session has
/// recorded those lists, a lazy proxy answers them too, and a session that
/// only lists things starts no server. (What Claude Code asks at the start
/// of every session.)
#[test]
fn lazy_answers_prompts_and_resources_lists_from_the_snapshot() {
    let dir = TempDir::new("lazy-lists");
    let script = dir.script(
        "peer.json",
        &json!({"tools": echo_tools(),
            "capabilities": {"tools": {}, "prompts": {}, "resources": {}},
            "on_start": [{"pidfile": dir.join("started.pid")}],
            "rules": [
                {"method": "prompts/list", "do": [{"reply": {"prompts": [{"name": "greet", "description": "Says hello"}]}}]},
                {"method": "resources/list", "do": [{"reply": {"resources": [{"uri": "file:///a", "name": "a"}]}}]}
            ]}),
    );
    let pid = dir.join("started.pid");
    let lists = |lazy: bool, call: bool| -> Vec<u8> {
        let mut host = Host::start(proxy(&dir, &script, lazy));
        host.send(&json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"it","version":"1"}}}));
        assert!(
            host.wait_lines(1, Duration::from_secs(30)),
            "{}",
            host.stderr_so_far()
        );
        host.send(&json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
        for (i, method) in ["tools/list", "prompts/list", "resources/list"]
            .iter()
            .enumerate()
        {
            host.send(&json!({"jsonrpc":"2.0","id":i + 1,"method":method}));
            assert!(
                host.wait_lines(i + 2, Duration::from_secs(30)),
                "{}",
                host.stderr_so_far()
            );
        }
        if call {
            host.send(&json!({"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":{}}}));
            assert!(
                host.wait_lines(5, Duration::from_secs(30)),
                "{}",
                host.stderr_so_far()
            );
        }
        let seen = host.finish(Duration::from_secs(15));
        assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
        seen.stdout
    };
    let eager = lists(false, true);
    std::fs::remove_file(&pid).expect("rm pid");
    let lazy = lists(true, false);
    assert!(!pid.exists(), "listing needs no server");
    let eager_lines: Vec<&[u8]> = eager.split(|b| *b == b'\n').take(4).collect();
    let lazy_lines: Vec<&[u8]> = lazy.split(|b| *b == b'\n').take(4).collect();
    assert_eq!(
        String::from_utf8_lossy(&lazy_lines.concat()),
        String::from_utf8_lossy(&eager_lines.concat()),
        "the same answers, byte for byte"
    );
}

/// A page the snapshot does not hold is never made up: the session that
/// recorded the snapshot listed only the first page of the resources, so
/// a lazy proxy answers that page (its `nextCursor` included) from the
/// snapshot and starts the server for the second, which the host then
/// gets exactly as without `--lazy`.
#[test]
fn lazy_starts_the_server_for_a_page_not_in_the_snapshot() {
    let dir = TempDir::new("lazy-page");
    let pid = dir.join("started.pid");
    let script = dir.script(
        "peer.json",
        &json!({"tools": echo_tools(),
            "capabilities": {"tools": {}, "resources": {}},
            "on_start": [{"pidfile": pid}],
            "rules": [
                {"method": "resources/list", "cursor": "two", "do": [{"reply": {"resources": [{"uri": "file:///b", "name": "b"}]}}]},
                {"method": "resources/list", "do": [{"reply": {"resources": [{"uri": "file:///a", "name": "a"}], "nextCursor": "two"}}]}
            ]}),
    );
    // `pages` resources/list requests (following the cursor), then
    // `call` an echo call; each answer awaited.
    let run = |lazy: bool, pages: usize, call: bool| -> Vec<u8> {
        let mut host = Host::start(proxy(&dir, &script, lazy));
        let mut n = 0;
        let mut send = |host: &mut Host, msg: Value| {
            host.send(&msg);
            n += 1;
            assert!(
                host.wait_lines(n, Duration::from_secs(30)),
                "{}",
                host.stderr_so_far()
            );
        };
        send(
            &mut host,
            json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"it","version":"1"}}}),
        );
        host.send(&json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
        send(
            &mut host,
            json!({"jsonrpc":"2.0","id":1,"method":"resources/list"}),
        );
        if pages > 1 {
            send(
                &mut host,
                json!({"jsonrpc":"2.0","id":2,"method":"resources/list","params":{"cursor":"two"}}),
            );
        }
        if call {
            send(
                &mut host,
                json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{}}}),
            );
        }
        let seen = host.finish(Duration::from_secs(15));
        assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
        seen.stdout
    };
    run(false, 1, true); // records the snapshot: the first page only
    let eager = run(false, 2, false);
    std::fs::remove_file(&pid).expect("rm pid");
    let first_page_only = run(true, 1, false);
    assert!(!pid.exists(), "the first page is in the snapshot");
    let lazy = run(true, 2, false);
    assert!(wait_for(&pid), "the second page is not: the server starts");
    assert_eq!(
        String::from_utf8_lossy(&lazy),
        String::from_utf8_lossy(&eager)
    );
    assert!(
        String::from_utf8_lossy(&first_page_only).contains(r#""nextCursor":"two""#),
        "the first page keeps its cursor: {}",
        String::from_utf8_lossy(&first_page_only)
    );
}
