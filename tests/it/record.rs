//! Recording through the real proxy: the run in the local store, `bir runs`,
//! crash safety of the journal, and switching recording off.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{Host, TempDir, bir, command};
use crate::support::{eventually, serial, wait_until};

pub(crate) fn init() -> Value {
    json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"it-host","version":"9"}}})
}

pub(crate) fn call(id: u64, tool: &str, args: Value) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":tool,"arguments":args}})
}

/// `bir-proxy --server-name peer -- bir testpeer <script>` (the script
/// written to `peer.json` in `dir`): the proxy every suite drives a
/// scripted server through; a caller adds its environment, and arguments
/// for the testpeer after the script.
pub(crate) fn proxy(dir: &TempDir, script: &Value) -> Command {
    let script = dir.script("peer.json", script);
    let mut cmd = command(dir.proxy_link(), dir);
    cmd.args(["--server-name", "peer", "--"])
        .arg(bir())
        .arg("testpeer")
        .arg(script);
    cmd
}

pub(crate) fn runs_dir(dir: &TempDir) -> std::path::PathBuf {
    dir.join("home/.baseinstrunner/runs")
}

pub(crate) fn bir_cmd(dir: &TempDir, args: &[&str]) -> (i32, String, String) {
    let out = command(bir(), dir).args(args).output().expect("run bir");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `bir runs export ID` (or `latest`), parsed.
pub(crate) fn export(dir: &TempDir, id: &str) -> Value {
    let (code, out, err) = bir_cmd(dir, &["runs", "export", id]);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).expect("export is JSON")
}

fn session(dir: &TempDir, script: &Value, calls: &[Value]) {
    let mut host = Host::start(proxy(dir, script));
    host.send(&init());
    for c in calls {
        host.send(c);
    }
    assert!(host.wait_lines(1 + calls.len(), Duration::from_secs(10)));
    let seen = host.finish(Duration::from_secs(5));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
}

/// Every field `bir runs` prints passes one escaping path, including those
/// a server picks: here the protocol version (the peer echoes the one the
/// host offered) carries an OSC sequence that would retitle the terminal.
#[test]
fn no_recorded_field_reaches_the_terminal_raw() {
    let dir = TempDir::new("runs-escape");
    let script = json!({"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]});
    let mut host = Host::start(proxy(&dir, &script));
    host.send(
        &json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
        "protocolVersion":"\u{1b}]0;pwned\u{7}2025-11-25\nforged line","capabilities":{},
        "clientInfo":{"name":"it\u{1b}[2Jhost","version":"9\u{9b}"}}}),
    );
    host.send(&call(1, "echo", json!({"message": "hi"})));
    assert!(host.wait_lines(2, Duration::from_secs(10)));
    let seen = host.finish(Duration::from_secs(5));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
    for args in [
        &["runs", "show", "latest"][..],
        &["runs", "show", "latest", "--full"],
        &["runs"],
    ] {
        let (code, shown, err) = bir_cmd(&dir, args);
        assert_eq!(code, 0, "{err}");
        let raw: Vec<char> = shown
            .chars()
            .filter(|c| c.is_control() && *c != '\n')
            .collect();
        assert!(raw.is_empty(), "bir {args:?} printed {raw:?} raw:\n{shown}");
        assert!(
            !shown.contains("\nforged line"),
            "a field started a line: {shown}"
        );
    }
    let (_, shown, _) = bir_cmd(&dir, &["runs", "show", "latest"]);
    assert!(
        shown.contains("protocol \\u{1b}]0;pwned\\u{7}2025-11-25"),
        "{shown}"
    );
}

