//! `bir runs`: list, show, export and remove recorded runs.
//!
//! Everything printed here comes from the local store, which holds redacted
//! data only; recorded text is still escaped before it reaches a terminal
//! (control characters from a tool's output must not drive the terminal).

use argh::FromArgs;
use std::time::Duration;

use serde_json::Value;

use crate::error::{self, Context, Error, ExitStatus};
use crate::output::{escape, out};
use crate::record::calls::Call;
use crate::record::export as record_export;
use crate::record::layout::{self, Row};
use crate::record::model::{ServerSnapshot, TokenUsage};
use crate::record::prices::{format_usd, user_prices as prices};
use crate::record::store::{LoadedRun, Store};
use crate::service::read;

mod follow;
mod list;
mod otlp_export;
mod turns;

/// List, show, export and remove recorded runs.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "runs")]
pub(crate) struct RunsCmd {
    #[argh(subcommand)]
    pub action: Option<RunsAction>,

    /// how many runs to list (default 20)
    #[argh(option, default = "20")]
    pub limit: usize,

    /// list as JSON lines instead of a table
    #[argh(switch)]
    pub json: bool,

    /// only runs that recorded this server
    #[argh(option)]
    pub server: Option<String>,

    /// only runs that called this tool (its name, or the host's
    /// `mcp__server__tool`)
    #[argh(option)]
    pub tool: Option<String>,

    /// only runs with a failed call (with --tool: a failed call to it)
    #[argh(switch)]
    pub failed: bool,

    /// only runs started since then: an age (2h, 3d) or an RFC 3339 date
    #[argh(option)]
    pub since: Option<String>,

    /// only runs started before then: an age (2h, 3d) or an RFC 3339 date
    #[argh(option)]
    pub until: Option<String>,

    /// only runs of this tier (standalone or bound)
    #[argh(option)]
    pub tier: Option<String>,

    /// only runs recorded in this directory or below it
    #[argh(option)]
    pub cwd: Option<String>,

    /// only runs recorded in the current directory or below it
    #[argh(switch)]
    pub here: bool,

    /// list the runs on the recording service you are logged in to
    #[argh(switch)]
    pub remote: bool,

    /// also list the runs bir's own replay, verify and mock made (hidden
    /// by default)
    #[argh(switch)]
    pub all: bool,

    /// only runs of this origin: agent (the agents' sessions and proxied
    /// calls), replay, verify or mock
    #[argh(option)]
    pub origin: Option<String>,
}

#[derive(FromArgs, Debug)]
#[argh(subcommand)]
pub(crate) enum RunsAction {
    Show(ShowCmd),
    Export(ExportCmd),
    Rm(RmCmd),
}

/// Draw a run as a timeline of its steps.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "show")]
pub(crate) struct ShowCmd {
    /// the run: its id, a unique prefix of it, or `latest`
    #[argh(positional, default = "String::from(\"latest\")")]
    pub run: String,

    /// print whole arguments and results instead of one-line previews
    #[argh(switch)]
    pub full: bool,

    /// on a run still being recorded, print its steps as they arrive and
    /// stop when it ends
    #[argh(switch)]
    pub follow: bool,

    /// fetch the run from the recording service (its whole id, or `latest`)
    #[argh(switch)]
    pub remote: bool,
}

/// Write a run as JSON (one document) or JSONL (its records) to stdout,
/// or send runs to OpenTelemetry (--otlp).
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "export")]
pub(crate) struct ExportCmd {
    /// the run: its id, a unique prefix of it, or `latest`
    #[argh(positional)]
    pub run: Option<String>,

    /// json (default) or jsonl
    #[argh(option, default = "String::from(\"json\")")]
    pub format: String,

    /// fetch the run from the recording service (its whole id, or `latest`)
    #[argh(switch)]
    pub remote: bool,

    /// send to the OpenTelemetry receiver (BIR_OTLP_ENDPOINT, or OTEL_* with BIR_OTLP=1) instead of printing: the run named, or with --since every run not exported yet
    #[argh(switch)]
    pub otlp: bool,

