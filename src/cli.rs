//! Command lines: which personality was asked for, and the arguments of each.
//!
//! One executable answers to three names. The basename of `argv[0]` decides
//! (`bir-proxy`, `bir-hooks`, `bir`; a `.exe` suffix and any directory are
//! ignored); for plain `bir`, the first argument may name the role instead
//! (`bir proxy …` is `bir-proxy …`). Role detection is pure and unit-tested.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use argh::FromArgs;

/// The personality this process runs as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// `bir-proxy`: the stdio MCP proxy.
    Proxy,
    /// `bir-hooks`: the Claude Code hook receiver.
    Hooks,
    /// The hidden scriptable fake MCP server used by the tests.
    TestPeer,
    /// `bir`: the command-line tool.
    Cli,
}

impl Role {
    /// The name a user types for this role, used in help and diagnostics.
    pub fn program_name(self) -> &'static str {
        match self {
            Role::Proxy => "bir-proxy",
            Role::Hooks => "bir-hooks",
            Role::TestPeer => "bir testpeer",
            Role::Cli => "bir",
        }
    }
}

/// Decides the role from `argv[0]` and the first argument. Returns the role
/// and how many leading arguments (after `argv[0]`) were used to choose it.
pub fn detect_role(argv0: &OsStr, first_arg: Option<&str>) -> (Role, usize) {
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
        _ => (Role::Cli, 0),
    }
}

/// Relay an MCP server over stdio, byte for byte, and report each tool call.
///
/// The MCP client starts `bir-proxy` as if it were the server; the proxy
/// starts the real server (without a shell) and relays newline-delimited
/// JSON-RPC both ways.
///
/// With `--url`, the server is remote (Streamable HTTP or the legacy HTTP+SSE
/// transport) and no command is given.
///
/// Environment: BIR_UPSTREAM_MAX_MESSAGE_BYTES (largest message accepted from
/// the server, default 134217728), BIR_PROXY_STAY_UP=1 (stay up answering
/// errors after the server died), BIR_UPSTREAM_HEADERS (remote: a JSON object
/// of header name to value, read once and removed from the environment),
/// BIR_UPSTREAM_CONNECT_TIMEOUT_MS (remote: default 10000), RUST_LOG
/// (diagnostics on stderr, e.g. RUST_LOG=bir=debug).
#[derive(FromArgs, Debug)]
pub struct ProxyArgs {
    /// the server's name in logs and step reports (default: from the command)
    #[argh(option)]
    pub server_name: Option<String>,

    /// write every relayed message and each step report to this JSONL file
    #[argh(option)]
    pub transcript: Option<PathBuf>,

    /// if the server dies, start it again once and replay the handshake
    #[argh(switch)]
    pub restart: bool,

    /// a remote MCP server's URL (instead of a command)
    #[argh(option)]
    pub url: Option<String>,

    /// remote transport: auto (default), http (Streamable HTTP) or sse
    /// (legacy HTTP+SSE)
    #[argh(option)]
    pub transport: Option<String>,

    /// a header sent to the remote server, 'Name: value' (repeatable; wins
    /// over BIR_UPSTREAM_HEADERS)
    #[argh(option)]
    pub header: Vec<String>,

    /// print the version and exit
    #[argh(switch)]
    pub version: bool,

    /// the server command and its arguments, after `--`
    #[argh(positional, greedy)]
    pub command: Vec<String>,
}

/// Receive Claude Code hook events (not built yet: every event is answered
/// with an empty, valid reply so the session is never disturbed).
#[derive(FromArgs, Debug)]
pub struct HooksArgs {
    /// print the version and exit
    #[argh(switch)]
    pub version: bool,

    /// the hook event name and any further arguments
    #[argh(positional, greedy)]
    pub rest: Vec<String>,
}

/// Run the scripted fake MCP server used by bir's own tests.
#[derive(FromArgs, Debug)]
pub struct TestPeerArgs {
    /// the JSON script describing how to behave
    #[argh(positional)]
    pub script: PathBuf,

    /// append every line received on stdin to this file
    #[argh(option)]
    pub log: Option<PathBuf>,
}

/// bir records what AI agents do with their tools. `bir proxy …` (or the
/// `bir-proxy` link) is the MCP proxy: see `bir proxy --help`. `bir hooks …`
/// (or `bir-hooks`) receives Claude Code hook events.
#[derive(FromArgs, Debug)]
pub struct CliArgs {
    /// print the version and exit
    #[argh(switch)]
    pub version: bool,

    #[argh(subcommand)]
    pub command: Option<CliCommand>,
}

#[derive(FromArgs, Debug)]
#[argh(subcommand)]
pub enum CliCommand {
    Version(VersionCmd),
    Runs(crate::runs::RunsCmd),
    Sync(crate::sync::SyncCmd),
    Login(crate::login::LoginCmd),
    Logout(crate::login::LogoutCmd),
    Whoami(crate::login::WhoamiCmd),
    Wrap(crate::install::wrap::WrapCmd),
    Install(crate::install::commands::InstallCmd),
    Uninstall(crate::install::commands::UninstallCmd),
    Status(crate::install::commands::StatusCmd),
    Doctor(crate::install::doctor::DoctorCmd),
}

/// Print the version and the build it came from.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "version")]
pub struct VersionCmd {}

/// `bir 0.1.0 (build 1a2b3c4d5e)`.
pub fn version_line(program: &str) -> String {
    format!(
        "{program} {} (build {})",
        env!("CARGO_PKG_VERSION"),
        env!("BIR_BUILD")
    )
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
    }

    #[test]
    fn odd_argv0() {
        assert_eq!(role("", None), (Role::Cli, 0));
        assert_eq!(role("/", Some("proxy")), (Role::Proxy, 1));
        assert_eq!(role("bir-proxyx", None), (Role::Cli, 0));
    }
}