/// `bir scenario derive` without `-o` prints the scenario: valid JSON
/// with the recorded values, and no C1 control (which JSON leaves raw)
/// reaching the terminal.
#[test]
fn a_derived_scenario_on_stdout_is_terminal_safe_json() {
    let dir = TempDir::new("derive-stdout");
    let script = json!({"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]});
    let args = json!({"text": "a\u{9b}2Jb\u{1b}]0;pwned\u{7}"});
    session(&dir, &script, &[call(1, "echo", args.clone())]);
    let (code, text, err) = bir_cmd(&dir, &["scenario", "derive", "latest"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        !text.contains(['\u{9b}', '\u{1b}', '\u{7}']),
        "a raw control character on stdout: {text:?}"
    );
    let scenario: Value = serde_json::from_str(&text).expect("the scenario is JSON");
    assert_eq!(scenario["steps"][0]["args"], args, "{text}");
}

#[test]
fn a_session_becomes_a_run_that_bir_runs_can_read() {
    let dir = TempDir::new("runs-cli");
    let script = json!({"tools": [{"name": "echo", "inputSchema": {"type": "object"}}],
        "rules": [{"method": "tools/call", "tool": "paint", "do": [{"reply_text": "\u{1b}[31mred\u{1b}]0;pwned\u{7} text"}]},
                  {"method": "tools/call", "tool": "fail", "do": [{"reply": {"content": [{"type": "text", "text": "nope"}], "isError": true}}]}]});
    session(&dir, &script, &[
        json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}),
        call(2, "echo", json!({"message": "hi"})),
        call(3, "paint", json!({})),
        serde_json::from_str(r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"fail","arguments":{"n":1.50}}}"#).expect("json"),
    ]);

    let (code, list, _) = bir_cmd(&dir, &["runs"]);
    assert_eq!(code, 0);
    let rows: Vec<&str> = list.lines().collect();
    assert_eq!(rows.len(), 2, "{list}");
    assert!(
        rows[1].contains("standalone") && rows[1].contains("peer") && rows[1].contains("finished"),
        "{list}"
    );

    let (code, show, _) = bir_cmd(&dir, &["runs", "show", "latest"]);
    assert_eq!(code, 0);
    assert!(show.contains("host it-host 9"), "{show}");
    assert!(
        show.contains("peer › echo")
            && show.contains("peer › paint")
            && show.contains("peer › fail"),
        "{show}"
    );
    assert!(show.contains("ERROR"), "{show}");
    assert!(show.contains("3 calls · 1 errors"), "{show}");
    assert!(
        !show.contains('\u{1b}') && !show.contains('\u{7}'),
        "control characters reached the terminal"
    );
    assert!(show.contains("\\u{1b}[31mred"), "{show}");
    let (code, full, _) = bir_cmd(&dir, &["runs", "show", "latest", "--full"]);
    assert_eq!(code, 0);
    assert!(
        full.contains("        args   {\n                 \"message\": \"hi\"\n               }"),
        "pretty JSON, one line per line: {full}"
    );
    assert!(!full.contains("\\u{a}"), "{full}");
    assert!(
        !full.contains('\u{1b}') && full.contains("\\u001b[31mred"),
        "no control character reaches the terminal: {full}"
    );

    let (code, json_doc, _) = bir_cmd(&dir, &["runs", "export", "latest"]);
    assert_eq!(code, 0);
    let doc: Value = serde_json::from_str(&json_doc).expect("export is JSON");
    assert_eq!(doc["steps"].as_array().map(Vec::len), Some(6));
    assert_eq!(doc["steps"][5]["input"], Value::Null);
    assert_eq!(doc["servers"][0]["tools"][0]["name"], "echo");
    assert!(
        json_doc.contains(r#""n": 1.50"#),
        "numbers are stored as written"
    );

    let (code, jsonl, _) = bir_cmd(&dir, &["runs", "export", "latest", "--format", "jsonl"]);
    assert_eq!(code, 0);
    assert!(
        jsonl
            .lines()
            .all(|l| serde_json::from_str::<Value>(l).is_ok())
    );
    assert_eq!(
        jsonl.lines().count(),
        9,
        "started, snapshot, 6 steps, finished"
    );

    let id = doc["id"].as_str().expect("id").to_owned();
    let (code, out, _) = bir_cmd(&dir, &["runs", "rm", &id[..12]]);
    assert_eq!(code, 0, "{out}");
    let (_, list, _) = bir_cmd(&dir, &["runs"]);
    assert!(list.starts_with("No runs yet"), "{list}");
    let (code, _, err) = bir_cmd(&dir, &["runs", "show", "run_nope"]);
    assert_eq!(code, 1);
    assert!(err.contains("no run matches"), "{err}");
}

#[test]
fn an_idle_server_leaves_no_run_and_recording_can_be_switched_off() {
    let dir = TempDir::new("idle");
    session(
        &dir,
        &json!({}),
        &[json!({"jsonrpc":"2.0","id":1,"method":"tools/list"})],
    );
    let files = std::fs::read_dir(runs_dir(&dir))
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(files, 0, "no call, no run");

    let off = TempDir::new("off");
    let mut cmd = proxy(&off, &json!({}));
    cmd.env("BIR_RECORDER", "off");
    let mut host = Host::start(cmd);
    host.send(&init());
    host.send(&call(1, "echo", json!({})));
    assert!(host.wait_lines(2, Duration::from_secs(5)));
    host.finish(Duration::from_secs(5));
    assert!(!runs_dir(&off).exists(), "BIR_RECORDER=off writes nothing");
}

#[test]
fn large_answers_are_stored_as_previews_unless_binary_blocks_shrink_them() {
    let dir = TempDir::new("large");
    let text = "word ".repeat(120_000); // 600 KB: over the skim threshold
    let image = "iVBORw0KGgo".repeat(60_000); // 660 KB of base64
    let script = json!({"rules": [
        {"method": "tools/call", "tool": "prose", "do": [{"reply_text": text}]},
        {"method": "tools/call", "tool": "picture", "do": [{"reply": {"content": [
            {"type": "image", "data": image, "mimeType": "image/png"},
            {"type": "text", "text": "a chart"}]}}]}]});
    let mut host = Host::start(proxy(&dir, &script));
    host.send(&init());
    host.send(&call(1, "prose", json!({})));
    host.send(&call(2, "picture", json!({})));
    assert!(host.wait_lines(3, Duration::from_secs(10)));
    let seen = host.finish(Duration::from_secs(5));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
    let answers = seen.messages();
    assert_eq!(
        answers[1]["result"]["content"][0]["text"],
        text.as_str(),
        "relayed whole"
    );
    assert_eq!(
        answers[2]["result"]["content"][0]["data"],
        image.as_str(),
        "relayed whole"
    );

    let (code, doc, _) = bir_cmd(&dir, &["runs", "export", "latest"]);
    assert_eq!(code, 0);
    let doc: Value = serde_json::from_str(&doc).expect("export is JSON");
    let prose = &doc["steps"][1]["output"];
    assert_eq!(prose["truncated"], true, "{prose}");
    assert!(
        prose["originalBytes"].as_u64().unwrap_or(0) > 600_000,
        "{prose}"
    );
    assert!(
        prose["preview"]
            .as_str()
            .is_some_and(|p| p.starts_with("{\"jsonrpc\"")),
        "{prose}"
    );
    let picture = &doc["steps"][3]["output"];
    assert_eq!(
        picture["content"][0]["data"]["omitted"], "binary",
        "{picture}"
    );
    assert_eq!(picture["content"][0]["data"]["base64Bytes"], image.len());
    assert_eq!(picture["content"][1]["text"], "a chart", "the rest is kept");
}

/// Milliseconds since the Unix epoch of a `YYYY-MM-DDTHH:MM:SS.mmmZ` stamp.
fn unix_ms(stamp: &str) -> Option<i64> {
    let num = |range: std::ops::Range<usize>| stamp.get(range)?.parse::<i64>().ok();
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hh, mm, ss, ms) = (num(11..13)?, num(14..16)?, num(17..19)?, num(20..23)?);
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 24 + hh) * 60 + mm) * 60_000 + ss * 1000 + ms)
}

