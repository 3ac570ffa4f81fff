//! `install/install.sh`, the real script run with `sh`, `dash` and
//! `busybox sh` against a release served from 127.0.0.1: checksums,
//! offline installs, reinstalls and `--uninstall`.
//!
//! The release archive is built here from the binary under test (the layout
//! `make dist` produces: `bir-<version>-<target>/bir` in a `.tar.gz`, plus
//! `SHA256SUMS`), so the tests do not need a release build.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use crate::support::http::{Reply, Stub};
use crate::support::{TempDir, bir, command};

const VERSION: &str = env!("CARGO_PKG_VERSION");

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("install/install.sh")
}

/// The target the script detects on this machine.
fn target() -> String {
    let arch = std::env::consts::ARCH;
    match std::env::consts::OS {
        "macos" => format!("{arch}-apple-darwin"),
        _ => format!("{arch}-unknown-linux-gnu"),
    }
}

fn archive_name() -> String {
    format!("bir-{VERSION}-{}.tar.gz", target())
}

/// The shells [`shells`] runs the script with: the system `sh`, `dash` and
/// `busybox sh` (each a different POSIX shell; `.ci/run` installs them).
const SHELLS: [&[&str]; 3] = [&["sh"], &["dash"], &["busybox", "sh"]];

/// The system `sh`, for the tests that do not repeat under every shell.
fn sh() -> Vec<String> {
    vec!["sh".to_owned()]
}

/// The shells of [`SHELLS`] this machine has. A missing one is reported on
/// stderr with the count run; under CI (`CI=true`) it fails the test
/// instead, so a run that claims every shell ran every shell.
fn shells() -> Vec<Vec<String>> {
    let on_path = |name: &str| {
        std::env::var_os("PATH")
            .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(name).is_file()))
    };
    let (found, missing): (Vec<&[&str]>, Vec<&[&str]>) =
        SHELLS.iter().partition(|argv| on_path(argv[0]));
    if !missing.is_empty() {
        let names: Vec<&str> = missing.iter().map(|argv| argv[0]).collect();
        eprintln!(
            "install_sh: ran {} of {} shells; not installed, skipped: {}",
            found.len(),
            SHELLS.len(),
            names.join(", ")
        );
        let ci = std::env::var("CI").is_ok_and(|v| matches!(v.as_str(), "true" | "1"));
        assert!(
            !ci,
            "CI=true and {} missing: install them (.ci/run does)",
            names.join(", ")
        );
    }
    found
        .iter()
        .map(|argv| argv.iter().map(|&a| a.to_owned()).collect())
        .collect()
}

/// A release archive of the binary under test, built once per test run.
fn release_archive() -> &'static (PathBuf, String) {
    static ARCHIVE: OnceLock<(PathBuf, String)> = OnceLock::new();
    ARCHIVE.get_or_init(|| {
        // Under the target directory (one copy, replaced by each test run),
        // not in /tmp where nothing would remove it.
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("install-sh-release-{}", std::process::id()));
        if let Ok(entries) = fs::read_dir(env!("CARGO_TARGET_TMPDIR")) {
            for e in entries.flatten() {
                if e.file_name()
                    .to_string_lossy()
                    .starts_with("install-sh-release-")
                {
                    let _ = fs::remove_dir_all(e.path());
                }
            }
        }
        let _ = fs::remove_dir_all(&dir);
        let top = format!("bir-{VERSION}-{}", target());
        fs::create_dir_all(dir.join(&top)).expect("mkdir");
        fs::copy(bir(), dir.join(&top).join("bir")).expect("copy bir");
        let archive = dir.join(archive_name());
        let status = Command::new("sh")
            .arg("-c")
            .arg("tar -cf - \"$1\" | gzip -1 > \"$2\"")
            .arg("sh")
            .arg(&top)
            .arg(&archive)
            .current_dir(&dir)
            .status()
            .expect("run tar");
        assert!(status.success(), "tar failed");
        let sum = sha256_hex(&fs::read(&archive).expect("read archive"));
        (archive, sum)
    })
}

