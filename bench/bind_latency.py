#!/usr/bin/env python3
"""tools/call latency through a bound proxy vs a standalone one.

Usage: python3 bench/bind_latency.py [BIR_BINARY] [CALLS_PER_ROUND] [ROUNDS]

Both modes run the same proxy binary over the same server (`bir testpeer`,
echoing its arguments), with a fresh temporary BIR_HOME each. "bound" has
CLAUDE_CODE_SESSION_ID + BIR_CONTROL_URL/TOKEN pointing at a minimal
daemon stand-in on 127.0.0.1 (answers /health and every POST with 200, as
the real daemon's routes would), so the proxy registers and posts its
records there; "standalone" writes its local run. Rounds alternate between
the modes so drift of the machine hits both alike. Each call is timed from
writing the request to reading its answer (one call in flight at a time).
"""

import http.server
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import time

TOKEN = "bench-token-0123456789"


class Daemon(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def _ok(self, body):
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            self.send_response(401)
            self.end_headers()
            return
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self._ok({"version": "bench", "pid": os.getpid(), "sessions": 0, "startedAt": 0})

    def do_POST(self):
        length = int(self.headers.get("content-length", "0"))
        self.rfile.read(length)
        self._ok({})


def serve(ports):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Daemon)
    ports.put(server.server_address[1])
    server.serve_forever()


def session(bir, env, calls, tag):
    """One proxy session: `calls` timed tools/calls; their round trips (s)."""
    home = tempfile.mkdtemp(prefix=f"bir-bench-{tag}-")
    script = os.path.join(home, "peer.json")
    with open(script, "w") as f:
        json.dump({"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}, f)
    full_env = dict(os.environ, HOME=home, BIR_HOME=os.path.join(home, ".bir"), **env)
    for name in ("CLAUDE_CODE_SESSION_ID", "BIR_CONTROL_URL", "BIR_CONTROL_TOKEN", "BIR_OFF", "RUST_LOG"):
        if name not in env:
            full_env.pop(name, None)
    proc = subprocess.Popen(
        [bir, "proxy", "--server-name", "peer", "--", bir, "testpeer", script],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=full_env, cwd=home)
    out = proc.stdout

    def rpc(msg):
        proc.stdin.write((json.dumps(msg) + "\n").encode())
        proc.stdin.flush()
        return out.readline()

    rpc({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"}}})
    rpc({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    times = []
    for i in range(calls):
        msg = {"jsonrpc": "2.0", "id": 10 + i, "method": "tools/call", "params": {
            "name": "echo", "arguments": {"n": i, "text": "hello bench"},
            "_meta": {"claudecode/toolUseId": f"toolu_{i}", "progressToken": i}}}
        t0 = time.perf_counter()
        line = rpc(msg)
        times.append(time.perf_counter() - t0)
        assert line, "the proxy closed its output"
    proc.stdin.close()
    proc.wait(timeout=30)
    shutil.rmtree(home, ignore_errors=True)
    return times


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))]


def main():
    bir = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "target/release/bir")
    calls = int(sys.argv[2]) if len(sys.argv) > 2 else 500
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 6
    # The daemon stand-in runs in its own process, so it never holds this
    # client's interpreter lock while a call is being timed.
    ports = multiprocessing.Queue()
    daemon = multiprocessing.Process(target=serve, args=(ports,), daemon=True)
    daemon.start()
    url = f"http://127.0.0.1:{ports.get(timeout=30)}"
    bound_env = {"CLAUDE_CODE_SESSION_ID": "bench-session", "BIR_CONTROL_URL": url,
                 "BIR_CONTROL_TOKEN": TOKEN, "BIR_BIND_WAIT_MS": "600000"}
    results = {"standalone": [], "bound": []}
    for r in range(rounds):
        order = ["standalone", "bound"] if r % 2 == 0 else ["bound", "standalone"]
        for mode in order:
            env = bound_env if mode == "bound" else {}
            results[mode] += session(bir, env, calls, mode)[20:]  # skip warm-up
    for mode, xs in results.items():
        print(f"{mode:10} n={len(xs):5}  p50={pct(xs, 0.50) * 1e6:7.1f} us"
              f"  p90={pct(xs, 0.90) * 1e6:7.1f} us  p99={pct(xs, 0.99) * 1e6:7.1f} us")
    daemon.terminate()


if __name__ == "__main__":
    main()
