//! Guides on disk (`$BIR_HOME/guides/`), and how the daemon applies one to
//! a session's hooks (the decisions themselves are `bound::guidance`'s).
//!
//! Scope: one guide per **project directory** — the file is named by the
//! sha256 of the directory `bir guide start` armed it in — optionally
//! narrowed to one session (`--session`). An unnarrowed guide is claimed
//! by the first prompt of a session in that directory (or below it) and
//! follows that session only, so a second session opened in the same
//! directory is never guided by accident. Why per project and not per
//! user: the user arms a guide where they are about to work; a session in
//! another checkout must not start following it.
//!
//! Files are private (0600, in a 0700 directory), written whole through a
//! temporary file and a rename, and every read-modify-write (the daemon at
//! each hook, `bir guide start|stop`) holds `guides/.lock`, so `stop`
//! cannot be undone by a daemon writing its progress back.
//!
//! Cost on the hook path: one `stat` of the directory when no guide was
//! ever armed; otherwise, a small file read per ancestor of the session's
//! cwd, and the permission settings only when a guide follows the session.
//! Its progress is written back without an `fsync` (no hook waits for a
//! busy disk); what `bir guide start` writes is durable.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::bound::guidance::{self, Guide, Permissions, Phase, Verdict};
use crate::bound::{Engine, Input};
use crate::home;

/// The directory of guide files under `$BIR_HOME`.
pub(crate) fn dir(home: &Path) -> PathBuf {
    home.join("guides")
}

/// The guide file of `project` (an absolute directory).
pub(crate) fn file_for(home: &Path, project: &str) -> PathBuf {
    let digest = crate::codec::sha256_hex(project.as_bytes());
    dir(home).join(format!("{}.json", &digest[..32]))
}

/// Holds `guides/.lock` until dropped.
pub(crate) struct Lock(#[allow(dead_code)] File);

/// Takes the guides' lock (creating the directory).
pub(crate) fn lock(home: &Path) -> io::Result<Lock> {
    let dir = dir(home);
    home::ensure_private_dir(&dir)?;
    let file = home::open_regular(
        home::private_file().read(true).write(true).create(true),
        &dir.join(".lock"),
    )?;
    home::lock_exclusive(&file, home::Wait::Yes)?;
    Ok(Lock(file))
}

/// The guide in `path`; `None` if there is none.
pub(crate) fn read(path: &Path) -> io::Result<Option<Guide>> {
    let text = match fs::read(path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    serde_json::from_slice(&text).map(Some).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {e}", path.display()),
        )
    })
}

/// Writes `guide` to `path` whole (temporary file, then rename), durable
/// before it returns: what the user armed. Hold the lock.
pub(crate) fn write(path: &Path, guide: &Guide) -> io::Result<()> {
    write_whole(path, guide, Durable::Now)
}

/// Whether a guide's file is `fsync`ed before the rename.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Durable {
    Now,
    /// Its progress, written at a hook: the rename alone makes it whole
    /// for any reader and survives the daemon's crash. Only a power cut
    /// may lose it (the step before comes back or, on a file system that
    /// does not write the data before the rename, the guide reads as
    /// unarmed), when the session it guided died too. A hook never waits
    /// for a disk.
    Eventually,
}

fn write_whole(path: &Path, guide: &Guide, durable: Durable) -> io::Result<()> {
    let text = serde_json::to_vec_pretty(guide).map_err(io::Error::other)?;
    let tmp = path.with_extension("json.tmp");
    let _ = fs::remove_file(&tmp);
    let mut file = home::open_regular(home::private_file().write(true).create_new(true), &tmp)?;
    file.write_all(&text)?;
    file.write_all(b"\n")?;
    if durable == Durable::Now {
        file.sync_all()?;
    }
    fs::rename(&tmp, path)
}

/// Every guide file with its guide (unreadable ones skipped).
pub(crate) fn list(home: &Path) -> Vec<(PathBuf, Guide)> {
    let Ok(entries) = fs::read_dir(dir(home)) else {
        return Vec::new();
    };
    let mut all: Vec<(PathBuf, Guide)> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .filter_map(|p| read(&p).ok().flatten().map(|g| (p, g)))
        .collect();
    all.sort_by(|a, b| a.1.project.cmp(&b.1.project));
    all
}

