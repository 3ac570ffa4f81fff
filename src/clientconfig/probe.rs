//! Starting a configured MCP server entry the way its client would, and
//! checking that it answers (`bir doctor`).
//!
//! An entry is started from its own text: its `command` and `args`, its
//! `env` over the current environment, every string with `${VAR}` /
//! `${VAR:-default}` expanded by the one rule of [`super::vars`], the
//! project as working directory and `CLAUDE_PROJECT_DIR` set. The probe
//! speaks MCP as a client: `initialize`, `notifications/initialized`,
//! `tools/list`, all within one deadline; then it closes the server's
//! input and waits a bounded time before killing it, so no server it
//! started outlives it. What it keeps of the server's stderr is bounded
//! (the last 16 KiB), and only a short tail is reported.
//!
//! [`path_proxy`] is the other check of a started program: the first
//! `bir-proxy` on `PATH`, run with `--version` and compared with this bir.

use std::collections::VecDeque;
use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::entry::is_executable;
use super::jsonedit::{Doc, Flavor, Kind, Node};
use super::vars::expand_env;
use super::vocab::Found;
use crate::error::Error;

/// How a launched server did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Probe {
    Ok { tools: usize, server: String },
    Failed { why: String, stderr_tail: String },
}

/// How to start one entry: the program, its arguments and extra
/// environment (expanded), the working directory.
pub(crate) struct Launch {
    program: String,
    args: Vec<String>,
    env: Vec<(String, String)>,
    cwd: PathBuf,
}

fn launch_spec(entry: &Node, project: &Path) -> Result<Launch, Error> {
    let program = entry
        .get("command")
        .and_then(Node::as_str)
        .ok_or("no command")?;
    let args: Vec<String> = entry
        .get("args")
        .map(|a| {
            a.items()
                .iter()
                .filter_map(|i| i.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let mut env = Vec::new();
    if let Some(e) = entry.get("env") {
        for m in e.members() {
            if let Kind::String(v) = &m.value.kind {
                env.push((m.key.clone(), expand_env(v)));
            }
        }
    }
    Ok(Launch {
        program: expand_env(program),
        args: args.iter().map(|a| expand_env(a)).collect(),
        env,
        cwd: project.to_owned(),
    })
}

fn tail(buf: &Mutex<VecDeque<u8>>) -> String {
    let bytes: Vec<u8> = buf
        .lock()
        .map(|b| b.iter().copied().collect())
        .unwrap_or_default();
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let from = lines.len().saturating_sub(8);
    let mut out: Vec<&str> = Vec::new();
    // The first line that names an error, if the tail would cut it off
    // (Node prints the message, then a long stack).
    if let Some(first) = lines[..from]
        .iter()
        .find(|l| l.contains("Error") || l.contains("error:") || l.contains("Traceback"))
    {
        out.push(first);
        out.push("…");
    }
    out.extend(&lines[from..]);
    out.join("\n")
}

/// Starts the server and checks `initialize` + `tools/list` within
/// `deadline`.
pub(crate) fn probe(l: &Launch, deadline: Duration) -> Probe {
    let mut cmd = Command::new(&l.program);
    cmd.args(&l.args)
        .current_dir(&l.cwd)
        .env("CLAUDE_PROJECT_DIR", &l.cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in &l.env {
        cmd.env(k, v);
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            return Probe::Failed {
                why: format!("cannot start {}: {e}", l.program),
                stderr_tail: String::new(),
            };
        }
    };
    let stderr_buf = Arc::new(Mutex::new(VecDeque::new()));
    if let Some(mut err) = child.stderr.take() {
        let buf = Arc::clone(&stderr_buf);
        thread::spawn(move || {
            let mut chunk = [0u8; 4096];
            while let Ok(n) = err.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                if let Ok(mut b) = buf.lock() {
                    b.extend(&chunk[..n]);
                    while b.len() > 16 * 1024 {
                        b.pop_front();
                    }
                }
            }
        });
    }
    let (tx, rx) = mpsc::channel::<Value>();
    if let Some(stdout) = child.stdout.take() {
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Ok(v) = serde_json::from_str::<Value>(&line)
                    && tx.send(v).is_err()
                {
                    break;
                }
            }
        });
    }
    let mut stdin = child.stdin.take();
    let started = Instant::now();
    let mut send = |v: Value| {
        if let Some(s) = stdin.as_mut() {
            let mut line = v.to_string();
            line.push('\n');
            let _ = s.write_all(line.as_bytes()).and_then(|_| s.flush());
        }
    };
    let wait_for = |id: u64| -> Result<Value, Error> {
        loop {
            let left = deadline.saturating_sub(started.elapsed());
            match rx.recv_timeout(left) {
                Ok(v) if v.get("id") == Some(&json!(id)) && v.get("method").is_none() => {
                    return Ok(v);
                }
                Ok(_) => continue,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    return Err(Error::failure(format!(
                        "no answer within {} ms",
                        deadline.as_millis()
                    )));
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(Error::failure(
                        "the server closed its output (exited) before answering",
                    ));
                }
            }
        }
    };
    send(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "bir-doctor", "version": env!("CARGO_PKG_VERSION")}}}),
    );
    let result = wait_for(0).and_then(|init| {
        if let Some(e) = init.get("error") {
            return Err(Error::failure(format!("initialize failed: {e}")));
        }
        let server = init["result"]["serverInfo"]["name"]
            .as_str()
            .unwrap_or("?")
            .to_owned();
        send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
        let list = wait_for(1)?;
        if let Some(e) = list.get("error") {
            return Err(Error::failure(format!("tools/list failed: {e}")));
        }
        let tools = list["result"]["tools"].as_array().map_or(0, Vec::len);
        Ok((tools, server))
    });
    // Close the session like a client: end of input, then a bounded wait.
    drop(stdin);
    let stop_by = Instant::now() + Duration::from_secs(5);
    loop {
        match child.try_wait() {
            Ok(Some(_)) | Err(_) => break,
            Ok(None) if Instant::now() > stop_by => {
                let _ = child.kill();
                let _ = child.wait();
                break;
            }
            Ok(None) => thread::sleep(Duration::from_millis(10)),
        }
    }
    match result {
        Ok((tools, server)) => Probe::Ok { tools, server },
        Err(why) => {
            // Give the stderr copier a moment to catch the last lines.
            thread::sleep(Duration::from_millis(50));
            Probe::Failed {
                why: why.to_string(),
                stderr_tail: tail(&stderr_buf),
            }
        }
    }
}

