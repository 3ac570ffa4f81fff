//! `bir scenario`, `bir replay`, `bir verify`, `bir mock`: reusing runs.
//!
//! Thin: the work is done by `crate::replay` (where the servers are:
//! `replay::targets`, over `clientconfig::servers` and the proxy's HTTP
//! transport). This module parses flags, prints reports (every line
//! escaped) and maps outcomes to the exit codes docs/replay.md lists.

use argh::FromArgs;
use std::collections::HashMap;
use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;
use std::path::PathBuf;
use std::time::Duration;

use crate::error::{Error, ExitStatus};
use crate::output::{escape, out};
use crate::record::model::MadeBy;
use crate::replay::runner::{self, Confirm, Report, ServerTargets, Status, StepReport};
use crate::replay::scenario::{CompareRule, Scenario};
use crate::replay::{derive, load_source, params, source_label, targets, verify};

// ---------------------------------------------------------------- scenario

/// Turn runs into editable scenarios and edit them.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "scenario")]
pub(crate) struct ScenarioCmd {
    #[argh(subcommand)]
    pub action: ScenarioAction,
}

#[derive(FromArgs, Debug)]
#[argh(subcommand)]
pub(crate) enum ScenarioAction {
    Derive(ScenarioDeriveCmd),
    Param(ScenarioParamCmd),
    Volatile(ScenarioVolatileCmd),
    Ignore(ScenarioIgnoreCmd),
    Pin(ScenarioPinCmd),
    Unpin(ScenarioUnpinCmd),
    Safety(ScenarioSafetyCmd),
    Check(ScenarioCheckCmd),
    Show(ScenarioShowCmd),
}

/// Write a scenario (`bir/scenario@1`) derived from a run.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "derive")]
pub(crate) struct ScenarioDeriveCmd {
    /// the run: its id, a unique prefix of it, or `latest`
    #[argh(positional)]
    pub run: String,

    /// write to this file (default: stdout)
    #[argh(option, short = 'o')]
    pub out: Option<PathBuf>,

    /// only list proposed bindings; leave the recorded literals in place
    #[argh(switch)]
    pub no_bind: bool,
}

/// Turn the value at an argument path into a parameter.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "param")]
pub(crate) struct ScenarioParamCmd {
    #[argh(positional)]
    pub file: PathBuf,
    #[argh(positional)]
    pub step: String,
    /// a JSON Pointer into the step's arguments, e.g. /token
    #[argh(positional)]
    pub path: String,
    #[argh(positional)]
    pub name: String,
    /// where the value comes from: env:VAR, arg or prompt
    #[argh(option)]
    pub from: Option<String>,
    /// keep the recorded value as the default (refused for redacted values)
    #[argh(switch)]
    pub keep_default: bool,
}

/// Relax an argument path for matching; without a path, treat the whole
/// result as volatile (only isError and content types are compared).
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "volatile")]
pub(crate) struct ScenarioVolatileCmd {
    #[argh(positional)]
    pub file: PathBuf,
    #[argh(positional)]
    pub step: String,
    #[argh(positional)]
    pub path: Option<String>,
}

/// Add a compare rule to a step (or `all`).
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "ignore")]
pub(crate) struct ScenarioIgnoreCmd {
    #[argh(positional)]
    pub file: PathBuf,
    /// a step id, or `all`
    #[argh(positional)]
    pub step: String,
    /// a JSON Pointer into the result (`*`, `**` allowed)
    #[argh(positional)]
    pub path: String,
    /// ignore (default), type, pattern:REGEX, unordered, field:NAME
    #[argh(option, default = "String::from(\"ignore\")")]
    pub kind: String,
}

/// Pin a step (guided replay rewrites a deviating call to it).
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "pin")]
pub(crate) struct ScenarioPinCmd {
    #[argh(positional)]
    pub file: PathBuf,
    #[argh(positional)]
    pub step: String,
}