    /// with --otlp: the runs started within this age (e.g. 7d, 12h) that were not exported yet
    #[argh(option)]
    pub since: Option<String>,
}

/// Remove runs by id, by age, or beyond a count.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "rm")]
pub(crate) struct RmCmd {
    /// runs to remove (ids or unique prefixes)
    #[argh(positional)]
    pub runs: Vec<String>,

    /// remove finished runs older than this (e.g. 7d, 12h, 30m)
    #[argh(option)]
    pub older_than: Option<String>,

    /// keep only the newest N finished runs
    #[argh(option)]
    pub keep: Option<usize>,
}

/// `bir runs` and its subcommands; errors name `bir runs` unless a
/// subcommand names itself.
pub(crate) fn main(cmd: RunsCmd) -> Result<ExitStatus, Error> {
    let store = Store::open_default().context(|| "cannot open the run store".into())?;
    match cmd.action {
        // The recording service's runs, fetched into a scratch store and
        // rendered as local ones (`service::read`).
        None if cmd.remote => {
            read::list(cmd.limit)?.list_with(cmd.json, |store| list::list(store, &cmd))
        }
        Some(RunsAction::Show(s)) if s.remote => show(&read::fetch(&s.run)?.first()?, s.full),
        Some(RunsAction::Export(e)) if e.remote => export(
            &read::fetch(e.run.as_deref().unwrap_or("latest"))?.first()?,
            &e.format,
        )
        .map_err(|err| err.in_command("bir runs export")),
        None => list::list(&store, &cmd),
        Some(RunsAction::Show(s)) if s.follow => follow::follow(&store, &s),
        Some(RunsAction::Show(s)) => show(&store.find(&s.run)?, s.full),
        Some(RunsAction::Export(e)) if e.otlp || e.since.is_some() => {
            otlp_export::export(&store, e.run.as_deref(), e.since.as_deref())
                .map_err(|err| err.in_command("bir runs export"))
        }
        Some(RunsAction::Export(e)) => {
            let Some(wanted) = e.run.as_deref() else {
                return Err(
                    Error::usage("name the run to export (an id, a prefix, or `latest`)")
                        .in_command("bir runs export"),
                );
            };
            export(&store.find(wanted)?, &e.format).map_err(|err| err.in_command("bir runs export"))
        }
        Some(RunsAction::Rm(r)) => rm(&store, r).map_err(|err| err.in_command("bir runs rm")),
    }
}

fn show(run: &LoadedRun, full: bool) -> Result<ExitStatus, Error> {
    let mut t = Screen::default();
    if layout::is_bound(run) {
        turns::render(&mut t, run, full);
        t.print();
        return Ok(ExitStatus::Success);
    }
    write_header(&mut t, run);
    write_columns(&mut t);
    // Calls in the reader's order and numbering; a final answer (rare in
    // a standalone run) where its step index puts it.
    for row in layout::rows(run) {
        match row {
            Row::Call(call) => write_call(&mut t, &call, full),
            Row::Answer => t.line("        final answer"),
        }
    }
    t.line("");
    write_finish(
        &mut t,
        run,
        "interrupted: its proxy ended without finishing the run (killed, or the machine stopped)",
        "not finished: its proxy is still running",
    );
    t.print();
    Ok(ExitStatus::Success)
}

/// The run's id, header (time, tier, host, model, cwd, session, note) and
/// server snapshots, then a blank line.
fn write_header(t: &mut Screen, run: &LoadedRun) {
    t.line(format_args!("{}", run.id()));
    if let Some(h) = &run.header {
        let m = &h.metadata;
        let host = m
            .host
            .as_ref()
            .map(|h| format!("{} {}", h.app, h.version))
            .unwrap_or_else(|| "unknown host".into());
        // A bound run speaks no MCP protocol of its own.
        let protocol = match (&m.protocol_version, m.tier.as_str()) {
            (None, "bound") => String::new(),
            (p, _) => format!(" · protocol {}", p.as_ref().map_or("?", |v| v.as_str())),
        };
        let model = m
            .model
            .as_ref()
            .or(run.finish.as_ref().and_then(|f| f.model.as_ref()))
            .map(|model| format!(" · model {model}"))
            .unwrap_or_default();
        t.line(format_args!(
            "  started {} · tier {} · host {}{protocol}{model}",
            h.started_at.replace('T', " "),
            m.tier,
            host,
        ));
        t.line(format_args!("  cwd {}", m.cwd));
        if let Some(session) = &m.session_id {
            t.line(format_args!("  session {session}"));
        }
        if let Some(note) = &m.note {
            t.line(format_args!("  note: {note}"));
        }
        if let Some(of) = &m.replay_of {
            t.line(format_args!("  made by {} from {of}", m.recorder));
        }
    }
    for s in &run.snapshots {
        write_snapshot(t, s);
    }
    t.line("");
}

