//! Exact values bir already knows are secret (the configured server's env
//! values and header values), in every encoding a tool is likely to echo
//! them in: as is, base64 (standard and URL-safe, with and without
//! padding), percent-encoded (upper- and lower-case hex, `+` for space) and
//! JSON-escaped (the minimal escaping and the all-`\u00XX` form).
//!
//! Values shorter than [`MIN_LEN`] are ignored: short values (`1`, `true`,
//! `prod`) would redact ordinary text everywhere.

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, AhoCorasickKind, MatchKind};

/// Shortest value treated as a known secret.
pub(crate) const MIN_LEN: usize = 8;
pub(crate) const KIND: &str = "known";

#[derive(Default, Clone)]
pub(crate) struct Known {
    /// Every form of every value (deduplicated).
    forms: Vec<String>,
    /// Over `forms`, leftmost-longest; `None` when there are none.
    ac: Option<AhoCorasick>,
    /// How many distinct values (for `Debug`, never the values).
    values: usize,
}

impl Known {
    pub(crate) fn add(&mut self, values: impl IntoIterator<Item = String>) {
        let mut added = false;
        for v in values {
            if v.len() < MIN_LEN {
                continue;
            }
            if self.forms.contains(&v) {
                continue;
            }
            self.values += 1;
            for form in forms_of(&v) {
                if form.len() >= MIN_LEN && !self.forms.contains(&form) {
                    self.forms.push(form);
                }
            }
            added = true;
        }
        if added {
            // Building can only fail for absurd pattern sizes; then fall back
            // to the (slower) naive search in `scan`.
            self.ac = AhoCorasickBuilder::new()
                .match_kind(MatchKind::LeftmostLongest)
                .kind(Some(AhoCorasickKind::DFA))
                .build(&self.forms)
                .ok();
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.values
    }

    /// Spans of every known form in `s`.
    pub(crate) fn spans(&self, s: &str) -> Vec<(usize, usize)> {
        if self.forms.is_empty() {
            return Vec::new();
        }
        match &self.ac {
            Some(ac) => ac.find_iter(s).map(|m| (m.start(), m.end())).collect(),
            None => {
                let mut spans: Vec<(usize, usize)> = Vec::new();
                for f in &self.forms {
                    for (i, _) in s.match_indices(f.as_str()) {
                        spans.push((i, i + f.len()));
                    }
                }
                spans
            }
        }
    }
}

/// Every encoded form of `v` worth searching for.
fn forms_of(v: &str) -> Vec<String> {
    let b = v.as_bytes();
    let mut forms = vec![v.to_owned()];
    for url in [false, true] {
        for pad in [false, true] {
            forms.push(crate::codec::base64_encode(b, url, pad));
        }
    }
    forms.push(crate::codec::percent_encode(b, true, false));
    forms.push(crate::codec::percent_encode(b, false, false));
    forms.push(crate::codec::percent_encode(b, true, true));
    if let Ok(json) = serde_json::to_string(v)
        && json.len() >= 2
    {
        forms.push(json[1..json.len() - 1].to_owned());
    }
    forms.push(unicode_escape(v, false));
    forms.push(unicode_escape(v, true));
    forms.sort();
    forms.dedup();
    forms
}

/// Every character as `\uXXXX` (UTF-16 units for characters outside the
/// BMP), as some serialisers emit.
fn unicode_escape(v: &str, upper: bool) -> String {
    let mut out = String::with_capacity(v.len() * 6);
    let mut buf = [0u16; 2];
    for ch in v.chars() {
        for unit in ch.encode_utf16(&mut buf) {
            if upper {
                out.push_str(&format!("\\u{unit:04X}"));
            } else {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms() {
        let f = forms_of("a b/c\"d12");
        assert!(f.contains(&"a b/c\"d12".to_owned()));
        assert!(f.contains(&"a%20b%2Fc%22d12".to_owned()));
        assert!(f.contains(&"a%20b%2fc%22d12".to_owned()));
        assert!(f.contains(&"a+b%2Fc%22d12".to_owned()));
        assert!(f.contains(&"a b/c\\\"d12".to_owned()));
        assert!(f.contains(
            &"\\u0061\\u0020\\u0062\\u002f\\u0063\\u0022\\u0064\\u0031\\u0032".to_owned()
        ));
        assert!(f.contains(&crate::codec::base64_encode(b"a b/c\"d12", false, true)));
    }

    #[test]
    fn short_values_ignored() {
        let mut k = Known::default();
        k.add([
            "short".to_owned(),
            "longenough1".to_owned(),
            "longenough1".to_owned(),
        ]);
        assert_eq!(k.len(), 1);
        assert!(k.spans("a short text").is_empty());
        assert_eq!(k.spans("x longenough1 y"), vec![(2, 13)]);
    }
}
