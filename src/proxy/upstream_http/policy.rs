//! What the transport allows on the wire: TLS with a bounded handshake,
//! which redirects are followed, which hosts skip `HTTPS_PROXY`, which
//! header values and media types may be shown, and reading the
//! `WWW-Authenticate` parameters of a sign-in answer.

use super::*;

pub(super) fn header_safe(v: &str) -> bool {
    !v.is_empty() && v.len() <= 256 && v.bytes().all(|b| (0x21..=0x7e).contains(&b))
}

/// The media type of a `Content-Type` header, lower case and without
/// parameters (`None` when absent; `[unreadable]` when it would not be
/// safe to show in an error message).
pub(super) fn media_type(header: Option<&str>) -> Option<String> {
    let media = header?.split(';').next().unwrap_or_default().trim();
    if media.is_empty() {
        None
    } else if media.len() <= 100 && media.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
        Some(media.to_ascii_lowercase())
    } else {
        Some("[unreadable]".into())
    }
}

pub(super) fn no_proxy_matches(host: &str) -> bool {
    let list = std::env::var("NO_PROXY")
        .or_else(|_| std::env::var("no_proxy"))
        .unwrap_or_default();
    list.split(',').map(str::trim).any(|entry| {
        let entry = entry.trim_start_matches('.');
        entry == "*"
            || (!entry.is_empty()
                && (host.eq_ignore_ascii_case(entry)
                    || host
                        .to_ascii_lowercase()
                        .ends_with(&format!(".{}", entry.to_ascii_lowercase()))))
    })
}

/// rustls (webpki roots, TLS 1.2/1.3, ureq's own settings) with the
/// handshake bounded like the TCP connect: ureq 2 bounds only the latter,
/// and a socket read timeout would also cut a slow tool's answer, so it is
/// set for the handshake alone.
pub(super) struct BoundedTls {
    inner: Arc<ureq::rustls::ClientConfig>,
    timeout: Duration,
}

impl BoundedTls {
    pub(super) fn new(timeout: Duration) -> BoundedTls {
        use ureq::rustls;
        let roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        };
        let config = rustls::ClientConfig::builder_with_provider(
            rustls::crypto::ring::default_provider().into(),
        )
        .with_protocol_versions(&[&rustls::version::TLS12, &rustls::version::TLS13])
        .unwrap_or_else(|_| {
            rustls::ClientConfig::builder_with_provider(
                rustls::crypto::ring::default_provider().into(),
            )
            .with_safe_default_protocol_versions()
            .unwrap_or_else(|_| unreachable!("ring supports TLS 1.2 and 1.3"))
        })
        .with_root_certificates(roots)
        .with_no_client_auth();
        BoundedTls {
            inner: Arc::new(config),
            timeout,
        }
    }
}

impl ureq::TlsConnector for BoundedTls {
    fn connect(
        &self,
        dns_name: &str,
        io: Box<dyn ureq::ReadWrite>,
    ) -> Result<Box<dyn ureq::ReadWrite>, ureq::Error> {
        let before = io.socket().map(|s| (s.read_timeout(), s.write_timeout()));
        if let Some(s) = io.socket() {
            let _ = s.set_read_timeout(Some(self.timeout));
            let _ = s.set_write_timeout(Some(self.timeout));
        }
        let stream = self.inner.connect(dns_name, io)?;
        if let (Some(s), Some((Ok(r), Ok(w)))) = (stream.socket(), before) {
            let _ = s.set_read_timeout(r);
            let _ = s.set_write_timeout(w);
        }
        Ok(stream)
    }
}

/// Whether the transport follows a redirect at all: never from https to
/// plain http (off loopback), never to anything but http(s).
pub(super) fn redirect_allowed(from: &Url, to: &Url) -> Result<(), &'static str> {
    if !matches!(to.scheme(), "http" | "https") {
        return Err("a redirect to a non-HTTP URL");
    }
    if from.scheme() == "https" && to.scheme() == "http" && !urls::is_loopback(to) {
        return Err("a redirect from https to plain http");
    }
    Ok(())
}

/// `resource_metadata="…"` from a `WWW-Authenticate` header.
pub(super) fn resource_metadata(header: &str) -> Option<String> {
    auth_param(header, "resource_metadata")
}

/// One `name=value` / `name="value"` parameter of a `WWW-Authenticate`
/// header (matched as a whole word).
pub(super) fn auth_param(header: &str, name: &str) -> Option<String> {
    let key = format!("{name}=");
    let mut from = 0;
    let at = loop {
        let i = from + header[from..].find(&key)?;
        let word_start = i == 0 || matches!(header.as_bytes()[i - 1], b' ' | b',' | b'\t');
        if word_start {
            break i;
        }
        from = i + key.len();
    };
    let rest = &header[at + key.len()..];
    let value = match rest.strip_prefix('"') {
        Some(quoted) => quoted.split('"').next()?,
        None => rest.split([',', ' ']).next()?,
    };
    Some(value.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirects_never_downgrade_off_loopback() {
        let u = |s: &str| Url::parse(s).expect("url");
        let https = u("https://mcp.example.com/mcp");
        assert!(redirect_allowed(&https, &u("https://other.example.com/x")).is_ok());
        assert_eq!(
            redirect_allowed(&https, &u("http://mcp.example.com/mcp")),
            Err("a redirect from https to plain http")
        );
        assert!(redirect_allowed(&https, &u("http://127.0.0.1:9/mcp")).is_ok());
        assert!(redirect_allowed(&https, &u("http://localhost/mcp")).is_ok());
        assert!(redirect_allowed(&https, &u("file:///etc/passwd")).is_err());
    }

    #[test]
    fn media_types_are_bare_and_safe_to_show() {
        let m = |h: Option<&str>| media_type(h);
        assert_eq!(
            m(Some("Application/JSON; charset=utf-8")).as_deref(),
            Some("application/json")
        );
        assert_eq!(
            m(Some(" text/event-stream")).as_deref(),
            Some("text/event-stream")
        );
        assert_eq!(m(Some(" ; x=1")), None);
        assert_eq!(m(None), None);
        assert_eq!(m(Some("text/ht ml")).as_deref(), Some("[unreadable]"));
    }

    #[test]
    fn finds_resource_metadata() {
        assert_eq!(
            resource_metadata(
                r#"Bearer error="invalid_token", resource_metadata="https://a.example/.well-known/oauth-protected-resource/mcp", scope="x""#
            )
            .as_deref(),
            Some("https://a.example/.well-known/oauth-protected-resource/mcp")
        );
        assert_eq!(resource_metadata("Bearer realm=x"), None);
        let h = r#"Bearer error="insufficient_scope", scope="files:read files:write", xscope=no"#;
        assert_eq!(
            auth_param(h, "error").as_deref(),
            Some("insufficient_scope")
        );
        assert_eq!(
            auth_param(h, "scope").as_deref(),
            Some("files:read files:write")
        );
    }
}
