//! `bir investigate` on hand-made runs (journals written the way the
//! recorder writes them): each kind of problem, and a pair of runs in which
//! a server changed a tool's definition.

use std::fs::OpenOptions;
use std::io::Write;

use serde_json::{Value, json};

use crate::bound_runs::write_run;
use crate::record::{bir_cmd, runs_dir};
use crate::support::TempDir;

fn started(id: &str, at: &str, tier: &str) -> Value {
    json!({"kind": "run_started", "data": {"id": id, "startedAt": at,
        "metadata": {"recorder": "bir", "tier": tier, "wrappedServers": ["files"], "cwd": "/p",
            "birVersion": "0"}}})
}

fn finished(dropped: u64) -> Value {
    json!({"kind": "run_finished", "data": {"finishedAt": "2026-12-01T21:00:00.000Z",
        "metrics": {"toolCalls": 0, "errors": 0, "totalToolMs": 0.0},
        "lossy": dropped > 0, "dropped": dropped}})
}

/// A standalone call: its selection and its response (steps `2i`, `2i+1`).
fn call(i: u64, tool: &str, args: Value, ms: f64, result: Value) -> [Value; 2] {
    let base = json!({"qualifiedName": format!("mcp__files__{tool}"), "serverName": "files",
        "toolName": tool, "startedAt": format!("2026-12-01T20:00:{:02}.000Z", i % 60), "requestId": i});
    let mut sel = base.clone();
    sel["id"] = json!(format!("step_s{i}"));
    sel["stepIndex"] = json!(2 * i);
    sel["type"] = json!("tool_selected");
    sel["input"] = args;
    let mut resp = base;
    resp["id"] = json!(format!("step_r{i}"));
    resp["stepIndex"] = json!(2 * i + 1);
    resp["type"] = json!("tool_response");
    resp["durationMs"] = json!(ms);
    resp["outcome"] = json!("answered");
    if result.get("code").is_some() {
        resp["error"] = result;
        resp["isError"] = json!(true);
    } else {
        resp["isError"] = result["isError"].clone();
        resp["output"] = result;
    }
    [
        json!({"kind": "step", "data": sel}),
        json!({"kind": "step", "data": resp}),
    ]
}

fn ok() -> Value {
    json!({"content": [{"type": "text", "text": "done"}], "isError": false})
}

fn snapshot(tools: &[(&str, &str)]) -> Value {
    let hashes: serde_json::Map<String, Value> = tools
        .iter()
        .map(|(n, h)| ((*n).to_owned(), json!(h)))
        .collect();
    let digest: String = tools.iter().map(|(_, h)| *h).collect();
    json!({"kind": "server_snapshot", "data": {"serverName": "files",
        "tools": tools.iter().map(|(n, _)| json!({"name": n})).collect::<Vec<_>>(),
        "toolHashes": hashes, "toolsDigest": digest}})
}

fn investigate(dir: &TempDir, run: &str) -> (Value, String) {
    let (code, out, err) = bir_cmd(dir, &["investigate", run, "--json"]);
    assert_eq!(code, 0, "{err}");
    let json: Value = serde_json::from_str(&out).expect("investigate --json is JSON");
    let (code, text, err) = bir_cmd(dir, &["investigate", run]);
    assert_eq!(code, 0, "{err}");
    (json, text)
}

