//! `bir scenario param`: a recorded argument of a step turned into a named
//! parameter of the scenario.
//!
//! The argument becomes `${param:NAME}`. A value that was redacted when
//! recorded cannot be replayed as it was, so it must be bound to where it
//! comes from (`env:VAR`, `arg`, `prompt`) and can never be the default.
//! The parameter's seals (`trust::seals_for`) say which environment
//! variable this machine's user allowed at that place, so a scenario
//! edited elsewhere reads nothing from the environment without
//! `--trust-scenario`.

use serde_json::Value;

use super::scenario::{Param, Scenario};
use super::{template, trust};
use crate::error::Error;

/// One `bir scenario param` edit, as its arguments say it.
pub(crate) struct Parameterize<'a> {
    /// The step's id.
    pub step: &'a str,
    /// A JSON Pointer into the step's arguments.
    pub path: &'a str,
    /// The parameter's name.
    pub name: &'a str,
    /// `--from`: `env:VAR`, `arg` or `prompt`.
    pub from: Option<&'a str>,
    /// `--keep-default`: the recorded value stays as the default (never a
    /// redacted one).
    pub keep_default: bool,
}

/// Makes the argument `edit` names a parameter of `s`. A step or argument
/// that is not there, a redacted value without `--from`, or a `--from`
/// that is none of the three forms is a usage error, and `s` is unchanged.
pub(crate) fn parameterize(s: &mut Scenario, edit: &Parameterize<'_>) -> Result<(), Error> {
    let step = s.step_mut(edit.step)?;
    let slot = step.args.pointer_mut(edit.path).ok_or_else(|| {
        Error::usage(format!(
            "step {} has no argument at {}",
            edit.step, edit.path
        ))
    })?;
    let recorded = slot.clone();
    let at = trust::place(&step.server, &step.tool, edit.path);
    let redacted = template::has_placeholder(&recorded);
    if redacted && edit.from.is_none() {
        return Err(Error::usage(format!(
            "the value at {} was redacted when recorded: bind it with --from env:VAR (or arg, prompt)",
            edit.path
        )));
    }
    if let Some(from) = edit.from
        && !(from.starts_with("env:") && from.len() > 4 || from == "arg" || from == "prompt")
    {
        return Err(Error::usage(format!(
            "--from {from:?} is not env:VAR, arg or prompt"
        )));
    }
    *slot = Value::String(format!("${{param:{}}}", edit.name));
    step.redacted = template::has_placeholder(&step.args);
    let default = (edit.keep_default && !redacted).then_some(recorded);
    let seals = trust::seals_for(s.params.get(edit.name), edit.name, edit.from, &at);
    s.params.insert(
        edit.name.to_owned(),
        Param {
            default,
            from: edit.from.map(str::to_owned),
            redacted,
            seals,
        },
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn scenario() -> Scenario {
        Scenario::parse(
            &json!({
                "schema": "bir/scenario@1",
                "servers": {"srv": {"tools": [{"name": "get"}], "toolsDigest": "x"}},
                "steps": [{"id": "s1", "server": "srv", "tool": "get",
                           "args": {"q": "rust", "token": "[REDACTED:secret]"}}]
            })
            .to_string(),
        )
        .expect("a scenario")
    }

    fn edit<'a>(path: &'a str, name: &'a str, from: Option<&'a str>) -> Parameterize<'a> {
        Parameterize {
            step: "s1",
            path,
            name,
            from,
            keep_default: true,
        }
    }

    #[test]
    fn a_recorded_argument_becomes_a_parameter_and_a_redacted_one_needs_its_source() {
        let mut s = scenario();
        parameterize(&mut s, &edit("/q", "query", None)).expect("plain value");
        assert_eq!(s.steps[0].args["q"], json!("${param:query}"));
        assert_eq!(s.params["query"].default, Some(json!("rust")));

        let before = serde_json::to_value(&s).expect("json");
        let refused = parameterize(&mut s, &edit("/token", "tok", None));
        assert!(refused.is_err(), "a redacted value needs --from");
        let bad_from = parameterize(&mut s, &edit("/token", "tok", Some("file:x")));
        assert!(bad_from.is_err(), "--from is env:VAR, arg or prompt");
        assert_eq!(serde_json::to_value(&s).expect("json"), before, "unchanged");

        parameterize(&mut s, &edit("/token", "tok", Some("env:API_TOKEN"))).expect("bound");
        let tok = &s.params["tok"];
        assert!(tok.redacted);
        assert_eq!(tok.default, None, "a redacted value is never the default");
        assert_eq!(tok.from.as_deref(), Some("env:API_TOKEN"));
    }
}
