#!/usr/bin/env bash
# bench_speed.sh [PACKTRAIN] [BENCH_DIR] [STEPS] — training throughput of
# packtrain against the PyTorch peer at its real best (issue 8, issue 18), in
# one run, interleaved (the machine is shared: only ratios measured in the
# same run mean something).
#
#   ROUNDS=2        rounds; each runs every packtrain case and the peer's
#                   layouts back to back, so both sides see the same load
#   PEER_STEPS=20   timed steps per peer run (best 5-step window kept)
#   FORCES=emt      then energy+forces training (issue 18's third case) by
#                   bench/bench_train_forces.sh with these rounds: packtrain
#                   in its layouts against the peer's 1 thread, all threads
#                   and DDP, each reported, the ratio best against best
#                   (FORCES=emt,water for both of its cases; FORCES= skips)
#   SPLIT_CASES=water_lpfhp  cases also run in a second micro-batch split
#   CASES="qm9_lpfhp qm9_tuple water_lpfhp"  the cases run (a subset for a
#                   short run, e.g. CASES=qm9_lpfhp ROUNDS=1 FORCES=: QM9
#                   tuple has no peer runs of its own, so alone it prints none)
#   ONE_CORE=1      the one-core runs (below) after each case's runs in every
#                   round (0 skips them: ~40 s a round with all three cases)
#   ONE_CORE_CPU=0  the CPU they are pinned to (taskset -c)
#
# For seed 000's SchNet (H=F=100, T=4, G=25, cutoff 6 Å, 32 neighbours, sum
# readout) on the QM9 subset (LPFHP and tuple packing) and on the water
# clusters (LPFHP), trained on energies only (as the peer), with threads = cores:
#   packtrain   `packtrain bench` on the emulated IPU backend, one replica per
#               core, ≈32 QM9 molecules per optimizer step in all (16 LPFHP
#               or 11 tuple packs, rounded up to whole micro-batches: 12 on
#               2 cores, ~35 molecules; 16 LPFHP packs of water), one OpenBLAS
#               thread per replica; in fp32 and, where the CPU has
#               AVX512-BF16, in bf16 (training.precision); and in fp32 with
#               every product on OpenBLAS (PACKTRAIN_SGEMM=openblas: what the
#               own kernels of engine/model/sgemm_kernels.h add).  For QM9/LPFHP
#               also the default layout: one replica, `cores` OpenBLAS threads.
#               Cases in SPLIT_CASES (default water_lpfhp) also run the same
#               global batch in a second split: one micro-batch of 8 packs
#               per replica where the plan's "auto" split it (water: the
#               plan gives 2 packs x4), else micro-batches of 2 packs with
#               gradient accumulation; packtrain's best split counts, as the
#               peer's best layout does; both are printed.
#   pytorch     the peer, bench/torch_schnet_bench.py (bench/torch_peer.py):
#               the same model in plain PyTorch 1.13 (python3-torch), the same
#               number of molecules per step, in each layout a PyTorch user
#               would try — `cores` threads in one process, 1 thread, and
#               DistributedDataParallel over `cores` single-threaded processes
#               (gloo on loopback, the global batch split across ranks).  Each
#               is reported; the best is the yardstick of every ratio.
#   ratio       packtrain's best graphs/s over the peer's best (best against
#               best over all rounds; each side's spread is printed too).
#   flops       training FLOPs per graph counted from the shapes (forward
#               products and message sums, x3 for the backward pass, less
#               the filter network's unused input gradient).  flops_per_graph:
#               PyG's formulation on the real atoms and edges (the filter
#               network on every directed edge).  executed_flops_per_graph:
#               what packtrain computes — node slots (padding included),
#               messages on real edges, the filter network on its rows (one
#               per bond, none for padding edges: engine/model/edge_rows.h).
#   sgemm       OpenBLAS's rate on the model's own products in this run: the
#               filter-row-shaped (U×G·G×F, U×F·F×F for a micro-batch's U
#               rows) and node-shaped ones, FLOP-weighted; per shape the
#               better of `cores` single-thread processes at once (summed) and
#               one process with `cores` threads; before and after, best kept.
#   gemm        the best GEMM rate on the model's products: bench/sgemm_kernels
#               (OpenBLAS, the own AVX-512 and AVX2 kernels, and the policy
#               "auto"), `cores` single-thread processes at once, each
#               implementation's rate weighted by the step's product mix and
#               summed over the processes; the best implementation kept
#               (gemm_best_gflops), before and after.  Measured twice: with
#               the filter products over the whole micro-batch's rows, and
#               over the rows of one call of training's filter pipeline
#               (schnet_profile's filter_chunk: 256 rows that stay in L2,
#               where the kernels run faster); the better counts.
#   fraction    packtrain's executed FLOP/s over the sgemm rate
#               (fraction_of_sgemm) and over the best GEMM rate
#               (fraction_of_best_gemm: issue 18's ≥ 85% target).
#   paired      the same fraction measured like for like (fraction_paired):
#               the yardstick re-run right before and right after each fp32
#               packtrain round of the case (`cores` sgemm_kernels processes
#               at once, the implementation and filter mode whose mean rate
#               was best at setup, PAIRED_SECONDS=0.5 a product: ~6 s), and
#               each round's executed FLOP/s divided by the mean of its two
#               neighbours; both sides as the mean rate over the whole
#               measurement by the wall clock (packtrain's graphs_per_s, the
#               yardstick's "wall" statistic).  Median and range over the
#               rounds.  The old fraction divides a multi-second mean by a
#               sum of each product's best ~70 ms round measured minutes
#               away, on a host whose speed drifts 5-10% within a minute;
#               a best window's bias grows as its window shortens and the
#               two sides' windows differ (0.3-3 s of packtrain, 70 ms a
#               product), a mean's does not: docs/performance.md, "Session
#               16 (pair)", has the biases measured on this host.
#               bench/paired.py holds the arithmetic (tested by
#               tests/bench/test_paired.py).
#   one core    the paired fraction split in the same run: after each
#               case's runs of the round (the existing runs keep their order),
#               `packtrain bench` with 1 replica x 1 thread (fp32) on the
#               micro-batches one replica runs in the 2-replica step (round
#               1's split of the plan's run: QM9 LPFHP 8 x1, tuple 6 x1, water
#               2 x4), pinned to ONE_CORE_CPU with taskset, between two runs of
#               the paired yardstick's sgemm_kernels call as 1 process pinned to
#               the same CPU: fraction_one_core (+ _range, _rounds, _cpu) by
#               the same statistics as fraction_paired (means, wall clock; by
#               CPU time).  two_core_over_one_core: the round's 2-replica run
#               of the same split (graphs/s) over `cores` x the one-core run's
#               (1 = perfect scaling); yardstick_two_over_one: the paired
#               yardstick's summed rate over `cores` x the one-process one's.
#               Then fraction_paired = fraction_one_core x
#               two_core_over_one_core / yardstick_two_over_one (exact per
#               round when the plan's split is the best one, and up to the
#               runs' FLOPs per graph; one_core_check holds the product):
#               what one core's step reaches, and what the step loses by
#               running beside the other replica beyond what the products
#               alone lose.  bench/paired.py's one_core_round.  Also
#               one_core_graphs_per_s, one_core_split, the pinned yardstick's
#               wall GF/s before/after, and one_core_wall_s: what the block
#               (2 pinned yardsticks + the run) took in each round.
#   profile     one replica's step split by kind of work (bench/schnet_profile.c).
# Printed first (stderr) and kept in every JSON line: date, CPU, cores, its
# AVX-512 / AVX512-BF16 flags, OPENBLAS_CORETYPE, the commit, the load
# average at the start and after each round.
#
# Needs the bench programs: `make bench` or
#   make BUILD=DIR DIR/bench/schnet_profile DIR/bench/sgemm_rate DIR/bench/sgemm_kernels
# Output: one JSON object per line (one per case), then a table.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-bin/packtrain}
bdir=${2:-build/bench}
steps=${3:-40}
rounds=${ROUNDS:-2}
peer_steps=${PEER_STEPS:-20}
warmup=5
cores=$(nproc)
py=/usr/bin/python3
run_cases=${CASES:-qm9_lpfhp qm9_tuple water_lpfhp}
for c in $run_cases; do
  case $c in qm9_lpfhp|qm9_tuple|water_lpfhp) ;;
    *) echo "bench_speed: unknown case '$c' in CASES (qm9_lpfhp qm9_tuple water_lpfhp)" >&2; exit 2 ;;
  esac
