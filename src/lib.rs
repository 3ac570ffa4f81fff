//! bir records what AI agents do with their tools.
//!
//! # Layout
//!
//! The modules follow the data flow and sit in layers: a module imports
//! only from layers below its own (`ARCHITECTURE.md` has the table, the
//! codemap and the invariants; `tests/it/layers.rs` enforces the table).
//!
//! * foundation (leaves): `codec`, `home`, [`jsonrpc`], `output`, `secret`,
//!   `sys`, `time`, `urls`;
//! * vocabulary: `cli` (every argh struct, `Exit`, the version text),
//!   [`redact`] (the single choke point every recorded payload passes);
//! * plumbing: `logging`, `observe` (what the relay hands off its hot path),
//!   `switch` (`bir off`/`on`: whether recording is off here);
//! * runs: `record` (the recorder sink, the journal, the local store);
//! * engines: `service` (the recording service), `bound` (the bound tier);
//! * daemon: `daemon` (the recorder daemon, hidden `bir daemon`, and its
//!   client: find, start, talk to it; `bir down`);
//! * personalities: `proxy` (`bir-proxy`), `hooks` (`bir-hooks`),
//!   `testpeer` (hidden: a scriptable fake MCP server);
//! * commands: `install`, `login`, `report`, `runs`, `sync` (thin, over
//!   the above).
//!
//! # Public surface
//!
//! Deliberately small; everything else is crate-private, so the compiler
//! reports what is unused. Public are only what the integration tests and
//! benchmarks drive without going through the binary:
//!
//! * [`main`] — the entry point of the one executable;
//! * [`jsonrpc::scan::LineScanner`] (and the types of its answers) — the
//!   envelope scanner, benchmarked per line (`benches/scan.rs`);
//! * [`redact::Redactor`] and [`redact::RedactConfig`] — the redactor,
//!   benchmarked for throughput (`benches/redact.rs`);
//! * [`read_journal`] (with [`ReadOutcome`]) and [`base64_decode`] — the
//!   golden harness (`tests/it/golden.rs`) reads the run bir stored with
//!   bir's own journal reader, and decodes its inputs with bir's codec,
//!   rather than carrying a second copy of either;
//! * [`frame_journal_record`] — the synthetic store the `bir runs`
//!   benchmark and tests generate (`tests/it/synth.rs`) is written with
//!   bir's own journal framing.

mod bound;
mod cli;
mod codec;
mod daemon;
mod error;
mod guide;
mod home;
mod hooks;
mod install;
mod investigate;
pub mod jsonrpc;
mod logging;
mod login;
mod observe;
mod otlp;
mod output;
mod proxy;
mod record;
pub mod redact;
mod replay;
mod report;
mod reuse;
mod runs;
mod secret;
mod service;
mod switch;
mod sync;
mod sys;
mod testpeer;
mod time;
mod urls;

pub use codec::base64_decode;
pub use record::journal::{ReadOutcome, frame as frame_journal_record, read as read_journal};

use std::process::ExitCode;

use cli::{CliArgs, CliCommand, Exit, Role, parse_args, print_version};

/// Entry point shared by every personality.
pub fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let argv0 = args.first().cloned().unwrap_or_default();
    let rest: Vec<String> = match args[1.min(args.len())..]
        .iter()
        .map(|a| a.clone().into_string())
        .collect::<Result<_, _>>()
    {
        Ok(v) => v,
        Err(bad) => {
            let err = error::Error::usage(format!(
                "argument is not valid UTF-8: {}",
                bad.to_string_lossy()
            ));
            return finish(error::report("bir", Err(err)).into());
        }
    };
    let (role, used) = cli::detect_role(&argv0, rest.first().map(String::as_str));
    let rest = &rest[used..];
    logging::init(role);
    let exit = match role {
        Role::Proxy => proxy::main(rest),
        Role::Hooks => hooks::main(rest),
        Role::TestPeer => testpeer::main(rest),
        Role::Daemon => daemon::server::main(rest),
        Role::Cli => cli_main(rest),
    };
    finish(exit)
}

/// Turns an [`Exit`] into the process's end.
fn finish(exit: Exit) -> ExitCode {
    match exit {
        Exit::Code(code) => ExitCode::from(code),
        Exit::Signal(signal) => {
            proxy::signals::die_of(signal);
            // Not reached unless the signal could not kill us.
            ExitCode::from(128u8.saturating_add(signal as u8))
        }
    }
}

/// `bir <command>`: each command returns its outcome, and
/// [`error::report`] prints an error (the one place that does) and turns
/// the outcome into the exit status.
fn cli_main(args: &[String]) -> Exit {
    let parsed: CliArgs = match parse_args(Role::Cli.program_name(), args) {
        Ok(p) => p,
        Err(exit) => return exit,
    };
    let (command, outcome) = match parsed.command {
        _ if parsed.version => return print_version("bir"),
        Some(CliCommand::Version(_)) => return print_version("bir"),
        Some(CliCommand::Runs(cmd)) => ("bir runs", runs::main(cmd)),
        Some(CliCommand::Report(cmd)) => ("bir report", report::main(cmd)),
        Some(CliCommand::Sync(cmd)) => ("bir sync", sync::main(cmd)),
        Some(CliCommand::Login(cmd)) => ("bir login", login::login(cmd)),
        Some(CliCommand::Logout(cmd)) => ("bir logout", login::logout(cmd)),
        Some(CliCommand::Whoami(cmd)) => ("bir whoami", login::whoami(cmd)),
        Some(CliCommand::Wrap(cmd)) => ("bir wrap", install::wrap::main(cmd)),
        Some(CliCommand::Install(cmd)) => ("bir install", install::commands::install(cmd)),
        Some(CliCommand::Uninstall(cmd)) => ("bir uninstall", install::commands::uninstall(cmd)),
        Some(CliCommand::Status(cmd)) => ("bir status", install::commands::status(cmd)),
        Some(CliCommand::Doctor(cmd)) => ("bir doctor", install::doctor::main(cmd)),
        Some(CliCommand::Down(cmd)) => ("bir down", daemon::control::down(cmd)),
        Some(CliCommand::Off(cmd)) => ("bir off", switch::off(cmd)),
        Some(CliCommand::On(cmd)) => ("bir on", switch::on(cmd)),
        Some(CliCommand::Setup(cmd)) => ("bir setup", install::setup::main(cmd)),
        Some(CliCommand::Investigate(cmd)) => ("bir investigate", investigate::main(cmd)),
        Some(CliCommand::Scenario(cmd)) => ("bir scenario", reuse::scenario(cmd)),
        Some(CliCommand::Replay(cmd)) => ("bir replay", reuse::replay(cmd)),
        Some(CliCommand::Verify(cmd)) => ("bir verify", reuse::verify(cmd)),
        Some(CliCommand::Mock(cmd)) => ("bir mock", reuse::mock(cmd)),
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
