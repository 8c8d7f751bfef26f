#!/usr/bin/env bash
# run_unit.sh DIR — run the cmocka test binary in DIR of every
# tests/unit/test_*.c, from the repository root, print each binary's cmocka
# summary, then one closing line with the totals.  A test that skips counts as failed (make test installs what tests
# need; a skip would hide that something did not run).  Exit status is
# non-zero if any test failed, skipped, or any binary crashed.
set -uo pipefail
dir=${1:-build/tests}
# One OpenBLAS kernel set for every unit test on every machine.  Several tests
# assert bit-for-bit equalities (a batch split into replicas or micro-batches
# gives the unsplit batch's bits; a checkpoint written by the previous release
# resumes to its bits) that hold for a fixed kernel set whose results do not
# depend on the matrix shape.  OpenBLAS's AVX-512 kernels (SkylakeX,
# Cooperlake: its own choice on a fresh AVX-512 machine) pick code paths by
# shape, so there the same splits agree only to fp32 rounding.  Haswell's are
# what these machines' environment sets and what CI has always run; a caller
# may still choose another set explicitly.
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-Haswell}
passed=0; failed=0
# The binaries of the sources that exist (a binary left in DIR by a removed
# test is not counted); a source without its binary fails.
for src in tests/unit/test_*.c; do
  t="$dir/$(basename "$src" .c)"
  if [ ! -x "$t" ]; then
    echo "!! $t: not built (its source is $src)" >&2; failed=$((failed + 1)); continue
  fi
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
