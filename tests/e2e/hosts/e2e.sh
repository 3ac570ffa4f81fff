#!/usr/bin/env bash
# End-to-end of the bound tier with a real coding agent other than Claude
# Code — the Codex CLI or the Gemini CLI (.peers/hosts, pinned by
# scripts/install-peers.sh) — offline, against a scripted fake of its model
# API (fake_model_api.py). One session (HOST/prompt.txt, HOST/script.json):
# a shell command, a file read, an MCP call of server-everything, a subagent
# that calls an MCP tool, the answer. Run by tests/e2e/run-codex.sh and
# run-gemini.sh.
#
#   tests/e2e/hosts/e2e.sh codex|gemini
#
# 1. baseline: the session without bir (the project's MCP server behind a
#    logging relay, no hooks);
# 2. bound: the same config, then `bir install --client HOST` (hooks
#    registered — for Codex also trusted — and the server wrapped by
#    bir-proxy); the session; `bir runs export` / `bir runs show` checked by
#    hosts_check.py against the script, the relay's wire log and the baseline;
# 3. `bir uninstall --client HOST`: the host's config files byte-identical to
#    before the install;
# 4. off: installed, then `bir off`: the session as without bir, nothing recorded.
# If this bir's `bir install --client HOST` registers no hooks, step 2 fails
# that check and goes on with the hooks written by hand into the config the
# install left (make_config.py --only-hooks --hooks bir; Codex: hook trust
# bypassed by flag), so the recording itself is still checked; step 3 takes
# those hooks out again before `bir uninstall`.
#
# Knobs as in run-bound.sh: BIR_BIN, BIR_E2E_WORK, BIR_E2E_KEEP;
# BIR_E2E_BOUND_WAIT (s to wait for the run to finish, default 30),
# HOST_TIMEOUT (s per session, default 120), HOSTS_DIR (the CLIs; default
# .peers/hosts). Prints "PASS|FAIL <check>: <detail>" lines and
# "N passed, M failed"; exits 1 if any check failed.
set -uo pipefail

HOST="${1:?usage: e2e.sh codex|gemini}"
HOSTS="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
HERE="$(cd "$HOSTS/.." && pwd)"
# shellcheck source=../lib/report.sh
source "$HERE/lib/report.sh"
# shellcheck source=api.sh
source "$HOSTS/api.sh"
WAIT="${BIR_E2E_BOUND_WAIT:-30}"
export HOSTS_DIR="${HOSTS_DIR:-$REPO/.peers/hosts}"
SCRIPT="$HOSTS/$HOST/script.json"
PROMPT="$HOSTS/$HOST/prompt.txt"
case "$HOST" in
  codex) VERSION=0.169.0 ;;
  gemini) VERSION=0.61.0 ;;
  *) echo "e2e.sh: host must be codex or gemini" >&2; exit 2 ;;
esac

DAEMON_HOMES=()
cleanup() { # the fake API, then every daemon a session started
  local h pid
  api_stop
  for h in "${DAEMON_HOMES[@]}"; do
    BIR_HOME="$h" BIR_SERVICE_URL=off "$BIR_BIN" down >/dev/null 2>&1
    pid="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("pid",""))' "$h/control/daemon.json" 2>/dev/null)"
    [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null && kill "$pid" 2>/dev/null
  done
}
trap cleanup EXIT
work_dir "bir-e2e-$HOST"

# --- prerequisites ---------------------------------------------------------------------
need_bir
have_cli() {
  case "$HOST" in
    codex) "$HOSTS_DIR/node_modules/.bin/codex" --version 2>/dev/null | grep -q "$VERSION" ;;
    gemini) grep -q "\"version\": \"$VERSION\"" "$HOSTS_DIR/node_modules/@google/gemini-cli/package.json" 2>/dev/null ;;
  esac
}
if ! have_cli && ! "$REPO/scripts/install-peers.sh" >"$WORK/install-peers.log" 2>&1 || ! have_cli; then
  result fail "install $HOST $VERSION" "not in $HOSTS_DIR: $(tail -3 "$WORK/install-peers.log" 2>/dev/null | tr '\n' ' ')"
  finish
fi
mkdir -p "$WORK/bin" "$WORK/runs"
ln -sfn "$BIR_BIN" "$WORK/bin/bir-proxy"
ln -sfn "$BIR_BIN" "$WORK/bin/bir-hooks"

