//! Cross-layer tests: the tree walk, the corpus (`tests/redact_corpus.json`),
//! idempotence, mutation fuzzing, deep nesting and a large realistic result.

use serde_json::{Value, json};

use super::*;

fn redactor() -> Redactor {
    Redactor::new(RedactConfig::default())
}

fn red(v: Value) -> (Value, Report) {
    let mut v = v;
    let r = redactor().redact_value(&mut v);
    (v, r)
}

/// Every string in a tree (keys and values), for substring checks that do
/// not depend on JSON escaping.
fn strings(v: &Value, out: &mut Vec<String>) {
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Value::String(s) => out.push(s.clone()),
            Value::Array(a) => stack.extend(a),
            Value::Object(m) => {
                for (k, v) in m {
                    out.push(k.clone());
                    stack.push(v);
                }
            }
            Value::Number(n) => out.push(n.to_string()),
            _ => {}
        }
    }
}

#[test]
fn legacy_substring_rule() {
    assert!(RedactConfig::from_legacy_var(Some("1")).legacy_substring_keys);
    assert!(RedactConfig::from_legacy_var(Some(" TRUE ")).legacy_substring_keys);
    assert!(!RedactConfig::from_legacy_var(Some("0")).legacy_substring_keys);
    assert!(!RedactConfig::from_legacy_var(None).legacy_substring_keys);
    let legacy = Redactor::new(RedactConfig {
        legacy_substring_keys: true,
    });
    let mut v = json!({"max_tokens": 5, "keyboard": "us", "name": "x", "token": "t"});
    legacy.redact_value(&mut v);
    assert_eq!(
        v,
        json!({"max_tokens": "[REDACTED:key]", "keyboard": "[REDACTED:key]", "name": "x", "token": "[REDACTED:key]"})
    );
    let (v, _) = red(json!({"max_tokens": 5, "keyboard": "us"}));
    assert_eq!(v, json!({"max_tokens": 5, "keyboard": "us"}));
}

#[test]
fn redactor_is_send_sync() {
    fn assert<T: Send + Sync>() {}
    assert::<Redactor>();
}

#[test]
fn debug_shows_no_known_values() {
    let mut r = redactor();
    r.add_known_secrets(["opaque-secret-value-123".to_owned()]);
    let d = format!("{r:?}");
    assert!(!d.contains("opaque"), "{d}");
    assert!(d.contains("known_values: 1"), "{d}");
}

#[test]
fn secret_keys_any_type() {
    let (v, r) = red(json!({
        "password": 12345678,
        "api_keys": ["a", "b"],
        "credentials": {"user": "u", "pass": "p"},
        "max_tokens": 100,
        "nextPageToken": "abc",
    }));
    assert_eq!(
        v,
        json!({
            "password": "[REDACTED:key]",
            "api_keys": "[REDACTED:key]",
            "credentials": "[REDACTED:key]",
            "max_tokens": 100,
            "nextPageToken": "abc",
        })
    );
    assert_eq!(r.redactions, 3);
    assert_eq!(r.by_kind.get("key"), Some(&3));
}

