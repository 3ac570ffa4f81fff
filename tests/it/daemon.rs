//! The recorder daemon, through the real binary: started on demand by a
//! hook, one per `$BIR_HOME`, stale and tampered discovery files, the
//! control server's abuse cases, `bir down`, idle
//! exit, and `bir-hooks` staying silent whatever goes wrong.
//!
//! No assertion depends on timing: every wait polls with a generous
//! deadline. Every test stops the daemons it started (see [`Running`]).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use super::support::{TempDir, alive, bir, bytes_read_by, command, wait_gone};
use super::support::{finished_export, wait_for, wait_until};
use super::support::{scaled, serial};

const LONG: Duration = Duration::from_secs(30);

fn bir_home(t: &TempDir) -> PathBuf {
    t.join("home/.baseinstrunner")
}

fn discovery_path(t: &TempDir) -> PathBuf {
    bir_home(t).join("control/daemon.json")
}

/// A `bir-hooks` link to the binary under test.
fn hooks_link(t: &TempDir) -> PathBuf {
    let link = t.join("bir-hooks");
    if !link.exists() {
        symlink(bir(), &link).expect("symlink bir-hooks");
    }
    link
}

/// Runs `bir-hooks <event>` the way Claude Code does (`sh -c`), payload on
/// stdin.
fn hook(t: &TempDir, event: &str, payload: &str, env: &[(&str, &str)]) -> Output {
    let mut cmd = command("sh", t);
    cmd.arg("-c")
        .arg(format!("'{}' {event}", hooks_link(t).display()))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("spawn hook");
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(payload.as_bytes());
    }
    child.wait_with_output().expect("hook output")
}

fn payload(event: &str) -> String {
    serde_json::json!({
        "session_id": "it-session",
        "transcript_path": "/nonexistent/transcript.jsonl",
        "cwd": "/tmp",
        "hook_event_name": event,
        "tool_name": "Bash",
        "tool_input": {"command": "true"},
        "tool_use_id": "toolu_1"
    })
    .to_string()
}

#[derive(Debug, Clone, serde::Deserialize)]
struct Disco {
    url: String,
    token: String,
    pid: u32,
    version: String,
}

fn read_discovery(t: &TempDir) -> Option<Disco> {
    let bytes = std::fs::read(discovery_path(t)).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Waits for a discovery file that names a live daemon other than `not`.
fn wait_for_daemon(t: &TempDir, not: Option<u32>) -> Disco {
    wait_for("a live daemon published", LONG, || {
        read_discovery(t).filter(|d| Some(d.pid) != not && alive(d.pid as i32))
    })
}

/// Stops the daemon of a temp home when the test ends, pass or fail.
struct Running<'a>(&'a TempDir);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        if let Some(d) = read_discovery(self.0) {
            // SAFETY: kill(2) on a pid this test's daemon published.
            unsafe {
                libc::kill(d.pid as i32, libc::SIGTERM);
            }
            wait_gone(d.pid as i32, LONG);
        }
    }
}

fn start_by_hook(t: &TempDir, env: &[(&str, &str)]) -> Disco {
    let out = hook(t, "SessionStart", &payload("SessionStart"), env);
    assert!(out.status.success(), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
    // Never this test process: a planted file names it (a live pid) until
    // the daemon, slow to start on a busy machine, replaces it.
    wait_for_daemon(t, Some(std::process::id()))
}

fn port_of(d: &Disco) -> u16 {
    d.url
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("port in url")
}

/// Sends raw bytes, returns the status of the answer (0: none). Writes on
/// a thread of its own, so an answer that comes before the whole request
/// was taken is read, not lost.
fn raw(port: u16, request: &[u8]) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(LONG)).expect("timeout");
    let mut writer = s.try_clone().expect("clone");
    let request = request.to_vec();
    std::thread::spawn(move || {
        let _ = writer.write_all(&request);
    });
    super::support::http::read_answer(&mut s)
}

fn request(d: &Disco, method: &str, path: &str, extra: &str, body: &str) -> Vec<u8> {
    let port = port_of(d);
    format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{extra}\r\n{body}",
        d.token,
        body.len()
    )
    .into_bytes()
}

#[test]
fn a_hook_starts_the_daemon_which_answers_health_and_stops_on_bir_down() {
    let t = TempDir::new("daemon-start");
    let _running = Running(&t);
    let d = start_by_hook(&t, &[]);
    assert!(d.url.starts_with("http://127.0.0.1:"), "{d:?}");
    assert_eq!(d.token.len(), 64, "256-bit hex token");
    let meta = std::fs::metadata(discovery_path(&t)).expect("discovery");
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let meta = std::fs::metadata(bir_home(&t).join("control")).expect("control");
    assert_eq!(meta.permissions().mode() & 0o777, 0o700);

    let (status, text) = raw(port_of(&d), &request(&d, "GET", "/health", "", ""));
    assert_eq!(status, 200, "{text}");
    assert!(text.contains(&format!("\"pid\":{}", d.pid)), "{text}");
    assert!(text.contains(&d.version), "{text}");

    // Further hooks use the same daemon.
    let out = hook(&t, "PreToolUse", &payload("PreToolUse"), &[]);
    assert!(out.status.success() && out.stdout.is_empty(), "{out:?}");
    assert_eq!(read_discovery(&t).map(|x| x.pid), Some(d.pid));

    let status = command(bir(), &t).arg("status").output().expect("status");
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(
        text.contains(&format!("Recorder daemon: running at {}", d.url)),
        "{text}"
    );
    let doctor = command(bir(), &t).arg("doctor").output().expect("doctor");
    let text = String::from_utf8_lossy(&doctor.stdout);
    assert!(text.contains("recorder daemon: healthy"), "{text}");

    let down = command(bir(), &t).arg("down").output().expect("down");
    assert!(down.status.success(), "{down:?}");
    assert!(wait_gone(d.pid as i32, LONG), "daemon still running");
    assert!(!discovery_path(&t).exists(), "discovery file left behind");
    let again = command(bir(), &t).arg("down").output().expect("down");
    assert!(String::from_utf8_lossy(&again.stdout).contains("not running"));
    let doctor = command(bir(), &t).arg("doctor").output().expect("doctor");
    let text = String::from_utf8_lossy(&doctor.stdout);
    assert!(text.contains("recorder daemon: not running"), "{text}");
}

#[test]
fn a_second_daemon_is_refused_and_names_the_live_one() {
    let t = TempDir::new("daemon-second");
    let _running = Running(&t);
    let d = start_by_hook(&t, &[]);
    let second = command(bir(), &t).arg("daemon").output().expect("second");
    assert_eq!(second.status.code(), Some(1), "{second:?}");
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(err.contains(&format!("pid {}", d.pid)), "{err}");
    assert!(err.contains(&d.url), "{err}");
    // The live daemon's discovery file is untouched.
    assert_eq!(read_discovery(&t).map(|x| x.token), Some(d.token));
}

/// A port that refuses connections (bound, then closed).
fn closed_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

fn dead_pid() -> u32 {
    let mut child = Command::new("true").spawn().expect("spawn");
    let pid = child.id();
    child.wait().expect("wait");
    pid
}

