//! One executable, several personalities: chosen by argv[0] or by the first
//! argument, and both forms behave the same.

use std::os::unix::fs::symlink;

use crate::support::{TempDir, bir, command};

fn run(cmd: &mut std::process::Command) -> (i32, String, String) {
    let out = cmd.output().expect("run bir");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn version_in_both_forms() {
    let dir = TempDir::new("version");
    let (code, out, _) = run(command(bir(), &dir).arg("--version"));
    assert_eq!(code, 0);
    assert!(
        out.starts_with("bir 0.") && out.contains("(build "),
        "{out}"
    );

    let (code, out, _) = run(command(bir(), &dir).args(["proxy", "--version"]));
    assert_eq!(code, 0);
    assert!(out.starts_with("bir-proxy 0."), "{out}");

    let (code, out2, _) = run(command(dir.proxy_link(), &dir).arg("--version"));
    assert_eq!(code, 0);
    assert_eq!(out, out2, "`bir proxy` and the `bir-proxy` link agree");

    let exe = dir.join("bir-proxy.exe");
    symlink(bir(), &exe).expect("link");
    let (code, out3, _) = run(command(&exe, &dir).arg("--version"));
    assert_eq!((code, out3), (0, out));
}

#[test]
fn help_names_the_program_typed() {
    let dir = TempDir::new("help");
    let (code, out, _) = run(command(dir.proxy_link(), &dir).arg("--help"));
    assert_eq!(code, 0);
    assert!(out.starts_with("Usage: bir-proxy"), "{out}");
    let (code, _, err) = run(command(bir(), &dir).args(["proxy", "--no-such-flag"]));
    assert_eq!(code, 2);
    assert!(err.contains("--no-such-flag"), "{err}");
}

#[test]
fn proxy_without_a_command_is_a_usage_error() {
    let dir = TempDir::new("nocmd");
    let (code, out, err) = run(command(dir.proxy_link(), &dir).stdin(std::process::Stdio::null()));
    assert_eq!(code, 2);
    assert!(out.is_empty());
    assert!(err.contains("no server command given"), "{err}");
}

#[test]
fn hooks_never_disturb_the_session() {
    let dir = TempDir::new("hooks");
    let link = dir.join("bir-hooks");
    symlink(bir(), &link).expect("link");
    for cmd in [command(&link, &dir), {
        let mut c = command(bir(), &dir);
        c.args(["hooks", "PreToolUse", "--unknown-flag"]);
        c
    }] {
        let mut cmd = cmd;
        let out = cmd
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut child| {
                use std::io::Write;
                if let Some(mut stdin) = child.stdin.take() {
                    let _ =
                        stdin.write_all(br#"{"session_id":"s","hook_event_name":"PreToolUse"}"#);
                }
                child.wait_with_output()
            })
            .expect("run hooks");
        assert_eq!(out.status.code(), Some(0));
        assert!(
            out.stdout.is_empty(),
            "a hook prints nothing it was not asked for"
        );
    }
}

#[test]
fn unknown_command_is_reported() {
    let dir = TempDir::new("unknown");
    let (code, out, err) = run(command(bir(), &dir).arg("frobnicate"));
    assert_eq!(code, 2);
    assert!(out.is_empty());
    assert!(err.contains("frobnicate"), "{err}");
}

/// Every command's error goes through one path: one line on stderr,
/// `bir <command>: <what failed>[: <why>]`, naming the subcommand that
/// failed, and the exit status of its kind (1 failed, 2 wrong command
/// line). The statuses are bir's interface and must not change.
#[test]
fn command_errors_name_the_command_and_keep_their_exit_status() {
    let dir = TempDir::new("errors");
    std::fs::write(dir.join("bad.json"), "{bad").expect("write");
    let cases: &[(&[&str], i32, &str)] = &[
        (&[], 2, "bir: no command given."),
        (&["runs", "show", "nope"], 1, "bir runs: no run"),
        (
            &["runs", "export", "--format", "xml", "latest"],
            1,
            "bir runs: no runs in ",
        ),
        (&["runs", "rm"], 2, "bir runs rm: name runs to remove"),
        (
            &["runs", "rm", "--older-than", "soon"],
            2,
            "bir runs rm: `soon` is not an age",
        ),
        (
            &["runs", "rm", "nope"],
            1,
            "bir runs rm: no run matches `nope`",
        ),
        (
            &["login", "--service", "http://example.com"],
            2,
            "bir login: `http://example.com`: plain http",
        ),
        (&["wrap"], 2, "bir wrap: no server command given"),
        (
            &["wrap", "--config", "bad.json", "--", "x"],
            2,
            "bir wrap: --config needs --name",
        ),
        (
            &["wrap", "--config", "bad.json", "--name", "a", "--", "x"],
            1,
            "bir wrap: ",
        ),
        (&["install", "--config", "bad.json"], 1, "bir install: "),
        (&["proxy", "--url", "ftp://x"], 2, "bir-proxy: "),
    ];
    for (args, status, start) in cases {
        let (code, _, err) = run(command(bir(), &dir)
            .args(*args)
            .env("BIR_CLAUDE_MANAGED_DIR", dir.join("managed"))
            .current_dir(dir.path())
            .stdin(std::process::Stdio::null()));
        assert_eq!(code, *status, "bir {args:?}: {err}");
        assert!(err.starts_with(start), "bir {args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "one line: bir {args:?}: {err}");
    }
}

#[test]
fn a_mistyped_command_gets_the_nearest_one_and_its_help() {
    let dir = TempDir::new("typo");
    let (code, out, err) = run(command(bir(), &dir).arg("rusn"));
    assert_eq!(code, 2, "{err}");
    assert!(out.is_empty(), "{out}");
    assert!(err.starts_with("bir: unknown command `rusn`"), "{err}");
    assert!(err.contains("Did you mean `bir runs`?"), "{err}");
    assert!(err.contains("Run `bir --help`"), "{err}");

    let (code, _, err) = run(command(bir(), &dir).args(["runs", "shwo", "latest"]));
    assert_eq!(code, 2, "{err}");
    assert!(err.starts_with("bir runs: unknown command `shwo`"), "{err}");
    assert!(err.contains("Did you mean `bir runs show`?"), "{err}");
    assert!(err.contains("Run `bir runs --help`"), "{err}");

    // Nothing near: no guess, still the command's format and its help.
    let (code, _, err) = run(command(bir(), &dir).arg("xyzzyplugh"));
    assert_eq!(code, 2, "{err}");
    assert!(!err.contains("Did you mean"), "{err}");
    assert!(err.starts_with("bir: unknown command"), "{err}");

    // A mistyped flag names the command it was given to.
    let (code, _, err) = run(command(bir(), &dir).args(["runs", "show", "--nope"]));
    assert_eq!(code, 2, "{err}");
    assert!(err.starts_with("bir runs show: "), "{err}");
    assert!(
        err.contains("--nope") && err.contains("`bir runs show --help`"),
        "{err}"
    );
}

/// An error, a note or a usage message on stderr quotes what the user
/// typed or was handed (a run id, a path, an argument): its control
/// characters arrive escaped, the way stdout shows them.
#[test]
fn stderr_shows_outside_text_inert() {
    let dir = TempDir::new("stderr-escapes");
    let evil = "x\u{1b}]0;pwned\u{7}\u{9b}2J";
    let path = dir.join(evil);
    let path = path.to_str().expect("utf-8 path");
    let commands: [&[&str]; 5] = [
        &["runs", "show", evil],
        &["runs", "rm", evil],
        &["scenario", "show", path],
        &["replay", path],
        &["runs", evil],
    ];
    for args in commands {
        let (code, _, err) = run(command(bir(), &dir).args(args));
        assert_ne!(code, 0, "bir {args:?} fails: {err}");
        assert!(
            !err.contains(['\u{1b}', '\u{7}', '\u{9b}']),
            "bir {args:?}: a raw control character on stderr: {err:?}"
        );
        assert!(
            err.contains("x\\u{1b}]0;pwned\\u{7}\\u{9b}2J"),
            "bir {args:?}: the text is still shown, escaped: {err:?}"
        );
    }
}
