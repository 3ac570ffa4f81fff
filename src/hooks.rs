//! `bir-hooks <Event>`: the Claude Code hook receiver.
//!
//! Claude Code runs it as `sh -c '<path>/bir-hooks <Event>'` with the event's
//! JSON on stdin, on every tool call (twice), so it is built to be cheap: no
//! redactor, no logger unless `RUST_LOG` asks, one loopback POST. It
//!
//! 1. reads the payload (at most [`MAX_PAYLOAD`]; a larger one is dropped),
//! 2. finds the recorder daemon from its discovery file, or starts it
//!    (`daemon::client`), within a budget,
//! 3. posts the payload unchanged to `POST /hook/<Event>`,
//! 4. prints the daemon's answer if there is one, it is JSON, and the event
//!    allows it. The daemon answers only a `PreToolUse` that asked for
//!    call-id injection (`?correlate=inject`, sent when the hook command
//!    says `--correlate inject` or `BIR_CORRELATE=inject` is set, and not
//!    `--no-correlation`): `updatedInput` with `__bir_call_id__`, never a
//!    permission decision (`bound::answer`).
//!
//! An armed guide (`bir guide`) answers too: `UserPromptSubmit` (the
//! outline), `PreToolUse` (pins, handover) and `Stop` (one nudge); for
//! `PreToolUse` the hook tells the daemon where the session's settings
//! live (`daemon::armed_guides`).
//!
//! Invariants: it always exits 0; any trouble (no home, no daemon, a slow
//! daemon, a bad answer) ends it silently — the session goes on unrecorded
//! rather than disturbed. It never prints raw text for `UserPromptSubmit`
//! or `SessionStart` (their stdout becomes model context) — only a guide's
//! JSON `additionalContext` at `UserPromptSubmit` — nor anything for
//! `WorktreeCreate` (its stdout replaces the worktree path). Unknown events are forwarded:
//! the daemon keeps what it does not understand.

use argh::FromArgs;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

use crate::bound::Correlation;
use crate::bound::hosts::Host;
use crate::cli::{Exit, Role, parse_args, print_version};
use crate::daemon::client;
use crate::error::ExitStatus;

/// Receive a Claude Code hook event: `bir-hooks <Event>` with the event's
/// JSON on stdin. The event goes to the recorder daemon (started on demand);
/// the hook always exits 0 and never disturbs the session.
#[derive(FromArgs, Debug)]
pub(crate) struct HooksArgs {
    /// print the version and exit
    #[argh(switch)]
    pub version: bool,

    /// the hook event name and any further arguments
    #[argh(positional, greedy)]
    pub rest: Vec<String>,
}

/// The most of a hook payload we forward (the daemon's `/hook` body cap).
const MAX_PAYLOAD: usize = crate::daemon::MAX_HOOK_PAYLOAD;

/// How long a post to a daemon that is already running may take: a hook
/// is paid on every tool call, so a daemon slower than this loses the event
/// rather than the user waiting.
const POST_DEADLINE: Duration = Duration::from_millis(500);
/// How long to wait for a daemon we start.
const START_BUDGET: Duration = Duration::from_millis(400);
/// How long `SessionStart` and `SessionEnd` may wait for a daemon they
/// start: once a session each, and with HTTP hooks they are the only hooks
/// that start it (a session whose other hooks found no daemon is recovered
/// from its transcript when `SessionEnd` brings one up).
const SESSION_EDGE_START_BUDGET: Duration = Duration::from_millis(1300);
/// `SessionEnd` hooks share 1.5 s in Claude Code: everything must fit.
const SESSION_END_TOTAL: Duration = Duration::from_millis(1400);

