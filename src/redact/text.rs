//! Names and values in free text: `KEY=value` lines, `--flag value` and
//! `--flag=value` arguments, `"key": "value"` fragments of JSON that did not
//! parse, YAML `key: value` lines, and `Authorization: Bearer …` header
//! lines. The name is judged by the key rule ([`super::keys`]).
//!
//! A value is redacted outright when its form says it is a value:
//!
//! * `NAME=value`, `NAME:=value`, `NAME=>value` with no space around the
//!   separator (env files, query strings, `--flag=value`);
//! * a quoted value (`password = "hunter2"`, `"token": "abc"`, also with
//!   escaped quotes `\"token\": \"abc\"`);
//! * a `--flag value` pair;
//! * a `name: value` line whose value is a single word running to the end
//!   of the line (YAML, `.npmrc`, HTTP header lines).
//!
//! Otherwise (`the token: see below`, `api_key = config.api_key`) the value
//! must look random to be redacted: at least 8 characters mixing letters
//! and digits. Placeholders (`${TOKEN}`, `{{ secret }}`, `<your-key>`,
//! `$API_KEY`, `***`, `null`, earlier `[REDACTED…]` markers) are left alone,
//! which also makes the layer idempotent.
//!
//! For `Authorization`-like names the scheme survives:
//! `Authorization: Bearer [REDACTED:bearer]`.

use std::borrow::Cow;
use std::ops::Range;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, AhoCorasickKind, MatchKind};

use super::keys;

/// Substrings one of which every secret name contains (lower-case). A name
/// without any of them cannot pass the key rule, so only these spots are
/// examined. They are searched in three spellings, `token`, `Token` and
/// `TOKEN` (case-sensitive search is several times faster than
/// case-insensitive), which covers snake, kebab, camel, Pascal and
/// screaming case; a name spelt `tOkEn` is not found in free text.
const TRIGGERS: &[&str] = &[
    "token", "secret", "key", "pass", "pwd", "auth", "cookie", "cred", "sess", "bearer", "jwt",
];

fn trigger_spellings() -> Vec<String> {
    let mut out = Vec::with_capacity(TRIGGERS.len() * 3);
    for t in TRIGGERS {
        out.push((*t).to_owned());
        out.push(t.to_ascii_uppercase());
        let mut cap = (*t).to_owned();
        cap[..1].make_ascii_uppercase();
        out.push(cap);
    }
    out
}

pub(crate) const KIND_ASSIGNMENT: &str = "assignment";
pub(crate) const KIND_ARGV: &str = "argv";
pub(crate) const KIND_HEADER: &str = "header";

/// HTTP authentication schemes kept in front of a redacted credential.
const SCHEMES: &[&str] = &[
    "aws4-hmac-sha256",
    "basic",
    "bearer",
    "digest",
    "dpop",
    "negotiate",
    "ntlm",
    "token",
];

pub(crate) struct Assignments {
    triggers: Option<AhoCorasick>,
}

/// A found value: its span and the placeholder that replaces it (a cookie
/// header whose cookies are all kept is found with itself as its
/// replacement).
pub(crate) struct Found {
    pub start: usize,
    pub end: usize,
    pub kind: &'static str,
    /// The text that replaces the span.
    pub marker: String,
}

impl Assignments {
    pub(crate) fn new() -> Assignments {
        Assignments {
            triggers: AhoCorasickBuilder::new()
                .kind(Some(AhoCorasickKind::DFA))
                .match_kind(MatchKind::LeftmostFirst)
                .build(trigger_spellings())
                .ok(),
        }
    }

