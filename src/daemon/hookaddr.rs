//! Where Claude Code's HTTP hooks reach the daemon: a loopback port and a
//! hook token that stay the same across daemon restarts, because the
//! user's settings file names them (`bir install --hooks http`).
//!
//! Kept in `$BIR_HOME/control/hooks.json` (0600, in the private `control/`
//! directory, written like the discovery file: a temporary file renamed
//! over the final name). `bir install` creates it the first time. The port
//! is the daemon's own kept port (`discovery::preferred_port`, the same
//! across restarts); a daemon that could not get it takes no hook token.
//!
//! The hook token is a defence in depth, not the credential: the settings
//! file that carries it may be readable by others. It admits `POST
//! /hook/<Event>` and nothing else (never `/shutdown`, `/sessions` or the
//! proxies' routes), and it is not the daemon's own bearer token, which
//! changes at every start and never leaves `daemon.json`.
//!
//! [`endpoint`] is the one place that decides the address.

use std::io;
use std::net::TcpListener;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::discovery;

/// What `control/hooks.json` holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct HookAddr {
    /// The loopback port the daemon listens on for hooks (and everything
    /// else it serves over TCP).
    pub port: u16,
    /// 64 hex digits; `Authorization: Bearer <token>` on a hook post.
    pub token: String,
}

impl HookAddr {
    /// `http://127.0.0.1:<port>/hook/<event>`.
    pub(crate) fn url(&self, event: &str) -> String {
        format!("http://127.0.0.1:{}/hook/{event}", self.port)
    }
}

/// `$BIR_HOME/control/hooks.json`.
pub(crate) fn path(home: &Path) -> PathBuf {
    discovery::control_dir(home).join("hooks.json")
}

/// The address already chosen, if any (the file passes the same checks as
/// the discovery file: ours, private, small, not a symlink).
pub(crate) fn read(home: &Path) -> Option<HookAddr> {
    let text = discovery::read_private(&path(home)).ok()??;
    let addr: HookAddr = serde_json::from_slice(&text).ok()?;
    (addr.port != 0 && addr.token.len() == 64).then_some(addr)
}

/// The hook address of `home`: the daemon's kept port (`control/port`,
/// chosen now if no daemon chose one yet) and the hook token chosen before
/// (or a fresh one), saved for every later install and daemon.
pub(crate) fn endpoint(home: &Path) -> io::Result<HookAddr> {
    let port = match discovery::preferred_port(home) {
        Some(port) => port,
        None => {
            let free = discovery::port_candidates(home)
                .find(|p| TcpListener::bind(("127.0.0.1", *p)).is_ok())
                .ok_or_else(|| io::Error::other("no free port for the daemon"))?;
            discovery::keep_port(home, free)?;
            free
        }
    };
    if let Some(addr) = read(home)
        && addr.port == port
    {
        return Ok(addr);
    }
    let token = match read(home) {
        Some(addr) => addr.token,
        None => new_token()?,
    };
    let addr = HookAddr { port, token };
    let body = serde_json::to_vec(&addr).map_err(io::Error::other)?;
    discovery::write_private(home, "hooks.json", &body)?;
    Ok(addr)
}

/// 256 bits from the OS's CSPRNG, as 64 hex digits.
fn new_token() -> io::Result<String> {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; 32];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| io::Error::other("the system's random source failed"))?;
    Ok(crate::codec::hex_lower(&bytes))
}
