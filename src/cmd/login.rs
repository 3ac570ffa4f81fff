//! `bir login`, `bir logout`, `bir whoami`: thin commands over the
//! recording service's credentials ([`crate::service::credentials`], which
//! describes `credentials.json`) and its URL rules
//! ([`crate::service::url`]). How the token is refreshed is
//! docs/recording-service.md, "The auth contract"; the HTTP side is
//! [`crate::service::client`].
//!
//! Invariants: the token is never printed (only a fingerprint), never put
//! in a URL, an argument we pass on, or a log line; `Debug` of anything
//! holding it shows `[REDACTED]`.

use argh::FromArgs;
use std::fs::{self};
use std::io::{self, BufRead, Read, Write};

use serde::Deserialize;
use serde_json::Value;

use crate::error::{Context, Error, ExitStatus};
use crate::output::out;
use crate::secret::Secret;
use crate::service::credentials::{
    Credentials, credentials_path, fingerprint, load, save, valid_token,
};
use crate::service::url as service_url;
use crate::urls;

/// Sign in to a recording service: save its URL and your token.
///
/// Without --token the token is read from standard input (without echo on
/// a terminal). Piped input may also be the JSON document your service
/// issued, with token, refreshToken, expiresAt and refreshUrl.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "login")]
pub(crate) struct LoginCmd {
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
pub(crate) struct LogoutCmd {}

/// Show which recording service runs go to, and which token (fingerprint
/// only).
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "whoami")]
pub(crate) struct WhoamiCmd {}

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

