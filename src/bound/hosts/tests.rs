//! Each host's whole session, as its hooks (and transcript) tell it,
//! through the engine: the run it becomes, step by step. The payloads are
//! the fixtures under `tests/fixtures/hosts/<host>/`, shaped as observed
//! (Codex CLI 0.169.0, Gemini CLI 0.61.0, offline) or as documented
//! (Copilot CLI: docs.github.com "Hooks configuration" and the CLI command
//! reference; Cursor: cursor.com/docs/agent/hooks; VS Code:
//! code.visualstudio.com/docs/agents/reference/hooks-reference).

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use super::*;
use crate::bound::{Engine, Input, Output};

const TRANSCRIPT: &str = "/home/u/host/transcript.jsonl";

/// The prompt of the fixture sessions that list the files and echo.
const ECHO_PROMPT: &str = "List the files, then echo hi through the everything server.";

fn at(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_800_000_000 + secs)
}

/// The engine fed a host's fixture session, transcript reads answered from
/// `files` at once; the records it wrote, as JSON.
fn play(host: Host, session: &str, files: &[(&str, &str)]) -> Vec<Value> {
    let files: HashMap<String, Vec<u8>> = files
        .iter()
        .map(|(p, b)| (p.to_string(), b.as_bytes().to_vec()))
        .collect();
    let mut engine = Engine::new(crate::bound::EngineConfig::for_tests());
    let mut records = Vec::new();
    let mut now = 0;
    let mut feed = |engine: &mut Engine, input: Input, now: SystemTime| {
        let mut queue = engine.handle(input, now);
        while !queue.is_empty() {
            let mut next = Vec::new();
            for output in queue {
                match output {
                    Output::Record { record, .. } => {
                        records.push(serde_json::to_value(&*record).expect("record json"))
                    }
                    Output::ReadTranscript {
                        session_id,
                        agent_id,
                        path,
                        offset,
                        ..
                    } => {
                        let bytes = files
                            .get(&path)
                            .map(|b| b.get(offset as usize..).unwrap_or_default().to_vec())
                            .unwrap_or_default();
                        let input = Input::TranscriptRead {
                            session_id,
                            agent_id,
                            offset,
                            bytes,
                        };
                        next.extend(engine.handle(input, now));
                    }
                }
            }
            queue = next;
        }
    };
    for line in session.lines().filter(|l| !l.trim().is_empty()) {
        let line = line.replace("@TRANSCRIPT@", TRANSCRIPT);
        let row: Value = serde_json::from_str(&line).expect("fixture row");
        let input = Input::HostHook {
            host,
            event: row["event"].as_str().expect("event").to_owned(),
            payload: row["payload"].clone(),
            host_process: None,
        };
        now += 1;
        feed(&mut engine, input, at(now));
    }
    // Whatever still waits is released by time (hosts without SessionEnd
    // end idle).
    for output in engine.tick(at(now + 3600)) {
        if let Output::Record { record, .. } = output {
            records.push(serde_json::to_value(&*record).expect("record json"));
        }
    }
    records
}

/// `{"seq", "event": {"kind", "data"}}` as `{kind: data}`.
fn event(record: &Value) -> Value {
    let e = &record["event"];
    json!({ e["kind"].as_str().unwrap_or("?"): e["data"].clone() })
}

/// The run told in order: header, turns, steps in `stepIndex` order, end.
fn story(records: &[Value]) -> Vec<String> {
    let records: Vec<Value> = records.iter().map(event).collect();
    let mut lines = Vec::new();
    let mut steps: Vec<&Value> = Vec::new();
    for r in &records {
        if let Some(h) = r.get("run_started") {
            let m = &h["metadata"];
            lines.push(format!(
                "run {} {} model={} input={}",
                m["host"]["app"].as_str().unwrap_or("?"),
                m["host"]["version"].as_str().unwrap_or(""),
                m["model"].as_str().unwrap_or("-"),
                h["input"].as_str().unwrap_or("-"),
            ));
        } else if let Some(t) = r.get("turn") {
            lines.push(format!(
                "turn {}: {}",
                t["turn"],
                t["prompt"].as_str().unwrap_or("")
            ));
        } else if let Some(s) = r.get("step") {
            steps.push(s);
        }
    }
    steps.sort_by_key(|s| s["stepIndex"].as_u64());
    for s in steps {
        let line = match s["type"].as_str() {
            Some("tool_selected") => format!(
                "selected {} [{}] ctx={}",
                s["qualifiedName"].as_str().unwrap_or(""),
                s["kind"].as_str().unwrap_or(""),
                s["context"].as_str().unwrap_or("-"),
            ),
            Some("tool_response") => format!(
                "response {} error={} out={} err={}",
                s["qualifiedName"].as_str().unwrap_or(""),
                s["isError"].as_bool().unwrap_or(false),
                s["output"],
                s["error"],
            ),
            Some("final_answer") => format!("answer {}", s["output"].as_str().unwrap_or("")),
            other => format!("{other:?}"),
        };
        lines.push(line);
    }
    for r in &records {
        if let Some(f) = r.get("run_finished") {
            lines.push(format!("finished {}", f["reason"].as_str().unwrap_or("")));
        }
    }
    lines
}

