//! The key rule: which names (JSON keys, header names, query parameters,
//! `NAME=value` names, `--flags`) carry a secret value.
//!
//! A name is split into lowercase words on every non-alphanumeric ASCII
//! byte (`-`, `_`, `.`, space, `/`, …) and on camelCase and acronym
//! boundaries:
//!
//! | name | words |
//! |---|---|
//! | `accessToken` | access, token |
//! | `XApiKey` | x, api, key |
//! | `OAuthToken` | o, auth, token |
//! | `APIKey` | api, key |
//! | `oauth2Token` | oauth2, token |
//! | `AWS_SECRET_ACCESS_KEY` | aws, secret, access, key |
//!
//! The suffixes of the word sequence are then joined without separators,
//! shortest first (`x-api-key` gives `key`, `apikey`, `xapikey`), and each
//! joined suffix is looked up in two lists: [`SECRET`] (compounds whose value
//! is a credential) and [`KEEP`] (compounds that end like a credential but
//! are not one). The **longest** suffix found in either list decides. So
//! `GITHUB_TOKEN` is secret (`token`), while `nextPageToken` is kept
//! (`token` is secret, but the longer `pagetoken` is a keeper).
//!
//! Matching whole words, not substrings, is what keeps `max_tokens`,
//! `tokenCount`, `passwordPolicy`, `author`, `keyboard`, `key_id`,
//! `public_key`, `primary_key`, `token_endpoint` and `token_url`: none of
//! their suffixes is a secret compound. Three refinements:
//!
//! * The last word alone may also *end with* a secret compound when the name
//!   has no separators at all (`githubtoken`, `DBPASSWORD`): see
//!   [`ENDS_WITH`]. The keepers still win (`nexttoken`).
//! * `pass` and `pwd` count only after a qualifier (`DB_PASS`, `smtpPwd`):
//!   alone, `pass` is usually a test counter and `PWD` a working directory.
//! * `auth` counts alone (`auth`, npm's `_auth`, Docker's `auths.*.auth`) and
//!   after a scheme word (`basic_auth`, `proxyAuth`), but not in `OAuth`,
//!   `requiresAuth` or `authType`. Walking is recursive, so an `oauth` object
//!   is still searched key by key.
//!
//! Decisions worth knowing:
//!
//! * **Pagination cursors are kept** (`nextPageToken`, `pageToken`,
//!   `NextToken`, `continuationToken`, MCP's `progressToken`): they are
//!   opaque handles a replay needs to walk the same pages, not credentials.
//!   A cursor that happens to embed a credential shape is still caught by
//!   the token-shape layer.
//! * **Session ids are secret** (`sessionId`, `Mcp-Session-Id`,
//!   `JSESSIONID`): the MCP security best practices treat a session id as
//!   bearer-like (session hijacking). Code that needs a host session id (the
//!   Claude Code `session_id` of a hook payload) reads it before redaction.
//!   The one exception is the run's own session id, the id it is filed
//!   under and shows in its header: a recorder gives it to the redactor
//!   (`Redactor::knowing_identifier`), and that exact value is kept under
//!   any name; every other value under these names is still redacted.
//! * Bare `key`, `keys`, `tokens`, `signature` and `session` are not secret:
//!   they name lookup keys, counters, HMACs and objects far more often than
//!   credentials (`{key, value}` pairs are handled by looking at the pair's
//!   name instead). In URL query strings, where `key=` usually is an API key,
//!   [`is_secret_query_param`] adds them.

/// Longest name (in bytes) the rule looks at; longer names are judged on
/// their last bytes, which is where the deciding suffix is.
const MAX_NAME: usize = 256;
/// Most words joined into one suffix; no compound has more.
const MAX_SUFFIX_WORDS: usize = 5;
/// Longest joined suffix worth looking up (longer than every list entry).
const MAX_JOINED: usize = 40;