/// A failed call is shown with the error it got, the calls before it and
/// (in a bound run) what the model wrote before choosing it; a JSON-RPC
/// error and a tool result flagged `isError` both count.
#[test]
fn investigate_names_failed_calls_with_their_lead_up() {
    let dir = TempDir::new("inv-fail");
    let mut events = vec![started(
        "run_fail",
        "2026-12-01T20:00:00.000Z",
        "standalone",
    )];
    events.extend(call(1, "list", json!({"dir": "/p"}), 3.0, ok()));
    events.extend(call(
        2,
        "read",
        json!({"path": "/p/missing"}),
        4.0,
        json!({"content": [{"type": "text", "text": "ENOENT: no such file \u{1b}[31m"}], "isError": true}),
    ));
    events.extend(call(
        3,
        "write",
        json!({"path": "/etc/x"}),
        4.0,
        json!({"code": -32602, "message": "path outside the root"}),
    ));
    events.push(finished(0));
    write_run(&dir, "run_fail", &events);

    // A bound run: the model's words before the failing call come along.
    let bound = vec![
        started("run_bfail", "2026-12-01T20:30:00.000Z", "bound"),
        json!({"kind": "turn", "data": {"turn": 1, "at": "2026-12-01T20:30:00.100Z", "prompt": "Fix the build"}}),
        json!({"kind": "step", "data": {"id": "s1", "stepIndex": 1, "type": "tool_selected", "qualifiedName": "Bash",
            "serverName": "", "toolName": "Bash", "startedAt": "2026-12-01T20:30:01.000Z", "toolUseId": "toolu_1",
            "kind": "builtin", "turn": 1, "input": {"command": "make"}, "context": "Let me run make to see the error."}}),
        json!({"kind": "step", "data": {"id": "s2", "stepIndex": 2, "type": "tool_response", "qualifiedName": "Bash",
            "serverName": "", "toolName": "Bash", "startedAt": "2026-12-01T20:30:01.000Z", "toolUseId": "toolu_1",
            "kind": "builtin", "turn": 1, "isError": true, "output": {"error": "make: *** [all] Error 2"}}}),
        finished(0),
    ];
    write_run(&dir, "run_bfail", &bound);

    let (json, text) = investigate(&dir, "run_fail");
    let failures = json["failures"].as_array().expect("failures");
    assert_eq!(failures.len(), 2, "{json:#}");
    assert_eq!(failures[0]["tool"], "mcp__files__read");
    assert!(
        failures[0]["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("ENOENT"))
    );
    assert_eq!(failures[0]["leadUp"][0]["tool"], "mcp__files__list");
    assert_eq!(failures[1]["tool"], "mcp__files__write");
    assert_eq!(
        failures[1]["error"],
        "JSON-RPC error -32602: path outside the root"
    );
    assert_eq!(failures[1]["leadUp"][1]["failed"], true);
    assert!(text.contains("Failed calls (2)"), "{text}");
    assert!(text.contains("path outside the root"), "{text}");
    assert!(!text.contains('\u{1b}'), "escaped for the terminal: {text}");
    assert!(json["gaps"].as_array().is_some_and(Vec::is_empty));

    let (json, text) = investigate(&dir, "latest");
    assert_eq!(json["run"], "run_bfail", "latest is the newest run");
    assert_eq!(
        json["failures"][0]["context"],
        "Let me run make to see the error."
    );
    assert_eq!(json["failures"][0]["prompt"], "Fix the build");
    assert_eq!(json["failures"][0]["error"], "make: *** [all] Error 2");
    assert!(text.contains("model:   Let me run make"), "{text}");
}

/// A call much slower than the same tool's median in earlier runs is
/// named with that median; the same call repeated is a loop; and a run
/// with neither says nothing stands out.
#[test]
fn investigate_finds_slow_steps_and_loops() {
    let dir = TempDir::new("inv-slow");
    for h in 0..3 {
        let id = format!("run_hist{h}");
        let mut events = vec![started(
            &id,
            &format!("2026-12-01T1{h}:00:00.000Z"),
            "standalone",
        )];
        events.extend(call(
            1,
            "search",
            json!({"q": h}),
            200.0 + f64::from(h) * 10.0,
            ok(),
        ));
        events.push(finished(0));
        write_run(&dir, &id, &events);
    }
    let (json, text) = investigate(&dir, "run_hist2");
    assert_eq!(json["historyRuns"], 2, "only earlier runs are history");
    assert!(text.contains("Nothing stands out"), "{text}");

    let mut events = vec![started(
        "run_slow",
        "2026-12-01T20:00:00.000Z",
        "standalone",
    )];
    events.extend(call(1, "search", json!({"q": "x"}), 9000.0, ok()));
    for i in 2..=5 {
        events.extend(call(
            i,
            "fetch",
            json!({"url": "https://example.test/a"}),
            1.0,
            ok(),
        ));
    }
    events.extend(call(
        6,
        "fetch",
        json!({"url": "https://example.test/b"}),
        1.0,
        ok(),
    ));
    events.push(finished(0));
    write_run(&dir, "run_slow", &events);

    let (json, text) = investigate(&dir, "run_slow");
    assert_eq!(json["historyRuns"], 3);
    let slow = json["slow"].as_array().expect("slow");
    assert_eq!(slow.len(), 1, "{json:#}");
    assert_eq!(slow[0]["tool"], "mcp__files__search");
    assert_eq!(slow[0]["usualMs"], 210.0);
    assert_eq!(slow[0]["samples"], 3);
    let loops = json["loops"].as_array().expect("loops");
    assert_eq!(loops.len(), 1, "{json:#}");
    assert_eq!(loops[0]["calls"], 4);
    assert_eq!(loops[0]["inARow"], 4);
    // Numbered as `bir runs show` numbers calls, not by journal index
    // (the calls' records are steps 4, 6, 8, 10 of the journal).
    assert_eq!(loops[0]["steps"], json!(["2", "3", "4", "5"]));
    assert_eq!(slow[0]["step"], "1", "{json:#}");
    assert!(text.contains("steps 2, 3, 4, 5"), "{text}");
    let (_, shown, _) = bir_cmd(&dir, &["runs", "show", "run_slow"]);
    // The same numbers in `bir runs show`.
    for (n, tool) in [("1", "search"), ("2", "fetch"), ("5", "fetch")] {
        assert!(
            shown
                .lines()
                .any(|l| l.trim_start().starts_with(&format!("{n} ")) && l.contains(tool)),
            "{n} {tool}: {shown}"
        );
    }
    assert!(text.contains("usually 210 ms"), "{text}");
    assert!(text.contains("4 calls (4 in a row)"), "{text}");
}

/// The rug-pull pair: a server's tool keeps its name but its definition
/// changes between two runs (and another appears, a third goes). The
/// later run names all three; a definition that changes mid-run (a second
/// snapshot) is named too.
#[test]
fn investigate_names_tools_a_server_changed_since_its_previous_run() {
    let dir = TempDir::new("inv-rug");
    let mut first = vec![started(
        "run_before",
        "2026-12-01T19:00:00.000Z",
        "standalone",
    )];
    first.push(snapshot(&[
        ("read", "aaa"),
        ("list", "bbb"),
        ("old", "ccc"),
    ]));
    first.push(finished(0));
    write_run(&dir, "run_before", &first);
    let mut second = vec![started(
        "run_after",
        "2026-12-01T20:00:00.000Z",
        "standalone",
    )];
    second.push(snapshot(&[
        ("read", "aaa-evil"),
        ("list", "bbb"),
        ("exfil", "ddd"),
    ]));
    second.push(snapshot(&[
        ("read", "aaa-evil"),
        ("list", "bbb2"),
        ("exfil", "ddd"),
    ]));
    second.push(finished(0));
    write_run(&dir, "run_after", &second);

    let (json, text) = investigate(&dir, "run_after");
    let changes = json["serverChanges"].as_array().expect("changes");
    assert_eq!(changes.len(), 2, "{json:#}");
    assert_eq!(changes[0]["server"], "files");
    assert_eq!(changes[0]["sinceRun"], "run_before");
    assert_eq!(changes[0]["added"], json!(["exfil"]));
    assert_eq!(changes[0]["removed"], json!(["old"]));
    assert_eq!(changes[0]["changed"], json!(["read"]));
    assert!(
        changes[1].get("sinceRun").is_none(),
        "changed during the run"
    );
    assert_eq!(changes[1]["changed"], json!(["list"]));
    assert!(text.contains("files (since run_before)"), "{text}");
    assert!(text.contains("changed: read"), "{text}");

    // The earlier run has nothing before it to differ from.
    let (json, _) = investigate(&dir, "run_before");
    assert!(json["serverChanges"].as_array().is_some_and(Vec::is_empty));
}

/// Gaps in the record are explained: an unfinished run nobody is writing
/// (interrupted), a call without an answer, a torn tail, and observations
/// the recorder dropped.
#[test]
fn investigate_explains_interrupted_and_lossy_runs() {
    let dir = TempDir::new("inv-gaps");
    let mut events = vec![started("run_cut", "2026-12-01T20:00:00.000Z", "standalone")];
    events.extend(call(1, "list", json!({}), 3.0, ok()));
    let [selected, _] = call(2, "read", json!({"path": "/p/a"}), 1.0, ok());
    events.push(selected);
    write_run(&dir, "run_cut", &events);
    let mut journal = OpenOptions::new()
        .append(true)
        .open(runs_dir(&dir).join("run_cut.journal"))
        .expect("open");
    journal.write_all(b"\x10\x00\x00\x00half").expect("tear");
    drop(journal);

    let mut events = vec![started(
        "run_lossy",
        "2026-12-01T20:10:00.000Z",
        "standalone",
    )];
    events.extend(call(1, "list", json!({}), 3.0, ok()));
    events.push(finished(7));
    write_run(&dir, "run_lossy", &events);

    let (json, text) = investigate(&dir, "run_cut");
    assert_eq!(json["state"], "interrupted");
    let kinds: Vec<&str> = json["gaps"]
        .as_array()
        .expect("gaps")
        .iter()
        .filter_map(|g| g["kind"].as_str())
        .collect();
    assert_eq!(kinds, ["interrupted", "torn", "unanswered"], "{json:#}");
    assert!(
        text.contains("no answer recorded for mcp__files__read (step 2)"),
        "{text}"
    );

    let (json, text) = investigate(&dir, "run_lossy");
    assert_eq!(json["gaps"][0]["kind"], "dropped", "{json:#}");
    assert_eq!(json["gaps"].as_array().map(Vec::len), Some(1), "{json:#}");
    assert!(text.contains("7 observation(s) were dropped"), "{text}");
}
