//! The hook command Codex CLI and Gemini CLI run for every event (`bir
//! install --client codex|gemini`, `--hooks http`, the default): a bash
//! script of builtins only that posts the payload straight to the daemon's
//! loopback hook port — no `bir-hooks` process while the daemon runs.
//!
//! Both agents run a hook command as `bash -c '<command>'`; that bash is
//! the floor of any hook of theirs, so a hook that is only that bash costs
//! what a Claude Code hook costs or less (`bench/README.md`). The post is
//! the one Claude Code's HTTP hooks make (`hook_entries`): the same port
//! and hook token (`daemon::hookaddr`, `control/hooks.json`, stable across
//! daemon restarts; the token admits only `POST /hook/<Event>`), marked
//! `X-Bir-Hook: 1`.
//!
//! What the script does, in order:
//! 1. reads the payload whole under `LC_ALL=C` (`read -N`: bash reads a
//!    pipe 4 KiB at a time there, where `read -d ''` reads it a byte per
//!    system call), so `${#p}` counts bytes. Bash drops NUL bytes as it
//!    reads; JSON holds none (a control character must be escaped), so a
//!    payload the agent sends whole is posted whole;
//! 2. exits 0 when `BIR_OFF` says off (as `switch::says_off` reads it) —
//!    after reading, so the agent's write never meets a closed pipe; the
//!    daemon checks the switch files (`bir off`) itself, as for Claude
//!    Code's HTTP hooks;
//! 3. exits 0 when the payload is over the daemon's body cap
//!    (`daemon::MAX_HOOK_PAYLOAD`): `bir-hooks` drops it too;
//! 4. connects to `127.0.0.1:<port>` (`/dev/tcp`); no daemon (the connect
//!    is refused at once): the payload goes to `bir-hooks` instead, which
//!    starts the daemon and posts it, as every hook did before this script
//!    (a session's first hook brings the daemon up, a daemon killed
//!    mid-session is back at the next hook, and an agent whose MCP servers
//!    bind by ancestry finds its session); the script
//!    exits 0 whatever `bir-hooks` did. Only this rare path pays for a
//!    `bir` process;
//! 5. posts `POST /hook/<Event>?host=<agent>&host_process=$PPID` (the
//!    daemon reads the pid's start time from `/proc`, and walks past a
//!    shell as `bir-hooks` does: `bound::process::host_process_from`);
//! 6. waits for the answer at most [`ANSWER_WAIT_SECS`] (a port held by a
//!    program that never answers) and exits 0. It prints nothing, ever:
//!    stderr goes to `/dev/null` before the connect, and a reset
//!    connection's `SIGPIPE` is ignored.
//!
//! Recognised as bir's ([`parse`]) by the `/dev/tcp/127.0.0.1/` connect,
//! the `POST /hook/<Event>?host=<agent>&` line and the `X-Bir-Hook: 1`
//! mark, as a Claude Code HTTP hook is by its URL and mark.

use crate::bound::hosts::Host;
use crate::daemon::hookaddr::HookAddr;

/// Seconds the script waits for the daemon's answer: a daemon answers a
/// hook within milliseconds; this bounds a port another program holds.
pub(crate) const ANSWER_WAIT_SECS: u32 = 2;

/// The mark every post of bir's carries (as Claude Code's HTTP hooks).
const MARK: &str = super::hook_entries::HTTP_MARK;

