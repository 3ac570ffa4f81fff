//! The store under a live proxy: two proxies
//! recording at once, retention and `bir sync` run by others while a run is
//! live, and the runs directory deleted or unwritable mid-session. The
//! relay must not notice any of it.

use std::collections::HashSet;
use std::path::PathBuf;
use std::process::Output;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use crate::record::{bir_cmd, call, export, init, proxy, runs_dir};
use crate::remote::{FakeService, Reply, creds_for, write_creds};
use crate::support::wait_until;
use crate::support::{Host, Seen, TempDir, alive, bir, command};

fn script() -> Value {
    json!({"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]})
}

/// `bir runs --json`: the runs, newest first.
pub(crate) fn listed_runs(dir: &TempDir) -> Vec<Value> {
    let (code, out, err) = bir_cmd(dir, &["runs", "--json", "--limit", "100"]);
    assert_eq!(code, 0, "{err}");
    out.lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn ids(runs: &[Value]) -> Vec<String> {
    runs.iter()
        .filter_map(|r| r["id"].as_str().map(str::to_owned))
        .collect()
}

/// The records of a run, as `bir runs export --format jsonl` gives them.
fn records(dir: &TempDir, id: &str) -> Vec<Value> {
    let (code, out, err) = bir_cmd(dir, &["runs", "export", id, "--format", "jsonl"]);
    assert_eq!(code, 0, "{err}");
    out.lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// A whole, finished run of `calls` calls: step indexes 1…, the
/// arguments of its calls in order, no torn bytes, not lossy.
fn assert_whole(dir: &TempDir, id: &str, calls: usize) -> Vec<Value> {
    let doc = export(dir, id);
    assert!(doc["finish"].is_object(), "{id} is not finished: {doc}");
    assert_eq!(doc["finish"]["lossy"], false, "{doc}");
    assert_eq!(doc["finish"]["metrics"]["toolCalls"], calls, "{doc}");
    assert_eq!(doc["tornBytes"], 0, "{doc}");
    let steps = doc["steps"].as_array().cloned().unwrap_or_default();
    assert_eq!(steps.len(), 2 * calls, "{doc}");
    for (k, step) in steps.iter().enumerate() {
        assert_eq!(step["stepIndex"], k + 1, "{id}: {step}");
    }
    steps
}

/// A host on a proxy, initialized.
fn start(cmd: std::process::Command) -> Host {
    let mut host = Host::start(cmd);
    host.send(&init());
    assert!(
        host.wait_lines(1, Duration::from_secs(10)),
        "no initialize answer"
    );
    host
}

/// A whole session of `calls` echo calls, with `env` set on the proxy.
fn session(dir: &TempDir, env: &[(&str, &str)], calls: u64) -> Seen {
    let mut cmd = proxy(dir, &script());
    cmd.envs(env.iter().copied());
    let mut host = start(cmd);
    for i in 1..=calls {
        host.send(&call(i, "echo", json!({"i": i})));
    }
    assert!(host.wait_lines(1 + calls as usize, Duration::from_secs(10)));
    let seen = host.finish(Duration::from_secs(5));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
    seen
}

/// The journal files in the store.
fn journals(dir: &TempDir) -> Vec<PathBuf> {
    std::fs::read_dir(runs_dir(dir))
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| p.to_string_lossy().ends_with(".journal"))
                .collect()
        })
        .unwrap_or_default()
}

/// The id of the one run that is still open, once its proxy wrote it.
fn open_run(dir: &TempDir, calls: u64) -> String {
    let mut id = String::new();
    wait_until("the live run in the store", Duration::from_secs(5), || {
        let open: Vec<Value> = listed_runs(dir)
            .into_iter()
            .filter(|r| r["state"] == "open" && r["toolCalls"] == calls)
            .collect();
        if let [run] = &open[..] {
            id = run["id"].as_str().unwrap_or("").to_owned();
        }
        !id.is_empty()
    });
    id
}

#[test]
fn two_proxies_recording_at_once_keep_their_runs_whole_and_apart() {
    let dir = TempDir::new("store-two");
    const CALLS: u64 = 30;
    let mut hosts = [start(proxy(&dir, &script())), start(proxy(&dir, &script()))];
    // Both proxies append at the same moments: the calls go in bursts, so
    // their answers (and journal writes) interleave.
    for i in 1..=CALLS {
        for (who, host) in ["a", "b"].iter().zip(hosts.iter_mut()) {
            let pad = "x".repeat(1000 + 97 * i as usize);
            host.send(&call(i, "echo", json!({"who": who, "i": i, "pad": pad})));
        }
    }
    for host in &hosts {
        assert!(host.wait_lines(1 + CALLS as usize, Duration::from_secs(10)));
    }
    for host in hosts {
        let seen = host.finish(Duration::from_secs(5));
        assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
    }

    let runs = listed_runs(&dir);
    assert_eq!(runs.len(), 2, "{runs:?}");
    let mut step_ids = HashSet::new();
    let mut owners = Vec::new();
    for id in ids(&runs) {
        let steps = assert_whole(&dir, &id, CALLS as usize);
        let who = steps[0]["input"]["who"].clone();
        let inputs: Vec<(Value, Value)> = steps
            .iter()
            .filter(|s| s["type"] == "tool_selected")
            .map(|s| (s["input"]["who"].clone(), s["input"]["i"].clone()))
            .collect();
        let want: Vec<(Value, Value)> = (1..=CALLS).map(|i| (who.clone(), json!(i))).collect();
        assert_eq!(inputs, want, "{id}: a step lost, reordered or mixed in");
        for step in &steps {
            let step_id = step["id"].as_str().unwrap_or("").to_owned();
            assert!(step_ids.insert(step_id), "a step id twice: {step}");
        }
        owners.push(who);
    }
    owners.sort_by_key(Value::to_string);
    assert_eq!(owners, [json!("a"), json!("b")]);
}

#[test]
fn retention_by_other_proxies_spares_a_live_run() {
    let dir = TempDir::new("store-retention");
    session(&dir, &[], 1);
    let oldest = ids(&listed_runs(&dir));
    let mut live = start(proxy(&dir, &script()));
    live.send(&call(1, "echo", json!({"live": 1})));
    assert!(live.wait_lines(2, Duration::from_secs(5)));
    let live_id = open_run(&dir, 1);
    // A newer finished run: the live one is now beyond BIR_RUNS_KEEP=1.
    session(&dir, &[], 1);
    session(&dir, &[("BIR_RUNS_KEEP", "1")], 1);
    let after_keep = ids(&listed_runs(&dir));
    assert!(
        !after_keep.contains(&oldest[0]),
        "retention ran: {after_keep:?}"
    );
    assert!(after_keep.contains(&live_id), "the live run was deleted");
    // Every finished run is older than zero days.
    session(&dir, &[("BIR_RUNS_MAX_AGE_DAYS", "0")], 1);
    let after_age = ids(&listed_runs(&dir));
    assert_eq!(after_age.len(), 2, "{after_age:?}");
    assert_eq!(after_age[1], live_id, "the live run was deleted");

    // The live run carries on and ends whole.
    live.send(&call(2, "echo", json!({"live": 2})));
    assert!(live.wait_lines(3, Duration::from_secs(5)));
    let seen = live.finish(Duration::from_secs(5));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
    let steps = assert_whole(&dir, &live_id, 2);
    assert_eq!(steps[2]["input"], json!({"live": 2}));
}

fn sync(dir: &TempDir, service: &str) -> Output {
    command(bir(), dir)
        .env("BIR_SERVICE_URL", service)
        .args(["sync"])
        .output()
        .expect("run bir sync")
}

/// Sets a file's modification time `ago` in the past.
fn backdate(path: &std::path::Path, ago: Duration) {
    std::fs::File::options()
        .append(true)
        .open(path)
        .expect("open")
        .set_modified(SystemTime::now() - ago)
        .expect("set mtime");
}

/// `bir sync` while a proxy records the same run to the same service:
/// whatever the moment, no step reaches the service twice, and the
/// journal's sequence numbers stay unique (sync never appends to a journal
/// a proxy is writing).
#[test]
fn bir_sync_leaves_a_live_run_to_its_proxy() {
    let dir = TempDir::new("store-sync");
    // While `hold` is set, a run's finish is held unanswered (a slow
    // service): the proxy is then still finishing its run, with the run's
    // end in the journal and its acknowledgements not yet noted.
    let hold = Arc::new(AtomicBool::new(true));
    let held = Arc::clone(&hold);
    let service = FakeService::start(move |r, _| {
        if held.load(Ordering::SeqCst) && r.path.ends_with("/finish") {
            Reply::Hang(Duration::from_secs(2))
        } else {
            Reply::Status(200)
        }
    });
    write_creds(&dir, &creds_for(&service.base));
    let mut cmd = proxy(&dir, &script());
    cmd.env("BIR_SERVICE_URL", &service.base);
    let mut live = start(cmd);
    live.send(&call(1, "echo", json!({"n": 1})));
    assert!(live.wait_lines(2, Duration::from_secs(5)));
    let steps_sent = |s: &FakeService| s.lines().iter().filter(|l| l.ends_with("/steps")).count();
    wait_until("the call at the service", Duration::from_secs(5), || {
        steps_sent(&service) == 2
    });
    let id = open_run(&dir, 1);

    // A session left idle for longer than sync's staleness rule (ten
    // minutes without a write) is still live.
    for journal in journals(&dir) {
        backdate(&journal, Duration::from_secs(11 * 60));
    }
    let out = sync(&dir, &service.base);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("still being recorded"), "{out:?}");
    assert_eq!(steps_sent(&service), 2, "a live run was sent by bir sync");

    // Finishing: the run's end is in the journal, its proxy still waits
    // for the service.
    live.send(&call(2, "echo", json!({"n": 2})));
    assert!(live.wait_lines(3, Duration::from_secs(5)));
    let pid = live.pid() as i32;
    live.close_stdin();
    wait_until(
        "the run's end in the journal",
        Duration::from_secs(5),
        || {
            journals(&dir).iter().any(|j| {
                String::from_utf8_lossy(&std::fs::read(j).unwrap_or_default())
                    .contains("run_finished")
            })
        },
    );
    let out = sync(&dir, &service.base);
    if alive(pid) {
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains("still being recorded"),
            "a finishing run was sent: {out:?}"
        );
    }
    let seen = live.finish(Duration::from_secs(5));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);

    // Over: `bir sync` sends what the proxy could not, once.
    hold.store(false, Ordering::SeqCst);
    let out = sync(&dir, &service.base);
    assert!(out.status.success(), "{out:?}");
    let out = sync(&dir, &service.base);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("Nothing to send"),
        "{out:?}"
    );

    let mut sent = HashSet::new();
    for r in service.requests() {
        if r.path.ends_with("/steps") {
            let step = r.json()["id"].as_str().unwrap_or("").to_owned();
            assert!(sent.insert(step), "step sent twice: {:?}", service.lines());
        }
    }
    assert_eq!(sent.len(), 4, "{:?}", service.lines());
    assert_eq!(
        service.lines().last().map(String::as_str),
        Some(&*format!("POST /recordings/runs/{id}/finish"))
    );
    let seqs: Vec<u64> = records(&dir, &id)
        .iter()
        .filter_map(|r| r["seq"].as_u64())
        .collect();
    let unique: HashSet<u64> = seqs.iter().copied().collect();
    assert_eq!(
        unique.len(),
        seqs.len(),
        "a seq twice in the journal: {seqs:?}"
    );
    assert_whole(&dir, &id, 2);
}

