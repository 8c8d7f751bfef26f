#!/usr/bin/env bash
# run.sh DIR RUNS [TARGET...] — runs each libFuzzer binary DIR/fuzz_NAME (built
# by `make fuzz`) on its past findings (tests/fuzz/regressions/NAME, each
# once), then for RUNS executions starting from its checked-in seeds
# (tests/fuzz/corpus/NAME), with its dictionary (tests/fuzz/NAME.dict) when
# there is one.
#
# Prints one line per target: executions, seconds, coverage (cov: edges of
# the control-flow graph reached, ft: libFuzzer's finer "features"), corpus
# size, peak RSS; then a total.  Fails when any target finds a crash, a
# leak, undefined behaviour (UBSan aborts), a timeout (FUZZ_TIMEOUT seconds
# for one input) or an input that needs more than FUZZ_RSS_MB of memory; the
# input is kept as DIR/artifacts/NAME-crash-... with the log next to it.
#
# The corpus grown by a run is left in DIR/corpus/NAME (started afresh each
# run, so a run depends on the checked-in files only).  FUZZ_SEED (default 1:
# every run explores the same way, so a red CI run can be repeated; 0 picks
# one at random) and FUZZ_MAX_LEN (default: libFuzzer's, from the seeds)
# change the exploration.
set -uo pipefail
dir=$1; runs=$2; shift 2
here=$(cd "$(dirname "$0")" && pwd)
seed=${FUZZ_SEED:-1}
timeout=${FUZZ_TIMEOUT:-20}
rss=${FUZZ_RSS_MB:-2048}
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for b in "$dir"/fuzz_*; do [ -x "$b" ] && targets+=("${b##*/fuzz_}"); done
fi
[ ${#targets[@]} -gt 0 ] || { echo "fuzz: no targets in $dir" >&2; exit 1; }

mkdir -p "$dir/artifacts" "$dir/logs"
status=0; total_execs=0; start_all=$(date +%s%N); failed=()
printf '%-12s %10s %8s %7s %7s %7s %8s  %s\n' target execs seconds cov ft corpus rss_mb result
for name in "${targets[@]}"; do
  bin=$dir/fuzz_$name
  [ -x "$bin" ] || { echo "fuzz: no binary $bin" >&2; status=1; failed+=("$name"); continue; }
  work=$dir/corpus/$name
  rm -rf "$work"; mkdir -p "$work"
  dirs=("$work")
  [ -d "$here/corpus/$name" ] && dirs+=("$here/corpus/$name")
  log=$dir/logs/$name.log
  # past findings first, each once (not in the corpus: a large one would
  # raise the input length libFuzzer explores for the whole run)
  found=()
  [ -d "$here/regressions/$name" ] && found=("$here/regressions/$name"/*)
  if [ ${#found[@]} -gt 0 ] && ! "$bin" "${found[@]}" >"$log" 2>&1; then
    printf '%-12s %s\n' "$name" "FAILED on a past finding (tests/fuzz/regressions/$name; log $log)"
    grep -E '^(==[0-9]+==ERROR|SUMMARY|.*runtime error|.*fuzz check failed|Running: )' "$log" | head -8 | sed 's/^/    /'
    status=1; failed+=("$name"); continue
  fi
  args=(-runs="$runs" -seed="$seed" -timeout="$timeout" -rss_limit_mb="$rss" -print_final_stats=1
        -artifact_prefix="$dir/artifacts/$name-")
  [ -f "$here/$name.dict" ] && args+=(-dict="$here/$name.dict")
  [ -n "${FUZZ_MAX_LEN:-}" ] && args+=(-max_len="$FUZZ_MAX_LEN")
  t0=$(date +%s%N)
  "$bin" "${args[@]}" "${dirs[@]}" >"$log" 2>&1; rc=$?
  ms=$((($(date +%s%N) - t0) / 1000000))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rss_mb=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -1)
  last=$(grep -E '^#[0-9]+' "$log" | tail -1)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last"); ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  corp=$(sed -n 's/.* corp: \([0-9]*\).*/\1/p' <<<"$last")
  result=ok
  if [ $rc -ne 0 ] || [ -z "$execs" ] || [ "$execs" -lt "$runs" ]; then
    result="FAILED (exit $rc; log $log)"; status=1; failed+=("$name")
  fi
  total_execs=$((total_execs + ${execs:-0}))
  printf '%-12s %10s %6d.%d %7s %7s %7s %8s  %s\n' "$name" "${execs:-?}" $((ms / 1000)) $((ms % 1000 / 100)) "${cov:-?}" "${ft:-?}" \
    "${corp:-?}" "${rss_mb:-?}" "$result"
  if [ "$result" != ok ]; then
    grep -E '^(==[0-9]+==ERROR|SUMMARY|.*runtime error|.*fuzz check failed|artifact_prefix|Test unit written)' "$log" |
      head -8 | sed 's/^/    /'
  fi
done
secs=$((($(date +%s%N) - start_all) / 1000000000))
printf 'fuzz: %d targets, %d executions in %d s (%s runs each, seed %s)%s\n' "${#targets[@]}" "$total_execs" \
  "$secs" "$runs" "$seed" "$([ $status -eq 0 ] && echo ", all clean" || echo ", FAILED: ${failed[*]}")"
exit $status
