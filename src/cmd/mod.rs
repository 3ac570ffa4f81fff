//! `bir`'s commands: one file per command or command family, each next to
//! its own argh struct. A command parses, calls the engines below it and
//! prints through [`crate::output`]; an error goes to [`error::report`],
//! the one place that prints one.
//!
//! * [`runs`] — `bir runs` (list, show, export, rm); [`report`] — `bir
//!   report`; [`investigate`] — `bir investigate`;
//! * [`install`] — `bir install`/`uninstall`/`status`; [`wrap`] — `bir
//!   wrap`; [`doctor`] — `bir doctor`; [`setup`] — `bir setup`, the guided
//!   first run over install and doctor;
//! * [`login`] — `bir login`/`logout`/`whoami`; [`sync`] — `bir sync`;
//! * [`off`] — `bir off`/`on`; [`down`] — `bir down` (and the daemon's
//!   lines in `bir status` and `bir doctor`);
//! * [`replay`] — `bir scenario`/`replay`/`verify`/`mock`; [`guide`] —
//!   `bir guide`;
//! * [`version`] — `bir version`; [`typo`] — usage errors of the parser,
//!   with the nearest command for a mistyped one.

use argh::FromArgs;

use crate::cli::{Exit, print_version};
use crate::error;

pub(crate) mod doctor;
pub(crate) mod down;
pub(crate) mod guide;
pub(crate) mod install;
pub(crate) mod investigate;
pub(crate) mod login;
pub(crate) mod off;
pub(crate) mod replay;
pub(crate) mod report;
pub(crate) mod runs;
pub(crate) mod setup;
pub(crate) mod sync;
pub(crate) mod typo;
pub(crate) mod version;
pub(crate) mod wrap;

use doctor::DoctorCmd;
use down::DownCmd;
use guide::GuideCmd;
use install::{InstallCmd, StatusCmd, UninstallCmd};
use investigate::InvestigateCmd;
use login::{LoginCmd, LogoutCmd, WhoamiCmd};
use off::{OffCmd, OnCmd};
use replay::{MockCmd, ReplayCmd, ScenarioCmd, VerifyCmd};
use report::ReportCmd;
use runs::RunsCmd;
use setup::SetupCmd;
use sync::SyncCmd;
use version::VersionCmd;
use wrap::WrapCmd;

/// bir records what AI agents do with their tools. `bir proxy …` (or the
/// `bir-proxy` link) is the MCP proxy: see `bir proxy --help`. `bir hooks …`
/// (or `bir-hooks`) receives Claude Code hook events.
#[derive(FromArgs, Debug)]
pub(crate) struct CliArgs {
    /// print the version and exit
    #[argh(switch)]
    pub version: bool,

    #[argh(subcommand)]
    pub command: Option<CliCommand>,
}

#[derive(FromArgs, Debug)]
#[argh(subcommand)]
pub(crate) enum CliCommand {
    Version(VersionCmd),
    Runs(RunsCmd),
    Report(ReportCmd),
    Sync(SyncCmd),
    Login(LoginCmd),
    Logout(LogoutCmd),
    Whoami(WhoamiCmd),
    Wrap(WrapCmd),
    Install(InstallCmd),
    Uninstall(UninstallCmd),
    Status(StatusCmd),
    Doctor(DoctorCmd),
    Down(DownCmd),
    Off(OffCmd),
    On(OnCmd),
    Investigate(InvestigateCmd),
    Setup(SetupCmd),
    Scenario(ScenarioCmd),
    Replay(ReplayCmd),
    Verify(VerifyCmd),
    Mock(MockCmd),
    Guide(GuideCmd),
}

/// `bir <command>`: each command returns its outcome, and
/// [`error::report`] prints an error (the one place that does) and turns
/// the outcome into the exit status.
pub(crate) fn main(args: &[String]) -> Exit {
    let parsed: CliArgs = match typo::parse(args) {
        Ok(p) => p,
        Err(exit) => return exit,
    };
    let (command, outcome) = match parsed.command {
        _ if parsed.version => return print_version("bir"),
        Some(CliCommand::Version(cmd)) => return version::main(cmd),
        Some(CliCommand::Runs(cmd)) => ("bir runs", runs::main(cmd)),
        Some(CliCommand::Report(cmd)) => ("bir report", report::main(cmd)),
        Some(CliCommand::Sync(cmd)) => ("bir sync", sync::main(cmd)),
        Some(CliCommand::Login(cmd)) => ("bir login", login::login(cmd)),
        Some(CliCommand::Logout(cmd)) => ("bir logout", login::logout(cmd)),
        Some(CliCommand::Whoami(cmd)) => ("bir whoami", login::whoami(cmd)),
        Some(CliCommand::Wrap(cmd)) => ("bir wrap", wrap::main(cmd)),
        Some(CliCommand::Install(cmd)) => ("bir install", install::install(cmd)),
        Some(CliCommand::Uninstall(cmd)) => ("bir uninstall", install::uninstall(cmd)),
        Some(CliCommand::Status(cmd)) => ("bir status", install::status(cmd)),
        Some(CliCommand::Doctor(cmd)) => ("bir doctor", doctor::main(cmd)),
        Some(CliCommand::Down(cmd)) => ("bir down", down::down(cmd)),
        Some(CliCommand::Off(cmd)) => ("bir off", off::off(cmd)),
        Some(CliCommand::On(cmd)) => ("bir on", off::on(cmd)),
        Some(CliCommand::Setup(cmd)) => ("bir setup", setup::main(cmd)),
        Some(CliCommand::Investigate(cmd)) => ("bir investigate", investigate::main(cmd)),
        Some(CliCommand::Scenario(cmd)) => ("bir scenario", replay::scenario(cmd)),
        Some(CliCommand::Replay(cmd)) => ("bir replay", replay::replay(cmd)),
        Some(CliCommand::Verify(cmd)) => ("bir verify", replay::verify(cmd)),
        Some(CliCommand::Mock(cmd)) => ("bir mock", replay::mock(cmd)),
        Some(CliCommand::Guide(cmd)) => ("bir guide", guide::main(cmd)),
        None => (
            "bir",
            Err(error::Error::usage(
                "no command given. Run `bir --help` for the commands, or `bir-proxy --help` for the proxy.",
            )),
        ),
    };
    error::report(command, outcome).into()
}
