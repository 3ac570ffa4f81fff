//! `bir report`: the page's structure on recorded runs, read back from the
//! data it embeds (not byte goldens: a change of style must not fail them,
//! a change of what the page says must).
//!
//! Cases: a standalone run of the real server-everything (recorded once
//! through bir-proxy, `tests/fixtures/report/everything.jsonl`), a bound
//! run with subagents and parallel calls (hand-made), a run through the
//! proxy with errors, a truncated payload, a binary, a secret and an
//! injection payload, an empty run, a lossy run; `--follow` on a live run;
//! `--open`.
//!
//! With `BIR_REPORT_PAGES=DIR` each case also leaves its page and what a
//! browser must find in it (`<case>.html`, `<case>.expect.json`) for the
//! browser check (`tests/browser/report.mjs`, `make browser`).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::bound_runs::{step, write_run};
use crate::record::{bir_cmd, call, init, proxy, runs_dir};
use crate::support::{Host, TempDir, bir, command};
use crate::support::{eventually, wait_for, wait_until};

/// The injection a tool result carries in these tests: if the page ever
/// parsed recorded text as HTML, the image would exist and its handler
/// would set `window.__birPwned`.
const INJECTION: &str = "</script><img src=x onerror=\"window.__birPwned=1\"><script>window.__birPwned=2</script><b>bold?</b>";

/// A 1×1 GIF: small enough that the recorder keeps it inline (larger
/// binaries become a stub with their size and hash).
const PIXEL: &str = "R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7";

/// The data embedded in a page: the JSON inside its `bir-run` element,
/// which must hold no raw `<` (nothing can close the element early).
pub(crate) fn page_data(html: &str) -> Value {
    let open = r#"<script type="application/json" id="bir-run">"#;
    let start = html.find(open).expect("the data element") + open.len();
    let len = html[start..].find("</script>").expect("its end");
    let data = &html[start..start + len];
    for bad in ['<', '>', '&', '\u{2028}', '\u{2029}'] {
        assert!(!data.contains(bad), "raw {bad:?} in the embedded data");
    }
    serde_json::from_str(data).expect("the embedded data is JSON")
}

/// `bir report RUN -o <dir>/page.html`: the page, and its data.
fn report(dir: &TempDir, run: &str) -> (String, Value) {
    let page = dir.join("page.html");
    let (code, out, err) = bir_cmd(dir, &["report", run, "-o", page.to_str().expect("utf-8")]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("wrote "), "{out}");
    let html = fs::read_to_string(&page).expect("the page");
    let doc = page_data(&html);
    (html, doc)
}

/// One line per step: number, depth, kind, status, name (the structure a
/// reader sees, in order).
fn outline(doc: &Value) -> Vec<String> {
    doc["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .map(|s| {
            format!(
                "{} {}{} {} {}",
                s["label"].as_str().unwrap_or("?"),
                "  ".repeat(s["depth"].as_u64().unwrap_or(0) as usize),
                s["kind"].as_str().unwrap_or("?"),
                s["status"].as_str().unwrap_or("?"),
                s["name"].as_str().unwrap_or("?")
            )
        })
        .collect()
}

