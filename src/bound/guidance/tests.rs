//! The guide's decision table, case by case, on plain hook payloads.

use super::*;

fn step(id: &str, tool: &str, args: Value) -> GuideStep {
    GuideStep {
        id: id.into(),
        tool: tool.into(),
        label: tool.trim_start_matches("mcp__").replace("__", "/"),
        args,
        slots: Vec::new(),
        pins: BTreeMap::new(),
        group: None,
        expect_error: false,
        needs_user: false,
    }
}

/// echo (exact only), get-sum (`/a` is a parameter slot pinned to 2),
/// then a Bash step.
fn guide() -> Guide {
    let mut sum = step("s2", "mcp__everything__get-sum", json!({"a": 2, "b": 3}));
    sum.slots = vec!["/a".into()];
    sum.pins.insert("/a".into(), json!(2));
    Guide {
        schema: SCHEMA.into(),
        scenario: "demo.scenario.json".into(),
        project: "/p".into(),
        session: None,
        armed_at: "2026-12-02T00:00:00Z".into(),
        no_pin: false,
        trigger: None,
        max_extra: 2,
        max_nudges: 1,
        steps: vec![
            step("s1", "mcp__everything__echo", json!({"message": "hello"})),
            sum,
            step("s3", "Bash", json!({"command": "echo done"})),
        ],
        read_only_tools: vec!["mcp__everything__get-tiny-image".into()],
        progress: Progress::default(),
    }
}

/// A guide the session `sess` has claimed.
fn active() -> Guide {
    let mut g = guide();
    let v = on_prompt(&mut g, &prompt("sess", "do the thing"));
    assert!(v.answer.is_some());
    g
}

fn prompt(session: &str, text: &str) -> Value {
    json!({"session_id": session, "hook_event_name": "UserPromptSubmit", "prompt": text,
           "permission_mode": "default", "cwd": "/p"})
}

fn pre(tool: &str, input: Value, mode: &str) -> Value {
    json!({"session_id": "sess", "hook_event_name": "PreToolUse", "tool_name": tool,
           "tool_input": input, "tool_use_id": "toolu_1", "permission_mode": mode})
}

/// Recorded space for the tests: a "secret" becomes its placeholder.
fn redact(v: &Value) -> Value {
    serde_json::from_str(&v.to_string().replace("sk-live-123", "[REDACTED:key]"))
        .expect("still JSON")
}

fn decide(g: &mut Guide, payload: &Value, perms: &Permissions) -> Verdict {
    on_pre(g, payload, perms, &redact)
}

/// `PreToolUse` of `tool` with no permission rules.
fn on(g: &mut Guide, tool: &str, input: Value, mode: &str) -> Verdict {
    decide(g, &pre(tool, input, mode), &none())
}

/// `PreToolUse` of get-sum with `a` and `b`.
fn sum(g: &mut Guide, a: u32, b: u32, mode: &str) -> Verdict {
    on(g, "mcp__everything__get-sum", json!({"a": a, "b": b}), mode)
}

/// `PreToolUse` of echo with `message`.
fn echo(g: &mut Guide, message: &str, mode: &str) -> Verdict {
    on(
        g,
        "mcp__everything__echo",
        json!({"message": message}),
        mode,
    )
}

fn answer(v: &Verdict) -> Value {
    serde_json::from_str(v.answer.as_deref().expect("an answer")).expect("JSON")
}

fn none() -> Permissions {
    Permissions::default()
}

/// Runs the exact echo so that get-sum is next.
fn at_sum() -> Guide {
    let mut g = active();
    let v = echo(&mut g, "hello", "default");
    assert_eq!(v.answer, None);
    g
}

