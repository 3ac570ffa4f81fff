//! Redaction: the single choke point every recorded payload passes through
//! before it reaches a store, the network, a log or a terminal
//! (the product rule that nothing unredacted is stored or sent).
//!
//! # Invariants
//!
//! * **Copies only.** The redactor works on `serde_json::Value` trees and
//!   `&str` that belong to the recorder. It never sees, and so never
//!   changes, the bytes the relay forwards.
//! * **Total.** No input makes it panic or recurse without bound: the tree
//!   walk is iterative, containers deeper than [`MAX_DEPTH`] are replaced by
//!   `"[REDACTED:too-deep]"` (and taken apart iteratively), JSON inside
//!   strings is followed at most [`MAX_NEST`] levels, base64 inside base64
//!   at most two. As a last line, a panic inside a rule is caught and the
//!   whole value becomes `"[REDACTED:redactor-failed]"`: fail closed, never
//!   raw.
//! * **Stable, typed placeholders** (`[REDACTED:github-pat]`,
//!   `Bearer [REDACTED:bearer]`, `?token=[REDACTED]`), so recordings diff
//!   cleanly, and **idempotent**: redacting a redacted value changes
//!   nothing.
//! * **Nothing secret in `Debug`.** A `Redactor` prints counts, never the
//!   known values it holds.
//!
//! # Layers
//!
//! [`Redactor::redact_value`] walks every key and value:
//!
//! 1. **Keys** ([`keys`]): a value under a secret key name is replaced by
//!    `"[REDACTED:key]"` whatever its type. The same rule judges the name of
//!    `[name, value]` pairs, `{name|key, value}` objects, `--flag value`
//!    pairs in string arrays (`"[REDACTED:argv]"`) and cookie objects
//!    (`{name, value, domain…}`). Object keys are themselves scanned as text.
//! 2. **Structured strings**: a string holding a JSON object or array is
//!    parsed, redacted and re-serialised (only if something changed); every
//!    other string goes through the text layers.
//! 3. **URLs** ([`url`]): userinfo passwords, credential query and fragment
//!    parameters; path erasure for `Location`, `Content-Location`, `Link`
//!    and `Refresh`.
//! 4. **Headers**: under a key named `…headers` (object or list of pairs),
//!    and through [`Redactor::redact_header`]: credential headers always,
//!    other names by the key rule; `Authorization` keeps its scheme.
//! 5. **Token shapes** ([`shapes`]): our own table of provider formats, PEM
//!    private keys, `Bearer`/`Basic` credentials in text.
//! 6. **Known values** ([`known`]): exact secrets the proxy holds, in their
//!    encoded forms too.
//! 7. **Base64** ([`b64`]): text-like blobs are decoded and scanned by the
//!    text layers. Image and audio blocks (`{"type":"image"|"audio",
//!    "data":…}`) and binary resource blobs are not scanned: their bytes are
//!    not text, and the truncation layer stubs them.
//!
//! The text layers (known values, shapes, URLs, base64, `NAME=value`
//! assignments) run in that order on every string and object key,
//! and through [`Redactor::redact_text`] on log lines and messages.

mod b64;
mod keys;
mod known;
mod prefix;
mod shapes;
mod text;
mod url;

#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use serde_json::{Map, Value};

pub use keys::is_secret_key;

/// Containers nested deeper than this are replaced (serde_json's parser
/// stops at 128, so parsed input never gets here; this guards trees built
/// in code, and keeps the result safe to serialise and drop recursively).
pub const MAX_DEPTH: usize = 256;
/// How many levels of JSON-inside-a-string are parsed and walked.
pub const MAX_NEST: u8 = 3;
/// How many levels of base64-inside-base64 are decoded.
const MAX_B64_DEPTH: u8 = 2;
/// Rounds of JSON re-parsing applied to one string until it is stable.
const MAX_ROUNDS: usize = 3;

/// Replaces a container nested deeper than [`MAX_DEPTH`].
pub const TOO_DEEP: &str = crate::jsonrpc::lenient::TOO_DEEP;
/// Replaces everything when a rule panicked.
pub const FAILED: &str = "[REDACTED:redactor-failed]";
const KEY_MARK: &str = "[REDACTED:key]";
const ARGV_MARK: &str = "[REDACTED:argv]";
const HEADER_MARK: &str = "[REDACTED:header]";
const KNOWN_MARK: &str = "[REDACTED:known]";
const BASE64_MARK: &str = "[REDACTED:base64]";

/// How the redactor is set up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RedactConfig {
    /// Also redact every key that merely *contains* `token`, `secret`,
    /// `password`, `key` or `auth` (the old rule; `BIR_REDACT_LEGACY_KEYS=1`).
    /// Over-redacts (`max_tokens`, `keyboard`) but never under-redacts
    /// compared with the word rule.
    pub legacy_substring_keys: bool,
}

