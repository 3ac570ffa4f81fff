#!/usr/bin/env python3
"""A stdio MCP relay that logs the JSON-RPC lines both ways, for capturing
what a host sends an MCP server (e.g. the `_meta` of its `tools/call`).

    mcp_log_relay.py LOG -- CMD [ARGS...]

Copies bytes unchanged; appends {"t", "pid", "dir": "c2s"|"s2c", "msg"} per
line to LOG (pid: this relay's, one per server connection — a host may
start the server more than once, and JSON-RPC ids repeat across them).
"""
import json
import os
import subprocess
import sys
import threading
import time

log_path = sys.argv[1]
cmd = sys.argv[sys.argv.index("--") + 1:]
lock = threading.Lock()


def note(direction: str, line: bytes) -> None:
    try:
        msg = json.loads(line)
    except ValueError:
        msg = line.decode("utf-8", "replace")
    with lock, open(log_path, "a", encoding="utf-8") as f:
        f.write(json.dumps({"t": round(time.time(), 6), "pid": os.getpid(), "dir": direction, "msg": msg}, ensure_ascii=False) + "\n")


proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE)


def up() -> None:
    for line in sys.stdin.buffer:
        note("c2s", line)
        try:
            proc.stdin.write(line)
            proc.stdin.flush()
        except BrokenPipeError:
            break
    try:
        proc.stdin.close()
    except BrokenPipeError:
        pass


threading.Thread(target=up, daemon=True).start()
for out_line in proc.stdout:
    note("s2c", out_line)
    sys.stdout.buffer.write(out_line)
    sys.stdout.buffer.flush()
sys.exit(proc.wait())
