//! The recording service's credentials: `$BIR_HOME/credentials.json`.
//!
//! Credentials live in a 0700 directory, in a 0600 file, replaced
//! atomically (a private temp file, fsync, rename):
//!
//! ```json
//! {"service": "https://recordings.example.com", "token": "…",
//!  "refreshToken": "…", "expiresAt": "2026-12-01T10:00:00Z",
//!  "refreshUrl": "https://recordings.example.com/auth/refresh"}
//! ```
//!
//! Only `service` and `token` are required. `expiresAt` is an RFC 3339
//! time or Unix seconds.
//!
//! Invariants: the token is never printed (only a fingerprint), never put
//! in a URL, an argument we pass on, or a log line; `Debug` of anything
//! holding it shows `[REDACTED]`.

use std::fs::{self, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Context, Error};
use crate::home::{bir_home, ensure_private_dir};
use crate::secret::Secret;
use crate::time;

pub(crate) const CREDENTIALS_FILE: &str = "credentials.json";
/// A token counts as expired this long before its `expiresAt`.
const EXPIRY_MARGIN_SECS: i64 = 30;

/// What `credentials.json` holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Credentials {
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
    pub(crate) fn expires_unix(&self) -> Option<i64> {
        match self.expires_at.as_ref()? {
            Value::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)),
            Value::String(s) => time::parse_rfc3339(s),
            _ => None,
        }
    }

    /// True when `expiresAt` has passed (or is about to).
    pub(crate) fn expired(&self) -> bool {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0);
        self.expires_unix()
            .is_some_and(|at| at - EXPIRY_MARGIN_SECS <= now)
    }

    pub(crate) fn refresh_url(&self) -> String {
        self.refresh_url
            .clone()
            .unwrap_or_else(|| format!("{}/auth/refresh", self.service.trim_end_matches('/')))
    }
}

/// `$BIR_HOME/credentials.json`.
pub(crate) fn credentials_path() -> Option<PathBuf> {
    bir_home().map(|h| h.join(CREDENTIALS_FILE))
}

/// Reads the credentials file. `Ok(None)`: there is none (not logged in).
pub(crate) fn load(path: &Path) -> Result<Option<Credentials>, Error> {
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
        Err(e) => return Err(Error::failure(format!("cannot read {}", path.display())).because(e)),
    };
    let meta = file
        .metadata()
        .context(|| format!("cannot read {}", path.display()))?;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if !meta.is_file() || meta.uid() != me {
        return Err(Error::failure(format!(
            "{} is not a regular file of yours; refusing to use it (remove it and run `bir login`)",
            path.display()
        )));
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
        .context(|| format!("cannot read {}", path.display()))?;
    // serde's message names a line and column, never the content.
    let creds: Credentials = serde_json::from_str(&text).map_err(|e| {
        Error::failure(format!(
            "{} is not valid credentials JSON ({e}); run `bir login` again",
            path.display()
        ))
    })?;
    Ok(Some(creds))
}

/// Writes the credentials atomically: a fresh 0600 temp file in the same
/// private directory, fsync, rename over the old one, fsync the directory.
pub(crate) fn save(path: &Path, creds: &Credentials) -> io::Result<()> {
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
pub(crate) fn fingerprint(token: &str) -> String {
    let digest = crate::codec::sha256_hex(token.as_bytes());
    let head: String = token.chars().take(4).collect();
    if token.chars().count() >= 20 {
        format!("{head}… (sha256:{})", &digest[..12])
    } else {
        format!("sha256:{}", &digest[..12])
    }
}

/// A token must fit in an HTTP header: visible ASCII, no spaces.
pub(crate) fn valid_token(token: &str) -> bool {
    !token.is_empty() && token.len() <= 16 * 1024 && token.bytes().all(|b| b.is_ascii_graphic())
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
