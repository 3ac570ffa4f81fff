//! What `bir verify` does with a scenario past running it: the age check
//! against `--max-age`, `--update` (diverged steps take the live result as
//! their expectation), `--calibrate N --write` (the paths that varied
//! between runs become ignore rules), and the one exit status of several
//! sources.

use std::time::Duration;

use serde_json::Value;

use super::runner::{Report, Status};
use super::scenario::{CompareRule, Scenario};
use crate::error::{Error, ExitStatus};

/// `--max-age`: a scenario older than `max_age` is reported stale, an
/// error (exit 5) when `expired_error` (`--expired error`).
pub(crate) fn mark_stale(
    report: &mut Report,
    s: &Scenario,
    max_age: Option<Duration>,
    expired_error: bool,
) {
    if let (Some(max), Some(age)) = (max_age, super::age_secs(s))
        && age > max.as_secs() as i64
    {
        report.stale = Some(format!(
            "{} days old (--max-age {} days)",
            age / 86_400,
            max.as_secs() / 86_400
        ));
        report.stale_is_error |= expired_error;
    }
}

/// `--update`: diverged steps take the live result as their expectation;
/// truncated ones are refused (their whole result was never stored).
pub(crate) fn update(s: &mut Scenario, report: &Report, all: bool) -> (usize, Vec<String>) {
    let mut updated = 0;
    let mut refused = Vec::new();
    for sr in &report.steps {
        if !matches!(sr.status, Status::Diverged | Status::ErrorChanged) {
            continue;
        }
        let Ok(step) = s.step_mut(&sr.id) else {
            continue;
        };
        if step.truncated {
            refused.push(sr.id.clone());
            continue;
        }
        if let Some(r) = &sr.live_result {
            step.expect.result = Some(r.clone());
            step.expect.error = None;
            step.expect.is_error = r.get("isError").and_then(Value::as_bool).unwrap_or(false);
            updated += 1;
        } else if let Some(e) = &sr.live_error {
            step.expect.error = Some(e.clone());
            step.expect.result = None;
            updated += 1;
        }
    }
    let all_pass = report.steps.iter().all(|st| !st.status.is_divergence());
    if (updated > 0 || all && all_pass)
        && let Some(src) = &mut s.source
    {
        src.verified_at = Some(crate::time::rfc3339(std::time::SystemTime::now()));
    }
    (updated, refused)
}

/// The more urgent of two exit statuses (the priority docs/replay.md gives).
pub(crate) fn worse(a: ExitStatus, b: ExitStatus) -> ExitStatus {
    let rank = |s: ExitStatus| match s {
        ExitStatus::Usage => 6,
        ExitStatus::Environment => 5,
        ExitStatus::Failure => 4,
        ExitStatus::Stale => 3,
        ExitStatus::Incomplete => 2,
        ExitStatus::Success => 1,
    };
    if rank(b) > rank(a) { b } else { a }
}

/// `--calibrate N`: each (step id, result path) that varied between the
/// runs, a proposed ignore rule.
pub(crate) fn calibration_proposals(report: &Report) -> Vec<(String, String)> {
    report
        .steps
        .iter()
        .flat_map(|st| st.varying.iter().map(move |p| (st.id.clone(), p.clone())))
        .collect()
}

/// `--calibrate N --write`: the proposed rules added to their steps as
/// `ignore` rules (a rule the step has already is not added twice).
pub(crate) fn add_ignore_rules(
    s: &mut Scenario,
    proposals: &[(String, String)],
) -> Result<(), Error> {
    for (step, path) in proposals {
        let st = s.step_mut(step)?;
        let rule = CompareRule {
            path: path.clone(),
            kind: "ignore".to_owned(),
        };
        if !st.ignore.contains(&rule) {
            st.ignore.push(rule);
        }
    }
    Ok(())
}