    /// Every redactable value in `s`, in order, not overlapping.
    pub(crate) fn find(&self, s: &str, legacy: bool) -> Vec<Found> {
        let b = s.as_bytes();
        let mut found: Vec<Found> = Vec::new();
        let mut last_end = 0usize;
        let consider = |ts: usize, te: usize, found: &mut Vec<Found>, last_end: &mut usize| {
            if ts < *last_end {
                return;
            }
            let (ns, ne) = expand_name(b, ts, te);
            // Skip the rest of this name; the next trigger is elsewhere.
            *last_end = ne.max(te);
            if let Some(f) = value_after_name(s, ns..ne, legacy) {
                *last_end = f.end;
                found.push(f);
            }
        };
        match &self.triggers {
            Some(ac) => {
                for m in ac.find_iter(b) {
                    consider(m.start(), m.end(), &mut found, &mut last_end);
                }
            }
            None => {
                // Fallback: examine every name-ish run.
                let mut i = 0;
                while i < b.len() {
                    if is_name_byte(b[i]) {
                        let st = i;
                        while i < b.len() && is_name_byte(b[i]) {
                            i += 1;
                        }
                        consider(st, i, &mut found, &mut last_end);
                    } else {
                        i += 1;
                    }
                }
            }
        }
        found
    }
}

/// Bytes of a name: `%` too, so a percent-encoded name (`api%3Asecret`)
/// is read whole and judged decoded.
fn is_name_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-' | b'%')
}

/// Widens a trigger hit to the whole name around it; trims `.` and `-` at
/// the end (a sentence's full stop), keeps leading dashes (flags). A `:`
/// between name bytes joins them (`api:key=…` is one name, as the key
/// rule splits it), which a `name: value` separator never is.
fn expand_name(b: &[u8], mut s: usize, mut e: usize) -> (usize, usize) {
    while s > 0
        && (is_name_byte(b[s - 1]) || (b[s - 1] == b':' && s >= 2 && is_name_byte(b[s - 2])))
    {
        s -= 1;
    }
    while e < b.len() && is_name_byte(b[e]) {
        e += 1;
    }
    while e > s && matches!(b[e - 1], b'.' | b'-') {
        e -= 1;
    }
    (s, e)
}

fn skip_blanks(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && (b[i] == b' ' || b[i] == b'\t') {
        i += 1;
    }
    i
}

