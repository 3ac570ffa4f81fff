//! A run's tool calls as a reader counts them: one per call, numbered
//! `1, 2, 3, …` in the order the calls began, a subagent's calls under the
//! Agent call that started it as `2.1, 2.2, …`.
//!
//! A journal stores a call as two records (the selection and the response,
//! each with its own `stepIndex`), so numbering records would skip. Every
//! reader that shows step numbers (`bir runs show`, its `--follow`, the
//! HTML report) takes them from [`reader_calls`], so the same call has the
//! same number everywhere.
//!
//! How records become calls:
//! * a record emitted again for the same step (same `stepIndex` and type:
//!   an amended view) replaces the earlier one;
//! * a selection and a response pair by `toolUseId`; a response without
//!   one pairs with the latest unanswered selection of the same tool
//!   without one (standalone runs write the two back to back);
//! * a call's place is its first `stepIndex` (the journal's order, `seq`,
//!   is the order records were *emitted*, which for a joined step can be
//!   later than a step after it); its turn is the one its steps name, else
//!   the last prompt before it in the journal;
//! * a call nests under the Agent call its `parentToolUseId` names (or
//!   that its agent's other calls name); a parent chain that loops (only a
//!   damaged journal has one) is cut, and the call stays at the top.

use std::collections::HashMap;

use super::model::{RunEvent, Step, StepType};
use super::store::LoadedRun;

/// One tool call: its two records (either may be missing in a run that
/// was cut short).
#[derive(Debug, Default, Clone)]
pub(crate) struct Call<'a> {
    pub selected: Option<&'a Step>,
    pub response: Option<&'a Step>,
    /// The first `stepIndex` of the call: its place in the true order.
    pub order: u64,
    /// The journal position (`seq`) of its first record.
    pub seq: u64,
    /// The turn (bound runs) it belongs to; 0 before the first prompt and
    /// in standalone runs.
    pub turn: u32,
    /// The index (in the list [`reader_calls`] returns) of the Agent call
    /// this call ran under.
    pub parent: Option<usize>,
    /// The reader's number: `"3"`, or `"2.1"` under call 2.
    pub number: String,
}

impl<'a> Call<'a> {
    /// The record that names the call (both carry the same identity).
    pub(crate) fn any(&self) -> Option<&'a Step> {
        self.selected.or(self.response)
    }
}

/// The calls of `run`, paired and numbered for a reader, in the order they
/// began (by their first `stepIndex`, then journal position). A child's
/// `parent` indexes this same list.
pub(crate) fn reader_calls(run: &LoadedRun) -> Vec<Call<'_>> {
    let mut steps: Vec<(u64, &Step)> = Vec::new();
    let mut turns: Vec<(u64, u32)> = Vec::new();
    for r in &run.records {
        match &r.event {
            RunEvent::Step(s) => steps.push((r.seq, s)),
            RunEvent::Turn(t) => turns.push((r.seq, t.turn)),
            _ => {}
        }
    }
    let steps = latest_views(steps);
    let mut calls = pair(&steps);
    calls.sort_by_key(|c| (c.order, c.seq));
    let turn_at = |seq: u64| -> u32 {
        turns
            .iter()
            .filter(|(s, _)| *s < seq)
            .map(|(_, t)| *t)
            .max()
            .unwrap_or(0)
    };
    for c in &mut calls {
        c.turn = c
            .selected
            .and_then(|x| x.turn)
            .or(c.any().and_then(|s| s.turn))
            .unwrap_or_else(|| turn_at(c.seq));
    }
    link_parents(&mut calls);
    number(&mut calls);
    calls
}

/// Drops a step record that a later one with the same `stepIndex` and type
/// replaced.
fn latest_views(steps: Vec<(u64, &Step)>) -> Vec<(u64, &Step)> {
    let mut latest: HashMap<(u64, u8), usize> = HashMap::new();
    for (i, (_, s)) in steps.iter().enumerate() {
        latest.insert((s.step_index, s.step_type as u8), i);
    }
    steps
        .iter()
        .enumerate()
        .filter(|(i, (_, s))| latest.get(&(s.step_index, s.step_type as u8)) == Some(i))
        .map(|(_, x)| *x)
        .collect()
}

/// Pairs selections and responses into calls (see the module's notes).
fn pair<'a>(steps: &[(u64, &'a Step)]) -> Vec<Call<'a>> {
    let mut calls: Vec<Call> = Vec::new();
    let mut by_id: HashMap<&str, usize> = HashMap::new();
    for &(seq, s) in steps {
        let selected = match s.step_type {
            StepType::ToolSelected => true,
            StepType::ToolResponse => false,
            StepType::FinalAnswer => continue,
        };
        let found = match s.tool_use_id.as_deref() {
            Some(id) => by_id.get(id).copied(),
            None if !selected => calls.iter().rposition(|c| {
                c.response.is_none()
                    && c.any().is_some_and(|a| {
                        a.tool_use_id.is_none() && a.qualified_name == s.qualified_name
                    })
            }),
            None => None,
        };
        let i = match found {
            Some(i)
                if (selected && calls[i].selected.is_none())
                    || (!selected && calls[i].response.is_none()) =>
            {
                i
            }
            _ => {
                calls.push(Call {
                    order: s.step_index,
                    seq,
                    ..Call::default()
                });
                if let Some(id) = s.tool_use_id.as_deref() {
                    by_id.insert(id, calls.len() - 1);
                }
                calls.len() - 1
            }
        };
        let c = &mut calls[i];
        if selected {
            c.selected = Some(s);
        } else {
            c.response = Some(s);
        }
        c.order = c.order.min(s.step_index);
        c.seq = c.seq.min(seq);
    }
    calls
}

