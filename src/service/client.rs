//! The blocking HTTP client of the recording service: one request per
//! record, the retry policy, token refresh, no redirects.

use std::fmt;
use std::io::Read;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

use super::credentials::{self, Credentials};
use super::url::{EnvService, env_service, origin, parse_service_url};
use super::wire::WireRequest;
use crate::error::Error;
use crate::secret::Secret;
use crate::urls;

/// Total deadline of one request, unless `BIR_SERVICE_TIMEOUT_MS` says.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest `Retry-After` honoured before the single retry.
pub(crate) const RETRY_AFTER_CAP: Duration = Duration::from_secs(10);
/// Wait before the retry of a 429/503 without `Retry-After`.
pub(super) const BUSY_RETRY_DELAY: Duration = Duration::from_secs(1);
/// Wait before the retry of a connection that never reached the service.
const UNREACHED_RETRY_DELAY: Duration = Duration::from_millis(500);
/// How much of an answer is read (and thrown away, or parsed for refresh).
const MAX_ANSWER_BYTES: u64 = 64 * 1024;
/// The most of one read-side answer (a run with its steps, or a page of
/// runs) bir reads; a run's steps are capped when recorded, so a real
/// answer is far smaller.
const MAX_READ_BYTES: u64 = 64 << 20;
/// Token refreshes one client attempts at most.
const MAX_REFRESHES: u8 = 2;

/// Where runs go, resolved from `BIR_SERVICE_URL` and the credentials file.
#[derive(Debug, Clone)]
pub(crate) struct ServiceConfig {
    /// Normalised base URL.
    pub base: String,
    /// Present only when they belong to `base`'s origin.
    pub creds: Option<Credentials>,
    pub creds_path: Option<PathBuf>,
    pub timeout: Duration,
}

impl ServiceConfig {
    /// `Ok(None)`: no service configured (or `BIR_SERVICE_URL=off`).
    pub(crate) fn resolve() -> Result<Option<ServiceConfig>, Error> {
        let env = env_service();
        if env == EnvService::Off {
            return Ok(None);
        }
        let creds_path = credentials::credentials_path();
        let creds = match &creds_path {
            Some(path) => credentials::load(path)?,
            None => None,
        };
        let base = match (&env, &creds) {
            (EnvService::Url(url), _) => url.clone(),
            (_, Some(c)) => c.service.clone(),
            _ => return Ok(None),
        };
        let base = parse_service_url(&base)?;
        // A token is only ever sent to the origin it was issued for.
        let creds = creds.filter(|c| {
            let same = origin(&c.service) == origin(&base);
            if !same {
                log::debug!(
                    "the saved token is for {}, not {}: sending without it",
                    urls::display(&c.service),
                    urls::display(&base)
                );
            }
            same
        });
        Ok(Some(ServiceConfig {
            base,
            creds,
            creds_path,
            timeout: timeout_from_env(),
        }))
    }
}

fn timeout_from_env() -> Duration {
    match std::env::var("BIR_SERVICE_TIMEOUT_MS") {
        Ok(v) => match v.trim().parse::<u64>() {
            Ok(ms) => Duration::from_millis(ms.clamp(100, 600_000)),
            Err(_) => {
                log::warn!(
                    "BIR_SERVICE_TIMEOUT_MS={v:?} is not a number of milliseconds; using 10000"
                );
                DEFAULT_TIMEOUT
            }
        },
        Err(_) => DEFAULT_TIMEOUT,
    }
}

/// Why a record was not delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FailKind {
    /// The service was never reached (refused, DNS, connect timeout).
    Unreachable,
    /// 429 or 503, twice.
    Busy,
    /// 401 that a refresh did not cure.
    Unauthorized,
    /// A 3xx: not followed.
    Redirected,
    /// Any other status.
    Status(u16),
    /// The TLS handshake failed (an untrusted or invalid certificate…).
    /// Never retried, never downgraded to an unverified connection.
    Tls,
    /// Reached, then failed (timeout while waiting, a reset).
    Transport,
}

#[derive(Debug, Clone)]
pub(crate) struct SendFailure {
    pub kind: FailKind,
    /// Short, safe to log: no token, no body, no query.
    pub detail: String,
}

impl SendFailure {
    /// True when the service as a whole is not taking records now (so
    /// trying the next run is pointless).
    pub(crate) fn service_down(&self) -> bool {
        matches!(
            self.kind,
            FailKind::Unreachable | FailKind::Busy | FailKind::Unauthorized | FailKind::Tls
        )
    }

