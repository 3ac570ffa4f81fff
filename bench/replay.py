#!/usr/bin/env python3
"""Benchmarks for reusing runs: mock latency against the live server, mock start-up,
matching on a 10,000-step recording, and `bir verify --schema-only` on a 1,000-step scenario.

    python3 bench/replay.py BIR SCENARIO LIVE_CMD...

BIR is the bir executable, SCENARIO a scenario recorded from LIVE_CMD whose first step calls a
read-only tool (the fixture's `add`); LIVE_CMD starts that server. Raw JSON-RPC over pipes, no SDK,
so both sides are timed the same way. Prints one JSON document of medians.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

CALLS = 300


class Peer:
    def __init__(self, argv):
        self.t0 = time.perf_counter()
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.id = 0

    def ask(self, method, params):
        self.id += 1
        line = json.dumps({"jsonrpc": "2.0", "id": self.id, "method": method, "params": params}) + "\n"
        self.p.stdin.write(line.encode())
        self.p.stdin.flush()
        while True:
            out = self.p.stdout.readline()
            if not out:
                raise RuntimeError(f"{method}: peer closed")
            msg = json.loads(out)
            if msg.get("id") == self.id:
                return msg

    def handshake(self, version):
        r = self.ask("initialize", {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}})
        self.p.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        self.p.stdin.flush()
        return r

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=30)


def call_latency(argv, tool, args, version):
    peer = Peer(argv)
    peer.handshake(version)
    times = []
    for _ in range(CALLS):
        t = time.perf_counter()
        r = peer.ask("tools/call", {"name": tool, "arguments": args})
        times.append((time.perf_counter() - t) * 1000)
        assert "result" in r, r
    peer.close()
    return statistics.median(times)


def startup(argv, version, runs=20):
    times = []
    for _ in range(runs):
        peer = Peer(argv)
        peer.handshake(version)
        times.append((time.perf_counter() - peer.t0) * 1000)
        peer.close()
    return statistics.median(times)


def main():
    bir, scenario_path, live = sys.argv[1], sys.argv[2], sys.argv[3:]
    with open(scenario_path) as f:
        scenario = json.load(f)
    first = scenario["steps"][0]
    tool, args = first["tool"], first["args"]
    version = "2025-11-25"
    out = {}
    out["live_call_p50_ms"] = call_latency(live, tool, args, version)
    mock = [bir, "mock", scenario_path, "--repeats", "last"]
    out["mock_call_p50_ms"] = call_latency(mock, tool, args, version)
    out["mock_over_live"] = out["mock_call_p50_ms"] / out["live_call_p50_ms"]
    out["mock_startup_p50_ms"] = startup(mock, version)

    with tempfile.TemporaryDirectory() as tmp:
        # 10,000 distinct recorded calls; the last ones are asked for.
        big = dict(scenario)
        big["steps"] = []
        for i in range(10_000):
            step = dict(first)
            step["id"] = f"s{i + 1}"
            step["index"] = i + 1
            step["args"] = {"a": i, "b": 0}
            step["bindings"] = []
            big["steps"].append(step)
        big_path = os.path.join(tmp, "big.scenario.json")
        with open(big_path, "w") as f:
            json.dump(big, f)
        peer = Peer([bir, "mock", big_path])
        peer.handshake(version)
        times = []
        for i in range(9_999, 9_999 - CALLS, -1):
            t = time.perf_counter()
            r = peer.ask("tools/call", {"name": tool, "arguments": {"a": i, "b": 0}})
            times.append((time.perf_counter() - t) * 1000)
            assert "result" in r, r
        peer.close()
        out["mock_call_p50_ms_10k_steps"] = statistics.median(times)
        t = time.perf_counter()
        Peer([bir, "mock", big_path]).handshake(version)
        out["mock_startup_ms_10k_steps"] = (time.perf_counter() - t) * 1000

        # 1,000 steps, schema only: the servers' start-up plus bir's work.
        thousand = dict(big)
        thousand["steps"] = big["steps"][:1000]
        path = os.path.join(tmp, "k.scenario.json")
        with open(path, "w") as f:
            json.dump(thousand, f)
        server = list(scenario["servers"])[0]
        runs = []
        for _ in range(5):
            t = time.perf_counter()
            subprocess.run([bir, "verify", path, "--schema-only", "--server", f"{server}={' '.join(live)}"], stdout=subprocess.DEVNULL, check=True)
            runs.append((time.perf_counter() - t) * 1000)
        out["verify_schema_only_1000_steps_ms"] = statistics.median(runs)
        out["live_server_startup_ms"] = startup(live, version, runs=5)
    print(json.dumps(out, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