fn unix_ms_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The relay reads the clock once per read, and no wall clock at all: a
/// step is timed from the read that brought its request to the read that
/// brought its answer, and its wall-clock start is derived later. Both must
/// still be right.
#[test]
fn a_step_is_timed_from_its_request_to_its_answer() {
    let dir = TempDir::new("timing");
    let script = json!({"rules": [{"method": "tools/call", "tool": "slow",
        "do": [{"sleep_ms": 300}, {"reply_text": "done"}]}]});
    let before = unix_ms_now();
    let mut host = Host::start(proxy(&dir, &script));
    host.send(&init());
    host.send(&call(1, "slow", json!({})));
    assert!(host.wait_lines(2, Duration::from_secs(10)));
    // Sent once the slow answer is in (the peer answers in order).
    host.send(&call(2, "echo", json!({})));
    assert!(host.wait_lines(3, Duration::from_secs(10)));
    let seen = host.finish(Duration::from_secs(5));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
    let after = unix_ms_now();

    let (code, doc, _) = bir_cmd(&dir, &["runs", "export", "latest"]);
    assert_eq!(code, 0);
    let doc: Value = serde_json::from_str(&doc).expect("export is JSON");
    let slow = &doc["steps"][1];
    assert_eq!(slow["type"], "tool_response", "{doc}");
    let took = slow["durationMs"].as_f64().unwrap_or(-1.0);
    assert!((300.0..3000.0).contains(&took), "{slow}");
    let started = slow["startedAt"].as_str().and_then(unix_ms).unwrap_or(0);
    assert!(
        (before - 5..=after - 300).contains(&started),
        "started {started} not within {before}..{after} less the call: {slow}"
    );
    let quick = doc["steps"][3]["durationMs"].as_f64().unwrap_or(-1.0);
    assert!((0.0..took / 2.0).contains(&quick), "{doc}");
}