/// Leaves the page and the browser's expectations in `$BIR_REPORT_PAGES`.
fn keep_for_browser(case: &str, html: &str, doc: &Value, expect: Value) {
    let Some(dir) = std::env::var_os("BIR_REPORT_PAGES") else {
        return;
    };
    let dir = PathBuf::from(dir);
    fs::create_dir_all(&dir).expect("pages dir");
    fs::write(dir.join(format!("{case}.html")), html).expect("page");
    let names: Vec<&Value> = doc["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .map(|s| &s["name"])
        .collect();
    let labels: Vec<&Value> = doc["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .map(|s| &s["label"])
        .collect();
    let mut expect = expect;
    expect["steps"] = json!(names);
    expect["labels"] = json!(labels);
    fs::write(
        dir.join(format!("{case}.expect.json")),
        serde_json::to_vec_pretty(&expect).expect("json"),
    )
    .expect("expectations");
}

/// Writes `tests/fixtures/report/<name>.jsonl` (records as `bir runs
/// export --format jsonl` writes them) as run `id`'s journal.
fn write_fixture(dir: &TempDir, id: &str, name: &str) {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/report/{name}.jsonl"));
    let text = fs::read_to_string(path).expect("fixture");
    let events: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("record")["event"].clone())
        .collect();
    write_run(dir, id, &events);
}

#[test]
fn a_standalone_run_of_server_everything() {
    let dir = TempDir::new("report-everything");
    write_fixture(
        &dir,
        "run_8483369e-40fb-45c6-a4d4-b502063e9641",
        "everything",
    );
    let (html, doc) = report(&dir, "latest");
    assert_eq!(
        outline(&doc),
        [
            "1 mcp ok everything › echo",
            "2 mcp ok everything › get-sum",
            "3 mcp ok everything › echo",
            "4 mcp ok everything › get-tiny-image",
            "5 mcp ok everything › trigger-long-running-operation",
            "6 mcp error everything › no-such-tool",
            "7 mcp ok everything › get-structured-content",
        ]
    );
    let run = &doc["run"];
    assert_eq!(run["tier"], "standalone");
    assert_eq!(run["state"], "finished");
    assert_eq!(run["live"], false);
    assert_eq!(
        (run["calls"].as_u64(), run["errors"].as_u64()),
        (Some(7), Some(1))
    );
    assert_eq!(run["host"], "bir-fixture");
    assert_eq!(run["durationMs"], 1048);
    assert_eq!(run["lossy"], false);
    assert_eq!(doc["servers"][0]["name"], "everything");
    assert_eq!(doc["servers"][0]["tools"], 13);
    assert!(
        doc["servers"][0]["toolsDigest"]
            .as_str()
            .is_some_and(|d| d.starts_with("d21f6119a1c9"))
    );
    // Parallel calls overlap on the time axis: the slow one spans the two
    // quick ones started with it.
    let s = &doc["steps"];
    let (slow_start, slow_end) = (
        s[4]["ms"].as_f64().expect("ms"),
        s[4]["endMs"].as_f64().expect("end"),
    );
    for quick in [2, 3] {
        let start = s[quick]["ms"].as_f64().expect("ms");
        assert!(
            start >= slow_start && start < slow_end,
            "step {quick} is not inside the slow call's bar"
        );
    }
    assert!(doc["span"].as_f64().expect("span") >= slow_end);
    // The image's bytes were not kept: a stub with size and hash.
    assert_eq!(s[3]["result"]["content"][1]["data"]["omitted"], "binary");
    assert_eq!(s[5]["isError"], true);
    assert!(html.len() < 200_000, "{} bytes", html.len());
    keep_for_browser(
        "everything",
        &html,
        &doc,
        json!({"expand": {"label": "1", "text": "hello from the fixture"},
               "search": {"query": "in parallel", "count": 1},
               "errors": 1}),
    );
}

/// A bound session: built-in, MCP and Agent calls, two calls at once, a
/// subagent's calls nested under its Agent call (one failing), session
/// events, two turns and their answers.
fn bound_events() -> Vec<Value> {
    let at = |s: &str| format!("2026-12-01T20:00:{s}Z");
    let sub = |extra: Value| {
        let mut v = json!({"agentId": "agent-7", "agentType": "general-purpose", "parentToolUseId": "toolu_4"});
        for (k, x) in extra.as_object().expect("object") {
            v[k] = x.clone();
        }
        v
    };
    vec![
        json!({"kind": "run_started", "data": {"id": "run_bound_report", "startedAt": at("00.000"),
            "input": "List the files, then ask a helper to echo.",
            "metadata": {"recorder": "bir", "tier": "bound", "host": {"app": "claude-code", "version": "2.1.332"},
                "wrappedServers": ["everything"], "cwd": "/p", "sessionId": "s-1", "birVersion": "0", "lossy": false,
                "model": "claude-test-model"}}}),
        json!({"kind": "turn", "data": {"turn": 1, "at": at("00.500"), "prompt": "List the files, then ask a helper to echo."}}),
        step(
            1,
            "tool_selected",
            "Bash",
            "toolu_1",
            json!({"startedAt": at("01.000"), "input": {"command": "ls"}, "context": "First, the files."}),
        ),
        step(
            2,
            "tool_response",
            "Bash",
            "toolu_1",
            json!({"startedAt": at("01.000"), "durationMs": 120.0, "output": {"stdout": "README.md", "stderr": ""}}),
        ),
        // Two at once.
        step(
            3,
            "tool_selected",
            "Read",
            "toolu_2",
            json!({"startedAt": at("02.000"), "input": {"file_path": "/p/README.md"}}),
        ),
        step(
            4,
            "tool_selected",
            "Grep",
            "toolu_3",
            json!({"startedAt": at("02.010"), "input": {"pattern": "echo"}}),
        ),
        step(
            5,
            "tool_response",
            "Grep",
            "toolu_3",
            json!({"startedAt": at("02.010"), "durationMs": 300.0, "output": {"matches": 2}}),
        ),
        step(
            6,
            "tool_response",
            "Read",
            "toolu_2",
            json!({"startedAt": at("02.000"), "durationMs": 450.0, "output": {"content": "# readme"}}),
        ),
        step(
            7,
            "tool_selected",
            "Agent",
            "toolu_4",
            json!({"startedAt": at("03.000"), "input": {"subagent_type": "general-purpose", "prompt": "echo it"}, "context": "A helper next."}),
        ),
        json!({"kind": "session_event", "data": {"name": "SubagentStart", "at": at("03.100"), "agentId": "agent-7", "data": {"agent_type": "general-purpose"}}}),
        step(
            8,
            "tool_selected",
            "mcp__everything__echo",
            "toolu_5",
            sub(
                json!({"startedAt": at("03.500"), "input": {"message": "from the helper"}, "context": "Echoing for the parent."}),
            ),
        ),
        step(
            9,
            "tool_response",
            "mcp__everything__echo",
            "toolu_5",
            sub(
                json!({"startedAt": at("03.500"), "durationMs": 40.0, "output": {"content": [{"type": "text", "text": "Echo: from the helper"}]}}),
            ),
        ),
        step(
            10,
            "tool_selected",
            "Bash",
            "toolu_6",
            sub(json!({"startedAt": at("04.000"), "input": {"command": "false"}})),
        ),
        step(
            11,
            "tool_response",
            "Bash",
            "toolu_6",
            sub(
                json!({"startedAt": at("04.000"), "durationMs": 15.0, "isError": true, "error": "Exit code 1"}),
            ),
        ),
        step(
            12,
            "tool_response",
            "Agent",
            "toolu_4",
            json!({"startedAt": at("03.000"), "output": {"status": "completed"}}),
        ),
        json!({"kind": "session_event", "data": {"name": "SubagentStop", "at": at("04.600"), "agentId": "agent-7"}}),
        step(
            13,
            "final_answer",
            "",
            "",
            json!({"startedAt": at("05.000"), "output": "Done: README.md; the helper echoed."}),
        ),
        json!({"kind": "turn", "data": {"turn": 2, "at": at("06.000"), "prompt": "<task-notification><summary>helper done</summary></task-notification>", "origin": "task-notification"}}),
        step(
            14,
            "final_answer",
            "",
            "",
            json!({"startedAt": at("06.500"), "output": "Noted.", "turn": 2}),
        ),
        json!({"kind": "run_finished", "data": {"finishedAt": at("07.000"), "output": "Noted.",
            "metrics": {"toolCalls": 6, "errors": 1, "totalToolMs": 925.0}, "lossy": false, "dropped": 0, "reason": "session_end"}}),
    ]
}

#[test]
fn a_bound_run_with_subagents_and_parallel_calls() {
    let dir = TempDir::new("report-bound");
    write_run(&dir, "run_bound_report", &bound_events());
    let (html, doc) = report(&dir, "run_bound_report");
    assert_eq!(
        outline(&doc),
        [
            "1 builtin ok Bash",
            "2 builtin ok Read",
            "3 builtin ok Grep",
            "4 agent ok Agent",
            "4.1   mcp ok everything › echo",
            "4.2   builtin error Bash",
        ]
    );
    let s = &doc["steps"];
    assert_eq!(
        (&s[4]["parent"], &s[5]["parent"]),
        (&json!("4"), &json!("4"))
    );
    assert_eq!(s[5]["n"], 6, "n counts every call in reading order");
    assert_eq!(s[4]["agentType"], "general-purpose");
    assert_eq!(s[0]["context"], "First, the files.");
    // Read and Grep overlap; the Agent's bar (no duration of its own) runs
    // to the end of its subagent's last call.
    assert!(s[2]["ms"].as_f64() < s[1]["endMs"].as_f64());
    assert_eq!(s[3]["endMs"], 4015.0);
    assert_eq!(doc["run"]["model"], "claude-test-model");
    assert_eq!(doc["turns"].as_array().map(Vec::len), Some(2));
    assert_eq!(doc["turns"][1]["origin"], "task-notification");
    assert_eq!(
        doc["answers"][0]["text"],
        "Done: README.md; the helper echoed."
    );
    assert_eq!(doc["answers"][1]["turn"], 2);
    assert_eq!(doc["events"][0]["name"], "SubagentStart");
    assert_eq!(doc["events"][0]["ms"], 3100.0);
    keep_for_browser(
        "bound",
        &html,
        &doc,
        json!({"expand": {"label": "4.1", "text": "from the helper"},
               "search": {"query": "readme", "count": 2},
               "errors": 1}),
    );
}

#[test]
fn errors_truncations_binaries_redactions_and_an_injection_stay_what_they_are() {
    let dir = TempDir::new("report-marks");
    let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==".repeat(3);
    let script = json!({
        "tools": [{"name": "echo", "inputSchema": {"type": "object"}}],
        "rules": [
            {"method": "tools/call", "tool": "inject", "do": [{"reply": {"content": [{"type": "text", "text": INJECTION}]}}]},
            {"method": "tools/call", "tool": "fail", "do": [{"reply": {"isError": true, "content": [{"type": "text", "text": "it broke"}]}}]},
            {"method": "tools/call", "tool": "gone", "do": [{"reply_error": {"code": -32602, "message": "no such tool"}}]},
            {"method": "tools/call", "tool": "big", "do": [{"big_reply_bytes": 200000}]},
            {"method": "tools/call", "tool": "image", "do": [{"reply": {"content": [{"type": "image", "mimeType": "image/png", "data": png}]}}]},
            {"method": "tools/call", "tool": "pixel", "do": [{"reply": {"content": [{"type": "image", "mimeType": "image/gif", "data": PIXEL}]}}]},
        ]
    });
    let mut host = Host::start(proxy(&dir, &script));
    host.send(&init());
    let token = format!("ghp_{}", "a1B2c3D4e5".repeat(4));
    let calls = [
        call(1, "inject", json!({})),
        call(2, "fail", json!({})),
        call(3, "gone", json!({})),
        call(4, "big", json!({})),
        call(5, "image", json!({})),
        call(
            6,
            "echo",
            json!({"token": token, "note": format!("use {token} here")}),
        ),
        call(7, "pixel", json!({})),
    ];
    for c in &calls {
        host.send(c);
    }
    assert!(host.wait_lines(1 + calls.len(), Duration::from_secs(20)));
    let seen = host.finish(Duration::from_secs(10));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);

    let (html, doc) = report(&dir, "latest");
    assert_eq!(
        outline(&doc),
        [
            "1 mcp ok peer › inject",
            "2 mcp error peer › fail",
            "3 mcp error peer › gone",
            "4 mcp ok peer › big",
            "5 mcp ok peer › image",
            "6 mcp ok peer › echo",
            "7 mcp ok peer › pixel",
        ]
    );
    let s = &doc["steps"];
    assert_eq!(
        s[0]["result"]["content"][0]["text"], INJECTION,
        "the payload is data, whole"
    );
    assert!(
        !html.contains("<img src=x"),
        "the payload reached the page as markup"
    );
    assert_eq!(s[1]["isError"], true);
    assert_eq!(s[2]["error"]["message"], "no such tool");
    assert_eq!(s[3]["result"]["truncated"], true);
    assert!(s[3]["result"]["originalBytes"].as_u64() > Some(200_000));
    assert_eq!(s[4]["result"]["content"][0]["data"]["omitted"], "binary");
    assert_eq!(
        s[4]["result"]["content"][0]["data"]["base64Bytes"],
        png.len()
    );
    let echoed = serde_json::to_string(&s[5]["args"]).expect("json");
    assert!(
        echoed.contains("[REDACTED:") && !echoed.contains(&token),
        "{echoed}"
    );
    assert!(s[5]["redactions"].as_u64() >= Some(1));
    assert!(!html.contains(&token), "the secret is in the page");
    assert_eq!(
        s[6]["result"]["content"][0]["data"], PIXEL,
        "a tiny image is kept inline"
    );
    assert!(
        html.len() < 100_000,
        "a capped payload keeps the page small: {}",
        html.len()
    );
    keep_for_browser(
        "marks",
        &html,
        &doc,
        json!({"expand": {"label": "1", "text": INJECTION},
               "search": {"query": "redacted", "count": 1},
               "injection": INJECTION,
               "image": {"label": "7", "mime": "image/gif"},
               "errors": 2}),
    );
}