/// The guide for a session working in `cwd`: armed in `cwd` or the
/// nearest ancestor holding one.
fn find(home: &Path, cwd: &Path) -> Option<(PathBuf, Guide)> {
    let real = fs::canonicalize(cwd).ok().filter(|r| r != cwd);
    let mut dirs: Vec<&Path> = cwd.ancestors().collect();
    if let Some(real) = &real {
        dirs.extend(real.ancestors());
    }
    dirs.into_iter().find_map(|dir| {
        let path = file_for(home, &dir.to_string_lossy());
        match read(&path) {
            Ok(Some(g)) => Some((path, g)),
            Ok(None) => None,
            Err(e) => {
                log::debug!("guide {}: {e}", path.display());
                None
            }
        }
    })
}

/// Where the hook's session keeps its settings: `bir-hooks` passes the
/// session's own `CLAUDE_CONFIG_DIR` (or `~/.claude`) and managed-policy
/// directory in the route's query, since one daemon serves sessions with
/// different environments.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct SettingsDirs {
    pub user: Option<PathBuf>,
    pub managed: Option<PathBuf>,
}

impl SettingsDirs {
    /// From a hook route's query (`claude_config=…&claude_managed=…`,
    /// percent-encoded).
    pub(crate) fn from_query(query: &str) -> SettingsDirs {
        let mut dirs = SettingsDirs::default();
        for pair in query.split('&') {
            let Some((key, value)) = pair.split_once('=') else {
                continue;
            };
            let path = Some(PathBuf::from(crate::codec::percent_decode(value)))
                .filter(|p| p.is_absolute());
            match key {
                "claude_config" => dirs.user = path,
                "claude_managed" => dirs.managed = path,
                _ => {}
            }
        }
        dirs
    }
}

/// The permission rules of the settings files a session in `cwd` reads:
/// managed policy, user, project, project-local. A file that cannot be
/// read or parsed adds nothing (so it can only make `allow` rarer, never
/// add one — except that an unreadable ask or deny rule is missed, which
/// Claude Code itself still applies to the rewritten input).
pub(crate) fn permissions(cwd: &Path, dirs: &SettingsDirs) -> Permissions {
    let mut files = Vec::new();
    if let Some(managed) = &dirs.managed {
        files.push(managed.join("managed-settings.json"));
    }
    if let Some(user) = &dirs.user {
        files.push(user.join("settings.json"));
    }
    files.push(cwd.join(".claude").join("settings.json"));
    files.push(cwd.join(".claude").join("settings.local.json"));
    let mut rules = Permissions::default();
    for file in files {
        let Ok(text) = fs::read(&file) else { continue };
        let Ok(settings) = serde_json::from_slice::<Value>(&text) else {
            log::debug!("{}: not JSON; its rules are not read", file.display());
            continue;
        };
        let perms = &settings["permissions"];
        for (kind, into) in [
            ("allow", &mut rules.allow),
            ("ask", &mut rules.ask),
            ("deny", &mut rules.deny),
        ] {
            into.extend(
                perms[kind]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .map(str::to_owned),
            );
        }
    }
    rules
}

/// What a guide made of one hook: the hook's answer, and what to record.
#[derive(Debug, Default)]
pub(crate) struct Applied {
    pub answer: Option<String>,
    /// The `Input::Guide` to give the engine after the hook itself.
    pub record: Option<Input>,
}

/// Applies the guide (if any) of the hook's session to `event`.
pub(crate) fn apply(
    home: &Path,
    engine: &Engine,
    event: &str,
    payload: &Value,
    dirs: &SettingsDirs,
) -> Applied {
    if !matches!(
        event,
        "UserPromptSubmit"
            | "PreToolUse"
            | "PostToolUse"
            | "PostToolUseFailure"
            | "PostToolBatch"
            | "Stop"
    ) || !dir(home).is_dir()
    {
        return Applied::default();
    }
    let (Some(session), Some(cwd)) = (payload["session_id"].as_str(), payload["cwd"].as_str())
    else {
        return Applied::default();
    };
    let _lock = match lock(home) {
        Ok(lock) => lock,
        Err(e) => {
            log::warn!("guides: {e}");
            return Applied::default();
        }
    };
    let Some((path, mut g)) = find(home, Path::new(cwd)) else {
        return Applied::default();
    };
    let verdict = match event {
        "UserPromptSubmit" => guidance::on_prompt(&mut g, payload),
        "PreToolUse" if g.progress.phase == Phase::Active && g.belongs_to(session) => {
            let rules = permissions(Path::new(cwd), dirs);
            guidance::on_pre(&mut g, payload, &rules, &|v| engine.in_recorded_space(v))
        }
        "PostToolUse" | "PostToolUseFailure" => guidance::on_post(&mut g, payload),
        "PostToolBatch" => guidance::on_batch(&mut g, payload),
        "Stop" => guidance::on_stop(&mut g, payload),
        _ => Verdict::default(),
    };
    finish(&path, &g, session, verdict)
}