/// A call still running when the host ends the session (closing stdin, or
/// a signal the way Claude Code stops its servers) is in the run, marked as
/// ended by the session, next to the calls that finished.
#[test]
fn calls_still_running_when_the_session_ends_are_recorded() {
    for how in ["stdin", "signal"] {
        let dir = TempDir::new(&format!("ended-by-{how}"));
        let script = json!({"rules": [{"method": "tools/call", "tool": "slow",
            "do": [{"sleep_ms": 30000}, {"reply_text": "too late"}]}]});
        let mut host = Host::start(proxy(&dir, &script));
        host.send(&init());
        host.send(&call(1, "echo", json!({"n": 1})));
        assert!(host.wait_lines(2, Duration::from_secs(10)));
        host.send(&call(2, "slow", json!({})));
        // Not a wait for an event: the slow call runs this long before the
        // session ends, which its recorded duration is checked against.
        std::thread::sleep(Duration::from_millis(300));
        if how == "stdin" {
            host.close_stdin();
        } else {
            host.signal(libc::SIGINT);
        }
        let seen = host.finish(Duration::from_secs(10));
        assert_eq!(
            seen.messages().len(),
            2,
            "{how}: the host got no answer added"
        );

        let (code, doc, _) = bir_cmd(&dir, &["runs", "export", "latest"]);
        assert_eq!(code, 0);
        let doc: Value = serde_json::from_str(&doc).expect("export is JSON");
        let steps = doc["steps"].as_array().cloned().unwrap_or_default();
        assert_eq!(steps.len(), 4, "{how}: {doc}");
        assert_eq!(steps[1]["outcome"], "answered", "{how}");
        assert_eq!(steps[2]["toolName"], "slow", "{how}");
        assert_eq!(steps[3]["type"], "tool_response", "{how}");
        assert_eq!(steps[3]["outcome"], "session_ended", "{how}: {doc}");
        assert_eq!(steps[3]["isError"], false, "{how}");
        assert!(
            steps[3]["durationMs"].as_f64().unwrap_or(0.0) >= 250.0,
            "{how}"
        );
        assert_eq!(doc["finish"]["metrics"]["toolCalls"], 2, "{how}: {doc}");

        let (code, show, _) = bir_cmd(&dir, &["runs", "show", "latest"]);
        assert_eq!(code, 0);
        assert!(show.contains("ended"), "{how}: {show}");
    }
}

