#!/usr/bin/env bash
# End-to-end of `bir mock` with the real Claude Code CLI, offline (the shared
# harness in ../shared/e2e). Three scripted sessions (mock/):
#
#   live  `bir install --config` wraps server-everything; the model calls
#         echo; bir-proxy records the run (standalone, BIR_BIND=off).
#   mock  the run becomes a scenario (`bir scenario derive`), and `bir
#         install --replay FILE --server everything` switches the entry to
#         the recording (`bir-proxy --replay`); the same call must reach the
#         model with the very tool result the live server gave, and the
#         session is journaled as a run made by `bir-mock`.
#   miss  the same mock, the model calls echo with another message: Claude
#         Code gets a tool error naming the nearest recorded step.
#
#   tests/e2e/run-mock.sh
#
# Env knobs as in run.sh: BIR_BIN, BIR_E2E_HARNESS, E2E_CC_DIR, BIR_E2E_WORK,
# BIR_E2E_KEEP, E2E_TIMEOUT. Prints "PASS|FAIL <check>: <detail>" lines and
# ends with "N passed, M failed"; exits 1 if any check failed.
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib/report.sh
source "$HERE/lib/report.sh"
work_dir bir-e2e-mock

need_harness
need_claude_code
need_bir
EVERYTHING="$E2E_CC_DIR/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
[[ -f $EVERYTHING ]] || { result fail prerequisites "no server-everything at $EVERYTHING"; finish; }
mkdir -p "$WORK/bin" "$WORK/runs" "$WORK/home"
ln -sfn "$BIR_BIN" "$WORK/bin/bir-proxy"
BH="$WORK/birhome"
mkdir -p "$BH" && chmod 700 "$BH"

# bir as the user runs it: this BIR_HOME, a HOME of its own, no service.
bir() {
  env -u BIR_WRAP_MCP_JSON -u XDG_CONFIG_HOME HOME="$WORK/home" BIR_HOME="$BH" \
    BIR_SERVICE_URL=off BIR_PROXY_PATH="$WORK/bin/bir-proxy" "$BIR_BIN" "$@"
}

# scenario NAME SCRIPT: a harness scenario dir whose mcp.json is mock/mcp.json
# with the paths this run knows filled in (the harness fills @@OUT@@).
scenario() {
  local dir="$WORK/scen/$1"
  rm -rf "$dir"; mkdir -p "$dir"
  cp "$HERE/mock/prompt.txt" "$dir/"
  cp "$HERE/mock/$2" "$dir/script.json"
  sed -e "s#@@CC@@#$E2E_CC_DIR#g" -e "s#@@BIR_HOME@@#$BH#g" "$HERE/mock/mcp.json" >"$dir/mcp.json"
  {
    # The first request waits for the MCP server (the model's first view
    # is then the same on a busy machine).
    echo "MCP_CONNECTION_NONBLOCKING=0"
    echo "MCP_CONNECT_TIMEOUT_MS=30000"
  } >"$dir/env"
  echo "$dir"
}

# session NAME: runs the scenario dir of NAME into $WORK/runs/NAME.
session() {
  local out="$WORK/runs/$1"
  rm -rf "$out"
  "$HARNESS/run-claude.sh" "$WORK/scen/$1" "$out" >"$WORK/runs/$1.log" 2>&1
  local rc=$?
  if [[ -f "$out/logs/stdout.jsonl" ]]; then
    result ok "$1 session" "claude exited $rc"
  else
    result fail "$1 session" "no output (exit $rc): $(tail -3 "$WORK/runs/$1.log" | tr '\n' ' ')"
  fi
}

# tool_result NAME: the tool_result block Claude Code got, as JSON
# ({"content": …, "is_error": …}), from its stream-json output.
tool_result() {
  python3 - "$WORK/runs/$1/logs/stdout.jsonl" <<'PY'
import json, sys
found = []
for line in open(sys.argv[1]):
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("type") != "user":
        continue
    for block in (m.get("message") or {}).get("content") or []:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            found.append({"content": block.get("content"), "is_error": bool(block.get("is_error"))})
if len(found) != 1:
    sys.exit(f"{len(found)} tool results in {sys.argv[1]}")
print(json.dumps(found[0], sort_keys=True))
PY
}

# --- live: record through the wrapped server ------------------------------------------
live="$(scenario live script.json)"
if bir install --config "$live/mcp.json" --hooks none >"$WORK/install-live.txt" 2>&1 &&
   grep -q 'bir-proxy' "$live/mcp.json"; then
  result ok "install (live)" "everything wrapped in $live/mcp.json"
else
  result fail "install (live)" "$(tr '\n' ' ' <"$WORK/install-live.txt")"; finish
fi
session live
live_result="$(tool_result live 2>&1)" || { result fail "live tool result" "$live_result"; finish; }
if [[ $live_result == *'bir-mock e2e 4d1b: recorded once, served again'* && $live_result == *'"is_error": false'* ]]; then
  result ok "live tool result" "$(cut -c1-160 <<<"$live_result")"
else
  result fail "live tool result" "$live_result"
fi

# --- the recording as a scenario, served by the mock -----------------------------------
if bir scenario derive latest -o "$WORK/rec.scenario.json" >"$WORK/derive.txt" 2>&1 &&
   grep -q '"tool": "echo"' "$WORK/rec.scenario.json"; then
  result ok "derive" "$(tr '\n' ' ' <"$WORK/derive.txt" | cut -c1-160)"
else
  result fail "derive" "$(tr '\n' ' ' <"$WORK/derive.txt") $(head -c 300 "$WORK/rec.scenario.json" 2>/dev/null)"; finish
fi
for name in mock miss; do
  script=script.json; [[ $name == miss ]] && script=script-miss.json
  dir="$(scenario "$name" "$script")"
  if bir install --config "$dir/mcp.json" --server everything --replay "$WORK/rec.scenario.json" \
       --hooks none >"$WORK/install-$name.txt" 2>&1 && grep -q -- '--replay' "$dir/mcp.json"; then
    result ok "install --replay ($name)" "the entry serves $WORK/rec.scenario.json"
  else
    result fail "install --replay ($name)" "$(tr '\n' ' ' <"$WORK/install-$name.txt")"; finish
  fi
done

session mock
mock_result="$(tool_result mock 2>&1)"
if [[ $mock_result == "$live_result" ]]; then
  result ok "mock answers like the live server" "identical tool_result: $(cut -c1-120 <<<"$mock_result")"
else
  result fail "mock answers like the live server" "live $live_result; mock $mock_result"
fi
# The mock session is a run of its own, made by bir-mock.
if made="$(bir runs --all --json 2>&1 | python3 -c '
import json, sys
runs = [json.loads(l) for l in sys.stdin if l.strip()]
mocks = [r for r in runs if r.get("madeBy", "").startswith("bir-mock of ")]
assert len(mocks) == 1 and mocks[0]["toolCalls"] == 1, runs
# Claude Code stops its servers with SIGINT: the run was finished all the same.
assert mocks[0]["state"] == "finished", mocks[0]
print(mocks[0]["id"], mocks[0]["madeBy"], mocks[0]["state"])' 2>&1)"; then
  result ok "mock session journaled" "$made"
else
  result fail "mock session journaled" "$made"
fi

session miss
miss_result="$(tool_result miss 2>&1)"
if [[ $miss_result == *'"is_error": true'* && $miss_result == *'nearest recorded step s1'* ]]; then
  result ok "a miss names the nearest step" "$(cut -c1-200 <<<"$miss_result")"
else
  result fail "a miss names the nearest step" "$miss_result"
fi
finish
