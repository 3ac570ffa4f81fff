//! `bir login`, `bir logout`, `bir whoami`: the credentials for the
//! recording service.
//!
//! Credentials live in `$BIR_HOME/credentials.json` (a 0700 directory, a
//! 0600 file, replaced atomically: a private temp file, fsync, rename):
//!
//! ```json
//! {"service": "https://recordings.example.com", "token": "…",
//!  "refreshToken": "…", "expiresAt": "2026-12-01T10:00:00Z",
//!  "refreshUrl": "https://recordings.example.com/auth/refresh"}
//! ```
//!
//! Only `service` and `token` are required. `expiresAt` is an RFC 3339
//! time or Unix seconds. How the token is refreshed is the README's
//! "Recording service: the auth contract"; the HTTP side lives in
//! `record/remote.rs`.
//!
//! Invariants: the token is never printed (only a fingerprint), never put
//! in a URL, an argument we pass on, or a log line; `Debug` of anything
//! holding it shows `[REDACTED]`.

use std::fmt;
use std::fs::{self, OpenOptions};
use std::io::{self, BufRead, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use argh::FromArgs;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Exit;
use crate::output::out;
use crate::record::remote;
use crate::record::store::{bir_home, ensure_private_dir};

pub const CREDENTIALS_FILE: &str = "credentials.json";
/// A token counts as expired this long before its `expiresAt`.
const EXPIRY_MARGIN_SECS: i64 = 30;

/// A credential string. `Debug` never shows it; only [`Secret::expose`]
/// does, at the one place it goes on the wire.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Secret {
        Secret(s.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

/// `--token T` parses straight into a `Secret`, so even `Debug` of the
/// parsed command line does not show it.
impl argh::FromArgValue for Secret {
    fn from_arg_value(value: &str) -> Result<Self, String> {
        Ok(Secret::new(value))
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[REDACTED]")
    }
}

/// What `credentials.json` holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Credentials {
    /// The service's base URL (`https://…`, no trailing slash).
    pub service: String,
    pub token: Secret,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<Secret>,
    /// RFC 3339 (`2026-12-01T10:00:00Z`) or Unix seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Value>,
    /// Where to refresh (default `{service}/auth/refresh`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_url: Option<String>,
}

impl Credentials {
    /// `expiresAt` as Unix seconds, when it is set and readable.
    pub fn expires_unix(&self) -> Option<i64> {
        match self.expires_at.as_ref()? {
            Value::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)),
            Value::String(s) => parse_rfc3339(s),
            _ => None,
        }
    }

    /// True when `expiresAt` has passed (or is about to).
    pub fn expired(&self) -> bool {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0);
        self.expires_unix()
            .is_some_and(|at| at - EXPIRY_MARGIN_SECS <= now)
    }

    pub fn refresh_url(&self) -> String {
        self.refresh_url
            .clone()
            .unwrap_or_else(|| format!("{}/auth/refresh", self.service.trim_end_matches('/')))
    }
}

/// `$BIR_HOME/credentials.json`.
pub fn credentials_path() -> Option<PathBuf> {
    bir_home().map(|h| h.join(CREDENTIALS_FILE))
}

/// Reads the credentials file. `Ok(None)`: there is none (not logged in).
pub fn load(path: &Path) -> Result<Option<Credentials>, String> {
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
    {
        Ok(f) => f,
        // Not there, or a file stands where one of its directories should
        // (then there are no credentials either; the proxy's warning about
        // the store says what is wrong).
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
            ) =>
        {
            return Ok(None);
        }
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if !meta.is_file() || meta.uid() != me {
        return Err(format!(
            "{} is not a regular file of yours; refusing to use it (remove it and run `bir login`)",
            path.display()
        ));
    }
    if meta.mode() & 0o077 != 0 {
        log::warn!(
            "{} was readable by others; its mode is now 0600 (consider a new token)",
            path.display()
        );
        let _ = fs::set_permissions(path, fs::Permissions::from_mode(0o600));
    }
    let mut text = String::new();
    file.take(1 << 20)
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    // serde's message names a line and column, never the content.
    let creds: Credentials = serde_json::from_str(&text).map_err(|e| {
        format!(
            "{} is not valid credentials JSON ({e}); run `bir login` again",
            path.display()
        )
    })?;
    Ok(Some(creds))
}