/// One server's line: its name and version, how many tools, their digest.
fn write_snapshot(t: &mut Screen, s: &ServerSnapshot) {
    let info = s
        .server_info
        .as_ref()
        .map(|i| {
            let name = i["title"].as_str().or(i["name"].as_str()).unwrap_or("?");
            format!("{name} {}", i["version"].as_str().unwrap_or(""))
        })
        .unwrap_or_else(|| "?".into());
    t.line(format_args!(
        "  server {}: {} · {} tools (digest {})",
        s.server_name,
        info.trim(),
        s.tools.len(),
        s.tools_digest.get(..12).unwrap_or("")
    ));
}

/// The column titles above the calls of a standalone run.
fn write_columns(t: &mut Screen) {
    t.line(format_args!(
        "  {:>4}  {:<12}  {:<36} {:>10}  {:<6} ",
        "STEP", "TIME", "TOOL", "DURATION", "STATUS"
    ));
}

/// The run's last lines: how it finished (calls, errors, time in tools, a
/// bound run's reason, lossy), or that it was `interrupted` (no writer
/// holds its journal) or is still `open`; a torn journal tail.
fn write_finish(t: &mut Screen, run: &LoadedRun, interrupted: &str, open: &str) {
    match &run.finish {
        Some(f) => {
            t.line(format_args!(
                "  finished {} · {} calls · {} errors · {:.1} ms in tools{}{}{}",
                f.finished_at.replace('T', " "),
                f.metrics.tool_calls,
                f.metrics.errors,
                f.metrics.total_tool_ms,
                f.metrics
                    .usage
                    .map(|u| {
                        let cost = prices()
                            .cost(&f.metrics.turn_usage)
                            .map(|c| format!(" · {}", format_usd(c)))
                            .unwrap_or_default();
                        format!(" · tokens {}{cost}", tokens_text(&u))
                    })
                    .unwrap_or_default(),
                f.reason
                    .as_ref()
                    .map(|r| format!(" · {r}"))
                    .unwrap_or_default(),
                if f.lossy {
                    format!(" · LOSSY ({} observations lost)", f.dropped)
                } else {
                    String::new()
                }
            ));
        }
        None if run.interrupted() => t.line(format_args!("  {interrupted}")),
        None => t.line(format_args!("  {open}")),
    }
    if run.torn_bytes > 0 {
        t.line(format_args!(
            "  note: {} bytes at the end of the journal were an interrupted write and were ignored",
            run.torn_bytes
        ));
    }
}

/// Tokens as `bir runs show` says them: all input (cached parts named),
/// then output.
fn tokens_text(u: &TokenUsage) -> String {
    let mut parts = Vec::new();
    if u.cache_read > 0 {
        parts.push(format!("{} cache reads", u.cache_read));
    }
    if u.cache_write > 0 {
        parts.push(format!("{} cache writes", u.cache_write));
    }
    let cached = if parts.is_empty() {
        String::new()
    } else {
        format!(" ({})", parts.join(", "))
    };
    format!("{} in{cached} · {} out", u.input, u.output)
}