/// [`play`], which must make exactly one run: its records and its story.
fn one_run(host: Host, session: &str, files: &[(&str, &str)]) -> (Vec<Value>, Vec<String>) {
    let records = play(host, session, files);
    assert_eq!(runs(&records), 1);
    let story = story(&records);
    (records, story)
}

fn runs(records: &[Value]) -> usize {
    records
        .iter()
        .filter(|r| r["event"]["kind"] == "run_started")
        .count()
}

/// The data of every record of `kind`.
fn of_kind<'a>(records: &'a [Value], kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    records
        .iter()
        .filter(move |r| r["event"]["kind"] == kind)
        .map(|r| &r["event"]["data"])
}

#[test]
fn a_codex_session_is_one_run_in_order_with_its_words_and_answer() {
    let (records, story) = one_run(
        Host::Codex,
        include_str!("../../../tests/fixtures/hosts/codex/session.jsonl"),
        &[(
            TRANSCRIPT,
            include_str!("../../../tests/fixtures/hosts/codex/rollout.jsonl"),
        )],
    );
    let prompt = ECHO_PROMPT;
    assert_eq!(
        story,
        [
            format!("run codex 0.169.0 model=gpt-5.5-codex input={prompt}"),
            format!("turn 1: {prompt}"),
            "selected Bash [builtin] ctx=[thinking] Start with ls.\n\nI'll list the files first.".into(),
            r#"response Bash error=false out="notes.txt\n" err=null"#.into(),
            "selected mcp__everything__echo [mcp] ctx=Now the echo tool.".into(),
            r#"response mcp__everything__echo error=false out={"content":[{"text":"Echo: hi","type":"text"}]} err=null"#.into(),
            "answer The folder holds notes.txt, and the echo tool said: Echo: hi".into(),
            "finished session_end".into(),
        ],
        "{story:#?}"
    );
    // The run's tokens: the rollout's last `total_token_usage`.
    let finish = of_kind(&records, "run_finished").next().expect("finish");
    assert_eq!(
        finish["metrics"]["usage"],
        json!({"input": 2600, "output": 95, "cacheRead": 1200, "cacheWrite": 0})
    );
    // All of it in the one turn, under the turn's model.
    assert_eq!(
        finish["metrics"]["turnUsage"],
        json!([{"turn": 1, "model": "gpt-5.5-codex",
                "usage": {"input": 2600, "output": 95, "cacheRead": 1200, "cacheWrite": 0}}])
    );
    // The MCP step keeps Codex's call id: the proxy's `_meta.callId`
    // joins on it.
    let echo = of_kind(&records, "step")
        .find(|s| s["toolName"] == "echo")
        .expect("echo step");
    assert_eq!(echo["toolUseId"], "call_echo_2");
    assert_eq!(echo["serverName"], "everything");
}