    /// What the user can do about it.
    pub(crate) fn next_step(&self) -> &'static str {
        match self.kind {
            FailKind::Unreachable => {
                "check the service URL (`bir whoami`) and the network, then run `bir sync` again"
            }
            FailKind::Busy => "the service is busy; run `bir sync` again later",
            FailKind::Unauthorized => "sign in again with `bir login`, then run `bir sync`",
            FailKind::Redirected => {
                "the service answered with a redirect, which bir does not follow; `bir login --service` with the final URL"
            }
            FailKind::Status(c) if c >= 500 => {
                "the service failed; run `bir sync` again later, and check its logs if it persists"
            }
            FailKind::Status(_) => {
                "the service refused the record; check its logs (bir sends the same record again with `bir sync`)"
            }
            FailKind::Tls => {
                "bir does not trust the service's certificate (it checks against the built-in Mozilla root set and never skips the check); check the URL and the service's certificate"
            }
            FailKind::Transport => {
                "the connection failed after it was made; run `bir sync` again later"
            }
        }
    }
}

impl fmt::Display for SendFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.detail)
    }
}

/// What one HTTP exchange came to.
enum Answer {
    Status(u16, Option<Duration>),
    Unreached(String),
    Tls(String),
    Broken(String),
}

/// What one attempt (with its 401 handling) came to.
enum Attempt {
    Done,
    /// Worth one more try after this long.
    Retry(Duration, SendFailure),
    Failed(SendFailure),
}

/// A blocking client for the recording service. Holds the token; its
/// `Debug` does not show it.
pub(crate) struct Client {
    agent: ureq::Agent,
    base: String,
    creds: Option<Credentials>,
    creds_path: Option<PathBuf>,
    refreshes_left: u8,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("base", &urls::display(&self.base))
            .field("authenticated", &self.creds.is_some())
            .finish()
    }
}

impl Client {
    pub(crate) fn new(cfg: ServiceConfig) -> Client {
        let agent = ureq::AgentBuilder::new()
            // Never follow: a redirect is reported, and the token never
            // leaves the configured origin.
            .redirects(0)
            .timeout_connect(cfg.timeout.min(Duration::from_secs(5)))
            .timeout(cfg.timeout)
            .user_agent(&format!("bir/{}", env!("CARGO_PKG_VERSION")))
            .build();
        Client {
            agent,
            base: cfg.base,
            creds: cfg.creds,
            creds_path: cfg.creds_path,
            refreshes_left: MAX_REFRESHES,
        }
    }

    pub(crate) fn base(&self) -> &str {
        &self.base
    }

    /// Sends `req`; one retry after 429/503 or an unreached service, with
    /// `sleep` doing the waiting (told why; it returns false to give up
    /// instead).
    pub(crate) fn deliver(
        &mut self,
        req: &WireRequest,
        sleep: &mut dyn FnMut(Duration, &SendFailure) -> bool,
    ) -> Result<(), SendFailure> {
        match self.attempt(req) {
            Attempt::Done => Ok(()),
            Attempt::Failed(f) => Err(f),
            Attempt::Retry(wait, first) => {
                if !sleep(wait, &first) {
                    return Err(first);
                }
                match self.attempt(req) {
                    Attempt::Done => Ok(()),
                    Attempt::Failed(f) | Attempt::Retry(_, f) => Err(f),
                }
            }
        }
    }

    fn attempt(&mut self, req: &WireRequest) -> Attempt {
        if self
            .creds
            .as_ref()
            .is_some_and(|c| c.expired() && c.refresh_token.is_some())
        {
            // Best effort: if it fails, the request says 401 and we try once
            // more below.
            let _ = self.refresh();
        }
        let answer = self.call(req);
        if let Answer::Status(401, _) = answer
            && self.creds.is_some()
        {
            return match self.refresh() {
                Ok(()) => self.classify(req, self.call(req)),
                Err(f) => Attempt::Failed(f),
            };
        }
        self.classify(req, answer)
    }

