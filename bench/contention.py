#!/usr/bin/env python3
"""Tail latency through bir-proxy while another process hogs the same CPU.

The relay benchmark (benches/relay.rs) runs on an otherwise idle CPU. This
one asks the other question: when the proxy's CPU is also busy with
something else, does recording (a batched worker thread) make the slowest calls
slower? It runs sequential tools/call round trips (2 KB answers) through
`bir proxy -- echo_server`, recorder on and off, alternating, with a busy
loop pinned to the same CPU, and prints p50 / p99 / p99.9 / max.

Usage (after `make bench` has built the binary and the echo server):
    python3 bench/contention.py [--calls N] [--rounds R] [--cpu C] [--bir PATH]
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ECHO = os.path.join(ROOT, "target", "bench-bin", "echo_server")
INIT = (
    b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":'
    b'"2025-06-18","capabilities":{},"clientInfo":{"name":"contention","version":"1"}}}\n'
)


def session(bir, cpu, calls, recorder, home):
    env = dict(os.environ, BIR_HOME=home, BIR_SERVICE_URL="off")
    env.pop("RUST_LOG", None)
    if not recorder:
        env["BIR_RECORDER"] = "off"
    proc = subprocess.Popen(
        ["taskset", "-c", str(cpu), bir, "proxy", "--", ECHO],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        bufsize=0,
    )
    proc.stdin.write(INIT)
    proc.stdout.readline()
    latencies = []
    for i in range(1, calls + 1):
        request = (
            '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":'
            '{"name":"echo","arguments":{"size":2000}}}\n' % i
        ).encode()
        started = time.perf_counter()
        proc.stdin.write(request)
        if not proc.stdout.readline():
            sys.exit("contention: the proxy stopped answering")
        latencies.append((time.perf_counter() - started) * 1e6)
    # End of input (communicate closes stdin), then wait for the proxy.
    stderr = proc.communicate(timeout=10)[1].decode("utf-8", "replace")
    # A recorder that could not finish its run within the proxy's shutdown
    # deadline says so; count it (it should not happen).
    late = stderr.count("did not finish")
    return latencies, late


def percentiles(values):
    values = sorted(values)

    def at(q):
        return values[min(len(values) - 1, int(len(values) * q))]

    return at(0.5), at(0.99), at(0.999), values[-1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--cpu", type=int, default=0)
    parser.add_argument(
        "--bir",
        default=os.path.join(ROOT, "target", "x86_64-unknown-linux-gnu", "release", "bir"),
    )
    args = parser.parse_args()
    for path in (args.bir, ECHO):
        if not os.access(path, os.X_OK):
            sys.exit(f"contention: {path} is missing; run `make bench` first")
    hog = subprocess.Popen(["taskset", "-c", str(args.cpu), "sh", "-c", "while :; do :; done"])
    try:
        time.sleep(0.3)
        results = {True: [], False: []}
        late = 0
        with tempfile.TemporaryDirectory(prefix="bir-contention-") as home:
            for _ in range(args.rounds):
                for recorder in (True, False):
                    latencies, lost = session(args.bir, args.cpu, args.calls, recorder, home)
                    results[recorder] += latencies
                    late += lost
    finally:
        hog.kill()
        hog.wait()
    print(f"{args.rounds} x {args.calls} sequential calls per column, a busy loop on CPU {args.cpu}")
    print("| column | p50 µs | p99 µs | p99.9 µs | max µs |")
    print("|---|--:|--:|--:|--:|")
    for recorder, name in ((True, "bir"), (False, "bir (recorder off)")):
        p50, p99, p999, top = percentiles(results[recorder])
        print(f"| {name} | {p50:.0f} | {p99:.0f} | {p999:.0f} | {top:.0f} |")
    print(f"sessions whose recorder missed the shutdown deadline: {late}")


if __name__ == "__main__":
    main()
