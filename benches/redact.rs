//! Redactor throughput and set-up cost.
//!
//! Run with `cargo bench --bench redact` (harness = false; release profile).
//! Prints the time to build a `Redactor` (compiling every pattern) and the
//! throughput of `redact_value` and `redact_text` on about 1 MiB of
//! realistic tool output: log lines, prose, a JSON document carried as text,
//! source code, URLs, table rows, a few secrets, an image block. A second
//! text is dense in the words the name layer looks at (`token`, `key`,
//! `secret`…) to show the slow end.
//!
//! Knobs (environment): BENCH_MIB (input size, default 1), BENCH_ROUNDS
//! (timed rounds, default 20).

#![allow(clippy::print_stdout, clippy::unwrap_used)]

mod common;

use std::hint::black_box;
use std::time::{Duration, Instant};

use bir::redact::{RedactConfig, Redactor};
use serde_json::{Value, json};

fn lines(target: usize, dense: bool) -> Vec<String> {
    let mut out = Vec::new();
    let mut size = 0;
    let mut i = 0u64;
    while size < target {
        let line = if dense {
            match i % 4 {
                0 => format!("token_count={i} key_id=k{i} max_tokens=4096 secret_name=db-{i} password_policy=strict"),
                1 => "the api key rotates weekly; tokens are cached; keys are sorted; the secret store is sealed".to_owned(),
                2 => format!("{{\"key\": \"item-{i}\", \"value\": {i}, \"authorId\": \"u{i}\", \"tokenCount\": {i}}}"),
                _ => format!("--token-file /run/tok{i} --key-path /etc/k{i}.pem --auth-mode oidc"),
            }
        } else {
            match i % 8 {
                0 => format!(
                    "2024-05-0{} 12:{:02}:{:02} INFO request id={:016x} path=/api/v1/items/{} status=200 duration_ms={} ua=\"Mozilla/5.0 (X11; Linux x86_64)\"",
                    i % 9 + 1,
                    i % 60,
                    (i * 7) % 60,
                    i.wrapping_mul(0x9E37_79B9_7F4A_7C15),
                    i,
                    i % 900
                ),
                1 => "The quick brown fox jumps over the lazy dog; tokens are counted per request and the cache key is derived from the prompt.".to_owned(),
                2 => format!(
                    "{{\"id\": \"{i:08x}-1c2d-4e5f-8a9b-0c1d2e3f4a5b\", \"name\": \"item {i}\", \"max_tokens\": 4096, \"sha256\": \"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\"}}"
                ),
                3 => format!("src/module_{i}/handler.rs:{}: warning: unused variable `key_id`", i % 500),
                4 => "def handler(event, context):\n    api_key = os.environ[\"API_KEY\"]\n    return {\"statusCode\": 200}".to_owned(),
                5 => format!("see https://docs.example.com/guide/section-{i}?lang=en#overview"),
                6 if i % 64 == 6 => "export GITHUB_TOKEN=ghp_FAKEfake0123456789abcdefghijABCDEF12".to_owned(),
                6 if i % 64 == 14 => format!("Authorization: Bearer {:032x}", i.wrapping_mul(0x2545_F491_4F6C_DD1D)),
                _ => format!("| {i} | widget | {} | in stock |", i * 13 % 1000),
            }
        };
        size += line.len() + 1;
        out.push(line);
        i += 1;
    }
    out
}

fn result_value(target: usize) -> Value {
    let text = lines(target * 6 / 10, false);
    let rows: Vec<Value> = lines(target * 3 / 10, false)
        .into_iter()
        .enumerate()
        .map(|(n, l)| json!({"n": n, "line": l, "tokenCount": n, "meta": {"ok": true, "tags": ["a", "b"]}}))
        .collect();
    json!({
        "jsonrpc": "2.0",
        "id": 42,
        "result": {
            "content": [
                {"type": "text", "text": text.join("\n")},
                {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo".to_owned() + &"A".repeat(target / 20)},
            ],
            "structuredContent": {"rows": rows, "nextPageToken": "CiAKGjBpNDd2Nmp2Zml2cXRiaTEwMjQ"},
            "isError": false
        }
    })
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn mbps(bytes: usize, d: Duration) -> f64 {
    bytes as f64 / (1024.0 * 1024.0) / d.as_secs_f64()
}

fn main() {
    // cargo bench passes `--bench`; nothing to parse.
    let mib = common::env_usize("BENCH_MIB", 1);
    let rounds = common::env_usize("BENCH_ROUNDS", 20).max(3);
    let target = mib << 20;

    // Set-up cost.
    let mut builds = Vec::new();
    for _ in 0..10 {
        let t = Instant::now();
        let r = Redactor::new(RedactConfig::default());
        builds.push(t.elapsed());
        black_box(&r);
    }
    let first = builds[0];
    let build = median(builds);
    let mut redactor = Redactor::new(RedactConfig::default());
    let t = Instant::now();
    redactor
        .add_known_secrets((0..20).map(|i| format!("known-opaque-value-{i:04}-Zq8vN2pLr5TxW1")));
    let add_known = t.elapsed();
    // A known value that does occur in the input.
    redactor.add_known_secrets(["e3b0c44298fc1c149afbf4c8".to_owned()]);

    // redact_value on a tool result.
    let value = result_value(target);
    let value_bytes = serde_json::to_string(&value).unwrap().len();
    let mut times = Vec::new();
    let mut redactions = 0;
    for _ in 0..rounds {
        let mut v = value.clone();
        let t = Instant::now();
        let report = redactor.redact_value(black_box(&mut v));
        times.push(t.elapsed());
        redactions = report.redactions;
        black_box(v);
    }
    let value_time = median(times);

    // redact_text on log-like text, ordinary and dense in name words.
    let mut text_results = Vec::new();
    for (label, dense) in [("text", false), ("text (dense names)", true)] {
        let text = lines(target, dense).join("\n");
        let mut times = Vec::new();
        for _ in 0..rounds {
            let t = Instant::now();
            let out = redactor.redact_text(black_box(&text));
            times.push(t.elapsed());
            black_box(out);
        }
        text_results.push((label, text.len(), median(times)));
    }

    println!(
        "Redactor::new: median {:.2} ms (first {:.2} ms)",
        build.as_secs_f64() * 1e3,
        first.as_secs_f64() * 1e3
    );
    println!(
        "add_known_secrets (20 values): {:.2} ms",
        add_known.as_secs_f64() * 1e3
    );
    println!(
        "redact_value: {:.2} MiB JSON in {:.2} ms = {:.0} MiB/s ({redactions} redactions)",
        value_bytes as f64 / 1048576.0,
        value_time.as_secs_f64() * 1e3,
        mbps(value_bytes, value_time)
    );
    for (label, len, d) in text_results {
        println!(
            "redact_{label}: {:.2} MiB in {:.2} ms = {:.0} MiB/s",
            len as f64 / 1048576.0,
            d.as_secs_f64() * 1e3,
            mbps(len, d)
        );
    }
}
