//! Tokens per turn and run as the readers show them: `bir runs` (a
//! TOKENS column summing the run, empty, not 0, for a run without any),
//! `bir runs show` (a line per turn, the total on the finish line) and
//! the report (per turn and for the run); a cost only where the user set
//! prices (`$BIR_HOME/prices.json`), never from a table of bir's own.

use std::fs;

use serde_json::{Value, json};

use crate::bound_runs::write_run;
use crate::record::bir_cmd;
use crate::report::page_data;
use crate::support::TempDir;

/// A bound run of two turns: turn 1 with the main model and a subagent's,
/// turn 2 with the main model only.
fn run_with_tokens(id: &str) -> Vec<Value> {
    let at = |s: &str| format!("2026-12-01T20:00:{s}Z");
    let usage = |input: u64, output: u64, read: u64, write: u64| json!({"input": input, "output": output, "cacheRead": read, "cacheWrite": write});
    vec![
        json!({"kind": "run_started", "data": {"id": id, "startedAt": at("00.000"),
            "input": "Sum the numbers.",
            "metadata": {"recorder": "bir", "tier": "bound", "host": {"app": "claude-code", "version": "2.1.332"},
                "wrappedServers": [], "cwd": "/p", "sessionId": "s-1", "birVersion": "0", "lossy": false,
                "model": "model-main"}}}),
        json!({"kind": "turn", "data": {"turn": 1, "at": at("00.500"), "prompt": "Sum the numbers."}}),
        json!({"kind": "turn", "data": {"turn": 2, "at": at("05.000"), "prompt": "Thanks."}}),
        json!({"kind": "run_finished", "data": {"finishedAt": at("07.000"),
            "metrics": {"toolCalls": 0, "errors": 0, "totalToolMs": 0.0,
                "usage": usage(3_500_000, 300_000, 2_000_000, 100_000),
                "turnUsage": [
                    {"turn": 1, "model": "model-main", "usage": usage(2_000_000, 200_000, 1_000_000, 100_000)},
                    {"turn": 1, "model": "model-helper", "usage": usage(1_000_000, 50_000, 1_000_000, 0)},
                    {"turn": 2, "model": "model-main", "usage": usage(500_000, 50_000, 0, 0)}]},
            "lossy": false, "dropped": 0, "reason": "session_end"}}),
    ]
}

/// A bound run that recorded no tokens.
fn run_without_tokens(id: &str) -> Vec<Value> {
    let mut events = run_with_tokens(id);
    let finish = events.last_mut().expect("finish");
    let metrics = finish["data"]["metrics"].as_object_mut().expect("metrics");
    metrics.remove("usage");
    metrics.remove("turnUsage");
    events
}

fn prices(dir: &TempDir, text: &str) {
    fs::write(dir.join("home/.baseinstrunner/prices.json"), text).expect("prices");
}

fn ok(dir: &TempDir, args: &[&str]) -> String {
    let (code, out, err) = bir_cmd(dir, args);
    assert_eq!(code, 0, "{out}{err}");
    out
}

#[test]
fn bir_runs_sums_a_runs_tokens_and_leaves_a_run_without_any_blank() {
    let dir = TempDir::new("tokens-list");
    write_run(&dir, "run_tokens_a", &run_with_tokens("run_tokens_a"));
    write_run(&dir, "run_tokens_b", &run_without_tokens("run_tokens_b"));
    let table = ok(&dir, &["runs"]);
    let lines: Vec<&str> = table.lines().collect();
    let (head, rows) = (lines[0], &lines[1..]);
    let col = head.find("TOKENS").expect("a TOKENS column");
    let cell = |id: &str| {
        let row = rows
            .iter()
            .find(|r| r.starts_with(id))
            .expect("the run's row");
        // Right-aligned under its title (7 wide, ending where it ends).
        row.get(col - 1..col + 6).unwrap_or("").trim().to_owned()
    };
    // 3.5M in + 300k out.
    assert_eq!(cell("run_tokens_a"), "3.80M", "{table}");
    assert_eq!(cell("run_tokens_b"), "", "{table}");
    let json = ok(&dir, &["runs", "--json"]);
    let runs: Vec<Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let of = |id: &str| runs.iter().find(|r| r["id"] == id).expect("listed");
    assert_eq!(
        of("run_tokens_a")["tokens"],
        json!({"input": 3_500_000, "output": 300_000, "cacheRead": 2_000_000, "cacheWrite": 100_000})
    );
    assert!(of("run_tokens_b").get("tokens").is_none());
}

