#!/usr/bin/env bash
# End-to-end of the bound tier (Tier 1) with the real Claude Code CLI,
# offline (the shared harness in ../shared/e2e): `bir install` wraps the
# project's MCP server and registers the hooks in user settings
# ($CLAUDE_CONFIG_DIR/settings.json); one scripted session (bound/) calls a
# built-in tool, an MCP tool, a subagent that calls an MCP tool, an MCP tool
# that fails, and answers. lib/bound_check.py then reads `bir runs export`
# and compares what the model and the server saw with the same session
# without bir. Variants: `bir off`, the daemon stopped mid-session by a Bash
# step, two sessions at once in one directory, opt-in call-id injection
# (`bir install --correlate inject`); with bir's Claude Code mod
# (`bir install --mod`): the words arrive over the mod link, the daemon absent
# leaves the session alone, the mod switched off falls back to the hooks, and
# `bir uninstall` leaves no trace of the plugin. See README.md here.
#
#   tests/e2e/run-bound.sh
#
# Env knobs as in run.sh: BIR_BIN, BIR_E2E_HARNESS, E2E_CC_DIR, BIR_E2E_WORK,
# BIR_E2E_KEEP, E2E_TIMEOUT; BIR_E2E_BOUND_WAIT (seconds to wait for a run to
# finish after its session, default 30); BIR_E2E_BOUND_ONLY (groups to run, e.g.
# "restarts" for the daemon stopped, killed and never started; "baseline off"
# for `bir off`; the checks against the baseline need "baseline" too). Prints "PASS|FAIL <check>: <detail>"
# lines and ends with "N passed, M failed"; exits 1 if any check failed.
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib/report.sh
source "$HERE/lib/report.sh"
WAIT="${BIR_E2E_BOUND_WAIT:-30}"
# run-claude.sh's fake API key; the fixture approves its last 20 characters.
API_KEY="sk-ant-api03-e2e-fake-key-0000000000000000000000000000000000000000000000000000-AAAAAAAA"

