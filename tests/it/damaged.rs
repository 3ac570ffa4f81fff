//! Damaged and odd answers that the host does get, end to end: the real proxy, the scriptable peer
//! writing the exact bytes of each answer, and the run it stored. Each case
//! checks three things:
//!
//! * the host received exactly the bytes the server wrote (the relay does
//!   not judge, repair or drop answers);
//! * the run (`bir runs export latest`) says what happened: which call each
//!   answer belongs to, how the call ended, and why a body is missing;
//! * no secret these messages carry is stored: not in any file under the
//!   store, not in `bir runs export`/`show`, not in the proxy's stderr.
//!
//! The secrets are opaque values (no known token shape): only their key
//! names, or their place after `--token`, say they are secret.

use std::time::Duration;

use serde_json::{Value, json};

use crate::record::{bir_cmd, call, proxy, runs_dir};
use crate::support::{Host, TempDir, wait_until};

/// What a session left: the bytes the host received, and the run.
struct Recorded {
    relayed: Vec<u8>,
    /// `bir runs export latest` (JSON).
    doc: Value,
    /// Every place a stored secret could show: each file under the store,
    /// both export formats, `bir runs show --full`, the proxy's stderr.
    surfaces: Vec<(String, String)>,
}

impl Recorded {
    fn steps(&self) -> Vec<Value> {
        self.doc["steps"].as_array().cloned().unwrap_or_default()
    }

    /// The `tool_selected` and `tool_response` steps of the call to `tool`
    /// (each tool is called once per session, except where a test says).
    fn call(&self, tool: &str) -> (Value, Value) {
        let of = |kind: &str| {
            self.steps()
                .into_iter()
                .find(|s| s["toolName"] == tool && s["type"] == kind)
                .unwrap_or_else(|| panic!("no {kind} step for {tool}: {:#}", self.doc))
        };
        (of("tool_selected"), of("tool_response"))
    }

    fn surface(&self, name: &str) -> &str {
        self.surfaces
            .iter()
            .find(|(surface, _)| surface == name)
            .map_or("", |(_, text)| text.as_str())
    }

    fn assert_relayed(&self, expected: &[u8]) {
        assert!(
            self.relayed == expected,
            "the host did not get the server's bytes:\n got  {:?}\n sent {:?}",
            String::from_utf8_lossy(&self.relayed),
            String::from_utf8_lossy(expected)
        );
    }

    fn assert_not_stored(&self, secrets: &[&str]) {
        let mut leaks = Vec::new();
        for (surface, text) in &self.surfaces {
            for secret in secrets {
                if text.contains(secret) {
                    leaks.push(format!("{secret} in {surface}"));
                }
            }
        }
        assert!(leaks.is_empty(), "secrets stored:\n{}", leaks.join("\n"));
    }
}

/// Runs a session against a peer following `script`, `drive` playing the
/// host, then reads back everything the run left.
fn session(tag: &str, script: &Value, drive: impl FnOnce(&mut Host)) -> Recorded {
    session_in(tag, script, |host, _| drive(host))
}

/// [`session`], `drive` also given the session's home (to look at the
/// store while the proxy runs).
fn session_in(tag: &str, script: &Value, drive: impl FnOnce(&mut Host, &TempDir)) -> Recorded {
    let dir = TempDir::new(tag);
    let mut host = Host::start(proxy(&dir, script));
    drive(&mut host, &dir);
    let seen = host.finish(Duration::from_secs(5));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);

    let mut surfaces = Vec::new();
    let mut dirs = vec![runs_dir(&dir)];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).expect("the store exists").flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                let bytes = std::fs::read(&path).expect("read a stored file");
                surfaces.push((
                    path.display().to_string(),
                    String::from_utf8_lossy(&bytes).into_owned(),
                ));
            }
        }
    }
    let mut doc = Value::Null;
    for args in [
        &["runs", "export", "latest"][..],
        &["runs", "export", "latest", "--format", "jsonl"],
        &["runs", "show", "latest", "--full"],
    ] {
        let (code, out, err) = bir_cmd(&dir, args);
        assert_eq!(code, 0, "bir {args:?}: {err}");
        if doc.is_null() {
            doc = serde_json::from_str(&out).expect("export is JSON");
        }
        surfaces.push((format!("bir {}", args.join(" ")), out));
    }
    surfaces.push(("proxy stderr".into(), seen.stderr));
    Recorded {
        relayed: seen.stdout,
        doc,
        surfaces,
    }
}

