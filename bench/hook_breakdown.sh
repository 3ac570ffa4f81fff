#!/usr/bin/env bash
# Where a command hook's time goes: `perf stat -r N` (wall time, mean ± its
# spread) of each layer of a `bir-hooks` call, as Claude Code runs it
# (`sh -c '<abs>/bir-hooks <Event>'`, the payload on stdin):
#
#   sh -c true                      the shell's fork+exec floor
#   bir-hooks --version             + exec of the static bir binary, no I/O
#   bir-hooks PreToolUse, BIR_OFF=1 + reading stdin and the off switches
#   bir-hooks PreToolUse, daemon up + the discovery file, connect, post, the daemon's answer
#
#   bench/hook_breakdown.sh [BIR] [RUNS]   (default target/release/bir, 200)
set -euo pipefail
BIR="$(realpath "${1:-target/release/bir}")"
RUNS="${2:-200}"
TMP="$(mktemp -d)"
trap 'BIR_HOME="$TMP/home" "$BIR" down >/dev/null 2>&1 || true; rm -rf "$TMP"' EXIT
mkdir -m 700 "$TMP/home"
ln -s "$BIR" "$TMP/bir-hooks"
cat >"$TMP/payload.json" <<'JSON'
{"session_id":"breakdown-0000-4000-8000-000000000001","transcript_path":"/nonexistent/t.jsonl","cwd":"/tmp","hook_event_name":"PreToolUse","permission_mode":"bypassPermissions","tool_name":"Bash","tool_input":{"command":"echo step && ls -la /tmp | head -5","description":"Shell step"},"tool_use_id":"toolu_breakdown_000001"}
JSON
wall() { # wall LABEL ENV… -- CMD: mean wall ms of RUNS runs
  local label="$1"; shift
  local envs=()
  while [[ $1 != -- ]]; do envs+=("$1"); shift; done; shift
  local out
  out="$(env -i PATH="$PATH" HOME="$TMP/home" BIR_HOME="$TMP/home" BIR_SERVICE_URL=off "${envs[@]}" \
    perf stat -r "$RUNS" --null -- "$@" <"$TMP/payload.json" 2>&1 >/dev/null | grep 'time elapsed')"
  # "0.00243 +- 0.00012 seconds time elapsed ( +- 5% )"
  printf '| %s | %s |\n' "$label" "$(awk '{printf "%.2f ± %.2f", $1 * 1000, $3 * 1000}' <<<"$out")"
}
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); $("$BIR" --version); $RUNS runs each"
echo
echo "| layer | wall ms (mean ± spread) |"
echo "| --- | ---: |"
wall "sh -c true" -- sh -c true
wall "sh -c 'bir-hooks --version'" -- sh -c "'$TMP/bir-hooks' --version"
wall "bir-hooks PreToolUse, BIR_OFF=1" BIR_OFF=1 -- sh -c "'$TMP/bir-hooks' PreToolUse"
# Start the daemon once, then every hook finds it.
env -i PATH="$PATH" HOME="$TMP/home" BIR_HOME="$TMP/home" BIR_SERVICE_URL=off \
  sh -c "'$TMP/bir-hooks' SessionStart" <"$TMP/payload.json" >/dev/null
for _ in $(seq 100); do [[ -s $TMP/home/control/daemon.json ]] && break; sleep 0.05; done
wall "bir-hooks PreToolUse, daemon up" -- sh -c "'$TMP/bir-hooks' PreToolUse"