/// Writes the credentials atomically: a fresh 0600 temp file in the same
/// private directory, fsync, rename over the old one, fsync the directory.
pub fn save(path: &Path, creds: &Credentials) -> io::Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| io::Error::other("credentials path has no directory"))?;
    ensure_private_dir(dir)?;
    let json = serde_json::to_vec_pretty(creds).map_err(io::Error::other)?;
    let tmp = dir.join(format!(
        ".{CREDENTIALS_FILE}.{}.{}.tmp",
        std::process::id(),
        crate::record::model::uuid_v4()
    ));
    let written = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)?;
        f.write_all(&json)?;
        f.write_all(b"\n")?;
        f.sync_all()?;
        fs::rename(&tmp, path)?;
        if let Ok(d) = fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written
}

/// A printable stand-in for a token: its first 4 characters (for tokens
/// long enough that this gives nothing away) and a sha256 prefix.
pub fn fingerprint(token: &str) -> String {
    let digest = crate::record::model::sha256_hex(token.as_bytes());
    let head: String = token.chars().take(4).collect();
    if token.chars().count() >= 20 {
        format!("{head}… (sha256:{})", &digest[..12])
    } else {
        format!("sha256:{}", &digest[..12])
    }
}

/// A token must fit in an HTTP header: visible ASCII, no spaces.
pub fn valid_token(token: &str) -> bool {
    !token.is_empty() && token.len() <= 16 * 1024 && token.bytes().all(|b| b.is_ascii_graphic())
}

/// Parses `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)` to Unix seconds.
pub fn parse_rfc3339(s: &str) -> Option<i64> {
    let s = s.trim();
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> { s.get(r)?.parse().ok() };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if b[13] != b':' || b[16] != b':' || !(1..=12).contains(&mo) || !(1..=31).contains(&d) {
        return None;
    }
    let mut rest = &s[19..];
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        rest = &frac[digits..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        _ => {
            let sign = match rest.as_bytes().first()? {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let oh: i64 = rest.get(1..3)?.parse().ok()?;
            let om: i64 = rest.get(4..6)?.parse().ok()?;
            if rest.len() != 6 {
                return None;
            }
            sign * (oh * 3600 + om * 60)
        }
    };
    Some(days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + sec - offset)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Hinnant).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

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
    pub token: Option<Secret>,
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

/// What was read from standard input.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Issued {
    token: String,
    #[serde(default)]
    refresh_token: Option<String>,
    #[serde(default)]
    expires_at: Option<Value>,
    #[serde(default)]
    refresh_url: Option<String>,
}

pub fn login(cmd: LoginCmd) -> Exit {
    let Some(path) = credentials_path() else {
        eprintln!("bir login: no home directory; set BIR_HOME to say where credentials go");
        return Exit::Code(1);
    };
    let previous = load(&path).ok().flatten();
    let service = cmd
        .service
        .or_else(remote::service_url_from_env)
        .or_else(|| previous.as_ref().map(|c| c.service.clone()));
    let Some(service) = service else {
        eprintln!(
            "bir login: which recording service? Give its URL: bir login --service https://recordings.example.com"
        );
        return Exit::Code(2);
    };
    let service = match remote::parse_service_url(&service) {
        Ok(s) => s,
        Err(msg) => {
            eprintln!("bir login: {msg}");
            return Exit::Code(2);
        }
    };
    let issued = match cmd.token {
        Some(token) => {
            eprintln!(
                "bir login: note: a token given with --token shows in your shell history and the process list; `bir login` reads it from standard input instead"
            );
            Issued {
                token: token.expose().to_owned(),
                refresh_token: None,
                expires_at: None,
                refresh_url: None,
            }
        }
        None => match read_token(&service) {
            Ok(i) => i,
            Err(msg) => {
                eprintln!("bir login: {msg}");
                return Exit::Code(1);
            }
        },
    };
    let token = issued.token.trim().to_owned();
    if !valid_token(&token) {
        eprintln!(
            "bir login: that token is empty or contains spaces or control characters; paste it again"
        );
        return Exit::Code(2);
    }
    if let Some(url) = &issued.refresh_url
        && let Err(msg) = remote::parse_service_url(url)
    {
        eprintln!("bir login: refreshUrl: {msg}");
        return Exit::Code(2);
    }
    let creds = Credentials {
        service: service.clone(),
        token: Secret::new(token),
        refresh_token: issued
            .refresh_token
            .map(|t| Secret::new(t.trim()))
            .filter(|t| valid_token(t.expose())),
        expires_at: issued.expires_at,
        refresh_url: issued.refresh_url,
    };
    if let Err(err) = save(&path, &creds) {
        eprintln!("bir login: cannot write {}: {err}", path.display());
        return Exit::Code(1);
    }
    out(&format!(
        "Logged in to {service} with token {}.\nCredentials: {} (mode 0600). Runs recorded from now on are sent there; `bir sync` sends the runs recorded before.",
        fingerprint(creds.token.expose()),
        path.display()
    ));
    Exit::Code(0)
}