pub(crate) fn main(args: &[String]) -> Exit {
    let (host, args) = host_flag(args);
    // A hook must exit 0 even when called with arguments we do not know.
    let parsed: Option<HooksArgs> = parse_args(Role::Hooks.program_name(), &args).ok();
    if parsed.as_ref().is_some_and(|a| a.version) {
        return print_version("bir-hooks");
    }
    let rest = parsed.map(|a| a.rest).unwrap_or_default();
    let event = rest.first().cloned();
    let correlation = correlation(
        &rest[rest.len().min(1)..],
        std::env::var(Correlation::ENV).ok(),
    );
    let mut payload = Vec::new();
    if let Err(err) = std::io::stdin()
        .take(MAX_PAYLOAD as u64 + 1)
        .read_to_end(&mut payload)
    {
        log::debug!("could not read the hook payload: {err}");
        return ExitStatus::Success.into();
    }
    // `bir off` / `BIR_OFF=1`: answer with nothing (read first, so the
    // host's write of the payload never meets a closed pipe).
    if let Some(home) = crate::home::bir_home()
        && std::env::current_dir().is_ok_and(|cwd| crate::switch::recording_off(&home, &cwd))
    {
        return ExitStatus::Success.into();
    }
    let Some(event) = event.filter(|e| valid_event_name(e)) else {
        log::debug!("no usable event name: nothing to forward");
        return ExitStatus::Success.into();
    };
    if payload.len() > MAX_PAYLOAD {
        log::debug!("{event}: payload over {MAX_PAYLOAD} bytes: not forwarded");
        return ExitStatus::Success.into();
    }
    let mut query = Vec::new();
    if let Some(host) = host {
        // Another agent: its payload goes as it is (its adapter in the
        // daemon reads it), and nothing is printed — guides and call-id
        // injection answer in Claude Code's words only.
        query.push(format!("host={}", host.flag()));
        // The agent's process: what binds its MCP servers' proxies, whose
        // environment names no session (`bound::process`).
        if let Some(process) = crate::bound::process::host_process() {
            query.push(format!("host_process={}", process.to_query()));
        }
        let path = format!("/hook/{event}?{}", query.join("&"));
        // Once a session: the host's version, where only its process says it.
        let version = match event.as_str() {
            "SessionStart" => crate::bound::host::version_from_ancestry(host),
            _ => None,
        };
        if let Some(v) = version {
            payload = crate::bound::host::with_host_version(payload, &v, MAX_PAYLOAD);
        }
        // A Gemini subagent's words are in a chat file no hook names.
        if host == Host::Gemini
            && event == "AfterTool"
            && let Some(chat) = crate::bound::host::gemini_subagent_chat(&payload)
        {
            payload = crate::bound::host::with_field(
                payload,
                crate::bound::host::AGENT_CHAT_FIELD,
                &chat,
            );
        }
        let _ = forward(&event, &path, &payload);
        return ExitStatus::Success.into();
    }
    if event == "PreToolUse" {
        if correlation == Correlation::Inject {
            query.push("correlate=inject".to_owned());
        }
        query.extend(settings_dirs_query());
    }
    let path = if query.is_empty() {
        format!("/hook/{event}")
    } else {
        format!("/hook/{event}?{}", query.join("&"))
    };
    if let Some(answer) = forward(&event, &path, &payload)
        && (may_print(&event) || is_prompt_context(&event, &answer))
        && is_json(&answer)
    {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(&answer).and_then(|()| out.flush());
    }
    ExitStatus::Success.into()
}

/// `--host <agent>` (or `--host=<agent>`) before the event name: which
/// agent's hook this is (`bound::hosts`); `None` for Claude Code (no flag,
/// `--host claude`, or an agent bir does not know — then the event is
/// forwarded as Claude Code's, which keeps what it does not understand).
/// The other arguments, as they were.
fn host_flag(args: &[String]) -> (Option<Host>, Vec<String>) {
    let mut host = None;
    let mut rest = Vec::with_capacity(args.len());
    let mut words = args.iter();
    while let Some(arg) = words.next() {
        let named = match arg.as_str() {
            "--host" if rest.is_empty() => words.next().map(String::as_str),
            other if rest.is_empty() => other.strip_prefix("--host="),
            _ => None,
        };
        match named {
            Some(word) => host = Host::parse(word).filter(|h| *h != Host::ClaudeCode),
            None => rest.push(arg.clone()),
        }
    }
    (host, rest)
}

