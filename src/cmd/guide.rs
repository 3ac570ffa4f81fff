//! `bir guide start|status|stop`: arm a guided replay of a scenario for the
//! next Claude Code session in a project, look at it, end it.
//!
//! `start` turns a scenario (a file, or a run derived in memory — the one
//! loader, `replay::load_source`) into the plan `bound::guidance` decides
//! with (`replay::guide_plan`: host tool names, expected arguments in
//! recorded space, slots and pins; no secret stored), and stores it where
//! the daemon reads it (`daemon::armed_guides`).
//!
//! The command needs no daemon: the daemon reads the file at the next hook.

use argh::FromArgs;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::bound::guidance::{self, Guide, Phase, Progress};

use crate::daemon::armed_guides;
use crate::error::{Error, ExitStatus};
use crate::output::{escape, out};
use crate::replay::guide_plan::{EnvTrust, plan, read_only_tools};
use crate::replay::runner;

/// Guide Claude Code through a recorded scenario: the next session in this
/// project gets the outline, calls that differ only in parameter or
/// volatile slots are pinned to the scenario's values (asking the user
/// unless bir can prove Claude Code would not have asked), anything else
/// hands over to the model.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "guide")]
pub(crate) struct GuideCmd {
    #[argh(subcommand)]
    pub action: GuideAction,
}

#[derive(FromArgs, Debug)]
#[argh(subcommand)]
pub(crate) enum GuideAction {
    Start(GuideStartCmd),
    Status(GuideStatusCmd),
    Stop(GuideStopCmd),
}

/// Arm a guide for the next Claude Code session in this project.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "start")]
pub(crate) struct GuideStartCmd {
    /// a scenario file, or a run (id, unique prefix, `latest`)
    #[argh(positional)]
    pub source: String,
    /// only this Claude Code session id follows the guide
    #[argh(option)]
    pub session: Option<String>,
    /// bind a parameter: name=value (repeatable)
    #[argh(option)]
    pub param: Vec<String>,
    /// the project directory (default: the current one)
    #[argh(option)]
    pub project: Option<PathBuf>,
    /// never rewrite a call: advise through context only
    #[argh(switch)]
    pub no_pin: bool,
    /// start only at a prompt matching the scenario's trigger
    #[argh(switch)]
    pub trigger: bool,
    /// extra read-only calls tolerated between steps (default 5)
    #[argh(option, default = "5")]
    pub max_extra: u32,
    /// how often a Stop is blocked while steps remain (default 1)
    #[argh(option, default = "1")]
    pub max_nudges: u32,
    /// let the scenario read the environment (`${env:X}`, and parameters
    /// `from: env:X` that `bir scenario param` did not bind on this machine)
    #[argh(switch)]
    pub trust_scenario: bool,
}

/// Show the guide armed in this project and how far it got.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "status")]
pub(crate) struct GuideStatusCmd {
    /// the project directory (default: the current one)
    #[argh(option)]
    pub project: Option<PathBuf>,
    /// every armed guide, whatever the project
    #[argh(switch)]
    pub all: bool,
    /// one JSON object per guide
    #[argh(switch)]
    pub json: bool,
}

/// End the guide armed in this project.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "stop")]
pub(crate) struct GuideStopCmd {
    /// the project directory (default: the current one)
    #[argh(option)]
    pub project: Option<PathBuf>,
}

pub(crate) fn main(cmd: GuideCmd) -> Result<ExitStatus, Error> {
    match cmd.action {
        GuideAction::Start(c) => start(c),
        GuideAction::Status(c) => status(c),
        GuideAction::Stop(c) => stop(c),
    }
}

fn bir_home() -> Result<PathBuf, Error> {
    crate::home::bir_home().ok_or_else(|| Error::failure("cannot find bir's home (set BIR_HOME)"))
}

