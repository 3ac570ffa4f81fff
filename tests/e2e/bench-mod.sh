#!/usr/bin/env bash
# What bir's Claude Code mod costs a session: one scripted session of N MCP
# tool calls (default 50, each after a line of the model's text) through the
# real Claude Code CLI, offline, in three set-ups —
#   plain  the session without bir,
#   hooks  `bir install` (wrapped server + hooks; the words from the transcript),
#   mod    `bir install --mod` (the same + the mod link),
# measured as the session feels it (wall time of the whole `claude -p` run,
# median of BIR_BENCH_RUNS runs, default 3) and as CPU spent by bir (the
# daemon's utime+stime from /proc, plus every bir-hooks and bir-proxy process
# through /usr/bin/time, in one extra run per set-up so the wrappers do not
# touch the wall-time runs). Not part of `make e2e` (it takes minutes):
#
#   tests/e2e/bench-mod.sh            # BIR_BENCH_CALLS=50 BIR_BENCH_RUNS=3
#
# Prints one line per set-up and a JSON summary (BIR_E2E_WORK/bench.json).
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CALLS="${BIR_BENCH_CALLS:-50}"
RUNS="${BIR_BENCH_RUNS:-3}"
export E2E_TIMEOUT="${E2E_TIMEOUT:-300}"
# The helpers of run-bound.sh (prepare, session, wait_runs, stop_daemons).
BIR_E2E_BOUND_LIB=1 source "$HERE/run-bound.sh"

python3 - "$WORK/bench-script.json" "$CALLS" <<'PY'
import json, sys
path, n = sys.argv[1], int(sys.argv[2])
turns = [{"content": [
    {"type": "text", "text": f"Step {i}: echoing marker {i}."},
    {"type": "tool_use", "name": "mcp__everything__echo", "input": {"message": f"bench-{i}"}}]}
    for i in range(n)]
turns.append({"content": [{"type": "text", "text": f"BENCH done: {n} echoes."}]})
json.dump({"turns": turns, "side_reply": "ok", "final_text": f"BENCH done: {n} echoes."}, open(path, "w"))
PY

# timed NAME: bir-hooks and bir-proxy links that run the real ones as a child
# and append its exact "user sys" CPU seconds (wait4's rusage) to
# $WORK/cpu-NAME.txt; signals are passed on (Claude Code stops a server
# with SIGINT).
timed() {
  local name="$1" dir="$WORK/timed-$1" p
  mkdir -p "$dir"
  for p in bir-hooks bir-proxy; do
    cat >"$dir/$p" <<PY
#!/usr/bin/env python3
import os, signal, sys
real = "$WORK/bin/$p"
pid = os.fork()
if pid == 0:
    os.execv(real, [real] + sys.argv[1:])
for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(sig, lambda s, f: os.kill(pid, s))
while True:
    try:
        _, status, ru = os.wait4(pid, 0)
        break
    except InterruptedError:
        continue
with open("$WORK/cpu-$name.txt", "a") as f:
    f.write(f"{ru.ru_utime:.6f} {ru.ru_stime:.6f}\n")
sys.exit(os.waitstatus_to_exitcode(status))
PY
    chmod +x "$dir/$p"
  done
  echo "$dir"
}

# daemon_cpu NAME: the daemon's utime+stime in seconds (its /proc/PID/stat).
daemon_cpu() {
  local pid
  pid="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pid"])' "$WORK/birhome/$1/control/daemon.json" 2>/dev/null)"
  [[ -n $pid && -r /proc/$pid/stat ]] || { echo 0; return; }
  python3 - "$pid" <<'PY'
