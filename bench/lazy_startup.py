#!/usr/bin/env python3
"""Session start-up with five wrapped MCP servers: `bir-proxy` eager vs `--lazy`.

A host (this script) starts five `bir proxy [--lazy] -- <server>` processes at
once, as Claude Code does at the start of a session, and for each sends
`initialize`, `notifications/initialized` and `tools/list`; with `--claude` it
also sends `prompts/list` and `resources/list` when the server's capabilities
advertise them (what Claude Code does). It measures

* start-up: from spawning the five proxies to the last of those answers;
* RSS: the resident memory of every process of the five proxies' trees
  (proxies, servers, their children), summed, once all answered and again
  2 s later (the larger is reported: node servers keep growing a little).

Before measuring, one warm-up session per server records a snapshot (a tool
call), which `--lazy` answers from later. Each mode runs ROUNDS times; the
median is reported.

    python3 bench/lazy_startup.py [--bir target/release/bir] [--rounds 5] [--claude]

With `--real-claude`, the host is the real Claude Code (`.peers/cc`, driven
offline by the shared e2e harness's fake Anthropic API, `--harness`): the
five servers are the project's `.mcp.json`, each wrapped in `bir proxy
[--lazy]`, and one `claude -p` session per round and mode runs with
`MCP_CONNECTION_NONBLOCKING=0`, so Claude Code connects every server (its
`initialize` and lists) before it asks the model anything. It measures

* start-up: from spawning `claude` to the fake API receiving the session's
  first model request (the one carrying the tools; the script checks that
  every server's tools are in it). A session without MCP servers (`none`)
  gives Claude Code's own floor;
* RSS: the largest sum, sampled every 50 ms during the session, of the
  resident memory of the proxies' process trees (proxies, servers, their
  children), and how many processes ran under the proxies;
* session CPU: user+system time of `claude` and everything it waited for
  (proxies, servers), which the machine's load does not inflate much.

The warm-up session calls one tool of each server (recording the snapshots
`--lazy` answers from). Modes are interleaved round by round, so a machine
whose load drifts affects each alike; the load average is printed.

Needs the peers (`make peers`: `.peers/node_modules`, `.peers/venv`,
`.peers/cc`).
"""

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PEERS = ROOT / ".peers"

FASTMCP = """
from mcp.server.mcpserver import MCPServer as FastMCP
mcp = FastMCP("{name}")
@mcp.tool()
def {tool}(text: str) -> str:
    \"\"\"{doc}\"\"\"
    return text[::-1]
@mcp.tool()
def count_{tool}(text: str) -> int:
    \"\"\"How long the text is.\"\"\"
    return len(text)
mcp.run()
"""


def servers(scratch):
    node = shutil.which("node") or "node"
    nm = PEERS / "node_modules" / "@modelcontextprotocol"
    py = str(PEERS / "venv" / "bin" / "python")
    out = [
        ("everything", [node, str(nm / "server-everything" / "dist" / "index.js"), "stdio"], "echo", {"message": "hi"}),
        ("memory", [node, str(nm / "server-memory" / "dist" / "index.js")], "read_graph", {}),
    ]
    for name, tool, doc in [
        ("notes", "reverse", "Reverses a note."),
        ("weather", "forecast", "A forecast, reversed."),
        ("search", "lookup", "Looks a word up."),
    ]:
        script = scratch / f"{name}.py"
        script.write_text(FASTMCP.format(name=name, tool=tool, doc=doc))
        out.append((name, [py, str(script)], tool, {"text": "abc"}))
    return out