/// What a host sees of `testpeer` for these calls, without the proxy.
fn direct(dir: &TempDir, calls: &[Value]) -> Vec<u8> {
    let path = dir.script("direct.json", &script());
    let mut cmd = command(bir(), dir);
    cmd.arg("testpeer").arg(path);
    let mut host = start(cmd);
    for c in calls {
        host.send(c);
    }
    assert!(host.wait_lines(1 + calls.len(), Duration::from_secs(10)));
    host.finish(Duration::from_secs(5)).stdout
}

/// A session of `calls` in which `break_store` runs once the first
/// `before` of them are in the store; the rest follow at a pace that gives
/// the recorder idle moments between them. The host must see what it sees
/// without the proxy, byte for byte. Returns that, and the run's id.
fn session_breaking_the_store(
    dir: &TempDir,
    calls: &[Value],
    before: usize,
    break_store: impl FnOnce(),
) -> (Seen, String) {
    let mut live = start(proxy(dir, &script()));
    for c in &calls[..before] {
        live.send(c);
    }
    assert!(live.wait_lines(1 + before, Duration::from_secs(5)));
    let id = open_run(dir, before as u64);
    break_store();
    for (n, c) in calls[before..].iter().enumerate() {
        live.send(c);
        assert!(live.wait_lines(2 + before + n, Duration::from_secs(5)));
        // The pace that leaves the recorder idle between calls: the
        // point, not a wait for an event.
        std::thread::sleep(Duration::from_millis(60));
    }
    let seen = live.finish(Duration::from_secs(5));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
    assert_eq!(seen.stdout, direct(dir, calls), "the relay was disturbed");
    (seen, id)
}

