//! Matching a live `tools/call` against the recorded calls of one server
//! (the mock's core), through an index: a call costs a hash lookup per
//! distinct set of relaxed argument slots of that tool (usually one), not
//! a scan of the recording.
//!
//! Modes:
//! * `keyed` (default): tool + canonical arguments, with volatile and
//!   template slots (`${param:…}`, `${step:…}`) left out; first in, first
//!   out among duplicates.
//! * `ordered`: keyed, and it must be the next unconsumed recorded call.
//! * `strict`: the next unconsumed call, with byte-equal canonical
//!   arguments (no relaxation).
//! * `tool`: the next unconsumed call of that tool, whatever its arguments.
//!
//! A recorded call is served once; `--repeats last` serves the last call
//! that matched the same key again instead of missing. A miss names the
//! nearest recorded call of the same tool and the argument paths that
//! differ.

use std::collections::{HashMap, VecDeque};

use serde_json::Value;

use super::compare::{Difference, RuleSet, diff};
use super::scenario::ScenarioStep;
use super::template::{for_each_leaf, walk_strings};
use crate::record::model::canonical;

/// How many recorded calls of the tool a miss compares with, at most, to
/// find the nearest (a miss is rare; this keeps it bounded anyway).
const NEAREST_SCAN: usize = 2000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Keyed,
    Ordered,
    Strict,
    Tool,
}

impl Mode {
    pub(crate) fn parse(s: &str) -> Option<Mode> {
        Some(match s {
            "keyed" => Mode::Keyed,
            "ordered" => Mode::Ordered,
            "strict" => Mode::Strict,
            "tool" => Mode::Tool,
            _ => return None,
        })
    }
}

struct Entry {
    tool: String,
    /// Pointers left out of the key.
    slots: Vec<String>,
    key: Vec<u8>,
    strict: Vec<u8>,
    args: Value,
}

pub(crate) enum Outcome {
    /// Serve this recorded call (index into the steps given to `new`).
    Hit(usize),
    /// Served again (`--repeats last`).
    Repeat(usize),
    Miss(Miss),
}

#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Miss {
    pub reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nearest_step: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub differing_paths: Vec<Difference>,
}

pub(crate) struct Matcher {
    mode: Mode,
    repeats_last: bool,
    entries: Vec<Entry>,
    ids: Vec<String>,
    consumed: Vec<bool>,
    /// (tool, relaxed key) → recorded calls, in order.
    by_key: HashMap<(String, Vec<u8>), VecDeque<usize>>,
    /// tool → the distinct slot sets its calls relax.
    slot_sets: HashMap<String, Vec<Vec<String>>>,
    /// tool → its calls, in order.
    by_tool: HashMap<String, VecDeque<usize>>,
    all_of_tool: HashMap<String, Vec<usize>>,
    /// The first call not yet consumed (ordered, strict).
    next: usize,
    /// (tool, relaxed key) → the call last served for it.
    last_served: HashMap<(String, Vec<u8>), usize>,
    last_served_tool: HashMap<String, usize>,
}

/// Argument pointers holding a template: they differ live by design.
fn template_slots(args: &Value, out: &mut Vec<String>) {
    for_each_leaf(args, &mut |pointer, _, leaf| {
        if leaf.as_str().is_some_and(|s| s.contains("${")) {
            out.push(pointer.to_owned());
        }
    });
}

/// `args` with the slots removed, canonical.
fn relaxed_key(args: &Value, slots: &[String]) -> Vec<u8> {
    if slots.is_empty() {
        return canonical(args);
    }
    let mut copy = args.clone();
    for slot in slots {
        remove_pointer(&mut copy, slot);
    }
    canonical(&copy)
}

fn remove_pointer(value: &mut Value, pointer: &str) {
    let Some((parent, last)) = pointer.rsplit_once('/') else {
        return;
    };
    let last = last.replace("~1", "/").replace("~0", "~");
    match value.pointer_mut(parent) {
        Some(Value::Object(map)) => {
            map.remove(&last);
        }
        Some(Value::Array(items)) => {
            if let Ok(i) = last.parse::<usize>()
                && i < items.len()
            {
                items[i] = Value::Null;
            }
        }
        _ => {}
    }
}

