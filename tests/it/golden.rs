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
//! Cases with `"lazy": {…}` run a third time, through `bir-proxy --lazy`,
//! in the same home as the proxied run, so the snapshot that run recorded
//! is there to answer from (`"lazy": {"prime": [host steps]}` first runs
//! another, eager session to record it: a session that calls no tool
//! records no run). The test requires that the lazy run's host received
//! the same bytes, saw the same exit and produced the same step reports as
//! the eager one; the expected file adds whether the lazy proxy started
//! the server and what the lazy run stored.
//!
//! Each case is its own test, named after its file (`golden::smoke` runs
//! `golden/smoke.case.json`), so one case runs alone
//! (`cargo test --test it golden::smoke`) and a failure names its case.
//! A case file must be listed in [`golden_cases!`]; a test checks none is
//! forgotten.
//!
//! Regenerate the expected files with `BIR_UPDATE_GOLDEN=1 cargo test
//! --test it golden::` (or `make golden`) and review the diff. A mismatch
//! leaves `golden/<case>.current` beside the expected file.
//!
//! The stored run is read with the crate's own journal reader
//! (`bir::read_journal`) and `send_b64` steps decoded with its codec
//! (`bir::base64_decode`): the harness checks what bir stored, it does not
//! carry a second copy of the format.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bir::{base64_decode, read_journal};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::support::{Host, TempDir, bir, command};

/// Everything observable about one run of a case.
struct Outcome {
    stdout: Vec<u8>,
    exit: String,
    /// Whether the upstream was started at all.
    upstream_started: bool,
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

/// How a case's host reaches its upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Via {
    Direct,
    Proxy,
    /// `bir-proxy --lazy`, in a home where a snapshot was recorded.
    LazyProxy,
}

