//! Templates in a scenario step's arguments: `${param:x}`, `${env:X}` and
//! `${step:s3:/structuredContent/id}`.
//!
//! A string that is exactly one template becomes the resolved value (of
//! any JSON type, so an id bound from a number stays a number); templates
//! inside a longer string are replaced by their text. Step pointers descend
//! into text blocks that hold JSON (`/content/0/text/id`), the way compare
//! rules do.

use serde_json::Value;

/// Where template values come from.
pub(crate) trait Lookup {
    fn param(&self, name: &str) -> Option<Value>;
    fn env(&self, name: &str) -> Option<String>;
    /// The result of an earlier step (live, or the recorded one for a
    /// step that was held).
    fn step_result(&self, step: &str) -> Option<&Value>;
}

/// Why an argument could not be resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unresolved(pub String);

/// `args` with every template resolved.
pub(crate) fn resolve(args: &Value, lookup: &dyn Lookup) -> Result<Value, Unresolved> {
    match args {
        Value::String(s) => resolve_string(s, lookup),
        Value::Array(items) => items
            .iter()
            .map(|v| resolve(v, lookup))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array),
        Value::Object(map) => {
            let mut out = serde_json::Map::new();
            for (k, v) in map {
                out.insert(k.clone(), resolve(v, lookup)?);
            }
            Ok(Value::Object(out))
        }
        other => Ok(other.clone()),
    }
}

fn resolve_string(s: &str, lookup: &dyn Lookup) -> Result<Value, Unresolved> {
    let Some(start) = s.find("${") else {
        return Ok(Value::String(s.to_owned()));
    };
    if start == 0 && s.ends_with('}') && s[2..].find('}') == Some(s.len() - 3) {
        return one(&s[2..s.len() - 1], lookup);
    }
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("${") {
        out.push_str(&rest[..i]);
        let Some(end) = rest[i..].find('}') else {
            out.push_str(&rest[i..]);
            rest = "";
            break;
        };
        let value = one(&rest[i + 2..i + end], lookup)?;
        match value {
            Value::String(text) => out.push_str(&text),
            other => out.push_str(&other.to_string()),
        }
        rest = &rest[i + end + 1..];
    }
    out.push_str(rest);
    Ok(Value::String(out))
}

fn one(body: &str, lookup: &dyn Lookup) -> Result<Value, Unresolved> {
    if let Some(name) = body.strip_prefix("param:") {
        return lookup
            .param(name)
            .ok_or_else(|| Unresolved(format!("parameter {name} is not bound")));
    }
    if let Some(name) = body.strip_prefix("env:") {
        return lookup
            .env(name)
            .map(Value::String)
            .ok_or_else(|| Unresolved(format!("environment variable {name} is not set")));
    }
    if let Some(rest) = body.strip_prefix("step:") {
        let (step, pointer) = rest.split_once(':').unwrap_or((rest, ""));
        let result = lookup
            .step_result(step)
            .ok_or_else(|| Unresolved(format!("step {step} has no result to bind from")))?;
        return pointer_into(result, pointer)
            .ok_or_else(|| Unresolved(format!("step {step}'s result has nothing at {pointer}")));
    }
    Err(Unresolved(format!("unknown template ${{{body}}}")))
}

/// The value at `pointer`, descending into strings that hold JSON.
pub(crate) fn pointer_into(value: &Value, pointer: &str) -> Option<Value> {
    if pointer.is_empty() {
        return Some(value.clone());
    }
    let mut current = value.clone();
    for raw in pointer.strip_prefix('/')?.split('/') {
        let segment = raw.replace("~1", "/").replace("~0", "~");
        if let Value::String(text) = &current
            && let Ok(parsed) = serde_json::from_str::<Value>(text)
            && (parsed.is_object() || parsed.is_array())
        {
            current = parsed;
        }
        current = match current {
            Value::Object(mut map) => map.remove(&segment)?,
            Value::Array(mut items) => {
                let i: usize = segment.parse().ok()?;
                if i >= items.len() {
                    return None;
                }
                items.swap_remove(i)
            }
            _ => return None,
        };
    }
    Some(current)
}

/// Ids of the steps `args` binds from.
pub(crate) fn step_refs(args: &Value) -> Vec<String> {
    let mut out = Vec::new();
    walk_strings(args, &mut |s| {
        let mut rest = s;
        while let Some(i) = rest.find("${step:") {
            let body = &rest[i + 7..];
            let end = body.find([':', '}']).unwrap_or(body.len());
            out.push(body[..end].to_owned());
            rest = &body[end..];
        }
    });
    out
}

/// Whether `value` still holds a redaction placeholder.
pub(crate) fn has_placeholder(value: &Value) -> bool {
    let mut found = false;
    walk_strings(value, &mut |s| found |= s.contains("[REDACTED"));
    found
}

pub(crate) fn walk_strings(value: &Value, f: &mut dyn FnMut(&str)) {
    match value {
        Value::String(s) => f(s),
        Value::Array(items) => items.iter().for_each(|v| walk_strings(v, f)),
        Value::Object(map) => map.values().for_each(|v| walk_strings(v, f)),
        _ => {}
    }
}

/// Calls `f(pointer, key, value)` for every scalar leaf of `value` (not
/// null or booleans' containers: every string, number, boolean and null),
/// with its JSON Pointer and the object key it sits under (an array
/// element inherits its array's key).
pub(crate) fn for_each_leaf(value: &Value, f: &mut dyn FnMut(&str, &str, &Value)) {
    fn walk(value: &Value, path: &mut String, key: &str, f: &mut dyn FnMut(&str, &str, &Value)) {
        match value {
            Value::Object(map) => {
                for (k, v) in map {
                    let len = path.len();
                    path.push('/');
                    path.push_str(&escape_segment(k));
                    walk(v, path, k, f);
                    path.truncate(len);
                }
            }
            Value::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    let len = path.len();
                    path.push('/');
                    path.push_str(&i.to_string());
                    walk(v, path, key, f);
                    path.truncate(len);
                }
            }
            leaf => f(path, key, leaf),
        }
    }
    walk(value, &mut String::new(), "", f);
}

/// Escapes one JSON Pointer segment.
pub(crate) fn escape_segment(s: &str) -> String {
    s.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    struct Fixed(Value);
    impl Lookup for Fixed {
        fn param(&self, name: &str) -> Option<Value> {
            (name == "n").then(|| json!(42))
        }
        fn env(&self, name: &str) -> Option<String> {
            (name == "HOME_X").then(|| "/h".to_owned())
        }
        fn step_result(&self, step: &str) -> Option<&Value> {
            (step == "s1").then_some(&self.0)
        }
    }

    #[test]
    fn templates_resolve_whole_and_inside_strings_and_through_json_text() {
        let lookup = Fixed(json!({"content": [{"type": "text", "text": "{\"id\": 7}"}]}));
        let args = json!({"a": "${param:n}", "b": "dir=${env:HOME_X}/x", "c": "${step:s1:/content/0/text/id}", "d": [1, "plain"]});
        assert_eq!(
            resolve(&args, &lookup).expect("resolved"),
            json!({"a": 42, "b": "dir=/h/x", "c": 7, "d": [1, "plain"]})
        );
        let missing = resolve(&json!({"x": "${param:nope}"}), &lookup).expect_err("unbound");
        assert!(missing.0.contains("nope"));
        assert!(resolve(&json!("${step:s1:/content/5}"), &lookup).is_err());
        assert_eq!(step_refs(&args), vec!["s1"]);
        assert!(has_placeholder(&json!({"t": "[REDACTED:key]"})));
        assert!(!has_placeholder(&args));
    }
}
