//! Whole sessions of other agents through the real `bir-hooks --host
//! <agent>` and daemon: each agent's fixture session
//! (`tests/fixtures/hosts/<agent>/session.jsonl`, payloads as observed on
//! Codex CLI 0.169.0 and Gemini CLI 0.61.0, or as documented for Copilot
//! CLI and Cursor) is fed hook by hook the
//! way the agent runs its hooks (`sh -c`, payload on stdin), and `bir runs
//! show` must tell the session in order: prompt, the model's words, every
//! step, the answer. Also: `bir install --client <agent>` registers hooks
//! that `bir uninstall --client <agent>` takes back byte for byte.

use std::io::Write;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

use super::support::{TempDir, bir, command, finished_export, wait_gone, wait_until};

const LONG: Duration = Duration::from_secs(60);

fn hooks_link(t: &TempDir) -> PathBuf {
    let link = t.join("bir-hooks");
    if !link.exists() {
        symlink(bir(), &link).expect("symlink bir-hooks");
    }
    link
}

fn hook(t: &TempDir, host: &str, event: &str, payload: &str) -> Output {
    let mut cmd = command("sh", t);
    cmd.arg("-c")
        .arg(format!(
            "'{}' --host {host} {event}",
            hooks_link(t).display()
        ))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn hook");
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(payload.as_bytes());
    }
    child.wait_with_output().expect("hook output")
}

/// Stops the temp home's daemon when the test ends.
struct Running<'a>(&'a TempDir);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        let file = self.0.join("home/.baseinstrunner/control/daemon.json");
        let pid = std::fs::read(&file)
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .and_then(|v| v["pid"].as_i64());
        if let Some(pid) = pid {
            // SAFETY: kill(2) on the pid this test's daemon published.
            unsafe {
                libc::kill(pid as i32, libc::SIGTERM);
            }
            wait_gone(pid as i32, LONG);
        }
    }
}

fn fixture(host: &str, name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/hosts")
        .join(host)
        .join(name)
}

/// Feeds `host`'s fixture session (its transcript, if any, copied into the
/// temp dir) and returns `bir runs show` of the finished run.
fn session(t: &TempDir, host: &str, transcript: Option<&str>) -> String {
    session_by(t, host, transcript, None, &|event, payload| {
        Some(hook(t, host, event, payload))
    })
}

/// [`session`], each hook run by `run` (None: the agent would run no hook
/// of bir's for that event), the payloads' `cwd` set to `cwd` when given.
fn session_by(
    t: &TempDir,
    host: &str,
    transcript: Option<&str>,
    cwd: Option<&Path>,
    run: &dyn Fn(&str, &str) -> Option<Output>,
) -> String {
    let transcript_path = t.join("transcript.jsonl");
    if let Some(name) = transcript {
        std::fs::copy(fixture(host, name), &transcript_path).expect("transcript");
    }
    // The daemon first (a hook that has to start it may give up on a busy
    // machine, as it should: the session goes on unrecorded); a session
    // that only starts leaves no run.
    let warm = hook(
        t,
        "codex",
        "SessionStart",
        r#"{"session_id":"warm-up","hook_event_name":"SessionStart"}"#,
    );
    assert_eq!(warm.status.code(), Some(0));
    let discovery = t.join("home/.baseinstrunner/control/daemon.json");
    // The hook starts the daemon in the background; asking again is what
    // a later hook would do.
    wait_until("the daemon", LONG, || {
        discovery.exists() || {
            let _ = hook(
                t,
                "codex",
                "SessionStart",
                r#"{"session_id":"warm-up","hook_event_name":"SessionStart"}"#,
            );
            false
        }
    });
    let text = std::fs::read_to_string(fixture(host, "session.jsonl")).expect("fixture");
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let line = line.replace("@TRANSCRIPT@", &transcript_path.display().to_string());
        let mut row: serde_json::Value = serde_json::from_str(&line).expect("row");
        if let Some(cwd) = cwd {
            row["payload"]["cwd"] = serde_json::json!(cwd.display().to_string());
        }
        let event = row["event"].as_str().expect("event");
        let Some(out) = run(event, &row["payload"].to_string()) else {
            continue;
        };
        assert_eq!(out.status.code(), Some(0), "{event}: {out:?}");
        assert!(out.stderr.is_empty(), "{event} said: {out:?}");
        assert!(out.stdout.is_empty(), "{event} printed: {out:?}");
    }
    finished_export(t, LONG);
    let show = command(bir(), t)
        .args(["runs", "show", "latest"])
        .output()
        .expect("show");
    assert!(show.status.success(), "{show:?}");
    String::from_utf8_lossy(&show.stdout).into_owned()
}

