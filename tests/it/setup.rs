//! `bir setup` on fixture homes (temp `HOME`, `BIR_HOME`, managed-policy
//! directory): no client, one, several, a managed policy, and a second run
//! that finds everything in place. Standard input is not a terminal in
//! most of them, so without `--yes` setup must refuse having written
//! nothing; the `setup_on_a_terminal_*` tests run it on a real
//! pseudo-terminal (driven by python3's `pty` module) and answer its
//! question: yes, no, end of input.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use serde_json::{Value, json};

use crate::install_cli::text;
use crate::support::{TempDir, bir, command};

struct Home {
    dir: TempDir,
}

impl Home {
    fn new(tag: &str) -> Home {
        let dir = TempDir::new(tag);
        for d in ["home", "proj", "managed"] {
            fs::create_dir_all(dir.join(d)).expect("mkdir");
        }
        Home { dir }
    }

    fn project(&self) -> String {
        self.dir.join("proj").to_str().expect("utf-8").to_owned()
    }

    /// A stdio entry that runs bir's scriptable test server.
    fn peer_entry(&self) -> Value {
        let script = self.dir.script(
            "peer.json",
            &json!({"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}),
        );
        json!({"command": bir(), "args": ["testpeer", script]})
    }

    fn setup(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut cmd = command(bir(), &self.dir);
        cmd.arg("setup")
            .args(args)
            .args(["--timeout-ms", "60000"])
            .env("BIR_CLAUDE_MANAGED_DIR", self.dir.join("managed"))
            .current_dir(self.dir.join("proj"))
            .stdin(Stdio::null());
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().expect("run bir setup")
    }

    /// Every file under the fixture's home and project, with its bytes
    /// (bir's own home left out: the doctor may start things there).
    fn files(&self) -> Vec<(PathBuf, Vec<u8>)> {
        let mut found = Vec::new();
        for root in ["home", "proj"] {
            walk(&self.dir.join(root), &mut found);
        }
        found.retain(|(p, _)| !p.to_string_lossy().contains(".baseinstrunner"));
        found.sort();
        found
    }
}

fn walk(dir: &Path, found: &mut Vec<(PathBuf, Vec<u8>)>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            walk(&p, found);
        } else {
            found.push((p.clone(), fs::read(&p).expect("read")));
        }
    }
}

fn write_json(path: &Path, v: &Value) {
    fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    fs::write(path, serde_json::to_string_pretty(v).expect("json")).expect("write");
}

