//! `bir runs` on bound runs (Tier 1): journals written here the way the
//! recorder daemon writes them (framed records in `$BIR_HOME/runs`), read
//! back through the CLI: the list's tier and prompt, `show`'s turns, and
//! `export` with the turns and session events.

use std::fs;

use serde_json::{Value, json};

use crate::record::bir_cmd;
use crate::support::TempDir;

/// CRC-32C (Castagnoli), bit by bit: the journal's record checksum. The
/// reader drops a record whose checksum is wrong, so a mistake here fails
/// every test below.
pub(crate) fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// Writes `events` (each `{"kind": …, "data": …}`) as run `id`'s journal.
pub(crate) fn write_run(dir: &TempDir, id: &str, events: &[Value]) {
    let runs = dir.join("home/.baseinstrunner/runs");
    fs::create_dir_all(&runs).expect("mkdir");
    use std::os::unix::fs::PermissionsExt;
    for d in [runs.parent().expect("home"), runs.as_path()] {
        fs::set_permissions(d, fs::Permissions::from_mode(0o700)).expect("chmod");
    }
    let mut bytes = Vec::new();
    for (i, event) in events.iter().enumerate() {
        // The writer puts `kind` before `data` (the reader relies on it to
        // keep numbers exact); `json!` would sort the keys.
        let payload = format!(
            r#"{{"seq":{},"event":{{"kind":{},"data":{}}}}}"#,
            i + 1,
            event["kind"],
            event["data"]
        )
        .into_bytes();
        bytes.extend((payload.len() as u32).to_le_bytes());
        bytes.extend(crc32c(&payload).to_le_bytes());
        bytes.extend(&payload);
        bytes.push(b'\n');
    }
    fs::write(runs.join(format!("{id}.journal")), bytes).expect("write");
}

pub(crate) fn step(index: u64, kind: &str, name: &str, id: &str, extra: Value) -> Value {
    let (k, server, tool) = match name.strip_prefix("mcp__") {
        Some(rest) => {
            let (s, t) = rest.split_once("__").expect("mcp name");
            ("mcp", s, t)
        }
        None if name == "Agent" => ("agent", "", name),
        None => ("builtin", "", name),
    };
    let mut s = json!({"id": format!("step_{index}"), "stepIndex": index, "type": kind,
        "qualifiedName": name, "serverName": server, "toolName": tool,
        "startedAt": format!("2026-12-01T20:00:{index:02}.000Z"), "toolUseId": id,
        "kind": k, "turn": 1});
    for (key, v) in extra.as_object().expect("object") {
        s[key] = v.clone();
    }
    json!({"kind": "step", "data": s})
}

fn bound_session() -> Vec<Value> {
    let sub =
        json!({"agentId": "agent-7", "agentType": "general-purpose", "parentToolUseId": "toolu_3"});
    let mut sub_sel =
        json!({"input": {"message": "from the helper"}, "context": "Echoing for the parent."});
    let mut sub_resp = json!({"output": {"content": [{"type": "text", "text": "Echo: from the helper"}]}, "durationMs": 2.0});
    for v in [&mut sub_sel, &mut sub_resp] {
        for (k, x) in sub.as_object().expect("o") {
            v[k] = x.clone();
        }
    }
    vec![
        json!({"kind": "run_started", "data": {"id": "run_bound_cli", "startedAt": "2026-12-01T20:00:00.000Z",
            "input": "Run echo,\nthen \u{1b}]0;pwn\u{7} help",
            "metadata": {"recorder": "bir", "tier": "bound", "host": {"app": "claude-code", "version": "2.1.332"},
                "wrappedServers": [], "cwd": "/p", "sessionId": "s-1", "birVersion": "0", "lossy": false}}}),
        json!({"kind": "turn", "data": {"turn": 1, "at": "2026-12-01T20:00:00.500Z", "prompt": "Run echo,\nthen \u{1b}]0;pwn\u{7} help"}}),
        step(
            1,
            "tool_selected",
            "Bash",
            "toolu_1",
            json!({"input": {"command": "echo one"}, "context": "First a shell."}),
        ),
        step(
            2,
            "tool_response",
            "Bash",
            "toolu_1",
            json!({"output": {"stdout": "one", "stderr": ""}}),
        ),
        step(
            3,
            "tool_selected",
            "mcp__everything__echo",
            "toolu_2",
            json!({"input": {"message": "two"}, "context": "Then MCP."}),
        ),
        step(
            5,
            "tool_selected",
            "Agent",
            "toolu_3",
            json!({"input": {"subagent_type": "general-purpose"}, "context": "A helper next."}),
        ),
        step(
            4,
            "tool_response",
            "mcp__everything__echo",
            "toolu_2",
            json!({"output": {"content": [{"type": "text", "text": "Echo: two"}]}}),
        ),
        step(
            6,
            "tool_response",
            "Agent",
            "toolu_3",
            json!({"output": {"status": "async_launched"}}),
        ),
        json!({"kind": "session_event", "data": {"name": "SubagentStart", "at": "2026-12-01T20:00:06.500Z", "agentId": "agent-7", "data": {"agent_type": "general-purpose"}}}),
        step(
            7,
            "tool_selected",
            "mcp__everything__echo",
            "toolu_4",
            sub_sel,
        ),
        step(
            8,
            "tool_response",
            "mcp__everything__echo",
            "toolu_4",
            sub_resp,
        ),
        step(
            9,
            "tool_selected",
            "mcp__everything__fail",
            "toolu_5",
            json!({"input": {}, "context": "This fails."}),
        ),
        step(
            10,
            "tool_response",
            "mcp__everything__fail",
            "toolu_5",
            json!({"isError": true, "error": "MCP error: boom"}),
        ),
        step(
            11,
            "final_answer",
            "",
            "",
            json!({"output": "All done: one, two."}),
        ),
        json!({"kind": "turn", "data": {"turn": 2, "at": "2026-12-01T20:00:12.000Z", "prompt": "<task-notification>", "origin": "task-notification"}}),
        step(
            12,
            "final_answer",
            "",
            "",
            json!({"output": "The helper echoed.", "turn": 2}),
        ),
        json!({"kind": "run_finished", "data": {"finishedAt": "2026-12-01T20:00:13.000Z", "output": "The helper echoed.",
            "metrics": {"toolCalls": 5, "errors": 1, "totalToolMs": 9.0}, "lossy": false, "dropped": 0, "reason": "session_end"}}),
    ]
}