/// A rule answering `tool` with exactly these bytes.
fn answer(tool: &str, bytes: &str) -> Value {
    json!({"method": "tools/call", "tool": tool, "do": [{"raw": bytes}]})
}

/// A script answering each tool with its body, written byte by byte: each
/// character stands for one byte (invalid UTF-8 cannot be written
/// otherwise).
fn answers_latin1(tools: &[&str], bodies: &[String]) -> Value {
    let rules: Vec<Value> = tools
        .iter()
        .zip(bodies)
        .map(|(tool, body)| json!({"method": "tools/call", "tool": tool, "do": [{"raw_latin1": body}]}))
        .collect();
    json!({ "rules": rules })
}

/// The bytes a `raw_latin1` action writes for `text`.
fn latin1(text: &str) -> Vec<u8> {
    text.chars()
        .map(|c| u8::try_from(u32::from(c)).expect("a latin-1 character"))
        .collect()
}

/// Sends one call per tool (ids 1, 2, …) and waits for `lines` answers.
fn call_each(host: &mut Host, tools: &[&str], lines: usize) {
    for (i, tool) in tools.iter().enumerate() {
        host.send(&call(i as u64 + 1, tool, json!({"n": i})));
    }
    assert!(
        host.wait_lines(lines, Duration::from_secs(5)),
        "answers missing; stderr:\n{}",
        host.stderr_so_far()
    );
}

/// An answer with both `result` and `error`, one with `"jsonrpc":"1.0"`,
/// an id answered twice, and an answer to an id never asked. The relay
/// passes them all on; the recorder does not judge the envelope (the first
/// answer to an id is the call's answer, stored with everything it holds),
/// and an answer no call is waiting for (the duplicate, the orphan) is not
/// recorded, so its secrets are not either. Neither disturbs the calls that
/// come after, even those reusing the same ids.
#[test]
fn odd_envelopes_duplicates_and_orphans() {
    const BOTH: &str = "Kp4Tz8Wq2Rn6Ym0Hv3Jd";
    const V1: &str = "Gs5Lx9Fb1Mc7Qe3Ua8Wt";
    const DUPLICATE: &str = "Nh2Vr6Bk0Zs4Xp8Cy1Df";
    const ORPHAN: &str = "Ej7Wm3Tq9Ha5Lu1Ro6Ki";
    let both = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"done\"}}]}},\"error\":{{\"code\":-32000,\"message\":\"also failed\",\"data\":{{\"headers\":{{\"Authorization\":\"Basic {BOTH}\"}}}}}}}}\n"
    );
    let v1 = format!(
        "{{\"jsonrpc\":\"1.0\",\"id\":2,\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"old style\"}}],\"structuredContent\":{{\"password\":\"{V1}\"}}}}}}\n"
    );
    let twice = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"first\"}}]}}}}\n{{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"second\"}}],\"structuredContent\":{{\"password\":\"{DUPLICATE}\"}}}}}}\n"
    );
    let orphan = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":99,\"result\":{{\"content\":[],\"structuredContent\":{{\"password\":\"{ORPHAN}\"}}}}}}\n{{\"jsonrpc\":\"2.0\",\"id\":4,\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"mine\"}}]}}}}\n"
    );
    let again = "{\"jsonrpc\":\"2.0\",\"id\":99,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"asked this time\"}]}}\n";
    let reused = "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"id 3 again\"}]}}\n";
    let script = json!({"rules": [
        answer("both", &both),
        answer("v1", &v1),
        answer("twice", &twice),
        answer("orphan", &orphan),
        answer("again", again),
        answer("reused", reused),
    ]});
    let run = session("odd-envelopes", &script, |host| {
        call_each(host, &["both", "v1", "twice", "orphan"], 6);
        host.send(&call(99, "again", json!({})));
        host.send(&call(3, "reused", json!({})));
        assert!(host.wait_lines(8, Duration::from_secs(5)));
    });

    run.assert_relayed(format!("{both}{v1}{twice}{orphan}{again}{reused}").as_bytes());
    run.assert_not_stored(&[BOTH, V1, DUPLICATE, ORPHAN]);
    assert_eq!(run.steps().len(), 12, "six calls, no more: {:#}", run.doc);

    // Both members are kept (redacted): the reader sees what was sent.
    let (_, both) = run.call("both");
    assert_eq!(both["outcome"], "answered");
    assert_eq!(both["isError"], true, "an error member makes it an error");
    assert_eq!(both["output"]["content"][0]["text"], "done", "{both}");
    assert_eq!(both["error"]["message"], "also failed", "{both}");
    assert!(both["redactions"].as_u64() >= Some(1), "{both}");

    let (_, v1) = run.call("v1");
    assert_eq!(v1["outcome"], "answered");
    assert_eq!(v1["output"]["content"][0]["text"], "old style", "{v1}");

    let (_, twice) = run.call("twice");
    assert_eq!(twice["output"]["content"][0]["text"], "first", "{twice}");
    let (_, orphan) = run.call("orphan");
    assert_eq!(orphan["output"]["content"][0]["text"], "mine", "{orphan}");
    let (_, again) = run.call("again");
    assert_eq!(again["requestId"], 99);
    assert_eq!(
        again["output"]["content"][0]["text"], "asked this time",
        "{again}"
    );
    let (_, reused) = run.call("reused");
    assert_eq!(reused["output"]["content"][0]["text"], "id 3 again");
    assert_eq!(run.doc["finish"]["metrics"]["toolCalls"], 6);
    assert_eq!(run.doc["finish"]["metrics"]["errors"], 1);
}