impl RedactConfig {
    /// From the value of `BIR_REDACT_LEGACY_KEYS` (read by the caller's
    /// config module): `1`, `true`, `yes` or `on` turn the legacy rule on.
    pub fn from_legacy_var(value: Option<&str>) -> RedactConfig {
        let on = value.is_some_and(|v| {
            matches!(
                v.trim().to_ascii_lowercase().as_str(),
                "1" | "true" | "yes" | "on"
            )
        });
        RedactConfig {
            legacy_substring_keys: on,
        }
    }
}

/// What one redaction did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// How many values (or spans of text) were replaced.
    pub redactions: u32,
    /// The same, by kind: `key`, `header`, `url`, `argv`, `assignment`,
    /// `known`, `base64`, `too-deep`, or a token-shape id (`github-pat`…).
    pub by_kind: BTreeMap<&'static str, u32>,
}

impl Report {
    pub fn is_empty(&self) -> bool {
        self.redactions == 0
    }

    pub fn merge(&mut self, other: &Report) {
        self.redactions = self.redactions.saturating_add(other.redactions);
        for (k, n) in &other.by_kind {
            let e = self.by_kind.entry(k).or_insert(0);
            *e = e.saturating_add(*n);
        }
    }

    pub(crate) fn add(&mut self, kind: &'static str) {
        self.redactions = self.redactions.saturating_add(1);
        let e = self.by_kind.entry(kind).or_insert(0);
        *e = e.saturating_add(1);
    }
}

/// The redactor. Build it once (patterns are compiled in [`Redactor::new`]),
/// add the known secrets, then share it (`Send + Sync`, all methods take
/// `&self`). A clone shares the compiled rules: [`Redactor::knowing_identifier`]
/// makes one per session cheaply.
#[derive(Clone)]
pub struct Redactor {
    cfg: RedactConfig,
    shapes: Arc<shapes::Shapes>,
    assignments: Arc<text::Assignments>,
    known: Arc<known::Known>,
    /// Exact values that are identifiers, not secrets (the run's own
    /// session id): the name rules keep them ([`Redactor::is_identifier`]).
    identifiers: Vec<String>,
}

impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Redactor")
            .field("cfg", &self.cfg)
            .field("known_values", &self.known.len())
            .finish_non_exhaustive()
    }
}

/// Where a node sits, as far as the rules care.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Ctx {
    Plain,
    /// The children of this object are headers (`"headers": {…}`).
    HeaderMap,
    /// The elements of this array (or the pair object) are headers
    /// (`"headers": [["name", "value"], {"name":…, "value":…}]`).
    HeaderList,
    /// Under a cookie key (`"cookies": [{"name":…, "value":…}]`, a cookie
    /// jar `{"sid": …, "theme": …}`): each cookie is judged on its own
    /// ([`cookie_pair`]), as in a `Cookie` header.
    Cookies,
}

struct Frame<'v> {
    v: &'v mut Value,
    ctx: Ctx,
    depth: usize,
}

impl Redactor {
    /// Compiles the rules. Never fails: the patterns are ours and tested.
    pub fn new(cfg: RedactConfig) -> Redactor {
        Redactor {
            cfg,
            shapes: Arc::new(shapes::Shapes::new()),
            assignments: Arc::new(text::Assignments::new()),
            known: Arc::new(known::Known::default()),
            identifiers: Vec::new(),
        }
    }

    /// This redactor, also keeping `id` wherever a name rule would take it
    /// (`{"session_id": id}`, `sessionId=id`): the id a run is filed under
    /// and shows in its header is an identifier, not a credential, and a
    /// run shows it the same everywhere. Only that exact value is kept; any
    /// other value under a session-id-like name (a web session's token) is
    /// judged by the rules as before, and the other layers (token shapes,
    /// known secrets) still apply to the id. Ids shorter than
    /// [`known::MIN_LEN`] are not taken. Shares the compiled rules.
    pub fn knowing_identifier(&self, id: &str) -> Redactor {
        let mut r = self.clone();
        if id.len() >= known::MIN_LEN && !r.identifiers.iter().any(|i| i == id) {
            r.identifiers.push(id.to_owned());
        }
        r
    }

    /// Whether `v` is exactly one of the identifiers the name rules keep.
    fn is_identifier(&self, v: &Value) -> bool {
        v.as_str().is_some_and(|s| self.is_identifier_text(s))
    }

    fn is_identifier_text(&self, s: &str) -> bool {
        !self.identifiers.is_empty() && self.identifiers.iter().any(|i| i == s)
    }