#[test]
fn bound_runs_are_listed_shown_as_turns_and_exported_whole() {
    let dir = TempDir::new("bound-runs");
    write_run(&dir, "run_bound_cli", &bound_session());

    let (code, list, err) = bir_cmd(&dir, &["runs"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        list.lines()
            .next()
            .is_some_and(|h| h.contains("TIER") && h.ends_with("PROMPT")),
        "{list}"
    );
    let row = list.lines().nth(1).expect("a row");
    assert!(row.contains("bound") && row.contains("finished"), "{row}");
    // No proxy bound: the servers come from the MCP steps.
    assert!(row.contains(" everything "), "{row}");
    assert!(
        row.contains("Run echo, ⏎ then \\u{1b}]0;pwn\\u{7} help"),
        "prompt, escaped: {row}"
    );
    assert!(
        !list.contains('\u{1b}') && !list.contains('\u{7}'),
        "{list}"
    );
    let (_, json_list, _) = bir_cmd(&dir, &["runs", "--json"]);
    let line: Value = serde_json::from_str(json_list.trim()).expect("json line");
    assert_eq!(line["tier"], "bound");
    assert_eq!(line["prompt"], "Run echo,\nthen \u{1b}]0;pwn\u{7} help");

    let (code, show, err) = bir_cmd(&dir, &["runs", "show", "latest"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        !show.contains('\u{1b}') && !show.contains('\u{7}'),
        "{show}"
    );
    let pos = |needle: &str| {
        show.find(needle)
            .unwrap_or_else(|| panic!("no {needle:?} in:\n{show}"))
    };
    let order = [
        pos("Turn 1 ·"),
        pos("   1  20:00:01.000  Bash"),
        pos("context  First a shell."),
        pos("result   one"),
        pos("   2  20:00:03.000  everything › echo"),
        pos("result   Echo: two"),
        pos("   3  20:00:05.000  Agent"),
        pos("SubagentStart general-purpose"),
        pos("3.1  20:00:07.000  everything › echo"),
        pos("context  Echoing for the parent."),
        pos("   4  20:00:09.000  everything › fail"),
        pos("error    MCP error: boom"),
        pos("answer  All done: one, two."),
        pos("Turn 2 ·"),
        pos("answer  The helper echoed."),
        pos("5 calls · 1 errors"),
    ];
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{show}");
    assert!(show.contains("subagent (general-purpose)"), "{show}");
    assert!(
        show.contains("tier bound · host claude-code 2.1.332\n"),
        "no MCP protocol line for a bound run: {show}"
    );

    let (code, doc, err) = bir_cmd(&dir, &["runs", "export", "latest"]);
    assert_eq!(code, 0, "{err}");
    let doc: Value = serde_json::from_str(&doc).expect("json");
    assert_eq!(doc["run"]["metadata"]["tier"], "bound");
    assert_eq!(doc["turns"].as_array().map(Vec::len), Some(2));
    assert_eq!(doc["turns"][1]["origin"], "task-notification");
    assert_eq!(doc["events"][0]["name"], "SubagentStart");
    assert_eq!(doc["events"][0]["agentId"], "agent-7");
    assert_eq!(doc["steps"].as_array().map(Vec::len), Some(12));
    assert_eq!(doc["steps"][6]["parentToolUseId"], "toolu_3");
    assert_eq!(
        doc["steps"][1]["context"],
        Value::Null,
        "a response without context stays so"
    );
    assert_eq!(doc["steps"][0]["context"], "First a shell.");
    assert_eq!(doc["finish"]["reason"], "session_end");
    let (_, jsonl, _) = bir_cmd(&dir, &["runs", "export", "latest", "--format", "jsonl"]);
    assert_eq!(jsonl.lines().count(), bound_session().len());
}