#[test]
fn a_gemini_session_pairs_calls_without_ids_and_prefers_the_transcripts_answer() {
    let (records, story) = one_run(
        Host::Gemini,
        include_str!("../../../tests/fixtures/hosts/gemini/session.jsonl"),
        &[(
            TRANSCRIPT,
            include_str!("../../../tests/fixtures/hosts/gemini/chat.jsonl"),
        )],
    );
    let prompt = ECHO_PROMPT;
    assert_eq!(
        story,
        [
            format!("run gemini-cli  model=gemini-2.5-pro input={prompt}"),
            format!("turn 1: {prompt}"),
            "selected run_shell_command [builtin] ctx=[thinking] Plan: Start with ls.\n\nI'll list the files first.".into(),
            r#"response run_shell_command error=false out={"llmContent":"Command: ls\nOutput: notes.txt","returnDisplay":"notes.txt"} err=null"#.into(),
            "selected mcp__everything__echo [mcp] ctx=Now the echo tool.".into(),
            r#"response mcp__everything__echo error=false out={"llmContent":[{"text":"Echo: hi"}],"returnDisplay":"Echo: hi"} err=null"#.into(),
            // Not AfterAgent's repeated text: the transcript's.
            "answer The folder holds notes.txt, and the echo tool said: Echo: hi".into(),
            "finished session_end".into(),
        ],
        "{story:#?}"
    );
    // The run's tokens: every model message's `tokens`, the last record
    // of a message counted once (thoughts count as output).
    let finish = of_kind(&records, "run_finished").next().expect("finish");
    assert_eq!(
        finish["metrics"]["usage"],
        json!({"input": 3000, "output": 80, "cacheRead": 800, "cacheWrite": 0})
    );
    assert_eq!(
        finish["metrics"]["turnUsage"],
        json!([{"turn": 1, "model": "gemini-2.5-pro",
                "usage": {"input": 3000, "output": 80, "cacheRead": 800, "cacheWrite": 0}}])
    );
    // Per-chunk model events and automatic compaction checks are not
    // session events.
    let noise = of_kind(&records, "session_event")
        .filter(|e| {
            [
                "AfterModel",
                "BeforeModel",
                "PreCompress",
                "BeforeToolSelection",
            ]
            .contains(&e["name"].as_str().unwrap_or(""))
        })
        .count();
    assert_eq!(noise, 0);
}

#[test]
fn without_its_transcript_a_gemini_answer_comes_from_after_agent() {
    let records = play(
        Host::Gemini,
        include_str!("../../../tests/fixtures/hosts/gemini/session.jsonl"),
        &[],
    );
    let story = story(&records);
    assert!(
        story
            .iter()
            .any(|l| l.starts_with("answer The folder holds")),
        "{story:#?}"
    );
}

#[test]
fn a_copilot_session_tells_denials_and_failures() {
    let (records, story) = one_run(
        Host::Copilot,
        include_str!("../../../tests/fixtures/hosts/copilot/session.jsonl"),
        &[],
    );
    assert_eq!(
        story,
        [
            "run copilot-cli  model=- input=List the files, then read notes.txt.".to_owned(),
            "turn 1: List the files, then read notes.txt.".into(),
            "selected bash [builtin] ctx=-".into(),
            r#"response bash error=false out={"resultType":"success","textResultForLlm":"notes.txt"} err=null"#.into(),
            "selected bash [builtin] ctx=-".into(),
            r#"response bash error=true out=null err="The user denied this tool call.""#.into(),
            "selected view [builtin] ctx=-".into(),
            r#"response view error=true out=null err="File not found: /work/p/notes.txt""#.into(),
            "finished session_end".into(),
        ],
        "{story:#?}"
    );
    let denied = of_kind(&records, "step")
        .find(|s| s["type"] == "tool_response" && s["permission"].is_object())
        .expect("a step with its permission");
    assert_eq!(denied["permission"]["event"], "PermissionDenied");
    assert!(of_kind(&records, "session_event").any(|e| e["name"] == "errorOccurred"));
}

#[test]
fn a_cursor_session_takes_words_and_answer_from_its_response_hooks() {
    let (records, story) = one_run(
        Host::Cursor,
        include_str!("../../../tests/fixtures/hosts/cursor/session.jsonl"),
        &[],
    );
    let prompt = ECHO_PROMPT;
    assert_eq!(
        story,
        [
            format!("run cursor 2.3.1 model=claude-4.5-sonnet input={prompt}"),
            format!("turn 1: {prompt}"),
            "selected Shell [builtin] ctx=[thinking] Start with ls.\n\nI'll list the files first.".into(),
            r#"response Shell error=false out="notes.txt" err=null"#.into(),
            "selected mcp__everything__echo [mcp] ctx=Now the echo tool.".into(),
            r#"response mcp__everything__echo error=true out=null err="MCP server everything is not available""#.into(),
            "answer The folder holds notes.txt; the echo server was not available.".into(),
            "finished session_end".into(),
        ],
        "{story:#?}"
    );
    let header = of_kind(&records, "run_started").next().expect("header");
    assert_eq!(header["metadata"]["cwd"], "/work/p");
    assert_eq!(header["metadata"]["sessionId"], "conv-7d1e-cursor-0001");
}

#[test]
fn a_vscode_session_without_session_end_ends_idle() {
    let (_, story) = one_run(
        Host::VsCode,
        include_str!("../../../tests/fixtures/hosts/vscode/session.jsonl"),
        &[],
    );
    assert_eq!(
        story,
        [
            "run vscode  model=- input=List the files and fix main.ts.".to_owned(),
            "turn 1: List the files and fix main.ts.".into(),
            "selected runInTerminal [builtin] ctx=-".into(),
            r#"response runInTerminal error=false out="main.ts" err=null"#.into(),
            "selected editFiles [builtin] ctx=-".into(),
            r#"response editFiles error=false out="edited" err=null"#.into(),
            "finished idle_timeout".into(),
        ],
        "{story:#?}"
    );
}

