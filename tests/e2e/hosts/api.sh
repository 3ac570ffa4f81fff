# Sourced: start and stop tests/e2e/hosts/fake_model_api.py for one session.
#
#   api_start codex|gemini OUT SCRIPT   # sets API_PORT, API_PID; logs to OUT/logs/requests.jsonl
#   api_stop                            # stops the API api_start started
HOSTS_HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

api_start() {
  local host="$1" out="$2" script="$3" portfile deadline
  mkdir -p "$out/logs"
  portfile="$out/logs/fake-api.port"
  rm -f "$portfile"
  python3 "$HOSTS_HERE/fake_model_api.py" --api "$host" --script "$script" --log "$out/logs/requests.jsonl" \
    --port 0 --port-file "$portfile" 2>"$out/logs/fake-api.stderr" &
  API_PID=$!
  deadline=$((SECONDS + 30))
  until [[ -s $portfile ]]; do
    if (( SECONDS >= deadline )) || ! kill -0 "$API_PID" 2>/dev/null; then
      echo "api_start: the fake $host API did not start: $(cat "$out/logs/fake-api.stderr")" >&2
      return 1
    fi
    sleep 0.05
  done
  API_PORT="$(cat "$portfile")"
}

api_stop() {
  [[ -n ${API_PID:-} ]] || return 0
  kill "$API_PID" 2>/dev/null
  wait "$API_PID" 2>/dev/null
  API_PID=""
}