/// Posts the payload to the daemon (starting it if needed); the answer's
/// body when it was a 200 with something in it.
fn forward(event: &str, path: &str, payload: &[u8]) -> Option<Vec<u8>> {
    let start = Instant::now();
    // A guided `Stop` may be answered only once the proxies' reports of
    // its pinned calls are in (`daemon::STOP_PATIENCE`).
    let post_deadline = match event {
        "Stop" => POST_DEADLINE + crate::daemon::STOP_PATIENCE,
        _ => POST_DEADLINE,
    };
    let total = match event {
        "SessionEnd" => SESSION_END_TOTAL,
        "SessionStart" => SESSION_EDGE_START_BUDGET + POST_DEADLINE,
        _ => START_BUDGET + post_deadline,
    };
    let left = || total.checked_sub(start.elapsed()).filter(|d| !d.is_zero());
    let home = crate::home::bir_home()?;
    let first = client::discover(&home).map(|endpoint| {
        let answer = endpoint.post(path, payload, post_deadline.min(total));
        (endpoint, answer)
    });
    let answer = match first {
        Some((_, Ok(answer))) => answer,
        Some((_, Err(err))) if !could_not_connect(&err) => {
            // The daemon took the request (or part of it) and then failed:
            // posting again could record the event twice.
            log::debug!("{event}: daemon did not answer: {err}");
            return None;
        }
        _ => {
            let budget = match event {
                "SessionStart" | "SessionEnd" => left()?.min(SESSION_EDGE_START_BUDGET),
                _ => left()?.min(START_BUDGET),
            };
            let endpoint = client::ensure_running(&home, budget)?;
            match endpoint.post(path, payload, left()?.min(post_deadline)) {
                Ok(answer) => answer,
                Err(err) => {
                    log::debug!("{event}: daemon did not answer: {err}");
                    return None;
                }
            }
        }
    };
    match answer {
        (200, body) if !body.is_empty() => Some(body),
        (200, _) => None,
        (status, _) => {
            log::debug!("{event}: daemon answered {status}");
            None
        }
    }
}

/// The call-id injection mode: the hook command's own arguments
/// (`--correlate MODE`, `--correlate=MODE`, `--no-correlation`, written by
/// `bir install`) win over `BIR_CORRELATE`; the default is passive. An
/// unknown word counts as the default: a hook never fails over it.
fn correlation(args: &[String], env: Option<String>) -> Correlation {
    let mut from_args = None;
    let mut words = args.iter();
    while let Some(arg) = words.next() {
        let mode = match arg.as_str() {
            "--no-correlation" => Some(Correlation::Off),
            "--correlate" => words.next().and_then(|w| Correlation::parse(w)),
            other => other
                .strip_prefix("--correlate=")
                .and_then(Correlation::parse),
        };
        from_args = mode.or(from_args);
    }
    from_args
        .or_else(|| env.as_deref().and_then(Correlation::parse))
        .unwrap_or(Correlation::Passive)
}

fn could_not_connect(err: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        err.kind(),
        ConnectionRefused | ConnectionReset | AddrNotAvailable | NotFound
    )
}