#[test]
fn calls_without_ids_pair_by_name_and_arguments_in_order() {
    let mut a = Adapter {
        host: Host::Gemini,
        ..Adapter::default()
    };
    let ls = json!({"command": "ls"});
    let pwd = json!({"command": "pwd"});
    let first = a.start_call("run_shell_command", &ls);
    let second = a.start_call("run_shell_command", &ls);
    let other = a.start_call("run_shell_command", &pwd);
    assert_ne!(first, second);
    assert_eq!(a.end_call("run_shell_command", &pwd), other);
    assert_eq!(a.end_call("run_shell_command", &ls), first);
    assert_eq!(a.end_call("run_shell_command", &ls), second);
    // An answer whose start was missed gets an id of its own.
    let lone = a.end_call("read_file", &json!({"path": "a"}));
    assert!(![first, second, other].contains(&lone));
}

#[test]
fn cursor_shell_and_mcp_execution_hooks_pair_and_name_the_server() {
    let mut a = Adapter {
        host: Host::Cursor,
        ..Adapter::default()
    };
    let common = json!({"conversation_id": "c1", "generation_id": "g1",
        "workspace_roots": ["/w"], "hook_event_name": "beforeMCPExecution"});
    let mut before = common.clone();
    before["tool_name"] = json!("echo");
    before["tool_input"] = json!("{\"message\":\"hi\"}");
    before["server"] = json!("everything");
    let mut after = before.clone();
    after["hook_event_name"] = json!("afterMCPExecution");
    after["result_json"] = json!("{\"content\":[{\"type\":\"text\",\"text\":\"Echo: hi\"}]}");
    after["duration"] = json!(250);
    let pre = a.normalize("beforeMCPExecution", before);
    let post = a.normalize("afterMCPExecution", after);
    assert_eq!(pre[0].name, "PreToolUse");
    assert_eq!(post[0].name, "PostToolUse");
    assert_eq!(pre[0].payload["tool_name"], "mcp__everything__echo");
    assert_eq!(pre[0].payload["tool_input"], json!({"message": "hi"}));
    assert_eq!(
        pre[0].payload["tool_use_id"],
        post[0].payload["tool_use_id"]
    );
    assert_eq!(
        post[0].payload["tool_response"]["content"][0]["text"],
        "Echo: hi"
    );
    assert_eq!(post[0].payload["duration_ms"], 250);
    assert_eq!(post[0].payload["session_id"], "c1");
    assert_eq!(post[0].payload["cwd"], "/w");
}

#[test]
fn hosts_without_a_readable_transcript_leave_its_path_out() {
    for host in [Host::Cursor, Host::VsCode, Host::Copilot] {
        let mut a = Adapter {
            host,
            ..Adapter::default()
        };
        let hooks = a.normalize(
            "SessionStart",
            json!({"session_id": "s", "sessionId": "s", "conversation_id": "s",
                   "transcript_path": "/t.json", "cwd": "/w"}),
        );
        assert!(
            hooks
                .iter()
                .all(|h| h.payload.get("transcript_path").is_none()),
            "{host:?}"
        );
    }
    let mut codex = Adapter {
        host: Host::Codex,
        ..Adapter::default()
    };
    let hooks = codex.normalize(
        "SessionStart",
        json!({"session_id": "s", "transcript_path": "/t.jsonl"}),
    );
    assert_eq!(hooks[0].payload["transcript_path"], "/t.jsonl");
}

#[test]
fn host_names_round_trip() {
    for host in Host::ALL {
        assert_eq!(Host::parse(host.flag()), Some(host));
        assert_eq!(Host::parse(host.app()), Some(host));
    }
    assert_eq!(Host::parse("emacs"), None);
}