/// A burst the recorder may not keep up with: every answer still reaches the
/// host at once, and the run keeps what it could and says how much it lost
/// (kept + lost = calls; lossy exactly when something was lost).
#[test]
fn a_burst_reaches_the_host_whole_and_the_run_accounts_for_every_call() {
    let dir = TempDir::new("lossy");
    // 40 KB answers: stored whole, so each costs the recorder a parse and a
    // redaction (~0.3 ms), against a few microseconds to relay.
    let script = json!({"rules": [{"method": "tools/call", "tool": "big",
        "do": [{"big_reply_bytes": 40_000}]}]});
    let mut host = Host::start(proxy(&dir, &script));
    host.send(&init());
    assert!(host.wait_lines(1, Duration::from_secs(10)));
    let calls: u64 = 1000;
    let mut burst = Vec::new();
    for id in 1..=calls {
        burst.extend(serde_json::to_vec(&call(id, "big", json!({}))).unwrap_or_default());
        burst.push(b'\n');
    }
    host.send_raw(&burst);
    assert!(host.wait_lines(1 + calls as usize, Duration::from_secs(30)));
    let seen = host.finish(Duration::from_secs(10));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
    let answers = seen.messages();
    assert!(
        answers[1..]
            .iter()
            .all(|a| a["result"]["content"][0]["text"].as_str().map(str::len) == Some(40_000)),
        "every answer relayed whole"
    );

    let (code, doc, _) = bir_cmd(&dir, &["runs", "export", "latest"]);
    assert_eq!(code, 0);
    let doc: Value = serde_json::from_str(&doc).expect("export is JSON");
    let steps = doc["steps"].as_array().map_or(0, Vec::len) as u64;
    let finish = &doc["finish"];
    if finish.is_null() {
        // The proxy gives its recorder a bounded time to close the run
        // (shutdown is never held up); on a machine busy enough to miss it
        // the run stays open and has no counts to check. What it has must
        // still be whole calls.
        eprintln!("the run was not closed within the proxy's shutdown deadline: {steps} steps");
        assert!(steps.is_multiple_of(2) && steps <= 2 * calls, "{doc}");
        return;
    }
    let kept = finish["metrics"]["toolCalls"].as_u64().unwrap_or(0);
    let dropped = finish["dropped"].as_u64().unwrap_or(0);
    // Every call is in the run or counted as lost, and the run says it is
    // lossy exactly when something was lost. Whether anything is lost
    // depends on how fast the recorder is, so that is not asserted.
    //
    // `dropped` counts lost observations, and two of this session's are
    // not calls: the `initialize` exchange (the run's `serverInfo` comes
    // from it, so without one it was lost) and the "upstream exited" event
    // (which the run does not show, so it may or may not be among them).
    let handshake_lost = u64::from(doc["run"]["metadata"]["serverInfo"].is_null());
    let accounted = kept + dropped;
    assert!(
        (calls + handshake_lost..=calls + handshake_lost + 1).contains(&accounted),
        "every call is in the run or counted as lost ({kept} kept + {dropped} lost, \
         handshake lost: {handshake_lost}): {finish}"
    );
    assert_eq!(finish["lossy"], dropped > 0, "lossy iff dropped: {finish}");
    assert_eq!(
        steps,
        2 * kept,
        "a selected and a response step per kept call"
    );
}

