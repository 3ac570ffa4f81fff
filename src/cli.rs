//! Command lines: which personality was asked for, and the arguments of each.
//!
//! One executable answers to three names. The basename of `argv[0]` decides
//! (`bir-proxy`, `bir-hooks`, `bir`; a `.exe` suffix and any directory are
//! ignored); for plain `bir`, the first argument may name the role instead
//! (`bir proxy …` is `bir-proxy …`). Role detection is pure and unit-tested.
//!
//! This module is a leaf of the command layer: every argh struct, [`Exit`],
//! [`parse_args`] and the version text live here, and it imports nothing
//! from the crate but the [`Secret`](crate::secret::Secret) type a flag
//! parses into. The commands import it; it never imports them.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use crate::error::ExitStatus;
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
    /// The hidden recorder daemon (`bir daemon`), started by its client.
    Daemon,
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
            Role::Daemon => "bir daemon",
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
        Some("daemon") => (Role::Daemon, 1),
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

    /// start the server (with --url: connect) only when a request needs it:
    /// answer `initialize`, the lists and `ping` from the last snapshot
    /// recorded for the same command line or URL (also BIR_PROXY_LAZY=1);
    /// without one, start at once
    #[argh(switch)]
    pub lazy: bool,

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

    /// serve this recording (a scenario file, or a run id) instead of
    /// relaying; a command after `--` is the real server, for
    /// `--on-miss passthrough`
    #[argh(option)]
    pub replay: Option<String>,

    /// with --replay: keyed (default), ordered, strict or tool
    #[argh(option, long = "match")]
    pub match_mode: Option<String>,

    /// with --replay: error (default) or passthrough (read-only tools only)
    #[argh(option, default = "String::from(\"error\")")]
    pub on_miss: String,

    /// the server command and its arguments, after `--`
    #[argh(positional, greedy)]
    pub command: Vec<String>,
}

/// Receive a Claude Code hook event: `bir-hooks <Event>` with the event's
/// JSON on stdin. The event goes to the recorder daemon (started on demand);
/// the hook always exits 0 and never disturbs the session.
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

/// Stop the recorder daemon (it finishes every open run first). It starts
/// again on demand when a hook or a proxy needs it.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "down")]
pub struct DownCmd {
    /// how long to wait for it to exit, in milliseconds (default 10000)
    #[argh(option, default = "10000")]
    pub timeout_ms: u64,
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

/// How a personality wants the process to end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
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
pub fn parse_args<T: FromArgs>(program: &str, args: &[String]) -> Result<T, Exit> {
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
            eprint!("{}", early.output);
            eprintln!("Run {program} --help for more information.");
            ExitStatus::Usage.into()
        }
    })
}

/// Prints `<program> <version> (build <hash>)` to stdout.
pub fn print_version(program: &str) -> Exit {
    #[expect(clippy::print_stdout, reason = "the version is the command's output")]
    {
        println!("{}", version_line(program));
    }
    ExitStatus::Success.into()
}

// ---- `runs`

/// List, show, export and remove recorded runs.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "runs")]
pub struct RunsCmd {
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
}

#[derive(FromArgs, Debug)]
#[argh(subcommand)]
pub enum RunsAction {
    Show(ShowCmd),
    Export(ExportCmd),
    Rm(RmCmd),
}

/// Draw a run as a timeline of its steps.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "show")]
pub struct ShowCmd {
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
pub struct ExportCmd {
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
pub struct RmCmd {
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

// ---- `report`

/// Write a run as one self-contained HTML page (no network requests; open
/// it from disk in any browser).
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "report")]
pub struct ReportCmd {
    /// the run: its id, a unique prefix of it, or `latest`
    #[argh(positional, default = "String::from(\"latest\")")]
    pub run: String,

    /// where to write the page (default: $BIR_HOME/reports/<run>.html)
    #[argh(option, short = 'o')]
    pub output: Option<PathBuf>,

    /// open the page in a browser (xdg-open or open), else print its path
    #[argh(switch)]
    pub open: bool,

    /// keep the page up to date while the run is live (the page reloads
    /// itself); return when the run ends
    #[argh(switch)]
    pub follow: bool,

    /// fetch the run from the recording service (its whole id, or `latest`)
    #[argh(switch)]
    pub remote: bool,
}

// ---- `setup`

/// The guided first run: find the MCP clients here, show what `bir install`
/// would change, ask once, install, check with `bir doctor`.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "setup")]
pub struct SetupCmd {
    /// make the changes shown without asking (needed without a terminal)
    #[argh(switch)]
    pub yes: bool,

    /// the project directory (default: the current directory)
    #[argh(option)]
    pub project: Option<PathBuf>,

    /// where Claude Code's hooks go: user (default), project or none (as
    /// for `bir install --hooks`)
    #[argh(option, default = "String::from(\"user\")")]
    pub hooks: String,

    /// how long `bir doctor` waits for each server, in milliseconds
    /// (default 15000)
    #[argh(option, default = "15000")]
    pub timeout_ms: u64,

