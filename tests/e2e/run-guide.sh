#!/usr/bin/env bash
# End-to-end of guided replay (`bir guide`) with the real Claude Code CLI,
# offline (the shared harness in ../shared/e2e), on top of the bound tier:
# `bir install` wraps the project's MCP server and registers the hooks, then
# `bir guide start guide/scenario.json` arms a guide (echo "hello", echo
# "${param:who}" = "world", get-sum a=${param:a}=2 b=3) for the sessions'
# parent directory. Five scripted sessions:
#   follow   bypass mode: the exact echo passes untouched, the second echo
#            (other words in the parameter slot) is pinned with `allow`, the
#            model stops early and is nudged once, then does the sum;
#   deviate  bypass mode: a Bash call that is not in the procedure hands
#            over (one line of context); the next echo is left alone;
#   ask      no bypass, `permissions.allow: [mcp__everything__echo]` in the
#            project settings: the echo pin gets `allow` (provable), the
#            get-sum pin gets `ask` (nothing proves no prompt), and `-p`
#            refuses it: the server never sees get-sum;
#   plan     `--permission-mode plan`: the would-be pin is advice only
#            (no decision, no updatedInput) and the step stays expected;
#   sibling  bypass mode plus another PreToolUse hook that rewrites the
#            input too: its rewrite wins, the proxy's report shows the pin
#            did not reach the server, the guide hands over
#            (pin-not-applied).
# lib/guide_check.py checks each session (what the server and the model
# got, the guide's state, the run's `bir.guide` events).
#
#   tests/e2e/run-guide.sh
#
# Env knobs as in run-bound.sh. Prints "PASS|FAIL <check>: <detail>" lines
# and ends with "N passed, M failed"; exits 1 if any check failed.
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# The helpers of run-bound.sh (prepare, session, wait_runs, export_runs,
# stop_daemons at exit) and its prerequisites.
BIR_E2E_BOUND_LIB=1 source "$HERE/run-bound.sh"
GUIDE="$HERE/guide"

# finished_run NAME: until BIR_HOME holds a finished bound run (or WAIT s);
# saves `bir runs --json` as runs/NAME.runs.jsonl. (run-bound.sh's
# wait_runs greps for "tier" before "state", but `bir runs --json` sorts its
# keys, so it always waits the whole WAIT there.)
finished_run() {
  local name="$1" bh="$WORK/birhome/$1" deadline=$((SECONDS + WAIT))
  while (( SECONDS < deadline )); do
    BIR_HOME="$bh" "$BIR_BIN" runs --json 2>/dev/null | grep '"tier":"bound"' |
      grep -q '"state":"finished"' && break
    sleep 0.3
  done
  BIR_HOME="$bh" "$BIR_BIN" runs --json >"$WORK/runs/$name.runs.jsonl" 2>/dev/null
}

# guided NAME PERMISSION [SETTINGS [ARGS]]: a bound session of
# guide/script-NAME.json with the guide armed for $WORK/runs (each session's
# project is below it), then the checks of lib/guide_check.py NAME.
guided() {
  local name="$1" permission="$2" settings="${3:-}" args="${4:-}"
  local bh="$WORK/birhome/$name"
  prepare "$name" "$GUIDE/script-$name.json" bound
  cp "$GUIDE/prompt.txt" "$WORK/scen/$name/prompt.txt"
  echo "$permission" >"$WORK/scen/$name/permission"
  [[ -n $settings ]] && cp "$settings" "$WORK/scen/$name/settings.json"
  [[ -n $args ]] && cp "$args" "$WORK/scen/$name/args"
  [[ $name == sibling ]] && echo "E2E_HOOK_UPDATED_INPUT=1" >>"$WORK/scen/$name/env"
  # With the session's Claude config: arming a guide registers the hook
  # events only guides need (PostToolBatch) beside bir's other hooks.
  if env -u XDG_CONFIG_HOME HOME="$WORK/home-$name" CLAUDE_CONFIG_DIR="$WORK/conf/$name" BIR_HOME="$bh" \
       BIR_SERVICE_URL=off BIR_PROXY_PATH="$WORK/bin/bir-proxy" BIR_HOOKS_PATH="$WORK/bin/bir-hooks" \
       BIR_CLAUDE_MANAGED_DIR="$WORK/managed" "$BIR_BIN" guide start "$GUIDE/scenario.json" \
       --project "$WORK/runs" >"$WORK/guide-start-$name.txt" 2>&1 &&
     grep -q '"PostToolBatch"' "$WORK/conf/$name/settings.json"; then
    result ok "$name: bir guide start" "$(head -1 "$WORK/guide-start-$name.txt")"
  else
    result fail "$name: bir guide start" "$(tr '\n' ' ' <"$WORK/guide-start-$name.txt")"
  fi
  session "$name"
  finished_run "$name"
  export_runs "$name"
  BIR_HOME="$bh" "$BIR_BIN" guide status --project "$WORK/runs" --json >"$WORK/runs/$name.guide.json" 2>&1
  BIR_HOME="$bh" "$BIR_BIN" guide status --project "$WORK/runs" >"$WORK/runs/$name.guide.txt" 2>&1
  verdicts < <(python3 "$HERE/lib/guide_check.py" "$name" "$name" "$WORK" 2>&1)
  # `bir guide stop` ends it; status then says so.
  BIR_HOME="$bh" "$BIR_BIN" guide stop --project "$WORK/runs" >"$WORK/guide-stop-$name.txt" 2>&1
  if grep -q '^Guide stopped' "$WORK/guide-stop-$name.txt" &&
     BIR_HOME="$bh" "$BIR_BIN" guide status --project "$WORK/runs" 2>&1 | grep -q '^No guide armed'; then
    result ok "$name: bir guide stop" "$(cat "$WORK/guide-stop-$name.txt")"
  else
    result fail "$name: bir guide stop" "$(tr '\n' ' ' <"$WORK/guide-stop-$name.txt")"
  fi
}

guided follow bypass
guided deviate bypass
guided ask none "$GUIDE/settings-ask.json"
guided plan none "" "$GUIDE/args-plan"
guided sibling bypass "$GUIDE/settings-sibling.json"
finish
