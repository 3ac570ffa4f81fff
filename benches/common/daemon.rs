//! What the two benchmarks of the recorder daemon (`daemon`, `hook_posts`)
//! share: the release binary, a private `BIR_HOME`, one HTTP exchange
//! with a server under test, and the percentiles they report. Included by
//! those two only (`#[path]`), so the other benchmarks do not carry it
//! unused.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::Duration;

/// The repository's root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Where a server under test answers: a port and the bearer token.
#[derive(Clone)]
pub struct Target {
    pub port: u16,
    pub token: String,
}

/// The `bir` measured: `BIR_BIN`, or `target/release/bir`; absolute, as
/// the `bir-hooks` link and `sh -c` need.
pub fn release_bir() -> PathBuf {
    let bin = std::env::var_os("BIR_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target/release/bir"));
    assert!(
        bin.exists(),
        "{} missing: cargo build --release",
        bin.display()
    );
    std::fs::canonicalize(&bin).unwrap()
}

/// A fresh scratch directory `bir-bench-<tag>-<pid>` under the system's
/// temporary one, and in it `home`, private (0700) as `BIR_HOME` must be:
/// `(scratch, home)`.
pub fn private_home(tag: &str) -> (PathBuf, PathBuf) {
    let tmp = std::env::temp_dir().join(format!("bir-bench-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let home = tmp.join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).unwrap();
    (tmp, home)
}

/// Sends `request` (head and body) to `t` on a connection of its own and
/// reads the answer to its end: the answer's status, 0 when the
/// connection failed or the answer is not HTTP.
pub fn exchange(t: &Target, request: &[u8]) -> u16 {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", t.port)) else {
        return 0;
    };
    let _ = s.set_nodelay(true);
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    if s.write_all(request).is_err() {
        return 0;
    }
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    std::str::from_utf8(&answer)
        .ok()
        .and_then(|a| a.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

/// The `p`th percentile of `sorted` (nearest rank), zero when empty.
pub fn pct(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// `d` in milliseconds.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