/// The project directory: `--project`, else the current one; absolute and
/// without symlinks (Claude Code reports its cwd that way).
fn project_dir(given: Option<&Path>) -> Result<String, Error> {
    let dir = match given {
        Some(d) => d.to_path_buf(),
        None => std::env::current_dir()
            .map_err(|e| Error::failure("cannot read the current directory").because(e))?,
    };
    let real = std::fs::canonicalize(&dir)
        .map_err(|e| Error::usage(format!("{}: not a directory here", dir.display())).because(e))?;
    Ok(real.to_string_lossy().into_owned())
}

fn start(cmd: GuideStartCmd) -> Result<ExitStatus, Error> {
    let home = bir_home()?;
    let project = project_dir(cmd.project.as_deref())?;
    let scenario = crate::replay::load_source(&cmd.source)?;
    let mut given = HashMap::new();
    for p in &cmd.param {
        let (k, v) = p
            .split_once('=')
            .ok_or_else(|| Error::usage(format!("--param {p:?} is not name=value")))?;
        given.insert(k.to_owned(), v.to_owned());
    }
    let trigger = match (&scenario.trigger, cmd.trigger) {
        (_, false) => None,
        (Some(t), true) if !t.trim().is_empty() => Some(t.clone()),
        _ => {
            return Err(Error::usage(format!(
                "--trigger: {} has no trigger",
                cmd.source
            )));
        }
    };
    let params = runner::bind_params(&scenario, &given);
    let redactor = crate::replay::recorded_space_redactor();
    let cap = crate::replay::payload_cap();
    let recorded = |v: &Value| crate::replay::in_recorded_space(&redactor, cap, v.clone());
    let mut notes = Vec::new();
    let mut env_read = Vec::new();
    let env = EnvTrust {
        given: &given,
        trusted: cmd.trust_scenario,
        home: Some(&home),
    };
    let steps = plan(
        &scenario,
        &params,
        &env,
        &recorded,
        &mut notes,
        &mut env_read,
    )?;
    if steps.is_empty() {
        return Err(Error::usage(format!(
            "{}: the scenario has no steps",
            cmd.source
        )));
    }
    let g = Guide {
        schema: guidance::SCHEMA.to_owned(),
        scenario: cmd.source.clone(),
        project: project.clone(),
        session: cmd.session.clone(),
        armed_at: crate::time::rfc3339(std::time::SystemTime::now()),
        no_pin: cmd.no_pin,
        trigger,
        max_extra: cmd.max_extra,
        max_nudges: cmd.max_nudges,
        read_only_tools: read_only_tools(&scenario, &steps),
        steps,
        progress: Progress::default(),
    };
    let path = armed_guides::file_for(&home, &project);
    {
        let _lock = armed_guides::lock(&home)
            .map_err(|e| Error::failure("cannot lock bir's guides").because(e))?;
        if let Ok(Some(old)) = armed_guides::read(&path) {
            notes.push(format!(
                "replaced the guide armed before ({}, {})",
                old.scenario,
                phase_name(old.progress.phase)
            ));
        }
        armed_guides::write(&path, &g)
            .map_err(|e| Error::failure("cannot write the guide").because(e))?;
    }
    let who = match &g.session {
        Some(s) => format!("session {s}"),
        None => "the next Claude Code session that gets a prompt there".to_owned(),
    };
    out(&format!(
        "Guide armed in {}: {} steps from {}; followed by {}.",
        escape(&project),
        g.steps.len(),
        escape(&cmd.source),
        escape(&who)
    ));
    if !env_read.is_empty() {
        out(&format!(
            "  environment read: {}",
            escape(&env_read.join(", "))
        ));
    }
    for note in notes {
        out(&format!("  note: {}", escape(&note)));
    }
    guide_events(&project);
    out(
        "  It needs bir's hooks in Claude Code (bir install). See `bir guide status`; end it with `bir guide stop`.",
    );
    Ok(ExitStatus::Success)
}

