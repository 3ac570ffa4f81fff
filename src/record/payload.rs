//! The one way a payload becomes storable: parse a copy → stub binaries →
//! redact → cap. Shared by the standalone recorder ([`super::Recorder`])
//! and the bound tier's engine (`crate::bound`), so that a hook payload and
//! a proxy's step are held to the same rules: only what comes out of here
//! reaches a record.
//!
//! If redaction fails (panics), nothing of the payload is kept and the
//! result says `withheld: "redaction_failed"` — never raw.
//!
//! The rule is held by a type, not by care: every field of a record that
//! carries outside data is a [`Redacted`], and a `Redacted` can only be
//! made here (its field is private to this module), by passing the
//! redactor. Code elsewhere can read one, move it, narrow it to a part of
//! itself, or read one back from a journal (deserialising is reading what
//! was written prepared), but cannot wrap a raw value in one.

use std::borrow::Borrow;
use std::ops::Deref;
use std::panic::{AssertUnwindSafe, catch_unwind};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::truncate;
use crate::jsonrpc::lenient::{self, Repairs};
use crate::redact::{RedactConfig, Redactor};

/// A payload more than this many times the cap is stored as a marker
/// without being parsed and redacted whole.
const LARGE_FACTOR: usize = 4;
/// How deep a payload read leniently is kept (deeper containers are
/// replaced): inside its record, what is stored stays within the 128 levels
/// serde_json reads back.
const PAYLOAD_DEPTH: usize = 100;

/// Something that went through the redactor: the only form in which outside
/// data may enter a record (see the module docs).
///
/// Serialised exactly as the value it holds (`#[serde(transparent)]`), so
/// journals and the service's wire format do not change.
///
/// It cannot be built from raw data outside `record::payload`: its field
/// is private to this module and no function here wraps a value without
/// redacting it (test fixtures aside, which exist only under `cfg(test)`).
/// `tests/it/redacted.rs` holds that in place: the field stays private,
/// nothing outside this file spells the constructor, and the model's
/// outside-data fields keep this type.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub(crate) struct Redacted<T>(T);

impl<T> Redacted<T> {
    /// The redacted value, to read or to take apart (never to put back).
    pub(crate) fn into_inner(self) -> T {
        self.0
    }
}

// Read access: a redacted text reads as a `str` (so an
// `Option<Redacted<String>>` gives `Option<&str>` through `as_deref`), a
// redacted value as the `Value`. Never `DerefMut`: writing into one would
// bypass the redactor.
impl Deref for Redacted<String> {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl Deref for Redacted<Value> {
    type Target = Value;
    fn deref(&self) -> &Value {
        &self.0
    }
}

impl Redacted<String> {
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

impl<T: std::fmt::Display> std::fmt::Display for Redacted<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl PartialEq<str> for Redacted<String> {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for Redacted<String> {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl Borrow<str> for Redacted<String> {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl Redacted<Value> {
    /// The part of this value at `pointer` (RFC 6901), if it is there and
    /// not null. A part of a redacted value is redacted: the redactor
    /// judged every string of it in its place.
    pub(crate) fn part(&self, pointer: &str) -> Option<Redacted<Value>> {
        self.0
            .pointer(pointer)
            .filter(|v| !v.is_null())
            .map(|v| Redacted(v.clone()))
    }

    /// The string at `pointer`, if there is one (see [`Redacted::part`]).
    pub(crate) fn text_at(&self, pointer: &str) -> Option<Redacted<String>> {
        self.0
            .pointer(pointer)
            .and_then(Value::as_str)
            .map(|s| Redacted(s.to_owned()))
    }

    /// The elements of an array (none if this is not one).
    pub(crate) fn elements(&self) -> Vec<Redacted<Value>> {
        self.0
            .as_array()
            .map(|a| a.iter().cloned().map(Redacted).collect())
            .unwrap_or_default()
    }

    /// Removes the key `key` of an object and returns what it held.
    /// Taking something away cannot add a secret.
    pub(crate) fn remove_key(&mut self, key: &str) -> Option<Value> {
        self.0.as_object_mut()?.remove(key)
    }