# The host's config files (what `bir install` may edit), relative to OUT.
config_files() {
  case "$HOST" in
    codex) echo codex/config.toml codex/hooks.json ;;
    gemini) echo home/.gemini/settings.json project/.gemini/settings.json ;;
  esac
}
# snapshot OUT DEST: a copy of each config file (a missing one as NAME.absent).
snapshot() {
  local out="$1" dest="$2" f
  rm -rf "$dest"; mkdir -p "$dest"
  for f in $(config_files); do
    mkdir -p "$dest/$(dirname "$f")"
    if [[ -e "$out/$f" ]]; then cp -p "$out/$f" "$dest/$f"; else : >"$dest/$f.absent"; fi
  done
}
# same_as OUT SNAP: "" when every config file is byte-identical to SNAP's (or absent in both).
same_as() {
  local out="$1" snap="$2" f diffs=""
  for f in $(config_files); do
    if [[ -e "$snap/$f.absent" ]]; then
      [[ -e "$out/$f" ]] && diffs+="$f (created) "
    elif ! cmp -s "$out/$f" "$snap/$f"; then
      diffs+="$f "
    fi
  done
  echo "$diffs"
}

# birenv NAME CMD…: CMD with the session NAME's host and bir environment, in its project.
birenv() {
  local name="$1"; shift
  local out="$WORK/runs/$name"
  # The host CLI on PATH, as a user has it (the install asks Codex to trust its hooks).
  (cd "$out/project" && env -u XDG_CONFIG_HOME -u XDG_RUNTIME_DIR -u CLAUDE_CONFIG_DIR HOME="$out/home" \
    PATH="$HOSTS_DIR/node_modules/.bin:$PATH" \
    CODEX_HOME="$out/codex" BIR_HOME="$WORK/birhome/$name" BIR_SERVICE_URL=off \
    BIR_PROXY_PATH="$WORK/bin/bir-proxy" BIR_HOOKS_PATH="$WORK/bin/bir-hooks" "$@")
}

# prepare NAME MODE: the session's dirs, the fake API (API_PORT) and the
# user's config (the everything server behind the logging relay). MODE
# bound: then `bir install --client HOST` (or the hand-written fallback).
INSTALLED=""
prepare() {
  local name="$1" mode="$2"
  local out="$WORK/runs/$name" bh="$WORK/birhome/$name"
  rm -rf "$out" "$bh"; mkdir -p "$out/home" "$out/project" "$bh"; chmod 700 "$bh"
  api_start "$HOST" "$out" "$SCRIPT" || { result fail "$name: fake API" "did not start"; return 1; }
  python3 "$HOSTS/make_config.py" "$HOST" "$out" --port "$API_PORT" --mcp relay --hooks none
  echo "the notes say: hosts-e2e-notes" >"$out/project/notes.txt"
  [[ $mode == bound ]] || return 0
  DAEMON_HOMES+=("$bh")
  snapshot "$out" "$out/before-install"
  INSTALLED=""
  birenv "$name" "$BIR_BIN" install --client "$HOST" --project "$out/project" >"$WORK/install-$name.txt" 2>&1
  local rc=$?
  if [[ $rc -eq 0 ]] && grep -rqs -- "bir-hooks --host $HOST" "$out/codex/hooks.json" "$out/home/.gemini/settings.json" \
       "$out/project/.gemini/settings.json" "$out/project/.codex/hooks.json"; then
    INSTALLED=1
    result ok "$name: bir install --client $HOST" "hooks registered: $(tr '\n' ' ' <"$WORK/install-$name.txt" | cut -c1-300)"
    if ! grep -rqs -- "bir-proxy" "$out/codex/config.toml" "$out/home/.gemini/settings.json" "$out/project/.gemini/settings.json"; then
      result fail "$name: bir install wraps the MCP server" "no bir-proxy entry in the $HOST config"
    fi
  else
    result fail "$name: bir install --client $HOST" "exit $rc, no 'bir-hooks --host $HOST' hook registered: $(tr '\n' ' ' <"$WORK/install-$name.txt" | cut -c1-300); going on with hand-written hooks"
    # The config as the install left it (its MCP wrap, if any), plus the hooks by hand.
    grep -qs -- "bir-proxy" "$out/codex/config.toml" "$out/home/.gemini/settings.json" ||
      python3 "$HOSTS/make_config.py" "$HOST" "$out" --port "$API_PORT" --mcp proxy-relay --bir-proxy "$WORK/bin/bir-proxy"
    snapshot "$out" "$out/before-hand-hooks"
    python3 "$HOSTS/make_config.py" "$HOST" "$out" --port "$API_PORT" --only-hooks --hooks bir \
      --bir-hooks "$WORK/bin/bir-hooks"
  fi
}

