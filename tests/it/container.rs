//! The container recipe (`container/Dockerfile`: the static binary alone):
//! the release binary `make build` produces, copied alone into an empty
//! root and run there with `chroot`, answers `--version` and relays a stdio
//! session to `bir testpeer` (itself, from the same root), recording it.
//!
//! `chroot` needs root and the static binary needs `make build` (which
//! `make test` runs first). Without either, the test says SKIPPED on
//! stderr; under CI (`CI=true`) it fails instead, so CI always runs it.

use std::fs;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use serde_json::json;

use crate::support::{Host, TempDir};

/// The static release binary (`make build`), or `BIR_STATIC_BIN`.
fn static_binary() -> PathBuf {
    match std::env::var_os("BIR_STATIC_BIN") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!(
            "target/{}-unknown-linux-gnu/release/bir",
            std::env::consts::ARCH
        )),
    }
}

/// Why the test cannot run here, if it cannot.
fn missing() -> Option<String> {
    if !is_root() {
        return Some("chroot needs root".to_owned());
    }
    let bin = static_binary();
    if !bin.is_file() {
        return Some(format!(
            "no static binary at {} (make build)",
            bin.display()
        ));
    }
    None
}

/// Whether this process runs as root (its effective uid, from
/// `/proc/self/status`).
fn is_root() -> bool {
    fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|ids| ids.split_whitespace().nth(1))
            == Some("0")
    })
}

#[test]
fn the_static_binary_alone_in_an_empty_root_runs_and_relays() {
    if let Some(why) = missing() {
        let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
        assert!(!ci, "the container test must run under CI: {why}");
        eprintln!(
            "SKIPPED container::the_static_binary_alone_in_an_empty_root_runs_and_relays: {why}"
        );
        return;
    }
    let dir = TempDir::new("container");
    let root = dir.join("root");
    fs::create_dir_all(root.join("data")).expect("mkdir");
    fs::copy(static_binary(), root.join("bir")).expect("copy the binary");
    let script = json!({"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]});
    fs::write(root.join("peer.json"), script.to_string()).expect("script");
    let in_root = |args: &[&str]| {
        let mut cmd = Command::new("chroot");
        // PATH finds `chroot`; inside the root every program is named by
        // its absolute path.
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", "/data")
            .env("BIR_HOME", "/data/bir")
            .env("BIR_SERVICE_URL", "off")
            .arg(&root)
            .arg("/bir")
            .args(args);
        cmd
    };

    let out = in_root(&["--version"]).output().expect("run chroot");
    assert!(
        out.status.success(),
        "bir --version in an empty root: {:?} {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains(env!("CARGO_PKG_VERSION")));

    let mut host = Host::start(in_root(&[
        "proxy",
        "--server-name",
        "peer",
        "--",
        "/bir",
        "testpeer",
        "/peer.json",
    ]));
    host.send(&json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"it","version":"1"}}}));
    host.send(&json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"from the empty root"}}}));
    assert!(host.wait_lines(2, Duration::from_secs(30)), "no answers");
    let seen = host.finish(Duration::from_secs(20));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
    let relayed = String::from_utf8_lossy(&seen.stdout);
    assert!(relayed.contains("from the empty root"), "{relayed}");
    let runs: Vec<_> = fs::read_dir(root.join("data/bir/runs"))
        .expect("runs recorded inside the root")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".journal"))
        .collect();
    assert_eq!(runs.len(), 1, "one run recorded");
}
