//! `bir runs` over a store of many runs (the synthetic store of
//! `synth.rs`): what each filter keeps, the listing index kept fresh
//! (a journal appended after it, a run removed, the index damaged or
//! written by two listings at once), the reader's step numbers, and
//! `bir runs show --follow` on a live proxy run.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::record::{bir_cmd, call, init, proxy, runs_dir};
use crate::support::wait_until;
use crate::support::{Host, TempDir, bir, command};
use crate::synth;

/// `bir runs --json` with `args`, every run (no limit that matters).
fn listed(dir: &TempDir, args: &[&str]) -> Vec<Value> {
    let mut all = vec!["runs", "--json", "--limit", "100000"];
    all.extend_from_slice(args);
    let (code, out, err) = bir_cmd(dir, &all);
    assert_eq!(code, 0, "bir {all:?}: {err}");
    assert!(err.is_empty(), "bir {all:?} said: {err}");
    out.lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

fn ids(runs: &[Value]) -> Vec<String> {
    runs.iter()
        .map(|r| r["id"].as_str().expect("id").to_owned())
        .collect()
}

/// The ids of runs `0..n` (newest first) that `keep` keeps.
fn expected(n: usize, keep: impl Fn(usize) -> bool) -> Vec<String> {
    (0..n).filter(|&i| keep(i)).map(synth::run_id).collect()
}

/// A synthetic store of `runs` runs of `calls` calls under `dir`'s home.
fn store(tag: &str, runs: usize, calls: usize) -> TempDir {
    let dir = TempDir::new(tag);
    synth::write_store(&runs_dir(&dir), runs, calls);
    dir
}

#[test]
fn each_filter_keeps_exactly_its_runs() {
    const N: usize = 120;
    const CALLS: usize = 3;
    let dir = store("list-filters", N, CALLS);
    assert_eq!(
        ids(&listed(&dir, &[])),
        expected(N, |_| true),
        "newest first"
    );
    assert_eq!(
        ids(&listed(&dir, &["--failed"])),
        expected(N, synth::has_failure)
    );
    assert_eq!(
        ids(&listed(&dir, &["--tool", "fetch", "--failed"])),
        expected(N, |i| synth::has_failure(i)
            && synth::failed_tool(i, CALLS) == "fetch")
    );
    // A tool by the host's name for it, too.
    let calls_echo = |i: usize| (0..CALLS).any(|k| synth::TOOLS[(i + k) % 8] == "echo");
    assert_eq!(
        ids(&listed(&dir, &["--tool", "echo"])),
        expected(N, calls_echo)
    );
    assert_eq!(
        ids(&listed(&dir, &["--tool", "mcp__github__echo"])),
        expected(N, |i| i % 5 == 0 && calls_echo(i))
    );
    assert_eq!(
        ids(&listed(&dir, &["--server", "github"])),
        expected(N, |i| i % 5 == 0)
    );
    assert_eq!(
        ids(&listed(&dir, &["--tier", "bound"])),
        expected(N, |i| i % 10 == 3)
    );
    assert_eq!(
        ids(&listed(&dir, &["--cwd", "/home/dev/proj-a"])),
        expected(N, |i| i % 4 < 2),
        "the directory and below it"
    );
    assert_eq!(
        ids(&listed(&dir, &["--cwd", "/home/dev/proj-a/sub"])),
        expected(N, |i| i % 4 == 1)
    );
    let since = synth::rfc3339(synth::started(30), 0);
    let until = synth::rfc3339(synth::started(10), 0);
    assert_eq!(
        ids(&listed(&dir, &["--since", &since, "--until", &until])),
        expected(N, |i| (11..=30).contains(&i)),
        "since {since} until {until}"
    );
    // Ages count back from now: every synthetic run is older than 1s and
    // (today) younger than 100000 days.
    assert!(listed(&dir, &["--since", "1s"]).is_empty());
    assert_eq!(listed(&dir, &["--until", "1s"]).len(), N);
    assert_eq!(
        ids(&listed(
            &dir,
            &["--server", "fs", "--tier", "bound", "--failed"]
        )),
        expected(N, |i| i % 5 == 1 && i % 10 == 3 && synth::has_failure(i))
    );
    let (code, out, _) = bir_cmd(&dir, &["runs", "--json", "--limit", "7", "--server", "db"]);
    assert_eq!(code, 0);
    let limited: Vec<String> = out
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).expect("json")["id"]
                .as_str()
                .expect("id")
                .to_owned()
        })
        .collect();
    assert_eq!(limited, expected(N, |i| i % 5 == 3)[..7]);

    // What a listed run says about itself.
    let all = listed(&dir, &[]);
    let run = |i: usize| {
        all.iter()
            .find(|r| r["id"] == synth::run_id(i))
            .expect("run")
    };
    assert_eq!(run(99)["state"], "interrupted", "unfinished, no writer");
    assert_eq!(run(0)["state"], "finished");
    assert_eq!(run(7)["errors"], 1);
    assert_eq!(run(7)["toolCalls"], CALLS);
    assert_eq!(run(13)["tier"], "bound");
    assert!(
        run(13)["prompt"]
            .as_str()
            .is_some_and(|p| p.contains("run 13"))
    );
    assert_eq!(run(2)["cwd"], synth::CWDS[2]);
    assert_eq!(run(2)["servers"], synth::SERVERS[2]);

    // Bad filters are usage errors.
    for bad in [
        &["runs", "--since", "soon"][..],
        &["runs", "--tier", "gold"],
        &["runs", "--cwd", "/x", "--here"],
    ] {
        let (code, _, err) = bir_cmd(&dir, bad);
        assert_eq!(code, 2, "bir {bad:?}: {err}");
    }
    // The table says when nothing matched.
    let (code, out, _) = bir_cmd(&dir, &["runs", "--tool", "no-such-tool"]);
    assert_eq!(code, 0);
    assert!(out.contains("No run of the 120"), "{out}");
}