/// The script that posts `event` of `host` to `addr`, or hands it to
/// `fallback` (the `bir-hooks` command of that event, already a shell
/// command) when no daemon listens there.
pub(crate) fn script(addr: &HookAddr, host: Host, event: &str, fallback: &str) -> String {
    let cap = crate::daemon::MAX_HOOK_PAYLOAD;
    let port = addr.port;
    format!(
        concat!(
            "LC_ALL=C;IFS= read -r -N {over} p;",
            "[[ -n $BIR_OFF && $BIR_OFF =~ ^[[:space:]]*(1|true|yes|on)[[:space:]]*$ ]]&&exit 0;",
            "((${{#p}}>{cap}))&&exit 0;",
            "trap '' PIPE;exec 2>/dev/null;exec 3<>/dev/tcp/127.0.0.1/{port}||",
            "{{ printf %s \"$p\"|{fallback} >/dev/null;exit 0;}};",
            "printf 'POST /hook/{event}?host={host}&host_process=%s HTTP/1.1\\r\\n",
            "Host: 127.0.0.1:{port}\\r\\nAuthorization: Bearer {token}\\r\\n{mark}: 1\\r\\n",
            "Content-Type: application/json\\r\\nContent-Length: %d\\r\\nConnection: close\\r\\n\\r\\n%s'",
            " \"$PPID\" \"${{#p}}\" \"$p\">&3;",
            "read -t {wait} -r <&3;exit 0"
        ),
        over = cap + 1,
        cap = cap,
        port = port,
        event = event,
        host = host.flag(),
        token = addr.token,
        mark = MARK,
        wait = ANSWER_WAIT_SECS,
        fallback = fallback,
    )
}

