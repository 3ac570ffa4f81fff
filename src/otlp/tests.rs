//! Golden exports of recorded runs (`tests/fixtures/otlp/`): a standalone
//! run recorded by `bir-proxy` over `bir testpeer` (a call, an `isError`
//! result, a JSON-RPC error), and a bound run with a built-in tool, an MCP
//! call that failed, a subagent and two turns. The JSON form is compared
//! byte for byte (bir's version is masked); `BIR_UPDATE_GOLDEN=1`
//! rewrites the files, for review with `git diff`.

use super::config::resource_attributes;
use super::mapping::{MapOptions, spans_of, trace_id};
use super::span::{Batch, KeyValue, Span, SpanKind, StatusCode, Value};
use crate::record::model::Record;
use crate::record::store::LoadedRun;

fn records(jsonl: &str) -> LoadedRun {
    LoadedRun {
        records: jsonl
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str::<Record>(l).expect("a record"))
            .collect(),
        ..LoadedRun::default()
    }
}

fn resource() -> Vec<KeyValue> {
    resource_attributes(
        "bir",
        Some("golden-host".into()),
        &[("deployment.environment".into(), "test".into())],
    )
}

fn json_of(spans: &[Span]) -> String {
    let resource = resource();
    let bytes = super::json::encode(Batch {
        resource: &resource,
        spans,
    });
    String::from_utf8(bytes)
        .expect("utf8")
        .replace(
            &format!("\"{}\"", env!("CARGO_PKG_VERSION")),
            "\"<version>\"",
        )
        .replace(&format!("\"{}\"", std::env::consts::ARCH), "\"<arch>\"")
        .replace(&format!("\"{}\"", std::env::consts::OS), "\"<os>\"")
}

fn check_golden(name: &str, got: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/otlp")
        .join(name);
    if std::env::var("BIR_UPDATE_GOLDEN").is_ok_and(|v| v == "1") {
        std::fs::write(&path, got).expect("write golden");
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (BIR_UPDATE_GOLDEN=1 writes it)", path.display()));
    assert!(
        want == got,
        "{} differs from the export:\n{got}",
        path.display()
    );
}

fn attr<'a>(span: &'a Span, key: &str) -> Option<&'a Value> {
    span.attributes
        .iter()
        .find(|a| a.key == key)
        .map(|a| &a.value)
}

fn named<'a>(spans: &'a [Span], name: &str) -> &'a Span {
    spans
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no span {name}"))
}

const STANDALONE: &str = include_str!("../../tests/fixtures/otlp/standalone.records.jsonl");
const BOUND: &str = include_str!("../../tests/fixtures/otlp/bound.records.jsonl");

#[test]
fn standalone_run_golden() {
    let spans = spans_of(&records(STANDALONE), &MapOptions::default());
    check_golden("standalone.otlp.json", &json_of(&spans));
    // What the golden shows, said plainly.
    assert_eq!(spans.len(), 4, "root + three calls");
    let root = &spans[0];
    assert!(root.parent_span_id.is_none());
    assert_eq!(root.name, "invoke_agent claude-code");
    let echo = named(&spans, "tools/call echo");
    assert_eq!(echo.kind, SpanKind::Client);
    assert_eq!(echo.parent_span_id, Some(root.span_id));
    assert_eq!(echo.status, StatusCode::Unset);
    assert_eq!(attr(echo, "jsonrpc.request.id"), Some(&"2".into()));
    assert_eq!(attr(echo, "mcp.method.name"), Some(&"tools/call".into()));
    assert_eq!(
        attr(echo, "gen_ai.operation.name"),
        Some(&"execute_tool".into())
    );
    assert_eq!(
        attr(echo, "mcp.protocol.version"),
        Some(&"2025-06-18".into())
    );
    assert_eq!(
        attr(echo, "gen_ai.conversation.id"),
        Some(&"sess-fixture-1".into())
    );
    assert!(
        attr(echo, "gen_ai.tool.call.arguments").is_none(),
        "content off"
    );
    // A stdio server: `pipe`, and no protocol session to name.
    assert_eq!(attr(echo, "network.transport"), Some(&"pipe".into()));
    assert!(attr(echo, "mcp.session.id").is_none());
    let fail = named(&spans, "tools/call fail");
    assert_eq!(fail.status, StatusCode::Error);
    assert_eq!(attr(fail, "error.type"), Some(&"tool_error".into()));
    assert_eq!(attr(fail, "jsonrpc.request.id"), Some(&"s-3".into()));
    let bad = named(&spans, "tools/call bad");
    assert_eq!(attr(bad, "error.type"), Some(&"-32602".into()));
    assert_eq!(bad.status, StatusCode::Error);
    assert_eq!(bad.status_message, "", "content off: status code only");
    assert!(spans.iter().all(|s| s.trace_id == root.trace_id));
}