/// The `run_started` record of a standalone run of `server`, started at
/// 20:00:00.
fn standalone_start(id: &str, server: &str) -> Value {
    json!({"kind": "run_started", "data": {"id": id, "startedAt": "2026-12-01T20:00:00.000Z",
        "metadata": {"recorder": "bir", "tier": "standalone", "wrappedServers": [server], "cwd": "/p", "birVersion": "0"}}})
}

#[test]
fn an_empty_run_and_an_empty_journal() {
    let dir = TempDir::new("report-empty");
    write_run(
        &dir,
        "run_empty",
        &[
            standalone_start("run_empty", "quiet"),
            json!({"kind": "run_finished", "data": {"finishedAt": "2026-12-01T20:00:02.000Z",
                "metrics": {"toolCalls": 0, "errors": 0, "totalToolMs": 0.0}, "lossy": false, "dropped": 0}}),
        ],
    );
    let (html, doc) = report(&dir, "run_empty");
    assert!(outline(&doc).is_empty());
    assert_eq!(doc["run"]["calls"], 0);
    assert_eq!(doc["run"]["durationMs"], 2000);
    assert_eq!(doc["servers"], json!([{"name": "quiet"}]));
    keep_for_browser("empty", &html, &doc, json!({}));

    // The default page is a copy of the run's data: removing the run
    // removes it too.
    let (code, out, err) = bir_cmd(&dir, &["report", "run_empty"]);
    assert_eq!(code, 0, "{out}{err}");
    let page = runs_dir(&dir)
        .with_file_name("reports")
        .join("run_empty.html");
    assert!(
        page.is_file(),
        "the default page at {}: {out}",
        page.display()
    );
    let (code, out, err) = bir_cmd(&dir, &["runs", "rm", "run_empty"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(!runs_dir(&dir).join("run_empty.journal").exists());
    assert!(!page.exists(), "bir runs rm left the run's page behind");

    // A journal with nothing in it at all (its proxy died before the
    // first record) still has a page.
    fs::write(runs_dir(&dir).join("run_nothing.journal"), b"").expect("empty journal");
    let (_, doc) = report(&dir, "run_nothing");
    assert_eq!(doc["run"]["id"], "run_nothing");
    assert_eq!(doc["run"]["state"], "interrupted");
    assert!(outline(&doc).is_empty());
}

#[test]
fn a_lossy_run_says_why() {
    let dir = TempDir::new("report-lossy");
    write_run(
        &dir,
        "run_lossy",
        &[
            standalone_start("run_lossy", "peer"),
            step(
                1,
                "tool_selected",
                "mcp__peer__echo",
                "",
                json!({"input": {"m": 1}}),
            ),
            step(
                2,
                "tool_response",
                "mcp__peer__echo",
                "",
                json!({"output": {"content": []}, "durationMs": 3.0}),
            ),
            json!({"kind": "run_finished", "data": {"finishedAt": "2026-12-01T20:00:05.000Z",
                "metrics": {"toolCalls": 1, "errors": 0, "totalToolMs": 3.0}, "lossy": true, "dropped": 7}}),
        ],
    );
    // And a torn tail: half a record after the last one.
    let journal = runs_dir(&dir).join("run_lossy.journal");
    let mut bytes = fs::read(&journal).expect("journal");
    bytes.extend_from_slice(&[40, 0, 0, 0, 1, 2, 3, 4, b'{', b'"']);
    fs::write(&journal, bytes).expect("torn tail");
    let (html, doc) = report(&dir, "run_lossy");
    assert_eq!(doc["run"]["lossy"], true);
    let why = doc["run"]["lossyWhy"].as_array().expect("why");
    assert!(
        why[0]
            .as_str()
            .is_some_and(|w| w.starts_with("7 observation(s) were dropped")),
        "{why:?}"
    );
    assert!(
        why[1]
            .as_str()
            .is_some_and(|w| w.contains("10 byte(s) of an interrupted write")),
        "{why:?}"
    );
    assert_eq!(outline(&doc), ["1 mcp ok peer › echo"]);
    keep_for_browser("lossy", &html, &doc, json!({"lossy": true}));
}

/// Polls `path` until its data satisfies `want` (generously: the machine
/// may be busy).
fn wait_for_page(path: &Path, want: impl Fn(&Value) -> bool, what: &str) -> Value {
    wait_for(
        &format!("the page to show {what}"),
        Duration::from_secs(60),
        || {
            let html = fs::read_to_string(path).ok()?;
            let doc = html.contains("</html>").then(|| page_data(&html))?;
            want(&doc).then_some(doc)
        },
    )
}

fn wait_exit(child: &mut Child, what: &str) -> std::process::ExitStatus {
    eventually(Duration::from_secs(60), || child.try_wait().expect("wait")).unwrap_or_else(|| {
        let _ = child.kill();
        panic!("{what} did not end");
    })
}

/// `--follow` rewrites the page as calls arrive, live (reloading) while
/// the proxy runs, and once more, still, when the run ends; then returns.
#[test]
fn follow_rewrites_the_page_until_the_run_ends() {
    let dir = TempDir::new("report-follow");
    let script = json!({"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]});
    let mut host = Host::start(proxy(&dir, &script));
    host.send(&init());
    host.send(&call(1, "echo", json!({"m": "first"})));
    assert!(host.wait_lines(2, Duration::from_secs(20)));
    // The run exists once its first call is written.
    wait_until("a run to be opened", Duration::from_secs(30), || {
        fs::read_dir(runs_dir(&dir)).is_ok_and(|d| d.count() > 0)
    });
    let page = dir.join("live.html");
    let mut follower = command(bir(), &dir)
        .args(["report", "latest", "--follow", "-o"])
        .arg(&page)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("bir report --follow");
    let doc = wait_for_page(
        &page,
        |d| d["steps"].as_array().is_some_and(|s| s.len() == 1),
        "the first call",
    );
    assert_eq!(doc["run"]["live"], true, "a live run's page reloads itself");
    assert_eq!(doc["run"]["state"], "open");

    host.send(&call(2, "echo", json!({"m": "second"})));
    assert!(host.wait_lines(3, Duration::from_secs(20)));
    wait_for_page(
        &page,
        |d| d["steps"].as_array().is_some_and(|s| s.len() == 2),
        "the second call",
    );

    let seen = host.finish(Duration::from_secs(10));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
    let status = wait_exit(&mut follower, "bir report --follow");
    assert!(status.success(), "{status:?}");
    let doc = page_data(&fs::read_to_string(&page).expect("page"));
    assert_eq!(doc["run"]["live"], false, "the last page stays still");
    assert_eq!(doc["run"]["state"], "finished");
    assert_eq!(
        outline(&doc),
        ["1 mcp ok peer › echo", "2 mcp ok peer › echo"]
    );
}

/// `--open` hands the page to `xdg-open` when there is one; without one it
/// says where the page is. The default place is private, under the store.
#[test]
fn open_uses_the_desktop_opener_or_prints_the_path() {
    let dir = TempDir::new("report-open");
    write_run(&dir, "run_bound_report", &bound_events());
    let bin = dir.join("bin");
    fs::create_dir_all(&bin).expect("bin");
    let opened = dir.join("opened.txt");
    let opener = bin.join("xdg-open");
    fs::write(
        &opener,
        format!("#!/bin/sh\necho \"$1\" > '{}'\n", opened.display()),
    )
    .expect("opener");
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&opener, fs::Permissions::from_mode(0o755)).expect("chmod");

    let run = |path: &str| {
        let out = command(bir(), &dir)
            .env("PATH", path)
            .args(["report", "latest", "--open"])
            .output()
            .expect("bir report --open");
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let expected = dir.join("home/.baseinstrunner/reports/run_bound_report.html");
    let system = std::env::var("PATH").unwrap_or_default();
    run(&format!("{}:{system}", bin.display()));
    let want = expected.to_str().expect("utf-8");
    wait_until(
        &format!("xdg-open to be run on {want}"),
        Duration::from_secs(30),
        || fs::read_to_string(&opened).is_ok_and(|said| said.trim() == want),
    );
    let mode = fs::metadata(&expected)
        .expect("the page")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600, "the page holds recorded data: private");

    // An opener that fails (no desktop): the path is printed.
    fs::write(&opener, "#!/bin/sh\nexit 3\n").expect("failing opener");
    let out = run(&format!("{}:{system}", bin.display()));
    assert!(
        out.contains("xdg-open could not open it") && out.contains("run_bound_report.html"),
        "{out}"
    );

    // No opener anywhere on PATH: the path is printed.
    let empty = dir.join("empty-bin");
    fs::create_dir_all(&empty).expect("dir");
    let out = run(empty.to_str().expect("utf-8"));
    assert!(
        out.contains("no xdg-open or open here") && out.contains("run_bound_report.html"),
        "{out}"
    );
}