/// A captured hooks log of the real CLI (`{registered_event, payload}` per
/// line, as `tests/e2e/hosts/log_hook.py` writes it) as a fixture session.
fn captured(hooks: &str) -> String {
    hooks
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|r| json!({"event": r["registered_event"], "payload": r["payload"]}).to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn a_codex_subagents_steps_are_nested_under_the_spawn_agent_call() {
    // Codex answers `spawn_agent` (with the new agent's id in a JSON
    // string) before the subagent's SubagentStart.
    let session = captured(include_str!(
        "../../../tests/fixtures/hosts/codex/hooks.jsonl"
    ));
    let records = play(Host::Codex, &session, &[]);
    assert_eq!(runs(&records), 1);
    let sub: Vec<&Value> = of_kind(&records, "step")
        .filter(|s| s["toolName"] == "get_sum" || s["toolName"] == "get-sum")
        .collect();
    assert_eq!(sub.len(), 2, "{records:#?}");
    for s in sub {
        assert_eq!(s["agentId"], "01a23c9b-9556-76a1-b18a-de93759f05c9");
        assert_eq!(s["parentToolUseId"], "call_fake_4", "{s:#}");
    }
}

#[test]
fn a_gemini_subagents_steps_are_nested_under_the_invoke_agent_call() {
    // Gemini's subagent hooks name no agent: the calls made while
    // `invoke_agent` runs are its subagent's.
    let session = captured(include_str!(
        "../../../tests/fixtures/hosts/gemini/hooks.jsonl"
    ));
    let records = play(Host::Gemini, &session, &[]);
    assert_eq!(runs(&records), 1);
    let steps: Vec<&Value> = of_kind(&records, "step").collect();
    let parent = steps
        .iter()
        .find(|s| s["toolName"] == "invoke_agent")
        .expect("invoke_agent step");
    assert_eq!(parent["kind"], "agent");
    assert!(parent["parentToolUseId"].is_null());
    let sub: Vec<&&Value> = steps
        .iter()
        .filter(|s| s["toolName"] == "get-sum" || s["toolName"] == "complete_task")
        .collect();
    assert_eq!(sub.len(), 4, "{steps:#?}");
    for s in sub {
        assert!(
            s["agentId"].as_str().is_some_and(|a| !a.is_empty()),
            "{s:#}"
        );
        assert_eq!(s["agentType"], "generalist");
        assert_eq!(s["parentToolUseId"], parent["toolUseId"], "{s:#}");
    }
    for s in steps.iter().filter(|s| s["toolName"] == "echo") {
        assert!(s["agentId"].is_null() && s["parentToolUseId"].is_null());
    }
}

#[test]
fn a_gemini_runs_version_is_the_one_bir_hooks_read_from_its_process() {
    // No Gemini payload names its version: `bir-hooks` adds the one it
    // read from the CLI's package.json to SessionStart.
    let session = captured(include_str!(
        "../../../tests/fixtures/hosts/gemini/hooks.jsonl"
    ));
    let without = play(Host::Gemini, &session, &[]);
    let header = |records: &[Value]| {
        of_kind(records, "run_started").next().expect("header")["metadata"]["host"].clone()
    };
    assert_eq!(header(&without)["version"], "");
    let session = session.replacen(
        r#""source":"startup""#,
        r#""source":"startup","bir_host_version":"0.61.0""#,
        1,
    );
    assert!(session.contains("bir_host_version"));
    let with = play(Host::Gemini, &session, &[]);
    assert_eq!(
        header(&with),
        json!({"app": "gemini-cli", "version": "0.61.0"})
    );
    // The field is bir's, not the host's: no session event keeps it.
    assert!(
        !serde_json::to_string(&with)
            .expect("json")
            .contains("bir_host_version")
    );
}

/// The transcript path a captured hooks log names for its main agent (its
/// `SessionStart`'s).
fn session_transcript(hooks: &str) -> String {
    hooks
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|r| r["registered_event"] == "SessionStart")
        .and_then(|r| r["payload"]["transcript_path"].as_str().map(str::to_owned))
        .expect("a SessionStart with its transcript path")
}

/// Codex 0.169.0's captured session played whole: its hooks, its main
/// rollout and the subagent's rollout (named by SubagentStop's
/// `agent_transcript_path`).
fn play_real_codex_session() -> Vec<Value> {
    let hooks = include_str!("../../../tests/fixtures/hosts/codex/hooks.jsonl");
    let main = session_transcript(hooks);
    let child = hooks
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find_map(|r| {
            r["payload"]["agent_transcript_path"]
                .as_str()
                .map(str::to_owned)
        })
        .expect("SubagentStop names the child's rollout");
    play(
        Host::Codex,
        &captured(hooks),
        &[
            (
                &main,
                include_str!("../../../tests/fixtures/hosts/codex/transcript.jsonl"),
            ),
            (
                &child,
                include_str!("../../../tests/fixtures/hosts/codex/subagent-transcript-1.jsonl"),
            ),
        ],
    )
}

