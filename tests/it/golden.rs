//! Golden transcripts: the core test of transparency.
//!
//! Each `golden/<case>.case.json` scripts a host and a fake upstream
//! (`bir testpeer`). The case runs twice — host ↔ upstream directly, and
//! host ↔ `bir-proxy` ↔ upstream — and the test requires:
//!
//! 1. the host received the same bytes both times, and saw the same exit;
//! 2. the upstream received the same bytes both times;
//! 3. what the host received through the proxy, its exit, and the step
//!    reports (volatile fields masked) equal `golden/<case>.expected`.
//!
//! Cases marked `"proxy_only": true` cover behaviour where the proxy answers
//! by design (a host line that is not JSON, a dead upstream, an oversized
//! answer): they skip 1–2 and rely on the expected file.
//!
//! Regenerate the expected files with `BIR_UPDATE_GOLDEN=1 cargo test
//! golden` (or `make golden`) and review the diff. A mismatch leaves
//! `golden/<case>.current` beside the expected file.

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64_lite::decode;
use std::collections::BTreeMap;

use serde_json::Value;
use serde_json::value::RawValue;

use crate::support::{Host, TempDir, bir, command};

mod base64_lite {
    /// Decodes standard base64 (test inputs only).
    pub fn decode(s: &str) -> Vec<u8> {
        let val = |c: u8| -> u32 {
            match c {
                b'A'..=b'Z' => (c - b'A') as u32,
                b'a'..=b'z' => (c - b'a' + 26) as u32,
                b'0'..=b'9' => (c - b'0' + 52) as u32,
                b'+' => 62,
                b'/' => 63,
                _ => 0,
            }
        };
        let clean: Vec<u8> = s
            .bytes()
            .filter(|&c| c != b'=' && !c.is_ascii_whitespace())
            .collect();
        let mut out = Vec::new();
        for chunk in clean.chunks(4) {
            let mut acc = 0u32;
            for (i, &c) in chunk.iter().enumerate() {
                acc |= val(c) << (18 - 6 * i);
            }
            let bytes = [(acc >> 16) as u8, (acc >> 8) as u8, acc as u8];
            out.extend_from_slice(&bytes[..chunk.len().saturating_sub(1)]);
        }
        out
    }
}

/// Everything observable about one run of a case.
struct Outcome {
    stdout: Vec<u8>,
    exit: String,
    upstream_received: Vec<u8>,
    /// Step reports: keys sorted, values exactly as the proxy wrote them.
    steps: Vec<BTreeMap<String, Box<RawValue>>>,
    /// The run the recorder stored, one record per line, volatile values
    /// masked.
    stored: Vec<String>,
}

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("golden")
}