/// A JSON-RPC error's message is the server's words: with content off the
/// span says only that the call failed (code and error type); with content
/// on the message is the status description, as the journal holds it.
#[test]
fn error_message_is_content() {
    let run = records(STANDALONE);
    let off = spans_of(&run, &MapOptions::default());
    let bad = named(&off, "tools/call bad");
    assert_eq!(bad.status, StatusCode::Error);
    assert_eq!(attr(bad, "error.type"), Some(&"-32602".into()));
    assert!(bad.status_message.is_empty());
    assert!(off.iter().all(|s| s.status_message.is_empty()));
    let json = json_of(&off);
    assert!(!json.contains("unknown argument"), "{json}");
    let proto = super::proto::encode(Batch {
        resource: &resource(),
        spans: &off,
    });
    assert!(
        !proto.windows(16).any(|w| w == b"unknown argument"),
        "the protobuf export holds no message either"
    );

    let on = spans_of(
        &run,
        &MapOptions {
            content: true,
            ..MapOptions::default()
        },
    );
    let bad = named(&on, "tools/call bad");
    assert_eq!(bad.status, StatusCode::Error);
    assert_eq!(bad.status_message, "unknown argument: x");
}

#[test]
fn bound_run_golden_with_subagent_and_turns() {
    let spans = spans_of(&records(BOUND), &MapOptions::default());
    check_golden("bound.otlp.json", &json_of(&spans));
    let root = &spans[0];
    assert_eq!(root.name, "invoke_agent claude-code");
    assert_eq!(
        attr(root, "gen_ai.provider.name"),
        Some(&"anthropic".into())
    );
    assert_eq!(
        attr(root, "gen_ai.request.model"),
        Some(&"claude-sonnet-4-5".into())
    );
    assert_eq!(attr(root, "bir.step.count"), Some(&Value::Int(4)));
    let names: Vec<&str> = root.events.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "bir.user_prompt",
            "bir.final_answer",
            "bir.user_prompt",
            "bir.final_answer"
        ]
    );
    // Lengths only: the prompt's text is nowhere in the export.
    let text = json_of(&spans);
    assert!(!text.contains("Check the repo") && !text.contains("echo said hi"));
    assert!(text.contains("\"bir.content.length\",\"value\":{\"intValue\":\"55\"}"));
    let bash = named(&spans, "execute_tool Bash");
    assert_eq!(bash.kind, SpanKind::Internal);
    assert_eq!(attr(bash, "gen_ai.tool.call.id"), Some(&"toolu_01A".into()));
    let echo = named(&spans, "tools/call echo");
    assert_eq!(echo.kind, SpanKind::Client);
    assert_eq!(attr(echo, "error.type"), Some(&"tool_error".into()));
    assert_eq!(echo.status, StatusCode::Error);
    // A Streamable HTTP server: `tcp`, and the session it assigned.
    assert_eq!(attr(echo, "network.transport"), Some(&"tcp".into()));
    assert_eq!(attr(echo, "mcp.session.id"), Some(&"mcp-sess-7f3a".into()));
    // Built-ins have no MCP connection.
    assert!(attr(bash, "network.transport").is_none());
    // Agent call → subagent → its steps.
    let agent_call = named(&spans, "execute_tool Agent");
    let sub = named(&spans, "invoke_agent Explore");
    let read = named(&spans, "execute_tool Read");
    assert_eq!(sub.parent_span_id, Some(agent_call.span_id));
    assert_eq!(read.parent_span_id, Some(sub.span_id));
    assert_eq!(agent_call.parent_span_id, Some(root.span_id));
    assert_eq!(attr(sub, "gen_ai.agent.id"), Some(&"agent_7c1e".into()));
    // Its span covers SubagentStart..SubagentStop.
    assert_eq!(sub.start_time_unix_nano, 1_796_155_205_100_000_000);
    assert_eq!(sub.end_time_unix_nano, 1_796_155_229_900_000_000);
}