#[test]
fn a_real_codex_sessions_tokens_are_per_turn_with_its_subagents() {
    // Codex 0.169.0's own rollouts: the main agent's running total (its
    // last `total_token_usage`), and the subagent's rollout (named by
    // SubagentStop's `agent_transcript_path`), whose tokens count in the
    // turn that started it.
    let records = play_real_codex_session();
    let finish = of_kind(&records, "run_finished").next().expect("finish");
    let rows = finish["metrics"]["turnUsage"].as_array().expect("rows");
    assert!(!rows.is_empty(), "{finish:#}");
    assert!(rows.iter().all(|r| r["turn"] == 1), "{rows:#?}");
    assert_eq!(rows[0]["model"], "gpt-5-codex");
    // The main rollout's last total, plus the child's.
    let child_total =
        include_str!("../../../tests/fixtures/hosts/codex/subagent-transcript-1.jsonl")
            .lines()
            .rev()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find_map(|r| r["payload"]["info"]["total_token_usage"]["input_tokens"].as_u64())
            .expect("the child reports tokens");
    assert_eq!(finish["metrics"]["usage"]["input"], 32100 + child_total);
    assert_eq!(
        rows.iter()
            .map(|r| r["usage"]["input"].as_u64().unwrap_or(0))
            .sum::<u64>(),
        32100 + child_total
    );
}

#[test]
fn a_real_gemini_sessions_tokens_count_each_message_once() {
    // Gemini CLI 0.61.0 writes a message again when its calls are added:
    // each counted once (the five model messages of the session).
    let hooks = include_str!("../../../tests/fixtures/hosts/gemini/hooks.jsonl");
    let main = session_transcript(hooks);
    let records = play(
        Host::Gemini,
        &captured(hooks),
        &[(
            &main,
            include_str!("../../../tests/fixtures/hosts/gemini/transcript.jsonl"),
        )],
    );
    let finish = of_kind(&records, "run_finished").next().expect("finish");
    assert_eq!(
        finish["metrics"]["turnUsage"],
        json!([{"turn": 1, "model": "gemini-2.5-flash", "usage": {
            "input": 5100 + 5200 + 5300 + 5400 + 5600,
            "output": 31 + 27 + 33 + 41 + 25,
            "cacheRead": 5000 + 5100 + 5200 + 5400,
            "cacheWrite": 0}}])
    );
}

#[test]
fn a_codex_subagents_own_prompt_is_its_start_not_a_turn() {
    // Codex 0.169.0 fires UserPromptSubmit (with the subagent's
    // `agent_id`, and its own rollout as `transcript_path`) for the
    // prompt `spawn_agent` gave the subagent: that is the subagent's
    // start, under the `spawn_agent` step, not the user's next turn.
    let records = play_real_codex_session();
    assert_eq!(runs(&records), 1);
    let turns: Vec<&Value> = of_kind(&records, "turn").collect();
    assert_eq!(turns.len(), 1, "{turns:#?}");
    assert!(
        turns[0]["prompt"]
            .as_str()
            .is_some_and(|p| p.starts_with("HOSTS-E2E:")),
        "{turns:#?}"
    );
    let finish = of_kind(&records, "run_finished").next().expect("finish");
    let rows = finish["metrics"]["turnUsage"].as_array().expect("rows");
    assert!(rows.iter().all(|r| r["turn"] == 1), "{rows:#?}");
    // Every step is the first turn's; the subagent's are under its spawn.
    for s in of_kind(&records, "step") {
        assert_eq!(s["turn"], 1, "{s:#}");
    }
    // The subagent's prompt is kept as its start, with its agent.
    let start = of_kind(&records, "session_event")
        .find(|e| e["name"] == "UserPromptSubmit")
        .expect("the subagent's prompt as a session event");
    assert_eq!(start["agentId"], "01a23c9b-9556-76a1-b18a-de93759f05c9");
    // The main rollout stays the run's transcript: its answer is told.
    let story = story(&records);
    assert!(story.iter().any(|l| l.starts_with("answer ")), "{story:#?}");
}

/// A captured hooks log as the host would have sent it with bir's
/// before-tool hook registered only for the tools
/// [`Host::before_tool_matcher`] names (MCP tools
/// and the tools that run a subagent): the other tools' before-hooks
/// dropped.
fn with_fewer_before_hooks(host: Host, hooks: &str) -> String {
    let before = match host {
        Host::Codex => "PreToolUse",
        _ => "BeforeTool",
    };
    let matcher = host.before_tool_matcher().expect("a matcher for this host");
    let re = regex::Regex::new(matcher).expect("the matcher is a regex");
    let kept: Vec<&str> = hooks
        .lines()
        .filter(|l| {
            let Ok(r) = serde_json::from_str::<Value>(l) else {
                return false;
            };
            r["registered_event"] != before
                || re.is_match(r["payload"]["tool_name"].as_str().unwrap_or(""))
        })
        .collect();
    assert!(
        kept.len() < hooks.lines().count(),
        "some before-hook dropped"
    );
    captured(&kept.join("\n"))
}