fn sha256_hex(bytes: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// A release directory: `<root>/latest/` and `<root>/v<version>/`, each
/// with the archive and a `SHA256SUMS` carrying `sum`.
fn release_tree(root: &Path, sum: &str) {
    let (archive, _) = release_archive();
    for sub in ["latest".to_owned(), format!("v{VERSION}")] {
        let d = root.join(sub);
        fs::create_dir_all(&d).expect("mkdir");
        fs::copy(archive, d.join(archive_name())).expect("copy archive");
        let mut f = fs::File::create(d.join("SHA256SUMS")).expect("sums");
        writeln!(f, "{}  bir-{VERSION}-other-target.tar.gz", "0".repeat(64)).expect("write");
        writeln!(f, "{sum}  {}", archive_name()).expect("write");
    }
}

/// Serves files under `root` on 127.0.0.1 until dropped (the suite's HTTP
/// stub, answering with the file a path names or 404).
struct FileServer {
    base: String,
    _stub: Stub,
}

impl FileServer {
    fn start(root: PathBuf) -> FileServer {
        let stub = Stub::start(move |r, _| {
            let rel = r.path.trim_start_matches('/').to_owned();
            let path = root.join(&rel);
            if !rel.contains("..") && path.is_file() {
                Reply::With(200, Vec::new(), fs::read(&path).unwrap_or_default())
            } else {
                Reply::With(404, Vec::new(), b"not found".to_vec())
            }
        });
        FileServer {
            base: stub.base(),
            _stub: stub,
        }
    }
}

/// Runs the script with `shell` and `args`; HOME is the temp home and PATH
/// does not contain the install directory.
fn run_script(shell: &[String], dir: &TempDir, base: Option<&str>, args: &[&str]) -> Output {
    let mut cmd = command(&shell[0], dir);
    cmd.args(&shell[1..]).arg(script()).args(args);
    match base {
        Some(b) => cmd.env("BIR_INSTALL_BASE_URL", b),
        None => cmd.env("BIR_INSTALL_BASE_URL", "http://127.0.0.1:9/unreachable"),
    };
    cmd.output().expect("run install.sh")
}

fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn bindir(dir: &TempDir) -> PathBuf {
    dir.join("home/.local/bin")
}

/// The install is complete: `bir` is the release binary, both links point at
/// it and answer to their names, and no temporary file is left.
fn assert_installed(dir: &TempDir, bin: &Path) {
    let installed = fs::read(bin.join("bir")).expect("bir installed");
    assert!(
        installed == fs::read(bir()).expect("read bir"),
        "bir is the release binary"
    );
    for link in ["bir-proxy", "bir-hooks"] {
        assert_eq!(
            fs::read_link(bin.join(link)).expect("a link"),
            Path::new("bir")
        );
        let out = command(bin.join(link), dir)
            .arg("--version")
            .output()
            .expect("run link");
        let line = String::from_utf8_lossy(&out.stdout);
        assert!(line.starts_with(&format!("{link} {VERSION}")), "{line}");
    }
    assert_no_leftovers(bin);
}

fn assert_no_leftovers(bin: &Path) {
    if let Ok(entries) = fs::read_dir(bin) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            assert!(!name.starts_with('.'), "temporary file left behind: {name}");
        }
    }
}

#[test]
fn install_sh_downloads_verifies_and_installs_with_every_shell() {
    let (_, sum) = release_archive();
    for shell in shells() {
        let dir = TempDir::new("inst-good");
        release_tree(&dir.join("rel"), sum);
        let server = FileServer::start(dir.join("rel"));

        // The latest release.
        let out = run_script(&shell, &dir, Some(&server.base), &[]);
        let all = text(&out);
        assert!(out.status.success(), "{shell:?}: {all}");
        assert!(all.contains(&format!("sha256 verified: {sum}")), "{all}");
        assert!(all.contains("is not on your PATH"), "PATH hint: {all}");
        assert_installed(&dir, &bindir(&dir));

        // A named version, into another prefix.
        let prefix = dir.join("opt");
        let out = run_script(
            &shell,
            &dir,
            Some(&server.base),
            &[
                "--version",
                VERSION,
                "--prefix",
                prefix.to_str().expect("utf-8"),
            ],
        );
        assert!(out.status.success(), "{shell:?}: {}", text(&out));
        assert_installed(&dir, &prefix.join("bin"));
    }
}

#[test]
fn install_sh_refuses_a_bad_checksum_and_installs_nothing() {
    for shell in shells() {
        let dir = TempDir::new("inst-badsum");
        release_tree(&dir.join("rel"), &"ab".repeat(32));
        let server = FileServer::start(dir.join("rel"));
        let out = run_script(&shell, &dir, Some(&server.base), &[]);
        let all = text(&out);
        assert_eq!(out.status.code(), Some(1), "{shell:?}: {all}");
        assert!(all.contains("checksum mismatch"), "{all}");
        assert!(all.contains("nothing was installed"), "{all}");
        assert!(!bindir(&dir).join("bir").exists(), "nothing installed");
        assert!(!bindir(&dir).join("bir-proxy").exists(), "no link");
        assert_no_leftovers(&bindir(&dir));
    }
}