done
[ -n "${run_cases// /}" ] || { echo "bench_speed: CASES is empty" >&2; exit 2; }
want() { [[ " $run_cases " == *" $1 "* ]]; }
for prog in schnet_profile sgemm_rate sgemm_kernels; do
  if [ ! -x "$bdir/$prog" ]; then
    echo "bench_speed: $bdir/$prog missing: run 'make bench' (or make BUILD=... <dir>/bench/$prog)" >&2
    exit 2
  fi
done
[ -x "$bin" ] || { echo "bench_speed: no packtrain binary at $bin" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
have_torch=1
"$py" -c 'import torch' 2>/dev/null || have_torch=0
[ $have_torch = 1 ] || echo "bench_speed: SKIP PyTorch peer: python3-torch is not installed (apt-get install -y python3-torch)" >&2

replicas=$cores

# job NAME TARGET METHOD REPLICAS PACKS THREADS [PRECISION] [ACCUMULATION]:
# an energy-only
# job, as the peer's --mode energy.  forces_weight is 0 explicitly: its
# default ("auto") trains on forces too when the data has them (water_20k
# does), a step ~2.5x the work, which is what made water "fall" from 378 to
# 210 graphs/s after the force-training merge (bench_train_forces.sh is the
# energy+forces comparison); the summary refuses a run whose job was not
# energy-only.
job() {
  cat >"$tmp/$1.json" <<EOF
{"target":"$2",
 "model":{"hidden":100,"filters":100,"interactions":4,"gaussians":25,"cutoff":6.0,"max_neighbors":32,"readout":"sum"},
 "batching":{"method":"$3","model_batch_size":$5},
 "training":{"epochs":1000,"lr":0.0005,"normalize":"atomref","log_every":1,"precision":"${7:-fp32}",
             "loss":{"forces_weight":0}},
 "backend":{"replication_factor":$4,"threads":$6,"gradient_accumulation":${8:-1}}}
EOF
}

# sgemm TAG U N: the model's products for micro-batches of U filter rows and
# N node slots, appended to $tmp/TAG.sgemm
sgemm() {
  local tag=$1 U=$2 N=$3
  local shapes="$U 25 100 $U 100 100 $N 100 100 $N 50 100 $N 100 50"
  local i pids=()
  for i in $(seq "$cores"); do
    "$bdir/sgemm_rate" 1 $shapes >"$tmp/$tag.single.$i" & pids+=($!)
  done
  wait "${pids[@]}"
  "$py" - "$tmp" "$tag" "$cores" >>"$tmp/$tag.sgemm" <<'PY'
import json, sys
tmp, tag, cores = sys.argv[1], sys.argv[2], int(sys.argv[3])
tot = {}
for i in range(1, cores + 1):
    for line in open(f"{tmp}/{tag}.single.{i}"):
        r = json.loads(line)
        if "m" in r:
            key = (r["m"], r["k"], r["n"])
            tot[key] = tot.get(key, 0.0) + r["gflops"]
for (m, k, n), g in tot.items():
    print(json.dumps({"m": m, "k": k, "n": n, "how": f"{cores}x1", "gflops": round(g, 2)}))
PY
  "$bdir/sgemm_rate" "$cores" $shapes | grep '"m"' | sed "s/}\$/,\"how\":\"1x$cores\"}/" >>"$tmp/$tag.sgemm"
}

# gemm TAG U N [CHUNK]: the best GEMM rate on the model's products —
# OpenBLAS and the own kernels (bench/sgemm_kernels.c), `cores`
# single-thread processes at once, each implementation's step-weighted rate
# summed over them — appended to $tmp/TAG.gemm as {"impl": GF/s, ...}; with
# CHUNK (0 < CHUNK < U) a second line with the filter products run CHUNK
# rows per call, as training's pipeline runs them
gemm() {
  local tag=$1 U=$2 N=$3 chunk=${4:-0}
  gemm_run "$tag" "$U" "$N"
  if [ "$chunk" -gt 0 ] && [ "$chunk" -lt "$U" ]; then
    gemm_run "$tag" "$U" "$N" openblas,avx512,avx2,auto "$chunk"
  fi
}
gemm_run() {
  local tag=$1 U=$2 N=$3 i pids=() mode=whole
  shift 3
  [ $# -ge 2 ] && mode=chunk
  for i in $(seq "$cores"); do
    "$bdir/sgemm_kernels" "$U" "$N" 0.5 "$@" >"$tmp/$tag.gemm.$i" & pids+=($!)
  done
  wait "${pids[@]}"
  # each process's lines, for the paired yardstick's choice (yard_choose)
  for i in $(seq "$cores"); do cp "$tmp/$tag.gemm.$i" "$tmp/$tag.gemmraw.$mode.$i"; done
  cat "$tmp/$tag.gemm".[0-9]* | "$py" -c '
import json, sys
tot = {}
for line in sys.stdin:
    r = json.loads(line)
    if "weighted_gflops" in r:
        tot[r["impl"]] = tot.get(r["impl"], 0.0) + r["weighted_gflops"]
print(json.dumps(tot))' >>"$tmp/$tag.gemm"
}

# yard_choose TAG: the paired yardstick's implementation and filter mode —
# of setup's gemm measurement, the (mode, implementation) with the best mean
# rate summed over the processes — into $tmp/TAG.yardpick as "IMPL CHUNK"
# (CHUNK 0: the filter products over the whole micro-batch)
yard_choose() {
  "$py" - "$tmp" "$1" "$cores" >"$tmp/$1.yardpick" <<'PY'
import json, sys
sys.path.insert(0, "bench")
import paired as pf
tmp, tag, cores = sys.argv[1], sys.argv[2], int(sys.argv[3])
chunk = open(f"{tmp}/{tag}.shapes").read().split()[2]
best = None
for mode in ("whole", "chunk"):
    try:
        procs = [[json.loads(l) for l in open(f"{tmp}/{tag}.gemmraw.{mode}.{i}")]
                 for i in range(1, cores + 1)]
    except FileNotFoundError:
        continue
    y = pf.yardstick_sum(procs)
    impl = pf.best_impl(y, "mean")
    if best is None or y[impl]["mean"] > best[0]:
        best = (y[impl]["mean"], impl, chunk if mode == "chunk" else "0")
print(best[1], best[2])
PY
}

# yard TAG WHEN [N]: the paired yardstick beside a packtrain round, N
# processes at once (default `cores`), each one's lines in $tmp/TAG.yard.WHEN.I,
# each prefixed by the array pin (empty but in one_core_run: one process
# pinned to the one-core run's CPU)
yard() {
  local tag=$1 when=$2 n=${3:-$cores} i pids=() impl chunk U N
  read -r impl chunk <"$tmp/$tag.yardpick"
  read -r U N _ <"$tmp/$tag.shapes"
  local extra=("$impl")
  [ "$chunk" != 0 ] && extra+=("$chunk")
  for i in $(seq "$n"); do
    "${pin[@]}" "$bdir/sgemm_kernels" "$U" "$N" "$paired_seconds" "${extra[@]}" >"$tmp/$tag.yard.$when.$i" &
    pids+=($!)
  done
  wait "${pids[@]}"
}
pin=()
paired_seconds=${PAIRED_SECONDS:-0.5}

one_core=${ONE_CORE:-1}
one_cpu=${ONE_CORE_CPU:-0}

# packtrain_run NAME DATA ROUND [OUT]: one `packtrain bench` run of job NAME
# (prefixed by the array pin, empty but in one_core_run)
packtrain_run() {
  "${pin[@]}" "$bin" bench "$2" --config "$tmp/$1.json" --steps "$steps" --warmup "$warmup" \
    >"$tmp/${4:-$1}.pt.$3" 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
}

# one_core_run TAG DATA ROUND: the one-core run of case TAG between its two
# pinned yardstick runs; its job is made in round 1 from that round's
# 2-replica run of the plan's split (its micro-batches and accumulation), so
# the replica runs the same micro-batches as each of the 2-replica step's
one_core_run() {
  local tag=$1 data=$2 round=$3 target method b a
  if [ ! -f "$tmp/$tag.c1.json" ]; then
    read -r target method <"$tmp/$tag.case"
    read -r b a < <("$py" -c 'import json,sys; r=json.load(open(sys.argv[1]))["backend"]; print(r["micro_packs"], r["gradient_accumulation"])' "$tmp/$tag.pt.$round")
    job "$tag.c1" "$target" "$method" 1 "$b" 1 fp32 "$a"
  fi
  local t0=$EPOCHREALTIME
  pin=(taskset -c "$one_cpu")
  yard "$tag" "c1b$round" 1
  packtrain_run "$tag.c1" "$data" "$round"
  yard "$tag" "c1a$round" 1
  pin=()
  echo "$t0 $EPOCHREALTIME" >>"$tmp/$tag.c1.wall"
}

# peer DS SRC KEY ROUND: the PyTorch peer in each layout, as many graphs per
# step as packtrain's LPFHP run of the same data in round 1
peer() {
  local ds=$1 src=$2 key=$3 round=$4 per lay name opt
  per=$("$py" -c 'import json,sys; r=json.load(open(sys.argv[1])); print(max(1, round(r["graphs"]/r["steps"])))' "$tmp/${ds}_lpfhp.pt.1")
  for lay in "threads:$cores" "threads:1" "ddp:$cores"; do
    if [ "${lay%%:*}" = ddp ]; then opt="--ranks ${lay#*:}" name="ddp"
    else opt="--threads ${lay#*:}" name="t${lay#*:}"; fi
    # shellcheck disable=SC2086
    "$py" bench/torch_schnet_bench.py "$src" --target "$key" --layout "${lay%%:*}" $opt \
      --mode energy --graphs-per-step "$per" --molecules $(( per * 64 )) \
      --steps "$peer_steps" --warmup 3 \
      >"$tmp/$ds.torch.$name.$round" 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
  done
}

# the conditions of this run
"$py" - >"$tmp/conditions.json" <<'PY'
import json, os, subprocess
info = open("/proc/cpuinfo").read().splitlines()
cpu = next((l.split(":", 1)[1].strip() for l in info if l.startswith("model name")), "?")
flags = next((l.split(":", 1)[1].split() for l in info if l.startswith("flags")), [])
run = lambda *c: subprocess.run(list(c), capture_output=True, text=True).stdout.strip()
print(json.dumps({"date": run("date", "-Iseconds"), "cpu": cpu, "cores": os.cpu_count(),
                  "avx512f": "avx512f" in flags, "avx512_bf16": "avx512_bf16" in flags,
                  "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE", "(unset)"),
                  "commit": run("git", "rev-parse", "--short", "HEAD"),
                  "load_average_start": float(open("/proc/loadavg").read().split()[0])}))
PY
echo "bench_speed: $(cat "$tmp/conditions.json")" >&2
bf16=$("$py" -c 'import json,sys; print(int(json.load(open(sys.argv[1]))["avx512_bf16"]))' "$tmp/conditions.json")

"$bin" ingest ../shared/data/qm9_13k.extxyz.gz --out "$tmp/qm9.ptd" >/dev/null
want water_lpfhp && "$bin" ingest ../shared/data/water_20k.extxyz.gz --out "$tmp/water.ptd" >/dev/null

# cases also run in a second micro-batch split (SPLIT_CASES; water's packs
# hold ~4,500 edge slots, QM9's ~800: QM9's micro-batches already fit)
split_cases=${SPLIT_CASES-water_lpfhp}
splits=()

# setup_case TAG DATA TARGET METHOD PACKS_PER_STEP: job files, the profile,
# the product shapes, the first sgemm measurement
cases=()
setup_case() {
  local tag=$1 data=$2 target=$3 method=$4 b=$(( ($5 + cores - 1) / cores ))
  # a step of the plan's 16 packs runs in the plan's micro-batches, as a
  # user's job does (model_batch_size "auto": water's as 2 x4, plan.h)
  local mb=$b
  [ "$5" = 16 ] && mb='"auto"'
  job "$tag" "$target" "$method" "$replicas" "$mb" "$cores"
  echo "$target $method" >"$tmp/$tag.case"
  job "$tag.prof" "$target" "$method" 1 "$b" 1
  job "$tag.bf16" "$target" "$method" "$replicas" "$mb" "$cores" bf16
  # the same global batch in another split: the plan's "auto" halves large
  # packs' micro-batches (water: 2 packs x4, a replica's per-edge activations
  # then stay in its share of the L3: bench/bench_scaling.sh), so the other
  # split is one micro-batch of b; a pinned case tries 2 packs x b/2.
  # packtrain's best split counts, as the peer's best layout does, and both
  # are reported
  if [[ " $split_cases " == *" $tag "* ]] && [ "$b" -gt 2 ]; then
    local sb=2 sa=$(( b / 2 ))
    [ "$mb" = "$b" ] || { sb=$b; sa=1; }
    job "$tag.mb2" "$target" "$method" "$replicas" "$sb" "$cores" fp32 "$sa"
    job "$tag.mb2.bf16" "$target" "$method" "$replicas" "$sb" "$cores" bf16 "$sa"
    splits+=("$tag")
  fi
  "$bdir/schnet_profile" "$data" "$tmp/$tag.prof.json" 20 3 >"$tmp/$tag.profile" 2>"$tmp/err" ||
    { cat "$tmp/err" >&2; exit 1; }
  "$py" -c 'import json,sys; r=json.load(open(sys.argv[1])); b=r["micro_packs"]; print(max(1, round(r["filter_rows_per_edge_slot"]*b*r["max_edges"])), b*r["max_nodes"], r["filter_chunk"])' \
    "$tmp/$tag.profile" >"$tmp/$tag.shapes"
  # shellcheck disable=SC2046
  sgemm "$tag" $(cat "$tmp/$tag.shapes")
  # shellcheck disable=SC2046
  gemm "$tag" $(cat "$tmp/$tag.shapes")
  yard_choose "$tag"
  cases+=("$tag:$data")
}
# packs per step: ≈32 QM9 molecules (LPFHP packs hold ~2, tuple packs ~3;
# tuple's 11 become ceil(11 / cores) a replica: 6 + 6 on 2 cores, ~35)
want qm9_lpfhp && setup_case qm9_lpfhp "$tmp/qm9.ptd" energy_U0 lpfhp 16
want qm9_tuple && setup_case qm9_tuple "$tmp/qm9.ptd" energy_U0 tuple 11
want water_lpfhp && setup_case water_lpfhp "$tmp/water.ptd" energy lpfhp 16
job qm9_lpfhp.r1 energy_U0 lpfhp 1 16 "$cores"

# the rounds: each packtrain case followed by its peer, so both share the load
for round in $(seq "$rounds"); do
  for c in "${cases[@]}"; do
    tag=${c%%:*} data=${c#*:}
    # the fp32 runs (both splits) between two yardstick runs: the paired fraction
    yard "$tag" "b$round"
    packtrain_run "$tag" "$data" "$round"
    if [[ " ${splits[*]} " == *" $tag "* ]]; then packtrain_run "$tag.mb2" "$data" "$round"; fi
    yard "$tag" "a$round"
    # the same with every fp32 product on OpenBLAS: the own kernels' share
    PACKTRAIN_SGEMM=openblas packtrain_run "$tag" "$data" "$round" "$tag.openblas"
    if [ "$bf16" = 1 ]; then packtrain_run "$tag.bf16" "$data" "$round"; fi
    if [[ " ${splits[*]} " == *" $tag "* ]] && [ "$bf16" = 1 ]; then
      packtrain_run "$tag.mb2.bf16" "$data" "$round"
    fi
    if [ "$tag" = qm9_lpfhp ]; then packtrain_run qm9_lpfhp.r1 "$data" "$round"; fi
    if [ $have_torch = 1 ] && [ "$tag" = qm9_lpfhp ]; then
      peer qm9 ../shared/data/qm9_13k.extxyz.gz energy_U0 "$round"
    fi
    if [ $have_torch = 1 ] && [ "$tag" = water_lpfhp ]; then
      peer water ../shared/data/water_20k.extxyz.gz energy "$round"
    fi
    if [ "$one_core" = 1 ]; then one_core_run "$tag" "$data" "$round"; fi
  done
  cut -d' ' -f1 /proc/loadavg >>"$tmp/loadavg"
done
# shellcheck disable=SC2046
for c in "${cases[@]}"; do
  tag=${c%%:*}
  sgemm "$tag" $(cat "$tmp/$tag.shapes")
  gemm "$tag" $(cat "$tmp/$tag.shapes")
done

"$py" - "$tmp" "$cores" "$bdir/schnet_profile" "$rounds" "$bf16" "$run_cases" <<'PY'
import json, os, statistics, subprocess, sys
sys.path.insert(0, "bench")
import paired as pf
tmp, cores, rounds, bf16 = sys.argv[1], int(sys.argv[2]), int(sys.argv[4]), sys.argv[5] == "1"
run_cases = sys.argv[6].split()
H, F, T, G = 100, 100, 4, 25

def train_flops(n, e, u=None):
    """Training FLOPs for n atoms, e message edges and u filter-network rows
    (u = e: PyG's formulation, the filter network on every directed edge):
    forward products and message sums x3 for the backward pass, less the
    first filter layer's input gradient (its input e_ij is data)."""
    u = e if u is None else u
    block = 2*u*G*F + 2*u*F*F + 2*n*H*F + 2*n*F*H + 2*n*H*H + 2*e*F
    fwd = T*block + 2*n*H*(H//2) + 2*n*(H//2)
    return 3*fwd - T*2*u*G*F

def load(path):
    return json.load(open(path)) if os.path.exists(path) else None

def runs_of(name):
    return [r for r in (load(f"{tmp}/{name}.{k}") for k in range(1, rounds + 1)) if r]

def counts(r):
    """real and computed atoms/edges per graph, from a `packtrain bench` result"""
    g = r["graphs"]
    nodes = r["nodes_per_s"] / r["graphs_per_s"] * g
    node_slots = nodes / (1 - r["padding_fraction"])
    edge_slots = node_slots / r["limits"]["max_nodes"] * r["limits"]["max_edges"]
    edges = edge_slots * (1 - r["edge_padding_fraction"])
    return nodes / g, edges / g, node_slots / g, edge_slots / g

def sgemm_limit(tag, U, N):
    rate = {}
    for line in open(f"{tmp}/{tag}.sgemm"):
        r = json.loads(line)
        key = (r["m"], r["k"], r["n"])
        rate[key] = max(rate.get(key, 0.0), r["gflops"])
    edge = lambda k: rate[(U, k, F)]
    parts = [(T*U*G*F, edge(G)), (T*U*F*F, edge(F)), (T*N*H*F, rate[(N, H, F)]),
             (T*N*F*H, rate[(N, F, H)]), (T*N*H*H, rate[(N, H, H)]),
             (N*H*(H//2), rate[(N, H, H//2)])]
    return (sum(w for w, _ in parts) / sum(w / g for w, g in parts), edge(G), edge(F),
            max(rate.values()))

def yard_of(tag, when):
    return pf.yardstick_sum([[json.loads(l) for l in open(f"{tmp}/{tag}.yard.{when}.{i}")]
                             for i in range(1, cores + 1)])

def paired(tag):
    """fraction_paired (bench/paired.py): each round's best fp32
    split against the mean of the yardstick run right before and right
    after it, both as mean rates by the wall clock; and the statistics'
    biases on each side, measured in this run"""
    impl, chunk = open(f"{tmp}/{tag}.yardpick").read().split()
    fr, fr_cpu, ref, env, pbest = [], [], [], [], []
    for k in range(1, rounds + 1):
        rs = [r for r in (load(f"{tmp}/{n}.{k}") for n in (f"{tag}.pt", f"{tag}.mb2.pt")) if r]
        r = max(rs, key=lambda x: x["graphs_per_s"])
        _, e_, ns_, _ = counts(r)
        flops = train_flops(ns_, e_, r["filter_rows_per_graph"])
        b, a = yard_of(tag, f"b{k}"), yard_of(tag, f"a{k}")
        fr.append(pf.fraction(r["graphs_per_s"], flops, pf.bracket(b, a, impl, "wall")))
        # both sides by CPU time: packtrain's process CPU spread over the
        # cores, the yardstick's thread CPU time; on a quiet machine the
        # same as by the wall clock, on a shared one preempted slices drop
        # out of both sides (a spinning wait still counts: it is not a product)
        fr_cpu.append(pf.fraction(pf.cpu_graphs_per_s(r, cores), flops,
                                  pf.bracket(b, a, impl, "mean")))
        ref.append([round(b[impl]["wall"], 1), round(a[impl]["wall"], 1)])
        # the old statistic (each product's best round) over the mean, same runs
        env.append(pf.bracket(b, a, impl, "best") / pf.bracket(b, a, impl, "mean"))
        ps = r.get("per_step")
        if ps:
            pbest.append(max(pf.window_rates(ps["graphs"], ps["ms"], 5)) /
                         pf.mean_rate(ps["graphs"], ps["ms"]))
    sp = pf.spread(fr)
    return {"fraction_paired": sp["median"], "fraction_paired_range": sp["range"],
            "fraction_paired_rounds": [round(x, 3) for x in fr],
            "fraction_paired_cpu": pf.spread(fr_cpu)["median"],
            "fraction_paired_cpu_range": pf.spread(fr_cpu)["range"],
            "paired_yardstick": {"impl": impl, "filter_rows_per_call": int(chunk) or None,
                                 "wall_gflops_before_after": ref},
            "yardstick_best_over_mean": round(statistics.median(env), 3),
            "packtrain_best5_over_mean": round(statistics.median(pbest), 3) if pbest else None}

def one_core(tag):
    """fraction_one_core and the 2-over-1 scalings (bench/paired.py's
    one_core_round), per round: the one-core run against its pinned
    one-process bracket, the round's 2-replica run of the same split (the
    plan's) against the paired bracket; None when ONE_CORE=0"""
    impl = open(f"{tmp}/{tag}.yardpick").read().split()[0]
    per = []
    for k in range(1, rounds + 1):
        one, many = load(f"{tmp}/{tag}.c1.pt.{k}"), load(f"{tmp}/{tag}.pt.{k}")
        if not one or not many:
            continue
        fl = [train_flops(ns_, e_, r["filter_rows_per_graph"])
              for r in (one, many) for _, e_, ns_, _ in [counts(r)]]
        y1 = [pf.yardstick_sum([[json.loads(l) for l in open(f"{tmp}/{tag}.yard.c1{w}{k}.1")]])
              for w in "ba"]
        yn = [yard_of(tag, f"{w}{k}") for w in "ba"]
        per.append((pf.one_core_round(one, many, fl[0], fl[1], y1, yn, impl, cores),
                    one["graphs_per_s"], [round(y[impl]["wall"], 1) for y in y1]))
    if not per:
        return {"fraction_one_core": None}
    col = lambda key: [p[0][key] for p in per]
    fr, sc, ys = col("fraction_one_core"), col("two_core_over_one_core"), col("yardstick_two_over_one")
    return {"fraction_one_core": pf.spread(fr)["median"],
            "fraction_one_core_range": pf.spread(fr)["range"],
            "fraction_one_core_rounds": [round(x, 3) for x in fr],
            "fraction_one_core_cpu": pf.spread(col("fraction_one_core_cpu"))["median"],
            "fraction_one_core_cpu_range": pf.spread(col("fraction_one_core_cpu"))["range"],
            "one_core_graphs_per_s": [round(p[1], 1) for p in per],
            "one_core_split": f"{one_split[tag]}",
            # what the one-core block (2 yardsticks + the run) added to each round
            "one_core_wall_s": [round(float(b) - float(a), 1) for a, b in
                                (l.split() for l in open(f"{tmp}/{tag}.c1.wall"))],
            "one_core_yardstick_wall_gflops_before_after": [p[2] for p in per],
            "two_core_over_one_core": pf.spread(sc)["median"],
            "two_core_over_one_core_rounds": [round(x, 3) for x in sc],
            "yardstick_two_over_one": pf.spread(ys)["median"],
            "yardstick_two_over_one_rounds": [round(x, 3) for x in ys],
            # the product the paired fraction splits into, per round: equal
            # to the plan's split's paired fraction up to the runs' FLOPs per graph
            "one_core_check": [round(f * s_ / y, 3) for f, s_, y in zip(fr, sc, ys)]}

cond = json.load(open(f"{tmp}/conditions.json"))
core = subprocess.run([sys.argv[3], "--corename"], capture_output=True, text=True).stdout.strip()
loads = [float(x) for x in open(f"{tmp}/loadavg").read().split()]
LAYOUTS = [(f"t{cores}", f"{cores} threads"), ("t1", "1 thread"), ("ddp", f"DDP {cores}x1")]
rows = []
one_split = {}
for tag in run_cases:
    j = load(f"{tmp}/{tag}.c1.json")
    if j:
        one_split[tag] = (f"{j['batching']['model_batch_size']} packs "
                          f"x{j['backend']['gradient_accumulation']}")
for tag, ds in [(t, d) for t, d in [("qm9_lpfhp", "qm9"), ("qm9_tuple", "qm9"),
                                     ("water_lpfhp", "water")] if t in run_cases]:
    # packtrain's splits of the same global batch: the plan's micro-batches
    # and, for SPLIT_CASES, micro-batches of 2 packs; the best run counts
    split = lambda r: (f"{r['backend']['micro_packs']} packs x"
                       f"{r['backend']['gradient_accumulation']}")
    runs = runs_of(f"{tag}.pt") + runs_of(f"{tag}.mb2.pt")
    bruns = runs_of(f"{tag}.bf16.pt") + runs_of(f"{tag}.mb2.bf16.pt")
    for r in runs + runs_of(f"{tag}.openblas.pt") + bruns:
        loss = r["config"]["training"]["loss"]
        if loss["forces_weight"] != 0 or loss["stress_weight"] != 0:
            sys.exit(f"bench_speed: {tag}: the job trained on forces or stress ({loss}); "
                     "the peer runs energy only")
    best = max(runs, key=lambda r: r["graphs_per_s"])
    best_runs = [r for r in runs if split(r) == split(best)]   # its spread: the best split's rounds
    prof = load(f"{tmp}/{tag}.profile")
    n, e, ns, es = counts(best)
    b = prof["micro_packs"]
    U = max(1, round(prof["filter_rows_per_edge_slot"]*b*prof["max_edges"]))
    limit, rate_e25, rate_e100, rate_max = sgemm_limit(tag, U, b*prof["max_nodes"])
    u = best["filter_rows_per_graph"]
    gps = best["graphs_per_s"]
    # the peer in each layout (QM9 tuple shares QM9 LPFHP's peer runs):
    # per layout its best 5-step window over the rounds, and every round's
    peer, peer_runs = {}, {}
    for key, label in LAYOUTS:
        rs = runs_of(f"{ds}.torch.{key}")
        if rs:
            peer[label] = max(r["best_graphs_per_s"] for r in rs)
            peer_runs[label] = [r["best_graphs_per_s"] for r in rs]
    best_layout = max(peer, key=peer.get) if peer else None
    # the peer's best layout in each round, for the spread of the ratio
    round_best = [max(v[i] for v in peer_runs.values() if len(v) > i)
                  for i in range(max((len(v) for v in peer_runs.values()), default=0))]
    tgps = peer[best_layout] if peer else None
    out = {
        "bench": "speed", "case": tag, "threads": cores, "openblas_core": core,
        "replicas": best["backend"]["replication_factor"], "packs_per_step": best["backend"]["global_packs"],
        "graphs_per_step": round(best["graphs"] / best["steps"], 2),
        "packtrain_graphs_per_s": round(gps, 1),
        "packtrain_runs": [round(r["graphs_per_s"], 1) for r in best_runs],
        "packtrain_by_split": {k: max(round(r["graphs_per_s"], 1) for r in runs if split(r) == k)
                               for k in sorted({split(r) for r in runs})},
        "packtrain_best_split": split(best),
        "pytorch_by_layout": peer, "pytorch_runs_by_layout": peer_runs,
        "pytorch_best_layout": best_layout, "pytorch_graphs_per_s": tgps,
        "ratio_vs_pytorch": round(gps / tgps, 2) if tgps else None,
        "ratio_range": [round(min(r["graphs_per_s"] for r in best_runs) / max(round_best), 2),
                        round(gps / min(round_best), 2)] if peer else None,
        "atoms_per_graph": round(n, 2), "edges_per_graph": round(e, 1),
        "edge_padding_fraction": round(best["edge_padding_fraction"], 4),
        "filter_rows_per_graph": round(u, 1),
        "flops_per_graph": round(train_flops(n, e)), "executed_flops_per_graph": round(train_flops(ns, e, u)),
        "sgemm_gflops": round(limit, 1), "sgemm_gflops_edge_k25": round(rate_e25, 1),
        "sgemm_gflops_edge_k100": round(rate_e100, 1), "sgemm_gflops_best_shape": round(rate_max, 1),
        "executed_gflops": round(gps * train_flops(ns, e, u) * 1e-9, 1),
        "fraction_of_sgemm": round(gps * train_flops(ns, e, u) / (limit * 1e9), 3),
        "fraction_of_best_shape": round(gps * train_flops(ns, e, u) / (rate_max * 1e9), 3),
        "pyg_equivalent_fraction": round(gps * train_flops(n, e) / (limit * 1e9), 3),
        "profile_ms_per_step_1_thread": prof["ms"], "profile_graphs_per_s_1_thread": prof["graphs_per_s"],
        "conditions": cond, "load_average_after_rounds": loads,
    }
    # the best GEMM rate on the model's products (OpenBLAS or own kernels)
    gem = [json.loads(l) for l in open(f"{tmp}/{tag}.gemm")]
    best_gemm = {k: max(g.get(k, 0.0) for g in gem) for k in gem[0]}
    gemm_best = max(best_gemm.values())
    out["gemm_gflops_by_impl"] = {k: round(v, 1) for k, v in best_gemm.items()}
    out["gemm_best_gflops"] = round(gemm_best, 1)
    out["fraction_of_best_gemm"] = round(gps * train_flops(ns, e, u) / (gemm_best * 1e9), 3)
    out.update(paired(tag))
    out.update(one_core(tag))
    oruns = runs_of(f"{tag}.openblas.pt")
    out["openblas_products_graphs_per_s"] = round(max(r["graphs_per_s"] for r in oruns), 1)
    out["openblas_products_runs"] = [round(r["graphs_per_s"], 1) for r in oruns]
    if bruns:
        bg = max(r["graphs_per_s"] for r in bruns)
        out["bf16_graphs_per_s"] = round(bg, 1)
        out["bf16_runs"] = [round(r["graphs_per_s"], 1) for r in bruns]
        out["bf16_by_split"] = {k: max(round(r["graphs_per_s"], 1) for r in bruns if split(r) == k)
                                for k in sorted({split(r) for r in bruns})}
        out["bf16_ratio_vs_pytorch"] = round(bg / tgps, 2) if tgps else None
    if tag == "qm9_lpfhp":
        out["one_replica_graphs_per_s"] = round(max(r["graphs_per_s"] for r in runs_of(f"{tag}.r1.pt")), 1)
    print(json.dumps(out))
    rows.append(out)

print()
print(f"conditions: {cond['date']}, {cond['cpu']}, {cores} cores, OPENBLAS_CORETYPE="
      f"{cond['OPENBLAS_CORETYPE']} (OpenBLAS {core}), commit {cond['commit']}, "
      f"load {cond['load_average_start']} at start, {loads} after each of {rounds} round(s)")
print(f"{'case':<12} {'packtrain':>9} {'bf16':>6} {'1 thr':>6} {f'{cores} thr':>6} {'DDP':>6} "
      f"{'ratio':>6} {'bf16 r':>6} {'MFLOP/g':>8} {'exec':>6} {'exec GF/s':>9} {'GEMM GF/s':>9} {'of GEMM':>7} "
      f"{'paired (range)':>15} {'by CPU':>6}")
for r in rows:
    p = r["pytorch_by_layout"]
    cell = lambda label: f"{p[label]:.0f}" if label in p else "skip"
    ra = f"{r['ratio_vs_pytorch']:.1f}x" if r["ratio_vs_pytorch"] else "-"
    bf = f"{r['bf16_graphs_per_s']:.0f}" if "bf16_graphs_per_s" in r else "-"
    br = f"{r['bf16_ratio_vs_pytorch']:.1f}x" if r.get("bf16_ratio_vs_pytorch") else "-"
    print(f"{r['case']:<12} {r['packtrain_graphs_per_s']:>9.0f} {bf:>6} {cell('1 thread'):>6} "
          f"{cell(f'{cores} threads'):>6} {cell(f'DDP {cores}x1'):>6} {ra:>6} {br:>6} "
          f"{r['flops_per_graph']/1e6:>8.1f} {r['executed_flops_per_graph']/1e6:>6.1f} "
          f"{r['executed_gflops']:>9.1f} {r['gemm_best_gflops']:>9.1f} {r['fraction_of_best_gemm']:>7.0%} "
          f"{r['fraction_paired']:>5.0%} ({r['fraction_paired_range'][0]:.0%}-{r['fraction_paired_range'][1]:.0%}) "
          f"{r['fraction_paired_cpu']:>6.0%}")
if any(r["fraction_one_core"] is not None for r in rows):
    print(f"{'case':<12} {'1 core (range)':>15} {'by CPU':>6} {'1-core g/s':>10} "
          f"{f'{cores} over 1':>8} {f'yard {cores}/1':>8} {'product':>7} {'s/round':>7}  (split)")
for r in rows:
    if r["fraction_one_core"] is not None:
        print(f"{r['case']:<12} {r['fraction_one_core']:>5.0%} ({r['fraction_one_core_range'][0]:.0%}-"
              f"{r['fraction_one_core_range'][1]:.0%}) {r['fraction_one_core_cpu']:>6.0%} "
              f"{max(r['one_core_graphs_per_s']):>10.0f} {r['two_core_over_one_core']:>8.3f} "
              f"{r['yardstick_two_over_one']:>8.3f} {statistics.median(r['one_core_check']):>7.0%} "
              f"{statistics.median(r['one_core_wall_s']):>7.1f}  ({r['one_core_split']})")
for r in rows:
    if len(r["packtrain_by_split"]) > 1:
        print(f"{r['case']}: packtrain by micro-batch split (packs x accumulation), fp32 "
              f"{r['packtrain_by_split']}, bf16 {r.get('bf16_by_split', '-')}")
print("ratio: packtrain's best over the peer's best layout (best against best); "
      "ratio_range in the JSON: worst packtrain run / best peer .. best packtrain / worst peer run")
print("paired: each round's fp32 FLOP/s over the yardstick run right before and after it, "
      "both mean rates by the wall clock; median (range) over the rounds; by CPU: both sides "
      "by CPU time (reads through a shared machine's load)")
if any(r["fraction_one_core"] is not None for r in rows):
    print("1 core: one replica x 1 thread pinned to one CPU against 1 pinned yardstick process, "
          "as paired; 2 over 1: the 2-replica step's graphs/s over 2 x the one-core run's "
          "(same split); yard 2/1: the same for the yardstick; product: 1 core x 2 over 1 / "
          "yard 2/1 = the paired fraction of that split")
PY

# energy + forces: the same per-layout peer comparison, by the script that
# owns it (create_graph=True peer, periodic graphs), in this run's window
forces=${FORCES-emt}
if [ -n "$forces" ] && [ $have_torch = 1 ]; then
  echo
  echo "energy + forces (bench/bench_train_forces.sh, CASES=$forces, ROUNDS=$rounds):"
  ROUNDS=$rounds CASES=$forces bench/bench_train_forces.sh "$bin"
fi