/// A3/A4 in answers too large to store (over 256 KiB, no binary block):
/// what is kept is a preview of their start, redacted as JSON closed where
/// it was cut. A lone surrogate escape or a raw NUL there made that JSON
/// unparseable for serde_json, and the preview fell back to the text rules,
/// which cannot tie `{"auth":{"value":…}}` or `["--token", …]` to a secret:
/// both were stored. (Invalid UTF-8 is read as U+FFFD and was fine.)
#[test]
fn large_damaged_answers_keep_their_secrets_out_of_the_preview() {
    let padding = "padding ".repeat(40_000);
    let cases = [
        ("surrogate", r"half an emoji \ud83d"),
        ("nul", "a raw \u{0} byte"),
        ("utf8", "caf\u{e9} \u{ff}\u{fe}"),
    ];
    let secrets = |n: usize| {
        [
            format!("Qm4Rt8Yp2Wn6{n}Xc3Zl7Kj9"),
            format!("Lp0Ok9Ij8Uh7{n}Rd4Es3Wa2"),
            format!("Mn3Bv5Cx7Zl9{n}Fd6Sa8Qw1"),
        ]
    };
    let bodies: Vec<String> = cases
        .iter()
        .enumerate()
        .map(|(i, (_, odd))| {
            let [auth, flag, key] = secrets(i);
            format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{},\"result\":{{\"structuredContent\":{{\"note\":\"{odd}\",\"auth\":{{\"value\":\"{auth}\"}},\"argv\":[\"deploy\",\"--token\",\"{flag}\"],\"api_key\":\"{key}\"}},\"content\":[{{\"type\":\"text\",\"text\":\"{padding}\"}}]}}}}\n",
                i + 1
            )
        })
        .collect();
    let tools: Vec<&str> = cases.iter().map(|(tool, _)| *tool).collect();
    let script = answers_latin1(&tools, &bodies);
    let run = session("large-damaged", &script, |host| {
        call_each(host, &tools, tools.len())
    });

    run.assert_relayed(&latin1(&bodies.concat()));
    let all: Vec<String> = (0..cases.len()).flat_map(secrets).collect();
    run.assert_not_stored(&all.iter().map(String::as_str).collect::<Vec<_>>());
    for (tool, _) in cases {
        let (_, response) = run.call(tool);
        let output = &response["output"];
        assert_eq!(output["truncated"], true, "{tool}: {response}");
        assert!(
            output["originalBytes"].as_u64() > Some(320_000),
            "{tool}: {output}"
        );
        let preview = output["preview"].as_str().unwrap_or_default();
        assert!(
            preview.contains("deploy") && preview.contains("padding"),
            "{tool}: what is not secret is kept: {preview}"
        );
        assert!(
            response["redactions"].as_u64() >= Some(3),
            "{tool}: {response}"
        );
        assert_eq!(response["outcome"], "answered");
    }
}