#[test]
fn runs_show_and_the_report_give_each_turns_tokens_and_a_cost_only_with_prices() {
    let dir = TempDir::new("tokens-show");
    write_run(&dir, "run_tokens_c", &run_with_tokens("run_tokens_c"));
    let shown = ok(&dir, &["runs", "show", "run_tokens_c"]);
    assert!(
        shown.contains(
            "tokens  3000000 in (2000000 cache reads, 100000 cache writes) · 250000 out · model-main, model-helper\n"
        ),
        "{shown}"
    );
    assert!(
        shown.contains("tokens  500000 in · 50000 out · model-main\n"),
        "{shown}"
    );
    assert!(!shown.contains('$'), "no prices, no cost: {shown}");
    let page = dir.join("page.html");
    let page_arg = page.to_str().expect("utf-8");
    ok(&dir, &["report", "run_tokens_c", "-o", page_arg]);
    let doc = page_data(&fs::read_to_string(&page).expect("page"));
    assert_eq!(doc["turns"][1]["tokens"]["input"], 500_000);
    assert_eq!(doc["turns"][1]["models"], json!(["model-main"]));
    assert_eq!(doc["run"]["tokens"]["output"], 300_000);
    assert!(doc["run"].get("costUsd").is_none() && doc["turns"][0].get("costUsd").is_none());

    // One model priced: turn 2 has a cost, turn 1 (the helper's model has
    // no price) and the run have none.
    prices(
        &dir,
        r#"{"model-main": {"input": 3, "output": 15, "cacheRead": 0.3, "cacheWrite": 3.75}}"#,
    );
    let shown = ok(&dir, &["runs", "show", "run_tokens_c"]);
    // 500k × $3/M + 50k × $15/M.
    assert!(
        shown.contains("tokens  500000 in · 50000 out · model-main · $2.2500\n"),
        "{shown}"
    );
    assert_eq!(shown.matches('$').count(), 1, "{shown}");
    ok(&dir, &["report", "run_tokens_c", "-o", page_arg]);
    let doc = page_data(&fs::read_to_string(&page).expect("page"));
    assert_eq!(doc["turns"][1]["costUsd"], 2.25);
    assert!(doc["turns"][0].get("costUsd").is_none() && doc["run"].get("costUsd").is_none());

    // Both priced (a prefix key for the helper): every turn and the run.
    prices(
        &dir,
        r#"{"model-main": {"input": 3, "output": 15, "cacheRead": 0.3, "cacheWrite": 3.75},
            "model-h*": {"input": 1, "output": 5}}"#,
    );
    let shown = ok(&dir, &["runs", "show", "run_tokens_c"]);
    // Turn 1: main 900k × 3 + 1M × 0.3 + 100k × 3.75 + 200k × 15 = 6.375;
    // helper (cache reads at the input price) 1M × 1 + 50k × 5 = 1.25.
    assert!(
        shown.contains(" · model-main, model-helper · $7.6250\n"),
        "{shown}"
    );
    // The run: both turns.
    assert!(
        shown.contains(" · 300000 out · $9.8750 · session_end"),
        "{shown}"
    );

    // A broken prices file is said and ignored.
    prices(&dir, "{not json");
    let (code, out, err) = bir_cmd(&dir, &["runs", "show", "run_tokens_c"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(!out.contains('$'), "{out}");
    assert!(err.contains("prices ignored"), "{err}");
}
