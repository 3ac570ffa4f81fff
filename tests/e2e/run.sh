#!/usr/bin/env bash
# End-to-end: the real Claude Code CLI, offline, with its MCP server wrapped by
# bir-proxy, compared with the same session unwrapped. See README.md here.
#
#   tests/e2e/run.sh
#
# Env knobs:
#   BIR_BIN            the bir binary (default $REPO/target/debug/bir); a
#                      bir-proxy symlink to it is made in the work dir
#   BIR_E2E_HARNESS    the shared harness (default $REPO/../shared/e2e)
#   E2E_CC_DIR         where Claude Code + server-everything are installed
#                      (default $REPO/.peers/cc; installed if missing)
#   BIR_E2E_WORK       work dir (default: a new /tmp/bir-e2e.XXXXXX)
#   BIR_E2E_KEEP=1     keep the work dir even when everything passed
#   E2E_TIMEOUT        per-session timeout in seconds (default here 60)
# Prints one "PASS|FAIL <check>: <detail>" line per check and ends with
# "N passed, M failed"; exits 1 if any check failed.
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib/report.sh
source "$HERE/lib/report.sh"
SCENARIOS=(unwrapped-echo wrapped-echo)
# the echo argument scripted in */script.json (checked against what the model got)
MESSAGE="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["turns"][0]["content"][1]["input"]["message"], end="")' "$HERE/wrapped-echo/script.json")"

DROP_IF_NO_RUNS=1   # nothing ran: nothing to look at
work_dir bir-e2e

# --- prerequisites: harness, Claude Code, server-everything, the bir binary -----------
need_harness
for tool in node npm python3 timeout; do
  command -v "$tool" >/dev/null || { result fail prerequisites "$tool not on PATH"; finish; }
done
T0=$(date +%s%N)
need_claude_code
CLAUDE_VERSION="$("$E2E_CC_DIR/node_modules/.bin/claude" --version 2>&1 | head -1)"
EVERYTHING="$E2E_CC_DIR/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
if [[ ! -f "$EVERYTHING" ]]; then
  result fail "install claude code" "claude $CLAUDE_VERSION but no server-everything at $EVERYTHING"; finish
fi
result ok "install claude code" "$CLAUDE_VERSION + server-everything in $E2E_CC_DIR ($(( ($(date +%s%N) - T0) / 1000000 )) ms)"

need_bir
mkdir -p "$WORK/bin"
ln -sfn "$BIR_BIN" "$WORK/bin/bir-proxy"
BIR_PROXY="$WORK/bin/bir-proxy"

