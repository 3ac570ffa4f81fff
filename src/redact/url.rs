//! URLs: userinfo passwords, credential query and fragment parameters, and
//! (for the URL-valued response headers) the path.
//!
//! Parsing is by hand, on purpose lenient: the input is whatever a server
//! or a user wrote, often not a valid URL, and the goal is only to find the
//! parts that may hold a credential. A URL is
//! `scheme://userinfo@host/path?query#fragment`, any part optional.
//!
//! Body and display URLs keep their path (a replay needs it, and the
//! token-shape layer still catches webhook and bot tokens inside it).
//! `Location`, `Content-Location`, `Link` and `Refresh` values lose it
//! (`/<redacted>`): a path has no name to judge it by, and these headers
//! are where capability URLs come back (the mcpeak rule).

use super::keys;

/// What replaces a password or a parameter value.
pub(crate) const MARK: &str = "[REDACTED]";
/// What replaces an erased path.
pub(crate) const PATH_MARK: &str = "/<redacted>";

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum PathMode {
    Keep,
    Erase,
}

/// The parts of a URL, as byte ranges of the input.
#[derive(Debug, Default)]
struct Parts {
    /// `scheme://` or `//` included; empty for a relative reference.
    prefix_end: usize,
    /// Userinfo before the `@` (without it), if any.
    userinfo: Option<(usize, usize)>,
    /// Start and end of the path.
    path: (usize, usize),
    /// After `?`, up to `#` (without either).
    query: Option<(usize, usize)>,
    /// After `#` (without it).
    fragment: Option<(usize, usize)>,
}

fn parse(u: &str) -> Parts {
    let b = u.as_bytes();
    let mut p = Parts::default();
    let mut i = 0;
    // scheme
    let scheme_len = b
        .iter()
        .position(|&c| !(c.is_ascii_alphanumeric() || c == b'+' || c == b'.' || c == b'-'))
        .unwrap_or(b.len());
    let has_authority;
    if scheme_len > 0 && b[0].is_ascii_alphabetic() && b.get(scheme_len) == Some(&b':') {
        i = scheme_len + 1;
        has_authority = b[i..].starts_with(b"//");
        if has_authority {
            i += 2;
        }
    } else {
        has_authority = b.starts_with(b"//");
        if has_authority {
            i = 2;
        }
    }
    p.prefix_end = i;
    if has_authority {
        let auth_end = b[i..]
            .iter()
            .position(|&c| c == b'/' || c == b'?' || c == b'#')
            .map_or(b.len(), |k| i + k);
        if let Some(at) = userinfo_end(b, i, auth_end) {
            p.userinfo = Some((i, at));
        }
        let path_start = auth_end.max(p.userinfo.map_or(0, |(_, e)| e + 1));
        let host_end = b[path_start..]
            .iter()
            .position(|&c| c == b'/' || c == b'?' || c == b'#')
            .map_or(b.len(), |k| path_start + k);
        i = host_end;
    }
    let path_end = b[i..]
        .iter()
        .position(|&c| c == b'?' || c == b'#')
        .map_or(b.len(), |k| i + k);
    p.path = (i, path_end);
    i = path_end;
    if b.get(i) == Some(&b'?') {
        let q_end = b[i + 1..]
            .iter()
            .position(|&c| c == b'#')
            .map_or(b.len(), |k| i + 1 + k);
        p.query = Some((i + 1, q_end));
        i = q_end;
    }
    if b.get(i) == Some(&b'#') {
        p.fragment = Some((i + 1, b.len()));
    }
    p
}

/// Where the userinfo ends (the index of its `@`), if there is one.
///
/// RFC 3986 ends the authority at the first `/`, `?` or `#`, and the
/// userinfo at the last `@` before that. Real passwords are often not
/// percent-encoded (`p@ss/w0rd`, `gu3st#pw`), so the search is wider: the
/// userinfo ends at the last `@` before the query or fragment that follows
/// the first `/`, provided a `:` comes before it that does not start a port
/// (`host:8080/…`). This can over-redact a path containing `@` after a
/// password; it never leaves part of a password behind.
fn userinfo_end(b: &[u8], start: usize, auth_end: usize) -> Option<usize> {
    let rfc = b[start..auth_end]
        .iter()
        .rposition(|&c| c == b'@')
        .map(|k| start + k);
    let first_slash = b[start..]
        .iter()
        .position(|&c| c == b'/')
        .map_or(b.len(), |k| start + k);
    let limit = b[first_slash..]
        .iter()
        .position(|&c| c == b'?' || c == b'#')
        .map_or(b.len(), |k| first_slash + k);
    let last = b[start..limit]
        .iter()
        .rposition(|&c| c == b'@')
        .map(|k| start + k);
    if let Some(last) = last.filter(|&l| Some(l) != rfc)
        && let Some(colon) = b[start..last]
            .iter()
            .position(|&c| c == b':')
            .map(|k| start + k)
    {
        let seg_end = b[colon + 1..]
            .iter()
            .position(|&c| c == b'/')
            .map_or(b.len(), |k| colon + 1 + k);
        let port_like = seg_end > colon + 1
            && b[colon + 1..seg_end].iter().all(u8::is_ascii_digit)
            && rfc.is_none_or(|r| r < colon);
        if !port_like {
            return Some(last);
        }
    }
    rfc
}

