#!/usr/bin/env bash
# Capture a whole offline session of a real coding agent into
# tests/fixtures/hosts/<host>/ (see that folder's README): every hook logged
# by log_hook.py, the MCP wire by mcp_log_relay.py, the model requests by the
# fake API, and the host's transcripts.
#
#   tests/e2e/hosts/capture.sh codex|gemini
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../../.." && pwd)"
HOST="${1:?usage: capture.sh codex|gemini}"
# shellcheck source=api.sh
source "$HERE/api.sh"
OUT="$(mktemp -d /tmp/hosts-capture.XXXXXX)"
trap 'api_stop; rm -rf "$OUT"' EXIT
api_start "$HOST" "$OUT" "$HERE/$HOST/script.json"
python3 "$HERE/make_config.py" "$HOST" "$OUT" --port "$API_PORT" --hooks log --mcp relay
echo "the notes say: hosts-e2e-notes" >"$OUT/project/notes.txt"
extra=""
[[ $HOST == codex ]] && extra="--dangerously-bypass-hook-trust"
HOST_EXTRA_ARGS="$extra" "$HERE/run-host.sh" "$HOST" "$OUT"
api_stop
DEST="$REPO/tests/fixtures/hosts/$HOST"
rm -f "$DEST"/*.jsonl "$DEST"/stdout.txt
python3 "$HERE/capture.py" "$HOST" "$OUT" "$DEST"
ls -l "$DEST"
