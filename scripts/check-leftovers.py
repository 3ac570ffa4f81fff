#!/usr/bin/env python3
"""Fails if a process the test suite started is still running.

`make test` runs this last. A process counts as the suite's when it
started after the suite did (`--since`, seconds since the epoch; make
passes the time it was started) and its executable, its working directory
or one of its arguments lies under the clone (`--root`) or the peers it
uses (`<root>/.peers`, wherever that symlink points, and `--also DIR`).
Never counted: this script, its ancestors (the shell and the make that
run it) and zombies (already dead, waiting for a parent to reap them).

Processes may still be on their way out when the last suite ends (a
daemon finishing its shutdown): the check looks again for up to
`--grace` seconds before it names what is left and fails. It stops
nothing: what it names is for the suite to fix.
"""

import argparse
import os
import sys
import time

CLK_TCK = os.sysconf("SC_CLK_TCK")


def boot_time():
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("btime "):
                return int(line.split()[1])
    raise SystemExit("check-leftovers: no btime in /proc/stat")


def stat_of(pid):
    """(state, ppid, start ticks since boot) of `pid`, or None if gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            raw = f.read()
    except OSError:
        return None
    # The command name is parenthesised and may hold spaces or ')'.
    rest = raw[raw.rfind(")") + 2 :].split()
    return rest[0], int(rest[1]), int(rest[19])


def ancestors(pid):
    seen = set()
    while pid > 0 and pid not in seen:
        seen.add(pid)
        st = stat_of(pid)
        if st is None:
            break
        pid = st[1]
    return seen


def under(path, roots):
    return any(path == r or path.startswith(r + "/") for r in roots)


def describe(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        args = []
    try:
        cwd = os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        cwd = "?"
    return f"pid {pid}: {' '.join(args)[:300]} (cwd {cwd})"


def leftovers(roots, since, spare):
    btime = boot_time()
    uid = os.getuid()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        if pid in spare:
            continue
        st = stat_of(pid)
        if st is None or st[0] == "Z":
            continue
        if btime + st[2] / CLK_TCK < since:
            continue
        try:
            if os.stat(f"/proc/{pid}").st_uid != uid:
                continue
        except OSError:
            continue
        places = []
        for link in ("exe", "cwd"):
            try:
                places.append(os.path.realpath(f"/proc/{pid}/{link}"))
            except OSError:
                pass
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().decode(errors="replace").split("\0")
        except OSError:
            args = []
        if any(under(p, roots) for p in places) or any(
            r in a for a in args for r in roots
        ):
            found.append(pid)
    return found


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=os.path.dirname(here))
    parser.add_argument("--since", type=float, required=True)
    parser.add_argument("--grace", type=float, default=20.0)
    parser.add_argument("--also", action="append", default=[])
    opts = parser.parse_args()

    root = os.path.realpath(opts.root)
    roots = {root, os.path.realpath(os.path.join(root, ".peers"))}
    roots.update(os.path.realpath(d) for d in opts.also)
    spare = ancestors(os.getpid())

    deadline = time.monotonic() + opts.grace
    while True:
        found = leftovers(roots, opts.since, spare)
        if not found or time.monotonic() >= deadline:
            break
        time.sleep(0.25)
    if not found:
        print("check-leftovers: no process of the suite is left")
        return 0
    print(
        f"check-leftovers: {len(found)} process(es) started by the suite "
        f"still run {opts.grace:g} s after it ended:",
        file=sys.stderr,
    )
    for pid in found:
        print("  " + describe(pid), file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