/// Appends the frames of one more call (two steps) to run `i`'s journal.
fn append_call(store: &Path, i: usize, seq: u64) {
    use std::io::Write;
    let path = store.join(format!("{}.journal", synth::run_id(i)));
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .expect("open journal");
    for (n, kind) in [(0, "tool_selected"), (1, "tool_response")] {
        let rec = json!({"seq": seq + n, "event": {"kind": "step", "data": {
            "id": format!("step_extra{n}"), "stepIndex": 1000 + n, "type": kind,
            "qualifiedName": "mcp__x__late", "serverName": "x", "toolName": "late",
            "startedAt": "2026-12-01T00:00:00.000Z", "isError": n == 1}}});
        let bytes = serde_json::to_vec(&rec).expect("json");
        f.write_all(&bir::frame_journal_record(&bytes))
            .expect("append");
    }
}

#[test]
fn the_index_follows_the_journals() {
    let dir = store("list-index", 150, 2);
    let runs = runs_dir(&dir);
    let index = runs.join(".index");
    let first = listed(&dir, &[]);
    assert_eq!(first.len(), 150);
    let saved = std::fs::read(&index).expect("the listing saved an index");
    assert!(saved.starts_with(b"bir-runs-index 4 "));

    // A journal appended after the index was written: its new call shows
    // (an unfinished run, as a live one would be; and a finished one).
    append_call(&runs, 99, 100);
    append_call(&runs, 5, 100);
    let again = listed(&dir, &[]);
    let get = |runs: &[Value], i: usize| {
        runs.iter()
            .find(|r| r["id"] == synth::run_id(i))
            .cloned()
            .expect("run")
    };
    assert_eq!(get(&again, 99)["toolCalls"], 3);
    assert_eq!(get(&again, 5)["toolCalls"], 3);
    assert_eq!(get(&again, 5)["errors"], 1);
    assert_eq!(
        ids(&listed(&dir, &["--tool", "late", "--failed"])),
        vec![synth::run_id(5), synth::run_id(99)]
    );

    // A removed run leaves the listing (and the index).
    let (code, out, err) = bir_cmd(&dir, &["runs", "rm", &synth::run_id(5)]);
    assert_eq!(code, 0, "{out}{err}");
    let after_rm = listed(&dir, &[]);
    assert_eq!(after_rm.len(), 149);
    assert!(!ids(&after_rm).contains(&synth::run_id(5)));
    let index_text = std::fs::read_to_string(&index).expect("index");
    assert!(
        !index_text.contains(&synth::run_id(5)),
        "its entry was dropped"
    );

    // A damaged index is rebuilt, silently, to the same listing: garbage,
    // a torn copy, a body edited under its checksum, another version.
    let good = std::fs::read(&index).expect("index");
    let nl = good.iter().position(|&b| b == b'\n').expect("header line");
    let mut edited = good.clone();
    edited[nl + 10] ^= 0x01;
    let mut other_version = b"bir-runs-index 99 ".to_vec();
    other_version.extend_from_slice(&good[17..]);
    for (what, bytes) in [
        ("garbage", b"\x00\xffnot an index".to_vec()),
        ("torn", good[..good.len() / 2].to_vec()),
        ("edited", edited),
        ("another version", other_version),
        ("empty", Vec::new()),
    ] {
        std::fs::write(&index, &bytes).expect("damage");
        assert_eq!(listed(&dir, &[]), after_rm, "after a {what} index");
        let rebuilt = std::fs::read(&index).expect("index");
        assert!(rebuilt.starts_with(b"bir-runs-index 4 "), "{what}: rebuilt");
    }
    // A save killed before its rename left its temporary file: the next
    // save removes it.
    let leftover = runs.join(".index.tmp-4000000");
    std::fs::write(&leftover, b"half an index").expect("leftover");
    assert_eq!(listed(&dir, &[]), after_rm);
    assert!(!leftover.exists(), "the leftover was removed");
    // A directory where the index goes: listing still works.
    std::fs::remove_file(&index).expect("rm");
    std::fs::create_dir(&index).expect("mkdir");
    assert_eq!(listed(&dir, &[]), after_rm, "with the index unwritable");
}