#[test]
fn content_goes_out_only_when_asked_and_as_the_journal_holds_it() {
    let opts = MapOptions {
        content: true,
        provider: None,
    };
    let spans = spans_of(&records(BOUND), &opts);
    check_golden("bound-content.otlp.json", &json_of(&spans));
    let root = &spans[0];
    let input = match attr(root, "gen_ai.input.messages") {
        Some(Value::Str(s)) => s.clone(),
        other => panic!("{other:?}"),
    };
    let v: serde_json::Value = serde_json::from_str(&input).expect("a JSON string");
    assert_eq!(v[0]["role"], "user");
    assert_eq!(
        v[0]["parts"][0]["content"],
        "Check the repo, then ask the everything server to echo."
    );
    let read = named(&spans, "execute_tool Read");
    assert_eq!(
        attr(read, "gen_ai.tool.call.arguments"),
        Some(&"{\"file_path\":\"src/main.rs\"}".into())
    );
    // A result only for calls that did not fail.
    assert!(attr(named(&spans, "tools/call echo"), "gen_ai.tool.call.result").is_none());
    // The standalone run's arguments are the journal's: redacted.
    let spans = spans_of(&records(STANDALONE), &opts);
    let text = json_of(&spans);
    assert!(text.contains("[REDACTED:key]") && !text.contains("sk-live-"));
}

#[test]
fn the_same_journal_gives_the_same_bytes_and_ids_differ_by_run() {
    for fixture in [STANDALONE, BOUND] {
        let a = spans_of(&records(fixture), &MapOptions::default());
        let b = spans_of(&records(fixture), &MapOptions::default());
        assert_eq!(json_of(&a), json_of(&b));
        let resource = resource();
        let batch = |spans| Batch {
            resource: &resource,
            spans,
        };
        assert_eq!(
            super::proto::encode(batch(&a)),
            super::proto::encode(batch(&b))
        );
        let mut ids: Vec<[u8; 8]> = a.iter().map(|s| s.span_id).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), a.len(), "span ids are unique");
    }
    assert_ne!(trace_id("run_a"), trace_id("run_b"));
    // A record with no header: nothing to export.
    let mut recs = records(BOUND);
    recs.records.remove(0);
    assert!(spans_of(&recs, &MapOptions::default()).is_empty());
}

#[test]
fn an_unfinished_run_is_marked_interrupted() {
    let mut recs = records(STANDALONE);
    recs.records
        .retain(|r| !matches!(r.event, crate::record::model::RunEvent::RunFinished(_)));
    let spans = spans_of(&recs, &MapOptions::default());
    assert_eq!(spans[0].status, StatusCode::Error);
    assert_eq!(attr(&spans[0], "error.type"), Some(&"interrupted".into()));
    let last_end = spans[1..].iter().map(|s| s.end_time_unix_nano).max();
    assert_eq!(Some(spans[0].end_time_unix_nano), last_end);
}