    /// Adds exact values the proxy knows are secret (env values, header
    /// values of the configured server). Their base64 (standard and
    /// URL-safe, with and without padding), percent-encoded and
    /// JSON-escaped forms are matched too. Values shorter than 8 bytes are
    /// ignored.
    pub fn add_known_secrets<I: IntoIterator<Item = String>>(&mut self, values: I) {
        Arc::make_mut(&mut self.known).add(values);
    }

    /// Redacts a JSON tree in place and says what it did.
    pub fn redact_value(&self, v: &mut Value) -> Report {
        let mut report = Report::default();
        let result = catch_unwind(AssertUnwindSafe(|| {
            let mut r = Report::default();
            self.walk(v, 0, &mut r);
            r
        }));
        match result {
            Ok(r) => report = r,
            Err(_) => {
                let old = std::mem::replace(v, Value::String(FAILED.to_owned()));
                dismantle(old);
                report.add("redactor-failed");
            }
        }
        report
    }

    /// Redacts free text (log lines, error messages, terminal output).
    pub fn redact_text<'a>(&self, s: &'a str) -> Cow<'a, str> {
        let mut report = Report::default();
        self.redact_text_counted(s, &mut report)
    }

    /// [`Redactor::redact_text`], adding what it did to `report`.
    pub fn redact_text_counted<'a>(&self, s: &'a str, report: &mut Report) -> Cow<'a, str> {
        let result = catch_unwind(AssertUnwindSafe(|| {
            let mut r = Report::default();
            let out = self.text(s, &mut r, 0);
            (out, r)
        }));
        match result {
            Ok((out, r)) => {
                report.merge(&r);
                match out {
                    Some(t) => Cow::Owned(t),
                    None => Cow::Borrowed(s),
                }
            }
            Err(_) => {
                report.add("redactor-failed");
                Cow::Owned(FAILED.to_owned())
            }
        }
    }

    /// One header. Credential headers (`authorization`,
    /// `proxy-authorization`, `cookie`, `set-cookie`, `x-api-key`,
    /// `mcp-session-id`) always, other names by the key rule;
    /// `Authorization` keeps its scheme (`Bearer [REDACTED:bearer]`), cookies
    /// keep their names and attributes. `Location`, `Content-Location`,
    /// `Link` and `Refresh` lose their URL paths. Anything else goes through
    /// the text layers.
    pub fn redact_header<'a>(&self, name: &str, value: &'a str) -> Cow<'a, str> {
        let result = catch_unwind(AssertUnwindSafe(|| {
            self.header_value(name, value, &mut Report::default())
        }));
        match result {
            Ok(Some(t)) => Cow::Owned(t),
            Ok(None) => Cow::Borrowed(value),
            Err(_) => Cow::Owned(FAILED.to_owned()),
        }
    }

    /// A URL for display in logs and error messages (the user's own
    /// configured URL): userinfo password, credential query and fragment
    /// parameters redacted, path kept; then the text layers (a token shape
    /// or a known value in the path is still caught).
    pub fn redact_url_for_display(&self, u: &str) -> String {
        let result = catch_unwind(AssertUnwindSafe(|| {
            let mut r = Report::default();
            let structural = url::redact_url(u, url::PathMode::Keep, self.legacy());
            let s = structural.as_deref().unwrap_or(u);
            match self.text(s, &mut r, 0) {
                Some(t) => t,
                None => s.to_owned(),
            }
        }));
        result.unwrap_or_else(|_| FAILED.to_owned())
    }

    fn legacy(&self) -> bool {
        self.cfg.legacy_substring_keys
    }

    fn secret_key(&self, name: &str) -> bool {
        keys::is_secret_key(name, self.legacy())
    }

    // ---- the tree walk ------------------------------------------------

    fn walk(&self, root: &mut Value, nest: u8, report: &mut Report) {
        let mut stack = vec![Frame {
            v: root,
            ctx: Ctx::Plain,
            depth: 0,
        }];
        while let Some(Frame { v, ctx, depth }) = stack.pop() {
            if depth >= MAX_DEPTH && (v.is_object() || v.is_array()) {
                let old = std::mem::replace(v, Value::String(TOO_DEEP.to_owned()));
                dismantle(old);
                report.add("too-deep");
                continue;
            }
            match v {
                Value::Object(map) => self.object(map, ctx, depth, nest, report, &mut stack),
                Value::Array(items) => self.array(items, ctx, depth, nest, report, &mut stack),
                Value::String(s) => self.redact_string(s, nest, report),
                Value::Null | Value::Bool(_) | Value::Number(_) => {}
            }
        }
    }

    fn object<'v>(
        &self,
        map: &'v mut Map<String, Value>,
        ctx: Ctx,
        depth: usize,
        nest: u8,
        report: &mut Report,
        stack: &mut Vec<Frame<'v>>,
    ) {
        self.rename_keys(map, report);

        // Media blocks: their base64 is not text.
        let is_media = map
            .get("type")
            .and_then(Value::as_str)
            .is_some_and(|t| t == "image" || t == "audio");
        let binary_blob = map
            .get("mimeType")
            .and_then(Value::as_str)
            .is_some_and(is_binary_mime);

        // `{name|key, value}` pairs, header pairs and cookie objects.
        // The name is redacted first, so the pair is judged on what will be
        // recorded (a second pass then judges the same name).
        let mut value_done = false;
        let mut pair_name = None;
        for field in ["name", "key"] {
            if let Some(Value::String(n)) = map.get_mut(field) {
                self.redact_string(n, nest, report);
                pair_name = Some(n.clone());
                break;
            }
        }
        // A list of headers may hold single-header maps instead of pairs.
        let ctx = if ctx == Ctx::HeaderList && pair_name.is_none() {
            Ctx::HeaderMap
        } else {
            ctx
        };
        if let Some(name) = pair_name {
            let cookie = ctx == Ctx::Cookies
                || ["domain", "httpOnly", "sameSite"]
                    .iter()
                    .any(|f| map.contains_key(*f));
            if let Some(value) = map.get_mut("value") {
                if ctx == Ctx::HeaderList {
                    value_done = self.header_entry(&name, value, report);
                } else if cookie {
                    cookie_object_value(&name, value, report);
                    value_done = true;
                } else if self.secret_key(&name) && !self.is_identifier(value) {
                    if !self.cookie_header_value(&name, value, report) {
                        replace_with(value, KEY_MARK, "key", report);
                    }
                    value_done = true;
                }
            }
        } else if ctx == Ctx::Cookies {
            // A cookie jar: cookie names as keys.
            for (k, child) in map.iter_mut() {
                cookie_object_value(k, child, report);
            }
            return;
        }

        for (k, child) in map.iter_mut() {
            if (is_media && k == "data")
                || (binary_blob && k == "blob")
                || (value_done && k == "value")
            {
                continue;
            }
            if ctx == Ctx::HeaderMap {
                if !self.header_entry(k, child, report) {
                    stack.push(Frame {
                        v: child,
                        ctx: Ctx::Plain,
                        depth: depth + 1,
                    });
                }
                continue;
            }
            if self.secret_key(k) && !self.is_identifier(child) {
                if cookie_header_name(k).is_some() && (child.is_array() || child.is_object()) {
                    stack.push(Frame {
                        v: child,
                        ctx: Ctx::Cookies,
                        depth: depth + 1,
                    });
                } else if !self.cookie_header_value(k, child, report) {
                    replace_with(child, KEY_MARK, "key", report);
                }
                continue;
            }
            if let Value::String(text) = child
                && let Some(new) = self.shapes.scan_under_key(k, text, report)
            {
                *text = new;
            }
            let child_ctx = if keys::is_headers_key(k) {
                match child {
                    Value::Object(_) => Ctx::HeaderMap,
                    Value::Array(_) => Ctx::HeaderList,
                    _ => Ctx::Plain,
                }
            } else {
                Ctx::Plain
            };
            stack.push(Frame {
                v: child,
                ctx: child_ctx,
                depth: depth + 1,
            });
        }
    }

    /// Object keys are text too (`{"ghp_…": true}`, a registry URL with a
    /// password as a key). A renamed key that collides gets `~` appended.
    fn rename_keys(&self, map: &mut Map<String, Value>, report: &mut Report) {
        let mut renames: Vec<(String, String)> = Vec::new();
        for k in map.keys() {
            if let Some(new) = self.text(k, report, 0) {
                renames.push((k.clone(), new));
            }
        }
        for (old, mut new) in renames {
            if let Some(v) = map.remove(&old) {
                while map.contains_key(&new) {
                    new.push('~');
                }
                map.insert(new, v);
            }
        }
    }

    fn array<'v>(
        &self,
        items: &'v mut [Value],
        ctx: Ctx,
        depth: usize,
        nest: u8,
        report: &mut Report,
        stack: &mut Vec<Frame<'v>>,
    ) {
        // `[name, value]` pairs (the name redacted first, as for objects).
        for item in items.iter_mut() {
            if let Value::Array(pair) = item
                && let [Value::String(name), value] = pair.as_mut_slice()
            {
                self.redact_string(name, nest, report);
                if ctx == Ctx::HeaderList {
                    self.header_entry(name, value, report);
                } else if ctx == Ctx::Cookies {
                    cookie_object_value(name, value, report);
                } else if self.secret_key(name)
                    && !self.is_identifier(value)
                    && !self.cookie_header_value(name, value, report)
                {
                    replace_with(value, KEY_MARK, "key", report);
                }
            }
        }
        // `--flag value` argv pairs.
        if ctx == Ctx::Plain {
            for i in 1..items.len() {
                let flag = match &mut items[i - 1] {
                    Value::String(s) if s.starts_with('-') => {
                        self.redact_string(s, nest, report);
                        self.is_secret_flag(s)
                    }
                    _ => false,
                };
                if !flag {
                    continue;
                }
                let is_value = match &items[i] {
                    Value::String(s) => !s.starts_with('-') || s.len() < 2,
                    Value::Number(_) => true,
                    _ => false,
                };
                if !is_value {
                    continue;
                }
                // `--cookie "sid=…; theme=dark"` is judged as the header.
                let cookie_flag = match &items[i - 1] {
                    Value::String(f) => {
                        cookie_header_name(f).map(|set| if set { "set-cookie" } else { "cookie" })
                    }
                    _ => None,
                };
                if !cookie_flag
                    .is_some_and(|name| self.cookie_header_value(name, &mut items[i], report))
                {
                    replace_with(&mut items[i], ARGV_MARK, "argv", report);
                }
            }
        }
        let child_ctx = match ctx {
            Ctx::HeaderList => Ctx::HeaderList,
            Ctx::Cookies => Ctx::Cookies,
            _ => Ctx::Plain,
        };
        for item in items.iter_mut() {
            if ctx == Ctx::Cookies {
                match item {
                    // `["sid=…; theme=dark"]`: header strings.
                    Value::String(_) => {
                        self.cookie_header_value("cookie", item, report);
                        continue;
                    }
                    Value::Array(pair) if matches!(pair.as_slice(), [Value::String(_), _]) => {
                        continue;
                    }
                    Value::Object(_) => {}
                    _ => {
                        replace_with(item, KEY_MARK, "key", report);
                        continue;
                    }
                }
            }
            let c = if matches!(item, Value::Object(_)) {
                child_ctx
            } else {
                Ctx::Plain
            };
            stack.push(Frame {
                v: item,
                ctx: c,
                depth: depth + 1,
            });
        }
    }

    /// `--api-key`, `-token` (not `--token=x`, which the text layer handles).
    fn is_secret_flag(&self, s: &str) -> bool {
        let name = s.trim_start_matches('-');
        s.len() - name.len() >= 1
            && s.len() - name.len() <= 2
            && !name.is_empty()
            && !name.contains('=')
            && !name.contains(char::is_whitespace)
            && self.secret_key(name)
    }

    /// A value under a cookie header's name (`"Cookie": "sid=…; theme=dark"`,
    /// `["Set-Cookie", "sid=…; Path=/"]`, `--cookie "…"`): judged as that
    /// header, cookie by cookie, keeping harmless cookies and the
    /// attributes. Returns whether it was handled (`false`: not a cookie
    /// header's name, or a value that is neither a string nor a list of
    /// strings; the caller redacts it whole).
    fn cookie_header_value(&self, name: &str, value: &mut Value, report: &mut Report) -> bool {
        let Some(set) = cookie_header_name(name) else {
            return false;
        };
        // The text layers first, as for a cookie line in text (where the
        // cookie rule is the last layer), so a second redaction judges the
        // same cookies.
        let one = |s: &mut String, report: &mut Report| {
            if let Some(t) = self.text(s, report, 0) {
                *s = t;
            }
            if text::is_placeholder(s) {
                return;
            }
            let red = if set {
                redact_set_cookie(s)
            } else {
                redact_cookie(s)
            };
            if red != *s {
                report.add("header");
                *s = red;
            }
        };
        match value {
            Value::String(s) => one(s, report),
            Value::Array(items) if items.iter().all(Value::is_string) => {
                for item in items.iter_mut() {
                    if let Value::String(s) = item {
                        one(s, report);
                    }
                }
            }
            _ => return false,
        }
        true
    }

    /// A header inside a JSON tree. Returns whether it was fully handled
    /// (the caller walks it as plain JSON otherwise).
    fn header_entry(&self, name: &str, value: &mut Value, report: &mut Report) -> bool {
        let secret = keys::is_secret_header(name, self.legacy());
        match value {
            Value::String(s) => {
                if let Some(new) = self.header_value(name, s, report) {
                    *s = new;
                }
                true
            }
            Value::Array(items) if items.iter().all(Value::is_string) => {
                for item in items.iter_mut() {
                    if let Value::String(s) = item
                        && let Some(new) = self.header_value(name, s, report)
                    {
                        *s = new;
                    }
                }
                true
            }
            _ if secret => {
                replace_with(value, HEADER_MARK, "header", report);
                true
            }
            _ => false,
        }
    }

    /// The rules of [`Redactor::redact_header`]. `None` when unchanged.
    fn header_value(&self, name: &str, value: &str, report: &mut Report) -> Option<String> {
        let lname = name.trim().to_ascii_lowercase();
        if keys::is_secret_header(&lname, self.legacy()) {
            if text::is_placeholder(value) {
                return None;
            }
            let red = if lname == "cookie" {
                redact_cookie(value)
            } else if lname == "set-cookie" {
                redact_set_cookie(value)
            } else if lname.ends_with("authorization") {
                redact_authorization(value)
            } else {
                HEADER_MARK.to_owned()
            };
            if red == value {
                return None;
            }
            report.add("header");
            return Some(red);
        }
        let structural = match lname.as_str() {
            "location" | "content-location" => {
                url::redact_url(value.trim(), url::PathMode::Erase, self.legacy())
            }
            "link" => Some(
                url::redact_link(value, self.legacy()).unwrap_or_else(|| HEADER_MARK.to_owned()),
            ),
            "refresh" => Some(
                url::redact_refresh(value, self.legacy()).unwrap_or_else(|| HEADER_MARK.to_owned()),
            ),
            _ => None,
        };
        let structural = structural.filter(|s| s != value);
        if structural.is_some() {
            report.add("url");
        }
        let base = structural.as_deref().unwrap_or(value);
        match self.text(base, report, 0) {
            Some(t) => Some(t),
            None => structural,
        }
    }

    // ---- strings and text -------------------------------------------

    /// Redacts a string in place. Text that was not JSON may become JSON
    /// once a layer removed what broke it (a stray control character inside
    /// a key); it is then walked as JSON too, so that a second redaction
    /// finds nothing more.
    fn redact_string(&self, s: &mut String, nest: u8, report: &mut Report) {
        if let Some(new) = self.string_value(s, nest, report) {
            *s = new;
            for _ in 1..MAX_ROUNDS {
                match self.json_string(s, nest, report) {
                    Some(Some(new)) => *s = new,
                    _ => break,
                }
            }
        }
    }

    fn string_value(&self, s: &str, nest: u8, report: &mut Report) -> Option<String> {
        match self.json_string(s, nest, report) {
            Some(changed) => changed,
            None => self.text(s, report, 0),
        }
    }

    /// A string holding a JSON object or array: parsed, walked and
    /// re-serialised if anything changed (`Some(Some(new))`), left as it is
    /// otherwise (`Some(None)`). `None` when it is not JSON.
    ///
    /// A string holding only the start of one (a preview of a payload too
    /// large to keep, or JSON inside it cut at the same point) is closed
    /// and walked the same way; if that finds nothing it is left to the
    /// text layers, as before.
    fn json_string(&self, s: &str, nest: u8, report: &mut Report) -> Option<Option<String>> {
        let t = s.trim();
        let opens = t.starts_with('{') || (t.starts_with('[') && !t.starts_with("[REDACTED"));
        if nest >= MAX_NEST || !opens {
            return None;
        }
        let (mut inner, cut) = match serde_json::from_str::<Value>(t) {
            Ok(v) => (v, false),
            Err(_) => (prefix::parse_json_prefix(t)?, true),
        };
        let mut r = Report::default();
        self.walk(&mut inner, nest + 1, &mut r);
        if r.is_empty() {
            return if cut { None } else { Some(None) };
        }
        report.merge(&r);
        // Serialising a Value cannot fail (string keys only); if it somehow
        // did, drop the string rather than keep it raw.
        Some(Some(
            serde_json::to_string(&inner).unwrap_or_else(|_| FAILED.to_owned()),
        ))
    }

    /// The text layers. One round is idempotent by construction: every
    /// layer leaves earlier markers and placeholders alone, and no marker
    /// completes a pattern of an earlier layer.
    fn text(&self, s: &str, report: &mut Report, b64_depth: u8) -> Option<String> {
        self.text_once(s, report, b64_depth)
    }

    /// One round of the text layers, in order. `None` when nothing changed.
    fn text_once(&self, s: &str, report: &mut Report, b64_depth: u8) -> Option<String> {
        let mut cur: Cow<'_, str> = Cow::Borrowed(s);

        let spans = self.known.spans(&cur);
        if !spans.is_empty() {
            let replaced = replace_spans(
                &cur,
                spans
                    .into_iter()
                    .map(|(a, b)| (a, b, KNOWN_MARK, known::KIND)),
                report,
            );
            cur = Cow::Owned(replaced);
        }

        if let Some(t) = self.shapes.scan(&cur, report) {
            cur = Cow::Owned(t);
        }

        if let Some((t, n)) = url::redact_urls_in_text(&cur, self.legacy()) {
            for _ in 0..n {
                report.add("url");
            }
            cur = Cow::Owned(t);
        }

        if b64_depth < MAX_B64_DEPTH && cur.len() >= b64::MIN_RUN {
            let found = b64::scan(&cur, |decoded| {
                let mut inner = Report::default();
                self.text(decoded, &mut inner, b64_depth + 1).is_some()
            });
            if let Some(spans) = found {
                let replaced = replace_spans(
                    &cur,
                    spans
                        .into_iter()
                        .map(|(a, b)| (a, b, BASE64_MARK, "base64")),
                    report,
                );
                cur = Cow::Owned(replaced);
            }
        }

        // Names and values last: every other layer has already replaced
        // what it replaces, so the names and values seen here are the ones a
        // second redaction would see.
        let found = self.assignments.find(&cur, self.legacy());
        if !found.is_empty() {
            let mut out = String::with_capacity(cur.len());
            let mut copied = 0;
            for f in found {
                if f.start < copied || f.end > cur.len() || f.start > f.end {
                    continue;
                }
                if cur
                    .get(f.start..f.end)
                    .is_some_and(|v| self.is_identifier_text(v.trim_matches(['"', '\''])))
                {
                    continue;
                }
                if cur[f.start..f.end] != f.marker {
                    report.add(f.kind);
                }
                out.push_str(&cur[copied..f.start]);
                out.push_str(&f.marker);
                copied = f.end;
            }
            out.push_str(&cur[copied..]);
            cur = Cow::Owned(out);
        }

        match cur {
            Cow::Borrowed(_) => None,
            Cow::Owned(t) => (t != s).then_some(t),
        }
    }
}