/// A3/A4/A8 in answers of ordinary size: a lone
/// surrogate escape and invalid UTF-8 (which every peer reads: JavaScript
/// accepts the one and decodes the other as U+FFFD) and a result nested 200
/// levels deep (deeper than serde_json's 128) are recorded, redacted, with
/// what could not be kept replaced in place and named in `repaired`; a
/// server cannot hide a result from the recording that way. A raw NUL byte
/// inside a string, which no JSON parser accepts, is still stored without
/// its body, marked `withheld: "unparseable"` on its `tool_response` step
/// only. A `\u0000` escape (valid JSON) is kept whole (no C-string cut),
/// and a line of NULs the server wrote before an answer neither
/// desynchronises the pairing nor gets recorded.
#[test]
fn damaged_answers_are_recorded_leniently_and_only_unreadable_ones_withheld() {
    const SURROGATE: &str = "Vq3Lm8Zt1Xw6Rb9Kc2Nd";
    const NUL_ESCAPE: &str = "Fy7Hj2Sd5Gk0Pw4Tx9Mb";
    const NUL_RAW: &str = "Rc6Vn1Qa8Ze3Jt5Ky0Lh";
    const LATIN1: &str = "Bu9Xs4Wd2Yf7Np1Cq6Ge";
    const DEEP: &str = "Jq4Wn7Xc2Vb9Lm5Zk8Pd";
    let result = |id: u64, text: &str, key: &str, secret: &str| {
        format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"{text}\"}}],\"structuredContent\":{{\"{key}\":\"{secret}\",\"kept\":\"yes\"}}}}}}\n"
        )
    };
    let deep = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":6,\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"deep\"}}],\"structuredContent\":{{\"password\":\"{DEEP}\",\"tree\":{}1{}}}}}}}\n",
        "[".repeat(200),
        "]".repeat(200)
    );
    let bodies = [
        result(1, r"half an emoji: \ud83d", "api_key", SURROGATE),
        result(2, r"before\u0000after", "password", NUL_ESCAPE),
        result(3, "before\u{0}after", "password", NUL_RAW),
        result(4, "caf\u{e9} \u{ff}\u{fe}", "client_secret", LATIN1),
        format!(
            "{}\n{}",
            "\u{0}".repeat(64),
            result(5, "after the noise", "note", "not secret")
        ),
        deep,
    ];
    let tools = [
        "surrogate",
        "nul_escape",
        "nul_raw",
        "latin1",
        "noise",
        "deep",
    ];
    let script = answers_latin1(&tools, &bodies);
    let run = session("damaged", &script, |host| call_each(host, &tools, 7));

    run.assert_relayed(&latin1(&bodies.concat()));
    run.assert_not_stored(&[SURROGATE, NUL_ESCAPE, NUL_RAW, LATIN1, DEEP]);
    assert_eq!(run.steps().len(), 12, "{:#}", run.doc);

    for (tool, text, repaired) in [
        ("surrogate", "half an emoji: \u{fffd}", "lone-surrogate:1"),
        ("latin1", "caf\u{fffd} \u{fffd}\u{fffd}", "invalid-utf8:3"),
        ("deep", "deep", "too-deep:1"),
    ] {
        let (selected, response) = run.call(tool);
        assert!(selected["input"]["n"].is_u64(), "{tool}: {selected}");
        assert_eq!(selected["withheld"], Value::Null, "{tool}: {selected}");
        assert_eq!(response["withheld"], Value::Null, "{tool}: {response}");
        assert_eq!(response["repaired"], repaired, "{tool}: {response}");
        assert_eq!(
            response["output"]["content"][0]["text"], text,
            "{tool}: {response}"
        );
        assert!(
            response["redactions"].as_u64() >= Some(1),
            "{tool}: {response}"
        );
        assert_eq!(response["outcome"], "answered", "{tool}: {response}");
    }
    let (_, deep) = run.call("deep");
    let mut at = &deep["output"]["structuredContent"]["tree"];
    let mut levels = 0;
    while let Some(inner) = at.get(0) {
        at = inner;
        levels += 1;
    }
    assert_eq!(at, "[REDACTED:too-deep]", "{deep}");
    assert!(levels > 50, "the levels that fit are kept: {levels}");

    let (selected, response) = run.call("nul_raw");
    assert_eq!(selected["withheld"], Value::Null, "{selected}");
    assert_eq!(response["withheld"], "unparseable", "{response}");
    assert_eq!(response["output"], Value::Null, "{response}");

    let (_, nul) = run.call("nul_escape");
    assert_eq!(nul["withheld"], Value::Null, "{nul}");
    assert_eq!(
        nul["output"]["content"][0]["text"], "before\u{0}after",
        "{nul}"
    );
    assert_eq!(nul["output"]["structuredContent"]["kept"], "yes");
    assert_eq!(nul["redactions"], 1, "{nul}");

    let (_, noise) = run.call("noise");
    assert_eq!(noise["requestId"], 5);
    assert_eq!(
        noise["output"]["content"][0]["text"], "after the noise",
        "{noise}"
    );
    let show = run.surface("bir runs show latest --full");
    assert_eq!(
        show.matches("(payloads withheld: unparseable)").count(),
        1,
        "{show}"
    );
}

