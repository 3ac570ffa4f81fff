//! Where and how runs are exported, resolved once from the environment.
//!
//! bir's own switch comes first: Claude Code sets `OTEL_*` variables of its
//! own (often for gRPC on 4317), which hooks and MCP servers inherit, so
//! the standard `OTEL_EXPORTER_OTLP_*`, `OTEL_SERVICE_NAME`,
//! `OTEL_RESOURCE_ATTRIBUTES` and `OTEL_SDK_DISABLED` are read **only**
//! when `BIR_OTLP=1`. `BIR_OTLP_ENDPOINT` alone also turns export on
//! (reading no `OTEL_*`). Every `BIR_OTLP_*` beats its `OTEL_*` twin.
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `BIR_OTLP` | `1` on (and read `OTEL_*`), `0` off | off unless `BIR_OTLP_ENDPOINT` |
//! | `BIR_OTLP_ENDPOINT` | base URL (`/v1/traces` appended) or the full traces URL | `http://localhost:4318` |
//! | `BIR_OTLP_PROTOCOL` | `http/protobuf` or `http/json` (`grpc` is refused) | `http/protobuf` |
//! | `BIR_OTLP_HEADERS` | `k=v,k2=v2`, percent-decoded | none |
//! | `BIR_OTLP_TIMEOUT_MS` | total deadline of one request | 10000 |
//! | `BIR_OTLP_COMPRESSION` | `gzip` or `none` | `none` |
//! | `BIR_OTLP_SERVICE_NAME` | `service.name` | `bir` |
//! | `BIR_OTLP_RESOURCE_ATTRIBUTES` | more resource attributes, `k=v,…` | none |
//! | `BIR_OTLP_CONTENT` | `1`: prompts, answers, arguments, results (redacted, truncated) | off |
//! | `BIR_OTLP_PROVIDER` | `gen_ai.provider.name` | `anthropic` for Claude Code |
//! | `BIR_OTLP_HOST` | `0`: no `host.name` resource attribute | on |
//! | `BIR_OTLP_TRACEPARENT` | `1`: bir-proxy adds a W3C `traceparent` to `params._meta` of each relayed `tools/call` (the one change to relayed bytes; standalone runs) | off |

use std::time::Duration;

use super::mapping::MapOptions;
use super::span::{KeyValue, kv};
use crate::secret::Secret;

/// Default total deadline of one export request.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// Where an OTLP/HTTP receiver listens by default.
pub(crate) const DEFAULT_BASE: &str = "http://localhost:4318";
const TRACES_PATH: &str = "/v1/traces";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Protocol {
    Protobuf,
    Json,
}

