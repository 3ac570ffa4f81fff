#!/usr/bin/env bash
# The main job, end to end on this machine: wrap a real MCP server
# (@modelcontextprotocol/server-everything) with bir-proxy, drive a short
# session through it as an MCP client would, show the run bir recorded and
# write its HTML report.
#
# The run is kept where bir keeps every run ($BIR_HOME, else
# ~/.baseinstrunner), so it can be looked at again afterwards; the demo ends
# by saying how, and how to remove it.
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

STORE="${BIR_HOME:-$HOME/.baseinstrunner}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/bir-demo.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
TRANSCRIPT="$WORK/transcript.jsonl"

# The demo's run is the journal that appears during it (another proxy of
# this user's could start a run meanwhile; then the newest is taken).
journals() { ls "$STORE/runs" 2>/dev/null | grep '\.journal$' | sort || true; }
BEFORE="$WORK/before"
journals >"$BEFORE"

echo "demo: an MCP client talks to server-everything through:"
echo "  bir-proxy --server-name everything --transcript transcript.jsonl -- node server-everything stdio"
echo
python3 scripts/demo_session.py -- "$BIR" proxy --server-name everything --transcript "$TRANSCRIPT" \
    -- node "$EVERYTHING" stdio
echo
NEW="$(journals | comm -13 "$BEFORE" - )"
if [ "$(printf '%s\n' "$NEW" | grep -c .)" = 1 ]; then
    RUN="${NEW%.journal}"
else
    RUN="latest"
fi
echo "demo: the run bir recorded (bir runs show $RUN):"
echo
"$BIR" runs show "$RUN"
echo
REPORT="$("$BIR" report "$RUN")"
PAGE="${REPORT#wrote }"
RUN="$(basename "$PAGE" .html)"
echo "demo: the raw relay transcript (--transcript) had $(wc -l < "$TRANSCRIPT") lines."
echo "demo: the run is kept in $STORE/runs, and its HTML report is"
echo "  $PAGE"
echo
echo "See it again:"
echo "  bir runs                        # every run, newest first"
echo "  bir runs show $RUN"
echo "  bir report $RUN --open"
echo "Remove it (the run and its page):"
echo "  bir runs rm $RUN"
echo "(bir is $BIR here; \`make install\` puts it on your PATH.)"
