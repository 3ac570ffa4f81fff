#!/usr/bin/env python3
"""Tail latency of recording: a Python client pinned with the proxy and its server on one CPU.

A Python client, the proxy and the server all pinned to one CPU; sequential
tools/call round trips (16-byte answers) through `bir proxy -- echo_server`
with recording on, with recording off (BIR_RECORDER=off), and through the C
byte pump, interleaved session by session so that drift of the machine hits
every column alike. Prints p50 / p99 / p99.9 per column and p99 on / off.

The issue's figures (before the fix): p99 179 µs recording on, 85 µs off,
74 µs through the pump; target: on <= 1.5 x off.

Usage (after `make bench` or `cargo bench --bench relay`, which build the
binary and the C helpers):
    python3 bench/pinned_tail.py [--calls N] [--warmup N] [--rounds R]
                                 [--cpu C] [--bir PATH]
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HELPERS = os.path.join(ROOT, "target", "bench-bin")
INIT = (
    b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":'
    b'"2025-06-18","capabilities":{},"clientInfo":{"name":"pinned-tail","version":"1"}}}\n'
)
INITIALIZED = b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'


def session(command, env, warmup, calls):
    """One session: initialize, `warmup` untimed calls, `calls` timed ones."""
    proc = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        bufsize=0,
    )
    proc.stdin.write(INIT)
    proc.stdout.readline()
    proc.stdin.write(INITIALIZED)
    latencies = []
    for i in range(1, warmup + calls + 1):
        request = (
            '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":'
            '{"name":"echo","arguments":{"size":16}}}\n' % i
        ).encode()
        started = time.perf_counter()
        proc.stdin.write(request)
        if not proc.stdout.readline():
            sys.exit("pinned_tail: the relay stopped answering")
        if i > warmup:
            latencies.append((time.perf_counter() - started) * 1e6)
    proc.stdin.close()
    proc.wait(timeout=30)
    return latencies


def at(values, q):
    return values[min(len(values) - 1, int(len(values) * q))]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--cpu", type=int, default=0)
    parser.add_argument("--bir", default=os.path.join(ROOT, "target", "release", "bir"))
    args = parser.parse_args()
    echo = os.path.join(HELPERS, "echo_server")
    pump = os.path.join(HELPERS, "pump")
    for path in (args.bir, echo, pump):
        if not os.access(path, os.X_OK):
            sys.exit(f"pinned_tail: {path} is missing; run `cargo bench --bench relay` first")
    # Pinned before anything starts: the proxy and the server inherit it.
    os.sched_setaffinity(0, {args.cpu})
    columns = {
        "bir (recording on)": ([args.bir, "proxy", "--", echo], {}),
        "bir (recording off)": ([args.bir, "proxy", "--", echo], {"BIR_RECORDER": "off"}),
        "pump": ([pump, "--", echo], {}),
    }
    results = {name: [] for name in columns}
    with tempfile.TemporaryDirectory(prefix="bir-pinned-tail-") as home:
        for _ in range(args.rounds):
            for name, (command, extra) in columns.items():
                env = dict(os.environ, BIR_HOME=home, BIR_SERVICE_URL="off", **extra)
                env.pop("RUST_LOG", None)
                results[name] += session(command, env, args.warmup, args.calls)
                # Let the recorder finish the session's run before the next.
                time.sleep(0.3)
    print(
        f"{args.rounds} sessions x {args.calls} sequential calls per column "
        f"(after {args.warmup} warm-up each), client, relay and server on CPU {args.cpu}"
    )
    print("| column | p50 µs | p99 µs | p99.9 µs |")
    print("|---|--:|--:|--:|")
    p99 = {}
    for name, values in results.items():
        values.sort()
        p99[name] = at(values, 0.99)
        print(f"| {name} | {at(values, 0.5):.1f} | {p99[name]:.1f} | {at(values, 0.999):.1f} |")
    ratio = p99["bir (recording on)"] / p99["bir (recording off)"]
    print(f"p99 recording on / off: {ratio:.2f} (target <= 1.5)")


if __name__ == "__main__":
    main()
