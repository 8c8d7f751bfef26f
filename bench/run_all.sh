#!/usr/bin/env bash
# run_all.sh BINARY BENCH_DIR — every benchmark of packtrain, one after the
# other (make bench).  Each prints its own JSON or markdown; outputs are also
# kept under bench/out/ (gitignored).  Every figure is a ratio against a peer
# measured in the same run, because the machines are shared and noisy.
# QUICK=1 skips ASE's quadratic read of the gzip file (~17 minutes) and runs
# the time-to-accuracy benchmark against the peer's 3-epoch best only (its
# picture then goes to bench/out/, not docs/).
set -uo pipefail
cd "$(dirname "$0")/.."
bin=${1:-bin/packtrain}
bdir=${2:-build/bench}
mkdir -p bench/out
run() {  # name, command...
  local name=$1; shift
  echo "== $name: $*"
  "$@" 2>&1 | tee "bench/out/$name.txt"
}
status=0
run ingest bench/bench_ingest.sh "$bin" ${QUICK:+--quick} || status=1
run ase_db bench/bench_ase_db.sh "$bin" || status=1
run packing bench/packing_table.sh "$bin" || status=1
run packing_cache bench/bench_packing_cache.sh "$bin" || status=1
run neighbors bench/neighbors_vs_ase.sh "$bin" "$bdir" || status=1
run speed bench/bench_speed.sh "$bin" "$bdir" || status=1
run kernels bench/bench_kernels.sh "$bin" "$bdir" || status=1
# time to accuracy: ~17 minutes on 2 quiet cores (QUICK=1: the peer's 3-epoch
# best as the target, no peer lever run, a smoke run)
if [ -n "${QUICK:-}" ]; then
  run tta env EPOCHS=3 PEER_VARIANTS= PLOT=bench/out/tta_quick.png bench/bench_tta.sh "$bin" "$bdir" || status=1
else
  run tta bench/bench_tta.sh "$bin" "$bdir" || status=1
fi
run train bench/bench_train.sh "$bin" || status=1
run layout bench/bench_layout.sh "$bin" || status=1
run scaling bench/bench_scaling.sh "$bin" || status=1
run backend bench/bench_backend.sh "$bin" || status=1
BENCH_DIR="$bdir" run zero bench/bench_zero.sh "$bin" || status=1
run bf16 bench/bench_bf16.sh "$bdir/bench_bf16" || status=1
run precision bench/bench_precision.sh "$bin" || status=1
run multitask bench/bench_multitask.sh "$bin" ${QUICK:+2} || status=1
run atom_head bench/bench_atom_head.sh "$bin" ${QUICK:+2 500} || status=1
[ -x bench/bench_mpi.sh ] && { run mpi bench/bench_mpi.sh "$bin" || status=1; }
run api_load bench/api_load.sh "$bin" || status=1
exit $status