/// The observer's worker runs at normal priority, as the relay does: a
/// thread that lowers its priority can never raise it again, and a nice-19
/// worker could not finish its runs on a busy machine
/// (`contention::*`). It gives way to the relay by standing back instead,
/// and by its scheduling policy: `SCHED_BATCH` (same weight, but its
/// wake-ups do not preempt a relay thread), while the relay's threads keep
/// the default policy.
#[test]
fn the_observer_keeps_the_priority_it_needs_to_finish_runs() {
    let dir = TempDir::new("nice");
    let mut host = Host::start(proxy(&dir, &json!({})));
    host.send(&init());
    host.send(&call(1, "echo", json!({})));
    assert!(host.wait_lines(2, Duration::from_secs(5)));
    // /proc/<pid>/task/<tid>/stat: field 19 is the nice value, field 41
    // the scheduling policy; the command name (field 2) is in parentheses
    // and holds no spaces here.
    let pid = host.pid();
    let threads = || {
        let mut niceness = std::collections::BTreeMap::new();
        let mut policy = std::collections::BTreeMap::new();
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("task dir");
        for task in tasks.flatten() {
            let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
                continue;
            };
            let Some((name, rest)) = stat.split_once(") ") else {
                continue;
            };
            let name = name.rsplit('(').next().unwrap_or("").to_owned();
            let field = |n: usize| -> i32 {
                rest.split(' ')
                    .nth(n - 3)
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(99)
            };
            niceness.insert(name.clone(), field(19));
            policy.insert(name, field(41));
        }
        (niceness, policy)
    };
    // The worker sets its policy when it starts, which on a busy machine
    // may be a moment after the relay answered: look until it has.
    let (niceness, policy) = eventually(Duration::from_secs(10), || {
        let (niceness, policy) = threads();
        let set = policy.get("bir-observer") == Some(&libc::SCHED_BATCH);
        set.then_some((niceness, policy))
    })
    .unwrap_or_else(threads);
    host.finish(Duration::from_secs(5));
    assert_eq!(niceness.get("bir-observer"), Some(&0), "{niceness:?}");
    assert_eq!(niceness.get("bir-from-host"), Some(&0), "{niceness:?}");
    assert_eq!(niceness.get("bir-from-server"), Some(&0), "{niceness:?}");
    assert_eq!(
        policy.get("bir-observer"),
        Some(&libc::SCHED_BATCH),
        "{policy:?}"
    );
    assert_eq!(
        policy.get("bir-from-host"),
        Some(&libc::SCHED_OTHER),
        "{policy:?}"
    );
    assert_eq!(
        policy.get("bir-from-server"),
        Some(&libc::SCHED_OTHER),
        "{policy:?}"
    );
}

#[test]
fn store_files_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("private");
    session(&dir, &json!({}), &[call(1, "echo", json!({}))]);
    let runs = runs_dir(&dir);
    let mode =
        |p: &std::path::Path| std::fs::metadata(p).expect("meta").permissions().mode() & 0o777;
    assert_eq!(mode(&runs), 0o700);
    assert_eq!(mode(runs.parent().expect("home")), 0o700);
    for entry in std::fs::read_dir(&runs).expect("runs") {
        assert_eq!(mode(&entry.expect("entry").path()), 0o600);
    }
}

#[test]
fn a_symlinked_store_is_refused_and_the_relay_goes_on() {
    let dir = TempDir::new("symlink");
    let elsewhere = dir.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).expect("mkdir");
    std::fs::create_dir_all(dir.join("home/.baseinstrunner")).expect("mkdir");
    std::os::unix::fs::symlink(&elsewhere, runs_dir(&dir)).expect("symlink");
    let mut host = Host::start(proxy(&dir, &json!({})));
    host.send(&init());
    host.send(&call(1, "echo", json!({"x": 1})));
    assert!(host.wait_lines(2, Duration::from_secs(5)));
    let seen = host.finish(Duration::from_secs(5));
    assert_eq!(seen.messages().len(), 2, "relay unaffected");
    assert!(
        seen.stderr.contains("runs will not be stored"),
        "{}",
        seen.stderr
    );
    assert_eq!(
        std::fs::read_dir(&elsewhere)
            .map(|d| d.count())
            .unwrap_or(0),
        0
    );
}