fn phase_name(phase: Phase) -> &'static str {
    match phase {
        Phase::Armed => "armed, waiting for a prompt",
        Phase::Active => "active",
        Phase::HandedOver => "handed over",
        Phase::Done => "done",
    }
}

fn status(cmd: GuideStatusCmd) -> Result<ExitStatus, Error> {
    let home = bir_home()?;
    let guides: Vec<Guide> = if cmd.all {
        armed_guides::list(&home)
            .into_iter()
            .map(|(_, g)| g)
            .collect()
    } else {
        let project = project_dir(cmd.project.as_deref())?;
        let path = armed_guides::file_for(&home, &project);
        match armed_guides::read(&path) {
            Ok(g) => g.into_iter().collect(),
            Err(e) => return Err(Error::failure("cannot read the guide").because(e)),
        }
    };
    if cmd.json {
        for g in &guides {
            out(&serde_json::to_string(g).unwrap_or_default());
        }
        return Ok(ExitStatus::Success);
    }
    if guides.is_empty() {
        out("No guide armed here (bir guide start <scenario|run>).");
        return Ok(ExitStatus::Success);
    }
    for g in &guides {
        for line in describe(g) {
            out(&line);
        }
    }
    Ok(ExitStatus::Success)
}

/// A guide in a few lines.
fn describe(g: &Guide) -> Vec<String> {
    let p = &g.progress;
    let mut lines = vec![format!(
        "Guide in {} ({}): {}{}, {} of {} steps done",
        escape(&g.project),
        escape(&g.scenario),
        phase_name(p.phase),
        g.session
            .as_deref()
            .map(|s| format!(" (session {})", escape(s)))
            .unwrap_or_default(),
        p.done.len(),
        g.steps.len()
    )];
    lines.push(format!(
        "  followed {}, pinned {} (asked the user {}), advised {}, extra calls {}, nudges {}",
        p.followed, p.pinned, p.asked, p.advised, p.extras, p.nudges
    ));
    if let Some(at) = &p.handed_over_at {
        lines.push(format!(
            "  handed over at {}: {}",
            escape(at),
            escape(p.reason.as_deref().unwrap_or(""))
        ));
    }
    if matches!(p.phase, Phase::Armed | Phase::Active)
        && let Some(next) = g.steps.iter().find(|s| !p.done.contains(&s.id))
    {
        lines.push(format!(
            "  next: {} {} {}",
            escape(&next.id),
            escape(&next.tool),
            escape(&next.args.to_string())
        ));
    }
    lines
}

fn stop(cmd: GuideStopCmd) -> Result<ExitStatus, Error> {
    let home = bir_home()?;
    let project = project_dir(cmd.project.as_deref())?;
    let path = armed_guides::file_for(&home, &project);
    let _lock = armed_guides::lock(&home)
        .map_err(|e| Error::failure("cannot lock bir's guides").because(e))?;
    let old = armed_guides::read(&path)
        .map_err(|e| Error::failure("cannot read the guide").because(e))?;
    let Some(old) = old else {
        out(&format!("No guide armed in {}.", escape(&project)));
        return Ok(ExitStatus::Success);
    };
    std::fs::remove_file(&path)
        .map_err(|e| Error::failure("cannot remove the guide").because(e))?;
    drop(_lock);
    out(&format!(
        "Guide stopped ({}, {} of {} steps done).",
        phase_name(old.progress.phase),
        old.progress.done.len(),
        old.steps.len()
    ));
    guide_events(&project);
    Ok(ExitStatus::Success)
}

/// The hook events only a guide needs follow whether one is armed
/// (`hook_install::follow_guides`); a failure there leaves the guide as it
/// is and says what to run.
fn guide_events(project: &str) {
    if let Err(err) = crate::clientconfig::hook_install::follow_guides(Path::new(project)) {
        out(&format!(
            "  note: the hook events a guide needs were not updated ({}); run `bir install` again",
            escape(&err.to_string())
        ));
    }
}
