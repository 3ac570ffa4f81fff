//! bir records what AI agents do with their tools.
//!
//! # Layout
//!
//! The crate follows the data flow (see `ARCHITECTURE.md` for the codemap and
//! the invariants):
//!
//! * [`cli`] — which personality runs (`bir`, `bir-proxy`, `bir-hooks`) and
//!   the arguments of each.
//! * [`jsonrpc`] — the sans-IO core: framing and envelope scanning of
//!   newline-delimited JSON-RPC, and the few messages bir writes itself.
//! * [`proxy`] — `bir-proxy`: the upstream child, the two relay pumps, the
//!   in-flight table and the lifecycle (signals, exit parity, restarts).
//! * [`observe`] — what the relay hands off its hot path: the bounded
//!   observation queue, step reports and the `--transcript` writer.
//! * [`redact`] — the single choke point every recorded payload passes
//!   through before a store, the network, a log or a terminal.
//! * [`testpeer`] — a scriptable fake MCP server for faults real servers will
//!   not produce on demand (hidden `bir testpeer`).
//! * [`record`] — runs: the Tier 2 recorder (an observer sink), the
//!   journal, the local store; [`redact`] is its single choke point.
//! * [`runs`] — `bir runs`: list, show, export, remove.
//! * [`login`] — `bir login`/`logout`/`whoami`: the recording service's
//!   credentials; [`sync`] — `bir sync`: send what the service has not
//!   acknowledged (the live sender is `record::remote`).
//! * [`hooks`] — `bir-hooks` (for now: answers every event harmlessly).
//! * [`install`] — `bir wrap`/`install`/`uninstall`/`status`/`doctor`: client
//!   configs, edited byte-preservingly and atomically, with a ledger to undo.

pub mod bound;
pub mod cli;
pub mod codec;
pub mod home;
pub mod hooks;
pub mod install;
pub mod jsonrpc;
pub mod logging;
pub mod login;
pub mod observe;
pub mod output;
pub mod proxy;
pub mod record;
pub mod redact;
pub mod runs;
pub mod secret;
pub mod service;
pub mod sync;
pub mod sys;
pub mod testpeer;
pub mod time;
pub mod urls;

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
            eprintln!(
                "bir: argument is not valid UTF-8: {}",
                bad.to_string_lossy()
            );
            return ExitCode::from(2);
        }
    };
    let (role, used) = cli::detect_role(&argv0, rest.first().map(String::as_str));
    let rest = &rest[used..];
    logging::init(role);
    let exit = match role {
        Role::Proxy => proxy::main(rest),
        Role::Hooks => hooks::main(rest),
        Role::TestPeer => testpeer::main(rest),
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

fn cli_main(args: &[String]) -> Exit {
    let parsed: CliArgs = match parse_args(Role::Cli.program_name(), args) {
        Ok(p) => p,
        Err(exit) => return exit,
    };
    match parsed.command {
        _ if parsed.version => print_version("bir"),
        Some(CliCommand::Version(_)) => print_version("bir"),
        Some(CliCommand::Runs(cmd)) => runs::main(cmd),
        Some(CliCommand::Sync(cmd)) => sync::main(cmd),
        Some(CliCommand::Login(cmd)) => login::login(cmd),
        Some(CliCommand::Logout(cmd)) => login::logout(cmd),
        Some(CliCommand::Whoami(cmd)) => login::whoami(cmd),
        Some(CliCommand::Wrap(cmd)) => install::wrap::main(cmd),
        Some(CliCommand::Install(cmd)) => install::commands::install(cmd),
        Some(CliCommand::Uninstall(cmd)) => install::commands::uninstall(cmd),
        Some(CliCommand::Status(cmd)) => install::commands::status(cmd),
        Some(CliCommand::Doctor(cmd)) => install::doctor::main(cmd),
        None => {
            eprintln!(
                "bir: no command given. Run `bir --help` for the commands, or `bir-proxy --help` for the proxy."
            );
            Exit::Code(2)
        }
    }
}
