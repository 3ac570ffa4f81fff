#!/usr/bin/env python3
"""A host's command hook that records what it is given: appends one JSON line
(the event it was registered for, the stdin payload as parsed, pid, the host's
own env vars by prefix) to $HOSTS_E2E_LOG/hooks.jsonl and exits 0 with no
output, so the host goes on as without hooks.

    log_hook.py EVENT
"""
import json
import os
import sys
import time

raw = sys.stdin.read()
try:
    payload = json.loads(raw) if raw.strip() else None
except ValueError:
    payload = raw
rec = {
    "t": round(time.time(), 6),
    "registered_event": sys.argv[1] if len(sys.argv) > 1 else None,
    "payload": payload,
    "stdin_ends_with_newline": raw.endswith("\n"),
    "host_env": {k: v for k, v in os.environ.items() if k.startswith(("CODEX", "GEMINI")) and "KEY" not in k},
    "pid": os.getpid(),
    "ppid": os.getppid(),
    "cwd": os.getcwd(),
}
log_dir = os.environ.get("HOSTS_E2E_LOG")
if log_dir:
    with open(os.path.join(log_dir, "hooks.jsonl"), "a", encoding="utf-8") as f:
        f.write(json.dumps(rec, ensure_ascii=False) + "\n")
