#!/usr/bin/env bash
# How many hook processes a real agent starts in the e2e session (offline,
# as capture.sh drives it), with the before-tool hook for every tool and
# with bir's matcher (`Host::before_tool_matcher`): every hook logged by
# log_hook.py, counted per event and tool. Deterministic: counts, not time.
#
#   tests/e2e/hosts/count-hooks.sh codex|gemini [MATCHER|ALL]
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
HOST="${1:?usage: count-hooks.sh codex|gemini [MATCHER|ALL]}"
case "$HOST" in
  codex) M="${2:-^(mcp__.*|.*_agent)$}" ;;
  gemini) M="${2:-^(mcp_.*|invoke_agent)$}" ;;
  *) echo "count-hooks.sh: host must be codex or gemini" >&2; exit 2 ;;
esac
# shellcheck source=api.sh
source "$HERE/api.sh"
OUT="$(mktemp -d /tmp/hosts-count.XXXXXX)"
trap 'api_stop || true; rm -rf "$OUT"' EXIT
api_start "$HOST" "$OUT" "$HERE/$HOST/script.json"
python3 "$HERE/make_config.py" "$HOST" "$OUT" --port "$API_PORT" --hooks log --mcp relay
echo "the notes say: hosts-e2e-notes" >"$OUT/project/notes.txt"
python3 - "$HOST" "$OUT" "$M" <<'PY'
import json, os, sys
host, out, m = sys.argv[1:]
path, ev = ((os.path.join(out, "codex", "hooks.json"), "PreToolUse") if host == "codex"
            else (os.path.join(out, "home", ".gemini", "settings.json"), "BeforeTool"))
doc = json.load(open(path, encoding="utf-8"))
if m != "ALL":
    doc["hooks"][ev][0]["matcher"] = m
json.dump(doc, open(path, "w", encoding="utf-8"), indent=2)
PY
extra=""
[[ $HOST == codex ]] && extra="--dangerously-bypass-hook-trust"
HOST_EXTRA_ARGS="$extra" "$HERE/run-host.sh" "$HOST" "$OUT" >/dev/null 2>&1
python3 - "$HOST" "$OUT/logs/hooks.jsonl" "$M" <<'PY'
import collections, json, sys
host, path, m = sys.argv[1:]
# The events bir registers (`hosthooks::events`); Gemini's automatic
# PreCompress does not reach bir's hook (matcher "manual").
bir = {"codex": {"SessionStart", "SessionEnd", "UserPromptSubmit", "PreToolUse", "PermissionRequest",
                 "PostToolUse", "PreCompact", "PostCompact", "SubagentStart", "SubagentStop", "Stop",
                 "Interrupt"},
       "gemini": {"SessionStart", "SessionEnd", "BeforeAgent", "AfterAgent", "BeforeTool", "AfterTool",
                  "PreCompress", "Notification"}}[host]
rows = [json.loads(l) for l in open(path, encoding="utf-8") if l.strip()]
rows = [r for r in rows if r.get("registered_event") in bir
        and not (r["registered_event"] == "PreCompress" and r["payload"].get("trigger") == "auto")]
tools = collections.Counter((r["registered_event"], r["payload"].get("tool_name")) for r in rows
                            if "Tool" in r["registered_event"])
for (ev, tool), n in sorted(tools.items()):
    print(f"  {ev:12} {tool:32} {n}")
calls = sum(n for (ev, _), n in tools.items() if ev in ("PostToolUse", "AfterTool"))
print(f"{host}, before-tool matcher {m}: {len(rows)} hook processes of bir's events, {calls} tool calls")
PY
