//! bir records what AI agents do with their tools.
//!
//! # Layout
//!
//! The modules follow the data flow and sit in layers: a module imports
//! only from layers below its own (`ARCHITECTURE.md` has the table, the
//! codemap and the invariants; `tests/it/layers.rs` enforces the table).
//!
//! * foundation (leaves): `codec`, `home`, [`jsonrpc`], `output`, `secret`,
//!   `locks`, `time`, `urls`;
//! * vocabulary: `cli` (role detection, `Exit`, the version text),
//!   [`redact`] (the single choke point every recorded payload passes);
//! * plumbing: `logging`, `observe` (what the relay hands off its hot path),
//!   `switch` (`bir off`/`on`: whether recording is off here);
//! * runs: `record` (the recorder sink, the journal, the local store);
//! * engines: `service` (the recording service), `bound` (the bound tier),
//!   `replay`, `otlp`, `investigate` (a run's findings), `report` (a run
//!   as an HTML page);
//! * daemon: `daemon` (the recorder daemon, hidden `bir daemon`, and its
//!   client: find, start, talk to it);
//! * client configs: `clientconfig` (editing MCP clients' configs and the
//!   agents' hook files);
//! * personalities: `proxy` (`bir-proxy`), `hooks` (`bir-hooks`),
//!   `fakeserver` (hidden `bir testpeer`: a scriptable fake MCP server);
//! * commands: `cmd`, one file per `bir` command (thin, over the above).
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

// Stderr is for the one error path (`error::report`), logging, and the
// notes `output::note`/`prompt` print; a stray `eprintln!` fails the lint.
// (Crate-wide here rather than in Cargo.toml: the benchmarks and tests
// report on stderr freely.)
#![deny(clippy::print_stderr)]
// A module's interface is what its `pub(crate)` items say: a bare `pub` is
// only for the crate's public surface above (with `-D warnings`, a stray
// one fails the lint).
#![warn(unreachable_pub)]

mod bound;
mod cli;
mod clientconfig;
mod cmd;
mod codec;
mod daemon;
mod error;
mod fakeserver;
mod home;
mod hooks;
mod investigate;
pub mod jsonrpc;
mod locks;
mod logging;
mod observe;
mod otlp;
mod output;
mod proxy;
mod record;
pub mod redact;
mod replay;
mod report;
mod scope;
mod secret;
mod service;
mod switch;
mod time;
mod urls;

pub use codec::base64_decode;
pub use record::journal::{ReadOutcome, frame as frame_journal_record, read as read_journal};

use std::process::ExitCode;

use cli::{Exit, Role};

/// Entry point shared by every personality: picks the personality and
/// hands it the rest of the arguments (`bir`'s commands: `cmd::main`).
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
        Role::TestPeer => fakeserver::main(rest),
        Role::Daemon => daemon::server::main(rest),
        Role::Cli => cmd::main(rest),
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
