//! The recorder daemon's Unix socket (the Claude Code mod's link), through
//! the real binary: where it is bound (a private base, never a loose or
//! symlinked one), a stale socket replaced and removed at exit, the
//! health marker, the 409 for a second mod instance, the socket's own
//! routes only, a peer of another uid refused, and the mod's words landing
//! in the bound run the hooks tell (one step per call).
//!
//! No assertion depends on timing: every wait polls with a generous
//! deadline; every daemon started here is stopped by [`Daemon`]'s drop.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use super::record::export;
use super::support::{TempDir, alive, bir, command, wait_for, wait_gone};

const LONG: Duration = Duration::from_secs(30);

/// A private directory (0700) inside `t`.
fn private_dir(t: &TempDir, name: &str) -> PathBuf {
    let dir = t.join(name);
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    dir
}

/// `bir daemon` for `t`'s home, with `env`; stopped (SIGTERM) on drop.
struct Daemon {
    child: Child,
    disco: Value,
}

impl Daemon {
    fn start(t: &TempDir, env: &[(&str, &Path)]) -> Daemon {
        let mut cmd = command(bir(), t);
        cmd.arg("daemon")
            .env("BIR_SERVICE_URL", "off")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut daemon = Daemon {
            child: cmd.spawn().expect("spawn daemon"),
            disco: Value::Null,
        };
        let path = t.join("home/.baseinstrunner/control/daemon.json");
        let pid = u64::from(daemon.child.id());
        // The drop stops the daemon if this fails.
        daemon.disco = wait_for("the daemon's discovery file", LONG, || {
            std::fs::read(&path)
                .ok()
                .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
                .filter(|d| d["pid"].as_u64() == Some(pid))
        });
        daemon
    }

    fn socket(&self) -> PathBuf {
        PathBuf::from(
            self.disco["socket"]
                .as_str()
                .expect("a socket is published"),
        )
    }

    fn stop(mut self) {
        let pid = self.child.id() as i32;
        // SAFETY: kill(2) on our own child.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
        let _ = self.child.wait();
        assert!(wait_gone(pid, LONG));
    }