impl Protocol {
    pub(crate) fn content_type(self) -> &'static str {
        match self {
            Protocol::Protobuf => "application/x-protobuf",
            Protocol::Json => "application/json",
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct OtlpConfig {
    /// The full traces URL.
    pub endpoint: String,
    pub protocol: Protocol,
    /// Extra request headers (authentication, a project name…): values
    /// are secrets, never logged.
    pub headers: Vec<(String, Secret)>,
    pub timeout: Duration,
    pub gzip: bool,
    pub resource: Vec<KeyValue>,
    pub map: MapOptions,
    /// `BIR_OTLP_TRACEPARENT=1`: the proxy propagates the run's trace to
    /// its server (`proxy::traceparent`). Off by default: it changes
    /// relayed bytes.
    pub traceparent: bool,
}

/// Reads a variable (the process environment, or a test's map).
pub(crate) type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

fn is_on(v: &str) -> bool {
    matches!(
        v.trim().to_ascii_lowercase().as_str(),
        "1" | "true" | "on" | "yes"
    )
}

fn is_off(v: &str) -> bool {
    matches!(
        v.trim().to_ascii_lowercase().as_str(),
        "0" | "false" | "off" | "no"
    )
}

impl OtlpConfig {
    /// From the process environment.
    pub(crate) fn from_env() -> Result<Option<OtlpConfig>, String> {
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        OtlpConfig::resolve(&env)
    }

    /// `Ok(None)`: export is off. `Err`: it is asked for but cannot be done
    /// (the message says what to change).
    pub(crate) fn resolve(env: Env<'_>) -> Result<Option<OtlpConfig>, String> {
        let switch = env("BIR_OTLP");
        if switch.as_deref().is_some_and(is_off) {
            return Ok(None);
        }
        let otel = switch.as_deref().is_some_and(is_on);
        if !otel && env("BIR_OTLP_ENDPOINT").is_none() {
            return Ok(None);
        }
        // `OTEL_*` only under bir's own switch.
        let std_env = |k: &str| if otel { env(k) } else { None };
        if std_env("OTEL_SDK_DISABLED").as_deref().is_some_and(is_on) {
            return Ok(None);
        }
        let first = |keys: &[&str]| -> Option<(String, String)> {
            keys.iter().find_map(|k| {
                let v = if k.starts_with("OTEL_") {
                    std_env(k)
                } else {
                    env(k)
                };
                v.map(|v| ((*k).to_owned(), v))
            })
        };

        let endpoint = if let Some(base) = env("BIR_OTLP_ENDPOINT") {
            traces_url(&base)
        } else if let Some(exact) = std_env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
            exact.trim().to_owned()
        } else if let Some(base) = std_env("OTEL_EXPORTER_OTLP_ENDPOINT") {
            traces_url(&base)
        } else {
            traces_url(DEFAULT_BASE)
        };
        let parsed = url::Url::parse(&endpoint)
            .map_err(|_| format!("the OTLP endpoint {endpoint:?} is not a URL"))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(format!(
                "the OTLP endpoint must be an http:// or https:// URL (bir speaks OTLP/HTTP), not {}://",
                parsed.scheme()
            ));
        }

        let protocol = match first(&[
            "BIR_OTLP_PROTOCOL",
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
            "OTEL_EXPORTER_OTLP_PROTOCOL",
        ]) {
            None => Protocol::Protobuf,
            Some((key, v)) => match v.trim() {
                "http/protobuf" => Protocol::Protobuf,
                "http/json" => Protocol::Json,
                "grpc" => {
                    return Err(format!(
                        "{key}=grpc: bir does not speak OTLP over gRPC, only OTLP/HTTP. Point \
                         BIR_OTLP_ENDPOINT at the receiver's OTLP/HTTP port (4318 by default, \
                         e.g. http://localhost:4318) and set BIR_OTLP_PROTOCOL=http/protobuf \
                         (or http/json)"
                    ));
                }
                other => {
                    return Err(format!("{key}={other:?}: use http/protobuf or http/json"));
                }
            },
        };
        if parsed.port_or_known_default() == Some(4317) {
            log::warn!(
                "the OTLP endpoint uses port 4317, OTLP's gRPC port; bir speaks OTLP/HTTP, usually on 4318"
            );
        }

        let headers = match first(&[
            "BIR_OTLP_HEADERS",
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
            "OTEL_EXPORTER_OTLP_HEADERS",
        ]) {
            None => Vec::new(),
            Some((key, v)) => parse_pairs(&v)
                .ok_or_else(|| format!("{key} is not a list of key=value pairs"))?
                .into_iter()
                .map(|(k, v)| (k, Secret::new(v)))
                .collect(),
        };

        let timeout = match first(&[
            "BIR_OTLP_TIMEOUT_MS",
            "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
            "OTEL_EXPORTER_OTLP_TIMEOUT",
        ]) {
            None => DEFAULT_TIMEOUT,
            Some((key, v)) => match v.trim().parse::<u64>() {
                Ok(ms) => Duration::from_millis(ms.clamp(100, 600_000)),
                Err(_) => {
                    log::warn!("{key}={v:?} is not a number of milliseconds; using 10000");
                    DEFAULT_TIMEOUT
                }
            },
        };

        let gzip = match first(&[
            "BIR_OTLP_COMPRESSION",
            "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
            "OTEL_EXPORTER_OTLP_COMPRESSION",
        ]) {
            None => false,
            Some((key, v)) => match v.trim() {
                "gzip" => true,
                "none" => false,
                other => return Err(format!("{key}={other:?}: use gzip or none")),
            },
        };

        let mut extra: Vec<(String, String)> = Vec::new();
        for key in ["OTEL_RESOURCE_ATTRIBUTES", "BIR_OTLP_RESOURCE_ATTRIBUTES"] {
            let v = if key.starts_with("OTEL_") {
                std_env(key)
            } else {
                env(key)
            };
            let Some(v) = v else { continue };
            // A variable that does not decode is dropped whole (the
            // OpenTelemetry SDK's resource specification).
            match parse_pairs(&v) {
                Some(pairs) => {
                    for (k, v) in pairs {
                        extra.retain(|(old, _)| *old != k);
                        extra.push((k, v));
                    }
                }
                None => log::warn!("{key} is not a list of key=value pairs; ignored"),
            }
        }
        let service_name = env("BIR_OTLP_SERVICE_NAME")
            .or_else(|| std_env("OTEL_SERVICE_NAME"))
            .or_else(|| {
                extra
                    .iter()
                    .find(|(k, _)| k == "service.name")
                    .map(|(_, v)| v.clone())
            })
            .unwrap_or_else(|| "bir".to_owned());
        let host = !env("BIR_OTLP_HOST").as_deref().is_some_and(is_off);
        let resource = resource_attributes(&service_name, host.then(host_name).flatten(), &extra);

        Ok(Some(OtlpConfig {
            endpoint,
            protocol,
            headers,
            timeout,
            gzip,
            resource,
            map: MapOptions {
                content: env("BIR_OTLP_CONTENT").as_deref().is_some_and(is_on),
                provider: env("BIR_OTLP_PROVIDER"),
            },
            traceparent: env("BIR_OTLP_TRACEPARENT").as_deref().is_some_and(is_on),
        }))
    }
}

