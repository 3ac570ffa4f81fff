//! `bir runs` without a subcommand: the runs of the store, newest first,
//! filtered, as a table or as JSON lines.
//!
//! Built on the listing index (`record::index`, which also decides which
//! runs a filter keeps: `RunFilter`), never on the journals themselves: a
//! store of thousands of runs is listed from one small file plus a `stat`
//! per journal.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use super::{Screen, clip, parse_age, short_id};
use crate::cmd::runs::RunsCmd;
use crate::error::{Context, Error, ExitStatus};
use crate::output::{escape, out};
use crate::record::index::{Origins, RunFilter, RunSummary};
use crate::record::model::TokenUsage;
use crate::record::store::Store;
use crate::time::parse_rfc3339;

/// The filter `cmd` asks for, its times read against `now`.
fn filter_of(cmd: &RunsCmd, now: SystemTime) -> Result<RunFilter, Error> {
    let cwd = match (&cmd.cwd, cmd.here) {
        (Some(_), true) => return Err(Error::usage("give --cwd or --here, not both")),
        (Some(dir), false) => Some(absolute(Path::new(dir))?),
        (None, true) => Some(absolute(Path::new("."))?),
        (None, false) => None,
    };
    if let Some(tier) = &cmd.tier
        && !matches!(tier.as_str(), "standalone" | "bound")
    {
        return Err(Error::usage(format!(
            "`{tier}` is not a tier (standalone or bound)"
        )));
    }
    let origins = match (&cmd.origin, cmd.all) {
        (Some(_), true) => return Err(Error::usage("give --all or --origin, not both")),
        (Some(word), false) => Origins::parse(word).ok_or_else(|| {
            Error::usage(format!(
                "`{word}` is not an origin (agent, replay, verify or mock)"
            ))
        })?,
        (None, true) => Origins::All,
        (None, false) => Origins::Agents,
    };
    Ok(RunFilter {
        origins,
        server: cmd.server.clone(),
        tool: cmd.tool.clone(),
        failed: cmd.failed,
        since: cmd.since.as_deref().map(|s| when(s, now)).transpose()?,
        until: cmd.until.as_deref().map(|s| when(s, now)).transpose()?,
        tier: cmd.tier.clone(),
        cwd,
    })
}

/// `dir` made absolute, through its symlinks when it exists (the cwd a
/// run records is the process's, which has none).
fn absolute(dir: &Path) -> Result<PathBuf, Error> {
    if let Ok(real) = std::fs::canonicalize(dir) {
        return Ok(real);
    }
    if dir.is_absolute() {
        return Ok(dir.to_owned());
    }
    let here = std::env::current_dir().context(|| "cannot read the current directory".into())?;
    Ok(here.join(dir))
}

/// A point in time given as an age before `now` (`2h`, `3d`) or as an
/// RFC 3339 date (`2026-12-01T10:00:00Z`, or a day, `2026-12-01`, meaning
/// its midnight UTC), as Unix seconds.
pub(super) fn when(s: &str, now: SystemTime) -> Result<i64, Error> {
    let t = s.trim();
    if let Some(secs) = parse_rfc3339(t).or_else(|| {
        (t.len() == 10)
            .then(|| parse_rfc3339(&format!("{t}T00:00:00Z")))
            .flatten()
    }) {
        return Ok(secs);
    }
    let age = parse_age(t).map_err(|_| {
        Error::usage(format!(
            "`{t}` is neither an age like 2h or 3d nor a date like 2026-12-01 or 2026-12-01T10:00:00Z"
        ))
    })?;
    let now = now
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    Ok(now.saturating_sub(age.as_secs() as i64))
}