/// Two calls in flight with the same id, answered in reverse order.
/// JSON-RPC gives nothing but the id to pair an answer with its request, so
/// the proxy pairs first-in, first-out (the documented rule): here each
/// call gets the other's answer. The run must not present that guess as a
/// fact: both answers are marked `correlation: "ambiguous"`; calls whose
/// id was not shared, before or after, are not.
#[test]
fn calls_sharing_an_id_are_paired_in_order_and_marked_ambiguous() {
    const ARG: &str = "Wz5Ql1Ex8Rv3Tn6Yb0Uc";
    const ANSWER: &str = "Hd8Jf2Kg6Ls0Az4Xm9Cp";
    let text = |id: u64, text: &str| {
        format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"{text}\"}}]}}}}\n"
        )
    };
    let to_second = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"to second\"}}],\"structuredContent\":{{\"token\":\"{ANSWER}\"}}}}}}\n"
    );
    let reversed = format!("{to_second}{}", text(5, "to first"));
    let script = json!({"rules": [
        // The first call is answered only with the second, after it.
        {"method": "tools/call", "tool": "first", "do": []},
        answer("second", &reversed),
        answer("alone", &text(6, "alone")),
        answer("later", &text(5, "later")),
    ]});
    let run = session("shared-id", &script, |host| {
        host.send(&call(5, "first", json!({"password": ARG})));
        host.send(&call(5, "second", json!({})));
        assert!(host.wait_lines(2, Duration::from_secs(5)));
        host.send(&call(6, "alone", json!({})));
        host.send(&call(5, "later", json!({})));
        assert!(host.wait_lines(4, Duration::from_secs(5)));
    });

    run.assert_relayed(format!("{reversed}{}{}", text(6, "alone"), text(5, "later")).as_bytes());
    run.assert_not_stored(&[ARG, ANSWER]);
    let (first, first_answer) = run.call("first");
    let (second, second_answer) = run.call("second");
    assert_eq!(first["requestId"], 5);
    assert_eq!(second["requestId"], 5);
    // First in, first out: the first answer read goes to the first call.
    assert_eq!(
        first_answer["output"]["content"][0]["text"], "to second",
        "{first_answer}"
    );
    assert_eq!(
        second_answer["output"]["content"][0]["text"], "to first",
        "{second_answer}"
    );
    for step in [&first_answer, &second_answer] {
        assert_eq!(step["correlation"], "ambiguous", "{step}");
        assert_eq!(step["outcome"], "answered", "{step}");
    }
    for tool in ["alone", "later"] {
        let (_, step) = run.call(tool);
        assert_eq!(step["correlation"], Value::Null, "{tool}: {step}");
        assert_eq!(step["output"]["content"][0]["text"], tool, "{step}");
    }
    assert_eq!(
        run.surface("bir runs show latest --full")
            .matches("answer paired in arrival order")
            .count(),
        2,
        "{}",
        run.surface("bir runs show latest --full")
    );
}