/// How `found` is started in `project`: read from the entry's own text.
pub(crate) fn entry_launch(found: &Found, project: &Path) -> Result<Launch, Error> {
    let doc = Doc::parse(found.raw.as_bytes(), Flavor::Jsonc)
        .map_err(|e| Error::failure(e.to_string()))?;
    launch_spec(&doc.root, project)
}

/// The `bir-proxy` a bare `bir-proxy` command would start: the first
/// executable one on `PATH`, and what it says its version is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PathProxy {
    /// `PATH` is not set.
    NoPath,
    /// No `bir-proxy` on `PATH` (fine: bir's entries name absolute paths).
    Absent,
    /// Its `--version` line is this bir's.
    Same { path: PathBuf, version: String },
    /// Its `--version` line (`theirs`) is not this bir's (`mine`).
    Differs {
        path: PathBuf,
        theirs: String,
        mine: String,
    },
    /// It could not be run.
    DoesNotRun { path: PathBuf, error: String },
}

/// Finds `bir-proxy` in `path` (the value of `PATH`, None when unset) and
/// runs it with `--version` (stdin closed) to compare with this bir's
/// version line.
pub(crate) fn path_proxy(path: Option<&OsStr>) -> PathProxy {
    let Some(path) = path else {
        return PathProxy::NoPath;
    };
    let found = std::env::split_paths(path)
        .map(|d| d.join("bir-proxy"))
        .find(|p| is_executable(p));
    let Some(p) = found else {
        return PathProxy::Absent;
    };
    let mine = crate::cli::version_line("bir-proxy");
    match Command::new(&p)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
    {
        Ok(o) => {
            let theirs = String::from_utf8_lossy(&o.stdout).trim().to_owned();
            if theirs == mine {
                PathProxy::Same {
                    path: p,
                    version: theirs,
                }
            } else {
                PathProxy::Differs {
                    path: p,
                    theirs,
                    mine,
                }
            }
        }
        Err(e) => PathProxy::DoesNotRun {
            path: p,
            error: e.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn script(dir: &Path, body: &str) {
        std::fs::create_dir_all(dir).expect("mkdir");
        let file = dir.join("bir-proxy");
        std::fs::write(&file, format!("#!/bin/sh\n{body}\n")).expect("write");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }

    #[test]
    fn path_proxy_finds_the_first_executable_one_and_compares_its_version() {
        let base = std::env::temp_dir().join(format!("bir-path-proxy-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let (empty, old, same) = (base.join("empty"), base.join("old"), base.join("same"));
        std::fs::create_dir_all(&empty).expect("mkdir");
        script(&old, "echo 'bir-proxy 0.0.1'");
        let mine = crate::cli::version_line("bir-proxy");
        script(&same, &format!("echo '{mine}'"));
        let path = |dirs: &[&Path]| std::env::join_paths(dirs).expect("join");
        // A script just written may be briefly "busy" while another test
        // thread forks: run it again then.
        let path_proxy = |p: Option<&OsStr>| {
            let mut got = path_proxy(p);
            for _ in 0..50 {
                match &got {
                    PathProxy::DoesNotRun { error, .. } if error.contains("busy") => {
                        std::thread::sleep(Duration::from_millis(20));
                        got = super::path_proxy(p);
                    }
                    _ => break,
                }
            }
            got
        };

        assert_eq!(path_proxy(None), PathProxy::NoPath);
        assert_eq!(
            path_proxy(Some(path(&[&empty]).as_os_str())),
            PathProxy::Absent
        );
        assert_eq!(
            path_proxy(Some(path(&[&empty, &same, &old]).as_os_str())),
            PathProxy::Same {
                path: same.join("bir-proxy"),
                version: mine.clone()
            }
        );
        assert_eq!(
            path_proxy(Some(path(&[&old, &same]).as_os_str())),
            PathProxy::Differs {
                path: old.join("bir-proxy"),
                theirs: "bir-proxy 0.0.1".into(),
                mine
            }
        );
        let _ = std::fs::remove_dir_all(&base);
    }
}