impl Matcher {
    /// An index over `steps` (one server's calls, in recorded order).
    pub(crate) fn new(steps: &[&ScenarioStep], mode: Mode, repeats_last: bool) -> Matcher {
        let mut m = Matcher {
            mode,
            repeats_last,
            entries: Vec::with_capacity(steps.len()),
            ids: Vec::with_capacity(steps.len()),
            consumed: vec![false; steps.len()],
            by_key: HashMap::new(),
            slot_sets: HashMap::new(),
            by_tool: HashMap::new(),
            all_of_tool: HashMap::new(),
            next: 0,
            last_served: HashMap::new(),
            last_served_tool: HashMap::new(),
        };
        for (i, step) in steps.iter().enumerate() {
            let mut slots = step.volatile_args.clone();
            template_slots(&step.args, &mut slots);
            slots.sort();
            slots.dedup();
            let key = relaxed_key(&step.args, &slots);
            let sets = m.slot_sets.entry(step.tool.clone()).or_default();
            if !sets.contains(&slots) {
                sets.push(slots.clone());
            }
            m.by_key
                .entry((step.tool.clone(), key.clone()))
                .or_default()
                .push_back(i);
            m.by_tool.entry(step.tool.clone()).or_default().push_back(i);
            m.all_of_tool.entry(step.tool.clone()).or_default().push(i);
            m.entries.push(Entry {
                tool: step.tool.clone(),
                slots,
                key,
                strict: canonical(&step.args),
                args: step.args.clone(),
            });
            m.ids.push(step.id.clone());
        }
        m
    }

    /// Recorded calls never served.
    pub(crate) fn unused(&self) -> Vec<&str> {
        self.consumed
            .iter()
            .enumerate()
            .filter(|(_, c)| !**c)
            .map(|(i, _)| self.ids[i].as_str())
            .collect()
    }

    fn consume(&mut self, i: usize, tool: &str, key: Vec<u8>) -> Outcome {
        self.consumed[i] = true;
        while self.next < self.consumed.len() && self.consumed[self.next] {
            self.next += 1;
        }
        self.last_served.insert((tool.to_owned(), key), i);
        self.last_served_tool.insert(tool.to_owned(), i);
        Outcome::Hit(i)
    }

    /// Matches one live call (arguments already in recorded space).
    pub(crate) fn call(&mut self, tool: &str, args: &Value) -> Outcome {
        let found = match self.mode {
            Mode::Keyed => self.keyed(tool, args),
            Mode::Ordered => {
                self.next_if(|e| e.tool == tool && e.key == relaxed_key(args, &e.slots))
            }
            Mode::Strict => {
                let strict = canonical(args);
                self.next_if(|e| e.tool == tool && e.strict == strict)
            }
            Mode::Tool => {
                let consumed = &self.consumed;
                self.by_tool.get_mut(tool).and_then(|q| {
                    while q.front().is_some_and(|&i| consumed[i]) {
                        q.pop_front();
                    }
                    q.pop_front()
                })
            }
        };
        if let Some(i) = found {
            let key = relaxed_key(args, &self.entries[i].slots);
            return self.consume(i, tool, key);
        }
        if self.repeats_last {
            let again = match self.mode {
                Mode::Tool => self.last_served_tool.get(tool).copied(),
                _ => self
                    .slot_sets
                    .get(tool)
                    .into_iter()
                    .flatten()
                    .find_map(|slots| {
                        self.last_served
                            .get(&(tool.to_owned(), relaxed_key(args, slots)))
                            .copied()
                    }),
            };
            if let Some(i) = again {
                return Outcome::Repeat(i);
            }
        }
        Outcome::Miss(self.miss(tool, args))
    }

