//! `bir doctor`: proves the wrapped servers live.
//!
//! It resolves the Claude Code config the way Claude Code does, then starts
//! every wrapped entry exactly as the client would (the entry's command and
//! arguments, its `env` over the current environment with `${VAR}` /
//! `${VAR:-default}` expanded, the project as working directory,
//! `CLAUDE_PROJECT_DIR` set) and checks that it answers `initialize` and
//! `tools/list` within a deadline (the probe is `clientconfig::probe`). A
//! wrapped remote entry (`bir-proxy --url`, its headers in
//! `env.BIR_UPSTREAM_HEADERS`) is launched the same way. It also checks that each entry's program
//! exists and is executable, `$BIR_HOME`'s permissions, and that a
//! `bir-proxy` on `PATH` is this version.

use argh::FromArgs;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::Duration;

use super::install::resolve_for;
use crate::clientconfig::claude::Paths;
use crate::clientconfig::entry::{EntryKind, is_executable};
use crate::clientconfig::probe::{PathProxy, Probe, entry_launch, path_proxy, probe};
use crate::clientconfig::vocab::{Decision, Found, Scope};

use crate::error::{Error, ExitStatus};
use crate::output::out;

/// Check that every wrapped MCP server starts and answers through bir-proxy.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "doctor")]
pub(crate) struct DoctorCmd {
    /// the project directory (default: the current directory)
    #[argh(option)]
    pub project: Option<PathBuf>,

    /// only this client (default: Claude Code and every other client whose
    /// config exists)
    #[argh(option)]
    pub client: Option<String>,

    /// how long each server may take to answer initialize and tools/list,
    /// in milliseconds (default 15000)
    #[argh(option, default = "15000")]
    pub timeout_ms: u64,
}

fn check_home() -> String {
    let Some(home) = crate::home::bir_home() else {
        return "BIR_HOME: cannot be determined (set BIR_HOME or HOME)".into();
    };
    match crate::home::privacy_problems(&home) {
        None => format!(
            "BIR_HOME {}: not created yet (bir creates it, 0700, when needed)",
            home.display()
        ),
        Some(problems) if problems.is_empty() => {
            format!("BIR_HOME {}: ok (private)", home.display())
        }
        Some(problems) => format!(
            "BIR_HOME {}: PROBLEM: {}",
            home.display(),
            problems.join("; ")
        ),
    }
}

/// The line about `bir-proxy` on `PATH` ([`path_proxy`]), and whether it
/// is fine.
fn check_path_proxy() -> (String, bool) {
    match path_proxy(std::env::var_os("PATH").as_deref()) {
        PathProxy::NoPath => ("bir-proxy on PATH: PATH is not set".into(), true),
        PathProxy::Absent => (
            "bir-proxy on PATH: none (fine: entries use absolute paths)".into(),
            true,
        ),
        PathProxy::Same { path, version } => (
            format!("bir-proxy on PATH: {} ({version})", path.display()),
            true,
        ),
        PathProxy::Differs { path, theirs, mine } => (
            format!(
                "bir-proxy on PATH: PROBLEM: {} is \"{theirs}\", this bir is \"{mine}\" (reinstall, or remove the old one)",
                path.display()
            ),
            false,
        ),
        PathProxy::DoesNotRun { path, error } => (
            format!(
                "bir-proxy on PATH: PROBLEM: {} does not run: {error}",
                path.display()
            ),
            false,
        ),
    }
}

/// `bir doctor`: a table of every wrapped server; fails (exit status 1)
/// when a server or a check failed.
///
/// The phases, each a method of [`Doctor`]: the clients' entries read
/// ([`Doctor::gather`]); every wrapped entry started as its client would,
/// all in parallel, and their answers collected; the table printed; the
/// other checks (hooks, the mod, other agents' hooks, `$BIR_HOME`, the
/// daemon, live sessions, `bir-proxy` on `PATH`); the verdict.
pub(crate) fn main(cmd: DoctorCmd) -> Result<ExitStatus, Error> {
    let mut doctor = Doctor::gather(&cmd)?;
    let jobs = doctor.launch_probes();
    doctor.collect_probes(jobs);
    doctor.print_table();
    doctor.other_checks();
    Ok(doctor.verdict())
}

/// A section of the table: its header and the (entry, decision) pairs of
/// one client file.
type Section = (String, Vec<(Found, Decision)>);

