//! A run as `bir runs export` writes it: one JSON document, or the
//! journal's records as JSON lines. Pure: the command only prints it.

use serde_json::{Value, json};

use super::layout;
use super::store::LoadedRun;

/// The JSON document: the run's id, header, server snapshots, steps (in
/// journal order; `stepIndex` is their true order), finish and torn
/// bytes; a bound run (or one that recorded prompts or session events)
/// also has its `turns` and `events`, in journal order.
pub(crate) fn document(run: &LoadedRun) -> Value {
    let mut doc = json!({
        "id": run.id(),
        "run": run.header,
        "servers": run.snapshots,
        "steps": run.steps,
        "finish": run.finish,
        "tornBytes": run.torn_bytes,
    });
    if layout::is_bound(run) || !run.turns.is_empty() || !run.events.is_empty() {
        doc["turns"] = json!(run.turns);
        doc["events"] = json!(run.events);
    }
    doc
}

/// The journal's records, one JSON text each, in journal order.
pub(crate) fn lines(run: &LoadedRun) -> Vec<String> {
    run.records
        .iter()
        .filter_map(|r| serde_json::to_string(r).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::calls::tests::step;
    use crate::record::layout::tests::run;
    use crate::record::model::{RunEvent, StepType, Turn};

    #[test]
    fn a_standalone_run_has_no_turns_and_a_bound_one_has_its_prompts() {
        let call = || RunEvent::Step(step(1, StepType::ToolSelected, "echo", None));
        let standalone = run(vec![call()]);
        let doc = document(&standalone);
        assert_eq!(doc["steps"].as_array().map(Vec::len), Some(1));
        assert_eq!(doc["tornBytes"], json!(0));
        assert!(doc.get("turns").is_none() && doc.get("events").is_none());
        assert_eq!(lines(&standalone).len(), 1);

        let prompt = RunEvent::Turn(Turn {
            turn: 1,
            at: String::new(),
            prompt: "hello".into(),
            origin: None,
        });
        let bound = run(vec![prompt, call()]);
        let doc = document(&bound);
        assert_eq!(doc["turns"][0]["prompt"], json!("hello"));
        assert_eq!(doc["events"], json!([]));
        let lines = lines(&bound);
        assert_eq!(lines.len(), 2);
        assert!(lines[0].contains("\"seq\":1"), "{}", lines[0]);
    }
}