/// No client at all: setup says what it looked for, changes nothing and
/// fails (nothing was set up).
#[test]
fn setup_without_a_client_changes_nothing() {
    let h = Home::new("setup-none");
    let out = h.setup(&["--yes"], &[]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(all.contains("No MCP client found"), "{all}");
    assert!(all.contains("Nothing was changed"), "{all}");
    assert!(h.files().is_empty(), "wrote {:?}", h.files());
}

/// One client (Claude Code): without a terminal and without `--yes`, the
/// plan is shown and nothing is written (exit 2); with `--yes` the server
/// is wrapped, the hooks registered, the doctor runs and the next steps
/// are named; a second run finds everything in place and writes nothing.
#[test]
fn setup_one_client_shows_asks_installs_and_is_idempotent() {
    let h = Home::new("setup-one");
    let claude_json = h.dir.join("home/.claude.json");
    write_json(
        &claude_json,
        &json!({"numStartups": 3, "projects": {h.project(): {"mcpServers": {"peer": h.peer_entry()},
            "hasTrustDialogAccepted": true}}}),
    );
    let before = h.files();

    let out = h.setup(&[], &[]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(2), "{all}");
    assert!(all.contains("wrap     peer"), "the plan is shown: {all}");
    assert!(all.contains("+++ "), "with its diff: {all}");
    assert!(all.contains("Claude Code hooks"), "hooks included: {all}");
    assert!(all.contains("bir setup --yes"), "{all}");
    assert_eq!(h.files(), before, "nothing written without an answer");

    let out = h.setup(&["--yes"], &[]);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    let config: Value =
        serde_json::from_slice(&fs::read(&claude_json).expect("read")).expect("json");
    let entry = &config["projects"][h.project()]["mcpServers"]["peer"];
    assert_eq!(entry["args"][0], "proxy", "wrapped: {entry}");
    assert_eq!(config["numStartups"], 3, "the rest is kept");
    let settings = fs::read_to_string(h.dir.join("home/.claude/settings.json")).expect("hooks");
    assert!(settings.contains("hooks SessionStart"), "{settings}");
    assert!(all.contains("peer  OK"), "the doctor ran: {all}");
    assert!(
        all.contains("bir runs") && all.contains("bir report"),
        "{all}"
    );
    assert!(!all.contains("bir login"), "no service configured: {all}");

    let installed = h.files();
    let out = h.setup(&[], &[("BIR_SERVICE_URL", "http://127.0.0.1:9/")]);
    let all = text(&out);
    assert!(out.status.success(), "a second run needs no answer: {all}");
    assert!(all.contains("Everything is in place"), "{all}");
    assert!(all.contains("already wrapped"), "{all}");
    assert!(
        all.contains("`bir login`"),
        "a service is configured: {all}"
    );
    assert_eq!(h.files(), installed, "a second run writes nothing");
}

/// Several clients (Claude Code and Cursor): both are found, both plans
/// are shown, both files are wrapped (with `--lazy`: lazy entries, which
/// the doctor still finds answering).
#[test]
fn setup_several_clients_wraps_each() {
    let h = Home::new("setup-several");
    write_json(
        &h.dir.join("home/.claude.json"),
        &json!({"projects": {h.project(): {"mcpServers": {"cc-peer": h.peer_entry()},
            "hasTrustDialogAccepted": true}}}),
    );
    let cursor = h.dir.join("home/.cursor/mcp.json");
    write_json(
        &cursor,
        &json!({"mcpServers": {"cursor-peer": h.peer_entry()}}),
    );

    let out = h.setup(&["--yes", "--hooks", "none", "--lazy"], &[]);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(all.contains("Claude Code      "), "{all}");
    assert!(all.contains("Cursor (user)"), "{all}");
    let cursor_now: Value =
        serde_json::from_slice(&fs::read(&cursor).expect("read")).expect("json");
    assert_eq!(cursor_now["mcpServers"]["cursor-peer"]["args"][0], "proxy");
    assert!(
        cursor_now["mcpServers"]["cursor-peer"]["args"]
            .as_array()
            .is_some_and(|a| a.contains(&json!("--lazy"))),
        "--lazy reaches the wrapped entries: {cursor_now}"
    );
    assert!(
        all.contains("cc-peer  OK") && all.contains("cursor-peer  OK"),
        "{all}"
    );
    assert!(
        !h.dir.join("home/.claude/settings.json").exists(),
        "--hooks none registers no hooks"
    );
}

/// A managed policy that controls MCP servers and allows only managed
/// hooks: setup says why it wraps nothing, registers no hook and changes
/// no file, and needs no answer to do so.
#[test]
fn setup_under_a_managed_policy_changes_nothing_and_says_why() {
    let h = Home::new("setup-managed");
    write_json(
        &h.dir.join("home/.claude.json"),
        &json!({"projects": {h.project(): {"mcpServers": {"peer": h.peer_entry()},
            "hasTrustDialogAccepted": true}}}),
    );
    write_json(
        &h.dir.join("managed/managed-mcp.json"),
        &json!({"mcpServers": {}}),
    );
    write_json(
        &h.dir.join("managed/managed-settings.json"),
        &json!({"allowManagedHooksOnly": true}),
    );
    let before = h.files();
    let out = h.setup(&[], &[]);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(all.contains("controls MCP servers exclusively"), "{all}");
    assert!(all.contains("allowManagedHooksOnly"), "{all}");
    assert!(all.contains("Everything is in place"), "{all}");
    assert_eq!(h.files(), before);
}

/// Drives a command on a pseudo-terminal (stdin, stdout and stderr all
/// the pty, as in a shell): waits for the `[y/N]` question, answers it
/// (`yes`: "y", `no`: "n", `eof`: Ctrl-D, end of input), then prints all
/// the command wrote and `[asked: True|False]`, and exits as it did.
const PTY_DRIVER: &str = r#"
import os, pty, select, sys, time
answer, argv = sys.argv[1], sys.argv[2:]
pid, fd = pty.fork()
if pid == 0:
    os.execv(argv[0], argv)
out, asked = b"", False
deadline = time.time() + 120
while time.time() < deadline:
    ready, _, _ = select.select([fd], [], [], 0.5)
    if ready:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    if not asked and out.rstrip().endswith(b"[y/N]"):
        asked = True
        os.write(fd, {"yes": b"y\n", "no": b"n\n", "eof": b"\x04"}[answer])
_, status = os.waitpid(pid, 0)
sys.stdout.buffer.write(out)
sys.stdout.write("\n[asked: %s]\n" % asked)
sys.exit(os.waitstatus_to_exitcode(status))
"#;

impl Home {
    /// `bir setup` on a terminal, the question answered with `answer`.
    /// Returns its exit code and everything it wrote (line ends as a
    /// terminal shows them, `\r\n`, made `\n`).
    fn setup_on_a_terminal(&self, answer: &str) -> (Option<i32>, String) {
        let driver = self.dir.join("pty-driver.py");
        fs::write(&driver, PTY_DRIVER).expect("write the driver");
        let mut cmd = command("python3", &self.dir);
        cmd.arg(&driver)
            .arg(answer)
            .arg(bir())
            .args(["setup", "--timeout-ms", "60000"])
            .env("BIR_CLAUDE_MANAGED_DIR", self.dir.join("managed"))
            .current_dir(self.dir.join("proj"))
            .stdin(Stdio::null());
        let out = cmd.output().expect("run python3 (the pty driver)");
        let text = String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.is_empty(), "the driver failed: {err}");
        (out.status.code(), text)
    }
}