#[test]
fn pairs_argv_and_headers() {
    let (v, _) = red(json!({
        "env": [{"name": "DB_PASSWORD", "value": "pw"}, {"name": "LOG_LEVEL", "value": "debug"}],
        "pairs": [["client_secret", "cs"], ["region", "eu"]],
        "args": ["-y", "pkg", "--api-key", "sk-x", "--port", "8080", "--token", "-v"],
        "headers": {
            "Authorization": "Bearer abc",
            "Cookie": "sid=1; theme=dark",
            "Content-Type": "application/json",
            "Location": "https://h.example/a/b?cursor=2",
        },
        "requestHeaders": [["Proxy-Authorization", "Basic eA=="], ["Accept", "*/*"]],
        "har": {"headers": [{"name": "X-Api-Key", "value": "k"}, {"name": "Accept", "value": "x"}]},
    }));
    assert_eq!(
        v,
        json!({
            "env": [{"name": "DB_PASSWORD", "value": "[REDACTED:key]"}, {"name": "LOG_LEVEL", "value": "debug"}],
            "pairs": [["client_secret", "[REDACTED:key]"], ["region", "eu"]],
            "args": ["-y", "pkg", "--api-key", "[REDACTED:argv]", "--port", "8080", "--token", "-v"],
            "headers": {
                "Authorization": "Bearer [REDACTED:bearer]",
                "Cookie": "sid=[REDACTED]; theme=dark",
                "Content-Type": "application/json",
                "Location": "https://h.example/<redacted>?cursor=2",
            },
            "requestHeaders": [["Proxy-Authorization", "Basic [REDACTED:basic]"], ["Accept", "*/*"]],
            "har": {"headers": [{"name": "X-Api-Key", "value": "[REDACTED:header]"}, {"name": "Accept", "value": "x"}]},
        })
    );
}