fn plant(t: &TempDir, body: &str) {
    let control = bir_home(t).join("control");
    std::fs::create_dir_all(&control).expect("mkdir");
    std::fs::set_permissions(bir_home(t), std::fs::Permissions::from_mode(0o700)).expect("chmod");
    std::fs::set_permissions(&control, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    std::fs::write(discovery_path(t), body).expect("write");
    std::fs::set_permissions(discovery_path(t), std::fs::Permissions::from_mode(0o600))
        .expect("chmod");
}

#[test]
fn stale_discovery_files_are_replaced() {
    let cases = [
        (
            "dead-pid",
            serde_json::json!({"url": format!("http://127.0.0.1:{}", closed_port()), "token": "0".repeat(64),
                "pid": dead_pid(), "version": "0.1.0+whatever", "startedAt": 1})
            .to_string(),
        ),
        ("garbage", "this is not json {".to_owned()),
        (
            // A live pid (this test process) that runs another version.
            "other-version",
            serde_json::json!({"url": format!("http://127.0.0.1:{}", closed_port()), "token": "0".repeat(64),
                "pid": std::process::id(), "version": "0.0.1+old", "startedAt": 1})
            .to_string(),
        ),
    ];
    for (tag, body) in cases {
        let t = TempDir::new(&format!("daemon-stale-{tag}"));
        let _running = Running(&t);
        plant(&t, &body);
        let d = start_by_hook(&t, &[]);
        assert_ne!(d.pid, std::process::id(), "{tag}");
        assert_ne!(d.token, "0".repeat(64), "{tag}");
        let (status, text) = raw(port_of(&d), &request(&d, "GET", "/health", "", ""));
        assert_eq!(status, 200, "{tag}: {text}");
    }
}

/// A listener standing in for whatever a tampered discovery file points
/// at: it must never be sent anything.
struct Trap {
    listener: TcpListener,
}

impl Trap {
    fn new() -> Trap {
        // Outside the kernel's ephemeral range (and the daemon's own
        // ports): a port another test frees and expects to have back (a
        // fake daemon restarted on its port) is never handed to a trap.
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let listener = (0..5000)
            .map(|_| {
                let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                10000 + ((std::process::id() + n * 7) % 10000) as u16
            })
            .find_map(|port| TcpListener::bind(("127.0.0.1", port)).ok())
            .expect("a free port for the trap");
        listener.set_nonblocking(true).expect("nonblocking");
        Trap { listener }
    }

    fn url(&self) -> String {
        format!(
            "http://127.0.0.1:{}",
            self.listener.local_addr().expect("addr").port()
        )
    }

    /// A discovery file that would pass every check but the file's own
    /// (a live pid of ours, this build's version) and leads to the trap.
    fn discovery(&self) -> String {
        serde_json::json!({"url": self.url(), "token": "f".repeat(64),
            "pid": std::process::id(), "version": version_of_build(), "startedAt": 1})
        .to_string()
    }

    fn was_contacted(&self) -> bool {
        self.listener.accept().is_ok()
    }
}

#[test]
fn a_symlinked_or_loose_discovery_file_is_refused_not_followed() {
    // Symlink: the target names a live pid (ours) and this build's version
    // would not even be needed — the link itself is refused.
    let t = TempDir::new("daemon-symlink");
    let _running = Running(&t);
    let trap = Trap::new();
    let elsewhere = t.join("elsewhere.json");
    let planted = trap.discovery();
    plant(&t, "{}");
    std::fs::remove_file(discovery_path(&t)).expect("rm");
    std::fs::write(&elsewhere, &planted).expect("write");
    std::fs::set_permissions(&elsewhere, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    symlink(&elsewhere, discovery_path(&t)).expect("symlink");
    let status = command(bir(), &t).arg("status").output().expect("status");
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(text.contains("symlink"), "{text}");
    let d = start_by_hook(&t, &[]);
    assert!(!trap.was_contacted(), "the symlink's target was trusted");
    assert_ne!(d.url, trap.url());
    assert_eq!(
        std::fs::read_to_string(&elsewhere).expect("target"),
        planted,
        "the symlink's target was written through"
    );
    assert!(
        !std::fs::symlink_metadata(discovery_path(&t))
            .expect("meta")
            .file_type()
            .is_symlink()
    );

    // Mode 0644: refused, reported, replaced.
    let t = TempDir::new("daemon-loose");
    let _running2 = Running(&t);
    let trap = Trap::new();
    plant(&t, &trap.discovery());
    std::fs::set_permissions(discovery_path(&t), std::fs::Permissions::from_mode(0o644))
        .expect("chmod");
    let doctor = command(bir(), &t).arg("doctor").output().expect("doctor");
    let text = String::from_utf8_lossy(&doctor.stdout);
    assert!(text.contains("refused") && text.contains("mode"), "{text}");
    let d = start_by_hook(&t, &[]);
    assert!(!trap.was_contacted(), "a 0644 discovery file was trusted");
    assert_ne!(d.url, trap.url());

    // A control directory open to others (0755): refused by readers,
    // tightened by the daemon that owns it.
    let t = TempDir::new("daemon-loose-dir");
    let _running3 = Running(&t);
    let trap = Trap::new();
    plant(&t, &trap.discovery());
    let control = bir_home(&t).join("control");
    std::fs::set_permissions(&control, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let status = command(bir(), &t).arg("status").output().expect("status");
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(text.contains("refused") && text.contains("0700"), "{text}");
    let d = start_by_hook(&t, &[]);
    assert!(
        !trap.was_contacted(),
        "a discovery file in a 0755 directory was trusted"
    );
    assert_ne!(d.url, trap.url());
    let mode = std::fs::metadata(&control)
        .expect("meta")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700);
}

/// This build's daemon version, as a daemon publishes it.
fn version_of_build() -> String {
    let t = TempDir::new("daemon-version");
    let _running = Running(&t);
    start_by_hook(&t, &[]).version
}

#[test]
fn the_control_server_refuses_abuse() {
    let t = TempDir::new("daemon-abuse");
    let _running = Running(&t);
    let d = start_by_hook(&t, &[("BIR_DAEMON_REQUEST_MS", "2000")]);
    let port = port_of(&d);
    let ok = request(&d, "GET", "/health", "", "");
    let text = |b: Vec<u8>| String::from_utf8(b).expect("utf8");

    // Missing token, wrong token of the same length with a shared
    // prefix, token in the query string or a cookie.
    let no_auth = text(ok.clone()).replace(&format!("Authorization: Bearer {}\r\n", d.token), "");
    assert_eq!(raw(port, no_auth.as_bytes()).0, 401);
    let mut wrong = d.token.clone();
    wrong.replace_range(60.., "0000");
    if wrong == d.token {
        wrong.replace_range(60.., "1111");
    }
    assert_eq!(
        raw(port, text(ok.clone()).replace(&d.token, &wrong).as_bytes()).0,
        401
    );
    let query = no_auth.replace("/health", &format!("/health?token={}", d.token));
    assert_eq!(raw(port, query.as_bytes()).0, 401);
    let cookie = no_auth.replace(
        "\r\n\r\n",
        &format!("\r\nCookie: token={}\r\n\r\n", d.token),
    );
    assert_eq!(raw(port, cookie.as_bytes()).0, 401);

    // Wrong Host, other port, none (HTTP/1.0), rebinding-style names.
    for host in [
        "attacker.example:PORT".to_owned(),
        "localhost:1".to_owned(),
        "127.0.0.1.nip.io:PORT".to_owned(),
    ] {
        let host = host.replace("PORT", &port.to_string());
        let req = text(ok.clone()).replace(&format!("127.0.0.1:{port}"), &host);
        assert_eq!(raw(port, req.as_bytes()).0, 403, "{host}");
    }
    let no_host = text(ok.clone())
        .replace(&format!("Host: 127.0.0.1:{port}\r\n"), "")
        .replace("HTTP/1.1", "HTTP/1.0");
    assert_eq!(raw(port, no_host.as_bytes()).0, 403);

    // Any Origin, OPTIONS, a text/plain POST.
    for origin in ["https://evil.example", "null", &d.url] {
        let (status, answer) = raw(
            port,
            &request(&d, "GET", "/health", &format!("Origin: {origin}\r\n"), ""),
        );
        assert_eq!(status, 403, "{origin}");
        assert!(!answer.to_ascii_lowercase().contains("access-control"));
    }
    assert_eq!(raw(port, &request(&d, "OPTIONS", "/health", "", "")).0, 405);
    let plain =
        text(request(&d, "POST", "/hook/Stop", "", "{}")).replace("application/json", "text/plain");
    assert_eq!(raw(port, plain.as_bytes()).0, 415);

    // A 100 MB Content-Length, a 1 MB header block, 10,000 headers.
    let huge = text(request(&d, "POST", "/hook/Stop", "", ""))
        .replace("Content-Length: 0", "Content-Length: 100000000");
    assert_eq!(raw(port, huge.as_bytes()).0, 413);
    let big_header = format!("X-Big: {}\r\n", "a".repeat(1024 * 1024));
    assert_eq!(
        raw(port, &request(&d, "GET", "/health", &big_header, "")).0,
        431
    );
    let many: String = (0..10_000).map(|i| format!("X-{i}: v\r\n")).collect();
    assert_eq!(raw(port, &request(&d, "GET", "/health", &many, "")).0, 431);

    // Smuggling shapes.
    let both = text(request(
        &d,
        "POST",
        "/hook/Stop",
        "Transfer-Encoding: chunked\r\n",
        "{}",
    ));
    assert_eq!(raw(port, both.as_bytes()).0, 400);

    // A client dribbling its headers is cut at the total deadline,
    // while a well-behaved client is served meanwhile.
    let mut slow = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    slow.write_all(b"GET /health HTTP/1.1\r\n").expect("write");
    let dribbler = std::thread::spawn(move || {
        let start = Instant::now();
        let mut i = 0;
        while start.elapsed() < LONG {
            if slow.write_all(format!("X-{i}: y\r\n").as_bytes()).is_err() {
                break;
            }
            i += 1;
            // Paces the dribble: a slow client is what this part tests.
            std::thread::sleep(Duration::from_millis(200));
            slow.set_nonblocking(true).expect("nb");
            let mut buf = [0u8; 512];
            match slow.read(&mut buf) {
                Ok(n) if n > 0 => return String::from_utf8_lossy(&buf[..n]).into_owned(),
                Ok(_) => return String::new(),
                Err(_) => {}
            }
            slow.set_nonblocking(false).expect("b");
        }
        String::from("never cut")
    });
    let (status, _) = raw(port, &ok);
    assert_eq!(status, 200, "a good client was blocked by a slow one");
    let cut = dribbler.join().expect("dribbler");
    assert!(cut.starts_with("HTTP/1.1 408"), "slow client: {cut:?}");

    // Still healthy after all that.
    assert_eq!(raw(port, &ok).0, 200);
}

#[test]
fn hooks_stay_silent_and_succeed_whatever_happens() {
    // BIR_HOME cannot be created (a path under a regular file).
    let t = TempDir::new("daemon-unwritable");
    std::fs::write(t.join("file"), b"x").expect("write");
    let home = t.join("file/home");
    let home = home.to_string_lossy();
    for event in ["PreToolUse", "UserPromptSubmit", "SessionEnd"] {
        let out = hook(&t, event, &payload(event), &[("BIR_HOME", &home)]);
        assert_eq!(out.status.code(), Some(0), "{event}: {out:?}");
        assert!(out.stdout.is_empty(), "{event}: {out:?}");
        assert!(out.stderr.is_empty(), "{event}: {out:?}");
    }

    // An unknown event, no event, garbage input: forwarded or dropped,
    // never an error.
    let t = TempDir::new("daemon-unknown");
    let _running = Running(&t);
    for (event, body) in [
        ("BogusEvent", payload("BogusEvent")),
        ("", payload("Stop")),
        ("Stop", "not json at all".to_owned()),
        ("'../shutdown'", payload("Stop")),
    ] {
        let out = hook(&t, event, &body, &[]);
        assert_eq!(out.status.code(), Some(0), "{event}: {out:?}");
        assert!(out.stdout.is_empty(), "{event}: {out:?}");
    }
    // The path-traversal-looking event did not stop the daemon.
    let d = wait_for_daemon(&t, None);
    assert_eq!(
        raw(port_of(&d), &request(&d, "GET", "/health", "", "")).0,
        200
    );
}

#[test]
fn the_daemon_exits_when_idle() {
    let t = TempDir::new("daemon-idle");
    let _running = Running(&t);
    // A payload without a session: nothing keeps the daemon busy.
    let env = [
        ("BIR_DAEMON_IDLE_SECS", "1"),
        ("BIR_SESSION_IDLE_SECS", "1"),
    ];
    let out = hook(&t, "Notification", "{}", &env);
    assert!(out.status.success() && out.stdout.is_empty(), "{out:?}");
    let d = wait_for_daemon(&t, None);
    assert!(wait_gone(d.pid as i32, LONG), "idle daemon did not exit");
    wait_until("the discovery file to be removed", LONG, || {
        !discovery_path(&t).exists()
    });
    // And the next hook starts a new one.
    let d2 = start_by_hook(&t, &[]);
    assert_ne!(d2.pid, d.pid);
}

/// A captured Claude Code session (`tests/fixtures/bound/mcp-echo-hooks`,
/// one MCP echo call) replayed hook by hook through `bir-hooks`: the daemon
/// records it as one bound run that `bir runs export` reads, with the
/// prompt, the tool step and the end. (Its MCP messages need a bound proxy,
/// which this test does not start: the hook's view of the call is what is
/// recorded.)
#[test]
fn a_captured_session_through_bir_hooks_becomes_one_bound_run() {
    let t = TempDir::new("daemon-e2e");
    let _running = Running(&t);
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/bound/mcp-echo-hooks.jsonl");
    let text = std::fs::read_to_string(&fixture).expect("fixture");
    let mut prompt = None;
    let mut tool_use_ids = Vec::new();
    for line in text.lines() {
        let row: serde_json::Value = serde_json::from_str(line).expect("row");
        if row["source"] != "hook" {
            continue;
        }
        let event = row["event"].as_str().expect("event");
        let payload = &row["payload"];
        if event == "UserPromptSubmit" {
            prompt = payload["prompt"].as_str().map(str::to_owned);
        }
        if event == "PreToolUse" {
            tool_use_ids.push(payload["tool_use_id"].as_str().expect("id").to_owned());
        }
        if event == "SessionEnd" {
            // While the session is open, `bir status` shows it and its run.
            let session = payload["session_id"].as_str().expect("session id");
            let status = command(bir(), &t).arg("status").output().expect("status");
            let text = String::from_utf8_lossy(&status.stdout);
            assert!(
                text.contains(&format!("session {session} → run run_")),
                "{text}"
            );
        }
        let out = hook(&t, event, &payload.to_string(), &[]);
        assert_eq!(out.status.code(), Some(0), "{event}: {out:?}");
        assert!(out.stdout.is_empty(), "{event}: {out:?}");
    }
    let prompt = prompt.expect("the fixture has a prompt");
    assert!(!tool_use_ids.is_empty(), "the fixture has a tool call");

    // SessionEnd finishes the run; its journal is then complete.
    let export = finished_export(&t, LONG);
    let listed = command(bir(), &t)
        .args(["runs", "--json"])
        .output()
        .expect("list");
    let runs = String::from_utf8_lossy(&listed.stdout);
    assert_eq!(runs.lines().count(), 1, "exactly one run: {runs}");
    let steps = export["steps"].as_array().expect("steps");
    for id in &tool_use_ids {
        let of_call: Vec<&str> = steps
            .iter()
            .filter(|s| s["toolUseId"] == id.as_str())
            .filter_map(|s| s["type"].as_str())
            .collect();
        assert_eq!(
            of_call,
            ["tool_selected", "tool_response"],
            "{id}: {steps:?}"
        );
    }
    assert_eq!(export["finish"]["reason"], "session_end", "{export}");
    let all = export.to_string();
    assert!(all.contains("\"bound\""), "tier bound: {all}");
    assert!(
        all.contains(&serde_json::to_string(&prompt).expect("json")),
        "the prompt: {all}"
    );
    for id in &tool_use_ids {
        assert!(all.contains(id.as_str()), "step {id}: {all}");
    }
}

#[test]
fn the_daemon_exits_when_its_home_is_removed() {
    let t = TempDir::new("daemon-home-gone");
    let _running = Running(&t);
    let d = start_by_hook(&t, &[]);
    std::fs::remove_dir_all(bir_home(&t)).expect("rm home");
    assert!(wait_gone(d.pid as i32, LONG), "daemon outlived its home");
}

/// What `bir <args>` printed in the test's home (it must succeed).
fn bir_says(t: &TempDir, args: &[&str]) -> String {
    let out = command(bir(), t).args(args).output().expect("bir");
    assert!(out.status.success(), "{args:?}: {out:?}");
    String::from_utf8(out.stdout).expect("utf-8")
}

/// `bir-hooks <event>` of session `session` in `cwd` (permission mode
/// `default`), the payload's other fields from `extra`: what it printed (it
/// must succeed).
fn guided_hook(
    t: &TempDir,
    (session, cwd): (&str, &std::path::Path),
    event: &str,
    extra: serde_json::Value,
    env: &[(&str, &str)],
) -> String {
    let mut p = serde_json::json!({"session_id": session,
        "transcript_path": "/nonexistent/transcript.jsonl",
        "cwd": cwd, "hook_event_name": event, "permission_mode": "default"});
    if let (Some(p), serde_json::Value::Object(extra)) = (p.as_object_mut(), extra) {
        p.extend(extra);
    }
    let out = hook(t, event, &p.to_string(), env);
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).expect("utf-8")
}

/// Writes `scenario` into the test's directory and arms it as the guide of
/// `project`: what `bir guide start` said.
fn arm_guide(t: &TempDir, project: &str, scenario: serde_json::Value) -> String {
    let path = t.join("demo.scenario.json");
    std::fs::write(&path, scenario.to_string()).expect("scenario");
    let path = path.to_str().expect("utf-8");
    bir_says(t, &["guide", "start", path, "--project", project])
}

/// `bir guide` through the real binary and daemon: no guide, no output at
/// `UserPromptSubmit`; an armed guide's outline, pins (`ask` without a rule,
/// `allow` with the session's own allow rule, read from the
/// `CLAUDE_CONFIG_DIR` of the hook's environment) and one Stop nudge, as
/// `bir-hooks` prints them; `bir guide status|stop`.
#[test]
fn a_guide_answers_through_bir_hooks_and_no_guide_stays_silent() {
    let t = TempDir::new("guide");
    std::fs::create_dir_all(t.join("proj/sub")).expect("project");
    let project = std::fs::canonicalize(t.join("proj")).expect("real path");
    let conf = t.join("claude-conf");
    std::fs::create_dir_all(&conf).expect("conf");
    std::fs::write(
        conf.join("settings.json"),
        r#"{"permissions": {"allow": ["mcp__srv__get-sum"]}}"#,
    )
    .expect("settings");
    // Hermetic: the machine's managed policy dir is not read.
    let managed = t.join("managed");
    let managed = ("BIR_CLAUDE_MANAGED_DIR", managed.to_str().expect("utf-8"));
    let conf_env = [
        ("CLAUDE_CONFIG_DIR", conf.to_str().expect("utf-8")),
        managed,
    ];
    let _d = start_by_hook(&t, &[]);
    let _running = Running(&t);
    let cwd = project.join("sub");
    let guided = |event: &str, extra: serde_json::Value, env: &[(&str, &str)]| {
        guided_hook(&t, ("it-session", &cwd), event, extra, env)
    };
    let prompt = serde_json::json!({"prompt": "go"});
    assert_eq!(
        guided("UserPromptSubmit", prompt.clone(), &[]),
        "",
        "no guide: byte-empty"
    );

    let cli = |args: &[&str]| bir_says(&t, args);
    let project_arg = project.to_str().expect("utf-8");
    let said = arm_guide(
        &t,
        project_arg,
        serde_json::json!({"schema": "bir/scenario@1", "params": {"a": {"default": 2}},
            "steps": [
                {"id": "s1", "server": "srv", "tool": "echo", "args": {"message": "hi"},
                 "volatileArgs": ["/message"]},
                {"id": "s2", "server": "srv", "tool": "get-sum", "args": {"a": "${param:a}", "b": 3}},
                {"id": "s3", "server": "srv", "tool": "echo", "args": {"message": "bye"}}]}),
    );
    assert!(said.starts_with("Guide armed in "), "{said}");

    let outline: serde_json::Value =
        serde_json::from_str(&guided("UserPromptSubmit", prompt, &[])).expect("JSON");
    let context = outline["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .expect("the outline");
    assert!(context.contains("[s2] mcp__srv__get-sum"), "{context}");

    let pre = |tool: &str, input: serde_json::Value, id: &str, env: &[(&str, &str)]| {
        let out = guided(
            "PreToolUse",
            serde_json::json!({"tool_name": tool, "tool_input": input, "tool_use_id": id}),
            env,
        );
        serde_json::from_str::<serde_json::Value>(&out).expect("a JSON answer")
            ["hookSpecificOutput"]
            .clone()
    };
    // A volatile slot pinned; nothing in the session's settings: ask.
    let got = pre(
        "mcp__srv__echo",
        serde_json::json!({"message": "hey"}),
        "toolu_1",
        &[managed],
    );
    assert_eq!(got["permissionDecision"], "ask");
    assert_eq!(got["updatedInput"], serde_json::json!({"message": "hi"}));
    // A parameter slot pinned; the session's user settings allow the tool.
    let got = pre(
        "mcp__srv__get-sum",
        serde_json::json!({"a": 9, "b": 3}),
        "toolu_2",
        &conf_env,
    );
    assert_eq!(got["permissionDecision"], "allow");
    assert_eq!(got["updatedInput"], serde_json::json!({"a": 2, "b": 3}));

    let stop = serde_json::json!({"stop_hook_active": false});
    let nudge: serde_json::Value =
        serde_json::from_str(&guided("Stop", stop.clone(), &[])).expect("JSON");
    assert_eq!(nudge["decision"], "block");
    assert!(nudge["reason"].as_str().expect("why").contains("step s3"));
    assert_eq!(guided("Stop", stop, &[]), "", "one nudge only");

    let status = cli(&["guide", "status", "--project", project_arg]);
    assert!(status.contains("pinned 2 (asked the user 1)"), "{status}");
    assert!(status.contains("next: s3"), "{status}");
    assert!(cli(&["guide", "stop", "--project", project_arg]).starts_with("Guide stopped"));
    assert!(cli(&["guide", "status", "--project", project_arg]).starts_with("No guide armed"));
}

/// A guided `Stop` waits for the bound proxy's report of a pinned call,
/// posted here 100 ms after the `Stop` went to `bir-hooks`. When the report
/// says the server got the pin, the `Stop` is answered with the nudge
/// toward the next step; when it says the server got the model's
/// arguments, the guide hands over at that step and there is no nudge.
/// (On a machine slow enough that the `Stop` arrives after the report
/// anyway, the test passes without proving the wait; it fails if the wait
/// is missing, or if the answer does not fit `bir-hooks`' deadline.)
#[test]
fn a_guided_stop_waits_for_the_report_of_a_pinned_call() {
    let got_the_pin = stop_after_a_late_report(serde_json::json!({"message": "hi"}));
    let answer: serde_json::Value =
        serde_json::from_str(&got_the_pin.0).expect("the nudge, after the wait");
    assert_eq!(answer["decision"], "block", "{answer}");
    assert!(got_the_pin.1.contains("next: s2"), "{}", got_the_pin.1);

    let got_other = stop_after_a_late_report(serde_json::json!({"message": "hey"}));
    assert_eq!(
        got_other.0, "",
        "no nudge past a pin the server did not get"
    );
    assert!(got_other.1.contains("handed over at s1"), "{}", got_other.1);
}

/// A guided session of two steps whose first, pinned, is reported by its
/// proxy (the server got `server_got`) only after the turn's `Stop` was
/// sent: what `bir-hooks Stop` printed, and `bir guide status`.
fn stop_after_a_late_report(server_got: serde_json::Value) -> (String, String) {
    let t = TempDir::new("guide-pin-report");
    std::fs::create_dir_all(t.join("proj")).expect("project");
    let project = std::fs::canonicalize(t.join("proj")).expect("real path");
    let managed = t.join("managed");
    let env = [("BIR_CLAUDE_MANAGED_DIR", managed.to_str().expect("utf-8"))];
    let session = "it-pinned";
    let project_arg = project.to_str().expect("utf-8");
    arm_guide(
        &t,
        project_arg,
        serde_json::json!({"schema": "bir/scenario@1", "steps": [
            {"id": "s1", "server": "srv", "tool": "echo", "args": {"message": "hi"},
             "volatileArgs": ["/message"]},
            {"id": "s2", "server": "srv", "tool": "echo", "args": {"message": "bye"}}]}),
    );

    let guided = |event: &str, extra: serde_json::Value| {
        guided_hook(&t, (session, &project), event, extra, &env)
    };
    guided("SessionStart", serde_json::json!({"source": "startup"}));
    let d = wait_for_daemon(&t, Some(std::process::id()));
    let _running = Running(&t);
    let port = port_of(&d);
    let register = serde_json::json!({"proxyId": "p-1", "sessionId": session,
        "serverName": "srv", "pid": std::process::id(), "cwd": project,
        "birVersion": d.version});
    let (status, text) = raw(
        port,
        &request(&d, "POST", "/proxy/register", "", &register.to_string()),
    );
    assert_eq!(status, 200, "{text}");

    guided("UserPromptSubmit", serde_json::json!({"prompt": "go"}));
    let model = serde_json::json!({"message": "hey"});
    let call = serde_json::json!({"tool_name": "mcp__srv__echo", "tool_input": model,
        "tool_use_id": "toolu_1"});
    let pinned: serde_json::Value =
        serde_json::from_str(&guided("PreToolUse", call.clone())).expect("a JSON answer");
    assert_eq!(
        pinned["hookSpecificOutput"]["updatedInput"],
        serde_json::json!({"message": "hi"}),
        "{pinned}"
    );
    let mut answered = call;
    answered["tool_response"] = serde_json::json!([{"type": "text", "text": "Echo"}]);
    guided("PostToolUse", answered);

    let step = |kind: &str, index: u64, body: (&str, serde_json::Value)| {
        let mut step = serde_json::json!({"id": format!("p-{index}"), "stepIndex": index,
            "type": kind, "qualifiedName": "mcp__srv__echo", "serverName": "srv",
            "toolName": "echo", "startedAt": "2026-01-01T00:00:00Z", "toolUseId": "toolu_1"});
        step[body.0] = body.1;
        step
    };
    let records = serde_json::json!({"proxyId": "p-1", "sessionId": session,
        "serverName": "srv", "items": [{"kind": "call", "data": {
            "selected": step("tool_selected", 1, ("input", server_got)),
            "response": step("tool_response", 2,
                ("output", serde_json::json!({"content": [{"type": "text", "text": "Echo"}]})))}}]});
    let answer = std::thread::scope(|scope| {
        let stopping =
            scope.spawn(|| guided("Stop", serde_json::json!({"stop_hook_active": false})));
        std::thread::sleep(Duration::from_millis(100));
        let (status, text) = raw(
            port,
            &request(&d, "POST", "/proxy/records", "", &records.to_string()),
        );
        assert_eq!(status, 200, "{text}");
        stopping.join().expect("the Stop's answer")
    });
    let status = bir_says(&t, &["guide", "status", "--project", project_arg]);
    (answer, status)
}

/// A hook payload of `session` whose transcript is at `transcript`.
fn session_payload(session: &str, transcript: &std::path::Path, event: &str, id: &str) -> String {
    serde_json::json!({
        "session_id": session,
        "transcript_path": transcript.display().to_string(),
        "cwd": "/tmp",
        "hook_event_name": event,
        "tool_name": "Bash",
        "tool_input": {"command": "true"},
        "tool_use_id": id
    })
    .to_string()
}

/// Posts a hook to the daemon on a thread of its own (its answer is not
/// waited for).
fn post_hook_in_background(d: &Disco, event: &str, body: String) {
    let request = request(d, "POST", &format!("/hook/{event}"), "", &body);
    let port = port_of(d);
    std::thread::spawn(move || raw(port, &request));
}

/// Posts a hook and says how long the daemon took to answer it.
fn timed_hook(d: &Disco, event: &str, body: &str) -> (u16, Duration) {
    let started = Instant::now();
    let (status, _) = raw(
        port_of(d),
        &request(d, "POST", &format!("/hook/{event}"), "", body),
    );
    (status, started.elapsed())
}

/// One session's transcript is huge (a sparse 64 GiB file): while the
/// daemon reads it, another session's hooks and `/health` are answered
/// at once. (Reading it inside the engine's lock held every request
/// until the whole file was read.)
#[test]
fn a_huge_transcript_does_not_hold_up_other_sessions() {
    let _serial = serial();
    let t = TempDir::new("huge-transcript");
    let d = start_by_hook(&t, &[]);
    let _running = Running(&t);
    let huge = t.join("huge.jsonl");
    std::fs::File::create(&huge)
        .and_then(|f| f.set_len(64 << 30))
        .expect("a sparse transcript");
    let small = t.join("small.jsonl");
    std::fs::write(&small, b"").expect("transcript");

    let before = bytes_read_by(d.pid);
    for event in ["SessionStart", "UserPromptSubmit", "PreToolUse"] {
        post_hook_in_background(&d, event, session_payload("huge", &huge, event, "toolu_h"));
    }
    // The daemon is reading the huge file.
    wait_until(
        "the daemon to read the transcript",
        Duration::from_secs(120),
        || bytes_read_by(d.pid) >= before + (256 << 20),
    );
    // Generous for a loaded machine; reading the file under the lock held
    // these for the whole 64 GiB.
    let bound = Duration::from_secs(5);
    for (i, event) in [
        "SessionStart",
        "UserPromptSubmit",
        "PreToolUse",
        "PostToolUse",
    ]
    .into_iter()
    .enumerate()
    {
        let (status, took) = timed_hook(
            &d,
            event,
            &session_payload("other", &small, event, "toolu_o"),
        );
        assert_eq!(status, 200, "{event}");
        assert!(
            took < scaled(bound),
            "{event} of another session took {took:?}"
        );
        let started = Instant::now();
        let (status, _) = raw(port_of(&d), &request(&d, "GET", "/health", "", ""));
        let took = started.elapsed();
        assert_eq!(status, 200);
        assert!(took < scaled(bound), "/health took {took:?} (round {i})");
    }
    assert!(
        bytes_read_by(d.pid) < before + (64 << 30),
        "the file was read whole meanwhile: nothing was shown"
    );
}

/// A daemon restarted after a session's run finished does not read its
/// transcript again from the start when the session goes on (`claude
/// --resume`): where it was read up to is kept in
/// `control/transcripts.json` and the next daemon resumes there. (A run
/// left open mid-session is taken up again instead, and its transcript
/// read from the start: see `a_daemon_killed_mid_session_leaves_one_run`.)
#[test]
fn a_restarted_daemon_resumes_a_transcript_where_it_was_read_up_to() {
    let t = TempDir::new("transcript-resume");
    let d = start_by_hook(&t, &[]);
    let running = Running(&t);
    let transcript = t.join("session.jsonl");
    let line = serde_json::json!({"type": "user", "message": {"role": "user",
        "content": [{"type": "text", "text": "x".repeat(1000)}]}})
    .to_string();
    let text: String = std::iter::repeat_n(format!("{line}\n"), 8 * 1024).collect();
    std::fs::write(&transcript, &text).expect("transcript");
    let size = text.len() as u64;

    let before = bytes_read_by(d.pid);
    for event in ["SessionStart", "UserPromptSubmit", "PreToolUse"] {
        let (status, _) = timed_hook(
            &d,
            event,
            &session_payload("long", &transcript, event, "toolu_1"),
        );
        assert_eq!(status, 200);
    }
    wait_until("the transcript to be read whole", LONG, || {
        bytes_read_by(d.pid) >= before + size
    });
    let (status, _) = timed_hook(
        &d,
        "SessionEnd",
        &session_payload("long", &transcript, "SessionEnd", "toolu_1"),
    );
    assert_eq!(status, 200);
    drop(running);
    assert!(wait_gone(d.pid as i32, LONG), "the first daemon stopped");
    let kept = std::fs::read_to_string(bir_home(&t).join("control/transcripts.json"))
        .expect("the offsets were kept");
    assert!(kept.contains(&format!("\"line_end\":{size}")), "{kept}");

    // The session goes on with a new daemon.
    let d2 = start_by_hook(&t, &[]);
    let _running = Running(&t);
    for event in ["UserPromptSubmit", "PreToolUse"] {
        let (status, _) = timed_hook(
            &d2,
            event,
            &session_payload("long", &transcript, event, "toolu_2"),
        );
        assert_eq!(status, 200);
    }
    let log = bir_home(&t).join("logs/daemon.log");
    let said = format!("resuming at byte {size} read before");
    wait_until("the new daemon to resume the transcript", LONG, || {
        std::fs::read_to_string(&log).is_ok_and(|l| l.contains(&said))
    });
    assert!(
        bytes_read_by(d2.pid) < size / 2,
        "the new daemon read {} bytes of a {size}-byte transcript",
        bytes_read_by(d2.pid)
    );
}

/// The HTTP hooks' address (`control/hooks.json`, written by `bir install
/// --hooks http`): the daemon listens on its port, takes hook posts that
/// carry its hook token, refuses that token anywhere else, and honours
/// `bir off` for what Claude Code posts itself.
#[test]
fn http_hooks_reach_the_daemon_on_the_hook_port_with_the_hook_token_only() {
    let t = TempDir::new("daemon-hookaddr");
    let home = bir_home(&t);
    std::fs::create_dir_all(home.join("control")).expect("mkdir");
    for dir in [home.clone(), home.join("control")] {
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    }
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let hook_token = "c".repeat(64);
    let file = home.join("control/hooks.json");
    std::fs::write(
        &file,
        serde_json::json!({"port": port, "token": hook_token}).to_string(),
    )
    .expect("write hooks.json");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    // The daemon's kept port (`control/port`), which `bir install` chose.
    let kept = home.join("control/port");
    std::fs::write(&kept, format!("{port}\n")).expect("write port");
    std::fs::set_permissions(&kept, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let d = start_by_hook(&t, &[]);
    let _running = Running(&t);
    assert_eq!(port_of(&d), port, "the daemon listens on the hook port");
    let post = |path: &str, token: &str, body: &str| {
        format!(
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
    };
    let sessions = || raw(port, &request(&d, "GET", "/sessions", "", "")).1;
    // A hook post with the hook token is taken.
    let prompt = serde_json::json!({"session_id": "http-session", "cwd": "/tmp",
        "hook_event_name": "UserPromptSubmit", "prompt": "hi",
        "transcript_path": "/nonexistent/t.jsonl"})
    .to_string();
    assert_eq!(
        raw(port, &post("/hook/UserPromptSubmit", &hook_token, &prompt)).0,
        200
    );
    assert!(sessions().contains("http-session"), "{}", sessions());
    // The hook token opens nothing else.
    assert_eq!(raw(port, &post("/shutdown", &hook_token, "{}")).0, 401);
    assert_eq!(
        raw(port, &post("/proxy/register", &hook_token, "{}")).0,
        401
    );
    assert!(alive(d.pid as i32));
    // `BIR_OFF=1` in the session's environment: Claude Code puts it in the
    // hooks' X-Bir-Off header (an unset one is empty); nothing recorded.
    let with_off = |body: &str, value: &str| {
        format!(
            "POST /hook/UserPromptSubmit HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {hook_token}\r\nX-Bir-Off: {value}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
    };
    let env_off = prompt.replace("http-session", "env-off");
    assert_eq!(raw(port, &with_off(&env_off, "1")).0, 200);
    let env_on = prompt.replace("http-session", "env-unset");
    assert_eq!(raw(port, &with_off(&env_on, "")).0, 200);
    let listed = sessions();
    assert!(!listed.contains("env-off"), "{listed}");
    assert!(listed.contains("env-unset"), "{listed}");
    // `bir off`: Claude Code still posts; the daemon records nothing.
    let off = command(bir(), &t).arg("off").output().expect("bir off");
    assert!(off.status.success(), "{off:?}");
    let other = prompt.replace("http-session", "while-off");
    assert_eq!(
        raw(port, &post("/hook/UserPromptSubmit", &hook_token, &other)).0,
        200
    );
    assert!(!sessions().contains("while-off"), "{}", sessions());
}

/// Holds `n` connections to `port` open, each having sent one byte, and
/// opens another whenever the daemon closes one, until its stdin closes:
/// a local user trying to use up the daemon's places without the token.
const HOLDER: &str = r#"
import select, socket, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
def opened():
    try:
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"G")
        return s
    except OSError:
        return None
socks = [s for s in (opened() for _ in range(n)) if s]
print("ready", len(socks), flush=True)
while True:
    ready, _, _ = select.select(socks + [sys.stdin], [], [], 1.0)
    if sys.stdin in ready:
        break
    for s in ready:
        try:
            s.recv(4096)
        except OSError:
            pass
        socks.remove(s)
        s.close()
    while len(socks) < n:
        s = opened()
        if s is None:
            break
        socks.append(s)
    # Paces the reconnect loop: holding places, not waiting for an event.
    time.sleep(0.05)
"#;

/// One request with the daemon's token, sent by another process: prints
/// the answer's status line, or `closed` when the connection ended first.
const POSTER: &str = r#"
import socket, sys
port, token, body = int(sys.argv[1]), sys.argv[2], sys.argv[3].encode()
head = ("POST /hook/SessionStart HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAuthorization: Bearer %s\r\n"
        "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % (port, token, len(body)))
try:
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(head.encode() + body)
    answer = s.recv(4096)
except OSError:
    answer = b""
print(answer.decode(errors="replace").split("\r\n")[0] if answer else "closed", flush=True)
"#;

fn running_as_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Runs `python3 -c script args…`, as `uid` when given.
fn python(script: &str, args: &[String], uid: Option<u32>) -> Command {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new("python3");
    cmd.arg("-c").arg(script).args(args);
    if let Some(uid) = uid {
        cmd.uid(uid).gid(uid);
    }
    cmd
}

/// A [`HOLDER`] of `n` connections that has opened them.
struct Holder(std::process::Child);

impl Holder {
    fn start(port: u16, n: usize, uid: Option<u32>) -> Holder {
        let mut child = python(HOLDER, &[port.to_string(), n.to_string()], uid)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3");
        let mut line = String::new();
        let stdout = child.stdout.take().expect("stdout");
        std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line)
            .expect("holder's first line");
        assert_eq!(
            line.trim(),
            format!("ready {n}"),
            "the holder's connections"
        );
        Holder(child)
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        drop(self.0.stdin.take());
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A short session sent through `bir-hooks`: `calls` Bash calls, each
/// PreToolUse and PostToolUse, under session `session`.
fn hook_calls(t: &TempDir, session: &str, calls: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for i in 0..calls {
        let id = format!("toolu_held_{i}");
        for event in ["PreToolUse", "PostToolUse"] {
            let payload = serde_json::json!({
                "session_id": session,
                "transcript_path": "/nonexistent/transcript.jsonl",
                "cwd": "/tmp",
                "hook_event_name": event,
                "tool_name": "Bash",
                "tool_input": {"command": format!("echo {i}")},
                "tool_response": {"stdout": format!("{i}\n")},
                "tool_use_id": id,
            });
            let out = hook(t, event, &payload.to_string(), &[]);
            assert!(out.status.success(), "{out:?}");
        }
        ids.push(id);
    }
    ids
}

/// Every `ids` call has a step in the exported run `latest` once the
/// session ends.
fn assert_all_recorded(t: &TempDir, session: &str, ids: &[String]) {
    let end = serde_json::json!({"session_id": session, "cwd": "/tmp",
        "transcript_path": "/nonexistent/transcript.jsonl", "hook_event_name": "SessionEnd",
        "reason": "other"});
    let out = hook(t, "SessionEnd", &end.to_string(), &[]);
    assert!(out.status.success(), "{out:?}");
    let export = finished_export(t, LONG);
    let all = export.to_string();
    for id in ids {
        assert!(all.contains(id.as_str()), "call {id} lost: {all}");
    }
}

#[test]
fn another_user_can_neither_starve_the_daemon_nor_post_to_it() {
    if !running_as_root() {
        eprintln!("skipped: needs root to run a client as another uid");
        return;
    }
    let nobody = 65534;
    let t = TempDir::new("daemon-other-uid");
    let _running = Running(&t);
    let d = start_by_hook(&t, &[]);
    let port = port_of(&d);

    // Forty connections of another user that send one byte and come back
    // whenever they are closed: hooks still get through.
    let holder = Holder::start(port, 40, Some(nobody));
    let ids = hook_calls(&t, "it-session", 4);
    let status = command(bir(), &t).arg("status").output().expect("status");
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(
        text.contains(&format!("Recorder daemon: running at {}", d.url)),
        "{text}"
    );

    // The token is no key for another user.
    let intruder = serde_json::json!({"session_id": "intruder", "cwd": "/tmp",
        "transcript_path": "/nonexistent/t.jsonl", "hook_event_name": "SessionStart"});
    let said = python(
        POSTER,
        &[port.to_string(), d.token.clone(), intruder.to_string()],
        Some(nobody),
    )
    .output()
    .expect("poster");
    let said = String::from_utf8_lossy(&said.stdout);
    assert!(!said.contains(" 200 "), "another uid was served: {said}");
    drop(holder);
    let (status, sessions) = raw(port, &request(&d, "GET", "/sessions", "", ""));
    assert_eq!(status, 200, "{sessions}");
    assert!(!sessions.contains("intruder"), "{sessions}");
    assert_all_recorded(&t, "it-session", &ids);
}

#[test]
fn connections_without_a_token_do_not_take_the_places_of_hooks() {
    let t = TempDir::new("daemon-preauth");
    let _running = Running(&t);
    let d = start_by_hook(&t, &[]);
    // Our own uid (what a peer looks like where the OS names no owner):
    // more silent connections than places to serve, held all along.
    let _holder = Holder::start(port_of(&d), 40, None);
    let ids = hook_calls(&t, "it-session", 4);
    let status = command(bir(), &t).arg("status").output().expect("status");
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(
        text.contains(&format!("Recorder daemon: running at {}", d.url)),
        "{text}"
    );
    assert_all_recorded(&t, "it-session", &ids);
}

/// What reaches a terminal must carry no control character, whatever a
/// session, a proxy or a config file named.
fn assert_no_raw_controls(what: &str, out: &Output) {
    for (stream, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
        let text = String::from_utf8_lossy(bytes);
        assert!(
            !bytes
                .iter()
                .any(|b| matches!(b, 0x1b | 0x07 | 0x9b | b'\r')),
            "{what}: a raw control character on {stream}: {text:?}"
        );
    }
}

#[test]
fn no_command_prints_outside_text_raw() {
    let t = TempDir::new("daemon-escapes");
    let _running = Running(&t);
    let session = "s\u{1b}]0;pwned\u{7}";
    let project = t.join("proj\u{1b}[2J");
    std::fs::create_dir_all(&project).expect("project dir");
    let cwd = project.to_str().expect("utf-8 path").to_owned();
    let server = "srv\u{1b}]0;title\u{7}";
    std::fs::create_dir_all(t.join("home")).expect("home");
    let claude = serde_json::json!({
        "mcpServers": {server: {"command": "/nonexistent/\u{1b}[31mcmd\u{7}"}},
        "projects": {cwd.as_str(): {"mcpServers": {"local\u{1b}[1m": {"command": "x"}}}},
    });
    std::fs::write(t.join("home/.claude.json"), claude.to_string()).expect("claude.json");

    let event = |name: &str, extra: serde_json::Value| {
        let mut payload = serde_json::json!({"session_id": session, "cwd": cwd,
            "transcript_path": "/nonexistent/\u{1b}[2J.jsonl", "hook_event_name": name});
        if let (Some(p), Some(e)) = (payload.as_object_mut(), extra.as_object()) {
            p.extend(e.clone());
        }
        let out = hook(&t, name, &payload.to_string(), &[]);
        assert!(out.status.success(), "{out:?}");
    };
    event("SessionStart", serde_json::json!({}));
    let d = wait_for_daemon(&t, None);
    let register = serde_json::json!({"proxyId": "p-1", "sessionId": session,
        "serverName": server, "pid": std::process::id(), "cwd": cwd,
        "birVersion": d.version});
    let (status, text) = raw(
        port_of(&d),
        &request(&d, "POST", "/proxy/register", "", &register.to_string()),
    );
    assert_eq!(status, 200, "{text}");
    let tool = serde_json::json!({"tool_name": "mcp__srv\u{1b}[31m__echo",
        "tool_input": {"text": "\u{1b}]0;x\u{7}"}, "tool_response": "\u{1b}[2J",
        "tool_use_id": "toolu_\u{1b}[1m"});
    event("PreToolUse", tool.clone());
    event("PostToolUse", tool);

    let walk = |when: &str| {
        let commands: [&[&str]; 6] = [
            &["status"],
            &["doctor", "--timeout-ms", "2000"],
            &["runs"],
            &["runs", "show", "latest"],
            &["investigate", "latest"],
            &["runs", "export", "latest"],
        ];
        let mut said = String::new();
        for args in commands {
            let out = command(bir(), &t)
                .args(args)
                .current_dir(&project)
                .output()
                .expect("bir");
            assert_no_raw_controls(&format!("{when}: bir {}", args.join(" ")), &out);
            said.push_str(&String::from_utf8_lossy(&out.stdout));
        }
        said
    };
    let live = walk("live session");
    // The outside text is shown, escaped: the check above looked at it.
    assert!(live.contains("s\\u{1b}]0;pwned\\u{7}"), "{live}");
    assert!(live.contains("srv\\u{1b}]0;title\\u{7}"), "{live}");
    assert!(live.contains("proj\\u{1b}[2J"), "{live}");
    event("SessionEnd", serde_json::json!({"reason": "other"}));
    finished_export(&t, LONG);
    walk("ended session");
}

/// The run's own session id is an identifier: shown in its header, and
/// kept in clear under a `session_id`-like key of what the run stored
/// (a tool's input, here), as `bir runs show` and `export` give it back.
/// Another value under such a key (a web session's token) is redacted.
#[test]
fn a_runs_own_session_id_is_never_redacted_and_a_web_session_id_is() {
    let t = TempDir::new("daemon-own-session-id");
    let _running = Running(&t);
    let session = "5f1c9e2a-7b3d-4e8f-a16c-0d2b9e4f7a31";
    let web = "s%3Aq8Zr3kP9xLmN4vR7tY1wZ6bC3dF5gH0w";
    let event = |name: &str, extra: serde_json::Value| {
        let mut payload = serde_json::json!({"session_id": session, "cwd": "/tmp",
            "transcript_path": "/nonexistent/t.jsonl", "hook_event_name": name});
        if let (Some(p), Some(e)) = (payload.as_object_mut(), extra.as_object()) {
            p.extend(e.clone());
        }
        let out = hook(&t, name, &payload.to_string(), &[]);
        assert!(out.status.success(), "{out:?}");
    };
    event("SessionStart", serde_json::json!({}));
    wait_for_daemon(&t, None);
    let tool = serde_json::json!({"tool_name": "WebFetch", "tool_use_id": "toolu_own_1",
        "tool_input": {"url": "https://example.com/", "note": {"session_id": session},
            "cookieJar": {"sessionId": web}, "owner": {"sessionId": session}},
        "tool_response": {"sessionId": session, "web": {"session_id": web}}});
    event("PreToolUse", tool.clone());
    event("PostToolUse", tool);
    event("SessionEnd", serde_json::json!({"reason": "other"}));
    let doc = finished_export(&t, LONG);
    let text = doc.to_string();
    assert!(!text.contains(web), "a web session id is stored: {text}");
    let step = doc["steps"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["type"] == "tool_selected"))
        .cloned()
        .unwrap_or_else(|| panic!("no tool_selected step: {text}"));
    assert_eq!(step["input"]["note"]["session_id"], session, "{step}");
    assert_eq!(step["input"]["owner"]["sessionId"], session, "{step}");
    assert!(!text.contains("[REDACTED:known]"), "{text}");
    let shown = command(bir(), &t)
        .args(["runs", "show", "latest", "--full"])
        .output()
        .expect("show");
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(
        shown.matches(session).count() >= 2,
        "header and the stored input both show it: {shown}"
    );
    assert!(!shown.contains(web), "{shown}");
}

/// A live process of ours that is not a daemon, standing in for whatever
/// process the system gave a dead daemon's pid to.
struct Bystander(std::process::Child);

impl Bystander {
    fn start() -> Bystander {
        Bystander(Command::new("sleep").arg("300").spawn().expect("sleep"))
    }

    fn still_running(&mut self) -> bool {
        matches!(self.0.try_wait(), Ok(None))
    }
}

impl Drop for Bystander {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_stale_file_whose_pid_was_reused_is_neither_posted_to_nor_signalled() {
    // This build's version and a live pid of ours: every check of the file
    // passes, but the pid is a bystander's now.
    let t = TempDir::new("daemon-reused-pid");
    let _running = Running(&t);
    let trap = Trap::new();
    let mut bystander = Bystander::start();
    plant(
        &t,
        &serde_json::json!({"url": trap.url(), "token": "f".repeat(64),
            "pid": bystander.0.id(), "version": version_of_build(), "startedAt": 1})
        .to_string(),
    );
    let d = start_by_hook(&t, &[]);
    assert!(
        !trap.was_contacted(),
        "the token went to a reused pid's port"
    );
    assert_ne!(d.url, trap.url());
    assert_ne!(d.pid, bystander.0.id());
    assert!(bystander.still_running());

    // Another build's file naming the bystander: `bir down` leaves it be.
    let t = TempDir::new("daemon-reused-pid-down");
    let trap = Trap::new();
    plant(
        &t,
        &serde_json::json!({"url": trap.url(), "token": "f".repeat(64),
            "pid": bystander.0.id(), "version": "0.0.1+old", "startedAt": 1})
        .to_string(),
    );
    let down = command(bir(), &t).arg("down").output().expect("down");
    assert!(down.status.success(), "{down:?}");
    assert!(bystander.still_running(), "bir down signalled a bystander");
    assert!(!trap.was_contacted());
    let said = String::from_utf8_lossy(&down.stdout);
    assert!(said.contains("another process"), "{said}");
    assert!(!discovery_path(&t).exists(), "the stale file stays");
}

#[test]
fn nothing_is_sent_to_a_listener_of_another_user() {
    if !running_as_root() {
        eprintln!("skipped: needs root to listen as another uid");
        return;
    }
    // Another user's listener where BIR_CONTROL_URL points: it gets
    // neither the token nor a payload.
    let listener = r#"
import os, socket, sys
l = socket.socket()
# Outside the ephemeral range, like the tests' traps.
for i in range(5000):
    try:
        l.bind(("127.0.0.1", 10000 + (os.getpid() * 13 + i * 7) % 10000))
        break
    except OSError:
        pass
l.listen(8)
print(l.getsockname()[1], flush=True)
l.settimeout(30)
got = b""
try:
    while True:
        c, _ = l.accept()
        c.settimeout(5)
        try:
            while True:
                b = c.recv(4096)
                if not b:
                    break
                got += b
        except OSError:
            pass
        c.close()
        print("got", len(got), flush=True)
except OSError:
    print("done", len(got), flush=True)
"#;
    let mut other = python(listener, &[], Some(65534))
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(
        other.stdout.take().expect("stdout"),
    ));
    let port = lines.next().expect("port").expect("line");
    let t = TempDir::new("daemon-other-listener");
    let url = format!("http://127.0.0.1:{}", port.trim());
    let secret = "9".repeat(64);
    let out = hook(
        &t,
        "UserPromptSubmit",
        &payload("UserPromptSubmit"),
        &[("BIR_CONTROL_URL", &url), ("BIR_CONTROL_TOKEN", &secret)],
    );
    assert!(out.status.success() && out.stdout.is_empty(), "{out:?}");
    let status = command(bir(), &t)
        .arg("status")
        .env("BIR_CONTROL_URL", &url)
        .env("BIR_CONTROL_TOKEN", &secret)
        .output()
        .expect("status");
    assert!(status.status.success(), "{status:?}");
    let _ = other.kill();
    let _ = other.wait();
    let heard: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(
        heard.iter().all(|l| l.ends_with(" 0")),
        "another user's listener was sent bytes: {heard:?}"
    );
}

#[test]
fn the_daemon_keeps_its_port_and_doctor_names_who_took_it() {
    let t = TempDir::new("daemon-port");
    let _running = Running(&t);
    let first = start_by_hook(&t, &[]);
    let kept = port_of(&first);
    let down = command(bir(), &t).arg("down").output().expect("down");
    assert!(down.status.success(), "{down:?}");
    assert!(wait_gone(first.pid as i32, LONG));
    let second = start_by_hook(&t, &[]);
    assert_eq!(port_of(&second), kept, "a restart moved the daemon");
    let down = command(bir(), &t).arg("down").output().expect("down");
    assert!(down.status.success(), "{down:?}");
    assert!(wait_gone(second.pid as i32, LONG));

    // Another program holds the port meanwhile: the daemon still starts,
    // and doctor says the port is taken and by whom.
    let holder = TcpListener::bind(("127.0.0.1", kept)).expect("take the port");
    let third = start_by_hook(&t, &[]);
    assert_ne!(port_of(&third), kept);
    let doctor = command(bir(), &t).arg("doctor").output().expect("doctor");
    let text = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        text.contains(&format!("PROBLEM: port {kept}"))
            && text.contains("another program of yours"),
        "{text}"
    );
    assert!(!doctor.status.success(), "{text}");
    drop(holder);
}

/// The recorder daemon is killed (SIGKILL) in the middle of a session,
/// while a call runs; the next hook starts another daemon. The session is
/// ONE run: the first daemon's journal continued, every call once with
/// both records, the calls no daemon heard recovered from the transcript.
#[test]
fn a_daemon_killed_mid_session_leaves_one_run() {
    let t = TempDir::new("daemon-killed");
    let transcript = t.join("killed.jsonl");
    let at = |secs: u32| format!("2027-01-15T08:00:{secs:02}.250Z");
    let mut rows = vec![serde_json::json!({"type": "user", "timestamp": at(0),
        "message": {"role": "user", "content": "three shells"}})];
    for (n, id) in ["toolu_k1", "toolu_k2", "toolu_k3"].iter().enumerate() {
        let secs = 1 + 2 * n as u32;
        rows.push(
            serde_json::json!({"type": "assistant", "timestamp": at(secs),
            "message": {"role": "assistant", "content": [
                {"type": "text", "text": format!("Shell {n}.")},
                {"type": "tool_use", "id": id, "name": "Bash", "input": {"command": "true"}}]}}),
        );
        rows.push(
            serde_json::json!({"type": "user", "timestamp": at(secs + 1),
            "toolUseResult": {"stdout": format!("out {n}")},
            "message": {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": id, "content": "x", "is_error": false}]}}),
        );
    }
    rows.push(serde_json::json!({"type": "assistant", "timestamp": at(59),
        "message": {"role": "assistant", "content": [{"type": "text", "text": "Three."}]}}));
    let text: String = rows.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(&transcript, text).expect("transcript");
    let payload = |event: &str, extra: serde_json::Value| {
        let mut p: serde_json::Value =
            serde_json::from_str(&session_payload("killed", &transcript, event, "")).expect("json");
        if let (Some(p), serde_json::Value::Object(extra)) = (p.as_object_mut(), extra) {
            p.extend(extra);
        }
        p.to_string()
    };

    let first = {
        let out = hook(
            &t,
            "SessionStart",
            &payload("SessionStart", serde_json::json!({})),
            &[],
        );
        assert!(out.status.success(), "{out:?}");
        wait_for_daemon(&t, Some(std::process::id()))
    };
    let running = Running(&t);
    let prompt = payload(
        "UserPromptSubmit",
        serde_json::json!({"prompt": "three shells"}),
    );
    assert_eq!(timed_hook(&first, "UserPromptSubmit", &prompt).0, 200);
    let call =
        |id: &str| serde_json::json!({"tool_use_id": id, "tool_response": {"stdout": "out 0"}});
    for event in ["PreToolUse", "PostToolUse"] {
        let body = payload(event, call("toolu_k1"));
        assert_eq!(timed_hook(&first, event, &body).0, 200);
    }
    let body = payload("PreToolUse", call("toolu_k2"));
    assert_eq!(timed_hook(&first, "PreToolUse", &body).0, 200);
    // The first daemon wrote what it heard to its journal.
    let runs = bir_home(&t).join("runs");
    let journal_holds = |what: &str| {
        std::fs::read_dir(&runs).ok().is_some_and(|d| {
            d.flatten().any(|e| {
                std::fs::read(e.path())
                    .is_ok_and(|b| b.windows(what.len()).any(|w| w == what.as_bytes()))
            })
        })
    };
    wait_until("the first daemon to write its journal", LONG, || {
        journal_holds("toolu_k2")
    });
    std::mem::forget(running);
    // SAFETY: kill(2) on the pid this test's daemon published.
    unsafe {
        libc::kill(first.pid as i32, libc::SIGKILL);
    }
    assert!(
        wait_gone(first.pid as i32, LONG),
        "the daemon was not killed"
    );

    // toolu_k2's PostToolUse and all of toolu_k3 reached no daemon. The
    // turn's Stop (a command hook here) starts a new one.
    let stop = payload(
        "Stop",
        serde_json::json!({"last_assistant_message": "Three."}),
    );
    let out = hook(&t, "Stop", &stop, &[]);
    assert!(out.status.success(), "{out:?}");
    let second = wait_for_daemon(&t, Some(first.pid));
    let _running = Running(&t);
    let end = payload("SessionEnd", serde_json::json!({"reason": "other"}));
    assert_eq!(timed_hook(&second, "SessionEnd", &end).0, 200);

    let listed = wait_for("a finished run in `bir runs --json`", LONG, || {
        let out = command(bir(), &t).args(["runs", "--json"]).output().ok()?;
        let listed: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        listed
            .iter()
            .any(|r| r["state"] == "finished")
            .then_some(listed)
    });
    assert_eq!(listed.len(), 1, "one run for the session: {listed:#?}");
    let id = listed[0]["id"].as_str().expect("id");
    let out = command(bir(), &t)
        .args(["runs", "export", id])
        .output()
        .expect("export");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("export json");
    let steps = doc["steps"].as_array().expect("steps");
    for id in ["toolu_k1", "toolu_k2", "toolu_k3"] {
        let kinds: Vec<&str> = steps
            .iter()
            .filter(|s| s["toolUseId"] == id)
            .filter_map(|s| s["type"].as_str())
            .collect();
        assert_eq!(
            kinds,
            ["tool_selected", "tool_response"],
            "{id}: {steps:#?}"
        );
    }
    let recovered = |id: &str, kind: &str| {
        steps
            .iter()
            .any(|s| s["toolUseId"] == id && s["type"] == kind && s["recovered"] == true)
    };
    assert!(!recovered("toolu_k1", "tool_response"));
    assert!(recovered("toolu_k2", "tool_response"));
    assert!(recovered("toolu_k3", "tool_selected") && recovered("toolu_k3", "tool_response"));
    assert_eq!(doc["turns"].as_array().map(Vec::len), Some(1), "{doc:#}");
}