/// Applies the unified diffs `bir setup` showed (`--- FILE` / `+++ FILE
/// (after)` / `@@ -a,b +c,d @@` hunks) to the files as they were before,
/// checking that every context and removed line is really there. Returns
/// each shown file's lines as the diffs say they will be.
fn apply_shown_diffs(shown: &str) -> Vec<(PathBuf, Vec<String>)> {
    let lines: Vec<&str> = shown.lines().collect();
    let mut files = Vec::new();
    let mut i = 0;
    while i + 1 < lines.len() {
        let (Some(path), true) = (
            lines[i].strip_prefix("--- "),
            lines[i + 1].starts_with("+++ "),
        ) else {
            i += 1;
            continue;
        };
        let path = PathBuf::from(path);
        let before = fs::read_to_string(&path).unwrap_or_default();
        let old: Vec<&str> = before.lines().collect();
        let mut new: Vec<String> = Vec::new();
        let mut at = 0;
        i += 2;
        while let Some(header) = lines.get(i).and_then(|l| l.strip_prefix("@@ -")) {
            let numbers: Vec<usize> = header
                .split(|c: char| !c.is_ascii_digit())
                .filter(|s| !s.is_empty())
                .map(|s| s.parse().expect("a number"))
                .collect();
            let (start, old_len, new_len) = (numbers[0], numbers[1], numbers[3]);
            let from = if old_len == 0 { start } else { start - 1 }.min(old.len());
            new.extend(old[at..from].iter().map(|s| s.to_string()));
            at = from;
            i += 1;
            let (mut seen_old, mut seen_new) = (0, 0);
            while seen_old < old_len || seen_new < new_len {
                let line = lines[i];
                let (mark, rest) = line.split_at(1.min(line.len()));
                match mark {
                    "+" => {
                        new.push(rest.to_owned());
                        seen_new += 1;
                    }
                    "-" | " " | "" => {
                        assert_eq!(old.get(at).copied(), Some(rest), "{}", path.display());
                        if mark != "-" {
                            new.push(rest.to_owned());
                            seen_new += 1;
                        }
                        at += 1;
                        seen_old += 1;
                    }
                    _ => panic!("not a diff line: {line}"),
                }
                i += 1;
            }
        }
        new.extend(old[at..].iter().map(|s| s.to_string()));
        files.push((path, new));
    }
    files
}

fn one_client(tag: &str) -> Home {
    let h = Home::new(tag);
    write_json(
        &h.dir.join("home/.claude.json"),
        &json!({"numStartups": 3, "projects": {h.project(): {"mcpServers": {"peer": h.peer_entry()},
            "hasTrustDialogAccepted": true}}}),
    );
    h
}