/// The pinned call `tool_use_id` of `session` did not reach its server as
/// pinned: that session's guide hands over.
pub(crate) fn pin_not_applied(home: &Path, session: &str, tool_use_id: &str) -> Applied {
    let Ok(_lock) = lock(home) else {
        return Applied::default();
    };
    let Some((path, mut g)) = list(home).into_iter().find(|(_, g)| g.belongs_to(session)) else {
        return Applied::default();
    };
    let verdict = guidance::pin_not_applied(&mut g, tool_use_id);
    finish(&path, &g, session, verdict)
}

fn finish(path: &Path, g: &Guide, session: &str, verdict: Verdict) -> Applied {
    if verdict.changed
        && let Err(e) = write_whole(path, g, Durable::Eventually)
    {
        log::warn!("guide {}: cannot save its progress: {e}", path.display());
    }
    Applied {
        answer: verdict.answer,
        record: verdict.note.map(|note| Input::Guide {
            session_id: session.to_owned(),
            note,
            pin: verdict.pin,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permission_rules_come_from_every_settings_file_the_session_reads() {
        let tmp = std::env::temp_dir().join(format!("bir-guides-{}", std::process::id()));
        let project = tmp.join("p");
        let user = tmp.join("conf");
        let managed = tmp.join("managed");
        for d in [project.join(".claude"), user.clone(), managed.clone()] {
            fs::create_dir_all(d).expect("dir");
        }
        let put = |p: PathBuf, v: serde_json::Value| fs::write(p, v.to_string()).expect("write");
        put(
            project.join(".claude/settings.json"),
            serde_json::json!({"permissions": {"allow": ["mcp__a__x"]}}),
        );
        fs::write(project.join(".claude/settings.local.json"), "{not json").expect("write");
        put(
            user.join("settings.json"),
            serde_json::json!({"permissions": {"ask": ["mcp__a"], "allow": ["Read"]}}),
        );
        put(
            managed.join("managed-settings.json"),
            serde_json::json!({"permissions": {"deny": ["Bash"]}}),
        );
        let dirs = SettingsDirs::from_query(&format!(
            "correlate=inject&claude_config={}&claude_managed={}&claude_config_bogus=x",
            crate::codec::percent_encode(user.to_string_lossy().as_bytes(), false, false),
            crate::codec::percent_encode(managed.to_string_lossy().as_bytes(), false, false),
        ));
        assert_eq!(dirs.user.as_deref(), Some(user.as_path()));
        let rules = permissions(&project, &dirs);
        assert_eq!(rules.allow, vec!["Read".to_owned(), "mcp__a__x".to_owned()]);
        assert_eq!(rules.ask, vec!["mcp__a".to_owned()]);
        assert_eq!(rules.deny, vec!["Bash".to_owned()]);
        // Without the session's dirs only the project's files count.
        let rules = permissions(&project, &SettingsDirs::default());
        assert_eq!(rules.allow, vec!["mcp__a__x".to_owned()]);
        assert!(rules.ask.is_empty());
        // Relative paths in the query are ignored.
        assert_eq!(SettingsDirs::from_query("claude_config=rel/dir").user, None);
        let _ = fs::remove_dir_all(&tmp);
    }

    #[test]
    fn guide_files_are_private_and_found_from_below_the_project() {
        let home = std::env::temp_dir().join(format!("bir-guides-home-{}", std::process::id()));
        let _ = fs::remove_dir_all(&home);
        fs::create_dir_all(&home).expect("home");
        let g: Guide = serde_json::from_value(serde_json::json!({
            "schema": guidance::SCHEMA, "scenario": "x", "project": "/work/proj",
            "armedAt": "2026-12-02T00:00:00Z", "maxExtra": 5, "maxNudges": 1, "steps": []}))
        .expect("a guide");
        let path = file_for(&home, "/work/proj");
        {
            let _lock = lock(&home).expect("lock");
            write(&path, &g).expect("write");
        }
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(&path).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let (found, back) = find(&home, Path::new("/work/proj/sub/dir")).expect("found");
        assert_eq!((found, back), (path, g));
        assert!(find(&home, Path::new("/work/other")).is_none());
        assert_eq!(list(&home).len(), 1);
        let _ = fs::remove_dir_all(&home);
    }

    fn engine() -> Engine {
        Engine::new(crate::bound::EngineConfig {
            redact: crate::redact::RedactConfig::default(),
            payload_cap: 64 * 1024,
            idle_end: std::time::Duration::from_secs(60),
            join_grace: std::time::Duration::from_secs(5),
            fingerprint_window: std::time::Duration::from_secs(60),
        })
    }

    #[test]
    fn the_daemon_applies_a_guide_and_keeps_its_progress_in_the_file() {
        let home = std::env::temp_dir().join(format!("bir-guides-apply-{}", std::process::id()));
        let _ = fs::remove_dir_all(&home);
        fs::create_dir_all(&home).expect("home");
        let engine = engine();
        let project = "/work/guided-project";
        let hook = |event: &str, extra: serde_json::Value| {
            let mut p = serde_json::json!({"session_id": "sess", "cwd": format!("{project}/sub"),
                                           "hook_event_name": event});
            if let (Some(p), serde_json::Value::Object(extra)) = (p.as_object_mut(), extra) {
                p.extend(extra);
            }
            p
        };
        let none = SettingsDirs::default();
        let prompt = || {
            let p = hook("UserPromptSubmit", serde_json::json!({"prompt": "go"}));
            apply(&home, &engine, "UserPromptSubmit", &p, &none)
        };
        // No guide was ever armed: nothing, and no directory made.
        let got = prompt();
        assert!(got.answer.is_none() && got.record.is_none());
        assert!(!dir(&home).exists());
        let g: Guide = serde_json::from_value(serde_json::json!({
            "schema": guidance::SCHEMA, "scenario": "x", "project": project,
            "armedAt": "2026-12-02T00:00:00Z", "maxExtra": 5, "maxNudges": 1,
            "steps": [{"id": "s1", "tool": "mcp__everything__echo", "label": "everything/echo",
                       "args": {"message": "world"}, "slots": ["/message"],
                       "pins": {"/message": "world"}}]}))
        .expect("a guide");
        let path = file_for(&home, project);
        {
            let _lock = lock(&home).expect("lock");
            write(&path, &g).expect("write");
        }
        let got = prompt();
        assert!(got.answer.expect("outline").contains("additionalContext"));
        assert!(matches!(got.record, Some(Input::Guide { .. })));
        let pre = hook(
            "PreToolUse",
            serde_json::json!({"tool_name": "mcp__everything__echo",
            "tool_use_id": "toolu_1", "tool_input": {"message": "moon"},
            "permission_mode": "default"}),
        );
        // Events a guide does not answer.
        let other = apply(&home, &engine, "Notification", &pre, &none);
        assert!(other.answer.is_none() && other.record.is_none());
        // The session's user settings allow the tool: the pin may allow.
        let user = home.join("claude-conf");
        fs::create_dir_all(&user).expect("dir");
        fs::write(
            user.join("settings.json"),
            r#"{"permissions": {"allow": ["mcp__everything__echo"]}}"#,
        )
        .expect("write");
        let dirs = SettingsDirs {
            user: Some(user),
            managed: None,
        };
        let got = apply(&home, &engine, "PreToolUse", &pre, &dirs);
        let answer: serde_json::Value =
            serde_json::from_str(&got.answer.expect("a pin")).expect("JSON");
        assert_eq!(answer["hookSpecificOutput"]["permissionDecision"], "allow");
        assert_eq!(
            answer["hookSpecificOutput"]["updatedInput"],
            serde_json::json!({"message": "world"})
        );
        match got.record {
            Some(Input::Guide {
                pin: Some((id, args)),
                ..
            }) => {
                assert_eq!(
                    (id.as_str(), args),
                    ("toolu_1", serde_json::json!({"message": "world"}))
                )
            }
            other => panic!("a pin to record, got {other:?}"),
        }
        let saved = read(&path).expect("read").expect("a guide");
        assert_eq!(
            (saved.progress.phase, saved.progress.pinned),
            (Phase::Done, 1)
        );
        // The proxy saw other arguments: the guide hands over.
        let got = pin_not_applied(&home, "sess", "toolu_1");
        assert!(matches!(got.record, Some(Input::Guide { .. })));
        let saved = read(&path).expect("read").expect("a guide");
        assert_eq!(saved.progress.phase, Phase::HandedOver);
        assert!(
            saved
                .progress
                .reason
                .expect("why")
                .starts_with("pin-not-applied")
        );
        let _ = fs::remove_dir_all(&home);
    }
}