#[test]
fn json_inside_strings() {
    let inner = json!({"access_token": "tok", "expires_in": 3600}).to_string();
    let (v, r) = red(json!({"text": inner}));
    assert_eq!(
        v,
        json!({"text": r#"{"access_token":"[REDACTED:key]","expires_in":3600}"#})
    );
    assert_eq!(r.redactions, 1);
    // Unchanged JSON text keeps its original formatting.
    let pretty = "{\n  \"a\": 1\n}";
    let (v, r) = red(json!({"text": pretty}));
    assert_eq!(v, json!({"text": pretty}));
    assert!(r.is_empty());
}

#[test]
fn json_cut_short_is_redacted_as_json() {
    // A preview: the start of a payload, cut after a delimiter. Its secrets
    // sit where only keys and positions say they are secrets.
    let cut = r#"{"auth":{"value":"opaque-1x2y3z"},"argv":["deploy","--token","opaque-4u5v6w"],"note":"the rest is cut off here, mid "#;
    let (v, r) = red(json!({"preview": cut}));
    let stored = v["preview"].as_str().unwrap_or("");
    assert!(
        !stored.contains("opaque-1x2y3z") && !stored.contains("opaque-4u5v6w"),
        "{stored}"
    );
    assert!(stored.contains("the rest is cut off here"), "{stored}");
    assert_eq!(r.redactions, 2);
    // Redacting again finds nothing more.
    let (again, r2) = red(v.clone());
    assert_eq!(again, v);
    assert!(r2.is_empty());
    // A cut start with nothing to redact is left exactly as it was (the text
    // layers still see it).
    let plain = r#"{"items":[1,2,3],"title":"a long list, "#;
    let (v, r) = red(json!({"preview": plain}));
    assert_eq!(v, json!({"preview": plain}));
    assert!(r.is_empty());
    let (v, _) = red(json!({"preview": r#"{"note":"key=AKIAQ7Z3XK5N2B4V6D7F and "#}));
    assert!(!v.to_string().contains("AKIAQ7Z3XK5N2B4V6D7F"), "{v}");
}

#[test]
fn media_blocks_are_not_scanned() {
    // A text-looking base64 that *would* be redacted if it were text.
    let env_b64 = crate::codec::base64_encode(b"GITHUB_TOKEN=abc123def456\n", false, true);
    let (v, _) = red(json!([
        {"type": "image", "mimeType": "image/png", "data": env_b64},
        {"type": "text", "text": env_b64},
    ]));
    assert_eq!(v[0]["data"], json!(env_b64));
    assert_eq!(v[1]["text"], json!("[REDACTED:base64]"));
}

#[test]
fn object_keys_are_scanned() {
    let (v, _) = red(json!({
        "https://bob:hunter2hunter2@registry.example.com": {"ok": true},
        "plain": 1,
    }));
    let keys: Vec<&String> = v
        .as_object()
        .map(|m| m.keys().collect())
        .unwrap_or_default();
    assert!(
        keys.iter()
            .any(|k| k.as_str() == "https://bob:[REDACTED]@registry.example.com"),
        "{keys:?}"
    );
}

#[test]
fn header_api() {
    let r = redactor();
    assert_eq!(
        r.redact_header("Authorization", "Bearer abc.def"),
        "Bearer [REDACTED:bearer]"
    );
    assert_eq!(r.redact_header("authorization", "abc"), "[REDACTED:header]");
    assert_eq!(r.redact_header("X-API-Key", "k"), "[REDACTED:header]");
    assert_eq!(
        r.redact_header("mcp-session-id", "0f9a"),
        "[REDACTED:header]"
    );
    assert_eq!(
        r.redact_header("Set-Cookie", "sid=abc; Path=/; HttpOnly; Foo=bar"),
        "sid=[REDACTED]; Path=/; HttpOnly; [REDACTED]"
    );
    assert_eq!(r.redact_header("Content-Type", "text/html"), "text/html");
    assert!(matches!(r.redact_header("Accept", "*/*"), Cow::Borrowed(_)));
    assert_eq!(
        r.redact_header("Refresh", "3; url=/reset/abc"),
        "3; url=/<redacted>"
    );
    assert_eq!(r.redact_header("Link", "garbage"), "[REDACTED:header]");
    assert_eq!(
        r.redact_header("X-Debug", "token ghp_0123456789abcdefghijABCDEFGHIJ012345"),
        "token [REDACTED:github-pat]"
    );
}

#[test]
fn display_urls() {
    let r = redactor();
    assert_eq!(
        r.redact_url_for_display(
            "https://u:pw@mcp.example.com/mcp?token=abc&mode=x#access_token=y"
        ),
        "https://u:[REDACTED]@mcp.example.com/mcp?token=[REDACTED]&mode=x#access_token=[REDACTED]"
    );
    assert_eq!(
        r.redact_url_for_display("mcp.example.com/mcp?key=AIzaFAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKEFAK"),
        "mcp.example.com/mcp?key=[REDACTED]"
    );
}

#[test]
fn known_values_all_forms() {
    let mut r = redactor();
    let secret = "Zq8vN2pLr5TxW1mKc7Hd3Fs9Yb4Jg6Qe";
    r.add_known_secrets([secret.to_owned(), "short".to_owned()]);
    let escaped: String = secret
        .chars()
        .map(|c| format!("\\u{:04x}", c as u32))
        .collect();
    let text = format!(
        "plain={secret} b64={} url={} json={escaped} short",
        crate::codec::base64_encode(secret.as_bytes(), false, true),
        secret
    );
    let out = r.redact_text(&text);
    assert!(!out.contains(secret), "{out}");
    assert!(
        !out.contains(&crate::codec::base64_encode(secret.as_bytes(), false, true)),
        "{out}"
    );
    assert!(!out.contains(&escaped), "{out}");
    assert!(out.contains("short"), "{out}");
    // Inside a larger base64 blob (an echoed env dump).
    let blob = crate::codec::base64_encode(format!("OPAQUE={secret}\n").as_bytes(), false, true);
    assert_eq!(r.redact_text(&blob), "[REDACTED:base64]");
}

/// Takes a deep tree apart without recursion when a test ends, even by a
/// failed assertion (a recursive drop would overflow the stack and hide the
/// failure).
struct Deep(Value);

impl Drop for Deep {
    fn drop(&mut self) {
        dismantle(std::mem::take(&mut self.0));
    }
}

#[test]
fn too_deep_is_replaced_and_nothing_overflows() {
    let mut deep = Deep(json!("leaf-with-secret password=hunter2hunter2"));
    for i in 0..100_000 {
        let inner = std::mem::take(&mut deep.0);
        // Not `json!`: it would serialise `inner` (recursively) to embed it.
        deep.0 = if i % 2 == 0 {
            Value::Array(vec![inner])
        } else {
            Value::Object(Map::from_iter([("k".to_owned(), inner)]))
        };
    }
    let v = &mut deep.0;
    let r = redactor().redact_value(v);
    assert_eq!(r.by_kind.get("too-deep"), Some(&1));
    let mut s = Vec::new();
    strings(v, &mut s);
    assert!(s.iter().any(|x| x == TOO_DEEP));
    assert!(!s.iter().any(|x| x.contains("hunter2")));
    // The result is shallow enough to serialise and drop recursively.
    let text = serde_json::to_string(v).expect("serialise");
    assert!(text.len() < 10_000);
}

#[test]
fn deep_but_allowed_values_are_walked() {
    // 2 × 120 + 1 = 241 levels: under the limit.
    let mut deep = Deep(json!({"password": "x"}));
    for _ in 0..120 {
        let inner = std::mem::take(&mut deep.0);
        deep.0 = Value::Object(Map::from_iter([(
            "a".to_owned(),
            Value::Array(vec![inner]),
        )]));
    }
    let r = redactor().redact_value(&mut deep.0);
    assert_eq!(r.by_kind.get("key"), Some(&1));
    assert!(!r.by_kind.contains_key("too-deep"));
}

// ---- the corpus ------------------------------------------------------------

struct Case {
    name: String,
    input: Value,
    secrets: Vec<String>,
    keep: Vec<String>,
    mode: String,
    known: Vec<String>,
}

fn load_corpus() -> Vec<Case> {
    load_corpus_at(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/redact_corpus.json"
    ))
}

fn load_corpus_at(path: &str) -> Vec<Case> {
    let text = std::fs::read_to_string(path).expect("read corpus");
    let all: Vec<Value> = serde_json::from_str(&text).expect("parse corpus");
    let list = |v: &Value, k: &str| -> Vec<String> {
        v.get(k)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    all.into_iter()
        .enumerate()
        .map(|(i, c)| Case {
            name: c
                .get("name")
                .and_then(Value::as_str)
                .map_or_else(|| format!("case {i}"), |n| format!("{i}: {n}")),
            input: c.get("input").cloned().unwrap_or(Value::Null),
            secrets: list(&c, "secrets"),
            keep: list(&c, "keep"),
            mode: c
                .get("mode")
                .and_then(Value::as_str)
                .unwrap_or("value")
                .to_owned(),
            known: list(&c, "known"),
        })
        .collect()
}

/// Runs one case in one way and returns every text the checks look at.
fn run_case(r: &Redactor, case: &Case, wrap: usize) -> Vec<String> {
    let mut texts = Vec::new();
    if let Some(header) = case.mode.strip_prefix("header:") {
        let v = case.input.as_str().unwrap_or_default();
        texts.push(r.redact_header(header, v).into_owned());
        return texts;
    }
    if case.mode == "url" {
        let v = case.input.as_str().unwrap_or_default();
        texts.push(r.redact_url_for_display(v));
        return texts;
    }
    if case.mode == "text" {
        let v = case.input.as_str().unwrap_or_default();
        if wrap == 0 {
            texts.push(r.redact_text(v).into_owned());
            return texts;
        }
    }
    // As a value, alone or wrapped the ways a step carries it.
    let mut v = match wrap {
        0 => case.input.clone(),
        1 => {
            json!({"jsonrpc": "2.0", "id": 7, "result": {"content": [{"type": "text", "text": case.input.clone()}], "isError": false}})
        }
        _ => {
            json!({"method": "tools/call", "params": {"name": "t", "arguments": {"input": case.input.clone()}}})
        }
    };
    r.redact_value(&mut v);
    strings(&v, &mut texts);
    texts.push(serde_json::to_string(&v).unwrap_or_default());
    texts
}

#[test]
fn corpus() {
    let cases = load_corpus();
    assert!(cases.len() >= 80, "corpus has {} cases", cases.len());
    check_corpus(&cases);
}

/// The classes a review found the layers missing or overdoing (tokens
/// glued to text, encoded and separated key names, vendor keys named by
/// context, agent session links; cookies and documentation that must keep
/// what a reader needs), many cases each, in their own corpus file.
#[test]
fn adversarial_corpus() {
    let cases = load_corpus_at(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/redact_corpus_adversarial.json"
    ));
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/redact_corpus_adversarial.json"
    ))
    .expect("read corpus");
    let raw: Vec<Value> = serde_json::from_str(&text).expect("parse corpus");
    for class in [
        "glued",
        "key-names",
        "vendor-context",
        "session-urls",
        "cookies",
        "docs",
    ] {
        let n = raw.iter().filter(|c| c["class"] == class).count();
        assert!(n >= 10, "class {class} has {n} cases");
    }
    check_corpus(&cases);
}

fn check_corpus(cases: &[Case]) {
    let mut failures = Vec::new();
    let mut secrets = 0;
    let mut keepers = 0;
    for case in cases {
        let mut r = redactor();
        r.add_known_secrets(case.known.iter().cloned());
        secrets += case.secrets.len();
        keepers += case.keep.len();
        let wraps = if case.mode.starts_with("header:") || case.mode == "url" {
            1
        } else {
            3
        };
        let mut outputs: Vec<(String, Vec<String>)> = (0..wraps)
            .map(|w| (format!("wrap {w}"), run_case(&r, case, w)))
            .collect();
        // A text input must also come out right through `redact_text` (logs,
        // error messages), whatever the case's mode.
        if case.mode == "value"
            && let Some(text) = case.input.as_str()
        {
            outputs.push((
                "redact_text".to_owned(),
                vec![r.redact_text(text).into_owned()],
            ));
        }
        for (wrap, texts) in outputs {
            for s in &case.secrets {
                if let Some(t) = texts.iter().find(|t| t.contains(s.as_str())) {
                    failures.push(format!(
                        "[{}] {wrap}: secret survived: {s:?}\n    in: {}",
                        case.name,
                        clip(t)
                    ));
                }
            }
            for k in &case.keep {
                if !texts.iter().any(|t| t.contains(k.as_str())) {
                    failures.push(format!(
                        "[{}] {wrap}: keeper lost: {k:?}\n    out: {}",
                        case.name,
                        clip(texts.last().map_or("", String::as_str))
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} corpus failures ({} cases, {} secrets, {} keepers):\n{}",
        failures.len(),
        cases.len(),
        secrets,
        keepers,
        failures.join("\n")
    );
}

fn clip(s: &str) -> String {
    if s.len() <= 600 {
        return s.to_owned();
    }
    let mut end = 600;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &s[..end], s.len())
}

#[test]
fn corpus_is_idempotent() {
    for case in load_corpus() {
        let mut r = redactor();
        r.add_known_secrets(case.known.iter().cloned());
        let mut once = case.input.clone();
        r.redact_value(&mut once);
        let mut twice = once.clone();
        let report = r.redact_value(&mut twice);
        assert_eq!(once, twice, "[{}] second pass changed the value", case.name);
        assert!(
            report.is_empty(),
            "[{}] second pass reported {report:?}",
            case.name
        );
        if let Some(s) = case.input.as_str() {
            let t1 = r.redact_text(s).into_owned();
            let t2 = r.redact_text(&t1).into_owned();
            assert_eq!(t1, t2, "[{}] text not idempotent", case.name);
        }
    }
}

// ---- fuzzing ---------------------------------------------------------------

/// xorshift64*: small, deterministic, good enough to mutate inputs.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

const SPLICES: &[&str] = &[
    "\"",
    "\\",
    "{",
    "}",
    "[",
    "]",
    ":",
    ",",
    "=",
    "://",
    "@",
    "?",
    "#",
    "&",
    "%",
    "%2",
    "\\u00",
    "-----BEGIN PRIVATE KEY-----",
    "-----END ",
    "Bearer ",
    "Basic ",
    "eyJ",
    ".eyJ",
    "ghp_",
    "sk-ant-",
    "AKIA",
    "token=",
    "password: ",
    "--api-key ",
    "\n",
    "\r\n",
    "é",
    "😀",
    "\u{0}",
    "=",
    "==",
    "<",
    ">; rel=",
    "url=",
    "xoxb-1234567-",
    "/bot",
    ":AA",
    "AAAA",
    "QUFB",
];

fn mutate(rng: &mut Rng, base: &str) -> String {
    let mut s = base.to_owned();
    for _ in 0..1 + rng.below(6) {
        let mut at = rng.below(s.len() + 1);
        while !s.is_char_boundary(at) {
            at -= 1;
        }
        match rng.below(4) {
            0 => {
                let mut end = (at + rng.below(16)).min(s.len());
                while !s.is_char_boundary(end) {
                    end -= 1;
                }
                s.replace_range(at..end.max(at), "");
            }
            1 | 2 => s.insert_str(at, SPLICES[rng.below(SPLICES.len())]),
            _ => {
                let c = char::from_u32(rng.below(0x3000) as u32).unwrap_or('x');
                s.insert(at, c);
            }
        }
    }
    s
}

#[test]
fn never_panics_on_mutated_inputs() {
    let cases = load_corpus();
    let mut seeds: Vec<String> = cases
        .iter()
        .map(|c| match &c.input {
            Value::String(s) => s.clone(),
            v => v.to_string(),
        })
        .collect();
    seeds.push(String::new());
    let mut r = redactor();
    r.add_known_secrets(["Zq8vN2pLr5TxW1mKc7Hd".to_owned()]);
    // Deeper runs, ad hoc: BIR_REDACT_FUZZ_SEED=<n> BIR_REDACT_FUZZ_ITERS=<n>.
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    let seed = env("BIR_REDACT_FUZZ_SEED").unwrap_or(0x9E37_79B9_7F4A_7C15) | 1;
    let iters = env("BIR_REDACT_FUZZ_ITERS").unwrap_or(10_000);
    let mut rng = Rng(seed);
    for i in 0..iters as usize {
        let base = &seeds[rng.below(seeds.len())];
        let m = mutate(&mut rng, base);
        // As text, as a header, as a URL, and (when it still parses) as JSON.
        let _ = r.redact_text(&m);
        let _ = r.redact_header(
            ["Authorization", "Link", "Refresh", "Cookie", "X-Other"][i % 5],
            &m,
        );
        let _ = r.redact_url_for_display(&m);
        let mut v = serde_json::from_str::<Value>(&m).unwrap_or(Value::String(m.clone()));
        let report = r.redact_value(&mut v);
        assert!(
            !report.by_kind.contains_key("redactor-failed"),
            "a rule panicked on {m:?}"
        );
        // Redaction stays idempotent on garbage too.
        let mut again = v.clone();
        r.redact_value(&mut again);
        assert_eq!(v, again, "not idempotent on {m:?}");
    }
}

// ---- size ------------------------------------------------------------------

/// A realistic large tool result: file listings, log lines, prose, usage
/// counters, a few secrets, JSON-in-text, an image block.
pub(crate) fn big_result(target: usize) -> Value {
    let mut items = Vec::new();
    let mut size = 0;
    let mut i = 0u64;
    while size < target {
        let line = match i % 8 {
            0 => format!(
                "2024-05-0{} 12:{:02}:{:02} INFO request id={:016x} path=/api/v1/items/{} status=200 duration_ms={} user_agent=\"Mozilla/5.0 (X11; Linux x86_64)\"",
                i % 9 + 1,
                i % 60,
                (i * 7) % 60,
                i.wrapping_mul(0x9E37_79B9_7F4A_7C15),
                i,
                i % 900
            ),
            1 => "The quick brown fox jumps over the lazy dog; tokens are counted per request and the cache key is derived from the prompt. Authentication is handled upstream.".to_owned(),
            2 => format!(
                "{{\"id\": \"{:08x}-1c2d-4e5f-8a9b-0c1d2e3f4a5b\", \"name\": \"item {i}\", \"tags\": [\"a\", \"b\"], \"max_tokens\": 4096, \"sha256\": \"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\"}}",
                i
            ),
            3 => format!("src/module_{i}/handler.rs:{}: warning: unused variable `key_id`", i % 500),
            4 => "def handler(event, context):\n    api_key = os.environ[\"API_KEY\"]\n    return {\"statusCode\": 200, \"body\": json.dumps(event)}".to_owned(),
            5 => format!("see https://docs.example.com/guide/section-{i}?lang=en#overview for details"),
            6 if i % 64 == 6 => "export GITHUB_TOKEN=ghp_FAKEfake0123456789abcdefghijABCDEF12".to_owned(),
            _ => format!("| {i} | widget | {} | in stock |", i * 13 % 1000),
        };
        size += line.len() + 4;
        items.push(line);
        i += 1;
    }
    json!({
        "jsonrpc": "2.0",
        "id": 42,
        "result": {
            "content": [
                {"type": "text", "text": items.join("\n")},
                {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="},
                {"type": "text", "text": serde_json::to_string(&json!({"results": items.iter().take(200).collect::<Vec<_>>(), "nextPageToken": "CiAKGjBpNDd2Nmp2Zml2cXRiaTEwMjQ", "usage": {"total_tokens": 1234}})).unwrap_or_default()},
            ],
            "structuredContent": {"rows": items.iter().take(500).map(|l| json!({"line": l, "len": l.len()})).collect::<Vec<_>>()},
            "isError": false
        }
    })
}

#[test]
fn large_realistic_result() {
    let v = big_result(1 << 20);
    let r = redactor();
    let mut once = v.clone();
    let report = r.redact_value(&mut once);
    assert!(
        report.by_kind.get("github-pat").is_some_and(|&n| n > 0),
        "{report:?}"
    );
    let text = serde_json::to_string(&once).expect("serialise");
    assert!(!text.contains("ghp_FAKE"));
    assert!(text.contains("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"));
    assert!(text.contains("CiAKGjBpNDd2Nmp2Zml2cXRiaTEwMjQ"));
    assert!(text.contains("iVBORw0KGgo"));
    assert!(text.contains("api_key = os.environ"));
    let mut twice = once.clone();
    assert!(r.redact_value(&mut twice).is_empty());
}

/// The run's own session id is an identifier: kept under every
/// session-id-like name (object key, `{name, value}` pair, `[name, value]`
/// pair, `NAME=value` text) when it is exactly that id; any other value
/// there (a web session's token) is redacted as before, and a redactor
/// that was not told the id redacts it like any other.
#[test]
fn the_runs_own_session_id_is_kept_and_other_session_ids_are_not() {
    let own = "0b6f2a3c-91de-4c1e-8a55-3f0e9d7c2b41";
    let web = "s%3Aj8Hq2kP9xLmN4vR7tY1wZ6bC3dF5gH0";
    let input = json!({
        "session_id": own,
        "sessionId": own,
        "other": {"session_id": web},
        "pairs": [{"name": "sessionId", "value": own}, ["session_id", web]],
        "line": format!("resumed session_id={own} and JSESSIONID={web}"),
    });
    let knowing = redactor().knowing_identifier(own);
    let mut v = input.clone();
    knowing.redact_value(&mut v);
    assert_eq!(v["session_id"], json!(own), "{v}");
    assert_eq!(v["sessionId"], json!(own), "{v}");
    assert_eq!(v["pairs"][0]["value"], json!(own), "{v}");
    let line = v["line"].as_str().unwrap_or_default();
    assert!(line.contains(&format!("session_id={own}")), "{line}");
    let text = v.to_string();
    assert!(
        !text.contains(web),
        "a web session id is still a secret: {text}"
    );

    let mut v = input;
    redactor().redact_value(&mut v);
    assert!(!v.to_string().contains(own), "{v}");
    // Too short to be told apart from a common value: not taken.
    let mut v = json!({"session_id": "1234"});
    redactor().knowing_identifier("1234").redact_value(&mut v);
    assert_ne!(v["session_id"], json!("1234"));
}