/// Looks at what follows the name `s[name]` (`NAME=value`, `--flag
/// value`, `Name: value`, …) and returns the value to redact, if the name
/// is a secret's and the value is there. `legacy_key_rule` adds the old
/// substring rule to the key rule ([`keys::is_secret_key`]).
fn value_after_name(s: &str, name: Range<usize>, legacy_key_rule: bool) -> Option<Found> {
    let (ns, ne, legacy) = (name.start, name.end, legacy_key_rule);
    let b = s.as_bytes();
    let raw_name = &s[ns..ne];
    let dashes = raw_name.len() - raw_name.trim_start_matches('-').len();
    let name = raw_name.trim_start_matches(['-', '.', '_']);
    if name.is_empty() {
        return None;
    }
    // The form is checked first and the key rule last: most names in text
    // are followed by no value at all (`the cache key is…`).
    let flag = dashes > 0;
    let header_like = keys::is_always_secret_header(name) && !flag;
    let auth_like = is_authorization_name(name);
    // A quoted name: `"name"`, `'name'`, `\"name\"`.
    let quoted_name = ns > 0 && matches!(b[ns - 1], b'"' | b'\'');
    let mut i = ne;
    // A quote before the name that does not close after it opened a longer
    // string (`-b 'sid=…; theme=dark'`): the name is read as unquoted.
    if quoted_name {
        if b.get(i) == Some(&b'\\') && matches!(b.get(i + 1), Some(b'"' | b'\'')) {
            i += 2;
        } else if matches!(b.get(i), Some(b'"' | b'\'')) {
            i += 1;
        }
    }
    let before_sep = i;
    i = skip_blanks(b, i);
    let space_before = i > before_sep;
    // The separator.
    let equals = b.get(i) == Some(&b'=') && b.get(i + 1) != Some(&b'=');
    let colon_sep =
        b.get(i) == Some(&b':') && b.get(i + 1) != Some(&b':') && !b[i..].starts_with(b"://");
    let sep_len = if b[i..].starts_with(b":=") || b[i..].starts_with(b"=>") {
        2
    } else if equals || colon_sep {
        1
    } else {
        0
    };
    let colon = sep_len == 1 && b[i] == b':';
    let mut strict;
    if sep_len == 0 {
        // `--flag value`, or `password value` (`.netrc`, prose): in text a
        // name may be followed by an ordinary word (`--token option`,
        // `password reset`), so the floor applies. Argv arrays are handled
        // structurally.
        if !space_before || i >= b.len() || b[i] == b'-' || b[i] == b'\n' {
            return None;
        }
        strict = false;
    } else {
        i += sep_len;
        let after = skip_blanks(b, i);
        strict = !space_before && after == i && !colon;
        i = after;
    }
    // The value.
    let (vs, mut ve, quoted) = value_span(b, i, header_like && colon)?;
    let url = !quoted && in_url(b, ns);
    if !quoted {
        ve = over_markers(b, vs, ve, url);
    }
    if url {
        // Inside a URL the value ends where the URL layer ends the URL, so
        // both layers agree on what is left after this one.
        ve = b[vs..ve]
            .iter()
            .position(|&c| super::url::ends_url(c))
            .map_or(ve, |k| vs + k);
    }
    let value = &s[vs..ve];
    let marked = value.contains("[REDACTED");
    let residue = if marked {
        Cow::Owned(without_markers(value))
    } else {
        Cow::Borrowed(value)
    };
    if quoted {
        strict = true;
    }
    if colon && !quoted && !strict {
        // A YAML or header line: name at the start of its line and a single
        // word up to the end of it.
        let line_start = b[..ns]
            .iter()
            .rposition(|&c| c == b'\n')
            .map_or(0, |p| p + 1);
        let lead = &b[line_start..ns];
        let at_line_start = lead.iter().all(|&c| c == b' ' || c == b'\t' || c == b'-');
        let rest_of_line = b[ve..].iter().take_while(|&&c| c != b'\n' && c != b'\r');
        let single_word = rest_of_line.clone().all(|&c| c == b' ' || c == b'\t');
        strict = (at_line_start && single_word) || header_like;
    }
    let kind = if flag {
        KIND_ARGV
    } else if header_like && colon {
        KIND_HEADER
    } else {
        KIND_ASSIGNMENT
    };
    // `Authorization: Bearer x` keeps the scheme.
    if auth_like
        && let Some((scheme, cred_start)) = scheme_prefix(value)
        && keys::is_secret_key(name, legacy)
    {
        let cred = &value[cred_start..];
        let cred = cred.trim_end();
        // Documentation writes a stand-in as the credential's first word
        // (`Bearer <token>` with more prose after it on the line).
        let first_word = cred
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .trim_end_matches(['`', '\'', '"', ',', ';', '.', ')']);
        if cred.is_empty()
            || is_placeholder(cred)
            || is_placeholder(first_word)
            || cred.contains("[REDACTED")
        {
            return None;
        }
        let start = vs + cred_start;
        return Some(Found {
            start,
            end: start + cred.len(),
            kind: KIND_HEADER,
            marker: format!("[REDACTED:{scheme}]"),
        });
    }
    if value.is_empty() || (!marked && is_placeholder(value)) {
        return None;
    }
    // A cookie header, in any of its forms (`Cookie: …`, `--cookie '…'`,
    // `cookie = "…"`, `"Set-Cookie": "…"`), keeps its harmless cookies and
    // its attributes.
    if let Some(set) = super::cookie_header_name(name)
        && ((header_like && colon) || flag || (sep_len > 0 && (quoted || strict)))
    {
        let red = if set {
            super::redact_set_cookie(value)
        } else {
            super::redact_cookie(value)
        };
        // Unchanged, it is still returned: its span is read, so a name
        // inside an attribute (`Expires=…token=…`) is not judged on its own
        // this time and then not the next.
        return Some(Found {
            start: vs,
            end: ve,
            kind: if header_like && colon {
                KIND_HEADER
            } else {
                kind
            },
            marker: red,
        });
    }
    // A value holding an earlier marker was already redacted, unless what
    // is glued to the marker is itself random (`Pw9x…[REDACTED:github-pat]`,
    // two secrets in one string): then the whole value goes. Names and
    // separators next to a marker (`sid=[REDACTED]`) are not, which keeps
    // a second redaction from finding anything more.
    if marked && !glued_secret(value) {
        return None;
    }
    if b.get(ve) == Some(&b'(') {
        // `token=get_token()`: code, not a value.
        return None;
    }
    if !strict && !looks_random(&residue, flag) {
        return None;
    }
    if !keys::is_secret_key(name, legacy) {
        return None;
    }
    Some(Found {
        start: vs,
        end: ve,
        kind,
        marker: format!("[REDACTED:{kind}]"),
    })
}