#[test]
fn the_first_prompt_in_the_project_claims_the_guide_and_gets_the_outline() {
    let mut g = guide();
    // A background agent's notification is not the user's prompt.
    let v = on_prompt(&mut g, &prompt("sess", "<task-notification>x"));
    assert_eq!(v, Verdict::default());
    let v = on_prompt(&mut g, &prompt("sess", "go"));
    assert_eq!(g.session.as_deref(), Some("sess"));
    assert_eq!(g.progress.phase, Phase::Active);
    let a = answer(&v);
    assert_eq!(a["hookSpecificOutput"]["hookEventName"], "UserPromptSubmit");
    let text = a["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .expect("text");
    assert!(text.contains("[s1] mcp__everything__echo {\"message\":\"hello\"}"));
    assert!(text.contains("3. [s3] Bash"));
    assert_eq!(v.note.expect("a note")["action"], "started");
    // Another session in the same project is left alone.
    let v = on_prompt(&mut g, &prompt("other", "go"));
    assert_eq!(v, Verdict::default());
    assert_eq!(g.session.as_deref(), Some("sess"));
    // A guide armed for one session (--session) waits for it.
    let mut g = guide();
    g.session = Some("mine".into());
    assert_eq!(on_prompt(&mut g, &prompt("sess", "go")), Verdict::default());
    assert!(on_prompt(&mut g, &prompt("mine", "go")).answer.is_some());
}

#[test]
fn an_exact_match_passes_untouched() {
    let mut g = active();
    // The secret compares as its placeholder (recorded space).
    g.steps[0].args = json!({"message": "[REDACTED:key]"});
    let v = echo(&mut g, "sk-live-123", "default");
    assert_eq!(v.answer, None, "no answer fields at all");
    assert_eq!(v.pin, None);
    assert_eq!(v.note.expect("note")["action"], "followed");
    assert_eq!(g.progress.followed, 1);
    assert_eq!(g.progress.done, vec!["s1".to_owned()]);
}

#[test]
fn a_slot_difference_is_pinned_and_asks_when_nothing_proves_no_prompt() {
    let mut g = at_sum();
    let v = sum(&mut g, 40, 3, "default");
    let a = answer(&v);
    let out = &a["hookSpecificOutput"];
    assert_eq!(out["permissionDecision"], "ask");
    assert_eq!(out["updatedInput"], json!({"a": 2, "b": 3}));
    assert!(
        out["permissionDecisionReason"]
            .as_str()
            .expect("reason")
            .contains("step s2 of the recorded procedure (everything/get-sum); arguments set to the recorded values: /a = 2")
    );
    assert_eq!(v.pin, Some(("toolu_1".into(), json!({"a": 2, "b": 3}))));
    let note = v.note.expect("note");
    assert_eq!(note["action"], "pinned");
    assert_eq!(note["decision"], "ask");
    assert_eq!(note["changed"], json!(["/a"]));
    assert_eq!((g.progress.pinned, g.progress.asked), (1, 1));
}

#[test]
fn allow_only_where_the_call_provably_would_not_prompt() {
    let decision = |mode: &str, perms: Permissions, needs_user: bool| {
        let mut g = at_sum();
        g.steps[1].needs_user = needs_user;
        let v = decide(
            &mut g,
            &pre("mcp__everything__get-sum", json!({"a": 1, "b": 3}), mode),
            &perms,
        );
        answer(&v)["hookSpecificOutput"]["permissionDecision"]
            .as_str()
            .expect("a decision")
            .to_owned()
    };
    let rules = |allow: &[&str], ask: &[&str], deny: &[&str]| Permissions {
        allow: allow.iter().map(|s| s.to_string()).collect(),
        ask: ask.iter().map(|s| s.to_string()).collect(),
        deny: deny.iter().map(|s| s.to_string()).collect(),
    };
    // No rule, in every mode that may prompt: ask.
    for mode in ["default", "acceptEdits", "auto", "dontAsk", ""] {
        assert_eq!(decision(mode, none(), false), "ask", "{mode}");
    }
    // Bypass mode: the user would not have been asked.
    assert_eq!(decision("bypassPermissions", none(), false), "allow");
    // An allow rule for the tool, the server, or the server's wildcard.
    for rule in [
        "mcp__everything__get-sum",
        "mcp__everything",
        "mcp__everything__*",
    ] {
        assert_eq!(
            decision("default", rules(&[rule], &[], &[]), false),
            "allow",
            "{rule}"
        );
    }
    // ... unless an ask or deny rule names it, even in bypass mode.
    let both = rules(&["mcp__everything"], &["mcp__everything__get-sum"], &[]);
    assert_eq!(decision("default", both.clone(), false), "ask");
    assert_eq!(decision("bypassPermissions", both, false), "ask");
    let denied = rules(&["mcp__everything__get-sum"], &[], &["mcp__everything"]);
    assert_eq!(decision("default", denied, false), "ask");
    // Another tool's rule, or a rule with a specifier, proves nothing.
    assert_eq!(
        decision(
            "default",
            rules(&["mcp__everything__echo"], &[], &[]),
            false
        ),
        "ask"
    );
    assert_eq!(
        decision("default", rules(&["mcp__every"], &[], &[]), false),
        "ask"
    );
    assert_eq!(
        decision(
            "default",
            rules(&["mcp__everything__get-sum(a:1)"], &[], &[]),
            false
        ),
        "ask"
    );
    // A tool that needs the user is never allowed by bir.
    assert_eq!(decision("bypassPermissions", none(), true), "ask");
    assert_eq!(
        decision("default", rules(&["mcp__everything"], &[], &[]), true),
        "ask"
    );
}

#[test]
fn plan_mode_gets_advice_and_never_a_decision_or_a_rewrite() {
    let mut g = at_sum();
    let v = sum(&mut g, 40, 3, "plan");
    let text = v.answer.clone().expect("advice");
    assert!(!text.contains("permissionDecision"));
    assert!(!text.contains("updatedInput"));
    assert!(text.contains("additionalContext"));
    assert!(text.contains(r#"{\"a\":2,\"b\":3}"#), "{text}");
    assert_eq!(v.pin, None);
    assert_eq!(v.note.expect("note")["action"], "advised");
    // The step stays expected: after plan mode the real call comes.
    assert_eq!(g.progress.done, vec!["s1".to_owned()]);
    assert_eq!(g.progress.pinned, 0);
    // So does an exact match, and nothing hands over in plan mode.
    let v = sum(&mut g, 2, 3, "plan");
    assert_eq!(v.answer, None);
    assert_eq!(v.note.expect("note")["action"], "planned");
    let v = on(&mut g, "Bash", json!({"command": "ls"}), "plan");
    assert_eq!(v, Verdict::default());
    assert_eq!(g.progress.done, vec!["s1".to_owned()]);
    assert_eq!((g.progress.followed, g.progress.phase), (1, Phase::Active));
    // A later step's tool with other arguments: nothing (plan mode has no
    // order, and no handover).
    let v = on(
        &mut g,
        "Bash",
        json!({"command": "echo done", "x": 1}),
        "plan",
    );
    assert_eq!(v, Verdict::default());
    // --no-pin advises outside plan mode too, and the step counts as done.
    let mut g = at_sum();
    g.no_pin = true;
    let v = sum(&mut g, 40, 3, "bypassPermissions");
    assert!(!v.answer.expect("advice").contains("permissionDecision"));
    assert_eq!(g.progress.done.len(), 2);
}

#[test]
fn extra_read_only_calls_pass_up_to_the_limit() {
    let mut g = at_sum();
    for (tool, input) in [
        ("Read", json!({"file_path": "/p/README.md"})),
        ("mcp__everything__get-tiny-image", json!({})),
    ] {
        let v = on(&mut g, tool, input, "default");
        assert_eq!(v.answer, None, "{tool}");
        assert_eq!(v.note.expect("note")["action"], "extra");
    }
    assert_eq!(g.progress.extras, 2);
    assert_eq!(g.progress.phase, Phase::Active);
    // Over the limit (2 here): the model has wandered off.
    let v = on(&mut g, "Grep", json!({"pattern": "x"}), "default");
    assert!(v.answer.expect("handover").contains("additionalContext"));
    assert_eq!(g.progress.phase, Phase::HandedOver);
}

#[test]
fn anything_else_hands_over_once_with_context_and_no_decision() {
    // A tool the procedure does not use (Bash is not read-only).
    let mut g = at_sum();
    let v = on(&mut g, "Bash", json!({"command": "rm -rf x"}), "default");
    let a = answer(&v);
    let out = &a["hookSpecificOutput"];
    assert!(out.get("permissionDecision").is_none());
    assert!(out.get("updatedInput").is_none());
    let text = out["additionalContext"].as_str().expect("one line");
    assert!(
        text.contains("stopped following the recorded procedure at step s2"),
        "{text}"
    );
    assert!(!text.contains('\n'));
    assert_eq!(g.progress.handed_over_at.as_deref(), Some("s2"));
    let note = v.note.expect("note");
    assert_eq!(note["action"], "handover");
    assert_eq!(note["step"], "s2");
    // Disarmed: nothing more, not even for the expected call.
    let v = sum(&mut g, 2, 3, "default");
    assert_eq!(v, Verdict::default());
    assert_eq!(on_stop(&mut g, &stop(false)), Verdict::default());
    // The right tool with other arguments outside the slots.
    let mut g = at_sum();
    let v = sum(&mut g, 2, 30, "bypassPermissions");
    assert!(
        answer(&v)["hookSpecificOutput"]["additionalContext"]
            .as_str()
            .expect("text")
            .contains("(at /b)")
    );
    assert_eq!(g.progress.phase, Phase::HandedOver);
    // A later step's tool out of order.
    let mut g = at_sum();
    on(&mut g, "Bash", json!({"command": "echo done"}), "default");
    assert_eq!(g.progress.phase, Phase::HandedOver);
}

fn stop(active: bool) -> Value {
    json!({"session_id": "sess", "hook_event_name": "Stop", "stop_hook_active": active,
           "permission_mode": "default"})
}

#[test]
fn stop_nudges_at_most_once_and_names_the_next_step() {
    let mut g = at_sum();
    assert_eq!(on_stop(&mut g, &stop(true)), Verdict::default());
    let mut planning = stop(false);
    planning["permission_mode"] = json!("plan");
    assert_eq!(on_stop(&mut g, &planning), Verdict::default());
    let v = on_stop(&mut g, &stop(false));
    let a = answer(&v);
    assert_eq!(a["decision"], "block");
    let reason = a["reason"].as_str().expect("reason");
    assert!(
        reason.contains("step s2, mcp__everything__get-sum"),
        "{reason}"
    );
    assert!(reason.contains("2 of 3 steps left"), "{reason}");
    assert_eq!(on_stop(&mut g, &stop(false)), Verdict::default());
    assert_eq!(g.progress.nudges, 1);
    // A finished guide never nudges.
    let mut g = at_sum();
    sum(&mut g, 2, 3, "default");
    on(&mut g, "Bash", json!({"command": "echo done"}), "default");
    assert_eq!(g.progress.phase, Phase::Done);
    assert_eq!(on_stop(&mut g, &stop(false)), Verdict::default());
}

#[test]
fn steps_of_one_group_match_in_any_order() {
    let mut g = active();
    g.steps[0].group = Some(1);
    g.steps[1].group = Some(1);
    let v = sum(&mut g, 2, 3, "default");
    assert_eq!(v.answer, None);
    assert_eq!(g.progress.done, vec!["s2".to_owned()]);
    echo(&mut g, "hello", "default");
    assert_eq!(g.progress.done.len(), 2);
    assert_eq!(g.progress.phase, Phase::Active);
}

#[test]
fn differences_only_in_slots_no_pin_fills_count_as_followed() {
    // A binding slot (`${step:…}`): the model's live value stands.
    let mut g = at_sum();
    g.steps[1].args = json!({"a": "${step:s1:/content/0/text}", "b": 3});
    g.steps[1].pins.clear();
    let v = sum(&mut g, 7, 3, "default");
    assert_eq!(v.answer, None);
    assert_eq!(v.note.expect("note")["action"], "followed");
}

#[test]
fn subagents_other_sessions_and_idle_guides_are_left_alone() {
    let mut g = at_sum();
    let mut p = pre("Bash", json!({"command": "x"}), "default");
    p["agent_id"] = json!("agent-1");
    assert_eq!(decide(&mut g, &p, &none()), Verdict::default());
    let mut p = pre("Bash", json!({"command": "x"}), "default");
    p["session_id"] = json!("other");
    assert_eq!(decide(&mut g, &p, &none()), Verdict::default());
    let mut armed = guide();
    let p = pre("Bash", json!({"command": "x"}), "default");
    assert_eq!(decide(&mut armed, &p, &none()), Verdict::default());
    assert_eq!(g.progress.phase, Phase::Active);
}

#[test]
fn pointers() {
    let mut v = json!({"a": {"b/c": 1, "d": [1, 2]}});
    assert!(set_pointer(&mut v, "/a/b~1c", json!(5)));
    assert!(set_pointer(&mut v, "/a/d/1", json!(9)));
    assert!(!set_pointer(&mut v, "/a/d/7", json!(9)));
    assert!(!set_pointer(&mut v, "/x/y", json!(9)));
    assert_eq!(v, json!({"a": {"b/c": 5, "d": [1, 9]}}));
    remove_pointer(&mut v, "/a/d/0");
    remove_pointer(&mut v, "/a/b~1c");
    assert_eq!(v, json!({"a": {"d": [null, 9]}}));
    let mut out = Vec::new();
    differing(
        &json!({"a": 1, "b": [1, 2]}),
        &json!({"a": 1, "b": [1, 3], "c": 0}),
        "",
        &mut out,
    );
    assert_eq!(out, vec!["/b/1".to_owned(), "/c".to_owned()]);
}

#[test]
fn a_trigger_lets_only_a_matching_prompt_start_the_guide() {
    let mut g = guide();
    g.trigger = Some("deploy|release".into());
    assert_eq!(
        on_prompt(&mut g, &prompt("sess", "fix the typo")),
        Verdict::default()
    );
    assert_eq!(
        (g.progress.phase, g.session.as_deref()),
        (Phase::Armed, None)
    );
    assert!(
        on_prompt(&mut g, &prompt("sess", "Please RELEASE it"))
            .answer
            .is_some()
    );
    assert_eq!(g.progress.phase, Phase::Active);
    // Once active, every prompt of the session gets the steps left.
    assert!(
        on_prompt(&mut g, &prompt("sess", "and then?"))
            .answer
            .is_some()
    );
    // Not a regex: keywords that must all appear.
    assert!(trigger_matches("ticket (42", "comment on TICKET (42 now"));
    assert!(!trigger_matches("ticket (42", "comment on ticket 42"));
}

/// The step and reason of a handover's note.
fn handover(v: Verdict) -> (String, String) {
    let note = v.note.expect("a handover");
    assert_eq!(note["action"], "handover");
    let get = |k: &str| note[k].as_str().expect("a string").to_owned();
    (get("step"), get("reason"))
}

fn post(event: &str, id: &str) -> Value {
    json!({"session_id": "sess", "hook_event_name": event, "tool_use_id": id,
           "error": "boom\nmore"})
}

#[test]
fn a_steps_call_that_fails_or_never_runs_ends_the_guide() {
    // It ran and succeeded, as recorded: nothing more to say.
    let mut g = active();
    echo(&mut g, "hello", "default");
    assert_eq!(
        g.progress.in_flight,
        vec![("toolu_1".to_owned(), "s1".to_owned())]
    );
    let v = on_post(&mut g, &post("PostToolUse", "toolu_1"));
    assert_eq!((v.note, v.answer), (None, None));
    assert!(g.progress.in_flight.is_empty());
    // Not a step's call (or already finished): nothing.
    assert_eq!(
        on_post(&mut g, &post("PostToolUseFailure", "toolu_1")),
        Verdict::default()
    );
    assert_eq!(g.progress.phase, Phase::Active);

    // It failed where the recording succeeded.
    let mut g = active();
    echo(&mut g, "hello", "default");
    let v = on_post(&mut g, &post("PostToolUseFailure", "toolu_1"));
    let note = v.note.expect("a handover");
    assert_eq!(
        (note["action"].as_str(), note["step"].as_str()),
        (Some("handover"), Some("s1"))
    );
    assert!(
        note["reason"]
            .as_str()
            .expect("why")
            .contains("failed where the recorded call succeeded: \"boom\"")
    );
    assert_eq!(g.progress.phase, Phase::HandedOver);
    // ... and the recording failed where it now succeeds.
    let mut g = active();
    g.steps[0].expect_error = true;
    echo(&mut g, "hello", "default");
    assert!(
        on_post(&mut g, &post("PostToolUse", "toolu_1"))
            .note
            .is_some()
    );
    assert_eq!(g.progress.phase, Phase::HandedOver);

    // Asked and refused: the batch lists the call, no PostToolUse came.
    let mut g = at_sum();
    on_post(&mut g, &post("PostToolUse", "toolu_1"));
    sum(&mut g, 9, 3, "default");
    assert_eq!(g.progress.asked, 1);
    let batch = json!({"session_id": "sess", "hook_event_name": "PostToolBatch",
                       "tool_calls": [{"tool_use_id": "toolu_0"}, {"tool_use_id": "toolu_1"}]});
    let v = on_batch(&mut g, &batch);
    let (step, reason) = handover(v);
    assert_eq!(step, "s2");
    assert!(reason.contains("did not run"), "{reason}");
    assert_eq!(
        g.progress.done,
        vec!["s1".to_owned()],
        "the refused step is not done"
    );
    assert_eq!(g.progress.handed_over_at.as_deref(), Some("s2"));
    // No nudge to try again what the user refused.
    assert_eq!(on_stop(&mut g, &stop(false)), Verdict::default());
    // The last step refused: a finished guide hands over too.
    let mut g = at_sum();
    g.steps.truncate(2);
    on_post(&mut g, &post("PostToolUse", "toolu_1"));
    sum(&mut g, 9, 3, "default");
    assert_eq!(g.progress.phase, Phase::Done);
    assert!(on_batch(&mut g, &batch).note.is_some());
    assert_eq!(g.progress.phase, Phase::HandedOver);
}

#[test]
fn a_pin_the_server_did_not_get_ends_the_guide_at_its_step() {
    let mut g = at_sum();
    on_post(&mut g, &post("PostToolUse", "toolu_1"));
    sum(&mut g, 9, 3, "bypassPermissions");
    assert_eq!(g.progress.done, vec!["s1".to_owned(), "s2".to_owned()]);
    // The host's PostToolUse may come before the proxy's report.
    on_post(&mut g, &post("PostToolUse", "toolu_1"));
    let v = pin_not_applied(&mut g, "toolu_1");
    let (step, reason) = handover(v);
    assert_eq!(step, "s2");
    assert!(reason.starts_with("pin-not-applied"), "{reason}");
    assert_eq!(
        g.progress.done,
        vec!["s1".to_owned()],
        "s2 did not run as recorded"
    );
    assert_eq!(g.progress.phase, Phase::HandedOver);
    assert!(g.progress.in_flight.is_empty());
    // Once over, later reports change nothing.
    assert_eq!(pin_not_applied(&mut g, "toolu_1"), Verdict::default());
    assert_eq!(
        on_post(&mut g, &post("PostToolUse", "toolu_1")),
        Verdict::default()
    );
}
