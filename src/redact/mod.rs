//! Redaction (interim: key names only). The full layered redactor is being
//! written on the `redact` branch and replaces this file; the API is the
//! same, so callers do not change.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde_json::Value;

#[derive(Debug, Clone, Copy, Default)]
pub struct RedactConfig {
    pub legacy_substring_keys: bool,
}

#[derive(Debug, Default, Clone)]
pub struct Report {
    pub redactions: u32,
    pub by_kind: BTreeMap<&'static str, u32>,
}

pub struct Redactor {
    cfg: RedactConfig,
    known: Vec<String>,
}

impl Redactor {
    pub fn new(cfg: RedactConfig) -> Redactor {
        Redactor {
            cfg,
            known: Vec::new(),
        }
    }

    pub fn add_known_secrets<I: IntoIterator<Item = String>>(&mut self, values: I) {
        self.known
            .extend(values.into_iter().filter(|v| v.len() >= 8));
    }

    pub fn redact_value(&self, v: &mut Value) -> Report {
        let mut report = Report::default();
        let mut stack = vec![v];
        while let Some(node) = stack.pop() {
            match node {
                Value::Object(map) => {
                    for (k, child) in map.iter_mut() {
                        if is_secret_key(k, self.cfg.legacy_substring_keys) {
                            *child = Value::String("[REDACTED:key]".into());
                            report.redactions += 1;
                        } else {
                            stack.push(child);
                        }
                    }
                }
                Value::Array(items) => stack.extend(items.iter_mut()),
                Value::String(s) => {
                    if let Cow::Owned(t) = self.redact_text(s) {
                        *s = t;
                        report.redactions += 1;
                    }
                }
                _ => {}
            }
        }
        report
    }

    pub fn redact_text<'a>(&self, s: &'a str) -> Cow<'a, str> {
        let mut out = Cow::Borrowed(s);
        for k in &self.known {
            if out.contains(k.as_str()) {
                out = Cow::Owned(out.replace(k.as_str(), "[REDACTED:known]"));
            }
        }
        out
    }
}

pub fn is_secret_key(name: &str, legacy: bool) -> bool {
    let lower = name.to_ascii_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let last = words.last().copied().unwrap_or("");
    matches!(
        last,
        "token" | "secret" | "password" | "cookie" | "authorization" | "apikey"
    ) || (legacy
        && ["token", "secret", "password", "key", "auth"]
            .iter()
            .any(|w| lower.contains(w)))
}