    /// A request over loopback TCP with the daemon's token.
    fn tcp(&self, method: &str, path: &str, body: &str) -> (u16, String) {
        let url = self.disco["url"].as_str().expect("url");
        let host = url.trim_start_matches("http://");
        let token = self.disco["token"].as_str().expect("token");
        let mut s = TcpStream::connect(host).expect("connect");
        s.set_read_timeout(Some(LONG)).expect("timeout");
        let req = format!(
            "{method} {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        s.write_all(req.as_bytes()).expect("write");
        read_answer(&mut s)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if alive(self.child.id() as i32) {
            // SAFETY: kill(2) on our own child.
            unsafe {
                libc::kill(self.child.id() as i32, libc::SIGTERM);
            }
            let _ = self.child.wait();
        }
    }
}

/// An answer's status and body, read to its end.
fn read_answer(s: &mut impl Read) -> (u16, String) {
    let (status, text) = super::support::http::read_answer(s);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

/// One request over the socket at `path` (`headers`: extra lines).
fn over_socket(path: &Path, method: &str, route: &str, headers: &str, body: &str) -> (u16, String) {
    let mut s = UnixStream::connect(path).expect("connect to the socket");
    s.set_read_timeout(Some(LONG)).expect("timeout");
    let req = format!(
        "{method} {route} HTTP/1.1\r\nHost: bir\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{headers}\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).expect("write");
    read_answer(&mut s)
}

fn batch(session: &str, events: Value) -> String {
    json!({"sessionId": session, "events": events}).to_string()
}

#[test]
fn the_socket_is_private_marked_and_serves_only_the_mod() {
    let t = TempDir::new("modsock");
    let run = private_dir(&t, "run");
    let daemon = Daemon::start(&t, &[("XDG_RUNTIME_DIR", &run)]);
    let socket = daemon.socket();
    assert!(socket.starts_with(run.join("bir")), "{}", socket.display());
    assert!(socket.as_os_str().len() <= 100);
    let dir_mode = std::fs::metadata(run.join("bir")).expect("dir").mode() & 0o777;
    assert_eq!(dir_mode, 0o700);
    let sock_mode = std::fs::metadata(&socket).expect("socket").mode() & 0o777;
    assert_eq!(sock_mode, 0o600);

    // The health marker tells a live bir daemon.
    let (status, body) = over_socket(&socket, "GET", "/health", "", "");
    assert_eq!(status, 200, "{body}");
    let health: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(health["link"], "bir-daemon");
    assert_eq!(health["pid"].as_u64(), Some(u64::from(daemon.child.id())));

    // The first mod instance holds a session; a second one gets 409.
    let one = batch(
        "s-1",
        json!([{"seq": 1, "kind": "session.start", "e": {"cwd": "/p"}}]),
    );
    let (status, _) = over_socket(&socket, "POST", "/mod/events", "x-bir-mod: a\r\n", &one);
    assert_eq!(status, 200);
    let (status, body) = over_socket(&socket, "POST", "/mod/events", "x-bir-mod: b\r\n", &one);
    assert_eq!(status, 409, "{body}");
    let (status, _) = over_socket(&socket, "POST", "/mod/events", "x-bir-mod: a\r\n", &one);
    assert_eq!(status, 200, "the holder goes on");
    let other = batch("s-2", json!([]));
    let (status, _) = over_socket(&socket, "POST", "/mod/events", "x-bir-mod: b\r\n", &other);
    assert_eq!(status, 200, "another session is b's to hold");

    // Only the mod's routes: no shutdown, no hooks over the socket; and the
    // socket's own Host and no Origin, as on TCP.
    let (status, _) = over_socket(&socket, "POST", "/shutdown", "", "{}");
    assert_eq!(status, 404);
    let (status, _) = over_socket(&socket, "POST", "/hook/Stop", "", "{}");
    assert_eq!(status, 404);
    let (status, _) = over_socket(&socket, "POST", "/mod/events", "Origin: null\r\n", &other);
    assert_eq!(status, 403);
    let (status, _) = over_socket(&socket, "POST", "/mod/events", "", "not json");
    assert_eq!(status, 400);
    // And the TCP side serves no mod route.
    let (status, _) = daemon.tcp("POST", "/mod/events", &other);
    assert_eq!(status, 404);
    daemon.stop();
    assert!(!socket.exists(), "the socket is removed at exit");
}

#[test]
fn a_stale_socket_is_replaced_and_loose_or_linked_bases_are_passed_over() {
    let t = TempDir::new("modstale");
    let run = private_dir(&t, "run");
    let first = Daemon::start(&t, &[("XDG_RUNTIME_DIR", &run)]);
    let socket = first.socket();
    first.stop();
    // A socket left by a dead process at the path.
    drop(UnixListener::bind(&socket).expect("plant a stale socket"));
    assert!(socket.exists());
    let second = Daemon::start(&t, &[("XDG_RUNTIME_DIR", &run)]);
    assert_eq!(second.socket(), socket);
    let (status, _) = over_socket(&socket, "GET", "/health", "", "");
    assert_eq!(status, 200, "the stale socket was replaced by a live one");
    second.stop();

    // A group-writable run dir is passed over: Claude's config dir is used.
    let loose = t.join("loose");
    std::fs::create_dir_all(&loose).expect("mkdir");
    std::fs::set_permissions(&loose, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let config = private_dir(&t, "claude");
    let daemon = Daemon::start(
        &t,
        &[("XDG_RUNTIME_DIR", &loose), ("CLAUDE_CONFIG_DIR", &config)],
    );
    assert!(
        daemon.socket().starts_with(&config),
        "{}",
        daemon.socket().display()
    );
    assert!(
        !loose.join("bir").exists(),
        "nothing was made in the loose dir"
    );
    daemon.stop();

    // A symlinked base too; with no usable base there is no socket, and
    // the daemon still serves TCP.
    let link = t.join("link");
    std::os::unix::fs::symlink(&run, &link).expect("symlink");
    let daemon = Daemon::start(
        &t,
        &[("XDG_RUNTIME_DIR", &link), ("CLAUDE_CONFIG_DIR", &loose)],
    );
    assert!(daemon.disco.get("socket").is_none(), "{}", daemon.disco);
    let (status, _) = daemon.tcp("GET", "/health", "");
    assert_eq!(status, 200);
    daemon.stop();
}

#[test]
fn a_peer_of_another_uid_is_refused() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!(
            "skipped: a_peer_of_another_uid_is_refused needs root to run a client as another uid"
        );
        return;
    }
    let t = TempDir::new("modpeer");
    let run = private_dir(&t, "run");
    let daemon = Daemon::start(&t, &[("XDG_RUNTIME_DIR", &run)]);
    let socket = daemon.socket();
    let client = r#"
import socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1])
except OSError as e:
    print("connect-refused", e.errno); sys.exit(0)
try:
    s.sendall(b"GET /health HTTP/1.1\r\nHost: bir\r\n\r\n")
except OSError:
    pass  # refused before it was read: the answer is still there
print(s.recv(4096).decode(errors="replace").split("\r\n")[0])
"#;
    let as_nobody = |path: &Path| {
        use std::os::unix::process::CommandExt;
        let out = std::process::Command::new("python3")
            .arg("-c")
            .arg(client)
            .arg(path)
            .uid(65534)
            .gid(65534)
            .output()
            .expect("python3 as nobody");
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    };
    // As set up: the directory (0700) keeps the other user out.
    let said = as_nobody(&socket);
    assert!(said.starts_with("connect-refused"), "{said}");
    // Opened on purpose (the test loosens the modes after the bind): the
    // peer's uid is still refused.
    for (p, mode) in [(t.path(), 0o711), (run.as_path(), 0o711)] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }
    std::fs::set_permissions(run.join("bir"), std::fs::Permissions::from_mode(0o711))
        .expect("chmod");
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).expect("chmod");
    let said = as_nobody(&socket);
    assert!(said.contains("403"), "another uid got: {said}");
    let (status, _) = over_socket(&socket, "GET", "/health", "", "");
    assert_eq!(status, 200, "our own uid still gets in");
    daemon.stop();
}