/// Unpin a step.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "unpin")]
pub(crate) struct ScenarioUnpinCmd {
    #[argh(positional)]
    pub file: PathBuf,
    #[argh(positional)]
    pub step: String,
}

/// Override a step's safety class: auto, confirm or skip (auto counts only
/// with --trust-scenario).
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "safety")]
pub(crate) struct ScenarioSafetyCmd {
    #[argh(positional)]
    pub file: PathBuf,
    #[argh(positional)]
    pub step: String,
    #[argh(positional)]
    pub class: String,
}

/// Liveness: the servers start, the tools exist, the definitions match the
/// snapshot; reports the scenario's age.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "check")]
pub(crate) struct ScenarioCheckCmd {
    #[argh(positional)]
    pub file: String,
    /// a server as NAME='command args…' (repeatable; default: the install
    /// ledger's original entry)
    #[argh(option)]
    pub server: Vec<String>,
    /// an MCP client config file (e.g. `.mcp.json`) whose servers to use
    #[argh(option)]
    pub config: Option<PathBuf>,
    /// a remote server as NAME=URL (Streamable HTTP; repeatable)
    #[argh(option)]
    pub url: Vec<String>,
    /// how long a server may take to answer, in milliseconds (default 30000)
    #[argh(option, default = "30000")]
    pub timeout_ms: u64,
}

/// The scenario as a timeline, with safety classes and bindings.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "show")]
pub(crate) struct ScenarioShowCmd {
    #[argh(positional)]
    pub file: String,
}