/// `needles` appear in `text` in this order.
fn in_order(text: &str, needles: &[&str]) {
    let mut from = 0;
    for n in needles {
        match text[from..].find(n) {
            Some(at) => from += at + n.len(),
            None => panic!("{n:?} not found (in order) in:\n{text}"),
        }
    }
}

#[test]
fn a_codex_session_through_bir_hooks_is_told_whole() {
    let t = TempDir::new("hosts-codex");
    let _running = Running(&t);
    let show = session(&t, "codex", Some("rollout.jsonl"));
    in_order(
        &show,
        &[
            "codex",
            "0.169.0",
            "List the files, then echo hi",
            "Bash",
            "I'll list the files first.",
            "notes.txt",
            "echo",
            "Now the echo tool.",
            "Echo: hi",
            "The folder holds notes.txt, and the echo tool said: Echo: hi",
            // The turn's tokens, with its model, then the run's.
            "tokens  2600 in (1200 cache reads) · 95 out · gpt-5.5-codex",
            "tokens 2600 in (1200 cache reads) · 95 out · session_end",
        ],
    );
}

/// The hook commands `bir install --client <agent> --scope project`
/// registered in `file`, by event (bir's only: recognised as
/// `bir status` does, by what they run).
fn registered(file: &Path) -> std::collections::HashMap<String, String> {
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(file).expect("hook file")).expect("json");
    let mut map = std::collections::HashMap::new();
    for (event, groups) in doc["hooks"].as_object().expect("hooks") {
        for g in groups.as_array().expect("array") {
            if let Some(c) = g["hooks"][0]["command"].as_str()
                && (c.contains("X-Bir-Hook: 1") || c.contains("bir-hooks"))
            {
                map.insert(event.clone(), c.to_owned());
            }
        }
    }
    map
}

/// Runs `command` as Codex and Gemini run a hook: `bash -c`, the payload
/// on stdin.
fn bash_hook(t: &TempDir, command_text: &str, payload: &str) -> Output {
    let mut cmd = super::support::command("bash", t);
    cmd.arg("-c")
        .arg(command_text)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn hook");
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(payload.as_bytes());
    }
    child.wait_with_output().expect("hook output")
}

