#!/usr/bin/env python3
"""Record the processes of one e2e run's MCP server (Linux /proc only).

    procwatch.py watch --marker VALUE --out FILE --stop-file F [--max-seconds N]
    procwatch.py alive --records FILE [--wait SECONDS] [--marker VALUE]

The scenario's .mcp.json gives the server (bir-proxy, or node when unwrapped)
the environment entry BIR_E2E_MARKER=<run dir>, so every process of that server
carries it, as does anything the server spawns (and whatever does not inherit
it is caught as a child of a recorded process).

watch: every 20 ms scans /proc and appends one JSON line per newly seen
process ({pid, ppid, starttime, comm, parent_comm, argv, t_first}) to FILE. Stops when
F exists, or after --max-seconds (default 300) whatever happens.

alive: after the session has ended, polls for up to --wait seconds (default
1.0) until none of the recorded processes (same pid *and* start time) is still
running, then scans /proc once more for any unrecorded process carrying the
marker. Zombies count as exited. Prints JSON {"alive": [...], "waited_ms": N}
and exits 1 if anything is left.
"""
import argparse
import json
import os
import sys
import time


def stat(pid):
    """(ppid, starttime, state, comm) of pid, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    # comm is in parentheses and may contain spaces or ')'
    lp, rp = raw.index("("), raw.rindex(")")
    comm = raw[lp + 1:rp]
    rest = raw[rp + 2:].split()
    # rest[0] = state (field 3), rest[1] = ppid (field 4), rest[19] = starttime (field 22)
    return int(rest[1]), int(rest[19]), rest[0], comm


def argv_of(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode("utf-8", "replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def has_marker(pid, needle):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = b"\0" + f.read()
    except OSError:
        return False
    return needle in env


def pids():
    for d in os.listdir("/proc"):
        if d.isdigit():
            yield int(d)


def needle_of(marker):
    return b"\0BIR_E2E_MARKER=" + marker.encode() + b"\0"


def watch(a):
    needle = needle_of(a.marker)
    me = os.getpid()
    seen = {}  # pid -> starttime
    deadline = time.time() + a.max_seconds
    with open(a.out, "a", encoding="utf-8", buffering=1) as out:
        while time.time() < deadline and not os.path.exists(a.stop_file):
            for pid in pids():
                if pid == me:
                    continue
                st = stat(pid)
                if st is None:
                    continue
                ppid, start, _state, comm = st
                if seen.get(pid) == start:
                    continue
                parent_known = ppid in seen
                if not (parent_known or has_marker(pid, needle)):
                    continue
                seen[pid] = start
                pst = stat(ppid)
                out.write(json.dumps({"pid": pid, "ppid": ppid, "starttime": start, "comm": comm,
                                      "parent_comm": pst[3] if pst else None,
                                      "argv": argv_of(pid), "t_first": round(time.time(), 3)}) + "\n")
            time.sleep(0.02)


def alive(a):
    recs = []
    if os.path.exists(a.records):
        for line in open(a.records, encoding="utf-8"):
            try:
                recs.append(json.loads(line))
            except ValueError:
                pass

    def running():
        left = []
        for r in recs:
            st = stat(r["pid"])
            if st and st[1] == r["starttime"] and st[2] != "Z":
                left.append(r)
        return left

    t0 = time.time()
    left = running()
    while left and time.time() - t0 < a.wait:
        time.sleep(0.05)
        left = running()
    waited = round((time.time() - t0) * 1000)
    extra = []
    if a.marker:
        needle = needle_of(a.marker)
        known = {(r["pid"], r["starttime"]) for r in recs}
        for pid in pids():
            st = stat(pid)
            if st and st[2] != "Z" and (pid, st[1]) not in known and has_marker(pid, needle):
                extra.append({"pid": pid, "ppid": st[0], "starttime": st[1], "comm": st[3],
                              "argv": argv_of(pid)})
    res = {"alive": left + extra, "waited_ms": waited, "recorded": len(recs)}
    print(json.dumps(res))
    return 1 if res["alive"] else 0


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("watch")
    w.add_argument("--marker", required=True)
    w.add_argument("--out", required=True)
    w.add_argument("--stop-file", required=True)
    w.add_argument("--max-seconds", type=float, default=300)
    l = sub.add_parser("alive")
    l.add_argument("--records", required=True)
    l.add_argument("--wait", type=float, default=1.0)
    l.add_argument("--marker")
    a = ap.parse_args()
    return watch(a) if a.cmd == "watch" else alive(a)


if __name__ == "__main__":
    sys.exit(main())