/// Replaces ordered, non-overlapping spans (overlaps are skipped; spans not
/// on character boundaries are widened).
fn replace_spans(
    s: &str,
    spans: impl Iterator<Item = (usize, usize, &'static str, &'static str)>,
    report: &mut Report,
) -> String {
    let mut out = String::with_capacity(s.len());
    let mut copied = 0;
    for (mut a, mut b, mark, kind) in spans {
        while a > 0 && !s.is_char_boundary(a) {
            a -= 1;
        }
        while b < s.len() && !s.is_char_boundary(b) {
            b += 1;
        }
        if a < copied || b > s.len() {
            continue;
        }
        out.push_str(&s[copied..a]);
        out.push_str(mark);
        report.add(kind);
        copied = b;
    }
    out.push_str(&s[copied..]);
    out
}

/// Replaces a value by a marker string. A value that is already a marker
/// (idempotence) or a placeholder (`${API_TOKEN}`, `<your-key>`, `***`:
/// it stands for a secret without being one, and a recording of a config
/// is more useful with it) is left alone.
fn replace_with(v: &mut Value, mark: &str, kind: &'static str, report: &mut Report) {
    if v.as_str().is_some_and(text::is_placeholder) {
        return;
    }
    let old = std::mem::replace(v, Value::String(mark.to_owned()));
    dismantle(old);
    report.add(kind);
}