fn run_case(case: &Value, name: &str, via_proxy: bool) -> Outcome {
    let dir = TempDir::new(&format!("golden-{name}"));
    let script = dir.script("peer.json", case.get("peer").unwrap_or(&Value::Null));
    let log = dir.join("upstream-received.log");
    let transcript = dir.join("transcript.jsonl");
    let peer_args = vec![
        "testpeer".to_string(),
        script.display().to_string(),
        "--log".into(),
        log.display().to_string(),
    ];
    let mut cmd = if via_proxy {
        let mut cmd = command(dir.proxy_link(), &dir);
        cmd.args(["--server-name", "peer", "--transcript"])
            .arg(&transcript);
        if let Some(extra) = case.get("proxy_args").and_then(Value::as_array) {
            cmd.args(extra.iter().filter_map(Value::as_str));
        }
        cmd.arg("--").arg(bir()).args(&peer_args);
        if let Some(env) = case.get("proxy_env").and_then(Value::as_object) {
            for (k, v) in env {
                cmd.env(k, v.as_str().unwrap_or_default());
            }
        }
        cmd
    } else {
        let mut cmd = command(bir(), &dir);
        cmd.args(&peer_args);
        cmd
    };
    cmd.current_dir(dir.path());
    let mut host = Host::start(cmd);
    let steps = case
        .get("host")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for step in &steps {
        if let Some(msg) = step.get("send") {
            host.send(msg);
        } else if let Some(raw) = step.get("send_raw").and_then(Value::as_str) {
            host.send_raw(raw.as_bytes());
        } else if let Some(b64) = step.get("send_b64").and_then(Value::as_str) {
            host.send_raw(&decode(b64));
        } else if let Some(n) = step.get("wait_lines").and_then(Value::as_u64) {
            assert!(
                host.wait_lines(n as usize, Duration::from_secs(10)),
                "{name} ({}): waited for {n} lines, got:\n{}\nstderr:\n{}",
                if via_proxy { "proxy" } else { "direct" },
                String::from_utf8_lossy(&host.stdout_so_far()),
                host.stderr_so_far()
            );
        } else if let Some(ms) = step.get("sleep_ms").and_then(Value::as_u64) {
            std::thread::sleep(Duration::from_millis(ms));
        } else if step.get("close_stdin").is_some() {
            host.close_stdin();
        } else {
            panic!("{name}: unknown host step {step}");
        }
    }
    let seen = host.finish(Duration::from_secs(15));
    let steps = std::fs::read_to_string(&transcript)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<BTreeMap<String, Box<RawValue>>>(l).ok())
        .filter(|v| v.get("type").is_some_and(|t| t.get() == r#""step""#))
        .map(mask_volatile)
        .collect();
    let exit = seen.exit();
    let stored = stored_records(&dir.join("home/.baseinstrunner/runs"));
    Outcome {
        stdout: seen.stdout,
        exit,
        upstream_received: std::fs::read(&log).unwrap_or_default(),
        steps,
        stored,
    }
}

/// The records of the (single) run in `runs_dir`, masked.
fn stored_records(runs_dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(runs_dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let data = std::fs::read(entry.path()).unwrap_or_default();
        let mut at = 0;
        // len | crc | payload | '\n'
        while at + 8 <= data.len() {
            let len =
                u32::from_le_bytes([data[at], data[at + 1], data[at + 2], data[at + 3]]) as usize;
            let Some(payload) = data.get(at + 8..at + 8 + len) else {
                break;
            };
            let mut record: Value =
                serde_json::from_slice(payload).expect("journal record is JSON");
            mask_record(&mut record);
            out.push(serde_json::to_string(&record).unwrap_or_default());
            at += 8 + len + 1;
        }
    }
    out
}

/// Masks what differs from run to run: ids, times, durations, paths.
fn mask_record(v: &mut Value) {
    const VOLATILE: [&str; 9] = [
        "id",
        "startedAt",
        "finishedAt",
        "durationMs",
        "totalToolMs",
        "cwd",
        "sessionId",
        "at",
        "birVersion",
    ];
    let mut stack = vec![v];
    while let Some(node) = stack.pop() {
        match node {
            Value::Object(map) => {
                for (k, child) in map.iter_mut() {
                    let volatile_id = k == "id"
                        && child
                            .as_str()
                            .is_some_and(|s| s.starts_with("run_") || s.starts_with("step_"));
                    if (VOLATILE.contains(&k.as_str()) && k != "id") || volatile_id {
                        *child = Value::String("<volatile>".into());
                    } else {
                        stack.push(child);
                    }
                }
            }
            Value::Array(items) => stack.extend(items.iter_mut()),
            _ => {}
        }
    }
}

fn mask_volatile(mut step: BTreeMap<String, Box<RawValue>>) -> BTreeMap<String, Box<RawValue>> {
    for key in ["startedAt", "durationMs", "sessionId"] {
        if let Some(v) = step.get_mut(key)
            && v.get() != "null"
        {
            *v = RawValue::from_string(r#""<volatile>""#.into()).expect("valid JSON");
        }
    }
    step
}

/// The expected-file rendering of an outcome.
fn render(o: &Outcome) -> Vec<u8> {
    let mut out = b"# what the host received through bir-proxy (exact bytes)\n".to_vec();
    out.extend_from_slice(&o.stdout);
    if !o.stdout.is_empty() && !o.stdout.ends_with(b"\n") {
        out.extend_from_slice(b"\n# (no newline at the end of the last line)\n");
    }
    out.extend_from_slice(format!("# exit: {}\n# step reports\n", o.exit).as_bytes());
    for step in &o.steps {
        out.extend_from_slice(serde_json::to_string(step).unwrap_or_default().as_bytes());
        out.push(b'\n');
    }
    out.extend_from_slice(b"# the run bir-proxy stored (journal records)\n");
    for record in &o.stored {
        out.extend_from_slice(record.as_bytes());
        out.push(b'\n');
    }
    out
}

#[test]
fn golden_transcripts() {
    let dir = golden_dir();
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("golden/ exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".case.json"))
        .collect();
    cases.sort();
    assert!(
        cases.len() >= 8,
        "expected the golden cases in {}",
        dir.display()
    );
    let update = std::env::var("BIR_UPDATE_GOLDEN").is_ok_and(|v| v == "1");
    let mut failures = Vec::new();
    for path in &cases {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".case.json"))
            .unwrap_or("case")
            .to_owned();
        let case: Value =
            serde_json::from_slice(&std::fs::read(path).expect("read case")).expect("case is JSON");
        let proxied = run_case(&case, &name, true);
        if !case
            .get("proxy_only")
            .and_then(Value::as_bool)
            .unwrap_or(false)
        {
            let direct = run_case(&case, &name, false);
            if direct.stdout != proxied.stdout {
                failures.push(format!(
                    "{name}: host saw different bytes\n--- direct\n{}\n--- via bir-proxy\n{}",
                    String::from_utf8_lossy(&direct.stdout),
                    String::from_utf8_lossy(&proxied.stdout)
                ));
            }
            if direct.exit != proxied.exit {
                failures.push(format!(
                    "{name}: exit differs: direct {}, via bir-proxy {}",
                    direct.exit, proxied.exit
                ));
            }
            if direct.upstream_received != proxied.upstream_received {
                failures.push(format!(
                    "{name}: upstream received different bytes\n--- direct\n{}\n--- via bir-proxy\n{}",
                    String::from_utf8_lossy(&direct.upstream_received),
                    String::from_utf8_lossy(&proxied.upstream_received)
                ));
            }
        }
        let rendered = render(&proxied);
        let expected_path = dir.join(format!("{name}.expected"));
        let current_path = dir.join(format!("{name}.current"));
        if update {
            std::fs::write(&expected_path, &rendered).expect("write golden");
            let _ = std::fs::remove_file(&current_path);
            continue;
        }
        match std::fs::read(&expected_path) {
            Ok(expected) if expected == rendered => {
                let _ = std::fs::remove_file(&current_path);
            }
            Ok(_) => {
                let _ = std::fs::write(&current_path, &rendered);
                failures.push(format!(
                    "{name}: differs from {} (see {}; accept with BIR_UPDATE_GOLDEN=1)",
                    expected_path.display(),
                    current_path.display()
                ));
            }
            Err(_) => {
                let _ = std::fs::write(&current_path, &rendered);
                failures.push(format!(
                    "{name}: no {} yet (wrote {}; accept with BIR_UPDATE_GOLDEN=1)",
                    expected_path.display(),
                    current_path.display()
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} golden case(s) failed:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}