    /// wrapped servers start (remote ones: connect) only when a request
    /// needs them
    /// (`bir install --lazy`)
    #[argh(switch)]
    pub lazy: bool,
}

// ---- `investigate`

/// Show what went wrong or changed in a run: failed calls with what led to
/// them, loops, steps slower than usual, servers whose tools changed, and
/// gaps in the record.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "investigate")]
pub struct InvestigateCmd {
    /// the run: its id, a unique prefix of it, or `latest` (default)
    #[argh(positional, default = "String::from(\"latest\")")]
    pub run: String,

    /// print the findings as one JSON document
    #[argh(switch)]
    pub json: bool,
}

// ---- `sync`

/// Send runs the recording service has not acknowledged yet.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "sync")]
pub struct SyncCmd {}

// ---- `login`

/// Sign in to a recording service: save its URL and your token.
///
/// Without --token the token is read from standard input (without echo on
/// a terminal). Piped input may also be the JSON document your service
/// issued, with token, refreshToken, expiresAt and refreshUrl.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "login")]
pub struct LoginCmd {
    /// the service's base URL (default: BIR_SERVICE_URL, or the one you
    /// logged in to before)
    #[argh(option)]
    pub service: Option<String>,

    /// the token (visible in your shell history and the process list:
    /// prefer standard input)
    #[argh(option)]
    pub token: Option<crate::secret::Secret>,
}

/// Forget the recording service's credentials.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "logout")]
pub struct LogoutCmd {}

/// Show which recording service runs go to, and which token (fingerprint
/// only).
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "whoami")]
pub struct WhoamiCmd {}

// ---- `install wrap`

/// Print a server entry that runs the server through bir-proxy, or write it
/// into a config file's server map (--config FILE --name NAME).
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "wrap")]
pub struct WrapCmd {
    /// the server's name in recordings (default: --name, else derived from
    /// the command)
    #[argh(option)]
    pub server_name: Option<String>,

    /// write the entry into this JSON file instead of printing it
    #[argh(option)]
    pub config: Option<PathBuf>,

    /// the entry's key in the file's server map (required with --config)
    #[argh(option)]
    pub name: Option<String>,

    /// the server map's key in the file (default mcpServers; VS Code uses
    /// servers, Zed context_servers)
    #[argh(option, default = "String::from(\"mcpServers\")")]
    pub map_key: String,

    /// the file may hold comments and trailing commas (VS Code, Zed)
    #[argh(switch)]
    pub jsonc: bool,

    /// replace an existing entry of that name
    #[argh(switch)]
    pub force: bool,

    /// print the change as a diff and write nothing
    #[argh(switch)]
    pub dry_run: bool,

    /// the server command and its arguments, after `--`
    #[argh(positional, greedy)]
    pub command: Vec<String>,
}

// ---- `install commands`

/// Wrap this project's MCP servers with bir-proxy (Claude Code).
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "install")]
pub struct InstallCmd {
    /// the client to configure (today: claude-code; others: use `bir wrap
    /// --config`)
    #[argh(option)]
    pub client: Option<String>,

    /// wrap only this server (repeatable); also wraps a `.mcp.json` server
    /// Claude Code has not asked about yet (never a rejected one), or a
    /// remote server the client signs in itself
    #[argh(option)]
    pub server: Vec<String>,

    /// the project directory (default: the current directory)
    #[argh(option)]
    pub project: Option<PathBuf>,

    /// print the exact diff and change nothing
    #[argh(switch)]
    pub dry_run: bool,

    /// wrap `.mcp.json` servers in place instead of copying them into the
    /// local scope (also BIR_WRAP_MCP_JSON=1)
    #[argh(switch)]
    pub mcp_json: bool,

    /// wrap the stdio servers of this JSON file (any client) in place
    #[argh(option)]
    pub config: Option<PathBuf>,

    /// with --config: the server map's key (default mcpServers)
    #[argh(option, default = "String::from(\"mcpServers\")")]
    pub map_key: String,

    /// with --config: the file may hold comments and trailing commas
    #[argh(switch)]
    pub jsonc: bool,

    /// where to register the Claude Code hooks that record whole sessions:
    /// user (default: ~/.claude/settings.json), project
    /// (<project>/.claude/settings.json, loaded only when Claude Code starts
    /// in that directory and trusts it) or none
    #[argh(option, default = "String::from(\"user\")")]
    pub hooks: String,

    /// with --client codex|gemini|copilot|cursor|vscode: register that
    /// agent's hooks in its user (default) or project hook file
    #[argh(option)]
    pub scope: Option<String>,

    /// call-id injection for MCP calls of hosts that send no
    /// `_meta["claudecode/toolUseId"]`: inject (PreToolUse adds
    /// `__bir_call_id__` to a bound server's arguments; the server sees it),
    /// off, or meta (the default: never touch arguments). Written on the
    /// PreToolUse hook; without it, what is registered stays
    #[argh(option)]
    pub correlate: Option<String>,

    /// never inject a call id, whatever BIR_CORRELATE says (same as
    /// --correlate off)
    #[argh(switch)]
    pub no_correlation: bool,

