#!/usr/bin/env python3
"""What bir's hooks cost a real Claude Code session, next to the host's own
hook dispatch (bench/README.md, "Hooks at the host's floor").

The real Claude Code (.peers/cc, 2.1.332) runs offline against the shared
harness's fake Anthropic API (../shared/e2e/run-claude.sh): one `claude -p`
session whose scripted model makes CALLS Bash calls (one a message), then
answers. Modes, interleaved round by round so a drifting load hits each
alike:

  none          no hooks
  floor-http    the events bir registers, as HTTP hooks to a server that
                answers 200 at once (bench/hook_floor.c, a C server on
                127.0.0.1 with a thread per connection), with
                SessionStart and SessionEnd as command hooks running `true`
                (bir's shape)
  floor-command the same events as command hooks running `true`
  floor-http-all (only with --modes) floor-http without bir's matchers:
                PreToolUse on every tool, what the matcher saves
  bir-command   `bir install --hooks command`
  bir-http      `bir install --hooks http` (the default)

The time is the `claude` process's wall time (run-claude.sh's wall_s).
After every bir session the bench waits for its run and checks that it
recorded every call. Then, against the bir-http mode's daemon: the latency
of one hook post on its hook port (realistic PreToolUse/PostToolUse
payloads, one connection per post as Claude Code makes them) and a paced
1,000 posts/s for BENCH_HOOK_SECS seconds (posts not answered 200 are
"dropped").

    python3 bench/hooks_session.py [--rounds 5] [--calls 40] [--bir target/release/bir]
        [--harness ../shared/e2e] [--cc .peers/cc] [--keep]

Prints a Markdown table (medians, min-max, ratios) and the load average
before and after.
"""
import argparse
import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MODES = ["none", "floor-http", "floor-command", "bir-command", "bir-http"]


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def script(calls):
    turns = [{"content": [
        {"type": "text", "text": f"Step {i}."},
        {"type": "tool_use", "name": "Bash",
         "input": {"command": f"echo hook-bench-{i}", "description": f"Step {i}"}}]}
        for i in range(1, calls + 1)]
    turns.append({"content": [{"type": "text", "text": "HOOK-BENCH done."}]})
    return {"turns": turns, "side_reply": "ok", "final_text": "HOOK-BENCH done."}


def bir_events(bir):
    """The events `bir install` registers, each with its transport and
    its matcher (None: every tool), read from what it writes (never
    written down twice)."""
    with tempfile.TemporaryDirectory() as d:
        conf, bh = os.path.join(d, "conf"), os.path.join(d, "bh")
        os.makedirs(conf)
        os.makedirs(bh, mode=0o700)
        env = clean_env(CLAUDE_CONFIG_DIR=conf, BIR_HOME=bh, HOME=d,
                        BIR_HOOKS_PATH=os.path.join(d, "bir-hooks"))
        subprocess.run([bir, "install", "--project", d, "--hooks", "http"], env=env,
                       check=True, capture_output=True)
        hooks = json.load(open(os.path.join(conf, "settings.json")))["hooks"]
    return {ev: (groups[-1]["hooks"][0]["type"], groups[-1].get("matcher"))
            for ev, groups in hooks.items()}


def clean_env(**extra):
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "BIR_SERVICE_URL": "off"}
    env.update(extra)
    return env


def floor_settings(events, http_port, matchers=True):
    hooks = {}
    for ev, (kind, matcher) in events.items():
        if not matchers:
            matcher = None
        if http_port and kind == "http":
            h = {"type": "http", "url": f"http://127.0.0.1:{http_port}/hook/{ev}", "timeout": 2}
        else:
            h = {"type": "command", "command": "true", "timeout": 5}
        group = {"hooks": [h]}
        if matcher is not None:
            group["matcher"] = matcher
        hooks[ev] = [group]
    return {"hooks": hooks}


