#!/usr/bin/env bash
# Install the real OpenTelemetry receivers used by tests/it/otlp_receivers.rs into
# ${BIR_OTLP_PEERS:-<repo>/.peers/otlp} (gitignored), from the registries only:
#
#   PyPI (pinned):      rotel (its wheel ships the rotel-agent collector binary; strict OTLP/JSON)
#                       arize-phoenix (an LLM-observability backend; OTLP/HTTP protobuf only)
#   crates.io (pinned): otelite (OTLP receiver that stores spans in SQLite and serves them over REST)
#
# Which: BIR_TEST_OTLP_RECEIVERS, as the tests read it: `1` or `all` for the three, else a
# comma-separated list (default: rotel, the fast one; `make test` installs what it tests).
# Phoenix (1-4 min, ~850 MB) and otelite (5-40 min of compiling, by load) are slow.
# Idempotent (stamp per receiver). Prints how long each install took. Quiet unless something fails.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$SCRIPT_DIR/.." && pwd)"
DEST="${BIR_OTLP_PEERS:-$ROOT/.peers/otlp}"
LOG="$DEST/install.log"

ROTEL_VERSION="0.0.1a15"
PHOENIX_VERSION="20.26.1"
OTELITE_VERSION="0.1.156"

PYTHON="${PYTHON:-python3}"
WANTED="${BIR_TEST_OTLP_RECEIVERS:-rotel}"
wanted() { case ",$WANTED," in *",1,"* | *",all,"* | *",$1,"*) return 0 ;; *) return 1 ;; esac; }
mkdir -p "$DEST"
: >"$LOG"

fail() {
    echo "install-otlp-receivers: $*" >&2
    tail -n 40 "$LOG" >&2 || true
    exit 1
}

timed() { # name, command...
    local name=$1 start end
    shift
    start=$(date +%s)
    "$@" >>"$LOG" 2>&1 || fail "$name install failed"
    end=$(date +%s)
    echo "  $name installed in $((end - start)) s"
}

stamp_ok() { [ -f "$DEST/.$1-stamp" ] && [ "$(cat "$DEST/.$1-stamp")" = "$2" ]; }

# rotel: a venv of its own (the wheel's binary is CPython-version specific).
if wanted rotel && { ! stamp_ok rotel "$ROTEL_VERSION" || [ ! -x "$DEST/rotel-agent" ]; }; then
    rm -rf "$DEST/venv-rotel"
    "$PYTHON" -m venv "$DEST/venv-rotel" >>"$LOG" 2>&1 || fail "python3 -m venv failed"
    timed rotel "$DEST/venv-rotel/bin/python" -m pip install --quiet --disable-pip-version-check "rotel==$ROTEL_VERSION"
    agent=$(find "$DEST/venv-rotel" -name rotel-agent -type f | head -n 1)
    [ -n "$agent" ] || fail "the rotel wheel has no rotel-agent binary"
    chmod +x "$agent"
    ln -sfn "$agent" "$DEST/rotel-agent"
    echo "$ROTEL_VERSION" >"$DEST/.rotel-stamp"
fi

# Arize Phoenix.
if wanted phoenix && { ! stamp_ok phoenix "$PHOENIX_VERSION" || [ ! -x "$DEST/venv-phoenix/bin/phoenix" ]; }; then
    rm -rf "$DEST/venv-phoenix"
    "$PYTHON" -m venv "$DEST/venv-phoenix" >>"$LOG" 2>&1 || fail "python3 -m venv failed"
    timed phoenix "$DEST/venv-phoenix/bin/python" -m pip install --quiet --disable-pip-version-check "arize-phoenix==$PHOENIX_VERSION"
    echo "$PHOENIX_VERSION" >"$DEST/.phoenix-stamp"
fi

# otelite: compiled from crates.io with its own lock file.
if wanted otelite && { ! stamp_ok otelite "$OTELITE_VERSION" || [ ! -x "$DEST/otelite/bin/otelite" ]; }; then
    timed otelite cargo install --quiet --locked --root "$DEST/otelite" --version "$OTELITE_VERSION" otelite
    echo "$OTELITE_VERSION" >"$DEST/.otelite-stamp"
fi

echo "otlp receivers in $DEST"
for bin in rotel-agent venv-phoenix/bin/phoenix otelite/bin/otelite; do
    [ -x "$DEST/$bin" ] && echo "  $DEST/$bin"
done
exit 0