/// `bir install --client codex|gemini` (the default `--hooks http`)
/// registers a bash script that posts every event straight to the daemon,
/// no bir process (bir-hooks only when no daemon listens): a session fed through the
/// registered commands, as the agent runs them (`bash -c`), is told whole,
/// nothing printed; a post with another token is refused.
#[test]
fn sessions_through_the_registered_post_scripts_are_told_whole() {
    for (host, transcript, file, expect) in [
        (
            "codex",
            "rollout.jsonl",
            ".codex/hooks.json",
            &[
                "codex",
                "0.169.0",
                "List the files, then echo hi",
                "Bash",
                "notes.txt",
                "Echo: hi",
                "The folder holds notes.txt, and the echo tool said: Echo: hi",
            ][..],
        ),
        (
            "gemini",
            "chat.jsonl",
            ".gemini/settings.json",
            &[
                "gemini-cli",
                "List the files, then echo hi",
                "run_shell_command",
                "notes.txt",
                "Echo: hi",
                "The folder holds notes.txt, and the echo tool said: Echo: hi",
            ][..],
        ),
    ] {
        let t = TempDir::new(&format!("hosts-script-{host}"));
        let _running = Running(&t);
        hooks_link(&t);
        let project = t.join("proj");
        std::fs::create_dir_all(&project).expect("mkdir");
        let out = command(bir(), &t)
            .args([
                "install",
                "--client",
                host,
                "--scope",
                "project",
                "--project",
            ])
            .arg(&project)
            .current_dir(&project)
            .env("BIR_HOOKS_PATH", t.join("bir-hooks"))
            .output()
            .expect("install");
        assert!(out.status.success(), "{host}: {out:?}");
        let commands = registered(&project.join(file));
        let scripts = commands
            .values()
            .filter(|c| c.contains("/dev/tcp/127.0.0.1/"))
            .count();
        assert_eq!(scripts, commands.len(), "{host}: {commands:?}");
        // With no daemon listening, a script hands its payload to bir-hooks.
        assert!(commands["SessionStart"].contains("bir-hooks --host"));
        let show = session_by(
            &t,
            host,
            Some(transcript),
            Some(&project),
            &|event, payload| commands.get(event).map(|c| bash_hook(&t, c, payload)),
        );
        in_order(&show, expect);

        // Another token (or none) opens nothing, whatever host process
        // the post names.
        let port: u16 = serde_json::from_slice::<serde_json::Value>(
            &std::fs::read(t.join("home/.baseinstrunner/control/hooks.json")).expect("hookaddr"),
        )
        .expect("json")["port"]
            .as_u64()
            .and_then(|p| u16::try_from(p).ok())
            .expect("port");
        let forged = format!(
            "POST /hook/Stop?host={host}&host_process=1 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {}\r\nX-Bir-Hook: 1\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}",
            "0".repeat(64)
        );
        let mut conn = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
        conn.write_all(forged.as_bytes()).expect("post");
        let mut answer = String::new();
        let _ = std::io::Read::read_to_string(&mut conn, &mut answer);
        assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    }
}

