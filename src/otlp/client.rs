//! The blocking OTLP/HTTP client: one `POST` per batch, the retry policy
//! of the OTLP spec, gzip, headers, a total deadline per request.
//!
//! Policy (the OTLP specification's "OTLP/HTTP Response", and the SDK
//! exporter specification's "Retry"):
//! * 2xx is delivered. A `partialSuccess` with rejected spans is logged
//!   and **not** retried (the data itself was refused).
//! * 429, 502, 503, 504 and a receiver that could not be reached are
//!   retried, up to [`MAX_ATTEMPTS`] tries: after `Retry-After` (seconds or
//!   an HTTP-date, at most [`RETRY_AFTER_CAP`]) when the answer has one,
//!   else after 1 s doubling, each with up to 20 % random jitter.
//! * Any other status is final for that batch (400 is bad data: sending
//!   it again cannot help).
//! * Redirects are not followed (header values may be credentials).
//! * Header values are never logged; neither are bodies.

use std::io::{Read, Write};
use std::time::Duration;

use super::config::{OtlpConfig, Protocol};
use super::span::{Batch, KeyValue, Span};
use crate::urls;

/// Tries per batch (the first and the retries).
pub(crate) const MAX_ATTEMPTS: u32 = 4;
/// The longest `Retry-After` honoured.
pub(crate) const RETRY_AFTER_CAP: Duration = Duration::from_secs(30);
/// The first backoff without `Retry-After`; it doubles per retry.
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
/// Spans per request: a 1,000-step run goes out in two.
pub(crate) const MAX_SPANS_PER_REQUEST: usize = 512;
/// Largest request body (before compression); a bigger batch is halved.
const MAX_BODY: usize = 4 * 1024 * 1024;
/// How much of an answer is read.
const MAX_ANSWER_BYTES: u64 = 64 * 1024;

/// Why spans were not delivered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FailKind {
    /// Never reached (refused, DNS, connect timeout), after every try.
    Unreachable,
    /// 429/502/503/504 after every try.
    Busy(u16),
    /// A status that is not retried.
    Refused(u16),
    /// Reached, then failed (a reset, a timeout while waiting, TLS).
    Transport,
    /// The wait between tries was cut short (the process is ending).
    Stopped,
}

#[derive(Debug, Clone)]
pub(crate) struct SendFailure {
    pub kind: FailKind,
    /// Short and safe to log: no header value, no body, no query string.
    pub detail: String,
}

impl std::fmt::Display for SendFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.detail)
    }
}

/// What a delivered export came to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Delivered {
    pub spans: usize,
    pub requests: usize,
    /// Spans the receiver said it rejected (partial success).
    pub rejected: i64,
}

enum Answer {
    Ok(Vec<u8>),
    Status(u16, Option<Duration>, String),
    Unreached(String),
    Broken(String),
}

pub(crate) struct Client {
    agent: ureq::Agent,
    cfg: OtlpConfig,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("otlp::Client")
            .field("endpoint", &urls::display(&self.cfg.endpoint))
            .finish()
    }
}

impl Client {
    pub(crate) fn new(cfg: OtlpConfig) -> Client {
        let agent = ureq::AgentBuilder::new()
            .redirects(0)
            .timeout_connect(cfg.timeout.min(Duration::from_secs(5)))
            .timeout(cfg.timeout)
            .user_agent(&format!("bir-otlp/{} (rust)", env!("CARGO_PKG_VERSION")))
            .build();
        Client { agent, cfg }
    }

    pub(crate) fn config(&self) -> &OtlpConfig {
        &self.cfg
    }

    /// The endpoint, fit for a message.
    pub(crate) fn label(&self) -> String {
        urls::display(&self.cfg.endpoint)
    }

    /// The request body of `spans` in the configured encoding (before
    /// compression).
    pub(crate) fn body(&self, resource: &[KeyValue], spans: &[Span]) -> Vec<u8> {
        let batch = Batch { resource, spans };
        match self.cfg.protocol {
            Protocol::Protobuf => super::proto::encode(batch),
            Protocol::Json => super::json::encode(batch),
        }
    }