/// Runs recorded before snapshots named the transport and the session
/// still load, and export exactly as before, minus those two attributes.
#[test]
fn an_old_journal_exports_as_before_without_transport_or_session() {
    use crate::record::model::RunEvent;
    for fixture in [STANDALONE, BOUND] {
        let new = spans_of(&records(fixture), &MapOptions::default());
        // The journal as an older bir wrote it: the keys are not there.
        let old_text = fixture
            .replace(",\"transport\":\"pipe\"", "")
            .replace(",\"transport\":\"tcp\"", "")
            .replace(",\"mcpSessionId\":\"mcp-sess-7f3a\"", "");
        assert!(!old_text.contains("\"transport\""));
        let old_run = records(&old_text);
        assert!(old_run.records.iter().any(|r| matches!(
            &r.event,
            RunEvent::ServerSnapshot(s) if s.transport.is_none() && s.mcp_session_id.is_none()
        )));
        let old = spans_of(&old_run, &MapOptions::default());
        let mut stripped = new.clone();
        for span in &mut stripped {
            span.attributes
                .retain(|a| a.key != "network.transport" && a.key != "mcp.session.id");
        }
        assert_ne!(stripped, new, "the new journal has the attributes");
        assert_eq!(old, stripped);
    }
}

/// A call bir-proxy added a `traceparent` to gets, in the export, the
/// very span id the server was told: the server's spans are its children.
#[test]
fn a_call_with_a_traceparent_gets_its_span_id() {
    use super::mapping::{parse_traceparent, relayed_call_traceparent};
    use crate::record::model::RunEvent;
    let plain = spans_of(&records(STANDALONE), &MapOptions::default());
    let mut run = records(STANDALONE);
    let run_id = match &run.records[0].event {
        RunEvent::RunStarted(h) => h.id.clone(),
        _ => panic!("no header"),
    };
    let tp = relayed_call_traceparent(&run_id, 2);
    let (trace, span) = parse_traceparent(&tp).expect("parses");
    assert_eq!(trace, trace_id(&run_id));
    assert!(tp.starts_with("00-") && tp.ends_with("-01") && tp.len() == 55);
    assert_ne!(
        relayed_call_traceparent(&run_id, 1),
        relayed_call_traceparent(&run_id, 2)
    );
    for r in &mut run.records {
        if let RunEvent::Step(s) = &mut r.event
            && s.tool_name.as_str() == "fail"
            && s.step_type == crate::record::model::StepType::ToolSelected
        {
            s.traceparent = Some(tp.clone());
        }
    }
    let spans = spans_of(&run, &MapOptions::default());
    let fail = named(&spans, "tools/call fail");
    assert_eq!(fail.span_id, span);
    assert_eq!(fail.trace_id, trace);
    assert_ne!(named(&plain, "tools/call fail").span_id, span);
    // Nothing else moved.
    for (a, b) in spans.iter().zip(&plain) {
        if a.name != "tools/call fail" {
            assert_eq!(a, b);
        }
    }
    // A traceparent of another trace (not bir's) names no span of ours.
    for r in &mut run.records {
        if let RunEvent::Step(s) = &mut r.event
            && s.traceparent.is_some()
        {
            s.traceparent = Some(relayed_call_traceparent("run_other", 2));
        }
    }
    let spans = spans_of(&run, &MapOptions::default());
    assert_eq!(
        named(&spans, "tools/call fail").span_id,
        named(&plain, "tools/call fail").span_id
    );
    for bad in ["", "00-xyz", "01-00-00-01", &tp[..54], &format!("{tp}-x")] {
        assert!(parse_traceparent(bad).is_none(), "{bad}");
    }
}