/// `bir off` keeps a session whose hooks are post scripts unrecorded (the
/// daemon checks the switch, as for Claude Code's HTTP hooks), and so does
/// `BIR_OFF=1` in the agent's environment (the script posts nothing); with
/// neither, the same hooks make a run.
#[test]
fn bir_off_keeps_a_post_script_session_unrecorded() {
    let t = TempDir::new("hosts-script-off");
    let _running = Running(&t);
    hooks_link(&t);
    let project = t.join("proj");
    std::fs::create_dir_all(&project).expect("mkdir");
    let out = command(bir(), &t)
        .args([
            "install",
            "--client",
            "gemini",
            "--scope",
            "project",
            "--project",
        ])
        .arg(&project)
        .current_dir(&project)
        .env("BIR_HOOKS_PATH", t.join("bir-hooks"))
        .output()
        .expect("install");
    assert!(out.status.success(), "{out:?}");
    let commands = registered(&project.join(".gemini/settings.json"));
    // The daemon up (a session that only starts leaves no run).
    let discovery = t.join("home/.baseinstrunner/control/daemon.json");
    wait_until("the daemon", LONG, || {
        discovery.exists() || {
            let payload = format!(
                r#"{{"session_id":"warm-up","hook_event_name":"SessionStart","cwd":{:?}}}"#,
                project.display().to_string()
            );
            let _ = bash_hook(&t, &commands["SessionStart"], &payload);
            false
        }
    });
    let turn = |session: &str, env: &[(&str, &str)]| {
        for (event, extra) in [
            ("BeforeAgent", r#""prompt":"say hi""#),
            ("AfterAgent", r#""prompt":"say hi","prompt_response":"hi""#),
        ] {
            let payload = format!(
                r#"{{"session_id":"{session}","hook_event_name":"{event}","cwd":{:?},{extra}}}"#,
                project.display().to_string()
            );
            let mut cmd = command("bash", &t);
            cmd.arg("-c")
                .arg(&commands[event])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            for (k, v) in env {
                cmd.env(k, v);
            }
            let mut child = cmd.spawn().expect("hook");
            if let Some(mut stdin) = child.stdin.take() {
                let _ = stdin.write_all(payload.as_bytes());
            }
            let out = child.wait_with_output().expect("hook");
            assert_eq!(out.status.code(), Some(0), "{out:?}");
            assert!(out.stdout.is_empty() && out.stderr.is_empty(), "{out:?}");
        }
    };
    let prompts = || {
        let out = command(bir(), &t)
            .args(["runs", "--json"])
            .current_dir(&project)
            .output()
            .expect("runs");
        String::from_utf8_lossy(&out.stdout)
            .matches("say hi")
            .count()
    };
    let off = command(bir(), &t).arg("off").output().expect("off");
    assert!(off.status.success(), "{off:?}");
    turn("sess-while-off", &[]);
    let on = command(bir(), &t).arg("on").output().expect("on");
    assert!(on.status.success(), "{on:?}");
    turn("sess-bir-off-env", &[("BIR_OFF", "1")]);
    turn("sess-recorded", &[]);
    wait_until("the recorded session's run", LONG, || prompts() >= 1);
    assert_eq!(prompts(), 1, "only the session with recording on");
}

#[test]
fn a_gemini_session_through_bir_hooks_is_told_whole() {
    let t = TempDir::new("hosts-gemini");
    let _running = Running(&t);
    let show = session(&t, "gemini", Some("chat.jsonl"));
    in_order(
        &show,
        &[
            "gemini-cli",
            "List the files, then echo hi",
            "run_shell_command",
            "I'll list the files first.",
            "notes.txt",
            "echo",
            "Now the echo tool.",
            "Echo: hi",
            "The folder holds notes.txt, and the echo tool said: Echo: hi",
        ],
    );
    assert!(
        !show.contains("Echo: hiThe folder"),
        "AfterAgent's repeated answer, not the transcript's:\n{show}"
    );
    // `bir status` and `bir doctor` tell the hooked agent's last session:
    // here its MCP call came from the hooks only (no proxy was bound).
    let project = t.join("proj");
    std::fs::create_dir_all(&project).expect("mkdir");
    install_gemini_in(&t, &project);
    for cmd in ["status", "doctor"] {
        let out = command(bir(), &t)
            .arg(cmd)
            .current_dir(&project)
            .output()
            .expect(cmd);
        let text = String::from_utf8_lossy(&out.stdout);
        in_order(
            &text,
            &[
                "gemini-cli hooks: registered",
                "last session: 5c2d9e7a at 2026-",
                "MCP calls: 1 from the hooks only",
            ],
        );
    }
}

#[test]
fn copilot_and_cursor_sessions_through_bir_hooks_are_told_whole() {
    let t = TempDir::new("hosts-copilot");
    let _running = Running(&t);
    let show = session(&t, "copilot", None);
    in_order(
        &show,
        &[
            "copilot-cli",
            "List the files, then read notes.txt.",
            "bash",
            "notes.txt",
            "view",
        ],
    );
    let t = TempDir::new("hosts-cursor");
    let _running = Running(&t);
    let show = session(&t, "cursor", None);
    in_order(
        &show,
        &[
            "cursor",
            "List the files, then echo hi",
            "Shell",
            "I'll list the files first.",
            "echo",
            "Now the echo tool.",
            "The folder holds notes.txt; the echo server was not available.",
        ],
    );
}

/// `bir install --client <agent> --scope project` then `bir uninstall
/// --client <agent>`: the agent's hook file is back byte for byte (or gone
/// again when bir created it).
#[test]
fn install_and_uninstall_per_agent_round_trip() {
    let t = TempDir::new("hosts-install");
    let project = t.join("proj");
    std::fs::create_dir_all(project.join(".cursor")).expect("mkdir");
    let cursor_file = project.join(".cursor/hooks.json");
    let before = "{\n  \"version\": 1,\n  \"hooks\": {\"afterFileEdit\": [{\"command\": \"./fmt.sh\"}]}\n}\n";
    std::fs::write(&cursor_file, before).expect("write");
    for (client, file) in [
        ("cursor", cursor_file.clone()),
        ("gemini", project.join(".gemini/settings.json")),
        ("copilot", project.join(".github/hooks/bir.json")),
        ("vscode", project.join(".github/hooks/bir-vscode.json")),
    ] {
        let out = command(bir(), &t)
            .args([
                "install",
                "--client",
                client,
                "--scope",
                "project",
                "--project",
            ])
            .arg(&project)
            .current_dir(&project)
            .output()
            .expect("install");
        assert!(out.status.success(), "{client}: {out:?}");
        let text = std::fs::read_to_string(&file).expect("hook file written");
        assert!(
            text.contains(&format!("--host {client}")),
            "{client}: {text}"
        );
        // Its sessions are recorded in the project the install ran in.
        let ledger: serde_json::Value = serde_json::from_slice(
            &std::fs::read(t.join("home/.baseinstrunner/installed.json")).expect("ledger"),
        )
        .expect("ledger json");
        assert_eq!(
            ledger["host_hooks"][0]["projects"],
            serde_json::json!([project.display().to_string()]),
            "{client}: {ledger}"
        );
        let out = command(bir(), &t)
            .args(["uninstall", "--client", client])
            .output()
            .expect("uninstall");
        assert!(out.status.success(), "{client}: {out:?}");
        if client == "cursor" {
            assert_eq!(std::fs::read_to_string(&file).expect("kept"), before);
        } else {
            assert!(!file.exists(), "{client}: bir's file left behind");
        }
    }
}

/// A Gemini hook file an older bir wrote (its `BeforeTool` hook for every
/// tool) keeps its install: `bir install` run again makes bir's entry
/// today's (the before-tool hook only for MCP and subagent tools), and
/// `bir uninstall` still gives back every byte of the user's file.
#[test]
fn installing_again_converges_an_older_gemini_install_and_uninstall_stays_exact() {
    let t = TempDir::new("hosts-converge");
    let project = t.join("proj");
    std::fs::create_dir_all(project.join(".gemini")).expect("mkdir");
    let file = project.join(".gemini/settings.json");
    let before = "{\n  \"general\": {\"enableAutoUpdate\": false},\n  \"hooks\": {\n    \"BeforeTool\": [\n      {\"matcher\": \"run_shell_command\", \"hooks\": [{\"type\": \"command\", \"command\": \"./guard.sh\"}]}\n    ]\n  }\n}\n";
    std::fs::write(&file, before).expect("write");
    let install = || install_gemini_in(&t, &project);
    install();
    let today = std::fs::read_to_string(&file).expect("installed");
    let matcher = "\"matcher\": \"^(mcp_.*|invoke_agent)$\"";
    assert_eq!(today.matches(matcher).count(), 1, "{today}");
    // What an older bir left: bir's BeforeTool entry for every tool.
    let older = today.replace(matcher, "\"matcher\": \"*\"");
    std::fs::write(&file, &older).expect("older");
    let said = install();
    assert!(said.contains("updated 1"), "{said}");
    let converged = std::fs::read_to_string(&file).expect("converged");
    assert_eq!(converged.matches(matcher).count(), 1, "{converged}");
    assert!(converged.contains("./guard.sh"));
    let out = command(bir(), &t)
        .args(["uninstall", "--client", "gemini"])
        .output()
        .expect("uninstall");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(std::fs::read_to_string(&file).expect("kept"), before);
}

/// `bir install --client gemini --scope project` for `project`, run there
/// with `t` as home; it must succeed. Its stdout.
fn install_gemini_in(t: &TempDir, project: &Path) -> String {
    let out = command(bir(), t)
        .args([
            "install",
            "--client",
            "gemini",
            "--scope",
            "project",
            "--project",
        ])
        .arg(project)
        .current_dir(project)
        .output()
        .expect("install");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}