/// Drops a tree without recursion (a deep tree would overflow the stack in
/// `Value`'s own recursive drop).
fn dismantle(v: Value) {
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Value::Array(a) => stack.extend(a),
            Value::Object(m) => stack.extend(m.into_iter().map(|(_, v)| v)),
            _ => {}
        }
    }
}

fn is_binary_mime(m: &str) -> bool {
    let m = m.trim().to_ascii_lowercase();
    ["image/", "audio/", "video/", "font/"]
        .iter()
        .any(|p| m.starts_with(p))
        || matches!(
            m.as_str(),
            "application/octet-stream" | "application/pdf" | "application/zip" | "application/gzip"
        )
}

/// `Authorization: Bearer x` → `Bearer [REDACTED:bearer]`; no known scheme →
/// `[REDACTED:header]`.
fn redact_authorization(value: &str) -> String {
    let t = value.trim();
    if let Some((word, rest)) = t.split_once([' ', '\t']) {
        let scheme = word.to_ascii_lowercase();
        if text_scheme(&scheme) {
            if text::is_placeholder(rest) {
                return value.to_owned();
            }
            return format!("{word} [REDACTED:{scheme}]");
        }
    }
    HEADER_MARK.to_owned()
}

fn text_scheme(s: &str) -> bool {
    matches!(
        s,
        "aws4-hmac-sha256"
            | "basic"
            | "bearer"
            | "digest"
            | "dpop"
            | "negotiate"
            | "ntlm"
            | "token"
    )
}