/// The run of a real captured session (its transcripts answered), told
/// as steps: `(type, qualified name, agent, parent, turn)` in step order,
/// plus the answer.
fn real_story(host: Host, session: &str, hooks: &str, files: &[(&str, &str)]) -> Vec<String> {
    let _ = hooks;
    let records = play(host, session, files);
    assert_eq!(runs(&records), 1);
    let mut steps: Vec<&Value> = of_kind(&records, "step").collect();
    steps.sort_by_key(|s| s["stepIndex"].as_u64());
    steps
        .iter()
        .map(|s| {
            format!(
                "{} {} agent={} parent={} turn={} ctx={} out={}",
                s["type"].as_str().unwrap_or(""),
                s["qualifiedName"].as_str().unwrap_or(""),
                !s["agentId"].is_null(),
                s["parentToolUseId"].as_str().unwrap_or("-"),
                s["turn"],
                s["context"].as_str().unwrap_or("-"),
                s["output"],
            )
        })
        .collect()
}

#[test]
fn a_real_codex_session_is_as_whole_with_before_hooks_only_for_mcp_and_agent_tools() {
    let hooks = include_str!("../../../tests/fixtures/hosts/codex/hooks.jsonl");
    let main = session_transcript(hooks);
    let files = [(
        main.as_str(),
        include_str!("../../../tests/fixtures/hosts/codex/transcript.jsonl"),
    )];
    let all = real_story(Host::Codex, &captured(hooks), hooks, &files);
    let fewer = real_story(
        Host::Codex,
        &with_fewer_before_hooks(Host::Codex, hooks),
        hooks,
        &files,
    );
    assert!(all.len() >= 12, "{all:#?}");
    assert_eq!(fewer, all);
}

#[test]
fn a_real_gemini_session_is_as_whole_with_before_hooks_only_for_mcp_and_agent_tools() {
    let hooks = include_str!("../../../tests/fixtures/hosts/gemini/hooks.jsonl");
    let main = session_transcript(hooks);
    let files = [(
        main.as_str(),
        include_str!("../../../tests/fixtures/hosts/gemini/transcript.jsonl"),
    )];
    let all = real_story(Host::Gemini, &captured(hooks), hooks, &files);
    let fewer = real_story(
        Host::Gemini,
        &with_fewer_before_hooks(Host::Gemini, hooks),
        hooks,
        &files,
    );
    assert!(all.len() >= 12, "{all:#?}");
    assert_eq!(fewer, all);
}

#[test]
fn a_codex_call_no_hook_told_is_recovered_from_the_rollout() {
    // A built-in call has no PreToolUse of bir's any more, and one the
    // user interrupts has no PostToolUse: the rollout still shows it.
    let hooks = include_str!("../../../tests/fixtures/hosts/codex/hooks.jsonl");
    let main = session_transcript(hooks);
    let session = with_fewer_before_hooks(Host::Codex, hooks);
    let untold: String = session
        .lines()
        .filter(|l| !(l.contains("\"PostToolUse\"") && l.contains("call_fake_2")))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(!untold.contains("call_fake_2"));
    let records = play(
        Host::Codex,
        &untold,
        &[(
            &main,
            include_str!("../../../tests/fixtures/hosts/codex/transcript.jsonl"),
        )],
    );
    assert_eq!(runs(&records), 1);
    let steps: Vec<&Value> = of_kind(&records, "step")
        .filter(|s| s["toolUseId"] == "call_fake_2")
        .collect();
    assert_eq!(steps.len(), 2, "{steps:#?}");
    for s in &steps {
        assert_eq!(s["recovered"], true, "{s:#}");
        assert_eq!(s["turn"], 1);
    }
    let selected = steps
        .iter()
        .find(|s| s["type"] == "tool_selected")
        .expect("selected");
    assert_eq!(selected["input"]["cmd"], "cat notes.txt", "{selected:#}");
    let response = steps
        .iter()
        .find(|s| s["type"] == "tool_response")
        .expect("response");
    assert!(
        response["output"]
            .to_string()
            .contains("the notes say: hosts-e2e-notes"),
        "{response:#}"
    );
    // Every other call is told once.
    let mut ids: Vec<&str> = of_kind(&records, "step")
        .filter(|s| s["type"] == "tool_selected")
        .filter_map(|s| s["toolUseId"].as_str())
        .collect();
    let n = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), n);
    assert_eq!(n, 6);
}

