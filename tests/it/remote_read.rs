//! The read side of the recording service: `bir runs --remote`,
//! `bir runs show|export --remote` against the fake service (127.0.0.1),
//! which here also keeps what it was sent and serves it back
//! (`GET /recordings/runs`, `GET /recordings/runs/{id}`).

use serde_json::{Map, Value, json};

use crate::remote::{
    FakeService, NEW_TOKEN, REFRESH, Reply, Req, TOKEN, closed_port_url, proxy, run_bir, session,
    write_creds,
};
use crate::support::TempDir;

/// The runs the fake was sent, each gathered into one document the way
/// `service::read` documents it: the run's body, the `PATCH`ed servers,
/// the finish fields, the steps as posted.
fn runs_sent(seen: &[Req]) -> Vec<Value> {
    let mut runs: Vec<Value> = Vec::new();
    for r in seen {
        let path = r.path.trim_start_matches("/recordings/runs");
        let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        match (r.method.as_str(), parts.as_slice()) {
            // A repeated id (a retry, `bir sync`) is the same row.
            ("POST", [""]) => {
                let mut doc = r.json();
                if runs.iter().any(|d| d["id"] == doc["id"]) {
                    continue;
                }
                doc["steps"] = json!([]);
                runs.push(doc);
            }
            (method, [id, rest @ ..]) if !id.is_empty() => {
                let Some(doc) = runs.iter_mut().find(|d| d["id"] == *id) else {
                    continue;
                };
                match (method, rest) {
                    ("PATCH", []) => {
                        let servers = r.json()["metadata"]["servers"].clone();
                        let meta = doc["metadata"].as_object_mut().expect("metadata");
                        let merged = meta
                            .entry("servers")
                            .or_insert_with(|| Value::Object(Map::new()));
                        for (k, v) in servers.as_object().into_iter().flatten() {
                            merged[k] = v.clone();
                        }
                    }
                    ("POST", ["steps"]) => {
                        let step = r.json();
                        let steps = doc["steps"].as_array_mut().expect("steps");
                        if !steps.iter().any(|s| s["id"] == step["id"]) {
                            steps.push(step);
                        }
                    }
                    ("POST", ["finish"]) => {
                        for (k, v) in r.json().as_object().into_iter().flatten() {
                            doc[k] = v.clone();
                        }
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
    runs.sort_by(|a, b| b["startedAt"].as_str().cmp(&a["startedAt"].as_str()));
    runs
}

/// The fake with its read API: writes are accepted, reads answered from
/// what was written.
fn keeping(r: &Req, seen: &[Req]) -> Reply {
    if r.method != "GET" {
        return Reply::Status(200);
    }
    let runs = runs_sent(seen);
    let (path, query) = r.path.split_once('?').unwrap_or((&r.path, ""));
    if path == "/recordings/runs" {
        let limit = query
            .strip_prefix("limit=")
            .and_then(|n| n.parse::<usize>().ok())
            .unwrap_or(20);
        let page: Vec<Value> = runs.into_iter().take(limit).collect();
        return Reply::With(200, vec![], json!({"runs": page}).to_string());
    }
    match path
        .strip_prefix("/recordings/runs/")
        .and_then(|id| runs.into_iter().find(|d| d["id"] == id))
    {
        Some(doc) => Reply::With(200, vec![], doc.to_string()),
        None => Reply::Status(404),
    }
}

fn bir_ok(dir: &TempDir, service: &str, args: &[&str]) -> String {
    let out = run_bir(dir, service, args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "bir {args:?}: {stderr}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A session sent to the service is read back: listed, shown and exported
/// with the same rendering as the local copy of the same run.
#[test]
fn remote_runs_read_back_like_local_ones() {
    let dir = TempDir::new("remote-read");
    let service = FakeService::start(keeping);
    write_creds(&dir, &json!({"service": service.base, "token": TOKEN}));
    let (seen, _) = session(proxy(&dir, &service.base), 2);
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
    // Whatever the proxy had no time to send before it ended (a busy
    // machine) goes now: the service has the whole run.
    bir_ok(&dir, &service.base, &["sync"]);

    let local: Value = serde_json::from_str(
        bir_ok(&dir, &service.base, &["runs", "--json"])
            .lines()
            .next()
            .expect("a local run"),
    )
    .expect("json");
    let id = local["id"].as_str().expect("id").to_owned();
    let remote_list = bir_ok(&dir, &service.base, &["runs", "--remote", "--json"]);
    let remote: Value =
        serde_json::from_str(remote_list.lines().next().expect("a remote run")).expect("json");
    assert_eq!(remote, local, "the same summary, read from the service");

    let show_local = bir_ok(&dir, &service.base, &["runs", "show", &id, "--full"]);
    let show_remote = bir_ok(
        &dir,
        &service.base,
        &["runs", "show", "--remote", &id, "--full"],
    );
    assert!(show_remote.contains("echo"), "{show_remote}");
    assert_eq!(show_remote, show_local, "the same rendering");

    let export_local: Value =
        serde_json::from_str(&bir_ok(&dir, &service.base, &["runs", "export", &id])).expect("json");
    let export_remote: Value = serde_json::from_str(&bir_ok(
        &dir,
        &service.base,
        &["runs", "export", "--remote", &id],
    ))
    .expect("json");
    assert_eq!(
        export_remote["steps"], export_local["steps"],
        "the same steps"
    );
    assert_eq!(
        bir_ok(
            &dir,
            &service.base,
            &["runs", "show", "--remote", "latest", "--full"]
        ),
        show_local
    );
    let page = dir.join("remote.html");
    let page_arg = page.to_str().expect("utf-8").to_owned();
    bir_ok(
        &dir,
        &service.base,
        &["report", "--remote", &id, "-o", &page_arg],
    );
    let html = std::fs::read_to_string(&page).expect("the page");
    assert!(html.contains(&id), "the report names the run");
    // Every read carried the token; the scratch copies are gone.
    for r in service.requests().iter().filter(|r| r.method == "GET") {
        assert_eq!(r.header("Authorization"), Some(&*format!("Bearer {TOKEN}")));
    }
    let scratch = dir.join("home/.baseinstrunner/remote");
    assert!(
        std::fs::read_dir(&scratch).map_or(true, |mut d| d.next().is_none()),
        "scratch runs left behind"
    );

    let out = run_bir(
        &dir,
        &service.base,
        &["runs", "show", "--remote", "run_nope"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("has no run run_nope"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run_bir(&dir, &service.base, &["runs", "show", "--remote", "../x"]);
    assert_eq!(out.status.code(), Some(2), "not an id");
}

/// A refused token is refreshed once and the read sent again; the new
/// token is saved.
#[test]
fn remote_read_refreshes_a_refused_token() {
    let dir = TempDir::new("remote-read-401");
    let service = FakeService::start(|r, seen| {
        if r.path == "/auth/refresh" {
            return if r.json()["refreshToken"] == REFRESH {
                Reply::With(200, vec![], json!({"token": NEW_TOKEN}).to_string())
            } else {
                Reply::Status(400)
            };
        }
        if r.header("Authorization") != Some(&*format!("Bearer {NEW_TOKEN}")) {
            return Reply::Status(401);
        }
        keeping(r, seen)
    });
    write_creds(
        &dir,
        &json!({"service": service.base, "token": TOKEN, "refreshToken": REFRESH}),
    );
    let out = bir_ok(&dir, &service.base, &["runs", "--remote"]);
    assert!(out.contains("No runs on the recording service at"), "{out}");
    assert_eq!(
        service.lines(),
        [
            "GET /recordings/runs?limit=20",
            "POST /auth/refresh",
            "GET /recordings/runs?limit=20"
        ]
    );
    let saved = std::fs::read_to_string(dir.join("home/.baseinstrunner/credentials.json"))
        .expect("credentials");
    assert!(saved.contains(NEW_TOKEN));
}

/// No service, or one that cannot be reached: a clear error, exit 1.
#[test]
fn remote_read_without_a_reachable_service_says_so() {
    let dir = TempDir::new("remote-read-down");
    let url = closed_port_url();
    let out = run_bir(&dir, &url, &["runs", "--remote"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("cannot read runs from the recording service")
            && stderr.contains("unreachable"),
        "{stderr}"
    );
    let out = run_bir(&dir, "off", &["runs", "--remote"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("no recording service is configured"),
        "{stderr}"
    );
}
