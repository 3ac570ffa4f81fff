# Shared by the e2e scripts (sourced): PASS/FAIL lines and their tally, the
# work dir, the prerequisites every script needs, and the ending.
#
# The sourcing script sets HERE (its own directory) first; the knobs every
# script shares get their defaults here: REPO, HARNESS (BIR_E2E_HARNESS),
# E2E_CC_DIR and E2E_TIMEOUT (exported), BIR_BIN.

REPO="$(cd "$HERE/../.." && pwd)"
HARNESS="${BIR_E2E_HARNESS:-$REPO/../shared/e2e}"
HARNESS="$(cd "$HARNESS" 2>/dev/null && pwd || echo "$HARNESS")"
export E2E_CC_DIR="${E2E_CC_DIR:-$REPO/.peers/cc}"
export E2E_TIMEOUT="${E2E_TIMEOUT:-60}"
BIR_BIN="${BIR_BIN:-$REPO/target/debug/bir}"

pass=0; fail=0

result() { # result ok|fail NAME DETAIL
  if [[ $1 == ok ]]; then pass=$((pass+1)); echo "PASS $2: $3"; else fail=$((fail+1)); echo "FAIL $2: $3"; fi
}

# verdicts < lines: counts a checker's "PASS …" / "FAIL …" lines (other lines
# are shown indented). Feed it with `< <(…)`, not a pipe, so the tally stays
# in this shell.
verdicts() {
  local line
  while IFS= read -r line; do
    case "$line" in
      "PASS "*) pass=$((pass+1)); echo "$line";;
      "FAIL "*) fail=$((fail+1)); echo "$line";;
      "KNOWN GAP: "*) echo "$line";;
      *) echo "  $line";;
    esac
  done
}

# work_dir PREFIX: $BIR_E2E_WORK, else a new /tmp/PREFIX.XXXXXX (a temp one is
# removed by finish after a clean pass). Sets WORK (absolute).
work_dir() {
  if [[ -n ${BIR_E2E_WORK:-} ]]; then
    WORK="$BIR_E2E_WORK"; mkdir -p "$WORK"
  else
    WORK="$(mktemp -d "/tmp/$1.XXXXXX")"; WORK_IS_TEMP=1
  fi
  WORK="$(cd "$WORK" && pwd)"
}

# finish: prints the work dir and the tally and exits (1 if anything
# failed). A temp work dir goes unless something failed or BIR_E2E_KEEP is
# set; with DROP_IF_NO_RUNS=1 also when no session ran at all (nothing to look at).
finish() {
  local drop=""
  if [[ -n ${WORK_IS_TEMP:-} && -z ${BIR_E2E_KEEP:-} ]] &&
     [[ $fail -eq 0 || ( -n ${DROP_IF_NO_RUNS:-} && ! -d "$WORK/runs" ) ]]; then
    drop=1
  fi
  echo "work dir: $WORK${drop:+ (removed)}"
  echo "$pass passed, $fail failed"
  [[ -n $drop ]] && rm -rf "$WORK"
  [[ $fail -eq 0 ]] && exit 0 || exit 1
}

# need_harness: the shared harness is where HARNESS says.
need_harness() {
  if [[ ! -x "$HARNESS/run-claude.sh" || ! -f "$HARNESS/check.py" ]]; then
    result fail prerequisites "no harness at $HARNESS (set BIR_E2E_HARNESS)"; finish
  fi
}

# need_claude_code: Claude Code and server-everything in $E2E_CC_DIR
# (installed if missing; a failure fails the run, it never skips).
need_claude_code() {
  if ! "$HARNESS/install.sh" >"$WORK/install.log" 2>&1; then
    result fail "install claude code" "$HARNESS/install.sh failed into $E2E_CC_DIR: $(tail -3 "$WORK/install.log" | tr '\n' ' ')"
    finish
  fi
}

# need_bir: BIR_BIN is an executable; made absolute.
need_bir() {
  if [[ ! -x "$BIR_BIN" ]]; then
    result fail "bir binary" "BIR_BIN=$BIR_BIN is not an executable (cargo build first, or set BIR_BIN)"; finish
  fi
  BIR_BIN="$(cd "$(dirname "$BIR_BIN")" && pwd)/$(basename "$BIR_BIN")"
}