#[test]
fn the_mods_words_and_answer_land_in_the_run_the_hooks_tell() {
    let t = TempDir::new("modrun");
    let run = private_dir(&t, "run");
    let daemon = Daemon::start(&t, &[("XDG_RUNTIME_DIR", &run)]);
    let socket = daemon.socket();
    let session = "mod-it-session";
    let hook = |event: &str, extra: Value| {
        let mut payload = json!({
            "session_id": session, "cwd": "/p", "hook_event_name": event,
            "transcript_path": "/nonexistent/t.jsonl",
        });
        if let (Some(p), Some(e)) = (payload.as_object_mut(), extra.as_object()) {
            p.extend(e.clone());
        }
        let (status, body) = daemon.tcp("POST", &format!("/hook/{event}"), &payload.to_string());
        assert_eq!(status, 200, "{event}: {body}");
    };
    let post = |events: Value| {
        let (status, body) = over_socket(
            &socket,
            "POST",
            "/mod/events",
            "x-bir-mod: m\r\n",
            &batch(session, events),
        );
        assert_eq!(status, 200, "{body}");
    };
    let row = |uuid: &str, kind: &str, door: &str, content: Value| json!({"uuid": uuid, "door": door, "message": {"type": kind, "content": content}});
    hook("SessionStart", json!({"source": "startup"}));
    hook("UserPromptSubmit", json!({"prompt": "echo hi"}));
    // The mod's rows come first (as on the real host: the row is appended
    // before the tool runs), then the same call through the hooks.
    let words = [
        json!({"seq": 1, "kind": "session.append", "e": row("u1", "user", "prompt", json!([{"type": "text", "text": "echo hi"}]))}),
        json!({"seq": 2, "kind": "turn.step", "e": {"turnId": "t", "index": 0, "model": "claude-test-1", "messageCount": 1}}),
        json!({"seq": 3, "kind": "session.append", "e": row("u2", "assistant", "response", json!([{"type": "thinking", "thinking": "echo fits"}]))}),
        json!({"seq": 4, "kind": "session.append", "e": row("u3", "assistant", "response", json!([{"type": "text", "text": "Calling echo."}]))}),
        json!({"seq": 5, "kind": "session.append", "e": row("u4", "assistant", "response", json!([{"type": "tool_use", "id": "toolu_m1", "name": "Bash", "input": {"command": "echo hi"}}]))}),
    ];
    post(json!(words));
    // A replayed post changes nothing (seq and uuid).
    post(json!(words));
    let tool = json!({"tool_name": "Bash", "tool_input": {"command": "echo hi"}, "tool_use_id": "toolu_m1"});
    hook("PreToolUse", tool.clone());
    let mut done = tool.clone();
    done["tool_response"] = json!({"stdout": "hi"});
    hook("PostToolUse", done);
    post(json!([
        {"seq": 6, "kind": "session.append", "e": row("u5", "user", "tool-result", json!([{"type": "tool_result", "tool_use_id": "toolu_m1", "content": "hi"}]))},
        {"seq": 7, "kind": "session.append", "e": row("u6", "assistant", "response", json!([{"type": "text", "text": "It said: hi"}]))},
        {"seq": 8, "kind": "turn.complete", "e": {"turnId": "t", "reason": "answer", "text": "It said: hi"}},
    ]));
    hook(
        "Stop",
        json!({"last_assistant_message": "It said: hi", "stop_hook_active": false}),
    );
    hook("SessionEnd", json!({"reason": "other"}));
    daemon.stop();

    let doc = export(&t, "latest");
    let steps = doc["steps"].as_array().expect("steps");
    let calls: Vec<&Value> = steps
        .iter()
        .filter(|s| s["toolUseId"] == "toolu_m1")
        .collect();
    assert_eq!(
        calls.len(),
        2,
        "one tool_selected + one tool_response: {steps:?}"
    );
    for step in &calls {
        assert_eq!(
            step["context"], "[thinking] echo fits\n\nCalling echo.",
            "the mod's words, live: {step}"
        );
    }
    let answers: Vec<&Value> = steps
        .iter()
        .filter(|s| s["type"] == "final_answer")
        .map(|s| &s["output"])
        .collect();
    assert_eq!(answers, [&json!("It said: hi")], "one answer for the turn");
    let events = doc["events"].as_array().expect("events");
    let links = events.iter().filter(|e| e["name"] == "ModLink").count();
    assert_eq!(
        links, 1,
        "the run says once that the mod link was active: {events:?}"
    );
    let model = [&doc["run"]["metadata"]["model"], &doc["finish"]["model"]];
    assert!(
        model.contains(&&json!("claude-test-1")),
        "model from turn.step: {model:?}"
    );
}