DAEMON_HOMES=()
stop_daemons() { # every BIR_HOME a session used: bir down, then the pid if it is still there
  local h pid
  for h in "${DAEMON_HOMES[@]}"; do
    BIR_HOME="$h" BIR_SERVICE_URL=off "$BIR_BIN" down >/dev/null 2>&1
    pid="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("pid",""))' "$h/control/daemon.json" 2>/dev/null)"
    [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null && kill "$pid" 2>/dev/null
  done
}
# Every daemon a session started is stopped, however the script ends.
trap stop_daemons EXIT
work_dir bir-e2e-bound

# --- prerequisites ----------------------------------------------------------------------
need_harness
need_claude_code
need_bir
CLAUDE="$E2E_CC_DIR/node_modules/.bin/claude"
mkdir -p "$WORK/bin" "$WORK/managed" "$WORK/runs"
ln -sfn "$BIR_BIN" "$WORK/bin/bir-proxy"
ln -sfn "$BIR_BIN" "$WORK/bin/bir-hooks"

# --- helpers ------------------------------------------------------------------------------
fill() { # fill FILE: the harness placeholders a session knows before it starts
  local file="$1" out="$2"
  sed -i -e "s#@@E2E@@#$HARNESS#g" -e "s#@@CC@@#$E2E_CC_DIR#g" -e "s#@@OUT@@#$out#g" \
    -e "s#@@LOGS@@#$out/logs#g" -e "s#@@BIR@@#$BIR_BIN#g" "$file"
}

# prepare NAME SCRIPT MODE [PROJECT]: a scenario dir, a Claude config dir
# (CLAUDE_CONFIG_DIR: its .claude.json and user settings) and a BIR_HOME for
# one session. MODE bound: `bir install` wraps the server and registers the
# hooks; mod: the same with `--mod` (bir's Claude Code plugin too); plain:
# neither (the session without bir). PROJECT defaults to the dir
# run-claude.sh uses (OUT/project). INSTALL_EXTRA: more `bir install`
# arguments.
prepare() {
  local name="$1" script="$2" mode="$3"
  local out="$WORK/runs/$name"
  local project="${4:-$out/project}"
  local scen="$WORK/scen/$name" conf="$WORK/conf/$name" bh="$WORK/birhome/$name"
  rm -rf "$scen" "$conf" "$bh" "$out"
  mkdir -p "$scen" "$conf" "$bh" "$project"
  chmod 700 "$bh"
  cp "$HERE/bound/prompt.txt" "$HERE/bound/mcp.json" "$scen/"
  [[ $script == /* ]] || script="$HERE/bound/$script"   # a script of bound/, or a path
  cp "$script" "$scen/script.json"
  fill "$scen/script.json" "$out"
  sed -e "s#@@PROJECT@@#$project#g" -e "s#@@KEY20@@#${API_KEY: -20}#g" \
    "$HARNESS/fixtures/claude.json" >"$conf/.claude.json"
  cp "$HERE/bound/mcp.json" "$project/.mcp.json"   # placeholders stay until the session
  {
    echo "CLAUDE_CONFIG_DIR=$conf"
    echo "BIR_HOME=$bh"
    echo "BIR_SERVICE_URL=off"
    # The first request waits for the MCP server (else, on a busy machine,
    # it may go out while the server is still connecting, and the model's
    # first view differs from run to run).
    echo "MCP_CONNECTION_NONBLOCKING=0"
    echo "MCP_CONNECT_TIMEOUT_MS=30000"
  } >"$scen/env"
  if [[ $mode == bound || $mode == mod ]]; then
    local with_mod=()
    [[ $mode == mod ]] && with_mod=(--mod)
    if env -u BIR_WRAP_MCP_JSON -u XDG_CONFIG_HOME -u XDG_RUNTIME_DIR HOME="$WORK/home-$name" CLAUDE_CONFIG_DIR="$conf" \
         BIR_HOME="$bh" BIR_SERVICE_URL=off BIR_PROXY_PATH="$WORK/bin/bir-proxy" \
         BIR_HOOKS_PATH="$WORK/bin/bir-hooks" BIR_CLAUDE_MANAGED_DIR="$WORK/managed" \
         "$BIR_BIN" install --project "$project" ${INSTALL_EXTRA:-} "${with_mod[@]}" >"$WORK/install-$name.txt" 2>&1 &&
       grep -q 'wrapped  everything' "$WORK/install-$name.txt" &&
       { grep -q 'registered 31 events' "$WORK/install-$name.txt" ||
         { [[ $mode == mod ]] && grep -q 'registered 31 events' "$WORK/install-$name.txt" &&
           grep -q 'left to the mod: MessageDisplay' "$WORK/install-$name.txt"; }; } &&
       { [[ $mode != mod ]] || grep -q 'installed  bir-mod@bir-local' "$WORK/install-$name.txt"; }; then
      result ok "$name: bir install" "everything wrapped into the local scope; hooks in $conf/settings.json"
    else
      result fail "$name: bir install" "$(tr '\n' ' ' <"$WORK/install-$name.txt")"
    fi
    # status and doctor see the hooks, pointing at this bir (the link).
    local seen
    seen="$(cd "$project" && env -u XDG_CONFIG_HOME HOME="$WORK/home-$name" CLAUDE_CONFIG_DIR="$conf" BIR_HOME="$bh" \
      BIR_SERVICE_URL=off BIR_HOOKS_PATH="$WORK/bin/bir-hooks" BIR_CLAUDE_MANAGED_DIR="$WORK/managed" \
      sh -c '"$0" status; "$0" doctor --timeout-ms 3000' "$BIR_BIN" 2>&1 | grep '^Hooks:')"
    local want="31 of 31 events" ok_line="(this bir)"
    [[ ${INSTALL_EXTRA:-} == *command* ]] || want="31 of 31 events, 29 over HTTP"
    if [[ $seen == *"Hooks: installed in $conf/settings.json (user settings): $want"*"Hooks: ok:"*"$ok_line"*"Hooks: live path: "* ]]; then
      result ok "$name: status and doctor" "$(tr '\n' ' ' <<<"$seen" | cut -c1-220)"
    else
      result fail "$name: status and doctor" "$seen"
    fi
  fi
  if [[ $mode == setup ]]; then
    # `bir setup --yes` in place of `bir install`: the same result. Its exit
    # status is the doctor's, which cannot start this fixture's server yet
    # (placeholders until the session), so its output is what is checked;
    # a second `bir setup` (no terminal, no --yes) changes nothing.
    local env_setup=(env -u BIR_WRAP_MCP_JSON -u XDG_CONFIG_HOME HOME="$WORK/home-$name"
      CLAUDE_CONFIG_DIR="$conf" BIR_HOME="$bh" BIR_SERVICE_URL=off BIR_PROXY_PATH="$WORK/bin/bir-proxy"
      BIR_HOOKS_PATH="$WORK/bin/bir-hooks" BIR_CLAUDE_MANAGED_DIR="$WORK/managed")
    "${env_setup[@]}" "$BIR_BIN" setup --yes --timeout-ms 3000 --project "$project" \
      >"$WORK/setup-$name.txt" 2>&1 </dev/null
    if grep -q 'wrapped  everything' "$WORK/setup-$name.txt" &&
       grep -q 'registered 31 events' "$WORK/setup-$name.txt" &&
       grep -q 'bir runs' "$WORK/setup-$name.txt"; then
      result ok "$name: bir setup --yes" "everything wrapped; hooks in $conf/settings.json; next steps named"
    else
      result fail "$name: bir setup --yes" "$(tr '\n' ' ' <"$WORK/setup-$name.txt" | cut -c1-400)"
    fi
    local before after
    before="$(cat "$conf/.claude.json" "$conf/settings.json" | sha256sum)"
    "${env_setup[@]}" "$BIR_BIN" setup --timeout-ms 3000 --project "$project" \
      >"$WORK/setup2-$name.txt" 2>&1 </dev/null
    after="$(cat "$conf/.claude.json" "$conf/settings.json" | sha256sum)"
    if grep -q 'Everything is in place' "$WORK/setup2-$name.txt" && [[ $before == "$after" ]]; then
      result ok "$name: bir setup again" "everything in place, nothing written"
    else
      result fail "$name: bir setup again" "$(tr '\n' ' ' <"$WORK/setup2-$name.txt" | cut -c1-400)"
    fi
  fi
  fill "$conf/.claude.json" "$out"
  fill "$project/.mcp.json" "$out"
  [[ $project == "$out/project" ]] && rm -rf "$out"   # run-claude.sh makes it again
  DAEMON_HOMES+=("$bh")
}

session() { # session NAME: run the prepared session; its output dir is runs/NAME
  local name="$1"
  "$HARNESS/run-claude.sh" "$WORK/scen/$name" "$WORK/runs/$name" >"$WORK/runs/$name.log" 2>&1
}

# wait_runs NAME N: until BIR_HOME holds N finished bound runs (or WAIT s);
# then saves `bir runs --json` as runs/NAME.runs.jsonl.
wait_runs() {
  local name="$1" want="$2"
  local bh="$WORK/birhome/$name" deadline=$((SECONDS + WAIT)) got=0
  while (( SECONDS < deadline )); do
    # `runs --json` prints each object's keys sorted, so parse it rather than grep an order.
    got="$(BIR_HOME="$bh" "$BIR_BIN" runs --json 2>/dev/null | python3 -c '
import json, sys
print(sum(1 for l in sys.stdin if l.strip()
          and (r := json.loads(l)).get("tier") == "bound" and r.get("state") == "finished"))')"
    (( got >= want )) && break
    sleep 0.3
  done
  BIR_HOME="$bh" "$BIR_BIN" runs --json >"$WORK/runs/$name.runs.jsonl" 2>/dev/null
}

export_runs() { # export_runs NAME: every run of BIR_HOME as runs/NAME.export.<id>.json + show
  local name="$1"
  local bh="$WORK/birhome/$name" id
  for id in $(python3 -c 'import json,sys; [print(json.loads(l)["id"]) for l in open(sys.argv[1]) if l.strip()]' "$WORK/runs/$name.runs.jsonl"); do
    BIR_HOME="$bh" "$BIR_BIN" runs export "$id" >"$WORK/runs/$name.export.$id.json" 2>>"$WORK/runs/$name.export.err"
    BIR_HOME="$bh" "$BIR_BIN" runs show "$id" >"$WORK/runs/$name.show.$id.txt" 2>&1
  done
}

check() { # check ARGS…: lib/bound_check.py's verdicts (counted here, not in a subshell)
  verdicts < <(python3 "$HERE/lib/bound_check.py" "$@" 2>&1)
}

# bound_session NAME MODE: run the prepared bound session NAME, wait for its
# run, export it and check it (bound_check.py MODE) against the baseline.
bound_session() {
  local name="$1" mode="$2"
  session "$name"
  wait_runs "$name" 1
  export_runs "$name"
  check "$mode" --name "$name" --out "$WORK/runs/$name" --baseline "$WORK/runs/baseline" \
    --script "$HERE/bound/script.json" --prompt "$HERE/bound/prompt.txt" \
    --runs "$WORK/runs/$name.runs.jsonl" --exports "$WORK/runs"
}

# want GROUP: whether BIR_E2E_BOUND_ONLY (space-separated groups: baseline bound
# setup off restarts cmdhooks two inject mod) names it; unset runs every group.
want() { [[ -z ${BIR_E2E_BOUND_ONLY:-} || " $BIR_E2E_BOUND_ONLY " == *" $1 "* ]]; }

# Sourced with BIR_E2E_BOUND_LIB=1 (bench-mod.sh): the helpers above, no sessions.
if [[ -n ${BIR_E2E_BOUND_LIB:-} ]]; then return 0; fi

# --- 1. the session without bir: what the model and the server see ------------------------
if want baseline; then
prepare baseline script.json plain
session baseline
check session --name baseline --out "$WORK/runs/baseline" --script "$HERE/bound/script.json" \
  --prompt "$HERE/bound/prompt.txt"

fi
# --- 2. the bound session -----------------------------------------------------------------
if want bound; then
prepare bound script.json bound
bound_session bound bound

fi
# --- 2b. after `bir setup --yes` instead of `bir install`: the same bound run -----------------
if want setup; then
if [[ ${BIR_E2E_SKIP_SETUP:-} != 1 ]]; then
  prepare setup script.json setup
  session setup
  wait_runs setup 1
  export_runs setup
  check bound --name setup --out "$WORK/runs/setup" --baseline "$WORK/runs/baseline" \
    --script "$HERE/bound/script.json" --prompt "$HERE/bound/prompt.txt" \
    --runs "$WORK/runs/setup.runs.jsonl" --exports "$WORK/runs"
fi

fi
# --- 3. bir off: nothing recorded, the session is the same ---------------------------------
if want off; then
prepare off script.json bound
BIR_HOME="$WORK/birhome/off" "$BIR_BIN" off >"$WORK/off.txt" 2>&1 ||
  result fail "off: bir off" "$(tr '\n' ' ' <"$WORK/off.txt")"
session off
sleep 1
BIR_HOME="$WORK/birhome/off" "$BIR_BIN" runs --json >"$WORK/runs/off.runs.jsonl" 2>/dev/null
check off --name off --out "$WORK/runs/off" --baseline "$WORK/runs/baseline" \
  --script "$HERE/bound/script.json" --prompt "$HERE/bound/prompt.txt" --runs "$WORK/runs/off.runs.jsonl"

# --- 3b. BIR_OFF=1 in the session's environment, the daemon running ----------------------
# The HTTP hooks reach the daemon (Claude Code fills their X-Bir-Off header
# from the environment); it answers them with nothing and records nothing.
prepare envoff script.json bound
echo "BIR_OFF=1" >>"$WORK/scen/envoff/env"
(cd "$WORK" && BIR_HOME="$WORK/birhome/envoff" BIR_SERVICE_URL=off "$BIR_BIN" daemon >/dev/null 2>&1 &)
for _ in $(seq 100); do [[ -s $WORK/birhome/envoff/control/daemon.json ]] && break; sleep 0.1; done
session envoff
sleep 1
BIR_HOME="$WORK/birhome/envoff" "$BIR_BIN" runs --json >"$WORK/runs/envoff.runs.jsonl" 2>/dev/null
check off --name envoff --out "$WORK/runs/envoff" --baseline "$WORK/runs/baseline" \
  --script "$HERE/bound/script.json" --prompt "$HERE/bound/prompt.txt" --runs "$WORK/runs/envoff.runs.jsonl"
answered="$(grep -c 'HTTP hook response status 200' "$WORK/runs/envoff/logs/debug.log" 2>/dev/null)"
if (( ${answered:-0} > 0 )) && [[ ! -s $WORK/runs/envoff.runs.jsonl ]]; then
  result ok "envoff: the daemon heard the hooks and kept nothing" "$answered HTTP hook posts answered 200, no run"
else
  result fail "envoff: the daemon heard the hooks and kept nothing" "$answered answered; runs: $(head -c 300 "$WORK/runs/envoff.runs.jsonl")"
fi

fi
# --- 4. the daemon stopped mid-session by a Bash step (`bir down`) --------------------------
if want restarts; then
prepare kill script-kill.json bound
session kill
wait_runs kill 1
export_runs kill
check kill --name kill --out "$WORK/runs/kill" --script "$HERE/bound/script-kill.json" \
  --prompt "$HERE/bound/prompt.txt" --runs "$WORK/runs/kill.runs.jsonl" --exports "$WORK/runs"

# --- 4b. the daemon killed (SIGKILL) mid-session by a Bash step -----------------------------
# Its HTTP hooks then fail (Claude Code goes on); a proxy's retry or the
# SessionEnd command hook brings a daemon back, which reads the transcript
# from its start: one finished run holds the whole session.
prepare died script-died.json bound
session died
wait_runs died 1
export_runs died
check whole --name died --out "$WORK/runs/died" --script "$HERE/bound/script-died.json" \
  --prompt "$HERE/bound/prompt.txt" --runs "$WORK/runs/died.runs.jsonl" --exports "$WORK/runs"

# --- 4c. `bir down` mid-session with HTTP hooks: the same, whole -----------------------------
check whole --name kill --out "$WORK/runs/kill" --script "$HERE/bound/script-kill.json" \
  --prompt "$HERE/bound/prompt.txt" --runs "$WORK/runs/kill.runs.jsonl" --exports "$WORK/runs"

# --- 4d. a daemon that never started while the session ran ----------------------------------
# Shell steps only (no wrapped server whose proxy could start it), and no
# SessionStart hook: every HTTP hook finds nothing; the SessionEnd command
# hook starts the daemon, which recovers the whole session.
prepare never script-shell.json bound
echo "BIR_BIND=off" >>"$WORK/scen/never/env"   # no proxy looks for (or starts) the daemon
python3 - "$WORK/conf/never/settings.json" <<'PY'
import json, sys
p = sys.argv[1]; s = json.load(open(p)); del s["hooks"]["SessionStart"]
json.dump(s, open(p, "w"), indent=2)
PY
session never
wait_runs never 1
export_runs never
check whole --name never --out "$WORK/runs/never" --script "$HERE/bound/script-shell.json" \
  --prompt "$HERE/bound/prompt.txt" --runs "$WORK/runs/never.runs.jsonl" --exports "$WORK/runs"
posts="$(grep -c 'HTTP hook POST' "$WORK/runs/never/logs/debug.log" 2>/dev/null)"
answered="$(grep -c 'HTTP hook response status 200' "$WORK/runs/never/logs/debug.log" 2>/dev/null)"
if (( ${posts:-0} > 0 && ${answered:-0} == 0 )); then
  result ok "never: no daemon while the session ran" "$posts HTTP hook posts, none answered; the session went on"
else
  result fail "never: no daemon while the session ran" "$posts HTTP hook posts, $answered answered"
fi

fi
# --- 4e. command hooks (`bir install --hooks command`): the same whole run ---------------------
if want cmdhooks; then
INSTALL_EXTRA="--hooks command" prepare cmdhooks script.json bound
if ! grep -q '"type": *"http"' "$WORK/conf/cmdhooks/settings.json"; then
  result ok "cmdhooks: no HTTP hook registered" "every event runs bir-hooks"
else
  result fail "cmdhooks: no HTTP hook registered" "$(grep -c '"http"' "$WORK/conf/cmdhooks/settings.json") HTTP hooks"
fi
bound_session cmdhooks bound

fi
# --- 5. two sessions at once in one project directory --------------------------------------
if want two; then
# Both sessions start in SHARED (a wrapper cds there before running claude),
# with one BIR_HOME, so one daemon records both.
SHARED="$WORK/shared-project"
rm -rf "$SHARED"; mkdir -p "$SHARED"
cat >"$WORK/bin/claude-in-shared" <<EOF
#!/bin/sh
cd "$SHARED" && exec "$CLAUDE" "\$@"
EOF
chmod +x "$WORK/bin/claude-in-shared"
prepare twoA script.json bound "$SHARED"
prepare twoB script.json bound "$SHARED"
sed -i "s#^BIR_HOME=.*#BIR_HOME=$WORK/birhome/twoA#" "$WORK/scen/twoB/env"
# One BIR_HOME, one daemon: twoB's HTTP hooks post to twoA's hook address.
python3 - "$WORK/birhome/twoA/control/hooks.json" "$WORK/birhome/twoB/control/hooks.json" \
  "$WORK/conf/twoB/settings.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
p = sys.argv[3]; text = open(p).read()
text = text.replace(f"127.0.0.1:{b['port']}/", f"127.0.0.1:{a['port']}/").replace(b["token"], a["token"])
open(p, "w").write(text)
PY
E2E_CLAUDE_BIN="$WORK/bin/claude-in-shared" session twoA &
a_pid=$!
E2E_CLAUDE_BIN="$WORK/bin/claude-in-shared" session twoB &
b_pid=$!
wait "$a_pid" "$b_pid"
wait_runs twoA 2
export_runs twoA
check two --name two --out "$WORK/runs/twoA" --out2 "$WORK/runs/twoB" \
  --script "$HERE/bound/script.json" --prompt "$HERE/bound/prompt.txt" \
  --runs "$WORK/runs/twoA.runs.jsonl" --exports "$WORK/runs" --exports-prefix twoA

fi
# --- 6. opt-in call-id injection (`bir install --correlate inject`) ---------------------------
if want inject; then
# The PreToolUse hook asks; the daemon answers updatedInput with
# __bir_call_id__ (no permission decision); the server gets the key, the
# run joins on it and stores none; the model sees what it saw without bir.
INSTALL_EXTRA="--correlate inject" prepare inject script.json bound
if grep -q '/hook/PreToolUse?correlate=inject&' "$WORK/conf/inject/settings.json"; then
  result ok "inject: hook command" "PreToolUse posts to /hook/PreToolUse?correlate=inject"
else
  result fail "inject: hook command" "$(grep -o '"[^"]*PreToolUse[^"]*"' "$WORK/conf/inject/settings.json" | tr '\n' ' ')"
fi
bound_session inject inject

fi
# --- 7. with bir's Claude Code mod: the words arrive over the mod link ---------------------
if want mod; then
birenv() { # birenv NAME CMD…: CMD with the session NAME's bir environment, in its project
  local name="$1"; shift
  (cd "$WORK/runs/$name/project" 2>/dev/null || cd "$WORK"
   env -u XDG_CONFIG_HOME -u XDG_RUNTIME_DIR HOME="$WORK/home-$name" CLAUDE_CONFIG_DIR="$WORK/conf/$name" \
     BIR_HOME="$WORK/birhome/$name" BIR_SERVICE_URL=off BIR_HOOKS_PATH="$WORK/bin/bir-hooks" \
     BIR_CLAUDE_MANAGED_DIR="$WORK/managed" "$@")
}
prepare mod script.json mod
session mod
wait_runs mod 1
export_runs mod
check bound --name mod --out "$WORK/runs/mod" --baseline "$WORK/runs/baseline" \
  --script "$HERE/bound/script.json" --prompt "$HERE/bound/prompt.txt" \
  --runs "$WORK/runs/mod.runs.jsonl" --exports "$WORK/runs" --mod-link yes
seen="$(birenv mod "$BIR_BIN" doctor --timeout-ms 3000 2>&1 | grep '^Mod:')"
if [[ $seen == "Mod: active path: mod link + hooks"* ]]; then
  result ok "mod: doctor" "$seen"
else
  result fail "mod: doctor" "$seen"
fi
if grep -q 'hooks module bir-mod@bir-local loaded' "$WORK/runs/mod/logs/debug.log"; then
  result ok "mod: loaded by Claude Code" "from the marketplace bir declared ($(grep -o 'hooks module bir-mod@bir-local loaded[^;]*' "$WORK/runs/mod/logs/debug.log" | head -1))"
else
  result fail "mod: loaded by Claude Code" "no 'hooks module bir-mod@bir-local loaded' in debug.log"
fi

# --- 8. `bir uninstall` leaves no trace of the plugin ---------------------------------------
birenv mod "$BIR_BIN" uninstall --project "$WORK/runs/mod/project" >"$WORK/uninstall-mod.txt" 2>&1
# (Claude Code's rolling backups of .claude.json are its own history, not
# bir's to edit: left out.)
traces="$(grep -rl --exclude-dir=backups 'bir-mod\|bir-local' "$WORK/conf/mod" 2>/dev/null
  ls -d "$WORK/birhome/mod/claude-plugins" 2>/dev/null)"
if [[ -z $traces ]] && grep -q 'Claude Code mod: removed' "$WORK/uninstall-mod.txt"; then
  result ok "mod: bir uninstall" "no file under the Claude config dir names bir-mod or bir-local; the plugin files are gone"
else
  result fail "mod: bir uninstall" "left: ${traces//$'\n'/ }; $(tr '\n' ' ' <"$WORK/uninstall-mod.txt" | cut -c1-300)"
fi
seen="$(birenv mod "$BIR_BIN" doctor --timeout-ms 3000 2>&1 | grep '^Mod:')"
[[ $seen == "Mod: not installed"* ]] && result ok "mod: doctor after uninstall" "$seen" ||
  result fail "mod: doctor after uninstall" "$seen"

# --- 9. the mod with the daemon absent (bir off: no hook starts it) -------------------------
prepare modabsent script.json mod
BIR_HOME="$WORK/birhome/modabsent" "$BIR_BIN" off >"$WORK/modabsent-off.txt" 2>&1 ||
  result fail "modabsent: bir off" "$(tr '\n' ' ' <"$WORK/modabsent-off.txt")"
session modabsent
sleep 1
BIR_HOME="$WORK/birhome/modabsent" "$BIR_BIN" runs --json >"$WORK/runs/modabsent.runs.jsonl" 2>/dev/null
check off --name modabsent --out "$WORK/runs/modabsent" --baseline "$WORK/runs/baseline" \
  --script "$HERE/bound/script.json" --prompt "$HERE/bound/prompt.txt" --runs "$WORK/runs/modabsent.runs.jsonl"
if grep -q 'hooks module bir-mod@bir-local loaded' "$WORK/runs/modabsent/logs/debug.log" &&
   ! grep -q 'POST http://bir/mod/events' "$WORK/runs/modabsent/logs/debug.log"; then
  result ok "modabsent: the mod stayed silent" "loaded, found no daemon socket, posted nothing"
else
  result fail "modabsent: the mod stayed silent" "$(grep -c 'bir/mod/events' "$WORK/runs/modabsent/logs/debug.log") posts; loaded: $(grep -c 'hooks module bir-mod' "$WORK/runs/modabsent/logs/debug.log")"
fi

# --- 10. the mod switched off: the hooks and the transcript record the same steps ------------
# (Claude Code's own switch for one plugin: enabledPlugins false; what --bare,
# disableAllHooks or a host-side rollout flag do to modules looks the same to bir.)
prepare moddisabled script.json mod
python3 - "$WORK/conf/moddisabled/settings.json" <<'PY'
import json, sys
p = sys.argv[1]; s = json.load(open(p)); s["enabledPlugins"]["bir-mod@bir-local"] = False
json.dump(s, open(p, "w"), indent=2)
PY
session moddisabled
wait_runs moddisabled 1
export_runs moddisabled
check bound --name moddisabled --out "$WORK/runs/moddisabled" --baseline "$WORK/runs/baseline" \
  --script "$HERE/bound/script.json" --prompt "$HERE/bound/prompt.txt" \
  --runs "$WORK/runs/moddisabled.runs.jsonl" --exports "$WORK/runs" --mod-link no
fi
finish