    /// Sends `spans` in batches; `sleep` waits between tries (it returns
    /// false to give up). Stops at the first batch that fails: the run is
    /// then not marked exported, and a later export sends all of it again
    /// under the same ids.
    pub(crate) fn send(
        &self,
        spans: &[Span],
        sleep: &mut dyn FnMut(Duration) -> bool,
    ) -> Result<Delivered, SendFailure> {
        let mut done = Delivered::default();
        for chunk in spans.chunks(MAX_SPANS_PER_REQUEST) {
            self.send_chunk(chunk, sleep, &mut done)?;
        }
        Ok(done)
    }

    fn send_chunk(
        &self,
        spans: &[Span],
        sleep: &mut dyn FnMut(Duration) -> bool,
        done: &mut Delivered,
    ) -> Result<(), SendFailure> {
        let body = self.body(&self.cfg.resource, spans);
        if body.len() > MAX_BODY && spans.len() > 1 {
            let (a, b) = spans.split_at(spans.len() / 2);
            self.send_chunk(a, sleep, done)?;
            return self.send_chunk(b, sleep, done);
        }
        let body = if self.cfg.gzip { gzip(&body) } else { body };
        let mut attempt = 1;
        loop {
            let answer = self.post(&body);
            let (wait, failure) = match answer {
                Answer::Ok(bytes) => {
                    let read = match self.cfg.protocol {
                        Protocol::Protobuf => super::proto::partial_success(&bytes),
                        Protocol::Json => super::json::partial_success(&bytes),
                    };
                    let (rejected, message) = read.unwrap_or_default();
                    if rejected > 0 || !message.is_empty() {
                        log::warn!(
                            "OTLP receiver {}: {rejected} span(s) rejected{}{} (not sent again: the receiver refused the data)",
                            self.label(),
                            if message.is_empty() { "" } else { ": " },
                            message.chars().take(200).collect::<String>()
                        );
                    }
                    done.spans += spans.len();
                    done.requests += 1;
                    done.rejected += rejected.max(0);
                    return Ok(());
                }
                Answer::Status(code @ (429 | 502 | 503 | 504), retry_after, _) => (
                    retry_after
                        .map(|d| d.min(RETRY_AFTER_CAP))
                        .unwrap_or_else(|| backoff(attempt)),
                    SendFailure {
                        kind: FailKind::Busy(code),
                        detail: format!("HTTP {code} from {}", self.label()),
                    },
                ),
                Answer::Status(code, _, hint) => {
                    return Err(SendFailure {
                        kind: FailKind::Refused(code),
                        detail: format!("HTTP {code} from {}{hint}", self.label()),
                    });
                }
                Answer::Unreached(why) => (
                    backoff(attempt),
                    SendFailure {
                        kind: FailKind::Unreachable,
                        detail: format!("OTLP receiver {} unreachable ({why})", self.label()),
                    },
                ),
                Answer::Broken(why) => (
                    backoff(attempt),
                    SendFailure {
                        kind: FailKind::Transport,
                        detail: format!("{why} from {}", self.label()),
                    },
                ),
            };
            if attempt >= MAX_ATTEMPTS {
                return Err(failure);
            }
            log::debug!("{failure}; trying again in {} ms", wait.as_millis());
            if !sleep(wait) {
                return Err(SendFailure {
                    kind: FailKind::Stopped,
                    detail: failure.detail,
                });
            }
            attempt += 1;
        }
    }

