#!/usr/bin/env bash
# run_all.sh UNIT_DIR BINARY — every test packtrain has, as named suites:
#
#   unit        cmocka unit tests (tests/unit, one binary per module)
#   layout      the rooms' dependency rules: no file cycle across rooms, rooms
#               include only rooms below them (tests/layout/include_graph.py,
#               on the #include lines and the objects' symbols)
#   bench       the arithmetic of the bench scripts' paired measurements
#               (bench/paired.py: bench_speed.sh's fraction_paired, ab_step.sh)
#   torch       the PyTorch cross-check (tests/torch)
#   ase         periodic structures and neighbour graphs against ASE (tests/ase)
#   api_errors, api_flow, api_recovery, api_asedb, api_hardening, openapi, mpi
#               integration suites against real servers (tests/integration)
#   browser     the dashboard in Chromium, driven by Playwright (tests/web)
#
# Each suite prints "N passed, N failed" as its last line.  A suite that cannot
# run (a tool missing, a test skipped) is a failure: `make test` installs what
# the suites need.  SKIP=name,name leaves suites out on purpose; the closing
# line says which, so a green run never hides one.
set -uo pipefail
unit_dir=$1; bin=$2
export PACKTRAIN_BIN=$(realpath "$bin")
suites=(
  "unit:tests/run_unit.sh $unit_dir"
  "layout:python3 tests/layout/include_graph.py --objects ${unit_dir%/tests}"
  "bench:python3 tests/bench/test_paired.py ${unit_dir%/tests}/bench"
  "torch:tests/torch/run.sh"
  "ase:tests/ase/run.sh"
  "api_errors:tests/integration/test_api_errors.sh"
  "api_flow:tests/integration/test_api_flow.sh"
  "api_recovery:tests/integration/test_api_recovery.sh"
  "api_asedb:tests/integration/test_api_asedb.sh"
  "api_hardening:tests/integration/test_api_hardening.sh"
  "openapi:tests/integration/test_openapi.sh"
  "mpi:tests/integration/mpi.sh"
  "browser:tests/web/run.sh"
)
IFS=', ' read -r -a skip <<<"${SKIP:-}"
known=" ${suites[*]%%:*} "
for s in "${skip[@]}"; do
  [[ "$known" == *" $s "* ]] || { echo "run_all: SKIP names an unknown suite '$s' (known:$known)" >&2; exit 2; }
done

total_p=0; total_f=0; status=0; skipped=(); summary=()
log=$(mktemp); trap 'rm -f "$log"' EXIT
for entry in "${suites[@]}"; do
  name=${entry%%:*}; cmd=${entry#*:}
  if [[ " ${skip[*]} " == *" $name "* ]]; then skipped+=("$name"); continue; fi
  echo "== $name: $cmd"
  start=$SECONDS
  # shellcheck disable=SC2086
  $cmd 2>&1 | tee "$log"; rc=${PIPESTATUS[0]}
  line=$(grep -E '[0-9]+ passed, [0-9]+ failed' "$log" | tail -1)
  p=$(grep -oE '[0-9]+ passed' <<<"$line" | grep -oE '[0-9]+'); f=$(grep -oE '[0-9]+ failed' <<<"$line" | grep -oE '[0-9]+')
  p=${p:-0}; f=${f:-0}
  # a suite that fails without saying how many counts once; one that ran
  # nothing at all is a failure too
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  if [ "$p" -eq 0 ] && [ "$f" -eq 0 ]; then echo "!! $name ran no test" >&2; f=1; fi
  [ "$f" -eq 0 ] || status=1
  total_p=$((total_p + p)); total_f=$((total_f + f))
  summary+=("$name $p/$((p + f)) ($((SECONDS - start)) s)")
done
echo
printf '  %s\n' "${summary[@]}"
if [ ${#skipped[@]} -gt 0 ]; then
  echo "all: $total_p passed, $total_f failed, skipped on request (SKIP): ${skipped[*]}"
else
  echo "all: $total_p passed, $total_f failed, 0 skipped"
fi
exit $status