/// Warnings the proxy printed.
fn warnings(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.contains(": warn: ")).collect()
}

/// `rm -rf` of the runs directory mid-session: the relay does not notice,
/// the proxy says so once, and the run goes on in a new journal that
/// still reads as that run (its header again, the loss counted).
#[test]
fn the_runs_directory_deleted_mid_session() {
    let dir = TempDir::new("store-deleted");
    let calls: Vec<Value> = (1..=6).map(|i| call(i, "echo", json!({"i": i}))).collect();
    let (seen, id) = session_breaking_the_store(&dir, &calls, 2, || {
        std::fs::remove_dir_all(runs_dir(&dir)).expect("rm -rf runs");
    });
    let warned = warnings(&seen.stderr);
    assert_eq!(warned.len(), 1, "{}", seen.stderr);
    assert!(warned[0].contains("was deleted"), "{}", seen.stderr);

    let runs = listed_runs(&dir);
    assert_eq!(ids(&runs), [id.as_str()], "{runs:?}");
    assert_eq!(runs[0]["state"], "finished,lossy", "{runs:?}");
    let doc = export(&dir, &id);
    assert_eq!(doc["run"]["id"], id, "the new journal names its run");
    let steps = doc["steps"].as_array().cloned().unwrap_or_default();
    let inputs: Vec<Value> = steps
        .iter()
        .filter(|s| s["type"] == "tool_selected")
        .map(|s| s["input"]["i"].clone())
        .collect();
    assert_eq!(inputs, [json!(3), json!(4), json!(5), json!(6)], "{doc}");
    assert_eq!(doc["finish"]["metrics"]["toolCalls"], 6, "{doc}");
    assert!(doc["finish"]["dropped"].as_u64() >= Some(4), "{doc}");
}