/// Writes the argh struct of a command that runs scenarios against live
/// servers (`bir replay`, `bir verify`): the flags they share are written
/// here once, since argh cannot flatten one struct into another. In
/// order: the command's positional; `--server` and `--no-record` with the
/// command's own help (given as `server,` and `no_record,` with their doc
/// comments); `--config`, `--url`, `--parallel-groups` after `--server`;
/// the command's own flags; last `--param`, `--format`, `--report`,
/// `--junit`, `--timeout-ms`. A field's type is written as a name and
/// one optional generic argument (`Vec<String>`), so argh still sees
/// whether it is a `Vec` or an `Option`.
macro_rules! live_servers_command {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $(#[$pos_meta:meta])*
            pub $pos:ident: $pos_ty:ident $(<$pos_inner:ty>)?,
            $(#[$server_meta:meta])*
            server,
            $(#[$no_record_meta:meta])*
            no_record,
            $(
                $(#[$own_meta:meta])*
                pub $own:ident: $own_ty:ident $(<$own_inner:ty>)?,
            )*
        }
    ) => {
        $(#[$meta])*
        pub(crate) struct $name {
            $(#[$pos_meta])*
            pub $pos: $pos_ty $(<$pos_inner>)?,
            $(#[$server_meta])*
            #[argh(option)]
            pub server: Vec<String>,
            /// an MCP client config file (e.g. `.mcp.json`) whose servers to use
            /// (stdio entries, and remote ones by their `url`)
            #[argh(option)]
            pub config: Option<PathBuf>,
            /// a remote server as NAME=URL (Streamable HTTP; repeatable)
            #[argh(option)]
            pub url: Vec<String>,
            /// run each recorded concurrent group of steps together
            #[argh(switch)]
            pub parallel_groups: bool,
            $(#[$no_record_meta])*
            #[argh(switch)]
            pub no_record: bool,
            $(
                $(#[$own_meta])*
                pub $own: $own_ty $(<$own_inner>)?,
            )*
            /// bind a parameter: name=value (repeatable)
            #[argh(option)]
            pub param: Vec<String>,
            /// text (default) or json
            #[argh(option, default = "String::from(\"text\")")]
            pub format: String,
            /// also write the JSON report to this file
            #[argh(option)]
            pub report: Option<PathBuf>,
            /// also write a JUnit XML report to this file
            #[argh(option)]
            pub junit: Option<PathBuf>,
            /// per request, in milliseconds (default 30000)
            #[argh(option, default = "30000")]
            pub timeout_ms: u64,
        }
    };
}

live_servers_command! {
/// Replay a run or scenario against the live servers (bir is the MCP
/// client). Read-only steps run; the others are held unless --execute.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "replay")]
pub struct ReplayCmd {
    /// a scenario file, or a run (id, prefix, `latest`)
    #[argh(positional)]
    pub source: String,
    /// a server as NAME='command args…' (repeatable; default: the install
    /// ledger's original entry)
    server,
    /// do not journal this replay as a run
    no_record,
    /// execute nothing; print the plan with each step's class and reason
    #[argh(switch)]
    pub dry_run: bool,
    /// also run held steps that pass the gate (allow-listed, or confirmed
    /// on a terminal)
    #[argh(switch)]
    pub execute: bool,
    /// server/tool glob allowed with --execute (destructive tools: exact name)
    #[argh(option)]
    pub allow: Vec<String>,
    /// server/tool glob never run (wins over --allow)
    #[argh(option)]
    pub deny: Vec<String>,
    /// count the scenario's own allow lists and `safety: auto` overrides,
    /// and let it read the environment (`${env:X}`)
    #[argh(switch)]
    pub trust_scenario: bool,
    /// configured (default) or none (every step confirm)
    #[argh(option, default = "String::from(\"configured\")")]
    pub trust_annotations: String,
    /// hold open-world (external) steps too
    #[argh(switch)]
    pub no_open_world: bool,
    /// only these steps: 3-7 (by index)
    #[argh(option)]
    pub steps: Option<String>,
    /// start at this step id
    #[argh(option)]
    pub from: Option<String>,
}
}

live_servers_command! {
/// Replay with CI defaults: only read-only steps run, never a prompt.
/// Exit: 0 matched, 1 divergence, 2 usage, 3 incomplete, 4 server down,
/// 5 stale or drifted.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "verify")]
pub struct VerifyCmd {
    /// scenario files or runs
    #[argh(positional)]
    pub sources: Vec<String>,
    /// a server as NAME='command args…' (repeatable)
    server,
    /// do not journal this verification as a run
    no_record,
    /// compare only the snapshots (tools added/removed, schema or
    /// annotation changes): zero side effects
    #[argh(switch)]
    pub schema_only: bool,
    /// rewrite `expect` of diverged steps (scenario files only)
    #[argh(switch)]
    pub update: bool,
    /// with --update: also refresh verifiedAt when every step passes
    #[argh(switch)]
    pub update_all: bool,
    /// run each read-only step N times and propose ignore rules for the
    /// paths that vary
    #[argh(option)]
    pub calibrate: Option<u32>,
    /// with --calibrate: write the proposed rules into the scenario
    #[argh(switch)]
    pub write: bool,
    /// how old a scenario may be (e.g. 30d)
    #[argh(option)]
    pub max_age: Option<String>,
    /// warn (default) or error (exit 5) past --max-age
    #[argh(option, default = "String::from(\"warn\")")]
    pub expired: String,
    /// exit 5 when a server's tools drifted from the snapshot
    #[argh(switch)]
    pub fail_on_drift: bool,
    /// let the scenario read the environment (`${env:X}`, parameters it
    /// did not get from bir scenario param on this machine)
    #[argh(switch)]
    pub trust_scenario: bool,
    /// exit 3 when any step was held, blocked or skipped (default: they
    /// are reported as skipped and do not fail)
    #[argh(switch)]
    pub require_all: bool,
}
}

/// Serve a recorded server over stdio as an MCP server.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "mock")]
pub(crate) struct MockCmd {
    /// a scenario file, or a run (id, prefix, `latest`)
    #[argh(positional)]
    pub source: String,
    /// the recorded server to serve (default: the only one)
    #[argh(option)]
    pub server: Option<String>,
    /// keyed (default), ordered, strict or tool
    #[argh(option, long = "match")]
    pub match_mode: Option<String>,
    /// error (default) or last: what a call repeated past the recording gets
    #[argh(option, default = "String::from(\"error\")")]
    pub repeats: String,
    /// error (default) or passthrough (read-only tools to the server after --)
    #[argh(option, default = "String::from(\"error\")")]
    pub on_miss: String,
    /// exit 1 if recorded calls were left unused
    #[argh(switch)]
    pub require_all: bool,
    /// refuse to serve results recorded redacted or truncated
    #[argh(switch)]
    pub strict_redaction: bool,
    /// warn past this age (default 30d)
    #[argh(option)]
    pub max_age: Option<String>,
    /// warn (default) or error (refuse to start) past --max-age
    #[argh(option, default = "String::from(\"warn\")")]
    pub expired: String,
    /// at start, compare the snapshot with the real server's tools/list
    /// (the server after `--`) and warn on drift
    #[argh(switch)]
    pub live_check: bool,
    /// do not journal this mock session as a run
    #[argh(switch)]
    pub no_record: bool,
    /// the real server, after `--` (for --on-miss passthrough)
    #[argh(positional, greedy)]
    pub command: Vec<String>,
}

pub(crate) fn scenario(cmd: ScenarioCmd) -> Result<ExitStatus, Error> {
    match cmd.action {
        ScenarioAction::Derive(c) => {
            let store = crate::record::store::Store::open_default()
                .map_err(|e| Error::failure("cannot open the run store").because(e))?;
            let run = store.find(&c.run)?;
            let s = derive::derive(
                &run,
                &derive::DeriveOptions {
                    apply_bindings: !c.no_bind,
                },
            );
            match &c.out {
                Some(path) => {
                    s.save(path)?;
                    let proposals: usize = s.steps.iter().map(|st| st.bindings.len()).sum();
                    crate::output::note(&format!(
                        "bir scenario: wrote {} ({} steps, {} binding{} {}; review them with bir scenario show)",
                        path.display(),
                        s.steps.len(),
                        proposals,
                        if proposals == 1 { "" } else { "s" },
                        if c.no_bind { "proposed" } else { "applied" }
                    ));
                }
                // The scenario is the command's output: valid JSON, its
                // recorded text's C1 controls in JSON's own escapes.
                None => crate::output::out(s.to_text().trim_end_matches('\n')),
            }
            Ok(ExitStatus::Success)
        }
        ScenarioAction::Param(c) => edit(&c.file, |s| {
            params::parameterize(
                s,
                &params::Parameterize {
                    step: &c.step,
                    path: &c.path,
                    name: &c.name,
                    from: c.from.as_deref(),
                    keep_default: c.keep_default,
                },
            )
        }),
        ScenarioAction::Volatile(c) => edit(&c.file, |s| {
            let step = s.step_mut(&c.step)?;
            match &c.path {
                Some(p) => {
                    if step.args.pointer(p).is_none() {
                        return Err(Error::usage(format!(
                            "step {} has no argument at {p}",
                            c.step
                        )));
                    }
                    if !step.volatile_args.contains(p) {
                        step.volatile_args.push(p.clone());
                    }
                }
                None => step.expect.volatile = true,
            }
            Ok(())
        }),
        ScenarioAction::Ignore(c) => edit(&c.file, |s| {
            let rule = CompareRule {
                path: c.path.clone(),
                kind: c.kind.clone(),
            };
            crate::replay::compare::check_rule(&rule).map_err(Error::usage)?;
            if c.step == "all" {
                s.rules.compare.push(rule);
            } else {
                s.step_mut(&c.step)?.ignore.push(rule);
            }
            Ok(())
        }),
        ScenarioAction::Pin(c) => edit(&c.file, |s| {
            s.step_mut(&c.step)?.pin = Some(true);
            Ok(())
        }),
        ScenarioAction::Unpin(c) => edit(&c.file, |s| {
            s.step_mut(&c.step)?.pin = Some(false);
            Ok(())
        }),
        ScenarioAction::Safety(c) => edit(&c.file, |s| {
            if !matches!(c.class.as_str(), "auto" | "confirm" | "skip") {
                return Err(Error::usage(format!(
                    "{:?} is not auto, confirm or skip",
                    c.class
                )));
            }
            s.step_mut(&c.step)?.safety = Some(c.class.clone());
            Ok(())
        }),
        ScenarioAction::Check(c) => {
            let s = load_source(&c.file)?;
            let servers = server_targets(&s, &c.server, &c.url, c.config.as_deref())?;
            let options = options_base(Duration::from_millis(c.timeout_ms), true);
            let report = runner::run(&s, &servers, &options, None);
            if let Some(age) = crate::replay::age_secs(&s) {
                out(&format!(
                    "age: {} days (since {})",
                    age / 86_400,
                    escape(s.reference_time().unwrap_or("?"))
                ));
            }
            print_report(&report, "text");
            Ok(report.exit_status())
        }
        ScenarioAction::Show(c) => {
            let s = load_source(&c.file)?;
            show(&s);
            Ok(ExitStatus::Success)
        }
    }
}

/// Load, change, validate, save.
fn edit(
    path: &Path,
    f: impl FnOnce(&mut Scenario) -> Result<(), Error>,
) -> Result<ExitStatus, Error> {
    let mut s = Scenario::load(path)?;
    f(&mut s)?;
    s.validate()?;
    s.save(path)?;
    Ok(ExitStatus::Success)
}

fn show(s: &Scenario) {
    if let Some(src) = &s.source {
        out(&escape(&format!(
            "scenario of {} recorded {} ({}, {})",
            src.run,
            src.recorded_at,
            src.tier,
            src.host.as_deref().unwrap_or("unknown host")
        )));
    } else {
        out("hand-written script");
    }
    for (name, p) in &s.params {
        out(&escape(&format!(
            "param {name}: from {}{}",
            p.from.as_deref().unwrap_or("--param"),
            if p.redacted {
                " (redacted when recorded: must be bound)"
            } else {
                ""
            }
        )));
    }
    let host = s.source.as_ref().and_then(|src| src.host.as_deref());
    for step in &s.steps {
        out(&escape(&crate::replay::builtin::heading(step, host)));
        out(&escape(&format!(
            "           args {}",
            runner::brief(&step.args)
        )));
        for b in &step.bindings {
            out(&escape(&format!(
                "           binding {} ← {} (recorded {:?}){}",
                b.arg,
                b.from,
                b.literal,
                if b.applied {
                    ""
                } else {
                    " [proposed, not applied]"
                }
            )));
        }
    }
}

// ---------------------------------------------------------------- servers

/// The scenario's servers, picked by `replay::targets` from the flags,
/// `--config FILE` (read by `clientconfig::servers`) and the ledger's
/// original entries; a remote one is reached through the proxy's HTTP
/// transport.
fn server_targets(
    s: &Scenario,
    given: &[String],
    urls: &[String],
    config: Option<&Path>,
) -> Result<ServerTargets, Error> {
    let specs = targets::resolve(
        s,
        given,
        urls,
        config.map(|path| move || crate::clientconfig::servers::config_servers(path)),
        &crate::clientconfig::servers::ledger_command,
    )?;
    Ok(targets::into_targets(
        specs,
        &crate::proxy::upstream_http::replay_connector,
    ))
}

// ---------------------------------------------------------------- replay / verify

fn options_base(timeout: Duration, schema_only: bool) -> runner::Options {
    runner::Options {
        dry_run: false,
        execute: false,
        allow: Vec::new(),
        deny: Vec::new(),
        trust_scenario: false,
        trust_none: false,
        no_open_world: false,
        params: HashMap::new(),
        steps: None,
        from: None,
        timeout,
        schema_only,
        calibrate: 0,
        payload_cap: crate::replay::payload_cap(),
        parallel_groups: false,
        record: None,
    }
}

fn parse_params(given: &[String]) -> Result<HashMap<String, String>, Error> {
    given
        .iter()
        .map(|p| {
            p.split_once('=')
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .ok_or_else(|| Error::usage(format!("--param {p:?} is not name=value")))
        })
        .collect()
}

fn check_format(format: &str) -> Result<(), Error> {
    if matches!(format, "text" | "json") {
        Ok(())
    } else {
        Err(Error::usage(format!(
            "--format {format:?} is not text or json"
        )))
    }
}

pub(crate) fn replay(cmd: ReplayCmd) -> Result<ExitStatus, Error> {
    check_format(&cmd.format)?;
    let trust_none = match cmd.trust_annotations.as_str() {
        "configured" => false,
        "none" => true,
        other => {
            return Err(Error::usage(format!(
                "--trust-annotations {other:?} is not configured or none"
            )));
        }
    };
    let steps = cmd
        .steps
        .as_deref()
        .map(|r| {
            let (a, b) = r.split_once('-').unwrap_or((r, r));
            Ok::<_, Error>((
                a.trim()
                    .parse()
                    .map_err(|_| Error::usage(format!("--steps {r:?} is not like 3-7")))?,
                b.trim()
                    .parse()
                    .map_err(|_| Error::usage(format!("--steps {r:?} is not like 3-7")))?,
            ))
        })
        .transpose()?;
    let s = load_source(&cmd.source)?;
    if let Some(from) = &cmd.from
        && s.step(from).is_none()
    {
        return Err(Error::usage(format!("--from {from}: no such step")));
    }
    let servers = server_targets(&s, &cmd.server, &cmd.url, cmd.config.as_deref())?;
    let mut options = options_base(Duration::from_millis(cmd.timeout_ms), false);
    options.parallel_groups = cmd.parallel_groups;
    options.record =
        (!cmd.no_record && !cmd.dry_run).then(|| (MadeBy::Replay, source_label(&cmd.source, &s)));
    options.dry_run = cmd.dry_run;
    options.execute = cmd.execute;
    options.allow = cmd.allow.clone();
    options.deny = cmd.deny.clone();
    options.trust_scenario = cmd.trust_scenario;
    options.trust_none = trust_none;
    options.no_open_world = cmd.no_open_world;
    options.params = parse_params(&cmd.param)?;
    options.steps = steps;
    options.from = cmd.from.clone();
    let tty = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    let mut ask = |sr: &StepReport| ask_on_tty(sr);
    let confirm: Option<&mut dyn FnMut(&StepReport) -> Confirm> = if cmd.execute && tty {
        Some(&mut ask)
    } else {
        None
    };
    let report = runner::run(&s, &servers, &options, confirm);
    write_outputs(
        &report,
        &cmd.format,
        cmd.report.as_deref(),
        cmd.junit.as_deref(),
    )?;
    if cmd.dry_run {
        return Ok(if report.environment.is_empty() {
            ExitStatus::Success
        } else {
            ExitStatus::Environment
        });
    }
    Ok(report.exit_status())
}

fn ask_on_tty(sr: &StepReport) -> Confirm {
    for line in runner::confirm_prompt(sr).split_inclusive('\n') {
        match line.strip_suffix('\n') {
            Some(whole) => crate::output::note(&escape(whole)),
            None => crate::output::prompt(&escape(line)),
        }
    }
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    if std::io::stdin().lock().read_line(&mut line).is_err() {
        return Confirm::Quit;
    }
    match line.trim() {
        "y" | "yes" => Confirm::Yes,
        "a" | "always" => Confirm::Always,
        "q" | "quit" => Confirm::Quit,
        _ => Confirm::No,
    }
}

pub(crate) fn verify(cmd: VerifyCmd) -> Result<ExitStatus, Error> {
    check_format(&cmd.format)?;
    if cmd.sources.is_empty() {
        return Err(Error::usage("name at least one scenario file or run"));
    }
    let (max_age, expired_error) = staleness(cmd.max_age.as_deref(), &cmd.expired)?;
    if (cmd.update || cmd.update_all) && cmd.schema_only {
        return Err(Error::usage(
            "--update needs the steps to run; it cannot go with --schema-only",
        ));
    }
    if cmd.write && cmd.calibrate.is_none() {
        return Err(Error::usage("--write goes with --calibrate N"));
    }
    let params = parse_params(&cmd.param)?;
    let mut worst = ExitStatus::Success;
    for source in &cmd.sources {
        let mut s = load_source(source)?;
        let servers = server_targets(&s, &cmd.server, &cmd.url, cmd.config.as_deref())?;
        let mut options = options_base(Duration::from_millis(cmd.timeout_ms), cmd.schema_only);
        options.parallel_groups = cmd.parallel_groups;
        options.record = (!cmd.no_record).then(|| (MadeBy::Verify, source_label(source, &s)));
        options.params = params.clone();
        options.calibrate = cmd.calibrate.unwrap_or(0);
        options.trust_scenario = cmd.trust_scenario;
        let mut report = runner::run(&s, &servers, &options, None);
        report.scenario = source.clone();
        verify::mark_stale(&mut report, &s, max_age, expired_error);
        if cmd.fail_on_drift && report.drift.iter().any(runner::Drift::any) {
            report.stale_is_error = true;
        }
        let mut status = report.verify_exit_status(cmd.require_all);
        write_outputs(
            &report,
            &cmd.format,
            cmd.report.as_deref(),
            cmd.junit.as_deref(),
        )?;
        let is_file = Path::new(source).is_file();
        if (cmd.update || cmd.update_all) && status != ExitStatus::Environment {
            if !is_file {
                return Err(Error::usage(
                    "--update rewrites a scenario file; derive one first (bir scenario derive)",
                ));
            }
            let (updated, refused) = verify::update(&mut s, &report, cmd.update_all);
            s.save(Path::new(source))?;
            crate::output::note(&format!(
                "bir verify: updated {updated} step(s) of {source}{}",
                if refused.is_empty() {
                    String::new()
                } else {
                    format!("; refused (truncated): {}", refused.join(", "))
                }
            ));
            if refused.is_empty() && status == ExitStatus::Failure {
                status = ExitStatus::Success;
            }
        }
        if let Some(n) = cmd.calibrate {
            let proposals = verify::calibration_proposals(&report);
            for (step, path) in &proposals {
                out(&escape(&format!(
                    "calibrate ({n} runs): {step} varies at {path}: proposed ignore rule"
                )));
            }
            if cmd.write {
                if !is_file {
                    return Err(Error::usage(
                        "--write changes a scenario file; derive one first",
                    ));
                }
                verify::add_ignore_rules(&mut s, &proposals)?;
                s.save(Path::new(source))?;
                crate::output::note(&format!(
                    "bir verify: wrote {} ignore rule(s) into {source}",
                    proposals.len()
                ));
            }
        }
        worst = verify::worse(worst, status);
    }
    Ok(worst)
}

/// `--max-age AGE` and `--expired warn|error`.
fn staleness(max_age: Option<&str>, expired: &str) -> Result<(Option<Duration>, bool), Error> {
    let age = max_age
        .map(|a| {
            crate::time::parse_age(a)
                .ok_or_else(|| Error::usage(format!("--max-age {a:?} is not an age like 30d")))
        })
        .transpose()?;
    match expired {
        "warn" => Ok((age, false)),
        "error" => Ok((age, true)),
        other => Err(Error::usage(format!(
            "--expired {other:?} is not warn or error"
        ))),
    }
}

fn write_outputs(
    report: &Report,
    format: &str,
    json_file: Option<&Path>,
    junit: Option<&Path>,
) -> Result<(), Error> {
    print_report(report, format);
    if let Some(run) = &report.run {
        crate::output::note(&escape(&format!("bir: journaled as run {run}")));
    }
    if let Some(p) = json_file {
        let text = serde_json::to_string_pretty(report).unwrap_or_default();
        std::fs::write(p, text)
            .map_err(|e| Error::failure(format!("cannot write {}", p.display())).because(e))?;
    }
    if let Some(p) = junit {
        std::fs::write(p, crate::replay::junit::junit_xml(report))
            .map_err(|e| Error::failure(format!("cannot write {}", p.display())).because(e))?;
    }
    Ok(())
}

fn print_report(report: &Report, format: &str) {
    if format == "json" {
        out(&serde_json::to_string(report).unwrap_or_default());
        return;
    }
    for e in &report.environment {
        out(&escape(&format!("SERVER DOWN  {e}")));
    }
    for d in report.drift.iter().filter(|d| d.any()) {
        out(&escape(&format!(
            "drift {}: added [{}] removed [{}] changed [{}]",
            d.server,
            d.added.join(", "),
            d.removed.join(", "),
            d.changed.join(", ")
        )));
    }
    if let Some(stale) = &report.stale {
        out(&escape(&format!("stale: {stale}")));
    }
    if !report.env_read.is_empty() {
        out(&escape(&format!(
            "environment read: {}",
            report.env_read.join(", ")
        )));
    }
    for st in &report.steps {
        let timing = match (st.duration_ms, st.recorded_ms) {
            (Some(d), Some(r)) => format!(" ({d:.1} ms, recorded {r:.1} ms)"),
            (Some(d), None) => format!(" ({d:.1} ms)"),
            _ => String::new(),
        };
        out(&escape(&format!(
            "{:>4} {:<5} {}/{} [{}{}] {}{}",
            st.index,
            st.id,
            st.server,
            st.tool,
            st.class.name(),
            if st.external { ", external" } else { "" },
            st.status.name(),
            timing
        )));
        let show_reasons = report.dry_run || !matches!(st.status, Status::Match);
        if show_reasons {
            for r in &st.reasons {
                out(&escape(&format!("           {r}")));
            }
        }
        for d in &st.differences {
            out(&escape(&format!(
                "           {}: expected {} got {}",
                d.path,
                runner::brief(&d.expected),
                runner::brief(&d.actual)
            )));
        }
        for i in &st.needs_interaction {
            out(&escape(&format!("           needs-interaction: {i}")));
        }
    }
    out(&report.summary());
}

// ---------------------------------------------------------------- mock

pub(crate) fn mock(cmd: MockCmd) -> Result<ExitStatus, Error> {
    let (max_age, expired_error) = staleness(cmd.max_age.as_deref(), &cmd.expired)?;
    // Stopped by a signal, the session ends as at the end of its input
    // (its run finished), then bir dies of the signal.
    let mut input = std::io::BufReader::new(crate::proxy::signals::InputUntilSignal::start());
    let status = crate::replay::serve_mock(
        &crate::replay::ServeRequest {
            source: &cmd.source,
            server: cmd.server.as_deref(),
            match_mode: cmd.match_mode.as_deref(),
            repeats: &cmd.repeats,
            on_miss: &cmd.on_miss,
            require_all: cmd.require_all,
            strict_redaction: cmd.strict_redaction,
            max_age,
            expired_error,
            upstream: &cmd.command,
            live_check: cmd.live_check,
            record: !cmd.no_record,
        },
        &mut input,
    );
    if let Some(sig) = input.get_ref().signal() {
        crate::proxy::signals::die_of(sig);
    }
    status
}