/// A bound run's turn's tokens, under its entries: counts, the models
/// that answered, and the cost where the user priced them.
fn write_turn_tokens(t: &mut Screen, run: &LoadedRun, turn: u32) {
    let Some(metrics) = run.finish.as_ref().map(|f| &f.metrics) else {
        return;
    };
    let Some(u) = metrics.turn_tokens(turn) else {
        return;
    };
    let models = metrics.turn_models(turn);
    let models = if models.is_empty() {
        String::new()
    } else {
        format!(" · {}", escape(&models.join(", ")))
    };
    let cost = prices()
        .cost(metrics.turn_usage.iter().filter(|r| r.turn == turn))
        .map(|c| format!(" · {}", format_usd(c)))
        .unwrap_or_default();
    t.line(format_args!(
        "    tokens  {}{models}{cost}",
        tokens_text(&u)
    ));
}

/// One call: its number (see `record::calls`), time, tool, duration and
/// status, then its arguments and result (previews, or whole if `full`).
fn write_call(t: &mut Screen, call: &Call, full: bool) {
    let Some(named) = call.any() else {
        return;
    };
    let (selected, response) = (call.selected, call.response);
    let time = named.started_at.as_str();
    let time = time.get(11..23).unwrap_or(time);
    let status = match response.map(|r| (r.is_error, r.outcome.as_deref())) {
        None => "…",
        Some((_, Some("cancelled"))) => "cancel",
        Some((_, Some("too_large"))) => "large",
        Some((_, Some("upstream_gone"))) => "gone",
        Some((_, Some("session_ended"))) => "ended",
        Some((true, _)) => "ERROR",
        Some((false, _)) => "ok",
    };
    let duration = response
        .and_then(|r| r.duration_ms)
        .map(|d| format!("{d:.1} ms"))
        .unwrap_or_default();
    let name = format!("{} › {}", named.server_name, named.tool_name);
    t.line(format_args!(
        "  {:>4}  {:<12}  {:<36} {:>10}  {:<6}",
        call.number,
        time,
        clip(&escape(&name), 36),
        duration,
        status
    ));
    let args = selected.and_then(|s| s.input.as_ref());
    let result = response.and_then(|r| r.output.as_ref().or(r.error.as_ref()));
    if full {
        if let Some(a) = args {
            t.block("        args   ", &pretty(a));
        }
        if let Some(r) = result {
            t.block("        result ", &pretty(r));
        }
    } else {
        if let Some(a) = args {
            t.line(format_args!(
                "        args   {}",
                clip(&escape(&compact(a)), 100)
            ));
        }
        if let Some(r) = result {
            t.line(format_args!(
                "        result {}",
                clip(&escape(&result_preview(r)), 100)
            ));
        }
    }
    if let Some(why) = selected
        .and_then(|s| s.withheld.as_deref())
        .or(response.and_then(|r| r.withheld.as_deref()))
    {
        t.line(format_args!("        (payloads withheld: {why})"));
    }
    if response.and_then(|r| r.correlation.as_deref()) == Some("ambiguous") {
        t.line(format_args!(
            "        (answer paired in arrival order: another call in flight had the same id)"
        ));
    }
}

/// A `CallToolResult` as one readable line: the text blocks, other blocks
/// by type.
fn result_preview(v: &Value) -> String {
    if v.get("truncated") == Some(&Value::Bool(true)) {
        return format!("[truncated: {} bytes]", v["originalBytes"]);
    }
    match v.get("content").and_then(Value::as_array) {
        Some(blocks) => blocks
            .iter()
            .map(|b| match b["type"].as_str() {
                Some("text") => b["text"].as_str().unwrap_or("").to_owned(),
                Some(kind) => format!("[{kind}]"),
                None => "[?]".into(),
            })
            .collect::<Vec<_>>()
            .join(" | "),
        None => compact(v),
    }
}

fn compact(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default()
}

/// Prints `run` as `format` asks (the document is `record::export`'s).
fn export(run: &LoadedRun, format: &str) -> Result<ExitStatus, Error> {
    match format {
        "json" => {
            out(&serde_json::to_string_pretty(&record_export::document(run)).unwrap_or_default());
            Ok(ExitStatus::Success)
        }
        "jsonl" => {
            out(&record_export::lines(run).join("\n"));
            Ok(ExitStatus::Success)
        }
        other => Err(Error::usage(format!(
            "unknown format `{other}` (use json or jsonl)"
        ))),
    }
}

