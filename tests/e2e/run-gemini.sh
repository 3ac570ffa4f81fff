#!/usr/bin/env bash
# End-to-end of the bound tier with the real Gemini CLI, offline: see hosts/e2e.sh.
exec "$(dirname "${BASH_SOURCE[0]}")/hosts/e2e.sh" gemini "$@"