#[test]
fn a_gemini_call_no_hook_told_is_recovered_from_its_chat() {
    // A built-in call has no BeforeTool of bir's any more; one whose
    // AfterTool never came is still in the chat, with its result.
    let hooks = include_str!("../../../tests/fixtures/hosts/gemini/hooks.jsonl");
    let main = session_transcript(hooks);
    let session = with_fewer_before_hooks(Host::Gemini, hooks);
    let untold: String = session
        .lines()
        .filter(|l| !(l.contains("\"AfterTool\"") && l.contains("\"read_file\"")))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(!untold.contains("\"read_file\""));
    let records = play(
        Host::Gemini,
        &untold,
        &[(
            &main,
            include_str!("../../../tests/fixtures/hosts/gemini/transcript.jsonl"),
        )],
    );
    assert_eq!(runs(&records), 1);
    let steps: Vec<&Value> = of_kind(&records, "step")
        .filter(|s| s["qualifiedName"] == "read_file")
        .collect();
    assert_eq!(steps.len(), 2, "{steps:#?}");
    assert!(steps.iter().all(|s| s["recovered"] == true), "{steps:#?}");
    let response = steps
        .iter()
        .find(|s| s["type"] == "tool_response")
        .expect("response");
    assert!(
        response["output"].to_string().contains("hosts-e2e-notes"),
        "{response:#}"
    );
    // Nothing else is told twice.
    let selected = of_kind(&records, "step")
        .filter(|s| s["type"] == "tool_selected")
        .count();
    let all = play(
        Host::Gemini,
        &captured(hooks),
        &[(
            &main,
            include_str!("../../../tests/fixtures/hosts/gemini/transcript.jsonl"),
        )],
    );
    assert_eq!(
        selected,
        of_kind(&all, "step")
            .filter(|s| s["type"] == "tool_selected")
            .count()
    );
}

#[test]
fn a_codex_session_first_heard_at_a_subagents_prompt_is_joined_under_way() {
    // The recorder came up while a subagent started: that prompt is not
    // the session's start, and what came before is read from the rollout.
    let hooks = include_str!("../../../tests/fixtures/hosts/codex/hooks.jsonl");
    let main = session_transcript(hooks);
    let late: Vec<&str> = hooks
        .lines()
        .skip_while(|l| !(l.contains("\"UserPromptSubmit\"") && l.contains("\"agent_id\"")))
        .collect();
    assert!(late.len() > 3 && late.len() < hooks.lines().count());
    let records = play(
        Host::Codex,
        &captured(&late.join("\n")),
        &[(
            &main,
            include_str!("../../../tests/fixtures/hosts/codex/transcript.jsonl"),
        )],
    );
    assert_eq!(runs(&records), 1);
    let turns: Vec<&Value> = of_kind(&records, "turn").collect();
    assert!(
        turns.iter().all(|t| !t["prompt"]
            .as_str()
            .unwrap_or("")
            .starts_with("SUBTASK-HOSTS")),
        "{turns:#?}"
    );
    let header = of_kind(&records, "run_started").next().expect("header");
    assert!(
        header["metadata"]["note"]
            .as_str()
            .is_some_and(|n| n.contains("under way")),
        "{header:#}"
    );
}

#[test]
fn a_codex_built_in_call_told_by_its_after_hook_starts_when_the_rollout_says() {
    // Its PreToolUse is not registered: the step's start is the rollout's
    // `function_call` line, not the time of its PostToolUse.
    let hooks = include_str!("../../../tests/fixtures/hosts/codex/hooks.jsonl");
    let rollout = include_str!("../../../tests/fixtures/hosts/codex/transcript.jsonl");
    let main = session_transcript(hooks);
    let made_at = |call: &str| {
        rollout
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|r| r["payload"]["type"] == "function_call" && r["payload"]["call_id"] == call)
            .and_then(|r| r["timestamp"].as_str().map(str::to_owned))
            .expect("the rollout shows the call")
    };
    let records = play(
        Host::Codex,
        &with_fewer_before_hooks(Host::Codex, hooks),
        &[(&main, rollout)],
    );
    for call in ["call_fake_1", "call_fake_2"] {
        let steps: Vec<&Value> = of_kind(&records, "step")
            .filter(|s| s["toolUseId"] == call)
            .collect();
        assert_eq!(steps.len(), 2, "{call}");
        for s in steps {
            assert_eq!(s["startedAt"], made_at(call), "{s:#}");
        }
    }
}