/// `service.name`, bir's version and SDK keys, the host, then the user's
/// own attributes in the order given (theirs win over nothing of ours
/// but `service.name`, which has its own precedence).
pub(crate) fn resource_attributes(
    service_name: &str,
    host_name: Option<String>,
    extra: &[(String, String)],
) -> Vec<KeyValue> {
    let mut attrs = vec![
        kv("service.name", service_name),
        kv("service.version", env!("CARGO_PKG_VERSION")),
        kv("telemetry.sdk.name", "bir"),
        kv("telemetry.sdk.language", "rust"),
        kv("telemetry.sdk.version", env!("CARGO_PKG_VERSION")),
    ];
    if let Some(h) = host_name {
        attrs.push(kv("host.name", h));
    }
    attrs.push(kv("host.arch", std::env::consts::ARCH));
    attrs.push(kv("os.type", std::env::consts::OS));
    for (k, v) in extra {
        if k == "service.name" {
            continue;
        }
        match attrs.iter_mut().find(|a| a.key == *k) {
            Some(a) => a.value = v.clone().into(),
            None => attrs.push(kv(k, v.clone())),
        }
    }
    attrs
}

/// `base` + `/v1/traces` with exactly one `/` between them; a URL that
/// already ends in `/v1/traces` is kept.
pub(crate) fn traces_url(base: &str) -> String {
    let base = base.trim();
    if base.trim_end_matches('/').ends_with(TRACES_PATH) {
        return base.trim_end_matches('/').to_owned();
    }
    format!("{}{TRACES_PATH}", base.trim_end_matches('/'))
}

/// `k1=v1,k2=v2` (W3C baggage style, percent-decoded, `;` metadata not
/// supported); `None` when any member is not `k=v` with a non-empty key.
pub(crate) fn parse_pairs(s: &str) -> Option<Vec<(String, String)>> {
    let mut out = Vec::new();
    for member in s.split(',') {
        if member.trim().is_empty() {
            continue;
        }
        let (k, v) = member.split_once('=')?;
        let k = crate::codec::percent_decode(k.trim());
        let v = crate::codec::percent_decode(v.trim());
        if k.is_empty() {
            return None;
        }
        out.push((k, v));
    }
    Some(out)
}