/// A probe running: the row it answers (section, row), the entry's scope,
/// whether it is a remote entry, and the thread.
type ProbeJob = (usize, usize, Scope, bool, thread::JoinHandle<Probe>);

/// One `bir doctor`: what it checks and what it found so far.
struct Doctor {
    /// The project directory, absolute: where entries are started.
    cwd: PathBuf,
    /// How long each entry may take to answer.
    deadline: Duration,
    sections: Vec<Section>,
    /// Per section, per entry: its name and its line (`None` while its
    /// probe runs).
    rows: Vec<Vec<(String, Option<String>)>>,
    /// Claude Code's paths, when it is a target: its hooks are checked too.
    claude_paths: Option<Paths>,
    /// Its wrapped servers: the live check asks whether each one's proxy
    /// is bound in the sessions running here.
    claude_wrapped: Vec<String>,
    failures: usize,
}

impl Doctor {
    /// The entries of every client `--client` names (all by default).
    fn gather(cmd: &DoctorCmd) -> Result<Doctor, Error> {
        let project = cmd
            .project
            .clone()
            .unwrap_or_else(|| std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")));
        let deadline = Duration::from_millis(cmd.timeout_ms.max(100));
        let mut sections: Vec<Section> = Vec::new();
        let targets = crate::clientconfig::clients::targets(
            cmd.client.as_deref(),
            None,
            "mcpServers",
            false,
            &project,
        )?;
        let mut claude_paths = None;
        let mut claude_wrapped: Vec<String> = Vec::new();
        for t in targets {
            match t {
                crate::clientconfig::clients::Target::ClaudeCode => match resolve_for(&project) {
                    Ok((resolved, decisions)) => sections.push((
                        {
                            claude_wrapped = wrapped_names(&decisions);
                            claude_paths = Some(resolved.paths.clone());
                            format!(
                                "Claude Code — project {} (key \"{}\"), {}",
                                resolved.paths.project.display(),
                                resolved.local_key,
                                resolved.paths.claude_json.display()
                            )
                        },
                        decisions,
                    )),
                    Err(e) => return Err(e),
                },
                crate::clientconfig::clients::Target::File(cf) => {
                    match crate::clientconfig::clients::entries(&cf, &[]) {
                        Ok(d) => {
                            sections.push((format!("{} — {}", cf.label, cf.file.display()), d))
                        }
                        Err(e) => return Err(e),
                    }
                }
            }
        }
        let cwd = std::path::absolute(&project).unwrap_or(project.clone());
        let rows = vec![Vec::new(); sections.len()];
        Ok(Doctor {
            cwd,
            deadline,
            sections,
            rows,
            claude_paths,
            claude_wrapped,
            failures: 0,
        })
    }

    /// Launches every wrapped entry, all in parallel; the other entries get
    /// their line at once.
    fn launch_probes(&mut self) -> Vec<ProbeJob> {
        let deadline = self.deadline;
        let mut jobs = Vec::new();
        for (si, (_, decisions)) in self.sections.iter().enumerate() {
            for (found, decision) in decisions {
                let row = match (&found.kind, decision) {
                    (EntryKind::Wrapped(w), _) => {
                        let program_ok = Path::new(&w.proxy_command).is_absolute()
                            && is_executable(Path::new(&w.proxy_command));
                        if !program_ok {
                            Some(format!(
                                "FAILED   {} scope: the program {} does not exist or is not executable (run `bir install` again)",
                                found.scope.label(),
                                w.proxy_command
                            ))
                        } else {
                            match entry_launch(found, &self.cwd) {
                                Ok(l) => {
                                    let scope = found.scope;
                                    let ri = self.rows[si].len();
                                    let remote = w.remote.is_some();
                                    jobs.push((
                                        si,
                                        ri,
                                        scope,
                                        remote,
                                        thread::spawn(move || probe(&l, deadline)),
                                    ));
                                    None
                                }
                                Err(e) => Some(format!("FAILED   cannot read the entry: {e}")),
                            }
                        }
                    }
                    (_, Decision::Skip(why)) => Some(format!("-        not wrapped: {why}")),
                    _ => Some(format!(
                        "-        not wrapped ({} scope): run `bir install`",
                        found.scope.label()
                    )),
                };
                self.rows[si].push((found.name.clone(), row));
            }
        }
        jobs
    }

    /// Each probe's answer, as its entry's line.
    fn collect_probes(&mut self, jobs: Vec<ProbeJob>) {
        for (si, ri, scope, remote, job) in jobs {
            let probe = job.join().unwrap_or(Probe::Failed {
                why: "internal error".into(),
                stderr_tail: String::new(),
            });
            self.rows[si][ri].1 = Some(match probe {
                Probe::Ok { tools, server } => format!(
                    "OK       {} scope: initialize + tools/list answered through bir-proxy ({tools} tools, server \"{server}\")",
                    scope_label(scope)
                ),
                Probe::Failed { why, stderr_tail } => {
                    let mut s = format!("FAILED   {} scope: {why}", scope_label(scope));
                    if remote && stderr_tail.contains("Unrecognized argument: --url") {
                        s.push_str(
                            " (a remote entry: this bir-proxy does not take --url yet; it works once a bir with remote upstreams is installed)",
                        );
                    }
                    if !stderr_tail.is_empty() {
                        s.push_str("\n           stderr:");
                        for l in stderr_tail.lines() {
                            s.push_str("\n             ");
                            s.push_str(l);
                        }
                    }
                    s
                }
            });
        }
    }

    /// The table, a section per client file; a failed entry counts.
    fn print_table(&mut self) {
        for ((header, _), rows) in self.sections.iter().zip(&self.rows) {
            out(header);
            if rows.is_empty() {
                out("  no MCP servers configured");
            }
            let width = rows.iter().map(|(n, _)| n.len()).max().unwrap_or(4).max(4);
            for (name, row) in rows {
                let row = row.as_deref().unwrap_or("?");
                if row.starts_with("FAILED") {
                    self.failures += 1;
                }
                out(&format!("  {name:<width$}  {row}"));
            }
        }
    }

    /// The checks beyond the servers: Claude Code's hooks and the mod,
    /// other agents' hooks, `$BIR_HOME`, the daemon and the sessions it
    /// records here, `bir-proxy` on `PATH`.
    fn other_checks(&mut self) {
        if let Some(paths) = &self.claude_paths {
            let (lines, problems) = crate::clientconfig::hook_install::doctor(
                paths,
                crate::clientconfig::plugin::installed(paths),
            );
            for l in lines {
                out(&l);
            }
            self.failures += problems;
            let socket = super::down::live_socket();
            let (lines, problems) = crate::clientconfig::plugin::doctor(paths, socket.as_deref());
            for l in lines {
                out(&l);
            }
            self.failures += problems;
        }
        for l in crate::clientconfig::hosthooks::status_lines(&self.cwd) {
            out(&l);
        }
        out(&check_home());
        let (line, ok) = super::down::doctor_line();
        out(&line);
        if !ok {
            self.failures += 1;
        }
        let (lines, problems) = super::down::doctor_sessions(&self.cwd, &self.claude_wrapped);
        for l in lines {
            out(&l);
        }
        self.failures += problems;
        let (line, ok) = check_path_proxy();
        out(&line);
        if !ok {
            self.failures += 1;
        }
    }

    /// The last line and the exit status.
    fn verdict(&self) -> ExitStatus {
        let answered = self
            .rows
            .iter()
            .flatten()
            .filter(|(_, r)| r.as_deref().is_some_and(|r| r.starts_with("OK ")))
            .count();
        if self.failures > 0 {
            out(&format!("{} problem(s) found.", self.failures));
            ExitStatus::Failure
        } else if answered == 0 {
            // Nothing was checked: saying every server answers would claim a
            // check that did not happen.
            out("No wrapped servers to check: none is wrapped here (`bir install` wraps them).");
            ExitStatus::Success
        } else {
            out("All wrapped servers answer.");
            ExitStatus::Success
        }
    }
}

/// The names of the wrapped entries among `decisions`, once each.
fn wrapped_names(decisions: &[(Found, Decision)]) -> Vec<String> {
    let mut names: Vec<String> = decisions
        .iter()
        .filter(|(f, _)| matches!(f.kind, EntryKind::Wrapped(_)))
        .map(|(f, _)| f.name.clone())
        .collect();
    names.sort();
    names.dedup();
    names
}

fn scope_label(s: Scope) -> &'static str {
    s.label()
}