/// Removes what `cmd` names. A run it cannot find or remove is reported
/// and the others are still removed; the exit status then says it failed.
fn rm(store: &Store, cmd: RmCmd) -> Result<ExitStatus, Error> {
    if cmd.runs.is_empty() && cmd.older_than.is_none() && cmd.keep.is_none() {
        return Err(Error::usage(
            "name runs to remove, or give --older-than or --keep",
        ));
    }
    let mut failed = false;
    let mut carry_on = |err: Error| {
        error::print("bir runs rm", &err);
        failed = true;
    };
    for wanted in &cmd.runs {
        match store.find(wanted) {
            Ok(run) => match store.remove(&run) {
                Ok(()) => out(&format!("removed {}", escape(&run.id()))),
                Err(err) => carry_on(
                    Error::failure(format!("cannot remove {}", run.path.display())).because(err),
                ),
            },
            Err(err) => carry_on(err),
        }
    }
    if cmd.older_than.is_some() || cmd.keep.is_some() {
        let age = cmd.older_than.as_deref().map(parse_age).transpose()?;
        match store.apply_retention(cmd.keep, age) {
            Ok(n) => out(&format!("removed {n} run(s)")),
            Err(err) => carry_on(Error::failure(err.to_string())),
        }
    }
    Ok(ExitStatus::failure_if(failed))
}

/// `7d`, `12h`, `30m`, `45s`.
/// A value that is not an age is a usage error.
pub(crate) fn parse_age(s: &str) -> Result<Duration, Error> {
    crate::time::parse_age(s)
        .ok_or_else(|| Error::usage(format!("`{}` is not an age like 7d, 12h or 30m", s.trim())))
}

fn short_id(id: &str) -> String {
    id.get(..14).unwrap_or(id).to_owned()
}

/// Text bound for a terminal. Its only way in is [`Screen::line`], which
/// escapes the whole line, so no recorded field (whatever the server or
/// the host chose: a name, a version, a protocol string) can reach the
/// terminal raw by having been forgotten at its call site. Layout is made
/// of lines, so a line break inside a field is escaped like any other
/// control character instead of starting a line of its own.
#[derive(Default)]
struct Screen(String);

impl Screen {
    /// Adds one line (escaped; see [`escape`]).
    fn line(&mut self, text: impl std::fmt::Display) {
        let text = text.to_string();
        self.0.push_str(&escape(&text));
        self.0.push('\n');
    }

    /// Adds a labelled block of several lines (pretty JSON): the first
    /// after the label, the rest indented to its column, each escaped.
    fn block(&mut self, label: &str, text: &str) {
        let indent = " ".repeat(label.chars().count());
        for (i, l) in text.lines().enumerate() {
            if i == 0 {
                self.line(format_args!("{label}{l}"));
            } else {
                self.line(format_args!("{indent}{l}"));
            }
        }
    }

    /// Prints what was built (without trailing blank lines).
    fn print(self) {
        out(self.0.trim_end());
    }

    /// Prints what was built, if anything (a follow's poll that found
    /// nothing new prints nothing, not a blank line).
    fn print_any(self) {
        if !self.0.trim_end().is_empty() {
            self.print();
        }
    }
}

fn clip(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        return s.to_owned();
    }
    let mut t: String = s.chars().take(width.saturating_sub(1)).collect();
    t.push('…');
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_terminal_controls() {
        assert_eq!(
            escape("a\x1b[31mred\x07\u{9b}b\nc"),
            "a\\u{1b}[31mred\\u{7}\\u{9b}b\\u{a}c"
        );
        assert_eq!(escape("héllo 🚀"), "héllo 🚀");
    }

    #[test]
    fn ages() {
        assert_eq!(parse_age("7d").ok(), Some(Duration::from_secs(604_800)));
        assert_eq!(parse_age("30m").ok(), Some(Duration::from_secs(1800)));
        let err = parse_age("soon").expect_err("not an age");
        assert_eq!(err.to_string(), "`soon` is not an age like 7d, 12h or 30m");
    }
}