/// On a real terminal, `bir setup` asks its one question; answered "y",
/// it makes exactly the changes it showed: every file it showed a diff
/// for now reads as that diff said, and no other file changed.
#[test]
fn setup_on_a_terminal_answered_yes_installs_exactly_what_it_showed() {
    let h = one_client("setup-pty-yes");
    let before = h.files();
    let (code, shown) = h.setup_on_a_terminal("yes");
    assert_eq!(code, Some(0), "{shown}");
    assert!(shown.contains("Make these changes? [y/N]"), "{shown}");
    assert!(shown.contains("[asked: True]"), "{shown}");
    let (plan, rest) = shown
        .split_once("Make these changes?")
        .expect("the question");
    // What it showed, applied by hand, to the files as they were...
    let expected = {
        let installed = h.files();
        for (path, bytes) in &before {
            fs::write(path, bytes).expect("restore");
        }
        for (path, _) in &installed {
            if !before.iter().any(|(p, _)| p == path) {
                fs::remove_file(path).expect("remove what setup created");
            }
        }
        let expected = apply_shown_diffs(plan);
        // ...put back as setup left them.
        for (path, bytes) in &installed {
            fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            fs::write(path, bytes).expect("put back");
        }
        expected
    };
    let shown_paths: Vec<&PathBuf> = expected.iter().map(|(p, _)| p).collect();
    assert!(
        shown_paths.contains(&&h.dir.join("home/.claude.json"))
            && shown_paths.contains(&&h.dir.join("home/.claude/settings.json")),
        "both diffs were shown: {shown_paths:?}"
    );
    // ...is what setup wrote, and nothing else changed.
    for (path, lines) in &expected {
        let now = fs::read_to_string(path).expect("a shown file exists");
        let now: Vec<&str> = now.lines().collect();
        assert_eq!(now, *lines, "{} is not what was shown", path.display());
    }
    for (path, bytes) in h.files() {
        if !shown_paths.contains(&&path) {
            let was = before.iter().find(|(p, _)| *p == path).map(|(_, b)| b);
            assert_eq!(was, Some(&bytes), "{} changed unshown", path.display());
        }
    }
    assert!(rest.contains("wrapped  peer"), "{rest}");
    assert!(rest.contains("peer  OK"), "the doctor ran: {rest}");
}

/// Answered "n", or with end of input (Ctrl-D): nothing is changed, and
/// setup says so.
#[test]
fn setup_on_a_terminal_answered_no_or_eof_changes_nothing() {
    for answer in ["no", "eof"] {
        let h = one_client(&format!("setup-pty-{answer}"));
        let before = h.files();
        let (code, shown) = h.setup_on_a_terminal(answer);
        assert_eq!(code, Some(0), "{answer}: {shown}");
        assert!(shown.contains("[asked: True]"), "{answer}: {shown}");
        assert!(shown.contains("Nothing was changed."), "{answer}: {shown}");
        assert!(!shown.contains("bir doctor"), "{answer}: {shown}");
        assert_eq!(h.files(), before, "{answer}: a file changed");
    }
}

/// Other agents installed for this user (here Gemini CLI: `~/.gemini`)
/// get their hooks from `bir setup` in the `--hooks` scope, shown first;
/// `--hooks none` registers none.
#[test]
fn setup_offers_the_hooks_of_every_agent_found() {
    let h = Home::new("setup-agents");
    write_json(
        &h.dir.join("home/.claude.json"),
        &json!({"projects": {h.project(): {"mcpServers": {"cc-peer": h.peer_entry()},
            "hasTrustDialogAccepted": true}}}),
    );
    let gemini = h.dir.join("home/.gemini/settings.json");
    fs::create_dir_all(gemini.parent().expect("dir")).expect("mkdir");
    let out = h.setup(&["--yes", "--hooks", "none"], &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(!gemini.exists(), "--hooks none registers no agent's hooks");
    let out = h.setup(&["--yes"], &[]);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(all.contains("gemini-cli hooks"), "{all}");
    let settings = fs::read_to_string(&gemini).expect("gemini settings written");
    // Every event posts by script, handing over to bir-hooks when no
    // daemon listens.
    assert!(
        settings.contains("POST /hook/SessionStart?host=gemini&"),
        "{settings}"
    );
    assert!(
        settings.contains("--host gemini SessionStart >/dev/null;"),
        "{settings}"
    );
    assert!(
        settings.contains("POST /hook/BeforeTool?host=gemini&"),
        "{settings}"
    );
}
