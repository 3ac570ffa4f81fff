//! Comparing a live result with the expected one, in recorded space.
//!
//! Both sides are what the recorder would store: the caller passes the live
//! result through the same redaction and cap the run went through
//! (`record::payload`), so a secret equals its placeholder and a result
//! past the cap compares by its truncation marker (`originalBytes` and the
//! preview). No fuzzy matching: after the declared relaxations, values
//! must be equal as JSON (numbers by their exact token).
//!
//! Rule paths are JSON Pointers rooted at the `CallToolResult`, with `*`
//! (one segment, or a wildcard inside a segment: `io.modelcontextprotocol/*`)
//! and `**` (any number of segments). Strings holding a JSON object or
//! array (a text block with JSON in it) are parsed before comparing, so
//! paths descend into them and rules apply after parsing.

use regex::Regex;
use serde_json::Value;

use super::template::escape_segment;
use serde::{Deserialize, Serialize};

/// A compare relaxation: a JSON Pointer rooted at the `CallToolResult`
/// (with `*` for one segment and `**` for any number; text blocks holding
/// JSON are descended into) and what to do there.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct CompareRule {
    pub path: String,
    /// `ignore`, `type`, `pattern:REGEX`, `unordered`, `field:NAME` (then
    /// `path` is unused: the key is ignored at any depth).
    pub kind: String,
}

/// At most this many differences are reported per step: enough to see
/// what changed, bounded for a result that changed everywhere.
pub(crate) const MAX_DIFFERENCES: usize = 20;

/// What every comparison ignores: protocol metadata the server adds under
/// the reserved `io.modelcontextprotocol/` prefix (server info, timing).
/// Nested ids and everything else are compared.
pub(crate) fn default_rules() -> Vec<CompareRule> {
    vec![CompareRule {
        path: "/_meta/io.modelcontextprotocol~1*".to_owned(),
        kind: "ignore".to_owned(),
    }]
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct Difference {
    pub path: String,
    pub expected: Value,
    pub actual: Value,
}

/// Checks a rule's kind and pattern (a bad regex is a usage error).
pub(crate) fn check_rule(rule: &CompareRule) -> Result<(), String> {
    match rule.kind.as_str() {
        "ignore" | "type" | "unordered" => Ok(()),
        k if k.starts_with("field:") && k.len() > 6 => Ok(()),
        k if k.starts_with("pattern:") => Regex::new(&k[8..])
            .map(|_| ())
            .map_err(|e| format!("rule pattern {:?}: {e}", &k[8..])),
        other => Err(format!(
            "rule kind {other:?} is not ignore, type, pattern:RE, unordered or field:NAME"
        )),
    }
}

struct Compiled {
    segments: Vec<String>,
    action: Action,
}

enum Action {
    Ignore,
    Type,
    Pattern(Regex),
    Unordered,
}

/// Rules ready to apply.
pub(crate) struct RuleSet {
    rules: Vec<Compiled>,
    fields: Vec<String>,
}

impl RuleSet {
    /// Compiles `rules` (already checked; an invalid one is skipped).
    pub(crate) fn new<'a>(rules: impl IntoIterator<Item = &'a CompareRule>) -> RuleSet {
        let mut out = RuleSet {
            rules: Vec::new(),
            fields: Vec::new(),
        };
        for rule in rules {
            if let Some(name) = rule.kind.strip_prefix("field:") {
                out.fields.push(name.to_owned());
                continue;
            }
            let action = match rule.kind.as_str() {
                "ignore" => Action::Ignore,
                "type" => Action::Type,
                "unordered" => Action::Unordered,
                k => match k.strip_prefix("pattern:").map(Regex::new) {
                    Some(Ok(re)) => Action::Pattern(re),
                    _ => continue,
                },
            };
            out.rules.push(Compiled {
                segments: split_pointer(&rule.path),
                action,
            });
        }
        out
    }

    fn action(&self, path: &[String]) -> Option<&Action> {
        self.rules
            .iter()
            .find(|r| path_matches(&r.segments, path))
            .map(|r| &r.action)
    }
}

fn split_pointer(pointer: &str) -> Vec<String> {
    pointer
        .strip_prefix('/')
        .map(|p| {
            p.split('/')
                .map(|s| s.replace("~1", "/").replace("~0", "~"))
                .collect()
        })
        .unwrap_or_default()
}