/// This machine's name, if the OS tells it.
fn host_name() -> Option<String> {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname writes at
    // most that many bytes.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return None;
    }
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    let name = String::from_utf8_lossy(&buf[..end]).trim().to_owned();
    (!name.is_empty()).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn resolve(vars: &[(&str, &str)]) -> Result<Option<OtlpConfig>, String> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        OtlpConfig::resolve(&|k: &str| map.get(k).cloned())
    }

    fn attr<'a>(cfg: &'a OtlpConfig, key: &str) -> Option<&'a crate::otlp::span::Value> {
        cfg.resource.iter().find(|a| a.key == key).map(|a| &a.value)
    }

    #[test]
    fn off_unless_birs_own_switch_or_endpoint() {
        assert!(resolve(&[]).expect("ok").is_none());
        // Claude Code's OTEL_* alone never turns bir's export on.
        assert!(
            resolve(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://x:4317"),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ])
            .expect("ok")
            .is_none()
        );
        assert!(
            resolve(&[("BIR_OTLP", "0"), ("BIR_OTLP_ENDPOINT", "http://h:1")])
                .expect("ok")
                .is_none()
        );
        let cfg = resolve(&[("BIR_OTLP", "1")]).expect("ok").expect("on");
        assert_eq!(cfg.endpoint, "http://localhost:4318/v1/traces");
        assert_eq!(cfg.protocol, Protocol::Protobuf);
        assert!(!cfg.gzip && !cfg.map.content);
        assert_eq!(cfg.timeout, DEFAULT_TIMEOUT);
    }

    #[test]
    fn otel_variables_count_only_under_bir_otlp_1() {
        let otel = [
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ("OTEL_SERVICE_NAME", "claude-code"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "x-a=1"),
        ];
        let mut vars = vec![("BIR_OTLP_ENDPOINT", "http://127.0.0.1:9/")];
        vars.extend(otel);
        let cfg = resolve(&vars).expect("grpc ignored").expect("on");
        assert_eq!(cfg.endpoint, "http://127.0.0.1:9/v1/traces");
        assert_eq!(cfg.protocol, Protocol::Protobuf);
        assert!(cfg.headers.is_empty());
        assert_eq!(attr(&cfg, "service.name"), Some(&"bir".into()));
        // With the switch, they apply, and gRPC is refused clearly.
        vars.push(("BIR_OTLP", "1"));
        let err = resolve(&vars).expect_err("grpc");
        assert!(err.contains("gRPC") && err.contains("4318"), "{err}");
        // bir's own variable wins.
        vars.push(("BIR_OTLP_PROTOCOL", "http/json"));
        let cfg = resolve(&vars).expect("ok").expect("on");
        assert_eq!(cfg.protocol, Protocol::Json);
        assert_eq!(attr(&cfg, "service.name"), Some(&"claude-code".into()));
        assert_eq!(cfg.headers[0].0, "x-a");
        assert_eq!(cfg.headers[0].1.expose(), "1");
    }

    #[test]
    fn endpoints_follow_the_exporter_rules() {
        assert_eq!(traces_url("http://h:4318"), "http://h:4318/v1/traces");
        assert_eq!(traces_url("http://h:4318/"), "http://h:4318/v1/traces");
        assert_eq!(traces_url("http://h/col/"), "http://h/col/v1/traces");
        assert_eq!(traces_url("http://h/v1/traces"), "http://h/v1/traces");
        let cfg = resolve(&[
            ("BIR_OTLP", "1"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://h:1/custom"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://ignored"),
        ])
        .expect("ok")
        .expect("on");
        assert_eq!(cfg.endpoint, "http://h:1/custom", "used exactly as given");
        assert!(resolve(&[("BIR_OTLP_ENDPOINT", "ftp://h")]).is_err());
        assert!(
            resolve(&[
                ("BIR_OTLP_ENDPOINT", "http://h"),
                ("BIR_OTLP_COMPRESSION", "br")
            ])
            .is_err()
        );
        let cfg = resolve(&[
            ("BIR_OTLP_ENDPOINT", "http://h"),
            ("BIR_OTLP_COMPRESSION", "gzip"),
        ])
        .expect("ok")
        .expect("on");
        assert!(cfg.gzip);
    }

    #[test]
    fn resource_attributes_decode_and_service_name_has_its_precedence() {
        let cfg = resolve(&[
            ("BIR_OTLP", "1"),
            (
                "OTEL_RESOURCE_ATTRIBUTES",
                "service.name=from-attrs,team=a%2Cb,deployment.environment=ci",
            ),
            ("BIR_OTLP_HOST", "0"),
        ])
        .expect("ok")
        .expect("on");
        assert_eq!(attr(&cfg, "service.name"), Some(&"from-attrs".into()));
        assert_eq!(attr(&cfg, "team"), Some(&"a,b".into()));
        assert_eq!(
            attr(&cfg, "service.version"),
            Some(&env!("CARGO_PKG_VERSION").into())
        );
        assert!(attr(&cfg, "host.name").is_none(), "BIR_OTLP_HOST=0");
        // A variable that does not decode is dropped whole.
        let cfg = resolve(&[
            ("BIR_OTLP", "1"),
            ("OTEL_RESOURCE_ATTRIBUTES", "team=a,broken"),
        ])
        .expect("ok")
        .expect("on");
        assert!(attr(&cfg, "team").is_none());
        assert!(attr(&cfg, "host.name").is_some(), "on by default");
    }
}
