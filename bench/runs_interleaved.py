#!/usr/bin/env python3
"""Interleaved timing of `bir runs --json --limit 100000` for several binaries.

usage: runs_interleaved.py ROUNDS name=BIN:BIR_HOME ...

Each binary gets its own BIR_HOME (two versions with different index
formats would otherwise rebuild each other's index at every call; a copy
made with `cp -al` of the bench's store shares the journals). One warm-up
call each, then each round runs every binary once (the order rotated per
round), output to /dev/null; prints the median wall and CPU (user+sys) time
per binary, the ratios to the first, and the per-round CPU ratios: on a
shared machine only the ratios measured side by side mean something."""
import os, sys, time, statistics, subprocess
rounds = int(sys.argv[1])
bins = []
for arg in sys.argv[2:]:
    name, rest = arg.split("=", 1)
    b, home = rest.split(":", 1)
    bins.append((name, b, home))
res = {n: ([], []) for n, _, _ in bins}
args = ["runs", "--json", "--limit", "100000"]
for n, b, home in bins:  # warm up (index present)
    subprocess.run([b] + args, env={"BIR_HOME": home, "PATH": "/usr/bin:/bin"}, stdout=subprocess.DEVNULL, check=True)
for r in range(rounds):
    order = bins[r % len(bins):] + bins[:r % len(bins)]
    for n, b, home in order:
        t0 = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            fd = os.open("/dev/null", os.O_WRONLY)
            os.dup2(fd, 1)
            os.execve(b, [b] + args, {"BIR_HOME": home, "PATH": "/usr/bin:/bin"})
        _, status, ru = os.wait4(pid, 0)
        wall = time.perf_counter() - t0
        assert status == 0, (n, status)
        res[n][0].append(wall * 1000)
        res[n][1].append((ru.ru_utime + ru.ru_stime) * 1000)
base = bins[0][0]
bw = statistics.median(res[base][0]); bc = statistics.median(res[base][1])
print(f"load: {os.getloadavg()}, rounds: {rounds}")
print("| binary | median wall | median CPU | wall ratio | CPU ratio |")
print("|---|---|---|---|---|")
for n, _, _ in bins:
    w = statistics.median(res[n][0]); c = statistics.median(res[n][1])
    print(f"| {n} | {w:.1f} ms | {c:.1f} ms | {w/bw:.2f} | {c/bc:.2f} |")
# paired per-round CPU ratios against the first
for n, _, _ in bins[1:]:
    pr = [x / y for x, y in zip(res[n][1], res[base][1])]
    print(f"{n}/{base} CPU, per-round ratio median {statistics.median(pr):.3f} (min {min(pr):.3f}, max {max(pr):.3f})")