class Mode:
    def __init__(self, name, work, args, events):
        self.name = name
        self.dir = os.path.join(work, name)
        self.scen = os.path.join(self.dir, "scen")
        self.conf = os.path.join(self.dir, "conf")
        self.bh = os.path.join(self.dir, "bh")
        self.args = args
        self.times = []
        self.recorded = []
        os.makedirs(self.scen)
        os.makedirs(self.conf)
        os.makedirs(self.bh, mode=0o700)
        json.dump(script(args.calls), open(os.path.join(self.scen, "script.json"), "w"))
        open(os.path.join(self.scen, "prompt.txt"), "w").write("Run the hook bench steps.\n")
        json.dump({}, open(os.path.join(self.conf, ".claude.json"), "w"))
        env_lines = [f"CLAUDE_CONFIG_DIR={self.conf}", f"BIR_HOME={self.bh}", "BIR_SERVICE_URL=off"]
        open(os.path.join(self.scen, "env"), "w").write("\n".join(env_lines) + "\n")
        if name.startswith("floor-"):
            http = name in ("floor-http", "floor-http-all")
            settings = floor_settings(events, args.floor_port if http else None,
                                      matchers=name != "floor-http-all")
            json.dump(settings, open(os.path.join(self.scen, "settings.json"), "w"))
        elif name.startswith("bir-"):
            bindir = os.path.join(self.dir, "bin")
            os.makedirs(bindir)
            os.symlink(os.path.abspath(args.bir), os.path.join(bindir, "bir-hooks"))
            env = clean_env(CLAUDE_CONFIG_DIR=self.conf, BIR_HOME=self.bh, HOME=self.dir,
                            BIR_HOOKS_PATH=os.path.join(bindir, "bir-hooks"),
                            BIR_CLAUDE_MANAGED_DIR=os.path.join(self.dir, "managed"))
            transport = name.split("-")[1]
            r = subprocess.run([args.bir, "install", "--project", self.dir, "--hooks", transport],
                               env=env, capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit(f"bir install failed: {r.stdout}{r.stderr}")

    def session(self, n):
        out = os.path.join(self.dir, f"out{n}")
        # A loaded machine makes a 40-call session slow: run-claude.sh's
        # default 120 s limit is not this bench's to impose.
        env = dict(os.environ, E2E_CC_DIR=self.args.cc, E2E_TIMEOUT=os.environ.get("E2E_TIMEOUT", "900"))
        subprocess.run([os.path.join(self.args.harness, "run-claude.sh"), self.scen, out],
                       env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        s = json.load(open(os.path.join(out, "logs", "summary.json")))
        res = s.get("result") or {}
        if s.get("exit_code") != 0 or res.get("is_error"):
            sys.exit(f"{self.name}: session {n} failed: {s}")
        return s["wall_s"], res.get("session_id"), out

    def recorded_calls(self, session_id, deadline_s=60):
        """Waits for the session's finished run; its tool calls."""
        env = clean_env(BIR_HOME=self.bh)
        end = time.time() + deadline_s
        while time.time() < end:
            r = subprocess.run([self.args.bir, "runs", "--json"], env=env, capture_output=True, text=True)
            for line in r.stdout.splitlines():
                run = json.loads(line)
                if run.get("tier") != "bound" or run.get("state") != "finished":
                    continue
                exp = subprocess.run([self.args.bir, "runs", "export", run["id"]], env=env,
                                     capture_output=True, text=True)
                try:
                    doc = json.loads(exp.stdout)
                except ValueError:
                    continue
                if doc["run"]["metadata"].get("sessionId") == session_id:
                    return doc["finish"]["metrics"]["toolCalls"]
            time.sleep(0.5)
        return None

    def daemon(self):
        try:
            d = json.load(open(os.path.join(self.bh, "control", "daemon.json")))
            h = json.load(open(os.path.join(self.bh, "control", "hooks.json")))
        except (OSError, ValueError):
            return None
        return d, h


class FloorServer:
    """bench/hook_floor.c, built into the work dir: a no-op HTTP hook
    server that exits when its stdin closes."""

    def __init__(self, work):
        exe = os.path.join(work, "hook_floor")
        subprocess.run(["cc", "-O2", "-pthread", "-o", exe, os.path.join(HERE, "hook_floor.c")],
                       check=True)
        self.proc = subprocess.Popen([exe], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.port = int(self.proc.stdout.readline())

    def stop(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


def post_latency(port, token, payloads, n):
    times = []
    for i in range(n):
        body = payloads[i % len(payloads)]
        t0 = time.perf_counter()
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        c.request("POST", f"/hook/{json.loads(body)['hook_event_name']}", body,
                  {"Content-Type": "application/json", "Authorization": f"Bearer {token}"})
        r = c.getresponse()
        r.read()
        c.close()
        times.append((time.perf_counter() - t0) * 1e3)
        if r.status != 200:
            raise SystemExit(f"hook post answered {r.status}")
    times.sort()
    return times[len(times) // 2], times[min(len(times) - 1, int(len(times) * 0.99))]


def paced(port, token, payloads, rate, secs, threads=8):
    sent, bad = [0], [0]
    lock = threading.Lock()
    per = rate / threads

    def worker(k):
        start = time.perf_counter()
        i = 0
        while True:
            due = start + i / per
            now = time.perf_counter()
            if due - start >= secs:
                break
            if due > now:
                time.sleep(due - now)
            body = payloads[(k + i) % len(payloads)]
            ok = False
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                c.request("POST", f"/hook/{json.loads(body)['hook_event_name']}", body,
                          {"Content-Type": "application/json", "Authorization": f"Bearer {token}"})
                r = c.getresponse()
                r.read()
                c.close()
                ok = r.status == 200
            except OSError:
                pass
            with lock:
                sent[0] += 1
                bad[0] += 0 if ok else 1
            i += 1

    ts = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
    t0 = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return sent[0], bad[0], time.perf_counter() - t0


def hook_payloads(transcript):
    out = []
    for i in range(1, 21):
        base = {"session_id": "bench-post-session", "transcript_path": transcript,
                "cwd": "/tmp", "permission_mode": "bypassPermissions", "tool_name": "Bash",
                "tool_input": {"command": f"echo {i}", "description": "step"},
                "tool_use_id": f"toolu_bench_{i}"}
        out.append(json.dumps(dict(base, hook_event_name="PreToolUse")))
        out.append(json.dumps(dict(base, hook_event_name="PostToolUse",
                                   tool_response={"stdout": str(i), "stderr": "", "interrupted": False},
                                   duration_ms=3)))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=40)
    ap.add_argument("--bir", default=os.path.join(ROOT, "target/release/bir"))
    ap.add_argument("--harness", default=os.path.join(os.path.dirname(ROOT), "shared/e2e"))
    ap.add_argument("--cc", default=os.path.join(ROOT, ".peers/cc"))
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    args.bir = os.path.abspath(args.bir)
    args.harness = os.path.abspath(args.harness)
    args.cc = os.path.abspath(args.cc)
    for need in (args.bir, os.path.join(args.harness, "run-claude.sh"),
                 os.path.join(args.cc, "node_modules/.bin/claude")):
        if not os.path.exists(need):
            sys.exit(f"missing {need}")
    events = bir_events(args.bir)
    work = tempfile.mkdtemp(prefix="hb-", dir="/tmp")
    floor_server = FloorServer(work)
    args.floor_port = floor_server.port
    load_before = loadavg()
    try:
        modes = [Mode(m, work, args, events) for m in args.modes.split(",")]
        # A warm-up session per bir mode (its daemon starts here).
        for m in modes:
            if m.name.startswith("bir-"):
                m.session("w")
        for rnd in range(args.rounds):
            for m in (modes if rnd % 2 == 0 else list(reversed(modes))):
                wall, sid, _ = m.session(rnd)
                m.times.append(wall)
                if m.name.startswith("bir-"):
                    m.recorded.append(m.recorded_calls(sid))
                print(f"round {rnd + 1} {m.name}: {wall:.2f} s", file=sys.stderr, flush=True)
        load_after = loadavg()
        med = {m.name: statistics.median(m.times) for m in modes}
        http_events = sum(1 for k, _ in events.values() if k == "http")
        print(f"\n{args.calls} Bash calls, {args.rounds} interleaved rounds; bir registers "
              f"{len(events)} events ({http_events} over HTTP with --hooks http); "
              f"load average {load_before} before, {load_after} after\n")
        print("| mode | median s | min-max s | vs none | vs its floor | calls recorded |")
        print("| --- | ---: | ---: | ---: | ---: | --- |")
        floor = {"bir-http": "floor-http", "bir-command": "floor-command"}
        for m in modes:
            vs_floor = (f"{med[m.name] / med[floor[m.name]]:.3f}x" if floor.get(m.name) in med else "")
            vs_none = f"{med[m.name] / med['none']:.3f}x" if "none" in med else ""
            rec = ""
            if m.recorded:
                rec = f"{sum(1 for r in m.recorded if r == args.calls)}/{len(m.recorded)} runs with all {args.calls}"
                if any(r != args.calls for r in m.recorded):
                    rec += f" (got {m.recorded})"
            print(f"| {m.name} | {med[m.name]:.2f} | {min(m.times):.2f}-{max(m.times):.2f} | {vs_none} | {vs_floor} | {rec} |")
        http_mode = next((m for m in modes if m.name == "bir-http"), None)
        found = http_mode and http_mode.daemon()
        if found:
            _, hook = found
            transcript = os.path.join(work, "bench-transcript.jsonl")
            open(transcript, "w").write("")
            payloads = hook_payloads(transcript)
            p50, p99 = post_latency(hook["port"], hook["token"], payloads, 2000)
            secs = float(os.environ.get("BENCH_HOOK_SECS", "5"))
            sent, bad, took = paced(hook["port"], hook["token"], payloads, 1000, secs)
            print(f"\nDaemon, one hook post on its hook port (2,000 posts, one connection each, "
                  f"Python client): p50 {p50:.3f} ms, p99 {p99:.3f} ms")
            print(f"Paced 1,000 posts/s for {secs:.0f} s (8 threads): {sent} sent in {took:.1f} s "
                  f"({sent / took:.0f}/s), {bad} not answered 200; load average {loadavg()}")
    finally:
        for mode_dir in os.listdir(work):
            bh = os.path.join(work, mode_dir, "bh")
            if os.path.isdir(bh):
                subprocess.run([args.bir, "down"], env=clean_env(BIR_HOME=bh), capture_output=True)
        floor_server.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"kept {work}", file=sys.stderr)


if __name__ == "__main__":
    main()
