#!/usr/bin/env python3
"""What a proxy's start costs, binding to the recorder daemon or not.

    python3 bench/cold_start.py [--spawns N] [BIR ...]

Times spawn -> `initialize` answer of `bir proxy -- echo_server` for each
bir binary named (default: target/release/bir), each as a host without a
session in its environment starts it (a Codex or Gemini proxy: it binds by
its ancestry) and with `BIR_BIND=off` (never binds), and of echo_server
alone. Spawns are interleaved in a random order per round, after 3 warm-up
rounds; the proxies share a fresh BIR_HOME with no daemon. Needs
target/bench-bin/echo_server (`cargo bench --bench relay` builds it).
Prints the median, p10 and p90 of each as a Markdown table.
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ECHO = os.path.join(ROOT, "target", "bench-bin", "echo_server")
INIT = (b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":'
        b'"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}\n')
WARM_UP = 3


def once(argv: list[str], env: dict[str, str]) -> float:
    """Milliseconds from spawn to the first answer line."""
    started = time.perf_counter()
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    try:
        assert p.stdin is not None and p.stdout is not None
        p.stdin.write(INIT)
        p.stdin.flush()
        if not p.stdout.readline():
            raise SystemExit(f"{argv[0]} gave no answer")
        return (time.perf_counter() - started) * 1e3
    finally:
        if p.stdin:
            p.stdin.close()
        p.wait(timeout=10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spawns", type=int, default=200)
    ap.add_argument("bins", nargs="*", default=[os.path.join(ROOT, "target", "release", "bir")])
    args = ap.parse_args()
    if not os.access(ECHO, os.X_OK):
        raise SystemExit(f"no {ECHO}: run `cargo bench --bench relay` once")
    home = tempfile.mkdtemp(prefix="bir-cold-start.")
    env = {k: v for k, v in os.environ.items()
           if k not in ("CLAUDE_CODE_SESSION_ID", "BIR_CONTROL_URL", "BIR_CONTROL_TOKEN", "BIR_BIND")}
    env["BIR_HOME"] = home
    variants = [("echo_server alone", [ECHO], env)]
    for b in args.bins:
        argv = [b, "proxy", "--server-name", "bench", "--", ECHO]
        variants.append((f"`{b}`", argv, env))
        variants.append((f"`{b}` BIR_BIND=off", argv, dict(env, BIR_BIND="off")))
    times: dict[str, list[float]] = {name: [] for name, _, _ in variants}
    try:
        for round_ in range(args.spawns + WARM_UP):
            order = variants[:]
            random.shuffle(order)
            for name, argv, e in order:
                ms = once(argv, e)
                if round_ >= WARM_UP:
                    times[name].append(ms)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    print(f"| spawn -> initialize answer ({args.spawns} spawns) | p50 ms | p10 ms | p90 ms |")
    print("|---|---:|---:|---:|")
    for name, ms in times.items():
        ms.sort()
        n = len(ms)
        print(f"| {name} | {statistics.median(ms):.3f} | {ms[n // 10]:.3f} | {ms[9 * n // 10]:.3f} |")


if __name__ == "__main__":
    main()
