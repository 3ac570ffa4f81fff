#!/usr/bin/env python3
"""Checks one guided session of run-guide.sh (PASS/FAIL lines).

    guide_check.py MODE NAME WORK

MODE is follow, deviate or ask (see run-guide.sh). Reads what the real
session left: the server's view (logs/mcp.jsonl, written by the harness's
relay behind bir-proxy), what the model was sent (logs/requests.jsonl), the
final stream (logs/stdout.jsonl), the guide's state (`bir guide status
--json`, saved as runs/NAME.guide.json) and the bound run's `bir.guide`
events (`bir runs export`, runs/NAME.export.*.json).
"""
import glob
import json
import os
import sys

mode, name, work = sys.argv[1], sys.argv[2], sys.argv[3]
out = os.path.join(work, "runs", name)
logs = os.path.join(out, "logs")


def result(ok, check, detail):
    print(f"{'PASS' if ok else 'FAIL'} {name}: {check}: {detail}")


def lines(path):
    try:
        with open(path, encoding="utf-8") as f:
            return [json.loads(l) for l in f if l.strip()]
    except (OSError, ValueError):
        return []


def text(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError:
        return ""


# What the server received, in order: (tool, arguments, toolUseId).
calls = [
    (m["msg"]["params"].get("name"), m["msg"]["params"].get("arguments"),
     (m["msg"]["params"].get("_meta") or {}).get("claudecode/toolUseId"))
    for m in lines(os.path.join(logs, "mcp.jsonl"))
    if m.get("dir") == "c2s" and isinstance(m.get("msg"), dict)
    and m["msg"].get("method") == "tools/call"
]
requests = text(os.path.join(logs, "requests.jsonl"))
stream = lines(os.path.join(logs, "stdout.jsonl"))
final = next((s for s in stream if s.get("type") == "result"), {})

guides = lines(os.path.join(work, "runs", f"{name}.guide.json"))
guide = guides[0] if guides else {}
progress = guide.get("progress", {})


def find_events(node, found):
    if isinstance(node, dict):
        if node.get("name") == "bir.guide" and isinstance(node.get("data"), dict):
            found.append(node["data"])
        for v in node.values():
            find_events(v, found)
    elif isinstance(node, list):
        for v in node:
            find_events(v, found)


events = []
for path in sorted(glob.glob(os.path.join(work, "runs", f"{name}.export.*.json"))):
    try:
        with open(path, encoding="utf-8") as f:
            find_events(json.load(f), events)
    except (OSError, ValueError):
        pass
actions = [(e.get("action"), e.get("step")) for e in events]
show = " ".join(text(p) for p in glob.glob(os.path.join(work, "runs", f"{name}.show.*.txt")))

result(final.get("subtype") == "success" and not final.get("is_error"),
       "session", f"result {final.get('subtype')!r}: {str(final.get('result'))[:80]!r}")
result("this task has a recorded procedure" in requests and "[s1] mcp__everything__echo" in requests,
       "outline reached the model", "UserPromptSubmit additionalContext in the first request")
result(bool(events) and actions[0] == ("started", None), "run records the guide",
       f"bir.guide events: {actions}")
result("bir.guide" in show, "bir runs show", "guide lines shown" if "bir.guide" in show else show[:300])

echoes = [a.get("message") for t, a, _ in calls if t == "echo"]
sums = [a for t, a, _ in calls if t == "get-sum"]

if mode == "follow":
    result(echoes == ["guide-e2e hello", "guide-e2e world"], "server got the pinned echo",
           f"echo arguments the server received: {echoes}")
    result(sums == [{"a": 2, "b": 3}], "exact sum passed untouched", f"get-sum calls: {sums}")
    # The Stop waits for the proxy's report of the pinned call, so the
    # check comes before the nudge however late the proxy posts it.
    want = [("started", None), ("followed", "s1"), ("pinned", "s2"), ("pin_checked", None),
            ("nudged", "s3"), ("followed", "s3")]
    result(actions == want, "followed / pinned / nudged in order", f"{actions}")
    pinned = next((e for e in events if e.get("action") == "pinned"), {})
    checked = next((e for e in events if e.get("action") == "pin_checked"), {})
    result(pinned.get("decision") == "allow" and pinned.get("changed") == ["/message"],
           "bypass mode pins with allow", f"{pinned}")
    pinned_call = next((u for t, a, u in calls if t == "echo" and a.get("message") == "guide-e2e world"), None)
    result(checked.get("applied") is True and checked.get("toolUseId") == pinned_call == pinned.get("toolUseId"),
           "proxy confirmed the pin by toolUseId", f"{checked}; server call {pinned_call}")
    result("the recorded procedure is not finished" in requests and "Next: step s3" in requests,
           "Stop nudged once, naming the next step",
           f"nudges={progress.get('nudges')}")
    result(progress.get("phase") == "done" and progress.get("followed") == 2 and progress.get("pinned") == 1
           and progress.get("asked") == 0 and progress.get("nudges") == 1,
           "guide status", f"{progress}")
elif mode == "deviate":
    result(echoes == ["guide-e2e hello", "guide-e2e somebody-else"],
           "after the handover nothing is pinned", f"echo arguments the server received: {echoes}")
    want = [("started", None), ("followed", "s1"), ("handover", "s2")]
    result(actions == want, "one handover, then silence", f"{actions}")
    result("stopped following the recorded procedure at step s2" in requests,
           "handover context reached the model", "PreToolUse additionalContext in a later request")
    result(progress.get("phase") == "handed_over" and progress.get("handedOverAt") == "s2"
           and progress.get("nudges") == 0,
           "guide status", f"{progress}")
elif mode == "ask":
    result(echoes == ["guide-e2e hello", "guide-e2e world"],
           "allow rule in settings: echo pinned with allow", f"echo arguments the server received: {echoes}")
    result(sums == [], "get-sum needed permission: the server never got it", f"get-sum calls: {sums}")
    decisions = {e.get("step"): e.get("decision") for e in events if e.get("action") == "pinned"}
    result(decisions == {"s2": "allow", "s3": "ask"}, "ask where a prompt was due, never allow",
           f"pins: {decisions}")
    denials = final.get("permission_denials") or []
    denied = [d.get("tool_name") for d in denials]
    result("mcp__everything__get-sum" in denied, "Claude Code -p refused the asked call",
           f"permission_denials: {json.dumps(denials)[:300]}")
    refused = [e for e in events if e.get("action") == "handover"]
    result(len(refused) == 1 and refused[0].get("step") == "s3" and "did not run" in refused[0].get("reason", ""),
           "the refused step ends the guide (PostToolBatch without PostToolUse)", f"{actions}")
    result(progress.get("pinned") == 2 and progress.get("asked") == 1 and progress.get("phase") == "handed_over"
           and progress.get("done") == ["s1", "s2"] and progress.get("nudges") == 0,
           "guide status: s3 not done, no nudge after a refusal", f"{progress}")
elif mode == "plan":
    advised = [e for e in events if e.get("action") == "advised"]
    result(len(advised) == 1 and advised[0].get("permissionMode") == "plan" and advised[0].get("step") == "s2",
           "plan mode: advice, not a pin", f"{actions}")
    result(not any(e.get("action") == "pinned" for e in events), "no pin in plan mode", f"{actions}")
    debug = text(os.path.join(logs, "debug.log"))
    result("permissionDecision" not in debug and "updatedInput" not in debug,
           "no decision or rewrite reached Claude Code", "debug.log has neither key")
    result("the recorded procedure made this call (step s2)" in requests,
           "the advice reached the model", "PreToolUse additionalContext in a later request")
    result(("planned", "s1") in actions, "plan mode: an exact match stays expected", f"{actions}")
    result(calls == [], "Claude Code ran no MCP call in plan mode", f"tools/call: {calls}")
    result(progress.get("phase") == "active" and progress.get("done") == [] and progress.get("advised") == 1
           and progress.get("nudges") == 0,
           "guide status: s1 still expected, no nudge in plan mode", f"{progress}")
elif mode == "sibling":
    # Another PreToolUse hook (the harness's log_hook.py) also answers with
    # updatedInput (the model's input plus __bir_call_id__); Claude Code
    # 2.1.332 applies the last hook's rewrite, so the server does not get
    # the pin — and the run must say so.
    result(echoes == ["guide-e2e hello", "guide-e2e somebody-else"],
           "the sibling hook's rewrite reached the server, not the pin", f"echo arguments: {echoes}")
    checked = next((e for e in events if e.get("action") == "pin_checked"), {})
    pinned = next((e for e in events if e.get("action") == "pinned"), {})
    result(checked.get("applied") is False and checked.get("toolUseId") == pinned.get("toolUseId"),
           "proxy check: pin not applied", f"{checked}")
    handover = next((e for e in events if e.get("action") == "handover"), {})
    result(handover.get("reason", "").startswith("pin-not-applied"), "pin-not-applied hands over",
           f"{handover}")
    result(progress.get("phase") == "handed_over" and progress.get("done") == ["s1"]
           and progress.get("handedOverAt") == "s2" and progress.get("nudges") == 0,
           "guide status: s2 not done (it ran with other arguments)", f"{progress}")
