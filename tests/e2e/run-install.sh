#!/usr/bin/env bash
# Acceptance of `bir install` / `bir uninstall` with the real Claude Code CLI,
# offline (the shared harness in ../shared/e2e): a project whose approved
# `.mcp.json` server is `everything` (unwrapped) is installed with
# `bir install`; the real CLI then starts the server through bir-proxy, the
# scripted tool call succeeds and is recorded; `bir uninstall` restores
# ~/.claude.json byte for byte and the same session works unwrapped.
#
#   tests/e2e/run-install.sh
#
# Env knobs as in run.sh: BIR_BIN, BIR_E2E_HARNESS, E2E_CC_DIR, BIR_E2E_WORK,
# BIR_E2E_KEEP, E2E_TIMEOUT. Prints "PASS|FAIL <check>: <detail>" lines and
# ends with "N passed, M failed"; exits 1 if any check failed.
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib/report.sh
source "$HERE/lib/report.sh"
MESSAGE="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["turns"][0]["content"][1]["input"]["message"], end="")' "$HERE/unwrapped-echo/script.json")"

work_dir bir-e2e-install

# --- prerequisites ----------------------------------------------------------------------
need_harness
need_claude_code
need_bir
mkdir -p "$WORK/bin"
ln -sfn "$BIR_BIN" "$WORK/bin/bir-proxy"

# --- the project as Claude Code will see it, installed in a staging home ---------------
# run-claude.sh uses OUT/project and OUT/home; the project key in ~/.claude.json
# is that path, so bir install runs against it before the session starts.
OUT="$WORK/runs/session"
PROJECT="$OUT/project"
STAGE="$WORK/stage"
SCEN="$WORK/scenario"
mkdir -p "$STAGE/home" "$STAGE/managed" "$SCEN" "$PROJECT"
cp "$HERE/unwrapped-echo/prompt.txt" "$HERE/unwrapped-echo/script.json" "$HERE/unwrapped-echo/expect.json" "$SCEN/"
cp "$HERE/unwrapped-echo/mcp.json" "$PROJECT/.mcp.json"   # placeholders stay: the harness fills them later
sed -e "s#@@PROJECT@@#$PROJECT#g" "$HARNESS/fixtures/claude.json" >"$STAGE/home/.claude.json"
cp "$STAGE/home/.claude.json" "$STAGE/claude.json.orig"
# bir starts from an empty environment plus an allow-list: a developer's
# CODEX_HOME, CLAUDE_CONFIG_DIR or any variable a client reads must not steer
# `bir install` at their real configs.
bir() {
  env -i PATH="$PATH" ${TMPDIR:+TMPDIR="$TMPDIR"} HOME="$STAGE/home" BIR_HOME="$STAGE/bir-home" \
    BIR_PROXY_PATH="$WORK/bin/bir-proxy" BIR_CLAUDE_MANAGED_DIR="$STAGE/managed" \
    XDG_CONFIG_HOME="$STAGE/home/.config" BIR_SERVICE_URL=off "$BIR_BIN" "$@"
}
if bir install --project "$PROJECT" >"$WORK/bir-install.txt" 2>&1 &&
   grep -q 'wrapped  everything' "$WORK/bir-install.txt"; then
  result ok "bir install" "$(grep 'everything' "$WORK/bir-install.txt" | sed 's/^ *//')"
else
  result fail "bir install" "$(tr '\n' ' ' <"$WORK/bir-install.txt")"; finish
fi
if cmp -s "$PROJECT/.mcp.json" "$HERE/unwrapped-echo/mcp.json"; then
  result ok ".mcp.json untouched" "the team's file is byte-identical"
else
  result fail ".mcp.json untouched" "bir install changed $PROJECT/.mcp.json"
fi
cp "$PROJECT/.mcp.json" "$SCEN/mcp.json"
rm -rf "$OUT"

run_session() { # run_session NAME CLAUDE_JSON -> runs the scenario into $OUT, keeps it as runs/NAME
  cp "$2" "$SCEN/claude.json"
  rm -rf "$OUT"
  "$HARNESS/run-claude.sh" "$SCEN" "$OUT" >"$WORK/runs/$1.log" 2>&1
  local rc=$?
  if [[ -d "$OUT/logs" ]]; then
    if python3 "$HARNESS/check.py" "$SCEN" "$OUT" >"$OUT/logs/check.txt" 2>&1; then
      result ok "$1 session" "claude exited $rc; expect.json (answer, 'Successfully connected', echo completed) holds"
    else
      result fail "$1 session" "$(tail -5 "$OUT/logs/check.txt" | tr '\n' ' ')"
    fi
  else
    result fail "$1 session" "run-claude.sh exited $rc without an output dir: $(tail -3 "$WORK/runs/$1.log" | tr '\n' ' ')"
  fi
  rm -rf "$WORK/runs/$1"; mv "$OUT" "$WORK/runs/$1" 2>/dev/null
}

# --- 1. the installed config: the server runs through bir-proxy and is recorded ---------
run_session installed "$STAGE/home/.claude.json"
if env -i PATH="$PATH" HOME="$WORK/runs/installed/home" BIR_HOME="$WORK/runs/installed/home/.baseinstrunner" \
     "$BIR_BIN" runs export latest >"$WORK/export.json" 2>"$WORK/export.err" &&
   verdict="$(python3 - "$WORK/export.json" "$MESSAGE" <<'PY' 2>&1
import json, sys
doc = json.load(open(sys.argv[1]))
sel = [s for s in doc["steps"] if s["type"] == "tool_selected"]
assert len(sel) == 1, f"{len(sel)} tool_selected steps"
assert sel[0]["qualifiedName"] == "mcp__everything__echo", sel[0]["qualifiedName"]
assert sel[0]["input"] == {"message": sys.argv[2]}, sel[0]["input"]
assert doc["run"]["metadata"]["host"]["app"] == "claude-code"
print(f"run {doc['id'][:12]}: mcp__everything__echo recorded, toolUseId {sel[0].get('toolUseId')}")
PY
)"; then
  result ok "installed session recorded" "$verdict"
else
  result fail "installed session recorded" "$(cat "$WORK/export.err" 2>/dev/null) ${verdict:-}"
fi

# --- 2. bir uninstall restores every byte; the same session works unwrapped -------------
if bir uninstall --project "$PROJECT" >"$WORK/bir-uninstall.txt" 2>&1; then
  if cmp -s "$STAGE/home/.claude.json" "$STAGE/claude.json.orig"; then
    result ok "bir uninstall" "~/.claude.json is byte-identical to before bir install"
  else
    result fail "bir uninstall" "~/.claude.json differs: $(diff "$STAGE/claude.json.orig" "$STAGE/home/.claude.json" | head -5 | tr '\n' ' ')"
  fi
else
  result fail "bir uninstall" "$(tr '\n' ' ' <"$WORK/bir-uninstall.txt")"
fi
run_session uninstalled "$STAGE/home/.claude.json"
if [[ -e "$WORK/runs/uninstalled/home/.baseinstrunner/runs" ]] &&
   [[ -n "$(ls -A "$WORK/runs/uninstalled/home/.baseinstrunner/runs" 2>/dev/null)" ]]; then
  result fail "uninstalled session unwrapped" "a run was recorded: bir-proxy still ran"
else
  result ok "uninstalled session unwrapped" "no run recorded: the server ran without bir-proxy"
fi
finish