/// `bir login`: a bad URL or token is a usage error (exit status 2).
pub(crate) fn login(cmd: LoginCmd) -> Result<ExitStatus, Error> {
    let path = credentials_path().ok_or_else(|| {
        Error::failure("no home directory; set BIR_HOME to say where credentials go")
    })?;
    let previous = load(&path).ok().flatten();
    let service = cmd
        .service
        .or_else(service_url::service_url_from_env)
        .or_else(|| previous.as_ref().map(|c| c.service.clone()));
    let service = service.ok_or_else(|| {
        Error::usage(
            "which recording service? Give its URL: bir login --service https://recordings.example.com",
        )
    })?;
    let service =
        service_url::parse_service_url(&service).map_err(|e| e.with_status(ExitStatus::Usage))?;
    let issued = match cmd.token {
        Some(token) => {
            crate::output::note(
                "bir login: note: a token given with --token shows in your shell history and the process list; `bir login` reads it from standard input instead",
            );
            Issued {
                token: token.expose().to_owned(),
                refresh_token: None,
                expires_at: None,
                refresh_url: None,
            }
        }
        None => read_token(&service)?,
    };
    let token = issued.token.trim().to_owned();
    if !valid_token(&token) {
        return Err(Error::usage(
            "that token is empty or contains spaces or control characters; paste it again",
        ));
    }
    if let Some(url) = &issued.refresh_url
        && let Err(err) = service_url::parse_service_url(url)
    {
        return Err(Error::usage("refreshUrl").because(err));
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
    save(&path, &creds).context(|| format!("cannot write {}", path.display()))?;
    out(&format!(
        "Logged in to {service} with token {}.\nCredentials: {} (mode 0600). Runs recorded from now on are sent there; `bir sync` sends the runs recorded before.",
        fingerprint(creds.token.expose()),
        path.display()
    ));
    Ok(ExitStatus::Success)
}

/// Reads the token from stdin: without echo on a terminal, else one line
/// (or a JSON document).
fn read_token(service: &str) -> Result<Issued, Error> {
    // SAFETY: isatty only inspects the descriptor.
    let tty = unsafe { libc::isatty(0) } == 1;
    let text = if tty {
        crate::output::prompt(&format!("Token for {service}: "));
        let _ = io::stderr().flush();
        let line = read_line_without_echo().context(|| "cannot read the token".into())?;
        crate::output::note("");
        line
    } else {
        let mut text = String::new();
        io::stdin()
            .lock()
            .take(1 << 20)
            .read_to_string(&mut text)
            .context(|| "cannot read the token from standard input".into())?;
        text
    };
    let trimmed = text.trim();
    if trimmed.starts_with('{') {
        return serde_json::from_str::<Issued>(trimmed).map_err(|e| {
            Error::failure(format!(
                "standard input looks like JSON but is not {{\"token\": …}} ({e})"
            ))
        });
    }
    let first = trimmed.lines().next().unwrap_or("").trim().to_owned();
    if first.is_empty() {
        return Err(Error::failure(
            "no token on standard input. Paste it at the prompt, or: echo \"$TOKEN\" | bir login --service URL",
        ));
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

pub(crate) fn logout(_cmd: LogoutCmd) -> Result<ExitStatus, Error> {
    let path =
        credentials_path().ok_or_else(|| Error::failure("no home directory; set BIR_HOME"))?;
    match fs::remove_file(&path) {
        Ok(()) => {
            out(&format!(
                "Logged out: removed {}. Runs are recorded locally only{}.",
                path.display(),
                if service_url::service_url_from_env().is_some() {
                    " (but BIR_SERVICE_URL is set: runs still go there, without a token)"
                } else {
                    ""
                }
            ));
            Ok(ExitStatus::Success)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            out(&format!(
                "Not logged in ({} does not exist).",
                path.display()
            ));
            Ok(ExitStatus::Success)
        }
        Err(e) => Err(Error::failure(format!("cannot remove {}", path.display())).because(e)),
    }
}

/// `bir whoami`: fails (exit status 1) when not logged in.
pub(crate) fn whoami(_cmd: WhoamiCmd) -> Result<ExitStatus, Error> {
    let path =
        credentials_path().ok_or_else(|| Error::failure("no home directory; set BIR_HOME"))?;
    let creds = load(&path)?;
    let env_url = service_url::service_url_from_env();
    let Some(creds) = creds else {
        match env_url {
            Some(url) => out(&format!(
                "Not logged in. Runs go to {} (BIR_SERVICE_URL) without a token.",
                urls::display(&url)
            )),
            None => out(
                "Not logged in: runs are recorded locally only. `bir login --service URL` sends them to a recording service.",
            ),
        }
        return Ok(ExitStatus::Failure);
    };
    let mut lines = vec![
        format!("service: {}", urls::display(&creds.service)),
        format!("token:   {}", fingerprint(creds.token.expose())),
    ];
    if let Some(at) = &creds.expires_at {
        let state = if creds.expired() { " (expired)" } else { "" };
        let at = match at {
            Value::String(s) => crate::output::escape(s),
            other => other.to_string(),
        };
        lines.push(format!("expires: {at}{state}"));
    }
    lines.push(format!(
        "refresh: {}",
        if creds.refresh_token.is_some() {
            format!("yes, at {}", urls::display(&creds.refresh_url()))
        } else {
            "no refresh token".into()
        }
    ));
    lines.push(format!("file:    {}", path.display()));
    if service_url::env_service() == service_url::EnvService::Off {
        lines.push("note:    BIR_SERVICE_URL=off: runs are not sent while it is set".into());
    }
    if let Some(url) = env_url
        && service_url::origin(&url) != service_url::origin(&creds.service)
    {
        lines.push(format!(
            "note:    BIR_SERVICE_URL={} overrides the service; the token is not sent there",
            urls::display(&url)
        ));
    }
    out(&lines.join("\n"));
    Ok(ExitStatus::Success)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_on_the_command_line_is_not_in_debug() {
        let cmd =
            LoginCmd::from_args(&["login"], &["--token", "tok_supersecret_cli"]).expect("parse");
        assert!(!format!("{cmd:?}").contains("supersecret"));
        assert_eq!(
            cmd.token.as_ref().map(crate::secret::Secret::expose),
            Some("tok_supersecret_cli")
        );
    }
}
