//! A run laid out for a reader, as plain data: a bound run as its turns
//! (each turn's calls, session events and final answer in true order, a
//! subagent's calls and events under the Agent call that started it), a
//! standalone run as its calls and final answers in step order. What is
//! said of each entry, and how, is the reader's (`bir runs show`).
//!
//! The journal's order (`seq`) is the order the recorder *emitted* records,
//! which for a joined step can be later than a step after it; the true
//! order is `stepIndex` (allocated when a step's first view arrived). So:
//! * tool calls are paired, placed, numbered and nested by
//!   [`reader_calls`] (one number per call, not per record);
//! * a session event, which carries no index, is placed after the last
//!   step emitted before it (after the calls at that index, then by
//!   journal position); one about a subagent hangs under the Agent call
//!   its steps name as parent;
//! * a final answer sits at its own step index, in the turn it names (else
//!   the last prompt before it in the journal); one emitted again (an
//!   amended view) counts once, at its last emission. [`answers`] is that
//!   view of a run's answers, and the only one: `bir runs show`, the report
//!   and the OpenTelemetry export all take theirs from it. A subagent's
//!   answer is not the run's: it hangs under the Agent call that started
//!   the subagent, like its calls;
//! * the turns are every prompt, every turn an entry or the host's token
//!   counts name, and a turn 0 when something came before the first
//!   prompt.

use std::collections::HashMap;

use super::calls::{Call, reader_calls};
use super::model::{RunEvent, SessionEvent, Step, StepType, Turn};
use super::store::LoadedRun;

/// A final answer of the run's own agent.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Answer<'a> {
    pub step: &'a Step,
    /// The turn it answers: the one it names, else the last prompt
    /// recorded before it in the journal (0: before the first prompt).
    pub turn: u32,
    /// The journal position of its last emission.
    pub seq: u64,
}

/// The run's final answers in the order `bir runs show` tells them: by
/// turn, then by step index (the true order), then journal position. An
/// answer emitted again for the same step (an amended view) counts once,
/// as its last emission. A subagent's answer (a step that names an agent)
/// is not the run's and is left out. Read from the journal's records.
pub(crate) fn answers(run: &LoadedRun) -> Vec<Answer<'_>> {
    let mut prompts: Vec<(u64, u32)> = Vec::new();
    let mut found: Vec<(u64, &Step)> = Vec::new();
    for r in &run.records {
        match &r.event {
            RunEvent::Turn(t) => prompts.push((r.seq, t.turn)),
            RunEvent::Step(s) if s.step_type == StepType::FinalAnswer && s.agent_id.is_none() => {
                found.retain(|(_, a)| a.step_index != s.step_index);
                found.push((r.seq, s));
            }
            _ => {}
        }
    }
    let mut answers: Vec<Answer> = found
        .into_iter()
        .map(|(seq, step)| Answer {
            step,
            turn: step.turn.unwrap_or_else(|| turn_before(&prompts, seq)),
            seq,
        })
        .collect();
    answers.sort_by_key(|a| (a.turn, a.step.step_index, a.seq));
    answers
}

/// The turn of the last prompt in `prompts` (journal position, turn)
/// recorded before journal position `seq`; 0 when none was.
fn turn_before(prompts: &[(u64, u32)], seq: u64) -> u32 {
    prompts
        .iter()
        .filter(|(s, _)| *s < seq)
        .map(|(_, t)| *t)
        .max()
        .unwrap_or(0)
}

/// Whether `run` is a bound run (laid out by [`turns`]): its header says
/// so, or, without a header, it recorded prompts.
pub(crate) fn is_bound(run: &LoadedRun) -> bool {
    match &run.header {
        Some(h) => h.metadata.tier == "bound",
        None => !run.turns.is_empty(),
    }
}

/// Something shown in a turn or under an Agent call, in order.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Entry<'a> {
    /// A tool call: its index in [`Turns::calls`].
    Call(usize),
    Event(&'a SessionEvent),
    /// A `final_answer` step: the model's last words of a turn.
    Answer(&'a Step),
}

/// One turn of a bound run.
#[derive(Debug)]
pub(crate) struct TurnEntries<'a> {
    /// The turn's number; 0 is what came before the first prompt.
    pub number: u32,
    /// Its prompt, when one was recorded (the first, if several name it).
    pub prompt: Option<&'a Turn>,
    /// Its top-level entries in true order.
    pub entries: Vec<Entry<'a>>,
}