#[test]
fn tokens_go_on_the_root_and_on_each_turns_prompt_and_add_nothing_else() {
    // The bound golden's journal, its finish now with tokens: two models
    // in turn 1 (a subagent's), one in turn 2.
    let with_tokens = BOUND.replace(
        r#""metrics":{"toolCalls":4,"errors":1,"totalToolMs":26740.0}"#,
        r#""metrics":{"toolCalls":4,"errors":1,"totalToolMs":26740.0,
            "usage":{"input":1700,"output":70,"cacheRead":900,"cacheWrite":50},
            "turnUsage":[
              {"turn":1,"model":"claude-sonnet-4-5","usage":{"input":1000,"output":40,"cacheRead":600,"cacheWrite":50}},
              {"turn":1,"model":"claude-haiku-4-5","usage":{"input":500,"output":20,"cacheRead":300,"cacheWrite":0}},
              {"turn":2,"model":"claude-sonnet-4-5","usage":{"input":200,"output":10,"cacheRead":0,"cacheWrite":0}}]}"#
            .replace(['\n', ' '], "")
            .as_str(),
    );
    assert_ne!(with_tokens, BOUND);
    let spans = spans_of(&records(&with_tokens), &MapOptions::default());
    let root = &spans[0];
    let int = |n: i64| Some(Value::Int(n));
    assert_eq!(attr(root, "gen_ai.usage.input_tokens").cloned(), int(1700));
    assert_eq!(attr(root, "gen_ai.usage.output_tokens").cloned(), int(70));
    assert_eq!(
        attr(root, "gen_ai.usage.cache_read.input_tokens").cloned(),
        int(900)
    );
    assert_eq!(
        attr(root, "gen_ai.usage.cache_creation.input_tokens").cloned(),
        int(50)
    );
    let prompts: Vec<&super::span::Event> = root
        .events
        .iter()
        .filter(|e| e.name == "bir.user_prompt")
        .collect();
    let event_attr = |e: &super::span::Event, key: &str| {
        e.attributes
            .iter()
            .find(|a| a.key == key)
            .map(|a| a.value.clone())
    };
    assert_eq!(
        event_attr(prompts[0], "gen_ai.usage.input_tokens"),
        int(1500)
    );
    assert_eq!(
        event_attr(prompts[0], "gen_ai.usage.output_tokens"),
        int(60)
    );
    assert_eq!(
        event_attr(prompts[0], "gen_ai.usage.cache_read.input_tokens"),
        int(900)
    );
    assert_eq!(
        event_attr(prompts[0], "gen_ai.usage.cache_creation.input_tokens"),
        int(50)
    );
    assert_eq!(
        event_attr(prompts[0], "gen_ai.response.model"),
        Some("claude-sonnet-4-5".into())
    );
    assert_eq!(
        event_attr(prompts[1], "gen_ai.usage.input_tokens"),
        int(200)
    );
    // Without the token attributes, the export is the golden's, byte for byte.
    let mut stripped = spans.clone();
    let ours = |k: &str| k.starts_with("gen_ai.usage.") || k == "gen_ai.response.model";
    for s in &mut stripped {
        s.attributes.retain(|a| !ours(&a.key));
        for e in &mut s.events {
            e.attributes.retain(|a| !ours(&a.key));
        }
    }
    let golden = json_of(&spans_of(&records(BOUND), &MapOptions::default()));
    assert_eq!(json_of(&stripped), golden);
    assert_ne!(json_of(&spans), golden);
}

#[test]
fn the_roots_answers_are_the_runs_in_runs_shows_order() {
    let run = crate::record::layout::tests::answers_told_out_of_order();
    let spans = spans_of(
        &run,
        &MapOptions {
            content: true,
            ..MapOptions::default()
        },
    );
    let root = spans
        .iter()
        .find(|s| s.parent_span_id.is_none())
        .expect("a root span");
    let text = |attrs: &[KeyValue], key: &str| {
        attrs
            .iter()
            .find(|kv| kv.key == key)
            .map(|kv| match &kv.value {
                Value::Str(s) => s.clone(),
                other => format!("{other:?}"),
            })
    };
    let output = text(&root.attributes, "gen_ai.output.messages").expect("output messages");
    assert!(
        output.contains("turn 2, amended"),
        "the last turn's answer: {output}"
    );
    let answers: Vec<Option<String>> = root
        .events
        .iter()
        .filter(|e| e.name == "bir.final_answer")
        .map(|e| text(&e.attributes, "bir.turn"))
        .collect();
    assert_eq!(
        answers,
        [Some("Int(1)".to_owned()), Some("Int(2)".to_owned())],
        "the run's two answers, not the subagent's"
    );
}