#[test]
fn install_sh_names_a_missing_release() {
    let dir = TempDir::new("inst-missing");
    let server = FileServer::start(dir.join("empty"));
    let out = run_script(&sh(), &dir, Some(&server.base), &["--version", "9.9.9"]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(
        all.contains("download failed") && all.contains("v9.9.9/SHA256SUMS"),
        "{all}"
    );
    assert!(!bindir(&dir).exists());
}

#[test]
fn install_sh_installs_offline_from_an_archive() {
    let (archive, sum) = release_archive();
    let shell = &sh();

    // With a SHA256SUMS next to the archive: verified.
    let dir = TempDir::new("inst-offline");
    let rel = dir.join("usb");
    fs::create_dir_all(&rel).expect("mkdir");
    let local = rel.join(archive_name());
    fs::copy(archive, &local).expect("copy");
    fs::write(
        rel.join("SHA256SUMS"),
        format!("{sum}  {}\n", archive_name()),
    )
    .expect("sums");
    let out = run_script(
        shell,
        &dir,
        None,
        &["--from", local.to_str().expect("utf-8")],
    );
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(all.contains("sha256 verified"), "{all}");
    assert_installed(&dir, &bindir(&dir));

    // A relative path, without a checksum file: installed, with a note.
    let dir = TempDir::new("inst-offline-nosum");
    fs::copy(archive, dir.join(&archive_name())).expect("copy");
    let mut cmd = command(&shell[0], &dir);
    cmd.args(&shell[1..])
        .arg(script())
        .args(["--from", &archive_name()])
        .current_dir(dir.path());
    let out = cmd.output().expect("run");
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(all.contains("not verified"), "{all}");
    assert_installed(&dir, &bindir(&dir));

    // A SHA256SUMS that disagrees: refused.
    let dir = TempDir::new("inst-offline-bad");
    let rel = dir.join("usb");
    fs::create_dir_all(&rel).expect("mkdir");
    let local = rel.join(archive_name());
    fs::copy(archive, &local).expect("copy");
    fs::write(
        rel.join("SHA256SUMS"),
        format!("{}  {}\n", "0".repeat(64), archive_name()),
    )
    .expect("sums");
    let out = run_script(
        shell,
        &dir,
        None,
        &["--from", local.to_str().expect("utf-8")],
    );
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(all.contains("checksum mismatch"), "{all}");
    assert!(!bindir(&dir).join("bir").exists());
}

#[test]
fn install_sh_reinstalls_over_an_existing_install() {
    let (archive, _) = release_archive();
    let shell = &sh();
    let dir = TempDir::new("inst-again");
    let bin = bindir(&dir);
    fs::create_dir_all(&bin).expect("mkdir");
    // An older install: a different bir, and a link pointing elsewhere.
    fs::write(bin.join("bir"), "#!/bin/sh\necho old\n").expect("old bir");
    std::os::unix::fs::symlink("/nonexistent/bir", bin.join("bir-proxy")).expect("old link");
    let from = archive.to_str().expect("utf-8");
    let out = run_script(shell, &dir, None, &["--from", from]);
    assert!(out.status.success(), "{}", text(&out));
    assert_installed(&dir, &bin);
    // And again, over itself.
    let out = run_script(shell, &dir, None, &["--from", from]);
    assert!(out.status.success(), "{}", text(&out));
    assert_installed(&dir, &bin);
}

#[test]
fn install_sh_uninstalls() {
    let (archive, _) = release_archive();
    let shell = &sh();
    let dir = TempDir::new("inst-uninstall");
    let bin = bindir(&dir);
    let out = run_script(
        shell,
        &dir,
        None,
        &["--from", archive.to_str().expect("utf-8")],
    );
    assert!(out.status.success(), "{}", text(&out));
    fs::write(bin.join("other-tool"), "keep me").expect("write");

    let out = run_script(shell, &dir, None, &["--uninstall"]);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    for name in ["bir", "bir-proxy", "bir-hooks"] {
        assert!(
            fs::symlink_metadata(bin.join(name)).is_err(),
            "{name} removed"
        );
        assert!(
            all.contains(&format!("removed {}", bin.join(name).display())),
            "{all}"
        );
    }
    assert_eq!(
        fs::read_to_string(bin.join("other-tool")).expect("kept"),
        "keep me"
    );

    // Twice: nothing to do, still success.
    let out = run_script(shell, &dir, None, &["--uninstall"]);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(all.contains("nothing to remove"), "{all}");
}

#[test]
fn install_sh_rejects_unknown_options() {
    let dir = TempDir::new("inst-usage");
    let out = run_script(&sh(), &dir, None, &["--frobnicate"]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(all.contains("unknown option '--frobnicate'"), "{all}");
}

/// Every platform install.sh knows, as `uname -s`, `uname -m` and the
/// target name it downloads. The release workflow builds exactly these.
const PLATFORMS: [(&str, &str, &str); 6] = [
    ("Linux", "x86_64", "x86_64-unknown-linux-gnu"),
    ("Linux", "amd64", "x86_64-unknown-linux-gnu"),
    ("Linux", "aarch64", "aarch64-unknown-linux-gnu"),
    ("Linux", "arm64", "aarch64-unknown-linux-gnu"),
    ("Darwin", "x86_64", "x86_64-apple-darwin"),
    ("Darwin", "arm64", "aarch64-apple-darwin"),
];

/// install.sh run where `uname` answers `os` and `arch` (a stand-in first on
/// PATH), against a release listing an archive for every target.
fn install_as(dir: &TempDir, base: &str, os: &str, arch: &str) -> Output {
    let fake = dir.join("fakebin");
    fs::create_dir_all(&fake).expect("mkdir");
    let uname = fake.join("uname");
    fs::write(
        &uname,
        format!(
            "#!/bin/sh\ncase \"$1\" in -s) echo '{os}' ;; -m) echo '{arch}' ;; *) echo '{os}' ;; esac\n"
        ),
    )
    .expect("write uname");
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&uname, fs::Permissions::from_mode(0o755)).expect("chmod");
    let path = format!(
        "{}:{}",
        fake.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = command("sh", dir);
    cmd.arg(script())
        .env("PATH", path)
        .env("BIR_INSTALL_BASE_URL", base);
    cmd.output().expect("run install.sh")
}

#[test]
fn install_sh_maps_every_platform_to_its_release_target() {
    let dir = TempDir::new("install-sh-platforms");
    let root = dir.join("release");
    let (archive, sum) = release_archive();
    let latest = root.join("latest");
    fs::create_dir_all(&latest).expect("mkdir");
    let mut sums = fs::File::create(latest.join("SHA256SUMS")).expect("sums");
    for (_, _, target) in PLATFORMS {
        let name = format!("bir-{VERSION}-{target}.tar.gz");
        if !latest.join(&name).exists() {
            // The binary under test stands in for every platform's: the
            // script runs it (`--version`) before installing.
            fs::copy(archive, latest.join(&name)).expect("copy archive");
            writeln!(sums, "{sum}  {name}").expect("write");
        }
    }
    drop(sums);
    let server = FileServer::start(root);
    for (os, arch, target) in PLATFORMS {
        let out = install_as(&dir, &server.base, os, arch);
        let wanted = format!(
            "fetching {}/latest/bir-{VERSION}-{target}.tar.gz",
            server.base
        );
        assert!(
            out.status.success() && String::from_utf8_lossy(&out.stdout).contains(&wanted),
            "{os} {arch} should fetch {target}: {}",
            text(&out)
        );
    }
    for (os, arch, says) in [
        (
            "FreeBSD",
            "x86_64",
            "unsupported operating system 'FreeBSD'",
        ),
        ("Linux", "riscv64", "unsupported CPU architecture 'riscv64'"),
    ] {
        let out = install_as(&dir, &server.base, os, arch);
        assert!(
            !out.status.success() && String::from_utf8_lossy(&out.stderr).contains(says),
            "{os} {arch}: {}",
            text(&out)
        );
    }
}

/// The release workflow builds one archive per target install.sh maps to,
/// no more and no fewer.
#[test]
fn the_release_workflow_builds_every_target_install_sh_downloads() {
    let workflow = fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join(".github/workflows/release.yml"),
    )
    .expect("read the release workflow");
    let mut built: Vec<&str> = workflow
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- target:"))
        .map(str::trim)
        .collect();
    built.sort_unstable();
    let mut mapped: Vec<&str> = PLATFORMS.iter().map(|(_, _, t)| *t).collect();
    mapped.sort_unstable();
    mapped.dedup();
    assert_eq!(built, mapped);
    assert!(
        workflow.contains("sha256sum bir-*.tar.gz >SHA256SUMS"),
        "the release lists its archives in SHA256SUMS"
    );
    assert!(
        workflow.contains("name=\"bir-$version-$TARGET\""),
        "archives are named as install.sh asks for them"
    );
}