#[test]
fn listings_at_once_while_a_journal_grows_keep_a_whole_index() {
    let dir = store("list-concurrent", 200, 2);
    let runs = runs_dir(&dir);
    let mut seq = 100;
    for round in 0..3 {
        let children: Vec<std::process::Child> = (0..4)
            .map(|_| {
                command(bir(), &dir)
                    .args(["runs", "--json", "--limit", "100000"])
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .expect("spawn bir runs")
            })
            .collect();
        append_call(&runs, 99, seq);
        seq += 2;
        for child in children {
            let out = child.wait_with_output().expect("bir runs");
            assert!(out.status.success(), "round {round}");
            let lines = String::from_utf8_lossy(&out.stdout).lines().count();
            assert_eq!(lines, 200, "round {round}: every run listed");
        }
    }
    // Whatever order they saved in, the index is whole and current.
    let listing = listed(&dir, &[]);
    let live = listing
        .iter()
        .find(|r| r["id"] == synth::run_id(99))
        .expect("run 99");
    assert_eq!(live["toolCalls"], 2 + 3);
    let saved = std::fs::read(runs.join(".index")).expect("index");
    assert!(saved.starts_with(b"bir-runs-index 4 "));
    let leftovers: Vec<String> = std::fs::read_dir(&runs)
        .expect("ls")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn show_numbers_calls_one_two_three() {
    let dir = store("list-numbers", 1, 3);
    let (code, out, err) = bir_cmd(&dir, &["runs", "show", &synth::run_id(0)]);
    assert_eq!(code, 0, "{err}");
    let numbers: Vec<&str> = out
        .lines()
        .filter(|l| l.contains(" › "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(numbers, ["1", "2", "3"], "{out}");
}

#[test]
fn follow_prints_a_live_run_as_it_goes_and_stops_at_its_end() {
    let dir = TempDir::new("follow");
    let script = json!({"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]});
    let mut host = Host::start(proxy(&dir, &script));
    host.send(&init());
    host.send(&call(1, "echo", json!({"message": "first-call"})));
    assert!(host.wait_lines(2, Duration::from_secs(20)), "no answer");

    // The run is in the store once its first call is recorded.
    let mut id = String::new();
    wait_until("the live run", Duration::from_secs(20), || {
        let (_, out, _) = bir_cmd(&dir, &["runs", "--json"]);
        id = out
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|r| r["state"] == "open" && r["toolCalls"] == 1)
            .and_then(|r| r["id"].as_str().map(str::to_owned))
            .unwrap_or_default();
        !id.is_empty()
    });

    let mut follow = command(bir(), &dir);
    follow.args(["runs", "show", "--follow", &id]);
    let mut follower = Host::start(follow);
    let printed = |f: &Host| String::from_utf8_lossy(&f.stdout_so_far()).into_owned();
    wait_until("the first call printed", Duration::from_secs(30), || {
        printed(&follower).contains("first-call")
    });
    assert!(!printed(&follower).contains("second-call"), "not sent yet");

    // The next calls come while it follows.
    host.send(&call(2, "echo", json!({"message": "second-call"})));
    wait_until("the second call printed", Duration::from_secs(30), || {
        printed(&follower).contains("second-call")
    });
    host.send(&call(3, "echo", json!({"message": "third-call"})));
    assert!(host.wait_lines(4, Duration::from_secs(20)));
    wait_until("the third call printed", Duration::from_secs(30), || {
        printed(&follower).contains("third-call")
    });
    assert!(
        !follower.wait_exit(Duration::from_millis(200)),
        "it stopped following while the run is live"
    );

    // The session ends: the run is finished and the follow stops.
    let seen = host.finish(Duration::from_secs(20));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
    let done = follower.finish(Duration::from_secs(30));
    assert_eq!(done.exit(), "code 0", "{}", done.stderr);
    let out = String::from_utf8_lossy(&done.stdout).into_owned();
    assert!(out.contains("finished") && out.contains("3 calls"), "{out}");
    let numbers: Vec<&str> = out
        .lines()
        .filter(|l| l.contains(" › "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(numbers, ["1", "2", "3"], "each call once, in order: {out}");
    // And on a finished run, --follow prints it whole and returns.
    let (code, again, err) = bir_cmd(&dir, &["runs", "show", "--follow", &id]);
    assert_eq!(code, 0, "{err}");
    assert!(
        again.contains("third-call") && again.contains("finished"),
        "{again}"
    );
}

/// The model's words before a call show as soon as its selection is
/// recorded (with the Claude Code mod link they come with the selection,
/// ahead of the answer), and once: a call answered later does not repeat
/// them.
#[test]
fn follow_shows_the_models_words_before_the_answer() {
    use crate::bound_runs::{step, write_run};
    let dir = TempDir::new("follow-words");
    let start = json!({"kind": "run_started", "data": {"id": "run_words", "startedAt": "2026-12-01T20:00:00.000Z",
        "input": "look around",
        "metadata": {"recorder": "bir", "tier": "bound", "host": {"app": "claude-code", "version": "2.1.332"},
            "wrappedServers": [], "cwd": "/p", "sessionId": "s-1", "birVersion": "0", "lossy": false}}});
    let answered = [
        step(
            1,
            "tool_selected",
            "Read",
            "toolu_1",
            json!({"input": {"file_path": "/p/a"},
            "context": "First I read the file."}),
        ),
        step(
            1,
            "tool_response",
            "Read",
            "toolu_1",
            json!({"output": "text", "durationMs": 1.0}),
        ),
    ];
    let pending = step(
        2,
        "tool_selected",
        "mcp__srv__echo",
        "toolu_2",
        json!({"input": {"m": 1},
        "context": "Now I ask the server\nto echo."}),
    );
    let mut events = vec![start];
    events.extend(answered);
    events.push(pending);
    write_run(&dir, "run_words", &events);
    // The writer is gone, so follow prints the run whole and returns.
    let (code, out, err) = bir_cmd(&dir, &["runs", "show", "--follow", "run_words"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.matches("First I read the file.").count(), 1, "{out}");
    let words = out
        .find("Now I ask the server ⏎ to echo.")
        .expect("the unanswered call's words");
    let call = out.find("srv › echo").expect("the unanswered call");
    assert!(words < call, "the words come before their call: {out}");
}