/// Defines a word list (for documentation and tests) and a membership test
/// compiled to a `match` (length first, then bytes), which is several times
/// faster than a binary search on this hot path.
macro_rules! word_set {
    ($(#[$doc:meta])* $list:ident, $test:ident, [$($w:literal),* $(,)?]) => {
        $(#[$doc])*
        #[cfg_attr(not(test), allow(dead_code))]
        const $list: &[&str] = &[$($w),*];
        fn $test(s: &str) -> bool {
            matches!(s, $($w)|*)
        }
    };
}

word_set!(
    /// Joined suffixes whose value is a credential. Sorted.
    SECRET, is_secret_word, [
    "accesskey",
    "accesskeys",
    "accountkey",
    "apikey",
    "apikeys",
    "authkey",
    "authorization",
    "basicauth",
    "bearer",
    "bearerauth",
    "clientkey",
    "cookie",
    "cookies",
    "credential",
    "credentials",
    "creds",
    "digestauth",
    "encryptionkey",
    "hmackey",
    "httpauth",
    "jsessionid",
    "jwt",
    "licensekey",
    "masterkey",
    "passcode",
    "passphrase",
    "passwd",
    "password",
    "passwords",
    "phpsessid",
    "privatekey",
    "privatekeys",
    "proxyauth",
    "secret",
    "secretkey",
    "secretkeys",
    "secrets",
    "sessid",
    "sessionid",
    "sessionkey",
    "signingkey",
    "token",
    "tokenauth",
]);

word_set!(
    /// Joined suffixes that end like a credential but name something else.
    /// Sorted.
    KEEP, is_keep_word, [
    "cancellationtoken",
    "continuationtoken",
    "idempotencytoken",
    "maxtoken",
    "nextpagetoken",
    "nexttoken",
    "pagetoken",
    "paginationtoken",
    "previouspagetoken",
    "prevpagetoken",
    "prevtoken",
    "progresstoken",
    "resumetoken",
    "synctoken",
]);

/// A single unseparated word ending with one of these is secret
/// (`githubtoken`, `DBPASSWORD`, `setcookie`), unless a keeper matches.
const ENDS_WITH: &[&str] = &[
    "accesskey",
    "apikey",
    "authorization",
    "cookie",
    "passphrase",
    "passwd",
    "password",
    "privatekey",
    "secret",
    "secretkey",
    "sessionid",
    "token",
];

word_set!(
    /// Secret only as the last word after a qualifier (`db_pass`).
    QUALIFIED, is_qualified_word, ["pass", "pwd"]);

/// Substrings of the old rule (`BIR_REDACT_LEGACY_KEYS=1`).
const LEGACY: &[&str] = &["token", "secret", "password", "key", "auth"];

/// Header names whose value is always a credential, whatever the key rule
/// says.
const ALWAYS_SECRET_HEADERS: &[&str] = &[
    "authorization",
    "cookie",
    "mcp-session-id",
    "proxy-authorization",
    "set-cookie",
    "x-api-key",
];

/// Query and fragment parameter names that carry credentials in URLs even
/// though the key rule alone would not say so (signed URLs, OAuth
/// redirects, API keys passed as `?key=`).
const SECRET_QUERY_PARAMS: &[&str] = &[
    "access_token",
    "api-key",
    "apikey",
    "auth",
    "code",
    "id_token",
    "jwt",
    "key",
    "pass",
    "password",
    "pwd",
    "refresh_token",
    "secret",
    "session",
    "sig",
    "signature",
    "state",
    "ticket",
    "token",
    "x-amz-credential",
    "x-amz-security-token",
    "x-amz-signature",
    "x-goog-credential",
    "x-goog-signature",
];

/// The key rule. `legacy` adds the old substring rule on top (any name
/// containing `token`, `secret`, `password`, `key` or `auth`).
pub fn is_secret_key(name: &str, legacy: bool) -> bool {
    // A percent-encoded name (`api%3Asecret`, a form field or a query
    // parameter copied as is) is judged as its decoded self too.
    if name.contains('%') {
        let decoded = crate::codec::percent_decode(name);
        if decoded != name && judge_name(&decoded, legacy) {
            return true;
        }
    }
    judge_name(name, legacy)
}

/// The key rule on `name` as it is.
fn judge_name(name: &str, legacy: bool) -> bool {
    let bytes = name.as_bytes();
    let tail = &bytes[bytes.len().saturating_sub(MAX_NAME)..];
    let mut lower = [0u8; MAX_NAME];
    let lower = &mut lower[..tail.len()];
    for (d, s) in lower.iter_mut().zip(tail) {
        *d = s.to_ascii_lowercase();
    }
    if legacy && LEGACY.iter().any(|w| contains(lower, w.as_bytes())) {
        return true;
    }
    let mut words = [(0usize, 0usize); MAX_SUFFIX_WORDS];
    let (n, total) = last_words(tail, &mut words);
    if n == 0 {
        return false;
    }
    // `words` holds the last `n` words, last word first.
    let mut joined = [0u8; MAX_JOINED];
    let mut len = 0usize;
    let mut verdict = None;
    for (k, &(s, e)) in words[..n].iter().enumerate() {
        let w = &lower[s..e];
        if len + w.len() > MAX_JOINED {
            break;
        }
        // Prepend the word: joined = w + joined.
        joined.copy_within(0..len, w.len());
        joined[..w.len()].copy_from_slice(w);
        len += w.len();
        let Ok(j) = std::str::from_utf8(&joined[..len]) else {
            break;
        };
        if is_keep_word(j) {
            verdict = Some(false);
        } else if is_secret_word(j) {
            // `auth` alone is handled below; compounds ending in it are in
            // the list explicitly.
            verdict = Some(true);
        } else if k == 0 {
            let qualified = total >= 2 && is_qualified_word(j);
            let single = total == 1 && (j == "auth" || ENDS_WITH.iter().any(|x| j.ends_with(x)));
            if qualified || single {
                verdict = Some(true);
            }
        }
    }
    verdict.unwrap_or(false)
}

/// Whether a header's value is a credential: the always-secret headers plus
/// the key rule.
pub(crate) fn is_secret_header(name: &str, legacy: bool) -> bool {
    is_always_secret_header(name) || is_secret_key(name.trim(), legacy)
}

/// The headers whose value is always a credential.
pub(crate) fn is_always_secret_header(name: &str) -> bool {
    let name = name.trim();
    ALWAYS_SECRET_HEADERS
        .iter()
        .any(|h| h.eq_ignore_ascii_case(name))
}

/// Whether a URL query or fragment parameter (already percent-decoded)
/// carries a credential.
pub(crate) fn is_secret_query_param(name: &str, legacy: bool) -> bool {
    let name = name.trim();
    SECRET_QUERY_PARAMS
        .iter()
        .any(|p| p.eq_ignore_ascii_case(name))
        || is_secret_key(name, legacy)
}

/// Whether a key names a header map or list (`headers`, `requestHeaders`,
/// `http_headers`).
pub(crate) fn is_headers_key(name: &str) -> bool {
    let mut words = [(0usize, 0usize); MAX_SUFFIX_WORDS];
    let bytes = name.as_bytes();
    let tail = &bytes[bytes.len().saturating_sub(MAX_NAME)..];
    let (n, _) = last_words(tail, &mut words);
    n > 0 && {
        let (s, e) = words[0];
        tail[s..e].eq_ignore_ascii_case(b"headers")
    }
}

/// Splits `name` into words and stores the byte ranges of the last
/// `out.len()` of them, last word first. Returns how many were stored and
/// how many words the name has in total.
fn last_words(name: &[u8], out: &mut [(usize, usize)]) -> (usize, usize) {
    // Collect boundaries forward into a small ring of the last words.
    let cap = out.len();
    let mut ring = [(0usize, 0usize); MAX_SUFFIX_WORDS];
    let mut count = 0usize;
    let mut start: Option<usize> = None;
    let mut push = |s: usize, e: usize, count: &mut usize| {
        ring[*count % MAX_SUFFIX_WORDS] = (s, e);
        *count += 1;
    };
    for i in 0..name.len() {
        let c = name[i];
        let wordish = c.is_ascii_alphanumeric() || c >= 0x80;
        if !wordish {
            if let Some(s) = start.take() {
                push(s, i, &mut count);
            }
            continue;
        }
        if let Some(s) = start {
            let prev = name[i - 1];
            let boundary = c.is_ascii_uppercase()
                && (prev.is_ascii_lowercase()
                    || prev.is_ascii_digit()
                    || (prev.is_ascii_uppercase()
                        && name.get(i + 1).is_some_and(|n| n.is_ascii_lowercase())));
            if boundary && i > s {
                push(s, i, &mut count);
                start = Some(i);
            }
        } else {
            start = Some(i);
        }
    }
    if let Some(s) = start {
        push(s, name.len(), &mut count);
    }
    let n = count.min(cap).min(MAX_SUFFIX_WORDS);
    for (k, slot) in out.iter_mut().take(n).enumerate() {
        // k-th word from the end.
        *slot = ring[(count - 1 - k) % MAX_SUFFIX_WORDS];
    }
    (n, count)
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(name: &str) -> Vec<String> {
        let mut out = [(0usize, 0usize); MAX_SUFFIX_WORDS];
        let (n, _) = last_words(name.as_bytes(), &mut out);
        let mut v: Vec<String> = out[..n]
            .iter()
            .map(|&(s, e)| name[s..e].to_ascii_lowercase())
            .collect();
        v.reverse();
        v
    }

    #[test]
    fn lists_are_sorted_and_consistent() {
        for list in [
            SECRET,
            KEEP,
            QUALIFIED,
            SECRET_QUERY_PARAMS,
            ALWAYS_SECRET_HEADERS,
        ] {
            let mut sorted = list.to_vec();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(list, &sorted[..]);
        }
        assert!(SECRET.iter().all(|w| is_secret_word(w)));
        assert!(KEEP.iter().all(|w| is_keep_word(w)));
        assert!(!SECRET.iter().any(|w| is_keep_word(w)));
        // Every list entry is already lower-case and separator-free (it is
        // compared with joined lower-case words).
        for w in SECRET.iter().chain(KEEP).chain(QUALIFIED).chain(ENDS_WITH) {
            assert!(
                w.bytes()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()),
                "{w}"
            );
        }
    }

    #[test]
    fn splitting() {
        assert_eq!(words("XApiKey"), ["x", "api", "key"]);
        assert_eq!(words("OAuthToken"), ["o", "auth", "token"]);
        assert_eq!(words("APIKey"), ["api", "key"]);
        assert_eq!(words("accessToken"), ["access", "token"]);
        assert_eq!(words("oauth2Token"), ["oauth2", "token"]);
        assert_eq!(
            words("AWS_SECRET_ACCESS_KEY"),
            ["aws", "secret", "access", "key"]
        );
        assert_eq!(words("Mcp-Session-Id"), ["mcp", "session", "id"]);
        assert_eq!(words("IDToken"), ["id", "token"]);
        assert_eq!(
            words("spring.datasource.password"),
            ["spring", "datasource", "password"]
        );
        assert_eq!(words("a b  c"), ["a", "b", "c"]);
        assert_eq!(words("__"), Vec::<String>::new());
        assert_eq!(
            words("one_two_three_four_five_six"),
            ["two", "three", "four", "five", "six"]
        );
    }

    #[test]
    fn required_secrets() {
        for k in [
            "token",
            "accessToken",
            "access_token",
            "x-api-key",
            "basic_auth",
            "api_keys",
            "client_secret",
            "password",
            "cookie",
            "authorization",
            "private_key",
            "AWS_SECRET_ACCESS_KEY",
            "GITHUB_TOKEN",
            "Mcp-Session-Id",
            "apiKey",
            "APIKEY",
            "refresh_token",
            "id_token",
            "secretKey",
            "auth",
            "_auth",
            "_authToken",
            "DB_PASS",
            "smtpPwd",
            "githubtoken",
            "DBPASSWORD",
            "set-cookie",
            "Proxy-Authorization",
            "credentials",
            "passphrase",
            "X-Auth-Token",
            "x-goog-api-key",
            "PRIVATE-TOKEN",
            "Mcp-Param-Api-Key",
            "oauth_token",
            "sessionId",
            "JSESSIONID",
            "csrf_token",
            "webhookSecret",
        ] {
            assert!(is_secret_key(k, false), "{k} should be secret");
        }
    }

    #[test]
    fn required_keepers() {
        for k in [
            "max_tokens",
            "tokenCount",
            "passwordPolicy",
            "author",
            "keyboard",
            "key_id",
            "public_key",
            "primary_key",
            "token_endpoint",
            "token_url",
            "nextPageToken",
            "total_tokens",
            "progressToken",
            "NextToken",
            "next_token",
            "pageToken",
            "continuationToken",
            "key",
            "keys",
            "tokens",
            "OAuth",
            "oauth",
            "requiresAuth",
            "authType",
            "pass",
            "PWD",
            "OLDPWD",
            "secretName",
            "access_key_id",
            "tokenizer",
            "monkey",
            "session",
            "signature",
            "token_type",
            "",
            "-",
            "tool_use_id",
        ] {
            assert!(!is_secret_key(k, false), "{k} should be kept");
        }
    }

    #[test]
    fn legacy_substrings() {
        for k in ["max_tokens", "keyboard", "author", "tokenCount", "monkey"] {
            assert!(!is_secret_key(k, false));
            assert!(is_secret_key(k, true), "{k} legacy");
        }
        assert!(!is_secret_key("name", true));
    }

    #[test]
    fn headers_and_params() {
        assert!(is_secret_header("X-API-Key", false));
        assert!(is_secret_header("mcp-session-id", false));
        assert!(is_secret_header("Private-Token", false));
        assert!(!is_secret_header("content-type", false));
        assert!(!is_secret_header("www-authenticate", false));
        assert!(is_secret_query_param("X-Amz-Signature", false));
        assert!(is_secret_query_param("key", false));
        assert!(is_secret_query_param("client_secret", false));
        assert!(!is_secret_query_param("cursor", false));
        assert!(!is_secret_query_param("page", false));
        assert!(is_headers_key("headers"));
        assert!(is_headers_key("requestHeaders"));
        assert!(is_headers_key("http_headers"));
        assert!(!is_headers_key("header_count"));
    }

    #[test]
    fn long_and_odd_names_do_not_panic() {
        let long = "a".repeat(10_000) + "_token";
        assert!(is_secret_key(&long, false));
        assert!(!is_secret_key("é_ü", false));
        assert!(is_secret_key("пароль_password", false));
        let long_word = "x".repeat(300);
        assert!(!is_secret_key(&long_word, false));
    }
}
