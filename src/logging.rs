//! Diagnostics go to stderr, never stdout (stdout may be the relayed
//! protocol). `RUST_LOG` selects what is shown (default: warnings); every
//! line names the program and, for the proxy, the server it wraps.

use std::io::Write;
use std::sync::OnceLock;

use crate::cli::Role;

static PREFIX: OnceLock<String> = OnceLock::new();

/// Starts the logger for this personality. Safe to call once per process.
pub fn init(role: Role) {
    let _ = PREFIX.set(role.program_name().to_owned());
    let env = env_logger::Env::default().default_filter_or("warn");
    let _ = env_logger::Builder::from_env(env)
        .target(env_logger::Target::Stderr)
        .format(|out, record| {
            let prefix = PROXY_NAME
                .get()
                .map(String::as_str)
                .or(PREFIX.get().map(String::as_str))
                .unwrap_or("bir");
            writeln!(
                out,
                "{prefix}: {}: {}",
                record.level().as_str().to_lowercase(),
                record.args()
            )
        })
        .try_init();
}

static PROXY_NAME: OnceLock<String> = OnceLock::new();

/// Names the wrapped server in every later log line (`bir-proxy[github]`).
pub fn set_server_name(name: &str) {
    let _ = PROXY_NAME.set(format!("bir-proxy[{name}]"));
}
