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
