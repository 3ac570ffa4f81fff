//! URLs as bir shows them in messages and logs, in one place.
//!
//! Two forms, kept apart on purpose because users read both today:
//! [`redacted`] (a remote upstream's URL: query parameter names stay, their
//! values and the fragment become `[REDACTED]`) and [`display`] (the
//! recording service's URL: no user-info, query or fragment at all). The
//! redactor's own URL rules (`redact::url`) are for recorded payloads, not
//! for these messages.
//!
//! A leaf: it imports nothing of the crate.

use url::Url;

/// The URL as it may appear in messages and logs: no userinfo, query values
/// and fragment replaced by `[REDACTED]`.
pub(crate) fn redacted(url: &Url) -> String {
    let mut u = url.clone();
    let _ = u.set_username("");
    let _ = u.set_password(None);
    if u.query().is_some() {
        let names: Vec<String> = url
            .query_pairs()
            .map(|(k, _)| format!("{k}=[REDACTED]"))
            .collect();
        u.set_query(Some(&names.join("&")));
    }
    if u.fragment().is_some() {
        u.set_fragment(Some("[REDACTED]"));
    }
    u.to_string()
}

/// Whether a parsed URL names this machine (`localhost`, any loopback
/// address).
pub(crate) fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// A URL fit for a message: no user-info, query or fragment.
pub(crate) fn display(url: &str) -> String {
    let url = url.trim();
    let cut = url.find(['?', '#']).unwrap_or(url.len());
    let url = &url[..cut];
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
            let authority = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
            format!("{scheme}://{authority}{path}")
        }
        None => url.rsplit_once('@').map_or(url, |(_, h)| h).to_owned(),
    }
}

/// A ureq transport error in words, without the URL (which may carry a
/// query string or credentials): its kind, message and cause.
pub(crate) fn transport_reason(t: &ureq::Transport) -> String {
    use std::error::Error as _;
    let mut why = t.kind().to_string().to_lowercase();
    if let Some(msg) = t.message() {
        why.push_str(": ");
        why.push_str(msg);
    }
    if let Some(src) = t.source() {
        why.push_str(": ");
        why.push_str(&src.to_string());
    }
    why
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_secrets_in_urls() {
        let u = Url::parse("https://user:pw@mcp.example.com/mcp?token=abc&x=1#access_token=z")
            .expect("url");
        let r = redacted(&u);
        assert_eq!(
            r,
            "https://mcp.example.com/mcp?token=[REDACTED]&x=[REDACTED]#[REDACTED]"
        );
    }
}