/// Whether `name` names a cookie header, whatever its spelling (`Cookie`,
/// `cookies`, `Set-Cookie`, `set_cookie`, `setCookie`): `Some(true)` for a
/// response's `Set-Cookie`, `Some(false)` for a request's cookies.
pub(crate) fn cookie_header_name(name: &str) -> Option<bool> {
    let mut squashed = name
        .bytes()
        .filter(u8::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase());
    let mut buf = [0u8; 10];
    let mut len = 0;
    for c in squashed.by_ref() {
        let slot = buf.get_mut(len)?;
        *slot = c;
        len += 1;
    }
    match buf.get(..len)? {
        b"cookie" | b"cookies" => Some(false),
        b"setcookie" => Some(true),
        _ => None,
    }
}

/// The value of one cookie given as `name` and `value` (a cookie object's
/// `value`, a cookie jar's entry): kept when [`cookie_pair`] would keep it,
/// else `[REDACTED:key]`, like any credential under a key.
fn cookie_object_value(name: &str, value: &mut Value, report: &mut Report) {
    let kept = match value {
        Value::String(v) => cookie_value_kept(name, v),
        Value::Number(_) | Value::Bool(_) | Value::Null => !cookie_credential_name(name),
        _ => false,
    };
    if !kept {
        replace_with(value, KEY_MARK, "key", report);
    }
}