/// A store that cannot be created (its parent is a file), and one that
/// turns unwritable mid-session (the runs directory replaced by a file):
/// the relay goes on byte for byte, and the proxy warns, briefly.
#[test]
fn an_unwritable_store_leaves_the_relay_alone() {
    let dir = TempDir::new("store-unwritable");
    let calls: Vec<Value> = (1..=4).map(|i| call(i, "echo", json!({"i": i}))).collect();
    let want = direct(&dir, &calls);

    let blocker = dir.join("not-a-dir");
    std::fs::write(&blocker, "a file").expect("write");
    let home = blocker.join("bir");
    let mut cmd = proxy(&dir, &script());
    cmd.env("BIR_HOME", &home);
    let mut host = start(cmd);
    for c in &calls {
        host.send(c);
    }
    assert!(host.wait_lines(1 + calls.len(), Duration::from_secs(5)));
    let seen = host.finish(Duration::from_secs(5));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
    assert_eq!(seen.stdout, want, "the relay was disturbed");
    let warned = warnings(&seen.stderr);
    assert_eq!(warned.len(), 1, "{}", seen.stderr);
    assert!(
        warned[0].contains("runs will not be stored")
            && warned[0].contains(&*home.to_string_lossy()),
        "the warning names the store: {}",
        seen.stderr
    );

    // Writable at first, then not.
    let (seen, _) = session_breaking_the_store(&dir, &calls, 1, || {
        std::fs::remove_dir_all(runs_dir(&dir)).expect("rm -rf runs");
        std::fs::write(runs_dir(&dir), "a file").expect("write");
    });
    let warned = warnings(&seen.stderr);
    assert!(
        (1..=3).contains(&warned.len()),
        "one warning, and one at the end: {}",
        seen.stderr
    );
    assert!(
        warned.iter().any(|w| w.contains("cannot write run")),
        "{}",
        seen.stderr
    );
}