/// Whether the name at `ns` sits in a `scheme://…` URL (a query or fragment
/// parameter): the word it belongs to contains `://` before it.
fn in_url(b: &[u8], ns: usize) -> bool {
    let word_start = b[..ns]
        .iter()
        .rposition(|&c| super::url::ends_url(c))
        .map_or(0, |p| p + 1);
    super::url::find(&b[word_start..ns], b"://").is_some()
}

/// The value starting at `i`: quoted (to the closing quote on the same
/// line), or a run up to a delimiter. `to_eol` (secret header lines) runs to
/// the end of the line. Returns (start, end, quoted).
fn value_span(b: &[u8], i: usize, to_eol: bool) -> Option<(usize, usize, bool)> {
    let first = *b.get(i)?;
    // Escaped quote: `\"value\"`.
    if first == b'\\' && matches!(b.get(i + 1), Some(b'"' | b'\'')) {
        let q = b[i + 1];
        let vs = i + 2;
        let mut j = vs;
        while j < b.len() && b[j] != b'\n' {
            if b[j] == b'\\' && b.get(j + 1) == Some(&q) {
                return Some((vs, j, true));
            }
            j += 1;
        }
        return Some((vs, j, true));
    }
    if matches!(first, b'"' | b'\'' | b'`') {
        let vs = i + 1;
        let mut j = vs;
        while j < b.len() && b[j] != first && b[j] != b'\n' {
            if b[j] == b'\\' {
                j += 1;
            }
            j += 1;
        }
        return Some((vs, j.min(b.len()), true));
    }
    if matches!(first, b'{' | b'[' | b'\n' | b'\r') && !b[i..].starts_with(b"[REDACTED") {
        return None;
    }
    let mut j = i;
    if to_eol {
        while j < b.len() && !matches!(b[j], b'\n' | b'\r' | b'"' | b'\\') {
            j += 1;
        }
        while j > i && (b[j - 1] == b' ' || b[j - 1] == b'\t') {
            j -= 1;
        }
    } else {
        while j < b.len() && !ends_value(b[j]) {
            j += 1;
        }
    }
    (j > i).then_some((i, j, false))
}

/// An unquoted value that ran into an earlier marker (`pw[REDACTED:x`,
/// stopped by the marker's `]`) is widened over the whole marker and on to
/// the end of the run (inside a URL, no further than the URL layer reads
/// it), so the value is judged, and replaced, whole.
fn over_markers(b: &[u8], vs: usize, mut ve: usize, url: bool) -> usize {
    while b.get(ve) == Some(&b']') && has_open_marker(&b[vs..ve]) {
        ve += 1;
        while ve < b.len() && !ends_value(b[ve]) && !(url && super::url::ends_url(b[ve])) {
            ve += 1;
        }
    }
    ve
}

/// Whether `b` holds a `[REDACTED` whose `]` is not in `b`.
fn has_open_marker(b: &[u8]) -> bool {
    let Some(k) = b.windows(9).rposition(|w| w == b"[REDACTED") else {
        return false;
    };
    !b[k..].contains(&b']')
}

/// Whether a value holding markers also holds, between or around them, a
/// run of letters and digits that looks random (a second secret).
fn glued_secret(v: &str) -> bool {
    let mut rest = v;
    loop {
        let (piece, after) = match rest.find("[REDACTED") {
            Some(k) => (&rest[..k], rest[k..].find(']').map(|e| &rest[k + e + 1..])),
            None => (rest, None),
        };
        if piece
            .split(|c: char| !c.is_ascii_alphanumeric())
            .any(|w| looks_random(w, false))
        {
            return true;
        }
        match after {
            Some(a) => rest = a,
            None => return false,
        }
    }
}