    /// wrapped servers start (remote ones: connect) only when a request
    /// needs them
    /// (`bir-proxy --lazy`; applies to the entries this run wraps)
    #[argh(switch)]
    pub lazy: bool,
    /// also install bir's Claude Code plugin (a hooks module that streams
    /// the model's words and each turn's answer to the recorder daemon over
    /// its private Unix socket; Claude Code 2.1.332 or newer)
    #[argh(switch, long = "mod")]
    pub with_mod: bool,

    /// serve this recorded scenario instead of the --server entries
    /// (`bir-proxy --replay FILE -- original`); `bir uninstall --server
    /// NAME` switches back
    #[argh(option)]
    pub replay: Option<PathBuf>,
}

/// Undo `bir install`: restore the entries bir wrapped.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "uninstall")]
pub struct UninstallCmd {
    /// every project on this machine, not just the current one
    #[argh(switch)]
    pub all: bool,

    /// only this server (repeatable)
    #[argh(option)]
    pub server: Vec<String>,

    /// only this client's changes, in every project (e.g. cursor)
    #[argh(option)]
    pub client: Option<String>,

    /// only the changes in this file
    #[argh(option)]
    pub config: Option<PathBuf>,

    /// the project directory (default: the current directory)
    #[argh(option)]
    pub project: Option<PathBuf>,

    /// print the exact diff and change nothing
    #[argh(switch)]
    pub dry_run: bool,
}

/// Show which MCP servers are wrapped, per client and scope.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "status")]
pub struct StatusCmd {
    /// the project directory (default: the current directory)
    #[argh(option)]
    pub project: Option<PathBuf>,
}

// ---- `install doctor`

/// Check that every wrapped MCP server starts and answers through bir-proxy.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "doctor")]
pub struct DoctorCmd {
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

/// Switch recording off: everywhere, or (`--here`) in this directory and below.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "off")]
pub struct OffCmd {
    /// only in the current directory (and its subdirectories)
    #[argh(switch)]
    pub here: bool,
}

/// Switch recording back on (removes the switch `bir off` set; `--here`:
/// the one of the current directory).
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "on")]
pub struct OnCmd {
    /// only the current directory's switch
    #[argh(switch)]
    pub here: bool,
}

// ---- `scenario`, `replay`, `verify`, `mock` (reusing runs)

/// Turn runs into editable scenarios and edit them.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "scenario")]
pub struct ScenarioCmd {
    #[argh(subcommand)]
    pub action: ScenarioAction,
}

#[derive(FromArgs, Debug)]
#[argh(subcommand)]
pub enum ScenarioAction {
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
pub struct ScenarioDeriveCmd {
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
pub struct ScenarioParamCmd {
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
pub struct ScenarioVolatileCmd {
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
pub struct ScenarioIgnoreCmd {
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
pub struct ScenarioPinCmd {
    #[argh(positional)]
    pub file: PathBuf,
    #[argh(positional)]
    pub step: String,
}

/// Unpin a step.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "unpin")]
pub struct ScenarioUnpinCmd {
    #[argh(positional)]
    pub file: PathBuf,
    #[argh(positional)]
    pub step: String,
}

/// Override a step's safety class: auto, confirm or skip (auto counts only
/// with --trust-scenario).
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "safety")]
pub struct ScenarioSafetyCmd {
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
pub struct ScenarioCheckCmd {
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
pub struct ScenarioShowCmd {
    #[argh(positional)]
    pub file: String,
}

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
    /// do not journal this replay as a run
    #[argh(switch)]
    pub no_record: bool,
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
    /// count the scenario's own allow lists and `safety: auto` overrides
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
    /// do not journal this verification as a run
    #[argh(switch)]
    pub no_record: bool,
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

/// Serve a recorded server over stdio as an MCP server.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "mock")]
pub struct MockCmd {
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

    #[test]
    fn a_token_on_the_command_line_is_not_in_debug() {
        use argh::FromArgs;
        let cmd =
            LoginCmd::from_args(&["login"], &["--token", "tok_supersecret_cli"]).expect("parse");
        assert!(!format!("{cmd:?}").contains("supersecret"));
        assert_eq!(
            cmd.token.as_ref().map(crate::secret::Secret::expose),
            Some("tok_supersecret_cli")
        );
    }
}

// ---- `guide` (guided replay in Claude Code)

/// Guide Claude Code through a recorded scenario: the next session in this
/// project gets the outline, calls that differ only in parameter or
/// volatile slots are pinned to the scenario's values (asking the user
/// unless bir can prove Claude Code would not have asked), anything else
/// hands over to the model.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "guide")]
pub struct GuideCmd {
    #[argh(subcommand)]
    pub action: GuideAction,
}

#[derive(FromArgs, Debug)]
#[argh(subcommand)]
pub enum GuideAction {
    Start(GuideStartCmd),
    Status(GuideStatusCmd),
    Stop(GuideStopCmd),
}

/// Arm a guide for the next Claude Code session in this project.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "start")]
pub struct GuideStartCmd {
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
}

/// Show the guide armed in this project and how far it got.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "status")]
pub struct GuideStatusCmd {
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
pub struct GuideStopCmd {
    /// the project directory (default: the current one)
    #[argh(option)]
    pub project: Option<PathBuf>,
}