/// Reads the token from stdin: without echo on a terminal, else one line
/// (or a JSON document).
fn read_token(service: &str) -> Result<Issued, String> {
    // SAFETY: isatty only inspects the descriptor.
    let tty = unsafe { libc::isatty(0) } == 1;
    let text = if tty {
        eprint!("Token for {service}: ");
        let _ = io::stderr().flush();
        let line = read_line_without_echo().map_err(|e| format!("cannot read the token: {e}"))?;
        eprintln!();
        line
    } else {
        let mut text = String::new();
        io::stdin()
            .lock()
            .take(1 << 20)
            .read_to_string(&mut text)
            .map_err(|e| format!("cannot read the token from standard input: {e}"))?;
        text
    };
    let trimmed = text.trim();
    if trimmed.starts_with('{') {
        return serde_json::from_str::<Issued>(trimmed).map_err(|e| {
            format!("standard input looks like JSON but is not {{\"token\": …}} ({e})")
        });
    }
    let first = trimmed.lines().next().unwrap_or("").trim().to_owned();
    if first.is_empty() {
        return Err(
            "no token on standard input. Paste it at the prompt, or: echo \"$TOKEN\" | bir login --service URL"
                .into(),
        );
    }
    Ok(Issued {
        token: first,
        refresh_token: None,
        expires_at: None,
        refresh_url: None,
    })
}

/// One line from the terminal with echo off (restored afterwards, also on
/// error).
fn read_line_without_echo() -> io::Result<String> {
    // SAFETY: termios is plain data; tcgetattr fills it for fd 0.
    let mut saved: libc::termios = unsafe { std::mem::zeroed() };
    // SAFETY: fd 0 is a terminal (checked by the caller).
    let have_termios = unsafe { libc::tcgetattr(0, &mut saved) } == 0;
    if have_termios {
        let mut quiet = saved;
        quiet.c_lflag &= !libc::ECHO;
        quiet.c_lflag |= libc::ECHONL;
        // SAFETY: a termios derived from the one the terminal gave us.
        unsafe { libc::tcsetattr(0, libc::TCSANOW, &quiet) };
    }
    let mut line = String::new();
    let read = io::stdin().lock().read_line(&mut line);
    if have_termios {
        // SAFETY: restoring the terminal's own settings.
        unsafe { libc::tcsetattr(0, libc::TCSANOW, &saved) };
    }
    read.map(|_| line)
}

pub fn logout(_cmd: LogoutCmd) -> Exit {
    let Some(path) = credentials_path() else {
        eprintln!("bir logout: no home directory; set BIR_HOME");
        return Exit::Code(1);
    };
    match fs::remove_file(&path) {
        Ok(()) => {
            out(&format!(
                "Logged out: removed {}. Runs are recorded locally only{}.",
                path.display(),
                if remote::service_url_from_env().is_some() {
                    " (but BIR_SERVICE_URL is set: runs still go there, without a token)"
                } else {
                    ""
                }
            ));
            Exit::Code(0)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            out(&format!(
                "Not logged in ({} does not exist).",
                path.display()
            ));
            Exit::Code(0)
        }
        Err(e) => {
            eprintln!("bir logout: cannot remove {}: {e}", path.display());
            Exit::Code(1)
        }
    }
}