    /// A string, as a value (a free text stored where a payload goes).
    pub(crate) fn from_text(text: Redacted<String>) -> Redacted<Value> {
        Redacted(Value::String(text.0))
    }
}

/// A whole value through the redactor, uncapped (what an `initialize` or
/// `tools/list` exchange holds, a request id). `None` if redaction failed:
/// then nothing of it may be kept.
pub(crate) fn whole(redactor: &Redactor, mut value: Value) -> Option<Redacted<Value>> {
    catch_unwind(AssertUnwindSafe(|| redactor.redact_value(&mut value)))
        .ok()
        .map(|_| Redacted(value))
}

/// [`whole`], or the redactor's failure marker in place of the value.
pub(crate) fn whole_or_marker(redactor: &Redactor, value: Value) -> Redacted<Value> {
    whole(redactor, value)
        .unwrap_or_else(|| Redacted(Value::String(crate::redact::FAILED.to_owned())))
}

/// A name or id (a tool name, a `toolUseId`) through the redactor, uncapped.
pub(crate) fn label(redactor: &Redactor, text: &str) -> Redacted<String> {
    match catch_unwind(AssertUnwindSafe(|| redactor.redact_text(text).into_owned())) {
        Ok(redacted) => Redacted(redacted),
        Err(_) => Redacted(crate::redact::FAILED.to_owned()),
    }
}

/// Canonical JSON: object keys sorted (serde_json's default map is
/// ordered), no whitespace. Used for digests (here, of a prepared payload;
/// the model re-exports it for the others).
pub(crate) fn canonical(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).unwrap_or_default()
}

/// A payload as it may be stored.
#[derive(Debug, Default)]
pub(crate) struct Prepared {
    /// The redacted, capped payload (`None`: nothing may be stored).
    pub value: Option<Redacted<Value>>,
    /// sha256 of the canonical redacted payload, before capping.
    pub digest: Option<String>,
    pub redactions: u32,
    /// Why the payload is missing (`unparseable`, `redaction_failed`).
    pub withheld: Option<&'static str>,
    /// What reading the payload leniently replaced.
    pub repairs: Repairs,
}

/// A redactor as every recorder builds it: the rules, plus the values of
/// this process's secret-named environment variables, plus `known`.
pub(crate) fn build_redactor(cfg: RedactConfig, known: &[String]) -> Redactor {
    let mut redactor = Redactor::new(cfg);
    redactor.add_known_secrets(secret_env_values());
    redactor.add_known_secrets(known.iter().cloned());
    redactor
}

/// Values of environment variables whose names say they are secrets
/// (`GITHUB_TOKEN`, `ANTHROPIC_API_KEY`…): the redactor removes them
/// wherever they appear, in any encoding it knows.
fn secret_env_values() -> Vec<String> {
    secret_values_of(
        std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))),
    )
}

/// Variables the host sets to name its session (Claude Code's
/// `CLAUDE_CODE_SESSION_ID` and the ids of the sessions that launched it;
/// bir's own `BIR_SESSION_ID`). Their names end like a secret's
/// (`…SESSION_ID`), but the value is the id the run is filed under and
/// shows in its header: an identifier, not a credential. Taken as a known
/// secret it became `[REDACTED:known]` inside transcript paths and task
/// notifications while the header showed it, so it is never one.
const HOST_SESSION_VARS: &[&str] = &[
    "BIR_SESSION_ID",
    "CLAUDE_CODE_LAUNCHED_BY_SESSION_IDS",
    "CLAUDE_CODE_SESSION_ID",
];

/// [`secret_env_values`] over given variables.
fn secret_values_of(vars: impl Iterator<Item = (String, String)>) -> Vec<String> {
    vars.filter(|(k, _)| !HOST_SESSION_VARS.contains(&k.as_str()))
        .filter(|(k, _)| crate::redact::is_secret_key(k, false))
        .map(|(_, v)| v)
        .collect()
}

/// A raw JSON payload (as the relay saw it) → what may be stored.
pub(crate) fn raw(redactor: &Redactor, raw: Option<&str>, cap: usize) -> Prepared {
    let Some(raw) = raw else {
        return Prepared::default();
    };
    // Far over the cap, and no binary block that stubbing could shrink:
    // only the size and a preview will be kept, so there is no point in
    // parsing and redacting megabytes.
    let large = LARGE_FACTOR * cap;
    if raw.len() > large && !crate::observe::step::has_binary_block(raw.as_bytes()) {
        return preview_only(redactor, raw, raw.len());
    }
    // What serde_json refuses but peers read (a lone surrogate, deep
    // nesting) is read leniently: recorded, with what could not be kept
    // replaced in place and counted, rather than withheld.
    let (mut value, repairs) = match serde_json::from_str::<Value>(raw) {
        Ok(value) => (value, Repairs::default()),
        Err(_) => match lenient::parse(raw.as_bytes(), PAYLOAD_DEPTH) {
            Some(read) => read,
            None => {
                return Prepared {
                    withheld: Some("unparseable"),
                    ..Prepared::default()
                };
            }
        },
    };
    let stubbed = truncate::stub_binaries(&mut value);
    if raw.len().saturating_sub(stubbed) > large {
        return preview_only(redactor, raw, raw.len());
    }
    Prepared {
        repairs,
        ..redact_and_cap(redactor, value, cap)
    }
}

/// An already parsed payload (a hook's JSON, raw from the host) → what may
/// be stored. The same steps as [`raw`].
pub(crate) fn value(redactor: &Redactor, mut value: Value, cap: usize) -> Prepared {
    truncate::stub_binaries(&mut value);
    // Hook payloads are small; rendering one to size it costs little.
    let rendered = serde_json::to_string(&value).unwrap_or_default();
    if rendered.len() > LARGE_FACTOR * cap {
        return preview_only(redactor, &rendered, rendered.len());
    }
    redact_and_cap(redactor, value, cap)
}

fn redact_and_cap(redactor: &Redactor, mut value: Value, cap: usize) -> Prepared {
    let redacted = catch_unwind(AssertUnwindSafe(|| {
        let report = redactor.redact_value(&mut value);
        (value, report.redactions)
    }));
    let Ok((value, redactions)) = redacted else {
        log::error!("redaction failed; the step is stored without its payloads");
        return Prepared {
            withheld: Some("redaction_failed"),
            ..Prepared::default()
        };
    };
    // One rendering serves the digest and the size the cap judges.
    let rendered = serde_json::to_string(&value).unwrap_or_default();
    let digest = crate::codec::sha256_hex(rendered.as_bytes());
    let (value, _) = truncate::cap_rendered(value, &rendered, cap);
    Prepared {
        value: Some(Redacted(value)),
        digest: Some(digest),
        redactions,
        withheld: None,
        repairs: Repairs::default(),
    }
}

/// The truncation marker for a payload of `size` bytes starting with
/// `text`: a token-safe preview of its start, redacted as a stored string
/// is (a start that is JSON, cut short, is closed and redacted by key name
/// and position too, not only as text).
pub(crate) fn preview_only(redactor: &Redactor, text: &str, size: usize) -> Prepared {
    let mut preview =
        Value::String(truncate::token_safe_prefix(text, truncate::PREVIEW).to_owned());
    let report = redactor.redact_value(&mut preview);
    if let Value::String(redacted) = &mut preview {
        // Redacted JSON is rendered again, and markers can lengthen it.
        let cut = truncate::token_safe_prefix(redacted, truncate::PREVIEW).len();
        redacted.truncate(cut);
    }
    Prepared {
        value: Some(Redacted(serde_json::json!({
            "truncated": true,
            "originalBytes": size,
            "preview": preview,
        }))),
        redactions: report.redactions,
        ..Prepared::default()
    }
}

/// Free text (a prompt, the model's words) → what may be stored: redacted,
/// then cut to at most `cap` bytes at a token boundary, with a marker that
/// says how long it was. Returns the text and the number of redactions.
pub(crate) fn text(redactor: &Redactor, text: &str, cap: usize) -> (Redacted<String>, u32) {
    let mut report = crate::redact::Report::default();
    let redacted = redactor.redact_text_counted(text, &mut report);
    if redacted.len() <= cap {
        return (Redacted(redacted.into_owned()), report.redactions);
    }
    let kept = truncate::token_safe_prefix(&redacted, cap);
    (
        Redacted(format!("{kept}… [truncated: {} bytes]", redacted.len())),
        report.redactions,
    )
}

/// Test fixtures only: wraps a value the test chose as if it had been
/// prepared. Not compiled into the program.
#[cfg(test)]
pub(crate) fn fixture<T>(value: T) -> Redacted<T> {
    Redacted(value)
}

/// Test fixtures written as literals (`"text".into()`, `json!(…).into()`);
/// like [`fixture`], not compiled into the program.
#[cfg(test)]
mod literals {
    use super::{Redacted, Value, fixture};