import os, sys
f = open(f"/proc/{sys.argv[1]}/stat").read().rsplit(")", 1)[1].split()
print((int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK"))
PY
}

one() { # one MODE RUN: prepares and runs one session; its wall time, or the CPU line
  local mode="$1" r="$2" name="$1-$2" t ok d c
  case $mode in
    plain) prepare "$name" "$WORK/bench-script.json" plain ;;
    hooks) prepare "$name" "$WORK/bench-script.json" bound >/dev/null ;;
    mod) prepare "$name" "$WORK/bench-script.json" mod >/dev/null ;;
  esac
  if [[ $r == cpu ]]; then
    rm -f "$WORK/cpu-$name.txt"
    t="$(timed "$name")"
    # Point the installed hooks and the wrapped server at the timed links.
    sed -i "s#$WORK/bin/bir-hooks#$t/bir-hooks#g" "$WORK/conf/$name/settings.json"
    sed -i "s#$WORK/bin/bir-proxy#$t/bir-proxy#g" "$WORK/conf/$name/.claude.json"
  fi
  session "$name"
  ok="$(python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(s["exit_code"], s["wall_s"], s["result"]["result"])' "$WORK/runs/$name/logs/summary.json" 2>/dev/null)"
  [[ $ok == "0 "*"BENCH done: $CALLS echoes." ]] || result fail "bench $name" "session: $ok"
  if [[ $r == cpu ]]; then
    wait_runs "$name" 1
    d="$(daemon_cpu "$name")"
    c="$(awk '{u+=$1; s+=$2; n++} END {printf "%.3f %d", u+s, n}' "$WORK/cpu-$name.txt" 2>/dev/null)"
    eval "cpu_$mode='$d ${c:-0 0}'"
  else
    eval "walls_$mode+=('$(cut -d' ' -f2 <<<"$ok")')"
    # What Claude Code itself says it spent on bir: every bir-hooks run and
    # every hop into the mod (its debug log's own durations).
    eval "spent_$mode+=('$(python3 - "$WORK/runs/$name/logs/debug.log" <<'PY'
import re, sys
hooks = mod = 0.0
for line in open(sys.argv[1], errors="replace"):
    m = re.search(r"bir-hooks \w+\] finished with status \d+ \((\d+)ms\)", line)
    if m:
        hooks += int(m.group(1))
    m = re.search(r"hooks module bir-mod@bir-local (?!tool\.call)[\w.]+ settled in ([\d.]+)ms", line)
    if m:
        mod += float(m.group(1))
print(f"{hooks / 1000:.2f}+{mod / 1000:.2f}")
PY
)')"
  fi
}

# Interleaved (plain, hooks, mod, plain, …) so a change in the machine's
# load falls on every set-up alike.
walls_plain=(); walls_hooks=(); walls_mod=(); spent_plain=(); spent_hooks=(); spent_mod=()
for r in $(seq "$RUNS"); do
  for mode in plain hooks mod; do one "$mode" "$r"; done
done
for mode in hooks mod; do one "$mode" cpu; done
results=()
for mode in plain hooks mod; do
  eval 'walls=("${walls_'"$mode"'[@]}")'
  med="$(printf '%s\n' "${walls[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')"
  eval "wall_$mode='$med'"
  eval 'spent=("${spent_'"$mode"'[@]}")'
  echo "$mode: wall median ${med}s over $RUNS runs (${walls[*]}); waited on bir-hooks+mod hops (s): ${spent[*]}"
done
stop_daemons
for mode in hooks mod; do
  eval "read -r d p n <<<\"\$cpu_$mode\""
  echo "$mode: bir CPU: daemon ${d}s + $n bir-hooks/bir-proxy processes ${p}s"
  results+=("\"$mode\": {\"daemonCpuS\": $d, \"processCpuS\": $p, \"processes\": $n}")
done
cat >"$WORK/bench.json" <<EOF
{"calls": $CALLS, "runs": $RUNS, "wallMedianS": {"plain": $wall_plain, "hooks": $wall_hooks, "mod": $wall_mod},
 "cpu": {${results[0]}, ${results[1]}}}
EOF
cat "$WORK/bench.json"
finish