# session NAME: run the prepared session (bir's env for the hooks) and stop its API.
session() {
  local name="$1" extra_args=""
  local out="$WORK/runs/$name"
  # Hand-written Codex hooks are not trusted: bypass the check (an install trusts them).
  [[ $HOST == codex && -z $INSTALLED && -e "$out/codex/hooks.json" ]] && extra_args="--dangerously-bypass-hook-trust"
  HOST_EXTRA_ENV="BIR_HOME=$WORK/birhome/$name BIR_SERVICE_URL=off" HOST_EXTRA_ARGS="$extra_args" \
    "$HOSTS/run-host.sh" "$HOST" "$out" >"$out/run.log" 2>&1
  api_stop
}

wait_runs() { # wait_runs NAME N: until N finished bound runs (or WAIT s); saves runs --json
  local name="$1" want="$2"
  local bh="$WORK/birhome/$name" deadline=$((SECONDS + WAIT)) got=0
  while (( SECONDS < deadline )); do
    got="$(BIR_HOME="$bh" "$BIR_BIN" runs --json 2>/dev/null | python3 -c '
import json, sys
print(sum(1 for l in sys.stdin if l.strip()
          and (r := json.loads(l)).get("tier") == "bound" and r.get("state") == "finished"))')"
    (( got >= want )) && break
    sleep 0.3
  done
  BIR_HOME="$bh" "$BIR_BIN" runs --json >"$WORK/runs/$name.runs.jsonl" 2>/dev/null
}

export_runs() { # every run of the session's BIR_HOME as NAME.export.<id>.json + NAME.show.<id>.txt
  local name="$1" bh="$WORK/birhome/$1" id
  for id in $(python3 -c 'import json,sys; [print(json.loads(l)["id"]) for l in open(sys.argv[1]) if l.strip()]' "$WORK/runs/$name.runs.jsonl"); do
    BIR_HOME="$bh" "$BIR_BIN" runs export "$id" >"$WORK/runs/$name.export.$id.json" 2>>"$WORK/runs/$name.export.err"
    BIR_HOME="$bh" "$BIR_BIN" runs show "$id" >"$WORK/runs/$name.show.$id.txt" 2>&1
  done
}

check() { verdicts < <(python3 "$HOSTS/hosts_check.py" "$@" 2>&1); }

# --- 1. the session without bir ----------------------------------------------------------
prepare baseline plain && session baseline
check session --host "$HOST" --version "$VERSION" --name baseline --out "$WORK/runs/baseline" \
  --script "$SCRIPT" --prompt "$PROMPT"

# --- 2. the bound session ------------------------------------------------------------------
prepare bound bound && session bound
wait_runs bound 1
export_runs bound
check bound --host "$HOST" --version "$VERSION" --name bound --out "$WORK/runs/bound" \
  --baseline "$WORK/runs/baseline" --script "$SCRIPT" --prompt "$PROMPT" \
  --runs "$WORK/runs/bound.runs.jsonl" --exports "$WORK/runs"

# --- 3. `bir uninstall`: the config files as before the install ----------------------------
# (With hand-written hooks, they are taken out first: what is left is the install's.)
out="$WORK/runs/bound"
if [[ -z $INSTALLED && -d "$out/before-hand-hooks" ]]; then
  for f in $(config_files); do
    if [[ -e "$out/before-hand-hooks/$f.absent" ]]; then rm -f "$out/$f"
    elif [[ -e "$out/before-hand-hooks/$f" ]]; then cp -p "$out/before-hand-hooks/$f" "$out/$f"; fi
  done
fi
birenv bound "$BIR_BIN" uninstall --client "$HOST" --project "$out/project" >"$WORK/uninstall-bound.txt" 2>&1
rc=$?
left="$(same_as "$out" "$out/before-install")"
if [[ $rc -eq 0 && -z $left ]]; then
  result ok "bound: bir uninstall --client $HOST" "$(config_files | wc -w) config files byte-identical to before the install"
else
  result fail "bound: bir uninstall --client $HOST" "exit $rc; differ: ${left:-none}; $(tr '\n' ' ' <"$WORK/uninstall-bound.txt" | cut -c1-300)"
fi

# --- 4. `bir off`: installed but off — the session as without bir, nothing recorded -------
prepare off bound
BIR_HOME="$WORK/birhome/off" "$BIR_BIN" off >"$WORK/off.txt" 2>&1 ||
  result fail "off: bir off" "$(tr '\n' ' ' <"$WORK/off.txt")"
session off
sleep 1   # a run, were one recorded, would be listed by now
BIR_HOME="$WORK/birhome/off" "$BIR_BIN" runs --json >"$WORK/runs/off.runs.jsonl" 2>/dev/null
check off --host "$HOST" --version "$VERSION" --name off --out "$WORK/runs/off" \
  --baseline "$WORK/runs/baseline" --script "$SCRIPT" --prompt "$PROMPT" --runs "$WORK/runs/off.runs.jsonl"
finish