#[test]
fn the_mod_computes_the_socket_path_the_daemon_binds() {
    let has_node = std::process::Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_node {
        eprintln!("skipped: the_mod_computes_the_socket_path_the_daemon_binds needs node");
        return;
    }
    let t = TempDir::new("modpath");
    let run = private_dir(&t, "run");
    let config = private_dir(&t, "claude");
    let module = Path::new(env!("CARGO_MANIFEST_DIR")).join("mod/bir-mod/hooks/bir.js");
    let copy = t.join("bir.mjs");
    std::fs::copy(&module, &copy).expect("copy the module");
    let bir_home = t.join("home/.baseinstrunner");
    let ask_node = |env: Value| {
        let script = format!(
            "import({:?}).then(m => console.log(JSON.stringify(m.socketCandidates({env}))))",
            copy.display().to_string()
        );
        let out = std::process::Command::new("node")
            .arg("-e")
            .arg(script)
            .output()
            .expect("node");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<Vec<String>>(&out.stdout).expect("a list")
    };
    // The run dir first, as the daemon chose it.
    let daemon = Daemon::start(&t, &[("XDG_RUNTIME_DIR", &run)]);
    let mine = ask_node(json!({
        "XDG_RUNTIME_DIR": run, "HOME": t.join("home"), "BIR_HOME": bir_home,
    }));
    assert_eq!(mine.first().map(PathBuf::from), Some(daemon.socket()));
    daemon.stop();
    // No run dir: Claude's config dir; BIR_HOME defaulting to HOME's.
    let daemon = Daemon::start(&t, &[("CLAUDE_CONFIG_DIR", &config)]);
    let mine = ask_node(json!({"CLAUDE_CONFIG_DIR": config, "HOME": t.join("home")}));
    assert_eq!(mine, [daemon.socket().display().to_string()]);
    daemon.stop();
}
