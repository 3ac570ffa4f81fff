//! Command lines: which personality was asked for, and the arguments of each.
//!
//! One executable answers to three names. The basename of `argv[0]` decides
//! (`bir-proxy`, `bir-hooks`, `bir`; a `.exe` suffix and any directory are
//! ignored); for plain `bir`, the first argument may name the role instead
//! (`bir proxy …` is `bir-proxy …`). Role detection is pure and unit-tested.
//!
//! What every personality shares lives here: [`Exit`], [`parse_args`] and
//! the version text. Each personality's and each command's argh struct
//! lives next to the code that runs it (`crate::cmd` for `bir`'s
//! commands); this module imports none of them.

use std::ffi::OsStr;
use std::path::Path;

use crate::error::ExitStatus;
use argh::FromArgs;

/// The personality this process runs as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// `bir-proxy`: the stdio MCP proxy.
    Proxy,
    /// `bir-hooks`: the Claude Code hook receiver.
    Hooks,
    /// The hidden scriptable fake MCP server used by the tests.
    TestPeer,
    /// The hidden recorder daemon (`bir daemon`), started by its client.
    Daemon,
    /// `bir`: the command-line tool.
    Cli,
}

impl Role {
    /// The name a user types for this role, used in help and diagnostics.
    pub(crate) fn program_name(self) -> &'static str {
        match self {
            Role::Proxy => "bir-proxy",
            Role::Hooks => "bir-hooks",
            Role::TestPeer => "bir testpeer",
            Role::Daemon => "bir daemon",
            Role::Cli => "bir",
        }
    }
}

/// Decides the role from `argv[0]` and the first argument. Returns the role
/// and how many leading arguments (after `argv[0]`) were used to choose it.
pub(crate) fn detect_role(argv0: &OsStr, first_arg: Option<&str>) -> (Role, usize) {
    let stem = Path::new(argv0)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = stem
        .strip_suffix(".exe")
        .or_else(|| stem.strip_suffix(".EXE"))
        .unwrap_or(&stem);
    match stem {
        "bir-proxy" => return (Role::Proxy, 0),
        "bir-hooks" => return (Role::Hooks, 0),
        _ => {}
    }
    match first_arg {
        Some("proxy") => (Role::Proxy, 1),
        Some("hooks") => (Role::Hooks, 1),
        Some("testpeer") => (Role::TestPeer, 1),
        Some("daemon") => (Role::Daemon, 1),
        _ => (Role::Cli, 0),
    }
}

/// `bir 0.1.0 (build 1a2b3c4d5e)`.
pub(crate) fn version_line(program: &str) -> String {
    format!(
        "{program} {} (build {})",
        env!("CARGO_PKG_VERSION"),
        env!("BIR_BUILD")
    )
}

/// How a personality wants the process to end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exit {
    /// Exit with this status.
    Code(u8),
    /// Die of this signal, as the wrapped server did (exit parity: the host
    /// sees exactly what it would have seen without bir).
    Signal(i32),
}

impl From<ExitStatus> for Exit {
    fn from(status: ExitStatus) -> Exit {
        Exit::Code(status.code())
    }
}

/// Parses arguments with argh, printing help or errors the way argh means.
/// `Err` carries the exit to take (0 after `--help`, 2 after a usage error).
pub(crate) fn parse_args<T: FromArgs>(program: &str, args: &[String]) -> Result<T, Exit> {
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    T::from_args(&[program], &refs).map_err(|early| {
        if early.status.is_ok() {
            // Help text is what the user asked for: it goes to stdout.
            #[expect(clippy::print_stdout, reason = "help output requested by the user")]
            {
                print!("{}", early.output);
            }
            ExitStatus::Success.into()
        } else {
            crate::output::prompt(&early.output);
            crate::output::note(&format!("Run {program} --help for more information."));
            ExitStatus::Usage.into()
        }
    })
}

/// Prints `<program> <version> (build <hash>)` to stdout.
pub(crate) fn print_version(program: &str) -> Exit {
    #[expect(clippy::print_stdout, reason = "the version is the command's output")]
    {
        println!("{}", version_line(program));
    }
    ExitStatus::Success.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn role(argv0: &str, first: Option<&str>) -> (Role, usize) {
        detect_role(OsStr::new(argv0), first)
    }

    #[test]
    fn argv0_decides() {
        assert_eq!(role("bir-proxy", None), (Role::Proxy, 0));
        assert_eq!(
            role("/usr/local/bin/bir-proxy", Some("--")),
            (Role::Proxy, 0)
        );
        assert_eq!(role("C:/bin/bir-hooks.exe", None), (Role::Hooks, 0));
        assert_eq!(role("bir-proxy.exe", Some("proxy")), (Role::Proxy, 0));
    }

    #[test]
    fn first_argument_decides_for_plain_bir() {
        assert_eq!(role("bir", Some("proxy")), (Role::Proxy, 1));
        assert_eq!(role("./target/debug/bir", Some("hooks")), (Role::Hooks, 1));
        assert_eq!(role("bir", Some("runs")), (Role::Cli, 0));
        assert_eq!(role("bir", None), (Role::Cli, 0));
        assert_eq!(role("bir", Some("daemon")), (Role::Daemon, 1));
        assert_eq!(role("bir-hooks", Some("daemon")), (Role::Hooks, 0));
    }

    #[test]
    fn odd_argv0() {
        assert_eq!(role("", None), (Role::Cli, 0));
        assert_eq!(role("/", Some("proxy")), (Role::Proxy, 1));
        assert_eq!(role("bir-proxyx", None), (Role::Cli, 0));
    }
}
