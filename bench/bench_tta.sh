#!/usr/bin/env bash
# bench_tta.sh [PACKTRAIN] [BENCH_DIR] — time to accuracy (issue 18): how long
# packtrain and its PyTorch peer each need, wall clock, same machine, same run
# window, to reach the validation MAE the peer reaches in EPOCHS epochs.
#
#   EPOCHS=25      the peer's epochs; its best validation MAE is the target
#                  (EPOCHS=8 PEER_VARIANTS=: a short run whose target is the
#                  peer's 8-epoch best: a different, easier target)
#   LR=5e-4        the reference recipe, both sides: Adam at a constant rate,
#   BATCH=32       global batch of BATCH molecules (packtrain: 16 LPFHP packs
#                  per step, ≈32 QM9 molecules: packs hold ~2)
#   VARIANTS="..." packtrain runs, each NAME:PRECISION:PACKS_PER_STEP:LR:SCHEDULE:EPOCHS
#                  with SCHEDULE constant or cosine/W (packtrain's cosine with
#                  W warm-up steps over EPOCHS epochs).  Default: the
#                  reference recipe in fp32 and bf16 (EPOCHS+5 epochs at
#                  most), then the lever recipe (below) in fp32 and bf16.
#                  bf16 runs are skipped, with a message, where the CPU has
#                  no AVX512-BF16.
#   PEER_VARIANTS="..."  the peer again with a lever's recipe (same syntax,
#                  PRECISION fp32, PACKS_PER_STEP read as molecules per
#                  step), stopped at the target: what the recipe gives the
#                  peer, so the table separates recipe from system (its
#                  "vs same recipe" column: a peer run NAME is compared with
#                  packtrain's NAME and PRECISION_NAME runs).  Default: the lever recipe at
#                  16 molecules per step (8 packs hold ≈16).  PEER_VARIANTS=
#                  (empty) skips it.
#   PLOT=docs/tta_qm9.png  the curves (validation MAE against wall time,
#                  log scale), drawn by bench/tta_plot.py from this script's
#                  output into PLOT and the same name with .svg
#   KEEP=1         keep the raw files (metrics lines, job files); the path is
#                  printed (bench/tta_table.py redraws the table from them)
#
# Both sides: seed 000's SchNet (H=F=100, T=4, G=25, cutoff 6 Å, 32
# neighbours, sum readout), the QM9 subset ../shared/data/qm9_13k.extxyz.gz,
# target energy_U0, packtrain's split 0.8/0.1/0.1 with seed 0 (the peer reads
# the very index lists: bench/split_ids.c), atomref normalisation (per-element
# least squares + standardised per-atom residual; the peer fits the same on
# the same training part: bench/torch_peer.py), MSE in eV, Adam, validation
# MAE over the whole validation part after every epoch.  packtrain: `packtrain
# train` with one replica per core and one thread each, its defaults
# otherwise (checkpoints every 200 steps and at every epoch end, the best
# model saved).  The peer: bench/torch_tta.py, DistributedDataParallel over
# one single-threaded process per core (gloo, loopback), its fastest layout
# on this machine (bench_speed.sh).
#
# Order and clocks: the peer runs first (its best is the target), then each
# packtrain run, stopped (SIGINT, its graceful stop) once an epoch line
# reports a validation MAE at or below the target.  packtrain's time to the
# target is this script's wall clock from launching the process to reading
# that line: process start, dataset load, neighbour lists, split,
# normalisation fit, packing, every step, every validation and checkpoint
# before it.  The peer's is its own clock from its first step to the end of
# the validation that reached the target (file parsing, radius graphs and the
# fit excluded, as a PyG user's processed dataset would be): the comparison is
# conservative for packtrain.
#
# Needs: bin/packtrain and build/bench/split_ids (`make bench`, or
# make BUILD=DIR DIR/bench/split_ids), python3-torch, python3-matplotlib.
# Output: the conditions (stderr), one JSON line per run, a summary JSON
# line, the ratio table, and the picture.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-bin/packtrain}
bdir=${2:-build/bench}
epochs=${EPOCHS:-25}
lr=${LR:-5e-4}
batch=${BATCH:-32}
pt_epochs=$((epochs + 5))
# the lever: half the packs per step (≈16 molecules), twice the rate with a
# one-epoch warm-up (694 steps) and a cosine to 0 over 14 epochs; measured
# 2026-11-25 against 16 packs, 4 packs and cosines over 12 and 16 epochs
lever="8:1e-3:cosine/694:14"
variants=${VARIANTS-fp32:fp32:16:$lr:constant:$pt_epochs bf16:bf16:16:$lr:constant:$pt_epochs fp32_lever:fp32:$lever bf16_lever:bf16:$lever}
peer_variants=${PEER_VARIANTS-lever:fp32:16:1e-3:cosine/694:14}
plot=${PLOT:-docs/tta_qm9.png}
src=../shared/data/qm9_13k.extxyz.gz
key=energy_U0
cores=$(nproc)
py=/usr/bin/python3
[ -x "$bin" ] || { echo "bench_tta: no packtrain binary at $bin" >&2; exit 2; }
[ -x "$bdir/split_ids" ] || { echo "bench_tta: $bdir/split_ids missing: run 'make bench' (or make BUILD=... <dir>/bench/split_ids)" >&2; exit 2; }
"$py" -c 'import torch' 2>/dev/null || { echo "bench_tta: needs python3-torch (apt-get install -y python3-torch)" >&2; exit 2; }
"$py" -c 'import matplotlib' 2>/dev/null || { echo "bench_tta: needs python3-matplotlib (apt-get install -y python3-matplotlib)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rc=$?; if [ $rc = 0 ] && [ -z "${KEEP:-}" ]; then rm -rf "$tmp"; elif [ $rc = 0 ]; then echo "bench_tta: raw files kept in $tmp" >&2; else echo "bench_tta: failed ($rc); its raw files are kept in $tmp" >&2; fi' EXIT
flags=$(grep -m1 '^flags' /proc/cpuinfo)
has_bf16=0
case " $flags " in *" avx512_bf16 "*) has_bf16=1 ;; esac
load() { cut -d' ' -f1 /proc/loadavg; }
now_s() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.3f", b-a}'; }