/// Sets each call's `parent`: the Agent call its subagent ran under.
fn link_parents(calls: &mut [Call]) {
    let mut by_id: HashMap<&str, usize> = HashMap::new();
    let mut parent_of_agent: HashMap<&str, &str> = HashMap::new();
    for (i, c) in calls.iter().enumerate() {
        let Some(s) = c.any() else { continue };
        if let Some(id) = s.tool_use_id.as_deref() {
            by_id.insert(id, i);
        }
        if let (Some(agent), Some(parent)) =
            (s.agent_id.as_deref(), s.parent_tool_use_id.as_deref())
        {
            parent_of_agent.entry(agent).or_insert(parent);
        }
    }
    let direct: Vec<Option<usize>> = calls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let s = c.any()?;
            s.parent_tool_use_id
                .as_deref()
                .or_else(|| {
                    s.agent_id
                        .as_deref()
                        .and_then(|a| parent_of_agent.get(a).copied())
                })
                .and_then(|p| by_id.get(p).copied())
                .filter(|p| *p != i)
        })
        .collect();
    for (i, call) in calls.iter_mut().enumerate() {
        call.parent = cut_loops(&direct, i);
    }
}

/// `i`'s parent, unless following parents from it comes back to it.
fn cut_loops(parents: &[Option<usize>], i: usize) -> Option<usize> {
    let first = parents[i]?;
    let mut at = first;
    for _ in 0..parents.len() {
        match parents[at] {
            Some(up) if up == i => return None,
            Some(up) => at = up,
            None => return Some(first),
        }
    }
    None
}

/// Numbers the calls: top-level ones `1, 2, 3` by (turn, order), each
/// one's children `n.1, n.2` by order, depth first.
fn number(calls: &mut [Call]) {
    let mut top: Vec<usize> = (0..calls.len())
        .filter(|&i| calls[i].parent.is_none())
        .collect();
    top.sort_by_key(|&i| (calls[i].turn, calls[i].order, calls[i].seq));
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); calls.len()];
    for (i, call) in calls.iter().enumerate() {
        if let Some(p) = call.parent {
            children[p].push(i);
        }
    }
    // Calls are already in (order, seq) order, so each child list is too.
    let mut stack: Vec<(usize, String)> = top
        .iter()
        .enumerate()
        .rev()
        .map(|(k, &i)| (i, (k + 1).to_string()))
        .collect();
    while let Some((i, n)) = stack.pop() {
        for (k, &child) in children[i].iter().enumerate().rev() {
            stack.push((child, format!("{n}.{}", k + 1)));
        }
        calls[i].number = n;
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::record::model::Record;

    /// A step of `t` for `tool`, with an id or none (shared with
    /// `record::layout`'s tests).
    pub(crate) fn step(index: u64, t: StepType, tool: &str, id: Option<&str>) -> Step {
        Step {
            qualified_name: tool.into(),
            tool_name: tool.into(),
            tool_use_id: id.map(Into::into),
            ..Step::new(index, t, String::new())
        }
    }

    fn run(steps: Vec<Step>) -> LoadedRun {
        LoadedRun {
            records: steps
                .into_iter()
                .enumerate()
                .map(|(i, s)| Record {
                    seq: i as u64 + 1,
                    event: RunEvent::Step(s),
                })
                .collect(),
            ..LoadedRun::default()
        }
    }

    fn numbers(run: &LoadedRun) -> Vec<(String, u64)> {
        reader_calls(run)
            .iter()
            .map(|c| (c.number.clone(), c.any().map_or(0, |s| s.step_index)))
            .collect()
    }

    #[test]
    fn a_standalone_run_counts_calls_not_records() {
        let r = run(vec![
            step(1, StepType::ToolSelected, "echo", None),
            step(2, StepType::ToolResponse, "echo", None),
            step(3, StepType::ToolSelected, "add", None),
            step(4, StepType::ToolResponse, "add", None),
            step(5, StepType::ToolSelected, "echo", None),
            step(6, StepType::ToolResponse, "echo", None),
        ]);
        let calls = reader_calls(&r);
        assert_eq!(
            numbers(&r),
            [("1".into(), 1), ("2".into(), 3), ("3".into(), 5)]
        );
        assert!(
            calls
                .iter()
                .all(|c| c.selected.is_some() && c.response.is_some())
        );
    }

    #[test]
    fn subagent_calls_nest_and_loops_are_cut() {
        let mut inner = step(3, StepType::ToolSelected, "Read", Some("t2"));
        inner.parent_tool_use_id = Some("t1".into());
        let mut inner_done = step(4, StepType::ToolResponse, "Read", Some("t2"));
        inner_done.parent_tool_use_id = Some("t1".into());
        let r = run(vec![
            step(1, StepType::ToolSelected, "Bash", Some("t0")),
            step(2, StepType::ToolSelected, "Agent", Some("t1")),
            inner,
            inner_done,
            step(5, StepType::ToolResponse, "Agent", Some("t1")),
            step(6, StepType::ToolResponse, "Bash", Some("t0")),
            step(7, StepType::ToolSelected, "Bash", Some("t3")),
        ]);
        assert_eq!(
            numbers(&r),
            [
                ("1".into(), 1),
                ("2".into(), 2),
                ("2.1".into(), 3),
                ("3".into(), 7)
            ]
        );
        // Two calls naming each other as parent: both stay at the top.
        let mut a = step(1, StepType::ToolSelected, "A", Some("a"));
        a.parent_tool_use_id = Some("b".into());
        let mut b = step(2, StepType::ToolSelected, "B", Some("b"));
        b.parent_tool_use_id = Some("a".into());
        let looped = run(vec![a, b]);
        assert_eq!(numbers(&looped), [("1".into(), 1), ("2".into(), 2)]);
    }
}