    fn keyed(&mut self, tool: &str, args: &Value) -> Option<usize> {
        let sets = self.slot_sets.get(tool)?;
        let mut best: Option<(usize, (String, Vec<u8>))> = None;
        for slots in sets {
            let k = (tool.to_owned(), relaxed_key(args, slots));
            if let Some(q) = self.by_key.get_mut(&k) {
                while q.front().is_some_and(|&i| self.consumed[i]) {
                    q.pop_front();
                }
                if let Some(&i) = q.front()
                    && best.as_ref().is_none_or(|(b, _)| i < *b)
                {
                    best = Some((i, k));
                }
            }
        }
        let (i, k) = best?;
        if let Some(q) = self.by_key.get_mut(&k) {
            q.pop_front();
        }
        Some(i)
    }

    fn next_if(&self, ok: impl Fn(&Entry) -> bool) -> Option<usize> {
        let e = self.entries.get(self.next)?;
        ok(e).then_some(self.next)
    }

    fn miss(&self, tool: &str, args: &Value) -> Miss {
        let Some(candidates) = self.all_of_tool.get(tool) else {
            let mut tools: Vec<&str> = self.all_of_tool.keys().map(String::as_str).collect();
            tools.sort();
            return Miss {
                reason: format!(
                    "no recorded call of tool {tool:?} (recorded: {})",
                    tools.join(", ")
                ),
                nearest_step: None,
                differing_paths: Vec::new(),
            };
        };
        let rules = RuleSet::new(&[]);
        let mut best: Option<(usize, Vec<Difference>, bool)> = None;
        for &i in candidates.iter().take(NEAREST_SCAN) {
            let differences = diff(&self.entries[i].args, args, &rules);
            let fresh = !self.consumed[i];
            let better = match &best {
                None => true,
                Some((_, d, f)) => (differences.len(), !fresh) < (d.len(), !*f),
            };
            if better {
                best = Some((i, differences, fresh));
            }
        }
        let (i, differences, fresh) = best.unwrap_or((candidates[0], Vec::new(), false));
        let reason = if differences.is_empty() && !fresh {
            format!("every recorded call of {tool:?} with these arguments was already served")
        } else if differences.is_empty() {
            match self.mode {
                Mode::Ordered | Mode::Strict => format!(
                    "out of order: the next recorded call is {}",
                    self.ids
                        .get(self.next)
                        .map_or("none (all served)", String::as_str)
                ),
                _ => format!("no recorded call of {tool:?} matches"),
            }
        } else {
            format!("no recorded call of {tool:?} with these arguments")
        };
        Miss {
            reason,
            nearest_step: Some(self.ids[i].clone()),
            differing_paths: differences,
        }
    }
}