/// `notifications/cancelled` for an id never asked, and sent twice for
/// the same call. Every message is relayed; the call the server answers
/// anyway is recorded `cancelled` with its late answer; the stray and the
/// repeated cancel mark nothing else, not even later calls reusing those
/// ids. A call the server drops once cancelled (as the spec asks) and that
/// is still unanswered when the session ends is `cancelled` too, timed to
/// the cancel: the host stopped waiting then, not at the session's end.
#[test]
fn stray_and_repeated_cancels_leave_the_calls_outcomes_right() {
    const LATE: &str = "Tb1Ny5Mu9Iq3Oe7Pw2Ar";
    let late = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"late\"}}],\"structuredContent\":{{\"secret\":\"{LATE}\"}}}}}}\n"
    );
    let echo = |id: u64| {
        format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"echo {id}\"}}]}}}}\n"
        )
    };
    let script = json!({"rules": [
        {"method": "tools/call", "tool": "slow", "do": [{"sleep_ms": 300}, {"raw": late}]},
        {"method": "tools/call", "tool": "echo9", "do": [{"raw": echo(9)}]},
        {"method": "tools/call", "tool": "echo77", "do": [{"raw": echo(77)}]},
        // Drops the call: never answers it.
        {"method": "tools/call", "tool": "obedient", "do": [{"sleep_ms": 1500}]},
    ]});
    let cancel = |id: u64| json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":id,"reason":"user pressed escape"}});
    let run = session("cancels", &script, |host| {
        host.send(&call(9, "slow", json!({})));
        host.send(&cancel(77));
        host.send(&cancel(9));
        host.send(&cancel(9));
        assert!(host.wait_lines(1, Duration::from_secs(5)));
        host.send(&call(9, "echo9", json!({})));
        host.send(&call(77, "echo77", json!({})));
        assert!(host.wait_lines(3, Duration::from_secs(5)));
        host.send(&call(12, "obedient", json!({})));
        // Not waits for an event: time kept apart, so the call runs a
        // while before its cancel (its duration is checked) and the
        // cancel comes clearly before the end of the session.
        std::thread::sleep(Duration::from_millis(100));
        host.send(&cancel(12));
        std::thread::sleep(Duration::from_millis(50));
        // Ends the session while the server still holds the call.
        host.close_stdin();
    });

    run.assert_relayed(format!("{late}{}{}", echo(9), echo(77)).as_bytes());
    run.assert_not_stored(&[LATE]);
    assert_eq!(run.steps().len(), 8, "{:#}", run.doc);

    let (_, slow) = run.call("slow");
    assert_eq!(slow["outcome"], "cancelled", "{slow}");
    assert_eq!(slow["isError"], false);
    assert_eq!(
        slow["output"]["content"][0]["text"], "late",
        "the late answer is kept"
    );
    assert!(slow["durationMs"].as_f64() >= Some(250.0), "{slow}");
    for tool in ["echo9", "echo77"] {
        let (_, step) = run.call(tool);
        assert_eq!(step["outcome"], "answered", "{tool}: {step}");
    }

    let (_, obedient) = run.call("obedient");
    assert_eq!(obedient["outcome"], "cancelled", "{obedient}");
    assert_eq!(obedient["output"], Value::Null);
    let took = obedient["durationMs"].as_f64().unwrap_or(-1.0);
    assert!(
        (50.0..1000.0).contains(&took),
        "timed to the cancel: {obedient}"
    );
    assert_eq!(run.doc["finish"]["metrics"]["toolCalls"], 4);
    assert_eq!(run.doc["finish"]["metrics"]["errors"], 0);
}

