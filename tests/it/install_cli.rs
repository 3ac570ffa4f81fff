//! `bir wrap`, `bir install`, `bir uninstall`, `bir status`, `bir doctor`
//! against fixture homes (temp `HOME`, `CLAUDE_CONFIG_DIR`, `BIR_HOME`).

use std::fs;
use std::path::Path;
use std::process::Output;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{Host, TempDir, bir, command};
use crate::support::{scaled, serial};

fn run(dir: &TempDir, args: &[&str]) -> Output {
    command(bir(), dir)
        .args(args)
        .current_dir(dir.path())
        .output()
        .expect("run bir")
}

/// A command's status, stdout and stderr, for assertion messages.
pub(crate) fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Starts an entry exactly as a client would (command + args + env) and
/// checks it answers `initialize` and `tools/list`.
fn entry_answers(dir: &TempDir, entry: &Value) -> Result<(), String> {
    let mut cmd = command(entry["command"].as_str().expect("command"), dir);
    if let Some(args) = entry["args"].as_array() {
        cmd.args(args.iter().map(|a| a.as_str().expect("string arg")));
    }
    if let Some(env) = entry["env"].as_object() {
        for (k, v) in env {
            cmd.env(k, v.as_str().unwrap_or_default());
        }
    }
    let mut host = Host::start(cmd);
    host.send(&json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"it","version":"1"}}}));
    host.send(&json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    host.send(&json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}));
    let ok = host.wait_lines(2, Duration::from_secs(10));
    let seen = host.finish(Duration::from_secs(10));
    let msgs = seen.messages();
    if ok && msgs.len() >= 2 && msgs[1]["result"]["tools"].is_array() {
        Ok(())
    } else {
        Err(format!("{msgs:?} {}", seen.stderr))
    }
}