/// `v` with every `[REDACTED…]` marker taken out.
fn without_markers(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    let mut rest = v;
    while let Some(k) = rest.find("[REDACTED") {
        out.push_str(&rest[..k]);
        rest = match rest[k..].find(']') {
            Some(e) => &rest[k + e + 1..],
            None => "",
        };
    }
    out.push_str(rest);
    out
}

/// Where an unquoted value ends: whitespace, control bytes, quotes,
/// brackets and the separators of lists and queries.
fn ends_value(c: u8) -> bool {
    c <= 0x20
        || c == 0x7f
        || matches!(
            c,
            b'"' | b'\''
                | b'`'
                | b'<'
                | b'>'
                | b','
                | b';'
                | b'&'
                | b')'
                | b']'
                | b'}'
                | b'\\'
                | b'('
        )
}

/// `Bearer abc…` → ("bearer", offset of `abc`).
fn scheme_prefix(value: &str) -> Option<(&'static str, usize)> {
    let word_end = value.find([' ', '\t'])?;
    let word = &value[..word_end];
    let scheme = SCHEMES.iter().find(|s| s.eq_ignore_ascii_case(word))?;
    let rest = &value[word_end..];
    let cred = rest.len() - rest.trim_start().len();
    Some((scheme, word_end + cred))
}

/// Names whose value starts with an HTTP auth scheme.
fn is_authorization_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower.ends_with("authorization")
}

/// Values that stand for a secret without being one.
pub(crate) fn is_placeholder(v: &str) -> bool {
    let t = v.trim();
    if t.is_empty() || t.starts_with("[REDACTED") || t == "<redacted>" {
        return true;
    }
    if t.starts_with("${") || t.starts_with("{{") || t.starts_with("$(") || t.starts_with("%(") {
        return true;
    }
    if t.starts_with('<') && t.ends_with('>') {
        return true;
    }
    if t.starts_with('%') && t.ends_with('%') && t.len() > 2 {
        return true;
    }
    if let Some(rest) = t.strip_prefix('$')
        && !rest.is_empty()
        && rest
            .bytes()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == b'_')
    {
        return true;
    }
    let lower = t.to_ascii_lowercase();
    if matches!(
        lower.as_str(),
        "null" | "none" | "nil" | "true" | "false" | "undefined" | "redacted" | "..." | "…"
    ) {
        return true;
    }
    let first = t.as_bytes()[0];
    if t.len() >= 3 && t.bytes().all(|c| c == first) && !first.is_ascii_digit() {
        return true;
    }
    // Documentation's stand-ins: `YOUR_API_KEY`, `your-token-here`,
    // `INSERT_TOKEN_HERE`, `changeme` (words only, no digits), and masks
    // (`sk-xxxxxxxxxxxx`, `****************`).
    let words_only = t
        .bytes()
        .all(|c| c.is_ascii_alphabetic() || matches!(c, b'_' | b'-' | b'.' | b' '));
    if words_only {
        let words: Vec<&str> = lower.split(['_', '-', '.', ' ']).collect();
        let has = |list: &[&str]| words.iter().any(|w| list.contains(w));
        if has(&["placeholder", "changeme"])
            || (has(&["your", "here", "insert", "replace"])
                && has(&[
                    "key",
                    "token",
                    "secret",
                    "password",
                    "pass",
                    "api",
                    "apikey",
                    "pat",
                    "credential",
                    "credentials",
                ]))
        {
            return true;
        }
    }
    let mut run = 0usize;
    let mut prev = 0u8;
    t.bytes().any(|c| {
        run = if c == prev { run + 1 } else { 1 };
        prev = c;
        run >= 6 && matches!(c, b'x' | b'X' | b'*' | b'.')
    })
}