cond=$(printf '{"date":"%s","cpu":"%s","cores":%d,"avx512_bf16":%d,"OPENBLAS_CORETYPE":"%s","commit":"%s","load_average_start":%s,"epochs_peer":%d,"lr":%s,"batch":%d}' \
  "$(date -Iseconds)" "$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')" "$cores" \
  "$has_bf16" "${OPENBLAS_CORETYPE:-(unset)}" "$(git rev-parse --short HEAD)" \
  "$(load)" "$epochs" "$lr" "$batch")
echo "bench_tta: $cond" >&2
echo "$cond" >"$tmp/conditions.json"
bench_t0=$(now_s)

"$bin" ingest "$src" --out "$tmp/qm9.ptd" >/dev/null

# job NAME PRECISION PACKS LR SCHEDULE EPOCHS: packtrain's job file
job() {
  local b=$(( ($3 + cores - 1) / cores )) sched='{"kind":"constant"}'
  case $5 in
    constant) ;;
    cosine/*) sched="{\"kind\":\"cosine\",\"warmup_steps\":${5#cosine/}}" ;;
    *) echo "bench_tta: variant $1: schedule '$5' is neither constant nor cosine/W" >&2; exit 2 ;;
  esac
  cat >"$tmp/$1.json" <<EOF
{"target":"$key",
 "model":{"hidden":100,"filters":100,"interactions":4,"gaussians":25,"cutoff":6.0,"max_neighbors":32,"readout":"sum"},
 "batching":{"method":"lpfhp","model_batch_size":$b},
 "training":{"epochs":$6,"optimizer":"adam","lr":$4,"schedule":$sched,
             "split":[0.8,0.1,0.1],"seed":0,"normalize":"atomref","log_every":1000,"precision":"$2"},
 "backend":{"replication_factor":$cores,"threads":$cores}}
EOF
}

# peer_args SCHEDULE: torch_tta.py's schedule options
peer_args() {
  case $1 in
    constant) echo "--schedule constant" ;;
    cosine/*) echo "--schedule cosine --warmup-steps ${1#cosine/}" ;;
    *) echo "bench_tta: peer variant: schedule '$1' is neither constant nor cosine/W" >&2; exit 2 ;;
  esac
}

job split fp32 16 "$lr" constant 1
"$bdir/split_ids" "$tmp/qm9.ptd" "$tmp/split.json" "$key" >"$tmp/split_ids.json"

# 1. the peer, reference recipe, all EPOCHS: its best is the target
l0=$(load); t0=$(now_s)
"$py" bench/torch_tta.py "$src" --target "$key" --split "$tmp/split_ids.json" --epochs "$epochs" \
  --graphs-per-step "$batch" --lr "$lr" --layout ddp --ranks "$cores" \
  >"$tmp/peer.metrics" 2>"$tmp/peer.err" || { cat "$tmp/peer.err" >&2; exit 1; }
t1=$(now_s)
printf '{"wall_s":%s,"load_average_start":%s,"load_average_end":%s}\n' "$(elapsed "$t0" "$t1")" "$l0" "$(load)" >"$tmp/peer.run"
target=$("$py" -c 'import json,sys; print(min(json.loads(l)["val_mae"] for l in open(sys.argv[1]) if "\"epoch\"" in l))' "$tmp/peer.metrics")
echo "bench_tta: target $target eV (the peer's best in $epochs epochs, $(elapsed "$t0" "$t1") s)" >&2

# 2. packtrain, each variant until an epoch line reaches the target
names=()
for v in $variants; do
  IFS=: read -r name prec packs vlr sched vep <<<"$v"
  [ -n "$vep" ] || { echo "bench_tta: variant '$v': want NAME:PRECISION:PACKS:LR:SCHEDULE:EPOCHS" >&2; exit 2; }
  if [ "$prec" = bf16 ] && [ "$has_bf16" = 0 ]; then
    echo "bench_tta: variant $name skipped: this CPU has no AVX512-BF16" >&2
    continue
  fi
  job "$name" "$prec" "$packs" "$vlr" "$sched" "$vep"
  : >"$tmp/$name.metrics"
  l0=$(load); t0=$(now_s)
  "$bin" train "$tmp/qm9.ptd" --config "$tmp/$name.json" --out "$tmp/$name.out" \
    >"$tmp/$name.metrics" 2>"$tmp/$name.err" &
  pid=$!
  hit=""
  # poll the metrics stream: the first epoch line at or below the target
  while kill -0 "$pid" 2>/dev/null; do
    if awk -v t="$target" '/"kind":"epoch"/ && match($0, /"val_mae":[-0-9.eE+]+/) {
           if (substr($0, RSTART + 10, RLENGTH - 10) + 0 <= t + 0) { f = 1; exit } }
         END { exit !f }' "$tmp/$name.metrics"; then
      hit=$(now_s)
      kill -INT "$pid" 2>/dev/null || true
      break
    fi
    sleep 0.05
  done
  rc=0; wait "$pid" || rc=$?
  t1=$(now_s)
  # SIGINT after the crossing ends the run early on purpose; any other
  # failure is the benchmark's
  if [ -z "$hit" ] && [ "$rc" != 0 ]; then cat "$tmp/$name.err" >&2; exit 1; fi
  printf '{"variant":"%s","precision":"%s","packs_per_step":%s,"lr":%s,"schedule":"%s","epochs_budget":%s,"seconds_to_target_wall":%s,"wall_s":%s,"load_average_start":%s,"load_average_end":%s}\n' \
    "$name" "$prec" "$packs" "$vlr" "$sched" "$vep" "$([ -n "$hit" ] && elapsed "$t0" "$hit" || echo null)" \
    "$(elapsed "$t0" "$t1")" "$l0" "$(load)" >"$tmp/$name.run"
  names+=("$name")
done

# 3. the peer with the levers' recipes, stopped at the target
pnames=()
for v in $peer_variants; do
  IFS=: read -r name prec packs vlr sched vep <<<"$v"
  [ -n "$vep" ] || { echo "bench_tta: peer variant '$v': want NAME:fp32:MOLECULES:LR:SCHEDULE:EPOCHS" >&2; exit 2; }
  l0=$(load); t0=$(now_s)
  # shellcheck disable=SC2046
  "$py" bench/torch_tta.py "$src" --target "$key" --split "$tmp/split_ids.json" --epochs "$vep" \
    --graphs-per-step "$packs" --lr "$vlr" $(peer_args "$sched") --stop-at "$target" \
    --layout ddp --ranks "$cores" >"$tmp/peer_$name.metrics" 2>"$tmp/peer_$name.err" \
    || { cat "$tmp/peer_$name.err" >&2; exit 1; }
  t1=$(now_s)
  printf '{"variant":"%s","molecules_per_step":%s,"lr":%s,"schedule":"%s","epochs_budget":%s,"wall_s":%s,"load_average_start":%s,"load_average_end":%s}\n' \
    "$name" "$packs" "$vlr" "$sched" "$vep" "$(elapsed "$t0" "$t1")" "$l0" "$(load)" >"$tmp/peer_$name.run"
  pnames+=("$name")
done
echo "bench_tta: all runs in $(elapsed "$bench_t0" "$(now_s)") s, load $(load) at the end" >&2

"$py" bench/tta_table.py "$tmp" "$plot" "${names[@]}" -- "${pnames[@]}" | tee "$tmp/result"
"$py" bench/tta_plot.py "$tmp/result" "$plot"