/// Runs the host steps `steps` against the case's peer in `dir` (its
/// home keeps the runs of earlier sessions in the same dir; `stored` has
/// only this session's).
fn run_case(case: &Value, name: &str, via: Via, dir: &TempDir, steps: &[Value]) -> Outcome {
    let via_proxy = via != Via::Direct;
    let script = dir.script("peer.json", case.get("peer").unwrap_or(&Value::Null));
    let log = dir.join("upstream-received.log");
    let transcript = dir.join("transcript.jsonl");
    let _ = std::fs::remove_file(&log);
    let _ = std::fs::remove_file(&transcript);
    let runs_dir = dir.join("home/.baseinstrunner/runs");
    let earlier = journals(&runs_dir);
    let peer_args = vec![
        "testpeer".to_string(),
        script.display().to_string(),
        "--log".into(),
        log.display().to_string(),
    ];
    let mut cmd = if via_proxy {
        let mut cmd = command(dir.proxy_link(), dir);
        cmd.args(["--server-name", "peer", "--transcript"])
            .arg(&transcript);
        if via == Via::LazyProxy {
            cmd.arg("--lazy");
        }
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
        let mut cmd = command(bir(), dir);
        cmd.args(&peer_args);
        cmd
    };
    cmd.current_dir(dir.path());
    let mut host = Host::start(cmd);
    for step in steps {
        if let Some(msg) = step.get("send") {
            host.send(msg);
        } else if let Some(raw) = step.get("send_raw").and_then(Value::as_str) {
            host.send_raw(raw.as_bytes());
        } else if let Some(b64) = step.get("send_b64").and_then(Value::as_str) {
            let bytes = base64_decode(b64.as_bytes())
                .unwrap_or_else(|| panic!("{name}: send_b64 is not base64: {b64}"));
            host.send_raw(&bytes);
        } else if let Some(n) = step.get("wait_lines").and_then(Value::as_u64) {
            assert!(
                host.wait_lines(n as usize, Duration::from_secs(10)),
                "{name} ({via:?}): waited for {n} lines, got:\n{}\nstderr:\n{}",
                String::from_utf8_lossy(&host.stdout_so_far()),
                host.stderr_so_far()
            );
        } else if let Some(ms) = step.get("sleep_ms").and_then(Value::as_u64) {
            // A transcript's scripted pause, not a wait for an event.
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
    let stored = stored_records(&runs_dir, &earlier);
    Outcome {
        stdout: seen.stdout,
        exit,
        // The peer creates its log when it starts.
        upstream_started: log.exists(),
        upstream_received: std::fs::read(&log).unwrap_or_default(),
        steps,
        stored,
    }
}

/// The journals in `runs_dir`, sorted.
fn journals(runs_dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(runs_dir) else {
        return Vec::new();
    };
    let mut journals: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    journals.sort();
    journals
}

/// The records of the (single) run in `runs_dir` that is not one of
/// `earlier`, masked.
fn stored_records(runs_dir: &Path, earlier: &[PathBuf]) -> Vec<String> {
    let mut out = Vec::new();
    for path in journals(runs_dir)
        .into_iter()
        .filter(|p| !earlier.contains(p))
    {
        let read = read_journal(&path).expect("read the journal");
        assert_eq!(read.torn_bytes, 0, "{}: a torn tail", path.display());
        for payload in read.records {
            let mut record: Value =
                serde_json::from_slice(&payload).expect("journal record is JSON");
            mask_record(&mut record);
            out.push(serde_json::to_string(&record).unwrap_or_default());
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
                // A snapshot's `commandDigest` hashes the temporary paths
                // of the peer's command line (for `--lazy`): left out, so
                // the expectations need not change with it.
                map.remove("commandDigest");
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

/// The step reports, one JSON line each.
fn step_lines(o: &Outcome) -> Vec<String> {
    o.steps
        .iter()
        .map(|step| serde_json::to_string(step).unwrap_or_default())
        .collect()
}

/// The expected-file rendering of an outcome.
fn render(o: &Outcome) -> Vec<u8> {
    let mut out = b"# what the host received through bir-proxy (exact bytes)\n".to_vec();
    out.extend_from_slice(&o.stdout);
    if !o.stdout.is_empty() && !o.stdout.ends_with(b"\n") {
        out.extend_from_slice(b"\n# (no newline at the end of the last line)\n");
    }
    out.extend_from_slice(format!("# exit: {}\n# step reports\n", o.exit).as_bytes());
    for step in step_lines(o) {
        out.extend_from_slice(step.as_bytes());
        out.push(b'\n');
    }
    out.extend_from_slice(b"# the run bir-proxy stored (journal records)\n");
    for record in &o.stored {
        out.extend_from_slice(record.as_bytes());
        out.push(b'\n');
    }
    out
}

/// The expected-file rendering of a lazy run (after the eager one's,
/// whose host bytes, exit and step reports it was checked to share).
fn render_lazy(o: &Outcome) -> Vec<u8> {
    let mut out = b"# bir-proxy --lazy, from the snapshot recorded above: the host received the same bytes, saw the same exit, and the same steps were reported\n".to_vec();
    let started = if o.upstream_started { "yes" } else { "no" };
    out.extend_from_slice(format!("# --lazy started the server: {started}\n").as_bytes());
    out.extend_from_slice(b"# the run bir-proxy --lazy stored (journal records)\n");
    for record in &o.stored {
        out.extend_from_slice(record.as_bytes());
        out.push(b'\n');
    }
    out
}

/// The host steps at `key` of `within` (none if absent).
fn host_steps(within: &Value, key: &str) -> Vec<Value> {
    within
        .get(key)
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// One `#[test]` per case file: `name => "file stem"`.
macro_rules! golden_cases {
    ($($test:ident => $case:literal,)*) => {
        $(
            #[test]
            fn $test() {
                check_case($case);
            }
        )*

        /// Every case listed above, by file stem.
        const CASES: &[&str] = &[$($case),*];
    };
}

golden_cases! {
    batch_2025_03_26 => "batch-2025-03-26",
    cancellation => "cancellation",
    discover_probe_first => "discover-probe-first",
    exit_status_parity => "exit-status-parity",
    framing_and_numbers => "framing-and-numbers",
    host_sends_invalid_json => "host-sends-invalid-json",
    lazy_session_calls_a_tool => "lazy-session-calls-a-tool",
    lazy_session_never_calls => "lazy-session-never-calls",
    oversized_messages => "oversized-messages",
    server_notifications => "server-notifications",
    server_requests_the_host => "server-requests-the-host",
    smoke => "smoke",
    upstream_dies_mid_call => "upstream-dies-mid-call",
    upstream_killed_by_signal => "upstream-killed-by-signal",
}

/// Every `golden/*.case.json` has its test above, and every listed case
/// its file: a new case cannot be added without being run.
#[test]
fn every_case_file_has_a_test() {
    let mut on_disk: Vec<String> = std::fs::read_dir(golden_dir())
        .expect("golden/ exists")
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_suffix(".case.json"))
                .map(str::to_owned)
        })
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = CASES.iter().map(|&c| c.to_owned()).collect();
    listed.sort();
    assert_eq!(
        on_disk, listed,
        "golden_cases! lists exactly golden/*.case.json"
    );
}

/// What the host saw differently in two runs of a case (its bytes, its
/// exit), each run named by its label.
fn host_side_differences(a: (&str, &Outcome), b: (&str, &Outcome), failures: &mut Vec<String>) {
    let ((a_label, a), (b_label, b)) = (a, b);
    if a.stdout != b.stdout {
        failures.push(format!(
            "host saw different bytes\n--- {a_label}\n{}\n--- {b_label}\n{}",
            String::from_utf8_lossy(&a.stdout),
            String::from_utf8_lossy(&b.stdout)
        ));
    }
    if a.exit != b.exit {
        failures.push(format!(
            "exit differs: {a_label} {}, {b_label} {}",
            a.exit, b.exit
        ));
    }
}

/// Runs one case (direct and through the proxy) and compares it with its
/// expected file, or rewrites that file under `BIR_UPDATE_GOLDEN=1`.
fn check_case(name: &str) {
    let dir = golden_dir();
    let path = dir.join(format!("{name}.case.json"));
    let case: Value =
        serde_json::from_slice(&std::fs::read(&path).expect("read case")).expect("case is JSON");
    let update = std::env::var("BIR_UPDATE_GOLDEN").is_ok_and(|v| v == "1");
    let mut failures = Vec::new();
    let steps = host_steps(&case, "host");
    let proxy_dir = TempDir::new(&format!("golden-{name}"));
    let lazy = case.get("lazy");
    if let Some(lazy) = lazy {
        let prime = host_steps(lazy, "prime");
        if !prime.is_empty() {
            run_case(&case, name, Via::Proxy, &proxy_dir, &prime);
        }
    }
    let proxied = run_case(&case, name, Via::Proxy, &proxy_dir, &steps);
    if !case
        .get("proxy_only")
        .and_then(Value::as_bool)
        .unwrap_or(false)
    {
        let direct_dir = TempDir::new(&format!("golden-{name}"));
        let direct = run_case(&case, name, Via::Direct, &direct_dir, &steps);
        host_side_differences(
            ("direct", &direct),
            ("via bir-proxy", &proxied),
            &mut failures,
        );
        if direct.upstream_received != proxied.upstream_received {
            failures.push(format!(
                "upstream received different bytes\n--- direct\n{}\n--- via bir-proxy\n{}",
                String::from_utf8_lossy(&direct.upstream_received),
                String::from_utf8_lossy(&proxied.upstream_received)
            ));
        }
    }
    let mut rendered = render(&proxied);
    if lazy.is_some() {
        let lazy = run_case(&case, name, Via::LazyProxy, &proxy_dir, &steps);
        host_side_differences(("eager", &proxied), ("--lazy", &lazy), &mut failures);
        if step_lines(&lazy) != step_lines(&proxied) {
            failures.push(format!(
                "--lazy: other step reports\n--- eager\n{}\n--- lazy\n{}",
                step_lines(&proxied).join("\n"),
                step_lines(&lazy).join("\n")
            ));
        }
        rendered.extend(render_lazy(&lazy));
    }
    let expected_path = dir.join(format!("{name}.expected"));
    let current_path = dir.join(format!("{name}.current"));
    if update {
        std::fs::write(&expected_path, &rendered).expect("write golden");
        let _ = std::fs::remove_file(&current_path);
    } else {
        match std::fs::read(&expected_path) {
            Ok(expected) if expected == rendered => {
                let _ = std::fs::remove_file(&current_path);
            }
            Ok(_) => {
                let _ = std::fs::write(&current_path, &rendered);
                failures.push(format!(
                    "differs from {} (see {}; accept with BIR_UPDATE_GOLDEN=1)",
                    expected_path.display(),
                    current_path.display()
                ));
            }
            Err(_) => {
                let _ = std::fs::write(&current_path, &rendered);
                failures.push(format!(
                    "no {} yet (wrote {}; accept with BIR_UPDATE_GOLDEN=1)",
                    expected_path.display(),
                    current_path.display()
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "golden case {name} failed:\n\n{}",
        failures.join("\n\n")
    );
}