/// `Some((event, host word))` when `command` is a post script of bir's.
pub(crate) fn parse(command: &str) -> Option<(String, String)> {
    if !command.starts_with("LC_ALL=C;")
        || !command.contains("3<>/dev/tcp/127.0.0.1/")
        || !command.contains(&format!("\\r\\n{MARK}: 1\\r\\n"))
    {
        return None;
    }
    let rest = &command[command.find("'POST /hook/")? + "'POST /hook/".len()..];
    let (event, rest) = rest.split_once("?host=")?;
    let (host, _) = rest.split_once('&')?;
    let word = |s: &str| {
        !s.is_empty()
            && s.len() <= 64
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    };
    (word(event) && word(host)).then(|| (event.to_owned(), host.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    /// A `bir-hooks` that is not there: the scripts that reach a listener
    /// never run it.
    const FALLBACK: &str = "/nonexistent/bir-hooks --host codex Stop";

    fn addr(port: u16) -> HookAddr {
        HookAddr {
            port,
            token: "ab".repeat(32),
        }
    }

    #[test]
    fn a_script_names_its_event_and_agent_and_is_recognised() {
        let s = script(&addr(47113), Host::Codex, "PreToolUse", FALLBACK);
        assert_eq!(
            parse(&s),
            Some(("PreToolUse".to_owned(), "codex".to_owned()))
        );
        assert!(s.contains("Host: 127.0.0.1:47113\\r\\n"), "{s}");
        assert!(s.contains(&format!("Bearer {}", "ab".repeat(32))), "{s}");
        // One line, no single quote but the format's and the trap's: it
        // goes into a JSON string and a `bash -c` argument as it is.
        assert!(!s.contains('\n'), "{s}");
        assert_eq!(s.matches('\'').count(), 4, "{s}");
        // Someone else's script is not bir's.
        assert_eq!(parse("curl -d @- http://127.0.0.1:9/hook/Stop"), None);
        let no_mark = s.replace("X-Bir-Hook: 1", "X-Other: 1");
        assert_eq!(parse(&no_mark), None);
        let elsewhere = s.replace("/dev/tcp/127.0.0.1/", "/dev/tcp/10.0.0.1/");
        assert_eq!(parse(&elsewhere), None);
    }

    fn bash() -> Option<&'static str> {
        ["/bin/bash", "/usr/bin/bash"]
            .into_iter()
            .find(|p| std::path::Path::new(p).exists())
    }

    /// Runs the script as the agents do (`bash -c`, the payload on stdin)
    /// against a listener on 127.0.0.1 that answers `answer` (None: never
    /// answers): what reached the listener, the script's exit status,
    /// stdout and stderr, and how long it took.
    fn run(
        payload: &[u8],
        env: &[(&str, &str)],
        answer: Option<&'static [u8]>,
    ) -> (Vec<u8>, Option<i32>, Vec<u8>, Vec<u8>, Duration) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("listen");
        let port = listener.local_addr().expect("addr").port();
        let server = std::thread::spawn(move || {
            let Ok((mut conn, _)) = listener.accept() else {
                return Vec::new();
            };
            let _ = conn.set_read_timeout(Some(Duration::from_secs(30)));
            let mut got = Vec::new();
            let mut buf = [0u8; 65536];
            // Read the head, then the body its Content-Length says.
            while let Ok(n) = conn.read(&mut buf) {
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
                if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                    let head = String::from_utf8_lossy(&got[..end]).to_string();
                    let len: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("Content-Length: "))
                        .and_then(|v| v.trim().parse().ok())
                        .unwrap_or(0);
                    if got.len() >= end + 4 + len {
                        break;
                    }
                }
            }
            match answer {
                Some(a) => {
                    let _ = conn.write_all(a);
                }
                // Hold the connection, answer nothing, until the script
                // has given up.
                None => {
                    let _ = conn.read(&mut buf);
                }
            }
            got
        });
        let started = Instant::now();
        let mut cmd = Command::new(bash().expect("bash"));
        cmd.arg("-c")
            .arg(script(&addr(port), Host::Gemini, "AfterTool", FALLBACK))
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("bash");
        let mut stdin = child.stdin.take().expect("stdin");
        let body = payload.to_vec();
        let writer = std::thread::spawn(move || {
            let _ = stdin.write_all(&body);
        });
        let out = child.wait_with_output().expect("wait");
        let took = started.elapsed();
        let _ = writer.join();
        // The listener is never reached when the script exits first: wake
        // its accept so the thread ends.
        let _ = std::net::TcpStream::connect(("127.0.0.1", port));
        let got = server.join().unwrap_or_default();
        (got, out.status.code(), out.stdout, out.stderr, took)
    }

    fn split(request: &[u8]) -> (String, Vec<u8>) {
        let end = request
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("a head");
        (
            String::from_utf8(request[..end].to_vec()).expect("head"),
            request[end + 4..].to_vec(),
        )
    }

    #[test]
    fn the_script_posts_the_payload_byte_for_byte() {
        if bash().is_none() {
            return;
        }
        let payload = "{\"session_id\":\"s\",\"prompt\":\"héllo — 日本 🦀\\n\\\\ 'q' \\\"x\\\" $HOME `id` %s %d\",\"cwd\":\"/p\"}\n\n";
        let (got, code, stdout, stderr, _) = run(
            payload.as_bytes(),
            &[],
            Some(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"),
        );
        assert_eq!(code, Some(0));
        assert!(stdout.is_empty() && stderr.is_empty(), "{stderr:?}");
        let (head, body) = split(&got);
        assert_eq!(body, payload.as_bytes());
        let mut lines = head.split("\r\n");
        let first = lines.next().expect("request line");
        let ppid = std::process::id();
        assert_eq!(
            first,
            format!("POST /hook/AfterTool?host=gemini&host_process={ppid} HTTP/1.1")
        );
        let fields: Vec<&str> = lines.collect();
        assert!(fields.iter().any(|f| f.starts_with("Host: 127.0.0.1:")));
        assert!(fields.contains(&format!("Content-Length: {}", payload.len()).as_str()));
        assert!(fields.contains(&"Content-Type: application/json"));
        assert!(fields.contains(&"X-Bir-Hook: 1"));
        assert!(fields.contains(&"Connection: close"));
        assert!(fields.contains(&format!("Authorization: Bearer {}", "ab".repeat(32)).as_str()));
    }

    #[test]
    fn bir_off_posts_nothing_and_a_silent_port_is_left_in_time() {
        if bash().is_none() {
            return;
        }
        let ok: Option<&'static [u8]> = Some(b"HTTP/1.1 200 OK\r\n\r\n");
        for off in ["1", " yes ", "on", "true"] {
            let (got, code, out, err, _) = run(b"{}", &[("BIR_OFF", off)], ok);
            assert!(got.is_empty(), "BIR_OFF={off}");
            assert_eq!(code, Some(0));
            assert!(out.is_empty() && err.is_empty());
        }
        for on in ["0", "", "no"] {
            let (got, ..) = run(b"{}", &[("BIR_OFF", on)], ok);
            assert!(!got.is_empty(), "BIR_OFF={on:?}");
        }
        // A port whose program takes the post and never answers: the
        // script gives up after its wait, silently, with 0.
        let (got, code, out, err, took) = run(b"{\"a\":1}", &[], None);
        assert_eq!(split(&got).1, b"{\"a\":1}");
        assert_eq!(code, Some(0));
        assert!(out.is_empty() && err.is_empty(), "{err:?}");
        assert!(took >= Duration::from_secs(u64::from(ANSWER_WAIT_SECS)));
        assert!(took < Duration::from_secs(30));
    }

    /// No daemon: the payload goes to `bir-hooks` (here a stand-in that
    /// keeps its arguments and stdin, and fails loudly), and the script is
    /// silent and exits 0 whatever it did.
    #[test]
    fn no_daemon_hands_the_payload_to_bir_hooks_silently() {
        let Some(bash) = bash() else { return };
        // A port nobody listens on (bound, then let go).
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("port")
            .port();
        let dir = std::env::temp_dir().join(format!("bir-post-script-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("mkdir");
        let kept = dir.join("kept");
        let stand_in = dir.join("bir hooks's stand-in");
        std::fs::write(
            &stand_in,
            format!(
                "#!/bin/sh\necho \"$*\" >'{k}.args'\ncat >'{k}.stdin'\necho noise; echo noise >&2\nexit 3\n",
                k = kept.display()
            ),
        )
        .expect("stand-in");
        let mut perms = std::fs::metadata(&stand_in).expect("meta").permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o700);
        std::fs::set_permissions(&stand_in, perms).expect("chmod");
        let fallback = format!(
            "{} --host codex Stop",
            crate::clientconfig::hook_entries::shell_quote(&stand_in.to_string_lossy())
        );
        let payload = "{\"session_id\":\"s\",\"prompt\":\"héllo $HOME %s\"}";
        let mut child = Command::new(bash)
            .arg("-c")
            .arg(script(&addr(port), Host::Codex, "Stop", &fallback))
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("bash");
        let _ = child
            .stdin
            .take()
            .expect("stdin")
            .write_all(payload.as_bytes());
        let out = child.wait_with_output().expect("wait");
        assert_eq!(out.status.code(), Some(0));
        assert!(out.stdout.is_empty() && out.stderr.is_empty(), "{out:?}");
        let read = |ext: &str| std::fs::read(dir.join(format!("kept.{ext}")));
        let (args, stdin) = (read("args"), read("stdin"));
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(args.expect("args"), b"--host codex Stop\n");
        assert_eq!(stdin.expect("stdin"), payload.as_bytes());
    }

    #[test]
    fn a_payload_over_the_daemons_cap_is_not_posted() {
        if bash().is_none() {
            return;
        }
        let mut big = vec![b' '; crate::daemon::MAX_HOOK_PAYLOAD];
        big[0] = b'{';
        big.push(b'}');
        let (got, code, out, err, _) = run(&big, &[], Some(b"HTTP/1.1 200 OK\r\n\r\n"));
        assert!(got.is_empty(), "{} bytes posted", got.len());
        assert_eq!(code, Some(0));
        assert!(out.is_empty() && err.is_empty());
    }

    #[test]
    fn a_nul_byte_is_dropped_and_the_rest_posted() {
        if bash().is_none() {
            return;
        }
        let (got, code, out, err, _) = run(
            b"{\"a\":\x00\"b\"}",
            &[],
            Some(b"HTTP/1.1 400 Bad Request\r\n\r\n"),
        );
        assert_eq!(code, Some(0));
        assert!(out.is_empty() && err.is_empty());
        // Never valid JSON to begin with (JSON escapes control characters).
        assert_eq!(split(&got).1, b"{\"a\":\"b\"}");
    }

    #[test]
    fn the_script_passes_shellcheck_where_it_is_installed() {
        let Ok(out) = Command::new("shellcheck")
            .args(["--shell=bash", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                let text = script(&addr(47113), Host::Codex, "PreToolUse", FALLBACK);
                if let Some(mut i) = c.stdin.take() {
                    i.write_all(text.as_bytes())?;
                }
                c.wait_with_output()
            })
        else {
            return; // not installed
        };
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}