/// Redacts one URL. `None` when nothing changed.
pub(crate) fn redact_url(u: &str, mode: PathMode, legacy: bool) -> Option<String> {
    let p = parse(u);
    let mut out = String::with_capacity(u.len() + 16);
    let mut changed = false;
    let mut pos = 0;
    if let Some((s, e)) = p.userinfo {
        let ui = &u[s..e];
        if let Some(colon) = colon_outside_markers(ui) {
            out.push_str(&u[pos..s + colon + 1]);
            let pw = &ui[colon + 1..];
            if pw.is_empty() || pw.contains("[REDACTED") {
                out.push_str(pw);
            } else {
                out.push_str(MARK);
                changed = true;
            }
            pos = e;
        }
    }
    let (ps, pe) = p.path;
    out.push_str(&u[pos..ps]);
    let path = &u[ps..pe];
    if mode == PathMode::Erase && !path.is_empty() && path != "/" && path != PATH_MARK {
        out.push_str(PATH_MARK);
        changed = true;
    } else {
        out.push_str(path);
    }
    pos = pe;
    if let Some((s, e)) = p.query {
        out.push_str(&u[pos..s]);
        changed |= redact_params(&u[s..e], &mut out, legacy);
        pos = e;
    }
    if let Some((s, e)) = p.fragment {
        out.push_str(&u[pos..s]);
        let frag = &u[s..e];
        if frag.contains('=') {
            changed |= redact_params(frag, &mut out, legacy);
        } else {
            out.push_str(frag);
        }
        pos = e;
    }
    out.push_str(&u[pos..]);
    changed.then_some(out)
}

/// The first `:` that is not inside an earlier `[REDACTED:…]` marker.
fn colon_outside_markers(ui: &str) -> Option<usize> {
    let b = ui.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"[REDACTED") {
            i += b[i..]
                .iter()
                .position(|&c| c == b']')
                .map_or(b.len() - i, |k| k + 1);
            continue;
        }
        if b[i] == b':' {
            return Some(i);
        }
        i += 1;
    }
    None
}

/// `a=1&token=x;b=2` → `a=1&token=[REDACTED];b=2`. Names are compared after
/// percent-decoding (`api%5Fkey` is `api_key`).
fn redact_params(q: &str, out: &mut String, legacy: bool) -> bool {
    let mut changed = false;
    for (k, part) in q.split(['&', ';']).enumerate() {
        if k > 0 {
            // Put back the separator that was there.
            let sep_at = part.as_ptr() as usize - q.as_ptr() as usize - 1;
            out.push_str(&q[sep_at..sep_at + 1]);
        }
        match part.split_once('=') {
            Some((name, value)) if !value.is_empty() => {
                let decoded = crate::codec::percent_decode(name);
                if keys::is_secret_query_param(&decoded, legacy) {
                    out.push_str(name);
                    out.push('=');
                    if value.contains("[REDACTED") {
                        out.push_str(value);
                    } else {
                        out.push_str(MARK);
                        changed = true;
                    }
                } else {
                    out.push_str(part);
                }
            }
            _ => out.push_str(part),
        }
    }
    changed
}

/// Bytes that end a URL found in free text.
pub(crate) fn ends_url(c: u8) -> bool {
    c.is_ascii_whitespace()
        || matches!(
            c,
            b'"' | b'\'' | b'<' | b'>' | b'`' | b'\\' | b'{' | b'}' | b'|' | b'^'
        )
        || c < 0x20
}

