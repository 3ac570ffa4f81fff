//! Diagnostics go to stderr, never stdout (stdout may be the relayed
//! protocol). `RUST_LOG` selects what is shown (default: warnings); every
//! line names the program and, for the proxy, the server it wraps.

use std::io::Write;
use std::sync::OnceLock;

use crate::cli::Role;

static PREFIX: OnceLock<String> = OnceLock::new();

/// Starts the logger for this personality. Safe to call once per process.
///
/// `bir-hooks` runs on every tool call and its stderr is the host's: it
/// sets up nothing unless `RUST_LOG` asks, and then logs to
/// `$BIR_HOME/logs/hooks.log`. The daemon logs at `info` by default (its
/// stderr is `$BIR_HOME/logs/daemon.log`).
pub(crate) fn init(role: Role) {
    let target = match role {
        Role::Hooks => {
            if std::env::var_os("RUST_LOG").is_none() {
                return;
            }
            match hooks_log() {
                Some(file) => env_logger::Target::Pipe(Box::new(file)),
                None => return,
            }
        }
        _ => env_logger::Target::Stderr,
    };
    let _ = PREFIX.set(role.program_name().to_owned());
    let default = if role == Role::Daemon { "info" } else { "warn" };
    let env = env_logger::Env::default().default_filter_or(default);
    let _ = env_logger::Builder::from_env(env)
        // ureq's debug lines print each request's headers, and an OTLP
        // exporter's headers are often credentials (`x-api-key`,
        // `x-honeycomb-team`): never below info, whatever RUST_LOG says.
        .filter_module("ureq", log::LevelFilter::Info)
        .target(target)
        .format(|out, record| {
            let prefix = PROXY_NAME
                .get()
                .map(String::as_str)
                .or(PREFIX.get().map(String::as_str))
                .unwrap_or("bir");
            // A line may carry outside text (a session id, a path, a
            // server's words): no control character reaches a terminal
            // that shows this stderr or a log read with `cat`.
            let line = format!(
                "{prefix}: {}: {}",
                record.level().as_str().to_lowercase(),
                record.args()
            );
            writeln!(out, "{}", crate::output::terminal_safe(&line))
        })
        .try_init();
}

static PROXY_NAME: OnceLock<String> = OnceLock::new();

/// Names the wrapped server in every later log line (`bir-proxy[github]`).
pub(crate) fn set_server_name(name: &str) {
    let _ = PROXY_NAME.set(format!("bir-proxy[{name}]"));
}

fn hooks_log() -> Option<std::fs::File> {
    let logs = crate::home::bir_home()?.join("logs");
    crate::home::ensure_private_dir(&logs).ok()?;
    crate::home::private_file()
        .create(true)
        .append(true)
        .open(logs.join("hooks.log"))
        .ok()
}