/// Lists the runs `cmd` asks for.
pub(super) fn list(store: &Store, cmd: &RunsCmd) -> Result<ExitStatus, Error> {
    let filter = filter_of(cmd, SystemTime::now())?;
    // Never freed: the process ends once the listing is printed, and
    // freeing ten thousand summaries one string at a time costs more than
    // printing them.
    let runs = std::mem::ManuallyDrop::new(
        store
            .summaries()
            .context(|| format!("cannot read {}", store.dir().display()))?,
    );
    let total = runs.len();
    let kept: Vec<&RunSummary> = runs.iter().filter(|s| filter.keeps(s)).collect();
    if cmd.json {
        let mut lines = String::new();
        for s in kept.iter().take(cmd.limit) {
            if let Ok(line) = serde_json::to_string(&json_line(s)) {
                lines.push_str(&line);
                lines.push('\n');
            }
        }
        // No run: no line at all (not an empty one a script would parse).
        if !lines.is_empty() {
            out(lines.trim_end());
        }
        return Ok(ExitStatus::Success);
    }
    if total == 0 {
        out(&format!(
            "No runs yet in {}.\nWrap an MCP server with bir-proxy (see the README) and use it: each proxy records a run.",
            store.dir().display()
        ));
        return Ok(ExitStatus::Success);
    }
    if kept.is_empty() {
        let hidden = runs.iter().filter(|s| !s.is_agent_session()).count();
        out(&format!("No run of the {total} in the store matches."));
        if filter.origins == Origins::Agents && hidden > 0 {
            out(&format!(
                "({hidden} made by bir replay, verify or mock are hidden: bir runs --all)"
            ));
        }
        return Ok(ExitStatus::Success);
    }
    // The table is for a terminal and goes through a `Screen` (JSON lines
    // are data: serde escapes control characters in them).
    let mut table = Screen::default();
    table.line(format_args!(
        "{:<14} {:<19} {:<10} {:<22} {:>5} {:>6} {:>7} {:<15} PROMPT",
        "RUN", "STARTED (UTC)", "TIER", "SERVERS", "CALLS", "ERRORS", "TOKENS", "STATE"
    ));
    for s in kept.iter().take(cmd.limit) {
        let started = if s.started_at.is_empty() {
            "?"
        } else {
            &s.started_at
        };
        let row = format!(
            "{:<14} {:<19} {:<10} {:<22} {:>5} {:>6} {:>7} {:<15} {}",
            short_id(&s.id),
            started.get(..19).unwrap_or(started).replace('T', " "),
            if s.tier.is_empty() { "?" } else { &s.tier },
            clip(&escape(&s.servers.join(",")), 22),
            s.tool_calls,
            s.errors,
            s.tokens.map(|u| short_count(u.total())).unwrap_or_default(),
            s.state(),
            s.prompt
                .as_deref()
                .map(|p| clip(&escape(&p.trim().replace('\n', " ⏎ ")), 48))
                .or_else(|| s
                    .made_by
                    .as_deref()
                    .map(|m| clip(&escape(&format!("({m})")), 48)))
                .unwrap_or_default()
        );
        table.line(row.trim_end());
    }
    if kept.len() > cmd.limit {
        table.line(format_args!("… {} more (--limit)", kept.len() - cmd.limit));
    }
    table.print();
    Ok(ExitStatus::Success)
}

/// A token count in at most 7 characters: `950`, `12.3k`, `4.56M`.
fn short_count(n: u64) -> String {
    match n {
        0..=9_999 => n.to_string(),
        // Bounds where the rounding would carry into another digit.
        10_000..=999_949 => format!("{:.1}k", n as f64 / 1e3),
        999_950..=999_994_999 => format!("{:.2}M", n as f64 / 1e6),
        _ => format!("{:.2}G", n as f64 / 1e9),
    }
}

/// One run as a JSON line: the fields `bir runs --json` has always had,
/// then `cwd` and `tools`, and `tokens` where the host reported them.
///
/// Serialised straight from the summary (no `serde_json::Value` built per
/// run: a map per run and per tool, and a string per number with the
/// crate's `arbitrary_precision`, were most of a listing's CPU). The keys
/// are in alphabetical order, the order a `Value` map wrote them in, so
/// the bytes are the same.
fn json_line(s: &RunSummary) -> JsonLine<'_> {
    fn or_unknown(v: &str) -> &str {
        if v.is_empty() { "?" } else { v }
    }
    JsonLine {
        cwd: &s.cwd,
        errors: s.errors,
        id: &s.id,
        lossy: s.lossy,
        made_by: s.made_by.as_deref(),
        origin: s.origin.map(|o| o.word()),
        prompt: s.prompt.as_deref(),
        servers: s.servers.join(","),
        started_at: or_unknown(&s.started_at),
        state: s.state(),
        tier: or_unknown(&s.tier),
        tokens: s.tokens.as_ref(),
        tool_calls: s.tool_calls,
        tools: s
            .tools
            .iter()
            .map(|t| JsonTool {
                calls: t.calls,
                errors: t.errors,
                server: &t.server,
                tool: &t.tool,
            })
            .collect(),
    }
}

