//! `bir investigate` for people: one section per kind of finding, most
//! urgent first (is the record whole, what failed, what changed, what
//! looped, what was slow). Every recorded text is escaped (control
//! characters shown, never sent to the terminal) and shortened to a
//! preview; `--json` has it whole.

use std::fmt::Write as _;

use crate::investigate::Findings;
use crate::output::escape;

/// How much of a recorded text (an error, the model's context, a prompt,
/// arguments) a section shows.
const PREVIEW_CHARS: usize = 240;

/// At most `max` characters of `s` on one line, escaped.
fn preview(s: &str, max: usize) -> String {
    let flat = s.trim().replace('\n', " ⏎ ");
    let cut = match flat.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &flat[..at]),
        None => flat,
    };
    escape(&cut)
}

pub(super) fn text(f: &Findings) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "{} · {} · {} · {} tool call(s) · compared with {} earlier run(s)",
        escape(&f.run),
        escape(&f.tier),
        f.state,
        f.tool_calls,
        f.history_runs
    );
    if f.is_clean() {
        let _ = writeln!(
            t,
            "\nNothing stands out: no failed call, no loop, no unusually slow step, no server whose tools changed, and the record is complete."
        );
        return t;
    }
    if !f.gaps.is_empty() {
        let _ = writeln!(t, "\nThe record is incomplete:");
        for g in &f.gaps {
            let _ = writeln!(t, "  - {}: {}", g.kind, escape(&g.detail));
        }
    }
    if !f.failures.is_empty() {
        let _ = writeln!(t, "\nFailed calls ({}):", f.failures.len());
        for fail in &f.failures {
            let _ = writeln!(
                t,
                "  step {} · {} · {}",
                fail.step,
                escape(&fail.tool),
                escape(&fail.started_at)
            );
            if let Some(p) = &fail.prompt {
                let _ = writeln!(t, "    prompt:  {}", preview(p, PREVIEW_CHARS));
            }
            if !fail.lead_up.is_empty() {
                let before: Vec<String> = fail
                    .lead_up
                    .iter()
                    .map(|l| {
                        let mark = if l.failed { " (failed)" } else { "" };
                        format!("{} {}{mark}", l.step, escape(&l.tool))
                    })
                    .collect();
                let _ = writeln!(t, "    before:  {}", before.join(" → "));
            }
            if let Some(c) = &fail.context {
                let _ = writeln!(t, "    model:   {}", preview(c, PREVIEW_CHARS));
            }
            if let Some(input) = &fail.input {
                let _ = writeln!(
                    t,
                    "    args:    {}",
                    preview(&input.to_string(), PREVIEW_CHARS)
                );
            }
            let _ = writeln!(t, "    error:   {}", preview(&fail.error, PREVIEW_CHARS));
        }
    }
    if !f.server_changes.is_empty() {
        let _ = writeln!(t, "\nServers whose tools changed:");
        for c in &f.server_changes {
            let since = match &c.since_run {
                Some(r) => format!("since {}", escape(r)),
                None => "during this run".into(),
            };
            let _ = writeln!(t, "  {} ({since}):", escape(&c.server));
            for (label, names) in [
                ("added", &c.added),
                ("removed", &c.removed),
                ("changed", &c.changed),
            ] {
                if !names.is_empty() {
                    let names: Vec<String> = names.iter().map(|n| escape(n)).collect();
                    let _ = writeln!(t, "    {label}: {}", names.join(", "));
                }
            }
            if !c.changed.is_empty() {
                let _ = writeln!(
                    t,
                    "    a tool that keeps its name but changes its definition is how a server slips new instructions past an approval: compare the definitions (`bir runs export`)"
                );
            }
        }
    }
    if !f.loops.is_empty() {
        let _ = writeln!(t, "\nThe same call again and again:");
        for l in &f.loops {
            let args = l
                .input
                .as_ref()
                .map(|v| format!(" {}", preview(&v.to_string(), 80)))
                .unwrap_or_default();
            let failed = if l.failed > 0 {
                format!(", {} failed", l.failed)
            } else {
                String::new()
            };
            let _ = writeln!(
                t,
                "  {}{args}: {} calls ({} in a row{failed}), steps {}",
                escape(&l.tool),
                l.calls,
                l.in_a_row,
                l.steps.join(", ")
            );
        }
    }
    if !f.slow.is_empty() {
        let _ = writeln!(t, "\nSlower than usual:");
        for s in &f.slow {
            let _ = writeln!(
                t,
                "  step {} · {} · {:.0} ms, usually {:.0} ms (median of {} earlier call(s))",
                s.step,
                escape(&s.tool),
                s.duration_ms,
                s.usual_ms,
                s.samples
            );
        }
    }
    let _ = writeln!(t, "\nThe whole run: bir runs show {}", escape(&f.run));
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_preview_is_one_escaped_line_of_bounded_length() {
        assert_eq!(preview("a\nb", 10), "a ⏎ b");
        assert_eq!(preview("\u{1b}]0;x", 10), "\\u{1b}]0;x");
        assert_eq!(preview("abcdef", 3), "abc…");
    }
}