/// How many files the store's runs directory holds.
fn journals(dir: &TempDir) -> usize {
    std::fs::read_dir(runs_dir(dir))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// SIGKILL the proxy at random moments while it records: every journal
/// must still read back cleanly (a torn tail at most) and `bir runs show`
/// must work.
#[test]
fn killed_at_random_points_every_journal_reopens() {
    let _serial = serial();
    let dir = TempDir::new("killloop");
    let script = json!({});
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let started = Instant::now();
    let mut iterations = 0;
    // At least 100 kills however busy the machine is (within a generous
    // cap), up to 300 while the first 30 s last.
    while iterations < 300
        && (started.elapsed() < Duration::from_secs(30)
            || (iterations < 100 && started.elapsed() < Duration::from_secs(300)))
    {
        iterations += 1;
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let before = journals(&dir);
        let mut host = Host::start(proxy(&dir, &script));
        host.send(&init());
        for i in 1..=40u64 {
            host.send(&call(
                i,
                "echo",
                json!({"i": i, "pad": "x".repeat((seed % 4000) as usize)}),
            ));
        }
        // The kill lands somewhere in the recording, not before it began.
        // The recording begins when the run's journal exists, which is
        // not when the first answer is relayed: the recorder works off
        // the relay's path and prepares nothing (redactor included) until
        // the first call, so on a loaded machine (or an unoptimised
        // build) the journal comes hundreds of milliseconds after that
        // answer, and a kill timed from the answer recorded nothing.
        // Waiting for the journal itself makes every session a recording
        // killed at a random point of it, however slow the machine.
        wait_until(
            &format!("session {iterations}'s journal"),
            Duration::from_secs(30),
            || journals(&dir) > before,
        );
        // A random delay, not a wait: where in the recording the kill lands.
        std::thread::sleep(Duration::from_micros(seed % 100_000));
        host.signal(libc::SIGKILL);
        host.wait_exit(Duration::from_secs(5));
        host.finish(Duration::from_secs(5));
    }
    let runs = journals(&dir);
    assert!(
        iterations >= 100,
        "only {iterations} kills in the time budget"
    );
    assert_eq!(runs, iterations, "one journal per session");
    let (code, list, err) = bir_cmd(&dir, &["runs", "--json", "--limit", "1000"]);
    assert_eq!(code, 0, "{err}");
    let listed: Vec<Value> = list
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert_eq!(listed.len(), runs, "every journal is readable");
    for run in listed.iter().take(20) {
        let id = run["id"].as_str().expect("id");
        let (code, _, err) = bir_cmd(&dir, &["runs", "show", id]);
        assert_eq!(code, 0, "{err}");
    }
    eprintln!("{iterations} kills, {runs} journals, all readable");
}

/// What reached the journal before a SIGKILL is all there
/// after it. The writer writes at every idle moment and fsyncs within
/// ~150 ms of the last call, so after 400 ms of quiet every call made so far
/// is on disk; the run the kill left unfinished must give each of them
/// back, request and answer, through `bir runs export`. (A call still in
/// flight at the kill may or may not be there: not asserted.)
#[test]
fn calls_on_disk_before_a_kill_survive_it() {
    let dir = TempDir::new("killsurvive");
    for (session, n) in [(1u64, 1u64), (2, 7), (3, 40)] {
        let mut host = Host::start(proxy(&dir, &json!({})));
        host.send(&init());
        for i in 1..=n {
            host.send(&call(i, "echo", json!({"session": session, "i": i})));
        }
        assert!(host.wait_lines(1 + n as usize, Duration::from_secs(10)));
        // The answers are on disk once the live run's export holds them
        // (the runs of the earlier sessions hold fewer).
        wait_until("the answers on disk", Duration::from_secs(30), || {
            let (code, out, _) = bir_cmd(&dir, &["runs", "export", "latest"]);
            code == 0
                && serde_json::from_str::<Value>(&out).is_ok_and(|doc| {
                    doc["steps"].as_array().is_some_and(|steps| {
                        steps
                            .iter()
                            .filter(|s| s["type"] == "tool_response")
                            .count() as u64
                            == n
                    })
                })
        });
        host.send(&call(
            n + 1,
            "echo",
            json!({"session": session, "late": true}),
        ));
        host.signal(libc::SIGKILL);
        assert!(host.wait_exit(Duration::from_secs(5)));
        assert_eq!(host.finish(Duration::from_secs(5)).exit(), "signal 9");

        let doc = export(&dir, "latest");
        assert!(
            doc["finish"].is_null(),
            "the kill left it unfinished: {doc}"
        );
        let steps = doc["steps"].as_array().cloned().unwrap_or_default();
        for i in 1..=n {
            let of = |kind: &str| {
                steps
                    .iter()
                    .find(|s| s["type"] == kind && s["requestId"] == i)
                    .cloned()
                    .unwrap_or_else(|| panic!("session {session}: no {kind} for call {i}: {doc}"))
            };
            assert_eq!(
                of("tool_selected")["input"],
                json!({"session": session, "i": i})
            );
            let response = of("tool_response");
            assert_eq!(response["outcome"], "answered");
            assert_eq!(
                response["output"]["content"][0]["text"],
                json!({"session": session, "i": i}).to_string()
            );
        }
    }
}