/// [`json_line`]'s shape; the fields in the byte order of their JSON
/// keys (`tokens` before `toolCalls`).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonLine<'a> {
    cwd: &'a str,
    errors: u64,
    id: &'a str,
    lossy: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    made_by: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    origin: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt: Option<&'a str>,
    servers: String,
    started_at: &'a str,
    state: String,
    tier: &'a str,
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "sorted")]
    tokens: Option<&'a TokenUsage>,
    tool_calls: u64,
    tools: Vec<JsonTool<'a>>,
}

/// One tool of [`JsonLine`], the fields in alphabetical order.
#[derive(Serialize)]
struct JsonTool<'a> {
    calls: u64,
    errors: u64,
    server: &'a str,
    tool: &'a str,
}

/// Token counts with their keys sorted, as a `Value` map writes them (only
/// for the runs that have counts).
fn sorted<S: serde::Serializer>(u: &Option<&TokenUsage>, ser: S) -> Result<S::Ok, S::Error> {
    serde_json::to_value(u)
        .map_err(serde::ser::Error::custom)?
        .serialize(ser)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn token_counts_fit_their_column() {
        assert_eq!(short_count(950), "950");
        assert_eq!(short_count(9_999), "9999");
        assert_eq!(short_count(32_279), "32.3k");
        assert_eq!(short_count(4_560_000), "4.56M");
        assert_eq!(short_count(999_999), "1.00M");
        for n in [
            0,
            10_000,
            999_949,
            999_999,
            1_000_000,
            999_999_999,
            1_000_000_000,
        ] {
            assert!(short_count(n).len() <= 7, "{n}: {}", short_count(n));
        }
    }

    #[test]
    fn when_reads_ages_and_dates() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000_000);
        assert_eq!(when("2h", now).ok(), Some(1_000_000 - 7200));
        assert_eq!(when("1970-01-02", now).ok(), Some(86_400));
        assert_eq!(when("1970-01-01T00:01:00Z", now).ok(), Some(60));
        assert!(when("yesterday", now).is_err());
    }

    /// A run's line as a `serde_json::Value` map wrote it (keys sorted):
    /// the bytes `bir runs --json` has always printed.
    fn as_a_value_map(s: &RunSummary) -> String {
        let or_unknown = |v: &str| if v.is_empty() { "?" } else { v }.to_owned();
        let mut line = serde_json::json!({
            "id": s.id, "startedAt": or_unknown(&s.started_at), "tier": or_unknown(&s.tier),
            "servers": s.servers.join(","), "toolCalls": s.tool_calls, "errors": s.errors,
            "lossy": s.lossy, "state": s.state(), "cwd": s.cwd,
            "tools": s.tools.iter().map(|t| serde_json::json!(
                {"server": t.server, "tool": t.tool, "calls": t.calls, "errors": t.errors}))
                .collect::<Vec<_>>(),
        });
        if let Some(p) = &s.prompt {
            line["prompt"] = serde_json::json!(p);
        }
        if let Some(m) = &s.made_by {
            line["madeBy"] = serde_json::json!(m);
        }
        if let Some(o) = s.origin {
            line["origin"] = serde_json::json!(o.word());
        }
        if let Some(u) = &s.tokens {
            line["tokens"] = serde_json::json!(u);
        }
        line.to_string()
    }

    #[test]
    fn a_json_line_has_the_bytes_a_value_map_had() {
        use crate::record::index::ToolUse;
        use crate::record::model::MadeBy;
        let full = RunSummary {
            id: "run_1".into(),
            started_at: "2026-12-01T00:00:00.000Z".into(),
            tier: "bound".into(),
            servers: vec!["a".into(), "b".into()],
            cwd: "/home/u/\"quoted\"\u{7}".into(),
            tools: vec![ToolUse {
                server: "a".into(),
                tool: "echo".into(),
                qualified: None,
                calls: 3,
                errors: 1,
            }],
            tool_calls: 3,
            errors: 1,
            lossy: true,
            finished: true,
            prompt: Some("fix the bug\nnow".into()),
            made_by: Some("bir-replay of run_0".into()),
            origin: Some(MadeBy::Replay),
            tokens: Some(TokenUsage {
                input: 10,
                output: 2,
                cache_read: 4,
                cache_write: 0,
            }),
            ..RunSummary::default()
        };
        let bare = RunSummary::default();
        for s in [&full, &bare] {
            let line = serde_json::to_string(&json_line(s)).expect("a line");
            assert_eq!(line, as_a_value_map(s));
        }
    }
}