/// Finds `scheme://…` URLs in free text and redacts each (path kept).
/// Returns the new text and how many URLs changed.
pub(crate) fn redact_urls_in_text(s: &str, legacy: bool) -> Option<(String, u32)> {
    let b = s.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut search = 0;
    let mut count = 0u32;
    while let Some(k) = find(&b[search..], b"://") {
        let sep = search + k;
        // Walk back over the scheme.
        let mut start = sep;
        while start > 0
            && (b[start - 1].is_ascii_alphanumeric() || matches!(b[start - 1], b'+' | b'.' | b'-'))
        {
            start -= 1;
        }
        while start < sep && !b[start].is_ascii_alphabetic() {
            start += 1;
        }
        let mut end = sep + 3;
        while end < b.len() && !ends_url(b[end]) {
            end += 1;
        }
        search = end.max(sep + 3);
        if start == sep || start < copied {
            continue;
        }
        // Trailing punctuation belongs to the sentence, not the URL.
        let mut url_end = end;
        while url_end > sep + 3
            && matches!(
                b[url_end - 1],
                b'.' | b',' | b';' | b':' | b'!' | b')' | b']'
            )
        {
            url_end -= 1;
        }
        if let Some(red) = redact_url(&s[start..url_end], PathMode::Keep, legacy) {
            let o = out.get_or_insert_with(|| String::with_capacity(s.len()));
            o.push_str(&s[copied..start]);
            o.push_str(&red);
            copied = url_end;
            count += 1;
        }
    }
    out.map(|mut o| {
        o.push_str(&s[copied..]);
        (o, count)
    })
}

pub(crate) fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || hay.len() < needle.len() {
        return None;
    }
    let first = needle[0];
    let mut i = 0;
    while i + needle.len() <= hay.len() {
        let k = hay[i..=hay.len() - needle.len()]
            .iter()
            .position(|&c| c == first)?;
        i += k;
        if &hay[i..i + needle.len()] == needle {
            return Some(i);
        }
        i += 1;
    }
    None
}

/// `Link` (RFC 8288): every URI loses its path; a `rel` whose values are all
/// registered relation types is kept; every other parameter becomes
/// `param=[REDACTED]`, name included (parameter names and values are
/// arbitrary text). `None` when the value does not parse: the caller then
/// redacts it whole.
pub(crate) fn redact_link(v: &str, legacy: bool) -> Option<String> {
    let b = v.as_bytes();
    let mut out = String::with_capacity(v.len());
    let mut i = 0;
    let ows = |i: &mut usize| {
        while *i < b.len() && (b[*i] == b' ' || b[*i] == b'\t') {
            *i += 1;
        }
    };
    let mut first = true;
    loop {
        ows(&mut i);
        if i >= b.len() {
            break;
        }
        if !first {
            if b[i] != b',' {
                return None;
            }
            i += 1;
            ows(&mut i);
            // Empty list elements (`a, , b`) are allowed by the grammar.
            if i < b.len() && b[i] == b',' {
                continue;
            }
            out.push_str(", ");
        }
        first = false;
        if b.get(i) != Some(&b'<') {
            return None;
        }
        let close = b[i..].iter().position(|&c| c == b'>')? + i;
        let uri = &v[i + 1..close];
        out.push('<');
        out.push_str(&redact_url(uri, PathMode::Erase, legacy).unwrap_or_else(|| uri.to_owned()));
        out.push('>');
        i = close + 1;
        loop {
            ows(&mut i);
            if b.get(i) != Some(&b';') {
                break;
            }
            i += 1;
            ows(&mut i);
            let name_start = i;
            while i < b.len() && is_tchar(b[i]) {
                i += 1;
            }
            if i == name_start {
                return None;
            }
            let name = &v[name_start..i];
            ows(&mut i);
            let mut value: Option<&str> = None;
            let value_start = i;
            if b.get(i) == Some(&b'=') {
                i += 1;
                ows(&mut i);
                if b.get(i) == Some(&b'"') {
                    i += 1;
                    let s = i;
                    loop {
                        match b.get(i) {
                            None => return None,
                            Some(b'\\') => i += 2,
                            Some(b'"') => break,
                            Some(_) => i += 1,
                        }
                    }
                    if i > b.len() {
                        return None;
                    }
                    value = Some(&v[s..i]);
                    i += 1;
                } else {
                    let s = i;
                    while i < b.len() && is_tchar(b[i]) {
                        i += 1;
                    }
                    if i == s {
                        return None;
                    }
                    value = Some(&v[s..i]);
                }
            }
            let keep = name.eq_ignore_ascii_case("rel")
                && value.is_some_and(|rv| {
                    rv.split_ascii_whitespace().count() > 0
                        && rv.split_ascii_whitespace().all(is_registered_rel)
                });
            out.push_str("; ");
            if keep {
                out.push_str(name);
                out.push_str(&v[value_start..i]);
            } else {
                out.push_str("param=");
                out.push_str(MARK);
            }
        }
    }
    if first {
        return None;
    }
    Some(out)
}