class Proxy:
    def __init__(self, bir, name, cmd, lazy, env):
        args = [bir, "proxy", "--server-name", name]
        if lazy:
            args.append("--lazy")
        self.p = subprocess.Popen(
            args + ["--"] + cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
        self.name = name
        self.next_id = 0

    def send(self, msg):
        self.p.stdin.write((json.dumps(msg) + "\n").encode())
        self.p.stdin.flush()

    def request(self, method, params=None):
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        while True:
            line = self.p.stdout.readline()
            if not line:
                raise RuntimeError(f"{self.name}: closed before answering {method}")
            reply = json.loads(line)
            if reply.get("id") == self.next_id:
                return reply

    def open_session(self, claude):
        init = self.request(
            "initialize",
            {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}},
        )
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        self.request("tools/list")
        caps = init.get("result", {}).get("capabilities", {})
        if claude:
            if "prompts" in caps:
                self.request("prompts/list")
            if "resources" in caps:
                self.request("resources/list")

    def close(self):
        try:
            self.p.stdin.close()
        except OSError:
            pass
        try:
            self.p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.p.pid, 9)
            self.p.wait()


def process_children():
    """pid -> its children's pids, from /proc."""
    children = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(d))
    return children


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree_rss_kib(root_pids, children=None):
    """Sum of VmRSS over the process trees rooted at root_pids."""
    children = process_children() if children is None else children
    return sum(rss_kib(pid) for pid in tree_of(root_pids, children))


def tree_of(roots, children):
    """The pids of the trees rooted at roots."""
    out, stack = [], list(roots)
    while stack:
        pid = stack.pop()
        out.append(pid)
        stack.extend(children.get(pid, []))
    return out


def session(bir, specs, lazy, env, claude, call=False):
    t0 = time.monotonic()
    proxies = [Proxy(bir, n, c, lazy, env) for n, c, _, _ in specs]
    import threading

    errors = []

    def run(p):
        try:
            p.open_session(claude)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(f"{p.name}: {e}")

    threads = [threading.Thread(target=run, args=(p,)) for p in proxies]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    startup = time.monotonic() - t0
    if errors:
        raise RuntimeError("; ".join(errors))
    rss = tree_rss_kib([p.p.pid for p in proxies])
    time.sleep(2)
    rss = max(rss, tree_rss_kib([p.p.pid for p in proxies]))
    if call:
        for p, (_, _, tool, args) in zip(proxies, specs):
            r = p.request("tools/call", {"name": tool, "arguments": args})
            if "result" not in r:
                raise RuntimeError(f"{p.name}: {tool} failed: {r}")
    for p in proxies:
        p.close()
    return startup, rss


# ---------------------------------------------------------------- real Claude Code

API_KEY = "sk-ant-api03-e2e-fake-key-0000000000000000000000000000000000000000000000000000-AAAAAAAA"


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []


def proxies_sample(claude_pid, bir):
    """(total RSS KiB of the proxies' trees, processes under the proxies)."""
    children = process_children()
    below = tree_of(children.get(claude_pid, []), children)
    roots = [p for p in below if cmdline(p)[:2] == [bir.encode(), b"proxy"]]
    under = len(tree_of(roots, children)) - len(roots)
    return tree_rss_kib(roots, children), under