/// Envelopes spelled the way every JSON parser reads alike: keys with escapes (`"\u0069d"`, `"m\u0065thod"`, `"r\u0065sult"`),
/// an id longer than the scanner's streaming capture (1 KiB), a duplicate
/// `"id"` key (the last wins). Each call is recorded as answered, and when
/// the server exits after the last answer, the host gets no second answer
/// for an id that was already answered.
#[test]
fn escaped_long_and_duplicate_envelopes_are_the_same_envelopes() {
    let long_id = format!("\"{}\"", "L".repeat(2000));
    let escaped_call = "{\"jsonrpc\":\"2.0\",\"\\u0069d\":1,\"m\\u0065thod\":\"tools/call\",\"params\":{\"name\":\"esc\",\"arguments\":{\"n\":1}}}\n";
    let long_call = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{long_id},\"method\":\"tools/call\",\"params\":{{\"name\":\"long\",\"arguments\":{{\"n\":2}}}}}}\n"
    );
    let duplicate_call = "{\"jsonrpc\":\"2.0\",\"id\":30,\"method\":\"tools/call\",\"params\":{\"name\":\"dup\",\"arguments\":{\"n\":3}},\"id\":3}\n";
    // An answer whose text is `t`, `head` spelling its envelope up to
    // `"result":`, `tail` after the result.
    let answer_line = |head: &str, t: &str, tail: &str| {
        format!("{head}{{\"content\":[{{\"type\":\"text\",\"text\":\"{t}\"}}]}}{tail}}}\n")
    };
    let esc_answer = answer_line("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":", "esc", "");
    let long_answer = answer_line(
        &format!("{{\"jsonrpc\":\"2.0\",\"id\":{long_id},\"result\":"),
        "long",
        "",
    );
    let dup_answer = answer_line(
        "{\"jsonrpc\":\"2.0\",\"id\":30,\"result\":",
        "dup",
        ",\"id\":3",
    );
    let last_answer = answer_line(
        "{\"jsonrpc\":\"2.0\",\"\\u0069d\":4,\"r\\u0065sult\":",
        "last",
        "",
    );
    let script = json!({"rules": [
        answer("esc", &esc_answer),
        // The peer (like serde_json's derive) refuses a duplicate key, so
        // the dup call is answered along with the long one, after it.
        answer("long", &format!("{long_answer}{dup_answer}")),
        answer("last", &last_answer),
        {"method": "tools/call", "tool": "quit", "do": [{"exit": 0}]},
    ]});
    let run = session_in("escaped-envelopes", &script, |host, home| {
        host.send(&json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"it","version":"1"}}}));
        assert!(host.wait_lines(1, Duration::from_secs(10)));
        host.send_raw(escaped_call.as_bytes());
        host.send_raw(duplicate_call.as_bytes());
        host.send_raw(long_call.as_bytes());
        assert!(
            host.wait_lines(4, Duration::from_secs(10)),
            "{}\n{}",
            String::from_utf8_lossy(&host.stdout_so_far()),
            host.stderr_so_far()
        );
        host.send(&call(4, "last", json!({"n": 4})));
        assert!(host.wait_lines(5, Duration::from_secs(10)));
        // The server exits once the four calls are on record (a busy
        // machine may take a while to write them).
        wait_until("the four calls on record", Duration::from_secs(60), || {
            recorded_responses(home) >= 4
        });
        host.send(&call(5, "quit", json!({})));
        assert!(
            host.wait_exit(Duration::from_secs(10)),
            "the proxy follows its server out"
        );
    });
    let relayed = String::from_utf8_lossy(&run.relayed).into_owned();
    let after_init = relayed.split_once('\n').map_or("", |(_, rest)| rest);
    let answers = format!("{esc_answer}{long_answer}{dup_answer}{last_answer}");
    let added = after_init
        .strip_prefix(&answers)
        .unwrap_or_else(|| panic!("the server's answers, as sent, first:\n{after_init}"));
    // The proxy answers only the call the server left pending when it
    // exited (5), never one it already answered.
    assert_eq!(added.lines().count(), 1, "{added}");
    assert!(
        added.starts_with("{\"jsonrpc\":\"2.0\",\"id\":5,"),
        "{added}"
    );
    for tool in ["esc", "long", "dup", "last"] {
        let (selected, response) = run.call(tool);
        assert_eq!(response["outcome"], "answered", "{tool}: {response:#}");
        assert_eq!(
            response["output"]["content"][0]["text"], tool,
            "{tool}: {response:#}"
        );
        assert!(selected["input"]["n"].is_number(), "{tool}: {selected:#}");
    }
    let (_, dup) = run.call("dup");
    assert_eq!(dup["requestId"], 3, "the last id wins: {dup:#}");
    assert_ne!(run.doc["finish"]["lossy"], true, "{:#}", run.doc);
}

