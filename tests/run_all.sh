#!/usr/bin/env bash
# run_all.sh UNIT_DIR BINARY — every test packtrain has: cmocka unit tests,
# then the integration suites in tests/integration (each a script that prints
# "N passed, N failed" as its last line), then the browser tests.
set -uo pipefail
unit_dir=$1; bin=$2
export PACKTRAIN_BIN=$(realpath "$bin")
total_p=0; total_f=0
tally() { # reads the last "N passed, N failed" line of a log
  local line; line=$(grep -E '[0-9]+ passed, [0-9]+ failed' "$1" | tail -1)
  local p f
  p=$(grep -oE '[0-9]+ passed' <<<"$line" | grep -oE '[0-9]+'); f=$(grep -oE '[0-9]+ failed' <<<"$line" | grep -oE '[0-9]+')
  total_p=$((total_p + ${p:-0})); total_f=$((total_f + ${f:-0}))
}
log=$(mktemp); trap 'rm -f "$log"' EXIT
status=0

tests/run_unit.sh "$unit_dir" 2>&1 | tee "$log"; [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
tally "$log"

for suite in tests/torch/run.sh tests/integration/*.sh tests/web/run.sh; do
  [ -x "$suite" ] || continue
  echo "== $suite"
  "$suite" 2>&1 | tee "$log"; rc=${PIPESTATUS[0]}
  if [ $rc -ne 0 ]; then
    status=1
    grep -qE '[0-9]+ passed, [0-9]+ failed' "$log" || total_f=$((total_f + 1))
  fi
  tally "$log"
done
echo "all: $total_p passed, $total_f failed"
exit $status
