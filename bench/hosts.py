#!/usr/bin/env python3
"""What recording costs the Codex CLI and the Gemini CLI, next to Claude Code.

    python3 bench/hosts.py [hooks] [sessions] [--rounds N] [--pairs N] [--hosts codex,gemini]

hooks: one hook invocation, whole process, as each host runs it — Claude
  Code `sh -c '<bir-hooks> <Event>'`, Codex `/bin/bash -c '<command>'`,
  Gemini `bash -c '<command>'` (seen in their process trees), the command
  as `bir install --client HOST` registers it (a bash post script for every
  event, which runs `<bir-hooks> --host HOST <Event>` only when no daemon
  listens) — with the payloads of a whole real session of each
  (tests/fixtures/bound/bash-tool.jsonl for Claude Code,
  tests/fixtures/hosts/<host>/hooks.jsonl), each replay under a fresh session
  id, the daemon already running. The hosts' replays are interleaved round by
  round, with `sh -c /bin/true` and `bash -c /bin/true` timed beside each
  hook as the floor. Medians and p90 per host, per session the number of
  hooks and their summed time.
sessions: a whole offline session of the real CLI (tests/e2e/hosts: the
  same scripted session as the e2e) without bir (the everything server run
  directly, no hooks) and with bir (`bir install --client <host>`: hooks and
  bir-proxy; if this bir registers no hooks for the host, hand-written
  ones), pairs interleaved, one warm-up of each first; median wall times and
  their ratio (target <= 1.10).

Knobs: BIR_BIN (default target/release/bir, else target/debug/bir): the
binary the hooks and bir-proxy run; BIR_INSTALL_BIN (default BIR_BIN): the
one that runs `bir install` (a debug build of newer code may write the
config while a release build of the same hook path runs it).
Figures go to stdout as Markdown tables.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
HOSTS_E2E = os.path.join(REPO, "tests", "e2e", "hosts")
VERSIONS = {"codex": "0.169.0", "gemini": "0.61.0"}


def bir_bin() -> str:
    if os.environ.get("BIR_BIN"):
        return os.path.abspath(os.environ["BIR_BIN"])
    for kind in ("release", "debug"):
        p = os.path.join(REPO, "target", kind, "bir")
        if os.path.exists(p):
            return p
    sys.exit("no bir binary: cargo build --release (or set BIR_BIN)")


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def clean_env(tmp: str) -> dict:
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": os.path.join(tmp, "home"),
            "BIR_HOME": os.path.join(tmp, "birhome"), "BIR_SERVICE_URL": "off", "LANG": "C.UTF-8"}


# ------------------------------------------------------------------------ hooks
def session_events(host: str) -> list[tuple[str, dict]]:
    """(event, payload) of one real session, in order."""
    if host == "claude":
        path = os.path.join(REPO, "tests", "fixtures", "bound", "bash-tool.jsonl")
        recs = [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]
        return [(r["event"], r["payload"]) for r in recs if r.get("source") == "hook"]
    path = os.path.join(REPO, "tests", "fixtures", "hosts", host, "hooks.jsonl")
    recs = [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]
    # Only the hooks the host starts under bir's registration: the capture
    # logged every event, bir registers fewer, some behind a matcher.
    matchers = registered(host)
    return [(r["registered_event"], r["payload"]) for r in recs
            if fires(matchers, r["registered_event"], r["payload"])]


def install_hooks(host: str, env: dict, tmp: str) -> dict:
    """The `hooks` object `bir install --client HOST` writes with `env`
    (its HOME, BIR_HOME; CODEX_HOME under `tmp`)."""
    installer = os.path.abspath(os.environ.get("BIR_INSTALL_BIN") or bir_bin())
    env = dict(env, CODEX_HOME=os.path.join(tmp, "codex"))
    proj = os.path.join(tmp, f"proj-{host}")
    os.makedirs(proj, exist_ok=True)
    subprocess.run([installer, "install", "--client", host, "--project", proj],
                   env=env, cwd=proj, capture_output=True, timeout=60)
    path = (os.path.join(tmp, "codex", "hooks.json") if host == "codex"
            else os.path.join(env["HOME"], ".gemini", "settings.json"))
    return json.load(open(path, encoding="utf-8")).get("hooks", {})


def bir_entry(entries: list) -> dict:
    return next((e for e in entries if "bir" in json.dumps(e) or "X-Bir-Hook" in json.dumps(e)), {})


def registered(host: str) -> dict[str, str | None]:
    """event -> matcher of the hooks `bir install --client HOST` writes."""
    with tempfile.TemporaryDirectory() as tmp:
        hooks = install_hooks(host, clean_env(tmp), tmp)
    return {ev: bir_entry(entries).get("matcher") for ev, entries in hooks.items()}


def fires(matchers: dict, event: str, payload: dict) -> bool:
    """Whether the host starts bir's hook for this event and payload."""
    if event not in matchers:
        return False
    m = matchers[event]
    if m in (None, "", "*"):
        return True
    if "tool_name" in payload:
        return re.search(m, payload["tool_name"]) is not None
    return m == payload.get("trigger", payload.get("source"))


