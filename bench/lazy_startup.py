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

Needs the peers (`make peers`: `.peers/node_modules`, `.peers/venv`).
"""

import argparse
import json
import os
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


def tree_rss_kib(root_pids):
    """Sum of VmRSS over the process trees rooted at root_pids."""
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
    total, stack = 0, list(root_pids)
    while stack:
        pid = stack.pop()
        stack.extend(children.get(pid, []))
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bir", default=str(ROOT / "target" / "release" / "bir"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--claude", action="store_true", help="also prompts/list and resources/list")
    a = ap.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="bir-lazy-bench-"))
    try:
        env = dict(os.environ, BIR_HOME=str(scratch / "home"), BIR_SERVICE_URL="off")
        env.pop("CLAUDE_CODE_SESSION_ID", None)
        specs = servers(scratch)
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
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