fn path_matches(pattern: &[String], path: &[String]) -> bool {
    match pattern.split_first() {
        None => path.is_empty(),
        Some((first, rest)) if first == "**" => {
            (0..=path.len()).any(|skip| path_matches(rest, &path[skip..]))
        }
        Some((first, rest)) => match path.split_first() {
            Some((seg, path_rest)) => glob(first, seg) && path_matches(rest, path_rest),
            None => false,
        },
    }
}

/// `*` inside a segment matches any run of characters.
fn glob(pattern: &str, text: &str) -> bool {
    match pattern.find('*') {
        None => pattern == text,
        Some(i) => {
            let (head, tail) = (&pattern[..i], &pattern[i + 1..]);
            text.starts_with(head)
                && (head.len()..=text.len())
                    .any(|j| text.is_char_boundary(j) && glob(tail, &text[j..]))
        }
    }
}

/// Parses strings that hold a JSON object or array, at any depth.
pub(crate) fn expand_json_text(value: &Value) -> Value {
    match value {
        Value::String(s) => {
            let t = s.trim_start();
            if (t.starts_with('{') || t.starts_with('['))
                && let Ok(parsed) = serde_json::from_str::<Value>(s)
            {
                return expand_json_text(&parsed);
            }
            value.clone()
        }
        Value::Array(items) => Value::Array(items.iter().map(expand_json_text).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), expand_json_text(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The differences between `expected` and `actual` under `rules`, at most
/// [`MAX_DIFFERENCES`].
pub(crate) fn diff(expected: &Value, actual: &Value, rules: &RuleSet) -> Vec<Difference> {
    let expected = expand_json_text(expected);
    let actual = expand_json_text(actual);
    let mut out = Vec::new();
    let mut path = Vec::new();
    walk(&expected, &actual, rules, &mut path, &mut out);
    out
}

/// A whole-volatile result: only `isError` and the content block types.
pub(crate) fn volatile_shape(result: &Value) -> Value {
    let types: Vec<Value> = result
        .get("content")
        .and_then(Value::as_array)
        .map(|c| {
            c.iter()
                .map(|b| b.get("type").cloned().unwrap_or(Value::Null))
                .collect()
        })
        .unwrap_or_default();
    serde_json::json!({
        "isError": result.get("isError").and_then(Value::as_bool).unwrap_or(false),
        "contentTypes": types,
    })
}

fn pointer(path: &[String]) -> String {
    path.iter()
        .map(|s| format!("/{}", escape_segment(s)))
        .collect()
}

fn walk(e: &Value, a: &Value, rules: &RuleSet, path: &mut Vec<String>, out: &mut Vec<Difference>) {
    if out.len() >= MAX_DIFFERENCES {
        return;
    }
    let differs = |out: &mut Vec<Difference>| {
        out.push(Difference {
            path: pointer(path),
            expected: e.clone(),
            actual: a.clone(),
        })
    };
    match rules.action(path) {
        Some(Action::Ignore) => return,
        Some(Action::Type) => {
            if json_type(e) != json_type(a) {
                differs(out);
            }
            return;
        }
        Some(Action::Pattern(re)) => {
            if !a.as_str().is_some_and(|s| re.is_match(s)) {
                differs(out);
            }
            return;
        }
        Some(Action::Unordered) => {
            if let (Value::Array(x), Value::Array(y)) = (e, a) {
                let mut xs: Vec<Vec<u8>> = x.iter().map(crate::record::model::canonical).collect();
                let mut ys: Vec<Vec<u8>> = y.iter().map(crate::record::model::canonical).collect();
                xs.sort();
                ys.sort();
                if xs != ys {
                    differs(out);
                }
                return;
            }
        }
        None => {}
    }
    match (e, a) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                if rules.fields.iter().any(|f| f == key) {
                    continue;
                }
                path.push(key.clone());
                walk(
                    x.get(key).unwrap_or(&Value::Null),
                    y.get(key).unwrap_or(&Value::Null),
                    rules,
                    path,
                    out,
                );
                path.pop();
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            for i in 0..x.len().max(y.len()) {
                path.push(i.to_string());
                walk(
                    x.get(i).unwrap_or(&Value::Null),
                    y.get(i).unwrap_or(&Value::Null),
                    rules,
                    path,
                    out,
                );
                path.pop();
            }
        }
        _ => {
            if e != a {
                differs(out);
            }
        }
    }
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Paths whose values differ between any two of `results`: calibration's
/// proposals for ignore rules. Array indices are kept (a varying element
/// is one path).
pub(crate) fn varying_paths(results: &[Value]) -> Vec<String> {
    let mut paths: Vec<String> = Vec::new();
    let none = RuleSet::new(&default_rules());
    for pair in results.windows(2) {
        for d in diff(&pair[0], &pair[1], &none) {
            if !paths.contains(&d.path) {
                paths.push(d.path);
            }
        }
    }
    paths.sort();
    paths
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(path: &str, kind: &str) -> CompareRule {
        CompareRule {
            path: path.into(),
            kind: kind.into(),
        }
    }

    #[test]
    fn equal_results_have_no_differences_and_protocol_meta_is_ignored() {
        let e = json!({"_meta": {"io.modelcontextprotocol/serverInfo": {"v": 1}}, "content": [{"type": "text", "text": "a"}]});
        let a = json!({"_meta": {"io.modelcontextprotocol/serverInfo": {"v": 2}}, "content": [{"type": "text", "text": "a"}]});
        assert!(diff(&e, &a, &RuleSet::new(&default_rules())).is_empty());
        // Other _meta keys and nested ids are compared.
        let b = json!({"_meta": {"x": 1}, "content": [{"type": "text", "text": "a", "id": 1}]});
        let paths: Vec<String> = diff(&e, &b, &RuleSet::new(&default_rules()))
            .into_iter()
            .map(|d| d.path)
            .collect();
        assert_eq!(paths, ["/_meta/x", "/content/0/id"]);
    }

    #[test]
    fn rules_descend_into_json_text_with_wildcards() {
        let e = json!({"content": [{"type": "text", "text": "{\"items\":[{\"id\":1,\"at\":\"t1\"},{\"id\":2,\"at\":\"t2\"}],\"n\":1}"}]});
        let a = json!({"content": [{"type": "text", "text": "{\"n\": 1, \"items\":[{\"id\":1,\"at\":\"t9\"},{\"id\":2,\"at\":\"t8\"}]}"}]});
        let none = RuleSet::new(&[]);
        let d = diff(&e, &a, &none);
        assert_eq!(d.len(), 2, "{d:?}");
        assert_eq!(d[0].path, "/content/0/text/items/0/at");
        assert!(
            diff(
                &e,
                &a,
                &RuleSet::new(&[rule("/content/*/text/items/*/at", "ignore")])
            )
            .is_empty()
        );
        assert!(diff(&e, &a, &RuleSet::new(&[rule("/**/at", "ignore")])).is_empty());
        assert!(diff(&e, &a, &RuleSet::new(&[rule("", "field:at")])).is_empty());
        assert!(diff(&e, &a, &RuleSet::new(&[rule("/**/at", "type")])).is_empty());
        assert!(diff(&e, &a, &RuleSet::new(&[rule("/**/at", "pattern:^t[0-9]$")])).is_empty());
        assert_eq!(
            diff(&e, &a, &RuleSet::new(&[rule("/**/at", "pattern:^x")])).len(),
            2
        );
    }

    #[test]
    fn unordered_compares_a_multiset_and_numbers_compare_by_token() {
        let e = json!({"xs": [1, 2, 2, 3]});
        let a = json!({"xs": [2, 3, 2, 1]});
        assert_eq!(diff(&e, &a, &RuleSet::new(&[])).len(), 3);
        assert!(diff(&e, &a, &RuleSet::new(&[rule("/xs", "unordered")])).is_empty());
        let c = json!({"xs": [2, 3, 1, 1]});
        assert_eq!(
            diff(&e, &c, &RuleSet::new(&[rule("/xs", "unordered")])).len(),
            1
        );
        let one: Value = serde_json::from_str("{\"n\": 1.0}").expect("json");
        let other: Value = serde_json::from_str("{\"n\": 1}").expect("json");
        assert_eq!(diff(&one, &other, &RuleSet::new(&[])).len(), 1);
    }

    #[test]
    fn a_changed_truncated_payload_differs_through_original_bytes() {
        let e = json!({"truncated": true, "originalBytes": 70000, "preview": "{\"a\""});
        let a = json!({"truncated": true, "originalBytes": 70001, "preview": "{\"a\""});
        let d = diff(&e, &a, &RuleSet::new(&default_rules()));
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].path, "/originalBytes");
    }

    #[test]
    fn calibration_finds_the_paths_that_vary() {
        let runs = [
            json!({"t": "1", "k": 1}),
            json!({"t": "2", "k": 1}),
            json!({"t": "3", "k": 1}),
        ];
        assert_eq!(varying_paths(&runs), ["/t"]);
        assert!(check_rule(&rule("/x", "pattern:(")).is_err());
        assert!(check_rule(&rule("/x", "fuzzy")).is_err());
    }
}