fn peer_script(dir: &TempDir) -> String {
    let script = dir.script(
        "peer.json",
        &json!({"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}),
    );
    script.to_str().expect("utf-8").to_owned()
}

#[test]
fn wrap_prints_an_entry_that_runs() {
    let dir = TempDir::new("wrap-print");
    let script = peer_script(&dir);
    let exe = bir();
    let out = run(
        &dir,
        &[
            "wrap",
            "--server-name",
            "peer",
            "--",
            exe.to_str().expect("utf-8"),
            "testpeer",
            &script,
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let entry: Value = serde_json::from_slice(&out.stdout).expect("json entry");
    // No bir-proxy link next to the test binary: the `bir proxy` form.
    assert_eq!(entry["command"], json!(exe.to_str()));
    assert_eq!(
        entry["args"].as_array().expect("args")[0..4],
        json!(["proxy", "--server-name", "peer", "--"])
            .as_array()
            .expect("array")[..]
    );
    entry_answers(&dir, &entry).expect("the wrapped entry answers");

    // With a bir-proxy link (BIR_PROXY_PATH), the link form.
    let link = dir.proxy_link();
    let out = command(bir(), &dir)
        .args(["wrap", "--", "node", "server.js"])
        .env("BIR_PROXY_PATH", &link)
        .output()
        .expect("run");
    let entry: Value = serde_json::from_slice(&out.stdout).expect("json entry");
    assert_eq!(
        entry,
        json!({"command": link.to_str(), "args": ["--server-name", "server", "--", "node", "server.js"]})
    );

    let out = run(&dir, &["wrap"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
}

#[test]
fn wrap_writes_into_a_config_preserving_its_bytes() {
    let dir = TempDir::new("wrap-config");
    let cfg = dir.join("client.json");
    let original = "\u{feff}{\r\n    \"theme\": \"dark\",\r\n    \"mcpServers\": {\r\n        \"old\": {\"command\": \"x\", \"env\": {\"K\": \"${K}\"}}\r\n    }\r\n}";
    fs::write(&cfg, original).expect("write");
    let cfg_s = cfg.to_str().expect("utf-8");

    // Dry run: a diff, nothing written.
    let out = run(
        &dir,
        &[
            "wrap",
            "--config",
            cfg_s,
            "--name",
            "new",
            "--dry-run",
            "--",
            "node",
            "s.js",
        ],
    );
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(
        all.contains("+        \"new\": {") && all.contains("dry run"),
        "{all}"
    );
    assert_eq!(fs::read_to_string(&cfg).expect("read"), original);

    let out = run(
        &dir,
        &[
            "wrap", "--config", cfg_s, "--name", "new", "--", "node", "s.js",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let after = fs::read_to_string(&cfg).expect("read");
    let prefix = "\u{feff}{\r\n    \"theme\": \"dark\",\r\n    \"mcpServers\": {\r\n        \"old\": {\"command\": \"x\", \"env\": {\"K\": \"${K}\"}},\r\n        \"new\": {\r\n            \"command\": ";
    assert!(after.starts_with(prefix), "{after:?}");
    assert!(
        after.ends_with("            ]\r\n        }\r\n    }\r\n}"),
        "{after:?}"
    );
    let parsed: Value =
        serde_json::from_str(after.trim_start_matches('\u{feff}')).expect("valid JSON");
    assert_eq!(
        parsed["mcpServers"]["new"]["args"]
            .as_array()
            .expect("args")[2..],
        json!(["new", "--", "node", "s.js"]).as_array().expect("a")[..]
    );

    // Again: idempotent. A different command: refused without --force.
    let out = run(
        &dir,
        &[
            "wrap", "--config", cfg_s, "--name", "new", "--", "node", "s.js",
        ],
    );
    assert!(
        out.status.success() && text(&out).contains("already wrapped"),
        "{}",
        text(&out)
    );
    let out = run(
        &dir,
        &[
            "wrap", "--config", cfg_s, "--name", "new", "--", "node", "t.js",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("--force"), "{}", text(&out));
    assert_eq!(fs::read_to_string(&cfg).expect("read"), after);
    let out = run(
        &dir,
        &[
            "wrap", "--config", cfg_s, "--name", "new", "--force", "--", "node", "t.js",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(fs::read_to_string(&cfg).expect("read").contains("\"t.js\""));

    // The entry bir wrap added is in the ledger: uninstall --config removes
    // it (a --force replacement is not recorded, so it stays).
    fs::write(&cfg, original).expect("write");
    let out = run(
        &dir,
        &[
            "wrap", "--config", cfg_s, "--name", "new", "--", "node", "s.js",
        ],
    );
    assert!(
        text(&out).contains("Undo: bir uninstall --config"),
        "{}",
        text(&out)
    );
    let out = run(&dir, &["uninstall", "--config", cfg_s]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(fs::read_to_string(&cfg).expect("read"), original);
}

#[test]
fn wrap_refuses_a_malformed_config_with_its_position() {
    let dir = TempDir::new("wrap-bad");
    let cfg = dir.join("bad.json");
    let bad = "{\n  \"mcpServers\": {\n    \"a\": 1,\n";
    fs::write(&cfg, bad).expect("write");
    let out = run(
        &dir,
        &[
            "wrap",
            "--config",
            cfg.to_str().expect("utf-8"),
            "--name",
            "n",
            "--",
            "x",
        ],
    );
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(all.contains(&format!("{}:4:1:", cfg.display())), "{all}");
    assert!(all.contains("not changed"), "{all}");
    assert_eq!(fs::read_to_string(&cfg).expect("read"), bad);

    // Comments: refused in plain JSON, kept with --jsonc.
    let jsonc = "{\n  // mine\n  \"servers\": {},\n}\n";
    fs::write(&cfg, jsonc).expect("write");
    let cfg_s = cfg.to_str().expect("utf-8");
    let out = run(
        &dir,
        &[
            "wrap",
            "--config",
            cfg_s,
            "--map-key",
            "servers",
            "--name",
            "n",
            "--",
            "x",
        ],
    );
    assert!(text(&out).contains("--jsonc"), "{}", text(&out));
    let out = run(
        &dir,
        &[
            "wrap",
            "--config",
            cfg_s,
            "--map-key",
            "servers",
            "--jsonc",
            "--name",
            "n",
            "--",
            "x",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let after = fs::read_to_string(&cfg).expect("read");
    assert!(
        after.starts_with("{\n  // mine\n  \"servers\": {\n    \"n\": {"),
        "{after}"
    );
    assert!(after.ends_with("  },\n}\n"), "{after}");
    assert!(!Path::new(&format!("{}.tmp", cfg.display())).exists());
}

// ---------------------------------------------------------------------------
// Claude Code: bir install / uninstall / status on fixture homes.

/// A fixture: `home/` (HOME), `home/.claude.json`, a project dir, a managed
/// policy dir (empty unless a test adds files), `BIR_HOME` inside home.
struct Fixture {
    dir: TempDir,
}

impl Fixture {
    fn new(tag: &str) -> Fixture {
        let dir = TempDir::new(tag);
        fs::create_dir_all(dir.join("proj/.claude")).expect("mkdir");
        fs::create_dir_all(dir.join("managed")).expect("mkdir");
        Fixture { dir }
    }

    fn project(&self) -> String {
        self.dir.join("proj").to_str().expect("utf-8").to_owned()
    }

    fn claude_json(&self) -> std::path::PathBuf {
        self.dir.join("home/.claude.json")
    }

    fn bir(&self, args: &[&str]) -> Output {
        command(bir(), &self.dir)
            .args(args)
            .env("BIR_CLAUDE_MANAGED_DIR", self.dir.join("managed"))
            .current_dir(self.dir.join("proj"))
            .output()
            .expect("run bir")
    }

    fn ledger(&self) -> Value {
        let text = fs::read_to_string(self.dir.join("home/.baseinstrunner/installed.json"))
            .expect("ledger");
        serde_json::from_str(&text).expect("ledger json")
    }
}

/// A testpeer command line (as JSON strings) that answers initialize and
/// tools/list.
fn peer_cmd(f: &Fixture) -> (String, String) {
    let script = peer_script(&f.dir);
    (
        bir().to_str().expect("utf-8").to_owned(),
        format!(
            "[\"testpeer\", {}]",
            serde_json::to_string(&script).expect("json")
        ),
    )
}

/// Three approved servers across the scopes (with shadowing), plus a pending,
/// a rejected, a remote (static header, oauth, headersHelper), a reserved
/// name, an already-wrapped local entry, and `${VAR}` everywhere.
fn standard_fixture(tag: &str) -> (Fixture, String, String) {
    let f = Fixture::new(tag);
    let (exe, args) = peer_cmd(&f);
    let project = f.project();
    let claude = format!(
        r#"{{
  "numStartups": 12,
  "mcpServers": {{
    "user-srv": {{"command": "{exe}", "args": {args}, "env": {{"U": "${{U_TOKEN}}"}}}},
    "team": {{"command": "user-version-of-team"}},
    "workspace": {{"command": "reserved"}}
  }},
  "projects": {{
    "{project}": {{
      "allowedTools": [],
      "mcpServers": {{
        "local-srv": {{"type": "stdio", "command": "{exe}", "args": {args}, "env": {{"DB": "${{DB_URL:-x}}"}}, "timeout": 60000}},
        "pre": {{"command": "/opt/bir/bin/bir-proxy", "args": ["--server-name", "pre", "--", "x"]}}
      }},
      "hasTrustDialogAccepted": true
    }}
  }},
  "toolUsage": {{"a": 1}}
}}
"#
    );
    fs::write(f.claude_json(), &claude).expect("write");
    let mcp = format!(
        r#"{{
  "mcpServers": {{
    "team": {{"command": "{exe}", "args": {args}}},
    "pending": {{"command": "pending-server"}},
    "rejected": {{"command": "rejected-server"}},
    "remote-static": {{"type": "http", "url": "https://mcp.example.com/mcp", "headers": {{"Authorization": "Bearer ${{API_TOKEN}}"}}}},
    "remote-oauth": {{"type": "http", "url": "https://o.example.com/mcp", "oauth": {{"clientId": "abc"}}}},
    "remote-helper": {{"type": "sse", "url": "https://h.example.com/sse", "headersHelper": "/usr/local/bin/mk"}}
  }}
}}
"#
    );
    fs::write(f.dir.join("proj/.mcp.json"), &mcp).expect("write");
    fs::write(
        f.dir.join("proj/.claude/settings.local.json"),
        r#"{"enabledMcpjsonServers": ["team", "rejected"], "disabledMcpjsonServers": ["rejected"]}"#,
    )
    .expect("write");
    (f, claude, mcp)
}

/// The entries Claude Code would use, from the current files (local >
/// project > user, whole entries).
fn effective(f: &Fixture) -> serde_json::Map<String, Value> {
    let claude: Value =
        serde_json::from_str(&fs::read_to_string(f.claude_json()).expect("read")).expect("json");
    let mcp: Value =
        serde_json::from_str(&fs::read_to_string(f.dir.join("proj/.mcp.json")).expect("read"))
            .expect("json");
    let mut out = serde_json::Map::new();
    for map in [
        &claude["mcpServers"],
        &mcp["mcpServers"],
        &claude["projects"][f.project()]["mcpServers"],
    ] {
        if let Some(m) = map.as_object() {
            for (k, v) in m {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    out
}

#[test]
fn claude_install_wraps_approved_servers_and_uninstall_restores_every_byte() {
    let (f, claude, mcp) = standard_fixture("cc-round");

    let out = f.bir(&["install", "--dry-run"]);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(all.contains("dry run: nothing was written"), "{all}");
    assert_eq!(fs::read_to_string(f.claude_json()).expect("read"), claude);

    let out = f.bir(&["install"]);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    for (name, needle) in [
        ("local-srv", "wrapped in place"),
        ("team", "project scope entry → wrapped copy"),
        ("user-srv", "user scope entry → wrapped copy"),
        ("pending", "not approved in Claude Code yet"),
        ("rejected", "rejected in Claude Code"),
        ("remote-static", "holds a ${VAR} placeholder"),
        ("remote-oauth", "signs in itself (an oauth block)"),
        ("remote-helper", "makes its headers (headersHelper)"),
        ("workspace", "reserved name"),
        ("pre", "already wrapped"),
    ] {
        let line = all
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some(name))
            .unwrap_or_default();
        assert!(line.contains(needle), "{name}: {line}\n{all}");
    }
    assert!(all.contains("Undo: bir uninstall"), "{all}");
    // The team's .mcp.json is never touched.
    assert_eq!(
        fs::read_to_string(f.dir.join("proj/.mcp.json")).expect("read"),
        mcp
    );

    // Claude Code now sees wrapped entries for the three approved servers,
    // keeping env, timeout and ${VAR} placeholders; each one starts.
    let eff = effective(&f);
    for name in ["local-srv", "team", "user-srv"] {
        let e = &eff[name];
        assert_eq!(e["command"], json!(bir().to_str()), "{name}: {e}");
        assert_eq!(
            e["args"].as_array().expect("args")[0..4],
            json!(["proxy", "--server-name", name, "--"])
                .as_array()
                .expect("a")[..]
        );
        entry_answers(&f.dir, e).unwrap_or_else(|err| panic!("{name} does not answer: {err}"));
    }
    assert_eq!(eff["local-srv"]["env"], json!({"DB": "${DB_URL:-x}"}));
    assert_eq!(eff["local-srv"]["timeout"], json!(60000));
    assert_eq!(eff["user-srv"]["env"], json!({"U": "${U_TOKEN}"}));
    assert_eq!(eff["pending"]["command"], json!("pending-server"));

    // The ledger: 0600, three changes, no env values.
    let ledger_path = f.dir.join("home/.baseinstrunner/installed.json");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        fs::metadata(&ledger_path)
            .expect("meta")
            .permissions()
            .mode()
            & 0o777,
        0o600
    );
    assert_eq!(f.ledger()["changes"].as_array().expect("changes").len(), 3);
    let ledger_text = fs::read_to_string(&ledger_path).expect("read");
    assert!(
        !ledger_text.contains("U_TOKEN") && !ledger_text.contains("DB_URL"),
        "{ledger_text}"
    );
    assert!(ledger_text.contains("[withheld]"), "{ledger_text}");

    // Idempotent.
    let after_install = fs::read_to_string(f.claude_json()).expect("read");
    let out = f.bir(&["install"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        fs::read_to_string(f.claude_json()).expect("read"),
        after_install
    );
    assert_eq!(f.ledger()["changes"].as_array().expect("changes").len(), 3);

    let out = f.bir(&["status"]);
    let all = text(&out);
    assert!(
        all.contains("team") && all.contains("wrapped    local scope"),
        "{all}"
    );
    // Three entries in .claude.json and the hooks in settings.json: two
    // files, counted as files, however many entries each holds.
    let hooks_file = settings(&f);
    assert!(hooks_file.exists(), "the install registered hooks");
    assert!(
        all.contains("Ledger: bir changed 2 files for this project, 2 files on this machine"),
        "{all}"
    );

    // Uninstall: a preview, then every original byte back.
    let out = f.bir(&["uninstall", "--dry-run"]);
    assert!(
        text(&out).contains("-        \"team\": {"),
        "{}",
        text(&out)
    );
    assert_eq!(
        fs::read_to_string(f.claude_json()).expect("read"),
        after_install
    );
    let out = f.bir(&["uninstall"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(fs::read_to_string(f.claude_json()).expect("read"), claude);
    assert_eq!(
        fs::read_to_string(f.dir.join("proj/.mcp.json")).expect("read"),
        mcp
    );
    assert!(
        f.ledger()["changes"]
            .as_array()
            .expect("changes")
            .is_empty()
    );
    // A second uninstall is a clean no-op: exit 0, says so, writes nothing.
    let ledger_after = fs::read(&ledger_path).expect("read");
    let out = f.bir(&["uninstall"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("Nothing to undo"), "{}", text(&out));
    assert_eq!(fs::read_to_string(f.claude_json()).expect("read"), claude);
    assert_eq!(
        fs::read_to_string(f.dir.join("proj/.mcp.json")).expect("read"),
        mcp
    );
    assert_eq!(fs::read(&ledger_path).expect("read"), ledger_after);
}

#[test]
fn claude_server_flag_forces_a_pending_server_but_never_a_rejected_one() {
    let (f, _, _) = standard_fixture("cc-force");
    let out = f.bir(&["install", "--server", "pending", "--server", "rejected"]);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    let eff = effective(&f);
    assert_eq!(eff["pending"]["args"][4], json!("pending-server"), "{all}");
    assert_eq!(
        eff["rejected"]["command"],
        json!("rejected-server"),
        "{all}"
    );
    // Only the named servers were touched.
    assert_eq!(eff["team"]["args"][0], json!("testpeer"), "{all}");
    let out = f.bir(&["install", "--server", "nope"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).contains("no MCP server named \"nope\""));
}

#[test]
fn claude_managed_policy_wraps_nothing_and_says_why() {
    let (f, claude, _) = standard_fixture("cc-managed");
    fs::write(
        f.dir.join("managed/managed-mcp.json"),
        r#"{"mcpServers": {}}"#,
    )
    .expect("write");
    let out = f.bir(&["install"]);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(all.contains("controls MCP servers exclusively"), "{all}");
    assert_eq!(fs::read_to_string(f.claude_json()).expect("read"), claude);
    fs::remove_file(f.dir.join("managed/managed-mcp.json")).expect("rm");

    // An allowlist by command: wrapping would break it.
    fs::write(
        f.dir.join("managed/managed-settings.json"),
        r#"{"allowedMcpServers": [{"serverCommand": ["npx", "-y", "x"]}]}"#,
    )
    .expect("write");
    let out = f.bir(&["install"]);
    let all = text(&out);
    assert!(all.contains("allows MCP servers by exact command"), "{all}");
    assert_eq!(fs::read_to_string(f.claude_json()).expect("read"), claude);

    // The same allowlist from a managed-settings.d drop-in.
    fs::remove_file(f.dir.join("managed/managed-settings.json")).expect("rm");
    fs::create_dir_all(f.dir.join("managed/managed-settings.d")).expect("mkdir");
    fs::write(
        f.dir.join("managed/managed-settings.d/10-mcp.json"),
        r#"{"allowedMcpServers": [{"serverCommand": ["npx", "-y", "x"]}]}"#,
    )
    .expect("write");
    let out = f.bir(&["install"]);
    let all = text(&out);
    assert!(
        all.contains("10-mcp.json allows MCP servers by exact command"),
        "{all}"
    );
    assert_eq!(fs::read_to_string(f.claude_json()).expect("read"), claude);
    fs::remove_dir_all(f.dir.join("managed/managed-settings.d")).expect("rm");

    // A deny rule by command: that server is not wrapped (wrapping would
    // dodge the rule); the others are.
    let exe = bir();
    let script = f.dir.join("peer.json");
    fs::write(
        f.dir.join("managed/managed-settings.json"),
        serde_json::to_string(&json!({"deniedMcpServers": [{"serverCommand": [exe.to_str(), "testpeer", script.to_str()]}, {"serverName": "user-srv"}]}))
            .expect("json"),
    )
    .expect("write");
    let out = f.bir(&["install"]);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(all.contains("wrapping would evade the rule"), "{all}");
    assert!(all.contains("deniedMcpServers, by name"), "{all}");
    assert!(
        !all.contains("wrapped  team") && !all.contains("wrapped  user-srv"),
        "{all}"
    );
}

#[test]
fn claude_config_dir_and_a_symlinked_crlf_bom_config_round_trip() {
    let f = Fixture::new("cc-confdir");
    let (exe, args) = peer_cmd(&f);
    let project = f.project();
    // The real file lives in a dotfiles dir; CLAUDE_CONFIG_DIR holds a link.
    fs::create_dir_all(f.dir.join("dotfiles")).expect("mkdir");
    fs::create_dir_all(f.dir.join("conf")).expect("mkdir");
    let original = format!(
        "\u{feff}{{\r\n\t\"mcpServers\": {{\r\n\t\t\"srv\": {{\"command\": \"{exe}\", \"args\": {args}}}\r\n\t}},\r\n\t\"projects\": {{\r\n\t\t\"{project}\": {{\r\n\t\t\t\"allowedTools\": []\r\n\t\t}}\r\n\t}}\r\n}}"
    );
    let real = f.dir.join("dotfiles/claude.json");
    fs::write(&real, &original).expect("write");
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&real, fs::Permissions::from_mode(0o600)).expect("chmod");
    std::os::unix::fs::symlink(&real, f.dir.join("conf/.claude.json")).expect("link");
    let run = |args: &[&str]| {
        command(bir(), &f.dir)
            .args(args)
            .env("CLAUDE_CONFIG_DIR", f.dir.join("conf"))
            .env("BIR_CLAUDE_MANAGED_DIR", f.dir.join("managed"))
            .current_dir(f.dir.join("proj"))
            .output()
            .expect("run")
    };
    let out = run(&["install"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        fs::symlink_metadata(f.dir.join("conf/.claude.json"))
            .expect("meta")
            .file_type()
            .is_symlink()
    );
    assert_eq!(
        fs::metadata(&real).expect("meta").permissions().mode() & 0o777,
        0o600
    );
    let after = fs::read_to_string(&real).expect("read");
    assert!(
        after.starts_with("\u{feff}{\r\n\t\"mcpServers\""),
        "{after:?}"
    );
    assert!(after.contains(&format!("\t\t\"{project}\": {{\r\n\t\t\t\"allowedTools\": [],\r\n\t\t\t\"mcpServers\": {{\r\n\t\t\t\t\"srv\": {{\r\n")), "{after:?}");
    assert!(
        !after.replace("\r\n", "").contains('\n'),
        "only CRLF line ends"
    );
    // The home's own ~/.claude.json was not created.
    assert!(!f.claude_json().exists());
    let out = run(&["uninstall"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(fs::read_to_string(&real).expect("read"), original);
}

#[test]
fn claude_malformed_config_is_refused_with_its_position() {
    let f = Fixture::new("cc-malformed");
    let bad = "{\n  \"projects\": {\n    \"x\": {\n";
    fs::write(f.claude_json(), bad).expect("write");
    let out = f.bir(&["install"]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(
        all.contains(&format!("{}:4:1:", f.claude_json().display())),
        "{all}"
    );
    assert!(all.contains("backups"), "{all}");
    assert_eq!(fs::read_to_string(f.claude_json()).expect("read"), bad);
}

#[test]
fn claude_uninstall_keeps_later_edits_and_all_covers_every_project() {
    let (f, claude, _) = standard_fixture("cc-edits");
    let out = f.bir(&["install"]);
    assert!(out.status.success(), "{}", text(&out));
    // A second project, wrapped too.
    fs::create_dir_all(f.dir.join("proj2")).expect("mkdir");
    let (exe, args) = peer_cmd(&f);
    fs::write(
        f.dir.join("proj2/.mcp.json"),
        format!(r#"{{"mcpServers": {{"p2": {{"command": "{exe}", "args": {args}}}}}}}"#),
    )
    .expect("write");
    let out = f.bir(&[
        "install",
        "--project",
        f.dir.join("proj2").to_str().expect("utf-8"),
        "--server",
        "p2",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(f.ledger()["changes"].as_array().expect("changes").len(), 4);

    // Claude Code rewrites the file meanwhile: a counter and a new server.
    let now = fs::read_to_string(f.claude_json()).expect("read");
    let edited = now
        .replace("\"toolUsage\": {\"a\": 1}", "\"toolUsage\": {\"a\": 2}")
        .replacen(
            "\"mcpServers\": {\n",
            "\"mcpServers\": {\n    \"added-later\": {\"command\": \"z\"},\n",
            1,
        );
    assert_ne!(edited, now);
    fs::write(f.claude_json(), &edited).expect("write");

    // Plain uninstall: this project only.
    let out = f.bir(&["uninstall"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(f.ledger()["changes"].as_array().expect("changes").len(), 1);
    let out = f.bir(&["uninstall", "--all"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        f.ledger()["changes"]
            .as_array()
            .expect("changes")
            .is_empty()
    );
    let expected = claude
        .replace("\"toolUsage\": {\"a\": 1}", "\"toolUsage\": {\"a\": 2}")
        .replacen(
            "\"mcpServers\": {\n",
            "\"mcpServers\": {\n    \"added-later\": {\"command\": \"z\"},\n",
            1,
        );
    assert_eq!(fs::read_to_string(f.claude_json()).expect("read"), expected);
}

#[test]
fn doctor_launches_every_wrapped_entry_and_names_the_broken_one() {
    let _serial = serial();
    let f = Fixture::new("cc-doctor");
    let (exe, args) = peer_cmd(&f);
    let project = f.project();
    fs::write(
        f.claude_json(),
        format!(
            r#"{{
  "mcpServers": {{"user-srv": {{"command": "{exe}", "args": {args}}}}},
  "projects": {{
    "{project}": {{
      "mcpServers": {{
        "local-srv": {{"command": "{exe}", "args": {args}, "env": {{"X": "${{HOME}}"}}}},
        "broken": {{"command": "/nonexistent/mcp-server", "args": ["--flag"]}},
        "stale": {{"command": "/gone/bir-proxy", "args": ["--server-name", "stale", "--", "x"]}}
      }}
    }}
  }}
}}
"#
        ),
    )
    .expect("write");
    fs::write(
        f.dir.join("proj/.mcp.json"),
        format!(r#"{{"mcpServers": {{"team": {{"command": "{exe}", "args": {args}}}, "remote": {{"type": "http", "url": "https://x/mcp"}}}}}}"#),
    )
    .expect("write");
    // User settings: approvals there count whether or not the folder is
    // trusted.
    fs::create_dir_all(f.dir.join("home/.claude")).expect("mkdir");
    fs::write(
        f.dir.join("home/.claude/settings.json"),
        r#"{"enableAllProjectMcpServers": true}"#,
    )
    .expect("write");
    let out = f.bir(&["install"]);
    assert!(out.status.success(), "{}", text(&out));

    // An old bir-proxy first on PATH.
    fs::create_dir_all(f.dir.join("oldbin")).expect("mkdir");
    let old = f.dir.join("oldbin/bir-proxy");
    fs::write(&old, "#!/bin/sh\necho 'bir-proxy 0.0.1 (build old)'\n").expect("write");
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&old, fs::Permissions::from_mode(0o755)).expect("chmod");
    let path = format!(
        "{}:{}",
        f.dir.join("oldbin").display(),
        std::env::var("PATH").unwrap_or_default()
    );

    let started = std::time::Instant::now();
    let out = command(bir(), &f.dir)
        .args(["doctor", "--timeout-ms", "10000"])
        .env("BIR_CLAUDE_MANAGED_DIR", f.dir.join("managed"))
        .env("PATH", &path)
        .current_dir(f.dir.join("proj"))
        .output()
        .expect("doctor");
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(
        started.elapsed() < scaled(Duration::from_secs(20)),
        "bounded: {all}"
    );
    let row = |name: &str| {
        all.lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_default()
            .to_owned()
    };
    for name in ["user-srv", "local-srv", "team"] {
        assert!(
            row(name).contains("OK") && row(name).contains("1 tools"),
            "{name}: {all}"
        );
    }
    assert!(row("broken").contains("FAILED"), "{all}");
    assert!(
        all.contains("cannot start '/nonexistent/mcp-server --flag'"),
        "stderr tail: {all}"
    );
    assert!(
        row("stale").contains("/gone/bir-proxy does not exist"),
        "{all}"
    );
    assert!(
        row("remote").contains("not wrapped: remote server"),
        "{all}"
    );
    assert!(
        all.contains("BIR_HOME") && all.contains("ok (private)"),
        "{all}"
    );
    assert!(
        all.contains("bir-proxy on PATH: PROBLEM") && all.contains("0.0.1"),
        "{all}"
    );

    // Healthy: no broken entries, no stale bir-proxy on PATH.
    let out = f.bir(&["uninstall"]);
    assert!(out.status.success(), "{}", text(&out));
    let fixed = fs::read_to_string(f.claude_json())
        .expect("read")
        .replace("        \"broken\": {\"command\": \"/nonexistent/mcp-server\", \"args\": [\"--flag\"]},\n", "")
        .replace(",\n        \"stale\": {\"command\": \"/gone/bir-proxy\", \"args\": [\"--server-name\", \"stale\", \"--\", \"x\"]}", "");
    fs::write(f.claude_json(), &fixed).expect("write");
    let out = f.bir(&["install"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = f.bir(&["doctor"]);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(all.contains("All wrapped servers answer."), "{all}");
}

#[test]
fn claude_mcp_json_in_place_round_trips_byte_for_byte() {
    let (f, claude, mcp) = standard_fixture("cc-mcpjson");
    let out = f.bir(&["install", "--mcp-json"]);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(all.contains("wrapped in place in .mcp.json"), "{all}");
    let after_mcp = fs::read_to_string(f.dir.join("proj/.mcp.json")).expect("read");
    assert_ne!(after_mcp, mcp);
    // Only the team entry's command/args changed in .mcp.json.
    let v: Value = serde_json::from_str(&after_mcp).expect("json");
    assert_eq!(v["mcpServers"]["team"]["args"][2], json!("team"));
    assert_eq!(
        v["mcpServers"]["pending"],
        json!({"command": "pending-server"})
    );
    entry_answers(&f.dir, &v["mcpServers"]["team"]).expect("answers");
    // The user-scope server still gets its copy in the local scope.
    assert!(effective(&f)["user-srv"]["args"][0] == json!("proxy"));
    let out = f.bir(&["uninstall"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        fs::read_to_string(f.dir.join("proj/.mcp.json")).expect("read"),
        mcp
    );
    assert_eq!(fs::read_to_string(f.claude_json()).expect("read"), claude);
}

#[test]
fn other_clients_are_detected_wrapped_in_place_and_restored() {
    let f = Fixture::new("clients");
    let (exe, args) = peer_cmd(&f);
    // Cursor (user), VS Code (workspace, JSONC with comments), Zed (JSONC).
    let cursor = format!(
        "{{\n    \"mcpServers\": {{\n        \"c1\": {{\"command\": \"{exe}\", \"args\": {args}, \"env\": {{\"K\": \"${{env:K}}\"}}}},\n        \"web\": {{\"url\": \"https://x/mcp\"}}\n    }}\n}}\n"
    );
    fs::create_dir_all(f.dir.join("home/.cursor")).expect("mkdir");
    fs::write(f.dir.join("home/.cursor/mcp.json"), &cursor).expect("write");
    let vscode = format!(
        "{{\n  // workspace servers\n  \"inputs\": [{{\"type\": \"promptString\", \"id\": \"tok\", \"password\": true}}],\n  \"servers\": {{\n    \"v1\": {{\"type\": \"stdio\", \"command\": \"{exe}\", \"args\": {args}, \"env\": {{\"T\": \"${{input:tok}}\"}}}}, // mine\n  }},\n}}\n"
    );
    fs::create_dir_all(f.dir.join("proj/.vscode")).expect("mkdir");
    fs::write(f.dir.join("proj/.vscode/mcp.json"), &vscode).expect("write");
    let zed = format!(
        "// Zed settings\n{{\n  \"theme\": \"One\",\n  \"context_servers\": {{\n    \"z1\": {{\"command\": \"{exe}\", \"args\": {args}}}\n  }}\n}}\n"
    );
    fs::create_dir_all(f.dir.join("home/.config/zed")).expect("mkdir");
    fs::write(f.dir.join("home/.config/zed/settings.json"), &zed).expect("write");

    let out = f.bir(&["install"]);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(
        all.contains("Cursor (user)")
            && all.contains("VS Code (workspace)")
            && all.contains("Zed (user)"),
        "{all}"
    );
    assert!(all.contains("remote server: no credential header"), "{all}");
    let cursor_now: Value = serde_json::from_str(
        &fs::read_to_string(f.dir.join("home/.cursor/mcp.json")).expect("read"),
    )
    .expect("json");
    entry_answers(&f.dir, &cursor_now["mcpServers"]["c1"]).expect("cursor entry answers");
    assert_eq!(
        cursor_now["mcpServers"]["c1"]["env"],
        json!({"K": "${env:K}"})
    );
    let vs_now = fs::read_to_string(f.dir.join("proj/.vscode/mcp.json")).expect("read");
    assert!(
        vs_now.contains("// workspace servers") && vs_now.contains("// mine"),
        "{vs_now}"
    );
    assert!(vs_now.contains("\"--server-name\", \"v1\""), "{vs_now}");
    let zed_now = fs::read_to_string(f.dir.join("home/.config/zed/settings.json")).expect("read");
    assert!(
        zed_now.starts_with("// Zed settings") && zed_now.contains("\"z1\""),
        "{zed_now}"
    );

    let out = f.bir(&["status"]);
    let all = text(&out);
    assert!(
        all.contains("Cursor (user)") && all.contains("wrapped    →"),
        "{all}"
    );
    let out = f.bir(&["doctor"]);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    for name in ["c1", "v1", "z1"] {
        let row = all
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_default();
        assert!(row.contains("OK"), "{name}: {all}");
    }

    // Idempotent, then undone per client, then everything.
    let out = f.bir(&["install"]);
    assert!(text(&out).contains("Nothing to change"), "{}", text(&out));
    let out = f.bir(&["uninstall", "--client", "cursor"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        fs::read_to_string(f.dir.join("home/.cursor/mcp.json")).expect("read"),
        cursor
    );
    assert_ne!(
        fs::read_to_string(f.dir.join("proj/.vscode/mcp.json")).expect("read"),
        vscode
    );
    let out = f.bir(&["uninstall"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        fs::read_to_string(f.dir.join("proj/.vscode/mcp.json")).expect("read"),
        vscode
    );
    assert_eq!(
        fs::read_to_string(f.dir.join("home/.config/zed/settings.json")).expect("read"),
        zed
    );

    // A generic file.
    let generic = f.dir.join("other.json");
    let text0 = format!(
        "{{\"mcpServers\":{{\"g\":{{\"command\":\"{exe}\",\"args\":{}}}}}}}",
        args.replace(", ", ",")
    );
    fs::write(&generic, &text0).expect("write");
    let g = generic.to_str().expect("utf-8");
    let out = f.bir(&["install", "--config", g]);
    assert!(out.status.success(), "{}", text(&out));
    let now = fs::read_to_string(&generic).expect("read");
    assert!(
        !now.contains('\n') && now.contains("\"--server-name\",\"g\""),
        "{now}"
    );
    let out = f.bir(&["uninstall", "--config", g]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(fs::read_to_string(&generic).expect("read"), text0);

    let out = f.bir(&["install", "--client", "nope"]);
    assert_eq!(out.status.code(), Some(2), "a wrong value is a usage error");
    assert!(
        text(&out).contains("no adapter for client \"nope\""),
        "{}",
        text(&out)
    );
}

#[test]
fn codex_toml_is_wrapped_in_place_and_restored_byte_for_byte() {
    let f = Fixture::new("codex");
    let exe = bir();
    let script = peer_script(&f.dir);
    let toml = format!(
        "# Codex\r\nmodel = \"o3\"\r\n\r\n[mcp_servers.peer]\r\ncommand = '{}'  # the server\r\nargs = [ \"testpeer\", '{}' ]\r\nenv = {{ K = \"${{K}}\" }}\r\n\r\n[mcp_servers.web]\r\nurl = \"https://x/mcp\"\r\n",
        exe.display(),
        script
    );
    fs::create_dir_all(f.dir.join("home/.codex")).expect("mkdir");
    let file = f.dir.join("home/.codex/config.toml");
    fs::write(&file, &toml).expect("write");
    let out = f.bir(&["install"]);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(
        all.contains("Codex (user)") && all.contains("remote Codex server"),
        "{all}"
    );
    let now = fs::read_to_string(&file).expect("read");
    assert!(
        now.starts_with("# Codex\r\nmodel = \"o3\"\r\n\r\n[mcp_servers.peer]\r\ncommand = \""),
        "{now}"
    );
    assert!(now.contains("\"--server-name\", \"peer\", \"--\""), "{now}");
    assert!(
        now.contains("  # the server\r\n") && now.contains("env = { K = \"${K}\" }"),
        "{now}"
    );
    let out = f.bir(&["doctor", "--client", "codex"]);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(
        all.lines()
            .any(|l| l.trim_start().starts_with("peer") && l.contains("OK")),
        "{all}"
    );
    let out = f.bir(&["install"]);
    assert!(text(&out).contains("Nothing to change"), "{}", text(&out));
    let out = f.bir(&["uninstall", "--dry-run"]);
    assert!(text(&out).contains("+command = '"), "{}", text(&out));
    let out = f.bir(&["uninstall"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(fs::read_to_string(&file).expect("read"), toml);

    // Malformed TOML: refused with its position, untouched.
    let bad = "[mcp_servers.x]\ncommand = \n";
    fs::write(&file, bad).expect("write");
    let out = f.bir(&["install", "--client", "codex"]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(all.contains(&format!("{}:2:", file.display())), "{all}");
    assert_eq!(fs::read_to_string(&file).expect("read"), bad);
}

#[test]
fn claude_install_into_an_empty_config_round_trips() {
    let f = Fixture::new("cc-empty");
    let (exe, args) = peer_cmd(&f);
    fs::write(
        f.dir.join("proj/.mcp.json"),
        format!(r#"{{"mcpServers": {{"a": {{"command": "{exe}", "args": {args}}}, "b": {{"command": "{exe}", "args": {args}}}}}}}"#),
    )
    .expect("write");
    // User settings: approvals there count whether or not the folder is
    // trusted.
    fs::create_dir_all(f.dir.join("home/.claude")).expect("mkdir");
    fs::write(
        f.dir.join("home/.claude/settings.json"),
        r#"{"enabledMcpjsonServers": ["a", "b"]}"#,
    )
    .expect("write");
    for original in ["{}\n", "{\n  \"numStartups\": 1\n}"] {
        fs::write(f.claude_json(), original).expect("write");
        let out = f.bir(&["install"]);
        assert!(out.status.success(), "{}", text(&out));
        assert_eq!(effective(&f)["b"]["args"][0], json!("proxy"));
        let out = f.bir(&["uninstall"]);
        assert!(out.status.success(), "{}", text(&out));
        assert_eq!(fs::read_to_string(f.claude_json()).expect("read"), original);
    }
    // No ~/.claude.json at all: created (0600) with the copies.
    fs::remove_file(f.claude_json()).expect("rm");
    let out = f.bir(&["install"]);
    assert!(out.status.success(), "{}", text(&out));
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        fs::metadata(f.claude_json())
            .expect("created")
            .permissions()
            .mode()
            & 0o777,
        0o600
    );
}

#[test]
fn claude_project_approvals_count_only_in_a_trusted_folder() {
    let f = Fixture::new("cc-trust");
    let (exe, args) = peer_cmd(&f);
    let project = f.project();
    fs::write(
        f.dir.join("proj/.mcp.json"),
        format!(r#"{{"mcpServers": {{"a": {{"command": "{exe}", "args": {args}}}}}}}"#),
    )
    .expect("write");
    fs::write(
        f.dir.join("proj/.claude/settings.local.json"),
        r#"{"enabledMcpjsonServers": ["a"]}"#,
    )
    .expect("write");
    let untrusted = format!(
        "{{\n  \"projects\": {{\n    \"{project}\": {{\"hasTrustDialogAccepted\": false}}\n  }}\n}}\n"
    );
    fs::write(f.claude_json(), &untrusted).expect("write");
    let out = f.bir(&["install"]);
    let all = text(&out);
    assert!(all.contains("ignores until the folder is trusted"), "{all}");
    assert_eq!(
        fs::read_to_string(f.claude_json()).expect("read"),
        untrusted
    );
    // Trusted (here through the git root): wrapped.
    fs::create_dir_all(f.dir.join("proj/.git")).expect("mkdir");
    fs::write(f.claude_json(), untrusted.replace("false", "true")).expect("write");
    let out = f.bir(&["install"]);
    assert!(text(&out).contains("wrapped  a "), "{}", text(&out));
}

/// The row of `name` in install/doctor output.
fn row_of(all: &str, name: &str) -> String {
    all.lines()
        .find(|l| l.split_whitespace().any(|w| w == name))
        .unwrap_or_default()
        .to_owned()
}

const SECRET: &str = "Bearer s3cr3t-t0ken-0123456789";

#[test]
fn claude_remote_entries_move_headers_into_env_and_round_trip() {
    let _serial = serial();
    let f = Fixture::new("cc-remote");
    let project = f.project();
    // Port 9 on loopback: nothing listens (doctor must fail, bounded).
    let claude = format!(
        r#"{{
  "mcpServers": {{
    "user-api": {{"type": "sse", "url": "http://127.0.0.1:9/sse", "headers": {{"X-Api-Key": "k-user-0123456789"}}}}
  }},
  "projects": {{
    "{project}": {{
      "mcpServers": {{
        "api": {{
          "type": "http",
          "url": "http://127.0.0.1:9/mcp",
          "headers": {{
            "Authorization": "{SECRET}",
            "X-Tenant": "t1"
          }},
          "timeout": 60000
        }}
      }},
      "hasTrustDialogAccepted": true
    }}
  }}
}}
"#
    );
    fs::write(f.claude_json(), &claude).expect("write");
    let mcp = r#"{
  "mcpServers": {
    "ph": {"type": "http", "url": "https://p.example.com/mcp", "headers": {"Authorization": "Bearer ${API_TOKEN}"}},
    "oauth-srv": {"type": "http", "url": "https://o.example.com/mcp", "oauth": {"clientId": "abc", "callbackPort": 8080}},
    "helper": {"type": "streamable-http", "url": "https://h.example.com/mcp", "headersHelper": "/usr/local/bin/mk"},
    "nocred": {"type": "http", "url": "https://n.example.com/mcp"}
  }}
"#;
    fs::write(f.dir.join("proj/.mcp.json"), mcp).expect("write");
    fs::write(
        f.dir.join("proj/.claude/settings.local.json"),
        r#"{"enableAllProjectMcpServers": true}"#,
    )
    .expect("write");

    let out = f.bir(&["install"]);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(row_of(&all, "api").contains("wrapped in place"), "{all}");
    assert!(
        row_of(&all, "user-api").contains("user scope entry → wrapped copy"),
        "{all}"
    );
    for (name, why) in [
        (
            "ph",
            "holds a ${VAR} placeholder: bir does not expand secrets",
        ),
        ("oauth-srv", "signs in itself (an oauth block)"),
        ("helper", "headersHelper"),
        ("nocred", "no credential header: the client signs in itself"),
    ] {
        let row = row_of(&all, name);
        assert!(
            row.contains("skipped") && row.contains(why),
            "{name}: {all}"
        );
        assert!(row.contains("--server"), "{name}: {all}");
    }
    assert!(!all.contains("s3cr3t"), "{all}");

    // The wrapped entries: a stdio entry; the headers only in env.
    let eff = effective(&f);
    let api = &eff["api"];
    assert_eq!(api["command"], json!(bir().to_str()), "{api}");
    assert_eq!(
        api["args"],
        json!([
            "proxy",
            "--server-name",
            "api",
            "--url",
            "http://127.0.0.1:9/mcp",
            "--transport",
            "http"
        ])
    );
    assert!(!api["args"].to_string().contains("s3cr3t"), "{api}");
    let headers: Value =
        serde_json::from_str(api["env"]["BIR_UPSTREAM_HEADERS"].as_str().expect("env"))
            .expect("json");
    assert_eq!(headers, json!({"Authorization": SECRET, "X-Tenant": "t1"}));
    assert_eq!(api["timeout"], json!(60000));
    for gone in ["type", "url", "headers"] {
        assert!(api.get(gone).is_none(), "{gone}: {api}");
    }
    let user_api = &eff["user-api"];
    assert_eq!(user_api["args"][6], json!("sse"), "{user_api}");
    assert!(
        user_api["env"]["BIR_UPSTREAM_HEADERS"]
            .as_str()
            .is_some_and(|h| h.contains("k-user-0123456789"))
    );
    // The ledger holds no credential value.
    let ledger =
        fs::read_to_string(f.dir.join("home/.baseinstrunner/installed.json")).expect("ledger");
    assert!(
        !ledger.contains("s3cr3t") && !ledger.contains("k-user-0123456789"),
        "{ledger}"
    );

    // Idempotent: a wrapped remote entry is recognised.
    let after_install = fs::read_to_string(f.claude_json()).expect("read");
    let out = f.bir(&["install"]);
    let all = text(&out);
    assert!(all.contains("Nothing to change"), "{all}");
    assert!(row_of(&all, "api").contains("already wrapped"), "{all}");
    assert_eq!(
        fs::read_to_string(f.claude_json()).expect("read"),
        after_install
    );
    let out = f.bir(&["status"]);
    assert!(
        row_of(&text(&out), "api")
            .contains("wrapped    local scope → http://127.0.0.1:9/mcp (http)"),
        "{}",
        text(&out)
    );

    // Doctor launches it like any wrapped entry; nothing listens, so it
    // fails (today's bir-proxy has no --url; tomorrow's: unreachable),
    // bounded, without printing the credential.
    let started = std::time::Instant::now();
    let out = f.bir(&["doctor", "--timeout-ms", "5000"]);
    let all = text(&out);
    assert!(started.elapsed() < scaled(Duration::from_secs(30)), "{all}");
    assert!(row_of(&all, "api").contains("FAILED"), "{all}");
    assert!(!all.contains("s3cr3t"), "{all}");

    // Uninstall: every byte back (the header value read from the entry).
    let out = f.bir(&["uninstall"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(fs::read_to_string(f.claude_json()).expect("read"), claude);
    assert_eq!(
        fs::read_to_string(f.dir.join("proj/.mcp.json")).expect("read"),
        mcp
    );

    // --server forces what the client signs in itself; a ${VAR} header
    // keeps its placeholder inside BIR_UPSTREAM_HEADERS (Claude Code
    // expands env values), never expanded by bir.
    let out = f.bir(&[
        "install",
        "--server",
        "ph",
        "--server",
        "oauth-srv",
        "--server",
        "nocred",
    ]);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(
        row_of(&all, "oauth-srv").contains("its oauth block no longer applies"),
        "{all}"
    );
    assert!(
        row_of(&all, "ph").contains("stays in env.BIR_UPSTREAM_HEADERS; Claude Code expands it"),
        "{all}"
    );
    let eff = effective(&f);
    assert_eq!(
        eff["ph"]["env"]["BIR_UPSTREAM_HEADERS"],
        json!(r#"{"Authorization":"Bearer ${API_TOKEN}"}"#),
        "{all}"
    );
    assert_eq!(
        eff["oauth-srv"]["args"][4],
        json!("https://o.example.com/mcp")
    );
    assert!(
        eff["oauth-srv"].get("oauth").is_none(),
        "{}",
        eff["oauth-srv"]
    );
    assert!(eff["nocred"].get("env").is_none(), "{}", eff["nocred"]);
    assert_eq!(eff["helper"]["headersHelper"], json!("/usr/local/bin/mk"));
    assert_eq!(eff["api"]["url"], json!("http://127.0.0.1:9/mcp"));
    let out = f.bir(&["uninstall"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(fs::read_to_string(f.claude_json()).expect("read"), claude);
    assert_eq!(
        fs::read_to_string(f.dir.join("proj/.mcp.json")).expect("read"),
        mcp
    );
}

#[test]
fn other_clients_remote_entries_wrap_in_place_and_refuse_placeholders() {
    let f = Fixture::new("clients-remote");
    // Cursor: a static header (wrapped), an ${env:…} header (refused even
    // with --server: Cursor is not known to expand env values).
    let cursor = "{\n  \"mcpServers\": {\n    \"web\": {\n      \"url\": \"https://w.example.com/mcp\",\n      \"headers\": {\"Authorization\": \"Bearer \\u0073tatic-0123456789\"}\n    },\n    \"envtok\": {\"url\": \"https://e.example.com/mcp\", \"headers\": {\"Authorization\": \"Bearer ${env:TOKEN}\"}}\n  }\n}\n";
    fs::create_dir_all(f.dir.join("home/.cursor")).expect("mkdir");
    fs::write(f.dir.join("home/.cursor/mcp.json"), cursor).expect("write");
    // VS Code (JSONC): the stdio entry keeps a type, "stdio".
    let vscode = "{\n  \"servers\": {\n    // remote\n    \"v\": {\"type\": \"sse\", \"url\": \"https://v.example.com/sse\", \"headers\": {\"X-Api-Key\": \"vk-0123456789\"}}, // mine\n  },\n}\n";
    fs::create_dir_all(f.dir.join("proj/.vscode")).expect("mkdir");
    fs::write(f.dir.join("proj/.vscode/mcp.json"), vscode).expect("write");

    let out = f.bir(&[
        "install", "--server", "web", "--server", "envtok", "--server", "v",
    ]);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(
        row_of(&all, "envtok").contains("refused (even with --server)"),
        "{all}"
    );
    let now: Value = serde_json::from_str(
        &fs::read_to_string(f.dir.join("home/.cursor/mcp.json")).expect("read"),
    )
    .expect("json");
    let web = &now["mcpServers"]["web"];
    assert_eq!(web["args"][3], json!("--url"), "{web}");
    assert_eq!(web["args"][6], json!("auto"), "{web}");
    assert!(!web["args"].to_string().contains("tatic-0123456789"));
    assert_eq!(
        web["env"]["BIR_UPSTREAM_HEADERS"],
        json!(r#"{"Authorization":"Bearer static-0123456789"}"#)
    );
    assert_eq!(
        now["mcpServers"]["envtok"]["url"],
        json!("https://e.example.com/mcp")
    );
    let vs_now = fs::read_to_string(f.dir.join("proj/.vscode/mcp.json")).expect("read");
    assert!(
        vs_now.contains("// remote") && vs_now.contains("// mine"),
        "{vs_now}"
    );
    assert!(vs_now.contains("\"type\": \"stdio\""), "{vs_now}");
    assert!(vs_now.contains("\"sse\""), "{vs_now}");

    // Idempotent, then every byte back — except a header value written
    // with a needless \u escape: the ledger withholds the value, and it
    // comes back from BIR_UPSTREAM_HEADERS in plain JSON escaping.
    let out = f.bir(&["install"]);
    assert!(text(&out).contains("Nothing to change"), "{}", text(&out));
    let out = f.bir(&["uninstall"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        fs::read_to_string(f.dir.join("proj/.vscode/mcp.json")).expect("read"),
        vscode
    );
    let back = fs::read_to_string(f.dir.join("home/.cursor/mcp.json")).expect("read");
    assert_eq!(back, cursor.replace("\\u0073tatic", "static"));
}

/// Every file under `dir` (recursively) whose bytes contain `needle`.
fn files_containing(dir: &Path, needle: &str) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = fs::read_dir(dir) else {
        return found;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            found.extend(files_containing(&p, needle));
        } else if fs::read(&p)
            .is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle.as_bytes()))
        {
            found.push(p);
        }
    }
    found
}

#[test]
fn a_wrapped_remote_entry_runs_without_its_credential_in_argv_or_logs() {
    let f = Fixture::new("cc-remote-argv");
    let project = f.project();
    // Port 9 on loopback: nothing listens, so the proxy answers with an
    // error at once and keeps running until its host closes stdin.
    let claude = format!(
        r#"{{
  "projects": {{
    "{project}": {{
      "mcpServers": {{
        "api": {{"type": "http", "url": "http://127.0.0.1:9/mcp", "headers": {{"Authorization": "{SECRET}"}}}}
      }},
      "hasTrustDialogAccepted": true
    }}
  }}
}}
"#
    );
    fs::write(f.claude_json(), &claude).expect("write");
    let out = f.bir(&["install", "--server", "api"]);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(!all.contains("s3cr3t"), "{all}");

    // Start the entry the way Claude Code does: command, args, env.
    let written: Value =
        serde_json::from_str(&fs::read_to_string(f.claude_json()).expect("read")).expect("json");
    let entry = &written["projects"][&project]["mcpServers"]["api"];
    assert!(!entry["args"].to_string().contains("s3cr3t"), "{entry}");
    let mut cmd = command(entry["command"].as_str().expect("command"), &f.dir);
    cmd.args(
        entry["args"]
            .as_array()
            .expect("args")
            .iter()
            .map(|a| a.as_str().expect("string arg")),
    );
    for (k, v) in entry["env"].as_object().expect("env") {
        cmd.env(k, v.as_str().expect("string env"));
    }
    // Even at the most verbose level nothing logs the credential.
    cmd.env("RUST_LOG", "trace");
    let mut host = Host::start(cmd);
    host.send(&json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"it","version":"1"}}}));
    assert!(
        host.wait_lines(1, Duration::from_secs(10)),
        "{}",
        host.stderr_so_far()
    );
    // The proxy is running (it answered and waits for more): what `ps`
    // shows of it never holds the credential; its environment does.
    let pid = host.pid();
    let cmdline = fs::read(format!("/proc/{pid}/cmdline")).expect("cmdline");
    let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
    assert!(
        cmdline.contains("--url http://127.0.0.1:9/mcp"),
        "{cmdline}"
    );
    assert!(!cmdline.contains("s3cr3t"), "{cmdline}");
    let environ = fs::read(format!("/proc/{pid}/environ")).expect("environ");
    assert!(String::from_utf8_lossy(&environ).contains("s3cr3t"));
    host.close_stdin();
    let seen = host.finish(Duration::from_secs(10));
    let answers = seen.messages();
    assert!(
        answers[0]["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("unreachable")),
        "{answers:?}"
    );
    assert!(!seen.stderr.is_empty(), "the failure is logged");
    assert!(!seen.stderr.contains("s3cr3t"), "{}", seen.stderr);
    assert!(!String::from_utf8_lossy(&seen.stdout).contains("s3cr3t"));
    // Nothing bir wrote (ledger, logs, recordings) holds it: only the
    // client's own config, where the client put it.
    assert_eq!(
        files_containing(&f.dir.join("home"), "s3cr3t"),
        vec![f.claude_json()]
    );
}

/// Runs bir with files capped at `max_bytes` (RLIMIT_FSIZE, SIGXFSZ
/// ignored): a write past the cap fails with EFBIG, like a full disk,
/// even for root (whom a read-only mode does not stop).
fn bir_with_file_cap(f: &Fixture, args: &[&str], max_bytes: u64) -> Output {
    use std::os::unix::process::CommandExt;
    let mut cmd = command(bir(), &f.dir);
    cmd.args(args)
        .env("BIR_CLAUDE_MANAGED_DIR", f.dir.join("managed"))
        .current_dir(f.dir.join("proj"));
    // SAFETY: signal and setrlimit are async-signal-safe; nothing is
    // allocated between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let cap = libc::rlimit {
                rlim_cur: max_bytes,
                rlim_max: max_bytes,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &cap) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.output().expect("run bir")
}

/// The sorted names in `dir` (a failed write must leave no new file).
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .expect("dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_write_that_fails_midway_leaves_the_config_untouched_and_no_temp_file() {
    let (f, claude, _) = standard_fixture("cc-efbig");
    let home = f.dir.join("home");
    let listed = names(&home);

    // Install: the temp file is cut off at the original's size (the wrapped
    // file is longer), so the write fails part-way through.
    let out = bir_with_file_cap(&f, &["install"], claude.len() as u64);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(
        all.contains("cannot write a temporary file")
            && all.contains(&format!("{} was not changed", f.claude_json().display()))
            && all.contains("free some space"),
        "{all}"
    );
    assert_eq!(fs::read_to_string(f.claude_json()).expect("read"), claude);
    assert_eq!(names(&home), listed, "no temp file, no ledger");

    // Uninstall: the restored file is shorter, so a smaller cap.
    let out = f.bir(&["install"]);
    assert!(out.status.success(), "{}", text(&out));
    let installed = fs::read_to_string(f.claude_json()).expect("read");
    let ledger = f.ledger();
    let listed = names(&home);
    let out = bir_with_file_cap(&f, &["uninstall"], 64);
    let all = text(&out);
    assert!(!out.status.success(), "{all}");
    assert!(all.contains("cannot write a temporary file"), "{all}");
    assert_eq!(
        fs::read_to_string(f.claude_json()).expect("read"),
        installed
    );
    assert_eq!(names(&home), listed, "no temp file left behind");
    assert_eq!(f.ledger(), ledger, "the changes stay recorded");
    // Once the disk has room again, uninstall restores every byte.
    let out = f.bir(&["uninstall"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(fs::read_to_string(f.claude_json()).expect("read"), claude);
}

/// A Codex config with one wrappable stdio server, as `bir install` finds it.
fn codex_config(f: &Fixture) -> String {
    format!(
        "[mcp_servers.peer]\ncommand = '{}'\nargs = [ \"testpeer\", '{}' ]\n",
        bir().display(),
        peer_script(&f.dir)
    )
}

/// The environment variable the probe below is driven by.
const CODEX_PROBE: &str = "BIR_IT_CODEX_HOME_PROBE";

/// A developer's `CODEX_HOME` (set in the test process, as it would be in
/// their shell) never reaches a spawned `bir`: `bir install` run by the
/// tests leaves the Codex config it names untouched and wraps the fixture
/// home's own `~/.codex/config.toml` instead.
///
/// The variable is set for a second run of this test binary (not with
/// `std::env::set_var`, which would race the other tests' threads); that
/// run executes [`codex_home_probe`].
#[test]
fn a_developer_codex_home_does_not_reach_a_spawned_bir() {
    let f = Fixture::new("codex-home-leak");
    let sentinel = f.dir.join("developer-codex");
    fs::create_dir_all(&sentinel).expect("mkdir");
    let config = sentinel.join("config.toml");
    let original = codex_config(&f);
    fs::write(&config, &original).expect("write");

    // The control: handed to bir on purpose, this CODEX_HOME is the one
    // `bir install` edits, so the check below can fail.
    let control = f.dir.join("control-codex");
    fs::create_dir_all(&control).expect("mkdir");
    fs::write(control.join("config.toml"), &original).expect("write");
    let out = command(bir(), &f.dir)
        .args(["install", "--client", "codex"])
        .env("CODEX_HOME", &control)
        .env("BIR_CLAUDE_MANAGED_DIR", f.dir.join("managed"))
        .current_dir(f.dir.join("proj"))
        .output()
        .expect("run bir");
    assert!(out.status.success(), "{}", text(&out));
    assert_ne!(
        fs::read_to_string(control.join("config.toml")).expect("read"),
        original,
        "a CODEX_HOME given to bir is where it installs"
    );

    let exe = std::env::current_exe().expect("the test binary");
    let out = std::process::Command::new(exe)
        .args([
            "--exact",
            "install_cli::codex_home_probe",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("CODEX_HOME", &sentinel)
        .env(CODEX_PROBE, "1")
        .output()
        .expect("run the probe");
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(all.contains("1 passed"), "the probe ran: {all}");
    assert_eq!(
        fs::read_to_string(&config).expect("read"),
        original,
        "the developer's Codex config is untouched"
    );
}

/// Run by [`a_developer_codex_home_does_not_reach_a_spawned_bir`] with
/// `CODEX_HOME` set; on its own it has nothing to check.
#[test]
#[ignore = "run by a_developer_codex_home_does_not_reach_a_spawned_bir"]
fn codex_home_probe() {
    if std::env::var_os(CODEX_PROBE).is_none() {
        return;
    }
    let developer = std::env::var_os("CODEX_HOME").expect("the driver sets CODEX_HOME");
    let f = Fixture::new("codex-home-probe");
    fs::create_dir_all(f.dir.join("home/.codex")).expect("mkdir");
    let own = f.dir.join("home/.codex/config.toml");
    let original = codex_config(&f);
    fs::write(&own, &original).expect("write");
    let out = f.bir(&["install", "--client", "codex"]);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(
        !all.contains(&*developer.to_string_lossy()),
        "bir saw the developer's CODEX_HOME: {all}"
    );
    assert!(
        fs::read_to_string(&own)
            .expect("read")
            .contains("\"--server-name\", \"peer\", \"--\""),
        "the fixture home's Codex config was wrapped: {all}"
    );
}

// ---------------------------------------------------------------------------
// Claude Code hooks (the bound tier): registered by `bir install`.

/// The events `bir install` registers with no guide armed (all of 2.1.332
/// but WorktreeCreate, MessageDisplay and PostToolBatch); these tests
/// register them as command hooks.
const HOOK_EVENTS: usize = 31;

fn settings(f: &Fixture) -> std::path::PathBuf {
    f.dir.join("home/.claude/settings.json")
}

/// The bir groups per event in a settings file: event → commands.
fn bir_hooks(file: &Path) -> serde_json::Map<String, Value> {
    let v: Value = serde_json::from_str(&fs::read_to_string(file).expect("read")).expect("json");
    let mut out = serde_json::Map::new();
    for (event, groups) in v["hooks"].as_object().cloned().unwrap_or_default() {
        let cmds: Vec<Value> = groups
            .as_array()
            .expect("array")
            .iter()
            .flat_map(|g| g["hooks"].as_array().cloned().unwrap_or_default())
            .filter(|h| h["command"].as_str().unwrap_or("").contains(" hooks "))
            .collect();
        if !cmds.is_empty() {
            out.insert(event, Value::Array(cmds));
        }
    }
    out
}

#[test]
fn claude_install_registers_hooks_beside_the_users_own_and_uninstall_restores_every_byte() {
    let f = Fixture::new("cc-hooks");
    fs::write(f.claude_json(), "{}\n").expect("write");
    fs::create_dir_all(f.dir.join("home/.claude")).expect("mkdir");
    // The user's own hooks (and other settings) in their own layout.
    let original = "{\n    \"model\": \"opus\",\n    \"hooks\": {\n        \"PreToolUse\": [\n            {\"matcher\": \"Bash\", \"hooks\": [{\"type\": \"command\", \"command\": \"~/guard.sh\"}]}\n        ],\n        \"Stop\": []\n    },\n    \"env\": {\"A\": \"1\"}\n}\n";
    fs::write(settings(&f), original).expect("write");

    let out = f.bir(&["install", "--hooks", "command", "--dry-run"]);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(all.contains("+                \"hooks\": ["), "{all}");
    assert_eq!(fs::read_to_string(settings(&f)).expect("read"), original);

    let out = f.bir(&["install", "--hooks", "command"]);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(
        all.contains("Claude Code hooks")
            && all.contains(&format!("registered {HOOK_EVENTS} events")),
        "{all}"
    );
    assert!(
        all.contains(&format!(
            "Changed: {} (bir's hooks for {HOOK_EVENTS} events). Nothing else in it was touched.",
            settings(&f).display()
        )),
        "{all}"
    );
    let after = fs::read_to_string(settings(&f)).expect("read");
    let v: Value = serde_json::from_str(&after).expect("still JSON");
    // The user's group stays first, untouched; bir's follows it.
    assert_eq!(
        v["hooks"]["PreToolUse"][0],
        json!({"matcher": "Bash", "hooks": [{"type": "command", "command": "~/guard.sh"}]})
    );
    assert!(after.contains("{\"matcher\": \"Bash\", \"hooks\": [{\"type\": \"command\", \"command\": \"~/guard.sh\"}]},\n"), "{after}");
    assert_eq!(v["model"], json!("opus"));
    assert_eq!(v["env"], json!({"A": "1"}));
    let ours = bir_hooks(&settings(&f));
    assert_eq!(ours.len(), HOOK_EVENTS, "{after}");
    assert!(
        !ours.contains_key("WorktreeCreate"),
        "WorktreeCreate's stdout replaces worktree creation"
    );
    for event in [
        "PreToolUse",
        "PostToolUse",
        "UserPromptSubmit",
        "SessionEnd",
        "SubagentStop",
        "Stop",
    ] {
        let cmds = ours[event].as_array().expect("cmds");
        assert_eq!(cmds.len(), 1, "{event}");
        assert_eq!(
            cmds[0],
            json!({"type": "command", "command": format!("{} hooks {event}", bir().display()), "timeout": 5}),
            "{event}"
        );
    }
    // The command runs: a hook answers with exit 0 and prints nothing.
    let hook = command("sh", &f.dir)
        .args([
            "-c",
            ours["UserPromptSubmit"][0]["command"]
                .as_str()
                .expect("cmd"),
        ])
        .stdin(std::process::Stdio::null())
        .env("BIR_OFF", "1")
        .output()
        .expect("run the hook");
    assert!(
        hook.status.success() && hook.stdout.is_empty(),
        "{}",
        text(&hook)
    );

    // Idempotent; status and doctor see them.
    let out = f.bir(&["install", "--hooks", "command"]);
    assert!(text(&out).contains("Nothing to change"), "{}", text(&out));
    assert_eq!(fs::read_to_string(settings(&f)).expect("read"), after);
    let out = f.bir(&["status"]);
    assert!(
        text(&out).contains(&format!("Hooks: installed in {}", settings(&f).display()))
            && text(&out).contains(&format!("{HOOK_EVENTS} of {HOOK_EVENTS} events")),
        "{}",
        text(&out)
    );
    let out = f.bir(&["doctor"]);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(
        all.contains("Hooks: ok:") && all.contains("(this bir)"),
        "{all}"
    );

    // A group the user adds meanwhile survives the uninstall.
    let out = f.bir(&["uninstall", "--dry-run"]);
    assert!(
        text(&out).contains("-                \"hooks\": ["),
        "{}",
        text(&out)
    );
    assert_eq!(fs::read_to_string(settings(&f)).expect("read"), after);
    let out = f.bir(&["uninstall"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(fs::read_to_string(settings(&f)).expect("read"), original);
    assert!(f.ledger().get("hooks").is_none(), "{}", f.ledger());
    let out = f.bir(&["status"]);
    assert!(
        text(&out).contains("Hooks: not registered"),
        "{}",
        text(&out)
    );

    // No settings file at all: created, and gone again after uninstall.
    fs::remove_file(settings(&f)).expect("rm");
    let out = f.bir(&["install", "--hooks", "command"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(bir_hooks(&settings(&f)).len(), HOOK_EVENTS);
    let out = f.bir(&["uninstall"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(!settings(&f).exists(), "{}", text(&out));
}

#[test]
fn claude_hooks_in_project_settings_say_where_they_load() {
    let f = Fixture::new("cc-hooks-proj");
    fs::write(f.claude_json(), "{}\n").expect("write");
    let out = f.bir(&["install", "--hooks", "project,command"]);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(
        all.contains("project settings load only when Claude Code starts in")
            && all.contains("trusted"),
        "{all}"
    );
    let file = f.dir.join("proj/.claude/settings.json");
    assert_eq!(bir_hooks(&file).len(), HOOK_EVENTS);
    assert!(!settings(&f).exists(), "user settings untouched");
    let out = f.bir(&["status"]);
    assert!(text(&out).contains("(project settings)"), "{}", text(&out));
    let out = f.bir(&["uninstall"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(!file.exists());
    // A wrong --hooks is a usage error (exit 2), said in one line.
    let out = f.bir(&["install", "--hooks", "nowhere"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains(
            "bir install: --hooks takes user or project, http or command (e.g. `project,command`), or none, not `nowhere`"
        ),
        "{}",
        text(&out)
    );
    let out = f.bir(&["install", "--hooks", "none"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(!file.exists() && !settings(&f).exists());
}

#[test]
fn claude_hooks_refuse_a_corrupted_settings_file_and_change_nothing() {
    let f = Fixture::new("cc-hooks-bad");
    fs::write(f.claude_json(), "{}\n").expect("write");
    fs::create_dir_all(f.dir.join("home/.claude")).expect("mkdir");
    for bad in [
        "{\n  \"hooks\": {\n    \"Stop\": [\n  }\n",
        "{\"hooks\": [\"not an object\"]}",
        "{\"hooks\": {\"Stop\": {\"hooks\": []}}}",
    ] {
        fs::write(settings(&f), bad).expect("write");
        let out = f.bir(&["install", "--hooks", "command"]);
        let all = text(&out);
        assert_eq!(out.status.code(), Some(1), "{all}");
        assert!(
            all.contains(&settings(&f).display().to_string())
                && all.contains("nothing was changed"),
            "{all}"
        );
        assert_eq!(fs::read_to_string(settings(&f)).expect("read"), bad);
        let ledger = f.dir.join("home/.baseinstrunner/installed.json");
        assert!(!ledger.exists() || f.ledger().get("hooks").is_none());
    }
    // The syntax error names its line.
    fs::write(settings(&f), "{\n  \"a\": 1,\n}\n").expect("write");
    let all = text(&f.bir(&["install", "--hooks", "command"]));
    assert!(all.contains("settings.json:2:9: trailing comma"), "{all}");
}

#[test]
fn doctor_names_hooks_that_run_a_binary_that_is_gone_and_install_repoints_them() {
    let f = Fixture::new("cc-hooks-stale");
    fs::write(f.claude_json(), "{}\n").expect("write");
    let out = command(bir(), &f.dir)
        .args(["install", "--hooks", "command"])
        .env("BIR_HOOKS_PATH", "/gone/bin/bir-hooks")
        .env("BIR_CLAUDE_MANAGED_DIR", f.dir.join("managed"))
        .env_remove("CLAUDE_CONFIG_DIR")
        .current_dir(f.dir.join("proj"))
        .output()
        .expect("run");
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        bir_hooks(&settings(&f)).len(),
        0,
        "the link form has no ` hooks ` word"
    );
    let out = f.bir(&["doctor"]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(
        all.contains("Hooks: PROBLEM:")
            && all.contains("/gone/bin/bir-hooks, which does not exist")
            && all.contains("Run `bir install` again"),
        "{all}"
    );
    let out = f.bir(&["install", "--hooks", "command"]);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(
        all.contains(&format!("repointed  {HOOK_EVENTS} hook(s)")),
        "{all}"
    );
    assert_eq!(bir_hooks(&settings(&f)).len(), HOOK_EVENTS);
    let out = f.bir(&["doctor"]);
    assert!(out.status.success(), "{}", text(&out));
    // Uninstall still finds them (by their command, not their path).
    let out = f.bir(&["uninstall"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(!settings(&f).exists(), "{}", text(&out));
}

#[test]
fn user_hooks_stay_while_another_project_still_uses_them() {
    let f = Fixture::new("cc-hooks-two");
    fs::write(f.claude_json(), "{}\n").expect("write");
    fs::create_dir_all(f.dir.join("proj2")).expect("mkdir");
    let proj2 = f.dir.join("proj2");
    let p2 = proj2.to_str().expect("utf-8");
    // The second project has a server to wrap: its install changes
    // something, so it counts among the hooks' users.
    let (exe, args) = peer_cmd(&f);
    fs::write(
        proj2.join(".mcp.json"),
        format!(r#"{{"mcpServers": {{"p2": {{"command": "{exe}", "args": {args}}}}}}}"#),
    )
    .expect("write");
    assert!(f.bir(&["install", "--hooks", "command"]).status.success());
    let out = f.bir(&[
        "install",
        "--hooks",
        "command",
        "--project",
        p2,
        "--server",
        "p2",
    ]);
    assert!(text(&out).contains("already registered"), "{}", text(&out));
    assert!(!text(&out).contains("Nothing to change"), "{}", text(&out));
    let out = f.bir(&["uninstall"]);
    assert!(
        text(&out).contains("kept (other projects"),
        "{}",
        text(&out)
    );
    assert_eq!(bir_hooks(&settings(&f)).len(), HOOK_EVENTS);
    let out = f.bir(&["uninstall", "--project", p2]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(!settings(&f).exists(), "{}", text(&out));
}

/// `bir install` in a directory with no MCP config, the user-wide hooks
/// already there, makes that directory's sessions recorded and says so;
/// run again it has nothing left to change, and changes nothing.
#[test]
fn an_install_that_changes_nothing_leaves_the_ledger_alone() {
    let f = Fixture::new("cc-hooks-noop");
    fs::write(f.claude_json(), "{}\n").expect("write");
    let empty = f.dir.join("empty");
    fs::create_dir_all(&empty).expect("mkdir");
    assert!(f.bir(&["install"]).status.success());
    let ledger_path = f.dir.join("home/.baseinstrunner/installed.json");

    let e = empty.to_str().expect("utf-8");
    let out = f.bir(&["install", "--project", e]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("are now recorded"), "{}", text(&out));
    assert!(!text(&out).contains("Nothing to change"), "{}", text(&out));
    let ledger_before = fs::read(&ledger_path).expect("ledger");

    let out = f.bir(&["install", "--project", e]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("Nothing to change."), "{}", text(&out));
    assert_eq!(
        fs::read(&ledger_path).expect("ledger"),
        ledger_before,
        "an install that changed nothing edited the ledger"
    );

    // The hooks stay while the other directory is recorded, and go with it.
    let out = f.bir(&["uninstall"]);
    assert!(
        text(&out).contains("kept (other projects"),
        "{}",
        text(&out)
    );
    let out = f.bir(&["uninstall", "--project", e]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(!settings(&f).exists(), "{}", text(&out));
}

/// The clients `bir install --help` names after `--client`.
fn clients_in_help(help: &str) -> Vec<String> {
    let start = help.find("\n  --client").expect("--client in the options");
    let rest = &help[start..];
    let colon = rest.find(':').expect("a list after --client");
    let end = rest.find("(default").expect("the default after the list");
    rest[colon + 1..end]
        .split(',')
        .map(|c| c.split_whitespace().collect::<String>())
        .filter(|c| !c.is_empty())
        .collect()
}

#[test]
fn install_help_names_exactly_the_clients_it_accepts() {
    let f = Fixture::new("help-clients");
    let help = text(&f.bir(&["install", "--help"]));
    let named = clients_in_help(&help);
    assert!(named.len() > 1, "{help}");

    // A wrong value: a usage error (exit 2) that lists what is accepted.
    let out = f.bir(&["install", "--client", "no-such-client"]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(2), "{all}");
    let known = &all[all.find("known: ").expect("the known clients") + 7..];
    let known: Vec<String> = known[..known.find(')').expect(")")]
        .split(',')
        .map(|c| c.trim().to_owned())
        .collect();
    let (mut a, mut b) = (named.clone(), known.clone());
    a.sort();
    b.sort();
    assert_eq!(a, b, "--help names {named:?}, bir accepts {known:?}");

    // Every client named is accepted: never a usage error (no config of
    // it here is a plain failure, exit 1, or nothing to change).
    for client in &named {
        let out = f.bir(&["install", "--client", client, "--dry-run"]);
        assert_ne!(out.status.code(), Some(2), "{client}: {}", text(&out));
        assert!(
            !text(&out).contains("no adapter"),
            "{client}: {}",
            text(&out)
        );
    }
}

#[test]
fn doctor_with_nothing_wrapped_does_not_say_every_server_answers() {
    let f = Fixture::new("doctor-none");
    fs::write(f.claude_json(), "{}\n").expect("write");
    let out = f.bir(&["doctor", "--client", "claude-code"]);
    let all = text(&out);
    assert!(!all.contains("All wrapped servers answer."), "{all}");
    assert!(all.contains("No wrapped servers to check"), "{all}");
}

#[test]
fn a_broken_mcp_json_is_not_sent_to_claude_code_backups() {
    let f = Fixture::new("broken-mcp-json");
    fs::write(f.claude_json(), "{}\n").expect("write");
    fs::write(f.dir.join("proj/.mcp.json"), "{\"mcpServers\": {").expect("write");
    let out = f.bir(&["install"]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(all.contains(".mcp.json"), "{all}");
    assert!(!all.contains("~/.claude/backups"), "{all}");
    // The hint stays where it applies: Claude Code's own .claude.json.
    fs::remove_file(f.dir.join("proj/.mcp.json")).expect("rm");
    fs::write(f.claude_json(), "{\"projects\": ").expect("write");
    let all = text(&f.bir(&["install"]));
    assert!(all.contains("~/.claude/backups"), "{all}");
}

/// `bir install --everywhere` is kept in the ledger with its date; `bir
/// uninstall --everywhere` takes back the choice alone (the hooks stay),
/// and the choice also goes with the last of bir's hooks.
#[test]
fn recording_everywhere_is_a_choice_kept_and_taken_back() {
    let f = Fixture::new("everywhere");
    fs::write(f.claude_json(), "{}\n").expect("write");
    let out = f.bir(&["install", "--everywhere", "--hooks", "command"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(f.ledger()["everywhere"]["at"].is_string(), "{}", f.ledger());
    let again = f.bir(&["install", "--everywhere", "--hooks", "command"]);
    assert!(
        text(&again).contains("Nothing to change."),
        "{}",
        text(&again)
    );

    let out = f.bir(&["uninstall", "--everywhere"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(f.ledger()["everywhere"].is_null(), "{}", f.ledger());
    assert_eq!(
        bir_hooks(&settings(&f)).len(),
        HOOK_EVENTS,
        "the hooks stay"
    );
    let out = f.bir(&["uninstall", "--everywhere"]);
    assert!(text(&out).contains("Nothing to undo"), "{}", text(&out));

    // Chosen again, then the last project uninstalled: the choice goes too.
    assert!(f.bir(&["install", "--everywhere"]).status.success());
    assert!(f.ledger()["everywhere"]["at"].is_string());
    let out = f.bir(&["uninstall"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(f.ledger()["everywhere"].is_null(), "{}", f.ledger());
    assert!(!settings(&f).exists(), "{}", text(&out));
}