/// `Cookie: sid=…; theme=dark` → `sid=[REDACTED]; theme=dark`: each
/// cookie is judged on its own ([`cookie_pair`]).
pub(crate) fn redact_cookie(value: &str) -> String {
    value
        .split(';')
        .map(|part| {
            let p = part.trim();
            match p.split_once('=') {
                Some((name, v)) => cookie_pair(name.trim(), v.trim()),
                None if p.is_empty() => String::new(),
                None => url::MARK.to_owned(),
            }
        })
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

/// One `name=value` cookie: the value kept only when neither its name nor
/// its form says credential. A reader needs `theme=dark` and `lang=en`;
/// nobody needs a session id. Credential names are the key rule's
/// (`sessionid`, `auth_token`) plus the session cookies' usual names
/// (`sid`, `connect.sid`, `_myapp_session`, `__Host-…`, `__Secure-…`,
/// `remember_…`, `csrf…`); a value is harmless only when it looks like a
/// setting: a short word (letters, `-`, `_`, `/`), a small number, or a
/// boolean. Anything else (an id, a hash, a token) is redacted: fail
/// closed.
fn cookie_pair(name: &str, value: &str) -> String {
    if cookie_value_kept(name, value) {
        format!("{name}={value}")
    } else {
        format!("{name}={}", url::MARK)
    }
}

/// Whether a cookie's value may be kept ([`cookie_pair`]'s rule).
fn cookie_value_kept(name: &str, value: &str) -> bool {
    let credential_name = cookie_credential_name(name);
    let v = value.trim_matches('"');
    let word = !v.is_empty()
        && v.len() <= 24
        && v.bytes()
            .all(|c| c.is_ascii_alphabetic() || matches!(c, b'-' | b'_' | b'/'))
        && v.bytes().any(|c| c.is_ascii_alphabetic());
    let small_number = !v.is_empty() && v.len() <= 4 && v.bytes().all(|c| c.is_ascii_digit());
    (!credential_name && (word || small_number)) || (!v.is_empty() && text::is_placeholder(v))
}

/// Whether a cookie's name says its value is a credential.
fn cookie_credential_name(name: &str) -> bool {
    let lname = name.to_ascii_lowercase();
    keys::is_secret_key(name, false)
        || lname.starts_with("__host-")
        || lname.starts_with("__secure-")
        || lname.contains("sess")
        || lname.contains("sid")
        || lname.contains("auth")
        || lname.contains("token")
        || lname.contains("remember")
        || lname.contains("csrf")
        || lname.contains("xsrf")
        || lname.contains("jwt")
}

/// `Set-Cookie: sid=x; Path=/; HttpOnly` → the cookie judged as in
/// [`cookie_pair`], the standard attributes kept, anything else redacted.
pub(crate) fn redact_set_cookie(value: &str) -> String {
    const ATTRS: &[&str] = &[
        "domain",
        "expires",
        "httponly",
        "max-age",
        "partitioned",
        "path",
        "priority",
        "samesite",
        "secure",
    ];
    let mut parts = value.split(';');
    let mut out = Vec::new();
    if let Some(first) = parts.next() {
        let p = first.trim();
        out.push(match p.split_once('=') {
            Some((name, v)) => cookie_pair(name.trim(), v.trim()),
            None => url::MARK.to_owned(),
        });
    }
    for part in parts {
        let p = part.trim();
        if p.is_empty() {
            continue;
        }
        let name = p.split_once('=').map_or(p, |(n, _)| n).trim();
        if ATTRS.iter().any(|a| a.eq_ignore_ascii_case(name)) {
            out.push(p.to_owned());
        } else {
            out.push(url::MARK.to_owned());
        }
    }
    out.join("; ")
}
