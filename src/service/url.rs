//! The recording service's URL: where it comes from (`BIR_SERVICE_URL`,
//! the saved credentials), which URLs are acceptable, what "same origin"
//! means, and how a request path segment is encoded. How a URL is shown in
//! messages is [`crate::urls::display`].

use crate::error::Error;

/// What `BIR_SERVICE_URL` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum EnvService {
    Unset,
    /// `off`, `0` or `none`: never send, even when logged in.
    Off,
    Url(String),
}

pub(crate) fn env_service() -> EnvService {
    match std::env::var("BIR_SERVICE_URL") {
        Ok(v) if matches!(v.trim(), "off" | "0" | "none") => EnvService::Off,
        Ok(v) if !v.trim().is_empty() => EnvService::Url(v.trim().to_owned()),
        _ => EnvService::Unset,
    }
}

/// `BIR_SERVICE_URL`, when it names a service.
pub(crate) fn service_url_from_env() -> Option<String> {
    match env_service() {
        EnvService::Url(u) => Some(u),
        _ => None,
    }
}

/// Checks and normalises a service base URL: `https://host[:port][/path]`
/// without a trailing slash. Refused: anything but http(s), credentials or
/// a query in the URL (credentials belong in `bir login`), and plain http
/// except to loopback (the token would cross the network in clear).
pub(crate) fn parse_service_url(raw: &str) -> Result<String, Error> {
    let raw = raw.trim();
    let shown = crate::urls::display(raw);
    let Some((scheme, rest)) = raw.split_once("://") else {
        return Err(Error::failure(format!(
            "`{shown}` is not a URL; give https://host[:port][/path]"
        )));
    };
    let scheme = scheme.to_ascii_lowercase();
    if scheme != "https" && scheme != "http" {
        return Err(Error::failure(format!(
            "`{shown}`: only https:// (or http:// to loopback) is supported"
        )));
    }
    if rest.contains(['?', '#']) {
        return Err(Error::failure(format!(
            "`{shown}`: the service URL may not carry a query or fragment (credentials go in `bir login`, not in the URL)"
        )));
    }
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    if authority.contains('@') {
        return Err(Error::failure(format!(
            "`{shown}`: the service URL may not carry user:password@ (use `bir login` for the token)"
        )));
    }
    if authority.is_empty() || authority.contains(char::is_whitespace) {
        return Err(Error::failure(format!("`{shown}` has no host")));
    }
    let authority = authority.to_ascii_lowercase();
    if scheme == "http" && !is_loopback_host(host_of(&authority)) {
        return Err(Error::failure(format!(
            "`{shown}`: plain http would send your token unencrypted; use https:// (http is accepted for 127.0.0.1, ::1 and localhost only)"
        )));
    }
    Ok(format!(
        "{scheme}://{authority}{}",
        path.trim_end_matches('/')
    ))
}

fn host_of(authority: &str) -> &str {
    if let Some(v6) = authority.strip_prefix('[') {
        return v6.split(']').next().unwrap_or("");
    }
    authority.rsplit_once(':').map_or(authority, |(h, _)| h)
}

/// Whether a service URL's host (as written, not parsed) is this machine.
fn is_loopback_host(host: &str) -> bool {
    host == "localhost"
        || host == "::1"
        || host
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// `scheme://host:port`, lowercase: what "same origin" compares.
pub(crate) fn origin(url: &str) -> String {
    let url = url.trim();
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let authority = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let scheme = scheme.to_ascii_lowercase();
    let mut authority = authority.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "https" => ":443",
        "http" => ":80",
        _ => "",
    };
    if !default_port.is_empty()
        && let Some(bare) = authority.strip_suffix(default_port)
    {
        authority = bare.to_owned();
    }
    format!("{scheme}://{authority}")
}

/// Percent-encodes a path segment (run ids are `run_<uuid>`, but a
/// journal is a file anyone could edit).
pub(crate) fn segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