/// Whether a recorded result still holds placeholders or a truncation
/// marker: served as recorded, with a warning.
pub(crate) fn lossy_result(step: &ScenarioStep) -> bool {
    let mut placeholder = false;
    if let Some(r) = &step.expect.result {
        walk_strings(r, &mut |s| placeholder |= s.contains("[REDACTED"));
    }
    placeholder || step.truncated
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn step(id: &str, tool: &str, args: Value) -> ScenarioStep {
        ScenarioStep {
            id: id.into(),
            tool: tool.into(),
            args,
            ..ScenarioStep::default()
        }
    }

    fn hit(o: Outcome) -> Option<usize> {
        match o {
            Outcome::Hit(i) => Some(i),
            _ => None,
        }
    }

    #[test]
    fn keyed_is_fifo_among_duplicates_and_misses_name_the_nearest_step() {
        let steps = [
            step("s1", "get-sum", json!({"a": 1, "b": 2})),
            step("s2", "echo", json!({"message": "hi"})),
            step("s3", "get-sum", json!({"a": 1, "b": 2})),
            step("s4", "get-sum", json!({"a": 5, "b": 2})),
        ];
        let refs: Vec<&ScenarioStep> = steps.iter().collect();
        let mut m = Matcher::new(&refs, Mode::Keyed, false);
        assert_eq!(hit(m.call("get-sum", &json!({"b": 2, "a": 1}))), Some(0));
        assert_eq!(hit(m.call("get-sum", &json!({"a": 1, "b": 2}))), Some(2));
        let Outcome::Miss(miss) = m.call("get-sum", &json!({"a": 5, "b": 3})) else {
            panic!("expected a miss")
        };
        assert_eq!(miss.nearest_step.as_deref(), Some("s4"));
        assert_eq!(miss.differing_paths.len(), 1);
        assert_eq!(miss.differing_paths[0].path, "/b");
        // A third identical call: all served → miss, unless repeats=last.
        assert!(matches!(
            m.call("get-sum", &json!({"a": 1, "b": 2})),
            Outcome::Miss(_)
        ));
        let mut again = Matcher::new(&refs, Mode::Keyed, true);
        again.call("get-sum", &json!({"a": 1, "b": 2}));
        again.call("get-sum", &json!({"a": 1, "b": 2}));
        assert!(matches!(
            again.call("get-sum", &json!({"a": 1, "b": 2})),
            Outcome::Repeat(2)
        ));
        let Outcome::Miss(unknown) = m.call("nope", &json!({})) else {
            panic!("miss")
        };
        assert!(
            unknown.reason.contains("echo, get-sum"),
            "{}",
            unknown.reason
        );
        assert_eq!(m.unused(), ["s2", "s4"]);
    }

    #[test]
    fn volatile_and_template_slots_are_left_out_of_the_key() {
        let mut v = step("s1", "search", json!({"q": "x", "at": "2026-01-01"}));
        v.volatile_args = vec!["/at".into()];
        let b = step(
            "s2",
            "get_item",
            json!({"id": "${step:s1:/id}", "full": true}),
        );
        let steps = [v, b];
        let refs: Vec<&ScenarioStep> = steps.iter().collect();
        let mut m = Matcher::new(&refs, Mode::Keyed, false);
        assert_eq!(
            hit(m.call("get_item", &json!({"id": "item-9", "full": true}))),
            Some(1)
        );
        assert_eq!(
            hit(m.call("search", &json!({"q": "x", "at": "2027-05-05"}))),
            Some(0)
        );
    }

    #[test]
    fn ordered_strict_and_tool_modes() {
        let steps = [
            step("s1", "a", json!({"n": 1})),
            step("s2", "b", json!({"n": 2})),
            step("s3", "a", json!({"n": 3})),
        ];
        let refs: Vec<&ScenarioStep> = steps.iter().collect();
        let mut ordered = Matcher::new(&refs, Mode::Ordered, false);
        let Outcome::Miss(m) = ordered.call("b", &json!({"n": 2})) else {
            panic!("out of order must miss")
        };
        assert!(m.reason.contains("out of order"), "{}", m.reason);
        assert_eq!(hit(ordered.call("a", &json!({"n": 1}))), Some(0));
        assert_eq!(hit(ordered.call("b", &json!({"n": 2}))), Some(1));
        let mut strict = Matcher::new(&refs, Mode::Strict, false);
        assert_eq!(hit(strict.call("a", &json!({"n": 1}))), Some(0));
        assert!(matches!(
            strict.call("b", &json!({"n": 2.0})),
            Outcome::Miss(_)
        ));
        let mut tool = Matcher::new(&refs, Mode::Tool, false);
        assert_eq!(hit(tool.call("a", &json!({"anything": 1}))), Some(0));
        assert_eq!(hit(tool.call("a", &json!({}))), Some(2));
        assert!(matches!(tool.call("a", &json!({})), Outcome::Miss(_)));
    }

    /// 10,000 recorded calls: each lookup is a hash probe. Counting work,
    /// not time: the index holds one queue per distinct key and a call
    /// consumes from the front of its own.
    #[test]
    fn a_ten_thousand_step_recording_is_indexed_not_scanned() {
        let steps: Vec<ScenarioStep> = (0..10_000)
            .map(|i| step(&format!("s{i}"), "get", json!({"id": i})))
            .collect();
        let refs: Vec<&ScenarioStep> = steps.iter().collect();
        let mut m = Matcher::new(&refs, Mode::Keyed, false);
        assert_eq!(m.by_key.len(), 10_000);
        assert_eq!(m.slot_sets.get("get").map(Vec::len), Some(1));
        for i in (0..10_000).rev() {
            assert_eq!(hit(m.call("get", &json!({"id": i}))), Some(i));
        }
    }
}