def cc_session(a, specs, mode, scratch, tag, script):
    """One `claude -p` session; returns (first request s, peak RSS KiB, servers started)."""
    harness = Path(a.harness)
    claude = Path(a.cc) / "node_modules" / ".bin" / "claude"
    out = scratch / "cc" / tag
    shutil.rmtree(out, ignore_errors=True)
    home, project, tmp, logs = (out / d for d in ("home", "project", "tmp", "logs"))
    for d in (home, project, tmp, logs):
        d.mkdir(parents=True)
    names = [name for name, _, _, _ in specs] if mode != "none" else []
    fixture = json.loads((harness / "fixtures" / "claude.json").read_text()
                         .replace("@@PROJECT@@", str(project)).replace("@@KEY20@@", API_KEY[-20:]))
    fixture["projects"][str(project)]["enabledMcpjsonServers"] = names
    (home / ".claude.json").write_text(json.dumps(fixture))
    if names:
        servers_json = {}
        for name, cmd, _, _ in specs:
            args = ["proxy"] + (["--lazy"] if mode == "lazy" else []) + ["--server-name", name]
            if a.transcripts:
                args += ["--transcript", str(logs / f"{name}.transcript.jsonl")]
            args += ["--"] + cmd
            servers_json[name] = {"type": "stdio", "command": a.bir, "args": args}
        (project / ".mcp.json").write_text(json.dumps({"mcpServers": servers_json}))
    (logs / "script.json").write_text(json.dumps(script))
    api = subprocess.Popen(
        [sys.executable, str(harness / "fake_anthropic.py"), "--script", str(logs / "script.json"),
         "--log", str(logs / "requests.jsonl"), "--port", "0", "--port-file", str(logs / "port")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while not (logs / "port").exists() or not (logs / "port").read_text().strip():
            if time.monotonic() > deadline:
                raise RuntimeError("the fake API did not start")
            time.sleep(0.02)
        port = (logs / "port").read_text().strip()
        node_dir = os.path.dirname(shutil.which("node") or "/usr/bin/node")
        env = {
            "PATH": f"{node_dir}:/usr/local/bin:/usr/bin:/bin", "HOME": str(home),
            "USER": os.environ.get("USER", "root"), "SHELL": "/bin/bash", "TERM": "dumb",
            "LANG": "C.UTF-8", "TMPDIR": str(tmp), "TZ": "UTC",
            "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}", "ANTHROPIC_API_KEY": API_KEY,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1", "DISABLE_ERROR_REPORTING": "1", "DISABLE_BUG_COMMAND": "1",
            "IS_SANDBOX": "1", "MCP_CONNECTION_NONBLOCKING": "0", "MCP_CONNECT_TIMEOUT_MS": "60000",
            "BIR_HOME": str(scratch / "home"), "BIR_SERVICE_URL": "off",
        }
        cmd = [str(claude), "-p", "Say done.", "--output-format", "stream-json", "--verbose",
               "--permission-mode", "bypassPermissions"]
        cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.time()
        cc = subprocess.Popen(cmd, cwd=project, env=env, stdin=subprocess.DEVNULL,
                              stdout=open(logs / "stdout.jsonl", "wb"),
                              stderr=open(logs / "stderr.txt", "wb"), start_new_session=True)
        peak, started, first = 0, 0, None
        end = time.monotonic() + 180
        while cc.poll() is None and time.monotonic() < end:
            rss, under = proxies_sample(cc.pid, a.bir)
            peak, started = max(peak, rss), max(started, under)
            time.sleep(0.05)
        if cc.poll() is None:
            os.killpg(cc.pid, 9)
            cc.wait()
            raise RuntimeError(f"{tag}: claude did not finish (see {logs})")
        # CPU time of claude and everything it waited for (its MCP
        # servers, through the proxies): what the session cost the
        # machine, whatever else runs on it.
        cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime)
        requests = [json.loads(l) for l in (logs / "requests.jsonl").read_text().splitlines() if l.strip()]
        main = [r for r in requests if r.get("kind") == "main"]
        if not main:
            raise RuntimeError(f"{tag}: no model request (exit {cc.returncode}; see {logs})")
        first = main[0]
        # Claude Code defers MCP tools (ToolSearch): its init message lists
        # the tools the session has, every connected server's included.
        offered, statuses = set(), {}
        for line in (logs / "stdout.jsonl").read_text().splitlines():
            msg = json.loads(line) if line.strip() else {}
            if msg.get("type") == "system" and msg.get("subtype") == "init":
                offered.update(msg.get("tools", []))
                statuses = {s.get("name"): s.get("status") for s in msg.get("mcp_servers", [])}
        for name in names:
            if not any(t.startswith(f"mcp__{name}__") for t in offered):
                raise RuntimeError(f"{tag}: the session lacks {name}'s tools ({statuses.get(name)}; see {logs})")
        return first["t"] - t0, peak, started, cpu, frozenset(offered)
    finally:
        api.terminate()
        api.wait()


def real_claude(a, specs, scratch):
    calls = [{"type": "tool_use", "name": f"mcp__{name}__{tool}", "input": args}
             for name, _, tool, args in specs]
    warm = {"turns": [{"content": calls}, {"content": [{"type": "text", "text": "done"}]}],
            "final_text": "done", "side_reply": "ok"}
    idle = {"turns": [{"content": [{"type": "text", "text": "done"}]}], "final_text": "done", "side_reply": "ok"}
    load_before = open("/proc/loadavg").read().split()[:3]
    cc_session(a, specs, "eager", scratch, "warm-up", warm)
    modes = ("none", "eager", "lazy")
    rows = {m: [] for m in modes}
    for r in range(a.rounds):
        for mode in modes:
            rows[mode].append(cc_session(a, specs, mode, scratch, f"{mode}-{r}", idle))
    load_after = open("/proc/loadavg").read().split()[:3]
    # The model is offered the same tools, lazily or not.
    offered = {row[4] for mode in ("eager", "lazy") for row in rows[mode]}
    if len(offered) != 1:
        raise RuntimeError(f"eager and lazy sessions offered different tools: {offered}")
    print(f"Claude Code ({Path(a.cc).name}) -p, five servers ({', '.join(s[0] for s in specs)}), "
          f"MCP_CONNECTION_NONBLOCKING=0, median of {a.rounds} (min-max)")
    print(f"load average before {' '.join(load_before)}, after {' '.join(load_after)}; {os.cpu_count()} CPUs")
    print(f"{'mode':<6} {'to first model request':>28} {'proxies+servers RSS':>22} "
          f"{'processes under proxies':>24} {'session CPU':>12}")
    for mode in modes:
        ts = [x[0] * 1000 for x in rows[mode]]
        rss = [x[1] / 1024 for x in rows[mode]]
        started = [x[2] for x in rows[mode]]
        cpu = [x[3] for x in rows[mode]]
        print(f"{mode:<6} {statistics.median(ts):>9.0f} ms ({min(ts):.0f}-{max(ts):.0f}) "
              f"{statistics.median(rss):>12.1f} MiB {statistics.median(started):>22.0f} "
              f"{statistics.median(cpu):>10.2f} s")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bir", default=str(ROOT / "target" / "release" / "bir"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--claude", action="store_true", help="also prompts/list and resources/list")
    ap.add_argument("--real-claude", action="store_true", help="the host is the real Claude Code (see above)")
    ap.add_argument("--cc", default=str(PEERS / "cc"), help="where Claude Code is installed")
    ap.add_argument("--harness", default=os.environ.get("BIR_E2E_HARNESS", str(ROOT.parent / "shared" / "e2e")),
                    help="the shared e2e harness (fake_anthropic.py, fixtures/)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch dir (logs of each session)")
    ap.add_argument("--transcripts", action="store_true", help="--real-claude: each proxy writes a --transcript")
    a = ap.parse_args()
    a.bir = str(Path(a.bir).resolve())
    scratch = Path(tempfile.mkdtemp(prefix="bir-lazy-bench-"))
    try:
        env = dict(os.environ, BIR_HOME=str(scratch / "home"), BIR_SERVICE_URL="off")
        env.pop("CLAUDE_CODE_SESSION_ID", None)
        specs = servers(scratch)
        if a.real_claude:
            return real_claude(a, specs, scratch)
        session(a.bir, specs, False, env, a.claude, call=True)  # warm-up: records the snapshots
        results = {}
        for mode in ("eager", "lazy"):
            rows = [session(a.bir, specs, mode == "lazy", env, a.claude) for _ in range(a.rounds)]
            results[mode] = (
                statistics.median(r[0] for r in rows),
                statistics.median(r[1] for r in rows),
            )
        # A lazy session that then calls every server still works.
        session(a.bir, specs, True, env, a.claude, call=True)
        host = "Claude-like host (tools, prompts, resources lists)" if a.claude else "tools-only host"
        print(f"five servers ({', '.join(s[0] for s in specs)}), {host}, median of {a.rounds}")
        print(f"{'mode':<6} {'start-up':>10} {'total RSS':>12}")
        for mode, (t, rss) in results.items():
            print(f"{mode:<6} {t * 1000:>8.0f} ms {rss / 1024:>9.1f} MiB")
    finally:
        if a.keep:
            print(f"kept {scratch}", file=sys.stderr)
        else:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