    fn classify(&self, req: &WireRequest, answer: Answer) -> Attempt {
        let what = format!("{} {}", req.method, req.path);
        match answer {
            Answer::Status(code, _) if (200..300).contains(&code) => Attempt::Done,
            // The service already has this id: a repeat of a delivered record.
            Answer::Status(409, _) => Attempt::Done,
            Answer::Status(404 | 405 | 501, _) if req.optional => Attempt::Done,
            Answer::Status(code @ (429 | 503), retry_after) => Attempt::Retry(
                retry_after
                    .unwrap_or_else(|| jittered(BUSY_RETRY_DELAY))
                    .min(RETRY_AFTER_CAP),
                SendFailure {
                    kind: FailKind::Busy,
                    detail: format!("HTTP {code} on {what}"),
                },
            ),
            Answer::Status(401, _) => Attempt::Failed(SendFailure {
                kind: FailKind::Unauthorized,
                detail: format!(
                    "HTTP 401 on {what}: {}",
                    if self.creds.is_some() {
                        "the token was refused"
                    } else {
                        "the service wants a token (`bir login`)"
                    }
                ),
            }),
            Answer::Status(code @ 300..=399, _) => Attempt::Failed(SendFailure {
                kind: FailKind::Redirected,
                detail: format!("HTTP {code} (a redirect, not followed) on {what}"),
            }),
            Answer::Status(code, _) => Attempt::Failed(SendFailure {
                kind: FailKind::Status(code),
                detail: format!("HTTP {code} on {what}"),
            }),
            Answer::Unreached(why) => Attempt::Retry(
                jittered(UNREACHED_RETRY_DELAY),
                SendFailure {
                    kind: FailKind::Unreachable,
                    detail: format!("service unreachable ({why}) on {what}"),
                },
            ),
            Answer::Tls(why) => Attempt::Failed(SendFailure {
                kind: FailKind::Tls,
                detail: format!("TLS failed ({why}) on {what}"),
            }),
            Answer::Broken(why) => Attempt::Failed(SendFailure {
                kind: FailKind::Transport,
                detail: format!("{why} on {what}"),
            }),
        }
    }

    fn call(&self, req: &WireRequest) -> Answer {
        let url = format!("{}{}", self.base, req.path);
        let mut request = self
            .agent
            .request(req.method, &url)
            .set("Content-Type", "application/json")
            .set("Accept", "application/json");
        if let Some(creds) = &self.creds {
            request = request.set("Authorization", &format!("Bearer {}", creds.token.expose()));
        }
        answer_of(request.send_bytes(&req.body))
    }

    /// `GET {base}{path}`, read as JSON (the read side: `bir runs
    /// --remote`). The token is handled as for sending: refreshed first
    /// when it has expired, and once more after a 401. Not retried
    /// otherwise: a person is waiting, and the error says what to do.
    pub(crate) fn get_json(&mut self, path: &str) -> Result<Value, SendFailure> {
        if self
            .creds
            .as_ref()
            .is_some_and(|c| c.expired() && c.refresh_token.is_some())
        {
            let _ = self.refresh();
        }
        let mut got = self.get_once(path);
        if matches!(got, Err(Answer::Status(401, _))) && self.creds.is_some() {
            self.refresh()?;
            got = self.get_once(path);
        }
        let what = format!("GET {path}");
        got.map_err(|answer| {
            let (kind, detail) = match answer {
                Answer::Status(401, _) => (
                    FailKind::Unauthorized,
                    format!(
                        "HTTP 401 on {what}: {}",
                        if self.creds.is_some() {
                            "the token was refused; `bir login` again"
                        } else {
                            "the service wants a token (`bir login`)"
                        }
                    ),
                ),
                Answer::Status(code @ 300..=399, _) => (
                    FailKind::Redirected,
                    format!("HTTP {code} (a redirect, not followed) on {what}"),
                ),
                Answer::Status(code, _) => {
                    (FailKind::Status(code), format!("HTTP {code} on {what}"))
                }
                Answer::Unreached(why) => (
                    FailKind::Unreachable,
                    format!("service unreachable ({why}) on {what}"),
                ),
                Answer::Tls(why) => (FailKind::Tls, format!("TLS failed ({why}) on {what}")),
                Answer::Broken(why) => (FailKind::Transport, format!("{why} on {what}")),
            };
            SendFailure { kind, detail }
        })
    }

    /// One `GET`: the answer's JSON on a 2xx, else why not.
    fn get_once(&self, path: &str) -> Result<Value, Answer> {
        let url = format!("{}{path}", self.base);
        let mut request = self.agent.get(&url).set("Accept", "application/json");
        if let Some(creds) = &self.creds {
            request = request.set("Authorization", &format!("Bearer {}", creds.token.expose()));
        }
        let response = match request.call() {
            Ok(r) if (200..300).contains(&r.status()) => r,
            other => return Err(answer_of(other)),
        };
        let mut text = Vec::new();
        let read = response
            .into_reader()
            .take(MAX_READ_BYTES + 1)
            .read_to_end(&mut text);
        if let Err(e) = read {
            return Err(Answer::Broken(format!("reading the answer failed: {e}")));
        }
        if text.len() as u64 > MAX_READ_BYTES {
            return Err(Answer::Broken(format!(
                "the answer is over {} MiB",
                MAX_READ_BYTES >> 20
            )));
        }
        serde_json::from_slice(&text)
            .map_err(|e| Answer::Broken(format!("the answer is not JSON ({e})")))
    }

