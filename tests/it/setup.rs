//! `bir setup` on fixture homes (temp `HOME`, `BIR_HOME`, managed-policy
//! directory): no client, one, several, a managed policy, and a second run
//! that finds everything in place. Standard input is never a terminal
//! here, so without `--yes` setup must refuse having written nothing.

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
