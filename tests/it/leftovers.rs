//! `scripts/check-leftovers.py`, the last step of `make test`: it names a
//! process the suite started and left running (here an orphaned `sleep`
//! whose working directory is in the checked tree), passes once it is
//! gone, and never counts the shell that runs it.

use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::support::{TempDir, alive, wait_gone};

fn check(root: &TempDir, since: u64) -> (bool, String) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/check-leftovers.py");
    // Run by a shell whose working directory is in the checked tree: an
    // ancestor of the check, never a leftover.
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "\"$0\" --root . --since {since} --grace 0 2>&1; echo \"status $?\""
        ))
        .arg(script)
        .current_dir(root.path())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .output()
        .expect("run check-leftovers.py");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    (text.trim_end().ends_with("status 0"), text)
}

#[test]
fn a_process_left_running_fails_the_check_until_it_ends() {
    let root = TempDir::new("leftovers");
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs()
        - 1;
    // `sleep` outlives the shell that started it: an orphan, as a
    // receiver left behind by a test would be.
    let out = Command::new("sh")
        .arg("-c")
        .arg("sleep 300 </dev/null >/dev/null 2>&1 & echo $!")
        .current_dir(root.path())
        .output()
        .expect("start an orphan");
    let pid: i32 = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("its pid");
    assert!(alive(pid));

    let (passed, text) = check(&root, since);
    // SAFETY: kill(2) on the process this test started.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    assert!(!passed, "a leftover passed the check:\n{text}");
    assert!(text.contains(&format!("pid {pid}: sleep 300")), "{text}");
    assert_eq!(text.matches("  pid ").count(), 1, "only the orphan: {text}");

    assert!(wait_gone(pid, Duration::from_secs(30)));
    let (passed, text) = check(&root, since);
    assert!(passed, "nothing is left, yet:\n{text}");
}