/// How many calls the latest run holds an answer for so far.
fn recorded_responses(home: &TempDir) -> usize {
    let (_, out, _) = bir_cmd(home, &["runs", "export", "latest"]);
    serde_json::from_str::<Value>(&out).map_or(0, |doc| {
        doc["steps"].as_array().map_or(0, |steps| {
            steps
                .iter()
                .filter(|s| s["type"] == "tool_response")
                .count()
        })
    })
}

/// What the recorder learns from `initialize`
/// (the server's instructions, serverInfo and capabilities, the client's
/// clientInfo and capabilities) and a call's envelope (the tool name, the
/// request id, `_meta["claudecode/toolUseId"]`) pass the redactor like the
/// payloads: none of their secrets is stored, shown or logged.
#[test]
fn what_initialize_and_the_envelope_carry_is_redacted_too() {
    const INSTRUCTIONS: &str = "ghp_Q8w3Er5Ty7Ui9Op1As3Df5Gh7Jk9Lz2Xc4Vb";
    const SERVER_TOKEN: &str = "Tz4Kq8Wm2Xn6Rb0Lv3Jc";
    const CAPABILITY: &str = "Hy5Gt1Fr9De3Sw7Aq2Zx";
    const CLIENT_KEY: &str = "Mk8Nj2Bh6Vg0Cf4Xd9Sz";
    const CLIENT_CAP: &str = "Pl3Ok7Ij1Uh5Yg9Tf2Rd";
    const TOOL: &str = "ghp_Z9x8C7v6B5n4M3a2S1d0F9g8H7j6K5l4P3o2";
    const REQUEST_ID: &str = "sk-ant-api03-Wq2Er4Ty6Ui8Op0As2Df4Gh6Jk8Lz0Xc2Vb4Nm6Qw8Er0Ty2Ui4";
    const TOOL_USE: &str = "xoxb-123456789012-1234567890123-Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8";
    let script = json!({"rules": [
        {"method": "initialize", "do": [{"reply": {
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}, "experimental": {"token": CAPABILITY}},
            "serverInfo": {"name": "peer", "version": "1", "token": SERVER_TOKEN},
            "instructions": format!("Use the deploy token {INSTRUCTIONS} for pushes."),
        }}]},
    ]});
    let run = session("initialize-secrets", &script, |host| {
        host.send(
            &json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
            "protocolVersion":"2025-11-25",
            "capabilities":{"experimental":{"apiKey": CLIENT_CAP}},
            "clientInfo":{"name":"it","version":"1","apiKey": CLIENT_KEY}}}),
        );
        assert!(host.wait_lines(1, Duration::from_secs(10)));
        host.send(
            &json!({"jsonrpc":"2.0","id":REQUEST_ID,"method":"tools/call","params":{
            "name": TOOL, "arguments": {"n": 1},
            "_meta": {"claudecode/toolUseId": TOOL_USE}}}),
        );
        assert!(host.wait_lines(2, Duration::from_secs(10)));
    });
    run.assert_not_stored(&[
        INSTRUCTIONS,
        SERVER_TOKEN,
        CAPABILITY,
        CLIENT_KEY,
        CLIENT_CAP,
        TOOL,
        REQUEST_ID,
        TOOL_USE,
    ]);
    let server = &run.doc["servers"][0];
    assert_eq!(server["serverInfo"]["name"], "peer", "{server:#}");
    assert!(
        server["instructions"]
            .as_str()
            .is_some_and(|i| i.starts_with("Use the deploy token")),
        "{server:#}"
    );
    assert_eq!(run.steps().len(), 2, "{:#}", run.doc);
}