    impl From<&str> for Redacted<String> {
        fn from(text: &str) -> Redacted<String> {
            fixture(text.to_owned())
        }
    }

    impl From<Value> for Redacted<Value> {
        fn from(value: Value) -> Redacted<Value> {
            fixture(value)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redact::RedactConfig;

    fn redactor() -> Redactor {
        Redactor::new(RedactConfig::default())
    }

    #[test]
    fn the_host_session_id_is_an_identifier_not_a_known_secret() {
        let session = "0f6c2d3e-4a5b-4c6d-8e9f-0a1b2c3d4e5f";
        let vars = [
            ("CLAUDE_CODE_SESSION_ID", session),
            (
                "CLAUDE_CODE_LAUNCHED_BY_SESSION_IDS",
                "11112222-3333-4444-5555-666677778888",
            ),
            ("BIR_SESSION_ID", session),
            ("MY_SESSION_ID", "s3ss10n-v4lu3-secret"),
            ("GITHUB_TOKEN", "ghp_0123456789abcdefghijABCDEFGHIJ012345"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()));
        let known = secret_values_of(vars.into_iter());
        assert_eq!(
            known,
            [
                "s3ss10n-v4lu3-secret",
                "ghp_0123456789abcdefghijABCDEFGHIJ012345"
            ]
        );
        let mut r = redactor();
        r.add_known_secrets(known);
        let path = format!("/home/u/.claude/projects/-p/{session}.jsonl");
        assert_eq!(r.redact_text(&path), path);
    }

    #[test]
    fn a_redacted_value_is_written_and_read_as_the_value_it_holds() {
        let raw = r#"{"big":18446744073709551617,"n":1.50,"s":"x"}"#;
        let read: Redacted<Value> = serde_json::from_str(raw).expect("read");
        assert_eq!(serde_json::to_string(&read).expect("write"), raw);
        let text: Redacted<String> = serde_json::from_str(r#""a b""#).expect("read");
        assert_eq!(serde_json::to_string(&text).expect("write"), r#""a b""#);
        // As a map key (a snapshot's tool hashes).
        let mut hashes = std::collections::BTreeMap::new();
        hashes.insert(label(&redactor(), "echo"), "h".to_owned());
        assert_eq!(
            serde_json::to_string(&hashes).expect("write"),
            r#"{"echo":"h"}"#
        );
    }

    #[test]
    fn every_way_in_redacts_and_a_part_keeps_what_the_redactor_left() {
        let secret = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
        let r = redactor();
        let whole = whole(
            &r,
            serde_json::json!({"info": {"token": secret, "name": "n"}}),
        )
        .expect("redacted");
        let part = whole.part("/info").expect("a part");
        assert!(
            !serde_json::to_string(&part)
                .expect("write")
                .contains(secret)
        );
        assert_eq!(whole.text_at("/info/name").as_deref(), Some("n"));
        assert!(whole.part("/missing").is_none());
        assert!(!label(&r, &format!("tool_{secret}")).contains(secret));
        let (kept, redactions) = text(&r, &format!("use {secret} now"), 1024);
        assert!(!kept.contains(secret) && redactions == 1, "{kept}");
        let id = whole_or_marker(&r, Value::String(secret.to_owned()));
        assert!(!id.to_string().contains(secret), "{id}");
        let prepared = raw(&r, Some(&format!(r#"{{"a":"{secret}"}}"#)), 1024);
        let value = prepared.value.expect("kept");
        assert!(!value.to_string().contains(secret), "{value}");
    }
}