    /// Gets a fresh token (docs/recording-service.md, "The auth contract").
    /// Another process may have refreshed already: a newer token on disk is
    /// taken as is.
    fn refresh(&mut self) -> Result<(), SendFailure> {
        let fail = |detail: String| SendFailure {
            kind: FailKind::Unauthorized,
            detail,
        };
        let Some(creds) = self.creds.clone() else {
            return Err(fail("no token".into()));
        };
        if let Some(path) = &self.creds_path
            && let Ok(Some(disk)) = credentials::load(path)
            && origin(&disk.service) == origin(&self.base)
            && disk.token != creds.token
            && !disk.expired()
        {
            self.creds = Some(disk);
            return Ok(());
        }
        let Some(refresh_token) = creds.refresh_token.clone() else {
            return Err(fail(
                "HTTP 401: the token was refused and there is no refresh token".into(),
            ));
        };
        if self.refreshes_left == 0 {
            return Err(fail(
                "HTTP 401: the token was refused (already refreshed)".into(),
            ));
        }
        self.refreshes_left -= 1;
        let url = parse_service_url(&creds.refresh_url())
            .map_err(|e| fail(format!("cannot refresh the token: refreshUrl {e}")))?;
        let body = json!({"refreshToken": refresh_token.expose()});
        let sent = self
            .agent
            .post(&url)
            .set("Content-Type", "application/json")
            .set("Accept", "application/json")
            .send_bytes(body.to_string().as_bytes());
        let response = match sent {
            Ok(r) if (200..300).contains(&r.status()) => r,
            other => {
                let why = match answer_of(other) {
                    Answer::Status(code, _) => format!("HTTP {code}"),
                    Answer::Unreached(w) | Answer::Tls(w) | Answer::Broken(w) => w,
                };
                return Err(fail(format!(
                    "HTTP 401, and refreshing the token failed ({why}); `bir login` again"
                )));
            }
        };
        let mut text = String::new();
        let _ = response
            .into_reader()
            .take(MAX_ANSWER_BYTES)
            .read_to_string(&mut text);
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Refreshed {
            token: String,
            #[serde(default)]
            refresh_token: Option<String>,
            #[serde(default)]
            expires_at: Option<Value>,
        }
        let Some(new) = serde_json::from_str::<Refreshed>(&text)
            .ok()
            .filter(|r| credentials::valid_token(&r.token))
        else {
            return Err(fail(
                "HTTP 401, and the refresh answer had no usable token; `bir login` again".into(),
            ));
        };
        let updated = Credentials {
            token: Secret::new(new.token),
            refresh_token: new
                .refresh_token
                .filter(|t| credentials::valid_token(t))
                .map(Secret::new)
                .or(creds.refresh_token),
            expires_at: new.expires_at,
            ..creds
        };
        if let Some(path) = &self.creds_path
            && let Err(err) = credentials::save(path, &updated)
        {
            log::warn!(
                "the token was refreshed but {} could not be updated: {err}",
                path.display()
            );
        }
        self.creds = Some(updated);
        Ok(())
    }
}

/// Reduces a ureq result to what the policy needs, reading (a bounded
/// part of) the answer so the connection can be reused. Bodies are never
/// kept or shown.
fn answer_of(result: Result<ureq::Response, ureq::Error>) -> Answer {
    let response = match result {
        Ok(r) => r,
        Err(ureq::Error::Status(_, r)) => r,
        Err(ureq::Error::Transport(t)) => {
            let why = urls::transport_reason(&t);
            // ureq reports a failed TLS handshake as a failed connection;
            // but the service (or something) was reached.
            let tls = t.message().is_some_and(|m| m.starts_with("tls"));
            return match t.kind() {
                ureq::ErrorKind::ConnectionFailed if tls => Answer::Tls(why),
                ureq::ErrorKind::Dns | ureq::ErrorKind::ConnectionFailed => Answer::Unreached(why),
                _ => Answer::Broken(why),
            };
        }
    };
    let code = response.status();
    let retry_after = response
        .header("Retry-After")
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    let mut sink = std::io::sink();
    let _ = std::io::copy(
        &mut response.into_reader().take(MAX_ANSWER_BYTES),
        &mut sink,
    );
    Answer::Status(code, retry_after)
}

/// `d` plus up to a fifth more, at random: proxies that failed together
/// (a service restart) do not all come back in the same instant.
pub(crate) fn jittered(d: Duration) -> Duration {
    let fraction = (crate::record::model::random_u64() % 1_000_001) as f64 / 1_000_000.0;
    d + (d / 5).mul_f64(fraction)
}