/// `Refresh: 5; url=https://…`: the delay is kept, the URL loses its path.
/// No `url=` after a separator, or anything else unexpected: `None`.
pub(crate) fn redact_refresh(v: &str, legacy: bool) -> Option<String> {
    let t = v.trim();
    let b = t.as_bytes();
    let mut i = 0;
    while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.') {
        i += 1;
    }
    if i == 0 {
        return None;
    }
    let delay = &t[..i];
    let rest = &t[i..];
    if rest.trim().is_empty() {
        return Some(delay.to_owned());
    }
    let rest = rest.trim_start_matches([' ', '\t']);
    let rest = rest
        .strip_prefix([';', ','])?
        .trim_start_matches([' ', '\t']);
    if rest.len() < 4 || !rest[..4].eq_ignore_ascii_case("url=") {
        return None;
    }
    let mut url = rest[4..].trim_start_matches([' ', '\t']);
    let quote = url.chars().next().filter(|c| *c == '"' || *c == '\'');
    if let Some(q) = quote {
        url = url[1..].strip_suffix(q)?;
    }
    let url = url.trim_end();
    let red = redact_url(url, PathMode::Erase, legacy).unwrap_or_else(|| url.to_owned());
    Some(match quote {
        Some(q) => format!("{delay}; url={q}{red}{q}"),
        None => format!("{delay}; url={red}"),
    })
}

fn is_tchar(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c)
}