def hook_command(host: str, hooks: str, event: str, commands: dict | None = None) -> list[str]:
    """What the host runs for `event`: Claude Code `sh -c '<bir-hooks>
    <Event>'`; Codex and Gemini `bash -c '<the registered command>'`
    (`commands`: event -> command as `bir install` wrote it; without it,
    `<bir-hooks> --host HOST <Event>`)."""
    if host == "claude":
        return ["sh", "-c", f"{hooks} {event}"]
    shell = "/bin/bash" if host == "codex" else "bash"
    if commands and event in commands:
        return [shell, "-c", commands[event]]
    return [shell, "-c", f"{hooks} --host {host} {event}"]


def timed(cmd: list[str], stdin: bytes, env: dict, cwd: str) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, input=stdin, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=False)
    return (time.perf_counter() - t0) * 1000


def bench_hooks(hosts: list[str], rounds: int, bir: str) -> None:
    tmp = tempfile.mkdtemp(prefix="bir-bench-hosts.")
    try:
        env = clean_env(tmp)
        os.makedirs(env["HOME"])
        os.makedirs(env["BIR_HOME"], mode=0o700)
        hooks = os.path.join(tmp, "bir-hooks")
        os.symlink(bir, hooks)
        cwd = os.path.join(tmp, "project")
        os.makedirs(cwd)
        events = {h: session_events(h) for h in ["claude"] + hosts}
        # The commands `bir install --client HOST` registers here (same
        # BIR_HOME: its post scripts name this daemon's hook port and token),
        # installed before the daemon starts so that it takes the hook token.
        commands = {}
        for h in hosts:
            installed = install_hooks(h, dict(env, BIR_HOOKS_PATH=hooks), tmp)
            commands[h] = {ev: bir_entry(entries).get("hooks", [{}])[0].get("command")
                           for ev, entries in installed.items()}
        # The install's ledger would record only in its project: without it
        # every host's session is recorded, as before (the hook address stays).
        os.remove(os.path.join(env["BIR_HOME"], "installed.json"))
        # Start the daemon once (the first hook of the day pays that, not this bench).
        timed(hook_command("claude", hooks, "SessionStart"), json.dumps(events["claude"][0][1]).encode(), env, cwd)
        times = {h: [] for h in events}
        # Codex's and Gemini's hooks by kind: the post script, or bir-hooks
        # (`--hooks command`, or an install by an older bir).
        kinds = {}
        floor = {"sh": [], "bash": []}
        per_session = {h: [] for h in events}
        order = list(events)
        for r in range(rounds):
            random.Random(r).shuffle(order)
            for h in order:
                sid = str(uuid.uuid4())
                total = 0.0
                for event, payload in events[h]:
                    text = json.dumps(payload, ensure_ascii=False)
                    old = payload.get("session_id") if isinstance(payload, dict) else None
                    data = (text.replace(old, sid) if old else text).encode()
                    ms = timed(hook_command(h, hooks, event, commands.get(h)), data, env, cwd)
                    times[h].append(ms)
                    if h in commands:
                        kind = "post script" if "/dev/tcp/" in (commands[h].get(event) or "") else "bir-hooks"
                        kinds.setdefault((h, kind), []).append(ms)
                    total += ms
                    floor["bash" if h in ("codex", "gemini") else "sh"].append(
                        timed(["bash" if h in ("codex", "gemini") else "sh", "-c", "/bin/true"], b"", env, cwd))
                per_session[h].append(total)
        # The replays must have reached the daemon (a post script whose
        # connect fails is quicker than one that posts): each host's runs.
        every_run = ["--limit", str(rounds * len(events) + 1)]  # `bir runs` lists 20 by default
        listed = subprocess.run([bir, "runs", "--json", *every_run], env=env, cwd=cwd, capture_output=True,
                                text=True, check=False).stdout
        told = sum(1 for line in listed.splitlines() if line.strip() and json.loads(line).get("toolCalls", 0) > 0)
        if told < rounds * len(events):
            print(f"\nWARNING: only {told} of {rounds * len(events)} replayed sessions were recorded with their "
                  "steps: the figures below time hooks that did not reach the daemon")
        subprocess.run([bir, "down"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        load = open("/proc/loadavg").read().split()[:3]
        print(f"\n### One hook, whole process ({rounds} replays of a session per host, interleaved; "
              f"bir {os.path.relpath(bir, REPO)}; load average {' '.join(load)})\n")
        print("| host | shell | hooks per session | p50 ms | p90 ms | p50 over the shell's `/bin/true` | p50 / Claude Code's | hooks' time per session, median ms |")
        print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        f_sh, f_bash = statistics.median(floor["sh"]), statistics.median(floor["bash"] or floor["sh"])
        base = statistics.median(times["claude"])
        for h in events:
            xs = times[h]
            sh = "sh" if h == "claude" else "bash"
            f = f_sh if h == "claude" else f_bash
            print(f"| {'claude-code' if h == 'claude' else h} | `{sh} -c` | {len(events[h])} | {statistics.median(xs):.2f} | "
                  f"{pct(xs, 0.9):.2f} | {statistics.median(xs) - f:+.2f} | {statistics.median(xs) / base:.2f}x | "
                  f"{statistics.median(per_session[h]):.0f} |")
        print(f"| `/bin/true` | `sh -c` | | {f_sh:.2f} | {pct(floor['sh'], 0.9):.2f} | 0 | | |")
        if floor["bash"]:
            print(f"| `/bin/true` | `bash -c` | | {f_bash:.2f} | {pct(floor['bash'], 0.9):.2f} | 0 | | |")
        if kinds:
            print("\n| host | hook command | hooks per session | p50 ms | p90 ms | p50 / Claude Code's |")
            print("| --- | --- | ---: | ---: | ---: | ---: |")
            for (h, kind), xs in sorted(kinds.items()):
                print(f"| {h} | {kind} | {len(xs) // rounds} | {statistics.median(xs):.2f} | {pct(xs, 0.9):.2f} | "
                      f"{statistics.median(xs) / base:.2f}x |")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ------------------------------------------------------------------------ sessions
def start_api(host: str, out: str) -> subprocess.Popen:
    os.makedirs(os.path.join(out, "logs"), exist_ok=True)
    portfile = os.path.join(out, "logs", "fake-api.port")
    proc = subprocess.Popen([sys.executable, os.path.join(HOSTS_E2E, "fake_model_api.py"), "--api", host,
                             "--script", os.path.join(HOSTS_E2E, host, "script.json"),
                             "--log", os.path.join(out, "logs", "requests.jsonl"), "--port-file", portfile],
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 30
    while not (os.path.exists(portfile) and open(portfile).read().strip()):
        if time.time() > deadline or proc.poll() is not None:
            proc.kill()
            sys.exit(f"the fake {host} API did not start")
        time.sleep(0.05)
    return proc


def one_session(host: str, tmp: str, n: int, with_bir: bool, bir: str) -> tuple[float, bool]:
    """(wall seconds of the CLI, whether it succeeded) for one fresh session."""
    out = os.path.join(tmp, f"{host}-{n}-{'with' if with_bir else 'without'}")
    os.makedirs(os.path.join(out, "project"))
    with open(os.path.join(out, "project", "notes.txt"), "w") as f:
        f.write("the notes say: hosts-e2e-notes\n")
    api = start_api(host, out)
    try:
        port = open(os.path.join(out, "logs", "fake-api.port")).read().strip()
        subprocess.run([sys.executable, os.path.join(HOSTS_E2E, "make_config.py"), host, out, "--port", port,
                        "--mcp", "bare", "--hooks", "none"], check=True)
        birhome = os.path.join(tmp, "birhome")
        extra_args = ""
        if with_bir:
            env = dict(clean_env(tmp), HOME=os.path.join(out, "home"), CODEX_HOME=os.path.join(out, "codex"),
                       PATH=os.path.join(REPO, ".peers", "hosts", "node_modules", ".bin") + ":/usr/local/bin:/usr/bin:/bin",
                       BIR_HOME=birhome, BIR_PROXY_PATH=os.path.join(tmp, "bin", "bir-proxy"),
                       BIR_HOOKS_PATH=os.path.join(tmp, "bin", "bir-hooks"))
            installer = os.path.abspath(os.environ.get("BIR_INSTALL_BIN") or bir)
            subprocess.run([installer, "install", "--client", host, "--project", os.path.join(out, "project")],
                           env=env, cwd=os.path.join(out, "project"), stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, check=False)
            files = [os.path.join(out, "codex", "hooks.json"), os.path.join(out, "home", ".gemini", "settings.json")]
            registered = any(os.path.exists(p) and f"bir-hooks --host {host}" in open(p).read() for p in files)
            if not registered:
                subprocess.run([sys.executable, os.path.join(HOSTS_E2E, "make_config.py"), host, out, "--port", port,
                                "--mcp", "proxy", "--bir-proxy", os.path.join(tmp, "bin", "bir-proxy"),
                                "--hooks", "bir", "--bir-hooks", os.path.join(tmp, "bin", "bir-hooks")], check=True)
                if host == "codex":
                    extra_args = "--dangerously-bypass-hook-trust"
            elif host == "codex" and "trusted_hash" not in open(os.path.join(out, "codex", "config.toml")).read():
                extra_args = "--dangerously-bypass-hook-trust"
        env = dict(os.environ, HOST_EXTRA_ENV=f"BIR_HOME={birhome} BIR_SERVICE_URL=off", HOST_EXTRA_ARGS=extra_args)
        rc = subprocess.run([os.path.join(HOSTS_E2E, "run-host.sh"), host, out], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False).returncode
        wall = float(open(os.path.join(out, "logs", "wall.txt")).read())
        return wall, rc == 0
    finally:
        api.kill()
        api.wait()


def bench_sessions(hosts: list[str], pairs: int, bir: str) -> None:
    installer = os.environ.get("BIR_INSTALL_BIN")
    print(f"\n### A whole offline session, with bir and without ({pairs} interleaved pairs per host after one "
          f"warm-up of each; bir {os.path.relpath(bir, REPO)}"
          + (f", installed by {os.path.relpath(os.path.abspath(installer), REPO)}" if installer else "")
          + f"; load average {' '.join(open('/proc/loadavg').read().split()[:3])})\n")
    print("| host | without bir, median s | with bir, median s | with / without | runs (each way) | failed sessions |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for host in hosts:
        tmp = tempfile.mkdtemp(prefix=f"bir-bench-{host}.")
        try:
            os.makedirs(os.path.join(tmp, "bin"))
            os.makedirs(os.path.join(tmp, "birhome"), mode=0o700)
            for name in ("bir-proxy", "bir-hooks"):
                os.symlink(bir, os.path.join(tmp, "bin", name))
            one_session(host, tmp, 0, False, bir)
            one_session(host, tmp, 0, True, bir)
            without, with_, failed = [], [], 0
            for n in range(1, pairs + 1):
                for w in ([False, True] if n % 2 else [True, False]):
                    wall, ok = one_session(host, tmp, n, w, bir)
                    failed += not ok
                    (with_ if w else without).append(wall)
            subprocess.run([bir, "down"], env=dict(clean_env(tmp), BIR_HOME=os.path.join(tmp, "birhome")),
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
            m0, m1 = statistics.median(without), statistics.median(with_)
            print(f"| {host} {VERSIONS[host]} | {m0:.2f} | {m1:.2f} | {m1 / m0:.3f}x | {pairs} | {failed} |")
            print(f"<!-- {host}: without {[round(x, 2) for x in without]}, with {[round(x, 2) for x in with_]} -->")
            sys.stdout.flush()
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", nargs="*", default=["hooks", "sessions"])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--hosts", default="codex,gemini")
    a = ap.parse_args()
    bir = bir_bin()
    hosts = [h for h in a.hosts.split(",") if h]
    if "hooks" in a.what:
        bench_hooks(hosts, a.rounds, bir)
    if "sessions" in a.what:
        bench_sessions(hosts, a.pairs, bir)


if __name__ == "__main__":
    main()