/// A bound run laid out as its turns.
#[derive(Debug)]
pub(crate) struct Turns<'a> {
    /// The calls as [`reader_calls`] returns them; [`Entry::Call`] indexes
    /// this list.
    pub calls: Vec<Call<'a>>,
    /// What nests under each call (same index as `calls`), in true order:
    /// its subagent's calls and events.
    pub children: Vec<Vec<Entry<'a>>>,
    /// The turns, by number.
    pub turns: Vec<TurnEntries<'a>>,
    /// Whether a step carried a final answer (else the run's own final
    /// output, in its finish record, is the answer).
    pub answered: bool,
    /// Each subagent's type, as its steps name it.
    agent_types: HashMap<&'a str, &'a str>,
}

impl<'a> Turns<'a> {
    /// The type of the subagent `e` is about, as its steps name it (the
    /// event's own data may leave it out).
    pub(crate) fn agent_type(&self, e: &SessionEvent) -> Option<&'a str> {
        e.agent_id
            .as_deref()
            .and_then(|a| self.agent_types.get(a).copied())
    }
}

/// Sort key of an entry: the step index it follows, then calls before the
/// events that came after them, then journal position.
type Order = (u64, u8, u64);

/// `run` (a bound run) laid out as its turns.
pub(crate) fn turns(run: &LoadedRun) -> Turns<'_> {
    // Records with their journal position.
    let mut steps: Vec<(u64, &Step)> = Vec::new();
    let mut prompts: Vec<(u64, &Turn)> = Vec::new();
    let mut events: Vec<(u64, &SessionEvent)> = Vec::new();
    for r in &run.records {
        match &r.event {
            RunEvent::Step(s) => steps.push((r.seq, s)),
            RunEvent::Turn(turn) => prompts.push((r.seq, turn)),
            RunEvent::SessionEvent(e) => events.push((r.seq, e)),
            _ => {}
        }
    }
    // The calls, paired and numbered as every reader numbers them.
    let calls = reader_calls(run);
    let mut children: Vec<Vec<Entry>> = calls.iter().map(|_| Vec::new()).collect();
    // The run's answers, and its subagents' (an answer emitted again, an
    // amended view: the last one wins).
    let answers = answers(run);
    let mut subagent_answers: Vec<(u64, &Step)> = Vec::new();
    for &(seq, s) in &steps {
        if s.step_type == StepType::FinalAnswer && s.agent_id.is_some() {
            subagent_answers.retain(|(_, a)| a.step_index != s.step_index);
            subagent_answers.push((seq, s));
        }
    }

    // Where a subagent's events hang (the Agent call its steps name as
    // parent), and the subagent's type, as its steps name them.
    let by_id: HashMap<&str, usize> = calls
        .iter()
        .enumerate()
        .filter_map(|(i, c)| Some((c.any()?.tool_use_id.as_deref()?, i)))
        .collect();
    let mut parent_of_agent: HashMap<&str, &str> = HashMap::new();
    let mut agent_types: HashMap<&str, &str> = HashMap::new();
    for s in calls.iter().filter_map(Call::any) {
        let Some(agent) = s.agent_id.as_deref() else {
            continue;
        };
        if let Some(parent) = s.parent_tool_use_id.as_deref() {
            parent_of_agent.entry(agent).or_insert(parent);
        }
        if let Some(kind) = s.agent_type.as_deref() {
            agent_types.entry(agent).or_insert(kind);
        }
    }
    // The step index emitted last before each journal position.
    let index_before = |seq: u64| -> u64 {
        steps
            .iter()
            .filter(|(s, _)| *s < seq)
            .map(|(_, st)| st.step_index)
            .max()
            .unwrap_or(0)
    };
    let turn_at = |seq: u64| -> u32 {
        prompts
            .iter()
            .filter(|(s, _)| *s < seq)
            .map(|(_, t)| t.turn)
            .max()
            .unwrap_or(0)
    };

    // Top level per turn, and children under their Agent call.
    let mut top: Vec<(u32, Order, Entry)> = Vec::new();
    let mut nested: Vec<(usize, Order, Entry)> = Vec::new();
    for (i, c) in calls.iter().enumerate() {
        let order = (c.order, 0, c.seq);
        match c.parent {
            Some(p) => nested.push((p, order, Entry::Call(i))),
            None => top.push((c.turn, order, Entry::Call(i))),
        }
    }
    for &(seq, e) in &events {
        let order = (index_before(seq), 1, seq);
        let parent = e
            .agent_id
            .as_deref()
            .and_then(|a| parent_of_agent.get(a))
            .and_then(|p| by_id.get(p).copied());
        match parent {
            Some(p) => nested.push((p, order, Entry::Event(e))),
            None => top.push((turn_at(seq), order, Entry::Event(e))),
        }
    }
    for a in &answers {
        top.push((a.turn, (a.step.step_index, 0, a.seq), Entry::Answer(a.step)));
    }
    // A subagent's answer under the Agent call that started it (at the top,
    // in its turn, when no call is known to have).
    for &(seq, a) in &subagent_answers {
        let order = (a.step_index, 0, seq);
        let parent = a
            .agent_id
            .as_deref()
            .and_then(|agent| parent_of_agent.get(agent))
            .and_then(|p| by_id.get(p).copied());
        match parent {
            Some(p) => nested.push((p, order, Entry::Answer(a))),
            None => top.push((
                a.turn.unwrap_or_else(|| turn_at(seq)),
                order,
                Entry::Answer(a),
            )),
        }
    }
    nested.sort_by_key(|(_, o, _)| *o);
    for (p, _, entry) in nested {
        children[p].push(entry);
    }
    top.sort_by_key(|(turn, o, _)| (*turn, *o));

    // Turns: every prompt, every turn named by an entry or by the host's
    // token counts (a turn 0 among them when something came before the
    // first prompt).
    let mut numbers: Vec<u32> = prompts.iter().map(|(_, t)| t.turn).collect();
    numbers.extend(top.iter().map(|(n, _, _)| *n));
    numbers.extend(
        run.finish
            .iter()
            .flat_map(|f| f.metrics.turn_usage.iter().map(|r| r.turn)),
    );
    numbers.sort_unstable();
    numbers.dedup();
    let turns = numbers
        .into_iter()
        .map(|number| TurnEntries {
            number,
            prompt: prompts
                .iter()
                .find(|(_, t)| t.turn == number)
                .map(|(_, t)| *t),
            entries: top
                .iter()
                .filter(|(n, _, _)| *n == number)
                .map(|(_, _, entry)| *entry)
                .collect(),
        })
        .collect();
    Turns {
        calls,
        children,
        turns,
        answered: !answers.is_empty(),
        agent_types,
    }
}