# --- scenario dirs: copy, filling in the proxy path (the harness fills the rest) -------
mkdir -p "$WORK/scenarios" "$WORK/runs"
for s in "${SCENARIOS[@]}"; do
  rm -rf "$WORK/scenarios/$s"; mkdir -p "$WORK/scenarios/$s"
  for f in "$HERE/$s"/*; do
    sed -e "s#@@BIR_PROXY@@#$BIR_PROXY#g" "$f" >"$WORK/scenarios/$s/$(basename "$f")"
  done
done

# --- run each scenario under the process watcher ---------------------------------------
for s in "${SCENARIOS[@]}"; do
  out="$WORK/runs/$s"
  rm -rf "$out"            # run-claude.sh only replaces dirs that look like its own output
  mkdir -p "$WORK/watch"
  stop="$WORK/watch/$s.stop"; rec="$WORK/watch/$s.procs.jsonl"; rm -f "$stop" "$rec"
  python3 "$HERE/lib/procwatch.py" watch --marker "$out" --out "$rec" --stop-file "$stop" \
    --max-seconds $((E2E_TIMEOUT + 30)) &
  watch_pid=$!
  sleep 0.1
  "$HARNESS/run-claude.sh" "$WORK/scenarios/$s" "$out" >"$WORK/runs/$s.log" 2>&1
  rc=$?
  # Claude Code has exited: are the MCP server processes gone (allow ~1 s)?
  python3 "$HERE/lib/procwatch.py" alive --records "$rec" --marker "$out" --wait 1.0 >"$WORK/watch/$s.alive.json"
  touch "$stop"; wait "$watch_pid" 2>/dev/null
  if [[ -d "$out/logs" ]]; then
    cp "$rec" "$out/logs/procs.jsonl" 2>/dev/null || : >"$out/logs/procs.jsonl"
    cp "$WORK/watch/$s.alive.json" "$out/logs/alive.json"
    python3 "$HARNESS/check.py" "$WORK/scenarios/$s" "$out" >"$out/logs/check.txt" 2>&1
    echo $? >"$out/logs/check.rc"
  else
    result fail "$s session" "run-claude.sh exited $rc without an output dir: $(tail -3 "$WORK/runs/$s.log" | tr '\n' ' ')"
  fi
  # Stop leftovers (processes this run started) by pid so nothing outlives the test.
  python3 - "$WORK/watch/$s.alive.json" <<'PY'
import json, os, signal, sys
for r in json.load(open(sys.argv[1])).get("alive", []):
    try: os.kill(r["pid"], signal.SIGKILL)
    except OSError: pass
PY
done

# --- compare ------------------------------------------------------------------------------
if [[ -d "$WORK/runs/wrapped-echo/logs" && -d "$WORK/runs/unwrapped-echo/logs" ]]; then
  checks_out="$(python3 "$HERE/lib/checks.py" --wrapped "$WORK/runs/wrapped-echo" \
    --unwrapped "$WORK/runs/unwrapped-echo" --message "$MESSAGE" 2>&1)"
  verdicts <<<"$checks_out"
  [[ "$checks_out" == *PASS* || "$checks_out" == *FAIL* ]] || result fail checks "checks.py produced no verdicts"
fi

# --- the wrapped session was recorded (Tier 2 run in the session's HOME) -----------------
# (the scenario's entry sets BIR_BIND=off: this checks the standalone path under the real
# CLI; a Claude Code session otherwise binds its proxies to the recorder daemon)
RUN_HOME="$WORK/runs/wrapped-echo/home/.baseinstrunner"
if env -i PATH="$PATH" HOME="$(dirname "$RUN_HOME")" BIR_HOME="$RUN_HOME" "$BIR_BIN" runs export latest >"$WORK/run-export.json" 2>"$WORK/run-export.err"; then
  if verdict="$(python3 - "$WORK/run-export.json" "$MESSAGE" <<'PY' 2>&1
import json, sys
doc = json.load(open(sys.argv[1]))
msg = sys.argv[2]
steps, meta = doc["steps"], doc["run"]["metadata"]
sel = [s for s in steps if s["type"] == "tool_selected"]
res = [s for s in steps if s["type"] == "tool_response"]
assert len(sel) == 1 and len(res) == 1, f"{len(sel)} tool_selected / {len(res)} tool_response steps"
s, r = sel[0], res[0]
assert s["qualifiedName"] == "mcp__everything__echo" and s["toolName"] == "echo", s["qualifiedName"]
assert s["input"] == {"message": msg}, s["input"]
assert s.get("toolUseId", "").startswith("toolu_fake_"), s.get("toolUseId")
assert meta["host"]["app"] == "claude-code", meta.get("host")
assert meta.get("sessionId"), "no CLAUDE_CODE_SESSION_ID on the run"
assert meta["tier"] == "standalone"
text = r["output"]["content"][0]["text"]
assert msg in text, text
assert doc["finish"] and not doc["finish"]["lossy"], doc["finish"]
print(f"run {doc['id'][:12]}: 1 call, toolUseId {s['toolUseId']}, host {meta['host']['app']} {meta['host']['version']}, session {meta['sessionId'][:8]}")
PY
)"; then result ok "wrapped-echo recorded" "$verdict"; else result fail "wrapped-echo recorded" "$verdict"; fi
else
  result fail "wrapped-echo recorded" "bir runs export failed: $(cat "$WORK/run-export.err")"
fi
finish
