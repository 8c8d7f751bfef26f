#!/usr/bin/env bash
# run_unit.sh DIR — run every cmocka test binary in DIR from the repository
# root, print each binary's cmocka summary, then one closing line with the
# totals.  A test that skips counts as failed (make test installs what tests
# need; a skip would hide that something did not run).  Exit status is
# non-zero if any test failed, skipped, or any binary crashed.
set -uo pipefail
dir=${1:-build/tests}
passed=0; failed=0
for t in "$dir"/test_*; do
  [ -x "$t" ] || continue
  out=$("$t" 2>&1); rc=$?
  printf '%s\n' "$out"
  p=$(printf '%s\n' "$out" | sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' | tail -1)
  f=$(printf '%s\n' "$out" | sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' | tail -1)
  s=$(printf '%s\n' "$out" | sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' | tail -1)
  passed=$((passed + ${p:-0})); failed=$((failed + ${f:-0} + ${s:-0}))
  [ -n "$s" ] && echo "!! $t skipped ${s} test(s): counted as failed" >&2
  if [ $rc -ne 0 ] && [ -z "$f" ]; then
    echo "!! $t exited with status $rc" >&2; failed=$((failed + 1))
  fi
done
echo "unit: $passed passed, $failed failed"
[ $failed -eq 0 ]