/// Registered link relation types (IANA) that are safe to keep as they are.
fn is_registered_rel(r: &str) -> bool {
    const RELS: &[&str] = &[
        "alternate",
        "appendix",
        "author",
        "bookmark",
        "canonical",
        "chapter",
        "collection",
        "contents",
        "copyright",
        "current",
        "describedby",
        "edit",
        "first",
        "glossary",
        "help",
        "hub",
        "icon",
        "index",
        "item",
        "last",
        "latest-version",
        "license",
        "manifest",
        "modulepreload",
        "next",
        "nofollow",
        "noopener",
        "noreferrer",
        "payment",
        "preconnect",
        "prefetch",
        "preload",
        "prev",
        "previous",
        "related",
        "replies",
        "search",
        "section",
        "self",
        "service",
        "start",
        "stylesheet",
        "subsection",
        "type",
        "up",
        "version-history",
        "via",
        "working-copy",
    ];
    RELS.iter().any(|x| x.eq_ignore_ascii_case(r))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keep(u: &str) -> String {
        redact_url(u, PathMode::Keep, false).unwrap_or_else(|| u.to_owned())
    }
    fn erase(u: &str) -> String {
        redact_url(u, PathMode::Erase, false).unwrap_or_else(|| u.to_owned())
    }

    #[test]
    fn userinfo_query_fragment() {
        assert_eq!(
            keep("postgres://app:s3cr3t@db.internal:5432/app"),
            "postgres://app:[REDACTED]@db.internal:5432/app"
        );
        assert_eq!(
            keep("https://mcp.example.com/mcp?token=abc&page=2"),
            "https://mcp.example.com/mcp?token=[REDACTED]&page=2"
        );
        assert_eq!(
            keep("https://app.example.com/cb#access_token=xyz&token_type=bearer&expires_in=3600"),
            "https://app.example.com/cb#access_token=[REDACTED]&token_type=bearer&expires_in=3600"
        );
        assert_eq!(
            keep("https://s3.example.com/b/o?X-Amz-Credential=AK%2F2024&X-Amz-Signature=ff00&x=1"),
            "https://s3.example.com/b/o?X-Amz-Credential=[REDACTED]&X-Amz-Signature=[REDACTED]&x=1"
        );
        assert_eq!(
            keep("https://x.example/?api%5Fkey=zz"),
            "https://x.example/?api%5Fkey=[REDACTED]"
        );
        assert_eq!(
            keep("https://example.com/a/b#section-2"),
            "https://example.com/a/b#section-2"
        );
        assert_eq!(
            keep("https://user@example.com/"),
            "https://user@example.com/"
        );
        assert_eq!(
            keep("https://host:8080/users/@me"),
            "https://host:8080/users/@me"
        );
        assert_eq!(keep("https://host/users/@me"), "https://host/users/@me");
        assert_eq!(
            keep("https://x-token=[REDACTED:assignment]@github.com/"),
            "https://x-token=[REDACTED:assignment]@github.com/"
        );
        assert_eq!(
            keep("amqp://guest:gu3st#pw@mq.local:5672/vhost"),
            "amqp://guest:[REDACTED]@mq.local:5672/vhost"
        );
        assert_eq!(
            keep("https://u:pw@host/p?email=a@b.example"),
            "https://u:[REDACTED]@host/p?email=a@b.example"
        );
        assert_eq!(
            keep("https://u:p/w@host/x?token=t"),
            "https://u:[REDACTED]@host/x?token=[REDACTED]"
        );
        assert_eq!(
            keep("redis://:p@ss/w0rd@cache:6379/0"),
            "redis://:[REDACTED]@cache:6379/0"
        );
    }

    #[test]
    fn header_paths_erased() {
        assert_eq!(
            erase("https://hooks.example.com/services/T000/B111/XXXX?token=abc"),
            "https://hooks.example.com/<redacted>?token=[REDACTED]"
        );
        assert_eq!(erase("/hooks/SECRET?cursor=2"), "/<redacted>?cursor=2");
        assert_eq!(erase("https://example.com/"), "https://example.com/");
        assert_eq!(erase("?page=2"), "?page=2");
    }

    #[test]
    fn idempotent() {
        for u in [
            "postgres://app:s3cr3t@db/app",
            "https://x/y?token=a#code=b",
            "redis://:p@ss/w0rd@cache:6379/0",
        ] {
            let once = keep(u);
            assert_eq!(keep(&once), once);
            let once = erase(u);
            assert_eq!(erase(&once), once);
        }
    }

    #[test]
    fn urls_in_text() {
        let t = "failed to reach https://u:pw123456@api.example.com/v1?key=AAA. Retrying (see https://docs.example.com/x).";
        assert_eq!(
            redact_urls_in_text(t, false).map(|(s, _)| s).as_deref(),
            Some(
                "failed to reach https://u:[REDACTED]@api.example.com/v1?key=[REDACTED]. Retrying (see https://docs.example.com/x)."
            )
        );
        assert_eq!(redact_urls_in_text("no urls here :// nope", false), None);
        assert_eq!(redact_urls_in_text("://x:y@z", false), None);
    }

    #[test]
    fn link_header() {
        assert_eq!(
            redact_link(
                r#"</services/T00/B00/XXXXSECRET?cursor=2>; rel="next""#,
                false
            )
            .as_deref(),
            Some(r#"</<redacted>?cursor=2>; rel="next""#)
        );
        assert_eq!(
            redact_link(
                r#"<https://api.example.com/items?page=3&access_token=t>; rel="next"; title="sk_live_x", <https://api.example.com/items?page=1>; rel=first"#,
                false
            )
            .as_deref(),
            Some(
                r#"<https://api.example.com/<redacted>?page=3&access_token=[REDACTED]>; rel="next"; param=[REDACTED], <https://api.example.com/<redacted>?page=1>; rel=first"#
            )
        );
        assert_eq!(
            redact_link(r#"<https://a.example/x>; rel="custom-thing""#, false).as_deref(),
            Some("<https://a.example/<redacted>>; param=[REDACTED]")
        );
        assert_eq!(redact_link("not a link", false), None);
        assert_eq!(
            redact_link(r#"<https://a>; title="unterminated"#, false),
            None
        );
        assert_eq!(redact_link("", false), None);
    }

    #[test]
    fn refresh_header() {
        assert_eq!(
            redact_refresh("5; url=https://ex.example/reset/TOKEN123", false).as_deref(),
            Some("5; url=https://ex.example/<redacted>")
        );
        assert_eq!(
            redact_refresh("0;URL='/a/b'", false).as_deref(),
            Some("0; url='/<redacted>'")
        );
        assert_eq!(redact_refresh("5", false).as_deref(), Some("5"));
        assert_eq!(redact_refresh("5; https://x/y", false), None);
        assert_eq!(redact_refresh("soon", false), None);
    }

    #[test]
    fn percent_decoding() {
        assert_eq!(crate::codec::percent_decode("api%3Akey"), "api:key");
        assert_eq!(crate::codec::percent_decode("a+b%zz%4"), "a b%zz%4");
    }
}
