#!/usr/bin/env bash
# The main job, end to end on this machine: wrap a real MCP server
# (@modelcontextprotocol/server-everything) with bir-proxy, drive a short
# session through it as an MCP client would, and show the run bir recorded
# in its local store.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

BIR="$ROOT/target/debug/bir"
[ -x "$BIR" ] || cargo build --locked --quiet
EVERYTHING="$ROOT/.peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
if [ ! -f "$EVERYTHING" ]; then
    echo "demo: installing the real MCP peers once (scripts/install-peers.sh)…"
    scripts/install-peers.sh
fi

WORK="$(mktemp -d "${TMPDIR:-/tmp}/bir-demo.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
export BIR_HOME="$WORK/bir-home"
TRANSCRIPT="$WORK/transcript.jsonl"

echo "demo: an MCP client talks to server-everything through:"
echo "  bir-proxy --server-name everything --transcript transcript.jsonl -- node server-everything stdio"
echo
python3 scripts/demo_session.py -- "$BIR" proxy --server-name everything --transcript "$TRANSCRIPT" \
    -- node "$EVERYTHING" stdio
echo
echo "demo: the run bir recorded (bir runs, then bir runs show latest):"
echo
"$BIR" runs
echo
"$BIR" runs show latest
echo
echo "demo: the raw relay transcript is in --transcript files; this one had $(wc -l < "$TRANSCRIPT") lines."
echo "demo: runs were stored in a temporary BIR_HOME; without it they go to ~/.baseinstrunner/runs."