/// Event names go into the request path: letters, digits, `_`, `-` only.
fn valid_event_name(event: &str) -> bool {
    !event.is_empty()
        && event.len() <= 64
        && event
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Whether the host reads this event's stdout as a hook answer (and not as
/// model context or as data).
fn may_print(event: &str) -> bool {
    !matches!(
        event,
        "UserPromptSubmit" | "SessionStart" | "WorktreeCreate"
    )
}

/// A guide's outline at `UserPromptSubmit` (`bound::guidance`): printed
/// because it is JSON the host reads as a hook answer
/// (`hookSpecificOutput.additionalContext`), never as raw text.
fn is_prompt_context(event: &str, answer: &[u8]) -> bool {
    event == "UserPromptSubmit"
        && serde_json::from_slice::<serde_json::Value>(answer).is_ok_and(|v| {
            v["hookSpecificOutput"]["hookEventName"] == "UserPromptSubmit"
                && v["hookSpecificOutput"]["additionalContext"].is_string()
        })
}

/// Where this session's Claude Code keeps its user settings and its
/// managed policy (the hook runs in the session's environment; the daemon
/// may not): the guide reads their permission rules before it may answer
/// `allow` (`daemon::armed_guides`). Query parameters, percent-encoded.
fn settings_dirs_query() -> Vec<String> {
    let user = match std::env::var_os("CLAUDE_CONFIG_DIR") {
        Some(d) if !d.is_empty() => Some(std::path::PathBuf::from(d)),
        _ => home::home_dir().map(|h| h.join(".claude")),
    };
    let managed = match std::env::var_os("BIR_CLAUDE_MANAGED_DIR") {
        Some(d) if !d.is_empty() => std::path::PathBuf::from(d),
        _ if cfg!(target_os = "macos") => {
            std::path::PathBuf::from("/Library/Application Support/ClaudeCode")
        }
        _ => std::path::PathBuf::from("/etc/claude-code"),
    };
    let encode = |p: &std::path::Path| {
        crate::codec::percent_encode(p.as_os_str().as_encoded_bytes(), true, false)
    };
    let mut query: Vec<String> = user
        .iter()
        .map(|u| format!("claude_config={}", encode(u)))
        .collect();
    query.push(format!("claude_managed={}", encode(&managed)));
    query
}

fn is_json(answer: &[u8]) -> bool {
    serde_json::from_slice::<serde::de::IgnoredAny>(answer).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_flag_comes_before_the_event() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            host_flag(&args(&["--host", "gemini", "BeforeTool"])),
            (Some(Host::Gemini), args(&["BeforeTool"]))
        );
        assert_eq!(
            host_flag(&args(&["--host=codex", "PreToolUse"])),
            (Some(Host::Codex), args(&["PreToolUse"]))
        );
        assert_eq!(
            host_flag(&args(&["PreToolUse", "--correlate", "inject"])),
            (None, args(&["PreToolUse", "--correlate", "inject"]))
        );
        assert_eq!(
            host_flag(&args(&["--host", "claude", "Stop"])),
            (None, args(&["Stop"]))
        );
    }

    #[test]
    fn event_names() {
        assert!(valid_event_name("PreToolUse"));
        assert!(valid_event_name("Bogus_Event-2"));
        assert!(!valid_event_name(""));
        assert!(!valid_event_name("../shutdown"));
        assert!(!valid_event_name("Stop HTTP/1.1"));
        assert!(!valid_event_name(&"A".repeat(65)));
    }

    #[test]
    fn never_prints_into_model_context() {
        assert!(!may_print("UserPromptSubmit"));
        assert!(!may_print("SessionStart"));
        assert!(!may_print("WorktreeCreate"));
        assert!(may_print("PreToolUse"));
        assert!(may_print("SomethingNew"));
    }

    #[test]
    fn the_hook_command_chooses_injection_before_the_environment() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let env = |v: &str| Some(v.to_owned());
        assert_eq!(correlation(&[], None), Correlation::Passive);
        assert_eq!(correlation(&[], env("inject")), Correlation::Inject);
        assert_eq!(correlation(&[], env("bogus")), Correlation::Passive);
        assert_eq!(
            correlation(&args(&["--no-correlation"]), env("inject")),
            Correlation::Off
        );
        assert_eq!(
            correlation(&args(&["--correlate", "inject"]), None),
            Correlation::Inject
        );
        assert_eq!(
            correlation(&args(&["--correlate=inject"]), env("off")),
            Correlation::Inject
        );
        assert_eq!(
            correlation(&args(&["--correlate=off"]), env("inject")),
            Correlation::Off
        );
    }

    #[test]
    fn a_prompt_answer_is_printed_only_as_a_guides_context() {
        let ctx = br#"{"hookSpecificOutput":{"hookEventName":"UserPromptSubmit","additionalContext":"steps"}}"#;
        assert!(is_prompt_context("UserPromptSubmit", ctx));
        assert!(!is_prompt_context("SessionStart", ctx));
        assert!(!is_prompt_context("UserPromptSubmit", b"plain text"));
        assert!(!is_prompt_context(
            "UserPromptSubmit",
            br#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","additionalContext":"x"}}"#
        ));
        assert!(!is_prompt_context(
            "UserPromptSubmit",
            br#"{"decision":"block"}"#
        ));
    }

    #[test]
    fn only_json_answers() {
        assert!(is_json(br#"{"decision":"block"}"#));
        assert!(!is_json(b"hello"));
        assert!(!is_json(b""));
    }
}