pub fn whoami(_cmd: WhoamiCmd) -> Exit {
    let Some(path) = credentials_path() else {
        eprintln!("bir whoami: no home directory; set BIR_HOME");
        return Exit::Code(1);
    };
    let creds = match load(&path) {
        Ok(c) => c,
        Err(msg) => {
            eprintln!("bir whoami: {msg}");
            return Exit::Code(1);
        }
    };
    let env_url = remote::service_url_from_env();
    let Some(creds) = creds else {
        match env_url {
            Some(url) => out(&format!(
                "Not logged in. Runs go to {} (BIR_SERVICE_URL) without a token.",
                remote::display_url(&url)
            )),
            None => out(
                "Not logged in: runs are recorded locally only. `bir login --service URL` sends them to a recording service.",
            ),
        }
        return Exit::Code(1);
    };
    let mut lines = vec![
        format!("service: {}", remote::display_url(&creds.service)),
        format!("token:   {}", fingerprint(creds.token.expose())),
    ];
    if let Some(at) = &creds.expires_at {
        let state = if creds.expired() { " (expired)" } else { "" };
        let at = match at {
            Value::String(s) => crate::runs::escape(s),
            other => other.to_string(),
        };
        lines.push(format!("expires: {at}{state}"));
    }
    lines.push(format!(
        "refresh: {}",
        if creds.refresh_token.is_some() {
            format!("yes, at {}", remote::display_url(&creds.refresh_url()))
        } else {
            "no refresh token".into()
        }
    ));
    lines.push(format!("file:    {}", path.display()));
    if remote::env_service() == remote::EnvService::Off {
        lines.push("note:    BIR_SERVICE_URL=off: runs are not sent while it is set".into());
    }
    if let Some(url) = env_url
        && remote::origin(&url) != remote::origin(&creds.service)
    {
        lines.push(format!(
            "note:    BIR_SERVICE_URL={} overrides the service; the token is not sent there",
            remote::display_url(&url)
        ));
    }
    out(&lines.join("\n"));
    Exit::Code(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_a_token() {
        let creds = Credentials {
            service: "https://s.example".into(),
            token: Secret::new("tok_supersecret_1234567890"),
            refresh_token: Some(Secret::new("ref_supersecret_0987654321")),
            expires_at: None,
            refresh_url: None,
        };
        let shown = format!("{creds:?} {creds:#?}");
        assert!(!shown.contains("supersecret"), "{shown}");
        assert!(shown.contains("[REDACTED]"));
        // But the file format keeps it.
        let json = serde_json::to_string(&creds).expect("json");
        assert!(json.contains("\"token\":\"tok_supersecret_1234567890\""));
        assert!(json.contains("\"refreshToken\""));
    }

    #[test]
    fn a_token_on_the_command_line_is_not_in_debug() {
        use argh::FromArgs;
        let cmd =
            LoginCmd::from_args(&["login"], &["--token", "tok_supersecret_cli"]).expect("parse");
        assert!(!format!("{cmd:?}").contains("supersecret"));
        assert_eq!(
            cmd.token.as_ref().map(Secret::expose),
            Some("tok_supersecret_cli")
        );
    }

    #[test]
    fn fingerprints_hide_the_token() {
        let long = "abcd_0123456789abcdefghij";
        let fp = fingerprint(long);
        assert!(fp.starts_with("abcd… (sha256:"), "{fp}");
        assert!(!fp.contains("0123456789"));
        // A short token shows no characters at all.
        assert!(fingerprint("short").starts_with("sha256:"));
        assert_ne!(fingerprint("a"), fingerprint("b"));
    }

    #[test]
    fn rfc3339_times() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            parse_rfc3339("2026-11-30T06:36:26.123Z"),
            Some(1_796_020_586)
        );
        assert_eq!(
            parse_rfc3339("2026-11-30T07:36:26+01:00"),
            Some(1_796_020_586)
        );
        assert_eq!(parse_rfc3339("2000-02-29T00:00:00Z"), Some(951_782_400));
        assert_eq!(parse_rfc3339("yesterday"), None);
        assert_eq!(parse_rfc3339("2026-13-01T00:00:00Z"), None);
    }

    #[test]
    fn expiry() {
        let mut c = Credentials {
            service: "https://s".into(),
            token: Secret::new("t"),
            refresh_token: None,
            expires_at: None,
            refresh_url: None,
        };
        assert!(!c.expired());
        c.expires_at = Some(Value::from(1));
        assert!(c.expired());
        c.expires_at = Some(Value::from("2999-01-01T00:00:00Z"));
        assert!(!c.expired());
        assert_eq!(c.refresh_url(), "https://s/auth/refresh");
    }

    #[test]
    fn saved_atomically_and_privately() {
        let dir = std::env::temp_dir().join(format!("bir-login-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let path = dir.join(CREDENTIALS_FILE);
        let creds = Credentials {
            service: "https://s".into(),
            token: Secret::new("tok"),
            refresh_token: None,
            expires_at: None,
            refresh_url: None,
        };
        save(&path, &creds).expect("save");
        save(&path, &creds).expect("save again (replace)");
        let meta = fs::metadata(&path).expect("meta");
        assert_eq!(meta.mode() & 0o777, 0o600);
        assert_eq!(fs::metadata(&dir).expect("dir").mode() & 0o777, 0o700);
        let back = load(&path).expect("load").expect("some");
        assert_eq!(back.token.expose(), "tok");
        // No temp file left behind.
        let names: Vec<_> = fs::read_dir(&dir)
            .expect("ls")
            .filter_map(|e| e.ok())
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        // A file others can read is tightened on load.
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).expect("chmod");
        load(&path).expect("load").expect("some");
        assert_eq!(fs::metadata(&path).expect("meta").mode() & 0o777, 0o600);
        let _ = fs::remove_dir_all(&dir);
    }
}