/// The floor for values whose form alone does not say "value": letters and
/// digits mixed, 8 characters or more (6 for a `--flag` in prose, where a
/// digit, a symbol or mixed case is enough).
fn looks_random(v: &str, flag: bool) -> bool {
    let b = v.as_bytes();
    let digit = b.iter().any(u8::is_ascii_digit);
    let alpha = b.iter().any(u8::is_ascii_alphabetic);
    if flag {
        let upper = b.iter().any(u8::is_ascii_uppercase);
        let lower = b.iter().any(u8::is_ascii_lowercase);
        let symbol = b
            .iter()
            .any(|c| !c.is_ascii_alphanumeric() && *c != b'-' && *c != b'_');
        return b.len() >= 6 && (digit || symbol || (upper && lower));
    }
    b.len() >= 8 && digit && alpha
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(s: &str) -> String {
        let a = Assignments::new();
        let mut out = String::new();
        let mut copied = 0;
        for f in a.find(s, false) {
            out.push_str(&s[copied..f.start]);
            out.push_str(&f.marker);
            copied = f.end;
        }
        out.push_str(&s[copied..]);
        out
    }

    #[test]
    fn env_and_yaml() {
        assert_eq!(
            apply("API_KEY=abc\nDEBUG=1\nDB_PASSWORD=\"p w\"\n"),
            "API_KEY=[REDACTED:assignment]\nDEBUG=1\nDB_PASSWORD=\"[REDACTED:assignment]\"\n"
        );
        assert_eq!(
            apply("db:\n  password: correcthorse\n  user: app"),
            "db:\n  password: [REDACTED:assignment]\n  user: app"
        );
        assert_eq!(
            apply("export GITHUB_TOKEN=${GH}"),
            "export GITHUB_TOKEN=${GH}"
        );
        assert_eq!(
            apply("max_tokens=4096 tokenCount: 12"),
            "max_tokens=4096 tokenCount: 12"
        );
    }

    #[test]
    fn prose_is_kept() {
        for t in [
            "The token: see below for details",
            "set the password to something long",
            "api_key = config.api_key",
            "token = get_token()",
            "use the --token option to pass it",
            "if token == other {",
        ] {
            assert_eq!(apply(t), t, "{t}");
        }
    }

    #[test]
    fn prose_with_random_values() {
        assert_eq!(
            apply("the token: ab12cd34ef56 expired"),
            "the token: [REDACTED:assignment] expired"
        );
    }

    #[test]
    fn flags_and_headers() {
        assert_eq!(
            apply("run --api-key sk-abc123 --verbose"),
            "run --api-key [REDACTED:argv] --verbose"
        );
        assert_eq!(apply("run --token=abc123"), "run --token=[REDACTED:argv]");
        assert_eq!(
            apply("Authorization: Bearer abc.def.ghi\r\nAccept: */*"),
            "Authorization: Bearer [REDACTED:bearer]\r\nAccept: */*"
        );
        assert_eq!(
            apply("Cookie: sid=a1b2c3d4e5; b=2\nHost: x"),
            "Cookie: sid=[REDACTED]; b=2\nHost: x"
        );
        assert_eq!(apply("x-api-key: k123"), "x-api-key: [REDACTED:header]");
    }

    #[test]
    fn json_fragments() {
        assert_eq!(
            apply(r#"bad json {"api_key": "abc", "n": 1"#),
            r#"bad json {"api_key": "[REDACTED:assignment]", "n": 1"#
        );
        assert_eq!(
            apply(r#"{\"client_secret\":\"s3cr3t\"}"#),
            r#"{\"client_secret\":\"[REDACTED:assignment]\"}"#
        );
        assert_eq!(
            apply(r#""authorization": "Basic dXNlcjpwYXNz""#),
            r#""authorization": "Basic [REDACTED:basic]""#
        );
    }

    #[test]
    fn idempotent() {
        for t in [
            "API_KEY=abc\n",
            "Authorization: Bearer abc.def.ghi",
            "--api-key sk-abc123",
            r#"{"token": "x"}"#,
        ] {
            let once = apply(t);
            assert_eq!(apply(&once), once);
        }
    }
}
