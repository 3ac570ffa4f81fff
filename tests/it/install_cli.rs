//! `bir wrap`, `bir install`, `bir uninstall`, `bir status`, `bir doctor`
//! against fixture homes (temp `HOME`, `CLAUDE_CONFIG_DIR`, `BIR_HOME`).

use std::fs;
use std::path::Path;
use std::process::Output;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{Host, TempDir, bir, command};

fn run(dir: &TempDir, args: &[&str]) -> Output {
    command(bir(), dir)
        .args(args)
        .env_remove("BIR_PROXY_PATH")
        .env_remove("CLAUDE_CONFIG_DIR")
        .current_dir(dir.path())
        .output()
        .expect("run bir")
}

fn text(out: &Output) -> String {
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
