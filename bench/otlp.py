#!/usr/bin/env python3
"""OpenTelemetry export: what it costs the relay, and what exporting a run costs.

    python3 bench/otlp.py [--bin target/release/bir] [--calls 1000] [--rounds 5]

1. Relay with export off vs on (and on with BIR_OTLP_TRACEPARENT=1, the
   one column whose relayed bytes differ), same workload, interleaved round
   by round (the order rotates): bir-proxy over `bir testpeer`, one session
   of CALLS sequential tools/call per column per round, against a loopback
   stub OTLP receiver (200 to every POST). Reports per-call latency
   p50/p95/p99 of each column, and the session's wall time (which includes
   the end-of-run export for "on"), with the load average before and after
   (the figures are only comparable within one run of this script).
2. CPU to export a run of CALLS tool calls (2 x CALLS step records, CALLS
   + 1 spans): user+sys CPU of `bir runs export --otlp <id>` (protobuf and
   JSON), minus that of `bir runs export <id> --format jsonl` (loading and
   printing the same journal, without mapping, encoding or sending).

Everything binds 127.0.0.1; every process gets its own BIR_HOME under a temp dir.
"""
import argparse
import http.server
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Stub(http.server.BaseHTTPRequestHandler):
    count = 0

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(n)
        Stub.count += 1
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def session(cmd, env, calls):
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)

    def send(m):
        p.stdin.write((json.dumps(m) + "\n").encode())
        p.stdin.flush()

    started = time.perf_counter()
    send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "claude-code", "version": "bench"}}})
    p.stdout.readline()
    lat = []
    for i in range(calls):
        t = time.perf_counter()
        send({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
              "params": {"name": "echo", "arguments": {"n": i, "text": "call %d" % i}}})
        p.stdout.readline()
        lat.append(time.perf_counter() - t)
    p.stdin.close()
    p.wait()
    return lat, time.perf_counter() - started


def child_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def cpu_of(cmd, env, reps):
    samples = []
    for _ in range(reps):
        before = child_cpu()
        subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, check=True)
        samples.append(child_cpu() - before)
    return statistics.median(samples)


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "target/release/bir"))
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=7)
    a = ap.parse_args()
    bir = os.path.abspath(a.bin)
    tmp = tempfile.mkdtemp(prefix="bir-otlp-bench-")
    try:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Stub)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        endpoint = "http://127.0.0.1:%d" % server.server_address[1]
        proxy = os.path.join(tmp, "bir-proxy")
        os.symlink(bir, proxy)
        script = os.path.join(tmp, "peer.json")
        with open(script, "w") as f:
            json.dump({"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}, f)
        cmd = [proxy, "--server-name", "peer", "--", bir, "testpeer", script]
        base = {"PATH": os.environ.get("PATH", ""), "BIR_SERVICE_URL": "off", "BIR_AUTO_SYNC": "off"}
        cols = {
            "off": dict(base, HOME=os.path.join(tmp, "off"), BIR_HOME=os.path.join(tmp, "off/.bir")),
            "on": dict(base, HOME=os.path.join(tmp, "on"), BIR_HOME=os.path.join(tmp, "on/.bir"),
                       BIR_OTLP_ENDPOINT=endpoint),
            "on + traceparent": dict(base, HOME=os.path.join(tmp, "tp"), BIR_HOME=os.path.join(tmp, "tp/.bir"),
                                     BIR_OTLP_ENDPOINT=endpoint, BIR_OTLP_TRACEPARENT="1"),
        }
        lat = {k: [] for k in cols}
        wall = {k: [] for k in cols}
        session(cmd, cols["off"], 50)  # warm the page cache
        load_before = os.getloadavg()
        names = list(cols)
        for r in range(a.rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for k in order:
                l, w = session(cmd, cols[k], a.calls)
                lat[k] += l
                wall[k].append(w)
        print("## bir-proxy with OpenTelemetry export off vs on (%s)" % bir)
        print("%d rounds x %d sequential tools/call per column, interleaved; stub OTLP receiver on 127.0.0.1" % (a.rounds, a.calls))
        load_after = os.getloadavg()
        print("load average (1/5/15 min) before %.2f %.2f %.2f, after %.2f %.2f %.2f, %d CPUs" % (
            load_before + load_after + (os.cpu_count(),)))
        print("| column | p50 per call | p95 per call | p99 per call | session wall (median) |")
        print("|---|---|---|---|---|")
        for k in cols:
            print("| export %s | %.1f us | %.1f us | %.1f us | %.3f s |" % (
                k, pct(lat[k], 0.5) * 1e6, pct(lat[k], 0.95) * 1e6, pct(lat[k], 0.99) * 1e6,
                statistics.median(wall[k])))
        print("runs exported by the 'on' sessions: %d request(s) received" % Stub.count)

        env = cols["on"]
        out = subprocess.run([bir, "runs", "--json", "--limit", "1"], env=env, capture_output=True, check=True)
        run = json.loads(out.stdout.decode().splitlines()[0])["id"]
        load = cpu_of([bir, "runs", "export", run, "--format", "jsonl"], env, a.reps)
        print()
        print("## CPU to export one run of %d tool calls (%d step records, %d spans), median of %d" % (
            a.calls, 2 * a.calls, a.calls + 1, a.reps))
        print("| what | CPU (user+sys) | minus loading the journal |")
        print("|---|---|---|")
        print("| `bir runs export %s --format jsonl` (load + print, the baseline) | %.1f ms | - |" % ("<id>", load * 1e3))
        for proto in ["http/protobuf", "http/json"]:
            e = dict(env, BIR_OTLP_PROTOCOL=proto)
            c = cpu_of([bir, "runs", "export", "--otlp", run], e, a.reps)
            print("| `bir runs export --otlp <id>` (%s) | %.1f ms | %.1f ms |" % (proto, c * 1e3, (c - load) * 1e3))
        server.shutdown()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