    fn post(&self, body: &[u8]) -> Answer {
        let mut request = self
            .agent
            .post(&self.cfg.endpoint)
            .set("Content-Type", self.cfg.protocol.content_type());
        if self.cfg.gzip {
            request = request.set("Content-Encoding", "gzip");
        }
        for (k, v) in &self.cfg.headers {
            request = request.set(k, v.expose());
        }
        let response = match request.send_bytes(body) {
            Ok(r) => r,
            Err(ureq::Error::Status(_, r)) => r,
            Err(ureq::Error::Transport(t)) => {
                let why = urls::transport_reason(&t);
                return match t.kind() {
                    ureq::ErrorKind::Dns | ureq::ErrorKind::ConnectionFailed
                        if !t.message().is_some_and(|m| m.starts_with("tls")) =>
                    {
                        Answer::Unreached(why)
                    }
                    _ => Answer::Broken(why),
                };
            }
        };
        let code = response.status();
        let retry_after = response
            .header("Retry-After")
            .and_then(|v| retry_after(v, std::time::SystemTime::now()));
        let mut bytes = Vec::new();
        let _ = response
            .into_reader()
            .take(MAX_ANSWER_BYTES)
            .read_to_end(&mut bytes);
        if (200..300).contains(&code) {
            return Answer::Ok(bytes);
        }
        let hint = match code {
            415 if self.cfg.protocol == Protocol::Json => {
                ": the receiver does not take OTLP/JSON (Phoenix, for one, takes protobuf only); unset BIR_OTLP_PROTOCOL or set it to http/protobuf"
            }
            415 => ": the receiver does not take OTLP protobuf; try BIR_OTLP_PROTOCOL=http/json",
            404 | 405 => {
                ": no OTLP traces endpoint there; BIR_OTLP_ENDPOINT is the receiver's OTLP/HTTP base URL (port 4318 by default), bir adds /v1/traces"
            }
            _ => "",
        };
        Answer::Status(code, retry_after, hint.to_owned())
    }
}

/// 1 s, 2 s, 4 s … for try `attempt` (1-based), plus up to 20 % jitter.
fn backoff(attempt: u32) -> Duration {
    let d = FIRST_BACKOFF.saturating_mul(1 << (attempt - 1).min(5));
    let fraction = (crate::record::model::random_u64() % 1_000_001) as f64 / 1_000_000.0;
    d + (d / 5).mul_f64(fraction)
}

/// A `Retry-After` value: delta-seconds, or an HTTP-date
/// (`Sun, 06 Nov 1994 08:49:37 GMT`) turned into the wait from `now`.
pub(crate) fn retry_after(value: &str, now: std::time::SystemTime) -> Option<Duration> {
    let v = value.trim();
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    // IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT".
    let parts: Vec<&str> = v.split_whitespace().collect();
    let [_, day, month, year, clock, "GMT"] = parts.as_slice() else {
        return None;
    };
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month = MONTHS.iter().position(|m| m == month)? + 1;
    let rfc = format!("{year}-{month:02}-{:0>2}T{clock}Z", day);
    let at = crate::time::parse_rfc3339(&rfc)?;
    let now = now.duration_since(std::time::UNIX_EPOCH).ok()?.as_secs() as i64;
    Some(Duration::from_secs(at.saturating_sub(now).max(0) as u64))
}

/// gzip of `body` (deterministic: no name, no time in the header).
fn gzip(body: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(
        Vec::with_capacity(body.len() / 4 + 64),
        flate2::Compression::fast(),
    );
    // Writing to a Vec cannot fail.
    if enc.write_all(body).is_err() {
        return body.to_vec();
    }
    enc.finish().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{SystemTime, UNIX_EPOCH};

    #[test]
    fn retry_after_reads_seconds_and_http_dates() {
        let now = UNIX_EPOCH + Duration::from_secs(784_111_770); // 1994-11-06T08:49:30Z
        assert_eq!(retry_after("3", now), Some(Duration::from_secs(3)));
        assert_eq!(
            retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now),
            Some(Duration::from_secs(7))
        );
        // A date in the past: no wait.
        assert_eq!(
            retry_after("Sun, 06 Nov 1994 08:00:00 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(retry_after("soon", SystemTime::now()), None);
    }

    #[test]
    fn backoff_doubles_with_jitter() {
        for (attempt, base) in [(1, 1), (2, 2), (3, 4)] {
            let d = backoff(attempt);
            let base = Duration::from_secs(base);
            assert!(d >= base && d <= base + base / 5, "{attempt}: {d:?}");
        }
    }

    #[test]
    fn gzip_round_trips() {
        let body = b"{\"resourceSpans\":[]}".repeat(50);
        let z = gzip(&body);
        assert!(z.len() < body.len());
        let mut back = Vec::new();
        flate2::read::GzDecoder::new(z.as_slice())
            .read_to_end(&mut back)
            .expect("gunzip");
        assert_eq!(back, body);
    }
}