/// One row of a standalone run.
#[derive(Debug)]
pub(crate) enum Row<'a> {
    Call(Call<'a>),
    /// A final answer (rare in a standalone run; what a reader shows of it
    /// is only that it came here).
    Answer,
}

/// A standalone run's calls in the reader's order and numbering, each
/// final answer where its step index puts it (after the calls at the same
/// index).
pub(crate) fn rows(run: &LoadedRun) -> Vec<Row<'_>> {
    let mut rows: Vec<(u64, Row)> = reader_calls(run)
        .into_iter()
        .map(|c| (c.order, Row::Call(c)))
        .collect();
    for a in answers(run) {
        rows.push((a.step.step_index, Row::Answer));
    }
    rows.sort_by_key(|r| r.0);
    rows.into_iter().map(|(_, row)| row).collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::record::calls::tests::step;
    use crate::record::model::{Record, RunFinish, RunMetrics, TokenUsage, TurnUsage};

    pub(crate) fn prompt(n: u32) -> RunEvent {
        RunEvent::Turn(Turn {
            turn: n,
            at: String::new(),
            prompt: format!("prompt {n}").as_str().into(),
            origin: None,
        })
    }

    fn event(name: &str, agent: Option<&str>) -> RunEvent {
        RunEvent::SessionEvent(SessionEvent {
            name: name.into(),
            at: String::new(),
            agent_id: agent.map(Into::into),
            data: None,
        })
    }

    pub(crate) fn answer(index: u64, turn: Option<u32>, text: &str) -> RunEvent {
        let mut s = step(index, StepType::FinalAnswer, "", None);
        s.turn = turn;
        s.output = Some(serde_json::json!(text).into());
        RunEvent::Step(s)
    }

    /// A run read back from `events` as the store reads a journal, in
    /// this journal order (`seq` 1, 2, 3, …).
    pub(crate) fn run(events: Vec<RunEvent>) -> LoadedRun {
        let mut run = LoadedRun::default();
        for (i, event) in events.into_iter().enumerate() {
            let record = Record {
                seq: i as u64 + 1,
                event,
            };
            run.absorb(&serde_json::to_vec(&record).expect("a record serialises"));
        }
        run
    }

    /// A turn's entries as short words: a call's tool, an event's name,
    /// an answer's text.
    fn words<'a>(laid: &Turns<'a>, entries: &[Entry<'a>]) -> Vec<String> {
        entries
            .iter()
            .map(|e| match e {
                Entry::Call(i) => laid.calls[*i]
                    .any()
                    .map_or(String::new(), |s| s.tool_name.to_string()),
                Entry::Event(e) => e.name.to_string(),
                Entry::Answer(a) => a
                    .output
                    .as_deref()
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
            })
            .collect()
    }

    #[test]
    fn turns_hold_their_entries_in_step_order_not_emission_order() {
        // Read's response is emitted after Grep's selection (a late join),
        // an event follows Read's response, and the first answer is
        // emitted twice (an amended view).
        let laid_out = run(vec![
            event("SessionStart", None),
            prompt(1),
            RunEvent::Step(step(2, StepType::ToolSelected, "Grep", Some("t2"))),
            RunEvent::Step(step(1, StepType::ToolSelected, "Read", Some("t1"))),
            RunEvent::Step(step(3, StepType::ToolResponse, "Read", Some("t1"))),
            event("Notification", None),
            RunEvent::Step(step(4, StepType::ToolResponse, "Grep", Some("t2"))),
            answer(5, Some(1), "first"),
            answer(5, Some(1), "amended"),
            prompt(2),
            answer(6, None, "second"),
        ]);
        let laid = turns(&laid_out);
        let numbers: Vec<u32> = laid.turns.iter().map(|t| t.number).collect();
        assert_eq!(numbers, [0, 1, 2], "turn 0 holds what came first");
        assert!(laid.turns[0].prompt.is_none());
        assert_eq!(words(&laid, &laid.turns[0].entries), ["SessionStart"]);
        assert_eq!(
            laid.turns[1].prompt.map(|p| p.prompt.as_str()),
            Some("prompt 1")
        );
        assert_eq!(
            words(&laid, &laid.turns[1].entries),
            ["Read", "Grep", "Notification", "amended"],
            "calls by stepIndex; the event after the last step emitted before it"
        );
        assert_eq!(
            words(&laid, &laid.turns[2].entries),
            ["second"],
            "an answer without a turn belongs to the prompt before it"
        );
        assert!(laid.answered);
    }

    #[test]
    fn a_subagents_calls_and_events_hang_under_its_agent_call() {
        let mut inner = step(3, StepType::ToolSelected, "Read", Some("t2"));
        inner.agent_id = Some("ag".into());
        inner.agent_type = Some("explorer".into());
        inner.parent_tool_use_id = Some("t1".into());
        let laid_out = run(vec![
            prompt(1),
            RunEvent::Step(step(1, StepType::ToolSelected, "Agent", Some("t1"))),
            event("SubagentStart", Some("ag")),
            RunEvent::Step(inner),
            event("SubagentStop", Some("ag")),
            event("SubagentStop", Some("unknown")),
            RunEvent::Step(step(4, StepType::ToolResponse, "Agent", Some("t1"))),
        ]);
        let laid = turns(&laid_out);
        assert_eq!(laid.turns.len(), 1);
        assert_eq!(
            words(&laid, &laid.turns[0].entries),
            ["Agent", "SubagentStop"],
            "an event of an agent no call names stays at the top"
        );
        assert_eq!(
            words(&laid, &laid.children[0]),
            ["SubagentStart", "Read", "SubagentStop"]
        );
        let Entry::Event(stop) = laid.children[0][2] else {
            panic!("an event: {:?}", laid.children[0]);
        };
        assert_eq!(laid.agent_type(stop), Some("explorer"));
        assert!(!laid.answered);
    }

    #[test]
    fn a_turn_with_only_token_counts_is_still_a_turn() {
        let mut laid_out = run(vec![prompt(1)]);
        laid_out.finish = Some(RunFinish {
            metrics: RunMetrics {
                turn_usage: vec![TurnUsage {
                    turn: 3,
                    model: None,
                    usage: TokenUsage::default(),
                }],
                ..RunMetrics::default()
            },
            ..RunFinish::default()
        });
        let laid = turns(&laid_out);
        let numbers: Vec<u32> = laid.turns.iter().map(|t| t.number).collect();
        assert_eq!(numbers, [1, 3]);
        assert!(laid.turns[1].prompt.is_none() && laid.turns[1].entries.is_empty());
    }

    #[test]
    fn a_standalone_runs_answer_sits_at_its_step_index() {
        let laid_out = run(vec![
            RunEvent::Step(step(1, StepType::ToolSelected, "echo", None)),
            RunEvent::Step(step(2, StepType::ToolResponse, "echo", None)),
            RunEvent::Step(step(4, StepType::ToolSelected, "add", None)),
            answer(3, None, "done"),
            RunEvent::Step(step(5, StepType::ToolResponse, "add", None)),
        ]);
        assert!(!is_bound(&laid_out));
        let shown: Vec<String> = rows(&laid_out)
            .iter()
            .map(|r| match r {
                Row::Call(c) => {
                    let tool = c.any().map_or(String::new(), |s| s.tool_name.to_string());
                    format!("{} {tool}", c.number)
                }
                Row::Answer => "answer".to_owned(),
            })
            .collect();
        assert_eq!(shown, ["1 echo", "answer", "2 add"]);
    }

    /// A bound run whose answers every reader used to order differently:
    /// turn 1 starts a subagent that answers (its answer is not the
    /// run's); turn 2 is answered (and that answer amended); then turn 1's
    /// answer, recovered from the transcript, is told late, at a higher
    /// step index than turn 2's. In journal order: the subagent's, turn
    /// 2's, turn 1's; in step-index order the same; `bir runs show` told
    /// the subagent's and turn 1's in turn 1, then turn 2's.
    pub(crate) fn answers_told_out_of_order() -> LoadedRun {
        let mut header = crate::record::model::RunHeader {
            id: "run_answers".into(),
            started_at: "2026-12-01T00:00:00.000Z".into(),
            input: None,
            metadata: crate::record::model::RunMetadata::default(),
        };
        header.metadata.tier = "bound".into();
        let mut inner = step(3, StepType::ToolSelected, "Read", Some("t2"));
        inner.agent_id = Some("ag".into());
        inner.parent_tool_use_id = Some("t1".into());
        let RunEvent::Step(mut subagent) = answer(4, Some(1), "the subagent's") else {
            unreachable!("answer() makes a step");
        };
        subagent.agent_id = Some("ag".into());
        let RunEvent::Step(mut recovered) = answer(9, Some(1), "turn 1, recovered") else {
            unreachable!("answer() makes a step");
        };
        recovered.recovered = true;
        run(vec![
            RunEvent::RunStarted(header),
            prompt(1),
            RunEvent::Step(step(1, StepType::ToolSelected, "Agent", Some("t1"))),
            RunEvent::Step(inner),
            RunEvent::Step(subagent),
            RunEvent::Step(step(5, StepType::ToolResponse, "Agent", Some("t1"))),
            prompt(2),
            answer(7, Some(2), "turn 2"),
            answer(7, Some(2), "turn 2, amended"),
            RunEvent::Step(recovered),
        ])
    }

    /// An answer's text.
    pub(crate) fn text(step: &Step) -> &str {
        step.output
            .as_deref()
            .and_then(serde_json::Value::as_str)
            .unwrap_or("")
    }

    #[test]
    fn the_runs_answers_go_by_turn_then_step_index_and_a_subagents_is_not_the_runs() {
        let laid_out = answers_told_out_of_order();
        let told: Vec<(u32, &str)> = answers(&laid_out)
            .iter()
            .map(|a| (a.turn, text(a.step)))
            .collect();
        assert_eq!(told, [(1, "turn 1, recovered"), (2, "turn 2, amended")]);

        // `bir runs show` lays them out the same way, the subagent's under
        // the Agent call.
        let laid = turns(&laid_out);
        let numbers: Vec<u32> = laid.turns.iter().map(|t| t.number).collect();
        assert_eq!(numbers, [1, 2]);
        assert_eq!(
            words(&laid, &laid.turns[0].entries),
            ["Agent", "turn 1, recovered"]
        );
        assert_eq!(words(&laid, &laid.turns[1].entries), ["turn 2, amended"]);
        assert_eq!(words(&laid, &laid.children[0]), ["Read", "the subagent's"]);
        assert!(laid.answered);
    }

    #[test]
    fn an_answer_without_a_turn_answers_the_prompt_before_it() {
        let laid_out = run(vec![
            answer(1, None, "before"),
            prompt(1),
            answer(3, None, "one"),
            prompt(2),
            answer(2, None, "two, at a lower index"),
        ]);
        let told: Vec<(u32, &str)> = answers(&laid_out)
            .iter()
            .map(|a| (a.turn, text(a.step)))
            .collect();
        assert_eq!(
            told,
            [(0, "before"), (1, "one"), (2, "two, at a lower index")]
        );
    }
}
